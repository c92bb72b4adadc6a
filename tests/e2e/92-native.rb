# frozen_string_literal: true
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 92-native.rb - native frames (--native, issue 9): each thread's native
# stack unwound, symbolized and merged into its Ruby stack.
#
# A tiny C extension (tests/targets/ext/native_test.c), compiled here with
# the target Ruby's own gcc and headers, spins in ext_outer -> ext_inner
# under a known Ruby stack that itself passes through C (NativeTest.call_back
# yields from ext_yielder).  The merged stack must be exact: the C
# functions above the C method that called them, no interpreter frame
# (vm_exec_core, rb_yield, ...) anywhere.  Run on:
#   - the host's Ruby 3.1 (libruby with .dynsym only);
#   - a Ruby with full symbols (.symtab, DWARF), linked statically: the
#     "yjit" build of tools/build-debian-ruby.sh (Debian's ruby3.3 source),
#     when present, the extension built against its headers;
#   - the 3.3 chroot (stripped libruby; rb_vm_exec not exported), with the
#     extension built inside the chroot.
# Plus: a real extension from Debian (OpenSSL digest) shows its function
# names; record --native writes native frames to every format and through
# the raw file; --native with --nonblocking is a usage error; with
# --subprocesses, forked workers get native frames from their own unwinder.
require_relative "lib/e2e"
require_relative "lib/record"
require "fileutils"
require "open3"
include E2E

EXT_SRC = File.join(TARGETS, "ext", "native_test.c")
MAIN = File.join(TARGETS, "ext", "native_main.rb")
BUILD_RUBY = File.join(ROOT, "tools", "build-debian-ruby.sh")
static_dir = root? ? run([BUILD_RUBY, "--list"], timeout: 10).stdout.to_s[/^yjit (\S+)$/, 1] : nil
STATIC = static_dir && File.join(static_dir, "prefix", "bin", "ruby")
CHROOT = "/var/cache/rbpeek/chroots/3.3"
NAMES = %w[native/usage native/host native/host-record native/host-formats native/late-load
           native/static native/chroot-3.3 native/openssl native/vdso
           native/subprocesses].freeze
exit 0 if skip_without_rbpeek(NAMES)

# Innermost first, as snapshot --json lists them.
WANT = [
  %w[ext_inner native], %w[ext_outer native], %w[NativeTest.spin cfunc], %w[Work.deep ruby],
  ["block in Work.run", "ruby"], %w[ext_yielder native], %w[ext_call_back native],
  %w[NativeTest.call_back cfunc], %w[Work.run ruby], %w[<main> ruby]
].freeze
# ext_outer's own loop, between two calls of ext_inner: rare, and as exact.
WANT_OUTER = WANT.drop(1).freeze
INTERPRETER = /\A(vm_|rb_vm_|rb_yield|rb_funcall|rb_call|invoke_|libruby|ruby3|rb_ensure|rb_protect)/.freeze

# gcc ... -shared for ruby (argv prefix to run it: [] or ["chroot", DIR]).
def build_ext(prefix, src, out, ruby: "ruby")
  hdr = run([*prefix, ruby, "-e", 'print RbConfig::CONFIG["rubyhdrdir"], " ", RbConfig::CONFIG["rubyarchhdrdir"]'])
  raise "ruby in #{prefix.inspect}: #{hdr.describe}" unless hdr.status&.zero?

  incs = hdr.stdout.split.flat_map { |d| ["-I", d] }
  b = run([*prefix, "gcc", "-O2", "-g", "-fPIC", "-shared", *incs, "-o", out, src], timeout: 60)
  raise "gcc: #{b.describe} #{b.stderr[0, 400]}" unless b.status&.zero?
end

# Start argv, wait for READY; yields the pid; kills the target after.
def with_target(argv)
  Open3.popen2(*argv) do |_in, out, thr|
    register_pid(thr.pid)
    line = Timeout.timeout(20) { out.gets }
    raise "no READY from #{argv.inspect}: #{line.inspect}" unless line&.start_with?("READY")

    yield thr.pid
  ensure
    kill_pid(thr.pid) if thr
  end
end

def main_frames(pid)
  snap = json_of(rbpeek("snapshot", "--pid", pid, "--native", "--json"))
  snap["threads"].find { |t| t["main"] }["frames"].map { |f| [f["label"], f["kind"]] }
