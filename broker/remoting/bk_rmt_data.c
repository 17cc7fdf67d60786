// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_data.c - the requests a core executes, on the remoting port
 * (bk_rmt_share.h): SEND (V1, V2, batch), PULL, offsets, SEND_BACK, message
 * lookups turned into the core's requests, and the cores' answers turned
 * into remoting responses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/bk_msgtype.h"
#include "bk_rmt_share.h"
#include "common/clock.h"
#include "common/log.h"
#include "store/clog.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

/* ---- data requests: to the owning core ---- */

/*
 * A slave takes no write (RocketMQ: "messages are put to the slave"), nor
 * does a master a NameServer refuses (bk_ctl_ns_refused_tick()). Return: refused.
 */
static bool
writes_refused(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	char remark[320];

	if (atomic_load_relaxed(&r->bk->ns_refused)) {
		snprintf(remark, sizeof(remark), "this broker is write-protected: %s",
			 r->bk->ns_refused_why);
		bk_rmt__reply(r, c, q, WIRE_RSP_NO_PERMISSION, remark);
		return true;
	}
	if (r->bk->conf.role != BK_ROLE_SLAVE)
		return false;
	snprintf(remark, sizeof(remark),
		 "service not available now: this broker is a slave (brokerId %" PRId64
		 " of %s) and takes no writes; send to its master",
		 r->bk->conf.broker_id, r->bk->conf.broker_name);
	bk_rmt__reply(r, c, q, WIRE_RSP_SERVICE_NOT_AVAILABLE, remark);
	return true;
}

