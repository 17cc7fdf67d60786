/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cq.h - ConsumeQueue: the index of one (topic, queueId).
 *
 * 20-byte big-endian units (int64 commit-log offset, int32 size, int64 tag
 * hash) as RocketMQ writes them (§6.3), unit i = logical offset i, in files
 * of units_per_file units (default 300,000) named by the 20-digit logical
 * byte offset of their first unit, under <root>/consumequeue/<topic>/<qid>/.
 *
 * Appends happen on the owning dataplane core: they write into a mapped,
 * pre-allocated file and never block. The next file is created by a
 * background thread (cq_prepare_next()) once the current one is three
 * quarters full; if it is still missing when needed, cq_append() returns
 * -EAGAIN and the store refuses the message before touching the log.
 *
 * Ownership: single writer (owning core) for cq_append(); readers on any
 * thread use cq_max()/cq_min() (acquire) and cq_get()/cq_search() between
 * them, without locks or waiting. cq_prepare_next(), cq_flush() and
 * cq_trim_phys() run on the store's background thread (one thread, or
 * serialized by the caller), concurrently with appends and reads: the files
 * trimming deletes (and file tables replaced) stay mapped for
 * CQ_UNMAP_GRACE_MS, longer than any reader holds them, and are released by
 * a later cq_trim_phys() or cq_close(). cq_open(), cq_close() and
 * cq_truncate_phys() need the queue to themselves.
 */
#ifndef SP_STORE_CQ_H
#define SP_STORE_CQ_H

#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/io.h"

#define CQ_UNIT_SIZE 20
#define CQ_UNITS_PER_FILE_DEFAULT 300000
/*
 * How long a file deleted by cq_trim_phys() (or a replaced file table) stays
 * mapped for readers that reached it before: as CLOG_UNMAP_GRACE_MS.
 */
#define CQ_UNMAP_GRACE_MS 10000
/*
 * Units a queue's write-behind ring holds (a power of two): 384 KiB of
 * memory per queue that took units, 16 ms at 1 M msg/s on one queue
 * (docs/store.md, "Page faults on the core").
 */
#define CQ_WB_UNITS 16384u

struct cq;

struct cq_unit {
	int64_t phys; /* global commit-log offset */
	uint32_t size;
	int64_t tag_hash;
};

/*
 * A unit of this size stands for a message the log lost (recovery found
 * later messages of the queue but not it, docs/store.md "Recovery"): no
 * record is that small. Its phys + CQ_LOST_SIZE is the phys of the next
 * message of the queue the log kept, which keeps units in log order; its
 * tag_hash is -1. store_get() answers -ENOENT for it.
 */
#define CQ_LOST_SIZE 1u

/**
 * cq_open() - open the queue stored in @dir, or a new one when @dir does not
 * exist (it is made with the queue's first file, not here).
 * Maps every file and finds the end as RocketMQ's recovery does: the first
 * unit with size <= 0 or offset < 0, scanning from up to three files before
 * the last file that has a valid first unit; stale units past the end are
 * zeroed. min is the first unit of the first file that is not a gap filler
 * (0, 0x7FFFFFFF, 0): a trim done by a previous run must be redone.
 * Leftover "*.tmp" files (a creation cut by a crash) are removed. A queue
 * keeps its files mapped but no descriptor open.
 *
 * A new queue has no file and takes units without one: its write-behind
 * ring holds them until the background side has made the file
 * (cq_prepare_next(), cq_flush()). An idle queue costs memory only: no
 * file, descriptor or mapping of its own.
 *
 * Context: control/startup thread, blocking; the queue is not shared yet.
 * Return: 0, -EINVAL bad arguments, a file of the wrong size or name, or a
 * missing file between two others, -errno.
 */
MUST_CHECK int cq_open(const struct store_io_ops *io, const char *dir, uint32_t units_per_file,
		       struct cq **out);

/* cq_open() of a queue known to have no directory: no syscall at all. */
MUST_CHECK int cq_open_new(const struct store_io_ops *io, const char *dir, uint32_t units_per_file,
			   struct cq **out);

/*
 * Unmap and close every file, those trimmed but still in their grace period
 * included (no flush: call cq_flush() first). Exclusive. NULL is a no-op.
 */
void cq_close(struct cq *q);

/**
 * cq_append() - write the unit for logical offset @qoff.
 *
 * Idempotent for recovery: @qoff < cq_max() with the same unit is a no-op
 * (returns 0), with a different unit -EEXIST; below cq_min() there is
 * nothing left to compare and it returns 0. @qoff > cq_max() is -EINVAL
 * (a gap) unless the queue is empty (min == max), in which case the queue
 * starts at @qoff: min = @qoff, max = @qoff + 1, and the units before it in
 * its file are gap fillers. A queue start writes those fillers into the
 * file itself: it returns -EAGAIN and asks cq_prepare_next() for the file
 * holding @qoff (a queue with no file may start anywhere; the first offset
 * asked fixes the first file), or for the file after the core's own while
 * that one lags behind max. A queue with files may start only in the file
 * holding max or the next one.
 *
 * @u must have phys >= 0 and 0 < size < 0x7FFFFFFF (other units read as the
 * end of the queue or as a filler after a restart).
 *
 * The unit goes into the queue's write-behind ring (anonymous memory, no
 * page fault once warm); cq_wb_drain() copies it into the file.
 *
 * Context: owning core, non-blocking (no syscall, no fault in steady state).
 * Return: 0, -EAGAIN the ring full (the drainer is CQ's ring size behind,
 * or the unit's file is not made yet), or a queue start whose file is not
 * prepared yet or that waits for an empty ring, -EINVAL, -EEXIST.
 */
