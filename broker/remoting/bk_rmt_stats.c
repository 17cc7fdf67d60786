// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_stats.c - the admin requests that read every queue of a topic or a
 * group (bk_rmt_share.h): GET_TOPIC_STATS_INFO, GET_CONSUME_STATS,
 * INVOKE_BROKER_TO_RESET_OFFSET, QUERY_TOPIC_CONSUME_BY_WHO.
 *
 * Queue figures (min, max, store times) live with the cores: one request
 * becomes one BK_ROP_QSTAT per core that owns some of its queues (a struct
 * ragg gathers the answers) and is answered when the last one is back.
 * Consumer offsets are read here, lock-free (bk_core_offset_peek()).
 * Bodies are written as RocketMQ's fastjson writes them: bean fields in
 * alphabetical order, MessageQueue keys as objects.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bk_rmt_share.h"
#include "common/jbuf.h"
#include "common/log.h"
#include "wire/dp.h"
#include "wire/remoting.h"

static struct ragg *
agg_new(struct rconn *c, const struct wire_rem_cmd *q)
{
	struct ragg *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return NULL;
	a->conn = c->id;
	a->gen = c->gen;
	a->opaque = q->opaque;
	a->code = q->code;
	a->serialize = q->serialize;
	return a;
}

/* Adds queue @qid of @t. Return: 0, -ENOMEM. */
static int
agg_row(struct ragg *a, const struct bk_topic *t, uint32_t qid, const char *group,
	const struct bk *bk)
{
	struct ragg_row *w;

	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		struct ragg_row *n = realloc(a->rows, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		a->rows = n;
		a->cap = cap;
	}
	w = &a->rows[a->n++];
	memset(w, 0, sizeof(*w));
	memcpy(w->topic, t->name, t->name_len + 1);
	w->qid = qid;
	w->core = t->core[qid];
	w->sq = t->sq[qid];
	w->cons = group ? bk_core_offset_peek(&bk->cores[w->core], t->name, group, qid) : -1;
	w->st.probe = w->cons > 0 ? (uint64_t)w->cons - 1 : UINT64_MAX;
	return 0;
}

static void
agg_answer(struct bk_rmt *r, struct ragg *a, struct rconn *c, int32_t code, const char *remark,
	   struct jbuf *body)
{
	struct rresp o = {.code = code, .opaque = a->opaque, .serialize = a->serialize};
	uint8_t *b = NULL;
	size_t len = 0;

	if (body && body->err) {
		o.code = WIRE_RSP_SYSTEM_ERROR;
		o.remark = "out of memory";
	} else if (body) {
		b = jbuf_take(body, &len);
		o.body = b;
		o.body_len = (uint32_t)len;
	}
	if (remark)
		o.remark = remark;
	bk_rmt__conn_send(r, c, &o);
	free(b);
}

/* Posts one BK_ROP_QSTAT per core that owns rows; @value: the time to search, -1 none. */
static void
agg_post(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, struct ragg *a,
	 int64_t value)
{
	for (uint32_t core = 0; core < r->bk->ncores; core++) {
		/* at most BK_QSTAT_ROWS queues per command: each is a short pause of the core */
		for (size_t next = 0; next < a->n;) {
			struct bk_qstat *st;
			struct rjob *j;
			size_t k = 0, i;

			while (next < a->n && a->rows[next].core != core)
				next++;
			if (next == a->n)
				break;
			j = bk_rmt__job_new(r, c, q, BK_ROP_QSTAT, 0,
					    BK_QSTAT_ROWS * (uint32_t)sizeof(*st));
			if (j == NULL) {
				a->failed = true;
				break;
			}
			st = (struct bk_qstat *)j->c.resp;
			for (i = next; i < a->n && k < BK_QSTAT_ROWS; i++) {
				if (a->rows[i].core != core)
					continue;
				st[k] = a->rows[i].st;
				st[k].sq = a->rows[i].sq;
				st[k].idx = (uint32_t)i;
				k++;
			}
			next = i;
			j->c.resp_len = (uint32_t)(k * sizeof(*st));
			j->c.value = value;
			if (bk_rmt__job_post(r, j, (uint16_t)core) != 0) {
				a->failed = true;
				break;
			}
			j->agg = a;
			a->pending++;
		}
	}
}

