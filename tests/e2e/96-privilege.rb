# frozen_string_literal: true
#
# 96-privilege.rb - rbpeek under sudo, the way a user runs it: an ordinary
# user (a throwaway system account, rbpeek-e2e, created once) allowed by a
# sudoers.d rule to run this build's rbpeek as root, runs
# `sudo rbpeek record -o FILE -- ruby ...` with umask 027.  The spawned
# program runs as that user (uid, euid, gid and groups, never root), and the
# output and raw files belong to that user with the mode its umask gives
# (0640), not to root; so do the cache directories rbpeek makes.  The same
# for `sudo rbpeek trace -- ruby ...`: the program runs as the user with no
# capability at all, and its trace still has the kernel streams (syscalls),
# which rbpeek opens as root for it and serves to its tracer
# (96-privilege-trace.rb attacks trace further).
require "etc"
require "json"
require "rbconfig"
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/trace_check"
include E2E

USER = "rbpeek-e2e"
SUDOERS = "/etc/sudoers.d/rbpeek-e2e"
names = %w[privilege/sudo-spawn privilege/sudo-trace privilege/sudo-no-overwrite privilege/sudo-check-first
           privilege/sudo-no-drop-root]
exit 0 if skip_without_rbpeek(names)

def why_not
  return "needs root (creates a user and a sudoers rule)" unless root?
  return "sudo not installed (tools/install-deps.sh installs it)" unless system("command -v sudo >/dev/null 2>&1")
  return "setpriv not installed" unless system("command -v setpriv >/dev/null 2>&1")

  # rbpeek must be reachable by the user: every directory above it searchable
  dir = unsearchable_dir(RBPEEK)
  return "#{dir} is not searchable by other users" if dir

  nil
end

# The user and the rule, made idempotently (the rule names this build's rbpeek).
def ensure_user_and_rule
  unless (Etc.getpwnam(USER) rescue nil)
    res = run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
               "--shell", "/usr/sbin/nologin", USER])
    raise "useradd: #{res.describe}" unless res.status&.zero?
  end
  rule = "#{USER} ALL=(root) NOPASSWD:SETENV: #{RBPEEK}\n"
  return if (File.read(SUDOERS) rescue nil) == rule

  tmp = "#{SUDOERS}.tmp"
  File.write(tmp, rule, perm: 0o440)
  res = run(["visudo", "-cf", tmp])
  raise "visudo rejects #{rule.inspect}: #{res.describe}" unless res.status&.zero?

  File.rename(tmp, SUDOERS)
end

if (why = why_not)
  names.each { |n| skip(n, why) }
  exit 0
end

# As the user, through sudo, in a fresh directory of theirs with umask 027:
# yields dir, pw and run_sudo; run_sudo.(args) runs `sudo rbpeek ARGS`.
def as_user
  ensure_user_and_rule
  pw = Etc.getpwnam(USER)
  dir = Dir.mktmpdir("rbpeek-sudo-")
  File.chown(pw.uid, pw.gid, dir)
  File.chmod(0o755, dir)
  run_sudo = lambda do |args, env = {}|
    keep = ["XDG_CACHE_HOME", *env.keys].join(",")
    cmd = ["sudo", "-n", "--preserve-env=#{keep}", RBPEEK, *args]
    run(["setpriv", "--reuid=#{pw.uid}", "--regid=#{pw.gid}", "--init-groups", "--",
         "sh", "-c", 'umask 027; exec "$@"', "sh", *cmd],
        env: { "XDG_CACHE_HOME" => File.join(dir, "cache") }.merge(env), chdir: dir, timeout: 30)
  end
  yield dir, pw, run_sudo
ensure
  FileUtils.rm_rf(dir) if dir
end


