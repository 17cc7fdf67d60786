// SPDX-License-Identifier: Apache-2.0
/*
 * test_cq.c - ConsumeQueue: appends across many small files (8 units each),
 * the prepare/-EAGAIN handshake, recovery on reopen, queues that start at an
 * offset, truncation, retention, search, bad files and flush, through a
 * counting store_io_ops table that can also fail chosen calls.
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "harness.h"
#include "store/cq.h"
#include "store/io.h"

#define UPF 8
#define FILE_BYTES (UPF * CQ_UNIT_SIZE)
#define NOW 1000000 /* the service clock (ms) passed to cq_trim_phys() */

/* Counting wrapper over store_io_posix; fail_* make the next such call fail. */
struct tio {
	atomic_int syncs;
	atomic_int fail_sync;
	atomic_int fail_alloc;
	int maps;
	int unmaps;
	char synced_dirs[8][128]; /* the directories sync_dir() was called for, in order */
	int n_synced_dirs;
};

static struct tio tio;

static int
t_open(void *c, const char *p, int f, mode_t m)
{
	(void)c;
	return store_io_posix.open(NULL, p, f, m);
}

static int
t_close(void *c, int fd)
{
	(void)c;
	return store_io_posix.close(NULL, fd);
}

static int
t_allocate(void *c, int fd, uint64_t len)
{
	(void)c;
	if (atomic_exchange(&tio.fail_alloc, 0))
		return -ENOSPC;
	return store_io_posix.allocate(NULL, fd, len);
}

static int
t_truncate(void *c, int fd, uint64_t len)
{
	(void)c;
	return store_io_posix.truncate(NULL, fd, len);
}

static ssize_t
t_pwrite(void *c, int fd, const void *b, size_t n, uint64_t off)
{
	(void)c;
	return store_io_posix.pwrite(NULL, fd, b, n, off);
}

static ssize_t
t_pread(void *c, int fd, void *b, size_t n, uint64_t off)
{
	(void)c;
	return store_io_posix.pread(NULL, fd, b, n, off);
}

static int
t_fdatasync(void *c, int fd)
{
	(void)c;
	if (atomic_exchange(&tio.fail_sync, 0))
		return -EIO;
	atomic_fetch_add(&tio.syncs, 1);
	return store_io_posix.fdatasync(NULL, fd);
}

static int
t_map(void *c, int fd, size_t len, void **out)
{
	(void)c;
	tio.maps++;
	return store_io_posix.map(NULL, fd, len, out);
}

static int
t_unmap(void *c, void *a, size_t len)
{
	(void)c;
	tio.unmaps++;
	return store_io_posix.unmap(NULL, a, len);
}

static int
t_unlink(void *c, const char *p)
{
	(void)c;
	return store_io_posix.unlink(NULL, p);
}

static int
t_rename(void *c, const char *a, const char *b)
{
	(void)c;
	return store_io_posix.rename(NULL, a, b);
}

static int
t_sync_dir(void *c, const char *d)
{
	(void)c;
	if (tio.n_synced_dirs < 8)
		snprintf(tio.synced_dirs[tio.n_synced_dirs++], sizeof(tio.synced_dirs[0]), "%s", d);
	return store_io_posix.sync_dir(NULL, d);
}

static int
t_size(void *c, int fd, uint64_t *out)
{
	(void)c;
	return store_io_posix.size(NULL, fd, out);
}

static const struct store_io_ops tops = {
	.open = t_open,
	.close = t_close,
	.allocate = t_allocate,
	.truncate = t_truncate,
	.pwrite = t_pwrite,
	.pread = t_pread,
	.fdatasync = t_fdatasync,
	.map = t_map,
	.unmap = t_unmap,
	.unlink = t_unlink,
	.rename = t_rename,
	.sync_dir = t_sync_dir,
	.size = t_size,
};

static char root[64];
static char qdir[128];

static void
setup(void)
{
	snprintf(root, sizeof(root), "/tmp/sp_cq_XXXXXX");
	T_ASSERT(mkdtemp(root) != NULL);
	snprintf(qdir, sizeof(qdir), "%s/consumequeue/T/0", root);
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void
teardown(void)
{
	T_ASSERT_EQ(nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static struct cq_unit
unit_of(uint64_t i)
{
	struct cq_unit u = {
		.phys = (int64_t)i * 100,
		.size = 50,
		.tag_hash = (int64_t)(i * 7919) - 1000,
	};
	return u;
}

static struct cq *
open_q(void)
{
	struct cq *q = NULL;

	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), 0);
	T_ASSERT(q != NULL);
	return q;
}

/*
 * Append [lo, hi), preparing files whenever the queue asks and draining the
 * ring only when it is full: units stay in it, as they do on a core.
 */
static void
append_range(struct cq *q, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi; i++) {
		struct cq_unit u = unit_of(i);
		int rc = cq_append(q, i, &u);

		if (rc == -EAGAIN && cq_wb_drain(q) > 0)
			rc = cq_append(q, i, &u); /* the ring was full, or a file is missing */
		if (rc == -EAGAIN) {
			T_ASSERT(cq_wants_next(q));
			T_ASSERT_EQ(cq_prepare_next(q), 0);
			rc = cq_append(q, i, &u);
		}
		T_ASSERT_EQ(rc, 0);
		if (cq_wants_next(q))
			T_ASSERT_EQ(cq_prepare_next(q), 0);
	}
}

static void
check_range(const struct cq *q, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi; i++) {
		struct cq_unit want = unit_of(i);
		struct cq_unit got;

		T_ASSERT_EQ(cq_get(q, i, &got), 0);
		T_ASSERT_EQ(got.phys, want.phys);
		T_ASSERT_EQ(got.size, want.size);
		T_ASSERT_EQ(got.tag_hash, want.tag_hash);
	}
}

static bool
file_exists(uint64_t first_unit)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%020llu", qdir, (unsigned long long)(first_unit * CQ_UNIT_SIZE));
	return stat(p, &st) == 0 && st.st_size == FILE_BYTES;
}

