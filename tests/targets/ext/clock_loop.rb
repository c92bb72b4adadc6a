# frozen_string_literal: true

# clock_loop.rb - Process.clock_gettime in a loop: much of the time is spent
# in the kernel's vDSO (__vdso_clock_gettime), which --native unwinds through.
$stdout.puts "READY"
$stdout.flush
loop { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
