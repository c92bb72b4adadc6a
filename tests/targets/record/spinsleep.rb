# frozen_string_literal: true
#
# spinsleep.rb - three threads: "spinner" spins on one line (always on a CPU,
# always holding the GVL), "sleeper" sleeps forever, and the main thread
# waits in Thread#join.  --gvl and --on-cpu keep only the spinner.  The
# spinner signals readiness once the other two sleep, so that nothing but the
# spinner needs the GVL afterwards.
require_relative "ready"

$spin = 0
main = Thread.current
sleeper = Thread.new do
  Thread.current.name = "sleeper"
  sleep
end
Thread.new do
  Thread.current.name = "spinner"
  Thread.pass until main.status == "sleep" && sleeper.status == "sleep"
  RecordTarget.ready!
  $spin += 1 while true # SPIN
end
sleeper.join
