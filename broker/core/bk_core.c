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
 * DESIGN
 * Durability never makes the core wait. A SEND is appended, then
 * store_ack_state() says whether the flush mode's condition already holds
 * (ASYNC_FLUSH: always); if not, the answer goes into a FIFO of pending acks
 * that the tick polls against the flusher's published offset. The FIFO is in
 * ticket order, so the tick looks at its head only.
 *
 * Long polling: a PULL with SUSPEND that finds nothing is parked with what
 * it needs to be re-run (queue, offset, limits, tag hashes). The tick
 * re-runs parked pulls when this core appended or completed acks (data may
 * have become visible) and when the earliest deadline passes; a pull that
 * still finds nothing at its deadline is answered PULL_NOT_FOUND.
 *
 * Auto-creation: the core cannot create files, so a SEND for an unknown
 * topic posts the name to the control thread's mailbox and is answered
 * SYSTEM_BUSY; the client retries and finds the topic published.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <urcu/urcu-qsbr.h>

#include "bk_msgtype.h"
#include "bk_priv.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"

#define PULL_SCAN_MAX 1024u /* ConsumeQueue units looked at per pull */
#define PULL_MSGS_MAX BK_PULL_MSGS_MAX

static uint64_t
ms_to_ns(uint64_t ms)
{
	return ms * 1000000ull;
}

/* ---- answering ---- */

/*
 * Answers go back the way the request came: to the transport server, or,
 * for a request the control thread put on the command ring (RocketMQ
 * remoting), into the command's own buffer and back on the completion ring.
 */
static bool
is_rmt(struct dp_xhandle h)
{
	return h.session_id == BK_RMT_SESSION;
}

static struct bk_rcmd *
rcmd_of(struct dp_xhandle h)
{
	return (struct bk_rcmd *)(uintptr_t)h.req_id;
}

/* Hands @cmd back to the control thread; the core must not touch it again. */
static void
rmt_complete(struct bk_core *c, struct bk_rcmd *cmd)
{
	/* Cannot fail: control keeps fewer commands in flight than the ring holds. */
	if (dp_lcore_complete(&c->lc, cmd) != 0)
		c->st.gone++;
	c->rmt_posted = true;
}

/*
 * A buffer for the @len-byte answer to @h, or NULL: the request is gone,
 * or (command ring) its buffer is too small: the command goes back now
 * with `need` set, and control runs it again with a buffer that fits.
 */
uint8_t *
bk_core_ans_buf(struct bk_core *c, struct dp_xhandle h, uint32_t len)
{
	struct bk_rcmd *cmd;

	if (!is_rmt(h))
		return dp_xsrv_resp_buf(c->xs, h, len);
	cmd = rcmd_of(h);
	if (len <= cmd->resp_cap)
		return cmd->resp;
	cmd->need = len;
	cmd->resp_len = 0;
	c->rmt_gone = h.seq;
	rmt_complete(c, cmd);
	return NULL;
}

bool
bk_core_ans_pending(struct bk_core *c, struct dp_xhandle h)
{
	if (!is_rmt(h))
		return dp_xsrv_is_pending(c->xs, h);
	return h.seq != c->rmt_gone;
}

/* The request may have gone (session expired or reset): count it, nothing else to do. */
void
bk_core_respond(struct bk_core *c, struct dp_xhandle h, uint32_t len)
{
	if (is_rmt(h)) {
		struct bk_rcmd *cmd = rcmd_of(h);

		cmd->resp_len = len;
		rmt_complete(c, cmd);
		return;
	}
	if (dp_xsrv_respond(c->xs, h, len) != 0)
		c->st.gone++;
}

static unsigned
err_op(uint16_t op)
{
	return op == WIRE_DP_OP_SEND	     ? BK_ERR_SEND
	       : op == WIRE_DP_OP_SEND_BATCH ? BK_ERR_SEND_BATCH
	       : op == WIRE_DP_OP_PULL	     ? BK_ERR_PULL
					     : BK_ERR_OTHER_OP;
}

/* The row of @st in bk_core_stats.err_by[][]: 0 for a status not named there. */
static unsigned
err_status(int32_t st)
{
	switch (st) {
	case WIRE_DP_ST_SYSTEM_ERROR:
		return 1;
	case WIRE_DP_ST_NOT_SUPPORTED:
		return 2;
	case WIRE_DP_ST_FLUSH_DISK_TIMEOUT:
		return 3;
	case WIRE_DP_ST_SLAVE_NOT_AVAILABLE:
		return 4;
	case WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT:
		return 5;
	case WIRE_DP_ST_MESSAGE_ILLEGAL:
		return 6;
	case WIRE_DP_ST_SERVICE_NOT_AVAILABLE:
		return 7;
	case WIRE_DP_ST_NO_PERMISSION:
		return 8;
	case WIRE_DP_ST_TOPIC_NOT_EXIST:
		return 9;
	case WIRE_DP_ST_PULL_NOT_FOUND:
		return 10;
	case WIRE_DP_ST_PULL_RETRY_IMMEDIATELY:
		return 11;
	case WIRE_DP_ST_PULL_OFFSET_MOVED:
		return 12;
	case WIRE_DP_ST_QUERY_NOT_FOUND:
		return 13;
	case WIRE_DP_ST_SUBSCRIPTION_GROUP_NOT_EXIST:
		return 14;
	case WIRE_DP_ST_BAD_REQUEST:
		return 15;
	default:
		return 0;
	}
}

