# frozen_string_literal: true
#
# 95-hostile-signals.rb - what a user's terminal, shell and system do to a
# running rbpeek:
#
#   - Ctrl-Z (SIGTSTP) in a real terminal (tmux, bash job control) while
#     `record` or `top` samples at 1000 Hz, six times with `fg` between:
#     rbpeek stops, but the target never stays stopped (no thread in state
#     t/T while rbpeek is suspended), and after `fg` and Ctrl-C the profile
#     is written.  Before the fix, 6 of 6 Ctrl-Z at 1000 Hz froze it.
#   - `record ... 2>&1 | head -1`: the closed stderr does not kill rbpeek
#     (SIGPIPE) before the profile is written; it exits 0.
#   - SIGQUIT, USR1, USR2, ALRM and XCPU end a recording as Ctrl-C does:
#     exit 0 and the profile written.
#   - So does every other signal whose default action kills: PWR, STKFLT,
#     IO, SYS, TRAP, ABRT, VTALRM, PROF, SEGV, BUS, FPE, ILL sent with kill,
#     and real-time ones (SIGRTMIN, SIGRTMIN+7, SIGRTMAX).  Before the fix
#     each of PWR, STKFLT, IO, SYS, TRAP and the real-time ones killed
#     `record` with no profile written.
#   - A file-size limit (ulimit -f) below the output's size: a clear error
#     (exit 10), no temporary file left behind, rbpeek not killed by SIGXFSZ.
#
# What planted files do is 93-hostile-files.rb.
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/term"
include E2E

R = Record
names = %w[hostile/ctrl-z-record hostile/ctrl-z-top hostile/closed-stderr hostile/signals-end-recording
           hostile/every-terminating-signal hostile/file-size-limit]
exit 0 if skip_unless_tracing(names)

def state_of(pid)
  st = File.read("/proc/#{pid}/stat")
  st[st.rindex(")") + 2]
rescue Errno::ENOENT
  nil
end

# The PID of the rbpeek whose command line contains marker, or nil.
def rbpeek_pid(marker)
  Dir.children("/proc").grep(/\A\d+\z/).find do |pid|
    cmd = File.binread("/proc/#{pid}/cmdline") rescue next
    cmd.split("\0").first.to_s.end_with?("rbpeek") && cmd.include?(marker)
  end&.to_i
end

def wait_until(timeout)
  deadline = R.mono + timeout
  until (v = yield)
    return nil if R.mono > deadline

    sleep 0.02
  end
  v
end

# Six Ctrl-Z / fg rounds on the rbpeek started by `line` in a bash in tmux;
# then Ctrl-C.  Problems appended; returns the screen at the end.
def ctrl_z_rounds(probs, target, line, marker, ready_re)
  screen = ""
  with_term(shell: "bash --norc --noprofile") do |term|
    term.type("XDG_CACHE_HOME=#{R::CACHE} #{line}")
    term.wait_for(ready_re, timeout: 20)
    pid = wait_until(5) { rbpeek_pid(marker) } or raise "no rbpeek process found for #{marker}"
    6.times do |i|
      sleep 0.1 + rand * 0.2
      term.keys("C-z")
      unless wait_until(5) { state_of(pid) == "T" }
        probs << "round #{i}: rbpeek did not stop on Ctrl-Z (state #{state_of(pid).inspect})"
        break
      end
      sleep 0.3 # a frozen target stays frozen: give it time to show
      left = R.stopped_tasks(target.pid)
      probs << "round #{i}: while rbpeek is suspended, target threads #{left.inspect} are stopped" unless left.empty?
      term.type("fg")
      probs << "round #{i}: rbpeek did not run again after fg" unless wait_until(5) { state_of(pid) != "T" }
    end
    sleep 0.3
    term.keys("C-c")
    # top reads keys: what is typed before it has exited is its input, not
    # bash's (under make asan at load 10 its exit takes a while)
    probs << "rbpeek still running 30 s after Ctrl-C" unless wait_until(30) { [nil, "Z"].include?(state_of(pid)) }
    # a list (cmd; echo) is abandoned by bash once its job stopped: ask after
    term.type("echo EXIT=$?")
    screen = term.wait_for(/EXIT=\d+/, timeout: 20)
    code = screen[/EXIT=(\d+)/, 1]
    probs << "rbpeek exited #{code} after Ctrl-C, expected 0:\n#{screen.rstrip[-600..]}" unless code == "0"
  end
  (p = target.running_problem) && probs << "afterwards: #{p}"
  screen
end

has_tmux = system("tmux -V >/dev/null 2>&1")
%w[hostile/ctrl-z-record hostile/ctrl-z-top].each { |n| skip(n, "tmux not installed (tools/install-deps.sh installs it)") } unless has_tmux

