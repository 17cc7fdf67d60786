// SPDX-License-Identifier: Apache-2.0
/*
 * test_clog.c - CommitLog shard: append, roll, flush, visibility, recovery,
 * fencing on I/O errors, retention. Small segments make every path run.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "io_fault.h"
#include "common/crc32.h"
#include "store/clog.h"

#define SEG (64u << 10)

static char dir[256];

static void
mktmp(void)
{
	char tmpl[] = "/tmp/sp-clog-XXXXXX";

	T_ASSERT(mkdtemp(tmpl) != NULL);
	snprintf(dir, sizeof(dir), "%s/commitlog/3", tmpl);
}

static void
rmtmp(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%.*s'", (int)(strstr(dir, "/commitlog") - dir), dir);
	T_ASSERT(system(cmd) == 0);
}

static int
count_segments(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	T_ASSERT(d != NULL);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static struct clog *
open_log(const struct store_io_ops *io, bool sync)
{
	struct clog_cfg cfg = {
		.io = io, .dir = dir, .shard = 3, .seg_size = SEG, .sync_flush = sync};
	struct clog *c;

	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	return c;
}

static uint8_t body[4096];

static void
msg(struct wire_msg *m, uint32_t i, uint32_t len)
{
	memset(m, 0, sizeof(*m));
	for (uint32_t k = 0; k < len; k++)
		body[k] = (uint8_t)(i * 7 + k);
	m->queue_id = (int32_t)(i % 4);
	m->queue_offset = i / 4;
	m->store_ts = 1000 + i;
	m->body = body;
	m->body_len = len;
	m->topic = "T";
	m->topic_len = 1;
}

/* Append n messages, preparing segments when asked; returns the ends. */
static void
append_from(struct clog *c, uint32_t first, uint32_t n, uint32_t len, uint64_t *ends)
{
	for (uint32_t i = first; i < first + n; i++) {
		struct wire_msg m;
		uint64_t end;
		long r;

		msg(&m, i, len);
		r = clog_append(c, &m, &end);
		if (r == -EAGAIN) {
			T_ASSERT(clog_wants_next(c));
			T_ASSERT_EQ(clog_prepare_next(c), 0);
			r = clog_append(c, &m, &end);
		}
		T_ASSERT(r > 0);
		clog_commit(c);
		T_ASSERT_EQ(clog_phys_shard(m.phys_offset), 3);
		T_ASSERT_EQ(clog_phys_local(m.phys_offset) + (uint64_t)r, end);
		if (ends)
			ends[i - first] = end;
	}
}

static void
append_n(struct clog *c, uint32_t n, uint32_t len, uint64_t *ends)
{
	append_from(c, 0, n, len, ends);
}

/* Walk the log from the start and check every record. Return: records seen. */
static uint32_t
walk(struct clog *c, uint32_t len)
{
	uint64_t off = clog_min(c);
	uint32_t i = 0;

	for (;;) {
		const uint8_t *rec;
		uint64_t next;
		struct wire_msg m;
		long r = clog_read(c, off, &rec, &next);

		if (r == -ENODATA) {
			off = next;
			continue;
		}
		if (r == -ERANGE)
			break;
		T_ASSERT(r > 0);
		T_ASSERT_EQ(wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m), r);
		T_ASSERT_EQ(m.body_len, len);
		T_ASSERT_EQ(m.body[0], (uint8_t)(i * 7));
		T_ASSERT_EQ(clog_phys_local(m.phys_offset), off);
		off = next;
		i++;
	}
	return i;
}

static void
test_append_roll_read(void)
{
	struct clog *c;
	struct wire_msg m;
	uint64_t end;

	mktmp();
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ(clog_written(c), 0);
	/* Without a prepared segment the roll is refused, not waited for. */
	for (uint32_t i = 0;; i++) {
		long r;

		msg(&m, i, 1000);
		r = clog_append(c, &m, &end);
		if (r == -EAGAIN)
			break;
		T_ASSERT(r > 0);
		clog_commit(c);
	}
	T_ASSERT(clog_wants_next(c));
	T_ASSERT_EQ(clog_prepare_next(c), 0);
	T_ASSERT(!clog_wants_next(c));
	clog_close(c);
	rmtmp();

	mktmp();
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 500, 1000, NULL); /* ~8 segments */
	T_ASSERT(count_segments() >= 8);
	T_ASSERT_EQ(walk(c, 1000), 500);
	/* Too big for any segment. */
	{
		static uint8_t big[SEG];

		msg(&m, 0, 10);
		m.body = big;
		m.body_len = SEG;
		T_ASSERT_EQ(clog_append(c, &m, &end), -EMSGSIZE);
	}
	clog_close(c);
	rmtmp();
}

