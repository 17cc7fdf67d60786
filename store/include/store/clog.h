/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clog.h - one CommitLog shard: the append-only log of one dataplane core.
 *
 * Segments are files of seg_size bytes under <root>/commitlog/<shard>/,
 * named by the 20-digit shard-local offset of their first byte, holding
 * RocketMQ records (§5.1) back to back and a BLANK filler at the end. A
 * record's PHYSICALOFFSET is global: clog_phys(shard, local) puts the shard
 * in the high bits, so an offset msgId names its shard.
 *
 * DESIGN
 * The owning core appends into a write-behind buffer that a background
 * thread mapped and pre-faulted a window ahead (clog_buf.c), over a segment
 * it created and allocated (fallocate) before it was needed, so an append
 * is a memcpy and an atomic store: no syscall, no page fault, no lock.
 * When the window or the next segment is not ready the append returns
 * -EAGAIN (the store answers busy) instead of waiting.
 *
 * Durability is published through two offsets: `written` (owner, release)
 * and `flushed` (flusher, release, after fdatasync returned 0). Group commit
 * falls out: an appender's ticket is its record's end offset and it is
 * durable once flushed >= ticket; one fdatasync covers every append before
 * it. A failed fdatasync sets `err`, fences the shard (appends fail with the
 * error) and is retried by the flusher after re-dirtying the unflushed range
 * (after EIO Linux may mark the failed pages clean, so a bare retry could
 * "succeed" without writing them); a success clears the fence.
 *
 * Ownership:
 *   owner core: clog_append(), clog_commit().
 *   flusher thread: clog_flush(), clog_write_back().
 *   preparing thread: clog_prepare_next().
 *   background thread: clog_trim().
 *   any thread: clog_written(), clog_flushed(), clog_err(), clog_read().
 *   startup/close: clog_open(), clog_recover(), clog_close().
 */
#ifndef SP_STORE_CLOG_H
#define SP_STORE_CLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/io.h"
#include "wire/record.h"

#define CLOG_SHARD_SHIFT 48
#define CLOG_LOCAL_MASK ((1ull << CLOG_SHARD_SHIFT) - 1)
#define CLOG_SHARD_MAX 32767 /* PHYSICALOFFSET stays a non-negative Java long */
#define CLOG_SEG_SLOTS 4096  /* segments reachable at once (4 TiB of 1 GiB segments) */
#define CLOG_SEG_MIN (64u << 10)
#define CLOG_WINDOW_DEFAULT (64ull << 20)

static inline int64_t
clog_phys(uint32_t shard, uint64_t local)
{
	return (int64_t)(((uint64_t)shard << CLOG_SHARD_SHIFT) | (local & CLOG_LOCAL_MASK));
}

static inline uint32_t
clog_phys_shard(int64_t phys)
{
	return (uint32_t)((uint64_t)phys >> CLOG_SHARD_SHIFT);
}

static inline uint64_t
clog_phys_local(int64_t phys)
{
	return (uint64_t)phys & CLOG_LOCAL_MASK;
}

struct clog_cfg {
	const struct store_io_ops *io;
	const char *dir; /* <root>/commitlog/<shard> */
	uint32_t shard;
	uint64_t seg_size; /* mapedFileSizeCommitLog */
	bool sync_flush;   /* SYNC_FLUSH: readers see only flushed data */
	/*
	 * Write-behind buffers as files here (on tmpfs they outlive a crash of
	 * the process); NULL or "": anonymous memory. One directory per shard
	 * and run, created here if missing.
	 */
	const char *buf_dir;
	/*
	 * Bytes of write-behind buffer kept mapped and pre-faulted ahead of the
	 * appends (storeBufferWindow; 0: CLOG_WINDOW_DEFAULT; at least two
	 * chunks): with what one flush interval appends, the buffer memory of a
	 * shard, whatever the segment size.
	 */
	uint64_t buf_window;
	/*
	 * The operator asked for buffers as files (storeBufferDir set): while
	 * one is anonymous memory instead (buf_dir NULL: its directory could not
	 * be made; or a file could not be), clog_bufs_degraded() says so.
	 */
	bool buf_wanted;
	/*
	 * The previous run's buf_dir, or NULL: clog_recover() takes from its
	 * files what the segment files lack. The caller removes it afterwards.
	 */
	const char *old_buf_dir;
	/*
	 * With cut: clog_recover() ends the log at the last record boundary at
	 * or below cut_at when the log runs past it (a slave whose log runs
	 * past its master's, docs/replication.md).
	 */
	bool cut;
	uint64_t cut_at;
	/*
	 * A new segment is fallocated only, not also zero-filled and synced
	 * (warmMapedFileEnable=false): half the bytes written to disk, but its
	 * first fdatasyncs convert unwritten extents (docs/store.md).
	 */
	bool no_warm;
	/*
	 * The log was checked record by record (BODYCRC) up to this local
	 * offset at an earlier start (the checkpoint's "verified"):
	 * clog_recover() checks every record from here, also after a clean
	 * stop. -1: not known (the last CLOG_TRUST_SEGS segments are checked).
	 */
	int64_t verified;
};

