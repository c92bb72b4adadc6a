# frozen_string_literal: true
#
# gcloop.rb - spends a known share of its time in the garbage collector,
# for the GC frames of `rbpeek record` (tests/e2e/77-gc-frames.rb): the main
# thread alternates GC.start (over 300000 retained strings, so that marking
# and sweeping take a while) with about as much CPU time of plain Ruby work.
#
# SIGUSR2 makes it write its own measure, as JSON {"cpu": CPU seconds used by
# the process, "gc": CPU seconds spent in GC}, to "<RBPEEK_READY>.gc"
# (atomically).  Ruby measures GC in process CPU time (GC.stat(:time) on
# 3.1+, GC::Profiler.total_time before), so the test compares it with
# rbpeek record --on-cpu.
require "json"
require_relative "../record/ready"

KEEP = Array.new(300_000) { |i| "retained #{i}" }.freeze

STAT_TIME = GC.stat.key?(:time)
GC::Profiler.enable unless STAT_TIME
GC_FILE = "#{ENV.fetch('RBPEEK_READY', "gcloop.#{$$}")}.gc"

def gc_seconds
  STAT_TIME ? GC.stat(:time) / 1000.0 : GC::Profiler.total_time
end

trap("USR2") do
  data = JSON.generate("cpu" => cpu, "gc" => gc_seconds)
  File.write("#{GC_FILE}.tmp", data)
  File.rename("#{GC_FILE}.tmp", GC_FILE)
end

def cpu
  Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
end

def collect
  GC.start
end

# Plain Ruby work for about as much CPU time as the last collection took.
def work(seconds)
  stop = cpu + seconds
  x = 0
  x += 1 while cpu < stop
  x
end

RecordTarget.ready!
loop do
  t0 = cpu
  collect
  # as long again on average, but not exactly: a cycle of fixed length
  # near a multiple of the sampling period would alias (whole runs of
  # samples landing in the same phase)
  work((cpu - t0) * rand(0.5..1.5))
end
