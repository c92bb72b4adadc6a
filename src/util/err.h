/*
 * err.h - error values shared by every layer of the rbpeek core.
 *
 * The core never prints and never exits: a function that can fail returns
 * an int that is RBP_OK (0) or a negative RBP_E* code.  The front end turns
 * codes into words (rbp_strerror) and into exit codes (see src/cli).
 *
 * Codes are grouped by the layer that usually produces them, but any layer
 * may pass a lower layer's code up unchanged.
 */
#ifndef RBP_UTIL_ERR_H
#define RBP_UTIL_ERR_H

enum rbp_err {
	RBP_OK = 0,

	/* generic */
	RBP_ENOMEM = -1,    /* allocation failed */
	RBP_EINVAL = -2,    /* bad argument (a bug in the caller) */
	RBP_EIO = -3,       /* read/write error on a local file */

	/* proc: the target as memory */
	RBP_ENOPROC = -10,  /* no such process, or it exited */
	RBP_EPERM = -11,    /* not allowed to read or trace the process */
	RBP_EFAULT = -12,   /* address not mapped in the target */
	RBP_ENOFILE = -13,  /* a file the target maps cannot be opened */
	RBP_EBADELF = -14,  /* not an ELF file, or a corrupt one */
	RBP_EBADCORE = -15, /* not a core file, or truncated */
	RBP_ENOSYM = -16,   /* symbol not found */
	RBP_EPTRACE = -17,  /* ptrace refused for a reason other than EPERM */
	RBP_ENOUPROBE = -18, /* the kernel offers no uprobe perf events */
	RBP_ENONATIVE = -19, /* built without elfutils (NATIVE=0): no native stacks */
	RBP_ENOBPF = -9,    /* built without eBPF (BPF=0): no program can be loaded */

	/* ruby: the VM model */
	RBP_ENOTRUBY = -20, /* no Ruby interpreter found in the target */
	RBP_EVERSION = -21, /* Ruby version has no layout table */
	RBP_ENOVM = -22,    /* the VM could not be located or validated */
	RBP_ECORRUPT = -23, /* VM data failed a consistency check */
	RBP_ETOODEEP = -24, /* stack deeper than the walker's limit */
	RBP_ENOPROBE = -25, /* no allocation probe point found in this Ruby build */
	RBP_ENODWARF = -26, /* --layout=dwarf: no usable DWARF for Ruby's structures */
	RBP_ELAYOUT = -27,  /* the layout table does not fit the process (validate.c) */
	RBP_ENOTREADY = -28, /* the VM is not set up yet, or torn down (what was read
			      * says so: a null VM pointer, no main thread yet) */
	RBP_ETORN = -29,    /* a stack changed while it was read without stopping, or a
			     * label read late could not be verified: the sample is dropped */

	/* profile */
	RBP_EBADRAW = -30,  /* not a valid raw profile file (corrupt, truncated) */
	RBP_ERAWBIG = -31,  /* a raw file that expands far beyond its size (a bomb) */

	/* network (the agent's HTTP client and metrics endpoint) */
	RBP_EURL = -40,     /* not an http[s]://HOST[:PORT][/PATH] URL */
	RBP_ENET = -41,     /* name not resolved, connection refused or reset */
	RBP_ETIMEOUT = -42, /* the peer did not answer in time */
	RBP_EHTTP = -43,    /* not an HTTP/1.x response, or one cut short */
	RBP_ETLS = -44,     /* TLS: the server's certificate refused, or the handshake failed */
	RBP_ENOTLS = -45,   /* built without TLS (TLS=0): https cannot be used */
};

/* A static English description of an error code ("no such process"). */
const char *rbp_strerror(int err);

#endif