static void
agg_end(struct bk_rmt *r, struct ragg *a)
{
	struct rconn *c = bk_rmt__conn_get(r, a->conn, a->gen);

	if (c != NULL) {
		if (a->failed)
			bk_rmt__busy_answer(r, c, a->code, a->opaque, a->serialize);
		else
			a->finish(r, a, c);
	}
	bk_rmt__agg_free(a);
}

/* Starts @a: answered at once when no core has a row, else by the last answer. */
static void
agg_start(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, struct ragg *a,
	  int64_t value)
{
	agg_post(r, c, q, a, value);
	if (a->pending == 0)
		agg_end(r, a);
}

void
bk_rmt__agg_done(struct bk_rmt *r, struct rjob *j)
{
	struct ragg *a = j->agg;
	const struct bk_qstat *st = (const struct bk_qstat *)j->c.resp;

	if (j->c.status != WIRE_DP_ST_SUCCESS) {
		a->failed = true;
	} else if (j->c.op == BK_ROP_QSTAT) {
		for (size_t i = 0; i < j->c.resp_len / sizeof(*st); i++)
			if (st[i].idx < a->n)
				a->rows[st[i].idx].st = st[i];
	}
	j->agg = NULL;
	a->pending--;
	bk_rmt__job_free(r, j);
	if (a->pending == 0)
		agg_end(r, a);
}

/* `{"brokerName":"b","queueId":0,"topic":"t"}:` - fastjson's MessageQueue map key. */
static void
mq_key(struct jbuf *b, const char *broker, const char *topic, uint32_t qid)
{
	jbuf_lit(b, "{\"brokerName\":");
	jbuf_cstr(b, broker);
	jbuf_lit(b, ",\"queueId\":");
	jbuf_i64(b, qid);
	jbuf_lit(b, ",\"topic\":");
	jbuf_cstr(b, topic);
	jbuf_lit(b, "}:");
}

static const char *
bname(const struct bk_rmt *r)
{
	return r->bk->conf.broker_name ? r->bk->conf.broker_name : "";
}

static int64_t
nonneg(uint64_t v)
{
	return v > INT64_MAX ? 0 : (int64_t)v;
}

/* ---- GET_TOPIC_STATS_INFO (202): TopicStatsTable ---- */

static void
topic_stats_finish(struct bk_rmt *r, struct ragg *a, struct rconn *c)
{
	struct jbuf b;

	jbuf_init(&b);
	jbuf_lit(&b, "{\"offsetTable\":{");
	for (size_t i = 0; i < a->n; i++) {
		const struct ragg_row *w = &a->rows[i];

		mq_key(&b, bname(r), w->topic, w->qid);
		jbuf_lit(&b, "{\"lastUpdateTimestamp\":");
		jbuf_i64(&b, w->st.last_ms);
		jbuf_lit(&b, ",\"maxOffset\":");
		jbuf_i64(&b, nonneg(w->st.max));
		jbuf_lit(&b, ",\"minOffset\":");
		jbuf_i64(&b, nonneg(w->st.min));
		jbuf_lit(&b, "},");
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "}}");
	agg_answer(r, a, c, WIRE_RSP_SUCCESS, NULL, &b);
	jbuf_free(&b);
}

static void
not_exist(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, const char *topic)
{
	char why[META_TOPIC_MAX + 32];

	snprintf(why, sizeof(why), "topic[%s] not exist", topic ? topic : "");
	bk_rmt__reply(r, c, q, WIRE_RSP_TOPIC_NOT_EXIST, why);
}

