// SPDX-License-Identifier: Apache-2.0
/*
 * test_repl.c - the store's replication path: a slave store follows a
 * master store span by span (store_repl_read() -> store_repl_write()) across
 * segment rolls and ConsumeQueue files, and ends byte-identical, with the
 * same records at the same queue offsets; a bad record, a wrong offset and
 * a wrong PHYSICALOFFSET are refused with nothing written; a slave restart
 * (clean and crashed) resumes at its own end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "common/clock.h"
#include "store/store.h"

static char mroot[64];
static char sroot[64];

static void
cfg_small(struct store_cfg *c, const char *root)
{
	store_cfg_default(c);
	c->root = root;
	c->shards = 2;
	c->seg_size = 64 << 10;
	c->cq_units = 16;
	c->idx_slots = 64;
	c->idx_entries = 128;
	c->flush_interval_ms = 1;
	c->threads = false;
	c->buf_dir = NULL;
}

static void
rm_root(const char *root)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	T_ASSERT(system(cmd) == 0);
}

static long
put_one(struct store *s, struct store_queue *q, uint32_t i)
{
	static uint8_t body[1500];
	struct store_put_res r;
	struct wire_msg m;
	char props[64];
	size_t plen = 0;
	long n;

	memset(&m, 0, sizeof(m));
	for (size_t k = 0; k < sizeof(body); k++)
		body[k] = (uint8_t)(i * 7 + k);
	T_ASSERT_EQ(wire_props_append(props, sizeof(props), &plen, "TAGS", 4, "t", 1), 0);
	m.body = body;
	m.body_len = 100 + (i * 37) % 1400;
	m.born_ts = 1000 + i;
	m.props = props;
	m.props_len = (uint16_t)plen;
	for (int tries = 0; tries < 100; tries++) {
		n = store_put(s, q, &m, &r);
		if (n != -EAGAIN)
			return n;
		T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	}
	return n;
}

/* Copy everything new of every shard from @m to @sl. Return: bytes copied. */
static uint64_t
follow(struct store *m, struct store *sl)
{
	uint64_t total = 0;

	for (uint32_t sh = 0; sh < 2; sh++) {
		for (;;) {
			uint64_t off = clog_written(store_clog(sl, sh));
			const uint8_t *p;
			uint64_t last = UINT64_MAX;
			uint64_t walked;
			long n = store_repl_read(m, sh, off, 8192, &p);
			long w;

			T_ASSERT(n >= 0);
			if (n == 0)
				break;
			for (int tries = 0;
			     (w = store_repl_write(sl, sh, off, p, (size_t)n, &last)) == -EAGAIN;
			     tries++) {
				T_ASSERT(tries < 100);
				T_ASSERT_EQ(store_service(sl, clk_wall_ms()), 0);
			}
			T_ASSERT_EQ(w, n);
			/* the copy names its last record as a walk of the log finds it */
			T_ASSERT_EQ(clog_last_rec(store_clog(sl, sh), &walked), 0);
			T_ASSERT_EQ_U64(last, walked);
			total += (uint64_t)n;
		}
	}
	return total;
}

static bool
ends_with_blank(const uint8_t *p, size_t n)
{
	size_t pos = 0;

	while (pos < n) {
		struct wire_msg m;
		long r = wire_rec_decode(p + pos, n - pos, 0, &m);

		if (r == -ENODATA)
			return true;
		T_ASSERT(r > 0);
		pos += (size_t)r;
	}
	return false;
}

/* Every shard's bytes are the master's. */
static void
check_logs_same(struct store *m, struct store *sl)
{
	for (uint32_t sh = 0; sh < 2; sh++) {
		struct clog *a = store_clog(m, sh);
		struct clog *b = store_clog(sl, sh);
		uint64_t off = clog_min(a);

		T_ASSERT_EQ_U64(clog_written(a), clog_written(b));
		while (off < clog_written(a)) {
			const uint8_t *ra;
			const uint8_t *rb;
			long na = store_repl_read(m, sh, off, 1u << 20, &ra);
			long nb = store_repl_read(sl, sh, off, 1u << 20, &rb);

			T_ASSERT(na > 0);
			T_ASSERT_EQ(na, nb);
			T_ASSERT_MEMEQ(ra, rb, (size_t)na);
			off += (uint64_t)na;
			if (ends_with_blank(ra,
					    (size_t)na)) /* the next span is in the next segment */
				off += clog_seg_size(a) - off % clog_seg_size(a);
		}
	}
}

