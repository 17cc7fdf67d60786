// SPDX-License-Identifier: Apache-2.0
/*
 * test_store.c - the store facade: put/get/lookups over shards and queues,
 * SYNC_FLUSH visibility and tickets, clean and crash restarts (a forked
 * child that dies without closing), a deleted ConsumeQueue rebuilt from the
 * log, garbage after the last record, fencing on EIO, retention, and the
 * real flusher/service/indexer threads.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "io_fault.h"
#include "common/clock.h"
#include "store/store.h"

static char root[64];

static void
mktmp(void)
{
	strcpy(root, "/tmp/sp-store-XXXXXX");
	T_ASSERT(mkdtemp(root) != NULL);
}

static void
rmtmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	T_ASSERT(system(cmd) == 0);
}

static void
cfg_small(struct store_cfg *c, bool sync)
{
	store_cfg_default(c);
	c->root = root;
	c->shards = 2;
	c->seg_size = 64 << 10;
	c->cq_units = 16;
	c->idx_slots = 64;
	c->idx_entries = 128;
	c->sync_flush = sync;
	c->flush_interval_ms = 1;
	c->threads = false;
}

static uint8_t body[2048];
static char props[256];

/* cfg.threads: the store's own threads prepare files (the test must not call store_service()) */
static bool s_threads;

static long
put_one(struct store *s, struct store_queue *q, uint32_t i, struct store_put_res *r)
{
	struct wire_msg m;
	size_t plen = 0;
	char key[32];
	long n;

	memset(&m, 0, sizeof(m));
	for (size_t k = 0; k < 300; k++)
		body[k] = (uint8_t)(i + k);
	snprintf(key, sizeof(key), "k%u", i);
	T_ASSERT_EQ(wire_props_append(props, sizeof(props), &plen, "TAGS", 4,
				      i % 2 ? "odd" : "even", i % 2 ? 3 : 4),
		    0);
	T_ASSERT_EQ(wire_props_append(props, sizeof(props), &plen, "KEYS", 4, key, strlen(key)), 0);
	m.body = body;
	m.body_len = 300;
	m.born_ts = 1000 + i;
	m.props = props;
	m.props_len = (uint16_t)plen;
	for (int tries = 0; tries < 100 || s_threads; tries++) {
		n = store_put(s, q, &m, r);
		if (n != -EAGAIN)
			return n;
		if (s_threads)
			usleep(100); /* the service thread prepares the next file */
		else
			T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	}
	return n;
}

static void
check_msg(struct store *s, struct store_queue *q, uint64_t qoff, uint32_t i)
{
	const uint8_t *rec;
	struct cq_unit u;
	struct wire_msg m;
	long r = store_get(s, q, qoff, &rec, &u);

	if (r <= 0)
		T_FAIL("get %llu: %ld", (unsigned long long)qoff, r);
	T_ASSERT_EQ(wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m), r);
	T_ASSERT_EQ(m.queue_offset, (int64_t)qoff);
	T_ASSERT_EQ(m.body_len, 300);
	T_ASSERT_EQ(m.body[0], (uint8_t)i);
	T_ASSERT_EQ(m.born_ts, 1000 + i);
	T_ASSERT_EQ(u.tag_hash, wire_tag_hash(i % 2 ? "odd" : "even", i % 2 ? 3 : 4));
	T_ASSERT_EQ(u.phys, m.phys_offset);
}

/* Queue A:0 on shard 0 and A:1 on shard 1; message i goes to queue i % 2. */
static void
fill(struct store *s, struct store_queue **q, uint32_t from, uint32_t n)
{
	for (uint32_t i = from; i < from + n; i++) {
		struct store_put_res r;

		T_ASSERT(put_one(s, q[i % 2], i, &r) > 0);
		T_ASSERT_EQ(r.qoff, i / 2);
		T_ASSERT_EQ(r.shard, i % 2);
		T_ASSERT_EQ(clog_phys_shard(r.phys), i % 2);
	}
}

static void
open_queues(struct store *s, struct store_queue **q)
{
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q[0]), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 1, 1, &q[1]), 0);
}

static void
check_all(struct store *s, struct store_queue **q, uint32_t n)
{
	T_ASSERT_EQ(store_flush_all(s), 0); /* SYNC_FLUSH shows only durable data */
	T_ASSERT_EQ(store_queue_max(s, q[0]), (n + 1) / 2);
	T_ASSERT_EQ(store_queue_max(s, q[1]), n / 2);
	for (uint32_t i = 0; i < n; i++)
		check_msg(s, q[i % 2], i / 2, i);
}

