// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_client.c - consumer groups and queue locks on the remoting port
 * (bk_rmt_share.h): HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
 * LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, answered on the control thread.
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

/* ---- consumer groups ---- */

static struct rgroup *
group_find(struct bk_rmt *r, const char *g, bool create)
{
	struct rgroup *n;

	for (size_t i = 0; i < r->ngroups; i++)
		if (strcmp(r->groups[i].name, g) == 0)
			return &r->groups[i];
	if (!create || strlen(g) > META_GROUP_MAX)
		return NULL;
	n = realloc(r->groups, sizeof(*n) * (r->ngroups + 1));
	if (n == NULL)
		return NULL;
	r->groups = n;
	n = &r->groups[r->ngroups++];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", g);
	return n;
}

static void
group_notify(struct bk_rmt *r, const struct rgroup *g)
{
	const struct bk_subgroup *cfg =
		r->ops.group_get ? r->ops.group_get(r->ops.arg, g->name) : NULL;

	/* notifyConsumerIdsChangedEnable=false: members find out at their next rebalance */
	if (cfg && !cfg->notify_ids_changed)
		return;
	for (size_t i = 0; i < g->n; i++) {
		struct rconn *c = bk_rmt__conn_get(r, g->m[i].conn, g->m[i].gen);
		struct rresp o = {.code = WIRE_REQ_NOTIFY_CONSUMER_IDS_CHANGED, .request = true};

		if (c == NULL)
			continue;
		o.opaque = c->next_opaque++;
		bk_rmt__resp_ext(&o, "consumerGroup", g->name);
		bk_rmt__conn_send(r, c, &o);
	}
}

static void
member_remove(struct rgroup *g, size_t i)
{
	g->m[i] = g->m[--g->n];
}

/* Forgets groups without members: client-chosen names must not grow memory for ever. */
static void
groups_drop_empty(struct bk_rmt *r)
{
	for (size_t k = 0; k < r->ngroups;) {
		if (r->groups[k].n == 0) {
			free(r->groups[k].m);
			r->groups[k] = r->groups[--r->ngroups];
			continue;
		}
		k++;
	}
}

/* Drops members of connection @id (closed) or silent ones; notifies the groups that changed. */
void
bk_rmt__groups_sweep(struct bk_rmt *r, bool by_conn, uint32_t id, uint32_t gen)
{
	for (size_t k = 0; k < r->ngroups; k++) {
		struct rgroup *g = &r->groups[k];
		bool changed = false;

		for (size_t i = 0; i < g->n;) {
			struct rmember *m = &g->m[i];
			bool drop = by_conn ? (m->conn == id && m->gen == gen)
					    : r->now_ms - m->last_ms > r->conf.client_expire_ms;

			if (drop) {
				log_info_ratelimited(TAG, "group %s: consumer %s left (%s)",
						     g->name, m->client_id,
						     by_conn ? "connection closed" : "silent");
				member_remove(g, i);
				changed = true;
				continue;
			}
			i++;
		}
		if (changed)
			group_notify(r, g);
	}
	groups_drop_empty(r);
}

const struct rsub *
bk_rmt__group_sub(struct bk_rmt *r, const char *group, const char *topic)
{
	struct rgroup *g = group_find(r, group, false);

	if (g == NULL)
		return NULL;
	for (size_t i = 0; i < g->n; i++)
		for (uint16_t k = 0; k < g->m[i].nsubs; k++)
			if (strcmp(g->m[i].subs[k].topic, topic) == 0)
				return &g->m[i].subs[k];
	return NULL;
}

static const char *
js(json_object *o, const char *k)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

