// SPDX-License-Identifier: Apache-2.0
/*
 * bk_send_back.c - SEND_BACK on the core (bk_handlers.h): a consumer hands
 * back a message it failed to consume, for the group's retry topic (or its
 * dead-letter topic past maxReconsumeTimes), as RocketMQ's
 * CONSUMER_SEND_MSG_BACK.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"

/* ---- SEND_BACK ---- */

int
bk_core__do_send_back(struct bk_core *c, const struct dp_xreq *req)
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
	if (!bk_core__queue_is_mine(c, req, t, 0, t->nq))
		return 0;
	if (!bk_core__ack_room(c, 0)) {
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
	bk_core__msg_from(&m, req, c, 0);
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
		return bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					  bk_core__put_status(c, n), 0);
	c->st.delayed += sq != t->sq[0];
	a.ticket = res.ticket;
	a.phys = res.phys;
	a.qoff = res.qoff;
	a.sq = sq;
	a.put_ns = a.handled_ns = clk_mono_fast_ns();
	bk_core_park_touch(c, sq);
	bk_core__ack_or_defer(c, &a);
	return 0;
}
