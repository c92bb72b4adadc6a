# frozen_string_literal: true
# e2e-timeout: 240
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 82-layout-mutations.rb - Rubies newer than every table, as Ruby's
# development line makes them: the mutation variants of
# tools/build-debian-ruby.sh (miniruby of Debian's ruby3.3 source with its
# structs edited; each skipped with the reason when not built):
#   mut-vmractor    a field inserted in rb_vm_struct.ractor before main_thread
#   mut-gcobjspace  rb_vm_struct.objspace removed (a gc.global_objspace at the
#                   VM's end instead), every later field a word lower
#   mut-ecfp        a field inserted in rb_execution_context_t before cfp and
#                   one in rb_control_frame_t
#   mut-iseqbody    rb_iseq_constant_body reordered (iseq_encoded last)
# For each, test names mutation/VARIANT/CHECK:
#   dwarf-stacks     its miniruby with DWARF: inspect says the layout is the
#                    DWARF's, and the snapshot is exactly the stack Ruby runs
#   dwarf-heap       the same: heap counts agree with ObjectSpace.count_objects
#                    taken in the target just before it parked, or (where the
#                    DWARF lacks the objspace) heap exits 6 saying in one line
#                    which field this Ruby lacks, and snapshot warns that GC
#                    frames are not shown
#   stripped         its miniruby stripped (the 3.3 table): snapshot refused
#                    with exit 6 naming what did not fit, never "try again" and
#                    never a wrong stack; where the stacks' structures did not
#                    move (mut-gcobjspace) the snapshot is exact and heap is
#                    refused (exit 6) naming the objspace (checked at attach:
#                    gc and heap unavailable, as with a DWARF lacking it)
#   inspect          inspect (text and --json) on the stripped one lists the
#                    layouts tried and what did not fit, with the same exit
require_relative "lib/e2e"
require "json"
require "tmpdir"
include E2E

VARIANTS = %w[mut-vmractor mut-gcobjspace mut-ecfp mut-iseqbody].freeze
CHECKS = %w[dwarf-stacks dwarf-heap stripped inspect].freeze
exit 0 if skip_without_rbpeek(VARIANTS.flat_map { |v| CHECKS.map { |c| "mutation/#{v}/#{c}" } })

TMP = Dir.mktmpdir("rbpeek-82m-")
at_exit { FileUtils.rm_rf(TMP) }
ROOT = ENV.fetch("RBPEEK_DEBSRC", "/var/cache/rbpeek/debsrc")

