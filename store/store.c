// SPDX-License-Identifier: Apache-2.0
/*
 * store.c - the store facade: queue registry, put/get, recovery, the
 * checkpoint and abort files, and the flusher/service/indexer threads.
 *
 * DESIGN
 * Recovery leans on two facts. Records carry their queue offset, so
 * re-dispatching a record into its ConsumeQueue is idempotent (cq_append
 * of an existing unit is a no-op). And store_put() appends the ConsumeQueue
 * unit before clog_commit() publishes the record, so every record below a
 * flushed offset F read before a ConsumeQueue flush has its unit in that
 * flush: F is the checkpoint's "cq_safe", where a crash recovery starts
 * scanning. Everything before it is trusted, everything after it is
 * verified record by record and re-dispatched.
 *
 * The checkpoint is a small binary file (magic, version, shard count, clean
 * flag, per shard: end, cq_safe, indexed, verified; CRC-32) replaced
 * atomically. "verified" is how far the log was checked record by record
 * (BODYCRC) at the last start: the next start checks from there, even
 * after a clean stop (docs/store.md, "Damage"). The
 * clean flag and the "end" values are only written by store_close() after
 * the final flush; the abort file says the process did not get there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bytes_priv.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "common/log.h"
#include "store/idx.h"
#include "store/store.h"

#include "store_priv.h"

#define STORE_TAG "store"
#define CKPT_MAGIC 0x53504B43u /* "SPKC" */
#define CKPT_VERSION 2	       /* 1: without verified */
#define CKPT_HDR 16
#define CKPT_PER_SHARD 32 /* version 1: 24 */
#define QMAP_BUCKETS 4096
#define STORE_WB_FILE_MS 10 /* ASYNC write-back period when the buffers are files */

struct store_queue {
	/* immutable after creation */
	char topic[WIRE_TOPIC_MAX + 1];
	uint8_t topic_len;
	uint32_t qid;
	struct cq *cq;
	struct store_queue *hnext; /* hash chain (registry mutex) */
	struct store_queue *lnext; /* list of all queues (registry mutex) */
	/* the drainer's list (drain_head): set before the queue is published, never changed */
	struct store_queue *dnext;
	/* control sets before handing the queue to the owning core */
	_Atomic uint32_t shard;
	/* written while the disk is full (store_queue_keep_writable()); relaxed */
	_Atomic bool full_ok;
	/* owner writes, stats read relaxed */
	_Atomic uint64_t cq_errors;
};

struct store_shard {
	struct store *s;
	uint32_t id;
	struct clog *clog;
	struct idx *idx;
	/* indexer writes, service reads (relaxed: a checkpoint may lag behind) */
	_Atomic uint64_t idx_pos;
	pthread_t flusher;
	bool flusher_started;
	/* startup only: what recovery did to the ConsumeQueues (store_recovery()) */
	uint64_t cq_cut;
	uint64_t cq_lost;
	uint64_t cq_filled;
	/* immutable after open: the log was verified up to here (checkpoint's "verified") */
	uint64_t verified;
	/* the shard's owner adds (relaxed), anyone reads: store_put() refusals, store_busy() */
	_Atomic uint64_t busy_cq;   /* the queue's next ConsumeQueue file not ready */
	_Atomic uint64_t busy_ring; /* the queue's ConsumeQueue write-behind ring full */
	_Atomic uint64_t busy_clog; /* the CommitLog's window or next segment not ready */
};

struct ckpt_shard {
	uint64_t end;
	uint64_t cq_safe;
	uint64_t indexed;
	int64_t verified; /* -1: not known (a version 1 checkpoint) */
};

/*
 * Damage met by readers of one shard (docs/store.md, "Damage").
 * Ownership: any reader (a dataplane core, the remoting or control
 * threads) adds to bad_reads and sets last_bad, relaxed; the service
 * thread reads them and alone writes logged_*, which say what it logged.
 */
struct store_dmg {
	_Atomic uint64_t bad_reads;
	_Atomic uint64_t last_bad;
	uint64_t logged_reads; /* service thread only */
	uint64_t logged_seg;   /* service thread only: segment of the last range logged */
	bool logged_any;       /* service thread only */
};

struct store {
	/* immutable after open */
	struct store_cfg cfg;
	const struct store_io_ops *io;
	char root[2048];
	char abort_path[2048 + 8];
	char ckpt_path[2048 + 16];
	char cut_path[2048 + 16]; /* <root>/truncate: store_truncate_mark() */
	/* storePathCommitLog, storePathConsumeQueue, storePathIndex (default under root) */
	char clog_dir[2048];
	char cq_dir[2048];
	char idx_dir[2048];
	/* write-behind buffer dirs (docs/store.md): the record, this run's, the last run's */
	char bufdir_path[2048 + 16];
	char buf_run[1024];
	char buf_old[1024];
	/* <root>/lock and <buf_run>/owner, flocked for the store's life (store/owner.c) */
	int lock_fd;
	int buf_lock_fd;
	struct store_shard shard[STORE_SHARDS_MAX];
	/* one per shard, allocated at open: written through a const store by readers */
	struct store_dmg *dmg;

	/* registry: control and background threads, under qlock */
	pthread_mutex_t qlock;
	struct store_queue *qmap[QMAP_BUCKETS];
	struct store_queue *queues;
	size_t n_queues;
	/* deleted topics' queues: out of the registry, kept (mapped) until close */
	struct store_queue *retired;
	/*
	 * Every queue ever opened, retired ones too, newest first, for the
	 * drainer thread, which walks it without qlock: prepended under qlock
	 * (release), never unlinked before close.
	 */
	struct store_queue *_Atomic drain_head;

	/* service thread only */
	int64_t last_flush_ms;
	/*
	 * A ConsumeQueue flush pass in progress (service thread only): with
	 * thousands of queues one pass is thousands of fdatasyncs, so it runs in
	 * slices between the rounds that prepare the next files, and the
	 * checkpoint is written when the pass ends.
	 */
	bool pass_active;
	struct store_queue *pass_next;
	struct ckpt_shard pass_ck[STORE_SHARDS_MAX];
	int64_t last_retention_ms;
	int64_t last_resync_ms;
	bool svc_worked; /* the last store_service() prepared a file or ran a flush slice */

	/*
	 * Disk space (store_retain()): what groups have not read, per shard
	 * (store_set_keep(), any thread, under keep_mu); writes refused while
	 * disk_full (service thread sets it, store_put() loads it relaxed).
	 */
	pthread_mutex_t keep_mu;
	uint64_t keep_floor[STORE_SHARDS_MAX];
	char keep_who[STORE_SHARDS_MAX][160];
	char disk_full_why[384]; /* under keep_mu */
	_Atomic uint32_t disk_full;
	_Atomic uint64_t unread_deleted;

	/* readers of records the reader_sync hook does not cover: see bg_read_enter() */
	_Atomic uint64_t bg_epoch;
	_Atomic uint32_t bg_readers[2];

	/* threads */
	_Atomic bool stop;
	pthread_t service;
	pthread_t prep; /* CommitLog buffers and segments (store_prepare_logs()) */
	bool prep_started;
	pthread_t indexer;
	pthread_t drainer; /* ConsumeQueue write-behind rings into their files */
	bool service_started;
	bool indexer_started;
	bool drainer_started;
};

void
store_cfg_default(struct store_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->root = "./store";
	cfg->shards = 1;
	cfg->seg_size = 1ull << 30;
	cfg->cq_units = CQ_UNITS_PER_FILE_DEFAULT;
	cfg->idx_slots = IDX_SLOTS_DEFAULT;
	cfg->idx_entries = IDX_ENTRIES_DEFAULT;
	cfg->sync_flush = false;
	cfg->flush_interval_ms = 500;
	cfg->sync_timeout_ms = 5000;
	cfg->file_reserved_hours = 72;
	cfg->delete_when_hour = 4;
	cfg->disk_max_used_ratio = 75;
	cfg->disk_clean_ratio = 85;
	cfg->disk_warn_ratio = 90;
	cfg->clean_forcibly = true;
	cfg->store_host.addr[0] = 127;
	cfg->store_host.addr[3] = 1;
	cfg->store_host.port = 10911;
	cfg->threads = true;
}

static uint32_t
qmap_hash(const char *topic, size_t len, uint32_t qid)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)topic[i]) * 16777619u;
	h = (h ^ qid) * 16777619u;
	return h % QMAP_BUCKETS;
}

static struct store_queue *
qmap_find(struct store *s, const char *topic, size_t len, uint32_t qid)
{
	for (struct store_queue *q = s->qmap[qmap_hash(topic, len, qid)]; q; q = q->hnext) {
		if (q->qid == qid && q->topic_len == len && memcmp(q->topic, topic, len) == 0)
			return q;
	}
	return NULL;
}

/* Find or open the queue. Caller holds qlock. */
/*
 * Units per ConsumeQueue file of @topic: mapedFileSizeConsumeQueue's, but a
 * sixteenth for STORE_SCHED_TOPIC, whose levels x cores queues each get a
 * first file at start (pre-allocated and pre-faulted): 36 such files of
 * 5.7 MB were 207 MB of page cache before any delayed message.
 */
static uint32_t
queue_units(const struct store *s, const char *topic, size_t len)
{
	if (len == sizeof(STORE_SCHED_TOPIC) - 1 && memcmp(topic, STORE_SCHED_TOPIC, len) == 0)
		return SP_MAX(s->cfg.cq_units / 16, SP_MIN(s->cfg.cq_units, 1024u));
	return s->cfg.cq_units;
}

static int
queue_get_locked(struct store *s, const char *topic, size_t len, uint32_t qid, uint32_t shard,
		 struct store_queue **out)
{
	struct store_queue *q;
	char dir[PATH_MAX];
	uint32_t h;
	int rc;

	if (shard >= s->cfg.shards)
		return -EINVAL;
	q = qmap_find(s, topic, len, qid);
	if (q != NULL) {
		atomic_store_release(&q->shard, shard);
		*out = q;
		return 0;
	}
	/* The topic rule also keeps paths inside the store. */
	if (!wire_topic_name_ok(topic, len) || shard >= s->cfg.shards)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	memcpy(q->topic, topic, len);
	q->topic_len = (uint8_t)len;
	q->qid = qid;
	atomic_store_relaxed(&q->shard, shard);
	snprintf(dir, sizeof(dir), "%s/%.*s/%u", s->cq_dir, (int)len, topic, qid);
	rc = cq_open(s->io, dir, queue_units(s, topic, len), &q->cq);
	if (rc != 0) {
		free(q);
		return rc;
	}
	h = qmap_hash(topic, len, qid);
	q->hnext = s->qmap[h];
	s->qmap[h] = q;
	q->lnext = s->queues;
	s->queues = q;
	q->dnext = atomic_load_relaxed(&s->drain_head);
	/* release: pairs with acquire in drainer_main(): the queue and its cq are set up */
	atomic_store_release(&s->drain_head, q);
	s->n_queues++;
	*out = q;
	return 0;
}

long
store_queue_topics(struct store *s, char (*out)[WIRE_TOPIC_MAX + 1], size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
		bool dup = false;

		for (size_t i = 0; i < n && !dup; i++)
			dup = strlen(out[i]) == q->topic_len &&
			      memcmp(out[i], q->topic, q->topic_len) == 0;
		if (dup)
			continue;
		if (n == max) {
			pthread_mutex_unlock(&s->qlock);
			return -ENOSPC;
		}
		memcpy(out[n], q->topic, q->topic_len);
		out[n][q->topic_len] = '\0';
		n++;
	}
	pthread_mutex_unlock(&s->qlock);
	return (long)n;
}

static int rm_rf(const char *path);

