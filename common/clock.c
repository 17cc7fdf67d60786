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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

static bool clk_use_tsc;
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

void
clk_init(void)
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
