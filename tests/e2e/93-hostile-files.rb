# frozen_string_literal: true
#
# 93-hostile-files.rb - files an attacker (or an unlucky setup) plants where
# rbpeek reads or writes, and raw files built to hurt:
#
#   - The temporary output file is created with O_EXCL and O_NOFOLLOW
#     (checked with strace: a symlink planted at its name is never followed),
#     and a destination that is another user's symlink is never written
#     through: to a regular file, the symlink itself is replaced (the file it
#     points to is untouched); to a device, rbpeek refuses (exit 10).
#   - Output paths that can never be written (-o '', a directory, a name
#     longer than NAME_MAX) are refused before anything is recorded; a name
#     a few bytes under NAME_MAX still works (the temporary name adapts).
#   - A FIFO bind-mounted over a library the target maps, in the target's
#     private mount namespace: `snapshot --native` and `record --native`
#     finish, the target is never left stopped (before: the target stayed
#     stopped over 10 minutes and SIGTERM was ignored).  Likewise a FIFO at
#     libruby's path in the --sysroot of `snapshot --core`.
#   - Decompression bombs: a 0.2 MB raw.gz of 50 million identical samples,
#     and a chain of 300,000 nested nodes sampled at a thousand depths: a
#     clear error (exit 11) in bounded time and memory (before: 3.3 GB and
#     a minute; the chain never finished).
#   - An output bomb: a raw file of about 10 KB (a chain of 1,500 nested
#     frames with 400-byte names, every depth sampled, between samples of
#     the deepest), which reads in bounded memory but asks collapsed for
#     0.5 GB and chrome for more.  Under a 300 MB address-space limit every
#     format either refuses it (exit 12, the bound for the file's size
#     named, --max-output suggested) or writes it: no crash, no running out
#     of memory (before: collapsed held every line in memory and failed
#     here with "out of memory", exit 10; unlimited, a 7.8 KB file took it
#     to 2 GB resident).  With --max-output raised, collapsed streams all
#     0.5 GB under the same limit (about 5-12 s here).
require "etc"
require "zlib"
require_relative "lib/e2e"
require_relative "lib/record"
include E2E

R = Record
names = %w[hostile/temp-file-flags hostile/symlink-destination hostile/bad-output-paths
           hostile/fifo-library-native hostile/fifo-sysroot-core hostile/raw-bomb-samples hostile/raw-bomb-depth
           hostile/output-bomb hostile/output-bomb-streamed]
exit 0 if skip_unless_tracing(names)

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
    # LeakSanitizer cannot run under a tracer (make asan's build): leaks are
    # checked by every other test
    res = run(["strace", "-f", "-e", "trace=open,openat", "-o", log, RBPEEK, "report", "-i", raw_file,
               "-f", "collapsed", "-o", out],
              env: R.env("ASAN_OPTIONS" => "#{ENV['ASAN_OPTIONS']}:detect_leaks=0".delete_prefix(":")), timeout: 60)
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

check("hostile/bad-output-paths") do |probs|
  R.with_script("hotcold") do |t|
    dir = R.tmp("paths", mkdir: true)
    { "an empty name" => ["", /cannot write '': No such file/],
      "a directory" => [dir, /cannot write '#{Regexp.escape(dir)}': Is a directory/],
      "a 256-byte name" => [File.join(dir, "a" * 256), /File name too long/] }.each do |what, (path, re)|
      res = R.rec("record", "--pid", t.pid, "-d", 5, "-o", path, timeout: 20)
      err = R.stderr_of(res)
      probs << "#{what}: exit #{res.status.inspect}, expected 10: #{err[0, 300].inspect}" unless res.status == 10
      probs << "#{what}: no clear error: #{err[0, 300].inspect}" unless err =~ re
      probs << "#{what}: refused only after recording" if err =~ R::RECORDING
    end
    long = File.join(dir, "b" * 250) # no room for ".tmpXXXXXX" beside it
    res = R.rec("record", "--pid", t.pid, "-d", 0.3, "-f", "collapsed", "-o", long)
    probs << "a 250-byte name: #{res.describe}" unless res.status&.zero? && File.size?(long)
    left = Dir.children(dir).reject { |f| f == File.basename(long) }
    probs << "left behind: #{left}" unless left.empty?
  end
  "'', a directory, 256 bytes refused at once; 250 bytes written"
end

# A target in a private mount namespace, busy; yields it once ready.
def in_private_mount_ns
  ready = R.tmp("ns.ready")
  script = "def work; i = 0; i += 1 while i < 10_000; end; File.write(#{ready.inspect}, 'x'); loop { work }"
  pid = Process.spawn("unshare", "-m", "--propagation", "private", E2E::RUBY, "-e", script,
                      in: "/dev/null", out: "/dev/null", err: "/dev/null")
  register_pid(pid)
  deadline = R.mono + 20
  sleep 0.05 until File.exist?(ready) || R.mono > deadline
  raise "target not ready" unless File.exist?(ready)

  # the ruby process itself (unshare execs it)
  yield pid
ensure
  kill_pid(pid) if pid
