// SPDX-License-Identifier: Apache-2.0
/*
 * idx.c - the IndexFile: RocketMQ's on-disk hash index from "topic#key" to
 * commit-log offsets (docs/rocketmq-protocol.md §6.4), written by one indexer thread and
 * queried from any thread.
 *
 * A file is one mapping of 40 + slots * 4 + max_entries * 20 bytes, every
 * field big-endian as Java's ByteBuffer writes it, so a RocketMQ broker reads
 * our files and we read its files (same slot and entry counts). Each bucket is
 * a chain through the entries' prevIndex, newest first; slot value 0 and
 * prevIndex 0 end a chain, which is why entry 0 is never used and why a file
 * holds max_entries - 1 keys: it is full when indexCount reaches max_entries,
 * exactly RocketMQ's isWriteFull() with indexNum = max_entries.
 *
 * Deviations from RocketMQ, all invisible in the file format:
 *  - File names are the creation time yyyyMMddHHmmssSSS in UTC, not local
 *    time: only their order matters, and UTC does not jump back an hour each
 *    autumn. A name is always greater than every name already in the
 *    directory (a second file in the same millisecond, or a clock that went
 *    back, bumps the millisecond), so name order is age order.
 *  - A rolled file starts with begin = end = the previous file's end values
 *    and keeps that begin when its first entry arrives (RocketMQ overwrites
 *    it, which shifts the time of that first entry). Only the very first
 *    file takes its begin values from its first entry.
 *  - endTimestamp and endPhyOffset are the maximum seen, not the last: every
 *    entry's time is then inside [begin, end], so a query may skip a file
 *    whose range misses its window, and idx_last_phys() is a true maximum.
 *
 * DESIGN
 * Publication. The indexer writes entry n with plain stores, then stores the
 * bucket's slot := n (release), then the header's end values (relaxed) and
 * finally the header's indexCount := n + 1 (release). A query loads the
 * count (acquire) and then the slot (acquire). The slot needs its own
 * release/acquire because a query follows whatever the slot names, which may
 * be an entry newer than the count it read; the acquire makes that entry and
 * every older one in its chain (written before it) complete. The count's
 * acquire covers the header fields, including the begin timestamp that the
 * very first put sets. Entries are never rewritten, so reading them with
 * plain loads races with nothing. Header words and slots are accessed as
 * 4- and 8-byte atomics in the mapping itself (all naturally aligned); the
 * entries' int64 at offset 4 is not, and is only ever memcpy'd.
 *
 * File list. The list (oldest first) changes when the indexer rolls to a new
 * file and when retention trims old ones, possibly from another thread. A
 * pthread mutex guards the list and each file's reference count. A query
 * takes the mutex once to copy the list and reference every file, walks the
 * files without it, and takes it once more to drop the references; a trimmed
 * file is unmapped when its last reference goes, so a query never reads an
 * unmapped page. The indexer's put path takes the mutex only when it rolls.
 *
 * Reopen. idx_open() maps every file whose name is 17 digits forming a date,
 * in name order. A file with the wrong size or an impossible header is
 * corrupt: it is skipped with an error log naming it (reason -EBADMSG), left
 * on disk for inspection, and never trimmed. Skipping loses only derived
 * data: if it was the newest file, idx_last_phys() falls back to the previous
 * one and the indexer re-indexes that range from the commit log. I/O errors
 * fail idx_open(). Slots and entries are not scanned at open (a default file
 * is 420 MB); a torn chain after a crash is cut by requiring prevIndex to
 * decrease, and callers re-check every message's keys anyway.
 *
 * Creation. A new file is made durable before it gets its name: written as
 * "<name>.tmp", allocated, given its empty header, fdatasync'ed, renamed and
 * the directory synced (as cq.c does). A power loss thus leaves either a
 * .tmp, which idx_open() deletes, or a full-size file with a valid header;
 * never a 0-byte file under a real name, which would be skipped as corrupt
 * and then kept forever. The file being rolled away from is synced before
 * its successor is created: the new header repeats its end values, and
 * idx_last_phys() after a restart must not claim entries that were lost.
 * Entries put after the last idx_flush() may still be lost; the indexer
 * re-indexes them from idx_last_phys().
 *
 * Nothing here runs on a dataplane core: the indexer and the query handlers
 * are control/background threads, so the mutex and the blocking
 * fdatasync/unlink calls are allowed.
 *
 * Size: about 1,000 lines because it is one on-disk format: writing, querying and recovering an IndexFile
 * share its private slot and entry layout.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/atomic.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "common/err.h"
#include "common/log.h"
#include "store/idx.h"
#include "store/io.h"
#include "wire/record.h"

#include "bytes_priv.h"

#define IDX_TAG "store.idx"

/* Header field offsets (§6.4). */
#define IDX_H_BEGIN_TS 0
#define IDX_H_END_TS 8
#define IDX_H_BEGIN_PHYS 16
#define IDX_H_END_PHYS 24
#define IDX_H_SLOT_COUNT 32
#define IDX_H_INDEX_COUNT 36

