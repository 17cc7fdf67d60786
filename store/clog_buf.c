// SPDX-License-Identifier: Apache-2.0
/*
 * clog_buf.c - a CommitLog shard's write-behind buffers: windows of chunks
 * mapped into each hot segment's reservation, kept ahead of the appends by
 * the preparing thread, retired by the flusher once durable, reused.
 *
 * DESIGN
 * A hot segment owns a reservation of seg_size bytes of address space
 * (PROT_NONE: no memory). Chunks of ck_size bytes are mapped into it in
 * order, at their place, so a record that crosses a chunk boundary is
 * still contiguous for readers. Only the window ahead of the appends and
 * the part not yet durable hold memory: a shard uses about `window` plus
 * what one flush interval appends, whatever the segment size (with 1 GiB
 * segments the whole-segment buffers of the first design were 2-4 GiB of
 * RAM per shard, and a start fallocated and pre-faulted all of it).
 *
 * Chunks are files in buf_dir (tmpfs: they outlive a crash of the process;
 * named by the local offset of their first byte) or anonymous memory. A
 * durable chunk is listed for reuse (clog_ck_get()): zeroed, renamed,
 * mapped at its new place; its old place becomes PROT_NONE again. Pages
 * of a reused file are already allocated, which on this kind of VM is
 * most of a new chunk's cost (docs/store.md, "Reusing write-behind
 * buffers"). Anonymous chunks are moved with mremap(), which leaves a
 * hole at the old place for a moment: it is taken back with
 * MAP_FIXED_NOREPLACE, and if something else was mapped there meanwhile,
 * that reservation is never unmapped (clog_ck_move_anon()).
 *
 * Address space is never unmapped while something may still map it: a
 * reservation (struct clog_res) counts its segment and every chunk whose
 * place in it is still mapped; the last one out unmaps it.
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
#include "common/clock.h"
#include "common/log.h"
#include "store/clog.h"

#include "clog_priv.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

struct clog_res {
	uint8_t *base;
	_Atomic unsigned refs; /* the segment's, one per chunk whose place is mapped */
	bool leak;	       /* a place could not be made PROT_NONE again: never unmapped */
};

/*
 * A retired chunk (under grave_mu): the flusher frees it after its grace
 * period unless the preparing thread reused it first.
 */
struct clog_buf_grave {
	struct clog_res *res;
	uint8_t *addr;
	uint64_t start; /* local offset of its first byte: its file's name */
	bool file;
	uint64_t due_ns;
	struct clog_buf_grave *next;
};

void
clog__buf_path(const char *dir, uint64_t start, char *path, size_t n)
{
	snprintf(path, n, "%s/%020" PRIu64, dir, start);
}

void
clog__buf_geometry(struct clog *c, uint64_t window)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t ck = c->seg_size;

	/* Halve while the half is whole pages, over the target, and at most 64 per segment. */
	while (ck % 2 == 0 && (ck / 2) % (uint64_t)page == 0 && ck > CLOG_CK_TARGET &&
	       c->seg_size / (ck / 2) <= 64)
		ck /= 2;
	c->ck_size = ck;
	c->window = SP_MAX(window, 2 * ck);
}

static void
clog_res_put(struct clog *c, struct clog_res *r)
{
	if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (!r->leak)
		munmap(r->base, c->seg_size);
	free(r);
}

/* Make [@addr, +@len) of @r PROT_NONE again, holding no memory. */
static void
clog_res_plug(struct clog *c, struct clog_res *r, uint8_t *addr, uint64_t len)
{
	/* MAP_FIXED over our own mapping: atomic, no moment without one */
	if (mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
		 0) == MAP_FAILED) {
		log_err(CLOG_TAG, "shard %u: cannot release %" PRIu64 " bytes of a buffer: %s",
			c->shard, len, strerror(errno));
		r->leak = true;
	}
}

int
clog__res_new(struct clog *c, struct clog_seg *s, uint64_t from)
{
	struct clog_res *r = calloc(1, sizeof(*r));
	void *p;

	if (r == NULL)
		return -ENOMEM;
	p = mmap(NULL, c->seg_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(r);
		return -errno;
	}
	r->base = p;
	atomic_store_relaxed(&r->refs, 1);
	s->res = r;
	atomic_store_relaxed(&s->buf_lo, from);
	atomic_store_relaxed(&s->buf_hi, from);
	/* release: readers that see it see a reservation whose mapped part is [lo, hi) */
	atomic_store_release(&s->buf, r->base);
	return 0;
}