static void
test_put_get_lookups(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	int64_t phys[8];
	int64_t t;
	uint64_t off;
	struct store_queue *bad;

	mktmp();
	cfg_small(&cfg, false);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT_EQ(store_queue_get(s, "../etc", 0, 0, &bad), -EINVAL);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 9, &bad), -EINVAL);
	fill(s, q, 0, 600); /* rolls segments and CQ files */
	check_all(s, q, 600);
	T_ASSERT_EQ(store_queue_min(s, q[0]), 0);

	T_ASSERT_EQ(store_earliest_time(s, q[0], &t), 0);
	T_ASSERT(t > 0);
	T_ASSERT_EQ(store_search_time(s, q[0], t, &off), 0);
	T_ASSERT_EQ(off, 0);
	T_ASSERT_EQ(store_search_time(s, q[0], INT64_MAX, &off), 0);
	T_ASSERT_EQ(off, 300);

	T_ASSERT(store_index_round(s) > 0);
	T_ASSERT_EQ(store_query_key(s, "A", "k77", 0, INT64_MAX, phys, 8), 1);
	{
		const uint8_t *rec;

		T_ASSERT(store_get_phys(s, phys[0], &rec) > 0);
	}
	T_ASSERT_EQ(store_query_key(s, "A", "nope", 0, INT64_MAX, phys, 8), 0);
	T_ASSERT_EQ(store_query_key(s, "B", "k77", 0, INT64_MAX, phys, 8), 0);
	{
		const uint8_t *rec;
		struct cq_unit u;

		T_ASSERT_EQ(store_get(s, q[0], 300, &rec, &u), -ERANGE);
		T_ASSERT_EQ(store_get_phys(s, clog_phys(5, 0), &rec), -ERANGE);
	}
	store_close(s);
	rmtmp();
}

/* The delay-level topic's ConsumeQueue files are a sixteenth (at least 1024 units). */
static void
test_sched_cq_units(void)
{
	struct store_queue *sq, *aq;
	struct store_cfg cfg;
	struct store *s;
	struct stat st;
	char path[256];

	mktmp();
	cfg_small(&cfg, false);
	cfg.cq_units = 32768;
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, STORE_SCHED_TOPIC, 0, 0, &sq), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &aq), 0);
	/* No file, not even a directory, until a queue takes a unit. */
	snprintf(path, sizeof(path), "%s/consumequeue/A", root);
	T_ASSERT_EQ(stat(path, &st), -1);
	{
		struct store_put_res r;

		T_ASSERT(put_one(s, aq, 0, &r) > 0);
		T_ASSERT(put_one(s, sq, 0, &r) > 0);
	}
	(void)store_drain_queues(s); /* as the service and the drainer do */
	snprintf(path, sizeof(path), "%s/consumequeue/%s/0/%020d", root, STORE_SCHED_TOPIC, 0);
	T_ASSERT_EQ(stat(path, &st), 0);
	T_ASSERT_EQ(st.st_size, 2048 * 20);
	snprintf(path, sizeof(path), "%s/consumequeue/A/0/%020d", root, 0);
	T_ASSERT_EQ(stat(path, &st), 0);
	T_ASSERT_EQ(st.st_size, 32768 * 20);
	for (uint32_t i = 1; i < 2500; i++) { /* rolls a file */
		struct store_put_res r;

		T_ASSERT(put_one(s, sq, i, &r) > 0);
	}
	store_close(s);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, STORE_SCHED_TOPIC, 0, 0, &sq), 0);
	T_ASSERT_EQ(store_queue_max(s, sq), 2500);
	for (uint32_t i = 0; i < 2500; i++)
		check_msg(s, sq, i, i);
	store_close(s);
	rmtmp();
}

static void
test_sync_visibility_and_tickets(void)
{
	struct store_queue *q[2];
	struct store_put_res r;
	struct store_cfg cfg;
	struct store *s;

	mktmp();
	cfg_small(&cfg, true);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT(put_one(s, q[0], 0, &r) > 0);
	/* Not durable yet: not acknowledged and not readable (RocketMQ #8239). */
	T_ASSERT_EQ(store_durable(s, r.shard, r.ticket), 0);
	T_ASSERT_EQ(store_queue_max(s, q[0]), 0);
	/* syncFlushTimeout: pending before the deadline, FLUSH_DISK_TIMEOUT after it. */
	T_ASSERT_EQ(store_ack_state(s, r.shard, r.ticket, 1000, 1000 + 4999000000ull), 0);
	T_ASSERT_EQ(store_ack_state(s, r.shard, r.ticket, 1000, 1000 + 5000000000ull), -ETIMEDOUT);
	T_ASSERT_EQ(store_flush_all(s), 0);
	T_ASSERT_EQ(store_durable(s, r.shard, r.ticket), 1);
	T_ASSERT_EQ(store_ack_state(s, r.shard, r.ticket, 1000, 1000 + 9000000000ull), 1);
	T_ASSERT_EQ(store_queue_max(s, q[0]), 1);
	check_msg(s, q[0], 0, 0);
	store_close(s);
	rmtmp();
}

