// SPDX-License-Identifier: Apache-2.0
/*
 * test_idx.c - IndexFile: on-disk layout, chains and collisions, time range
 * and limit, file rolls, reopen, trim, flush with injected faults, corrupt
 * files on open, and queries racing puts and trims on other threads.
 *
 * Files are tiny (16 slots, 8 entries = 7 keys each) so buckets collide and
 * files roll every few puts. Store times sit on a whole-second grid from the
 * first put: the index keeps seconds, so that is what it can answer exactly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/log.h"
#include "harness.h"
#include "io_fault.h"
#include "store/idx.h"
#include "store/io.h"

#define SLOTS 16
#define ENTRIES 8
#define PER_FILE (ENTRIES - 1)
#define FILE_SIZE (IDX_HEADER_SIZE + SLOTS * IDX_SLOT_SIZE + ENTRIES * IDX_ENTRY_SIZE)
#define BASE_MS 1700000000000ll
#define ALL_TIME 0, INT64_MAX

struct tdir {
	char root[64];
	char dir[96];
};

static void
tdir_make(struct tdir *t)
{
	snprintf(t->root, sizeof(t->root), "/tmp/sp_idx_XXXXXX");
	T_ASSERT(mkdtemp(t->root) != NULL);
	/* A missing parent too: idx_open() creates the path. */
	snprintf(t->dir, sizeof(t->dir), "%s/a/index", t->root);
}

static void
tdir_clean(struct tdir *t)
{
	char path[512];
	struct dirent *de;
	DIR *d = opendir(t->dir);

	if (d != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", t->dir, de->d_name);
			T_ASSERT_EQ(unlink(path), 0);
		}
		closedir(d);
		T_ASSERT_EQ(rmdir(t->dir), 0);
	}
	snprintf(path, sizeof(path), "%s/a", t->root);
	rmdir(path);
	T_ASSERT_EQ(rmdir(t->root), 0);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the files in @dir; returns the count. */
static size_t
list_files(const char *dir, char names[][32], size_t cap)
{
	char *ptrs[512];
	char tmp[512][32];
	struct dirent *de;
	size_t n = 0;
	DIR *d = opendir(dir);

	T_ASSERT(d != NULL);
	T_ASSERT(cap <= 512);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		T_ASSERT(n < cap);
		snprintf(tmp[n], sizeof(tmp[n]), "%.31s", de->d_name);
		ptrs[n] = tmp[n];
		n++;
	}
	closedir(d);
	qsort(ptrs, n, sizeof(ptrs[0]), cmp_str);
	for (size_t i = 0; i < n; i++)
		snprintf(names[i], 32, "%.31s", ptrs[i]);
	return n;
}

static size_t
count_files(const char *dir)
{
	static char names[512][32];

	return list_files(dir, names, 512);
}

/* Java String.hashCode for ASCII, written independently of wire_tag_hash. */
static uint32_t
java_abs_hash(const char *s)
{
	uint32_t h = 0;
	int32_t v;

	for (; *s; s++)
		h = 31 * h + (unsigned char)*s;
	v = (int32_t)h;
	if (v == INT32_MIN)
		return 0;
	return (uint32_t)(v < 0 ? -v : v);
}

static void
put(struct idx *x, const char *key, int64_t phys, int64_t ms)
{
	T_ASSERT_EQ(idx_put(x, key, strlen(key), phys, ms), 0);
}

static long
query(struct idx *x, const char *key, int64_t b, int64_t e, int64_t *out, size_t max)
{
	return idx_query(x, key, strlen(key), b, e, out, max);
}

static struct idx *
open_idx(struct tdir *t)
{
	struct idx *x = NULL;

	T_ASSERT_EQ(idx_open(&store_io_posix, t->dir, SLOTS, ENTRIES, &x), 0);
	T_ASSERT(x != NULL);
	return x;
}

static uint64_t
be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void
read_whole(const char *path, uint8_t *buf, size_t n)
{
	int fd = open(path, O_RDONLY);

	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pread(fd, buf, n, 0), (ssize_t)n);
	close(fd);
}

