# frozen_string_literal: true
#
# 61-trace.rb - the in-process tracer (RbPeek::Trace, ext/rbpeek) and
# `rbpeek trace` on the host's Ruby (build/ext, built by make): programs
# with known call trees (fixtures/trace/scenarios.rb) are traced, the saved
# files read back by our own reader (lib/trace_reader.rb) and compared with
# the exact expected trees (lib/trace_check.rb); the Perfetto files are also
# decoded by protoc against a schema subset (tests/trace/perfetto_min.proto).
# Plus the CLI, the kernel streams without privilege, bounded memory and
# the save speed (the gem: 84-gem.rb).  63-trace-versions.rb runs the same
# scenarios on the other Rubies.
require "json"
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/trace_check"
include E2E
include TraceCheck

host_names = SCENARIOS.map { |s| "trace/#{s}" } +
             %w[trace/json trace/cli trace/cli-json trace/singleton-names trace/cli-devnull trace/cli-errors trace/kernel-unprivileged trace/api trace/gc-safety trace/bounded trace/save-speed]
unless File.exist?(File.join(EXT, "rbpeek", "trace_ext.so"))
  host_names.each { |n| skip(n, "#{EXT}/rbpeek/trace_ext.so not built (make needs ruby-dev; a sanitizer run uses the plain build's, which make test builds first)") }
  exit 0
end

work = File.join(OUT, "trace.#{$$}")
FileUtils.mkdir_p(work)
at_exit { FileUtils.rm_rf(work) }

run_scenarios("trace", RUBY_VERSION, work, host_out: ->(x) { x }) do |s, out, fmt|
  E2E.run([RUBY, "-I#{EXT}", FIXTURE, s, out, fmt], timeout: 30)
end

# rbpeek trace: the program's exit status passes through; the tree is there.
test("trace/cli") do
  out = File.join(work, "cli.pftrace")
  prog = "module T; def self.x; y; end; def self.y; end; end; T.x; exit 7"
  r = rbpeek("trace", "-o", out, "--no-c-calls", "--", RUBY, "-e", prog, timeout: 30, env: { "RBPEEK_TRACE_LIB" => EXT })
  if r.status != 7 then fail("trace/cli", "exit #{r.status}, expected the program's 7: #{r.describe}")
  elsif !File.exist?(out) then fail("trace/cli", "no #{out}")
  else
    main = TraceReader.thread_track(TraceReader.read(out), "main")
    # the frames open when auto.rb started tracing (require) end later
    got = main && TraceReader.tree_string(main, drop: /\A(?!T\.)/) # syscalls too
    got == "T.x{T.y}" ? ok("trace/cli") : fail("trace/cli", "tree #{got.inspect}, expected T.x{T.y}")
  end
end

test("trace/cli-json") do
  out = File.join(work, "cli.json")
  r = rbpeek("trace", "-o", out, "-f", "json", "--buffer-size", "1000", "--", RUBY, "-e", "def x; [1].map { 2 }; end; x",
             timeout: 30, env: { "RBPEEK_TRACE_LIB" => EXT })
  main = r.status&.zero? && File.exist?(out) && TraceReader.thread_track(TraceReader.read(out), "main")
  got = main && TraceReader.tree_string(main)
  want = "Object#x{Array#map{Integer#+}}".sub("{Integer#+}", "")
  if !main then fail("trace/cli-json", r.describe)
  elsif got.include?("Object#x{Array#map}") then ok("trace/cli-json")
  else fail("trace/cli-json", "tree #{got.inspect}, expected it to contain #{want}")
  end
end