/* Every shard's bytes and every queue's units are the master's. */
static void
check_same(struct store *m, struct store *sl, struct store_queue **mq, uint32_t nq)
{
	check_logs_same(m, sl);
	for (uint32_t i = 0; i < nq; i++) {
		struct store_queue *sq;
		struct cq *ca = store_queue_cq(mq[i]);

		T_ASSERT_EQ(store_queue_get(sl, "T", i, i % 2, &sq), 0);
		T_ASSERT_EQ_U64(store_queue_max(sl, sq), store_queue_max(m, mq[i]));
		for (uint64_t o = 0; o < store_queue_max(m, mq[i]); o++) {
			struct cq_unit ua;
			struct cq_unit ub;

			T_ASSERT_EQ(cq_get(ca, o, &ua), 0);
			T_ASSERT_EQ(cq_get(store_queue_cq(sq), o, &ub), 0);
			T_ASSERT_EQ(ua.phys, ub.phys);
			T_ASSERT_EQ(ua.size, ub.size);
			T_ASSERT_EQ(ua.tag_hash, ub.tag_hash);
		}
	}
}

static void
open_pair(struct store **m, struct store **sl, struct store_queue **mq)
{
	struct store_cfg c;

	cfg_small(&c, mroot);
	T_ASSERT_EQ(store_open(&c, m), 0);
	cfg_small(&c, sroot);
	T_ASSERT_EQ(store_open(&c, sl), 0);
	for (uint32_t i = 0; i < 4; i++)
		T_ASSERT_EQ(store_queue_get(*m, "T", i, i % 2, &mq[i]), 0);
}

