# frozen_string_literal: true
#
# twothreads.rb - the main thread alternates between two CPU-bound methods
# (`hot` ~3/4 of its time, `cold` ~1/4, as in hotcold.rb) while a thread
# named "napper" sleeps in `nap`: for `rbpeek top` (per-thread views, GVL
# and on-CPU shares).
require_relative "ready"

def hot
  i = 0
  i += 1 while i < 30_000
end

def cold
  i = 0
  i += 1 while i < 10_000
end

def nap
  sleep 0.05
end

Thread.new do
  Thread.current.name = "napper"
  loop { nap }
end
RecordTarget.ready!
loop do
  hot
  cold
end
