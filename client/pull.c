// SPDX-License-Identifier: Apache-2.0
/*
 * pull.c - the pull API: PULL, the offset ops and SEND_BACK, one call each.
 *
 * A queue (struct sp_mq) is resolved through the topic's route to the
 * broker core that owns it. Every op follows up to MAX_REDIRECTS REDIRECT
 * answers to the core the broker names (and has the route refreshed), so a
 * stale queue->core map costs a round trip, not an error. The push
 * consumer (push.c) reuses the PULL encoder and decoder with async calls.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "client_priv.h"
#include "sprocket/consumer.h"
#include "wire/record.h"

#define MAX_REDIRECTS 3

/* Return: 0 with call->dst set to @mq's owning core, or a negative error. */
int
sp__mq_resolve(struct sp_client *c, const struct sp_mq *mq, struct dp_addr *dst)
{
	struct sp__topic *t;
	const struct sp__tq *q;
	int err;

	err = sp__topic_get(c, mq->topic, &t);
	if (err)
		return err;
	q = sp__topic_find(t, mq->broker, mq->queue_id, true);
	if (!q)
		q = sp__topic_find(t, mq->broker, mq->queue_id, false);
	if (!q) {
		sp__topic_put(c, t);
		return -ENOENT;
	}
	*dst = sp__tq_addr(t, q);
	sp__topic_put(c, t);
	return 0;
}

/* Runs @call to its end, following redirects. Return: 0 (call->resp set) or an error. */
static int
call_run(struct sp_client *c, const char *topic, struct sp__call *call)
{
	for (unsigned i = 0;; i++) {
		struct wire_dp_resp_head h;
		int err = sp__call_sync(c, call);

		if (err)
			return err;
		if (wire_dp_resp_head_decode(call->resp, call->resp_len, &h) != 0)
			return -EBADMSG;
		if (h.status != WIRE_DP_ST_REDIRECT || i == MAX_REDIRECTS)
			return 0;
		call->dst.port = h.redirect_port;
		sp__topic_refresh_soon(c, topic);
		sp__call_reset(call);
	}
}

/* ---- PULL ---- */

int
sp__pull_prepare(struct sp_client *c, const struct sp_mq *mq, const struct sp_pull_req *req,
		 struct sp__call *call)
{
	int32_t hashes[WIRE_DP_TAGS_MAX];
	const char *expr = req->expr && req->expr[0] ? req->expr : "*";
	struct wire_dp_pull_req r = {0};
	size_t cap;
	long n;
	int nh;
	int err;

	if (!req->group || !req->group[0] || strlen(req->group) > WIRE_DP_GROUP_MAX ||
	    strlen(mq->topic) == 0 || strlen(expr) > WIRE_DP_EXPR_MAX || req->offset < 0)
		return -EINVAL;
	nh = sp__tag_hashes(expr, hashes, WIRE_DP_TAGS_MAX);
	if (nh < 0)
		return nh;
	err = sp__mq_resolve(c, mq, &call->dst);
	if (err)
		return err;
	r.queue_offset = req->offset;
	r.commit_offset = req->commit_offset > 0 ? req->commit_offset : 0;
	r.queue_id = mq->queue_id;
	r.max_msgs = req->max_msgs ? (int32_t)req->max_msgs : 32;
	r.max_bytes = req->max_bytes ? req->max_bytes : WIRE_DP_BODY_MAX_DEFAULT;
	r.sysflag = WIRE_DP_PULL_SUBSCRIPTION;
	if (req->commit_offset > 0)
		r.sysflag |= WIRE_DP_PULL_COMMIT_OFFSET;
	if (req->suspend_ms) {
		r.sysflag |= WIRE_DP_PULL_SUSPEND;
		r.suspend_timeout_ms = req->suspend_ms;
	}
	r.expr_type = WIRE_DP_EXPR_TAG;
	r.tag_hashes = (const uint8_t *)hashes; /* little-endian host (wire/dp.h) */
	r.tag_count = (uint16_t)nh;
	r.group = req->group;
	r.group_len = (uint16_t)strlen(req->group);
	r.topic = mq->topic;
	r.topic_len = (uint16_t)strlen(mq->topic);
	r.expr = expr;
	r.expr_len = (uint16_t)strlen(expr);
	cap = WIRE_DP_PULL_REQ_FIXED + 4u * (size_t)nh + r.group_len + r.topic_len + r.expr_len;
	free(call->req);
	call->req = malloc(cap);
	if (!call->req)
		return -ENOMEM;
	n = wire_dp_pull_req_encode(&r, call->req, cap);
	if (n < 0)
		return (int)n;
	call->req_len = (uint32_t)n;
	call->op = WIRE_DP_OP_PULL;
	call->long_poll = req->suspend_ms > 0;
	return 0;
}

