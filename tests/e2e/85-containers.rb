# frozen_string_literal: true
#
# 85-containers.rb - Ruby in a container: the threads target run by each
# chroot Ruby of tools/setup-rubies.sh (see 80-versions.rb) as PID 1 of its
# own PID and mount namespaces, two ways:
#   container  unshare --pid --mount --fork, proc mounted, chroot DIR
#   overlay    like Docker: the root is an overlay (the chroot under a
#              tmpfs) made the root with pivot_root, so the paths in the
#              target's maps exist only through /proc/PID/root
# Tests, prefixed "rubyX.Y/KIND/":
#   host-snapshot/threads    rbpeek on the host, by the host PID: the
#                            expected stacks; pid and thread ids as the host
#                            sees them (/proc/PID/task)
#   host-record/threads      (overlay) record from the host
#   inside-snapshot/threads  rbpeek copied into the container and run there
#                            (nsenter) by the namespace's PID 1: the same
#                            stacks, the namespace's thread ids
#   leaves-running/threads   the target still runs normally
# and once, on the newest Ruby: overlay/no-sys-ptrace/nested, rbpeek as root
# inside the container but without CAP_SYS_PTRACE against a Ruby of another
# user: exit 4, and the message says to add SYS_PTRACE.
require_relative "lib/chroot"
include E2E

T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
KINDS = %i[container overlay].freeze
PER_KIND = {
  container: %w[host-snapshot/threads inside-snapshot/threads leaves-running/threads],
  overlay: %w[host-snapshot/threads host-record/threads inside-snapshot/threads leaves-running/threads],
}.freeze
PTRACE = "overlay/no-sys-ptrace/nested"

def names_for(xy, kind = nil)
  (kind ? [kind] : KINDS).flat_map { |k| PER_KIND[k].map { |n| "ruby#{xy}/#{k}/#{n}" } }
end

all_names = Chroots::ALL.flat_map { |v| names_for(v) } + ["ruby#{Chroots::ALL.last}/#{PTRACE}"]
exit 0 if skip_without_rbpeek(all_names)
missing_tools = %w[unshare nsenter pivot_root setpriv].reject { |c| system("command -v #{c} >/dev/null 2>&1") }
unless missing_tools.empty?
  all_names.each { |n| skip(n, "needs #{missing_tools.join(', ')} (util-linux)") }
  exit 0
end

rubies, missing = Chroots.prepare
missing.each { |xy, why| names_for(xy).each { |n| skip(n, why) } }
if rubies.empty?
  skip("ruby#{Chroots::ALL.last}/#{PTRACE}", "no chroot Ruby ready")
  finish
end

# Whether this machine lets us make KIND of container; nil or why not.
def container_problem(ruby, kind)
  mnt = File.join(OUT, "probe.#{$$}")
  FileUtils.mkdir_p(mnt)
  script = "mount --make-rprivate /; mount -t proc proc #{ruby.dir}/proc"
  if kind == :overlay
    script = "mount --make-rprivate /; mount -t tmpfs tmpfs #{mnt}; mkdir #{mnt}/u #{mnt}/w #{mnt}/r; " \
             "mount -t overlay overlay -o lowerdir=#{ruby.dir},upperdir=#{mnt}/u,workdir=#{mnt}/w #{mnt}/r"
  end
  r = run(["unshare", "--pid", "--mount", "--fork", "/bin/sh", "-ec", script], timeout: 10)
  r.status&.zero? ? nil : "cannot make a #{kind} here: unshare #{r.describe}"
ensure
  Dir.rmdir(mnt) rescue nil # rubocop:disable Style/RescueModifier
end

# rbpeek copied into the chroot: the command that runs it there (paths as
# seen inside), and a note.  When the chroot's libc is too old for it
# (bullseye's 2.31), it runs with the host's loader and libraries, copied
# next to it.
# Raised when this rbpeek cannot run inside a container at all.
class CannotRunInside < StandardError; end

def inside_rbpeek(ruby)
  # The sanitizer runtime wants its own library and the host's /proc; the
  # plain build (make test) covers running inside.
  if run(["ldd", RBPEEK_BINARY]).stdout.include?("libasan")
    raise CannotRunInside, "a sanitizer build cannot run inside a container (the plain build covers it)"
  end
  inner = File.join(Chroots::INNER, ".bin")
  host = ruby.host_path(inner)
  FileUtils.mkdir_p(host)
  FileUtils.cp(RBPEEK_BINARY, File.join(host, "rbpeek"))
  direct = run(["chroot", ruby.dir, "#{inner}/rbpeek", "--version"])
  return [["#{inner}/rbpeek"], nil] if direct.status&.zero?

  libs = run(["ldd", RBPEEK_BINARY]).stdout.scan(%r{(?:=> |^\s*)(/\S+)}).flatten.uniq
  loader = libs.find { |l| File.basename(l).start_with?("ld-linux") } or
    raise "no loader in ldd #{RBPEEK_BINARY}; rbpeek in the chroot: #{direct.describe}"
  FileUtils.mkdir_p(File.join(host, "lib"))
  libs.each { |l| FileUtils.cp(l, File.join(host, "lib", File.basename(l))) }
  argv = ["#{inner}/lib/#{File.basename(loader)}", "--library-path", "#{inner}/lib", "#{inner}/rbpeek"]
  check = run(["chroot", ruby.dir, *argv, "--version"])
  raise "rbpeek does not run in the chroot: #{direct.describe}; with the host's libc: #{check.describe}" unless check.status&.zero?

  why = direct.stderr.lines.first.to_s.strip.sub(/.*(GLIBC_[0-9.]+).*/, '\1')
  [argv, "host libc copied in (the chroot's is too old: #{why} not found)"]
