// SPDX-License-Identifier: Apache-2.0
/*
 * test_client.c - libsprocket against real sprocket-namesrv and
 * sprocket-broker processes, on one backend (argv[1]: udp, af_packet, dpdk;
 * optional further arguments name the cases to run).
 *
 *   basic          sync, async, one-way and batch sends, each the first
 *                  message of a topic nobody created (TBW102's route, the
 *                  broker's SYSTEM_BUSY while it creates the topic), pulled
 *                  back with bodies, tags, keys and properties checked
 *   million        1,000,000 messages (T_MILLION overrides) on every
 *                  backend (measured here: about 3 s on udp, 8 s on
 *                  af_packet), over 8 queues of a 2-core broker, by
 *                  batches from 4 threads, consumed by a
 *                  push consumer group of 2 members: every message exactly
 *                  once (sequence number + CRC in the body, a bitmap), queue
 *                  offsets consecutive and each producer thread's sequence
 *                  increasing within a queue
 *   sync_flush_kill SYNC_FLUSH broker killed (SIGKILL) under async load and
 *                  restarted on its store: every SEND_OK message is there,
 *                  and a new push consumer of the group resumes exactly at
 *                  the committed offsets the broker recovered
 *   async_flush_kill the same with ASYNC_FLUSH (SEND_OK before write-back:
 *                  the write-behind buffers in /dev/shm outlive the broker)
 *   write_protect  two brokers, one write-protected (SIGUSR1) mid-run: no
 *                  send fails, the route loses the broker's write queues,
 *                  and gets them back after SIGUSR2
 *   send_back      a callback that fails some messages: they come back
 *                  from %RETRY%<group> with their topic restored
 *   bad_input      oversized body, unknown topic with auto-creation off,
 *                  invalid topic names, offsets past the end and negative, a
 *                  queue the topic lacks: each a clear error, nothing stored
 *   placement      a broker with one dataplane core on its own CPU: no
 *                  other broker thread may run on that CPU (dpdk: EAL's
 *                  init pins its caller to the core's CPU)
 *
 * The udp backend always runs; af_packet and dpdk exit 77 (skip) without
 * root or a DPDK build. dpdk: a memif is point to point, so write_protect
 * puts tests/dpdk/memif_switch.c between the client and the two brokers (as
 * a NIC host reaches brokers through a switch); one process has one EAL, so
 * the push consumers share the producer's client. sync_flush_kill runs there too: the
 * client's memif re-arms until the restarted broker listens again (DPDK logs
 * "Failed to connect socket" meanwhile). Nothing here asserts a duration;
 * the durations printed are for the reader.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl_env.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "harness.h"
#include "sprocket/consumer.h"
#include "sprocket/producer.h"
#include "wire/dp.h"

#define MILLION 1000000u
#define PAD 20 /* body: seq (8) + crc (4) + PAD bytes */
#define BODY_LEN (12 + PAD)

static enum sp_backend g_be;
static struct cl_env E;

static double
secs_since(uint64_t t0)
{
	return (double)(clk_mono_ns() - t0) / 1e9;
}

/* ---- bodies: a sequence number and a CRC over it and the padding ---- */

static void
body_make(uint64_t seq, uint8_t *b)
{
	uint32_t crc;

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(seq >> (8 * i));
	for (int i = 0; i < PAD; i++)
		b[12 + i] = (uint8_t)(seq * 31 + (uint64_t)i * 7);
	crc = crc32_update(0, b, 8);
	crc = crc32_update(crc, b + 12, PAD);
	memcpy(b + 8, &crc, 4);
}

/* Return: the sequence number of a good body; the test fails on a bad one. */
static uint64_t
body_check(const void *body, size_t len)
{
	const uint8_t *b = body;
	uint64_t seq = 0;
	uint32_t crc;
	uint32_t want;

	T_ASSERT_EQ(len, BODY_LEN);
	for (int i = 0; i < 8; i++)
		seq |= (uint64_t)b[i] << (8 * i);
	memcpy(&crc, b + 8, 4);
	want = crc32_update(0, b, 8);
	want = crc32_update(want, b + 12, PAD);
	if (crc != want)
		T_FAIL("body of seq %llu: crc %08x, want %08x", (unsigned long long)seq, crc, want);
	for (int i = 0; i < PAD; i++)
		T_ASSERT_EQ(b[12 + i], (uint8_t)(seq * 31 + (uint64_t)i * 7));
	return seq;
}

/* ---- pulling a whole topic back ---- */

typedef void (*visit_fn)(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m);

/* Pulls every message of every read queue of @topic. Return: how many. */
static size_t
pull_all(struct sp_client *c, const char *topic, visit_fn fn, void *arg)
{
	struct sp_mq *mqs;
	size_t n;
	size_t total = 0;

	T_ASSERT_EQ(sp_topic_queues(c, topic, true, &mqs, &n), 0);
	for (size_t i = 0; i < n; i++) {
		struct sp_pull_req rq = {.max_msgs = 256, .group = "pull-all"};
		int64_t max;

		T_ASSERT_EQ(sp_max_offset(c, &mqs[i], &max), 0);
		while (rq.offset < max) {
			struct sp_pull_result res;

			T_ASSERT_EQ(sp_pull(c, &mqs[i], &rq, &res), 0);
			T_ASSERT_EQ(res.status, SP_PULL_FOUND);
			for (size_t k = 0; k < res.n_msgs; k++) {
				T_ASSERT_EQ(res.msgs[k].queue_offset, rq.offset + (int64_t)k);
				fn(arg, &mqs[i], &res.msgs[k]);
			}
			total += res.n_msgs;
			T_ASSERT(res.next_offset > rq.offset);
			rq.offset = res.next_offset;
			sp_pull_result_free(&res);
		}
	}
	free(mqs);
	return total;
}

/* Waits until @topic's own route (not TBW102's) reached this client with @nq read queues. */
static void
wait_topic(struct sp_client *c, const char *topic, size_t nq)
{
	for (int t = 0; t < 1000; t++) {
		struct sp_mq *mqs;
		size_t n;

		if (sp_topic_queues(c, topic, true, &mqs, &n) == 0) {
			free(mqs);
			if (n >= nq)
				return;
		}
		usleep(10000);
	}
	T_FAIL("topic %s never got %zu read queues", topic, nq);
}

/* ---- basic ---- */

enum { K_SYNC, K_ASYNC, K_ONEWAY, K_BATCH, K_N };
static const char *const kind_topic[K_N] = {"BasicSync", "BasicAsync", "BasicOneway", "BasicBatch"};
#define BASIC_N 64 /* messages per kind */

struct basic_msg {
	uint8_t body[BODY_LEN];
	char tags[16];
	char keys[32];
	char val[32];
	struct sp_prop props[2];
	struct sp_msg m;
};

static void
basic_fill(struct basic_msg *b, unsigned kind, uint64_t seq)
{
	body_make(seq, b->body);
	snprintf(b->tags, sizeof(b->tags), "tag%u", (unsigned)(seq % 3));
	snprintf(b->keys, sizeof(b->keys), "key%llu k%u", (unsigned long long)seq, kind);
	snprintf(b->val, sizeof(b->val), "v=%llu", (unsigned long long)seq * 7);
	b->props[0] = (struct sp_prop){"seq", b->val};
	b->props[1] = (struct sp_prop){"kind", kind_topic[kind]};
	b->m = (struct sp_msg){.topic = kind_topic[kind],
			       .tags = b->tags,
			       .keys = b->keys,
			       .body = b->body,
			       .body_len = BODY_LEN,
			       .props = b->props,
			       .n_props = 2,
			       .flag = (int32_t)seq};
}

