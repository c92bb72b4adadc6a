# frozen_string_literal: true
#
# memory.rb - the targets of tests/targets/memory (heap.rb, gcloop.rb) run by
# the host's Ruby and by every chroot's Ruby (tests/e2e/76-heap.rb,
# 77-gc-frames.rb).  They keep running after they are ready and answer
# SIGUSR2 by writing Ruby's own view of the heap or of GC time to
# "<ready file>.<suffix>", which the tests compare with rbpeek's.
require_relative "chroot"

module Memory
  DIR = File.join(E2E::TARGETS, "memory")

  # A Ruby to run targets with: the host's, or a chroot's (Chroots::Ruby).
  Ruby = Struct.new(:xy, :chroot) do
    def name
      "ruby#{xy}"
    end
  end

  module_function

  # The host's Ruby plus every ready chroot; [rubies, {xy => why missing}].
  def rubies
    host = Ruby.new(RUBY_VERSION[/\A\d+\.\d+/], nil)
    chroots, missing = Chroots.prepare
    [[host] + chroots.reject { |c| c.xy == host.xy }.map { |c| Ruby.new(c.xy, c) }, missing]
  end

  # A running memory target.
  class Target
    attr_reader :pid

    def initialize(ruby, name)
      @ruby = ruby
      @name = name
      if ruby.chroot
        inner = File.join(Chroots::INNER, ".run", "memory-#{name}.ready")
        @ready = ruby.chroot.host_path(inner)
        argv = ["chroot", ruby.chroot.dir, "/bin/sh", "-c",
                "cd #{Chroots::INNER}/memory && exec #{ruby.chroot.bin} #{name}.rb"]
      else
        inner = @ready = File.join(E2E::OUT, "memory-#{name}.#{$$}.ready")
        argv = [E2E::RUBY, "#{name}.rb"]
      end
      Dir.glob("#{@ready}*").each { |f| File.delete(f) }
      @log = File.join(E2E::OUT, "memory-#{ruby.xy}-#{name}.#{$$}.log")
      @pid = Process.spawn({ "RBPEEK_READY" => inner }, *argv, chdir: DIR, in: "/dev/null",
                                                               out: @log, err: [:child, :out])
      E2E.register_pid(@pid)
    end

    def wait_ready(timeout: 60)
      deadline = Time.now + timeout
      until File.exist?(@ready)
        raise "#{@name} exited before it was ready: #{log_text}" if Process.waitpid(@pid, Process::WNOHANG)
        raise "#{@name} not ready after #{timeout} s: #{log_text}" if Time.now > deadline

        sleep 0.02
      end
      self
    end

    def log_text
      File.exist?(@log) ? File.read(@log)[0, 400].inspect : "(no log)"
    end

    # Ask the target for its own view (SIGUSR2) and return it, parsed.
    def ask(suffix, timeout: 10)
      file = "#{@ready}.#{suffix}"
      File.delete(file) if File.exist?(file)
      Process.kill("USR2", @pid)
      deadline = Time.now + timeout
      sleep 0.005 until File.exist?(file) || Time.now > deadline
      raise "no #{suffix} from #{@name} within #{timeout} s: #{log_text}" unless File.exist?(file)

      JSON.parse(File.read(file))
    end

    # Threads left stopped, or the target gone: a problem string, or nil.
    def liveness_problem
      return "target exited" if Process.waitpid(@pid, Process::WNOHANG)

      stopped = Dir.children("/proc/#{@pid}/task").select do |tid|
        stat = File.read("/proc/#{@pid}/task/#{tid}/stat")
        %w[T t].include?(stat[(stat.rindex(")") + 2)..][0])
      rescue Errno::ENOENT
        false
      end
      stopped.empty? ? nil : "threads #{stopped.inspect} left stopped"
    end

    def kill
      E2E.kill_pid(@pid)
      Dir.glob("#{@ready}*").each { |f| File.delete(f) }
      File.delete(@log) if File.exist?(@log)
    end
  end

  def with_target(ruby, name)
    t = Target.new(ruby, name)
    begin
      yield t.wait_ready
    ensure
      t.kill
    end
  end
end
