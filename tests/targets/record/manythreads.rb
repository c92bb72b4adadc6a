# frozen_string_literal: true
#
# manythreads.rb [THREADS] [DEPTH] - THREADS threads (default 100), each
# DEPTH frames deep (default 300) and asleep there, and a main thread that
# spins: a target whose every sample is costly (a sampler that reads all of
# them at 100 kHz cannot keep up).
require_relative "ready"

threads = Integer(ARGV.fetch(0, "100"))
depth = Integer(ARGV.fetch(1, "300"))

def dive(n, &blk) = n.zero? ? blk.call : dive(n - 1, &blk)

threads.times { Thread.new { dive(depth) { sleep } } }
sleep 0.05 until Thread.list.size > threads
RecordTarget.ready!
i = 0
i += 1 while true