# miniruby (binary) of variant v running a known stack, parked; yields
# (pid, expected frames, ObjectSpace.count_objects just before parking).
def with_mutant(v, binary)
  script = File.join(TMP, "#{v}-#{binary}.rb")
  ready = "#{script}.ready"
  counts = "#{script}.counts"
  File.write(script, <<~RUBY)
    class Deep
      def a(n) = n.zero? ? park : a(n - 1)
      def park
        GC.start
        File.write(#{counts.inspect}, ObjectSpace.count_objects.map { |k, n| "\#{k} \#{n}" }.join("\\n"))
        File.write(#{ready.inspect}, Process.pid.to_s)
        sleep
      end
    end
    Deep.new.a(5)
  RUBY
  expected = ["Kernel#sleep (#{script}:7)", "Deep#park (#{script}:7)",
              *Array.new(6) { "Deep#a (#{script}:2)" }, "<main> (#{script}:10)"]
  pid = Process.spawn(File.join(ROOT, v, binary), script, in: "/dev/null", out: File::NULL, err: File::NULL)
  E2E.register_pid(pid)
  begin
    deadline = Time.now + 30
    sleep 0.05 until File.exist?(ready) || Time.now > deadline
    raise "#{binary} target not ready in 30 s" unless File.exist?(ready)

    oracle = File.read(counts).lines.to_h { |l| k, n = l.split; [k, n.to_i] }
    yield pid, expected, oracle
  ensure
    E2E.kill_pid(pid)
  end
end

# The frames of a text snapshot ("Label (path:line)" lines).
def stack_of(out)
  out.lines.map(&:strip).select { |l| l.end_with?(")") && !l.start_with?("Process", "Thread") }
end

def heap_json(pid)
  r = rbpeek("heap", "--pid", pid, "--json")
  [r, r.status&.zero? ? JSON.parse(r.stdout) : nil]
end

# Heap counts against the target's own: strings and arrays within 10 %.
def heap_problems(json, oracle)
  %w[T_STRING T_ARRAY T_OBJECT].filter_map do |t|
    got = json.dig("types", t).to_i
    want = oracle[t].to_i
    "#{t}: rbpeek #{got}, ObjectSpace.count_objects #{want}" if want.positive? && (got - want).abs > want / 10 + 5
  end
end

def refusal_problems(r, what)
  problems = []
  problems << "#{what}: exit #{r.status.inspect}, expected 6: #{r.stderr.strip[0, 300]}" unless r.status == 6
  problems << "#{what}: says try again: #{r.stderr.strip}" if r.stderr.include?("try again")
  problems << "#{what}: wrote a result: #{r.stdout[0, 200].inspect}" unless r.stdout.strip.empty?
  problems << error_format_problem(r) if r.status == 6 && error_format_problem(r)
  problems
end

VARIANTS.each do |v|
  dir = File.join(ROOT, v)
  unless File.exist?(File.join(dir, "READY"))
    CHECKS.each { |c| skip("mutation/#{v}/#{c}", "no #{dir} (tools/build-debian-ruby.sh #{v} builds it)") }
    next
  end
  stacks_move = v != "mut-gcobjspace"

  with_mutant(v, "miniruby") do |pid, expected, oracle|
    test("mutation/#{v}/dwarf-stacks") do
      problems = []
      i = rbpeek("inspect", "--pid", pid)
      problems << "inspect: #{i.describe}" unless i.status&.zero?
      problems << "layout not from the DWARF: #{i.stdout[/^layout:.*$/].inspect}" unless i.stdout =~ /^layout:\s+dwarf:/
      r = rbpeek("snapshot", "--pid", pid)
      problems << "snapshot: #{r.describe}" unless r.status&.zero?
      got = stack_of(r.stdout)
      problems << "stack #{got.inspect}, expected #{expected.inspect}" unless got == expected
      report("mutation/#{v}/dwarf-stacks", problems, "#{got.size} frames exact, #{i.stdout[/^layout note:.*$/] || 'layout from the DWARF'}")
    end

    test("mutation/#{v}/dwarf-heap") do
      r, json = heap_json(pid)
      if v == "mut-gcobjspace"
        problems = refusal_problems(r, "heap")
        problems << "heap does not name the missing field: #{r.stderr.inspect}" unless
          r.stderr =~ /heap of this Ruby \(3\.3\.\d+\) is not readable: its layout lacks rb_vm_t\.objspace/
        s = rbpeek("snapshot", "--pid", pid)
        problems << "snapshot does not warn that GC frames are not shown: #{s.stderr.inspect}" unless
          s.stderr =~ /lacks rb_vm_t\.objspace: .*no GC frames/
        report("mutation/#{v}/dwarf-heap", problems, r.stderr.lines.first&.strip)
      else
        problems = json ? heap_problems(json, oracle) : ["heap: #{r.describe}"]
        report("mutation/#{v}/dwarf-heap", problems,
               json && "T_STRING #{json.dig('types', 'T_STRING')} (Ruby: #{oracle['T_STRING']})")
      end
    end
  end

  with_mutant(v, "miniruby.stripped") do |pid, expected, oracle|
    test("mutation/#{v}/stripped") do
      r = rbpeek("snapshot", "--pid", pid)
      if stacks_move
        problems = refusal_problems(r, "snapshot")
        problems << "the refusal does not say what did not fit: #{r.stderr.inspect}" unless r.stderr.include?("does not fit")
        report("mutation/#{v}/stripped", problems, r.stderr.lines.first&.strip)
      else
        problems = []
        problems << "snapshot: #{r.describe}" unless r.status&.zero?
        got = stack_of(r.stdout)
        problems << "stack #{got.inspect}, expected #{expected.inspect}" unless got == expected
        h, json = heap_json(pid)
        problems.concat(refusal_problems(h, "heap"))
        problems << "heap refusal does not name the objspace: #{h.stderr.inspect}" unless h.stderr.include?("objspace")
        problems << "heap gave counts: #{json.dig('types', 'T_STRING')} strings (Ruby: #{oracle['T_STRING']})" if json
        report("mutation/#{v}/stripped", problems, "stacks exact (#{got.size} frames); heap: #{h.stderr.lines.first&.strip}")
      end
    end

    test("mutation/#{v}/inspect") do
      problems = []
      i = rbpeek("inspect", "--pid", pid)
      j = rbpeek("inspect", "--pid", pid, "--json")
      want = stacks_move ? 6 : 0
      problems << "inspect: exit #{i.status.inspect}, expected #{want}" unless i.status == want
      problems << "inspect --json: exit #{j.status.inspect}, expected #{want}" unless j.status == want
      problems << "no 'layouts tried:' in #{i.stdout.inspect}" unless i.stdout.include?("layouts tried:")
      problems << "no table tried in #{i.stdout.inspect}" unless i.stdout =~ /^  table 3\.3\.\d+: /
      begin
        tried = JSON.parse(j.stdout)["layouts_tried"]
        table = tried.find { |a| a["source"] == "table" }
        problems << "--json lists no table: #{tried.inspect}" unless table
        if stacks_move
          problems << "text: the table's outcome is not 'does not fit': #{i.stdout.inspect}" unless i.stdout =~ /^  table 3\.3\.\d+: does not fit: /
          problems << "--json: table result #{table && table['result'].inspect}" unless table && table["result"].start_with?("does not fit: ")
        end
      rescue JSON::ParserError => e
        problems << "inspect --json: #{e.message}: #{j.stdout[0, 200].inspect}"
      end
      report("mutation/#{v}/inspect", problems, i.stdout[/^  table .*$/]&.strip)
    end
  end
rescue RuntimeError => e
  fail("mutation/#{v}", e.message)
end

finish
