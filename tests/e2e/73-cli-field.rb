# frozen_string_literal: true
#
# 73-cli-field.rb - what a Ruby developer hit on first use (issue 19), on
# real Ruby programs: the output format follows -o FILE's name; a command
# that is not Ruby is said at once; record passes the program's exit
# status through; the raw file's path can be chosen or skipped and the
# cache of raw files stays bounded.
require "rbconfig"
require "zlib"
require_relative "lib/e2e"
require_relative "lib/record"
include E2E
R = Record

names = %w[field/format-from-name field/format-refused field/trace-format-from-name field/not-ruby field/exit-status field/messages field/permission-first field/raw-file field/raw-cache-bounded field/raw-cache-bytes]
exit 0 if skip_unless_tracing(names)

# A short Ruby program that works for ~0.4 s, recorded from its start.
WORK = "def w; t = Time.now; nil while Time.now - t < 0.4; end; w"

def record_cmd(*opts, prog: WORK, status: nil, env: {})
  R.rec("record", "--silent", *opts, "--", RbConfig.ruby, "-e", status ? "#{prog}; exit #{status}" : prog,
        timeout: 30, env: env)
end

# Each name's first bytes say which format was written.
test("field/format-from-name") do
  want = {
    "p.svg" => ->(b) { b.include?("<svg") },
    "p.pb.gz" => ->(b) { b.start_with?("\x1f\x8b".b) && !Zlib.gunzip(b).include?("rbpeek raw") },
    "p.pprof" => ->(b) { b.start_with?("\x1f\x8b".b) },
    "p.speedscope.json" => ->(b) { b.include?("speedscope.app/file-format-schema.json") },
    "p.trace.json" => ->(b) { b.include?("traceEvents") },
    "callgrind.out.123" => ->(b) { b.start_with?("# callgrind format") || b.include?("events:") },
    "p.callgrind" => ->(b) { b.include?("events:") },
    "p.folded" => ->(b) { b =~ /\A[^\n]+ \d+\n/ && !b.start_with?("<svg", "<?xml", "{") },
    "p.collapsed" => ->(b) { b =~ /\A[^\n]+ \d+\n/ && !b.start_with?("<svg", "<?xml", "{") },
    # endings in capitals stand for the same
    "P.PB.GZ" => ->(b) { b.start_with?("\x1f\x8b".b) && !Zlib.gunzip(b).include?("rbpeek raw") },
    "P.FOLDED" => ->(b) { b =~ /\A[^\n]+ \d+\n/ && !b.start_with?("<svg", "<?xml", "{") }
  }
  raw = R.tmp("p.raw.gz")
  r = record_cmd("-o", raw)
  next fail("field/format-from-name", "record -o p.raw.gz: #{r.describe}") unless r.status&.zero?
  head = Zlib.gunzip(File.binread(raw))[0, 64] rescue "not gzip"
  probs = []
  probs << "p.raw.gz holds #{head.inspect}, not a raw profile" unless head.start_with?("RBPEEKRAW")
  want.each do |name, good|
    out = R.tmp(name)
    rr = R.rec("report", "-i", raw, "-o", out)
    body = File.exist?(out) ? File.binread(out) : ""
    probs << "report -o #{name}: #{rr.describe}, wrote #{body[0, 40].inspect}" unless rr.status&.zero? && good.(body)
  end
  # record and alloc choose the same way (one each)
  out = R.tmp("rec.pb.gz")
  rr = record_cmd("-o", out)
  probs << "record -o rec.pb.gz: #{rr.describe}" unless rr.status&.zero? && File.binread(out, 2) == "\x1f\x8b".b
  probs.empty? ? ok("field/format-from-name", "#{want.size + 2} names") : fail("field/format-from-name", probs.join("; "))
end

