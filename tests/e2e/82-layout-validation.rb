# frozen_string_literal: true
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 82-layout-validation.rb - a layout table is validated against the process
# before anything is read with it (src/ruby/validate.c), so a wrong table
# is refused (exit 6) instead of giving wrong names and lines, and a Ruby
# newer than every table is read with the nearest older one only when that
# one fits, with one warning.  All on real processes:
#   layout/forced-other-versions   the host Ruby read with every other
#                                  version's table (--force-version): each is
#                                  refused, or gives exactly the right stacks
#   layout/unknown-version-refused the host Ruby with a copy of its libruby
#                                  whose ruby_version reads "4.9.x" (newer
#                                  than every table): the nearest older
#                                  table does not fit: exit 6, and why
#   layout/unknown-version-assumed a Ruby of the newest table's X.Y (found in
#                                  /opt/rubies/* or $RBPEEK_TEST_RUBIES) with
#                                  its libruby's version patched one minor
#                                  up: snapshot and record work, with one
#                                  warning naming the assumption
#   layout/unknown-version-assumed-stripped
#                                  the same on a stripped distribution build
#                                  (no DWARF, no VM symbol): the newest
#                                  Debian chroot Ruby whose next minor has no
#                                  table (3.4 reading as 3.5), its libruby
#                                  patched inside the chroot; the default
#                                  --layout auto (what a user runs)
#   layout/bp-check-refused        Ruby 3.3 built with -DVM_DEBUG_BP_CHECK=1
#                                  (tools/build-debian-ruby.sh bpcheck; every
#                                  control frame one word longer), stripped:
#                                  refused (exit 6)
#   layout/bp-check-dwarf-exact    the same build unstripped (its DWARF): the
#                                  layout from the DWARF (cfp.size 64, not
#                                  the table's 56) and exactly the right stack
require_relative "lib/e2e"
require_relative "lib/chroot"
require "tmpdir"
include E2E

NAMES = %w[layout/forced-other-versions layout/unknown-version-refused
           layout/unknown-version-assumed layout/unknown-version-assumed-stripped
           layout/bp-check-refused layout/bp-check-dwarf-exact].freeze
exit 0 if skip_without_rbpeek(NAMES)

TMP = Dir.mktmpdir("rbpeek-82-")
at_exit { FileUtils.rm_rf(TMP) }

# [vaddr, size] of the dynamic symbol ruby_version, and the file offset of vaddr.
def version_offset(lib)
  syms = run(["readelf", "--dyn-syms", "-W", lib]).stdout
  sym = syms.lines.map(&:split).find { |f| f[7] == "ruby_version" && f[3] == "OBJECT" }
  raise "#{lib}: no ruby_version symbol" unless sym

  vaddr = sym[1].to_i(16)
  size = sym[2].to_i
  run(["readelf", "-lW", lib]).stdout.each_line do |l|
    f = l.split
    next unless f[0] == "LOAD"

    off, va, filesz = f[1].to_i(16), f[2].to_i(16), f[4].to_i(16)
    return [off + vaddr - va, size] if vaddr >= va && vaddr < va + filesz
  end
  raise "#{lib}: ruby_version not in a loaded segment"
end

# A copy of libruby (under its soname, in a new directory under parent)
# whose ruby_version reads `version` (same length as the original); returns
# the directory.
def patched_libruby(lib, soname, version, parent: TMP)
  off, size = version_offset(lib)
  bytes = File.binread(lib)
  old = bytes[off, size].delete("\0")
  raise "version #{old.inspect} and #{version.inspect} differ in length" if old.size != version.size

  dir = Dir.mktmpdir("lib", parent)
  bytes[off, version.size] = version
  File.binwrite(File.join(dir, soname), bytes)
  dir
end

# The libruby a ruby executable loads: [path, soname], or nil (static).
def libruby_of(ruby)
  out = run(["ldd", ruby]).stdout
  m = out.match(/^\s*(libruby\S*)\s+=>\s+(\S+)/)
  m && [File.realpath(m[2]), m[1]]
end

# A target run by `ruby` with env; yields it ready.  --disable-gems: RubyGems'
# rbconfig.rb refuses a RUBY_VERSION (the patched ruby_version) that is not
# its own.
def with_ruby_target(ruby, name, env: {})
  ready = File.join(TMP, "#{name}.#{rand(1 << 30)}.ready")
  log = "#{ready}.log"
  pid = Process.spawn(env.merge("RBPEEK_READY" => ready), ruby, "--disable-gems", "#{name}.rb",
                      chdir: TARGETS, in: "/dev/null", out: log, err: [:child, :out])
  E2E.register_pid(pid)
  deadline = Time.now + 60
  until File.exist?(ready)
    raise "target exited: #{File.read(log)[0, 400].inspect}" if Process.waitpid(pid, Process::WNOHANG)
    raise "target not ready in 60 s" if Time.now > deadline

    sleep 0.05
  end
  sleep 0.2
  yield pid
