// SPDX-License-Identifier: Apache-2.0
/*
 * service.c - the store's background threads (store_int.h): the flusher of
 * each shard, the service thread (ConsumeQueue flush passes, checkpoint,
 * retention and disk space), the log preparer, the ConsumeQueue drainer and
 * the indexer, and the epoch that keeps background readers safe from
 * retention.
 */
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
#include "store_int.h"

/* ---- background threads ---- */

int
store_flush_all(struct store *s)
{
	int first = 0;

	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		int rc = clog_flush(s->shard[i].clog);

		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}

/*
 * Used space as RocketMQ computes it ((total - free) / total, Java's
 * File.getFreeSpace() counting blocks reserved for root as free). Counting
 * them as used (f_bavail) read 76% on a disk df showed 37% full, and the
 * store then deleted segments holding acknowledged messages.
 */
static double
disk_used_ratio(const char *path)
{
	struct statvfs v;

	if (statvfs(path, &v) != 0 || v.f_blocks == 0)
		return 0;
	return 1.0 - (double)v.f_bfree / (double)v.f_blocks;
}

void
store_set_keep(struct store *s, uint32_t shard, uint64_t floor, const char *who)
{
	if (shard >= s->cfg.shards)
		return;
	pthread_mutex_lock(&s->keep_mu);
	s->keep_floor[shard] = floor;
	snprintf(s->keep_who[shard], sizeof(s->keep_who[shard]), "%s", who ? who : "");
	pthread_mutex_unlock(&s->keep_mu);
}

bool
store_disk_full(const struct store *s, char *why, size_t why_len)
{
	bool full = atomic_load_relaxed(&s->disk_full) != 0;

	if (full && why_len) {
		pthread_mutex_lock((pthread_mutex_t *)&s->keep_mu);
		snprintf(why, why_len, "%s", s->disk_full_why);
		pthread_mutex_unlock((pthread_mutex_t *)&s->keep_mu);
	}
	return full;
}

uint64_t
store_unread_deleted(const struct store *s)
{
	return atomic_load_relaxed(&s->unread_deleted);
}

/* Writes refused for disk space from now (@why), or taken again (@why NULL). Service thread. */
static void
disk_full_set(struct store *s, const char *why)
{
	bool was = atomic_load_relaxed(&s->disk_full) != 0;

	if (why == NULL) {
		if (was) {
			atomic_store_relaxed(&s->disk_full, 0);
			log_info(STORE_TAG, "disk space: writes are taken again");
		}
		return;
	}
	pthread_mutex_lock(&s->keep_mu);
	if (!was || strcmp(s->disk_full_why, why) != 0) {
		snprintf(s->disk_full_why, sizeof(s->disk_full_why), "%s", why);
		log_err(STORE_TAG, "writes refused: %s", why);
	}
	pthread_mutex_unlock(&s->keep_mu);
	atomic_store_relaxed(&s->disk_full, 1);
}

/*
 * Retention, with RocketMQ's keys and their meaning: segments older than
 * fileReservedTime go at deleteWhen, or at any hour while the disk is fuller
 * than diskMaxUsedSpaceRatio; above diskSpaceCleanForciblyRatio (with
 * cleanFileForciblyEnable) the oldest goes whatever its age; above
 * diskSpaceWarningLevelRatio writes are refused. What sprocket adds: a
 * forced deletion never takes messages a consumer group has not read
 * (store_set_keep()); the store refuses writes instead, saying which group,
 * unless deleteUnconsumedWhenDiskFull, and then it says what it took.
 */