struct pull_priv {
	uint8_t *resp;
	void **inflated; /* bodies inflated for the caller (one malloc each) */
	size_t n_inflated;
	alignas(8) char mem[];
};

/*
 * Bodies a producer compressed (sysFlag bit 0: zlib, RocketMQ 4's only kind;
 * RocketMQ 5 names the kind in bits 8-10, 0 or 3 for zlib) are handed to the
 * caller inflated, as RocketMQ's clients do; sys_flag still says it was
 * compressed. A body that does not inflate, or would pass SP__INFLATE_MAX,
 * or of another kind (LZ4, ZSTD), is left as stored, and logged.
 */
#define SP__INFLATE_MAX (64u << 20)

static void
inflate_bodies(struct sp_client *c, struct pull_priv *pp, struct sp_pull_result *res)
{
	for (size_t i = 0; i < res->n_msgs; i++) {
		struct sp_msg_ext *m = &res->msgs[i];
		unsigned kind = ((unsigned)m->sys_flag >> 8) & 7;
		uLongf cap = (uLongf)m->body_len * 4 + 256;
		uint8_t *out = NULL;
		int zr = Z_BUF_ERROR;

		if (!(m->sys_flag & WIRE_SYSFLAG_COMPRESSED))
			continue;
		if (kind != 0 && kind != 3) {
			sp__log(c, SP_LOG_WARN,
				"%s: body compressed with kind %u (not zlib): left as stored",
				m->msg_id, kind);
			continue;
		}
		if (pp->inflated == NULL) {
			pp->inflated = calloc(res->n_msgs, sizeof(*pp->inflated));
			if (pp->inflated == NULL)
				return;
		}
		while (cap <= SP__INFLATE_MAX) {
			uLongf len = cap;
			uint8_t *b = realloc(out, cap);

			if (b == NULL)
				break;
			out = b;
			zr = uncompress(out, &len, m->body, (uLong)m->body_len);
			if (zr == Z_OK) {
				m->body = out;
				m->body_len = len;
				pp->inflated[pp->n_inflated++] = out;
				out = NULL;
				break;
			}
			if (zr != Z_BUF_ERROR)
				break;
			cap *= 2;
		}
		if (out != NULL || zr != Z_OK) {
			free(out);
			sp__log(c, SP_LOG_WARN,
				"%s: compressed body does not inflate (%s): left as stored",
				m->msg_id, zr == Z_BUF_ERROR ? "over 64 MiB" : "not zlib data");
		}
	}
}

int
sp__pull_parse(struct sp_client *c, struct sp__call *call, const char *expr,
	       struct sp_pull_result *res)
{
	struct wire_dp_pull_resp r;
	struct pull_priv *pp;
	size_t str_sz;
	long n;
	int err;