int
bk_core_answer_err(struct bk_core *c, struct dp_xhandle h, uint16_t op, uint64_t recv_ns,
		   int32_t status, int redirect)
{
	struct wire_dp_resp_head head = {
		.status = status, .ts_recv_ns = recv_ns, .ts_handled_ns = clk_mono_fast_ns()};
	uint8_t *buf;
	long fixed;
	uint32_t len;

	if (status == WIRE_DP_ST_REDIRECT) {
		head.redirect_core = (uint16_t)redirect;
		head.redirect_port = (uint16_t)(c->bk->conf.dp_port + redirect);
		c->st.redirects++;
	} else if (status == WIRE_DP_ST_SYSTEM_BUSY) {
		c->st.busy++;
		c->st.busy_by[c->busy_why < BK_BUSY_WHYS ? c->busy_why : BK_BUSY_OTHER]++;
		c->busy_why = BK_BUSY_OTHER;
	} else {
		c->st.errors++;
		c->st.err_by[err_op(op)][err_status(status)]++;
	}
	fixed = wire_dp_resp_fixed_len(op);
	len = WIRE_DP_RESP_HEAD_LEN + (uint32_t)(fixed > 0 ? fixed : 0);
	buf = bk_core_ans_buf(c, h, len);
	if (buf == NULL)
		return 0; /* the request is gone */
	if (wire_dp_resp_error_encode(op, &head, buf, len) != (long)len)
		return 0;
	bk_core_respond(c, h, len);
	return 0;
}

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

/* ---- consumer offsets ---- */

static uint32_t
off_hash(const char *topic, size_t tl, const char *group, size_t gl, uint32_t qid)
{
	uint32_t h = bk_name_hash(topic, tl);

	h = (h ^ bk_name_hash(group, gl)) * 16777619u;
	return (h ^ qid) * 16777619u;
}

/*
 * Return: the slot for the key; with @create a new one, or NULL (not found /
 * full). @pull_only: made for a pull's counters, not a commit: only while the
 * table is at most half full.
 */
static struct bk_off *
off_find_ex(struct bk_core *c, const char *topic, size_t tl, const char *group, size_t gl,
	    uint32_t qid, bool create, bool pull_only)
{
	uint32_t h = off_hash(topic, tl, group, gl, qid);

	for (uint32_t i = h & c->off_mask;; i = (i + 1) & c->off_mask) {
		struct bk_off *o = &c->offs[i];

		if (!atomic_load_relaxed(&o->used)) {
			if (!create || (c->off_n + 1) * 4 > (c->off_mask + 1) * 3)
				return NULL;
			/* a pull without a commit may take only half the table: commits keep room */
			if (pull_only && (c->off_n + 1) * 2 > c->off_mask + 1)
				return NULL;
			o->qid = qid;
			o->hash = h;
			o->topic_len = (uint16_t)tl;
			o->group_len = (uint16_t)gl;
			memcpy(o->topic, topic, tl);
			o->topic[tl] = '\0';
			memcpy(o->group, group, gl);
			o->group[gl] = '\0';
			atomic_store_relaxed(&o->offset, -1);
			/* release: pairs with the acquire in bk_offsets_collect() */
			atomic_store_release(&o->used, 1);
			c->off_n++;
			return o;
		}
		if (o->hash == h && o->qid == qid && o->topic_len == tl && o->group_len == gl &&
		    memcmp(o->topic, topic, tl) == 0 && memcmp(o->group, group, gl) == 0)
			return o;
	}
}

static struct bk_off *
off_find(struct bk_core *c, const char *topic, size_t tl, const char *group, size_t gl,
	 uint32_t qid, bool create)
{
	return off_find_ex(c, topic, tl, group, gl, qid, create, false);
}

int
bk_core_offset_load(struct bk_core *c, const char *topic, const char *group, uint32_t qid,
		    int64_t offset)
{
	struct bk_off *o = off_find(c, topic, strlen(topic), group, strlen(group), qid, true);

	if (o == NULL)
		return -ENOSPC;
	atomic_store_relaxed(&o->offset, offset);
	return 0;
}

