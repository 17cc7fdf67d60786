// SPDX-License-Identifier: Apache-2.0
/*
 * bk_core.c - the broker's request handlers, run by each dataplane core
 * inside its poll loop (docs/broker.md, docs/protocol.md §4-§6).
 *
 * A core owns store shard `id` and the queues mapped to it (qid % cores). It
 * answers SEND, SEND_BATCH, PULL, the offset ops, SEND_BACK and PING for
 * those queues, and REDIRECT for anyone else's. Nothing here allocates,
 * locks, sleeps or logs: every table is sized at start (pending acks, parked
 * pulls, consumer offsets) and a full table answers SYSTEM_BUSY.
 *
 * This file is the core's front: dispatch() by op to the request families
 * (bk_send.c, bk_pull.c, bk_offsets.c, bk_send_back.c, and the features'
 * files: bk_delay.c, bk_timer.c, bk_tx.c, bk_repl.c, bk_acl.c), the command
 * ring from the control thread, the tick, and setup. What the families
 * share is in bk_handlers.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <urcu/urcu-qsbr.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/ring.h"
#include "common/compiler.h"
#include "wire/dp.h"

/* ---- PING, DISCONNECT ---- */

static int
do_ping(struct bk_core *c, const struct dp_xreq *req)
{
	struct wire_dp_ping_req q;
	struct wire_dp_ping_resp p = {
		.head = {.status = WIRE_DP_ST_SUCCESS, .ts_recv_ns = req->ts_recv_ns}};
	uint32_t len;
	uint8_t *buf;

	if (wire_dp_ping_req_decode(req->msg, req->len, &q) != 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	p.echo_ts_ns = q.client_ts_ns;
	p.pad = q.pad;
	p.pad_len = q.pad_len;
	len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PING_RESP_FIXED + q.pad_len;
	buf = bk_core_ans_buf(c, req->h, len);
	if (buf == NULL) {
		if (bk_core_ans_pending(c, req->h)) {
			bk_core_busy_why(c, BK_BUSY_ANSWER_BUF);
			bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					   WIRE_DP_ST_SYSTEM_BUSY, 0);
		}
		return 0;
	}
	if (wire_dp_ping_resp_encode(&p, buf, len) == (long)len)
		bk_core_respond(c, req->h, len);
	return 0;
}

static void
dispatch(struct bk_core *c, const struct dp_xreq *req)
{
	switch (req->op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH:
		(void)bk_core__do_send(c, req);
		return;
	case WIRE_DP_OP_PULL:
		(void)bk_core__do_pull(c, req);
		return;
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET:
		(void)bk_core__do_offset(c, req);
		return;
	case WIRE_DP_OP_SEND_BACK:
		(void)bk_core__do_send_back(c, req);
		return;
	case WIRE_DP_OP_PING:
		(void)do_ping(c, req);
		return;
	case WIRE_DP_OP_REPL:
		bk_repl_handle(c, req);
		return;
	case WIRE_DP_OP_DISCONNECT: {
		struct wire_dp_resp_head h = {.status = WIRE_DP_ST_SUCCESS,
					      .ts_recv_ns = req->ts_recv_ns};
		uint8_t *buf = bk_core_ans_buf(c, req->h, WIRE_DP_RESP_HEAD_LEN);

		if (buf && wire_dp_bare_resp_encode(req->op, &h, buf, WIRE_DP_RESP_HEAD_LEN) ==
				   WIRE_DP_RESP_HEAD_LEN)
			bk_core_respond(c, req->h, WIRE_DP_RESP_HEAD_LEN);
		return;
	}
	default:
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					 WIRE_DP_ST_BAD_REQUEST, 0);
		return;
	}
}

void
bk_core_handle(struct dp_xsrv *s, const struct dp_xreq *req, void *arg)
{
	struct bk_core *c = arg;

	/* a transport request (s != NULL); remoting ones were checked on the control thread */
	if (s && c->bk->acl_on && bk_acl_refuses(c, req))
		return;
	dispatch(c, req);
	bk_lat_record(c, s ? BK_LAT_REQ_DP : BK_LAT_REQ_RMT, clk_mono_fast_ns() - req->ts_recv_ns);
}

