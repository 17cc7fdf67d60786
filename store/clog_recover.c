// SPDX-License-Identifier: Apache-2.0
/*
 * clog_recover.c - a CommitLog shard's recovery at start: where its log
 * ends, what a crashed run left in its write-behind buffers, and the cut
 * of everything past the end (see clog_recover() in clog.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/log.h"
#include "store/clog.h"

#include "clog_priv.h"

/*
 * A segment of the wrong size is only dropped when it never held a record:
 * empty, or zero where the first record would start. Anything else is an
 * operator's or a disk's doing and refuses the start rather than lose data.
 */
bool
clog__seg_never_used(struct clog *c, uint64_t start)
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

/* Map the buffer a crashed run left for @s, if any (read by clog_recover()). */
void
clog__old_buf_load(struct clog *c, struct clog_seg *s)
{
	char path[PATH_MAX];
	struct stat st;
	void *p;
	int fd;

	if (c->old_buf_dir == NULL)
		return;
	clog__buf_path(c->old_buf_dir, s->start, path, sizeof(path));
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == c->seg_size) {
		p = mmap(NULL, c->seg_size, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED)
			s->old_buf = p;
	}
	close(fd);
}

/*
 * The file of @s lacks a valid record (or BLANK) at @off, where the scan
 * from @from stopped: take it from the buffer a crashed run left, when that
 * buffer holds the same bytes as the file from @from (within @s) up to
 * @off and a valid record at @off. Return: bytes copied into the file's
 * mapping, 0 when there is nothing to take.
 */
static uint64_t
clog_take_from_old_buf(struct clog *c, struct clog_seg *s, uint64_t from, uint64_t off)
{
	uint64_t in = off - s->start;
	uint64_t a = from > s->start ? from - s->start : 0;
	struct wire_msg m;
	long r;

	if (s->old_buf == NULL)
		return 0;
	/*
	 * Once per segment: from there on the file holds what was taken, so the
	 * prefix still matches (and a check per record would be quadratic).
	 */
	if (!s->old_buf_ok && memcmp(s->map + a, s->old_buf + a, in - a) != 0) {
		log_warn(CLOG_TAG,
			 "shard %u: the write-behind buffer of segment %020" PRIu64
			 " does not match its file: not used",
			 c->shard, s->start);
		clog__old_buf_drop(c, s);
		return 0;
	}
	s->old_buf_ok = true;
	r = wire_rec_decode(s->old_buf + in, c->seg_size - in, WIRE_REC_VERIFY_CRC, &m);
	if (r > 0 && m.phys_offset == clog_phys(c->shard, off) &&
	    c->seg_size - in - (uint64_t)r >= WIRE_BLANK_LEN) {
		memcpy(s->map + in, s->old_buf + in, (size_t)r);
		return (uint64_t)r;
	}
	if (r == -ENODATA && m.total_size == c->seg_size - in) {
		memcpy(s->map + in, s->old_buf + in, WIRE_BLANK_LEN);
		return WIRE_BLANK_LEN;
	}
	return 0;
}

/* After recovery: unmap the buffers a crashed run left (the caller removes their files). */
static void
clog_old_bufs_drop(struct clog *c)
{
	for (unsigned i = 0; i < CLOG_SEG_SLOTS; i++) {
		struct clog_seg *s = atomic_load_relaxed(&c->segs[i]);

		if (s != NULL)
			clog__old_buf_drop(c, s);
	}
}

/* Recovery: the last record boundary at or below @at, walking its segment's files. */
static uint64_t
clog_boundary_at_or_below(const struct clog *c, uint64_t at, uint64_t first)
{
	uint64_t pos = SP_MAX(at - at % c->seg_size, first);
	struct clog_seg *s = clog_seg_at(c, pos);

	if (s == NULL)
		return pos;
	while (pos < at) {
		uint64_t in = pos - s->start;
		uint32_t total;
		uint32_t magic;

		if (c->seg_size - in < WIRE_BLANK_LEN)
			break;
		memcpy(&total, s->map + in, 4);
		memcpy(&magic, s->map + in + 4, 4);
		total = __builtin_bswap32(total);
		magic = __builtin_bswap32(magic);
		if (magic == WIRE_MAGIC_BLANK)
			total = (uint32_t)(c->seg_size - in);
		else if (magic != WIRE_MAGIC_MESSAGE || total < WIRE_BLANK_LEN ||
			 total > c->seg_size - in)
			break;
		if (pos + total > at)
			break;
		pos += total;
	}
	return pos;
}