if has_tmux
  check("hostile/ctrl-z-record") do |probs|
    R.with_script("hotcold") do |t|
      out = R.tmp("ctrlz.txt")
      ctrl_z_rounds(probs, t, "#{RBPEEK} record --pid #{t.pid} -r 1000 -f collapsed -o #{out}", out,
                    /recording process/)
      stacks = File.exist?(out) ? R.read_collapsed(out) : {}
      probs << "no profile written after fg and Ctrl-C" if stacks.empty?
    end
    "6 Ctrl-Z at 1000 Hz, target never left stopped, profile written"
  end

  check("hostile/ctrl-z-top") do |probs|
    R.with_script("hotcold") do |t|
      marker = "--delay=0.31"
      ctrl_z_rounds(probs, t, "#{RBPEEK} top --pid #{t.pid} -r 1000 #{marker}", marker, /% self.*function/m)
    end
    "6 Ctrl-Z at 1000 Hz, target never left stopped"
  end
end

check("hostile/closed-stderr") do |probs|
  R.with_script("hotcold") do |t|
    out = R.tmp("piped.txt")
    res = run(["bash", "-c", "\"$@\" 2>&1 | head -1; echo RC=${PIPESTATUS[0]}", "bash",
               RBPEEK, "record", "--pid", t.pid.to_s, "-d", "1.5", "-f", "collapsed", "-o", out],
              env: R.env, timeout: 30)
    rc = res.stdout[/RC=(\d+)/, 1]
    probs << "rbpeek exited #{rc.inspect} with its stderr closed, expected 0 (141 is SIGPIPE): #{res.stdout[0, 300]}" unless rc == "0"
    probs << "no profile written with stderr closed" unless File.size?(out) && !R.read_collapsed(out).empty?
    left = R.stopped_tasks(t.pid)
    probs << "target threads #{left.inspect} left stopped" unless left.empty?
  end
  "exit 0, profile written"
end

check("hostile/signals-end-recording") do |probs|
  R.with_script("hotcold") do |t|
    %w[QUIT USR1 USR2 ALRM XCPU].each do |sig|
      out = R.tmp("sig-#{sig}.txt")
      bg = R::Background.new(["record", "--pid", t.pid, "-r", 500, "-f", "collapsed", "-o", out])
      bg.wait_stderr(R::RECORDING)
      sleep 0.4
      bg.kill(sig)
      res = bg.wait
      probs << "SIG#{sig}: #{res.describe}, expected exit 0" unless res.status&.zero?
      probs << "SIG#{sig}: no profile written" unless File.size?(out) && !R.read_collapsed(out).empty?
      left = R.stopped_tasks(t.pid)
      probs << "SIG#{sig}: target threads #{left.inspect} left stopped" unless left.empty?
    end
  end
  "QUIT, USR1, USR2, ALRM, XCPU: exit 0, profile written"
end

# glibc keeps 32 and 33 for itself: SIGRTMIN is 34, SIGRTMAX 64 on Linux.
RT_SIGNALS = { "RTMIN" => 34, "RTMIN+7" => 41, "RTMAX" => 64 }.freeze

check("hostile/every-terminating-signal") do |probs|
  sigs = %w[PWR STKFLT IO SYS TRAP ABRT VTALRM PROF SEGV BUS FPE ILL] + RT_SIGNALS.keys
  R.with_script("hotcold") do |t|
    sigs.each do |sig|
      num = RT_SIGNALS[sig] || Signal.list[sig] || (sig == "STKFLT" ? 16 : nil)
      next probs << "SIG#{sig}: unknown to this Ruby" unless num

      out = R.tmp("sig-#{sig}.txt")
      bg = R::Background.new(["record", "--pid", t.pid, "-r", 500, "-f", "collapsed", "-o", out])
      bg.wait_stderr(R::RECORDING)
      sleep 0.2
      bg.kill(num)
      res = bg.wait
      probs << "SIG#{sig} (#{num}): #{res.describe}, expected exit 0" unless res.status&.zero?
      probs << "SIG#{sig} (#{num}): no profile written" unless File.size?(out) && !R.read_collapsed(out).empty?
      left = R.stopped_tasks(t.pid)
      probs << "SIG#{sig} (#{num}): target threads #{left.inspect} left stopped" unless left.empty?
    end
    (p = t.running_problem) && probs << "afterwards: #{p}"
  end
  "#{sigs.size} signals (#{sigs.join(', ')}): exit 0, profile written, target running"
end

check("hostile/file-size-limit") do |probs|
  R.with_script("hotcold") do |t|
    dir = R.tmp("fsize", mkdir: true)
    out = File.join(dir, "big.svg") # an SVG flame graph is tens of KB; the limit is 4 KB
    res = run(["bash", "-c", "ulimit -f 4; exec \"$@\"", "bash", RBPEEK, "record", "--pid", t.pid.to_s,
               "-d", "1", "-o", out], env: R.env, timeout: 30)
    err = R.stderr_of(res)
    probs << "rbpeek killed by signal #{res.signal} (SIGXFSZ is 25)" if res.signal
    probs << "exit #{res.status.inspect}, expected 10: #{err[-300..].inspect}" unless res.status == 10
    probs << "no clear error: #{err[-300..].inspect}" unless err =~ /rbpeek: error: writing '#{Regexp.escape(out)}': .*File too large/
    left = Dir.children(dir).grep(/\.tmp/)
    probs << "temporary files left behind: #{left}" unless left.empty?
  end
  "exit 10, File too large, nothing left behind"
end

finish
