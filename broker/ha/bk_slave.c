// SPDX-License-Identifier: Apache-2.0
/*
 * bk_slave.c - what the broker's control thread does for replication
 * (docs/replication.md): reading brokerRole and brokerId, learning a
 * slave's master from the NameServer, applying the topics and offsets its
 * sync fetched from the master, and the exit report of its sessions. The
 * sessions themselves are bk_follow.c; the master's side is bk_repl.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/bk_ctl.h"
#include "bk_follow.h"
#include "remoting/bk_rmt.h"
#include "bk_sync.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/breg.h"
#include "store/io.h"
#include "store/meta.h"
#include "store/meta_delay.h"

/*
 * brokerRole and brokerId as RocketMQ's BrokerStartup reads them: a slave
 * needs brokerId > 0; a master is brokerId 0 whatever the file says.
 */
int
bk_ctl_role_setup(struct bk_ctl *x)
{
	const char *role = cfg_get_str(x->cfg, "brokerRole");
	struct bk_conf *cf = &x->bk.conf;

	if (strcmp(role, "SLAVE") == 0) {
		cf->role = BK_ROLE_SLAVE;
		if (cf->broker_id <= 0) {
			log_err(BK_TAG, "brokerRole SLAVE needs brokerId > 0 (got %" PRId64 ")",
				cf->broker_id);
			return -EINVAL;
		}
		return 0;
	}
	cf->role = strcmp(role, "SYNC_MASTER") == 0 ? BK_ROLE_SYNC_MASTER : BK_ROLE_ASYNC_MASTER;
	if (cf->broker_id != 0) {
		log_warn(BK_TAG, "brokerRole %s: brokerId %" PRId64 " taken as 0 (the master's)",
			 role, cf->broker_id);
		cf->broker_id = 0;
	}
	return 0;
}

static bool
topic_differs(const struct bk_topic *t, const struct meta_topic *m)
{
	return t->perm != m->perm || t->read_queues != m->read_queues ||
	       t->write_queues != m->write_queues || t->sys_flag != m->sys_flag ||
	       t->order != m->order;
}

/*
 * The master's delayOffset.json, kept as this slave's own (checked first,
 * written when it changed): a slave delivers nothing, but started again as
 * the group's master it goes on from there (bk_delay_setup() then skips
 * what it finds delivered already).
 */
