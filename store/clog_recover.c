// SPDX-License-Identifier: Apache-2.0
/*
 * clog_recover.c - a CommitLog shard at start: find where its log ends,
 * keep what lies past damage, cut what lies past the end (clog_recover()
 * in clog.h). Its segments were loaded by clog_load.c.
 *
 * DESIGN
 * Recovery never deletes bytes that may hold a record, and says what it
 * did. Records carry their own PHYSICALOFFSET and a body CRC, so a record
 * found by scanning past damage is known to sit where it was written; a
 * segment's first record starts at its first byte, so whether the log goes
 * on after a segment is one decode per later segment.
 *  - A segment file shorter than the segment size is extended with zeros
 *    at open: the scan then meets zeros where the file ended.
 *  - A segment missing between two others is recreated at open with a
 *    BLANK at its start: every reader, the replication and later
 *    recoveries pass it as they pass the filler at a segment's end.
 *  - Damage (no valid record where one must start): when a later segment
 *    starts with a valid record, a BLANK goes at the damage and the scan
 *    goes on at the next segment; otherwise the damage is the end. A BLANK
 *    is the only way the RocketMQ format has to skip bytes, and it means
 *    "the rest of this segment", so valid records after the damage in the
 *    same segment leave the log: the non-zero bytes taken out are first
 *    written to <segment>.dropped-<offset>, synced, and counted.
 *  - A ConsumeQueue unit of a lost message points at such a BLANK or at
 *    the zeros after it: clog_read() answers -ENOENT there.
 * After a clean stop the checkpoint's end is taken only once checked (no
 * segment short or missing, the records of the last CLOG_TRUST_SEGS
 * segments chain up to it, as RocketMQ's recoverNormally looks at the
 * last three files, and its last record's CRC is right); otherwise the
 * log is scanned from there. Recovery's warnings are not rate-limited:
 * there are at most a few per segment, and each says what was lost.
 */
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

	/* Only the chunks the crashed run still had: the bytes below them are the file's. */
	if (s->old_buf == NULL || in < s->old_lo || in >= s->old_hi)
		return 0;
	a = SP_MAX(a, s->old_lo);
	/*
	 * Once per segment: from there on the file holds what was taken, so the
	 * prefix still matches (and a check per record would be quadratic).
	 * The chunk holding @in must match the file up to it. A chunk below it
	 * may not: retired (durable in the file) and being reused, zeroed in
	 * place before its rename, when the run died. The file has the bytes
	 * there: the buffer is used from above the highest such chunk.
	 */
	if (!s->old_buf_ok) {
		uint64_t bot = SP_MAX(a, in - in % c->ck_size);

		if (memcmp(s->map + bot, s->old_buf + bot, in - bot) != 0) {
			log_warn(CLOG_TAG,
				 "shard %u: the write-behind buffer of segment %020" PRIu64
				 " does not match its file: not used",
				 c->shard, s->start);
			clog__old_buf_drop(c, s);
			return 0;
		}
		for (uint64_t top = bot; top > a; top = bot) {
			bot = SP_MAX(a, top - c->ck_size);
			if (memcmp(s->map + bot, s->old_buf + bot, top - bot) != 0) {
				log_info(CLOG_TAG,
					 "shard %u: the write-behind buffer of segment %020" PRIu64
					 " differs from its file below %" PRIu64
					 " (a retired chunk being reused): used from there on",
					 c->shard, s->start, s->start + top);
				s->old_lo = top;
				break;
			}
		}
	}
	s->old_buf_ok = true;
	r = wire_rec_decode(s->old_buf + in, s->old_hi - in, WIRE_REC_VERIFY_CRC, &m);
	if (r > 0 && m.phys_offset == clog_phys(c->shard, off) &&
	    c->seg_size - in - (uint64_t)r >= WIRE_BLANK_LEN) {
		memcpy(s->map + in, s->old_buf + in, (size_t)r);
		return (uint64_t)r;
	}
	if (r == -ENODATA && m.total_size == c->seg_size - in && s->old_hi - in >= WIRE_BLANK_LEN) {
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

/*
 * The record at local @off of @s if it is valid where it lies: magic, size,
 * body CRC, its PHYSICALOFFSET @off, room for a BLANK after it. Return: its
 * length, or the decode's error (-ERANGE: it names another offset or
 * leaves no room); -ENODATA with *@m a BLANK.
 */
static long
clog_rec_at(const struct clog *c, const struct clog_seg *s, uint64_t off, struct wire_msg *m)
{
	uint64_t in = off - s->start;
	long r = wire_rec_decode(s->map + in, c->seg_size - in, WIRE_REC_VERIFY_CRC, m);

	if (r > 0 && (m->phys_offset != clog_phys(c->shard, off) ||
		      c->seg_size - in - (uint64_t)r < WIRE_BLANK_LEN))
		return -ERANGE;
	return r;
}

/* Why there is no valid record at local @off of @s, in words, into @buf. */
static const char *
clog_why(const struct clog *c, const struct clog_seg *s, uint64_t off, char *buf, size_t n)
{
	uint64_t in = off - s->start;
	struct wire_msg m;
	long r = clog_rec_at(c, s, off, &m);

	if (c->seg_size - in >= WIRE_BLANK_LEN &&
	    memcmp(s->map + in, (const uint8_t[WIRE_BLANK_LEN]){0}, WIRE_BLANK_LEN) == 0)
		return "zeros";
	switch (r) {
	case -ENODATA:
		snprintf(buf, n, "a BLANK of %" PRIu32 " bytes where %" PRIu64 " are left",
			 m.total_size, c->seg_size - in);
		return buf;
	case -EPROTO:
		return "bad magic";
	case -EILSEQ:
		return "body CRC mismatch";
	case -ERANGE:
		if (m.phys_offset == clog_phys(c->shard, off))
			return "a record too close to the segment's end";
		snprintf(buf, n, "a record whose PHYSICALOFFSET is %" PRId64, m.phys_offset);
		return buf;
	default:
		return "a malformed or truncated record";
	}
}

/*
 * Valid records (clog_rec_at()) in [@lo, @hi) of @s, found by a forward
 * scan that tries every byte after damage. *@last_end: local offset past
 * the last one (@lo when none).
 */
static uint64_t
clog_count_valid(const struct clog *c, const struct clog_seg *s, uint64_t lo, uint64_t hi,
		 uint64_t *last_end)
{
	const uint8_t magic[4] = {0xDA, 0xA3, 0x20, 0xA7}; /* WIRE_MAGIC_MESSAGE, big-endian */
	uint64_t n = 0;

	*last_end = lo;
	for (uint64_t off = lo; off < hi && off - s->start + WIRE_REC_FIXED_V4 <= c->seg_size;) {
		struct wire_msg m;
		long r;

		/* The magic first: a byte-by-byte scan of a large span stays cheap. */
		if (memcmp(s->map + (off - s->start) + 4, magic, 4) != 0) {
			off++;
			continue;
		}
		r = clog_rec_at(c, s, off, &m);
		if (r <= 0) {
			off++;
			continue;
		}
		n++;
		off += (uint64_t)r;
		*last_end = off;
	}
	return n;
}

/* In-segment offset past the last non-zero byte of @s in [@a, @b), @a when none. */
static uint64_t
clog_nonzero_end_in(const struct clog_seg *s, uint64_t a, uint64_t b)
{
	/* Backwards, eight bytes at a time once aligned: the tail is usually zero. */
	while (b > a && b % 8 != 0 && s->map[b - 1] == 0)
		b--;
	while (b >= a + 8 && b % 8 == 0) {
		uint64_t w;

		memcpy(&w, s->map + b - 8, 8);
		if (w != 0)
			break;
		b -= 8;
	}
	while (b > a && s->map[b - 1] == 0)
		b--;
	return b;
}

/*
 * Local offset past the last byte of @s that is not zero, at or after @lo
 * (@lo when none). Only the file's data is read: a segment is fallocated
 * and zero-filled a window at a time, and its unwritten extents read as
 * holes (SEEK_DATA), so a 1 GiB segment that holds little is not read
 * whole (nor left in the page cache and in this process's RSS). Where the
 * file system cannot say, all of it is data.
 */
static uint64_t
clog_nonzero_end(const struct clog *c, const struct clog_seg *s, uint64_t lo)
{
	uint64_t a = lo - s->start;
	uint64_t b = c->seg_size;
	uint64_t last = a;

	while (a < b) {
		off_t d = lseek(s->fd, (off_t)a, SEEK_DATA);
		off_t h;
		uint64_t e;

		if (d < 0 && errno == ENXIO)
			break; /* no data past a */
		if (d < 0 || (h = lseek(s->fd, d, SEEK_HOLE)) < 0) {
			last = SP_MAX(last, clog_nonzero_end_in(s, a, b));
			break;
		}
		if ((uint64_t)d >= b)
			break;
		e = clog_nonzero_end_in(s, (uint64_t)d, SP_MIN((uint64_t)h, b));
		if (e > (uint64_t)d)
			last = e;
		a = (uint64_t)h;
	}
	return s->start + last;
}

/*
 * The first valid record (clog_rec_at()) after damage at local @off of @s,
 * within @s: 0 when none (the rest holds none, or only zeros).
 */
static uint64_t
clog_next_valid(const struct clog *c, const struct clog_seg *s, uint64_t off)
{
	uint64_t hi = clog_nonzero_end(c, s, off);
	uint64_t last_end;

	for (uint64_t at = off + 1; at < hi;) {
		/* one record at a time: clog_count_valid() stops at the first it finds */
		if (clog_count_valid(c, s, at, SP_MIN(hi, at + 1), &last_end) == 0) {
			at++;
			continue;
		}
		return at;
	}
	return 0;
}

/*
 * Damage at @off of @s and a valid record at @next in the same segment:
 * the bytes between stay where they are and leave the log as a lost span
 * (sequential readers pass it with clog_lost_skip(), ConsumeQueue units
 * pointing into it read as lost); the records after it stay in the log.
 */
static int
clog_step_over(struct clog *c, const struct clog_seg *s, uint64_t off, uint64_t next)
{
	char why[96];
	const char *w = clog_why(c, s, off, why, sizeof(why));
	int rc = clog__lost_add(c, off, next);

	if (rc != 0)
		return rc;
	c->rep.spans_stepped++;
	c->rep.bytes_stepped += next - off;
	CLOG_REC_WARN("shard %u: segment %020" PRIu64 ": no valid record at %" PRIu64
		      " (%s); the next valid record is at %" PRIu64 ": the %" PRIu64
		      " bytes between are stepped over (left in place, the messages there are "
		      "lost and read as not found), the records after them are kept",
		      c->shard, s->start, off, w, next, next - off);
	return 0;
}

int
clog_step_over_late(struct clog *c, uint64_t off, uint64_t *next)
{
	const struct clog_seg *s = clog_seg_at(c, off);
	struct clog_recovery *rep = &c->rep;
	uint64_t hi, at = 0;
	char why[96];
	const char *w;

	if (s == NULL)
		return -ERANGE;
	w = clog_why(c, s, off, why, sizeof(why));
	hi = clog_next_valid(c, s, off);
	if (hi == 0)
		hi = s->start + c->seg_size; /* none in the segment: the log goes on in the next */
	/* in log order: after the spans below @off (recovery's found them first) */
	while (at < rep->n_lost && c->lost[at].hi <= off)
		at++;
	if (at < rep->n_lost && c->lost[at].lo < hi)
		return -EEXIST; /* inside a span already known: clog_lost_skip() passes it */
	if (clog__lost_insert(c, at, off, hi) != 0)
		return -ENOMEM;
	rep->spans_stepped++;
	rep->bytes_stepped += hi - off;
	CLOG_REC_WARN("shard %u: segment %020" PRIu64 ": no valid record at %" PRIu64
		      " (%s), found by a reader at start below the checkpoint's checked end; "
		      "the log goes on at %" PRIu64 ": the %" PRIu64
		      " bytes between are stepped over (left in place, the messages there are "
		      "lost and read as not found)",
		      c->shard, s->start, off, w, hi, hi - off);
	*next = hi;
	return 0;
}

uint64_t
clog_lost_skip(const struct clog *c, uint64_t off)
{
	uint32_t lo = 0;
	uint32_t hi = c->rep.n_lost;

	/* the spans are in log order and do not overlap */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct clog_span *sp = &c->rep.lost[mid];

		if (off < sp->lo)
			hi = mid;
		else if (off >= sp->hi)
			lo = mid + 1;
		else
			return sp->hi;
	}
	return off;
}

