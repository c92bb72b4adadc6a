# frozen_string_literal: true
#
# tests/arm64/versions.rb - Debian's arm64 Ruby 3.3 and 3.4 (stripped, no VM
# symbol exported), run INSIDE the arm64 machine
# (tools/arm64-vm run env BUILD=build-arm64 ruby tests/arm64/versions.rb):
# their roots (tools/arm64-vm rubies: trixie's ruby3.3, sid plus
# experimental's ruby3.4) are mounted at /var/cache/rbpeek/chroots there,
# where tools/setup-rubies.sh --list finds them.  For each ready Ruby X.Y,
# with the cross-built build-arm64/rbpeek outside the root (the target runs
# chroot'ed, as on x86-64's tests/e2e/80-versions.rb):
#   arm64/rubyX.Y/snapshot/NAME   snapshot --json of every oracle target
#                                 exact against its expectation
#                                 (NAME@X.Y.expect where it differs)
#   arm64/rubyX.Y/record/threads  record -f collapsed holds every thread's
#                                 expected stack, and next to nothing else
# A version whose root is not on the disk is skipped with the reason.
require_relative "../e2e/lib/chroot"
include E2E

VERSIONS = %w[3.3 3.4].freeze

def names(xy)
  TARGET_NAMES.map { |n| "arm64/ruby#{xy}/snapshot/#{n}" } + ["arm64/ruby#{xy}/record/threads"]
end

rubies, = Chroots.prepare
VERSIONS.each do |xy|
  next if rubies.any? { |r| r.xy == xy }

  names(xy).each { |n| skip(n, "no ruby#{xy} root in /var/cache/rbpeek/chroots here (tools/arm64-vm rubies makes their disk; start mounts it)") }
end

rubies.select { |r| VERSIONS.include?(r.xy) }.each do |ruby|
  pre = "arm64/#{ruby.prefix}"
  TARGET_NAMES.each do |name|
    spec, file = Chroots.spec(name, ruby)
    Chroots.with_target(ruby, name) do |t|
      test("#{pre}/snapshot/#{name}") do
        problems, tries, first = Chroots.snapshot_problems(t, spec, ruby)
        note = "Ruby #{ruby.version}: #{Chroots.note(spec, file, tries, first)}"
        problems.empty? ? ok("#{pre}/snapshot/#{name}", note) : fail("#{pre}/snapshot/#{name}", problems.join("\n"))
      end
      next unless name == "threads"

      test("#{pre}/record/threads") do
        problems, note = Chroots.record_problems(t, spec)
        problems.empty? ? ok("#{pre}/record/threads", note) : fail("#{pre}/record/threads", problems.join("\n"))
      end
    end
  rescue RuntimeError => e
    fail("#{pre}/snapshot/#{name}", e.message)
  end
end
finish
