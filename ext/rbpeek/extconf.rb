# frozen_string_literal: true

# extconf.rb - what `gem install rbpeek` (and Bundler) runs to build the gem:
# the rbpeek command line tool and the tracer extension (rbpeek/trace_ext),
# both with the project's own Makefile from the sources the gem ships.
#
# 1. Checks what building needs, with the compiler and flags the build will
#    use ($CC, default cc; $CPPFLAGS): make, a C compiler, zlib.h, Ruby's
#    headers, the kernel's headers (<asm/unistd.h>).  When anything is
#    missing it stops with ONE message naming the Debian packages to
#    install.  libdw (elfutils) is optional: without it rbpeek is built with
#    NATIVE=0 and says so (--native then explains itself); so is eBPF
#    (libbpf-dev, clang, bpftool): without it BPF=0, and the warning names them.
# 2. Writes a Makefile here for RubyGems' `make clean`, `make`,
#    `make install`:
#      make          the project's Makefile (BUILD=./build, RUBY=this Ruby,
#                    WERROR= so that a newer compiler's new warning does not
#                    stop an install): build/rbpeek and build/ext
#      make tracer   only the tracer extension
#      make install  $(sitearchdir)/rbpeek/trace_ext.so (require "rbpeek/trace")
#                    and $(sitearchdir)/rbpeek/cli/: the binary with its
#                    tracer next to it (ext/), where `rbpeek trace` finds it;
#                    the gem's bin/rbpeek runs that binary; then the build
#                    directory goes (older RubyGems leave it behind)
#    RubyGems gives sitearchdir a directory of its own and moves what is
#    installed there into the gem's extension directory.
require "rbconfig"
require "shellwords"

root = File.expand_path("../..", __dir__)
abort "rbpeek: rbpeek needs Linux (it reads /proc and uses ptrace)" unless RUBY_PLATFORM.include?("linux")
unless File.file?(File.join(root, "Makefile")) && File.directory?(File.join(root, "src"))
  abort "rbpeek: #{root} has no Makefile or src/ (broken gem or checkout)"
end

cc = (ENV["CC"] || "cc").shellsplit
cppflags = (ENV["CPPFLAGS"] || "").shellsplit
cfg = RbConfig::CONFIG
ruby_dev = "ruby#{cfg['MAJOR']}.#{cfg['MINOR']}-dev"
ruby_inc = ["-I#{cfg['rubyhdrdir']}", "-I#{cfg['rubyarchhdrdir']}"]

# Whether the compiler finds header with these flags.
def header?(cc, flags, header)
  IO.popen([*cc, *flags, "-E", "-x", "c", "-", "-o", File::NULL], "w", err: File::NULL) do |io|
    io.puts "#include <#{header}>"
  end
  $?.success?
rescue SystemCallError # no such compiler
  false
end

def command?(argv)
  system(*argv, out: File::NULL, err: File::NULL)
rescue SystemCallError
  false
end

# [what is missing, the Debian package that brings it]
missing = []
make = (ENV["MAKE"] || "make").shellsplit
missing << ["make", "make"] unless command?([*make, "--version"])
if !command?([*cc, "--version"])
  missing << ["a C compiler (#{cc.join(' ')})", "gcc"]
else
  missing << ["the C library's headers", "libc6-dev"] unless header?(cc, cppflags, "stdio.h")
  missing << ["zlib.h", "zlib1g-dev"] unless header?(cc, cppflags, "zlib.h")
  missing << ["the kernel's headers (asm/unistd.h)", "linux-libc-dev"] unless header?(cc, cppflags, "asm/unistd.h")
  missing << ["Ruby #{RUBY_VERSION}'s headers (ruby.h)", ruby_dev] unless header?(cc, cppflags + ruby_inc, "ruby.h")
end
unless missing.empty?
  abort "rbpeek: cannot build: #{missing.map(&:first).join(', ')} not found; " \
        "install (Debian, Ubuntu): apt-get install #{missing.map(&:last).uniq.join(' ')}"
end

native = header?(cc, cppflags, "elfutils/libdwfl.h")
if native
  puts "rbpeek: building with libdw (elfutils): --native available"
else
  puts "rbpeek: libdw (elfutils/libdwfl.h) not found: building WITHOUT --native " \
       "(native stacks); for it: apt-get install libdw-dev, then reinstall the gem"
end

# eBPF (exact allocation sites, --sampler=bpf) needs libbpf's headers, clang
# (-target bpf) and bpftool (skeletons); without them rbpeek is built with
# BPF=0 and says so (it falls back as where the kernel refuses eBPF).
clang = (ENV["CLANG"] || "clang").shellsplit
bpftool = ENV["BPFTOOL"] || ["bpftool", "/usr/sbin/bpftool"].find { |t| command?([t, "version"]) }
bpf_missing = []
bpf_missing << "libbpf-dev" unless header?(cc, cppflags, "bpf/libbpf.h")
bpf_missing << "clang" unless command?([*clang, "--version"])
bpf_missing << "bpftool" unless bpftool
bpf = bpf_missing.empty?
if bpf
  puts "rbpeek: building with eBPF (libbpf, clang, bpftool)"
else
  puts "rbpeek: #{bpf_missing.join(', ')} not found: building WITHOUT eBPF (approximate " \
       "allocation sites, no --sampler=bpf); for it: apt-get install #{bpf_missing.join(' ')}, then reinstall the gem"
end

# https for the agent needs OpenSSL's headers (libssl-dev); without them
# rbpeek is built with TLS=0 and its agent refuses https URLs.
tls = header?(cc, cppflags, "openssl/ssl.h")
if tls
  puts "rbpeek: building with OpenSSL: the agent speaks https"
else
  puts "rbpeek: openssl/ssl.h not found: building WITHOUT https for the agent; " \
       "for it: apt-get install libssl-dev, then reinstall the gem"
end

here = Dir.pwd
q = ->(s) { s.to_s.gsub("$", "$$").shellescape }
File.write(File.join(here, "Makefile"), <<~MAKE)
  # Written by #{File.basename(__FILE__)} for `gem install` (make clean, make,
  # make install); it runs the project's Makefile.
  ROOT        := #{q[root]}
  BUILD       := #{q[File.join(here, 'build')]}
  sitearchdir ?= #{q[cfg['sitearchdir']]}
  DEST         = $(sitearchdir)/rbpeek
  ARGS        := BUILD=$(BUILD) RUBY=#{q[RbConfig.ruby]} NATIVE=#{native ? 1 : 0} TLS=#{tls ? 1 : 0} BPF=#{bpf ? 1 : 0}#{bpf ? " BPFTOOL=#{q[bpftool]}" : ''} WERROR=

  all:
  \t$(MAKE) -C $(ROOT) $(ARGS) $(BUILD)/rbpeek ext

  tracer:
  \t$(MAKE) -C $(ROOT) $(ARGS) ext

  install: all
  \tmkdir -p $(DEST)/cli
  \tcp $(BUILD)/ext/rbpeek/trace_ext.so $(DEST)/trace_ext.so
  \tcp $(BUILD)/rbpeek $(DEST)/cli/rbpeek
  \trm -rf $(DEST)/cli/ext
  \tcp -R $(BUILD)/ext $(DEST)/cli/ext
  \trm -rf $(BUILD)

  clean:
  \trm -rf $(BUILD)

  .PHONY: all tracer install clean
MAKE
