# frozen_string_literal: true
#
# ready.rb - shared by the `rbpeek record` targets (tests/e2e/70-record.rb).
# Unlike tests/targets/*.rb these keep running Ruby code (or exit) after they
# are ready: they are profiled, not snapshotted.
#
# RBPEEK_READY=FILE: write "PID\n" to FILE (atomically) when ready; without
# it (spawn mode), ready! does nothing.
module RecordTarget
  module_function

  def ready!
    file = ENV["RBPEEK_READY"] or return
    tmp = "#{file}.tmp#{$$}"
    File.write(tmp, "#{$$}\n")
    File.rename(tmp, file)
  end
end
