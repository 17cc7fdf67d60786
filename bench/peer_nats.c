// SPDX-License-Identifier: Apache-2.0
/*
 * peer_nats.c - peer-nats, sprocket-bench's load against NATS JetStream
 * (libnats), for the side-by-side in docs/benchmarks.md (bench/compare.sh).
 *
 *   peer-nats produce|e2e --url=nats://127.0.0.1:4222 --size=128 --duration=10
 *             [--rate=N] [--depth=N] [--queues=N] [--producers=N] [--consumers=N]
 *             [--json]
 *
 * A JetStream stream BENCH (file storage, subjects bench.>, recreated at
 * start) stands for a topic; its subjects bench.0..bench.N-1 for the queues,
 * sent to round robin. produce: js publish -> PubAck, timed by the publisher.
 * e2e: the same publishes, plus --consumers push consumers (ephemeral,
 * deliver new, ack none), each on a connection of its own: with one, a
 * subscription to bench.>; with several, consumer i subscribes to the
 * subjects bench.q with q % consumers == i (2.9 filters on one subject per
 * consumer). Latency = received - the send time carried in the first 8
 * bytes of the payload.
 *
 * Pacing and output are sprocket-bench's (bench_report.h): one producer,
 * closed loop, one request in flight uses the synchronous js_Publish;
 * otherwise each of the --producers connections has js_PublishAsync with at
 * most --depth unacknowledged, message k goes to producer k % producers, and
 * at --rate the latency runs from each message's due time (coordinated
 * omission corrected).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "bench_report.h"
#include "common/clock.h"
#include "common/hist.h"

#define HIST_MAX_NS (60ull * 1000000000ull)
#define QUEUES_MAX 1024
#define PRODUCERS_MAX 64

struct run {
	const struct bench_popts *o;
	uint64_t warm_end;
	_Atomic uint64_t acked;
	_Atomic uint64_t consumed;
	_Atomic uint64_t errors;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/* A producer: a connection with its JetStream context. */
struct producer {
	struct run *r;
	natsConnection *nc;
	jsCtx *js;
	struct hist *h; /* its ack thread (async) or main (sync) writes it */
	uint64_t count;
	unsigned inflight; /* under r->mu */
};

/* One subscription's samples: each has its own delivery thread. */
struct sink {
	struct run *r;
	natsSubscription *sub;
	struct hist *h;
	uint64_t count;
};

static void
usage(void)
{
	fprintf(stderr, "usage: peer-nats produce|e2e --url=nats://H:P [--size=B] [--duration=S]\n"
			"       [--warmup=S] [--rate=N] [--depth=N] [--queues=N] [--producers=N]\n"
			"       [--consumers=N] [--progress=S] [--cpu=C] [--json]\n");
}

static void
on_ack(jsCtx *js, natsMsg *m, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
	struct producer *p = closure;
	struct run *r = p->r;
	uint64_t now = clk_mono_ns();
	uint64_t stamp = 0;

	(void)js;
	if (natsMsg_GetDataLength(m) >= (int)sizeof(stamp))
		memcpy(&stamp, natsMsg_GetData(m), sizeof(stamp));
	if (pa != NULL && pae == NULL) {
		atomic_fetch_add_explicit(&r->acked, 1, memory_order_relaxed);
		if (stamp >= r->warm_end) {
			hist_record(p->h, now - stamp);
			p->count++;
		}
	} else {
		atomic_fetch_add_explicit(&r->errors, 1, memory_order_relaxed);
	}
	natsMsg_Destroy(m);
	pthread_mutex_lock(&r->mu);
	p->inflight--;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void
on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
	struct sink *k = closure;
	struct run *r = k->r;
	uint64_t now = clk_mono_ns();
	uint64_t stamp = 0;

	(void)nc;
	(void)sub;
	if (natsMsg_GetDataLength(m) >= (int)sizeof(stamp))
		memcpy(&stamp, natsMsg_GetData(m), sizeof(stamp));
	if (stamp >= r->warm_end && stamp <= now) {
		hist_record(k->h, now - stamp);
		k->count++;
	}
	atomic_fetch_add_explicit(&r->consumed, 1, memory_order_relaxed);
	natsMsg_Destroy(m);
}

