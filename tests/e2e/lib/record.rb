# frozen_string_literal: true
#
# record.rb - helpers for tests/e2e/70-record.rb (rbpeek record / report):
# targets from tests/targets/record that keep running Ruby code, rbpeek runs
# in the background (to signal them mid-recording), the collapsed and
# summary formats parsed, and sanitizer reports on rbpeek's stderr turned
# into failures (an ASan/UBSan build may report and still exit 0).
#
# Every rbpeek run gets XDG_CACHE_HOME in this file's scratch directory, so
# the raw files it always writes never land in the user's ~/.cache.
require "timeout"
require_relative "e2e"

module Record
  DIR = File.join(E2E::TARGETS, "record")
  TMP = File.join(E2E::OUT, "record.#{$$}")
  CACHE = File.join(TMP, "cache")
  SANITIZER = /ERROR: \w+Sanitizer|SUMMARY: \w+Sanitizer|runtime error: |WARNING: \w+Sanitizer/.freeze
  RAW_LINE = /^rbpeek: raw profile: (.+) \(convert with /.freeze
  RECORDING = /^rbpeek: recording process (\d+) /.freeze

  class SanitizerReport < StandardError; end

  Frame = Struct.new(:label, :path, :line) do
    def to_s
      path ? "#{label} (#{path}:#{line})" : label
    end
  end

  FileUtils.mkdir_p(CACHE)
  SEQ = [0] # numbers the scratch files
  # The scratch directory goes when nothing failed; kept for a look otherwise.
  at_exit { FileUtils.rm_rf(TMP) if E2E::STATE[:failed].zero? }

  module_function

  # A fresh path (or directory, mkdir: true) in the scratch directory.
  def tmp(name, mkdir: false)
    SEQ[0] += 1
    path = File.join(TMP, "#{SEQ[0]}-#{name}")
    FileUtils.mkdir_p(path) if mkdir
    path
  end

  def env(extra = {})
    { "XDG_CACHE_HOME" => CACHE }.merge(extra)
  end

  def sanitizer_check(res, what = "rbpeek")
    err = res.stderr.to_s.dup.force_encoding(Encoding::BINARY)
    return res unless err =~ SANITIZER

    lines = err.lines.grep(/Sanitizer|runtime error|^\s+#[0-4] /n).first(8).join
    raise SanitizerReport, "sanitizer report on #{what}'s stderr:\n#{lines}"
  end

  # rbpeek ARGS with a deadline, run in TMP; raises on a sanitizer report.
  def rec(*args, timeout: E2E::RBPEEK_TIMEOUT, env: {}, chdir: TMP)
    sanitizer_check(E2E.rbpeek(*args, timeout: timeout, env: self.env(env), chdir: chdir),
                    "rbpeek #{args.join(' ')}")
  end

  def stderr_of(res)
    res.stderr.to_s.dup.force_encoding(Encoding::UTF_8)
  end

  def raw_path_of(res)
    stderr_of(res)[RAW_LINE, 1]
  end

  # The threads of pid that are stopped (state T or t): none, ever, once
  # rbpeek has let the target go.
  def stopped_tasks(pid)
    Dir.children("/proc/#{pid}/task").select do |tid|
      st = File.read("/proc/#{pid}/task/#{tid}/stat") rescue next
      %w[T t].include?(st[st.rindex(")") + 2])
    end
  rescue Errno::ENOENT
    []
  end

  def mono
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # rbpeek running in the background, in its own process group.
  class Background
    attr_reader :pid

    def initialize(args, env: {}, chdir: TMP)
      @out = Record.tmp("bg.out")
      @err = Record.tmp("bg.err")
      @t0 = Record.mono
      @what = "rbpeek #{args.join(' ')}"
      @pid = Process.spawn(Record.env(env), E2E::RBPEEK, *args.map(&:to_s), in: "/dev/null",
                           out: @out, err: @err, chdir: chdir, pgroup: true)
      E2E.register_pid(@pid)
    end

    def stderr
      File.binread(@err).force_encoding(Encoding::UTF_8)
    rescue Errno::ENOENT
      ""
    end

    # Wait until stderr matches re (rbpeek has started sampling); the match.
    def wait_stderr(re, timeout: 10)
      deadline = Record.mono + timeout
      loop do
        m = re.match(stderr)
        return m if m
        raise "rbpeek exited before printing #{re.inspect}; stderr: #{stderr[0, 400].inspect}" if @status
        raise "rbpeek printed no #{re.inspect} within #{timeout} s; stderr: #{stderr[0, 400].inspect}" if Record.mono > deadline

        _, @status = Process.waitpid2(@pid, Process::WNOHANG)
        sleep 0.02
      end
    end

    def kill(sig, group: false)
      Process.kill(sig, group ? -@pid : @pid)
    end

    # Wait for rbpeek's exit (killing its group after `timeout` s): a Result.
    def wait(timeout: E2E::RBPEEK_TIMEOUT)
      deadline = Record.mono + timeout
      timed_out = false
      until @status
        _, @status = Process.waitpid2(@pid, Process::WNOHANG)
        break if @status

        if Record.mono > deadline
          timed_out = true
          begin
            Process.kill("KILL", -@pid)
          rescue Errno::ESRCH
            nil
          end
          _, @status = Process.waitpid2(@pid)
          break
        end
        sleep 0.01
      end
      res = E2E::Result.new(@status.exitstatus, @status.termsig, File.binread(@out), File.binread(@err),
                            timed_out, Record.mono - @t0)
      Record.sanitizer_check(res, @what)
    end
  end

  # A target script tests/targets/record/NAME.rb ARGS, run from that
  # directory with a relative path.  Reaped as soon as it exits (as a shell
  # would), so rbpeek sees it go rather than a zombie.
  class Script
    attr_reader :pid, :path

    def initialize(name, *args)
      @path = File.join(DIR, "#{name}.rb")
      @ready = Record.tmp("#{name}.ready")
      @log = Record.tmp("#{name}.log")
      @pid = Process.spawn({ "RBPEEK_READY" => @ready }, E2E::RUBY, "#{name}.rb", *args.map(&:to_s),
                           chdir: DIR, in: "/dev/null", out: @log, err: [:child, :out])
      E2E.register_pid(@pid)
      @waiter = Process.detach(@pid)
    end

    def wait_ready(timeout: 30)
      deadline = Record.mono + timeout
      until File.exist?(@ready)
        raise "target #{File.basename(@path)} exited before it was ready: #{log.inspect}" unless @waiter.alive?
        raise "target #{File.basename(@path)} not ready after #{timeout} s: #{log.inspect}" if Record.mono > deadline

        sleep 0.02
      end
      # The thread that signalled is still returning from ready!; give it a
      # moment to reach its loop (or its sleep).
      sleep 0.2
      self
    end

    def log
      File.read(@log)[0, 500]
    rescue Errno::ENOENT
      ""
    end

    def alive?
      @waiter.alive?
    end

    # Wait up to `timeout` s for the target's exit; true when it has exited.
    def wait_exit(timeout)
      !@waiter.join(timeout).nil?
    end

    # The line of this script that matches re (first one).
    def line_of(re)
      File.readlines(@path).index { |l| l =~ re }&.+(1) or raise "no line matching #{re.inspect} in #{@path}"
    end

    def cpu_ticks
      stat = File.read("/proc/#{@pid}/stat")
      f = stat[(stat.rindex(")") + 2)..].split
      f[11].to_i + f[12].to_i
    rescue Errno::ENOENT, Errno::ESRCH
      nil
    end

    # nil when the target still runs normally: alive, no thread stopped
    # (state T/t), and (busy: true) still burning CPU; else what is wrong.
    def running_problem(busy: true)
      return "target exited (#{@waiter.value.inspect})" unless alive?

      states = Dir.children("/proc/#{@pid}/task").to_h do |tid|
        stat = File.read("/proc/#{@pid}/task/#{tid}/stat") rescue ")  ?"
        [tid.to_i, stat[stat.rindex(")") + 2]]
      end
      stopped = states.select { |_, s| %w[T t].include?(s) }
      return "target threads left stopped: #{stopped.inspect} (state T/t)" unless stopped.empty?
      return nil unless busy

      # a clock tick of CPU: within 0.3 s on a quiet machine; a busy one
      # (load 30) may not schedule it that soon, a stopped one never will
      before = cpu_ticks
      after = before
      clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
      t0 = clock.call
      while before && after && after <= before && clock.call - t0 < 15
        sleep 0.3
        after = cpu_ticks
      end
      return "target no longer burns CPU (#{before.inspect} -> #{after.inspect} ticks in #{(clock.call - t0).round(1)} s)" unless before && after && after > before

      nil
    rescue Errno::ENOENT
      "target exited"
    end

    def kill
      Process.kill("KILL", @pid) if alive?
    rescue Errno::ESRCH
      nil
    ensure
      @waiter.join(5)
    end
  end

  def with_script(name, *args)
    s = Script.new(name, *args)
    begin
      yield s.wait_ready
    ensure
      s.kill
    end
  end

  # "label (path:line)" or a bare label (C functions under --function,
  # thread roots "thread TID (name)").
  def parse_frame(text)
    if (m = /\A(.*) \((.*):(-?\d+)\)\z/m.match(text))
      Frame.new(m[1], m[2], m[3].to_i)
    else
      Frame.new(text, nil, nil)
    end
  end

  # Collapsed text -> [[frames root first, count], ...]; raises on a bad line.
  def parse_collapsed(text)
    text = text.dup.force_encoding(Encoding::UTF_8)
    text.each_line(chomp: true).with_index(1).map do |line, i|
      m = /\A(\S.*) (\d+)\z/.match(line) or raise "collapsed line #{i} is not \"frame;...;frame COUNT\": #{line[0, 200].inspect}"
      [m[1].split(";").map { |f| parse_frame(f) }, m[2].to_i]
    end
  end

  PROCESS_ROOT = /\Aprocess (\d+): (.*)\z/.freeze

  # --subprocesses stacks -> { pid => [cmdline, [labels of every frame below]] };
  # raises on a stack without a "process PID: cmdline" root.
  def by_process(stacks)
    out = Hash.new { |h, k| h[k] = [nil, []] }
    stacks.each do |frames, _count|
      m = PROCESS_ROOT.match(frames.first.label) or raise "stack without a process root: #{frames.first(2).map(&:to_s).inspect}"
      out[m[1].to_i][0] = m[2]
      out[m[1].to_i][1].concat(frames.drop(1).map(&:label))
    end
    out
  end

  # Child processes of pid (whose command name is comm, when given).
  def children_of(pid, comm = nil)
    Dir.children("/proc").grep(/\A\d+\z/).select do |c|
      stat = File.read("/proc/#{c}/stat") rescue next
      (comm.nil? || stat[/\((.*)\)/m, 1] == comm) && stat[(stat.rindex(")") + 2)..].split[1].to_i == pid
    end.map(&:to_i).sort
  end

  def read_collapsed(file)
    raise "#{file} was not written" unless File.exist?(file)

    stacks = parse_collapsed(File.binread(file))
    raise "#{file} is empty" if stacks.empty?

    stacks
  end

  def total(stacks)
    stacks.sum { |_, n| n }
  end

  # Samples whose stack contains a frame labelled `label`.
  # A server started in its own process group (its workers with it), its
  # output in log; yields its pid; when the block ends, TERM to the group,
  # KILL after `grace` seconds.
  def with_server_group(argv, log, env: {}, chdir: nil, grace: 5)
    opts = { in: "/dev/null", out: log, err: %i[child out], pgroup: true }
    opts[:chdir] = chdir if chdir
    pid = Process.spawn(env, *argv, **opts)
    E2E.register_pid(pid)
    yield pid
  ensure
    if pid
      begin
        Process.kill("TERM", -pid)
        Timeout.timeout(grace) { Process.wait(pid) }
      rescue Errno::ESRCH, Errno::ECHILD, Timeout::Error
        Process.kill("KILL", -pid) rescue nil # rubocop:disable Style/RescueModifier
        Process.wait(pid) rescue nil # rubocop:disable Style/RescueModifier
      end
    end
  end

  # Loopback HTTP load on url for at most `seconds` (wrk when installed,
  # else curl in a loop), `settle` seconds to start, killed with its group
  # when the block ends.
  def with_http_load(url, seconds, clients: 4, settle: 0)
    argv = if system("command -v wrk >/dev/null 2>&1") then ["wrk", "-t#{[clients, 2].min}", "-c#{clients}", "-d#{seconds}s", url]
           else ["sh", "-c", "end=$(($(date +%s)+#{seconds})); while [ $(date +%s) -lt $end ]; do curl -s #{url} >/dev/null; done"]
           end
    pid = Process.spawn(*argv, in: "/dev/null", out: File::NULL, err: File::NULL, pgroup: true)
    E2E.register_pid(pid)
    sleep settle if settle.positive?
    yield
  ensure
    if pid
      Process.kill("KILL", -pid) rescue nil # rubocop:disable Style/RescueModifier
      Process.wait(pid) rescue nil # rubocop:disable Style/RescueModifier
    end
  end

  # The rows of `rbpeek top`'s plain-text table (-n N): [% self, function].
  def top_rows(text)
    text.lines.filter_map do |l|
      m = /\A\s*(\d+\.\d)\s+(\d+\.\d)\s+\S+\s+\S+\s+(\S.*?)\s{2,}(\S+:\d+|-)\s*\z/.match(l.chomp) or next
      [m[1].to_f, m[3]]
    end
  end

  def under(stacks, label)
    stacks.sum { |frames, n| frames.any? { |f| f.label == label } ? n : 0 }
  end

  # Samples whose innermost frame is labelled `label`.
  def leaf(stacks, label)
    stacks.sum { |frames, n| frames.last&.label == label ? n : 0 }
  end

  # "rbpeek summary: pid P (ruby V), S s at R Hz, N samples, T threads" ("N
  # on-CPU samples" for an on-CPU recording), then rows "% self  % total
  # function  file:line".
  def parse_summary(text)
    lines = text.dup.force_encoding(Encoding::UTF_8).lines.map(&:chomp)
    head = /\Arbpeek summary: pid (\d+) \(ruby (\S+)\), ([\d.]+) s at (\d+) Hz, (\d+) (on-CPU )?samples, (\d+) threads?\z/.match(lines[0].to_s)
    raise "summary header not understood: #{lines[0].inspect}" unless head

    rows = lines.drop(1).reject { |l| l.strip.empty? || l =~ /\A\s*% self/ }.map do |l|
      # a C function by function has no place of its own: "-"
      m = /\A\s*(\d+\.\d+)\s+(\d+\.\d+)\s+(.+?)\s+(?:(\S+):(-?\d+)|-)\z/.match(l) or raise "summary row not understood: #{l.inspect}"
      { self: m[1].to_f, total: m[2].to_f, label: m[3], path: m[4], line: m[5].to_i }
    end
    { pid: head[1].to_i, ruby: head[2], rate: head[4].to_i, samples: head[5].to_i, on_cpu: !head[6].nil?,
      threads: head[7].to_i, rows: rows }
  end
end