test("privilege/sudo-spawn") do
  probs = []
  as_user do |dir, pw, run_sudo|
    out = File.join(dir, "out.txt")
    ids = File.join(dir, "ids")
    script = "File.write(#{ids.inspect}, [Process.uid, Process.euid, Process.gid, Process.egid, " \
             "Process.groups.sort.join(%q(,)), ENV['HOME']].join(' ')); def work; i = 0; i += 1 while i < 10_000; end; " \
             "t = Time.now; work while Time.now - t < 1"
    res = run_sudo.(["record", "-f", "collapsed", "-o", out, "--", RbConfig.ruby, "-e", script])
    raise "sudo rbpeek record: #{res.describe}" unless res.status&.zero?

    raise "the program wrote no #{ids}: #{res.describe}" unless File.exist?(ids)

    got = File.read(ids).split(" ")
    want = [pw.uid, pw.uid, pw.gid, pw.gid].map(&:to_s)
    probs << "program ran as uid/euid/gid/egid #{got.first(4).join('/')}, expected #{want.join('/')}" unless got.first(4) == want
    probs << "program kept root's groups: #{got[4].inspect}" if got[4].to_s.split(",").include?("0")
    probs << "program's HOME is #{got[5].inspect}, expected the user's (#{pw.dir})" unless got[5] == pw.dir
    raw = Record.raw_path_of(res)
    probs << "no raw file reported: #{Record.stderr_of(res)[-300..].inspect}" unless raw
    [out, ids, raw].compact.each do |f|
      next probs << "#{f} missing" unless File.exist?(f)

      st = File.stat(f)
      probs << "#{f} owned by #{st.uid}:#{st.gid}, expected #{pw.uid}:#{pw.gid}" unless [st.uid, st.gid] == [pw.uid, pw.gid]
      probs << "#{f} has mode #{format('%04o', st.mode & 0o7777)}, expected 0640 (umask 027)" unless st.mode & 0o7777 == 0o640
    end
    # directories rbpeek makes for the user (the cache) are the user's too
    cache = File.join(dir, "cache")
    [cache, File.join(cache, "rbpeek")].each do |d|
      st = File.stat(d)
      probs << "#{d} (made by rbpeek) owned by #{st.uid}:#{st.gid}, expected #{pw.uid}:#{pw.gid}" unless [st.uid, st.gid] == [pw.uid, pw.gid]
    end
    probs << "the profile has no sample of the program's work" if File.exist?(out) && !File.read(out).include?("Object#work")
  end
  probs.empty? ? ok("privilege/sudo-spawn", "program as #{USER}, files #{USER}'s with mode 0640") : fail("privilege/sudo-spawn", probs.join("\n"))
end

test("privilege/sudo-trace") do
  next skip("privilege/sudo-trace", "#{TraceCheck::EXT}/rbpeek/trace_ext.so not built (make needs ruby-dev; a sanitizer run uses the plain build's, which make test builds first)") unless
    File.exist?(File.join(TraceCheck::EXT, "rbpeek", "trace_ext.so"))

  probs = []
  kernel = true
  as_user do |dir, pw, run_sudo|
    out = File.join(dir, "trace.json")
    ids = File.join(dir, "ids")
    script = "st = File.read('/proc/self/status'); File.write(#{ids.inspect}, [Process.uid, Process.euid, " \
             "st[/CapEff:\\s*(\\h+)/, 1], st[/CapAmb:\\s*(\\h+)/, 1]].join(' ')); " \
             "3.times { sleep 0.01; File.read('/etc/hostname') }"
    # the extension built for this Ruby (a sanitizer build has none of its own)
    res = run_sudo.(["trace", "-f", "json", "-o", out, "--", RbConfig.ruby, "-e", script],
                    { "RBPEEK_TRACE_LIB" => TraceCheck::EXT })
    raise "sudo rbpeek trace: #{res.describe} #{res.stderr[0, 400]}" unless res.status&.zero?
    raise "the program wrote no #{ids}" unless File.exist?(ids)

    uid, euid, eff, amb = File.read(ids).split(" ")
    probs << "program ran as uid/euid #{uid}/#{euid}, expected #{pw.uid}" unless [uid, euid] == [pw.uid.to_s] * 2
    probs << "program's capabilities eff=#{eff} amb=#{amb}, expected none" unless [eff, amb].map { |h| h.to_i(16) } == [0, 0]
    st = File.stat(out)
    probs << "#{out} owned by #{st.uid}:#{st.gid}, expected #{pw.uid}:#{pw.gid}" unless [st.uid, st.gid] == [pw.uid, pw.gid]
    names = JSON.parse(File.read(out))["traceEvents"].map { |e| e["name"] }
    kernel = !res.stderr.include?("no syscalls or scheduler states")
    probs << "no openat/read syscall slices in the trace: #{res.stderr[0, 300]}" if kernel && !(names.include?("openat") && names.include?("read"))
    probs << "rbpeek's tracefs copy left behind: #{Dir.glob('/tmp/rbpeek-tracefs.*')}" unless Dir.glob("/tmp/rbpeek-tracefs.*").empty?
  end
  if !probs.empty? then fail("privilege/sudo-trace", probs.join("\n"))
  elsif !kernel then skip("privilege/sudo-trace", "the kernel streams are not available here at all")
  else ok("privilege/sudo-trace", "program as #{USER} with no capability; syscalls traced; trace file #{USER}'s")
  end
end

