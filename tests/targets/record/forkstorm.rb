# frozen_string_literal: true
#
# forkstorm.rb - forks a child about every 5 ms (each child works a moment
# and exits), reaping them as they go; the parent works in `parent_work`
# between forks.  Runs until killed.
require_relative "ready"

def parent_work
  i = 0
  i += 1 while i < 20_000
end

RecordTarget.ready!
loop do
  fork { parent_work; exit!(0) }
  parent_work
  Process.wait(-1, Process::WNOHANG) while Process.wait(-1, Process::WNOHANG)
rescue Errno::ECHILD
  nil
end