static void
test_empty(void)
{
	struct tdir t;
	struct idx *x;
	int64_t out[4];

	tdir_make(&t);
	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), -1);
	T_ASSERT_EQ(query(x, "T#a", ALL_TIME, out, 4), 0);
	T_ASSERT_EQ(idx_flush(x), 0);
	T_ASSERT_EQ(idx_trim_phys(x, INT64_MAX), 0);
	T_ASSERT_EQ(count_files(t.dir), 0); /* nothing created before the first put */
	idx_close(x);
	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), -1);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_invalid_args(void)
{
	struct tdir t;
	struct idx *x = NULL;
	int64_t out[2];

	tdir_make(&t);
	T_ASSERT_EQ(idx_open(&store_io_posix, t.dir, 0, ENTRIES, &x), -EINVAL);
	T_ASSERT_EQ(idx_open(&store_io_posix, t.dir, SLOTS, 1, &x), -EINVAL);
	T_ASSERT_EQ(idx_open(NULL, t.dir, SLOTS, ENTRIES, &x), -EINVAL);
	T_ASSERT(x == NULL);
	x = open_idx(&t);
	T_ASSERT_EQ(idx_put(x, "k", 1, -1, BASE_MS), -EINVAL);
	T_ASSERT_EQ(idx_put(x, "k", 1, 0, -1), -EINVAL);
	T_ASSERT_EQ(idx_put(x, NULL, 3, 0, BASE_MS), -EINVAL);
	T_ASSERT_EQ(idx_query(x, NULL, 3, ALL_TIME, out, 2), -EINVAL);
	put(x, "k", 5, BASE_MS);
	T_ASSERT_EQ(query(x, "k", BASE_MS + 1, BASE_MS, out, 2), 0); /* begin > end */
	T_ASSERT_EQ(query(x, "k", ALL_TIME, out, 0), 0);
	T_ASSERT_EQ(query(x, "k", ALL_TIME, NULL, 0), 0);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_put_query_order(void)
{
	struct tdir t;
	struct idx *x;
	int64_t out[8];

	tdir_make(&t);
	x = open_idx(&t);
	put(x, "T#a", 100, BASE_MS);
	put(x, "T#b", 150, BASE_MS);
	put(x, "T#a", 200, BASE_MS + 1000);
	put(x, "T#a", 300, BASE_MS + 2000);
	T_ASSERT_EQ(query(x, "T#a", ALL_TIME, out, 8), 3);
	T_ASSERT_EQ(out[0], 300);
	T_ASSERT_EQ(out[1], 200);
	T_ASSERT_EQ(out[2], 100);
	T_ASSERT_EQ(query(x, "T#b", ALL_TIME, out, 8), 1);
	T_ASSERT_EQ(out[0], 150);
	T_ASSERT_EQ(query(x, "T#nope", ALL_TIME, out, 8), 0);
	T_ASSERT_EQ(query(x, "", ALL_TIME, out, 8), 0);
	T_ASSERT_EQ(idx_last_phys(x), 300);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_layout_on_disk(void)
{
	char names[4][32];
	char path[256];
	uint8_t buf[FILE_SIZE];
	struct tdir t;
	struct idx *x;
	uint32_t h = java_abs_hash("T#k1");
	uint32_t slot = h % SLOTS;
	const uint8_t *e1 = buf + IDX_HEADER_SIZE + SLOTS * 4 + 1 * IDX_ENTRY_SIZE;
	const uint8_t *e2 = e1 + IDX_ENTRY_SIZE;
	struct stat st;

	tdir_make(&t);
	x = open_idx(&t);
	put(x, "T#k1", 0x0102030405060708ll, BASE_MS);
	put(x, "T#k1", 0x0102030405060800ll, BASE_MS + 3999); /* 3.999 s -> 3 */
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);

	T_ASSERT_EQ(list_files(t.dir, names, 4), 1);
	T_ASSERT_EQ(strlen(names[0]), 17);
	T_ASSERT(strspn(names[0], "0123456789") == 17);
	snprintf(path, sizeof(path), "%s/%s", t.dir, names[0]);
	T_ASSERT_EQ(stat(path, &st), 0);
	T_ASSERT_EQ(st.st_size, FILE_SIZE);
	read_whole(path, buf, sizeof(buf));
	T_ASSERT_EQ(be(buf + 0, 8), BASE_MS);
	T_ASSERT_EQ(be(buf + 8, 8), BASE_MS + 3999);
	T_ASSERT_EQ_U64(be(buf + 16, 8), 0x0102030405060708ull);
	T_ASSERT_EQ_U64(be(buf + 24, 8), 0x0102030405060800ull);
	T_ASSERT_EQ(be(buf + 32, 4), 1); /* one bucket in use */
	T_ASSERT_EQ(be(buf + 36, 4), 3); /* starts at 1, two entries */
	T_ASSERT_EQ(be(buf + IDX_HEADER_SIZE + slot * 4, 4), 2);
	T_ASSERT_EQ(be(e1 + 0, 4), h);
	T_ASSERT_EQ_U64(be(e1 + 4, 8), 0x0102030405060708ull);
	T_ASSERT_EQ(be(e1 + 12, 4), 0);
	T_ASSERT_EQ(be(e1 + 16, 4), 0);
	T_ASSERT_EQ(be(e2 + 0, 4), h);
	T_ASSERT_EQ_U64(be(e2 + 4, 8), 0x0102030405060800ull);
	T_ASSERT_EQ(be(e2 + 12, 4), 3);
	T_ASSERT_EQ(be(e2 + 16, 4), 1);
	tdir_clean(&t);
}

static void
test_time_range(void)
{
	struct tdir t;
	struct idx *x;
	int64_t out[16];

	tdir_make(&t);
	x = open_idx(&t);
	/* 20 puts: three files, so the range crosses rolls. */
	for (int i = 0; i < 20; i++)
		put(x, "T#k", i * 10, BASE_MS + i * 1000);
	T_ASSERT_EQ(query(x, "T#k", BASE_MS + 1000, BASE_MS + 3000, out, 16), 3);
	T_ASSERT_EQ(out[0], 30);
	T_ASSERT_EQ(out[1], 20);
	T_ASSERT_EQ(out[2], 10);
	T_ASSERT_EQ(query(x, "T#k", BASE_MS + 3500, BASE_MS + 4999, out, 16), 1);
	T_ASSERT_EQ(out[0], 40);
	/* Crosses the first roll (7 keys per file). */
	T_ASSERT_EQ(query(x, "T#k", BASE_MS + 5000, BASE_MS + 9000, out, 16), 5);
	for (int i = 0; i < 5; i++)
		T_ASSERT_EQ(out[i], (9 - i) * 10);
	T_ASSERT_EQ(query(x, "T#k", 0, BASE_MS - 1, out, 16), 0);
	T_ASSERT_EQ(query(x, "T#k", BASE_MS + 20000, INT64_MAX, out, 16), 0);
	T_ASSERT_EQ(query(x, "T#k", BASE_MS + 19000, BASE_MS + 19000, out, 16), 1);
	T_ASSERT_EQ(out[0], 190);
	T_ASSERT_EQ(query(x, "T#k", ALL_TIME, out, 16), 16);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_max_limit(void)
{
	struct tdir t;
	struct idx *x;
	int64_t out[32];

	tdir_make(&t);
	x = open_idx(&t);
	for (int i = 0; i < 20; i++)
		put(x, "T#m", 1000 + i, BASE_MS + i * 1000);
	T_ASSERT_EQ(query(x, "T#m", ALL_TIME, out, 5), 5);
	for (int i = 0; i < 5; i++)
		T_ASSERT_EQ(out[i], 1019 - i);
	T_ASSERT_EQ(query(x, "T#m", ALL_TIME, out, 1), 1);
	T_ASSERT_EQ(out[0], 1019);
	/* Exactly at a file boundary: 6 in the newest file, then 7 more. */
	T_ASSERT_EQ(query(x, "T#m", ALL_TIME, out, 13), 13);
	T_ASSERT_EQ(out[12], 1007);
	T_ASSERT_EQ(query(x, "T#m", ALL_TIME, out, 32), 20);
	T_ASSERT_EQ(out[19], 1000);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_slot_collisions(void)
{
	char k1[32];
	char k2[32];
	struct tdir t;
	struct idx *x;
	int64_t out[8];
	int found = 0;

	/* Two keys with different hashes in the same bucket. */
	snprintf(k1, sizeof(k1), "T#c0");
	for (int i = 1; i < 1000 && !found; i++) {
		snprintf(k2, sizeof(k2), "T#c%d", i);
		found = java_abs_hash(k2) % SLOTS == java_abs_hash(k1) % SLOTS &&
			java_abs_hash(k2) != java_abs_hash(k1);
	}
	T_ASSERT(found);

	tdir_make(&t);
	x = open_idx(&t);
	put(x, k1, 1, BASE_MS);
	put(x, k2, 2, BASE_MS);
	put(x, k1, 3, BASE_MS + 1000);
	put(x, k2, 4, BASE_MS + 1000);
	T_ASSERT_EQ(query(x, k1, ALL_TIME, out, 8), 2);
	T_ASSERT_EQ(out[0], 3);
	T_ASSERT_EQ(out[1], 1);
	T_ASSERT_EQ(query(x, k2, ALL_TIME, out, 8), 2);
	T_ASSERT_EQ(out[0], 4);
	T_ASSERT_EQ(out[1], 2);

	/* "Aa" and "BB" share a Java hash: both match, callers re-check keys. */
	T_ASSERT_EQ(java_abs_hash("T#Aa"), java_abs_hash("T#BB"));
	put(x, "T#Aa", 10, BASE_MS + 2000);
	put(x, "T#BB", 11, BASE_MS + 2000);
	T_ASSERT_EQ(query(x, "T#Aa", ALL_TIME, out, 8), 2);
	T_ASSERT_EQ(out[0], 11);
	T_ASSERT_EQ(out[1], 10);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_many_files(void)
{
	static char names[64][32];
	char path[256];
	uint8_t hdr[IDX_HEADER_SIZE];
	struct tdir t;
	struct idx *x;
	int64_t out[256];
	int64_t prev_end = -1;
	size_t n;

	tdir_make(&t);
	x = open_idx(&t);
	/* 300 puts in a burst: 43 files (more than a query's on-stack snapshot), many in one ms. */
	for (int i = 0; i < 150; i++) {
		char k[32];

		snprintf(k, sizeof(k), "T#r%d", i);
		put(x, "T#all", i * 100, BASE_MS + i * 1000);
		put(x, k, i * 100 + 1, BASE_MS + i * 1000);
	}
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 256), 150);
	for (int i = 0; i < 150; i++)
		T_ASSERT_EQ(out[i], (149 - i) * 100);
	T_ASSERT_EQ(query(x, "T#r57", ALL_TIME, out, 256), 1);
	T_ASSERT_EQ(out[0], 5701);
	T_ASSERT_EQ(query(x, "T#all", BASE_MS + 10000, BASE_MS + 19000, out, 256), 10);
	T_ASSERT_EQ(out[0], 1900);
	T_ASSERT_EQ(out[9], 1000);
	T_ASSERT_EQ(idx_last_phys(x), 14901);
	T_ASSERT_EQ(idx_flush(x), 0);

	/* Name order is creation order; each file begins where the last ended. */
	n = list_files(t.dir, names, 64);
	T_ASSERT_EQ(n, (300 + PER_FILE - 1) / PER_FILE);
	for (size_t i = 0; i < n; i++) {
		T_ASSERT_EQ(strlen(names[i]), 17);
		if (i > 0)
			T_ASSERT(strcmp(names[i - 1], names[i]) < 0);
		snprintf(path, sizeof(path), "%s/%s", t.dir, names[i]);
		read_whole(path, hdr, sizeof(hdr));
		if (i > 0) {
			T_ASSERT_EQ(be(hdr + 16, 8), prev_end); /* begin phys */
			T_ASSERT((int64_t)be(hdr + 24, 8) > prev_end);
		}
		T_ASSERT_EQ(be(hdr + 36, 4), i + 1 < n ? ENTRIES : 300 - PER_FILE * i + 1);
		prev_end = (int64_t)be(hdr + 24, 8);
	}
	idx_close(x);
	tdir_clean(&t);
}

static void
test_reopen(void)
{
	struct tdir t;
	struct idx *x;
	int64_t out[64];
	size_t files;

	tdir_make(&t);
	x = open_idx(&t);
	for (int i = 0; i < 17; i++) /* 2 full files + 3 entries */
		put(x, i % 2 ? "T#odd" : "T#even", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);
	files = count_files(t.dir);
	T_ASSERT_EQ(files, 3);

	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), 16);
	T_ASSERT_EQ(query(x, "T#even", ALL_TIME, out, 64), 9);
	for (int i = 0; i < 9; i++)
		T_ASSERT_EQ(out[i], 16 - 2 * i);
	T_ASSERT_EQ(query(x, "T#odd", BASE_MS + 3000, BASE_MS + 9000, out, 64), 4);
	T_ASSERT_EQ(out[0], 9);
	T_ASSERT_EQ(out[3], 3);

	/* The partial newest file takes four more, then a new file starts. */
	for (int i = 17; i < 30; i++)
		put(x, i % 2 ? "T#odd" : "T#even", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(idx_last_phys(x), 29);
	T_ASSERT_EQ(query(x, "T#odd", ALL_TIME, out, 64), 15);
	T_ASSERT_EQ(out[0], 29);
	T_ASSERT_EQ(out[14], 1);
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);
	T_ASSERT_EQ(count_files(t.dir), 5); /* 30 entries / 7 */

	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), 29);
	T_ASSERT_EQ(query(x, "T#even", ALL_TIME, out, 64), 15);
	for (int i = 0; i < 15; i++)
		T_ASSERT_EQ(out[i], 28 - 2 * i);
	idx_close(x);
	tdir_clean(&t);
}

