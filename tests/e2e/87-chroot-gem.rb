# frozen_string_literal: true
#
# 87-chroot-gem.rb - the gem installed by another Ruby: Debian 13's Ruby 3.3
# in the chroot of tools/setup-rubies.sh --dev (ruby3.3-dev, gcc, make,
# zlib; no libdw-dev).  The .gem from `gem build` on the host is installed
# there with that Ruby's gem into a new GEM_HOME, and run there (a mount
# namespace of its own with /proc mounted in the chroot):
#   gem/ruby3.3/install        gem install --local builds rbpeek and the
#                              tracer for Ruby 3.3
#   gem/ruby3.3/without-libdw  libdw-dev is really missing there: the build
#                              said it built without --native (gem_make.out),
#                              and --native says why and what to install
#   gem/ruby3.3/without-ebpf   libbpf-dev, clang or bpftool missing there: the
#                              build said it built without eBPF and named
#                              the packages, and record --sampler=bpf warns
#                              that this rbpeek has no eBPF and samples with
#                              ptrace
#   gem/ruby3.3/version        rbpeek --version
#   gem/ruby3.3/record         rbpeek record -- ruby3.3 PROG
#   gem/ruby3.3/trace          rbpeek trace -- ruby3.3 PROG, with the gem's
#                              tracer built for 3.3
# e2e-timeout: 600
require_relative "lib/gem"
require_relative "lib/chroot"
include E2E

T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
XY = "3.3"
PRE = "gem/ruby#{XY}"
NAMES = %w[install without-libdw without-ebpf version record trace].map { |n| "#{PRE}/#{n}" }.freeze

# The gem builds its own rbpeek from the sources (plain flags): a sanitizer
# or valgrind run of the suite would only build and test the same again.
if BUILD != "build" || VALGRIND
  NAMES.each { |n| skip(n, "runs with the plain build only (make test), not BUILD=#{BUILD}#{VALGRIND ? ' under valgrind' : ''}") }
  exit 0
end
if !root?
  NAMES.each { |n| skip(n, "needs root (chroot)") }
  finish
end
rubies, missing = Chroots.prepare
ruby = rubies.find { |r| r.xy == XY }
unless ruby
  NAMES.each { |n| skip(n, "no Ruby #{XY} chroot: #{missing[XY] || 'not ready'}") }
  finish
end
unless File.exist?(ruby.host_path("DEV_READY"))
  NAMES.each { |n| skip(n, "no ruby#{XY}-dev/gcc in the chroot (tools/setup-tests.sh finish runs tools/setup-rubies.sh --dev)") }
  finish
end

inner = "/tmp/rbpeek-gem.#{$$}"
host = ruby.host_path(inner)
FileUtils.mkdir_p(host)
at_exit { FileUtils.rm_rf(host) }
gem, problems = GemCheck.build(host)
unless gem && problems.empty?
  NAMES.each { |n| fail(n, "gem build: #{problems.join('; ')}") }
  finish
end
GemCheck.write_program(host)
home = "#{inner}/home"
prog = "#{inner}/gemprog.rb"

# argv run in the chroot, with /proc mounted there in a mount namespace of
# its own, and the gem's environment.
def inside(ruby, home, *argv)
  ["unshare", "--mount", "--", "/bin/sh", "-ec",
   "mount --make-rprivate /; mount -t proc proc \"$0/proc\"; exec chroot \"$0\" \"$@\"",
   ruby.dir, "/usr/bin/env", "GEM_HOME=#{home}", "GEM_PATH=#{home}", "HOME=/root", "MAKEFLAGS=-j2",
   "XDG_CACHE_HOME=#{home}/xdg", "PATH=/usr/local/bin:/usr/bin:/bin", *argv]
end

inst, secs = GemCheck.timed do
  run(inside(ruby, home, "gem#{XY}", "install", "--local", "--no-document", "#{inner}/rbpeek.gem"), timeout: 480)
