#include "util/err.h"

const char *rbp_strerror(int err)
{
	switch ((enum rbp_err)err) {
	case RBP_OK: return "success";
	case RBP_ENOMEM: return "out of memory";
	case RBP_EINVAL: return "invalid argument";
	case RBP_EIO: return "input/output error";
	case RBP_ENOPROC: return "no such process";
	case RBP_EPERM: return "permission denied";
	case RBP_EFAULT: return "address not mapped in the target";
	case RBP_ENOFILE: return "cannot open a file the target maps";
	case RBP_EBADELF: return "not a valid ELF file";
	case RBP_EBADCORE: return "not a valid core file";
	case RBP_ENOSYM: return "symbol not found";
	case RBP_EPTRACE: return "ptrace failed";
	case RBP_ENOUPROBE: return "the kernel has no uprobe perf events";
	case RBP_ENONATIVE: return "this rbpeek was built without libdw (elfutils): no native stacks";
	case RBP_ENOBPF: return "this rbpeek was built without eBPF (libbpf-dev, clang or bpftool was missing)";
	case RBP_ENOTRUBY: return "not a Ruby process";
	case RBP_EVERSION: return "unsupported Ruby version";
	case RBP_ELAYOUT: return "the memory layout does not match this Ruby";
	case RBP_ENOVM: return "Ruby VM not found";
	case RBP_ENOTREADY: return "the Ruby VM is not set up yet (or already torn down)";
	case RBP_ECORRUPT: return "inconsistent Ruby VM data";
	case RBP_ETOODEEP: return "stack too deep";
	case RBP_ETORN: return "the stack changed while it was read";
	case RBP_ENOPROBE: return "no allocation probe point in this Ruby build";
	case RBP_ENODWARF: return "no usable DWARF debug information for Ruby's structures";
	case RBP_EBADRAW: return "not a valid rbpeek raw file";
	case RBP_ERAWBIG: return "it expands to far more than rbpeek writes in a raw file of its size "
				 "(a decompression bomb?)";
	case RBP_EURL: return "not an http[s]://HOST[:PORT][/PATH] URL";
	case RBP_ENET: return "cannot connect";
	case RBP_ETIMEOUT: return "timed out";
	case RBP_EHTTP: return "not a valid HTTP response";
	case RBP_ETLS: return "TLS handshake failed";
	case RBP_ENOTLS: return "built without TLS (make TLS=0): https is not available";
	}
	return "unknown error";
}
