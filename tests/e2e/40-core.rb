# frozen_string_literal: true
#
# 40-core.rb - rbpeek snapshot --core on gcore dumps of every target: the
# same threads and frames as live (states "unknown"; OS thread names are not
# in core files), then bad core files: truncated, not a core, the core of a
# process that is not Ruby, a missing file (exit 8 each).
require_relative "lib/e2e"
include E2E

BAD = %w[core-bad/truncated core-bad/text-file core-bad/elf-executable core-bad/not-ruby core-bad/missing-file].freeze
names = TARGET_NAMES.map { |n| "core/#{n}" } + %w[core-text/nested] + BAD
exit 0 if skip_without_rbpeek(names)
unless can_trace_others? && system("command -v gcore >/dev/null 2>&1")
  names.each { |n| skip(n, "needs gcore (gdb) and permission to trace other processes") }
  exit 0
end

DIR = File.join(OUT, "cores.#{$$}")
FileUtils.mkdir_p(DIR)
at_exit { FileUtils.rm_rf(DIR) }

# Dump a core of pid with gdb's gcore; returns its path.
def gcore(pid)
  prefix = File.join(DIR, "core")
  r = run(["gcore", "-o", prefix, pid.to_s], timeout: 60)
  path = "#{prefix}.#{pid}"
  raise "gcore #{r.describe}" unless r.status&.zero? && File.exist?(path)

  path
end

def expect_exit8(name, args)
  r = rbpeek("snapshot", *args, "--json")
  if r.status != 8 then fail(name, "rbpeek snapshot #{args.join(' ')}: #{r.describe}, expected exit 8")
  elsif (p = error_format_problem(r)) then fail(name, p)
  else ok(name)
  end
end

kept = nil # the nested target's core, reused for the bad-core tests
TARGET_NAMES.each do |name|
  spec = expectation(name)
  with_target(name) do |t|
    test("core/#{name}") do
      live = json_of(rbpeek("snapshot", "--pid", t.pid, "--json"))
      core = gcore(t.pid)
      res = rbpeek("snapshot", "--core", core, "--json")
      problems = []
      begin
        snap = json_of(res)
        problems = Expect.snapshot_diffs(snap, spec, mode: :core, pid: t.pid, ruby_version: RUBY_VERSION)
        got = snap["threads"].map { |x| x["tid"] }
        want = live["threads"].map { |x| x["tid"] }
        problems << "thread ids #{got.inspect}, live snapshot had #{want.inspect}" if got != want
      rescue RuntimeError => e
        problems << e.message
      end
      liveness = t.liveness_problem
      problems << "after gcore: #{liveness}" if liveness
      if problems.empty?
        ok("core/#{name}", "#{spec.size} threads, #{spec.sum { |s| s.frames.size }} frames, #{File.size(core) >> 20} MiB core")
      else
        fail("core/#{name}", problems.join("\n"))
      end
      if name == "nested"
        kept = core
      else
        File.delete(core)
      end
    end
  end
end

test("core-text/nested") do
  next skip("core-text/nested", "no core of nested") unless kept

  text = rbpeek("snapshot", "--core", kept)
  json = rbpeek("snapshot", "--core", kept, "--json")
  if text.status != 0
    fail("core-text/nested", text.describe)
  else
    problems = Expect.text_diffs(Expect.parse_text(text.stdout.dup.force_encoding("UTF-8")), json_of(json))
    problems.empty? ? ok("core-text/nested") : fail("core-text/nested", problems.join("\n"))
  end
end

test("core-bad/truncated") do
  next skip("core-bad/truncated", "no core of nested") unless kept

  cut = File.join(DIR, "core.truncated")
  File.open(kept, "rb") { |src| File.binwrite(cut, src.read(File.size(kept) / 2)) }
  expect_exit8("core-bad/truncated", ["--core", cut])
end

test("core-bad/text-file") do
  path = File.join(DIR, "not-a-core.txt")
  File.write(path, "this is not a core file\n" * 100)
  expect_exit8("core-bad/text-file", ["--core", path])
end

test("core-bad/elf-executable") do
  expect_exit8("core-bad/elf-executable", ["--core", File.realpath("/bin/sleep")])
end

test("core-bad/not-ruby") do
  pid = Process.spawn("sleep", "100", in: "/dev/null")
  register_pid(pid)
  begin
    sleep 0.1
    core = gcore(pid)
    expect_exit8("core-bad/not-ruby", ["--core", core])
  ensure
    kill_pid(pid)
  end
end

test("core-bad/missing-file") do
  expect_exit8("core-bad/missing-file", ["--core", File.join(DIR, "no-such-core")])
end
finish