/* Does a segment after @s start with a valid record? Then the log goes on past damage in @s. */
static bool
clog_goes_on(const struct clog *c, const struct clog_seg *s)
{
	for (uint64_t t = s->start + c->seg_size;; t += c->seg_size) {
		const struct clog_seg *ts = clog_seg_at(c, t);
		struct wire_msg m;

		if (ts == NULL)
			return false;
		if (clog_rec_at(c, ts, t, &m) > 0)
			return true;
	}
}

/*
 * A new file named @base CLOG_ASIDE_SUFFIX @off (".N" added while taken),
 * created empty. Return: its fd, or -errno; @name set.
 */
static int
clog_aside_create(struct clog *c, const char *base, uint64_t off, char *name, size_t n)
{
	for (unsigned k = 0; k < 100; k++) {
		int fd;

		if (k == 0)
			snprintf(name, n, "%s" CLOG_ASIDE_SUFFIX "%020" PRIu64, base, off);
		else
			snprintf(name, n, "%s" CLOG_ASIDE_SUFFIX "%020" PRIu64 ".%u", base, off, k);
		fd = c->io->open(c->io->ctx, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd != -EEXIST)
			return fd;
	}
	return -EEXIST;
}

/* Copy [@lo, @hi) of @s to <segment>.dropped-<@lo>, durably, before recovery changes them. */
static int
clog_put_aside(struct clog *c, const struct clog_seg *s, uint64_t lo, uint64_t hi, char *name,
	       size_t n)
{
	int fd = clog_aside_create(c, s->path, lo, name, n);
	int rc;

	if (fd < 0)
		return fd;
	rc = store_io_write_all(c->io, fd, s->map + (lo - s->start), hi - lo, 0);
	if (rc == 0)
		rc = c->io->fdatasync(c->io->ctx, fd);
	(void)c->io->close(c->io->ctx, fd);
	if (rc == 0)
		rc = c->io->sync_dir(c->io->ctx, c->dir);
	if (rc != 0) {
		(void)c->io->unlink(c->io->ctx, name);
		log_err(CLOG_TAG,
			"shard %u: cannot keep bytes %" PRIu64 "..%" PRIu64
			" of segment %020" PRIu64
			" aside in %s: %s; free space in %s and start again",
			c->shard, lo, hi, s->start, name, strerror(-rc), c->dir);
		return rc;
	}
	c->rep.files_aside++;
	return 0;
}

