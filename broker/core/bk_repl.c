// SPDX-License-Identifier: Apache-2.0
/*
 * bk_repl.c - replication, the master's side (docs/replication.md): the
 * REPL requests of slaves, answered by the core that owns the shard.
 *
 * A slave's replication session for shard c talks to master core c over
 * the dataplane transport. Each REPL request carries the slave's end of
 * log, which is also its acknowledgement; the core answers at once with
 * the whole records past it (at most the request's max_bytes), or parks
 * the request and answers it from its tick as soon as its shard has new
 * bytes (an append in the same loop iteration), or with no data at the
 * deadline (the heartbeat that keeps the slave counted as connected).
 *
 * DESIGN
 * The acknowledged offset is written and read by the owning core only: a
 * SYNC_MASTER put waits in the core's pending-ack FIFO (bk_core.c) until
 * repl_acked covers its ticket, exactly as a SYNC_FLUSH put waits for the
 * flusher. No lock, no thread hand-off: one round trip to the slave is
 * the whole cost of SYNC_MASTER. A parked request is answered in the
 * same tick that follows the append, so the bytes leave with the loop's
 * next TX flush.
 *
 * Nothing here allocates, locks or sleeps: slots are a fixed array, and the
 * answer is built in the transport's response buffer (one memcpy of the
 * log bytes).
 */
#include <errno.h>
#include <string.h>

#include "bk_priv.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "wire/dp.h"

#define REPL_SUSPEND_MAX_MS 5000u
/* A slave whose last request is older than this is not connected. */
#define REPL_ALIVE_NS (3000ull * 1000000ull)
/*
 * ASYNC_MASTER holds a parked request until this many bytes are new or the
 * oldest waited this long (repl_hold()).
 */
#define REPL_ASYNC_BYTES (256u << 10)
#define REPL_ASYNC_NS (1000ull * 1000ull)
/* A slot silent this long is free for another session. */
#define REPL_SLOT_STALE_NS (30000ull * 1000000ull)

static uint32_t
answer_cap(const struct bk_core *c)
{
	/* The transport's message limit, less the response's fixed parts. */
	return c->bk->conf.max_msg_size + WIRE_DP_MSG_OVERHEAD - WIRE_DP_RESP_HEAD_LEN -
	       WIRE_DP_REPL_RESP_FIXED;
}

/* Answer @h with @status, the shard's geometry and @len bytes at @data. */
static void
repl_answer(struct bk_core *c, struct dp_xhandle h, uint64_t recv_ns, int32_t status,
	    uint64_t offset, const uint8_t *data, uint32_t len)
{
	const struct clog *log = store_clog(c->bk->store, c->id);
	struct wire_dp_repl_resp r = {
		.head = {.status = status, .ts_recv_ns = recv_ns, .ts_handled_ns = c->now_ns},
		.master_end = clog_written(log),
		.data_offset = offset,
		.min_offset = clog_min(log),
		.base_end = c->repl_base_end,
		.seg_size = c->bk->conf.seg_size,
		.cores = (uint16_t)c->bk->ncores,
		/*
		 * A SYNC_MASTER answers SEND_OK once a slave holds the bytes: with
		 * SYNC_FLUSH too, since a disk can lose what it said it synced.
		 * With failover, the group's next master is its most caught-up
		 * slave: what a slave holds past that master's base_end was never
		 * acknowledged (docs/failover.md), so a deposed master's tail is cut.
		 */
		.flags = c->bk->conf.role == BK_ROLE_SYNC_MASTER &&
					 atomic_load_relaxed(&c->bk->epoch) == 0
				 ? WIRE_DP_REPL_F_SLAVE_ACKED
				 : 0,
		.epoch = atomic_load_relaxed(&c->bk->epoch),
		.data = data,
		.data_len = len,
	};
	uint32_t total = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_REPL_RESP_FIXED + len;
	uint8_t *buf = bk_core_ans_buf(c, h, total);

	if (buf == NULL) {
		/* no big buffer free: the slave asks again */
		if (len > 0 && bk_core_ans_pending(c, h))
			repl_answer(c, h, recv_ns, WIRE_DP_ST_SYSTEM_BUSY, offset, NULL, 0);
		return;
	}
	if (wire_dp_repl_resp_encode(&r, buf, total) != (long)total)
		return;
	c->st.repl_bytes += len;
	bk_core_respond(c, h, total);
}

/*
 * Answer @sl's request with what its shard has past its offset.
 * Return: true when answered (bytes, or an error), false when nothing is new.
 */