static int
count_entries(void)
{
	DIR *d = opendir(qdir);
	struct dirent *de;
	int n = 0;

	if (d == NULL && errno == ENOENT)
		return -1; /* no directory */
	T_ASSERT(d != NULL);
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static void
write_file(const char *name, const void *buf, size_t len)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", qdir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	T_ASSERT(fd >= 0);
	if (len > 0)
		T_ASSERT_EQ(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void
test_append_get(void)
{
	struct cq_unit u = unit_of(0);
	uint8_t raw[CQ_UNIT_SIZE];
	const uint8_t want[CQ_UNIT_SIZE] = {
		0, 0, 0, 0,  0, 0, 0,	 100,  /* phys 100, big-endian */
		0, 0, 0, 50,		       /* size 50 */
		0, 0, 0, 0,  0, 0, 0x1b, 0x07, /* 7919 - 1000 = 6919 */
	};
	struct cq *q;
	char p[256];
	int fd;

	setup();
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 0);
	T_ASSERT_EQ_U64(cq_min(q), 0);
	T_ASSERT(!cq_wants_next(q));
	/* A new queue has no file, not even a directory, and takes units without one. */
	T_ASSERT_EQ(count_entries(), -1);
	T_ASSERT(cq_can_append(q));
	T_ASSERT_EQ(cq_append(q, 0, &u), 0);
	T_ASSERT(!file_exists(0));
	T_ASSERT(cq_wants_next(q));
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(file_exists(0));
	T_ASSERT(!cq_wants_next(q));
	/* The directories made with the first file are synced by the next flush, up to the root. */
	tio.n_synced_dirs = 0;
	T_ASSERT_EQ(cq_flush(q), 0);
	{
		char topic[160], top[160];

		snprintf(topic, sizeof(topic), "%s/consumequeue/T", root);
		snprintf(top, sizeof(top), "%s/consumequeue", root);
		T_ASSERT_EQ(tio.n_synced_dirs, 3);
		T_ASSERT_STREQ(tio.synced_dirs[0], topic);
		T_ASSERT_STREQ(tio.synced_dirs[1], top);
		T_ASSERT_STREQ(tio.synced_dirs[2], qdir);
	}
	T_ASSERT(cq_idle(q));
	append_range(q, 1, 5 * UPF + 3);
	T_ASSERT_EQ_U64(cq_max(q), 5 * UPF + 3);
	T_ASSERT_EQ_U64(cq_min(q), 0);
	check_range(q, 0, 5 * UPF + 3);
	T_ASSERT_EQ(cq_get(q, 5 * UPF + 3, &u), -ERANGE);
	for (int i = 0; i <= 5; i++)
		T_ASSERT(file_exists((uint64_t)i * UPF));
	T_ASSERT(!file_exists(6 * UPF));

	/* Units 1.. are in the ring (the flush drained unit 0): the files hold none until the drain. */
	snprintf(p, sizeof(p), "%s/00000000000000000000", qdir);
	fd = open(p, O_RDONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pread(fd, raw, sizeof(raw), CQ_UNIT_SIZE), (ssize_t)sizeof(raw));
	close(fd);
	for (size_t i = 0; i < sizeof(raw); i++)
		T_ASSERT_EQ(raw[i], 0);
	T_ASSERT_EQ_U64(cq_wb_drain(q), 5 * UPF + 2);
	T_ASSERT_EQ_U64(cq_wb_drain(q), 0);
	check_range(q, 0, 5 * UPF + 3); /* now from the files */

	/* The on-disk unit is RocketMQ's big-endian layout. */
	snprintf(p, sizeof(p), "%s/00000000000000000160", qdir);
	fd = open(p, O_RDONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pread(fd, raw, sizeof(raw), 0), (ssize_t)sizeof(raw));
	close(fd);
	T_ASSERT_EQ(raw[7], 8 * 100 & 0xff);
	snprintf(p, sizeof(p), "%s/00000000000000000000", qdir);
	fd = open(p, O_RDONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pread(fd, raw, sizeof(raw), CQ_UNIT_SIZE), (ssize_t)sizeof(raw));
	close(fd);
	T_ASSERT_MEMEQ(raw, want, sizeof(want));

	cq_close(q);
	T_ASSERT_EQ(tio.maps, tio.unmaps);
	teardown();
}

static void
test_eagain_without_prepare(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	/* Nothing asked, nothing made: an idle queue has no file. */
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT_EQ(count_entries(), -1);
	u = unit_of(0);
	T_ASSERT_EQ(cq_append(q, 0, &u), 0);
	T_ASSERT(cq_wants_next(q)); /* the ring holds a unit no file has */
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(file_exists(0));
	for (uint64_t i = 1; i < UPF; i++) {
		u = unit_of(i);
		T_ASSERT_EQ(cq_append(q, i, &u), 0);
		/* 3/4 full: 6 of 8 units. */
		T_ASSERT(cq_wants_next(q) == (i + 1 >= 6));
		if (i == 3) {
			/* Too early: nothing is created. */
			T_ASSERT_EQ(cq_prepare_next(q), 0);
			T_ASSERT(!file_exists(UPF));
		}
	}
	/* Past the files: the ring takes it, the drain stops short of it. */
	T_ASSERT(cq_can_append(q));
	u = unit_of(UPF);
	T_ASSERT_EQ(cq_append(q, UPF, &u), 0);
	T_ASSERT_EQ_U64(cq_max(q), UPF + 1);
	T_ASSERT_EQ_U64(cq_wb_drain(q), UPF);
	T_ASSERT(!cq_drained(q));
	check_range(q, 0, UPF + 1); /* unit UPF from the ring */
	/* A failed creation leaves nothing behind, and the next try works. */
	atomic_store(&tio.fail_alloc, 1);
	T_ASSERT_EQ(cq_prepare_next(q), -ENOSPC);
	T_ASSERT_EQ(count_entries(), 1);
	atomic_store(&tio.fail_alloc, 1);
	T_ASSERT_EQ(cq_flush(q), -ENOSPC); /* nor does a flush claim the unit */
	T_ASSERT_EQ(count_entries(), 1);
	T_ASSERT(cq_wants_next(q));
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(!cq_wants_next(q));
	/* Preparing twice is a no-op while a file is waiting. */
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT_EQ(count_entries(), 2);
	T_ASSERT_EQ_U64(cq_wb_drain(q), 1);
	T_ASSERT(cq_drained(q));
	T_ASSERT_EQ(cq_flush(q), 0);
	T_ASSERT(cq_idle(q));
	append_range(q, UPF + 1, 4 * UPF);
	check_range(q, 0, 4 * UPF);
	cq_close(q);
	teardown();

	/* Reopen at a boundary with no next file: the ring holds the unit until it is made. */
	setup();
	q = open_q();
	append_range(q, 0, 16);
	cq_close(q);
	{
		char p[256];

		snprintf(p, sizeof(p), "%s/%020d", qdir, 16 * CQ_UNIT_SIZE);
		unlink(p);
	}
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 16);
	T_ASSERT(cq_can_append(q));
	T_ASSERT(cq_wants_next(q));
	u = unit_of(16);
	T_ASSERT_EQ(cq_append(q, 16, &u), 0);
	T_ASSERT_EQ(cq_flush(q), 0); /* makes the file, drains, syncs */
	T_ASSERT(file_exists(16));
	cq_close(q);
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 17);
	check_range(q, 0, 17);
	cq_close(q);
	teardown();
}

