# frozen_string_literal: true
#
# 90-trace.rb - the in-process tracer (RbPeek::Trace, ext/rbpeek) and
# `rbpeek trace`: programs with known call trees (fixtures/trace/
# scenarios.rb) are traced, the saved files read back by our own reader
# (lib/trace_reader.rb) and compared with the exact expected trees; the
# Perfetto files are also decoded by protoc against a schema subset
# (tests/trace/perfetto_min.proto).  On the host's Ruby (build/ext, built by
# make) and on the 2.7, 3.3 and 3.4 chroots (the extension built inside each
# with extconf.rb + make), plus `gem build` + `gem install` on the host.
require "json"
require "tmpdir"
require "open3"
require_relative "lib/e2e"
require_relative "lib/chroot"
require_relative "lib/trace_reader"
include E2E

FIXTURE = File.join(ROOT, "tests", "e2e", "fixtures", "trace", "scenarios.rb")
PROTO_DIR = File.join(ROOT, "tests", "trace")
EXT = File.join(ROOT, BUILD, "ext")
SAVE = /\ARbPeek::Trace\./ # the save call itself is open at the end

# scenario => { "thread name or fiber" => expected tree }
EXPECT = {
  "tree" => { "main" => "T.run{T.order{T.price*2}*3,T.audit}" },
  "block" => { "main" => "T.run{T.order{T.price*2}*3,T.audit}" },
  "exceptions" => { "main" => "T.a{T.b{T.c},T.after_rescue},T.d{T.e},T.after_throw" },
  "fibers" => { "main" => "T.main_x", :fiber => "T.fa,T.fb" },
  "threads" => { "main" => "", "worker" => "T.tw*2" },
  "reset" => { "main" => "T.w2" },
  "trap" => { "main" => "T.w1,T.in_trap" },
}.freeze

# Problems with the file of scenario s (empty: as expected).
def problems(s, path, ruby_version)
  tracks = TraceReader.read(path)
  threads = tracks.values.select(&:tid)
  main = TraceReader.thread_track(tracks, "main") or return ["no main thread track in #{tracks.values.map(&:name)}"]
  p = []
  tree = ->(t) { TraceReader.tree_string(t, drop: SAVE) }
  (EXPECT[s] || {}).each do |who, want|
    t = case who
        when :fiber then tracks.values.find { |x| x.name.to_s.start_with?("fiber ") && x.parent == main.uuid }
        else TraceReader.thread_track(tracks, who)
        end
    next p << "no track #{who.inspect} (tracks: #{tracks.values.map(&:name).inspect})" unless t

    got = tree.call(t)
    p << "#{who}: #{got.inspect}, expected #{want.inspect}" if got != want
  end
  case s
  when "overflow"
    top = TraceReader.prune(TraceReader.tree(main), SAVE)
    lost = main.events.find { |e| e[1] == :instant && e[2] =~ /lost/ }
    p << "no 'events lost' instant" unless lost
    p << "lost count #{lost[3].inspect}" if lost && !(lost[3]["lost"].to_i > 1000)
    if top.size != 1 || top[0].name != "T.outer" || top[0].children.map(&:name).uniq != ["T.leaf"] ||
       !(20..32).cover?(top[0].children.size)
      p << "tree #{TraceReader.compact(top).inspect}, expected T.outer{T.leaf*20..32} (its call made before the ring wrapped)"
    end
  when "gc"
    gc = tracks.values.find { |t| t.name == "GC" && !t.tid }
    p << "no GC track" unless gc
    p << "GC track #{TraceReader.tree_string(gc).inspect}" if gc && !TraceReader.tree_string(gc).start_with?("GC marking,GC sweeping")
    g = TraceReader.tree(main).find { |n| n.name == "T.gc" }
    want = "T.gc{GC.start{GC mark}}"
    p << "main: #{g.to_s.inspect}, expected #{want}" if g.to_s != want
  when "gvl"
    workers = threads.reject { |t| t.name == "main" }
    p << "#{workers.size} worker threads" if workers.size != 2
    workers.each { |w| p << "worker #{w.tid}: #{tree.call(w)}" if tree.call(w) != "T.sleepy*3" }
    gvl = tracks.values.select { |t| t.name.to_s.start_with?("GVL") }
    if Gem::Version.new(ruby_version) >= Gem::Version.new("3.2")
      p << "#{gvl.size} GVL tracks, expected 3" if gvl.size != 3
      names = gvl.flat_map { |t| TraceReader.tree(t).map(&:name) }.uniq.sort
      p << "GVL states #{names.inspect}" unless (%w[released\ GVL running waiting\ for\ GVL] - names).empty? || names.include?("running") && names.include?("released GVL")
    elsif !gvl.empty?
      p << "GVL tracks on Ruby #{ruby_version}"
    end
  end
  threads.each { |t| TraceReader.tree(t) } # balanced, time order
  p.concat(kernel_problems(s, tracks, main)) if s == "kernel"
  p
