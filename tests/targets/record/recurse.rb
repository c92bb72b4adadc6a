# frozen_string_literal: true
#
# recurse.rb DEPTH - recursion DEPTH (default 10,000) deep, where the
# innermost call spins: every sample is a stack of DEPTH `down` frames.
# Runs until killed.
require_relative "ready"

def spin_here
  i = 0
  loop { i += 1 }
end

def down(n)
  n.zero? ? spin_here : down(n - 1)
end

DEPTH = Integer(ARGV.fetch(0, "10000"))
RecordTarget.ready!
down(DEPTH - 1)
