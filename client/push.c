// SPDX-License-Identifier: Apache-2.0
/*
 * push.c - the push consumer: long polling, consume threads, offsets.
 *
 * Each queue this member owns (its share of the group, found each
 * rebalance_ms by rebalance.c from the brokers' member list, or fixed:
 * member_index of member_count) has one PULL in flight at a
 * time, with SUSPEND so the broker parks it until messages arrive. The I/O
 * thread hands each answer, undecoded, to the consume thread that serves
 * the queue (queue i -> thread i % threads), so a queue's messages are
 * consumed one at a time in queue order while different queues run in
 * parallel. That thread decodes the answer, issues the next PULL at once
 * unless the queue's backlog (pulled, not yet consumed) is over
 * max_backlog, then runs the callback on each message. A message the
 * callback fails is sent back (SEND_BACK: %RETRY%<group>, maxReconsumeTimes
 * from the config) and counts as consumed once the broker took it; while
 * the broker answers SYSTEM_BUSY (it is creating the retry topic) the send
 * back is tried again after a pause, and when it keeps failing the message
 * is consumed again here after CONSUME_LATER_MS, as RocketMQ's
 * submitConsumeRequestLater does: a failed message is never dropped.
 *
 * Retry topic: like RocketMQ's, the consumer also subscribes to
 * %RETRY%<group> (tag expression "*": the messages were filtered before they
 * failed). That topic exists only after the group's first SEND_BACK, so the
 * control thread looks its route up every RETRY_ROUTE_NS (at once after a
 * send back) until it appears, then adds its share of the retry queues
 * (fixed membership; a rebalancing member allocates them each round like
 * the topic's), from the first offset when the group has none committed.
 *
 * Rebalancing: a queue given up is marked dropped: its answers are dropped
 * unread, its consume thread stops before the next message, its offset is
 * committed at once; its slot is freed (the last consumed offset committed
 * again) once no PULL or answer of it is out. New queues take free slots. A message from it is handed to the callback
 * with its original topic, from the RETRY_TOPIC property.
 *
 * Offsets: a queue's consumed offset is the offset after the last message
 * consumed; the PULL carries it (COMMIT_OFFSET) and the control thread
 * commits every changed one with UPDATE_OFFSET each commit_interval_ms and
 * at stop. A group with no committed offset starts from the first or last
 * offset or a timestamp (consume_from). Failed pulls are re-issued by the
 * control thread after a second.
 *
 * DESIGN
 * Lifetime: PULLs parked on the broker cannot be cancelled, and may come
 * back after sp_push_stop() returned. The consumer is therefore refcounted:
 * one reference for its owner and one per PULL in flight; the last one
 * frees it. After stop, answers are dropped on arrival.
 *
 * Ownership: struct sp_push fields are guarded by p->lock except the
 * immutable config and rbl (control thread); each struct pq's consume-side
 * fields (next_pull, consumed) are written by its consume thread under
 * p->lock; used, dropped and the slot's queue by the control thread under
 * p->lock; inwork by the I/O thread (+1) and the consume thread (-1) under
 * p->lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"
#include "common/clock.h"
#include "sprocket/consumer.h"

#include "push_priv.h"

static void
push_free(struct sp_push *p)
{
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->ctl_cond);
	for (unsigned i = 0; i < p->n_w; i++)
		pthread_cond_destroy(&p->w[i].cond);
	free(p->w);
	free(p->qs);
	free(p->expr);
	sp__push_local_close(p);
	free(p);
}

/* Drops one reference; the caller holds p->lock, which this releases. */
static void
unref_unlock(struct sp_push *p)
{
	bool last = --p->refs == 0;

	pthread_mutex_unlock(&p->lock);
	if (last)
		push_free(p);
}

/* ---- pulling ---- */

static void pull_done(struct sp__call *call);