void
bk_rmt__do_send(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	bool batch = q->code == WIRE_REQ_SEND_BATCH_MESSAGE;
	size_t tl = 0, pl = 0;
	const char *topic = bk_rmt__ext_s2(q, "topic", "b", &tl);
	const char *props = bk_rmt__ext_s2(q, "properties", "i", &pl);
	int64_t qid = -1, sysflag = 0, born = 0, flag = 0, recon = 0, dq = 0, maxre = -1;
	struct wire_dp_send_req s = {0};
	const struct bk_topic *t;
	char dlq[META_TOPIC_MAX + 1];
	struct rjob *j;
	const char *why = NULL;
	unsigned asks = 0;
	int32_t code = 0;
	uint32_t n = 0, cap;
	long len;

	if (writes_refused(r, c, q))
		return;
	if (topic == NULL || bk_rmt__ext_i(q, "queueId", "e", &qid) ||
	    bk_rmt__ext_i(q, "bornTimestamp", "g", &born)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "the send header lacks topic, queueId or bornTimestamp");
		return;
	}
	(void)bk_rmt__ext_i(q, "sysFlag", "f", &sysflag);
	(void)bk_rmt__ext_i(q, "flag", "h", &flag);
	(void)bk_rmt__ext_i(q, "reconsumeTimes", "j", &recon);
	(void)bk_rmt__ext_i(q, "defaultTopicQueueNums", "d", &dq);
	(void)bk_rmt__ext_i(q, "maxReconsumeTimes", "l", &maxre);
	if (!bk_topic_name_ok(topic, tl)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "the topic name is not valid: ^[%|a-zA-Z0-9_-]{1,127}$");
		return;
	}
	if (bk_rmt__is_send_forbidden(topic)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_NO_PERMISSION,
			      "sending to this system topic is forbidden");
		return;
	}
	if (q->body_len == 0 || (!batch && q->body_len > r->bk->conf.max_msg_size)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL,
			      q->body_len ? "the message body is larger than maxMessageSize"
					  : "the message body is empty");
		return;
	}
	if (pl > WIRE_DP_PROPS_MAX) {
		bk_rmt__reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL,
			      "the message properties are too long");
		return;
	}
	/* Not retried by RocketMQ's producers (MESSAGE_ILLEGAL): the reason reaches the caller. */
	why = bk_msg_refused(props, pl, (int32_t)sysflag,
			     batch ? 0u : bk_core_msg_allow(&r->bk->cores[0]), &asks);
	if (why == NULL && (asks & BK_MSG_TIMER)) {
		int64_t due;

		if (bk_timer_due(r->bk, props, pl, clk_wall_ms(), &due, &why) >= 0)
			why = NULL;
	}
	if (why != NULL) {
		bk_rmt__reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL, why);
		return;
	}
	if ((asks & BK_MSG_TX) && r->bk->conf.tx_reject) {
		char remark[96];

		/* RocketMQ's words for rejectTransactionMessage */
		snprintf(remark, sizeof(remark),
			 "the broker[%s] sending transaction message is forbidden", r->conf.ip);
		bk_rmt__reply(r, c, q, WIRE_RSP_NO_PERMISSION, remark);
		return;
	}
	/* A retry-topic send past maxReconsumeTimes goes to the group's DLQ (RocketMQ). */
	if (!batch && tl > 7 && memcmp(topic, BK_RETRY_PREFIX, 7) == 0 &&
	    recon >= (maxre >= 0 ? maxre : (int64_t)r->bk->conf.max_reconsume) &&
	    tl - 7 + 5 <= META_TOPIC_MAX) {
		snprintf(dlq, sizeof(dlq), "%s%.*s", BK_DLQ_PREFIX, (int)(tl - 7), topic + 7);
		topic = dlq;
		tl = strlen(dlq);
		qid = 0;
	}
	{
		uint32_t create = 0;

		if (tl > 7 && memcmp(topic, BK_RETRY_PREFIX, 7) == 0)
			create = 1;
		else if (tl > 5 && memcmp(topic, BK_DLQ_PREFIX, 5) == 0)
			create = 1;
		else if (r->bk->conf.auto_create)
			create = dq > 0 ? (uint32_t)SP_MIN((uint64_t)dq,
							   (uint64_t)r->bk->conf.default_queues)
					: r->bk->conf.default_queues;
		t = bk_rmt__topic_get(r, topic, tl, create, &code, &why);
	}
	if (t == NULL) {
		char remark[200];

		snprintf(remark, sizeof(remark), "topic[%.*s] %s", (int)tl, topic, why);
		bk_rmt__reply(r, c, q, code, remark);
		return;
	}
	if (qid < 0)
		qid = (int64_t)(bk_rmt__rnd() % t->write_queues);
	if ((uint64_t)qid >= t->write_queues) {
		char remark[160];

		/* RocketMQ takes any queue < max(read, write); the core writes only to write queues. */
		snprintf(remark, sizeof(remark),
			 "request queueId[%" PRId64 "] is illegal, topic has %u write queues", qid,
			 t->write_queues);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, remark);
		return;
	}
	if (batch) {
		struct wire_batch_item it;
		size_t pos = 0;
		int k;

		while ((k = wire_batch_next(q->body, q->body_len, &pos, &it)) == 1) {
			why = bk_msg_refused(it.props, it.props_len, (int32_t)sysflag, 0, NULL);
			if (why != NULL) {
				bk_rmt__reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL, why);
				return;
			}
			n++;
		}
		if (k < 0 || n == 0) {
			bk_rmt__reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL,
				      "the batch body is malformed");
			return;
		}
	}
	s.born_ts = born;
	s.queue_id = (int32_t)qid;
	s.flag = batch ? 0 : (int32_t)flag;
	s.sysflag = (int32_t)sysflag;
	s.reconsume_times = batch ? 0 : (int32_t)recon;
	s.topic = topic;
	s.topic_len = (uint16_t)tl;
	s.props = batch ? NULL : props;
	s.props_len = batch ? 0 : (uint16_t)pl;
	s.body = q->body;
	s.body_len = q->body_len;
	cap = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_SEND_RESP_FIXED + 8u * n + 64;
	j = bk_rmt__job_new(r, c, q, batch ? WIRE_DP_OP_SEND_BATCH : WIRE_DP_OP_SEND,
			    q->body_len + (uint32_t)pl + (uint32_t)tl + 256, cap);
	if (j == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	len = wire_dp_send_req_encode(j->c.op, &s, j->reqbuf, q->body_len + pl + tl + 256);
	if (len < 0) {
		bk_rmt__job_free(r, j);
		bk_rmt__reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL,
			      "the message does not fit the dataplane format");
		return;
	}
	j->c.req_len = (uint32_t)len;
	j->batch_n = n;
	if (bk_rmt__job_post(r, j, t->core[qid]) != 0)
		bk_rmt__busy(r, c, q);
}

/* A pull refused here: clients read the four offsets from every pull answer. */
static void
pull_error(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, int32_t code,
	   const char *remark)
{
	struct rresp o = {
		.code = code, .opaque = q->opaque, .serialize = q->serialize, .remark = remark};

	bk_rmt__resp_ext(&o, "nextBeginOffset", "0");
	bk_rmt__resp_ext(&o, "minOffset", "0");
	bk_rmt__resp_ext(&o, "maxOffset", "0");
	bk_rmt__resp_ext(&o, "suggestWhichBrokerId", "0");
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		bk_rmt__conn_send(r, c, &o);
}