static void
test_clean_restart(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	char path[128];
	struct stat st;

	mktmp();
	cfg_small(&cfg, false);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	fill(s, q, 0, 300);
	store_close(s);
	snprintf(path, sizeof(path), "%s/abort", root);
	T_ASSERT(stat(path, &st) != 0);

	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	check_all(s, q, 300);
	fill(s, q, 300, 100);
	check_all(s, q, 400);
	store_close(s);
	rmtmp();
}

/* The abort file, as a run that did not close leaves it. */
static void
mark_crashed(void)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/abort", root);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fclose(f);
}

/*
 * A child fills and dies without closing: a crash. @flush: after
 * store_flush_all(), by _exit(); else by SIGKILL with nothing written back
 * when the threads are off (no flusher): every append only in its
 * write-behind buffers. Return: from + n.
 */
static uint32_t
crash_child(struct store_cfg *cfg, uint32_t from, uint32_t n, bool flush)
{
	pid_t pid = fork();
	int st;

	T_ASSERT(pid >= 0);
	if (pid == 0) {
		struct store_queue *q[2];
		struct store *s;

		if (store_open(cfg, &s) != 0)
			_exit(2);
		open_queues(s, q);
		fill(s, q, from, n);
		if (!flush)
			kill(getpid(), SIGKILL);
		if (store_flush_all(s) != 0)
			_exit(3);
		_exit(0);
	}
	T_ASSERT(waitpid(pid, &st, 0) == pid);
	if (flush)
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	else
		T_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	return from + n;
}

static void
test_crash_recovery(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	char path[256];
	FILE *f;

	mktmp();
	cfg_small(&cfg, true);
	(void)crash_child(&cfg, 0, 300, true);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	check_all(s, q, 300);
	store_close(s);

	/* Garbage after the last record of shard 0 is cut, nothing else lost. */
	(void)crash_child(&cfg, 300, 100, true);
	{
		struct store *t;
		uint64_t end;

		cfg.threads = false;
		T_ASSERT_EQ(store_open(&cfg, &t), 0);
		end = clog_written(store_clog(t, 0));
		store_close(t);
		snprintf(path, sizeof(path), "%s/commitlog/0/%020llu", root,
			 (unsigned long long)(end - end % cfg.seg_size));
		/* Make it look like a crash again, with a torn record at the end. */
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "%s", "");
		f = fopen(path, "r+b");
		T_ASSERT(f != NULL);
		fseek(f, (long)(end % cfg.seg_size), SEEK_SET);
		fwrite("\x00\x00\x02\x00\xda\xa3\x20\xa7torn", 1, 12, f);
		fclose(f);
		mark_crashed();
	}
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	check_all(s, q, 400);
	fill(s, q, 400, 10);
	check_all(s, q, 410);
	store_close(s);

	/* A deleted ConsumeQueue file is rebuilt from the log. */
	snprintf(path, sizeof(path), "%s/consumequeue/A/1/%020d", root, 0);
	T_ASSERT_EQ(unlink(path), 0);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	check_all(s, q, 410);
	store_close(s);
	rmtmp();
}

/* Open, find all @n records, close: a clean close leaves no buffer file in @bufs. */
static void
reopen_check_all(struct store_cfg *cfg, uint32_t n, const char *bufs)
{
	struct store_queue *q[2];
	struct store *s;
	char cmd[160];

	T_ASSERT_EQ(store_open(cfg, &s), 0);
	open_queues(s, q);
	check_all(s, q, n);
	store_close(s);
	snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -type f)\"", bufs);
	T_ASSERT_EQ(system(cmd), 0);
}

/*
 * An ASYNC_FLUSH child appends and is SIGKILLed before anything was written
 * back. With the buffers as files (buf_dir) the next open takes every
 * append from there, across segment rolls; with anonymous buffers the same
 * crash loses them, so the check can fail.
 */
