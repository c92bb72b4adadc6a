# frozen_string_literal: true
# e2e-timeout: 450 (every DWARF Ruby found: four took 84 s at load 7; CI runs at load 9-30)
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 81-dwarf-layout.rb - layouts read from a Ruby's own DWARF at run time.
# Every Ruby found where version managers install them (/opt/rubies/*,
# ~/.rubies/*, ~/.rbenv/versions/*, mise, asdf), in RBPEEK_TEST_RUBIES
# (colon-separated prefixes or bin/ruby paths) and built by
# tools/build-debian-ruby.sh (Debian's ruby3.3 source, unstripped: the DWARF
# Ruby of every machine that ran .ci/run) whose libruby (or ruby, when
# linked statically) carries DWARF is tested; a Ruby without it is skipped
# with the reason.  For each, with the test names prefixed "dwarf-X.Y.Z/"
# ("dwarf-X.Y.Z@debsrc:VARIANT/" for the Debian-source builds):
#   oracle/NAME         the expectation holds on that Ruby (its own
#                       Thread#backtrace_locations)
#   inspect             `rbpeek inspect` says the layout came from the DWARF
#                       of that file
#   table-agrees        when rbpeek has a table for the version, every field
#                       of the DWARF layout equals the table's, field by
#                       field (`inspect --fields`); a difference fails with
#                       the field's name
#   snapshot/NAME       snapshot --layout dwarf is exact for every target
#   record/threads      record --layout dwarf holds every thread's stack
#   no-table/NAME       as if rbpeek had no table for the version
#                       (RBPEEK_TEST_NO_TABLE=1: the lookup misses, constants
#                       the DWARF lacks come from another X.Y's table), the
#                       layout comes from DWARF alone and snapshots are exact
#   no-dwarf/nested     on the host's Ruby when it has no DWARF (Debian's):
#                       inspect says "layout: table" and why, snapshot
#                       --layout dwarf exits 6 with a one-line error and a hint
#   subprocesses        record --subprocesses of that Ruby forking three
#                       workers: every worker's stack (their layouts come
#                       from the process set's cache after the first)
#   debuglink/nested    libruby split the way distributions do it (objcopy
#                       --only-keep-debug, then stripped of DWARF with a
#                       .gnu_debuglink to the .debug file next to it), loaded
#                       through LD_LIBRARY_PATH: the layout comes from the
#                       .debug file and the snapshot is exact
require "tmpdir"
require_relative "lib/chroot"
include E2E

PER_TARGET = %w[oracle snapshot no-table].freeze

def names_for(pre)
  (TARGET_NAMES.flat_map { |n| PER_TARGET.map { |k| "#{k}/#{n}" } } +
   %w[inspect table-agrees record/threads debuglink/nested subprocesses]).map { |n| "#{pre}/#{n}" }
end

# Problems of a snapshot of target t (options flags, environment env)
# against spec; retried while the stacks settle.
def snapshot_problems(t, spec, version, flags: [], env: {})
  problems, = settle do
    snap = json_of(rbpeek("snapshot", "--pid", t.pid, "--json", *flags, env: env))
    Expect.snapshot_diffs(snap, spec, mode: :live, pid: t.pid, ruby_version: version)
  rescue RuntimeError => e
    [e.message]
  end
  problems
end

# A copy of libruby in a new directory, split: DWARF in NAME.debug next to
# NAME, which has none and a .gnu_debuglink to it.  Returns [dir, debug file].
def split_libruby(lib)
  dir = Dir.mktmpdir("rbpeek-debuglink", OUT)
  copy = File.join(dir, File.basename(lib))
  debug = "#{copy}.debug"
  [["objcopy", "--only-keep-debug", lib, debug],
   ["objcopy", "--strip-debug", "--add-gnu-debuglink=#{debug}", lib, copy]].each do |cmd|
    r = run(cmd, timeout: 60)
    raise "#{cmd.join(' ')} #{r.describe}" unless r.status&.zero?
  end
  # the names the dynamic linker looks for (libruby.so.3.3)
  soname = run(["objdump", "-p", copy], timeout: 30).stdout[/SONAME\s+(\S+)/, 1]
  File.symlink(File.basename(copy), File.join(dir, soname)) if soname && soname != File.basename(copy)
  [dir, debug]
end

# Three workers spinning for 8 s (record stops after 3 s; they end alone).
WORKERS = <<~RUBY
  def worker_spin(n, t) = (n.times { |i| i * i } while Time.now < t)
  def parent_wait(pids) = pids.each { |p| Process.wait(p) }
  deadline = Time.now + 8
  pids = 3.times.map { fork { worker_spin(1000, deadline) } }
  parent_wait(pids)
RUBY

