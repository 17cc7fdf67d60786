// SPDX-License-Identifier: Apache-2.0
/*
 * peer_redis.c - peer-redis, sprocket-bench's load against Redis Streams
 * (hiredis), for the side-by-side in docs/benchmarks.md (bench/compare.sh).
 *
 *   peer-redis produce|e2e --host=127.0.0.1 --port=6379 --size=128 --duration=10
 *              [--rate=N] [--depth=N] [--queues=N] [--producers=N] [--consumers=N]
 *              [--json]
 *
 * One stream key per queue (bench:0..bench:N-1, deleted at start), sent to
 * round robin. produce: XADD key * d <payload> -> the reply with the entry id
 * (with appendonly yes, Redis answers once the entry is in the AOF buffer, or
 * after fsync with appendfsync always). e2e: the same XADDs, plus
 * --consumers connections, each on its own thread in XREAD BLOCK over its
 * share of the keys (consumer i: keys q with q % consumers == i); latency =
 * received - the send time carried in the first 8 bytes of the payload.
 *
 * Pacing and output are sprocket-bench's (bench_report.h). Each of the
 * --producers connections carries up to --depth XADDs in flight (pipelined,
 * answers in order, so the due times are a FIFO); message k goes to producer
 * k % producers. The sending thread waits in ppoll() for answers or the next
 * due time, as a client's event loop would. At --rate latency runs from each
 * message's due time.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench_report.h"
#include "common/clock.h"
#include "common/hist.h"

#define HIST_MAX_NS (60ull * 1000000000ull)
#define QUEUES_MAX 1024
#define PRODUCERS_MAX 64

/* A consumer: its own connection and thread, the keys q with q % consumers == id. */
struct reader {
	const struct bench_popts *o;
	unsigned id;
	uint64_t warm_end;
	struct hist *h; /* reader thread only until joined */
	uint64_t count;
	_Atomic uint64_t consumed;
	_Atomic bool *stop;
	char (*keys)[24]; /* shared, read-only */
	char ids[QUEUES_MAX][48];
	pthread_t th;
	int err;
};

/* A producer: its own connection, up to --depth XADDs in flight. */
struct producer {
	redisContext *c;
	uint64_t *fifo; /* due times of the XADDs in flight, oldest at head */
	unsigned head;
	unsigned inflight;
};

static void
usage(void)
{
	fprintf(stderr,
		"usage: peer-redis produce|e2e [--host=H] [--port=P] [--size=B] [--duration=S]\n"
		"       [--warmup=S] [--rate=N] [--depth=N] [--queues=N] [--producers=N]\n"
		"       [--consumers=N] [--progress=S] [--cpu=C] [--json]\n");
}

/* XREAD reply: [[key, [[id, [field, value, ...]], ...]], ...] */
static void
reader_take(struct reader *k, const redisReply *rep, uint64_t now)
{
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		const redisReply *ks = rep->element[i];
		unsigned q;

		if (ks->type != REDIS_REPLY_ARRAY || ks->elements != 2)
			continue;
		if (sscanf(ks->element[0]->str, "bench:%u", &q) != 1 || q >= k->o->queues ||
		    q % k->o->consumers != k->id)
			continue;
		for (size_t j = 0; j < ks->element[1]->elements; j++) {
			const redisReply *e = ks->element[1]->element[j];
			const redisReply *fv;
			uint64_t stamp;

			if (e->type != REDIS_REPLY_ARRAY || e->elements != 2)
				continue;
			snprintf(k->ids[q], sizeof(k->ids[q]), "%s", e->element[0]->str);
			fv = e->element[1];
			atomic_fetch_add_explicit(&k->consumed, 1, memory_order_relaxed);
			if (fv->type != REDIS_REPLY_ARRAY || fv->elements < 2 ||
			    fv->element[1]->len < (int)sizeof(stamp))
				continue;
			memcpy(&stamp, fv->element[1]->str, sizeof(stamp));
			if (stamp >= k->warm_end && stamp <= now) {
				hist_record(k->h, now - stamp);
				k->count++;
			}
		}
	}
}

static void *
reader_main(void *arg)
{
	struct reader *k = arg;
	unsigned nc = k->o->consumers;
	unsigned n = (k->o->queues - k->id + nc - 1) / nc; /* the keys id, id + nc, ... */
	int argc = 6 + 2 * (int)n;
	const char **argv = calloc((size_t)argc, sizeof(*argv));
	redisContext *c = redisConnect(k->o->host, k->o->port);

	if (!argv || !c || c->err) {
		k->err = 1;
		goto out;
	}
	argv[0] = "XREAD";
	argv[1] = "COUNT";
	argv[2] = "1024";
	argv[3] = "BLOCK";
	argv[4] = "100";
	argv[5] = "STREAMS";
	for (unsigned i = 0; i < n; i++) {
		unsigned q = k->id + i * nc;

		argv[6 + i] = k->keys[q];
		argv[6 + n + i] = k->ids[q];
	}
	while (!atomic_load(k->stop)) {
		redisReply *rep = redisCommandArgv(c, argc, argv, NULL);
		uint64_t now = clk_mono_ns();

		if (!rep) {
			k->err = 1;
			break;
		}
		reader_take(k, rep, now);
		freeReplyObject(rep);
	}
out:
	if (c)
		redisFree(c);
	free(argv);
	return NULL;
}

