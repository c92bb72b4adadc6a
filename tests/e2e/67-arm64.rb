# frozen_string_literal: true
# e2e-timeout: 2400 (the arm64 builds, a TCG boot and the subset on a loaded host)
# e2e-needs: arm64 (the arm64 machine's image, its Rubies and the arm64 DWARF Rubies: tools/setup-tests.sh)
#
# 67-arm64.rb - rbpeek on a real arm64 kernel: the cross-built
# build-arm64/rbpeek and build-arm64-static/rbpeek (make ARCH=arm64, made
# here when missing) in the Debian 12 arm64 machine of tools/arm64-vm
# (qemu-system-aarch64, TCG), on its Ruby 3.1, 3.3 and 3.4.  Inside the machine:
#   arm64/snapshot/..., arm64/snapshot-nonblocking/..., ...
#                         tests/e2e/30-snapshot.rb (every oracle target,
#                         snapshot exact against its .expect)
#   arm64/unit/test_*    unit tests on the arm64 kernel (see UNITS)
#   arm64/machine, arm64/record/threads, arm64/core, arm64/native, arm64/top, arm64/agent,
#   arm64/sampler-bpf, arm64/alloc, arm64/trace-kernel, arm64/heap,
#   arm64/static          tests/arm64/subset.rb (see there)
#   arm64/ruby3.3/..., arm64/ruby3.4/...
#                         tests/arm64/versions.rb: Debian's arm64 Ruby 3.3
#                         and 3.4 (stripped), snapshot exact on every oracle
#                         target, record on threads (skipped with the reason
#                         when tools/arm64-vm rubies has not made their disk)
#   arm64/dwarf/ruby3.3, arm64/dwarf/ruby3.4
#                         the 3.3 / 3.4 table entry equal to the DWARF of
#                         Debian's source cross-built unstripped, field by
#                         field (skipped unless set-up's
#                         tools/layout/dwarf-aarch64 ruby3.3 ruby3.4 made it)
#   arm64/vm              the machine booted (boot time in the note) and
#                         was stopped again
# Skipped with the reason when the machine's image is not made (it is
# cached: `tools/arm64-vm image`, tools/install-deps.sh --arm64 first), when
# not root, or in a sanitizer/valgrind run.  A machine this file did not
# start (tools/arm64-vm start by hand) is used and left running.
require_relative "lib/e2e"
include E2E

VM = File.join(ROOT, "tools", "arm64-vm")
CACHE = ENV.fetch("RBPEEK_ARM64_CACHE", "/var/cache/rbpeek/arm64")
# unit tests on the arm64 kernel: the code decoders (test_arch), uprobes
# and perf's argument registers x0-x2 (test_uprobe).  test_pause and
# test_framecap are not run there: under TCG on one emulated CPU,
# test_pause's churn case (threads created as fast as they can) gives up
# after its 64 rounds, and test_framecap's quarter-pick count falls outside
# its bounds (its every-call case passed there; test_pause hit the unit
# timeout, so its other cases are unconfirmed there).  The subset below
# covers pausing and the eBPF frame copy end to end.
UNITS = %w[test_arch test_uprobe].freeze
SUBSET = %w[machine record/threads sampler-bpf static top heap core native alloc agent trace-kernel].map { |n| "arm64/#{n}" }
# tests/arm64/versions.rb: Debian's arm64 Ruby 3.3 and 3.4 (stripped), in
# roots on the machine's second disk (tools/arm64-vm rubies)
TARGETS_RB = Dir.children(File.join(ROOT, "tests", "targets")).grep(/\A[a-z0-9_]+\.rb\z/).map { |f| f.delete_suffix(".rb") }.sort
VERSIONS = (%w[3.3 3.4].flat_map { |xy| TARGETS_RB.map { |n| "arm64/ruby#{xy}/snapshot/#{n}" } + ["arm64/ruby#{xy}/record/threads"] } +
            %w[ruby3.3 ruby3.4].map { |p| "arm64/dwarf/#{p}" }).freeze
NAMES = ["arm64/vm", "arm64/build", *UNITS.map { |u| "arm64/unit/#{u}" }, *SUBSET, *VERSIONS].freeze
T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def elapsed
  (Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0).round
end