static _Atomic unsigned basic_async_ok;
static _Atomic unsigned basic_async_fail;

static void
basic_async_cb(void *arg, int err, const struct sp_send_result *res)
{
	(void)arg;
	if (err == 0 && res->status == 0 && res->count == 1)
		atomic_fetch_add(&basic_async_ok, 1);
	else {
		fprintf(stderr, "async send failed: %s\n", sp_strerror(err));
		atomic_fetch_add(&basic_async_fail, 1);
	}
}

struct basic_seen {
	unsigned kind;
	unsigned count[BASIC_N];
};

static void
basic_visit(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	struct basic_seen *s = arg;
	struct basic_msg want;
	uint64_t seq = body_check(m->body, m->body_len);
	const char *v;
	size_t vl;

	T_ASSERT(seq < BASIC_N);
	s->count[seq]++;
	basic_fill(&want, s->kind, seq);
	T_ASSERT_STREQ(m->topic, kind_topic[s->kind]);
	T_ASSERT_STREQ(mq->topic, kind_topic[s->kind]);
	T_ASSERT_STREQ(m->tags, want.tags);
	T_ASSERT_STREQ(m->keys, want.keys);
	T_ASSERT_EQ(m->flag, (int32_t)seq);
	T_ASSERT(sp_msg_prop(m, "seq", &v, &vl));
	T_ASSERT(vl == strlen(want.val) && memcmp(v, want.val, vl) == 0);
	T_ASSERT(sp_msg_prop(m, "kind", &v, &vl));
	T_ASSERT(vl == strlen(kind_topic[s->kind]) && memcmp(v, kind_topic[s->kind], vl) == 0);
	T_ASSERT_EQ(strlen(m->msg_id), SP_MSGID_LEN);
}

static void
test_basic(void)
{
	const char *args[] = {"--defaultTopicQueueNums=4", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2, .fault_tolerance = true};
	struct sp_client *c;
	struct sp_producer *p;
	static struct basic_msg bm[BASIC_N];
	struct sp_send_result res;
	uint64_t t0 = clk_mono_ns();

	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);

	/* sync: the first SEND makes the broker create the topic */
	for (uint64_t i = 0; i < BASIC_N; i++) {
		basic_fill(&bm[i], K_SYNC, i);
		T_ASSERT_EQ(sp_producer_send(p, &bm[i].m, &res), 0);
		T_ASSERT_EQ(res.status, 0);
		T_ASSERT_EQ(res.count, 1);
		T_ASSERT_STREQ(res.broker, "broker-a");
		T_ASSERT_EQ(strlen(res.msg_id), SP_MSGID_LEN);
		if (i == 0)
			T_ASSERT_EQ(res.tries, 1); /* SYSTEM_BUSY did not use up a retry */
	}
	/* async: the first ones go out while the topic does not exist */
	for (uint64_t i = 0; i < BASIC_N; i++) {
		basic_fill(&bm[i], K_ASYNC, i);
		T_ASSERT_EQ(sp_producer_send_async(p, &bm[i].m, basic_async_cb, NULL), 0);
	}
	/* one-way: likewise */
	for (uint64_t i = 0; i < BASIC_N; i++) {
		basic_fill(&bm[i], K_ONEWAY, i);
		T_ASSERT_EQ(sp_producer_send_oneway(p, &bm[i].m), 0);
	}
	/* batch: 4 batches of 16, the first creates the topic */
	for (uint64_t i = 0; i < BASIC_N; i += 16) {
		struct sp_msg ms[16];
		char ids[16][SP_MSGID_LEN + 1];

		for (uint64_t k = 0; k < 16; k++) {
			basic_fill(&bm[i + k], K_BATCH, i + k);
			ms[k] = bm[i + k].m;
		}
		T_ASSERT_EQ(sp_producer_send_batch(p, ms, 16, &res, ids), 0);
		T_ASSERT_EQ(res.count, 16);
		T_ASSERT_STREQ(res.msg_id, ids[0]);
	}
	for (int t = 0;
	     t < 3000 && atomic_load(&basic_async_ok) + atomic_load(&basic_async_fail) < BASIC_N;
	     t++)
		usleep(10000);
	T_ASSERT_EQ(atomic_load(&basic_async_fail), 0);
	T_ASSERT_EQ(atomic_load(&basic_async_ok), BASIC_N);

	/* every topic's own route arrives; then everything is pulled back */
	for (unsigned k = 0; k < K_N; k++) {
		struct basic_seen seen = {.kind = k};
		size_t got = 0;

		wait_topic(c, kind_topic[k], 4);
		/* one-way sends have no answer to wait for: pull until all are there */
		for (int t = 0; t < 500; t++) {
			memset(seen.count, 0, sizeof(seen.count));
			got = pull_all(c, kind_topic[k], basic_visit, &seen);
			if (got >= BASIC_N)
				break;
			usleep(10000);
		}
		T_ASSERT_EQ(got, BASIC_N);
		for (unsigned i = 0; i < BASIC_N; i++)
			T_ASSERT_EQ(seen.count[i], 1);
		printf("# %s: %u messages back, bodies, tags, keys, properties checked\n",
		       kind_topic[k], BASIC_N);
	}
	T_ASSERT(bk_log_has(&E.bk[0], "topic BasicSync created (4 queues)"));
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
	printf("# basic on %s: %.2f s\n", getenv("T_BACKEND"), secs_since(t0));
}

/* ---- million ---- */

#define M_QUEUES 8
#define M_THREADS 4
#define M_BATCH 64

struct mstate {
	unsigned total;
	_Atomic uint64_t *bitmap;
	_Atomic unsigned consumed;
	_Atomic unsigned dups;
	_Atomic unsigned busy_retries; /* batches sent again after SYSTEM_BUSY */
	_Atomic unsigned produced;
	_Atomic int64_t last_off[M_QUEUES];
	_Atomic int64_t last_seq[M_QUEUES][M_THREADS];
	_Atomic unsigned per_member[2];
	_Atomic unsigned bad_order;
	struct sp_producer *p;
};

static struct mstate M;

struct mctx {
	unsigned member;
};

static enum sp_consume_status
million_cb(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	struct mctx *x = arg;
	uint64_t seq = body_check(m->body, m->body_len);
	unsigned per = M.total / M_THREADS;
	unsigned th = (unsigned)(seq / per);
	uint64_t bit = 1ull << (seq % 64);
	int q = mq->queue_id;

	T_ASSERT(seq < M.total && th < M_THREADS);
	T_ASSERT(q >= 0 && q < M_QUEUES && q == m->queue_id);
	T_ASSERT_STREQ(m->topic, "Million");
	/* in queue order, no gap: one consume thread serves a queue */
	if (atomic_load(&M.last_off[q]) + 1 != m->queue_offset) {
		fprintf(stderr, "queue %d: offset %lld after %lld\n", q, (long long)m->queue_offset,
			(long long)atomic_load(&M.last_off[q]));
		atomic_fetch_add(&M.bad_order, 1);
	}
	atomic_store(&M.last_off[q], m->queue_offset);
	/* a producer thread's messages keep their order within a queue */
	if ((int64_t)seq <= atomic_load(&M.last_seq[q][th]))
		atomic_fetch_add(&M.bad_order, 1);
	atomic_store(&M.last_seq[q][th], (int64_t)seq);
	if (atomic_fetch_or(&M.bitmap[seq / 64], bit) & bit)
		atomic_fetch_add(&M.dups, 1);
	atomic_fetch_add(&M.per_member[x->member], 1);
	atomic_fetch_add(&M.consumed, 1);
	return SP_CONSUME_SUCCESS;
}

