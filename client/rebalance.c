// SPDX-License-Identifier: Apache-2.0
/*
 * rebalance.c - a push consumer's place in its group, as RocketMQ's
 * RebalanceImpl finds it (push.c runs it; docs/client.md "Consumer groups").
 *
 * Membership lives on the brokers, which keep it for RocketMQ's clients
 * already (HEART_BEAT, GET_CONSUMER_LIST_BY_GROUP on the remoting port), so
 * a group may mix libsprocket and Java or ali-ons members. Each round this
 * member sends a HEART_BEAT naming its group and subscriptions to every
 * master of the topic (which also creates %RETRY%<group>), then asks one of
 * them for the group's member ids. A member that stops unregisters
 * (UNREGISTER_CLIENT); one that dies goes when its connection closes, or
 * after the broker's clientChannelExpiredMillis without a heartbeat.
 *
 * Allocation, over the sorted queue list and the sorted member ids, the
 * same on every member so each queue has one owner once all saw the same
 * list:
 *   SP_REBALANCE_AVERAGE: AllocateMessageQueueAveragely (contiguous ranges)
 *   SP_REBALANCE_CONSISTENT_HASH: a hash ring with SP__VNODES points per
 *     member (AllocateMessageQueueConsistentHash); a member joining or
 *     leaving moves only the queues that hash next to its points.
 *
 * Context: the push consumer's control thread (struct sp__rbl is its own).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client_priv.h"
#include "common/jbuf.h"
#include "sprocket/consumer.h"
#include "sprocket/remoting.h"

#define RBL_TIMEOUT_MS 3000
#define RBL_FRAME_MAX (4u << 20)
#define SP__VNODES 64

static struct sp__rbl_broker *
broker_get(struct sp__rbl *r, const char *addr)
{
	struct sp__rbl_broker *b;

	for (size_t i = 0; i < r->nb; i++)
		if (strcmp(r->b[i].addr, addr) == 0)
			return &r->b[i];
	b = realloc(r->b, (r->nb + 1) * sizeof(*b));
	if (b == NULL)
		return NULL;
	r->b = b;
	b = &r->b[r->nb++];
	memset(b, 0, sizeof(*b));
	snprintf(b->addr, sizeof(b->addr), "%s", addr);
	return b;
}

/*
 * The id this member goes by in its group: the client id the application
 * gave, else the host name before the default "sprocket@<pid>", so members
 * on two hosts with the same pid differ (RocketMQ's clientIP@instance).
 */
const char *
sp__rbl_cid(struct sp__rbl *r)
{
	if (r->cid[0] == '\0') {
		char host[64] = "";

		if (r->c->client_id_given || gethostname(host, sizeof(host) - 1) != 0 || !host[0])
			snprintf(r->cid, sizeof(r->cid), "%.200s", r->c->client_id);
		else
			snprintf(r->cid, sizeof(r->cid), "%.63s@%.150s", host, r->c->client_id);
	}
	return r->cid;
}

static int
call(const struct sp_client *c, struct sp__rbl_broker *b, struct wire_rem_cmd *req,
     const void *body, size_t len, struct sp_rem_resp *resp)
{
	int rc;

	if (b->rem == NULL) {
		rc = sp_rem_connect(b->addr, RBL_TIMEOUT_MS, &b->rem);
		if (rc == 0 && c->ak[0])
			rc = sp_rem_credentials_key(b->rem, c->ak,
						    &c->rem_key); /* brokers with ACL */
		if (rc != 0) {
			sp_rem_close(b->rem);
			b->rem = NULL;
			return rc;
		}
	}
	rc = sp_rem_call(b->rem, req, body, len, RBL_TIMEOUT_MS, RBL_FRAME_MAX, resp);
	if (rc != 0) {
		sp_rem_close(b->rem);
		b->rem = NULL;
	}
	return rc;
}