long
store_queue_retire(struct store *s, const char *topic)
{
	size_t len = strlen(topic);
	char dir[PATH_MAX];
	long n = 0;

	if (!wire_topic_name_ok(topic, len))
		return -EINVAL;
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue **pp = &s->queues; *pp != NULL;) {
		struct store_queue *q = *pp;
		struct store_queue **hp;

		if (q->topic_len != len || memcmp(q->topic, topic, len) != 0) {
			pp = &q->lnext;
			continue;
		}
		for (hp = &s->qmap[qmap_hash(topic, len, q->qid)]; *hp != q; hp = &(*hp)->hnext)
			;
		*hp = q->hnext;
		if (s->pass_next == q)
			s->pass_next = q->lnext; /* the flush pass goes on after it */
		*pp = q->lnext;
		q->lnext = s->retired;
		s->retired = q;
		s->n_queues--;
		n++;
	}
	/*
	 * Its files go now, before anyone can open the name again (a slave's
	 * replication dispatches under this lock); the retired queues keep their
	 * mappings, so readers finish safely.
	 */
	snprintf(dir, sizeof(dir), "%s/%s", s->cq_dir, topic);
	{
		int rc = rm_rf(dir);

		if (rc != 0)
			log_warn(STORE_TAG, "removing %s: %s", dir, strerror(-rc));
	}
	pthread_mutex_unlock(&s->qlock);
	return n;
}

int
store_queue_get(struct store *s, const char *topic, uint32_t qid, uint32_t shard,
		struct store_queue **out)
{
	int rc;

	pthread_mutex_lock(&s->qlock);
	rc = queue_get_locked(s, topic, strlen(topic), qid, shard, out);
	/* A new queue gets its first file now, not on its first put. */
	if (rc == 0 && !cq_can_append((*out)->cq))
		rc = cq_prepare_next((*out)->cq);
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

struct clog *
store_clog(const struct store *s, uint32_t shard)
{
	return shard < s->cfg.shards ? s->shard[shard].clog : NULL;
}

void
store_queue_keep_writable(struct store_queue *q)
{
	atomic_store_relaxed(&q->full_ok, true);
}

struct cq *
store_queue_cq(const struct store_queue *q)
{
	return q->cq;
}

/* ---- checkpoint and abort files ---- */

static int
ckpt_write(struct store *s, bool clean, const struct ckpt_shard *cs)
{
	uint8_t buf[CKPT_HDR + CKPT_PER_SHARD * STORE_SHARDS_MAX + 4];
	size_t n = CKPT_HDR + CKPT_PER_SHARD * s->cfg.shards;

	wire_st_le32(buf, CKPT_MAGIC);
	wire_st_le32(buf + 4, CKPT_VERSION);
	wire_st_le32(buf + 8, s->cfg.shards);
	wire_st_le32(buf + 12, clean ? 1 : 0);
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		uint8_t *p = buf + CKPT_HDR + CKPT_PER_SHARD * i;

		wire_st_le64(p, cs[i].end);
		wire_st_le64(p + 8, cs[i].cq_safe);
		wire_st_le64(p + 16, cs[i].indexed);
		wire_st_le64(p + 24, (uint64_t)cs[i].verified);
	}
	wire_st_le32(buf + n, crc32_java(buf, n));
	return store_io_write_atomic(s->io, s->ckpt_path, buf, n + 4);
}

/* The shard count of a checkpoint that is whole, 0 without one (store__shards_check()). */
static uint32_t
ckpt_shards(struct store *s)
{
	uint32_t n = 0;
	const uint8_t *p;
	char *buf;
	size_t len;

	if (store_io_read_file(s->io, s->ckpt_path, 4096, &buf, &len) != 0)
		return 0;
	p = (const uint8_t *)buf;
	if (len >= CKPT_HDR + 4 && wire_ld_le32(p) == CKPT_MAGIC &&
	    (wire_ld_le32(p + 4) == CKPT_VERSION || wire_ld_le32(p + 4) == 1) &&
	    len == CKPT_HDR +
			    (wire_ld_le32(p + 4) == 1 ? 24 : CKPT_PER_SHARD) *
				    (size_t)wire_ld_le32(p + 8) +
			    4 &&
	    wire_ld_le32(p + len - 4) == crc32_java(p, len - 4))
		n = wire_ld_le32(p + 8);
	free(buf);
	return n;
}

/* Return: 1 read (clean or not in *clean), 0 none or unusable, -errno. */
static int
ckpt_read(struct store *s, bool *clean, struct ckpt_shard *cs)
{
	char *buf;
	size_t len;
	const uint8_t *p;
	size_t per;
	int rc = store_io_read_file(s->io, s->ckpt_path, 4096, &buf, &len);

	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	p = (const uint8_t *)buf;
	per = len >= 8 && wire_ld_le32(p + 4) == 1 ? 24 : CKPT_PER_SHARD;
	if (len < CKPT_HDR + 4 || wire_ld_le32(p) != CKPT_MAGIC ||
	    (wire_ld_le32(p + 4) != CKPT_VERSION && wire_ld_le32(p + 4) != 1) ||
	    wire_ld_le32(p + 8) != s->cfg.shards ||
	    len != CKPT_HDR + per * (size_t)s->cfg.shards + 4 ||
	    wire_ld_le32(p + len - 4) != crc32_java(p, len - 4)) {
		log_warn(STORE_TAG,
			 "checkpoint %s unusable (damaged, or made for another shard count): "
			 "scanning the whole log",
			 s->ckpt_path);
		free(buf);
		return 0;
	}
	*clean = wire_ld_le32(p + 12) == 1;
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		const uint8_t *q = p + CKPT_HDR + per * i;

		cs[i].end = wire_ld_le64(q);
		cs[i].cq_safe = wire_ld_le64(q + 8);
		cs[i].indexed = wire_ld_le64(q + 16);
		cs[i].verified = per == 24 ? -1 : (int64_t)wire_ld_le64(q + 24);
	}
	free(buf);
	return 1;
}

/* ---- recovery ---- */

/* fdatasync every ConsumeQueue. Return: 0 or the first error. */
static int
flush_queues(struct store *s)
{
	int rc = 0;

	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL && rc == 0; q = q->lnext)
		rc = cq_flush(q->cq);
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

/*
 * The record at or after *@off below @end, BLANK fillers skipped; *@off is
 * left on it and the next one starts at *@off + the return value.
 * Return: record size with *@m, 0 at @end, -errno for a damaged log.
 */
static long
next_record(const struct clog *c, uint64_t *off, uint64_t end, struct wire_msg *m)
{
	while (*off < end) {
		const uint8_t *rec;
		uint64_t next;
		long r = clog_read(c, *off, &rec, &next);

		if (r == -ENODATA) {
			*off = next;
			continue;
		}
		/* A span recovery stepped over (damage with records after it): past it. */
		if (r < 0 && clog_lost_skip(c, *off) != *off) {
			*off = clog_lost_skip(c, *off);
			continue;
		}
		if (r < 0)
			return r;
		return wire_rec_decode(rec, (size_t)r, 0, m) == r ? r : -EBADMSG;
	}
	return 0;
}

/*
 * As next_record(), at store_open() only: damage recovery did not see (below
 * a clean checkpoint's checked end) is stepped over as recovery would have
 * (clog_step_over_late()), so one damaged record never stops the open.
 */
static long
next_record_open(struct clog *c, uint64_t *off, uint64_t end, struct wire_msg *m)
{
	for (;;) {
		long r = next_record(c, off, end, m);
		uint64_t next;

		if (r >= 0 || r == -ENOMEM || clog_step_over_late(c, *off, &next) != 0)
			return r;
		*off = next;
	}
}

static int64_t
unit_tag_hash(const struct wire_msg *m)
{
	const char *tags;
	size_t len;
	uint64_t fire;

	if (m->topic_len == sizeof(STORE_TIMER_TOPIC) - 1 &&
	    memcmp(m->topic, STORE_TIMER_TOPIC, m->topic_len) == 0)
		return wire_props_get_uint(m->props, m->props_len, STORE_TIMER_FIRE_PROP, &fire) &&
				       fire <= INT64_MAX
			       ? (int64_t)fire
			       : 0;
	if (m->topic_len == sizeof(STORE_TX_OP_TOPIC) - 1 &&
	    memcmp(m->topic, STORE_TX_OP_TOPIC, m->topic_len) == 0) {
		uint64_t v = 0;
		uint32_t i;

		for (i = 0; i < m->body_len && i < 19 && m->body[i] >= '0' && m->body[i] <= '9';
		     i++)
			v = v * 10 + (uint64_t)(m->body[i] - '0');
		return i > 0 && i == m->body_len ? (int64_t)v : -1;
	}
	if (!wire_props_get(m->props, m->props_len, "TAGS", &tags, &len))
		return 0;
	return wire_tag_hash(tags, len);
}

static bool
rec_is_dispatched(const struct wire_msg *m)
{
	int tx = m->sys_flag & WIRE_SYSFLAG_TX_MASK;

	return tx == WIRE_SYSFLAG_TX_NOT || tx == WIRE_SYSFLAG_TX_COMMIT;
}

/*
 * cq_append() of @u at @qoff, preparing files and draining the ring as
 * needed (startup, a slave's session). Return: 0, -errno, -EAGAIN when
 * neither helped (logged by the caller's error path).
 */
static int
queue_append(struct store_queue *q, uint64_t qoff, const struct cq_unit *u)
{
	int rc = -EAGAIN;

	/* A file and a drain settle any -EAGAIN: a few tries, never a spin under qlock. */
	for (int tries = 0; tries < 4 && rc == -EAGAIN; tries++) {
		rc = cq_append(q->cq, qoff, u);
		if (rc != -EAGAIN)
			break;
		(void)cq_wb_drain(q->cq); /* a full ring, or a queue start behind one */
		rc = cq_prepare_next(q->cq);
		if (rc == 0)
			rc = -EAGAIN;
	}
	return rc;
}

/*
 * The queue's offsets from its max up to @qoff are not in @c's log, whose
 * next record of the queue is at @phys: the log lost them (recovery blanked
 * their span, docs/store.md). Units of CQ_LOST_SIZE stand for them, so the
 * queue has no hole and reads answer not found. They point at the start of
 * the span this start found lost between the queue's last unit and @phys
 * (where readers find a BLANK), else just before @phys; either way in log
 * order. Return: 0 or -errno.
 */
static int
queue_fill_lost(struct store_queue *q, const struct clog *c, uint64_t qoff, int64_t phys,
		uint64_t *filled)
{
	const struct clog_recovery *rep = clog_recovery(c);
	struct cq_unit u = {.phys = phys - CQ_LOST_SIZE, .size = CQ_LOST_SIZE, .tag_hash = -1};
	uint64_t from = cq_max(q->cq);
	struct cq_unit prev;

	if (cq_get(q->cq, from - 1, &prev) != 0)
		return -EINVAL;
	for (uint32_t k = 0; k < rep->n_lost; k++) {
		int64_t lo = clog_phys(clog_shard(c), rep->lost[k].lo);

		if (lo > prev.phys && clog_phys(clog_shard(c), rep->lost[k].hi) <= phys)
			u.phys = lo;
	}

	for (uint64_t o = from; o < qoff; o++) {
		int rc = queue_append(q, o, &u);

		if (rc != 0)
			return rc;
	}
	*filled += qoff - from;
	log_warn(STORE_TAG,
		 "queue %s:%u: offsets %" PRIu64 "..%" PRIu64
		 " are not in the log (lost with a damaged or missing part of it): they read as "
		 "not found",
		 q->topic, q->qid, from, qoff - 1);
	return 0;
}

/*
 * Put the unit of record @m (at @phys, @size bytes) into its queue. With
 * @filled, a hole before it in the queue is the log's (it lost records)
 * and is filled with lost units (counted there); without, it means the
 * ConsumeQueue is damaged (-EUCLEAN, *@damaged set).
 */
static int
dispatch(struct store *s, uint32_t shard, const struct wire_msg *m, int64_t phys, uint32_t size,
	 uint64_t *filled, struct store_queue **damaged)
{
	struct cq_unit u = {.phys = phys, .size = size, .tag_hash = unit_tag_hash(m)};
	struct store_queue *q;
	int rc;

	if (!rec_is_dispatched(m) || m->queue_id < 0)
		return 0;
	rc = queue_get_locked(s, m->topic, m->topic_len, (uint32_t)m->queue_id, shard, &q);
	if (rc != 0)
		return rc == -EINVAL ? 0 : rc; /* a name no queue can have: skip */
	rc = queue_append(q, (uint64_t)m->queue_offset, &u);
	if (rc == -EINVAL && filled != NULL && cq_min(q->cq) < cq_max(q->cq) &&
	    (uint64_t)m->queue_offset > cq_max(q->cq)) {
		rc = queue_fill_lost(q, s->shard[shard].clog, (uint64_t)m->queue_offset, phys,
				     filled);
		if (rc == 0)
			rc = queue_append(q, (uint64_t)m->queue_offset, &u);
	}
	if (rc == -EEXIST) {
		log_err(STORE_TAG,
			"queue %.*s:%u offset %" PRId64 " disagrees with the log at %" PRId64,
			(int)m->topic_len, m->topic, m->queue_id, m->queue_offset, phys);
		return 0;
	}
	if (rc == -EINVAL) {
		log_err(STORE_TAG,
			"queue %.*s:%u: units missing before offset %" PRId64 " (log at %" PRId64
			"): rebuilding it",
			(int)m->topic_len, m->topic, m->queue_id, m->queue_offset, phys);
		*damaged = q;
		return -EUCLEAN;
	}
	return rc;
}

