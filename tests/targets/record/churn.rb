# frozen_string_literal: true
#
# churn.rb - about 1,000 threads created and finished per second (batches of
# 20 short-lived threads, each working ~0.5 ms), while the main thread
# keeps calling `churn`.  Runs until killed.
require_relative "ready"

def short_work
  i = 0
  i += 1 while i < 20_000
end

def churn
  Array.new(20) { Thread.new { short_work } }.each(&:join)
end

RecordTarget.ready!
loop do
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  churn
  rest = 0.02 - (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
  sleep rest if rest.positive?
end