/* ---- requests from the command ring (RocketMQ remoting, docs/remoting.md) ---- */

/* Copies the records at cmd->phys[] (any shard: reads are safe from every core). */
static void
rmt_gather(struct bk_core *c, struct bk_rcmd *cmd)
{
	uint32_t at = cmd->resp_len;

	cmd->status = WIRE_DP_ST_SUCCESS;
	for (uint32_t i = cmd->nphys_done; i < cmd->nphys; i++) {
		const uint8_t *rec;
		long n = store_get_phys(c->bk->store, cmd->phys[i], &rec);

		if (n < 0) {
			/* gone (retention) or never there: skip, as RocketMQ does */
			cmd->nphys_done = i + 1;
			continue;
		}
		if (at + (uint64_t)n > cmd->resp_cap) {
			cmd->need = at + (uint32_t)n;
			break;
		}
		memcpy(cmd->resp + at, rec, (size_t)n);
		at += (uint32_t)n;
		cmd->nphys_done = i + 1;
		cmd->found++;
	}
	cmd->resp_len = at;
}

/*
 * A slave applying its master's offsets: raise, never lower, in one step on
 * the owning core, so a consumer's commit here in between is never undone.
 */
static void
offset_raise(struct bk_core *c, struct bk_rcmd *cmd)
{
	struct wire_dp_offset_req r;
	struct bk_off *o;

	cmd->status = WIRE_DP_ST_BAD_REQUEST;
	if (wire_dp_offset_req_decode(WIRE_DP_OP_UPDATE_OFFSET, cmd->req, cmd->req_len, &r) != 0 ||
	    r.queue_id < 0)
		return;
	o = bk_core__off_find(c, r.topic, r.topic_len, r.group, r.group_len, (uint32_t)r.queue_id,
			      true);
	if (o == NULL) {
		cmd->status = WIRE_DP_ST_SYSTEM_BUSY;
		return;
	}
	if (r.value > atomic_load_relaxed(&o->offset))
		atomic_store_relaxed(&o->offset, r.value);
	cmd->status = WIRE_DP_ST_SUCCESS;
}

/* Min, max and last store time of each queue in cmd->resp (admin requests). */
static void
qstat(struct bk_core *c, struct bk_rcmd *cmd)
{
	struct bk_qstat *q = (struct bk_qstat *)cmd->resp;
	size_t n = cmd->resp_len / sizeof(*q);

	for (size_t i = 0; i < n; i++) {
		q[i].min = store_queue_min(c->bk->store, q[i].sq);
		q[i].max = store_queue_max(c->bk->store, q[i].sq);
		q[i].last_ms = 0;
		if (q[i].max > q[i].min &&
		    store_queue_time(c->bk->store, q[i].sq, q[i].max - 1, &q[i].last_ms) != 0)
			q[i].last_ms = 0;
		q[i].probe_ms = 0;
		if (q[i].probe != UINT64_MAX &&
		    store_queue_time(c->bk->store, q[i].sq, q[i].probe, &q[i].probe_ms) != 0)
			q[i].probe_ms = 0;
		q[i].at_time = q[i].max;
		if (cmd->value >= 0 &&
		    store_search_time(c->bk->store, q[i].sq, cmd->value, &q[i].at_time) != 0)
			q[i].at_time = q[i].max;
	}
	cmd->status = WIRE_DP_ST_SUCCESS;
}

/*
 * A deleted topic ('T' + name) or group ('G' + name): its offsets read as
 * never committed (-1) from now on; the slots stay.
 */
static void
offset_drop(struct bk_core *c, struct bk_rcmd *cmd)
{
	const char *name = (const char *)cmd->req + 1;
	size_t len = cmd->req_len - 1;
	bool topic = cmd->req[0] == 'T';

	uint64_t from = cmd->value < 0 ? 0 : (uint64_t)cmd->value;
	uint64_t to = from + BK_OFF_DROP_SPAN;

	cmd->status = WIRE_DP_ST_BAD_REQUEST;
	if (cmd->req_len < 2 || (cmd->req[0] != 'T' && cmd->req[0] != 'G'))
		return;
	/* one span of the table per command: a 64K-slot table is 16 short commands */
	for (uint64_t k = from; k <= c->off_mask && k < to; k++) {
		struct bk_off *o = &c->offs[k];
		bool hit = topic ? o->topic_len == len && memcmp(o->topic, name, len) == 0
				 : o->group_len == len && memcmp(o->group, name, len) == 0;

		if (atomic_load_relaxed(&o->used) && hit)
			atomic_store_relaxed(&o->offset, -1);
	}
	cmd->status = WIRE_DP_ST_SUCCESS;
}

