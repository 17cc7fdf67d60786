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
#include "common/log.h"
#include "store/clog.h"

#define CLOG_TAG "store.clog"
/* <segment>.dropped-<20-digit offset>: bytes recovery took out of the log, kept aside */
#define CLOG_ASIDE_SUFFIX ".dropped-"
/* A segment is prepared in slices of this many bytes: see clog_set_prep_yield(). */
#define CLOG_PREP_SLICE (8u << 20)

struct clog_seg {
	/* immutable after creation */
	uint64_t start;
	int fd;
	uint8_t *map; /* the file, shared: recovery and reads of written-back data */
	/*
	 * Write-behind buffer: pre-faulted memory the owner appends into while
	 * the segment is hot, a file in buf_dir (tmpfs: it outlives a crash of
	 * the process) or anonymous. The flusher pwrite()s it to the file
	 * before each fdatasync and, once the sealed segment is durable,
	 * clears it (release) and frees it after a grace period. Readers use
	 * it while it is set, the file mapping after.
	 */
	_Atomic(uint8_t *) buf;
	bool buf_file; /* buf is a file in buf_dir (set with buf, before it is published) */
	/* open and recovery only: the buffer a crashed run left in buf_dir, read-only */
	const uint8_t *old_buf;
	bool old_buf_ok; /* its bytes before the first record taken matched the file */
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
	char *dir;
	char *buf_dir;	   /* NULL: anonymous buffers only */
	char *old_buf_dir; /* the previous run's buffers (recovery), or NULL */
	uint32_t shard;
	uint64_t seg_size;
	bool sync_flush;

	/* owner only */
	struct clog_seg *cur;
	uint8_t *cur_buf; /* cur's write-behind buffer */
	uint64_t wpos;
	int64_t cur_last_ms;

	/* owner writes (release), any thread reads (acquire) */
	_Atomic uint64_t written;
	_Atomic uint64_t cur_start;

	/* flusher writes (release), any thread reads (acquire) */
	_Atomic uint64_t flushed;
	_Atomic uint64_t syncs; /* successful clog_flush() rounds that synced (stats, relaxed) */
	_Atomic int err;

	/* background publishes (release), owner takes and clears */
	_Atomic(struct clog_seg *) next;
	_Atomic int prep_err;
	/* background only: called between slices of a segment's preparation */
	void (*prep_yield)(void *arg);
	void *prep_yield_arg;

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

/* <dir>/<20-digit start>: the name of a segment's file or of its buffer's. */
void clog__buf_path(const char *dir, uint64_t start, char *path, size_t n);
/* Unmap the buffer a crashed run left for @s (recovery). */
void clog__old_buf_drop(struct clog *c, struct clog_seg *s);
void clog__seg_free(struct clog *c, struct clog_seg *s);
/* Create, allocate, map and pre-fault a new segment, its buffer too. Blocking. */
int clog__seg_create(struct clog *c, uint64_t start, struct clog_seg **out);
/* fdatasync every segment holding a byte of [@from, @to). Blocking. */
int clog__sync_range(struct clog *c, uint64_t from, uint64_t to);
/* A pre-faulted write-behind buffer for the hot segment at @start. */
int clog__buf_alloc(struct clog *c, uint64_t start, uint8_t **out, bool *file);

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

/* Recovery's warnings: log_warn() without its rate limit (clog_recover.c, DESIGN). */
#define CLOG_REC_WARN(...)                                                                         \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_WARN))                                                     \
			log_emit(LOG_LVL_WARN, CLOG_TAG, __VA_ARGS__);                             \
	} while (0)

#endif /* SP_STORE_CLOG_PRIV_H */
