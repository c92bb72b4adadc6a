# frozen_string_literal: true
#
# hotcold.rb - one thread alternating between two CPU-bound methods forever:
# `hot` runs 3 times the iterations of `cold`, so it takes ~3/4 of the CPU
# time and should carry ~3/4 of the samples.  A round (~1 ms) is much shorter
# than a sampling period, so the sampler cannot lock onto its phase.
require_relative "ready"

def hot
  i = 0
  i += 1 while i < 30_000
end

def cold
  i = 0
  i += 1 while i < 10_000
end

RecordTarget.ready!
loop do
  hot
  cold
end