static void
test_trim(void)
{
	struct tdir t;
	struct idx *x;
	int64_t out[64];

	tdir_make(&t);
	x = open_idx(&t);
	T_ASSERT_EQ(idx_trim_phys(x, INT64_MAX), 0);
	/* Files: phys 0..600, 700..1300, 1400..1900. */
	for (int i = 0; i < 20; i++)
		put(x, "T#all", i * 100, BASE_MS + i * 1000);
	T_ASSERT_EQ(count_files(t.dir), 3);
	T_ASSERT_EQ(idx_trim_phys(x, 600), 0); /* end 600 is not below 600 */
	T_ASSERT_EQ(count_files(t.dir), 3);
	T_ASSERT_EQ(idx_trim_phys(x, 700), 0);
	T_ASSERT_EQ(count_files(t.dir), 2);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 13);
	T_ASSERT_EQ(out[12], 700);
	/* Never the newest, even when everything is below. */
	T_ASSERT_EQ(idx_trim_phys(x, INT64_MAX), 0);
	T_ASSERT_EQ(count_files(t.dir), 1);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 6);
	T_ASSERT_EQ(out[5], 1400);
	T_ASSERT_EQ(idx_last_phys(x), 1900);
	put(x, "T#all", 2000, BASE_MS + 20000);
	put(x, "T#all", 2100, BASE_MS + 21000); /* rolls */
	T_ASSERT_EQ(count_files(t.dir), 2);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 8);
	T_ASSERT_EQ(out[0], 2100);
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);

	x = open_idx(&t);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 8);
	T_ASSERT_EQ(idx_last_phys(x), 2100);
	idx_close(x);
	tdir_clean(&t);
}

