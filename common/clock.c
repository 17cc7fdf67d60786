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

static bool clk_use_tsc;

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

static void
clk_calibrate(void)
{
	struct timespec req = {.tv_sec = 0, .tv_nsec = 20000000};
	uint64_t t0;
	uint64_t c0;
	uint64_t t1;
	uint64_t c1;

	if (!clk_cpu_has_invariant_tsc()) {
		clk_use_tsc = false;
		return;
	}
	t0 = clk_mono_ns();
	c0 = clk_rdtsc();
	nanosleep(&req, NULL);
	t1 = clk_mono_ns();
	c1 = clk_rdtsc();
	if (c1 <= c0 || t1 <= t0)
		return;
	clk_hz = (uint64_t)((double)(c1 - c0) * 1e9 / (double)(t1 - t0));
	clk_mult = (uint64_t)((double)(t1 - t0) * 4294967296.0 / (double)(c1 - c0));
	clk_use_tsc = true;
}

void
clk_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	/* Calibrate once per process; later calls only take a new wall base. */
	pthread_once(&once, clk_calibrate);
	clk_wall_resync();
}

void
clk_wall_resync(void)
{
	static atomic_flag writer = ATOMIC_FLAG_INIT;
	struct timespec ts;
	uint64_t seq;
	uint64_t tsc;

	/* One writer at a time (control threads, microseconds): readers never wait. */
	while (atomic_flag_test_and_set_explicit(&writer, memory_order_acquire))
		;
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
	atomic_flag_clear_explicit(&writer, memory_order_release);
}

int64_t
clk_wall_ms_fast(void)
{
	uint64_t s1;
	uint64_t s2;
	int64_t wall;
	uint64_t tsc;

	if (!clk_use_tsc)
		return clk_wall_ms();
	do {
		/* acquire: pairs with the final release in clk_wall_resync() */
		s1 = atomic_load_explicit(&clk_base_seq, memory_order_acquire);
		wall = atomic_load_explicit(&clk_base_wall_ns, memory_order_relaxed);
		tsc = atomic_load_explicit(&clk_base_tsc, memory_order_relaxed);
		/* acquire fence: pairs with the release fence in clk_wall_resync() */
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&clk_base_seq, memory_order_relaxed);
	} while ((s1 & 1) != 0 || s1 != s2);
	return (wall + (int64_t)clk_tsc_to_ns(clk_rdtsc() - tsc)) / 1000000;
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
