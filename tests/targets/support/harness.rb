# frozen_string_literal: true
#
# harness.rb - shared by every test target (tests/targets/*.rb).
#
# A target builds a known set of threads, each of which ends up parked forever
# at a known place (blocked in a C method such as Kernel#sleep, or spinning on
# one line), then the thread that called RbpeekTarget.ready! signals readiness
# and parks itself.  Nothing here stays on any stack once a target is ready.
#
# Environment (all optional):
#   RBPEEK_READY=FILE   write "PID\n" to FILE (atomically) when ready;
#                       without it, print "READY PID" to stdout and flush.
#   RBPEEK_ORACLE=FILE  also dump Ruby's own view of every thread
#                       (Thread#backtrace_locations) to FILE as JSON, taken
#                       once all threads, the caller included, are parked.
#                       The dump is made by one extra thread, named "oracle",
#                       which is left out of the dump.  The ready file is
#                       written after the dump in this mode.
#
# SIGUSR1 makes the target write "pong" to "<RBPEEK_READY>.pong": the test
# uses it to check that the target still runs after a snapshot.
#
# Spinning threads call RbpeekTarget.spinning! and then spin on one line that
# increments $spin (e.g. `$spin += 1 while true`): a line made only of VM
# instructions, so the thread's stack is the same whenever it is stopped.

require "json"

$spin = 0

module RbpeekTarget
  module_function

  def spinning!
    Thread.current.thread_variable_set(:rbpeek_spinner, true)
  end

  # A thread is parked when it is blocked (status "sleep") or is a spinner
  # that has been around its loop at least once.
  def parked?(thread)
    if thread.thread_variable_get(:rbpeek_spinner)
      $spin > 0 && thread.status == "run"
    else
      thread.status == "sleep"
    end
  end

  def wait_until(what, timeout)
    deadline = Time.now + timeout
    until yield
      abort "rbpeek target: timed out waiting for #{what}" if Time.now > deadline
      sleep 0.01
    end
  end

  def atomic_write(path, data)
    tmp = "#{path}.tmp#{$$}"
    File.write(tmp, data)
    File.rename(tmp, path)
  end

  def signal_ready
    if (file = ENV["RBPEEK_READY"])
      atomic_write(file, "#{$$}\n")
    else
      $stdout.puts "READY #{$$}"
      $stdout.flush
    end
  end

  def utf8(str)
    str && str.dup.force_encoding(Encoding::UTF_8)
  end

  def dump_oracle(file, me)
    threads = (Thread.list - [me]).map do |t|
      {
        "name" => utf8(t.name) || (t == Thread.main ? "main" : nil),
        "main" => t == Thread.main,
        "status" => t.status,
        "tid" => t.respond_to?(:native_thread_id) ? t.native_thread_id : nil,
        "frames" => (t.backtrace_locations || []).map do |l|
          { "label" => utf8(l.label), "path" => utf8(l.absolute_path || l.path), "line" => l.lineno }
        end,
      }
    end
    atomic_write(file, JSON.generate("pid" => $$, "ruby_version" => RUBY_VERSION, "threads" => threads))
  end

  # Called by the last thread to park, right before it parks.  Returns at
  # once: the caller's next statement is where it parks.
  def ready!(timeout: 30)
    Signal.trap("USR1") { atomic_write("#{ENV['RBPEEK_READY'] || "/tmp/rbpeek-target-#{$$}"}.pong", "pong\n") }
    caller_thread = Thread.current
    others = Thread.list - [caller_thread]
    wait_until("threads to park", timeout) { others.all? { |t| parked?(t) } }
    if (oracle = ENV["RBPEEK_ORACLE"])
      Thread.new do
        Thread.current.name = "oracle"
        me = Thread.current
        # Parked twice in a row, 50 ms apart: the caller has reached its place.
        2.times do
          sleep 0.05
          wait_until("the last thread to park", timeout) { parked?(caller_thread) && others.all? { |t| parked?(t) } }
        end
        dump_oracle(oracle, me)
        signal_ready
      end
    else
      signal_ready
    end
  end
end
