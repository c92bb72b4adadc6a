# frozen_string_literal: true
#
# 80-versions.rb - the same targets and the same expectations on other
# Rubies: Debian's 2.7 (bullseye), 3.3 (trixie) and 3.4 (sid+experimental),
# each in a chroot made and cached by tools/setup-rubies.sh (3.3 and 3.4 are
# stripped and export no VM symbol).  For each ready Ruby X.Y the checks of
# lib/versions.rb, named "rubyX.Y/...".  83-found-rubies.rb runs the same
# checks on the version managers' Rubies.
require_relative "lib/versions"
include E2E

T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
BUDGET = 100 # s of this file's time after which versions left are skipped

def elapsed
  Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0
end

exit 0 if skip_without_rbpeek(Chroots::ALL.flat_map { |v| Versions.names_for("ruby#{v}") })

rubies, missing = Chroots.prepare
missing.each { |xy, why| Versions.names_for("ruby#{xy}").each { |n| skip(n, why) } }
setup_time = elapsed

rubies.each do |ruby|
  if elapsed > BUDGET
    Versions.names_for(ruby.prefix).each { |n| skip(n, "time budget spent (tools/setup-rubies.sh took #{setup_time.round} s); rerun") }
    next
  end
  Versions.check(ruby)
end
puts "# 80-versions: #{elapsed.round(1)} s (setup #{setup_time.round(1)} s)" if ENV["RBPEEK_TEST_TIMES"]
finish
