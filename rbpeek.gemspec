# frozen_string_literal: true

# The rbpeek gem: the rbpeek command line tool and the in-process tracer
# (require "rbpeek/trace"), both built at install time by the project's
# Makefile (ext/rbpeek/extconf.rb runs it) from the sources listed here.
Gem::Specification.new do |s|
  s.name = "rbpeek"
  s.version = File.read(File.join(__dir__, "Makefile"))[/^VERSION\s*:=\s*(\S+)/, 1]
  s.summary = "Sampling profiler for any Ruby process (rbpeek command) and an in-process flight recorder"
  s.description = "rbpeek attaches to any running Ruby process (no gem in the target, no restart) " \
                  "and records flame graphs, top, snapshots and pprof/speedscope/callgrind " \
                  "profiles.  RbPeek::Trace records every method call, GC step and GVL state " \
                  "into bounded per-thread ring buffers and saves them as a Perfetto trace."
  s.authors = ["rbpeek developers"]
  s.license = "MIT"
  s.homepage = "https://example.invalid/rbpeek"
  s.required_ruby_version = ">= 2.7"
  # Sources only: no build products (build*/), tests or their output.
  s.files = Dir.chdir(__dir__) do
    Dir["Makefile", "src/**/*.{c,h}", "ext/rbpeek/*.{c,h,rb}", "lib/**/*.rb", "bin/rbpeek",
        "tools/gen-syscalls.sh", "LICENSE", "README.md", "docs/*.md", "docs/*.1"].sort
  end
  s.bindir = "bin"
  s.executables = ["rbpeek"]
  s.extensions = ["ext/rbpeek/extconf.rb"]
  s.require_paths = ["lib"]
end
