// SPDX-License-Identifier: Apache-2.0
/*
 * cq.c - ConsumeQueue: the per-(topic, queueId) index into the commit log.
 *
 * A queue is a directory of equally sized files of 20-byte big-endian units
 * (int64 commit-log offset, int32 size, int64 tag hash), byte-compatible with
 * RocketMQ's consumequeue files (docs/rocketmq-protocol.md §6.3): unit i is logical offset i,
 * and a file is named by the 20-digit logical byte offset of its first unit.
 * Files are pre-allocated to full size, so they read as zeros past the last
 * unit written, and every file of the queue is mapped shared for its life,
 * its descriptor closed (a flush syncs through one of its own).
 *
 * The appending core never makes a syscall nor takes a page fault: it
 * stores the unit into the queue's write-behind ring and publishes the new
 * max; the background side copies units from the ring into the mapping
 * (cq_wb.c). A queue needs no file to take units: a new queue has neither
 * directory nor file until its first unit, and the ring holds units past
 * the last file until the background side makes their file
 * (files_cover(), from cq_prepare_next() and cq_flush()); the drain stops
 * at the first unit without one, and a flush never claims it. So an idle
 * queue costs no file, descriptor or mapping (docs/store.md, "Many
 * queues"), and only a full ring refuses a unit. The core still follows
 * the files through a one-slot mailbox, to ask for the next one when its
 * file is three quarters full, and a queue start (which writes fillers
 * into the file itself) waits for its file. A new file is created as
 * "<name>.tmp", allocated and then renamed, so a crash never leaves a
 * short file under a real name.
 *
 * Recovery is RocketMQ's: a unit with size <= 0 or offset < 0 ends the queue
 * (files are zero-filled). A queue that starts at a non-zero offset in its
 * first file (the commit log older than its first message is gone) has the
 * units before the start filled with RocketMQ's filler (0, 0x7FFFFFFF, 0),
 * so the scan sees no hole, and min is the first non-filler unit. Retention
 * (cq_trim_phys()) keeps min in memory only: after a restart min falls back
 * to the first unit of the first file until the store trims again.
 *
 * DESIGN
 *
 * Files live in a table (struct cq_tab) that only the background side
 * changes: cq_prepare_next() appends to it and, when full, replaces it with
 * a larger copy; cq_trim_phys() replaces it with a copy that lacks the files
 * it deletes. A published table is never changed except by appending past
 * its count, so a reader that loaded it (acquire) sees consistent slots.
 *
 * Reclamation. Readers (dataplane cores among them) take no lock and never
 * wait, so nothing tells the background side when they are done with an old
 * table or a deleted file's mapping. As in clog_trim(), a grace period
 * stands in for that: a replaced table goes to a graveyard, together with
 * the files that trimming dropped from it, and is freed (files unmapped and
 * closed) CQ_UNMAP_GRACE_MS after it left service, far longer than any
 * reader holds a pointer between its load of the table and its last read
 * of a unit. cq_trim_phys() raises min before it publishes the smaller
 * table, so a reader that sees the new table also sees the new min; one
 * that loaded the old table reads a unit that stays mapped (and unchanged:
 * trimmed files are never reused) until the grace period ends. Every call
 * of cq_trim_phys() frees what is due; cq_close() frees everything.
 *
 * The append path never looks at the table: it owns a copy of its current
 * file (cur), which trimming never deletes, and receives the next one by
 * value through the mailbox (next + next_ready). cq_flush() reads only max,
 * the table and its own progress fields, so it can run beside appends.
 *
 * Ownership (struct cq):
 *  - immutable after cq_open(): io, dir, upf.
 *  - owning core writes, any thread reads with acquire: max. min is written
 *    by the owning core (a queue that starts at an offset) and by
 *    cq_trim_phys() with a compare-and-swap, so neither lowers it. wb (how
 *    far the files hold the units) and the ring: cq_wb.c.
 *  - owning core only: cur.
 *  - mailbox: the background thread writes next while next_ready == 0 and
 *    sets it to 1 (release); the core copies next after reading 1 (acquire)
 *    and gives the slot back with a release store of 0. cur_end (end of the
 *    core's file) is written by the core before giving the slot back.
 *    start_req is written by the core when it needs a file it lacks (a
 *    queue with no file yet, or one starting in its next file).
 *  - background thread only (cq_prepare_next, cq_wb_drain, cq_flush,
 *    cq_trim_phys; the caller runs them on one thread or serializes them):
 *    the copies from the ring into the files, the table's
 *    contents, its replacement (release store of tab), graveyard, flushed,
 *    dirty_hi.
 *  - readers (cq_get(), cq_search(), cq_min(), cq_max(), the duplicate check
 *    of cq_append()) run on any thread beside all of the above, cq_trim_phys()
 *    included: what they may still reach is freed only after the grace
 *    period (Reclamation above).
 *  - exclusive (no other call on the queue at the same time): cq_open,
 *    cq_close, cq_truncate_phys.
 *
 * Size: over 1,000 lines because it is one index type: its write-behind ring is already in cq_wb.c; what is left
 * (files, mapping, append, lookup, truncation) shares the queue's private layout.
 */
#include <dirent.h>
#include <errno.h>
#include <unistd.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "common/err.h"
#include "common/log.h"
#include "store/cq.h"

#include "cq_priv.h"
#include "store_priv.h"

#define CQ_NAME_LEN 20
#define CQ_TAB_MIN 4
#define CQ_UPF_MAX (UINT32_MAX / CQ_UNIT_SIZE)		 /* files stay below 4 GiB */
#define CQ_RECOVER_FILES 3				 /* files rescanned at open, as RocketMQ */
#define CQ_QOFF_MAX ((uint64_t)INT64_MAX / CQ_UNIT_SIZE) /* byte offsets fit an int64 */
#define CQ_DUE_UNSET INT64_MAX				 /* graveyard entry not stamped yet */

STATIC_ASSERT(CQ_UNIT_SIZE == 8 + 4 + 8, "unit layout");

