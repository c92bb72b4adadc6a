# frozen_string_literal: true
#
# execs.rb CMD ARGS... - works in `before_exec` until SIGUSR1 arrives, then
# replaces itself with CMD (same PID, a new program: another Ruby, or the
# same Ruby afresh).
require_relative "ready"

def before_exec
  i = 0
  i += 1 while i < 10_000
end

$go = false
Signal.trap("USR1") { $go = true }
RecordTarget.ready!
before_exec until $go
exec(*ARGV)
