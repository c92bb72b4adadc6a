# bench/workload.rb SECONDS_OF_WORK - a fixed amount of CPU-bound Ruby work
# (calls 20 frames deep), timed by the script itself on the wall clock, so a
# profiler's slowdown of the process shows as a longer time.  It first
# calibrates how many rounds take SECONDS_OF_WORK unprofiled (BENCH_ROUNDS
# overrides), waits 1 s for an outside profiler to attach, then prints
# "rounds N seconds S cpu C wait W": wall-clock seconds (a paused process
# takes longer), the process's CPU seconds (what in-process work costs it)
# and the main thread's seconds waiting for a CPU (schedstat).
#
# BENCH_STACKPROF=HZ profiles the work in-process with stackprof (mode
# :cpu, interval 1/HZ s), the way a Ruby developer would use it.
def leaf
  x = 0
  200.times { |i| x += i * i }
  x
end

def dive(n) = n.zero? ? leaf : dive(n - 1)

def round = 50.times { dive(20) }

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

# The main thread's time waiting for a CPU while runnable (schedstat's second
# field, ns): what a stop costs a target on a full machine.
def rq_wait
  File.read("/proc/thread-self/schedstat").split[1].to_i
rescue SystemCallError
  0
end

rounds = Integer(ENV.fetch("BENCH_ROUNDS", "0"))
if rounds.zero?
  t0 = now
  rounds += 1 while (round || true) && now - t0 < Float(ARGV.fetch(0, "2"))
end
sleep 1
hz = ENV["BENCH_STACKPROF"]
if hz
  require "stackprof"
  w0 = rq_wait
  t0 = now
  c0 = cpu
  StackProf.run(mode: :cpu, interval: 1_000_000 / Integer(hz), raw: true) { rounds.times { round } }
else
  w0 = rq_wait
  t0 = now
  c0 = cpu
  rounds.times { round }
end
puts "rounds #{rounds} seconds #{format('%.4f', now - t0)} cpu #{format('%.4f', cpu - c0)} " \
     "wait #{format('%.4f', (rq_wait - w0) / 1e9)}"
