// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_verify.c - store_verify_seg(), the scanner `sprocket-broker
 * --verify` runs over every segment's bytes (store/verify.c).
 *
 * The first byte picks a segment size (the input's length, or more: a
 * truncated file); the rest is the segment. Oracles: the damaged ranges
 * come in order, do not overlap, lie inside the bytes given and add up to
 * what the result says; the end lies inside the segment.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	uint64_t len;
	uint64_t last_hi;
	uint32_t spans;
	uint64_t bytes;
};

static void
fz_bad(void *arg, uint64_t lo, uint64_t hi, const char *why)
{
	struct fz *f = arg;

	if (lo < f->last_hi || hi <= lo || hi > f->len || why == NULL || why[0] == '\0')
		abort();
	f->last_hi = hi;
	f->spans++;
	f->bytes += hi - lo;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_verify_seg_res res;
	struct fz f = {0};
	uint64_t seg;

	if (size < 1)
		return 0;
	seg = size - 1 + (uint64_t)(data[0] & 0x7f) * 64;
	if (seg < 8)
		return 0;
	f.len = size - 1;
	if (store_verify_seg(data + 1, size - 1, seg, data[0] >> 7, (uint64_t)data[0] * seg, &res,
			     fz_bad, &f) != 0)
		abort();
	if (res.spans != f.spans || res.bytes != f.bytes || res.end > f.len)
		abort();
	return 0;
}
