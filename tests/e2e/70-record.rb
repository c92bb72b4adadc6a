# frozen_string_literal: true
#
# 70-record.rb - rbpeek record and report on real Ruby processes
# (tests/targets/record/*.rb): a known hot spot carries its share of the
# samples; spawn mode; SIGINT/SIGTERM and the target's exit mid-recording
# still write the output; raw -> report gives the numbers a direct recording
# gives; corrupt raw files, bad options and bad targets get their exit codes
# (2, 3, 5, 9, 10, 11) and write nothing; --threads, --gvl, --on-cpu,
# --function, --nonblocking, the default output name, -o - and the raw file
# in $XDG_CACHE_HOME/rbpeek.  Sample counts are checked within wide bands
# (this machine is noisy): nothing here times rbpeek's speed.
require "zlib"
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
names = %w[record/hot-share record/spawn record/spawn-no-such-command record/spawn-exits-at-once
           record/spawn-ctrl-c record/sigint record/sigterm record/target-exits record/raw-then-report
           record/report-same-as-direct report/corrupt-raw record/unknown-format record/unwritable-output
           record/not-ruby record/no-samples record/bad-rate-duration record/threads record/gvl record/on-cpu record/on-cpu-nonblocking
           record/function record/nonblocking record/default-output-name record/stdout record/xdg-cache
           record/raw-file-per-recording]
exit 0 if skip_unless_tracing(names)

def cmd(args)
  "rbpeek #{args.join(' ')}"
end

# rbpeek ARGS must succeed (exit 0); a problem message otherwise.
def expect_ok(probs, args, res)
  return true if res.status&.zero? && !res.timed_out

  probs << "#{cmd(args)}: #{res.describe}, expected exit 0"
  false
end

# rbpeek ARGS must fail with `code` and a well-formed error message.
def expect_code(probs, args, res, code, mentions: [])
  err = R.stderr_of(res)
  if res.status != code || res.timed_out
    probs << "#{cmd(args)}: #{res.describe}, expected exit #{code}"
  elsif (p = error_format_problem(res))
    probs << "#{cmd(args)}: #{p}"
  else
    missing = mentions.reject { |m| err.include?(m) }
    probs << "#{cmd(args)}: message does not mention #{missing.inspect}: #{err.strip.inspect}" unless missing.empty?
  end
end

def expect_absent(probs, file, why)
  probs << "#{why}: #{file} was written (#{File.size(file)} bytes), expected nothing" if File.exist?(file)
end

# "hot 70.1%, cold 23.4%" of a collapsed profile.
def shares(stacks, *labels)
  t = R.total(stacks)
  labels.map { |l| "#{l} #{format('%.1f', 100.0 * R.under(stacks, l) / t)}%" }.join(", ")
end

# samples reported on stderr: "... N samples in M ticks ..."
def reported_samples(res)
  R.stderr_of(res)[/: (\d+) samples in \d+ ticks/, 1]&.to_i
end

# A valid raw recording of hotcold.rb, made once (raw-then-report and the
# corrupt-raw variants use it).
def good_raw
  @good_raw ||= begin
    file = R.tmp("hotcold.raw.gz")
    R.with_script("hotcold") do |t|
      args = ["record", "--pid", t.pid, "-r", 200, "-d", 1, "-f", "raw", "-o", file]
      res = R.rec(*args)
      raise "#{cmd(args)}: #{res.describe}" unless res.status&.zero? && File.exist?(file)

      [file, res]
    end
  end
end

# --- 1. the hot spot ------------------------------------------------------
check("record/hot-share") do |probs|
  R.with_script("hotcold") do |t|
    out = R.tmp("hot.txt")
    rate = 200
    secs = 3
    args = ["record", "--pid", t.pid, "-r", rate, "-d", secs, "-f", "collapsed", "-o", out]
    res = R.rec(*args)
    next unless expect_ok(probs, args, res)

    stacks = R.read_collapsed(out)
    hot = R.under(stacks, "Object#hot")
    cold = R.under(stacks, "Object#cold")
    all = R.total(stacks)
    want = rate * secs
    ratio = cold.zero? ? Float::INFINITY : hot.to_f / cold
    unless ratio.between?(2.0, 4.5)
      probs << "samples under Object#hot : Object#cold = #{hot} : #{cold} = #{format('%.2f', ratio)}, " \
               "expected about 3 (2 to 4.5); #{shares(stacks, 'Object#hot', 'Object#cold')} of #{all}"
    end
    if hot + cold < 0.8 * all
      probs << "only #{hot + cold} of #{all} samples under Object#hot or Object#cold, expected at least 80 %"
    end
    unless all.between?((0.2 * want).floor, (1.1 * want).ceil)
      probs << "#{all} samples in #{secs} s at #{rate} Hz on 1 thread, expected about #{want} " \
               "(#{(0.2 * want).floor} to #{(1.1 * want).ceil})"
    end
    if (n = reported_samples(res)) && n != all
      probs << "stderr says #{n} samples, the collapsed file holds #{all} (one thread)"
    end
    bad = stacks.map(&:first).flatten.select { |f| f.path && f.path != t.path && f.label != "Kernel#loop" }
    probs << "frames outside #{t.path}: #{bad.first(3).map(&:to_s).inspect}" unless bad.empty?
    "#{hot}:#{cold} = #{format('%.2f', ratio)} (#{all} samples, #{want} nominal)"
  end
