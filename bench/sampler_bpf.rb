# frozen_string_literal: true
#
# bench/sampler_bpf.rb - what sampling costs with the in-kernel sampler
# (--sampler=bpf) against the ptrace sampler, at 1, 10 and 100 busy Ruby
# processes (the host's Ruby running tests/targets/record/hotcold.rb).
#
#   ptrace  one `rbpeek record --pid P` per process (how it is used today):
#           their CPU (user + system, from the kernel's accounting of the
#           waited children) per sample
#   bpf     one engine watching every process (build/bench_oncpu, the
#           engine of --sampler=bpf as `rbpeek agent` will use it): its CPU
#           per sample, and the kernel's own timing of the eBPF program
#           (BPF_ENABLE_STATS: run_time_ns / run_cnt), per run and per
#           sample; the program's time is charged to the interrupted
#           threads, not to rbpeek
# Both at RATE Hz.  ptrace samples every thread RATE times a second of
# wall time; bpf samples a thread RATE times a second of its CPU time, so
# with more busy processes than CPUs it takes fewer samples: compare the
# per-sample figures.  Timing is noisy on a shared machine: the figures
# are of one run, the ratio is what means something.
#
#   ruby bench/sampler_bpf.rb          (make bench runs it; needs root)
#   COUNTS=1,10 SECS=3 RATE=100 ruby bench/sampler_bpf.rb
require "fileutils"
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
BUILD = File.expand_path(ENV.fetch("BUILD", "build"), ROOT)
RBPEEK = File.join(BUILD, "rbpeek")
ONCPU = File.join(BUILD, "bench_oncpu")
SECS = Float(ENV.fetch("SECS", "3"))
RATE = Integer(ENV.fetch("RATE", "100"))
COUNTS = ENV.fetch("COUNTS", "1,10,100").split(",").map { |c| Integer(c) }

abort "bench/sampler_bpf.rb: needs root (eBPF, ptrace)" unless Process.uid.zero?
[RBPEEK, ONCPU].each { |b| abort "bench/sampler_bpf.rb: #{b} not built (make bench)" unless File.executable?(b) }

def cpu_of_children
  t = Process.times
  t.cutime + t.cstime
end

# n busy Ruby processes, ready; killed after the block.
def with_targets(n, dir)
  pids = Array.new(n) do |i|
    ready = File.join(dir, "t#{i}.ready")
    pid = Process.spawn({ "RBPEEK_READY" => ready }, "ruby", "hotcold.rb",
                        chdir: File.join(ROOT, "tests/targets/record"), out: File::NULL, err: File::NULL)
    [pid, ready]
  end
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
  sleep 0.05 until pids.all? { |_, r| File.exist?(r) } || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
  sleep 0.5
  yield pids.map(&:first)
ensure
  pids&.each do |pid, _|
    Process.kill("KILL", pid)
    Process.wait(pid)
  rescue SystemCallError
    nil
  end
end

# [samples, CPU seconds] of one rbpeek record per process.
def ptrace_run(pids, dir)
  before = cpu_of_children
  runs = pids.map do |pid|
    err = File.join(dir, "ptrace-#{pid}.err")
    [Process.spawn(RBPEEK, "record", "--pid", pid.to_s, "-r", RATE.to_s, "-d", SECS.to_s, "--no-realtime",
                   "-f", "collapsed", "-o", File::NULL, "--no-raw", out: File::NULL, err: err), err]
  end
  runs.each { |p, _| Process.wait(p) }
  samples = runs.sum { |_, err| File.read(err)[/(\d+) samples in/, 1].to_i }
  [samples, cpu_of_children - before]
end

# {samples:, cpu:, runs:, run_ns:, watched:} of one engine watching every process.
def bpf_run(pids)
  out = IO.popen([ONCPU, SECS.to_s, RATE.to_s, *pids.map(&:to_s)], err: %i[child out], &:read)
  abort "bench/sampler_bpf.rb: bench_oncpu failed: #{out}" unless $?.success?
  v = out.scan(/(\w+) ([\d.]+)/).to_h { |k, x| [k.to_sym, x.to_f] }
  v.merge(cpu: v[:user] + v[:sys])
end

puts "== sampling cost: ptrace sampler (one rbpeek record per process) vs in-kernel sampler " \
     "(one engine), #{RATE} Hz, #{SECS} s"
puts format("%6s | %8s %9s %11s | %8s %9s %11s %11s %13s %10s | %s", "procs", "samples", "CPU ms", "us/sample",
            "samples", "CPU ms", "us/sample", "(sampling)", "kernel ns/run", "ns/sample", "ptrace/bpf CPU per sample")
Dir.mktmpdir("rbpeek-bench-bpf") do |dir|
  COUNTS.each do |n|
    with_targets(n, dir) do |pids|
      ps, pcpu = ptrace_run(pids, dir)
      b = bpf_run(pids)
      per_p = ps.positive? ? pcpu * 1e6 / ps : Float::NAN
      per_b = b[:samples].positive? ? b[:cpu] * 1e6 / b[:samples] : Float::NAN
      ns_run = b[:runs].positive? ? b[:run_ns] / b[:runs] : Float::NAN
      ns_smp = b[:samples].positive? ? b[:run_ns] / b[:samples] : Float::NAN
      loop_b = b[:samples].positive? ? b[:loop_cpu] * 1e6 / b[:samples] : Float::NAN
      puts format("%6d | %8d %9.1f %11.1f | %8d %9.1f %11.1f %11.1f %13.0f %10.0f | %.1fx", n, ps, pcpu * 1e3, per_p,
                  b[:samples], b[:cpu] * 1e3, per_b, loop_b, ns_run, ns_smp, per_p / per_b)
    end
  end
end
puts "(CPU = rbpeek's user + system time, attach included; (sampling) = bpf's without loading and attaching;"
puts " kernel ns/run = the eBPF program's average run on any tick,"
puts " ns/sample = its total time per sample taken, charged to the sampled threads, not to rbpeek)"