/* RocketMQ's HeartbeatData, naming this member of @g and what it subscribes to. */
static int
heartbeat_body(const struct sp__rbl_group *g, const char *client_id, struct jbuf *b)
{
	static const char *const from[] = {
		[SP_FROM_LAST] = "CONSUME_FROM_LAST_OFFSET",
		[SP_FROM_FIRST] = "CONSUME_FROM_FIRST_OFFSET",
		[SP_FROM_TIMESTAMP] = "CONSUME_FROM_TIMESTAMP",
	};
	const char *topics[2] = {g->topic, g->retry_topic};
	const char *exprs[2] = {g->expr, "*"};

	jbuf_lit(b, "{\"clientID\":");
	jbuf_cstr(b, client_id);
	jbuf_lit(b, ",\"consumerDataSet\":[{\"consumeFromWhere\":");
	jbuf_cstr(b, from[g->from <= SP_FROM_TIMESTAMP ? g->from : SP_FROM_LAST]);
	jbuf_lit(b, ",\"consumeType\":\"CONSUME_PASSIVELY\",\"groupName\":");
	jbuf_cstr(b, g->group);
	jbuf_lit(b, ",\"messageModel\":\"CLUSTERING\",\"subscriptionDataSet\":[");
	for (int i = 0; i < 2; i++) {
		if (topics[i] == NULL || !topics[i][0])
			continue;
		jbuf_lit(b, i ? ",{" : "{");
		jbuf_lit(b, "\"classFilterMode\":false,\"codeSet\":[],\"expressionType\":\"TAG\","
			    "\"subString\":");
		jbuf_cstr(b, exprs[i]);
		jbuf_lit(b, ",\"subVersion\":0,\"tagsSet\":[],\"topic\":");
		jbuf_cstr(b, topics[i]);
		jbuf_lit(b, "}");
	}
	jbuf_lit(b, "],\"unitMode\":false}],\"producerDataSet\":[]}");
	return b->err;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void
sp__rbl_ids_free(char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

/* {"consumerIdList":["a","b"]} -> sorted, unique copies. */
static int
ids_parse(const struct sp_rem_resp *resp, char ***out, size_t *n)
{
	json_object *o, *list;
	char **ids;
	size_t k = 0, len;

	struct json_tokener *tok = json_tokener_new();

	if (tok == NULL)
		return -ENOMEM;
	o = resp->cmd.body_len <= INT32_MAX
		    ? json_tokener_parse_ex(tok, (const char *)resp->cmd.body,
					    (int)resp->cmd.body_len)
		    : NULL;
	json_tokener_free(tok);
	if (o == NULL || !json_object_object_get_ex(o, "consumerIdList", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		json_object_put(o);
		return -EBADMSG;
	}
	len = json_object_array_length(list);
	ids = calloc(len ? len : 1, sizeof(*ids));
	if (ids == NULL) {
		json_object_put(o);
		return -ENOMEM;
	}
	for (size_t i = 0; i < len; i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(list, i));

		if (s != NULL && (ids[k] = strdup(s)) != NULL)
			k++;
	}
	json_object_put(o);
	qsort(ids, k, sizeof(*ids), cmp_str);
	for (size_t i = 1; i < k;) { /* unique, as the allocation needs */
		if (strcmp(ids[i], ids[i - 1]) == 0) {
			free(ids[i]);
			memmove(&ids[i], &ids[i + 1], (k - i - 1) * sizeof(*ids));
			k--;
		} else {
			i++;
		}
	}
	*out = ids;
	*n = k;
	return 0;
}

int
sp__rbl_members(struct sp__rbl *r, const struct sp__rbl_group *g, char ***ids, size_t *n)
{
	struct sp__topic *t;
	struct jbuf body;
	int rc, got = -ENOENT;

	rc = sp__topic_get(r->c, g->topic, &t);
	if (rc != 0)
		return rc;
	jbuf_init(&body);
	rc = heartbeat_body(g, sp__rbl_cid(r), &body);
	for (uint32_t i = 0; rc == 0 && i < t->route->n_brokers; i++) {
		const char *addr = t->route->brokers[i].addr;
		struct wire_rem_cmd req = {.code = WIRE_REQ_HEART_BEAT,
					   .language = WIRE_LANG_CPP,
					   .version = WIRE_REM_VERSION_V4_9_8,
					   .serialize = WIRE_REM_JSON};
		struct sp__rbl_broker *b;
		struct sp_rem_resp resp;

		if (!addr[0] || (b = broker_get(r, addr)) == NULL)
			continue; /* no master registered: it holds none of our queues' writes */
		if (call(r->c, b, &req, body.p, body.len, &resp) != 0)
			continue;
		sp_rem_resp_free(&resp);
		if (got == 0)
			continue;
		req = (struct wire_rem_cmd){.code = WIRE_REQ_GET_CONSUMER_LIST_BY_GROUP,
					    .language = WIRE_LANG_CPP,
					    .version = WIRE_REM_VERSION_V4_9_8,
					    .serialize = WIRE_REM_JSON};
		if (wire_rem_ext_add(&req, "consumerGroup", g->group) != 0 ||
		    call(r->c, b, &req, NULL, 0, &resp) != 0)
			continue;
		got = resp.cmd.code == WIRE_RSP_SUCCESS ? ids_parse(&resp, ids, n)
							: SP_ERR_STATUS(resp.cmd.code);
		sp_rem_resp_free(&resp);
	}
	jbuf_free(&body);
	sp__topic_put(r->c, t);
	return rc != 0 ? rc : got;
}

void
sp__rbl_close(struct sp__rbl *r, const char *group)
{
	for (size_t i = 0; i < r->nb; i++) {
		struct wire_rem_cmd req = {.code = WIRE_REQ_UNREGISTER_CLIENT,
					   .language = WIRE_LANG_CPP,
					   .version = WIRE_REM_VERSION_V4_9_8,
					   .serialize = WIRE_REM_JSON};
		struct sp_rem_resp resp;

		/* so the others take our queues at once, not after the broker's expiry */
		if (group != NULL && r->b[i].rem != NULL &&
		    wire_rem_ext_add(&req, "clientID", sp__rbl_cid(r)) == 0 &&
		    wire_rem_ext_add(&req, "consumerGroup", group) == 0 &&
		    call(r->c, &r->b[i], &req, NULL, 0, &resp) == 0)
			sp_rem_resp_free(&resp);
		sp_rem_close(r->b[i].rem);
	}
	free(r->b);
	r->b = NULL;
	r->nb = 0;
}

/* ---- queue locks (orderly consumers) ---- */

/* The remoting address of the master of @mq's broker, from @mq's topic route. */
static bool
mq_addr(struct sp_client *c, const struct sp_mq *mq, char *addr, size_t cap)
{
	struct sp__topic *t;
	bool found = false;

	if (sp__topic_get(c, mq->topic, &t) != 0)
		return false;
	for (uint32_t i = 0; i < t->route->n_brokers && !found; i++)
		if (strcmp(t->route->brokers[i].name, mq->broker) == 0 &&
		    t->route->brokers[i].addr[0]) {
			snprintf(addr, cap, "%s", t->route->brokers[i].addr);
			found = true;
		}
	sp__topic_put(c, t);
	return found;
}

/* {"lockOKMQSet":[{"brokerName","queueId","topic"}]}: mark @ok[i] for each of @mqs named. */
static void
locked_parse(const struct sp_rem_resp *resp, const struct sp_mq *mqs, const bool *part, size_t n,
	     bool *ok)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *o = NULL, *set;

	if (tok != NULL && resp->cmd.body_len <= INT32_MAX)
		o = json_tokener_parse_ex(tok, (const char *)resp->cmd.body,
					  (int)resp->cmd.body_len);
	json_tokener_free(tok);
	if (o == NULL || !json_object_object_get_ex(o, "lockOKMQSet", &set) ||
	    !json_object_is_type(set, json_type_array)) {
		json_object_put(o);
		return;
	}
	for (size_t k = 0; k < json_object_array_length(set); k++) {
		json_object *e = json_object_array_get_idx(set, k), *v;
		const char *topic = NULL, *broker = NULL;
		int qid = -1;

		if (json_object_object_get_ex(e, "topic", &v))
			topic = json_object_get_string(v);
		if (json_object_object_get_ex(e, "brokerName", &v))
			broker = json_object_get_string(v);
		if (json_object_object_get_ex(e, "queueId", &v))
			qid = json_object_get_int(v);
		for (size_t i = 0; topic && i < n; i++)
			if (part[i] && mqs[i].queue_id == qid && strcmp(mqs[i].topic, topic) == 0 &&
			    (!broker || strcmp(mqs[i].broker, broker) == 0))
				ok[i] = true;
	}
	json_object_put(o);
}

int
sp__rbl_lock(struct sp__rbl *r, const char *group, const struct sp_mq *mqs, size_t n, bool lock,
	     bool *ok, bool *asked)
{
	bool *done = calloc(n + 1, sizeof(*done)), *part = calloc(n + 1, sizeof(*part));
	int rc = 0;

	if (done == NULL || part == NULL) {
		free(done);
		free(part);
		return -ENOMEM;
	}
	if (ok != NULL)
		memset(ok, 0, n * sizeof(*ok));
	if (asked != NULL)
		memset(asked, 0, n * sizeof(*asked));
	/* one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ per broker, naming its queues */
	for (size_t i = 0; i < n; i++) {
		char addr[64];
		struct sp__rbl_broker *b;
		struct jbuf body;
		struct wire_rem_cmd req = {.code = lock ? WIRE_REQ_LOCK_BATCH_MQ
							: WIRE_REQ_UNLOCK_BATCH_MQ,
					   .language = WIRE_LANG_CPP,
					   .version = WIRE_REM_VERSION_V4_9_8,
					   .serialize = WIRE_REM_JSON};
		struct sp_rem_resp resp;
		bool first = true;

		if (done[i])
			continue;
		memset(part, 0, n * sizeof(*part));
		for (size_t k = i; k < n; k++)
			if (!done[k] && strcmp(mqs[k].broker, mqs[i].broker) == 0)
				part[k] = done[k] = true;
		if (!mq_addr(r->c, &mqs[i], addr, sizeof(addr)) ||
		    (b = broker_get(r, addr)) == NULL) {
			rc = -ENOENT;
			continue;
		}
		jbuf_init(&body);
		jbuf_lit(&body, "{\"clientId\":");
		jbuf_cstr(&body, sp__rbl_cid(r));
		jbuf_lit(&body, ",\"consumerGroup\":");
		jbuf_cstr(&body, group);
		jbuf_lit(&body, ",\"mqSet\":[");
		for (size_t k = i; k < n; k++) {
			if (!part[k])
				continue;
			jbuf_lit(&body, first ? "{\"brokerName\":" : ",{\"brokerName\":");
			first = false;
			jbuf_cstr(&body, mqs[k].broker);
			jbuf_lit(&body, ",\"queueId\":");
			jbuf_i64(&body, mqs[k].queue_id);
			jbuf_lit(&body, ",\"topic\":");
			jbuf_cstr(&body, mqs[k].topic);
			jbuf_lit(&body, "}");
		}
		jbuf_lit(&body, "],\"onlyThisBroker\":false}");
		if (body.err == 0 && call(r->c, b, &req, body.p, body.len, &resp) == 0) {
			if (resp.cmd.code != WIRE_RSP_SUCCESS)
				rc = SP_ERR_STATUS(resp.cmd.code);
			else if (lock && ok != NULL)
				locked_parse(&resp, mqs, part, n, ok);
			for (size_t k = i; asked != NULL && k < n; k++)
				asked[k] |= part[k] && resp.cmd.code == WIRE_RSP_SUCCESS;
			sp_rem_resp_free(&resp);
		} else {
			rc = body.err ? body.err : -EIO;
		}
		jbuf_free(&body);
	}
	free(done);
	free(part);
	return rc;
}

/* ---- allocation ---- */

static uint64_t
fnv1a(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	/* finalizer: spread the low bits (splitmix64's) */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

struct vnode {
	uint64_t h;
	size_t member;
};

static int
vnode_cmp(const void *a, const void *b)
{
	const struct vnode *x = a, *y = b;

	return x->h < y->h ? -1 : x->h > y->h ? 1 : x->member < y->member ? -1 : 1;
}

int
sp__rbl_allocate(enum sp_rebalance how, const struct sp_mq *mqs, size_t nq, char *const *ids,
		 size_t n, const char *me, bool *mine)
{
	size_t idx = n;

	memset(mine, 0, nq * sizeof(*mine));
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], me) == 0)
			idx = i;
	if (idx == n)
		return -ENOENT; /* the brokers do not list us (yet) */
	if (how == SP_REBALANCE_CONSISTENT_HASH) {
		struct vnode *ring = malloc(n * SP__VNODES * sizeof(*ring));

		if (ring == NULL)
			return -ENOMEM;
		for (size_t m = 0; m < n; m++)
			for (unsigned v = 0; v < SP__VNODES; v++)
				ring[m * SP__VNODES + v] = (struct vnode){
					.h = fnv1a(ids[m], 0xcbf29ce484222325ull + v), .member = m};
		qsort(ring, n * SP__VNODES, sizeof(*ring), vnode_cmp);
		for (size_t q = 0; q < nq; q++) {
			char key[SP_TOPIC_MAX + SP_BROKER_MAX + 32];
			uint64_t h;
			size_t lo = 0, hi = n * SP__VNODES;

			snprintf(key, sizeof(key), "%s@%s@%d", mqs[q].topic, mqs[q].broker,
				 (int)mqs[q].queue_id);
			h = fnv1a(key, 0xcbf29ce484222325ull);
			while (lo < hi) { /* the first point at or after h, wrapping */
				size_t mid = (lo + hi) / 2;

				if (ring[mid].h < h)
					lo = mid + 1;
				else
					hi = mid;
			}
			mine[q] = ring[lo % (n * SP__VNODES)].member == idx;
		}
		free(ring);
		return 0;
	}
	{
		size_t first, len;

		sp__mq_allocate(nq, (unsigned)idx, (unsigned)n, &first, &len);
		for (size_t q = first; q < first + len && q < nq; q++)
			mine[q] = true;
	}
	return 0;
}