void
bk_rmt__do_topic_stats(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t tl;
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	const struct bk_topic *t = topic ? bk_topic_find(r->bk, topic, tl) : NULL;
	struct ragg *a;

	if (t == NULL) {
		not_exist(r, c, q, topic);
		return;
	}
	a = agg_new(c, q);
	if (a == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	a->finish = topic_stats_finish;
	for (uint32_t i = 0; i < t->write_queues && i < t->nq; i++)
		if (agg_row(a, t, i, NULL, r->bk) != 0)
			a->failed = true;
	agg_start(r, c, q, a, -1);
}

/* ---- the topics a group has offsets of, the groups with offsets on a topic ---- */

/*
 * Distinct names from every core's offset table: topics of @group, or (with
 * @group NULL) groups of @topic; only offsets ever committed. Return: count
 * written to @out (each META_GROUP_MAX + 1 wide, the larger name), at most @max.
 */
static size_t
offset_names(const struct bk *bk, const char *group, const char *topic, char (*out)[RNAME_W],
	     size_t max)
{
	size_t n = 0;

	for (uint32_t i = 0; i < bk->ncores; i++) {
		const struct bk_core *core = &bk->cores[i];

		for (uint32_t k = 0; k <= core->off_mask; k++) {
			const struct bk_off *e = &core->offs[k];
			const char *name;
			bool dup = false;

			/* acquire: pairs with the release in off_find() */
			if (!atomic_load_acquire(&e->used) || atomic_load_relaxed(&e->offset) < 0)
				continue;
			if (group ? strcmp(e->group, group) != 0 : strcmp(e->topic, topic) != 0)
				continue;
			name = group ? e->topic : e->group;
			for (size_t d = 0; d < n && !dup; d++)
				dup = strcmp(out[d], name) == 0;
			if (!dup && n < max)
				snprintf(out[n++], sizeof(out[0]), "%s", name);
		}
	}
	return n;
}

#define NAMES_MAX 1024

/* ---- GET_CONSUME_STATS (208): ConsumeStats ---- */

/* The group's pulled messages per second over the last minute, on the topics in @a. */
static double
consume_tps(struct bk_rmt *r, const struct ragg *a)
{
	double tps = 0.0;

	for (size_t i = 0; r->ops.group_tps && i < a->n; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(a->rows[k].topic, a->rows[i].topic) == 0;
		if (!seen)
			tps += r->ops.group_tps(r->ops.arg, a->group, a->rows[i].topic);
	}
	return tps;
}

static void
consume_stats_finish(struct bk_rmt *r, struct ragg *a, struct rconn *c)
{
	struct jbuf b;

	jbuf_init(&b);
	jbuf_lit(&b, "{\"consumeTps\":");
	jbuf_double(&b, consume_tps(r, a));
	jbuf_lit(&b, ",\"offsetTable\":{");
	for (size_t i = 0; i < a->n; i++) {
		const struct ragg_row *w = &a->rows[i];

		mq_key(&b, bname(r), w->topic, w->qid);
		jbuf_lit(&b, "{\"brokerOffset\":");
		jbuf_i64(&b, nonneg(w->st.max));
		jbuf_lit(&b, ",\"consumerOffset\":");
		jbuf_i64(&b, w->cons < 0 ? 0 : w->cons);
		jbuf_lit(&b, ",\"lastTimestamp\":");
		jbuf_i64(&b, w->st.probe_ms);
		jbuf_lit(&b, "},");
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "}}");
	agg_answer(r, a, c, WIRE_RSP_SUCCESS, NULL, &b);
	jbuf_free(&b);
}

void
bk_rmt__do_consume_stats(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl, tl = 0;
	const char *group = bk_rmt__ext_s(q, "consumerGroup", &gl);
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	char(*names)[RNAME_W] = NULL;
	size_t n;
	struct ragg *a;

	if (group == NULL || gl == 0 || gl > META_GROUP_MAX) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "consumerGroup is missing or too long");
		return;
	}
	a = agg_new(c, q);
	names = calloc(NAMES_MAX, sizeof(*names));
	if (a == NULL || names == NULL) {
		free(a);
		free(names);
		bk_rmt__busy(r, c, q);
		return;
	}
	a->finish = consume_stats_finish;
	memcpy(a->group, group, gl + 1);
	if (topic && tl > 0 && tl <= META_TOPIC_MAX) {
		snprintf(names[0], sizeof(names[0]), "%s", topic);
		n = 1;
	} else {
		n = offset_names(r->bk, group, NULL, names, NAMES_MAX);
	}
	for (size_t k = 0; k < n; k++) {
		const struct bk_topic *t = bk_topic_find(r->bk, names[k], strlen(names[k]));

		if (t == NULL)
			continue;
		/* an online group that does not subscribe to the topic: not its stats (RocketMQ) */
		if (bk_rmt__group_sub(r, group, t->name) == NULL && bk_rmt__group_online(r, group))
			continue;
		for (uint32_t i = 0; i < t->read_queues && i < t->nq; i++)
			if (agg_row(a, t, i, group, r->bk) != 0)
				a->failed = true;
	}
	free(names);
	agg_start(r, c, q, a, -1);
}