end

# --- 2. spawn mode ----------------------------------------------------------
check("record/spawn") do |probs|
  out = R.tmp("spawn.txt")
  args = ["record", "-f", "collapsed", "-o", out, "--", RUBY, "busy.rb", "1.0"]
  res = R.rec(*args, chdir: R::DIR, timeout: 20)
  next unless expect_ok(probs, args, res)

  stacks = R.read_collapsed(out)
  work = R.under(stacks, "Object#work")
  busy = File.join(R::DIR, "busy.rb")
  probs << "#{work} samples under Object#work, expected at least 30 (1 s at 100 Hz): #{stacks.first(3).inspect}" if work < 30
  unless stacks.any? { |fr, _| fr.last.label == "Object#work" && fr.last.path == busy }
    probs << "no stack ends in Object#work (#{busy}:N)"
  end
  probs << "rbpeek ran #{format('%.2f', res.elapsed)} s for a 1 s program" unless res.elapsed.between?(0.9, 8)
  child = R.stderr_of(res)[R::RECORDING, 1]&.to_i
  register_pid(child) if child
  if child.nil?
    probs << "stderr does not say \"recording process PID\": #{R.stderr_of(res)[0, 300].inspect}"
  elsif File.exist?("/proc/#{child}")
    probs << "the program (pid #{child}) is still there after rbpeek exited (state #{File.read("/proc/#{child}/stat")[/\) (\S)/, 1]})"
  end
  "#{work} samples under Object#work, #{format('%.1f', res.elapsed)} s"
end

check("record/spawn-no-such-command") do |probs|
  out = R.tmp("nosuch.txt")
  prog = "/nonexistent/rbpeek-no-such-command"
  args = ["record", "-f", "collapsed", "-o", out, "--", prog]
  res = R.rec(*args)
  err = R.stderr_of(res)
  if res.timed_out || res.signal || res.status.to_i.zero?
    probs << "#{cmd(args)}: #{res.describe}, expected a non-zero exit"
  elsif (p = error_format_problem(res))
    probs << p
  elsif !err.include?(prog) || !err.include?("No such file")
    probs << "message does not name #{prog.inspect} and \"No such file\": #{err.strip.inspect}"
  end
  expect_absent(probs, out, "no program")
  "exit #{res.status}"
end

check("record/spawn-exits-at-once") do |probs|
  out = R.tmp("atonce.txt")
  cache = R.tmp("cache-atonce", mkdir: true)
  args = ["record", "-f", "collapsed", "-o", out, "--", "true"]
  res = R.rec(*args, env: { "XDG_CACHE_HOME" => cache })
  expect_code(probs, args, res, 9, mentions: ["true"])
  expect_absent(probs, out, "no samples")
  raws = Dir.glob(File.join(cache, "**", "*")).select { |f| File.file?(f) }
  probs << "raw files written with no samples: #{raws.inspect}" unless raws.empty?
end

# Ctrl-C in a terminal: SIGINT to rbpeek and the program (one process group).
check("record/spawn-ctrl-c") do |probs|
  out = R.tmp("spawn-int.txt")
  args = ["record", "-f", "collapsed", "-o", out, "--", RUBY, "hotcold.rb"]
  bg = R::Background.new(args, chdir: R::DIR)
  child = bg.wait_stderr(R::RECORDING)[1].to_i
  register_pid(child) # killed at exit should it outlive the test
  # Ctrl-C once the program has run its loop a while: ~1 s, and at least
  # 0.6 s of CPU (Ruby's start-up included), which a loaded machine may
  # take longer to give it
  deadline = Time.now + 30
  sleep 1
  loop do
    f = (File.read("/proc/#{child}/stat")[/\) (.*)/, 1] || "").split rescue []
    break if f.size < 13 || f[11].to_i + f[12].to_i >= 60 || Time.now > deadline

    sleep 0.1
  end
  bg.kill("INT", group: true)
  res = bg.wait
  # the profile is written, and rbpeek exits as the program did: SIGINT, 128+2
  unless res.status == 130 && !res.timed_out
    next probs << "#{cmd(args)}: #{res.describe}, expected exit 130 (the program's SIGINT)"
  end

  hot = R.under(R.read_collapsed(out), "Object#hot")
  probs << "#{hot} samples under Object#hot after >= 0.6 s of its CPU at 100 Hz, expected at least 20" if hot < 20
  probs << "the program (pid #{child}) is still there after rbpeek exited" if File.exist?("/proc/#{child}")
  "#{hot} samples under Object#hot"
ensure
  bg&.wait(timeout: 5) if bg && !res
end

