# frozen_string_literal: true
#
# twothreads.rb - hotcold.rb's main thread (`hot` ~3/4 of its time, `cold`
# ~1/4) plus a thread named "napper" sleeping in `nap`: for `rbpeek top`
# (per-thread views, GVL and on-CPU shares).

def nap
  sleep 0.05
end

Thread.new do
  Thread.current.name = "napper"
  loop { nap }
end
require_relative "hotcold" # says it is ready, then loops forever
