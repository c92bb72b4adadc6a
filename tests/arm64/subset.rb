# frozen_string_literal: true
#
# tests/arm64/subset.rb - what proves the arm64 port, run INSIDE the arm64
# machine (tools/arm64-vm run env BUILD=build-arm64 ruby tests/arm64/subset.rb),
# on its Debian 12 Ruby 3.1 (aarch64), with the cross-built build-arm64/rbpeek
# and build-arm64-static/rbpeek.  tests/e2e/67-arm64.rb runs it from make
# test; tests/e2e/30-snapshot.rb runs in the machine too (the oracle targets,
# snapshot exact).  Prints the usual ok/FAIL/skip lines:
#   arm64/machine        uname -m is aarch64, the binaries are aarch64 ELF
#   arm64/record/threads record -f collapsed: the spinning thread's expected
#                        stack (tests/targets/threads.expect) is in the profile
#   arm64/core           a core the kernel dumped (SIGQUIT, core_pattern set
#                        for the test): snapshot --core gives the stacks the
#                        live process had
#   arm64/native         record --native on OpenSSL's digest extension:
#                        ossl_digest_update above OpenSSL::Digest#update and
#                        libcrypto above it (libdw's aarch64 CFI unwinding)
#   arm64/sampler-bpf    record --sampler=bpf: the same stack, no fallback
#   arm64/alloc          rbpeek alloc (uprobes, perf's x0-x2 registers; eBPF
#                        frame copies): Strings and Points counted 3 : 2,
#                        Arrays counted
#   arm64/trace-kernel   the tracer's kernel stream: arm64's syscall names
#                        (pipe2, write, read, a sleep call; never open/stat/
#                        poll/pipe, which arm64 does not have)
#   arm64/top            top -n 1 (text): the spinning thread's leaf first
#   arm64/heap           heap --json: String and Array counted
#   arm64/agent          the agent against the ingest stand-in
#                        (tests/e2e/fixtures/ingest_receiver.rb) on loopback:
#                        a busy Ruby's pprof arrives, named after it
#   arm64/static         the static binary alone: no interpreter, snapshot exact
require_relative "../e2e/lib/e2e"
require_relative "../e2e/lib/record"
require_relative "../e2e/lib/trace_check"
require_relative "../e2e/lib/agent"
require "fileutils"
require "timeout"
include E2E
include TraceCheck

STATIC = ENV.fetch("RBPEEK_STATIC", File.join(ROOT, "build-arm64-static", "rbpeek"))
WORK = File.join("/tmp", "rbpeek-arm64.#{$$}")
FileUtils.mkdir_p(WORK)
at_exit { FileUtils.rm_rf(WORK) }

def labels(frames)
  frames.map { |f| f.sub(/ \(.*\)\z/, "") }
end

# The expected stack (outermost first, labels) of the target's running thread.
def running_stack(name)
  spec = expectation(name)
  th = spec.find { |s| s.state == "running" } or return nil
  th.frames.reverse.map(&:label)
end

# Collapsed lines -> [[labels outermost first], count]
def collapsed(path)
  File.readlines(path, chomp: true).map do |l|
    stack, n = l.split(/ (?=\d+\z)/)
    [labels(stack.split(";")), n.to_i]
  end
end

def record_problem(pid, want, *flags)
  out = File.join(WORK, "rec.#{rand(1 << 30)}.collapsed")
  res = rbpeek("record", "--pid", pid, "-r", 49, "-d", 3, "-f", "collapsed", "-o", out, *flags, timeout: 60)
  return ["rbpeek #{res.describe} #{res.stderr[0, 300]}", res] unless res.status&.zero? && File.exist?(out)

  lines = collapsed(out)
  hit = lines.select { |st, _| st.each_cons(want.size).include?(want) }.sum { |_, n| n }
  total = lines.sum { |_, n| n }
  return ["no stack with #{want.join(';')} in #{lines.first(3).inspect}", res] if hit.zero?

  [nil, res, "#{hit}/#{total} samples in the expected stack"]
end