end

# Run rbpeek inside target's namespaces and root.
def rbpeek_inside(target, argv, *args, pre: [])
  run(["nsenter", "--target", target.pid.to_s, "--pid", "--mount", "--root", "--wd", "--",
       *pre, *argv, *args.map(&:to_s)])
end

rubies.each do |ruby|
  pre = "ruby#{ruby.xy}"
  spec, file = Chroots.spec("threads", ruby)
  inside_skip = false
  begin
    inside, inside_note = inside_rbpeek(ruby)
  rescue CannotRunInside => e
    inside = nil
    inside_note = e.message
    inside_skip = true
  rescue RuntimeError => e
    inside = nil
    inside_note = e.message
  end

  KINDS.each do |kind|
    if (why = container_problem(ruby, kind))
      names_for(ruby.xy, kind).each { |n| skip(n, why) }
      next
    end
    Chroots.with_target(ruby, "threads", how: kind) do |t|
      test("#{pre}/#{kind}/host-snapshot/threads") do
        problems, tries, first = Chroots.snapshot_problems(t, spec, ruby)
        problems << "the target is PID #{t.inner_pid} in its namespace, expected 1" if t.inner_pid != 1
        report("#{pre}/#{kind}/host-snapshot/threads", problems,
               "host PID #{t.pid}, #{Chroots.note(spec, file, tries, first)}")
      end

      if kind == :overlay
        test("#{pre}/#{kind}/host-record/threads") do
          problems, note = Chroots.record_problems(t, spec)
          report("#{pre}/#{kind}/host-record/threads", problems, note)
        end
      end

      name = "#{pre}/#{kind}/inside-snapshot/threads"
      test(name) do
        next skip(name, inside_note) if inside_skip
        next fail(name, "rbpeek cannot run in the chroot: #{inside_note}") unless inside

        problems, tries, first = settle do
          res = rbpeek_inside(t, inside, "snapshot", "--pid", t.inner_pid, "--json")
          next ["rbpeek in the container: #{res.describe}"] if res.timed_out || res.signal

          snap = json_of(res)
          Expect.snapshot_diffs(snap, spec, mode: :live, pid: t.inner_pid, ruby_version: ruby.version) +
            Chroots.tid_problems(t, snap, pid: t.inner_pid, ids: Chroots.ns_tids(t))
        rescue RuntimeError => e
          [e.message]
        end
        note = "PID #{t.inner_pid} in the container, #{Chroots.note(spec, file, tries, first)}"
        note += "; #{inside_note}" if inside_note
        report(name, problems, note)
      end

      test("#{pre}/#{kind}/leaves-running/threads") do
        problem = t.liveness_problem(spinner_tid: t.spinner_tid(spec))
        report("#{pre}/#{kind}/leaves-running/threads", [problem].compact)
      end
    end
  rescue StandardError, Timeout::Error => e
    fail("#{pre}/#{kind}/threads", "#{e.class}: #{e.message} (#{e.backtrace&.first})")
  end

  next unless ruby == rubies.last

  name = "#{pre}/#{PTRACE}"
  test(name) do
    next skip(name, "rbpeek cannot run in the chroot: #{inside_note}") unless inside
    why = container_problem(ruby, :overlay)
    next skip(name, why) if why

    Chroots.with_target(ruby, "nested", how: :overlay, user: 65_534) do |t|
      drop = ["setpriv", "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace", "--"]
      res = rbpeek_inside(t, inside, "snapshot", "--pid", t.inner_pid, pre: drop)
      err = res.stderr.dup.force_encoding("UTF-8")
      problems = []
      problems << "#{res.describe}, expected exit 4" if res.status != 4
      problems << error_format_problem(res) if error_format_problem(res)
      problems << "message does not mention SYS_PTRACE: #{err.inspect}" unless err.include?("SYS_PTRACE")
      # the same command with CAP_SYS_PTRACE works: the refusal was the point
      ok_res = rbpeek_inside(t, inside, "snapshot", "--pid", t.inner_pid)
      problems << "with CAP_SYS_PTRACE: #{ok_res.describe}" unless ok_res.status&.zero?
      if (p = t.liveness_problem)
        problems << "target afterwards: #{p}"
      end
      report(name, problems, "exit 4: #{err.lines.first.to_s.strip}")
    end
  end
end
puts "# 85-containers: #{(Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0).round(1)} s" if ENV["RBPEEK_TEST_TIMES"]
finish
