// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_meta_timer.c - timerCheck's reader (store/meta_timer.c) on arbitrary
 * bytes. Oracles beyond "no crash, no overread" (ASan): an accepted text
 * gives marks that are absent (-1) or hold numbers <= INT64_MAX, and writing
 * them back and reading that again gives the same marks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/meta_timer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N 8

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_timer_mark m[N], again[N];
	static char buf[N * 80 + 64];
	long len;

	if (meta_timer_parse((const char *)data, size, m, N) != 0)
		return 0;
	for (size_t i = 0; i < N; i++)
		if (m[i].done_ms < -1 || m[i].done_qoff > INT64_MAX || m[i].done_log > INT64_MAX)
			abort();
	len = meta_timer_text(META_TIMER_HEADER, m, N, buf, sizeof(buf));
	if (len < 0 || meta_timer_parse(buf, (size_t)len, again, N) != 0 ||
	    memcmp(m, again, sizeof(m)) != 0)
		abort();
	return 0;
}
