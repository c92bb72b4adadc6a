# frozen_string_literal: true
# e2e-timeout: 300 (14 checks, 43 s on a loaded 2-core machine; make asan is slower)
#
# 94-hostile.rb - rbpeek record against targets that do their worst
# (tests/targets/record/): ~1,000 threads created and finished per second,
# a fork storm, GC.compact in a loop, recursion 10,000 deep, huge and
# non-UTF-8 labels, paths and thread names, thread and method names holding
# terminal escapes (ESC, CR, LF, BEL, CSI: shown escaped by snapshot, top
# and every text format, never raw), targets that exit or exec (into
# the same Ruby, and into another Ruby version when a chroot has one) mid
# recording.  Each time rbpeek must keep going, count what failed as errors
# (its closing line), exit 0 and write its output, and leave the target
# running (never stopped).
#
# Then rbpeek itself is hurt: SIGKILL while it holds the target paused
# (blocking mode at a high rate), SIGINT at random moments, and a full disk
# under -o (a tiny tmpfs): the target runs on, the output or a clear error
# is there, and the raw file is kept.  Rates and durations are small: this
# checks behaviour, not speed.
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
names = %w[hostile/thread-churn hostile/thread-churn-nonblocking hostile/fork-storm hostile/gc-compact
           hostile/gc-compact-nonblocking hostile/recursion-10000 hostile/strange-strings hostile/control-characters
           hostile/exits-mid-sample
           hostile/exec-same-ruby hostile/exec-other-ruby robust/sigkill-while-paused robust/sigint-random
           robust/disk-full]
exit 0 if skip_without_rbpeek(names)
unless can_trace_others?
  names.each { |n| skip(n, "not root and kernel.yama.ptrace_scope > 0: cannot read other processes") }
  exit 0
end

SUMMARY = /: (\d+) samples in (\d+) ticks, (\d+) errors, (\d+) late/.freeze

# rbpeek's closing line as {samples:, ticks:, errors:, late:}, or a problem.
def closing(probs, what, res)
  m = SUMMARY.match(R.stderr_of(res))
  return { samples: m[1].to_i, ticks: m[2].to_i, errors: m[3].to_i, late: m[4].to_i } if m

  probs << "#{what}: no closing \"N samples in N ticks, N errors\" line: #{R.stderr_of(res)[0, 300].inspect}"
  nil
end

# Record `seconds` of a running script to collapsed; problems appended.
# Returns [stacks, counts] (nil when rbpeek failed).
def record_script(probs, t, seconds, *flags, rate: 100)
  out = R.tmp("out.txt")
  args = ["record", "--pid", t.pid, "-r", rate, "-d", seconds, "-f", "collapsed", "-o", out, *flags]
  res = R.rec(*args, timeout: seconds + 20)
  unless res.status&.zero? && !res.timed_out
    probs << "rbpeek #{args.join(' ')}: #{res.describe}"
    return nil
  end
  counts = closing(probs, "rbpeek #{args.join(' ')}", res)
  [R.read_collapsed(out), counts]
end

def note_of(stacks, counts, label)
  "#{R.under(stacks, label)} samples under #{label}, #{counts[:errors]} errors in #{counts[:ticks]} ticks"
end

# --- 1. threads, forks, moving objects, deep stacks --------------------------
[["", []], ["-nonblocking", ["--nonblocking"]]].each do |suffix, flags|
  check("hostile/thread-churn#{suffix}") do |probs|
    R.with_script("churn") do |t|
      # --idle: the main thread mostly waits in Thread#join, a wait rbpeek
      # leaves out by default when the thread does (almost) no work; here
      # its stack must be read right however many threads come and go
      stacks, counts = record_script(probs, t, 3, "--idle", *flags)
      next unless stacks

      # the main thread waits in churn; the short-lived threads work
      n = R.under(stacks, "Object#churn")
      w = R.under(stacks, "Object#short_work")
      probs << "#{n} samples under Object#churn in 3 s at 100 Hz, expected at least 10" if n < 10
      probs << "no sample of the short-lived threads (Object#short_work)" if w.zero?
      (p = t.running_problem(busy: false)) && probs << "afterwards: #{p}"
      "#{n} samples under Object#churn, #{w} in short-lived threads, #{counts[:errors]} errors in #{counts[:ticks]} ticks"
    end
  end