int
clog_recover(struct clog *c, uint64_t scan_from, int64_t trusted_end)
{
	uint64_t first = atomic_load_relaxed(&c->min);
	uint64_t taken = 0;
	bool cut_done = false;
	uint64_t end;
	struct clog_seg *last;
	int rc;

	if (trusted_end >= 0) {
		end = (uint64_t)trusted_end;
	} else {
		uint64_t off = SP_MAX(scan_from, first);
		uint64_t from = off;

		end = off;
		for (;;) {
			struct clog_seg *s = clog_seg_at(c, off);
			struct wire_msg m;
			uint64_t in;
			long r;

			if (s == NULL) {
				end = off;
				break;
			}
			in = off - s->start;
			r = wire_rec_decode(s->map + in, c->seg_size - in, WIRE_REC_VERIFY_CRC, &m);
			if (r > 0 && m.phys_offset == clog_phys(c->shard, off) &&
			    c->seg_size - in - (uint64_t)r >= WIRE_BLANK_LEN) {
				off += (uint64_t)r;
				end = off;
				continue;
			}
			if (r == -ENODATA && m.total_size == c->seg_size - in) {
				off = s->start + c->seg_size;
				end = off;
				continue;
			}
			/* Appended and not yet written back when the process died? */
			r = (long)clog_take_from_old_buf(c, s, from, off);
			if (r > 0) {
				taken += (uint64_t)r;
				continue;
			}
			break;
		}
	}
	if (end < first) {
		log_err(CLOG_TAG,
			"shard %u: checkpoint end %" PRIu64 " is below the first segment %" PRIu64,
			c->shard, end, first);
		return -EUCLEAN;
	}
	if (c->cut && c->cut_at < end) {
		uint64_t was = end;

		cut_done = true;
		end = clog_boundary_at_or_below(c, c->cut_at, first);
		log_warn(CLOG_TAG,
			 "shard %u: cutting %" PRIu64 " bytes past %" PRIu64 " (asked: %" PRIu64
			 ", the master's end)",
			 c->shard, was - end, end, c->cut_at);
	}

	/* Cut: zero the rest of the end's segment, delete every later one. */
	last = clog_seg_at(c, end);
	for (uint64_t s = end - end % c->seg_size + c->seg_size;; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);

		if (seg == NULL)
			break;
		log_warn(CLOG_TAG,
			 "shard %u: deleting segment %020" PRIu64 " past the end %" PRIu64,
			 c->shard, s, end);
		atomic_store_release(&c->segs[clog_slot(c, s)], NULL);
		rc = c->io->unlink(c->io->ctx, seg->path);
		clog__seg_free(c, seg);
		if (rc != 0)
			return rc;
	}
	if (last == NULL) {
		/* The end is the first byte of a segment that does not exist yet. */
		rc = clog__seg_create(c, end, &last);
		if (rc != 0)
			return rc;
		atomic_store_release(&c->segs[clog_slot(c, end)], last);
	} else {
		uint64_t in = end - last->start;
		bool dirty = false;

		for (uint64_t i = in; i < c->seg_size; i++) {
			if (last->map[i] != 0) {
				dirty = true;
				break;
			}
		}
		if (dirty) {
			if (!cut_done)
				log_warn(CLOG_TAG,
					 "shard %u: cutting the log at %" PRIu64
					 " (bad or torn record)",
					 c->shard, end);
			memset(last->map + in, 0, c->seg_size - in);
		}
	}
	/* Everything up to the end must be durable before anyone relies on it. */
	rc = clog__sync_range(c, SP_MIN(scan_from, end) - SP_MIN(scan_from, end) % c->seg_size,
			      end + 1);
	if (rc != 0)
		return rc;
	if (taken > 0)
		log_warn(CLOG_TAG,
			 "shard %u: %" PRIu64
			 " bytes of appends the crashed run had not written back "
			 "taken from its write-behind buffers",
			 c->shard, taken);
	/* Durable in the segment files now: the old buffers can go. */
	clog_old_bufs_drop(c);

	/* The segment appends go to next needs its write-behind buffer, holding the log so far. */
	if (atomic_load_relaxed(&last->buf) == NULL) {
		uint8_t *buf;

		rc = clog__buf_alloc(c, last->start, &buf, &last->buf_file);
		if (rc != 0)
			return rc;
		memcpy(buf, last->map, end - last->start);
		atomic_store_release(&last->buf, buf);
	}
	c->cur = last;
	c->cur_buf = atomic_load_relaxed(&last->buf);
	c->wpos = end;
	c->cur_last_ms = INT64_MAX;
	atomic_store_relaxed(&last->last_ms, INT64_MAX);
	atomic_store_release(&c->cur_start, last->start);
	c->wb = end;
	atomic_store_release(&c->written, end);
	atomic_store_release(&c->flushed, end);
	return 0;
}