static void
test_reopen(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	append_range(q, 0, 21); /* 21 = 2 files + 5; the file after is prepared */
	T_ASSERT(file_exists(3 * UPF) == false);
	T_ASSERT_EQ(cq_flush(q), 0);
	cq_close(q);

	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 21);
	T_ASSERT_EQ_U64(cq_min(q), 0);
	check_range(q, 0, 21);
	append_range(q, 21, 30); /* rolls into file 3 */
	cq_close(q);

	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 30);
	check_range(q, 0, 30);
	append_range(q, 30, 32); /* exactly at a boundary, next file prepared */
	T_ASSERT(file_exists(4 * UPF));
	cq_close(q);

	/* Reopen at a boundary with the next file present but empty. */
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 32);
	T_ASSERT(cq_can_append(q));
	append_range(q, 32, 33);
	cq_close(q);

	teardown();

	/* Reopen at a boundary with no next file: -EAGAIN until prepared. */
	setup();
	q = open_q();
	append_range(q, 0, 16);
	cq_close(q);
	{
		char p[256];

		snprintf(p, sizeof(p), "%s/%020d", qdir, 16 * CQ_UNIT_SIZE);
		unlink(p);
	}
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 16);
	T_ASSERT(cq_can_append(q));
	T_ASSERT(cq_wants_next(q));
	u = unit_of(16);
	T_ASSERT_EQ(cq_append(q, 16, &u), 0);
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(file_exists(16));
	cq_close(q);
	teardown();
}

static void
test_recover_hole(void)
{
	uint8_t zero[CQ_UNIT_SIZE] = {0};
	uint8_t raw[FILE_BYTES];
	char p[256];
	struct cq *q;
	int fd;

	setup();
	q = open_q();
	append_range(q, 0, 21);
	cq_close(q);
	/* Out-of-order writeback lost unit 5: the queue ends there. */
	snprintf(p, sizeof(p), "%s/00000000000000000000", qdir);
	fd = open(p, O_RDWR);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pwrite(fd, zero, sizeof(zero), 5 * CQ_UNIT_SIZE), CQ_UNIT_SIZE);
	close(fd);
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 5);
	check_range(q, 0, 5);
	cq_close(q);
	/* The stale units after the hole were zeroed, so they never come back. */
	fd = open(p, O_RDONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pread(fd, raw, sizeof(raw), 0), (ssize_t)sizeof(raw));
	close(fd);
	for (size_t i = 5 * CQ_UNIT_SIZE; i < sizeof(raw); i++)
		T_ASSERT_EQ(raw[i], 0);
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 5);
	append_range(q, 5, 6);
	cq_close(q);
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 6);
	cq_close(q);
	teardown();
}

static void
test_start_offset(void)
{
	struct cq_unit u = unit_of(19);
	struct cq *q;

	/* A new queue starting in its third file: earlier files never exist. */
	setup();
	q = open_q();
	T_ASSERT_EQ(cq_append(q, 19, &u), -EAGAIN);
	T_ASSERT(cq_wants_next(q));
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT_EQ(cq_append(q, 19, &u), 0);
	T_ASSERT_EQ_U64(cq_min(q), 19);
	T_ASSERT_EQ_U64(cq_max(q), 20);
	T_ASSERT(!file_exists(0));
	T_ASSERT(!file_exists(UPF));
	T_ASSERT(file_exists(2 * UPF));
	T_ASSERT_EQ(cq_get(q, 18, &u), -ERANGE);
	T_ASSERT_EQ(cq_get(q, 16, &u), -ERANGE);
	append_range(q, 20, 35);
	check_range(q, 19, 35);
	/* Below min: nothing left to compare, accepted as present. */
	u = unit_of(3);
	T_ASSERT_EQ(cq_append(q, 3, &u), 0);
	cq_close(q);
	q = open_q();
	T_ASSERT_EQ_U64(cq_min(q), 19); /* the fillers before 19 are not units */
	T_ASSERT_EQ_U64(cq_max(q), 35);
	check_range(q, 19, 35);
	cq_close(q);
	teardown();

	/* A start inside the first file asks for it; nothing asked, nothing made. */
	setup();
	q = open_q();
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(!file_exists(0));
	u = unit_of(5);
	T_ASSERT_EQ(cq_append(q, 5, &u), -EAGAIN);
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(file_exists(0));
	T_ASSERT_EQ(cq_append(q, 5, &u), 0);
	T_ASSERT_EQ_U64(cq_min(q), 5);
	append_range(q, 6, 12);
	cq_close(q);
	q = open_q();
	T_ASSERT_EQ_U64(cq_min(q), 5);
	T_ASSERT_EQ_U64(cq_max(q), 12);
	check_range(q, 5, 12);
	cq_close(q);
	teardown();

	/* The first offset asked fixes the first file. */
	setup();
	q = open_q();
	u = unit_of(5);
	T_ASSERT_EQ(cq_append(q, 5, &u), -EAGAIN);
	T_ASSERT_EQ(cq_prepare_next(q), 0); /* file 0 */
	u = unit_of(40);
	T_ASSERT_EQ(cq_append(q, 40, &u), -EINVAL);
	cq_close(q);
	teardown();
}