static const struct cq_unit cq_filler = {.phys = 0, .size = CQ_FILLER_SIZE, .tag_hash = 0};

/* RocketMQ's end-of-queue test: offset < 0 or (int32) size <= 0. */
static bool
unit_is_valid(const struct cq_unit *u)
{
	return u->phys >= 0 && u->size != 0 && u->size <= INT32_MAX;
}

static bool
unit_is_filler(const struct cq_unit *u)
{
	return u->phys == 0 && u->size == CQ_FILLER_SIZE && u->tag_hash == 0;
}

static size_t
cq_file_bytes(const struct cq *q)
{
	return (size_t)q->upf * CQ_UNIT_SIZE;
}

static uint8_t *
file_unit(const struct cq *q, const struct cq_file *f, uint64_t qoff)
{
	DASSERT(qoff >= f->first && qoff - f->first < q->upf);
	return f->map + (size_t)(qoff - f->first) * CQ_UNIT_SIZE;
}

static void
file_path(const struct cq *q, uint64_t first, const char *suffix, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%020llu%s", q->dir, (unsigned long long)(first * CQ_UNIT_SIZE),
		 suffix);
}

/*
 * File table.
 */

static struct cq_tab *
tab_alloc(uint32_t cap)
{
	struct cq_tab *t = calloc(1, sizeof(*t) + (size_t)cap * sizeof(t->f[0]));

	if (t == NULL)
		return NULL;
	t->cap = cap;
	atomic_init(&t->n, 0);
	return t;
}

/* The table the background side owns (no concurrent writer: relaxed). */
static struct cq_tab *
tab_own(const struct cq *q)
{
	return atomic_load_relaxed(&q->tab);
}

static void
file_release(const struct cq *q, struct cq_file *f)
{
	if (f->map != NULL)
		q->io->unmap(q->io->ctx, f->map, cq_file_bytes(q));
	if (f->fd >= 0)
		q->io->close(q->io->ctx, f->fd);
	f->map = NULL;
	f->fd = -1;
}

/* Free @t and the trimmed files it alone still holds. */
static void
tab_free(const struct cq *q, struct cq_tab *t)
{
	for (uint32_t i = 0; i < t->n_dead; i++)
		file_release(q, &t->f[i]);
	free(t);
}

/*
 * Put the replaced table @t in the graveyard, owning its first @n_dead
 * files (deleted by trimming, in no newer table), to be freed at @due_ms.
 * Context: background thread or exclusive.
 */
static void
cq_graveyard_add(struct cq *q, struct cq_tab *t, uint32_t n_dead, int64_t due_ms)
{
	t->n_dead = n_dead;
	t->free_due_ms = due_ms;
	t->grave_next = q->graveyard;
	q->graveyard = t;
}

/*
 * Free the graveyard entries whose grace period ended by @now_ms (all of
 * them when @all) and start the grace period of those not stamped yet.
 * Context: background thread (cq_trim_phys()) or exclusive (cq_close()).
 */
static void
cq_graveyard_reap(struct cq *q, int64_t now_ms, bool all)
{
	struct cq_tab **pp = &q->graveyard;

	while (*pp != NULL) {
		struct cq_tab *t = *pp;

		if (all || (t->free_due_ms != CQ_DUE_UNSET && t->free_due_ms <= now_ms)) {
			*pp = t->grave_next;
			tab_free(q, t);
			continue;
		}
		if (t->free_due_ms == CQ_DUE_UNSET)
			t->free_due_ms = now_ms + CQ_UNMAP_GRACE_MS;
		pp = &t->grave_next;
	}
}

/*
 * Append @f (the file after the last one, or the first) to the table.
 * Context: background thread or exclusive.
 */
static int
tab_push(struct cq *q, const struct cq_file *f)
{
	struct cq_tab *t = tab_own(q);
	uint32_t n = atomic_load_relaxed(&t->n);

	if (n == t->cap) {
		struct cq_tab *nt;

		if (t->cap > UINT32_MAX / 2)
			return -ENOMEM;
		nt = tab_alloc(t->cap * 2);
		if (nt == NULL)
			return -ENOMEM;
		nt->first_idx = t->first_idx;
		memcpy(nt->f, t->f, (size_t)n * sizeof(t->f[0]));
		atomic_init(&nt->n, n);
		/* release: pairs with acquire in cq__unit_ptr(); readers of the old copy keep it */
		atomic_store_release(&q->tab, nt);
		/* No clock here: the next cq_trim_phys() starts its grace period. */
		cq_graveyard_add(q, t, 0, CQ_DUE_UNSET);
		t = nt;
	}
	if (n == 0)
		t->first_idx = f->first / q->upf;
	BASSERT(f->first / q->upf == t->first_idx + n);
	t->f[n] = *f;
	/* release: pairs with acquire in cq__unit_ptr() */
	atomic_store_release(&t->n, n + 1);
	return 0;
}

/*
 * Address of unit @qoff, or NULL when no file holds it.
 * Context: any thread; the address stays valid for CQ_UNMAP_GRACE_MS after
 * a cq_trim_phys() that deletes its file (Reclamation above), or until
 * cq_close().
 */
uint8_t *
cq__unit_ptr(const struct cq *q, uint64_t qoff)
{
	/* acquire: pairs with release in tab_push() (a replaced table) */
	const struct cq_tab *t = atomic_load_acquire(&q->tab);
	/* acquire: pairs with release in tab_push() (an appended file) */
	uint32_t n = atomic_load_acquire(&t->n);
	uint64_t fi = qoff / q->upf;

	if (n == 0 || fi < t->first_idx || fi - t->first_idx >= n)
		return NULL;
	return file_unit(q, &t->f[fi - t->first_idx], qoff);
}

/*
 * Opening and creating files.
 */