int
store_retain(struct store *s, int64_t now_ms)
{
	int64_t keep_ms = (int64_t)s->cfg.file_reserved_hours * 3600 * 1000;
	double used = disk_used_ratio(s->clog_dir) * 100.0;
	bool spacefull = used > (double)s->cfg.disk_max_used_ratio;
	bool clean_now = s->cfg.clean_forcibly && used > (double)s->cfg.disk_clean_ratio;
	char why[384] = "";
	time_t now = (time_t)(now_ms / 1000);
	struct tm tm;
	bool due;

	localtime_r(&now, &tm);
	due = tm.tm_hour == s->cfg.delete_when_hour || spacefull;
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		uint64_t min, before = clog_min(s->shard[i].clog), floor;
		char who[sizeof(s->keep_who[0])];
		bool blocked = false;
		long n;
		int64_t min_phys;
		int rc;

		pthread_mutex_lock(&s->keep_mu);
		floor = s->keep_floor[i];
		snprintf(who, sizeof(who), "%s", s->keep_who[i]);
		pthread_mutex_unlock(&s->keep_mu);
		/* Called even when nothing is due: it also frees mappings past their grace. */
		n = clog_trim(s->shard[i].clog, due ? now_ms - keep_ms : INT64_MIN, clean_now,
			      now_ms, s->cfg.delete_unconsumed ? UINT64_MAX : floor, &blocked,
			      &min);
		if (blocked && why[0] == '\0')
			snprintf(why, sizeof(why),
				 "the disk is %.0f%% full (diskSpaceCleanForciblyRatio %u%%) and "
				 "the "
				 "oldest segment of shard %u holds messages not read yet by %s; "
				 "consume "
				 "them, free space, or set deleteUnconsumedWhenDiskFull=true",
				 used, s->cfg.disk_clean_ratio, i, who);
		if (n > 0 && clean_now && s->cfg.delete_unconsumed && min > floor && before < min) {
			atomic_add_relaxed(&s->unread_deleted, 1);
			log_err(STORE_TAG,
				"shard %u: disk %.0f%% full (diskSpaceCleanForciblyRatio %u%%): "
				"deleted log offsets %" PRIu64 "..%" PRIu64
				" with messages not read yet by %s (deleteUnconsumedWhenDiskFull)",
				i, used, s->cfg.disk_clean_ratio, before, min, who);
		}
		if (n < 0)
			continue;
		min_phys = clog_phys(i, min);
		pthread_mutex_lock(&s->qlock);
		for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
			if (atomic_load_relaxed(&q->shard) != i)
				continue;
			rc = cq_trim_phys(q->cq, min_phys, now_ms);
			if (rc != 0)
				log_err(STORE_TAG, "queue %s:%u: trim failed: %s", q->topic, q->qid,
					strerror(-rc));
		}
		pthread_mutex_unlock(&s->qlock);
		rc = idx_trim_phys(s->shard[i].idx, min_phys);
		if (rc != 0)
			log_err(STORE_TAG, "shard %u: index trim failed: %s", i, strerror(-rc));
	}
	if (used > (double)s->cfg.disk_warn_ratio && s->cfg.disk_warn_ratio > 0)
		snprintf(why, sizeof(why),
			 "the disk is %.0f%% full, above diskSpaceWarningLevelRatio %u%%", used,
			 s->cfg.disk_warn_ratio);
	disk_full_set(s, why[0] ? why : NULL);
	return 0;
}

uint64_t
store_drain_queues(struct store *s)
{
	uint64_t n = 0;

	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
		/* The files the ring's units need, as the service makes them; a failure: a short drain. */
		if (cq_prepare_next(q->cq) != 0)
			log_err_ratelimited(STORE_TAG, "queue %s:%u: no ConsumeQueue file",
					    q->topic, q->qid);
		n += cq_wb_drain(q->cq);
	}
	pthread_mutex_unlock(&s->qlock);
	return n;
}

/*
 * Prepare the next ConsumeQueue file of every queue that wants one, and
 * without the store's threads (tests) copy every queue's write-behind ring
 * into its files first (store__drainer_main() does it otherwise). Service thread
 * only. Return: 0 or the first error (the queue keeps refusing appends with
 * -EAGAIN and is retried on the next call).
 */
static int
store_prep_queues_rc(struct store *s)
{
	int first = 0;

	pthread_mutex_lock(&s->qlock);
	store__sl_take(s);
	for (struct store_queue *q = s->sl_list; q != NULL; q = q->sl_next) {
		if (q->retired)
			continue;
		if (!s->cfg.threads)
			(void)cq_wb_drain(q->cq);
		if (cq_wants_next(q->cq)) {
			int rc = cq_prepare_next(q->cq);

			s->svc_worked = true;
			if (rc != 0 && first == 0)
				first = rc;
		}
	}
	pthread_mutex_unlock(&s->qlock);
	return first;
}

/*
 * The CommitLog's write-behind windows and next segments (clog_prepare_next()):
 * on their own thread when the store runs its threads, so that ConsumeQueue
 * files (store_service()) never wait behind a segment's zero-fill or
 * fdatasync. Return: the first error; *@worked: something was prepared.
 */
static int
store_prepare_logs(struct store *s, bool *worked)
{
	int first = 0;

	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		if (clog_wants_next(s->shard[i].clog)) {
			int rc = clog_prepare_next(s->shard[i].clog);

			*worked = true;
			if (rc != 0 && first == 0)
				first = rc;
		}
	}
	return first;
}

