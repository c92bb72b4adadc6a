# bodies.rb - frames that are not methods: a required file's top level
# (<top (required)>, under Kernel#require_relative), class and module bodies
# (<class:...>, <module:...>), rescue and ensure clauses, a block run by a
# C singleton method (Struct.new) and an initialize run by Class#new.
# Expected stacks: bodies.expect.
require_relative "support/harness"

class Handler
  def handle
    begin
      raise "boom"
    rescue RuntimeError
      sleep
    end
  end

  def cleanup
    begin
      raise "boom"
    ensure
      sleep
    end
  end
end

class Resource
  def initialize
    sleep
  end
end

Thread.new { Thread.current.name = "required"; require_relative "lib/parked_on_load" }
Thread.new do
  Thread.current.name = "class-body"
  class Config
    sleep
  end
end
Thread.new do
  Thread.current.name = "module-body"
  module Plugins
    class Loader
      sleep
    end
  end
end
Thread.new { Thread.current.name = "rescue"; Handler.new.handle }
Thread.new { Thread.current.name = "ensure"; Handler.new.cleanup }
Thread.new { Thread.current.name = "struct-new"; Struct.new(:a) { sleep } }
Thread.new { Thread.current.name = "class-new"; Resource.new }

RbpeekTarget.ready!
sleep
