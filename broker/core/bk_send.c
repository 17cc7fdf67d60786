// SPDX-License-Identifier: Apache-2.0
/*
 * bk_send.c - SEND and SEND_BATCH on the core (bk_handlers.h), and their
 * acknowledgements.
 *
 * Durability never makes the core wait. A SEND is appended, then
 * store_ack_state() says whether the flush mode's condition already holds
 * (ASYNC_FLUSH: always); if not, the answer goes into a FIFO of pending acks
 * that the tick polls against the flusher's published offset. The FIFO is in
 * ticket order, so the tick looks at its head only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"

static void
answer_send(struct bk_core *c, const struct bk_ack *a, int32_t status, uint64_t durable_ns)
{
	struct wire_dp_send_resp r = {
		.head = {.status = status,
			 .ts_recv_ns = a->recv_ns,
			 .ts_handled_ns = a->handled_ns,
			 .ts_durable_ns = durable_ns},
		.phys_offset = a->phys,
		.queue_offset = a->qoff,
		.queue_id = a->qid,
		.count = a->op == WIRE_DP_OP_SEND ? 1 : a->count,
	};
	int64_t *phys = NULL;
	uint32_t len;
	uint8_t *buf;

	if (a->op == WIRE_DP_OP_SEND_BACK) {
		/* Its answer is the common part alone (protocol.md §5.8). */
		buf = bk_core_ans_buf(c, a->h, WIRE_DP_RESP_HEAD_LEN);
		if (buf && wire_dp_bare_resp_encode(a->op, &r.head, buf, WIRE_DP_RESP_HEAD_LEN) ==
				   WIRE_DP_RESP_HEAD_LEN)
			bk_core_respond(c, a->h, WIRE_DP_RESP_HEAD_LEN);
		return;
	}
	if (a->op == WIRE_DP_OP_SEND_BATCH) {
		/* The batch's offsets sit contiguously in the ring unless it wrapped. */
		if (a->batch_first + a->count <= c->bp_cap) {
			phys = &c->batch_phys[a->batch_first];
		} else {
			/* Wrapped: bp_cap leaves room after it (see bk_core_init). */
			uint32_t first = c->bp_cap - a->batch_first;

			memcpy(&c->batch_phys[c->bp_cap], c->batch_phys,
			       (a->count - first) * sizeof(int64_t));
			phys = &c->batch_phys[a->batch_first];
		}
		r.phys_offsets = (const uint8_t *)phys;
	}
	len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_SEND_RESP_FIXED +
	      (a->op == WIRE_DP_OP_SEND_BATCH ? 8u * a->count : 0u);
	buf = bk_core_ans_buf(c, a->h, len);
	if (buf == NULL) {
		/* Stored, but no buffer for a big answer: the client sees BUSY and may resend. */
		if (bk_core_ans_pending(c, a->h)) {
			bk_core_busy_why(c, BK_BUSY_ANSWER_BUF);
			bk_core_answer_err(c, a->h, a->op, a->recv_ns, WIRE_DP_ST_SYSTEM_BUSY, 0);
		}
		return;
	}
	if (wire_dp_send_resp_encode(a->op, &r, buf, len) != (long)len)
		return;
	bk_core_respond(c, a->h, len);
}

bool
bk_core__ack_room(const struct bk_core *c, uint32_t records)
{
	return c->ack_tail - c->ack_head < c->ack_cap &&
	       c->bp_tail - c->bp_head + records <= c->bp_cap;
}

#define ACK_SLAVE_TIMEOUT                                                                          \
	(-ETIME) /* bk_core__ack_state(): SYNC_MASTER's slave did not ack in time */

/*
 * Whether @a may be answered: store_ack_state() (the flush condition, with
 * FLUSH_DISK_TIMEOUT), then for a SYNC_MASTER put with a slave in sync the
 * slave's acknowledgement of its ticket (docs/replication.md), published
 * by this core itself when the slave's next REPL request came in.
 */
int
bk_core__ack_state(const struct bk_core *c, const struct bk_ack *a, uint64_t now)
{
	int st = store_ack_state(c->bk->store, c->id, a->ticket, a->put_ns, now);

	if (st != 1 || !a->wait_slave)
		return st;
	if (c->repl_acked >= a->ticket)
		return 1;
	if (now - a->put_ns >= ms_to_ns(c->bk->conf.slave_timeout_ms))
		return ACK_SLAVE_TIMEOUT;
	return 0;
}

/* Answer @a with what bk_core__ack_state() said (not 0). */
void
bk_core__ack_answer(struct bk_core *c, const struct bk_ack *a, int st, uint64_t now)
{
	if (st == 1) {
		if (a->ok_status == WIRE_DP_ST_SLAVE_NOT_AVAILABLE)
			c->st.slave_missing++;
		answer_send(c, a, a->ok_status, now);
	} else if (st == -ETIMEDOUT) {
		c->st.flush_timeouts++;
		answer_send(c, a, WIRE_DP_ST_FLUSH_DISK_TIMEOUT, 0);
	} else if (st == ACK_SLAVE_TIMEOUT) {
		c->st.slave_timeouts++;
		answer_send(c, a, WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT, 0);
	} else {
		bk_core_answer_err(c, a->h, a->op, a->recv_ns, WIRE_DP_ST_SERVICE_NOT_AVAILABLE, 0);
	}
}

