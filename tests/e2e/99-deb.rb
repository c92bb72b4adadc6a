# frozen_string_literal: true
#
# 99-deb.rb - the Debian packages, built and used the way Debian does it:
# dpkg-buildpackage -b from the make dist tarball (so that a build in the
# checkout is never disturbed), lintian with no errors, then
# apt-get install ./rbpeek_*.deb ./rbpeek-tracer_*.deb into a clean Debian 12
# (debootstrap --variant=minbase, tools/setup-clean-chroot.sh) where apt
# pulls in everything else, and rbpeek record / rbpeek trace / man -w there.
# Then Debian 13 (the trixie chroot with Ruby 3.3 of tools/setup-rubies.sh):
# the bookworm-built rbpeek installs and records, rbpeek-tracer cannot
# (it is built for Ruby 3.1: libruby3.1), trace says what to do, and doing
# it (make install-tracer RUBY=ruby3.3 PREFIX=/usr) makes trace work.
#
# The chroots are never changed: each run mounts an overlay on the cached
# one (writes go to a scratch upper directory) and apt's downloads are kept
# in /var/cache/rbpeek/clean/debs-SUITE between runs.
#
# e2e-timeout: 900 (package build ~1.5 min, chroot installs ~1 min each;
# a first run also makes the bookworm chroot, ~1-3 min)
require "tmpdir"
require_relative "lib/e2e"
include E2E

NAMES = %w[deb/build deb/lintian deb/bookworm-install deb/bookworm-record deb/bookworm-trace deb/bookworm-man
           deb/trixie-install deb/trixie-record deb/trixie-trace].freeze
CLEAN = ENV.fetch("RBPEEK_CLEAN_CHROOTS", "/var/cache/rbpeek/clean")
TRIXIE = File.join(ENV.fetch("RBPEEK_CHROOTS", "/var/cache/rbpeek/chroots"), "3.3")

def skip_all(why, names = NAMES)
  names.each { |n| skip(n, why) }
end

if BUILD != "build" || VALGRIND
  skip_all("runs with the plain build only (make test), not BUILD=#{BUILD}#{VALGRIND ? ' under valgrind' : ''}")
  exit 0
end
unless root?
  skip_all("needs root (chroot, mount, apt-get in the chroot)")
  exit 0
end
# the packaging tools come from make test's set-up; a test installs nothing
missing = %w[dpkg-buildpackage lintian debootstrap].reject { |c| system("command -v #{c} >/dev/null") }
unless missing.empty?
  skip_all("#{missing.join(', ')} missing (make test's set-up installs them: tools/install-deps.sh --packaging)")
  exit 0
end

work = Dir.mktmpdir("rbpeek-deb")
at_exit { FileUtils.rm_rf(work) }
debs = {} # package name => .deb path