void
bk_core_cmd(struct dp_lcore *lc, void *p, void *arg)
{
	struct bk_core *c = arg;
	struct bk_rcmd *cmd = p;
	const void *auth_cache[2] = {NULL, NULL};
	struct dp_xreq req = {
		.op = cmd->op,
		.msg = cmd->req,
		.len = cmd->req_len,
		.ts_recv_ns = cmd->recv_ns,
		.h = {.session_id = BK_RMT_SESSION, .seq = cmd->serial, .req_id = (uintptr_t)cmd},
		.peer = cmd->peer,
		.ak = cmd->ak,
		.ak_len = (uint8_t)(cmd->ak ? strnlen(cmd->ak, UINT8_MAX) : 0),
		.auth_cache = auth_cache,
	};

	(void)lc;
	cmd->need = 0;
	switch (cmd->op) {
	case BK_ROP_EARLIEST:
		cmd->status = store_earliest_time(c->bk->store, cmd->sq, &cmd->value) == 0
				      ? WIRE_DP_ST_SUCCESS
				      : WIRE_DP_ST_SYSTEM_ERROR;
		bk_core__rmt_complete(c, cmd);
		return;
	case BK_ROP_GATHER:
		rmt_gather(c, cmd);
		bk_core__rmt_complete(c, cmd);
		return;
	case BK_ROP_OFFSET_RAISE:
		offset_raise(c, cmd);
		bk_core__rmt_complete(c, cmd);
		return;
	case BK_ROP_END_TX:
		bk_tx_end(c, cmd);
		bk_core__rmt_complete(c, cmd);
		return;
	case BK_ROP_TX_CHECK:
		bk_tx_check(c, cmd);
		bk_core__rmt_complete(c, cmd);
		return;
	case BK_ROP_QSTAT:
		qstat(c, cmd);
		bk_core__rmt_complete(c, cmd);
		return;
	case BK_ROP_OFFSET_DROP:
		offset_drop(c, cmd);
		bk_core__rmt_complete(c, cmd);
		return;
	default:
		cmd->resp_len = 0;
		bk_core_handle(NULL, &req, c);
		return;
	}
}

/* ---- the tick: deferred acks, parked pulls ---- */