int
store_service(struct store *s, int64_t now_ms)
{
	int first = 0;
	int rc;

	s->svc_worked = false;
	store__dmg_report(s);
	/* Queues first: a ConsumeQueue file is small and a fast queue fills one in 0.6 s. */
	rc = store_prep_queues_rc(s);
	if (rc != 0 && first == 0)
		first = rc;
	if (!s->cfg.threads) { /* else store__prep_main() does */
		rc = store_prepare_logs(s, &s->svc_worked);
		if (rc != 0 && first == 0)
			first = rc;
	}

	if (!s->pass_active && now_ms - s->last_flush_ms >= (int64_t)s->cfg.flush_interval_ms) {
		s->last_flush_ms = now_ms;
		/* Read before the CQ flush: every unit below these is in it (see DESIGN). */
		for (uint32_t i = 0; i < s->cfg.shards; i++) {
			s->pass_ck[i].end = 0;
			s->pass_ck[i].cq_safe = clog_flushed(s->shard[i].clog);
			s->pass_ck[i].indexed = atomic_load_relaxed(&s->shard[i].idx_pos);
			s->pass_ck[i].verified = (int64_t)s->shard[i].verified;
		}
		/* After those reads: see wake.c for why the pass then finds every queue it must flush. */
		pthread_mutex_lock(&s->qlock);
		rc = store__pass_begin(s);
		pthread_mutex_unlock(&s->qlock);
		if (rc != 0 && first == 0)
			first = rc;
		s->pass_active = rc == 0;
	}
	if (s->pass_active) {
		/*
		 * One slice: about 2 ms of fdatasyncs, then back to preparing
		 * files. Queues created after the pass began are skipped: their
		 * units all lie above the checkpoint values read at its start.
		 * Queues are never freed while the store is open.
		 */
		uint64_t t0 = clk_mono_ns();
		unsigned k = 0;

		s->svc_worked = true;
		rc = 0;
		pthread_mutex_lock(&s->qlock);
		while (s->pass_i < s->pass_n && rc == 0) {
			struct store_queue *q = s->pass_v[s->pass_i++];

			/* A queue retired meanwhile: its files are gone, nobody reads it. */
			if (!q->retired)
				rc = cq_flush(q->cq);
			if (++k % 16 == 0 && clk_mono_ns() - t0 > 2000000)
				break;
		}
		pthread_mutex_unlock(&s->qlock);
		if (rc == 0 && s->pass_i == s->pass_n) {
			s->pass_active = false;
			rc = store__ckpt_write(s, false, s->pass_ck);
			/* Queues the pass left with nothing to do leave the list. */
			pthread_mutex_lock(&s->qlock);
			store__sl_prune(s);
			pthread_mutex_unlock(&s->qlock);
		}
		if (rc != 0) {
			s->pass_active = false;
			log_err_ratelimited(STORE_TAG, "checkpoint: %s", strerror(-rc));
			if (first == 0)
				first = rc;
		}
	}
	if (now_ms - s->last_resync_ms >= 1000) {
		s->last_resync_ms = now_ms;
		clk_wall_resync();
	}
	if (now_ms - s->last_retention_ms >= 10000) {
		s->last_retention_ms = now_ms;
		rc = store_retain(s, now_ms);
		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}

static void
sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

void *
store__flusher_main(void *arg)
{
	struct store_shard *sh = arg;
	struct store *s = sh->s;
	uint64_t last = clk_mono_ns();
	uint64_t last_wb = last;
	uint32_t fail_us = 0; /* SYNC_FLUSH: the pause after a failed flush */
	char name[16];

	snprintf(name, sizeof(name), "st-flush-%u", sh->id);
	pthread_setname_np(pthread_self(), name);

	/*
	 * The default 50 us timer slack would stretch the 20 us group-commit
	 * poll to ~70 us: every SYNC_FLUSH ack would wait for it.
	 */
	(void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	while (!atomic_load_acquire(&s->stop)) {
		struct clog *c = sh->clog;
		uint64_t now = clk_mono_ns();
		bool pending = clog_written(c) > clog_flushed(c) || clog_err(c) != 0;
		/*
		 * Write back within 1 ms while the buffer dies with the process,
		 * within STORE_WB_FILE_MS while it is a file that outlives it:
		 * every wake-up takes its CPU from whatever else runs there
		 * (docs/store.md, "Write-behind buffers that outlive the process").
		 */
		uint64_t wb_ns =
			clog_bufs_outlive_crash(c) ? STORE_WB_FILE_MS * 1000000ull : 1000000ull;

		if (s->cfg.sync_flush) {
			/*
			 * Group commit: sync as soon as anything is written; appends
			 * that land during the fdatasync ride the next one. After a
			 * sync, give the CPU away once (a zero-length sleep) so the
			 * appenders it released can refill the batch: on a 2-vCPU
			 * box this doubled messages per sync at 64 outstanding. A
			 * longer pause (20 us) only added latency.
			 */
			if (pending) {
				if (clog_flush(c) != 0) {
					/* a failing disk: retry, backing off from 10 ms to 1 s */
					fail_us = fail_us ? SP_MIN(fail_us * 2, 1000000u) : 10000u;
					sleep_us((long)fail_us);
				} else {
					fail_us = 0;
					sleep_us(0);
				}
			} else {
				sleep_us(20);
			}
			continue;
		}
		if (pending && now - last >= (uint64_t)s->cfg.flush_interval_ms * 1000000) {
			(void)!clog_flush(c);
			last = last_wb = now;
		} else if (pending && now - last_wb >= wb_ns) {
			/* Between syncs, keep the files close behind the appends. */
			(void)!clog_write_back(c);
			last_wb = now;
		}
		/* A flush interval under the write-back period is kept too. */
		sleep_us(
			(long)(SP_MIN(wb_ns, (uint64_t)s->cfg.flush_interval_ms * 1000000) / 1000));
	}
	return NULL;
}

/*
 * Rounds come every SVC_BUSY_US while they find work (a file to prepare, a
 * flush pass in slices) and back off, doubling, to SVC_IDLE_US while they
 * find none. Every wake-up takes its CPU from whatever runs there, and on a
 * small host that is the control thread or a client of the dataplane: at a
 * steady 1,000 a second they were 1% of that CPU and a visible step in the
 * p99 of a closed-loop client beside the broker (docs/benchmarks.md). The
 * slack left when a round finds work: a ConsumeQueue file's next one is
 * asked for at 3/4 full (a quarter of a file, 75,000 units at the default
 * size), a segment's next one as soon as it opens; a queue that needs a file
 * every few ms keeps the rounds at SVC_BUSY_US.
 */
#define SVC_BUSY_US 1000
#define SVC_IDLE_US 10000

void *
store__service_main(void *arg)
{
	struct store *s = arg;
	long us = SVC_BUSY_US;
	pthread_setname_np(pthread_self(), "st-service");

	while (!atomic_load_acquire(&s->stop)) {
		(void)!store_service(s, clk_wall_ms());
		us = s->svc_worked ? SVC_BUSY_US : SP_MIN(us * 2, SVC_IDLE_US);
		sleep_us(us);
	}
	return NULL;
}

/*
 * A drainer round that copied more than this many units of one queue's
 * write-behind ring counts as work: rounds then stay SVC_BUSY_US apart.
 * Below it they back off, so a ring is about a sixteenth full when the
 * next round comes, and a queue's rate may grow sixteenfold before its
 * ring fills.
 */
#define DRAIN_BUSY_UNITS (CQ_WB_UNITS / 16)

/*
 * The drainer's nice value. It needs little CPU (a copy of 20 bytes per
 * unit) but needs it soon: on a host whose control CPUs are busy (a small
 * machine, a client spinning beside the broker), a drainer of default
 * priority waited several ms for its turn, often, and the ring of a queue
 * taking 600 k msg/s (8,192 units: 13 ms) filled. Raising a thread's
 * priority needs CAP_SYS_NICE (root, or systemd's AmbientCapabilities); without
 * it the drainer runs at the default and says so once.
 */
#define DRAIN_NICE (-10)

static void
drainer_priority(void)
{
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), DRAIN_NICE) != 0)
		log_info(STORE_TAG,
			 "ConsumeQueue drainer at default priority (nice %d needs CAP_SYS_NICE: "
			 "%s); a busy control CPU may fill write-behind rings",
			 DRAIN_NICE, strerror(errno));
}

