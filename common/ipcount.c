// SPDX-License-Identifier: Apache-2.0
/*
 * ipcount.c - connections per source address (ipcount.h): linear probing,
 * deletion by backward shift (no tombstones), at most half full.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/ipcount.h"

static uint32_t
slot_of(const struct ipcount *t, uint32_t ip)
{
	return (uint32_t)((ip * 0x9E3779B1u) >> 7) & t->mask;
}

int
ipcount_init(struct ipcount *t, uint32_t max_addrs)
{
	uint32_t cap = 16;

	while (cap < 2u * max_addrs && cap < (1u << 30))
		cap <<= 1;
	t->v = calloc(cap, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	t->mask = cap - 1;
	t->used = 0;
	return 0;
}

void
ipcount_fini(struct ipcount *t)
{
	free(t->v);
	t->v = NULL;
}

uint32_t
ipcount_get(const struct ipcount *t, uint32_t ip)
{
	for (uint32_t i = slot_of(t, ip);; i = (i + 1) & t->mask) {
		if (t->v[i].ip == ip)
			return t->v[i].n;
		if (t->v[i].ip == 0)
			return 0;
	}
}

uint32_t
ipcount_add(struct ipcount *t, uint32_t ip)
{
	for (uint32_t i = slot_of(t, ip);; i = (i + 1) & t->mask) {
		if (t->v[i].ip == ip)
			return ++t->v[i].n;
		if (t->v[i].ip == 0) {
			if (t->used > t->mask / 2)
				return 0; /* at most half full: probes stay short, and end */
			t->used++;
			t->v[i].ip = ip;
			t->v[i].n = 1;
			return 1;
		}
	}
}

void
ipcount_sub(struct ipcount *t, uint32_t ip)
{
	uint32_t i = slot_of(t, ip);

	while (t->v[i].ip != ip) {
		if (t->v[i].ip == 0)
			return;
		i = (i + 1) & t->mask;
	}
	if (--t->v[i].n > 0)
		return;
	/* backward shift: move later entries of the run into the hole */
	for (uint32_t j = (i + 1) & t->mask; t->v[j].ip != 0; j = (j + 1) & t->mask) {
		uint32_t home = slot_of(t, t->v[j].ip);

		/* j's entry may move to i if its home is not in (i, j] cyclically */
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			t->v[i] = t->v[j];
			i = j;
		}
	}
	t->v[i].ip = 0;
	t->v[i].n = 0;
	t->used--;
}
