# frozen_string_literal: true
# e2e-timeout: 450 (every Ruby found, a second recording when a share is off)
#
# 65-sampler-bpf.rb - record and top with --sampler=bpf, the in-kernel
# sampler (a clock perf event per CPU runs an eBPF program that copies the
# interrupted Ruby thread's frames; rbpeek decodes the copies with its
# walker), on real Ruby processes: the host's Ruby and every Ruby chroot
# ready (2.7, 3.3, 3.4, ...).  The target (tests/targets/record/hotcold.rb)
# alternates between two CPU-bound methods, `hot` three times as long as
# `cold`: about 3/4 of the samples must be under hot, with the
# methods' own labels and the lines of their loops (the copy is of the
# instant the thread was interrupted).  sampler-bpf/pid-namespace: rbpeek
# and the target both in a new PID namespace (unshare -pf --mount-proc),
# where ids differ from the kernel's.  Also: top --sampler=bpf shows the
# hot method; a user without eBPF (nobody) gets one warning and ptrace
# samples; bad combinations are usage errors.  Skipped with the reason when
# not root or when the kernel refuses eBPF.
require "fileutils"
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/chroot"
include E2E

R = Record
names = %w[sampler-bpf/host sampler-bpf/chroots sampler-bpf/pid-namespace sampler-bpf/top
           sampler-bpf/fallback sampler-bpf/bad-options]
exit 0 if skip_without_rbpeek(names)
unless root?
  names.each { |n| skip(n, "needs root (eBPF: CAP_BPF and CAP_PERFMON)") }
  finish
  exit 0
end

FALLBACK = /warning: --sampler=bpf: (.*); sampling with ptrace instead/.freeze
HOT_LINE = File.readlines(File.join(R::DIR, "hotcold.rb")).index { |l| l.include?("30_000") } + 1
COLD_LINE = File.readlines(File.join(R::DIR, "hotcold.rb")).index { |l| l.include?("10_000") } + 1

# Record pid with the in-kernel sampler; [problems, note] or [:refused, why].
def bpf_record(pid, path, what)
  out = R.tmp("bpf-#{pid}.folded")
  # 199 Hz: not in step with the scheduler's tick (CONFIG_HZ 100, 250, 1000)
  args = ["record", "--pid", pid, "--sampler=bpf", "-r", 199, "-d", 3, "-f", "collapsed", "-o", out]
  res = R.rec(*args, timeout: 30)
  err = R.stderr_of(res)
  return [:refused, err[FALLBACK, 1]] if err =~ FALLBACK
  return [["#{what}: rbpeek #{args.join(' ')}: #{res.describe}"], nil] unless res.status&.zero?
  return [["#{what}: not announced as the in-kernel sampler: #{err[0, 300].inspect}"], nil] unless err.include?("in-kernel sampler")

  stacks = R.read_collapsed(out)
  probs = hot_cold_problems(stacks, path, what)
  # an on-CPU recording says so (the summary's header; pprof's sample type "cpu")
  if (raw = R.raw_path_of(res))
    sum = R.tmp("bpf-#{pid}-summary.txt")
    a = ["report", "-i", raw, "-f", "summary", "-o", sum]
    r = R.rec(*a)
    if !r.status&.zero?
      probs << "#{what}: rbpeek #{a.join(' ')}: #{r.describe}"
    elsif !R.parse_summary(File.binread(sum))[:on_cpu]
      probs << "#{what}: the summary does not say on-CPU samples: #{File.binread(sum).lines.first.inspect}"
    end
  else
    probs << "#{what}: stderr names no raw profile: #{err[0, 300].inspect}"
  end
  [probs, "#{what}: #{R.total(stacks)} samples"]
end

# bpf_record, and once more when the first recording's problems are only
# the hot/cold share: once, at load 10 with a Ruby build running beside it,
# Ruby 2.7's share came out 0.57 (the next runs 0.73-0.77); a wrong label or
# line fails both recordings.  The first recording's share is in the note.
def bpf_record_settled(pid, path, what)
  got, note = bpf_record(pid, path, what)
  return [got, note] if got == :refused || got.empty? || !got.all? { |p| p.include?("samples under Object#hot") }

  again, note2 = bpf_record(pid, path, what)
  return [again, note2] if again == :refused

  [again, "#{note2} (second recording; the first: #{got.first})"]
end

# The hot/cold ratio and the lines of the innermost frames.
def hot_cold_problems(stacks, path, what)
  hot = R.under(stacks, "Object#hot")
  cold = R.under(stacks, "Object#cold")
  n = hot + cold
  probs = []
  # hot's share is 3/4 of the CPU time; the samples are few on a busy
  # machine (a thread gets -r samples per second of CPU it gets): allowed,
  # 3 standard deviations of a binomial share plus 5 points
  band = 3 * Math.sqrt(0.75 * 0.25 / [n, 1].max) + 0.05
  share = n.zero? ? 0 : hot.to_f / n
  if n < 30 || (share - 0.75).abs > band
    probs << "#{what}: samples under Object#hot : Object#cold = #{hot} : #{cold}, " \
             "expected 3/4 of them under hot (#{format('%.2f', 0.75 - band)} to #{format('%.2f', 0.75 + band)}, 30 samples at least)"
  end
  # every sample in a method is in the target's file, within the method
  # (def, i = 0, the loop, end); nearly all at the loop
  { "Object#hot" => HOT_LINE, "Object#cold" => COLD_LINE }.each do |label, line|
    frames = stacks.flat_map { |fs, n| fs.select { |f| f.label == label }.map { |f| [f, n] } }
    bad = frames.reject { |f, _| f.path == path && (line - 2..line + 1).cover?(f.line) }
    probs << "#{what}: #{label} frames not at #{path}:#{line}: #{bad.first(3).map { |f, n| "#{f.path}:#{f.line} x#{n}" }}" unless bad.empty?
    at_loop = frames.sum { |f, n| f.line == line ? n : 0 }
    all = frames.sum { |_, n| n }
    probs << "#{what}: only #{at_loop} of #{all} #{label} samples at line #{line}" if at_loop < all * 0.9
  end
  probs
