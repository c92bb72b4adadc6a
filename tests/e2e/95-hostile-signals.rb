# frozen_string_literal: true
#
# 95-hostile-signals.rb - what a user's terminal, shell and system do to a
# running rbpeek, and what a planted file does to its output:
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
#   - A file-size limit (ulimit -f) below the output's size: a clear error
#     (exit 10), no temporary file left behind, rbpeek not killed by SIGXFSZ.
#   - The temporary output file is created with O_EXCL and O_NOFOLLOW
#     (checked with strace: a symlink planted at its name is never followed),
#     and a destination that is a symlink of another user's is never written
#     through: to a regular file, the symlink itself is replaced (the file it
#     points to is untouched); to a device, rbpeek refuses (exit 10).
require "etc"
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/term"
include E2E

R = Record
names = %w[hostile/ctrl-z-record hostile/ctrl-z-top hostile/closed-stderr hostile/signals-end-recording
           hostile/file-size-limit hostile/temp-file-flags hostile/symlink-destination]
exit 0 if skip_unless_tracing(names)

def stopped_tasks(pid)
  Dir.children("/proc/#{pid}/task").select do |tid|
    st = File.read("/proc/#{pid}/task/#{tid}/stat") rescue next
    %w[T t].include?(st[st.rindex(")") + 2])
  end
rescue Errno::ENOENT
  []
end

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
      left = stopped_tasks(target.pid)
      probs << "round #{i}: while rbpeek is suspended, target threads #{left.inspect} are stopped" unless left.empty?
      term.type("fg")
      probs << "round #{i}: rbpeek did not run again after fg" unless wait_until(5) { state_of(pid) != "T" }
    end
    sleep 0.3
    term.keys("C-c")
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
    left = stopped_tasks(t.pid)
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
      left = stopped_tasks(t.pid)
      probs << "SIG#{sig}: target threads #{left.inspect} left stopped" unless left.empty?
    end
  end
  "QUIT, USR1, USR2, ALRM, XCPU: exit 0, profile written"
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

# A raw recording to convert (report), made once.
def raw_file
  @raw_file ||= R.with_script("hotcold") do |t|
    res = R.rec("record", "--pid", t.pid, "-r", 200, "-d", 0.5, "-f", "collapsed", "-o", R.tmp("for-raw.txt"))
    raw = R.raw_path_of(res)
    raise "record made no raw file: #{res.describe}" unless res.status&.zero? && raw

    raw
  end
end

has_strace = system("strace -V >/dev/null 2>&1")
if has_strace
  check("hostile/temp-file-flags") do |probs|
    dir = R.tmp("flags", mkdir: true)
    out = File.join(dir, "out.txt")
    log = R.tmp("strace.log")
    res = run(["strace", "-f", "-e", "trace=open,openat", "-o", log, RBPEEK, "report", "-i", raw_file,
               "-f", "collapsed", "-o", out], env: R.env, timeout: 60)
    probs << "report under strace: #{res.describe}" unless res.status&.zero?
    opens = File.readlines(log).grep(/"#{Regexp.escape(out)}\.tmp/)
    probs << "no open of a temporary file beside #{out} seen by strace" if opens.empty?
    opens.each do |l|
      probs << "temporary opened without O_EXCL|O_NOFOLLOW: #{l.strip}" unless l.include?("O_EXCL") && l.include?("O_NOFOLLOW")
    end
    probs << "the output was not written" unless File.size?(out)
    "temporaries: #{opens.size} open(s), all O_EXCL|O_NOFOLLOW"
  end
else
  skip("hostile/temp-file-flags", "strace not installed (tools/install-deps.sh installs it)")
end

other = Etc.getpwnam("nobody") rescue nil
if root? && other
  check("hostile/symlink-destination") do |probs|
    dir = R.tmp("links", mkdir: true)
    File.chmod(0o1777, dir) # a sticky, world-writable directory, as /tmp
    victim = File.join(dir, "victim")
    File.write(victim, "precious\n")
    link = File.join(dir, "out.txt")
    File.symlink(victim, link)
    File.lchown(other.uid, other.gid, link)
    res = R.rec("report", "-i", raw_file, "-f", "collapsed", "-o", link)
    probs << "report -o LINK-TO-FILE: #{res.describe}" unless res.status&.zero?
    probs << "the file behind another user's symlink was written" unless File.read(victim) == "precious\n"
    probs << "#{link} is not a regular file now (the symlink itself should be replaced)" unless File.lstat(link).file?

    dev = File.join(dir, "dev.txt")
    File.symlink("/dev/null", dev)
    File.lchown(other.uid, other.gid, dev)
    res = R.rec("report", "-i", raw_file, "-f", "collapsed", "-o", dev)
    probs << "report -o LINK-TO-DEVICE (another user's): #{res.describe}, expected exit 10" unless res.status == 10
    probs << "no reason given: #{R.stderr_of(res)[0, 300].inspect}" unless R.stderr_of(res).include?("symlink owned by another user")
    "file behind the link untouched; link to a device refused"
  end
else
  skip("hostile/symlink-destination", root? ? "no user 'nobody'" : "needs root (symlinks of another user)")
end

finish
