/* SPDX-License-Identifier: Apache-2.0 */
/*
 * phist.h - a latency histogram of power-of-two buckets, cheap enough to
 * record on a dataplane core and shaped for Prometheus (httpd_prom_histogram()).
 *
 * Bucket 0 counts values up to 2^PHIST_MIN_SHIFT ns (256 ns), bucket i in
 * 1 .. PHIST_BUCKETS-1 the values in (2^(i-1), 2^i] times that, and bucket
 * PHIST_BUCKETS the rest (+Inf): the finite bounds run from 256 ns to 2.1 s.
 * A record is a count of leading zeros, an increment and an add: no lock, no
 * syscall, no allocation. common/hist.h is the precise one (3 significant
 * digits) for benchmarks; this one answers "how many under 4 us" for ever at a
 * fixed 200 bytes.
 *
 * Ownership: one writer (the recording thread) with plain stores; readers on
 * other threads load each counter relaxed and may see a record half done
 * (a bucket counted, the sum not yet): harmless for monitoring.
 */
#ifndef SP_COMMON_PHIST_H
#define SP_COMMON_PHIST_H

#include <stdint.h>

#define PHIST_MIN_SHIFT 8
#define PHIST_BUCKETS 24

struct phist {
	uint64_t b[PHIST_BUCKETS + 1];
	uint64_t sum_ns;
};

/* The upper bound of bucket @i < PHIST_BUCKETS, in ns. */
static inline uint64_t
phist_bound_ns(unsigned i)
{
	return 1ull << (PHIST_MIN_SHIFT + i);
}

/* Context: the histogram's one writer; non-blocking, no syscall. */
static inline void
phist_record(struct phist *h, uint64_t ns)
{
	unsigned i;

	if ((int64_t)ns <= 0) /* clocks of two threads: a few ns apart */
		ns = 1;
	i = ns <= (1u << PHIST_MIN_SHIFT)
		    ? 0
		    : 64u - (unsigned)__builtin_clzll(ns - 1) - PHIST_MIN_SHIFT;
	h->b[i < PHIST_BUCKETS ? i : PHIST_BUCKETS]++;
	h->sum_ns += ns;
}

#endif /* SP_COMMON_PHIST_H */