static void *
million_producer(void *arg)
{
	unsigned th = (unsigned)(uintptr_t)arg;
	unsigned per = M.total / M_THREADS;
	static _Thread_local uint8_t bodies[M_BATCH][BODY_LEN];
	struct sp_msg ms[M_BATCH];

	for (unsigned base = th * per; base < (th + 1) * per; base += M_BATCH) {
		unsigned n = SP_MIN((unsigned)M_BATCH, (th + 1) * per - base);
		struct sp_send_result res;
		int err;

		for (unsigned k = 0; k < n; k++) {
			body_make(base + k, bodies[k]);
			ms[k] = (struct sp_msg){
				.topic = "Million", .body = bodies[k], .body_len = BODY_LEN};
		}
		/*
		 * SYSTEM_BUSY past the producer's own retries (a loaded host): the
		 * batch was not stored, so an application sends it again, as here
		 * for up to a minute. Any other error fails the test.
		 */
		for (uint64_t until = clk_mono_ns() + 60ull * 1000000000ull;;) {
			err = sp_producer_send_batch(M.p, ms, n, &res, NULL);
			if (err != SP_ERR_STATUS(WIRE_DP_ST_SYSTEM_BUSY) || clk_mono_ns() > until)
				break;
			atomic_fetch_add(&M.busy_retries, 1);
			usleep(10000);
		}
		if (err)
			T_FAIL("batch at seq %u: %s (stored %u)", base, sp_strerror(err),
			       res.count);
		T_ASSERT_EQ(res.count, n);
		atomic_fetch_add(&M.produced, n);
	}
	return NULL;
}

static void
test_million(void)
{
	const char *args[] = {"--defaultTopicQueueNums=8", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2, .fault_tolerance = true};
	struct sp_client *cp;
	struct sp_client *cc[2];
	struct sp_push *push[2];
	struct mctx ctx[2] = {{0}, {1}};
	pthread_t th[M_THREADS];
	uint64_t t0;
	double t_prod = 0;
	unsigned last = 0;

	M.total = MILLION;
	if (getenv("T_MILLION"))
		M.total = (unsigned)atoi(getenv("T_MILLION"));
	M.total -= M.total % M_THREADS;
	M.bitmap = calloc(M.total / 64 + 1, sizeof(*M.bitmap));
	T_ASSERT(M.bitmap != NULL);
	for (int q = 0; q < M_QUEUES; q++) {
		atomic_store(&M.last_off[q], -1);
		for (int t = 0; t < M_THREADS; t++)
			atomic_store(&M.last_seq[q][t], -1);
	}
	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	cp = cl_client_new(&E);
	/* dpdk: one device per process, so one client for everyone */
	cc[0] = g_be == SP_BACKEND_DPDK ? cp : cl_client_new(&E);
	cc[1] = g_be == SP_BACKEND_DPDK ? cp : cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(cp, &pc, &M.p), 0);

	t0 = clk_mono_ns();
	for (unsigned i = 0; i < M_THREADS; i++)
		T_ASSERT_EQ(pthread_create(&th[i], NULL, million_producer, (void *)(uintptr_t)i),
			    0);
	/* the first batches created the topic; the group starts from its first offsets */
	wait_topic(cc[0], "Million", M_QUEUES);
	wait_topic(cc[1], "Million", M_QUEUES);
	for (unsigned i = 0; i < 2; i++) {
		struct sp_push_cfg cfg = {.group = "GMillion",
					  .topic = "Million",
					  .fn = million_cb,
					  .arg = &ctx[i],
					  .threads = 4,
					  .member_index = i,
					  .member_count = 2,
					  .from = SP_FROM_FIRST,
					  .pull_batch = 256,
					  .suspend_ms = 2000,
					  .commit_interval_ms = 1000};
		struct sp_mq *mqs;
		size_t n;

		T_ASSERT_EQ(sp_push_start(cc[i], &cfg, &push[i]), 0);
		T_ASSERT_EQ(sp_push_queues(push[i], &mqs, &n), 0);
		T_ASSERT_EQ(n, M_QUEUES / 2); /* AllocateMessageQueueAveragely: 4 each */
		for (size_t k = 0; k < n; k++)
			T_ASSERT_EQ(mqs[k].queue_id, (int32_t)(i * 4 + k));
		free(mqs);
	}
	for (unsigned i = 0; i < M_THREADS; i++)
		T_ASSERT_EQ(pthread_join(th[i], NULL), 0);
	t_prod = secs_since(t0);
	T_ASSERT_EQ(atomic_load(&M.produced), M.total);
	/* consumption: no deadline of its own, only progress (meson's timeout bounds it) */
	for (int idle = 0; atomic_load(&M.consumed) < M.total;) {
		unsigned now;

		usleep(100000);
		now = atomic_load(&M.consumed);
		idle = now == last ? idle + 1 : 0;
		last = now;
		if (idle > 300)
			T_FAIL("consumed %u of %u, no progress for 30 s", now, M.total);
	}
	{
		double t_all = secs_since(t0);

		usleep(500000); /* a duplicate would show up now */
		printf("# million on %s: %u messages, 8 queues, 2 cores; produced in %.1f s "
		       "(%.0f msg/s), all consumed after %.1f s (%.0f msg/s); member 0: %u, "
		       "member 1: %u; %u batches sent again after SYSTEM_BUSY\n",
		       getenv("T_BACKEND"), M.total, t_prod, M.total / t_prod, t_all,
		       M.total / t_all, atomic_load(&M.per_member[0]),
		       atomic_load(&M.per_member[1]), atomic_load(&M.busy_retries));
	}
	T_ASSERT_EQ(atomic_load(&M.dups), 0);
	T_ASSERT_EQ(atomic_load(&M.bad_order), 0);
	T_ASSERT_EQ(atomic_load(&M.consumed), M.total);
	for (unsigned s = 0; s < M.total; s++)
		T_ASSERT(atomic_load(&M.bitmap[s / 64]) & (1ull << (s % 64)));
	T_ASSERT(atomic_load(&M.per_member[0]) > 0 && atomic_load(&M.per_member[1]) > 0);
	for (unsigned i = 0; i < 2; i++)
		sp_push_stop(push[i]);
	/* the group's offsets were committed at the end of every queue */
	for (int q = 0; q < M_QUEUES; q++) {
		struct sp_mq mq = {.topic = "Million", .broker = "broker-a", .queue_id = q};
		int64_t off;
		int64_t max;

		T_ASSERT_EQ(sp_max_offset(cp, &mq, &max), 0);
		T_ASSERT_EQ(sp_query_offset(cp, "GMillion", &mq, &off), 0);
		T_ASSERT_EQ(off, max);
		T_ASSERT_EQ(atomic_load(&M.last_off[q]) + 1, max);
	}
	sp_producer_destroy(M.p);
	if (cc[0] != cp) {
		sp_client_destroy(cc[0]);
		sp_client_destroy(cc[1]);
	}
	sp_client_destroy(cp);
	cl_env_stop(&E);
	free(M.bitmap);
}

/* ---- SYNC_FLUSH, killed and restarted ---- */

