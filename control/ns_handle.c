// SPDX-License-Identifier: Apache-2.0
/*
 * ns_handle.c - the NameServer's request handlers: one frame in, one
 * response frame out (docs/rocketmq-protocol.md §3).
 *
 * Requests split by what they touch. Lookups (GET_ROUTEINFO_BY_TOPIC,
 * GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_KV_CONFIG)
 * and unknown codes run on the io thread under urcu_memb_read_lock() and
 * never block. Everything that changes state (REGISTER/UNREGISTER_BROKER,
 * WIPE_WRITE_PERM_OF_BROKER, QUERY_DATA_VERSION, which refreshes a heartbeat,
 * and PUT/DELETE_KV_CONFIG) answers NS_HANDLE_WRITER on the reader role and
 * runs on the writer thread, one at a time.
 *
 * Errors: a frame that does not decode is an error return (the server closes
 * that connection, like RocketMQ's decoder); a request that decodes but is
 * wrong gets an error response with a remark and the connection stays.
 * Responses use the request's serialize type, echo its opaque, and carry an
 * extFields object (Java clients need one).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-memb.h>

#include "common/acl_door.h"
#include "common/cidr.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/crc32.h"
#include "common/err.h"
#include "common/log.h"
#include "control/ns.h"
#include "ns_priv.h"
#include "store/io.h"
#include "wire/remoting.h"

#define NS_REMARK_MAX 512
#define NS_ORDER_NS "ORDER_TOPIC_CONFIG"
#define NS_SCRATCH_KEEP (1u << 20) /* larger decode scratch shrinks on the next small request */

/* A response being built. */
struct ns_reply {
	struct wire_rem_cmd cmd;
	char remark[NS_REMARK_MAX];
	char ext_val[2][ROUTE_ADDR_MAX + 1]; /* storage for extField values */
	uint8_t *body;			     /* malloc'd */
	size_t body_len;
};

int
ns_state_create(const struct ns_conf *conf, struct ns_state **out)
{
	struct ns_state *st = calloc(1, sizeof(*st));
	int rc;

	if (st == NULL)
		return -ENOMEM;
	st->order_msg = conf->order_msg;
	st->admin = conf->admin;
	st->inflate_max = conf->inflate_max;
	st->cfg = conf->cfg;
	st->keys = conf->keys;
	st->n_keys = conf->n_keys;
	if (conf->kv_path != NULL && conf->kv_path[0] != '\0') {
		char dir[PATH_MAX];

		if (strlen(conf->kv_path) >= sizeof(dir)) {
			rc = -ENAMETOOLONG;
			goto err_free;
		}
		snprintf(dir, sizeof(dir), "%s", conf->kv_path);
		if ((rc = store_mkdirs(dirname(dir))) != 0) {
			log_err(NS_TAG, "creating the data dir of %s failed: %s", conf->kv_path,
				err_str(rc));
			goto err_free;
		}
	}
	if ((rc = ns__acl_init(&st->acl, conf->acl_enable ? conf->acl_path : NULL,
			       !conf->acl_enable && conf->protected_mode)) != 0)
		goto err_free;
	if ((rc = route_db_create(&st->db)) != 0)
		goto err_free;
	if ((rc = ns__kv_create(conf->kv_path != NULL ? conf->kv_path : "", &st->kv)) != 0)
		goto err_free;
	*out = st;
	return 0;

err_free:
	ns_state_destroy(st);
	return rc;
}

void
ns_state_destroy(struct ns_state *st)
{
	if (st == NULL)
		return;
	{
		/* what was refused, by reason (docs/security.md, docs/isolation.md) */
		char acl[256];
		size_t o = 0;

		acl[0] = '\0';
		for (unsigned i = 0; i < NS_ACL_REASONS && o < sizeof(acl); i++)
			o += (size_t)snprintf(acl + o, sizeof(acl) - o, "%s%s %" PRIu64,
					      i ? ", " : "", ns_acl_reason_name(i),
					      ns_acl_denied(st, i));
		log_info(NS_TAG,
			 "refused: %s; compressed registrations past maxInflatedBodySize %" PRIu64,
			 acl, ns_inflate_refused(st));
	}
	route_db_destroy(st->db);
	ns__kv_destroy(st->kv);
	ns__acl_fini(&st->acl);
	for (int i = 0; i < 2; i++)
		free(st->role[i].scratch);
	free(st);
}

uint32_t
ns_live_brokers(const struct ns_state *st)
{
	return route_db_live_count(st->db);
}

static void SP_PRINTF(3, 4) reply_set(struct ns_reply *r, int32_t code, const char *fmt, ...)
{
	va_list ap;
	int n;

	r->cmd.code = code;
	if (fmt == NULL)
		return;
	va_start(ap, fmt);
	n = vsnprintf(r->remark, sizeof(r->remark), fmt, ap);
	va_end(ap);
	r->cmd.remark = r->remark;
	r->cmd.remark_len = (uint32_t)SP_MIN((size_t)SP_MAX(n, 0), sizeof(r->remark) - 1);
}