/* Write what hiredis holds for the socket. Return: 0 or -EIO. */
static int
flush_out(redisContext *c)
{
	int done = 0;

	while (!done)
		if (redisBufferWrite(c, &done) != REDIS_OK)
			return -EIO;
	return 0;
}

static int
fail_conn(const char *what, redisContext *c)
{
	fprintf(stderr, "peer-redis: %s: %s\n", what, c ? c->errstr : "out of memory");
	return 1;
}

/* Takes every complete answer on @p's connection; times each from its due time. */
static int
producer_take(struct producer *p, unsigned depth, uint64_t now, uint64_t warm_end, struct hist *ph,
	      uint64_t *pcount, uint64_t *acked, uint64_t *errors)
{
	void *r;

	while (p->inflight > 0 && redisGetReplyFromReader(p->c, &r) == REDIS_OK && r) {
		redisReply *x = r;
		uint64_t d = p->fifo[p->head];

		p->head = (p->head + 1) % depth;
		p->inflight--;
		if (x->type == REDIS_REPLY_STRING) {
			(*acked)++;
			if (d >= warm_end) {
				hist_record(ph, now - d);
				(*pcount)++;
			}
		} else {
			(*errors)++;
		}
		freeReplyObject(x);
	}
	return p->c->err ? -EIO : 0;
}

