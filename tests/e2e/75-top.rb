# frozen_string_literal: true
#
# 75-top.rb - rbpeek top on a real Ruby process (tests/targets/record/
# twothreads.rb: main thread busy in hotcold.rb's `hot` ~3/4 and `cold`
# ~1/4, a thread "napper" sleeping).  Plain-text mode (stdout not a terminal) and the full
# screen in a real terminal: tmux on its own socket, keys sent with
# send-keys, the screen read with capture-pane.  Checked: header fields,
# the hot function on top, the napper's sleep hidden by default as idle
# (its share said in the header) and shown by --idle or the key i, each
# key (sort, per line, thread, pause, idle),
# resize, and the terminal given back (cooked mode, main screen) after q,
# Ctrl-C, SIGTERM and the target's exit; the target never left stopped.
require_relative "lib/e2e"
require_relative "lib/record"
require_relative "lib/term"
include E2E

R = Record
HOTCOLD = File.join(R::DIR, "hotcold.rb") # twothreads.rb's main thread runs it
names = %w[top/text top/usage top/not-ruby top/one-row-per-function top/native top/tmux-keys top/tmux-resize top/tmux-ctrl-c
           top/tmux-sigterm top/tmux-target-exits]
exit 0 if skip_unless_tracing(names)

# The rows of a top table: [% self, % total, function, file:line].
def rows_of(text)
  text.lines.filter_map do |l|
    m = /\A\s*(\d+\.\d)\s+(\d+\.\d)\s+\S+\s+\S+\s+(\S.*?)\s{2,}(\S+:\d+|-)\s*\z/.match(l.chomp) or next
    [m[1].to_f, m[2].to_f, m[3], m[4]]
  end
end

