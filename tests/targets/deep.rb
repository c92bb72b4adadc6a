# deep.rb - recursion: one thread 5,000 calls deep, one 10,000 calls deep,
# both parked in Kernel#sleep at the bottom.  Expected stacks: deep.expect.
# 10,000 frames nearly fill Ruby's default 1 MiB VM stack, so the target
# re-executes itself (same PID) with a larger one.
require "rbconfig"
unless ENV["RUBY_THREAD_VM_STACK_SIZE"]
  exec({ "RUBY_THREAD_VM_STACK_SIZE" => (8 << 20).to_s }, RbConfig.ruby, __FILE__, *ARGV)
end
require_relative "support/harness"

module Deep
  def self.dive(n)
    if n == 0
      sleep
    else
      dive(n - 1)
    end
  end
end

Thread.new { Thread.current.name = "deep-5000"; Deep.dive(5000) }
Thread.new { Thread.current.name = "deep-10000"; Deep.dive(10_000) }

RbpeekTarget.ready!
sleep