/* ---- QUERY_TOPIC_CONSUME_BY_WHO (300): GroupList ---- */

void
bk_rmt__do_consume_by_who(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t tl;
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	char(*names)[RNAME_W];
	struct rresp o = {.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
	struct jbuf b;
	size_t n, len;
	uint8_t *body;

	if (topic == NULL || tl == 0) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "topic is missing");
		return;
	}
	names = calloc(NAMES_MAX, sizeof(*names));
	if (names == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	/* online subscribers first (RocketMQ's consumerManager), then offsets */
	n = bk_rmt__groups_of_topic(r, topic, names, NAMES_MAX);
	for (size_t k = 0; k < n; k++)
		for (size_t d = k + 1; d < n; d++)
			if (strcmp(names[k], names[d]) == 0)
				names[d][0] = '\0';
	{
		char(*more)[RNAME_W] = names + n;
		size_t m = offset_names(r->bk, NULL, topic, more, NAMES_MAX - n);

		for (size_t k = 0; k < m; k++)
			for (size_t d = 0; d < n; d++)
				if (strcmp(more[k], names[d]) == 0)
					more[k][0] = '\0';
		n += m;
	}
	jbuf_init(&b);
	jbuf_lit(&b, "{\"groupList\":[");
	for (size_t k = 0; k < n; k++) {
		if (!names[k][0])
			continue;
		jbuf_cstr(&b, names[k]);
		jbuf_lit(&b, ",");
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "]}");
	free(names);
	if (b.err) {
		jbuf_free(&b);
		bk_rmt__busy(r, c, q);
		return;
	}
	body = jbuf_take(&b, &len);
	o.body = body;
	o.body_len = (uint32_t)len;
	bk_rmt__conn_send(r, c, &o);
	free(body);
}

/* ---- INVOKE_BROKER_TO_RESET_OFFSET (222): ResetOffsetBody ---- */

static int64_t
reset_target(const struct ragg *a, const struct ragg_row *w)
{
	int64_t at = a->ts < 0 ? nonneg(w->st.max) : nonneg(w->st.at_time);

	/* RocketMQ: without force, a group already behind the time stays where it is */
	if (!a->force && w->cons >= 0 && at >= w->cons)
		return w->cons;
	return at;
}

static void
reset_body(struct bk_rmt *r, const struct ragg *a, struct jbuf *b)
{
	jbuf_lit(b, "{\"offsetTable\":{");
	for (size_t i = 0; i < a->n; i++) {
		const struct ragg_row *w = &a->rows[i];

		mq_key(b, bname(r), w->topic, w->qid);
		jbuf_i64(b, reset_target(a, w));
		jbuf_lit(b, ",");
	}
	jbuf_uncomma(b);
	jbuf_lit(b, "}}");
}