int64_t
bk_core_offset_peek(const struct bk_core *c, const char *topic, const char *group, uint32_t qid)
{
	size_t tl = strlen(topic);
	size_t gl = strlen(group);
	uint32_t h = off_hash(topic, tl, group, gl, qid);

	for (uint32_t i = h & c->off_mask;; i = (i + 1) & c->off_mask) {
		const struct bk_off *o = &c->offs[i];

		/* acquire: pairs with the release in off_find(); the key is immutable after */
		if (!atomic_load_acquire(&o->used))
			return -1;
		if (o->hash == h && o->qid == qid && o->topic_len == tl && o->group_len == gl &&
		    memcmp(o->topic, topic, tl) == 0 && memcmp(o->group, group, gl) == 0)
			return atomic_load_relaxed(&o->offset);
	}
}

/* ---- topics ---- */

/* Asks the control thread to create @name. Return: true when posted. */
static bool
request_create(struct bk_core *c, const char *name, size_t len, uint32_t queues)
{
	uint64_t one = 1;

	/* acquire: pairs with the control thread's release when it took the last one */
	if (atomic_load_acquire(&c->create_full))
		return false;
	memcpy(c->create_req.name, name, len);
	c->create_req.name[len] = '\0';
	c->create_req.queues = queues;
	/* release: pairs with the acquire in the control thread's mailbox scan */
	atomic_store_release(&c->create_full, 1);
	/* eventfd write never sleeps (the counter cannot overflow at 1 per post) */
	if (write(c->bk->efd, &one, sizeof(one)) < 0)
		return true; /* control also scans on its timer */
	return true;
}

static bool
is_system_topic(const char *name, size_t len)
{
	return (len >= 7 && memcmp(name, BK_RETRY_PREFIX, 7) == 0) ||
	       (len >= 5 && memcmp(name, BK_DLQ_PREFIX, 5) == 0);
}

/*
 * The topic for a write to @name, or NULL with *@status set: unknown (auto
 * creation requested: SYSTEM_BUSY, else TOPIC_NOT_EXIST), not writable.
 */
const struct bk_topic *
bk_core_topic_for_write(struct bk_core *c, const char *name, size_t len, bool force_create,
			uint32_t queues, int32_t *status)
{
	/* Published topics have valid names: check the name only on a miss. */
	const struct bk_topic *t = bk_topic_find(c->bk, name, len);

	if (t == NULL) {
		if (!bk_topic_name_ok(name, len)) {
			*status = WIRE_DP_ST_MESSAGE_ILLEGAL;
			return NULL;
		}
		if (force_create || (c->bk->conf.auto_create && !is_system_topic(name, len))) {
			request_create(c, name, len, queues);
			bk_core_busy_why(c, BK_BUSY_TOPIC_CREATE);
			*status = WIRE_DP_ST_SYSTEM_BUSY;
		} else {
			*status = WIRE_DP_ST_TOPIC_NOT_EXIST;
		}
		return NULL;
	}
	if (!(t->perm & META_PERM_WRITE) ||
	    !(atomic_load_relaxed(&c->bk->perm) & META_PERM_WRITE) ||
	    atomic_load_relaxed(&c->bk->ns_refused) || bk_topic_broker_only(t)) {
		*status = WIRE_DP_ST_NO_PERMISSION;
		return NULL;
	}
	return t;
}

/* The topic @name of a read or offset request, or NULL after answering why not. */
static const struct bk_topic *
topic_or_answer(struct bk_core *c, const struct dp_xreq *req, const char *name, size_t len)
{
	const struct bk_topic *t = bk_topic_find(c->bk, name, len);

	if (t == NULL)
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					 bk_topic_name_ok(name, len) ? WIRE_DP_ST_TOPIC_NOT_EXIST
								     : WIRE_DP_ST_MESSAGE_ILLEGAL,
					 0);
	return t;
}

/*
 * Return: whether queue @qid (< @limit) of @t is this core's; otherwise the
 * request was answered BAD_REQUEST (out of range) or REDIRECT (its owner).
 */
static bool
queue_is_mine(struct bk_core *c, const struct dp_xreq *req, const struct bk_topic *t, int32_t qid,
	      uint32_t limit)
{
	if (qid < 0 || (uint32_t)qid >= limit) {
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					 WIRE_DP_ST_BAD_REQUEST, 0);
		return false;
	}
	if (t->core[qid] != c->id) {
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, WIRE_DP_ST_REDIRECT,
					 t->core[qid]);
		return false;
	}
	return true;
}

/* ---- SEND, SEND_BATCH ---- */

static bool
ack_room(const struct bk_core *c, uint32_t records)
{
	return c->ack_tail - c->ack_head < c->ack_cap &&
	       c->bp_tail - c->bp_head + records <= c->bp_cap;
}

#define ACK_SLAVE_TIMEOUT (-ETIME) /* ack_state(): SYNC_MASTER's slave did not ack in time */

/*
 * Whether @a may be answered: store_ack_state() (the flush condition, with
 * FLUSH_DISK_TIMEOUT), then for a SYNC_MASTER put with a slave in sync the
 * slave's acknowledgement of its ticket (docs/replication.md), published
 * by this core itself when the slave's next REPL request came in.
 */
static int
ack_state(const struct bk_core *c, const struct bk_ack *a, uint64_t now)
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

