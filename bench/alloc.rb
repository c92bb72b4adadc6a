# frozen_string_literal: true
#
# bench/alloc.rb - what `rbpeek alloc` costs the process it watches.
#
# The target is tests/targets/record/allocs.rb (an allocation-heavy loop:
# 6 objects per round, nothing else) run by the host's Ruby; it reports its
# round count on SIGUSR1.  In one run we measure its speed (rounds/s) with
# nothing attached, while `rbpeek alloc` watches it, and again after rbpeek
# has exited, and print the ratios: the machine may be noisy, so only the
# ratios within a run mean anything (and the best of ROUNDS runs is shown).
#
#   ruby bench/alloc.rb            (make bench runs it; needs root)
#   RBPEEK=build/rbpeek SECS=2 ROUNDS=3 ruby bench/alloc.rb
require "fileutils"
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
RBPEEK = File.expand_path(ENV.fetch("RBPEEK", "build/rbpeek"), ROOT)
SECS = Float(ENV.fetch("SECS", "2"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
RATES = [100, 1000].freeze # rbpeek alloc --rate (stacks read per second)

abort "bench/alloc.rb: needs root (uprobes)" unless Process.uid.zero?
abort "bench/alloc.rb: #{RBPEEK} not built (make)" unless File.executable?(RBPEEK)

def mono
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# The target: started, ready, and its round counter.
class Target
  attr_reader :pid

  def initialize(dir)
    @ready = File.join(dir, "allocs.ready")
    @pid = Process.spawn({ "RBPEEK_READY" => @ready }, "ruby", "allocs.rb",
                         chdir: File.join(ROOT, "tests/targets/record"), out: File::NULL, err: File::NULL)
    deadline = mono + 30
    sleep 0.02 until File.exist?(@ready) || mono > deadline
    raise "target not ready" unless File.exist?(@ready)

    sleep 0.3
  end

  def rounds
    FileUtils.rm_f("#{@ready}.rounds")
    Process.kill("USR1", @pid)
    deadline = mono + 5
    sleep 0.005 until File.exist?("#{@ready}.rounds") || mono > deadline
    File.read("#{@ready}.rounds").to_i
  end

  # rounds per second over secs
  def speed(secs)
    a = rounds
    t = mono
    sleep secs
    (rounds - a) / (mono - t)
  end

  def stop
    Process.kill("KILL", @pid)
    Process.wait(@pid)
  end
end

def one_run(dir, rate)
  t = Target.new(dir)
  base = t.speed(SECS)
  err = File.join(dir, "rbpeek.err")
  rb = Process.spawn(RBPEEK, "alloc", "--pid", t.pid.to_s, "-r", rate.to_s, "-d", (SECS + 1.5).to_s,
                     "-f", "collapsed", "-o", File.join(dir, "out.folded"), out: File::NULL, err: err)
  sleep 0.7 # attached, probes in place
  watched = t.speed(SECS)
  Process.wait(rb)
  after = t.speed(SECS)
  cpu = File.read(err)[/own CPU ([\d.]+) s/, 1].to_f
  t.stop
  [base, watched, after, cpu]
ensure
  t&.stop rescue nil # rubocop:disable Style/RescueModifier
end

puts "== rbpeek alloc: speed of an allocation-heavy loop (6 objects per round), best of #{ROUNDS}"
puts format("%-8s %14s %14s %14s %10s %12s", "--rate", "alone r/s", "watched r/s", "after r/s", "slowdown", "rbpeek CPU")
Dir.mktmpdir("rbpeek-bench-alloc") do |dir|
  RATES.each do |rate|
    best = Array.new(ROUNDS) { one_run(dir, rate) }.max_by { |b, w, _, _| w.to_f / b }
    base, watched, after, cpu = best
    puts format("%-8d %14.0f %14.0f %14.0f %9.0fx %11.2fs", rate, base, watched, after, base / watched, cpu)
  end
end
puts "(slowdown = alone / watched; per allocation that is about " \
     "(1/watched - 1/alone) / 6 seconds; see README.md)"