end

refused = nil
check("sampler-bpf/host") do |probs|
  R.with_script("hotcold") do |t|
    got, note = bpf_record_settled(t.pid, t.path, "ruby #{RUBY_VERSION}")
    if got == :refused
      refused = note
      next skip("sampler-bpf/host", "the kernel refused eBPF: #{note}")
    end
    probs.concat(got)
    note
  end
end
if refused
  %w[sampler-bpf/chroots sampler-bpf/pid-namespace sampler-bpf/top].each { |n| skip(n, "the kernel refused eBPF: #{refused}") }
else
  check("sampler-bpf/chroots") do |probs|
    Chroots.each_ruby(probs) do |ruby|
      pid = Chroots.spawn_ready(ruby, "record", "hotcold.rb", name: "bpf-#{ruby.key}")
      begin
        got, note = bpf_record_settled(pid, File.join(Chroots::INNER, "record", "hotcold.rb"), "ruby #{ruby.version}")
        got == :refused ? probs << "ruby #{ruby.version}: eBPF refused: #{note}" : probs.concat(got)
        note
      ensure
        E2E.kill_pid(pid)
      end
    end
  end

  check("sampler-bpf/pid-namespace") do |probs|
    out = R.tmp("bpf-ns.folded")
    FileUtils.rm_f(out)
    inner = "cd #{R::DIR} && RBPEEK_READY=#{R.tmp('bpf-ns.ready')} #{E2E::RUBY} hotcold.rb >/dev/null 2>&1 & sleep 1.5; " \
            "#{E2E::RBPEEK} record --pid $! --sampler=bpf -r 199 -d 3 -f collapsed -o #{out}; rc=$?; kill -9 $!; exit $rc"
    res = E2E.run(["unshare", "-pf", "--mount-proc", "sh", "-c", inner], env: R.env, timeout: 40)
    if !res.status&.zero? || !File.exist?(out)
      probs << "rbpeek record --sampler=bpf in a PID namespace: #{res.describe}"
    elsif R.stderr_of(res) =~ FALLBACK
      probs << "fell back in a PID namespace: #{R.stderr_of(res)[FALLBACK]}"
    else
      stacks = R.read_collapsed(out)
      probs.concat(hot_cold_problems(stacks, File.realpath(File.join(R::DIR, "hotcold.rb")), "in a PID namespace"))
      "#{R.total(stacks)} samples"
    end
  end

  check("sampler-bpf/top") do |probs|
    R.with_script("hotcold") do |t|
      res = R.rec("top", "--pid", t.pid, "--sampler=bpf", "--delay", "1", "-n", 2, timeout: 30)
      probs << "top --sampler=bpf: #{res.describe}" unless res.status&.zero?
      probs << "top --sampler=bpf fell back: #{R.stderr_of(res)[FALLBACK]}" if R.stderr_of(res) =~ FALLBACK
      probs << "top --sampler=bpf: no Object#hot row in #{res.stdout[0, 400].inspect}" unless res.stdout.include?("Object#hot")
      nil
    end
  end
end

check("sampler-bpf/fallback") do |probs|
  # a Ruby of nobody's, recorded by nobody: ptrace works (same owner), eBPF does not
  user = %w[--reuid=nobody --regid=nogroup --clear-groups]
  pid = Process.spawn("setpriv", *user, E2E::RUBY, "-e", "def spin = loop { 1 + 1 }; spin",
                      in: "/dev/null", out: "/dev/null", err: "/dev/null")
  E2E.register_pid(pid)
  sleep 0.5
  dir = Dir.mktmpdir("rbpeek-bpf-nobody-") # outside the checkout, which may be root's alone (/root)
  File.chmod(0o777, dir)
  res = E2E.run(["setpriv", *user, E2E::RBPEEK, "record", "--pid", pid.to_s, "--sampler=bpf", "-d", "1",
                 "-f", "collapsed", "-o", "#{dir}/x.folded", "--no-raw"], env: R.env, chdir: dir)
  err = R.stderr_of(res)
  warnings = err.scan(FALLBACK).size
  probs << "expected one fallback warning, got #{warnings}: #{err[0, 400].inspect}" unless warnings == 1
  # refused for want of privilege: one short reason, not libbpf's restatement of it
  why = err[FALLBACK, 1].to_s
  probs << "the reason quotes libbpf's noise: #{why[0, 300].inspect}" if why.include?("Operation not permitted") && why.include?("libbpf:")
  if res.status&.zero?
    stacks = R.read_collapsed("#{dir}/x.folded")
    probs << "no ptrace samples of Object#spin" unless R.under(stacks, "Object#spin").positive?
  else
    probs << "rbpeek record as nobody: #{res.describe}"
  end
  E2E.kill_pid(pid)
  err[FALLBACK, 1]
ensure
  FileUtils.rm_rf(dir) if dir
end

check("sampler-bpf/bad-options") do |probs|
  [%w[record --pid 1 --sampler=nope], %w[record --pid 1 --sampler=bpf --native],
   %w[record --pid 1 --sampler=bpf --subprocesses],
   %w[record --pid 1 --sampler=bpf -r 20000], %w[top --pid 1 --sampler=nope],
   %w[top --pid 1 --sampler=bpf --native]].each do |args|
    res = R.rec(*args)
    probs << "rbpeek #{args.join(' ')}: #{res.describe}, expected exit 2" if res.status != 2
  end
end

finish