/* Answer @a with what ack_state() said (not 0). */
static void
ack_answer(struct bk_core *c, const struct bk_ack *a, int st, uint64_t now)
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
static void
ack_or_defer(struct bk_core *c, struct bk_ack *a)
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
	st = ack_state(c, a, a->put_ns);
	if (st == 0) {
		c->acks[c->ack_tail++ % c->ack_cap] = *a;
		return;
	}
	if (a->op == WIRE_DP_OP_SEND_BATCH)
		c->bp_head += a->count;
	ack_answer(c, a, st, a->put_ns);
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

static int32_t
put_status(struct bk_core *c, long rc)
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

static void
msg_from(struct wire_msg *m, const struct dp_xreq *req, const struct bk_core *c, int32_t qid)
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

static int
do_send(struct bk_core *c, const struct dp_xreq *req)
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
	if (!queue_is_mine(c, req, t, r.queue_id, t->write_queues))
		return 0;
	msg_from(&m, req, c, r.queue_id);
	m.born_ts = r.born_ts;
	m.sys_flag = r.sysflag;
	m.topic = r.topic;
	m.topic_len = (uint8_t)r.topic_len;

	if (req->op == WIRE_DP_OP_SEND) {
		if (!ack_room(c, 0)) {
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
						  put_status(c, rc), 0);
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
		if (!ack_room(c, n) || n > c->bp_cap) {
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
								  put_status(c, rc), 0);
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
	ack_or_defer(c, &a);
	return 0;
}

/* ---- PULL ---- */

static bool
tag_match(const int32_t *tags, uint16_t n, int32_t h)
{
	if (n == 0)
		return true;
	for (uint16_t i = 0; i < n; i++)
		if (tags[i] == h)
			return true;
	return false;
}

/*
 * Answers a pull from @p's parameters, or leaves it for later.
 * @final: no parking possible (deadline passed, or no SUSPEND).
 *
 * Records that do not pass the tag filter: a new pull that scanned only
 * such records is answered PULL_RETRY_IMMEDIATELY with the offset past
 * them (RocketMQ's NO_MATCHED_MESSAGE), so consumers and their committed
 * offsets move on; a parked pull (p->used) skips them and stays parked.
 * Return: true when answered (or the request is gone), false: park it.
 */
static bool
pull_run(struct bk_core *c, struct bk_park *p, bool final)
{
	const struct store *s = c->bk->store;
	uint64_t min = store_queue_min(s, p->sq);
	uint64_t max = store_queue_max(s, p->sq);
	struct wire_dp_pull_resp r = {
		.head = {.ts_recv_ns = p->recv_ns, .ts_handled_ns = clk_mono_fast_ns()},
		.min_offset = (int64_t)min,
		.max_offset = (int64_t)max,
	};
	uint64_t off = (uint64_t)p->offset;
	uint64_t end, scan;
	uint32_t bytes = 0, cnt = 0, len;
	uint8_t *buf;
	long rl;

	if (p->offset < 0 || off < min || off > max) {
		r.head.status = WIRE_DP_ST_PULL_OFFSET_MOVED;
		r.next_begin_offset = (int64_t)(p->offset < 0 || off < min ? min : max);
		goto small;
	}
	/* Pass 1: what fits. */
	for (scan = 0, end = off; end < max && scan < PULL_SCAN_MAX; end++, scan++) {
		const uint8_t *rec;
		struct cq_unit u;
		long n = store_get(s, p->sq, end, &rec, &u);

		/*
		 * Lost in a recovery, or damaged (a wrong BODYCRC, header or size,
		 * counted by the store): passed over as filtered (docs/store.md,
		 * "Damage"). Stopping here would answer every later pull with the
		 * same offset: the queue would stall for good.
		 */
		if (n == -ENOENT || n == -EBADMSG)
			continue;
		if (n < 0)
			break;
		if (!tag_match(p->tags, p->tag_count, u.tag_hash))
			continue;
		if (cnt > 0 && (bytes + (uint32_t)n > p->max_bytes))
			break;
		bytes += (uint32_t)n;
		c->pull_rec[cnt] = rec;
		c->pull_len[cnt] = (uint32_t)n;
		if (++cnt >= (uint32_t)p->max_msgs) {
			end++;
			break;
		}
	}
	r.next_begin_offset = (int64_t)end;
	if (cnt == 0) {
		if (end < max || (end > off && !p->used)) {
			r.head.status = WIRE_DP_ST_PULL_RETRY_IMMEDIATELY; /* filtered a window */
			goto small;
		}
		if (!final) {
			p->offset = (int64_t)end;
			return false;
		}
		r.head.status = WIRE_DP_ST_PULL_NOT_FOUND;
		goto small;
	}
	r.head.status = WIRE_DP_ST_SUCCESS;
	r.rec_count = cnt;
	r.records_len = bytes;
	len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PULL_RESP_FIXED + bytes;
	buf = bk_core_ans_buf(c, p->h, len);
	if (buf == NULL) {
		if (bk_core_ans_pending(c, p->h)) {
			bk_core_busy_why(c, BK_BUSY_ANSWER_BUF);
			bk_core_answer_err(c, p->h, WIRE_DP_OP_PULL, p->recv_ns,
					   WIRE_DP_ST_SYSTEM_BUSY, 0);
		}
		return true;
	}
	/* Zero-copy form of the encoder: it writes the prefix, we append records. */
	rl = wire_dp_pull_resp_encode(&r, buf, len);
	if (rl < 0)
		return true;
	c->st.msgs_out += cnt;
	c->st.bytes_out += bytes;
	if (p->off) {
		/* single writer (this core): relaxed load and store, no read-modify-write */
		atomic_store_relaxed(&p->off->pulls, atomic_load_relaxed(&p->off->pulls) + 1);
		atomic_store_relaxed(&p->off->pulled, atomic_load_relaxed(&p->off->pulled) + cnt);
	}
	/*
	 * Pass 2: copy what pass 1 chose. The pointers stay valid for this
	 * call: retention unmaps a segment only after a grace period, and a
	 * retired write-behind buffer is reused only after a QSBR grace period
	 * (bk_store_reader_sync()), which this iteration of the loop holds up.
	 */
	for (uint32_t i = 0, at = (uint32_t)rl; i < cnt; i++) {
		memcpy(buf + at, c->pull_rec[i], c->pull_len[i]);
		at += c->pull_len[i];
	}
	c->st.pulls++;
	bk_core_respond(c, p->h, len);
	return true;

small:
	len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PULL_RESP_FIXED;
	buf = bk_core_ans_buf(c, p->h, len);
	if (buf && wire_dp_pull_resp_encode(&r, buf, len) == (long)len)
		bk_core_respond(c, p->h, len);
	return true;
}