static void
test_sync_visibility(void)
{
	uint64_t ends[10];
	const uint8_t *rec;
	uint64_t next;
	struct clog *c;

	mktmp();
	c = open_log(&store_io_posix, true);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 10, 100, ends);
	/* SYNC_FLUSH: nothing is readable before it is durable. */
	T_ASSERT_EQ(clog_read(c, 0, &rec, &next), -ERANGE);
	T_ASSERT(clog_flushed(c) < ends[0]);
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ_U64(clog_flushed(c), ends[9]);
	T_ASSERT(clog_read(c, 0, &rec, &next) > 0);
	T_ASSERT_EQ(walk(c, 100), 10);
	clog_close(c);
	rmtmp();
}

static void
test_recover_clean_and_torn(void)
{
	uint64_t ends[300];
	struct clog *c;
	char path[400];
	FILE *f;

	mktmp();
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 300, 700, ends);
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ(clog_prepare_next(c), 0); /* a prepared, unused segment at close */
	clog_close(c);

	/* Scan recovery finds the same end and keeps every record. */
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ_U64(clog_written(c), ends[299]);
	T_ASSERT_EQ(walk(c, 700), 300);
	clog_close(c);

	/* Garbage after the last record is cut; CRC damage cuts at that record. */
	snprintf(path, sizeof(path), "%s/%020llu", dir,
		 (unsigned long long)(ends[299] - ends[299] % SEG));
	f = fopen(path, "r+b");
	T_ASSERT(f != NULL);
	fseek(f, (long)(ends[299] % SEG), SEEK_SET);
	fwrite("\x00\x00\x01\x00\xda\xa3\x20\xa7garbage", 1, 15, f);
	fclose(f);
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ_U64(clog_written(c), ends[299]);
	T_ASSERT_EQ(walk(c, 700), 300);
	clog_close(c);

	/*
	 * Flip a body byte of record 100: only it leaves the log (stepped
	 * over: its bytes stay, readers pass them), the records after it in
	 * its segment and the later segments stay (test_clog_recover.c).
	 */
	snprintf(path, sizeof(path), "%s/%020llu", dir,
		 (unsigned long long)(ends[99] - ends[99] % SEG));
	f = fopen(path, "r+b");
	T_ASSERT(f != NULL);
	fseek(f, (long)(ends[99] % SEG) + 95, SEEK_SET);
	fputc(0x5a, f);
	fclose(f);
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ_U64(clog_written(c), ends[299]);
	T_ASSERT_EQ(clog_recovery(c)->spans_blanked, 0);
	T_ASSERT_EQ(clog_recovery(c)->spans_stepped, 1);
	T_ASSERT_EQ_U64(clog_recovery(c)->bytes_stepped, ends[100] - ends[99]);
	/* 100 before it, itself, every one after it kept. */
	T_ASSERT_EQ_U64(clog_recovery(c)->recs_dropped, 0);
	T_ASSERT_EQ_U64(clog_recovery(c)->recs_after, 199);
	T_ASSERT_EQ_U64(clog_lost_skip(c, ends[99]), ends[100]);
	T_ASSERT_EQ_U64(clog_lost_skip(c, ends[100]), ends[100]);
	T_ASSERT_EQ(clog_read_checked(c, ends[99], &(const uint8_t *){NULL}, &(uint64_t){0}),
		    -EILSEQ);
	T_ASSERT(clog_read_checked(c, ends[100], &(const uint8_t *){NULL}, &(uint64_t){0}) > 0);
	/* Appends continue at the end. */
	append_from(c, 300, 5, 700, NULL);
	clog_close(c);

	/* A trusted end (clean shutdown) is taken without scanning. */
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, (int64_t)ends[10]), 0);
	T_ASSERT_EQ(walk(c, 700), 11);
	clog_close(c);
	rmtmp();
}

static void
test_power_loss(void)
{
	struct io_fault *f = io_fault_new();
	uint64_t ends[200];
	uint64_t durable;
	struct clog *c;

	mktmp();
	c = open_log(io_fault_ops(f), true);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 100, 500, ends);
	T_ASSERT_EQ(clog_flush(c), 0);
	durable = clog_flushed(c);
	append_n(c, 100, 500, ends + 100); /* never synced */
	clog_close(c);
	T_ASSERT(io_fault_power_loss(f, true) > 0);

	c = open_log(io_fault_ops(f), true);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	/* Everything acknowledged survives; nothing unsynced is trusted. */
	T_ASSERT(clog_written(c) >= durable);
	T_ASSERT_EQ_U64(clog_written(c), durable);
	T_ASSERT_EQ(walk(c, 500), 100);
	clog_close(c);
	io_fault_free(f);
	rmtmp();
}