MUST_CHECK int cq_append(struct cq *q, uint64_t qoff, const struct cq_unit *u);

/* Return: true when the unit at cq_max() can be appended now without -EAGAIN. Owning core. */
bool cq_can_append(const struct cq *q);

/* Return: true when the write-behind ring holds CQ_WB_UNITS undrained units. Owning core. */
bool cq_ring_full(const struct cq *q);

/*
 * Return: true when the background thread should call cq_prepare_next(): the
 * ring holds units past the last file, no file is waiting for the core and
 * its current one is at least 3/4 full, or a queue start asked for one. A
 * hint (relaxed loads). Any thread.
 */
bool cq_wants_next(const struct cq *q);

/**
 * cq_prepare_next() - make the files of every unit the ring holds, then
 * create, allocate and map the file after the core's current one (or reuse
 * it if it exists) and hand it to the owning core. For a core with no file,
 * the file holding max when the queue has files, else the one holding the
 * offset a queue start asked for. Does nothing more while a file is waiting
 * or the current one is less than 3/4 full.
 *
 * Context: background thread, blocking. Return: 0 (also when not needed), -errno.
 */
MUST_CHECK int cq_prepare_next(struct cq *q);

/*
 * Return: 0 and *@u for @qoff in [min, max); -ERANGE outside (also for a
 * unit trimmed meanwhile).
 * Context: any thread, non-blocking, no lock; concurrently with cq_append(),
 * cq_prepare_next(), cq_flush() and cq_trim_phys(), not with
 * cq_truncate_phys()/cq_close().
 */
MUST_CHECK int cq_get(const struct cq *q, uint64_t qoff, struct cq_unit *u);

/* Any thread, non-blocking, also during cq_trim_phys(). */
uint64_t cq_min(const struct cq *q); /* first valid logical offset */
uint64_t cq_max(const struct cq *q); /* next offset to write = entry count (acquire) */

/**
 * cq_truncate_phys() - drop every unit in [min, max) whose phys + size >
 * @phys_end (recovery: the log was cut there). The dropped units are zeroed
 * in place (cq_flush() makes that durable); files are kept for reuse.
 * Context: startup or owning core, with the queue to itself (no reader,
 * no append, no background call on it meanwhile but a drainer, whose lock
 * it takes: the ring is drained first).
 * Return: 0 or -errno.
 */
MUST_CHECK int cq_truncate_phys(struct cq *q, int64_t phys_end);

/*
 * cq_count_phys() - units in [min, max) whose phys is in [@lo, @hi).
 * Context: startup, with the queue to itself.
 */
uint64_t cq_count_phys(const struct cq *q, int64_t lo, int64_t hi);

/**
 * cq_trim_phys() - retention: advance min to the first unit with phys >=
 * @min_phys (max when none; min never moves back) and delete files wholly
 * below it, never the file holding max. min is kept in memory only.
 *
 * min is raised (release) before the files leave the table, and a deleted
 * file is unlinked at once but unmapped and closed only by a call at or
 * after @now_ms + CQ_UNMAP_GRACE_MS (or cq_close()), so readers that got
 * there first finish safely. Each call first releases what is due; a call
 * with @min_phys below the current min only does that. @now_ms is any
 * millisecond clock that does not go back (the store passes its service
 * time).
 *
 * Context: background thread, blocking; runs beside cq_append() and every
 * reader (cq_get(), cq_search(), cq_min(), cq_max()).
 * Return: 0 or -errno (unlink, directory sync, -ENOMEM: nothing deleted,
 * retried by the next call).
 */
MUST_CHECK int cq_trim_phys(struct cq *q, int64_t min_phys, int64_t now_ms);

/**
 * cq_search() - binary search of the first unit in [min, max) for which
 * @key_of(ctx, unit) >= @key (key_of is monotonic, e.g. the store timestamp
 * read from the log). Context: as cq_get().
 * Return: 0 with *@qoff (max when none), -errno from key_of, -ERANGE when
 * cq_trim_phys() overtook the search (retry).
 */
MUST_CHECK int cq_search(const struct cq *q, int64_t key,
			 int (*key_of)(void *ctx, const struct cq_unit *u, int64_t *out), void *ctx,
			 uint64_t *qoff);

/**
 * cq_wb_drain() - copy the units the owning core left in the write-behind
 * ring into their files, and let the core reuse their slots.
 * Context: any thread but the owning core (drainers take the queue's
 * wb_lock, one at a time); runs beside cq_append(), cq_prepare_next(),
 * cq_trim_phys() and cq_flush(). No I/O wait but may take page faults
 * (its own) and wait for another drainer. Return: units copied.
 */
uint64_t cq_wb_drain(struct cq *q);

/* Return: the ring holds no unit the files lack. Any thread (acquire loads). */
bool cq_drained(const struct cq *q);

/*
 * Return: the queue has nothing for the background side: drained, flushed,
 * no file wanted. Context: background thread (reads its own progress).
 */
bool cq_idle(const struct cq *q);

/**
 * cq_flush() - drain the ring (cq_wb_drain()), then fdatasync the files
 * holding units written (or zeroed) since the last successful call; units
 * below the cq_max() read at its start are durable when it returns 0.
 * Context: background thread, blocking; runs beside cq_append().
 * Return: 0 or -errno (the next call retries the same files).
 */
MUST_CHECK int cq_flush(struct cq *q);

#endif /* SP_STORE_CQ_H */