# An ambiguous name without -f, or a -f the name contradicts: a usage
# error naming the choices, before anything is run or written.
test("field/format-refused") do
  probs = []
  cases = [
    [%w[-o p.json], /speedscope.*chrome/],
    [%w[-o p.txt], /collapsed.*summary/],
    [%w[-o p.gz], /pprof.*raw/],
    [%w[-f flamegraph -o p.pb.gz], /pprof/],
    [%w[-f pprof -o p.svg], /flamegraph/],
    [%w[-f collapsed -o p.speedscope.json], /speedscope/],
    # a trace's name is no profile's, with -f or without
    [%w[-o p.pftrace], /a trace's .*rbpeek trace.*prof\.svg/],
    [%w[-f pprof -o p.perfetto], /a trace's .*prof\.pb\.gz/]
  ]
  cases.each do |opts, choices|
    dir = R.tmp("refused", mkdir: true)
    [["record", "--silent", *opts, "--", RbConfig.ruby, "-e", "sleep 5"],
     ["report", "-i", "/nonexistent.raw.gz", *opts],
     ["alloc", "--pid", "1", *opts]].each do |args|
      r = R.rec(*args, chdir: dir)
      err = R.stderr_of(r)
      probs << "#{args.join(' ')}: #{r.describe}, expected exit 2 naming #{choices.source}" unless r.status == 2 && err =~ choices
      probs << "#{args.join(' ')} wrote #{Dir.children(dir)}" unless Dir.children(dir).empty?
    end
  end
  probs.empty? ? ok("field/format-refused", "#{cases.size * 3} runs") : fail("field/format-refused", probs.first(4).join("; "))
end

test("field/trace-format-from-name") do
  ext = File.join(ROOT, BUILD, "ext")
  next skip("field/trace-format-from-name", "tracer not built") unless File.exist?(File.join(ext, "rbpeek", "trace_ext.so"))

  env = { "RBPEEK_TRACE_LIB" => ext }
  json = R.tmp("t.json")
  r1 = R.rec("trace", "-o", json, "--", RbConfig.ruby, "-e", "1", env: env, timeout: 30)
  pf = R.tmp("t.pftrace")
  r2 = R.rec("trace", "-f", "json", "-o", pf, "--", RbConfig.ruby, "-e", "1", env: env, timeout: 30)
  # a profile's name is no trace's: refused before the program runs
  profiles = { "t.svg" => "flamegraph", "t.pb.gz" => "pprof", "t.speedscope.json" => "speedscope", "t.folded" => "collapsed" }
  bad = profiles.filter_map do |name, fmt|
    f = R.tmp(name)
    r = R.rec("trace", "-o", f, "--", RbConfig.ruby, "-e", "print :ran", env: env, timeout: 30)
    "trace -o #{name}: #{r.describe}" unless r.status == 2 && R.stderr_of(r) =~ /a profile's \(#{fmt}.*FILE\.pftrace/ && !File.exist?(f) && r.stdout.empty?
  end
  if !(r1.status&.zero? && File.binread(json, 1) == "{") then fail("field/trace-format-from-name", "trace -o t.json: #{r1.describe}, starts #{File.exist?(json) && File.binread(json, 8).inspect}")
  elsif r2.status != 2 || File.exist?(pf) then fail("field/trace-format-from-name", "trace -f json -o t.pftrace: #{r2.describe}")
  elsif !bad.empty? then fail("field/trace-format-from-name", bad.join("; "))
  else ok("field/trace-format-from-name", "t.json, t.pftrace; #{profiles.size} profile names refused")
  end
end

# Whether process pid runs (a zombie does not).
def alive?(pid)
  File.read("/proc/#{pid}/stat")[/\) (\S)/, 1] != "Z"
rescue SystemCallError
  false
end

# A command that is not Ruby is said at once (exit 5), not after it ends;
# when it has a Ruby child, the hint names --subprocesses.  rbpeek ends it,
# and what it started: no Ruby runs on, orphaned, after rbpeek's error.
test("field/not-ruby") do
  probs = []
  dir = R.tmp("notruby", mkdir: true)
  r = R.rec("record", "-o", File.join(dir, "x.svg"), "--", "sleep", "60", timeout: 20)
  err = R.stderr_of(r)
  probs << "record -- sleep 60: #{r.describe}, expected exit 5 at once" unless r.status == 5 && err.include?("not a Ruby process")
  probs << "record -- sleep 60: no hint: #{err.inspect}" unless err =~ /^hint: .*--subprocesses/
  script = "#{RbConfig.ruby} -e 'sleep 60'; echo done"
  r = R.rec("record", "-o", File.join(dir, "y.svg"), "--", "sh", "-c", script, timeout: 20)
  err = R.stderr_of(r)
  child = err[/process (\d+), [^)]*ruby/, 1]
  probs << "record -- sh -c 'ruby ...': #{r.describe}, expected exit 5 naming the Ruby child and --subprocesses" unless r.status == 5 && child && err.include?("--subprocesses")
  if child
    t0 = Time.now
    sleep 0.1 while alive?(child) && Time.now - t0 < 20
    if alive?(child)
      probs << "the Ruby child #{child} still runs after rbpeek's error"
      kill_pid(child.to_i, "KILL")
    end
  end
  probs << "files written: #{Dir.children(dir)}" unless Dir.children(dir).empty?
  probs.empty? ? ok("field/not-ruby") : fail("field/not-ruby", probs.join("; "))
end