#define RESETS_MAX 4096
#define RESET_KEEP_MS 120000 /* a consumer that did not pull for 2 min reads the committed offset */

/* A PULL checks every pending reset: the hash keeps that to a compare each. */
static uint32_t
reset_hash(const char *group, const char *topic, uint32_t qid)
{
	return (bk_name_hash(group, strlen(group)) * 31u + bk_name_hash(topic, strlen(topic))) ^
	       qid;
}

void
bk_rmt__reset_note(struct bk_rmt *r, const char *group, const char *topic, uint32_t qid,
		   int64_t offset)
{
	struct rreset *e = NULL;

	uint32_t h = reset_hash(group, topic, qid);

	for (size_t i = 0; i < r->nresets && e == NULL; i++)
		if (r->resets[i].hash == h && r->resets[i].qid == qid &&
		    strcmp(r->resets[i].group, group) == 0 &&
		    strcmp(r->resets[i].topic, topic) == 0)
			e = &r->resets[i];
	if (e == NULL) {
		if (r->nresets == r->resets_cap) {
			size_t cap = r->resets_cap ? r->resets_cap * 2 : 16;
			struct rreset *n;

			if (cap > RESETS_MAX) {
				/* full: the oldest goes (its consumer reads the committed offset) */
				memmove(r->resets, r->resets + 1,
					(r->nresets - 1) * sizeof(*r->resets));
				r->nresets--;
			} else {
				n = realloc(r->resets, cap * sizeof(*n));
				if (n == NULL)
					return;
				r->resets = n;
				r->resets_cap = cap;
			}
		}
		e = &r->resets[r->nresets++];
		e->hash = h;
		snprintf(e->group, sizeof(e->group), "%s", group);
		snprintf(e->topic, sizeof(e->topic), "%s", topic);
		e->qid = qid;
	}
	e->offset = offset;
	e->expire_ms = r->now_ms + RESET_KEEP_MS;
}

bool
bk_rmt__reset_take(struct bk_rmt *r, const char *group, const char *topic, uint32_t qid,
		   int64_t qoff, int64_t *to)
{
	uint32_t h = reset_hash(group, topic, qid);

	for (size_t i = 0; i < r->nresets;) {
		struct rreset *e = &r->resets[i];
		bool hit = e->hash == h && e->qid == qid && strcmp(e->group, group) == 0 &&
			   strcmp(e->topic, topic) == 0;
		bool old = e->expire_ms < r->now_ms;

		if (!hit && !old) {
			i++;
			continue;
		}
		*to = e->offset;
		r->resets[i] = r->resets[--r->nresets];
		if (hit)
			return !old && *to != qoff;
	}
	return false;
}

static void
reset_finish(struct bk_rmt *r, struct ragg *a, struct rconn *c)
{
	struct jbuf b;
	char ts[24];
	size_t told = 0;
	int failed = 0;

	/* commit here, on the owning cores: a consumer that starts later begins there too */
	for (size_t i = 0; i < a->n; i++) {
		const struct ragg_row *w = &a->rows[i];

		if (bk_rmt_offset_put(r, w->topic, a->group, w->qid, reset_target(a, w), false) !=
		    0)
			failed++;
		bk_rmt__reset_note(r, a->group, w->topic, w->qid, reset_target(a, w));
	}
	jbuf_init(&b);
	reset_body(r, a, &b);
	snprintf(ts, sizeof(ts), "%" PRId64, a->ts);
	/* and tell the group's live consumers (RESET_CONSUMER_CLIENT_OFFSET, oneway) */
	if (b.err == 0)
		told = bk_rmt__group_tell_reset(r, a->group, a->topic, ts, a->force, b.p, b.len);
	log_info(TAG, "group %s reset on topic %s to %s%s by %s: %zu queues, %zu consumers told%s",
		 a->group, a->topic, a->ts < 0 ? "the latest" : ts, a->force ? " (forced)" : "",
		 c->peer_s, a->n, told, failed ? ", some offsets not committed (busy)" : "");
	if (failed)
		agg_answer(r, a, c, WIRE_RSP_SYSTEM_BUSY,
			   "[OVERLOAD] some queues' offsets could not be committed; retry", NULL);
	else
		agg_answer(r, a, c, WIRE_RSP_SUCCESS, NULL, &b);
	jbuf_free(&b);
}

