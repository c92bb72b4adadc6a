# frozen_string_literal: true
# e2e-timeout: 180 (two short runs of a three-process tree, with a report)
#
# 78-subprocesses-idle.rb - threads waiting for work are hidden in every
# process of a --subprocesses set, as with one process (issue 25 item 3),
# on a small preforking tree (tests/targets/record/prefork.rb): each worker
# has threads in ConditionVariable#wait, Queue#pop, IO.select,
# IO#wait_readable, IO#read (and nio4r's selector when installed), one
# thread busy in `serve`, and a main thread that works in `boot` for 2 s
# and then waits in Thread#join -- as a puma worker does once booted; the
# master waits in IO#wait_readable.  rbpeek starts while the workers boot.
#   - subproc-idle/top: top --subprocesses -n 1 shows the work (`burn`,
#     `boot`) and no wait row (the main threads' Thread#join was shown
#     before: their boot work kept them above the 2 % share of a waiter);
#     --idle shows the waits;
#   - subproc-idle/record: record --subprocesses makes the same choice: no
#     stack ends in a wait, and `report --idle` of its raw file has them.
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
names = %w[subproc-idle/top subproc-idle/record]
exit 0 if skip_unless_tracing(names)

WAITS = ["Thread#join", "Thread::ConditionVariable#wait", "Thread::Mutex#sleep", "Thread::Queue#pop", "IO.select",
         "IO#wait_readable", "IO#read", "NIO::Selector#select", "Kernel#sleep"].freeze
# A wait row may only come from a thread caught entering its wait while it
# held the GVL (these threads never wake): a sample or two.
MAX_WAIT_PCT = 2.0

# prefork.rb started afresh (its workers booting), both workers forked.
def with_prefork(&block)
  R.with_script("prefork", 2) do |s|
    deadline = R.mono + 10
    sleep 0.05 until R.children_of(s.pid).size >= 2 || R.mono > deadline
    block.call(s)
  end
end

check("subproc-idle/top") do |probs|
  with_prefork do |s|
    res = R.rec("top", "--pid", s.pid, "--subprocesses", "-n", "1", "--delay", "4", timeout: 40)
    next probs << "top: #{res.describe}" unless res.status&.zero?

    rows = R.top_rows(res.stdout)
    waits = rows.select { |_, f| WAITS.include?(f) }
    wait_pct = waits.sum { |p, _| p }
    probs << "wait rows shown by default: #{waits.inspect} (#{wait_pct.round(1)}% > #{MAX_WAIT_PCT}%)" if wait_pct > MAX_WAIT_PCT
    burn = rows.find { |_, f| f == "Object#burn" }
    probs << "the workers' work (Object#burn) is not the first row: #{rows.first(4).inspect}" unless burn && rows.first == burn
    boot = rows.find { |_, f| f == "Object#boot" }
    idle = res.stdout[/^idle: ([\d.]+)% of the window's samples are threads waiting for work, hidden/, 1]
    probs << "no idle line saying the hidden share: #{res.stdout.lines.first(5).inspect}" unless idle && idle.to_f.positive?
    procs = res.stdout[/(\d+) processes/, 1].to_i
    probs << "expected 3 processes in the header: #{res.stdout.lines.first(3).inspect}" unless procs == 3
    shown = R.rec("top", "--pid", s.pid, "--subprocesses", "-n", "1", "--delay", "1", "--idle", timeout: 30)
    shown_waits = R.top_rows(shown.stdout).select { |_, f| WAITS.include?(f) }.map(&:last)
    unless shown.status&.zero? && (%w[Thread#join Thread::Queue#pop IO.select] - shown_waits).empty?
      probs << "--idle: the waits are not shown: #{shown.describe} #{shown_waits.inspect}"
    end
    probs << "stdout:\n#{res.stdout}" unless probs.empty?
    "#{idle}% idle hidden; wait rows #{wait_pct.round(1)}%; " \
      "#{boot ? 'boot caught in the window' : 'boot not caught (over before sampling began)'}; " \
      "first rows #{rows.first(3).map { |p, f| "#{f} #{p}%" }.join(', ')}; with --idle: #{shown_waits.first(4).join(', ')}"
  end
end

check("subproc-idle/record") do |probs|
  with_prefork do |s|
    out = R.tmp("prefork.txt")
    res = R.rec("record", "--pid", s.pid, "--subprocesses", "-d", "4", "-f", "collapsed", "-o", out, timeout: 40)
    next probs << "record: #{res.describe}" unless res.status&.zero?

    stacks = R.read_collapsed(out)
    total = R.total(stacks)
    leaf_waits = stacks.select { |frames, _| WAITS.include?(frames.last.label) }
    wait_n = leaf_waits.sum { |_, n| n }
    if wait_n * 100.0 > MAX_WAIT_PCT * total
      probs << "#{wait_n} of #{total} samples end in a wait: #{leaf_waits.first(4).map { |f, n| [f.last.label, n] }.inspect}"
    end
    labels = stacks.flat_map { |frames, _| frames.map(&:label) }.uniq
    probs << "Object#burn (the workers' work) missing" unless labels.include?("Object#burn")
    raw = R.stderr_of(res)[R::RAW_LINE, 1]
    kept = nil
    if raw
      all = R.tmp("prefork-idle.txt")
      rep = R.rec("report", "-i", raw, "--idle", "-f", "collapsed", "-o", all, timeout: 30)
      if rep.status&.zero?
        kept = R.read_collapsed(all).map { |frames, _| frames.last.label }.uniq & WAITS
        probs << "report --idle: the waits are missing: #{kept.inspect}" unless (%w[Thread#join Thread::Queue#pop IO.select] - kept).empty?
      else
        probs << "report --idle: #{rep.describe}"
      end
    else
      probs << "no raw file named on stderr: #{R.stderr_of(res)}"
    end
    hidden = R.stderr_of(res)[/(\d+ of \d+ samples \(\d+%\)) were threads waiting for work/, 1]
    "#{hidden} hidden; #{wait_n} of #{total} kept samples end in a wait; " \
      "boot #{labels.include?('Object#boot') ? 'caught' : 'not caught'}; with --idle: #{kept&.join(', ')}"
  end
end
