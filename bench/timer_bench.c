// SPDX-License-Identifier: Apache-2.0
/*
 * timer_bench - delivery-time timers: load them, and measure how late they
 * reach their topic (bench/timer_lateness.py drives it; docs/benchmarks.md
 * "Delivery times").
 *
 *   timer_bench load NAMESRV TOPIC COUNT DUE_FROM_MS SPAN_MS
 *       COUNT async sends over the dataplane (udp), message i due at
 *       DUE_FROM_MS + i * SPAN_MS / COUNT (TIMER_DELIVER_MS), at most 4,096
 *       in flight (DUE_FROM_MS 0: plain messages); prints
 *       {"sent":N,"failed":N,"ms":N}
 *   timer_bench drain NAMESRV TOPIC COUNT TIMEOUT_MS
 *       pulls every queue of TOPIC from offset 0 until COUNT messages came
 *       or TIMEOUT_MS passed; lateness = the delivered copy's store time -
 *       its TIMER_OUT_MS; prints {"n":N,"early":N,"p50":..,"p99":..,
 *       "p999":..,"p9999":..,"max":..} in ms
 *
 * Lateness is measured against each timer's own due time, a schedule fixed
 * before the run: nothing the broker does late can hide (an open loop).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sprocket/client.h"
#include "sprocket/consumer.h"
#include "sprocket/producer.h"

#define WINDOW 4096

static _Atomic long inflight, failed;

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sent_cb(void *arg, int err, const struct sp_send_result *res)
{
	(void)arg;
	if (err != 0 || res->status != 0)
		atomic_fetch_add(&failed, 1);
	atomic_fetch_sub(&inflight, 1);
}

static int
load(struct sp_client *c, const char *topic, long count, int64_t from, int64_t span)
{
	struct sp_producer_cfg pc = {.retry_times = 2, .send_timeout_ms = 10000};
	struct sp_producer *p;
	int64_t t0 = now_ms();
	char body[64];
	int rc = sp_producer_create(c, &pc, &p);

	if (rc != 0) {
		fprintf(stderr, "timer_bench: producer: %s\n", sp_strerror(rc));
		return 2;
	}
	for (long i = 0; i < count; i++) {
		struct sp_msg m = {.topic = topic, .body = body};

		/* DUE_FROM_MS 0: plain messages (a baseline) */
		m.deliver_ms =
			from ? from + (int64_t)((double)i * (double)span / (double)count) : 0;
		m.body_len = (size_t)snprintf(body, sizeof(body), "%" PRId64, m.deliver_ms);
		while (atomic_load(&inflight) >= WINDOW)
			usleep(50);
		atomic_fetch_add(&inflight, 1);
		rc = sp_producer_send_async(p, &m, sent_cb, NULL);
		if (rc != 0) {
			atomic_fetch_sub(&inflight, 1);
			atomic_fetch_add(&failed, 1);
		}
	}
	while (atomic_load(&inflight) > 0)
		usleep(1000);
	printf("{\"sent\":%ld,\"failed\":%ld,\"ms\":%" PRId64 "}\n", count - atomic_load(&failed),
	       atomic_load(&failed), now_ms() - t0);
	sp_producer_destroy(p);
	return atomic_load(&failed) ? 1 : 0;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t
pct(const int64_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)n);

	return v[i < n ? i : n - 1];
}

static int
drain(struct sp_client *c, const char *topic, long count, int64_t timeout_ms)
{
	int64_t *late = malloc(sizeof(*late) * (size_t)count);
	int64_t *off, end = now_ms() + timeout_ms;
	struct sp_mq *mqs;
	size_t nq, n = 0, early = 0;
	int rc;

	if (late == NULL)
		return 2;
	rc = sp_topic_queues(c, topic, true, &mqs, &nq);
	if (rc != 0) {
		fprintf(stderr, "timer_bench: %s: %s\n", topic, sp_strerror(rc));
		free(late);
		return 2;
	}
	off = calloc(nq, sizeof(*off));
	while (n < (size_t)count && now_ms() < end && off != NULL) {
		bool got = false;

		for (size_t q = 0; q < nq && n < (size_t)count; q++) {
			struct sp_pull_req rq = {
				.offset = off[q], .max_msgs = 256, .group = "GTimer"};
			struct sp_pull_result res;

			if (sp_pull(c, &mqs[q], &rq, &res) != 0)
				continue;
			for (size_t k = 0; k < res.n_msgs && n < (size_t)count; k++) {
				const char *v;
				size_t vl;
				char buf[24];

				if (!sp_msg_prop(&res.msgs[k], "TIMER_OUT_MS", &v, &vl) ||
				    vl >= sizeof(buf))
					continue;
				memcpy(buf, v, vl);
				buf[vl] = '\0';
				late[n] = res.msgs[k].store_ts - strtoll(buf, NULL, 10);
				early += late[n] < 0;
				n++;
			}
			if (res.status == SP_PULL_FOUND && res.next_offset > off[q]) {
				off[q] = res.next_offset;
				got = true;
			}
			sp_pull_result_free(&res);
		}
		if (!got)
			usleep(20000);
	}
	qsort(late, n, sizeof(*late), cmp_i64);
	if (n == 0)
		printf("{\"n\":0}\n");
	else
		printf("{\"n\":%zu,\"early\":%zu,\"p50\":%" PRId64 ",\"p99\":%" PRId64
		       ",\"p999\":%" PRId64 ",\"p9999\":%" PRId64 ",\"max\":%" PRId64 "}\n",
		       n, early, pct(late, n, .5), pct(late, n, .99), pct(late, n, .999),
		       pct(late, n, .9999), late[n - 1]);
	free(off);
	free(mqs);
	free(late);
	return n == (size_t)count ? 0 : 1;
}

int
main(int argc, char **argv)
{
	struct sp_client_cfg cfg = {.connect_timeout_ms = 5000};
	struct sp_client *c;
	int rc;

	if (argc < 6 || (strcmp(argv[1], "load") == 0 && argc < 7) ||
	    (strcmp(argv[1], "load") != 0 && strcmp(argv[1], "drain") != 0)) {
		fprintf(stderr, "usage: timer_bench load NAMESRV TOPIC COUNT DUE_FROM_MS SPAN_MS\n"
				"       timer_bench drain NAMESRV TOPIC COUNT TIMEOUT_MS\n");
		return 2;
	}
	cfg.namesrv = argv[2];
	rc = sp_client_create(&cfg, &c);
	if (rc != 0) {
		fprintf(stderr, "timer_bench: client: %s\n", sp_strerror(rc));
		return 2;
	}
	if (strcmp(argv[1], "load") == 0)
		rc = load(c, argv[3], atol(argv[4]), atoll(argv[5]), atoll(argv[6]));
	else
		rc = drain(c, argv[3], atol(argv[4]), atoll(argv[5]));
	sp_client_destroy(c);
	return rc;
}