/* Return: 0 and the encoded frame, -ENOMEM, or an encoder error. */
static int
reply_encode(const struct wire_rem_cmd *req, struct ns_reply *r, uint8_t **out, size_t *out_len)
{
	struct wire_rem_cmd *c = &r->cmd;
	size_t cap = 1024 + (size_t)c->remark_len * 6 + r->body_len;
	uint8_t *buf;
	int rc;

	c->opaque = req->opaque;
	c->flag = WIRE_REM_FLAG_RESPONSE;
	c->version = WIRE_REM_VERSION_V4_9_8;
	c->language = WIRE_LANG_JAVA;
	c->serialize = req->serialize;
	c->body = r->body;
	c->body_len = (uint32_t)r->body_len;
	for (unsigned i = 0; i < c->n_ext; i++)
		cap += ((size_t)c->ext[i].key_len + c->ext[i].val_len) * 6 + 8;
	buf = malloc(cap);
	if (buf == NULL)
		return -ENOMEM;
	rc = wire_rem_encode(c, buf, cap, out_len);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/* A NUL-free extField as a C string (the decoder NUL-terminates). Return: 0, -ENOENT, -EINVAL. */
static int
ext_str(const struct wire_rem_cmd *req, const char *key, size_t max, const char **s)
{
	const struct wire_kv *kv = wire_rem_ext_get(req, key);

	if (kv == NULL || kv->val_len == 0)
		return -ENOENT;
	if (kv->val_len > max || memchr(kv->val, '\0', kv->val_len) != NULL)
		return -EINVAL;
	*s = kv->val;
	return 0;
}

static bool
mac_parse(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	int end = 0;

	if (strlen(s) != 17 ||
	    sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &end) != 6 ||
	    end != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		if (s[i * 3] == ' ' || s[i * 3] == '+' || s[i * 3] == '-')
			return false;
		mac[i] = (uint8_t)v[i];
	}
	return true;
}

/* Return: 0 (dp->present false when the broker has no dataplane), -EINVAL. */
static int
dp_parse(const struct wire_rem_cmd *req, struct route_dp *dp, const char **why)
{
	const char *ip = NULL;
	const char *mac = NULL;
	int64_t port = 0;
	int64_t cores = 0;
	struct in_addr a;
	int n = 0;

	memset(dp, 0, sizeof(*dp));
	n += ext_str(req, "dataplaneIp", 15, &ip) != -ENOENT;
	n += ext_str(req, "dataplaneMac", 17, &mac) != -ENOENT;
	n += wire_rem_ext_i64(req, "dataplanePort", &port) != -ENOENT;
	n += wire_rem_ext_i64(req, "dataplaneCores", &cores) != -ENOENT;
	if (n == 0)
		return 0;
	*why = "dataplaneIp, dataplaneMac, dataplanePort and dataplaneCores go together";
	if (n != 4 || ip == NULL || mac == NULL)
		return -EINVAL;
	*why = "bad dataplaneIp (dotted IPv4)";
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	*why = "bad dataplaneMac (xx:xx:xx:xx:xx:xx)";
	if (!mac_parse(mac, dp->mac))
		return -EINVAL;
	*why = "bad dataplanePort or dataplaneCores";
	if (wire_rem_ext_i64(req, "dataplanePort", &port) != 0 ||
	    wire_rem_ext_i64(req, "dataplaneCores", &cores) != 0 || port < 1 || cores < 1 ||
	    cores > ROUTE_CORES_MAX || port + cores - 1 > 65535)
		return -EINVAL;
	inet_ntop(AF_INET, &a, dp->ip, sizeof(dp->ip));
	dp->port = (uint16_t)port;
	dp->cores = (uint16_t)cores;
	dp->present = true;
	return 0;
}

static int
h_register(struct ns_state *st, uint64_t conn, uint64_t now_ms, const struct wire_rem_cmd *req,
	   struct ns_reply *r)
{
	struct route_reg reg = {.conn = conn, .ha_addr = ""};
	const struct wire_kv *delta = wire_rem_ext_get(req, WIRE_EXT_DELTA_BASE);
	struct route_reg_out out;
	struct route_dv base;
	const char *why = NULL;
	bool compressed = false;
	bool wanted;
	uint32_t skipped = 0;
	uint32_t ntopics;
	uint32_t ndeleted = 0;
	int64_t crc;
	int rc;

