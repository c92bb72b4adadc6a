# frozen_string_literal: true
# e2e-timeout: 300
#
# 79-agent-k8s.rb - the Kubernetes labels of the agent's profiles, with a
# pod made here (no kubelet can run on these machines): a Ruby in a UTS
# namespace of its own (unshare --uts) whose host name is the pod's name,
# in a cgroup named as the kubelet's systemd driver names a pod's
# container (kubepods.slice/kubepods-besteffort.slice/
# kubepods-besteffort-pod<UID with '_'>.slice/cri-containerd-<id>.scope),
# with POD_NAMESPACE in its environment as the downward API puts it.
#
#   agent/k8s/pod-labels   its profiles carry pod_uid (dashes back),
#       pod (its host name), namespace and container_id; a Ruby outside
#       any pod carries none of them.
require_relative "lib/agent"
require "tmpdir"
require "securerandom"
include E2E
include AgentE2E

NAME = "agent/k8s/pod-labels"
exit 0 if skip_without_rbpeek([NAME])

CGROUP_ROOT = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"].find { |d| File.exist?(File.join(d, "cgroup.subtree_control")) || File.exist?(File.join(d, "cgroup.procs")) && File.exist?(File.join(d, "cgroup.controllers")) }
if !root?
  skip(NAME, "needs root (the agent reads every process; unshare --uts; cgroups)")
  finish
elsif !CGROUP_ROOT
  skip(NAME, "no cgroup v2 hierarchy mounted (/sys/fs/cgroup/unified or /sys/fs/cgroup)")
  finish
elsif `command -v unshare 2>/dev/null`.strip.empty?
  skip(NAME, "unshare not installed (util-linux)")
  finish
end

WORK = Dir.mktmpdir("rbpeek-agent-k8s-", OUT)
MARK = "RBPEEK_AGENT_K8S_#{$$}"
UID_ = SecureRandom.uuid
CID = SecureRandom.hex(32)
POD = "web-7d4b9c-x#{$$ % 1000}"
TOP = File.join(CGROUP_ROOT, "rbpeek-k8s-test-#{$$}")
SCOPE = File.join(TOP, "kubepods.slice", "kubepods-besteffort.slice",
                  "kubepods-besteffort-pod#{UID_.tr('-', '_')}.slice", "cri-containerd-#{CID}.scope")
at_exit do
  FileUtils.rm_rf(WORK)
  # the cgroups, deepest first, once their processes have gone
  dirs = Dir.glob(File.join(TOP, "**", "*")).select { |d| File.directory?(d) && !File.symlink?(d) }
  dirs.sort_by { |d| -d.count("/") }.each { |d| Dir.rmdir(d) rescue nil } # rubocop:disable Style/RescueModifier
  Dir.rmdir(TOP) rescue nil # rubocop:disable Style/RescueModifier
end

check(NAME) do |probs|
  FileUtils.mkdir_p(SCOPE)
  script = busy_script(File.join(WORK, "scripts"), "podbusy")
  plain = busy_script(File.join(WORK, "scripts"), "plainbusy")
  log = File.join(WORK, "pod.out")
  # into the pod's cgroup, its own UTS namespace with the pod's name, then Ruby
  pod = Process.spawn({ MARK => "1", "POD_NAMESPACE" => "shop-#{$$}", "PYROSCOPE_APPLICATION_NAME" => "k8s_web" },
                      "unshare", "--uts", "sh", "-c",
                      "echo $$ >\"$1\"/cgroup.procs && hostname \"$2\" && exec nice -n 19 \"$3\" \"$4\"",
                      "sh", SCOPE, POD, RUBY, script, out: log, err: log)
  register_pid(pod)
  plog = File.join(WORK, "plain.out")
  other = Process.spawn({ MARK => "1", "PYROSCOPE_APPLICATION_NAME" => "k8s_plain" }, "nice", "-n", "19", RUBY, plain,
                        out: plog, err: plog)
  register_pid(other)
  wait_for("the pod's Ruby") { File.read(log).include?("ready") }
  wait_for("the other Ruby") { File.read(plog).include?("ready") }
  rdir = File.join(WORK, "recv")
  rpid, port = start_receiver(rdir)
  err = File.join(WORK, "agent.err")
  apid, = start_agent(["--server", "http://127.0.0.1:#{port}", "--interval", "1", "--sampler", "ptrace",
                       "--require-env", MARK], err)
  begin
    got = wait_for("profiles of both") do
      p = payloads(rdir)
      a = p.find { |x| x[:service] == "k8s_web" }
      b = p.find { |x| x[:service] == "k8s_plain" }
      a && b && [a, b]
    end
    l = got[0][:labels]
    { "pod_uid" => UID_, "pod" => POD, "namespace" => "shop-#{$$}", "container_id" => CID }.each do |k, v|
      probs << "pod: #{k}=#{l[k].inspect}, expected #{v}" unless l[k] == v
    end
    %w[pod_uid pod namespace].each { |k| probs << "outside a pod: #{k}=#{got[1][:labels][k]}" if got[1][:labels].key?(k) }
  rescue RuntimeError => e
    probs << "#{e.message}; agent log: #{File.read(err)[-400..]}"
  end
  stop_agent(apid)
  stop_receiver(rpid)
  kill_pid(pod)
  kill_pid(other)
  nil
end

finish
