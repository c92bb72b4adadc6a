# frozen_string_literal: true
# e2e-timeout: 400
#
# 79-agent-hostile.rb - the agent against what a hostile or clumsy world
# gives it (issue 23, items 5-7): processes that wrote a title over their
# environment, config files that are not what they seem, servers that
# answer oddly, idle connections to the metrics endpoint, and the systemd
# unit's hardening.  The server is the stand-in for Pyroscope
# (fixtures/ingest_receiver.rb, see 79-agent.rb for why a stand-in).
#
#   agent/retitled-environment   a Ruby whose title ($0, longer than its
#       arguments, as puma's tag) overwrote what /proc/PID/environ shows:
#       --require-env still finds it, and its PYROSCOPE_APPLICATION_NAME
#       names its profiles.
#   agent/config-file   /dev/zero and a FIFO refused at once (not regular
#       files), a long comment's tail is no setting, a line over 4096 bytes
#       refused, a file only root may read refused under sudo (SUDO_UID as
#       sudo sets it), and no error quotes the file's content.
#   agent/odd-replies   "HTTP/1.1 2000 OK" is not a success, a reason
#       phrase with terminal escapes reaches the log without them, and
#       LF-only replies are answers (the server is up).
#   agent/status-idle-connections   --status answers while 12 idle
#       connections are open to the metrics endpoint (one at a time, with a
#       2 s wait each, it timed out).
#   agent/systemd-unit   `systemd-analyze security --offline=true` rates
#       debian/rbpeek-agent.service at most 3.5 (it was 9.0 "UNSAFE"), and
#       the capabilities the agent needs are in its bounding set.
require_relative "lib/agent"
require "tmpdir"
include E2E
include AgentE2E

RETITLED = "agent/retitled-environment"
CONFIG = "agent/config-file"
REPLIES = "agent/odd-replies"
IDLE = "agent/status-idle-connections"
UNIT = "agent/systemd-unit"
exit 0 if skip_without_rbpeek([RETITLED, CONFIG, REPLIES, IDLE, UNIT])

WORK = Dir.mktmpdir("rbpeek-agent-hostile-", OUT)
at_exit { FileUtils.rm_rf(WORK) }
MARK = "RBPEEK_AGENT_HOSTILE_#{$$}"
UNIT_FILE = File.join(ROOT, "debian", "rbpeek-agent.service")
EXPOSURE_MAX = 3.5

check(CONFIG) do |probs|
  dir = File.join(WORK, "config")
  FileUtils.mkdir_p(dir)
  fifo = File.join(dir, "fifo")
  File.mkfifo(fifo)
  long = File.join(dir, "long.conf")
  File.write(long, "# #{'a' * 2045}server = http://10.9.9.9:1/\n")
  huge = File.join(dir, "huge.conf")
  File.write(huge, "# #{'a' * 5000}\nserver = http://127.0.0.1:1/\n")
  secret = File.join(dir, "secret.conf")
  File.write(secret, "password = hunter2-#{$$}\n")
  File.chmod(0o600, secret)
  cases = [
    [["--config", "/dev/zero"], {}, 2, "not a regular file"],
    [["--config", fifo], {}, 2, "not a regular file"],
    [["--config", long], {}, 2, "--server URL is required"],
    [["--config", huge], {}, 2, "line 1: longer than 4096 bytes"],
    [["--config", secret], {}, 2, "line 1: unknown key"],
  ]
  if root?
    FileUtils.chmod(0o755, [WORK, dir])
    cases << [["--config", secret], { "SUDO_UID" => "65534", "SUDO_GID" => "65534", "SUDO_USER" => "nobody" },
              2, "cannot read the config file"]
  end
  cases.each do |args, env, code, text|
    r = rbpeek("agent", *args, env: env)
    probs << "rbpeek agent #{args.join(' ')[0, 80]} #{env.keys.join(' ')}: #{r.describe}; expected exit #{code} saying #{text.inspect}" if r.status != code || !r.stderr.include?(text)
    probs << "the error quotes the file: #{r.stderr[0, 200].inspect}" if r.stderr.include?("hunter2") || r.stderr.include?("password")
  end
  root? ? nil : "not root: the sudo case not tried"
end

SA = `command -v systemd-analyze 2>/dev/null`.strip
if SA.empty?
  skip(UNIT, "systemd-analyze not installed (apt-get install systemd)")
else check(UNIT) do |probs|
  sa = SA
  r = run([sa, "security", "--offline=true", "--no-pager", UNIT_FILE], timeout: 60)
  level = r.stdout[/Overall exposure level for [^:]*:\s*([\d.]+)/, 1]
  if !level
    probs << "systemd-analyze security: #{r.describe}"
  elsif level.to_f > EXPOSURE_MAX
    probs << "exposure #{level} > #{EXPOSURE_MAX}:\n#{r.stdout.lines.grep(/✗/).first(20).join}"
  end
  unit = File.read(UNIT_FILE)
  bounding = unit[/^CapabilityBoundingSet=(.*)$/, 1].to_s.split
  %w[CAP_SYS_PTRACE CAP_PERFMON CAP_BPF].each do |c|
    probs << "#{c} missing from CapabilityBoundingSet" unless bounding.include?(c)
  end
  probs << "CAP_SYS_ADMIN in the bounding set" if bounding.include?("CAP_SYS_ADMIN")
  "exposure #{level}"