#define D_TOTAL 20000u
#define D_WINDOW 256
#define D_QUEUES 4

struct dstate {
	_Atomic uint8_t acked[D_TOTAL]; /* 1 SEND_OK */
	_Atomic unsigned n_acked;
	_Atomic unsigned n_failed;
	_Atomic unsigned inflight;
	/* consumer A (before the kill) and B (after the restart) */
	_Atomic int64_t a_next[D_QUEUES]; /* offset after the last one A consumed */
	_Atomic int64_t b_first[D_QUEUES];
	_Atomic int64_t b_next[D_QUEUES];
	_Atomic uint8_t a_seen[D_TOTAL];
	_Atomic uint8_t b_seen[D_TOTAL];
	_Atomic unsigned b_bad_order;
	_Atomic uint8_t pulled[D_TOTAL];
};

static struct dstate D;

static void
durable_cb(void *arg, int err, const struct sp_send_result *res)
{
	uint64_t seq = (uintptr_t)arg;

	if (err == 0 && res->status == 0) {
		atomic_store(&D.acked[seq], 1);
		atomic_fetch_add(&D.n_acked, 1);
	} else {
		atomic_fetch_add(&D.n_failed, 1);
	}
	atomic_fetch_sub(&D.inflight, 1);
}

static enum sp_consume_status
durable_a(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	uint64_t seq = body_check(m->body, m->body_len);

	(void)arg;
	T_ASSERT(seq < D_TOTAL && mq->queue_id < D_QUEUES);
	atomic_store(&D.a_seen[seq], 1);
	atomic_store(&D.a_next[mq->queue_id], m->queue_offset + 1);
	return SP_CONSUME_SUCCESS;
}

static enum sp_consume_status
durable_b(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	uint64_t seq = body_check(m->body, m->body_len);
	int q = mq->queue_id;

	(void)arg;
	T_ASSERT(seq < D_TOTAL && q < D_QUEUES);
	atomic_store(&D.b_seen[seq], 1);
	if (atomic_load(&D.b_first[q]) < 0)
		atomic_store(&D.b_first[q], m->queue_offset);
	else if (m->queue_offset != atomic_load(&D.b_next[q]))
		atomic_fetch_add(&D.b_bad_order, 1);
	atomic_store(&D.b_next[q], m->queue_offset + 1);
	return SP_CONSUME_SUCCESS;
}

static void
durable_visit(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	uint64_t seq = body_check(m->body, m->body_len);

	(void)arg;
	(void)mq;
	T_ASSERT(seq < D_TOTAL);
	atomic_store(&D.pulled[seq], 1);
}

static void
durable_send(struct sp_producer *p, uint64_t seq, uint8_t (*bodies)[BODY_LEN])
{
	struct sp_msg m = {.topic = "Durable", .body = bodies[seq], .body_len = BODY_LEN};
	int err;

	while (atomic_load(&D.inflight) >= D_WINDOW)
		usleep(200);
	body_make(seq, bodies[seq]);
	atomic_fetch_add(&D.inflight, 1);
	err = sp_producer_send_async(p, &m, durable_cb, (void *)(uintptr_t)seq);
	if (err) {
		atomic_fetch_sub(&D.inflight, 1);
		atomic_fetch_add(&D.n_failed, 1);
	}
}

/*
 * @need_bufs: SEND_OK comes before the data is on disk (ASYNC_FLUSH), so
 * "nothing acknowledged lost" needs the broker's write-behind buffers in
 * tmpfs files; where it fell back to anonymous memory (no usable /dev/shm:
 * it logs "anonymous memory") the loss is reported, not asserted.
 */
static void
flush_kill(const char *name, const char *flush, bool need_bufs)
{
	const char *args[] = {flush, "--flushConsumerOffsetInterval=200",
			      "--defaultTopicQueueNums=4", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2, .fault_tolerance = true};
	struct sp_push_cfg ccfg = {.group = "GDurable",
				   .topic = "Durable",
				   .threads = 2,
				   .from = SP_FROM_FIRST,
				   .suspend_ms = 1000,
				   .commit_interval_ms = 100};
	static uint8_t bodies[D_TOTAL][BODY_LEN];
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_push *a;
	struct sp_push *b;
	int64_t restored[D_QUEUES];
	int64_t max[D_QUEUES];
	uint64_t seq = 0;
	uint64_t t0 = clk_mono_ns();
	unsigned lost_ack = 0;
	unsigned dup_window = 0;
	unsigned dup_seen = 0;
	bool anon;

	memset(&D, 0, sizeof(D));
	for (int q = 0; q < D_QUEUES; q++) {
		atomic_store(&D.b_first[q], -1);
		atomic_store(&D.a_next[q], 0);
	}
	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	anon = need_bufs && bk_log_has(&E.bk[0], "anonymous memory");
	if (anon)
		printf("# %s: the broker's write-behind buffers are in anonymous memory here "
		       "(no usable /dev/shm): acknowledged messages may be lost, not checked\n",
		       name);
	/* a dead broker should cost a second per CONNECT, not five */
	E.connect_timeout_ms = 1000;
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	durable_send(p, seq++, bodies);
	wait_topic(c, "Durable", D_QUEUES);
	ccfg.fn = durable_a;
	T_ASSERT_EQ(sp_push_start(c, &ccfg, &a), 0);
	while (atomic_load(&D.n_acked) < D_TOTAL / 3)
		durable_send(p, seq++, bodies);
	/* SIGKILL under load: sends in flight fail or are retried */
	cl_broker_kill(&E, 0);
	printf("# %s: killed the broker after %u acks, %llu sent\n", name, atomic_load(&D.n_acked),
	       (unsigned long long)seq);
	/* consumer A goes away with the broker: its last commits cannot land */
	sp_push_stop(a);
	cl_broker_restart(&E, 0);
	for (int q = 0; q < D_QUEUES; q++) {
		struct sp_mq mq = {.topic = "Durable", .broker = "broker-a", .queue_id = q};
		int err = -1;

		/* the route is unchanged; the first calls may meet the old session */
		for (int t = 0; t < 50 && err; t++) {
			err = sp_query_offset(c, "GDurable", &mq, &restored[q]);
			if (err == SP_ERR_STATUS(WIRE_DP_ST_QUERY_NOT_FOUND)) {
				restored[q] = 0; /* B starts from the first offset */
				err = 0;
			}
			if (err)
				usleep(100000);
		}
		T_ASSERT_EQ(err, 0);
		/* never ahead of what A had consumed */
		T_ASSERT(restored[q] <= atomic_load(&D.a_next[q]));
		dup_window += (unsigned)(atomic_load(&D.a_next[q]) - restored[q]);
	}
	ccfg.fn = durable_b;
	T_ASSERT_EQ(sp_push_start(c, &ccfg, &b), 0);
	while (seq < D_TOTAL)
		durable_send(p, seq++, bodies);
	while (atomic_load(&D.inflight))
		usleep(1000);
	/* B consumes to the end of every queue */
	for (int q = 0; q < D_QUEUES; q++) {
		struct sp_mq mq = {.topic = "Durable", .broker = "broker-a", .queue_id = q};

		T_ASSERT_EQ(sp_max_offset(c, &mq, &max[q]), 0);
		for (int t = 0; t < 6000 && atomic_load(&D.b_next[q]) < max[q]; t++)
			usleep(10000);
		T_ASSERT_EQ(atomic_load(&D.b_next[q]), max[q]);
		/* resumed exactly at the committed offset the broker recovered */
		if (max[q] > restored[q])
			T_ASSERT_EQ(atomic_load(&D.b_first[q]), restored[q]);
	}
	T_ASSERT_EQ(atomic_load(&D.b_bad_order), 0);
	sp_push_stop(b);
	/* every SEND_OK message survived the kill */
	(void)pull_all(c, "Durable", durable_visit, NULL);
	for (unsigned i = 0; i < D_TOTAL; i++) {
		if (atomic_load(&D.acked[i]) && !atomic_load(&D.pulled[i]))
			lost_ack++;
		if (atomic_load(&D.a_seen[i]) && atomic_load(&D.b_seen[i]))
			dup_seen++;
	}
	printf("# %s on %s: %u sent, %u acked, %u failed (broker down), "
	       "%u acked and lost; consumer resumed at the recovered offsets: %u in the "
	       "uncommitted window, %u messages consumed twice; %.1f s\n",
	       name, getenv("T_BACKEND"), D_TOTAL, atomic_load(&D.n_acked),
	       atomic_load(&D.n_failed), lost_ack, dup_window, dup_seen, secs_since(t0));
	if (!anon)
		T_ASSERT_EQ(lost_ack, 0);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
}

