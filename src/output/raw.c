/* raw.c - the raw format as an output format (`-f raw`). */
#include "output/output.h"
#include "profile/raw.h"

int rbp_write_raw(const struct rbp_profile *p, const struct rbp_output_opts *o, FILE *out)
{
	return rbp_raw_write(p, out);
}
