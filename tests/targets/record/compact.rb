# frozen_string_literal: true
#
# compact.rb - GC.compact over and over, with allocation between, so the
# objects rbpeek reads (iseqs, strings, classes) move while it samples.
# Methods of several classes, so labels need class paths.  Runs until killed.
require_relative "ready"

module Churner
  class Maker
    def make
      Array.new(2_000) { |i| "s#{i}" * 3 }.map(&:to_sym).size
    end
  end
end

def compact_loop
  maker = Churner::Maker.new
  loop do
    maker.make
    GC.compact
  end
end

RecordTarget.ready!
compact_loop
