# frozen_string_literal: true
#
# 78-subprocesses.rb - --subprocesses for record, snapshot and top on a
# real process tree (tests/targets/record/forker.rb): workers forked at
# start, one killed and re-forked mid-recording, a shell that execs Ruby,
# a non-Ruby child.  Every Ruby process must show under its own
# "process PID: cmdline" root (in speedscope: its own profiles), the
# non-Ruby one nowhere, and the killed worker must not break anything.
# Also a spawned non-Ruby command whose child is Ruby, and forker.rb under
# the newest chroot Ruby (tools/setup-rubies.sh).
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/chroot"
include E2E

R = Record
names = %w[subproc/record subproc/speedscope subproc/snapshot subproc/top subproc/non-ruby-root]
exit 0 if skip_unless_tracing(names)

PROCESS = R::PROCESS_ROOT
def by_process(stacks) = R.by_process(stacks)
def children_named(pid, comm) = R.children_of(pid, comm)

# What a recording of forker.rb must show; returns a note.
def forker_problems(probs, procs, s, sleepers)
  with = ->(label) { procs.select { |_, (_, labels)| labels.include?(label) }.keys }
  a, b, ex = with.call("Object#work_a"), with.call("Object#work_b"), with.call("Object#exec_work")
  probs << "parent #{s.pid} missing: #{procs.keys.inspect}" unless procs.key?(s.pid)
  probs << "expected 2 workers in work_a, got #{a.inspect}" unless a.size == 2
  probs << "re-forked worker (work_b) missing or not a new process: #{b.inspect} vs #{a.inspect}" unless b.size == 1 && !a.include?(b.first)
  probs << "the Ruby exec'd by sh (exec_work) missing" unless ex.size == 1
  probs << "non-Ruby child #{sleepers.inspect} has a process root" unless (procs.keys & sleepers).empty?
  probs << "parent's root label lacks its cmdline: #{procs[s.pid]&.first.inspect}" unless procs[s.pid]&.first.to_s.include?("forker.rb")
  "processes #{procs.keys.size}: work_a #{a.inspect}, work_b #{b.inspect}, exec #{ex.inspect}"
end

# record --subprocesses of a running forker.rb (s: pid, log); the raw file.
def record_forker(probs, s)
  out = R.tmp("forker.txt")
  sleepers = children_named(s.pid, "sleep")
  # --idle: the parent only supervises (Kernel#sleep); without it, a
  # recording that never caught the parent at work (a busy machine) hides
  # it as idle, and this test is about which processes are followed
  bg = R::Background.new(["record", "--subprocesses", "--idle", "-d", "5", "-f", "collapsed", "-o", out, "--pid", s.pid])
  bg.wait_stderr(/recording process/)
  sleep 1 # the first workers get sampled; then forker kills one and goes on
  Process.kill("USR2", s.pid)
  res = bg.wait(timeout: 20)
  return probs << "record: #{res.describe}" unless res.status&.zero?

  bad = R.stderr_of(res).lines.grep(/error:|warning:/i)
  probs << "stderr has errors: #{bad.inspect}" unless bad.empty?
  probs << "stderr does not say 4 or more processes were followed: #{R.stderr_of(res)}" unless R.stderr_of(res) =~ /followed [4-9] Ruby processes/
  probs << "forker has no sleep child (test broken?)" if sleepers.empty?
  note = forker_problems(probs, by_process(R.read_collapsed(out)), s, sleepers)
  probs << "target log: #{s.log}\nps: #{`ps -o pid,ppid,stat,cmd --ppid #{s.pid}`}\nstderr: #{res.stderr}" unless probs.empty?
  [note, R.stderr_of(res)[R::RAW_LINE, 1]]
end

raw_file = nil
check("subproc/record") do |probs|
  R.with_script("forker") do |s|
    note, raw_file = record_forker(probs, s)
    note
  end
end

# forker.rb run by the newest chroot Ruby (a Debian build without VM symbols).
ForkerIn = Struct.new(:pid, :log_file) do
  def log = (File.read(log_file)[0, 500] rescue "")
end
rubies, = Chroots.prepare
if (ruby = rubies.max_by { |r| Gem::Version.new(r.version) })
  check("subproc/record-ruby#{ruby.xy}") do |probs|
    ready = File.join(Chroots::INNER, ".run", "forker.ready")
    FileUtils.rm_f(ruby.host_path(ready))
    log = R.tmp("forker-#{ruby.xy}.log")
    pid = Process.spawn({ "RBPEEK_READY" => ready }, "chroot", ruby.dir, "/bin/sh", "-c",
                        "cd #{Chroots::INNER}/record && exec #{ruby.bin} forker.rb",
                        in: "/dev/null", out: log, err: %i[child out])
    E2E.register_pid(pid)
    begin
      deadline = R.mono + 30
      sleep 0.05 until File.exist?(ruby.host_path(ready)) || R.mono > deadline
      raise "forker under ruby #{ruby.version} not ready: #{File.read(log)[0, 400]}" unless File.exist?(ruby.host_path(ready))

      sleep 0.2
      note, = record_forker(probs, ForkerIn.new(pid, log))
      "ruby #{ruby.version}: #{note}"
    ensure
      E2E.kill_pid(pid)
    end
  end
