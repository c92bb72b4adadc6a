# frozen_string_literal: true
# e2e-timeout: 360
#
# 79-agent-gc.rb - GC frames from the in-kernel sampler: its eBPF program
# copies the head of rb_objspace with the frames at each tick, so samples
# taken while the collector runs end in "(GC: marking)" / "(GC: sweeping)"
# as record's ptrace sampler shows them.
#
#   agent/bpf/gc-frames   a Ruby that allocates without pause, profiled by
#       the agent's default sampler: its payloads (gzip'd pprof) name GC
#       frames; `record --sampler=bpf` of it too.  Skipped with the reason
#       where eBPF cannot load.
require_relative "lib/agent"
require "tmpdir"
require "zlib"
include E2E
include AgentE2E

NAME = "agent/bpf/gc-frames"
exit 0 if skip_without_rbpeek([NAME])
unless root?
  skip(NAME, "needs root (eBPF, and the agent reads every process)")
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
finish