static void
test_idempotent_and_gaps(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	append_range(q, 0, 10);
	u = unit_of(3);
	T_ASSERT_EQ(cq_append(q, 3, &u), 0);
	u = unit_of(9);
	T_ASSERT_EQ(cq_append(q, 9, &u), 0);
	u.tag_hash++;
	T_ASSERT_EQ(cq_append(q, 9, &u), -EEXIST);
	u = unit_of(3);
	u.phys++;
	T_ASSERT_EQ(cq_append(q, 3, &u), -EEXIST);
	u = unit_of(3);
	u.size++;
	T_ASSERT_EQ(cq_append(q, 3, &u), -EEXIST);
	/* Gaps. */
	u = unit_of(11);
	T_ASSERT_EQ(cq_append(q, 11, &u), -EINVAL);
	T_ASSERT_EQ(cq_append(q, 1000, &u), -EINVAL);
	/* Units recovery could not tell from the end or from a filler. */
	u = unit_of(10);
	u.size = 0;
	T_ASSERT_EQ(cq_append(q, 10, &u), -EINVAL);
	u.size = 0x7FFFFFFF;
	T_ASSERT_EQ(cq_append(q, 10, &u), -EINVAL);
	u.size = 0x80000000u;
	T_ASSERT_EQ(cq_append(q, 10, &u), -EINVAL);
	u = unit_of(10);
	u.phys = -1;
	T_ASSERT_EQ(cq_append(q, 10, &u), -EINVAL);
	T_ASSERT_EQ_U64(cq_max(q), 10);
	check_range(q, 0, 10);
	u = unit_of(10);
	T_ASSERT_EQ(cq_append(q, 10, &u), 0);
	cq_close(q);
	teardown();
}

static void
test_truncate_phys(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	append_range(q, 0, 30);
	/* Units are (i * 100, 50): cut the log at 1050 -> 0..10 survive. */
	T_ASSERT_EQ(cq_truncate_phys(q, 1050), 0);
	T_ASSERT_EQ_U64(cq_max(q), 11);
	T_ASSERT_EQ(cq_get(q, 11, &u), -ERANGE);
	check_range(q, 0, 11);
	/* Nothing past the end: no-op. */
	T_ASSERT_EQ(cq_truncate_phys(q, 1 << 30), 0);
	T_ASSERT_EQ_U64(cq_max(q), 11);
	/* A different unit may now take offset 11. */
	u = unit_of(11);
	u.tag_hash = 42;
	T_ASSERT_EQ(cq_append(q, 11, &u), 0);
	T_ASSERT_EQ(cq_truncate_phys(q, 1099), 0);
	T_ASSERT_EQ_U64(cq_max(q), 11);
	/* The files after the cut are reused, not recreated. */
	append_range(q, 11, 30);
	check_range(q, 0, 30);
	T_ASSERT_EQ(cq_flush(q), 0);
	/* A unit that ends exactly at the cut survives. */
	T_ASSERT_EQ(cq_truncate_phys(q, 1750), 0);
	T_ASSERT_EQ_U64(cq_max(q), 18);
	T_ASSERT_EQ(cq_flush(q), 0);
	cq_close(q);
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 18);
	check_range(q, 0, 18);
	/* Units by phys (recovery's count of those in a lost span): [500, 1000) holds 5..9. */
	T_ASSERT_EQ(cq_count_phys(q, 500, 1000), 5);
	T_ASSERT_EQ(cq_count_phys(q, 450, 501), 1);
	T_ASSERT_EQ(cq_count_phys(q, 1800, 5000), 0);
	T_ASSERT_EQ(cq_count_phys(q, 1000, 500), 0);
	/* Truncate everything. */
	T_ASSERT_EQ(cq_truncate_phys(q, 0), 0);
	T_ASSERT_EQ_U64(cq_max(q), 0);
	append_range(q, 0, 20);
	check_range(q, 0, 20);
	cq_close(q);
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 20);
	cq_close(q);
	teardown();
}

