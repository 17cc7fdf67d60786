// SPDX-License-Identifier: Apache-2.0
/*
 * test_damage.c - damage in the CommitLog found and contained (docs/store.md,
 * "Damage"): flipped body bytes, a zeroed 4 KiB page and a segment truncated
 * mid-record, in an older and in the newest segment, after a clean stop and
 * after a crash (a forked child that exits without closing). For each:
 * no read for delivery returns a record whose body is not the one written,
 * a reader that skips what store_get() answers lost or damaged reaches the
 * queue's end (no stall), every message outside the damage is read back,
 * the damage is counted (store_damage()) and logged; `--verify`
 * (store_verify()) reports it and changes no byte of the store.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "common/log.h"
#include "store/store.h"
#include "store/verify.h"

#define DN 1000		 /* messages, all in queue A:0 on shard 0 */
#define DN_MORE 50	 /* appended after the damage */
#define DSEG (64u << 10) /* segment size: DN messages fill about 6 segments */

static char root[64];
static char logpath[96];
static int64_t *phys; /* shared with the forked writer */
static uint8_t body[1024];

static void
mktmp(void)
{
	if (phys == NULL) {
		phys = mmap(NULL, (DN + DN_MORE) * sizeof(*phys), PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		T_ASSERT(phys != MAP_FAILED);
	}
	strcpy(root, "/tmp/sp-dmg-XXXXXX");
	T_ASSERT(mkdtemp(root) != NULL);
	snprintf(logpath, sizeof(logpath), "%s.log", root);
}

static void
rmtmp(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, logpath);
	T_ASSERT(system(cmd) == 0);
}

static void
cfg_dmg(struct store_cfg *c)
{
	store_cfg_default(c);
	c->root = root;
	c->shards = 1;
	c->seg_size = DSEG;
	c->cq_units = 64;
	c->idx_slots = 64;
	c->idx_entries = 128;
	c->flush_interval_ms = 1;
	c->threads = false;
}

/* Message i's body: 200..455 bytes of a pattern of i. */
static uint32_t
body_of(uint32_t i)
{
	uint32_t len = 200 + (i * 37) % 256;

	for (uint32_t k = 0; k < len; k++)
		body[k] = (uint8_t)(i * 13 + k);
	return len;
}

static void
put_all(struct store *s, struct store_queue *q, uint32_t from, uint32_t n)
{
	for (uint32_t i = from; i < from + n; i++) {
		struct store_put_res r;
		struct wire_msg m;
		long rc;

		memset(&m, 0, sizeof(m));
		m.body = body;
		m.body_len = body_of(i);
		m.born_ts = 1000 + i;
		for (int t = 0; (rc = store_put(s, q, &m, &r)) == -EAGAIN && t < 100; t++)
			T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
		T_ASSERT(rc > 0);
		T_ASSERT_EQ(r.qoff, i);
		phys[i] = r.phys;
	}
}

/* DN messages written and the store stopped: cleanly, or as a crash (a child that exits). */
static void
fill(bool clean)
{
	struct store_cfg cfg;
	struct store_queue *q;
	struct store *s;
	pid_t pid = fork();
	int st;

	T_ASSERT(pid >= 0);
	if (pid > 0) {
		T_ASSERT(waitpid(pid, &st, 0) == pid);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		return;
	}
	cfg_dmg(&cfg);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	put_all(s, q, 0, DN);
	T_ASSERT_EQ(store_flush_all(s), 0);
	/* As the service thread does every few ms: a crash loses no unit here. */
	(void)store_drain_queues(s);
	if (!clean)
		_exit(0);
	store_close(s);
	_exit(0);
}

static void
seg_path(uint64_t off, char *path, size_t n)
{
	snprintf(path, n, "%s/commitlog/0/%020llu", root, (unsigned long long)(off - off % DSEG));
}

/* The first message whose record starts at or after local offset @off. */
static uint32_t
msg_at(uint64_t off)
{
	for (uint32_t i = 0; i < DN; i++)
		if ((uint64_t)phys[i] >= off)
			return i;
	T_FAIL("no message at %llu", (unsigned long long)off);
	return DN;
}

