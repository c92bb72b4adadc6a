# frozen_string_literal: true
#
# 76-heap.rb - rbpeek heap against the process's own view, on the host's Ruby
# and on every chroot's (2.7, 3.3, 3.4).  The target (tests/targets/memory/
# heap.rb) holds known objects with GC disabled; on SIGUSR2 it writes
# ObjectSpace.count_objects, and rbpeek heap runs right after:
#   heap/rubyX.Y/count-objects  every type's count, the total and the free
#                     slots agree within what the signal handler allocates
#                     (a few hundred objects); the known classes
#                     (HeapProbe::Widget 30000, HeapProbe::Node 20000,
#                     Gadget 10000) are counted exactly, String >= 40000;
#                     the target is left running
#   heap/rubyX.Y/text the text output says the same
# and, on the host: heap/core (heap --core of a gcore dump of the target
# counts the same known classes), heap/kill-mid-pause (rbpeek heap killed
# with SIGKILL at 10 moments never leaves the target stopped, and it still
# answers), and bad input: heap/not-ruby (exit 5),
# heap/no-such-process (exit 3), heap/usage (exit 2).
require_relative "lib/memory"
include E2E

SLACK = 400 # objects the USR2 handler (count_objects, JSON, File) may allocate
EXACT = { "HeapProbe::Widget" => 30_000, "HeapProbe::Node" => 20_000, "Gadget" => 10_000 }.freeze

def names_for(xy)
  %w[count-objects text].map { |n| "heap/ruby#{xy}/#{n}" }
end
HOST_NAMES = %w[heap/core heap/kill-mid-pause heap/not-ruby heap/no-such-process heap/usage].freeze

all = HOST_NAMES + (Chroots::ALL + [RUBY_VERSION[/\A\d+\.\d+/]]).uniq.flat_map { |v| names_for(v) }
exit 0 if skip_unless_tracing(all)

# Differences between Ruby's count_objects and rbpeek's JSON.
def count_problems(theirs, ours)
  problems = []
  types = ours["types"]
  theirs.each do |key, n|
    next unless key.start_with?("T_")

    got = types[key].to_i
    problems << "#{key}: rbpeek #{got}, Ruby #{n}" if (got - n).abs > SLACK
  end
  (types.keys - theirs.keys).each do |key|
    problems << "#{key}: rbpeek #{types[key]}, Ruby none" if types[key] > SLACK
  end
  problems << "slots: rbpeek #{ours['slots']}, Ruby TOTAL #{theirs['TOTAL']}" if (ours["slots"] - theirs["TOTAL"]).abs > SLACK
  problems << "free slots: rbpeek #{ours['free_slots']}, Ruby FREE #{theirs['FREE']}" if (ours["free_slots"] - theirs["FREE"]).abs > SLACK
  problems
end

def class_problems(ours)
  by_name = ours["classes"].to_h { |c| [c["name"], c["count"]] }
  problems = EXACT.filter_map { |k, n| "#{k}: #{by_name[k].inspect} objects, expected #{n}" if by_name[k] != n }
  problems << "String: #{by_name['String'].inspect} objects, expected >= 40000" unless by_name["String"].to_i >= 40_000
  problems << "n_classes #{ours['n_classes']} but #{ours['classes'].size} listed with --top 0" if ours["n_classes"] != ours["classes"].size
  problems
end