void
bk_rmt__do_pull(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl = 0, tl = 0, el = 0;
	const char *group = bk_rmt__ext_s(q, "consumerGroup", &gl);
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	const char *expr = bk_rmt__ext_s(q, "subscription", &el);
	const char *etype = bk_rmt__ext_s(q, "expressionType", NULL);
	int64_t qid, qoff, maxn = PULL_MAX_MSGS, sysflag = 0, commit = -1, suspend = 0;
	struct wire_dp_pull_req p = {0};
	int32_t codes[SUB_CODES_MAX];
	uint16_t ncodes = 0;
	const struct bk_topic *t;
	struct rjob *j;
	bool many = false;
	long len;

	if (!group || !topic || bk_rmt__ext_i(q, "queueId", NULL, &qid) ||
	    bk_rmt__ext_i(q, "queueOffset", NULL, &qoff) || gl > META_GROUP_MAX || gl == 0) {
		pull_error(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			   "the pull header lacks consumerGroup, topic, queueId or queueOffset");
		return;
	}
	(void)bk_rmt__ext_i(q, "maxMsgNums", NULL, &maxn);
	(void)bk_rmt__ext_i(q, "sysFlag", NULL, &sysflag);
	(void)bk_rmt__ext_i(q, "commitOffset", NULL, &commit);
	(void)bk_rmt__ext_i(q, "suspendTimeoutMillis", NULL, &suspend);
	t = bk_topic_find(r->bk, topic, tl);
	if (t == NULL || qid < 0 || (uint64_t)qid >= t->read_queues ||
	    (etype && strcmp(etype, "TAG") != 0)) {
		char remark[200];

		if (t == NULL)
			snprintf(remark, sizeof(remark),
				 "topic[%.*s] not exist, apply first please!", (int)tl, topic);
		else if (etype && strcmp(etype, "TAG") != 0)
			snprintf(remark, sizeof(remark),
				 "the broker filters by TAG only, not %.32s", etype);
		else
			snprintf(remark, sizeof(remark), "queueId[%" PRId64 "] is illegal", qid);
		pull_error(r, c, q, t ? WIRE_RSP_SYSTEM_ERROR : WIRE_RSP_TOPIC_NOT_EXIST, remark);
		return;
	}
	if (r->ops.group_get) {
		const struct bk_subgroup *cfg = r->ops.group_get(r->ops.arg, group);

		/* consumeBroadcastEnable=false: members that heartbeat BROADCASTING read nothing */
		if (cfg && !cfg->consume_broadcast && bk_rmt__group_broadcasting(r, group)) {
			char remark[META_GROUP_MAX + 64];

			snprintf(remark, sizeof(remark),
				 "the consumer group[%s] can not consume by broadcast way", group);
			pull_error(r, c, q, WIRE_RSP_NO_PERMISSION, remark);
			return;
		}
	}
	if (r->nresets) {
		int64_t to;

		if (bk_rmt__reset_take(r, group, topic, (uint32_t)qid, qoff, &to)) {
			/* an offset reset this consumer may not know of: it moves (its commit is dropped) */
			struct rresp o = {.code = WIRE_RSP_PULL_OFFSET_MOVED,
					  .opaque = q->opaque,
					  .serialize = q->serialize,
					  .remark = "the group's offset was reset"};
			char nb[24];

			snprintf(nb, sizeof(nb), "%" PRId64, to);
			bk_rmt__resp_ext(&o, "nextBeginOffset", nb);
			bk_rmt__resp_ext(&o, "minOffset", "0");
			bk_rmt__resp_ext(&o, "maxOffset", nb);
			bk_rmt__resp_ext(&o, "suggestWhichBrokerId", "0");
			if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
				bk_rmt__conn_send(r, c, &o);
			return;
		}
	}
	if ((sysflag & WIRE_DP_PULL_SUBSCRIPTION) && expr) {
		ncodes = bk_rmt__expr_codes(expr, el, codes, SUB_CODES_MAX, &many);
	} else {
		/* The subscription its heartbeat registered (Java sends none on the pull). */
		const struct rsub *s = bk_rmt__group_sub(r, group, topic);

		if (s) {
			ncodes = s->ncodes;
			memcpy(codes, s->codes, sizeof(codes[0]) * ncodes);
		}
	}
	p.queue_offset = qoff;
	p.commit_offset = commit;
	p.queue_id = (int32_t)qid;
	p.max_msgs = (int32_t)(maxn <= 0 ? 1 : SP_MIN(maxn, (int64_t)BK_PULL_MSGS_MAX));
	p.max_bytes = PULL_MAX_BYTES;
	p.sysflag = (uint32_t)sysflag & (WIRE_DP_PULL_COMMIT_OFFSET | WIRE_DP_PULL_SUSPEND);
	p.suspend_timeout_ms =
		suspend < 0 ? 0 : (uint32_t)SP_MIN(suspend, (int64_t)BK_SUSPEND_MAX_MS);
	p.expr_type = WIRE_DP_EXPR_TAG;
	p.tag_hashes = (const uint8_t *)codes; /* little-endian host (wire/dp.h) */
	p.tag_count = ncodes;
	p.group = group;
	p.group_len = (uint16_t)gl;
	p.topic = topic;
	p.topic_len = (uint16_t)tl;
	j = bk_rmt__job_new(r, c, q, WIRE_DP_OP_PULL, 1024 + (uint32_t)(gl + tl + 4u * ncodes),
			    WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PULL_RESP_FIXED + PULL_MAX_BYTES +
				    4096);
	if (j == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	len = wire_dp_pull_req_encode(&p, j->reqbuf, 1024 + gl + tl + 4u * ncodes);
	if (len < 0) {
		bk_rmt__job_free(r, j);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "the pull does not fit the dataplane format");
		return;
	}
	j->c.req_len = (uint32_t)len;
	/* one that may park counts against remotingLongPollsPerCore */
	j->poll = (p.sysflag & WIRE_DP_PULL_SUSPEND) && p.suspend_timeout_ms > 0;
	if (j->poll) {
		uint16_t core = t->core[qid];

		j->sq = t->sq[qid];
		j->deadline_ms = r->now_ms + p.suspend_timeout_ms;
		j->resp_full = j->c.resp_cap;
		/*
		 * No room in the core's park table, or its connection or address
		 * parks half its requests in flight there already: if it finds
		 * nothing, the remoting thread holds it (bk_rmt_held.c).
		 */
		if (core < r->bk->ncores &&
		    (r->polls[core] >= r->conf.polls_per_core ||
		     c->polls >= r->conf.max_jobs_per_conn / 2 ||
		     (r->conf.max_jobs_per_addr &&
		      ipcount_get(&r->polls_addr, c->peer.ip) >= r->conf.max_jobs_per_addr / 2))) {
			j->poll = false;
			j->c.no_park = true;
			/* the holding room is full already: refused now, not after a trip to the core */
			if (bk_rmt__held_full(r, c->peer.ip)) {
				bk_rmt__job_free(r, j);
				bk_rmt__busy(r, c, q);
				return;
			}
		}
	}
	if (bk_rmt__job_post(r, j, t->core[qid]) != 0)
		bk_rmt__busy(r, c, q);
}

