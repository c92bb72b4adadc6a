# frozen_string_literal: true
#
# chroot.rb - helpers for the end-to-end tests that run the test targets
# under other Rubies (80-versions.rb) and in containers (85-containers.rb).
#
# The Rubies live in the Debian chroots that tools/setup-rubies.sh makes and
# caches.  Chroots.prepare runs it (it is idempotent), copies tests/targets
# into every ready chroot as /tmp/rbpeek-targets.PID (removed at exit), and
# returns the ready Rubies.  Chroots::Target starts a target there, either
# plainly chroot'ed (:chroot, sharing our PID and mount namespaces) or in a
# container of its own (new PID and mount namespaces, see Target#argv).
#
# The expectations are the same tests/targets/NAME.expect files (or
# NAME@X.Y.expect for Ruby X.Y), with paths as the target sees them.

require_relative "e2e"
require_relative "found_rubies"

module Chroots
  SETUP = File.join(E2E::ROOT, "tools", "setup-rubies.sh")
  # The versions setup-rubies.sh knows, read from its "all=(...)" line.
  ALL = (File.read(SETUP)[/^all=\(([^)]*)\)/, 1] || "").split.freeze
  INNER = "/tmp/rbpeek-targets.#{$$}" # the targets, as the chroot sees them

  # xy "3.4", dir the chroot, version "3.4.11" (what the chroot's ruby says)
  Ruby = Struct.new(:xy, :dir, :version) do
    def bin
      "ruby#{xy}"
    end

    # The prefix of this Ruby's test names, and its key in file names.
    def prefix
      "ruby#{xy}"
    end
    alias_method :key, :prefix

    def host_path(inner)
      File.join(dir, inner)
    end

    # The libruby the chroot's ruby uses (host path), or nil: Debian's.
    def libruby
      Dir.glob(File.join(dir, "usr/lib/*/libruby-#{xy}.so.*")).min
    end

    def exports_vm_symbol?
      FoundRubies.vm_symbol_in?(libruby)
    end
  end

  module_function

  # The chroots that are ready, with the targets copied into each.  They are
  # made before the tests run (make test: tools/setup-tests.sh), never here
  # under a test's time limit.  Returns [ready Rubies, {xy => why not ready}].
  def prepare
    return [[], ALL.to_h { |v| [v, "needs root (debootstrap, chroot)"] }] unless E2E.root?

    problem = "not made before the tests (tools/setup-tests.sh finish runs tools/setup-rubies.sh --dev; see its warning)"
    list = E2E.run([SETUP, "--list"], timeout: 10)
    rubies = list.stdout.lines.map do |line|
      xy, dir = line.split
      Ruby.new(xy, dir, File.read(File.join(dir, "RUBY_VERSION")).strip)
    end
    missing = (ALL - rubies.map(&:xy)).to_h { |v| [v, problem] }
    rubies.each { |r| install_targets(r) }
    at_exit { rubies.each { |r| FileUtils.rm_rf(r.host_path(INNER)) } }
    [rubies, missing]
  end

  # The version managers' Rubies of this machine (FoundRubies.all), with the
  # targets copied to INNER on the host.  Returns [Rubies, where it looked].
  def found
    rubies = FoundRubies.all
    unless rubies.empty?
      install_targets(rubies.first) # one copy: they share the root /
      at_exit { FileUtils.rm_rf(INNER) }
    end
    [rubies, FoundRubies.where]
  end

  # A check over every ready chroot Ruby and every found one: yields each (the block returns its
  # note, or an array of notes), adds a note for each version not run and a
  # problem when none is ready; returns the notes joined.
  # The version managers' Rubies (found) run after the chroots' ones.
  def each_ruby(probs)
    rubies, missing = prepare
    rubies += found.first if E2E.root?
    notes = rubies.flat_map { |ruby| Array(yield(ruby)) }
    missing.each { |xy, why| notes << "#{xy} not run (#{why})" }
    probs << "no chroot Ruby is ready: #{missing.inspect}" if rubies.empty?
    notes.compact.join("; ")
  end

  # tests/targets (scripts, support/, lib/, the non-ASCII directory; not the
  # .expect files) into the chroot, plus a directory for ready files.
  def install_targets(ruby)
    dst = ruby.host_path(INNER)
    FileUtils.rm_rf(dst)
    FileUtils.mkdir_p(dst)
    Dir.children(E2E::TARGETS).reject { |c| c.end_with?(".expect") }.each do |c|
      FileUtils.cp_r(File.join(E2E::TARGETS, c), dst)
    end
    FileUtils.mkdir_p(File.join(dst, ".run"))
    File.chmod(0o1777, File.join(dst, ".run")) # targets run as nobody write here too
  end

  # The expectation of target NAME under this Ruby, paths as the target sees
  # them: INNER/... for the targets' files, <internal:...> as it is.
  def spec(name, ruby)
    base = File.realpath(E2E::TARGETS)
    file = Expect.file_for(E2E::TARGETS, name, ruby.version)
    specs = Expect.load(file, E2E::TARGETS)
    specs.each do |t|
      seen = {}
      t.frames = t.frames.map do |f|
        seen[f] ||= begin
          rel = f.path.delete_prefix("#{base}/")
          Expect::Frame.new(f.kind, f.label, rel.start_with?("<") ? rel : File.join(INNER, rel), f.line)
        end
      end
    end
    [specs, File.basename(file)]
  end

  # Thread ids checked against /proc: the main thread's tid is the PID, every
  # tid is a task of the process, a named thread has its name as comm.
  # `ids` maps the host's task ids to the ids rbpeek should report (the
  # identity from the host; the namespace's ids from inside a container).
  def tid_problems(target, snap, pid: target.pid, ids: nil)
    ids ||= target.tasks.to_h { |t| [t, t] }
    by_id = ids.invert
    problems = []
    problems << "pid #{snap['pid'].inspect}, expected #{pid}" if snap["pid"] != pid
    snap["threads"].each_with_index do |th, i|
      tid = th["tid"]
      who = "thread #{i} #{th['name'].inspect}"
      if th["main"] && tid != pid
        problems << "#{who}: main thread tid #{tid}, expected #{pid}"
      elsif !by_id.key?(tid)
        problems << "#{who}: tid #{tid} is not one of the process's threads #{ids.values.sort.inspect}"
      elsif !th["main"] && (comm = target.comm(by_id[tid]))
        want = th["name"].to_s.b[0, 15]
        problems << "#{who}: tid #{tid} has comm #{comm.inspect}, expected #{want.inspect}" if comm != want
      end
    end
    problems
  end

  # {host tid => tid in the innermost PID namespace} for the target's tasks.
  def ns_tids(target)
    target.tasks.to_h do |tid|
      ns = File.read("/proc/#{target.pid}/task/#{tid}/status")[/^NSpid:\s+(.*)$/, 1].to_s.split.last
      [tid, ns.to_i]
    rescue Errno::ENOENT
      [tid, nil]
    end
  end

  # A test target run by a chroot's Ruby.
  #   how: :chroot     chroot DIR ruby (our namespaces; maps show our paths)
  #        :container  unshare --pid --mount --fork, proc mounted in the
  #                    chroot, chroot DIR ruby: the target is PID 1 of its
  #                    own PID namespace
  #        :overlay    like a Docker container: the same, but the root is
  #                    an overlay (the chroot read-only under a tmpfs) made
  #                    the namespace's root with pivot_root, so the paths in
  #                    its maps exist only through /proc/PID/root
  #   user: run the target as this uid (nil: root)
  class Target < E2E::Target
    attr_reader :ruby, :how, :child

    # name: a target of tests/targets ("threads", "yjit/hot"); env: more
    # environment for it
    def initialize(ruby, name, how: :chroot, oracle: false, user: nil, env: {})
      @ruby = ruby
      @name = name
      @how = how
      run = File.join(INNER, ".run")
      tag = name.tr("/", "-")
      @inner_ready = File.join(run, "#{how}-#{tag}.ready")
      @inner_oracle = oracle ? File.join(run, "#{how}-#{tag}.oracle.json") : nil
      [@inner_ready, "#{@inner_ready}.pong", @inner_oracle].compact.each do |f|
        FileUtils.rm_f(ruby.host_path(f))
      end
      env = env.merge("RBPEEK_READY" => @inner_ready, "LANG" => "C.UTF-8", "LC_ALL" => nil)
      env["RBPEEK_ORACLE"] = @inner_oracle if oracle
      @log = File.join(E2E::OUT, "#{ruby.key}-#{how}-#{tag}.#{$$}.log")
      @mnt = how == :overlay ? File.join(E2E::OUT, "overlay.#{$$}.#{ruby.key}.#{tag}") : nil
      FileUtils.mkdir_p(@mnt) if @mnt
      @child = Process.spawn(env, *argv(user), in: "/dev/null", out: @log, err: [:child, :out], pgroup: true)
      E2E.register_pid(@child)
      @pid = how == :chroot ? @child : nil
      @ready_file = @oracle_file = nil
    end

    # The command that starts the target.
    def argv(user)
      spec = user ? ["--userspec=#{user}:#{user}"] : []
      inner = "cd #{INNER} && exec #{@ruby.bin} #{@name}.rb"
      dir = @ruby.dir
      case @how
      when :chroot
        ["chroot", *spec, dir, "/bin/sh", "-c", inner]
      when :container
        ["unshare", "--pid", "--mount", "--fork", "--kill-child", "/bin/sh", "-ec",
         "mount --make-rprivate /; mount -t proc proc #{dir}/proc; " \
         "exec chroot #{spec.join(' ')} #{dir} /bin/sh -c '#{inner}'"]
      when :overlay
        m = @mnt
        ["unshare", "--pid", "--mount", "--fork", "--kill-child", "/bin/sh", "-ec",
         "mount --make-rprivate /; mount -t tmpfs tmpfs #{m}; mkdir #{m}/upper #{m}/work #{m}/root; " \
         "mount -t overlay overlay -o lowerdir=#{dir},upperdir=#{m}/upper,workdir=#{m}/work #{m}/root; " \
         "mount -t proc proc #{m}/root/proc; mkdir #{m}/root/.old; cd #{m}/root; pivot_root . .old; " \
         "umount -l /.old; rmdir /.old; exec chroot #{spec.join(' ')} / /bin/sh -c '#{inner}'"]
      else raise ArgumentError, "how: #{@how.inspect}"
      end
    end

    def exited?
      !Process.waitpid(@child, Process::WNOHANG).nil?
    rescue Errno::ECHILD
      true
    end

    # The PID (as the host sees it) of the Ruby in a container: the child
    # of unshare.
    def find_pid
      kids = File.read("/proc/#{@child}/task/#{@child}/children").split.map(&:to_i)
      kids.first
    rescue Errno::ENOENT
      nil
    end

    def wait_ready(timeout: 30)
      deadline = Time.now + timeout
      loop do
        raise "target #{@ruby.key}/#{@name} exited before it was ready: #{log_text}" if exited?
        raise "target #{@ruby.key}/#{@name} not ready after #{timeout} s: #{log_text}" if Time.now > deadline

        if (@pid ||= find_pid)
          # Through the target's root: inside an overlay it exists nowhere else.
          root = "/proc/#{@pid}/root"
          @ready_file = root + @inner_ready
          @oracle_file = @inner_oracle && root + @inner_oracle
          break if File.exist?(@ready_file)
        end
        sleep 0.02
      end
      E2E.register_pid(@pid) if @pid != @child
      sleep 0.2 # the last thread parks right after signalling
      self
    end

    # The PID the target has in its own namespace (1 in a container).
    def inner_pid
      File.read(@ready_file).to_i
    end

    def log_text
      File.exist?(@log) ? File.read(@log)[0, 500].inspect : "(no log)"
    end

    # As E2E::Target#liveness_problem, for a target that may not be our child.
    def liveness_problem(spinner_tid: nil)
      return "target exited" if exited? || !File.exist?("/proc/#{@pid}")

      stopped = tasks.select { |tid| %w[T t].include?(task_stat(tid)&.first) }
      return "threads #{stopped.inspect} left stopped (state T/t)" unless stopped.empty?

      if spinner_tid
        before = task_stat(spinner_tid)
        sleep 0.3
        after = task_stat(spinner_tid)
        return "spinning thread #{spinner_tid} is gone" unless before && after
        return "spinning thread #{spinner_tid} no longer runs (cpu #{before[1]} -> #{after[1]} ticks)" if after[1] <= before[1]
      end
      pong = "#{@ready_file}.pong"
      FileUtils.rm_f(pong)
      Process.kill("USR1", @pid)
      deadline = Time.now + 5
      sleep 0.02 until File.exist?(pong) || Time.now > deadline
      File.exist?(pong) ? nil : "no answer to SIGUSR1 within 5 s"
    end

    # The thread id of the spinning thread of the spec, if any.
    def spinner_tid(spec)
      s = spec.find { |x| x.state == "running" } or return nil
      tasks.find { |x| comm(x) == s.name.b[0, 15] }
    end

    def kill
      [@ready_file, "#{@ready_file}.pong", @oracle_file].compact.each { |f| FileUtils.rm_f(f) } if @pid && !exited?
      begin
        Process.kill("KILL", @pid) if @pid && @pid != @child
      rescue Errno::ESRCH
        nil
      end
      E2E.kill_pid(@child)
      FileUtils.rm_f(@log)
      return unless @mnt

      # the tmpfs went with the mount namespace; give it a moment
      20.times do
        Dir.rmdir(@mnt)
        break
      rescue SystemCallError
        sleep 0.05
      end
    end
  end

  # Start `ruby.bin SCRIPT ARGS...` in the chroot's copy of tests/targets/DIR
  # with $RBPEEK_READY set, and wait (30 s at most) until the script writes
  # that file; returns the pid (registered for killing at exit).
  def spawn_ready(ruby, dir, script, *args, name:)
    ready = File.join(INNER, ".run", "#{name}.ready")
    FileUtils.rm_f(ruby.host_path(ready))
    pid = Process.spawn({ "RBPEEK_READY" => ready }, "chroot", ruby.dir, "/bin/sh", "-c",
                        "cd #{File.join(INNER, dir)} && exec #{[ruby.bin, script, *args].join(' ')}",
                        in: "/dev/null", out: "/dev/null", err: "/dev/null")
    E2E.register_pid(pid)
    deadline = Time.now + 30
    sleep 0.02 until File.exist?(ruby.host_path(ready)) || Time.now > deadline
    sleep 0.2
    pid
  end

  def with_target(ruby, name, **kw)
    t = Target.new(ruby, name, **kw)
    begin
      yield t.wait_ready
    ensure
      t.kill
    end
  end

  # Thread states of a snapshot taken by rbpeek at a moment a blocked thread
  # may be waking up: retried like E2E.settle.
  def snapshot_problems(target, spec, ruby, flags: [], env: {}, mode: :live)
    E2E.settle do
      res = E2E.rbpeek("snapshot", "--pid", target.pid, "--json", *flags, env: env)
      next ["rbpeek #{res.describe}"] if res.timed_out || res.signal

      snap = E2E.json_of(res)
      Expect.snapshot_diffs(snap, spec, mode: mode, pid: target.pid, ruby_version: ruby.version) +
        tid_problems(target, snap)
    rescue RuntimeError => e
      [e.message]
    end
  end

  # rbpeek record -d 1 -f collapsed from the host: every thread's expected
  # stack (root first, "label (path:line)" frames) is there about 100 times
  # (at 100 Hz; identical stacks of several threads merge into one line),
  # and next to nothing else.  --idle: the sleeping threads are what is
  # checked, and record leaves threads waiting for work out by default.
  # Returns [problems, note].
  # Elsewhere: cmd is the command that runs rbpeek (e.g. in a chroot), pid
  # the target's PID as that rbpeek sees it, cache [host path, path as that
  # rbpeek sees it] of a directory for record's raw file; flags: more
  # options for record (e.g. ["--layout", "dwarf"]).
  def record_problems(target, spec, cmd: [E2E::RBPEEK], pid: target.pid, cache: nil, flags: [])
    cache ||= [File.join(E2E::OUT, "xdg.#{$$}")] * 2 # where record leaves its raw file
    res = E2E.run([*cmd, "record", "--pid", pid.to_s, "-d", "1", "-f", "collapsed", "-o", "-", "--silent", "--idle", *flags],
                  timeout: 15, env: { "XDG_CACHE_HOME" => cache[1] })
    FileUtils.rm_rf(cache[0])
    return [["rbpeek record #{res.describe}"], nil] unless res.status&.zero?

    counts = Hash.new(0)
    res.stdout.dup.force_encoding("UTF-8").each_line do |l|
      stack, _, n = l.chomp.rpartition(" ")
      counts[stack] += n.to_i
    end
    want = spec.map { |s| s.frames.reverse.map { |f| "#{f.label} (#{f.path}:#{f.line})" }.join(";") }
    problems = []
    total = counts.values.sum
    # Every tick samples every (parked) thread, so each expected stack holds
    # its threads' share of all samples; how many ticks there were depends
    # on the machine (ASan at load 30 made one tick in the second), so only
    # a floor of a few ticks is absolute.
    per_thread = total.to_f / spec.size
    problems << "only #{total} samples of #{spec.size} threads in 1 s at 100 Hz" if per_thread < 3
    want.tally.each do |stack, threads|
      got = counts[stack]
      if got < threads * per_thread * 0.8
        problems << "#{got} samples of #{stack.inspect}, expected about #{(threads * per_thread).round} " \
                    "(#{threads} of #{spec.size} threads, #{total} samples)"
      end
    end
    other = counts.reject { |k, _| want.include?(k) }
    if other.values.sum > total * 0.02
      problems << "#{other.values.sum} of #{total} samples in unexpected stacks, e.g. #{other.max_by { |_, v| v }.inspect}"
    end
    [problems.first(4), "#{total} samples, #{want.uniq.size} stacks"]
  end

  def note(spec, file, tries = 1, first = nil)
    n = "#{spec.size} threads, #{spec.sum { |s| s.frames.size }} frames (#{file})"
    n += " (attempt #{tries}; first attempt: #{first})" if tries > 1
    n
  end
end