void
bk_rmt__do_reset_offset(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t tl, gl;
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	const char *group = bk_rmt__ext_s(q, "group", &gl);
	const struct bk_topic *t = topic ? bk_topic_find(r->bk, topic, tl) : NULL;
	int64_t ts = 0;
	bool force = false, any = false;
	struct ragg *a;

	if (group == NULL || gl == 0 || gl > META_GROUP_MAX ||
	    bk_rmt__ext_i(q, "timestamp", NULL, &ts) != 0) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "group and timestamp are required (ResetOffsetRequestHeader)");
		return;
	}
	if (wire_rem_ext_bool(q, "isForce", &force) != 0)
		force = false;
	if (t == NULL) {
		char why[META_TOPIC_MAX + 80];

		snprintf(why, sizeof(why),
			 "[reset-offset] reset offset failed, no topic in this broker. topic=%s",
			 topic ? topic : "");
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
		return;
	}
	a = agg_new(c, q);
	if (a == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	a->finish = reset_finish;
	a->ts = ts;
	a->force = force;
	memcpy(a->topic, t->name, t->name_len + 1);
	memcpy(a->group, group, gl + 1);
	for (uint32_t i = 0; i < t->write_queues && i < t->nq; i++) {
		if (agg_row(a, t, i, group, r->bk) != 0)
			a->failed = true;
		else
			any |= a->rows[a->n - 1].cons >= 0;
	}
	if (!any && !bk_rmt__group_online(r, group)) {
		char why[META_GROUP_MAX + 64];

		bk_rmt__agg_free(a);
		snprintf(why, sizeof(why), "THe consumer group <%s> not exist", group);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
		return;
	}
	agg_start(r, c, q, a, ts < 0 ? -1 : ts);
}

/* ---- VIEW_BROKER_STATS_DATA (315): BrokerStatsData ---- */

