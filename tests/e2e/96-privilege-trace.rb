# frozen_string_literal: true
#
# e2e-timeout: 240
#
# 96-privilege-trace.rb - `rbpeek trace` attacked by a user who may run
# `sudo rbpeek` and nothing else (issue 23, items 1-3):
#
#   trace-tracefs       `sudo rbpeek trace` used to copy tracefs's event
#                       descriptions for the program into /tmp, chowned to
#                       the user while root still wrote into it by path:
#                       an attacker loop swaps the directories of any such
#                       copy for symlinks to a root-only directory during 4
#                       runs.  Nothing may appear there; rbpeek now makes no
#                       copy (it reads the kernel streams for the program),
#                       and the program still gets its syscalls.
#   trace-no-caps       the program under `sudo rbpeek trace` (and `record
#                       --`) has no capability at all (CapInh/Prm/Eff/Amb
#                       zero) and cannot open a perf event on a root
#                       process nor on a whole CPU (which would sample
#                       every process); its trace still has its syscalls.
#   trace-kstream-socket  the program talks to rbpeek's kernel-stream socket
#                       itself: what comes back is events of its own threads
#                       (no other process's, no waker); nonsense makes
#                       rbpeek close the socket, and the trace is still
#                       written.
#   trace-output-symlink  root running `rbpeek trace -o DIR/out.json` where
#                       DIR is a user's: the user plants a symlink at the
#                       output path to a root-owned file while the program
#                       runs; the file must stay as it was and the trace
#                       land at DIR/out.json as a regular file.
#
# Every test runs from copies outside the checkout (lib/sudo_user.rb).
require "json"
require "rbconfig"
require_relative "lib/e2e"
require_relative "lib/sudo_user"
include E2E

names = %w[privilege/trace-tracefs privilege/trace-no-caps privilege/trace-kstream-socket hostile/trace-output-symlink]
exit 0 if skip_without_rbpeek(names)
if (why = SudoUser.why_not || (SudoUser.trace_ext_dir ? nil : "the tracer extension (build/ext) is not built"))
  names.each { |n| skip(n, why) }
  exit 0
end

RUBY_BIN = RbConfig.ruby

# The attacker, as the user: until STOP exists, every directory of every
# /tmp/rbpeek-tracefs.* copy is renamed away and replaced by a symlink to
# VICTIM (a root-only directory): root, still copying, would then create
# its files there.  Counts what it saw, tried and achieved.
ATTACKER = <<~'RUBY'
  victim, stop, log = ARGV
  seen = {}
  tries = swaps = 0
  deadline = Time.now + 180
  until File.exist?(stop) || Time.now > deadline
    Dir.glob("/tmp/rbpeek-tracefs.*").each do |d|
      seen[d] ||= (File.lstat(d).uid rescue -1)
      # events/sched before its events are copied, then each event's directory
      ["events/sched", *Dir.glob("#{d}/events/{sched,raw_syscalls}/*").map { |p| p.delete_prefix("#{d}/") }]
        .each do |rel|
          p = File.join(d, rel)
          next if File.symlink?(p) || rel.end_with?("~")
          tries += 1
          begin
            File.rename(p, "#{p}~")
            File.symlink(victim, p)
            swaps += 1
          rescue SystemCallError
            nil
          end
        end
    end
  end
  File.write(log, JSON.generate(seen: seen, tries: tries, swaps: swaps))
RUBY

# The traced program, as the user: is it handed a tracefs copy?  (It reads
# a file: its trace must show the openat.)
PROBE = <<~'RUBY'
  File.read("/etc/hostname")
  File.write(ARGV[0], JSON.generate("tracefs" => ENV["RBPEEK_TRACEFS"], "kfd" => ENV["RBPEEK_TRACE_KFD"]))
RUBY