struct clog;

/**
 * clog_open() - open the shard's segments (creating the directory and a
 * first segment if there are none). Call clog_recover() next.
 *
 * A segment file shorter than the segment size is extended with zeros
 * (clog_recover() then scans it from its start); one missing between two
 * others is recreated blank (a BLANK at its start: readers and later
 * recoveries pass it). A half-created last segment (never held a record) is
 * removed. Files named <segment>.dropped-* (kept aside by an earlier
 * recovery) are skipped. Each says so at warning level (docs/store.md,
 * "Recovery").
 *
 * Context: startup, blocking. Return: 0, -EINVAL (bad config, a name that
 * is not a segment start, a segment larger than the segment size: the log
 * says what to do), -errno.
 */
MUST_CHECK int clog_open(const struct clog_cfg *cfg, struct clog **out);
void clog_close(struct clog *c);

/**
 * clog_recover() - find the end of the log, recover what lies past damage,
 * and cut anything after the end.
 * @scan_from: local offset known to start a record (0, or a checkpoint's
 *             flushed offset); records before it are trusted.
 * @trusted_end: when >= 0 (clean shutdown), the end, taken once checked:
 *             no segment was short or missing, the records of the last
 *             CLOG_TRUST_SEGS segments before it chain up to it exactly
 *             (size, magic, PHYSICALOFFSET) and its last record's CRC is
 *             right. Otherwise the log is scanned from the first of those
 *             segments (or the first short or missing one).
 *
 * Scanning verifies magic, size, CRC and PHYSICALOFFSET of every record and
 * follows BLANKs to the next segment. Where a segment's file lacks a record
 * and the buffer a crashed run left in old_buf_dir holds the same bytes up
 * to it and a valid record there, the record is copied into the file first
 * (appends acknowledged in ASYNC_FLUSH mode and not yet written back).
 * At damage (no valid record where one should start):
 *  - when a later segment starts with a valid record, the log goes on: the
 *    damaged segment gets a BLANK at the damage (its rest is blank) and the
 *    scan goes on at the next segment;
 *  - otherwise the damage is the end.
 * Either way the non-zero bytes taken out are first written to
 * <segment>.dropped-<offset> (never deleted) and the valid records among
 * them counted. Later segments past the end are deleted when all zero,
 * else renamed to <segment>.dropped-<start>. Everything is said at warning
 * level with counts and reported by clog_recovery(). The old buffers are
 * unmapped once the end is durable (the caller removes their files). Sets
 * written and flushed to the end.
 *
 * Context: startup, blocking. Return: 0, -EUCLEAN a clean checkpoint's end
 * below the first segment (the log says what to do), -ENOENT the log had
 * no segment but @scan_from or @trusted_end says it held records (the
 * caller says what to do), -errno.
 */
MUST_CHECK int clog_recover(struct clog *c, uint64_t scan_from, int64_t trusted_end);

/* Segments before a clean checkpoint's end whose records clog_recover() chains up. */
#define CLOG_TRUST_SEGS 3

/* A span [lo, hi) of local offsets whose records recovery lost. */
struct clog_span {
	uint64_t lo;
	uint64_t hi;
};

/*
 * What clog_recover() found and did. Every figure is also in a warning
 * line; docs/store.md ("Recovery") lists them.
 */