int
main(int argc, char **argv)
{
	struct bench_popts o;
	struct reader *ks;
	struct producer *ps;
	struct hist *ph, *eh;
	redisContext *c;
	redisReply *rep;
	char(*keys)[24];
	_Atomic bool stop = false;
	uint64_t pcount = 0, ecount = 0, acked = 0, errors = 0, got = 0, end, warm_end;
	struct bench_pace pace;
	struct pollfd pfd[PRODUCERS_MAX];
	uint8_t *buf;
	char ver[64] = "redis";
	unsigned np, nc;
	bool e2e;

	o = (struct bench_popts){.host = "127.0.0.1", .port = 6379};
	if (bench_popts_parse(argc, argv, &o, QUEUES_MAX) != 0 || o.producers > PRODUCERS_MAX) {
		usage();
		return 2;
	}
	e2e = strcmp(o.mode, "e2e") == 0;
	np = o.producers;
	nc = e2e ? o.consumers : 0;
	clk_init();
	if (o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		(void)sched_setaffinity(0, sizeof(set), &set);
	}
	ks = calloc(SP_MAX(nc, 1u), sizeof(*ks));
	ps = calloc(np, sizeof(*ps));
	keys = calloc(o.queues, sizeof(*keys));
	buf = calloc(1, o.size);
	if (!ks || !ps || !keys || !buf || hist_create(HIST_MAX_NS, &ph) != 0 ||
	    hist_create(HIST_MAX_NS, &eh) != 0)
		return 1;
	for (unsigned i = 0; i < np; i++) {
		ps[i].fifo = calloc(o.depth, sizeof(*ps[i].fifo));
		ps[i].c = redisConnect(o.host, o.port);
		if (!ps[i].fifo || !ps[i].c || ps[i].c->err)
			return fail_conn("connect", ps[i].c);
		pfd[i] = (struct pollfd){.fd = ps[i].c->fd, .events = POLLIN};
	}
	c = ps[0].c;
	rep = redisCommand(c, "INFO server");
	if (rep && rep->type == REDIS_REPLY_STRING) {
		const char *v = strstr(rep->str, "redis_version:");

		if (v)
			snprintf(ver, sizeof(ver), "redis-%.*s", (int)strcspn(v + 14, "\r\n"),
				 v + 14);
	}
	freeReplyObject(rep);
	for (unsigned i = 0; i < nc; i++) {
		ks[i].o = &o;
		ks[i].id = i;
		ks[i].stop = &stop;
		ks[i].keys = keys;
		if (hist_create(HIST_MAX_NS, &ks[i].h) != 0)
			return 1;
	}
	for (unsigned q = 0; q < o.queues; q++) {
		snprintf(keys[q], sizeof(keys[q]), "bench:%u", q);
		freeReplyObject(redisCommand(c, "DEL %s", keys[q]));
		/* warm every key once, unmeasured: the readers start after these */
		rep = redisCommand(c, "XADD %s * d %b", keys[q], buf, (size_t)o.size);
		if (!rep || rep->type != REDIS_REPLY_STRING) {
			fprintf(stderr, "peer-redis: XADD failed: %s\n",
				rep && rep->str ? rep->str : c->errstr);
			return 1;
		}
		for (unsigned i = 0; i < nc; i++)
			snprintf(ks[i].ids[q], sizeof(ks[i].ids[q]), "%s", rep->str);
		freeReplyObject(rep);
	}
	bench_print_header(o.json, "peer-redis", ver, o.rate, o.depth, np, true, nc);
	bench_progress_start("peer-redis", o.progress);
	bench_pace_init(&pace, clk_mono_ns(), o.rate);
	warm_end = pace.start + (uint64_t)(o.warmup * 1e9);
	/* The readers start from the warm-up entries' ids: nothing sent is missed. */
	for (unsigned i = 0; i < nc; i++) {
		ks[i].warm_end = warm_end;
		if (pthread_create(&ks[i].th, NULL, reader_main, &ks[i]) != 0)
			return 1;
	}
	end = warm_end + (uint64_t)(o.duration * 1e9);
	for (;;) {
		uint64_t now = clk_mono_ns();
		uint64_t due = bench_pace_due(&pace, now);
		bool sending = due < end && now < end;
		struct producer *p = &ps[pace.issued % np]; /* the next message's producer */
		unsigned inflight = 0;

		bench_progress(now, "produce", pcount, ph);
		for (unsigned i = 0; i < np; i++)
			inflight += ps[i].inflight;
		if (!sending && inflight == 0)
			break;
		if (sending && p->inflight < o.depth && due <= now) {
			size_t lens[5] = {4, 0, 1, 1, o.size};
			char key[24];
			const char *av[5] = {"XADD", key, "*", "d", (const char *)buf};

			snprintf(key, sizeof(key), "bench:%llu",
				 (unsigned long long)(pace.issued % o.queues));
			lens[1] = strlen(key);
			memcpy(buf, &due, sizeof(due));
			if (redisAppendCommandArgv(p->c, 5, av, lens) != REDIS_OK ||
			    flush_out(p->c) != 0)
				return fail_conn("send", p->c);
			p->fifo[(p->head + p->inflight) % o.depth] = due;
			p->inflight++;
			pace.issued++;
			continue;
		}
		/*
		 * Wait in the kernel for an answer or until the next message is
		 * due, as a client's event loop would: spinning here would take
		 * CPU 0 from the e2e reader threads.
		 */
		{
			uint64_t wait = 1000000000ull;
			struct timespec ts;

			if (sending && p->inflight < o.depth)
				wait = due > now ? due - now : 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
			if (inflight > 0) {
				if (ppoll(pfd, np, &ts, NULL) > 0) {
					for (unsigned i = 0; i < np; i++)
						if ((pfd[i].revents &
						     (POLLIN | POLLERR | POLLHUP)) &&
						    redisBufferRead(ps[i].c) != REDIS_OK)
							return fail_conn("read", ps[i].c);
				}
			} else if (wait > 0) {
				(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			}
		}
		now = clk_mono_ns();
		for (unsigned i = 0; i < np; i++)
			if (producer_take(&ps[i], o.depth, now, warm_end, ph, &pcount, &acked,
					  &errors) != 0)
				return fail_conn("answer", ps[i].c);
	}
	if (e2e) {
		/* what was acknowledged, consumed within 2 s */
		uint64_t t = clk_mono_ns();

		do {
			got = 0;
			for (unsigned i = 0; i < nc; i++)
				got += atomic_load(&ks[i].consumed);
			if (got < acked)
				usleep(1000);
		} while (got < acked && clk_mono_ns() - t < 2000000000ull);
		atomic_store(&stop, true);
		for (unsigned i = 0; i < nc; i++) {
			pthread_join(ks[i].th, NULL);
			if (ks[i].err)
				fprintf(stderr, "peer-redis: consumer %u failed\n", i);
			if (hist_merge(eh, ks[i].h) != 0)
				return 1;
			ecount += ks[i].count;
		}
	}
	bench_print_peer_rows(&o, &(struct bench_peer_result){.backend = "redis",
							      .lost_timeout_ms = 1000,
							      .pcount = pcount,
							      .perrors = errors,
							      .ph = ph,
							      .ecount = ecount,
							      .acked = acked,
							      .consumed = got,
							      .eh = eh});
	for (unsigned i = 0; i < np; i++) {
		redisFree(ps[i].c);
		free(ps[i].fifo);
	}
	for (unsigned i = 0; i < nc; i++)
		hist_destroy(ks[i].h);
	hist_destroy(ph);
	hist_destroy(eh);
	free(ks);
	free(ps);
	free(keys);
	free(buf);
	return 0;
}
