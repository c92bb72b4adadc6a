# nested.rb - one thread, parked deep inside methods of a class nested in a
# module: instance, singleton and module_function methods, blocks two levels
# deep, and the C methods Integer#times, Array#each and Kernel#sleep.
# Expected stacks: nested.expect.
require_relative "support/harness"

module Outer
  module Util
    module_function

    def helper(n)
      Inner.new.run(n)
    end
  end

  class Inner
    def self.build(n)
      Util.helper(n)
    end

    def run(n)
      step(n)
    end

    def step(n)
      n.times do |i|
        [i].each do |_x|
          RbpeekTarget.ready!
          sleep
        end
      end
    end
  end
end

Outer::Inner.build(1)
