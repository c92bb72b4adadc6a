#include "util/vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

int rbp_grow(void *v, size_t *cap, size_t need, size_t elem)
{
	void *old, *nv;
	size_t ncap = *cap ? *cap : 16;

	if (need <= *cap)
		return RBP_OK;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return RBP_ENOMEM;
		ncap *= 2;
	}
	if (elem && ncap > SIZE_MAX / elem)
		return RBP_ENOMEM;
	memcpy(&old, v, sizeof(old));
	if (!(nv = realloc(old, ncap * elem)))
		return RBP_ENOMEM;
	memcpy(v, &nv, sizeof(nv));
	*cap = ncap;
	return RBP_OK;
}