end

# Five snapshots: each exact, and ext_inner seen on top in most.  The target
# says READY from inside IO#flush: under load its main thread can still be
# there ([IO#flush, <main>]) when the first snapshot comes, so wait (bounded)
# until it has reached NativeTest.spin before judging.
def exact_problem(pid)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
  until main_frames(pid).any? { |label, _| label == "NativeTest.spin" }
    return "the main thread never reached NativeTest.spin in 30 s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    sleep 0.05
  end
  seen = Array.new(5) { main_frames(pid) }
  bad = seen.reject { |s| s == WANT || s == WANT_OUTER }
  return "merged stack not exact: #{bad.first.inspect}" unless bad.empty?
  return "ext_inner never on top: #{seen.inspect}" if seen.count(WANT) < 3

  state = File.read("/proc/#{pid}/stat")[/\) (\S)/, 1]
  return "target left stopped (state #{state})" if %w[t T].include?(state)

  nil
end

def check_exact(name, argv)
  with_target(argv) do |pid|
    (p = exact_problem(pid)) ? fail(name, p) : ok(name)
  end
end

test("native/usage") do
  a = rbpeek("snapshot", "--pid", $$, "--native", "--nonblocking")
  b = rbpeek("record", "--pid", $$, "--native", "--nonblocking", "-d", "1")
  c = rbpeek("snapshot", "--core", "/nonexistent", "--native")
  bad = [a, b, c].find { |r| r.status != 2 || !r.stderr.include?("--native") || error_format_problem(r) }
  bad ? fail("native/usage", bad.describe + " " + bad.stderr) : ok("native/usage")
end

dir = Record.tmp("native", mkdir: true)
host_so = File.join(dir, "native_test.so")
built = begin
  build_ext([], EXT_SRC, host_so)
  nil
rescue StandardError => e
  e.message
end

if built
  %w[native/host native/host-record native/host-formats native/late-load native/static].each { |n| skip(n, "cannot build the extension: #{built}") }
else
  test("native/host") { check_exact("native/host", [RUBY, MAIN, host_so]) }

  with_target([RUBY, MAIN, host_so]) do |pid|
    out = Record.tmp("native.collapsed")
    res = Record.rec("record", "--pid", pid, "--native", "-d", "1", "-f", "collapsed", "-o", out)
    raw = Record.raw_path_of(res)
    test("native/host-record") do
      lines = res.status&.zero? ? File.readlines(out, chomp: true) : []
      stacks = lines.map { |l| l.sub(/ \d+\z/, "").split(";").map { |f| f.sub(/ \(.*\)\z/, "") } }
      spin = stacks.select { |s| s.include?("NativeTest.spin") }
      tails = spin.map { |s| s[s.index("NativeTest.spin") + 1..] }.uniq
      if lines.empty?
        fail("native/host-record", res.describe + " " + res.stderr)
      elsif (f = stacks.flatten.grep(INTERPRETER).first)
        fail("native/host-record", "interpreter frame #{f.inspect} in #{lines.first}")
      elsif spin.empty? || !(tails - [%w[ext_outer ext_inner], %w[ext_outer]]).empty?
        fail("native/host-record", "frames above NativeTest.spin: #{tails.inspect}")
      elsif !res.stderr.match?(/native: \d+ stacks unwound/)
        fail("native/host-record", "no native statistics line: #{res.stderr}")
      else
        ok("native/host-record", "#{spin.size} stacks")
      end
    end
    test("native/host-formats") do
      chrome = Record.tmp("native.json")
      rep = Record.rec("report", "-i", raw.to_s, "-f", "chrome", "-o", chrome)
      again = Record.tmp("again.collapsed")
      rep2 = Record.rec("report", "-i", raw.to_s, "-f", "collapsed", "-o", again)
      if !raw || !rep.status&.zero? || !rep2.status&.zero?
        fail("native/host-formats", "report: #{rep.describe} #{rep.stderr} #{rep2.stderr}")
      elsif File.read(again) != File.read(out)
        fail("native/host-formats", "collapsed from the raw file differs from the recording's")
      elsif !File.read(chrome).match?(/"name":"ext_inner","cat":"native"/)
        fail("native/host-formats", "no native event in the chrome trace")
      else
        ok("native/host-formats")
      end
    end
  end

  # The extension is mapped after rbpeek attached: found by re-reading the maps.
  test("native/late-load") do
    with_target([RUBY, MAIN, host_so, "late"]) do |pid|
      out = Record.tmp("late.collapsed")
      res = Record.rec("record", "--pid", pid, "--native", "-d", "2.5", "-f", "collapsed", "-o", out)
      text = res.status&.zero? ? File.read(out) : ""
      if text.empty?
        fail("native/late-load", res.describe + " " + res.stderr)
      elsif !text.match?(/NativeTest\.spin[^;]*;ext_outer[^;]*;ext_inner/)
        fail("native/late-load", "no ext_outer;ext_inner above NativeTest.spin: #{text[0, 600]}")
      else
        ok("native/late-load")
      end
    end
  end

  if STATIC && File.executable?(STATIC)
    test("native/static") do
      static_so = File.join(dir, "static", "native_test.so") # the name gives Init_native_test
      FileUtils.mkdir_p(File.dirname(static_so))
      build_ext([], EXT_SRC, static_so, ruby: STATIC)
      check_exact("native/static", [STATIC, "--disable-gems", MAIN, static_so])
    end
  else
    skip("native/static", "no Ruby with full symbols (run tools/build-debian-ruby.sh yjit)")
  end