/* Entry field offsets. */
#define IDX_E_HASH 0
#define IDX_E_PHYS 4
#define IDX_E_TDIFF 12
#define IDX_E_PREV 16

/* yyyyMMddHHmmssSSS */
#define IDX_NAME_LEN 17
/* 9999-12-31T23:59:59.999Z: the largest time a 17-digit name can hold. */
#define IDX_TS_MAX 253402300799999ll
/* Snapshots of up to this many files live on the stack. */
#define IDX_SNAP_STACK 32

STATIC_ASSERT(ATOMIC_INT_LOCK_FREE == 2, "slots and counts are lock-free atomics in the mapping");
STATIC_ASSERT(ATOMIC_LLONG_LOCK_FREE == 2, "header words are lock-free atomics in the mapping");
STATIC_ASSERT(sizeof(_Atomic uint32_t) == 4, "atomic u32 has the plain layout");
STATIC_ASSERT(sizeof(_Atomic uint64_t) == 8, "atomic u64 has the plain layout");
STATIC_ASSERT(IDX_HEADER_SIZE == 40 && IDX_SLOT_SIZE == 4 && IDX_ENTRY_SIZE == 20,
	      "RocketMQ IndexFile layout");

/*
 * Ownership: created by idx_open() or the indexer (roll); the file list and
 * every query snapshot hold one reference each. Freed by whoever drops the
 * last one.
 */
struct idx_file {
	/* immutable after create/load */
	char name[IDX_NAME_LEN + 1];
	int fd;
	uint8_t *map;
	/* idx.lock */
	unsigned int refs;
	/* indexer only (header words are mirrored in the mapping as atomics) */
	uint32_t count;	     /* next entry number == header indexCount */
	uint32_t used_slots; /* header hashSlotCount */
	bool begin_set;
	bool dirty; /* written since the last fdatasync */
	int64_t begin_ts;
	int64_t end_ts;
	int64_t end_phys;
};

/*
 * Ownership: one indexer thread writes (put, flush); queries and trim run on
 * any thread; open and close run alone.
 */
struct idx {
	/* immutable after idx_open */
	const struct store_io_ops *io;
	char *dir;
	uint32_t slots;
	uint32_t max_entries;
	size_t file_size;
	/* guards files, nfiles, cap and every idx_file.refs */
	pthread_mutex_t lock;
	struct idx_file **files; /* oldest first */
	size_t nfiles;
	size_t cap;
	/* indexer only */
	struct idx_file *cur;		  /* newest, == files[nfiles - 1]; trim never removes it */
	char last_name[IDX_NAME_LEN + 1]; /* greatest name in the dir ("" if none) */
	int64_t last_name_ms;
	/* indexer stores, anyone reads; relaxed: a plain progress value */
	_Atomic int64_t last_phys;
};

/* ---- mapped layout ---- */

static inline _Atomic uint64_t *
idx_h64(const struct idx_file *f, size_t off)
{
	return (_Atomic uint64_t *)(void *)(f->map + off);
}

static inline _Atomic uint32_t *
idx_h32(const struct idx_file *f, size_t off)
{
	return (_Atomic uint32_t *)(void *)(f->map + off);
}

static inline _Atomic uint32_t *
idx_slot(const struct idx_file *f, uint32_t slot)
{
	return idx_h32(f, IDX_HEADER_SIZE + (size_t)slot * IDX_SLOT_SIZE);
}

static inline uint8_t *
idx_entry(const struct idx *x, const struct idx_file *f, uint32_t i)
{
	return f->map + IDX_HEADER_SIZE + (size_t)x->slots * IDX_SLOT_SIZE +
	       (size_t)i * IDX_ENTRY_SIZE;
}

static inline int64_t
idx_hdr_load(const struct idx_file *f, size_t off)
{
	return (int64_t)be64toh(atomic_load_relaxed(idx_h64(f, off)));
}

