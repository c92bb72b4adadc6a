# frozen_string_literal: true
#
# execs.rb SECONDS CMD ARGS... - works in `before_exec` for SECONDS, then
# replaces itself with CMD (same PID, a new program: another Ruby, or the
# same Ruby afresh).
require_relative "ready"

def before_exec
  i = 0
  i += 1 while i < 10_000
end

seconds = Float(ARGV.shift)
RecordTarget.ready!
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
before_exec while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
exec(*ARGV)
