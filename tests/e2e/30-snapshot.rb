# frozen_string_literal: true
#
# 30-snapshot.rb - rbpeek snapshot --pid against every live target: JSON
# (pausing and --nonblocking) compared frame by frame with
# tests/targets/NAME.expect, the text format once, thread ids checked
# against /proc, and the target still running normally afterwards.
require_relative "lib/e2e"
include E2E

MODES = { "snapshot" => [], "snapshot-nonblocking" => ["--nonblocking"] }.freeze
names = TARGET_NAMES.flat_map { |n| MODES.keys.map { |m| "#{m}/#{n}" } } + %w[snapshot-text/threads] +
        TARGET_NAMES.map { |n| "snapshot-leaves-running/#{n}" }
exit 0 if skip_unless_tracing(names)

# Thread ids as /proc sees them: main thread's tid is the PID; every tid is a
# task of the process; a thread named by Thread#name has that name as comm.
def tid_problems(target, snap)
  problems = []
  tasks = target.tasks
  snap["threads"].each_with_index do |th, i|
    tid = th["tid"]
    who = "thread #{i} #{th['name'].inspect}"
    if th["main"] && tid != target.pid
      problems << "#{who}: main thread tid #{tid}, expected the PID #{target.pid}"
    elsif !tasks.include?(tid)
      problems << "#{who}: tid #{tid} is not in /proc/#{target.pid}/task #{tasks.inspect}"
    elsif !th["main"] && (comm = target.comm(tid))
      want = th["name"].to_s.b[0, 15]
      problems << "#{who}: tid #{tid} has comm #{comm.inspect}, expected #{want.inspect}" if comm != want
    end
  end
  problems
end

TARGET_NAMES.each do |name|
  spec = expectation(name)
  with_target(name) do |t|
    MODES.each do |mode, flags|
      test("#{mode}/#{name}") do
        problems, tries, first = settle do
          res = rbpeek("snapshot", "--pid", t.pid, "--json", *flags)
          next ["rbpeek #{res.describe}"] if res.timed_out || res.signal

          snap = json_of(res)
          Expect.snapshot_diffs(snap, spec, mode: :live, pid: t.pid, ruby_version: RUBY_VERSION) +
            tid_problems(t, snap)
        rescue RuntimeError => e
          [e.message]
        end
        note = "#{spec.size} threads, #{spec.sum { |s| s.frames.size }} frames"
        note += " (attempt #{tries}; first attempt: #{first})" if tries > 1
        problems.empty? ? ok("#{mode}/#{name}", note) : fail("#{mode}/#{name}", problems.join("\n"))
      end
    end

    if name == "threads"
      test("snapshot-text/threads") do
        problems = snapshot_text_problems(t.pid)
        problems.empty? ? ok("snapshot-text/threads") : fail("snapshot-text/threads", problems.join("\n"))
      end
    end

    test("snapshot-leaves-running/#{name}") do
      spinner = spec.index { |s| s.state == "running" }
      tid = nil
      if spinner
        # the spinner's tid, from a snapshot (its comm is its Thread#name)
        tid = t.tasks.find { |x| t.comm(x) == spec[spinner].name.b[0, 15] }
      end
      problem = t.liveness_problem(spinner_tid: tid)
      problem ? fail("snapshot-leaves-running/#{name}", problem) : ok("snapshot-leaves-running/#{name}")
    end
  end
end
finish
