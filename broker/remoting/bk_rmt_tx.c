// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_tx.c - transactions on the remoting port (bk_rmt_share.h; RocketMQ's
 * EndTransactionProcessor and transaction check service; the cores do the
 * work, bk_tx.c):
 *  - END_TRANSACTION (37, oneway from RocketMQ's producers): checked here,
 *    then run by the core of the half's shard (BK_ROP_END_TX);
 *  - the producers of each group, from their HEART_BEATs, as RocketMQ's
 *    ProducerManager: who can be asked about a half;
 *  - check-backs: about every second each core is asked for the halves it
 *    wants checked (BK_ROP_TX_CHECK); each goes to a live connection of the
 *    half's producer group as CHECK_TRANSACTION_STATE (39, oneway), whose
 *    answer is an END_TRANSACTION; discarded halves are logged.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bk_rmt_share.h"
#include "common/log.h"
#include "store/clog.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

#define TX_CHECK_EVERY_MS 100u
#define TX_CHECK_BUF                                                                               \
	(256u << 10) /* a check answer: halves and their records (grows for a big one) */
#define PRODUCER_EXPIRE_MS 120000u

/* ---- producers ---- */

void
bk_rmt__producer_seen(struct bk_rmt *r, struct rconn *c, const char *group, const char *client_id)
{
	struct rproducer *p = NULL;

	for (size_t i = 0; i < r->nproducers; i++)
		if (r->producers[i].conn == c->id && r->producers[i].gen == c->gen &&
		    strcmp(r->producers[i].group, group) == 0)
			p = &r->producers[i];
	if (p == NULL) {
		if (r->nproducers == r->producers_cap) {
			size_t cap = r->producers_cap ? r->producers_cap * 2 : 8;
			struct rproducer *np = realloc(r->producers, sizeof(*np) * cap);

			if (np == NULL)
				return;
			r->producers = np;
			r->producers_cap = cap;
		}
		p = &r->producers[r->nproducers++];
		memset(p, 0, sizeof(*p));
		snprintf(p->group, sizeof(p->group), "%s", group);
		snprintf(p->client_id, sizeof(p->client_id), "%s", client_id);
		p->conn = c->id;
		p->gen = c->gen;
	}
	p->last_ms = r->now_ms;
}

void
bk_rmt__producers_sweep(struct bk_rmt *r, bool by_conn, uint32_t id, uint32_t gen,
			const char *group)
{
	for (size_t i = 0; i < r->nproducers;) {
		struct rproducer *p = &r->producers[i];
		bool drop = by_conn ? p->conn == id && p->gen == gen &&
					      (group == NULL || strcmp(p->group, group) == 0)
				    : r->now_ms - p->last_ms > PRODUCER_EXPIRE_MS;

		if (drop) {
			r->producers[i] = r->producers[--r->nproducers];
			continue;
		}
		i++;
	}
}

/* A live connection of producer group @group, round robin, or NULL. */
static struct rconn *
producer_conn(struct bk_rmt *r, const char *group, size_t len)
{
	size_t n = r->nproducers;

	for (size_t k = 0; k < n; k++) {
		struct rproducer *p = &r->producers[(r->producer_rr + k) % n];
		struct rconn *c;

		if (strlen(p->group) != len || memcmp(p->group, group, len) != 0)
			continue;
		c = bk_rmt__conn_get(r, p->conn, p->gen);
		if (c == NULL)
			continue;
		r->producer_rr = (r->producer_rr + k + 1) % n;
		return c;
	}
	return NULL;
}

/* ---- END_TRANSACTION ---- */

void
bk_rmt__do_end_tx(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	int64_t qoff = -1, phys = -1, kind = -1;
	const char *group = bk_rmt__ext_s(q, "producerGroup", NULL);
	struct bk_tx_end_req *rq;
	struct rjob *j;
	uint32_t shard;

	if (r->bk->conf.role == BK_ROLE_SLAVE) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SLAVE_NOT_AVAILABLE, NULL);
		return;
	}
	(void)bk_rmt__ext_i(q, "tranStateTableOffset", NULL, &qoff);
	(void)bk_rmt__ext_i(q, "commitLogOffset", NULL, &phys);
	(void)bk_rmt__ext_i(q, "commitOrRollback", NULL, &kind);
	if (kind == WIRE_SYSFLAG_TX_NOT) {
		/* UNKNOW: the check-back will ask (RocketMQ answers nothing) */
		bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
		return;
	}
	if (kind != WIRE_SYSFLAG_TX_COMMIT && kind != WIRE_SYSFLAG_TX_ROLLBACK) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "commitOrRollback field wrong");
		return;
	}
	if (group == NULL || strlen(group) > META_GROUP_MAX) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "The producer group wrong");
		return;
	}
	shard = phys >= 0 ? clog_phys_shard(phys) : UINT32_MAX;
	if (qoff < 0 || shard >= r->bk->ncores) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "Find prepared transaction message failed");
		return;
	}
	j = bk_rmt__job_new(r, c, q, BK_ROP_END_TX, sizeof(*rq), 64);
	if (j == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	rq = (struct bk_tx_end_req *)j->reqbuf;
	memset(rq, 0, sizeof(*rq));
	rq->phys = phys;
	rq->qoff = (uint64_t)qoff;
	rq->kind = (int32_t)kind;
	snprintf(rq->group, sizeof(rq->group), "%s", group);
	/* the core checks PUB on the half's real topic once it has read the half (cmd->ak) */
	if (r->req_acc && (j->ak = strdup(r->req_acc->ak)) == NULL) {
		bk_rmt__job_free(r, j);
		bk_rmt__busy(r, c, q);
		return;
	}
	j->c.ak = j->ak;
	j->c.req_len = sizeof(*rq);
	if (bk_rmt__job_post(r, j, (uint16_t)shard) != 0)
		bk_rmt__busy(r, c, q);
}

