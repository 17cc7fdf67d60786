// SPDX-License-Identifier: Apache-2.0
/*
 * bk_timer.c - delivery-time timers on the core (docs/messages.md,
 * "Delivery times"); the wheel runs on the timer thread (bk_timer_ctl.c).
 *
 * A SEND with TIMER_DELIVER_MS, __STARTDELIVERTIME (ali-ons'
 * setStartDeliverTime), TIMER_DELAY_SEC or TIMER_DELAY_MS due later than
 * now is stored, as RocketMQ 5 stores it, in rmq_sys_wheel_timer with
 * TIMER_OUT_MS (its due time), REAL_TOPIC and REAL_QID added; its queue is
 * this core's (queue id = core), so the core that took it fires it, into a
 * real queue it owns. One more property, STORE_TIMER_FIRE_PROP, says when
 * the wheel should look at it: its due time, or, when that is further away
 * than timer_roll_ms, a roll: at that time the core writes the record again
 * (the log keeps records for fileReservedTime only), with the next fire.
 *
 * The timer thread hands the core due records and marks on the core's ring;
 * the core delivers or rolls each (an append like any other), and once the
 * appends before a mark are durable publishes the mark, which the control
 * side saves in timerCheck. Delivered and rolled copies name their record
 * (BK_TIMER_SRC_PROP): after a crash the wheel is rebuilt from the queue
 * and skips what the log shows was fired after the last saved mark.
 */
#include <errno.h>
#include <string.h>

#include "bk_priv.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"
#include "wire/record.h"

#define TIMER_BUDGET 256u /* items per tick */

int
bk_timer_due(const struct bk *bk, const char *props, size_t plen, int64_t now_ms, int64_t *due,
	     const char **why)
{
	static const struct {
		const char *key;
		uint64_t scale; /* 0: absolute epoch ms */
	} keys[] = {{"TIMER_DELIVER_MS", 0},
		    {"__STARTDELIVERTIME", 0},
		    {"TIMER_DELAY_SEC", 1000},
		    {"TIMER_DELAY_MS", 1}};
	uint64_t v;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *s;
		size_t len;

		if (!wire_props_get(props, plen, keys[i].key, &s, &len))
			continue;
		if (!wire_props_get_uint(props, plen, keys[i].key, &v) || v > INT64_MAX / 2) {
			*why = "a delivery time (TIMER_DELIVER_MS, __STARTDELIVERTIME, "
			       "TIMER_DELAY_SEC, TIMER_DELAY_MS) is not a number of ms or s";
			return -1;
		}
		/* Relative: compare before multiplying (no overflow) */
		if (keys[i].scale && v > bk->conf.timer_max_ms / keys[i].scale) {
			*why = "the delivery time is further away than timerMaxDelaySec";
			return -1;
		}
		*due = keys[i].scale ? now_ms + (int64_t)(v * keys[i].scale) : (int64_t)v;
		if (*due - now_ms > (int64_t)bk->conf.timer_max_ms) {
			*why = "the delivery time is further away than timerMaxDelaySec";
			return -1;
		}
		return 1;
	}
	return 0;
}

/* The fire time of a timer record written at @now_ms and due at @due. */
static int64_t
fire_time(const struct bk *bk, int64_t now_ms, int64_t due)
{
	return due - now_ms > (int64_t)bk->conf.timer_roll_ms
		       ? now_ms + (int64_t)bk->conf.timer_roll_ms
		       : due;
}

struct store_queue *
bk_timer_wrap(struct bk_core *c, struct wire_msg *m, int64_t due, int32_t *status)
{
	static const char *const skip[] = {"REAL_TOPIC",	  "REAL_QID",	     "TIMER_OUT_MS",
					   STORE_TIMER_FIRE_PROP, BK_TIMER_SRC_PROP, NULL};
	static const char *const keys[] = {"TIMER_OUT_MS", STORE_TIMER_FIRE_PROP, NULL};
	uint64_t vals[] = {(uint64_t)due, (uint64_t)fire_time(c->bk, clk_wall_ms_fast(), due)};

	if (c->tq == NULL) {
		*status = WIRE_DP_ST_SERVICE_NOT_AVAILABLE;
		return NULL;
	}
	if (bk_sched_wrap(c, m, skip, keys, vals, BK_TIMER_TOPIC, c->id) != 0) {
		*status = WIRE_DP_ST_MESSAGE_ILLEGAL;
		return NULL;
	}
	return c->tq->sq;
}

/* Write timer record @s again, to fire at its due time or the next roll. Return: as bk_sched_deliver(). */
static int
roll(struct bk_core *c, const struct wire_msg *s, int64_t due, int64_t now_ms, uint64_t *ticket)
{
	static const char *const skip[] = {STORE_TIMER_FIRE_PROP, BK_TIMER_SRC_PROP, NULL};
	struct store_put_res res;
	struct wire_msg m = *s;
	size_t len;

	if (wire_props_copy_except(c->props, sizeof(c->props) - 1, &len, s->props, s->props_len,
				   skip) ||
	    bk_props_add_u(c->props, sizeof(c->props) - 1, &len, STORE_TIMER_FIRE_PROP,
			   (uint64_t)fire_time(c->bk, now_ms, due)) ||
	    bk_props_add_u(c->props, sizeof(c->props) - 1, &len, BK_TIMER_SRC_PROP,
			   (uint64_t)s->phys_offset))
		return BK_DELIVER_DROPPED;
	m.topic = BK_TIMER_TOPIC;
	m.topic_len = (uint8_t)(sizeof(BK_TIMER_TOPIC) - 1);
	m.queue_id = (int32_t)c->id;
	m.sys_flag = s->sys_flag & ~(WIRE_SYSFLAG_BORNHOST_V6 | WIRE_SYSFLAG_STOREHOST_V6);
	m.store_host = c->bk->store_host;
	m.props = c->props;
	m.props_len = (uint16_t)len;
	if (store_put(c->bk->store, c->tq->sq, &m, &res) < 0)
		return BK_DELIVER_LATER;
	*ticket = res.ticket;
	return BK_DELIVER_DONE;
}

