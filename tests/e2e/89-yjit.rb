# frozen_string_literal: true
# e2e-timeout: 300
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 89-yjit.rb - methods and lines under YJIT as right as in the interpreter.
# tests/targets/yjit/hot.rb runs with --yjit --yjit-call-threshold=1 (every
# method compiled on its first call) and parks threads in compiled code: one
# blocked in sleep below two compiled methods, two spinning in compiled loops
# (on a global variable, and on a local one: no instruction there makes YJIT
# write cfp->pc).  On each YJIT Ruby:
#   yjit-on        RubyVM::YJIT.enabled?, and compiling Hot#warm made code
#   oracle         Ruby's own backtrace_locations match yjit/hot.expect
#   snapshot       once the target settled, 10 snapshots in a row, each
#                  with exactly the frames of yjit/hot.expect
#   record         record -f collapsed: every thread's expected stack, and
#                  next to nothing else (a stale PC would show as other lines)
#   loop-lines     tests/targets/yjit/loop.rb, a compiled loop spanning three
#                  lines with nothing that makes the JIT save cfp->pc: the
#                  samples of Loop#spin spread over the loop's lines, or carry
#                  the "[jit]" mark at the method's first line; never all on
#                  one unmarked line (skipped where the layout comes from a
#                  table, which has no JIT entry to tell compiled code by)
# A spinning thread's innermost frame runs compiled code: where rbpeek knows
# the JIT entry (a DWARF layout) it is marked "LABEL [jit]" at the method's
# first line; snapshot and record then expect that (yjit/hot.expect with
# those frames marked), else yjit/hot.expect as it is.
# The YJIT Rubies: the "yjit" build of tools/build-debian-ruby.sh (Debian's
# ruby3.3 source, Rust YJIT; skipped with the reason when it is not built),
# the host's ruby when its build has YJIT (Debian's 3.1: the C YJIT), and any
# Ruby of 83-found-rubies.rb built with YJIT; and each found Ruby built with
# ZJIT (4.0+), run with --zjit --zjit-call-threshold=1, the same checks.
# Test names: yjit/<ruby>+yjit/<check>, yjit/<ruby>+zjit/<check>.
require_relative "lib/versions"
include E2E

NAME = "yjit/hot"
CHECKS = %w[yjit-on oracle snapshot record loop-lines].freeze
SNAPSHOTS = 10

exit 0 if skip_without_rbpeek(["yjit"])
unless root?
  skip("yjit", "needs root (the targets run under chroot /)")
  exit 0
end

# Whether exe runs with YJIT enabled.
def yjit?(exe)
  system(exe, "--disable-gems", "--yjit", "-e", "exit(defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? 0 : 1)",
         out: File::NULL, err: File::NULL)
end

host_exe = run(["sh", "-c", "command -v #{RUBY}"], timeout: 10).stdout.to_s.strip
found = FoundRubies.all
candidates = found.dup
host = !host_exe.empty? && FoundRubies.describe("host", host_exe)
candidates.unshift(host) if host && found.none? { |r| File.realpath(r.exe) == File.realpath(host_exe) }
# Whether exe runs with ZJIT (Ruby's second JIT, 4.0+, off by default) enabled.
def zjit?(exe)
  system(exe, "--disable-gems", "--zjit", "-e", "exit(defined?(RubyVM::ZJIT) && RubyVM::ZJIT.enabled? ? 0 : 1)",
         out: File::NULL, err: File::NULL)
end

rubies = candidates.select { |r| yjit?(r.exe) }.map { |r| r.with_flags("--yjit", "--yjit-call-threshold=1") } +
         candidates.select { |r| zjit?(r.exe) }.map { |r| r.with_flags("--zjit", "--zjit-call-threshold=1") }
unless found.any? { |r| r.origin == "debsrc:yjit" }
  skip("yjit/debsrc:yjit", "no Debian-source YJIT Ruby (run tools/build-debian-ruby.sh yjit)")
end
if rubies.empty?
  skip("yjit", "no Ruby with YJIT (host #{host_exe.inspect}; #{FoundRubies.where})")
  exit 0
end
Chroots.install_targets(rubies.first) # on the host's root: one copy for all
at_exit { FileUtils.rm_rf(Chroots::INNER) }

