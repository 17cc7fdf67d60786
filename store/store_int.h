/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_int.h - the store's state (struct store, its shards and queues) and
 * what store.c and the files split from it lend each other: queues.c,
 * ckpt.c, dispatch.c, lookup.c, service.c. Not for the store's other files
 * (clog.c, cq.c, ...), which see a store through store/store.h and
 * store_priv.h.
 */
#ifndef SP_STORE_STORE_INT_H
#define SP_STORE_STORE_INT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bytes_priv.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "common/log.h"
#include "store/idx.h"
#include "store/store.h"
#include "store_priv.h"

#define STORE_TAG "store"
#define CKPT_MAGIC 0x53504B43u /* "SPKC" */
#define CKPT_VERSION 2	       /* 1: without verified */
#define CKPT_HDR 16
#define CKPT_PER_SHARD 32   /* version 1: 24 */
#define QMAP_BUCKETS 4096   /* at open */
#define STORE_WB_FILE_MS 10 /* ASYNC write-back period when the buffers are files */

struct store_queue {
	/* immutable after creation */
	char topic[WIRE_TOPIC_MAX + 1];
	uint8_t topic_len;
	uint32_t qid;
	struct cq *cq;
	struct store_queue *hnext; /* hash chain (registry mutex) */
	struct store_queue *lnext; /* list of all queues (registry mutex) */
	/*
	 * The background side's lists of queues with work (wake.c): on_dl is
	 * set while the queue is on the drainer's stack or list, on_sl on the
	 * service's; the links belong to whoever set the flag.
	 */
	_Atomic uint8_t on_dl;
	_Atomic uint8_t on_sl;
	struct store_queue *dl_next;
	struct store_queue *sl_next;
	bool retired; /* under the registry mutex: the service's list drops it */
	/* control sets before handing the queue to the owning core */
	_Atomic uint32_t shard;
	/* written while the disk is full (store_queue_keep_writable()); relaxed */
	_Atomic bool full_ok;
	/* owner writes, stats read relaxed */
	_Atomic uint64_t cq_errors;
	/* owning core only: someone off the core waits for the next unit (store_queue_wait()) */
	bool waited;
};

struct store_shard {
	struct store *s;
	uint32_t id;
	struct clog *clog;
	struct idx *idx;
	/* indexer writes, service reads (relaxed: a checkpoint may lag behind) */
	_Atomic uint64_t idx_pos;
	pthread_t flusher;
	bool flusher_started;
	/* startup only: what recovery did to the ConsumeQueues (store_recovery()) */
	uint64_t cq_cut;
	uint64_t cq_lost;
	uint64_t cq_filled;
	/* immutable after open: the log was verified up to here (checkpoint's "verified") */
	uint64_t verified;
	/* the shard's owner adds (relaxed), anyone reads: store_put() refusals, store_busy() */
	_Atomic uint64_t busy_cq;   /* the queue's next ConsumeQueue file not ready */
	_Atomic uint64_t busy_ring; /* the queue's ConsumeQueue write-behind ring full */
	_Atomic uint64_t busy_clog; /* the CommitLog's window or next segment not ready */
};

struct ckpt_shard {
	uint64_t end;
	uint64_t cq_safe;
	uint64_t indexed;
	int64_t verified; /* -1: not known (a version 1 checkpoint) */
};

/*
 * Damage met by readers of one shard (docs/store.md, "Damage").
 * Ownership: any reader (a dataplane core, the remoting or control
 * threads) adds to bad_reads and sets last_bad, relaxed; the service
 * thread reads them and alone writes logged_*, which say what it logged.
 */
struct store_dmg {
	_Atomic uint64_t bad_reads;
	_Atomic uint64_t last_bad;
	uint64_t logged_reads; /* service thread only */
	uint64_t logged_seg;   /* service thread only: segment of the last range logged */
	bool logged_any;       /* service thread only */
};

struct store {
	/* immutable after open */
	struct store_cfg cfg;
	const struct store_io_ops *io;
	char root[2048];
	char abort_path[2048 + 8];
	char ckpt_path[2048 + 16];
	char cut_path[2048 + 16]; /* <root>/truncate: store_truncate_mark() */
	/* storePathCommitLog, storePathConsumeQueue, storePathIndex (default under root) */
	char clog_dir[2048];
	char cq_dir[2048];
	char idx_dir[2048];
	/* write-behind buffer dirs (docs/store.md): the record, this run's, the last run's */
	char bufdir_path[2048 + 16];
	char buf_run[1024];
	char buf_old[1024];
	/* <root>/lock and <buf_run>/owner, flocked for the store's life (store/owner.c) */
	int lock_fd;
	int buf_lock_fd;
	struct store_shard shard[STORE_SHARDS_MAX];
	/* one per shard, allocated at open: written through a const store by readers */
	struct store_dmg *dmg;

