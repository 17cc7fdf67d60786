// SPDX-License-Identifier: Apache-2.0
/*
 * store.c - the store facade: store_open() and store_close(), put and get,
 * the ack state of a put, and what readers met (busy, damage). The rest is
 * in files of their own, sharing store_int.h: the queue registry
 * (queues.c), the checkpoint (ckpt.c), dispatch and crash recovery
 * (dispatch.c), lookups by time and key (lookup.c) and the background
 * threads (service.c).
 *
 * The clean flag and the "end" values of the checkpoint are only written by
 * store_close() after the final flush; the abort file says the process did
 * not get there.
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

void
store_cfg_default(struct store_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->root = "./store";
	cfg->shards = 1;
	cfg->seg_size = 1ull << 30;
	cfg->cq_units = CQ_UNITS_PER_FILE_DEFAULT;
	cfg->idx_slots = IDX_SLOTS_DEFAULT;
	cfg->idx_entries = IDX_ENTRIES_DEFAULT;
	cfg->sync_flush = false;
	cfg->flush_interval_ms = 500;
	cfg->sync_timeout_ms = 5000;
	cfg->file_reserved_hours = 72;
	cfg->delete_when_hour = 4;
	cfg->disk_max_used_ratio = 75;
	cfg->disk_clean_ratio = 85;
	cfg->disk_warn_ratio = 90;
	cfg->clean_forcibly = true;
	cfg->store_host.addr[0] = 127;
	cfg->store_host.addr[3] = 1;
	cfg->store_host.port = 10911;
	cfg->threads = true;
}

int
store_open(const struct store_cfg *cfg, struct store **out)
{
	struct ckpt_shard ck[STORE_SHARDS_MAX] = {0};
	int64_t cut_at[STORE_SHARDS_MAX];
	bool crashed = false;
	bool clean = false;
	bool rebuild = false;
	struct store *s;
	int have_ckpt;
	int rc;

	if (cfg->shards == 0 || cfg->shards > STORE_SHARDS_MAX || cfg->root == NULL ||
	    cfg->cq_units == 0 || cfg->flush_interval_ms == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->cfg = *cfg;
	s->io = cfg->io ? cfg->io : &store_io_posix;
	s->lock_fd = -1;
	s->buf_lock_fd = -1;
	s->dmg = calloc(cfg->shards, sizeof(*s->dmg));
	if (s->dmg == NULL || store__qmap_init(s) != 0) {
		free(s->dmg);
		free(s);
		return -ENOMEM;
	}
	clk_init(); /* store times come from clk_wall_ms_fast() */
	pthread_mutex_init(&s->qlock, NULL);
	pthread_mutex_init(&s->keep_mu, NULL);
	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++) {
		s->keep_floor[i] = cfg->keep_unconsumed ? 0 : UINT64_MAX;
		snprintf(s->keep_who[i], sizeof(s->keep_who[i]), "%s",
			 "the consumer groups (not known yet)");
	}
	if (snprintf(s->root, sizeof(s->root), "%s", cfg->root) >= (int)sizeof(s->root)) {
		rc = -ENAMETOOLONG;
		goto err_close;
	}
	s->cfg.root = s->root;
	if (store__path_set(s->abort_path, sizeof(s->abort_path), cfg->path_abort, s->root,
			    "abort") ||
	    store__path_set(s->ckpt_path, sizeof(s->ckpt_path), cfg->path_checkpoint, s->root,
			    "checkpoint") ||
	    store__path_set(s->clog_dir, sizeof(s->clog_dir), cfg->path_commitlog, s->root,
			    "commitlog") ||
	    store__path_set(s->cq_dir, sizeof(s->cq_dir), cfg->path_cq, s->root, "consumequeue") ||
	    store__path_set(s->idx_dir, sizeof(s->idx_dir), cfg->path_index, s->root, "index")) {
		rc = -ENAMETOOLONG;
		goto err_close;
	}
	snprintf(s->cut_path, sizeof(s->cut_path), "%s/truncate", s->root);
	rc = store_mkdirs(s->root);
	if (rc != 0)
		goto err_close;
	/* One process per store: nothing of it is read or written before this. */
	s->lock_fd = store__lock(s->root);
	if (s->lock_fd < 0) {
		rc = s->lock_fd;
		goto err_close;
	}
	rc = store__shards_check(s->root, s->clog_dir, store__ckpt_shards(s), cfg->shards);
	if (rc == 0 && store__clog_moved_away(s)) {
		rc = -EEXIST;
		goto err_close;
	}
	if (rc == 0)
		rc = store_mkdirs(s->clog_dir);
	if (rc == 0)
		rc = store_mkdirs(s->cq_dir);
	if (rc == 0)
		rc = store_mkdirs(s->idx_dir);
	if (rc != 0)
		goto err_close;

	rc = store__open_abort_file(s, &crashed);
	if (rc != 0)
		goto err_close;
	have_ckpt = store__ckpt_read(s, &clean, ck);
	if (have_ckpt < 0) {
		rc = have_ckpt;
		goto err_close;
	}
	if (!crashed && have_ckpt == 0 && store__log_is_new(s, cfg->shards)) {
		struct ckpt_shard zero[STORE_SHARDS_MAX] = {0};

		log_info(STORE_TAG, "%s: a new store", s->root);
		/*
		 * The shard count, before any segment: a first run killed before
		 * its last shard made one would otherwise read as fewer shards
		 * (store__shards_check()). All zeros recovers as no checkpoint.
		 */
		rc = store__ckpt_write(s, false, zero);
		if (rc != 0)
			goto err_close;
	} else if (crashed || !clean)
		log_warn(STORE_TAG, "%s: %s; recovering by scanning the log", s->root,
			 crashed ? "the last run did not shut down cleanly"
				 : "no clean checkpoint");

	pthread_mutex_lock(&s->qlock);
	rc = store__open_queues(s, &rebuild);
	/* Every queue with a directory is open: any other is new, with nothing to scan. */
	s->queues_opened = true;
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	rc = store__cut_marks_read(s, cut_at);
	if (rc != 0)
		goto err_close;
	store__bufdirs_prepare(s);
	for (uint32_t i = 0; i < cfg->shards; i++) {
		char dir[PATH_MAX + 32];
		char bdir[PATH_MAX + 32];
		char odir[PATH_MAX + 32];
		struct clog_cfg cc = {
			.io = s->io,
			.dir = dir,
			.shard = i,
			.seg_size = cfg->seg_size,
			.sync_flush = cfg->sync_flush,
			.buf_dir = s->buf_run[0] != '\0' ? bdir : NULL,
			.buf_wanted = s->cfg.buf_dir != NULL && s->cfg.buf_dir[0] != '\0',
			.buf_window = cfg->buf_window,
			.old_buf_dir = s->buf_old[0] != '\0' ? odir : NULL,
			.cut = cut_at[i] >= 0,
			.cut_at = cut_at[i] >= 0 ? (uint64_t)cut_at[i] : 0,
			.no_warm = cfg->no_warm,
			.verified = have_ckpt == 1 ? ck[i].verified : 0,
		};
		bool trust = have_ckpt == 1 && clean && !crashed;

		snprintf(dir, sizeof(dir), "%s/%u", s->clog_dir, i);
		snprintf(bdir, sizeof(bdir), "%s/%u", s->buf_run, i);
		snprintf(odir, sizeof(odir), "%s/%u", s->buf_old, i);
		rc = clog_open(&cc, &s->shard[i].clog);
		if (rc != 0)
			goto err_close;
		rc = clog_recover(s->shard[i].clog, have_ckpt == 1 ? ck[i].cq_safe : 0,
				  trust ? (int64_t)ck[i].end : -1);
		if (rc == -ENOENT && clog_recovery(s->shard[i].clog)->empty_dir)
			log_err(STORE_TAG,
				"shard %u: %s holds no CommitLog segment but %s says its log "
				"reached %" PRIu64
				": if the log was moved, set storePathCommitLog to where its "
				"segments are; to start this shard with an empty log (its messages "
				"are lost), remove %s",
				i, dir, s->ckpt_path, SP_MAX(ck[i].end, ck[i].cq_safe),
				s->ckpt_path);
		if (rc == -EUCLEAN)
			log_err(STORE_TAG, "shard %u: the checkpoint file is %s", i, s->ckpt_path);
		if (rc != 0)
			goto err_close;
		snprintf(dir, sizeof(dir), "%s/%u", s->idx_dir, i);
		rc = idx_open(s->io, dir, cfg->idx_slots, cfg->idx_entries, &s->shard[i].idx);
		if (rc != 0)
			goto err_close;
		/* clog_recover() checked every record from the last verified mark to the end. */
		s->shard[i].verified = clog_written(s->shard[i].clog);
	}
	/* The last run's buffers are in the segment files, durable: this run's take over. */
	rc = store__bufdirs_commit(s);
	if (rc != 0)
		goto err_close;

	/* ConsumeQueue units past the end of their shard's log are gone. */
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL && rc == 0; q = q->lnext) {
		struct cq_unit u;
		uint64_t max = cq_max(q->cq);
		uint32_t sh;

		if (max == cq_min(q->cq) || cq_get(q->cq, max - 1, &u) != 0)
			continue;
		sh = clog_phys_shard(u.phys);
		if (sh >= cfg->shards) {
			rc = cq_truncate_phys(q->cq, 0);
			continue;
		}
		atomic_store_relaxed(&q->shard, sh);
		rc = cq_truncate_phys(q->cq, clog_phys(sh, clog_written(s->shard[sh].clog)));
		s->shard[sh].cq_cut += max - cq_max(q->cq);
		/* The minimum is not persisted: retention's cut comes from the log. */
		if (rc == 0)
			rc = cq_trim_phys(q->cq, clog_phys(sh, clog_min(s->shard[sh].clog)),
					  clk_wall_ms());
	}
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	/* Queues whose head is damaged are rebuilt from the whole log. */
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL && rc == 0; q = q->lnext) {
		if (store__queue_head_ok(s, q))
			continue;
		log_err(STORE_TAG, "consume queue %s:%u does not match the log: rebuilding it",
			q->topic, q->qid);
		rc = store__queue_reset_locked(s, q);
		rebuild = true;
	}
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	/*
	 * Every record still in the log has a queue offset >= its queue's
	 * min (retention trims queues to the log). One that does not means
	 * the queue lost its first files. Checking the first segment of each
	 * shard finds that, as a lost head lies at the log's start. And every
	 * record below the checkpoint's cq_safe has its unit: one whose queue
	 * ends before its offset means the queue lost its files (a deleted or
	 * emptied ConsumeQueue): rebuilt from the log too.
	 */
	pthread_mutex_lock(&s->qlock);
	for (uint32_t i = 0; i < cfg->shards && rc == 0 && !rebuild; i++) {
		struct clog *c = s->shard[i].clog;
		uint64_t off = clog_min(c);
		uint64_t stop = SP_MIN(clog_written(c), off + clog_seg_size(c));

		struct wire_msg m;
		long r;

		/* A BLANK skips to the next segment, which is past stop. */
		while (!rebuild && (r = store__next_record_open(c, &off, stop, &m)) > 0) {
			struct store_queue *q;

			off += (uint64_t)r;
			if (!store__rec_is_dispatched(&m) || m.queue_id < 0)
				continue;
			q = store__qmap_find(s, m.topic, m.topic_len, (uint32_t)m.queue_id);
			if (q != NULL && have_ckpt == 1 && off <= ck[i].cq_safe &&
			    (uint64_t)m.queue_offset >= cq_max(q->cq)) {
				log_err(STORE_TAG,
					"consume queue %s:%u ends at %" PRIu64
					" but the log holds its offset %" PRId64
					" below the checkpoint: its files were lost, rebuilding it",
					q->topic, q->qid, cq_max(q->cq), m.queue_offset);
				rc = store__queue_reset_locked(s, q);
				rebuild = true;
				continue;
			}
			if (q == NULL || (uint64_t)m.queue_offset >= cq_min(q->cq))
				continue;
			log_err(STORE_TAG,
				"consume queue %s:%u starts at %" PRIu64
				" but the log holds its offset %" PRId64 ": rebuilding it",
				q->topic, q->qid, cq_min(q->cq), m.queue_offset);
			rc = store__queue_reset_locked(s, q);
			rebuild = true;
		}
	}
	pthread_mutex_unlock(&s->qlock);
	if (rc != 0)
		goto err_close;

	/* Re-store__dispatch what the ConsumeQueues may lack; a gap means a full rebuild. */
	for (uint32_t i = 0; i < cfg->shards; i++) {
		const struct clog_recovery *rep = clog_recovery(s->shard[i].clog);
		struct store_queue *damaged = NULL;
		uint64_t from = UINT64_MAX;

		if (rebuild || have_ckpt != 1)
			from = 0;
		else if (crashed || !clean)
			from = ck[i].cq_safe;
		/* Where recovery scanned (short, missing or damaged segments): from there. */
		from = SP_MIN(from, rep->scan_from);
		if (from == UINT64_MAX)
			continue;
		pthread_mutex_lock(&s->qlock);
		/* A hole in a queue is the log's where it lost spans, or once rebuilding from it. */
		rc = store__redispatch(s, i, from, rebuild || rep->n_lost > 0, &damaged);
		if (rc == -EUCLEAN && !rebuild) {
			rc = store__queue_reset_locked(s, damaged);
			rebuild = true;
			i = UINT32_MAX; /* start over from the beginning of every shard */
		}
		pthread_mutex_unlock(&s->qlock);
		if (rc != 0) {
			log_err(STORE_TAG, "shard %u: re-store__dispatch failed: %s", i,
				strerror(-rc));
			goto err_close;
		}
	}

	store__recovery_count_lost(s);
	store__recovery_report(s);

	/* The indexer resumes after the newest indexed record. */
	for (uint32_t i = 0; i < cfg->shards; i++) {
		int64_t last = idx_last_phys(s->shard[i].idx);
		struct clog *c = s->shard[i].clog;

		atomic_store_relaxed(&s->shard[i].idx_pos, clog_min(c));
		if (last >= 0 && clog_phys_shard(last) == i) {
			const uint8_t *rec;
			uint64_t next;

			if (clog_read(c, clog_phys_local(last), &rec, &next) > 0)
				atomic_store_relaxed(&s->shard[i].idx_pos, next);
		}
		/* Past the end only after a cut (replication): resume at the cut, not from the start. */
		if (have_ckpt == 1 && ck[i].indexed > atomic_load_relaxed(&s->shard[i].idx_pos))
			atomic_store_relaxed(&s->shard[i].idx_pos,
					     SP_MIN(ck[i].indexed, clog_written(c)));
		/* Not inside a span recovery blanked: no record starts there any more. */
		for (uint32_t k = 0; k < clog_recovery(c)->n_lost; k++) {
			const struct clog_span *sp = &clog_recovery(c)->lost[k];
			uint64_t pos = atomic_load_relaxed(&s->shard[i].idx_pos);

			if (pos > sp->lo && pos < sp->hi)
				atomic_store_relaxed(&s->shard[i].idx_pos, sp->hi);
		}
	}

	{
		struct ckpt_shard now[STORE_SHARDS_MAX];

		for (uint32_t i = 0; i < cfg->shards; i++) {
			now[i].end = clog_written(s->shard[i].clog);
			now[i].cq_safe = now[i].end;
			now[i].indexed = atomic_load_relaxed(&s->shard[i].idx_pos);
			now[i].verified = (int64_t)s->shard[i].verified;
		}
		/* All CQ units so far must be durable before cq_safe says so. */
		rc = store__flush_queues(s);
		if (rc == 0)
			rc = store__ckpt_write(s, false, now);
		if (rc != 0)
			goto err_close;
	}

	for (uint32_t i = 0; i < cfg->shards; i++)
		if (cfg->reader_sync != NULL)
			clog_set_reader_sync(s->shard[i].clog, store__reader_sync, s);

	if (cfg->threads) {
		for (uint32_t i = 0; i < cfg->shards; i++) {
			s->shard[i].s = s;
			s->shard[i].id = i;
			if (pthread_create(&s->shard[i].flusher, NULL, store__flusher_main,
					   &s->shard[i]) != 0) {
				rc = -EAGAIN;
				goto err_close;
			}
			s->shard[i].flusher_started = true;
		}
		if (pthread_create(&s->service, NULL, store__service_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->service_started = true;
		if (pthread_create(&s->prep, NULL, store__prep_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->prep_started = true;
		if (pthread_create(&s->indexer, NULL, store__indexer_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->indexer_started = true;
		if (pthread_create(&s->drainer, NULL, store__drainer_main, s) != 0) {
			rc = -EAGAIN;
			goto err_close;
		}
		s->drainer_started = true;
	}
	/* The cuts are done and the checkpoint says so: the marks go. */
	rc = s->io->unlink(s->io->ctx, s->cut_path);
	if (rc != 0 && rc != -ENOENT)
		log_warn(STORE_TAG, "%s: cannot remove: %s", s->cut_path, strerror(-rc));
	rc = 0;
	log_info(STORE_TAG, "%s: %u shards, %s, %zu queues", s->root, cfg->shards,
		 cfg->sync_flush ? "SYNC_FLUSH" : "ASYNC_FLUSH", s->n_queues);
	*out = s;
	return 0;

err_close:
	/* Leave the abort file: the next start must recover again. */
	store__free(s);
	return rc;
}

static void
store_stop_threads(struct store *s)
{
	atomic_store_release(&s->stop, true);
	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++) {
		if (s->shard[i].flusher_started)
			pthread_join(s->shard[i].flusher, NULL);
		s->shard[i].flusher_started = false;
	}
	if (s->service_started)
		pthread_join(s->service, NULL);
	if (s->prep_started)
		pthread_join(s->prep, NULL);
	s->prep_started = false;
	if (s->indexer_started)
		pthread_join(s->indexer, NULL);
	if (s->drainer_started)
		pthread_join(s->drainer, NULL);
	s->drainer_started = false;
	s->service_started = false;
	s->indexer_started = false;
}

void
store__free(struct store *s)
{
	store_stop_threads(s);
	while (s->queues != NULL) {
		struct store_queue *q = s->queues;

		s->queues = q->lnext;
		cq_close(q->cq);
		free(q);
	}
	while (s->retired != NULL) {
		struct store_queue *q = s->retired;

		s->retired = q->lnext;
		cq_close(q->cq);
		free(q);
	}
	for (uint32_t i = 0; i < STORE_SHARDS_MAX; i++) {
		clog_close(s->shard[i].clog);
		idx_close(s->shard[i].idx);
	}
	/* Empty once the clogs let go; kept while a buffer is left for recovery. */
	if (s->buf_lock_fd >= 0)
		store__bufdir_release(s->buf_run, s->buf_lock_fd);
	else if (s->buf_run[0] != '\0')
		(void)rmdir(s->buf_run);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->keep_mu);
	/* Last: the next process may take the store once every file here is let go. */
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->dmg);
	free(s->pass_v);
	free(s->qmap);
	free(s);
}

int
store_close(struct store *s)
{
	struct ckpt_shard ck[STORE_SHARDS_MAX];
	int rc;

	if (s == NULL)
		return 0;
	store_stop_threads(s);
	while (store_index_round(s) > 0)
		;
	rc = store_flush_all(s);
	if (rc == 0)
		rc = store__flush_queues(s);
	for (uint32_t i = 0; i < s->cfg.shards && rc == 0; i++) {
		rc = idx_flush(s->shard[i].idx);
		ck[i].end = clog_flushed(s->shard[i].clog);
		ck[i].cq_safe = ck[i].end;
		ck[i].indexed = atomic_load_relaxed(&s->shard[i].idx_pos);
		ck[i].verified = (int64_t)s->shard[i].verified;
	}
	if (rc == 0)
		rc = store__ckpt_write(s, true, ck);
	if (rc == 0)
		rc = s->io->unlink(s->io->ctx, s->abort_path);
	if (rc != 0)
		log_err(STORE_TAG, "%s: unclean shutdown (%s): the next start recovers by scanning",
			s->root, strerror(-rc));
	else
		log_info(STORE_TAG, "%s: closed cleanly", s->root);
	store__free(s);
	return rc;
}

/* ---- dataplane operations ---- */

long
store_put(struct store *s, struct store_queue *q, struct wire_msg *m, struct store_put_res *res)
{
	uint32_t shard = atomic_load_relaxed(&q->shard);
	struct clog *c = s->shard[shard].clog;
	bool dispatched = store__rec_is_dispatched(m);
	uint64_t ticket;
	long n;

	/* relaxed: a write refused one request late, or taken one late, is harmless */
	if (atomic_load_relaxed(&s->disk_full) && !atomic_load_relaxed(&q->full_ok))
		return -ENOSPC;
	if (dispatched && !cq_can_append(q->cq)) {
		if (cq_ring_full(q->cq))
			atomic_add_relaxed(&s->shard[shard].busy_ring, 1);
		else
			atomic_add_relaxed(&s->shard[shard].busy_cq, 1);
		return -EAGAIN;
	}
	m->topic = q->topic;
	m->topic_len = q->topic_len;
	m->queue_id = (int32_t)q->qid;
	m->queue_offset = dispatched ? (int64_t)cq_max(q->cq) : 0;
	m->store_ts = clk_wall_ms_fast();
	m->store_host = s->cfg.store_host;
	n = clog_append(c, m, &ticket);
	if (n == -EAGAIN)
		atomic_add_relaxed(&s->shard[shard].busy_clog, 1);
	if (n < 0)
		return n;
	if (dispatched) {
		struct cq_unit u = {.phys = m->phys_offset,
				    .size = (uint32_t)n,
				    .tag_hash = store__unit_tag_hash(m)};

		/* Checked by cq_can_append(); a failure here is a bug, counted. */
		if (cq_append(q->cq, (uint64_t)m->queue_offset, &u) != 0)
			atomic_add_relaxed(&q->cq_errors, 1);
		else
			store__queue_wake(s, q); /* before the commit: see wake.c */
	}
	clog_commit(c);
	res->phys = m->phys_offset;
	res->qoff = m->queue_offset;
	res->ticket = ticket;
	res->shard = shard;
	res->size = (uint32_t)n;
	return n;
}

int
store_durable(const struct store *s, uint32_t shard, uint64_t ticket)
{
	struct clog *c = s->shard[shard].clog;
	int err = clog_err(c);

	/*
	 * ASYNC_FLUSH: durable in the write-behind buffer, unless that buffer
	 * was to be a file (storeBufferDir) and is anonymous memory now: then
	 * once written back to the segment file (clog_bufs_degraded(); the
	 * flusher writes back every 1 ms meanwhile).
	 */
	if (!s->cfg.sync_flush) {
		if (!clog_bufs_degraded(c) || clog_written_back(c) >= ticket)
			return 1;
		return err != 0 ? err : 0;
	}
	if (clog_flushed(c) >= ticket)
		return 1;
	return err != 0 ? err : 0;
}

int
store_ack_state(const struct store *s, uint32_t shard, uint64_t ticket, uint64_t put_ns,
		uint64_t now_ns)
{
	int d = store_durable(s, shard, ticket);

	if (d != 0)
		return d;
	if (now_ns - put_ns >= (uint64_t)s->cfg.sync_timeout_ms * 1000000)
		return -ETIMEDOUT;
	return 0;
}

/*
 * A read for delivery met damage at local @off of @shard: a span recovery
 * stepped over is a lost message (-ENOENT, counted at open), anything else
 * is counted here for the service thread to log (store__dmg_report()): no
 * formatting on the reader's thread, which may be a dataplane core.
 */
static long
store_bad_read(const struct store *s, uint32_t shard, uint64_t off)
{
	struct store_dmg *d = &s->dmg[shard];

	if (clog_lost_skip(s->shard[shard].clog, off) != off)
		return -ENOENT;
	atomic_store_relaxed(&d->last_bad, off);
	/* relaxed: a statistic; the service thread reads it after last_bad, both relaxed */
	atomic_add_relaxed(&d->bad_reads, 1);
	return -EBADMSG;
}

uint64_t
store_scan_past(const struct store *s, uint32_t shard, uint64_t off)
{
	const struct clog *c = s->shard[shard].clog;
	uint64_t seg = clog_seg_size(c);

	if (store_bad_read(s, shard, off) == -ENOENT)
		return clog_lost_skip(c, off);
	return (off / seg + 1) * seg;
}

long
store_get_phys(const struct store *s, int64_t phys, const uint8_t **rec)
{
	uint32_t shard = clog_phys_shard(phys);
	uint64_t next;
	long r;

	if (phys < 0 || shard >= s->cfg.shards)
		return -ERANGE;
	r = clog_read_checked(s->shard[shard].clog, clog_phys_local(phys), rec, &next);
	/* A BLANK where a message was: recovery blanked its span (docs/store.md). */
	if (r == -ENODATA)
		return -ENOENT;
	if (r >= 0 || r == -ERANGE || r == -ENOENT)
		return r;
	return store_bad_read(s, shard, clog_phys_local(phys));
}

bool
store_queue_wait(const struct store_queue *q)
{
	bool was = q->waited;

	((struct store_queue *)q)->waited = true;
	return !was;
}

bool
store_queue_wait_take(const struct store_queue *q)
{
	if (!q->waited)
		return false;
	((struct store_queue *)q)->waited = false;
	return true;
}

uint64_t
store_queue_min(const struct store *s, const struct store_queue *q)
{
	(void)s;
	return cq_min(q->cq);
}

uint64_t
store_queue_max(const struct store *s, const struct store_queue *q)
{
	uint64_t min = cq_min(q->cq);
	uint64_t max = cq_max(q->cq);
	struct cq_unit u;

	if (!s->cfg.sync_flush)
		return max;
	/* Only units whose record is durable (RocketMQ #8239): few are not. */
	while (max > min && cq_get(q->cq, max - 1, &u) == 0) {
		struct clog *c = s->shard[clog_phys_shard(u.phys) % s->cfg.shards].clog;

		if (clog_phys_local(u.phys) + u.size <= clog_flushed(c))
			break;
		max--;
	}
	return max;
}

/*
 * A visible unit points at a record written before it was (the owner appends,
 * then publishes the unit): one that points past the readable end of its log
 * is damaged, not early. Without this the reader took it for a record not
 * written yet, and the queue stalled behind it for good.
 */
static bool
unit_past_log(const struct store *s, const struct cq_unit *u)
{
	uint32_t shard = clog_phys_shard(u->phys);
	const struct clog *c;
	uint64_t vis;

	if (u->phys < 0 || shard >= s->cfg.shards)
		return true;
	c = s->shard[shard].clog;
	vis = s->cfg.sync_flush ? clog_flushed(c) : clog_written(c);
	return clog_phys_local(u->phys) >= clog_min(c) && clog_phys_local(u->phys) + u->size > vis;
}

/*
 * The record a unit points at is that queue's message at that offset: its
 * QUEUEID, QUEUEOFFSET and topic are the queue's. A unit copied from another
 * queue, or a record whose topic was damaged (the body's CRC does not cover
 * it), is not delivered on the wrong queue.
 */
static bool
unit_names(const struct store_queue *q, uint64_t qoff, const uint8_t *rec, size_t len)
{
	struct wire_msg m;

	return wire_rec_decode(rec, len, 0, &m) == (long)len && m.queue_id >= 0 &&
	       (uint32_t)m.queue_id == q->qid && m.queue_offset >= 0 &&
	       (uint64_t)m.queue_offset == qoff && m.topic_len == q->topic_len &&
	       memcmp(m.topic, q->topic, q->topic_len) == 0;
}

long
store_get(const struct store *s, const struct store_queue *q, uint64_t qoff, const uint8_t **rec,
	  struct cq_unit *unit)
{
	long r;

	if (qoff >= store_queue_max(s, q))
		return -ERANGE;
	r = cq_get(q->cq, qoff, unit);
	if (r != 0)
		return r;
	if (unit->size == CQ_LOST_SIZE)
		return -ENOENT;
	r = store_get_phys(s, unit->phys, rec);
	if (r == -ERANGE && unit_past_log(s, unit))
		return store_bad_read(s, clog_phys_shard(unit->phys), clog_phys_local(unit->phys));
	if (r > 0 && ((uint32_t)r != unit->size || !unit_names(q, qoff, *rec, (size_t)r)))
		return store_bad_read(s, clog_phys_shard(unit->phys), clog_phys_local(unit->phys));
	return r;
}

int
store_busy(const struct store *s, uint32_t shard, struct store_busy_counts *out)
{
	if (shard >= s->cfg.shards)
		return -EINVAL;
	out->cq_file = atomic_load_relaxed(&s->shard[shard].busy_cq);
	out->cq_ring = atomic_load_relaxed(&s->shard[shard].busy_ring);
	out->clog = atomic_load_relaxed(&s->shard[shard].busy_clog);
	return 0;
}

int
store_damage(const struct store *s, uint32_t shard, struct store_damage *out)
{
	const struct clog_recovery *rep;

	if (shard >= s->cfg.shards)
		return -EINVAL;
	rep = clog_recovery(s->shard[shard].clog);
	out->bad_reads = atomic_load_relaxed(&s->dmg[shard].bad_reads);
	out->last_bad = atomic_load_relaxed(&s->dmg[shard].last_bad);
	out->spans = rep->spans_blanked + rep->spans_stepped;
	out->lost = s->shard[shard].cq_lost;
	out->verified = s->shard[shard].verified;
	return 0;
}

/*
 * The service thread says what readers met since its last report: one line
 * per damaged range (a new segment), rate-limited; further reads of the
 * same range are only counted.
 */
void
store__dmg_report(struct store *s)
{
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		struct store_dmg *d = &s->dmg[i];
		uint64_t n = atomic_load_relaxed(&d->bad_reads);
		uint64_t off;
		uint64_t seg;

		if (n == d->logged_reads)
			continue;
		off = atomic_load_relaxed(&d->last_bad);
		seg = off - off % s->cfg.seg_size;
		if (!d->logged_any || seg != d->logged_seg)
			log_warn_ratelimited(
				STORE_TAG,
				"shard %u: a damaged record at %" PRIu64 " in segment %020" PRIu64
				" (body CRC, header or size wrong): skipped as lost; "
				"%" PRIu64 " such reads so far (sprocket-broker --verify lists "
				"every damaged range)",
				i, off, seg, n);
		d->logged_any = true;
		d->logged_seg = seg;
		d->logged_reads = n;
	}
}