# spec with each thread's innermost frame, when a Ruby frame (a spinner in
# compiled code), marked as rbpeek marks a frame running JIT code: "LABEL
# [jit]" at the method's first line.
def jit_marked(spec)
  src = File.readlines(File.join(TARGETS, "yjit", "hot.rb"))
  spec.map do |t|
    f = t.frames.first
    next t unless f && f.kind == "ruby"

    name = f.label[/[#.](\w+[?!]?)\z/, 1]
    def_line = src.index { |l| l =~ /^\s*def #{Regexp.escape(name.to_s)}\b/ }
    raise "no def #{name} in yjit/hot.rb" unless def_line

    t = t.dup
    t.frames = [Expect::Frame.new(f.kind, "#{f.label} [jit]", f.path, def_line + 1), *t.frames.drop(1)]
    t
  end
end

# Record loop.rb's compiled three-line loop: problems and a note.
def loop_lines_problems(t)
  src = File.readlines(File.join(TARGETS, "yjit", "loop.rb"))
  def_line = src.index { |l| l =~ /^\s*def spin\b/ } + 1
  res = rbpeek("record", "--pid", t.pid, "-d", "2", "-f", "collapsed", "-o", "-", "--silent",
               timeout: 30, env: { "XDG_CACHE_HOME" => File.join(OUT, "xdg-loop.#{$$}") })
  return [["rbpeek record #{res.describe}"], nil] unless res.status&.zero?

  marked = Hash.new(0)
  plain = Hash.new(0)
  res.stdout.dup.force_encoding("UTF-8").each_line do |l|
    stack, _, n = l.chomp.rpartition(" ")
    leaf = stack.split(";").last.to_s
    next unless (m = leaf.match(/\ALoop#spin( \[jit\])? \(.*:(\d+)\)\z/))

    (m[1] ? marked : plain)[m[2].to_i] += n.to_i
  end
  total = marked.values.sum + plain.values.sum
  problems = []
  problems << "only #{total} samples of Loop#spin in 2 s" if total < 20
  bad = marked.keys - [def_line]
  problems << "[jit] samples at lines #{bad.inspect}, expected the method's first line #{def_line}" unless bad.empty?
  if plain.size == 1 && plain.values.first >= 10
    problems << "#{plain.values.first} unmarked samples all claim line #{plain.keys.first}: " \
                "a line the JIT last saved, not where the loop runs"
  end
  note = "Loop#spin: #{total} samples, #{marked.values.sum} marked [jit] at line #{def_line}" \
         "#{plain.empty? ? '' : ", unmarked by line #{plain.sort.to_h}"}"
  [problems, note]
end

rubies.each do |ruby|
  pre = "yjit/#{ruby.prefix}"
  spec, file = Chroots.spec(NAME, ruby)
  marked_spec = jit_marked(spec)
  use = spec
  info_file = File.join(Chroots::INNER, ".run", "yjit-info.#{ruby.key}.json")
  FileUtils.rm_f(info_file)
  Chroots.with_target(ruby, NAME, oracle: true, env: { "RBPEEK_YJIT_INFO" => info_file }) do |t|
    test("#{pre}/yjit-on") do
      info = JSON.parse(File.read(info_file))
      problems = []
      problems << "RubyVM::YJIT.enabled? is false" unless info["enabled"]
      problems << "compiling Hot#warm made no code (#{info['warm_code_bytes']}: YJIT bytes, ZJIT iseqs)" unless info["warm_code_bytes"].to_i.positive?
      report("#{pre}/yjit-on", problems, "Hot#warm compiled: #{info['warm_code_bytes']} #{ruby.flags.to_a.include?("--zjit") ? "iseqs (ZJIT)" : "bytes (YJIT)"}")
    end

    test("#{pre}/oracle") do
      oracle = t.oracle
      problems = Expect.oracle_diffs(oracle, spec)
      problems << "target runs Ruby #{oracle['ruby_version']}, expected #{ruby.version}" if oracle["ruby_version"] != ruby.version
      report("#{pre}/oracle", problems, Chroots.note(spec, file))
    end

    test("#{pre}/snapshot") do
      # rbpeek marks the spinners' frames where it knows the JIT entry: the
      # marked expectation then, checked as exactly as the other
      first = rbpeek("snapshot", "--pid", t.pid, "--json")
      use = marked_spec if first.status&.zero? && first.stdout.include?(" [jit]")
      # first, as everywhere, until the harness's "oracle" thread has ended
      problems, = Chroots.snapshot_problems(t, use, ruby)
      SNAPSHOTS.times do |i|
        res = rbpeek("snapshot", "--pid", t.pid, "--json")
        # frames exactly; a sleeping thread may be caught awake (Ruby
        # wakes one now and then to keep time when threads want the GVL)
        diffs = if res.status&.zero?
                  Expect.snapshot_diffs(json_of(res), use, mode: :live, pid: t.pid,
                                                            ruby_version: ruby.version, loose_state: true)
                else
                  ["rbpeek #{res.describe}"]
                end
        problems.concat(diffs.map { |d| "snapshot #{i + 1}: #{d}" })
        break unless problems.empty?
      end
      report("#{pre}/snapshot", problems, "#{SNAPSHOTS} snapshots, #{Chroots.note(spec, file)}" \
                                           "#{use.equal?(spec) ? '' : ', spinners marked [jit]'}")
    end

    test("#{pre}/record") do
      problems, note = Chroots.record_problems(t, use)
      report("#{pre}/record", problems, note)
    end
  end

  # the JIT's default call threshold: loop.rb warms Loop#spin up with 50
  # calls (at threshold 1, 3.3's YJIT compiles it before it has seen the
  # loop's types and leaves the code at once)
  default = ruby.dup.tap { |r| r.flags = r.flags.to_a.reject { |f| f.include?("call-threshold") } }
  Chroots.with_target(default, "yjit/loop") do |t|
    test("#{pre}/loop-lines") do
      i = rbpeek("inspect", "--pid", t.pid)
      next skip("#{pre}/loop-lines", "layout from a table (no JIT entry to tell compiled code by): " \
                                      "#{i.stdout[/^layout:.*$/]}") unless i.stdout =~ /^layout:\s+dwarf:/

      problems, note = loop_lines_problems(t)
      report("#{pre}/loop-lines", problems, note)
    end
  end
rescue StandardError, Timeout::Error => e
  fail(pre, "#{e.class}: #{e.message} (#{e.backtrace&.first})")
end
finish