/*
 * Hot anonymous chunks (anon_bufs): one more, when one is mapped (@start;
 * @why: why not a file), or one less, at its retirement or its segment's
 * end. The first and the last of an episode say so when buffers were to
 * be files (clog_bufs_degraded()).
 */
static void
clog_anon_get(struct clog *c, uint64_t start, int why)
{
	/*
	 * Durability must not downgrade without a word: once per episode, at
	 * error level; store_durable() holds ASYNC_FLUSH acknowledgements for
	 * the write-back meanwhile.
	 */
	if (atomic_fetch_add_explicit(&c->anon_bufs, 1, memory_order_relaxed) == 0 &&
	    c->buf_wanted && c->buf_dir != NULL) {
		atomic_add_relaxed(&c->degraded_episodes, 1);
		log_err(CLOG_TAG,
			"shard %u: the write-behind buffer at %020" PRIu64
			" is anonymous memory, not a file in %s (%s): until buffers are files "
			"again, ASYNC_FLUSH appends are acknowledged only once written back",
			c->shard, start, c->buf_dir, strerror(why));
	}
}

static void
clog_anon_put(struct clog *c)
{
	if (atomic_fetch_sub_explicit(&c->anon_bufs, 1, memory_order_relaxed) == 1 &&
	    c->buf_wanted && c->buf_dir != NULL)
		log_warn(CLOG_TAG,
			 "shard %u: write-behind buffers are files in %s again: ASYNC_FLUSH "
			 "appends are acknowledged at once again",
			 c->shard, c->buf_dir);
}

static void
clog_buf_unlink(struct clog *c, uint64_t start)
{
	char path[PATH_MAX];

	clog__buf_path(c->buf_dir, start, path, sizeof(path));
	if (unlink(path) != 0 && errno != ENOENT)
		log_warn(CLOG_TAG, "shard %u: cannot remove %s: %s", c->shard, path,
			 strerror(errno));
}

/* A chunk's place vacated: its memory released, its file removed unless @keep_file. */
static void
clog_ck_free(struct clog *c, struct clog_res *r, uint8_t *addr, uint64_t start, bool file,
	     bool keep_file)
{
	clog_res_plug(c, r, addr, c->ck_size);
	if (file && !keep_file)
		clog_buf_unlink(c, start);
	clog_res_put(c, r);
}

static void
clog_grave_push(struct clog *c, struct clog_buf_grave *g)
{
	pthread_mutex_lock(&c->grave_mu);
	g->next = c->buf_graves;
	c->buf_graves = g;
	pthread_mutex_unlock(&c->grave_mu);
}

