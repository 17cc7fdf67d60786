// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_acl.c - RocketMQ 4.9's plain ACL on the remoting port
 * (docs/security.md): every request of a broker with aclEnable=true is
 * checked here before its family's handler sees it.
 *
 * The order is RocketMQ's (PlainPermissionManager.validate): a source in
 * globalWhiteRemoteAddresses passes; otherwise the request names an
 * AccessKey the ACL file has; a source in that account's whiteRemoteAddress
 * passes; otherwise the Signature must be the HmacSHA1 of the request
 * (wire_rem_sign(), compared in constant time); then the account needs admin
 * for admin requests and the permission on each resource the request uses,
 * as RocketMQ's PlainAccessValidator.parse lists them (SEND: the topic PUB,
 * or the group SUB for a retry topic; PULL: topic and group SUB; offsets,
 * heartbeats, SEND_BACK, consumer lists: the group SUB...). What each code
 * needs comes from one table (common/acl_door.c), shared with the NameServer
 * and the dataplane; where it is stricter than RocketMQ (offset and time
 * lookups need SUB on their topic, locks the group and its topics, a slave's
 * GET_ALL_* sync an admin account, every request adminAllowedAddrs guards an
 * admin account) docs/security.md says so. A %RETRY%g or %DLQ%g topic is
 * group g, and a SEND to one needs SUB on the topic its message carries
 * (RETRY_TOPIC). Requests answered with records (lookups by id or key,
 * END_TRANSACTION) keep the account they were checked against
 * (r->req_acc), so each record is checked again on its own topic when it is
 * found. A refusal is NO_PERMISSION (RocketMQ answers SYSTEM_ERROR) with the
 * reason, counted by reason; the secret and the signatures are never
 * logged.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "bk_rmt_share.h"
#include "common/acl.h"
#include "common/acl_door.h"
#include "common/log.h"

#define TRACE_TOPIC "RMQ_SYS_TRACE_TOPIC"
#define RES_MAX 256 /* distinct topics and groups one request may name */

struct need {
	const char *name;
	uint32_t len;
	bool group;
	uint8_t perm;
};

struct needs {
	unsigned n;
	bool overflow;
	struct need v[RES_MAX];
	json_object *owned; /* a parsed heartbeat body the names point into */
};

static void
need(struct needs *ns, const char *name, uint32_t len, bool group, uint8_t perm)
{
	for (unsigned i = 0; i < ns->n; i++)
		if (ns->v[i].len == len && ns->v[i].group == group && ns->v[i].perm == perm &&
		    memcmp(ns->v[i].name, name, len) == 0)
			return; /* named already (a lock names a topic once per queue) */
	if (ns->n >= RES_MAX) {
		ns->overflow = true;
		return;
	}
	/* "%RETRY%g" and "%DLQ%g" are group g, named as a topic or as a group (acl_allowed()) */
	ns->v[ns->n++] = (struct need){.name = name, .len = len, .group = group, .perm = perm};
}

static void
need_ext(struct needs *ns, const struct wire_rem_cmd *q, const char *key, bool group, uint8_t perm)
{
	const struct wire_kv *kv = wire_rem_ext_get(q, key);

	/* absent: RocketMQ checks "null" (and "%RETRY%null"), which no file grants */
	if (kv)
		need(ns, kv->val, kv->val_len, group, perm);
	else
		need(ns, "null", 4, group, perm);
}

/*
 * The topic of a SEND: PUB; a retry or dead-letter topic (a consumer's
 * SEND_BACK by SEND): its group SUB, and SUB on the topic the message carries
 * (RETRY_TOPIC), so an account denied a group cannot inject into its retries.
 */
static void
need_send(struct needs *ns, const struct wire_rem_cmd *q, const char *key, const char *pkey)
{
	const struct wire_kv *kv = wire_rem_ext_get(q, key);
	const struct wire_kv *props = wire_rem_ext_get(q, pkey);
	const char *rt;
	size_t rtl;

	if (kv && acl_group_topic(kv->val, kv->val_len)) {
		need(ns, kv->val, kv->val_len, true, ACL_SUB);
		if (props && wire_props_get(props->val, props->val_len, "RETRY_TOPIC", &rt, &rtl))
			need(ns, rt, (uint32_t)rtl, false, ACL_SUB);
	} else if (kv) {
		need(ns, kv->val, kv->val_len, false, ACL_PUB);
	} else {
		need(ns, "null", 4, false, ACL_PUB);
	}
}

