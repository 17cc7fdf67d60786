// SPDX-License-Identifier: Apache-2.0
/*
 * bk_offsets.c - consumer offsets on the core (bk_handlers.h): the table of
 * committed offsets per (topic, group, queue), sized at start, and the
 * QUERY/UPDATE/MAX/MIN offset requests answered from it and the store.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"

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
struct bk_off *
bk_core__off_find_ex(struct bk_core *c, const char *topic, size_t tl, const char *group, size_t gl,
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

struct bk_off *
bk_core__off_find(struct bk_core *c, const char *topic, size_t tl, const char *group, size_t gl,
		  uint32_t qid, bool create)
{
	return bk_core__off_find_ex(c, topic, tl, group, gl, qid, create, false);
}

int
bk_core_offset_load(struct bk_core *c, const char *topic, const char *group, uint32_t qid,
		    int64_t offset)
{
	struct bk_off *o =
		bk_core__off_find(c, topic, strlen(topic), group, strlen(group), qid, true);

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

		/* acquire: pairs with the release in bk_core__off_find(); the key is immutable after */
		if (!atomic_load_acquire(&o->used))
			return -1;
		if (o->hash == h && o->qid == qid && o->topic_len == tl && o->group_len == gl &&
		    memcmp(o->topic, topic, tl) == 0 && memcmp(o->group, group, gl) == 0)
			return atomic_load_relaxed(&o->offset);
	}
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

int
bk_core__do_offset(struct bk_core *c, const struct dp_xreq *req)
{
	struct wire_dp_offset_req r;
	const struct bk_topic *t;
	const struct store_queue *sq;
	struct bk_off *o;
	int64_t v;

	if (wire_dp_offset_req_decode(req->op, req->msg, req->len, &r) != 0)
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  WIRE_DP_ST_BAD_REQUEST, 0);
	t = bk_core__topic_or_answer(c, req, r.topic, r.topic_len);
	if (t == NULL || !bk_core__queue_is_mine(c, req, t, r.queue_id, t->nq))
		return 0;
	sq = t->sq[r.queue_id];
	switch (req->op) {
	case WIRE_DP_OP_QUERY_OFFSET:
		o = bk_core__off_find(c, r.topic, r.topic_len, r.group, r.group_len,
				      (uint32_t)r.queue_id, false);
		if (o == NULL || atomic_load_relaxed(&o->offset) < 0)
			return answer_offset(c, req, WIRE_DP_ST_QUERY_NOT_FOUND, 0);
		return answer_offset(c, req, WIRE_DP_ST_SUCCESS, atomic_load_relaxed(&o->offset));
	case WIRE_DP_OP_UPDATE_OFFSET:
		if (r.value < 0)
			return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
						  WIRE_DP_ST_BAD_REQUEST, 0);
		o = bk_core__off_find(c, r.topic, r.topic_len, r.group, r.group_len,
				      (uint32_t)r.queue_id, true);
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