/* A failed mapping: out of vm.max_map_count is the likely cause with many queues; say so. */
static void
map_failed(const struct cq *q, int rc)
{
	long used;
	long max;

	if (rc != -ENOMEM)
		return;
	store_maps_count(&used, &max);
	log_err_ratelimited(CQ_TAG,
			    "cq %s: mapping a ConsumeQueue file: %s; this process has %ld mappings "
			    "and vm.max_map_count is %ld (each queue that holds messages maps one "
			    "file per mapedFileSizeConsumeQueue of units): raise it (sysctl -w "
			    "vm.max_map_count=...), see docs/operations.md, \"Many queues\"",
			    q->dir, err_str(rc), used, max);
}

static int
file_open_existing(struct cq *q, uint64_t first, struct cq_file *out)
{
	const struct store_io_ops *io = q->io;
	char path[PATH_MAX];
	uint64_t size;
	void *map;
	int fd;
	int rc;

	file_path(q, first, "", path, sizeof(path));
	fd = io->open(io->ctx, path, O_RDWR, 0);
	if (fd < 0)
		return fd;
	rc = io->size(io->ctx, fd, &size);
	if (rc != 0)
		goto err_close;
	if (size != cq_file_bytes(q)) {
		log_err(CQ_TAG, "cq %s: file %020llu has %llu bytes, expected %zu", q->dir,
			(unsigned long long)(first * CQ_UNIT_SIZE), (unsigned long long)size,
			cq_file_bytes(q));
		rc = -EINVAL;
		goto err_close;
	}
	rc = io->map(io->ctx, fd, cq_file_bytes(q), &map);
	if (rc != 0) {
		map_failed(q, rc);
		goto err_close;
	}
	/* The mapping keeps the file: no descriptor per queue (cq_flush() syncs the mapping). */
	io->close(io->ctx, fd);
	out->map = map;
	out->first = first;
	out->fd = -1;
	return 0;

err_close:
	io->close(io->ctx, fd);
	return rc;
}

/*
 * fdatasync the file whose first unit is @first, through a descriptor of
 * its own: a queue keeps only its mappings open, so that idle queues hold
 * no descriptor (the mapping shares the file's page cache, so syncing the
 * file syncs what the drainer stored). Context: background thread.
 */
static int
file_sync(const struct cq *q, uint64_t first)
{
	const struct store_io_ops *io = q->io;
	char path[PATH_MAX];
	int fd;
	int rc;

	file_path(q, first, "", path, sizeof(path));
	fd = io->open(io->ctx, path, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	rc = io->fdatasync(io->ctx, fd);
	io->close(io->ctx, fd);
	return rc;
}

/*
 * Create the file whose first unit is @first: write "<name>.tmp", allocate it
 * in full, make it durable and only then give it its name, so a crash leaves
 * a full-size file or a .tmp that cq_open() removes.
 * Context: background thread, blocking.
 */
static int
file_create(struct cq *q, uint64_t first, struct cq_file *out)
{
	const struct store_io_ops *io = q->io;
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	void *map;
	int fd;
	int rc;

	file_path(q, first, "", path, sizeof(path));
	file_path(q, first, ".tmp", tmp, sizeof(tmp));
	fd = io->open(io->ctx, tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd == -ENOENT) {
		/*
		 * A queue's directory is made with its first file, not with the
		 * queue; the next flush syncs the directories above it too.
		 */
		rc = store_mkdirs(q->dir);
		if (rc != 0)
			return rc;
		atomic_store(&q->parents_dirty, true);
		fd = io->open(io->ctx, tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
	}
	if (fd < 0)
		return fd;
	/*
	 * No fdatasync or directory sync here: a queue with small files needs a
	 * new one every few ms, and two syncs per file (1-3 ms each here) put
	 * the service thread behind the cores. cq_flush() syncs the file and,
	 * once for all files made since, the directory, before any checkpoint
	 * counts units in it; a file a crash leaves short is a damaged
	 * ConsumeQueue that recovery rebuilds from the log.
	 */
	rc = io->allocate(io->ctx, fd, cq_file_bytes(q));
	if (rc == 0)
		rc = io->rename(io->ctx, tmp, path);
	if (rc != 0)
		goto err_unlink_tmp;
	atomic_store(&q->dir_dirty, true);
	rc = io->map(io->ctx, fd, cq_file_bytes(q), &map);
	if (rc != 0) {
		map_failed(q, rc);
		goto err_unlink;
	}
	/*
	 * No pre-faulting: the core never stores into the mapping (cq_wb.c),
	 * and the drainer's faults are its own.
	 */
	io->close(io->ctx, fd);
	out->map = map;
	out->first = first;
	out->fd = -1;
	return 0;

err_unlink:
	io->unlink(io->ctx, path);
	goto err_close;
err_unlink_tmp:
	io->unlink(io->ctx, tmp);
err_close:
	io->close(io->ctx, fd);
	return rc;
}

static bool
name_is_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
	}
	return true;
}

/* Collect the first offsets of the files in q->dir, sorted. Removes stale .tmp files. */
static int
dir_scan(struct cq *q, uint64_t **firsts, size_t *count)
{
	uint64_t fbytes = cq_file_bytes(q);
	uint64_t *v = NULL;
	size_t n = 0;
	size_t cap = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	d = opendir(q->dir);
	if (d == NULL && errno == ENOENT) {
		*firsts = NULL; /* a queue that never had a file */
		*count = 0;
		return 0;
	}
	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		size_t len = strlen(name);
		unsigned long long off;

		if (name[0] == '.')
			continue;
		if (len == CQ_NAME_LEN + 4 && name_is_digits(name, CQ_NAME_LEN) &&
		    strcmp(name + CQ_NAME_LEN, ".tmp") == 0) {
			char path[PATH_MAX];

			/* A file whose creation a crash interrupted: never named, never used. */
			snprintf(path, sizeof(path), "%s/%s", q->dir, name);
			q->io->unlink(q->io->ctx, path);
			continue;
		}
		if (len != CQ_NAME_LEN || !name_is_digits(name, len)) {
			log_warn(CQ_TAG, "cq %s: ignoring unexpected file %s", q->dir, name);
			continue;
		}
		errno = 0;
		off = strtoull(name, NULL, 10);
		if (errno != 0 || off > INT64_MAX || off % fbytes != 0) {
			log_err(CQ_TAG, "cq %s: file %s is not at a multiple of %llu bytes", q->dir,
				name, (unsigned long long)fbytes);
			rc = -EINVAL;
			goto out;
		}
		rc = store__u64_push(&v, &n, &cap, off / CQ_UNIT_SIZE);
		if (rc != 0)
			goto out;
	}
	if (n > 0)
		qsort(v, n, sizeof(*v), store__u64_cmp);
	for (size_t i = 1; i < n; i++) {
		if (v[i] != v[i - 1] + q->upf) {
			log_err(CQ_TAG, "cq %s: file %020llu missing", q->dir,
				(unsigned long long)((v[i - 1] + q->upf) * CQ_UNIT_SIZE));
			rc = -EINVAL;
			goto out;
		}
	}