test("arm64/machine") do
  m = `uname -m`.strip
  bins = [RBPEEK, STATIC, File.join(ROOT, BUILD, "ext", "rbpeek", "trace_ext.so")]
  bad = bins.reject { |b| File.exist?(b) && `file -L #{b}` =~ /ARM aarch64/ }
  if m != "aarch64" then fail("arm64/machine", "uname -m says #{m}")
  elsif !bad.empty? then fail("arm64/machine", "not aarch64 binaries: #{bad.inspect}")
  else ok("arm64/machine", "#{`uname -r`.strip}, Ruby #{RUBY_VERSION} (#{RUBY_PLATFORM})")
  end
end

%w[threads].each do |name|
  want = running_stack(name)
  with_target(name) do |t|
    test("arm64/record/#{name}") do
      problem, _res, note = record_problem(t.pid, want)
      problem ? fail("arm64/record/#{name}", problem) : ok("arm64/record/#{name}", note)
    end
    next unless name == "threads"

    test("arm64/sampler-bpf") do
      problem, res, note = record_problem(t.pid, want, "--sampler=bpf")
      if problem then fail("arm64/sampler-bpf", problem)
      elsif res.stderr =~ /sampling with ptrace instead/ then fail("arm64/sampler-bpf", res.stderr.lines.first.strip)
      else ok("arm64/sampler-bpf", note)
      end
    end

    test("arm64/static") do
      interp = File.binread(STATIC, 4096).include?("ld-linux")
      snap = json_of(run([STATIC, "snapshot", "--pid", t.pid.to_s, "--json"], timeout: 60))
      diffs = Expect.snapshot_diffs(snap, expectation(name), mode: :live, pid: t.pid, ruby_version: RUBY_VERSION)
      if interp then fail("arm64/static", "#{STATIC} names a dynamic loader")
      elsif !diffs.empty? then fail("arm64/static", diffs.first(3).join("; "))
      else ok("arm64/static", "#{expectation(name).size} threads exact")
      end
    rescue RuntimeError => e
      fail("arm64/static", e.message)
    end

    # top -n 1 (text mode: no terminal): the spinning thread's leaf first
    test("arm64/top") do
      leaf = want.last
      res = rbpeek("top", "--pid", t.pid, "-n", 1, "--delay", 2, timeout: 60)
      rows = res.stdout.lines.filter_map do |l|
        m = /\A\s*(\d+\.\d)\s+(\d+\.\d)\s+\S+\s+\S+\s+(\S.*?)\s{2,}(\S+:\d+|-)\s*\z/.match(l.chomp) or next
        [m[1].to_f, m[3]]
      end
      if !res.status&.zero? then fail("arm64/top", "#{res.describe} #{res.stderr[0, 300]}")
      elsif res.stdout !~ /pid #{t.pid} \(ruby #{Regexp.escape(RUBY_VERSION)}\)/ then fail("arm64/top", "header: #{res.stdout.lines.first.inspect}")
      elsif rows.first&.last != leaf then fail("arm64/top", "#{leaf} not the first row: #{rows.first(3).inspect}")
      else ok("arm64/top", "#{leaf} first, #{rows.first.first}% self")
      end
    end

    test("arm64/heap") do
      h = json_of(rbpeek("heap", "--pid", t.pid, "--json", "--top", 0, timeout: 120))
      text = JSON.generate(h)
      %w[String Array].all? { |c| text.include?("\"#{c}\"") } ? ok("arm64/heap") : fail("arm64/heap", text[0, 300])
    rescue RuntimeError => e
      fail("arm64/heap", e.message)
    end
  end
end