/* After the append: answer now, or keep the answer until the flush (and the slave) covers it. */
void
bk_core__ack_or_defer(struct bk_core *c, struct bk_ack *a)
{
	int st;

	a->ok_status = WIRE_DP_ST_SUCCESS;
	a->wait_slave = false;
	if (c->bk->conf.role == BK_ROLE_SYNC_MASTER) {
		/*
		 * RocketMQ's rule: no slave in sync, no wait; the message is
		 * stored and the answer says SLAVE_NOT_AVAILABLE.
		 */
		if (bk_repl_slave_ok(c, a->put_ns))
			a->wait_slave = true;
		else
			a->ok_status = WIRE_DP_ST_SLAVE_NOT_AVAILABLE;
	}
	st = bk_core__ack_state(c, a, a->put_ns);
	if (st == 0) {
		c->acks[c->ack_tail++ % c->ack_cap] = *a;
		return;
	}
	if (a->op == WIRE_DP_OP_SEND_BATCH)
		c->bp_head += a->count;
	bk_core__ack_answer(c, a, st, a->put_ns);
}

const char *const bk_busy_names[BK_BUSY_WHYS] = {
	[BK_BUSY_OTHER] = "other",
	[BK_BUSY_STORE] = "store not ready",
	[BK_BUSY_INFLIGHT] = "acks in flight",
	[BK_BUSY_ANSWER_BUF] = "answer buffers",
	[BK_BUSY_TOPIC_CREATE] = "topic being created",
	[BK_BUSY_OFFSETS] = "offset table full",
	[BK_BUSY_TX_WINDOW] = "transactions in doubt",
	[BK_BUSY_REPL] = "replication",
};

int32_t
bk_core__put_status(struct bk_core *c, long rc)
{
	switch (rc) {
	case -EAGAIN:
		bk_core_busy_why(c, BK_BUSY_STORE);
		return WIRE_DP_ST_SYSTEM_BUSY;
	case -EMSGSIZE:
	case -EINVAL:
		return WIRE_DP_ST_MESSAGE_ILLEGAL;
	default:
		return WIRE_DP_ST_SERVICE_NOT_AVAILABLE; /* the shard is fenced: disk error */
	}
}

void
bk_core__msg_from(struct wire_msg *m, const struct dp_xreq *req, const struct bk_core *c,
		  int32_t qid)
{
	memset(m, 0, sizeof(*m));
	m->queue_id = qid;
	memcpy(m->born_host.addr, &req->peer.ip, 4);
	m->born_host.port = req->peer.port;
	m->store_host = c->bk->store_host;
}

unsigned
bk_core_msg_allow(const struct bk_core *c)
{
	return (c->bk->conf.delay_levels > 0 ? BK_MSG_DELAY : 0u) |
	       (c->tq != NULL ? BK_MSG_TIMER : 0u) | (c->tx != NULL ? BK_MSG_TX : 0u);
}