# record --subprocesses: each forked worker shows up with its own stack.
def subprocesses_test(pre, bin)
  name = "#{pre}/subprocesses"
  dir = Dir.mktmpdir("rbpeek-workers", OUT)
  script = File.join(dir, "workers.rb")
  File.write(script, WORKERS)
  res = rbpeek("record", "--subprocesses", "-d", 3, "-f", "collapsed", "-o", "-", "--silent",
               "--layout", "dwarf", "--", bin, script, timeout: 30, env: { "XDG_CACHE_HOME" => dir })
  return fail(name, "rbpeek record #{res.describe}") unless res.status&.zero?

  by_pid = Hash.new { |h, k| h[k] = [] }
  res.stdout.dup.force_encoding("UTF-8").each_line do |l|
    by_pid[l[/\Aprocess (\d+)/, 1]] << l
  end
  workers = by_pid.select { |_, ls| ls.any? { |l| l.include?("Object#worker_spin (#{script}:1)") } }
  problems = []
  problems << "#{workers.size} workers with Object#worker_spin stacks, expected 3: #{by_pid.keys.inspect}" if workers.size < 3
  report(name, problems, "#{workers.size} workers, #{by_pid.size} processes")
ensure
  FileUtils.rm_rf(dir) if dir
end

def debuglink_test(pre, bin, file, version)
  name = "#{pre}/debuglink/nested"
  return skip(name, "#{file} is a static ruby, not a shared libruby") unless File.basename(file).start_with?("libruby")
  return skip(name, "needs objcopy and objdump (binutils)") unless system("command -v objcopy objdump >/dev/null 2>&1")

  dir, debug = split_libruby(file)
  spec = expectation_as_seen("nested", version)
  with_target("nested", ruby: bin, env: { "LD_LIBRARY_PATH" => dir }) do |t|
    maps = File.read("/proc/#{t.pid}/maps")
    next fail(name, "the target did not load the split copy from #{dir}") unless maps.include?(dir)

    res = rbpeek("inspect", "--pid", t.pid)
    line = res.stdout.dup.force_encoding("UTF-8")[/^layout:.*$/].to_s
    problems = []
    problems << "rbpeek inspect #{res.describe}" unless res.status&.zero?
    problems << "layout line #{line.inspect}, expected the DWARF of #{debug}" unless line.start_with?("layout:          dwarf: #{debug} ")
    problems = snapshot_problems(t, spec, version, flags: %w[--layout dwarf]) if problems.empty?
    report(name, problems, "layout from #{debug} by .gnu_debuglink")
  end
ensure
  FileUtils.rm_rf(dir) if dir
end

# [suffix of the test names, bin/ruby] of every Ruby a developer may have
# installed, of RBPEEK_TEST_RUBIES, and of tools/build-debian-ruby.sh's
# builds (lib/found_rubies.rb; root only).
def candidate_rubies
  home = Dir.home
  globs = ["/opt/rubies/*", "#{home}/.rubies/*", "#{home}/.rbenv/versions/*",
           "#{home}/.local/share/mise/installs/ruby/*", "#{home}/.asdf/installs/ruby/*"]
  entries = globs.flat_map { |g| Dir.glob(g).sort } + ENV.fetch("RBPEEK_TEST_RUBIES", "").split(":").reject(&:empty?)
  mine = entries.map { |e| ["", File.directory?(e) ? File.join(e, "bin", "ruby") : e] }
  debsrc = FoundRubies.candidates.select { |origin, _| origin.start_with?("debsrc:") }.map { |o, exe| ["@#{o}", exe] }
  (mine + debsrc).uniq { |_, bin| bin }
end

# [version, the file Ruby lives in] of a bin/ruby, or raises: the libruby it
# maps, else the executable itself (Ruby linked in statically).
def ruby_facts(bin)
  r = run([bin, "-e", 'lib = File.read("/proc/self/maps")[%r{/\S*/libruby[^/\s]*\.so\S*}]; ' \
                      'print RUBY_VERSION, " ", lib || File.readlink("/proc/self/exe")'], timeout: 30)
  raise "#{bin} #{r.describe}" unless r.status&.zero?

  r.stdout.split(" ", 2)
end

def has_dwarf?(file)
  r = run(["readelf", "-S", "-W", file], timeout: 30)
  r.status&.zero? && r.stdout.include?(" .debug_info ")
end

# {"name" => "value"} of `rbpeek inspect --fields`, and the fields marked (table).
def fields_of(pid, layout)
  res = rbpeek("inspect", "--pid", pid, "--fields", "--layout", layout)
  raise "rbpeek inspect --layout #{layout} #{res.describe}" unless res.status&.zero?

  fields = {}
  from_table = []
  res.stdout.dup.force_encoding("UTF-8").split(/^fields:\n/, 2).last.to_s.each_line do |l|
    name, value, mark = l.strip.split(" ", 3)
    fields[name] = value
    from_table << name if mark == "(table)"
  end
  [fields, from_table, res.stdout]
end

exit 0 if skip_without_rbpeek(names_for("dwarf") + ["no-dwarf/nested"])