end
end

check(IDLE) do |probs|
  # an agent whose server is nowhere: only its metrics endpoint matters here
  free = TCPServer.open("127.0.0.1", 0) { |srv| srv.addr[1] }
  err = File.join(WORK, "idle.err")
  pid, port = start_agent(["--server", "http://127.0.0.1:#{free}", "--sampler", "ptrace",
                           "--require-env", MARK], err)
  idle = Array.new(12) { TCPSocket.new("127.0.0.1", port) }
  sleep 0.5
  r = rbpeek("agent", "--status", "--metrics", "127.0.0.1:#{port}", timeout: 30)
  probs << "--status with 12 idle connections open: #{r.describe}" unless r.status == 0 && r.stdout.include?("processes")
  idle.each(&:close)
  stop_agent(pid)
  nil
end

unless root?
  [RETITLED, REPLIES].each { |n| skip(n, "needs root (the agent reads every process)") }
  finish
end

# A busy Ruby carrying MARK (and env) whose script is script; its pid.
def busy_ruby(tag, env, pre = "")
  script = busy_script(File.join(WORK, "scripts"), tag, pre)
  log = File.join(WORK, "#{tag}.out")
  pid = Process.spawn({ MARK => "1" }.merge(env), "nice", "-n", "19", RUBY, script, out: log, err: log)
  register_pid(pid)
  wait_for("#{tag} to start") { File.read(log).include?("ready") }
  pid
end

check(RETITLED) do |probs|
  # $0 longer than the arguments: Ruby moves the environment to the heap and
  # writes the title over the area /proc/PID/environ shows (as puma's tag does)
  pid = busy_ruby("retitled", { "PYROSCOPE_APPLICATION_NAME" => "retitled_svc" },
                  "$0 = 'retitled worker ' + 'x' * 8000")
  shown = File.binread("/proc/#{pid}/environ")
  probs << "the title did not overwrite /proc/PID/environ: the test shows nothing" if shown.include?(MARK)
  rdir = File.join(WORK, "retitled-recv")
  rpid, rport = start_receiver(rdir)
  err = File.join(WORK, "retitled.err")
  apid, = start_agent(["--server", "http://127.0.0.1:#{rport}", "--interval", "1", "--sampler", "ptrace",
                       "--require-env", MARK], err)
  got = begin
    wait_for("a profile of the retitled process", 60) do
      payloads(rdir).find { |p| p[:labels]["pid"] == pid.to_s }
    end
  rescue RuntimeError => e
    probs << "#{e.message}; agent log: #{File.read(err)[-400..]}"
    nil
  end
  probs << "service #{got[:service].inspect}, expected retitled_svc" if got && got[:service] != "retitled_svc"
  stop_agent(apid)
  stop_receiver(rpid)
  kill_pid(pid)
  nil
end

check(REPLIES) do |probs|
  pid = busy_ruby("replies", { "PYROSCOPE_APPLICATION_NAME" => "replies_svc" })
  rdir = File.join(WORK, "replies-recv")
  rpid, rport = start_receiver(rdir)
  mode = File.join(rdir, "mode")
  err = File.join(WORK, "replies.err")
  File.write(mode, "status2000")
  apid, mport = start_agent(["--server", "http://127.0.0.1:#{rport}", "--interval", "1", "--sampler", "ptrace",
                             "--require-env", MARK, "--backoff-max", "1"], err)
  wait_for("a failed send") { metrics(mport)["send_failures_total"].to_i >= 1 }
  m = metrics(mport)
  probs << "HTTP 2000 counted as sent (#{m['profiles_sent_total']})" if m["profiles_sent_total"].to_i.positive?
  File.write(mode, "escapes")
  wait_for("the escapes reply") { File.read(err).include?("500") || metrics(mport)["send_failures_total"].to_i >= 3 }
  File.write(mode, "lf")
  wait_for("a profile sent with LF-only replies") { metrics(mport)["profiles_sent_total"].to_i >= 2 }
  m = metrics(mport)
  probs << "server_up #{m['server_up']} after LF-only replies" unless m["server_up"] == 1
  stop_agent(apid)
  log = File.binread(err)
  probs << "the log holds control characters: #{log.lines.grep(/[\x00-\x08\x0b-\x1f\x7f]/).first(3).inspect}" if log.match?(/[\x00-\x08\x0b-\x1f\x7f]/)
  stop_receiver(rpid)
  kill_pid(pid)
  nil
rescue RuntimeError => e
  probs << "#{e.message}; agent log: #{File.exist?(err) ? File.read(err)[-600..] : ''}"
  nil
end

finish