static void
test_sync_flush_kill(void)
{
	flush_kill("sync_flush_kill", "--flushDiskType=SYNC_FLUSH", false);
}

/*
 * The same with ASYNC_FLUSH, SEND_OK before any write-back: the broker's
 * write-behind buffers are files in storeBufferDir (/dev/shm), so a killed
 * broker loses no acknowledged message either (docs/store.md).
 */
static void
test_async_flush_kill(void)
{
	flush_kill("async_flush_kill", "--flushDiskType=ASYNC_FLUSH", true);
}

/* ---- write protection ---- */

#define W_TOTAL 3000u

static unsigned
write_brokers(struct sp_client *c, const char *topic, bool *has_a, bool *has_b)
{
	struct sp_mq *mqs;
	size_t n;

	*has_a = *has_b = false;
	if (sp_topic_queues(c, topic, false, &mqs, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		*has_a |= strcmp(mqs[i].broker, "broker-a") == 0;
		*has_b |= strcmp(mqs[i].broker, "broker-b") == 0;
	}
	free(mqs);
	return (unsigned)n;
}

static unsigned w_count[W_TOTAL];

static void
wp_visit(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	uint64_t seq = body_check(m->body, m->body_len);

	(void)arg;
	(void)mq;
	T_ASSERT(seq < W_TOTAL);
	w_count[seq]++;
}

static void
test_write_protect(void)
{
	const char *args[] = {"--defaultTopicQueueNums=4", NULL};
	/* a 2-CPU box shared with other work can stall a broker core past 3 s */
	struct sp_producer_cfg pc = {
		.retry_times = 2, .fault_tolerance = true, .send_timeout_ms = 10000};
	struct sp_client *c;
	struct sp_producer *p;
	uint8_t body[BODY_LEN];
	struct sp_msg m = {.topic = "Guarded", .body = body, .body_len = BODY_LEN};
	unsigned on_a = 0;
	unsigned on_b = 0;
	unsigned retried = 0;
	unsigned after_drop_on_a = 0;
	bool has_a;
	bool has_b;
	bool dropped = false;
	uint64_t t0 = clk_mono_ns();

	cl_env_start(&E, g_be);
	/*
	 * Both brokers have the topic from the start: auto-creation creates it
	 * only on the brokers the first sends happened to reach (as RocketMQ's).
	 */
	cl_broker_precreate(&E, 0, "Guarded", 4);
	cl_broker_precreate(&E, 1, "Guarded", 4);
	cl_broker_start(&E, 0, args);
	cl_broker_start(&E, 1, args);
	cl_env_switch(&E); /* dpdk: one client memif, two brokers behind a switch */
	/*
	 * The client learns of the lost write bit from a NO_PERMISSION answer or
	 * from its periodic refresh; when fault avoidance steers every send to
	 * broker-b there is no such answer, so the check below needs the
	 * periodic refresh to come within its 10 s.
	 */
	E.route_refresh_ms = 1000;
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	for (unsigned seq = 0; seq < W_TOTAL; seq++) {
		struct sp_send_result res;
		int err;

		if (seq == 0)
			T_ASSERT_EQ(cl_wait_route(&E, "Guarded", 2, 8, 10000), 0);
		if (seq == W_TOTAL / 3) {
			T_ASSERT_EQ(kill(cl_broker_pid(&E, 0), SIGUSR1), 0);
			printf("# write_protect: broker-a write-protected after %u sends\n", seq);
		}
		if (seq == 2 * W_TOTAL / 3) {
			/* the refreshed route has no write queue of broker-a any more */
			for (int t = 0; t < 1000 && !dropped; t++) {
				(void)write_brokers(c, "Guarded", &has_a, &has_b);
				dropped = !has_a && has_b;
				if (!dropped)
					usleep(10000);
			}
			T_ASSERT(dropped);
		}
		body_make(seq, body);
		err = sp_producer_send(p, &m, &res);
		if (err)
			T_FAIL("send %u failed: %s", seq, sp_strerror(err));
		T_ASSERT_EQ(res.status, 0);
		retried += res.tries > 1;
		on_a += strcmp(res.broker, "broker-a") == 0;
		on_b += strcmp(res.broker, "broker-b") == 0;
		if (seq >= 2 * W_TOTAL / 3)
			after_drop_on_a += strcmp(res.broker, "broker-a") == 0;
	}
	T_ASSERT_EQ(after_drop_on_a, 0);
	/* write access back: the route gets broker-a's queues again */
	T_ASSERT_EQ(kill(cl_broker_pid(&E, 0), SIGUSR2), 0);
	T_ASSERT_EQ(cl_wait_route(&E, "Guarded", 2, 8, 10000), 0);
	/* every message exactly once, on whichever broker took it */
	T_ASSERT_EQ(pull_all(c, "Guarded", wp_visit, NULL), W_TOTAL);
	for (unsigned i = 0; i < W_TOTAL; i++)
		T_ASSERT_EQ(w_count[i], 1);
	printf("# write_protect on %s: %u sends, none failed; %u on broker-a, %u on broker-b, "
	       "%u needed a retry; %.1f s\n",
	       getenv("T_BACKEND"), W_TOTAL, on_a, on_b, retried, secs_since(t0));
	sp_producer_destroy(p);
	cl_env_switch_stop(&E); /* before any of its peers leaves */
	sp_client_destroy(c);
	cl_env_stop(&E);
}

/* ---- send back ---- */

#define S_TOTAL 200u

static _Atomic unsigned s_ok[S_TOTAL];
static _Atomic unsigned s_calls[S_TOTAL];
static _Atomic unsigned s_retried;
static _Atomic unsigned s_bad;

/* seq % 10 == 3 fails once, seq % 50 == 7 fails twice */
static unsigned
s_fails(uint64_t seq)
{
	return seq % 50 == 7 ? 2 : seq % 10 == 3 ? 1 : 0;
}

static enum sp_consume_status
sb_cb(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	uint64_t seq = body_check(m->body, m->body_len);
	unsigned call;
	const char *v;
	size_t vl;

	(void)arg;
	T_ASSERT(seq < S_TOTAL);
	call = atomic_fetch_add(&s_calls[seq], 1);
	/* the original topic, whichever queue it came from */
	if (strcmp(m->topic, "Bounce") != 0 || (int32_t)call != m->reconsume_times)
		atomic_fetch_add(&s_bad, 1);
	if (m->reconsume_times > 0) {
		atomic_fetch_add(&s_retried, 1);
		if (strcmp(mq->topic, "%RETRY%GBounce") != 0 ||
		    !sp_msg_prop(m, "RETRY_TOPIC", &v, &vl) || vl != 6 ||
		    memcmp(v, "Bounce", 6) != 0 || strcmp(m->tags, "bt") != 0)
			atomic_fetch_add(&s_bad, 1);
	}
	if (call < s_fails(seq))
		return SP_CONSUME_LATER;
	atomic_fetch_add(&s_ok[seq], 1);
	return SP_CONSUME_SUCCESS;
}

/* A visit_fn: checks a delayed message (body "later") was stored a second after its birth. */
static void
later_visit(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	(void)mq;
	T_ASSERT(m->body_len == 5 && memcmp(m->body, "later", 5) == 0);
	T_ASSERT(m->store_ts >= m->born_ts + 1000);
	T_ASSERT(!sp_msg_prop(m, "DELAY", &(const char *){NULL}, &(size_t){0}));
	(*(unsigned *)arg)++;
}

/*
 * sp_msg.delay_level on a sync and an async send (messageDelayLevel "1s"):
 * SEND_OK at once, in the topic only a second later; in a batch refused.
 */
static void
test_delay_level(void)
{
	const char *args[] = {"--defaultTopicQueueNums=2", "--messageDelayLevel=1s", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2};
	struct sp_msg m = {.topic = "Later", .body = "later", .body_len = 5, .delay_level = 1};
	struct sp_send_result res;
	struct sp_client *c;
	struct sp_producer *p;
	unsigned seen = 0;
	int64_t t_send;
	size_t early;

	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	t_send = clk_wall_ms(); /* each message is due a second after its born time, or later */
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	T_ASSERT_EQ(res.status, 0);
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	wait_topic(c, "Later", 2);
	early = pull_all(c, "Later", later_visit, &seen);
	if (clk_wall_ms() < t_send + 1000) /* a slow start may take us past it: then no claim */
		T_ASSERT_EQ(early, 0);
	for (int i = 0; i < 300 && seen < 2; i++) {
		usleep(20000);
		seen = 0;
		(void)pull_all(c, "Later", later_visit, &seen);
	}
	T_ASSERT_EQ(seen, 2);
	T_ASSERT(sp_producer_send_batch(p, &m, 1, &res, NULL) < 0);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
}

static int64_t timed_due;

static void
timed_visit(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	(void)mq;
	T_ASSERT(m->body_len == 5 && memcmp(m->body, "timed", 5) == 0);
	if (m->store_ts < timed_due)
		T_FAIL("stored at %lld, %lld ms before its delivery time", (long long)m->store_ts,
		       (long long)(timed_due - m->store_ts));
	T_ASSERT(sp_msg_prop(m, "TIMER_OUT_MS", &(const char *){NULL}, &(size_t){0}));
	(*(unsigned *)arg)++;
}

/*
 * sp_msg.deliver_ms on a sync and an async send: SEND_OK at once, in the
 * topic only from that millisecond, once each; with a delay level too, or
 * in a batch, refused.
 */
static void
test_deliver_time(void)
{
	const char *args[] = {"--defaultTopicQueueNums=2", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2};
	struct sp_msg m = {.topic = "Timed", .body = "timed", .body_len = 5};
	struct sp_send_result res;
	struct sp_client *c;
	struct sp_producer *p;
	unsigned seen = 0;
	size_t early;

	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	timed_due = clk_wall_ms() + 1200;
	m.deliver_ms = timed_due;
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	T_ASSERT_EQ(res.status, 0);
	atomic_store(&basic_async_ok, 0);
	T_ASSERT_EQ(sp_producer_send_async(p, &m, basic_async_cb, NULL), 0);
	for (int i = 0; i < 250 && atomic_load(&basic_async_ok) == 0; i++)
		usleep(20000);
	T_ASSERT_EQ(atomic_load(&basic_async_ok), 1);
	wait_topic(c, "Timed", 2);
	early = pull_all(c, "Timed", timed_visit, &seen);
	if (clk_wall_ms() < timed_due) /* a slow start may take us past it: then no claim */
		T_ASSERT_EQ(early, 0);
	for (int i = 0; i < 300 && seen < 2; i++) {
		usleep(20000);
		seen = 0;
		(void)pull_all(c, "Timed", timed_visit, &seen);
	}
	T_ASSERT_EQ(seen, 2);
	usleep(200000);
	seen = 0;
	(void)pull_all(c, "Timed", timed_visit, &seen);
	T_ASSERT_EQ(seen, 2);
	T_ASSERT(sp_producer_send_batch(p, &m, 1, &res, NULL) < 0);
	m.delay_level = 1;
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), -EINVAL);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
}