/*
 * warmMapedFileEnable=false: segments only fallocated, never zero-filled. A
 * roll writes (pwrite) only what the write-back writes, and a power loss
 * keeps every flushed record and nothing else, as with warm segments.
 */
static void
test_no_warm(void)
{
	uint64_t writes[2];
	uint64_t durable;

	for (int warm = 0; warm < 2; warm++) {
		struct io_fault *f = io_fault_new();
		struct clog_cfg cfg = {.io = io_fault_ops(f),
				       .dir = dir,
				       .shard = 3,
				       .seg_size = SEG,
				       .sync_flush = true,
				       .no_warm = !warm};
		struct clog *c;

		mktmp();
		T_ASSERT_EQ(clog_open(&cfg, &c), 0);
		T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
		append_n(c, 200, 1000, NULL); /* ~3 segments */
		T_ASSERT_EQ(clog_flush(c), 0);
		durable = clog_flushed(c);
		writes[warm] = io_fault_calls(f, IOF_PWRITE);
		append_from(c, 200, 20, 1000, NULL); /* never synced */
		clog_close(c);
		T_ASSERT(io_fault_power_loss(f, true) > 0);
		T_ASSERT_EQ(clog_open(&cfg, &c), 0);
		T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
		T_ASSERT_EQ_U64(clog_written(c), durable);
		T_ASSERT_EQ(walk(c, 1000), 200);
		clog_close(c);
		io_fault_free(f);
		rmtmp();
	}
	/* Each warm segment cost SEG / 64 KiB more pwrites than the data. */
	T_ASSERT(writes[1] >= writes[0] + 3);
}

static void
test_flush_error_fences(void)
{
	struct io_fault *f = io_fault_new();
	struct wire_msg m;
	uint64_t end;
	uint64_t before;
	struct clog *c;

	mktmp();
	c = open_log(io_fault_ops(f), true);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 10, 100, NULL);
	before = clog_flushed(c);
	io_fault_fail(f, IOF_FDATASYNC, EIO);
	T_ASSERT_EQ(clog_flush(c), -EIO);
	/* Waiters never see success; new appends are refused with the error. */
	T_ASSERT_EQ_U64(clog_flushed(c), before);
	T_ASSERT_EQ(clog_err(c), -EIO);
	msg(&m, 10, 100);
	T_ASSERT_EQ(clog_append(c, &m, &end), -EIO);
	T_ASSERT_EQ(clog_flush(c), -EIO); /* still failing: logged once only */
	/* The condition clears: the retry rewrites the range and writes resume. */
	io_fault_fail(f, IOF_FDATASYNC, 0);
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ(clog_err(c), 0);
	T_ASSERT_EQ_U64(clog_flushed(c), clog_written(c));
	T_ASSERT(io_fault_calls(f, IOF_PWRITE) > 0);
	T_ASSERT(clog_append(c, &m, &end) > 0);
	clog_commit(c);
	clog_close(c);
	io_fault_free(f);
	rmtmp();
}

/* EIO and ENOSPC, on the write-back and on the sync: always a fence, never a success. */
static void
test_flush_fault_matrix(void)
{
	static const enum io_fault_op ops[] = {IOF_PWRITE, IOF_FDATASYNC};
	static const int errs[] = {EIO, ENOSPC};

	for (size_t o = 0; o < ARRAY_SIZE(ops); o++) {
		for (size_t e = 0; e < ARRAY_SIZE(errs); e++) {
			struct io_fault *f = io_fault_new();
			uint64_t ends[5];
			struct wire_msg m;
			uint64_t end;
			struct clog *c;

			mktmp();
			c = open_log(io_fault_ops(f), true);
			T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
			append_n(c, 5, 200, ends);
			io_fault_fail(f, ops[o], errs[e]);
			T_ASSERT_EQ(clog_flush(c), -errs[e]);
			T_ASSERT(clog_flushed(c) < ends[0]);
			T_ASSERT_EQ(clog_err(c), -errs[e]);
			msg(&m, 5, 200);
			T_ASSERT_EQ(clog_append(c, &m, &end), -errs[e]);
			io_fault_fail(f, ops[o], 0);
			T_ASSERT_EQ(clog_flush(c), 0);
			T_ASSERT_EQ_U64(clog_flushed(c), ends[4]);
			T_ASSERT(clog_append(c, &m, &end) > 0);
			clog_commit(c);
			T_ASSERT_EQ(clog_flush(c), 0);
			T_ASSERT_EQ(walk(c, 200), 6);
			clog_close(c);
			io_fault_free(f);
			rmtmp();
		}
	}
}

