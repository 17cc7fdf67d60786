// SPDX-License-Identifier: Apache-2.0
/*
 * bk_delay.c - RocketMQ's delay levels on the core (docs/messages.md).
 *
 * A SEND with DELAY=n is stored, as RocketMQ stores it, in
 * SCHEDULE_TOPIC_XXXX with REAL_TOPIC and REAL_QID added. Its queue is
 * (n - 1) * cores + core: the core that took the message owns it, and owns
 * the real queue too (a SEND reaches the core of its queue), so delivery is
 * an append on the same core like any other, with no hand-off. Within one
 * level the due times (store time + the level's delay) only grow, so each
 * core looks at the head of each of its level queues about every
 * millisecond, and when it is due puts the message back into its real
 * queue: DELAY removed, REAL_TOPIC/REAL_QID kept, body, flag, born time and
 * host, reconsume times as they were. Never before its time: due is
 * compared with the same clock the store stamped the message with.
 *
 * Progress per queue (pub_off) is published once the delivered append is
 * durable as the flush mode requires; the control thread saves it in
 * delayOffset.json (bk_delay_ctl.c). The delivered copy names its schedule
 * record (BK_DELAY_SRC_PROP), so after a crash, which loses the progress
 * since the last save, the start skips what it finds already delivered
 * instead of delivering it twice (RocketMQ would).
 */
#include <errno.h>
#include <string.h>

#include "bk_priv.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"
#include "wire/record.h"

#define DELAY_POLL_NS 1000000ull /* look at the heads this often */
#define DELAY_BUDGET 64u	 /* deliveries per look, all levels together */

uint32_t
bk_delay_level(const struct bk *bk, const char *props, size_t plen)
{
	uint64_t level;

	/* Not a number: a plain message (bk_msgtype.c) */
	if (bk->conf.delay_levels == 0 || !wire_props_get_uint(props, plen, "DELAY", &level))
		return 0;
	return (uint32_t)SP_MIN(level, (uint64_t)bk->conf.delay_levels);
}

bool
bk_delay_target(const struct wire_msg *s, const char **topic, size_t *len, uint32_t *qid)
{
	uint64_t q;

	if (!wire_props_get(s->props, s->props_len, "REAL_TOPIC", topic, len) || *len == 0 ||
	    *len > META_TOPIC_MAX || !wire_props_get_uint(s->props, s->props_len, "REAL_QID", &q) ||
	    q >= META_QUEUES_MAX)
		return false;
	*qid = (uint32_t)q;
	return true;
}

int
bk_props_add_u(char *buf, size_t cap, size_t *len, const char *key, uint64_t v)
{
	char num[24];
	size_t n = 0;
	char tmp[24];

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		num[i] = tmp[n - 1 - i];
	return wire_props_append(buf, cap, len, key, strlen(key), num, n);
}

int
bk_sched_wrap(struct bk_core *c, struct wire_msg *m, const char *const *skip,
	      const char *const *keys, const uint64_t *vals, const char *topic, uint32_t qid)
{
	size_t len;

	if (wire_props_copy_except(c->dprops, sizeof(c->dprops) - 1, &len, m->props, m->props_len,
				   skip))
		return -ENOBUFS;
	for (size_t i = 0; keys != NULL && keys[i] != NULL; i++)
		if (bk_props_add_u(c->dprops, sizeof(c->dprops) - 1, &len, keys[i], vals[i]))
			return -ENOBUFS;
	if (wire_props_append(c->dprops, sizeof(c->dprops) - 1, &len, "REAL_TOPIC", 10, m->topic,
			      m->topic_len) ||
	    bk_props_add_u(c->dprops, sizeof(c->dprops) - 1, &len, "REAL_QID",
			   (uint64_t)m->queue_id) ||
	    len + BK_PROPS_SLACK > sizeof(c->props) - 1)
		return -ENOBUFS;
	m->props = c->dprops;
	m->props_len = (uint16_t)len;
	m->topic = topic;
	m->topic_len = (uint8_t)strlen(topic);
	m->queue_id = (int32_t)qid;
	return 0;
}

struct store_queue *
bk_delay_wrap(struct bk_core *c, struct wire_msg *m, uint32_t level, int32_t *status)
{
	static const char *const skip[] = {"DELAY", "REAL_TOPIC", "REAL_QID", NULL};
	static const char *const keys[] = {"DELAY", NULL};
	uint64_t vals[] = {level};

	if (c->dq == NULL || level == 0 || level > c->bk->conf.delay_levels) {
		*status = WIRE_DP_ST_SERVICE_NOT_AVAILABLE;
		return NULL;
	}
	if (bk_sched_wrap(c, m, skip, keys, vals, BK_SCHED_TOPIC,
			  (level - 1) * c->bk->ncores + c->id) != 0) {
		*status = WIRE_DP_ST_MESSAGE_ILLEGAL;
		return NULL;
	}
	return c->dq[level - 1].sq;
}