end

def chroot_dev_present?
  File.executable?("#{CHROOT}/usr/bin/gcc") && !Dir.glob("#{CHROOT}/usr/include/ruby-3.3*/ruby.h").empty?
end

# gcc and ruby3.3-dev in the chroot, installed before the tests by
# tools/setup-tests.sh (tools/setup-rubies.sh --dev), never here.
def chroot_dev_ready?
  chroot_dev_present?
end

# The 3.3 chroot: a stripped libruby; the extension built with its own gcc.
test("native/chroot-3.3") do
  if !root?
    skip("native/chroot-3.3", "needs root (chroot)")
  elsif !File.exist?("#{CHROOT}/READY")
    skip("native/chroot-3.3", "no Ruby 3.3 chroot (run tools/setup-rubies.sh)")
  elsif !chroot_dev_ready?
    skip("native/chroot-3.3", "no gcc and ruby3.3-dev in the chroot (tools/setup-tests.sh finish " \
                              "runs tools/setup-rubies.sh --dev)")
  else
    inner = "/tmp/rbpeek-native.#{$$}"
    host = File.join(CHROOT, inner)
    begin
      FileUtils.mkdir_p(host)
      FileUtils.cp([EXT_SRC, MAIN], host)
      build_ext(["chroot", CHROOT], "#{inner}/native_test.c", "#{inner}/native_test.so")
      check_exact("native/chroot-3.3", ["chroot", CHROOT, "ruby", "#{inner}/native_main.rb", "#{inner}/native_test.so"])
    ensure
      FileUtils.rm_rf(host)
    end
  end
end

# A real extension: OpenSSL's digest, its C function named from .dynsym.
test("native/openssl") do
  with_target([RUBY, File.join(TARGETS, "ext", "digest_loop.rb")]) do |pid|
    out = Record.tmp("digest.collapsed")
    res = Record.rec("record", "--pid", pid, "--native", "-d", "1", "-f", "collapsed", "-o", out)
    lines = res.status&.zero? ? File.readlines(out, chomp: true) : []
    stacks = lines.map { |l| l.sub(/ \d+\z/, "").split(";").map { |f| f.sub(/ \(.*\)\z/, "") } }
    named = stacks.select { |s| s.each_cons(2).include?(["OpenSSL::Digest#update", "ossl_digest_update"]) }
    if lines.empty?
      fail("native/openssl", res.describe + " " + res.stderr)
    elsif (f = stacks.flatten.grep(INTERPRETER).first)
      fail("native/openssl", "interpreter frame #{f.inspect}")
    elsif named.empty?
      fail("native/openssl", "no ossl_digest_update above OpenSSL::Digest#update: #{lines.first(3).inspect}")
    elsif named.none? { |s| s.last(s.size - s.index("ossl_digest_update") - 1).grep(/\A(EVP_|SHA256|libcrypto)/).any? }
      fail("native/openssl", "no libcrypto frame above ossl_digest_update: #{named.first.inspect}")
    else
      ok("native/openssl", "#{named.size}/#{stacks.size} stacks name ossl_digest_update")
    end
  end