/*
 * Copies the ConsumeQueues' write-behind rings into their files, on a
 * thread of its own that waits for no I/O and takes no registry lock, so a
 * service round stuck in an fdatasync or a retention pass does not fill
 * the rings (docs/store.md, "Page faults on the core"). Rounds come every
 * SVC_BUSY_US while a ring fills fast, backing off to SVC_IDLE_US.
 */
void *
store__drainer_main(void *arg)
{
	struct store *s = arg;
	long us = SVC_BUSY_US;

	pthread_setname_np(pthread_self(), "st-cq-drain");
	drainer_priority();
	while (!atomic_load_acquire(&s->stop)) {
		uint64_t most = store__drain_round(s);

		us = most > DRAIN_BUSY_UNITS ? SVC_BUSY_US : SP_MIN(us * 2, SVC_IDLE_US);
		sleep_us(us);
	}
	return NULL;
}

/* Rounds as the service's: every SVC_BUSY_US while they find work, backing off to SVC_IDLE_US. */
void *
store__prep_main(void *arg)
{
	struct store *s = arg;
	long us = SVC_BUSY_US;
	pthread_setname_np(pthread_self(), "st-prep");

	while (!atomic_load_acquire(&s->stop)) {
		bool worked = false;
		int rc = store_prepare_logs(s, &worked);

		if (rc != 0)
			log_err_ratelimited(STORE_TAG, "preparing CommitLog files: %s",
					    strerror(-rc));
		us = worked ? SVC_BUSY_US : SP_MIN(us * 2, SVC_IDLE_US);
		sleep_us(us);
	}
	return NULL;
}

