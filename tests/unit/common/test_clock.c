// SPDX-License-Identifier: Apache-2.0
/*
 * test_clock.c - clocks move forward and TSC conversion agrees with
 * CLOCK_MONOTONIC. No timing is asserted beyond ordering and a generous
 * ratio check (a loaded CI box may stretch any interval).
 */
#include <time.h>

#include "harness.h"
#include "common/clock.h"

static void
test_monotonic(void)
{
	uint64_t a = clk_mono_ns();
	uint64_t b = clk_mono_ns();

	T_ASSERT(b >= a);
	T_ASSERT(clk_wall_ms() > 1600000000000LL);
}

static void
test_tsc_conversion(void)
{
	struct timespec req = {.tv_sec = 0, .tv_nsec = 50000000};
	uint64_t t0;
	uint64_t t1;
	uint64_t c0;
	uint64_t c1;
	double ratio;

	clk_init();
	T_ASSERT(clk_tsc_hz() > 0);
	c0 = clk_tsc();
	t0 = clk_mono_ns();
	nanosleep(&req, NULL);
	c1 = clk_tsc();
	t1 = clk_mono_ns();
	T_ASSERT(c1 >= c0);
	ratio = (double)clk_tsc_to_ns(c1 - c0) / (double)(t1 - t0);
	if (ratio < 0.5 || ratio > 2.0)
		T_FAIL("tsc says %f of the monotonic interval", ratio);
	if (!clk_tsc_is_invariant())
		T_ASSERT_EQ_U64(clk_tsc_to_ns(1000), 1000);
}

static void
test_wall_fast(void)
{
	int64_t slow;
	int64_t fast;

	clk_init();
	for (int i = 0; i < 1000; i++) {
		slow = clk_wall_ms();
		fast = clk_wall_ms_fast();
		/* Same clock within the ms rounding and the read gap (generous for CI). */
		if (fast < slow - 2 || fast > slow + 50)
			T_FAIL("fast wall %lld vs %lld", (long long)fast, (long long)slow);
		if (i % 100 == 0)
			clk_wall_resync();
	}
}

T_MAIN(T_CASE(test_monotonic), T_CASE(test_tsc_conversion), T_CASE(test_wall_fast))