int
store__dispatch_span(struct store *s, uint32_t shard, uint64_t off, const uint8_t *data, size_t len)
{
	struct store_queue *damaged = NULL;
	uint64_t filled = 0; /* a hole in a queue: the master's log lost records */
	size_t pos = 0;
	int first = 0;

	pthread_mutex_lock(&s->qlock);
	while (pos < len) {
		struct wire_msg m;
		long r = wire_rec_decode(data + pos, len - pos, 0, &m);
		int rc;

		if (r <= 0)
			break; /* a BLANK ends the span; clog_append_raw() checked the rest */
		rc = dispatch(s, shard, &m, clog_phys(shard, off + pos), (uint32_t)r, &filled,
			      &damaged);
		if (rc != 0 && first == 0)
			first = rc;
		pos += (size_t)r;
	}
	pthread_mutex_unlock(&s->qlock);
	return first;
}

/*
 * Re-dispatch every record of @shard from local @from to the end. @fill: a
 * hole in a queue is the log's (dispatch()).
 */
static int
redispatch(struct store *s, uint32_t shard, uint64_t from, bool fill, struct store_queue **damaged)
{
	struct clog *c = s->shard[shard].clog;
	uint64_t end = clog_written(c);
	uint64_t off = SP_MAX(from, clog_min(c));
	struct wire_msg m;
	uint64_t n = 0;
	long r;

	while ((r = next_record_open(c, &off, end, &m)) > 0) {
		int rc = dispatch(s, shard, &m, clog_phys(shard, off), (uint32_t)r,
				  fill ? &s->shard[shard].cq_filled : NULL, damaged);

		if (rc != 0)
			return rc;
		off += (uint64_t)r;
		n++;
	}
	if (r < 0)
		return (int)r;
	log_info(STORE_TAG, "shard %u: re-dispatched %" PRIu64 " records from %" PRIu64, shard, n,
		 from);
	return 0;
}

static int
rm_rf(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (d == NULL)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		char p[PATH_MAX];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (rm_rf(p) != 0) {
			closedir(d);
			return -errno;
		}
	}
	closedir(d);
	return rmdir(path) == 0 ? 0 : -errno;
}

/* Open every ConsumeQueue on disk. Sets *rebuild when one had to be dropped. */
static int
open_queues(struct store *s, bool *rebuild)
{
	char base[2048 + 16];
	DIR *d;
	struct dirent *de;

	snprintf(base, sizeof(base), "%s", s->cq_dir);
	d = opendir(base);
	if (d == NULL)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		char tdir[2048 + 16 + 260];
		struct dirent *qe;
		DIR *td;

		if (de->d_name[0] == '.')
			continue;
		if (!wire_topic_name_ok(de->d_name, strlen(de->d_name))) {
			log_warn(STORE_TAG, "ignoring %s/%s: not a topic name", base, de->d_name);
			continue;
		}
		snprintf(tdir, sizeof(tdir), "%s/%s", base, de->d_name);
		td = opendir(tdir);
		if (td == NULL)
			continue;
		while ((qe = readdir(td)) != NULL) {
			struct store_queue *q;
			char *end;
			unsigned long qid;
			int rc;

			if (qe->d_name[0] == '.')
				continue;
			qid = strtoul(qe->d_name, &end, 10);
			if (*end != '\0' || qid > UINT32_MAX)
				continue;
			rc = queue_get_locked(s, de->d_name, strlen(de->d_name), (uint32_t)qid, 0,
					      &q);
			if (rc != 0) {
				char qdir[PATH_MAX + 512];

				snprintf(qdir, sizeof(qdir), "%s/%s", tdir, qe->d_name);
				log_err(STORE_TAG,
					"consume queue %s unusable (%s): rebuilding it from the "
					"log",
					qdir, strerror(-rc));
				if (rm_rf(qdir) != 0) {
					closedir(td);
					closedir(d);
					return -EIO;
				}
				*rebuild = true;
			}
		}
		closedir(td);
	}
	closedir(d);
	return 0;
}

/* Drop a damaged queue's files and start it empty (startup only). */
static int
queue_reset_locked(struct store *s, struct store_queue *q)
{
	char dir[PATH_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/%s/%u", s->cq_dir, q->topic, q->qid);
	cq_close(q->cq);
	q->cq = NULL;
	rc = rm_rf(dir);
	if (rc != 0)
		return rc;
	return cq_open(s->io, dir, queue_units(s, q->topic, q->topic_len), &q->cq);
}

/* Does the queue's first unit point at its own record? */
static bool
queue_head_ok(struct store *s, struct store_queue *q)
{
	uint64_t min = cq_min(q->cq);
	const uint8_t *rec;
	struct wire_msg m;
	struct cq_unit u;
	long r;

	if (cq_max(q->cq) == min)
		return true;
	if (cq_get(q->cq, min, &u) != 0 || clog_phys_shard(u.phys) >= s->cfg.shards)
		return false;
	if (u.size == CQ_LOST_SIZE)
		return true; /* a message recovery lost: nothing to compare */
	r = store_get_phys(s, u.phys, &rec);
	if (r == -ENOENT)
		return true;
	if (r <= 0 || (uint32_t)r != u.size || wire_rec_decode(rec, (size_t)r, 0, &m) != r ||
	    m.queue_offset != (int64_t)min || (uint32_t)m.queue_id != q->qid ||
	    m.topic_len != q->topic_len || memcmp(m.topic, q->topic, q->topic_len) != 0)
		return false;
	return true;
}

static int
open_abort_file(struct store *s, bool *existed)
{
	int fd = s->io->open(s->io->ctx, s->abort_path, O_RDWR | O_CREAT | O_EXCL, 0644);
	char dir[PATH_MAX];

	*existed = fd == -EEXIST;
	if (fd == -EEXIST)
		return 0;
	if (fd < 0)
		return fd;
	s->io->close(s->io->ctx, fd);
	snprintf(dir, sizeof(dir), "%s", s->root);
	return s->io->sync_dir(s->io->ctx, dir);
}

/*
 * No checkpoint, no abort file, and no shard holds a CommitLog file: a
 * store that never held a record (its recovery finds nothing to say).
 */
static bool
store_log_is_new(struct store *s, uint32_t shards)
{
	for (uint32_t i = 0; i < shards; i++) {
		char dir[PATH_MAX + 16];

		snprintf(dir, sizeof(dir), "%s/%u", s->clog_dir, i);
		if (store__dir_has_segment(dir, true))
			return false;
	}
	return true;
}

static void *flusher_main(void *arg);
static void *service_main(void *arg);
static void *prep_main(void *arg);
static void *indexer_main(void *arg);
static void *drainer_main(void *arg);

static void store_free(struct store *s);

static bool store_reader_sync(void *arg);
static unsigned bg_read_enter(struct store *s);
static void bg_read_exit(struct store *s, unsigned e);

/*
 * Write-behind buffer directories (docs/store.md). Each run makes its own,
 * mkdtemp(<buf_dir>/sprocket-XXXXXX): mode 0700, never one that existed,
 * so no other process or earlier store shares it. <root>/bufdir records
 * which one a run uses, written once recovery is done and before the first
 * append; the next run takes what its segment files lack from the recorded
 * one, then removes it. A buffer is so only ever read by the run right
 * after the one that wrote it, of the same store.
 */
static void
bufdirs_prepare(struct store *s)
{
	char *old = NULL;
	size_t len = 0;

	snprintf(s->bufdir_path, sizeof(s->bufdir_path), "%s/bufdir", s->root);
	if (store_io_read_file(s->io, s->bufdir_path, sizeof(s->buf_old) - 1, &old, &len) == 0) {
		while (len > 0 && (old[len - 1] == '\n' || old[len - 1] == '\0'))
			len--;
		memcpy(s->buf_old, old, len);
		s->buf_old[len] = '\0';
	}
	free(old);
	if (s->cfg.buf_dir == NULL || s->cfg.buf_dir[0] == '\0')
		return;
	/* Dead runs' directories nobody needs (this store's last one it recovers from). */
	store__bufdirs_reap(s->cfg.buf_dir, s->buf_old);
	if ((size_t)snprintf(s->buf_run, sizeof(s->buf_run), "%s/sprocket-XXXXXX",
			     s->cfg.buf_dir) >= sizeof(s->buf_run) ||
	    store_mkdirs(s->cfg.buf_dir) != 0 || mkdtemp(s->buf_run) == NULL) {
		log_err(STORE_TAG,
			"%s: no directory for write-behind buffers in %s (%s): anonymous memory; "
			"ASYNC_FLUSH appends are acknowledged only once written back",
			s->root, s->cfg.buf_dir, strerror(errno));
		s->buf_run[0] = '\0';
		return;
	}
	s->buf_lock_fd = store__bufdir_claim(s->buf_run, s->root);
	if (s->buf_lock_fd < 0)
		log_warn(STORE_TAG,
			 "%s: cannot write its owner record (%s): if this run dies, later starts "
			 "cannot tell and leave the directory to be removed by hand",
			 s->buf_run, strerror(-s->buf_lock_fd));
}

static int
bufdirs_commit(struct store *s)
{
	char line[sizeof(s->buf_run) + 1];
	int n = snprintf(line, sizeof(line), "%s\n", s->buf_run);
	int rc;

	if (strcmp(s->buf_run, s->buf_old) != 0) {
		rc = store_io_write_atomic(s->io, s->bufdir_path, line, (size_t)n);
		if (rc != 0) {
			log_err(STORE_TAG, "%s: %s", s->bufdir_path, strerror(-rc));
			return rc;
		}
	}
	if (s->buf_old[0] != '\0' && strcmp(s->buf_run, s->buf_old) != 0 &&
	    (rc = rm_rf(s->buf_old)) != 0)
		log_warn(STORE_TAG, "cannot remove %s: %s", s->buf_old, strerror(-rc));
	s->buf_old[0] = '\0';
	return 0;
}

int
store_repl_rec_id(struct store *s, uint32_t shard, uint64_t off, uint32_t *size, uint32_t *hash)
{
	unsigned e = bg_read_enter(s); /* a slave's session thread: not covered by reader_sync */
	int rc = clog_rec_id(s->shard[shard].clog, off, size, hash);

	bg_read_exit(s, e);
	return rc;
}

int
store_repl_last(struct store *s, uint32_t shard, uint64_t *off)
{
	unsigned e = bg_read_enter(s);
	int rc = clog_last_rec(s->shard[shard].clog, off);

	bg_read_exit(s, e);
	return rc;
}

/* Does @dir/0 hold a file (a CommitLog segment of shard 0)? */
static bool
has_segments(const char *dir)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/0", dir) >= (int)sizeof(path))
		return false;
	return store__dir_has_segment(path, true);
}

/*
 * storePathCommitLog names an empty directory while <root>/commitlog holds
 * segments: a store written before the key was honoured. Opening it would
 * start an empty log and cut every ConsumeQueue to it.
 */
static bool
clog_moved_away(const struct store *s)
{
	char def[PATH_MAX];

	snprintf(def, sizeof(def), "%s/commitlog", s->root);
	if (strcmp(def, s->clog_dir) == 0 || has_segments(s->clog_dir) || !has_segments(def))
		return false;
	log_err(STORE_TAG,
		"storePathCommitLog %s holds no segments but %s does (sprocket before this "
		"version kept the CommitLog there whatever the key said): move them to %s, or "
		"remove the key",
		s->clog_dir, def, s->clog_dir);
	return true;
}