test("privilege/trace-tracefs") do
  probs = []
  note = nil
  SudoUser.session do |s|
    victim = File.join(s.shared, "rootonly")
    Dir.mkdir(victim, 0o755)
    stop = File.join(s.dir, "stop")
    log = File.join(s.dir, "attacker.json")
    script = File.join(s.dir, "attacker.rb")
    probe = File.join(s.dir, "probe.rb")
    File.write(script, "require 'json'\n#{ATTACKER}")
    File.write(probe, "require 'json'\n#{PROBE}")
    File.chmod(0o644, script)
    File.chmod(0o644, probe)
    attacker = Process.spawn(*s.user_argv([RUBY_BIN, script, victim, stop, log]), chdir: s.dir, pgroup: true,
                                                                                       out: File::NULL, err: File::NULL)
    register_pid(attacker)
    runs = 4
    syscalls = no_kernel = 0
    runs.times do |i|
      res_file = File.join(s.dir, "probe#{i}.json")
      trace = File.join(s.dir, "t#{i}.json")
      res = s.sudo(["trace", "-f", "json", "-o", trace, "--", RUBY_BIN, probe, res_file])
      probs << "run #{i}: sudo rbpeek trace: #{res.describe}" unless res.status&.zero?
      r = JSON.parse(File.read(res_file)) rescue { "error" => "no probe output" }
      next probs << "run #{i}: #{r['error']}" if r["error"]

      probs << "run #{i}: the program was handed a tracefs copy: #{r['tracefs']}" if r["tracefs"]
      names = (JSON.parse(File.read(trace))["traceEvents"].map { |e| e["name"] } rescue [])
      syscalls += 1 if names.include?("openat")
      no_kernel += 1 if res.stderr.include?("no syscalls or scheduler states")
    end
    File.write(stop, "")
    deadline = Time.now + 30
    sleep 0.05 until Process.waitpid(attacker, Process::WNOHANG) || Time.now > deadline
    kill_pid(attacker) if Time.now > deadline
    att = JSON.parse(File.read(log)) rescue { "seen" => {}, "tries" => 0, "swaps" => 0 }
    made = Dir.glob("#{victim}/**/*", File::FNM_DOTMATCH).reject { |p| File.basename(p) == "." }
    probs << "root created #{made.size} entries in a root-only directory through swapped symlinks: #{made.first(5)}" unless made.empty?
    probs << "the attacker swapped #{att['swaps']} of #{att['tries']} directories of a copy for symlinks" if att["swaps"].to_i.positive?
    user_owned = att["seen"].select { |_, uid| uid != 0 }
    probs << "tracefs copies owned by another user than root: #{user_owned}" unless user_owned.empty?
    # where the kernel has the streams at all (root could open them)
    probs << "only #{syscalls} of #{runs - no_kernel} traces have the program's openat (kernel streams served by rbpeek)" unless
      syscalls == runs - no_kernel
    note = "#{runs} runs, attacker loop saw #{att['seen'].size} tracefs copies, #{att['swaps']} swaps worked; " \
           "root-only directory empty; #{syscalls}/#{runs} traces with syscalls" \
           "#{no_kernel.positive? ? " (#{no_kernel} without: no kernel streams here)" : ''}"
  end
  report("privilege/trace-tracefs", probs, note)
end

# perf_event_open(attr, pid, cpu) from the traced program through Fiddle;
# the fd or -errno.
PERF = <<~'RUBY'
  require "fiddle"
  nr = { "x86_64" => 298, "aarch64" => 241 }.fetch(RbConfig::CONFIG["host_cpu"])
  sys = Fiddle::Function.new(Fiddle::Handle::DEFAULT["syscall"],
                             [Fiddle::TYPE_LONG, Fiddle::TYPE_VOIDP, Fiddle::TYPE_INT, Fiddle::TYPE_INT,
                              Fiddle::TYPE_INT, Fiddle::TYPE_LONG], Fiddle::TYPE_LONG)
  # PERF_TYPE_SOFTWARE, size 128, PERF_COUNT_SW_TASK_CLOCK, disabled | exclude_kernel | exclude_hv
  attr = [1, 128, 1, 0, 0, 0, 1 | (1 << 5) | (1 << 6)].pack("LLQQQQQ").ljust(128, "\0")
  open = lambda do |pid, cpu|
    fd = sys.call(nr, attr, pid, cpu, -1, 0)
    fd >= 0 ? "fd" : "errno #{Fiddle.last_error}"
  end
  st = File.read("/proc/self/status")
  caps = %w[CapInh CapPrm CapEff CapAmb].to_h { |k| [k, st[/^#{k}:\s*(\h+)/, 1]] }
  File.write(ARGV[0], JSON.generate(caps: caps, uid: Process.uid, euid: Process.euid,
                                    root_pid: open.(Integer(ARGV[1]), -1), cpu: open.(-1, 0)))
RUBY

# The same program under `sudo rbpeek trace` and `sudo rbpeek record`.
test("privilege/trace-no-caps") do
  next skip("privilege/trace-no-caps", "#{RUBY_BIN} has no fiddle (libffi) to call perf_event_open with") unless
    system(RUBY_BIN, "-rfiddle", "-e", "1", out: File::NULL, err: File::NULL)

  probs = []
  notes = []
  paranoid = File.read("/proc/sys/kernel/perf_event_paranoid").to_i rescue 2
  root_proc = Process.spawn("sleep", "60", pgroup: true)
  register_pid(root_proc)
  SudoUser.session do |s|
    probe = File.join(s.dir, "perf.rb")
    File.write(probe, "require 'json'\nrequire 'rbconfig'\n#{PERF}\nsleep 0.3 if ARGV[2]")
    File.chmod(0o644, probe)
    { "trace" => ["-f", "json", "-o", File.join(s.dir, "t.json")],
      "record" => ["-f", "collapsed", "-o", File.join(s.dir, "r.txt")] }.each do |cmd, args|
      out = File.join(s.dir, "perf-#{cmd}.json")
      res = s.sudo([cmd, *args, "--", RUBY_BIN, probe, out, root_proc, *(cmd == "record" ? ["wait"] : [])])
      probs << "sudo rbpeek #{cmd}: #{res.describe}" unless res.status&.zero?
      r = JSON.parse(File.read(out)) rescue nil
      next probs << "#{cmd}: the program wrote no #{out}: #{res.describe}" unless r

      probs << "#{cmd}: program ran as uid/euid #{r['uid']}/#{r['euid']}, expected #{s.pw.uid}" unless [r["uid"], r["euid"]] == [s.pw.uid] * 2
      nonzero = r["caps"].reject { |_, v| v.to_i(16).zero? }
      probs << "#{cmd}: program has capabilities: #{nonzero}" unless nonzero.empty?
      probs << "#{cmd}: program opened a perf event on root's process #{root_proc}" if r["root_pid"] == "fd"
      probs << "#{cmd}: program opened a perf event on a whole CPU (every process's samples)" if r["cpu"] == "fd" && paranoid > 0
      notes << "#{cmd}: caps #{r['caps'].values.map { |v| v.to_i(16) }.join('/')}, perf_event_open on root's pid: " \
               "#{r['root_pid']}, on CPU 0: #{r['cpu']}"
      next unless cmd == "trace"

      # yet its trace has its syscalls: rbpeek read them for it (where the kernel has them)
      names = (JSON.parse(File.read(File.join(s.dir, "t.json")))["traceEvents"].map { |e| e["name"] } rescue [])
      probs << "trace: no openat syscall slice in the trace: #{res.stderr[0, 300].inspect}" unless
        names.include?("openat") || res.stderr.include?("no syscalls or scheduler states")
    end
  end
  report("privilege/trace-no-caps", probs, notes.join("; "))
ensure
  kill_pid(root_proc) if root_proc
end

# The program speaks to rbpeek's kernel-stream socket itself: a drain ('D'),
# then nonsense.  struct rbk_event: u64 ts, i32 tid, i32 cpu, u16 kind,
# u16 state, 4 bytes padding, i64 nr_or_ret (kind 5: a wakeup).
SOCKET_PROBE = <<~'RUBY'
  fd, = ENV.fetch("RBPEEK_TRACE_KFD").split(":").map(&:to_i)
  io = IO.for_fd(fd, autoclose: false)
  io.binmode
  3.times { File.read("/etc/hostname"); sleep 0.01 }
  io.write("D")
  rc, n = io.read(8).unpack("l<L<")
  evs = io.read(n * 32).to_s.unpack("Q<l<l<S<S<x4q<" * n).each_slice(6).to_a
  own = Dir.children("/proc/self/task").map(&:to_i)
  foreign = evs.map { |e| e[1] }.uniq.reject do |tid|
    own.include?(tid) || !File.exist?("/proc/#{tid}") ||
      File.read("/proc/#{tid}/status")[/^Tgid:\s*(\d+)/, 1].to_i == Process.pid
  end
  wakers = evs.count { |e| e[3] == 5 && e[5] != 0 }
  io.write("X")                 # not a request: rbpeek closes the socket
  eof = (io.read(1).nil? rescue true)
  File.write(ARGV[0], JSON.generate(rc: rc, n: n, foreign: foreign, wakers: wakers, eof: eof))
RUBY

test("privilege/trace-kstream-socket") do
  probs = []
  note = why_skip = nil
  SudoUser.session do |s|
    probe = File.join(s.dir, "sock.rb")
    out = File.join(s.dir, "sock.json")
    trace = File.join(s.dir, "t.json")
    File.write(probe, "require 'json'\n#{SOCKET_PROBE}")
    File.chmod(0o644, probe)
    res = s.sudo(["trace", "-f", "json", "-o", trace, "--", RUBY_BIN, probe, out])
    probs << "sudo rbpeek trace: #{res.describe}" unless res.status&.zero?
    r = JSON.parse(File.read(out)) rescue nil
    next probs << "the program wrote no #{out}: #{res.describe}" unless r
    next why_skip = "the kernel streams are not available here (drain: #{r['rc']})" if
      r["rc"] != 0 && res.stderr.include?("no syscalls or scheduler states")

    probs << "drain answered #{r['rc']} with #{r['n']} events, expected 0 and some" unless r["rc"].zero? && r["n"].positive?
    probs << "events of other processes' threads: #{r['foreign'].first(5)}" unless r["foreign"].empty?
    probs << "#{r['wakers']} wakeups name their waker (may be any process)" unless r["wakers"].zero?
    probs << "rbpeek kept the socket open after nonsense" unless r["eof"]
    probs << "no trace written after the socket was closed" unless File.size?(trace)
    note = "#{r['n']} events, all of the program's own threads, no waker; nonsense closed the socket, trace written"
  end
  next skip("privilege/trace-kstream-socket", why_skip) if why_skip && probs.empty?

  report("privilege/trace-kstream-socket", probs, note)
end

test("hostile/trace-output-symlink") do
  probs = []
  note = nil
  SudoUser.session do |s|
    victim = File.join(s.shared, "root-file")
    File.write(victim, "root's data\n", perm: 0o644)
    out = File.join(s.dir, "out.json")
    ready = File.join(s.shared, "ready")
    planted = File.join(s.dir, "planted")
    # the program (root's): say it runs, wait until the symlink is planted, exit (the trace is saved)
    prog = "File.write(#{ready.inspect}, ''); t = Time.now; sleep 0.01 until File.exist?(#{planted.inspect}) || Time.now - t > 60"
    env = { "SUDO_UID" => nil, "SUDO_GID" => nil, "SUDO_USER" => nil, "RBPEEK_TRACE_LIB" => s.ext }
    pid = Process.spawn(env, s.rbpeek, "trace", "-f", "json", "-o", out, "--", RUBY_BIN, "-e", prog,
                        out: File::NULL, err: File.join(s.shared, "err"), pgroup: true)
    register_pid(pid)
    t = Time.now
    sleep 0.01 until File.exist?(ready) || Time.now - t > 60
    attack = "File.unlink(#{out.inspect}) rescue nil; File.symlink(#{victim.inspect}, #{out.inspect}); " \
             "print File.readlink(#{out.inspect}); File.write(#{planted.inspect}, '')"
    res = s.as_user([RUBY_BIN, "-e", attack])
    probs << "the attacker could not plant the symlink: #{res.describe}" unless res.status&.zero? && res.stdout == victim
    File.write(planted, "") unless File.exist?(planted)
    st = nil
    t = Time.now
    sleep 0.05 until (st = Process.waitpid2(pid, Process::WNOHANG)&.last) || Time.now - t > 90
    kill_pid(pid) unless st
    err = File.read(File.join(s.shared, "err")) rescue ""
    probs << "rbpeek trace: #{st ? "exit #{st.exitstatus.inspect}" : 'still running after 90 s'}: #{err[0, 300].inspect}" unless st&.success?
    probs << "the root-owned file was overwritten through the symlink (#{File.size(victim)} bytes)" unless File.read(victim) == "root's data\n"
    if File.symlink?(out) || !File.file?(out)
      probs << "#{out} is not a regular file after the run"
    else
      probs << "#{out} is not the trace" unless (JSON.parse(File.read(out))["traceEvents"] rescue nil)
    end
    left = Dir.glob("#{out}.tmp*") + Dir.glob("#{s.dir}/.rbpeek.tmp*")
    probs << "temporary files left: #{left}" unless left.empty?
    note = "symlink planted mid-run; root's file untouched, the trace replaced the symlink"
  end
  report("hostile/trace-output-symlink", probs, note)
end

finish
