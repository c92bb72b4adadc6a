# frozen_string_literal: true
#
# gem.rb - helpers of the gem tests (84-gem.rb on the host's Ruby,
# 87-chroot-gem.rb in a chroot's): build rbpeek-*.gem with `gem build`,
# install it as a user would, and check what the installed rbpeek command
# does with a real Ruby program.
require "json"
require "tmpdir"
require_relative "e2e"

module GemCheck
  VERSION = File.read(File.join(E2E::ROOT, "Makefile"))[/^VERSION\s*:=\s*(\S+)/, 1]
  # A program with a known stack: gem_outer -> gem_inner, ARGV[0] loop
  # turns (2,000,000: about 0.5 s of CPU; a trace wants few).
  PROGRAM = <<~RUBY
    puts "tracer: \#{$LOADED_FEATURES.grep(/trace_ext/).first}"
    def gem_outer; gem_inner; end
    def gem_inner; x = 0; Integer(ARGV[0] || 2_000_000).times { x += 1 }; x; end
    gem_outer
  RUBY
  # What a gem must not carry: build products, tests, their output, junk.
  JUNK = %r{\A(build[^/]*/|tests/|bench/|examples/|\.|o2\.txt)|\.(o|d|a|so|gem|raw\.gz)\z}.freeze

  module_function

  # `gem build` into dir; [path of the .gem or nil, problems].
  def build(dir)
    res = E2E.run(["gem", "build", File.join(E2E::ROOT, "rbpeek.gemspec"), "-o", File.join(dir, "rbpeek.gem")],
                  timeout: 60)
    gem = File.join(dir, "rbpeek.gem")
    return [nil, ["gem build #{res.describe}"]] unless res.status&.zero? && File.exist?(gem)

    [gem, content_problems(gem)]
  end

  # The files in a .gem: sources only, and the ones the build needs.
  def content_problems(gem)
    list = E2E.run(["sh", "-c", "tar -xOf \"$0\" data.tar.gz | tar -tz", gem]).stdout.lines.map(&:chomp)
    problems = list.grep(JUNK).first(5).map { |f| "the gem carries #{f}" }
    %w[Makefile bin/rbpeek ext/rbpeek/extconf.rb src/cli/main.c tools/gen-syscalls.sh lib/rbpeek/trace.rb].each do |f|
      problems << "the gem lacks #{f}" unless list.include?(f)
    end
    problems
  end

  # The program's file, for the checks below, under dir (as the runner sees it).
  def write_program(host_dir)
    File.write(File.join(host_dir, "gemprog.rb"), PROGRAM)
  end

  # rbpeek --version names the gem's version.
  def version_problems(res)
    out = res.stdout.to_s
    return ["rbpeek --version #{res.describe}"] unless res.status&.zero?

    out.include?(VERSION) ? [] : ["rbpeek --version says #{out.strip.inspect}, not #{VERSION}"]
  end

  # record -f collapsed of PROGRAM: the file holds gem_outer;gem_inner.
  def record_problems(res, collapsed)
    return ["rbpeek record #{res.describe}"] unless res.status&.zero?
    return ["no output file #{collapsed}"] unless File.exist?(collapsed)

    hits = File.read(collapsed).lines.select { |l| l.include?("Object#gem_outer") && l.include?("Object#gem_inner") }
    hits.empty? ? ["no stack with Object#gem_outer;Object#gem_inner in #{File.read(collapsed)[0, 300].inspect}"] : []
  end

  # trace -f json of PROGRAM: the program ran with the tracer from under
  # want_dir (the gem's, as the program sees it), and the trace has both
  # methods.
  def trace_problems(res, json, want_dir)
    problems = []
    return ["rbpeek trace #{res.describe}"] unless res.status&.zero?

    tracer = res.stdout[/^tracer: (.*)$/, 1].to_s
    problems << "the program loaded the tracer #{tracer.inspect}, not the gem's (under #{want_dir})" unless tracer.start_with?(want_dir)
    names = JSON.parse(File.read(json))["traceEvents"].to_a.map { |e| e["name"] }
    %w[gem_outer gem_inner].each do |m|
      problems << "no #{m} event in the trace (#{names.uniq.first(8).inspect})" unless names.any? { |n| n.to_s.include?(m) }
    end
    problems
  rescue Errno::ENOENT, JSON::ParserError => e
    problems << "trace file: #{e.message}"
  end

  # The seconds a block took, and its value.
  def timed
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    v = yield
    [v, (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).round(1)]
  end
end