static void
test_enospc_on_new_segment(void)
{
	struct io_fault *f = io_fault_new();
	struct wire_msg m;
	uint64_t end;
	struct clog *c;
	long r;

	mktmp();
	c = open_log(io_fault_ops(f), false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	io_fault_fail(f, IOF_ALLOCATE, ENOSPC);
	T_ASSERT_EQ(clog_prepare_next(c), -ENOSPC);
	do {
		msg(&m, 0, 1000);
		r = clog_append(c, &m, &end);
		clog_commit(c);
	} while (r > 0);
	T_ASSERT_EQ(r, -ENOSPC); /* the roll needs the segment the disk refused */
	io_fault_fail(f, IOF_ALLOCATE, 0);
	T_ASSERT_EQ(clog_prepare_next(c), 0);
	T_ASSERT(clog_append(c, &m, &end) > 0);
	clog_close(c);
	io_fault_free(f);
	rmtmp();
}

static void
test_trim(void)
{
	const uint8_t *rec;
	uint64_t next;
	uint64_t min;
	struct clog *c;
	int before;

	mktmp();
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 400, 1000, NULL);
	before = count_segments();
	/* Nothing expired yet (store times are 1000+i ms). */
	T_ASSERT_EQ(clog_trim(c, 0, false, 0, UINT64_MAX, NULL, &min), 0);
	/* Expire everything: every sealed segment goes, the current stays. */
	T_ASSERT(clog_trim(c, INT64_MAX, false, 0, UINT64_MAX, NULL, &min) >= 5);
	T_ASSERT(count_segments() <= 2);
	T_ASSERT(count_segments() < before);
	T_ASSERT_EQ_U64(clog_min(c), min);
	T_ASSERT_EQ(clog_read(c, 0, &rec, &next), -ERANGE);
	T_ASSERT(clog_read(c, min, &rec, &next) > 0 || clog_read(c, min, &rec, &next) == -ENODATA);
	/* Graveyard mappings are released after the grace period. */
	T_ASSERT_EQ(clog_trim(c, 0, false, INT64_MAX / 2, UINT64_MAX, NULL, &min), 0);
	clog_close(c);

	/* Reopen starts at the first remaining segment. */
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, min, -1), 0);
	T_ASSERT_EQ_U64(clog_min(c), min);
	clog_close(c);
	rmtmp();
}

static unsigned reader_syncs;
static bool sync_answer;
static char sync_check[400]; /* the buffer file a reader sync must find intact */

static bool
count_reader_sync(void *arg)
{
	uint8_t head[8] = {0};
	FILE *f;

	T_ASSERT(arg == &reader_syncs);
	reader_syncs++;
	/* Before the buffer is zeroed or renamed: its first record is still there. */
	f = fopen(sync_check, "rb");
	T_ASSERT(f != NULL);
	T_ASSERT_EQ(fread(head, 1, sizeof(head), f), sizeof(head));
	fclose(f);
	T_ASSERT(memcmp(head, (uint8_t[8]){0}, sizeof(head)) != 0);
	return sync_answer;
}

/* Append until the owner is in segment @seg, preparing segments when refused. */
static uint32_t
append_to_seg(struct clog *c, uint32_t first, uint64_t seg)
{
	while (clog_written(c) < seg * SEG)
		append_from(c, first++, 1, 1000, NULL);
	return first;
}

/* @seg's buffer file past the owner's write position: zeros (not an older segment's records). */
static void
check_zeroed(struct clog *c, const char *bufs, uint64_t seg)
{
	static uint8_t b[SEG];
	uint64_t in = clog_written(c) - seg * SEG;
	char path[400];
	size_t nz = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%020llu", bufs, (unsigned long long)(seg * SEG));
	f = fopen(path, "rb");
	T_ASSERT(f != NULL);
	T_ASSERT_EQ(fread(b, 1, SEG, f), SEG);
	fclose(f);
	T_ASSERT(in > 0 && in < SEG / 2);
	for (uint64_t i = in; i < SEG; i++)
		nz += b[i] != 0;
	T_ASSERT_EQ(nz, 0);
}

/*
 * A sealed segment's write-behind buffer, once durable and retired, becomes
 * the next new segment's after a reader sync: zeroed (the old records are
 * not under the new name), its file renamed. A sync that gives up leaves it
 * retired for the next segment. Reads, write-back and a restart see only
 * the new segments' records. Without a reader sync the buffer waits out
 * CLOG_UNMAP_GRACE_MS and a new segment gets fresh memory.
 * Modes: 0 no hook, 1 a hook, 2 a hook that gives up once.
 */