/* LOCK/UNLOCK_BATCH_MQ: the group SUB and each queue's topic SUB. */
static void
need_lock(struct needs *ns, const struct wire_rem_cmd *q)
{
	json_object *g, *set;

	ns->owned = bk_rmt__jparse(q->body, q->body_len);
	if (!ns->owned || !json_object_object_get_ex(ns->owned, "consumerGroup", &g) ||
	    !json_object_is_type(g, json_type_string)) {
		need(ns, "null", 4, true, ACL_SUB);
		return;
	}
	need(ns, json_object_get_string(g), (uint32_t)json_object_get_string_len(g), true, ACL_SUB);
	if (!json_object_object_get_ex(ns->owned, "mqSet", &set) ||
	    !json_object_is_type(set, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(set); i++) {
		json_object *t;

		if (json_object_object_get_ex(json_object_array_get_idx(set, i), "topic", &t) &&
		    json_object_is_type(t, json_type_string))
			need(ns, json_object_get_string(t), (uint32_t)json_object_get_string_len(t),
			     false, ACL_SUB);
	}
}

/* HEART_BEAT: each consumer group SUB and each topic it subscribes to SUB. */
static void
need_heartbeat(struct needs *ns, const struct wire_rem_cmd *q)
{
	json_object *set;

	ns->owned = bk_rmt__jparse(q->body, q->body_len);
	if (!ns->owned || !json_object_object_get_ex(ns->owned, "consumerDataSet", &set) ||
	    !json_object_is_type(set, json_type_array))
		return; /* the handler refuses what it cannot read */
	for (size_t i = 0; i < json_object_array_length(set); i++) {
		json_object *cd = json_object_array_get_idx(set, i), *g, *subs;

		if (json_object_object_get_ex(cd, "groupName", &g) &&
		    json_object_is_type(g, json_type_string))
			need(ns, json_object_get_string(g), (uint32_t)json_object_get_string_len(g),
			     true, ACL_SUB);
		if (!json_object_object_get_ex(cd, "subscriptionDataSet", &subs) ||
		    !json_object_is_type(subs, json_type_array))
			continue;
		for (size_t k = 0; k < json_object_array_length(subs); k++) {
			json_object *t;

			if (json_object_object_get_ex(json_object_array_get_idx(subs, k), "topic",
						      &t) &&
			    json_object_is_type(t, json_type_string))
				need(ns, json_object_get_string(t),
				     (uint32_t)json_object_get_string_len(t), false, ACL_SUB);
		}
	}
}

static void
resources(struct needs *ns, const struct wire_rem_cmd *q)
{
	switch (q->code) {
	case WIRE_REQ_SEND_MESSAGE:
		need_send(ns, q, "topic", "properties");
		break;
	case WIRE_REQ_SEND_MESSAGE_V2:
	case WIRE_REQ_SEND_BATCH_MESSAGE:
		need_send(ns, q, "b", "i");
		break;
	case WIRE_REQ_CONSUMER_SEND_MSG_BACK:
		need_ext(ns, q, "group", true, ACL_SUB);
		break;
	case WIRE_REQ_PULL_MESSAGE:
		need_ext(ns, q, "topic", false, ACL_SUB);
		need_ext(ns, q, "consumerGroup", true, ACL_SUB);
		break;
	case WIRE_REQ_QUERY_MESSAGE:
	case WIRE_REQ_GET_MIN_OFFSET:
	case WIRE_REQ_GET_MAX_OFFSET:
	case WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP:
	case WIRE_REQ_GET_EARLIEST_MSG_STORETIME:
		need_ext(ns, q, "topic", false, ACL_SUB);
		break;
	case WIRE_REQ_LOCK_BATCH_MQ:
	case WIRE_REQ_UNLOCK_BATCH_MQ:
		need_lock(ns, q);
		break;
	case WIRE_REQ_HEART_BEAT:
		need_heartbeat(ns, q);
		break;
	case WIRE_REQ_UNREGISTER_CLIENT:
	case WIRE_REQ_GET_CONSUMER_LIST_BY_GROUP:
		need_ext(ns, q, "consumerGroup", true, ACL_SUB);
		break;
	case WIRE_REQ_UPDATE_CONSUMER_OFFSET:
	case WIRE_REQ_QUERY_CONSUMER_OFFSET:
		need_ext(ns, q, "consumerGroup", true, ACL_SUB);
		need_ext(ns, q, "topic", false, ACL_SUB);
		break;
	default:
		break;
	}
}

static const char *const reason_names[BK_ACL_REASONS] = {
	[BK_ACL_NO_KEY] = "no_access_key",  [BK_ACL_UNKNOWN_KEY] = "unknown_access_key",
	[BK_ACL_BAD_SIG] = "bad_signature", [BK_ACL_NOT_ADMIN] = "not_admin",
	[BK_ACL_NO_PERM] = "no_permission",
};

const char *
bk_acl_reason_name(unsigned reason)
{
	return reason < BK_ACL_REASONS ? reason_names[reason] : "?";
}

/* Printable for a remark: control characters and quotes become '?', cut at 64 bytes. */
static void
clean(char *out, size_t cap, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < cap && i < 64; i++)
		out[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '"') ? '?' : s[i];
	out[o] = '\0';
}