/* QUERY/UPDATE_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST */
void
bk_rmt__do_offset(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl = 0, tl = 0;
	const char *group = bk_rmt__ext_s(q, "consumerGroup", &gl);
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	struct wire_dp_offset_req o = {0};
	const struct bk_topic *t;
	uint16_t op;
	int64_t qid, v = 0;
	struct rjob *j;
	long len;

	switch (q->code) {
	case WIRE_REQ_QUERY_CONSUMER_OFFSET:
		op = WIRE_DP_OP_QUERY_OFFSET;
		break;
	case WIRE_REQ_UPDATE_CONSUMER_OFFSET:
		op = WIRE_DP_OP_UPDATE_OFFSET;
		if (bk_rmt__ext_i(q, "commitOffset", NULL, &v)) {
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "commitOffset is missing");
			return;
		}
		if (v < 0) { /* ali-ons commits -1 for "unknown": nothing to keep */
			bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
			return;
		}
		break;
	case WIRE_REQ_GET_MIN_OFFSET:
		op = WIRE_DP_OP_GET_MIN_OFFSET;
		group = NULL;
		break;
	case WIRE_REQ_GET_MAX_OFFSET:
		op = WIRE_DP_OP_GET_MAX_OFFSET;
		group = NULL;
		break;
	case WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP:
		op = WIRE_DP_OP_SEARCH_OFFSET;
		group = NULL;
		if (bk_rmt__ext_i(q, "timestamp", NULL, &v)) {
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "timestamp is missing");
			return;
		}
		break;
	default: /* GET_EARLIEST_MSG_STORETIME */
		op = BK_ROP_EARLIEST;
		group = NULL;
		break;
	}
	if (!topic || bk_rmt__ext_i(q, "queueId", NULL, &qid) ||
	    ((op == WIRE_DP_OP_QUERY_OFFSET || op == WIRE_DP_OP_UPDATE_OFFSET) &&
	     (!group || gl == 0 || gl > META_GROUP_MAX))) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "the header lacks topic, queueId or consumerGroup");
		return;
	}
	t = bk_topic_find(r->bk, topic, tl);
	if (t == NULL) {
		char remark[200];

		snprintf(remark, sizeof(remark), "topic[%.*s] not exist, apply first please!",
			 (int)tl, topic);
		bk_rmt__reply(r, c, q, WIRE_RSP_TOPIC_NOT_EXIST, remark);
		return;
	}
	if (qid < 0 || (uint64_t)qid >= t->nq) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "queueId is illegal");
		return;
	}
	j = bk_rmt__job_new(r, c, q, op, (uint32_t)(gl + tl + 64), 256);
	if (j == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	if (op == BK_ROP_EARLIEST) {
		j->c.sq = t->sq[qid];
	} else {
		o.value = v;
		o.queue_id = (int32_t)qid;
		o.group = group;
		o.group_len = (uint16_t)(group ? gl : 0);
		o.topic = topic;
		o.topic_len = (uint16_t)tl;
		len = wire_dp_offset_req_encode(op, &o, j->reqbuf, gl + tl + 64);
		if (len < 0) {
			bk_rmt__job_free(r, j);
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "bad offset request");
			return;
		}
		j->c.req_len = (uint32_t)len;
	}
	if (bk_rmt__job_post(r, j, t->core[qid]) != 0)
		bk_rmt__busy(r, c, q);
}

