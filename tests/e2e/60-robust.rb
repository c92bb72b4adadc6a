# frozen_string_literal: true
#
# 60-robust.rb - a 10,000-frame stack is read quickly (well under 2 s, a
# generous bound: this is not a benchmark), and killing rbpeek at any moment
# of a snapshot never leaves the target stopped.
require_relative "lib/e2e"
include E2E

names = %w[deep/10000-frames-fast robust/kill-mid-snapshot robust/repeat-snapshots]
exit 0 if skip_unless_tracing(names)

with_target("deep") do |t|
  test("deep/10000-frames-fast") do
    times = %w[pause --nonblocking].map do |mode|
      res = rbpeek("snapshot", "--pid", t.pid, "--json", *(mode == "pause" ? [] : [mode]))
      snap = json_of(res)
      depth = snap["threads"].map { |x| x["frames"].size }.max
      raise "deepest thread has #{depth} frames, expected 10003" unless depth == 10_003

      [mode, res.elapsed]
    end
    slow = times.select { |_, s| s >= 2.0 }
    summary = times.map { |m, s| "#{m} #{format('%.3f', s)} s" }.join(", ")
    slow.empty? ? ok("deep/10000-frames-fast", summary) : fail("deep/10000-frames-fast", "too slow: #{summary}")
  end

  test("robust/kill-mid-snapshot") do
    problems = []
    10.times do |i|
      pid = Process.spawn(RBPEEK, "snapshot", "--pid", t.pid.to_s, out: "/dev/null", err: "/dev/null", in: "/dev/null")
      sleep(0.002 * i)
      begin
        Process.kill("KILL", pid)
      rescue Errno::ESRCH
        nil
      end
      Process.wait(pid)
      sleep 0.05
      stopped = t.tasks.select { |tid| %w[T t].include?(t.task_stat(tid)&.first) }
      problems << "after kill #{i} (#{2 * i} ms): threads #{stopped.inspect} left stopped" unless stopped.empty?
    end
    (live = t.liveness_problem) && problems << "afterwards: #{live}"
    problems.empty? ? ok("robust/kill-mid-snapshot") : fail("robust/kill-mid-snapshot", problems.join("\n"))
  end
end
# 40 snapshots in a row of a process with a spinning thread, half of them
# --nonblocking: every stack exact (they never change), none crashing.  A
# blocked thread may be caught awake for an instant, so "running" is
# accepted where "sleeping" is expected (30-snapshot.rb checks states).
with_target("threads") do |t|
  test("robust/repeat-snapshots") do
    spec = expectation("threads")
    problems = []
    40.times do |i|
      flags = i.odd? ? ["--nonblocking"] : []
      res = rbpeek("snapshot", "--pid", t.pid, "--json", *flags)
      diffs = begin
        Expect.snapshot_diffs(json_of(res), spec, mode: :live, pid: t.pid, ruby_version: RUBY_VERSION,
                              loose_state: true)
      rescue RuntimeError => e
        [e.message]
      end
      problems << "run #{i} #{flags.join}: #{diffs.first(3).join('; ')}" unless diffs.empty?
    end
    (live = t.liveness_problem) && problems << "afterwards: #{live}"
    if problems.empty?
      ok("robust/repeat-snapshots", "40 exact")
    else
      fail("robust/repeat-snapshots", "#{problems.size} of 40 wrong:\n#{problems.first(5).join("\n")}")
    end
  end
end
finish