end

can_ns = root? && system("command -v unshare >/dev/null && command -v nsenter >/dev/null")
if can_ns
  check("hostile/fifo-library-native") do |probs|
    in_private_mount_ns do |pid|
      lib = File.readlines("/proc/#{pid}/maps").map { |l| l.split[5] }.compact
                .find { |p| p.start_with?("/") && p.include?(".so") && p !~ %r{/(libruby|libc|ld-linux)[.-]} }
      next probs << "no library to plant a FIFO over in #{pid}'s maps" unless lib

      fifo = R.tmp("lib.fifo")
      File.mkfifo(fifo)
      res = run(["nsenter", "-t", pid.to_s, "-m", "mount", "--bind", fifo, lib])
      next probs << "mount --bind a FIFO over #{lib}: #{res.describe}" unless res.status&.zero?

      [%w[snapshot --native], ["record", "--native", "-d", "1", "-f", "collapsed", "-o", R.tmp("n.txt")]].each do |args|
        r = R.rec(*args, "--pid", pid, timeout: 40)
        probs << "#{args.first} --native with a FIFO at #{lib}: #{r.describe}" unless r.status&.zero? && !r.timed_out
        left = R.stopped_tasks(pid)
        probs << "#{args.first}: target threads #{left.inspect} left stopped" unless left.empty?
      end
      "FIFO over #{File.basename(lib)}"
    end
  end
else
  skip("hostile/fifo-library-native", "needs root, unshare and nsenter (util-linux)")
end

if root? && system("command -v gcore >/dev/null 2>&1")
  check("hostile/fifo-sysroot-core") do |probs|
    R.with_script("hotcold") do |t|
      prefix = R.tmp("core")
      g = run(["gcore", "-o", prefix, t.pid.to_s], timeout: 90)
      next probs << "gcore: #{g.describe}" unless g.status&.zero? && File.exist?("#{prefix}.#{t.pid}")

      libruby = File.readlines("/proc/#{t.pid}/maps").map { |l| l.split[5] }.compact.find { |p| p =~ /libruby/ }
      next probs << "no libruby in the target's maps" unless libruby

      sysroot = R.tmp("sysroot", mkdir: true)
      FileUtils.mkdir_p(File.join(sysroot, File.dirname(libruby)))
      File.mkfifo(File.join(sysroot, libruby))
      r = R.rec("snapshot", "--core", "#{prefix}.#{t.pid}", "--sysroot", sysroot, timeout: 60)
      probs << "snapshot --core with a FIFO at #{libruby} in the sysroot hung" if r.timed_out
      probs << "snapshot --core: killed by signal #{r.signal}" if r.signal
      File.unlink("#{prefix}.#{t.pid}")
      "finished with exit #{r.status}"
    end
  end
else
  skip("hostile/fifo-sysroot-core", "needs root and gcore (gdb)")
end

# A raw file, written as rbpeek writes one (see src/profile/raw.c), whose
# nodes and samples come from the block.
def bomb(path, strings: %w[f p.rb], frames: [[0, 1, 1, 1, 0]])
  v = lambda do |n|
    s = +"".b
    loop do
      b = n & 0x7f
      n >>= 7
      break s << b.chr if n.zero?

      s << (b | 0x80).chr
    end
  end
  z = ->(n) { v.(n >= 0 ? n << 1 : ((-n) << 1) - 1) }
  str = ->(s) { v.(s.bytesize) + s }
  Zlib::GzipWriter.open(path, 9) do |g|
    g.write("RBPEEKRAW".b + 1.chr)
    g.write(z.(1) + str.("3.1.2") + str.("bomb") + v.(0) + v.(1_000_000_000) + v.(100) + v.(100) + v.(0) + v.(0) + v.(0))
    g.write(v.(strings.size) + strings.map { |x| str.(x) }.join)
    g.write(v.(frames.size) + frames.map { |l, pa, li, fl, k| v.(l) + v.(pa) + z.(li) + z.(fl) + v.(k) }.join)
    yield g, v
    g.write(v.(0x454e44))
  end
  path
end

def bomb_check(probs, path)
  res = nil
  t0 = R.mono
  res = R.rec("report", "-i", path, "-f", "collapsed", "-o", R.tmp("bomb.txt"), timeout: 120)
  err = R.stderr_of(res)
  probs << "exit #{res.status.inspect} after #{format('%.1f', R.mono - t0)} s, expected 11: #{err[0, 300].inspect}" unless res.status == 11
  probs << "no clear error: #{err[0, 300].inspect}" unless err.include?("decompression bomb")
  "#{File.size(path)} bytes refused in #{format('%.1f', R.mono - t0)} s"
end

check("hostile/raw-bomb-samples") do |probs|
  path = bomb(R.tmp("samples.raw.gz")) do |g, v|
    g.write(v.(1) + v.(0) + v.(0))                      # one node
    g.write(v.(1) + v.(2) + v.(2) + v.(0))              # one thread
    g.write(v.(50_000_000))
    blk = "\x00\x00\x01\x00".b * 1_000_000              # delta 0, thread 0, node 1, flags 0
    50.times { g.write(blk) }
  end
  bomb_check(probs, path)