/* ---- faults through the io table ---- */

static _Atomic int fail_sync;
static _Atomic int fail_alloc;
static _Atomic int syncs;

static int
fault_fdatasync(void *ctx, int fd)
{
	atomic_add_relaxed(&syncs, 1);
	if (atomic_load_relaxed(&fail_sync))
		return -EIO;
	return store_io_posix.fdatasync(ctx, fd);
}

static int
fault_allocate(void *ctx, int fd, uint64_t len)
{
	if (atomic_load_relaxed(&fail_alloc))
		return -ENOSPC;
	return store_io_posix.allocate(ctx, fd, len);
}

static void
test_flush_and_faults(void)
{
	struct store_io_ops io = store_io_posix;
	struct tdir t;
	struct idx *x = NULL;
	int64_t out[16];

	io.fdatasync = fault_fdatasync;
	io.allocate = fault_allocate;
	tdir_make(&t);
	T_ASSERT_EQ(idx_open(&io, t.dir, SLOTS, ENTRIES, &x), 0);

	atomic_store_relaxed(&fail_alloc, 1);
	T_ASSERT_EQ(idx_put(x, "T#f", 3, 1, BASE_MS), -ENOSPC);
	T_ASSERT_EQ(count_files(t.dir), 0); /* the half-made file (a .tmp) is gone */
	T_ASSERT_EQ(idx_last_phys(x), -1);
	atomic_store_relaxed(&fail_alloc, 0);
	atomic_store_relaxed(&syncs, 0);
	put(x, "T#f", 1, BASE_MS);
	T_ASSERT_EQ(atomic_load_relaxed(&syncs), 1); /* the new file, before its rename */

	atomic_store_relaxed(&syncs, 0);
	T_ASSERT_EQ(idx_flush(x), 0);
	T_ASSERT_EQ(atomic_load_relaxed(&syncs), 1);
	T_ASSERT_EQ(idx_flush(x), 0); /* nothing written since */
	T_ASSERT_EQ(atomic_load_relaxed(&syncs), 1);

	atomic_store_relaxed(&syncs, 0);
	for (int i = 2; i <= 10; i++) /* rolls once: syncs the old file, creates the new */
		put(x, "T#f", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(atomic_load_relaxed(&syncs), 2);
	atomic_store_relaxed(&fail_sync, 1);
	T_ASSERT_EQ(idx_flush(x), -EIO);
	atomic_store_relaxed(&fail_sync, 0);
	atomic_store_relaxed(&syncs, 0);
	T_ASSERT_EQ(idx_flush(x), 0);
	T_ASSERT_EQ(atomic_load_relaxed(&syncs), 1); /* only the current file was dirty */

	/* Many rolls between flushes: each rolled file is synced on the way. */
	for (int i = 11; i <= 42; i++)
		put(x, "T#f", i, BASE_MS + i * 1000);
	/* The newest file is full (36..42) and dirty: if syncing it fails, no roll. */
	T_ASSERT_EQ(count_files(t.dir), 6);
	atomic_store_relaxed(&fail_sync, 1);
	T_ASSERT_EQ(idx_put(x, "T#f", 3, 43, BASE_MS + 43 * 1000), -EIO);
	T_ASSERT_EQ(count_files(t.dir), 6);
	atomic_store_relaxed(&fail_sync, 0);
	put(x, "T#f", 43, BASE_MS + 43 * 1000);
	T_ASSERT_EQ(count_files(t.dir), 7);
	T_ASSERT_EQ(idx_flush(x), 0);
	T_ASSERT_EQ(query(x, "T#f", ALL_TIME, out, 16), 16);
	T_ASSERT_EQ(out[0], 43);
	idx_close(x);
	tdir_clean(&t);
}

/* ---- corrupt files on open ---- */

static void
corrupt_at(const char *dir, const char *name, off_t off, const void *bytes, size_t n)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static void
write_file(const char *dir, const char *name, const void *bytes, size_t n)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(write(fd, bytes, n), (ssize_t)n);
	close(fd);
}

