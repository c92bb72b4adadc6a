# bench/targets.rb DEPTH [THREADS] - a target for the sampling benchmarks:
# THREADS threads, each recursing DEPTH frames and then spinning on one line.
depth = Integer(ARGV[0] || 10)
threads = Integer(ARGV[1] || 1)
def dive(n) = n.zero? ? spin : dive(n - 1)
def spin
  x = 0
  x += 1 while true
end
(threads - 1).times { Thread.new { dive(depth) } }
$stdout.puts "ready"
$stdout.flush
dive(depth)
