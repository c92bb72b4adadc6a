# frozen_string_literal: true
#
# 86-static-binary.rb - the fully static rbpeek (make static,
# build-static/rbpeek) copied ALONE into a container that holds nothing but
# a Ruby: the Debian 13 chroot of tools/setup-rubies.sh (Ruby 3.3), which
# has no libdw or libelf.  Tests:
#   static/not-dynamic              ldd: "not a dynamic executable"; no
#                                   PT_INTERP, no PT_DYNAMIC
#   static/chroot-has-no-elfutils   the chroot has no libdw/libelf (else the
#                                   tests below would prove less)
#   static/ruby3.3/chroot/snapshot  rbpeek run by `chroot DIR` (its own
#                                   mount namespace with /proc mounted, the
#                                   host's PIDs) on a chroot'ed Ruby: the
#                                   expected stacks of tests/targets/threads
#   static/ruby3.3/chroot/record    the same, record -d 1 -f collapsed
#   static/ruby3.3/pidns/snapshot   the Ruby as PID 1 of its own PID
#                                   namespace (unshare -pf, proc mounted,
#                                   chroot); rbpeek run in there (nsenter)
#                                   by PID 1: the same stacks, its thread ids
#   static/ruby3.3/pidns/record     the same, record
#   static/ruby3.3/pidns/record-command
#                                   `unshare -pf --mount-proc` + chroot, and in
#                                   there `rbpeek record -- ruby3.3 -e ...`:
#                                   the program's methods in the profile
#   static/ruby3.3/chroot/native    snapshot --native in the chroot: the
#                                   linked-in libdw unwinds the parked threads
#                                   into libc and names the functions
# make build-tests builds build-static/rbpeek; this file makes it when
# missing.
# e2e-timeout: 1200
require_relative "lib/chroot"
include E2E

T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
STATIC = File.join(ROOT, "build-static", "rbpeek")
XY = "3.3"
PRE = "static/ruby#{XY}"
NAMES = ["static/not-dynamic", "static/chroot-has-no-elfutils",
         *%w[chroot/snapshot chroot/record pidns/snapshot pidns/record pidns/record-command chroot/native]
           .map { |n| "#{PRE}/#{n}" }].freeze

def elapsed
  (Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0).round(1)
end

# The static binary is built with plain flags whatever BUILD is: a sanitizer
# or valgrind run of the suite would only build and test the same again.
if BUILD != "build" || VALGRIND
  NAMES.each { |n| skip(n, "runs with the plain build only (make test), not BUILD=#{BUILD}#{VALGRIND ? ' under valgrind' : ''}") }
  exit 0
end

unless File.executable?(STATIC)
  # a whole build from scratch: minutes on a busy machine
  make = run(["make", "-s", "--no-print-directory", "static"], timeout: 900)
  unless make.status&.zero? && File.executable?(STATIC)
    NAMES.each { |n| fail(n, "make static #{make.describe}") }
    finish
  end
end