static inline void
idx_hdr_store(struct idx_file *f, size_t off, int64_t v)
{
	atomic_store_relaxed(idx_h64(f, off), htobe64((uint64_t)v));
}

/* RocketMQ's indexKeyHashMethod: |String.hashCode()|, Integer.MIN_VALUE -> 0. */
static uint32_t
idx_key_hash(const char *key, size_t len)
{
	int32_t h = wire_tag_hash(key, len);

	if (h == INT32_MIN)
		return 0;
	return (uint32_t)(h < 0 ? -h : h);
}

/* Seconds from the file's begin, clamped to [0, INT32_MAX] as RocketMQ does. */
static int32_t
idx_time_diff(int64_t store_ms, int64_t begin_ms)
{
	int64_t d;

	if (store_ms <= begin_ms)
		return 0;
	d = (store_ms - begin_ms) / 1000; /* both in [0, IDX_TS_MAX]: no overflow */
	return d > INT32_MAX ? INT32_MAX : (int32_t)d;
}

/* ---- names ---- */

/* Return: true and the time in *@ms when @name is 17 digits forming a UTC date. */
static bool
idx_name_parse(const char *name, int64_t *ms)
{
	struct tm tm;
	int v[7];
	static const int width[7] = {4, 2, 2, 2, 2, 2, 3};
	const char *p = name;
	time_t sec;

	if (strlen(name) != IDX_NAME_LEN)
		return false;
	for (int i = 0; i < 7; i++) {
		v[i] = 0;
		for (int k = 0; k < width[i]; k++, p++) {
			if (*p < '0' || *p > '9')
				return false;
			v[i] = v[i] * 10 + (*p - '0');
		}
	}
	if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 59)
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = v[0] - 1900;
	tm.tm_mon = v[1] - 1;
	tm.tm_mday = v[2];
	tm.tm_hour = v[3];
	tm.tm_min = v[4];
	tm.tm_sec = v[5];
	/* A day past the month's end normalises forward, so it only grows. */
	sec = timegm(&tm);
	*ms = (int64_t)sec * 1000 + v[6];
	return true;
}

static int
idx_name_format(int64_t ms, char out[IDX_NAME_LEN + 1])
{
	time_t sec = (time_t)(ms / 1000);
	char buf[64]; /* room for any int the compiler cannot bound */
	struct tm tm;

	if (ms < 0 || ms > IDX_TS_MAX || gmtime_r(&sec, &tm) == NULL)
		return -ERANGE;
	if (snprintf(buf, sizeof(buf), "%04d%02d%02d%02d%02d%02d%03d", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (int)(ms % 1000)) != IDX_NAME_LEN)
		return -ERANGE;
	memcpy(out, buf, IDX_NAME_LEN + 1);
	return 0;
}

/* A name greater than every name seen in the directory. Indexer. */
static int
idx_next_name(struct idx *x, char out[IDX_NAME_LEN + 1])
{
	int64_t ms = clk_wall_ms();
	int rc;

	if (x->last_name[0] != '\0' && ms <= x->last_name_ms)
		ms = x->last_name_ms + 1;
	for (int tries = 0; tries < 1000; tries++, ms++) {
		rc = idx_name_format(ms, out);
		if (rc != 0)
			return rc;
		if (strcmp(out, x->last_name) > 0) {
			memcpy(x->last_name, out, sizeof(x->last_name));
			x->last_name_ms = ms;
			return 0;
		}
	}
	return -EOVERFLOW; /* unreachable with names idx_name_parse() accepted */
}

