# frozen_string_literal: true
# e2e-timeout: 450 (every chroot Ruby, under make asan on a loaded machine)
#
# 90-alloc.rb - rbpeek alloc on real Ruby processes: the host's Ruby and
# every Ruby chroot ready (2.7, 3.3, 3.4).  The target
# (tests/targets/record/allocs.rb) makes Strings, Arrays and Points, each
# in its own method.  Run tight (one of each method per round) it makes
# them in the ratio 3 : 1 : 2, and the class counts must come out in that
# ratio (they are exact: every allocation is reported).  Run phased (each
# method for 30 ms in turn), each class's own method must be where most of
# its sampled stacks point; the share that lands in the right method is
# printed (100% where the kernel copies stacks at the allocation; with
# approximate sites, read after it, some land elsewhere).  Exact sites in
# a target switching sites every few microseconds: 91-alloc-sites.rb.
#
# With 12 threads (the allocating one not the main thread, 11 sleeping, as
# in a puma worker) the counts stay exact and exact sites take one uprobe
# event per probe, not one per probe and thread (whose closing took ~0.1 s
# each: 84 closes, 10 s, on such a process).  Stack copies the kernel
# drops (rbpeek stopped while it copies 100,000 stacks a second) are
# counted, and a warning says what that means for the figures.
#
# Also: SIGKILL of rbpeek mid-run leaves no breakpoint in the target (the
# probed function's first byte is Ruby's own again, the target is back at
# speed); bad input gets its exit code (2 usage, 3 no process, 4 not
# allowed, 5 not Ruby) and nothing is written.
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/chroot"
include E2E

R = Record
names = %w[alloc/host alloc/chroots alloc/threads alloc/copies-lost alloc/sigkill alloc/not-ruby alloc/no-such-process
           alloc/nobody alloc/bad-options]
exit 0 if skip_without_rbpeek(names)
exit 0 if skip_unless_uprobes(names, "needs root (uprobes need CAP_PERFMON)")

WANT = { "String" => 3, "Array" => 1, "Point" => 2 }.freeze
SITES = { "String" => ["Object#strings"], "Array" => ["Object#arrays"],
          "Point" => ["Class#new", "Object#points"] }.freeze
SCRIPT = File.join(R::DIR, "allocs.rb")

# {"String" => count} from rbpeek's final class table on stdout.
def class_table(stdout)
  rows = {}
  section = nil
  stdout.each_line do |l|
    section = l.include?("site (") ? :sites : :classes if l =~ /^\s+allocations\s+share/
    next unless section == :classes && l =~ /^\s+(\d+)\s+[\d.]+%\s+(\S.*)$/

    rows[Regexp.last_match(2).strip] = Regexp.last_match(1).to_i
  end
  rows
end

# Problems with the class ratio, or nil.
def ratio_problems(rows)
  total = WANT.keys.sum { |c| rows[c].to_i }
  return ["no String/Array/Point allocations in #{rows.inspect}"] if total.zero?

  WANT.filter_map do |cls, parts|
    share = 100.0 * rows[cls].to_i / total
    want = 100.0 * parts / WANT.values.sum
    "#{cls}: #{format('%.1f', share)}% of the three, expected #{format('%.1f', want)}% (#{rows.inspect})" if (share - want).abs > 2.0
  end
end

# From the collapsed stacks: for each class, samples per site (the frame
# above the class leaf).  Returns [problems, accuracy in %].
def site_problems(collapsed, path)
  per = Hash.new { |h, k| h[k] = Hash.new(0) }
  collapsed.each_line do |l|
    stack, n = l.strip.split(/ (\d+)\z/)
    frames = stack.split(";")
    next unless WANT.key?(frames.last) && frames.size >= 2

    per[frames.last][frames[-2]] += n.to_i
  end
  probs = []
  good = all = 0
  WANT.each_key do |cls|
    sites = per[cls]
    # the method, at any line of the file: the line is often off (the read
    # is late: a few instructions further on)
    ok_site = ->(s) { SITES[cls].any? { |label| s.start_with?("#{label} (#{path}:") } }
    mine = sites.select { |s, _| ok_site.call(s) }.values.sum
    other = sites.reject { |s, _| ok_site.call(s) }.max_by { |_, n| n }
    good += mine
    all += sites.values.sum
    if sites.empty?
      probs << "#{cls}: no stack samples"
    elsif other && other[1] >= mine
      probs << "#{cls}: most samples at #{other[0]} (#{other[1]}), not in #{SITES[cls].join(' or ')} (#{mine}): #{sites.sort_by { |_, n| -n }.first(4).inspect}"
    end
  end
  [probs, all.zero? ? 0 : 100.0 * good / all]
end