void
bk_rmt__answer_end_tx(struct bk_rmt *r, struct rconn *c, struct rjob *j)
{
	static const char *const remark[] = {
		[BK_TX_END_OK] = NULL,
		[BK_TX_END_NOT_FOUND] = "Find prepared transaction message failed",
		[BK_TX_END_GROUP_WRONG] = "The producer group wrong",
		[BK_TX_END_QOFF_WRONG] = "The transaction state table offset wrong",
		[BK_TX_END_BUSY] =
			"the store is busy: not resolved now, the check-back will ask again",
		[BK_TX_END_NO_TOPIC] = "the half's topic or queue cannot be written on this broker",
		[BK_TX_END_FENCED] = "this broker is no longer the group's writable master: not "
				     "resolved here, the new master's check-back will ask again",
		[BK_TX_END_NO_PERM] = "No PUB permission for the topic of the half message",
	};
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	int64_t v = j->c.value;

	if (v < 0 || v > BK_TX_END_NO_PERM)
		v = BK_TX_END_NOT_FOUND;
	o.code = v == BK_TX_END_OK	  ? WIRE_RSP_SUCCESS
		 : v == BK_TX_END_BUSY	  ? WIRE_RSP_SYSTEM_BUSY
		 : v == BK_TX_END_FENCED  ? WIRE_RSP_SERVICE_NOT_AVAILABLE
		 : v == BK_TX_END_NO_PERM ? WIRE_RSP_NO_PERMISSION
					  : WIRE_RSP_SYSTEM_ERROR;
	o.remark = remark[v];
	bk_rmt__conn_send(r, c, &o);
}

/* ---- check-backs ---- */

/* Ask core @core for the halves it wants checked, with room for @cap bytes of them. */
static void
check_post(struct bk_rmt *r, uint16_t core, uint32_t cap)
{
	struct rjob *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return;
	j->c.resp = malloc(cap);
	if (j->c.resp == NULL) {
		free(j);
		return;
	}
	j->c.op = BK_ROP_TX_CHECK;
	j->c.resp_cap = cap;
	j->conn = UINT32_MAX; /* nobody's: answered here */
	j->oneway = true;
	j->next = r->jobs;
	if (r->jobs)
		r->jobs->prev = j;
	r->jobs = j;
	if (bk_rmt__job_post(r, j, core) == 0)
		r->tx_checking[core] = true;
}

void
bk_rmt__tx_tick(struct bk_rmt *r)
{
	if (r->bk->conf.role == BK_ROLE_SLAVE || r->bk->cores == NULL ||
	    r->bk->cores[0].tx == NULL || r->now_ms < r->next_tx_ms)
		return;
	r->next_tx_ms = r->now_ms + TX_CHECK_EVERY_MS;
	for (uint32_t i = 0; i < r->bk->ncores; i++)
		if (!r->tx_checking[i])
			check_post(r, (uint16_t)i, TX_CHECK_BUF);
}