struct clog_recovery {
	uint64_t end;		/* where the log ends */
	uint64_t scan_from;	/* where the scan began; UINT64_MAX: a clean end was taken */
	bool trust_refused;	/* a clean checkpoint's end did not pass its checks */
	bool empty_dir;		/* no segment was found: clog_open() created the first */
	uint32_t segs_short;	/* segment files shorter than the segment size (extended) */
	uint64_t bytes_short;	/* bytes those files lacked */
	uint32_t segs_missing;	/* segments missing between others (recreated blank) */
	uint32_t spans_blanked; /* damaged spans made blank up to their segment's end */
	uint32_t
		spans_stepped; /* damaged spans stepped over: a valid record follows in the segment */
	uint64_t bytes_stepped; /* bytes in them (left in place, read as lost) */
	uint64_t recs_dropped;	/* valid records taken out of the log (kept aside) */
	uint64_t bytes_dropped; /* non-zero bytes taken out of the log (kept aside) */
	uint32_t files_aside;	/* .dropped-* files written or segments renamed to one */
	uint64_t recs_after;	/* valid records kept in the log after the first damage */
	uint64_t
		lost_below; /* bytes below the checkpoint's end (clean) or durable offset (crash) gone */
	uint64_t taken; /* bytes taken from the crashed run's write-behind buffers */
	/* bytes cut as marked (store_truncate_mark(): a slave that forked from its master) */
	uint64_t cut;
	/* spans whose records are lost (blanked or recreated blank), in log order */
	const struct clog_span *lost;
	uint32_t n_lost;
};

/* Context: startup, after clog_recover(); the pointers live as @c. */
const struct clog_recovery *clog_recovery(const struct clog *c);

/**
 * clog_lost_skip() - where the log goes on when local @off lies in a span
 * recovery lost (clog_recovery()'s lost spans: blanked, recreated or
 * stepped over): the span's end; else @off. Sequential readers use it to
 * pass a stepped-over span, which holds damaged bytes, not a BLANK.
 * Context: any thread after clog_recover() (the spans are immutable),
 * non-blocking.
 */
uint64_t clog_lost_skip(const struct clog *c, uint64_t off);

/**
 * clog_step_over_late() - damage at local @off that recovery did not see (it
 * lay below a clean checkpoint's checked end), met by a reader at start:
 * make it a lost span as recovery would (up to the next valid record in its
 * segment, else the segment's end), count it and log where, and set *@next
 * to where the log goes on. Context: store_open() only, before any other
 * thread reads the spans. Return: 0, -EEXIST inside a known span, -ERANGE
 * no segment there, -ENOMEM.
 */
int clog_step_over_late(struct clog *c, uint64_t off, uint64_t *next);

/**
 * clog_bufs_outlive_crash() - every hot write-behind buffer is a file in
 * buf_dir: appends not yet written back survive a crash of the process.
 *
 * Context: any thread; a hint (relaxed).
 */
bool clog_bufs_outlive_crash(const struct clog *c);

/*
 * clog_bufs_degraded() - buffers as files were asked for (buf_wanted) and
 * a hot one is anonymous memory now: an ASYNC_FLUSH append is not safe from
 * a crash of the process until written back, so its acknowledgement waits
 * for that (store_durable()). Context: any thread.
 */
bool clog_bufs_degraded(const struct clog *c);
/* Times a shard went from file buffers to an anonymous one (episodes). Context: any thread. */
uint64_t clog_bufs_degraded_episodes(const struct clog *c);

/**
 * clog_append() - encode @m at the tail; sets m->phys_offset.
 * @end: set to the local offset just past the record (the durability ticket).
 *
 * Context: owning core, non-blocking (no syscall, no fault, no allocation).
 * Return: record length; -EAGAIN next segment not prepared yet; -EMSGSIZE
 * record larger than a segment; -EINVAL bad record fields; the fence error
 * (-EIO, -ENOSPC, ...) while the shard is fenced.
 */
MUST_CHECK long clog_append(struct clog *c, struct wire_msg *m, uint64_t *end);

/**
 * clog_commit() - publish every record appended so far (readers, flusher).
 * Split from clog_append() so the store can write the ConsumeQueue unit
 * first: then every committed record has its unit, which makes the flushed
 * offset seen before a ConsumeQueue flush a safe recovery start.
 * Context: owning core, non-blocking.
 */
void clog_commit(struct clog *c);

