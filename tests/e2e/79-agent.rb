# frozen_string_literal: true
# e2e-timeout: 600
#
# 79-agent.rb - rbpeek agent against a stand-in for Pyroscope.  No
# Pyroscope server can be installed on these machines (it is not packaged
# for Debian), so the server here is tests/e2e/fixtures/ingest_receiver.rb,
# a receiver on loopback that speaks Pyroscope's documented ingest API
# (POST /ingest?name=APP{labels}&from&until&format=pprof...) and stores
# every payload; each payload is then read with `go tool pprof`.  The test
# names say "standin-pyroscope" for that reason.
#
# The agent runs with --require-env set to a variable only this file's
# processes carry, so that it leaves alone the other Ruby processes of a
# shared machine (other tests' targets).
#
#   agent/standin-pyroscope/processes   with the default sampler (the
#       in-kernel one: skipped with the reason where the kernel refuses
#       eBPF), ~20 busy Ruby processes (the host's
#       Ruby and the chroot Rubies of tools/setup-rubies.sh, some of them in
#       a PID namespace of their own: unshare -pf), half started before the
#       agent and half while it runs, some stopped while it runs: every one
#       has profiles, labelled with its service_name (PYROSCOPE_APPLICATION_NAME,
#       OTEL_SERVICE_NAME, else its script's name), host pid, namespace pid
#       (in a PID namespace), container id (one is moved into a cgroup named
#       like a Docker container's), Ruby version and the user's label, and its own
#       busy method has most of its samples (go tool pprof -top on all its
#       payloads merged); the agent stops watching the ones that exit
#       (processes_watched on the metrics endpoint).
#   agent/standin-pyroscope/processes-ptrace   the same checks, smaller (4
#       processes: host, chroot, PID namespace; one stopped while watched),
#       with --sampler ptrace.
#   agent/standin-pyroscope/server-down-slow-500   the receiver down, then
#       too slow (past --timeout), then answering 500, then well: the agent
#       never crashes, its memory stays bounded (RSS from the metrics), it
#       drops the oldest profiles and counts them, it logs one line going
#       down and one coming back, and profiles arrive again.  Its options
#       come from a --config file here (with sampler = ptrace and
#       pause = yes: the GVL's holder stopped for each read), and `rbpeek agent --status` reads
#       its state while the server is down.
#   agent/bpf-fallback   run by a user eBPF is refused to (nobody, on a
#       Ruby of nobody's): one warning saying why, the ptrace sampler, and
#       the process profiled all the same.
#   agent/usage-errors   no --server, a password in --server, bad values, a bad config
#       file, an unknown sampler, --pause with the bpf sampler: exit 2
#       with the reason; --status with no agent there, and a
#       --metrics address in use: exit 1.
require_relative "lib/chroot"
require_relative "lib/agent"
require "socket"
require "tmpdir"
require "uri"
include E2E
include AgentE2E

PROCS = "agent/standin-pyroscope/processes"
PROCS_PTRACE = "agent/standin-pyroscope/processes-ptrace"
FALLBACK_T = "agent/bpf-fallback"
OUTAGE = "agent/standin-pyroscope/server-down-slow-500"
USAGE = "agent/usage-errors"
exit 0 if skip_without_rbpeek([PROCS, PROCS_PTRACE, FALLBACK_T, OUTAGE, USAGE])