static void
sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull),
			      .tv_nsec = (long)(t % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int
fail(const char *what, natsStatus s, jsErrCode jerr)
{
	fprintf(stderr, "peer-nats: %s: %s (jetstream error %d)\n", what, natsStatus_GetText(s),
		(int)jerr);
	return 1;
}

int
main(int argc, char **argv)
{
	struct bench_popts o;
	struct run r = {.o = &o};
	struct producer *ps;
	struct sink *sinks = NULL;
	natsConnection **cns = NULL; /* the consumers' connections */
	jsCtx **cjs = NULL;
	natsOptions *nopts = NULL;
	struct hist *ph, *eh;
	jsOptions jo;
	jsStreamConfig sc;
	jsErrCode jerr = 0;
	natsStatus s;
	char subj[QUEUES_MAX][24];
	const char *subjects[] = {"bench.>"};
	uint8_t *buf;
	bool e2e, sync_pub;
	struct bench_pace pace;
	uint64_t end, pcount = 0, ecount = 0;
	unsigned np, nc, nsinks = 0;

	o = (struct bench_popts){.url = "nats://127.0.0.1:4222"};
	if (bench_popts_parse(argc, argv, &o, QUEUES_MAX) != 0 || o.producers > PRODUCERS_MAX) {
		usage();
		return 2;
	}
	e2e = strcmp(o.mode, "e2e") == 0;
	np = o.producers;
	nc = e2e ? o.consumers : 0;
	sync_pub = o.rate <= 0 && o.depth == 1 && np == 1;
	clk_init();
	if (o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		(void)sched_setaffinity(0, sizeof(set), &set);
	}
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	buf = calloc(1, o.size);
	ps = calloc(np, sizeof(*ps));
	if (!buf || !ps || hist_create(HIST_MAX_NS, &ph) != 0 || hist_create(HIST_MAX_NS, &eh) != 0)
		return 1;
	for (unsigned q = 0; q < o.queues; q++)
		snprintf(subj[q], sizeof(subj[q]), "bench.%u", q);

	/*
	 * SendAsap: write each publish at once instead of leaving it to the
	 * library's flusher thread (which coalesces, adding up to a millisecond
	 * at low rates); what a latency-minded NATS user sets.
	 */
	s = natsOptions_Create(&nopts);
	if (s == NATS_OK)
		s = natsOptions_SetURL(nopts, o.url);
	if (s == NATS_OK)
		s = natsOptions_SetSendAsap(nopts, true);
	if (s != NATS_OK)
		return fail("options", s, 0);
	jsOptions_Init(&jo);
	jo.PublishAsync.AckHandler = on_ack;
	/* our own count enforces --depth; the library must never stall first */
	jo.PublishAsync.MaxPending = 2 * (int64_t)o.depth;
	for (unsigned i = 0; i < np; i++) {
		ps[i].r = &r;
		if (hist_create(HIST_MAX_NS, &ps[i].h) != 0)
			return 1;
		jo.PublishAsync.AckHandlerClosure = &ps[i];
		s = natsConnection_Connect(&ps[i].nc, nopts);
		if (s != NATS_OK)
			return fail("connect", s, 0);
		s = natsConnection_JetStream(&ps[i].js, ps[i].nc, &jo);
		if (s != NATS_OK)
			return fail("jetstream context", s, 0);
	}
	(void)js_DeleteStream(ps[0].js, "BENCH", NULL, NULL);
	jsStreamConfig_Init(&sc);
	sc.Name = "BENCH";
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	s = js_AddStream(NULL, ps[0].js, &sc, NULL, &jerr);
	if (s != NATS_OK)
		return fail("add stream BENCH", s, jerr);
	/* warm every subject once, unmeasured */
	for (unsigned q = 0; q < o.queues; q++) {
		s = js_Publish(NULL, ps[0].js, subj[q], buf, (int)o.size, NULL, &jerr);
		if (s != NATS_OK)
			return fail("first publish", s, jerr);
	}
	if (e2e) {
		jsSubOptions so;

		/* one subscription to bench.> with one consumer, else one per subject */
		sinks = calloc(nc == 1 ? 1 : o.queues, sizeof(*sinks));
		cns = calloc(nc, sizeof(*cns));
		cjs = calloc(nc, sizeof(*cjs));
		if (!sinks || !cns || !cjs)
			return 1;
		jsSubOptions_Init(&so);
		so.Stream = "BENCH";
		so.Config.AckPolicy = js_AckNone;
		so.Config.DeliverPolicy = js_DeliverNew;
		for (unsigned i = 0; i < nc; i++) {
			s = natsConnection_Connect(&cns[i], nopts);
			if (s == NATS_OK)
				s = natsConnection_JetStream(&cjs[i], cns[i], NULL);
			if (s != NATS_OK)
				return fail("e2e consumer connect", s, 0);
		}
		for (unsigned q = 0; q < (nc == 1 ? 1 : o.queues); q++) {
			struct sink *k = &sinks[nsinks++];

			k->r = &r;
			if (hist_create(HIST_MAX_NS, &k->h) != 0)
				return 1;
			s = js_Subscribe(&k->sub, cjs[q % nc], nc == 1 ? "bench.>" : subj[q],
					 on_msg, k, NULL, &so, &jerr);
			if (s == NATS_OK)
				s = natsSubscription_SetPendingLimits(k->sub, -1, -1);
			if (s != NATS_OK)
				return fail("e2e subscribe", s, jerr);
		}
	}

	{
		char ver[64];

		snprintf(ver, sizeof(ver), "jetstream/libnats-%s", nats_GetVersion());
		bench_print_header(o.json, "peer-nats", ver, o.rate, o.depth, np, true, nc);
	}
	bench_progress_start("peer-nats", o.progress);
	bench_pace_init(&pace, clk_mono_ns(), o.rate);
	r.warm_end = pace.start + (uint64_t)(o.warmup * 1e9);
	end = r.warm_end + (uint64_t)(o.duration * 1e9);
	for (;;) {
		uint64_t now = clk_mono_ns();
		uint64_t due = bench_pace_due(&pace, now);
		const char *sj = subj[pace.issued % o.queues];
		struct producer *p = &ps[pace.issued % np];

		if (due >= end || now >= end)
			break;
		/* the ack threads write the histograms: the count alone */
		bench_progress(now, "produce", atomic_load(&r.acked), NULL);
		if (due > now)
			sleep_until(due);
		memcpy(buf, &due, sizeof(due));
		if (sync_pub) {
			s = js_Publish(NULL, p->js, sj, buf, (int)o.size, NULL, &jerr);
			now = clk_mono_ns();
			if (s != NATS_OK) {
				atomic_fetch_add_explicit(&r.errors, 1, memory_order_relaxed);
			} else {
				atomic_fetch_add_explicit(&r.acked, 1, memory_order_relaxed);
				if (due >= r.warm_end) {
					hist_record(p->h, now - due);
					p->count++;
				}
			}
		} else {
			/* a free slot first: the wait is charged to this message (due is fixed) */
			pthread_mutex_lock(&r.mu);
			while (p->inflight >= o.depth)
				pthread_cond_wait(&r.cv, &r.mu);
			p->inflight++;
			pthread_mutex_unlock(&r.mu);
			s = js_PublishAsync(p->js, sj, buf, (int)o.size, NULL);
			if (s != NATS_OK) {
				atomic_fetch_add_explicit(&r.errors, 1, memory_order_relaxed);
				pthread_mutex_lock(&r.mu);
				p->inflight--;
				pthread_mutex_unlock(&r.mu);
			}
		}
		pace.issued++;
	}
	if (!sync_pub) {
		jsPubOptions po;

		jsPubOptions_Init(&po);
		po.MaxWait = 5000;
		for (unsigned i = 0; i < np; i++)
			(void)js_PublishAsyncComplete(ps[i].js, &po);
	}
	if (e2e) {
		/* what was acknowledged, consumed within 2 s */
		uint64_t t = clk_mono_ns();

		while (atomic_load(&r.consumed) < atomic_load(&r.acked) &&
		       clk_mono_ns() - t < 2000000000ull)
			usleep(1000);
		/* Unsubscribe returns once the delivery thread is done with the sink. */
		for (unsigned i = 0; i < nsinks; i++) {
			natsSubscription_Unsubscribe(sinks[i].sub);
			natsSubscription_Destroy(sinks[i].sub);
		}
	}
	/* each connection's ack thread is done once it is destroyed */
	for (unsigned i = 0; i < np; i++) {
		jsCtx_Destroy(ps[i].js);
		natsConnection_Destroy(ps[i].nc);
		if (hist_merge(ph, ps[i].h) != 0)
			return 1;
		pcount += ps[i].count;
		hist_destroy(ps[i].h);
	}
	for (unsigned i = 0; i < nsinks; i++) {
		if (hist_merge(eh, sinks[i].h) != 0)
			return 1;
		ecount += sinks[i].count;
		hist_destroy(sinks[i].h);
	}
	bench_print_peer_rows(&o, &(struct bench_peer_result){.backend = "jetstream",
							      .lost_timeout_ms = 5000,
							      .pcount = pcount,
							      .perrors = atomic_load(&r.errors),
							      .ph = ph,
							      .ecount = ecount,
							      .acked = atomic_load(&r.acked),
							      .consumed = atomic_load(&r.consumed),
							      .eh = eh});
	for (unsigned i = 0; i < nc; i++) {
		jsCtx_Destroy(cjs[i]);
		natsConnection_Destroy(cns[i]);
	}
	natsOptions_Destroy(nopts);
	hist_destroy(ph);
	hist_destroy(eh);
	free(sinks);
	free(cns);
	free(cjs);
	free(ps);
	free(buf);
	return 0;
}