/* @dst = @given, or <root>/@leaf. Return: true when it does not fit. */
static bool
path_set(char *dst, size_t cap, const char *given, const char *root, const char *leaf)
{
	int n = given != NULL && given[0] != '\0' ? snprintf(dst, cap, "%s", given)
						  : snprintf(dst, cap, "%s/%s", root, leaf);

	return n < 0 || (size_t)n >= cap;
}

/*
 * <root>/truncate: "shard offset" lines, one per shard to cut at the next
 * open (store_truncate_mark()). Return: 0 (@cut_at[i] -1 where none), -EBADMSG, -errno.
 */
static int
cut_marks_read(struct store *s, int64_t *cut_at)
{
	char *buf;
	size_t len;
	int rc;

	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++)
		cut_at[i] = -1;
	rc = store_io_read_file(s->io, s->cut_path, 1 << 16, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
		unsigned shard;
		unsigned long long off;

		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (nl == NULL)
			break;
		*nl = '\0';
		if (sscanf(line, "%u %llu", &shard, &off) != 2 || shard >= s->cfg.shards ||
		    off > (unsigned long long)INT64_MAX) {
			log_err(STORE_TAG, "%s: bad line '%s'", s->cut_path, line);
			free(buf);
			return -EBADMSG;
		}
		cut_at[shard] = (int64_t)off;
	}
	free(buf);
	return 0;
}

int
store_truncate_mark(struct store *s, uint32_t shard, uint64_t to)
{
	int64_t cut_at[STORE_SHARDS_MAX];
	char text[STORE_SHARDS_MAX * 32];
	size_t n = 0;
	int rc;

	if (shard >= s->cfg.shards)
		return -EINVAL;
	pthread_mutex_lock(&s->qlock);
	rc = cut_marks_read(s, cut_at);
	if (rc == 0) {
		cut_at[shard] = (int64_t)to;
		for (uint32_t i = 0; i < s->cfg.shards; i++)
			if (cut_at[i] >= 0)
				n += (size_t)snprintf(text + n, sizeof(text) - n,
						      "%u %" PRId64 "\n", i, cut_at[i]);
		rc = store_io_write_atomic(s->io, s->cut_path, text, n);
	}
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

/*
 * Count, per shard, the ConsumeQueue units that point into spans recovery
 * found lost (blanked or recreated blank), lost units written for them
 * included: messages read as not found. Startup, once the queues are whole.
 */
static void
recovery_count_lost(struct store *s)
{
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
		uint32_t sh = atomic_load_relaxed(&q->shard);
		const struct clog_recovery *rep;

		if (sh >= s->cfg.shards || cq_min(q->cq) == cq_max(q->cq))
			continue;
		rep = clog_recovery(s->shard[sh].clog);
		for (uint32_t k = 0; k < rep->n_lost; k++)
			s->shard[sh].cq_lost += cq_count_phys(q->cq, clog_phys(sh, rep->lost[k].lo),
							      clog_phys(sh, rep->lost[k].hi));
	}
	pthread_mutex_unlock(&s->qlock);
}

/* What recovery did to each shard's ConsumeQueues, at warning level (docs/store.md). */
static void
recovery_report(const struct store *s)
{
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		const struct store_shard *sh = &s->shard[i];
		uint64_t end = clog_written(sh->clog);

		/* Not rate-limited: one line each per shard and start, and each says what was lost. */
		if (sh->cq_cut > 0 && log_enabled(LOG_LVL_WARN))
			log_emit(LOG_LVL_WARN, STORE_TAG,
				 "shard %u: %" PRIu64
				 " ConsumeQueue units pointed past the log's end %" PRIu64
				 ": dropped (their records never became durable, were lost with "
				 "the log's tail, or were cut to a master's end)",
				 i, sh->cq_cut, end);
		if (sh->cq_lost > 0 && log_enabled(LOG_LVL_WARN))
			log_emit(LOG_LVL_WARN, STORE_TAG,
				 "shard %u: %" PRIu64
				 " messages are lost with the spans of the log "
				 "recovery blanked: their ConsumeQueue units point there (%" PRIu64
				 " of them written now, as lost units, where a queue lacked them "
				 "too); reads of them answer not found, pulls skip them",
				 i, sh->cq_lost, sh->cq_filled);
		else if (sh->cq_filled > 0 && log_enabled(LOG_LVL_WARN))
			log_emit(LOG_LVL_WARN, STORE_TAG,
				 "shard %u: %" PRIu64
				 " queue offsets missing from the log (lost with "
				 "a damaged or missing part of it) written as lost units; reads of "
				 "them answer not found, pulls skip them",
				 i, sh->cq_filled);
	}
}

int
store_recovery(const struct store *s, uint32_t shard, struct store_recovery *out)
{
	if (shard >= s->cfg.shards)
		return -EINVAL;
	out->clog = clog_recovery(s->shard[shard].clog);
	out->cq_cut = s->shard[shard].cq_cut;
	out->cq_lost = s->shard[shard].cq_lost;
	out->cq_filled = s->shard[shard].cq_filled;
	return 0;
}

