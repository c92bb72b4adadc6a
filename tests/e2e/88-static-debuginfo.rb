# frozen_string_literal: true
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 88-static-debuginfo.rb - two build shapes issue 4 names:
#   - a `ruby` executable with Ruby linked in statically (no libruby.so);
#   - a stripped Ruby whose symbols and struct layout (the DWARF) come from
#     split debug info installed under /usr/lib/debug/.build-id (as a
#     distribution's -dbgsym package does), looked for in the target's own
#     root (here: a chroot); without it, the layout table of its version.
# The static Ruby is the "yjit" variant of tools/build-debian-ruby.sh (Debian's
# ruby3.3 source configured --disable-shared, unstripped); without it these
# tests are skipped.  The expected stack is Ruby's own: the target prints its
# main thread's backtrace_locations once that thread spins.
require_relative "lib/e2e"
require "fileutils"
require "open3"
require "tmpdir"
include E2E

BUILD_RUBY = File.join(ROOT, "tools", "build-debian-ruby.sh")
CHROOT = "/var/cache/rbpeek/chroots/3.3" # any chroot with a glibc new enough
names = %w[static/snapshot static/inspect debuginfo/used debuginfo/absent]
exit 0 if skip_without_rbpeek(names)
static_dir = root? ? run([BUILD_RUBY, "--list"], timeout: 10).stdout.to_s[/^yjit (\S+)$/, 1] : nil
STATIC = static_dir && File.join(static_dir, "prefix", "bin", "ruby")
unless root? && STATIC && File.executable?(STATIC) && File.exist?("#{CHROOT}/READY")
  why = if !root? then "needs root (chroot)"
        elsif !STATIC then "no static Ruby (run tools/build-debian-ruby.sh yjit)"
        else "no Ruby chroot (run tools/setup-rubies.sh)"
        end
  names.each { |n| skip(n, why) }
  exit 0
end

# The main thread spins in Outer::Inner#spin; once it does, a second thread
# prints its backtrace_locations ("label<TAB>line" lines, then READY): no
# library is loaded, so the same script runs in the chroot, where this
# Ruby's own library directory does not exist.
SCRIPT = <<~RUBY
  module Outer
    class Inner
      def work(n) = n.times { [1].each { spin } }
      def spin
        $spinning = true
        x = 0
        x += 1 while true
      end
    end
  end
  Thread.new do
    Thread.current.name = "oracle"
    Thread.pass until $spinning
    sleep 0.2
    Thread.main.backtrace_locations.each { |l| $stdout.puts "\#{l.label}\t\#{l.lineno}" }
    $stdout.puts "READY"
    $stdout.flush
    sleep
  end
  Outer::Inner.new.work(3)
RUBY

# Start argv, wait for READY; yields the pid and Ruby's own view of the
# main thread ([label, line], labels unqualified as Ruby <= 3.3 prints them).
def with_process(argv)
  wait = nil
  Open3.popen2(*argv) do |_in, out, thr|
    register_pid(thr.pid)
    wait = thr
    want = []
    ready = false
    Timeout.timeout(20) do
      while (line = out.gets)
        break if (ready = line.start_with?("READY"))

        label, lineno = line.chomp.split("\t")
        want << [label, lineno.to_i]
      end
    end
    raise "no READY from #{argv.inspect}: #{want.inspect}" if want.empty? || !ready

    yield thr.pid, want
  ensure
    kill_pid(wait.pid) if wait
  end
end

# rbpeek's main-thread frames, labels unqualified like Ruby's.
def main_frames(res)
  snap = json_of(res)
  snap["threads"].find { |t| t["main"] }["frames"].map { |f| [Expect.unqualify(f["label"]), f["line"]] }
end


dir = Dir.mktmpdir("rbpeek-static")
File.write(File.join(dir, "st.rb"), SCRIPT)
begin
  with_process([STATIC, "--disable-gems", File.join(dir, "st.rb")]) do |pid, want|
    test("static/snapshot") do
      got = main_frames(rbpeek("snapshot", "--pid", pid, "--json"))
      got == want ? ok("static/snapshot", "#{got.size} frames as Ruby shows them") : fail("static/snapshot", "got #{got.inspect}, Ruby shows #{want.inspect}")
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
  with_process(["chroot", CHROOT, "/opt/rbpeek-static/ruby", "--disable-gems", "/tmp/rbpeek-st.rb"]) do |pid, want|
    test("debuginfo/used") do
      out = rbpeek("inspect", "--pid", pid).stdout
      got = main_frames(rbpeek("snapshot", "--pid", pid, "--json"))
      if !out.match?(%r{debug info:\s+/proc/#{pid}/root/usr/lib/debug/\.build-id/})
        fail("debuginfo/used", "inspect does not name the debug file:\n#{out}")
      elsif !out.include?("found by ruby_global_symbols")
        fail("debuginfo/used", "the symbol table was not found by name:\n#{out}")
      elsif !out.match?(%r{^layout:\s+dwarf: /usr/lib/debug/\.build-id/\h\h/\h+\.debug \(Ruby })
        fail("debuginfo/used", "the layout is not from the split debug info's DWARF:\n#{out}")
      elsif got != want
        fail("debuginfo/used", "got #{got.inspect}, Ruby shows #{want.inspect}")
      else
        ok("debuginfo/used", "symbols and layout from the .build-id debug file")
      end
    end
    test("debuginfo/absent") do
      FileUtils.rm_f(dbg)
      out = rbpeek("inspect", "--pid", pid).stdout
      got = main_frames(rbpeek("snapshot", "--pid", pid, "--json"))
      if !out.include?("debug info:      (none used)") || !out.include?("decoded rb_sym_immortal_count") ||
         !out.match?(/^layout:\s+table: 3\.3\./)
        fail("debuginfo/absent", out)
      elsif got != want
        fail("debuginfo/absent", "got #{got.inspect}, Ruby shows #{want.inspect}")
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