end
# Forked workers, each with its own unwinder: both show OpenSSL's frames
# under their own "process PID" root.
test("native/subprocesses") do
  Open3.popen2(RUBY, File.join(TARGETS, "ext", "digest_workers.rb")) do |_in, out, thr|
    register_pid(thr.pid)
    line = Timeout.timeout(20) { out.gets }.to_s
    workers = line.split.drop(1).map(&:to_i)
    next fail("native/subprocesses", "no READY from digest_workers.rb: #{line.inspect}") unless workers.size == 2

    workers.each { |w| register_pid(w) }
    res = Record.rec("record", "--pid", thr.pid, "--subprocesses", "--native", "-d", "2", "-f", "collapsed",
                     "-o", (o = Record.tmp("workers.collapsed")))
    lines = res.status&.zero? ? File.readlines(o, chomp: true) : []
    stacks = lines.map { |l| l.sub(/ \d+\z/, "").split(";").map { |f| f.sub(/ \(.*\)\z/, "") } }
    native = lambda do |w|
      stacks.select { |s| s.first.start_with?("process #{w}:") }.select do |s|
        i = s.index("ossl_digest_update")
        i && s[i - 1] == "OpenSSL::Digest#update" && s.drop(i + 1).grep(/\A(EVP_|SHA256|libcrypto)/).any?
      end
    end
    missing = workers.select { |w| native.(w).empty? }
    # the closing statistics count every process's unwinding, not the root's alone
    worker_samples = lines.select { |l| workers.any? { |w| l.start_with?("process #{w}:") } }.sum { |l| l[/ (\d+)\z/, 1].to_i }
    unwound = res.stderr[/native: (\d+) stacks unwound, .* \(all processes\)/, 1]
    if lines.empty? then fail("native/subprocesses", res.describe + " " + res.stderr)
    elsif unwound.nil? || unwound.to_i < worker_samples
      fail("native/subprocesses", "#{unwound.inspect} stacks unwound in all, fewer than the workers' #{worker_samples} samples: #{res.stderr.lines.grep(/native/).inspect}")
    elsif (f = stacks.flatten.grep(INTERPRETER).first) then fail("native/subprocesses", "interpreter frame #{f.inspect}")
    elsif !missing.empty?
      fail("native/subprocesses", "no OpenSSL native frames under worker(s) #{missing.join(', ')}: #{lines.first(4).inspect}")
    else
      ok("native/subprocesses", workers.map { |w| "worker #{w}: #{native.(w).size} stacks" }.join(", ") +
                                "; #{unwound} unwound, the workers' samples #{worker_samples}")
    end
  ensure
    workers&.each { |w| Process.kill(:KILL, w) rescue nil }
    Process.kill(:KILL, thr.pid) rescue nil
  end
end
# A thread inside the vDSO: unwound through it, under glibc's clock_gettime.
test("native/vdso") do
  with_target([RUBY, File.join(TARGETS, "ext", "clock_loop.rb")]) do |pid|
    out = Record.tmp("clock.collapsed")
    res = Record.rec("record", "--pid", pid, "--native", "-d", "1", "-f", "collapsed", "-o", out)
    lines = res.status&.zero? ? File.readlines(out, chomp: true) : []
    stacks = lines.map { |l| l.sub(/ \d+\z/, "").split(";").map { |f| f.sub(/ \(.*\)\z/, "") } }
    vdso = stacks.select { |s| s.last == "[vdso]" }
    if lines.empty?
      fail("native/vdso", res.describe + " " + res.stderr)
    elsif vdso.empty?
      fail("native/vdso", "no stack ends in [vdso]: #{lines.first(3).inspect}")
    elsif (bad = vdso.find { |s| s.first(4) != ["<main>", "Kernel#loop", "block in <main>", "Process.clock_gettime"] })
      fail("native/vdso", "the Ruby frames under [vdso] are wrong: #{bad.inspect}")
    else
      ok("native/vdso", "#{vdso.size} of #{stacks.size} stacks")
    end
  end
end
finish
