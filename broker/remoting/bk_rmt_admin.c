// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_admin.c - admin requests on the remoting port (bk_rmt_share.h):
 * UPDATE_AND_CREATE_TOPIC, and the GET_ALL_* a slave syncs from.
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
#include "common/jbuf.h"
#include "common/log.h"
#include "store/clog.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

/* ---- topic creation ---- */

void
bk_rmt__do_create_topic(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t len;
	const char *name = bk_rmt__ext_s(q, "topic", &len);
	int64_t rq = 0, wq = 0, perm = 6, sysflag = 0;
	struct meta_topic mt = {0};
	bool order = false;

	if (bk_rmt__slave_refuses(r, c, q))
		return;
	if (name == NULL || !bk_topic_name_ok(name, len)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the topic name is not valid");
		return;
	}
	if (bk_topic_is_system(name)) {
		char why[META_TOPIC_MAX + 64];

		snprintf(why, sizeof(why), "The topic[%s] is conflict with system topic.", name);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
		return;
	}
	if (bk_rmt__ext_i(q, "readQueueNums", NULL, &rq) ||
	    bk_rmt__ext_i(q, "writeQueueNums", NULL, &wq) || rq < 1 || wq < 1 || rq > 65535 ||
	    wq > 65535) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "readQueueNums and writeQueueNums must be 1..65535");
		return;
	}
	(void)bk_rmt__ext_i(q, "perm", NULL, &perm);
	(void)bk_rmt__ext_i(q, "topicSysFlag", NULL, &sysflag);
	if (wire_rem_ext_bool(q, "order", &order) != 0)
		order = false;
	if (perm < 0 || perm > META_PERM_MAX) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "perm must be 0..15");
		return;
	}
	memcpy(mt.name, name, len);
	mt.read_queues = (uint32_t)rq;
	mt.write_queues = (uint32_t)wq;
	mt.perm = (uint32_t)perm;
	mt.sys_flag = (uint32_t)sysflag;
	mt.order = order;
	if (r->ops.topic_put(r->ops.arg, &mt) != 0) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "creating the topic failed (see the log)");
		return;
	}
	log_info(TAG, "topic %s created or updated by %s (%u/%u queues, perm %u)", mt.name,
		 c->peer_s, mt.read_queues, mt.write_queues, mt.perm);
	bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

/* ---- a slave's sync (docs/replication.md) ---- */

/* GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET: the whole table as JSON. */
void
bk_rmt__do_get_all(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	struct rresp o = {.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
	char *json = NULL;
	size_t len = 0;
	int err;

	if (r->ops.dump == NULL) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "not available");
		return;
	}
	err = r->ops.dump(r->ops.arg, q->code, &json, &len);
	if (err != 0 || len > UINT32_MAX) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "cannot serialize the table");
		free(json);
		return;
	}
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY)) {
		o.body = (const uint8_t *)json;
		o.body_len = (uint32_t)len;
		bk_rmt__conn_send(r, c, &o);
	}
	free(json);
}

/*
 * A job of the control side's own (a slave's sync, a deletion): no connection,
 * so its answer is dropped (bk_rmt__job_done() finds none). Return: it, NULL.
 */
static struct rjob *
own_job(struct bk_rmt *r, uint16_t op, size_t req_cap, uint32_t resp_cap)
{
	struct rjob *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->reqbuf = malloc(req_cap);
	j->c.resp = malloc(resp_cap);
	if (!j->reqbuf || !j->c.resp) {
		free(j->reqbuf);
		free(j->c.resp);
		free(j);
		return NULL;
	}
	j->conn = UINT32_MAX;
	j->oneway = true;
	j->c.op = op;
	j->c.resp_cap = resp_cap;
	j->c.req = j->reqbuf;
	j->next = r->jobs;
	if (r->jobs)
		r->jobs->prev = j;
	r->jobs = j;
	return j;
}

