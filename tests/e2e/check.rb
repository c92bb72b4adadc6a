# frozen_string_literal: true
#
# check.rb - compare rbpeek's view of one test target with its expectation,
# by hand (the test files do the same for every target).
#
#   ruby tests/e2e/check.rb TARGET [--nonblocking] [--core] [--oracle]
#   ruby tests/e2e/check.rb TARGET --json FILE   # an existing snapshot
#
# Starts tests/targets/TARGET.rb, snapshots it with $BUILD/rbpeek (default
# build/) - or makes a core with gcore and reads that (--core), or dumps
# Ruby's own view (--oracle) - and prints the differences with
# tests/targets/TARGET.expect.  Exit status 0 when they match.
require_relative "lib/e2e"

name = ARGV.shift or abort "usage: ruby tests/e2e/check.rb TARGET [--nonblocking] [--core] [--oracle] [--json FILE]"
flags = ARGV
spec = E2E.expectation(name)

problems =
  if (i = flags.index("--json"))
    snap = JSON.parse(File.read(flags[i + 1], encoding: "UTF-8"))
    Expect.snapshot_diffs(snap, spec, mode: :live, pid: nil, ruby_version: nil)
  else
    E2E.with_target(name, oracle: flags.include?("--oracle")) do |t|
      if flags.include?("--oracle")
        Expect.oracle_diffs(t.oracle, spec)
      elsif flags.include?("--core")
        prefix = File.join(E2E::OUT, "check-core")
        r = E2E.run(["gcore", "-o", prefix, t.pid.to_s], timeout: 60)
        abort "gcore #{r.describe}" unless r.status&.zero?
        core = "#{prefix}.#{t.pid}"
        begin
          snap = E2E.json_of(E2E.rbpeek("snapshot", "--core", core, "--json"))
        ensure
          File.delete(core)
        end
        Expect.snapshot_diffs(snap, spec, mode: :core, pid: t.pid, ruby_version: RUBY_VERSION)
      else
        extra = flags.include?("--nonblocking") ? ["--nonblocking"] : []
        snap = E2E.json_of(E2E.rbpeek("snapshot", "--pid", t.pid, "--json", *extra))
        Expect.snapshot_diffs(snap, spec, mode: :live, pid: t.pid, ruby_version: RUBY_VERSION)
      end
    end
  end

if problems.empty?
  puts "#{name}: #{spec.size} threads, #{spec.sum { |s| s.frames.size }} frames as expected"
else
  puts problems
  exit 1
end