/* What lies in [@off, the segment's end) of @s before recovery takes it out. */
struct clog_out {
	uint64_t recs; /* valid records */
	uint64_t hi;   /* past the last non-zero byte or valid record */
	char aside[PATH_MAX];
};

/*
 * Take [@off, its segment's end) of @s out of the log: count its valid
 * records, keep its non-zero bytes aside, zero it (a BLANK first with
 * @blank), sync. *@o says what was taken.
 */
static int
clog_take_out(struct clog *c, struct clog_seg *s, uint64_t off, bool blank, struct clog_out *o)
{
	uint64_t in = off - s->start;
	uint64_t last_end;
	int rc;

	o->aside[0] = '\0';
	o->hi = clog_nonzero_end(c, s, off);
	o->recs = clog_count_valid(c, s, off, o->hi, &last_end);
	o->hi = SP_MAX(o->hi, last_end);
	if (o->hi > off) {
		rc = clog_put_aside(c, s, off, o->hi, o->aside, sizeof(o->aside));
		if (rc != 0)
			return rc;
		memset(s->map + in, 0, o->hi - off);
	}
	if (blank)
		(void)!wire_rec_encode_blank((uint32_t)(c->seg_size - in), s->map + in,
					     c->seg_size - in);
	if (o->hi == off && !blank)
		return 0;
	c->rep.recs_dropped += o->recs;
	c->rep.bytes_dropped += o->hi - off;
	return c->io->fdatasync(c->io->ctx, s->fd);
}