static int
do_pull(struct bk_core *c, const struct dp_xreq *req)
{
	struct wire_dp_pull_req r;
	const struct bk_topic *t;
	struct bk_park p = {.h = req->h, .recv_ns = req->ts_recv_ns};
	uint32_t suspend;

	if (wire_dp_pull_req_decode(req->msg, req->len, &r) != 0 || r.max_msgs <= 0 ||
	    r.max_bytes == 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	t = topic_or_answer(c, req, r.topic, r.topic_len);
	if (t == NULL)
		return 0;
	if (!(t->perm & META_PERM_READ) || !(atomic_load_relaxed(&c->bk->perm) & META_PERM_READ))
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_NO_PERMISSION, 0);
	if (r.group_len) {
		/* a subscription group switched off (consumeEnable=false) reads nothing */
		const struct bk_group *g = bk_group_find(c->bk, r.group, r.group_len);

		if (g && !g->consume_enable)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_NO_PERMISSION, 0);
	}
	if (!queue_is_mine(c, req, t, r.queue_id, t->read_queues))
		return 0;
	if (r.group_len) {
		/*
		 * The group's slot: its commit, and what it pulls (GROUP_GET_NUMS). Slots
		 * are never reclaimed: pulls alone may fill only half the table.
		 */
		bool commit = (r.sysflag & WIRE_DP_PULL_COMMIT_OFFSET) && r.commit_offset >= 0;

		p.off = off_find_ex(c, r.topic, r.topic_len, r.group, r.group_len,
				    (uint32_t)r.queue_id, true, !commit);
		if (p.off && commit)
			atomic_store_relaxed(&p.off->offset, r.commit_offset);
	}
	p.sq = t->sq[r.queue_id];
	p.offset = r.queue_offset;
	p.qid = r.queue_id;
	p.max_msgs = r.max_msgs > PULL_MSGS_MAX ? PULL_MSGS_MAX : r.max_msgs;
	p.max_bytes =
		r.max_bytes > c->bk->conf.max_msg_size ? c->bk->conf.max_msg_size : r.max_bytes;
	/* More tags than we keep: no broker filter, the client filters by string. */
	if (r.expr_type == WIRE_DP_EXPR_TAG && r.tag_count <= BK_PULL_TAGS_MAX) {
		p.tag_count = r.tag_count;
		for (uint16_t i = 0; i < r.tag_count; i++)
			p.tags[i] = wire_dp_pull_req_tag(&r, i);
	}
	suspend = (r.sysflag & WIRE_DP_PULL_SUSPEND) ? r.suspend_timeout_ms : 0;
	if (suspend > BK_SUSPEND_MAX_MS)
		suspend = BK_SUSPEND_MAX_MS;
	if (pull_run(c, &p, suspend == 0 || c->park_n == c->park_cap))
		return 0;
	/* Park it. */
	p.used = true;
	/*
	 * Now, not c->now_ns: that is the last tick's, and requests run before the
	 * tick of their loop, after the core may have slept idle for any time (a
	 * first long poll after a quiet minute would have been due already).
	 */
	p.deadline_ns = clk_mono_fast_ns() + ms_to_ns(suspend);
	for (uint32_t i = 0; i < c->park_cap; i++) {
		if (!c->parks[i].used) {
			c->parks[i] = p;
			c->park_sq[i] = p.sq;
			if (i >= c->park_hi)
				c->park_hi = i + 1;
			c->park_n++;
			c->st.parked++;
			if (p.deadline_ns < c->park_next_deadline || c->park_n == 1)
				c->park_next_deadline = p.deadline_ns;
			return 0;
		}
	}
	return 0;
}

