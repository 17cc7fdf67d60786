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
 * @skipped: topics left out for a bad name or value.
 * Return: 0 and a new set in *@out, -EBADMSG malformed, -ENOMEM, -EFBIG
 * the body inflates past its limits (above).
 */
MUST_CHECK int ns__body_topics(const uint8_t *body, size_t len, bool compressed, uint32_t max_cores,
			       size_t inflate_max, struct route_tset **out, uint32_t *skipped);

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

#endif /* SP_CONTROL_NS_PRIV_H */
