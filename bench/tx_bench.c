// SPDX-License-Identifier: Apache-2.0
/*
 * tx_bench - transactional produce (half + local transaction + commit) next
 * to plain produce, alternating slices in one run (bench/tx_produce.py
 * drives it; docs/benchmarks.md "Transactions").
 *
 *   tx_bench NAMESRV TOPIC RATE SECONDS ROUNDS
 *
 * Each round: SECONDS of plain sync sends, then SECONDS of sp_tx_send()
 * (the local transaction returns COMMIT at once), both open loop at RATE
 * per second: latency runs from each send's intended start (coordinated
 * omission corrected), so a send that holds the next ones up shows in
 * theirs. Then one more slice of each, closed loop, for throughput. Prints
 * one JSON line per kind: p50..p99.99 and max in us, and the rates.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sprocket/client.h"
#include "sprocket/producer.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static enum sp_tx_state
commit(void *arg, const struct sp_msg *msg, const struct sp_send_result *half)
{
	(void)arg;
	(void)msg;
	(void)half;
	return SP_TX_COMMIT;
}

static enum sp_tx_state
check(void *arg, const struct sp_msg_ext *half)
{
	(void)arg;
	(void)half;
	return SP_TX_COMMIT;
}

struct samples {
	uint64_t *v;
	size_t n, cap;
	uint64_t sent, failed, closed_sent;
	double closed_secs;
};

static void
add(struct samples *s, uint64_t ns)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 65536;
		uint64_t *nv = realloc(s->v, sizeof(*nv) * cap);

		if (nv == NULL)
			return;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = ns;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static double
pct(const struct samples *s, double q)
{
	size_t i = (size_t)(q * (double)s->n);

	return s->n ? (double)s->v[i < s->n ? i : s->n - 1] / 1000.0 : 0;
}

/* One send of @kind (0 plain, 1 transactional). Return: 0 or an error. */
static int
one(struct sp_producer *p, struct sp_tx_producer *tp, int kind, const char *topic)
{
	static const char body[128] = "sprocket tx bench";
	struct sp_msg m = {.topic = topic, .body = body, .body_len = sizeof(body)};
	struct sp_send_result res;
	enum sp_tx_state st;

	if (kind == 0)
		return sp_producer_send(p, &m, &res);
	return sp_tx_send(tp, &m, commit, NULL, &res, &st);
}

static void
slice_open(struct sp_producer *p, struct sp_tx_producer *tp, int kind, const char *topic,
	   double rate, double secs, struct samples *s)
{
	uint64_t t0 = now_ns(), gap = (uint64_t)(1e9 / rate), end = t0 + (uint64_t)(secs * 1e9);

	for (uint64_t due = t0; due < end; due += gap) {
		uint64_t t;

		while ((t = now_ns()) < due)
			;
		if (one(p, tp, kind, topic) != 0)
			s->failed++;
		else
			add(s, now_ns() - due);
		s->sent++;
	}
}

static void
slice_closed(struct sp_producer *p, struct sp_tx_producer *tp, int kind, const char *topic,
	     double secs, struct samples *s)
{
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(secs * 1e9);

	while (now_ns() < end)
		if (one(p, tp, kind, topic) == 0)
			s->closed_sent++;
	s->closed_secs += (double)(now_ns() - t0) / 1e9;
}

int
main(int argc, char **argv)
{
	struct sp_client_cfg cfg = {.connect_timeout_ms = 5000};
	struct sp_producer_cfg pc = {.retry_times = 2};
	struct sp_tx_producer_cfg tc = {.group = "PG_TX_BENCH", .check = check};
	struct samples s[2] = {{0}};
	struct sp_tx_producer *tp;
	struct sp_producer *p;
	struct sp_client *c;
	double rate, secs;
	int rounds;

	if (argc < 6) {
		fprintf(stderr, "usage: tx_bench NAMESRV TOPIC RATE SECONDS ROUNDS\n");
		return 2;
	}
	cfg.namesrv = argv[1];
	rate = atof(argv[3]);
	secs = atof(argv[4]);
	rounds = atoi(argv[5]);
	if (rate <= 0 || secs <= 0 || rounds < 1 || sp_client_create(&cfg, &c) != 0 ||
	    sp_producer_create(c, &pc, &p) != 0 || sp_tx_producer_create(c, &tc, &tp) != 0) {
		fprintf(stderr, "tx_bench: bad arguments or no client\n");
		return 2;
	}
	/* warm up: the topic's route, the remoting connection to the broker */
	for (int i = 0; i < 200; i++) {
		(void)one(p, tp, 0, argv[2]);
		(void)one(p, tp, 1, argv[2]);
	}
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < 2; k++)
			slice_open(p, tp, k, argv[2], rate, secs, &s[k]);
	for (int k = 0; k < 2; k++)
		slice_closed(p, tp, k, argv[2], secs, &s[k]);
	for (int k = 0; k < 2; k++) {
		qsort(s[k].v, s[k].n, sizeof(*s[k].v), cmp_u64);
		printf("{\"kind\":\"%s\",\"rate\":%.0f,\"sent\":%" PRIu64 ",\"failed\":%" PRIu64
		       ",\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,"
		       "\"p9999_us\":%.1f,\"max_us\":%.1f,\"closed_loop_per_s\":%.0f}\n",
		       k ? "transactional" : "plain", rate, s[k].sent, s[k].failed, pct(&s[k], .5),
		       pct(&s[k], .9), pct(&s[k], .99), pct(&s[k], .999), pct(&s[k], .9999),
		       s[k].n ? (double)s[k].v[s[k].n - 1] / 1000.0 : 0,
		       s[k].closed_secs > 0 ? (double)s[k].closed_sent / s[k].closed_secs : 0);
		free(s[k].v);
	}
	sp_tx_producer_destroy(tp);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	return 0;
}
