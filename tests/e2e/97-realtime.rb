# frozen_string_literal: true
#
# 97-realtime.rb - the scheduling class of rbpeek record's sampling thread.
# As root it runs under SCHED_FIFO (policy 1 in /proc/PID/task/TID/stat)
# while recording, never the target; --no-realtime keeps it normal; an
# unprivileged rbpeek (setpriv to nobody) falls back to normal scheduling
# silently and records as usual; and when sampling takes more than half a
# CPU (100 threads 300 frames deep read at 100 kHz) the real-time class is
# given up.  The closing line says which.  No timing is asserted.
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

names = %w[realtime/default realtime/no-realtime realtime/eperm-fallback realtime/duty-guard]
exit 0 if skip_unless_tracing(names)

SCHED_LINE = /; scheduling: ([^\n]+)$/.freeze

# Scheduling policy of every thread of pid (0 normal, 1 SCHED_FIFO, ...).
def policies(pid)
  Dir.children("/proc/#{pid}/task").map do |tid|
    stat = File.read("/proc/#{pid}/task/#{tid}/stat")
    stat[(stat.rindex(")") + 2)..].split[38].to_i
  end
rescue Errno::ENOENT, Errno::ESRCH
  []
end

# Record the target in the background; returns [result, rbpeek's policies
# seen while it recorded, the target's].
def record_watching(target, *flags, rate: 1000, secs: 1.5)
  bg = Record::Background.new(["record", "--pid", target.pid, "-r", rate, "-d", secs, "-f", "collapsed",
                               "-o", Record.tmp("out.txt"), *flags])
  bg.wait_stderr(Record::RECORDING)
  sleep 0.3
  seen = policies(bg.pid)
  [bg.wait(timeout: 30), seen, policies(target.pid)]
end

def sched_of(res)
  Record.stderr_of(res)[SCHED_LINE, 1]
end

check("realtime/default") do |probs|
  t = Record::Script.new("busy", 30).wait_ready
  begin
    res, seen, target = record_watching(t)
    want = root? ? "real-time" : "normal"
    probs << "rbpeek record: #{res.describe}" unless res.status&.zero?
    probs << "closing line says #{sched_of(res).inspect}, expected #{want.inspect}" unless sched_of(res) == want
    probs << "rbpeek's threads while recording had policies #{seen.inspect}" unless seen.include?(root? ? 1 : 0)
    probs << "the target's threads had policies #{target.inspect}, expected normal (0)" unless target.all?(&:zero?)
    probs.concat([t.running_problem].compact)
  ensure
    t.kill
  end
  root? ? "SCHED_FIFO while recording, target untouched" : "not root: normal scheduling"
end

check("realtime/no-realtime") do |probs|
  t = Record::Script.new("busy", 30).wait_ready
  begin
    res, seen, = record_watching(t, "--no-realtime")
    probs << "rbpeek record --no-realtime: #{res.describe}" unless res.status&.zero?
    probs << "closing line says #{sched_of(res).inspect}, expected \"normal\"" unless sched_of(res) == "normal"
    probs << "rbpeek's threads had policies #{seen.inspect}, expected normal (0)" unless !seen.empty? && seen.all?(&:zero?)
  ensure
    t.kill
  end
end

# Not allowed to use SCHED_FIFO: record as nobody, spawning the program.
test("realtime/eperm-fallback") do
  next skip("realtime/eperm-fallback", "needs root (to run rbpeek as nobody)") unless root?
  next skip("realtime/eperm-fallback", "setpriv not installed") unless system("command -v setpriv >/dev/null 2>&1")

  tmp = Dir.mktmpdir("rbpeek-rt-")
  begin
    File.chmod(0o777, tmp)
    # nobody cannot reach a build below a directory only root may search
    # (a clone in /root): a copy of the binary in the temporary directory
    bin = RBPEEK
    if unsearchable_dir(RBPEEK) && RBPEEK == RBPEEK_BINARY
      bin = File.join(tmp, "rbpeek")
      FileUtils.cp(RBPEEK_BINARY, bin)
      File.chmod(0o755, bin)
    elsif (dir = unsearchable_dir(RBPEEK))
      next skip("realtime/eperm-fallback", "#{dir} is not searchable by other users")
    end
    out = File.join(tmp, "out.txt")
    script = "def work; i = 0; i += 1 while i < 10_000; end; t = Time.now; work while Time.now - t < 1"
    res = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
               bin, "record", "-r", "1000", "-f", "collapsed", "-o", out, "--", RUBY, "-e", script],
              env: { "XDG_CACHE_HOME" => File.join(tmp, "cache"), "HOME" => tmp }, chdir: tmp, timeout: 30)
    probs = []
    probs << "rbpeek record as nobody: #{res.describe}" unless res.status&.zero?
    probs << "closing line says #{sched_of(res).inspect}, expected \"normal\"" unless sched_of(res) == "normal"
    probs << "no sample of the program's work" unless File.exist?(out) && File.read(out).include?("Object#work")
    report("realtime/eperm-fallback", probs, "as nobody: normal scheduling, profile written")
  ensure
    FileUtils.rm_rf(tmp)
  end
end

check("realtime/duty-guard") do |probs|
  next "not root: no real-time class to give up" unless root?

  t = Record::Script.new("manythreads", 100, 300).wait_ready
  begin
    res, = record_watching(t, "--nonblocking", rate: 100_000, secs: 1)
    # "normal": what it ended in, and why (not "over half a CPU" next to a
    # whole-run CPU figure far below it)
    want = "normal (real-time given up: sampling took over half a CPU for 100 ms)"
    probs << "rbpeek record: #{res.describe}" unless res.status&.zero?
    probs << "closing line says #{sched_of(res).inspect}, expected #{want.inspect}" unless sched_of(res) == want
    probs.concat([t.running_problem].compact)
  ensure
    t.kill
  end
  "100 threads at 100 kHz: given up"
end

finish