static void
test_async_kill_keeps_buffered_appends(void)
{
	char bufs[64];
	char cmd[160];
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	uint32_t n;

	mktmp();
	strcpy(bufs,
	       access("/dev/shm", W_OK) == 0 ? "/dev/shm/sp-bufs-XXXXXX" : "/tmp/sp-bufs-XXXXXX");
	T_ASSERT(mkdtemp(bufs) != NULL);
	cfg_small(&cfg, false);
	cfg.buf_dir = bufs;

	/* 700 records of ~400 B: several 64 KiB segments per shard, none written back. */
	n = crash_child(&cfg, 0, 700, false);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	check_all(s, q, n);
	/* The log goes on from there, and a second crash loses nothing either. */
	fill(s, q, n, 10);
	store_close(s);
	n = crash_child(&cfg, n + 10, 50, false);
	reopen_check_all(&cfg, n, bufs);

	/*
	 * Only the directory <root>/bufdir names is read, and a buffer there
	 * that does not match its segment (garbage) is not used; it goes too.
	 */
	{
		char path[128];
		FILE *f;

		snprintf(path, sizeof(path), "%s/stale", bufs);
		T_ASSERT_EQ(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/stale/0", bufs);
		T_ASSERT_EQ(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/bufdir", root);
		f = fopen(path, "w");
		T_ASSERT(f != NULL);
		fprintf(f, "%s/stale\n", bufs);
		fclose(f);
		for (uint32_t seg = 0; seg < 16; seg++) {
			snprintf(path, sizeof(path), "%s/stale/0/%020llu", bufs,
				 (unsigned long long)seg * cfg.seg_size);
			f = fopen(path, "wb");
			T_ASSERT(f != NULL);
			for (uint64_t k = 0; k < cfg.seg_size; k++)
				fputc((int)(k * 7 + seg), f);
			fclose(f);
		}
		mark_crashed();
		reopen_check_all(&cfg, n, bufs);
		snprintf(path, sizeof(path), "%s/stale", bufs);
		T_ASSERT(access(path, F_OK) != 0);
	}

	/* Anonymous buffers: the same crash loses what was not written back. */
	cfg.buf_dir = NULL;
	(void)crash_child(&cfg, n, 20, false);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT_EQ(store_queue_max(s, q[0]) + store_queue_max(s, q[1]), n);
	store_close(s);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bufs);
	T_ASSERT_EQ(system(cmd), 0);
	rmtmp();
}

static void
test_fence_on_eio(void)
{
	struct io_fault *f = io_fault_new();
	struct store_queue *q[2];
	struct store_put_res r;
	struct store_cfg cfg;
	struct store *s;

	mktmp();
	cfg_small(&cfg, true);
	cfg.io = io_fault_ops(f);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT(put_one(s, q[0], 0, &r) > 0);
	io_fault_fail(f, IOF_FDATASYNC, EIO);
	T_ASSERT_EQ(store_flush_all(s), -EIO);
	/* The waiter gets the error, never a success; new puts are refused. */
	T_ASSERT_EQ(store_durable(s, r.shard, r.ticket), -EIO);
	T_ASSERT_EQ(put_one(s, q[0], 1, &r), -EIO);
	T_ASSERT_EQ(store_queue_max(s, q[0]), 0);
	io_fault_fail(f, IOF_FDATASYNC, 0);
	T_ASSERT_EQ(store_flush_all(s), 0);
	T_ASSERT_EQ(store_queue_max(s, q[0]), 1);
	T_ASSERT(put_one(s, q[0], 1, &r) > 0);
	T_ASSERT_EQ(store_flush_all(s), 0);
	T_ASSERT_EQ(store_durable(s, r.shard, r.ticket), 1);
	/* A close whose last flush fails says so: the daemon's exit status follows it. */
	T_ASSERT(put_one(s, q[0], 2, &r) > 0);
	io_fault_fail(f, IOF_FDATASYNC, EIO);
	T_ASSERT_EQ(store_close(s), -EIO);
	io_fault_free(f);
	rmtmp();
}

static void
test_retention(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	time_t now = time(NULL);
	struct tm tm;
	const uint8_t *rec;
	struct cq_unit u;

	localtime_r(&now, &tm);
	mktmp();
	cfg_small(&cfg, false);
	cfg.file_reserved_hours = 0;
	cfg.delete_when_hour = tm.tm_hour;
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	fill(s, q, 0, 800);
	/* Age-based deletion: every sealed segment is older than 0 hours. */
	usleep(2000); /* every record now lies in the past */
	T_ASSERT_EQ(store_retain(s, clk_wall_ms()), 0);
	T_ASSERT(store_queue_min(s, q[0]) > 0);
	T_ASSERT_EQ(store_get(s, q[0], 0, &rec, &u), -ERANGE);
	/* Everything from the new minimum on is still there. */
	for (uint64_t o = store_queue_min(s, q[0]); o < 400; o++)
		check_msg(s, q[0], o, (uint32_t)o * 2);
	store_close(s);

	/* Reopen keeps the raised minimum. */
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT(store_queue_min(s, q[0]) > 0);
	check_msg(s, q[0], 399, 798);
	store_close(s);
	rmtmp();
}

/*
 * Disk space: above diskSpaceCleanForciblyRatio the oldest segment goes
 * whatever its age, but never what a consumer group has not read
 * (store_set_keep()): then writes are refused with the reason instead, until
 * the groups read on; with delete_unconsumed it goes, counted.
 */
static void
test_disk_keep(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store_put_res r;
	struct store *s;
	char why[384];
	uint64_t min0;

	mktmp();
	cfg_small(&cfg, false);
	cfg.keep_unconsumed = true;
	cfg.disk_clean_ratio = 0; /* any disk is "full" */
	cfg.disk_max_used_ratio = 100;
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	fill(s, q, 0, 800);
	/* nothing known yet about the groups: everything is kept, writes are refused */
	T_ASSERT_EQ(store_retain(s, clk_wall_ms()), 0);
	T_ASSERT_EQ(store_queue_min(s, q[0]), 0);
	T_ASSERT(store_disk_full(s, why, sizeof(why)));
	T_ASSERT(strstr(why, "not read yet") != NULL);
	T_ASSERT_EQ(put_one(s, q[0], 800, &r), -ENOSPC);
	/* the groups have read everything: the oldest segment of each shard goes */
	store_set_keep(s, 0, UINT64_MAX, "");
	store_set_keep(s, 1, UINT64_MAX, "");
	T_ASSERT_EQ(store_retain(s, clk_wall_ms()), 0);
	min0 = store_queue_min(s, q[0]);
	T_ASSERT(min0 > 0);
	T_ASSERT(!store_disk_full(s, why, sizeof(why)));
	T_ASSERT(put_one(s, q[0], 800, &r) > 0);
	/* a group behind at shard 0's oldest record: kept, writes refused, saying who */
	store_set_keep(s, 0, clog_min(store_clog(s, 0)), "group G (topic A queue 0), 5 behind");
	T_ASSERT_EQ(store_retain(s, clk_wall_ms()), 0);
	T_ASSERT_EQ(store_queue_min(s, q[0]), min0);
	T_ASSERT(store_disk_full(s, why, sizeof(why)));
	T_ASSERT(strstr(why, "group G") != NULL);
	T_ASSERT_EQ(store_unread_deleted(s), 0);
	store_close(s);

	/* deleteUnconsumedWhenDiskFull: it goes, counted */
	cfg.delete_unconsumed = true;
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT_EQ(store_retain(s, clk_wall_ms()), 0);
	T_ASSERT(!store_disk_full(s, why, sizeof(why)));
	T_ASSERT(store_unread_deleted(s) >= 1);
	T_ASSERT(store_queue_min(s, q[0]) > min0);
	store_close(s);
	rmtmp();
}

static void
test_threads_group_commit(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	uint64_t tickets[400];
	uint32_t shards[400];

	mktmp();
	cfg_small(&cfg, true);
	cfg.threads = true;
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	for (uint32_t i = 0; i < 400; i++) {
		struct store_put_res r;
		struct wire_msg m;
		long n;

		memset(&m, 0, sizeof(m));
		m.body = body;
		m.body_len = 100;
		while ((n = store_put(s, q[i % 2], &m, &r)) == -EAGAIN)
			usleep(100); /* the service thread prepares the next file */
		T_ASSERT(n > 0);
		tickets[i] = r.ticket;
		shards[i] = r.shard;
	}
	for (uint32_t i = 0; i < 400; i++) {
		int d;

		/* The flusher acknowledges every ticket; no fixed time is assumed. */
		while ((d = store_durable(s, shards[i], tickets[i])) == 0)
			usleep(100);
		T_ASSERT_EQ(d, 1);
	}
	T_ASSERT_EQ(store_queue_max(s, q[0]), 200);
	store_close(s);
	rmtmp();
}

static _Atomic unsigned hook_syncs;

static void
count_hook(void *arg)
{
	T_ASSERT(arg == &hook_syncs);
	atomic_fetch_add(&hook_syncs, 1);
}

static _Atomic bool querying;

/* store_query_key() in a loop: a reader under the store's own guard. */
static void *
query_main(void *arg)
{
	struct store *s = arg;
	unsigned long found = 0;

	while (atomic_load(&querying)) {
		int64_t phys[4];
		long n = store_query_key(s, "A", "k7", 0, INT64_MAX, phys, 4);

		T_ASSERT(n >= 0);
		if (n > 0) {
			const uint8_t *rec;

			T_ASSERT(store_get_phys(s, phys[0], &rec) > 0);
			found++;
		}
	}
	return (void *)found;
}

/*
 * The real threads with a reader_sync hook: sealed segments' buffers are
 * reused for new ones (the hook is called: store_reader_sync() returned
 * through the indexer's and a querying thread's guard) while the indexer
 * and another thread read records, and every message reads back intact.
 */
static void
test_threads_buffer_reuse(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	pthread_t th;
	void *found;
	uint32_t n = 0;

	mktmp();
	cfg_small(&cfg, false);
	cfg.threads = true;
	cfg.reader_sync = count_hook;
	cfg.reader_sync_arg = &hook_syncs;
	s_threads = true;
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	atomic_store(&querying, true);
	T_ASSERT_EQ(pthread_create(&th, NULL, query_main, s), 0);
	/* ~200 messages a 64 KiB segment per shard; the flusher retires them as it syncs */
	while (n < 20000 && (n < 2000 || atomic_load(&hook_syncs) < 4)) {
		struct store_put_res r;

		T_ASSERT(put_one(s, q[n % 2], n, &r) > 0);
		if (++n % 200 == 0)
			usleep(2000); /* let the flusher retire what this wrote */
	}
	atomic_store(&querying, false);
	T_ASSERT_EQ(pthread_join(th, &found), 0);
	printf("# %u messages, %u reader syncs, key found %lu times\n", n, atomic_load(&hook_syncs),
	       (unsigned long)found);
	T_ASSERT(atomic_load(&hook_syncs) >= 4);
	for (uint32_t i = 0; i < n; i++)
		check_msg(s, q[i % 2], i / 2, i);
	store_close(s);
	s_threads = false;
	rmtmp();
}

/* RocketMQ's path keys: every file goes where its key says, and comes back from there. */
static void
test_paths(void)
{
	char cl[128], cq[128], ix[128], ck[128], ab[128], probe[160];
	struct store_queue *q[2];
	struct store_cfg c;
	struct store *s;
	struct stat st;

	mktmp();
	snprintf(cl, sizeof(cl), "%s/elsewhere/cl", root);
	snprintf(cq, sizeof(cq), "%s/elsewhere/cq", root);
	snprintf(ix, sizeof(ix), "%s/elsewhere/ix", root);
	snprintf(ck, sizeof(ck), "%s/ckpt.file", root);
	snprintf(ab, sizeof(ab), "%s/abort.file", root);
	cfg_small(&c, false);
	c.path_commitlog = cl;
	c.path_cq = cq;
	c.path_index = ix;
	c.path_checkpoint = ck;
	c.path_abort = ab;
	T_ASSERT_EQ(store_open(&c, &s), 0);
	T_ASSERT_EQ(stat(ab, &st), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q[0]), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 1, 1, &q[1]), 0);
	fill(s, q, 0, 50);
	T_ASSERT_EQ(store_index_round(s) >= 0, true);
	store_close(s);
	T_ASSERT(stat(ab, &st) != 0);
	snprintf(probe, sizeof(probe), "%s/0/00000000000000000000", cl);
	T_ASSERT_EQ(stat(probe, &st), 0);
	snprintf(probe, sizeof(probe), "%s/A/1", cq);
	T_ASSERT_EQ(stat(probe, &st), 0);
	snprintf(probe, sizeof(probe), "%s/0", ix);
	T_ASSERT_EQ(stat(probe, &st), 0);
	T_ASSERT_EQ(stat(ck, &st), 0);
	snprintf(probe, sizeof(probe), "%s/commitlog", root);
	T_ASSERT(stat(probe, &st) != 0);
	snprintf(probe, sizeof(probe), "%s/consumequeue", root);
	T_ASSERT(stat(probe, &st) != 0);
	/* reopened from the same keys: everything is there */
	T_ASSERT_EQ(store_open(&c, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q[0]), 0);
	T_ASSERT_EQ(store_queue_max(s, q[0]), 25);
	store_close(s);
	/* a store whose log is under <root>/commitlog, opened with the key elsewhere: refused */
	{
		struct store_cfg d;
		char other[160];

		cfg_small(&d, false);
		T_ASSERT_EQ(store_open(&d, &s), 0);
		T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q[0]), 0);
		T_ASSERT_EQ(store_queue_get(s, "A", 1, 1, &q[1]), 0);
		fill(s, q, 0, 10);
		store_close(s);
		snprintf(other, sizeof(other), "%s/empty-cl", root);
		d.path_commitlog = other;
		T_ASSERT_EQ(store_open(&d, &s), -EEXIST);
	}
	rmtmp();
}

