# frozen_string_literal: true
#
# 98-install.rb - installing rbpeek the way a user does from source:
# make install DESTDIR=... PREFIX=/usr/local, then the installed binary
# records a Ruby program and `rbpeek trace` finds the installed tracer (no
# environment variable) and names what to do when the Ruby's ABI has no
# extension; man finds the page; the bash and zsh completions offer every
# command, option and -f format of the --help texts; make uninstall leaves
# no file behind.  Then make dist: the tarball, unpacked where there is no
# git, builds with make alone and its rbpeek names the commit.
# 99-deb.rb does the Debian package.
#
# e2e-timeout: 600 (make dist's full build takes about 1 min on 2 idle cores)
require "tmpdir"
require_relative "lib/e2e"
include E2E

NAMES = %w[install/files install/record install/trace install/trace-abi install/man install/completions-bash
           install/completions-zsh install/uninstall dist/build].freeze

if BUILD != "build" || VALGRIND
  NAMES.each { |n| skip(n, "runs with the plain build only (make test), not BUILD=#{BUILD}#{VALGRIND ? ' under valgrind' : ''}") }
  exit 0
end
exit 0 if skip_without_rbpeek(NAMES)
# man-db and zsh, for the man and zsh tests, come from make test's set-up
# (tools/install-deps.sh --packaging); a test installs nothing

dest = Dir.mktmpdir("rbpeek-install")
at_exit { FileUtils.rm_rf(dest) }
prefix = "/usr/local"
inst = File.join(dest, prefix)
bin = File.join(inst, "bin", "rbpeek")
abi = RbConfig::CONFIG["ruby_version"]

# A program with a method that must show up in a profile and a trace.
APP = File.join(dest, "app.rb")
File.write(APP, <<~RUBY)
  def rbpeek_install_work(n) = n < 2 ? n : rbpeek_install_work(n - 1) + rbpeek_install_work(n - 2)
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  rbpeek_install_work(20) while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 1.0
RUBY

def make(*args, timeout: 120, chdir: ROOT)
  run(["make", "--no-print-directory", *args], timeout: timeout, chdir: chdir)
end

installed = make("install", "DESTDIR=#{dest}", "PREFIX=#{prefix}", "BUILD=#{BUILD}", "RUBY=#{RUBY}")

check("install/files") do |p|
  next p << "make install: #{installed.describe}" unless installed.status&.zero?

  want = ["bin/rbpeek", "share/man/man1/rbpeek.1", "share/bash-completion/completions/rbpeek",
          "share/zsh/site-functions/_rbpeek", "lib/rbpeek/ruby/rbpeek/trace.rb",
          "lib/rbpeek/ruby/rbpeek/trace/auto.rb", "lib/rbpeek/ruby/#{abi}/rbpeek/trace_ext.so",
          "lib/systemd/system/rbpeek-agent.service", "etc/rbpeek/agent.conf"]
  got = Dir.glob("**/*", base: inst).select { |f| File.file?(File.join(inst, f)) }
  p << "missing: #{(want - got).join(', ')}" unless (want - got).empty?
  p << "unexpected: #{(got - want).join(', ')}" unless (got - want).empty?
  p << "rbpeek is not executable" unless File.executable?(bin)
  "#{got.size} files under #{prefix}"
end
exit(finish) unless installed.status&.zero?

# The installed binary must not lean on the build tree or the environment.
ENV_CLEAN = { "RBPEEK_TRACE_LIB" => nil, "RUBYOPT" => nil }.freeze

check("install/record") do |p|
  out = File.join(dest, "r.txt")
  r = run([bin, "record", "-f", "collapsed", "-o", out, "--silent", "--", RUBY, APP], timeout: 60, env: ENV_CLEAN)
  if !r.status&.zero? then p << "record: #{r.describe}"
  elsif !File.read(out).include?("rbpeek_install_work") then p << "no rbpeek_install_work frame in #{File.read(out)[0, 300].inspect}"
  end
