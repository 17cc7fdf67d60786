/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - monotonic, wall and TSC clocks in nanoseconds.
 *
 * clk_mono_ns() is the reference (vDSO, ~20 ns). clk_mono_fast_ns() is the
 * same clock read from the TSC (~10 ns): the dataplane's clock. clk_tsc() is
 * a raw rdtsc for hot paths; clk_tsc_to_ns() converts with a calibration done
 * once by clk_init() against CLOCK_MONOTONIC. On CPUs without an invariant
 * TSC (or non-x86) the TSC functions fall back to CLOCK_MONOTONIC, so callers
 * never need two code paths.
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

/**
 * clk_mono_fast_ns() - CLOCK_MONOTONIC nanoseconds from the TSC, for hot
 * paths (the dataplane loop, the responses' timestamps): about half the cost
 * of clock_gettime() on a VM, whose vDSO orders its rdtsc and reads the
 * kernel's base under a sequence counter.
 *
 * Disciplined against CLOCK_MONOTONIC: the first caller that finds the base a
 * second old takes a new one (a try-lock; a caller never waits for another),
 * re-estimates the tick rate over the whole run, and slews the difference out
 * over the next second (at most 1%; a lag over 10 ms is stepped forward). So
 * it stays within microseconds of clk_mono_ns() and values compare across
 * threads at that precision; on one thread it never goes backwards.
 * Before clk_init(), or without an invariant TSC: clk_mono_ns().
 *
 * Context: any thread, non-blocking (no syscall with an invariant TSC; about
 * once a second one caller also reads CLOCK_MONOTONIC).
 */
uint64_t clk_mono_fast_ns(void);

/*
 * For tests: take a new base now (waiting for another writer), or, with
 * @skew_ppm != 0, first run the clock @skew_ppm parts per million fast (or
 * slow) from now, as a bad calibration would. Not for production code.
 */
void clk__mono_fast_resync(int64_t skew_ppm);

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
 * clk_wall_ms_fast() now. clk_init() takes the first, and the first
 * clk_wall_ms_fast() that finds the base a second old takes the next, so
 * NTP adjustments reach the fast clock within about a second.
 * Context: control/background threads (writers serialize on a spin flag for
 * the few ns of the update); never a dataplane core.
 */
void clk_wall_resync(void);

/**
 * clk_wall_ms_fast() - wall clock in ms from the TSC and the last base pair:
 * ~5 ns instead of clock_gettime's ~24 ns. Falls back to clk_wall_ms()
 * without an invariant TSC or before clk_init().
 * Context: any thread, non-blocking (a seqlock read, retried on a concurrent
 * resync; about once a second one caller also reads CLOCK_REALTIME, under a
 * try-lock: it never waits for another).
 */
int64_t clk_wall_ms_fast(void);

#endif /* SP_COMMON_CLOCK_H */