static void
delays_apply(struct bk_ctl *x, const char *json, size_t len)
{
	static int64_t off[META_DELAY_KEYS_MAX];
	int err;

	if (json == NULL)
		return;
	if (len == x->delay_synced_len && x->delay_synced != NULL &&
	    memcmp(json, x->delay_synced, len) == 0)
		return;
	if (meta_delay_parse(json, len, off, META_DELAY_KEYS_MAX) != 0) {
		log_warn_ratelimited(BK_TAG, "the master's delay offsets do not parse");
		return;
	}
	err = store_io_write_atomic(&store_io_posix, x->delay_path, json, len);
	if (err) {
		log_warn_ratelimited(BK_TAG, "saving %s: %s", x->delay_path, strerror(-err));
		return;
	}
	free(x->delay_synced);
	x->delay_synced = malloc(len);
	x->delay_synced_len = x->delay_synced ? len : 0;
	if (x->delay_synced)
		memcpy(x->delay_synced, json, len);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Topics the master deleted (DELETE_TOPIC_IN_BROKER) go here too; the
 * broker's own stay. The master's names are sorted and searched: a search
 * of all of them per topic was O(N^2) at 100,000 topics.
 */
static void
topics_gone(struct bk_ctl *x, const struct meta_topic *ts, size_t n)
{
	char(*gone)[META_TOPIC_MAX + 1] = NULL;
	const char **names;
	size_t ng = 0;

	if (n == 0)
		return; /* an empty table is no reason to delete everything */
	names = malloc(n * sizeof(*names));
	if (names == NULL)
		return; /* the next sync tries again */
	for (size_t k = 0; k < n; k++)
		names[k] = ts[k].name;
	qsort(names, n, sizeof(*names), name_cmp);
	pthread_mutex_lock(&x->mu);
	gone = calloc(x->nreg ? x->nreg : 1, sizeof(*gone));
	for (size_t i = 0; gone && i < x->nreg; i++) {
		const char *key = x->reg[i].name;
		bool kept = bk_topic_is_system(key) ||
			    bsearch(&key, names, n, sizeof(*names), name_cmp) != NULL;

		if (!kept)
			memcpy(gone[ng++], x->reg[i].name, sizeof(gone[0]));
	}
	pthread_mutex_unlock(&x->mu);
	free(names);
	for (size_t i = 0; i < ng; i++) {
		int err = bk_ctl_topic_delete(x, gone[i]);

		if (err && err != -ENOENT) {
			log_warn(BK_TAG, "deleting topic %s as the master did: %s", gone[i],
				 strerror(-err));
			continue;
		}
		/* its offsets too: a slave's sync only ever raises them */
		if (bk_rmt_offsets_drop(x->rmt, 'T', gone[i]) != 0)
			log_warn(BK_TAG, "topic %s: some consumer offsets kept (a core was busy)",
				 gone[i]);
		log_info(BK_TAG, "topic %s deleted as on the master", gone[i]);
	}
	free(gone);
}

/*
 * A slave applies what its sync fetched from the master: topics created,
 * updated or deleted as the master has them; its subscription groups; a committed offset raised where the
 * master's is ahead (never lowered: consumers that committed here while the
 * master was away keep their progress; docs/replication.md).
 */
void
bk_slave_sync_apply(struct bk_ctl *x)
{
	struct meta_topic *ts = NULL;
	struct meta_offset *os = NULL;
	size_t tl, ol, dl, gl, n = 0;
	char *tj, *oj, *dj, *gj;

	if (x->sync == NULL)
		return;
	bk_sync_take(x->sync, BK_SYNC_TOPICS, &tj, &tl);
	bk_sync_take(x->sync, BK_SYNC_OFFSETS, &oj, &ol);
	bk_sync_take(x->sync, BK_SYNC_DELAYS, &dj, &dl);
	bk_sync_take(x->sync, BK_SYNC_GROUPS, &gj, &gl);
	if (tj != NULL && meta_topics_parse(tj, tl, &ts, &n, NULL) == 0) {
		/* topics.json once for all of them, not once a topic */
		x->save_deferred = true;
		for (size_t i = 0; i < n; i++) {
			const struct bk_topic *t =
				bk_topic_find(&x->bk, ts[i].name, strlen(ts[i].name));
			int err;

			if (t != NULL && !topic_differs(t, &ts[i]))
				continue;
			err = bk_ctl_topic_put(x, &ts[i], true);
			if (err)
				log_warn(BK_TAG, "topic %s from the master: %s", ts[i].name,
					 strerror(-err));
			else
				log_info(BK_TAG, "topic %s %s as on the master", ts[i].name,
					 t ? "updated" : "created");
		}
		(void)bk_ctl_topics_save_deferred(x); /* logged; saved again with the next change */
		topics_gone(x, ts, n);
	} else if (tj != NULL) {
		log_warn_ratelimited(BK_TAG, "the master's topic configs do not parse");
	}
	free(ts);
	free(tj);
	n = 0;
	if (oj != NULL && meta_offsets_parse(oj, ol, &os, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			const struct bk_topic *t =
				bk_topic_find(&x->bk, os[i].topic, strlen(os[i].topic));
			int64_t here;

			if (t == NULL || os[i].queue_id >= t->nq)
				continue;
			here = bk_core_offset_peek(&x->bk.cores[t->core[os[i].queue_id]],
						   os[i].topic, os[i].group, os[i].queue_id);
			if (os[i].offset > here &&
			    bk_rmt_offset_put(x->rmt, os[i].topic, os[i].group, os[i].queue_id,
					      os[i].offset, true) != 0)
				break; /* a core's ring is full: the next round catches up */
		}
	} else if (oj != NULL) {
		log_warn_ratelimited(BK_TAG, "the master's consumer offsets do not parse");
	}
	free(os);
	free(oj);
	delays_apply(x, dj, dl);
	free(dj);
	if (gj != NULL)
		bk_group_sync_apply(x, gj, gl);
	free(gj);
}

/* A slave learns its master from the NameServer unless haMasterAddress names it. */
void
bk_slave_follow_poll(struct bk_ctl *x)
{
	char ha[CTL_BREG_ADDR_MAX];
	char addr[CTL_BREG_ADDR_MAX];

	bool known;
	uint64_t now = clk_mono_ns() / 1000000;

	/* The control loop turns often under remoting load: look ten times a second. */
	if (x->follow == NULL || x->master_fixed || x->breg == NULL ||
	    now - x->follow_poll_ms < 100)
		return;
	x->follow_poll_ms = now;
	known = ctl_breg_master(x->breg, ha, sizeof(ha), addr, sizeof(addr)) && ha[0] != '\0';
	if (known)
		bk_follow_set_master(x->follow, ha);
	/*
	 * No master named yet (it registered after us), or it is unreachable
	 * (moved?): register again soon rather than in registerNameServerPeriod,
	 * since the answer names the master.
	 */
	if ((!known && now - x->follow_kick_ms >= 1000) ||
	    (!bk_follow_connected(x->follow) && now - x->follow_kick_ms >= 5000)) {
		x->follow_kick_ms = now;
		ctl_breg_kick(x->breg);
	}
}

void
bk_slave_report(const struct bk_ctl *x)
{
	for (uint32_t i = 0; x->follow && i < x->bk.ncores; i++) {
		uint64_t end;
		uint64_t bytes;
		struct bk_follow_lag g;

		bk_follow_stats(x->follow, i, &end, &bytes, &g);
		log_info(BK_TAG,
			 "shard %u followed: %" PRIu64 " bytes copied, at %" PRIu64
			 " of the master's %" PRIu64 "; lag %" PRIu64 " bytes (%" PRIu64
			 " ms), at most %" PRIu64 " bytes (%" PRIu64 " ms); %" PRIu64
			 " ms waiting for new segments",
			 i, bytes, clog_written(store_clog(x->bk.store, i)), end,
			 atomic_load_relaxed(&g.bytes), atomic_load_relaxed(&g.ms),
			 atomic_load_relaxed(&g.max_bytes), atomic_load_relaxed(&g.max_ms),
			 atomic_load_relaxed(&g.seg_wait_ms));
	}
}