	/* registry: control and background threads, under qlock */
	pthread_mutex_t qlock;
	/* buckets: a power of two, doubled when it holds two queues a bucket (queues.c) */
	struct store_queue **qmap;
	uint32_t qmap_mask;
	struct store_queue *queues;
	size_t n_queues;
	/* deleted topics' queues: out of the registry, kept (mapped) until close */
	struct store_queue *retired;
	/* store__open_queues() is done: a queue not in the registry has no directory */
	bool queues_opened;
	/*
	 * Queues that took units, pushed by whoever appended (wake.c): the
	 * drainer's and the service's stacks, each taken whole by its thread
	 * onto a list of its own. An idle queue is on neither: no thread walks
	 * every queue.
	 */
	struct store_queue *_Atomic dl_stack;
	struct store_queue *_Atomic sl_stack;
	struct store_queue *dl_list; /* drainer thread only */
	struct store_queue *sl_list; /* service thread (or exclusive), under qlock */
	size_t sl_len;
	/* the flush pass's queues, taken from sl_list at its start (service thread) */
	struct store_queue **pass_v;
	size_t pass_n;
	size_t pass_i;
	size_t pass_cap;

	/* service thread only */
	int64_t last_flush_ms;
	/*
	 * A ConsumeQueue flush pass in progress (service thread only): with
	 * thousands of queues one pass is thousands of fdatasyncs, so it runs in
	 * slices between the rounds that prepare the next files, and the
	 * checkpoint is written when the pass ends.
	 */
	bool pass_active;
	struct ckpt_shard pass_ck[STORE_SHARDS_MAX];
	int64_t last_retention_ms;
	int64_t last_resync_ms;
	bool svc_worked; /* the last store_service() prepared a file or ran a flush slice */

	/*
	 * Disk space (store_retain()): what groups have not read, per shard
	 * (store_set_keep(), any thread, under keep_mu); writes refused while
	 * disk_full (service thread sets it, store_put() loads it relaxed).
	 */
	pthread_mutex_t keep_mu;
	uint64_t keep_floor[STORE_SHARDS_MAX];
	char keep_who[STORE_SHARDS_MAX][160];
	char disk_full_why[384]; /* under keep_mu */
	_Atomic uint32_t disk_full;
	_Atomic uint64_t unread_deleted;

	/* readers of records the reader_sync hook does not cover: see store__bg_read_enter() */
	_Atomic uint64_t bg_epoch;
	_Atomic uint32_t bg_readers[2];

	/* threads */
	_Atomic bool stop;
	pthread_t service;
	pthread_t prep; /* CommitLog buffers and segments (store_prepare_logs()) */
	bool prep_started;
	pthread_t indexer;
	pthread_t drainer; /* ConsumeQueue write-behind rings into their files */
	bool service_started;
	bool indexer_started;
	bool drainer_started;
};

/* store.c */
void store__free(struct store *s);
void store__dmg_report(struct store *s);
/* queues.c */
struct store_queue *store__qmap_find(struct store *s, const char *topic, size_t len, uint32_t qid);
int store__qmap_init(struct store *s);
uint32_t store__queue_units(const struct store *s, const char *topic, size_t len);
int store__queue_get_locked(struct store *s, const char *topic, size_t len, uint32_t qid,
			    uint32_t shard, struct store_queue **out);
/* wake.c */
void store__queue_wake(struct store *s, struct store_queue *q);
uint64_t store__drain_round(struct store *s);
void store__sl_take(struct store *s);
void store__sl_prune(struct store *s);
int store__pass_begin(struct store *s);
/* ckpt.c */
int store__ckpt_write(struct store *s, bool clean, const struct ckpt_shard *cs);
uint32_t store__ckpt_shards(struct store *s);
int store__ckpt_read(struct store *s, bool *clean, struct ckpt_shard *cs);
/* dispatch.c */
int store__flush_queues(struct store *s);
long store__next_record(const struct clog *c, uint64_t *off, uint64_t end, struct wire_msg *m);
long store__next_record_open(struct clog *c, uint64_t *off, uint64_t end, struct wire_msg *m);
int64_t store__unit_tag_hash(const struct wire_msg *m);
bool store__rec_is_dispatched(const struct wire_msg *m);
int store__dispatch(struct store *s, uint32_t shard, const struct wire_msg *m, int64_t phys,
		    uint32_t size, uint64_t *filled, struct store_queue **damaged);
int store__redispatch(struct store *s, uint32_t shard, uint64_t from, bool fill,
		      struct store_queue **damaged);
int store__rm_rf(const char *path);
int store__open_queues(struct store *s, bool *rebuild);
int store__queue_reset_locked(struct store *s, struct store_queue *q);
bool store__queue_head_ok(struct store *s, struct store_queue *q);
int store__open_abort_file(struct store *s, bool *existed);
bool store__log_is_new(struct store *s, uint32_t shards);
void store__bufdirs_prepare(struct store *s);
int store__bufdirs_commit(struct store *s);
bool store__clog_moved_away(const struct store *s);
bool store__path_set(char *dst, size_t cap, const char *given, const char *root, const char *leaf);
int store__cut_marks_read(struct store *s, int64_t *cut_at);
void store__recovery_count_lost(struct store *s);
void store__recovery_report(const struct store *s);
/* service.c */
void *store__flusher_main(void *arg);
void *store__service_main(void *arg);
void *store__drainer_main(void *arg);
void *store__prep_main(void *arg);
unsigned store__bg_read_enter(struct store *s);
void store__bg_read_exit(struct store *s, unsigned e);
bool store__reader_sync(void *arg);
void *store__indexer_main(void *arg);

#endif /* SP_STORE_STORE_INT_H */