static void
test_buf_reuse(void)
{
	for (int mode = 2; mode >= 0; mode--) {
		struct clog_cfg cfg = {.io = &store_io_posix, .shard = 3, .seg_size = SEG};
		uint64_t reused_in =
			mode == 2 ? 3 : 2; /* the segment that gets segment 0's buffer */
		char bufs[300];
		struct clog *c;
		uint32_t n;

		mktmp();
		snprintf(bufs, sizeof(bufs), "%.*s/bufs", (int)(strstr(dir, "/commitlog") - dir),
			 dir);
		snprintf(sync_check, sizeof(sync_check), "%s/%020u", bufs, 0u);
		cfg.dir = dir;
		cfg.buf_dir = bufs;
		reader_syncs = 0;
		sync_answer = mode != 2;
		T_ASSERT_EQ(clog_open(&cfg, &c), 0);
		T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
		if (mode > 0)
			clog_set_reader_sync(c, count_reader_sync, &reader_syncs);
		n = append_to_seg(c, 0, 1);		 /* segment 0 sealed, 1 is the owner's */
		T_ASSERT_EQ(clog_flush(c), 0);		 /* 0 durable: its buffer retired */
		T_ASSERT(access(sync_check, F_OK) == 0); /* in its grace period */
		T_ASSERT_EQ(reader_syncs, 0);
		n = append_to_seg(c, n, 2); /* prepares segment 2 */
		T_ASSERT_EQ(reader_syncs, mode > 0 ? 1u : 0u);
		if (mode == 2) {
			/* gave up: segment 2 has new memory, segment 0's buffer waits */
			T_ASSERT_EQ(clog_bufs_reused(c), 0);
			T_ASSERT(access(sync_check, F_OK) == 0);
			sync_answer = true;
			n = append_to_seg(c, n, 3); /* prepares segment 3 */
			T_ASSERT_EQ(reader_syncs, 2);
		}
		T_ASSERT_EQ(clog_bufs_reused(c), mode > 0 ? 1u : 0u);
		T_ASSERT_EQ(access(sync_check, F_OK) == 0, mode == 0); /* renamed when reused */
		check_zeroed(c, bufs, reused_in);
		n = append_to_seg(c, n, 5);
		T_ASSERT_EQ(walk(c, 1000), n);
		T_ASSERT_EQ(clog_flush(c), 0);
		clog_close(c);
		/* The files hold what the buffers did. */
		cfg.buf_dir = NULL;
		T_ASSERT_EQ(clog_open(&cfg, &c), 0);
		T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
		T_ASSERT_EQ(walk(c, 1000), n);
		clog_close(c);
		rmtmp();
	}
}