	memset(res, 0, sizeof(*res));
	err = wire_dp_pull_resp_decode(call->resp, call->resp_len, &r);
	if (err)
		return err;
	res->next_offset = r.next_begin_offset;
	res->min_offset = r.min_offset;
	res->max_offset = r.max_offset;
	res->ts = (struct sp_broker_ts){r.head.ts_recv_ns, r.head.ts_handled_ns,
					r.head.ts_durable_ns, r.head.ts_sent_ns};
	switch (r.head.status) {
	case WIRE_DP_ST_SUCCESS:
		res->status = SP_PULL_FOUND;
		break;
	case WIRE_DP_ST_PULL_NOT_FOUND:
		res->status = SP_PULL_NO_NEW_MSG;
		return 0;
	case WIRE_DP_ST_PULL_RETRY_IMMEDIATELY:
		res->status = SP_PULL_NO_MATCHED_MSG;
		return 0;
	case WIRE_DP_ST_PULL_OFFSET_MOVED:
		res->status = SP_PULL_OFFSET_ILLEGAL;
		return 0;
	default:
		return SP_ERR_STATUS(r.head.status);
	}
	n = sp__records_count(r.records, r.records_len);
	if (n < 0)
		return (int)n;
	str_sz = sp__rec_strbuf_size(r.records_len, (size_t)n);
	pp = malloc(sizeof(*pp) + (size_t)n * sizeof(struct sp_msg_ext) + str_sz);
	if (!pp)
		return -ENOMEM;
	res->msgs = (struct sp_msg_ext *)pp->mem;
	n = sp__records_decode(r.records, r.records_len, expr, res->msgs, (size_t)n,
			       pp->mem + (size_t)n * sizeof(struct sp_msg_ext), str_sz);
	if (n < 0) {
		free(pp);
		res->msgs = NULL;
		return (int)n;
	}
	res->n_msgs = (size_t)n;
	pp->inflated = NULL;
	pp->n_inflated = 0;
	inflate_bodies(c, pp, res);
	/* the messages point into the response: the result takes it over */
	pp->resp = call->resp;
	call->resp = NULL;
	res->priv_ = pp;
	return 0;
}

void
sp_pull_result_free(struct sp_pull_result *res)
{
	struct pull_priv *pp;

	if (!res || !res->priv_)
		return;
	pp = res->priv_;
	for (size_t i = 0; i < pp->n_inflated; i++)
		free(pp->inflated[i]);
	free(pp->inflated);
	free(pp->resp);
	free(pp);
	res->priv_ = NULL;
	res->msgs = NULL;
	res->n_msgs = 0;
}

int
sp_pull(struct sp_client *c, const struct sp_mq *mq, const struct sp_pull_req *req,
	struct sp_pull_result *res)
{
	struct sp__call *call;
	int err;

	if (!c || !mq || !req || !res)
		return -EINVAL;
	memset(res, 0, sizeof(*res));
	call = sp__call_new();
	if (!call)
		return -ENOMEM;
	err = sp__pull_prepare(c, mq, req, call);
	if (!err)
		err = call_run(c, mq->topic, call);
	if (!err)
		err = sp__pull_parse(c, call, req->expr, res);
	sp__call_free(call);
	return err;
}

/* ---- offset ops ---- */

int
sp__offset_op(struct sp_client *c, uint16_t op, const char *group, const struct sp_mq *mq,
	      int64_t value, int64_t *off)
{
	struct wire_dp_offset_req r = {0};
	struct wire_dp_offset_resp o;
	struct sp__call *call;
	size_t cap;
	long n;
	int err;

	if (!c || !mq || (group && strlen(group) > WIRE_DP_GROUP_MAX))
		return -EINVAL;
	if ((op == WIRE_DP_OP_QUERY_OFFSET || op == WIRE_DP_OP_UPDATE_OFFSET) &&
	    (!group || !*group))
		return -EINVAL;
	r.value = value;
	r.queue_id = mq->queue_id;
	if (op == WIRE_DP_OP_QUERY_OFFSET || op == WIRE_DP_OP_UPDATE_OFFSET) {
		r.group = group;
		r.group_len = (uint16_t)strlen(group);
	}
	r.topic = mq->topic;
	r.topic_len = (uint16_t)strlen(mq->topic);
	call = sp__call_new();
	if (!call)
		return -ENOMEM;
	err = sp__mq_resolve(c, mq, &call->dst);
	if (err)
		goto out;
	cap = WIRE_DP_OFFSET_REQ_FIXED + r.group_len + r.topic_len;
	err = -ENOMEM;
	call->req = malloc(cap);
	if (!call->req)
		goto out;
	n = wire_dp_offset_req_encode(op, &r, call->req, cap);
	err = (int)n;
	if (n < 0)
		goto out;
	call->req_len = (uint32_t)n;
	call->op = op;
	err = call_run(c, mq->topic, call);
	if (err)
		goto out;
	err = wire_dp_offset_resp_decode(op, call->resp, call->resp_len, &o);
	if (err)
		goto out;
	if (o.head.status != WIRE_DP_ST_SUCCESS) {
		err = SP_ERR_STATUS(o.head.status);
		goto out;
	}
	if (off)
		*off = o.offset;
out:
	sp__call_free(call);
	return err;
}