end

check("hostile/fork-storm") do |probs|
  R.with_script("forkstorm") do |t|
    stacks, counts = record_script(probs, t, 2)
    next unless stacks

    # between forks the parent works; under load most time may go to fork itself
    n = R.under(stacks, "Object#parent_work")
    total = R.total(stacks)
    probs << "#{total} samples in 2 s at 100 Hz, expected at least 20" if total < 20
    probs << "no sample under Object#parent_work" if n.zero?
    (p = t.running_problem) && probs << "afterwards: #{p}"
    # the forked children must never be left stopped (traced) either
    kids = Dir.children("/proc").grep(/\A\d+\z/).select do |pid|
      st = File.read("/proc/#{pid}/stat") rescue next
      f = st[(st.rindex(")") + 2)..].split
      f[1].to_i == t.pid && %w[T t].include?(f[0])
    end
    probs << "children #{kids.inspect} of the target left stopped" unless kids.empty?
    note_of(stacks, counts, "Object#parent_work")
  end
end

[["", []], ["-nonblocking", ["--nonblocking"]]].each do |suffix, flags|
  check("hostile/gc-compact#{suffix}") do |probs|
    R.with_script("compact") do |t|
      stacks, counts = record_script(probs, t, 2, *flags, rate: 250)
      next unless stacks

      n = R.under(stacks, "Object#compact_loop")
      probs << "#{n} samples under Object#compact_loop (2 s at 250 Hz), expected at least 20" if n < 20
      known = stacks.sum { |fr, c| fr.any? { |f| ["Churner::Maker#make", "GC.compact"].include?(f.label) } ? c : 0 }
      probs << "no sample in Churner::Maker#make or GC.compact" if known.zero?
      (p = t.running_problem) && probs << "afterwards: #{p}"
      note_of(stacks, counts, "Object#compact_loop")
    end
  end
end

check("hostile/recursion-10000") do |probs|
  R.with_script("recurse", 10_000) do |t|
    stacks, counts = record_script(probs, t, 1, rate: 20)
    next unless stacks

    depth = stacks.map { |fr, _| fr.count { |f| f.label == "Object#down" } }.max
    probs << "deepest stack has #{depth} Object#down frames, expected 10000" unless depth == 10_000
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "#{R.total(stacks)} samples, #{depth} frames of Object#down, #{counts[:errors]} errors"
  end
end

# Huge and invalid labels, paths and thread names: recorded once (raw), then
# every format written from it; JSON formats must parse, text ones must not
# be empty.
check("hostile/strange-strings") do |probs|
  dir = R.tmp("dir-\xFF\xFE-".b + "p" * 200, mkdir: true)
  lib = File.join(dir, "lib-\xC3(.rb".b)
  File.binwrite(lib, "def weird_path_work; i = 0; i += 1 while i < 20_000; end\n")
  R.with_script("strings", lib) do |t|
    raw = R.tmp("strings.raw.gz")
    res = R.rec("record", "--pid", t.pid, "-r", 200, "-d", 1, "--threads", "-f", "raw", "-o", raw)
    next probs << "record: #{res.describe}" unless res.status&.zero?

    %w[collapsed flamegraph speedscope pprof callgrind chrome summary].each do |fmt|
      out = R.tmp("strings.#{fmt}")
      r = R.rec("report", "-i", raw, "-f", fmt, "-o", out)
      next probs << "report -f #{fmt}: #{r.describe}" unless r.status&.zero? && File.size?(out)

      data = File.binread(out)
      if %w[speedscope chrome].include?(fmt)
        begin
          JSON.parse(data.force_encoding(Encoding::UTF_8))
        rescue JSON::ParserError => e
          probs << "#{fmt}: not JSON: #{e.message[0, 120]}"
        end
      end
      probs << "#{fmt}: the weird path's method is missing" if fmt == "collapsed" && !data.include?("weird_path_work")
    end
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "every format written"
  end