static void
test_trim_phys(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	append_range(q, 0, 40); /* files 0..4 full, file 5 prepared */
	/* A file whose units are still in the ring stays. */
	T_ASSERT_EQ(cq_trim_phys(q, 1700, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 17);
	T_ASSERT(file_exists(0));
	check_range(q, 17, 40);
	T_ASSERT_EQ_U64(cq_wb_drain(q), 40);
	T_ASSERT_EQ(cq_trim_phys(q, 1700, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 17);
	T_ASSERT(!file_exists(0));
	T_ASSERT(!file_exists(UPF));
	T_ASSERT(file_exists(2 * UPF));
	T_ASSERT_EQ(cq_get(q, 16, &u), -ERANGE);
	check_range(q, 17, 40);
	/* min never moves back. */
	T_ASSERT_EQ(cq_trim_phys(q, 0, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 17);
	/* Trim everything: the file holding max stays. */
	T_ASSERT_EQ(cq_trim_phys(q, INT64_MAX, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 40);
	T_ASSERT_EQ_U64(cq_max(q), 40);
	T_ASSERT(!file_exists(3 * UPF));
	T_ASSERT(file_exists(4 * UPF));
	T_ASSERT(file_exists(5 * UPF));
	T_ASSERT_EQ(cq_get(q, 39, &u), -ERANGE);
	/* The emptied queue restarts at an offset in its next file. */
	u = unit_of(45);
	T_ASSERT_EQ(cq_append(q, 45, &u), 0);
	T_ASSERT_EQ_U64(cq_min(q), 45);
	T_ASSERT_EQ_U64(cq_max(q), 46);
	T_ASSERT_EQ(cq_get(q, 44, &u), -ERANGE);
	append_range(q, 46, 60);
	check_range(q, 45, 60);
	T_ASSERT_EQ_U64(cq_wb_drain(q), 15);
	T_ASSERT_EQ(cq_trim_phys(q, 5000, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 50);
	T_ASSERT(!file_exists(5 * UPF));
	T_ASSERT_EQ(cq_flush(q), 0);
	cq_close(q);
	/* After a restart min is the first unit of the first file until trimmed again. */
	q = open_q();
	T_ASSERT_EQ_U64(cq_min(q), 48);
	T_ASSERT_EQ_U64(cq_max(q), 60);
	T_ASSERT_EQ(cq_trim_phys(q, 5000, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 50);
	cq_close(q);
	teardown();
}

/* Trimmed files are unlinked at once but unmapped only after the grace period. */
static void
test_trim_grace(void)
{
	struct cq_unit u;
	struct cq *q;
	int unmaps;

	setup();
	q = open_q();
	append_range(q, 0, 40); /* files 0..4 full, file 5 prepared; the table grew */
	T_ASSERT_EQ_U64(cq_wb_drain(q), 40);
	unmaps = tio.unmaps;
	T_ASSERT_EQ(cq_trim_phys(q, 1700, NOW), 0);
	T_ASSERT_EQ_U64(cq_min(q), 17);
	T_ASSERT(!file_exists(0));
	T_ASSERT(!file_exists(UPF));
	T_ASSERT_EQ(tio.unmaps, unmaps); /* a reader may still be in them */
	T_ASSERT_EQ(cq_get(q, 16, &u), -ERANGE);
	check_range(q, 17, 40);
	/* A later call releases them once the grace period is over, not before. */
	T_ASSERT_EQ(cq_trim_phys(q, 0, NOW + CQ_UNMAP_GRACE_MS - 1), 0);
	T_ASSERT_EQ(tio.unmaps, unmaps);
	T_ASSERT_EQ(cq_trim_phys(q, 0, NOW + CQ_UNMAP_GRACE_MS), 0);
	T_ASSERT_EQ(tio.unmaps, unmaps + 2);
	check_range(q, 17, 40);
	/* cq_close() releases what is still waiting. */
	T_ASSERT_EQ(cq_trim_phys(q, 2500, NOW + CQ_UNMAP_GRACE_MS), 0);
	T_ASSERT(!file_exists(2 * UPF));
	T_ASSERT_EQ(tio.unmaps, unmaps + 2);
	check_range(q, 25, 40);
	cq_close(q);
	T_ASSERT_EQ(tio.unmaps, tio.maps);
	teardown();
}

/*
 * Readers on another thread (a dataplane core's cq_get()/cq_min()/cq_max(),
 * a query's cq_search()) run while the owner appends and the background
 * side trims. The service clock only moves a grace period on once the
 * reader has come round twice since a trim, which is what the real grace
 * period (far longer than any read) guarantees.
 */
#define RD_UPF 16
#define RD_N 6000
#define RD_KEEP 40

struct rd {
	struct cq *q;
	atomic_bool done;
	atomic_ulong loops;
	atomic_long hits;
	atomic_long bad;
};

static int
rd_key(void *ctx, const struct cq_unit *u, int64_t *out)
{
	(void)ctx;
	*out = u->phys;
	return 0;
}

static void
rd_check(struct rd *r, uint64_t off)
{
	struct cq_unit want = unit_of(off);
	struct cq_unit got;
	int rc = cq_get(r->q, off, &got);

	if (rc == 0) {
		if (got.phys != want.phys || got.size != want.size || got.tag_hash != want.tag_hash)
			atomic_fetch_add(&r->bad, 1);
		atomic_fetch_add(&r->hits, 1);
	} else if (rc != -ERANGE || cq_min(r->q) <= off) {
		atomic_fetch_add(&r->bad, 1); /* -ERANGE only for a unit trimmed meanwhile */
	}
}

static void *
rd_reader(void *arg)
{
	struct rd *r = arg;
	uint64_t seed = 42;

	while (!atomic_load(&r->done)) {
		uint64_t min = cq_min(r->q);
		uint64_t max = cq_max(r->q);
		uint64_t off;
		int rc;

		if (min > max)
			atomic_fetch_add(&r->bad, 1);
		if (max > min) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			rd_check(r, min);
			rd_check(r, max - 1);
			rd_check(r, min + (seed >> 33) % (max - min));
			rc = cq_search(r->q, (int64_t)(min + (max - min) / 2) * 100, rd_key, NULL,
				       &off);
			if (rc != 0 && rc != -ERANGE)
				atomic_fetch_add(&r->bad, 1);
		}
		atomic_fetch_add(&r->loops, 1);
	}
	return NULL;
}

static void
test_trim_concurrent_readers(void)
{
	struct rd r = {0};
	int64_t now = NOW;
	pthread_t th;

	setup();
	T_ASSERT_EQ(cq_open(&tops, qdir, RD_UPF, &r.q), 0);
	T_ASSERT_EQ(pthread_create(&th, NULL, rd_reader, &r), 0);
	for (uint64_t i = 0; i < RD_N; i++) {
		struct cq_unit u = unit_of(i);
		int rc;

		while ((rc = cq_append(r.q, i, &u)) == -EAGAIN) {
			(void)cq_wb_drain(r.q);
			T_ASSERT_EQ(cq_prepare_next(r.q), 0);
		}
		T_ASSERT_EQ(rc, 0);
		if (cq_wants_next(r.q))
			T_ASSERT_EQ(cq_prepare_next(r.q), 0);
		if (i % 8 == 7 && i > RD_KEEP) {
			unsigned long seen;

			(void)cq_wb_drain(r.q);
			T_ASSERT_EQ(cq_trim_phys(r.q, (int64_t)(i - RD_KEEP) * 100, now), 0);
			T_ASSERT_EQ_U64(cq_min(r.q), i - RD_KEEP);
			seen = atomic_load(&r.loops);
			while (atomic_load(&r.loops) < seen + 2)
				sched_yield();
			now += CQ_UNMAP_GRACE_MS;
		}
	}
	atomic_store(&r.done, true);
	T_ASSERT_EQ(pthread_join(th, NULL), 0);
	T_ASSERT_EQ(atomic_load(&r.bad), 0);
	T_ASSERT(atomic_load(&r.hits) > 0);
	check_range(r.q, cq_min(r.q), RD_N);
	T_ASSERT(count_entries() <= (RD_KEEP + 2 * RD_UPF) / RD_UPF + 2);
	cq_close(r.q);
	T_ASSERT_EQ(tio.unmaps, tio.maps);
	teardown();
}

static int
key_phys(void *ctx, const struct cq_unit *u, int64_t *out)
{
	int *calls = ctx;

	(*calls)++;
	*out = u->phys;
	return 0;
}

static int
key_fail(void *ctx, const struct cq_unit *u, int64_t *out)
{
	(void)ctx;
	(void)u;
	(void)out;
	return -EIO;
}

static void
test_search(void)
{
	uint64_t off = 0;
	int calls = 0;
	struct cq *q;

	setup();
	q = open_q();
	T_ASSERT_EQ(cq_search(q, 0, key_phys, &calls, &off), 0);
	T_ASSERT_EQ_U64(off, 0);
	append_range(q, 0, 50);
	T_ASSERT_EQ(cq_search(q, 2550, key_phys, &calls, &off), 0);
	T_ASSERT_EQ_U64(off, 26);
	T_ASSERT(calls <= 7); /* log2(50) rounded up */
	T_ASSERT_EQ(cq_search(q, 2600, key_phys, &calls, &off), 0);
	T_ASSERT_EQ_U64(off, 26);
	T_ASSERT_EQ(cq_search(q, -5, key_phys, &calls, &off), 0);
	T_ASSERT_EQ_U64(off, 0);
	T_ASSERT_EQ(cq_search(q, 1 << 30, key_phys, &calls, &off), 0);
	T_ASSERT_EQ_U64(off, 50);
	T_ASSERT_EQ(cq_search(q, 100, key_fail, NULL, &off), -EIO);
	T_ASSERT_EQ(cq_trim_phys(q, 1200, NOW), 0);
	T_ASSERT_EQ(cq_search(q, 0, key_phys, &calls, &off), 0);
	T_ASSERT_EQ_U64(off, 12);
	cq_close(q);
	teardown();
}

static void
test_bad_files(void)
{
	uint8_t buf[FILE_BYTES + 1] = {0};
	struct cq *q = NULL;

	setup();
	T_ASSERT_EQ(cq_open(&tops, qdir, 0, &q), -EINVAL);
	T_ASSERT_EQ(cq_open(NULL, qdir, UPF, &q), -EINVAL);
	T_ASSERT_EQ(store_mkdirs(qdir), 0);

	/* Short file. */
	write_file("00000000000000000000", buf, 100);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), -EINVAL);
	/* Long file. */
	write_file("00000000000000000000", buf, FILE_BYTES);
	write_file("00000000000000000160", buf, FILE_BYTES + 1);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), -EINVAL);
	/* Empty file. */
	write_file("00000000000000000160", buf, 0);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), -EINVAL);
	/* Files of another units_per_file. */
	write_file("00000000000000000160", buf, FILE_BYTES);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF * 2, &q), -EINVAL);
	/* Name not on a file boundary. */
	write_file("00000000000000000020", buf, FILE_BYTES);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), -EINVAL);
	{
		char p[256];

		snprintf(p, sizeof(p), "%s/00000000000000000020", qdir);
		T_ASSERT_EQ(unlink(p), 0);
	}
	/* A missing file in the middle. */
	write_file("00000000000000000480", buf, FILE_BYTES);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), -EINVAL);
	write_file("00000000000000000320", buf, FILE_BYTES);
	/* Unknown names are ignored, a leftover .tmp is removed. */
	write_file("README", "x", 1);
	write_file("00000000000000000640.tmp", buf, 3);
	T_ASSERT_EQ(cq_open(&tops, qdir, UPF, &q), 0);
	T_ASSERT_EQ_U64(cq_max(q), 0);
	T_ASSERT_EQ_U64(cq_min(q), 0);
	T_ASSERT_EQ(count_entries(), 5);
	append_range(q, 0, 30);
	check_range(q, 0, 30);
	cq_close(q);
	teardown();
}

