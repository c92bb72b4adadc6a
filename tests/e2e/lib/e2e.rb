# frozen_string_literal: true
#
# e2e.rb - helpers shared by the end-to-end tests (tests/e2e/[0-9]*.rb).
#
# Each test file prints one line per test, which tests/run counts:
#   ok NAME[: note]  /  FAIL NAME: reason  /  skip NAME: reason
# and exits non-zero when anything failed.  Every process a test starts runs
# under a deadline and is killed when the file exits; target PIDs are also
# appended to $RBPEEK_TEST_PIDS so that tests/run can kill them should this
# process itself be killed.

require "json"
require "fileutils"
require "timeout"
require_relative "expect"

module E2E
  ROOT = File.expand_path("../../..", __dir__)
  TARGETS = File.join(ROOT, "tests", "targets")
  BUILD = ENV.fetch("BUILD", "build")
  # The binary; RBPEEK is what tests run: the binary, or under
  # RBPEEK_VALGRIND=1 tests/run's wrapper that runs it under valgrind.
  RBPEEK_BINARY = File.expand_path(File.join(BUILD, "rbpeek"), ROOT)
  RBPEEK = ENV.fetch("RBPEEK_BIN", RBPEEK_BINARY)
  VALGRIND = ENV["RBPEEK_VALGRIND"] == "1"
  OUT = File.expand_path(ENV.fetch("RBPEEK_TEST_OUT", File.join(ROOT, "tests", "out", File.basename(BUILD))), ROOT)
  RUBY = ENV.fetch("RBPEEK_TEST_RUBY", "ruby")
  # seconds for one rbpeek run; a hung rbpeek fails its test (valgrind is slow)
  RBPEEK_TIMEOUT = VALGRIND ? 60 : 10

  Result = Struct.new(:status, :signal, :stdout, :stderr, :timed_out, :elapsed) do
    def describe
      what = if timed_out then "timed out after #{format('%.1f', elapsed)} s"
             elsif signal then "killed by signal #{signal}"
             else "exit #{status}"
             end
      err = stderr.to_s.strip
      err.empty? ? what : "#{what}, stderr: #{err[0, 400].inspect}"
    end
  end

  STATE = { failed: 0, children: [] } # shared by module and includer

  module_function

  def ok(name, note = nil)
    puts(note ? "ok #{name}: #{note}" : "ok #{name}")
    $stdout.flush
  end

  def fail(name, reason)
    STATE[:failed] += 1
    puts "FAIL #{name}: #{reason.to_s.gsub("\n", "\n    ")}"
    $stdout.flush
  end

  def skip(name, reason)
    puts "skip #{name}: #{reason}"
    $stdout.flush
  end

  # Run a test body; an exception in it is a failure, not a crash of the file.
  def test(name)
    yield
  rescue StandardError, Timeout::Error => e
    fail(name, "#{e.class}: #{e.message} (#{e.backtrace&.first})")
  end

  def finish
    exit(STATE[:failed].zero? ? 0 : 1)
  end

  def rbpeek_built?
    File.executable?(RBPEEK_BINARY)
  end

  # Skip every listed test when build/rbpeek is missing; true when missing.
  def skip_without_rbpeek(names)
    return false if rbpeek_built?

    names.each { |n| skip(n, "#{RBPEEK} not built (run make)") }
    true
  end

  # Skip every listed test when rbpeek is missing or may not read other
  # processes; true when skipped (then exit).
  def skip_unless_tracing(names)
    return true if skip_without_rbpeek(names)
    return false if can_trace_others?

    names.each { |n| skip(n, "not root and kernel.yama.ptrace_scope > 0: cannot read other processes") }
    true
  end

  # Skip every listed test unless root on a kernel with the uprobe perf PMU
  # (rbpeek alloc); why_root says what root is needed for.  True when skipped.
  def skip_unless_uprobes(names, why_root)
    why = if !root? then why_root
          elsif !File.exist?("/sys/bus/event_source/devices/uprobe/type") then "this kernel has no uprobe PMU"
          end
    names.each { |n| skip(n, why) } if why
    !why.nil?
  end

  # ok when there are no problems, else fail with the first 12 of them.
  def report(name, problems, note = nil)
    return ok(name, note) if problems.empty?

    shown = problems.first(12)
    shown << "(#{problems.size - 12} more)" if problems.size > 12
    fail(name, shown.join("\n"))
  end

  # Run a test whose block appends problems to `probs` and returns an
  # optional note (a String); ok when no problems.
  def check(name)
    test(name) do
      probs = []
      note = yield probs
      probs.empty? ? ok(name, note.is_a?(String) ? note : nil) : fail(name, probs.join("\n"))
    end
  end

  def root?
    Process.uid.zero?
  end

  # The first directory above path that other users cannot search (so
  # another user cannot run path), nil when there is none.
  def unsearchable_dir(path)
    dir = File.dirname(path)
    until dir == "/"
      return dir unless File.stat(dir).mode & 0o001 != 0

      dir = File.dirname(dir)
    end
    nil
  end

  # Whether this user may read other processes' memory the way rbpeek does.
  def can_trace_others?
    return true if root?

    scope = File.read("/proc/sys/kernel/yama/ptrace_scope").to_i rescue 0
    scope.zero?
  end

  def register_pid(pid)
    STATE[:children] << pid
    if (file = ENV["RBPEEK_TEST_PIDS"])
      # with its start time: tests/run kills only a process that still has it
      start = (File.read("/proc/#{pid}/stat").split(") ", 2)[1].split[19] rescue nil)
      File.open(file, "a") { |f| f.puts "#{pid} #{start}" } if start
    end
  end

  def kill_pid(pid, sig = "KILL")
    Process.kill(sig, pid)
  rescue Errno::ESRCH, Errno::EPERM
    nil
  ensure
    begin
      Process.wait(pid)
    rescue Errno::ECHILD
      nil
    end
  end

  at_exit { STATE[:children].each { |pid| kill_pid(pid) } }

  # Run argv with a deadline; stdout and stderr captured.  Never raises for
  # the command's own failures.
  def run(argv, timeout: RBPEEK_TIMEOUT, env: {}, chdir: ROOT, stdin: "/dev/null")
    FileUtils.mkdir_p(OUT)
    out = File.join(OUT, "cmd.#{$$}.out")
    err = File.join(OUT, "cmd.#{$$}.err")
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    pid = Process.spawn(env, *argv, in: stdin, out: out, err: err, chdir: chdir, pgroup: true)
    status = nil
    timed_out = false
    loop do
      _, status = Process.waitpid2(pid, Process::WNOHANG)
      break if status

      if Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 > timeout
        timed_out = true
        begin
          Process.kill("KILL", -pid)
        rescue Errno::ESRCH
          nil
        end
        _, status = Process.waitpid2(pid)
        break
      end
      sleep 0.005
    end
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    Result.new(status.exitstatus, status.termsig, File.binread(out), File.binread(err), timed_out, elapsed)
  ensure
    File.delete(out) if out && File.exist?(out)
    File.delete(err) if err && File.exist?(err)
  end

  def rbpeek(*args, **kw)
    run([RBPEEK, *args.map(&:to_s)], **kw)
  end

  # Parse rbpeek's JSON output; raise with the command's story when it fails.
  def json_of(res)
    raise "rbpeek #{res.describe}" unless res.status&.zero?

    JSON.parse(res.stdout.dup.force_encoding(Encoding::UTF_8))
  rescue JSON::ParserError => e
    raise "output is not JSON (#{e.message[0, 100]}): #{res.stdout[0, 200].inspect}"
  end

  # The errors format: "rbpeek: error: ..." then optional hint lines
  # ("hint: ...", or for usage errors "try 'rbpeek --help'").
  def error_format_problem(res)
    lines = res.stderr.dup.force_encoding(Encoding::UTF_8).lines.map(&:chomp)
    # --pid of a process whose VM is not set up yet: one line says it waits
    lines.shift if lines.first&.match?(/\Arbpeek: process \d+ is starting \(/)
    return "nothing on stderr" if lines.empty?
    return "stderr does not start with \"rbpeek: error: \": #{lines.first.inspect}" unless lines.first.start_with?("rbpeek: error: ")

    extra = lines.drop(1).reject { |l| l =~ /\A\s*(rbpeek: )?(hint: |try ')/ }
    extra.empty? ? nil : "unexpected stderr lines #{extra.inspect}"
  end

  # A running test target (tests/targets/NAME.rb), started from
  # tests/targets with a relative script path, as a user would.
  class Target
    attr_reader :name, :pid, :ready_file, :oracle_file

    # ruby: the interpreter to run it with (another Ruby's bin/ruby)
    def initialize(name, oracle: false, env: {}, ruby: RUBY)
      @name = name
      FileUtils.mkdir_p(OUT)
      @ready_file = File.join(OUT, "#{name}.#{$$}.ready")
      @oracle_file = oracle ? File.join(OUT, "#{name}.#{$$}.oracle.json") : nil
      [@ready_file, "#{@ready_file}.pong", @oracle_file].compact.each { |f| File.delete(f) if File.exist?(f) }
      env = env.merge("RBPEEK_READY" => @ready_file)
      env["RBPEEK_ORACLE"] = @oracle_file if oracle
      @log = File.join(OUT, "#{name}.#{$$}.log")
      @pid = Process.spawn(env, ruby, "#{name}.rb", chdir: TARGETS, in: "/dev/null", out: @log, err: [:child, :out])
      E2E.register_pid(@pid)
    end

    # Wait until the target says it is ready; raises after `timeout` s.
    def wait_ready(timeout: 30)
      deadline = Time.now + timeout
      until File.exist?(@ready_file)
        if Process.waitpid(@pid, Process::WNOHANG)
          raise "target #{@name} exited before it was ready: #{File.read(@log)[0, 500].inspect}"
        end
        raise "target #{@name} not ready after #{timeout} s: #{File.read(@log)[0, 500].inspect}" if Time.now > deadline

        sleep 0.02
      end
      # The last thread parks right after signalling; give it a moment.
      sleep 0.2
      self
    end

    def tasks
      Dir.children("/proc/#{@pid}/task").map(&:to_i).sort
    rescue Errno::ENOENT
      []
    end

    # [state letter, utime+stime ticks] of one task.
    def task_stat(tid)
      stat = File.read("/proc/#{@pid}/task/#{tid}/stat")
      fields = stat[(stat.rindex(")") + 2)..].split
      [fields[0], fields[11].to_i + fields[12].to_i]
    rescue Errno::ENOENT, Errno::ESRCH
      nil
    end

    def comm(tid)
      File.binread("/proc/#{@pid}/task/#{tid}/comm").chomp
    rescue Errno::ENOENT
      nil
    end

    # nil when the target runs normally, else what is wrong: exited, some
    # thread stopped, the spinning thread (if any) no longer burning CPU,
    # or no answer to SIGUSR1.
    def liveness_problem(spinner_tid: nil)
      return "target exited" if Process.waitpid(@pid, Process::WNOHANG)

      stopped = tasks.select { |tid| %w[T t].include?(task_stat(tid)&.first) }
      return "threads #{stopped.inspect} left stopped (state T/t)" unless stopped.empty?

      if spinner_tid
        before = task_stat(spinner_tid)
        sleep 0.3
        after = task_stat(spinner_tid)
        return "spinning thread #{spinner_tid} is gone" unless before && after
        return "spinning thread #{spinner_tid} no longer runs (cpu #{before[1]} -> #{after[1]} ticks)" if after[1] <= before[1]
      end
      pong = "#{@ready_file}.pong"
      File.delete(pong) if File.exist?(pong)
      Process.kill("USR1", @pid)
      deadline = Time.now + 5
      sleep 0.02 until File.exist?(pong) || Time.now > deadline
      File.exist?(pong) ? nil : "no answer to SIGUSR1 within 5 s"
    end

    def oracle
      JSON.parse(File.read(@oracle_file, encoding: "UTF-8"))
    end

    def kill
      E2E.kill_pid(@pid)
      [@ready_file, "#{@ready_file}.pong", @oracle_file, @log].compact.each { |f| File.delete(f) if File.exist?(f) }
    end
  end

  TARGET_NAMES = Dir.children(TARGETS).grep(/\A[a-z0-9_]+\.rb\z/).map { |f| f.delete_suffix(".rb") }.sort.freeze

  def with_target(name, **kw)
    t = Target.new(name, **kw)
    begin
      yield t.wait_ready
    ensure
      t.kill
    end
  end

  def expectation(name, version = RUBY_VERSION)
    Expect.load(Expect.file_for(TARGETS, name, version), TARGETS)
  end

  # The same, with <internal:...> paths as Ruby reports them (not made
  # absolute under tests/targets): for a target run from tests/targets.
  def expectation_as_seen(name, version = RUBY_VERSION)
    expectation(name, version).each do |t|
      t.frames = t.frames.map do |f|
        rel = f.path.delete_prefix("#{TARGETS}/")
        rel.start_with?("<") ? Expect::Frame.new(f.kind, f.label, rel, f.line) : f
      end
    end
  end

  # Run `attempts` times until block returns no problems (stacks of a target
  # that has just become ready may take a moment to settle).  Returns
  # [problems of the last attempt, attempts used, first problem seen].
  def settle(attempts: 3, pause: 0.4)
    first = nil
    problems = nil
    attempts.times do |i|
      problems = yield
      return [problems, i + 1, first] if problems.empty?

      first ||= problems.first
      sleep pause if i + 1 < attempts
    end
    [problems, attempts, first]
  end

  # The text snapshot of pid says what its JSON snapshot says (taken one
  # after the other, retried while threads move); returns the problems.
  def snapshot_text_problems(pid)
    problems, = settle do
      text = rbpeek("snapshot", "--pid", pid)
      json = rbpeek("snapshot", "--pid", pid, "--json")
      next ["text: rbpeek #{text.describe}"] unless text.status&.zero?

      Expect.text_diffs(Expect.parse_text(text.stdout.dup.force_encoding("UTF-8")), json_of(json))
    rescue RuntimeError => e
      [e.message]
    end
    problems
  end
end