void
bk_rmt__do_send_back(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl = 0, otl = 0, oil = 0;
	const char *group = bk_rmt__ext_s(q, "group", &gl);
	const char *otopic = bk_rmt__ext_s(q, "originTopic", &otl);
	const char *oid = bk_rmt__ext_s(q, "originMsgId", &oil);
	int64_t off, delay = 0, maxre = -1;
	struct wire_dp_send_back_req b = {0};
	char name[META_TOPIC_MAX + 1];
	const struct bk_topic *t = NULL;
	const char *why;
	int32_t code;
	struct rjob *j;
	long len;

	if (writes_refused(r, c, q))
		return;

	if (!group || gl == 0 || gl + 7 > META_TOPIC_MAX ||
	    bk_rmt__ext_i(q, "offset", NULL, &off)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the header lacks group or offset");
		return;
	}
	(void)bk_rmt__ext_i(q, "delayLevel", NULL, &delay);
	(void)bk_rmt__ext_i(q, "maxReconsumeTimes", NULL, &maxre);
	/* Both destinations exist before the core decides which one it is. */
	snprintf(name, sizeof(name), "%s%s", BK_DLQ_PREFIX, group);
	if (bk_rmt__topic_get(r, name, strlen(name), 1, &code, &why) != NULL) {
		snprintf(name, sizeof(name), "%s%s", BK_RETRY_PREFIX, group);
		t = bk_rmt__topic_get(r, name, strlen(name), 1, &code, &why);
	}
	if (t == NULL) {
		bk_rmt__reply(r, c, q, code, why);
		return;
	}
	b.phys_offset = off;
	b.delay_level = (int32_t)delay;
	b.max_reconsume_times = (int32_t)(maxre > 0 ? SP_MIN(maxre, (int64_t)INT32_MAX) : 0);
	b.group = group;
	b.group_len = (uint16_t)gl;
	b.origin_topic = otl <= META_TOPIC_MAX ? otopic : NULL;
	b.origin_topic_len = b.origin_topic ? (uint16_t)otl : 0;
	b.origin_msgid = oil < WIRE_MSGID_MAX ? oid : NULL;
	b.origin_msgid_len = b.origin_msgid ? (uint16_t)oil : 0;
	j = bk_rmt__job_new(r, c, q, WIRE_DP_OP_SEND_BACK, (uint32_t)(gl + otl + oil + 128), 256);
	if (j == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	/* the core copies the message into the group's retries only for an account that may
	 * read it (bk_acl_may_read()) */
	if (r->req_acc && (j->ak = strdup(r->req_acc->ak)) == NULL) {
		bk_rmt__job_free(r, j);
		bk_rmt__busy(r, c, q);
		return;
	}
	j->c.ak = j->ak;
	len = wire_dp_send_back_req_encode(&b, j->reqbuf, gl + otl + oil + 128);
	if (len < 0) {
		bk_rmt__job_free(r, j);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "bad send-back request");
		return;
	}
	j->c.req_len = (uint32_t)len;
	if (bk_rmt__job_post(r, j, t->core[0]) != 0)
		bk_rmt__busy(r, c, q);
}

/* VIEW_MESSAGE_BY_ID and QUERY_MESSAGE: records by physical offset, copied by a core. */
void
bk_rmt__do_lookup(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	int64_t phys[QUERY_MAX];
	long n = 0;
	struct rjob *j;

	if (q->code == WIRE_REQ_VIEW_MESSAGE_BY_ID) {
		if (bk_rmt__ext_i(q, "offset", NULL, &phys[0]) || phys[0] < 0) {
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "offset is missing");
			return;
		}
		n = 1;
	} else {
		const char *topic = bk_rmt__ext_s(q, "topic", NULL);
		const char *key = bk_rmt__ext_s(q, "key", NULL);
		int64_t maxn = QUERY_MAX, begin = 0, end = INT64_MAX;
		bool uniq = false;

		if (!topic || !key) {
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
				      "the header lacks topic or key");
			return;
		}
		(void)bk_rmt__ext_i(q, "maxNum", NULL, &maxn);
		(void)bk_rmt__ext_i(q, "beginTimestamp", NULL, &begin);
		(void)bk_rmt__ext_i(q, "endTimestamp", NULL, &end);
		if (wire_rem_ext_bool(q, "_UNIQUE_KEY_QUERY", &uniq) != 0)
			uniq = false;
		if (uniq || maxn > QUERY_MAX)
			maxn = uniq ? 32 : QUERY_MAX;
		if (maxn <= 0)
			maxn = 1;
		n = store_query_key(r->bk->store, topic, key, begin, end, phys, (size_t)maxn);
		if (n <= 0) {
			struct rresp o = {
				.code = WIRE_RSP_QUERY_NOT_FOUND,
				.opaque = q->opaque,
				.serialize = q->serialize,
				.remark = "can not find message, maybe time range not correct"};

			bk_rmt__resp_ext(&o, "indexLastUpdateTimestamp", "0");
			bk_rmt__resp_ext(&o, "indexLastUpdatePhyoffset", "0");
			if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
				bk_rmt__conn_send(r, c, &o);
			return;
		}
	}
	j = bk_rmt__job_new(r, c, q, BK_ROP_GATHER, 0, 64u << 10);
	if (j == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	/* each record found is checked on its own topic before it is answered */
	if (r->req_acc && (j->ak = strdup(r->req_acc->ak)) == NULL) {
		bk_rmt__job_free(r, j);
		bk_rmt__busy(r, c, q);
		return;
	}
	memcpy(j->phys, phys, sizeof(phys[0]) * (size_t)n);
	j->c.phys = j->phys;
	j->c.nphys = (uint32_t)n;
	if (bk_rmt__job_post(r, j, (uint16_t)(clog_phys_shard(phys[0]) % r->bk->ncores)) != 0)
		bk_rmt__busy(r, c, q);
}

