// SPDX-License-Identifier: Apache-2.0
/*
 * test_clog_recover.c - CommitLog recovery from short, missing and cut
 * segments, after a crash (a scan, from no checkpoint or from one) and
 * after a clean stop (a checked end): every undamaged record is found,
 * and the counts clog_recovery() reports, the files kept aside and the
 * warning lines say what was dropped. Small segments of about 82 records.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "common/log.h"
#include "store/clog.h"

#define SEG (64u << 10)
#define N 300
#define W (N + 5) /* ids of records: N before the damage, 5 appended after recovery */
#define BODY 700

enum mode {
	CRASH, /* no checkpoint: scan from 0 */
	CLEAN, /* a clean checkpoint: the end is checked, then taken */
};

static char dir[200];
static char logpath[220];
static uint64_t ends[N];
static uint64_t rsz; /* every record is this long */
static uint8_t body[BODY];

static void
mktmp(void)
{
	char tmpl[] = "/tmp/sp-clogrec-XXXXXX";

	T_ASSERT(mkdtemp(tmpl) != NULL);
	snprintf(dir, sizeof(dir), "%s/commitlog/3", tmpl);
	snprintf(logpath, sizeof(logpath), "%s/log", tmpl);
}

static void
rmtmp(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%.*s'", (int)(strstr(dir, "/commitlog") - dir), dir);
	T_ASSERT(system(cmd) == 0);
}

static struct clog *
open_log(void)
{
	struct clog_cfg cfg = {
		.io = &store_io_posix, .dir = dir, .shard = 3, .seg_size = SEG, .verified = -1};
	struct clog *c;

	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	return c;
}

static void
msg(struct wire_msg *m, uint32_t i)
{
	memset(m, 0, sizeof(*m));
	for (uint32_t k = 0; k < BODY; k++)
		body[k] = (uint8_t)(i * 7 + k);
	m->queue_id = (int32_t)(i % 4);
	m->queue_offset = i / 4;
	m->store_ts = 1000 + i;
	m->body = body;
	m->body_len = BODY;
	m->topic = "T";
	m->topic_len = 1;
}

static void
append(struct clog *c, uint32_t from, uint32_t n, uint64_t *out)
{
	for (uint32_t i = from; i < from + n; i++) {
		struct wire_msg m;
		uint64_t end;
		long r;

		msg(&m, i);
		r = clog_append(c, &m, &end);
		if (r == -EAGAIN) {
			T_ASSERT_EQ(clog_prepare_next(c), 0);
			r = clog_append(c, &m, &end);
		}
		T_ASSERT(r > 0);
		clog_commit(c);
		if (out != NULL)
			out[i - from] = end;
	}
}

/* N records over segments 0..3, a prepared (empty) segment 4, flushed and closed. */
static void
build(void)
{
	struct clog *c;

	mktmp();
	c = open_log();
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append(c, 0, N, ends);
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ(clog_prepare_next(c), 0);
	clog_close(c);
	rsz = ends[0];
	T_ASSERT_EQ(ends[N - 1] / SEG, 3);
}

static uint64_t
start_of(uint32_t i)
{
	return ends[i] - rsz;
}

static void
seg_path(uint64_t start, char *path, size_t n)
{
	snprintf(path, n, "%s/%020llu", dir, (unsigned long long)start);
}

/* Overwrite [off, off + len) of the log: zeros, or garbage with @garbage. */
static void
damage(uint64_t off, uint32_t len, bool garbage)
{
	char path[600];
	uint8_t buf[4096];
	uint32_t x = 12345;
	int fd;

	T_ASSERT(len <= sizeof(buf));
	for (uint32_t k = 0; k < len; k++) {
		x = x * 1103515245u + 12345u;
		buf[k] = garbage ? (uint8_t)(x >> 16) : 0;
	}
	seg_path(off - off % SEG, path, sizeof(path));
	fd = open(path, O_WRONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pwrite(fd, buf, len, (off_t)(off % SEG)), (long)len);
	close(fd);
}

