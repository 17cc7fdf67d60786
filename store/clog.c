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
 *
 * Size: about 1,000 lines because it is one shard's log: its write-behind buffers (clog_buf.c), loading
 * (clog_load.c) and recovery (clog_recover.c) are split off already; what is left is append,
 * roll, flush and trim over the same segment table.
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
#include "store_priv.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

void
clog_set_reader_sync(struct clog *c, bool (*fn)(void *arg), void *arg)
{
	c->reader_sync = fn;
	c->reader_sync_arg = arg;
}

static void
clog_seg_free_keep(struct clog *c, struct clog_seg *s, bool keep_file)
{
	clog__buf_release(c, s, keep_file);
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
 * Create and map a new segment (sparse), and reserve its buffer's address
 * space. Its blocks are allocated and zero-filled, and its buffer's chunks
 * mapped, a window at a time by clog__ck_add(). Blocking.
 */
int
clog__seg_create(struct clog *c, uint64_t start, struct clog_seg **out)
{
	struct clog_seg *s = clog__seg_new(c, start);
	int rc;

	if (s == NULL)
		return -ENOMEM;
	rc = c->io->open(c->io->ctx, s->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (rc < 0)
		goto err_free;
	s->fd = rc;
	/* Sparse: its blocks are allocated a window at a time (clog__ck_add()). */
	rc = c->io->truncate(c->io->ctx, s->fd, c->seg_size);
	if (rc != 0)
		goto err_unlink;
	/* Its size is metadata: durable before any record relies on it. */
	rc = c->io->fdatasync(c->io->ctx, s->fd);
	if (rc != 0)
		goto err_unlink;
	rc = c->io->map(c->io->ctx, s->fd, c->seg_size, (void **)&s->map);
	if (rc != 0)
		goto err_unlink;
	rc = clog__res_new(c, s, 0);
	if (rc != 0)
		goto err_unlink;
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
		if (store__u64_push(&v, &len, &cap, x) != 0) {
			closedir(d);
			free(v);
			return -ENOMEM;
		}
	}
	closedir(d);
	if (aside > 0)
		log_info(CLOG_TAG,
			 "shard %u: %u files of bytes an earlier recovery took out of the log in "
			 "%s (*" CLOG_ASIDE_SUFFIX "*, docs/store.md): remove them once looked at",
			 c->shard, aside, c->dir);
	if (len > 0)
		qsort(v, len, sizeof(*v), store__u64_cmp);
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
	clog__buf_geometry(c, cfg->buf_window != 0 ? cfg->buf_window : CLOG_WINDOW_DEFAULT);
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
		/* one chunk for the first appends; the preparing thread maps the rest */
		rc = clog__ck_add(c, c->cur, 0);
		if (rc != 0)
			goto err_close;
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
	/* write-behind chunks retired but still in their grace period */
	clog__buf_graves_free(c);
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
		/* below buf_lo: written back before it was retired */
		a = SP_MAX(a, s + atomic_load_acquire(&seg->buf_lo));
		/*
		 * Past buf_hi nothing was mapped, nor appended: only the filler
		 * of a BLANK that a roll wrote below it (a record larger than the
		 * rest of the window). The file reads zeros there.
		 */
		b = SP_MIN(b, s + atomic_load_acquire(&seg->buf_hi));
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
	/* acquire: pairs with the release in clog__ck_add(), as does every load of it */
	c->cur_hi = atomic_load_acquire(&nxt->buf_hi);
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
	if (size + WIRE_BLANK_LEN > c->seg_size || size + WIRE_BLANK_LEN > c->window)
		return -EMSGSIZE;
	if (in + size + WIRE_BLANK_LEN > c->seg_size) {
		long r = clog_roll(c, true);

		if (r != 0)
			return r;
		cur = c->cur;
		in = 0;
	}
	/* Only into mapped chunks (the BLANK at a roll too): else the window is behind. */
	if (SP_UNLIKELY(in + size + WIRE_BLANK_LEN > c->cur_hi) &&
	    in + size + WIRE_BLANK_LEN > (c->cur_hi = atomic_load_acquire(&cur->buf_hi))) {
		int e = atomic_load_acquire(&c->prep_err);

		return e != 0 ? e : -EAGAIN;
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
	if (len > c->window)
		return -EMSGSIZE;
	/* Only into mapped chunks: else the window is behind. */
	if (in + len > c->cur_hi && in + len > (c->cur_hi = atomic_load_acquire(&c->cur->buf_hi)))
		return -EAGAIN;
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

/*
 * The bytes at local @off up to @end (a written end), within its segment:
 * NULL when out of range. *@avail: how many; *@mapped: how many of them can
 * be read (past a buffer's last mapped chunk lies only the filler of a
 * BLANK, which reads as zeros in the file).
 */
static const uint8_t *
clog_raw_at(const struct clog *c, uint64_t off, uint64_t end, uint64_t *avail, uint64_t *mapped)
{
	const uint8_t *b;
	struct clog_seg *s;
	uint64_t in, fl;

	if (off < clog_min(c) || off >= end)
		return NULL;
	s = clog_seg_at(c, off);
	if (s == NULL)
		return NULL;
	in = off - s->start;
	*avail = SP_MIN(end - off, c->seg_size - in);
	/* acquire: pairs with the releases of clog__res_new() and clog__buf_retire() */
	b = atomic_load_acquire(&s->buf);
	if (b != NULL && in >= atomic_load_acquire(&s->buf_lo)) {
		*mapped = SP_MIN(*avail, SP_MAX(atomic_load_acquire(&s->buf_hi), in) - in);
		return b + in;
	}
	/*
	 * The file: it holds what is durable. Past the flushed offset (at or
	 * above buf_lo, loaded first, and above @off) the write-back may not
	 * have come yet, or be under way: its bytes are not the log's.
	 */
	fl = clog_flushed(c);
	*avail = fl > off ? SP_MIN(*avail, fl - off) : 0;
	*mapped = *avail;
	return s->map + in;
}

int
clog_rec_id(const struct clog *c, uint64_t off, uint32_t *size, uint32_t *hash)
{
	static const uint8_t zeros[CLOG_REC_ID_BYTES];
	uint64_t avail, mapped;
	const uint8_t *p = clog_raw_at(c, off, clog_written(c), &avail, &mapped);
	uint32_t total;
	uint32_t magic;

	if (p == NULL || mapped < WIRE_BLANK_LEN)
		return -ERANGE;
	memcpy(&total, p, 4);
	memcpy(&magic, p + 4, 4);
	total = __builtin_bswap32(total);
	magic = __builtin_bswap32(magic);
	if ((magic != WIRE_MAGIC_MESSAGE && magic != WIRE_MAGIC_BLANK) || total < WIRE_BLANK_LEN ||
	    (magic == WIRE_MAGIC_MESSAGE && total > mapped))
		return -EBADMSG;
	*size = total;
	if (mapped >= SP_MIN(SP_MIN((uint64_t)total, CLOG_REC_ID_BYTES), avail)) {
		*hash = clog_rec_hash(p, total, avail);
	} else {
		/* a BLANK's filler past the mapped chunks: zeros, as in the file */
		uint64_t n = SP_MIN(SP_MIN((uint64_t)total, CLOG_REC_ID_BYTES), avail);

		*hash = crc32_update(crc32_update(0, p, mapped), zeros, n - mapped);
	}
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
	uint64_t all, lim, pos = 0;

	if (off < clog_min(c) || off > end)
		return -ERANGE;
	if (off == end)
		return 0;
	base = clog_raw_at(c, off, end, &all, &lim);
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
		if (magic != WIRE_MAGIC_MESSAGE || size < WIRE_BLANK_LEN || size > lim - pos) {
			if (pos == 0)
				return -EBADMSG;
			break; /* the records before it: *@out says where they are */
		}
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

/*
 * The segment whose buffer does not reach far enough ahead of the appends
 * (written + window, within the current segment and the next), or NULL.
 */
static struct clog_seg *
clog_window_seg(const struct clog *c)
{
	/* acquire: pairs with the release of cur_start in clog_roll() */
	uint64_t cur = atomic_load_acquire(&c->cur_start);
	uint64_t want = SP_MAX(clog_written(c), cur) + c->window;

	for (uint64_t st = cur; st < want && st <= cur + c->seg_size; st += c->seg_size) {
		struct clog_seg *s = clog_seg_at(c, st);

		if (s == NULL || atomic_load_acquire(&s->buf) == NULL)
			return NULL;
		if (atomic_load_acquire(&s->buf_hi) < SP_MIN(c->seg_size, want - st))
			return s;
	}
	return NULL;
}

bool
clog_wants_next(const struct clog *c)
{
	return atomic_load_acquire(&c->next) == NULL || clog_window_seg(c) != NULL;
}

/* Report a preparation's error once (it is kept for appends to return), or its end. */
static int
clog_prep_report(struct clog *c, int rc, const char *what, uint64_t start)
{
	int was = atomic_load_relaxed(&c->prep_err);

	if (rc != 0 && was != rc)
		log_err(CLOG_TAG, "shard %u: cannot prepare %s %020" PRIu64 ": %s", c->shard, what,
			start, strerror(-rc));
	if (rc == 0 && was != 0)
		log_info(CLOG_TAG, "shard %u: %s %020" PRIu64 " prepared, writes resume", c->shard,
			 what, start);
	atomic_store_release(&c->prep_err, rc);
	return rc;
}

int
clog_prepare_next(struct clog *c)
{
	struct clog_seg *s;
	uint64_t start;
	int rc;

	clog__buf_reap(c);
	/* The window first: the owner may be waiting for it. */
	while ((s = clog_window_seg(c)) != NULL) {
		uint64_t at = s->start + atomic_load_relaxed(&s->buf_hi);

		rc = clog__ck_add(c, s, 0);
		if (rc != 0 || atomic_load_relaxed(&c->prep_err) != 0)
			(void)clog_prep_report(c, rc, "the write-behind buffer at", at);
		if (rc != 0)
			return rc;
	}
	if (atomic_load_acquire(&c->next) != NULL)
		return 0;
	/* acquire: pairs with the release of cur_start in clog_roll() */
	start = atomic_load_acquire(&c->cur_start) + c->seg_size;
	if (start + c->seg_size > CLOG_LOCAL_MASK)
		return -EFBIG;
	if (clog_seg_at(c, start) != NULL) {
		/* Already created by an earlier call whose publish the owner consumed. */
		return 0;
	}
	rc = clog__seg_create(c, start, &s);
	if (rc == 0) {
		/* its first chunk: the owner rolls into a mapped buffer */
		rc = clog__ck_add(c, s, 0);
		if (rc != 0) {
			(void)c->io->unlink(c->io->ctx, s->path);
			clog__seg_free(c, s);
		}
	}
	if (rc != 0 || atomic_load_relaxed(&c->prep_err) != 0)
		(void)clog_prep_report(c, rc, "segment", start);
	if (rc != 0)
		return rc;
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
	uint64_t t0;
	int rc;

	if (to == from && atomic_load_relaxed(&c->err) == 0) {
		clog__buf_retire(c, to);
		return 0;
	}
	t0 = clk_mono_ns();
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
	phist_record(&c->flush_lat, clk_mono_ns() - t0);
	atomic_add_relaxed(&c->syncs, 1);
	/* release: data durable before the offset says so; pairs with clog_flushed() */
	atomic_store_release(&c->flushed, to);
	atomic_store_release(&c->err, 0);
	clog__buf_retire(c, to);
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

const struct phist *
clog_flush_hist(const struct clog *c)
{
	return &c->flush_lat;
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
	base = clog__base(s, in);
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
clog_trim(struct clog *c, int64_t expire_before_ms, bool force, int64_t now_ms, uint64_t keep_from,
	  bool *blocked, uint64_t *min_out)
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
		if (atomic_load_relaxed(&s->last_ms) >= expire_before_ms) {
			if (!(force && deleted == 0))
				break;
			if (s->start + c->seg_size > keep_from) {
				/* unexpired, and a group has not read it all yet */
				if (blocked)
					*blocked = true;
				break;
			}
		}
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