ensure
  E2E.kill_pid(pid) if pid
end

def version_of(ruby, env = {})
  run([ruby, "-e", "print RUBY_VERSION"], env: env).stdout.strip
end

def snapshot_problems(pid, spec, version, flags = [])
  problems, = settle do
    r = rbpeek("snapshot", "--pid", pid, "--json", *flags)
    next ["exit #{r.status}: #{r.stderr.strip}"] unless r.status&.zero?

    Expect.snapshot_diffs(json_of(r), spec, mode: :live, pid: pid, ruby_version: version,
                                            loose_state: true)
  end
  problems
end

# The tables rbpeek knows, one version per X.Y (from the error's hint).
def known_versions
  r = rbpeek("snapshot", "--pid", Process.pid, "--force-version", "0.0.0")
  list = r.stderr[/supported versions: ([0-9., ]+)/, 1]
  raise "no list of supported versions in #{r.stderr.inspect}" unless list

  list.split(", ").map(&:strip)
end

HOST_RUBY = RUBY

test("layout/forced-other-versions") do
  own = version_of(HOST_RUBY)
  spec = expectation_as_seen("threads", own)
  refused = []
  fine = []
  problems = []
  with_ruby_target(HOST_RUBY, "threads") do |pid|
    known_versions.each do |xy|
      next if own.start_with?("#{xy}.")

      r = rbpeek("snapshot", "--pid", pid, "--json", "--force-version", "#{xy}.0")
      if r.status == 6
        refused << xy
        problems << "#{xy}: #{error_format_problem(r)}" if error_format_problem(r)
        problems << "#{xy}: no \"does not fit\" in #{r.stderr.inspect}" unless r.stderr.include?("does not fit")
      elsif r.status&.zero?
        # a table that fits must give exactly the right stacks
        d = Expect.snapshot_diffs(json_of(r), spec, mode: :live, pid: pid, ruby_version: own, loose_state: true)
        d.empty? ? fine << xy : problems << "#{xy}'s table was accepted and gave wrong stacks: #{d.first(3).join('; ')}"
      else
        problems << "--force-version #{xy}.0: #{r.describe}"
      end
    end
  end
  problems << "no table refused" if refused.empty?
  report("layout/forced-other-versions", problems,
         "Ruby #{own}: refused #{refused.join(' ')}#{fine.empty? ? '' : "; fit exactly: #{fine.join(' ')}"}")
end

test("layout/unknown-version-refused") do
  host = HOST_RUBY.include?("/") ? HOST_RUBY : ENV.fetch("PATH", "").split(":").map { |d| File.join(d, HOST_RUBY) }.find { |f| File.executable?(f) }
  lib, soname = host && libruby_of(host)
  next skip("layout/unknown-version-refused", "#{HOST_RUBY} has no libruby.so") unless lib

  own = version_of(HOST_RUBY)
  fake = own.sub(/\A\d+\.\d+/, "4.9")
  next skip("layout/unknown-version-refused", "cannot make a #{own.size}-byte version") if fake.size != own.size

  dir = patched_libruby(lib, soname, fake)
  with_ruby_target(HOST_RUBY, "threads", env: { "LD_LIBRARY_PATH" => dir }) do |pid|
    maps = File.read("/proc/#{pid}/maps")
    next fail("layout/unknown-version-refused", "target did not load #{dir}") unless maps.include?(dir)

    r = rbpeek("snapshot", "--pid", pid)
    problems = []
    problems << "exit #{r.status.inspect}, expected 6: #{r.stderr.strip}" unless r.status == 6
    problems << error_format_problem(r) if error_format_problem(r)
    unless r.stderr =~ /no layout for Ruby #{Regexp.escape(fake)}, and the nearest older one \(Ruby [0-9.]+\) does not fit/
      problems << "stderr does not say which layout did not fit: #{r.stderr.inspect}"
    end
    problems << "stdout not empty: #{r.stdout[0, 200].inspect}" unless r.stdout.empty?
    report("layout/unknown-version-refused", problems, "Ruby #{own} reading as #{fake}: #{r.stderr.lines.first&.strip}")
  end
end

# Rubies with a libruby.so whose X.Y is the newest table's.
def newest_table_rubies
  newest = known_versions.max_by { |v| Gem::Version.new(v) }
  cands = Dir.glob("/opt/rubies/*/bin/ruby") + ENV.fetch("RBPEEK_TEST_RUBIES", "").split(":").map do |p|
    File.directory?(p) ? File.join(p, "bin", "ruby") : p
  end
  found = cands.select { |r| File.executable?(r) }.select do |r|
    version_of(r).start_with?("#{newest}.") && libruby_of(r)
  end
  [newest, found]
end

# What must hold of a process whose Ruby reads as `fake`, newer than every
# table: snapshot and record work with exactly one warning naming the
# assumption, and the snapshot is exact (spec).
def assumed_problems(pid, fake, spec, flags)
  problems = []
  r = rbpeek("snapshot", "--pid", pid, "--json", *flags)
  warn_re = /\Arbpeek: warning: no layout for Ruby #{Regexp.escape(fake)}; using Ruby [0-9.]+'s, the nearest older one/
  warnings = r.stderr.lines.grep(/warning/)
  problems << "snapshot: #{r.describe}" unless r.status&.zero?
  problems << "snapshot: warnings #{warnings.inspect}, expected one naming the assumption" unless
    warnings.size == 1 && warnings[0] =~ warn_re
  problems.concat(snapshot_problems(pid, spec, fake, flags)) if problems.empty?
  out = File.join(TMP, "rec.#{pid}.collapsed")
  rec = rbpeek("record", "--pid", pid, "-d", "1", "-f", "collapsed", "-o", out, *flags, "--idle",
               timeout: 30) # --idle: the parked workers are what is checked
  problems << "record: #{rec.describe}" unless rec.status&.zero?
  problems << "record: no warning: #{rec.stderr.inspect}" unless rec.stderr =~ /^rbpeek: warning: no layout for Ruby/
  if rec.status&.zero?
    text = File.read(out)
    %w[Worker#park Worker#spin Kernel#sleep].each do |l|
      problems << "record: no stack with #{l}" unless text.include?(l)
    end
  end
  problems
end

# The version one minor up (same length), or nil.
def next_minor(version)
  major, minor = version.split(".").map(&:to_i)
  fake = version.sub(/\A\d+\.\d+/, "#{major}.#{minor + 1}")
  fake.size == version.size ? fake : nil
end

test("layout/unknown-version-assumed") do
  newest, rubies = newest_table_rubies
  if rubies.empty?
    next skip("layout/unknown-version-assumed",
              "no Ruby #{newest} with libruby.so in /opt/rubies/* or RBPEEK_TEST_RUBIES")
  end

  ruby = rubies.first
  own = version_of(ruby)
  fake = next_minor(own)
  next skip("layout/unknown-version-assumed", "cannot make a #{own.size}-byte version") unless fake

  lib, soname = libruby_of(ruby)
  dir = patched_libruby(lib, soname, fake)
  spec = expectation_as_seen("threads", own)
  problems = []
  with_ruby_target(ruby, "threads", env: { "LD_LIBRARY_PATH" => dir }) do |pid|
    next problems << "target did not load #{dir}" unless File.read("/proc/#{pid}/maps").include?(dir)

    # --layout table: a hand-built Ruby keeps its DWARF, which would give the
    # layout outright; what is tested is the table fallback of a stripped one
    problems.concat(assumed_problems(pid, fake, spec, %w[--layout table]))
  end
  report("layout/unknown-version-assumed", problems, "Ruby #{own} (#{ruby}) reading as #{fake}")
end

test("layout/unknown-version-assumed-stripped") do
  name = "layout/unknown-version-assumed-stripped"
  next skip(name, "needs root (chroot)") unless root?

  rubies, missing = Chroots.prepare
  known = known_versions
  ruby = rubies.select { |r| (f = next_minor(r.version)) && !known.include?(f[/\A\d+\.\d+/]) && r.libruby }
               .max_by { |r| Gem::Version.new(r.version) }
  next skip(name, "no Debian chroot Ruby whose next minor has no table (ready: #{rubies.map(&:xy).join(' ')}; " \
                  "missing: #{missing.keys.join(' ')})") unless ruby

  fake = next_minor(ruby.version)
  soname = run(["readelf", "-dW", ruby.libruby]).stdout[/\(SONAME\).*\[(\S+)\]/, 1]
  next fail(name, "no SONAME in #{ruby.libruby}") unless soname

  inner_dir = patched_libruby(ruby.libruby, soname, fake, parent: ruby.host_path(Chroots::INNER))
  inner = inner_dir.delete_prefix(ruby.dir.chomp("/"))
  spec, = Chroots.spec("threads", ruby)
  problems = []
  # RUBYOPT=--disable-gems: RubyGems refuses a RUBY_VERSION not its own
  Chroots.with_target(ruby, "threads", env: { "LD_LIBRARY_PATH" => inner, "RUBYOPT" => "--disable-gems" }) do |t|
    next problems << "target did not load #{inner}" unless File.read("/proc/#{t.pid}/maps").include?(inner)

    i = rbpeek("inspect", "--pid", t.pid)
    problems << "inspect: #{i.describe}" unless i.status&.zero?
    problems << "inspect: not a table layout: #{i.stdout[/^layout:.*$/].inspect}" unless i.stdout =~ /^layout:\s+table:/
    problems.concat(assumed_problems(t.pid, fake, spec, []))
  end
  report(name, problems, "Debian's Ruby #{ruby.version} (stripped) reading as #{fake}")
end

# The -DVM_DEBUG_BP_CHECK=1 miniruby (stripped, or with its DWARF) running
# a known stack; yields (pid, expected snapshot lines) or skips.
def with_bp_check_ruby(name, binary)
  dir = File.join(ENV.fetch("RBPEEK_DEBSRC", "/var/cache/rbpeek/debsrc"), "bpcheck")
  mini = File.join(dir, binary)
  unless File.exist?(File.join(dir, "READY")) && File.executable?(mini)
    return skip(name, "no #{mini} (tools/build-debian-ruby.sh bpcheck builds it)")
  end

  script = File.join(TMP, "bp-#{binary}.rb")
  ready = File.join(TMP, "bp-#{binary}.ready")
  File.write(script, <<~RUBY)
    class Deep
      def a(n) = n.zero? ? park : a(n - 1)
      def park
        File.write(#{ready.inspect}, Process.pid.to_s)
        sleep
      end
    end
    Deep.new.a(5)
  RUBY
  expected = ["Kernel#sleep (#{script}:5)", "Deep#park (#{script}:5)",
              *Array.new(6) { "Deep#a (#{script}:2)" }, "<main> (#{script}:8)"]
  pid = Process.spawn(mini, script, in: "/dev/null", out: File::NULL, err: File::NULL)
  E2E.register_pid(pid)
  begin
    deadline = Time.now + 20
    sleep 0.05 until File.exist?(ready) || Time.now > deadline
    return fail(name, "miniruby target not ready") unless File.exist?(ready)

    yield pid, expected
  ensure
    E2E.kill_pid(pid)
  end
end

test("layout/bp-check-refused") do
  with_bp_check_ruby("layout/bp-check-refused", "miniruby.stripped") do |pid, _|
    r = rbpeek("snapshot", "--pid", pid)
    problems = []
    problems << "exit #{r.status.inspect}, expected 6 (refused): #{r.stderr.strip} #{r.stdout[0, 300]}" unless r.status == 6
    problems << error_format_problem(r) if r.status == 6 && error_format_problem(r)
    report("layout/bp-check-refused", problems, r.stderr.lines.first&.strip)
  end
end

test("layout/bp-check-dwarf-exact") do
  with_bp_check_ruby("layout/bp-check-dwarf-exact", "miniruby") do |pid, expected|
    problems = []
    i = rbpeek("inspect", "--fields", "--pid", pid)
    problems << "inspect: exit #{i.status.inspect}: #{i.stderr.strip}" unless i.status&.zero?
    problems << "the layout is not from the DWARF: #{i.stdout[/^layout:.*$/].inspect}" unless i.stdout =~ /^layout:\s+dwarf:/
    problems << "cfp.size is not 64 (56 + bp_check): #{i.stdout[/^\s*cfp\.size.*$/].inspect}" unless i.stdout =~ /^\s*cfp\.size\s+64$/
    r = rbpeek("snapshot", "--pid", pid)
    problems << "snapshot: exit #{r.status.inspect}: #{r.stderr.strip}" unless r.status&.zero?
    got = r.stdout.lines.map(&:strip).select { |l| l.end_with?(")") && !l.start_with?("Process", "Thread") }
    problems << "stack #{got.inspect}, expected #{expected.inspect}" unless got == expected
    report("layout/bp-check-dwarf-exact", problems, "#{got.size} frames, layout from the DWARF (cfp.size 64)")
  end
end

finish
