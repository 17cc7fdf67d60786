// SPDX-License-Identifier: Apache-2.0
/*
 * clock.c - TSC calibration.
 *
 * The TSC is used only when CPUID says it is invariant (constant rate across
 * P/C-states), read from /proc/cpuinfo's "constant_tsc nonstop_tsc" flags so
 * the code stays portable. Calibration measures ticks over a 20 ms
 * CLOCK_MONOTONIC window and keeps a 32.32 fixed-point ns-per-tick multiplier
 * so the conversion on hot paths is a multiply and a shift.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/atomic.h"
#include "common/clock.h"
#include "common/compiler.h"

static bool clk_use_tsc;

__extension__ typedef unsigned __int128 clk_u128;
__extension__ typedef __int128 clk_s128;

#define CLK_MF_PERIOD_NS CLK_NS_PER_SEC /* a new base this often, the slew spread over it */
#define CLK_MF_STEP_NS 10000000ll	/* a lag beyond this is stepped, not slewed */
#define CLK_MF_SLEW_DIV 100		/* slew at most 1/100 of the period: 1% */

/*
 * clk_mono_fast_ns()'s state: the value base_ns at TSC base_tsc, then mult
 * (32.32 ns per tick, the rate plus the slew) for span ticks, then rate.
 * Published like the wall base: seq odd while written, 0 before clk_init().
 */
static struct {
	_Atomic uint64_t seq;
	_Atomic uint64_t base_ns;
	_Atomic uint64_t base_tsc;
	_Atomic uint64_t mult;
	_Atomic uint64_t span;
	_Atomic uint64_t rate;
} clk_mf __attribute__((aligned(64)));
static atomic_flag clk_mf_writer = ATOMIC_FLAG_INIT;
/* The writer's: the first (CLOCK_MONOTONIC, TSC) pair, the rate's baseline. */
static uint64_t clk_mf_ref_ns;
static uint64_t clk_mf_ref_tsc;
/* Ticks in CLK_MF_PERIOD_NS; read by any thread, written once before the first publish. */
static uint64_t clk_mf_period_ticks = UINT64_MAX;
/* Per thread: the last value returned, so that a new base never moves it back. */
static __thread uint64_t clk_mf_last __attribute__((tls_model("initial-exec")));

/*
 * Base pair of clk_wall_ms_fast(), published with a sequence counter:
 * odd while clk_wall_resync() writes it. Fields are atomics read relaxed;
 * the counter's acquire/release orders them.
 */
static _Atomic uint64_t clk_base_seq;
static _Atomic int64_t clk_base_wall_ns;
static _Atomic uint64_t clk_base_tsc;
static uint64_t clk_hz = CLK_NS_PER_SEC;
static uint64_t clk_mult = 1ull << 32; /* ns per tick, 32.32 fixed point */

static inline uint64_t
clk_rdtsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo;
	uint32_t hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	return clk_mono_ns();
#endif
}

static bool
clk_cpu_has_invariant_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	char line[4096];
	bool c = false;
	bool n = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "flags", 5) == 0) {
			c = strstr(line, " constant_tsc") != NULL;
			n = strstr(line, " nonstop_tsc") != NULL;
			break;
		}
	}
	fclose(f);
	return c && n;
#else
	return false;
#endif
}

static void clk_pair(uint64_t *ns, uint64_t *tsc, int tries);
static void clk_mf_publish_wait(int64_t skew_ppm);

static void
clk_calibrate(void)
{
	struct timespec req = {.tv_sec = 0, .tv_nsec = 20000000};
	uint64_t t0 = 0;
	uint64_t c0 = 0;
	uint64_t t1 = 0;
	uint64_t c1 = 0;

	if (!clk_cpu_has_invariant_tsc()) {
		clk_use_tsc = false;
		return;
	}
	clk_pair(&t0, &c0, 16);
	nanosleep(&req, NULL);
	clk_pair(&t1, &c1, 16);
	if (c1 <= c0 || t1 <= t0)
		return;
	clk_hz = (uint64_t)((double)(c1 - c0) * 1e9 / (double)(t1 - t0));
	clk_mult = (uint64_t)((double)(t1 - t0) * 4294967296.0 / (double)(c1 - c0));
	clk_mf_period_ticks = clk_hz / (CLK_NS_PER_SEC / CLK_MF_PERIOD_NS);
	clk_use_tsc = true;
	clk_mf_publish_wait(0);
}

/*
 * A (CLOCK_MONOTONIC, TSC) pair: of @tries reads, the one with the least
 * time between the two TSC reads around clock_gettime() (whose own TSC read
 * falls between them), its TSC halfway. A thread preempted mid-read would
 * otherwise skew the pair by however long it was away.
 */
static void
clk_pair(uint64_t *ns, uint64_t *tsc, int tries)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < tries; i++) {
		uint64_t a = clk_rdtsc();
		uint64_t t = clk_mono_ns();
		uint64_t b = clk_rdtsc();

		if (b - a < best) {
			best = b - a;
			*ns = t;
			*tsc = a + (b - a) / 2;
		}
	}
}