out:
	closedir(d);
	if (rc != 0) {
		free(v);
		return rc;
	}
	*firsts = v;
	*count = n;
	return 0;
}

/*
 * Zero the bytes of units [lo, hi) that are not zero already (untouched
 * pages stay clean). Context: exclusive.
 */
static void
zero_units(struct cq *q, uint64_t lo, uint64_t hi)
{
	while (lo < hi) {
		uint8_t *p = cq__unit_ptr(q, lo);
		uint64_t file_end = (lo / q->upf + 1) * q->upf;
		uint64_t end = SP_MIN(hi, file_end);
		size_t len = (size_t)(end - lo) * CQ_UNIT_SIZE;
		size_t a = 0;
		size_t b = len;

		if (p == NULL)
			return;
		while (a < len && p[a] == 0)
			a++;
		while (b > a && p[b - 1] == 0)
			b--;
		if (b > a)
			memset(p + a, 0, b - a);
		lo = end;
	}
}

/*
 * Point cur at the file holding unit max (or the last file when max is its
 * end) and put the file after it, if it exists, in the mailbox.
 * Context: exclusive.
 */
static void
cq_set_cursor(struct cq *q)
{
	struct cq_tab *t = tab_own(q);
	uint32_t n = atomic_load_relaxed(&t->n);
	uint64_t max = atomic_load_relaxed(&q->max);
	uint64_t rel;

	if (n == 0) {
		memset(&q->cur, 0, sizeof(q->cur));
		q->cur.fd = -1;
		atomic_store_relaxed(&q->cur_end, 0);
		atomic_store_relaxed(&q->next_ready, 0);
		return;
	}
	rel = max / q->upf - t->first_idx;
	if (rel >= n)
		rel = n - 1;
	q->cur = t->f[rel];
	atomic_store_relaxed(&q->cur_end, q->cur.first + q->upf);
	if (rel + 1 < n) {
		q->next = t->f[rel + 1];
		atomic_store_relaxed(&q->next_ready, 1);
	} else {
		atomic_store_relaxed(&q->next_ready, 0);
	}
}

/*
 * Find max and min from the files (RocketMQ's CQ recovery): the last file
 * whose first unit is valid holds the end; scanning restarts a few files
 * earlier so that a hole left by out-of-order writeback ends the queue
 * there. Units past the end are zeroed so that later appends never join
 * up with stale ones.
 */
static void
cq_recover(struct cq *q)
{
	struct cq_tab *t = tab_own(q);
	uint32_t n = atomic_load_relaxed(&t->n);
	uint64_t max;
	uint64_t min;
	uint64_t end;
	struct cq_unit u;
	uint32_t last = UINT32_MAX;

	if (n == 0)
		return; /* new queue: max = min = 0, no file until cq_prepare_next() */
	for (uint32_t i = n; i-- > 0;) {
		cq__unit_load(t->f[i].map, &u);
		if (unit_is_valid(&u)) {
			last = i;
			break;
		}
	}
	if (last == UINT32_MAX) {
		max = t->f[0].first;
	} else {
		uint32_t from = last >= CQ_RECOVER_FILES - 1 ? last - (CQ_RECOVER_FILES - 1) : 0;
		uint64_t stop = t->f[last].first + q->upf;

		for (max = t->f[from].first; max < stop; max++) {
			cq__unit_load(cq__unit_ptr(q, max), &u);
			if (!unit_is_valid(&u))
				break;
		}
	}
	for (min = t->f[0].first; min < max; min++) {
		cq__unit_load(cq__unit_ptr(q, min), &u);
		if (!unit_is_filler(&u))
			break;
	}
	/*
	 * A hole a few files back leaves valid units after it: zero every unit
	 * past max. Normally that is the tail of one file and a prepared one.
	 */
	end = t->f[n - 1].first + q->upf;
	zero_units(q, max, end);
	atomic_store_relaxed(&q->max, max);
	atomic_store_relaxed(&q->min, min);
	atomic_store_relaxed(&q->wb, max);
	/* Whatever the last run left unsynced is synced by the first flush. */
	q->flushed = t->f[0].first;
	q->dirty_hi = end;
}

static int
open_queue(const struct store_io_ops *io, const char *dir, uint32_t units_per_file, bool scan,
	   struct cq **out)
{
	uint64_t *firsts = NULL;
	size_t count = 0;
	struct cq *q;
	int rc;

	if (io == NULL || dir == NULL || dir[0] == '\0' || out == NULL || units_per_file == 0 ||
	    units_per_file > CQ_UPF_MAX)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	q->io = io;
	q->upf = units_per_file;
	q->cur.fd = -1;
	q->next.fd = -1;
	atomic_init(&q->max, 0);
	atomic_init(&q->min, 0);
	atomic_init(&q->wb, 0);
	atomic_init(&q->next_ready, 0);
	atomic_init(&q->cur_end, 0);
	atomic_init(&q->start_req, CQ_NONE);
	atomic_init(&q->tab, tab_alloc(CQ_TAB_MIN));
	q->dir = strdup(dir);
	if (q->dir == NULL || tab_own(q) == NULL || cq__wb_init(q) != 0) {
		rc = -ENOMEM;
		goto err_close;
	}
	rc = scan ? dir_scan(q, &firsts, &count) : 0;
	if (rc != 0)
		goto err_close;
	for (size_t i = 0; i < count; i++) {
		struct cq_file f;

		rc = file_open_existing(q, firsts[i], &f);
		if (rc != 0)
			goto err_close;
		rc = tab_push(q, &f);
		if (rc != 0) {
			file_release(q, &f);
			goto err_close;
		}
	}
	free(firsts);
	firsts = NULL;
	cq_recover(q);
	cq_set_cursor(q);
	*out = q;
	return 0;

err_close:
	free(firsts);
	cq_close(q);
	return rc;
}

