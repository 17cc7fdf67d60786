/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ns_priv.h - NameServer internals shared between control/ns_*.c
 * (module-internal names: ns__x).
 */
#ifndef SP_CONTROL_NS_PRIV_H
#define SP_CONTROL_NS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <limits.h>

#include "common/acl.h"
#include "common/cidr.h"
#include "common/phist.h"
#include "common/atomic.h"
#include "common/compiler.h"
#include "control/route.h"
#include "wire/remoting.h"

#define NS_TAG "ctl.ns"

/*
 * Who may change routes (ns_acl.c): aclEnable's admin accounts, or, in
 * protected mode, loopback. ns_state owns one.
 */
enum {
	NS_ACL_NO_KEY,
	NS_ACL_UNKNOWN_KEY,
	NS_ACL_BAD_SIG,
	NS_ACL_NOT_ADMIN,
	NS_ACL_PROTECTED,
	NS_ACL_REASONS,
};

struct ns_acl {
	struct acl *acl;     /* RCU (urcu-memb); NULL: ACL off */
	bool protected_mode; /* ACL off, protectedMode, bindAddress unset: loopback only */
	struct acl_watch w;  /* the file (the writer thread polls it) */
	_Atomic uint64_t denied[NS_ACL_REASONS];
};

/* Context: startup. @path "" or NULL: ACL off. Return: 0, -errno (logged with the reason). */
MUST_CHECK int ns__acl_init(struct ns_acl *a, const char *path, bool protected_mode);
/* Reload the file if it changed. Context: the writer thread. */
void ns__acl_tick(struct ns_acl *a, uint64_t now_ms);
void ns__acl_fini(struct ns_acl *a);
/*
 * ns__acl_check() - may @req (a state change or an admin read) come from
 * @peer_ip? Return: 0, or -EACCES with the reason in @why (counted, logged
 * rate-limited). Context: any ns_handle() role.
 */
MUST_CHECK int ns__acl_check(struct ns_acl *a, uint32_t peer_ip, const struct wire_rem_cmd *req,
			     char *why, size_t why_len);

/*
 * Requests counted by kind for /metrics (ns_handle.c counts, ns_http.c
 * shows): the codes the NameServer answers, and the rest.
 */
enum ns_req_kind {
	NS_REQ_REGISTER_BROKER,
	NS_REQ_UNREGISTER_BROKER,
	NS_REQ_GET_ROUTEINFO_BY_TOPIC,
	NS_REQ_GET_BROKER_CLUSTER_INFO,
	NS_REQ_QUERY_DATA_VERSION,
	NS_REQ_GET_ALL_TOPIC_LIST,
	NS_REQ_GET_TOPICS_BY_CLUSTER,
	NS_REQ_GET_SYSTEM_TOPIC_LIST,
	NS_REQ_KV,	     /* PUT, GET, DELETE_KV_CONFIG */
	NS_REQ_WRITE_PERM,   /* WIPE / ADD_WRITE_PERM_OF_BROKER */
	NS_REQ_DELETE_TOPIC, /* DELETE_TOPIC_IN_NAMESRV */
	NS_REQ_CONFIG,	     /* GET / UPDATE_NAMESRV_CONFIG */
	NS_REQ_OTHER,	     /* answered REQUEST_CODE_NOT_SUPPORTED */
	NS_REQ_KINDS
};
extern const char *const ns__req_names[NS_REQ_KINDS];

struct ns_role_ctx {
	struct wire_rem_cmd cmd;
	char *scratch;
	size_t scratch_cap;
	uint64_t reqs[NS_REQ_KINDS]; /* requests this role ran (its thread writes, relaxed reads) */
};

/*
 * Ownership: db and kv mutate on the writer thread only and publish through
 * RCU; role[r] belongs to the thread playing role r; route_lat to the reader
 * role's (the io thread, which also serves /metrics); conf is immutable.
 */
struct ns_state {
	bool order_msg;
	struct cidr_list admin;	    /* adminAllowedAddrs */
	const struct cfg *cfg;	    /* GET_NAMESRV_CONFIG; NULL: not available */
	const struct cfg_key *keys; /* UPDATE_NAMESRV_CONFIG checks bodies against these */
	size_t n_keys;
	struct route_db *db;
	struct ns_kv *kv;
	struct ns_role_ctx role[2];
	struct ns_acl acl;
	size_t inflate_max;		  /* maxInflatedBodySize */
	_Atomic uint64_t inflate_refused; /* registrations refused for it */
	struct phist route_lat;		  /* GET_ROUTEINFO_BY_TOPIC: decoded -> answer encoded */
};

