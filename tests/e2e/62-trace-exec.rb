# frozen_string_literal: true
#
# 62-trace-exec.rb - which process `rbpeek trace` traces: the one it starts,
# through any chain of execs (bundle exec with Debian's bundler and a
# Gemfile of local gems only, a binstub, ruby -S, a shell script that execs
# ruby), and not the processes that one forks or spawns.
require "rbconfig"
require "tmpdir"
require_relative "lib/e2e"
require_relative "lib/trace_check"
include E2E
include TraceCheck

names = %w[trace/exec-chains trace/children]
unless File.exist?(File.join(EXT, "rbpeek", "trace_ext.so"))
  names.each { |n| skip(n, "#{EXT}/rbpeek/trace_ext.so not built (make needs ruby-dev; a sanitizer run uses the plain build's, which make test builds first)") }
  exit 0
end
work = File.join(OUT, "trace-exec.#{$$}")
FileUtils.mkdir_p(work)
at_exit { FileUtils.rm_rf(work) }

# An exec chain ends in the traced program: bundle exec (real bundler, a
# Gemfile with only a local path gem), a binstub, ruby -S, a shell script
# that execs ruby, bundle exec rake with an in-process task.
test("trace/exec-chains") do
  bundle = `command -v bundle 2>/dev/null`.strip
  next skip("trace/exec-chains", "no bundler (tools/install-deps.sh installs Debian's bundler)") if bundle.empty?
  app = File.join(work, "app")
  FileUtils.mkdir_p(File.join(app, "mylib", "lib"))
  FileUtils.mkdir_p(File.join(app, "bin"))
  File.write(File.join(app, "mylib", "mylib.gemspec"),
             %(Gem::Specification.new { |s| s.name = "mylib"; s.version = "1.0"; s.summary = "x"; s.authors = ["x"]; s.files = ["lib/mylib.rb"] }\n))
  File.write(File.join(app, "mylib", "lib", "mylib.rb"), "module T; def self.x; y; end; def self.y; end; end\n")
  File.write(File.join(app, "Gemfile"), %(gem "rake"\ngem "mylib", path: "mylib"\n))
  File.write(File.join(app, "job.rb"), %(require "mylib"\nT.x\nexit 7\n))
  File.write(File.join(app, "Rakefile"), %(task(:work) { require "mylib"; T.x; exit 7 }\n))
  File.write(File.join(app, "bin", "job"), "#!#{RbConfig.ruby}\nrequire 'bundler/setup'\nload File.expand_path('../job.rb', __dir__)\n")
  File.write(File.join(app, "run.sh"), "#!/bin/sh\ncd \"$(dirname \"$0\")\" && exec #{RbConfig.ruby} -Imylib/lib job.rb\n")
  File.chmod(0o755, File.join(app, "bin", "job"))
  File.chmod(0o755, File.join(app, "run.sh"))
  env = { "RBPEEK_TRACE_LIB" => EXT, "BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "HOME" => work,
          "BUNDLE_USER_HOME" => File.join(work, ".bundle"), "PATH" => "#{app}:#{ENV['PATH']}" }
  lock = E2E.run([bundle, "lock", "--local"], env: env, chdir: app, timeout: 60)
  next fail("trace/exec-chains", "bundle lock --local: #{lock.describe}") unless lock.status&.zero?
  chains = {
    "bundle exec ruby" => [bundle, "exec", RbConfig.ruby, "job.rb"],
    "bundle exec rake" => [bundle, "exec", "rake", "work"],
    "binstub" => ["bin/job"],
    "ruby -S" => [RbConfig.ruby, "-Imylib/lib", "-S", "job.rb"],
    "sh exec" => [File.join(app, "run.sh")]
  }
  problems = chains.map do |name, cmd|
    out = File.join(work, "chain-#{name.tr(' ', '_')}.pftrace")
    r = rbpeek("trace", "-o", out, "--no-c-calls", "--", *cmd, timeout: 60, env: env, chdir: app)
    main = r.status == 7 && File.exist?(out) && TraceReader.thread_track(TraceReader.read(out), "main")
    got = main && TraceReader.tree_string(main)
    "#{name}: #{main ? "no T.x{T.y} in #{got[0, 300].inspect}" : r.describe}" unless got =~ /T\.x\{[^{}]*T\.y/
  end.compact
  problems.empty? ? ok("trace/exec-chains", chains.keys.join(", ")) : fail("trace/exec-chains", problems.join("; "))
end

# What the program spawns or forks runs untraced and writes nothing: the
# file holds the parent's run.
test("trace/children") do
  out = File.join(work, "children.pftrace")
  prog = "module T; def self.x; y; end; def self.y; end; end; " \
         "system(#{RbConfig.ruby.inspect}, '-e', 'module U; def self.z; end; end; U.z; print ENV.key?(%q(RBPEEK_TRACE_OUT)) ? :spawned : :bad'); " \
         "Process.wait(fork { module U; def self.w; end; end; U.w }); T.x"
  r = rbpeek("trace", "-o", out, "--no-c-calls", "--", RUBY, "-e", prog, timeout: 30, env: { "RBPEEK_TRACE_LIB" => EXT })
  tracks = r.status&.zero? && File.exist?(out) && TraceReader.read(out)
  names = tracks && tracks.values.flat_map { |t| TraceReader.tree_string(t).scan(/[TU]\.\w+/) }.uniq.sort
  if !tracks then fail("trace/children", r.describe)
  elsif r.stdout != "spawned" then fail("trace/children", "the spawned child said #{r.stdout.inspect}")
  elsif names != %w[T.x T.y] then fail("trace/children", "methods traced #{names.inspect}, expected only the parent's T.x, T.y")
  else ok("trace/children")
  end
end

finish
