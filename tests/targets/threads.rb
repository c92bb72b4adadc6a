# threads.rb - several named threads in different states: sleeping in
# Kernel#sleep inside Kernel#loop, blocked in Queue#pop, Mutex#lock,
# ConditionVariable#wait, IO#read and Thread#join, one unnamed thread (its
# name comes from the OS thread name), and one thread spinning on a single
# line (it holds the GVL).  Expected stacks: threads.expect.
require_relative "support/harness"

class Worker
  def initialize(name)
    @name = name
  end

  def park
    Thread.current.name = @name
    loop do
      sleep
    end
  end

  def spin
    Thread.current.name = @name
    RbpeekTarget.spinning!
    $spin += 1 while true
  end
end

module Sync
  def self.pop(queue)
    queue.pop
  end
end

queue = Queue.new
mutex = Mutex.new
mutex.lock
reader, _writer = IO.pipe

sleeper = Thread.new { Worker.new("worker-1").park }
Thread.new { Thread.current.name = "queue-pop"; Sync.pop(queue) }
Thread.new { Thread.current.name = "mutex-lock"; mutex.lock }
Thread.new do
  Thread.current.name = "cond-wait"
  m = Mutex.new
  m.synchronize { ConditionVariable.new.wait(m) }
end
Thread.new { Thread.current.name = "io-read"; reader.read }
Thread.new { Thread.current.name = "joiner"; sleeper.join }
Thread.new { sleep }
Thread.new { Worker.new("spinner").spin }

RbpeekTarget.ready!
sleep