	if (ext_str(req, "brokerName", ROUTE_NAME_MAX, &reg.bname) != 0 ||
	    ext_str(req, "brokerAddr", ROUTE_ADDR_MAX, &reg.addr) != 0 ||
	    ext_str(req, "clusterName", ROUTE_NAME_MAX, &reg.cluster) != 0 ||
	    wire_rem_ext_i64(req, "brokerId", &reg.id) != 0 || reg.id < 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR,
			  "brokerName, brokerAddr, clusterName (at most %d bytes) and brokerId "
			  "(>= 0) are required",
			  ROUTE_NAME_MAX);
		return 0;
	}
	rc = ext_str(req, "haServerAddr", ROUTE_ADDR_MAX, &reg.ha_addr);
	if (rc == -EINVAL) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "bad haServerAddr");
		return 0;
	}
	if (rc == -ENOENT)
		reg.ha_addr = "";
	rc = wire_rem_ext_bool(req, "compressed", &compressed);
	if (rc == -EINVAL) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "bad compressed flag");
		return 0;
	}
	rc = wire_rem_ext_i64(req, "bodyCrc32", &crc);
	if (rc == -EINVAL ||
	    (rc == 0 && crc != 0 && crc != (int64_t)crc32_body(req->body, req->body_len))) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "crc32 not match");
		return 0;
	}
	{
		int64_t ep = 0;

		rc = wire_rem_ext_i64(req, "sprocketEpoch", &ep);
		if (rc == -EINVAL || ep < 0) {
			reply_set(r, WIRE_RSP_SYSTEM_ERROR, "bad sprocketEpoch");
			return 0;
		}
		reg.epoch = (uint64_t)ep;
	}
	if (dp_parse(req, &reg.dp, &why) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "%s", why);
		return 0;
	}
	if (ns__body_dv(req->body, req->body_len, compressed, &reg.dv) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "malformed register body");
		return 0;
	}
	if (delta != NULL) {
		if (ns__dv_parse((const uint8_t *)delta->val, delta->val_len, &base) != 0) {
			reply_set(r, WIRE_RSP_SYSTEM_ERROR,
				  "bad " WIRE_EXT_DELTA_BASE " (a DataVersion object)");
			return 0;
		}
		reg.base = &base;
	}
	wanted = route_db_wants_topics(st->db, reg.addr, reg.id, &reg.dv);
	if (wanted) {
		rc = ns__body_topics(req->body, req->body_len, compressed,
				     reg.dp.present ? reg.dp.cores : 0, st->inflate_max,
				     &reg.topics, reg.base ? &reg.deleted : NULL, &skipped);
		if (rc == -ENOMEM)
			return rc;
		if (rc == -EFBIG) {
			atomic_add_relaxed(&st->inflate_refused, 1);
			log_warn_ratelimited(NS_TAG,
					     "REGISTER_BROKER of %s at %s refused: its %u-byte "
					     "compressed body inflates past its limit",
					     reg.bname, reg.addr, req->body_len);
			reply_set(r, WIRE_RSP_SYSTEM_ERROR,
				  "compressed register body inflates past %zu bytes "
				  "(maxInflatedBodySize) or %u times its size",
				  st->inflate_max ? st->inflate_max : (size_t)NS_INFLATE_MAX,
				  NS_INFLATE_RATIO);
			return 0;
		}
		if (rc != 0) {
			reply_set(r, WIRE_RSP_SYSTEM_ERROR, "malformed register body: %s",
				  err_str(rc));
			return 0;
		}
		if (skipped > 0)
			log_warn_ratelimited(
				NS_TAG,
				"broker %s (%s): %u topics with a bad name or value skipped",
				reg.bname, reg.addr, skipped);
	}
	/* counted before route_db_register() takes the sets */
	ntopics = wanted ? route_tset_count(reg.topics) : 0;
	if (reg.deleted != NULL)
		ndeleted = route_tset_count(reg.deleted);
	rc = route_db_register(st->db, &reg, now_ms, &out);
	if (rc == -ENOMEM)
		return rc;
	if (rc == -ESTALE) {
		/* the broker registers its whole set next (breg.c) */
		reply_set(r, WIRE_RSP_SYSTEM_ERROR,
			  WIRE_DELTA_STALE " %" PRId64 "/%" PRId64 " for %s at %s; register the "
					   "whole topic set",
			  base.timestamp, base.counter, reg.bname, reg.addr);
		return 0;
	}
	if (rc == 0 && out.replaced[0] != '\0')
		log_warn(NS_TAG,
			 "broker %s id 0: %s (master of epoch %" PRIu64 ") replaced by %s, "
			 "master of epoch %" PRIu64,
			 reg.bname, out.replaced, out.replaced_epoch, reg.addr, reg.epoch);
	if (rc == -EEXIST) {
		log_warn_ratelimited(NS_TAG,
				     "refused broker %s id %" PRId64
				     " at %s: %s already holds that "
				     "brokerName and brokerId (already registered)",
				     reg.bname, reg.id, reg.addr, out.holder);
		reply_set(r, WIRE_RSP_SYSTEM_ERROR,
			  "brokerName %s brokerId %" PRId64 " is already registered from %s; "
			  "stop that broker or use another brokerId",
			  reg.bname, reg.id, out.holder);
		return 0;
	}
	if (rc != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "register %s failed: %s", reg.bname,
			  err_str(rc));
		return 0;
	}
	/* said once it holds: a refused registration logs its refusal only */
	if (wanted && reg.base != NULL)
		log_info(NS_TAG,
			 "broker %s id %" PRId64
			 " at %s (cluster %s) registered a delta: %u topics "
			 "added or changed, %u removed, data version %" PRId64 "/%" PRId64,
			 reg.bname, reg.id, reg.addr, reg.cluster, ntopics, ndeleted,
			 reg.dv.timestamp, reg.dv.counter);
	else if (wanted)
		log_info(NS_TAG,
			 "broker %s id %" PRId64
			 " at %s (cluster %s) registered %u topics, data version %" PRId64
			 "/%" PRId64,
			 reg.bname, reg.id, reg.addr, reg.cluster, ntopics, reg.dv.timestamp,
			 reg.dv.counter);
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	if ((rc = wire_rem_ext_add(&r->cmd, WIRE_EXT_DELTA, "true")) != 0)
		return rc;
	if (out.master_addr[0] != '\0') {
		/* route_reg_out is on this stack frame: copy into the reply. */
		snprintf(r->ext_val[0], sizeof(r->ext_val[0]), "%s", out.master_ha);
		snprintf(r->ext_val[1], sizeof(r->ext_val[1]), "%s", out.master_addr);
		if ((rc = wire_rem_ext_add(&r->cmd, "haServerAddr", r->ext_val[0])) != 0 ||
		    (rc = wire_rem_ext_add(&r->cmd, "masterAddr", r->ext_val[1])) != 0)
			return rc;
	}
	/* The body is the ORDER_TOPIC_CONFIG namespace, as RocketMQ returns it. */
	rc = ns__kv_list_json(st->kv, NS_ORDER_NS, &r->body, &r->body_len);
	return rc == -ENOENT ? 0 : rc;
}