/* Did @sq get data since the last scan (or may any queue have)? */
static bool
park_queue_dirty(const struct bk_core *c, const struct store_queue *sq)
{
	if (c->park_dirty_all)
		return true;
	for (uint8_t i = 0; i < c->park_ndirty; i++)
		if (c->park_dirty_q[i] == sq)
			return true;
	return false;
}

void
bk_core_park_touch(struct bk_core *c, const struct store_queue *sq)
{
	c->park_dirty = true;
	if (!c->park_n || park_queue_dirty(c, sq))
		return;
	if (!c->park_touch_ns)
		c->park_touch_ns = clk_mono_fast_ns();
	if (c->park_ndirty == sizeof(c->park_dirty_q) / sizeof(c->park_dirty_q[0]))
		c->park_dirty_all = true;
	else
		c->park_dirty_q[c->park_ndirty++] = sq;
}

/*
 * Parked pull @i, if anything may have changed for it: nothing new in its
 * queue, not its deadline, not cancelled and not gone, it stays as it is.
 * Return: true when it was answered (or is gone) and left.
 */
static bool
park_run(struct bk_core *c, uint32_t i, uint64_t now)
{
	struct bk_park *p = &c->parks[i];
	/* a remoting pull whose connection closed answers now, to free its job */
	bool final = now >= p->deadline_ns ||
		     (is_rmt(p->h) && atomic_load_relaxed(&rcmd_of(p->h)->cancelled));
	bool pending = bk_core_ans_pending(c, p->h);

	if (pending && !final && !park_queue_dirty(c, p->sq))
		return false;
	if (pending && !pull_run(c, p, final))
		return false;
	if (pending && !final && c->park_touch_ns)
		bk_lat_record(c, BK_LAT_WAKE, clk_mono_fast_ns() - c->park_touch_ns);
	p->used = false;
	c->park_sq[i] = NULL;
	c->park_n--;
	return true;
}

/*
 * Parked pulls that may answer now. Usually only those of the queues that got
 * data since the last scan (a pass over the dense park_sq array, a pointer
 * compare each); all of them when a deadline is due or any queue may have
 * changed (park_dirty_all), which also works out the next deadline.
 */
static unsigned
parks_scan(struct bk_core *c, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	unsigned done = 0;
	uint32_t hi = 0;

	if (!c->park_dirty_all && now < c->park_next_deadline) {
		for (uint32_t i = 0; i < c->park_hi; i++)
			if (c->park_sq[i] && park_queue_dirty(c, c->park_sq[i]))
				done += park_run(c, i, now);
		return done;
	}
	for (uint32_t i = 0, seen = 0; i < c->park_hi && seen < c->park_n; i++) {
		struct bk_park *p = &c->parks[i];

		if (!p->used)
			continue;
		seen++;
		if (park_run(c, i, now)) {
			seen--;
			done++;
			continue;
		}
		hi = i + 1;
		if (p->deadline_ns < next)
			next = p->deadline_ns;
	}
	c->park_hi = hi;
	c->park_next_deadline = next;
	return done;
}

/* ---- offsets ---- */

static int
answer_offset(struct bk_core *c, const struct dp_xreq *req, int32_t status, int64_t off)
{
	struct wire_dp_offset_resp r = {
		.head = {.status = status,
			 .ts_recv_ns = req->ts_recv_ns,
			 .ts_handled_ns = clk_mono_fast_ns()},
		.offset = off,
	};
	uint32_t len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_OFFSET_RESP_FIXED;
	uint8_t *buf;

	if (status != WIRE_DP_ST_SUCCESS)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, status, 0);
	buf = bk_core_ans_buf(c, req->h, len);
	if (buf && wire_dp_offset_resp_encode(req->op, &r, buf, len) == (long)len)
		bk_core_respond(c, req->h, len);
	return 0;
}

