/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hist.h - latency histogram, HdrHistogram-style log-linear buckets.
 *
 * Values are integers (ns). With 3 significant digits every recorded value
 * v is counted in a bucket whose width is at most v/1000 (relative error
 * <= 0.1%): values below 2048 are exact, then each power-of-two range
 * [2^k, 2^(k+1)) is split into 1024 equal sub-buckets. Values above the
 * highest trackable value are clamped to it and counted in `overflow`.
 *
 * All memory is allocated by hist_create(); recording, merging, resetting
 * and queries never allocate, so a dataplane core may record on its hot path
 * and control may merge per-core histograms of the same shape.
 *
 * Ownership: single writer (the recording thread). Merge/query a copy or a
 * histogram no one is recording into.
 */
#ifndef SP_COMMON_HIST_H
#define SP_COMMON_HIST_H

#include <stdint.h>

#include "common/compiler.h"

struct hist;

/**
 * hist_create() - a histogram tracking [0, @highest] with 3 significant digits.
 * @highest: largest value tracked exactly (for example 3600 s in ns); >= 2048.
 *
 * Context: setup; allocates about 8 KiB per power of two of range.
 * Return: 0, -EINVAL, -ENOMEM.
 */
MUST_CHECK int hist_create(uint64_t highest, struct hist **out);
void hist_destroy(struct hist *h);

/* Context: owning thread, non-blocking, no allocation. */
void hist_record(struct hist *h, uint64_t value);
void hist_record_n(struct hist *h, uint64_t value, uint64_t count);

/**
 * hist_record_corrected() - record @value and, as HdrHistogram's
 * recordValueWithExpectedInterval does, the samples a stalled closed-loop
 * sender would have missed: @value - k*@interval for k = 1.. while >= @interval
 * (so @value = 10 * @interval records 10 samples in all). Its cost is bounded by
 * the histogram size, not by @value / @interval.
 * Open-loop senders that time from the intended send time do not need it.
 */
void hist_record_corrected(struct hist *h, uint64_t value, uint64_t interval);

/* Return: 0, or -EINVAL when the shapes (highest value) differ. */
MUST_CHECK int hist_merge(struct hist *dst, const struct hist *src);
void hist_reset(struct hist *h);

uint64_t hist_count(const struct hist *h);
uint64_t hist_min(const struct hist *h);
uint64_t hist_max(const struct hist *h); /* exact max seen (clamped at highest) */
double hist_mean(const struct hist *h);
uint64_t hist_overflow(const struct hist *h);

/**
 * hist_percentile() - the value at or below which @p percent of samples fall.
 * @p: 0..100, e.g. 99.99.
 *
 * Return: the highest value equivalent to the bucket (as HdrHistogram does),
 * capped at hist_max(); 0 for an empty histogram.
 */
uint64_t hist_percentile(const struct hist *h, double p);

#endif /* SP_COMMON_HIST_H */
