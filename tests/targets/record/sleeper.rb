# frozen_string_literal: true
#
# sleeper.rb - the only thread sleeps forever: never on a CPU.
require_relative "ready"

RecordTarget.ready!
sleep