def heap_test(ruby, t)
  pre = "heap/#{ruby.name}"
  test("#{pre}/count-objects") do
    theirs = t.ask("counts")
    res = rbpeek("heap", "--pid", t.pid, "--json", "--top", 0)
    ours = json_of(res)
    problems = count_problems(theirs, ours) + class_problems(ours)
    problems << "bad_pages #{ours['bad_pages']}" unless ours["bad_pages"].zero?
    problems << "pause_ms #{ours['pause_ms'].inspect}" unless ours["pause_ms"].to_f.positive?
    (live = t.liveness_problem) && problems << "after rbpeek heap: #{live}"
    worst = theirs.select { |k, _| k.start_with?("T_") }.map { |k, n| [(ours["types"][k].to_i - n).abs, k] }.max
    report("#{pre}/count-objects", problems,
           "#{theirs['TOTAL']} slots, #{ours['pages']} pages, #{ours['pools'].size} slot sizes, " \
           "largest type difference #{worst[0]} (#{worst[1]}), paused #{ours['pause_ms'].round(1)} ms")
  end
  test("#{pre}/text") do
    res = rbpeek("heap", "--pid", t.pid)
    out = res.stdout.dup.force_encoding("UTF-8")
    problems = []
    problems << "rbpeek heap #{res.describe}" unless res.status&.zero?
    problems << "no 'Process #{t.pid}: ruby #{ruby.xy}.' line: #{out[0, 200].inspect}" unless out.match?(/^Process #{t.pid}: ruby #{Regexp.escape(ruby.xy)}\.\d+, \d+ heap pages, \d+ slots: \d+ live objects, \d+ free$/)
    problems << "no T_STRING count" unless out.match?(/^  T_STRING +\d+$/)
    EXACT.each { |k, n| problems << "no '#{n}  #{k}' line" unless out.match?(/^ +#{n}  #{Regexp.escape(k)}$/) }
    report("#{pre}/text", problems)
  end
end

def core_test(t)
  unless system("command -v gcore >/dev/null 2>&1")
    skip("heap/core", "gcore (gdb) not installed")
    return
  end
  test("heap/core") do
    dir = File.join(OUT, "cores76.#{$$}")
    FileUtils.mkdir_p(dir)
    begin
      g = run(["gcore", "-o", File.join(dir, "core"), t.pid.to_s], timeout: 60)
      core = File.join(dir, "core.#{t.pid}")
      raise "gcore #{g.describe}" unless g.status&.zero? && File.exist?(core)

      ours = json_of(rbpeek("heap", "--core", core, "--json", "--top", 0))
      problems = class_problems(ours)
      problems << "pause_ms #{ours['pause_ms']} for a core file" unless ours["pause_ms"].zero?
      report("heap/core", problems, "#{ours['slots']} slots")
    ensure
      FileUtils.rm_rf(dir)
    end
  end
end

def kill_test(t)
  test("heap/kill-mid-pause") do
    problems = []
    10.times do |i|
      pid = Process.spawn(RBPEEK, "heap", "--pid", t.pid.to_s, out: "/dev/null", err: "/dev/null", in: "/dev/null")
      sleep(0.003 * i)
      begin
        Process.kill("KILL", pid)
      rescue Errno::ESRCH
        nil
      end
      Process.wait(pid)
      sleep 0.05
      (live = t.liveness_problem) && problems << "after kill #{i} (#{3 * i} ms): #{live}"
    end
    t.ask("counts") # raises when the target no longer answers
    report("heap/kill-mid-pause", problems)
  end
end

rubies, missing = Memory.rubies
missing.each { |xy, why| names_for(xy).each { |n| skip(n, why) } }
rubies.each_with_index do |ruby, i|
  Memory.with_target(ruby, "heap") do |t|
    heap_test(ruby, t)
    next unless i.zero?

    core_test(t)
    kill_test(t)
  end
rescue StandardError => e
  names_for(ruby.xy).each { |n| fail(n, "#{e.class}: #{e.message}") }
end

test("heap/not-ruby") do
  pid = Process.spawn("sleep", "30")
  register_pid(pid)
  res = rbpeek("heap", "--pid", pid)
  kill_pid(pid)
  problems = []
  problems << "rbpeek heap on sleep: #{res.describe}, expected exit 5" unless res.status == 5
  (p = error_format_problem(res)) && problems << p
  report("heap/not-ruby", problems)
end

test("heap/no-such-process") do
  res = rbpeek("heap", "--pid", 999_999_99)
  problems = []
  problems << "#{res.describe}, expected exit 3" unless res.status == 3
  (p = error_format_problem(res)) && problems << p
  report("heap/no-such-process", problems)
end

test("heap/usage") do
  problems = []
  [[], %w[--pid 1 --core x], %w[--pid abc], %w[--pid 1 --top -3], %w[--bogus]].each do |args|
    res = rbpeek("heap", *args)
    problems << "rbpeek heap #{args.join(' ')}: #{res.describe}, expected exit 2" unless res.status == 2
    (p = error_format_problem(res)) && problems << "rbpeek heap #{args.join(' ')}: #{p}"
  end
  res = rbpeek("heap", "--help")
  problems << "--help: #{res.describe}" unless res.status&.zero? && res.stdout.include?("--top N")
  report("heap/usage", problems)
end

finish