static void
test_follow(void)
{
	struct store_queue *mq[4];
	struct store *m;
	struct store *sl;

	strcpy(mroot, "/tmp/sp-replm-XXXXXX");
	strcpy(sroot, "/tmp/sp-repls-XXXXXX");
	T_ASSERT(mkdtemp(mroot) && mkdtemp(sroot));
	open_pair(&m, &sl, mq);
	/* ~300 KiB per shard: several 64 KiB segments, several 16-unit CQ files */
	for (uint32_t i = 0; i < 400; i++) {
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
		if (i % 50 == 0)
			(void)follow(m, sl);
	}
	T_ASSERT(follow(m, sl) > 0);
	T_ASSERT_EQ_U64(follow(m, sl), 0);
	check_same(m, sl, mq, 4);

	/* refused, nothing written: not the end, a flipped body byte, a moved record */
	{
		uint64_t end = clog_written(store_clog(sl, 0));
		uint8_t rec[4096];
		const uint8_t *p;
		long n;

		T_ASSERT(put_one(m, mq[0], 1000) > 0);
		n = store_repl_read(m, 0, end, sizeof(rec), &p);
		T_ASSERT(n > 0 && (size_t)n <= sizeof(rec));
		memcpy(rec, p, (size_t)n);
		T_ASSERT_EQ(store_repl_write(sl, 0, end + 1, rec, (size_t)n, NULL), -ERANGE);
		rec[n - 3] ^= 0x40; /* properties are under no CRC: flip the body */
		rec[200] ^= 0x01;
		T_ASSERT(store_repl_write(sl, 0, end, rec, (size_t)n, NULL) < 0);
		rec[200] ^= 0x01;
		rec[n - 3] ^= 0x40;
		T_ASSERT_EQ(clog_written(store_clog(sl, 0)), end);
		T_ASSERT_EQ(store_repl_write(sl, 1, end, rec, (size_t)n, NULL), -ERANGE);
		T_ASSERT_EQ(store_repl_write(sl, 0, end, rec, (size_t)n, NULL), n);
	}

	/*
	 * In two steps, as a slave's session does: appended bytes are not
	 * published (nor their units written) until store_repl_publish(); the
	 * record's identity computed from the copy is the log's.
	 */
	{
		uint64_t end = clog_written(store_clog(sl, 0));
		uint8_t rec[4096];
		const uint8_t *p;
		uint64_t last = 0;
		uint32_t size;
		uint32_t hash;
		long n;

		T_ASSERT(put_one(m, mq[0], 1001) > 0);
		n = store_repl_read(m, 0, end, sizeof(rec), &p);
		T_ASSERT(n > 0 && (size_t)n <= sizeof(rec));
		memcpy(rec, p, (size_t)n);
		T_ASSERT_EQ(store_repl_append(sl, 0, end, rec, (size_t)n, &last), n);
		T_ASSERT_EQ_U64(last, end);
		T_ASSERT_EQ_U64(clog_written(store_clog(sl, 0)), end); /* not yet published */
		T_ASSERT_EQ(store_repl_publish(sl, 0, end + 1, (size_t)n), -EINVAL);
		T_ASSERT_EQ(store_repl_publish(sl, 0, end, (size_t)n), 0);
		T_ASSERT_EQ_U64(clog_written(store_clog(sl, 0)), end + (uint64_t)n);
		T_ASSERT_EQ(store_repl_rec_id(sl, 0, end, &size, &hash), 0);
		T_ASSERT_EQ(size, (uint32_t)n);
		T_ASSERT_EQ(hash, clog_rec_hash(rec, (uint64_t)n, (uint64_t)n));
		T_ASSERT(follow(m, sl) == 0);
		check_same(m, sl, mq, 4);
	}

	/* a clean restart of the slave resumes at its end */
	store_close(sl);
	{
		struct store_cfg c;

		cfg_small(&c, sroot);
		T_ASSERT_EQ(store_open(&c, &sl), 0);
	}
	for (uint32_t i = 400; i < 600; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	T_ASSERT(follow(m, sl) > 0);
	check_same(m, sl, mq, 4);

	/* a crashed slave (no close) recovers and resumes */
	uint64_t before = clog_written(store_clog(sl, 0));

	for (uint32_t i = 600; i < 700; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	store_close(sl);
	{
		struct store_cfg c;
		pid_t pid;
		int st;

		cfg_small(&c, sroot);
		pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			struct store *child;

			if (store_open(&c, &child) != 0)
				_exit(2);
			(void)follow(m, child);
			if (store_flush_all(child) != 0)
				_exit(3);
			_exit(0); /* no close: the abort file stays */
		}
		T_ASSERT_EQ(waitpid(pid, &st, 0), pid);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		T_ASSERT_EQ(store_open(&c, &sl), 0);
		/* what the crashed run copied and flushed is there */
		T_ASSERT_EQ_U64(clog_written(store_clog(sl, 0)), clog_written(store_clog(m, 0)));
		T_ASSERT(clog_written(store_clog(sl, 0)) > before);
	}
	(void)follow(m, sl);
	check_same(m, sl, mq, 4);
	store_close(sl);
	store_close(m);
	rm_root(mroot);
	rm_root(sroot);
}

/* A master that lost its tail: the slave cuts to the master's end and follows again. */
static void
test_cut(void)
{
	struct store_queue *mq[4];
	struct store_cfg c;
	struct store *m;
	struct store *sl;
	uint64_t e1[2];

	strcpy(mroot, "/tmp/sp-replm-XXXXXX");
	strcpy(sroot, "/tmp/sp-repls-XXXXXX");
	T_ASSERT(mkdtemp(mroot) && mkdtemp(sroot));
	open_pair(&m, &sl, mq);
	for (uint32_t i = 0; i < 300; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	(void)follow(m, sl);
	for (uint32_t sh = 0; sh < 2; sh++) {
		uint64_t lm, ls;
		uint32_t zm, zs, hm, hs;

		e1[sh] = clog_written(store_clog(m, sh));
		/* both ends name the same last record the same way */
		T_ASSERT_EQ(clog_last_rec(store_clog(m, sh), &lm), 0);
		T_ASSERT_EQ(clog_last_rec(store_clog(sl, sh), &ls), 0);
		T_ASSERT_EQ_U64(lm, ls);
		T_ASSERT_EQ(clog_rec_id(store_clog(m, sh), lm, &zm, &hm), 0);
		T_ASSERT_EQ(clog_rec_id(store_clog(sl, sh), ls, &zs, &hs), 0);
		T_ASSERT_EQ(zm, zs);
		T_ASSERT_EQ(hm, hs);
		T_ASSERT_EQ_U64(lm + zm, e1[sh]);
	}
	for (uint32_t i = 300; i < 500; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	(void)follow(m, sl);
	/* the master loses what came after e1 (an ASYNC master's crash, say), mid-record */
	T_ASSERT_EQ(store_truncate_mark(m, 0, e1[0] + 7), 0);
	T_ASSERT_EQ(store_truncate_mark(m, 1, e1[1]), 0);
	store_close(m);
	cfg_small(&c, mroot);
	T_ASSERT_EQ(store_open(&c, &m), 0);
	for (uint32_t sh = 0; sh < 2; sh++)
		T_ASSERT_EQ_U64(clog_written(store_clog(m, sh)), e1[sh]);
	T_ASSERT(access("/tmp", F_OK) == 0);
	/* the slave, longer, is cut to the master's end at its next open */
	for (uint32_t sh = 0; sh < 2; sh++) {
		T_ASSERT(clog_written(store_clog(sl, sh)) > e1[sh]);
		T_ASSERT_EQ(store_truncate_mark(sl, sh, clog_written(store_clog(m, sh))), 0);
	}
	store_close(sl);
	cfg_small(&c, sroot);
	T_ASSERT_EQ(store_open(&c, &sl), 0);
	for (uint32_t i = 0; i < 4; i++)
		T_ASSERT_EQ(store_queue_get(m, "T", i, i % 2, &mq[i]), 0);
	for (uint32_t i = 500; i < 700; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	T_ASSERT(follow(m, sl) > 0);
	check_same(m, sl, mq, 4);
	store_close(sl);
	store_close(m);
	rm_root(mroot);
	rm_root(sroot);
}

/*
 * A master whose recovery recreated a missing segment blank: a new slave
 * copies the BLANK and goes on; its queues read as the master's, the lost
 * messages answered not found on both (the slave writes lost units where
 * its queues have a hole).
 */
static void
test_follow_lost_segment(void)
{
	struct store_queue *mq[4];
	struct store_recovery rr;
	struct store_cfg c;
	struct store *m;
	struct store *sl;
	char path[128];
	uint32_t lost = 0;

	strcpy(mroot, "/tmp/sp-replm-XXXXXX");
	strcpy(sroot, "/tmp/sp-repls-XXXXXX");
	T_ASSERT(mkdtemp(mroot) && mkdtemp(sroot));
	cfg_small(&c, mroot);
	T_ASSERT_EQ(store_open(&c, &m), 0);
	for (uint32_t i = 0; i < 4; i++)
		T_ASSERT_EQ(store_queue_get(m, "T", i, i % 2, &mq[i]), 0);
	for (uint32_t i = 0; i < 400; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	T_ASSERT(clog_written(store_clog(m, 0)) > 2 * (64 << 10));
	store_close(m);
	snprintf(path, sizeof(path), "%s/commitlog/0/%020d", mroot, 64 << 10);
	T_ASSERT_EQ(unlink(path), 0);
	open_pair(&m, &sl, mq);
	T_ASSERT_EQ(store_recovery(m, 0, &rr), 0);
	T_ASSERT_EQ(rr.clog->segs_missing, 1);
	T_ASSERT(rr.cq_lost > 10);
	T_ASSERT(follow(m, sl) > 0);
	check_logs_same(m, sl);
	for (uint32_t i = 0; i < 4; i++) {
		struct store_queue *sq;

		T_ASSERT_EQ(store_queue_get(sl, "T", i, i % 2, &sq), 0);
		T_ASSERT_EQ_U64(store_queue_max(sl, sq), store_queue_max(m, mq[i]));
		for (uint64_t o = 0; o < store_queue_max(m, mq[i]); o++) {
			const uint8_t *ra;
			const uint8_t *rb;
			struct cq_unit ua;
			struct cq_unit ub;
			long na = store_get(m, mq[i], o, &ra, &ua);
			long nb = store_get(sl, sq, o, &rb, &ub);

			T_ASSERT_EQ(na, nb);
			T_ASSERT(na > 0 || na == -ENOENT);
			if (na > 0)
				T_ASSERT_MEMEQ(ra, rb, (size_t)na);
			lost += na == -ENOENT;
		}
	}
	T_ASSERT_EQ(lost, rr.cq_lost);
	/* And it follows what the master takes next. */
	for (uint32_t i = 400; i < 420; i++)
		T_ASSERT(put_one(m, mq[i % 4], i) > 0);
	T_ASSERT(follow(m, sl) > 0);
	check_logs_same(m, sl);
	store_close(sl);
	store_close(m);
	rm_root(mroot);
	rm_root(sroot);
}

T_MAIN(T_CASE(test_follow), T_CASE(test_cut), T_CASE(test_follow_lost_segment))
