// SPDX-License-Identifier: Apache-2.0
/*
 * peer_redis.c - peer-redis, sprocket-bench's load against Redis Streams
 * (hiredis), for the side-by-side in docs/benchmarks.md (bench/compare.sh).
 *
 *   peer-redis produce|e2e --host=127.0.0.1 --port=6379 --size=128 --duration=10
 *              [--rate=N] [--depth=N] [--queues=N] [--json]
 *
 * One stream key per queue (bench:0..bench:N-1, deleted at start), sent to
 * round robin. produce: XADD key * d <payload> -> the reply with the entry id
 * (with appendonly yes, Redis answers once the entry is in the AOF buffer, or
 * after fsync with appendfsync always). e2e: the same XADDs, plus a second
 * connection on its own thread in XREAD BLOCK over every key; latency =
 * received - the send time carried in the first 8 bytes of the payload.
 *
 * Pacing and output are sprocket-bench's (bench_report.h). One connection
 * carries up to --depth XADDs in flight (pipelined, answers in order, so the
 * due times are a FIFO); it waits in ppoll() for answers or the next due
 * time, as a client's event loop would. At --rate latency runs from each message's due time.
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

struct reader {
	const struct bench_popts *o;
	uint64_t warm_end;
	struct hist *h; /* reader thread only until joined */
	uint64_t count;
	_Atomic uint64_t consumed;
	_Atomic bool stop;
	char keys[QUEUES_MAX][24];
	char ids[QUEUES_MAX][48];
	int err;
};

