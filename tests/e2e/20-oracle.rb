# frozen_string_literal: true
#
# 20-oracle.rb - the expectations themselves, checked against Ruby's own view:
# each target is run with RBPEEK_ORACLE set and dumps every thread's
# Thread#backtrace_locations; labels (unqualified), paths and lines must
# match tests/targets/NAME.expect.  Needs no rbpeek: this keeps the other
# tests honest.
require_relative "lib/e2e"
include E2E

TARGET_NAMES.each do |name|
  test("oracle/#{name}") do
    spec = expectation(name)
    with_target(name, oracle: true) do |t|
      oracle = t.oracle
      problems = Expect.oracle_diffs(oracle, spec)
      if oracle["ruby_version"] != RUBY_VERSION
        problems << "target runs Ruby #{oracle['ruby_version']}, expected #{RUBY_VERSION}"
      end
      if problems.empty?
        ok("oracle/#{name}", "#{spec.size} threads, #{spec.sum { |s| s.frames.size }} frames match Ruby #{oracle['ruby_version']}")
      else
        fail("oracle/#{name}", problems.join("\n"))
      end
    end
  end
end
finish