# A kernel core: a Ruby that keeps SIGQUIT's default action (dump core).
test("arm64/core") do
  pattern = "/proc/sys/kernel/core_pattern"
  old = File.read(pattern)
  File.write(pattern, "#{WORK}/core.%p")
  prog = 'trap("QUIT", "SYSTEM_DEFAULT"); def inner; sleep; end; def outer; inner; end; ' \
         'Thread.new { Thread.current.name = "t2"; sleep }; $stdout.puts "READY"; $stdout.flush; outer'
  want = [%w[cfunc Kernel#sleep], %w[ruby Object#inner], %w[ruby Object#outer], %w[ruby <main>]]
  IO.popen(["sh", "-c", "ulimit -c unlimited; exec #{RUBY} -e '#{prog}'"]) do |io|
    register_pid(io.pid)
    Timeout.timeout(60) { io.gets }
    sleep 0.5
    live = json_of(rbpeek("snapshot", "--pid", io.pid, "--json"))
    Process.kill("QUIT", io.pid)
    Process.wait(io.pid)
    core = "#{WORK}/core.#{io.pid}"
    next fail("arm64/core", "no core at #{core} (#{$?.inspect})") unless File.exist?(core)

    snap = json_of(rbpeek("snapshot", "--core", core, "--json", timeout: 60))
    frames = ->(s) { s["threads"].map { |th| th["frames"].map { |f| [f["kind"], f["label"]] } } }
    main = snap["threads"].find { |th| th["main"] }
    got = main && main["frames"].map { |f| [f["kind"], f["label"]] }
    if got != want then fail("arm64/core", "main thread #{got.inspect}, expected #{want.inspect}")
    elsif frames.(snap) != frames.(live) then fail("arm64/core", "core #{frames.(snap).inspect} != live #{frames.(live).inspect}")
    else ok("arm64/core", "#{snap['threads'].size} threads as live, #{File.size(core) >> 20} MB core")
    end
  end
rescue RuntimeError, Timeout::Error => e
  fail("arm64/core", e.message)
ensure
  File.write(pattern, old) if old
end

test("arm64/native") do
  with_target_argv = [RUBY, File.join(TARGETS, "ext", "digest_loop.rb")]
  IO.popen(with_target_argv) do |io|
    register_pid(io.pid)
    Timeout.timeout(60) { io.gets }
    out = File.join(WORK, "digest.collapsed")
    res = rbpeek("record", "--pid", io.pid, "--native", "-r", 49, "-d", 3, "-f", "collapsed", "-o", out, timeout: 90)
    stacks = res.status&.zero? ? collapsed(out).map(&:first) : []
    named = stacks.select { |s| s.each_cons(2).include?(["OpenSSL::Digest#update", "ossl_digest_update"]) }
    deeper = named.select { |s| s.drop(s.index("ossl_digest_update") + 1).any? { |f| f =~ /\A(EVP_|SHA|sha|libcrypto)/ } }
    if stacks.empty? then fail("arm64/native", "#{res.describe} #{res.stderr[0, 300]}")
    elsif named.empty? then fail("arm64/native", "no ossl_digest_update above OpenSSL::Digest#update: #{stacks.first(2).inspect}")
    elsif deeper.empty? then fail("arm64/native", "no libcrypto frame above ossl_digest_update: #{named.first.inspect}")
    else ok("arm64/native", "#{named.size}/#{stacks.size} stacks name ossl_digest_update; e.g. #{deeper.first.last(3).join(';')}")
    end
  ensure
    kill_pid(io.pid)
  end
rescue RuntimeError, Timeout::Error => e
  fail("arm64/native", e.message)
end

test("arm64/alloc") do
  ready = File.join(WORK, "allocs.ready")
  pid = Process.spawn({ "RBPEEK_READY" => ready }, RUBY, File.join(TARGETS, "record", "allocs.rb"), "tight")
  register_pid(pid)
  Timeout.timeout(60) { sleep 0.1 until File.exist?(ready) }
  out = File.join(WORK, "alloc.collapsed")
  res = rbpeek("alloc", "--pid", pid, "-d", 3, "-f", "collapsed", "-o", out, timeout: 90)
  next fail("arm64/alloc", "#{res.describe} #{res.stderr[0, 300]}") unless res.status&.zero?

  # the class table: "  N  x.x%  Class" under "allocations share"
  rows = res.stdout.scan(/^\s+(\d+)\s+[\d.]+%\s+(String|Array|Point)\s*$/).to_h { |n, c| [c, n.to_i] }
  # Strings and Points (3 : 2) come only from the loop; Arrays came out
  # above their share in one of the runs in the machine (22% of the three
  # instead of 16.7%), so they are only required
  r = rows["Point"].to_i.positive? ? rows["String"].to_i.fdiv(rows["Point"]) : 0
  note = "String:Array:Point #{rows.values_at('String', 'Array', 'Point').join(':')}"
  if (1.35..1.65).cover?(r) && rows["Array"].to_i.positive? then ok("arm64/alloc", note)
  else fail("arm64/alloc", "#{note}, expected 3:1:2: #{res.stdout[0, 400]}")
  end
rescue RuntimeError, Timeout::Error => e
  fail("arm64/alloc", e.message)
ensure
  kill_pid(pid) if pid
end

# The agent against the ingest stand-in of the x86-64 tests
# (tests/e2e/fixtures/ingest_receiver.rb) on the machine's loopback: a busy
# Ruby's profile arrives, named after it, its method in the profile's
# strings (the body is gzip'd pprof; its string table holds the labels).
test("arm64/agent") do
  require "zlib"
  dir = File.join(WORK, "agent")
  rpid, rport = AgentE2E.start_receiver(File.join(dir, "recv"))
  script = AgentE2E.busy_script(dir, "arm64")
  mark = "RBPEEK_ARM64_AGENT_#{$$}"
  bpid = Process.spawn({ mark => "1", "PYROSCOPE_APPLICATION_NAME" => "arm64busy" }, RUBY, script,
                       out: File.join(dir, "busy.out"), err: File.join(dir, "busy.out"))
  register_pid(bpid)
  AgentE2E.wait_for("the busy script") { File.read(File.join(dir, "busy.out")).include?("ready") }
  err = File.join(dir, "agent.err")
  apid, = AgentE2E.start_agent(["--server", "http://127.0.0.1:#{rport}", "--interval", "2", "--require-env", mark], err)
  mine = nil
  AgentE2E.wait_for("a payload of arm64busy", 180) do
    mine = AgentE2E.payloads(File.join(dir, "recv")).find do |pl|
      pl[:service] == "arm64busy" && Zlib.gunzip(File.binread(pl[:file])).include?("Object#busy_arm64")
    end
  end
  st = AgentE2E.stop_agent(apid)
  apid = nil
  if st.exitstatus != 0 then fail("arm64/agent", "the agent exited #{st.inspect}: #{File.read(err)[-300..]}")
  else ok("arm64/agent", "#{mine[:params]['spyName']} payload of #{File.size(mine[:file])} bytes naming Object#busy_arm64")
  end
rescue RuntimeError, Timeout::Error => e
  fail("arm64/agent", "#{e.message}#{err && File.exist?(err) ? ": #{File.read(err)[-300..]}" : ''}")
ensure
  AgentE2E.stop_agent(apid) if apid
  kill_pid(bpid) if bpid
  AgentE2E.stop_receiver(rpid) if rpid
end

test("arm64/trace-kernel") do
  out = File.join(WORK, "kernel.pftrace")
  r = run([RUBY, "-I#{TraceCheck::EXT}", TraceCheck::FIXTURE, "kernel", out, "perfetto"], timeout: 120)
  next fail("arm64/trace-kernel", "program #{r.describe} #{r.stderr[0, 300]}") unless r.status&.zero?
  next fail("arm64/trace-kernel", "kernel streams off: #{r.stderr[0, 300]}") if r.stderr =~ /kernel streams: "/

  pr = problems("kernel", out, RUBY_VERSION)
  names = TraceReader.read(out).values.flat_map { |t| t.events.map { |e| e[2] } }.uniq
  x86 = names & %w[open stat lstat fstat poll select pipe access]
  pr << "x86-64 syscall names #{x86.inspect}" unless x86.empty?
  pr << "numbered syscalls #{names.grep(/\Asyscall \d/).first(3)}" if names.grep(/\Asyscall \d/).any?
  pr.empty? ? ok("arm64/trace-kernel", "syscalls include #{(names & %w[pipe2 write read ppoll clock_nanosleep futex openat]).join(' ')}") : fail("arm64/trace-kernel", pr.first(3).join("; "))
end

finish
