// SPDX-License-Identifier: Apache-2.0
/*
 * crash_store.c - kill -9 a SYNC_FLUSH writer at random moments, recover,
 * and check that nothing acknowledged was lost.
 *
 * Usage: crash_store ITERATIONS [SEED]
 *
 * Each iteration forks a child that opens the store (with its real flusher,
 * service and indexer threads), appends batches of random messages to four
 * queues on two shards, waits until each batch is durable and then reports
 * every acknowledged (queue, offset, phys, size, CRC) to the parent through
 * a pipe. The parent SIGKILLs it (one time in four 2-40 ms after the fork,
 * otherwise 0-30 ms after its first acknowledged batch), then models a
 * power loss: the child's I/O went through the fault table (tests/store/
 * io_fault.c), which copied each file at every successful fdatasync, and
 * every file is put back to that copy, so whatever was written but not
 * synced is gone. Then it reopens the store (crash recovery) and checks:
 *  - every acknowledged record is present, byte for byte as acknowledged
 *    (same physical offset, size and body CRC);
 *  - the log is valid record by record up to its end and nothing past the
 *    end is readable;
 *  - the ConsumeQueues agree with the log: every record's unit points at it
 *    and each queue's max equals the number of its records.
 * Then it closes the store cleanly and the next child continues on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/crc32.h"
#include "io_fault.h"
#include "store/store.h"

#define QUEUES 4
#define SHARDS 2
#define BATCH 8

struct ack {
	uint32_t qid;
	uint32_t size;
	uint64_t qoff;
	int64_t phys;
	uint32_t crc;
	uint32_t pad;
};

static char root[64];
static char shadow[80];
static struct ack *acks;
static size_t n_acks;
static size_t cap_acks;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "crash_store: " __VA_ARGS__);                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void
cfg_init(struct store_cfg *c, bool threads)
{
	store_cfg_default(c);
	c->root = root;
	c->shards = SHARDS;
	c->seg_size = 128 << 10;
	c->cq_units = 64;
	c->idx_slots = 256;
	c->idx_entries = 1024;
	c->sync_flush = true;
	c->flush_interval_ms = 5;
	/*
	 * Retention by disk use would delete acknowledged segments on a full
	 * machine (statvfs counts space reserved for root as used): this suite
	 * checks recovery, not retention.
	 */
	c->disk_max_used_ratio = 100;
	c->threads = threads;
}

static int
open_queues(struct store *s, struct store_queue **q)
{
	for (uint32_t i = 0; i < QUEUES; i++) {
		int rc = store_queue_get(s, "crash", i, i % SHARDS, &q[i]);

		if (rc != 0)
			return rc;
	}
	return 0;
}

