# frozen_string_literal: true
# e2e-timeout: 600
# e2e-needs: debsrc (the Rubies built from Debian's source: tools/setup-tests.sh)
#
# 83-found-rubies.rb - the checks of lib/versions.rb (oracle, snapshot,
# record, core, inspect, discovery) on every Ruby of this machine that is
# not Debian's: those version managers installed (/opt/rubies/*, ~/.rubies/*,
# ~/.rbenv/versions/*, ~/.local/share/mise/installs/ruby/*,
# ~/.asdf/installs/ruby/*), those named in $RBPEEK_TEST_RUBIES (a
# colon-separated list of ruby executables or prefixes), and the Debian-source
# build of tools/build-debian-ruby.sh (its yjit variant).  A developer who
# builds Ruby 4.0 or 4.1 into /opt/rubies gets it tested here.  Each Ruby's
# tests are named "ruby<version>@<where>/..." (ruby4.0.5@opt:4.0.5/oracle/nested);
# with none found, one skip says where the tests looked.
require_relative "lib/versions"
include E2E

T0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
BUDGET = 90 # s per Ruby found (this file's timeout: 600 s)

def elapsed
  Process.clock_gettime(Process::CLOCK_MONOTONIC) - T0
end

exit 0 if skip_without_rbpeek(["found-rubies"])
unless root?
  skip("found-rubies", "needs root (the targets run under chroot /)")
  exit 0
end

rubies, where = Chroots.found
if rubies.empty?
  skip("found-rubies", "no Ruby found in #{where}")
  exit 0
end

budget = [BUDGET * rubies.size, 540].min
rubies.each do |ruby|
  if elapsed > budget
    Versions.names_for(ruby.prefix).each { |n| skip(n, "time budget of #{budget} s spent on #{rubies.size} Rubies; rerun") }
    next
  end
  Versions.check(ruby)
end
puts "# 83-found-rubies: #{elapsed.round(1)} s, #{rubies.size} Rubies" if ENV["RBPEEK_TEST_TIMES"]
finish
