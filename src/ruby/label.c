#include "ruby/label.h"

#include <stdio.h>
#include <string.h>

int rbp_label_qualify(const char *label, const char *base_label, const char *prefix,
		      char *buf, size_t cap)
{
	size_t llen = strlen(label), blen = strlen(base_label);

	if (!cap)
		return -1;
	if (blen > llen || strcmp(label + llen - blen, base_label) ||
	    llen + strlen(prefix) + 1 > cap) {
		snprintf(buf, cap, "%s", label);
		return -1;
	}
	memcpy(buf, label, llen - blen);
	strcpy(buf + llen - blen, prefix);
	strcat(buf, base_label);
	return 0;
}