/* Map the file of the chunk at @start over @dst (our own reservation). Return: 0, -errno. */
static int
clog_ck_map_file(struct clog *c, uint64_t start, uint8_t *dst, int flags)
{
	char path[PATH_MAX];
	void *p = MAP_FAILED;
	int err;
	int fd;

	clog__buf_path(c->buf_dir, start, path, sizeof(path));
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
	if (fd < 0)
		return -errno;
	/* fallocate: a full tmpfs says ENOSPC here, not SIGBUS at an append */
	if ((flags & O_CREAT) == 0 || fallocate(fd, 0, 0, (off_t)c->ck_size) == 0)
		p = mmap(dst, c->ck_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	err = errno;
	close(fd);
	if (p != MAP_FAILED)
		return 0;
	if ((flags & O_CREAT) != 0)
		(void)unlink(path);
	return -err;
}

/*
 * Move anonymous chunk memory from @g's place to @dst (its pages go along:
 * nothing to allocate). mremap() leaves the old place unmapped for a
 * moment: it is taken back only if nothing else was mapped there meanwhile
 * (MAP_FIXED_NOREPLACE), else the reservation is never unmapped.
 */
static int
clog_ck_move_anon(struct clog *c, struct clog_buf_grave *g, uint8_t *dst)
{
	void *p;

	if (mremap(g->addr, c->ck_size, c->ck_size, MREMAP_MAYMOVE | MREMAP_FIXED, dst) ==
	    MAP_FAILED)
		return -errno;
	p = mmap(g->addr, c->ck_size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
	if (p != g->addr) {
		if (p != MAP_FAILED)
			munmap(p, c->ck_size); /* a kernel that took the flag for a hint */
		g->res->leak = true;
	}
	return 0;
}

/*
 * A retired chunk of the kind this shard maps (files when buf_dir is set)
 * moved to @dst as the chunk at @start: the oldest that no reader can still
 * be in (its grace period over, or any once reader_sync() returns), zeroed,
 * as a file renamed. Return: 0 none, 1 a file, 2 anonymous memory.
 */
static int
clog_ck_reuse(struct clog *c, uint64_t start, uint8_t *dst)
{
	struct clog_buf_grave *g = NULL;
	struct clog_buf_grave **pick = NULL;
	uint64_t now = clk_mono_ns();
	char from[PATH_MAX];
	char to[PATH_MAX];
	int rc;

	pthread_mutex_lock(&c->grave_mu);
	for (struct clog_buf_grave **pp = &c->buf_graves; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->file == (c->buf_dir != NULL) &&
		    (c->reader_sync != NULL || (*pp)->due_ns <= now))
			pick = pp; /* newest first: the last match is the oldest */
	if (pick != NULL) {
		g = *pick;
		*pick = g->next;
	}
	pthread_mutex_unlock(&c->grave_mu);
	if (g == NULL)
		return 0;
	/* Retired (buf_lo raised, release) before it was listed: later readers use the file. */
	if (c->reader_sync != NULL && g->due_ns > now && !c->reader_sync(c->reader_sync_arg)) {
		clog_grave_push(c, g); /* a reader may still be in it: new memory this time */
		return 0;
	}
	for (uint64_t off = 0; off < c->ck_size; off += CLOG_PREP_SLICE)
		memset(g->addr + off, 0, SP_MIN((uint64_t)CLOG_PREP_SLICE, c->ck_size - off));
	if (!g->file) {
		rc = clog_ck_move_anon(c, g, dst);
		if (rc != 0) {
			clog_ck_free(c, g->res, g->addr, g->start, false, false);
		} else {
			clog_res_put(c, g->res);
			atomic_add_relaxed(&c->bufs_reused, 1);
		}
		free(g);
		return rc == 0 ? 2 : 0;
	}
	/* Zeroed first: a crash never leaves the old bytes under the new name. */
	clog__buf_path(c->buf_dir, g->start, from, sizeof(from));
	clog__buf_path(c->buf_dir, start, to, sizeof(to));
	if (rename(from, to) != 0) {
		log_warn(CLOG_TAG, "shard %u: cannot rename %s to %s: %s", c->shard, from, to,
			 strerror(errno));
		clog_ck_free(c, g->res, g->addr, g->start, true, false);
		free(g);
		return 0;
	}
	rc = clog_ck_map_file(c, start, dst, 0);
	clog_ck_free(c, g->res, g->addr, start, true, rc == 0); /* the old place */
	free(g);
	if (rc != 0)
		return 0;
	atomic_add_relaxed(&c->bufs_reused, 1);
	return 1;
}

static int
clog_zero_fill(struct clog *c, int fd, uint64_t from, uint64_t to)
{
	static const uint8_t zeros[1 << 16];

	for (uint64_t off = from; off < to; off += sizeof(zeros)) {
		int rc = store_io_write_all(c->io, fd, zeros, SP_MIN(sizeof(zeros), to - off), off);

		if (rc != 0)
			return rc;
	}
	return 0;
}

int
clog__ck_add(struct clog *c, struct clog_seg *s, uint64_t zero_from)
{
	uint64_t in = atomic_load_relaxed(&s->buf_hi); /* the preparing thread's own */
	uint64_t start = s->start + in;
	uint8_t *dst = s->res->base + in;
	unsigned k = (unsigned)(in / c->ck_size);
	long page = sysconf(_SC_PAGESIZE);
	bool file = false;
	int why = ENOENT;
	int reused;
	int fd;
	int rc;

	if (in >= c->seg_size)
		return 0;
	/*
	 * The file's blocks under the chunk first: a full disk says ENOSPC
	 * here, a window ahead of the appends, which get the error only once
	 * they reach the end of what was prepared. Then real zeros over them
	 * (RocketMQ's warmMapedFile): fallocate leaves "unwritten" extents, and
	 * converting them made every group-commit fdatasync commit a journal
	 * transaction whose cost grew with the bytes synced. Synced here, off
	 * the appends' path. The zeros also put the pages in the page cache
	 * ahead of the flusher's write-back (docs/store.md).
	 */
	/*
	 * On a descriptor of its own: Linux reports a write-back error once per
	 * open file, and the flusher's sync of this segment must see its own
	 * (a sync here on the shared one could take the report from it, and the
	 * flusher would publish data that never reached the disk).
	 */
	fd = c->io->open(c->io->ctx, s->path, O_RDWR, 0);
	if (fd < 0)
		return fd;
	rc = c->io->allocate(c->io->ctx, fd, in + c->ck_size);
	if (rc == 0 && !c->no_warm) {
		rc = clog_zero_fill(c, fd, SP_MAX(in, zero_from), in + c->ck_size);
		if (rc == 0)
			rc = c->io->fdatasync(c->io->ctx, fd);
	}
	(void)c->io->close(c->io->ctx, fd);
	if (rc != 0)
		return rc;
	atomic_add_relaxed(&s->res->refs, 1);
	reused = clog_ck_reuse(c, start, dst);
	if (reused == 1) {
		file = true;
	} else if (reused == 2) {
		why = c->buf_dir != NULL ? EEXIST : ENOENT;
	} else if (c->buf_dir != NULL &&
		   (rc = clog_ck_map_file(c, start, dst, O_CREAT | O_EXCL)) == 0) {
		file = true;
	} else {
		why = c->buf_dir != NULL ? -rc : ENOENT;
		if (mmap(dst, c->ck_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
			rc = -errno;
			clog_res_plug(c, s->res, dst, c->ck_size);
			clog_res_put(c, s->res);
			return rc;
		}
	}
	/* Write-faulted now, not at the owner's first append into each page. */
	for (uint64_t off = 0; off < c->ck_size; off += CLOG_PREP_SLICE) {
		uint64_t len = SP_MIN((uint64_t)CLOG_PREP_SLICE, c->ck_size - off);

		if (madvise(dst + off, len, MADV_POPULATE_WRITE) != 0)
			for (uint64_t i = 0; i < len; i += (uint64_t)page)
				((volatile uint8_t *)dst)[off + i] = 0;
	}
	if (file) {
		atomic_fetch_or(&s->ck_file, 1ull << k);
	} else {
		atomic_fetch_or(&s->ck_anon, 1ull << k);
		clog_anon_get(c, start, why);
	}
	/* release: the chunk is mapped and faulted before the owner may append into it */
	atomic_store_release(&s->buf_hi, in + c->ck_size);
	return 0;
}

void
clog__buf_retire(struct clog *c, uint64_t flushed)
{
	uint64_t now = clk_mono_ns();
	struct clog_buf_grave *due = NULL;
	struct clog_buf_grave **pp;

	for (uint64_t s = clog_min(c); s < flushed; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);
		uint64_t lo, hi;
		uint8_t *base;

		if (seg == NULL || (base = atomic_load_relaxed(&seg->buf)) == NULL)
			continue;
		lo = atomic_load_relaxed(&seg->buf_lo);
		hi = atomic_load_acquire(&seg->buf_hi);
		while (lo < hi && s + lo + c->ck_size <= flushed) {
			struct clog_buf_grave *g = malloc(sizeof(*g));
			unsigned k = (unsigned)(lo / c->ck_size);

			if (g == NULL)
				return; /* retried on the next flush */
			*g = (struct clog_buf_grave){
				.res = seg->res,
				.addr = base + lo,
				.start = s + lo,
				.file = (atomic_load_relaxed(&seg->ck_file) >> k) & 1,
				.due_ns = now + (uint64_t)CLOG_UNMAP_GRACE_MS * 1000000};
			lo += c->ck_size;
			/* release: readers that see it read the file, written before this */
			atomic_store_release(&seg->buf_lo, lo);
			if ((atomic_fetch_and(&seg->ck_anon, ~(1ull << k)) >> k) & 1)
				clog_anon_put(c);
			clog_grave_push(c, g);
		}
	}
	/* Unlinked under the lock, released after it: reuse does not wait on the syscalls. */
	pthread_mutex_lock(&c->grave_mu);
	for (pp = &c->buf_graves; *pp != NULL;) {
		struct clog_buf_grave *g = *pp;

		if (g->due_ns <= now) {
			*pp = g->next;
			g->next = due;
			due = g;
		} else {
			pp = &g->next;
		}
	}
	pthread_mutex_unlock(&c->grave_mu);
	while (due != NULL) {
		struct clog_buf_grave *g = due;

		due = g->next;
		clog_ck_free(c, g->res, g->addr, g->start, g->file, false);
		free(g);
	}
}

void
clog__buf_reap(struct clog *c)
{
	uint64_t cur = atomic_load_acquire(&c->cur_start);

	/* Only this thread maps chunks: none can appear in a segment it releases. */
	for (uint64_t s = clog_min(c); s < cur; s += c->seg_size) {
		struct clog_seg *seg = clog_seg_at(c, s);

		if (seg == NULL || seg->res == NULL || s + c->seg_size > clog_flushed(c) ||
		    atomic_load_acquire(&seg->buf_lo) != atomic_load_relaxed(&seg->buf_hi))
			continue;
		/* A sealed segment with every chunk retired: readers use its file alone. */
		atomic_store_release(&seg->buf, NULL);
		clog_res_put(c, seg->res);
		seg->res = NULL;
	}
}

void
clog__buf_release(struct clog *c, struct clog_seg *s, bool keep_file)
{
	uint64_t lo, hi;

	if (s->res == NULL)
		return;
	lo = atomic_load_relaxed(&s->buf_lo);
	hi = atomic_load_relaxed(&s->buf_hi);
	for (; lo < hi; lo += c->ck_size) {
		unsigned k = (unsigned)(lo / c->ck_size);

		if ((atomic_fetch_and(&s->ck_anon, ~(1ull << k)) >> k) & 1)
			clog_anon_put(c);
		clog_ck_free(c, s->res, s->res->base + lo, s->start + lo,
			     (atomic_load_relaxed(&s->ck_file) >> k) & 1, keep_file);
	}
	atomic_store_relaxed(&s->buf, NULL);
	clog_res_put(c, s->res);
	s->res = NULL;
}

void
clog__buf_graves_free(struct clog *c)
{
	while (c->buf_graves != NULL) {
		struct clog_buf_grave *g = c->buf_graves;

		c->buf_graves = g->next;
		clog_ck_free(c, g->res, g->addr, g->start, g->file, false);
		free(g);
	}
}

/*
 * The buffer a crashed run left for @s, read-only: its chunk files mapped
 * where they were in a zero-filled view of the segment (the files of the
 * first design hold a whole segment: one chunk). old_lo..old_hi: the
 * contiguous run of them that reaches furthest, where the file's log can
 * have stopped.
 */
void
clog__old_buf_load(struct clog *c, struct clog_seg *s, const uint64_t *starts, size_t n)
{
	char path[PATH_MAX];
	uint8_t *view;

	if (c->old_buf_dir == NULL || n == 0)
		return;
	view = mmap(NULL, c->seg_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		    0);
	if (view == MAP_FAILED)
		return;
	s->old_lo = s->old_hi = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		uint64_t in;
		int fd;

		if (starts[i] < s->start || starts[i] >= s->start + c->seg_size)
			continue;
		in = starts[i] - s->start;
		clog__buf_path(c->old_buf_dir, starts[i], path, sizeof(path));
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && st.st_size > 0 &&
		    (uint64_t)st.st_size <= c->seg_size - in &&
		    mmap(view + in, (size_t)st.st_size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) !=
			    MAP_FAILED) {
			if (s->old_hi == in && s->old_hi > s->old_lo)
				s->old_hi = in + (uint64_t)st.st_size; /* sorted: extends the run */
			else {
				s->old_lo = in;
				s->old_hi = in + (uint64_t)st.st_size;
			}
		}
		close(fd);
	}
	if (s->old_hi > s->old_lo)
		s->old_buf = view;
	else
		munmap(view, c->seg_size);
}

void
clog__old_buf_drop(struct clog *c, struct clog_seg *s)
{
	if (s->old_buf != NULL)
		munmap((void *)s->old_buf, c->seg_size);
	s->old_buf = NULL;
}