/*
 * Zip-bomb guards of a compressed registration body: at most maxInflatedBodySize
 * (NS_INFLATE_MAX when 0) and NS_INFLATE_RATIO times its compressed size (+64 KiB).
 */
#define NS_INFLATE_MAX (256u << 20)
#define NS_INFLATE_RATIO 64u

/*
 * Registration bodies (ns_body.c): RegisterBrokerBody JSON, the bare
 * TopicConfigSerializeWrapper of old brokers, or the zlib form
 * (compressed=true), docs/rocketmq-protocol.md §3.1. Untrusted input: bounded, never crashes.
 */

/**
 * ns__body_dv() - the body's dataVersion, without parsing its topics.
 * Return: 0 (zero version when the body has none), -EBADMSG malformed.
 */
MUST_CHECK int ns__body_dv(const uint8_t *body, size_t len, bool compressed, struct route_dv *dv);

/**
 * ns__body_topics() - parse the topic set.
 * @max_cores: dataplane cores of the registering broker (0: none), bounds
 * dataplaneQueueCores entries.
 * @inflate_max: maxInflatedBodySize (0: NS_INFLATE_MAX).
 * @deleted: NULL, or for a delta registration a new set in *@deleted of the
 * names in sprocketDeletedTopics (docs/namesrv.md, "Delta registration").
 * @skipped: topics left out for a bad name or value.
 * Return: 0 and a new set in *@out, -EBADMSG malformed, -ENOMEM, -EFBIG
 * the body inflates past its limits (above).
 */
MUST_CHECK int ns__body_topics(const uint8_t *body, size_t len, bool compressed, uint32_t max_cores,
			       size_t inflate_max, struct route_tset **out,
			       struct route_tset **deleted, uint32_t *skipped);

/* A standalone DataVersion object (QUERY_DATA_VERSION body). Return: 0, -EBADMSG. */
MUST_CHECK int ns__dv_parse(const uint8_t *json, size_t len, struct route_dv *dv);

/*
 * KV config (ns_kv.c): namespace -> key -> value, RCU-published snapshots,
 * persisted to one file with a write-temp, fsync, rename.
 */
#define NS_KV_FIELD_MAX 255	 /* namespace and key bytes */
#define NS_KV_VALUE_MAX 65536	 /* value bytes */
#define NS_KV_ENTRIES_MAX 100000 /* entries in all namespaces */

struct ns_kv;

/* @path: the file, "" for memory only. Context: startup. Return: 0, -errno, -EBADMSG bad file. */
MUST_CHECK int ns__kv_create(const char *path, struct ns_kv **out);
void ns__kv_destroy(struct ns_kv *kv);

/*
 * Writer thread. Return: 0, -EINVAL field too long / not UTF-8 / has NUL,
 * -ENOSPC too many entries, -ENOENT (delete) absent, -errno persisting (the
 * change is then not applied).
 */
MUST_CHECK int ns__kv_put(struct ns_kv *kv, const char *ns, size_t ns_len, const char *key,
			  size_t key_len, const char *val, size_t val_len);
MUST_CHECK int ns__kv_delete(struct ns_kv *kv, const char *ns, size_t ns_len, const char *key,
			     size_t key_len);

/* Readers inside urcu_memb_read_lock(): the value stays valid until unlock. */
const char *ns__kv_get(struct ns_kv *kv, const char *ns, size_t ns_len, const char *key,
		       size_t key_len, size_t *val_len);

/* {"table":{...}} for namespace @ns (reader, in a read section). Return: 0, -ENOENT, -ENOMEM. */
MUST_CHECK int ns__kv_list_json(struct ns_kv *kv, const char *ns, uint8_t **out, size_t *out_len);

/* Return: entries (writer thread). */
uint32_t ns__kv_count(const struct ns_kv *kv);

/*
 * The HTTP endpoints (ns_http.c, linked into the daemon alone): httpPort and
 * httpBindAddress of @cfg. Context: main thread, after ns_server_create() and
 * before ns_server_run(); stop after it returned. Return: 0 (also when off or
 * the default port is taken: logged), -errno for an explicit port.
 */
struct cfg;
struct ns_server;
MUST_CHECK int ns__http_start(struct ns_server *srv, const struct cfg *cfg);
void ns__http_stop(void);

#endif /* SP_CONTROL_NS_PRIV_H */
