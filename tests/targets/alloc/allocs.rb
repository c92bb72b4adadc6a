# frozen_string_literal: false
#
# allocs.rb - a known allocation pattern for `rbpeek alloc` (tests/e2e/
# 90-alloc.rb): every round, `strings` makes 3 Strings (line 13), `arrays`
# 1 Array (line 18) and `points` 2 Points (line 22, an ordinary object made
# by Class#new), and nothing else allocates.  So Strings : Arrays : Points
# are 3 : 1 : 2, each at its own method and line.
require_relative "../record/ready"

class Point; end

def strings
  a = "x"; b = "y"; c = "z"
  [a, b, c].size if false
end

def arrays
  [1, 2].size
end

def points
  Point.new; Point.new
end

RecordTarget.ready!
loop do
  strings
  arrays
  points
end