# record -- CMD exits as CMD did, once the profile is written; a CMD gone
# before the first sample is said with its status.
test("field/exit-status") do
  probs = []
  { 0 => 0, 3 => 3, 1 => 1 }.each do |code, want|
    out = R.tmp("st#{code}.folded")
    r = record_cmd("-o", out, status: code)
    probs << "program exit #{code}: rbpeek #{r.describe}, expected #{want}" unless r.status == want
    probs << "program exit #{code}: no profile" unless File.exist?(out) && File.size(out).positive?
  end
  out = R.tmp("sig.folded")
  r = record_cmd("-o", out, prog: "#{WORK}; Process.kill(:KILL, $$)")
  probs << "program killed by SIGKILL: rbpeek #{r.describe}, expected 137" unless r.status == 137 && File.exist?(out)
  # gone before the first sample: no profile, so rbpeek's exit 9 wins, and
  # the message says how the program ended (exit 5 only when a stalled
  # machine kept sh from exiting for the half second rbpeek waits for Ruby)
  { "exit 3" => "exited with status 3", "kill -KILL $$" => "was ended by signal 9" }.each do |body, said|
    r = R.rec("record", "--silent", "-o", R.tmp("early.folded"), "--", "sh", "-c", body, timeout: 30)
    probs << "record -- sh -c '#{body}': #{r.describe}, expected exit 9 saying it #{said}" unless r.status == 5 || (r.status == 9 && R.stderr_of(r) =~ /'sh' #{said}\b.*before its first sample/)
  end
  probs.empty? ? ok("field/exit-status", "0, 3, 1, 137; 9 naming 3 and signal 9") : fail("field/exit-status", probs.join("; "))
end

# Messages: hints all start with "hint:", a non-Ruby --pid gets one, and
# top --help does not forbid --native with --subprocesses.
test("field/messages") do
  probs = []
  pid = Process.spawn("sleep", "30")
  E2E.register_pid(pid)
  %w[record snapshot top].each do |cmd|
    r = R.rec(cmd, "--pid", pid, *(cmd == "record" ? ["-o", R.tmp("n.svg")] : []))
    probs << "#{cmd} --pid (sleep): #{r.describe}, expected exit 5 with a hint" unless r.status == 5 && r.stderr =~ /^hint: .*pgrep -a ruby.*--subprocesses/
  end
  E2E.kill_pid(pid)
  help = R.rec("top", "--help").stdout
  probs << "top --help says --native is not for --subprocesses" if help =~ /not with --nonblocking or\s+--subprocesses/
  ext = File.join(ROOT, BUILD, "ext")
  r = R.rec("trace", "-o", R.tmp("t.pftrace"), "--", "/bin/true", env: { "RBPEEK_TRACE_LIB" => ext }, timeout: 30)
  bad = R.stderr_of(r).lines.grep(/hint:/).reject { |l| l.start_with?("hint: ") }
  probs << "trace: hint lines #{bad.inspect} do not start with 'hint: '" unless bad.empty? && r.stderr.include?("hint: ")
  probs.empty? ? ok("field/messages") : fail("field/messages", probs.join("; "))
end

# A user who may not read the target, in a directory they cannot write, is
# told about the permission first (exit 4), not about the directory.
test("field/permission-first") do
  next skip("field/permission-first", "needs root (setpriv to nobody)") unless root?

  pid = Process.spawn(RbConfig.ruby, "-e", "sleep 30")
  E2E.register_pid(pid)
  sleep 0.3
  r = E2E.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", RBPEEK, "record", "--pid", pid.to_s, "-d", "1"],
              chdir: "/", env: { "HOME" => "/nonexistent" })
  E2E.kill_pid(pid)
  if r.status == 4 && r.stderr.include?("permission denied") && !r.stderr.include?("cannot write")
    ok("field/permission-first")
  else
    fail("field/permission-first", "record --pid (root's) as nobody in /: #{r.describe}, expected exit 4 about permission")
  end
end

# --raw-file PATH puts the raw profile there, --no-raw keeps none; neither
# adds to the cache directory.
test("field/raw-file") do
  cache = R.tmp("cache-rawfile", mkdir: true)
  raw = R.tmp("mine.raw.gz")
  r1 = R.rec("record", "--silent", "-o", R.tmp("a.svg"), "--raw-file", raw, "--", RbConfig.ruby, "-e", WORK,
             env: { "XDG_CACHE_HOME" => cache }, timeout: 30)
  r2 = R.rec("record", "--silent", "-o", R.tmp("b.svg"), "--no-raw", "--", RbConfig.ruby, "-e", WORK,
             env: { "XDG_CACHE_HOME" => cache }, timeout: 30)
  rep = R.rec("report", "-i", raw, "-o", R.tmp("c.folded"))
  in_cache = Dir.glob(File.join(cache, "**", "*.raw.gz"))
  if !r1.status&.zero? || !r2.status&.zero? then fail("field/raw-file", "#{r1.describe}; #{r2.describe}")
  elsif !rep.status&.zero? then fail("field/raw-file", "report -i --raw-file's file: #{rep.describe}")
  elsif !in_cache.empty? then fail("field/raw-file", "raw files in the cache: #{in_cache}")
  elsif R.stderr_of(r2).include?("raw profile") then fail("field/raw-file", "--no-raw still announced a raw profile")
  else ok("field/raw-file")
  end
