// SPDX-License-Identifier: Apache-2.0
/*
 * bk_acl.c - the ACL on the dataplane (aclEnable; docs/security.md), on the
 * owning core: the key a CONNECT proves (bk_acl_key(), the transport's key
 * function) and, per request of an authenticated session, RocketMQ's
 * permissions on the topic and group it names: SEND and SEND_BATCH the
 * topic PUB (a retry topic: its group SUB), PULL the topic and the group
 * SUB, QUERY/UPDATE_OFFSET the group and the topic SUB, SEND_BACK the group
 * SUB, REPL (a slave's replication) an admin account, and (stricter than
 * RocketMQ) the offset and time lookups the topic SUB. The classes are the
 * dataplane rows of the permission table (common/acl_door.c); an op with no
 * row is refused.
 *
 * Lock-free: the accounts are read under QSBR (bk->acl, published by
 * bk_acl_ctl.c); a session keeps the account it found with the table it
 * found it in (dp_xreq.auth_cache), so a request costs a pointer compare and
 * a binary search over the account's own entries, and a reload is picked up
 * by the next request. Requests from the remoting port were checked on the
 * control thread (bk_rmt_acl.c) and are not checked again here.
 */
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "bk_priv.h"
#include "common/acl.h"
#include "common/acl_door.h"
#include "wire/dp.h"
#include "wire/record.h"

#define TRACE_TOPIC "RMQ_SYS_TRACE_TOPIC"

const struct hmac_sha1 *
bk_acl_key(void *arg, const char *ak, size_t len)
{
	struct bk *bk = arg;
	/* pairs with rcu_assign_pointer() in bk_acl_ctl.c's publish() */
	const struct acl *acl = rcu_dereference(bk->acl);
	const struct acl_account *acc = acl ? acl_find(acl, ak, len) : NULL;

	return acc ? &acc->key : NULL;
}

static const struct acl_account *
account(struct bk_core *c, const struct dp_xreq *req)
{
	const struct acl *acl = rcu_dereference(c->bk->acl);
	const struct acl_account *acc;

	if (!acl || !req->ak)
		return NULL;
	if (req->auth_cache[0] == acl)
		return req->auth_cache[1];
	acc = acl_find(acl, req->ak, req->ak_len);
	req->auth_cache[0] = acl;
	req->auth_cache[1] = acc;
	return acc;
}

bool
bk_acl_msg_readable(const struct acl_account *acc, const struct wire_msg *m)
{
	const char *t;
	size_t tl;

	if (!acl_allowed(acc, m->topic, m->topic_len, false, ACL_SUB))
		return false;
	if (wire_props_get(m->props, m->props_len, "REAL_TOPIC", &t, &tl) &&
	    !acl_allowed(acc, t, tl, false, ACL_SUB))
		return false;
	if (wire_props_get(m->props, m->props_len, "RETRY_TOPIC", &t, &tl) &&
	    !acl_allowed(acc, t, tl, false, ACL_SUB))
		return false;
	return true;
}

bool
bk_acl_may_read(struct bk_core *c, const struct dp_xreq *req, const struct wire_msg *m)
{
	const struct acl_account *acc;

	if (!rcu_dereference(c->bk->acl) || !req->ak)
		return true;
	acc = account(c, req);
	return acc && bk_acl_msg_readable(acc, m);
}

bool
bk_acl_refuses(struct bk_core *c, const struct dp_xreq *req)
{
	const struct acl_door *door = acl_door_dataplane(req->op);
	const struct acl_account *acc;
	bool ok = true;

	if (door == NULL) {
		/* no row in the permission table: nobody decided who may send it */
		c->st.acl_denied[BK_ACL_NO_PERM]++;
		goto refuse;
	}
	if (door->cls == ACL_DOOR_OPEN)
		return false;
	acc = account(c, req);
	if (!acc) {
		c->st.acl_denied[BK_ACL_UNKNOWN_KEY]++;
		goto refuse;
	}
	switch (req->op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH: {
		struct wire_dp_send_req r;

		if (wire_dp_send_req_decode(req->op, req->msg, req->len, &r) != 0)
			return false; /* the handler answers BAD_REQUEST */
		if (acl_group_topic(r.topic, r.topic_len)) {
			const char *rt;
			size_t rtl;

			/* its group SUB, and SUB on the topic the message carries */
			ok = acl_allowed(acc, r.topic, r.topic_len, false, ACL_SUB) &&
			     (!wire_props_get(r.props, r.props_len, "RETRY_TOPIC", &rt, &rtl) ||
			      acl_allowed(acc, rt, rtl, false, ACL_SUB));
		} else
			ok = (r.topic_len == strlen(TRACE_TOPIC) &&
			      memcmp(r.topic, TRACE_TOPIC, r.topic_len) == 0) ||
			     acl_allowed(acc, r.topic, r.topic_len, false, ACL_PUB);
		break;
	}
	case WIRE_DP_OP_PULL: {
		struct wire_dp_pull_req r;

		if (wire_dp_pull_req_decode(req->msg, req->len, &r) != 0)
			return false;
		ok = acl_allowed(acc, r.topic, r.topic_len, false, ACL_SUB) &&
		     (!r.group_len || acl_allowed(acc, r.group, r.group_len, true, ACL_SUB));
		break;
	}
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET:
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET: {
		struct wire_dp_offset_req r;

		if (wire_dp_offset_req_decode(req->op, req->msg, req->len, &r) != 0)
			return false;
		ok = acl_allowed(acc, r.topic, r.topic_len, false, ACL_SUB) &&
		     (door->cls == ACL_DOOR_TOPIC_SUB ||
		      acl_allowed(acc, r.group, r.group_len, true, ACL_SUB));
		break;
	}
	case WIRE_DP_OP_SEND_BACK: {
		struct wire_dp_send_back_req r;

		if (wire_dp_send_back_req_decode(req->msg, req->len, &r) != 0)
			return false;
		ok = acl_allowed(acc, r.group, r.group_len, true, ACL_SUB);
		break;
	}
	case WIRE_DP_OP_REPL:
		ok = acc->admin;
		if (!ok) {
			c->st.acl_denied[BK_ACL_NOT_ADMIN]++;
			goto refuse;
		}
		break;
	default:
		break;
	}
	if (ok)
		return false;
	c->st.acl_denied[BK_ACL_NO_PERM]++;
refuse:
	(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, WIRE_DP_ST_NO_PERMISSION, 0);
	return true;
}