test("no-dwarf/nested") do
  _, file = ruby_facts(RUBY)
  next skip("no-dwarf/nested", "the host's Ruby (#{file}) has DWARF") if has_dwarf?(file)

  with_target("nested") do |t|
    res = rbpeek("inspect", "--pid", t.pid)
    out = res.stdout.dup.force_encoding("UTF-8")
    problems = []
    problems << "rbpeek inspect #{res.describe}" unless res.status&.zero?
    problems << "layout line #{out[/^layout:.*$/].inspect}, expected a table" unless out.match?(/^layout:\s+table: \d/)
    problems << "no \"layout note: no DWARF ...\" line" unless out.match?(/^layout note:\s+no DWARF/)
    res = rbpeek("snapshot", "--pid", t.pid, "--layout", "dwarf")
    problems << "snapshot --layout dwarf #{res.describe}, expected exit 6" unless res.status == 6
    problems << error_format_problem(res) if res.status == 6 && error_format_problem(res)
    report("no-dwarf/nested", problems, "#{file}: table, and --layout dwarf refused")
  end
end

found = 0
candidate_rubies.each do |suffix, bin|
  unless File.executable?(bin)
    skip("dwarf-#{bin}", "#{bin} is not an executable")
    next
  end
  version, file = ruby_facts(bin)
  pre = "dwarf-#{version}#{suffix}"
  unless File.file?(file) && has_dwarf?(file)
    names_for(pre).each { |n| skip(n, "#{file} has no DWARF (.debug_info)") }
    next
  end
  found += 1

  TARGET_NAMES.each do |name|
    spec = expectation_as_seen(name, version)
    with_target(name, oracle: true, ruby: bin) do |t|
      test("#{pre}/oracle/#{name}") do
        report("#{pre}/oracle/#{name}", Expect.oracle_diffs(t.oracle, spec),
               "#{spec.sum { |s| s.frames.size }} frames")
      end

      test("#{pre}/snapshot/#{name}") do
        problems = snapshot_problems(t, spec, version, flags: %w[--layout dwarf])
        report("#{pre}/snapshot/#{name}", problems, "layout from the DWARF of #{file}")
      end

      test("#{pre}/no-table/#{name}") do
        env = { "RBPEEK_TEST_NO_TABLE" => "1" }
        res = rbpeek("inspect", "--pid", t.pid, env: env)
        out = res.stdout.dup.force_encoding("UTF-8")
        problems = []
        problems << "rbpeek inspect #{res.describe}" unless res.status&.zero?
        unless out.match?(/^layout:\s+dwarf: #{Regexp.escape(file)} \(Ruby #{Regexp.escape(version)};/)
          problems << "inspect does not say the layout came from DWARF: #{out[/^layout.*$/].inspect}"
        end
        problems = snapshot_problems(t, spec, version, env: env) if problems.empty?
        report("#{pre}/no-table/#{name}", problems, "no table: DWARF alone")
      end

      if name == "threads"
        test("#{pre}/record/threads") do
          problems, note = Chroots.record_problems(t, spec, flags: %w[--layout dwarf])
          report("#{pre}/record/threads", problems, note)
        end
      end

      next unless name == "nested"

      debuglink_test(pre, bin, file, version)
      subprocesses_test(pre, bin)

      test("#{pre}/inspect") do
        res = rbpeek("inspect", "--pid", t.pid)
        out = res.stdout.dup.force_encoding("UTF-8")
        line = out[/^layout:.*$/]
        problems = []
        problems << "rbpeek inspect #{res.describe}" unless res.status&.zero?
        problems << "layout line #{line.inspect}, expected \"layout: dwarf: #{file} ...\"" unless line&.start_with?("layout:          dwarf: #{file} ")
        note = out[/^layout note:.*differs from the.*$/]
        problems << note if note
        report("#{pre}/inspect", problems, line.to_s.sub(/\Alayout:\s+/, ""))
      end

      test("#{pre}/table-agrees") do
        tab = rbpeek("inspect", "--pid", t.pid, "--layout", "table")
        next skip("#{pre}/table-agrees", "rbpeek has no table for Ruby #{version}") unless tab.status&.zero?

        dwarf, from_table, = fields_of(t.pid, "dwarf")
        table, = fields_of(t.pid, "table")
        problems = []
        problems << "no fields listed" if dwarf.empty? || dwarf.keys != table.keys
        compared = dwarf.keys - from_table
        compared.each do |f|
          problems << "#{f}: DWARF #{dwarf[f]}, table #{table[f]}" if dwarf[f] != table[f]
        end
        table_line = tab.stdout[/^layout:.*$/].to_s.sub(/\Alayout:\s+/, "")
        report("#{pre}/table-agrees", problems,
               "#{compared.size} fields equal to the #{table_line} (#{from_table.size} constants not in " \
               "the DWARF: #{from_table.join(', ')})")
      end
    end
  end
rescue StandardError, Timeout::Error => e
  fail("dwarf-#{bin}", "#{e.class}: #{e.message} (#{e.backtrace&.first})")
end
skip("dwarf/any", "no Ruby with DWARF in #{FoundRubies.where}") if found.zero?
finish
