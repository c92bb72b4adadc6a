# frozen_string_literal: true
#
# alloc_sites.rb - allocating sites that change every few microseconds, for
# `rbpeek alloc` (tests/e2e/92-alloc-sites.rb, bench/alloc.rb): each round
# calls a, b and c, each making one object of its own class on its own
# line, then resumes a Fiber that makes a Durian on its own stack.  A stack
# read even a few microseconds after the allocation finds another method
# (or, for Durian, the main stack: the fiber has yielded); only a stack
# taken at the allocation puts every class on its method and line.  The
# lines are found by the markers in the comments (APPLE, ...).
#
#   ruby alloc_sites.rb late-thread   also, 1 s after ready, a thread that
#                                     makes Elderberries in e (a thread
#                                     rbpeek must pick up while watching)
require_relative "ready"

class Apple; end
class Banana; end
class Cherry; end
class Durian; end
class Elderberry; end

def a
  Apple.new # APPLE
end

def b
  Banana.new # BANANA
end

def c
  Cherry.new # CHERRY
end

def e
  Elderberry.new # ELDERBERRY
end

FIB = Fiber.new do
  loop do
    Durian.new # DURIAN
    Fiber.yield
  end
end

RecordTarget.ready!
if ARGV[0] == "late-thread"
  Thread.new do
    sleep 1
    loop { e }
  end
end
loop do
  a
  b
  c
  FIB.resume
end