static int
h_unregister(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	const char *bname;
	const char *addr;
	int64_t id;
	int rc;

	if (ext_str(req, "brokerName", ROUTE_NAME_MAX, &bname) != 0 ||
	    ext_str(req, "brokerAddr", ROUTE_ADDR_MAX, &addr) != 0 ||
	    wire_rem_ext_i64(req, "brokerId", &id) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR,
			  "brokerName, brokerAddr and brokerId are required");
		return 0;
	}
	rc = route_db_unregister(st->db, bname, addr, id);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0)
		log_info(NS_TAG, "broker %s id %" PRId64 " at %s unregistered", bname, id, addr);
	/* Unknown brokers unregister successfully, as in RocketMQ. */
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return 0;
}

/* WIPE_WRITE_PERM_OF_BROKER (@add false) and ADD_WRITE_PERM_OF_BROKER: the count of topics. */
static int
h_write_perm(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r, bool add)
{
	const char *bname;
	uint32_t count = 0;
	int rc;

	if (ext_str(req, "brokerName", ROUTE_NAME_MAX, &bname) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "brokerName is required");
		return 0;
	}
	rc = route_db_write_perm(st->db, bname, add, &count);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0)
		log_info(NS_TAG, "write permission of broker %s %s (%u topics)", bname,
			 add ? "restored" : "wiped", count);
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	snprintf(r->ext_val[0], sizeof(r->ext_val[0]), "%u", count);
	return wire_rem_ext_add(&r->cmd, add ? "addTopicCount" : "wipeTopicCount", r->ext_val[0]);
}

static int
dv_json(const struct route_dv *dv, uint8_t **out, size_t *len)
{
	char tmp[80];
	int n = snprintf(tmp, sizeof(tmp), "{\"counter\":%" PRId64 ",\"timestamp\":%" PRId64 "}",
			 dv->counter, dv->timestamp);

	*out = malloc((size_t)n);
	if (*out == NULL)
		return -ENOMEM;
	memcpy(*out, tmp, (size_t)n);
	*len = (size_t)n;
	return 0;
}

static int
h_query_dv(struct ns_state *st, uint64_t now_ms, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	struct route_dv dv = {0};
	struct route_dv stored;
	const char *addr;
	bool have;
	bool changed;

	if (ext_str(req, "brokerAddr", ROUTE_ADDR_MAX, &addr) != 0 ||
	    ns__dv_parse(req->body, req->body_len, &dv) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR,
			  "brokerAddr and a DataVersion body are required");
		return 0;
	}
	changed = route_db_query_dv(st->db, addr, &dv, now_ms, &stored, &have);
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	if (wire_rem_ext_add(&r->cmd, "changed", changed ? "true" : "false") != 0)
		return -E2BIG;
	return have ? dv_json(&stored, &r->body, &r->body_len) : 0;
}