/* CHECK_TRANSACTION_STATE for half @m (its record decoded) to a producer of its group. */
static void
check_send(struct bk_rmt *r, const struct bk_tx_check_item *it, struct wire_msg *m)
{
	char qoff[24], phys[24], offid[WIRE_MSGID_MAX], topic[META_TOPIC_MAX + 1];
	const char *g, *uniq, *rt;
	size_t gl, ul, rtl;
	uint64_t rq;
	struct rresp o = {.code = WIRE_REQ_CHECK_TRANSACTION_STATE, .request = true};
	struct rconn *c;
	uint8_t *body;
	long n;

	if (!wire_props_get(m->props, m->props_len, "PGROUP", &g, &gl))
		return;
	c = producer_conn(r, g, gl);
	if (c == NULL) {
		log_warn_ratelimited(TAG,
				     "transaction half %" PRIu64 " of core %u: no producer of "
				     "group %.*s connected to check it with",
				     it->qoff, clog_phys_shard(it->phys),
				     (int)SP_MIN(gl, (size_t)64), g);
		return;
	}
	/* RocketMQ sends the half as its message: its real topic and queue */
	if (bk_delay_target(m, &rt, &rtl, &(uint32_t){0}) &&
	    wire_props_get_uint(m->props, m->props_len, "REAL_QID", &rq)) {
		memcpy(topic, rt, rtl);
		topic[rtl] = '\0';
		m->topic = topic;
		m->topic_len = (uint8_t)rtl;
		m->queue_id = (int32_t)rq;
	}
	body = malloc(wire_rec_size(m));
	if (body == NULL)
		return;
	n = wire_rec_encode(m, body, wire_rec_size(m));
	if (n < 0) {
		free(body);
		return;
	}
	if (!wire_props_get(m->props, m->props_len, "UNIQ_KEY", &uniq, &ul)) {
		uniq = "";
		ul = 0;
	}
	{
		char u[128];

		snprintf(u, sizeof(u), "%.*s", (int)SP_MIN(ul, sizeof(u) - 1), uniq);
		snprintf(qoff, sizeof(qoff), "%" PRIu64, it->qoff);
		snprintf(phys, sizeof(phys), "%" PRId64, it->phys);
		offid[wire_msgid_encode(&r->bk->store_host, it->phys, offid)] = '\0';
		o.opaque = c->next_opaque++;
		bk_rmt__resp_ext(&o, "tranStateTableOffset", qoff);
		bk_rmt__resp_ext(&o, "commitLogOffset", phys);
		bk_rmt__resp_ext(&o, "msgId", u);
		bk_rmt__resp_ext(&o, "transactionId", u);
		bk_rmt__resp_ext(&o, "offsetMsgId", offid);
		o.body = body;
		o.body_len = (uint32_t)n;
		bk_rmt__conn_send(r, c, &o);
	}
	free(body);
}

void
bk_rmt__tx_check_done(struct bk_rmt *r, struct rjob *j)
{
	size_t at = 0;

	r->tx_checking[j->c.core] = false;
	while (at + sizeof(struct bk_tx_check_item) <= j->c.resp_len) {
		struct bk_tx_check_item it;
		struct wire_msg m;

		memcpy(&it, j->c.resp + at, sizeof(it));
		at += sizeof(it);
		if (it.len > j->c.resp_len - at)
			break;
		if (wire_rec_decode(j->c.resp + at, it.len, 0, &m) == (long)it.len) {
			if (it.discard) {
				const char *g = "", *rt = "";
				size_t gl = 0, rtl = 0;

				(void)wire_props_get(m.props, m.props_len, "PGROUP", &g, &gl);
				(void)wire_props_get(m.props, m.props_len, "REAL_TOPIC", &rt, &rtl);
				log_warn(TAG,
					 "transaction half %" PRIu64 " of core %u (topic %.*s, "
					 "producer group %.*s) discarded: unresolved after %u "
					 "check-backs",
					 it.qoff, j->c.core, (int)SP_MIN(rtl, (size_t)127), rt,
					 (int)SP_MIN(gl, (size_t)127), g, it.checks);
			} else {
				check_send(r, &it, &m);
			}
		}
		at += it.len;
	}
	/* The core has more: ask again at once (with room for a half bigger than the buffer). */
	if (j->c.value == 1 && (j->c.resp_len > 0 || j->c.need > 0) && r->bk->cores != NULL)
		check_post(r, j->c.core, SP_MAX(TX_CHECK_BUF, j->c.need));
}
