# frozen_string_literal: true

# RbPeek::Trace - an in-process flight recorder of method calls, GC steps
# and GVL states, saved as a Perfetto trace (or Chrome JSON).
#
#   require "rbpeek/trace"
#   RbPeek::Trace.start                       # hooks installed once
#   loop do
#     RbPeek::Trace.reset                     # the window starts here
#     handle(request)
#     RbPeek::Trace.save("slow.pftrace") if slow?   # tracing goes on
#   end
#
# The recording side is the C extension rbpeek/trace_ext (ext/rbpeek);
# this file holds the keyword-argument API.  See docs/trace.md.
require "rbconfig"

module RbPeek
  module Trace
    # An installed rbpeek (make install, the Debian package) keeps the
    # extension built for each Ruby ABI in <this lib>/<ABI>/rbpeek/; the
    # gem and the build tree keep one next to this file, on $LOAD_PATH.
    def self.load_extension
      abi = RbConfig::CONFIG["ruby_version"]
      lib = File.expand_path("..", __dir__)
      installed = File.join(lib, abi, "rbpeek", "trace_ext.so")
      return require(installed) if File.exist?(installed)

      require "rbpeek/trace_ext"
    rescue LoadError => e
      raise if File.exist?(installed)

      built = Dir[File.join(lib, "*", "rbpeek", "trace_ext.so")].map { |f| f.split("/")[-3] }
      raise LoadError, "rbpeek's tracer is not built for this Ruby (#{RUBY_VERSION}, ABI #{abi}, " \
                       "#{RbConfig.ruby})#{built.empty? ? '' : "; #{lib} has it for Ruby ABI #{built.sort.join(', ')}"}. " \
                       "Build it for this Ruby: in rbpeek's source, make install-tracer RUBY=#{RbConfig.ruby} " \
                       "(with rbpeek's PREFIX), or gem install rbpeek; for the distribution's ruby, the " \
                       "rbpeek-tracer package built on this release. (#{e.message})"
    end
    private_class_method :load_extension
  end
end
RbPeek::Trace.send(:load_extension)

module RbPeek
  module Trace
    FORMATS = { perfetto: 0, json: 1 }.freeze
    DEFAULT_BUFFER_SIZE = 1 << 20

    module_function

    # Start recording.  buffer_size: events kept per thread (rounded up to
    # a power of two, 16 bytes each); c_calls: also C methods; blocks: also
    # block calls; gc: GC steps and phases; gvl: GVL states (Ruby 3.2+);
    # kernel: syscalls and scheduler states (needs CAP_PERFMON or root;
    # under `sudo rbpeek trace`, rbpeek reads them for the program; without
    # them a warning says so and the rest is recorded).
    # With a block: record while it runs, then stop; returns its value.
    def start(buffer_size: DEFAULT_BUFFER_SIZE, c_calls: true, blocks: false, gc: true, gvl: true, kernel: true)
      _start(Integer(buffer_size), c_calls, blocks, gc, gvl, kernel, false)
      return true unless block_given?

      begin
        yield
      ensure
        stop
      end
    end

    # Write the window (since the last reset or start) to path.  format:
    # :perfetto (default) or :json (the default for a path ending in .json).
    # Tracing goes on.
    def save(path, format: nil)
      path = path.to_path if path.respond_to?(:to_path)
      format ||= path.to_s.end_with?(".json") ? :json : :perfetto
      code = FORMATS.fetch(format.to_sym) do
        raise ArgumentError, "unknown trace format #{format.inspect} (use :perfetto or :json)"
      end
      _save(path.to_s, code)
    end

    # Record the block and save it to path (also when it raises).
    def trace(path, format: nil, **options)
      start(**options)
      reset
      begin
        yield
      ensure
        begin
          save(path, format: format)
        ensure
          stop
        end
      end
    end
  end
end
