# frozen_string_literal: true
#
# bench/alloc.rb - what `rbpeek alloc` costs the process it watches.
#
# The target is tests/targets/record/allocs.rb (an allocation-heavy loop:
# 6 objects per round, nothing else) run by the host's Ruby; it reports its
# round count on SIGUSR1.  In one run we measure its speed (rounds/s) with
# nothing attached and while `rbpeek alloc` watches it - exact sites
# (stacks copied by eBPF in the kernel), approximate sites (--no-bpf,
# stacks read after the allocation), and exact sites copying up to 100,000
# stacks/s (what the copy itself costs) - under the host's Ruby and each
# Ruby chroot of tools/setup-rubies.sh, and print the ratios:
# the machine may be noisy, so only ratios within a run mean anything (the
# best of ROUNDS runs is shown).
#
# Beside the loop, under the host's Ruby only: the same loop with 11 more
# threads that only sleep (a puma worker's pool), and bench/railsish.rb (8
# worker threads serving Rails-like requests: 60-100 frames deep, strings,
# hashes and JSON, short sleeps), whose speed is requests per second and
# whose allocation rate rbpeek reports.  With RBPEEK_PEER=<another rbpeek>
# the exact mode is measured with it too, in the same run ("exact peer").
#
#   ruby bench/alloc.rb            (make bench runs it; needs root)
#   RBPEEK=build/rbpeek SECS=2 ROUNDS=3 ruby bench/alloc.rb
#   RBPEEK_PEER=/tmp/main/build/rbpeek ONLY=host TARGETS=idle,railsish ruby bench/alloc.rb
require "fileutils"
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
RBPEEK = File.expand_path(ENV.fetch("RBPEEK", "build/rbpeek"), ROOT)
PEER = ENV["RBPEEK_PEER"] && File.expand_path(ENV["RBPEEK_PEER"])
SECS = Float(ENV.fetch("SECS", "2"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))

abort "bench/alloc.rb: needs root (uprobes)" unless Process.uid.zero?
abort "bench/alloc.rb: #{RBPEEK} not built (make)" unless File.executable?(RBPEEK)

def mono
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

CHROOTS = "/var/cache/rbpeek/chroots"

# The target: started (by the host's Ruby, or a chroot's), ready, and its
# round counter.
class Target
  attr_reader :pid

  # xy: a chroot's Ruby ("3.3"), nil the host's; kind: :loop, :idle (the
  # loop and 11 sleeping threads) or :railsish (host only)
  def initialize(dir, xy, kind = :loop)
    if kind == :railsish
      @ready = File.join(dir, "railsish.count")
      FileUtils.rm_f(@ready)
      @pid = Process.spawn({ "RAILSISH_COUNT" => @ready }, "ruby", File.join(ROOT, "bench/railsish.rb"), "8",
                           out: (rd, wr = IO.pipe)[1], err: File::NULL)
      wr.close
      raise "railsish not ready" unless rd.gets&.start_with?("ready")

      @count_file = @ready
      sleep 0.5
      return
    end
    if xy
      croot = File.join(CHROOTS, xy)
      inner = "/tmp/rbpeek-bench-alloc.#{$$}"
      FileUtils.mkdir_p(File.join(croot, inner))
      %w[allocs.rb ready.rb].each { |f| FileUtils.cp(File.join(ROOT, "tests/targets/record", f), File.join(croot, inner)) }
      @ready = File.join(croot, inner, "allocs.ready")
      @pid = Process.spawn({ "RBPEEK_READY" => File.join(inner, "allocs.ready") }, "chroot", croot, "/bin/sh", "-c",
                           "cd #{inner} && exec ruby#{xy} allocs.rb", out: File::NULL, err: File::NULL)
    else
      @ready = File.join(dir, "allocs.ready")
      @pid = Process.spawn({ "RBPEEK_READY" => @ready, "IDLE_THREADS" => kind == :idle ? "11" : "0" },
                           "ruby", "allocs.rb",
                           chdir: File.join(ROOT, "tests/targets/record"), out: File::NULL, err: File::NULL)
    end
    FileUtils.rm_f(@ready)
    deadline = mono + 30
    sleep 0.02 until File.exist?(@ready) || mono > deadline
    raise "target not ready" unless File.exist?(@ready)

    sleep 0.3
  end

  def rounds
    file = @count_file || "#{@ready}.rounds"
    FileUtils.rm_f(file)
    Process.kill("USR1", @pid)
    deadline = mono + 5
    sleep 0.005 until File.exist?(file) || mono > deadline
    File.read(file).to_i
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
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    FileUtils.rm_rf(File.dirname(@ready)) if @ready.start_with?(CHROOTS)
  end
end