static _Atomic unsigned tx_checks;

static enum sp_tx_state
tx_exec(void *arg, const struct sp_msg *msg, const struct sp_send_result *half)
{
	(void)arg;
	T_ASSERT(half->status == 0 && half->phys_offset >= 0);
	if (msg->body_len == 6 && memcmp(msg->body, "commit", 6) == 0)
		return SP_TX_COMMIT;
	if (msg->body_len == 8 && memcmp(msg->body, "rollback", 8) == 0)
		return SP_TX_ROLLBACK;
	return SP_TX_UNKNOWN;
}

static enum sp_tx_state
tx_check(void *arg, const struct sp_msg_ext *m)
{
	(void)arg;
	T_ASSERT(m->body_len == 7 && memcmp(m->body, "unknown", 7) == 0);
	T_ASSERT(strcmp(m->topic, "TxT") == 0);
	atomic_fetch_add(&tx_checks, 1);
	return SP_TX_COMMIT;
}

static void
tx_visit(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	unsigned *seen = arg;

	(void)mq;
	if (m->body_len == 6 && memcmp(m->body, "commit", 6) == 0)
		seen[0]++;
	else if (m->body_len == 7 && memcmp(m->body, "unknown", 7) == 0)
		seen[1]++;
	else
		seen[2]++; /* a rolled back one, or anything else */
}

/*
 * The transactional producer: a committed half delivered once, a rolled
 * back one never, an unknown one checked back (over the broker's remoting
 * port) and committed by the check listener.
 */
static void
test_transactions(void)
{
	const char *args[] = {"--defaultTopicQueueNums=2", "--transactionTimeOut=1000",
			      "--transactionCheckInterval=500", NULL};
	struct sp_tx_producer_cfg tc = {.group = "PGC", .check = tx_check};
	static const char *const bodies[] = {"commit", "rollback", "unknown"};
	static const enum sp_tx_state want[] = {SP_TX_COMMIT, SP_TX_ROLLBACK, SP_TX_UNKNOWN};
	struct sp_send_result res;
	struct sp_tx_producer *p;
	struct sp_client *c;
	unsigned seen[3] = {0};

	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_tx_producer_create(c, &tc, &p), 0);
	for (int i = 0; i < 3; i++) {
		struct sp_msg m = {
			.topic = "TxT", .body = bodies[i], .body_len = strlen(bodies[i])};
		enum sp_tx_state st;

		T_ASSERT_EQ(sp_tx_send(p, &m, tx_exec, NULL, &res, &st), 0);
		T_ASSERT_EQ(st, want[i]);
	}
	wait_topic(c, "TxT", 2);
	for (int i = 0; i < 500 && (seen[0] < 1 || seen[1] < 1); i++) {
		usleep(20000);
		memset(seen, 0, sizeof(seen));
		(void)pull_all(c, "TxT", tx_visit, seen);
	}
	T_ASSERT(atomic_load(&tx_checks) >= 1);
	usleep(1200000); /* another check pass: nothing more */
	memset(seen, 0, sizeof(seen));
	(void)pull_all(c, "TxT", tx_visit, seen);
	T_ASSERT_EQ(seen[0], 1);
	T_ASSERT_EQ(seen[1], 1);
	T_ASSERT_EQ(seen[2], 0);
	{
		struct sp_msg d = {.topic = "TxT", .body = "x", .body_len = 1, .delay_level = 1};
		enum sp_tx_state st;

		T_ASSERT_EQ(sp_tx_send(p, &d, tx_exec, NULL, &res, &st), -EINVAL);
	}
	sp_tx_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
}