else
  skip("subproc/record-chroot", "no chroot Ruby ready (tools/setup-rubies.sh)")
end

check("subproc/speedscope") do |probs|
  next probs << "no raw file from subproc/record" unless raw_file && File.exist?(raw_file)

  out = R.tmp("forker.speedscope.json")
  res = R.rec("report", "-i", raw_file, "-f", "speedscope", "-o", out)
  next probs << "report: #{res.describe}" unless res.status&.zero?

  j = JSON.parse(File.read(out))
  frames = j["shared"]["frames"]
  pids = j["profiles"].map do |pr|
    roots = pr["samples"].map { |st| frames[st.first]["name"][PROCESS, 1] }.uniq
    probs << "profile #{pr['name'].inspect} mixes processes #{roots.inspect}" unless roots.size == 1
    roots.first.to_i
  end.uniq
  probs << "speedscope has profiles of only #{pids.size} processes: #{pids.inspect}" unless pids.size >= 4
  "#{j['profiles'].size} profiles over #{pids.size} processes"
end

check("subproc/snapshot") do |probs|
  R.with_script("forker") do |s|
    sleepers = children_named(s.pid, "sleep")
    res = R.rec("snapshot", "--subprocesses", "--json", "--pid", s.pid)
    j = json_of(res)
    pids = j["processes"].map { |pr| pr["pid"] }
    probs << "root #{s.pid} not first: #{pids.inspect}" unless pids.first == s.pid
    workers = j["processes"].select { |pr| pr["threads"].any? { |t| t["frames"].any? { |f| f["label"] == "Object#work_a" } } }
    probs << "expected 2 workers in work_a: #{pids.inspect}" unless workers.size == 2
    workers.each do |w|
      main = w["threads"].find { |t| t["main"] }
      probs << "worker #{w['pid']}'s main thread has tid #{main&.dig('tid')}, not its pid" unless main && main["tid"] == w["pid"]
    end
    probs << "non-Ruby child listed" unless (pids & sleepers).empty?
    # which process is which: each one's command line, as /proc shows it
    j["processes"].each do |pr|
      now = File.read("/proc/#{pr['pid']}/cmdline").tr("\0\n\t", "   ").strip rescue nil
      probs << "process #{pr['pid']}: cmdline #{pr['cmdline'].inspect}, /proc says #{now.inspect}" if now && pr["cmdline"] != now
    end
    probs << "no worker titled 'forker worker': #{j['processes'].map { |pr| pr['cmdline'] }}" unless workers.all? { |w| w["cmdline"].to_s.start_with?("forker worker") }
    # (the tree changes as forker goes on: compare the root and the count only)
    text = R.rec("snapshot", "--subprocesses", "--pid", s.pid)
    heads = text.stdout.scan(/^Process (\d+): ruby/).flatten.map(&:to_i)
    probs << "text snapshot lists #{heads.inspect}, JSON #{pids.inspect}" unless heads.first == s.pid && heads.size >= 3
    cmds = text.stdout.scan(/^Process \d+: ruby .*\nCommand: (.+)$/).flatten
    probs << "text snapshot: #{cmds.size} 'Command:' lines under #{heads.size} processes" unless cmds.size == heads.size
    probs << "text snapshot: no 'Command: forker worker' line" unless cmds.any? { |c| c.start_with?("forker worker") }
    (p = s.running_problem(busy: false)) && probs << p
    "#{pids.size} processes"
  end
end

check("subproc/top") do |probs|
  R.with_script("forker") do |s|
    res = R.rec("top", "--subprocesses", "-n", "2", "--delay", "1", "--pid", s.pid, timeout: 15)
    next probs << "top: #{res.describe}" unless res.status&.zero?

    last = res.stdout.split(/^(?=rbpeek top: )/).last.to_s
    probs << "header lacks the process count: #{last.lines[1].inspect}" unless last.lines[1].to_s =~ /[2-9] processes/
    probs << "no work_a row: #{last[0, 600]}" unless last.include?("Object#work_a")
    probs << "process roots shown as rows" if last.include?("process #{s.pid}")
    nil
  end
end

check("subproc/non-ruby-root") do |probs|
  script = "def child_work; i = 0; i += 1 while i < 10_000; end; t = Time.now; child_work while Time.now - t < 2.5"
  out = R.tmp("sh.txt")
  res = R.rec("record", "--subprocesses", "-f", "collapsed", "-o", out, "--", "sh", "-c",
              "sleep 0.3; #{RUBY} -e '#{script}'; true", timeout: 20)
  next probs << "record -- sh: #{res.describe}" unless res.status&.zero?

  procs = by_process(R.read_collapsed(out))
  ruby = procs.select { |_, (_, labels)| labels.include?("Object#child_work") }
  probs << "the Ruby child of sh is missing: #{procs.keys.inspect}" unless ruby.size == 1
  probs << "sh itself has a process root" unless procs.size == 1
  probs << "stderr does not say the root is not Ruby" unless R.stderr_of(res).include?("not Ruby")
  nil
end

finish
