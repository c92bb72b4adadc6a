# frozen_string_literal: true

# The rbpeek gem: the in-process tracer (require "rbpeek/trace").  The
# rbpeek command line tool itself is built with make (see README.md).
Gem::Specification.new do |s|
  s.name = "rbpeek"
  s.version = File.read(File.join(__dir__, "Makefile"))[/^VERSION\s*:=\s*(\S+)/, 1]
  s.summary = "In-process flight recorder of Ruby method calls, GC and GVL, saved as Perfetto traces"
  s.description = "RbPeek::Trace records every method call, GC step and GVL state of a Ruby " \
                  "process into bounded per-thread ring buffers and saves the window since the " \
                  "last reset as a Perfetto trace or Chrome JSON: cheap enough to leave on and " \
                  "keep only the slow requests."
  s.authors = ["rbpeek developers"]
  s.license = "MIT"
  s.homepage = "https://example.invalid/rbpeek"
  s.required_ruby_version = ">= 2.7"
  s.files = Dir.chdir(__dir__) do
    Dir["lib/**/*.rb", "ext/rbpeek/*.{c,h,rb}"] + %w[tools/gen-syscalls.sh] +
      %w[hmap.c hmap.h json.c json.h utf8.c utf8.h vec.c vec.h err.h gz.h pb.h].map { |f| "src/util/#{f}" } +
      %w[LICENSE README.md docs/trace.md]
  end
  s.extensions = ["ext/rbpeek/extconf.rb"]
  s.require_paths = ["lib"]
end