rescue RuntimeError => e
  [e.message]
end

# The kernel streams (as root): the syscalls of T.io nested under it, and
# the main thread's scheduler states.  Without the privilege (KERNEL_OFF):
# neither, and the Ruby side as usual.
KERNEL_OFF = {}
def kernel_problems(_s, tracks, main)
  io = TraceReader.tree(main).find { |n| n.name == "T.io" }
  return ["no T.io slice"] unless io

  sys = io.children.map(&:name)
  sched = tracks.values.find { |t| t.name.to_s.start_with?("sched (thread #{main.tid})") }
  states = sched ? TraceReader.tree(sched).map(&:name).uniq : []
  if KERNEL_OFF[:off]
    p = []
    p << "syscalls #{sys.inspect} without the privilege" unless sys.empty?
    p << "a sched track without the privilege" if sched
    return p
  end
  p = []
  missing = %w[pipe2 write read] - sys
  p << "T.io's syscalls #{sys.inspect} lack #{missing.inspect}" unless missing.empty?
  p << "no sleep syscall (ppoll/nanosleep/clock_nanosleep/poll/select) in #{sys.inspect}" if (sys & %w[ppoll poll nanosleep clock_nanosleep select pselect6 futex]).empty?
  p << "no sched track for the main thread" unless sched
  p << "sched states #{states.inspect} lack running/sleeping" if sched && !(states.any? { |x| x.start_with?("running on CPU") } && states.include?("sleeping"))
  p
end

def protoc_problem(path)
  out, err, st = Open3.capture3("protoc", "--decode=rbpeek_min.Trace", "-I#{PROTO_DIR}", "perfetto_min.proto",
                                stdin_data: File.binread(path), binmode: true)
  return "protoc: #{err[0, 300]}" unless st.success?
  return "protoc decoded no track events" unless out.include?("track_event {")

  nil
rescue Errno::ENOENT
  nil
end

SCENARIOS = %w[tree block exceptions fibers threads overflow reset trap gc gvl kernel].freeze

# Run every scenario with argv_for.(scenario, out, format); report as prefix/...
def run_scenarios(prefix, ruby_version, outdir, host_out: nil)
  SCENARIOS.each do |s|
    name = "#{prefix}/#{s}"
    next skip(name, "kernel streams need root (CAP_PERFMON) here") if s == "kernel" && !E2E.root?

    test(name) do
      out = File.join(outdir, "#{s}.pftrace")
      File.delete(host_out.(out)) if File.exist?(host_out.(out))
      r = yield(s, out, "perfetto")
      next fail(name, "program #{r.describe}") unless r.status&.zero?
      if s == "kernel" && !KERNEL_OFF[:off] && (why = r.stderr[/kernel streams: "(.*)"/, 1])
        next skip(name, "kernel streams off here: #{why}")
      end

      file = host_out.(out)
      pr = problems(s, file, ruby_version)
      pc = protoc_problem(file)
      pr << pc if pc
      pr.empty? ? ok(name) : fail(name, pr.first(3).join("; "))
    end
  end
  test("#{prefix}/json") do
    out = File.join(outdir, "tree.json")
    r = yield("tree", out, "json")
    next fail("#{prefix}/json", "program #{r.describe}") unless r.status&.zero?

    pr = problems("tree", host_out.(out), ruby_version)
    pr.empty? ? ok("#{prefix}/json") : fail("#{prefix}/json", pr.first(3).join("; "))
  end
end

host_names = SCENARIOS.map { |s| "trace/#{s}" } +
             %w[trace/json trace/cli trace/cli-json trace/cli-errors trace/kernel-unprivileged trace/gem trace/bounded trace/save-speed]
unless File.exist?(File.join(EXT, "rbpeek", "trace_ext.so"))
  host_names.each { |n| skip(n, "#{EXT}/rbpeek/trace_ext.so not built (make needs ruby-dev)") }
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
  r = rbpeek("trace", "-o", out, "--no-c-calls", "--", RUBY, "-e", prog, timeout: 30)
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
             timeout: 30)
  main = r.status&.zero? && File.exist?(out) && TraceReader.thread_track(TraceReader.read(out), "main")
  got = main && TraceReader.tree_string(main)
  want = "Object#x{Array#map{Integer#+}}".sub("{Integer#+}", "")
  if !main then fail("trace/cli-json", r.describe)
  elsif got.include?("Object#x{Array#map}") then ok("trace/cli-json")
  else fail("trace/cli-json", "tree #{got.inspect}, expected it to contain #{want}")
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
    r = rbpeek(*argv, timeout: 20)
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

  dir = File.join(work, "nobody")
  FileUtils.mkdir_p(dir)
  File.chmod(0o1777, dir)
  out = File.join(dir, "kernel.pftrace")
  r = E2E.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all", RUBY, "-I#{EXT}", FIXTURE, "kernel", out], timeout: 30)
  KERNEL_OFF[:off] = true
  pr = r.status&.zero? ? problems("kernel", out, RUBY_VERSION) : ["program #{r.describe}"]
  KERNEL_OFF.delete(:off)
  warned = r.stderr =~ /no syscalls or scheduler states.*CAP_PERFMON/
  pr << "no warning naming CAP_PERFMON: #{r.stderr[0, 300].inspect}" unless warned
  pr.empty? ? ok("trace/kernel-unprivileged", r.stderr.lines.grep(/rbpeek/).first.to_s.strip[0, 160]) : fail("trace/kernel-unprivileged", pr.join("; "))
