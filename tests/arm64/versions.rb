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
#   arm64/dwarf/ruby3.3, arm64/dwarf/ruby3.4
#                                 the table's 3.3 / 3.4 entry against DWARF:
#                                 build-arm64/dwarf-rubyX.Y/ruby (Debian's
#                                 rubyX.Y source cross-built unstripped by
#                                 tools/layout/dwarf-aarch64) running, every
#                                 field of `inspect --fields --layout dwarf`
#                                 equals `--layout table`'s (skipped with
#                                 the reason when that build is not made:
#                                 set-up makes it in the background,
#                                 tools/layout/dwarf-aarch64 ruby3.3 ruby3.4)
# A version whose root is not on the disk is skipped with the reason.
require_relative "../e2e/lib/chroot"
require "timeout"
include E2E

# The Debian packages whose DWARF build the table is checked against
DWARF_PACKAGES = %w[ruby3.3 ruby3.4].freeze

# inspect --fields: {name => value} and the names marked "(table)"
def fields_of(pid, layout)
  res = rbpeek("inspect", "--pid", pid, "--fields", "--layout", layout, timeout: 120)
  raise "rbpeek inspect --layout #{layout} #{res.describe} #{res.stderr[0, 300]}" unless res.status&.zero?

  fields = {}
  from_table = []
  res.stdout.dup.force_encoding("UTF-8").split(/^fields:\n/, 2).last.to_s.each_line do |l|
    name, value, mark = l.strip.split(" ", 3)
    fields[name] = value
    from_table << name if mark == "(table)"
  end
  [fields, from_table, res.stdout]
end

# arm64/dwarf/PKG: the table's entry for PKG's Ruby equals the DWARF of
# build-arm64/dwarf-PKG/ruby (tools/layout/dwarf-aarch64's build), field by
# field, as rbpeek itself reads both
def dwarf_check(pkg)
  name = "arm64/dwarf/#{pkg}"
  exe = File.join(ROOT, "build-arm64", "dwarf-#{pkg}", "ruby")
  unless File.executable?(exe)
    return skip(name, "no #{exe} (set-up's tools/layout/dwarf-aarch64 #{pkg} makes it on the host)")
  end

  IO.popen([exe, "--disable-gems", "-e", 'Thread.new { sleep }; $stdout.puts "ready"; $stdout.flush; sleep']) do |io|
    register_pid(io.pid)
    Timeout.timeout(60) { io.gets }
    dwarf, from_table, text = fields_of(io.pid, "dwarf")
    table, = fields_of(io.pid, "table")
    problems = []
    problems << "the layout did not come from DWARF: #{text[/^layout:.*$/]}" unless text =~ /^layout:\s+dwarf: /
    problems << "no fields listed" if dwarf.empty? || dwarf.keys != table.keys
    compared = dwarf.keys - from_table
    compared.each { |f| problems << "#{f}: DWARF #{dwarf[f]}, table #{table[f]}" if dwarf[f] != table[f] }
    if problems.empty?
      ok(name, "Ruby #{text[/\(Ruby ([\d.]+);/, 1]}: #{compared.size} fields equal (#{from_table.size} constants not in the DWARF: #{from_table.join(', ')})")
    else
      fail(name, problems.first(5).join("; "))
    end
  ensure
    kill_pid(io.pid)
  end
end

DWARF_PACKAGES.each { |pkg| test("arm64/dwarf/#{pkg}") { dwarf_check(pkg) } }

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