static int
do_offset(struct bk_core *c, const struct dp_xreq *req)
{
	struct wire_dp_offset_req r;
	const struct bk_topic *t;
	const struct store_queue *sq;
	struct bk_off *o;
	int64_t v;

	if (wire_dp_offset_req_decode(req->op, req->msg, req->len, &r) != 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	t = topic_or_answer(c, req, r.topic, r.topic_len);
	if (t == NULL || !queue_is_mine(c, req, t, r.queue_id, t->nq))
		return 0;
	sq = t->sq[r.queue_id];
	switch (req->op) {
	case WIRE_DP_OP_QUERY_OFFSET:
		o = off_find(c, r.topic, r.topic_len, r.group, r.group_len, (uint32_t)r.queue_id,
			     false);
		if (o == NULL || atomic_load_relaxed(&o->offset) < 0)
			return answer_offset(c, req, WIRE_DP_ST_QUERY_NOT_FOUND, 0);
		return answer_offset(c, req, WIRE_DP_ST_SUCCESS, atomic_load_relaxed(&o->offset));
	case WIRE_DP_OP_UPDATE_OFFSET:
		if (r.value < 0)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_BAD_REQUEST, 0);
		o = off_find(c, r.topic, r.topic_len, r.group, r.group_len, (uint32_t)r.queue_id,
			     true);
		if (o == NULL) {
			bk_core_busy_why(c, BK_BUSY_OFFSETS);
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_SYSTEM_BUSY, 0);
		}
		atomic_store_relaxed(&o->offset, r.value);
		return answer_offset(c, req, WIRE_DP_ST_SUCCESS, r.value);
	case WIRE_DP_OP_GET_MIN_OFFSET:
		return answer_offset(c, req, WIRE_DP_ST_SUCCESS,
				     (int64_t)store_queue_min(c->bk->store, sq));
	case WIRE_DP_OP_GET_MAX_OFFSET:
		return answer_offset(c, req, WIRE_DP_ST_SUCCESS,
				     (int64_t)store_queue_max(c->bk->store, sq));
	default: /* SEARCH_OFFSET */ {
		uint64_t q;

		if (store_search_time(c->bk->store, sq, r.value, &q) != 0)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_SYSTEM_ERROR, 0);
		v = (int64_t)q;
		return answer_offset(c, req, WIRE_DP_ST_SUCCESS, v);
	}
	}
	return 0;
}

/* ---- SEND_BACK ---- */