end

# Thread and method names holding ESC, CR, LF, BEL and U+009B (CSI), from
# tests/targets/record/escapes.rb: no text output may hold one raw (a
# terminal would obey it, a line-based format would get a forged line);
# each shows escaped ("\e[31m"; U+FFFD in the SVG, which XML demands).  Before the fix snapshot, top, summary,
# collapsed and callgrind wrote them raw, and the SVG held bytes XML forbids.
CONTROL = /[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]/n.freeze

def control_problems(probs, what, data, want)
  data = data.b
  lines = data.split("\n")
  bad = lines.grep(CONTROL)
  probs << "#{what}: #{bad.size} line(s) with a raw control character: #{bad.first.to_s[0, 160].inspect}" unless bad.empty?
  probs << "#{what}: no #{want.inspect} in #{data[0, 300].inspect}" unless data.include?(want.b)
end

check("hostile/control-characters") do |probs|
  R.with_script("escapes") do |t|
    snap = R.rec("snapshot", "--pid", t.pid)
    if snap.status&.zero?
      control_problems(probs, "snapshot", snap.stdout, "evil\\e[31mRED\\e]0;pwned\\x07")
      control_problems(probs, "snapshot (thread)", snap.stdout, "thr\\e[32mGREEN\\r\\nx\\x07")
      probs << "snapshot: the C1 control not shown as \\u009b" unless snap.stdout.include?("lf\\u009b")
    else
      probs << "snapshot: #{snap.describe}"
    end
    top = R.rec("top", "--pid", t.pid, "-n", 2, "--delay", 0.5, timeout: 30)
    if top.status&.zero?
      control_problems(probs, "top", top.stdout, "evil\\e[31mRED")
    else
      probs << "top: #{top.describe}"
    end
    raw = R.tmp("escapes.raw.gz")
    res = R.rec("record", "--pid", t.pid, "-r", 200, "-d", 1, "--threads", "-f", "raw", "-o", raw)
    next probs << "record: #{res.describe}" unless res.status&.zero?

    %w[summary summary-by-line collapsed callgrind flamegraph].each do |fmt|
      r = R.rec("report", "-i", raw, "-f", fmt, "-o", "-")
      next probs << "report -f #{fmt} -o -: #{r.describe}" unless r.status&.zero?

      # the SVG shows each control character as U+FFFD (XML forbids most)
      esc = fmt == "flamegraph" ? "\u{fffd}" : "\\e"
      control_problems(probs, fmt, r.stdout, "evil#{esc}[31mRED")
      control_problems(probs, "#{fmt} (thread)", r.stdout, "thr#{esc}[32mGREEN") if %w[collapsed flamegraph].include?(fmt)
    end
    (p = t.running_problem) && probs << "afterwards: #{p}"
  end
  "snapshot, top, summary, summary-by-line, collapsed, callgrind, flamegraph: ESC, CR, LF, BEL, CSI escaped"
end

# --- 2. targets that go away -------------------------------------------------
# The target is killed (SIGTERM: Ruby shuts down) at random moments once
# rbpeek says it is recording, at 1,000 Hz.  rbpeek ends on its own with the
# output written (or, if not one sample was taken yet, exit 9 saying so).
check("hostile/exits-mid-sample") do |probs|
  rng = Random.new(8)
  written = 0
  6.times do
    delay = rng.rand * 0.5
    R.with_script("hotcold") do |t|
      out = R.tmp("exit.txt")
      bg = R::Background.new(["record", "--pid", t.pid, "-r", 1000, "-f", "collapsed", "-o", out])
      bg.wait_stderr(R::RECORDING)
      sleep delay
      Process.kill("TERM", t.pid)
      res = bg.wait(timeout: 20)
      err = R.stderr_of(res)
      none = res.status == 9 && err =~ / 0 samples in / && err.include?("no samples were collected")
      if res.status&.zero? && File.size?(out)
        written += 1
      elsif !none
        probs << "target killed #{format('%.2f', delay)} s into the recording: #{res.describe}"
      end
    end
  end
  probs << "only #{written} of 6 recordings wrote their output" if written < 3
  "#{written} of 6 targets killed 0-0.5 s into a 1,000 Hz recording gave output"
