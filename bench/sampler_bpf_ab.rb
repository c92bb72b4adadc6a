# frozen_string_literal: true
#
# bench/sampler_bpf_ab.rb - the in-kernel sampler's eBPF program, two builds
# against each other in the same run: the kernel's own timing of the
# program (BPF_ENABLE_STATS: run_time_ns / run_cnt, and per sample taken)
# per run and per tick on a watched thread (all runs' time: the ticks on
# other processes cost a little too) of BASE's bench_oncpu and of this
# build's, measured alternately (ROUNDS
# rounds of SECS seconds each) on the same busy Ruby processes, at stack
# depths DEPTHS (bench/targets.rb: one thread recursing DEPTH frames, then
# spinning).  The ratio of the medians is the figure to read; absolute
# times follow the machine's load.
#
#   BASE=/path/to/old/bench_oncpu ruby bench/sampler_bpf_ab.rb
#   BASE=... DEPTHS=10,50 PROCS=2 ROUNDS=5 SECS=3 RATE=1000 ruby bench/sampler_bpf_ab.rb
#
# (make a BASE with `git worktree add /tmp/old REV && make -C /tmp/old
# build/bench_oncpu`, or keep a copy of build/bench_oncpu before a change.)
# Needs root.
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
NEW = File.join(File.expand_path(ENV.fetch("BUILD", "build"), ROOT), "bench_oncpu")
BASE = ENV.fetch("BASE") { abort "bench/sampler_bpf_ab.rb: BASE=path of the old bench_oncpu" }
SECS = Float(ENV.fetch("SECS", "3"))
RATE = Integer(ENV.fetch("RATE", "1000"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
PROCS = Integer(ENV.fetch("PROCS", "2"))
DEPTHS = ENV.fetch("DEPTHS", "10,50").split(",").map { |d| Integer(d) }

abort "bench/sampler_bpf_ab.rb: needs root (eBPF)" unless Process.uid.zero?
[BASE, NEW].each { |b| abort "bench/sampler_bpf_ab.rb: #{b} not built" unless File.executable?(b) }

def with_targets(depth)
  ios = Array.new(PROCS) do
    IO.popen(["ruby", File.join(ROOT, "bench/targets.rb"), depth.to_s, "1"], "r")
  end
  ios.each(&:gets)   # "ready": the stack is at its depth
  sleep 0.3
  yield ios.map(&:pid)
ensure
  ios&.each do |io|
    Process.kill("KILL", io.pid)
    io.close
  rescue SystemCallError, IOError
    nil
  end
end

def run(bin, pids)
  out = IO.popen([bin, SECS.to_s, RATE.to_s, *pids.map(&:to_s)], err: %i[child out], &:read)
  abort "bench/sampler_bpf_ab.rb: #{bin} failed: #{out}" unless $?.success?
  v = out.scan(/(\w+) ([\d.]+)/).to_h { |k, x| [k.to_sym, x.to_f] }
  [v[:runs].positive? ? v[:run_ns] / v[:runs] : Float::NAN,
   v[:watched].positive? ? v[:run_ns] / v[:watched] : Float::NAN, v[:samples].to_i, v[:errors].to_i]
end

def median(a) = a.sort[a.size / 2]

puts "== in-kernel sampler, eBPF program time: base #{BASE} vs #{NEW}"
puts "   #{PROCS} busy processes, #{RATE} Hz, #{ROUNDS} alternate rounds of #{SECS} s (medians)"
puts format("%6s | %12s %12s %8s | %12s %12s %8s | %s", "depth", "base ns/run", "ns/sample", "samples",
            "new ns/run", "ns/sample", "samples", "new/base per sample")
DEPTHS.each do |depth|
  with_targets(depth) do |pids|
    base = []
    new = []
    ROUNDS.times do
      base << run(BASE, pids)
      new << run(NEW, pids)
    end
    b = [0, 1].map { |i| median(base.map { |r| r[i] }) }
    n = [0, 1].map { |i| median(new.map { |r| r[i] }) }
    err = (base + new).sum { |r| r[3] }
    puts format("%6d | %12.0f %12.0f %8d | %12.0f %12.0f %8d | %.2f%s", depth, b[0], b[1], base.sum { |r| r[2] },
                n[0], n[1], new.sum { |r| r[2] }, n[1] / b[1], err.positive? ? "  (#{err} decode errors)" : "")
  end
end
