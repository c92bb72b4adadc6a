# frozen_string_literal: true
#
# spinners.rb - two threads spinning in methods of their own (`spin_a`,
# `spin_b`) while the main thread waits in Thread#join: the GVL passes from
# one to the other every timeslice (100 ms), so a sampler that stops only
# the GVL's holder keeps guessing wrong after each switch.
require_relative "ready"

def spin_a
  x = 0
  x += 1 while true # SPIN_A
end

def spin_b
  x = 0
  x += 1 while true # SPIN_B
end

a = Thread.new { spin_a }
b = Thread.new { spin_b }
sleep 0.01 until a.status == "run" && b.status == "run"
RecordTarget.ready!
a.join