static int
h_kv_write(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	const struct wire_kv *ns = wire_rem_ext_get(req, "namespace");
	const struct wire_kv *key = wire_rem_ext_get(req, "key");
	const struct wire_kv *val = wire_rem_ext_get(req, "value");
	int rc;

	if (ns == NULL || key == NULL || (req->code == WIRE_REQ_PUT_KV_CONFIG && val == NULL)) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "namespace, key%s are required",
			  req->code == WIRE_REQ_PUT_KV_CONFIG ? " and value" : "");
		return 0;
	}
	if (req->code == WIRE_REQ_PUT_KV_CONFIG)
		rc = ns__kv_put(st->kv, ns->val, ns->val_len, key->val, key->val_len, val->val,
				val->val_len);
	else
		rc = ns__kv_delete(st->kv, ns->val, ns->val_len, key->val, key->val_len);
	if (rc == -ENOMEM)
		return rc;
	if (rc == -EINVAL)
		reply_set(r, WIRE_RSP_SYSTEM_ERROR,
			  "namespace and key must be 1..%d bytes and value at most %d bytes of "
			  "UTF-8 without NUL",
			  NS_KV_FIELD_MAX, NS_KV_VALUE_MAX);
	else if (rc == -ENOSPC)
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "kv config full (%d entries)",
			  NS_KV_ENTRIES_MAX);
	else if (rc != 0 && rc != -ENOENT)
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "kv config not persisted: %s", err_str(rc));
	else
		reply_set(r, WIRE_RSP_SUCCESS, NULL); /* deleting an absent key succeeds */
	return 0;
}

/* Reader role below: inside urcu_memb_read_lock(), or on the writer. */

static int
h_kv_get(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	const struct wire_kv *ns = wire_rem_ext_get(req, "namespace");
	const struct wire_kv *key = wire_rem_ext_get(req, "key");
	const char *val;
	size_t len = 0;

	if (ns == NULL || key == NULL) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "namespace and key are required");
		return 0;
	}
	val = ns__kv_get(st->kv, ns->val, ns->val_len, key->val, key->val_len, &len);
	if (val == NULL) {
		reply_set(r, WIRE_RSP_QUERY_NOT_FOUND, "No config item, Namespace: %.*s Key: %.*s",
			  (int)SP_MIN(ns->val_len, 256u), ns->val, (int)SP_MIN(key->val_len, 256u),
			  key->val);
		return 0;
	}
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	/* Points into the KV snapshot: valid until the read section ends, after encoding. */
	r->cmd.ext[r->cmd.n_ext++] = (struct wire_kv){
		.key = "value", .key_len = 5, .val = val, .val_len = (uint32_t)len};
	return 0;
}

static int
h_route(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	const struct wire_kv *topic = wire_rem_ext_get(req, "topic");
	const char *order = NULL;
	size_t len;
	int rc;

	if (topic == NULL) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "topic is required");
		return 0;
	}
	if (st->order_msg && topic->val_len <= ROUTE_TOPIC_MAX)
		order = ns__kv_get(st->kv, NS_ORDER_NS, strlen(NS_ORDER_NS), topic->val,
				   topic->val_len, &len);
	rc = topic->val_len > ROUTE_TOPIC_MAX
		     ? -ENOENT
		     : route_json_topic(route_db_current(st->db), topic->val, topic->val_len, order,
					&r->body, &r->body_len);
	if (rc == -ENOENT) {
		reply_set(r, WIRE_RSP_TOPIC_NOT_EXIST,
			  "No topic route info in name server for the topic: %.*s",
			  (int)SP_MIN(topic->val_len, 256u), topic->val);
		return 0;
	}
	if (rc != 0)
		return rc;
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return 0;
}

static int
h_cluster(struct ns_state *st, struct ns_reply *r)
{
	int rc = route_json_cluster(route_db_current(st->db), &r->body, &r->body_len);

	if (rc == 0)
		reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return rc;
}

static int
h_topic_list(struct ns_state *st, struct ns_reply *r)
{
	int rc = route_json_topic_list(route_db_current(st->db), &r->body, &r->body_len);

	if (rc == 0)
		reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return rc;
}

/* ---- admin requests (mqadmin, the sprocket CLI) ---- */

static int
h_delete_topic(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	const char *topic, *cluster = NULL;
	uint32_t count = 0;
	int rc;

	if (ext_str(req, "topic", ROUTE_TOPIC_MAX, &topic) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "topic is required");
		return 0;
	}
	/* RocketMQ 4.9.4 on: only that cluster's brokers lose it */
	if (ext_str(req, "clusterName", ROUTE_NAME_MAX, &cluster) != 0)
		cluster = NULL;
	rc = route_db_delete_topic(st->db, topic, cluster, &count);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0)
		log_info(NS_TAG, "topic %s deleted from %u broker name(s)", topic, count);
	/* an unknown topic deletes successfully, as in RocketMQ */
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return 0;
}