/* Open and recover as after a crash (@ckpt: the checkpoint's durable offset) or a clean stop. */
static struct clog *
recover(enum mode mode, uint64_t ckpt)
{
	struct clog *c = open_log();

	if (mode == CLEAN)
		T_ASSERT_EQ(clog_recover(c, ends[N - 1], (int64_t)ends[N - 1]), 0);
	else
		T_ASSERT_EQ(clog_recover(c, ckpt, -1), 0);
	return c;
}

/*
 * Walk the log from its start: every record must be one of ours, whole,
 * in order, and wanted (@want[i]); every wanted one must be there.
 */
static void
check_log(struct clog *c, const bool *want)
{
	uint64_t off = clog_min(c);
	uint32_t seen = 0;
	uint32_t wanted = 0;
	int64_t prev = -1;

	for (uint32_t i = 0; i < W; i++)
		wanted += want[i];
	for (;;) {
		const uint8_t *rec;
		uint64_t next;
		struct wire_msg m;
		long r = clog_read(c, off, &rec, &next);
		uint32_t i;

		if (r == -ENODATA) {
			off = next;
			continue;
		}
		if (r == -ERANGE)
			break;
		/* A span recovery stepped over: its bytes stay, readers pass them. */
		if (r < 0 && clog_lost_skip(c, off) != off) {
			off = clog_lost_skip(c, off);
			continue;
		}
		T_ASSERT(r > 0);
		T_ASSERT_EQ(wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m), r);
		i = (uint32_t)(m.queue_offset * 4 + m.queue_id);
		T_ASSERT(i < W && (int64_t)i > prev);
		if (!want[i])
			T_FAIL("record %u (at %llu) should be gone", i, (unsigned long long)off);
		T_ASSERT_EQ(m.body[0], (uint8_t)(i * 7));
		T_ASSERT_EQ_U64(clog_phys_local(m.phys_offset), off);
		if (i < N)
			T_ASSERT_EQ_U64(off, start_of(i));
		prev = i;
		seen++;
		off = next;
	}
	T_ASSERT_EQ(seen, wanted);
}

/* Records of ours in the file kept aside at @path (bytes from local @base). */
static uint32_t
count_aside(const char *path, uint64_t base)
{
	static uint8_t buf[SEG];
	uint32_t n = 0;
	size_t len;
	FILE *f = fopen(path, "rb");

	if (f == NULL)
		T_FAIL("no file %s", path);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	for (size_t pos = 0; pos < len;) {
		struct wire_msg m;
		long r = wire_rec_decode(buf + pos, len - pos, WIRE_REC_VERIFY_CRC, &m);

		if (r > 0 && clog_phys_local(m.phys_offset) == base + pos) {
			n++;
			pos += (size_t)r;
		} else {
			pos++;
		}
	}
	return n;
}

static void
aside_path(uint64_t seg, uint64_t off, char *path, size_t n)
{
	snprintf(path, n, "%s/%020llu.dropped-%020llu", dir, (unsigned long long)seg,
		 (unsigned long long)off);
}

/* Log lines go to a file from here on; log_has() looks for a line. */
static void
log_capture(void)
{
	int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);

	T_ASSERT(fd >= 0);
	log_set_fd(fd);
}