static inline uint64_t
clk_mul32(uint64_t ticks, uint64_t mult)
{
	return (uint64_t)(((clk_u128)ticks * mult) >> 32);
}

static inline uint64_t
clk_mf_eval(uint64_t base_ns, uint64_t d, uint64_t mult, uint64_t span, uint64_t rate)
{
	if (d <= span)
		return base_ns + clk_mul32(d, mult);
	return base_ns + clk_mul32(span, mult) + clk_mul32(d - span, rate);
}

/*
 * Takes a new base for clk_mono_fast_ns(). @skew_ppm (tests) runs the clock
 * that much off its rate from now on instead. Context: the clk_mf_writer
 * flag held.
 */
static void
clk_mf_publish(int64_t skew_ppm)
{
	uint64_t seq = atomic_load_explicit(&clk_mf.seq, memory_order_relaxed);
	uint64_t ns;
	uint64_t tsc;
	uint64_t base;
	uint64_t rate;
	uint64_t mult;

	clk_pair(&ns, &tsc, 3);
	if (seq == 0) {
		clk_mf_ref_ns = ns;
		clk_mf_ref_tsc = tsc;
		base = ns;
		rate = mult = clk_mult;
	} else {
		uint64_t b = atomic_load_explicit(&clk_mf.base_tsc, memory_order_relaxed);
		uint64_t d = tsc > b ? tsc - b : 0;
		uint64_t cur =
			clk_mf_eval(atomic_load_explicit(&clk_mf.base_ns, memory_order_relaxed), d,
				    atomic_load_explicit(&clk_mf.mult, memory_order_relaxed),
				    atomic_load_explicit(&clk_mf.span, memory_order_relaxed),
				    atomic_load_explicit(&clk_mf.rate, memory_order_relaxed));
		int64_t err = (int64_t)(ns - cur); /* > 0: this clock is behind */
		int64_t lim = (int64_t)(CLK_MF_PERIOD_NS / CLK_MF_SLEW_DIV);

		rate = atomic_load_explicit(&clk_mf.rate, memory_order_relaxed);
		/* The rate over the whole run: the 20 ms calibration's error averages out. */
		if (tsc - clk_mf_ref_tsc >= clk_mf_period_ticks / 10 && ns > clk_mf_ref_ns)
			rate = (uint64_t)(((clk_u128)(ns - clk_mf_ref_ns) << 32) /
					  (tsc - clk_mf_ref_tsc));
		base = cur; /* continuous: no step unless far behind */
		if (err > CLK_MF_STEP_NS) {
			base = ns;
			err = 0;
		}
		if (err > lim)
			err = lim;
		if (err < -lim)
			err = -lim;
		mult = (uint64_t)((clk_s128)rate +
				  (clk_s128)rate * err / (clk_s128)CLK_MF_PERIOD_NS);
		if (skew_ppm != 0)
			mult = rate =
				(uint64_t)((clk_s128)rate + (clk_s128)rate * skew_ppm / 1000000);
	}
	/* relaxed store + release fence: pairs with the acquire fence in the reader */
	atomic_store_explicit(&clk_mf.seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&clk_mf.base_ns, base, memory_order_relaxed);
	atomic_store_explicit(&clk_mf.base_tsc, tsc, memory_order_relaxed);
	atomic_store_explicit(&clk_mf.mult, mult, memory_order_relaxed);
	atomic_store_explicit(&clk_mf.span, skew_ppm != 0 ? 0 : clk_mf_period_ticks,
			      memory_order_relaxed);
	atomic_store_explicit(&clk_mf.rate, rate, memory_order_relaxed);
	/* release: the fields before the even count; pairs with the acquire in the reader */
	atomic_store_explicit(&clk_mf.seq, seq + 2, memory_order_release);
}

uint64_t
clk_mono_fast_ns(void)
{
	uint64_t s1;
	uint64_t s2;
	uint64_t base_ns;
	uint64_t base_tsc;
	uint64_t mult;
	uint64_t span;
	uint64_t rate;
	uint64_t tsc;
	uint64_t d;
	uint64_t ns;

	do {
		/* acquire: pairs with the final release in clk_mf_publish() */
		s1 = atomic_load_explicit(&clk_mf.seq, memory_order_acquire);
		base_ns = atomic_load_explicit(&clk_mf.base_ns, memory_order_relaxed);
		base_tsc = atomic_load_explicit(&clk_mf.base_tsc, memory_order_relaxed);
		mult = atomic_load_explicit(&clk_mf.mult, memory_order_relaxed);
		span = atomic_load_explicit(&clk_mf.span, memory_order_relaxed);
		rate = atomic_load_explicit(&clk_mf.rate, memory_order_relaxed);
		/* acquire fence: pairs with the release fence in clk_mf_publish() */
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&clk_mf.seq, memory_order_relaxed);
	} while ((s1 & 1) != 0 || s1 != s2);
	if (SP_UNLIKELY(s1 == 0))
		return clk_mono_ns(); /* no clk_init(), or no invariant TSC */
	tsc = clk_rdtsc();
	d = tsc > base_tsc ? tsc - base_tsc : 0;
	ns = clk_mf_eval(base_ns, d, mult, span, rate);
	if (SP_UNLIKELY(d >= clk_mf_period_ticks) &&
	    !atomic_flag_test_and_set_explicit(&clk_mf_writer, memory_order_acquire)) {
		/* Only if nobody took a new base since we read this one. */
		if (atomic_load_explicit(&clk_mf.seq, memory_order_relaxed) == s1)
			clk_mf_publish(0);
		atomic_flag_clear_explicit(&clk_mf_writer, memory_order_release);
	}
	if (ns < clk_mf_last)
		ns = clk_mf_last;
	clk_mf_last = ns;
	return ns;
}