/* Starts the next PULL of @q. Context: p->lock not held. */
void
sp__push_issue_pull(struct pq *q)
{
	struct sp_push *p = q->p;
	struct sp_pull_req req = {
		.max_msgs = p->cfg.pull_batch,
		.expr = q->retry ? "*" : p->expr,
		.suspend_ms = p->cfg.suspend_ms,
		.group = p->group,
	};
	struct sp__call *call = sp__call_new();
	int err;

	pthread_mutex_lock(&p->lock);
	if (p->stopping || q->pulling || q->dropped || !q->used || (p->cfg.orderly && !q->locked)) {
		pthread_mutex_unlock(&p->lock);
		sp__call_free(call);
		return;
	}
	req.offset = q->next_pull;
	if (q->consumed > q->committed && !p->cfg.broadcast)
		req.commit_offset = q->consumed; /* broadcast: offsets stay on this member */
	q->pulling = true;
	q->pull_epoch = q->lock_epoch;
	q->paused = false;
	p->refs++;
	pthread_mutex_unlock(&p->lock);
	err = call ? sp__pull_prepare(p->c, &q->mq, &req, call) : -ENOMEM;
	if (!err && q->redirect_port)
		call->dst.port = q->redirect_port; /* written by this queue's threads, in turn */
	if (err) {
		sp__log(p->c, SP_LOG_WARN, "pull %s/%s/%d: %s", q->mq.topic, q->mq.broker,
			(int)q->mq.queue_id, sp_strerror(err));
		sp__call_free(call);
		pthread_mutex_lock(&p->lock);
		q->pulling = false;
		q->retry_at_ns = clk_mono_ns() + RETRY_NS;
		unref_unlock(p);
		return;
	}
	call->done = pull_done;
	call->arg = q;
	sp__call_submit(p->c, call);
}

/* Context: the I/O thread: hand the answer to the queue's consume thread. */
static void
pull_done(struct sp__call *call)
{
	struct pq *q = call->arg;
	struct sp_push *p = q->p;
	struct item *it = malloc(sizeof(*it));
	struct worker *w = &p->w[q->worker];

	pthread_mutex_lock(&p->lock);
	if (p->stopping || q->dropped || !it) {
		q->pulling = false;
		q->retry_at_ns = clk_mono_ns() + RETRY_NS;
		free(it);
		sp__call_free(call);
		unref_unlock(p);
		return;
	}
	q->inwork++;
	it->next = NULL;
	it->q = q;
	it->call = call;
	if (w->tail)
		w->tail->next = it;
	else
		w->head = it;
	w->tail = it;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&p->lock);
}

/* ---- consuming ---- */

/* Sleeps @ms unless the consumer stops. Return: false when it is stopping. */
static bool
pause_ms(struct sp_push *p, unsigned ms)
{
	for (unsigned t = 0;; t += 10) {
		bool stop;

		pthread_mutex_lock(&p->lock);
		stop = p->stopping;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			return false;
		if (t >= ms)
			return true;
		usleep(10000);
	}
}

/* SEND_BACK of @m. Return: true once the broker took it. */
static bool
send_back(struct pq *q, const struct sp_msg_ext *m)
{
	struct sp_push *p = q->p;
	unsigned busy_ms = 0;
	unsigned delay = 1;
	int err = 0;

	for (int tries = 0; tries < SEND_BACK_TRIES;) {
		err = sp_send_back(p->c, p->group, m, q->mq.broker, 0, p->cfg.max_reconsume);
		if (!err) {
			pthread_mutex_lock(&p->lock);
			p->retry_check_ns = 0; /* the retry topic exists now */
			pthread_cond_signal(&p->ctl_cond);
			pthread_mutex_unlock(&p->lock);
			return true;
		}
		if (err == SP_ERR_STATUS(WIRE_DP_ST_SYSTEM_BUSY) && busy_ms < SEND_BACK_BUSY_MS) {
			/* the broker is creating %RETRY%<group>, or a table is full */
			busy_ms += delay;
		} else {
			tries++;
			delay = 100;
		}
		if (!pause_ms(p, delay))
			break;
		delay = SP_MIN(delay * 2, 100u);
	}
	sp__log(p->c, SP_LOG_WARN, "send back of %s (queue %d offset %lld) failed: %s", m->msg_id,
		(int)q->mq.queue_id, (long long)m->queue_offset, sp_strerror(err));
	return false;
}

/*
 * Orderly: may @q's consume thread go on with the batch read under lock epoch
 * @epoch? Its lock held, fresh (renewed within LOCK_LIVE_NS), the same epoch.
 * Always true for other consumers. Context: p->lock held.
 */
static bool
orderly_ok(const struct pq *q, unsigned epoch)
{
	return !q->p->cfg.orderly || (q->locked && q->lock_epoch == epoch &&
				      clk_mono_ns() - q->locked_ns <= LOCK_LIVE_NS);
}

