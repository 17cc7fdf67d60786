// SPDX-License-Identifier: Apache-2.0
/*
 * bench_lookup.cpp - ns/op of the lookups on a request's path and of
 * recording one latency sample:
 *  - the NameServer's route lookup (GET_ROUTEINFO_BY_TOPIC's work: find the
 *    topic in the published RCU table of 10,000 topics and write its JSON);
 *  - a broker core's topic lookup (bk_topic_find() in a table of 10,000);
 *  - hist_record() (every sample sprocket-bench takes).
 *
 *   build/bench/bench_lookup [--benchmark_format=json]
 */
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
#include <urcu/urcu-memb.h>

#include "bench_lookup_bk.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/phist.h"
#include "control/route.h"
}

#define TOPICS 10000

static void
topic_name(char *buf, size_t cap, unsigned i)
{
	snprintf(buf, cap, "BenchTopic-%05u", i);
}

/* Names made before the timed loop, visited in a scattered order (cold-ish lines). */
static char g_names[TOPICS][32];

static void
names_init(void)
{
	for (unsigned i = 0; i < TOPICS; i++)
		topic_name(g_names[i], sizeof(g_names[i]), (i * 7919u) % TOPICS);
}

static struct route_db *
route_db_with_topics(void)
{
	struct route_db *db;
	struct route_tset *ts;
	struct route_reg r;
	struct route_reg_out out;
	char name[32];

	if (route_db_create(&db) != 0 || route_tset_create(TOPICS, &ts) != 0)
		abort();
	for (unsigned i = 0; i < TOPICS; i++) {
		struct route_topic_in t;

		std::memset(&t, 0, sizeof(t));
		topic_name(name, sizeof(name), i);
		t.name = name;
		t.name_len = strlen(name);
		t.read_q = t.write_q = 8;
		t.perm = 6;
		if (route_tset_add(ts, &t) != 0)
			abort();
	}
	std::memset(&r, 0, sizeof(r));
	r.cluster = "DefaultCluster";
	r.bname = "broker-a";
	r.addr = "10.0.0.1:10911";
	r.ha_addr = "10.0.0.1:10912";
	r.dv.timestamp = 1;
	r.dv.counter = 1;
	r.conn = 1;
	r.topics = ts;
	if (route_db_register(db, &r, 1, &out) != 0)
		abort();
	return db;
}

static void
BM_route_lookup_json(benchmark::State &st)
{
	struct route_db *db = route_db_with_topics();
	unsigned i = 0;

	names_init();
	urcu_memb_register_thread();
	for (auto _ : st) {
		const char *name = g_names[i++ % TOPICS];
		uint8_t *json;
		size_t len;

		urcu_memb_read_lock();
		if (route_json_topic(route_db_current(db), name, 16, NULL, &json, &len) != 0)
			abort();
		urcu_memb_read_unlock();
		benchmark::DoNotOptimize(json);
		free(json);
	}
	urcu_memb_unregister_thread();
	route_db_destroy(db);
}
BENCHMARK(BM_route_lookup_json);

static void
BM_broker_topic_find(benchmark::State &st)
{
	void *bk = bench_bk_table(TOPICS);
	unsigned i = 0;

	names_init();
	for (auto _ : st)
		benchmark::DoNotOptimize(bench_bk_find(bk, g_names[i++ % TOPICS], 16));
	bench_bk_free(bk);
}
BENCHMARK(BM_broker_topic_find);

static void
BM_hist_record(benchmark::State &st)
{
	struct hist *h;
	uint64_t v = 1;

	if (hist_create(10ull * 1000 * 1000 * 1000, &h) != 0)
		abort();
	for (auto _ : st) {
		v = v * 6364136223846793005ull + 1442695040888963407ull;
		hist_record(h, (v >> 40) % 10000000); /* 0..10 ms in ns */
	}
	hist_destroy(h);
}
BENCHMARK(BM_hist_record);

/* The cores' latency histograms (common/phist.h): one sample, and the fast clock read around it. */
static void
BM_phist_record(benchmark::State &st)
{
	static struct phist h;
	uint64_t v = 1;

	for (auto _ : st) {
		v = v * 6364136223846793005ull + 1442695040888963407ull;
		phist_record(&h, (v >> 40) % 10000000);
	}
	benchmark::DoNotOptimize(h.sum_ns);
}
BENCHMARK(BM_phist_record);

static void
BM_clk_mono_fast(benchmark::State &st)
{
	uint64_t t = 0;

	clk_init();
	for (auto _ : st)
		t += clk_mono_fast_ns();
	benchmark::DoNotOptimize(t);
}
BENCHMARK(BM_clk_mono_fast);

BENCHMARK_MAIN();
