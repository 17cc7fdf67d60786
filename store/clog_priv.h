/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clog_priv.h - what clog.c (segments, append, flush, trim) and
 * clog_recover.c (opening and recovering the segments) share: the shard's
 * structs and the helpers both call. Private to store/.
 */
#ifndef SP_STORE_CLOG_PRIV_H
#define SP_STORE_CLOG_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/phist.h"
#include "common/log.h"
#include "store/clog.h"

#define CLOG_TAG "store.clog"
/* <segment>.dropped-<20-digit offset>: bytes recovery took out of the log, kept aside */
#define CLOG_ASIDE_SUFFIX ".dropped-"
/* A chunk is zeroed and pre-faulted in slices of this many bytes. */
#define CLOG_PREP_SLICE (8u << 20)
/* Write-behind chunks are about this size (clog__buf_geometry()). */
#define CLOG_CK_TARGET (16u << 20)

struct clog_res;

struct clog_seg {
	/* immutable after creation */
	uint64_t start;
	int fd;
	uint8_t *map; /* the file, shared: recovery and reads of written-back data */
	/*
	 * Write-behind buffer (clog_buf.c): a reservation of seg_size bytes of
	 * address space, set at creation, cleared (release) once every chunk
	 * of the sealed segment is retired. Chunks of ck_size bytes of
	 * pre-faulted memory, files in buf_dir (tmpfs: they outlive a crash of
	 * the process) or anonymous, are mapped into it in order: [buf_lo,
	 * buf_hi) holds them. The preparing thread maps chunks ahead of the
	 * owner's appends and raises buf_hi (release); the owner appends only
	 * below buf_hi. The flusher pwrite()s the buffer to the file and, once
	 * a chunk is durable, raises buf_lo past it (release) and lists it for
	 * reuse after a grace period. Readers use the buffer at offsets at or
	 * above buf_lo, the file mapping below.
	 */
	_Atomic(uint8_t *) buf;
	struct clog_res *res;	  /* buf's reservation (the preparing thread releases it) */
	_Atomic uint64_t buf_lo;  /* in-segment offset (flusher writes) */
	_Atomic uint64_t buf_hi;  /* in-segment offset (preparing thread writes) */
	_Atomic uint64_t ck_file; /* bit k: chunk k is a file in buf_dir */
	_Atomic uint64_t ck_anon; /* bit k: chunk k is anonymous memory, counted in anon_bufs */
	/* open and recovery only: the buffer a crashed run left in buf_dir, read-only */
	const uint8_t *old_buf;	 /* seg_size bytes: its chunk files where they were, else zeros */
	uint64_t old_lo, old_hi; /* the contiguous run of its chunks that reaches furthest */
	bool old_buf_ok;	 /* its bytes before the first record taken matched the file */
	/* open and recovery only: recreated blank by clog_open() (it was missing) */
	bool recreated;
	/* owner writes when it seals the segment, trim reads */
	_Atomic int64_t last_ms;
	/* graveyard link and due time (trim only) */
	struct clog_seg *grave_next;
	int64_t unmap_due_ms;
	char path[];
};

struct clog {
	/* immutable after open */
	const struct store_io_ops *io;
	bool cut;
	uint64_t cut_at;
	bool no_warm;
	uint64_t ck_size; /* write-behind chunk: divides seg_size, at most 64 per segment */
	uint64_t window;  /* write-behind bytes kept mapped ahead of the appends */
	char *dir;
	char *buf_dir;	   /* NULL: anonymous buffers only */
	char *old_buf_dir; /* the previous run's buffers (recovery), or NULL */
	uint32_t shard;
	uint64_t seg_size;
	bool sync_flush;

	/* owner only */
	struct clog_seg *cur;
	uint8_t *cur_buf; /* cur's write-behind buffer */
	uint64_t cur_hi;  /* cur's buf_hi as last loaded */
	uint64_t wpos;
	int64_t cur_last_ms;

	/* owner writes (release), any thread reads (acquire) */
	_Atomic uint64_t written;
	_Atomic uint64_t cur_start;

	/* flusher writes (release), any thread reads (acquire) */
	_Atomic uint64_t flushed;
	_Atomic uint64_t syncs; /* successful clog_flush() rounds that synced (stats, relaxed) */
	struct phist
		flush_lat; /* those rounds' write-back + fdatasync time (clog_flush's caller) */
	_Atomic int err;

	/* background publishes (release), owner takes and clears */
	_Atomic(struct clog_seg *) next;
	_Atomic int prep_err;

	/* trim writes (release), readers check (acquire) */
	_Atomic uint64_t min;

	/* hot buffers in anonymous memory (relaxed: a hint for the flusher's cadence) */
	_Atomic int anon_bufs;
	bool buf_wanted;		    /* storeBufferDir was set (clog_cfg) */
	_Atomic uint64_t degraded_episodes; /* anon_bufs went from 0 to 1 with buf_wanted */

	/* flusher only */
	int64_t logged_err_off;
	uint64_t wb;		 /* written back to the files (pwrite), maybe not yet synced */
	_Atomic uint64_t wb_pub; /* wb for other threads (clog_written_back()) */