int
cq_open(const struct store_io_ops *io, const char *dir, uint32_t units_per_file, struct cq **out)
{
	return open_queue(io, dir, units_per_file, true, out);
}

int
cq_open_new(const struct store_io_ops *io, const char *dir, uint32_t units_per_file,
	    struct cq **out)
{
	return open_queue(io, dir, units_per_file, false, out);
}

void
cq_close(struct cq *q)
{
	struct cq_tab *t;

	if (q == NULL)
		return;
	t = tab_own(q);
	if (t != NULL && q->ring != NULL)
		(void)cq_wb_drain(q); /* what the ring still holds, into the page cache */
	cq__wb_free(q);
	if (t != NULL) {
		uint32_t n = atomic_load_relaxed(&t->n);

		for (uint32_t i = 0; i < n; i++)
			file_release(q, &t->f[i]);
		free(t);
	}
	cq_graveyard_reap(q, 0, true);
	free(q->dir);
	free(q);
}

/*
 * Appending (owning core).
 */

static int
cq_check_dup(const struct cq *q, uint64_t qoff, const struct cq_unit *u)
{
	struct cq_unit old;

	/* acquire: pairs with the CAS in cq_trim_phys() */
	if (qoff < atomic_load_acquire(&q->min))
		return 0; /* trimmed or before the queue's start: nothing to compare */
	if (!cq__unit_read(q, qoff, &old))
		return 0;
	if (old.phys != u->phys || old.size != u->size || old.tag_hash != u->tag_hash)
		return -EEXIST;
	return 0;
}

static void
fill_units(const struct cq *q, const struct cq_file *f, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi; i++)
		cq__unit_store(file_unit(q, f, i), &cq_filler);
}

int
cq_append(struct cq *q, uint64_t qoff, const struct cq_unit *u)
{
	uint64_t max = atomic_load_relaxed(&q->max); /* our own store */
	bool start = qoff > max;
	uint64_t from;
	uint64_t wb;

	if (u->phys < 0 || u->size == 0 || u->size >= CQ_FILLER_SIZE)
		return -EINVAL; /* recovery would read it as the end, or as filler */
	if (qoff >= CQ_QOFF_MAX - 2 * (uint64_t)q->upf)
		return -EINVAL;
	if (qoff < max)
		return cq_check_dup(q, qoff, u);
	/* Only an empty queue may start past its max; min only moves to max here. */
	if (start && atomic_load_relaxed(&q->min) != max)
		return -EINVAL;
	/* acquire: pairs with release in cq_wb_drain(): slot qoff - CQ_WB_UNITS is free */
	wb = atomic_load_acquire(&q->wb);
	/*
	 * A full ring: the drainer is behind. A queue start writes fillers
	 * into the file itself, so it waits for the ring to be empty.
	 */
	if (start ? wb != max : qoff - wb >= CQ_WB_UNITS)
		return -EAGAIN;
	if (!start) {
		/*
		 * The ring holds the unit until the background side has made its
		 * file and copied it (cq_wb.c): a queue needs no file to take
		 * units. The core follows the files only to ask for the next one
		 * (cq_wants_next() reads cur_end): it takes the file waiting in
		 * the mailbox once the unit is past its own.
		 */
		/* acquire: pairs with release in cq_prepare_next(): next and its mapping */
		if ((q->cur.map == NULL || qoff >= q->cur.first + q->upf) &&
		    atomic_load_acquire(&q->next_ready) && q->next.first <= qoff) {
			q->cur = q->next;
			atomic_store_relaxed(&q->cur_end, q->cur.first + q->upf);
			/* release: pairs with acquire in cq_prepare_next(); next may be rewritten */
			atomic_store_release(&q->next_ready, 0);
		}
		cq__wb_put(q, qoff, u);
		/* release: pairs with acquire in cq_get()/cq_max()/cq_wb_drain(): the unit is written */
		atomic_store_release(&q->max, qoff + 1);
		return 0;
	}
	/*
	 * A queue start writes fillers into the file itself, from max to
	 * qoff (an empty queue: every unit below max is in the files, as
	 * wb == max). The core's file may lag behind max, or the core may
	 * have none yet while the table has some: it takes mailbox files
	 * until max and qoff are in its file, one per try. An empty queue
	 * starts in the file holding max or the next one.
	 */
	for (;;) {
		bool have = q->cur.map != NULL;
		uint64_t cend = have ? q->cur.first + q->upf : 0;

		if (have && max <= cend && qoff < cend)
			break;
		if (have && max <= cend && qoff - q->cur.first >= 2 * (uint64_t)q->upf)
			return -EINVAL;
		/* acquire: pairs with release in cq_prepare_next(): next and its mapping */
		if (!atomic_load_acquire(&q->next_ready)) {
			atomic_store_relaxed(&q->start_req, qoff);
			return -EAGAIN;
		}
		if (q->next.first > qoff)
			return -EINVAL; /* a new queue's first file is elsewhere */
		/* An empty queue that restarts in the next file: no hole in this one. */
		if (have && max < cend)
			fill_units(q, &q->cur, max, cend);
		q->cur = q->next;
		atomic_store_relaxed(&q->cur_end, q->cur.first + q->upf);
		/* release: pairs with acquire in cq_prepare_next(); next may be rewritten */
		atomic_store_release(&q->next_ready, 0);
	}
	from = SP_MAX(max, q->cur.first);
	/* Rare, so into the mapping directly: the fillers may fault. */
	fill_units(q, &q->cur, from, qoff);
	/* release: pairs with acquire in cq_get()/cq_min(); stored before max */
	atomic_store_release(&q->min, qoff);
	/*
	 * release: pairs with acquire in cq_wb_drain() (after max) and
	 * cq__unit_read(): the fillers are in the file, the drainer
	 * starts at qoff. It has nothing to copy meanwhile (wb == max).
	 */
	atomic_store_release(&q->wb, qoff);
	cq__wb_put(q, qoff, u);
	/* release: pairs with acquire in cq_get()/cq_max()/cq_wb_drain(): the unit is written */
	atomic_store_release(&q->max, qoff + 1);
	return 0;
}