static bool
log_has(const char *needle)
{
	static char buf[1 << 16];
	FILE *f = fopen(logpath, "r");
	size_t n;

	T_ASSERT(f != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* After recovery, appends go on, and a clean reopen takes the end without a scan. */
static void
check_goes_on(struct clog *c, bool *want)
{
	uint64_t end;

	append(c, N, W - N, NULL);
	for (uint32_t i = N; i < W; i++)
		want[i] = true;
	T_ASSERT_EQ(clog_flush(c), 0);
	end = clog_flushed(c);
	clog_close(c);
	c = open_log();
	T_ASSERT_EQ(clog_recover(c, end, (int64_t)end), 0);
	T_ASSERT(!clog_recovery(c)->trust_refused);
	T_ASSERT_EQ(clog_recovery(c)->scan_from, UINT64_MAX);
	T_ASSERT_EQ(clog_recovery(c)->segs_missing + clog_recovery(c)->segs_short, 0);
	T_ASSERT_EQ_U64(clog_written(c), end);
	check_log(c, want);
	clog_close(c);
}

/*
 * Segment 1 cut to 20,000 bytes: its records up to there stay, the
 * segments after it too; nothing valid is dropped.
 */
static void
test_short_middle(void)
{
	for (int mode = CRASH; mode <= CLEAN; mode++) {
		const struct clog_recovery *rep;
		uint64_t cut = SEG + 20000;
		uint64_t dmg = 0;
		uint32_t after = 0;
		bool want[W] = {false};
		char path[600];
		struct clog *c;

		build();
		for (uint32_t i = 0; i < N; i++) {
			want[i] = ends[i] <= cut || start_of(i) >= 2 * SEG;
			if (!want[i] && dmg == 0)
				dmg = start_of(i);
			after += start_of(i) >= 2 * SEG;
		}
		seg_path(SEG, path, sizeof(path));
		T_ASSERT_EQ(truncate(path, 20000), 0);
		log_capture();
		c = recover((enum mode)mode, 0);
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), ends[N - 1]);
		T_ASSERT_EQ(rep->segs_short, 1);
		T_ASSERT_EQ_U64(rep->bytes_short, SEG - 20000);
		T_ASSERT_EQ(rep->spans_blanked, 1);
		T_ASSERT_EQ(rep->recs_dropped, 0);
		/* The torn record's bytes up to where the file ended, kept aside. */
		T_ASSERT(rep->bytes_dropped > 0 && rep->bytes_dropped <= cut - dmg);
		T_ASSERT_EQ(rep->files_aside, 1);
		T_ASSERT_EQ(rep->recs_after, after);
		T_ASSERT_EQ(rep->trust_refused, mode == CLEAN);
		T_ASSERT_EQ_U64(rep->scan_from, mode == CLEAN ? SEG : 0);
		T_ASSERT_EQ(rep->n_lost, 1);
		T_ASSERT_EQ_U64(rep->lost[0].lo, dmg);
		T_ASSERT_EQ_U64(rep->lost[0].hi, 2 * SEG);
		T_ASSERT_EQ(rep->lost_below, 0);
		T_ASSERT(
			log_has("W store.clog: shard 3: segment 00000000000000065536 is 20000 "
				"bytes, not 65536 (truncated): extended with zeros; its last 45536 "
				"bytes are gone, recovery keeps its records up to the last valid "
				"one"));
		T_ASSERT(log_has("W store.clog: shard 3: segment 00000000000000065536: no valid "
				 "record at "));
		check_goes_on(c, want);
		rmtmp();
	}
}

/* The last segment holding records cut to 20,000 bytes: the log ends at its last whole record. */
static void
test_short_last(void)
{
	for (int mode = CRASH; mode <= CLEAN + 1; mode++) {
		const struct clog_recovery *rep;
		uint64_t cut = 3 * SEG + 20000;
		uint64_t end = 0;
		bool want[W] = {false};
		char path[600];
		struct clog *c;

		build();
		for (uint32_t i = 0; i < N; i++) {
			want[i] = ends[i] <= cut;
			if (want[i])
				end = ends[i];
		}
		seg_path(3 * SEG, path, sizeof(path));
		T_ASSERT_EQ(truncate(path, 20000), 0);
		/* CLEAN + 1: a crash with a checkpoint whose durable offset was the old end. */
		c = recover(mode == CLEAN ? CLEAN : CRASH, mode == CRASH ? 0 : ends[N - 1]);
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), end);
		T_ASSERT_EQ(rep->segs_short, 1);
		T_ASSERT_EQ(rep->spans_blanked, 0);
		T_ASSERT_EQ(rep->recs_dropped, 0);
		T_ASSERT_EQ(rep->files_aside, rep->bytes_dropped > 0);
		T_ASSERT_EQ_U64(rep->lost_below, mode == CRASH ? 0 : ends[N - 1] - end);
		/* The prepared segment after it held nothing: removed. */
		seg_path(4 * SEG, path, sizeof(path));
		T_ASSERT(access(path, F_OK) != 0);
		check_goes_on(c, want);
		rmtmp();
	}
}

