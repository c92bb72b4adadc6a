# frozen_string_literal: true
#
# 84-gem.rb - the gem as a user installs it, on the host's Ruby:
#   gem/build                 gem build rbpeek.gemspec: sources only (no
#                             build products, tests or their output)
#   gem/host/install          gem install --local into a new GEM_HOME builds
#                             the tracer and the rbpeek command (make -j2)
#   gem/host/version          GEM_HOME/bin/rbpeek --version: the gem's version
#   gem/host/record           rbpeek record -- ruby PROG: its methods' stack
#   gem/host/trace            rbpeek trace -- ruby PROG: the program ran with
#                             the gem's own tracer; both methods in the trace
#   gem/host/native           the host has libdw-dev: --native works
#   gem/host/require-trace    require "rbpeek/trace" from GEM_HOME: a traced
#                             program's exact call tree (lib/trace_check.rb;
#                             GC steps aside)
#   gem/bundle-exec/record    a Gemfile with gem "rbpeek", path: (a copy of
#                             the sources): bundle exec rbpeek record -- ruby
#                             PROG (the first run builds rbpeek: Bundler
#                             does not build path: gems)
#   gem/missing-zlib-simulated  zlib.h hidden by a CPPFLAGS override (a
#                             directory whose zlib.h is an #error): gem
#                             install stops with one message naming
#                             zlib1g-dev
# Each install is a full build of rbpeek: minutes on a loaded machine.
# e2e-timeout: 900
require_relative "lib/gem"
require_relative "lib/trace_check"
include E2E
include TraceCheck

T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
HOST = %w[install version record trace native require-trace].map { |n| "gem/host/#{n}" }
NAMES = ["gem/build", *HOST, "gem/bundle-exec/record", "gem/missing-zlib-simulated"].freeze

# The gem builds its own rbpeek from the sources (plain flags): a sanitizer
# or valgrind run of the suite would only build and test the same again.
if BUILD != "build" || VALGRIND
  NAMES.each { |n| skip(n, "runs with the plain build only (make test), not BUILD=#{BUILD}#{VALGRIND ? ' under valgrind' : ''}") }
  exit 0
end
missing_tools = %w[gem bundle make].reject { |c| system("command -v #{c} >/dev/null 2>&1") }
unless missing_tools.empty?
  NAMES.each { |n| skip(n, "needs #{missing_tools.join(', ')} (tools/install-deps.sh: ruby, ruby-bundler, make)") }
  finish
end

dir = Dir.mktmpdir("gem.", OUT)
at_exit { FileUtils.rm_rf(dir) }
GemCheck.write_program(dir)
prog = File.join(dir, "gemprog.rb")
gem, problems = GemCheck.build(dir)
report("gem/build", problems, gem && "#{File.size(gem)} bytes")
unless gem
  NAMES.drop(1).each { |n| skip(n, "no gem built") }
  finish
end

home = File.join(dir, "home")
env = { "GEM_HOME" => home, "GEM_PATH" => home, "MAKEFLAGS" => "-j2", "XDG_CACHE_HOME" => File.join(dir, "xdg") }
inst, secs = GemCheck.timed do
  run(["gem", "install", "--local", "--no-document", gem], env: env, timeout: 600, chdir: dir)