bool
cq_ring_full(const struct cq *q)
{
	uint64_t max = atomic_load_relaxed(&q->max);
	/* acquire: pairs with release in cq_wb_drain() */
	uint64_t wb = atomic_load_acquire(&q->wb);

	/* wb > max: a stale max, read off the owning core (store_queue_get()) */
	return wb <= max && max - wb >= CQ_WB_UNITS;
}

bool
cq_can_append(const struct cq *q)
{
	/* The unit at max is never a queue start: only the ring can refuse it. */
	return !cq_ring_full(q);
}

/* True when the file ending at @end (holding @max) is at least 3/4 used. */
static bool
file_nearly_full(const struct cq *q, uint64_t max, uint64_t end)
{
	uint64_t used = max + q->upf - end;

	return used * 4 >= (uint64_t)q->upf * 3;
}

/* An emptied queue asked to start at or past @end, the end of its file. */
static bool
start_past(const struct cq *q, uint64_t end)
{
	uint64_t start = atomic_load_relaxed(&q->start_req);

	return start != CQ_NONE && start >= end;
}

/*
 * Does the ring hold units below @max that no file of @t (@n files) has?
 * *@idx: the first file they lack, the one after the table's last, or, in a
 * queue with none, the file holding wb, where the ring's units start.
 */
static bool
file_missing(const struct cq *q, const struct cq_tab *t, uint32_t n, uint64_t max, uint64_t *idx)
{
	uint64_t wb;

	if (n > 0) {
		*idx = t->first_idx + n;
		return max > *idx * (uint64_t)q->upf;
	}
	/* acquire: pairs with release in cq_append() (a queue start) */
	wb = atomic_load_acquire(&q->wb);
	*idx = wb / q->upf;
	return max > wb;
}

/* The ring holds units past the table's last file (or the queue has none). */
static bool
ring_past_files(const struct cq *q)
{
	/* acquire: pairs with release in tab_push() */
	const struct cq_tab *t = atomic_load_acquire(&q->tab);
	uint64_t idx;

	/* acquire: pairs with release in tab_push() (an appended file) */
	return file_missing(q, t, atomic_load_acquire(&t->n), atomic_load_relaxed(&q->max), &idx);
}

bool
cq_wants_next(const struct cq *q)
{
	uint64_t end;

	/* A hint: cq_prepare_next() decides again with the ordering it needs. */
	if (ring_past_files(q))
		return true;
	if (atomic_load_relaxed(&q->next_ready))
		return false;
	end = atomic_load_relaxed(&q->cur_end);
	if (end == 0)
		return atomic_load_relaxed(&q->start_req) != CQ_NONE ||
		       atomic_load_relaxed(&tab_own(q)->n) > 0;
	return file_nearly_full(q, atomic_load_relaxed(&q->max), end) || start_past(q, end);
}

/* Create file @idx (the one after the table's last, or the first) and add it. */
static int
file_add(struct cq *q, uint64_t idx, struct cq_file *f)
{
	int rc = file_create(q, idx * q->upf, f);

	if (rc != 0)
		return rc;
	rc = tab_push(q, f);
	if (rc != 0) {
		char path[PATH_MAX];

		file_release(q, f);
		file_path(q, idx * q->upf, "", path, sizeof(path));
		q->io->unlink(q->io->ctx, path);
	}
	return rc;
}

/*
 * Every unit the ring holds gets its file, in order after the table's last
 * one (a queue with none: the file holding wb, where the ring's units
 * start), whether or not the core has asked: the core takes units without
 * a file (cq_append()), and the drainer copies only into files.
 */
static int
files_cover(struct cq *q)
{
	/* acquire: pairs with release in cq_append(): how far the ring goes */
	uint64_t max = atomic_load_acquire(&q->max);

	for (;;) {
		struct cq_tab *t = tab_own(q);
		struct cq_file f;
		uint64_t idx;
		int rc;

		if (!file_missing(q, t, atomic_load_relaxed(&t->n), max, &idx))
			return 0;
		rc = file_add(q, idx, &f);
		if (rc != 0)
			return rc;
	}
}

int
cq_prepare_next(struct cq *q)
{
	struct cq_tab *t;
	uint32_t n;
	struct cq_file f;
	uint64_t end;
	uint64_t idx;
	int rc;

	rc = files_cover(q);
	if (rc != 0)
		return rc;
	t = tab_own(q);
	n = atomic_load_relaxed(&t->n);
	/* acquire: pairs with release in cq_append(); cur_end is current, next is ours */
	if (atomic_load_acquire(&q->next_ready))
		return 0;
	end = atomic_load_relaxed(&q->cur_end);
	if (end == 0 && n > 0) {
		/* The core has no file yet: the one holding max, or the last. */
		uint64_t fi = atomic_load_relaxed(&q->max) / q->upf;

		idx = SP_MIN(SP_MAX(fi, t->first_idx), t->first_idx + n - 1);
	} else if (end == 0) {
		/* No file at all: one only for a queue start, where it asked. */
		uint64_t start = atomic_load_relaxed(&q->start_req);

		if (start == CQ_NONE)
			return 0;
		idx = start / q->upf;
	} else {
		if (!file_nearly_full(q, atomic_load_relaxed(&q->max), end) && !start_past(q, end))
			return 0;
		idx = end / q->upf;
	}
	if (n > 0 && idx >= t->first_idx && idx < t->first_idx + n) {
		/* made by files_cover(), kept by truncation or found at open */
		f = t->f[idx - t->first_idx];
	} else {
		rc = file_add(q, idx, &f);
		if (rc != 0)
			return rc;
	}
	q->next = f;
	/* release: pairs with acquire in cq_append(); publishes next and the table */
	atomic_store_release(&q->next_ready, 1);
	return 0;
}