/* Buffer chunk files in @bufs. */
static unsigned
count_files(const char *bufs)
{
	DIR *d = opendir(bufs);
	struct dirent *de;
	unsigned n = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * Segments of 64 MiB (four 16 MiB chunks) and a 32 MiB window: the appends
 * stop at the window's edge (-EAGAIN) until the preparing thread maps more;
 * however much is written, the buffer holds the window and what is not yet
 * durable; records across chunk boundaries and segment rolls read back
 * whole, from the buffer and from the files; the files hold them after a
 * close.
 */
#define WSEG (64u << 20)
#define WCK (16u << 20)

static bool
readers_gone(void *arg)
{
	(*(unsigned *)arg)++;
	return true;
}

static void
test_window(void)
{
	struct clog_cfg cfg = {
		.io = &store_io_posix, .shard = 3, .seg_size = WSEG, .buf_window = 2 * WCK};
	unsigned most = 0, stops = 0, syncs = 0;
	uint64_t end = 0;
	char bufs[300];
	struct clog *c;
	uint32_t n = 0;

	mktmp();
	snprintf(bufs, sizeof(bufs), "%.*s/bufs", (int)(strstr(dir, "/commitlog") - dir), dir);
	cfg.dir = dir;
	cfg.buf_dir = bufs;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ(count_files(bufs), 1); /* one chunk to start with */
	clog_set_reader_sync(c, readers_gone, &syncs);
	/* 200 MiB: three segment rolls */
	while (end < 200u << 20) {
		struct wire_msg m;
		long r;

		msg(&m, n, 4000);
		r = clog_append(c, &m, &end);
		if (r == -EAGAIN) {
			if (stops++ == 0)
				T_ASSERT(clog_written(c) > WCK - 8000 && clog_written(c) <= WCK);
			T_ASSERT(clog_wants_next(c));
			T_ASSERT_EQ(clog_prepare_next(c), 0);
			continue;
		}
		T_ASSERT(r > 0);
		clog_commit(c);
		if (++n % 2000 == 0) {
			T_ASSERT_EQ(clog_flush(c), 0); /* retires what is durable */
			most = SP_MAX(most, count_files(bufs));
		}
	}
	T_ASSERT(stops >= 6);
	/* the window (2 chunks), the chunk being written, the next segment's, one retired */
	printf("# %u records, %u stops at the window, at most %u chunk files, %u reused\n", n,
	       stops, most, (unsigned)clog_bufs_reused(c));
	T_ASSERT(most <= 2 + 1 + 1 + 1);
	T_ASSERT(clog_bufs_reused(c) >= 6);
	T_ASSERT(syncs >= 6);
	T_ASSERT_EQ(walk(c, 4000), n);
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ(walk(c, 4000), n);
	clog_close(c);
	T_ASSERT_EQ(count_files(bufs), 0);
	cfg.buf_dir = NULL;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ(walk(c, 4000), n);
	clog_close(c);
	rmtmp();
}

/*
 * A child appends 4000-byte records to @total bytes with @cfg, syncs once
 * when it passes @durable bytes (0: never), and kills itself: ends[0] the
 * end it wrote, ends[1] the records, ends[2] its flushed offset.
 */
static void
window_kill_child(const struct clog_cfg *cfg, uint64_t total, uint64_t durable, uint64_t *ends)
{
	pid_t pid = fork();
	int st;

	T_ASSERT(pid >= 0);
	if (pid == 0) {
		struct clog *c;
		uint32_t n = 0;
		uint64_t end = 0;

		if (clog_open(cfg, &c) != 0 || clog_recover(c, 0, -1) != 0)
			_exit(2);
		while (end < total) {
			struct wire_msg m;
			long r;

			if (durable > 0 && end >= durable && clog_flushed(c) == 0 &&
			    clog_flush(c) != 0)
				_exit(5);
			msg(&m, n, 4000);
			r = clog_append(c, &m, &end);
			if (r == -EAGAIN) {
				if (clog_prepare_next(c) != 0)
					_exit(3);
				continue;
			}
			if (r <= 0)
				_exit(4);
			clog_commit(c);
			n++;
		}
		ends[0] = end;
		ends[1] = n;
		ends[2] = clog_flushed(c);
		kill(getpid(), SIGKILL);
	}
	T_ASSERT_EQ(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFSIGNALED(st));
}

/*
 * A process killed with appends in several chunks of a segment, none
 * written back: the next open takes them all from the chunk files.
 */
static void
test_window_kill(void)
{
	struct clog_cfg cfg = {
		.io = &store_io_posix, .shard = 3, .seg_size = WSEG, .buf_window = 2 * WCK};
	uint64_t *ends =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char bufs[300];
	struct clog *c;

	T_ASSERT(ends != MAP_FAILED);
	mktmp();
	snprintf(bufs, sizeof(bufs), "%.*s/bufs", (int)(strstr(dir, "/commitlog") - dir), dir);
	cfg.dir = dir;
	cfg.buf_dir = bufs;
	/* 40 MiB: three chunks, none written back */
	window_kill_child(&cfg, 40u << 20, 0, ends);
	T_ASSERT(count_files(bufs) >= 3);
	cfg.old_buf_dir = bufs;
	cfg.buf_dir = NULL;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ_U64(clog_written(c), ends[0]);
	T_ASSERT_EQ_U64(clog_recovery(c)->taken, ends[0]);
	T_ASSERT_EQ(walk(c, 4000), (uint32_t)ends[1]);
	clog_close(c);
	rmtmp();
	munmap(ends, 4096);
}

/*
 * A record larger than a chunk rolls the segment while the window has not
 * reached its end (the preparing thread behind): the BLANK goes at the
 * write position, and the segment's tail past buf_hi was never mapped. The
 * flusher must not pwrite that tail from the buffer (it holds no memory:
 * EFAULT would fence the shard for good); the file holds zeros there.
 */
static void
test_roll_tail_unmapped(void)
{
	struct clog_cfg cfg = {
		.io = &store_io_posix, .shard = 3, .seg_size = WSEG, .buf_window = 2 * WCK};
	size_t big = WCK + (1u << 20); /* 17 MiB: more than a chunk, less than the window */
	uint8_t *bb = malloc(big);
	uint64_t end = 0, blank_at;
	struct clog *c;
	struct wire_msg m;
	uint32_t n = 0;
	long r;

	T_ASSERT(bb != NULL);
	memset(bb, 0x5a, big);
	mktmp();
	cfg.dir = dir;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	/* 8 MiB, then the window is prepared once: buf_hi 48 MiB, the next segment made */
	while (clog_written(c) < (8u << 20)) {
		msg(&m, n++, 4000);
		T_ASSERT(clog_append(c, &m, &end) > 0);
		clog_commit(c);
	}
	T_ASSERT_EQ(clog_prepare_next(c), 0);
	/* up to the window's edge (buf_hi 48 MiB), no more preparation */
	for (;;) {
		msg(&m, n, 4000);
		if (clog_written(c) + 2 * wire_rec_size(&m) > (48u << 20))
			break;
		T_ASSERT(clog_append(c, &m, &end) > 0);
		clog_commit(c);
		n++;
	}
	/* one more record leaves 24 bytes before buf_hi: the BLANK goes there */
	{
		uint64_t hi = 48u << 20;
		size_t fix;

		msg(&m, n, 0);
		fix = wire_rec_size(&m);
		m.body = bb;
		m.body_len = (uint32_t)(hi - 24 - clog_written(c) - fix);
		T_ASSERT(clog_append(c, &m, &end) > 0);
		clog_commit(c);
		n++;
		T_ASSERT_EQ_U64(end, hi - 24);
		msg(&m, n, 100);
		T_ASSERT_EQ(clog_append(c, &m, &end), -EAGAIN); /* the window's edge */
	}
	blank_at = end;
	/* the big one does not fit in segment 0: a roll, then the next segment's window */
	msg(&m, n, 4000);
	m.body = bb;
	m.body_len = (uint32_t)big;
	r = clog_append(c, &m, &end);
	if (r == -EAGAIN) {
		T_ASSERT_EQ(clog_prepare_next(c), 0);
		r = clog_append(c, &m, &end);
	}
	T_ASSERT(r > 0);
	clog_commit(c);
	n++;
	T_ASSERT(end > WSEG);
	/* a slave whose last record is that BLANK names it: its id as the file would give */
	{
		uint8_t want[CLOG_REC_ID_BYTES] = {0};
		uint32_t size, hash;

		T_ASSERT_EQ(wire_rec_encode_blank((uint32_t)(WSEG - blank_at), want, sizeof(want)),
			    WIRE_BLANK_LEN);
		T_ASSERT_EQ(clog_rec_id(c, blank_at, &size, &hash), 0);
		T_ASSERT_EQ_U64(size, WSEG - blank_at);
		T_ASSERT_EQ(hash, crc32_update(0, want, sizeof(want)));
	}
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ_U64(clog_flushed(c), end);
	clog_close(c);
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ_U64(clog_written(c), end);
	clog_close(c);
	rmtmp();
	free(bb);
}

/*
 * A span that stops before its end at bytes that are not a record (damage
 * recovery stepped over and left in place, or a file not yet written
 * back) still says where it starts: the master sends it to a slave.
 */
static void
test_span_short(void)
{
	struct clog *c;
	const uint8_t *rec = NULL;
	uint64_t ends[8];
	long r;

	mktmp();
	c = open_log(&store_io_posix, false);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_n(c, 8, 1000, ends);
	/* the fifth record's magic damaged */
	T_ASSERT(clog_read(c, ends[3], &rec, &(uint64_t){0}) > 0);
	((uint8_t *)rec)[4] ^= 0xff;
	rec = NULL;
	r = clog_read_span(c, 0, 1u << 20, &rec);
	T_ASSERT_EQ_U64(r, ends[3]);
	T_ASSERT(rec != NULL);
	clog_close(c);
	rmtmp();
}

/*
 * A read of a span that starts below buf_lo (a slave or a log scan a
 * little behind, across a retired chunk's end) reads the segment file, up
 * to the written end. Past the flushed offset the file holds what the
 * write-back has put there so far: nothing yet, or part of a record while
 * a pwrite is under way (simulated: the first bytes of the record at the
 * flushed offset). A span holds only whole, valid records.
 */
static void
test_span_below_buf_lo(void)
{
	struct clog_cfg cfg = {
		.io = &store_io_posix, .shard = 3, .seg_size = WSEG, .buf_window = 2 * WCK};
	uint64_t flushed, off = 0;
	const uint8_t *rec;
	char path[400];
	struct clog *c;
	uint32_t n = 0;
	uint64_t next;
	long r;
	int fd;

	mktmp();
	cfg.dir = dir;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	append_from(c, 0, (WCK + 8000) / 4000 + 2, 4000, NULL);
	n = (WCK + 8000) / 4000 + 2;
	T_ASSERT_EQ(clog_flush(c), 0); /* chunk 0 retired: buf_lo 16 MiB */
	flushed = clog_flushed(c);
	T_ASSERT(flushed > WCK);
	append_from(c, n, 25, 4000, NULL); /* not written back */
	n += 25;
	/* the last record that starts in chunk 0 */
	while (clog_read(c, off, &rec, &next) > 0 && next < WCK)
		off = next;
	T_ASSERT(off < WCK && next > WCK && next <= flushed);
	/* a write-back under way: the first 100 bytes of the record at the flushed offset */
	T_ASSERT(clog_read(c, flushed, &rec, &next) > 0);
	snprintf(path, sizeof(path), "%s/%020u", dir, 0u);
	fd = open(path, O_WRONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pwrite(fd, rec, 100, (off_t)flushed), 100);
	close(fd);
	r = clog_read_span(c, off, 1u << 20, &rec);
	T_ASSERT(r > 0);
	for (long pos = 0; pos < r;) {
		struct wire_msg m;
		long k = wire_rec_decode(rec + pos, (size_t)(r - pos), WIRE_REC_VERIFY_CRC, &m);

		T_ASSERT(k > 0);
		T_ASSERT_EQ_U64(clog_phys_local(m.phys_offset), off + (uint64_t)pos);
		pos += k;
	}
	T_ASSERT_EQ(clog_flush(c), 0);
	T_ASSERT_EQ(walk(c, 4000), n);
	clog_close(c);
	rmtmp();
}

/*
 * Killed while the preparing thread reused a retired chunk: zeroed (wholly
 * or in part) in place, not yet renamed to its new place. Below the
 * durable offset the segment file holds its records, so the next open
 * takes the appends that were not written back from the chunks above it.
 * @zero: bytes of the retired chunk zeroed.
 */
static void
window_kill_mid_reuse(uint64_t zero)
{
	struct clog_cfg cfg = {
		.io = &store_io_posix, .shard = 3, .seg_size = WSEG, .buf_window = 2 * WCK};
	uint64_t *ends =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char bufs[300];
	char path[400];
	struct clog *c;
	int fd;

	T_ASSERT(ends != MAP_FAILED);
	mktmp();
	snprintf(bufs, sizeof(bufs), "%.*s/bufs", (int)(strstr(dir, "/commitlog") - dir), dir);
	cfg.dir = dir;
	cfg.buf_dir = bufs;
	/* 20 MiB durable (chunk 0 retired, in its grace period), then 10 MiB more */
	window_kill_child(&cfg, 30u << 20, 20u << 20, ends);
	T_ASSERT(ends[2] >= 20u << 20);
	/* the retired chunk, caught in its reuse's memset */
	snprintf(path, sizeof(path), "%s/%020u", bufs, 0u);
	fd = open(path, O_WRONLY);
	T_ASSERT(fd >= 0);
	for (uint64_t off = 0; off < zero; off += sizeof(body)) {
		static const uint8_t z[sizeof(body)];

		T_ASSERT_EQ(pwrite(fd, z, sizeof(z), (off_t)off), (ssize_t)sizeof(z));
	}
	close(fd);
	cfg.old_buf_dir = bufs;
	cfg.buf_dir = NULL;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	T_ASSERT_EQ(clog_recover(c, 0, -1), 0);
	T_ASSERT_EQ_U64(clog_written(c), ends[0]);
	T_ASSERT_EQ_U64(clog_recovery(c)->taken, ends[0] - ends[2]);
	T_ASSERT_EQ(walk(c, 4000), (uint32_t)ends[1]);
	clog_close(c);
	rmtmp();
	munmap(ends, 4096);
}

static void
test_window_kill_mid_reuse(void)
{
	window_kill_mid_reuse(WCK);
	window_kill_mid_reuse(WCK / 2);
}

static void
test_bad_config_and_files(void)
{
	struct clog_cfg cfg = {.io = &store_io_posix, .shard = 1, .seg_size = 100};
	struct clog *c;
	char path[400];
	FILE *f;

	mktmp();
	cfg.dir = dir;
	T_ASSERT_EQ(clog_open(&cfg, &c), -EINVAL); /* segment too small */
	cfg.seg_size = SEG;
	cfg.shard = CLOG_SHARD_MAX + 1;
	T_ASSERT_EQ(clog_open(&cfg, &c), -EINVAL);
	cfg.shard = 1;
	T_ASSERT_EQ(clog_open(&cfg, &c), 0);
	clog_close(c);
	/* A name that is not a multiple of the segment size. */
	snprintf(path, sizeof(path), "%s/%020d", dir, 12345);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fclose(f);
	T_ASSERT_EQ(clog_open(&cfg, &c), -EINVAL);
	rmtmp();
}

T_MAIN(T_CASE(test_append_roll_read), T_CASE(test_sync_visibility),
       T_CASE(test_recover_clean_and_torn), T_CASE(test_power_loss), T_CASE(test_no_warm),
       T_CASE(test_flush_error_fences), T_CASE(test_flush_fault_matrix),
       T_CASE(test_enospc_on_new_segment), T_CASE(test_trim), T_CASE(test_buf_reuse),
       T_CASE(test_window), T_CASE(test_window_kill), T_CASE(test_roll_tail_unmapped),
       T_CASE(test_window_kill_mid_reuse), T_CASE(test_span_short), T_CASE(test_span_below_buf_lo),
       T_CASE(test_bad_config_and_files))
