# frozen_string_literal: true
#
# bench/trace/fib.rb - cost per call of tracing recursive fib(30)
# (2,692,537 calls) in one Ruby process: untraced, RbPeek::Trace with every
# stream, RbPeek::Trace without C calls, ruby-prof (wall time, default
# measure), stackprof (:cpu mode, 1 ms interval: a sampler, for
# reference), and an empty TracePoint on call/return/c_call/c_return.
# Rounds are interleaved and the best of ROUNDS is kept per mode; the
# figure is (time - untraced time) / calls.  Usage: ruby -I build/ext
# bench/trace/fib.rb [N] [ROUNDS]
require "rbpeek/trace"

N = Integer(ARGV[0] || 30)
ROUNDS = Integer(ARGV[1] || 3)

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

CALLS = (1..N).reduce([1, 1]) { |(a, b), _| [b, a + b + 1] }.first # calls of fib(N)

def clock
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def timed
  t = clock
  yield
  clock - t
end

peers = {}
begin
  require "ruby-prof"
  peers["ruby-prof"] = lambda do
    timed { RubyProf::Profile.profile { fib(N) } }
  end
rescue LoadError => e
  warn "ruby-prof not available: #{e.message}"
end
begin
  require "stackprof"
  peers["stackprof (cpu)"] = lambda do
    timed { StackProf.run(mode: :cpu, interval: 1000) { fib(N) } }
  end
rescue LoadError => e
  warn "stackprof not available: #{e.message}"
end

MODES = {
  "untraced" => -> { timed { fib(N) } },
  "rbpeek trace (all streams)" => lambda do
    RbPeek::Trace.start
    t = timed { fib(N) }
    RbPeek::Trace.stop
    t
  end,
  "rbpeek trace (no C calls)" => lambda do
    RbPeek::Trace.start(c_calls: false)
    t = timed { fib(N) }
    RbPeek::Trace.stop
    t
  end,
  "empty C hook (VM floor)" => lambda do
    # the same hook installation with a callback that does nothing
    RbPeek::Trace._start(1 << 10, true, false, false, false, false, true)
    t = timed { fib(N) }
    RbPeek::Trace.stop
    t
  end,
  "empty TracePoint" => lambda do
    tp = TracePoint.new(:call, :return, :c_call, :c_return) {}
    timed { tp.enable { fib(N) } }
  end,
}.merge(peers)

best = Hash.new(Float::INFINITY)
ROUNDS.times do
  MODES.each do |name, fn|
    GC.start
    best[name] = [best[name], fn.call].min
  end
end

base = best["untraced"]
printf("fib(%d): %d calls, best of %d rounds, Ruby %s\n", N, CALLS, ROUNDS, RUBY_VERSION)
printf("%-28s %10s %14s\n", "mode", "time (s)", "ns/call over untraced")
best.each do |name, t|
  printf("%-28s %10.3f %14.1f\n", name, t, (t - base) * 1e9 / CALLS)
end
clock = RbPeek::Trace._clock_cost
floor = (best["empty C hook (VM floor)"] - base) * 1e9 / CALLS
all = (best["rbpeek trace (all streams)"] - base) * 1e9 / CALLS
printf("where a traced call goes (all streams, 8 events per fib call: call, return, 3 C calls, 3 C returns):\n")
printf("  VM hook dispatch (empty C hook)   %6.1f ns\n", floor)
printf("  time stamps (%s, %.1f ns each)  %6.1f ns\n", RbPeek::Trace.stats[:tsc] ? "rdtsc" : "clock_gettime", clock, 8 * clock)
printf("  the rest (method lookup, ring)    %6.1f ns\n", all - floor - 8 * clock)
if best["ruby-prof"] < Float::INFINITY
  ours = (best["rbpeek trace (all streams)"] - base) / CALLS
  rp = (best["ruby-prof"] - base) / CALLS
  printf("rbpeek (all streams) / ruby-prof = 1/%.1f (target: at most 1/10)\n", rp / ours)
end
