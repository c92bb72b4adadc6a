# frozen_string_literal: true
# e2e-timeout: 480
#
# 79-agent-gc.rb - GC frames and the GVL from the in-kernel sampler: its
# eBPF program copies the head of rb_objspace and the word naming the
# GVL's owner with the frames at each tick, so samples taken while the
# collector runs end in "(GC: marking)" / "(GC: sweeping)" as record's
# ptrace sampler shows them, and each sample knows whether its thread held
# the GVL.
#
#   agent/bpf/gc-frames   a Ruby that allocates without pause, profiled by
#       the agent's default sampler: its payloads (gzip'd pprof) name GC
#       frames; `record --sampler=bpf` of it too.  Skipped with the reason
#       where eBPF cannot load.
#   record/bpf/gvl   a Ruby whose main thread deflates with Zlib (which
#       releases the GVL) while another thread spins in Ruby:
#       `record --sampler=bpf --gvl` keeps the spinning thread's samples and
#       drops most of the deflating one's (on a CPU without the GVL), which
#       it has without --gvl.
require_relative "lib/agent"
require "tmpdir"
require "zlib"
include E2E
include AgentE2E

NAME = "agent/bpf/gc-frames"
GVL = "record/bpf/gvl"
exit 0 if skip_without_rbpeek([NAME, GVL])
unless root?
  [NAME, GVL].each { |n| skip(n, "needs root (eBPF, and the agent reads every process)") }
  finish
end

WORK = Dir.mktmpdir("rbpeek-agent-gc-", OUT)
at_exit { FileUtils.rm_rf(WORK) }
MARK = "RBPEEK_AGENT_GC_#{$$}"

script = File.join(WORK, "churn.rb")
File.write(script, <<~RUBY)
  $stdout.sync = true
  puts "ready"
  def churn
    a = []
    loop { a << ("x" * 64); a = [] if a.size > 200_000 }
  end
  churn
RUBY
log = File.join(WORK, "churn.out")
pid = Process.spawn({ MARK => "1", "PYROSCOPE_APPLICATION_NAME" => "gc_churn" }, RUBY, script, out: log, err: log)
register_pid(pid)
wait_for("the churning Ruby") { File.read(log).include?("ready") }

check(NAME) do |probs|
  note = nil
  # a loaded machine gives the Ruby little CPU, and on-CPU samples follow
  # it: record until 20 samples are in (about half are in GC)
  gc = all = 0
  r = nil
  6.times do
    out = File.join(WORK, "rec.txt")
    r = rbpeek("record", "--sampler=bpf", "--pid", pid, "-d", "5", "-f", "collapsed", "-o", out, timeout: 60)
    break if r.stderr.include?("sampling with ptrace instead")

    text = File.exist?(out) ? File.read(out) : ""
    gc += text.lines.select { |l| l.include?("(GC: ") }.sum { |l| l.split.last.to_i }
    all += text.lines.sum { |l| l.split.last.to_i }
    break if all >= 20
  end
  if r.stderr.include?("sampling with ptrace instead")
    note = "eBPF refused here: #{r.stderr[/warning: (.*)/, 1]}"
  else
    probs << "record --sampler=bpf: no GC frame in #{all} samples (#{r.describe})" unless gc.positive?
    rdir = File.join(WORK, "recv")
    rpid, port = start_receiver(rdir)
    err = File.join(WORK, "agent.err")
    apid, = start_agent(["--server", "http://127.0.0.1:#{port}", "--interval", "1", "--require-env", MARK], err)
    begin
      wait_for("a payload with a GC frame", 120) do
        payloads(rdir).any? { |p| Zlib.gunzip(File.binread(p[:file])).include?("(GC: ") }
      end
    rescue RuntimeError => e
      probs << "agent: #{e.message} (#{payloads(rdir).size} payloads); log: #{File.read(err)[-300..]}"
    end
    stop_agent(apid)
    stop_receiver(rpid)
    note = "record: #{gc} of #{all} samples in GC"
  end
  note
end
kill_pid(pid)

# samples of a collapsed file: [in deflate, others]
def split_deflate(path)
  text = File.exist?(path) ? File.read(path) : ""
  d = text.lines.select { |l| l.include?("deflate") }.sum { |l| l.split.last.to_i }
  [d, text.lines.sum { |l| l.split.last.to_i } - d]
end

zscript = File.join(WORK, "zlib.rb")
File.write(zscript, <<~RUBY)
  $stdout.sync = true
  require "zlib"
  Thread.new { x = 0; loop { x += 1 } }
  data = Random.new(1).bytes(8_000_000)
  puts "ready"
  loop { Zlib::Deflate.deflate(data, 9) }
RUBY
zlog = File.join(WORK, "zlib.out")
zpid = Process.spawn(RUBY, zscript, out: zlog, err: zlog)
register_pid(zpid)
wait_for("the deflating Ruby") { File.read(zlog).include?("ready") }
check(GVL) do |probs|
  all = [0, 0]
  gvl = [0, 0]
  r = nil
  6.times do
    out = File.join(WORK, "all.txt")
    r = rbpeek("record", "--sampler=bpf", "--pid", zpid, "-d", "4", "-f", "collapsed", "-o", out, timeout: 60)
    break if r.stderr.include?("sampling with ptrace instead")

    all = all.zip(split_deflate(out)).map(&:sum)
    out = File.join(WORK, "gvl.txt")
    r = rbpeek("record", "--sampler=bpf", "--gvl", "--pid", zpid, "-d", "4", "-f", "collapsed", "-o", out, timeout: 60)
    probs << "record --sampler=bpf --gvl: #{r.describe}" unless r.status&.zero?
    break unless r.status&.zero?

    gvl = gvl.zip(split_deflate(out)).map(&:sum)
    break if all.sum >= 40 && gvl.sum >= 20
  end
  next "eBPF refused here" if r.stderr.include?("sampling with ptrace instead")

  share_all = all[0].to_f / [all.sum, 1].max
  share_gvl = gvl[0].to_f / [gvl.sum, 1].max
  probs << "without --gvl: no deflate samples (#{all.inspect})" unless all[0].positive?
  probs << "with --gvl: no samples of the spinning thread (#{gvl.inspect})" unless gvl[1].positive?
  probs << "with --gvl, deflate (GVL released) kept: #{gvl.inspect} against #{all.inspect} without" unless share_gvl < 0.5 && share_gvl < share_all
  format("deflate's share %.2f without --gvl, %.2f with (%d / %d samples)", share_all, share_gvl, all.sum, gvl.sum)
end
kill_pid(zpid)
finish
