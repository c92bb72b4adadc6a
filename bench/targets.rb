# bench/targets.rb DEPTH [THREADS] - a target for the sampling benchmarks:
# THREADS threads, each recursing DEPTH frames and then spinning on one line.
# The threads wait at their depth until all are there, so that "ready" is
# printed (and a benchmark starts) only once no stack is still growing.
depth = Integer(ARGV[0] || 10)
threads = Integer(ARGV[1] || 1)
AT_DEPTH = Thread::Queue.new
GO = Thread::Queue.new
def dive(n) = n.zero? ? spin : dive(n - 1)
def spin
  unless Thread.current == Thread.main
    AT_DEPTH << 1
    GO.pop
  end
  x = 0
  x += 1 while true
end
(threads - 1).times { Thread.new { dive(depth) } }
(threads - 1).times { AT_DEPTH.pop }
(threads - 1).times { GO << 1 }
$stdout.puts "ready"
$stdout.flush
dive(depth)