/* ---- answers from the cores ---- */

static const char *
status_remark(int32_t st)
{
	switch (st) {
	case WIRE_DP_ST_SYSTEM_BUSY:
		return "[REJECTREQUEST]system busy, start flow control for a while";
	case WIRE_DP_ST_NOT_SUPPORTED:
		return "a delayed, timed or transactional message: not supported yet, not stored";
	case WIRE_DP_ST_FLUSH_DISK_TIMEOUT:
		return "the flush did not complete within syncFlushTimeout";
	case WIRE_DP_ST_MESSAGE_ILLEGAL:
		return "the message is not valid";
	case WIRE_DP_ST_SERVICE_NOT_AVAILABLE:
		return "the store refuses writes (see the broker's log for why)";
	case WIRE_DP_ST_NO_PERMISSION:
		return "no permission: the broker or the topic is not writable/readable";
	case WIRE_DP_ST_TOPIC_NOT_EXIST:
		return "topic not exist, apply first please!";
	case WIRE_DP_ST_QUERY_NOT_FOUND:
		return "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first";
	case WIRE_DP_ST_BAD_REQUEST:
		return "the request is not valid";
	default:
		return NULL;
	}
}

static int32_t
status_code(int32_t st)
{
	return st >= 1000 ? WIRE_RSP_SYSTEM_ERROR : st;
}

static void
answer_send(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m, uint32_t len)
{
	struct wire_dp_send_resp s;
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char qid[16], qoff[24], one[WIRE_MSGID_MAX];
	char *ids = NULL;

	if (j->c.op == WIRE_DP_OP_SEND_BACK) {
		struct wire_dp_resp_head h;
		int32_t st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status
								       : WIRE_DP_ST_SYSTEM_ERROR;

		o.code = status_code(st);
		o.remark = status_remark(st);
		bk_rmt__conn_send(r, c, &o);
		return;
	}
	if (wire_dp_send_resp_decode(j->c.op, m, len, &s) != 0 ||
	    (s.head.status != WIRE_DP_ST_SUCCESS &&
	     s.head.status != WIRE_DP_ST_FLUSH_DISK_TIMEOUT)) {
		struct wire_dp_resp_head h;
		int32_t st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status
								       : WIRE_DP_ST_SYSTEM_ERROR;

		char why[420];

		o.code = status_code(st);
		o.remark = status_remark(st);
		if (st == WIRE_DP_ST_SERVICE_NOT_AVAILABLE) {
			/* the real cause: a fence (EIO, ENOSPC) or the next segment (EMFILE) */
			const struct clog *cl = store_clog(r->bk->store, j->c.core);
			int e = clog_err(cl) ? clog_err(cl) : clog_prep_err(cl);

			char full[384];

			if (store_disk_full(r->bk->store, full, sizeof(full))) {
				snprintf(why, sizeof(why), "the store refuses writes: %s", full);
				o.remark = why;
			} else if (e != 0) {
				snprintf(why, sizeof(why), "the store refuses writes: shard %u: %s",
					 j->c.core, strerror(-e));
				o.remark = why;
			}
		}
		if (o.code == WIRE_RSP_SUCCESS) /* cannot decode a success: treat as an error */
			o.code = WIRE_RSP_SYSTEM_ERROR;
		bk_rmt__conn_send(r, c, &o);
		return;
	}
	if (j->c.op == WIRE_DP_OP_SEND_BATCH && s.count != j->batch_n) {
		char remark[160];

		/*
		 * The core stored the first items and hit a full file (the
		 * next one is being prepared): a RocketMQ batch has no
		 * partial answer, so this one is an error that says what
		 * happened; the client's resend duplicates the first items
		 * (at-least-once) instead of losing the rest.
		 */
		snprintf(remark, sizeof(remark),
			 "[REJECTREQUEST] only %u of the %u messages of the batch were stored (a "
			 "store "
			 "file was full); send the batch again",
			 s.count, j->batch_n);
		o.code = WIRE_RSP_SYSTEM_BUSY;
		o.remark = remark;
		bk_rmt__conn_send(r, c, &o);
		return;
	}
	o.code = status_code(s.head.status);
	snprintf(qid, sizeof(qid), "%d", s.queue_id);
	snprintf(qoff, sizeof(qoff), "%" PRId64, s.queue_offset);
	if (j->c.op == WIRE_DP_OP_SEND_BATCH) {
		size_t at = 0;

		ids = malloc((size_t)s.count * WIRE_MSGID_MAX + 1);
		if (ids == NULL) {
			o.code = WIRE_RSP_SYSTEM_ERROR;
			o.remark = "out of memory (the batch is stored)";
			bk_rmt__conn_send(r, c, &o);
			return;
		}
		ids[0] = '\0';
		for (uint32_t i = 0; i < s.count; i++) {
			if (i)
				ids[at++] = ',';
			at += wire_msgid_encode(&r->bk->store_host, wire_dp_send_resp_phys(&s, i),
						ids + at);
		}
		bk_rmt__resp_ext(&o, "msgId", ids);
	} else {
		(void)wire_msgid_encode(&r->bk->store_host, s.phys_offset, one);
		bk_rmt__resp_ext(&o, "msgId", one);
	}
	bk_rmt__resp_ext(&o, "queueId", qid);
	bk_rmt__resp_ext(&o, "queueOffset", qoff);
	bk_rmt__resp_ext(&o, "MSG_REGION", "DefaultRegion");
	bk_rmt__resp_ext(&o, "TRACE_ON", "true");
	bk_rmt__conn_send(r, c, &o);
	free(ids);
}

