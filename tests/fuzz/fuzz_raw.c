/*
 * fuzz_raw.c - the raw-file reader (src/profile/raw.c) on mutated raw
 * files, and every output writer on whatever profile it accepts.  The input
 * is read through zlib's gzread, which passes data that is not gzip through
 * as it is: seeds are raw files stored uncompressed (`gzip -dc`), so
 * mutations reach the structure rather than break the compression.
 * Writers write to a memory stream that is thrown away, each only when its
 * estimated output is within the bound `rbpeek report` puts on a raw file
 * of this size (a mutated file may well be an output bomb: report refuses
 * it, and so must the fuzzer, or it runs out of memory on a good find).
 */
#include "fuzz.h"
#include "output/output.h"
#include "profile/raw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rbp_profile p;
	struct rbp_output_opts o = { .title = "fuzz" };

	if (!rbp_raw_read(fuzz_file(data, size), &p)) {
		for (const struct rbp_format *f = rbp_formats; f->name; f++) {
			uint64_t est, max = (uint64_t)size * 1024 + (64u << 20);
			if (rbp_output_estimate(&p, f, max, &est) || est > max)
				continue;
			char *buf = NULL;
			size_t len = 0;
			FILE *out = open_memstream(&buf, &len);
			if (!out)
				abort();
			f->write(&p, &o, out);
			fclose(out);
			free(buf);
		}
	}
	rbp_profile_free(&p);
	return 0;
}