void
bk_rmt__do_stats_data(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *name = bk_rmt__ext_s(q, "statsName", NULL);
	const char *key = bk_rmt__ext_s(q, "statsKey", NULL);
	struct jbuf b;
	int err;

	jbuf_init(&b);
	err = name && key && r->ops.stats_data ? r->ops.stats_data(r->ops.arg, name, key, &b)
					       : -ENOENT;
	if (err) {
		char why[META_TOPIC_MAX + META_GROUP_MAX + 64];

		jbuf_free(&b);
		snprintf(why, sizeof(why), "The stats <%s> <%s> not exist", name ? name : "",
			 key ? key : "");
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
		return;
	}
	{
		struct rresp o = {
			.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
		size_t len;
		uint8_t *body = jbuf_take(&b, &len);

		o.body = body;
		o.body_len = (uint32_t)len;
		bk_rmt__conn_send(r, c, &o);
		free(body);
	}
}

/* ---- DELETE_TOPIC_IN_BROKER (215), DELETE_SUBSCRIPTIONGROUP (207) ---- */

static void
done_finish(struct bk_rmt *r, struct ragg *a, struct rconn *c)
{
	agg_answer(r, a, c, WIRE_RSP_SUCCESS, NULL, NULL);
}

/* One BK_ROP_OFFSET_DROP per core for @kind ('T' or 'G') + @name; answered when all ran. */
static void
drop_offsets(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, char kind,
	     const char *name)
{
	size_t len = strlen(name);
	struct ragg *a = agg_new(c, q);

	if (a == NULL) {
		bk_rmt__busy(r, c, q);
		return;
	}
	a->finish = done_finish;
	for (uint32_t core = 0; core < r->bk->ncores; core++) {
		/* one span of the core's offset table per command (a short pause each) */
		for (uint32_t from = 0; from <= r->bk->cores[core].off_mask;
		     from += BK_OFF_DROP_SPAN) {
			struct rjob *j =
				bk_rmt__job_new(r, c, q, BK_ROP_OFFSET_DROP, (uint32_t)len + 1, 16);

			if (j == NULL) {
				a->failed = true;
				break;
			}
			j->reqbuf[0] = (uint8_t)kind;
			memcpy(j->reqbuf + 1, name, len);
			j->c.req_len = (uint32_t)len + 1;
			j->c.value = from;
			if (bk_rmt__job_post(r, j, (uint16_t)core) != 0) {
				a->failed = true;
				break;
			}
			j->agg = a;
			a->pending++;
		}
	}
	if (a->pending == 0)
		agg_end(r, a);
}

void
bk_rmt__do_delete_topic(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t tl;
	const char *topic = bk_rmt__ext_s(q, "topic", &tl);
	int err;

	if (bk_rmt__slave_refuses(r, c, q))
		return;
	if (topic == NULL || !bk_topic_name_ok(topic, tl)) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the topic name is not valid");
		return;
	}
	if (bk_topic_is_system(topic)) {
		char why[META_TOPIC_MAX + 64];

		snprintf(why, sizeof(why), "The topic[%s] is conflict with system topic.", topic);
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, why);
		return;
	}
	if (r->ops.topic_delete == NULL) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "not available");
		return;
	}
	err = r->ops.topic_delete(r->ops.arg, topic);
	if (err != 0 && err != -ENOENT) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      "deleting the topic failed (see the log)");
		return;
	}
	log_info(TAG, "topic %s deleted by %s%s", topic, c->peer_s,
		 err == -ENOENT ? " (it did not exist)" : "");
	/* its consumer offsets go too (RocketMQ: cleanUnusedTopic) */
	drop_offsets(r, c, q, 'T', topic);
}

/* CLEAN_EXPIRED_CONSUMEQUEUE (306): ConsumeQueues of topics that do not exist go. */
void
bk_rmt__do_clean_queues(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	long n;

	/* a slave's queues may belong to a topic its next sync brings: only a master cleans */
	if (bk_rmt__slave_refuses(r, c, q))
		return;
	if (r->ops.clean_queues == NULL) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "not available");
		return;
	}
	n = r->ops.clean_queues(r->ops.arg);
	if (n < 0) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "cleaning failed (see the log)");
		return;
	}
	log_info(TAG, "cleanExpiredCQ by %s: %ld topics' queues deleted", c->peer_s, n);
	bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

void
bk_rmt__do_group_put(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	char why[160] = "";
	int err;

	if (bk_rmt__slave_refuses(r, c, q))
		return;
	if (r->ops.group_put == NULL) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "not available");
		return;
	}
	err = r->ops.group_put(r->ops.arg, (const char *)q->body, q->body_len, why, sizeof(why));
	if (err) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			      why[0] ? why : "not saved (see the log)");
		return;
	}
	bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

void
bk_rmt__do_delete_group(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl;
	const char *group = bk_rmt__ext_s(q, "groupName", &gl);
	bool remove = false;

	if (bk_rmt__slave_refuses(r, c, q))
		return;
	if (group == NULL || gl == 0 || gl > META_GROUP_MAX) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "groupName is missing or too long");
		return;
	}
	if (wire_rem_ext_bool(q, "removeOffset", &remove) != 0)
		remove = false;
	if (r->ops.group_delete)
		(void)r->ops.group_delete(r->ops.arg, group); /* absent: fine, as RocketMQ */
	log_info(TAG, "group %s deleted by %s%s", group, c->peer_s,
		 remove ? ", with its offsets" : "");
	if (!remove) {
		bk_rmt__reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
		return;
	}
	drop_offsets(r, c, q, 'G', group);
}