static int
idx_path(const struct idx *x, const char *name, char *buf, size_t cap)
{
	if (snprintf(buf, cap, "%s/%s", x->dir, name) >= (int)cap)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- files ---- */

static void
idx_file_destroy(const struct idx *x, struct idx_file *f)
{
	int rc;

	if (f->map != NULL) {
		rc = x->io->unmap(x->io->ctx, f->map, x->file_size);
		if (rc != 0)
			log_warn(IDX_TAG, "munmap(index file %s) failed: %s", f->name, err_str(rc));
	}
	if (f->fd >= 0)
		x->io->close(x->io->ctx, f->fd);
	free(f);
}

static void
idx_file_unref(struct idx *x, struct idx_file *f)
{
	bool last;

	pthread_mutex_lock(&x->lock);
	BASSERT(f->refs > 0);
	last = --f->refs == 0;
	pthread_mutex_unlock(&x->lock);
	if (last)
		idx_file_destroy(x, f);
}

static struct idx_file *
idx_file_alloc(const char *name)
{
	struct idx_file *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->fd = -1;
	f->refs = 1; /* the list's */
	return f;
}

/*
 * Create the next file, begin = end = @prev's end values (or empty when
 * there is no previous file). Not yet visible to anyone.
 *
 * Written as "<name>.tmp", allocated, given its header, fdatasync'ed and
 * only then renamed, with the directory synced: after a power loss the file
 * is either absent (a .tmp that idx_open() removes) or full size with a
 * valid header, never a 0-byte name that idx_open() would have to skip and
 * that retention would never delete. Same scheme as cq.c's file_create().
 */
static int
idx_file_create(struct idx *x, const struct idx_file *prev, struct idx_file **out)
{
	const struct store_io_ops *io = x->io;
	char name[IDX_NAME_LEN + 1];
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	struct idx_file *f;
	void *map;
	int rc;

	rc = idx_next_name(x, name);
	if (rc != 0)
		return rc;
	rc = idx_path(x, name, path, sizeof(path));
	if (rc != 0)
		return rc;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = idx_file_alloc(name);
	if (f == NULL)
		return -ENOMEM;
	f->fd = io->open(io->ctx, tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (f->fd < 0) {
		rc = f->fd;
		f->fd = -1;
		log_err(IDX_TAG, "create index file %s failed: %s", tmp, err_str(rc));
		goto err_destroy;
	}
	/* Reserved up front: stores into the mapping never SIGBUS on a full disk. */
	rc = io->allocate(io->ctx, f->fd, x->file_size);
	if (rc != 0)
		goto err_unlink_tmp;
	rc = io->map(io->ctx, f->fd, x->file_size, &map);
	if (rc != 0)
		goto err_unlink_tmp;
	f->map = map;

	f->count = 1;
	if (prev != NULL) {
		f->begin_set = true;
		f->begin_ts = prev->end_ts;
		f->end_ts = prev->end_ts;
		f->end_phys = prev->end_phys;
	}
	/* Visible to queries only once the list lock publishes the file. */
	idx_hdr_store(f, IDX_H_BEGIN_TS, f->begin_ts);
	idx_hdr_store(f, IDX_H_END_TS, f->end_ts);
	idx_hdr_store(f, IDX_H_BEGIN_PHYS, f->end_phys);
	idx_hdr_store(f, IDX_H_END_PHYS, f->end_phys);
	atomic_store_relaxed(idx_h32(f, IDX_H_SLOT_COUNT), htobe32(0));
	atomic_store_relaxed(idx_h32(f, IDX_H_INDEX_COUNT), htobe32(1));

	/* The mapping shares the page cache: fdatasync writes the header too. */
	rc = io->fdatasync(io->ctx, f->fd);
	if (rc == 0)
		rc = io->rename(io->ctx, tmp, path);
	if (rc != 0)
		goto err_unlink_tmp;
	rc = io->sync_dir(io->ctx, x->dir);
	if (rc != 0)
		goto err_unlink;
	f->dirty = false; /* empty and durable: the first put dirties it */
	*out = f;
	return 0;

err_unlink:
	log_err(IDX_TAG, "set up index file %s failed: %s", path, err_str(rc));
	io->unlink(io->ctx, path);
	goto err_destroy;
err_unlink_tmp:
	log_err(IDX_TAG, "set up index file %s failed: %s", tmp, err_str(rc));
	io->unlink(io->ctx, tmp);
err_destroy:
	idx_file_destroy(x, f);
	return rc;
}

/*
 * Map an existing file and check its size and header.
 * Return: 0, -EBADMSG (logged with the reason; caller skips the file), -errno.
 */
static int
idx_file_load(struct idx *x, const char *name, struct idx_file **out)
{
	char path[PATH_MAX];
	struct idx_file *f;
	uint64_t size;
	int64_t bts, ets, bphys, ephys;
	uint32_t used, count;
	void *map;
	int rc;

	rc = idx_path(x, name, path, sizeof(path));
	if (rc != 0)
		return rc;
	f = idx_file_alloc(name);
	if (f == NULL)
		return -ENOMEM;
	f->fd = x->io->open(x->io->ctx, path, O_RDWR, 0);
	if (f->fd < 0) {
		rc = f->fd;
		goto err_free;
	}
	rc = x->io->size(x->io->ctx, f->fd, &size);
	if (rc != 0)
		goto err_free;
	if (size != x->file_size) {
		log_err(IDX_TAG, "index file %s: size %llu, want %zu: skipped (%s)", path,
			(unsigned long long)size, x->file_size, err_str(-EBADMSG));
		rc = -EBADMSG;
		goto err_free;
	}
	rc = x->io->map(x->io->ctx, f->fd, x->file_size, &map);
	if (rc != 0)
		goto err_free;
	f->map = map;

	bts = idx_hdr_load(f, IDX_H_BEGIN_TS);
	ets = idx_hdr_load(f, IDX_H_END_TS);
	bphys = idx_hdr_load(f, IDX_H_BEGIN_PHYS);
	ephys = idx_hdr_load(f, IDX_H_END_PHYS);
	used = be32toh(atomic_load_relaxed(idx_h32(f, IDX_H_SLOT_COUNT)));
	count = be32toh(atomic_load_relaxed(idx_h32(f, IDX_H_INDEX_COUNT)));
	if (count < 1 || count > x->max_entries || used > x->slots || used > count - 1 || bts < 0 ||
	    bts > ets || ets > IDX_TS_MAX || bphys < 0 || bphys > ephys) {
		log_err(IDX_TAG,
			"index file %s: bad header (count %u, slots used %u, time %lld..%lld, phys "
			"%lld..%lld): skipped (%s)",
			path, count, used, (long long)bts, (long long)ets, (long long)bphys,
			(long long)ephys, err_str(-EBADMSG));
		rc = -EBADMSG;
		goto err_free;
	}
	f->count = count;
	f->used_slots = used;
	/* An empty first file has no begin yet; a rolled one got it at creation. */
	f->begin_set = count > 1 || bts > 0;
	f->begin_ts = bts;
	f->end_ts = ets;
	f->end_phys = ephys;
	*out = f;
	return 0;

err_free:
	if (rc != -EBADMSG)
		log_err(IDX_TAG, "open index file %s failed: %s", path, err_str(rc));
	idx_file_destroy(x, f);
	return rc;
}

/* Append @f (newest) to the list. Return: 0 or -ENOMEM. */
static int
idx_list_append(struct idx *x, struct idx_file *f)
{
	int rc = 0;

	pthread_mutex_lock(&x->lock);
	if (x->nfiles == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 8;
		struct idx_file **v = realloc(x->files, cap * sizeof(*v));

		if (v == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		x->files = v;
		x->cap = cap;
	}
	x->files[x->nfiles++] = f;
out:
	pthread_mutex_unlock(&x->lock);
	return rc;
}

/*
 * Copy the list and take a reference on every file, so the walk runs
 * without the lock. *@snap is @stack or a malloc'd array (free with
 * idx_snapshot_put()). Return: the number of files or -ENOMEM.
 */
static long
idx_snapshot_get(struct idx *x, struct idx_file **stack, struct idx_file ***snap)
{
	struct idx_file **v = stack;
	size_t cap = IDX_SNAP_STACK;
	size_t n;

	for (;;) {
		pthread_mutex_lock(&x->lock);
		n = x->nfiles;
		if (n <= cap)
			break;
		pthread_mutex_unlock(&x->lock);
		if (v != stack)
			free(v);
		cap = n + 8;
		v = malloc(cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = x->files[i];
		v[i]->refs++;
	}
	pthread_mutex_unlock(&x->lock);
	*snap = v;
	return (long)n;
}

static void
idx_snapshot_put(struct idx *x, struct idx_file **stack, struct idx_file **snap, size_t n)
{
	size_t ndead = 0;

	pthread_mutex_lock(&x->lock);
	for (size_t i = 0; i < n; i++) {
		BASSERT(snap[i]->refs > 0);
		if (--snap[i]->refs == 0)
			snap[ndead++] = snap[i]; /* compact the ones to free in place */
	}
	pthread_mutex_unlock(&x->lock);
	for (size_t i = 0; i < ndead; i++)
		idx_file_destroy(x, snap[i]);
	if (snap != stack)
		free(snap);
}

/* ---- open / close ---- */

static int
idx_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Return: true for "<yyyyMMddHHmmssSSS>.tmp", a file idx_file_create() did not finish. */
static bool
idx_name_is_tmp(const char *name)
{
	char base[IDX_NAME_LEN + 1];
	int64_t ms;

	if (strlen(name) != IDX_NAME_LEN + 4 || strcmp(name + IDX_NAME_LEN, ".tmp") != 0)
		return false;
	memcpy(base, name, IDX_NAME_LEN);
	base[IDX_NAME_LEN] = '\0';
	return idx_name_parse(base, &ms);
}

/*
 * The index file names in @x->dir, sorted; leftover "*.tmp" files are
 * removed. Listing a directory is not in store_io_ops (nothing there to
 * fault-inject: names are not data).
 */
static int
idx_scan_dir(const struct idx *x, char ***names_out, size_t *n_out)
{
	char **names = NULL;
	size_t n = 0;
	size_t cap = 0;
	struct dirent *de;
	int64_t ms;
	DIR *d;
	int rc = 0;

	d = opendir(x->dir);
	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		if (idx_name_is_tmp(de->d_name)) {
			char path[PATH_MAX];

			/* A creation cut by a crash: never named, never indexed into. */
			if (idx_path(x, de->d_name, path, sizeof(path)) == 0 &&
			    x->io->unlink(x->io->ctx, path) == 0)
				log_info(IDX_TAG, "removed unfinished index file %s", path);
			continue;
		}
		if (!idx_name_parse(de->d_name, &ms))
			continue; /* not ours ("lock", ...) */
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **v = realloc(names, ncap * sizeof(*v));

			if (v == NULL) {
				rc = -ENOMEM;
				goto err_free;
			}
			names = v;
			cap = ncap;
		}
		names[n] = strdup(de->d_name);
		if (names[n] == NULL) {
			rc = -ENOMEM;
			goto err_free;
		}
		n++;
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof(*names), idx_name_cmp);
	*names_out = names;
	*n_out = n;
	return 0;

err_free:
	closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int
idx_open(const struct store_io_ops *io, const char *dir, uint32_t slots, uint32_t max_entries,
	 struct idx **out)
{
	char **names = NULL;
	size_t nnames = 0;
	struct idx *x;
	uint64_t size;
	int rc;

	if (io == NULL || dir == NULL || out == NULL || slots < 1 || slots > INT32_MAX ||
	    max_entries < 2 || max_entries > INT32_MAX)
		return -EINVAL;
	size = IDX_HEADER_SIZE + (uint64_t)slots * IDX_SLOT_SIZE +
	       (uint64_t)max_entries * IDX_ENTRY_SIZE;
	if (size > SIZE_MAX)
		return -EINVAL;

	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	x->io = io;
	x->slots = slots;
	x->max_entries = max_entries;
	x->file_size = (size_t)size;
	atomic_store_relaxed(&x->last_phys, -1);
	x->dir = strdup(dir);
	if (x->dir == NULL) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = pthread_mutex_init(&x->lock, NULL);
	if (rc != 0) {
		rc = -rc;
		goto err_free;
	}
	rc = store_mkdirs(dir);
	if (rc != 0)
		goto err_close;
	rc = idx_scan_dir(x, &names, &nnames);
	if (rc != 0)
		goto err_close;

	for (size_t i = 0; i < nnames; i++) {
		struct idx_file *f;

		rc = idx_file_load(x, names[i], &f);
		if (rc == -EBADMSG)
			continue; /* logged with its name; see "Reopen" above */
		if (rc != 0)
			goto err_close;
		rc = idx_list_append(x, f);
		if (rc != 0) {
			idx_file_destroy(x, f);
			goto err_close;
		}
	}
	if (nnames > 0) {
		/* Skipped files count too: a new name must sort after them. */
		snprintf(x->last_name, sizeof(x->last_name), "%s", names[nnames - 1]);
		(void)idx_name_parse(x->last_name, &x->last_name_ms);
	}
	if (x->nfiles > 0) {
		x->cur = x->files[x->nfiles - 1];
		if (x->cur->count > 1 || x->cur->begin_set)
			atomic_store_relaxed(&x->last_phys, x->cur->end_phys);
	}
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	*out = x;
	return 0;

err_close:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	idx_close(x);
	return rc;
err_free:
	free(x->dir);
	free(x);
	return rc;
}

void
idx_close(struct idx *x)
{
	if (x == NULL)
		return;
	for (size_t i = 0; i < x->nfiles; i++)
		idx_file_unref(x, x->files[i]);
	free(x->files);
	pthread_mutex_destroy(&x->lock);
	free(x->dir);
	free(x);
}

/* ---- write side (indexer thread) ---- */

/*
 * Start the next file. The current one is synced first: the new file's
 * header carries its end values and becomes durable at creation, so it must
 * never be durable ahead of the entries it summarises (idx_open() would then
 * resume the indexer past entries that a power loss took away).
 */
static int
idx_roll(struct idx *x)
{
	struct idx_file *old = x->cur;
	struct idx_file *f;
	char path[PATH_MAX];
	int rc;

	if (old != NULL && old->dirty) {
		rc = x->io->fdatasync(x->io->ctx, old->fd);
		if (rc != 0) {
			log_err(IDX_TAG, "fdatasync(index file %s) failed: %s", old->name,
				err_str(rc));
			return rc;
		}
		old->dirty = false;
	}
	rc = idx_file_create(x, old, &f);
	if (rc != 0)
		return rc;
	rc = idx_list_append(x, f);
	if (rc != 0) {
		if (idx_path(x, f->name, path, sizeof(path)) == 0)
			x->io->unlink(x->io->ctx, path);
		idx_file_destroy(x, f);
		return rc;
	}
	x->cur = f;
	return 0;
}

int
idx_put(struct idx *x, const char *key, size_t key_len, int64_t phys, int64_t store_ms)
{
	struct idx_file *f;
	_Atomic uint32_t *slotp;
	uint32_t hash;
	uint32_t prev;
	uint32_t n;
	uint8_t *e;
	int rc;

	if (x == NULL || (key == NULL && key_len > 0) || phys < 0 || store_ms < 0 ||
	    store_ms > IDX_TS_MAX)
		return -EINVAL;
	f = x->cur;
	if (f == NULL || f->count >= x->max_entries) {
		rc = idx_roll(x);
		if (rc != 0)
			return rc;
		f = x->cur;
	}
	n = f->count;
	hash = idx_key_hash(key, key_len);
	slotp = idx_slot(f, hash % x->slots);

	if (!f->begin_set) {
		/* Before the releases below: pairs with the acquire of the count in idx_file_query(). */
		f->begin_set = true;
		f->begin_ts = store_ms;
		idx_hdr_store(f, IDX_H_BEGIN_TS, store_ms);
		idx_hdr_store(f, IDX_H_BEGIN_PHYS, phys);
	}

	/* Only this thread stores slots: relaxed reads its own value. */
	prev = be32toh(atomic_load_relaxed(slotp));
	if (prev >= n)
		prev = 0; /* torn by a crash before reopen: start a fresh chain */

	e = idx_entry(x, f, n);
	wire_st_be32(e + IDX_E_HASH, hash);
	wire_st_be64(e + IDX_E_PHYS, (uint64_t)phys);
	wire_st_be32(e + IDX_E_TDIFF, (uint32_t)idx_time_diff(store_ms, f->begin_ts));
	wire_st_be32(e + IDX_E_PREV, prev);

	/* release: pairs with the slot acquire in idx_file_query(); publishes entry n. */
	atomic_store_release(slotp, htobe32(n));

	if (prev == 0) {
		f->used_slots++;
		atomic_store_relaxed(idx_h32(f, IDX_H_SLOT_COUNT), htobe32(f->used_slots));
	}
	if (store_ms > f->end_ts) {
		f->end_ts = store_ms;
		idx_hdr_store(f, IDX_H_END_TS, store_ms);
	}
	if (phys > f->end_phys) {
		f->end_phys = phys;
		idx_hdr_store(f, IDX_H_END_PHYS, phys);
	}
	f->count = n + 1;
	/* release: pairs with the count acquire in idx_file_query(); publishes the header. */
	atomic_store_release(idx_h32(f, IDX_H_INDEX_COUNT), htobe32(n + 1));
	f->dirty = true;
	atomic_store_relaxed(&x->last_phys, f->end_phys);
	return 0;
}

int
idx_flush(struct idx *x)
{
	struct idx_file *f = x->cur;
	int rc;

	/* Rolled files were synced by idx_roll(): only the current one can be dirty. */
	if (f != NULL && f->dirty) {
		rc = x->io->fdatasync(x->io->ctx, f->fd);
		if (rc != 0) {
			log_err(IDX_TAG, "fdatasync(index file %s) failed: %s", f->name,
				err_str(rc));
			return rc;
		}
		f->dirty = false;
	}
	return 0;
}

/* ---- read side (any thread) ---- */

int64_t
idx_last_phys(const struct idx *x)
{
	return atomic_load_relaxed(&x->last_phys);
}

/* Walk one file's bucket for @hash. Return: offsets stored in @out (<= @room). */
static size_t
idx_file_query(const struct idx *x, const struct idx_file *f, uint32_t hash, int64_t begin_ms,
	       int64_t end_ms, int64_t *out, size_t room)
{
	uint32_t count;
	uint32_t i;
	int64_t fbegin;
	int64_t fend;
	size_t n = 0;

	/* acquire: pairs with the count release in idx_put(); header words below are current. */
	count = be32toh(atomic_load_acquire(idx_h32(f, IDX_H_INDEX_COUNT)));
	if (count <= 1)
		return 0;
	fbegin = idx_hdr_load(f, IDX_H_BEGIN_TS);
	fend = idx_hdr_load(f, IDX_H_END_TS);
	if (fbegin > end_ms || fend < begin_ms)
		return 0;

	/* acquire: pairs with the slot release in idx_put(); entry i and its chain are complete. */
	i = be32toh(atomic_load_acquire(idx_slot(f, hash % x->slots)));
	while (i != 0 && i < x->max_entries && n < room) {
		const uint8_t *e = idx_entry(x, f, i);
		int64_t phys = (int64_t)wire_ld_be64(e + IDX_E_PHYS);
		int32_t diff = (int32_t)wire_ld_be32(e + IDX_E_TDIFF);
		uint32_t prev = wire_ld_be32(e + IDX_E_PREV);
		int64_t t = fbegin + (int64_t)(diff < 0 ? 0 : diff) * 1000;

		if (t < begin_ms)
			break; /* the chain only gets older */
		if (wire_ld_be32(e + IDX_E_HASH) == hash && t <= end_ms && phys >= 0)
			out[n++] = phys;
		if (prev >= i)
			break; /* chains strictly descend; anything else is a torn file */
		i = prev;
	}
	return n;
}

long
idx_query(struct idx *x, const char *key, size_t key_len, int64_t begin_ms, int64_t end_ms,
	  int64_t *phys, size_t max)
{
	struct idx_file *stack[IDX_SNAP_STACK];
	struct idx_file **snap;
	uint32_t hash;
	size_t found = 0;
	long n;

	if (x == NULL || (key == NULL && key_len > 0) || (phys == NULL && max > 0))
		return -EINVAL;
	if (max == 0 || begin_ms > end_ms)
		return 0;
	if (max > LONG_MAX)
		max = LONG_MAX;
	hash = idx_key_hash(key, key_len);
	n = idx_snapshot_get(x, stack, &snap);
	if (n < 0)
		return n;
	for (long i = n - 1; i >= 0 && found < max; i--)
		found += idx_file_query(x, snap[i], hash, begin_ms, end_ms, phys + found,
					max - found);
	idx_snapshot_put(x, stack, snap, (size_t)n);
	return (long)found;
}

/* ---- retention ---- */

int
idx_trim_phys(struct idx *x, int64_t min_phys)
{
	char path[PATH_MAX];
	struct idx_file *victim;
	bool removed = false;
	int rc = 0;
	int r;

	for (;;) {
		victim = NULL;
		pthread_mutex_lock(&x->lock);
		/* Never the newest: the indexer writes it without the lock. */
		for (size_t i = 0; i + 1 < x->nfiles; i++) {
			if (idx_hdr_load(x->files[i], IDX_H_END_PHYS) < min_phys) {
				victim = x->files[i];
				memmove(&x->files[i], &x->files[i + 1],
					(x->nfiles - i - 1) * sizeof(*x->files));
				x->nfiles--;
				break;
			}
		}
		pthread_mutex_unlock(&x->lock);
		if (victim == NULL)
			break;
		/* Queries still holding it keep the mapping; the name goes now. */
		r = idx_path(x, victim->name, path, sizeof(path));
		if (r == 0)
			r = x->io->unlink(x->io->ctx, path);
		if (r != 0) {
			log_err(IDX_TAG, "unlink(index file %s) failed: %s", victim->name,
				err_str(r));
			rc = rc ? rc : r;
		} else {
			log_info(IDX_TAG, "deleted index file %s (phys below %lld)", victim->name,
				 (long long)min_phys);
			removed = true;
		}
		idx_file_unref(x, victim);
	}
	if (removed) {
		r = x->io->sync_dir(x->io->ctx, x->dir);
		if (r != 0) {
			log_err(IDX_TAG, "fsync(index dir %s) failed: %s", x->dir, err_str(r));
			rc = rc ? rc : r;
		}
	}
	return rc;
}