/* Segment 1 deleted: recreated blank, every record of the others kept. */
static void
test_missing_middle(void)
{
	for (int mode = CRASH; mode <= CLEAN + 1; mode++) {
		const struct clog_recovery *rep;
		const uint8_t *rec;
		uint64_t next;
		bool want[W] = {false};
		uint32_t after = 0;
		char path[600];
		struct clog *c;

		build();
		for (uint32_t i = 0; i < N; i++) {
			want[i] = start_of(i) < SEG || start_of(i) >= 2 * SEG;
			after += start_of(i) >= 2 * SEG;
		}
		seg_path(SEG, path, sizeof(path));
		T_ASSERT_EQ(unlink(path), 0);
		log_capture();
		/* CLEAN + 1: a crash whose checkpoint points into the missing segment. */
		c = recover(mode == CLEAN ? CLEAN : CRASH, mode == CRASH ? 0 : start_of(120));
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), ends[N - 1]);
		T_ASSERT_EQ(rep->segs_missing, 1);
		T_ASSERT_EQ(rep->spans_blanked + rep->recs_dropped + rep->files_aside, 0);
		T_ASSERT_EQ(rep->recs_after, after);
		T_ASSERT_EQ_U64(rep->scan_from, mode == CRASH ? 0 : SEG);
		T_ASSERT_EQ(rep->n_lost, 1);
		T_ASSERT_EQ_U64(rep->lost[0].lo, SEG);
		T_ASSERT_EQ_U64(rep->lost[0].hi, 2 * SEG);
		/* A unit pointing into it reads as lost; its start is a BLANK to pass. */
		T_ASSERT_EQ(clog_read(c, start_of(100), &rec, &next), -ENOENT);
		T_ASSERT_EQ(clog_read(c, SEG, &rec, &next), -ENODATA);
		T_ASSERT_EQ_U64(next, 2 * SEG);
		T_ASSERT(log_has(
			"W store.clog: shard 3: segment 00000000000000065536 is missing "
			"(between 00000000000000000000 and 00000000000000131072): recreated "
			"blank; the records it held (up to 65536 bytes) are lost, the segments "
			"after it are kept"));
		T_ASSERT(after > 100);
		check_goes_on(c, want);
		rmtmp();
	}
}

/* Segments 3 (the last holding records) and 4 deleted: the log ends at segment 3's start, said. */
static void
test_missing_last(void)
{
	for (int mode = CRASH; mode <= CLEAN; mode++) {
		const struct clog_recovery *rep;
		uint64_t ckpt;
		bool want[W] = {false};
		char path[600];
		struct clog *c;

		build();
		ckpt = mode == CLEAN ? ends[N - 1] : start_of(250);
		for (uint32_t i = 0; i < N; i++)
			want[i] = start_of(i) < 3 * SEG;
		T_ASSERT(start_of(250) >= 3 * SEG);
		seg_path(3 * SEG, path, sizeof(path));
		T_ASSERT_EQ(unlink(path), 0);
		seg_path(4 * SEG, path, sizeof(path));
		T_ASSERT_EQ(unlink(path), 0);
		log_capture();
		c = recover((enum mode)mode, ckpt);
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), 3 * SEG);
		T_ASSERT_EQ_U64(rep->lost_below, ckpt - 3 * SEG);
		T_ASSERT_EQ(rep->trust_refused, mode == CLEAN);
		T_ASSERT_EQ_U64(rep->scan_from, mode == CLEAN ? SEG : 2 * SEG);
		snprintf(
			path, sizeof(path),
			"W store.clog: shard 3: the clean checkpoint's end %llu does not match the "
			"log (the segment holding it is missing): recovering by scanning from "
			"65536",
			(unsigned long long)ends[N - 1]);
		T_ASSERT(log_has(path) == (mode == CLEAN));
		snprintf(path, sizeof(path),
			 "W store.clog: shard 3: the log ends at 196608, %llu bytes short of the "
			 "checkpoint's %s %llu: the records there are lost",
			 (unsigned long long)(ckpt - 3 * SEG),
			 mode == CLEAN ? "end" : "durable offset", (unsigned long long)ckpt);
		T_ASSERT(log_has(path));
		check_goes_on(c, want);
		rmtmp();
	}
}

/*
 * Damage (zeros, or garbage) inside segment 1 with valid records after it
 * in the segment: only the records it touches are lost; recovery steps
 * over their span (left in place) and keeps the rest of the segment.
 */