test("static/not-dynamic") do
  ldd = run(["ldd", STATIC])
  heads = run(["readelf", "-lW", STATIC])
  problems = []
  problems << "ldd says #{(ldd.stdout + ldd.stderr).strip.inspect}" unless (ldd.stdout + ldd.stderr).include?("not a dynamic executable")
  problems << "readelf -l #{heads.describe}" unless heads.status&.zero?
  %w[INTERP DYNAMIC].each do |seg|
    problems << "has a #{seg} program header" if heads.stdout.match?(/^\s+#{seg}\s/)
  end
  # the size README.md and docs/install.md give, within a quarter
  mb = File.size(STATIC) / 1e6
  %w[README.md docs/install.md].each do |doc|
    said = File.read(File.join(ROOT, doc))[/about ([\d.]+) MB/, 1].to_f
    problems << "#{doc} says about #{said} MB, the binary is #{mb.round(1)} MB" unless (said - mb).abs <= mb / 4
  end
  report("static/not-dynamic", problems, "#{File.size(STATIC)} bytes")
end

if !root?
  NAMES.drop(1).each { |n| skip(n, "needs root (chroot, unshare, nsenter)") }
  finish
end
missing_tools = %w[unshare nsenter].reject { |c| system("command -v #{c} >/dev/null 2>&1") }
unless missing_tools.empty?
  NAMES.drop(1).each { |n| skip(n, "needs #{missing_tools.join(', ')} (util-linux)") }
  finish
end
rubies, missing = Chroots.prepare
ruby = rubies.find { |r| r.xy == XY }
unless ruby
  NAMES.drop(1).each { |n| skip(n, "no Ruby #{XY} chroot: #{missing[XY] || 'not ready'}") }
  finish
end

test("static/chroot-has-no-elfutils") do
  libs = Dir.glob(File.join(ruby.dir, "{usr/,}lib{,64}/**/lib{dw,elf}{-*,}.so*"))
  report("static/chroot-has-no-elfutils", libs.map { |l| "the chroot has #{l.delete_prefix(ruby.dir)}" },
         "no libdw, no libelf in #{ruby.dir}")
end

# The binary alone, in the chroot; and a directory for record's raw file.
INNER_DIR = File.join(Chroots::INNER, ".static")
INNER_BIN = File.join(INNER_DIR, "rbpeek")
FileUtils.mkdir_p(ruby.host_path(File.join(INNER_DIR, "xdg")))
FileUtils.cp(STATIC, ruby.host_path(INNER_BIN))
CACHE = [ruby.host_path(File.join(INNER_DIR, "xdg")), File.join(INNER_DIR, "xdg")].freeze

# rbpeek run by chroot, in a mount namespace of its own with proc mounted in
# the chroot (the PID namespace is the host's: PIDs are the host's).
CHROOTED = ["unshare", "--mount", "--", "/bin/sh", "-ec",
            "mount --make-rprivate /; mount -t proc proc \"$0/proc\"; exec chroot \"$0\" \"$@\"",
            ruby.dir, INNER_BIN].freeze

# rbpeek run in the target's namespaces and root (like docker exec).
def inside(target)
  ["nsenter", "--target", target.pid.to_s, "--pid", "--mount", "--root", "--wd", "--", INNER_BIN]
end

spec, file = Chroots.spec("threads", ruby)

# The snapshot of cmd: the expected stacks and thread ids.
def snapshot_check(target, spec, ruby, cmd, pid:, ids:)
  settle do
    res = run([*cmd, "snapshot", "--pid", pid.to_s, "--json"])
    next ["rbpeek #{res.describe}"] if res.timed_out || res.signal

    snap = json_of(res)
    Expect.snapshot_diffs(snap, spec, mode: :live, pid: pid, ruby_version: ruby.version) +
      Chroots.tid_problems(target, snap, pid: pid, ids: ids)
  rescue RuntimeError => e
    [e.message]
  end
end

Chroots.with_target(ruby, "threads", how: :chroot) do |t|
  test("#{PRE}/chroot/snapshot") do
    problems, tries, first = snapshot_check(t, spec, ruby, CHROOTED, pid: t.pid, ids: nil)
    report("#{PRE}/chroot/snapshot", problems, "PID #{t.pid}, #{Chroots.note(spec, file, tries, first)}")
  end
  test("#{PRE}/chroot/record") do
    problems, note = Chroots.record_problems(t, spec, cmd: CHROOTED, cache: CACHE)
    report("#{PRE}/chroot/record", problems, note)
  end
  test("#{PRE}/chroot/native") do
    res = run([*CHROOTED, "snapshot", "--pid", t.pid.to_s, "--native", "--json"])
    snap = json_of(res)
    frames = snap["threads"].flat_map { |th| th["frames"] }
    native = frames.select { |f| f["kind"] == "native" }
    named = native.map { |f| f["label"] }.reject { |l| l.include?("+0x") }.uniq
    problems = []
    problems << "no native frames in #{frames.size} frames" if native.empty?
    problems << "no native frame is named: #{native.first(3).map { |f| f['label'] }.inspect}" if named.empty?
    report("#{PRE}/chroot/native", problems, "#{native.size} native frames, named: #{named.first(3).join(', ')}")
  end
end

Chroots.with_target(ruby, "threads", how: :container) do |t|
  test("#{PRE}/pidns/snapshot") do
    problems, tries, first = snapshot_check(t, spec, ruby, inside(t), pid: t.inner_pid, ids: Chroots.ns_tids(t))
    problems << "the target is PID #{t.inner_pid} in its namespace, expected 1" if t.inner_pid != 1
    report("#{PRE}/pidns/snapshot", problems, "PID #{t.inner_pid} inside, #{Chroots.note(spec, file, tries, first)}")
  end
  test("#{PRE}/pidns/record") do
    problems, note = Chroots.record_problems(t, spec, cmd: inside(t), pid: t.inner_pid, cache: CACHE)
    report("#{PRE}/pidns/record", problems, note)
  end
end

test("#{PRE}/pidns/record-command") do
  prog = "def static_outer; static_inner; end; def static_inner; x = 0; 3_000_000.times { x += 1 }; end; " \
         "t = Time.now; static_outer while Time.now - t < 1.5"
  res = run(["unshare", "--pid", "--fork", "--mount-proc=#{ruby.dir}/proc", "--kill-child", "--",
             "chroot", ruby.dir, "/usr/bin/env", "XDG_CACHE_HOME=#{CACHE[1]}",
             INNER_BIN, "record", "-f", "collapsed", "-o", "-", "--silent", "--", ruby.bin, "-e", prog],
            timeout: 30)
  out = res.stdout.dup.force_encoding("UTF-8")
  problems = []
  problems << "rbpeek #{res.describe}" unless res.status&.zero?
  hits = out.lines.select { |l| l.include?("Object#static_outer") && l.include?("Object#static_inner") }
  problems << "no stack with Object#static_outer;Object#static_inner: #{out[0, 300].inspect}" if hits.empty?
  report("#{PRE}/pidns/record-command", problems, "#{hits.sum { |l| l.split.last.to_i }} samples in static_inner")
end

FileUtils.rm_rf(ruby.host_path(INNER_DIR))
puts "# 86-static-binary: #{elapsed} s" if ENV["RBPEEK_TEST_TIMES"]
finish