static void
test_corrupt_on_open(void)
{
	static const uint8_t big_count[4] = {0, 0, 0x03, 0xe8};		  /* 1000 > ENTRIES */
	static const uint8_t huge_begin[8] = {0x7f, 0, 0, 0, 0, 0, 0, 0}; /* begin > end */
	static char names[16][32];
	char newest_old[32];
	char path[256];
	struct tdir t;
	struct idx *x;
	int64_t out[64];
	int newer = 0;
	size_t n;

	tdir_make(&t);
	x = open_idx(&t);
	for (int i = 0; i < 28; i++) /* four full files: 0-6, 7-13, 14-20, 21-27 */
		put(x, "T#all", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);
	T_ASSERT_EQ(list_files(t.dir, names, 16), 4);

	/* File 1 short, file 2 with an impossible count; junk names are not ours. */
	snprintf(path, sizeof(path), "%s/%s", t.dir, names[1]);
	T_ASSERT_EQ(truncate(path, 100), 0);
	corrupt_at(t.dir, names[2], 36, big_count, sizeof(big_count));
	write_file(t.dir, "notes.txt", "hi", 2);
	write_file(t.dir, "20241399000000000", "x", 1); /* month 13 */
	write_file(t.dir, "2024010100000000", "x", 1);	/* 16 digits */

	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), 27);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 14);
	for (int i = 0; i < 7; i++) {
		T_ASSERT_EQ(out[i], 27 - i);
		T_ASSERT_EQ(out[7 + i], 6 - i);
	}
	idx_close(x);

	/* Corrupt newest: the index falls back to file 0 and re-indexes from there. */
	corrupt_at(t.dir, names[3], 0, huge_begin, sizeof(huge_begin));
	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), 6);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 7);
	T_ASSERT_EQ(out[0], 6);
	for (int i = 7; i < 10; i++)
		put(x, "T#all", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(idx_last_phys(x), 9);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 10);
	T_ASSERT_EQ(out[0], 9);
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);
	/* The new file sorts after every old name, the corrupt newest included. */
	snprintf(newest_old, sizeof(newest_old), "%s", names[3]);
	n = list_files(t.dir, names, 16);
	T_ASSERT_EQ(n, 8);
	for (size_t i = 0; i < n; i++) {
		if (strlen(names[i]) == 17 && strcmp(names[i], newest_old) > 0)
			newer++;
	}
	T_ASSERT_EQ(newer, 1);
	x = open_idx(&t);
	T_ASSERT_EQ(idx_last_phys(x), 9);
	T_ASSERT_EQ(query(x, "T#all", ALL_TIME, out, 64), 10);
	idx_close(x);
	tdir_clean(&t);
}