int
store_open(const struct store_cfg *cfg, struct store **out)
{
	struct ckpt_shard ck[STORE_SHARDS_MAX] = {0};
	int64_t cut_at[STORE_SHARDS_MAX];
	bool crashed = false;
	bool clean = false;
	bool rebuild = false;
	struct store *s;
	int have_ckpt;
	int rc;

	if (cfg->shards == 0 || cfg->shards > STORE_SHARDS_MAX || cfg->root == NULL ||
	    cfg->cq_units == 0 || cfg->flush_interval_ms == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->cfg = *cfg;
	s->io = cfg->io ? cfg->io : &store_io_posix;
	s->lock_fd = -1;
	s->buf_lock_fd = -1;
	s->dmg = calloc(cfg->shards, sizeof(*s->dmg));
	if (s->dmg == NULL) {
		free(s);
		return -ENOMEM;
	}
	clk_init(); /* store times come from clk_wall_ms_fast() */
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->keep_mu, NULL);
	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++) {
		s->keep_floor[i] = cfg->keep_unconsumed ? 0 : UINT64_MAX;
		snprintf(s->keep_who[i], sizeof(s->keep_who[i]), "%s",
			 "the consumer groups (not known yet)");
	}
	if (snprintf(s->root, sizeof(s->root), "%s", cfg->root) >= (int)sizeof(s->root)) {
		rc = -ENAMETOOLONG;
		goto err_close;
	}
	s->cfg.root = s->root;
	if (path_set(s->abort_path, sizeof(s->abort_path), cfg->path_abort, s->root, "abort") ||
	    path_set(s->ckpt_path, sizeof(s->ckpt_path), cfg->path_checkpoint, s->root,
		     "checkpoint") ||
	    path_set(s->clog_dir, sizeof(s->clog_dir), cfg->path_commitlog, s->root, "commitlog") ||
	    path_set(s->cq_dir, sizeof(s->cq_dir), cfg->path_cq, s->root, "consumequeue") ||
	    path_set(s->idx_dir, sizeof(s->idx_dir), cfg->path_index, s->root, "index")) {
		rc = -ENAMETOOLONG;
		goto err_close;
	}
	snprintf(s->cut_path, sizeof(s->cut_path), "%s/truncate", s->root);
	rc = store_mkdirs(s->root);
	if (rc != 0)
		goto err_close;
	/* One process per store: nothing of it is read or written before this. */
	s->lock_fd = store__lock(s->root);
	if (s->lock_fd < 0) {
		rc = s->lock_fd;
		goto err_close;
	}
	rc = store__shards_check(s->root, s->clog_dir, ckpt_shards(s), cfg->shards);
	if (rc == 0 && clog_moved_away(s)) {
		rc = -EEXIST;
		goto err_close;
	}
	if (rc == 0)
		rc = store_mkdirs(s->clog_dir);
	if (rc == 0)
		rc = store_mkdirs(s->cq_dir);
	if (rc == 0)
		rc = store_mkdirs(s->idx_dir);
	if (rc != 0)
		goto err_close;

	rc = open_abort_file(s, &crashed);
	if (rc != 0)
		goto err_close;
	have_ckpt = ckpt_read(s, &clean, ck);
	if (have_ckpt < 0) {
		rc = have_ckpt;
		goto err_close;
	}
	if (!crashed && have_ckpt == 0 && store_log_is_new(s, cfg->shards)) {
		struct ckpt_shard zero[STORE_SHARDS_MAX] = {0};

		log_info(STORE_TAG, "%s: a new store", s->root);
		/*
		 * The shard count, before any segment: a first run killed before
		 * its last shard made one would otherwise read as fewer shards
		 * (store__shards_check()). All zeros recovers as no checkpoint.
		 */
		rc = ckpt_write(s, false, zero);
		if (rc != 0)
			goto err_close;
	} else if (crashed || !clean)
		log_warn(STORE_TAG, "%s: %s; recovering by scanning the log", s->root,
			 crashed ? "the last run did not shut down cleanly"
				 : "no clean checkpoint");

	pthread_mutex_lock(&s->qlock);
	rc = open_queues(s, &rebuild);
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	rc = cut_marks_read(s, cut_at);
	if (rc != 0)
		goto err_close;
	bufdirs_prepare(s);
	for (uint32_t i = 0; i < cfg->shards; i++) {
		char dir[PATH_MAX + 32];
		char bdir[PATH_MAX + 32];
		char odir[PATH_MAX + 32];
		struct clog_cfg cc = {
			.io = s->io,
			.dir = dir,
			.shard = i,
			.seg_size = cfg->seg_size,
			.sync_flush = cfg->sync_flush,
			.buf_dir = s->buf_run[0] != '\0' ? bdir : NULL,
			.buf_wanted = s->cfg.buf_dir != NULL && s->cfg.buf_dir[0] != '\0',
			.buf_window = cfg->buf_window,
			.old_buf_dir = s->buf_old[0] != '\0' ? odir : NULL,
			.cut = cut_at[i] >= 0,
			.cut_at = cut_at[i] >= 0 ? (uint64_t)cut_at[i] : 0,
			.no_warm = cfg->no_warm,
			.verified = have_ckpt == 1 ? ck[i].verified : 0,
		};
		bool trust = have_ckpt == 1 && clean && !crashed;

		snprintf(dir, sizeof(dir), "%s/%u", s->clog_dir, i);
		snprintf(bdir, sizeof(bdir), "%s/%u", s->buf_run, i);
		snprintf(odir, sizeof(odir), "%s/%u", s->buf_old, i);
		rc = clog_open(&cc, &s->shard[i].clog);
		if (rc != 0)
			goto err_close;
		rc = clog_recover(s->shard[i].clog, have_ckpt == 1 ? ck[i].cq_safe : 0,
				  trust ? (int64_t)ck[i].end : -1);
		if (rc == -ENOENT && clog_recovery(s->shard[i].clog)->empty_dir)
			log_err(STORE_TAG,
				"shard %u: %s holds no CommitLog segment but %s says its log "
				"reached %" PRIu64
				": if the log was moved, set storePathCommitLog to where its "
				"segments are; to start this shard with an empty log (its messages "
				"are lost), remove %s",
				i, dir, s->ckpt_path, SP_MAX(ck[i].end, ck[i].cq_safe),
				s->ckpt_path);
		if (rc == -EUCLEAN)
			log_err(STORE_TAG, "shard %u: the checkpoint file is %s", i, s->ckpt_path);
		if (rc != 0)
			goto err_close;
		snprintf(dir, sizeof(dir), "%s/%u", s->idx_dir, i);
		rc = idx_open(s->io, dir, cfg->idx_slots, cfg->idx_entries, &s->shard[i].idx);
		if (rc != 0)
			goto err_close;
		/* clog_recover() checked every record from the last verified mark to the end. */
		s->shard[i].verified = clog_written(s->shard[i].clog);
	}
	/* The last run's buffers are in the segment files, durable: this run's take over. */
	rc = bufdirs_commit(s);
	if (rc != 0)
		goto err_close;

	/* ConsumeQueue units past the end of their shard's log are gone. */
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL && rc == 0; q = q->lnext) {
		struct cq_unit u;
		uint64_t max = cq_max(q->cq);
		uint32_t sh;

		if (max == cq_min(q->cq) || cq_get(q->cq, max - 1, &u) != 0)
			continue;
		sh = clog_phys_shard(u.phys);
		if (sh >= cfg->shards) {
			rc = cq_truncate_phys(q->cq, 0);
			continue;
		}
		atomic_store_relaxed(&q->shard, sh);
		rc = cq_truncate_phys(q->cq, clog_phys(sh, clog_written(s->shard[sh].clog)));
		s->shard[sh].cq_cut += max - cq_max(q->cq);
		/* The minimum is not persisted: retention's cut comes from the log. */
		if (rc == 0)
			rc = cq_trim_phys(q->cq, clog_phys(sh, clog_min(s->shard[sh].clog)),
					  clk_wall_ms());
	}
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	/* Queues whose head is damaged are rebuilt from the whole log. */
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL && rc == 0; q = q->lnext) {
		if (queue_head_ok(s, q))
			continue;
		log_err(STORE_TAG, "consume queue %s:%u does not match the log: rebuilding it",
			q->topic, q->qid);
		rc = queue_reset_locked(s, q);
		rebuild = true;
	}
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	/*
	 * Every record still in the log has a queue offset >= its queue's
	 * min (retention trims queues to the log). One that does not means
	 * the queue lost its first files. Checking the first segment of each
	 * shard finds that, as a lost head lies at the log's start. And every
	 * record below the checkpoint's cq_safe has its unit: one whose queue
	 * ends before its offset means the queue lost its files (a deleted or
	 * emptied ConsumeQueue): rebuilt from the log too.
	 */
	pthread_mutex_lock(&s->qlock);
	for (uint32_t i = 0; i < cfg->shards && rc == 0 && !rebuild; i++) {
		struct clog *c = s->shard[i].clog;
		uint64_t off = clog_min(c);
		uint64_t stop = SP_MIN(clog_written(c), off + clog_seg_size(c));

		struct wire_msg m;
		long r;

		/* A BLANK skips to the next segment, which is past stop. */
		while (!rebuild && (r = next_record_open(c, &off, stop, &m)) > 0) {
			struct store_queue *q;

			off += (uint64_t)r;
			if (!rec_is_dispatched(&m) || m.queue_id < 0)
				continue;
			q = qmap_find(s, m.topic, m.topic_len, (uint32_t)m.queue_id);
			if (q != NULL && have_ckpt == 1 && off <= ck[i].cq_safe &&
			    (uint64_t)m.queue_offset >= cq_max(q->cq)) {
				log_err(STORE_TAG,
					"consume queue %s:%u ends at %" PRIu64
					" but the log holds its offset %" PRId64
					" below the checkpoint: its files were lost, rebuilding it",
					q->topic, q->qid, cq_max(q->cq), m.queue_offset);
				rc = queue_reset_locked(s, q);
				rebuild = true;
				continue;
			}
			if (q == NULL || (uint64_t)m.queue_offset >= cq_min(q->cq))
				continue;
			log_err(STORE_TAG,
				"consume queue %s:%u starts at %" PRIu64
				" but the log holds its offset %" PRId64 ": rebuilding it",
				q->topic, q->qid, cq_min(q->cq), m.queue_offset);
			rc = queue_reset_locked(s, q);
			rebuild = true;
		}
	}
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	/* Re-dispatch what the ConsumeQueues may lack; a gap means a full rebuild. */
	for (uint32_t i = 0; i < cfg->shards; i++) {
		const struct clog_recovery *rep = clog_recovery(s->shard[i].clog);
		struct store_queue *damaged = NULL;
		uint64_t from = UINT64_MAX;

		if (rebuild || have_ckpt != 1)
			from = 0;
		else if (crashed || !clean)
			from = ck[i].cq_safe;
		/* Where recovery scanned (short, missing or damaged segments): from there. */
		from = SP_MIN(from, rep->scan_from);
		if (from == UINT64_MAX)
			continue;
		pthread_mutex_lock(&s->qlock);
		/* A hole in a queue is the log's where it lost spans, or once rebuilding from it. */
		rc = redispatch(s, i, from, rebuild || rep->n_lost > 0, &damaged);
		if (rc == -EUCLEAN && !rebuild) {
			rc = queue_reset_locked(s, damaged);
			rebuild = true;
			i = UINT32_MAX; /* start over from the beginning of every shard */
		}
		pthread_mutex_unlock(&s->qlock);
		if (rc != 0) {
			log_err(STORE_TAG, "shard %u: re-dispatch failed: %s", i, strerror(-rc));
			goto err_close;
		}
	}

	recovery_count_lost(s);
	recovery_report(s);

	/* The indexer resumes after the newest indexed record. */
	for (uint32_t i = 0; i < cfg->shards; i++) {
		int64_t last = idx_last_phys(s->shard[i].idx);
		struct clog *c = s->shard[i].clog;

		atomic_store_relaxed(&s->shard[i].idx_pos, clog_min(c));
		if (last >= 0 && clog_phys_shard(last) == i) {
			const uint8_t *rec;
			uint64_t next;

			if (clog_read(c, clog_phys_local(last), &rec, &next) > 0)
				atomic_store_relaxed(&s->shard[i].idx_pos, next);
		}
		/* Past the end only after a cut (replication): resume at the cut, not from the start. */
		if (have_ckpt == 1 && ck[i].indexed > atomic_load_relaxed(&s->shard[i].idx_pos))
			atomic_store_relaxed(&s->shard[i].idx_pos,
					     SP_MIN(ck[i].indexed, clog_written(c)));
		/* Not inside a span recovery blanked: no record starts there any more. */
		for (uint32_t k = 0; k < clog_recovery(c)->n_lost; k++) {
			const struct clog_span *sp = &clog_recovery(c)->lost[k];
			uint64_t pos = atomic_load_relaxed(&s->shard[i].idx_pos);

			if (pos > sp->lo && pos < sp->hi)
				atomic_store_relaxed(&s->shard[i].idx_pos, sp->hi);
		}
	}

	{
		struct ckpt_shard now[STORE_SHARDS_MAX];

		for (uint32_t i = 0; i < cfg->shards; i++) {
			now[i].end = clog_written(s->shard[i].clog);
			now[i].cq_safe = now[i].end;
			now[i].indexed = atomic_load_relaxed(&s->shard[i].idx_pos);
			now[i].verified = (int64_t)s->shard[i].verified;
		}
		/* All CQ units so far must be durable before cq_safe says so. */
		rc = flush_queues(s);
		if (rc == 0)
			rc = ckpt_write(s, false, now);
		if (rc != 0)
			goto err_close;
	}

	for (uint32_t i = 0; i < cfg->shards; i++)
		if (cfg->reader_sync != NULL)
			clog_set_reader_sync(s->shard[i].clog, store_reader_sync, s);

	if (cfg->threads) {
		for (uint32_t i = 0; i < cfg->shards; i++) {
			s->shard[i].s = s;
			s->shard[i].id = i;
			if (pthread_create(&s->shard[i].flusher, NULL, flusher_main,
					   &s->shard[i]) != 0) {
				rc = -EAGAIN;
				goto err_close;
			}
			s->shard[i].flusher_started = true;
		}
		if (pthread_create(&s->service, NULL, service_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->service_started = true;
		if (pthread_create(&s->prep, NULL, prep_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->prep_started = true;
		if (pthread_create(&s->indexer, NULL, indexer_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->indexer_started = true;
		if (pthread_create(&s->drainer, NULL, drainer_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->drainer_started = true;
	}
	/* The cuts are done and the checkpoint says so: the marks go. */
	rc = s->io->unlink(s->io->ctx, s->cut_path);
	if (rc != 0 && rc != -ENOENT)
		log_warn(STORE_TAG, "%s: cannot remove: %s", s->cut_path, strerror(-rc));
	rc = 0;
	log_info(STORE_TAG, "%s: %u shards, %s, %zu queues", s->root, cfg->shards,
		 cfg->sync_flush ? "SYNC_FLUSH" : "ASYNC_FLUSH", s->n_queues);
	*out = s;
	return 0;

err_close:
	/* Leave the abort file: the next start must recover again. */
	store_free(s);
	return rc;
}

static void
store_stop_threads(struct store *s)
{
	atomic_store_release(&s->stop, true);
	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++) {
		if (s->shard[i].flusher_started)
			pthread_join(s->shard[i].flusher, NULL);
		s->shard[i].flusher_started = false;
	}
	if (s->service_started)
		pthread_join(s->service, NULL);
	if (s->prep_started)
		pthread_join(s->prep, NULL);
	s->prep_started = false;
	if (s->indexer_started)
		pthread_join(s->indexer, NULL);
	if (s->drainer_started)
		pthread_join(s->drainer, NULL);
	s->drainer_started = false;
	s->service_started = false;
	s->indexer_started = false;
}

static void
store_free(struct store *s)
{
	store_stop_threads(s);
	while (s->queues != NULL) {
		struct store_queue *q = s->queues;

		s->queues = q->lnext;
		cq_close(q->cq);
		free(q);
	}
	while (s->retired != NULL) {
		struct store_queue *q = s->retired;

		s->retired = q->lnext;
		cq_close(q->cq);
		free(q);
	}
	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++) {
		clog_close(s->shard[i].clog);
		idx_close(s->shard[i].idx);
	}
	/* Empty once the clogs let go; kept while a buffer is left for recovery. */
	if (s->buf_lock_fd >= 0)
		store__bufdir_release(s->buf_run, s->buf_lock_fd);
	else if (s->buf_run[0] != '\0')
		(void)rmdir(s->buf_run);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->keep_mu);
	/* Last: the next process may take the store once every file here is let go. */
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->dmg);
	free(s);
}

int
store_close(struct store *s)
{
	struct ckpt_shard ck[STORE_SHARDS_MAX];
	int rc;

	if (s == NULL)
		return 0;
	store_stop_threads(s);
	while (store_index_round(s) > 0)
		;
	rc = store_flush_all(s);
	if (rc == 0)
		rc = flush_queues(s);
	for (uint32_t i = 0; i < s->cfg.shards && rc == 0; i++) {
		rc = idx_flush(s->shard[i].idx);
		ck[i].end = clog_flushed(s->shard[i].clog);
		ck[i].cq_safe = ck[i].end;
		ck[i].indexed = atomic_load_relaxed(&s->shard[i].idx_pos);
		ck[i].verified = (int64_t)s->shard[i].verified;
	}
	if (rc == 0)
		rc = ckpt_write(s, true, ck);
	if (rc == 0)
		rc = s->io->unlink(s->io->ctx, s->abort_path);
	if (rc != 0)
		log_err(STORE_TAG, "%s: unclean shutdown (%s): the next start recovers by scanning",
			s->root, strerror(-rc));
	else
		log_info(STORE_TAG, "%s: closed cleanly", s->root);
	store_free(s);
	return rc;
}

/* ---- dataplane operations ---- */

long
store_put(struct store *s, struct store_queue *q, struct wire_msg *m, struct store_put_res *res)
{
	uint32_t shard = atomic_load_relaxed(&q->shard);
	struct clog *c = s->shard[shard].clog;
	bool dispatched = rec_is_dispatched(m);
	uint64_t ticket;
	long n;

	/* relaxed: a write refused one request late, or taken one late, is harmless */
	if (atomic_load_relaxed(&s->disk_full) && !atomic_load_relaxed(&q->full_ok))
		return -ENOSPC;
	if (dispatched && !cq_can_append(q->cq)) {
		if (cq_ring_full(q->cq))
			atomic_add_relaxed(&s->shard[shard].busy_ring, 1);
		else
			atomic_add_relaxed(&s->shard[shard].busy_cq, 1);
		return -EAGAIN;
	}
	m->topic = q->topic;
	m->topic_len = q->topic_len;
	m->queue_id = (int32_t)q->qid;
	m->queue_offset = dispatched ? (int64_t)cq_max(q->cq) : 0;
	m->store_ts = clk_wall_ms_fast();
	m->store_host = s->cfg.store_host;
	n = clog_append(c, m, &ticket);
	if (n == -EAGAIN)
		atomic_add_relaxed(&s->shard[shard].busy_clog, 1);
	if (n < 0)
		return n;
	if (dispatched) {
		struct cq_unit u = {
			.phys = m->phys_offset, .size = (uint32_t)n, .tag_hash = unit_tag_hash(m)};

		/* Checked by cq_can_append(); a failure here is a bug, counted. */
		if (cq_append(q->cq, (uint64_t)m->queue_offset, &u) != 0)
			atomic_add_relaxed(&q->cq_errors, 1);
	}
	clog_commit(c);
	res->phys = m->phys_offset;
	res->qoff = m->queue_offset;
	res->ticket = ticket;
	res->shard = shard;
	res->size = (uint32_t)n;
	return n;
}

int
store_durable(const struct store *s, uint32_t shard, uint64_t ticket)
{
	struct clog *c = s->shard[shard].clog;
	int err = clog_err(c);

	/*
	 * ASYNC_FLUSH: durable in the write-behind buffer, unless that buffer
	 * was to be a file (storeBufferDir) and is anonymous memory now: then
	 * once written back to the segment file (clog_bufs_degraded(); the
	 * flusher writes back every 1 ms meanwhile).
	 */
	if (!s->cfg.sync_flush) {
		if (!clog_bufs_degraded(c) || clog_written_back(c) >= ticket)
			return 1;
		return err != 0 ? err : 0;
	}
	if (clog_flushed(c) >= ticket)
		return 1;
	return err != 0 ? err : 0;
}

int
store_ack_state(const struct store *s, uint32_t shard, uint64_t ticket, uint64_t put_ns,
		uint64_t now_ns)
{
	int d = store_durable(s, shard, ticket);

	if (d != 0)
		return d;
	if (now_ns - put_ns >= (uint64_t)s->cfg.sync_timeout_ms * 1000000)
		return -ETIMEDOUT;
	return 0;
}

/*
 * A read for delivery met damage at local @off of @shard: a span recovery
 * stepped over is a lost message (-ENOENT, counted at open), anything else
 * is counted here for the service thread to log (store_dmg_report()): no
 * formatting on the reader's thread, which may be a dataplane core.
 */
static long
store_bad_read(const struct store *s, uint32_t shard, uint64_t off)
{
	struct store_dmg *d = &s->dmg[shard];

	if (clog_lost_skip(s->shard[shard].clog, off) != off)
		return -ENOENT;
	atomic_store_relaxed(&d->last_bad, off);
	/* relaxed: a statistic; the service thread reads it after last_bad, both relaxed */
	atomic_add_relaxed(&d->bad_reads, 1);
	return -EBADMSG;
}

uint64_t
store_scan_past(const struct store *s, uint32_t shard, uint64_t off)
{
	const struct clog *c = s->shard[shard].clog;
	uint64_t seg = clog_seg_size(c);

	if (store_bad_read(s, shard, off) == -ENOENT)
		return clog_lost_skip(c, off);
	return (off / seg + 1) * seg;
}

long
store_get_phys(const struct store *s, int64_t phys, const uint8_t **rec)
{
	uint32_t shard = clog_phys_shard(phys);
	uint64_t next;
	long r;

	if (phys < 0 || shard >= s->cfg.shards)
		return -ERANGE;
	r = clog_read_checked(s->shard[shard].clog, clog_phys_local(phys), rec, &next);
	/* A BLANK where a message was: recovery blanked its span (docs/store.md). */
	if (r == -ENODATA)
		return -ENOENT;
	if (r >= 0 || r == -ERANGE || r == -ENOENT)
		return r;
	return store_bad_read(s, shard, clog_phys_local(phys));
}

uint64_t
store_queue_min(const struct store *s, const struct store_queue *q)
{
	(void)s;
	return cq_min(q->cq);
}

uint64_t
store_queue_max(const struct store *s, const struct store_queue *q)
{
	uint64_t min = cq_min(q->cq);
	uint64_t max = cq_max(q->cq);
	struct cq_unit u;

	if (!s->cfg.sync_flush)
		return max;
	/* Only units whose record is durable (RocketMQ #8239): few are not. */
	while (max > min && cq_get(q->cq, max - 1, &u) == 0) {
		struct clog *c = s->shard[clog_phys_shard(u.phys) % s->cfg.shards].clog;

		if (clog_phys_local(u.phys) + u.size <= clog_flushed(c))
			break;
		max--;
	}
	return max;
}

/*
 * A visible unit points at a record written before it was (the owner appends,
 * then publishes the unit): one that points past the readable end of its log
 * is damaged, not early. Without this the reader took it for a record not
 * written yet, and the queue stalled behind it for good.
 */
static bool
unit_past_log(const struct store *s, const struct cq_unit *u)
{
	uint32_t shard = clog_phys_shard(u->phys);
	const struct clog *c;
	uint64_t vis;

	if (u->phys < 0 || shard >= s->cfg.shards)
		return true;
	c = s->shard[shard].clog;
	vis = s->cfg.sync_flush ? clog_flushed(c) : clog_written(c);
	return clog_phys_local(u->phys) >= clog_min(c) && clog_phys_local(u->phys) + u->size > vis;
}

/*
 * The record a unit points at is that queue's message at that offset: its
 * QUEUEID, QUEUEOFFSET and topic are the queue's. A unit copied from another
 * queue, or a record whose topic was damaged (the body's CRC does not cover
 * it), is not delivered on the wrong queue.
 */
static bool
unit_names(const struct store_queue *q, uint64_t qoff, const uint8_t *rec, size_t len)
{
	struct wire_msg m;

	return wire_rec_decode(rec, len, 0, &m) == (long)len && m.queue_id >= 0 &&
	       (uint32_t)m.queue_id == q->qid && m.queue_offset >= 0 &&
	       (uint64_t)m.queue_offset == qoff && m.topic_len == q->topic_len &&
	       memcmp(m.topic, q->topic, q->topic_len) == 0;
}

long
store_get(const struct store *s, const struct store_queue *q, uint64_t qoff, const uint8_t **rec,
	  struct cq_unit *unit)
{
	long r;

	if (qoff >= store_queue_max(s, q))
		return -ERANGE;
	r = cq_get(q->cq, qoff, unit);
	if (r != 0)
		return r;
	if (unit->size == CQ_LOST_SIZE)
		return -ENOENT;
	r = store_get_phys(s, unit->phys, rec);
	if (r == -ERANGE && unit_past_log(s, unit))
		return store_bad_read(s, clog_phys_shard(unit->phys), clog_phys_local(unit->phys));
	if (r > 0 && ((uint32_t)r != unit->size || !unit_names(q, qoff, *rec, (size_t)r)))
		return store_bad_read(s, clog_phys_shard(unit->phys), clog_phys_local(unit->phys));
	return r;
}

int
store_busy(const struct store *s, uint32_t shard, struct store_busy_counts *out)
{
	if (shard >= s->cfg.shards)
		return -EINVAL;
	out->cq_file = atomic_load_relaxed(&s->shard[shard].busy_cq);
	out->cq_ring = atomic_load_relaxed(&s->shard[shard].busy_ring);
	out->clog = atomic_load_relaxed(&s->shard[shard].busy_clog);
	return 0;
}

int
store_damage(const struct store *s, uint32_t shard, struct store_damage *out)
{
	const struct clog_recovery *rep;

	if (shard >= s->cfg.shards)
		return -EINVAL;
	rep = clog_recovery(s->shard[shard].clog);
	out->bad_reads = atomic_load_relaxed(&s->dmg[shard].bad_reads);
	out->last_bad = atomic_load_relaxed(&s->dmg[shard].last_bad);
	out->spans = rep->spans_blanked + rep->spans_stepped;
	out->lost = s->shard[shard].cq_lost;
	out->verified = s->shard[shard].verified;
	return 0;
}

/*
 * The service thread says what readers met since its last report: one line
 * per damaged range (a new segment), rate-limited; further reads of the
 * same range are only counted.
 */
static void
store_dmg_report(struct store *s)
{
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		struct store_dmg *d = &s->dmg[i];
		uint64_t n = atomic_load_relaxed(&d->bad_reads);
		uint64_t off;
		uint64_t seg;

		if (n == d->logged_reads)
			continue;
		off = atomic_load_relaxed(&d->last_bad);
		seg = off - off % s->cfg.seg_size;
		if (!d->logged_any || seg != d->logged_seg)
			log_warn_ratelimited(
				STORE_TAG,
				"shard %u: a damaged record at %" PRIu64 " in segment %020" PRIu64
				" (body CRC, header or size wrong): skipped as lost; "
				"%" PRIu64 " such reads so far (sprocket-broker --verify lists "
				"every damaged range)",
				i, off, seg, n);
		d->logged_any = true;
		d->logged_seg = seg;
		d->logged_reads = n;
	}
}

struct time_ctx {
	const struct store *s;
};

/*
 * The store time of the first record at or after global @phys, BLANKs and
 * spans recovery blanked skipped: what a lost message's time is taken to be.
 */
static int
lost_unit_time(const struct store *s, int64_t phys, int64_t *out)
{
	uint32_t shard = clog_phys_shard(phys);
	const struct clog *c;
	struct wire_msg m;
	uint64_t off;
	long r;

	if (shard >= s->cfg.shards)
		return -ERANGE;
	c = s->shard[shard].clog;
	off = clog_phys_local(phys);
	/* Inside a blanked span: the log goes on at the next segment. */
	if (clog_read(c, off, &(const uint8_t *){NULL}, &(uint64_t){0}) == -ENOENT)
		off += clog_seg_size(c) - off % clog_seg_size(c);
	r = next_record(c, &off, s->cfg.sync_flush ? clog_flushed(c) : clog_written(c), &m);
	if (r <= 0)
		return r == 0 ? -ERANGE : (int)r;
	*out = m.store_ts;
	return 0;
}

static int
unit_store_time(void *ctx, const struct cq_unit *u, int64_t *out)
{
	const struct time_ctx *t = ctx;
	const uint8_t *rec;
	struct wire_msg m;
	long r;

	/*
	 * A lost message: the time of the next one the log kept (keeps the
	 * search monotonic). A lost unit points at its span's BLANK, or just
	 * before that next one.
	 */
	if (u->size == CQ_LOST_SIZE) {
		r = store_get_phys(t->s, u->phys + CQ_LOST_SIZE, &rec);
		if (r > 0 && wire_rec_decode(rec, (size_t)r, 0, &m) == r) {
			*out = m.store_ts;
			return 0;
		}
		return lost_unit_time(t->s, u->phys, out);
	}
	r = store_get_phys(t->s, u->phys, &rec);
	if (r == -ENOENT)
		return lost_unit_time(t->s, u->phys, out);
	if (r < 0)
		return (int)r;
	if (wire_rec_decode(rec, (size_t)r, 0, &m) != r)
		return -EBADMSG;
	*out = m.store_ts;
	return 0;
}

int
store_search_time(const struct store *s, const struct store_queue *q, int64_t ms, uint64_t *qoff)
{
	struct time_ctx t = {.s = s};

	return cq_search(q->cq, ms, unit_store_time, &t, qoff);
}

int
store_queue_time(const struct store *s, const struct store_queue *q, uint64_t qoff, int64_t *ms)
{
	struct time_ctx t = {.s = s};
	struct cq_unit u;
	int rc;

	if (qoff < cq_min(q->cq) || qoff >= store_queue_max(s, q))
		return -ENOENT;
	rc = cq_get(q->cq, qoff, &u);
	if (rc != 0)
		return rc;
	return unit_store_time(&t, &u, ms);
}

int
store_earliest_time(const struct store *s, const struct store_queue *q, int64_t *ms)
{
	return store_queue_time(s, q, cq_min(q->cq), ms);
}

/* ---- key index ---- */

static bool
rec_has_key(const struct wire_msg *m, const char *key, size_t klen)
{
	const char *v;
	size_t vlen;

	if (wire_props_get(m->props, m->props_len, "UNIQ_KEY", &v, &vlen) && vlen == klen &&
	    memcmp(v, key, klen) == 0)
		return true;
	if (!wire_props_get(m->props, m->props_len, "KEYS", &v, &vlen))
		return false;
	for (size_t i = 0; i < vlen;) {
		size_t j = i;

		while (j < vlen && v[j] != ' ')
			j++;
		if (j - i == klen && memcmp(v + i, key, klen) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

long
store_query_key(struct store *s, const char *topic, const char *key, int64_t begin_ms,
		int64_t end_ms, int64_t *phys, size_t max)
{
	char full[WIRE_TOPIC_MAX + 2 + 1024 + 8];
	size_t tlen = strlen(topic);
	size_t klen = strlen(key);
	size_t found = 0;
	int64_t cand[64];

	long rc = 0;
	unsigned e;

	if (tlen == 0 || tlen > WIRE_TOPIC_MAX || klen == 0 || klen > 1024)
		return -EINVAL;
	snprintf(full, sizeof(full), "%s#%s", topic, key);
	e = bg_read_enter(s); /* any thread: not one the reader_sync hook covers */
	for (uint32_t i = 0; i < s->cfg.shards && found < max; i++) {
		long n = idx_query(s->shard[i].idx, full, tlen + 1 + klen, begin_ms, end_ms, cand,
				   ARRAY_SIZE(cand));

		if (n < 0) {
			rc = n;
			break;
		}
		for (long k = 0; k < n && found < max; k++) {
			const uint8_t *rec;
			struct wire_msg m;
			long r = store_get_phys(s, cand[k], &rec);

			if (r <= 0 || wire_rec_decode(rec, (size_t)r, 0, &m) != r)
				continue;
			if (m.topic_len != tlen || memcmp(m.topic, topic, tlen) != 0 ||
			    !rec_has_key(&m, key, klen))
				continue;
			phys[found++] = cand[k];
		}
	}
	bg_read_exit(s, e);
	return rc < 0 ? rc : (long)found;
}

long
store_copy_phys(struct store *s, int64_t phys, uint8_t *buf, size_t cap)
{
	const uint8_t *rec;
	unsigned e = bg_read_enter(s); /* any thread: as store_query_key() */
	long n = store_get_phys(s, phys, &rec);

	if (n > 0 && (size_t)n <= cap)
		memcpy(buf, rec, (size_t)n);
	bg_read_exit(s, e);
	return n;
}

static int
index_record(struct idx *x, const struct wire_msg *m, int64_t phys)
{
	char key[WIRE_TOPIC_MAX + 1 + WIRE_PROPS_MAX];
	const char *v;
	size_t vlen;
	int rc;

	memcpy(key, m->topic, m->topic_len);
	key[m->topic_len] = '#';
	if (wire_props_get(m->props, m->props_len, "UNIQ_KEY", &v, &vlen) && vlen > 0) {
		memcpy(key + m->topic_len + 1, v, vlen);
		rc = idx_put(x, key, m->topic_len + 1 + vlen, phys, m->store_ts);
		if (rc != 0)
			return rc;
	}
	if (!wire_props_get(m->props, m->props_len, "KEYS", &v, &vlen))
		return 0;
	for (size_t i = 0; i < vlen;) {
		size_t j = i;

		while (j < vlen && v[j] != ' ')
			j++;
		if (j > i) {
			memcpy(key + m->topic_len + 1, v + i, j - i);
			rc = idx_put(x, key, m->topic_len + 1 + (j - i), phys, m->store_ts);
			if (rc != 0)
				return rc;
		}
		i = j + 1;
	}
	return 0;
}

long
store_index_round(struct store *s)
{
	long done = 0;

	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		struct store_shard *sh = &s->shard[i];
		uint64_t end = s->cfg.sync_flush ? clog_flushed(sh->clog) : clog_written(sh->clog);
		uint64_t pos = atomic_load_relaxed(&sh->idx_pos);

		if (pos < clog_min(sh->clog))
			pos = clog_min(sh->clog);
		struct wire_msg m;
		long r = 0;

		while (done < 4096 && (r = next_record(sh->clog, &pos, end, &m)) > 0) {
			if ((m.sys_flag & WIRE_SYSFLAG_TX_MASK) != WIRE_SYSFLAG_TX_ROLLBACK) {
				int rc = index_record(sh->idx, &m, clog_phys(i, pos));

				if (rc != 0) {
					atomic_store_relaxed(&sh->idx_pos, pos);
					return rc;
				}
			}
			pos += (uint64_t)r;
			done++;
		}
		atomic_store_relaxed(&sh->idx_pos, pos);
		if (r < 0)
			return r;
	}
	return done;
}

/* ---- background threads ---- */

int
store_flush_all(struct store *s)
{
	int first = 0;

	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		int rc = clog_flush(s->shard[i].clog);

		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}

/*
 * Used space as RocketMQ computes it ((total - free) / total, Java's
 * File.getFreeSpace() counting blocks reserved for root as free). Counting
 * them as used (f_bavail) read 76% on a disk df showed 37% full, and the
 * store then deleted segments holding acknowledged messages.
 */
static double
disk_used_ratio(const char *path)
{
	struct statvfs v;

	if (statvfs(path, &v) != 0 || v.f_blocks == 0)
		return 0;
	return 1.0 - (double)v.f_bfree / (double)v.f_blocks;
}

void
store_set_keep(struct store *s, uint32_t shard, uint64_t floor, const char *who)
{
	if (shard >= s->cfg.shards)
		return;
	pthread_mutex_lock(&s->keep_mu);
	s->keep_floor[shard] = floor;
	snprintf(s->keep_who[shard], sizeof(s->keep_who[shard]), "%s", who ? who : "");
	pthread_mutex_unlock(&s->keep_mu);
}

bool
store_disk_full(const struct store *s, char *why, size_t why_len)
{
	bool full = atomic_load_relaxed(&s->disk_full) != 0;

	if (full && why_len) {
		pthread_mutex_lock((pthread_mutex_t *)&s->keep_mu);
		snprintf(why, why_len, "%s", s->disk_full_why);
		pthread_mutex_unlock((pthread_mutex_t *)&s->keep_mu);
	}
	return full;
}

uint64_t
store_unread_deleted(const struct store *s)
{
	return atomic_load_relaxed(&s->unread_deleted);
}

/* Writes refused for disk space from now (@why), or taken again (@why NULL). Service thread. */
static void
disk_full_set(struct store *s, const char *why)
{
	bool was = atomic_load_relaxed(&s->disk_full) != 0;

	if (why == NULL) {
		if (was) {
			atomic_store_relaxed(&s->disk_full, 0);
			log_info(STORE_TAG, "disk space: writes are taken again");
		}
		return;
	}
	pthread_mutex_lock(&s->keep_mu);
	if (!was || strcmp(s->disk_full_why, why) != 0) {
		snprintf(s->disk_full_why, sizeof(s->disk_full_why), "%s", why);
		log_err(STORE_TAG, "writes refused: %s", why);
	}
	pthread_mutex_unlock(&s->keep_mu);
	atomic_store_relaxed(&s->disk_full, 1);
}

/*
 * Retention, with RocketMQ's keys and their meaning: segments older than
 * fileReservedTime go at deleteWhen, or at any hour while the disk is fuller
 * than diskMaxUsedSpaceRatio; above diskSpaceCleanForciblyRatio (with
 * cleanFileForciblyEnable) the oldest goes whatever its age; above
 * diskSpaceWarningLevelRatio writes are refused. What sprocket adds: a
 * forced deletion never takes messages a consumer group has not read
 * (store_set_keep()); the store refuses writes instead, saying which group,
 * unless deleteUnconsumedWhenDiskFull, and then it says what it took.
 */
int
store_retain(struct store *s, int64_t now_ms)
{
	int64_t keep_ms = (int64_t)s->cfg.file_reserved_hours * 3600 * 1000;
	double used = disk_used_ratio(s->clog_dir) * 100.0;
	bool spacefull = used > (double)s->cfg.disk_max_used_ratio;
	bool clean_now = s->cfg.clean_forcibly && used > (double)s->cfg.disk_clean_ratio;
	char why[384] = "";
	time_t now = (time_t)(now_ms / 1000);
	struct tm tm;
	bool due;

	localtime_r(&now, &tm);
	due = tm.tm_hour == s->cfg.delete_when_hour || spacefull;
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		uint64_t min, before = clog_min(s->shard[i].clog), floor;
		char who[sizeof(s->keep_who[0])];
		bool blocked = false;
		long n;
		int64_t min_phys;
		int rc;

		pthread_mutex_lock(&s->keep_mu);
		floor = s->keep_floor[i];
		snprintf(who, sizeof(who), "%s", s->keep_who[i]);
		pthread_mutex_unlock(&s->keep_mu);
		/* Called even when nothing is due: it also frees mappings past their grace. */
		n = clog_trim(s->shard[i].clog, due ? now_ms - keep_ms : INT64_MIN, clean_now,
			      now_ms, s->cfg.delete_unconsumed ? UINT64_MAX : floor, &blocked,
			      &min);
		if (blocked && why[0] == '\0')
			snprintf(why, sizeof(why),
				 "the disk is %.0f%% full (diskSpaceCleanForciblyRatio %u%%) and "
				 "the "
				 "oldest segment of shard %u holds messages not read yet by %s; "
				 "consume "
				 "them, free space, or set deleteUnconsumedWhenDiskFull=true",
				 used, s->cfg.disk_clean_ratio, i, who);
		if (n > 0 && clean_now && s->cfg.delete_unconsumed && min > floor && before < min) {
			atomic_add_relaxed(&s->unread_deleted, 1);
			log_err(STORE_TAG,
				"shard %u: disk %.0f%% full (diskSpaceCleanForciblyRatio %u%%): "
				"deleted log offsets %" PRIu64 "..%" PRIu64
				" with messages not read yet by %s (deleteUnconsumedWhenDiskFull)",
				i, used, s->cfg.disk_clean_ratio, before, min, who);
		}
		if (n < 0)
			continue;
		min_phys = clog_phys(i, min);
		pthread_mutex_lock(&s->qlock);
		for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
			if (atomic_load_relaxed(&q->shard) != i)
				continue;
			rc = cq_trim_phys(q->cq, min_phys, now_ms);
			if (rc != 0)
				log_err(STORE_TAG, "queue %s:%u: trim failed: %s", q->topic, q->qid,
					strerror(-rc));
		}
		pthread_mutex_unlock(&s->qlock);
		rc = idx_trim_phys(s->shard[i].idx, min_phys);
		if (rc != 0)
			log_err(STORE_TAG, "shard %u: index trim failed: %s", i, strerror(-rc));
	}
	if (used > (double)s->cfg.disk_warn_ratio && s->cfg.disk_warn_ratio > 0)
		snprintf(why, sizeof(why),
			 "the disk is %.0f%% full, above diskSpaceWarningLevelRatio %u%%", used,
			 s->cfg.disk_warn_ratio);
	disk_full_set(s, why[0] ? why : NULL);
	return 0;
}

uint64_t
store_drain_queues(struct store *s)
{
	uint64_t n = 0;

	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL; q = q->lnext)
		n += cq_wb_drain(q->cq);
	pthread_mutex_unlock(&s->qlock);
	return n;
}

/*
 * Prepare the next ConsumeQueue file of every queue that wants one, and
 * without the store's threads (tests) copy every queue's write-behind ring
 * into its files first (drainer_main() does it otherwise). Service thread
 * only. Return: 0 or the first error (the queue keeps refusing appends with
 * -EAGAIN and is retried on the next call).
 */
static int
store_prep_queues_rc(struct store *s)
{
	int first = 0;

	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
		if (!s->cfg.threads)
			(void)cq_wb_drain(q->cq);
		if (cq_wants_next(q->cq)) {
			int rc = cq_prepare_next(q->cq);

			s->svc_worked = true;
			if (rc != 0 && first == 0)
				first = rc;
		}
	}
	pthread_mutex_unlock(&s->qlock);
	return first;
}