/* ---- recovery from short, missing and cut segments (docs/store.md "Recovery") ---- */

#define RN 1000 /* messages; shard 0 holds the even ones over 4 segments */

enum hurt {
	H_MISSING, /* shard 0's segment 1 deleted */
	H_SHORT,   /* ... cut to 20,000 bytes */
	H_CUT,	   /* 1,000 bytes zeroed in its middle */
	H_TAIL,	   /* its last segments (3 on) deleted */
};

/* Fill RN messages and stop: cleanly, or as a crash (a child that exits without closing). */
static void
recover_fill(struct store_cfg *cfg, bool clean, int64_t *phys)
{
	struct store_queue *q[2];
	struct store_put_res r;
	struct store *s;
	pid_t pid = clean ? 0 : fork();
	int st;

	T_ASSERT(pid >= 0);
	if (pid > 0) {
		T_ASSERT(waitpid(pid, &st, 0) == pid);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		return;
	}
	T_ASSERT_EQ(store_open(cfg, &s), 0);
	open_queues(s, q);
	for (uint32_t i = 0; i < RN; i++) {
		T_ASSERT(put_one(s, q[i % 2], i, &r) > 0);
		phys[i] = r.phys;
	}
	T_ASSERT_EQ(store_flush_all(s), 0);
	/* As the service thread does every few ms: the crash cuts only the log. */
	(void)store_drain_queues(s);
	if (!clean)
		_exit(0);
	store_close(s);
}