end

# exec(2) mid recording (0.8 s after rbpeek says it records): same PID, new
# program.  rbpeek must write what it
# recorded before the exec and end on its own (the new program's memory is
# not the old VM: errors are counted, never turned into garbage frames).
def exec_check(probs, cmd)
  R.with_script("execs", *cmd) do |t|
    out = R.tmp("exec.txt")
    bg = R::Background.new(["record", "--pid", t.pid, "-r", 200, "-d", 4, "-f", "collapsed", "-o", out])
    bg.wait_stderr(R::RECORDING)
    sleep 0.8
    Process.kill("USR1", t.pid) # exec now
    res = bg.wait(timeout: 30)
    next probs << "rbpeek: #{res.describe}" unless res.status&.zero? && !res.timed_out

    counts = closing(probs, "rbpeek", res)
    stacks = R.read_collapsed(out)
    n = R.under(stacks, "Object#before_exec")
    # ~160 ticks before the exec; a loaded machine delays many of them
    probs << "#{n} samples under Object#before_exec (0.8 s at 200 Hz), expected at least 10" if n < 10
    bad = stacks.flat_map { |fr, _| fr.map(&:label) }.reject { |l| l.valid_encoding? && l =~ /\A[[:print:]]+\z/ }
    probs << "garbage labels after exec: #{bad.uniq.first(3).inspect}" unless bad.empty?
    "#{n} samples before the exec, #{counts && counts[:errors]} errors, #{R.total(stacks)} samples in all"
  end
end

check("hostile/exec-same-ruby") do |probs|
  exec_check(probs, [RUBY, "-e", "def after_exec; i = 0; i += 1 while i < 10_000; end; " \
                                 "t = Time.now; after_exec while Time.now - t < 1.5"])
end

test("hostile/exec-other-ruby") do
  require_relative "lib/chroot"
  dir = "/var/cache/rbpeek/chroots/3.3"
  if !root?
    skip("hostile/exec-other-ruby", "needs root (chroot)")
  elsif !File.executable?(File.join(dir, "usr/bin/ruby3.3"))
    skip("hostile/exec-other-ruby", "no Ruby 3.3 chroot in #{dir} (tools/setup-rubies.sh)")
  else
    probs = []
    note = exec_check(probs, ["chroot", dir, "ruby3.3", "-e",
                              "def after_exec; i = 0; i += 1 while i < 10_000; end; " \
                              "t = Time.now; after_exec while Time.now - t < 1.5"])
    probs.empty? ? ok("hostile/exec-other-ruby", "3.1 -> 3.3: #{note}") : fail("hostile/exec-other-ruby", probs.join("\n"))
  end
end

# --- 3. rbpeek hurt -------------------------------------------------------------

# SIGKILL at random moments of a blocking recording at 1000 Hz of a process
# with 9 threads: most kills land while the target is paused.  The kernel
# must let the threads go (PTRACE_SEIZE tracees are detached on exit).
check("robust/sigkill-while-paused") do |probs|
  rng = Random.new(9)
  with_target("threads") do |t|
    12.times do |i|
      bg = R::Background.new(["record", "--pid", t.pid, "-r", 1000, "-f", "collapsed", "-o", R.tmp("k.txt")])
      bg.wait_stderr(R::RECORDING)
      sleep rng.rand * 0.3
      bg.kill("KILL")
      bg.wait
      sleep 0.05
      left = R.stopped_tasks(t.pid)
      probs << "kill #{i}: threads #{left.inspect} left stopped" unless left.empty?
    end
    (p = t.liveness_problem) && probs << "afterwards: #{p}"
  end
  "12 kills"
