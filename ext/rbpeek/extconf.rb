# frozen_string_literal: true

# Builds rbpeek/trace_ext (the tracer).  It compiles a few of rbpeek's own
# helpers from src/util (protobuf varints, JSON strings, hash map, arrays),
# which the gem ships next to ext/.
require "mkmf"

root = File.expand_path("../..", __dir__)
util = File.join(root, "src", "util")
abort "rbpeek: #{util} is missing (broken gem or checkout)" unless File.directory?(util)
abort "rbpeek: zlib.h not found (install zlib headers, e.g. zlib1g-dev)" unless have_header("zlib.h")
abort "rbpeek: the tracer needs Linux" unless RUBY_PLATFORM.include?("linux")

# The syscall-name table for ktrace.c, generated from this machine's kernel
# headers (<asm/unistd.h>, Debian: linux-libc-dev) into the build directory.
gen = File.join(root, "tools", "gen-syscalls.sh")
unless system("sh", gen, File.join(Dir.pwd, "rbk_syscalls.h"), RbConfig::CONFIG["CC"].split.first || "cc")
  abort "rbpeek: #{gen} failed (are the kernel headers, linux-libc-dev, installed?)"
end

$INCFLAGS << " -I#{File.join(root, 'src')} -I#{Dir.pwd}"
$CFLAGS << " -std=gnu11 -O2 -Wall -Wno-unused-parameter"
$CPPFLAGS << " -D_GNU_SOURCE"
$VPATH << util
$srcs = %w[trace.c trace_write.c ktrace.c hmap.c json.c utf8.c vec.c]
create_makefile("rbpeek/trace_ext")