/**
 * clog_append_raw() - copy @len bytes of another shard's log (a master's,
 * docs/replication.md) to the tail, at local offset @off == the tail: whole
 * records, each checked (magic, size, BODYCRC, PHYSICALOFFSET == where it
 * lands), optionally ending with a BLANK's 8-byte header that fills the
 * segment to its end (the next copy then starts the next segment). The
 * bytes land exactly where they were on the master. Publish with
 * clog_commit() once they are dispatched. @last (may be NULL) is set to
 * where the last record (or BLANK) of the copy starts.
 *
 * Context: owning thread (a slave's replication session), non-blocking.
 * Return: @len; -ERANGE @off is not the tail; -EAGAIN next segment not
 * prepared yet; -EBADMSG/-EILSEQ/-EPROTO a bad record (nothing copied);
 * the fence error.
 */
MUST_CHECK long clog_append_raw(struct clog *c, uint64_t off, const uint8_t *data, size_t len,
				uint64_t *last);

/**
 * clog_appended() - the bytes of the last clog_append_raw() in place: @len
 * bytes at local @off, where that call put them (not yet committed).
 * Context: owning thread, before its next append. Return: NULL when
 * [@off, @off + @len) is not in the current segment.
 */
const uint8_t *clog_appended(const struct clog *c, uint64_t off, size_t len);

/**
 * clog_read_span() - whole records from local offset @off up to the
 * written end (not only flushed: a slave may hold what the master has not
 * synced yet), within one segment, at most @max bytes unless the first
 * record alone is larger; a BLANK contributes its 8-byte header and ends
 * the span (the next span starts at the next segment).
 *
 * Context: any thread, non-blocking; the pointer lives as clog_read()'s.
 * Return: bytes (0: nothing past @off), -ERANGE @off outside
 * [min, written], -EBADMSG no record at @off.
 */
MUST_CHECK long clog_read_span(const struct clog *c, uint64_t off, uint32_t max,
			       const uint8_t **out);

/* Bytes of a record's start that identify it (clog_rec_id()); the REPL op's prev_hash. */
#define CLOG_REC_ID_BYTES 64u

/**
 * clog_rec_id() - what identifies the record (or BLANK) at local @off: its
 * TOTALSIZE and the CRC-32 of its first CLOG_REC_ID_BYTES bytes. A master
 * and its slave compare them before the master sends what follows it.
 * Context: any thread, non-blocking. Return: 0, -ERANGE, -EBADMSG.
 */
MUST_CHECK int clog_rec_id(const struct clog *c, uint64_t off, uint32_t *size, uint32_t *hash);

/* clog_rec_id()'s hash of a record of TOTALSIZE @total at @p, @avail bytes of it at hand. */
uint32_t clog_rec_hash(const uint8_t *p, uint64_t total, uint64_t avail);

/**
 * clog_last_rec() - where the last record (or BLANK) before the written end
 * starts (walks its segment from the start).
 * Context: the shard's writer or startup. Return: 0, -ENOENT empty log, -EBADMSG.
 */
MUST_CHECK int clog_last_rec(const struct clog *c, uint64_t *off);

/* Return: true when the background thread should call clog_prepare_next(). */
bool clog_wants_next(const struct clog *c);

/**
 * clog_prepare_next() - keep the write-behind buffer mapped and pre-faulted
 * a window ahead of the appends (clog_cfg.buf_window), the segment files
 * zero-filled under it; create and allocate the segment after the current
 * one and publish it for the owner.
 * Context: the preparing thread (one per shard at a time), blocking.
 * Return: 0 (also when not needed), -errno (appends that need what it could
 * not prepare return it until a later call succeeds).
 */
MUST_CHECK int clog_prepare_next(struct clog *c);

/**
 * clog_set_reader_sync() - let clog_prepare_next() reuse a retired
 * write-behind buffer as soon as @fn(@arg) has returned true after its
 * retirement, instead of CLOG_UNMAP_GRACE_MS later. @fn returns true only
 * once every clog_read() that began before the call has returned and its
 * record is no longer used (the broker: a QSBR grace period of its cores,
 * plus the store's indexer), and false when it gave up waiting (a reader
 * still in, e.g. the indexer in an fdatasync): the buffer then stays
 * retired and the segment gets new memory. New memory costs the preparing
 * thread a page zeroing (and, in a VM, a host fault) per 4 KiB; a reused
 * buffer costs a memset of warm pages.
 * Context: setup, before the background threads start. @fn runs on the
 * preparing thread, may block briefly, and must not call into @c.
 */
void clog_set_reader_sync(struct clog *c, bool (*fn)(void *arg), void *arg);