unsigned
bk_core_tick(struct dp_lcore *lc, uint64_t now_ns, void *arg)
{
	struct bk_core *c = arg;
	unsigned work = 0;

	(void)lc;
	c->now_ns = now_ns;
	/* First: a slave's ack is what a SYNC_MASTER put waits for. */
	if (c->repl_parked)
		work += bk_repl_tick(c, now_ns);
	if (c->dq != NULL)
		work += bk_delay_tick(c, now_ns);
	if (c->tq != NULL)
		work += bk_timer_tick(c);
	if (c->tx != NULL)
		work += bk_tx_tick(c);
	while (c->ack_head != c->ack_tail) {
		struct bk_ack *a = &c->acks[c->ack_head % c->ack_cap];
		uint64_t now = clk_mono_fast_ns();
		int st = bk_core__ack_state(c, a, now);

		if (st == 0)
			break;
		/* only answers that waited: those given at the append are not counted */
		bk_lat_record(c, BK_LAT_DURABLE, now - a->put_ns);
		bk_core__ack_answer(c, a, st, now);
		if (a->op == WIRE_DP_OP_SEND_BATCH)
			c->bp_head += a->count;
		c->ack_head++;
		bk_core_park_touch(c, a->sq);
		work++;
	}
	if (c->bk->conf.role == BK_ROLE_SLAVE && (c->park_n || c->held_marks)) {
		/* A slave's shard grows by replication, not by this core's appends. */
		uint64_t w = clog_written(store_clog(c->bk->store, c->id));

		if (w != c->slave_seen) {
			c->slave_seen = w;
			c->park_dirty = c->park_dirty_all = true;
			c->held_touch_all = true;
		}
	}
	if (SP_UNLIKELY(atomic_load_relaxed(&c->rmt_kick)) &&
	    atomic_exchange_explicit(&c->rmt_kick, 0, memory_order_acquire))
		c->park_dirty = c->park_dirty_all = true;
	if (c->park_n && (c->park_dirty || now_ns >= c->park_next_deadline))
		work += bk_core__parks_scan(c, now_ns);
	c->park_dirty = c->park_dirty_all = false;
	c->park_ndirty = 0;
	c->park_touch_ns = 0;
	if (c->held_n || c->held_touch_all)
		work += bk_core__held_tell(c, now_ns);
	if (c->rmt_posted) {
		uint64_t one = 1;

		c->rmt_posted = false;
		/*
		 * Full fence between the completions' enqueue and this load:
		 * pairs with the control thread's seq_cst store of
		 * ctl_sleeping before it looks at the rings.
		 */
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load(&c->bk->ctl_sleeping)) {
			/* eventfd write never sleeps; a failure is fine: control also polls on a timer */
			ssize_t r = write(c->bk->efd, &one, sizeof(one));

			(void)r;
		}
	}
	/*
	 * Acks waiting for the flusher count as work: an idle core would wait
	 * in the port for up to a millisecond, and the flush that lands
	 * meanwhile would be acknowledged that much later. An ack waiting for
	 * a slave does not: the slave's next REPL request, which carries it,
	 * wakes the core's port, and on a small host the slave may need this
	 * CPU to send it.
	 */
	if (c->ack_head != c->ack_tail) {
		const struct bk_ack *h = &c->acks[c->ack_head % c->ack_cap];

		if (!h->wait_slave || store_durable(c->bk->store, c->id, h->ticket) != 1)
			work++;
	}
	return work;
}

/* ---- setup ---- */

static void *
table_alloc(size_t bytes)
{
	/* Untouched pages cost nothing: tables are sized for the worst case. */
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int
bk_core_init(struct bk *bk, struct bk_core *c, unsigned id)
{
	const struct bk_conf *cf = &bk->conf;
	uint32_t slots = 1024;

	memset(c, 0, sizeof(*c));
	c->id = id;
	c->bk = bk;
	c->ack_cap = cf->pending_acks;
	c->bp_cap = cf->pending_acks * 4;
	c->park_cap = cf->parked_pulls;
	while (slots < cf->offset_slots)
		slots <<= 1;
	c->off_mask = slots - 1;
	c->acks = table_alloc(sizeof(*c->acks) * c->ack_cap);
	/* Twice the ring: a batch that wraps is made contiguous past its end. */
	c->batch_phys = table_alloc(sizeof(int64_t) * c->bp_cap * 2);
	c->parks = table_alloc(sizeof(*c->parks) * c->park_cap);
	c->park_sq = table_alloc(sizeof(*c->park_sq) * c->park_cap);
	c->offs = table_alloc(sizeof(*c->offs) * slots);
	if (ring_create(BK_HELD_WAKE_RING, &c->held_wake) != 0)
		c->held_wake = NULL;
	if (!c->acks || !c->batch_phys || !c->parks || !c->park_sq || !c->offs || !c->held_wake) {
		bk_core_fini(c);
		return -ENOMEM;
	}
	c->park_next_deadline = UINT64_MAX;
	return 0;
}

void
bk_core_fini(struct bk_core *c)
{
	free(c->dq);
	c->dq = NULL;
	ring_free(c->held_wake);
	c->held_wake = NULL;
	if (c->acks)
		munmap(c->acks, sizeof(*c->acks) * c->ack_cap);
	if (c->batch_phys)
		munmap(c->batch_phys, sizeof(int64_t) * c->bp_cap * 2);
	if (c->parks)
		munmap(c->parks, sizeof(*c->parks) * c->park_cap);
	if (c->park_sq)
		munmap(c->park_sq, sizeof(*c->park_sq) * c->park_cap);
	c->park_sq = NULL;
	if (c->offs)
		munmap(c->offs, sizeof(*c->offs) * (c->off_mask + 1));
	c->acks = NULL;
	c->batch_phys = NULL;
	c->parks = NULL;
	c->offs = NULL;
}