end

check("install/trace") do |p|
  out = File.join(dest, "t.json")
  r = run([bin, "trace", "-f", "json", "-o", out, "--", RUBY, APP], timeout: 60, env: ENV_CLEAN)
  if !r.status&.zero? then p << "trace: #{r.describe}"
  elsif !File.read(out).include?("rbpeek_install_work") then p << "no rbpeek_install_work event in the trace"
  end
  "loaded from #{prefix}/lib/rbpeek/ruby/#{abi}"
end

# With no extension for this Ruby's ABI, trace says so and what to do.
check("install/trace-abi") do |p|
  real = File.join(inst, "lib/rbpeek/ruby", abi)
  other = File.join(inst, "lib/rbpeek/ruby", "0.0.1")
  File.rename(real, other)
  begin
    r = run([bin, "trace", "-o", File.join(dest, "none.pftrace"), "--", RUBY, APP], timeout: 60, env: ENV_CLEAN)
    p << "exit #{r.status}, expected 10: #{r.describe}" unless r.status == 10
    ["not built for this Ruby (#{RUBY_VERSION}, ABI #{abi}", "has it for Ruby ABI 0.0.1", "make install-tracer RUBY="].each do |s|
      p << "stderr lacks #{s.inspect}: #{r.stderr[0, 600].inspect}" unless r.stderr.include?(s)
    end
  ensure
    File.rename(other, real)
  end
end

if !system("command -v man >/dev/null")
  skip("install/man", "man not installed (tools/install-deps.sh --packaging)")
else check("install/man") do |p|
  r = run(["man", "-w", "rbpeek"], env: { "MANPATH" => File.join(inst, "share/man") })
  want = File.join(inst, "share/man/man1/rbpeek.1")
  p << "man -w: #{r.describe}" unless r.status&.zero?
  p << "man -w says #{r.stdout.strip.inspect}, not #{want}" unless r.stdout.strip == want
  page = run(["man", "-P", "cat", "rbpeek"], env: { "MANPATH" => File.join(inst, "share/man"), "MANWIDTH" => "80" })
  p << "man rbpeek: #{page.describe}" unless page.status&.zero? && page.stdout.include?("rbpeek")
end
end

# What --help says, read independently of tools/gen-completions.sh: the
# commands, and per command its long options and -f formats.
main_help = run([RBPEEK_BINARY, "--help"]).stdout
COMMANDS = main_help[/^commands:\n(.*?)\n\n/m, 1].lines.map { |l| l.split.first }
HELP = COMMANDS.to_h { |c| [c, run([RBPEEK_BINARY, c, "--help"]).stdout] }
LONG = HELP.transform_values { |h| h.scan(/(?<![\w-])--[a-z][a-z-]+/).uniq - ["--"] }
FORMATS = HELP.transform_values do |h|
  (list = h[/^formats:\n(.*?)(\n\n|\z)/m, 1]) ? list.lines.map { |l| l.split.first } : h.lines.first[/-f ([a-z|]+)/, 1].to_s.split("|")
end

def bash_complete(file, *words)
  script = "source #{file}; COMP_WORDS=(#{words.map { |w| "'#{w}'" }.join(' ')}); " \
           "COMP_CWORD=#{words.size - 1}; _rbpeek; printf '%s\\n' \"${COMPREPLY[@]}\""
  r = run(["bash", "--norc", "-c", script])
  raise "bash: #{r.describe}" unless r.status&.zero?

  r.stdout.split("\n")
end

