/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - monotonic, wall and TSC clocks in nanoseconds.
 *
 * clk_mono_ns() is the reference (vDSO, ~20 ns). clk_tsc() is a raw rdtsc
 * for hot paths; clk_tsc_to_ns() converts with a calibration done once by
 * clk_init() against CLOCK_MONOTONIC. On CPUs without an invariant TSC (or
 * non-x86) the TSC functions fall back to CLOCK_MONOTONIC, so callers never
 * need two code paths.
 */
#ifndef SP_COMMON_CLOCK_H
#define SP_COMMON_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define CLK_NS_PER_SEC 1000000000ull

static inline uint64_t
clk_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * CLK_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Wall clock in ms since the epoch: RocketMQ's store/born timestamps. */
static inline int64_t
clk_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/**
 * clk_init() - calibrate the TSC against CLOCK_MONOTONIC (about 20 ms, once
 * per process) and take a wall-clock base for clk_wall_ms_fast().
 *
 * Context: startup, any thread, blocking (sleeps the first time). Safe to call again.
 */
void clk_init(void);

/* Return: true when clk_tsc() reads an invariant TSC (else it is mono ns). */
bool clk_tsc_is_invariant(void);

/* Return: TSC ticks per second after clk_init() (1e9 when falling back). */
uint64_t clk_tsc_hz(void);

/**
 * clk_tsc() - raw timestamp counter.
 *
 * Context: any thread, non-blocking, no syscall on x86 with invariant TSC.
 * Return: ticks; convert with clk_tsc_to_ns().
 */
uint64_t clk_tsc(void);

/* Return: @ticks in ns (uses the clk_init() calibration). */
uint64_t clk_tsc_to_ns(uint64_t ticks);

/**
 * clk_wall_resync() - take a new (CLOCK_REALTIME, TSC) base pair for
 * clk_wall_ms_fast(). clk_init() takes the first; call it about once a
 * second so NTP adjustments reach the fast clock.
 * Context: control/background threads (writers serialize on a spin flag for
 * the few ns of the update); never a dataplane core.
 */
void clk_wall_resync(void);

/**
 * clk_wall_ms_fast() - wall clock in ms from the TSC and the last base pair:
 * ~5 ns instead of clock_gettime's ~24 ns. Falls back to clk_wall_ms()
 * without an invariant TSC or before clk_init().
 * Context: any thread, non-blocking (a seqlock read, retried on a concurrent resync).
 */
int64_t clk_wall_ms_fast(void);

#endif /* SP_COMMON_CLOCK_H */
