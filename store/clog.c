// SPDX-License-Identifier: Apache-2.0
/*
 * clog.c - a CommitLog shard: segments, append, roll, flush, trim; recovery
 * is in clog_recover.c.
 *
 * See clog.h for the design. The invariants this file keeps:
 *  - every record and BLANK is written before `written` moves past it
 *    (release store; readers and the flusher load it with acquire);
 *  - `flushed` only moves after fdatasync of every segment below it
 *    returned 0, and never past `written`;
 *  - after an append at least WIRE_BLANK_LEN bytes stay free in the
 *    segment, so a BLANK header always fits;
 *  - a segment is in segs[] before any offset in it can be read, and leaves
 *    it only after clog_min() moved past it.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "common/log.h"
#include "store/clog.h"

#include "clog_priv.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * A retired write-behind buffer (under grave_mu): the flusher frees it
 * after its grace period unless the preparing thread reused it first.
 */
struct clog_buf_grave {
	uint8_t *buf;
	uint64_t start;
	bool file;
	uint64_t due_ns;
	struct clog_buf_grave *next;
};

static void
clog_prep_yield(struct clog *c)
{
	if (c->prep_yield != NULL)
		c->prep_yield(c->prep_yield_arg);
}

void
clog_set_prep_yield(struct clog *c, void (*fn)(void *arg), void *arg)
{
	c->prep_yield = fn;
	c->prep_yield_arg = arg;
}

void
clog_set_reader_sync(struct clog *c, bool (*fn)(void *arg), void *arg)
{
	c->reader_sync = fn;
	c->reader_sync_arg = arg;
}

void
clog__buf_path(const char *dir, uint64_t start, char *path, size_t n)
{
	snprintf(path, n, "%s/%020" PRIu64, dir, start);
}

/*
 * @keep_file: leave a buffer's file for the next start's recovery (its data
 * may not be in the segment file yet).
 */
static void
clog_buf_free(struct clog *c, uint8_t *buf, uint64_t start, bool file, bool keep_file)
{
	char path[PATH_MAX];

	if (buf == NULL)
		return;
	munmap(buf, c->seg_size);
	if (!file)
		return;
	if (keep_file)
		return;
	clog__buf_path(c->buf_dir, start, path, sizeof(path));
	if (unlink(path) != 0 && errno != ENOENT)
		log_warn(CLOG_TAG, "shard %u: cannot remove %s: %s", c->shard, path,
			 strerror(errno));
}

void
clog__old_buf_drop(struct clog *c, struct clog_seg *s)
{
	if (s->old_buf != NULL)
		munmap((void *)s->old_buf, c->seg_size);
	s->old_buf = NULL;
}

/*
 * Hot anonymous buffers (anon_bufs): one more, at its segment's creation
 * (@start; @why: why not a file), or one less, at its retirement (written
 * back) or its segment's end. The first and the last of an episode say so
 * when buffers were to be files (clog_bufs_degraded()).
 */
static void
clog_anon_get(struct clog *c, uint64_t start, int why)
{
	/*
	 * Durability must not downgrade without a word: once per episode, at
	 * error level; store_durable() holds ASYNC_FLUSH acknowledgements for
	 * the write-back meanwhile.
	 */
	if (atomic_fetch_add_explicit(&c->anon_bufs, 1, memory_order_relaxed) == 0 &&
	    c->buf_wanted && c->buf_dir != NULL) {
		atomic_add_relaxed(&c->degraded_episodes, 1);
		log_err(CLOG_TAG,
			"shard %u: the write-behind buffer of segment %020" PRIu64
			" is anonymous memory, not a file in %s (%s): until buffers are files "
			"again, ASYNC_FLUSH appends are acknowledged only once written back",
			c->shard, start, c->buf_dir, strerror(why));
	}
}

static void
clog_anon_put(struct clog *c)
{
	if (atomic_fetch_sub_explicit(&c->anon_bufs, 1, memory_order_relaxed) == 1 &&
	    c->buf_wanted && c->buf_dir != NULL)
		log_warn(CLOG_TAG,
			 "shard %u: write-behind buffers are files in %s again: ASYNC_FLUSH "
			 "appends are acknowledged at once again",
			 c->shard, c->buf_dir);
}

static void
clog_seg_free_keep(struct clog *c, struct clog_seg *s, bool keep_file)
{
	if (atomic_load_relaxed(&s->buf) != NULL && !s->buf_file)
		clog_anon_put(c);
	clog_buf_free(c, atomic_load_relaxed(&s->buf), s->start, s->buf_file, keep_file);
	clog__old_buf_drop(c, s);
	if (s->map != NULL)
		(void)c->io->unmap(c->io->ctx, s->map, c->seg_size);
	if (s->fd >= 0)
		(void)c->io->close(c->io->ctx, s->fd);
	free(s);
}

void
clog__seg_free(struct clog *c, struct clog_seg *s)
{
	clog_seg_free_keep(c, s, false);
}

struct clog_seg *
clog__seg_new(const struct clog *c, uint64_t start)
{
	size_t n = strlen(c->dir) + 32;
	struct clog_seg *s = calloc(1, sizeof(*s) + n);

	if (s == NULL)
		return NULL;
	s->start = start;
	s->fd = -1;
	snprintf(s->path, n, "%s/%020" PRIu64, c->dir, start);
	return s;
}