/*
 * Reading (any thread).
 */

uint64_t
cq_max(const struct cq *q)
{
	/* acquire: pairs with release in cq_append() */
	return atomic_load_acquire(&q->max);
}

uint64_t
cq_min(const struct cq *q)
{
	/* acquire: pairs with release in cq_append() (read max first, then min) */
	uint64_t max = atomic_load_acquire(&q->max);
	/* acquire: pairs with release in cq_append() and the CAS in cq_trim_phys() */
	uint64_t min = atomic_load_acquire(&q->min);

	/* A queue starting at an offset stores min before max: never show min > max. */
	return SP_MIN(min, max);
}

int
cq_get(const struct cq *q, uint64_t qoff, struct cq_unit *u)
{
	/* acquire: pairs with release in cq_append(): units below max are written */
	uint64_t max = atomic_load_acquire(&q->max);
	/* acquire: pairs with release in cq_append() and the CAS in cq_trim_phys() */
	uint64_t min = atomic_load_acquire(&q->min);

	if (qoff < min || qoff >= max || !cq__unit_read(q, qoff, u))
		return -ERANGE;
	return 0;
}

int
cq_search(const struct cq *q, int64_t key,
	  int (*key_of)(void *ctx, const struct cq_unit *u, int64_t *out), void *ctx,
	  uint64_t *qoff)
{
	uint64_t hi = cq_max(q);
	uint64_t lo = cq_min(q);

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct cq_unit u;
		int64_t k;
		int rc;

		rc = cq_get(q, mid, &u);
		if (rc != 0)
			return rc;
		rc = key_of(ctx, &u, &k);
		if (rc != 0)
			return rc;
		if (k >= key)
			hi = mid;
		else
			lo = mid + 1;
	}
	*qoff = lo;
	return 0;
}

/*
 * First qoff in [lo, hi) whose unit satisfies phys (+ size when @end) > or
 * >= @phys; CQ_NONE when a unit on the way is in no file (a bug).
 */
