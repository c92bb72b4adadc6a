# frozen_string_literal: false
#
# allocs.rb - known allocation patterns for `rbpeek alloc` (tests/e2e/
# 90-alloc.rb, bench/alloc.rb).  `strings` makes 3 Strings per turn (on
# one line), `arrays` 1 Array and `points` 2 Points (ordinary objects made
# by Class#new); nothing else allocates.
#
#   ruby allocs.rb          tight: one turn of each per round, so Strings :
#                           Arrays : Points are exactly 3 : 1 : 2
#   ruby allocs.rb phased   each method keeps turning for 30 ms before the
#                           next one runs: a stack read a millisecond late
#                           still finds the method that allocated
#
#   ruby allocs.rb threaded tight, in a thread of its own, beside 11 threads
#                           that only sleep (a puma worker's pool and reactor)
#
# IDLE_THREADS=N starts N more threads that only sleep, before the target
# says it is ready.
#
# SIGUSR1 writes the number of rounds so far to "<RBPEEK_READY>.rounds":
# the test and the benchmark measure the target's speed with it.
require_relative "ready"

class Point; end

def strings(turns)
  i = 0
  while i < turns
    a = "x"; b = "y"; c = "z" # STRINGS
    i += 1
  end
  [a, b, c].size if false
end

def arrays(turns)
  i = 0
  while i < turns
    [1, 2].size # ARRAYS
    i += 1
  end
end

def points(turns)
  i = 0
  while i < turns
    Point.new; Point.new # POINTS
    i += 1
  end
end

# Call m with batches of 100 turns until 30 ms have passed.
def phase(m)
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC, :millisecond)
  send(m, 100) while Process.clock_gettime(Process::CLOCK_MONOTONIC, :millisecond) - t < 30
end

$rounds = 0
if (ready = ENV["RBPEEK_READY"])
  Signal.trap("USR1") do
    File.write("#{ready}.rounds.tmp", "#{$rounds}\n")
    File.rename("#{ready}.rounds.tmp", "#{ready}.rounds")
  end
end
idle = Integer(ENV.fetch("IDLE_THREADS", ARGV[0] == "threaded" ? "11" : "0"))
idle.times { Thread.new { sleep } }
def tight
  loop do
    strings(1)
    arrays(1)
    points(1)
    $rounds += 1
  end
end
RecordTarget.ready!
Thread.new { tight }.join if ARGV[0] == "threaded"
if ARGV[0] == "phased"
  loop do
    phase(:strings)
    phase(:arrays)
    phase(:points)
    $rounds += 1
  end
end
tight