/**
 * clog_flush() - make everything written so far durable (one fdatasync per
 * segment touched) and publish it as flushed.
 * Context: background (flusher) thread, blocking.
 * Return: 0, or -errno (flushed not advanced; the shard is fenced until a
 * later clog_flush() succeeds).
 */
MUST_CHECK int clog_flush(struct clog *c);

/**
 * clog_write_back() - copy appended data from the write-behind buffers into
 * the files (pwrite, no fdatasync), so a process crash loses at most what
 * was appended since the last call even in ASYNC_FLUSH mode.
 * Context: the flusher thread, blocking. Return: 0 or -errno (retried by clog_flush()).
 */
MUST_CHECK int clog_write_back(struct clog *c);
/*
 * clog_written_back() - the offset below which appends are in the segment
 * files (written back or flushed): safe from a crash of the process, not
 * yet from one of the OS. Context: any thread.
 */
uint64_t clog_written_back(const struct clog *c);

uint64_t clog_written(const struct clog *c); /* local end of appended data (acquire) */
/* storeTimestamp of the last record appended; INT64_MAX: none since open. Context: owner. */
int64_t clog_last_store_ms(const struct clog *c);
uint64_t clog_flushed(const struct clog *c); /* local end of durable data (acquire) */
uint64_t clog_min(const struct clog *c);     /* first local offset still stored */
uint64_t clog_syncs(const struct clog *c);   /* flush rounds that synced data (stats) */
/* The flush rounds' time, write-back and fdatasync (relaxed reads; common/phist.h). */
struct phist;
const struct phist *clog_flush_hist(const struct clog *c);
uint64_t clog_bufs_reused(const struct clog *c); /* write-behind buffers reused (stats) */
int clog_err(const struct clog *c);		 /* 0, or the error fencing appends */
int clog_prep_err(const struct clog *c);	 /* 0, or why the next segment could not be made */
uint32_t clog_shard(const struct clog *c);
uint64_t clog_seg_size(const struct clog *c);

/**
 * clog_read() - the record at local offset @off, in place.
 * Only data below the visible end is returned: the flushed offset in
 * SYNC_FLUSH mode (RocketMQ #8239), the written offset otherwise.
 *
 * Context: any thread; the pointer stays valid until clog_trim() removes
 * the segment plus its grace period.
 * Return: record length and *@rec, -ENODATA a BLANK (*@next_off set to the
 * next segment start), -ERANGE outside [min, visible end), -ENOENT zeros
 * where a record should start (a span recovery blanked: the record is
 * lost), -EBADMSG/-EPROTO/-EILSEQ corrupt record.
 */
MUST_CHECK long clog_read(const struct clog *c, uint64_t off, const uint8_t **rec,
			  uint64_t *next_off);

/**
 * clog_read_checked() - clog_read() for delivery: the record's BODYCRC is
 * verified too, and its PHYSICALOFFSET must be @off. A CRC of the body
 * only, as RocketMQ's: damage to the topic or properties that leaves the
 * header decodable is not seen (docs/store.md, "Damage").
 *
 * Context: any thread, non-blocking (no syscall, no allocation).
 * Return: as clog_read(); -EILSEQ the body CRC is wrong, -EBADMSG the
 * record names another offset.
 */
MUST_CHECK long clog_read_checked(const struct clog *c, uint64_t off, const uint8_t **rec,
				  uint64_t *next_off);

/**
 * clog_trim() - retention: delete the oldest sealed segments whose newest
 * record was stored before @expire_before_ms, and with @force also the
 * oldest sealed segment whatever its age (disk above
 * diskSpaceCleanForciblyRatio), unless its end is past @keep_from (local:
 * records a consumer group has not read yet): then *@blocked (when not NULL)
 * is set and it stays.
 * Never the current or the prepared segment. Raises clog_min() first, then
 * unlinks; the mapping is released CLOG_UNMAP_GRACE_MS later so readers
 * that checked clog_min() before the raise stay safe.
 * @min_out: set to the new clog_min() (global offsets below it are gone).
 *
 * Context: background thread, blocking. Return: segments deleted or -errno.
 */
long clog_trim(struct clog *c, int64_t expire_before_ms, bool force, int64_t now_ms,
	       uint64_t keep_from, bool *blocked, uint64_t *min_out);

#define CLOG_UNMAP_GRACE_MS 10000

#endif /* SP_STORE_CLOG_H */
