// SPDX-License-Identifier: Apache-2.0
/*
 * hist.c - HdrHistogram-style latency histogram, 3 significant digits.
 *
 * Benchmarks and the stall detector need p99.99 of latencies spanning ns to
 * seconds without storing samples, and dataplane cores record on their hot
 * path, so a record must be a few instructions with no allocation and no
 * branch on the data beyond a clamp. This is HdrHistogram's layout with a
 * unit of 1 and 2048 sub-buckets:
 *
 *   bucket 0 holds values [0, 2048) one per slot (exact);
 *   bucket b >= 1 holds [1024 << b, 2048 << b) in 1024 slots of width 2^b.
 *
 * A slot's width is at most 1/1024 of the values in it, so any value read
 * back is within 0.1% of what was recorded. Bucket b of a value v is found
 * in O(1) from its bit length: 64 - clz(v | 2047) - 11; OR-ing in the mask
 * keeps clz's argument non-zero and maps every v < 2048 to bucket 0, and
 * since the arithmetic never shifts left it cannot overflow even for
 * v = UINT64_MAX. Counts are one flat array: slot s of bucket b lives at
 * ((b + 1) << 10) + (s - 1024), bucket 0 using indexes [0, 2048).
 *
 * hist_record_corrected() can stand for up to 2^64 samples (a huge value
 * over a tiny interval), so past a few thousand samples it counts how many
 * of the arithmetic progression fall in each slot instead of looping per
 * sample: its cost is bounded by the number of slots, not the value.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/hist.h"

#define HIST_SUB_BITS 11 /* 2048 sub-buckets: values below are exact */
#define HIST_SUB_COUNT (1u << HIST_SUB_BITS)
#define HIST_SUB_MASK ((uint64_t)HIST_SUB_COUNT - 1)
#define HIST_HALF_BITS (HIST_SUB_BITS - 1)
#define HIST_HALF_COUNT (1u << HIST_HALF_BITS)

/*
 * Ownership: single writer (the recording thread); merge and queries read a
 * histogram nobody records into. Nothing here is atomic.
 */
struct hist {
	/* immutable after create */
	uint64_t highest;
	size_t counts_len;
	/* owner only */
	uint64_t total;
	uint64_t overflow;
	uint64_t min; /* UINT64_MAX while empty */
	uint64_t max;
	uint64_t counts[];
};

static inline unsigned
hist_bucket_of(uint64_t v)
{
	return (unsigned)(64 - __builtin_clzll(v | HIST_SUB_MASK) - HIST_SUB_BITS);
}

static inline size_t
hist_index_of(uint64_t v)
{
	unsigned b = hist_bucket_of(v);
	size_t sub = (size_t)(v >> b);

	/* bucket 0: sub is v itself; above, sub is in [1024, 2048). */
	return ((size_t)b << HIST_HALF_BITS) + sub;
}

/* Smallest value counted at @idx. */
static inline uint64_t
hist_lowest_at(size_t idx)
{
	size_t b = idx >> HIST_HALF_BITS;

	if (b <= 1)
		return idx; /* bucket 0, indexes [0, 2048) */
	b -= 1;
	return (uint64_t)((idx & (HIST_HALF_COUNT - 1)) + HIST_HALF_COUNT) << b;
}

/* Largest value counted at @idx; never overflows, even for the top slot. */
static inline uint64_t
hist_highest_at(size_t idx)
{
	size_t b = idx >> HIST_HALF_BITS;

	if (b <= 1)
		return idx;
	return hist_lowest_at(idx) + ((uint64_t)1 << (b - 1)) - 1;
}

int
hist_create(uint64_t highest, struct hist **out)
{
	struct hist *h;
	size_t len;

	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	if (highest < HIST_SUB_COUNT)
		return -EINVAL;
	len = hist_index_of(highest) + 1;
	h = calloc(1, sizeof(*h) + len * sizeof(h->counts[0]));
	if (h == NULL)
		return -ENOMEM;
	h->highest = highest;
	h->counts_len = len;
	h->min = UINT64_MAX;
	*out = h;
	return 0;
}

void
hist_destroy(struct hist *h)
{
	free(h);
}

void
hist_record_n(struct hist *h, uint64_t value, uint64_t count)
{
	if (SP_UNLIKELY(count == 0))
		return;
	if (SP_UNLIKELY(value > h->highest)) {
		value = h->highest;
		h->overflow += count;
	}
	h->counts[hist_index_of(value)] += count;
	h->total += count;
	if (value < h->min)
		h->min = value;
	if (value > h->max)
		h->max = value;
}

void
hist_record(struct hist *h, uint64_t value)
{
	hist_record_n(h, value, 1);
}

/*
 * Count the progression value - k*interval, k in [1, kmax] (all >= interval
 * and <= highest by the caller's choice of kmax) slot by slot, from the slot
 * of its largest term down to the slot of its smallest.
 */
