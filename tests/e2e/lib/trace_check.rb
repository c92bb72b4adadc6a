# frozen_string_literal: true
#
# trace_check.rb - the tracer's end-to-end expectations, shared by
# 61-trace.rb (host Ruby) and 63-trace-versions.rb (the chroots): the
# scenarios of fixtures/trace/scenarios.rb, the exact call tree each must
# give, and a runner that reports one result line per scenario.
require "open3"
require_relative "e2e"
require_relative "trace_reader"

module TraceCheck
  include E2E
  FIXTURE = File.join(ROOT, "tests", "e2e", "fixtures", "trace", "scenarios.rb")
  PROTO_DIR = File.join(ROOT, "tests", "trace")
  # The extension for the host's Ruby: BUILD's, else build/'s (a sanitizer
  # build has none: the extension is loaded into a Ruby without ASan).
  EXT = [File.join(ROOT, BUILD, "ext"), File.join(ROOT, "build", "ext")].find do |d|
    File.exist?(File.join(d, "rbpeek", "trace_ext.so"))
  end || File.join(ROOT, BUILD, "ext")
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
    "blocks" => { "main" => "T.blocky{T.twice{block in T.blocky{T.price}*2}}" },
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
    # the read of one byte from the pipe returned 1
    rd = main.events.each_index.find { |i| main.events[i][2] == "read" }
    depth = 0
    ret = rd && main.events[(rd + 1)..].find do |_, ty, _, _|
      depth += ty == :begin ? 1 : ty == :end ? -1 : 0
      depth.negative?
    end
    p << "read's end has args #{ret&.dig(3).inspect}, expected ret 1" if ret && ret[3]["ret"] != 1
    p << "sched states #{states.inspect} lack running/sleeping" if sched && !(states.any? { |x| x.start_with?("running on CPU") } && states.include?("sleeping"))
    p.concat(sched_order_problems(sched)) if sched
    p
  end

  # Thread states in order: a wakeup ends a sleep (sleeping -> runnable ->
  # running at least once: T.woken blocks main on a pipe that another thread
  # of ours writes to, a wakeup recorded on any host, unlike timer wakeups
  # raised in contexts some hosts hide from perf, docs/trace-kernel.md), and
  # a runnable stretch ends only by being switched in.
  def sched_order_problems(sched)
    seq = TraceReader.tree(sched).map(&:name)
    p = []
    woke = seq.each_cons(3).any? { |a, b, c| a == "sleeping" && b == "runnable" && c.start_with?("running on CPU") }
    p << "no sleeping -> runnable -> running in #{seq.first(12).inspect}" unless woke
    bad = seq.each_cons(2).find { |a, b| a == "runnable" && !b.start_with?("running on CPU") }
    p << "runnable followed by #{bad[1].inspect}, not running" if bad
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

  SCENARIOS = %w[tree block blocks exceptions fibers threads overflow reset trap gc gvl kernel].freeze

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
end
