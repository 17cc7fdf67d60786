// SPDX-License-Identifier: Apache-2.0
/*
 * ring.c - creation of the SPSC rings in ring.h (the fast paths are inline).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/ring.h"

int
ring_create(uint32_t cap, struct ring **out)
{
	struct ring *r;
	size_t sz;

	if (cap < 2 || cap > (1u << 30) || (cap & (cap - 1)))
		return -EINVAL;
	sz = sizeof(*r) + (size_t)cap * sizeof(void *);
	sz = (sz + 63) & ~(size_t)63;
	r = aligned_alloc(64, sz);
	if (!r)
		return -ENOMEM;
	memset(r, 0, sz);
	r->mask = cap - 1;
	*out = r;
	return 0;
}

void
ring_free(struct ring *r)
{
	free(r);
}
