// SPDX-License-Identifier: Apache-2.0
/*
 * bk_pull.c - PULL on the core (bk_handlers.h), and long polling.
 *
 * A PULL with SUSPEND that finds nothing is parked with what it needs to be
 * re-run (queue, offset, limits, tag hashes). The tick re-runs parked pulls
 * when this core appended or completed acks (data may have become visible)
 * and when the earliest deadline passes; a pull that still finds nothing at
 * its deadline is answered PULL_NOT_FOUND.
 *
 * The park table is small (remotingLongPollsPerCore). A remoting pull that
 * does not get a place in it (the control thread says so, or the table is
 * full) is held by the remoting thread instead: the core answers it
 * PULL_NOT_FOUND flagged held, marks its queue, and at the tick tells the
 * remoting thread of each marked queue that grew (bk_core__held_tell()), which
 * posts the pull again. docs/isolation.md, "Long polls".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/ring.h"
#include "common/compiler.h"
#include "wire/dp.h"

#define PULL_SCAN_MAX 1024u /* ConsumeQueue units looked at per pull */
#define PULL_MSGS_MAX BK_PULL_MSGS_MAX

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

int
bk_core__do_pull(struct bk_core *c, const struct dp_xreq *req)
{
	struct wire_dp_pull_req r;
	const struct bk_topic *t;
	struct bk_park p = {.h = req->h, .recv_ns = req->ts_recv_ns};
	uint32_t suspend;
	bool held;

	if (wire_dp_pull_req_decode(req->msg, req->len, &r) != 0 || r.max_msgs <= 0 ||
	    r.max_bytes == 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	t = bk_core__topic_or_answer(c, req, r.topic, r.topic_len);
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
	if (!bk_core__queue_is_mine(c, req, t, r.queue_id, t->read_queues))
		return 0;
	if (r.group_len) {
		/*
		 * The group's slot: its commit, and what it pulls (GROUP_GET_NUMS). Slots
		 * are never reclaimed: pulls alone may fill only half the table.
		 */
		/* a held pull posted again carries the commit of its first post: stale now */
		bool commit = (r.sysflag & WIRE_DP_PULL_COMMIT_OFFSET) && r.commit_offset >= 0 &&
			      !(bk_core__is_rmt(req->h) && bk_core__rcmd_of(req->h)->again);

		p.off = bk_core__off_find_ex(c, r.topic, r.topic_len, r.group, r.group_len,
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
	/* a remoting pull the remoting thread holds instead (bk_rcmd.held) */
	held = suspend > 0 && bk_core__is_rmt(req->h) &&
	       (c->park_n == c->park_cap || bk_core__rcmd_of(req->h)->no_park);
	if (pull_run(c, &p, suspend == 0 || (c->park_n == c->park_cap && !held)))
		return 0;
	if (held) {
		/* nothing yet: answered PULL_NOT_FOUND, which the remoting thread keeps */
		c->held_marks += store_queue_wait(p.sq);
		bk_core__rcmd_of(req->h)->held = true;
		bk_core__rcmd_of(req->h)->held_sq = p.sq;
		(void)pull_run(c, &p, true);
		c->st.held++;
		return 0;
	}
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

/*
 * The queues of held pulls (bk_rcmd.held) that may have grown since the last
 * tick: each marked one goes on the ring to the remoting thread, which posts
 * its pulls again. When the core cannot say which (too many touched, a full
 * ring, a slave's replication), held_all: all of them. The marks are the
 * core's own (store_queue_wait()), so no fence is needed: the ring's
 * release/acquire orders a wake after the held answer it follows, and the
 * remoting thread takes wakes before it reaps answers (bk_rmt_held.c).
 * Return: queues told.
 */
unsigned
bk_core__held_tell(struct bk_core *c, uint64_t now)
{
	unsigned told = c->held_n;

	for (uint8_t i = 0; i < c->held_n; i++) {
		void *q = (void *)c->held_q[i];

		if (ring_enqueue_burst(c->held_wake, &q, 1) != 1)
			c->held_touch_all = true;
	}
	c->held_n = 0;
	/* every held pull again: not more often than BK_HELD_ALL_NS (a slave's replication) */
	if (c->held_touch_all && now - c->held_all_ns >= BK_HELD_ALL_NS) {
		atomic_store_release(&c->held_all, 1);
		c->held_all_ns = now;
		c->held_touch_all = false;
		told++;
	}
	if (told)
		c->rmt_posted = true; /* wakes the control thread if it sleeps */
	return told;
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
	/* a queue pulls are held for: told at the tick (bk_core__held_tell()), once */
	if (c->held_marks && store_queue_wait_take(sq)) {
		c->held_marks--;
		if (c->held_n < sizeof(c->held_q) / sizeof(c->held_q[0]))
			c->held_q[c->held_n++] = sq;
		else
			c->held_touch_all = true;
	}
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
	bool final =
		now >= p->deadline_ns ||
		(bk_core__is_rmt(p->h) && atomic_load_relaxed(&bk_core__rcmd_of(p->h)->cancelled));
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
unsigned
bk_core__parks_scan(struct bk_core *c, uint64_t now)
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