# --- 3. signals to rbpeek only ---------------------------------------------
%w[INT TERM].each do |sig|
  check("record/sig#{sig.downcase}") do |probs|
    R.with_script("hotcold") do |t|
      out = R.tmp("sig#{sig}.txt")
      args = ["record", "--pid", t.pid, "-f", "collapsed", "-o", out]
      bg = R::Background.new(args)
      bg.wait_stderr(R::RECORDING)
      sleep 1
      bg.kill(sig)
      res = bg.wait
      if expect_ok(probs, args, res)
        stacks = R.read_collapsed(out)
        hot = R.under(stacks, "Object#hot")
        probs << "#{hot} samples under Object#hot after ~1 s at 100 Hz, expected at least 20" if hot < 20
        probs << "stopped after #{format('%.2f', res.elapsed)} s, SIG#{sig} was sent after ~1 s" if res.elapsed > 6
      end
      (p = t.running_problem) && probs << "after SIG#{sig} to rbpeek: #{p}"
      "#{R.total(stacks)} samples" if stacks
    end
  end
end

# --- 4. the target exits mid-recording --------------------------------------
check("record/target-exits") do |probs|
  R.with_script("busy", "1.5") do |t|
    out = R.tmp("exits.txt")
    args = ["record", "--pid", t.pid, "-f", "collapsed", "-o", out]
    res = R.rec(*args, timeout: 15)
    probs << "target still running after rbpeek exited" unless t.wait_exit(5)
    next unless expect_ok(probs, args, res)

    work = R.under(R.read_collapsed(out), "Object#work")
    probs << "#{work} samples under Object#work, expected at least 20 (the target works ~1.5 s)" if work < 20
    probs << "rbpeek took #{format('%.1f', res.elapsed)} s, the target exits after 1.5 s" if res.elapsed > 8
    "#{work} samples, stopped after #{format('%.1f', res.elapsed)} s"
  end
end