enum hurt { H_FLIP, H_PAGE, H_TRUNC };

/*
 * Damage the log around message @i as @h says; *@bad_lo..*@bad_hi: the
 * messages it makes unreadable, [lo, hi).
 */
static void
hurt(enum hurt h, uint32_t i, uint32_t *bad_lo, uint32_t *bad_hi)
{
	uint64_t at = (uint64_t)phys[i];
	char path[160];
	uint8_t buf[4096];
	int fd;

	seg_path(at, path, sizeof(path));
	fd = open(path, O_RDWR);
	T_ASSERT(fd >= 0);
	switch (h) {
	case H_FLIP:
		/* 4 body bytes (the body ends 8 bytes before the properties' length) */
		T_ASSERT_EQ(pread(fd, buf, 4, (off_t)(at % DSEG + 150)), 4);
		for (int k = 0; k < 4; k++)
			buf[k] ^= 0x5a;
		T_ASSERT_EQ(pwrite(fd, buf, 4, (off_t)(at % DSEG + 150)), 4);
		*bad_lo = i;
		*bad_hi = i + 1;
		break;
	case H_PAGE: {
		/* A page that starts inside message i: it and those it covers are gone. */
		uint64_t lo = at + 40;

		memset(buf, 0, sizeof(buf));
		T_ASSERT(lo % DSEG + 4096 < DSEG - 2048);
		T_ASSERT_EQ(pwrite(fd, buf, 4096, (off_t)(lo % DSEG)), 4096);
		*bad_lo = i;
		*bad_hi = msg_at(lo + 4096);
		break;
	}
	case H_TRUNC:
		/* The file cut inside message i: it and the rest of the segment are gone. */
		T_ASSERT_EQ(ftruncate(fd, (off_t)(at % DSEG + 50)), 0);
		*bad_lo = i;
		*bad_hi = (uint64_t)phys[DN - 1] >= at - at % DSEG + DSEG
				  ? msg_at(at - at % DSEG + DSEG)
				  : DN;
		break;
	}
	close(fd);
	T_ASSERT(*bad_hi > *bad_lo);
}