end
rbpeek = "#{home}/bin/rbpeek"
installed = inst.status&.zero? && File.exist?(ruby.host_path(rbpeek))
report("#{PRE}/install", installed ? [] : ["gem install #{inst.describe} #{inst.stdout[-600..]}"], "#{secs} s")
unless installed
  NAMES.drop(1).each { |n| skip(n, "gem install failed") }
  finish
end

test("#{PRE}/without-libdw") do
  next skip("#{PRE}/without-libdw", "the chroot has libdw-dev") if File.exist?(ruby.host_path("/usr/include/elfutils/libdwfl.h"))

  log = Dir.glob(File.join(ruby.host_path(home), "extensions", "*", "*", "rbpeek-*", "gem_make.out")).first
  said = log && File.read(log)[/^rbpeek: libdw.*$/]
  res = run(inside(ruby, home, rbpeek, "record", "--native", "-o", "#{inner}/n.txt", "--", ruby.bin, "-e", "1"))
  problems = []
  problems << "the build did not say it built without --native (#{log || 'no gem_make.out'})" unless said
  problems << "record --native #{res.describe}, expected exit 2" unless res.status == 2
  problems << "--native does not name libdw-dev: #{res.stderr.inspect}" unless res.stderr.include?("libdw-dev")
  report("#{PRE}/without-libdw", problems, said.to_s.strip[0, 80])
end
test("#{PRE}/without-ebpf") do
  have = %w[/usr/include/bpf/libbpf.h /usr/bin/clang].all? { |f| File.exist?(ruby.host_path(f)) } &&
         %w[/usr/sbin/bpftool /usr/bin/bpftool].any? { |f| File.exist?(ruby.host_path(f)) }
  next skip("#{PRE}/without-ebpf", "the chroot has libbpf-dev, clang and bpftool") if have

  log = Dir.glob(File.join(ruby.host_path(home), "extensions", "*", "*", "rbpeek-*", "gem_make.out")).first
  said = log && File.read(log)[/^rbpeek: .* not found: building WITHOUT eBPF.*$/]
  res = run(inside(ruby, home, rbpeek, "record", "--sampler=bpf", "-d", "1", "-f", "collapsed",
                   "-o", "#{inner}/b.txt", "--", ruby.bin, "-e", "t = Time.now; 1 while Time.now - t < 3"))
  problems = []
  problems << "the build did not say it built without eBPF (#{log || 'no gem_make.out'})" unless said
  problems << "the build's message names no package to install: #{said.inspect}" unless said.to_s.include?("apt-get install")
  problems << "record --sampler=bpf #{res.describe}, expected exit 0" unless res.status&.zero?
  problems << "no warning that it was built without eBPF: #{res.stderr.inspect}" unless res.stderr =~ /--sampler=bpf: this rbpeek was built without eBPF.*sampling with ptrace instead/
  report("#{PRE}/without-ebpf", problems, said.to_s.strip[0, 100])
end
test("#{PRE}/version") do
  report("#{PRE}/version", GemCheck.version_problems(run(inside(ruby, home, rbpeek, "--version"))))
end
test("#{PRE}/record") do
  out = "#{inner}/record.collapsed"
  res = run(inside(ruby, home, rbpeek, "record", "-f", "collapsed", "-o", out, "--", ruby.bin, prog), timeout: 60)
  report("#{PRE}/record", GemCheck.record_problems(res, ruby.host_path(out)))
end
test("#{PRE}/trace") do
  out = "#{inner}/trace.json"
  res = run(inside(ruby, home, rbpeek, "trace", "-f", "json", "-o", out, "--", ruby.bin, prog, "200"), timeout: 60)
  report("#{PRE}/trace", GemCheck.trace_problems(res, ruby.host_path(out), home))
end

puts "# 87-chroot-gem: #{(Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0).round(1)} s" if ENV["RBPEEK_TEST_TIMES"]
finish
