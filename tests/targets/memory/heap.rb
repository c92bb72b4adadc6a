# frozen_string_literal: true
#
# heap.rb - a heap with known contents, for `rbpeek heap`
# (tests/e2e/76-heap.rb).  It keeps 30000 HeapProbe::Widget objects, 20000
# HeapProbe::Node structs, 10000 Gadget objects and 40000 strings, collects
# once, turns the collector off (so that nothing moves or disappears between
# Ruby's count and rbpeek's) and sleeps.
#
# SIGUSR2 makes it write ObjectSpace.count_objects, as JSON, to
# "<RBPEEK_READY>.counts" (atomically): the test then runs rbpeek heap right
# away; what the handler itself allocates is all that may differ.
require "json"
require_relative "../record/ready"

module HeapProbe
  class Widget
    def initialize(i)
      @i = i
    end
  end
  Node = Struct.new(:value)
end

class Gadget; end

KEEP = [
  Array.new(30_000) { |i| HeapProbe::Widget.new(i) },
  Array.new(20_000) { |i| HeapProbe::Node.new(i) },
  Array.new(10_000) { Gadget.new },
  Array.new(40_000) { |i| "string #{i}" },
].freeze

COUNTS = "#{ENV.fetch('RBPEEK_READY', "heap.#{$$}")}.counts"

trap("USR2") do
  counts = ObjectSpace.count_objects
  File.write("#{COUNTS}.tmp", JSON.generate(counts))
  File.rename("#{COUNTS}.tmp", COUNTS)
end

GC.start
GC.disable
RecordTarget.ready!
sleep