/* Orderly, out of tries: SEND_BACK with delay level -1, to %DLQ%<group> (RocketMQ's). */
static bool
send_dlq(struct pq *q, const struct sp_msg_ext *m)
{
	struct sp_push *p = q->p;
	int err = sp_send_back(p->c, p->group, m, q->mq.broker, -1, p->cfg.max_reconsume);

	if (err)
		sp__log(p->c, SP_LOG_WARN, "dead-letter of %s (queue %d offset %lld) failed: %s",
			m->msg_id, (int)q->mq.queue_id, (long long)m->queue_offset,
			sp_strerror(err));
	return err == 0;
}

/*
 * Return: true when @m is consumed (or sent back); false when it was not: the
 * consumer is stopping, or (orderly) the queue is no longer this member's.
 */
static bool
consume_one(struct pq *q, const struct sp_msg_ext *m, unsigned epoch)
{
	struct sp_push *p = q->p;
	char topic[SP_TOPIC_MAX + 1];
	struct sp_msg_ext view;
	const struct sp_msg_ext *cm = m;
	const char *v;
	size_t vl;

	if (q->retry && sp_msg_prop(m, "RETRY_TOPIC", &v, &vl) && vl > 0 && vl <= SP_TOPIC_MAX) {
		/* the callback sees the topic it subscribed to (RocketMQ's resetRetryTopic) */
		memcpy(topic, v, vl);
		topic[vl] = '\0';
		view = *m;
		view.topic = topic;
		cm = &view;
	}
	for (int32_t tries = 0;; tries++) {
		if (p->cfg.fn(p->cfg.arg, &q->mq, cm) == SP_CONSUME_SUCCESS)
			return true;
		if (p->cfg.orderly && tries < p->cfg.max_reconsume) {
			bool mine;

			/* in place: the next message waits (RocketMQ's SUSPEND_CURRENT_QUEUE) */
			if (!pause_ms(p, CONSUME_LATER_MS))
				return false;
			pthread_mutex_lock(&p->lock);
			mine = !q->dropped && orderly_ok(q, epoch);
			pthread_mutex_unlock(&p->lock);
			if (!mine)
				return false; /* not ours now: its next owner consumes it */
			continue;
		}
		if (p->cfg.broadcast) {
			/* RocketMQ's broadcasting: a failed message is not consumed again */
			sp__log(p->c, SP_LOG_WARN,
				"broadcast: %s (queue %d offset %lld) failed: "
				"dropped",
				m->msg_id, (int)q->mq.queue_id, (long long)m->queue_offset);
			return true;
		}
		if (p->cfg.orderly ? send_dlq(q, m) : send_back(q, m))
			return true;
		/* consume it again here later rather than lose it */
		if (!pause_ms(p, CONSUME_LATER_MS))
			return false;
	}
}