# How rbpeek alloc watches in each measured mode (nil: not at all).
MODES = {
  "alone" => nil,
  "exact" => [],                     # stacks copied in the kernel (eBPF), --rate 1000
  "approx" => ["--no-bpf"],          # stacks read after the allocation, --rate 1000
  "exact r100k" => ["-r", "100000"]  # copies at up to 100,000 stacks/s: the copy's own cost
}
MODES["exact peer"] = [] if PEER
MODES.freeze

# Rounds/s of one target in each mode, and rbpeek's CPU seconds per mode.
def one_run(dir, xy, kind)
  t = Target.new(dir, xy, kind)
  MODES.to_h do |name, flags|
    next [name, [t.speed(SECS), 0.0, nil]] unless flags

    err = File.join(dir, "rbpeek.err")
    # the kernel times the eBPF program in the exact modes (BPF_ENABLE_STATS)
    bin = name == "exact peer" ? PEER : RBPEEK
    t0 = mono
    rb = Process.spawn({ "RBPEEK_BPF_STATS" => "1" }, bin, "alloc", "--pid", t.pid.to_s, "-d", (SECS + 1.5).to_s, *flags,
                       "-f", "collapsed", "-o", File.join(dir, "out.folded"), out: File::NULL, err: err)
    sleep 0.7 # attached, probes in place
    watched = t.speed(SECS)
    Process.wait(rb)
    $exit_secs[name] << mono - t0 - (SECS + 1.5) # attach, detach and output: rbpeek's time beyond -d
    text = File.read(err)
    if name == "exact" && (m = text.match(/after ([\d.]+) s: (\d+) allocations/))
      $rate[kind] = m[2].to_f / m[1].to_f
    end
    warn "bench/alloc.rb: #{name}: #{text[/warning: .*/]}" if name.start_with?("exact") && text.include?("warning:")
    [name, [watched, text[/own CPU ([\d.]+) s/, 1].to_f, text[/eBPF program: \d+ runs, (\d+) ns each/, 1]&.to_i]]
  end
ensure
  t&.stop
end

$exit_secs = Hash.new { |h, k| h[k] = [] }
$rate = {}
targets = [[nil, :loop], [nil, :idle], [nil, :railsish]]
targets.select! { |_, k| ENV["TARGETS"].split(",").include?(k.to_s) } if ENV["TARGETS"] # e.g. TARGETS=idle,railsish
targets += %w[2.7 3.3 3.4 4.0].select { |xy| File.directory?(File.join(CHROOTS, xy)) }.map { |xy| [xy, :loop] } unless ENV["ONLY"] == "host"
LABEL = { loop: "", idle: " +11 idle", railsish: " railsish" }.freeze
watched = MODES.keys - ["alone"]
puts "== rbpeek alloc: speed of an allocation-heavy loop (6 objects per round), best of #{ROUNDS}"
puts "   modes: #{MODES.map { |k, v| "#{k} (#{v ? (['alloc'] + v).join(' ') : 'not watched'})" }.join(', ')}"
puts format("%-20s %11s", "ruby", "alone r/s") + watched.map { |m| format(" %22s", "#{m}: x, us/alloc, CPU") }.join
Dir.mktmpdir("rbpeek-bench-alloc") do |dir|
  targets.each do |xy, kind|
    # best of ROUNDS for each measure separately: noise only ever slows a run
    runs = Array.new(ROUNDS) { one_run(dir, xy, kind) }
    best = MODES.keys.to_h { |m| [m, runs.map { |r| r[m][0] }.max] }
    cpu = MODES.keys.to_h { |m| [m, runs.map { |r| r[m][1] }.min] }
    prog_ns = MODES.keys.to_h { |m| [m, runs.filter_map { |r| r[m][2] }.min] }
    line = format("%-20s %11.0f", (xy ? "#{xy} (chroot)" : RUBY_VERSION) + LABEL[kind], best["alone"])
    # allocations per round: 6 in the loop; railsish's from rbpeek's count while watched
    per_round = kind == :railsish ? ($rate[kind] || 0) / best["exact"] : 6
    watched.each do |m|
      per = (1.0 / best[m] - 1.0 / best["alone"]) / per_round * 1e6
      line += format(" %6.0fx %7.2f %6.2fs", best["alone"] / best[m], per, cpu[m])
    end
    puts line
    ns = watched.filter_map { |m| prog_ns[m] && "#{m} #{prog_ns[m]} ns" }
    puts "             eBPF program per allocation (kernel's timing, least of #{ROUNDS}): #{ns.join(', ')}" unless ns.empty?
    puts format("             railsish: %.0f allocations per request, %.0f/s while watched", per_round, $rate[kind]) if kind == :railsish
    puts "             rbpeek's wall time beyond -d (attach + detach + output, s, max of #{ROUNDS}): " +
         watched.map { |m| format("%s %.2f", m, $exit_secs[m].max) }.join(", ")
    $exit_secs.clear
  end
end
puts "(x = slowdown: alone / watched rounds per second of the same target in the same run;"
puts " us/alloc = the time rbpeek adds to each allocation; CPU = rbpeek's own CPU seconds)"
