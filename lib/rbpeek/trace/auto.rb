# frozen_string_literal: true

# Loaded by `rbpeek trace` through RUBYOPT: start tracing now and save the
# whole run to $RBPEEK_TRACE_OUT when the program exits.  RBPEEK_TRACE_FORMAT
# (perfetto|json), RBPEEK_TRACE_BUFFER (events per thread) and
# RBPEEK_TRACE_C_CALLS=0 tune it.
#
# Which process traces: the one rbpeek started, whose parent is rbpeek
# ($RBPEEK_TRACE_PARENT).  An exec keeps the PID and the parent, so a chain
# of execs (bundle exec, binstubs, ruby -S, a shell script that execs ruby)
# ends in the program that traces: the settings stay in the environment and
# each Ruby along the chain starts afresh.  Processes it forks or spawns have
# another parent and are not traced (they load this file and do nothing);
# a forked copy of the traced process does not save either.
if (out = ENV["RBPEEK_TRACE_OUT"]) && Process.ppid.to_s == ENV["RBPEEK_TRACE_PARENT"]
  begin
    require "rbpeek/trace"
  rescue LoadError => e
    abort "rbpeek: error: #{e.message}"
  end
  format = (ENV["RBPEEK_TRACE_FORMAT"] || "perfetto").to_sym
  size = Integer(ENV["RBPEEK_TRACE_BUFFER"] || RbPeek::Trace::DEFAULT_BUFFER_SIZE)
  c_calls = ENV["RBPEEK_TRACE_C_CALLS"] != "0"
  pid = Process.pid
  RbPeek::Trace.start(buffer_size: size, c_calls: c_calls)
  at_exit do
    if Process.pid == pid
      RbPeek::Trace.save(out, format: format)
      RbPeek::Trace.stop
    end
  end
end