	/*
	 * Retired write-behind buffers, newest first: the flusher adds them and
	 * frees them after their grace period, the preparing thread takes one
	 * to reuse (clog_buf_reuse()). Under grave_mu.
	 */
	pthread_mutex_t grave_mu;
	struct clog_buf_grave *buf_graves;
	/* setup only: see clog_set_reader_sync() */
	bool (*reader_sync)(void *arg);
	void *reader_sync_arg;
	/* preparing thread: buffers reused (stats, relaxed) */
	_Atomic uint64_t bufs_reused;

	/* trim only */
	struct clog_seg *graveyard;

	/* open and recovery only (clog_recover.c) */
	uint64_t suspect_from; /* first segment found short or missing; UINT64_MAX: none */
	int64_t verified;      /* clog_cfg.verified */
	struct clog_recovery rep;
	struct clog_span *lost; /* rep.lost, malloc'd */
	uint32_t lost_cap;

	/* a segment is published here (release) before its offsets are readable */
	_Atomic(struct clog_seg *) segs[CLOG_SEG_SLOTS];
};

static inline unsigned
clog_slot(const struct clog *c, uint64_t off)
{
	return (unsigned)((off / c->seg_size) % CLOG_SEG_SLOTS);
}

static inline struct clog_seg *
clog_seg_at(const struct clog *c, uint64_t off)
{
	uint64_t start = off - off % c->seg_size;
	struct clog_seg *s = atomic_load_acquire(&c->segs[clog_slot(c, off)]);

	return s != NULL && s->start == start ? s : NULL;
}

/* clog_buf.c: write-behind buffers (see its DESIGN) */
/* <dir>/<20-digit start>: the name of a segment's file or of a buffer chunk's. */
void clog__buf_path(const char *dir, uint64_t start, char *path, size_t n);
/* Set ck_size from seg_size, and window (at least two chunks). Open only. */
void clog__buf_geometry(struct clog *c, uint64_t window);
/* Give @s a reservation, nothing mapped yet: buf_lo = buf_hi = @from. Return: 0, -errno. */
int clog__res_new(struct clog *c, struct clog_seg *s, uint64_t from);
/*
 * Map the next chunk of @s at buf_hi (its file range zero-filled from
 * @zero_from on and synced first) and publish it. Preparing thread, or
 * startup. Return: 0, -errno.
 */
int clog__ck_add(struct clog *c, struct clog_seg *s, uint64_t zero_from);
/* Retire the chunks below @flushed and free those past their grace. Flusher. */
void clog__buf_retire(struct clog *c, uint64_t flushed);
/* Release the reservations of sealed segments whose chunks are all retired. Preparing thread. */
void clog__buf_reap(struct clog *c);
/* Free @s's buffer; leave the files of its chunks with @keep_file. */
void clog__buf_release(struct clog *c, struct clog_seg *s, bool keep_file);
/* Free every retired chunk. Close only. */
void clog__buf_graves_free(struct clog *c);
/* Map the chunks a crashed run left for @s (@starts: its buffer files, sorted). */
void clog__old_buf_load(struct clog *c, struct clog_seg *s, const uint64_t *starts, size_t n);
/* Unmap the buffer a crashed run left for @s (recovery). */
void clog__old_buf_drop(struct clog *c, struct clog_seg *s);
void clog__seg_free(struct clog *c, struct clog_seg *s);
/* Create, allocate and map a new segment, its reservation too (no chunk). Blocking. */
int clog__seg_create(struct clog *c, uint64_t start, struct clog_seg **out);
/* fdatasync every segment holding a byte of [@from, @to). Blocking. */
int clog__sync_range(struct clog *c, uint64_t from, uint64_t to);

/* The bytes of @s at in-segment offset @in: its buffer at or above buf_lo, else its file. */
static inline const uint8_t *
clog__base(const struct clog_seg *s, uint64_t in)
{
	/* acquire: pairs with the releases of clog__res_new() and clog__buf_retire() */
	const uint8_t *b = atomic_load_acquire(&s->buf);

	if (b != NULL && in >= atomic_load_acquire(&s->buf_lo))
		return b;
	return s->map;
}

/* A segment struct for @start, its path set, nothing opened. */
struct clog_seg *clog__seg_new(const struct clog *c, uint64_t start);

/*
 * clog_load.c, at open: map the segments at @starts (sorted, @n of
 * them), extending short ones, recreating missing ones blank, removing a
 * half-created last one; c->cur is the last. Return: 0 or -errno (logged,
 * with what to do).
 */
int clog__load(struct clog *c, const uint64_t *starts, size_t n);

/* clog_load.c: a span whose records recovery lost, for clog_recovery(). Return: 0, -ENOMEM. */
int clog__lost_add(struct clog *c, uint64_t lo, uint64_t hi);
/* The same at index @at of the spans (they stay in log order: the caller's). */
int clog__lost_insert(struct clog *c, uint32_t at, uint64_t lo, uint64_t hi);

/* Recovery's warnings: log_warn() without its rate limit (clog_recover.c, DESIGN). */
#define CLOG_REC_WARN(...)                                                                         \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_WARN))                                                     \
			log_emit(LOG_LVL_WARN, CLOG_TAG, __VA_ARGS__);                             \
	} while (0)

#endif /* SP_STORE_CLOG_PRIV_H */
