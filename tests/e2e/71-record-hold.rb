# frozen_string_literal: true
#
# 71-record-hold.rb - how long `rbpeek record` keeps a thread of the target
# stopped (--max-hold), and a target whose main thread has exited.
#
# The bound is a promise about rbpeek's own behaviour, checked through its
# own closing line, never by timing (with --stop: by default a tick stops a
# thread only when its read tore twice): with a 1 us bound every paused read
# lets its threads go before it is done (a read is several system calls),
# and each such tick must still give its samples, read without pausing,
# exactly as a tick within the bound does: samples = ticks - skipped -
# errors (- ticks without a GVL holder under --gvl).  The target must never
# be left stopped.  With --max-hold 0 nothing is let go and the closing line
# says no bound; by default the 300 us bound is reported.
#
# record/default-no-stop: by default nothing is stopped where no stack
# changes (two threads spinning on one line each): the closing line says
# 0 ticks stopped a thread, and every stack is on a spin line.
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
names = %w[record/hold-bound-every-tick record/hold-bound-on-cpu record/hold-bound-default
           record/hold-unbounded record/hold-bad-value record/zombie-main-thread record/default-no-stop]
exit 0 if skip_unless_tracing(names)

# Closing-line counts of a recording, from its stderr.
def closing(err)
  {
    samples: err[/: (\d+) samples in \d+ ticks/, 1]&.to_i,
    ticks: err[/ samples in (\d+) ticks/, 1]&.to_i,
    errors: err[/ticks, (\d+) errors/, 1]&.to_i,
    skipped: err[/late \([\d.]+%, (\d+) skipped\)/, 1]&.to_i,
    no_holder: err[/; (\d+) ticks found no thread holding the GVL/, 1]&.to_i,
    holds: err[/threads held stopped \d+\/\d+ us/],
    let_go: err[/, (\d+) let go at the (\d+) us bound/, 1]&.to_i,
    bound: err[/, \d+ let go at the (\d+) us bound/, 1]&.to_i,
  }
end

def ok_run(probs, args, res)
  return true if res.status&.zero? && !res.timed_out

  probs << "rbpeek #{args.join(' ')}: #{res.describe}, expected exit 0"
  false
end