/*
 * Readers of records on threads the reader_sync hook does not cover: the
 * indexer, and store_query_key() on the broker's remoting thread. Each
 * counts itself in one of two counters, chosen by the epoch's low bit, and
 * bg_read_sync() waits for both to drain, flipping the epoch before each
 * wait so that new readers go to the other counter: a stream of readers
 * never keeps it waiting (SRCU's scheme). A reader loads buffer pointers
 * only after its count and a full fence, so one that bg_read_sync() did not
 * see counted sees the buffer retired.
 */
unsigned
store__bg_read_enter(struct store *s)
{
	unsigned e = (unsigned)(atomic_load_relaxed(&s->bg_epoch) & 1);

	atomic_fetch_add(&s->bg_readers[e], 1);
	atomic_thread_fence(memory_order_seq_cst);
	return e;
}

void
store__bg_read_exit(struct store *s, unsigned e)
{
	/* release: the reads of records are done before the count drops */
	atomic_fetch_sub_explicit(&s->bg_readers[e], 1, memory_order_release);
}

/*
 * Waits up to BG_READ_WAIT_NS per counter. Return: true when both drained,
 * false when a reader stayed in longer (an indexer round can include an
 * index file's fdatasync): the caller then does without the buffer.
 */
#define BG_READ_WAIT_NS 2000000ull

static bool
bg_read_sync(struct store *s)
{
	/* Pairs with the fence in store__bg_read_enter(): the retirement is before this. */
	atomic_thread_fence(memory_order_seq_cst);
	for (int flip = 0; flip < 2; flip++) {
		unsigned old = (unsigned)(atomic_fetch_add(&s->bg_epoch, 1) & 1);
		uint64_t t0 = clk_mono_ns();

		while (atomic_load_acquire(&s->bg_readers[old]) != 0) {
			if (clk_mono_ns() - t0 > BG_READ_WAIT_NS)
				return false;
			sleep_us(50);
		}
	}
	return true;
}

/* clog_set_reader_sync() callback: the caller's readers, then the store's own. */
bool
store__reader_sync(void *arg)
{
	struct store *s = arg;

	s->cfg.reader_sync(s->cfg.reader_sync_arg);
	return bg_read_sync(s);
}

void *
store__indexer_main(void *arg)
{
	struct store *s = arg;
	uint32_t idle_us = 5000;

	pthread_setname_np(pthread_self(), "st-index");
	while (!atomic_load_acquire(&s->stop)) {
		unsigned e = store__bg_read_enter(s);
		long n = store_index_round(s);

		store__bg_read_exit(s, e);

		/* an error that repeats (ENOSPC, EIO) backs off to a second between tries */
		if (n < 0) {
			log_err_ratelimited(STORE_TAG, "indexer: %s (retrying every %u ms)",
					    strerror((int)-n), idle_us / 1000);
			idle_us = idle_us < 1000000 ? idle_us * 2 : 1000000;
		} else if (n > 0) {
			idle_us = 5000;
		}
		if (n <= 0)
			sleep_us(n < 0 ? idle_us : 5000);
	}
	return NULL;
}