static void
test_flush(void)
{
	struct cq *q;
	int s;

	setup();
	q = open_q();
	T_ASSERT_EQ(cq_flush(q), 0); /* no file */
	append_range(q, 0, 5);
	s = atomic_load(&tio.syncs);
	T_ASSERT_EQ(cq_flush(q), 0);
	T_ASSERT_EQ(atomic_load(&tio.syncs) - s, 1);
	/* The flush drained the ring first: what it synced holds the units. */
	{
		char p[256];
		uint8_t raw[CQ_UNIT_SIZE];
		struct cq_unit u;
		int fd;

		snprintf(p, sizeof(p), "%s/00000000000000000000", qdir);
		fd = open(p, O_RDONLY);
		T_ASSERT(fd >= 0);
		T_ASSERT_EQ(pread(fd, raw, sizeof(raw), 4 * CQ_UNIT_SIZE), (ssize_t)sizeof(raw));
		close(fd);
		T_ASSERT_EQ(raw[7], 4 * 100 % 256); /* unit 4: phys 400, big-endian */
		T_ASSERT_EQ(raw[6], 4 * 100 / 256);
		T_ASSERT_EQ(cq_get(q, 4, &u), 0);
		T_ASSERT_EQ(u.phys, 400);
	}
	s = atomic_load(&tio.syncs);
	T_ASSERT_EQ(cq_flush(q), 0);
	T_ASSERT_EQ(atomic_load(&tio.syncs) - s, 0); /* nothing new */
	append_range(q, 5, 20);			     /* files 0, 1, 2 written */
	s = atomic_load(&tio.syncs);
	atomic_store(&tio.fail_sync, 1);
	T_ASSERT_EQ(cq_flush(q), -EIO);
	T_ASSERT_EQ(cq_flush(q), 0); /* retries every file */
	T_ASSERT_EQ(atomic_load(&tio.syncs) - s, 3);
	s = atomic_load(&tio.syncs);
	append_range(q, 20, 21);
	T_ASSERT_EQ(cq_flush(q), 0);
	T_ASSERT_EQ(atomic_load(&tio.syncs) - s, 1);
	/* A truncation makes the zeroed units dirty again. */
	T_ASSERT_EQ(cq_truncate_phys(q, 550), 0);
	T_ASSERT_EQ_U64(cq_max(q), 6);
	s = atomic_load(&tio.syncs);
	T_ASSERT_EQ(cq_flush(q), 0);
	T_ASSERT_EQ(atomic_load(&tio.syncs) - s, 3);
	cq_close(q);
	teardown();
}

