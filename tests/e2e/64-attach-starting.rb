# frozen_string_literal: true
# e2e-timeout: 300
#
# 64-attach-starting.rb - `--pid` of a Ruby process attached right after its
# spawn (issue 30.3): rbpeek is started as soon as Process.spawn returns,
# 50 times, so the first attach lands a few milliseconds after the spawn,
# while the process may not have loaded Ruby or set its VM up yet.  Every
# attach must succeed (after one line saying it waits), or fail past the
# 2 s bound with a message that says the VM was not set up; never with
# "inconsistent Ruby VM data" or "not a Ruby process".  snapshot for most,
# record, top and alloc for some; each target is killed after.
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
N = Integer(ENV.fetch("ATTACH_STARTING_N", "50"))
names = %w[attach-starting/50-attaches]
exit 0 if skip_unless_tracing(names)

WAIT_LINE = /^rbpeek: process \d+ is starting \(its Ruby VM is not set up yet\): waiting up to 2 s$/.freeze
PAST_BOUND = /the Ruby VM is not set up yet \(the process is starting\) after 2 s of waiting/.freeze

def command(i, pid)
  case i % 10
  when 3 then ["record", "--pid", pid, "-d", "0.2", "-f", "collapsed", "-o", R.tmp("young.txt"), "--no-raw"]
  when 6 then ["top", "--pid", pid, "-n", "1", "--delay", "0.2"]
  when 9 then ["alloc", "--pid", pid, "-d", "0.2", "-f", "collapsed", "-o", R.tmp("young-alloc.txt")]
  else ["snapshot", "--pid", pid]
  end
end

check("attach-starting/50-attaches") do |probs|
  tally = Hash.new(0)
  N.times do |i|
    pid = Process.spawn(RUBY, "-e", "def spin = loop { Object.new }; spin", %i[out err] => "/dev/null")
    register_pid(pid)
    args = command(i, pid)
    res = R.rec(*args, timeout: 30)
    err = R.stderr_of(res)
    waited = err.lines.grep(WAIT_LINE).size
    kind = args.first
    if res.status&.zero?
      tally["#{kind} ok#{waited.positive? ? ' after waiting' : ''}"] += 1
    elsif res.status == 7 && err =~ PAST_BOUND
      tally["#{kind} past the bound"] += 1
    else
      probs << "attach #{i + 1} (#{args.join(' ')}): #{res.describe}"
    end
    probs << "attach #{i + 1}: #{waited} lines saying it waits (at most one)" if waited > 1
    kill_pid(pid)
    begin
      Process.wait(pid)
    rescue Errno::ECHILD
      nil # reaped already
    end
  end
  tally.sort.map { |k, v| "#{v} #{k}" }.join(", ")
end