# A raw file to convert, made as the user (sudo rbpeek record).
def user_raw(dir, run_sudo)
  res = run_sudo.(["record", "-f", "collapsed", "-o", File.join(dir, "r.txt"), "--", RbConfig.ruby, "-e",
                   "def work; i = 0; i += 1 while i < 10_000; end; t = Time.now; work while Time.now - t < 0.5"])
  raw = Record.raw_path_of(res)
  raise "sudo rbpeek record made no raw file: #{res.describe}" unless res.status&.zero? && raw && File.size?(raw)

  raw
end

# `sudo rbpeek report -o VICTIM`, as the user: refused (exit 10), VICTIM as it was.
test("privilege/sudo-no-overwrite") do
  probs = []
  as_user do |dir, _pw, run_sudo|
    raw = user_raw(dir, run_sudo)
    rootdir = Dir.mktmpdir("rbpeek-rootonly-")
    File.chmod(0o755, rootdir)
    begin
      victims = {
        "a root-owned file in a root-only directory" => File.join(rootdir, "passwd"),
        # sticky /tmp: the user may create files there, never replace another's
        "a root-owned file in sticky /tmp" => File.join(Dir.tmpdir, "rbpeek-victim-#{$$}")
      }
      victims.each do |what, victim|
        File.write(victim, "root's data\n", perm: 0o644)
        File.chown(0, 0, victim)
        res = run_sudo.(["report", "-i", raw, "-f", "collapsed", "-o", victim])
        st = File.lstat(victim)
        probs << "#{what}: exit #{res.status.inspect}, expected 10: #{res.stderr[0, 300]}" unless res.status == 10
        probs << "#{what}: #{victim} now owned by #{st.uid}:#{st.gid}, expected 0:0" unless [st.uid, st.gid] == [0, 0]
        probs << "#{what}: #{victim} was changed" unless st.file? && File.read(victim) == "root's data\n"
        left = Dir.glob("#{victim}.tmp*")
        probs << "#{what}: temporary files left: #{left}" unless left.empty?
      ensure
        File.unlink(victim) if File.exist?(victim)
      end
    ensure
      FileUtils.rm_rf(rootdir)
    end
  end
  probs.empty? ? ok("privilege/sudo-no-overwrite", "root's files refused and untouched") : fail("privilege/sudo-no-overwrite", probs.join("\n"))
end

# An output the user cannot write is refused at once: the program never runs.
test("privilege/sudo-check-first") do
  probs = []
  as_user do |dir, _pw, run_sudo|
    rootdir = Dir.mktmpdir("rbpeek-rootonly-")
    File.chmod(0o755, rootdir)
    ran = File.join(dir, "ran")
    begin
      res = run_sudo.(["record", "-o", File.join(rootdir, "out.svg"), "--", RbConfig.ruby, "-e",
                       "File.write(#{ran.inspect}, 'x'); sleep 1"])
      probs << "exit #{res.status.inspect}, expected 10: #{res.stderr[0, 300]}" unless res.status == 10
      probs << "no error naming the file: #{res.stderr[0, 300].inspect}" unless res.stderr.include?("cannot write '#{File.join(rootdir, 'out.svg')}'")
      probs << "the program ran although its output could never be written" if File.exist?(ran)
      probs << "files appeared in the root-only directory: #{Dir.children(rootdir)}" unless Dir.children(rootdir).empty?
    ensure
      FileUtils.rm_rf(rootdir)
    end
  end
  probs.empty? ? ok("privilege/sudo-check-first", "refused before recording") : fail("privilege/sudo-check-first", probs.join("\n"))
end

# --no-drop-root under sudo would be a root shell: refused, COMMAND never run.
test("privilege/sudo-no-drop-root") do
  probs = []
  as_user do |dir, _pw, run_sudo|
    ran = File.join(dir, "ran")
    %w[record trace].each do |cmd|
      res = run_sudo.([cmd, "--no-drop-root", "-o", File.join(dir, "out"), "--", "/bin/sh", "-c", "id -u > #{ran}"])
      probs << "#{cmd}: exit #{res.status.inspect}, expected 2: #{res.stderr[0, 300]}" unless res.status == 2
      probs << "#{cmd}: no reason given: #{res.stderr[0, 300].inspect}" unless res.stderr.include?("--no-drop-root is refused under sudo")
      probs << "#{cmd}: the program ran (as uid #{File.read(ran).strip})" if File.exist?(ran)
      FileUtils.rm_f(ran)
    end
  end
  probs.empty? ? ok("privilege/sudo-no-drop-root", "refused for record and trace") : fail("privilege/sudo-no-drop-root", probs.join("\n"))
end

finish
