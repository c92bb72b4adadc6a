# frozen_string_literal: true
#
# 88-static-debuginfo.rb - two build shapes issue 4 names:
#   - a `ruby` executable with Ruby linked in statically (no libruby.so);
#   - a stripped Ruby whose symbols come from split debug info installed
#     under /usr/lib/debug/.build-id (as a distribution's -dbgsym package
#     does), looked for in the target's own root (here: a chroot).
# The static Ruby comes from tools/build-static-ruby.sh (it needs a git
# mirror of Ruby's source); without it these tests are skipped.
require_relative "lib/e2e"
require "fileutils"
require "open3"
require "tmpdir"
include E2E

STATIC = "/var/cache/rbpeek-static/v3_1_2/ruby"
CHROOT = "/var/cache/rbpeek/chroots/3.3" # any chroot with a glibc new enough
names = %w[static/snapshot static/inspect debuginfo/used debuginfo/absent]
exit 0 if skip_without_rbpeek(names)
unless root? && File.executable?(STATIC) && File.exist?("#{CHROOT}/READY")
  why = if !root? then "needs root (chroot)"
        elsif !File.executable?(STATIC) then "no static Ruby (run tools/build-static-ruby.sh)"
        else "no Ruby chroot (run tools/setup-rubies.sh)"
        end
  names.each { |n| skip(n, why) }
  exit 0
end

SCRIPT = <<~RUBY
  module Outer
    class Inner
      def work(n) = n.times { [1].each { spin } }
      def spin
        x = 0
        x += 1 while true
      end
    end
  end
  Thread.new { Thread.current.name = "sleeper"; sleep }
  $stdout.puts "READY"
  $stdout.flush
  Outer::Inner.new.work(3)
RUBY

WANT = [
  ["Outer::Inner#spin", 6], ["block (2 levels) in Outer::Inner#work", 3], ["Array#each", 3],
  ["block in Outer::Inner#work", 3], ["Integer#times", 3], ["Outer::Inner#work", 3], ["<main>", 13]
].freeze

# Start argv, wait for READY; yields the pid.
def with_process(argv)
  stdout, wait = nil
  Open3.popen2(*argv) do |_in, out, thr|
    register_pid(thr.pid)
    stdout = out
    wait = thr
    line = Timeout.timeout(20) { out.gets }
    raise "no READY from #{argv.inspect}: #{line.inspect}" unless line&.start_with?("READY")
    # Right after READY the main thread may still be in $stdout.flush: give
    # it a moment to reach spin (the tests then compare the steady stack).
    settle(attempts: 10, pause: 0.3) do
      main_frames(rbpeek("snapshot", "--pid", thr.pid, "--json")) == WANT ? [] : ["not yet"]
    rescue StandardError => e
      [e.message]
    end
    yield thr.pid
  ensure
    kill_pid(wait.pid) if wait
  end
end

def main_frames(res)
  snap = json_of(res)
  snap["threads"].find { |t| t["main"] }["frames"].map { |f| [f["label"], f["line"]] }
end

dir = Dir.mktmpdir("rbpeek-static")
File.write(File.join(dir, "st.rb"), SCRIPT)
begin
  with_process([STATIC, "--disable-gems", File.join(dir, "st.rb")]) do |pid|
    test("static/snapshot") do
      got = main_frames(rbpeek("snapshot", "--pid", pid, "--json"))
      got == WANT ? ok("static/snapshot") : fail("static/snapshot", "got #{got.inspect}")
    end
    test("static/inspect") do
      out = rbpeek("inspect", "--pid", pid).stdout
      if out.include?("ruby lives in:   #{STATIC}") && !out.include?("libruby")
        ok("static/inspect")
      else
        fail("static/inspect", out)
      end
    end
  end

  # A stripped copy in the chroot, its debug info in the chroot's /usr/lib/debug.
  bin = "#{CHROOT}/opt/rbpeek-static/ruby"
  FileUtils.mkdir_p(File.dirname(bin))
  system("strip", "--strip-unneeded", "-o", bin, STATIC, exception: true)
  id = `readelf -n #{bin}`[/Build ID: (\h+)/, 1] or raise "no build-id in #{bin}"
  dbg = "#{CHROOT}/usr/lib/debug/.build-id/#{id[0, 2]}/#{id[2..]}.debug"
  FileUtils.mkdir_p(File.dirname(dbg))
  system("objcopy", "--only-keep-debug", STATIC, dbg, exception: true)
  File.write("#{CHROOT}/tmp/rbpeek-st.rb", SCRIPT)
  with_process(["chroot", CHROOT, "/opt/rbpeek-static/ruby", "--disable-gems", "/tmp/rbpeek-st.rb"]) do |pid|
    test("debuginfo/used") do
      out = rbpeek("inspect", "--pid", pid).stdout
      got = main_frames(rbpeek("snapshot", "--pid", pid, "--json"))
      if !out.match?(%r{debug info:\s+/proc/#{pid}/root/usr/lib/debug/\.build-id/})
        fail("debuginfo/used", "inspect does not name the debug file:\n#{out}")
      elsif !out.include?("found by ruby_global_symbols")
        fail("debuginfo/used", "the symbol table was not found by name:\n#{out}")
      elsif got != WANT
        fail("debuginfo/used", "got #{got.inspect}")
      else
        ok("debuginfo/used")
      end
    end
    test("debuginfo/absent") do
      FileUtils.rm_f(dbg)
      out = rbpeek("inspect", "--pid", pid).stdout
      got = main_frames(rbpeek("snapshot", "--pid", pid, "--json"))
      if !out.include?("debug info:      (none used)") || !out.include?("decoded rb_sym_immortal_count")
        fail("debuginfo/absent", out)
      elsif got != WANT
        fail("debuginfo/absent", "got #{got.inspect}")
      else
        ok("debuginfo/absent")
      end
    end
  end
ensure
  FileUtils.rm_rf(dir)
  FileUtils.rm_rf("#{CHROOT}/opt/rbpeek-static")
  FileUtils.rm_f(dbg) if dbg
  FileUtils.rm_f("#{CHROOT}/tmp/rbpeek-st.rb")
end
finish