# Every leaf on one of the spin lines of spinners.rb.
def off_spin_lines(t, out)
  lines = { "Object#spin_a" => t.line_of(/# SPIN_A/), "Object#spin_b" => t.line_of(/# SPIN_B/) }
  R.read_collapsed(out).reject { |frames, _| lines[frames.last.label] == frames.last.line }
end

# A tight bound: --gvl, so that each tick that found a holder gives exactly
# one sample, let go early or not.
check("record/hold-bound-every-tick") do |probs|
  R.with_script("spinners") do |t|
    out = R.tmp("hold-gvl.txt")
    args = ["record", "--pid", t.pid, "-r", 100, "-d", 2, "--gvl", "--stop", "--max-hold", 1, "-f", "collapsed",
            "-o", out]
    res = R.rec(*args)
    next unless ok_run(probs, args, res)

    c = closing(R.stderr_of(res))
    next probs << "closing line without the held-stopped figures and the bound: " \
                  "#{R.stderr_of(res)[-400..].inspect}" unless c[:holds] && c[:let_go] && c[:bound] == 1

    want = c[:ticks] - c[:skipped] - c[:errors] - c[:no_holder].to_i
    probs << "#{c[:samples]} samples in #{c[:ticks]} ticks (#{c[:skipped]} skipped, #{c[:errors]} errors, " \
             "#{c[:no_holder]} without a GVL holder): expected #{want}, one per tick read" unless c[:samples] == want
    probs << "no read was let go at a 1 us bound" if c[:let_go].zero?
    off = off_spin_lines(t, out)
    probs << "#{off.size} stacks off the spin lines: #{off.first(2).inspect}" unless off.empty?
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "#{c[:samples]} samples in #{c[:ticks]} ticks, #{c[:let_go]} let go at the 1 us bound"
  end
end

# --on-cpu stops every thread (three here): a thread that has not stopped
# within the bound of the first one's stop makes the tick let all go.
check("record/hold-bound-on-cpu") do |probs|
  R.with_script("spinners") do |t|
    out = R.tmp("hold-oncpu.txt")
    args = ["record", "--pid", t.pid, "-r", 100, "-d", 2, "--on-cpu", "--max-hold", 1, "-f", "collapsed",
            "-o", out]
    res = R.rec(*args)
    next unless ok_run(probs, args, res)

    c = closing(R.stderr_of(res))
    next probs << "closing line without the bound: #{R.stderr_of(res)[-400..].inspect}" unless c[:let_go] && c[:bound] == 1

    probs << "no read was let go at a 1 us bound" if c[:let_go].zero?
    read = c[:ticks] - c[:skipped] - c[:errors]
    # two spinners on two CPUs: at least one of them is on a CPU at most ticks
    probs << "#{c[:samples]} samples in #{read} ticks read: ticks let go gave none?" if c[:samples] < read / 2
    # (what --on-cpu keeps of a thread blocked in Thread#join is 75-top's and
    # 70-record's to check: a thread not stopped within the bound has /proc's state)
    spins = R.read_collapsed(out).sum { |frames, n| frames.last.label.start_with?("Object#spin_") ? n : 0 }
    probs << "#{spins} of #{c[:samples]} samples in the spinners: expected most" if spins * 2 < c[:samples]
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "#{c[:samples]} samples in #{c[:ticks]} ticks, #{c[:let_go]} let go"
  end
end

check("record/hold-bound-default") do |probs|
  R.with_script("spinners") do |t|
    args = ["record", "--pid", t.pid, "-d", 1, "--stop", "-f", "collapsed", "-o", R.tmp("hold-default.txt")]
    res = R.rec(*args)
    next unless ok_run(probs, args, res)

    c = closing(R.stderr_of(res))
    probs << "closing line does not name the default 300 us bound: #{R.stderr_of(res)[-300..].inspect}" unless c[:bound] == 300
    probs << "#{c[:let_go]} reads let go, more than there were ticks (#{c[:ticks]})" if c[:let_go].to_i > c[:ticks].to_i
    nil
  end
end

check("record/hold-unbounded") do |probs|
  R.with_script("spinners") do |t|
    args = ["record", "--pid", t.pid, "-d", 1, "--stop", "--max-hold", 0, "-f", "collapsed", "-o",
            R.tmp("hold-none.txt")]
    res = R.rec(*args)
    next unless ok_run(probs, args, res)

    err = R.stderr_of(res)
    probs << "no hold reported" unless err.include?("threads held stopped")
    probs << "--max-hold 0 still reports a bound: #{err[-300..].inspect}" if err.include?("let go at the")
    nil
  end
end

check("record/default-no-stop") do |probs|
  R.with_script("spinners") do |t|
    out = R.tmp("no-stop.txt")
    args = ["record", "--pid", t.pid, "-r", 100, "-d", 2, "-f", "collapsed", "-o", out]
    res = R.rec(*args)
    next unless ok_run(probs, args, res)

    err = R.stderr_of(res)
    c = closing(err)
    m = err.match(/; (\d+) ticks stopped a thread, (\d+) reads torn, (\d+) stacks dropped torn/)
    next probs << "closing line does not say how many ticks stopped a thread: #{err[-400..].inspect}" unless m

    stopped, torn, dropped = m.captures.map(&:to_i)
    probs << "#{stopped} ticks stopped a thread spinning on one line" unless stopped.zero?
    probs << "#{torn} reads torn, #{dropped} dropped, of stacks that never change" unless (torn + dropped).zero?
    probs << "held-stopped figures although nothing was stopped" if c[:holds]
    off = off_spin_lines(t, out)
    probs << "#{off.size} stacks off the spin lines: #{off.first(2).inspect}" unless off.empty?
    spins = R.read_collapsed(out).sum { |_, n| n }
    read = c[:ticks].to_i - c[:skipped].to_i - c[:errors].to_i
    probs << "only #{spins} samples of #{read} ticks read (torn stacks dropped?)" if spins < read
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "#{c[:samples]} samples in #{c[:ticks]} ticks, #{stopped} stopped"
  end
end

check("record/hold-bad-value") do |probs|
  ["-5", "abc", "", "10000001", "1.5"].each do |v|
    res = R.rec("record", "--pid", Process.pid, "--max-hold", v, "-d", 1)
    err = R.stderr_of(res)
    probs << "--max-hold #{v.inspect}: #{res.describe}, expected exit 2" unless res.status == 2
    probs << "--max-hold #{v.inspect}: message does not name the option: #{err.lines.first.inspect}" unless err.include?("--max-hold")
  end
  nil
end

# The main thread called pthread_exit(): the thread-group leader is a
# zombie while the worker runs on.  rbpeek reads through the live thread.
if !system(RUBY, "-e", "require 'fiddle'", out: File::NULL, err: File::NULL)
  skip("record/zombie-main-thread", "#{RUBY} has no fiddle (needed to call pthread_exit)")
else
  check("record/zombie-main-thread") do |probs|
    R.with_script("zombie_main") do |t|
      state = File.read("/proc/#{t.pid}/stat")[/\) (\S)/, 1]
      next probs << "the target's main thread is #{state.inspect}, expected a zombie (Z)" unless state == "Z"

      churn = t.line_of(/^def churn/)
      snap = R.rec("snapshot", "--pid", t.pid)
      probs << "snapshot: #{snap.describe}, expected exit 0: #{R.stderr_of(snap)[0, 300]}" unless snap.status&.zero?
      probs << "snapshot shows no Object#churn frame: #{snap.stdout.to_s[0, 400].inspect}" unless snap.stdout.to_s.include?("Object#churn")
      [[], ["--nonblocking"], ["--on-cpu"]].each do |flags|
        out = R.tmp("zombie#{flags.join}.txt")
        args = ["record", "--pid", t.pid, "-d", 1, *flags, "-f", "collapsed", "-o", out]
        res = R.rec(*args)
        next unless ok_run(probs, args, res)

        hits = R.read_collapsed(out).sum { |frames, n| frames.any? { |f| f.label == "Object#churn" && f.line == churn } ? n : 0 }
        probs << "rbpeek #{args.join(' ')}: no samples in Object#churn (line #{churn})" if hits.zero?
      end
      (p = t.running_problem(busy: false)) && probs << "afterwards: #{p}"
      nil
    end
  end
end