static bool
repl_serve(struct bk_core *c, struct bk_repl_slave *sl)
{
	const uint8_t *p = NULL;
	uint32_t max = sl->max_bytes < answer_cap(c) ? sl->max_bytes : answer_cap(c);
	long n = store_repl_read(c->bk->store, c->id, sl->offset, max, &p);

	if (n == 0)
		return false;
	sl->parked = false;
	if (n == -ERANGE) {
		/* Below the log's start (retention) or past its end: the slave decides. */
		repl_answer(c, sl->h, sl->recv_ns, WIRE_DP_ST_PULL_OFFSET_MOVED, sl->offset, NULL,
			    0);
		return true;
	}
	if (n < 0 || (uint64_t)n > answer_cap(c)) {
		repl_answer(c, sl->h, sl->recv_ns, WIRE_DP_ST_SYSTEM_ERROR, sl->offset, NULL, 0);
		return true;
	}
	repl_answer(c, sl->h, sl->recv_ns, WIRE_DP_ST_SUCCESS, sl->offset, p, (uint32_t)n);
	return true;
}

/*
 * ASYNC_MASTER: keep @sl's request parked while what is new past its offset
 * is under REPL_ASYNC_BYTES and younger than REPL_ASYNC_NS. SEND_OK never
 * waits for a slave there, and a slave woken at every append took the
 * core's CPU on a shared host (produce p50 2x the lone broker's on 2
 * vCPUs); held, it wakes at most about a thousand times a second and copies
 * in larger pieces. SYNC_MASTER answers at once: its SENDs wait for the ack.
 */
static bool
repl_hold(const struct bk_core *c, struct bk_repl_slave *sl, uint64_t end, uint64_t now)
{
	if (c->bk->conf.role != BK_ROLE_ASYNC_MASTER || end <= sl->offset) {
		sl->new_ns = 0;
		return false;
	}
	if (sl->new_ns == 0)
		sl->new_ns = now;
	/* a tick's clock may be older than the request's (read before its poll) */
	return end - sl->offset < REPL_ASYNC_BYTES &&
	       (now <= sl->new_ns || now - sl->new_ns < REPL_ASYNC_NS);
}

/*
 * Does the slave's last record (the one ending at its offset) match ours at
 * the same place? Then its log is a prefix of ours up to its offset.
 */
static bool
prev_ok(const struct bk_core *c, const struct wire_dp_repl_req *r)
{
	uint32_t size;
	uint32_t hash;

	if (r->offset == 0)
		return true;
	if (r->prev_size == 0 || r->prev_off + r->prev_size != r->offset ||
	    clog_rec_id(store_clog(c->bk->store, c->id), r->prev_off, &size, &hash) != 0)
		return false;
	return size == r->prev_size && hash == r->prev_hash;
}

/*
 * The group's master restarted with a log shorter than ours and takes back
 * what we hold past its end (bk_tailback.c): answered at once from our log,
 * as a master answers a slave, with no slot (nothing is acknowledged to us
 * and nothing parks). A master whose last record is not ours is told so
 * (PULL_OFFSET_MOVED): the logs forked, and it takes nothing. Only a
 * slave answers (bk_repl_handle()).
 */
static void
recover_serve(struct bk_core *c, const struct dp_xreq *req, const struct wire_dp_repl_req *r,
	      uint64_t end)
{
	struct bk_repl_slave one = {
		.h = req->h,
		.recv_ns = req->ts_recv_ns,
		.offset = r->offset,
		.max_bytes = r->max_bytes,
	};

	c->st.repl_recover++;
	if (r->offset > end || !prev_ok(c, r)) {
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_PULL_OFFSET_MOVED, r->offset,
			    NULL, 0);
		return;
	}
	if (!repl_serve(c, &one))
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_SUCCESS, r->offset, NULL, 0);
}

/* The slot of @req's session: its own, a free one, or a stale one; NULL when all are busy. */
static struct bk_repl_slave *
slot_for(struct bk_core *c, const struct dp_xreq *req, uint64_t now)
{
	struct bk_repl_slave *free_sl = NULL;

	for (unsigned i = 0; i < BK_REPL_SLAVES; i++) {
		struct bk_repl_slave *sl = &c->repl[i];

		if (sl->used && sl->session_id == req->h.session_id &&
		    sl->peer.ip == req->peer.ip && sl->peer.port == req->peer.port)
			return sl;
		if (free_sl == NULL && (!sl->used || now - sl->last_ns > REPL_SLOT_STALE_NS))
			free_sl = sl;
	}
	if (free_sl != NULL) {
		if (free_sl->used && free_sl->parked)
			c->repl_parked--;
		memset(free_sl, 0, sizeof(*free_sl));
		free_sl->used = true;
		free_sl->session_id = req->h.session_id;
		free_sl->peer = req->peer;
	}
	return free_sl;
}

