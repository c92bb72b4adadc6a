# frozen_string_literal: true
#
# 11-cli-golden.rb - every command's --help, and a set of error messages
# and exit codes (no arguments, bad flags, bad pid, no such file, bad core
# files, a process that is not Ruby), compared byte for byte with
# tests/golden/cli-behaviour.txt.  A refactoring that means to change no
# behaviour proves it here; a change that means to alter a message updates
# the golden file on purpose:
#
#   RBPEEK_GOLDEN_UPDATE=1 ruby tests/e2e/11-cli-golden.rb
#
# What differs from run to run is replaced before the comparison: the PID of
# the non-Ruby process (PID), the test's scratch directory (TMP), the
# figures of a recording's closing statistics, and the hint that ticks were
# late (the machine's load, not rbpeek's behaviour).
# e2e-timeout: 420
require_relative "lib/e2e"
include E2E

NAME = "cli/golden"
GOLDEN = File.join(ROOT, "tests", "golden", "cli-behaviour.txt")
exit 0 if skip_without_rbpeek([NAME])

COMMANDS = %w[agent alloc heap inspect record report snapshot top trace dump].freeze
NO_PID = "999999999" # above pid_max: never a process

def cases(tmp, sleeper)
  c = [[], %w[--help], %w[help], %w[-h], %w[frobnicate]]
  COMMANDS.each do |cmd|
    c << [cmd, "--help"]
    c << [cmd] unless cmd == "agent" # covered below, with --server missing
    c << [cmd, "--bogus"]
  end
  c << %w[agent --pid 1]
  c << %w[agent --server]
  c << %w[agent --server http://127.0.0.1:1 --bogus]
  # bad pids: not a number, missing, no such process
  %w[snapshot record top alloc heap inspect].each do |cmd|
    c << [cmd, "--pid", "abc"]
    c << [cmd, "--pid"]
    c << [cmd, "--pid", NO_PID]
  end
  c << ["record", "--pid", NO_PID, "--subprocesses"]
  c << ["record", "--pid", NO_PID, "--native"]
  c << ["record", "--pid", NO_PID, "--sampler=bpf"]
  c << ["record", "--pid", NO_PID, "--sampler=bogus"]
  c << ["record", "--pid", NO_PID, "-r", "0"]
  c << ["record", "--pid", NO_PID, "-d", "abc"]
  c << ["record", "--pid", NO_PID, "-f", "bogus"]
  c << ["top", "--pid", NO_PID, "--subprocesses"]
  c << ["snapshot", "--pid", NO_PID, "--json"]
  # no such file
  c << %w[snapshot --core /nonexistent/core]
  c << %w[inspect --core /nonexistent/core]
  c << %w[heap --core /nonexistent/core]
  c << %w[report -i /nonexistent/raw -f collapsed]
  # files that are not what they claim
  c << ["snapshot", "--core", File.join(tmp, "garbage.core")]
  c << ["snapshot", "--core", File.join(tmp, "empty.core")]
  c << ["inspect", "--core", File.join(tmp, "garbage.core")]
  c << ["report", "-i", File.join(tmp, "garbage.core"), "-f", "collapsed"]
  c << ["report", "-i", File.join(tmp, "empty.core"), "-f", "collapsed"]
  # a process that is not Ruby
  %w[snapshot inspect heap].each { |cmd| c << [cmd, "--pid", sleeper.to_s] }
  c << ["record", "--pid", sleeper.to_s, "-d", "1", "-o", File.join(tmp, "out.svg")]
  c << ["record", "--pid", sleeper.to_s, "-d", "1", "--subprocesses", "-o", File.join(tmp, "out.svg")]
  c << ["record", "--pid", sleeper.to_s, "-d", "1", "--native", "-o", File.join(tmp, "out.svg")]
  c << ["alloc", "--pid", sleeper.to_s, "-d", "1"]
  c << ["snapshot", "--pid", sleeper.to_s, "--json"]
  c
end

def transcript(tmp, sleeper)
  out = +""
  cases(tmp, sleeper).each do |args|
    r = rbpeek(*args, timeout: 20)
    text = +"### rbpeek #{args.join(' ')}\n"
    text << (r.timed_out ? "timed out\n" : "exit #{r.status.inspect} signal #{r.signal.inspect}\n")
    text << "--- stdout\n" << r.stdout << "--- stderr\n" << r.stderr
    text = text.b.gsub(tmp.b, "TMP").gsub(/\b#{sleeper}\b/n, "PID")
    # a recording's statistics are measured, not fixed: only their words stay
    text = text.gsub(/^(rbpeek: (duration reached|own CPU)).*$/n) { "#{Regexp.last_match(1)} ..." }
    # and so is whether ticks were late (a loaded machine, valgrind)
    text = text.gsub(/^hint: [\d.]+% of samples were late.*\n/n, "")
    out << text << "\n"
  end
  out
end

test(NAME) do
  tmp = File.join(OUT, "golden.#{$$}")
  FileUtils.mkdir_p(tmp)
  File.binwrite(File.join(tmp, "garbage.core"), "\x7fELF" + ("\xAB".b * 4000))
  File.binwrite(File.join(tmp, "empty.core"), "")
  sleeper = Process.spawn("sleep", "600", pgroup: true)
  register_pid(sleeper)
  begin
    got = transcript(tmp, sleeper)
  ensure
    kill_pid(sleeper)
    FileUtils.rm_rf(tmp)
  end
  if ENV["RBPEEK_GOLDEN_UPDATE"] == "1"
    File.binwrite(GOLDEN, got)
    ok(NAME, "wrote #{GOLDEN}")
  elsif !File.exist?(GOLDEN)
    fail(NAME, "no #{GOLDEN}: make it with RBPEEK_GOLDEN_UPDATE=1")
  elsif (want = File.binread(GOLDEN)) == got
    ok(NAME, "#{got.scan(/^### /).size} invocations as recorded")
  else
    File.binwrite(File.join(OUT, "cli-behaviour.got"), got)
    wl = want.lines
    gl = got.lines
    i = (0...[wl.size, gl.size].max).find { |k| wl[k] != gl[k] }
    head = wl[0..i].rindex { |l| l.start_with?("### ") }
    fail(NAME, "differs from #{GOLDEN} in #{head ? wl[head].chomp : 'the first case'} at line #{i + 1}: " \
               "want #{wl[i].inspect}, got #{gl[i].inspect} (whole output: #{OUT}/cli-behaviour.got)")
  end
end
finish