# --- 5. raw files and report -------------------------------------------------
check("record/raw-then-report") do |probs|
  raw, res = good_raw
  data = File.binread(raw)
  plain = Zlib.gunzip(data) rescue nil
  probs << "#{raw} is not gzip: #{data[0, 16].inspect}" unless plain
  probs << "#{raw} does not start with RBPEEKRAW: #{plain[0, 16].inspect}" if plain && !plain.start_with?("RBPEEKRAW")
  cached = R.raw_path_of(res)
  if !cached
    probs << "stderr names no raw profile: #{R.stderr_of(res)[0, 300].inspect}"
  elsif !File.exist?(cached)
    probs << "raw profile #{cached} named on stderr does not exist"
  elsif plain && (Zlib.gunzip(File.binread(cached)) rescue nil) != plain
    probs << "#{cached} (cache) and #{raw} (-o) hold different profiles of the same recording"
  end
  col = R.tmp("report.txt")
  sum = R.tmp("report-summary.txt")
  a1 = ["report", "-i", raw, "-f", "collapsed", "-o", col]
  a2 = ["report", "-i", raw, "-f", "summary", "-o", sum]
  next unless expect_ok(probs, a1, R.rec(*a1)) & expect_ok(probs, a2, R.rec(*a2))

  stacks = R.read_collapsed(col)
  n = R.total(stacks)
  s = R.parse_summary(File.binread(sum))
  probs << "summary says #{s[:samples]} samples, collapsed holds #{n}" if s[:samples] != n
  probs << "summary says #{s[:rate]} Hz, recorded at 200" if s[:rate] != 200
  probs << "summary says #{s[:threads]} threads, the target has 1" if s[:threads] != 1
  probs << "the summary of a wall-clock recording says on-CPU samples" if s[:on_cpu]
  %w[Object#hot Object#cold block\ in\ <main> Kernel#loop <main>].each do |label|
    row = s[:rows].find { |r| r[:label] == label }
    next probs << "summary has no row for #{label}: #{s[:rows].map { |r| r[:label] }.inspect}" unless row

    want_self = 100.0 * R.leaf(stacks, label) / n
    want_total = 100.0 * R.under(stacks, label) / n
    if (row[:self] - want_self).abs > 0.01 || (row[:total] - want_total).abs > 0.01
      probs << "summary row #{label}: self #{row[:self]} % total #{row[:total]} %, collapsed gives " \
               "#{format('%.2f', want_self)} % / #{format('%.2f', want_total)} %"
    end
  end
  "#{n} samples, #{shares(stacks, 'Object#hot', 'Object#cold')}"
end

check("record/report-same-as-direct") do |probs|
  R.with_script("hotcold") do |t|
    notes = []
    %w[collapsed summary].each do |fmt|
      out = R.tmp("direct.#{fmt}")
      args = ["record", "--pid", t.pid, "-d", 1, "-f", fmt, "-o", out]
      res = R.rec(*args)
      next unless expect_ok(probs, args, res)
      next probs << "#{fmt}: stderr names no raw profile: #{R.stderr_of(res)[0, 300].inspect}" unless (raw = R.raw_path_of(res))

      again = R.tmp("again.#{fmt}")
      a2 = ["report", "-i", raw, "-f", fmt, "-o", again]
      next unless expect_ok(probs, a2, R.rec(*a2))

      direct = File.binread(out)
      converted = File.binread(again)
      if direct.empty?
        probs << "#{fmt}: #{out} is empty"
      elsif direct != converted
        i = direct.lines.zip(converted.lines).index { |a, b| a != b } || [direct.lines.size, converted.lines.size].min
        probs << "#{fmt}: record and report of its raw file differ at line #{i + 1}: " \
                 "direct #{direct.lines[i].inspect}, report #{converted.lines[i].inspect}"
      end
      notes << "#{fmt} #{direct.lines.size} lines"
    end
    notes.join(", ")
  end
end

check("report/corrupt-raw") do |probs|
  raw, = good_raw
  gz = File.binread(raw)
  plain = Zlib.gunzip(gz)
  flip = gz.dup
  flip.setbyte(gz.size / 2, gz.getbyte(gz.size / 2) ^ 0x10)
  bad_version = plain.dup
  bad_version.setbyte(9, 99) # a version from the future
  cases = {
    "truncated" => gz[0, gz.size / 2],
    "no-gzip-trailer" => gz[0, gz.size - 4],
    "bit-flipped" => flip,
    "not-gzip" => "this is not a raw profile\n",
    "empty" => "",
    "gzip-of-text" => Zlib.gzip("hello\n"),
    "bad-version" => Zlib.gzip(bad_version),
    "payload-truncated" => Zlib.gzip(plain[0, plain.size - 3]),
    "trailing-data" => Zlib.gzip("#{plain}\x00"),
  }
  cases.each_with_index do |(kind, bytes), i|
    input = R.tmp("#{kind}.raw.gz")
    File.binwrite(input, bytes)
    out = R.tmp("#{kind}.txt")
    # once over an existing file, which must be left alone
    File.write(out, "before\n") if i.zero?
    args = ["report", "-i", input, "-f", "collapsed", "-o", out]
    res = R.rec(*args)
    before = probs.size
    expect_code(probs, args, res, 11)
    if i.zero?
      now = File.read(out) rescue nil
      probs << "#{kind}: existing output #{out} changed to #{now.inspect} (expected \"before\\n\")" if now != "before\n"
    else
      expect_absent(probs, out, kind)
    end
    probs[before..] = probs[before..].map { |p| "#{kind}: #{p}" }
  end
  "#{cases.size} kinds: #{cases.keys.join(', ')}"
end

# --- 6. bad input -------------------------------------------------------------
def valid_formats
  help = R.rec("record", "--help").stdout.dup.force_encoding("UTF-8")
  names = help.split(/^formats:\s*$/, 2)[1].to_s.scan(/^  (\S+)\s/).flatten
  raise "record --help lists no formats: #{help[0, 300].inspect}" if names.size < 5

  names
end

check("record/unknown-format") do |probs|
  formats = valid_formats
  raw, = good_raw
  R.with_script("hotcold") do |t|
    [["record", "--pid", t.pid, "-d", 1, "-f", "bogus", "-o", R.tmp("bogus.out")],
     ["report", "-i", raw, "-f", "bogus", "-o", R.tmp("bogus.out")]].each do |args|
      res = R.rec(*args)
      expect_code(probs, args, res, 2, mentions: ["bogus"] + formats)
      expect_absent(probs, args.last, "unknown format")
    end
  end
  "valid: #{formats.join(', ')}"
end

check("record/unwritable-output") do |probs|
  notes = []
  R.with_script("hotcold") do |t|
    args = ["record", "--pid", t.pid, "-d", 30, "-o", "/nonexistent-dir/x.svg"]
    res = R.rec(*args, timeout: 40)
    expect_code(probs, args, res, 10, mentions: ["/nonexistent-dir/x.svg"])
    probs << "took #{format('%.1f', res.elapsed)} s with -d 30: the output must be checked before sampling" if res.elapsed > 5
    notes << "pid mode #{format('%.2f', res.elapsed)} s"
  end
  # spawn mode: the program must not even start
  marker = R.tmp("marker")
  args = ["record", "-d", 30, "-o", "/nonexistent-dir/x.svg", "--", RUBY, "-e", "File.write(#{marker.inspect}, 'ran'); sleep 30"]
  res = R.rec(*args, timeout: 40)
  expect_code(probs, args, res, 10)
  probs << "spawn mode took #{format('%.1f', res.elapsed)} s with -d 30" if res.elapsed > 5
  probs << "spawn mode ran the program although the output is not writable" if File.exist?(marker)
  # report too
  raw, = good_raw
  args = ["report", "-i", raw, "-f", "collapsed", "-o", "/nonexistent-dir/x.txt"]
  expect_code(probs, args, R.rec(*args), 10)
  notes << "spawn mode #{format('%.2f', res.elapsed)} s"
  notes.join(", ")
end

check("record/not-ruby") do |probs|
  pid = Process.spawn("sleep", "100", in: "/dev/null")
  register_pid(pid)
  sleep 0.1
  out = R.tmp("notruby.svg")
  args = ["record", "--pid", pid, "-d", 1, "-o", out]
  expect_code(probs, args, R.rec(*args), 5, mentions: [pid.to_s])
  expect_absent(probs, out, "not Ruby")
  gone = Process.spawn("true")
  Process.wait(gone)
  args = ["record", "--pid", gone, "-d", 1, "-o", out]
  expect_code(probs, args, R.rec(*args), 3)
ensure
  kill_pid(pid) if pid
end

# Zero samples: a target whose only thread sleeps, with --on-cpu (pausing
# and not) and --gvl (it never holds the GVL).
check("record/no-samples") do |probs|
  R.with_script("sleeper") do |t|
    [["--on-cpu"], ["--on-cpu", "--nonblocking"], ["--gvl"]].each do |flags|
      out = R.tmp("nosamples.svg")
      cache = R.tmp("cache-nosamples", mkdir: true)
      args = ["record", "--pid", t.pid, *flags, "-d", 1, "--silent", "-o", out]
      res = R.rec(*args, env: { "XDG_CACHE_HOME" => cache })
      expect_code(probs, args, res, 9, mentions: ["no samples"])
      expect_absent(probs, out, "zero samples")
      raws = Dir.glob(File.join(cache, "**", "*")).select { |f| File.file?(f) }
      probs << "#{flags.join(' ')}: raw files written with zero samples: #{raws.inspect}" unless raws.empty?
    end
    (p = t.running_problem(busy: false)) && probs << "afterwards: #{p}"
  end
end

check("record/bad-rate-duration") do |probs|
  R.with_script("hotcold") do |t|
    [%w[-r 0], %w[-r -5], %w[-r abc], %w[-d -1], %w[-d 0], %w[-d abc]].each do |opt|
      out = R.tmp("badopt.svg")
      args = ["record", "--pid", t.pid, *opt, "-o", out]
      args += ["-d", 1] unless opt[0] == "-d"
      expect_code(probs, args, R.rec(*args, timeout: 5), 2, mentions: [opt[1]])
      expect_absent(probs, out, opt.join(" "))
    end
  end
  "-r 0, -r -5, -r abc, -d -1, -d 0, -d abc"
end

# --- 7. options -------------------------------------------------------------------
def tasks_of(pid)
  Dir.children("/proc/#{pid}/task").map(&:to_i)
rescue Errno::ENOENT
  []
end

check("record/threads") do |probs|
  R.with_script("spinsleep") do |t|
    out = R.tmp("threads.txt")
    # --idle: the sleeping threads too (by default they are left out, below)
    args = ["record", "--pid", t.pid, "-d", 1, "--threads", "--idle", "-f", "collapsed", "-o", out]
    next unless expect_ok(probs, args, R.rec(*args))
    dflt = R.tmp("threads-default.txt")
    res = R.rec("record", "--pid", t.pid, "-d", 1, "--threads", "-f", "collapsed", "-o", dflt)
    if expect_ok(probs, ["record", "(default)"], res)
      roots = R.read_collapsed(dflt).map { |frames, _| frames.first.label[/\((.*)\)\z/, 1] }.uniq
      probs << "by default the threads waiting (main in Thread#join, sleeper) are left out: roots #{roots.inspect}" unless roots == ["spinner"]
      probs << "the hidden share is not said: #{R.stderr_of(res).inspect}" unless R.stderr_of(res) =~ /\(\d+%\) were threads waiting for work/
    end

    stacks = R.read_collapsed(out)
    spin = t.line_of(/# SPIN/)
    per = Hash.new(0)
    tasks = tasks_of(t.pid)
    stacks.each do |frames, n|
      m = /\Athread (\d+) \((.*)\)\z/.match(frames.first.label)
      next probs << "stack does not start with a \"thread TID (name)\" root: #{frames.map(&:to_s).join(';')[0, 200]}" unless m

      tid = m[1].to_i
      name = m[2]
      per[[tid, name]] += n
      probs << "root #{frames.first.label}: #{tid} is not a thread of #{t.pid} #{tasks.inspect}" unless tasks.include?(tid)
      labels = frames.drop(1).map(&:label)
      case name
      when "main"
        probs << "main thread root has tid #{tid}, expected the pid #{t.pid}" if tid != t.pid
        probs << "main thread stack #{labels.inspect} lacks Thread#join" unless labels.include?("Thread#join")
      when "sleeper"
        probs << "sleeper stack #{labels.inspect} lacks Kernel#sleep" unless labels.last == "Kernel#sleep"
      when "spinner"
        leafline = frames.last.line
        probs << "spinner stack #{frames.map(&:to_s).inspect} does not end on line #{spin}" unless leafline == spin
        comm = File.read("/proc/#{t.pid}/task/#{tid}/comm").chomp rescue nil
        probs << "spinner root tid #{tid} has comm #{comm.inspect}" if comm != "spinner"
      else
        probs << "unexpected thread root #{frames.first.label.inspect}"
      end
    end
    roots = per.keys.map(&:last).sort
    probs << "thread roots #{roots.inspect}, expected [\"main\", \"sleeper\", \"spinner\"]" if roots != %w[main sleeper spinner]
    counts = per.values
    if counts.any? && counts.min < 0.8 * counts.max
      probs << "wall-clock samples per thread differ: #{per.map { |(tid, n), c| "#{n}/#{tid} #{c}" }.join(', ')}"
    end
    per.map { |(_, n), c| "#{n} #{c}" }.join(", ")
  end
end

# --gvl / --on-cpu: only the spinner's stack (its leaf on the SPIN line);
# the sleeping threads never run on their own, so not one sample of theirs
# (with pausing, rbpeek must judge a thread by what it did at the stop, not
# by a state its own previous pause may have left it in: on a busy machine
# a sleeper released by one tick may still wait for a CPU to re-enter its
# sleep when the next tick stops it -- runnable, but only because of us).
{ "gvl" => ["--gvl"], "on-cpu" => ["--on-cpu"],
  "on-cpu-nonblocking" => ["--on-cpu", "--nonblocking"] }.each do |name, flags|
  check("record/#{name}") do |probs|
    R.with_script("spinsleep") do |t|
      out = R.tmp("#{name}.txt")
      # 500 Hz: a sleeper that a tick left runnable is likelier to be caught
      args = ["record", "--pid", t.pid, "-r", 500, "-d", 1, *flags, "-f", "collapsed", "-o", out]
      next unless expect_ok(probs, args, res = R.rec(*args))

      # the recording says whether it is of CPU time (the summary's header; pprof's "cpu")
      if (raw = R.raw_path_of(res))
        sum = R.tmp("#{name}-summary.txt")
        a = ["report", "-i", raw, "-f", "summary", "-o", sum]
        if expect_ok(probs, a, R.rec(*a)) && R.parse_summary(File.binread(sum))[:on_cpu] != flags.include?("--on-cpu")
          probs << "the summary's header says #{flags.include?('--on-cpu') ? 'wall-clock' : 'on-CPU'} samples: " \
                   "#{File.binread(sum).lines.first.inspect}"
        end
      else
        probs << "stderr names no raw profile: #{R.stderr_of(res)[0, 300].inspect}"
      end

      stacks = R.read_collapsed(out)
      spin = t.line_of(/# SPIN/)
      others = stacks.reject { |fr, _| fr.last.label == "block in <main>" && fr.last.line == spin && fr.last.path == t.path }
      n = R.total(stacks)
      foreign = R.total(others)
      if foreign.positive?
        probs << "#{foreign} of #{n} samples are not the spinner's (#{t.path}:#{spin}), expected none: " \
                 "#{others.first(2).map { |fr, c| "#{fr.map(&:to_s).join(';')} #{c}" }.inspect}"
      end
      probs << "#{n - foreign} samples of the spinner in 1 s at 500 Hz, expected at least 30" if n - foreign < 30
      (p = t.running_problem) && probs << "afterwards: #{p}"
      "#{n} samples, all the spinner's"
    end
  end
end

# Blocking mode stops only the thread holding the GVL (no Ruby stack can
# change while it is stopped), and --on-cpu only the threads /proc shows
# runnable: the two sleeping threads of spinsleep.rb are never interrupted,
# so their context switches stay put -- while stopping every thread, as
# snapshot does, wakes them twice each time (the control that the count
# shows pauses).  record/threads checks that their stacks are still right.
def switches(pid, tids)
  tids.sum do |tid|
    s = File.read("/proc/#{pid}/task/#{tid}/status")
    s[/^voluntary_ctxt_switches:\s+(\d+)/, 1].to_i + s[/^nonvoluntary_ctxt_switches:\s+(\d+)/, 1].to_i
  end
end

check("record/blocking-stops-gvl-holder") do |probs|
  R.with_script("spinsleep") do |t|
    sleepers = tasks_of(t.pid).reject { |tid| (File.read("/proc/#{t.pid}/task/#{tid}/comm").chomp rescue "") == "spinner" }
    probs << "#{sleepers.size} threads besides the spinner, expected 2" if sleepers.size != 2
    woken = {}
    { "default" => [], "--on-cpu" => ["--on-cpu"] }.each do |name, flags|
      before = switches(t.pid, sleepers)
      args = ["record", "--pid", t.pid, "-r", 200, "-d", 1, *flags, "-f", "collapsed", "-o", R.tmp("gvlonly.txt")]
      next unless expect_ok(probs, args, R.rec(*args))

      woken[name] = switches(t.pid, sleepers) - before
    end
    before = switches(t.pid, sleepers)
    30.times { R.rec("snapshot", "--pid", t.pid) }
    woken["30 snapshots"] = switches(t.pid, sleepers) - before
    if woken.size == 3
      %w[default --on-cpu].each do |name|
        probs << "the sleeping threads switched #{woken[name]} times while recorded (#{name}), expected (almost) none" if woken[name] > 20
      end
      probs << "30 snapshots (every thread stopped) switched them only #{woken["30 snapshots"]} times: the count " \
               "does not show pauses" if woken["30 snapshots"] < 60
    end
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "sleeping threads' context switches: #{woken.map { |k, v| "#{k} #{v}" }.join(", ")}"
  end
end

# Two threads take turns with the GVL: each switch makes the guessed
# holder wrong once (then every thread is stopped for that tick).  With
# --gvl every tick that was read and found a thread holding the GVL gives
# exactly one sample, on one of the two spin lines, and both threads must
# be seen.  What must hold on any machine: samples = ticks - skipped
# (deadlines missed whole, never read) - errors - ticks that found the GVL
# being handed over (no holder at that instant); rbpeek's closing line
# counts each.  On a busy machine the last two are not rare: a thread that
# lost its CPU between releasing the GVL and the next one taking it leaves
# the GVL without an owner for that long.
# A wrong guess is corrected from the GVL's owner word (read without
# stopping anything), not by stopping every thread: the main thread, blocked
# in Thread#join, is woken a handful of times (by the ticks that found the
# GVL being handed over), not twice per GVL switch (43-48 times in these 2 s
# before, at load ~40; 4-5 after).
check("record/gvl-holder-switches") do |probs|
  R.with_script("spinners") do |t|
    out = R.tmp("spinners.txt")
    args = ["record", "--pid", t.pid, "-r", 200, "-d", 2, "--gvl", "-f", "collapsed", "-o", out]
    main_before = switches(t.pid, [t.pid])
    res = R.rec(*args)
    main_woken = switches(t.pid, [t.pid]) - main_before
    next unless expect_ok(probs, args, res)

    stacks = R.read_collapsed(out)
    lines = { "Object#spin_a" => t.line_of(/# SPIN_A/), "Object#spin_b" => t.line_of(/# SPIN_B/) }
    per = Hash.new(0)
    stacks.each do |frames, n|
      leaf = frames.last
      if lines[leaf.label] == leaf.line then per[leaf.label] += n
      else probs << "#{n} samples off the spin lines: #{frames.map(&:to_s).join(';')[0, 200]}"
      end
    end
    err = R.stderr_of(res)
    ticks = err[/ samples in (\d+) ticks/, 1].to_i
    errors = err[/ticks, (\d+) errors/, 1].to_i
    skipped = err[/late \([\d.]+%, (\d+) skipped\)/, 1]
    handover = err[/; (\d+) ticks found no thread holding the GVL/, 1]
    next probs << "closing line without the skipped and GVL-handover counts: #{err[-400..].inspect}" unless skipped && handover

    total = per.values.sum
    want = ticks - skipped.to_i - errors - handover.to_i
    probs << "#{total} samples in #{ticks} ticks (#{skipped} skipped, #{errors} errors, #{handover} without a " \
             "GVL holder): expected one per other tick, #{want}" unless total == want
    probs << "#{handover} of #{ticks} ticks found no GVL holder: more than half" if handover.to_i * 2 > ticks
    probs << "the main thread (in Thread#join) was woken #{main_woken} times: every thread is stopped at " \
             "each GVL switch, expected at most 20 plus the handovers" if main_woken > 20 + 2 * handover.to_i
    lines.each_key { |l| probs << "no samples in #{l}: #{per.inspect}" if per[l] < 20 }
    (p = t.running_problem) && probs << "afterwards: #{p}"
    "#{per.map { |l, n| "#{l} #{n}" }.join(", ")} in #{ticks} ticks (#{skipped} skipped, #{handover} handovers)"
  end
end

check("record/function") do |probs|
  R.with_script("hotcold") do |t|
    out = R.tmp("function.txt")
    args = ["record", "--pid", t.pid, "-d", 1, "--function", "-f", "collapsed", "-o", out]
    next unless expect_ok(probs, args, R.rec(*args))

    stacks = R.read_collapsed(out)
    first = {
      "Object#hot" => [t.line_of(/^def hot/)],
      "Object#cold" => [t.line_of(/^def cold/)],
      "block in <main>" => [t.line_of(/^loop do/)],
      # the main script's iseq starts at line 0 in Ruby (rb_iseq_new_main)
      "<main>" => [0, 1],
    }
    seen = Hash.new { |h, k| h[k] = [] }
    stacks.each do |frames, _|
      frames.each do |f|
        next unless f.path # C functions: no line of their own

        want = first[f.label]
        if f.path != t.path
          probs << "frame #{f} is not in #{t.path}"
        elsif !want
          probs << "unexpected frame #{f}"
        elsif !want.include?(f.line)
          probs << "#{f.label} on line #{f.line}, expected its first line #{want.join(' or ')}"
        end
        seen[f.label] |= [f.line]
      end
    end
    missing = %w[Object#hot Object#cold] - seen.keys
    probs << "no frame #{missing.inspect} in #{stacks.size} stacks" unless missing.empty?
    probs.uniq!
    seen.map { |l, ls| "#{l}:#{ls.join('/')}" }.join(", ")
  end
end

check("record/nonblocking") do |probs|
  R.with_script("hotcold") do |t|
    out = R.tmp("nonblocking.txt")
    args = ["record", "--pid", t.pid, "-d", 1, "--nonblocking", "-f", "collapsed", "-o", out]
    next unless expect_ok(probs, args, R.rec(*args))

    stacks = R.read_collapsed(out)
    hot = R.under(stacks, "Object#hot")
    cold = R.under(stacks, "Object#cold")
    probs << "#{hot} samples under Object#hot and #{cold} under Object#cold, expected hot > cold > 0" unless hot > cold && cold.positive?
    (p = t.running_problem) && probs << "afterwards: #{p}"
    shares(stacks, "Object#hot", "Object#cold")
  end
end

check("record/default-output-name") do |probs|
  R.with_script("hotcold") do |t|
    dir = R.tmp("cwd", mkdir: true)
    t0 = Time.now
    args = ["record", "--pid", t.pid, "-d", 1, "--silent"]
    res = R.rec(*args, chdir: dir)
    t1 = Time.now
    next unless expect_ok(probs, args, res)

    files = Dir.children(dir)
    re = /\Arbpeek-#{t.pid}-(\d{8}-\d{6})\.svg\z/
    next probs << "files in the cwd: #{files.inspect}, expected one rbpeek-#{t.pid}-YYYYmmdd-HHMMSS.svg" unless files.size == 1 && (m = re.match(files[0]))

    stamp = Time.local(*m[1].unpack("a4a2a2xa2a2a2").map(&:to_i))
    unless stamp.between?(t0 - 2, t1 + 2)
      probs << "file stamp #{m[1]} is not the recording's time (#{t0.strftime('%H:%M:%S')}..#{t1.strftime('%H:%M:%S')})"
    end
    head = File.binread(File.join(dir, files[0]), 300)
    probs << "#{files[0]} is not an SVG: #{head[0, 100].inspect}" unless head.include?("<svg")
    err = R.stderr_of(res)
    probs << "stderr does not name #{files[0]}: #{err.inspect}" unless err.include?(files[0])
    files[0]
  end
end

check("record/stdout") do |probs|
  R.with_script("hotcold") do |t|
    dir = R.tmp("cwd-stdout", mkdir: true)
    args = ["record", "--pid", t.pid, "-d", 1, "-f", "collapsed", "-o", "-"]
    res = R.rec(*args, chdir: dir)
    next unless expect_ok(probs, args, res)

    stacks = R.parse_collapsed(res.stdout)
    probs << "stdout holds no samples under Object#hot: #{res.stdout[0, 200].inspect}" if R.under(stacks, "Object#hot").zero?
    probs << "files written in the cwd: #{Dir.children(dir).inspect}" unless Dir.children(dir).empty?
    "#{R.total(stacks)} samples on stdout"
  end
end

# --- 8. where the raw file goes ----------------------------------------------------
check("record/xdg-cache") do |probs|
  R.with_script("hotcold") do |t|
    notes = []
    xdg = R.tmp("xdg") # does not exist yet: rbpeek creates it
    home = R.tmp("home", mkdir: true)
    [[{ "XDG_CACHE_HOME" => xdg }, File.join(xdg, "rbpeek")],
     [{ "XDG_CACHE_HOME" => nil, "HOME" => home }, File.join(home, ".cache", "rbpeek")]].each do |env, dir|
      out = R.tmp("xdg.txt")
      args = ["record", "--pid", t.pid, "-d", 0.5, "-f", "collapsed", "-o", out]
      res = R.rec(*args, env: env)
      next unless expect_ok(probs, args, res)

      raw = R.raw_path_of(res)
      shown = env.map { |k, v| "#{k}=#{v.inspect}" }.join(" ")
      if !raw
        probs << "#{shown}: stderr names no raw profile: #{R.stderr_of(res)[0, 300].inspect}"
      elsif File.dirname(raw) != dir || File.basename(raw) !~ /\Arbpeek-#{t.pid}-\d{8}-\d{6}\.raw\.gz\z/
        probs << "#{shown}: raw profile at #{raw}, expected #{dir}/rbpeek-#{t.pid}-YYYYmmdd-HHMMSS.raw.gz"
      elsif !File.exist?(raw)
        probs << "#{shown}: #{raw} named on stderr does not exist"
      else
        a2 = ["report", "-i", raw, "-f", "collapsed", "-o", "-"]
        r2 = R.rec(*a2)
        if expect_ok(probs, a2, r2) && r2.stdout != File.binread(out)
          probs << "#{shown}: report of #{raw} differs from the recording's collapsed output"
        end
        notes << raw.delete_prefix("#{R::TMP}/")
      end
    end
    notes.join(", ")
  end
end

# Two recordings of one process ending in the same second must not share
# (and overwrite) one raw file: each names its own, holding its own samples.
# They run one after the other, started just after a second begins so that
# both usually end within it.  (Two recordings ending at the same instant
# still race: the name is checked with access() before it is created.)
check("record/raw-file-per-recording") do |probs|
  R.with_script("hotcold") do |t|
    outs = [R.tmp("a.txt"), R.tmp("b.txt")]
    sleep(1.02 - Time.now.to_f % 1)
    results = outs.each_with_index.map do |out, i|
      args = ["record", "--pid", t.pid, "-d", 0.2, "-r", [100, 50][i], "-f", "collapsed", "-o", out]
      res = R.rec(*args)
      expect_ok(probs, args, res)
      res
    end
    next unless probs.empty?

    raws = results.map { |r| R.raw_path_of(r) }
    if raws.compact.size < 2
      probs << "stderr names no raw profile: #{results.map { |r| R.stderr_of(r)[0, 200] }.inspect}"
    elsif raws.uniq.size == 1
      probs << "both recordings (at 100 and 50 Hz) named the same raw file #{raws[0]}: the first was overwritten"
    end
    raws.compact.uniq.each do |raw|
      i = raws.index(raw)
      got = R.rec("report", "-i", raw, "-f", "collapsed", "-o", "-")
      probs << "report of #{raw} does not give recording #{i}'s samples" if got.stdout != File.binread(outs[i])
    end
    raws.map { |r| File.basename(r.to_s) }.join(", ")
  end
end

finish
