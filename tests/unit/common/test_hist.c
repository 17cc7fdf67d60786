// SPDX-License-Identifier: Apache-2.0
/*
 * test_hist.c - log-linear histogram: exact below 2048, within 0.1% above,
 * checked against exact percentiles of sorted samples.
 */
#include <errno.h>
#include <stdint.h>

#include "common/hist.h"
#include "harness.h"

/* Percentiles in parts per million, so the expected rank is integer math. */
static const uint64_t ppm_list[] = {0,	    1,	    10,	    1000,   10000,  100000,
				    250000, 500000, 750000, 900000, 990000, 999000,
				    999900, 999990, 999999, 1000000};

static uint64_t
rng_next(uint64_t *s)
{
	/* xorshift64*: deterministic, good enough to spread samples. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The exact value at rank ceil(ppm / 1e6 * n), min 1, of sorted samples. */
static uint64_t
exact_at(const uint64_t *sorted, size_t n, uint64_t ppm)
{
	uint64_t rank = (ppm * n + 999999) / 1000000;

	if (rank == 0)
		rank = 1;
	return sorted[rank - 1];
}

static struct hist *
new_hist(uint64_t highest)
{
	struct hist *h = NULL;

	T_ASSERT_EQ(hist_create(highest, &h), 0);
	T_ASSERT(h != NULL);
	return h;
}

static void
assert_same(const struct hist *a, const struct hist *b)
{
	T_ASSERT_EQ_U64(hist_count(a), hist_count(b));
	T_ASSERT_EQ_U64(hist_min(a), hist_min(b));
	T_ASSERT_EQ_U64(hist_max(a), hist_max(b));
	T_ASSERT_EQ_U64(hist_overflow(a), hist_overflow(b));
	T_ASSERT(hist_mean(a) == hist_mean(b));
	for (int i = 0; i <= 2000; i++) {
		double p = i / 20.0;

		if (hist_percentile(a, p) != hist_percentile(b, p))
			T_FAIL("p%.2f: %llu != %llu", p, (unsigned long long)hist_percentile(a, p),
			       (unsigned long long)hist_percentile(b, p));
	}
}

static void
test_exact_below_2048(void)
{
	struct hist *h = new_hist(1000000);

	for (uint64_t v = 0; v < 2048; v++)
		hist_record(h, v);
	T_ASSERT_EQ_U64(hist_count(h), 2048);
	T_ASSERT_EQ_U64(hist_min(h), 0);
	T_ASSERT_EQ_U64(hist_max(h), 2047);
	T_ASSERT(hist_mean(h) == 1023.5);
	/* Rank r holds value r - 1 exactly: p = r / 2048 * 100. */
	for (uint64_t r = 1; r <= 2048; r++)
		T_ASSERT_EQ_U64(hist_percentile(h, (double)r * 100.0 / 2048.0), r - 1);
	T_ASSERT_EQ_U64(hist_percentile(h, 0), 0);
	T_ASSERT_EQ_U64(hist_percentile(h, 50), 1023);
	hist_destroy(h);

	/* 2048..4095 are in slots of width 2: highest equivalent is odd. */
	h = new_hist(1000000);
	hist_record(h, 2048);
	hist_record(h, 3000);
	T_ASSERT_EQ_U64(hist_percentile(h, 50), 2049);
	T_ASSERT_EQ_U64(hist_percentile(h, 100), 3000);
	hist_destroy(h);
}

static void
test_relative_error_random(void)
{
	enum { N = 200000 };
	uint64_t *samples = malloc(N * sizeof(*samples));
	struct hist *h = new_hist(UINT64_C(1) << 40);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	double sum = 0;

	T_ASSERT(samples != NULL);
	for (size_t i = 0; i < N; i++) {
		uint64_t r = rng_next(&seed);
		/* Log-uniform-ish over [0, 2^40): every magnitude gets samples. */
		uint64_t v = (r >> 24) >> (rng_next(&seed) % 40);

		samples[i] = v;
		sum += (double)v;
		hist_record(h, v);
	}
	qsort(samples, N, sizeof(*samples), cmp_u64);
	T_ASSERT_EQ_U64(hist_count(h), N);
	T_ASSERT_EQ_U64(hist_min(h), samples[0]);
	T_ASSERT_EQ_U64(hist_max(h), samples[N - 1]);
	T_ASSERT_EQ_U64(hist_overflow(h), 0);
	for (size_t i = 0; i < ARRAY_SIZE(ppm_list); i++) {
		uint64_t want = exact_at(samples, N, ppm_list[i]);
		uint64_t got = hist_percentile(h, (double)ppm_list[i] / 10000.0);

		/* Highest equivalent value: never below, at most 0.1% above. */
		if (got < want || (got - want) * 1000 > want)
			T_FAIL("ppm %llu: got %llu, exact %llu", (unsigned long long)ppm_list[i],
			       (unsigned long long)got, (unsigned long long)want);
	}
	T_ASSERT(hist_mean(h) >= sum / N * 0.999 && hist_mean(h) <= sum / N * 1.001);

	/* Every sample read back alone is within 0.1%. */
	for (size_t i = 0; i < N; i += 211) {
		uint64_t got;

		hist_reset(h);
		hist_record(h, samples[i] + 1);
		hist_record(h, samples[i]);
		got = hist_percentile(h, 50);
		T_ASSERT(got >= samples[i] && (got - samples[i]) * 1000 <= samples[i]);
		if (samples[i] < 2048)
			T_ASSERT_EQ_U64(got, samples[i]);
	}
	free(samples);
	hist_destroy(h);
}

static void
test_merge(void)
{
	struct hist *a = new_hist(UINT64_C(1) << 36);
	struct hist *b = new_hist(UINT64_C(1) << 36);
	struct hist *all = new_hist(UINT64_C(1) << 36);
	struct hist *other = new_hist(UINT64_C(1) << 37);
	uint64_t seed = 42;

	for (int i = 0; i < 50000; i++) {
		uint64_t v = rng_next(&seed) >> (26 + rng_next(&seed) % 38);

		hist_record(i % 3 ? a : b, v);
		hist_record(all, v);
	}
	hist_record(b, UINT64_C(1) << 40); /* overflow counts merge too */
	hist_record(all, UINT64_C(1) << 40);
	T_ASSERT_EQ(hist_merge(a, b), 0);
	assert_same(a, all);

	/* Merging an empty histogram changes nothing; shapes must match. */
	hist_reset(b);
	T_ASSERT_EQ(hist_merge(a, b), 0);
	assert_same(a, all);
	T_ASSERT_EQ(hist_merge(a, other), -EINVAL);
	T_ASSERT_EQ(hist_merge(other, a), -EINVAL);
	assert_same(a, all);
	T_ASSERT_EQ(hist_merge(b, a), 0);
	assert_same(b, all);
	hist_destroy(a);
	hist_destroy(b);
	hist_destroy(all);
	hist_destroy(other);
}

static void
test_reset_and_empty(void)
{
	struct hist *h = new_hist(1000000);
	struct hist *fresh = new_hist(1000000);

	T_ASSERT_EQ_U64(hist_count(h), 0);
	T_ASSERT_EQ_U64(hist_min(h), 0);
	T_ASSERT_EQ_U64(hist_max(h), 0);
	T_ASSERT_EQ_U64(hist_overflow(h), 0);
	T_ASSERT(hist_mean(h) == 0);
	T_ASSERT_EQ_U64(hist_percentile(h, 0), 0);
	T_ASSERT_EQ_U64(hist_percentile(h, 50), 0);
	T_ASSERT_EQ_U64(hist_percentile(h, 100), 0);

	for (uint64_t v = 1; v < 5000000; v += 777)
		hist_record(h, v);
	hist_record_n(h, 12345, 10);
	hist_record_n(h, 99, 0); /* no sample: must not move min */
	T_ASSERT(hist_count(h) > 0);
	T_ASSERT(hist_overflow(h) > 0);
	hist_reset(h);
	assert_same(h, fresh);

	/* Usable again after reset, min tracked afresh. */
	hist_record(h, 3000);
	T_ASSERT_EQ_U64(hist_min(h), 3000);
	T_ASSERT_EQ_U64(hist_max(h), 3000);
	T_ASSERT_EQ_U64(hist_count(h), 1);
	hist_destroy(h);
	hist_destroy(fresh);
}

static void
test_record_n(void)
{
	struct hist *h = new_hist(1000000);
	struct hist *g = new_hist(1000000);

	hist_record_n(h, 5000, 1000);
	hist_record_n(h, 7, 3);
	for (int i = 0; i < 1000; i++)
		hist_record(g, 5000);
	for (int i = 0; i < 3; i++)
		hist_record(g, 7);
	assert_same(h, g);
	T_ASSERT_EQ_U64(hist_percentile(h, 0.29), 7); /* rank 3 of 1003 */
	T_ASSERT_EQ_U64(hist_percentile(h, 0.3), 5000);
	hist_destroy(h);
	hist_destroy(g);
}

static void
test_corrected(void)
{
	struct hist *h = new_hist(1000000000);
	struct hist *naive = new_hist(1000000000);
	uint64_t value;
	uint64_t interval;

	/* HdrHistogram: value = 10 * interval records value, 9i, ..., 1i. */
	hist_record_corrected(h, 1000, 100);
	T_ASSERT_EQ_U64(hist_count(h), 10);
	T_ASSERT_EQ_U64(hist_min(h), 100);
	T_ASSERT_EQ_U64(hist_max(h), 1000);
	T_ASSERT_EQ_U64(hist_percentile(h, 50), 500);

	/* At or below the interval, and interval 0: one sample. */
	hist_reset(h);
	hist_record_corrected(h, 100, 100);
	hist_record_corrected(h, 99, 100);
	hist_record_corrected(h, 12345, 0);
	T_ASSERT_EQ_U64(hist_count(h), 3);
	hist_reset(h);
	hist_record_corrected(h, 199, 100); /* 199 and nothing: 99 < interval */
	T_ASSERT_EQ_U64(hist_count(h), 1);
	hist_record_corrected(h, 200, 100); /* 200 and 100 */
	T_ASSERT_EQ_U64(hist_count(h), 3);

	/* The per-slot path (many samples) equals a naive loop. */
	hist_reset(h);
	value = 98765432;
	interval = 3;
	hist_record_corrected(h, value, interval);
	hist_record(naive, value);
	for (uint64_t m = value - interval; m >= interval; m -= interval)
		hist_record(naive, m);
	T_ASSERT_EQ_U64(hist_count(h), value / interval);
	assert_same(h, naive);

	/* And with terms above highest, clamped into overflow. */
	hist_destroy(h);
	hist_destroy(naive);
	h = new_hist(5000000);
	naive = new_hist(5000000);
	value = 9000001;
	interval = 2;
	hist_record_corrected(h, value, interval);
	hist_record(naive, value);
	for (uint64_t m = value - interval; m >= interval; m -= interval)
		hist_record(naive, m);
	assert_same(h, naive);
	T_ASSERT_EQ_U64(hist_overflow(h), (value - 5000000 - 1) / interval + 1);

	/* Few samples above highest take the small loop: same answer. */
	hist_reset(h);
	hist_reset(naive);
	hist_record_corrected(h, 8000000, 1000000);
	for (uint64_t m = 8000000; m >= 1000000; m -= 1000000)
		hist_record(naive, m);
	assert_same(h, naive);
	T_ASSERT_EQ_U64(hist_overflow(h), 3);

	/* A huge value over a tiny interval is bounded work, counts exact. */
	hist_reset(h);
	value = 1000000000000000ull;
	hist_record_corrected(h, value, 7);
	T_ASSERT_EQ_U64(hist_count(h), value / 7);
	T_ASSERT_EQ_U64(hist_overflow(h), (value - 5000000 - 1) / 7 + 1);
	T_ASSERT_EQ_U64(hist_min(h), value % 7 + 7);
	T_ASSERT_EQ_U64(hist_max(h), 5000000);
	hist_reset(h);
	hist_record_corrected(h, UINT64_MAX, 1);
	T_ASSERT_EQ_U64(hist_count(h), UINT64_MAX);
	T_ASSERT_EQ_U64(hist_min(h), 1);
	hist_destroy(h);
	hist_destroy(naive);
}

static void
test_overflow_clamp(void)
{
	struct hist *h = new_hist(10000);

	hist_record(h, 5);
	hist_record(h, 1000000);
	hist_record(h, UINT64_MAX);
	T_ASSERT_EQ_U64(hist_count(h), 3);
	T_ASSERT_EQ_U64(hist_overflow(h), 2);
	T_ASSERT_EQ_U64(hist_max(h), 10000);
	T_ASSERT_EQ_U64(hist_percentile(h, 100), 10000);
	T_ASSERT_EQ_U64(hist_percentile(h, 99.9), 10000);
	T_ASSERT_EQ_U64(hist_percentile(h, 33), 5);
	hist_record(h, 10000); /* highest itself is not an overflow */
	T_ASSERT_EQ_U64(hist_overflow(h), 2);
	hist_destroy(h);

	/* The full 64-bit range. */
	h = new_hist(UINT64_MAX);
	hist_record(h, UINT64_MAX);
	hist_record(h, UINT64_MAX - 1);
	hist_record(h, 0);
	T_ASSERT_EQ_U64(hist_overflow(h), 0);
	T_ASSERT_EQ_U64(hist_max(h), UINT64_MAX);
	T_ASSERT_EQ_U64(hist_percentile(h, 100), UINT64_MAX);
	T_ASSERT_EQ_U64(hist_percentile(h, 50), UINT64_MAX);
	T_ASSERT_EQ_U64(hist_percentile(h, 10), 0);
	T_ASSERT(hist_mean(h) > 1.2e19);
	hist_destroy(h);
}

static void
test_p100_is_max(void)
{
	struct hist *h = new_hist(UINT64_C(1) << 50);
	uint64_t seed = 7;
	uint64_t max = 0;

	for (int i = 0; i < 10000; i++) {
		uint64_t v = rng_next(&seed) >> (14 + rng_next(&seed) % 50);

		max = v > max ? v : max;
		hist_record(h, v);
		T_ASSERT_EQ_U64(hist_percentile(h, 100), max);
	}
	T_ASSERT_EQ_U64(hist_max(h), max);
	T_ASSERT(hist_percentile(h, 99.999) <= max);
	T_ASSERT(hist_percentile(h, 99.99) <= max);
	/* Out-of-range p clamps, NaN reads as 0. */
	T_ASSERT_EQ_U64(hist_percentile(h, 150), max);
	T_ASSERT_EQ_U64(hist_percentile(h, -5), hist_percentile(h, 0));
	T_ASSERT_EQ_U64(hist_percentile(h, 0.0 / 0.0), hist_percentile(h, 0));
	hist_destroy(h);
}

static void
test_percentile_rank(void)
{
	struct hist *h = new_hist(100000);

	/* 1000 samples 1..1000: p99.9 is rank 999 despite 99.9 being inexact. */
	for (uint64_t v = 1; v <= 1000; v++)
		hist_record(h, v);
	T_ASSERT_EQ_U64(hist_percentile(h, 99.9), 999);
	T_ASSERT_EQ_U64(hist_percentile(h, 99.91), 1000);
	T_ASSERT_EQ_U64(hist_percentile(h, 0.1), 1);
	T_ASSERT_EQ_U64(hist_percentile(h, 0.11), 2);
	T_ASSERT_EQ_U64(hist_percentile(h, 0), 1);
	T_ASSERT_EQ_U64(hist_percentile(h, 50), 500);
	T_ASSERT_EQ_U64(hist_percentile(h, 33.3), 333);
	hist_destroy(h);
}

static void
test_invalid_create(void)
{
	struct hist *h = (struct hist *)1;

	T_ASSERT_EQ(hist_create(0, &h), -EINVAL);
	T_ASSERT(h == NULL);
	T_ASSERT_EQ(hist_create(2047, &h), -EINVAL);
	T_ASSERT_EQ(hist_create(2048, NULL), -EINVAL);
	T_ASSERT_EQ(hist_create(2048, &h), 0);
	hist_record(h, 2048);
	T_ASSERT_EQ_U64(hist_overflow(h), 0);
	T_ASSERT_EQ_U64(hist_percentile(h, 100), 2048);
	hist_destroy(h);
	hist_destroy(NULL);
}

T_MAIN(T_CASE(test_exact_below_2048), T_CASE(test_relative_error_random), T_CASE(test_merge),
       T_CASE(test_reset_and_empty), T_CASE(test_record_n), T_CASE(test_corrected),
       T_CASE(test_overflow_clamp), T_CASE(test_p100_is_max), T_CASE(test_percentile_rank),
       T_CASE(test_invalid_create))