why = if BUILD != "build" || VALGRIND then "runs with the plain build only (make test), not BUILD=#{BUILD}#{VALGRIND ? ' under valgrind' : ''}"
      elsif !root? then "needs root (the machine's image and qemu's 9p share)"
      elsif !File.exist?(File.join(CACHE, "bookworm", "READY"))
        "no arm64 machine image in #{CACHE} (make it once: tools/install-deps.sh --arm64 && tools/arm64-vm image)"
      elsif !system("command -v qemu-system-aarch64 aarch64-linux-gnu-gcc >/dev/null 2>&1")
        "qemu-system-aarch64 or aarch64-linux-gnu-gcc missing (tools/install-deps.sh --arm64)"
      end
if why
  NAMES.each { |n| skip(n, why) }
  exit 0
end

# The arm64 builds (quick when up to date).
test("arm64/build") do
  units = UNITS.map { |u| "build-arm64/tests/#{u}" }
  # BUILD on the command line: tests/run exports BUILD=build
  mk = %w[make -s --no-print-directory ARCH=arm64 BUILD=build-arm64]
  bad = [mk, %w[make -s --no-print-directory static ARCH=arm64 STATIC_BUILD=build-arm64-static], mk + units].filter_map do |argv|
    r = run(argv, timeout: 1200)
    "#{argv.join(' ')}: #{r.describe} #{r.stderr[-400..] || r.stderr}" unless r.status&.zero?
  end
  if bad.empty? then ok("arm64/build", "make ARCH=arm64 and make static ARCH=arm64 (#{elapsed} s)")
  else
    fail("arm64/build", bad.join("; "))
    (NAMES - ["arm64/build"]).each { |n| skip(n, "no arm64 build") }
    finish
  end
end

started = false
boot = nil
test("arm64/vm") do
  st = run([VM, "status"], timeout: 30)
  unless st.status&.zero?
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    r = run([VM, "start"], timeout: 1200)
    unless r.status&.zero?
      fail("arm64/vm", "tools/arm64-vm start #{r.describe}: #{r.stderr[-600..] || r.stderr}")
      SUBSET.each { |n| skip(n, "the arm64 machine did not start") }
      finish
    end
    started = true
    boot = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t).round
  end
end

# One command in the machine; its ok/FAIL/skip lines are ours, named arm64/...
def in_vm(argv, timeout:)
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  r = run([VM, "run", "env", "BUILD=build-arm64", *argv], timeout: timeout)
  seen = []
  r.stdout.each_line do |l|
    next unless (m = l.match(/\A(ok|FAIL|skip) (\S+)(.*)\z/m))

    name = m[2].delete_suffix(":")
    name = "arm64/#{name}" unless name.start_with?("arm64/")
    rest = m[3].strip.sub(/\A:\s*/, "")
    seen << name
    case m[1]
    when "ok" then ok(name, rest.empty? ? nil : rest)
    when "FAIL" then fail(name, rest)
    else skip(name, rest)
    end
  end
  [r, seen, (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t).round]
end

units, units_seen, = in_vm(["tests/run", *UNITS], timeout: 600)
(UNITS.map { |u| "arm64/unit/#{u}" } - units_seen).each { |n| fail(n, "no result in the machine: #{units.describe}: #{units.stdout[-400..]}") }
snap, snap_seen, snap_s = in_vm(%w[tests/run 30-snapshot], timeout: 1200)
fail("arm64/snapshot", "tests/run 30-snapshot in the machine: #{snap.describe}: #{snap.stdout[-600..] || snap.stdout}") if snap_seen.empty?
sub, sub_seen, sub_s = in_vm(%w[ruby tests/arm64/subset.rb], timeout: 900)
(SUBSET - sub_seen).each { |n| fail(n, "no result from tests/arm64/subset.rb in the machine: #{sub.describe}: #{(sub.stdout + sub.stderr)[-600..]}") }
ver, ver_seen, ver_s = in_vm(%w[ruby tests/arm64/versions.rb], timeout: 900)
(VERSIONS - ver_seen).each { |n| fail(n, "no result from tests/arm64/versions.rb in the machine: #{ver.describe}: #{(ver.stdout + ver.stderr)[-600..]}") }

if started
  r = run([VM, "stop"], timeout: 60)
  note = "booted in #{boot} s; 30-snapshot #{snap_s} s, subset #{sub_s} s, Ruby 3.3/3.4 #{ver_s} s in the machine"
  r.status&.zero? ? ok("arm64/vm", note) : fail("arm64/vm", "tools/arm64-vm stop #{r.describe}")
else
  ok("arm64/vm", "a machine already running; 30-snapshot #{snap_s} s, subset #{sub_s} s, Ruby 3.3/3.4 #{ver_s} s")
end
finish