int
sp_min_offset(struct sp_client *c, const struct sp_mq *mq, int64_t *off)
{
	return sp__offset_op(c, WIRE_DP_OP_GET_MIN_OFFSET, NULL, mq, 0, off);
}

int
sp_max_offset(struct sp_client *c, const struct sp_mq *mq, int64_t *off)
{
	return sp__offset_op(c, WIRE_DP_OP_GET_MAX_OFFSET, NULL, mq, 0, off);
}

int
sp_search_offset(struct sp_client *c, const struct sp_mq *mq, int64_t ts_ms, int64_t *off)
{
	return sp__offset_op(c, WIRE_DP_OP_SEARCH_OFFSET, NULL, mq, ts_ms, off);
}

int
sp_query_offset(struct sp_client *c, const char *group, const struct sp_mq *mq, int64_t *off)
{
	return sp__offset_op(c, WIRE_DP_OP_QUERY_OFFSET, group, mq, 0, off);
}

int
sp_update_offset(struct sp_client *c, const char *group, const struct sp_mq *mq, int64_t off)
{
	return sp__offset_op(c, WIRE_DP_OP_UPDATE_OFFSET, group, mq, off, NULL);
}

/* ---- SEND_BACK ---- */

int
sp_send_back(struct sp_client *c, const char *group, const struct sp_msg_ext *m, const char *broker,
	     int32_t delay_level, int32_t max_reconsume)
{
	struct wire_dp_send_back_req r = {0};
	struct wire_dp_resp_head h;
	struct sp_mq mq = {0};
	struct sp__call *call;
	size_t cap;
	long n;
	int err;

	if (!c || !group || !*group || !m || strlen(group) > WIRE_DP_GROUP_MAX ||
	    strlen(m->topic) > SP_TOPIC_MAX || (broker && strlen(broker) > SP_BROKER_MAX))
		return -EINVAL;
	/* the broker that stores the message: the owner of its queue */
	strcpy(mq.topic, m->topic);
	if (broker)
		strcpy(mq.broker, broker);
	mq.queue_id = m->queue_id;
	r.phys_offset = m->phys_offset;
	r.delay_level = delay_level;
	r.max_reconsume_times = max_reconsume;
	r.group = group;
	r.group_len = (uint16_t)strlen(group);
	r.origin_topic = m->topic;
	r.origin_topic_len = (uint16_t)strlen(m->topic);
	r.origin_msgid = m->msg_id;
	r.origin_msgid_len = (uint16_t)SP_MIN(strlen(m->msg_id), (size_t)WIRE_DP_MSGID_MAX);
	call = sp__call_new();
	if (!call)
		return -ENOMEM;
	err = sp__mq_resolve(c, &mq, &call->dst);
	if (err)
		goto out;
	cap = WIRE_DP_SEND_BACK_REQ_FIXED + r.group_len + r.origin_topic_len + r.origin_msgid_len;
	err = -ENOMEM;
	call->req = malloc(cap);
	if (!call->req)
		goto out;
	n = wire_dp_send_back_req_encode(&r, call->req, cap);
	err = (int)n;
	if (n < 0)
		goto out;
	call->req_len = (uint32_t)n;
	call->op = WIRE_DP_OP_SEND_BACK;
	err = call_run(c, m->topic, call);
	if (err)
		goto out;
	err = wire_dp_bare_resp_decode(WIRE_DP_OP_SEND_BACK, call->resp, call->resp_len, &h);
	if (!err && h.status != WIRE_DP_ST_SUCCESS)
		err = SP_ERR_STATUS(h.status);
out:
	sp__call_free(call);
	return err;
}