/* Shard 0's log hurt as @h says. Return: the local offsets [*lo, *hi) whose messages are gone. */
static void
recover_hurt(enum hurt h, const int64_t *phys, uint64_t *lo, uint64_t *hi)
{
	const uint64_t seg = 64 << 10;
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/commitlog/0/%020llu", root, (unsigned long long)seg);
	*lo = seg;
	*hi = 2 * seg;
	switch (h) {
	case H_MISSING:
		T_ASSERT_EQ(unlink(path), 0);
		break;
	case H_SHORT:
		T_ASSERT_EQ(truncate(path, 20000), 0);
		/* The first message not whole in the first 20,000 bytes: the next one starts past. */
		for (uint32_t i = 0; i + 2 < RN; i += 2) {
			uint64_t at = clog_phys_local(phys[i]);

			if (at >= seg && clog_phys_local(phys[i + 2]) > seg + 20000) {
				*lo = at;
				break;
			}
		}
		break;
	case H_CUT:
		*lo = clog_phys_local(phys[2 * 200]);
		T_ASSERT_EQ(*lo / seg, 1);
		fd = open(path, O_WRONLY);
		T_ASSERT(fd >= 0);
		T_ASSERT_EQ(pwrite(fd, (char[1000]){0}, 1000, (off_t)(*lo % seg + 10)), 1000);
		close(fd);
		/* Recovery steps over the damaged records: the next whole one stays. */
		for (uint32_t i = 2 * 200; i < RN; i += 2) {
			if (clog_phys_local(phys[i]) >= *lo + 1010) {
				*hi = clog_phys_local(phys[i]);
				break;
			}
		}
		T_ASSERT_EQ(*hi / seg, 1);
		break;
	case H_TAIL:
		*lo = 3 * seg;
		*hi = UINT64_MAX;
		for (uint64_t at = 3 * seg;; at += seg) {
			snprintf(path, sizeof(path), "%s/commitlog/0/%020llu", root,
				 (unsigned long long)at);
			if (unlink(path) != 0)
				break;
		}
		break;
	}
}

