/*
 * native_none.c - native.h for a build without elfutils (make NATIVE=0,
 * what the gem does when libdw-dev is missing): nothing can be unwound,
 * and rbp_native_open says why (RBP_ENONATIVE).  The rest of rbpeek is
 * the same; the CLI refuses --native before it starts anything.
 */
#include "proc/native.h"
#include "util/err.h"

int rbp_native_available(void)
{
	return 0;
}

int rbp_native_open(struct rbp_target *t, struct rbp_native **out)
{
	(void)t;
	*out = NULL;
	return RBP_ENONATIVE;
}

void rbp_native_close(struct rbp_native *n)
{
	(void)n;
}

int rbp_native_unwind(struct rbp_native *n, pid_t tid, uint64_t *pcs, size_t cap, size_t *count)
{
	*count = 0;
	return RBP_ENONATIVE;
}

int rbp_native_symbol(struct rbp_native *n, uint64_t pc, const struct rbp_native_sym **out)
{
	return RBP_ENONATIVE;
}

void rbp_native_stats(const struct rbp_native *n, struct rbp_native_stats *out)
{
	*out = (struct rbp_native_stats){ 0 };
}

void rbp_native_stats_add(const struct rbp_native *n, struct rbp_native_stats *sum)
{
	(void)n;
	(void)sum;
}

void rbp_native_refresh(struct rbp_native *n)
{
	(void)n;
}