void
bk_repl_handle(struct bk_core *c, const struct dp_xreq *req)
{
	const struct bk_conf *cf = &c->bk->conf;
	uint64_t now = clk_mono_fast_ns();
	uint64_t end = clog_written(store_clog(c->bk->store, c->id));
	struct wire_dp_repl_req r;
	struct bk_repl_slave *sl;

	c->st.repl_requests++;
	if (wire_dp_repl_req_decode(req->msg, req->len, &r) != 0 || r.shard != c->id) {
		bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, WIRE_DP_ST_BAD_REQUEST, 0);
		return;
	}
	if (cf->role != BK_ROLE_SLAVE && r.epoch > atomic_load_relaxed(&c->bk->epoch) &&
	    atomic_load_relaxed(&c->bk->epoch) != 0) {
		/*
		 * The slave follows a later epoch: this master was replaced
		 * (docs/failover.md). No write from now on; the HA thread sees
		 * the fence and steps down.
		 */
		atomic_store(&c->bk->fenced, true);
		c->st.repl_fenced++;
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_SERVICE_NOT_AVAILABLE, r.offset,
			    NULL, 0);
		return;
	}
	if ((cf->role == BK_ROLE_SLAVE) != !!(r.flags & WIRE_DP_REPL_RQ_F_RECOVER)) {
		/*
		 * No cascading: a slave's log is not a master's; and only a
		 * slave gives a restarting master its tail back.
		 */
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_SERVICE_NOT_AVAILABLE, r.offset,
			    NULL, 0);
		return;
	}
	if (cf->broker_name == NULL || r.name_len != strlen(cf->broker_name) ||
	    memcmp(r.name, cf->broker_name, r.name_len) != 0) {
		/* a slave of another group (misconfigured address): never feed it */
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_NO_PERMISSION, r.offset, NULL,
			    0);
		return;
	}
	if (r.cores != c->bk->ncores || r.seg_size != cf->seg_size) {
		/* the answer carries ours: the slave logs both and stops following */
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_BAD_REQUEST, r.offset, NULL, 0);
		return;
	}
	if (r.flags & WIRE_DP_REPL_RQ_F_RECOVER) {
		recover_serve(c, req, &r, end);
		return;
	}
	sl = slot_for(c, req, now);
	if (sl == NULL) {
		bk_core_busy_why(c, BK_BUSY_REPL);
		bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, WIRE_DP_ST_SYSTEM_BUSY, 0);
		return;
	}
	if (sl->parked) {
		/* superseded: the session moved on, its old request is gone */
		sl->parked = false;
		c->repl_parked--;
	}
	sl->in_sync = false;
	if (r.offset <= end && !prev_ok(c, &r)) {
		/* The logs differ before its end (we lost a tail, then took new writes). */
		sl->last_ns = now;
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_PULL_OFFSET_MOVED, r.offset,
			    NULL, 0);
		return;
	}
	sl->last_ns = now;
	sl->h = req->h;
	sl->recv_ns = req->ts_recv_ns;
	sl->offset = r.offset;
	sl->max_bytes = r.max_bytes;
	if (r.offset <= end) {
		/* Its end of log is its ack: it holds every byte below. */
		sl->acked = r.offset;
		sl->in_sync = true;
		sl->flushed = r.flushed < r.offset ? r.flushed : r.offset;
		if (r.offset > c->repl_acked) {
			c->repl_acked = r.offset;
			atomic_store_relaxed(&c->repl_acked_pub, r.offset);
		}
	}
	sl->new_ns = 0;
	if ((r.suspend_ms == 0 || !repl_hold(c, sl, end, now)) && repl_serve(c, sl))
		return;
	if (r.suspend_ms == 0) {
		repl_answer(c, req->h, req->ts_recv_ns, WIRE_DP_ST_SUCCESS, r.offset, NULL, 0);
		return;
	}
	sl->parked = true;
	sl->deadline_ns =
		now + (uint64_t)(r.suspend_ms < REPL_SUSPEND_MAX_MS ? r.suspend_ms
								    : REPL_SUSPEND_MAX_MS) *
			      1000000ull;
	c->repl_parked++;
}

unsigned
bk_repl_tick(struct bk_core *c, uint64_t now_ns)
{
	unsigned done = 0;
	uint64_t end = c->repl_parked ? clog_written(store_clog(c->bk->store, c->id)) : 0;

	for (unsigned i = 0; i < BK_REPL_SLAVES && c->repl_parked; i++) {
		struct bk_repl_slave *sl = &c->repl[i];

		if (!sl->parked)
			continue;
		if (!bk_core_ans_pending(c, sl->h)) {
			sl->parked = false; /* the session went away */
		} else if (repl_hold(c, sl, end, now_ns)) {
			continue;
		} else if (repl_serve(c, sl)) {
			done++;
		} else if (now_ns >= sl->deadline_ns) {
			sl->parked = false;
			repl_answer(c, sl->h, sl->recv_ns, WIRE_DP_ST_SUCCESS, sl->offset, NULL, 0);
			done++;
		}
		if (!sl->parked)
			c->repl_parked--;
	}
	return done;
}

bool
bk_repl_slave_ok(const struct bk_core *c, uint64_t now_ns)
{
	uint64_t end = clog_written(store_clog(c->bk->store, c->id));

	for (unsigned i = 0; i < BK_REPL_SLAVES; i++) {
		const struct bk_repl_slave *sl = &c->repl[i];

		if (sl->used && sl->in_sync && now_ns - sl->last_ns < REPL_ALIVE_NS &&
		    end - sl->acked < c->bk->conf.ha_max_gap)
			return true;
	}
	return false;
}
