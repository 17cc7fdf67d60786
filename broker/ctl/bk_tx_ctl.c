// SPDX-License-Identifier: Apache-2.0
/*
 * bk_tx_ctl.c - transactions, the control side (bk_ctl.h): the keys, the
 * half and op topics, transcheck, and each core's state rebuilt at start
 * (the cores resolve, bk_tx.c; the remoting port asks, bk_rmt_tx.c).
 *
 * transcheck holds, per core, the last progress the core published: every
 * half below `base` is resolved, every op unit below `opBase` names a half
 * below base, and every commit before `logOffset` has its op record. At
 * start the state of the halves from base up comes from the op units from
 * opBase up, and from the commits in the log from logOffset on (a crash
 * between a commit and its op record): what is resolved stays resolved,
 * whatever the crash lost of the progress.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bk_ctl.h"
#include "common/log.h"
#include "store/meta_timer.h"
#include "wire/record.h"

#define TX_HEADER "# queue base opBase logOffset\n"

int
bk_tx_conf(struct bk_ctl *x)
{
	struct bk_conf *conf = &x->bk.conf;

	conf->tx_reject = cfg_get_bool(x->cfg, "rejectTransactionMessage");
	conf->tx_timeout_ms = (uint64_t)cfg_get_int(x->cfg, "transactionTimeOut");
	conf->tx_check_max = (uint32_t)cfg_get_int(x->cfg, "transactionCheckMax");
	conf->tx_check_ms = (uint64_t)cfg_get_int(x->cfg, "transactionCheckInterval");
	return 0;
}

struct commit_scan {
	struct store *st;
	uint32_t shard;
	struct bk_tx *t;
	uint64_t hmax;
	uint64_t found;
};

/*
 * A commit in the log whose half is this core's: resolved (its op record
 * may have been lost to a crash). A copy counts only with its half's
 * UNIQ_KEY (a SEND could carry the property by itself).
 */
static int
commit_seen(void *arg, const struct wire_msg *m)
{
	struct commit_scan *cs = arg;
	const uint8_t *hrec;
	struct wire_msg h;
	uint64_t src;
	long hn;

	if (!wire_props_get_uint(m->props, m->props_len, BK_TX_HALF_PROP, &src) || src > INT64_MAX)
		return 0;
	hn = store_get_phys(cs->st, (int64_t)src, &hrec);
	if (hn < 0 || wire_rec_decode(hrec, (size_t)hn, 0, &h) < 0 ||
	    h.queue_id != (int32_t)cs->shard || h.queue_offset < 0 ||
	    h.topic_len != sizeof(BK_TX_HALF_TOPIC) - 1 ||
	    memcmp(h.topic, BK_TX_HALF_TOPIC, h.topic_len) != 0 ||
	    bk_uniq_hash(&h) != bk_uniq_hash(m))
		return 0;
	if ((uint64_t)h.queue_offset >= cs->t->base && (uint64_t)h.queue_offset < cs->hmax) {
		cs->t->st[(uint64_t)h.queue_offset % BK_TX_WINDOW] |= 1;
		cs->found++;
	}
	return 0;
}

/* Core @i's state from its queues, @mk (transcheck) and its log. */
static int
rebuild(struct bk_ctl *x, uint32_t i, const struct meta_timer_mark *mk, struct bk_tx *t)
{
	struct store *st = x->bk.store;
	const struct cq *oq = store_queue_cq(t->oq);
	uint64_t hmin = store_queue_min(st, t->hq), hmax = store_queue_max(st, t->hq);
	uint64_t omin = cq_min(oq), omax = cq_max(oq), ops = 0, commits, doubt = 0;
	bool have = mk->done_ms >= 0;

	t->base = have ? (uint64_t)mk->done_ms : hmin;
	t->base = SP_MIN(SP_MAX(t->base, hmin), hmax);
	t->op_base = have ? mk->done_qoff : omin;
	t->op_base = SP_MIN(SP_MAX(t->op_base, omin), omax);
	if (hmax - t->base > BK_TX_WINDOW) {
		log_err(BK_TAG,
			"transactions, core %u: %" PRIu64 " halves in doubt, more than %u: the "
			"oldest %" PRIu64 " are no longer checked back",
			i, hmax - t->base, BK_TX_WINDOW, hmax - t->base - BK_TX_WINDOW);
		t->base = hmax - BK_TX_WINDOW;
	}
	for (uint64_t o = t->op_base; o < omax; o++) {
		struct cq_unit u;

		if (cq_get(oq, o, &u) != 0 || u.tag_hash < 0)
			continue;
		if ((uint64_t)u.tag_hash >= t->base && (uint64_t)u.tag_hash < hmax) {
			t->st[(uint64_t)u.tag_hash % BK_TX_WINDOW] |= 1;
			ops++;
		}
	}
	/* A saved offset past the recovered end (it cannot be: published durable) reads from the end */
	{
		struct commit_scan cs = {.st = st, .shard = i, .t = t, .hmax = hmax};
		int err = bk_log_scan(
			st, i, have ? SP_MIN(mk->done_log, clog_written(store_clog(st, i))) : 0,
			commit_seen, &cs);

		if (err != 0)
			return err;
		commits = cs.found;
	}
	while (t->base < hmax && (t->st[t->base % BK_TX_WINDOW] & 1)) {
		t->st[t->base % BK_TX_WINDOW] = 0;
		t->base++;
	}
	for (uint64_t q = t->base; q < hmax; q++)
		doubt += !(t->st[q % BK_TX_WINDOW] & 1);
	atomic_store_relaxed(&t->pub_base, t->base);
	atomic_store_relaxed(&t->pub_op_base, t->op_base);
	atomic_store_relaxed(&t->pub_log, have ? mk->done_log : 0);
	if (hmax > hmin)
		log_info(BK_TAG,
			 "transactions, core %u: %" PRIu64 " halves in doubt (offsets %" PRIu64
			 "..%" PRIu64 "), %" PRIu64 " resolved by op records, %" PRIu64
			 " by commits found in the log",
			 i, doubt, t->base, hmax, ops, commits);
	return 0;
}