static void
test_cut_middle(void)
{
	for (int mode = CRASH; mode <= CLEAN + 1; mode++) {
		const struct clog_recovery *rep;
		uint64_t from;
		uint64_t hi = 0;
		uint32_t after = 0;
		bool want[W] = {false};
		char path[600];
		struct clog *c;

		build();
		from = start_of(100) + 10;
		T_ASSERT_EQ(start_of(100) / SEG, 1);
		for (uint32_t i = 0; i < N; i++) {
			want[i] = i < 100 || start_of(i) >= from + 2000;
			if (i >= 100 && want[i] && hi == 0)
				hi = start_of(i);
			after += i >= 100 && want[i];
		}
		T_ASSERT(hi / SEG == 1);
		/* CLEAN + 1: garbage instead of zeros, after a crash. */
		damage(from, 2000, mode == CLEAN + 1);
		log_capture();
		c = recover(mode == CLEAN ? CLEAN : CRASH, 0);
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), ends[N - 1]);
		T_ASSERT_EQ(rep->spans_blanked, 0);
		T_ASSERT_EQ(rep->spans_stepped, 1);
		T_ASSERT_EQ_U64(rep->bytes_stepped, hi - start_of(100));
		T_ASSERT_EQ(rep->recs_dropped, 0);
		T_ASSERT_EQ(rep->recs_after, after);
		T_ASSERT_EQ(rep->files_aside, 0);
		T_ASSERT_EQ(rep->n_lost, 1);
		T_ASSERT_EQ_U64(rep->lost[0].lo, start_of(100));
		T_ASSERT_EQ_U64(rep->lost[0].hi, hi);
		/* After a clean stop the header chain passes the span; the CRC scan finds it. */
		T_ASSERT(!rep->trust_refused);
		T_ASSERT_EQ_U64(rep->scan_from, mode == CLEAN ? UINT64_MAX : 0);
		aside_path(SEG, start_of(100), path, sizeof(path));
		T_ASSERT(access(path, F_OK) != 0);
		snprintf(path, sizeof(path),
			 "W store.clog: shard 3: segment 00000000000000065536: no valid record at "
			 "%llu (",
			 (unsigned long long)start_of(100));
		T_ASSERT(log_has(path));
		snprintf(path, sizeof(path),
			 "); the next valid record is at %llu: the %llu bytes between are stepped "
			 "over (left in place, the messages there are lost and read as not found), "
			 "the records after them are kept",
			 (unsigned long long)hi, (unsigned long long)(hi - start_of(100)));
		T_ASSERT(log_has(path));
		check_goes_on(c, want);
		rmtmp();
	}
}

/*
 * Damage inside the last segment holding records, records after it: the
 * same; zeros from there to the segment's end: the log ends there, what
 * the damage left of its record kept aside.
 */
static void
test_cut_last(void)
{
	for (int mode = CRASH; mode <= CLEAN; mode++) {
		const struct clog_recovery *rep;
		uint64_t from;
		bool want[W] = {false};
		struct clog *c;

		build();
		from = start_of(250) + 10;
		for (uint32_t i = 0; i < N; i++)
			want[i] = i < 250 || start_of(i) >= from + 2000;
		damage(from, 2000, false);
		c = recover((enum mode)mode, 0);
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), ends[N - 1]);
		T_ASSERT_EQ(rep->spans_blanked, 0);
		T_ASSERT_EQ(rep->spans_stepped, 1);
		T_ASSERT_EQ(rep->recs_dropped, 0);
		T_ASSERT_EQ(rep->files_aside, 0);
		T_ASSERT_EQ_U64(rep->lost_below, 0);
		check_goes_on(c, want);
		rmtmp();
	}
	for (int mode = CRASH; mode <= CLEAN; mode++) {
		const struct clog_recovery *rep;
		uint64_t from;
		bool want[W] = {false};
		char path[600];
		struct clog *c;

		build();
		from = start_of(250) + 10;
		for (uint32_t i = 0; i < N; i++)
			want[i] = i < 250;
		for (uint64_t o = from; o < 4 * SEG; o += 4096)
			damage(o, (uint32_t)SP_MIN((uint64_t)4096, 4 * SEG - o), false);
		c = recover((enum mode)mode, 0);
		rep = clog_recovery(c);
		check_log(c, want);
		T_ASSERT_EQ_U64(clog_written(c), start_of(250));
		T_ASSERT_EQ(rep->spans_stepped, 0);
		T_ASSERT_EQ(rep->recs_dropped, 0);
		T_ASSERT_EQ(rep->files_aside, 1);
		T_ASSERT_EQ_U64(rep->lost_below, mode == CLEAN ? ends[N - 1] - start_of(250) : 0);
		aside_path(3 * SEG, start_of(250), path, sizeof(path));
		T_ASSERT(access(path, F_OK) == 0);
		check_goes_on(c, want);
		rmtmp();
	}
}