/* clk_mf_publish(), waiting for another writer (startup and tests only). */
static void
clk_mf_publish_wait(int64_t skew_ppm)
{
	while (atomic_flag_test_and_set_explicit(&clk_mf_writer, memory_order_acquire))
		;
	clk_mf_publish(skew_ppm);
	atomic_flag_clear_explicit(&clk_mf_writer, memory_order_release);
}

void
clk__mono_fast_resync(int64_t skew_ppm)
{
	if (atomic_load_explicit(&clk_mf.seq, memory_order_acquire) != 0)
		clk_mf_publish_wait(skew_ppm);
}

void
clk_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	/* Calibrate once per process; later calls only take a new wall base. */
	pthread_once(&once, clk_calibrate);
	clk_wall_resync();
}

static atomic_flag clk_wall_writer = ATOMIC_FLAG_INIT;

/* Takes a new wall base pair. Context: clk_wall_writer held. */
static void
clk_wall_publish(void)
{
	struct timespec ts;
	uint64_t seq;
	uint64_t tsc;

	seq = atomic_load_explicit(&clk_base_seq, memory_order_relaxed);
	clock_gettime(CLOCK_REALTIME, &ts);
	tsc = clk_rdtsc();
	/* relaxed store + release fence: pairs with the acquire fence in the reader */
	atomic_store_explicit(&clk_base_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&clk_base_wall_ns, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
			      memory_order_relaxed);
	atomic_store_explicit(&clk_base_tsc, tsc, memory_order_relaxed);
	/* release: the fields before the even count; pairs with the acquire in the reader */
	atomic_store_explicit(&clk_base_seq, seq + 2, memory_order_release);
}

void
clk_wall_resync(void)
{
	/* One writer at a time (control threads, microseconds): readers never wait. */
	while (atomic_flag_test_and_set_explicit(&clk_wall_writer, memory_order_acquire))
		;
	clk_wall_publish();
	atomic_flag_clear_explicit(&clk_wall_writer, memory_order_release);
}

int64_t
clk_wall_ms_fast(void)
{
	uint64_t s1;
	uint64_t s2;
	int64_t wall;
	uint64_t tsc;
	uint64_t d;

	if (!clk_use_tsc)
		return clk_wall_ms();
	do {
		/* acquire: pairs with the final release in clk_wall_publish() */
		s1 = atomic_load_explicit(&clk_base_seq, memory_order_acquire);
		wall = atomic_load_explicit(&clk_base_wall_ns, memory_order_relaxed);
		tsc = atomic_load_explicit(&clk_base_tsc, memory_order_relaxed);
		/* acquire fence: pairs with the release fence in clk_wall_publish() */
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&clk_base_seq, memory_order_relaxed);
	} while ((s1 & 1) != 0 || s1 != s2);
	d = clk_rdtsc();
	/* A read from before a base another CPU just took: no negative wrap-around. */
	d = d > tsc ? d - tsc : 0;
	/* A base a second old: a new one, unless another thread is taking it (never wait). */
	if (SP_UNLIKELY(d >= clk_mf_period_ticks) &&
	    !atomic_flag_test_and_set_explicit(&clk_wall_writer, memory_order_acquire)) {
		if (atomic_load_explicit(&clk_base_seq, memory_order_relaxed) == s1)
			clk_wall_publish();
		atomic_flag_clear_explicit(&clk_wall_writer, memory_order_release);
	}
	return (wall + (int64_t)clk_tsc_to_ns(d)) / 1000000;
}

bool
clk_tsc_is_invariant(void)
{
	return clk_use_tsc;
}

uint64_t
clk_tsc_hz(void)
{
	return clk_hz;
}

uint64_t
clk_tsc(void)
{
	return clk_use_tsc ? clk_rdtsc() : clk_mono_ns();
}

uint64_t
clk_tsc_to_ns(uint64_t ticks)
{
	if (!clk_use_tsc)
		return ticks;
	__extension__ typedef unsigned __int128 u128;

	return (uint64_t)(((u128)ticks * clk_mult) >> 32);
}