static void
test_send_back(void)
{
	/* a short delay table: retries come back after 1 s, not 10 s, 30 s ... */
	const char *args[] = {"--defaultTopicQueueNums=4", "--messageDelayLevel=1s", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2};
	struct sp_push_cfg ccfg = {.group = "GBounce",
				   .topic = "Bounce",
				   .expr = "bt",
				   .fn = sb_cb,
				   .from = SP_FROM_FIRST,
				   .suspend_ms = 1000};
	static uint8_t bodies[S_TOTAL][BODY_LEN];
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_push *push;
	struct sp_msg ms[S_TOTAL];
	struct sp_send_result res;
	unsigned want_retried = 0;
	bool done = false;
	uint64_t t0 = clk_mono_ns();

	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	for (unsigned i = 0; i < S_TOTAL; i++) {
		body_make(i, bodies[i]);
		ms[i] = (struct sp_msg){
			.topic = "Bounce", .tags = "bt", .body = bodies[i], .body_len = BODY_LEN};
		want_retried += s_fails(i);
	}
	for (unsigned i = 0; i < S_TOTAL; i += 50)
		T_ASSERT_EQ(sp_producer_send_batch(p, &ms[i], 50, &res, NULL), 0);
	wait_topic(c, "Bounce", 4);
	T_ASSERT_EQ(sp_push_start(c, &ccfg, &push), 0);
	for (int t = 0; t < 6000 && !done; t++) {
		done = true;
		for (unsigned i = 0; i < S_TOTAL; i++)
			done &= atomic_load(&s_ok[i]) >= 1;
		if (!done)
			usleep(10000);
	}
	usleep(500000); /* nothing more may arrive */
	{
		struct sp_mq *mqs;
		size_t n;
		bool retry_q = false;

		T_ASSERT_EQ(sp_push_queues(push, &mqs, &n), 0);
		for (size_t i = 0; i < n; i++)
			retry_q |= strcmp(mqs[i].topic, "%RETRY%GBounce") == 0;
		free(mqs);
		T_ASSERT(retry_q);
	}
	sp_push_stop(push);
	for (unsigned i = 0; i < S_TOTAL; i++) {
		if (atomic_load(&s_ok[i]) != 1 || atomic_load(&s_calls[i]) != s_fails(i) + 1)
			T_FAIL("seq %u: %u successes, %u calls, want 1 and %u", i,
			       atomic_load(&s_ok[i]), atomic_load(&s_calls[i]), s_fails(i) + 1);
	}
	T_ASSERT_EQ(atomic_load(&s_bad), 0);
	T_ASSERT_EQ(atomic_load(&s_retried), want_retried);
	printf("# send_back on %s: %u messages, %u deliveries from %%RETRY%%GBounce; %.1f s\n",
	       getenv("T_BACKEND"), S_TOTAL, want_retried, secs_since(t0));
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
}

/*
 * Bad input through libsprocket, on this backend, against a broker with
 * auto-creation off: each is a clear error and nothing is written.
 */
static void
test_bad_input(void)
{
	const char *args[] = {"--autoCreateTopicEnable=false", "--maxMessageSize=4096", NULL};
	/* not compressed: 8 KiB of zeros would deflate below the broker's maxMessageSize */
	struct sp_producer_cfg pc = {
		.retry_times = 2, .send_timeout_ms = 5000, .compress_over = SP_COMPRESS_OFF};
	static uint8_t big[8192];
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_send_result res;
	struct sp_pull_result pr;
	struct sp_pull_req rq = {.group = "GBad", .max_msgs = 8};
	struct sp_msg m = {.topic = "Known", .body = big, .body_len = sizeof(big)};
	struct sp_mq mq = {.topic = "Known", .queue_id = 0};
	int64_t off;
	int err;

	cl_env_start(&E, g_be);
	E.wait_topic = "Known";
	cl_broker_precreate(&E, 0, "Known", 4);
	cl_broker_start(&E, 0, args);
	c = cl_client_new(&E);
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	/* oversized body: refused (by the client or the broker), never stored */
	err = sp_producer_send(p, &m, &res);
	printf("# bad_input: oversized body: %s\n", sp_strerror(err));
	T_ASSERT(err != 0);
	/* unknown topic, auto-creation off: no route */
	m.topic = "Nope";
	m.body_len = 8;
	err = sp_producer_send(p, &m, &res);
	printf("# bad_input: unknown topic: %s\n", sp_strerror(err));
	T_ASSERT(err != 0);
	/* invalid topic names: refused by the client, before any request */
	m.topic = "bad topic";
	err = sp_producer_send(p, &m, &res);
	printf("# bad_input: invalid name: %s\n", sp_strerror(err));
	T_ASSERT_EQ(err, -EINVAL);
	m.topic = "Known/../x";
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), -EINVAL);
	/* offsets past the end and negative: the broker says where to restart */
	rq.offset = 1000;
	T_ASSERT_EQ(sp_pull(c, &mq, &rq, &pr), 0);
	T_ASSERT_EQ(pr.status, SP_PULL_OFFSET_ILLEGAL);
	T_ASSERT_EQ(pr.next_offset, 0);
	sp_pull_result_free(&pr);
	rq.offset = -7;
	err = sp_pull(c, &mq, &rq, &pr);
	if (err == 0) {
		T_ASSERT_EQ(pr.status, SP_PULL_OFFSET_ILLEGAL);
		sp_pull_result_free(&pr);
	}
	/* a negative committed offset, a queue the topic does not have */
	T_ASSERT(sp_update_offset(c, "GBad", &mq, -5) != 0);
	T_ASSERT(sp_query_offset(c, "GBad", &mq, &off) != 0);
	mq.queue_id = 99;
	T_ASSERT(sp_max_offset(c, &mq, &off) != 0);
	/* nothing was written */
	for (int q = 0; q < 4; q++) {
		mq.queue_id = q;
		T_ASSERT_EQ(sp_max_offset(c, &mq, &off), 0);
		T_ASSERT_EQ(off, 0);
	}
	/* and the broker still serves */
	m.topic = "Known";
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	T_ASSERT_EQ(res.status, 0);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
	E.wait_topic = NULL;
}

/* ---- main: the backend, then the cases ---- */

/* True when the Cpus_allowed_list @list ("0", "0,2-5") names @cpu. */
static bool
cpu_listed(const char *list, int cpu)
{
	for (const char *p = list; *p != '\0' && *p != '\n';) {
		char *end;
		long lo = strtol(p, &end, 10);
		long hi = lo;

		T_ASSERT(end != p);
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (cpu >= lo && cpu <= hi)
			return true;
		p = *end == ',' ? end + 1 : end;
	}
	return false;
}