static int
h_cluster_topics(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	const char *cluster;
	int rc;

	if (ext_str(req, "cluster", ROUTE_NAME_MAX, &cluster) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "cluster is required");
		return 0;
	}
	rc = route_json_cluster_topics(route_db_current(st->db), cluster, &r->body, &r->body_len);
	if (rc == 0)
		reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return rc;
}

static int
h_system_topics(struct ns_state *st, struct ns_reply *r)
{
	int rc = route_json_system_topics(route_db_current(st->db), &r->body, &r->body_len);

	if (rc == 0)
		reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return rc;
}

static int
h_config_get(struct ns_state *st, struct ns_reply *r)
{
	char *text;
	size_t len;
	int rc;

	if (st->cfg == NULL) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "no configuration here");
		return 0;
	}
	rc = cfg_to_text(st->cfg, &text, &len);
	if (rc != 0)
		return rc;
	/* the live log level (UPDATE_NAMESRV_CONFIG may have changed it) */
	{
		const char *now = log_level_name(
			(enum log_level)atomic_load_explicit(&log_level_cur, memory_order_relaxed));
		char *at = strstr(text, "logLevel=");

		if (at != NULL && (at == text || at[-1] == '\n')) {
			char *eol = strchr(at, '\n');
			size_t tail = eol ? strlen(eol) : 0;
			size_t nl = (size_t)(at - text) + 9 + strlen(now) + tail;
			char *n = malloc(nl + 1);

			if (n == NULL) {
				free(text);
				return -ENOMEM;
			}
			memcpy(n, text, (size_t)(at - text) + 9);
			memcpy(n + (at - text) + 9, now, strlen(now));
			memcpy(n + (at - text) + 9 + strlen(now), eol ? eol : "", tail + 1);
			free(text);
			text = n;
			len = nl;
		}
	}
	r->body = (uint8_t *)text;
	r->body_len = len;
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return 0;
}

/* Only logLevel changes at run time; every other key is refused by name (no paths, no ports). */
static int
h_config_update(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	struct cfg *n = NULL;
	struct cfg_err ce = {{0}};
	bool any = false;

	if (st->keys == NULL || cfg_create(st->keys, st->n_keys, &n, &ce) != 0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "no configuration here");
		return 0;
	}
	if (cfg_parse_buf(n, "the request body", (const char *)req->body, req->body_len, &ce) !=
	    0) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "%s", ce.msg);
		cfg_destroy(n);
		return 0;
	}
	for (size_t i = 0; i < st->n_keys; i++) {
		if (!cfg_is_set(n, st->keys[i].name))
			continue;
		if (strcmp(st->keys[i].name, "logLevel") != 0) {
			reply_set(r, WIRE_RSP_NO_PERMISSION,
				  "%s cannot be changed while the NameServer runs (only logLevel "
				  "can); set it in its properties and restart",
				  st->keys[i].name);
			cfg_destroy(n);
			return 0;
		}
		any = true;
	}
	if (!any) {
		reply_set(r, WIRE_RSP_SYSTEM_ERROR, "the body names no key (key=value lines)");
		cfg_destroy(n);
		return 0;
	}
	{
		enum log_level lv;

		if (log_level_parse(cfg_get_str(n, "logLevel"), &lv) == 0) {
			log_set_level(lv);
			log_info(NS_TAG, "logLevel %s (UPDATE_NAMESRV_CONFIG)", log_level_name(lv));
		}
	}
	cfg_destroy(n);
	reply_set(r, WIRE_RSP_SUCCESS, NULL);
	return 0;
}

/* Who may send each code, and which change state (the writer's): common/acl_door.c. */
static bool
is_write_code(int32_t code)
{
	const struct acl_door *d = acl_door_namesrv(code);

	return d && (d->flags & ACL_DOOR_WRITE);
}

const char *const ns__req_names[NS_REQ_KINDS] = {
	[NS_REQ_REGISTER_BROKER] = "REGISTER_BROKER",
	[NS_REQ_UNREGISTER_BROKER] = "UNREGISTER_BROKER",
	[NS_REQ_GET_ROUTEINFO_BY_TOPIC] = "GET_ROUTEINFO_BY_TOPIC",
	[NS_REQ_GET_BROKER_CLUSTER_INFO] = "GET_BROKER_CLUSTER_INFO",
	[NS_REQ_QUERY_DATA_VERSION] = "QUERY_DATA_VERSION",
	[NS_REQ_GET_ALL_TOPIC_LIST] = "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	[NS_REQ_GET_TOPICS_BY_CLUSTER] = "GET_TOPICS_BY_CLUSTER",
	[NS_REQ_GET_SYSTEM_TOPIC_LIST] = "GET_SYSTEM_TOPIC_LIST_FROM_NS",
	[NS_REQ_KV] = "KV_CONFIG",
	[NS_REQ_WRITE_PERM] = "WRITE_PERM_OF_BROKER",
	[NS_REQ_DELETE_TOPIC] = "DELETE_TOPIC_IN_NAMESRV",
	[NS_REQ_CONFIG] = "NAMESRV_CONFIG",
	[NS_REQ_OTHER] = "other",
};

