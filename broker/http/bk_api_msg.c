// SPDX-License-Identifier: Apache-2.0
/*
 * bk_api_msg.c - /api/message: the console's message lookup, as the CLI's
 * `sprocket message query --json` and RocketMQ's QUERY_MESSAGE /
 * VIEW_MESSAGE_BY_ID find them (docs/observability.md).
 *
 *   /api/message?topic=T&key=K   messages of T indexed under the key K
 *   /api/message?id=ID           the message stored at an offset msgId
 *   /api/message?topic=T&id=ID   ... or whose client msgId (UNIQ_KEY) is ID
 *
 * Answered on the control thread like the rest of /api/: the index lookup
 * and the record copies (store_copy_phys()) are guarded reads of the store
 * that never wait for a core. Each message lists the consumer groups that
 * committed offsets on its topic, and whether theirs is past it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/bk_ctl.h"
#include "common/acl.h"
#include "common/jbuf.h"
#include "control/httpd.h"
#include "store/store.h"
#include "wire/record.h"

#define MSG_MAX 32		 /* messages one lookup answers (RocketMQ's maxNum default) */
#define MSG_BODY_MAX (64u << 10) /* body bytes shown */
#define MSG_REC_MAX (16u << 20)	 /* a record longer than this is not copied */

struct consumer {
	char group[META_GROUP_MAX + 1];
	bool consumed;
};

struct consumers {
	const struct wire_msg *m;
	struct consumer *v;
	size_t n, cap;
};

/* Groups with an offset on @m's topic; consumed: past @m on its queue. */
static int
consumer_add(void *arg, const struct bk_off *e, const struct bk_topic *t, int64_t off)
{
	struct consumers *cs = arg;
	const struct wire_msg *m = cs->m;
	size_t i;

	(void)t;
	if (e->topic_len != m->topic_len || memcmp(e->topic, m->topic, m->topic_len) != 0)
		return 0;
	for (i = 0; i < cs->n && strcmp(cs->v[i].group, e->group) != 0; i++)
		;
	if (i == cs->n) {
		if (cs->n == cs->cap) {
			size_t cap = cs->cap ? cs->cap * 2 : 8;
			struct consumer *v = realloc(cs->v, cap * sizeof(*v));

			if (v == NULL)
				return -ENOMEM;
			cs->v = v;
			cs->cap = cap;
		}
		memcpy(cs->v[i].group, e->group, sizeof(cs->v[i].group));
		cs->v[i].consumed = false;
		cs->n++;
	}
	if ((int32_t)e->qid == m->queue_id && off > m->queue_offset)
		cs->v[i].consumed = true;
	return 0;
}

static void
host(struct jbuf *b, const char *k, const struct wire_host *h)
{
	char s[64];

	wire_host_format(h, s, sizeof(s));
	jbuf_kv_str(b, k, s);
}

/* Text a browser can show: no control bytes but tab and line ends. */
static bool
printable(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') || p[i] == 0x7f)
			return false;
	return true;
}

static void
body(struct jbuf *b, const struct wire_msg *m)
{
	static const char hx[] = "0123456789abcdef";
	uint32_t n = m->body_len < MSG_BODY_MAX ? m->body_len : MSG_BODY_MAX;

	jbuf_kv_i64(b, "bodyLength", m->body_len);
	jbuf_lit(b, ",");
	jbuf_key(b, "bodyTruncated");
	jbuf_bool(b, n < m->body_len);
	jbuf_lit(b, ",");
	if (!(m->sys_flag & WIRE_SYSFLAG_COMPRESSED) && printable(m->body, n)) {
		jbuf_key(b, "body");
		httpd_json_str(b, (const char *)m->body, n);
		return;
	}
	jbuf_key(b, "bodyHex");
	jbuf_lit(b, "\"");
	if (jbuf_reserve(b, (size_t)n * 2) != 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		char two[2] = {hx[m->body[i] >> 4], hx[m->body[i] & 15]};

		jbuf_raw(b, two, 2);
	}
	jbuf_lit(b, "\"");
}

/* One message as the CLI's --json writes it, plus its consumers. */
static void
message(struct bk_ctl *x, struct jbuf *b, const struct wire_msg *m)
{
	struct consumers cs = {.m = m};
	char id[WIRE_MSGID_MAX];
	size_t pos = 0;
	struct wire_kv kv;
	bool first = true;

	wire_msgid_encode(&m->store_host, m->phys_offset, id);
	jbuf_lit(b, "{");
	jbuf_key(b, "msgId");
	jbuf_cstr(b, id);
	jbuf_lit(b, ",");
	jbuf_key(b, "topic");
	httpd_json_str(b, m->topic, m->topic_len);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "queueId", m->queue_id);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "queueOffset", m->queue_offset);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "commitLogOffset", m->phys_offset);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "bornTimestamp", m->born_ts);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "storeTimestamp", m->store_ts);
	jbuf_lit(b, ",");
	host(b, "bornHost", &m->born_host);
	jbuf_lit(b, ",");
	host(b, "storeHost", &m->store_host);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "reconsumeTimes", m->reconsume_times);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "sysFlag", m->sys_flag);
	jbuf_lit(b, ",");
	jbuf_key(b, "compressed");
	jbuf_bool(b, (m->sys_flag & WIRE_SYSFLAG_COMPRESSED) != 0);
	jbuf_lit(b, ",\"properties\":{");
	while (wire_props_next(m->props, m->props_len, &pos, &kv)) {
		if (!first)
			jbuf_lit(b, ",");
		first = false;
		httpd_json_str(b, kv.key, kv.key_len);
		jbuf_lit(b, ":");
		httpd_json_str(b, kv.val, kv.val_len);
	}
	jbuf_lit(b, "},");
	body(b, m);
	jbuf_lit(b, ",\"consumedBy\":[");
	if (bk_committed_each(x, consumer_add, &cs) != 0)
		b->err = -ENOMEM;
	for (size_t i = 0; i < cs.n; i++) {
		jbuf_lit(b, i ? ",{" : "{");
		jbuf_key(b, "group");
		httpd_json_str(b, cs.v[i].group, strlen(cs.v[i].group));
		jbuf_lit(b, ",");
		jbuf_key(b, "consumed");
		jbuf_bool(b, cs.v[i].consumed);
		jbuf_lit(b, "}");
	}
	jbuf_lit(b, "]}");
	free(cs.v);
}