/* ---- power loss (tests/store/io_fault.c) ---- */

static void
test_power_loss_create(void)
{
	struct io_fault *iof = io_fault_new();
	const struct store_io_ops *io = io_fault_ops(iof);
	static char names[16][32];
	char path[512];
	struct stat st;
	struct tdir t;
	struct idx *x = NULL;
	int64_t out[64];
	int64_t last;
	size_t n;

	tdir_make(&t);
	T_ASSERT_EQ(idx_open(io, t.dir, SLOTS, ENTRIES, &x), 0);
	for (int i = 0; i < 10; i++) /* file 0: 0-6, file 1: 7-9 */
		put(x, "T#p", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(idx_flush(x), 0);
	for (int i = 10; i < 16; i++) /* file 1 fills at 13, file 2 is created for 14, 15 */
		put(x, "T#p", i, BASE_MS + i * 1000);
	idx_close(x); /* no idx_flush(): 10..15 may be lost */
	T_ASSERT(io_fault_power_loss(iof, false) > 0);

	/* Every file that got its name is whole: none comes back empty and skipped. */
	n = list_files(t.dir, names, 16);
	T_ASSERT_EQ(n, 3);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%.31s", t.dir, names[i]);
		T_ASSERT_EQ(stat(path, &st), 0);
		T_ASSERT_EQ(st.st_size, FILE_SIZE);
	}
	/* A creation cut by the crash leaves a .tmp: idx_open() removes it. */
	write_file(t.dir, "20991231235959999.tmp", "x", 1);

	T_ASSERT_EQ(idx_open(io, t.dir, SLOTS, ENTRIES, &x), 0);
	T_ASSERT_EQ(count_files(t.dir), 3);
	/* Every flushed entry is found, and every one up to where the indexer resumes. */
	last = idx_last_phys(x);
	T_ASSERT(last >= 9);
	T_ASSERT_EQ(query(x, "T#p", ALL_TIME, out, 64), last + 1);
	for (int64_t i = 0; i <= last; i++)
		T_ASSERT_EQ(out[i], last - i);

	/* The indexer resumes; retention can then delete every file but the newest. */
	for (int64_t i = last + 1; i < last + 4; i++)
		put(x, "T#p", i, BASE_MS + i * 1000);
	T_ASSERT_EQ(idx_flush(x), 0);
	T_ASSERT_EQ(idx_trim_phys(x, INT64_MAX), 0);
	T_ASSERT_EQ(count_files(t.dir), 1);

	/* Fill the newest file (7 keys); a creation failing at its rename leaves nothing. */
	for (int64_t i = last + 4; i <= last + 7; i++)
		put(x, "T#p", i, BASE_MS + i * 1000);
	io_fault_fail(iof, IOF_RENAME, EIO);
	T_ASSERT_EQ(idx_put(x, "T#p", 3, last + 8, BASE_MS + (last + 8) * 1000), -EIO);
	T_ASSERT_EQ(count_files(t.dir), 1);
	io_fault_fail(iof, IOF_RENAME, 0);
	put(x, "T#p", last + 8, BASE_MS + (last + 8) * 1000);
	T_ASSERT_EQ(count_files(t.dir), 2);
	T_ASSERT_EQ(idx_flush(x), 0);
	idx_close(x);
	io_fault_free(iof);
	tdir_clean(&t);
}