int
bk_rmt_offset_put(struct bk_rmt *r, const char *topic, const char *group, uint32_t qid,
		  int64_t offset, bool raise)
{
	size_t tl = strlen(topic);
	size_t gl = strlen(group);
	const struct bk_topic *t = bk_topic_find(r->bk, topic, tl);
	struct wire_dp_offset_req o = {.value = offset,
				       .queue_id = (int32_t)qid,
				       .group = group,
				       .group_len = (uint16_t)gl,
				       .topic = topic,
				       .topic_len = (uint16_t)tl};
	struct rjob *j;
	long len;

	if (t == NULL || qid >= t->nq || gl == 0 || gl > META_GROUP_MAX)
		return -ENOENT;
	j = own_job(r, raise ? BK_ROP_OFFSET_RAISE : WIRE_DP_OP_UPDATE_OFFSET, gl + tl + 64, 256);
	if (j == NULL)
		return -ENOMEM;
	len = wire_dp_offset_req_encode(WIRE_DP_OP_UPDATE_OFFSET, &o, j->reqbuf, gl + tl + 64);
	if (len < 0) {
		bk_rmt__job_free(r, j);
		return (int)len;
	}
	j->c.req_len = (uint32_t)len;
	return bk_rmt__job_post(r, j, t->core[qid]);
}

/* ---- configuration and runtime info ---- */

static void
send_owned(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, struct rresp *o,
	   uint8_t *body, size_t len)
{
	o->body = body;
	o->body_len = (uint32_t)len;
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		bk_rmt__conn_send(r, c, o);
	free(body);
}

void
bk_rmt__do_config(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	struct rresp o = {.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};

	if (!r->ops.config_text || !r->ops.config_update || !r->ops.runtime_info) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "not available");
		return;
	}
	if (q->code == WIRE_REQ_GET_BROKER_CONFIG) {
		char *text = NULL, ver[64];
		size_t len = 0;

		if (r->ops.config_text(r->ops.arg, &text, &len) != 0) {
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "out of memory");
			return;
		}
		/* GetBrokerConfigResponseHeader.version: the configuration's DataVersion */
		snprintf(ver, sizeof(ver), "{\"counter\":%" PRIu64 ",\"timestamp\":%" PRId64 "}",
			 r->config_version, r->config_version_ms);
		bk_rmt__resp_ext(&o, "version", ver);
		send_owned(r, c, q, &o, (uint8_t *)text, len);
		return;
	}
	if (q->code == WIRE_REQ_UPDATE_BROKER_CONFIG) {
		char why[256] = "";
		int err;

		if (q->body_len == 0) {
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
				      "the body is empty: key=value lines expected");
			return;
		}
		err = r->ops.config_update(r->ops.arg, (const char *)q->body, q->body_len,
					   c->peer_s, why, sizeof(why));
		if (err) {
			log_warn(TAG, "updateBrokerConfig from %s refused: %s", c->peer_s, why);
			bk_rmt__reply(r, c, q,
				      err == -EPERM ? WIRE_RSP_NO_PERMISSION
						    : WIRE_RSP_SYSTEM_ERROR,
				      why);
			return;
		}
		r->config_version++;
		r->config_version_ms = (int64_t)clk_wall_ms();
		bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
		return;
	}
	{
		struct jbuf b;
		uint8_t *body;
		size_t len;

		jbuf_init(&b);
		if (r->ops.runtime_info(r->ops.arg, &b) != 0) {
			jbuf_free(&b);
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "out of memory");
			return;
		}
		body = jbuf_take(&b, &len);
		send_owned(r, c, q, &o, body, len);
	}
}

int
bk_rmt_offsets_drop(struct bk_rmt *r, char kind, const char *name)
{
	size_t len = strlen(name);
	int err = 0;

	for (uint32_t core = 0; core < r->bk->ncores; core++) {
		for (uint32_t from = 0; from <= r->bk->cores[core].off_mask;
		     from += BK_OFF_DROP_SPAN) {
			struct rjob *j = own_job(r, BK_ROP_OFFSET_DROP, len + 1, 16);

			if (j == NULL)
				return -ENOMEM;
			j->reqbuf[0] = (uint8_t)kind;
			memcpy(j->reqbuf + 1, name, len);
			j->c.req_len = (uint32_t)len + 1;
			j->c.value = from;
			if (bk_rmt__job_post(r, j, (uint16_t)core) != 0)
				err = -EAGAIN;
		}
	}
	return err;
}