check(USAGE) do |probs|
  dir = Dir.mktmpdir("rbpeek-agent-usage-", OUT)
  bad_conf = File.join(dir, "bad.conf")
  File.write(bad_conf, "server = http://127.0.0.1:4040\n\nfrobnicate = 3\n")
  free = TCPServer.open("127.0.0.1", 0) { |srv| srv.addr[1] }
  taken = TCPServer.new("127.0.0.1", 0)
  {
    [] => [2, "--server URL is required"],
    %w[--server https://u:pw@pyro.example] => [2, "a password on the command line"],
    %w[--server http://127.0.0.1:4040 --rate 0] => [2, "--rate '0'"],
    %w[--server http://127.0.0.1:4040 --label nokey] => [2, "KEY=VALUE"],
    %w[--server http://127.0.0.1:4040 extra] => [2, "unexpected argument"],
    %w[--server http://127.0.0.1:4040 --sampler perf] => [2, "bpf or ptrace"],
    %w[--server http://127.0.0.1:4040 --pause] => [2, "--pause is for --sampler ptrace"],
    ["--config", File.join(dir, "none.conf")] => [2, "cannot read the config file"],
    ["--config", bad_conf] => [2, "line 3: unknown key"],
    ["--status", "--metrics", "127.0.0.1:#{free}"] => [1, "no agent answers"],
    ["--status"] => [2, "--status needs"],
    ["--server", "http://127.0.0.1:#{free}", "--metrics", "127.0.0.1:#{taken.addr[1]}"] => [1, "cannot listen"],
  }.each do |args, (code, text)|
    r = rbpeek("agent", *args)
    if r.status != code || !r.stderr.include?(text)
      probs << "rbpeek agent #{args.join(' ')}: #{r.describe}; expected exit #{code} saying #{text.inspect}"
    end
  end
  taken.close
  FileUtils.rm_rf(dir)
  nil
end

unless root?
  [PROCS, PROCS_PTRACE, FALLBACK_T, OUTAGE].each { |n| skip(n, "needs root (the agent reads every process)") }
  finish
end
# go tool pprof reads the payloads: Debian's golang-go (tools/install-deps.sh
# --packaging, run by make test's set-up; a test installs nothing)
unless system("command -v go >/dev/null 2>&1")
  [PROCS, PROCS_PTRACE, FALLBACK_T, OUTAGE].each { |n| skip(n, "go tool pprof not available (golang-go: tools/install-deps.sh --packaging)") }
  finish
end

WORK = Dir.mktmpdir("rbpeek-agent-", OUT)
at_exit { FileUtils.rm_rf(WORK) }
GOHOME = File.join(WORK, "gohome")
FileUtils.mkdir_p(GOHOME)
MARK = "RBPEEK_AGENT_TEST_#{$$}"

# The shared helpers (lib/agent.rb: receiver, agent, metrics, payloads);
# every agent here is told to watch only this test's processes.
def start_agent(args, err)
  AgentE2E.start_agent(["--require-env", MARK, *args], err)
end

def pprof_top(files)
  r = run(["go", "tool", "pprof", "-top", "-sample_index=samples", "-nodecount=100000",
           "-nodefraction=0", "-edgefraction=0", *files],
          env: { "HOME" => GOHOME, "GOCACHE" => File.join(GOHOME, "cache") }, timeout: 180)
  raise "go tool pprof #{r.describe}" unless r.status&.zero?

  total = r.stdout[/Total samples = (\d+)/, 1].to_i
  rows = r.stdout.lines.filter_map do |l|
    m = l.match(/^\s*(\d+)\s+([\d.]+)%\s+[\d.]+%\s+(\d+)\s+([\d.]+)%\s+(.*)$/)
    m && { flat: m[1].to_i, flat_pct: m[2].to_f, cum: m[3].to_i, name: m[5].strip }
  end
  [total, rows]
end

# The sample types of a payload, as go tool pprof -raw lists them ("samples/count cpu/nanoseconds").
def pprof_sample_types(file)
  r = run(["go", "tool", "pprof", "-raw", file],
          env: { "HOME" => GOHOME, "GOCACHE" => File.join(GOHOME, "cache") }, timeout: 180)
  raise "go tool pprof -raw #{r.describe}" unless r.status&.zero?

  r.stdout.lines.map(&:strip).each_cons(2).find { |a, _| a == "Samples:" }&.last
end

Proc1 = Struct.new(:tag, :ruby, :version, :how, :env_kind, :pid, :launcher, :service, :ns_pid, :stopped, :container,
                   :ready_at)

# Start one busy process; how: :host, :chroot, :unshare (own PID namespace).
def launch(p, ruby)
  env = { MARK => "1" }
  case p.env_kind
  when :pyroscope then env["PYROSCOPE_APPLICATION_NAME"] = p.service = "pyro_#{p.tag}"
  when :otel then env["OTEL_SERVICE_NAME"] = p.service = "otel_#{p.tag}"
  else p.service = p.tag
  end
  inner = "/tmp/rbpeek-agent-#{$$}"
  if ruby
    script = busy_script(File.join(ruby.dir, inner), p.tag, nap: false)
    argv = ["chroot", ruby.dir, ruby.bin, File.join(inner, File.basename(script))]
  else
    script = busy_script(File.join(WORK, "scripts"), p.tag, nap: false)
    argv = [RUBY, script]
  end
  argv = ["unshare", "--pid", "--fork", "--kill-child", *argv] if p.how == :unshare
  argv = ["nice", "-n", "19", *argv] # busy, but not at the expense of the machine's other work
  log = File.join(WORK, "#{p.tag}.out")
  p.launcher = Process.spawn(env, *argv, out: log, err: log)
  register_pid(p.launcher)
  wait_for("#{p.tag} to start") { File.read(log).include?("ready") }
  # from this second on it only loops in busy_TAG (before, Ruby may spend
  # seconds of a loaded machine's wall-clock time starting up, all sampled)
  p.ready_at = Time.now.to_i + 1
  p.pid = if p.how == :unshare
            wait_for("#{p.tag}'s Ruby under unshare") do
              kids = Dir.glob("/proc/[0-9]*/stat").filter_map do |f|
                st = File.read(f) rescue next # rubocop:disable Style/RescueModifier
                f[%r{/proc/(\d+)/}, 1].to_i if st.split(") ", 2)[1]&.split&.at(1).to_i == p.launcher
              end
              kids.first
            end
          else
            p.launcher
          end
  p.ns_pid = p.how == :unshare ? 1 : p.pid
end

CONTAINER_ID = format("%064x", 0xfeed_0000 + $$) # what Docker's ids look like: 64 hex digits
CGROUP_ROOT = "/sys/fs/cgroup/unified"
CGROUP_DIR = File.join(CGROUP_ROOT, "rbpeek-agent-test-#{$$}")

# Move p into a cgroup named like a Docker container's (cgroup v2), so that
# /proc/PID/cgroup carries a container id; nil, or why it could not be done.
def in_container_cgroup(p)
  return "no cgroup v2 at #{CGROUP_ROOT}" unless File.exist?(File.join(CGROUP_ROOT, "cgroup.procs"))

  dir = File.join(CGROUP_DIR, "docker-#{CONTAINER_ID}.scope")
  FileUtils.mkdir_p(dir)
  File.write(File.join(dir, "cgroup.procs"), p.pid.to_s)
  p.container = CONTAINER_ID
  nil
rescue SystemCallError => e
  "cannot make a container's cgroup: #{e.message}"
end

at_exit do
  Dir.glob(File.join(CGROUP_DIR, "*")).each { |d| Dir.rmdir(d) rescue nil } # rubocop:disable Style/RescueModifier
  Dir.rmdir(CGROUP_DIR) rescue nil # rubocop:disable Style/RescueModifier
end

def stop_proc(p)
  kill_pid(p.launcher)
  p.stopped = true
end

def versions_ok(found, p)
  found == p.version
end

FALLBACK = /warning: --sampler=bpf: (.*); sampling with ptrace instead/.freeze

# Every payload from procs is labelled right and has its busy method on
# top; payloads from other processes are problems.
def check_payloads(procs, all, probs)
  mine = procs.map(&:pid)
  strays = all.reject { |pl| mine.include?(pl[:labels]["pid"].to_i) }
  probs << "#{strays.size} payloads from processes this test did not start (--require-env ignored?)" unless strays.empty?
  procs.each do |p|
    pls = all.select { |pl| pl[:labels]["pid"].to_i == p.pid }
    where = "#{p.tag} (pid #{p.pid}, #{p.how}, ruby #{p.version})"
    if pls.empty?
      probs << "#{where}: no profile"
      next
    end
    pl = pls.first
    probs << "#{where}: service #{pl[:service].inspect}, expected #{p.service.inspect}" unless pl[:service] == p.service
    probs << "#{where}: ruby_version #{pl[:labels]['ruby_version'].inspect}" unless versions_ok(pl[:labels]["ruby_version"], p)
    probs << "#{where}: team label #{pl[:labels]['team'].inspect}" unless pl[:labels]["team"] == "e2e"
    probs << "#{where}: no hostname label" if pl[:labels]["hostname"].to_s.empty?
    cid = pl[:labels]["container_id"]
    probs << "#{where}: container_id #{cid.inspect}, expected #{p.container.inspect}" unless cid == p.container
    ns = pl[:labels]["namespace_pid"]
    if p.how == :unshare
      probs << "#{where}: namespace_pid #{ns.inspect}, expected 1" unless ns == "1"
    elsif ns
      probs << "#{where}: namespace_pid #{ns.inspect} outside a PID namespace"
    end
    if pls.any? { |x| x[:params]["format"] != "pprof" || x[:params]["sampleRate"] != "100" || x[:params]["from"].to_i > x[:params]["until"].to_i }
      probs << "#{where}: bad ingest parameters #{pls.map { |x| x[:params] }.first(2).inspect}"
    end
    # the busy method's share, of the profiles that began once it was ready
    busy = pls.select { |x| x[:params]["from"].to_i >= p.ready_at }
    busy = pls if busy.empty?
    total, rows = pprof_top(busy.map { |x| x[:file] })
    hot = rows.find { |r| r[:name].include?("busy_#{p.tag}") }
    others = rows.select { |r| r[:name] =~ /busy_(?!#{p.tag}\b)/ }
    if total.zero? || !hot
      probs << "#{where}: busy_#{p.tag} not in its profile (#{total} samples: #{rows.first(3).map { |r| r[:name] }})"
    elsif hot[:flat] * 2 < total
      probs << "#{where}: busy_#{p.tag} has #{hot[:flat]} of #{total} samples (#{rows.first(3).map { |r| "#{r[:name]} #{r[:flat]}" }})"
    end
    probs << "#{where}: other processes' methods in its profile: #{others.map { |r| r[:name] }}" unless others.empty?
  end
end

# Run the agent (args: its sampler options) over procs: half started
# before it, half while it runs, gone (a subset) stopped while watched;
# the payloads checked.  The agent's stderr is returned for its sampler.
def run_procs(name, procs, gone, args, probs)
  dir = File.join(WORK, name)
  rpid, rport = start_receiver(dir)
  early, late = procs.partition.with_index { |_, i| i.even? }
  early.each { |p| launch(p, p.ruby) }
  cgroup_note = in_container_cgroup(procs.first)
  err = File.join(WORK, "#{name}-agent.err")
  apid, mport = start_agent(["--server", "http://127.0.0.1:#{rport}", "--interval", "2", "--label", "team=e2e", *args], err)
  # let the agent see the first half, then start the rest while it runs
  wait_for("the agent to watch the first #{early.size} processes") { metrics(mport)["processes_watched"].to_i >= early.size }
  late.each { |p| launch(p, p.ruby) }
  wait_for("the agent to watch all #{procs.size} processes") { metrics(mport)["processes_watched"].to_i >= procs.size }
  # a profile from every process, then stop some of them while it runs
  wait_for("a profile from every process, begun once it was ready") do
    seen = payloads(dir).map { |pl| [pl[:labels]["pid"].to_i, pl[:params]["from"].to_i] }
    procs.all? { |p| seen.any? { |pid, from| pid == p.pid && from >= p.ready_at } }
  end
  gone.each { |p| stop_proc(p) }
  running = procs.size - gone.size
  wait_for("processes_watched to drop to #{running}") { metrics(mport)["processes_watched"].to_i == running }
  sent_before = metrics(mport)["profiles_sent_total"]
  wait_for("two more intervals") { metrics(mport)["profiles_sent_total"] >= sent_before + 2 * running }
  st = stop_agent(apid)
  probs << "the agent exited #{st.inspect} on SIGINT" unless st.exitstatus&.zero?
  kill_pid(rpid)
  bad = File.join(dir, "bad.log")
  probs << "the receiver refused requests: #{File.read(bad)[0, 300]}" if File.exist?(bad)
  all = payloads(dir)
  check_payloads(procs, all, probs)
  # the in-kernel sampler's profiles are of CPU time, the ptrace sampler's of wall-clock time
  want = args.include?("ptrace") ? "samples/count wall/nanoseconds" : "samples/count cpu/nanoseconds"
  if (first = all.first) && (types = pprof_sample_types(first[:file])) != want
    probs << "#{File.basename(first[:file])}: sample types #{types.inspect}, expected #{want.inspect}"
  end
  by_kind = procs.group_by(&:how).transform_values(&:size)
  versions = procs.map(&:version).uniq.sort
  cgroup_note = cgroup_note ? "container_id not checked: #{cgroup_note}" : "one in a container's cgroup"
  [File.read(err), "#{cgroup_note}; #{procs.size} processes (#{by_kind.map { |k, v| "#{v} #{k}" }.join(', ')}; " \
                   "Ruby #{versions.join(', ')}), #{gone.size} stopped while watched, #{all.size} payloads"]
end

# Does the kernel let the agent sample in it?  The agent says at its start
# (one warning when it falls back to ptrace); nil, or the reason it refused.
def bpf_refused
  err = File.join(WORK, "probe-agent.err")
  pid, = start_agent(["--server", "http://127.0.0.1:9"], err)
  stop_agent(pid)
  File.read(err)[FALLBACK, 1]
end

rubies, missing = Chroots.prepare
host_version = `#{RUBY} -e 'print RUBY_VERSION'`
chroot_note = missing.empty? ? nil : "without #{missing.keys.map { |v| "ruby#{v}" }.join(', ')} (#{missing.values.first})"

# ---- agent/standin-pyroscope/processes --------------------------------------
refused = bpf_refused
if refused
  skip(PROCS, "the kernel refused eBPF (the agent fell back to ptrace): #{refused}")
else
  check(PROCS) do |probs|
    kinds = %i[pyroscope otel plain]
    procs = []
    8.times do |i|
      procs << Proc1.new("host#{i}", nil, host_version, i < 6 ? :host : :unshare, kinds[i % 3])
    end
    rubies.each do |r|
      4.times do |i|
        procs << Proc1.new("r#{r.xy.delete('.')}n#{i}", r, r.version, i == 3 ? :unshare : :chroot, kinds[(i + 1) % 3])
      end
    end
    gone = procs.select.with_index { |_, i| (i % 3).zero? }
    log, note = run_procs("procs", procs, gone, [], probs)
    probs << "the agent did not say it samples in the kernel: #{log[0, 300].inspect}" unless log.include?("(in-kernel sampler")
    probs << "the agent fell back to ptrace: #{log[FALLBACK, 1]}" if log =~ FALLBACK
    [chroot_note, "in-kernel sampler", note].compact.join("; ")
  ensure
    procs&.each { |p| kill_pid(p.launcher) if p.launcher }
  end
end

# ---- agent/standin-pyroscope/processes-ptrace -------------------------------
check(PROCS_PTRACE) do |probs|
  procs = [Proc1.new("pt0", nil, host_version, :host, :pyroscope),
           Proc1.new("pt1", nil, host_version, :unshare, :otel),
           Proc1.new("pt2", nil, host_version, :host, :plain)]
  if (r = rubies.first)
    procs << Proc1.new("pt#{r.xy.delete('.')}", r, r.version, :chroot, :plain)
  else
    procs << Proc1.new("pt3", nil, host_version, :host, :plain)
  end
  log, note = run_procs("procs-ptrace", procs, [procs[2]], %w[--sampler ptrace], probs)
  probs << "the agent did not say it samples with ptrace: #{log[0, 300].inspect}" unless log.include?("(ptrace sampler)")
  [chroot_note, "--sampler ptrace", note].compact.join("; ")
ensure
  procs&.each { |p| kill_pid(p.launcher) if p.launcher }
end

# ---- agent/bpf-fallback -------------------------------------------------------
check(FALLBACK_T) do |probs|
  # a Ruby of nobody's, profiled by nobody's agent: ptrace works (same owner), eBPF does not
  user = %w[--reuid=nobody --regid=nogroup --clear-groups]
  dir = File.join(WORK, "fallback")
  rpid, rport = start_receiver(dir)
  nb = Dir.mktmpdir("rbpeek-agent-nobody-") # WORK is root's alone
  File.chmod(0o755, nb)
  script = busy_script(nb, "fb", nap: false)
  File.chmod(0o644, script)
  log = File.join(WORK, "fb.out")
  tpid = Process.spawn({ MARK => "1" }, "setpriv", *user, RUBY, script, in: File::NULL, out: log, err: log)
  register_pid(tpid)
  wait_for("the target to start") { File.read(log).include?("ready") }
  err = File.join(WORK, "fallback-agent.err")
  apid = Process.spawn("setpriv", *user, RBPEEK, "agent", "--require-env", MARK, "--server",
                       "http://127.0.0.1:#{rport}", "--interval", "1", out: File::NULL, err: err)
  register_pid(apid)
  wait_for("a profile of nobody's process") { payloads(dir).any? { |pl| pl[:labels]["pid"].to_i == tpid } }
  st = stop_agent(apid)
  probs << "the agent exited #{st.inspect} on SIGINT" unless st.exitstatus&.zero?
  kill_pid(rpid)
  text = File.read(err)
  warnings = text.scan(FALLBACK).size
  probs << "expected one fallback warning, got #{warnings}: #{text[0, 400].inspect}" unless warnings == 1
  probs << "the agent did not say it samples with ptrace: #{text[0, 300].inspect}" unless text.include?("(ptrace sampler)")
  total, rows = pprof_top(payloads(dir).select { |pl| pl[:labels]["pid"].to_i == tpid }.map { |pl| pl[:file] })
  probs << "busy_fb not in nobody's profile (#{total} samples)" unless rows.any? { |r| r[:name].include?("busy_fb") }
  text[FALLBACK, 1]
ensure
  kill_pid(tpid) if tpid
  FileUtils.rm_rf(nb) if nb
end

# ---- agent/standin-pyroscope/server-down-slow-500 ---------------------------
check(OUTAGE) do |probs|
  dir = File.join(WORK, "outage")
  FileUtils.mkdir_p(dir)
  port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] } # free now: nothing listens there
  procs = 3.times.map { |i| Proc1.new("out#{i}", nil, nil, :host, :plain) }
  procs.each { |p| launch(p, nil) }
  err = File.join(WORK, "outage-agent.err")
  conf = File.join(WORK, "agent.conf")
  File.write(conf, <<~CONF)
    # the outage test's options
    server = http://127.0.0.1:#{port}
    interval = 1
    timeout = 2
    backoff-max = 2
    max-pending = 5
    label = phase=outage
    sampler = ptrace
    pause = yes
  CONF
  apid, mport = start_agent(["--config", conf], err)
  rss = []
  sample = lambda do
    m = metrics(mport)
    rss << m["resident_memory_bytes"]
    probs << "#{m['pending_profiles'].to_i} profiles pending, over --max-pending 5" if m["pending_profiles"] > 5
    m
  end
  # down: nothing listens
  wait_for("profiles dropped while the server is down") { sample.call["profiles_dropped_total"].positive? }
  down = sample.call
  probs << "no failed sends counted while down" unless down["send_failures_total"].positive?
  st = rbpeek("agent", "--status", "--metrics", "127.0.0.1:#{mport}")
  unless st.status&.zero? && st.stdout.include?("server DOWN") && st.stdout =~ /[1-9]\d* dropped/
    probs << "rbpeek agent --status while down: #{st.describe}: #{st.stdout.inspect}"
  end
  # slow: answers after 4 s, past --timeout 2
  File.write(File.join(dir, "mode"), "slow 4")
  rpid, = start_receiver(dir, port)
  f0 = sample.call["send_failures_total"]
  wait_for("sends timing out against the slow server") { sample.call["send_failures_total"] >= f0 + 2 }
  # 500
  File.write(File.join(dir, "mode"), "error")
  f1 = sample.call["send_failures_total"]
  wait_for("sends failing with 500") { sample.call["send_failures_total"] >= f1 + 2 }
  errs = sample.call
  # well again
  sent0 = errs["profiles_sent_total"]
  File.write(File.join(dir, "mode"), "ok")
  wait_for("profiles to flow again") { sample.call["profiles_sent_total"] >= sent0 + 6 }
  wait_for("every process's profile after the outage") do
    seen = payloads(dir).map { |pl| pl[:labels]["pid"].to_i }
    procs.all? { |p| seen.include?(p.pid) }
  end
  last = sample.call
  alive = begin
    Process.kill(0, apid)
  rescue Errno::ESRCH
    false
  end
  probs << "the agent died during the outage" unless alive
  st = stop_agent(apid)
  probs << "the agent exited #{st.inspect} on SIGINT" unless st.exitstatus&.zero?
  kill_pid(rpid)
  log = File.read(err)
  downs = log.lines.grep(/: down \(/)
  ups = log.lines.grep(/: up again/)
  probs << "#{downs.size} 'down' lines in the log, expected 1 (one per state change):\n#{downs.join}" unless downs.size == 1
  probs << "#{ups.size} 'up again' lines in the log, expected 1:\n#{log}" unless ups.size == 1
  probs << "not one failure per attempt logged: #{last['send_failures_total'].to_i} failures" unless last["send_failures_total"] > 2
  max_rss = rss.max.to_i
  # valgrind and the sanitizers add their own hundreds of MiB
  instrumented = VALGRIND || run(["ldd", RBPEEK_BINARY]).stdout.include?("libasan")
  limit = instrumented ? 1024 << 20 : 64 << 20
  probs << "the agent grew to #{max_rss >> 20} MiB resident (limit #{limit >> 20} MiB)" if max_rss > limit
  # every payload that arrived is a valid profile of its process
  payloads(dir).group_by { |pl| pl[:labels]["pid"].to_i }.each do |pid, pls|
    p = procs.find { |x| x.pid == pid } or next
    probs << "#{p.tag}: no phase=outage label (from the config file)" unless pls.all? { |x| x[:labels]["phase"] == "outage" }
    # the busy method's share, of the profiles that began once it was ready
    busy = pls.select { |x| x[:params]["from"].to_i >= p.ready_at }
    busy = pls if busy.empty?
    total, rows = pprof_top(busy.map { |x| x[:file] })
    hot = rows.find { |r| r[:name].include?("busy_#{p.tag}") }
    probs << "#{p.tag}: busy_#{p.tag} missing from its #{total} samples after the outage" unless hot
  end
  "#{last['profiles_dropped_total'].to_i} profiles dropped (counted), #{last['send_failures_total'].to_i} failed sends, " \
    "#{last['profiles_sent_total'].to_i} sent; RSS at most #{(max_rss / 1048576.0).round(1)} MiB"
ensure
  procs&.each { |p| kill_pid(p.launcher) if p.launcher }
end

finish