/* The owning core appends while a background thread prepares and flushes. */
#define CONC_UPF 64
#define CONC_N 20000

struct conc {
	struct cq *q;
	atomic_bool done;
	long eagain;
};

static void *
conc_bg(void *arg)
{
	struct conc *c = arg;

	while (!atomic_load(&c->done)) {
		if (cq_wants_next(c->q) && cq_prepare_next(c->q) != 0)
			abort();
		if (cq_flush(c->q) != 0)
			abort();
	}
	return NULL;
}

static void
test_concurrent_flush(void)
{
	struct conc c = {0};
	pthread_t th;

	setup();
	T_ASSERT_EQ(cq_open(&tops, qdir, CONC_UPF, &c.q), 0);
	T_ASSERT_EQ(cq_prepare_next(c.q), 0);
	T_ASSERT_EQ(pthread_create(&th, NULL, conc_bg, &c), 0);
	for (uint64_t i = 0; i < CONC_N; i++) {
		struct cq_unit u = unit_of(i);
		int rc;

		while ((rc = cq_append(c.q, i, &u)) == -EAGAIN)
			c.eagain++;
		T_ASSERT_EQ(rc, 0);
		if (i % 97 == 0 && i > 0) {
			struct cq_unit g;

			T_ASSERT_EQ(cq_get(c.q, i / 2, &g), 0);
			T_ASSERT_EQ(g.phys, (int64_t)(i / 2) * 100);
		}
	}
	atomic_store(&c.done, true);
	T_ASSERT_EQ(pthread_join(th, NULL), 0);
	T_ASSERT_EQ(cq_flush(c.q), 0);
	check_range(c.q, 0, CONC_N);
	cq_close(c.q);
	T_ASSERT_EQ(cq_open(&tops, qdir, CONC_UPF, &c.q), 0);
	T_ASSERT_EQ_U64(cq_max(c.q), CONC_N);
	check_range(c.q, 0, CONC_N);
	cq_close(c.q);
	teardown();
}

/*
 * The write-behind ring under three threads, as in the store: an appender
 * (the core) that wraps the ring eight times, a drainer that also prepares
 * files (the service), and a reader of the newest two rings' worth of
 * units, which reads slots the appender reuses under it. Every read must
 * see the unit written at its offset, and the appender, once the ring is
 * warm, takes no page fault.
 */
#define WB_UPF 1024
#define WB_N (8 * CQ_WB_UNITS + 1000)

struct wbt {
	struct cq *q;
	atomic_bool done;
	atomic_ulong bad;
	atomic_ulong hits;
	atomic_int bg_err;
};

static void *
wb_bg(void *arg)
{
	struct wbt *w = arg;

	while (!atomic_load(&w->done)) {
		(void)cq_wb_drain(w->q);
		if (cq_wants_next(w->q) && cq_prepare_next(w->q) != 0)
			atomic_store(&w->bg_err, 1);
		sched_yield();
	}
	return NULL;
}

static void *
wb_reader(void *arg)
{
	struct wbt *w = arg;
	uint64_t seed = 7;

	while (!atomic_load(&w->done)) {
		uint64_t max = cq_max(w->q);
		uint64_t back;
		struct cq_unit want;
		struct cq_unit got;

		if (max == 0)
			continue;
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		back = (seed >> 33) % SP_MIN(max, 2 * (uint64_t)CQ_WB_UNITS);
		want = unit_of(max - 1 - back);
		if (cq_get(w->q, max - 1 - back, &got) != 0 || got.phys != want.phys ||
		    got.size != want.size || got.tag_hash != want.tag_hash)
			atomic_fetch_add(&w->bad, 1);
		else
			atomic_fetch_add(&w->hits, 1);
	}
	return NULL;
}

static long
thread_minflt(void)
{
	struct rusage ru;

	T_ASSERT_EQ(getrusage(RUSAGE_THREAD, &ru), 0);
	return ru.ru_minflt;
}

