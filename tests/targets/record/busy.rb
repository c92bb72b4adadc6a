# frozen_string_literal: true
#
# busy.rb SECONDS - calls `work` (CPU-bound) for SECONDS (default 1) after it
# is ready, then exits 0.
require_relative "ready"

def work
  i = 0
  i += 1 while i < 10_000
end

seconds = Float(ARGV.fetch(0, "1"))
RecordTarget.ready!
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
work while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