static void
hist_record_progression(struct hist *h, uint64_t value, uint64_t interval, uint64_t kmin,
			uint64_t kmax)
{
	size_t top = hist_index_of(value - kmin * interval);
	size_t bottom = hist_index_of(value - kmax * interval);

	for (size_t i = top + 1; i-- > bottom;) {
		uint64_t lo = hist_lowest_at(i);
		uint64_t hi = hist_highest_at(i);
		/* lo <= v - k*i <= hi  <=>  (v - hi) / i <= k <= (v - lo) / i */
		uint64_t k_hi = (value - lo) / interval;
		uint64_t k_lo = 0;

		if (value > hi) /* ceil((v - hi) / i) without overflowing v + i */
			k_lo = (value - hi) / interval + ((value - hi) % interval != 0);
		k_lo = SP_MAX(k_lo, kmin);
		k_hi = SP_MIN(k_hi, kmax);
		if (k_hi >= k_lo)
			h->counts[i] += k_hi - k_lo + 1;
	}
	h->total += kmax - kmin + 1;
	if (value - kmax * interval < h->min)
		h->min = value - kmax * interval;
	if (value - kmin * interval > h->max)
		h->max = value - kmin * interval;
}

void
hist_record_corrected(struct hist *h, uint64_t value, uint64_t interval)
{
	uint64_t kmax;
	uint64_t kmin = 1;

	hist_record(h, value);
	if (interval == 0 || value <= interval)
		return;
	/* Missed samples value - k*interval for k = 1..kmax, all >= interval. */
	kmax = value / interval - 1;
	if (kmax == 0)
		return;
	if (value - interval > h->highest) {
		/* Terms above highest (k < kclamp) clamp into one slot at once. */
		uint64_t kclamp = (value - h->highest - 1) / interval + 1;
		uint64_t n = SP_MIN(kclamp - 1, kmax);

		hist_record_n(h, h->highest, n);
		h->overflow += n; /* recorded at highest, so not counted above */
		kmin = n + 1;
		if (kmin > kmax)
			return;
	}
	if (kmax - kmin < h->counts_len) {
		for (uint64_t k = kmin; k <= kmax; k++)
			hist_record(h, value - k * interval);
		return;
	}
	hist_record_progression(h, value, interval, kmin, kmax);
}

int
hist_merge(struct hist *dst, const struct hist *src)
{
	if (dst->highest != src->highest)
		return -EINVAL;
	if (src->total == 0)
		return 0;
	for (size_t i = 0; i < dst->counts_len; i++)
		dst->counts[i] += src->counts[i];
	dst->total += src->total;
	dst->overflow += src->overflow;
	dst->min = SP_MIN(dst->min, src->min);
	dst->max = SP_MAX(dst->max, src->max);
	return 0;
}

void
hist_reset(struct hist *h)
{
	memset(h->counts, 0, h->counts_len * sizeof(h->counts[0]));
	h->total = 0;
	h->overflow = 0;
	h->min = UINT64_MAX;
	h->max = 0;
}

uint64_t
hist_count(const struct hist *h)
{
	return h->total;
}

uint64_t
hist_min(const struct hist *h)
{
	return h->total == 0 ? 0 : h->min;
}

uint64_t
hist_max(const struct hist *h)
{
	return h->max;
}

uint64_t
hist_overflow(const struct hist *h)
{
	return h->overflow;
}

double
hist_mean(const struct hist *h)
{
	double sum = 0;

	if (h->total == 0)
		return 0;
	/* Each slot counts at its midpoint, as HdrHistogram's getMean(). */
	for (size_t i = 0; i < h->counts_len; i++) {
		uint64_t lo;

		if (h->counts[i] == 0)
			continue;
		lo = hist_lowest_at(i);
		sum += (double)h->counts[i] * ((double)lo + (double)(hist_highest_at(i) - lo) / 2);
	}
	return sum / (double)h->total;
}

/*
 * ceil(@p / 100 * @total), at least 1 and at most @total. A product within
 * 1e-12 (relative) above an integer counts as that integer: 99.9% of 1000
 * must be rank 999 even though 99.9 is not exact in binary.
 */
static uint64_t
hist_rank(double p, uint64_t total)
{
	double x = p * (double)total / 100.0;
	uint64_t fl;

	if (!(x > 0))
		return 1; /* also NaN */
	if (x >= (double)total)
		return total;
	fl = (uint64_t)x;
	if (x - (double)fl > x * 1e-12)
		fl++;
	return fl == 0 ? 1 : SP_MIN(fl, total);
}

uint64_t
hist_percentile(const struct hist *h, double p)
{
	uint64_t rank;
	uint64_t seen = 0;

	if (h->total == 0)
		return 0;
	if (p >= 100)
		return h->max;
	rank = hist_rank(p, h->total);
	for (size_t i = 0; i < h->counts_len; i++) {
		seen += h->counts[i];
		if (seen >= rank)
			return SP_MIN(hist_highest_at(i), h->max);
	}
	return h->max;
}
