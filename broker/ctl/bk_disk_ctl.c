// SPDX-License-Identifier: Apache-2.0
/*
 * bk_disk_ctl.c - what retention must keep when the disk fills
 * (docs/store.md, "Disk space"), on the control thread.
 *
 * RocketMQ deletes the oldest segment above diskSpaceCleanForciblyRatio
 * whatever it holds: messages acknowledged to producers that no group has
 * read yet go without a word. sprocket's store keeps, per shard, the lowest
 * log offset a consumer still has to read, and refuses writes instead of
 * deleting past it (unless deleteUnconsumedWhenDiskFull). This file tells it
 * that offset every few seconds: for every consumer group's committed offset
 * (bk_committed_each()), every delay level's progress and every core's
 * unresolved transaction halves, the log offset of the next message it has
 * to read, and who is the furthest behind.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bk_ctl.h"
#include "store/clog.h"
#include "store/cq.h"
#include "store/store.h"

#define KEEP_EVERY_MS 2000

struct keep {
	struct bk_ctl *x;
	uint64_t floor[BK_CORES_MAX];
	char who[BK_CORES_MAX][160];
};

/* The next unit @sq holds at or after @off: its shard and local log offset. */
static void
keep_at(struct keep *k, const struct store_queue *sq, uint64_t off, const char *what)
{
	const struct cq *cq;
	uint64_t max;
	struct cq_unit u;
	uint32_t shard;
	uint64_t local;

	if (sq == NULL)
		return;
	cq = store_queue_cq(sq);
	max = cq_max(cq);
	if (off < cq_min(cq))
		off = cq_min(cq);
	if (off >= max || cq_get(cq, off, &u) != 0)
		return; /* read everything */
	shard = clog_phys_shard(u.phys);
	local = clog_phys_local(u.phys);
	if (shard >= BK_CORES_MAX || local >= k->floor[shard])
		return;
	k->floor[shard] = local;
	snprintf(k->who[shard], sizeof(k->who[shard]), "%s, %" PRIu64 " messages behind", what,
		 max - off);
}

static int
keep_group(void *arg, const struct bk_off *e, const struct bk_topic *t, int64_t offset)
{
	struct keep *k = arg;
	char what[128];

	snprintf(what, sizeof(what), "group %.40s (topic %.40s queue %u)", e->group, e->topic,
		 e->qid);
	keep_at(k, t->sq[e->qid], (uint64_t)offset, what);
	return 0;
}

void
bk_disk_keep_tick(struct bk_ctl *x, uint64_t now_ms)
{
	struct keep k = {.x = x};

	if (now_ms < x->disk_keep_ms)
		return;
	x->disk_keep_ms = now_ms + KEEP_EVERY_MS;
	for (uint32_t i = 0; i < BK_CORES_MAX; i++)
		k.floor[i] = UINT64_MAX;
	(void)bk_committed_each(x, keep_group, &k);
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];

		for (uint32_t l = 0; c->dq && l < x->bk.conf.delay_levels; l++) {
			char what[48];

			snprintf(what, sizeof(what), "delay level %u", l + 1);
			keep_at(&k, c->dq[l].sq, atomic_load_relaxed(&c->dq[l].pub_off), what);
		}
		if (c->tx != NULL) {
			uint64_t base, op_base, log;

			/* a half still to be checked back, and the op records that resolve it */
			bk_tx_progress(c->tx, &base, &op_base, &log);
			keep_at(&k, c->tx->hq, base, "transaction halves not resolved yet");
			keep_at(&k, c->tx->oq, op_base, "transaction op records");
		}
	}
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		store_set_keep(x->bk.store, i, k.floor[i], k.who[i]);
}
