// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_meta_delay.c - delayOffset.json's reader (store/meta_delay.c) on
 * arbitrary bytes. Oracles beyond "no crash, no overread" (ASan): an
 * accepted text yields offsets >= 0 or -1 (absent) only, and writing them
 * back and reading that again gives the same table.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/meta_delay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N 64

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t off[N], again[N];
	static char buf[N * 32 + 32];
	long len;

	if (meta_delay_parse((const char *)data, size, off, N) != 0)
		return 0;
	for (size_t i = 0; i < N; i++)
		if (off[i] < -1)
			abort();
	len = meta_delay_json(off, N, buf, sizeof(buf));
	if (len < 0 || meta_delay_parse(buf, (size_t)len, again, N) != 0 ||
	    memcmp(off, again, sizeof(off)) != 0)
		abort();
	return 0;
}
