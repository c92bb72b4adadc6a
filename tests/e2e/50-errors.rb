# frozen_string_literal: true
#
# 50-errors.rb - bad targets get a distinct exit code and a one-line error:
# no such process (3), a zombie (3), a process exiting while rbpeek starts
# (never a crash), not Ruby (5), permission denied (4, with the fixes named),
# an unsupported Ruby version (6), a "Ruby" without a VM (7), and a target
# already traced by another tracer (strace): the same diagnosis, exit 4,
# from snapshot and from a blocking record.  errors/inspect-explains: inspect
# on the refused "Ruby 9.9.0" lists the layout sources tried and what each
# gave (text and --json), with the refusal's exit code.
require "json"
require "tmpdir"
require_relative "lib/e2e"
include E2E

names = %w[errors/no-such-pid errors/zombie errors/exits-right-away errors/not-ruby
           errors/permission-denied errors/unsupported-version errors/vm-not-found errors/already-traced
           errors/inspect-explains]
exit 0 if skip_without_rbpeek(names)

def expect_exit(name, args, code, mentions: [])
  r = rbpeek(*args)
  err = r.stderr.dup.force_encoding("UTF-8")
  missing = mentions.reject { |m| err.include?(m) }
  if r.status != code then fail(name, "rbpeek #{args.join(' ')}: #{r.describe}, expected exit #{code}")
  elsif (p = error_format_problem(r)) then fail(name, p)
  elsif !missing.empty? then fail(name, "message does not mention #{missing.inspect}: #{err.inspect}")
  else ok(name)
  end
end

test("errors/no-such-pid") do
  pid = Process.spawn("true")
  Process.wait(pid) # reaped: the PID no longer exists
  expect_exit("errors/no-such-pid", ["snapshot", "--pid", pid, "--json"], 3)
end

test("errors/zombie") do
  # A Ruby whose parent never reaps it: once it exits it stays a zombie.
  r, w = IO.pipe
  parent = Process.spawn(RUBY, "-e", "pid = spawn(RbConfig.ruby, '-e', 'exit'); puts pid; $stdout.flush; sleep",
                         out: w, in: "/dev/null")
  register_pid(parent)
  w.close
  zombie = Integer(r.gets)
  sleep 0.05 until File.read("/proc/#{zombie}/stat").split(") ").last.start_with?("Z")
  expect_exit("errors/zombie", ["snapshot", "--pid", zombie], 3)
  kill_pid(parent)
end

test("errors/exits-right-away") do
  # Start a short-lived Ruby and snapshot it at once, at various moments of
  # its short life: any of ok / no such process / not Ruby (yet) / no VM
  # (yet) is fine; a crash, a hang or an internal error is not.
  problems = []
  codes = Hash.new(0)
  12.times do |i|
    pid = Process.spawn(RUBY, "-e", "exit", in: "/dev/null")
    register_pid(pid)
    sleep(0.025 * i) # Ruby lives ~100-200 ms here
    res = rbpeek("snapshot", "--pid", pid, "--json", *(i.odd? ? ["--nonblocking"] : []))
    codes[res.status] += 1
    if res.timed_out || res.signal || ![0, 3, 5, 7].include?(res.status)
      problems << "run #{i}: #{res.describe}"
    elsif res.status != 0 && (p = error_format_problem(res))
      problems << "run #{i}: #{p}"
    end
    kill_pid(pid)
  end
  if problems.empty?
    ok("errors/exits-right-away", "exit codes #{codes.sort.map { |c, n| "#{c}x#{n}" }.join(' ')}")
  else
    fail("errors/exits-right-away", problems.join("\n"))
  end
end

test("errors/not-ruby") do
  pid = Process.spawn("sleep", "100", in: "/dev/null")
  register_pid(pid)
  sleep 0.1
  expect_exit("errors/not-ruby", ["snapshot", "--pid", pid], 5)
  kill_pid(pid)
end

test("errors/permission-denied") do
  name = "errors/permission-denied"
  if !root?
    skip(name, "needs root (runs rbpeek as nobody against a root-owned Ruby)")
  elsif !system("setpriv --reuid=nobody --regid=nogroup --clear-groups true >/dev/null 2>&1")
    skip(name, "cannot switch to user nobody with setpriv")
  else
    # A copy of rbpeek that nobody may execute, whatever the checkout's modes.
    dir = File.join(OUT, "nobody.#{$$}")
    FileUtils.mkdir_p(dir)
    File.chmod(0o755, dir)
    bin = File.join(dir, "rbpeek")
    FileUtils.cp(RBPEEK_BINARY, bin)
    File.chmod(0o755, bin)
    begin
      with_target("nested") do |t|
        r = run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", bin,
                 "snapshot", "--pid", t.pid.to_s], chdir: "/")
        err = r.stderr.dup.force_encoding("UTF-8")
        missing = ["sudo", "SYS_PTRACE", "ptrace_scope"].reject { |m| err.include?(m) }
        if r.status != 4 then fail(name, "#{r.describe}, expected exit 4")
        elsif (p = error_format_problem(r)) then fail(name, p)
        elsif !missing.empty? then fail(name, "message does not mention #{missing.inspect}: #{err.inspect}")
        elsif (p = t.liveness_problem) then fail(name, "target afterwards: #{p}")
        else ok(name)
        end
      end
    ensure
      FileUtils.rm_rf(dir)
    end
  end