check("install/completions-bash") do |p|
  f = File.join(inst, "share/bash-completion/completions/rbpeek")
  got = bash_complete(f, "rbpeek", "")
  p << "commands: #{got.inspect}, expected #{COMMANDS.inspect}" unless (COMMANDS - got).empty?
  p << "'rbpeek rec' completes to #{bash_complete(f, 'rbpeek', 'rec').inspect}" unless bash_complete(f, "rbpeek", "rec") == ["record"]
  COMMANDS.each do |c|
    opts = bash_complete(f, "rbpeek", c, "-")
    p << "#{c}: options #{(LONG[c] - opts).join(' ')} not completed" unless (LONG[c] - opts).empty?
    next if FORMATS[c].empty?

    fmts = bash_complete(f, "rbpeek", c, "-f", "")
    p << "#{c} -f: #{fmts.inspect}, expected #{FORMATS[c].inspect}" unless fmts.sort == FORMATS[c].sort
  end
  pids = bash_complete(f, "rbpeek", "snapshot", "--pid", Process.pid.to_s[0, 2])
  p << "--pid does not offer our pid #{Process.pid}" unless pids.include?(Process.pid.to_s)
  "#{COMMANDS.size} commands, #{LONG.values.sum(&:size)} long options, #{FORMATS['record'].size} record formats"
end

if !system("command -v zsh >/dev/null")
  skip("install/completions-zsh", "zsh not installed (tools/install-deps.sh --packaging)")
else check("install/completions-zsh") do |p|
  f = File.join(inst, "share/zsh/site-functions/_rbpeek")
  r = run(["zsh", "-n", f])
  p << "zsh -n: #{r.describe}" unless r.status&.zero?
  text = File.read(f)
  p << "does not start with #compdef rbpeek" unless text.start_with?("#compdef rbpeek")
  COMMANDS.each do |c|
    body = text[/^\t#{c}\)\n(.*?);;/m, 1]
    next p << "no case for #{c}" unless body

    missing = LONG[c].reject { |o| body.include?("#{o}[") || body.include?(",#{o}}") }
    p << "#{c}: no spec for #{missing.join(' ')}" unless missing.empty?
    p << "#{c}: -f formats not (#{FORMATS[c].join(' ')})" unless FORMATS[c].empty? || body.include?(":format:(#{FORMATS[c].join(' ')})")
  end
end
end

check("install/uninstall") do |p|
  r = make("uninstall", "DESTDIR=#{dest}", "PREFIX=#{prefix}", "BUILD=#{BUILD}")
  p << "make uninstall: #{r.describe}" unless r.status&.zero?
  left = Dir.glob("**/*", base: dest).reject { |f| File.directory?(File.join(dest, f)) || f.start_with?("app.rb", "r.txt", "t.json") }
  p << "left behind: #{left.join(', ')}" unless left.empty?
end

# make dist: unpack where no .git is above, build with make alone.
check("dist/build") do |p|
  work = Dir.mktmpdir("rbpeek-dist")
  begin
    head = run(%w[git rev-parse --short=12 HEAD]).stdout.strip
    r = make("dist", "BUILD=#{work}")
    next p << "make dist: #{r.describe}" unless r.status&.zero?

    tarball = File.join(work, "rbpeek-0.1.0.tar.gz")
    next p << "no #{tarball}" unless File.exist?(tarball)

    x = run(["tar", "-xzf", tarball, "-C", work])
    next p << "tar: #{x.describe}" unless x.status&.zero?

    src = File.join(work, "rbpeek-0.1.0")
    p << "the tarball has a .git" if File.exist?(File.join(src, ".git"))
    b = run(["nice", "make", "-j2"], timeout: 600, chdir: src)
    next p << "make in the unpacked tarball: #{b.describe}\n#{b.stdout.lines.last(5).join}" unless b.status&.zero?

    v = run([File.join(src, "build/rbpeek"), "--version"])
    p << "--version: #{v.stdout.inspect}, expected commit #{head}" unless v.stdout == "rbpeek 0.1.0 (commit #{head})\n"
    p << "the tracer was not built" unless File.exist?(File.join(src, "build/ext/rbpeek/trace_ext.so"))
    "#{File.size(tarball) / 1024} KB tarball, built in #{b.elapsed.round} s"
  ensure
    FileUtils.rm_rf(work)
  end
end

finish
