// SPDX-License-Identifier: Apache-2.0
/*
 * test_phist.c - the power-of-two latency histogram: every value lands in
 * the bucket whose bounds hold it (bucket i: (bound(i-1), bound(i)]), the
 * largest values in +Inf, and the sum adds up.
 */
#include <stdint.h>

#include "harness.h"
#include "common/phist.h"

static unsigned
where(const struct phist *h)
{
	for (unsigned i = 0; i <= PHIST_BUCKETS; i++)
		if (h->b[i])
			return i;
	return ~0u;
}

static void
test_bounds(void)
{
	static const uint64_t vals[] = {1,
					255,
					256,
					257,
					511,
					512,
					513,
					1000,
					1024,
					1025,
					123456,
					1u << 30,
					(1u << 30) + 1,
					1ull << 31,
					(1ull << 31) + 1,
					1ull << 40,
					UINT64_MAX >> 1};

	for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
		struct phist h = {0};
		uint64_t v = vals[k];
		unsigned i;

		phist_record(&h, v);
		i = where(&h);
		T_ASSERT(i <= PHIST_BUCKETS);
		if (i < PHIST_BUCKETS)
			T_ASSERT(v <= phist_bound_ns(i));
		else
			T_ASSERT(v > phist_bound_ns(PHIST_BUCKETS - 1));
		if (i > 0)
			T_ASSERT(v > phist_bound_ns(i - 1));
		T_ASSERT(h.sum_ns == v);
	}
}

static void
test_edges_and_sum(void)
{
	struct phist h = {0};
	uint64_t n = 0, sum = 0, total = 0;

	/* 0 and a negative difference of two threads' clocks count as 1 ns */
	phist_record(&h, 0);
	phist_record(&h, (uint64_t)-5);
	T_ASSERT(h.b[0] == 2 && h.sum_ns == 2);
	T_ASSERT(phist_bound_ns(0) == 256);
	T_ASSERT(phist_bound_ns(PHIST_BUCKETS - 1) == 1ull << 31); /* 2.1 s */
	for (uint64_t v = 1; v < 5000000; v = v * 3 + 1) {
		phist_record(&h, v);
		sum += v;
		n++;
	}
	for (unsigned i = 0; i <= PHIST_BUCKETS; i++)
		total += h.b[i];
	T_ASSERT(total == n + 2);
	T_ASSERT(h.sum_ns == sum + 2);
}

T_MAIN(T_CASE(test_bounds), T_CASE(test_edges_and_sum))
