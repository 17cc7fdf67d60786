// SPDX-License-Identifier: Apache-2.0
/*
 * test_clock.c - clocks move forward and TSC conversion agrees with
 * CLOCK_MONOTONIC. No timing is asserted beyond ordering and a generous
 * ratio check (a loaded CI box may stretch any interval).
 */
#include <pthread.h>
#include <stdatomic.h>
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

/* fast - reference, in ns, read back to back (the smallest of a few reads' gaps). */
static int64_t
fast_err(void)
{
	int64_t best = 0;
	uint64_t gap = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		uint64_t a = clk_mono_ns();
		uint64_t f = clk_mono_fast_ns();
		uint64_t b = clk_mono_ns();

		if (b - a < gap) {
			gap = b - a;
			best = (int64_t)(f - (a + (b - a) / 2));
		}
	}
	return best;
}

static void
sleep_ms(long ms)
{
	struct timespec req = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&req, NULL);
}

static void
test_mono_fast_agrees(void)
{
	clk_init();
	if (!clk_tsc_is_invariant()) {
		/* The fallback is the reference itself. */
		uint64_t a = clk_mono_ns();
		uint64_t f = clk_mono_fast_ns();

		T_ASSERT(f >= a && f <= clk_mono_ns());
		return;
	}
	for (int i = 0; i < 20; i++) {
		int64_t e = fast_err();

		/* A bad calibration is slewed out, never more than ~1% of a period off. */
		if (e < -20000000 || e > 20000000)
			T_FAIL("fast clock %lld ns off CLOCK_MONOTONIC", (long long)e);
		sleep_ms(10);
	}
}

/*
 * A clock set 2% fast (then slow) drifts away, and a new base pulls it back
 * over the next second: within 1 ms after it. Slewing, it never goes back.
 */
static void
skew_and_recover(int64_t ppm)
{
	int64_t off;
	int64_t e = 0;

	clk__mono_fast_resync(0);
	clk__mono_fast_resync(ppm);
	sleep_ms(300);
	off = fast_err();
	/* 2% of >= 300 ms: >= 6 ms off, in the skew's direction. */
	if ((ppm > 0 && off < 3000000) || (ppm < 0 && off > -3000000))
		T_FAIL("skew %lld ppm: only %lld ns off after 300 ms", (long long)ppm,
		       (long long)off);
	for (int i = 0; i < 2; i++) {
		uint64_t before = clk_mono_fast_ns();

		/* As a reader would a second after the last base. */
		clk__mono_fast_resync(0);
		T_ASSERT(clk_mono_fast_ns() >= before);
		sleep_ms(i == 0 ? 1100 : 10);
	}
	e = fast_err();
	if (e < -1000000 || e > 1000000)
		T_FAIL("skew %lld ppm: %lld ns off at first, still %lld ns a second later",
		       (long long)ppm, (long long)off, (long long)e);
}

static void
test_mono_fast_disciplined(void)
{
	clk_init();
	if (!clk_tsc_is_invariant())
		return;
	skew_and_recover(20000);
	skew_and_recover(-20000);
}

static atomic_bool resync_stop;

static void *
resync_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&resync_stop))
		clk__mono_fast_resync(0);
	return NULL;
}

/* One thread's reads never go back while another thread takes new bases. */
static void
test_mono_fast_monotonic_threads(void)
{
	pthread_t t;
	uint64_t last = 0;

	clk_init();
	atomic_store(&resync_stop, false);
	T_ASSERT(pthread_create(&t, NULL, resync_loop, NULL) == 0);
	for (int i = 0; i < 2000000; i++) {
		uint64_t v = clk_mono_fast_ns();

		if (v < last)
			T_FAIL("read %d: %llu after %llu", i, (unsigned long long)v,
			       (unsigned long long)last);
		last = v;
	}
	atomic_store(&resync_stop, true);
	pthread_join(t, NULL);
}

T_MAIN(T_CASE(test_monotonic), T_CASE(test_tsc_conversion), T_CASE(test_wall_fast),
       T_CASE(test_mono_fast_agrees), T_CASE(test_mono_fast_disciplined),
       T_CASE(test_mono_fast_monotonic_threads))
