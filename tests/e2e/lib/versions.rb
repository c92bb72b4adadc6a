# frozen_string_literal: true
#
# versions.rb - the checks the multi-version tests run on each Ruby
# (80-versions.rb: the Debian chroots; 83-found-rubies.rb: the version
# managers' and the Debian-source builds' Rubies):
#   oracle/NAME      the expectation (NAME@X.Y.expect where X.Y differs)
#                    matches that Ruby's own Thread#backtrace_locations
#   snapshot[-nonblocking]/NAME, snapshot-text/threads,
#   snapshot-leaves-running/NAME   exactly the checks of 30-snapshot.rb
#   record/threads   record -f collapsed holds every thread's stack, often
#   core/nested      snapshot --core of a gcore dump matches
#   inspect/nested   reports the version, and a method other than the
#                    symbol when libruby exports no VM symbol
#   discovery-M/nested  RBPEEK_DISCOVERY=M alone finds the VM (code, scan;
#                    symbol only where exported, else a clean exit 7)
# Test names are prefixed with the Ruby's prefix (ruby3.3/, ruby4.0.5@opt:4.0.5/).
require_relative "chroot"

module Versions
  include E2E
  extend E2E

  METHODS = %w[symbol code scan].freeze

  module_function

  # Every test name check(ruby) reports, under prefix.
  def names_for(prefix)
    per_target = %w[oracle snapshot snapshot-nonblocking snapshot-leaves-running]
    (TARGET_NAMES.flat_map { |n| per_target.map { |k| "#{k}/#{n}" } } +
     %w[snapshot-text/threads record/threads core/nested inspect/nested] +
     METHODS.map { |m| "discovery-#{m}/nested" }).map { |n| "#{prefix}/#{n}" }
  end

  GCORE = system("command -v gcore >/dev/null 2>&1")
  CORES = File.join(OUT, "cores80.#{$$}")
  at_exit { FileUtils.rm_rf(CORES) }

  def gcore(pid)
    FileUtils.mkdir_p(CORES)
    prefix = File.join(CORES, "core")
    r = run(["gcore", "-o", prefix, pid.to_s], timeout: 60)
    path = "#{prefix}.#{pid}"
    raise "gcore #{r.describe}" unless r.status&.zero? && File.exist?(path)

    path
  end

  def check(ruby)
    pre = ruby.prefix
    exported = ruby.exports_vm_symbol?

    TARGET_NAMES.each do |name|
      spec, file = Chroots.spec(name, ruby)

      test("#{pre}/oracle/#{name}") do
        Chroots.with_target(ruby, name, oracle: true) do |t|
          oracle = t.oracle
          problems = Expect.oracle_diffs(oracle, spec)
          if oracle["ruby_version"] != ruby.version
            problems << "target runs Ruby #{oracle['ruby_version']}, expected #{ruby.version}"
          end
          report("#{pre}/oracle/#{name}", problems, Chroots.note(spec, file))
        end
      end

      Chroots.with_target(ruby, name) do |t|
        { "snapshot" => [], "snapshot-nonblocking" => ["--nonblocking"] }.each do |mode, flags|
          test("#{pre}/#{mode}/#{name}") do
            problems, tries, first = Chroots.snapshot_problems(t, spec, ruby, flags: flags)
            report("#{pre}/#{mode}/#{name}", problems, Chroots.note(spec, file, tries, first))
          end
        end

        if name == "threads"
          test("#{pre}/snapshot-text/threads") do
            problems = snapshot_text_problems(t.pid)
            report("#{pre}/snapshot-text/threads", problems)
          end

          test("#{pre}/record/threads") do
            problems, note = Chroots.record_problems(t, spec)
            report("#{pre}/record/threads", problems, note)
          end
        end

        if name == "nested"
          test("#{pre}/inspect/nested") do
            res = rbpeek("inspect", "--pid", t.pid)
            out = res.stdout.dup.force_encoding("UTF-8")
            how = out[/^vm:.*\(found by (.*)\)$/, 1]
            problems = []
            problems << "rbpeek inspect #{res.describe}" unless res.status&.zero?
            problems << "no \"ruby version: #{ruby.version}\" line: #{out.inspect}" unless out.match?(/^ruby version:\s+#{Regexp.escape(ruby.version)}$/)
            if how.nil?
              problems << "no \"vm: ... (found by ...)\" line: #{out.inspect}"
            elsif exported && !how.match?(/\Aruby_current_vm(_ptr)?\z/)
              problems << "VM found by #{how.inspect}, expected the exported symbol"
            elsif !exported && how.match?(/ruby_current_vm/)
              problems << "VM found by #{how.inspect}, but libruby exports no VM symbol"
            end
            lives = out[/^ruby lives in:\s+(\S+)/, 1]
            problems << "\"ruby lives in\" #{lives.inspect} is not a file" unless lives && File.file?(lives)
            report("#{pre}/inspect/nested", problems, "VM found by #{how}#{exported ? '' : ' (no VM symbol exported)'}")
          end

          METHODS.each do |m|
            tname = "#{pre}/discovery-#{m}/nested"
            test(tname) do
              env = { "RBPEEK_DISCOVERY" => m }
              if m == "symbol" && !exported
                res = rbpeek("snapshot", "--pid", t.pid, "--json", env: env)
                problems = []
                problems << "#{res.describe}, expected exit 7 (no VM symbol exported)" if res.status != 7
                problems << error_format_problem(res) if res.status == 7 && error_format_problem(res)
                next report(tname, problems, "exit 7: libruby exports no VM symbol")
              end
              res = rbpeek("inspect", "--pid", t.pid, env: env)
              how = res.stdout.dup.force_encoding("UTF-8")[/^vm:.*\(found by (.*)\)$/, 1]
              want = { "symbol" => /\Aruby_current_vm/, "code" => /\Adecoded /, "scan" => /\Ascanned / }[m]
              problems = []
              problems << "rbpeek inspect #{res.describe}" unless res.status&.zero?
              problems << "VM found by #{how.inspect}, expected #{want.inspect}" unless how&.match?(want)
              problems += Chroots.snapshot_problems(t, spec, ruby, env: env).first if problems.empty?
              report(tname, problems, "VM found by #{how}")
            end
          end

          test("#{pre}/core/nested") do
            next skip("#{pre}/core/nested", "needs gcore (gdb)") unless GCORE

            live = json_of(rbpeek("snapshot", "--pid", t.pid, "--json"))
            core = gcore(t.pid)
            begin
              size = File.size(core) >> 20
              snap = json_of(rbpeek("snapshot", "--core", core, "--json"))
              problems = Expect.snapshot_diffs(snap, spec, mode: :core, pid: t.pid, ruby_version: ruby.version)
              got = snap["threads"].map { |x| x["tid"] }
              want = live["threads"].map { |x| x["tid"] }
              problems << "thread ids #{got.inspect}, live snapshot had #{want.inspect}" if got != want
            rescue RuntimeError => e
              problems = [e.message]
            ensure
              File.delete(core)
            end
            liveness = t.liveness_problem
            problems << "after gcore: #{liveness}" if liveness
            report("#{pre}/core/nested", problems, "#{Chroots.note(spec, file)}, #{size} MiB core")
          end
        end

        test("#{pre}/snapshot-leaves-running/#{name}") do
          problem = t.liveness_problem(spinner_tid: t.spinner_tid(spec))
          report("#{pre}/snapshot-leaves-running/#{name}", [problem].compact)
        end
      end
    rescue StandardError, Timeout::Error => e
      fail("#{pre}/#{name}", "#{e.class}: #{e.message} (#{e.backtrace&.first})")
    end
  end
end