/*
 * The buffer of the segment at @start as a file in buf_dir, its memory
 * reserved (fallocate: a full tmpfs says ENOSPC here, not SIGBUS at an
 * append). Return: the shared mapping, or MAP_FAILED with errno set.
 */
static void *
clog_buf_map_file(struct clog *c, uint64_t start)
{
	char path[PATH_MAX];
	void *p = MAP_FAILED;
	int fd;
	int err;

	clog__buf_path(c->buf_dir, start, path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return MAP_FAILED;
	if (fallocate(fd, 0, 0, (off_t)c->seg_size) == 0)
		p = mmap(NULL, c->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (p == MAP_FAILED) {
		(void)unlink(path);
		errno = err;
	}
	return p;
}

/* List a retired buffer (the flusher's retirement, or a reuse given up). */
static void
clog_grave_push(struct clog *c, struct clog_buf_grave *g)
{
	pthread_mutex_lock(&c->grave_mu);
	g->next = c->buf_graves;
	c->buf_graves = g;
	pthread_mutex_unlock(&c->grave_mu);
}

/*
 * A retired buffer made the one of the segment at @start: the oldest that
 * no reader can still be in (CLOG_UNMAP_GRACE_MS after its retirement, or
 * any once reader_sync() returns), zeroed, and as a file renamed to @start.
 * A recycled buffer reads exactly as a new one. Return: it, or NULL.
 */
static uint8_t *
clog_buf_reuse(struct clog *c, uint64_t start, bool *file)
{
	struct clog_buf_grave *g = NULL;
	struct clog_buf_grave **pick = NULL;
	uint64_t now = clk_mono_ns();
	uint8_t *buf;

	pthread_mutex_lock(&c->grave_mu);
	for (struct clog_buf_grave **pp = &c->buf_graves; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->file == (c->buf_dir != NULL) &&
		    (c->reader_sync != NULL || (*pp)->due_ns <= now))
			pick = pp; /* newest first: the last match is the oldest */
	if (pick != NULL) {
		g = *pick;
		*pick = g->next;
	}
	pthread_mutex_unlock(&c->grave_mu);
	if (g == NULL)
		return NULL;
	/* Retired (buf cleared, release) before it was listed: later readers use the file. */
	if (c->reader_sync != NULL && !c->reader_sync(c->reader_sync_arg)) {
		/* A reader may still be in it: back on the list, and new memory this time. */
		clog_grave_push(c, g);
		return NULL;
	}
	buf = g->buf;
	for (uint64_t off = 0; off < c->seg_size; off += CLOG_PREP_SLICE) {
		memset(buf + off, 0, SP_MIN((uint64_t)CLOG_PREP_SLICE, c->seg_size - off));
		clog_prep_yield(c);
	}
	if (g->file) {
		char from[PATH_MAX];
		char to[PATH_MAX];

		/* Zeroed first: a crash never leaves the old bytes under the new name. */
		clog__buf_path(c->buf_dir, g->start, from, sizeof(from));
		clog__buf_path(c->buf_dir, start, to, sizeof(to));
		if (rename(from, to) != 0) {
			log_warn(CLOG_TAG, "shard %u: cannot rename %s to %s: %s", c->shard, from,
				 to, strerror(errno));
			clog_buf_free(c, buf, g->start, true, false);
			free(g);
			return NULL;
		}
	}
	*file = g->file;
	free(g);
	atomic_add_relaxed(&c->bufs_reused, 1);
	return buf;
}

/*
 * A pre-faulted buffer for the hot segment at @start: a retired one
 * (clog_buf_reuse()), or else new: a file in buf_dir
 * when there is one (on tmpfs it survives a crash of the process, and
 * recovery copies what the segment file lacks), else anonymous memory.
 * Neither is write-protected for dirty tracking (as a shared mapping of a
 * disk file is after each writeback), so appends into it never fault.
 */
int
clog__buf_alloc(struct clog *c, uint64_t start, uint8_t **out, bool *file)
{
	void *p = MAP_FAILED;
	long page = sysconf(_SC_PAGESIZE);

	*out = clog_buf_reuse(c, start, file);
	if (*out != NULL) {
		if (!*file)
			clog_anon_get(c, start, c->buf_dir != NULL ? EEXIST : ENOENT);
		return 0;
	}
	*file = false;
	if (c->buf_dir != NULL) {
		p = clog_buf_map_file(c, start);
		if (p != MAP_FAILED)
			*file = true;
	}
	if (p == MAP_FAILED) {
		int why = errno;

		p = mmap(NULL, c->seg_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
		if (p == MAP_FAILED)
			return -errno;
		clog_anon_get(c, start, why);
	}
	/* Write-faulted a slice at a time, the service's other files between slices. */
	for (uint64_t off = 0; off < c->seg_size; off += CLOG_PREP_SLICE) {
		uint64_t len = SP_MIN((uint64_t)CLOG_PREP_SLICE, c->seg_size - off);

		if (madvise((uint8_t *)p + off, len, MADV_POPULATE_WRITE) != 0) {
			for (uint64_t i = 0; i < len; i += (uint64_t)page)
				((volatile uint8_t *)p)[off + i] = 0;
		}
		clog_prep_yield(c);
	}
	*out = p;
	return 0;
}

static int
clog_zero_fill(struct clog *c, int fd)
{
	static const uint8_t zeros[1 << 16];

	for (uint64_t off = 0; off < c->seg_size; off += sizeof(zeros)) {
		int rc = store_io_write_all(c->io, fd, zeros,
					    SP_MIN(sizeof(zeros), c->seg_size - off), off);

		if (rc != 0)
			return rc;
		if ((off + sizeof(zeros)) % CLOG_PREP_SLICE == 0)
			clog_prep_yield(c);
	}
	return 0;
}

/* Create, allocate, map and pre-fault a new segment. Blocking. */
int
clog__seg_create(struct clog *c, uint64_t start, struct clog_seg **out)
{
	struct clog_seg *s = clog__seg_new(c, start);
	uint8_t *buf;
	int rc;

	if (s == NULL)
		return -ENOMEM;
	rc = c->io->open(c->io->ctx, s->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (rc < 0)
		goto err_free;
	s->fd = rc;
	rc = c->io->allocate(c->io->ctx, s->fd, c->seg_size);
	if (rc != 0)
		goto err_unlink;
	/*
	 * Write real zeros over the reservation (RocketMQ's warmMapedFile):
	 * fallocate leaves "unwritten" extents, and converting them made every
	 * group-commit fdatasync commit a journal transaction whose cost grew
	 * with the bytes synced. Done here, off the hot path, once a segment.
	 * ASYNC_FLUSH keeps it too: without it the flusher's write-back fills
	 * pages the zeros would have put in the page cache, and batched
	 * throughput on memif fell from 1.8 to 1.0 M msg/s (docs/store.md).
	 */
	rc = c->no_warm ? 0 : clog_zero_fill(c, s->fd);
	if (rc != 0)
		goto err_unlink;
	/* Size and extents are metadata: durable before any record relies on them. */
	clog_prep_yield(c);
	rc = c->io->fdatasync(c->io->ctx, s->fd);
	if (rc != 0)
		goto err_unlink;
	rc = c->io->map(c->io->ctx, s->fd, c->seg_size, (void **)&s->map);
	if (rc != 0)
		goto err_unlink;
	/* The owner's stores go to a pre-faulted buffer: no fault on its hot path. */
	rc = clog__buf_alloc(c, start, &buf, &s->buf_file);
	if (rc != 0)
		goto err_unlink;
	atomic_store_relaxed(&s->buf, buf);
	rc = c->io->sync_dir(c->io->ctx, c->dir);
	if (rc != 0)
		goto err_unlink;
	atomic_store_relaxed(&s->last_ms, INT64_MAX); /* not sealed: never expired */
	*out = s;
	return 0;

err_unlink:
	(void)c->io->unlink(c->io->ctx, s->path);
err_free:
	clog__seg_free(c, s);
	return rc;
}

static int
clog_name_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Return: 0 and a sorted malloc'd array of segment starts found in dir. */
static int
clog_list(struct clog *c, uint64_t **starts, size_t *n)
{
	DIR *d = opendir(c->dir);
	struct dirent *de;
	uint64_t *v = NULL;
	size_t len = 0;
	size_t cap = 0;
	unsigned aside = 0;

	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		char *end;
		unsigned long long x;

		if (de->d_name[0] == '.')
			continue;
		if (strlen(de->d_name) > 20 &&
		    strncmp(de->d_name + 20, CLOG_ASIDE_SUFFIX, strlen(CLOG_ASIDE_SUFFIX)) == 0) {
			aside++; /* bytes an earlier recovery took out of the log */
			continue;
		}
		if (strlen(de->d_name) != 20) {
			log_warn(CLOG_TAG, "shard %u: ignoring %s/%s (not a segment name)",
				 c->shard, c->dir, de->d_name);
			continue;
		}
		errno = 0;
		x = strtoull(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0' || x % c->seg_size != 0) {
			log_err(CLOG_TAG,
				"shard %u: %s/%s is not a multiple of the segment size %" PRIu64
				": move it out of %s, or start with mapedFileSizeCommitLog set to "
				"the segment size the log was written with",
				c->shard, c->dir, de->d_name, c->seg_size, c->dir);
			closedir(d);
			free(v);
			return -EINVAL;
		}
		if (len == cap) {
			uint64_t *nv = realloc(v, (cap ? cap * 2 : 16) * sizeof(*v));

			if (nv == NULL) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
			cap = cap ? cap * 2 : 16;
		}
		v[len++] = x;
	}
	closedir(d);
	if (aside > 0)
		log_info(CLOG_TAG,
			 "shard %u: %u files of bytes an earlier recovery took out of the log in "
			 "%s (*" CLOG_ASIDE_SUFFIX "*, docs/store.md): remove them once looked at",
			 c->shard, aside, c->dir);
	if (len > 0)
		qsort(v, len, sizeof(*v), clog_name_cmp);
	*starts = v;
	*n = len;
	return 0;
}

int
clog_open(const struct clog_cfg *cfg, struct clog **out)
{
	uint64_t *starts = NULL;
	struct clog *c;
	size_t n = 0;
	int rc;

	if (cfg->io == NULL || cfg->dir == NULL || cfg->shard > CLOG_SHARD_MAX ||
	    cfg->seg_size < CLOG_SEG_MIN || cfg->seg_size > CLOG_LOCAL_MASK / CLOG_SEG_SLOTS)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->io = cfg->io;
	c->shard = cfg->shard;
	c->cut = cfg->cut;
	c->cut_at = cfg->cut_at;
	c->no_warm = cfg->no_warm;
	c->seg_size = cfg->seg_size;
	c->sync_flush = cfg->sync_flush;
	c->logged_err_off = -1;
	c->suspect_from = UINT64_MAX;
	c->verified = cfg->verified;
	pthread_mutex_init(&c->grave_mu, NULL);
	c->dir = strdup(cfg->dir);
	if (c->dir == NULL) {
		rc = -ENOMEM;
		goto err_close;
	}
	rc = store_mkdirs(c->dir);
	if (rc != 0)
		goto err_close;
	if (cfg->old_buf_dir != NULL && cfg->old_buf_dir[0] != '\0') {
		c->old_buf_dir = strdup(cfg->old_buf_dir);
		if (c->old_buf_dir == NULL) {
			rc = -ENOMEM;
			goto err_close;
		}
	}
	c->buf_wanted = cfg->buf_wanted;
	if (cfg->buf_dir != NULL && cfg->buf_dir[0] != '\0') {
		c->buf_dir = strdup(cfg->buf_dir);
		if (c->buf_dir == NULL) {
			rc = -ENOMEM;
			goto err_close;
		}
		rc = store_mkdirs(c->buf_dir);
		if (rc != 0) {
			log_err(CLOG_TAG,
				"shard %u: cannot create %s (%s): write-behind buffers in "
				"anonymous "
				"memory; ASYNC_FLUSH appends are acknowledged only once written "
				"back",
				c->shard, c->buf_dir, strerror(-rc));
			free(c->buf_dir);
			c->buf_dir = NULL;
		}
	}
	rc = clog_list(c, &starts, &n);
	if (rc != 0)
		goto err_close;
	if (n > 0 && (starts[n - 1] - starts[0]) / c->seg_size >= CLOG_SEG_SLOTS) {
		log_err(CLOG_TAG,
			"shard %u: %zu segments from %020" PRIu64 " to %020" PRIu64
			" span more than %u segments: move the segments that do not belong to this "
			"log out of %s",
			c->shard, n, starts[0], starts[n - 1], CLOG_SEG_SLOTS, c->dir);
		rc = -EINVAL;
		goto err_close;
	}
	rc = clog__load(c, starts, n);
	if (rc != 0)
		goto err_close;
	if (c->cur == NULL) {
		rc = clog__seg_create(c, n > 0 ? starts[0] : 0, &c->cur);
		if (rc != 0)
			goto err_close;
		atomic_store_release(&c->segs[clog_slot(c, c->cur->start)], c->cur);
		c->rep.empty_dir = true;
	}
	atomic_store_relaxed(&c->min, n > 0 ? starts[0] : c->cur->start);
	free(starts);
	*out = c;
	return 0;

err_close:
	free(starts);
	clog_close(c);
	return rc;
}

void
clog_close(struct clog *c)
{
	struct clog_seg *s;
	bool keep;

	if (c == NULL)
		return;
	/*
	 * Buffer files go only when every append is durable in the segment
	 * files: after a failed last flush the next start recovers from them.
	 */
	keep = atomic_load_relaxed(&c->flushed) < atomic_load_relaxed(&c->written);
	/* A prepared segment is normally also in segs[]: free it once. */
	s = atomic_load_relaxed(&c->next);
	if (s != NULL && atomic_load_relaxed(&c->segs[clog_slot(c, s->start)]) != s)
		clog_seg_free_keep(c, s, keep);
	for (unsigned i = 0; i < CLOG_SEG_SLOTS; i++) {
		s = atomic_load_relaxed(&c->segs[i]);
		if (s != NULL)
			clog_seg_free_keep(c, s, keep);
	}
	while ((s = c->graveyard) != NULL) {
		c->graveyard = s->grave_next;
		clog__seg_free(c, s);
	}
	/* write-behind buffers retired but still in their grace period */
	while (c->buf_graves != NULL) {
		struct clog_buf_grave *g = c->buf_graves;

		c->buf_graves = g->next;
		clog_buf_free(c, g->buf, g->start, g->file, false);
		free(g);
	}
	if (c->buf_dir != NULL && !keep)
		(void)rmdir(c->buf_dir); /* fails, as it should, while a file is left */
	pthread_mutex_destroy(&c->grave_mu);
	free(c->dir);
	free(c->buf_dir);
	free(c->old_buf_dir);
	free(c->lost);
	free(c);
}

/*
 * Write [from, to) from the segments' write-behind buffers to their files
 * and fdatasync each segment touched. Rewriting the whole unflushed range
 * on every attempt also covers a retry after EIO, when Linux may already
 * have marked the failed pages clean. Blocking.
 */
/* pwrite [from, to) from the write-behind buffers to the files. Blocking. */
static int
clog_write_range(struct clog *c, uint64_t from, uint64_t to)
{
	from = SP_MAX(from, clog_min(c));
	for (uint64_t s = from - from % c->seg_size; s < to; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);
		uint8_t *buf;
		uint64_t a = SP_MAX(from, s);
		uint64_t b = SP_MIN(to, s + c->seg_size);
		int rc;

		if (seg == NULL)
			return -EIO;
		/* acquire: pairs with the release that installs a buffer */
		buf = atomic_load_acquire(&seg->buf);
		if (buf == NULL || b <= a)
			continue;
		rc = store_io_write_all(c->io, seg->fd, buf + (a - s), b - a, a - s);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int
clog__sync_range(struct clog *c, uint64_t from, uint64_t to)
{
	/* Segments below min were deleted by retention: nothing left to sync. */
	from = SP_MAX(from, clog_min(c));
	if (to <= from)
		return 0;
	for (uint64_t s = from - from % c->seg_size; s < to; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);
		int rc;

		if (seg == NULL)
			return -EIO;
		rc = c->io->fdatasync(c->io->ctx, seg->fd);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int
clog_write_back(struct clog *c)
{
	uint64_t to = atomic_load_acquire(&c->written); /* pairs with clog_commit() */
	uint64_t from = SP_MAX(c->wb, atomic_load_relaxed(&c->flushed));
	int rc;

	if (to <= from)
		return 0;
	rc = clog_write_range(c, from, to);
	if (rc != 0)
		return rc;
	c->wb = to;
	/* release: the bytes are in the files (the page cache) before the offset says so */
	atomic_store_release(&c->wb_pub, to);
	return 0;
}

uint64_t
clog_written_back(const struct clog *c)
{
	/* acquire: pairs with the releases in clog_write_back() and clog_flush() */
	return SP_MAX(atomic_load_acquire(&c->wb_pub), atomic_load_acquire(&c->flushed));
}

/*
 * Sealed segments below the flushed offset are durable in their files:
 * retire their buffers (readers switch to the file mapping) and free the
 * buffers whose grace period is over. Flusher only.
 */
static void
clog_retire_bufs(struct clog *c, uint64_t flushed)
{
	uint64_t cur = atomic_load_acquire(&c->cur_start);
	uint64_t now = clk_mono_ns();
	struct clog_buf_grave *due = NULL;
	struct clog_buf_grave **pp;

	for (uint64_t s = clog_min(c); s + c->seg_size <= flushed && s < cur; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);
		struct clog_buf_grave *g;
		uint8_t *buf;

		if (seg == NULL || (buf = atomic_load_relaxed(&seg->buf)) == NULL)
			continue;
		g = malloc(sizeof(*g));
		if (g == NULL)
			return; /* retried on the next flush */
		/* release: readers that see NULL read the file, written before this */
		atomic_store_release(&seg->buf, NULL);
		if (!seg->buf_file)
			clog_anon_put(c);
		g->buf = buf;
		g->start = seg->start;
		g->file = seg->buf_file;
		g->due_ns = now + (uint64_t)CLOG_UNMAP_GRACE_MS * 1000000;
		clog_grave_push(c, g);
	}
	/* Unlinked under the lock, unmapped after it: clog_buf_reuse() does not wait on munmap. */
	pthread_mutex_lock(&c->grave_mu);
	for (pp = &c->buf_graves; *pp != NULL;) {
		struct clog_buf_grave *g = *pp;

		if (g->due_ns <= now) {
			*pp = g->next;
			g->next = due;
			due = g;
		} else {
			pp = &g->next;
		}
	}
	pthread_mutex_unlock(&c->grave_mu);
	while (due != NULL) {
		struct clog_buf_grave *g = due;

		due = g->next;
		clog_buf_free(c, g->buf, g->start, g->file, false);
		free(g);
	}
}

/*
 * Seal the current segment (with @blank, write its BLANK filler first) and
 * move to the prepared next one. Return: 0, -EAGAIN not prepared yet, or
 * the preparation's error. Context: owner.
 */
static long
clog_roll(struct clog *c, bool blank)
{
	struct clog_seg *cur = c->cur;
	uint64_t in = c->wpos - cur->start;
	/* acquire: pairs with the release in clog_prepare_next() */
	struct clog_seg *nxt = atomic_load_acquire(&c->next);

	if (nxt == NULL) {
		int err = atomic_load_acquire(&c->prep_err);

		return err != 0 ? err : -EAGAIN;
	}
	if (blank)
		(void)!wire_rec_encode_blank((uint32_t)(c->seg_size - in), c->cur_buf + in,
					     c->seg_size - in);
	atomic_store_relaxed(&cur->last_ms, c->cur_last_ms);
	c->cur = nxt;
	c->cur_buf = atomic_load_relaxed(&nxt->buf);
	c->wpos = nxt->start;
	/*
	 * release: cur_start before next is cleared, so clog_prepare_next()
	 * that sees next == NULL computes the segment after this one.
	 */
	atomic_store_release(&c->cur_start, nxt->start);
	atomic_store_release(&c->next, NULL);
	return 0;
}

long
clog_append(struct clog *c, struct wire_msg *m, uint64_t *end)
{
	int err = atomic_load_acquire(&c->err); /* pairs with release in clog_flush() */
	struct clog_seg *cur = c->cur;
	uint64_t in = c->wpos - cur->start;
	size_t size;
	long n;

	if (SP_UNLIKELY(err != 0))
		return err;
	size = wire_rec_size(m);
	if (size == 0)
		return -EINVAL;
	if (size + WIRE_BLANK_LEN > c->seg_size)
		return -EMSGSIZE;
	if (in + size + WIRE_BLANK_LEN > c->seg_size) {
		long r = clog_roll(c, true);

		if (r != 0)
			return r;
		cur = c->cur;
		in = 0;
	}
	m->phys_offset = clog_phys(c->shard, c->wpos);
	n = wire_rec_encode(m, c->cur_buf + in, c->seg_size - in);
	if (SP_UNLIKELY(n < 0))
		return n;
	c->wpos += (uint64_t)n;
	c->cur_last_ms = m->store_ts;
	*end = c->wpos;
	return n;
}

const uint8_t *
clog_appended(const struct clog *c, uint64_t off, size_t len)
{
	const struct clog_seg *cur = c->cur;

	/* the owner's own store: relaxed is enough */
	if (off != atomic_load_relaxed(&c->written) || off < cur->start ||
	    off + len > cur->start + c->seg_size || off + len > c->wpos)
		return NULL;
	return c->cur_buf + (off - cur->start);
}

void
clog_commit(struct clog *c)
{
	/* release: the record bytes before the offset; pairs with clog_written() */
	atomic_store_release(&c->written, c->wpos);
}

long
clog_append_raw(struct clog *c, uint64_t off, const uint8_t *data, size_t len, uint64_t *last)
{
	int err = atomic_load_acquire(&c->err); /* pairs with release in clog_flush() */
	uint64_t in;
	size_t pos = 0;
	size_t rec = 0;
	int64_t last_ms = c->cur_last_ms;
	bool blank = false;

	if (SP_UNLIKELY(err != 0))
		return err;
	if (off != c->wpos)
		return -ERANGE;
	if (len == 0)
		return 0;
	if (c->wpos - c->cur->start == c->seg_size) {
		/* the last copy ended with the segment's BLANK: its filler is in place */
		long r = clog_roll(c, false);

		if (r != 0)
			return r;
	}
	in = c->wpos - c->cur->start;
	if (in + len > c->seg_size)
		return -EBADMSG;
	while (pos < len) {
		struct wire_msg m;
		long r = wire_rec_decode(data + pos, len - pos, WIRE_REC_VERIFY_CRC, &m);

		rec = pos;
		if (r == -ENODATA) {
			/* a BLANK: its header alone, last, filling the segment to its end */
			if (m.total_size != c->seg_size - in - pos || len - pos != WIRE_BLANK_LEN)
				return -EBADMSG;
			blank = true;
			break;
		}
		if (r < 0)
			return r;
		if (m.phys_offset != clog_phys(c->shard, off + pos))
			return -EBADMSG;
		last_ms = m.store_ts;
		pos += (size_t)r;
	}
	memcpy(c->cur_buf + in, data, len);
	c->wpos = blank ? c->cur->start + c->seg_size : off + len;
	c->cur_last_ms = last_ms;
	if (last != NULL)
		*last = off + rec;
	return (long)len;
}

/* The bytes at local @off up to @end (a written end), within its segment: NULL when out of range. */
static const uint8_t *
clog_raw_at(const struct clog *c, uint64_t off, uint64_t end, uint64_t *avail)
{
	const uint8_t *base;
	struct clog_seg *s;

	if (off < clog_min(c) || off >= end)
		return NULL;
	s = clog_seg_at(c, off);
	if (s == NULL)
		return NULL;
	/* acquire: pairs with the release in clog_retire_bufs() */
	base = atomic_load_acquire(&s->buf);
	if (base == NULL)
		base = s->map;
	*avail = SP_MIN(end - off, c->seg_size - (off - s->start));
	return base + (off - s->start);
}

int
clog_rec_id(const struct clog *c, uint64_t off, uint32_t *size, uint32_t *hash)
{
	uint64_t avail;
	const uint8_t *p = clog_raw_at(c, off, clog_written(c), &avail);
	uint32_t total;
	uint32_t magic;

	if (p == NULL || avail < WIRE_BLANK_LEN)
		return -ERANGE;
	memcpy(&total, p, 4);
	memcpy(&magic, p + 4, 4);
	total = __builtin_bswap32(total);
	magic = __builtin_bswap32(magic);
	if ((magic != WIRE_MAGIC_MESSAGE && magic != WIRE_MAGIC_BLANK) || total < WIRE_BLANK_LEN ||
	    (magic == WIRE_MAGIC_MESSAGE && total > avail))
		return -EBADMSG;
	*size = total;
	*hash = clog_rec_hash(p, total, avail);
	return 0;
}

uint32_t
clog_rec_hash(const uint8_t *p, uint64_t total, uint64_t avail)
{
	return crc32_update(0, p, SP_MIN(SP_MIN(total, CLOG_REC_ID_BYTES), avail));
}

int
clog_last_rec(const struct clog *c, uint64_t *off)
{
	uint64_t end = clog_written(c);
	uint64_t pos;
	uint64_t last = UINT64_MAX;

	if (end == 0 || end <= clog_min(c))
		return -ENOENT;
	/* Walk the segment of the last byte from its start (or the log's first byte). */
	pos = SP_MAX((end - 1) - (end - 1) % c->seg_size, clog_min(c));
	while (pos < end) {
		uint32_t size;
		uint32_t hash;

		if (clog_rec_id(c, pos, &size, &hash) != 0)
			return -EBADMSG;
		last = pos;
		pos += size;
	}
	if (pos != end || last == UINT64_MAX)
		return -EBADMSG;
	*off = last;
	return 0;
}

long
clog_read_span(const struct clog *c, uint64_t off, uint32_t max, const uint8_t **out)
{
	uint64_t end = clog_written(c);
	const uint8_t *base;
	uint64_t lim, pos = 0;

	if (off < clog_min(c) || off > end)
		return -ERANGE;
	if (off == end)
		return 0;
	base = clog_raw_at(c, off, end, &lim);
	if (base == NULL)
		return -ERANGE;
	while (pos + WIRE_BLANK_LEN <= lim) {
		uint32_t size;
		uint32_t magic;

		memcpy(&size, base + pos, 4);
		memcpy(&magic, base + pos + 4, 4);
		size = __builtin_bswap32(size);
		magic = __builtin_bswap32(magic);
		if (magic == WIRE_MAGIC_BLANK) {
			if (pos == 0 || pos + WIRE_BLANK_LEN <= max)
				pos += WIRE_BLANK_LEN;
			break;
		}
		if (magic != WIRE_MAGIC_MESSAGE || size < WIRE_BLANK_LEN || size > lim - pos)
			return pos > 0 ? (long)pos : -EBADMSG;
		if (pos > 0 && pos + size > max)
			break;
		pos += size;
	}
	*out = base;
	return (long)pos;
}

bool
clog_bufs_outlive_crash(const struct clog *c)
{
	return c->buf_dir != NULL && atomic_load_relaxed(&c->anon_bufs) == 0;
}

bool
clog_bufs_degraded(const struct clog *c)
{
	return c->buf_wanted && !clog_bufs_outlive_crash(c);
}

uint64_t
clog_bufs_degraded_episodes(const struct clog *c)
{
	return atomic_load_relaxed(&c->degraded_episodes);
}

bool
clog_wants_next(const struct clog *c)
{
	return atomic_load_acquire(&c->next) == NULL;
}

int
clog_prepare_next(struct clog *c)
{
	struct clog_seg *s;
	uint64_t start;
	int rc;

	if (atomic_load_acquire(&c->next) != NULL)
		return 0;
	/* acquire: pairs with the release of cur_start in clog_append() */
	start = atomic_load_acquire(&c->cur_start) + c->seg_size;
	if (start + c->seg_size > CLOG_LOCAL_MASK)
		return -EFBIG;
	if (clog_seg_at(c, start) != NULL) {
		/* Already created by an earlier call whose publish the owner consumed. */
		return 0;
	}
	rc = clog__seg_create(c, start, &s);
	if (rc != 0) {
		if (atomic_load_relaxed(&c->prep_err) != rc)
			log_err(CLOG_TAG, "shard %u: cannot create segment %020" PRIu64 ": %s",
				c->shard, start, strerror(-rc));
		atomic_store_release(&c->prep_err, rc);
		return rc;
	}
	if (atomic_load_relaxed(&c->prep_err) != 0)
		log_info(CLOG_TAG, "shard %u: segment %020" PRIu64 " created, writes resume",
			 c->shard, start);
	atomic_store_release(&c->prep_err, 0);
	/* release: the segment is complete before readers or the owner see it */
	atomic_store_release(&c->segs[clog_slot(c, start)], s);
	atomic_store_release(&c->next, s);
	return 0;
}

int
clog_flush(struct clog *c)
{
	uint64_t to = atomic_load_acquire(&c->written); /* pairs with clog_commit() */
	uint64_t from = atomic_load_relaxed(&c->flushed);
	int rc;

	if (to == from && atomic_load_relaxed(&c->err) == 0) {
		clog_retire_bufs(c, to);
		return 0;
	}
	/*
	 * Write back what clog_write_back() has not, then sync. After an error
	 * everything unflushed is written again: Linux may have marked the
	 * pages of a failed writeback clean, so a bare retry could "succeed".
	 */
	rc = clog_write_range(c, SP_MAX(from, c->wb), to);
	if (rc == 0)
		rc = clog__sync_range(c, from, to);
	if (rc != 0) {
		c->wb = from;
		if (c->logged_err_off != (int64_t)from)
			log_err(CLOG_TAG,
				"shard %u: fdatasync of [%" PRIu64 ", %" PRIu64 ") failed: %s; "
				"writes stop until it succeeds",
				c->shard, from, to, strerror(-rc));
		c->logged_err_off = (int64_t)from;
		/* release: pairs with the acquire in clog_append()/clog_err() */
		atomic_store_release(&c->err, rc);
		return rc;
	}
	if (c->logged_err_off >= 0) {
		log_info(CLOG_TAG,
			 "shard %u: fdatasync succeeds again at %" PRIu64 ", writes resume",
			 c->shard, to);
		c->logged_err_off = -1;
	}
	c->wb = SP_MAX(c->wb, to);
	atomic_add_relaxed(&c->syncs, 1);
	/* release: data durable before the offset says so; pairs with clog_flushed() */
	atomic_store_release(&c->flushed, to);
	atomic_store_release(&c->err, 0);
	clog_retire_bufs(c, to);
	return 0;
}

int64_t
clog_last_store_ms(const struct clog *c)
{
	return c->cur_last_ms;
}

uint64_t
clog_written(const struct clog *c)
{
	return atomic_load_acquire(&c->written);
}

uint64_t
clog_flushed(const struct clog *c)
{
	return atomic_load_acquire(&c->flushed);
}

uint64_t
clog_syncs(const struct clog *c)
{
	return atomic_load_relaxed(&c->syncs);
}

uint64_t
clog_min(const struct clog *c)
{
	return atomic_load_acquire(&c->min);
}

int
clog_prep_err(const struct clog *c)
{
	return atomic_load_acquire(&c->prep_err);
}

int
clog_err(const struct clog *c)
{
	int e = atomic_load_acquire(&c->err);

	return e != 0 ? e : 0;
}

uint32_t
clog_shard(const struct clog *c)
{
	return c->shard;
}

uint64_t
clog_bufs_reused(const struct clog *c)
{
	return atomic_load_relaxed(&c->bufs_reused);
}

uint64_t
clog_seg_size(const struct clog *c)
{
	return c->seg_size;
}

/* clog_read() and clog_read_checked(): @flags WIRE_REC_VERIFY_CRC verifies the record too. */
static long
clog_read_at(const struct clog *c, uint64_t off, const uint8_t **rec, uint64_t *next_off,
	     unsigned flags)
{
	uint64_t vis = c->sync_flush ? clog_flushed(c) : clog_written(c);
	const uint8_t *base;
	struct clog_seg *s;
	struct wire_msg m;
	uint64_t in;
	long r;

	if (off < clog_min(c) || off >= vis)
		return -ERANGE;
	s = clog_seg_at(c, off);
	if (s == NULL)
		return -ERANGE;
	in = off - s->start;
	/* acquire: pairs with the release in clog_retire_bufs() */
	base = atomic_load_acquire(&s->buf);
	if (base == NULL)
		base = s->map;
	r = wire_rec_decode(base + in, SP_MIN(c->seg_size - in, vis - off), flags, &m);
	if (r == -ENODATA) {
		*next_off = s->start + c->seg_size;
		return -ENODATA;
	}
	/*
	 * Below the end, a record start is never zero, but a span recovery
	 * blanked is (after its BLANK): a unit that points there names a
	 * message the log lost. Checked only once the decode failed.
	 */
	if (r < 0 && c->seg_size - in >= WIRE_BLANK_LEN &&
	    memcmp(base + in, (const uint8_t[WIRE_BLANK_LEN]){0}, WIRE_BLANK_LEN) == 0)
		return -ENOENT;
	if (r < 0)
		return r;
	/* A record that names another offset is not the one written here. */
	if ((flags & WIRE_REC_VERIFY_CRC) && m.phys_offset != clog_phys(c->shard, off))
		return -EBADMSG;
	*rec = base + in;
	*next_off = off + (uint64_t)r;
	return r;
}

long
clog_read(const struct clog *c, uint64_t off, const uint8_t **rec, uint64_t *next_off)
{
	return clog_read_at(c, off, rec, next_off, 0);
}

long
clog_read_checked(const struct clog *c, uint64_t off, const uint8_t **rec, uint64_t *next_off)
{
	return clog_read_at(c, off, rec, next_off, WIRE_REC_VERIFY_CRC);
}

long
clog_trim(struct clog *c, int64_t expire_before_ms, bool force, int64_t now_ms, uint64_t *min_out)
{
	uint64_t min = atomic_load_relaxed(&c->min);
	long deleted = 0;
	struct clog_seg **pp;

	for (;;) {
		uint64_t cur_start = atomic_load_acquire(&c->cur_start);
		struct clog_seg *s = clog_seg_at(c, min);
		int rc;

		/* Only sealed segments: strictly before the owner's current one. */
		if (s == NULL || s->start >= cur_start)
			break;
		if (!(force && deleted == 0) &&
		    atomic_load_relaxed(&s->last_ms) >= expire_before_ms)
			break;
		min = s->start + c->seg_size;
		/* release: readers that load min see the raise before the unlink */
		atomic_store_release(&c->min, min);
		atomic_store_release(&c->segs[clog_slot(c, s->start)], NULL);
		rc = c->io->unlink(c->io->ctx, s->path);
		if (rc != 0)
			log_err(CLOG_TAG, "shard %u: unlink %s failed: %s", c->shard, s->path,
				strerror(-rc));
		else
			log_info(CLOG_TAG, "shard %u: deleted segment %020" PRIu64, c->shard,
				 s->start);
		s->unmap_due_ms = now_ms + CLOG_UNMAP_GRACE_MS;
		s->grave_next = c->graveyard;
		c->graveyard = s;
		deleted++;
	}
	for (pp = &c->graveyard; *pp != NULL;) {
		struct clog_seg *s = *pp;

		if (s->unmap_due_ms <= now_ms) {
			*pp = s->grave_next;
			clog__seg_free(c, s);
		} else {
			pp = &s->grave_next;
		}
	}
	*min_out = min;
	return deleted;
}