void
bk_rmt__answer_pull(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m,
		    uint32_t len)
{
	struct wire_dp_pull_resp p;
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char nb[24] = "0", mn[24] = "0", mx[24] = "0";

	if (wire_dp_pull_resp_decode(m, len, &p) == 0) {
		o.code = status_code(p.head.status);
		snprintf(nb, sizeof(nb), "%" PRId64, p.next_begin_offset);
		snprintf(mn, sizeof(mn), "%" PRId64, p.min_offset);
		snprintf(mx, sizeof(mx), "%" PRId64, p.max_offset);
		if (p.head.status == WIRE_DP_ST_SUCCESS) {
			o.body = p.records;
			o.body_len = p.records_len;
			o.remark = "FOUND";
		}
	} else {
		struct wire_dp_resp_head h;
		int32_t st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status
								       : WIRE_DP_ST_SYSTEM_ERROR;

		o.code = status_code(st);
		o.remark = status_remark(st);
		if (o.code == WIRE_RSP_SUCCESS)
			o.code = WIRE_RSP_SYSTEM_ERROR;
	}
	bk_rmt__resp_ext(&o, "nextBeginOffset", nb);
	bk_rmt__resp_ext(&o, "minOffset", mn);
	bk_rmt__resp_ext(&o, "maxOffset", mx);
	bk_rmt__resp_ext(&o, "suggestWhichBrokerId", "0");
	bk_rmt__conn_send(r, c, &o);
}

static void
answer_offset(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m, uint32_t len)
{
	struct wire_dp_offset_resp v;
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char num[24];
	struct wire_dp_resp_head h;
	int32_t st;

	if (j->c.op == BK_ROP_EARLIEST) {
		o.code = status_code(j->c.status);
		if (j->c.status == WIRE_DP_ST_SUCCESS) {
			snprintf(num, sizeof(num), "%" PRId64, j->c.value);
			bk_rmt__resp_ext(&o, "timestamp", num);
		} else {
			o.remark = "the queue has no message";
		}
		bk_rmt__conn_send(r, c, &o);
		return;
	}
	if (wire_dp_offset_resp_decode(j->c.op, m, len, &v) == 0 &&
	    v.head.status == WIRE_DP_ST_SUCCESS) {
		o.code = WIRE_RSP_SUCCESS;
		if (j->c.op != WIRE_DP_OP_UPDATE_OFFSET) {
			snprintf(num, sizeof(num), "%" PRId64, v.offset);
			bk_rmt__resp_ext(&o, "offset", num);
		}
		bk_rmt__conn_send(r, c, &o);
		return;
	}
	st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status : WIRE_DP_ST_SYSTEM_ERROR;
	o.code = status_code(st);
	o.remark = status_remark(st);
	if (o.code == WIRE_RSP_SUCCESS)
		o.code = WIRE_RSP_SYSTEM_ERROR;
	bk_rmt__conn_send(r, c, &o);
}