/* ---- queries racing puts and trims ---- */

#define RACE_PUTS 3000
#define RACE_KEYS 5

struct race {
	struct idx *x;
	_Atomic int64_t put_max; /* highest phys whose idx_put returned */
	_Atomic int done;
	_Atomic long hits;
};

static void *
race_writer(void *arg)
{
	struct race *r = arg;

	for (int64_t i = 0; i < RACE_PUTS; i++) {
		char k[16];

		snprintf(k, sizeof(k), "T#k%d", (int)(i % RACE_KEYS));
		if (idx_put(r->x, k, strlen(k), i, BASE_MS + i * 1000) != 0)
			abort();
		atomic_store_relaxed(&r->put_max, i);
		if (i % 97 == 0 && idx_flush(r->x) != 0)
			abort();
	}
	atomic_store_release(&r->done, 1); /* release: pairs with acquire in race_reader() */
	return NULL;
}

static void *
race_reader(void *arg)
{
	struct race *r = arg;
	int64_t out[64];
	unsigned int round = 0;
	int64_t last_seen = -1;

	/* acquire: pairs with release in race_writer(); one more round after it. */
	while (!atomic_load_acquire(&r->done) || round % RACE_KEYS != 0) {
		int k = (int)(round++ % RACE_KEYS);
		char key[16];
		int64_t hi;
		int64_t lp;
		long n;

		snprintf(key, sizeof(key), "T#k%d", k);
		n = idx_query(r->x, key, strlen(key), ALL_TIME, out, 64);
		/*
		 * Loaded after the query: an entry seen through the slot acquire
		 * was written after put_max reached phys - 1.
		 */
		hi = atomic_load_relaxed(&r->put_max) + 1;
		if (n < 0 || n > 64)
			abort();
		for (long i = 0; i < n; i++) {
			if (out[i] < 0 || out[i] > hi || out[i] % RACE_KEYS != k)
				abort();
			if (i > 0 && out[i] >= out[i - 1])
				abort(); /* newest first */
		}
		atomic_add_relaxed(&r->hits, n);
		/* Relaxed progress value: only monotonic and in range, no tighter bound. */
		lp = idx_last_phys(r->x);
		if (lp < last_seen || lp >= RACE_PUTS)
			abort();
		last_seen = lp;
		/* Keep ~10 files; retention runs beside the queries. */
		if (round % 16 == 0 && idx_trim_phys(r->x, lp - 70) != 0)
			abort();
	}
	return NULL;
}