/*
 * Reads the broker's threads: names and allowed CPUs. Return: how many
 * threads other than dataplane cores there are; *@on_core counts those
 * allowed on @cpu, *@cores the dataplane cores that are allowed only @cpu.
 */
static unsigned
scan_threads(pid_t pid, int cpu, unsigned *on_core, unsigned *cores, bool *persist)
{
	char path[300];
	unsigned others = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	T_ASSERT(d != NULL);
	*on_core = *cores = 0;
	*persist = false;
	while ((de = readdir(d)) != NULL) {
		char line[256], comm[64] = "", cpus[128] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue; /* the thread just ended */
		while (fgets(line, sizeof(line), f) != NULL) {
			if (strncmp(line, "Name:", 5) == 0)
				sscanf(line + 5, "%63s", comm);
			else if (strncmp(line, "Cpus_allowed_list:", 18) == 0)
				sscanf(line + 18, "%127s", cpus);
		}
		fclose(f);
		if (strncmp(comm, "dp-core-", 8) == 0) {
			*cores += cpu_listed(cpus, cpu) && !strchr(cpus, ',') && !strchr(cpus, '-');
			continue;
		}
		others++;
		*persist |= strcmp(comm, "bk-persist") == 0;
		if (cpu_listed(cpus, cpu)) {
			printf("# placement: thread %s (%s) may run on the core's CPU %d: %s\n",
			       de->d_name, comm, cpu, cpus);
			(*on_core)++;
		}
	}
	closedir(d);
	return others;
}

static void
test_placement(void)
{
	char cpu_arg[64];
	const char *args[] = {"--dataplaneCores=1", cpu_arg, NULL};
	int cpu = t_dpdk_cpu(1); /* the CPU cl_env gives the broker's EAL (-l) */
	unsigned others = 0, on_core = 0, cores = 0;
	bool persist = false;

	if (cpu == t_dpdk_cpu(0)) {
		printf("# placement: one usable CPU, nothing to check\n");
		return;
	}
	snprintf(cpu_arg, sizeof(cpu_arg), "--dataplaneCpus=%d", cpu);
	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	/* bk-persist starts right after the "ready" line */
	for (int i = 0; i < 500 && !persist; i++) {
		others = scan_threads(E.bk[0].pid, cpu, &on_core, &cores, &persist);
		if (!persist)
			usleep(10000);
	}
	printf("# placement: %u dataplane core(s) on CPU %d, %u other threads, %u of them "
	       "allowed there\n",
	       cores, cpu, others, on_core);
	T_ASSERT(persist);
	T_ASSERT_EQ(cores, 1);
	T_ASSERT(others >= 4); /* main, store threads, registration, offsets writer */
	T_ASSERT_EQ(on_core, 0);
	cl_env_stop(&E);
}

static struct {
	pthread_mutex_t mu;
	unsigned calls;
	uint64_t sends, errors, p50, p99, max, in_flight;
	bool named;
} st_seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void
stats_cb(void *arg, const struct sp_broker_stats *st, size_t n)
{
	(void)arg;
	pthread_mutex_lock(&st_seen.mu);
	st_seen.calls++;
	for (size_t i = 0; i < n; i++) {
		st_seen.named |= strcmp(st[i].broker, "broker-a") == 0;
		st_seen.sends += st[i].sends;
		st_seen.errors += st[i].errors;
		st_seen.in_flight = st[i].in_flight;
		if (st[i].sends) {
			st_seen.p50 = st[i].p50_ns;
			st_seen.p99 = st[i].p99_ns;
			st_seen.max = st[i].max_ns;
		}
	}
	pthread_mutex_unlock(&st_seen.mu);
}

static uint64_t
stats_sends(void)
{
	uint64_t n;

	pthread_mutex_lock(&st_seen.mu);
	n = st_seen.sends;
	pthread_mutex_unlock(&st_seen.mu);
	return n;
}

/*
 * The stats callback: every interval, per broker, the sends of the interval
 * with their latency percentiles, failures, retries and what is in flight.
 */
static void
test_stats(void)
{
	const char *args[] = {"--defaultTopicQueueNums=2", NULL};
	struct sp_producer_cfg pc = {.retry_times = 2};
	struct sp_msg m = {.topic = "Stats", .body = "s", .body_len = 1};
	struct sp_send_result res;
	struct sp_client *c;
	struct sp_producer *p;
	uint64_t before;

	cl_env_start(&E, g_be);
	cl_broker_start(&E, 0, args);
	E.stats = stats_cb;
	E.stats_interval_ms = 100;
	c = cl_client_new(&E);
	E.stats = NULL;
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0); /* creates the topic */
	/* the client's thread reports each 100 ms: wait for it, however loaded the machine */
	for (int i = 0; i < 500 && stats_sends() < 1; i++)
		usleep(20000);
	usleep(300000);
	before = stats_sends();
	for (int i = 0; i < 200; i++)
		T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	for (int i = 0; i < 500 && stats_sends() - before < 200; i++)
		usleep(20000);
	usleep(300000); /* one report more would show a send counted twice */
	pthread_mutex_lock(&st_seen.mu);
	printf("# stats: %u calls, %llu sends (200 made), p50 %llu ns, p99 %llu, max %llu\n",
	       st_seen.calls, (unsigned long long)(st_seen.sends - before),
	       (unsigned long long)st_seen.p50, (unsigned long long)st_seen.p99,
	       (unsigned long long)st_seen.max);
	T_ASSERT(st_seen.calls >= 3);
	T_ASSERT(st_seen.named);
	T_ASSERT_EQ(st_seen.sends - before, 200);
	T_ASSERT_EQ(st_seen.errors, 0);
	T_ASSERT_EQ(st_seen.in_flight, 0);
	T_ASSERT(st_seen.p50 > 0 && st_seen.p50 <= st_seen.p99 && st_seen.p99 <= st_seen.max);
	pthread_mutex_unlock(&st_seen.mu);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	cl_env_stop(&E);
}

static const struct t_case cases[] = {
	T_CASE(test_basic),	      T_CASE(test_million),
	T_CASE(test_sync_flush_kill), T_CASE(test_async_flush_kill),
	T_CASE(test_write_protect),   T_CASE(test_send_back),
	T_CASE(test_delay_level),     T_CASE(test_deliver_time),
	T_CASE(test_transactions),    T_CASE(test_bad_input),
	T_CASE(test_placement),	      T_CASE(test_stats),
};

int
main(int argc, char **argv)
{
	struct t_case sel[sizeof(cases) / sizeof(cases[0])];
	size_t n = 0;
	int be;

	if (argc < 2 || (be = cl_backend_parse(argv[1])) < 0) {
		fprintf(stderr, "usage: test_client udp|af_packet|dpdk [case...]\n");
		return 2;
	}
	g_be = (enum sp_backend)be;
	if (!cl_env_check(g_be))
		return 77;
	setenv("T_BACKEND", argv[1], 1);
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool want = argc == 2;

		for (int k = 2; k < argc; k++)
			want |= strcmp(cases[i].name + 5, argv[k]) == 0; /* without "test_" */
		if (want)
			sel[n++] = cases[i];
	}
	if (!n) {
		fprintf(stderr, "no such case\n");
		return 2;
	}
	return t_run_all(__FILE__, sel, n);
}