# --- build ------------------------------------------------------------------
check("deb/build") do |p|
  r = run(["make", "--no-print-directory", "dist", "BUILD=#{work}"], timeout: 60)
  next p << "make dist: #{r.describe}" unless r.status&.zero?

  x = run(["tar", "-xzf", File.join(work, "rbpeek-0.1.0.tar.gz"), "-C", work])
  next p << "tar: #{x.describe}" unless x.status&.zero?

  src = File.join(work, "rbpeek-0.1.0")
  b = run(%w[nice dpkg-buildpackage -b -us -uc -j2], timeout: 700, chdir: src,
                                                      env: { "DEB_BUILD_OPTIONS" => "noautodbgsym" })
  next p << "dpkg-buildpackage: #{b.describe}\n#{(b.stdout + b.stderr).lines.last(15).join}" unless b.status&.zero?

  %w[rbpeek rbpeek-tracer].each do |pkg|
    f = Dir[File.join(work, "#{pkg}_0.1.0-*_*.deb")].first or next p << "no #{pkg}_*.deb"
    debs[pkg] = f
  end
  next unless debs.size == 2

  dep = ->(f) { run(["dpkg-deb", "-f", f, "Depends"]).stdout.strip }
  # run-time dependencies come from dh_shlibdeps, not from a list we keep
  %w[libc6 libdw1 libelf1 libbpf1 zlib1g].each { |l| p << "rbpeek Depends lacks #{l}: #{dep[debs['rbpeek']]}" unless dep[debs["rbpeek"]].include?(l) }
  lib = "libruby#{RbConfig::CONFIG['MAJOR']}.#{RbConfig::CONFIG['MINOR']}"
  p << "rbpeek-tracer Depends lacks #{lib}: #{dep[debs['rbpeek-tracer']]}" unless dep[debs["rbpeek-tracer"]].include?(lib)
  # the agent's unit and its config (a conffile: dpkg keeps the admin's edits)
  main_files = run(["dpkg-deb", "-c", debs["rbpeek"]]).stdout
  %w[./lib/systemd/system/rbpeek-agent.service ./etc/rbpeek/agent.conf].each do |f|
    p << "rbpeek has no #{f}" unless main_files.lines.any? { |l| l.split.last == f }
  end
  conffiles = run(["dpkg-deb", "-I", debs["rbpeek"], "conffiles"]).stdout
  p << "/etc/rbpeek/agent.conf is not a conffile: #{conffiles.inspect}" unless conffiles.lines.map(&:strip).include?("/etc/rbpeek/agent.conf")
  files = run(["dpkg-deb", "-c", debs["rbpeek-tracer"]]).stdout
  abi = RbConfig::CONFIG["ruby_version"]
  p << "rbpeek-tracer has no usr/lib/rbpeek/ruby/#{abi}/rbpeek/trace_ext.so" unless files.include?("./usr/lib/rbpeek/ruby/#{abi}/rbpeek/trace_ext.so")
  "built in #{b.elapsed.round} s; rbpeek Depends: #{dep[debs['rbpeek']]}"
end
if debs.size < 2
  skip_all("no packages built", NAMES - ["deb/build"])
  exit(finish)
end

check("deb/lintian") do |p|
  changes = Dir[File.join(work, "rbpeek_0.1.0-*_*.changes")].first
  r = run(["lintian", "--fail-on", "error", changes], timeout: 300)
  errors = r.stdout.lines.grep(/^E: /)
  p << "lintian: #{r.describe}" unless r.status&.zero?
  p << "lintian errors:\n#{errors.join}" unless errors.empty?
  "#{r.stdout.lines.grep(/^W: /).size} warnings"
end

# --- a chroot under an overlay --------------------------------------------
# Overlay.new(lower, suite) { |o| ... }: lower mounted read-only under a
# scratch upper layer at o.dir, with /proc and apt's download cache; all
# unmounted and removed afterwards (and, should this process be killed, by
# the next run: scratch directories of dead PIDs are cleaned up first).
class Overlay
  ROOT_DIR = File.join(CLEAN, "overlays")
  attr_reader :dir

  def self.clean_stale
    Dir[File.join(ROOT_DIR, "*")].each do |d|
      pid = File.basename(d).to_i
      next if pid.positive? && File.exist?("/proc/#{pid}")

      unmount_under(d)
      FileUtils.rm_rf(d)
    end
  end

  def self.unmount_under(d)
    File.readlines("/proc/self/mounts").map { |l| l.split[1] }
        .select { |m| m == d || m.start_with?("#{d}/") }.sort.reverse
        .each { |m| system("umount", "-l", m, err: File::NULL) }
  end

  def initialize(lower, suite)
    @scratch = File.join(ROOT_DIR, "#{Process.pid}-#{suite}")
    FileUtils.mkdir_p(%w[upper work root].map { |d| File.join(@scratch, d) })
    @dir = File.join(@scratch, "root")
    cache = File.join(CLEAN, "debs-#{suite}")
    FileUtils.mkdir_p(File.join(cache, "partial"))
    mount("-t", "overlay", "overlay", "-o",
          "lowerdir=#{lower},upperdir=#{@scratch}/upper,workdir=#{@scratch}/work", @dir)
    mount("-t", "proc", "proc", File.join(@dir, "proc"))
    mount("--bind", cache, File.join(@dir, "var/cache/apt/archives"))
    yield self
  ensure
    self.class.unmount_under(@scratch)
    FileUtils.rm_rf(@scratch)
  end

  def mount(*args)
    r = E2E.run(["mount", *args])
    raise "mount #{args.join(' ')}: #{r.describe}" unless r.status&.zero?
  end

  # Run a command inside; apt non-interactive, a plain PATH.
  def sh(cmd, timeout: 120)
    E2E.run(["chroot", @dir, "/bin/sh", "-c", cmd], timeout: timeout,
            env: { "DEBIAN_FRONTEND" => "noninteractive", "PATH" => "/usr/sbin:/usr/bin:/sbin:/bin",
                   "RBPEEK_TRACE_LIB" => nil, "RUBYOPT" => nil, "LANG" => "C.UTF-8" })
  end

  # apt-get install; on failure (the cached package lists are stale) once
  # more after apt-get update.
  def apt_install(args, timeout: 300)
    cmd = "apt-get -o Acquire::Check-Valid-Until=false -o DPkg::Lock::Timeout=120 install -y -q #{args}"
    r = sh(cmd, timeout: timeout)
    return r if r.status&.zero?

    sh("apt-get -o Acquire::Check-Valid-Until=false -q update", timeout: timeout)
    sh(cmd, timeout: timeout)
  end

  def put(name, text)
    File.write(File.join(@dir, "tmp", name), text)
    "/tmp/#{name}"
  end