int
bk_sched_deliver(struct bk_core *c, const struct wire_msg *s, const char *const *skip,
		 const char *src_prop, uint32_t sys_or, uint64_t *ticket)
{
	const struct bk_topic *t;
	struct store_put_res res;
	struct wire_msg m;
	const char *rt;
	size_t rtl, len;
	uint32_t qid;
	int32_t status;
	long rc;

	*ticket = 0;
	/* a master whose lease ran out: the next master delivers it (its offsets never saw this) */
	if (!bk_core_writable(c))
		return BK_DELIVER_LATER;
	if (!bk_delay_target(s, &rt, &rtl, &qid))
		return BK_DELIVER_DROPPED;
	/*
	 * An internal put, as RocketMQ's: the topic's and the broker's write
	 * permission are for producers. A missing retry topic is created.
	 */
	t = bk_topic_find(c->bk, rt, rtl);
	if (t == NULL) {
		bool retry = (rtl > 7 && memcmp(rt, BK_RETRY_PREFIX, 7) == 0) ||
			     (rtl > 5 && memcmp(rt, BK_DLQ_PREFIX, 5) == 0);

		t = bk_core_topic_for_write(c, rt, rtl, retry, c->bk->conf.default_queues, &status);
		if (t == NULL)
			return status == WIRE_DP_ST_SYSTEM_BUSY ||
					       status == WIRE_DP_ST_NO_PERMISSION
				       ? BK_DELIVER_LATER /* being created, or writes refused for now */
				       : BK_DELIVER_DROPPED;
	}
	if (qid >= t->write_queues || t->core[qid] != c->id || bk_topic_broker_only(t))
		return BK_DELIVER_DROPPED;
	/* Which record this is: a restart after a crash skips what it finds delivered. */
	if (wire_props_copy_except(c->props, sizeof(c->props) - 1, &len, s->props, s->props_len,
				   skip) ||
	    bk_props_add_u(c->props, sizeof(c->props) - 1, &len, src_prop,
			   (uint64_t)s->phys_offset))
		return BK_DELIVER_DROPPED;
	memset(&m, 0, sizeof(m));
	m.topic = t->name;
	m.topic_len = (uint8_t)t->name_len;
	m.queue_id = (int32_t)qid;
	m.flag = s->flag;
	m.sys_flag =
		(s->sys_flag & ~(WIRE_SYSFLAG_BORNHOST_V6 | WIRE_SYSFLAG_STOREHOST_V6)) | sys_or;
	m.born_ts = s->born_ts;
	m.born_host = s->born_host;
	m.store_host = c->bk->store_host;
	m.reconsume_times = s->reconsume_times;
	m.body = s->body;
	m.body_len = s->body_len;
	m.props = c->props;
	m.props_len = (uint16_t)len;
	rc = store_put(c->bk->store, t->sq[qid], &m, &res);
	if (rc < 0)
		return BK_DELIVER_LATER; /* busy, or the shard is fenced: try again later */
	*ticket = res.ticket;
	bk_core_park_touch(c, t->sq[qid]);
	return BK_DELIVER_DONE;
}

bool
bk_progress_durable(const struct bk_core *c, uint64_t ticket)
{
	const struct store *st = c->bk->store;
	const struct clog *cl = store_clog(st, c->id);

	if (store_durable(st, c->id, ticket) != 1)
		return false;
	/*
	 * ASYNC_FLUSH acknowledges an append in the write-behind buffer; when
	 * that buffer is anonymous memory (no storeBufferDir) a crash of the
	 * process loses it, so progress waits for the write-back.
	 */
	return clog_bufs_outlive_crash(cl) || clog_flushed(cl) >= ticket;
}

/* Publish @d's progress once its last delivery is durable as the flush mode requires. */
static void
publish_durable(const struct store *st, const struct bk_core *c, struct bk_delay_q *d)
{
	(void)st;
	if (d->pending && bk_progress_durable(c, d->pend_ticket)) {
		d->pending = false;
		atomic_store_explicit(&d->pub_off, d->pend_off, memory_order_relaxed);
	}
}

unsigned
bk_delay_tick(struct bk_core *c, uint64_t now_ns)
{
	const struct store *st = c->bk->store;
	unsigned budget = DELAY_BUDGET;
	unsigned work = 0;
	int64_t now_ms = 0;

	if (c->dq == NULL || now_ns < c->delay_next_ns)
		return 0;
	c->delay_next_ns = now_ns + DELAY_POLL_NS;
	for (uint32_t i = 0; i < c->bk->conf.delay_levels; i++) {
		struct bk_delay_q *d = &c->dq[i];

		publish_durable(st, c, d);
		while (budget > 0 && d->off < store_queue_max(st, d->sq)) {
			const uint8_t *rec;
			struct cq_unit u;
			struct wire_msg m;
			uint64_t ticket;
			long n;

			if (now_ms == 0)
				now_ms = clk_wall_ms_fast();
			if (d->due_ms != 0 && now_ms < d->due_ms)
				break;
			n = store_get(st, d->sq, d->off, &rec, &u);
			if (n == -ERANGE && d->off < store_queue_min(st, d->sq)) {
				d->off = store_queue_min(st, d->sq); /* retention took them */
				continue;
			}
			if (n < 0 || wire_rec_decode(rec, (size_t)n, 0, &m) < 0) {
				c->st.delay_dropped++; /* a damaged record: skip it */
				d->off++;
				continue;
			}
			d->due_ms = m.store_ts + (int64_t)c->bk->conf.delay_ms[i + 1];
			if (now_ms < d->due_ms)
				break;
			static const char *const skip[] = {"DELAY", NULL};
			int dr = bk_sched_deliver(c, &m, skip, BK_DELAY_SRC_PROP, 0, &ticket);

			if (dr == BK_DELIVER_LATER)
				break;
			c->st.delay_delivered += dr == BK_DELIVER_DONE;
			c->st.delay_dropped += dr == BK_DELIVER_DROPPED;
			budget--;
			work++;
			d->off++;
			d->due_ms = 0;
			if (ticket != 0) {
				d->pend_off = d->off;
				d->pend_ticket = ticket;
				d->pending = true;
			} else if (!d->pending) {
				atomic_store_explicit(&d->pub_off, d->off, memory_order_relaxed);
			}
		}
		publish_durable(st, c, d);
	}
	return work;
}
