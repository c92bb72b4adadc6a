# frozen_string_literal: true
#
# sudo_user.rb - an attacker who may run `sudo rbpeek` and nothing else,
# for the trust tests (96-privilege-trace.rb): the throwaway system account
# rbpeek-e2e (as 96-privilege.rb makes it) and a sudoers.d rule naming the
# rbpeek binary the test runs, removed again when the block ends.
#
# The checkout may be below a directory other users cannot search (a clone
# in /root is 0700): then the binary and the tracer's extension are copied
# into a root-owned temporary directory outside it, which the rule names
# for the time of the test only (a rule naming a deleted path under /tmp
# would let rbpeek-e2e run whatever is recreated there as root); the rules
# of a killed test are removed by the next one.
require "etc"
require "fileutils"
require "tmpdir"
require_relative "e2e"

module SudoUser
  include E2E
  extend E2E
  USER = "rbpeek-e2e"

  # Why the tests cannot run here, or nil.
  def self.why_not
    return "needs root (creates a user and a sudoers rule)" unless root?
    return "sudo not installed (tools/install-deps.sh installs it)" unless system("command -v sudo >/dev/null 2>&1")
    return "setpriv not installed" unless system("command -v setpriv >/dev/null 2>&1")

    dir = unsearchable_dir(RBPEEK)
    return "#{dir} is not searchable by other users (and #{RBPEEK} is a wrapper, not the binary)" if dir && RBPEEK != RBPEEK_BINARY

    nil
  end

  def self.ensure_user
    return Etc.getpwnam(USER) if (Etc.getpwnam(USER) rescue nil)

    res = run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
               "--shell", "/usr/sbin/nologin", USER])
    raise "useradd: #{res.describe}" unless res.status&.zero?

    Etc.getpwnam(USER)
  end

  # Yields a Session: the user's fresh work directory (theirs, 0755, outside
  # the checkout), the rbpeek they may run with sudo, the tracer's
  # extension directory they can read (ext may be nil: none built).
  Session = Struct.new(:dir, :pw, :rbpeek, :ext, :shared) do
    # `sudo rbpeek ARGS` as the user, umask 027, from dir.
    def sudo(args, env: {}, timeout: 60)
      env = { "RBPEEK_TRACE_LIB" => ext }.merge(env) if ext
      keep = ["XDG_CACHE_HOME", *env.keys].join(",")
      as_user(["sudo", "-n", "--preserve-env=#{keep}", rbpeek, *args.map(&:to_s)],
              env: { "XDG_CACHE_HOME" => File.join(dir, "cache") }.merge(env), timeout: timeout)
    end

    # argv as the user (no sudo).
    def as_user(argv, env: {}, timeout: 60)
      E2E.run(user_argv(argv), env: env, chdir: dir, timeout: timeout)
    end

    # argv prefixed so that it runs as the user, umask 027 (for spawn).
    def user_argv(argv)
      ["setpriv", "--reuid=#{pw.uid}", "--regid=#{pw.gid}", "--init-groups", "--inh-caps=-all", "--",
       "sh", "-c", 'umask 027; exec "$@"', "sh", *argv]
    end
  end

  RULES = "/etc/sudoers.d/rbpeek-e2e-trust-"

  # Rules left by a test that was killed (its process is gone).
  def self.remove_stale_rules
    Dir.glob("#{RULES}*").each do |f|
      pid = f.delete_prefix(RULES).to_i
      FileUtils.rm_f(f) unless pid.positive? && File.exist?("/proc/#{pid}")
    end
  end

  def self.session
    remove_stale_rules
    pw = ensure_user
    shared = Dir.mktmpdir("rbpeek-trust-")   # root's, 0755: the copies
    File.chmod(0o755, shared)
    bin = RBPEEK
    if unsearchable_dir(RBPEEK)
      bin = File.join(shared, "rbpeek")
      FileUtils.cp(RBPEEK_BINARY, bin)
      File.chmod(0o755, bin)
    end
    ext = nil
    src = trace_ext_dir
    if src
      ext = File.join(shared, "ext")
      FileUtils.cp_r(src, ext)
      FileUtils.chmod_R("a+rX", ext)
    end
    dir = File.join(shared, "home")
    Dir.mkdir(dir, 0o755)
    File.chown(pw.uid, pw.gid, dir)
    rule = "#{RULES}#{$$}"
    File.write("#{rule}.tmp", "#{USER} ALL=(root) NOPASSWD:SETENV: #{bin}\n", perm: 0o440)
    res = run(["visudo", "-cf", "#{rule}.tmp"])
    raise "visudo rejects the rule: #{res.describe}" unless res.status&.zero?

    File.rename("#{rule}.tmp", rule)
    yield Session.new(dir, pw, bin, ext, shared)
  ensure
    FileUtils.rm_f([rule, "#{rule}.tmp"]) if rule
    FileUtils.rm_rf(shared) if shared
  end

  # The build's tracer extension directory (rbpeek/trace_ext.so inside), or nil.
  def self.trace_ext_dir
    [File.join(ROOT, BUILD, "ext"), File.join(ROOT, "build", "ext")].find do |d|
      File.exist?(File.join(d, "rbpeek", "trace_ext.so"))
    end
  end
end
