# frozen_string_literal: true
#
# prefork.rb - a preforking server's shape, without a server (for
# tests/e2e/78-subprocesses-idle.rb): the master forks two workers and
# waits in IO#wait_readable; each worker starts the threads a server has
# waiting for work -- two pool threads in ConditionVariable#wait, a queue
# consumer in Queue#pop, an acceptor in IO.select, a reader in
# IO#wait_readable, an orphan watch in IO#read, nio4r's selector when the
# gem is there -- and one thread busy in `serve` (the app's work); then its
# main thread works in `boot` for BOOT seconds (ARGV[0], default 2) of wall
# time and waits in Thread#join for the busy thread, as puma's worker does
# once booted.  None of the waiting threads ever wakes.  The master says it
# is ready once both workers are forked; the workers quit when the master
# is gone.
require "io/wait"
require_relative "ready"

BOOT = (ARGV[0] || 2).to_f

def burn
  i = 0
  i += 1 while i < 10_000
end

def serve
  loop { burn }
end

def boot(seconds)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  burn while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 < seconds
end

def waiting_threads(orphan_r)
  never_r, _never_w = IO.pipe
  m = Mutex.new
  cv = ConditionVariable.new
  q = Queue.new
  ts = []
  2.times { |i| ts << Thread.new { Thread.current.name = "pool #{i}"; m.synchronize { cv.wait(m) } } }
  ts << Thread.new { Thread.current.name = "queue"; q.pop }
  ts << Thread.new { Thread.current.name = "acceptor"; IO.select([never_r]) }
  ts << Thread.new { Thread.current.name = "reader"; never_r.wait_readable }
  ts << Thread.new { Thread.current.name = "orphan watch"; orphan_r.read; exit!(0) }
  begin
    require "nio"
    sel = NIO::Selector.new
    sel.register(never_r, :r)
    ts << Thread.new { Thread.current.name = "reactor"; sel.select }
  rescue LoadError
    nil
  end
  [ts, never_r, q]
end

def worker(orphan_r, orphan_w)
  fork do
    orphan_w.close
    $0 = "prefork worker"
    keep = waiting_threads(orphan_r)
    busy = Thread.new { Thread.current.name = "busy"; serve }
    boot(BOOT)
    busy.join
    keep
  end
end

orphan_r, orphan_w = IO.pipe
kids = [worker(orphan_r, orphan_w), worker(orphan_r, orphan_w)]
orphan_r.close
at_exit { kids.each { |k| Process.kill("KILL", k) rescue nil } }
Signal.trap("TERM") { exit(0) }
hold_r, _hold_w = IO.pipe
RecordTarget.ready!
hold_r.wait_readable
