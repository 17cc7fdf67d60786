// SPDX-License-Identifier: Apache-2.0
/*
 * push_group.c - a push consumer's queues in its group (push_priv.h): each
 * rebalance_ms the member list (rebalance.c) decides which queues this
 * member owns; queues it gives up stop and have their offsets committed,
 * new ones take a free slot and start; an orderly consumer also holds the
 * broker's lock on each of its queues (LOCK_BATCH_MQ, renewed every 20 s)
 * and lets go of a queue only after its last message was consumed here.
 *
 * Context: the push consumer's control thread, except where said.
 */
#include <stdlib.h>
#include <string.h>

#include "client_priv.h"
#include "common/clock.h"
#include "push_priv.h"
#include "sprocket/consumer.h"

/* A slot for a new queue. Context: control thread, p->lock held. */
static struct pq *
slot_take(struct sp_push *p)
{
	for (size_t i = 0; i < p->n_q; i++)
		if (!p->qs[i].used)
			return &p->qs[i];
	return p->n_q < p->cap_q ? &p->qs[p->n_q++] : NULL;
}

static bool
same_mq(const struct sp_mq *a, const struct sp_mq *b)
{
	return a->queue_id == b->queue_id && strcmp(a->broker, b->broker) == 0 &&
	       strcmp(a->topic, b->topic) == 0;
}

/*
 * Commit what was consumed of @q (a queue being given up). Context: control
 * thread. Return: true when the broker has it (or there was nothing to commit).
 */
static bool
commit_one(struct sp_push *p, struct pq *q)
{
	int64_t off;
	int err;

	pthread_mutex_lock(&p->lock);
	off = q->consumed;
	if (!q->have_offset || off == q->committed) {
		pthread_mutex_unlock(&p->lock);
		return true;
	}
	pthread_mutex_unlock(&p->lock);
	err = sp_update_offset(p->c, p->group, &q->mq, off);
	if (err) {
		sp__log(p->c, SP_LOG_WARN, "commit offset %lld of %s/%d: %s", (long long)off,
			q->mq.topic, (int)q->mq.queue_id, sp_strerror(err));
		return false;
	}
	pthread_mutex_lock(&p->lock);
	q->committed = off;
	pthread_mutex_unlock(&p->lock);
	return true;
}

/*
 * This member's share of @topic's queues for members @ids: queues it no
 * longer owns stop (their offsets committed at once), new ones start.
 * Context: control thread.
 */
static void
rebalance_topic(struct sp_push *p, const char *topic, bool retry, char *const *ids, size_t n)
{
	struct sp_mq *mqs;
	size_t nq, nadd = 0, ndrop = 0, ntook = 0;
	bool *mine;
	struct pq **add, **drop;

	if (sp_topic_queues(p->c, topic, true, &mqs, &nq) != 0)
		return; /* the retry topic before the first heartbeat created it */
	mine = calloc(nq + 1, sizeof(*mine));
	add = calloc(nq + 1, sizeof(*add));
	drop = calloc(p->cap_q + 1, sizeof(*drop));
	if (!mine || !add || !drop ||
	    sp__rbl_allocate(p->cfg.allocate, mqs, nq, ids, n, sp__rbl_cid(&p->rbl), mine) != 0)
		goto out;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_q; i++) {
		struct pq *q = &p->qs[i];
		size_t k;

		if (!q->used || q->dropped || q->retry != retry || strcmp(q->mq.topic, topic) != 0)
			continue;
		for (k = 0; k < nq && !same_mq(&mqs[k], &q->mq); k++)
			;
		if (k < nq && mine[k]) {
			mine[k] = false; /* kept: nothing to add */
			continue;
		}
		q->dropped = true;
		drop[ndrop++] = q;
	}
	for (size_t k = 0; k < nq; k++) {
		struct pq *q;
		bool draining = false;

		if (!mine[k])
			continue;
		for (size_t i = 0; i < p->n_q && !draining; i++)
			draining =
				p->qs[i].used && p->qs[i].dropped && same_mq(&p->qs[i].mq, &mqs[k]);
		if (draining) {
			/* its old slot still has a PULL or an answer out: take it once freed
			 * (sp__push_free_dropped() asks for the next round at once) */
			continue;
		}
		q = slot_take(p);
		if (q == NULL) {
			sp__log(p->c, SP_LOG_WARN, "group %s: no room for queue %s/%s/%d", p->group,
				mqs[k].topic, mqs[k].broker, (int)mqs[k].queue_id);
			continue;
		}
		memset(q, 0, sizeof(*q));
		q->p = p;
		q->mq = mqs[k];
		q->worker = (unsigned)((size_t)(q - p->qs) % p->n_w);
		q->retry = retry;
		q->used = true;
		add[nadd++] = q;
	}
	pthread_mutex_unlock(&p->lock);
	ntook = nadd;
	for (size_t i = 0; i < ndrop; i++)
		commit_one(p, drop[i]);
	if (p->cfg.orderly && nadd) {
		/* pulled once locked: lock_round() now, then the control loop starts them */
		pthread_mutex_lock(&p->lock);
		p->lock_next_ns = 0;
		pthread_mutex_unlock(&p->lock);
		nadd = 0;
	}
	for (size_t i = 0; i < nadd; i++) {
		if (sp__push_start_offset(p, add[i]) == 0) {
			sp__push_issue_pull(add[i]);
		} else {
			pthread_mutex_lock(&p->lock);
			add[i]->retry_at_ns = clk_mono_ns() + RETRY_NS;
			pthread_mutex_unlock(&p->lock);
		}
	}
	if (ntook || ndrop)
		sp__log(p->c, SP_LOG_INFO,
			"group %s: %zu member(s), %s: took %zu queue(s), gave up %zu", p->group, n,
			topic, ntook, ndrop);