end

check("hostile/raw-bomb-depth") do |probs|
  n = 300_000
  path = bomb(R.tmp("chain.raw.gz")) do |g, v|
    g.write(v.(n))
    buf = +"".b
    n.times { |i| buf << v.(i) << v.(0) }               # each node the child of the one before
    g.write(buf)
    g.write(v.(1) + v.(2) + v.(2) + v.(0))
    g.write(v.(1000))
    buf = +"".b
    1000.times { |i| buf << "\x00\x00".b << v.(n - i) << "\x00".b }
    g.write(buf)
  end
  bomb_check(probs, path)
end

# A raw file whose stacks are deep and whose names are long: a chain of
# depth nested nodes (two frames of one 400-byte label, alternating), each
# sampled once, between samples of the deepest node (so the chrome
# timeline opens the whole chain again each time).
def output_bomb(path, depth)
  bomb(path, strings: ["L" * 400, "/app/p.rb"], frames: [[0, 1, 1, 1, 0], [0, 1, 2, 1, 0]]) do |g, v|
    buf = v.(depth)
    depth.times { |i| buf << v.(i) << v.(i % 2) }    # node i + 1, the child of node i
    g.write(buf)
    g.write(v.(1) + v.(2) + v.(2) + v.(0))           # one thread
    g.write(v.(2 * depth))
    buf = +"".b
    depth.times { |i| buf << "\x02\x00".b << v.(depth) << "\x00\x02\x00".b << v.(i + 1) << "\x00".b }
    g.write(buf)
  end
end

BOMB_DEPTH = 1500
BOMB_AS_KB = 300 * 1024
# ASan reserves terabytes of address space and valgrind runs its own
# allocator: no address-space limit for them.
INSTRUMENTED = VALGRIND || run(["ldd", RBPEEK_BINARY]).stdout.include?("libasan")

# rbpeek ARGS under the address-space limit (none when instrumented).
def limited(args, timeout:)
  lim = INSTRUMENTED ? "" : "ulimit -v #{BOMB_AS_KB}; "
  run(["bash", "-c", "#{lim}exec \"$@\"", "bash", RBPEEK, *args.map(&:to_s)], env: R.env, timeout: timeout)
end

check("hostile/output-bomb") do |probs|
  path = output_bomb(R.tmp("outbomb.raw.gz"), BOMB_DEPTH)
  size = File.size(path)
  refused = []
  written = []
  help = run([RBPEEK, "report", "--help"]).stdout
  formats = help[/^formats:\n(.*)/m, 1].to_s.scan(/^  (\S+)/).flatten
  probs << "no formats in report --help" if formats.size < 5
  formats.each do |fmt|
    t0 = R.mono
    res = limited(["report", "-i", path, "-f", fmt, "-o", "/dev/null"], timeout: 120)
    err = R.stderr_of(res)
    took = format("%.1f", R.mono - t0)
    if res.status == 12
      refused << fmt
      probs << "#{fmt}: refusal without the size, the bound and the option: #{err[0, 400].inspect}" unless
        err =~ /output would be (about|over) [\d.]+ [KMG]?B, over [\d.]+ [KMG]?B, the bound/ &&
        err =~ /--max-output \d+[MG]\n/
    elsif res.status&.zero?
      written << fmt
    else
      probs << "#{fmt}: #{res.describe} after #{took} s, expected exit 12 (refused) or 0"
    end
  end
  %w[collapsed chrome].each { |f| probs << "#{f} was not refused" unless refused.include?(f) }
  "#{size} bytes#{INSTRUMENTED ? ' (instrumented: no memory limit)' : ", #{BOMB_AS_KB / 1024} MB limit"}: " \
    "refused (exit 12) #{refused.join(', ')}; written #{written.join(', ')}"
end

if INSTRUMENTED
  skip("hostile/output-bomb-streamed", "a sanitizer or valgrind build cannot run under an address-space limit")
else
  check("hostile/output-bomb-streamed") do |probs|
    path = output_bomb(R.tmp("outbomb.raw.gz"), BOMB_DEPTH)
    out = R.tmp("outbomb-count")
    t0 = R.mono
    res = run(["bash", "-c", "ulimit -v #{BOMB_AS_KB}; \"$@\" | wc -c > #{out}; exit ${PIPESTATUS[0]}", "bash",
               RBPEEK, "report", "-i", path, "-f", "collapsed", "--max-output", "2G", "-o", "-"],
              env: R.env, timeout: 120)
    bytes = File.read(out).to_i
    probs << "#{res.describe}, expected exit 0" unless res.status&.zero?
    want = BOMB_DEPTH * (BOMB_DEPTH + 1) / 2 * 400
    probs << "#{bytes} bytes written, expected over #{want}" unless bytes > want
    "#{bytes / 1_000_000} MB of folded stacks from #{File.size(path)} bytes under a #{BOMB_AS_KB / 1024} MB limit " \
      "in #{format('%.1f', R.mono - t0)} s"
  end
end

finish