static int
do_send_back(struct bk_core *c, const struct dp_xreq *req)
{
	static const char *const skip[] = {"RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELAY", NULL};
	char topic[META_TOPIC_MAX + 1];
	struct wire_dp_send_back_req r;
	const struct bk_topic *t;
	struct store_put_res res;
	struct bk_ack a = {.h = req->h, .recv_ns = req->ts_recv_ns, .op = req->op};
	struct wire_msg orig, m;
	struct store_queue *sq = NULL;
	const uint8_t *rec;
	const char *rt;
	const char *oid;
	size_t rtl, plen, tl, il;
	char idbuf[WIRE_MSGID_MAX];
	int32_t status;
	uint32_t max_re;
	bool dlq;
	long n;

	if (!bk_core_writable(c)) {
		c->st.write_refused++;
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_SERVICE_NOT_AVAILABLE, 0);
	}
	if (wire_dp_send_back_req_decode(req->msg, req->len, &r) != 0 || r.group_len == 0 ||
	    r.group_len + 7 > META_TOPIC_MAX)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	n = store_get_phys(c->bk->store, r.phys_offset, &rec);
	if (n < 0 || wire_rec_decode(rec, (size_t)n, 0, &orig) < 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_SYSTEM_ERROR, 0);
	/* a copy into the group's retries is a read: of a message the account may read */
	if (!bk_acl_may_read(c, req, &orig)) {
		c->st.acl_denied[BK_ACL_NO_PERM]++;
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_NO_PERMISSION, 0);
	}
	/* the request's maxReconsumeTimes, else its group's retryMaxTimes, else the broker's */
	max_re = c->bk->conf.max_reconsume;
	if (r.max_reconsume_times > 0) {
		max_re = (uint32_t)r.max_reconsume_times;
	} else {
		const struct bk_group *g = bk_group_find(c->bk, r.group, r.group_len);

		if (g)
			max_re = g->retry_max;
	}
	dlq = (uint32_t)orig.reconsume_times + 1 > max_re || r.delay_level < 0;
	tl = dlq ? 5 : 7;
	memcpy(topic, dlq ? BK_DLQ_PREFIX : BK_RETRY_PREFIX, tl);
	memcpy(topic + tl, r.group, r.group_len);
	tl += r.group_len;
	topic[tl] = '\0';
	if (!bk_topic_name_ok(topic, tl))
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	t = bk_core_topic_for_write(c, topic, tl, true, 1, &status);
	if (t == NULL)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, status, 0);
	if (!queue_is_mine(c, req, t, 0, t->nq))
		return 0;
	if (!ack_room(c, 0)) {
		bk_core_busy_why(c, BK_BUSY_INFLIGHT);
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_SYSTEM_BUSY, 0);
	}
	/* Properties: the original's, plus where it came from (RocketMQ's names). */
	if (wire_props_copy_except(c->props, sizeof(c->props), &plen, orig.props, orig.props_len,
				   skip) != 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_MESSAGE_ILLEGAL, 0);
	if (!wire_props_get(orig.props, orig.props_len, "RETRY_TOPIC", &rt, &rtl)) {
		rt = orig.topic;
		rtl = orig.topic_len;
	}
	/* As RocketMQ: the first delivery's id stays the origin through every retry. */
	if (wire_props_get(orig.props, orig.props_len, "ORIGIN_MESSAGE_ID", &oid, &il) && il > 0 &&
	    il < sizeof(idbuf)) {
		memcpy(idbuf, oid, il);
	} else {
		il = wire_msgid_encode(&orig.store_host, orig.phys_offset, idbuf);
	}
	if (wire_props_append(c->props, sizeof(c->props), &plen, "RETRY_TOPIC", 11, rt, rtl) != 0 ||
	    wire_props_append(c->props, sizeof(c->props), &plen, "ORIGIN_MESSAGE_ID", 17, idbuf,
			      il) != 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_MESSAGE_ILLEGAL, 0);
	msg_from(&m, req, c, 0);
	m.topic = topic;
	m.topic_len = (uint8_t)tl;
	m.flag = orig.flag;
	m.sys_flag = orig.sys_flag & ~(WIRE_SYSFLAG_BORNHOST_V6 | WIRE_SYSFLAG_STOREHOST_V6);
	m.born_ts = orig.born_ts;
	m.born_host = orig.born_host;
	m.reconsume_times = orig.reconsume_times + 1;
	m.body = orig.body;
	m.body_len = orig.body_len;
	m.props = c->props;
	m.props_len = (uint16_t)plen;
	sq = t->sq[0];
	if (!dlq && c->bk->conf.delay_levels > 0) {
		/* RocketMQ: level 3 + the times consumed so far unless the consumer named one */
		uint32_t level = r.delay_level > 0 ? (uint32_t)r.delay_level
						   : 3u + (uint32_t)SP_MAX(orig.reconsume_times, 0);

		sq = bk_delay_wrap(c, &m, SP_MIN(level, c->bk->conf.delay_levels), &status);
		if (sq == NULL)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, status, 0);
	}
	n = store_put(c->bk->store, sq, &m, &res);
	if (n < 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, put_status(c, n), 0);
	c->st.delayed += sq != t->sq[0];
	a.ticket = res.ticket;
	a.phys = res.phys;
	a.qoff = res.qoff;
	a.sq = sq;
	a.put_ns = a.handled_ns = clk_mono_fast_ns();
	bk_core_park_touch(c, sq);
	ack_or_defer(c, &a);
	return 0;
}

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
		(void)do_send(c, req);
		return;
	case WIRE_DP_OP_PULL:
		(void)do_pull(c, req);
		return;
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET:
		(void)do_offset(c, req);
		return;
	case WIRE_DP_OP_SEND_BACK:
		(void)do_send_back(c, req);
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
	o = off_find(c, r.topic, r.topic_len, r.group, r.group_len, (uint32_t)r.queue_id, true);
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
		rmt_complete(c, cmd);
		return;
	case BK_ROP_GATHER:
		rmt_gather(c, cmd);
		rmt_complete(c, cmd);
		return;
	case BK_ROP_OFFSET_RAISE:
		offset_raise(c, cmd);
		rmt_complete(c, cmd);
		return;
	case BK_ROP_END_TX:
		bk_tx_end(c, cmd);
		rmt_complete(c, cmd);
		return;
	case BK_ROP_TX_CHECK:
		bk_tx_check(c, cmd);
		rmt_complete(c, cmd);
		return;
	case BK_ROP_QSTAT:
		qstat(c, cmd);
		rmt_complete(c, cmd);
		return;
	case BK_ROP_OFFSET_DROP:
		offset_drop(c, cmd);
		rmt_complete(c, cmd);
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
		int st = ack_state(c, a, now);

		if (st == 0)
			break;
		/* only answers that waited: those given at the append are not counted */
		bk_lat_record(c, BK_LAT_DURABLE, now - a->put_ns);
		ack_answer(c, a, st, now);
		if (a->op == WIRE_DP_OP_SEND_BATCH)
			c->bp_head += a->count;
		c->ack_head++;
		bk_core_park_touch(c, a->sq);
		work++;
	}
	if (c->bk->conf.role == BK_ROLE_SLAVE && c->park_n) {
		/* A slave's shard grows by replication, not by this core's appends. */
		uint64_t w = clog_written(store_clog(c->bk->store, c->id));

		if (w != c->slave_seen) {
			c->slave_seen = w;
			c->park_dirty = c->park_dirty_all = true;
		}
	}
	if (SP_UNLIKELY(atomic_load_relaxed(&c->rmt_kick)) &&
	    atomic_exchange_explicit(&c->rmt_kick, 0, memory_order_acquire))
		c->park_dirty = c->park_dirty_all = true;
	if (c->park_n && (c->park_dirty || now_ns >= c->park_next_deadline))
		work += parks_scan(c, now_ns);
	c->park_dirty = c->park_dirty_all = false;
	c->park_ndirty = 0;
	c->park_touch_ns = 0;
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
	if (!c->acks || !c->batch_phys || !c->parks || !c->park_sq || !c->offs) {
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
