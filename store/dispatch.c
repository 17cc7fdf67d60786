// SPDX-License-Identifier: Apache-2.0
/*
 * dispatch.c - dispatch and crash recovery (store_int.h): records put into
 * their ConsumeQueues, the queues opened and checked at start, the scan from
 * the checkpoint's cq_safe, lost and damaged units counted and reported, the
 * abort file, cut marks and write-behind buffer dirs that open() needs.
 *
 * Recovery leans on two facts. Records carry their queue offset, so
 * re-dispatching a record into its ConsumeQueue is idempotent (cq_append
 * of an existing unit is a no-op). And store_put() appends the ConsumeQueue
 * unit before clog_commit() publishes the record, so every record below a
 * flushed offset F read before a ConsumeQueue flush has its unit in that
 * flush: F is the checkpoint's "cq_safe", where a crash recovery starts
 * scanning. Everything before it is trusted, everything after it is
 * verified record by record and re-dispatched.
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
#include "store_int.h"

/* ---- recovery ---- */

/* fdatasync every ConsumeQueue. Return: 0 or the first error. */
int
store__flush_queues(struct store *s)
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
long
store__next_record(const struct clog *c, uint64_t *off, uint64_t end, struct wire_msg *m)
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
 * As store__next_record(), at store_open() only: damage recovery did not see (below
 * a clean checkpoint's checked end) is stepped over as recovery would have
 * (clog_step_over_late()), so one damaged record never stops the open.
 */
long
store__next_record_open(struct clog *c, uint64_t *off, uint64_t end, struct wire_msg *m)
{
	for (;;) {
		long r = store__next_record(c, off, end, m);
		uint64_t next;

		if (r >= 0 || r == -ENOMEM || clog_step_over_late(c, *off, &next) != 0)
			return r;
		*off = next;
	}
}

int64_t
store__unit_tag_hash(const struct wire_msg *m)
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

bool
store__rec_is_dispatched(const struct wire_msg *m)
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
queue_append(struct store *s, struct store_queue *q, uint64_t qoff, const struct cq_unit *u)
{
	int rc = -EAGAIN;

	/*
	 * A file and a drain settle any -EAGAIN: a few tries, never a spin
	 * under qlock (a queue start takes one file per try while the file it
	 * follows lags behind max: cq_append()).
	 */
	for (int tries = 0; tries < 8 && rc == -EAGAIN; tries++) {
		rc = cq_append(q->cq, qoff, u);
		if (rc != -EAGAIN)
			break;
		(void)cq_wb_drain(q->cq); /* a full ring, or a queue start behind one */
		rc = cq_prepare_next(q->cq);
		if (rc == 0)
			rc = -EAGAIN;
	}
	if (rc == 0)
		store__queue_wake(s, q); /* its files made, ring drained, flushed */
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
queue_fill_lost(struct store *s, struct store_queue *q, const struct clog *c, uint64_t qoff,
		int64_t phys, uint64_t *filled)
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
		int rc = queue_append(s, q, o, &u);

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
int
store__dispatch(struct store *s, uint32_t shard, const struct wire_msg *m, int64_t phys,
		uint32_t size, uint64_t *filled, struct store_queue **damaged)
{
	struct cq_unit u = {.phys = phys, .size = size, .tag_hash = store__unit_tag_hash(m)};
	struct store_queue *q;
	int rc;

	if (!store__rec_is_dispatched(m) || m->queue_id < 0)
		return 0;
	rc = store__queue_get_locked(s, m->topic, m->topic_len, (uint32_t)m->queue_id, shard, &q);
	if (rc != 0)
		return rc == -EINVAL ? 0 : rc; /* a name no queue can have: skip */
	rc = queue_append(s, q, (uint64_t)m->queue_offset, &u);
	if (rc == -EINVAL && filled != NULL && cq_min(q->cq) < cq_max(q->cq) &&
	    (uint64_t)m->queue_offset > cq_max(q->cq)) {
		rc = queue_fill_lost(s, q, s->shard[shard].clog, (uint64_t)m->queue_offset, phys,
				     filled);
		if (rc == 0)
			rc = queue_append(s, q, (uint64_t)m->queue_offset, &u);
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
		rc = store__dispatch(s, shard, &m, clog_phys(shard, off + pos), (uint32_t)r,
				     &filled, &damaged);
		if (rc != 0 && first == 0)
			first = rc;
		pos += (size_t)r;
	}
	pthread_mutex_unlock(&s->qlock);
	return first;
}

/*
 * Re-store__dispatch every record of @shard from local @from to the end. @fill: a
 * hole in a queue is the log's (store__dispatch()).
 */
int
store__redispatch(struct store *s, uint32_t shard, uint64_t from, bool fill,
		  struct store_queue **damaged)
{
	struct clog *c = s->shard[shard].clog;
	uint64_t end = clog_written(c);
	uint64_t off = SP_MAX(from, clog_min(c));
	struct wire_msg m;
	uint64_t n = 0;
	long r;

	while ((r = store__next_record_open(c, &off, end, &m)) > 0) {
		int rc = store__dispatch(s, shard, &m, clog_phys(shard, off), (uint32_t)r,
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

int
store__rm_rf(const char *path)
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
		if (store__rm_rf(p) != 0) {
			closedir(d);
			return -errno;
		}
	}
	closedir(d);
	return rmdir(path) == 0 ? 0 : -errno;
}

/* Open every ConsumeQueue on disk. Sets *rebuild when one had to be dropped. */
int
store__open_queues(struct store *s, bool *rebuild)
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
			rc = store__queue_get_locked(s, de->d_name, strlen(de->d_name),
						     (uint32_t)qid, 0, &q);
			if (rc != 0) {
				char qdir[PATH_MAX + 512];

				snprintf(qdir, sizeof(qdir), "%s/%s", tdir, qe->d_name);
				log_err(STORE_TAG,
					"consume queue %s unusable (%s): rebuilding it from the "
					"log",
					qdir, strerror(-rc));
				if (store__rm_rf(qdir) != 0) {
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
int
store__queue_reset_locked(struct store *s, struct store_queue *q)
{
	char dir[PATH_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/%s/%u", s->cq_dir, q->topic, q->qid);
	cq_close(q->cq);
	q->cq = NULL;
	rc = store__rm_rf(dir);
	if (rc != 0)
		return rc;
	return cq_open(s->io, dir, store__queue_units(s, q->topic, q->topic_len), &q->cq);
}

/* Does the queue's first unit point at its own record? */
bool
store__queue_head_ok(struct store *s, struct store_queue *q)
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

int
store__open_abort_file(struct store *s, bool *existed)
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
bool
store__log_is_new(struct store *s, uint32_t shards)
{
	for (uint32_t i = 0; i < shards; i++) {
		char dir[PATH_MAX + 16];

		snprintf(dir, sizeof(dir), "%s/%u", s->clog_dir, i);
		if (store__dir_has_segment(dir, true))
			return false;
	}
	return true;
}

/*
 * Write-behind buffer directories (docs/store.md). Each run makes its own,
 * mkdtemp(<buf_dir>/sprocket-XXXXXX): mode 0700, never one that existed,
 * so no other process or earlier store shares it. <root>/bufdir records
 * which one a run uses, written once recovery is done and before the first
 * append; the next run takes what its segment files lack from the recorded
 * one, then removes it. A buffer is so only ever read by the run right
 * after the one that wrote it, of the same store.
 */
void
store__bufdirs_prepare(struct store *s)
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

int
store__bufdirs_commit(struct store *s)
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
	    (rc = store__rm_rf(s->buf_old)) != 0)
		log_warn(STORE_TAG, "cannot remove %s: %s", s->buf_old, strerror(-rc));
	s->buf_old[0] = '\0';
	return 0;
}

int
store_repl_rec_id(struct store *s, uint32_t shard, uint64_t off, uint32_t *size, uint32_t *hash)
{
	unsigned e =
		store__bg_read_enter(s); /* a slave's session thread: not covered by reader_sync */
	int rc = clog_rec_id(s->shard[shard].clog, off, size, hash);

	store__bg_read_exit(s, e);
	return rc;
}

int
store_repl_last(struct store *s, uint32_t shard, uint64_t *off)
{
	unsigned e = store__bg_read_enter(s);
	int rc = clog_last_rec(s->shard[shard].clog, off);

	store__bg_read_exit(s, e);
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
bool
store__clog_moved_away(const struct store *s)
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
bool
store__path_set(char *dst, size_t cap, const char *given, const char *root, const char *leaf)
{
	int n = given != NULL && given[0] != '\0' ? snprintf(dst, cap, "%s", given)
						  : snprintf(dst, cap, "%s/%s", root, leaf);

	return n < 0 || (size_t)n >= cap;
}

/*
 * <root>/truncate: "shard offset" lines, one per shard to cut at the next
 * open (store_truncate_mark()). Return: 0 (@cut_at[i] -1 where none), -EBADMSG, -errno.
 */
int
store__cut_marks_read(struct store *s, int64_t *cut_at)
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
	rc = store__cut_marks_read(s, cut_at);
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
void
store__recovery_count_lost(struct store *s)
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
void
store__recovery_report(const struct store *s)
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