# Start top in the terminal; returns the first full screen.
def start_top(term, pid, extra = "")
  term.type("#{RBPEEK} top --pid #{pid} #{extra}; echo EXIT=$?")
  term.wait_for(/% self.*function.*file:line.*\n.*Object#hot/m)
end

# The terminal is cooked again (echo, canonical) and back on the main screen.
def restored_problem(term)
  term.type("stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo STTY")
  s = term.wait_for(/^(-?icanon|-?echo).*STTY$/)
  flags = s[/^((?:-?icanon|-?echo)[^\n]*)STTY$/, 1].split
  return "terminal left in raw mode: stty shows #{flags.inspect}" unless flags.include?("icanon") && flags.include?("echo")
  return "the alternate screen was not left (no prompt history on screen)" unless s.include?("EXIT=")
  return "sanitizer report in the terminal:\n#{s}" if s =~ R::SANITIZER

  nil
end

has_tmux = system("tmux -V >/dev/null 2>&1")

check("top/text") do |probs|
  R.with_script("twothreads") do |s|
    res = R.rec("top", "--pid", s.pid, "-n", "2", "--delay", "0.7", timeout: 15)
    if res.status != 0
      probs << "top -n 2: #{res.describe}"
      next
    end
    tables = res.stdout.split(/^(?=rbpeek top: )/)
    probs << "expected 2 tables, got #{tables.size}" unless tables.size == 2
    head = tables.last.to_s
    probs << "header lacks pid and version: #{head.lines.first.inspect}" unless head.lines.first =~ /pid #{s.pid} \(ruby \d+\.\d+\.\d+\)/
    %w[Hz samples errors GVL on\ CPU threads].each do |w|
      probs << "header lacks #{w.inspect}: #{head.lines[1].inspect}" unless head.lines[1].to_s.include?(w)
    end
    rows = rows_of(head)
    top = rows.first
    hot_at = "#{HOTCOLD}:#{File.readlines(HOTCOLD).index { |l| l =~ /def hot/ } + 1}"
    probs << "hot function not first (at #{hot_at}): #{rows.first(3).inspect}" unless top && top[2] == "Object#hot" && top[3] == hot_at
    # the napper only sleeps: idle, hidden by default, its share said
    probs << "the napper's Kernel#sleep shown by default: #{rows.first(4).inspect}" if rows.any? { |r| r[2] == "Kernel#sleep" }
    idle = head[/^idle: ([\d.]+)% of the window's samples are threads waiting for work, hidden \(--idle shows them\)$/, 1]
    probs << "no idle line saying the hidden share: #{head.lines.first(5).inspect}" unless idle && (30..70).cover?(idle.to_f)
    cold = rows.find { |r| r[2] == "Object#cold" }
    probs << "Object#cold missing or hotter than hot: #{rows.first(5).inspect}" unless cold && top && cold[0] < top[0]
    probs << "stderr does not explain the text mode: #{res.stderr.inspect}" unless res.stderr.include?("not a terminal")
    res = R.rec("top", "--pid", s.pid, "-n", "1", "--delay", "0.7", "--idle", timeout: 15)
    sleep_row = rows_of(res.stdout).find { |r| r[2] == "Kernel#sleep" }
    probs << "--idle: Kernel#sleep (the napper) not about half: #{sleep_row.inspect}" unless sleep_row && (30..70).cover?(sleep_row[0])
    probs << "--idle: the idle line does not say shown: #{res.stdout.lines.first(5).inspect}" unless res.stdout.include?("waiting for work, shown")
    (p = s.running_problem) && probs << p
    "hot #{top&.first}% self, cold #{cold&.first}%, idle #{idle}% hidden, #{sleep_row&.first}% with --idle"
  end
end

check("top/usage") do |probs|
  [[[], "give --pid"], [%w[--pid 1 --delay 0], "invalid delay"], [%w[--pid 1 -n x], "invalid iteration"],
   [%w[--pid 1 extra], "unexpected argument"]].each do |args, words|
    res = R.rec("top", *args)
    probs << "top #{args.join(' ')}: #{res.describe}, expected exit 2" unless res.status == 2
    probs << "top #{args.join(' ')}: message lacks #{words.inspect}: #{res.stderr.inspect}" unless res.stderr.include?(words)
  end
  res = R.rec("top", "--help")
  probs << "--help: #{res.describe}" unless res.status.zero? && res.stdout.include?("keys:")
  nil
end

check("top/not-ruby") do |probs|
  pid = Process.spawn("sleep", "30")
  E2E.register_pid(pid)
  res = R.rec("top", "--pid", pid)
  probs << "top on sleep: #{res.describe}, expected exit 5" unless res.status == 5
  E2E.kill_pid(pid)
  nil
end

# A C function called from several files (its frames carry the caller's
# file) is one row by function: Kernel#sleep once, not once per caller.
check("top/one-row-per-function") do |probs|
  dir = R.tmp("onerow", mkdir: true)
  File.write(File.join(dir, "b.rb"), "def b_sleep; sleep; end\n")
  File.write(File.join(dir, "a.rb"), "require_relative 'b'\ndef a_sleep; sleep; end\n" \
             "Thread.new { a_sleep }; Thread.new { b_sleep }; Thread.new { loop { sleep 0.01 } }\n" \
             "File.write(ARGV[0], 'ready'); sleep\n")
  ready = File.join(dir, "ready")
  pid = Process.spawn(RbConfig.ruby, File.join(dir, "a.rb"), ready)
  E2E.register_pid(pid)
  t0 = Time.now
  sleep 0.05 until File.exist?(ready) || Time.now - t0 > 20
  res = R.rec("top", "--pid", pid, "-n", "1", "--delay", "0.7", "--idle", timeout: 15)
  rows = rows_of(res.stdout)
  sleeps = rows.select { |r| r[2] == "Kernel#sleep" }
  E2E.kill_pid(pid)
  probs << "top: #{res.describe}" unless res.status&.zero?
  probs << "#{sleeps.size} Kernel#sleep rows, expected 1: #{sleeps.inspect}" unless sleeps.size == 1
  probs << "Kernel#sleep row has a caller's place #{sleeps[0][3].inspect}" if sleeps.size == 1 && sleeps[0][3] != "-"
  "#{sleeps.size} row, #{sleeps[0]&.first}% self"
end

# --native: a C method's own C functions (OpenSSL's digest) get rows of
# their own; the interpreter's frames do not.
check("top/native") do |probs|
  pid = Process.spawn("ruby", "-ropenssl", "-e",
                      'd = OpenSSL::Digest.new("SHA256"); s = "x" * 1_000_000; loop { d.update(s) }')
  E2E.register_pid(pid)
  sleep 1
  res = R.rec("top", "--pid", pid, "--native", "-n", "2", "--delay", "0.7", timeout: 20)
  names = rows_of(res.stdout.split(/^(?=rbpeek top: )/).last.to_s).map { |r| r[2] }
  if res.status != 0
    probs << "top --native: #{res.describe}"
  else
    %w[OpenSSL::Digest#update ossl_digest_update].each do |want|
      probs << "no #{want} row: #{names.inspect}" unless names.include?(want)
    end
    vm = names.grep(/\A(vm_|rb_vm_|vm_exec)/)
    probs << "interpreter frames shown: #{vm.inspect}" unless vm.empty?
  end
  res = R.rec("top", "--pid", pid, "--native", "--nonblocking")
  probs << "--native --nonblocking: #{res.describe}, expected exit 2" unless res.status == 2
  E2E.kill_pid(pid)
  "rows: #{names.first(4).join(', ')}"
end

tmux_tests = %w[top/tmux-keys top/tmux-resize top/tmux-ctrl-c top/tmux-sigterm top/tmux-target-exits]
unless has_tmux
  tmux_tests.each { |n| skip(n, "tmux not installed (tools/install-deps.sh installs it)") }
  finish
end

check("top/tmux-keys") do |probs|
  R.with_script("twothreads") do |s|
    with_term do |t|
      scr = start_top(t, s.pid)
      lines = scr.lines
      probs << "first line: #{lines.first.inspect}" unless lines.first =~ /\Arbpeek top: pid #{s.pid} \(ruby [\d.]+\) .*twothreads\.rb/
      probs << "header: #{lines[1].inspect}" unless lines[1] =~ /s at 100 Hz, \d+ samples, [\d.]+% errors, GVL \d+%, on CPU \d+%, 2 threads/
      probs << "no key help on the last line" unless scr.rstrip.lines.last.start_with?("keys:")
      top = rows_of(scr).first
      probs << "hot not on top: #{rows_of(scr).first(3).inspect}" unless top && top[2] == "Object#hot"
      probs << "the napper's Kernel#sleep shown by default" if rows_of(scr).any? { |r| r[2] == "Kernel#sleep" }
      probs << "no idle line with the key" unless scr =~ /^idle: [\d.]+% .* hidden \(i shows them\)/
      probs << "the key line lacks i" unless scr.rstrip.lines.last.include?("i idle")
      t.keys("i")
      scr = t.wait_for(/shown \(i hides them\).*Kernel#sleep/m)
      probs << "i: no Kernel#sleep row (the napper thread)" unless rows_of(scr).any? { |r| r[2] == "Kernel#sleep" }

      t.keys("l")
      t.wait_for(/view: by line/)
      t.keys(">")
      scr = t.wait_for(/sort: % total/)
      tot = rows_of(scr).map { |r| r[1] }
      probs << "not sorted by % total: #{tot.first(6).inspect}" unless tot.each_cons(2).all? { |a, b| a >= b }
      t.keys("4")
      t.wait_for(/sort: total time/)
      t.keys("1")
      t.keys("t")
      scr = t.wait_for(/thread: #{s.pid} \(main\)/)
      probs << "thread main still shows the napper's Kernel#sleep" if rows_of(scr).any? { |r| r[2] == "Kernel#sleep" }
      probs << "thread main: hot not first: #{rows_of(scr).first(2).inspect}" unless rows_of(scr).first&.at(2) == "Object#hot"
      t.keys("t")
      scr = t.wait_for(/thread: \d+ \(napper\)/)
      t.wait_for(/thread: \d+ \(napper\).*\n\n.*\n.*Kernel#sleep/m)
      t.keys("a")
      t.wait_for(/thread: all/)
      t.keys("p")
      scr = t.wait_for(/\[paused\]/)
      n1 = scr[/(\d+) samples/, 1]
      sleep 1.5
      n2 = t.screen[/(\d+) samples/, 1]
      probs << "paused screen changed: #{n1} -> #{n2} samples" unless n1 == n2
      t.keys("p")
      t.wait_for(/\A(?!.*\[paused\]).*\n/)
      t.keys("q")
      t.wait_for(/EXIT=0/)
      (p = restored_problem(t)) && probs << p
    end
    (p = s.running_problem) && probs << p
  end
  nil
end

check("top/tmux-resize") do |probs|
  R.with_script("twothreads") do |s|
    with_term(cols: 120, rows: 30) do |t|
      start_top(t, s.pid)
      t.tmux("resize-window", "-x", "60", "-y", "14")
      # redrawn for 60x14: header on top, key help on the last line, the hot row with its place
      scr = t.wait_for(/\Arbpeek top: .*\n(?:.*\n){12}keys:/)
      scr = t.wait_for(/^ *[\d.]+ +[\d.]+ +Object#hot +\S+:\d+$/) rescue (probs << $!.message; scr)
      long = scr.lines.map(&:chomp).reject { |l| l.size <= 60 }
      probs << "lines wider than 60 columns after resize: #{long.first(2).inspect}" unless long.empty?
      t.keys("q")
      t.wait_for(/EXIT=0/)
      (p = restored_problem(t)) && probs << p
    end
  end
  nil
end

# top running in the terminal is ended some way; the terminal must come back.
def ended_by(name, expect_exit)
  check(name) do |probs|
    R.with_script("twothreads") do |s|
      with_term do |t|
        start_top(t, s.pid)
        yield t, s
        scr = t.wait_for(/EXIT=\d+/)
        code = scr[/EXIT=(\d+)/, 1].to_i
        probs << "exit #{code}, expected #{expect_exit}" unless code == expect_exit
        (p = restored_problem(t)) && probs << p
      end
      (p = s.running_problem) && probs << p if s.alive?
    end
    nil
  end
end

ended_by("top/tmux-ctrl-c", 0) { |t, _| t.keys("C-c") }
ended_by("top/tmux-sigterm", 0) do |_, s|
  top = `pgrep -f 'rbpeek top --pid #{s.pid}'`.split.map(&:to_i).first
  Process.kill("TERM", top) if top
end
ended_by("top/tmux-target-exits", 0) { |_, s| s.kill }

finish
