/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - the message store: CommitLog shards, ConsumeQueues, IndexFiles,
 * checkpoint, recovery, flush, retention, behind one API.
 *
 * Threads (docs/architecture.md, Storage):
 *  - dataplane cores call store_put()/store_get*() for the queues of their
 *    shard: non-blocking, no allocation, no syscall;
 *  - one flusher thread per shard (SYNC_FLUSH: group commit as soon as data
 *    is written; ASYNC_FLUSH: every flushIntervalCommitLog ms);
 *  - one service thread: prepares segments and ConsumeQueue files before
 *    they are needed, flushes ConsumeQueues, writes the checkpoint, applies
 *    retention;
 *  - one indexer thread: builds the IndexFiles from the log.
 * With cfg.threads = false no thread is started and tests drive the same
 * work with store_service() and store_flush_all().
 *
 * Files under <root>: commitlog/<shard>/<20-digit offset>,
 * consumequeue/<topic>/<qid>/<20-digit offset>, index/<shard>/<time>,
 * checkpoint, abort (present while running: its presence at start means the
 * last run crashed and recovery scans the log), lock (flocked by the one
 * process that has the store open; it holds that process's pid).
 */
#ifndef SP_STORE_STORE_H
#define SP_STORE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/clog.h"
#include "store/cq.h"
#include "store/io.h"
#include "wire/record.h"

#define STORE_SHARDS_MAX 64
/* RocketMQ's delay-level topic: its ConsumeQueue files are smaller (store.c queue_units()) */
#define STORE_SCHED_TOPIC "SCHEDULE_TOPIC_XXXX"
/*
 * The delivery-time timers' topic (RocketMQ 5's name): a unit's tag code is
 * the record's STORE_TIMER_FIRE_PROP, the millisecond the timing wheel
 * fires it (its due time, or a roll before it), so the wheel is rebuilt
 * from the ConsumeQueue alone.
 */
#define STORE_TIMER_TOPIC "rmq_sys_wheel_timer"
#define STORE_TIMER_FIRE_PROP "__SP_TIMER_FIRE"
/*
 * RocketMQ's transaction topics. In the op topic a unit's tag code is the
 * half message's queue offset (the op record's body, a decimal number), so
 * the broker learns which halves are resolved from the ConsumeQueue alone.
 */
#define STORE_TX_HALF_TOPIC "RMQ_SYS_TRANS_HALF_TOPIC"
#define STORE_TX_OP_TOPIC "RMQ_SYS_TRANS_OP_HALF_TOPIC"

struct store_cfg {
	const struct store_io_ops *io; /* NULL: store_io_posix */
	const char *root;	       /* storePathRootDir */
	/* RocketMQ's path keys; NULL or "": under root (commitlog, consumequeue, index, ...) */
	const char *path_commitlog;  /* storePathCommitLog: <dir>/<shard>/<segments> */
	const char *path_cq;	     /* storePathConsumeQueue */
	const char *path_index;	     /* storePathIndex: <dir>/<shard>/<files> */
	const char *path_checkpoint; /* storeCheckpoint */
	const char *path_abort;	     /* abortFile */
	uint32_t shards;	     /* one per dataplane core */
	uint64_t seg_size;	     /* mapedFileSizeCommitLog */
	uint32_t cq_units;	     /* units per ConsumeQueue file */
	uint32_t idx_slots;
	uint32_t idx_entries;
	bool sync_flush;	      /* flushDiskType=SYNC_FLUSH */
	bool no_warm;		      /* warmMapedFileEnable=false: clog_cfg.no_warm */
	uint32_t flush_interval_ms;   /* flushIntervalCommitLog (ASYNC) and CQ/checkpoint period */
	uint32_t sync_timeout_ms;     /* syncFlushTimeout: SYNC_FLUSH ack deadline */
	uint32_t file_reserved_hours; /* fileReservedTime */
	int delete_when_hour;	      /* deleteWhen: hour of day (local) for age-based deletion */
	uint32_t
		disk_max_used_ratio; /* diskMaxUsedSpaceRatio, percent: expired segments go at any hour */
	uint32_t
		disk_clean_ratio; /* diskSpaceCleanForciblyRatio: the oldest goes, expired or not */
	uint32_t disk_warn_ratio; /* diskSpaceWarningLevelRatio: writes refused above it */
	bool clean_forcibly;	  /* cleanFileForciblyEnable */
	/*
	 * Keep what consumer groups have not read (store_set_keep()): a forced
	 * deletion that would take it refuses writes instead, unless
	 * delete_unconsumed (deleteUnconsumedWhenDiskFull). Until the first
	 * store_set_keep() of a shard everything in it is kept.
	 */
	bool keep_unconsumed;
	bool delete_unconsumed;
	struct wire_host store_host; /* STOREHOST written into records */
	bool threads;		     /* start flusher/service/indexer threads */
	/*
	 * Write-behind buffers as files in a new <buf_dir>/sprocket-XXXXXX/<shard>
	 * each run, recorded in <root>/bufdir (tmpfs: appends not yet written
	 * back outlive a crash of the process, and the flusher writes back
	 * every 10 ms instead of every 1 ms); NULL or "": anonymous memory.
	 */
	const char *buf_dir;
	/* storeBufferWindow: write-behind bytes mapped ahead of each shard's appends (clog_cfg) */
	uint64_t buf_window;
	/*
	 * Readers of records outside the store's threads (store_get(),
	 * store_get_phys(), store_search_time()...): a function that returns once
	 * every such call that began before it has returned and its record is
	 * no longer used (the broker: a QSBR grace period, as its cores read
	 * only inside their loop). Then a sealed segment's write-behind buffer
	 * is reused for a new segment as soon as it is retired, not
	 * CLOG_UNMAP_GRACE_MS later (clog_set_reader_sync()). NULL: the timed
	 * grace. Runs on the service thread and may block.
	 */
	void (*reader_sync)(void *arg);
	void *reader_sync_arg;
};

/* Fill @cfg with RocketMQ's defaults (1 GiB segments, 300,000-unit CQ files, ...). */
void store_cfg_default(struct store_cfg *cfg);

struct store;
struct store_queue;

/**
 * store_open() - open or create the store, recover, start the threads.
 *
 * After a crash (abort file present) every shard is scanned from the
 * checkpoint's safe offset, the torn tail is cut, and ConsumeQueue units
 * past the end are dropped and rebuilt from the log. A ConsumeQueue that
 * cannot be opened is deleted and rebuilt from a scan of the whole log.
 * First of all it takes <root>/lock: a store open in another process (or
 * in this one) is refused before anything of it is read or written, and
 * so is a store written with another shard count than @cfg->shards.
 *
 * Context: startup, blocking. Return: 0, -EBUSY (another process holds the
 * store), -EINVAL (another shard count, or bad @cfg), or -errno; every
 * refusal is logged with the reason and what to do.
 */
MUST_CHECK int store_open(const struct store_cfg *cfg, struct store **out);

/**
 * store_close() - stop the threads, flush everything, write a clean
 * checkpoint, remove the abort file, release <root>/lock.
 *
 * The store is closed whatever the result: it is not MUST_CHECK because
 * nothing can be retried, but a daemon's exit status should say it.
 * Context: control thread, blocking. Return: 0 (a clean shutdown), or the
 * first error (logged; the abort file stays and the next start recovers).
 */
int store_close(struct store *s);

/**
 * store_queue_get() - the queue (topic, qid), created if needed, owned by
 * @shard's core from now on.
 * Context: control thread, blocking (creates files). Return: 0, -EINVAL, -errno.
 */
MUST_CHECK int store_queue_get(struct store *s, const char *topic, uint32_t qid, uint32_t shard,
			       struct store_queue **out);

/**
 * store_queue_retire() - a deleted topic: its queues leave the registry
 * (store_queue_get() makes new, empty ones for that name) and their
 * ConsumeQueue files are deleted; the queue objects stay valid, mapped,
 * until store_close(), for a reader or a parked PULL that still holds one.
 * Its records stay in the CommitLog until retention deletes their segments.
 * Context: control thread, after no core can reach the queues any more
 * (the topic was unpublished and an RCU grace period passed).
 * Return: queues retired, -EINVAL bad name.
 */
long store_queue_retire(struct store *s, const char *topic);

/* The distinct topic names that have queues, into @out. Context: control thread.
 * Return: how many, -ENOSPC more than @max. */
long store_queue_topics(struct store *s, char (*out)[WIRE_TOPIC_MAX + 1], size_t max);

struct store_put_res {
	int64_t phys;	 /* PHYSICALOFFSET (global) */
	int64_t qoff;	 /* queue offset */
	uint64_t ticket; /* durability ticket: see store_durable() */
	uint32_t shard;
	uint32_t size;
};

/**
 * store_put() - append @m to @q's shard and index it in @q.
 * Fills queue id, queue offset, store time and host, physical offset.
 *
 * Context: the dataplane core owning @q's shard, non-blocking.
 * Return: record size; -EAGAIN (a file is not prepared yet: answer busy,
 * retry), -EMSGSIZE, -EINVAL, or the shard's fence error (-EIO, -ENOSPC).
 */
MUST_CHECK long store_put(struct store *s, struct store_queue *q, struct wire_msg *m,
			  struct store_put_res *res);

/**
 * store_durable() - is the put with @ticket durable as the flush mode requires?
 * Context: any thread, non-blocking.
 * Return: 1 yes (ASYNC_FLUSH: always), 0 not yet, or the fence error.
 */
int store_durable(const struct store *s, uint32_t shard, uint64_t ticket);

/**
 * store_ack_state() - store_durable() with syncFlushTimeout applied.
 * @put_ns, @now_ns: CLOCK_MONOTONIC (or TSC-converted) times of the put and of now.
 *
 * Context: any thread, non-blocking (the owning core polls it).
 * Return: 1 acknowledge (SEND_OK), 0 keep polling, -ETIMEDOUT answer
 * FLUSH_DISK_TIMEOUT (the record is stored, not yet durable), or the
 * shard's fence error (the record may be lost: answer an error).
 */
int store_ack_state(const struct store *s, uint32_t shard, uint64_t ticket, uint64_t put_ns,
		    uint64_t now_ns);

/* store_put() calls that answered -EAGAIN (the broker's SYSTEM_BUSY), by reason. */
struct store_busy_counts {
	uint64_t cq_file; /* the queue's next ConsumeQueue file not prepared yet */
	uint64_t cq_ring; /* the queue's ConsumeQueue write-behind ring full (drainer behind) */
	uint64_t clog;	  /* the CommitLog's write-behind window or next segment not ready */
};

/*
 * store_busy() - how many store_put() calls of @shard answered -EAGAIN so
 * far, by reason, into *@out.
 * Context: any thread (relaxed). Return: 0, -EINVAL no such shard.
 */
int store_busy(const struct store *s, uint32_t shard, struct store_busy_counts *out);

/**
 * store_get() - the record at logical offset @qoff of @q, in place, for
 * delivery: its BODYCRC is verified, its PHYSICALOFFSET and size must be
 * the unit's.
 * Context: any thread, non-blocking (a damaged record is counted with a
 * relaxed atomic add, for store_damage(), and logged later by the service
 * thread: never here).
 * Return: record size with *@rec and *@unit; -ERANGE outside
 * [min, visible max); -ENOENT a message recovery lost (its span of the
 * log was blanked or stepped over, docs/store.md "Recovery"): skip it;
 * -EBADMSG a damaged record (CRC, header, size): skip it too; other
 * -errno from the ConsumeQueue.
 */
MUST_CHECK long store_get(const struct store *s, const struct store_queue *q, uint64_t qoff,
			  const uint8_t **rec, struct cq_unit *unit);

/*
 * The record at global @phys (offset msgId lookups). Same returns as
 * store_get(); -ENOENT also for a BLANK there.
 */
MUST_CHECK long store_get_phys(const struct store *s, int64_t phys, const uint8_t **rec);

/*
 * store_scan_past() - a sequential reader of @shard's log (a scan at start)
 * met a record it cannot read at local @off: where it goes on. The end of a
 * span recovery stepped over; else the damage is counted as a damaged read
 * (store_damage()) and the scan goes on at the next segment (the rest of
 * this one is not read). Context: any thread after store_open(), non-blocking.
 */
uint64_t store_scan_past(const struct store *s, uint32_t shard, uint64_t off);

/*
 * store_set_keep() - the lowest local offset of @shard's log a consumer group
 * still has to read (UINT64_MAX: none), and who (for the log: "group G,
 * topic T queue Q, N behind"). Retention's forced deletion keeps it
 * (store_cfg.keep_unconsumed). Context: any thread (a mutex; once a second).
 */
void store_set_keep(struct store *s, uint32_t shard, uint64_t floor, const char *who);
/*
 * store_disk_full() - are writes refused for disk space (above
 * diskSpaceWarningLevelRatio, or a forced deletion kept unread messages)?
 * The reason in @why. Context: any thread.
 */
bool store_disk_full(const struct store *s, char *why, size_t why_len);
/* Segments a forced deletion took while a group had not read them (deleteUnconsumedWhenDiskFull). */
uint64_t store_unread_deleted(const struct store *s);

/* Damage met in a shard's log (docs/store.md "Damage"). */
struct store_damage {
	uint64_t bad_reads; /* reads for delivery that met a damaged record (skipped) */
	uint64_t last_bad;  /* local offset of the last of them (valid when bad_reads > 0) */
	uint32_t spans;	    /* damaged spans recovery found at open (stepped over or blanked) */
	uint64_t lost;	    /* ConsumeQueue units pointing into them, found at open */
	uint64_t verified;  /* the log was checked record by record (CRC) up to here at open */
};

/* Context: after store_open(), any thread (relaxed reads). Return: 0, -EINVAL no such shard. */
MUST_CHECK int store_damage(const struct store *s, uint32_t shard, struct store_damage *out);

/* What recovery did at store_open(), per shard (docs/store.md "Recovery"). */
struct store_recovery {
	const struct clog_recovery *clog; /* the CommitLog's */
	uint64_t cq_cut;		  /* ConsumeQueue units past the log's end, dropped */
	uint64_t cq_lost;   /* units pointing into spans the log lost (cq_filled's included) */
	uint64_t cq_filled; /* queue offsets missing from the log, written as lost units */
};

/* Context: after store_open(), any thread. Return: 0, -EINVAL no such shard. */
MUST_CHECK int store_recovery(const struct store *s, uint32_t shard, struct store_recovery *out);

uint64_t store_queue_min(const struct store *s, const struct store_queue *q);
/* Next offset a consumer may read up to: in SYNC_FLUSH only flushed data. */
uint64_t store_queue_max(const struct store *s, const struct store_queue *q);

/*
 * A mark for whoever waits off the core for @q's next unit (the remoting
 * thread's held pulls, docs/isolation.md "Long polls"): the owning core sets
 * it with store_queue_wait() when it hands back a pull that found nothing,
 * and takes it with store_queue_wait_take() when the queue may have grown
 * (an append, a flush that made units readable), telling the waiter then.
 * The store never reads it: it is the owner's scratch, hence the const.
 * Context: the queue's owning core only.
 */
/* Return: whether it was not marked yet. */
bool store_queue_wait(const struct store_queue *q);
/* Return: whether it was marked (and clear it). */
bool store_queue_wait_take(const struct store_queue *q);

/* First offset whose store time >= @ms (max when none). Return: 0 or -errno. */
MUST_CHECK int store_search_time(const struct store *s, const struct store_queue *q, int64_t ms,
				 uint64_t *qoff);
/* Store time of the message at @qoff. Return: 0, -ENOENT not in the queue, -errno. */
MUST_CHECK int store_queue_time(const struct store *s, const struct store_queue *q, uint64_t qoff,
				int64_t *ms);
/* Store time of the first message. Return: 0, -ENOENT empty, -errno. */
MUST_CHECK int store_earliest_time(const struct store *s, const struct store_queue *q, int64_t *ms);

/**
 * store_query_key() - messages of @topic indexed under @key (a KEYS value or
 * a UNIQ_KEY) stored in [@begin_ms, @end_ms], newest first; each candidate is
 * re-checked against the record (hash collisions).
 * Context: control thread. Return: number found or -errno.
 */
long store_query_key(struct store *s, const char *topic, const char *key, int64_t begin_ms,
		     int64_t end_ms, int64_t *phys, size_t max);

/**
 * store_copy_phys() - copy the record at global @phys into @buf when it fits
 * (reads guarded as store_query_key()'s, so any thread may call it).
 * Return: the record's length (copied only when <= @cap), or store_get_phys()'s -errno.
 */
long store_copy_phys(struct store *s, int64_t phys, uint8_t *buf, size_t cap);

/* One round of the service thread's work (tests call it without threads). */
MUST_CHECK int store_service(struct store *s, int64_t now_ms);
/*
 * Copy every queue's write-behind ring into its files, as every round of
 * store_service() does first. Context: service thread, or a test without
 * threads. Return: units copied.
 */
uint64_t store_drain_queues(struct store *s);
/**
 * store_retain() - apply retention now: at the deleteWhen hour delete sealed
 * segments older than fileReservedTime, and at any hour the oldest one while
 * the disk is fuller than diskMaxUsedSpaceRatio; trim ConsumeQueues and
 * IndexFiles to the new minimum. store_service() calls it every 10 s.
 * Context: service thread (or a test without threads). Return: 0 or -errno.
 */
MUST_CHECK int store_retain(struct store *s, int64_t now_ms);
/* One round of the indexer. Return: records indexed or -errno. */
long store_index_round(struct store *s);
/* Flush every shard now. Return: 0 or the first error. */
MUST_CHECK int store_flush_all(struct store *s);

/**
 * store_repl_read() - for a slave: whole records of @shard from local @off,
 * at most @max bytes (clog_read_span()).
 * Context: any thread, non-blocking (the master's owning core).
 * Return: bytes at *@out (0: nothing new), -ERANGE, -EBADMSG.
 */
MUST_CHECK long store_repl_read(const struct store *s, uint32_t shard, uint64_t off, uint32_t max,
				const uint8_t **out);

/**
 * store_repl_write() - on a slave: the master's bytes of @shard at local
 * @off (the slave's end of log), checked record by record
 * (clog_append_raw()), indexed in their ConsumeQueues and published.
 * @last (may be NULL): where the last record of the copy starts.
 * Context: the shard's writer on a slave (its replication session); may
 * block briefly (the queue registry lock, new ConsumeQueue files).
 * Return: @len; -ERANGE @off is not the end; -EAGAIN next segment not ready;
 * -EBADMSG/-EILSEQ/-EPROTO a bad record (nothing written); a dispatch or
 * fence error (the bytes are written and published).
 */
MUST_CHECK long store_repl_write(struct store *s, uint32_t shard, uint64_t off, const uint8_t *data,
				 size_t len, uint64_t *last);

/**
 * store_repl_append(), store_repl_publish() - store_repl_write() in two
 * steps, so that a slave can acknowledge the bytes (they are in its log)
 * before it indexes and publishes them: append checks and copies
 * (clog_append_raw(); returns as it does), publish writes the ConsumeQueue
 * units of the @len bytes just appended at @off and publishes them. Each
 * append is published before the next one.
 * Context: as store_repl_write(). Return (publish): 0, a dispatch or fence
 * error (the bytes are published anyway), -EINVAL not the last append.
 */
MUST_CHECK long store_repl_append(struct store *s, uint32_t shard, uint64_t off,
				  const uint8_t *data, size_t len, uint64_t *last);
MUST_CHECK int store_repl_publish(struct store *s, uint32_t shard, uint64_t off, size_t len);

/**
 * store_repl_rec_id(), store_repl_last() - clog_rec_id() and clog_last_rec()
 * of @shard for a thread that is not a core (a slave's replication session),
 * guarded against the reuse of a retired write-behind buffer.
 * Context: any non-core thread. Return: as clog_rec_id(), clog_last_rec().
 */
MUST_CHECK int store_repl_rec_id(struct store *s, uint32_t shard, uint64_t off, uint32_t *size,
				 uint32_t *hash);
MUST_CHECK int store_repl_last(struct store *s, uint32_t shard, uint64_t *off);

/**
 * store_truncate_mark() - cut @shard's log at the last record boundary at
 * or below local @to at the next store_open() (a slave whose log runs past
 * its master's). Recorded in <root>/truncate (atomically), removed once done.
 * Context: a control or background thread; blocks (file I/O).
 * Return: 0 or -errno.
 */
MUST_CHECK int store_truncate_mark(struct store *s, uint32_t shard, uint64_t to);

struct clog *store_clog(const struct store *s, uint32_t shard);
/*
 * store_queue_keep_writable() - @q's puts are taken while the disk is full
 * (store_disk_full()): small records that let retention free space, as a
 * transaction's op record that resolves the half holding a segment back.
 * Context: control, before the owning core writes to it.
 */
void store_queue_keep_writable(struct store_queue *q);

struct cq *store_queue_cq(const struct store_queue *q);

#endif /* SP_STORE_STORE_H */