/*
 * After the damage, every message is either read back whole or answered
 * as lost (-ENOENT) or gone (-ERANGE, past the new end), exactly as the
 * damage says; the report counts them; appends go on.
 */
static void
recover_case(enum hurt h, bool clean, bool cq_too)
{
	int64_t *phys = mmap(NULL, RN * sizeof(*phys), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct store_recovery rr;
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	uint64_t lo, hi, lost = 0, max = RN / 2;
	char path[256];

	T_ASSERT(phys != MAP_FAILED);
	mktmp();
	cfg_small(&cfg, false);
	recover_fill(&cfg, clean, phys);
	T_ASSERT(clog_phys_local(phys[RN - 2]) >= 3 * (64 << 10));
	recover_hurt(h, phys, &lo, &hi);
	if (cq_too) {
		/* The queue's first file too: rebuilt from the log, which lacks a span. */
		snprintf(path, sizeof(path), "%s/consumequeue/A/0/%020d", root, 0);
		T_ASSERT_EQ(unlink(path), 0);
	}
	for (uint32_t i = 0; i < RN; i += 2) {
		uint64_t at = clog_phys_local(phys[i]);

		if (at >= lo && at < hi)
			lost++;
	}
	T_ASSERT(lost > (h == H_CUT ? 1u : 20u));
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT_EQ(store_recovery(s, 0, &rr), 0);
	if (h == H_TAIL) {
		max -= lost;
		T_ASSERT_EQ(rr.cq_cut, lost);
		T_ASSERT_EQ_U64(rr.clog->end, lo);
	} else {
		T_ASSERT_EQ(rr.cq_cut, 0);
		T_ASSERT_EQ(rr.cq_filled, cq_too ? lost : 0);
		T_ASSERT_EQ(rr.cq_lost, lost);
		T_ASSERT_EQ(rr.clog->n_lost, 1);
		T_ASSERT_EQ_U64(rr.clog->lost[0].lo, lo);
	}
	T_ASSERT_EQ(store_queue_max(s, q[0]), max);
	T_ASSERT_EQ(store_queue_max(s, q[1]), RN / 2);
	for (uint32_t i = 0; i < RN; i++) {
		uint64_t at = clog_phys_local(phys[i]);
		const uint8_t *rec;
		struct cq_unit u;

		if (i % 2 == 1 || at < lo)
			check_msg(s, q[i % 2], i / 2, i);
		else if (at >= hi)
			check_msg(s, q[0], i / 2, i);
		else if (h == H_TAIL)
			T_ASSERT_EQ(store_get(s, q[0], i / 2, &rec, &u), -ERANGE);
		else
			T_ASSERT_EQ(store_get(s, q[0], i / 2, &rec, &u), -ENOENT);
	}
	if (cq_too) {
		const uint8_t *rec;
		struct cq_unit u;
		uint64_t at;

		for (at = 0; at < max; at++)
			if (store_get(s, q[0], at, &rec, &u) == -ENOENT)
				break;
		T_ASSERT_EQ(u.size, CQ_LOST_SIZE);
		T_ASSERT_EQ(store_search_time(s, q[0], INT64_MAX, &at), 0);
		T_ASSERT_EQ(at, max);
	}
	/* The indexer passes the lost span too. */
	while (store_index_round(s) > 0)
		;
	T_ASSERT_EQ(store_index_round(s), 0);
	/* Appends go on after what the queues hold. */
	for (uint32_t i = RN; i < RN + 10; i++) {
		struct store_put_res r;

		T_ASSERT(put_one(s, q[i % 2], i, &r) > 0);
		T_ASSERT_EQ(r.qoff, i % 2 ? i / 2 : max + (i - RN) / 2);
	}
	store_close(s);
	/* A clean restart after that finds nothing to say. */
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_recovery(s, 0, &rr), 0);
	T_ASSERT_EQ(rr.clog->scan_from, UINT64_MAX);
	T_ASSERT_EQ(rr.cq_cut + rr.cq_lost + rr.cq_filled, 0);
	store_close(s);
	munmap(phys, RN * sizeof(*phys));
	rmtmp();
}