static bool
refuse(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, unsigned reason,
       const char *remark)
{
	r->acl_denied[reason]++;
	log_warn_ratelimited(TAG, "acl: %s refused request %d from %s: %s",
			     bk_acl_reason_name(reason), q->code, c->peer_s, remark);
	bk_rmt__reply(r, c, q, WIRE_RSP_NO_PERMISSION, remark);
	return true;
}

bool
bk_rmt__acl_refuses(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q,
		    const struct acl_door *door)
{
	const struct acl *acl = r->bk->acl;
	const struct wire_kv *ak, *sig;
	const struct acl_account *acc;
	struct needs ns;
	char remark[256], name[72], want[HMAC_B64_LEN + 1];
	bool out = false;

	ns.n = 0;
	ns.overflow = false;
	ns.owned = NULL;
	r->req_acc = NULL;
	if (!acl || door->cls == ACL_DOOR_OPEN)
		return false;
	if (acl_addrs_match(&acl->global, c->peer.ip))
		return false;
	ak = wire_rem_ext_get(q, "AccessKey");
	if (!ak || ak->val_len == 0)
		return refuse(r, c, q, BK_ACL_NO_KEY,
			      "No accessKey is configured (aclEnable=true: sign requests with an "
			      "accessKey and secretKey of the broker's ACL file)");
	acc = acl_find(acl, ak->val, ak->val_len);
	if (!acc) {
		clean(name, sizeof(name), ak->val, ak->val_len);
		snprintf(remark, sizeof(remark), "No acl config for %s", name);
		return refuse(r, c, q, BK_ACL_UNKNOWN_KEY, remark);
	}
	if (acl_addrs_match(&acc->white, c->peer.ip))
		return false;
	sig = wire_rem_ext_get(q, "Signature");
	wire_rem_sign(q, &acc->key, want);
	if (!sig || sig->val_len != HMAC_B64_LEN || !hmac_equal(sig->val, want, HMAC_B64_LEN)) {
		snprintf(remark, sizeof(remark), "Check signature failed for accessKey=%s",
			 acc->ak);
		return refuse(r, c, q, BK_ACL_BAD_SIG, remark);
	}
	if (door->cls == ACL_DOOR_ADMIN && !acc->admin) {
		snprintf(remark, sizeof(remark),
			 "Need admin permission for request code=%d, but accessKey=%s is not",
			 q->code, acc->ak);
		return refuse(r, c, q, BK_ACL_NOT_ADMIN, remark);
	}
	resources(&ns, q);
	/* RocketMQ lets anyone signed publish message traces */
	if (ns.n == 1 && !ns.v[0].group && ns.v[0].perm == ACL_PUB &&
	    ns.v[0].len == strlen(TRACE_TOPIC) &&
	    memcmp(ns.v[0].name, TRACE_TOPIC, ns.v[0].len) == 0)
		goto done;
	if (ns.overflow) {
		snprintf(remark, sizeof(remark),
			 "request %d names more than %d topics and groups: too many to check",
			 q->code, RES_MAX);
		out = refuse(r, c, q, BK_ACL_NO_PERM, remark);
		goto done;
	}
	for (unsigned i = 0; i < ns.n; i++) {
		const struct need *n = &ns.v[i];

		if (acl_allowed(acc, n->name, n->len, n->group, n->perm))
			continue;
		clean(name, sizeof(name), n->name, n->len);
		snprintf(remark, sizeof(remark), "No %s permission for %s %s (accessKey=%s)",
			 acl_perm_name(n->perm), n->group ? "group" : "topic", name, acc->ak);
		out = refuse(r, c, q, BK_ACL_NO_PERM, remark);
		goto done;
	}
done:
	if (!out)
		r->req_acc = acc;
	json_object_put(ns.owned);
	return out;
}

uint64_t
bk_rmt_acl_denied(const struct bk_rmt *r, unsigned reason)
{
	return r && reason < BK_ACL_REASONS ? r->acl_denied[reason] : 0;
}

uint32_t
bk_rmt__acl_keep_readable(struct bk_rmt *r, const char *ak, uint8_t *buf, uint32_t *len)
{
	const struct acl *acl = r->bk->acl;
	const struct acl_account *acc = acl ? acl_find(acl, ak, strlen(ak)) : NULL;
	uint32_t at = 0, out = 0, kept = 0;

	while (at < *len) {
		struct wire_msg m;
		long n = wire_rec_decode(buf + at, *len - at, 0, &m);

		if (n <= 0)
			break; /* a gather copies whole records: nothing after a bad one is trusted */
		if (acc && bk_acl_msg_readable(acc, &m)) {
			if (out != at)
				memmove(buf + out, buf + at, (size_t)n);
			out += (uint32_t)n;
			kept++;
		} else {
			r->acl_hidden++;
		}
		at += (uint32_t)n;
	}
	*len = out;
	return kept;
}

uint64_t
bk_rmt_acl_hidden(const struct bk_rmt *r)
{
	return r ? r->acl_hidden : 0;
}