static void
handle(struct worker *w, struct item *it)
{
	struct sp_push *p = w->p;
	struct pq *q = it->q;
	struct sp_pull_result res;
	bool pull_now = false, broke = false;
	unsigned epoch;
	int err = it->call->err;

	if (!err)
		err = sp__pull_parse(p->c, it->call, q->retry ? "*" : p->expr, &res);
	if (err == SP_ERR_STATUS(WIRE_DP_ST_REDIRECT)) {
		struct wire_dp_resp_head h;

		if (wire_dp_resp_head_decode(it->call->resp, it->call->resp_len, &h) == 0 &&
		    q->redirects++ < MAX_REDIRECTS) {
			q->redirect_port = h.redirect_port;
			sp__topic_refresh_soon(p->c, q->mq.topic);
			sp__call_free(it->call);
			pthread_mutex_lock(&p->lock);
			q->pulling = false;
			pthread_mutex_unlock(&p->lock);
			sp__push_issue_pull(q);
			return;
		}
	}
	sp__call_free(it->call);
	pthread_mutex_lock(&p->lock);
	q->pulling = false;
	if (q->dropped) {
		/* rebalanced away: its next owner pulls from the committed offset */
		pthread_mutex_unlock(&p->lock);
		if (!err)
			sp_pull_result_free(&res);
		return;
	}
	if (p->cfg.orderly && (!q->locked || q->pull_epoch != q->lock_epoch)) {
		/* the lock was lost since this PULL went out: read again from the last
		 * message consumed, once locked again (sp__push_lock_round()) */
		q->next_pull = q->consumed;
		q->backlog = 0;
		q->paused = false;
		if (q->locked)
			q->retry_at_ns = 1; /* locked again already: the control loop pulls */
		pthread_mutex_unlock(&p->lock);
		if (!err)
			sp_pull_result_free(&res);
		return;
	}
	if (err) {
		q->retry_at_ns = clk_mono_ns() + RETRY_NS;
		q->redirects = 0;
		pthread_mutex_unlock(&p->lock);
		sp__log(p->c, SP_LOG_WARN, "pull %s/%s/%d: %s", q->mq.topic, q->mq.broker,
			(int)q->mq.queue_id, sp_strerror(err));
		return;
	}
	/* every earlier answer of this queue went through this thread already */
	q->redirects = 0;
	q->next_pull = res.next_offset;
	if (res.status == SP_PULL_FOUND) {
		q->backlog += (unsigned)res.n_msgs;
		if (q->backlog < p->cfg.max_backlog)
			pull_now = true;
		else
			q->paused = true;
	} else {
		/* nothing pulled: earlier batches of this queue are all consumed (same thread) */
		if (res.status == SP_PULL_OFFSET_ILLEGAL)
			q->consumed = res.next_offset;
		else if (q->backlog == 0)
			q->consumed = SP_MAX(q->consumed, res.next_offset);
		pull_now = true;
	}
	pthread_mutex_unlock(&p->lock);
	if (pull_now)
		sp__push_issue_pull(q);
	if (res.status != SP_PULL_FOUND)
		return;
	pthread_mutex_lock(&p->lock);
	epoch = q->lock_epoch;
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < res.n_msgs; i++) {
		bool stop;

		pthread_mutex_lock(&p->lock);
		stop = p->stopping || q->dropped || !orderly_ok(q, epoch);
		pthread_mutex_unlock(&p->lock);
		if (stop || !consume_one(q, &res.msgs[i], epoch)) {
			broke = true;
			break; /* not consumed: redelivered after the committed offset */
		}
		pthread_mutex_lock(&p->lock);
		q->consumed = res.msgs[i].queue_offset + 1;
		q->backlog--;
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_lock(&p->lock);
	if (broke && !p->stopping && !q->dropped) {
		/* orderly, the lock lost or stale mid-batch: the rest is read again from
		 * here once locked anew (a PULL out now is discarded: a new epoch) */
		q->next_pull = q->consumed;
		q->backlog = 0;
		q->paused = false;
		if (q->locked) {
			q->locked = false;
			q->lock_epoch++;
		}
		pull_now = false;
	} else if (!p->stopping && !q->dropped) {
		/* messages the tag re-check dropped count as consumed */
		q->consumed = SP_MAX(q->consumed, res.next_offset);
		pull_now = q->paused && q->backlog < p->cfg.max_backlog / 2;
	} else {
		pull_now = false;
	}
	pthread_mutex_unlock(&p->lock);
	sp_pull_result_free(&res);
	if (pull_now)
		sp__push_issue_pull(q);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct sp_push *p = w->p;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct item *it = w->head;

		if (!it) {
			if (p->stopping)
				break;
			pthread_cond_wait(&w->cond, &p->lock);
			continue;
		}
		w->head = it->next;
		if (!w->head)
			w->tail = NULL;
		if (p->stopping) {
			it->q->inwork--;
			sp__call_free(it->call);
			free(it);
			p->refs--; /* the owner's reference keeps p alive here */
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		handle(w, it);
		pthread_mutex_lock(&p->lock);
		it->q->inwork--;
		free(it);
		p->refs--;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- offsets ---- */

int
sp__push_start_offset(struct sp_push *p, struct pq *q)
{
	int64_t off;
	int err = p->cfg.broadcast ? sp__push_local_get(p, &q->mq, &off)
				   : sp_query_offset(p->c, p->group, &q->mq, &off);

	if (err == SP_ERR_STATUS(WIRE_DP_ST_QUERY_NOT_FOUND) || err == -ENOENT) {
		switch (q->retry ? SP_FROM_FIRST : p->cfg.from) {
		case SP_FROM_FIRST:
			err = sp_min_offset(p->c, &q->mq, &off);
			break;
		case SP_FROM_TIMESTAMP:
			err = sp_search_offset(p->c, &q->mq, p->cfg.from_ts_ms, &off);
			break;
		case SP_FROM_LAST:
		default:
			err = sp_max_offset(p->c, &q->mq, &off);
			break;
		}
	}
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	q->next_pull = off;
	q->consumed = off;
	q->committed = off;
	q->have_offset = true;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static void
commit_all(struct sp_push *p)
{
	if (p->cfg.broadcast) {
		(void)sp__push_local_save(p); /* logged when it fails; retried next time */
		return;
	}
	for (size_t i = 0; i < p->n_q; i++) {
		struct pq *q = &p->qs[i];
		int64_t off;
		int err;

		pthread_mutex_lock(&p->lock);
		off = q->consumed;
		if (!q->used || !q->have_offset || off == q->committed) {
			pthread_mutex_unlock(&p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		err = sp_update_offset(p->c, p->group, &q->mq, off);
		if (err) {
			sp__log(p->c, SP_LOG_WARN, "commit offset %lld of %s/%d: %s",
				(long long)off, q->mq.topic, (int)q->mq.queue_id, sp_strerror(err));
			continue;
		}
		pthread_mutex_lock(&p->lock);
		q->committed = off;
		pthread_mutex_unlock(&p->lock);
	}
}

/*
 * Adds this member's share of %RETRY%<group>'s queues once the topic exists.
 * Context: the control thread.
 */
static void
subscribe_retry(struct sp_push *p, uint64_t now)
{
	struct sp_mq *mqs;
	size_t n;
	size_t first;
	size_t len;
	size_t base = p->n_q;

	if (p->retry_added || !p->retry_topic[0])
		return;
	pthread_mutex_lock(&p->lock);
	if (now < p->retry_check_ns) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->retry_check_ns = now + RETRY_ROUTE_NS;
	pthread_mutex_unlock(&p->lock);
	if (sp_topic_queues(p->c, p->retry_topic, true, &mqs, &n) != 0)
		return; /* no SEND_BACK yet: no retry topic */
	if (n == 0) {
		free(mqs);
		return;
	}
	sp__mq_allocate(n, p->cfg.member_index, p->cfg.member_count, &first, &len);
	len = SP_MIN(len, p->cap_q - base);
	for (size_t i = 0; i < len; i++) {
		struct pq *q = &p->qs[base + i];

		memset(q, 0, sizeof(*q));
		q->p = p;
		q->mq = mqs[first + i];
		q->worker = (unsigned)((base + i) % p->n_w);
		q->retry = true;
		q->used = true;
		if (sp__push_start_offset(p, q) != 0)
			q->retry_at_ns = now + RETRY_NS;
	}
	free(mqs);
	pthread_mutex_lock(&p->lock);
	p->n_q = base + len;
	pthread_mutex_unlock(&p->lock);
	p->retry_added = true;
	sp__log(p->c, SP_LOG_INFO, "group %s: consuming %zu queue(s) of %s", p->group, len,
		p->retry_topic);
	for (size_t i = 0; i < len; i++)
		if (p->qs[base + i].have_offset)
			sp__push_issue_pull(&p->qs[base + i]);
}

static void *
ctl_main(void *arg)
{
	struct sp_push *p = arg;
	uint64_t last_commit = clk_mono_ns();

	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		uint64_t now = clk_mono_ns();
		struct timespec ts;

		pthread_mutex_unlock(&p->lock);
		if (p->dynamic) {
			sp__push_rebalance(p, now);
			sp__push_free_dropped(p);
		} else {
			subscribe_retry(p, now);
		}
		if (p->cfg.orderly)
			sp__push_lock_round(p, now);
		for (size_t i = 0; i < p->n_q; i++) {
			struct pq *q = &p->qs[i];
			bool need_off;
			bool need_pull;

			pthread_mutex_lock(&p->lock);
			if (!q->used || q->dropped) {
				pthread_mutex_unlock(&p->lock);
				continue;
			}
			if (p->cfg.orderly && !q->locked) {
				pthread_mutex_unlock(&p->lock);
				continue; /* no pulls before the broker's lock */
			}
			need_off = !q->have_offset && now >= q->retry_at_ns;
			need_pull = q->have_offset && !q->pulling && !q->paused && q->retry_at_ns &&
				    now >= q->retry_at_ns;
			if (need_pull)
				q->retry_at_ns = 0;
			pthread_mutex_unlock(&p->lock);
			if (need_off) {
				if (sp__push_start_offset(p, q) == 0) {
					sp__push_issue_pull(q);
				} else {
					pthread_mutex_lock(&p->lock);
					q->retry_at_ns = now + RETRY_NS;
					pthread_mutex_unlock(&p->lock);
				}
			}
			if (need_pull)
				sp__push_issue_pull(q);
		}
		if (now - last_commit >= (uint64_t)p->cfg.commit_interval_ms * 1000000ull) {
			commit_all(p);
			last_commit = now;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&p->lock);
		if (!p->stopping)
			pthread_cond_timedwait(&p->ctl_cond, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- start / stop ---- */

/* AllocateMessageQueueAveragely: member @idx of @cnt gets a contiguous range. */
void
sp__mq_allocate(size_t n, unsigned idx, unsigned cnt, size_t *start, size_t *len)
{
	long mod = (long)(n % cnt);
	long avg;
	long st;
	long range;

	if (n <= cnt)
		avg = 1;
	else if (mod > 0 && (long)idx < mod)
		avg = (long)(n / cnt) + 1;
	else
		avg = (long)(n / cnt);
	st = mod > 0 && (long)idx < mod ? (long)idx * avg : (long)idx * avg + mod;
	range = SP_MIN(avg, (long)n - st);
	*start = st < (long)n ? (size_t)st : 0;
	*len = range > 0 ? (size_t)range : 0;
}

int
sp_push_start(struct sp_client *c, const struct sp_push_cfg *cfg, struct sp_push **out)
{
	struct sp_mq *mqs = NULL;
	size_t n = 0;
	size_t first;
	size_t len;
	struct sp_push *p;
	int err;

	if (!c || !cfg || !cfg->group || !cfg->topic || !cfg->fn || !cfg->group[0] ||
	    strlen(cfg->group) > WIRE_DP_GROUP_MAX || strlen(cfg->topic) > SP_TOPIC_MAX)
		return -EINVAL;
	if ((cfg->member_count && cfg->member_index >= cfg->member_count) ||
	    (cfg->broadcast && (cfg->orderly || cfg->member_count)) ||
	    (cfg->allocate != SP_REBALANCE_AVERAGE &&
	     cfg->allocate != SP_REBALANCE_CONSISTENT_HASH))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->c = c;
	p->cfg = *cfg;
	strcpy(p->group, cfg->group);
	strcpy(p->topic, cfg->topic);
	p->expr = strdup(cfg->expr && cfg->expr[0] ? cfg->expr : "*");
	p->cfg.group = p->group;
	p->cfg.topic = p->topic;
	p->cfg.expr = p->expr;
	if (!p->cfg.threads)
		p->cfg.threads = 4;
	p->dynamic = p->cfg.member_count == 0 && !p->cfg.broadcast; /* broadcast: every queue */
	if (!p->cfg.member_count)
		p->cfg.member_count = 1;
	if (!p->cfg.rebalance_ms)
		p->cfg.rebalance_ms = 20000;
	if (!p->cfg.pull_batch)
		p->cfg.pull_batch = 32;
	if (!p->cfg.suspend_ms)
		p->cfg.suspend_ms = 15000;
	if (!p->cfg.commit_interval_ms)
		p->cfg.commit_interval_ms = 5000;
	if (!p->cfg.max_reconsume)
		p->cfg.max_reconsume = 16;
	if (!p->cfg.max_backlog)
		p->cfg.max_backlog = 1000;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->ctl_cond, NULL);
	p->refs = 1;
	if (p->cfg.broadcast) {
		p->cfg.offset_dir = NULL; /* not kept */
		err = sp__push_local_open(p, cfg->offset_dir);
		if (err)
			goto err_free;
	}
	err = -ENOMEM;
	if (!p->expr)
		goto err_free;
	err = sp_topic_queues(c, p->topic, true, &mqs, &n);
	if (err)
		goto err_free;
	p->rbl.c = c;
	if (p->dynamic) {
		/* the first rebalance (control thread, at once) takes the queues; a slot
		 * given up stays taken while its parked PULL is out: room for both */
		first = len = 0;
		p->cap_q = 2 * (n + RETRY_QUEUES_MAX) + 8;
		p->rbl.c = c;
	} else {
		sp__mq_allocate(n, p->cfg.member_index, p->cfg.member_count, &first, &len);
		p->cap_q = len + RETRY_QUEUES_MAX;
	}
	p->qs = calloc(p->cap_q, sizeof(*p->qs));
	/* broadcast: no retry topic (a failed message is dropped, as in RocketMQ) */
	if (!p->cfg.broadcast && strncmp(p->topic, RETRY_PREFIX, strlen(RETRY_PREFIX)) != 0 &&
	    strlen(RETRY_PREFIX) + strlen(p->group) <= SP_TOPIC_MAX)
		snprintf(p->retry_topic, sizeof(p->retry_topic), "%s%s", RETRY_PREFIX, p->group);
	p->n_w = p->cfg.threads;
	p->w = calloc(p->n_w, sizeof(*p->w));
	err = -ENOMEM;
	if (!p->qs || !p->w)
		goto err_free;
	p->n_q = len;
	for (size_t i = 0; i < len; i++) {
		p->qs[i].p = p;
		p->qs[i].mq = mqs[first + i];
		p->qs[i].worker = (unsigned)(i % p->n_w);
		p->qs[i].used = true;
	}
	free(mqs);
	mqs = NULL;
	for (size_t i = 0; i < p->n_q && !p->cfg.orderly; i++) {
		/* orderly: the control loop reads it once the queue is locked */
		err = sp__push_start_offset(p, &p->qs[i]);
		if (err) {
			/* the control thread retries; a broker may be down for now */
			sp__log(c, SP_LOG_WARN, "start offset of %s/%s/%d: %s", p->topic,
				p->qs[i].mq.broker, (int)p->qs[i].mq.queue_id, sp_strerror(err));
			p->qs[i].retry_at_ns = clk_mono_ns() + RETRY_NS;
		}
	}
	for (unsigned i = 0; i < p->n_w; i++) {
		p->w[i].p = p;
		pthread_cond_init(&p->w[i].cond, NULL);
	}
	for (unsigned i = 0; i < p->n_w; i++) {
		err = -pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]);
		if (err) {
			p->n_w = i;
			goto err_stop;
		}
	}
	err = -pthread_create(&p->ctl, NULL, ctl_main, p);
	if (err)
		goto err_stop;
	for (size_t i = 0; i < p->n_q; i++)
		if (p->qs[i].have_offset)
			sp__push_issue_pull(
				&p->qs[i]); /* orderly: not before the control thread locked it */
	*out = p;
	return 0;

err_stop:
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	for (unsigned i = 0; i < p->n_w; i++)
		pthread_cond_signal(&p->w[i].cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n_w; i++)
		pthread_join(p->w[i].th, NULL);
	p->n_w = p->cfg.threads; /* push_free() destroys every condition variable */
err_free:
	free(mqs);
	push_free(p);
	return err;
}

void
sp_push_stop(struct sp_push *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_signal(&p->ctl_cond);
	for (unsigned i = 0; i < p->n_w; i++)
		pthread_cond_signal(&p->w[i].cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->ctl, NULL);
	for (unsigned i = 0; i < p->n_w; i++)
		pthread_join(p->w[i].th, NULL);
	commit_all(p);
	if (p->cfg.orderly)
		sp__push_unlock_all(p); /* the next owners start now */
	if (p->dynamic || p->cfg.orderly)
		sp__rbl_close(&p->rbl, p->dynamic ? p->group : NULL); /* others take its queues */
	pthread_mutex_lock(&p->lock);
	unref_unlock(p); /* PULLs still parked on a broker free it when they return */
}

int
sp_push_queues(struct sp_push *p, struct sp_mq **out, size_t *n)
{
	struct sp_mq *m = calloc(p->cap_q, sizeof(*m));
	size_t cnt;

	if (!m)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	cnt = 0;
	for (size_t i = 0; i < p->n_q; i++)
		if (p->qs[i].used && !p->qs[i].dropped)
			m[cnt++] = p->qs[i].mq;
	pthread_mutex_unlock(&p->lock);
	*out = m;
	*n = cnt;
	return 0;
}