end

# Build the fake Ruby (tests/e2e/fixtures/fakeruby.c) for a version string.
def fake_ruby(version)
  dir = File.join(OUT, "fakeruby-#{version}")
  exe = File.join(dir, "ruby")
  return exe if File.executable?(exe)

  FileUtils.mkdir_p(dir)
  src = File.join(__dir__, "fixtures", "fakeruby.c")
  major, minor, = version.split(".")
  lib = "libruby.so.#{major}.#{minor}"
  api = "{#{version.split('.').join(',')}}"
  ok = system("cc", "-shared", "-fPIC", "-DLIB", "-DVERSION=\"#{version}\"", "-DAPI=#{api}",
              "-Wl,-soname,#{lib}", "-o", File.join(dir, lib), src) &&
       system("cc", "-o", exe, src, File.join(dir, lib), "-Wl,-rpath,$ORIGIN")
  raise "cannot build the fake Ruby with cc" unless ok

  exe
end

def with_fake_ruby(version)
  exe = fake_ruby(version)
  r, w = IO.pipe
  pid = Process.spawn(exe, out: w, in: "/dev/null")
  register_pid(pid)
  w.close
  r.gets # "fake ruby X ready"
  yield pid
ensure
  kill_pid(pid) if pid
end

test("errors/unsupported-version") do
  with_fake_ruby("9.9.0") do |pid|
    expect_exit("errors/unsupported-version", ["snapshot", "--pid", pid], 6,
                mentions: ["9.9.0", RUBY_VERSION.split(".")[0, 2].join("."), "--force-version"])
  end
end

test("errors/inspect-explains") do
  with_fake_ruby("9.9.0") do |pid|
    t = rbpeek("inspect", "--pid", pid)
    j = rbpeek("inspect", "--pid", pid, "--json")
    problems = []
    problems << "inspect: exit #{t.status.inspect}, expected 6" unless t.status == 6
    problems << "inspect --json: exit #{j.status.inspect}, expected 6" unless j.status == 6
    problems << "no DWARF source tried: #{t.stdout.inspect}" unless t.stdout =~ /^  dwarf \S+: no DWARF debug information$/
    problems << "no older table tried: #{t.stdout.inspect}" unless
      t.stdout =~ /^  nearest older table [0-9.]+: does not fit: there is no VM to check it against yet/
    begin
      info = JSON.parse(j.stdout)
      sources = info["layouts_tried"].map { |a| a["source"] }
      problems << "--json sources #{sources.inspect}" unless sources == ["dwarf", "nearest older table"]
      problems << "--json ruby_version #{info['ruby_version'].inspect}" unless info["ruby_version"] == "9.9.0"
    rescue JSON::ParserError, NoMethodError => e
      problems << "inspect --json: #{e.message}: #{j.stdout[0, 200].inspect}"
    end
    report("errors/inspect-explains", problems, t.stdout[/^  nearest older table.*$/]&.strip)
  end
end

test("errors/vm-not-found") do
  with_fake_ruby(RUBY_VERSION) do |pid|
    # its VM pointer is null: what was read says "not set up yet", the one
    # case for "try again" (a layout that does not fit is exit 6, 82-*.rb)
    expect_exit("errors/vm-not-found", ["snapshot", "--pid", pid], 7,
                mentions: ["not set up yet", "try again"])
  end
end
if root? && system("command -v strace >/dev/null 2>&1")
  test("errors/already-traced") do
    target = Process.spawn(RUBY, "-e", "loop { 1000.times { } }", in: "/dev/null")
    register_pid(target)
    log = File.join(Dir.tmpdir, "rbpeek-strace-#{$$}.log")
    tracer = Process.spawn("strace", "-p", target.to_s, "-o", "/dev/null", err: log, in: "/dev/null")
    register_pid(tracer)
    deadline = Time.now + 20
    sleep 0.05 until File.read("/proc/#{target}/status")[/^TracerPid:\s+(\d+)/, 1].to_i == tracer || Time.now > deadline
    probs = []
    # (record by default reads without stopping: only --stop needs ptrace at every tick)
    [["snapshot", "--pid", target],
     ["record", "--pid", target, "-d", 2, "--stop", "-f", "collapsed", "-o", "/dev/null"]].each do |args|
      r = rbpeek(*args)
      err = r.stderr.dup.force_encoding("UTF-8")
      probs << "#{args.first}: #{r.describe}, expected exit 4" unless r.status == 4
      probs << "#{args.first}: no 'already being traced' diagnosis: #{err[-300..].inspect}" unless err.include?("already being traced")
    end
    probs.empty? ? ok("errors/already-traced", "snapshot and record: exit 4") : fail("errors/already-traced", probs.join("\n"))
  ensure
    kill_pid(tracer) if tracer
    kill_pid(target) if target
    FileUtils.rm_f(log) if log
  end
else
  skip("errors/already-traced", "needs root and strace")
end

finish