static enum ns_req_kind
req_kind(int32_t code)
{
	switch (code) {
	case WIRE_REQ_REGISTER_BROKER:
		return NS_REQ_REGISTER_BROKER;
	case WIRE_REQ_UNREGISTER_BROKER:
		return NS_REQ_UNREGISTER_BROKER;
	case WIRE_REQ_GET_ROUTEINFO_BY_TOPIC:
		return NS_REQ_GET_ROUTEINFO_BY_TOPIC;
	case WIRE_REQ_GET_BROKER_CLUSTER_INFO:
		return NS_REQ_GET_BROKER_CLUSTER_INFO;
	case WIRE_REQ_QUERY_DATA_VERSION:
		return NS_REQ_QUERY_DATA_VERSION;
	case WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
		return NS_REQ_GET_ALL_TOPIC_LIST;
	case WIRE_REQ_GET_TOPICS_BY_CLUSTER:
		return NS_REQ_GET_TOPICS_BY_CLUSTER;
	case WIRE_REQ_GET_SYSTEM_TOPIC_LIST_FROM_NS:
		return NS_REQ_GET_SYSTEM_TOPIC_LIST;
	case WIRE_REQ_PUT_KV_CONFIG:
	case WIRE_REQ_GET_KV_CONFIG:
	case WIRE_REQ_DELETE_KV_CONFIG:
		return NS_REQ_KV;
	case WIRE_REQ_WIPE_WRITE_PERM_OF_BROKER:
	case WIRE_REQ_ADD_WRITE_PERM_OF_BROKER:
		return NS_REQ_WRITE_PERM;
	case WIRE_REQ_DELETE_TOPIC_IN_NAMESRV:
		return NS_REQ_DELETE_TOPIC;
	case WIRE_REQ_GET_NAMESRV_CONFIG:
	case WIRE_REQ_UPDATE_NAMESRV_CONFIG:
		return NS_REQ_CONFIG;
	default:
		return NS_REQ_OTHER;
	}
}

static int
dispatch_read(struct ns_state *st, const struct wire_rem_cmd *req, struct ns_reply *r)
{
	switch (req->code) {
	case WIRE_REQ_GET_ROUTEINFO_BY_TOPIC:
		return h_route(st, req, r);
	case WIRE_REQ_GET_BROKER_CLUSTER_INFO:
		return h_cluster(st, r);
	case WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
		return h_topic_list(st, r);
	case WIRE_REQ_GET_KV_CONFIG:
		return h_kv_get(st, req, r);
	case WIRE_REQ_GET_TOPICS_BY_CLUSTER:
		return h_cluster_topics(st, req, r);
	case WIRE_REQ_GET_SYSTEM_TOPIC_LIST_FROM_NS:
		return h_system_topics(st, r);
	case WIRE_REQ_GET_NAMESRV_CONFIG:
		return h_config_get(st, r);
	default:
		reply_set(r, WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED, " request type %d not supported",
			  req->code);
		return 0;
	}
}

static int
dispatch_write(struct ns_state *st, uint64_t conn, uint64_t now_ms, const struct wire_rem_cmd *req,
	       struct ns_reply *r)
{
	switch (req->code) {
	case WIRE_REQ_REGISTER_BROKER:
		return h_register(st, conn, now_ms, req, r);
	case WIRE_REQ_UNREGISTER_BROKER:
		return h_unregister(st, req, r);
	case WIRE_REQ_WIPE_WRITE_PERM_OF_BROKER:
		return h_write_perm(st, req, r, false);
	case WIRE_REQ_ADD_WRITE_PERM_OF_BROKER:
		return h_write_perm(st, req, r, true);
	case WIRE_REQ_DELETE_TOPIC_IN_NAMESRV:
		return h_delete_topic(st, req, r);
	case WIRE_REQ_UPDATE_NAMESRV_CONFIG:
		return h_config_update(st, req, r);
	case WIRE_REQ_QUERY_DATA_VERSION:
		return h_query_dv(st, now_ms, req, r);
	case WIRE_REQ_PUT_KV_CONFIG:
	case WIRE_REQ_DELETE_KV_CONFIG:
		return h_kv_write(st, req, r);
	default:
		reply_set(r, WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED, " request type %d not supported",
			  req->code);
		return 0;
	}
}

