#!/usr/bin/env ruby
# mkseed-core.rb - shrink an ELF core file into a fuzzing seed: the ELF
# header, program headers and notes (NT_PRSTATUS, NT_PRPSINFO, NT_FILE, ...)
# are kept whole; every PT_LOAD keeps at most KEEP bytes of its contents
# (p_filesz shrunk, p_memsz kept), so the seed stays a few KB while its
# structure is that of a real core.
#
#   tests/fuzz/mkseed-core.rb CORE OUTPUT [KEEP]
core, out, keep = ARGV
abort "usage: mkseed-core.rb CORE OUTPUT [KEEP]" unless core && out
keep = (keep || 64).to_i
data = File.binread(core)
abort "not an ELF64 core" unless data[0, 4] == "\x7fELF".b && data.getbyte(4) == 2 && data[16, 2].unpack1("v") == 4
phoff = data[32, 8].unpack1("Q<")
phentsize, phnum = data[54, 4].unpack("vv")
phdrs = (0...phnum).map { |i| data[phoff + i * phentsize, 56].unpack("VVQ<Q<Q<Q<Q<Q<") }
# layout: ehdr, phdrs, then each segment's (kept) bytes in order
at = 64 + phnum * 56
blobs = phdrs.map do |type, flags, off, vaddr, paddr, filesz, memsz, align|
  n = type == 4 ? filesz : [filesz, keep].min   # PT_NOTE kept whole
  bytes = data[off, n] || "".b
  hdr = [type, flags, at, vaddr, paddr, n, memsz, align].pack("VVQ<Q<Q<Q<Q<Q<")
  at += bytes.bytesize
  [hdr, bytes]
end
ehdr = data[0, 64].dup
ehdr[32, 8] = [64].pack("Q<")
ehdr[40, 8] = [0].pack("Q<")             # no section headers
ehdr[54, 2] = [56].pack("v")
ehdr[58, 6] = [0, 0, 0].pack("vvv")
File.binwrite(out, ehdr + blobs.map(&:first).join + blobs.map(&:last).join)