/*
 * The CommitLog's write-behind windows and next segments (clog_prepare_next()):
 * on their own thread when the store runs its threads, so that ConsumeQueue
 * files (store_service()) never wait behind a segment's zero-fill or
 * fdatasync. Return: the first error; *@worked: something was prepared.
 */
static int
store_prepare_logs(struct store *s, bool *worked)
{
	int first = 0;

	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		if (clog_wants_next(s->shard[i].clog)) {
			int rc = clog_prepare_next(s->shard[i].clog);

			*worked = true;
			if (rc != 0 && first == 0)
				first = rc;
		}
	}
	return first;
}

int
store_service(struct store *s, int64_t now_ms)
{
	int first = 0;
	int rc;

	s->svc_worked = false;
	store_dmg_report(s);
	/* Queues first: a ConsumeQueue file is small and a fast queue fills one in 0.6 s. */
	rc = store_prep_queues_rc(s);
	if (rc != 0 && first == 0)
		first = rc;
	if (!s->cfg.threads) { /* else prep_main() does */
		rc = store_prepare_logs(s, &s->svc_worked);
		if (rc != 0 && first == 0)
			first = rc;
	}

	if (!s->pass_active && now_ms - s->last_flush_ms >= (int64_t)s->cfg.flush_interval_ms) {
		s->last_flush_ms = now_ms;
		/* Read before the CQ flush: every unit below these is in it (see DESIGN). */
		for (uint32_t i = 0; i < s->cfg.shards; i++) {
			s->pass_ck[i].end = 0;
			s->pass_ck[i].cq_safe = clog_flushed(s->shard[i].clog);
			s->pass_ck[i].indexed = atomic_load_relaxed(&s->shard[i].idx_pos);
			s->pass_ck[i].verified = (int64_t)s->shard[i].verified;
		}
		pthread_mutex_lock(&s->qlock);
		s->pass_next = s->queues;
		pthread_mutex_unlock(&s->qlock);
		s->pass_active = true;
	}
	if (s->pass_active) {
		/*
		 * One slice: about 2 ms of fdatasyncs, then back to preparing
		 * files. Queues created after the pass began are skipped: their
		 * units all lie above the checkpoint values read at its start.
		 * Queues are never freed while the store is open.
		 */
		uint64_t t0 = clk_mono_ns();
		unsigned k = 0;

		s->svc_worked = true;
		rc = 0;
		pthread_mutex_lock(&s->qlock);
		while (s->pass_next != NULL && rc == 0) {
			rc = cq_flush(s->pass_next->cq);
			s->pass_next = s->pass_next->lnext;
			if (++k % 16 == 0 && clk_mono_ns() - t0 > 2000000)
				break;
		}
		pthread_mutex_unlock(&s->qlock);
		if (rc == 0 && s->pass_next == NULL) {
			s->pass_active = false;
			rc = ckpt_write(s, false, s->pass_ck);
		}
		if (rc != 0) {
			s->pass_active = false;
			log_err_ratelimited(STORE_TAG, "checkpoint: %s", strerror(-rc));
			if (first == 0)
				first = rc;
		}
	}
	if (now_ms - s->last_resync_ms >= 1000) {
		s->last_resync_ms = now_ms;
		clk_wall_resync();
	}
	if (now_ms - s->last_retention_ms >= 10000) {
		s->last_retention_ms = now_ms;
		rc = store_retain(s, now_ms);
		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}

static void
sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static void *
flusher_main(void *arg)
{
	struct store_shard *sh = arg;
	struct store *s = sh->s;
	uint64_t last = clk_mono_ns();
	uint64_t last_wb = last;
	uint32_t fail_us = 0; /* SYNC_FLUSH: the pause after a failed flush */
	char name[16];

	snprintf(name, sizeof(name), "st-flush-%u", sh->id);
	pthread_setname_np(pthread_self(), name);

	/*
	 * The default 50 us timer slack would stretch the 20 us group-commit
	 * poll to ~70 us: every SYNC_FLUSH ack would wait for it.
	 */
	(void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	while (!atomic_load_acquire(&s->stop)) {
		struct clog *c = sh->clog;
		uint64_t now = clk_mono_ns();
		bool pending = clog_written(c) > clog_flushed(c) || clog_err(c) != 0;
		/*
		 * Write back within 1 ms while the buffer dies with the process,
		 * within STORE_WB_FILE_MS while it is a file that outlives it:
		 * every wake-up takes its CPU from whatever else runs there
		 * (docs/store.md, "Write-behind buffers that outlive the process").
		 */
		uint64_t wb_ns =
			clog_bufs_outlive_crash(c) ? STORE_WB_FILE_MS * 1000000ull : 1000000ull;

		if (s->cfg.sync_flush) {
			/*
			 * Group commit: sync as soon as anything is written; appends
			 * that land during the fdatasync ride the next one. After a
			 * sync, give the CPU away once (a zero-length sleep) so the
			 * appenders it released can refill the batch: on a 2-vCPU
			 * box this doubled messages per sync at 64 outstanding. A
			 * longer pause (20 us) only added latency.
			 */
			if (pending) {
				if (clog_flush(c) != 0) {
					/* a failing disk: retry, backing off from 10 ms to 1 s */
					fail_us = fail_us ? SP_MIN(fail_us * 2, 1000000u) : 10000u;
					sleep_us((long)fail_us);
				} else {
					fail_us = 0;
					sleep_us(0);
				}
			} else {
				sleep_us(20);
			}
			continue;
		}
		if (pending && now - last >= (uint64_t)s->cfg.flush_interval_ms * 1000000) {
			(void)!clog_flush(c);
			last = last_wb = now;
		} else if (pending && now - last_wb >= wb_ns) {
			/* Between syncs, keep the files close behind the appends. */
			(void)!clog_write_back(c);
			last_wb = now;
		}
		/* A flush interval under the write-back period is kept too. */
		sleep_us(
			(long)(SP_MIN(wb_ns, (uint64_t)s->cfg.flush_interval_ms * 1000000) / 1000));
	}
	return NULL;
}

/*
 * Rounds come every SVC_BUSY_US while they find work (a file to prepare, a
 * flush pass in slices) and back off, doubling, to SVC_IDLE_US while they
 * find none. Every wake-up takes its CPU from whatever runs there, and on a
 * small host that is the control thread or a client of the dataplane: at a
 * steady 1,000 a second they were 1% of that CPU and a visible step in the
 * p99 of a closed-loop client beside the broker (docs/benchmarks.md). The
 * slack left when a round finds work: a ConsumeQueue file's next one is
 * asked for at 3/4 full (a quarter of a file, 75,000 units at the default
 * size), a segment's next one as soon as it opens; a queue that needs a file
 * every few ms keeps the rounds at SVC_BUSY_US.
 */
#define SVC_BUSY_US 1000
#define SVC_IDLE_US 10000

static void *
service_main(void *arg)
{
	struct store *s = arg;
	long us = SVC_BUSY_US;
	pthread_setname_np(pthread_self(), "st-service");

	while (!atomic_load_acquire(&s->stop)) {
		(void)!store_service(s, clk_wall_ms());
		us = s->svc_worked ? SVC_BUSY_US : SP_MIN(us * 2, SVC_IDLE_US);
		sleep_us(us);
	}
	return NULL;
}

/*
 * A drainer round that copied more than this many units of one queue's
 * write-behind ring counts as work: rounds then stay SVC_BUSY_US apart.
 * Below it they back off, so a ring is about a sixteenth full when the
 * next round comes, and a queue's rate may grow sixteenfold before its
 * ring fills.
 */
#define DRAIN_BUSY_UNITS (CQ_WB_UNITS / 16)

/*
 * The drainer's nice value. It needs little CPU (a copy of 20 bytes per
 * unit) but needs it soon: on a host whose control CPUs are busy (a small
 * machine, a client spinning beside the broker), a drainer of default
 * priority waited several ms for its turn, often, and the ring of a queue
 * taking 600 k msg/s (8,192 units: 13 ms) filled. Raising a thread's
 * priority needs CAP_SYS_NICE (root, or systemd's AmbientCapabilities); without
 * it the drainer runs at the default and says so once.
 */
#define DRAIN_NICE (-10)

static void
drainer_priority(void)
{
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), DRAIN_NICE) != 0)
		log_info(STORE_TAG,
			 "ConsumeQueue drainer at default priority (nice %d needs CAP_SYS_NICE: "
			 "%s); a busy control CPU may fill write-behind rings",
			 DRAIN_NICE, strerror(errno));
}