out:
	free(drop);
	free(add);
	free(mine);
	free(mqs);
}

/* A heartbeat, the member list, and this member's queues. Context: control thread. */
void
sp__push_rebalance(struct sp_push *p, uint64_t now)
{
	struct sp__rbl_group g = {.group = p->group,
				  .topic = p->topic,
				  .expr = p->expr,
				  .retry_topic = p->retry_topic,
				  .from = p->cfg.from};
	char **ids;
	size_t n;
	int err;

	pthread_mutex_lock(&p->lock);
	if (now < p->rbl_next_ns) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->rbl_next_ns = now + (uint64_t)p->cfg.rebalance_ms * 1000000ull;
	pthread_mutex_unlock(&p->lock);
	err = sp__rbl_members(&p->rbl, &g, &ids, &n);
	if (err) {
		/* keep what it has: the brokers will be asked again next round */
		sp__log(p->c, SP_LOG_WARN, "group %s: member list: %s", p->group, sp_strerror(err));
		return;
	}
	rebalance_topic(p, p->topic, false, ids, n);
	if (p->retry_topic[0])
		rebalance_topic(p, p->retry_topic, true, ids, n);
	sp__rbl_ids_free(ids, n);
}

/*
 * Orderly: take or renew the broker's lock on every queue this member owns,
 * every LOCK_RENEW_NS, or every LOCK_RETRY_NS while one is not locked.
 * Context: control thread.
 */
void
sp__push_lock_round(struct sp_push *p, uint64_t now)
{
	struct sp_mq *mqs;
	struct pq **qs;
	bool *ok, *asked;
	size_t n = 0;
	bool missing = false;

	pthread_mutex_lock(&p->lock);
	if (now < p->lock_next_ns) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	mqs = calloc(p->cap_q + 1, sizeof(*mqs));
	qs = calloc(p->cap_q + 1, sizeof(*qs));
	ok = calloc(p->cap_q + 1, sizeof(*ok));
	asked = calloc(p->cap_q + 1, sizeof(*asked));
	for (size_t i = 0; mqs && qs && ok && asked && i < p->n_q; i++)
		if (p->qs[i].used && !p->qs[i].dropped) {
			qs[n] = &p->qs[i];
			mqs[n++] = p->qs[i].mq;
		}
	pthread_mutex_unlock(&p->lock);
	if (n && sp__rbl_lock(&p->rbl, p->group, mqs, n, true, ok, asked) != 0)
		sp__log(p->c, SP_LOG_WARN, "group %s: some queue locks not asked", p->group);
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		if (qs[i]->dropped)
			continue;
		if (!asked[i]) {
			/* no answer: neither kept nor lost; LOCK_LIVE_NS stops it if it lasts */
			missing = true;
			continue;
		}
		if (ok[i]) {
			qs[i]->locked_ns = now;
			/* (again) ours: its first PULL (or offset), or the next after a loss;
			 * a PULL still out of the lost epoch is discarded and asks again */
			if (!qs[i]->locked)
				qs[i]->retry_at_ns = 1;
		} else {
			missing = true;
			if (qs[i]->locked)
				qs[i]->lock_epoch++;
		}
		qs[i]->locked = ok[i];
	}
	p->lock_next_ns = now + (missing || !mqs ? LOCK_RETRY_NS : LOCK_RENEW_NS);
	pthread_mutex_unlock(&p->lock);
	free(asked);
	free(ok);
	free(qs);
	free(mqs);
}

/* Slots of queues given up, idle now: their last consumed offset committed, then free. */
void
sp__push_free_dropped(struct sp_push *p)
{
	for (size_t i = 0; i < p->n_q; i++) {
		struct pq *q = &p->qs[i];
		bool idle;

		pthread_mutex_lock(&p->lock);
		idle = q->used && q->dropped && !q->pulling && q->inwork == 0;
		pthread_mutex_unlock(&p->lock);
		if (!idle)
			continue;
		/* a message that was in the callback at the drop; the next owner starts
		 * after the last message consumed here, so unlock only once committed
		 * (else the broker's lock expires first) */
		if (!commit_one(p, q))
			sp__log(p->c, SP_LOG_WARN,
				"group %s: %s/%s/%d given up uncommitted: left locked until "
				"the broker's lock expires",
				p->group, q->mq.topic, q->mq.broker, (int)q->mq.queue_id);
		else if (q->locked &&
			 sp__rbl_lock(&p->rbl, p->group, &q->mq, 1, false, NULL, NULL) != 0)
			sp__log(p->c, SP_LOG_WARN,
				"group %s: unlock of %s/%s/%d failed: its next "
				"owner waits for the broker's lock expiry",
				p->group, q->mq.topic, q->mq.broker, (int)q->mq.queue_id);
		pthread_mutex_lock(&p->lock);
		q->used = false;
		q->locked = false;
		p->rbl_next_ns = 0; /* a queue waiting for this slot's end is taken now */
		pthread_mutex_unlock(&p->lock);
	}
}

void
sp__push_unlock_all(struct sp_push *p)
{
	for (size_t i = 0; i < p->n_q; i++)
		if (p->qs[i].used && p->qs[i].locked &&
		    sp__rbl_lock(&p->rbl, p->group, &p->qs[i].mq, 1, false, NULL, NULL) != 0)
			sp__log(p->c, SP_LOG_WARN, "group %s: unlock at stop failed", p->group);
}