end

# A cache directory (XDG_CACHE_HOME) whose rbpeek/ holds n raw files as
# rbpeek names them, copies of a fresh recording, oldest first (a second
# apart, in 2020), each grown by a hole to size bytes when given:
# [cache, rbpeek/, the files, the recording].  Raises when recording fails.
def old_raw_cache(name, n, size: nil)
  cache = R.tmp("cache-#{name}", mkdir: true)
  dir = File.join(cache, "rbpeek")
  FileUtils.mkdir_p(dir)
  seed = R.tmp("seed-#{name}.raw.gz")
  r = record_cmd("-o", seed)
  raise "seed: #{r.describe}" unless r.status&.zero?

  olds = (1..n).map do |i|
    f = File.join(dir, format("rbpeek-%d-20200101-0000%02d.raw.gz", 1000 + i, i))
    FileUtils.cp(seed, f)
    File.truncate(f, size) if size
    File.utime(Time.at(1_600_000_000 + i), Time.at(1_600_000_000 + i), f)
    f
  end
  [cache, dir, olds, seed]
end

# The cache keeps the newest 20 raw files, removing the oldest first, and
# never a file rbpeek did not write there (other names, other content,
# symlinks).
test("field/raw-cache-bounded") do
  cache, dir, olds, seed = old_raw_cache("bounded", 25)
  decoys = {
    "rbpeek-1-20200101-000000.raw.gz" => ->(f) { File.write(f, "not a raw profile") },
    "notes.txt" => ->(f) { File.write(f, "mine") },
    "rbpeek-2-20200101-000000.raw.gz.bak" => ->(f) { FileUtils.cp(seed, f) },
    "rbpeek-3-20200101-000000.raw.gz" => ->(f) { File.symlink(seed, f) }
  }
  decoys.each do |name, make|
    f = File.join(dir, name)
    make.(f)
    File.lutime(Time.at(1_500_000_000), Time.at(1_500_000_000), f) rescue nil
  end
  r = record_cmd("-o", R.tmp("new.svg"), env: { "XDG_CACHE_HOME" => cache })
  ours = Dir.children(dir).select { |n| n =~ /\Arbpeek-\d+-\d{8}-\d{6}(-\d+)?\.raw\.gz\z/ && File.file?(File.join(dir, n)) && !File.symlink?(File.join(dir, n)) }
  kept_old = olds.select { |f| File.exist?(f) }
  probs = []
  probs << "record: #{r.describe}" unless r.status&.zero?
  probs << "decoys removed: #{decoys.keys.reject { |n| File.exist?(File.join(dir, n)) || File.symlink?(File.join(dir, n)) }}" \
    unless decoys.keys.all? { |n| File.exist?(File.join(dir, n)) || File.symlink?(File.join(dir, n)) }
  probs << "#{kept_old.size} of the 25 old raw files kept, expected the newest 19" unless kept_old == olds.last(19)
  probs << "#{ours.size - 1} our raw files besides decoys, expected 20" unless ours.size - 1 == 20 # the fake-content decoy has our name
  probs.empty? ? ok("field/raw-cache-bounded", "20 kept, 6 oldest removed, 4 decoys untouched") : fail("field/raw-cache-bounded", probs.join("; "))
end

# ... and 512 MB at most: of four old 200 MB raw files (sparse: a raw
# profile followed by a hole) the two newest stay next to the new one.
test("field/raw-cache-bytes") do
  cache, _, olds, = old_raw_cache("bytes", 4, size: 200 << 20)
  r = record_cmd("-o", R.tmp("new-bytes.svg"), env: { "XDG_CACHE_HOME" => cache })
  kept = olds.select { |f| File.exist?(f) }
  if !r.status&.zero? then fail("field/raw-cache-bytes", "record: #{r.describe}")
  elsif kept != olds.last(2) then fail("field/raw-cache-bytes", "kept #{kept.map { |f| File.basename(f) }}, expected the newest two of four 200 MB files")
  else ok("field/raw-cache-bytes", "2 of 4 200 MB files kept")
  end
end

finish