static void
child(int fd, unsigned seed)
{
	static uint8_t body[1024];
	struct store_queue *q[QUEUES];
	struct store_cfg cfg;
	struct store *s;
	char props[64];

	struct io_fault *f = io_fault_new();

	/* Every fdatasync leaves a copy the parent uses to model power loss. */
	io_fault_set_shadow(f, root, shadow);
	cfg_init(&cfg, true);
	cfg.io = io_fault_ops(f);
	if (store_open(&cfg, &s) != 0 || open_queues(s, q) != 0)
		_exit(2);
	srand(seed);
	for (;;) {
		struct store_put_res res[BATCH];
		struct ack a[BATCH];

		for (int b = 0; b < BATCH; b++) {
			uint32_t qid = (uint32_t)rand() % QUEUES;
			uint32_t len = 16 + (uint32_t)rand() % 600;
			struct wire_msg m;
			size_t plen = 0;
			long n;

			for (uint32_t k = 0; k < len; k++)
				body[k] = (uint8_t)rand();
			snprintf(props, sizeof(props), "%u", (unsigned)rand());
			memset(&m, 0, sizeof(m));
			(void)!wire_props_append(props + 16, sizeof(props) - 16, &plen, "KEYS", 4,
						 props, strlen(props));
			m.props = props + 16;
			m.props_len = (uint16_t)plen;
			m.body = body;
			m.body_len = len;
			m.born_ts = clk_wall_ms();
			while ((n = store_put(s, q[qid], &m, &res[b])) == -EAGAIN)
				usleep(50);
			if (n < 0)
				_exit(3);
			a[b] = (struct ack){.qid = qid,
					    .size = res[b].size,
					    .qoff = (uint64_t)res[b].qoff,
					    .phys = res[b].phys,
					    .crc = crc32_body(body, len)};
		}
		for (int b = 0; b < BATCH; b++) {
			int d;

			while ((d = store_durable(s, res[b].shard, res[b].ticket)) == 0)
				usleep(20);
			if (d < 0)
				_exit(4);
		}
		/* Acknowledged only now: durable, as a SEND_OK would be. */
		if (write(fd, a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(5);
	}
}

static void
save_acks(const struct ack *a)
{
	if (n_acks + BATCH > cap_acks) {
		cap_acks = cap_acks ? cap_acks * 2 : 1024;
		acks = realloc(acks, cap_acks * sizeof(*acks));
		CHECK(acks != NULL, "oom");
	}
	memcpy(acks + n_acks, a, BATCH * sizeof(*a));
	n_acks += BATCH;
}

static void
verify(unsigned iter)
{
	struct store_queue *q[QUEUES];
	uint64_t per_queue[QUEUES] = {0};
	struct store_cfg cfg;
	struct store *s;
	int rc;

	/* The parent's own syncs (recovery, close) must reach the shadow too. */
	struct io_fault *f = io_fault_new();

	io_fault_set_shadow(f, root, shadow);
	cfg_init(&cfg, false);
	cfg.io = io_fault_ops(f);
	rc = store_open(&cfg, &s);
	CHECK(rc == 0, "iteration %u: recovery failed: %s", iter, strerror(-rc));
	CHECK(open_queues(s, q) == 0, "iteration %u: queues", iter);

	/* 1. Every acknowledged record is there, as acknowledged. */
	for (size_t i = 0; i < n_acks; i++) {
		const struct ack *a = &acks[i];
		const uint8_t *rec;
		struct cq_unit u;
		struct wire_msg m;
		long r = store_get(s, q[a->qid], a->qoff, &rec, &u);

		CHECK(r > 0,
		      "iteration %u: acknowledged %u:%llu lost (%ld; queue [%llu, %llu) visible "
		      "%llu)",
		      iter, a->qid, (unsigned long long)a->qoff, r,
		      (unsigned long long)cq_min(store_queue_cq(q[a->qid])),
		      (unsigned long long)cq_max(store_queue_cq(q[a->qid])),
		      (unsigned long long)store_queue_max(s, q[a->qid]));
		CHECK(wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m) == r,
		      "iteration %u: acknowledged %u:%llu corrupt", iter, a->qid,
		      (unsigned long long)a->qoff);
		CHECK(m.phys_offset == a->phys && (uint32_t)r == a->size && m.body_crc == a->crc,
		      "iteration %u: acknowledged %u:%llu changed", iter, a->qid,
		      (unsigned long long)a->qoff);
	}

	/* 2 and 3. The log is valid to its end, nothing after it, CQs agree. */
	for (uint32_t sh = 0; sh < SHARDS; sh++) {
		struct clog *c = store_clog(s, sh);
		uint64_t off = clog_min(c);
		uint64_t end = clog_written(c);
		const uint8_t *rec;
		uint64_t next;

		while (off < end) {
			struct wire_msg m;
			struct cq_unit u;
			long r = clog_read(c, off, &rec, &next);

			if (r == -ENODATA) {
				off = next;
				continue;
			}
			CHECK(r > 0 &&
				      wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m) == r,
			      "iteration %u: shard %u bad record at %llu", iter, sh,
			      (unsigned long long)off);
			CHECK(m.queue_id >= 0 && m.queue_id < QUEUES, "iteration %u: queue id",
			      iter);
			CHECK(cq_get(store_queue_cq(q[m.queue_id]), (uint64_t)m.queue_offset, &u) ==
					      0 &&
				      u.phys == clog_phys(sh, off) && u.size == (uint32_t)r,
			      "iteration %u: consume queue %d disagrees at %lld", iter, m.queue_id,
			      (long long)m.queue_offset);
			per_queue[m.queue_id]++;
			off = next;
		}
		CHECK(clog_read(c, end, &rec, &next) == -ERANGE, "iteration %u: data past the end",
		      iter);
		CHECK(clog_flushed(c) == end, "iteration %u: recovered end not durable", iter);
	}
	for (uint32_t i = 0; i < QUEUES; i++)
		CHECK(store_queue_max(s, q[i]) == per_queue[i],
		      "iteration %u: queue %u max %llu but %llu records", iter, i,
		      (unsigned long long)store_queue_max(s, q[i]),
		      (unsigned long long)per_queue[i]);
	store_close(s);
	io_fault_free(f);
}

int
main(int argc, char **argv)
{
	unsigned iters = argc > 1 ? (unsigned)atoi(argv[1]) : 20;
	unsigned seed = argc > 2 ? (unsigned)atoi(argv[2]) : (unsigned)time(NULL);
	char cmd[128];

	signal(SIGPIPE, SIG_IGN);
	strcpy(root, "/tmp/sp-crash-XXXXXX");
	CHECK(mkdtemp(root) != NULL, "mkdtemp");
	snprintf(shadow, sizeof(shadow), "%s.shadow", root);
	printf("crash_store: %u iterations, seed %u, store %s\n", iters, seed, root);
	srand(seed);
	for (unsigned it = 0; it < iters; it++) {
		struct timespec ts;
		bool early;
		int p[2];
		pid_t pid;
		int st;

		CHECK(pipe(p) == 0, "pipe");
		pid = fork();
		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			close(p[0]);
			child(p[1], seed + it);
		}
		close(p[1]);
		/*
		 * One kill in four lands at a random moment from the fork (often
		 * during open or recovery); the others once the child acknowledged
		 * its first batch, then 0-30 ms into its run.
		 */
		early = rand() % 4 == 0;
		if (!early) {
			struct ack a[BATCH];
			ssize_t n = read(p[0], a, sizeof(a));

			CHECK(n == (ssize_t)sizeof(a), "iteration %u: child died before acking",
			      it);
			save_acks(a);
		}
		ts.tv_sec = 0;
		ts.tv_nsec = (early ? 2 + rand() % 39 : rand() % 31) * 1000000L;
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		for (;;) {
			struct ack a[BATCH];
			ssize_t n = read(p[0], a, sizeof(a));

			if (n <= 0)
				break;
			CHECK(n == (ssize_t)sizeof(a), "short ack read");
			save_acks(a);
		}
		close(p[0]);
		CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		      "iteration %u: child ended by itself (status %d)", it, st);
		/* Power loss: only what an fdatasync made durable survives. */
		/* 0 files is fine: an early kill may land before the store wrote any. */
		CHECK(io_fault_shadow_restore(root, shadow) >= 0, "iteration %u: restore", it);
		verify(it);
	}
	printf("crash_store: %zu acknowledged records verified after %u kills\n", n_acks, iters);
	printf("%u passed, 0 failed\n", iters);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, shadow);
	return system(cmd) == 0 ? 0 : 1;
}
