// SPDX-License-Identifier: Apache-2.0
/*
 * test_degrade.c - durability never downgrades silently: with
 * storeBufferDir set, an ASYNC_FLUSH append whose write-behind buffer is
 * anonymous memory (its directory or file could not be made) is durable
 * (store_durable()) only once written back; with the buffers as files, at
 * once. Also the episode count, and the way back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "common/clock.h"
#include "store/store.h"

static char root[64];
static char bufs[64];

static void
dirs_make(void)
{
	strcpy(root, "/tmp/sp-degrade-XXXXXX");
	T_ASSERT(mkdtemp(root) != NULL);
	strcpy(bufs,
	       access("/dev/shm", W_OK) == 0 ? "/dev/shm/sp-dgb-XXXXXX" : "/tmp/sp-dgb-XXXXXX");
	T_ASSERT(mkdtemp(bufs) != NULL);
}

static void
dirs_drop(void)
{
	char cmd[200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, bufs);
	T_ASSERT(system(cmd) == 0);
}

static void
cfg_async(struct store_cfg *c, const char *buf_dir)
{
	store_cfg_default(c);
	c->root = root;
	c->shards = 1;
	c->seg_size = 64 << 10;
	c->cq_units = 16;
	c->idx_slots = 64;
	c->idx_entries = 128;
	c->sync_flush = false;
	c->flush_interval_ms = 1;
	c->threads = false;
	c->buf_dir = buf_dir;
}

/* One ~1 KiB message; the store's service prepares the next segment when asked. */
static uint64_t
put(struct store *s, struct store_queue *q)
{
	static uint8_t body[1000];
	struct store_put_res r;
	struct wire_msg m;
	long n;

	memset(&m, 0, sizeof(m));
	m.body = body;
	m.body_len = sizeof(body);
	m.born_ts = 1;
	for (int tries = 0; tries < 100; tries++) {
		n = store_put(s, q, &m, &r);
		if (n != -EAGAIN)
			break;
		T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	}
	T_ASSERT(n > 0);
	return r.ticket;
}

/* Buffers as files: an ASYNC_FLUSH append is durable at once. */
static void
test_files_durable_at_once(void)
{
	struct store_queue *q;
	struct store_cfg cfg;
	struct store *s;
	uint64_t t;

	dirs_make();
	cfg_async(&cfg, bufs);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	t = put(s, q);
	T_ASSERT_EQ(store_durable(s, 0, t), 1);
	T_ASSERT(!clog_bufs_degraded(store_clog(s, 0)));
	store_close(s);
	dirs_drop();
}

/* The directory cannot be made (a file is in the way): every append waits for its write-back. */
static void
test_no_dir_waits_for_writeback(void)
{
	char bad[128];
	struct store_queue *q;
	struct store_cfg cfg;
	struct store *s;
	FILE *f;
	uint64_t t;

	dirs_make();
	snprintf(bad, sizeof(bad), "%s/file", bufs);
	f = fopen(bad, "w");
	T_ASSERT(f != NULL);
	fclose(f);
	snprintf(bad, sizeof(bad), "%s/file/sub", bufs);
	cfg_async(&cfg, bad);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	T_ASSERT(clog_bufs_degraded(store_clog(s, 0)));
	t = put(s, q);
	T_ASSERT_EQ(store_durable(s, 0, t), 0);
	/* written back to the segment file (the flusher's 1 ms step; no sync needed) */
	T_ASSERT_EQ(clog_write_back(store_clog(s, 0)), 0);
	T_ASSERT_EQ(store_durable(s, 0, t), 1);
	store_close(s);

	/* Anonymous memory asked for (no storeBufferDir): no wait, as documented. */
	cfg_async(&cfg, NULL);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	T_ASSERT(!clog_bufs_degraded(store_clog(s, 0)));
	t = put(s, q);
	T_ASSERT_EQ(store_durable(s, 0, t), 1);
	store_close(s);
	dirs_drop();
}

/*
 * The buffer file of a later segment cannot be made (a directory holds its
 * name): from that segment on appends wait for their write-back, one
 * episode is counted; once the segment's buffers are files again, acks are
 * immediate again.
 */
static void
test_episode(void)
{
	char path[256], run[200] = "";
	struct store_queue *q;
	struct store_cfg cfg;
	struct store *s;
	const struct clog *cl;
	uint64_t t = 0;
	FILE *f;
	int seg;

	dirs_make();
	cfg_async(&cfg, bufs);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	cl = store_clog(s, 0);
	snprintf(path, sizeof(path), "%s/bufdir", root);
	f = fopen(path, "r");
	T_ASSERT(f != NULL);
	T_ASSERT(fgets(run, sizeof(run), f) != NULL);
	fclose(f);
	run[strcspn(run, "\n")] = '\0';
	/* segments 2..5 of shard 0: a directory where each buffer file would go */
	for (seg = 2; seg < 6; seg++) {
		snprintf(path, sizeof(path), "%s/0/%020llu", run,
			 (unsigned long long)seg * cfg.seg_size);
		T_ASSERT_EQ(mkdir(path, 0700), 0);
	}
	for (int i = 0; i < 64 * 3; i++) /* past the start of segment 2 */
		t = put(s, q);
	T_ASSERT(clog_bufs_degraded(cl));
	T_ASSERT_EQ(clog_bufs_degraded_episodes(cl), 1);
	T_ASSERT_EQ(store_durable(s, 0, t), 0);
	T_ASSERT_EQ(clog_write_back(store_clog(s, 0)), 0);
	T_ASSERT_EQ(store_durable(s, 0, t), 1);
	T_ASSERT_EQ(store_flush_all(s), 0);

	for (seg = 2; seg < 6; seg++) {
		snprintf(path, sizeof(path), "%s/0/%020llu", run,
			 (unsigned long long)seg * cfg.seg_size);
		T_ASSERT_EQ(rmdir(path), 0);
	}
	/* Segments 6 and on get files; the anonymous buffers retire after their write-back. */
	for (int i = 0; i < 64 * 8 && clog_bufs_degraded(cl); i++) {
		t = put(s, q);
		T_ASSERT_EQ(store_flush_all(s), 0);
		T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	}
	T_ASSERT(!clog_bufs_degraded(cl));
	t = put(s, q);
	T_ASSERT_EQ(store_durable(s, 0, t), 1);
	T_ASSERT_EQ(clog_bufs_degraded_episodes(cl), 1);
	store_close(s);
	dirs_drop();
}

T_MAIN(T_CASE(test_files_durable_at_once), T_CASE(test_no_dir_waits_for_writeback),
       T_CASE(test_episode))