/*
 * Damage at @off of @s and the log goes on in a later segment: blank @s
 * from @off to its end (kept aside first), so the scan, readers and later
 * recoveries go on at the next segment.
 */
static int
clog_blank_from(struct clog *c, struct clog_seg *s, uint64_t off)
{
	char why[96];
	const char *w = clog_why(c, s, off, why, sizeof(why));
	struct clog_out o;
	int rc = clog_take_out(c, s, off, true, &o);

	if (rc == 0)
		rc = clog__lost_add(c, off, s->start + c->seg_size);
	if (rc != 0)
		return rc;
	c->rep.spans_blanked++;
	CLOG_REC_WARN("shard %u: segment %020" PRIu64 ": no valid record at %" PRIu64
		      " (%s) but later segments hold records: %" PRIu64
		      " valid records and %" PRIu64 " bytes up to the segment's end are dropped%s%s"
		      "; the segment is blank from there and the log goes on at %020" PRIu64,
		      c->shard, s->start, off, w, o.recs, o.hi - off,
		      o.aside[0] ? ", kept aside in " : "", o.aside, s->start + c->seg_size);
	return 0;
}

/*
 * The log ends at @end in @s: what the file holds after it is taken out
 * (kept aside when not zero). @cut: a replication cut asked for it, which
 * said so already: zeroed only, as before.
 */