/*
 * Copies the ConsumeQueues' write-behind rings into their files, on a
 * thread of its own that waits for no I/O and takes no registry lock, so a
 * service round stuck in an fdatasync or a retention pass does not fill
 * the rings (docs/store.md, "Page faults on the core"). Rounds come every
 * SVC_BUSY_US while a ring fills fast, backing off to SVC_IDLE_US.
 */
static void *
drainer_main(void *arg)
{
	struct store *s = arg;
	long us = SVC_BUSY_US;

	pthread_setname_np(pthread_self(), "st-cq-drain");
	drainer_priority();
	while (!atomic_load_acquire(&s->stop)) {
		uint64_t most = 0;

		/* acquire: pairs with release in queue_get_locked(): the queue is set up */
		for (struct store_queue *q = atomic_load_acquire(&s->drain_head); q != NULL;
		     q = q->dnext) {
			uint64_t n = cq_wb_drain(q->cq);

			most = SP_MAX(most, n);
		}
		us = most > DRAIN_BUSY_UNITS ? SVC_BUSY_US : SP_MIN(us * 2, SVC_IDLE_US);
		sleep_us(us);
	}
	return NULL;
}

/* Rounds as the service's: every SVC_BUSY_US while they find work, backing off to SVC_IDLE_US. */
static void *
prep_main(void *arg)
{
	struct store *s = arg;
	long us = SVC_BUSY_US;
	pthread_setname_np(pthread_self(), "st-prep");

	while (!atomic_load_acquire(&s->stop)) {
		bool worked = false;
		int rc = store_prepare_logs(s, &worked);

		if (rc != 0)
			log_err_ratelimited(STORE_TAG, "preparing CommitLog files: %s",
					    strerror(-rc));
		us = worked ? SVC_BUSY_US : SP_MIN(us * 2, SVC_IDLE_US);
		sleep_us(us);
	}
	return NULL;
}