int
bk_tx_setup(struct bk_ctl *x)
{
	struct bk *bk = &x->bk;
	struct meta_timer_mark mk[META_TIMER_QUEUES_MAX];
	const struct bk_topic *ht, *ot;
	int err;

	snprintf(x->tx_path, sizeof(x->tx_path), "%s/config/transcheck",
		 cfg_get_str(x->cfg, "storePathRootDir"));
	/* A slave copies the transaction topics with its log and resolves nothing. */
	if (bk->conf.role == BK_ROLE_SLAVE)
		return 0;
	if (bk->ncores > META_TIMER_QUEUES_MAX)
		return -EINVAL;
	err = bk_ctl_topic_ensure(x, BK_TX_HALF_TOPIC, bk->ncores, &ht);
	if (err == 0)
		err = bk_ctl_topic_ensure(x, BK_TX_OP_TOPIC, bk->ncores, &ot);
	if (err)
		return err;
	err = meta_timer_load(&store_io_posix, x->tx_path, mk, META_TIMER_QUEUES_MAX);
	if (err) {
		log_err(BK_TAG, "%s: %s", x->tx_path, strerror(-err));
		return err;
	}
	for (uint32_t i = 0; i < bk->ncores; i++) {
		struct bk_core *c = &bk->cores[i];
		struct bk_tx *t = aligned_alloc(64, sizeof(*t));

		if (t == NULL)
			return -ENOMEM;
		memset(t, 0, sizeof(*t));
		c->tx = t;
		t->st = calloc(BK_TX_WINDOW, 1);
		if (t->st == NULL)
			return -ENOMEM;
		t->hq = ht->sq[i];
		t->oq = ot->sq[i];
		/* an op record resolves a half that may hold the oldest segment back (disk full) */
		store_queue_keep_writable(t->oq);
		err = rebuild(x, i, &mk[i], t);
		if (err)
			return err;
	}
	log_info(BK_TAG,
		 "transactions: halves checked back after %" PRIu64 " ms, every %" PRIu64
		 " ms, at most %u times%s; %s",
		 bk->conf.tx_timeout_ms, bk->conf.tx_check_ms, bk->conf.tx_check_max,
		 bk->conf.tx_reject ? " (rejectTransactionMessage: new halves refused)" : "",
		 x->tx_path);
	return 0;
}

void
bk_tx_progress(const struct bk_tx *t, uint64_t *base, uint64_t *op_base, uint64_t *log)
{
	for (;;) {
		uint32_t s0 = atomic_load_acquire(&t->seq);

		*base = atomic_load_relaxed(&t->pub_base);
		*op_base = atomic_load_relaxed(&t->pub_op_base);
		*log = atomic_load_relaxed(&t->pub_log);
		atomic_thread_fence(memory_order_acquire);
		if ((s0 & 1) == 0 && atomic_load_relaxed(&t->seq) == s0)
			return;
	}
}

int
bk_tx_save(struct bk_ctl *x)
{
	struct meta_timer_mark mk[META_TIMER_QUEUES_MAX];
	int err;

	if (x->bk.cores == NULL || x->bk.cores[0].tx == NULL)
		return 0;
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		uint64_t base;

		bk_tx_progress(x->bk.cores[i].tx, &base, &mk[i].done_qoff, &mk[i].done_log);
		mk[i].done_ms = (int64_t)base;
	}
	err = meta_timer_save(&store_io_posix, x->tx_path, TX_HEADER, mk, x->bk.ncores);
	if (err)
		log_err(BK_TAG, "saving %s: %s", x->tx_path, strerror(-err));
	return err;
}

void
bk_tx_report(const struct bk_ctl *x)
{
	for (uint32_t i = 0; x->bk.cores && i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];

		if (c->st.tx_halves || c->st.tx_commits || c->st.tx_rollbacks || c->st.tx_checks)
			log_info(BK_TAG,
				 "core %u transactions: halves %" PRIu64 " commits %" PRIu64
				 " rollbacks %" PRIu64 " again %" PRIu64 " checks %" PRIu64
				 " discarded %" PRIu64,
				 i, c->st.tx_halves, c->st.tx_commits, c->st.tx_rollbacks,
				 c->st.tx_again, c->st.tx_checks, c->st.tx_discarded);
	}
}

void
bk_tx_fini(struct bk_ctl *x)
{
	for (uint32_t i = 0; x->bk.cores && i < x->bk.ncores; i++) {
		struct bk_core *c = &x->bk.cores[i];

		if (c->tx != NULL) {
			free(c->tx->st);
			free(c->tx);
			c->tx = NULL;
		}
	}
}