end
Overlay.clean_stale

APP = <<~RUBY
  def rbpeek_deb_work(n) = n < 2 ? n : rbpeek_deb_work(n - 1) + rbpeek_deb_work(n - 2)
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  rbpeek_deb_work(20) while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 1.0
RUBY

def copy_debs(o, *pkgs, debs)
  pkgs.map do |pkg|
    FileUtils.cp(debs[pkg], File.join(o.dir, "tmp"))
    "/tmp/#{File.basename(debs[pkg])}"
  end.join(" ")
end

# record and trace of app.rb with ruby (inside the chroot) as the user does.
def record_ok?(o, ruby, p)
  app = o.put("app.rb", APP)
  r = o.sh("rbpeek record -f collapsed -o /tmp/r.txt --silent -- #{ruby} #{app}", timeout: 60)
  out = File.join(o.dir, "tmp/r.txt")
  if !r.status&.zero? then p << "record: #{r.describe}"
  elsif !File.read(out).include?("rbpeek_deb_work") then p << "no rbpeek_deb_work frame in #{File.read(out)[0, 300].inspect}"
  end
end

def trace(o, ruby)
  app = o.put("app.rb", APP)
  FileUtils.rm_f(File.join(o.dir, "tmp/t.json"))
  o.sh("rbpeek trace -f json -o /tmp/t.json -- #{ruby} #{app}", timeout: 60)
end

def trace_ok?(o, ruby, p)
  r = trace(o, ruby)
  out = File.join(o.dir, "tmp/t.json")
  if !r.status&.zero? then p << "trace: #{r.describe}"
  elsif !File.read(out).include?("rbpeek_deb_work") then p << "no rbpeek_deb_work event in the trace"
  end
end

# Mount an overlay on lower; check names[0] with install (a lambda (o, p)
# adding problems to p, returning a note); when that passes, checks.(o)
# runs the rest of names, else they are skipped.
def chroot_tests(lower, suite, names, install, checks)
  Overlay.new(lower, suite) do |o|
    installed = false
    check(names.first) do |p|
      note = install.call(o, p)
      installed = p.empty?
      note
    end
    installed ? checks.call(o) : skip_all("not installed", names.drop(1))
  end
rescue StandardError => e
  fail(names.first, "#{e.class}: #{e.message}")
end

# --- Debian 12 --------------------------------------------------------------
# Made before the tests (tools/setup-tests.sh finish), never here: this only
# asks the script where it is (it exits at once when READY is there).
clean_dir = File.join(ENV.fetch("RBPEEK_CLEAN_CHROOTS", "/var/cache/rbpeek/clean"), "bookworm")
bookworm = if File.exist?(File.join(clean_dir, "READY"))
             run([File.join(ROOT, "tools", "setup-clean-chroot.sh"), "bookworm"], timeout: 30)
           end
book_names = NAMES.grep(/bookworm/)
if !bookworm&.status&.zero?
  skip_all("no clean bookworm chroot at #{clean_dir} (tools/setup-tests.sh finish makes it; see its warning)", book_names)