static void
refuse(struct httpd_req *r, int status, const char *why)
{
	r->status = status;
	jbuf_lit(&r->body, "{\"error\":");
	jbuf_cstr(&r->body, why);
	jbuf_lit(&r->body, "}");
}

/* Add the records indexed under @topic#@key to @phys[*n..]. Return: 0, or -errno. */
static int
by_key(struct bk_ctl *x, const char *topic, const char *key, int64_t *phys, size_t *n)
{
	int64_t found[MSG_MAX];
	long k = store_query_key(x->bk.store, topic, key, 0, INT64_MAX, found, MSG_MAX - *n);

	if (k < 0)
		return (int)k;
	for (long i = 0; i < k; i++) {
		size_t j;

		for (j = 0; j < *n && phys[j] != found[i]; j++)
			;
		if (j == *n)
			phys[(*n)++] = found[i];
	}
	return 0;
}

void
bk_api_message(struct bk_ctl *x, struct httpd_req *r, const struct acl_account *acc)
{
	const char *topic = httpd_arg(r, "topic"), *key = httpd_arg(r, "key");
	const char *id = httpd_arg(r, "id");
	int64_t phys[MSG_MAX], id_phys = -1;
	size_t n = 0, cap = 64u << 10, shown = 0;
	uint8_t *rec;
	int rc = 0;

	r->ctype = "application/json";
	if (topic && !topic[0])
		topic = NULL;
	if ((!key || !key[0]) && (!id || !id[0])) {
		refuse(r, 400, "give topic and key, or id (with topic for a client's msgId)");
		return;
	}
	if (key && key[0] && topic == NULL) {
		refuse(r, 400, "a lookup by key needs the topic");
		return;
	}
	if (acc && topic && !acl_allowed(acc, topic, strlen(topic), false, ACL_SUB)) {
		x->http_auth.refused[HTTPD_AUTH_NO_PERMISSION]++;
		refuse(r, 403, "this account has no SUB permission on the topic");
		return;
	}
	if (id && id[0]) {
		struct wire_host h;

		if (wire_msgid_decode(id, strlen(id), &h, &id_phys) == 0)
			phys[n++] = id_phys;
		else
			id_phys = -1;
		if (topic)
			rc = by_key(x, topic, id, phys,
				    &n); /* a client's msgId is indexed (UNIQ_KEY) */
		if (n == 0 && rc == 0 && topic == NULL) {
			refuse(r, 400,
			       "not an offset msgId (32 hex digits); for a client's msgId "
			       "give the topic too");
			return;
		}
	}
	if (rc == 0 && key && key[0])
		rc = by_key(x, topic, key, phys, &n);
	if (rc == -EINVAL) {
		refuse(r, 400, "the topic or the key is empty or too long");
		return;
	}
	if (rc < 0) {
		refuse(r, 500, strerror(-rc));
		return;
	}
	rec = malloc(cap);
	if (rec == NULL) {
		r->body.err = -ENOMEM;
		return;
	}
	jbuf_lit(&r->body, "{\"messages\":[");
	for (size_t i = 0; i < n; i++) {
		struct wire_msg m;
		long len = store_copy_phys(x->bk.store, phys[i], rec, cap);

		if (len > (long)cap && len <= (long)MSG_REC_MAX) {
			uint8_t *big = realloc(rec, (size_t)len);

			if (big == NULL)
				continue;
			rec = big;
			cap = (size_t)len;
			len = store_copy_phys(x->bk.store, phys[i], rec, cap);
		}
		/* gone (retention), not a record's start (a wrong msgId), or damaged */
		if (len <= 0 || len > (long)cap ||
		    wire_rec_decode(rec, (size_t)len, WIRE_REC_VERIFY_CRC, &m) != len ||
		    (phys[i] == id_phys && m.phys_offset != id_phys))
			continue;
		/* a message of a topic the account may not read is left out, as if not there */
		if (acc && !bk_acl_msg_readable(acc, &m)) {
			x->http_hidden++;
			continue;
		}
		if (shown++)
			jbuf_lit(&r->body, ",");
		message(x, &r->body, &m);
	}
	jbuf_lit(&r->body, "]");
	if (shown == 0 && id && id[0] && topic == NULL)
		jbuf_lit(&r->body,
			 ",\"hint\":\"a client's msgId (UNIQ_KEY) is found with its topic\"");
	jbuf_lit(&r->body, "}");
	free(rec);
}