/* Fire the record of @it. Return: as bk_sched_deliver(). */
static int
fire(struct bk_core *c, const struct bk_timer_item *it, int64_t now_ms, uint64_t *ticket)
{
	/* The delivered copy: no wheel properties, no relative delay that would time it again. */
	static const char *const skip[] = {STORE_TIMER_FIRE_PROP, BK_TIMER_SRC_PROP,
					   "TIMER_DELAY_SEC", "TIMER_DELAY_MS", NULL};
	const uint8_t *rec;
	struct wire_msg m;
	uint64_t due, w;
	int dr;
	long n;

	*ticket = 0;
	/* a master whose lease ran out writes nothing (a roll included): the next master fires it */
	if (!bk_core_writable(c))
		return BK_DELIVER_LATER;
	n = store_get_phys(c->bk->store, it->phys, &rec);
	if (n < 0 || (uint32_t)n != it->size || wire_rec_decode(rec, (size_t)n, 0, &m) < 0 ||
	    !wire_props_get_uint(m.props, m.props_len, "TIMER_OUT_MS", &due) ||
	    !wire_props_get_uint(m.props, m.props_len, STORE_TIMER_FIRE_PROP, &w) ||
	    due > INT64_MAX) {
		c->st.timer_dropped++;
		return BK_DELIVER_DROPPED;
	}
	/* Never before its time: the wheel's clock and this one may differ by a little. */
	if ((int64_t)w > now_ms)
		return BK_DELIVER_LATER;
	if (w < due) {
		dr = roll(c, &m, (int64_t)due, now_ms, ticket);
		c->st.timer_rolled += dr == BK_DELIVER_DONE;
	} else {
		dr = bk_sched_deliver(c, &m, skip, BK_TIMER_SRC_PROP, 0, ticket);
		c->st.timer_delivered += dr == BK_DELIVER_DONE;
	}
	c->st.timer_dropped += dr == BK_DELIVER_DROPPED;
	return dr;
}

/* Publish the pending mark once the appends before it are durable. */
static void
publish(struct bk_core *c, struct bk_timer_q *q)
{
	uint32_t seq;

	if (!q->pending || !bk_progress_durable(c, q->pend_ticket))
		return;
	q->pending = q->has_next;
	q->has_next = false;
	seq = atomic_load_relaxed(&q->seq);
	atomic_store_relaxed(&q->seq, seq + 1);
	atomic_thread_fence(memory_order_release);
	atomic_store_relaxed(&q->done_w, q->pend_w);
	atomic_store_relaxed(&q->done_e, q->pend_e);
	atomic_store_relaxed(&q->done_log, q->pend_log);
	atomic_store_release(&q->seq, seq + 2);
	if (q->pending) {
		q->pend_ticket = q->next_ticket;
		q->pend_w = q->next_w;
		q->pend_e = q->next_e;
		q->pend_log = q->next_log;
	}
}

unsigned
bk_timer_tick(struct bk_core *c)
{
	struct bk_timer_q *q = c->tq;
	uint32_t tail = atomic_load_relaxed(&q->tail);
	unsigned work = 0;
	int64_t now_ms = 0;

	publish(c, q);
	if (q->cons_head_cache == tail) {
		/* acquire: pairs with the release of head in the timer thread's push */
		q->cons_head_cache = atomic_load_acquire(&q->head);
		if (q->cons_head_cache == tail)
			return 0;
	}
	while (tail != q->cons_head_cache && work < TIMER_BUDGET) {
		const struct bk_timer_item *it = &q->items[tail % BK_TIMER_RING];
		uint64_t ticket;

		if (it->phys < 0) {
			/*
			 * A mark: everything before it is appended, durable
			 * later. One waits, the newest behind it (replacing
			 * the waiting one would keep any from being published
			 * under a steady load).
			 */
			uint64_t log = clog_written(store_clog(c->bk->store, c->id));

			if (q->pending) {
				q->has_next = true;
				q->next_ticket = SP_MAX(q->last_ticket,
							log); /* the crash scan starts there */
				q->next_w = it->w;
				q->next_e = it->e;
				q->next_log = log;
			} else {
				q->pending = true;
				q->pend_ticket = SP_MAX(q->last_ticket, log);
				q->pend_w = it->w;
				q->pend_e = it->e;
				q->pend_log = log;
			}
		} else {
			if (now_ms == 0)
				now_ms = clk_wall_ms_fast();
			if (fire(c, it, now_ms, &ticket) == BK_DELIVER_LATER)
				break;
			if (ticket != 0)
				q->last_ticket = ticket;
		}
		tail++;
		work++;
	}
	/* release: the items may be reused; pairs with the acquire of tail in the push */
	atomic_store_release(&q->tail, tail);
	publish(c, q);
	return work;
}