int
ns_handle(struct ns_state *st, enum ns_role role, uint64_t conn, uint32_t peer_ip, uint64_t now_ms,
	  const uint8_t *frame, size_t len, uint8_t **resp, size_t *resp_len)
{
	struct ns_role_ctx *ctx = &st->role[role];
	struct wire_rem_cmd *req = &ctx->cmd;
	const struct acl_door *door;
	struct ns_reply *r;
	enum ns_req_kind kind;
	size_t need;
	int rc;

	*resp = NULL;
	*resp_len = 0;
	if (len < 8)
		return -EBADMSG;
	/* Header strings need at most 3 bytes per header byte (remoting.h). */
	need = (size_t)(((uint32_t)frame[5] << 16) | ((uint32_t)frame[6] << 8) | frame[7]) * 3 +
	       256;
	/* Grow as needed; after a huge header (16 MiB is legal) shrink back, so
	 * one request does not pin 48 MiB for good. */
	if (need > ctx->scratch_cap ||
	    (ctx->scratch_cap > NS_SCRATCH_KEEP && need <= NS_SCRATCH_KEEP)) {
		char *s = realloc(ctx->scratch, need);

		if (s == NULL)
			return -ENOMEM;
		ctx->scratch = s;
		ctx->scratch_cap = need;
	}
	rc = wire_rem_decode(frame, len, req, ctx->scratch, ctx->scratch_cap);
	if (rc != 0)
		return rc;
	if (req->flag & WIRE_REM_FLAG_RESPONSE)
		return 0; /* nobody here sent a request: a stray response is dropped */
	if (role == NS_ROLE_READER && is_write_code(req->code))
		return NS_HANDLE_WRITER;
	kind = req_kind(req->code);
	__atomic_store_n(&ctx->reqs[kind], ctx->reqs[kind] + 1, __ATOMIC_RELAXED);

	r = malloc(sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	memset(&r->cmd, 0, offsetof(struct wire_rem_cmd, ext));
	r->body = NULL;
	r->body_len = 0;
	door = acl_door_namesrv(req->code);
	if (door == NULL) {
		/* no row in the permission table: nobody decided who may send it */
		reply_set(r, WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED, " request type %d not supported",
			  req->code);
		rc = 0;
	} else if (door->cls != ACL_DOOR_OPEN &&
		   ns__acl_check(&st->acl, peer_ip, req, r->remark, sizeof(r->remark)) != 0) {
		r->cmd.code = WIRE_RSP_NO_PERMISSION;
		r->cmd.remark = r->remark;
		r->cmd.remark_len = (uint32_t)strlen(r->remark);
		rc = 0;
	} else if ((door->flags & ACL_DOOR_ADDRS) && !cidr_list_has(&st->admin, peer_ip)) {
		char ip[INET_ADDRSTRLEN] = "?";

		inet_ntop(AF_INET, &peer_ip, ip, sizeof(ip));
		reply_set(r, WIRE_RSP_NO_PERMISSION,
			  "admin request %d refused: %s is not in adminAllowedAddrs", req->code,
			  ip);
		log_warn_ratelimited(NS_TAG, "admin request %d from %s refused (adminAllowedAddrs)",
				     req->code, ip);
		rc = 0;
	} else if (is_write_code(req->code)) {
		rc = dispatch_write(st, conn, now_ms, req, r);
	} else if (role == NS_ROLE_READER) {
		uint64_t t0 = kind == NS_REQ_GET_ROUTEINFO_BY_TOPIC ? clk_mono_ns() : 0;

		urcu_memb_read_lock();
		rc = dispatch_read(st, req, r);
		/* Encode inside the section: GET_KV_CONFIG's value points into a snapshot. */
		if (rc == 0 && !(req->flag & WIRE_REM_FLAG_ONEWAY))
			rc = reply_encode(req, r, resp, resp_len);
		urcu_memb_read_unlock();
		if (t0)
			phist_record(&st->route_lat, clk_mono_ns() - t0);
		goto out;
	} else {
		rc = dispatch_read(st, req, r); /* the writer sees its own latest state */
	}
	if (rc == 0 && !(req->flag & WIRE_REM_FLAG_ONEWAY))
		rc = reply_encode(req, r, resp, resp_len);
out:
	free(r->body);
	free(r);
	if (rc == -E2BIG || rc == -ENOBUFS || rc == -EINVAL)
		rc = -ENOMEM; /* an encoder limit on our own reply: not the peer's fault */
	return rc;
}

int
ns_conn_closed(struct ns_state *st, uint64_t conn)
{
	return route_db_conn_closed(st->db, conn);
}

uint64_t
ns_inflate_refused(struct ns_state *st)
{
	return atomic_load_relaxed(&st->inflate_refused);
}

uint64_t
ns_acl_denied(struct ns_state *st, unsigned reason)
{
	return reason < NS_ACL_REASONS ? atomic_load_relaxed(&st->acl.denied[reason]) : 0;
}

void
ns_tick(struct ns_state *st, uint64_t now_ms)
{
	ns__acl_tick(&st->acl, now_ms);
}

int
ns_expire(struct ns_state *st, uint64_t now_ms, uint64_t expire_ms)
{
	return route_db_expire(st->db, now_ms, expire_ms);
}