end

# SIGINT at random moments, from right after the start (attaching) to well
# into the recording: rbpeek always ends, the target always runs on, and
# once recording has begun the output is written (unless not one tick was
# taken: then exit 9, "no samples were collected").  A SIGINT that comes
# before rbpeek has even installed its handler (it has not touched the
# target yet) ends it the default way.
check("robust/sigint-random") do |probs|
  rng = Random.new(10)
  R.with_script("hotcold") do |t|
    12.times do |i|
      out = R.tmp("int#{i}.txt")
      bg = R::Background.new(["record", "--pid", t.pid, "-r", 500, "-f", "collapsed", "-o", out])
      delay = i < 4 ? rng.rand * 0.05 : rng.rand * 0.6
      sleep delay
      bg.kill("INT")
      res = bg.wait
      err = R.stderr_of(res)
      recording = err =~ R::RECORDING
      # stopped before the first tick: nothing to write, said so (exit 9)
      none = res.status == 9 && err =~ /: 0 samples in 0 ticks/ && err.include?("no samples were collected")
      # before its handler is installed (options parsed, the target not yet
      # touched: an ASan build starts slowly) SIGINT ends rbpeek as usual
      early = res.signal == 2 && err.empty?
      if res.timed_out || (res.signal && !early)
        probs << "SIGINT after #{format('%.3f', delay)} s: #{res.describe}"
      elsif recording && !none && (!res.status.zero? || !File.size?(out))
        probs << "SIGINT after #{format('%.3f', delay)} s while recording: #{res.describe}, output #{File.exist?(out) ? 'empty' : 'missing'}"
      end
      left = R.stopped_tasks(t.pid)
      probs << "SIGINT after #{format('%.3f', delay)} s: threads #{left.inspect} left stopped" unless left.empty?
    end
    (p = t.running_problem) && probs << "afterwards: #{p}"
  end
  "12 interrupts"
end

# -o on a full file system: a clear error naming the file and the reason,
# exit 10 (output), a hint to convert the raw file, and the raw file (in the cache directory, elsewhere) kept.
disk_full = root? ? method(:check) : ->(name, &_) { skip(name, "needs root (mount a tmpfs)") }
disk_full.call("robust/disk-full") do |probs|
  mnt = R.tmp("tiny", mkdir: true)
  res = run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", mnt])
  next probs << "mount tmpfs: #{res.describe}" unless res.status&.zero?

  begin
    File.binwrite(File.join(mnt, "filler"), "x" * 12_288) # 3 of 4 pages
    R.with_script("hotcold") do |t|
      out = File.join(mnt, "out.svg")
      res = R.rec("record", "--pid", t.pid, "-r", 500, "-d", 1, "-o", out)
      err = R.stderr_of(res)
      probs << "exit #{res.status.inspect}, expected 10 (output error): #{err[-300..]&.inspect}" unless res.status == 10
      probs << "no clear error: #{err[-300..]&.inspect}" unless err =~ /rbpeek: error: writing '#{Regexp.escape(out)}': .*No space left on device/
      raw = R.raw_path_of(res)
      probs << "no raw file kept (stderr: #{err[-300..]&.inspect})" unless raw && File.size?(raw)
      probs << "no hint to convert the raw file" unless raw && err.include?("hint: the recording is kept: rbpeek report -i #{raw}")
      leftovers = Dir.children(mnt) - ["filler"]
      probs << "left behind on the full disk: #{leftovers.inspect}" unless leftovers.empty?
      (p = t.running_problem) && probs << "afterwards: #{p}"
    end
  ensure
    run(["umount", mnt])
  end
  "error and raw file as expected"
end

finish