end
installed = inst.status&.zero? && File.executable?(File.join(home, "bin", "rbpeek"))
report("gem/host/install", installed ? [] : ["gem install #{inst.describe} #{inst.stdout[-600..]}"], "#{secs} s")
if installed
  rbpeek = File.join(home, "bin", "rbpeek")
  test("gem/host/version") do
    report("gem/host/version", GemCheck.version_problems(run([rbpeek, "--version"], env: env)))
  end
  test("gem/host/record") do
    out = File.join(dir, "host.collapsed")
    res = run([rbpeek, "record", "-f", "collapsed", "-o", out, "--", RUBY, prog], env: env, timeout: 60)
    report("gem/host/record", GemCheck.record_problems(res, out))
  end
  test("gem/host/trace") do
    out = File.join(dir, "host.trace.json")
    res = run([rbpeek, "trace", "-f", "json", "-o", out, "--", RUBY, prog, "200"], env: env, timeout: 60)
    report("gem/host/trace", GemCheck.trace_problems(res, out, home))
  end
  test("gem/host/native") do
    res = run(["sh", "-c", "#{RUBY} -e 'sleep' & p=$!; sleep 1; \"$0\" snapshot --native --pid $p; s=$?; kill $p; exit $s", rbpeek],
              env: env, timeout: 30)
    problem = res.status&.zero? && res.stdout.include?("[native]") ? [] : ["snapshot --native #{res.describe} #{res.stdout[0, 300].inspect}"]
    report("gem/host/native", problem)
  end
  test("gem/host/require-trace") do
    out = File.join(dir, "tree.pftrace")
    r = run([RUBY, FIXTURE, "tree", out], env: env.merge("RUBYLIB" => nil), timeout: 30)
    # Loading through RubyGems allocates: a GC step may fall in the window.
    main = r.status&.zero? && TraceReader.thread_track(TraceReader.read(out), "main")
    tree = main && TraceReader.tree_string(main, drop: /\A(RbPeek::Trace\.|GC )/)
    want = EXPECT["tree"]["main"]
    pr = if !r.status&.zero? then ["traced program #{r.describe}"]
         elsif tree != want then ["main: #{tree.inspect}, expected #{want.inspect}"]
         else []
         end
    report("gem/host/require-trace", pr, "the tracer loaded from GEM_HOME")
  end
else
  HOST.drop(1).each { |n| skip(n, "gem install failed") }
end

test("gem/bundle-exec/record") do
  # The sources as a checkout has them: the gem's files and its gemspec.
  src = File.join(dir, "checkout")
  FileUtils.mkdir_p(src)
  run(["sh", "-c", "tar -xOf \"$0\" data.tar.gz | tar -xz -C \"$1\"", gem, src])
  FileUtils.cp(File.join(ROOT, "rbpeek.gemspec"), src)
  File.write(File.join(dir, "Gemfile"), "gem \"rbpeek\", path: #{src.dump}\n")
  benv = env.merge("BUNDLE_GEMFILE" => File.join(dir, "Gemfile"), "BUNDLE_PATH" => File.join(dir, "bundle"))
  bi = run(["bundle", "install", "--local"], env: benv, timeout: 120, chdir: dir)
  next fail("gem/bundle-exec/record", "bundle install #{bi.describe} #{bi.stdout[-300..]}") unless bi.status&.zero?

  out = File.join(dir, "bundle.collapsed")
  res, secs = GemCheck.timed do
    run(["bundle", "exec", "rbpeek", "record", "-f", "collapsed", "-o", out, "--", RUBY, prog], env: benv, timeout: 600, chdir: dir)
  end
  report("gem/bundle-exec/record", GemCheck.record_problems(res, out), "#{secs} s, the first run building rbpeek")
end

test("gem/missing-zlib-simulated") do
  fake = File.join(dir, "fake-include")
  FileUtils.mkdir_p(fake)
  File.write(File.join(fake, "zlib.h"), "#error zlib.h hidden by the test\n")
  menv = env.merge("GEM_HOME" => File.join(dir, "home2"), "GEM_PATH" => File.join(dir, "home2"), "CPPFLAGS" => "-I#{fake}")
  res = run(["gem", "install", "--local", "--no-document", gem], env: menv, timeout: 120, chdir: dir)
  text = res.stdout + res.stderr
  ours = text.lines.grep(/^rbpeek: /)
  problems = []
  problems << "gem install succeeded without zlib.h" if res.status&.zero?
  problems << "#{ours.size} rbpeek: lines, expected one: #{ours.inspect}" if ours.size != 1
  problems << "the message does not name zlib1g-dev: #{ours.first.inspect}" unless ours.first.to_s.include?("apt-get install zlib1g-dev")
  report("gem/missing-zlib-simulated", problems, ours.first.to_s.strip)
end

puts "# 84-gem: #{(Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0).round(1)} s" if ENV["RBPEEK_TEST_TIMES"]
finish