static void
test_wb_ring_concurrent(void)
{
	struct wbt w = {0};
	pthread_t bg;
	pthread_t rd;
	long flt = 0;

	setup();
	T_ASSERT_EQ(cq_open(&tops, qdir, WB_UPF, &w.q), 0);
	T_ASSERT_EQ(pthread_create(&bg, NULL, wb_bg, &w), 0);
	T_ASSERT_EQ(pthread_create(&rd, NULL, wb_reader, &w), 0);
	for (uint64_t i = 0; i < WB_N; i++) {
		struct cq_unit u = unit_of(i);
		int rc;

		if (i == 2 * CQ_WB_UNITS)
			flt = thread_minflt(); /* the ring went round twice: warm */
		while ((rc = cq_append(w.q, i, &u)) == -EAGAIN)
			sched_yield();
		T_ASSERT_EQ(rc, 0);
	}
	flt = thread_minflt() - flt;
	atomic_store(&w.done, true);
	T_ASSERT_EQ(pthread_join(bg, NULL), 0);
	T_ASSERT_EQ(pthread_join(rd, NULL), 0);
	T_ASSERT_EQ(atomic_load(&w.bg_err), 0);
	T_ASSERT_EQ(atomic_load(&w.bad), 0);
	T_ASSERT(atomic_load(&w.hits) > 0);
	T_ASSERT_EQ(flt, 0);
	T_ASSERT_EQ(cq_flush(w.q), 0);
	check_range(w.q, 0, WB_N);
	cq_close(w.q);
	T_ASSERT_EQ(cq_open(&tops, qdir, WB_UPF, &w.q), 0);
	T_ASSERT_EQ_U64(cq_max(w.q), WB_N);
	check_range(w.q, 0, WB_N);
	cq_close(w.q);
	teardown();
}

/*
 * A ring CQ_WB_UNITS behind is full: the core is refused (SYSTEM_BUSY,
 * counted apart from a file not ready) until a drain frees it.
 */
static void
test_wb_ring_full(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	T_ASSERT_EQ(cq_open(&tops, qdir, WB_UPF, &q), 0);
	T_ASSERT_EQ(cq_prepare_next(q), 0); /* the first file */
	for (uint64_t i = 0; i < CQ_WB_UNITS; i++) {
		u = unit_of(i);
		if (cq_wants_next(q))
			T_ASSERT_EQ(cq_prepare_next(q), 0);
		T_ASSERT(!cq_ring_full(q));
		T_ASSERT_EQ(cq_append(q, i, &u), 0);
	}
	if (cq_wants_next(q))
		T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(cq_ring_full(q));
	T_ASSERT(!cq_can_append(q));
	u = unit_of(CQ_WB_UNITS);
	T_ASSERT_EQ(cq_append(q, CQ_WB_UNITS, &u), -EAGAIN);
	/* Readers see every unit meanwhile, from the ring. */
	check_range(q, 0, CQ_WB_UNITS);
	T_ASSERT_EQ_U64(cq_wb_drain(q), CQ_WB_UNITS);
	T_ASSERT(!cq_ring_full(q));
	T_ASSERT(cq_can_append(q));
	T_ASSERT_EQ(cq_append(q, CQ_WB_UNITS, &u), 0);
	check_range(q, 0, CQ_WB_UNITS + 1);
	cq_close(q);
	teardown();
}

/*
 * An emptied queue that starts in its next file before the current one is
 * 3/4 full asks for that file (it used to wait for it for ever).
 */
static void
test_start_in_unprepared_next(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	append_range(q, 0, 2); /* file 0 holds 2 of 8: no next file wanted */
	T_ASSERT(!cq_wants_next(q));
	T_ASSERT_EQ_U64(cq_wb_drain(q), 2);
	T_ASSERT_EQ(cq_trim_phys(q, INT64_MAX, NOW), 0); /* emptied at 2 */
	u = unit_of(UPF + 3);
	T_ASSERT_EQ(cq_append(q, UPF + 3, &u), -EAGAIN);
	T_ASSERT(cq_wants_next(q));
	T_ASSERT_EQ(cq_prepare_next(q), 0);
	T_ASSERT(file_exists(UPF));
	T_ASSERT_EQ(cq_append(q, UPF + 3, &u), 0);
	T_ASSERT_EQ_U64(cq_min(q), UPF + 3);
	T_ASSERT_EQ_U64(cq_max(q), UPF + 4);
	check_range(q, UPF + 3, UPF + 4);
	cq_close(q);
	teardown();
}

/* A queue start writes fillers into the file itself: it waits for an empty ring. */
static void
test_wb_start_waits_for_ring(void)
{
	struct cq_unit u;
	struct cq *q;

	setup();
	q = open_q();
	append_range(q, 0, 10);
	T_ASSERT_EQ(cq_trim_phys(q, INT64_MAX, NOW), 0); /* emptied: min == max == 10 */
	T_ASSERT_EQ_U64(cq_min(q), 10);
	u = unit_of(13);
	T_ASSERT_EQ(cq_append(q, 13, &u), -EAGAIN); /* units 0..9 still in the ring */
	T_ASSERT_EQ_U64(cq_wb_drain(q), 10);
	T_ASSERT_EQ(cq_append(q, 13, &u), 0);
	T_ASSERT_EQ_U64(cq_min(q), 13);
	T_ASSERT_EQ_U64(cq_max(q), 14);
	check_range(q, 13, 14);
	T_ASSERT_EQ_U64(cq_wb_drain(q), 1);
	T_ASSERT_EQ(cq_flush(q), 0);
	cq_close(q);
	/* Units 0..9, the fillers and unit 13 are in the file (min is not persisted). */
	q = open_q();
	T_ASSERT_EQ_U64(cq_max(q), 14);
	T_ASSERT_EQ_U64(cq_min(q), 0);
	check_range(q, 0, 10);
	T_ASSERT_EQ(cq_get(q, 11, &u), 0);
	T_ASSERT_EQ(u.size, 0x7FFFFFFFu);
	check_range(q, 13, 14);
	cq_close(q);
	teardown();
}

T_MAIN(T_CASE(test_append_get), T_CASE(test_eagain_without_prepare), T_CASE(test_reopen),
       T_CASE(test_recover_hole), T_CASE(test_start_offset), T_CASE(test_idempotent_and_gaps),
       T_CASE(test_truncate_phys), T_CASE(test_trim_phys), T_CASE(test_trim_grace),
       T_CASE(test_trim_concurrent_readers), T_CASE(test_search), T_CASE(test_bad_files),
       T_CASE(test_flush), T_CASE(test_concurrent_flush), T_CASE(test_wb_ring_concurrent),
       T_CASE(test_wb_ring_full), T_CASE(test_wb_start_waits_for_ring),
       T_CASE(test_start_in_unprepared_next))