else
  install = lambda do |o, p|
    next p << "the clean chroot already has ruby" if File.exist?(File.join(o.dir, "usr/bin/ruby"))

    # man-db: a user who runs man has it; minbase does not
    r = o.apt_install("#{copy_debs(o, 'rbpeek', 'rbpeek-tracer', debs)} man-db")
    next p << "apt-get install: #{r.describe}\n#{r.stdout.lines.last(8).join}" unless r.status&.zero?

    v = o.sh("rbpeek --version")
    head = E2E.run(%w[git rev-parse --short=12 HEAD]).stdout.strip   # what make dist packed
    p << "rbpeek --version: #{v.describe}, expected commit #{head}" unless v.stdout == "rbpeek 0.1.0 (commit #{head})\n"
    p << "apt did not pull in ruby (Recommends)" unless File.exist?(File.join(o.dir, "usr/bin/ruby"))
    p << "no bash completion" unless File.exist?(File.join(o.dir, "usr/share/bash-completion/completions/rbpeek"))
    "#{v.stdout.strip}, apt took #{r.elapsed.round} s"
  end
  checks = lambda do |o|
    check("deb/bookworm-record") { |p| record_ok?(o, "ruby", p) }
    check("deb/bookworm-trace") { |p| trace_ok?(o, "ruby", p) }
    check("deb/bookworm-man") do |p|
      r = o.sh("man -w rbpeek")
      p << "man -w rbpeek: #{r.describe}" unless r.status&.zero? && r.stdout.strip == "/usr/share/man/man1/rbpeek.1.gz"
    end
  end
  chroot_tests(bookworm.stdout.strip, "bookworm", book_names, install, checks)
end

# --- Debian 13 --------------------------------------------------------------
# The bookworm-built rbpeek installs (libdw1t64 and libelf1t64 provide
# libdw1 and libelf1); rbpeek-tracer needs libruby3.1, which trixie lacks,
# so trace must say what to do; doing it (build the extension for ruby3.3,
# the chroot has ruby3.3-dev and gcc when DEV_READY) makes it work.
trixie_names = NAMES.grep(/trixie/)
if !File.exist?(File.join(TRIXIE, "READY"))
  skip_all("no trixie chroot at #{TRIXIE} (tools/setup-rubies.sh --dev 3.3)", trixie_names)
else
  install = lambda do |o, p|
    sim = o.sh("apt-get install -s #{copy_debs(o, 'rbpeek-tracer', debs)} 2>&1", timeout: 120)
    p << "rbpeek-tracer (built for Ruby 3.1) installs on trixie: docs/install.md says it cannot" if sim.status&.zero?
    p << "apt's refusal does not name libruby3.1: #{sim.stdout[-400..]}" unless sim.stdout.include?("libruby3.1")
    r = o.apt_install(copy_debs(o, "rbpeek", debs))
    next p << "apt-get install ./rbpeek_*.deb: #{r.describe}\n#{r.stdout.lines.last(8).join}" unless r.status&.zero?

    "rbpeek installs; rbpeek-tracer refused for libruby3.1"
  end
  checks = lambda do |o|
    check("deb/trixie-record") { |p| record_ok?(o, "ruby3.3", p) }
    check("deb/trixie-trace") do |p|
      r = trace(o, "ruby3.3")
      p << "without a tracer for 3.3: #{r.describe}, expected exit 10" unless r.status == 10
      p << "no advice in #{r.stderr[0, 500].inspect}" unless r.stderr.include?("make install-tracer RUBY=/usr/bin/ruby3.3")
      next "no ruby3.3-dev in #{TRIXIE} (DEV_READY): the advice is not followed" unless File.exist?(File.join(TRIXIE, "DEV_READY"))

      # what the message and docs/install.md say to do
      FileUtils.mkdir_p(File.join(o.dir, "tmp/src"))
      x = run(["tar", "-xzf", File.join(work, "rbpeek-0.1.0.tar.gz"), "-C", File.join(o.dir, "tmp/src")])
      next p << "tar: #{x.describe}" unless x.status&.zero?

      m = o.sh("cd /tmp/src/rbpeek-0.1.0 && make install-tracer RUBY=ruby3.3 PREFIX=/usr", timeout: 300)
      next p << "make install-tracer: #{m.describe}" unless m.status&.zero?

      trace_ok?(o, "ruby3.3", p)
      "trace on 3.3 after make install-tracer RUBY=ruby3.3 PREFIX=/usr"
    end
  end
  chroot_tests(TRIXIE, "trixie", trixie_names, install, checks)
end

finish