static bool
log_has(const char *needle)
{
	static char buf[1 << 18];
	FILE *f = fopen(logpath, "r");
	size_t n;

	if (f == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/*
 * Read the queue as a pull does, from 0 to its max, passing lost (-ENOENT)
 * and damaged (-EBADMSG) messages. Every record returned must be exactly
 * message qoff's; every message outside [@lo, @hi) must be returned.
 * Return: messages returned.
 */
static uint32_t
read_all(struct store *s, struct store_queue *q, uint32_t n, uint32_t lo, uint32_t hi)
{
	uint32_t got = 0;
	uint64_t max = store_queue_max(s, q);

	T_ASSERT_EQ(max, n);
	for (uint64_t o = 0; o < max; o++) {
		const uint8_t *rec;
		struct cq_unit u;
		struct wire_msg m;
		long r = store_get(s, q, o, &rec, &u);
		uint32_t len;

		if (r == -ENOENT || r == -EBADMSG) {
			if (o < lo || o >= hi)
				T_FAIL("message %llu outside the damage unread: %ld",
				       (unsigned long long)o, r);
			continue;
		}
		if (r <= 0)
			T_FAIL("message %llu: %ld (a pull would stop here)", (unsigned long long)o,
			       r);
		T_ASSERT_EQ(wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m), r);
		T_ASSERT_EQ(m.queue_offset, (int64_t)o);
		len = body_of((uint32_t)o);
		T_ASSERT_EQ(m.body_len, len);
		T_ASSERT_MEMEQ(m.body, body, len);
		got++;
	}
	return got;
}

/* Every file under the store, its size and CRC, into @out (a report to compare). */
static void
tree_sum(const char *dir, char *out, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	T_ASSERT(d != NULL);
	while ((de = readdir(d)) != NULL) {
		char p[512];
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		T_ASSERT_EQ(stat(p, &st), 0);
		if (S_ISDIR(st.st_mode)) {
			tree_sum(p, out, cap);
			continue;
		}
		{
			FILE *f = fopen(p, "rb");
			static uint8_t b[1 << 16];
			uint32_t crc = 0;
			size_t n;
			size_t len = strlen(out);

			T_ASSERT(f != NULL);
			while ((n = fread(b, 1, sizeof(b), f)) > 0)
				crc = crc32_update(crc, b, n);
			fclose(f);
			snprintf(out + len, cap - len, "%s %lld %08x %lld\n", p,
				 (long long)st.st_size, crc, (long long)st.st_mtime);
		}
	}
	closedir(d);
}

/* --verify's check of the store: its verdict, and not one byte changed. */
static struct store_verify_res
verify_now(void)
{
	static char before[1 << 16];
	static char after[1 << 16];
	char cl[96], cq[96];
	struct store_verify_cfg vc = {.clog_dir = cl, .cq_dir = cq, .shards = 1, .seg_size = DSEG};
	struct store_verify_res res;
	FILE *out = fopen("/dev/null", "w");

	snprintf(cl, sizeof(cl), "%s/commitlog", root);
	snprintf(cq, sizeof(cq), "%s/consumequeue", root);
	before[0] = after[0] = '\0';
	tree_sum(root, before, sizeof(before));
	T_ASSERT(out != NULL);
	T_ASSERT_EQ(store_verify(&vc, out, &res), 0);
	fclose(out);
	tree_sum(root, after, sizeof(after));
	T_ASSERT_STREQ(before, after);
	return res;
}

/*
 * One case: DN messages, a stop (@clean or a crash), damage @h around
 * message @i; --verify sees it; the store opens, steps over it, delivers
 * every other message, counts and says it; appends go on; a second
 * start finds nothing new to say.
 */
static void
dmg_case(enum hurt h, uint32_t i, bool clean)
{
	struct store_verify_res vr;
	struct store_damage d;
	struct store_cfg cfg;
	struct store_queue *q;
	struct store *s;
	uint32_t lo, hi, n;
	bool tail;
	int fd;

	mktmp();
	fill(clean);
	vr = verify_now();
	T_ASSERT(!store_verify_damaged(&vr));
	T_ASSERT_EQ(vr.recs, DN);
	T_ASSERT_EQ(vr.units, DN);
	hurt(h, i, &lo, &hi);
	vr = verify_now();
	T_ASSERT(store_verify_damaged(&vr));
	T_ASSERT(vr.bad_spans + vr.segs_odd >= 1);
	T_ASSERT(vr.units_bad + vr.units_gone >= hi - lo);

	/*
	 * The newest segment cut: its tail is gone for good, the log ends there
	 * and the queue with it (offsets past it are written again).
	 */
	tail = h == H_TRUNC && hi == DN;
	n = tail ? lo : DN;
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	T_ASSERT(fd >= 0);
	log_set_fd(fd);
	cfg_dmg(&cfg);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	T_ASSERT_EQ(read_all(s, q, n, lo, hi), tail ? n : DN - (hi - lo));
	T_ASSERT_EQ(store_damage(s, 0, &d), 0);
	/* Found at start (a span) or by the reads (counted, and logged by the service thread). */
	T_ASSERT(d.spans >= 1 || d.bad_reads >= 1 || tail);
	T_ASSERT(d.lost + d.bad_reads >= (tail ? 0 : hi - lo));
	T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	T_ASSERT(log_has("W store.clog: shard 0: segment ") || log_has("a damaged record at "));
	/* Appends go on after it, and are read back. */
	put_all(s, q, n, DN_MORE);
	T_ASSERT_EQ(store_flush_all(s), 0);
	T_ASSERT_EQ(read_all(s, q, n + 50, lo, hi), tail ? n + 50 : n + 50 - (hi - lo));
	store_close(s);

	/* The next start checks from the verified mark: nothing new to say. */
	T_ASSERT_EQ(ftruncate(fd, 0), 0);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	T_ASSERT_EQ(store_damage(s, 0, &d), 0);
	T_ASSERT_EQ(d.spans, 0);
	T_ASSERT_EQ(read_all(s, q, n + 50, lo, hi), tail ? n + 50 : n + 50 - (hi - lo));
	store_close(s);
	log_set_fd(2);
	close(fd);
	rmtmp();
}

/* An older segment (the second) and the newest one holding records. */
static uint32_t
older(void)
{
	return msg_at(DSEG + DSEG / 3);
}

static uint32_t
newest(void)
{
	uint64_t last = (uint64_t)phys[DN - 1];

	return msg_at(last - last % DSEG + 200);
}

static void
run(enum hurt h)
{
	for (int clean = 0; clean <= 1; clean++) {
		/* phys[] is known after the first fill: every fill writes the same log. */
		mktmp();
		fill(true);
		rmtmp();
		T_ASSERT((uint64_t)phys[DN - 1] / DSEG >= 3);
		dmg_case(h, older(), clean);
		dmg_case(h, newest(), clean);
	}
}

static void
test_flip_body(void)
{
	run(H_FLIP);
}

static void
test_zero_page(void)
{
	run(H_PAGE);
}

static void
test_truncate_mid_record(void)
{
	run(H_TRUNC);
}

/*
 * Damage the start's check no longer looks at (below the verified mark):
 * found by the reads. The record with flipped body bytes is never returned,
 * each read is counted, the log says where once, and the queue goes on.
 */
static void
test_found_by_reads(void)
{
	struct store_damage d;
	struct store_cfg cfg;
	struct store_queue *q;
	struct store *s;
	uint32_t lo, hi;
	int fd;

	mktmp();
	fill(true);
	cfg_dmg(&cfg);
	/* A clean start and stop: the checkpoint's verified mark is the end now. */
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	store_close(s);
	hurt(H_FLIP, msg_at(2 * DSEG + 100), &lo, &hi);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	T_ASSERT(fd >= 0);
	log_set_fd(fd);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_queue_get(s, "A", 0, 0, &q), 0);
	T_ASSERT_EQ(store_damage(s, 0, &d), 0);
	T_ASSERT_EQ(d.spans, 0); /* not seen at start: below the verified mark */
	T_ASSERT_EQ(d.bad_reads, 0);
	T_ASSERT_EQ(read_all(s, q, DN, lo, hi), DN - 1);
	T_ASSERT_EQ(read_all(s, q, DN, lo, hi), DN - 1);
	T_ASSERT_EQ(store_damage(s, 0, &d), 0);
	T_ASSERT_EQ(d.bad_reads, 2);
	T_ASSERT_EQ_U64(d.last_bad, (uint64_t)phys[lo]);
	T_ASSERT(!log_has("a damaged record at "));
	T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	{
		char want[160];

		snprintf(want, sizeof(want),
			 "W store: shard 0: a damaged record at %llu in segment %020llu (body CRC",
			 (unsigned long long)phys[lo],
			 (unsigned long long)(phys[lo] - phys[lo] % DSEG));
		T_ASSERT(log_has(want));
	}
	store_close(s);
	log_set_fd(2);
	close(fd);
	rmtmp();
}

/* A store without damage: --verify says clean, and the store opens without a warning. */
static void
test_verify_clean(void)
{
	struct store_verify_res vr;

	mktmp();
	fill(true);
	vr = verify_now();
	T_ASSERT(!store_verify_damaged(&vr));
	T_ASSERT_EQ(vr.bad_spans + vr.units_bad + vr.units_gone + vr.units_lost, 0);
	T_ASSERT(vr.segs >= 4);
	rmtmp();
}

T_MAIN(T_CASE(test_flip_body), T_CASE(test_zero_page), T_CASE(test_truncate_mid_record),
       T_CASE(test_found_by_reads), T_CASE(test_verify_clean))