/*
 * Readers of records on threads the reader_sync hook does not cover: the
 * indexer, and store_query_key() on the broker's remoting thread. Each
 * counts itself in one of two counters, chosen by the epoch's low bit, and
 * bg_read_sync() waits for both to drain, flipping the epoch before each
 * wait so that new readers go to the other counter: a stream of readers
 * never keeps it waiting (SRCU's scheme). A reader loads buffer pointers
 * only after its count and a full fence, so one that bg_read_sync() did not
 * see counted sees the buffer retired.
 */
static unsigned
bg_read_enter(struct store *s)
{
	unsigned e = (unsigned)(atomic_load_relaxed(&s->bg_epoch) & 1);

	atomic_fetch_add(&s->bg_readers[e], 1);
	atomic_thread_fence(memory_order_seq_cst);
	return e;
}

static void
bg_read_exit(struct store *s, unsigned e)
{
	/* release: the reads of records are done before the count drops */
	atomic_fetch_sub_explicit(&s->bg_readers[e], 1, memory_order_release);
}

/*
 * Waits up to BG_READ_WAIT_NS per counter. Return: true when both drained,
 * false when a reader stayed in longer (an indexer round can include an
 * index file's fdatasync): the caller then does without the buffer.
 */
#define BG_READ_WAIT_NS 2000000ull

static bool
bg_read_sync(struct store *s)
{
	/* Pairs with the fence in bg_read_enter(): the retirement is before this. */
	atomic_thread_fence(memory_order_seq_cst);
	for (int flip = 0; flip < 2; flip++) {
		unsigned old = (unsigned)(atomic_fetch_add(&s->bg_epoch, 1) & 1);
		uint64_t t0 = clk_mono_ns();

		while (atomic_load_acquire(&s->bg_readers[old]) != 0) {
			if (clk_mono_ns() - t0 > BG_READ_WAIT_NS)
				return false;
			sleep_us(50);
		}
	}
	return true;
}

/* clog_set_reader_sync() callback: the caller's readers, then the store's own. */
static bool
store_reader_sync(void *arg)
{
	struct store *s = arg;

	s->cfg.reader_sync(s->cfg.reader_sync_arg);
	return bg_read_sync(s);
}

static void *
indexer_main(void *arg)
{
	struct store *s = arg;
	uint32_t idle_us = 5000;

	pthread_setname_np(pthread_self(), "st-index");
	while (!atomic_load_acquire(&s->stop)) {
		unsigned e = bg_read_enter(s);
		long n = store_index_round(s);

		bg_read_exit(s, e);

		/* an error that repeats (ENOSPC, EIO) backs off to a second between tries */
		if (n < 0) {
			log_err_ratelimited(STORE_TAG, "indexer: %s (retrying every %u ms)",
					    strerror((int)-n), idle_us / 1000);
			idle_us = idle_us < 1000000 ? idle_us * 2 : 1000000;
		} else if (n > 0) {
			idle_us = 5000;
		}
		if (n <= 0)
			sleep_us(n < 0 ? idle_us : 5000);
	}
	return NULL;
}