static uint64_t
bsearch_phys(const struct cq *q, uint64_t lo, uint64_t hi, int64_t phys, bool end)
{
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct cq_unit u;
		bool past;

		if (!cq__unit_read(q, mid, &u))
			return CQ_NONE;
		if (end)
			past = u.phys + (int64_t)u.size > phys;
		else
			past = u.phys >= phys;
		if (past)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int
cq_truncate_phys(struct cq *q, int64_t phys_end)
{
	uint64_t max = atomic_load_relaxed(&q->max);
	uint64_t min = atomic_load_relaxed(&q->min);
	uint64_t nmax;
	int rc = 0;

	/*
	 * Under the drain lock: a drainer that read the old max must not copy
	 * ring slots over the zeroed units. First the ring into the files.
	 */
	pthread_mutex_lock(&q->wb_lock);
	(void)cq__wb_drain_locked(q);
	if (min >= max)
		goto out;
	/* Units are in log order, so those past phys_end are a suffix. */
	nmax = bsearch_phys(q, min, max, phys_end, true);
	if (nmax == CQ_NONE) {
		log_err(CQ_TAG, "cq %s: a unit below max is in no file: not truncated", q->dir);
		rc = -EIO;
		goto out;
	}
	if (nmax == max)
		goto out;
	zero_units(q, nmax, max);
	atomic_store_relaxed(&q->max, nmax); /* exclusive: nobody reads meanwhile */
	/* Units the ring still holds (their file is not made yet) stay in it. */
	atomic_store_relaxed(&q->wb, SP_MIN(atomic_load_relaxed(&q->wb), nmax));
	cq_set_cursor(q);
	q->flushed = SP_MIN(q->flushed, nmax);
	q->dirty_hi = SP_MAX(q->dirty_hi, max);
out:
	pthread_mutex_unlock(&q->wb_lock);
	return rc;
}

uint64_t
cq_count_phys(const struct cq *q, int64_t lo, int64_t hi)
{
	uint64_t max = atomic_load_relaxed(&q->max);
	uint64_t min = atomic_load_relaxed(&q->min);
	uint64_t a;
	uint64_t b;

	if (min >= max || hi <= lo)
		return 0;
	b = bsearch_phys(q, min, max, hi, false);
	a = bsearch_phys(q, min, max, lo, false);
	return a == CQ_NONE || b == CQ_NONE ? 0 : b - a;
}

/*
 * Delete the first @k files of the table (all below min, none holding max):
 * unlink them, publish a copy of the table without them and put the old
 * table, which alone still holds them, in the graveyard until @now_ms plus
 * the grace period. *@dropped: how many were deleted. Return: 0, -ENOMEM
 * (nothing deleted), -errno of the first unlink that failed (the files
 * before it are deleted). Context: background thread.
 */
static int
cq_drop_files(struct cq *q, uint32_t k, int64_t now_ms, uint32_t *dropped)
{
	struct cq_tab *t = tab_own(q);
	uint32_t n = atomic_load_relaxed(&t->n);
	struct cq_tab *nt;
	uint32_t done;
	int rc = 0;

	*dropped = 0;
	nt = tab_alloc(t->cap);
	if (nt == NULL)
		return -ENOMEM;
	for (done = 0; done < k; done++) {
		char path[PATH_MAX];

		file_path(q, t->f[done].first, "", path, sizeof(path));
		rc = q->io->unlink(q->io->ctx, path);
		if (rc != 0 && rc != -ENOENT) {
			log_err(CQ_TAG, "cq %s: unlink(%020llu) failed: %s", q->dir,
				(unsigned long long)(t->f[done].first * CQ_UNIT_SIZE), err_str(rc));
			break;
		}
		rc = 0;
	}
	if (done == 0) {
		free(nt);
		return rc;
	}
	nt->first_idx = t->first_idx + done;
	memcpy(nt->f, &t->f[done], (size_t)(n - done) * sizeof(t->f[0]));
	atomic_init(&nt->n, n - done);
	/*
	 * release: pairs with acquire in cq__unit_ptr(); new readers no longer
	 * reach the dropped files, those holding t keep them for the grace period.
	 */
	atomic_store_release(&q->tab, nt);
	cq_graveyard_add(q, t, done, now_ms + CQ_UNMAP_GRACE_MS);
	*dropped = done;
	return rc;
}

int
cq_trim_phys(struct cq *q, int64_t min_phys, int64_t now_ms)
{
	struct cq_tab *t = tab_own(q);
	uint32_t n = atomic_load_relaxed(&t->n);
	uint64_t max;
	uint64_t min;
	uint32_t k = 0;
	int rc = 0;

	/* First what earlier calls left: their grace period may be over. */
	cq_graveyard_reap(q, now_ms, false);
	for (;;) {
		uint64_t nmin;

		/* acquire: pairs with release in cq_append() */
		max = atomic_load_acquire(&q->max);
		/* acquire: pairs with release in cq_append() (a queue start) */
		min = atomic_load_acquire(&q->min);
		if (min >= max)
			break;
		nmin = bsearch_phys(q, min, max, min_phys, false);
		if (nmin == min || nmin == CQ_NONE)
			break;
		/*
		 * release: pairs with acquire in cq_get()/cq_min(). A CAS, since the
		 * core may have restarted an emptied queue and raised min meanwhile.
		 * Stored before the table without the deleted files is published.
		 */
		if (atomic_compare_exchange_strong_explicit(
			    &q->min, &min, nmin, memory_order_release, memory_order_relaxed)) {
			min = nmin;
			break;
		}
	}
	/*
	 * Delete whole files below min. A file that ends at or after max holds
	 * the core's current unit, so the last file always stays; one that
	 * ends past wb still has units to take from the ring.
	 */
	while (k + 1 < n) {
		uint64_t fend = t->f[k].first + q->upf;

		/* acquire: pairs with release in cq_append() (a queue start) */
		if (fend > min || fend >= max || fend > atomic_load_acquire(&q->wb))
			break;
		k++;
	}
	if (k > 0) {
		uint32_t dropped;

		rc = cq_drop_files(q, k, now_ms, &dropped);
		if (dropped > 0) {
			int rc2 = q->io->sync_dir(q->io->ctx, q->dir);

			if (rc == 0)
				rc = rc2;
		}
	}
	return rc;
}

/*
 * The queue's directory was made with its first file: sync the two above it
 * (the topic's and the ConsumeQueue root), so that the directory a flushed
 * unit lives in survives a power loss. Context: background thread.
 */
static int
sync_parents(const struct cq *q)
{
	char dir[PATH_MAX];
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s", q->dir);
	for (int up = 0; up < 2 && rc == 0; up++) {
		char *slash = strrchr(dir, '/');

		if (slash == NULL || slash == dir)
			break;
		*slash = '\0';
		rc = q->io->sync_dir(q->io->ctx, dir);
	}
	return rc;
}

int
cq_flush(struct cq *q)
{
	struct cq_tab *t;
	uint32_t n;
	uint64_t max;
	uint64_t end;
	uint64_t lo = q->flushed;
	uint64_t fi;
	uint64_t fi_end;
	/* acquire: pairs with release in cq_append(): what this flush must make durable */
	uint64_t want = atomic_load_acquire(&q->max);
	int rc;

	/* Every unit appended before this call into the files, then "max" is how far they hold. */
	rc = files_cover(q);
	if (rc != 0)
		return rc;
	t = tab_own(q);
	n = atomic_load_relaxed(&t->n);
	(void)cq_wb_drain(q);
	/* acquire: pairs with release in cq_wb_drain() and cq_append() (a queue start) */
	max = atomic_load_acquire(&q->wb);
	if (max < want) {
		/* The drain stopped short (no file for a unit: a bug): claim nothing. */
		log_err_ratelimited(CQ_TAG, "cq %s: units %llu..%llu are only in the ring", q->dir,
				    (unsigned long long)max, (unsigned long long)want);
		return -EIO;
	}
	end = SP_MAX(max, q->dirty_hi);

	if (atomic_exchange(&q->parents_dirty, false)) {
		rc = sync_parents(q);
		if (rc != 0) {
			atomic_store(&q->parents_dirty, true);
			return rc;
		}
	}
	if (atomic_exchange(&q->dir_dirty, false)) {
		rc = q->io->sync_dir(q->io->ctx, q->dir);
		if (rc != 0) {
			atomic_store(&q->dir_dirty, true);
			return rc;
		}
	}
	if (n == 0 || lo >= end) {
		q->flushed = SP_MIN(lo, max);
		q->dirty_hi = 0; /* nothing left to sync */
		return 0;
	}
	fi = SP_MAX(lo / q->upf, t->first_idx);
	fi_end = SP_MIN((end - 1) / q->upf + 1, t->first_idx + n);
	for (; fi < fi_end; fi++) {
		rc = file_sync(q, t->f[fi - t->first_idx].first);
		if (rc != 0)
			return rc;
	}
	q->flushed = max;
	q->dirty_hi = 0;
	return 0;
}

bool
cq_idle(const struct cq *q)
{
	/* acquire: pairs with release in cq_append() */
	uint64_t max = atomic_load_acquire(&q->max);

	return cq_drained(q) && q->flushed >= max && q->dirty_hi == 0 &&
	       !atomic_load(&q->dir_dirty) && !atomic_load(&q->parents_dirty) && !cq_wants_next(q);
}