json_object *
bk_rmt__jparse(const uint8_t *b, size_t len)
{
	struct json_tokener *tok;
	json_object *o;

	if (len == 0 || len > (64u << 20))
		return NULL;
	tok = json_tokener_new();
	if (tok == NULL)
		return NULL;
	o = json_tokener_parse_ex(tok, (const char *)b, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static void
sub_parse(json_object *s, struct rsub *out)
{
	json_object *cs;
	const char *topic = js(s, "topic");
	const char *expr = js(s, "subString");
	bool many;

	const char *etype = js(s, "expressionType");
	json_object *v;

	memset(out, 0, sizeof(*out));
	if (topic)
		snprintf(out->topic, sizeof(out->topic), "%s", topic);
	snprintf(out->expr, sizeof(out->expr), "%s", expr ? expr : "*");
	snprintf(out->etype, sizeof(out->etype), "%s",
		 etype && strcmp(etype, "SQL92") == 0 ? "SQL92" : "TAG");
	if (json_object_object_get_ex(s, "subVersion", &v))
		out->version = json_object_get_int64(v);
	if (json_object_object_get_ex(s, "codeSet", &cs) &&
	    json_object_is_type(cs, json_type_array) && json_object_array_length(cs) > 0) {
		size_t n = json_object_array_length(cs);

		if (n > SUB_CODES_MAX)
			return; /* too many to filter on the broker: the client filters */
		for (size_t i = 0; i < n; i++)
			out->codes[out->ncodes++] =
				(int32_t)json_object_get_int64(json_object_array_get_idx(cs, i));
		return;
	}
	if (expr)
		out->ncodes =
			bk_rmt__expr_codes(expr, strlen(expr), out->codes, SUB_CODES_MAX, &many);
}

static bool
subs_eq(const struct rmember *a, const struct rmember *b)
{
	if (a->nsubs != b->nsubs)
		return false;
	for (uint16_t i = 0; i < a->nsubs; i++) {
		const struct rsub *x = &a->subs[i], *y = &b->subs[i];

		if (strcmp(x->topic, y->topic) != 0 || x->ncodes != y->ncodes ||
		    memcmp(x->codes, y->codes, sizeof(x->codes[0]) * x->ncodes) != 0)
			return false;
	}
	return true;
}

/* consumeType, messageModel, consumeFromWhere of a ConsumerData (enum names). */
static void
group_kind(struct rgroup *g, json_object *cd)
{
	const char *ct = js(cd, "consumeType");
	const char *mm = js(cd, "messageModel");
	const char *fw = js(cd, "consumeFromWhere");

	if (ct && strlen(ct) < sizeof(g->consume_type))
		snprintf(g->consume_type, sizeof(g->consume_type), "%s", ct);
	if (mm && strlen(mm) < sizeof(g->message_model))
		snprintf(g->message_model, sizeof(g->message_model), "%s", mm);
	if (fw && strlen(fw) < sizeof(g->from_where))
		snprintf(g->from_where, sizeof(g->from_where), "%s", fw);
}

void
bk_rmt__do_heartbeat(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	json_object *o = bk_rmt__jparse(q->body, q->body_len), *set;
	const char *cid;

	if (o == NULL || (cid = js(o, "clientID")) == NULL || strlen(cid) >= 256) {
		json_object_put(o);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "heartbeat body is not valid HeartbeatData");
		return;
	}
	if (json_object_object_get_ex(o, "producerDataSet", &set) &&
	    json_object_is_type(set, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(set); i++) {
			const char *gname = js(json_object_array_get_idx(set, i), "groupName");

			/* Every client instance names CLIENT_INNER_PRODUCER: no half has it */
			if (gname != NULL && gname[0] && strlen(gname) <= META_GROUP_MAX &&
			    strcmp(gname, "CLIENT_INNER_PRODUCER") != 0)
				bk_rmt__producer_seen(r, c, gname, cid);
		}
	}
	if (json_object_object_get_ex(o, "consumerDataSet", &set) &&
	    json_object_is_type(set, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(set); i++) {
			json_object *cd = json_object_array_get_idx(set, i), *subs;
			const char *gname = js(cd, "groupName");
			struct rgroup *g;
			struct rmember nm = {0}, *m = NULL;
			char retry[META_TOPIC_MAX + 1];
			int32_t code;
			const char *why;
			bool changed = false;

			if (gname == NULL || !gname[0] || strlen(gname) > META_GROUP_MAX)
				continue;
			g = group_find(r, gname, true);
			if (g == NULL)
				continue;
			group_kind(g, cd);
			snprintf(nm.client_id, sizeof(nm.client_id), "%s", cid);
			nm.conn = c->id;
			nm.gen = c->gen;
			nm.last_ms = r->now_ms;
			if (json_object_object_get_ex(cd, "subscriptionDataSet", &subs) &&
			    json_object_is_type(subs, json_type_array))
				for (size_t k = 0;
				     k < json_object_array_length(subs) && nm.nsubs < SUBS_MAX; k++)
					sub_parse(json_object_array_get_idx(subs, k),
						  &nm.subs[nm.nsubs++]);
			for (size_t k = 0; k < g->n; k++)
				if (strcmp(g->m[k].client_id, cid) == 0)
					m = &g->m[k];
			if (m == NULL) {
				if (g->n == g->cap) {
					size_t cap = g->cap ? g->cap * 2 : 4;
					struct rmember *nmv = realloc(g->m, sizeof(*nmv) * cap);

					if (nmv == NULL)
						continue;
					g->m = nmv;
					g->cap = cap;
				}
				m = &g->m[g->n++];
				changed = true;
				log_info_ratelimited(TAG, "group %s: consumer %s joined from %s",
						     gname, cid, c->peer_s);
			} else if (m->conn != nm.conn || m->gen != nm.gen || !subs_eq(m, &nm)) {
				changed = true;
			}
			*m = nm;
			/* Its retry topic, as RocketMQ: one queue, read and write. */
			if (strlen(gname) + 7 <= META_TOPIC_MAX) {
				const struct bk_subgroup *cfg;

				/* autoCreateSubscriptionGroup: the group exists from its first heartbeat */
				if (r->ops.group_seen)
					r->ops.group_seen(r->ops.arg, gname);
				cfg = r->ops.group_get ? r->ops.group_get(r->ops.arg, gname) : NULL;
				snprintf(retry, sizeof(retry), "%s%s", BK_RETRY_PREFIX, gname);
				(void)bk_rmt__topic_get(r, retry, strlen(retry),
							cfg ? (uint32_t)cfg->retry_queues : 1,
							&code, &why);
			}
			if (changed)
				group_notify(r, g);
		}
	}
	json_object_put(o);
	bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

void
bk_rmt__do_unregister(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *cid = bk_rmt__ext_s(q, "clientID", NULL);
	const char *gname = bk_rmt__ext_s(q, "consumerGroup", NULL);
	const char *pname = bk_rmt__ext_s(q, "producerGroup", NULL);
	struct rgroup *g = gname ? group_find(r, gname, false) : NULL;

	if (pname != NULL)
		bk_rmt__producers_sweep(r, true, c->id, c->gen, pname);
	if (cid && g) {
		for (size_t i = 0; i < g->n; i++) {
			if (strcmp(g->m[i].client_id, cid) == 0) {
				log_info_ratelimited(TAG, "group %s: consumer %s unregistered",
						     g->name, cid);
				member_remove(g, i);
				group_notify(r, g);
				break;
			}
		}
	}
	bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void
bk_rmt__do_consumer_list(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *gname = bk_rmt__ext_s(q, "consumerGroup", NULL);
	struct rgroup *g = gname ? group_find(r, gname, false) : NULL;
	char remark[320];
	json_object *o, *arr;
	const char **ids;
	struct rresp out = {
		.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
	const char *s;

	if (g == NULL || g->n == 0) {
		snprintf(remark, sizeof(remark), "no consumer for this group, %s",
			 gname ? gname : "");
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, remark);
		return;
	}
	ids = malloc(sizeof(*ids) * g->n);
	o = json_object_new_object();
	arr = json_object_new_array();
	if (!ids || !o || !arr) {
		free(ids);
		json_object_put(o);
		json_object_put(arr);
		bk_rmt__busy(r, c, q);
		return;
	}
	for (size_t i = 0; i < g->n; i++)
		ids[i] = g->m[i].client_id;
	qsort(ids, g->n, sizeof(*ids), cmp_str);
	for (size_t i = 0; i < g->n; i++)
		if (i == 0 || strcmp(ids[i], ids[i - 1]) != 0)
			json_object_array_add(arr, json_object_new_string(ids[i]));
	json_object_object_add(o, "consumerIdList", arr);
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	out.body = (const uint8_t *)s;
	out.body_len = (uint32_t)strlen(s);
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		bk_rmt__conn_send(r, c, &out);
	json_object_put(o);
	free(ids);
}

/* ---- queue locks (orderly consumers) ---- */

static struct rlock *
lock_find(struct bk_rmt *r, const char *g, const char *t, int32_t qid)
{
	for (size_t i = 0; i < r->nlocks; i++)
		if (r->locks[i].qid == qid && strcmp(r->locks[i].group, g) == 0 &&
		    strcmp(r->locks[i].topic, t) == 0)
			return &r->locks[i];
	return NULL;
}

void
bk_rmt__do_lock(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, bool lock)
{
	json_object *o = bk_rmt__jparse(q->body, q->body_len), *set, *ok = NULL, *res = NULL;
	const char *g = o ? js(o, "consumerGroup") : NULL;
	const char *cid = o ? js(o, "clientId") : NULL;
	struct rresp out = {
		.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};

	if (!g || !cid || strlen(g) > META_GROUP_MAX || strlen(cid) >= 256 ||
	    !json_object_object_get_ex(o, "mqSet", &set) ||
	    !json_object_is_type(set, json_type_array)) {
		json_object_put(o);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "lock body is not valid LockBatchRequestBody");
		return;
	}
	if (lock) {
		res = json_object_new_object();
		ok = json_object_new_array();
	}
	for (size_t i = 0; i < json_object_array_length(set); i++) {
		json_object *mq = json_object_array_get_idx(set, i), *qv;
		const char *t = js(mq, "topic");
		int32_t qid;
		struct rlock *l;

		if (!t || strlen(t) > META_TOPIC_MAX ||
		    !json_object_object_get_ex(mq, "queueId", &qv))
			continue;
		qid = (int32_t)json_object_get_int(qv);
		l = lock_find(r, g, t, qid);
		if (!lock) {
			if (l && strcmp(l->client_id, cid) == 0)
				*l = r->locks[--r->nlocks];
			continue;
		}
		if (l && strcmp(l->client_id, cid) != 0 &&
		    r->now_ms - l->last_ms <= r->conf.lock_expire_ms)
			continue; /* someone else holds it */
		if (l == NULL) {
			if (r->nlocks == r->locks_cap) {
				size_t cap = r->locks_cap ? r->locks_cap * 2 : 64;
				struct rlock *nl = realloc(r->locks, sizeof(*nl) * cap);

				if (nl == NULL)
					continue;
				r->locks = nl;
				r->locks_cap = cap;
			}
			l = &r->locks[r->nlocks++];
			snprintf(l->group, sizeof(l->group), "%s", g);
			snprintf(l->topic, sizeof(l->topic), "%s", t);
			l->qid = qid;
		}
		snprintf(l->client_id, sizeof(l->client_id), "%s", cid);
		l->last_ms = r->now_ms;
		if (ok)
			json_object_array_add(ok, json_object_get(mq));
	}
	if (lock && res && ok) {
		const char *s;

		json_object_object_add(res, "lockOKMQSet", ok);
		s = json_object_to_json_string_ext(res, JSON_C_TO_STRING_PLAIN);
		out.body = (const uint8_t *)s;
		out.body_len = (uint32_t)strlen(s);
		if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
			bk_rmt__conn_send(r, c, &out);
		json_object_put(res);
	} else {
		json_object_put(res);
		json_object_put(ok);
		bk_rmt__reply(r, c, q, lock ? WIRE_RSP_SYSTEM_BUSY : WIRE_RSP_SUCCESS, NULL);
	}
	json_object_put(o);
}

/* ---- admin views of the groups (bk_rmt_stats.c, GET_*_CONNECTION_LIST) ---- */

bool
bk_rmt__group_broadcasting(struct bk_rmt *r, const char *group)
{
	const struct rgroup *g = group_find(r, group, false);

	return g != NULL && strcmp(g->message_model, "BROADCASTING") == 0;
}

bool
bk_rmt__group_online(struct bk_rmt *r, const char *group)
{
	const struct rgroup *g = group_find(r, group, false);

	return g != NULL && g->n > 0;
}

size_t
bk_rmt__groups_of_topic(struct bk_rmt *r, const char *topic, char (*out)[RNAME_W], size_t max)
{
	size_t n = 0;

	for (size_t k = 0; k < r->ngroups && n < max; k++)
		if (bk_rmt__group_sub(r, r->groups[k].name, topic) != NULL)
			snprintf(out[n++], sizeof(out[0]), "%s", r->groups[k].name);
	return n;
}

size_t
bk_rmt__group_tell_reset(struct bk_rmt *r, const char *group, const char *topic, const char *ts,
			 bool force, const uint8_t *body, size_t len)
{
	const struct rgroup *g = group_find(r, group, false);
	size_t told = 0;

	for (size_t i = 0; g && i < g->n; i++) {
		struct rconn *c = bk_rmt__conn_get(r, g->m[i].conn, g->m[i].gen);
		struct rresp o = {.code = WIRE_REQ_RESET_CONSUMER_CLIENT_OFFSET,
				  .request = true,
				  .body = body,
				  .body_len = (uint32_t)len};

		if (c == NULL)
			continue;
		o.opaque = c->next_opaque++;
		bk_rmt__resp_ext(&o, "topic", topic);
		bk_rmt__resp_ext(&o, "group", group);
		bk_rmt__resp_ext(&o, "timestamp", ts);
		bk_rmt__resp_ext(&o, "isForce", force ? "true" : "false");
		bk_rmt__conn_send(r, c, &o);
		told++;
	}
	return told;
}

/* A Connection: clientAddr, clientId, language, version. */
static void
conn_json(struct jbuf *b, const struct rconn *c, const char *client_id)
{
	const char *lang = wire_rem_lang_name(c->lang);

	jbuf_lit(b, "{\"clientAddr\":");
	jbuf_cstr(b, c->peer_s);
	jbuf_lit(b, ",\"clientId\":");
	jbuf_cstr(b, client_id);
	jbuf_lit(b, ",\"language\":");
	jbuf_cstr(b, lang ? lang : "OTHER");
	jbuf_lit(b, ",\"version\":");
	jbuf_i64(b, c->version);
	jbuf_lit(b, "},");
}

/* SubscriptionData, fastjson's field order. */
static void
sub_json(struct jbuf *b, const struct rsub *s)
{
	jbuf_lit(b, "{\"classFilterMode\":false,\"codeSet\":[");
	for (uint16_t i = 0; i < s->ncodes; i++) {
		jbuf_i64(b, s->codes[i]);
		jbuf_lit(b, ",");
	}
	jbuf_uncomma(b);
	jbuf_lit(b, "],\"expressionType\":");
	jbuf_cstr(b, s->etype);
	jbuf_lit(b, ",\"subString\":");
	jbuf_cstr(b, s->expr);
	jbuf_lit(b, ",\"subVersion\":");
	jbuf_i64(b, s->version);
	jbuf_lit(b, ",\"tagsSet\":[");
	if (strcmp(s->expr, "*") != 0 && s->expr[0] && strcmp(s->etype, "TAG") == 0) {
		for (const char *p = s->expr; *p;) {
			const char *e = strstr(p, "||");
			size_t n = e ? (size_t)(e - p) : strlen(p);
			size_t a = 0;

			while (a < n && p[a] == ' ')
				a++;
			while (n > a && p[n - 1] == ' ')
				n--;
			if (n > a) {
				jbuf_str(b, p + a, n - a);
				jbuf_lit(b, ",");
			}
			p = e ? e + 2 : p + strlen(p);
		}
		jbuf_uncomma(b);
	}
	jbuf_lit(b, "],\"topic\":");
	jbuf_cstr(b, s->topic);
	jbuf_lit(b, "}");
}

static void
send_body(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, struct jbuf *b)
{
	struct rresp o = {.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
	size_t len;
	uint8_t *body;

	if (b->err) {
		jbuf_free(b);
		bk_rmt__busy(r, c, q);
		return;
	}
	body = jbuf_take(b, &len);
	o.body = body;
	o.body_len = (uint32_t)len;
	bk_rmt__conn_send(r, c, &o);
	free(body);
}

/* GET_CONSUMER_CONNECTION_LIST (203): ConsumerConnection, or CONSUMER_NOT_ONLINE. */
void
bk_rmt__do_consumer_conns(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *group = bk_rmt__ext_s(q, "consumerGroup", NULL);
	const struct rgroup *g = group ? group_find(r, group, false) : NULL;
	struct jbuf b;

	if (g == NULL || g->n == 0) {
		char why[META_GROUP_MAX + 48];

		snprintf(why, sizeof(why), "the consumer group[%s] not online", group ? group : "");
		bk_rmt__reply(r, c, q, WIRE_RSP_CONSUMER_NOT_ONLINE, why);
		return;
	}
	jbuf_init(&b);
	jbuf_lit(&b, "{\"connectionSet\":[");
	for (size_t i = 0; i < g->n; i++) {
		const struct rconn *mc = bk_rmt__conn_get(r, g->m[i].conn, g->m[i].gen);

		if (mc)
			conn_json(&b, mc, g->m[i].client_id);
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "],\"consumeFromWhere\":");
	jbuf_cstr(&b, g->from_where[0] ? g->from_where : "CONSUME_FROM_LAST_OFFSET");
	jbuf_lit(&b, ",\"consumeType\":");
	jbuf_cstr(&b, g->consume_type[0] ? g->consume_type : "CONSUME_PASSIVELY");
	jbuf_lit(&b, ",\"messageModel\":");
	jbuf_cstr(&b, g->message_model[0] ? g->message_model : "CLUSTERING");
	jbuf_lit(&b, ",\"subscriptionTable\":{");
	/* the union of the members' subscriptions, one per topic (the latest member's) */
	for (size_t i = 0; i < g->n; i++) {
		for (uint16_t k = 0; k < g->m[i].nsubs; k++) {
			const struct rsub *s = &g->m[i].subs[k];
			bool seen = false;

			for (size_t i2 = i + 1; i2 < g->n && !seen; i2++)
				for (uint16_t k2 = 0; k2 < g->m[i2].nsubs && !seen; k2++)
					seen = strcmp(g->m[i2].subs[k2].topic, s->topic) == 0;
			if (seen)
				continue;
			jbuf_cstr(&b, s->topic);
			jbuf_lit(&b, ":");
			sub_json(&b, s);
			jbuf_lit(&b, ",");
		}
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "}}");
	send_body(r, c, q, &b);
}

/* GET_PRODUCER_CONNECTION_LIST (204): ProducerConnection; SYSTEM_ERROR for a group with none (RocketMQ). */
void
bk_rmt__do_producer_conns(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *group = bk_rmt__ext_s(q, "producerGroup", NULL);
	struct jbuf b;

	if (group == NULL) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "producerGroup is missing");
		return;
	}
	{
		bool any = false;

		for (size_t i = 0; i < r->nproducers && !any; i++)
			any = strcmp(r->producers[i].group, group) == 0 &&
			      bk_rmt__conn_get(r, r->producers[i].conn, r->producers[i].gen);
		if (!any) {
			char why[META_GROUP_MAX + 40];

			snprintf(why, sizeof(why), "the producer group[%s] not exist", group);
			bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
			return;
		}
	}
	jbuf_init(&b);
	jbuf_lit(&b, "{\"connectionSet\":[");
	for (size_t i = 0; i < r->nproducers; i++) {
		const struct rproducer *p = &r->producers[i];
		const struct rconn *pc = bk_rmt__conn_get(r, p->conn, p->gen);

		if (pc && strcmp(p->group, group) == 0)
			conn_json(&b, pc, p->client_id);
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "]}");
	send_body(r, c, q, &b);
}

/* ---- GET_CONSUMER_RUNNING_INFO (307): relayed to the consumer (RocketMQ's callConsumer) ---- */

#define PROXY_TIMEOUT_MS 10000 /* RocketMQ's */
#define PROXIES_MAX 1024

void
bk_rmt__do_running_info(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *group = bk_rmt__ext_s(q, "consumerGroup", NULL);
	const char *cid = bk_rmt__ext_s(q, "clientId", NULL);
	const struct rgroup *g = group ? group_find(r, group, false) : NULL;
	struct rconn *mc = NULL;
	struct rproxy *p;
	struct rresp o = {.code = WIRE_REQ_GET_CONSUMER_RUNNING_INFO,
			  .request_sync = true,
			  .serialize = q->serialize,
			  .body = q->body,
			  .body_len = q->body_len};
	char why[META_GROUP_MAX + 320];

	for (size_t i = 0; g && cid && i < g->n && mc == NULL; i++)
		if (strcmp(g->m[i].client_id, cid) == 0)
			mc = bk_rmt__conn_get(r, g->m[i].conn, g->m[i].gen);
	if (mc == NULL) {
		snprintf(why, sizeof(why), "The Consumer <%s> <%s> not online", group ? group : "",
			 cid ? cid : "");
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
		return;
	}
	if (r->nproxies == r->proxies_cap) {
		size_t cap = r->proxies_cap ? r->proxies_cap * 2 : 8;
		struct rproxy *n =
			cap <= PROXIES_MAX ? realloc(r->proxies, cap * sizeof(*n)) : NULL;

		if (n == NULL) {
			bk_rmt__busy(r, c, q);
			return;
		}
		r->proxies = n;
		r->proxies_cap = cap;
	}
	p = &r->proxies[r->nproxies++];
	p->client = mc->id;
	p->client_gen = mc->gen;
	p->client_opaque = mc->next_opaque++;
	p->admin = c->id;
	p->admin_gen = c->gen;
	p->admin_opaque = q->opaque;
	p->serialize = q->serialize;
	p->deadline_ms = r->now_ms + PROXY_TIMEOUT_MS;
	snprintf(p->what, sizeof(p->what), "%s %s", group, cid);
	/* the same extFields and body, as RocketMQ relays them */
	o.opaque = p->client_opaque;
	for (uint16_t i = 0; i < q->n_ext && i < 16; i++)
		bk_rmt__resp_ext(&o, q->ext[i].key, q->ext[i].val);
	bk_rmt__conn_send(r, mc, &o);
}

void
bk_rmt__proxy_answer(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	for (size_t i = 0; i < r->nproxies; i++) {
		struct rproxy *p = &r->proxies[i];
		struct rconn *ac;

		if (p->client != c->id || p->client_gen != c->gen || p->client_opaque != q->opaque)
			continue;
		ac = bk_rmt__conn_get(r, p->admin, p->admin_gen);
		if (ac != NULL) {
			struct rresp o = {.code = q->code,
					  .opaque = p->admin_opaque,
					  .serialize = p->serialize,
					  .remark = q->remark,
					  .body = q->body,
					  .body_len = q->body_len};

			for (uint16_t k = 0; k < q->n_ext && k < 16; k++)
				bk_rmt__resp_ext(&o, q->ext[k].key, q->ext[k].val);
			bk_rmt__conn_send(r, ac, &o);
		}
		r->proxies[i] = r->proxies[--r->nproxies];
		return;
	}
}

void
bk_rmt__proxy_sweep(struct bk_rmt *r)
{
	for (size_t i = 0; i < r->nproxies;) {
		struct rproxy *p = &r->proxies[i];
		bool gone = bk_rmt__conn_get(r, p->client, p->client_gen) == NULL;
		struct rconn *ac;

		if (!gone && r->now_ms < p->deadline_ms) {
			i++;
			continue;
		}
		ac = bk_rmt__conn_get(r, p->admin, p->admin_gen);
		if (ac != NULL) {
			char why[sizeof(p->what) + 64];
			struct rresp o = {.code = gone ? WIRE_RSP_SYSTEM_ERROR
						       : WIRE_RSP_CONSUME_MSG_TIMEOUT,
					  .opaque = p->admin_opaque,
					  .serialize = p->serialize,
					  .remark = why};

			snprintf(why, sizeof(why), "invoke consumer %s %s", p->what,
				 gone ? "Exception: its connection closed" : "timeout");
			bk_rmt__conn_send(r, ac, &o);
		}
		r->proxies[i] = r->proxies[--r->nproxies];
	}
}

void
bk_rmt_members_json(struct bk_rmt *r, const char *group, struct jbuf *b)
{
	const struct rgroup *g = r ? group_find(r, group, false) : NULL;

	jbuf_lit(b, "[");
	for (size_t i = 0; g && i < g->n; i++) {
		if (i)
			jbuf_lit(b, ",");
		jbuf_str(b, g->m[i].client_id, strlen(g->m[i].client_id));
	}
	jbuf_lit(b, "]");
}
