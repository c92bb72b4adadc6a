# frozen_string_literal: true
# e2e-timeout: 600 (every Ruby found, 2 s of alloc each and more under make asan: killed at 150 s at load 5)
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 91-alloc-sites.rb - `rbpeek alloc` puts every allocation on its exact
# site: the stacks are copied by an eBPF program in the kernel at the
# allocation.  The target (tests/targets/record/alloc_sites.rb) calls a, b
# and c in a tight loop, each making one object of its own class (Apple,
# Banana, Cherry) on its own line, and resumes a Fiber that makes a Durian
# on the fiber's own stack: the site changes every few microseconds.
#
# A stack is exact when, above the class leaf, it has Class#new at the
# class's line (not on 4.0, which has no such frame), then the class's method (Object#a, ...; for Durian the
# fiber's block "block (2 levels) in <main>") at that line, and for
# Durian no frame of the main stack ("<main>").  At least 99% of the
# stacks must be exact: reading stacks after the allocation (--no-bpf)
# gets ~25-35% here (printed by alloc-sites/fallback as a reference), and
# the Durians can never be right that way (the fiber has yielded).
#
# Class counts must be exactly 1:1:1:1 (within 2 points).  Runs on the
# host's Ruby, on every chroot Ruby (2.7, 3.3, 3.4) and on every Ruby found in
# /opt/rubies and the version managers' places (lib/found_rubies.rb).  alloc-sites/thread:
# a thread started while rbpeek watches (making Elderberries in e) is
# picked up, its stacks exact too.  alloc-sites/pid-namespace: rbpeek and
# the target both in a new PID namespace (unshare -pf --mount-proc), where
# thread ids differ from the kernel's: still exact.  The forced
# fallback (--no-bpf) must still work and say that sites are approximate.
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/chroot"
include E2E

R = Record
names = %w[alloc-sites/host alloc-sites/chroots alloc-sites/thread alloc-sites/pid-namespace
           alloc-sites/fallback]
exit 0 if skip_without_rbpeek(names)
exit 0 if skip_unless_uprobes(names, "needs root (uprobes and eBPF)")

SCRIPT = File.join(R::DIR, "alloc_sites.rb")
CLASSES = { "Apple" => "Object#a", "Banana" => "Object#b", "Cherry" => "Object#c",
            "Durian" => "block (2 levels) in <main>" }.freeze
LATE = { "Elderberry" => "Object#e" }.freeze
LINES = CLASSES.merge(LATE).keys.to_h do |cls|
  [cls, File.readlines(SCRIPT).index { |l| l.include?("# #{cls.upcase}") } + 1]
end.freeze
WARNING = "no exact allocation sites"

# {"Apple" => count} from rbpeek's final class table on stdout.
def class_counts(stdout)
  stdout.each_line.filter_map do |l|
    l =~ /^\s+(\d+)\s+[\d.]+%\s+(\w+)$/ && CLASSES.key?(Regexp.last_match(2)) ? [Regexp.last_match(2), Regexp.last_match(1).to_i] : nil
  end.to_h
end

# Ruby 4.0 makes objects in the caller's frame (opt_new): no Class#new frame.
def exact?(frames, cls, path)
  line = LINES[cls]
  above = frames[0..-2]
  above = above[0..-2] if above.last == "Class#new (#{path}:#{line})"
  above.last&.start_with?("#{CLASSES[cls] || LATE[cls]} (#{path}:#{line})") &&
    (cls != "Durian" || frames.none? { |f| f.start_with?("<main> (") })
end

# [stacks of the four classes, exact ones, {class => [exact, all]}] from collapsed stacks.
def score(collapsed, path)
  per = Hash.new { |h, k| h[k] = [0, 0] }
  collapsed.each_line do |l|
    stack, n = l.strip.split(/ (\d+)\z/)
    frames = stack.split(";")
    next unless CLASSES.key?(frames.last) || LATE.key?(frames.last)

    per[frames.last][0] += n.to_i if exact?(frames, frames.last, path)
    per[frames.last][1] += n.to_i
  end
  [per.values.sum { |v| v[1] }, per.values.sum { |v| v[0] }, per]
end

# rbpeek alloc on pid for 2 s; problems appended; returns [note, exact %] or nil.
def run_alloc(probs, pid, path, what, *flags)
  out = R.tmp("alloc-sites.folded")
  FileUtils.rm_f(out)
  res = R.rec("alloc", "--pid", pid, "-d", 2, "-f", "collapsed", "-o", out, *flags, timeout: 30)
  err = R.stderr_of(res)
  unless res.status&.zero? && File.exist?(out)
    probs << "#{what}: rbpeek alloc #{flags.join(' ')} #{res.describe}"
    return nil
  end
  counts = class_counts(res.stdout)
  total = counts.values.sum
  CLASSES.each_key do |cls|
    share = total.zero? ? 0 : 100.0 * counts[cls].to_i / total
    probs << "#{what}: #{cls} #{format('%.1f', share)}% of the allocations, expected 25% (#{counts.inspect})" if (share - 25).abs > 2
  end
  all, good, per = score(File.read(out), path)
  pct = all.zero? ? 0.0 : 100.0 * good / all
  [err, pct, all, per]
end