static int
clog_end_at(struct clog *c, struct clog_seg *s, uint64_t end, bool cut)
{
	char why[96];
	const char *w = clog_why(c, s, end, why, sizeof(why));
	struct clog_out o;
	int rc;

	if (cut) {
		uint64_t hi = clog_nonzero_end(c, s, end);

		if (hi > end) {
			memset(s->map + (end - s->start), 0, hi - end);
			return c->io->fdatasync(c->io->ctx, s->fd);
		}
		return 0;
	}
	rc = clog_take_out(c, s, end, false, &o);
	if (rc != 0 || o.hi == end)
		return rc;
	CLOG_REC_WARN("shard %u: segment %020" PRIu64 ": the log ends at %" PRIu64 " (%s): %" PRIu64
		      " valid records and %" PRIu64 " bytes after it are dropped, kept aside in %s",
		      c->shard, s->start, end, w, o.recs, o.hi - end, o.aside);
	return 0;
}

/* Segment @s lies past the end: deleted when it holds nothing, else renamed aside. */
static int
clog_past_end(struct clog *c, struct clog_seg *s, uint64_t end, bool cut)
{
	uint64_t hi = clog_nonzero_end(c, s, s->start);
	char name[PATH_MAX];
	uint64_t last_end;
	uint64_t recs;
	int fd;
	int rc;

	if (cut || s->recreated || hi == s->start) {
		if (cut)
			log_warn(CLOG_TAG,
				 "shard %u: deleting segment %020" PRIu64 " past the end %" PRIu64,
				 c->shard, s->start, end);
		else
			log_info(CLOG_TAG,
				 "shard %u: removing segment %020" PRIu64 " past the end %" PRIu64
				 " (it holds nothing)",
				 c->shard, s->start, end);
		return c->io->unlink(c->io->ctx, s->path);
	}
	recs = clog_count_valid(c, s, s->start, hi, &last_end);
	fd = clog_aside_create(c, s->path, s->start, name, sizeof(name));
	if (fd < 0)
		return fd;
	(void)c->io->close(c->io->ctx, fd);
	rc = c->io->rename(c->io->ctx, s->path, name);
	if (rc != 0) {
		(void)c->io->unlink(c->io->ctx, name);
		log_err(CLOG_TAG, "shard %u: cannot rename segment %020" PRIu64 " to %s: %s",
			c->shard, s->start, name, strerror(-rc));
		return rc;
	}
	c->rep.files_aside++;
	c->rep.recs_dropped += recs;
	c->rep.bytes_dropped += SP_MAX(hi, last_end) - s->start;
	CLOG_REC_WARN("shard %u: segment %020" PRIu64 " lies past the end %" PRIu64
		      " and does not start with a valid record: its %" PRIu64
		      " valid records and %" PRIu64 " bytes are dropped, the segment renamed to %s",
		      c->shard, s->start, end, recs, SP_MAX(hi, last_end) - s->start, name);
	return 0;
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

/*
 * Can a clean checkpoint's end @e be taken? No segment was short or
 * missing, the segment holding its last byte exists, the records of the
 * last CLOG_TRUST_SEGS segments (from *@win) chain up to @e exactly, and the
 * last record's CRC is right. Return: NULL, or why not (in @buf).
 */
static const char *
clog_trust_refused(const struct clog *c, uint64_t e, uint64_t *win, char *buf, size_t n)
{
	uint64_t first = atomic_load_relaxed(&c->min);
	uint64_t back = (uint64_t)(CLOG_TRUST_SEGS - 1) * c->seg_size;
	uint64_t last = UINT64_MAX;
	const struct clog_seg *s;
	uint64_t pos;

	if (e == first) {
		*win = first;
		return c->suspect_from != UINT64_MAX ? "a segment was short or missing" : NULL;
	}
	pos = (e - 1) - (e - 1) % c->seg_size; /* the segment holding its last byte */
	*win = pos - first > back ? pos - back : first;
	if (c->suspect_from != UINT64_MAX)
		return "a segment was short or missing";
	if (clog_seg_at(c, pos) == NULL)
		return "the segment holding it is missing";
	for (pos = *win; pos < e;) {
		uint64_t in;
		struct wire_msg m;
		long r;

		s = clog_seg_at(c, pos);
		if (s == NULL) {
			snprintf(buf, n, "segment %020" PRIu64 " is missing", pos);
			return buf;
		}
		in = pos - s->start;
		/* Size and PHYSICALOFFSET of each; the CRC of the last one only. */
		r = wire_rec_decode(s->map + in, c->seg_size - in, 0, &m);
		if (r == -ENODATA && m.total_size == c->seg_size - in) {
			last = pos;
			pos = s->start + c->seg_size;
			continue;
		}
		if (r <= 0 || m.phys_offset != clog_phys(c->shard, pos) ||
		    c->seg_size - in - (uint64_t)r < WIRE_BLANK_LEN) {
			/* A span an earlier start stepped over: the chain goes on after it. */
			uint64_t next = clog_next_valid(c, s, pos);

			if (next != 0) {
				pos = next;
				continue;
			}
			snprintf(buf, n, "no valid record at %" PRIu64, pos);
			return buf;
		}
		last = pos;
		pos += (uint64_t)r;
	}
	if (pos != e) {
		snprintf(buf, n, "the record at %" PRIu64 " runs past it", last);
		return buf;
	}
	if (last != UINT64_MAX) {
		struct wire_msg m;

		s = clog_seg_at(c, last);
		if (clog_rec_at(c, s, last, &m) == -EILSEQ) {
			snprintf(buf, n,
				 "the body CRC of its last record, at %" PRIu64 ", is wrong", last);
			return buf;
		}
	}
	return NULL;
}

/*
 * Where a clean start checks records from: the last start's verified mark
 * (a record boundary, the log's end then), or the trust window @win when it
 * is not known or does not fit below the end @e.
 */
static uint64_t
clog_verify_from(const struct clog *c, uint64_t win, uint64_t e)
{
	uint64_t first = atomic_load_relaxed(&c->min);

	if (c->verified < 0 || (uint64_t)c->verified > e)
		return win;
	return SP_MAX((uint64_t)c->verified, first);
}

/*
 * Scan from @from (a record boundary) to the end, or to @limit (a clean
 * checkpoint's end: what lies past it is not the log's): verify every
 * record, take from the crashed run's buffers what the files lack, step
 * over damage a valid record follows in its segment, blank damage the log
 * goes on after in a later segment. Return: 0 with *@end, or -errno.
 */
static int
clog_scan(struct clog *c, uint64_t from, uint64_t limit, uint64_t *end)
{
	uint64_t off = from;
	uint64_t final = UINT64_MAX; /* the last record found, past any BLANK */
	struct wire_msg fm = {0};
	bool damaged = false;

	while (off < limit) {
		struct clog_seg *s = clog_seg_at(c, off);
		struct wire_msg m;
		uint64_t next;
		long r;
		int rc;

		if (s == NULL)
			break;
		r = clog_rec_at(c, s, off, &m);
		if (r > 0) {
			final = off;
			fm = m;
			off += (uint64_t)r;
			c->rep.recs_after += damaged;
			continue;
		}
		if (r == -ENODATA && m.total_size == c->seg_size - (off - s->start)) {
			off = s->start + c->seg_size;
			final = UINT64_MAX;
			damaged |= s->recreated;
			continue;
		}
		/* Appended and not yet written back when the process died? */
		r = (long)clog_take_from_old_buf(c, s, from, off);
		if (r > 0) {
			c->rep.taken += (uint64_t)r;
			continue;
		}
		/* A valid record later in this segment: only the damaged span is lost. */
		next = clog_next_valid(c, s, off);
		if (next != 0) {
			rc = clog_step_over(c, s, off, next);
			if (rc != 0)
				return rc;
			damaged = true;
			off = next;
			continue;
		}
		if (!clog_goes_on(c, s))
			break;
		rc = clog_blank_from(c, s, off);
		if (rc != 0)
			return rc;
		damaged = true;
		off = s->start + c->seg_size;
		final = UINT64_MAX;
	}
	/*
	 * A write torn at the log's end (a disk that lost the last pages it
	 * said it had synced) can leave the final record with its properties
	 * zeroed: the body CRC does not cover them, so only their NUL bytes
	 * tell. That record is the tail's, and is cut with it (a SYNC_MASTER
	 * takes it back from its slave, bk_tailback.c).
	 */
	if (final != UINT64_MAX && fm.props_len > 0 && memchr(fm.props, 0, fm.props_len) != NULL) {
		log_warn(CLOG_TAG,
			 "shard %u: the log's last record, at %" PRIu64
			 ", has NUL bytes in its properties (a write torn at the end): the log "
			 "ends before it",
			 c->shard, final);
		off = final;
	}
	*end = off;
	return 0;
}

int
clog_recover(struct clog *c, uint64_t scan_from, int64_t trusted_end)
{
	struct clog_recovery *rep = &c->rep;
	uint64_t first = atomic_load_relaxed(&c->min);
	uint64_t top = c->cur->start + c->seg_size; /* past the last segment found */
	uint64_t ckpt = trusted_end >= 0 ? (uint64_t)trusted_end : scan_from;
	bool cut_done = false;
	uint64_t end = 0;
	uint64_t from = UINT64_MAX;
	struct clog_seg *last;
	int rc;

	rep->scan_from = UINT64_MAX;
	if (rep->empty_dir && ckpt > first) {
		/* The caller says what to do; the next start must find the directory as it was. */
		(void)c->io->unlink(c->io->ctx, c->cur->path);
		log_err(CLOG_TAG,
			"shard %u: %s holds no segment but the checkpoint says the log reached "
			"%" PRIu64,
			c->shard, c->dir, ckpt);
		return -ENOENT;
	}
	if (trusted_end >= 0 && (uint64_t)trusted_end < first) {
		log_err(CLOG_TAG,
			"shard %u: the checkpoint's end %" PRIu64
			" is below the first segment %020" PRIu64
			": these segments are not the ones it was written for; if they are this "
			"store's, remove the store's checkpoint file and start again (the log is "
			"then scanned)",
			c->shard, trusted_end, first);
		return -EUCLEAN;
	}
	if (trusted_end >= 0) {
		char buf[96];
		uint64_t win;
		const char *why =
			clog_trust_refused(c, (uint64_t)trusted_end, &win, buf, sizeof(buf));

		if (why == NULL) {
			uint64_t vfrom = clog_verify_from(c, win, (uint64_t)trusted_end);
			uint32_t blanked = rep->spans_blanked;

			/* Every record since the last start's check, CRC included. */
			rc = clog_scan(c, vfrom, (uint64_t)trusted_end, &end);
			if (rc != 0)
				return rc;
			if (end != (uint64_t)trusted_end || rep->spans_blanked != blanked) {
				from = vfrom;
				rep->scan_from = vfrom;
				rep->trust_refused = true;
				CLOG_REC_WARN("shard %u: the clean checkpoint's end %" PRIu64
					      " does not match the log: checking every record "
					      "from %" PRIu64 ", the log ends at %" PRIu64,
					      c->shard, trusted_end, vfrom, end);
			}
		} else {
			from = SP_MIN(win, c->suspect_from);
			if (c->verified >= 0)
				from = SP_MIN(from, (uint64_t)c->verified);
			rep->trust_refused = true;
			CLOG_REC_WARN("shard %u: the clean checkpoint's end %" PRIu64
				      " does not match the log (%s): recovering by scanning from "
				      "%" PRIu64,
				      c->shard, trusted_end, why, SP_MAX(from, first));
		}
	} else {
		from = SP_MIN(scan_from, c->suspect_from);
		if (c->verified >= 0)
			from = SP_MIN(from, (uint64_t)c->verified);
	}
	if (from != UINT64_MAX && rep->scan_from == UINT64_MAX) {
		from = SP_MAX(from, first);
		/* The checkpoint is past every segment found: check the last one whole. */
		if (from >= top)
			from = top - c->seg_size;
		rep->scan_from = from;
		rc = clog_scan(c, from, UINT64_MAX, &end);
		if (rc != 0)
			return rc;
	}
	if (end < ckpt) {
		rep->lost_below = ckpt - end;
		CLOG_REC_WARN("shard %u: the log ends at %" PRIu64 ", %" PRIu64
			      " bytes short of the checkpoint's %s %" PRIu64
			      ": the records there are lost (a segment deleted, truncated or "
			      "damaged)",
			      c->shard, end, ckpt - end,
			      trusted_end >= 0 ? "end" : "durable offset", ckpt);
	}
	if (c->cut && c->cut_at < end) {
		uint64_t was = end;

		cut_done = true;
		end = clog_boundary_at_or_below(c, c->cut_at, first);
		rep->cut = was - end;
		log_warn(CLOG_TAG,
			 "shard %u: cutting %" PRIu64 " bytes past %" PRIu64 " (asked: %" PRIu64
			 ", the master's end)",
			 c->shard, was - end, end, c->cut_at);
	}

	/* Past the end: the rest of the end's segment, every later segment. */
	last = clog_seg_at(c, end);
	for (uint64_t s = end - end % c->seg_size + c->seg_size;; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);

		if (seg == NULL)
			break;
		rc = clog_past_end(c, seg, end, cut_done);
		atomic_store_release(&c->segs[clog_slot(c, s)], NULL);
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
		rc = clog_end_at(c, last, end, cut_done);
		if (rc != 0)
			return rc;
	}
	/* Everything up to the end must be durable before anyone relies on it. */
	from = SP_MIN(SP_MIN(from, scan_from), end);
	rc = clog__sync_range(c, from - from % c->seg_size, end + 1);
	if (rc != 0)
		return rc;
	if (rep->taken > 0)
		log_warn(CLOG_TAG,
			 "shard %u: %" PRIu64
			 " bytes of appends the crashed run had not written back "
			 "taken from its write-behind buffers",
			 c->shard, rep->taken);
	if (rep->segs_short + rep->segs_missing + rep->spans_blanked + rep->files_aside > 0 ||
	    rep->lost_below > 0 || rep->trust_refused)
		CLOG_REC_WARN("shard %u: recovered to %" PRIu64 " from %s: %" PRIu64
			      " records (%" PRIu64 " bytes) dropped, %u files kept aside; %" PRIu64
			      " records kept after damage; %u short and %u missing segments, %u "
			      "damaged spans blanked, %" PRIu64 " bytes lost below the checkpoint",
			      c->shard, end,
			      rep->scan_from == UINT64_MAX ? "a checked clean end" : "a scan",
			      rep->recs_dropped, rep->bytes_dropped, rep->files_aside,
			      rep->recs_after, rep->segs_short, rep->segs_missing,
			      rep->spans_blanked, rep->lost_below);
	if (rep->spans_stepped > 0)
		CLOG_REC_WARN("shard %u: %u damaged spans (%" PRIu64
			      " bytes) stepped over; the records after each are kept",
			      c->shard, rep->spans_stepped, rep->bytes_stepped);
	/* Durable in the segment files now: the old buffers can go. */
	clog_old_bufs_drop(c);
	rep->end = end;

	/*
	 * The segment appends go to next needs its write-behind buffer: the
	 * chunk holding the end, the log so far copied into it, and room for
	 * a BLANK after it; the preparing thread maps the rest of the window.
	 */
	{
		uint64_t in = end - last->start;
		uint64_t lo = in - in % c->ck_size;

		rc = atomic_load_relaxed(&last->buf) == NULL ? clog__res_new(c, last, lo) : 0;
		lo = atomic_load_relaxed(&last->buf_lo);
		while (rc == 0 && atomic_load_relaxed(&last->buf_hi) <
					  SP_MIN(c->seg_size, in + WIRE_BLANK_LEN))
			rc = clog__ck_add(c, last, in);
		if (rc != 0)
			return rc;
		memcpy(atomic_load_relaxed(&last->buf) + lo, last->map + lo, in - lo);
	}
	c->cur = last;
	c->cur_buf = atomic_load_relaxed(&last->buf);
	c->cur_hi = atomic_load_relaxed(&last->buf_hi);
	c->wpos = end;
	c->cur_last_ms = INT64_MAX;
	atomic_store_relaxed(&last->last_ms, INT64_MAX);
	atomic_store_release(&c->cur_start, last->start);
	c->wb = end;
	atomic_store_release(&c->written, end);
	atomic_store_release(&c->flushed, end);
	return 0;
}

const struct clog_recovery *
clog_recovery(const struct clog *c)
{
	return &c->rep;
}