static void
usage(void)
{
	fprintf(stderr,
		"usage: peer-redis produce|e2e [--host=H] [--port=P] [--size=B] [--duration=S]\n"
		"       [--warmup=S] [--rate=N] [--depth=N] [--queues=N] [--cpu=C] [--json]\n");
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
		if (sscanf(ks->element[0]->str, "bench:%u", &q) != 1 || q >= k->o->queues)
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
	unsigned n = k->o->queues;
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
	for (unsigned q = 0; q < n; q++) {
		argv[6 + q] = k->keys[q];
		argv[6 + n + q] = k->ids[q];
	}
	while (!atomic_load(&k->stop)) {
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

int
main(int argc, char **argv)
{
	struct bench_popts o;
	struct reader *k;
	struct hist *ph;
	redisContext *c;
	redisReply *rep;
	pthread_t th;
	uint64_t *fifo;
	unsigned head = 0, inflight = 0;
	uint64_t pcount = 0, acked = 0, errors = 0, end, warm_end;
	struct bench_pace pace;
	uint8_t *buf;
	char ver[64] = "redis";
	bool e2e;

	o = (struct bench_popts){.host = "127.0.0.1", .port = 6379};
	if (bench_popts_parse(argc, argv, &o, QUEUES_MAX) != 0) {
		usage();
		return 2;
	}
	e2e = strcmp(o.mode, "e2e") == 0;
	clk_init();
	if (o.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o.cpu, &set);
		(void)sched_setaffinity(0, sizeof(set), &set);
	}
	k = calloc(1, sizeof(*k));
	fifo = calloc(o.depth, sizeof(*fifo));
	buf = calloc(1, o.size);
	if (!k || !fifo || !buf || hist_create(HIST_MAX_NS, &ph) != 0 ||
	    hist_create(HIST_MAX_NS, &k->h) != 0)
		return 1;
	k->o = &o;
	c = redisConnect(o.host, o.port);
	if (!c || c->err) {
		fprintf(stderr, "peer-redis: connect %s:%d: %s\n", o.host, o.port,
			c ? c->errstr : "out of memory");
		return 1;
	}
	rep = redisCommand(c, "INFO server");
	if (rep && rep->type == REDIS_REPLY_STRING) {
		const char *v = strstr(rep->str, "redis_version:");

		if (v)
			snprintf(ver, sizeof(ver), "redis-%.*s", (int)strcspn(v + 14, "\r\n"),
				 v + 14);
	}
	freeReplyObject(rep);
	for (unsigned q = 0; q < o.queues; q++) {
		snprintf(k->keys[q], sizeof(k->keys[q]), "bench:%u", q);
		snprintf(k->ids[q], sizeof(k->ids[q]), "0-0");
		freeReplyObject(redisCommand(c, "DEL %s", k->keys[q]));
		/* warm every key once, unmeasured: the reader starts after these */
		rep = redisCommand(c, "XADD %s * d %b", k->keys[q], buf, (size_t)o.size);
		if (!rep || rep->type != REDIS_REPLY_STRING) {
			fprintf(stderr, "peer-redis: XADD failed: %s\n",
				rep && rep->str ? rep->str : c->errstr);
			return 1;
		}
		snprintf(k->ids[q], sizeof(k->ids[q]), "%s", rep->str);
		freeReplyObject(rep);
	}
	if (e2e && pthread_create(&th, NULL, reader_main, k) != 0)
		return 1;

	bench_print_header(o.json, "peer-redis", ver, o.rate, o.depth, 1);
	bench_pace_init(&pace, clk_mono_ns(), o.rate);
	warm_end = pace.start + (uint64_t)(o.warmup * 1e9);
	k->warm_end = warm_end;
	end = warm_end + (uint64_t)(o.duration * 1e9);
	for (;;) {
		uint64_t now = clk_mono_ns();
		uint64_t due = bench_pace_due(&pace, now);
		bool sending = due < end && now < end;
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		void *r;

		if (!sending && inflight == 0)
			break;
		if (sending && inflight < o.depth && due <= now) {
			size_t lens[5] = {4, 0, 1, 1, o.size};
			char key[24];
			const char *av[5] = {"XADD", key, "*", "d", (const char *)buf};

			snprintf(key, sizeof(key), "bench:%llu",
				 (unsigned long long)(pace.issued % o.queues));
			lens[1] = strlen(key);
			memcpy(buf, &due, sizeof(due));
			if (redisAppendCommandArgv(c, 5, av, lens) != REDIS_OK ||
			    flush_out(c) != 0) {
				fprintf(stderr, "peer-redis: send: %s\n", c->errstr);
				return 1;
			}
			fifo[(head + inflight) % o.depth] = due;
			inflight++;
			pace.issued++;
			continue;
		}
		/*
		 * Wait in the kernel for an answer or until the next message is
		 * due, as a client's event loop would: spinning here would take
		 * CPU 0 from the e2e reader thread.
		 */
		{
			uint64_t wait = 1000000000ull;
			struct timespec ts;

			if (sending && inflight < o.depth)
				wait = due > now ? due - now : 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
			if (inflight > 0) {
				if (ppoll(&pfd, 1, &ts, NULL) > 0 &&
				    redisBufferRead(c) != REDIS_OK) {
					fprintf(stderr, "peer-redis: read: %s\n", c->errstr);
					return 1;
				}
			} else if (wait > 0) {
				(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			}
		}
		now = clk_mono_ns();
		while (inflight > 0 && redisGetReplyFromReader(c, &r) == REDIS_OK && r) {
			redisReply *x = r;
			uint64_t d = fifo[head];

			head = (head + 1) % o.depth;
			inflight--;
			if (x->type == REDIS_REPLY_STRING) {
				acked++;
				if (d >= warm_end) {
					hist_record(ph, now - d);
					pcount++;
				}
			} else {
				errors++;
			}
			freeReplyObject(x);
		}
	}
	if (e2e) {
		/* what was acknowledged, consumed within 2 s */
		uint64_t t = clk_mono_ns();

		while (atomic_load(&k->consumed) < acked && clk_mono_ns() - t < 2000000000ull)
			usleep(1000);
		atomic_store(&k->stop, true);
		pthread_join(th, NULL);
	}
	{
		uint64_t got = atomic_load(&k->consumed);
		struct bench_row pr = {.mode = "produce",
				       .backend = "redis",
				       .size = o.size,
				       .depth = o.depth,
				       .sessions = 1,
				       .rate = o.rate,
				       .count = pcount,
				       .lost = errors,
				       .secs = o.duration,
				       .h = ph,
				       .lost_timeout_ms = 1000};
		struct bench_row er = pr;

		bench_print_row(&pr, o.json);
		if (e2e) {
			er.mode = "e2e";
			er.count = k->count;
			er.lost = acked > got ? acked - got : 0;
			er.h = k->h;
			bench_print_row(&er, o.json);
		}
	}
	redisFree(c);
	hist_destroy(ph);
	hist_destroy(k->h);
	free(k);
	free(fifo);
	free(buf);
	return 0;
}