# Singleton methods of objects that are not classes are named after the
# object as Ruby names it: ENV.fetch, main.helper, a top-level constant's
# name, else the object's default to_s (not "#<Class:0x...>#fetch").
test("trace/singleton-names") do
  out = File.join(work, "names.json")
  prog = "Conf = Object.new; def Conf.load = 1; o = Object.new; def o.bar = 2; def self.helper = 3; " \
         "module M; def self.m = 4; end; def run(o) = [ENV.fetch('HOME'), Conf.load, o.bar, helper, M.m]; run(o)"
  r = rbpeek("trace", "-o", out, "-f", "json", "--", RUBY, "-e", prog, timeout: 30, env: { "RBPEEK_TRACE_LIB" => EXT })
  names = r.status&.zero? && File.exist?(out) ? JSON.parse(File.read(out))["traceEvents"].filter_map { |e| e["name"] }.uniq : []
  want = ["ENV.fetch", "Conf.load", "main.helper", "M.m"]
  missing = want - names
  anon = names.grep(/\.bar\z/)
  if !r.status&.zero? then fail("trace/singleton-names", r.describe)
  elsif !missing.empty? || anon != anon.grep(/\A#<Object:0x\h+>\.bar\z/) || anon.empty?
    fail("trace/singleton-names", "missing #{missing.inspect}, o.bar as #{anon.inspect}; names: #{names.grep(/fetch|load|bar|helper|\bm\z/).inspect}")
  elsif (bad = names.grep(/#<Class:0x/)).any? then fail("trace/singleton-names", "unnamed singleton classes: #{bad.inspect}")
  else ok("trace/singleton-names", (want + anon).join(", "))
  end
end

# -o /dev/null: written in place, never removed or replaced.
test("trace/cli-devnull") do
  r = rbpeek("trace", "-o", "/dev/null", "--", RUBY, "-e", "def x; end; x", timeout: 30, env: { "RBPEEK_TRACE_LIB" => EXT })
  st = File.stat("/dev/null")
  if !st.chardev? then fail("trace/cli-devnull", "/dev/null is no longer a character device!")
  elsif r.status != 0 then fail("trace/cli-devnull", r.describe)
  else ok("trace/cli-devnull")
  end
end

test("trace/cli-errors") do
  cases = {
    %w[trace -- ruby -e 1] => 2, # no -o
    %w[trace -o x.pftrace] => 2, # no program
    %w[trace -o x.pftrace -f svg -- ruby -e 1] => 2,
    %w[trace -o x.pftrace --buffer-size 3 -- ruby -e 1] => 2,
    ["trace", "-o", File.join(work, "x.pftrace"), "--", "/nonexistent/ruby"] => 2,
    ["trace", "-o", File.join(work, "y.pftrace"), "--", "/bin/true"] => 10, # not Ruby: nothing written
    ["trace", "-o", "/nonexistent/dir/z.pftrace", "--", RUBY, "-e", "1"] => 10,
  }
  bad = cases.filter_map do |argv, want|
    r = rbpeek(*argv, timeout: 20, env: { "RBPEEK_TRACE_LIB" => EXT })
    "#{argv.join(' ')}: exit #{r.status}, expected #{want}" if r.status != want || !r.stderr.include?("rbpeek: error:")
  end
  bad.empty? ? ok("trace/cli-errors", "#{cases.size} cases") : fail("trace/cli-errors", bad.first(3).join("; "))
end

# Without CAP_PERFMON/root: a warning naming what is missing, the rest as usual.
test("trace/kernel-unprivileged") do
  paranoid = File.read("/proc/sys/kernel/perf_event_paranoid").to_i rescue 2
  next skip("trace/kernel-unprivileged", "needs root to drop privileges") unless E2E.root?
  next skip("trace/kernel-unprivileged", "perf_event_paranoid is #{paranoid}: anyone may trace") if paranoid < 0
  next skip("trace/kernel-unprivileged", "setpriv not found") unless system("command -v setpriv >/dev/null")

  # nobody may not read the checkout nor the test's work directory below it
  # (a clone in /root is 0700): a copy of the extension and script outside
  dir = Dir.mktmpdir("rbpeek-trace-nobody-")
  File.chmod(0o1777, dir)
  FileUtils.cp_r(EXT, File.join(dir, "ext"))
  FileUtils.cp(FIXTURE, dir)
  FileUtils.chmod_R("a+rX", dir)
  out = File.join(dir, "kernel.pftrace")
  r = E2E.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all", RUBY, "-I#{File.join(dir, 'ext')}", File.join(dir, File.basename(FIXTURE)),
               "kernel", out], timeout: 30)
  KERNEL_OFF[:off] = true
  pr = r.status&.zero? ? problems("kernel", out, RUBY_VERSION) : ["program #{r.describe}"]
  KERNEL_OFF.delete(:off)
  warned = r.stderr =~ /no syscalls or scheduler states.*CAP_PERFMON/
  pr << "no warning naming CAP_PERFMON: #{r.stderr[0, 300].inspect}" unless warned
  FileUtils.rm_rf(dir)
  pr.empty? ? ok("trace/kernel-unprivileged", r.stderr.lines.grep(/rbpeek/).first.to_s.strip[0, 160]) : fail("trace/kernel-unprivileged", pr.join("; "))
end

# The API's errors, and tracing going on after a failed save; a forked
# child records its own (now single) thread into its own file.
test("trace/api") do
  prog = <<~'RUBY'
    require "rbpeek/trace"
    module T; def self.w1; end; def self.w2; end; def self.w3; end; end
    out = ARGV[0]
    errs = []
    errs << "save before start" unless (RbPeek::Trace.save(out) rescue :raised) == :raised
    RbPeek::Trace.start(c_calls: false, kernel: false)
    errs << "second start" unless (RbPeek::Trace.start rescue :raised) == :raised
    errs << "bad path" unless (RbPeek::Trace.save("/nonexistent/dir/x.pftrace") rescue $!.class) == Errno::ENOENT
    errs << "bad format" unless (RbPeek::Trace.save(out, format: :svg) rescue $!.class) == ArgumentError
    RbPeek::Trace.stop
    errs << "bad buffer_size" unless (RbPeek::Trace.start(buffer_size: 3) rescue $!.class) == ArgumentError
    RbPeek::Trace.start(c_calls: false, kernel: false)
    RbPeek::Trace.reset
    T.w1
    pid = fork do
      T.w2
      RbPeek::Trace.save("#{out}.child")
      exit!(0)
    end
    Process.wait(pid)
    T.w3
    RbPeek::Trace.save(out)
    puts(errs.empty? ? "#{pid}" : "errors: #{errs.join(', ')}")
  RUBY
  out = File.join(work, "api.pftrace")
  r = E2E.run([RUBY, "-I#{EXT}", "-e", prog, out], timeout: 30)
  next fail("trace/api", r.describe) unless r.status&.zero?
  next fail("trace/api", r.stdout.strip) if r.stdout.start_with?("errors")

  parent = TraceReader.thread_track(TraceReader.read(out), "main")
  child = TraceReader.thread_track(TraceReader.read("#{out}.child"), "main")
  got = [parent, child].map { |t| t && TraceReader.tree_string(t, drop: SAVE) }
  want = ["T.w1,T.w3", "T.w2"]
  if got != want then fail("trace/api", "parent/child trees #{got.inspect}, expected #{want.inspect}")
  elsif child.tid != r.stdout.to_i then fail("trace/api", "child's thread track has tid #{child.tid}, child pid #{r.stdout.strip}")
  else ok("trace/api", "errors raised; fork: parent #{got[0]}, child #{got[1]}")
  end
end

# GC safety: threads that come and go, fibers (Enumerator#next), anonymous
# classes, GC.start and GC.compact while saving over and over; the Thread
# objects and classes a save names must still be alive (and unmoved).
test("trace/gc-safety") do
  prog = <<~'RUBY'
    require "rbpeek/trace"
    def f(n) = n.zero? ? 0 : f(n - 1)
    RbPeek::Trace.start(buffer_size: 4096)
    stop = false
    workers = Array.new(3) { Thread.new { until stop; Thread.new { f(50); Class.new.new }.join; f(20); end } }
    fibs = Thread.new { until stop; e = Enumerator.new { |y| 3.times { |i| y << f(i) } }; e.next; e.next; end }
    30.times do |i|
      RbPeek::Trace.reset if i.even?
      RbPeek::Trace.save(ARGV[0], format: i % 3 == 0 ? :json : :perfetto)
      GC.start if i % 10 == 0
      GC.compact if i % 7 == 0 && GC.respond_to?(:compact)
    end
    stop = true
    (workers + [fibs]).each(&:join)
    GC.stress = true # every allocation collects: dead threads' objects go at once
    RbPeek::Trace.save(ARGV[0])
    GC.stress = false
    puts RbPeek::Trace.stats[:threads]
  RUBY
  out = File.join(work, "gc-safety.pftrace")
  r = E2E.run([RUBY, "-I#{EXT}", "-e", prog, out], timeout: 60)
  tracks = r.status&.zero? && TraceReader.read(out)
  if !tracks then fail("trace/gc-safety", r.describe)
  else
    threads = tracks.values.select(&:tid)
    threads.each { |t| TraceReader.tree(t) }
    fibers = tracks.values.count { |t| t.name.to_s.start_with?("fiber ") }
    ok("trace/gc-safety", "#{threads.size} thread tracks, #{fibers} fiber tracks, balanced")
  end
end

# Memory stays bounded: threads come and go (only the last 16 finished
# threads' rings are kept), and a second round of the same work adds no RSS.
test("trace/bounded") do
  prog = <<~'RUBY'
    require "rbpeek/trace"
    def f; end
    def rss = File.read("/proc/self/status")[/VmRSS:\s+(\d+)/, 1].to_i
    RbPeek::Trace.start(buffer_size: 4096, kernel: false)
    round = -> { 100.times { Thread.new { 5000.times { f } }.join }; 200_000.times { f } }
    round.call
    a = rss
    round.call
    GC.start
    puts [RbPeek::Trace.stats[:threads], a, rss].join(" ")
  RUBY
  r = E2E.run([RUBY, "-I#{EXT}", "-e", prog], timeout: 60)
  threads, a, b = r.stdout.split.map(&:to_i)
  if !r.status&.zero? then fail("trace/bounded", r.describe)
  elsif threads > 17 then fail("trace/bounded", "#{threads} rings kept after 200 finished threads (at most 1 + 16)")
  elsif b - a > 4096 then fail("trace/bounded", "RSS grew from #{a} to #{b} kB in a second identical round")
  else ok("trace/bounded", "#{threads} rings, RSS #{a} -> #{b} kB")
  end
end

# Saving 1,000,000 events: reported, not asserted (timing is noisy here).
test("trace/save-speed") do
  out = File.join(work, "big.pftrace")
  prog = <<~RUBY
    require "rbpeek/trace"
    def f; end
    RbPeek::Trace.start(c_calls: false)
    RbPeek::Trace.reset
    500_000.times { f }
    n = RbPeek::Trace.stats[:events]
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    RbPeek::Trace.save(ARGV[0])
    puts [n, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t].join(" ")
  RUBY
  r = E2E.run([RUBY, "-I#{EXT}", "-e", prog, out], timeout: 60)
  n, secs = r.stdout.split
  main = r.status&.zero? && TraceReader.thread_track(TraceReader.read(out), "main")
  kids = main && TraceReader.tree(main).count { |x| x.name == "Object#f" }
  if !main then fail("trace/save-speed", r.describe)
  elsif kids != 500_000 then fail("trace/save-speed", "#{kids} Object#f slices, expected 500000")
  else ok("trace/save-speed", "#{n} events saved in #{format('%.2f', secs.to_f)} s (#{File.size(out) >> 20} MB)")
  end
end

finish
