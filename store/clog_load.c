// SPDX-License-Identifier: Apache-2.0
/*
 * clog_load.c - a CommitLog shard's segments at open: list them, map them,
 * extend one that is short, recreate one missing between others blank,
 * remove a half-created last one (clog_open(), clog_recover.c's DESIGN).
 * What is lost is said here and recorded for clog_recovery().
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/log.h"
#include "store/clog.h"

#include "clog_priv.h"
#include "store_priv.h"

/*
 * A short last segment is removed only when it never held a record: empty,
 * or zero where the first record would start (a preparation a crash cut
 * short). Any other short one is extended, and recovery scans it.
 */
static bool
clog_seg_never_used(struct clog *c, uint64_t start)
{
	char path[PATH_MAX];
	uint8_t head[8] = {0};
	uint64_t size = 0;
	bool empty;
	int fd;

	snprintf(path, sizeof(path), "%s/%020" PRIu64, c->dir, start);
	fd = c->io->open(c->io->ctx, path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	if (c->io->size(c->io->ctx, fd, &size) != 0) {
		c->io->close(c->io->ctx, fd);
		return false;
	}
	empty = size < sizeof(head) || (store_io_read_all(c->io, fd, head, sizeof(head), 0) == 0 &&
					memcmp(head, (uint8_t[8]){0}, sizeof(head)) == 0);
	c->io->close(c->io->ctx, fd);
	return empty;
}

/*
 * The buffer files a crashed run left in old_buf_dir (20-digit names: the
 * local offset of their first byte), sorted. Return: a malloc'd array, or
 * NULL with *@n 0 (none, or no directory).
 */
static uint64_t *
clog_old_bufs_list(struct clog *c, size_t *n)
{
	uint64_t *v = NULL;
	size_t len = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*n = 0;
	if (c->old_buf_dir == NULL || (d = opendir(c->old_buf_dir)) == NULL)
		return NULL;
	while ((de = readdir(d)) != NULL) {
		char *end;
		unsigned long long x;

		if (strlen(de->d_name) != 20)
			continue;
		errno = 0;
		x = strtoull(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0')
			continue;
		if (store__u64_push(&v, &len, &cap, x) != 0)
			break; /* recovery goes on without the rest */
	}
	closedir(d);
	if (len > 0)
		qsort(v, len, sizeof(*v), store__u64_cmp);
	*n = len;
	return v;
}

/* A span whose records are lost, for clog_recovery() (merged with the last when they touch). */
int
clog__lost_insert(struct clog *c, uint32_t at, uint64_t lo, uint64_t hi)
{
	struct clog_recovery *rep = &c->rep;

	if (rep->n_lost == c->lost_cap) {
		uint32_t cap = c->lost_cap ? c->lost_cap * 2 : 8;
		struct clog_span *v = realloc(c->lost, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		c->lost = v;
		c->lost_cap = cap;
	}
	memmove(&c->lost[at + 1], &c->lost[at], (rep->n_lost - at) * sizeof(c->lost[0]));
	c->lost[at] = (struct clog_span){.lo = lo, .hi = hi};
	rep->n_lost++;
	rep->lost = c->lost;
	return 0;
}

int
clog__lost_add(struct clog *c, uint64_t lo, uint64_t hi)
{
	struct clog_recovery *rep = &c->rep;

	if (rep->n_lost > 0 && c->lost[rep->n_lost - 1].hi == lo) {
		c->lost[rep->n_lost - 1].hi = hi;
		return 0;
	}
	return clog__lost_insert(c, rep->n_lost, lo, hi);
}

static void
clog_suspect(struct clog *c, uint64_t start)
{
	c->suspect_from = SP_MIN(c->suspect_from, start);
}

/*
 * Map the segment file at @start. One shorter than the segment size is
 * extended with zeros when @extend (else -EINVAL); one longer is -EFBIG.
 * *@had: the file's size before.
 */
static int
clog_seg_load(struct clog *c, uint64_t start, bool extend, struct clog_seg **out, uint64_t *had)
{
	struct clog_seg *s = clog__seg_new(c, start);
	uint64_t size;
	struct stat st;
	int rc;

	if (s == NULL)
		return -ENOMEM;
	rc = c->io->open(c->io->ctx, s->path, O_RDWR, 0);
	if (rc < 0)
		goto err_free;
	s->fd = rc;
	rc = c->io->size(c->io->ctx, s->fd, &size);
	if (rc != 0)
		goto err_free;
	*had = size;
	if (size > c->seg_size) {
		rc = -EFBIG;
		goto err_free;
	}
	if (size < c->seg_size) {
		rc = -EINVAL;
		if (!extend)
			goto err_free;
		/* Reserved, not sparse: it may become the segment appends go to. */
		rc = c->io->allocate(c->io->ctx, s->fd, c->seg_size);
		if (rc == 0)
			rc = c->io->fdatasync(c->io->ctx, s->fd);
		if (rc != 0)
			goto err_free;
	}
	rc = c->io->map(c->io->ctx, s->fd, c->seg_size, (void **)&s->map);
	if (rc != 0)
		goto err_free;
	/* Age for retention: the file's mtime until the owner seals it again. */
	if (stat(s->path, &st) == 0)
		atomic_store_relaxed(&s->last_ms, (int64_t)st.st_mtime * 1000);
	*out = s;
	return 0;

err_free:
	clog__seg_free(c, s);
	return rc;
}

/*
 * A missing segment recreated blank: a BLANK filling it from its first
 * byte, sparse (nothing is ever appended to it), durable.
 */
static int
clog_seg_blank(struct clog *c, uint64_t start, struct clog_seg **out)
{
	struct clog_seg *s = clog__seg_new(c, start);
	uint8_t blank[WIRE_BLANK_LEN];
	struct stat st;
	int rc;

	if (s == NULL)
		return -ENOMEM;
	(void)!wire_rec_encode_blank((uint32_t)c->seg_size, blank, sizeof(blank));
	rc = c->io->open(c->io->ctx, s->path, O_RDWR | O_CREAT | O_EXCL, 0644);
	if (rc < 0)
		goto err_free;
	s->fd = rc;
	rc = c->io->truncate(c->io->ctx, s->fd, c->seg_size);
	if (rc == 0)
		rc = store_io_write_all(c->io, s->fd, blank, sizeof(blank), 0);
	if (rc == 0)
		rc = c->io->fdatasync(c->io->ctx, s->fd);
	if (rc == 0)
		rc = c->io->map(c->io->ctx, s->fd, c->seg_size, (void **)&s->map);
	if (rc != 0) {
		(void)c->io->unlink(c->io->ctx, s->path);
		goto err_free;
	}
	if (stat(s->path, &st) == 0)
		atomic_store_relaxed(&s->last_ms, (int64_t)st.st_mtime * 1000);
	s->recreated = true;
	*out = s;
	return 0;

err_free:
	clog__seg_free(c, s);
	return rc;
}

/* Segments [@from, @to) are missing between two that exist: recreate them blank. */
static int
clog_fill_gap(struct clog *c, uint64_t from, uint64_t to)
{
	uint64_t k = (to - from) / c->seg_size;

	for (uint64_t at = from; at < to; at += c->seg_size) {
		struct clog_seg *s;
		int rc = clog_seg_blank(c, at, &s);

		if (rc != 0) {
			log_err(CLOG_TAG,
				"shard %u: cannot recreate the missing segment %020" PRIu64
				" blank: %s; free space in %s and start again",
				c->shard, at, strerror(-rc), c->dir);
			return rc;
		}
		atomic_store_release(&c->segs[clog_slot(c, at)], s);
		rc = clog__lost_add(c, at, at + c->seg_size);
		if (rc != 0)
			return rc;
	}
	c->rep.segs_missing += (uint32_t)k;
	clog_suspect(c, from);
	if (k == 1)
		CLOG_REC_WARN("shard %u: segment %020" PRIu64 " is missing (between %020" PRIu64
			      " and %020" PRIu64
			      "): recreated blank; the records it held (up to %" PRIu64
			      " bytes) are lost, the segments after it are kept",
			      c->shard, from, from - c->seg_size, to, c->seg_size);
	else
		CLOG_REC_WARN("shard %u: %" PRIu64 " segments from %020" PRIu64 " to %020" PRIu64
			      " are missing (between %020" PRIu64 " and %020" PRIu64
			      "): recreated blank; the records they held (up to %" PRIu64
			      " bytes) are lost, the segments after them are kept",
			      c->shard, k, from, to - c->seg_size, from - c->seg_size, to,
			      k * c->seg_size);
	return 0;
}

static int
clog_load_segs(struct clog *c, const uint64_t *starts, size_t n, const uint64_t *old, size_t n_old,
	       bool *created)
{
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct clog_seg *s;
		uint64_t had = c->seg_size;

		if (i > 0 && starts[i] != starts[i - 1] + c->seg_size) {
			rc = clog_fill_gap(c, starts[i - 1] + c->seg_size, starts[i]);
			if (rc != 0)
				return rc;
			*created = true;
		}
		rc = clog_seg_load(c, starts[i], false, &s, &had);
		if (rc == -EINVAL && i == n - 1 && clog_seg_never_used(c, starts[i])) {
			/* A segment whose preparation a crash interrupted: it holds nothing. */
			char path[PATH_MAX];

			log_warn(CLOG_TAG, "shard %u: removing half-created segment %020" PRIu64,
				 c->shard, starts[i]);
			snprintf(path, sizeof(path), "%s/%020" PRIu64, c->dir, starts[i]);
			rc = c->io->unlink(c->io->ctx, path);
			return rc;
		}
		if (rc == -EINVAL)
			rc = clog_seg_load(c, starts[i], true, &s, &had);
		if (rc == -EFBIG) {
			log_err(CLOG_TAG,
				"shard %u: segment %020" PRIu64 " is %" PRIu64
				" bytes, larger than the segment size %" PRIu64
				": start with mapedFileSizeCommitLog=%" PRIu64
				" (the size the log was written with), or move the file out of %s",
				c->shard, starts[i], had, c->seg_size, had, c->dir);
			return -EINVAL;
		}
		if (rc != 0) {
			log_err(CLOG_TAG,
				"shard %u: cannot open segment %020" PRIu64
				": %s; make it readable and writable, or move it out of %s (its "
				"records are then lost to this broker)",
				c->shard, starts[i], strerror(-rc), c->dir);
			return rc;
		}
		if (had < c->seg_size) {
			c->rep.segs_short++;
			c->rep.bytes_short += c->seg_size - had;
			clog_suspect(c, starts[i]);
			CLOG_REC_WARN("shard %u: segment %020" PRIu64 " is %" PRIu64
				      " bytes, not %" PRIu64
				      " (truncated): extended with zeros; its last %" PRIu64
				      " bytes are gone, recovery keeps its records up to the last "
				      "valid one",
				      c->shard, starts[i], had, c->seg_size, c->seg_size - had);
		}
		clog__old_buf_load(c, s, old, n_old);
		atomic_store_release(&c->segs[clog_slot(c, s->start)], s);
		c->cur = s;
	}
	return 0;
}

int
clog__load(struct clog *c, const uint64_t *starts, size_t n)
{
	size_t n_old = 0;
	uint64_t *old = clog_old_bufs_list(c, &n_old);
	bool created = false;
	int rc = 0;

	rc = clog_load_segs(c, starts, n, old, n_old, &created);
	free(old);
	if (rc != 0)
		return rc;
	return created ? c->io->sync_dir(c->io->ctx, c->dir) : 0;
}