static void
answer_lookup(struct bk_rmt *r, struct rconn *c, struct rjob *j)
{
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char now[24];

	/* a record of a topic the account may not read is left out, as if not there */
	if (j->ak && j->c.found)
		j->c.found = bk_rmt__acl_keep_readable(r, j->ak, j->c.resp, &j->c.resp_len);
	if (j->c.found == 0) {
		char remark[96];

		if (j->code == WIRE_REQ_VIEW_MESSAGE_BY_ID) {
			o.code = WIRE_RSP_SYSTEM_ERROR;
			snprintf(remark, sizeof(remark),
				 "can not find message by the offset, %" PRId64, j->phys[0]);
		} else {
			o.code = WIRE_RSP_QUERY_NOT_FOUND;
			snprintf(remark, sizeof(remark),
				 "can not find message, maybe time range not correct");
		}
		o.remark = remark;
		if (j->code == WIRE_REQ_QUERY_MESSAGE) {
			bk_rmt__resp_ext(&o, "indexLastUpdateTimestamp", "0");
			bk_rmt__resp_ext(&o, "indexLastUpdatePhyoffset", "0");
		}
		bk_rmt__conn_send(r, c, &o);
		return;
	}
	o.code = WIRE_RSP_SUCCESS;
	o.body = j->c.resp;
	o.body_len = j->c.resp_len;
	if (j->code == WIRE_REQ_QUERY_MESSAGE) {
		snprintf(now, sizeof(now), "%" PRId64, clk_wall_ms());
		bk_rmt__resp_ext(&o, "indexLastUpdateTimestamp", now);
		bk_rmt__resp_ext(&o, "indexLastUpdatePhyoffset", "0");
	}
	bk_rmt__conn_send(r, c, &o);
}

/* Return: true when @j was posted again (bigger buffer, or to its queue's real owner). */
static bool
job_again(struct bk_rmt *r, struct rjob *j)
{
	uint16_t core = j->c.core;

	if (bk_rmt__conn_get(r, j->conn, j->gen) == NULL)
		return false; /* nobody to answer: free it */
	if (j->c.need) {
		/* a gather of several big records: room for more than the one that did not fit */
		uint32_t cap = j->c.op == BK_ROP_GATHER ? j->c.need * 2 : j->c.need;
		uint8_t *b = realloc(j->c.resp, cap);

		if (b == NULL)
			return false;
		j->c.resp = b;
		j->c.resp_cap = cap;
	} else if (j->c.op < BK_ROP_EARLIEST && j->c.resp_len >= WIRE_DP_RESP_HEAD_LEN) {
		struct wire_dp_resp_head h;

		if (wire_dp_resp_head_decode(j->c.resp, j->c.resp_len, &h) != 0 ||
		    h.status != WIRE_DP_ST_REDIRECT || j->redirects++ > 2)
			return false;
		/* The topic changed between our lookup and the core's: go to the owner. */
		core = h.redirect_core;
	} else {
		return false;
	}
	/* Not postable now: false with `need` set, so bk_rmt__job_done() answers SYSTEM_BUSY. */
	if (core >= r->bk->ncores || r->inflight[core] >= r->conf.inflight_per_core) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_CORE, core, 0);
		j->c.need = 1;
		return false;
	}
	j->c.core = core;
	j->c.need = 0;
	if (dp_lcore_post(&r->bk->cores[core].lc, &j->c) != 0) {
		j->c.need = 1; /* answered SYSTEM_BUSY */
		return false;
	}
	r->inflight[core]++;
	bk_rmt__poll_count(r, j, core);
	return true;
}

void
bk_rmt__job_done(struct bk_rmt *r, struct rjob *j)
{
	struct rconn *c;

	r->inflight[j->c.core]--;
	bk_rmt__poll_uncount(r, j);
	if (j->agg) {
		bk_rmt__agg_done(r, j);
		return;
	}
	if (j->c.op == BK_ROP_TX_CHECK) {
		bk_rmt__tx_check_done(r, j);
		bk_rmt__job_free(r, j);
		return;
	}
	if (job_again(r, j))
		return;
	c = bk_rmt__conn_get(r, j->conn, j->gen);
	/* a long poll that found nothing, for the remoting thread to hold (bk_rmt_held.c) */
	if (c && !j->oneway && j->c.held && !j->c.need && r->now_ms < j->deadline_ms) {
		int rc = bk_rmt__held_put(r, c, j);

		if (rc == 0)
			return;
		if (rc == -ENOSPC) {
			bk_rmt__busy_answer(r, c, j->code, j->opaque, j->serialize);
			bk_rmt__job_free(r, j);
			return;
		}
	}
	if (c && !j->oneway) {
		if (j->c.need) {
			bk_rmt__busy_answer(r, c, j->code, j->opaque, j->serialize);
		} else {
			switch (j->c.op) {
			case WIRE_DP_OP_SEND:
			case WIRE_DP_OP_SEND_BATCH:
			case WIRE_DP_OP_SEND_BACK:
				answer_send(r, c, j, j->c.resp, j->c.resp_len);
				break;
			case WIRE_DP_OP_PULL:
				bk_rmt__answer_pull(r, c, j, j->c.resp, j->c.resp_len);
				break;
			case BK_ROP_GATHER:
				answer_lookup(r, c, j);
				break;
			case BK_ROP_END_TX:
				bk_rmt__answer_end_tx(r, c, j);
				break;
			default:
				answer_offset(r, c, j, j->c.resp, j->c.resp_len);
				break;
			}
		}
	}
	bk_rmt__job_free(r, j);
}