def target_in_chroot(ruby)
  pid = Chroots.spawn_ready(ruby, "record", "alloc_sites.rb", name: "alloc-sites-#{ruby.key}")
  [pid, File.join(Chroots::INNER, "record", "alloc_sites.rb")]
end

# The exact-sites check on one target; returns a note, or :no_bpf (why) when
# the kernel refused eBPF.
def check_exact(probs, pid, path, what)
  r = run_alloc(probs, pid, path, what) or return nil
  err, pct, all, per = r
  return [:no_bpf, err[/#{WARNING}: [^;]*/]] if err.include?(WARNING)

  probs << "#{what}: no 'sites exact' line on stderr: #{err.inspect}" unless err.include?("sites exact")
  probs << "#{what}: only #{all} stacks" if all < 200
  if pct < 99.0
    probs << "#{what}: #{format('%.1f', pct)}% of #{all} stacks exact, expected >= 99% " \
             "(per class [exact, all]: #{per.inspect}, lines #{LINES.inspect})"
  end
  "#{what}: #{format('%.1f', pct)}% of #{all} stacks exact"
end

no_bpf = nil
E2E.test("alloc-sites/host") do
  probs = []
  s = R::Script.new("alloc_sites").wait_ready
  note = begin
    check_exact(probs, s.pid, File.realpath(SCRIPT), "ruby #{RUBY_VERSION}")
  ensure
    E2E.kill_pid(s.pid)
  end
  if note.is_a?(Array)
    no_bpf = note[1]
    skip("alloc-sites/host", "the kernel refused eBPF: #{no_bpf}")
  elsif probs.empty?
    ok("alloc-sites/host", note)
  else
    fail("alloc-sites/host", probs.join("\n"))
  end
end

if no_bpf
  skip("alloc-sites/chroots", "the kernel refused eBPF: #{no_bpf}")
  skip("alloc-sites/thread", "the kernel refused eBPF: #{no_bpf}")
  skip("alloc-sites/pid-namespace", "the kernel refused eBPF: #{no_bpf}")
else
  check("alloc-sites/chroots") do |probs|
    Chroots.each_ruby(probs) do |ruby|
      pid, path = target_in_chroot(ruby)
      begin
        n = check_exact(probs, pid, path, "ruby #{ruby.version}")
        n.is_a?(Array) ? (probs << "ruby #{ruby.version}: eBPF refused: #{n[1]}") && nil : n
      ensure
        E2E.kill_pid(pid)
      end
    end
  end
end

unless no_bpf
  check("alloc-sites/thread") do |probs|
    s = R::Script.new("alloc_sites", "late-thread").wait_ready
    begin
      r = run_alloc(probs, s.pid, File.realpath(SCRIPT), "late thread", "-d", 3)
      if r
        _, pct, all, per = r
        late = per["Elderberry"]
        probs << "no stack of the late thread's Elderberries: #{per.inspect}" if late[1] < 50
        probs << "#{format('%.1f', pct)}% of #{all} stacks exact, expected >= 99% (#{per.inspect})" if pct < 99.0
        "#{late[1]} stacks of the late thread, #{format('%.1f', pct)}% of #{all} exact"
      end
    ensure
      E2E.kill_pid(s.pid)
    end
  end
end

unless no_bpf
  check("alloc-sites/pid-namespace") do |probs|
    out = R.tmp("alloc-sites-ns.folded")
    FileUtils.rm_f(out)
    inner = "cd #{R::DIR} && #{E2E::RUBY} alloc_sites.rb >/dev/null 2>&1 & sleep 1.5; " \
            "#{E2E::RBPEEK} alloc --pid $! -d 2 -f collapsed -o #{out}; rc=$?; kill -9 $!; exit $rc"
    res = E2E.run(["unshare", "-pf", "--mount-proc", "sh", "-c", inner], env: R.env, timeout: 40)
    err = R.stderr_of(res)
    if !res.status&.zero? || !File.exist?(out)
      probs << "rbpeek alloc in a PID namespace: #{res.describe}"
    else
      all, good, per = score(File.read(out), File.realpath(SCRIPT))
      pct = all.zero? ? 0.0 : 100.0 * good / all
      probs << "no 'sites exact' line: #{err.inspect}" unless err.include?("sites exact")
      probs << "only #{all} stacks" if all < 200
      probs << "#{format('%.1f', pct)}% of #{all} stacks exact, expected >= 99% (#{per.inspect})" if pct < 99.0
      "#{format('%.1f', pct)}% of #{all} stacks exact"
    end
  end
end

check("alloc-sites/fallback") do |probs|
  s = R::Script.new("alloc_sites").wait_ready
  begin
    r = run_alloc(probs, s.pid, File.realpath(SCRIPT), "--no-bpf", "--no-bpf")
    if r
      err, pct, all = r
      probs << "no warning that sites are approximate: #{err.inspect}" unless err =~ /warning: #{WARNING}: --no-bpf given; sites are approximate/
      probs << "more than one warning: #{err.inspect}" if err.scan("warning:").size != 1
      probs << "only #{all} stacks" if all < 200
      (rp = s.running_problem) and probs << "target after rbpeek: #{rp}"
      "after-the-fact reads (the old way): #{format('%.1f', pct)}% of #{all} stacks exact"
    end
  ensure
    E2E.kill_pid(s.pid)
  end
end

finish
