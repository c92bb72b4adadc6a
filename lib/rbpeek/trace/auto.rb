# frozen_string_literal: true

# Loaded by `rbpeek trace` through RUBYOPT: start tracing now and save the
# whole run to $RBPEEK_TRACE_OUT when the program exits.  RBPEEK_TRACE_FORMAT
# (perfetto|json), RBPEEK_TRACE_BUFFER (events per thread) and
# RBPEEK_TRACE_C_CALLS=0 tune it.
begin
  require "rbpeek/trace"
rescue LoadError => e
  abort "rbpeek: error: #{e.message}"
end

if (out = ENV.delete("RBPEEK_TRACE_OUT"))
  format = (ENV.delete("RBPEEK_TRACE_FORMAT") || "perfetto").to_sym
  size = Integer(ENV.delete("RBPEEK_TRACE_BUFFER") || RbPeek::Trace::DEFAULT_BUFFER_SIZE)
  c_calls = ENV.delete("RBPEEK_TRACE_C_CALLS") != "0"
  # Children (system, spawn) must not trace into the same file.
  ENV["RUBYOPT"] = ENV["RUBYOPT"].to_s.split.reject { |o| o.include?("rbpeek/trace/auto") }.join(" ")
  pid = Process.pid
  RbPeek::Trace.start(buffer_size: size, c_calls: c_calls)
  at_exit do
    if Process.pid == pid
      RbPeek::Trace.save(out, format: format)
      RbPeek::Trace.stop
    end
  end
end