/*
 * Segment 2 zeroed from inside record 180 to its end, and damage at the
 * start of segment 3: the log ends at 180; segment 3 lies past the end
 * and holds records, so it is renamed aside (counted), not deleted; the
 * empty segment 4 is deleted.
 */
static void
test_past_end(void)
{
	const struct clog_recovery *rep;
	uint32_t in3 = 0;
	bool want[W] = {false};
	char path[600];
	struct clog *c;

	build();
	for (uint32_t i = 0; i < N; i++) {
		want[i] = i < 180;
		in3 += start_of(i) >= 3 * SEG + 1000;
	}
	T_ASSERT_EQ(start_of(180) / SEG, 2);
	for (uint64_t o = start_of(180) + 10; o < 3 * SEG; o += 4096)
		damage(o, (uint32_t)SP_MIN((uint64_t)4096, 3 * SEG - o), false);
	damage(3 * SEG, 1000, false);
	log_capture();
	c = recover(CRASH, 0);
	rep = clog_recovery(c);
	check_log(c, want);
	T_ASSERT_EQ_U64(clog_written(c), start_of(180));
	T_ASSERT_EQ(rep->recs_dropped, in3);
	T_ASSERT_EQ(rep->files_aside, 2);
	T_ASSERT(in3 > 30);
	aside_path(3 * SEG, 3 * SEG, path, sizeof(path));
	T_ASSERT_EQ(count_aside(path, 3 * SEG), in3);
	seg_path(3 * SEG, path, sizeof(path));
	T_ASSERT(access(path, F_OK) != 0);
	seg_path(4 * SEG, path, sizeof(path));
	T_ASSERT(access(path, F_OK) != 0);
	snprintf(path, sizeof(path),
		 "W store.clog: shard 3: segment 00000000000000196608 lies past the end %llu and "
		 "does not start with a valid record: its %u valid records and ",
		 (unsigned long long)start_of(180), in3);
	T_ASSERT(log_has(path));
	check_goes_on(c, want);
	rmtmp();
}

/* Where recovery cannot tell, it refuses, and says what to do. */
static void
test_refusals(void)
{
	struct clog_cfg cfg = {.io = &store_io_posix, .shard = 3, .seg_size = SEG};
	char path[600];
	struct clog *c;

	/* A segment larger than the segment size: written with another size? */
	build();
	seg_path(SEG, path, sizeof(path));
	T_ASSERT_EQ(truncate(path, 2 * SEG), 0);
	cfg.dir = dir;
	log_capture();
	T_ASSERT_EQ(clog_open(&cfg, &c), -EINVAL);
	T_ASSERT(log_has("E store.clog: shard 3: segment 00000000000000065536 is 131072 bytes, "
			 "larger than the segment size 65536: start with "
			 "mapedFileSizeCommitLog=131072 (the size the log was written with), or "
			 "move the file out of "));
	rmtmp();

	/* No segment at all, but a checkpoint that says there were records. */
	mktmp();
	c = open_log();
	T_ASSERT_EQ(clog_recover(c, 1000, -1), -ENOENT);
	T_ASSERT(clog_recovery(c)->empty_dir);
	clog_close(c);
	/* Refused again: the refusal left no segment behind. */
	c = open_log();
	T_ASSERT_EQ(clog_recover(c, 1000, -1), -ENOENT);
	clog_close(c);
	c = open_log();
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	clog_close(c);
	rmtmp();
}

T_MAIN(T_CASE(test_short_middle), T_CASE(test_short_last), T_CASE(test_missing_middle),
       T_CASE(test_missing_last), T_CASE(test_cut_middle), T_CASE(test_cut_last),
       T_CASE(test_past_end), T_CASE(test_refusals))
