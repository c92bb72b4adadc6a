# frozen_string_literal: true
#
# zombie_main.rb - a process whose main thread has exited while another
# runs on: the main thread calls pthread_exit(3) through Fiddle (which
# calls C without the GVL), so the process's thread-group leader becomes a
# zombie -- /proc/PID/maps is empty, /proc/PID/mem and process_vm_readv()
# naming the PID fail -- while the worker keeps running `churn` (as after a
# C extension or an embedding program ends its main thread that way).
require "fiddle"
require_relative "ready"

def churn(n) = n.zero? ? (x = 0; 20_000.times { |i| x += i }; x) : churn(n - 1)

worker = Thread.new do
  loop { churn(5) } # CHURN
end
sleep 0.01 until worker.status == "run"
# ready! is written by the worker once the leader is a zombie
Thread.new do
  sleep 0.01 until File.read("/proc/#{$$}/stat")[/\) (\S)/, 1] == "Z"
  RecordTarget.ready!
end
pthread_exit = Fiddle::Function.new(Fiddle::Handle::DEFAULT["pthread_exit"], [Fiddle::TYPE_VOIDP],
                                    Fiddle::TYPE_VOID)
pthread_exit.call(nil)