# rbpeek alloc on pid for 2 s: the class ratio (tight) or the sites
# (phased); problems appended; returns a note.
def check_target(probs, pid, path, what, mode)
  out = R.tmp("alloc.folded")
  res = R.rec("alloc", "--pid", pid, "-d", 2, "-f", "collapsed", "-o", out, timeout: 20)
  unless res.status&.zero?
    probs << "#{what} #{mode}: rbpeek alloc #{res.describe}"
    return nil
  end
  probs << "#{what}: no live progress line on stderr" unless R.stderr_of(res) =~ /^rbpeek: \d+ s: \d+ allocations/
  lost = R.stderr_of(res)[/ (\d+) lost/, 1].to_i
  if mode == :tight
    probs.concat(ratio_problems(class_table(res.stdout)).map { |p| "#{what}: #{p}" })
    return lost.positive? ? "#{what}: #{lost} lost" : nil
  end
  return nil unless File.exist?(out)

  sp, acc = site_problems(File.read(out), path)
  probs.concat(sp.map { |p| "#{what}: #{p}" })
  "#{what} #{format('%.0f', acc)}% of stacks in the allocating method#{lost.positive? ? ", #{lost} lost" : ''}"
end

# The runtime address of a libruby function in pid, and the byte it starts
# with in the file.
def probe_byte(pid, func)
  map = File.readlines("/proc/#{pid}/maps").find { |l| l =~ %r{ 00000000 .*/libruby[^ ]*\.so} } or return nil
  base = map.split("-").first.to_i(16)
  lib = map.split.last
  sym = IO.popen(["nm", "-D", "--defined-only", "/proc/#{pid}/root#{lib}"], &:read)[/^(\h+) T #{func}$/, 1] or return nil
  file_byte = File.binread("/proc/#{pid}/root#{lib}", 1, sym.to_i(16)).ord # vaddr = offset in .text
  [base + sym.to_i(16), file_byte]
end

def mem_byte(pid, addr)
  File.open("/proc/#{pid}/mem", "rb") { |f| f.seek(addr) && f.read(1).ord }
end

def rounds(script)
  ready = script.instance_variable_get(:@ready)
  File.delete("#{ready}.rounds") if File.exist?("#{ready}.rounds")
  Process.kill("USR1", script.pid)
  deadline = R.mono + 5
  sleep 0.01 until File.exist?("#{ready}.rounds") || R.mono > deadline
  File.read("#{ready}.rounds").to_i
end

# Rounds per second over `secs`.
def speed(script, secs)
  a = rounds(script)
  t = R.mono
  sleep secs
  (rounds(script) - a) / (R.mono - t)
end

check("alloc/host") do |probs|
  %i[tight phased].filter_map do |mode|
    s = R::Script.new("allocs", mode).wait_ready
    begin
      check_target(probs, s.pid, File.realpath(SCRIPT), "ruby #{RUBY_VERSION}", mode)
    ensure
      E2E.kill_pid(s.pid)
    end
  end.join("; ")
end

check("alloc/chroots") do |probs|
  Chroots.each_ruby(probs) do |ruby|
    %i[tight phased].map do |mode|
      pid = Chroots.spawn_ready(ruby, "record", "allocs.rb", mode, name: "alloc-#{ruby.key}-#{mode}")
      begin
        check_target(probs, pid, File.join(Chroots::INNER, "record", "allocs.rb"), "ruby #{ruby.version}", mode)
      ensure
        E2E.kill_pid(pid)
      end
    end
  end
end

check("alloc/threads") do |probs|
  s = R::Script.new("allocs", "threaded").wait_ready
  begin
    res = R.rec("alloc", "--pid", s.pid, "-d", 2, "-f", "collapsed", "-o", R.tmp("threads.folded"), timeout: 30)
    err = R.stderr_of(res)
    if res.status&.zero?
      probs.concat(ratio_problems(class_table(res.stdout)))
      m = err.match(/(\d+) probes, (\d+) uprobe events, (\d+) threads/)
      if !m
        probs << "no 'N probes, N uprobe events, N threads' in #{err[-600..] || err}"
      else
        probs << "#{m[3]} threads probed, the target has 13" if m[3].to_i < 13
        probs << "#{m[2]} uprobe events for #{m[1]} probes and #{m[3]} threads: one per probe expected" if err.include?("sites exact") && m[2] != m[1]
      end
      "#{m && m[0]}; #{err[/sites (exact|approximate)/]}"
    else
      probs << "rbpeek alloc #{res.describe}"
      nil
    end
  ensure
    E2E.kill_pid(s.pid)
  end
end

check("alloc/copies-lost") do |probs|
  s = R::Script.new("allocs").wait_ready
  begin
    bg = R::Background.new(["alloc", "--pid", s.pid, "-d", 3, "-r", 100_000, "-o", R.tmp("lost.folded"), "-f", "collapsed"])
    bg.wait_stderr(/^rbpeek: watching allocations/)
    sleep 0.3
    bg.kill("STOP") # the kernel goes on copying stacks into a ring nobody reads
    sleep 1
    bg.kill("CONT")
    res = bg.wait
    err = res.stderr
    m = err.match(/sites exact: .*?\((\d+) copies, (\d+) lost/)
    if !res.status&.zero?
      probs << "rbpeek alloc #{res.describe}"
    elsif !m
      next "sites not exact here: #{err[/warning: .*/]}"
    elsif m[2].to_i.zero?
      next "no copy lost while rbpeek was stopped (#{m[0]})"
    else
      w = err[/warning: (\d+) of (\d+) stack copies \(([\d.]+)%\) were lost.*/]
      if !w
        probs << "#{m[2]} copies lost, and no warning saying so: #{err[-700..]}"
      else
        probs << "the warning counts #{Regexp.last_match(1)} lost, the stats line #{m[2]}" if Regexp.last_match(1) != m[2]
        probs << "the warning does not say what the loss means: #{w}" unless w.include?("class counts are not affected") && w.include?("site shares")
      end
    end
    w
  ensure
    E2E.kill_pid(s.pid)
  end
end

check("alloc/sigkill") do |probs|
  s = R::Script.new("allocs").wait_ready
  begin
    addr, file_byte = probe_byte(s.pid, "rb_wb_protected_newobj_of")
    before = speed(s, 0.5)
    bg = R::Background.new(["alloc", "--pid", s.pid, "-o", R.tmp("killed.folded"), "-f", "collapsed"])
    bg.wait_stderr(/^rbpeek: watching allocations/)
    sleep 0.3
    during = speed(s, 0.5)
    probed = addr && mem_byte(s.pid, addr)
    bg.kill("KILL")
    bg.wait
    after = speed(s, 0.5)
    if addr
      probs << "while attached, #{format('%#x', addr)} holds #{format('%#x', probed)}, not a breakpoint (0xcc)" if probed != 0xcc
      now = mem_byte(s.pid, addr)
      probs << "after SIGKILL, #{format('%#x', addr)} holds #{format('%#x', now)}, Ruby's is #{format('%#x', file_byte)}" if now != file_byte
    else
      probs << "cannot find rb_wb_protected_newobj_of in the target (nm -D)"
    end
    probs << (s.running_problem || "").to_s unless s.running_problem.nil?
    # no more traps: the target is faster than while probed (an
    # allocation-only loop loses ~10x to the probes; "as fast as before" is
    # too noisy a measure on a shared machine)
    probs << "after SIGKILL the target runs #{after.round} rounds/s, #{before.round} before, #{during.round} while probed" if after < during * 2
    "rounds/s: #{before.round} before, #{during.round} probed, #{after.round} after SIGKILL"
  ensure
    E2E.kill_pid(s.pid)
  end
end

def expect_code(probs, res, code, *mentions)
  err = R.stderr_of(res)
  if res.status != code
    probs << "#{res.describe}, expected exit #{code}"
  elsif (p = error_format_problem(res))
    probs << p
  else
    missing = mentions.reject { |m| err.include?(m) }
    probs << "message does not mention #{missing.inspect}: #{err.strip.inspect}" unless missing.empty?
  end
end

check("alloc/not-ruby") do |probs|
  pid = Process.spawn("sleep", "30")
  E2E.register_pid(pid)
  out = R.tmp("not-ruby.html")
  expect_code(probs, R.rec("alloc", "--pid", pid, "-d", 1, "-o", out), 5, "not a Ruby process")
  probs << "#{out} written" if File.exist?(out)
  E2E.kill_pid(pid)
end

check("alloc/no-such-process") do |probs|
  expect_code(probs, R.rec("alloc", "--pid", 4_000_000, "-d", 1), 3, "no such process")
end

check("alloc/nobody") do |probs|
  # a Ruby of nobody's, watched by nobody: same owner, but no CAP_PERFMON
  user = %w[--reuid=nobody --regid=nogroup --clear-groups]
  pid = Process.spawn("setpriv", *user, E2E::RUBY, "-e", "loop { 'x' * 3; sleep 0.01 }")
  E2E.register_pid(pid)
  sleep 0.5
  dir = Dir.mktmpdir("rbpeek-alloc-nobody-") # outside the checkout, which may be root's alone (/root)
  File.chmod(0o777, dir)
  res = E2E.run(["setpriv", *user, E2E::RBPEEK, "alloc", "--pid", pid.to_s, "-d", "1", "-o", "#{dir}/x.html"],
                env: R.env, chdir: dir)
  expect_code(probs, res, 4, "CAP_PERFMON")
  probs << "#{dir}/x.html written" if File.exist?("#{dir}/x.html")
  E2E.kill_pid(pid)
ensure
  FileUtils.rm_rf(dir) if dir
end

check("alloc/bad-options") do |probs|
  [%w[alloc], %w[alloc --pid abc], %w[alloc --pid 1 -r 0], %w[alloc --pid 1 -d -1],
   %w[alloc --pid 1 -f nope], %w[alloc --pid 1 --top 0], %w[alloc --pid 1 extra]].each do |args|
    res = R.rec(*args)
    probs << "rbpeek #{args.join(' ')}: #{res.describe}, expected exit 2" if res.status != 2
  end
  help = R.rec("alloc", "--help")
  probs << "alloc --help: #{help.describe}" unless help.status&.zero? && help.stdout.include?("--rate")
end

finish