end

# gem build + gem install into a temporary GEM_HOME, then a traced program.
test("trace/gem") do
  next skip("trace/gem", "gem not found") unless system("gem --version >/dev/null 2>&1")

  dir = File.join(work, "gem")
  FileUtils.mkdir_p(dir)
  b = E2E.run(["gem", "build", File.join(ROOT, "rbpeek.gemspec"), "--output", File.join(dir, "rbpeek.gem")], timeout: 60)
  next fail("trace/gem", "gem build #{b.describe}") unless b.status&.zero?

  home = File.join(dir, "home")
  i = E2E.run(["gem", "install", "--local", "--no-document", "--install-dir", home, File.join(dir, "rbpeek.gem")],
              timeout: 120, chdir: dir)
  next fail("trace/gem", "gem install #{i.describe} #{i.stdout[-300..]}") unless i.status&.zero?

  out = File.join(dir, "tree.pftrace")
  r = E2E.run([RUBY, FIXTURE, "tree", out], env: { "GEM_HOME" => home, "GEM_PATH" => home, "RUBYLIB" => nil }, timeout: 30)
  next fail("trace/gem", "traced program #{r.describe}") unless r.status&.zero?

  pr = problems("tree", out, RUBY_VERSION)
  pr.empty? ? ok("trace/gem", "built, installed and loaded from GEM_HOME") : fail("trace/gem", pr.join("; "))
end

# Memory stays bounded: threads come and go (only the last 16 finished
# threads' rings are kept), and a second round of the same work adds no RSS.
test("trace/bounded") do
  prog = <<~RUBY
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

# --- the other Rubies: the extension built inside each chroot --------------
rubies, missing = Chroots.prepare
missing.each { |xy, why| (SCENARIOS + ["json"]).each { |s| skip("trace-#{xy}/#{s}", why) } }
rubies.each do |ruby|
  prefix = "trace-#{ruby.xy}"
  inner = "/tmp/rbpeek-trace.#{$$}"
  host = ruby.host_path(inner)
  at_exit { FileUtils.rm_rf(host) }
  unless File.exist?(ruby.host_path("DEV_READY"))
    setup = E2E.run([Chroots::SETUP, "--dev", ruby.xy], timeout: 300)
    unless setup.status&.zero?
      (SCENARIOS + ["json"]).each { |s| skip("#{prefix}/#{s}", "no ruby#{ruby.xy}-dev/gcc in the chroot: #{setup.describe}") }
      next
    end
  end
  FileUtils.mkdir_p(File.join(host, "src"))
  FileUtils.mkdir_p(File.join(host, "ext"))
  FileUtils.mkdir_p(File.join(host, "build", "rbpeek"))
  FileUtils.cp_r(File.join(ROOT, "ext", "rbpeek"), File.join(host, "ext"))
  FileUtils.cp_r(File.join(ROOT, "src", "util"), File.join(host, "src"))
  FileUtils.cp_r(File.join(ROOT, "lib"), host)
  FileUtils.mkdir_p(File.join(host, "tools"))
  FileUtils.cp(File.join(ROOT, "tools", "gen-syscalls.sh"), File.join(host, "tools"))
  FileUtils.cp(FIXTURE, host)
  b = E2E.run(["chroot", ruby.dir, "/bin/sh", "-c",
               "cd #{inner}/build/rbpeek && #{ruby.bin} #{inner}/ext/rbpeek/extconf.rb >/dev/null && make -s V=0"],
              timeout: 180)
  unless b.status&.zero?
    (SCENARIOS + ["json"]).each { |s| fail("#{prefix}/#{s}", "building the extension in the chroot: #{b.describe} #{b.stdout[-400..]}") }
    next
  end
  run_scenarios(prefix, ruby.version, inner, host_out: ->(x) { ruby.host_path(x) }) do |s, out, fmt|
    E2E.run(["chroot", ruby.dir, ruby.bin, "-I#{inner}/lib", "-I#{inner}/build", "#{inner}/scenarios.rb", s, out, fmt],
            timeout: 30)
  end
end

finish
