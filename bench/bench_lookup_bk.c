// SPDX-License-Identifier: Apache-2.0
/*
 * bench_lookup_bk.c - the broker's topic table for bench_lookup.cpp (C, since
 * bk_priv.h uses C11 atomics that C++ does not take).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bk_priv.h"
#include "bench_lookup_bk.h"

void *
bench_bk_table(unsigned n)
{
	struct bk *bk = calloc(1, sizeof(*bk));

	if (bk == NULL)
		abort();
	for (unsigned k = 0; k < n; k++) {
		struct bk_topic *t = calloc(1, sizeof(*t)), *old = NULL;
		struct bk_ttab *old_tab;

		if (t == NULL)
			abort();
		snprintf(t->name, sizeof(t->name), "BenchTopic-%05u", k);
		t->name_len = (uint32_t)strlen(t->name);
		t->hash = bk_name_hash(t->name, t->name_len);
		if (bk_ttab_put(&bk->ttab, t, &old_tab, &old) != 0)
			abort();
		bk_ttab_free(old_tab); /* no reader yet: no grace period */
	}
	return bk;
}

const void *
bench_bk_find(const void *bk, const char *name, size_t len)
{
	return bk_topic_find(bk, name, len);
}

void
bench_bk_free(void *p)
{
	struct bk *bk = p;

	for (uint32_t k = 0; bk->ttab && k <= bk->ttab->mask; k++)
		free(bk->ttab->slot[k]);
	bk_ttab_free(bk->ttab);
	free(bk);
}