int
bk_core__do_send(struct bk_core *c, const struct dp_xreq *req)
{
	struct wire_dp_send_req r;
	const struct bk_topic *t;
	struct store_put_res res;
	struct bk_ack a = {.h = req->h, .recv_ns = req->ts_recv_ns, .op = req->op};
	struct store_queue *sq = NULL;
	struct wire_msg m;
	unsigned asks = 0;
	bool timed = false;
	uint64_t t0 = 0;
	uint32_t level;
	int32_t status;
	long rc;

	if (!bk_core_writable(c)) {
		/* RocketMQ: "message store is slave mode, so putMessage is forbidden" */
		c->st.write_refused++;
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_SERVICE_NOT_AVAILABLE, 0);
	}
	if (wire_dp_send_req_decode(req->op, req->msg, req->len, &r) != 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	if (r.body_len > c->bk->conf.max_msg_size || r.body_len == 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_MESSAGE_ILLEGAL, 0);
	/* Before the topic: a refused message creates nothing either. */
	if (req->op == WIRE_DP_OP_SEND &&
	    bk_msg_refused(r.props, r.props_len, r.sysflag, bk_core_msg_allow(c), &asks) != NULL) {
		c->st.type_refused++;
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_NOT_SUPPORTED, 0);
	}
	t = bk_core_topic_for_write(c, r.topic, r.topic_len, false, c->bk->conf.default_queues,
				    &status);
	if (t == NULL)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, status, 0);
	if (!bk_core__queue_is_mine(c, req, t, r.queue_id, t->write_queues))
		return 0;
	bk_core__msg_from(&m, req, c, r.queue_id);
	m.born_ts = r.born_ts;
	m.sys_flag = r.sysflag;
	m.topic = r.topic;
	m.topic_len = (uint8_t)r.topic_len;

	if (req->op == WIRE_DP_OP_SEND) {
		if (!bk_core__ack_room(c, 0)) {
			bk_core_busy_why(c, BK_BUSY_INFLIGHT);
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_SYSTEM_BUSY, 0);
		}
		m.flag = r.flag;
		m.reconsume_times = r.reconsume_times;
		m.body = r.body;
		m.body_len = r.body_len;
		m.props = r.props;
		m.props_len = r.props_len;
		sq = t->sq[r.queue_id];
		level = (asks & BK_MSG_DELAY) ? bk_delay_level(c->bk, r.props, r.props_len) : 0;
		if (level > 0) {
			/* SCHEDULE_TOPIC_XXXX; the answer names the queue asked for */
			sq = bk_delay_wrap(c, &m, level, &status);
			if (sq == NULL)
				return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
							  status, 0);
		}
		if (asks & BK_MSG_TIMER) {
			int64_t now_ms = clk_wall_ms_fast(), due;
			const char *why;
			int k = bk_timer_due(c->bk, r.props, r.props_len, now_ms, &due, &why);

			if (k < 0)
				return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
							  WIRE_DP_ST_MESSAGE_ILLEGAL, 0);
			/* Due already: a plain message, as RocketMQ 5 */
			if (k > 0 && due > now_ms) {
				sq = bk_timer_wrap(c, &m, due, &status);
				if (sq == NULL)
					return bk_core_answer_err(c, req->h, req->op,
								  req->ts_recv_ns, status, 0);
				timed = true;
			}
		}
		if (asks & BK_MSG_TX) {
			if (c->bk->conf.tx_reject)
				return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
							  WIRE_DP_ST_NO_PERMISSION, 0);
			sq = bk_tx_wrap(c, &m, &status);
			if (sq == NULL)
				return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
							  status, 0);
		}
		t0 = clk_mono_fast_ns();
		rc = store_put(c->bk->store, sq, &m, &res);
		if (rc < 0)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  bk_core__put_status(c, rc), 0);
		c->st.sends++;
		c->st.msgs_in++;
		c->st.bytes_in += res.size;
		c->st.delayed += level > 0;
		c->st.timed += timed;
		if (asks & BK_MSG_TX)
			bk_tx_stored(c, (uint64_t)res.qoff);
		a.ticket = res.ticket;
		a.phys = res.phys;
		a.qoff = res.qoff;
		a.count = 1;
	} else {
		struct wire_batch_item it;
		size_t pos = 0;
		uint32_t n = 0;
		int k;

		/* Validate the whole batch first: a bad item stores nothing. */
		while ((k = wire_batch_next(r.body, r.body_len, &pos, &it)) == 1) {
			if (it.body_len == 0 || it.body_len > c->bk->conf.max_msg_size)
				k = -EINVAL;
			else if (bk_msg_refused(it.props, it.props_len, r.sysflag, 0, NULL) != NULL)
				k = -EOPNOTSUPP;
			if (k < 0)
				break;
			n++;
		}
		if (k == -EOPNOTSUPP)
			c->st.type_refused++;
		if (k < 0 || n == 0)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  k == -EOPNOTSUPP ? WIRE_DP_ST_NOT_SUPPORTED
								   : WIRE_DP_ST_MESSAGE_ILLEGAL,
						  0);
		if (!bk_core__ack_room(c, n) || n > c->bp_cap) {
			bk_core_busy_why(c, BK_BUSY_INFLIGHT);
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_SYSTEM_BUSY, 0);
		}
		a.batch_first = c->bp_tail % c->bp_cap;
		a.count = 0;
		pos = 0;
		t0 = clk_mono_fast_ns();
		while (wire_batch_next(r.body, r.body_len, &pos, &it) == 1) {
			m.flag = it.flag;
			m.body = it.body;
			m.body_len = it.body_len;
			m.props = it.props;
			m.props_len = it.props_len;
			rc = store_put(c->bk->store, t->sq[r.queue_id], &m, &res);
			if (rc < 0) {
				/*
				 * Items before this one are stored: answer with
				 * what was stored when there is any, so the client
				 * does not resend them; the rest fails.
				 */
				if (a.count == 0)
					return bk_core_answer_err(c, req->h, req->op,
								  req->ts_recv_ns,
								  bk_core__put_status(c, rc), 0);
				break;
			}
			if (a.count == 0) {
				a.phys = res.phys;
				a.qoff = res.qoff;
			}
			c->batch_phys[c->bp_tail++ % c->bp_cap] = res.phys;
			c->st.bytes_in += res.size;
			a.ticket = res.ticket;
			a.count++;
		}
		c->st.send_batches++;
		c->st.msgs_in += a.count;
	}
	a.qid = r.queue_id;
	a.sq = req->op == WIRE_DP_OP_SEND ? sq : t->sq[r.queue_id];
	a.put_ns = clk_mono_fast_ns();
	a.handled_ns = a.put_ns;
	bk_lat_record(c, BK_LAT_APPEND, a.put_ns - t0);
	bk_core_park_touch(c, a.sq);
	bk_core__ack_or_defer(c, &a);
	return 0;
}
