/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd.h - a small blocking client of etcd's v3 API over its HTTP/JSON
 * gateway (`POST /v3/kv/range` ...), what a broker group's failover keeps
 * its master record in (docs/failover.md).
 *
 * Context: control threads only (every call blocks up to the client's
 * timeout). One client is used by one thread at a time. Keys and values are
 * bytes on etcd's side; here keys are C strings and values NUL-terminated
 * copies (a value with a NUL is cut there).
 *
 * Endpoints are "host:port" separated by ',' or ';'. A call goes to the
 * endpoint that answered last and, when that one fails, to the others in
 * turn until one answers or the call's time is up.
 */
#ifndef SP_CONTROL_ETCD_H
#define SP_CONTROL_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_ETCD_ENDPOINTS_MAX 8
#define CTL_ETCD_KEY_MAX 256
#define CTL_ETCD_VALUE_MAX 4096

struct ctl_etcd;

struct ctl_etcd_kv {
	char key[CTL_ETCD_KEY_MAX];
	char value[CTL_ETCD_VALUE_MAX];
	int64_t create_rev;
	int64_t mod_rev;
	int64_t version;
	int64_t lease; /* 0: none */
};

/* One comparison of a transaction: all must hold for its puts to apply. */
enum ctl_etcd_cmp_kind {
	CTL_ETCD_CMP_ABSENT,  /* @key does not exist */
	CTL_ETCD_CMP_MOD_REV, /* @key's mod revision is @rev (0: it does not exist) */
	CTL_ETCD_CMP_VALUE,   /* @key exists and holds @value */
};

struct ctl_etcd_cmp {
	enum ctl_etcd_cmp_kind kind;
	const char *key;
	int64_t rev;
	const char *value;
};

/* A put (@value non-NULL, with @lease or 0) or a delete (@value NULL). */
struct ctl_etcd_op {
	const char *key;
	const char *value;
	int64_t lease;
};

/* Return: 0, -EINVAL (no endpoint, a bad one), -ENOMEM. */
int ctl_etcd_open(const char *endpoints, uint32_t timeout_ms, struct ctl_etcd **out);
void ctl_etcd_close(struct ctl_etcd *e);
/* The endpoint that answered last ("host:port"). */
const char *ctl_etcd_endpoint(const struct ctl_etcd *e);

/*
 * Every call returns 0, or -ETIMEDOUT / -ECONNREFUSED / -EHOSTUNREACH ...
 * (no endpoint answered in time), -EPROTO (an answer that is not etcd's:
 * bad HTTP, a status other than 200, JSON that does not parse; @why says
 * which, where given), -E2BIG (a key or value too long).
 */
int ctl_etcd_grant(struct ctl_etcd *e, uint32_t ttl_s, int64_t *lease);
/* @ttl_left: the lease's TTL after the renewal, 0 when it had expired. */
int ctl_etcd_keepalive(struct ctl_etcd *e, int64_t lease, int64_t *ttl_left);
int ctl_etcd_revoke(struct ctl_etcd *e, int64_t lease);
/*
 * ctl_etcd_get() - @key, or every key under the prefix @key when @prefix,
 * into @kvs (up to @cap, in key order); @n the number stored.
 */
int ctl_etcd_get(struct ctl_etcd *e, const char *key, bool prefix, struct ctl_etcd_kv *kvs,
		 size_t cap, size_t *n);
int ctl_etcd_put(struct ctl_etcd *e, const char *key, const char *value, int64_t lease);
int ctl_etcd_del(struct ctl_etcd *e, const char *key);
/* @ok: the comparisons held and the ops were applied (else nothing was). */
int ctl_etcd_txn(struct ctl_etcd *e, const struct ctl_etcd_cmp *cmp, size_t ncmp,
		 const struct ctl_etcd_op *ops, size_t nops, bool *ok);

/*
 * The decoders behind the calls, pure (fuzzed: tests/fuzz/fuzz_etcd.c).
 * ctl_etcd_http_body() finds the body of an HTTP/1.x response in @buf
 * (status 200 only; chunked bodies are joined in place).
 * Return: 0, -EPROTO.
 */
int ctl_etcd_http_body(char *buf, size_t len, char **body, size_t *body_len);
int ctl_etcd_parse_grant(const char *json, size_t len, int64_t *lease);
int ctl_etcd_parse_keepalive(const char *json, size_t len, int64_t *ttl_left);
int ctl_etcd_parse_range(const char *json, size_t len, struct ctl_etcd_kv *kvs, size_t cap,
			 size_t *n);
int ctl_etcd_parse_txn(const char *json, size_t len, bool *ok);

#endif /* SP_CONTROL_ETCD_H */