static void
test_recover_missing_segment(void)
{
	recover_case(H_MISSING, false, false);
	recover_case(H_MISSING, true, false);
	/* The ConsumeQueue rebuilt from a log that lacks the span: lost units fill the hole. */
	recover_case(H_MISSING, true, true);
}

static void
test_recover_short_segment(void)
{
	recover_case(H_SHORT, false, false);
	recover_case(H_SHORT, true, false);
}

static void
test_recover_cut_segment(void)
{
	recover_case(H_CUT, false, false);
	recover_case(H_CUT, true, false);
	recover_case(H_CUT, false, true);
}

static void
test_recover_deleted_tail(void)
{
	recover_case(H_TAIL, false, false);
	recover_case(H_TAIL, true, false);
}

/* Every segment of a shard gone while the checkpoint says it held records: refused, every time. */
static void
test_recover_no_segment(void)
{
	struct store_queue *q[2];
	struct store_cfg cfg;
	struct store *s;
	char cmd[160];

	mktmp();
	cfg_small(&cfg, false);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	fill(s, q, 0, 100);
	store_close(s);
	snprintf(cmd, sizeof(cmd), "rm '%s'/commitlog/0/*", root);
	T_ASSERT_EQ(system(cmd), 0);
	T_ASSERT_EQ(store_open(&cfg, &s), -ENOENT);
	T_ASSERT_EQ(store_open(&cfg, &s), -ENOENT);
	/* As the error says: without the checkpoint the shard starts empty. */
	snprintf(cmd, sizeof(cmd), "%s/checkpoint", root);
	T_ASSERT_EQ(unlink(cmd), 0);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	open_queues(s, q);
	T_ASSERT_EQ(store_queue_max(s, q[0]), 0);
	T_ASSERT_EQ(store_queue_max(s, q[1]), 50);
	store_close(s);
	rmtmp();
}

T_MAIN(T_CASE(test_fence_on_eio), T_CASE(test_sched_cq_units), T_CASE(test_put_get_lookups),
       T_CASE(test_threads_buffer_reuse), T_CASE(test_sync_visibility_and_tickets),
       T_CASE(test_clean_restart), T_CASE(test_crash_recovery),
       T_CASE(test_async_kill_keeps_buffered_appends), T_CASE(test_retention),
       T_CASE(test_disk_keep), T_CASE(test_threads_group_commit), T_CASE(test_paths),
       T_CASE(test_recover_missing_segment), T_CASE(test_recover_short_segment),
       T_CASE(test_recover_cut_segment), T_CASE(test_recover_deleted_tail),
       T_CASE(test_recover_no_segment))