static void
test_concurrent_queries(void)
{
	struct tdir t;
	struct race r;
	pthread_t w;
	pthread_t rd[2];
	int64_t out[RACE_PUTS];
	long n;

	log_set_level(LOG_LVL_WARN); /* one info line per trimmed file otherwise */
	tdir_make(&t);
	memset(&r, 0, sizeof(r));
	atomic_store_relaxed(&r.put_max, -1);
	r.x = open_idx(&t);
	T_ASSERT_EQ(pthread_create(&rd[0], NULL, race_reader, &r), 0);
	T_ASSERT_EQ(pthread_create(&rd[1], NULL, race_reader, &r), 0);
	T_ASSERT_EQ(pthread_create(&w, NULL, race_writer, &r), 0);
	T_ASSERT_EQ(pthread_join(w, NULL), 0);
	T_ASSERT_EQ(pthread_join(rd[0], NULL), 0);
	T_ASSERT_EQ(pthread_join(rd[1], NULL), 0);
	T_ASSERT(atomic_load_relaxed(&r.hits) > 0);

	/* Afterwards: each key's newest entry first, no gaps down to what was trimmed. */
	T_ASSERT_EQ(idx_last_phys(r.x), RACE_PUTS - 1);
	for (int k = 0; k < RACE_KEYS; k++) {
		char key[16];

		snprintf(key, sizeof(key), "T#k%d", k);
		n = query(r.x, key, ALL_TIME, out, RACE_PUTS);
		T_ASSERT(n >= 2);
		T_ASSERT_EQ(out[0], RACE_PUTS - RACE_KEYS + k);
		for (long i = 1; i < n; i++)
			T_ASSERT_EQ(out[i], out[i - 1] - RACE_KEYS);
	}
	T_ASSERT_EQ(idx_flush(r.x), 0);
	idx_close(r.x);
	tdir_clean(&t);
}

T_MAIN(T_CASE(test_empty), T_CASE(test_invalid_args), T_CASE(test_put_query_order),
       T_CASE(test_layout_on_disk), T_CASE(test_time_range), T_CASE(test_max_limit),
       T_CASE(test_slot_collisions), T_CASE(test_many_files), T_CASE(test_reopen),
       T_CASE(test_trim), T_CASE(test_flush_and_faults), T_CASE(test_corrupt_on_open),
       T_CASE(test_power_loss_create), T_CASE(test_concurrent_queries))
