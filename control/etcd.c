// SPDX-License-Identifier: Apache-2.0
/*
 * etcd.c - etcd's v3 API over its HTTP/JSON gateway (etcd.h), for the
 * broker's failover controller (broker/ha/bk_ha.c) and the CLI.
 *
 * Why the gateway and not gRPC: Debian has no C gRPC library that is kept
 * up, and the gateway is part of every etcd (3.4 in Debian 12). Each call is
 * one HTTP/1.0 POST on a new connection (the server closes it after the
 * answer, so there is no chunked stream to follow, not even for the lease
 * keep-alive, which is a stream in gRPC): a few calls a second at most, on a
 * control thread, where a connection's set-up on loopback or a LAN is
 * noise against the lease's seconds. Byte fields (keys, values) travel in
 * base64, 64-bit integers as JSON strings, as the gateway does.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/clock.h"
#include "common/hmac.h"
#include "common/jbuf.h"
#include "control/etcd.h"

#define ETCD_ANSWER_MAX (1u << 20) /* a range of a group's few keys is a few KiB */

struct etcd_ep {
	char host[128];
	char port[8];
	char name[140];
};

struct ctl_etcd {
	struct etcd_ep ep[CTL_ETCD_ENDPOINTS_MAX];
	unsigned n;
	unsigned cur; /* the endpoint that answered last */
	uint32_t timeout_ms;
	char *buf; /* ETCD_ANSWER_MAX + 1 */
};

int
ctl_etcd_open(const char *endpoints, uint32_t timeout_ms, struct ctl_etcd **out)
{
	struct ctl_etcd *e;
	const char *p = endpoints;

	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	e->buf = malloc(ETCD_ANSWER_MAX + 1);
	if (e->buf == NULL) {
		free(e);
		return -ENOMEM;
	}
	e->timeout_ms = timeout_ms ? timeout_ms : 1000;
	while (p && *p) {
		size_t len = strcspn(p, ",; ");
		struct etcd_ep *ep = &e->ep[e->n];
		const char *colon;
		size_t hl;

		if (len == 0) {
			p++;
			continue;
		}
		/* an http:// in front, as etcdctl's --endpoints takes, is fine */
		if (len > 7 && strncmp(p, "http://", 7) == 0) {
			p += 7;
			len -= 7;
		}
		colon = memchr(p, ':', len);
		hl = colon ? (size_t)(colon - p) : 0;
		if (e->n == CTL_ETCD_ENDPOINTS_MAX || colon == NULL || hl == 0 ||
		    hl >= sizeof(ep->host) || len - hl - 1 == 0 ||
		    len - hl - 1 >= sizeof(ep->port) || len >= sizeof(ep->name)) {
			ctl_etcd_close(e);
			return -EINVAL;
		}
		memcpy(ep->host, p, hl);
		memcpy(ep->port, colon + 1, len - hl - 1);
		memcpy(ep->name, p, len);
		if (strspn(ep->port, "0123456789") != strlen(ep->port)) {
			ctl_etcd_close(e);
			return -EINVAL;
		}
		e->n++;
		p += len;
	}
	if (e->n == 0) {
		ctl_etcd_close(e);
		return -EINVAL;
	}
	*out = e;
	return 0;
}

void
ctl_etcd_close(struct ctl_etcd *e)
{
	if (e == NULL)
		return;
	free(e->buf);
	free(e);
}

const char *
ctl_etcd_endpoint(const struct ctl_etcd *e)
{
	return e->ep[e->cur].name;
}

static int
wait_fd(int fd, short ev, uint64_t deadline_ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	uint64_t now = clk_mono_ns() / 1000000;
	int rc;

	if (now >= deadline_ms)
		return -ETIMEDOUT;
	rc = poll(&p, 1, (int)(deadline_ms - now));
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	return rc == 0 ? -ETIMEDOUT : 0;
}

static int
connect_to(const struct etcd_ep *ep, uint64_t deadline_ms)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai = NULL;
	socklen_t sl = sizeof(int);
	int soerr = 0;
	int fd;
	int err;

	if (getaddrinfo(ep->host, ep->port, &hints, &ai) != 0 || ai == NULL)
		return -EHOSTUNREACH;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		freeaddrinfo(ai);
		return err;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
		err = -errno;
		goto fail;
	}
	err = wait_fd(fd, POLLOUT, deadline_ms);
	if (err)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
		err = soerr ? -soerr : -errno;
		goto fail;
	}
	freeaddrinfo(ai);
	return fd;
fail:
	freeaddrinfo(ai);
	close(fd);
	return err;
}

/* One POST to one endpoint; the answer's body in e->buf. */
static int
post_one(struct ctl_etcd *e, unsigned i, const char *path, const char *body, size_t blen,
	 uint64_t deadline_ms, char **out, size_t *out_len)
{
	char head[512];
	size_t got = 0;
	size_t hl;
	size_t sent = 0;
	int fd;
	int err = 0;

	fd = connect_to(&e->ep[i], deadline_ms);
	if (fd < 0)
		return fd;
	hl = (size_t)snprintf(head, sizeof(head),
			      "POST %s HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n"
			      "Content-Length: %zu\r\n\r\n",
			      path, e->ep[i].name, blen);
	while (sent < hl + blen) {
		const char *p = sent < hl ? head + sent : body + (sent - hl);
		size_t n = sent < hl ? hl - sent : blen - (sent - hl);
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			err = -errno;
			goto out;
		}
		err = wait_fd(fd, POLLOUT, deadline_ms);
		if (err)
			goto out;
	}
	for (;;) {
		ssize_t r;

		if (got == ETCD_ANSWER_MAX) {
			err = -EPROTO;
			goto out;
		}
		r = recv(fd, e->buf + got, ETCD_ANSWER_MAX - got, 0);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0)
			break;
		if (errno != EAGAIN && errno != EINTR) {
			err = -errno;
			goto out;
		}
		err = wait_fd(fd, POLLIN, deadline_ms);
		if (err)
			goto out;
	}
	e->buf[got] = '\0';
	err = ctl_etcd_http_body(e->buf, got, out, out_len);
out:
	close(fd);
	return err;
}

/*
 * Each endpoint gets an equal slice of the call's time, so a black-holed one
 * (a powered-off host: no refusal, only silence) cannot take all of it; one
 * that failed is not asked first again. An answer that is not etcd's 200
 * (a member without a leader says 503) moves on to the next as well.
 */
static int
post(struct ctl_etcd *e, const char *path, const struct jbuf *b, char **out, size_t *out_len)
{
	uint64_t now = clk_mono_ns() / 1000000;
	uint64_t deadline = now + e->timeout_ms;
	uint64_t slice = e->timeout_ms / e->n;
	int err = -ETIMEDOUT;

	if (b->err)
		return b->err;
	for (unsigned k = 0; k < e->n; k++) {
		unsigned i = (e->cur + k) % e->n;
		uint64_t until = now + slice;

		if (k == e->n - 1 || until > deadline)
			until = deadline; /* the last one gets what is left */
		err = post_one(e, i, path, (const char *)b->p, b->len, until, out, out_len);
		if (err == 0) {
			e->cur = i;
			return 0;
		}
		now = clk_mono_ns() / 1000000;
		if (now >= deadline)
			break;
	}
	e->cur = (e->cur + 1) % e->n;
	return err;
}

static void
kv_b64(struct jbuf *b, const char *k, const char *v, size_t len)
{
	char enc[4 * ((CTL_ETCD_VALUE_MAX + 2) / 3) + 1];

	hmac_b64((const uint8_t *)v, len, enc);
	jbuf_kv_str(b, k, enc);
}

/* etcd's range_end for "every key under @key": the key with its last byte + 1. */
static void
kv_prefix_end(struct jbuf *b, const char *key)
{
	char end[CTL_ETCD_KEY_MAX];
	size_t n = strlen(key);

	memcpy(end, key, n);
	while (n > 0 && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		kv_b64(b, "range_end", "\0", 1); /* every key */
		return;
	}
	end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
	kv_b64(b, "range_end", end, n);
}

static bool
key_ok(const char *k)
{
	return k != NULL && k[0] != '\0' && strlen(k) < CTL_ETCD_KEY_MAX;
}

/* ---- answers ---- */

int
ctl_etcd_http_body(char *buf, size_t len, char **body, size_t *body_len)
{
	char *end;
	char *h;
	char *w;
	char *r;
	bool chunked = false;

	if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0)
		return -EPROTO;
	end = memmem(buf, len, "\r\n\r\n", 4);
	if (end == NULL)
		return -EPROTO;
	for (h = buf; h < end; h++) {
		static const char te[] = "\r\ntransfer-encoding: chunked";

		if ((size_t)(end - h) >= sizeof(te) - 1 && strncasecmp(h, te, sizeof(te) - 1) == 0)
			chunked = true;
	}
	r = end + 4;
	if (!chunked) {
		*body = r;
		*body_len = len - (size_t)(r - buf);
		return 0;
	}
	/* join the chunks in place */
	w = r;
	*body = r;
	for (;;) {
		char *eol = memmem(r, len - (size_t)(r - buf), "\r\n", 2);
		unsigned long n;
		char *num_end;

		if (eol == NULL)
			return -EPROTO;
		n = strtoul(r, &num_end, 16);
		if (num_end == r || (*num_end != '\r' && *num_end != ';'))
			return -EPROTO;
		r = eol + 2;
		if (n == 0)
			break;
		if (n > len - (size_t)(r - buf))
			return -EPROTO;
		memmove(w, r, n);
		w += n;
		r += n;
		if (len - (size_t)(r - buf) < 2 || r[0] != '\r' || r[1] != '\n')
			return -EPROTO;
		r += 2;
	}
	*body_len = (size_t)(w - *body);
	return 0;
}

static struct json_object *
parse(const char *json, size_t len)
{
	struct json_tokener *tok;
	struct json_object *o;

	if (len > INT32_MAX)
		return NULL;
	tok = json_tokener_new();
	if (tok == NULL)
		return NULL;
	o = json_tokener_parse_ex(tok, json, (int)len);
	if (o != NULL && (json_tokener_get_error(tok) != json_tokener_success ||
			  !json_object_is_type(o, json_type_object))) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/* A 64-bit field: a JSON string of digits (the gateway's), or a number; absent: 0. */
static int
field_i64(struct json_object *o, const char *k, int64_t *v)
{
	struct json_object *f;
	const char *s;
	char *endp;

	*v = 0;
	if (!json_object_object_get_ex(o, k, &f) || f == NULL)
		return 0;
	if (json_object_is_type(f, json_type_int)) {
		*v = json_object_get_int64(f);
		return 0;
	}
	if (!json_object_is_type(f, json_type_string))
		return -EPROTO;
	s = json_object_get_string(f);
	errno = 0;
	*v = strtoll(s, &endp, 10);
	if (endp == s || *endp != '\0' || errno)
		return -EPROTO;
	return 0;
}

int
ctl_etcd_parse_grant(const char *json, size_t len, int64_t *lease)
{
	struct json_object *o = parse(json, len);
	int err;

	if (o == NULL)
		return -EPROTO;
	err = field_i64(o, "ID", lease);
	if (err == 0 && *lease == 0)
		err = -EPROTO;
	json_object_put(o);
	return err;
}

int
ctl_etcd_parse_keepalive(const char *json, size_t len, int64_t *ttl_left)
{
	struct json_object *o = parse(json, len);
	struct json_object *r;
	int err = -EPROTO;

	if (o == NULL)
		return -EPROTO;
	/* {"result":{"ID":..,"TTL":".."}}; no TTL: the lease had expired */
	if (json_object_object_get_ex(o, "result", &r) && json_object_is_type(r, json_type_object))
		err = field_i64(r, "TTL", ttl_left);
	if (err == 0 && *ttl_left < 0)
		err = -EPROTO;
	json_object_put(o);
	return err;
}

int
ctl_etcd_parse_range(const char *json, size_t len, struct ctl_etcd_kv *kvs, size_t cap, size_t *n)
{
	struct json_object *o = parse(json, len);
	struct json_object *a;
	int err = 0;

	*n = 0;
	if (o == NULL)
		return -EPROTO;
	if (!json_object_object_get_ex(o, "kvs", &a) || a == NULL)
		goto out; /* no key */
	if (!json_object_is_type(a, json_type_array)) {
		err = -EPROTO;
		goto out;
	}
	for (size_t i = 0; i < json_object_array_length(a) && *n < cap; i++) {
		struct json_object *kv = json_object_array_get_idx(a, i);
		struct ctl_etcd_kv *d = &kvs[*n];
		struct json_object *f;
		long kl;
		long vl = 0;

		if (kv == NULL || !json_object_is_type(kv, json_type_object) ||
		    !json_object_object_get_ex(kv, "key", &f) ||
		    !json_object_is_type(f, json_type_string)) {
			err = -EPROTO;
			goto out;
		}
		kl = hmac_b64_decode(json_object_get_string(f), d->key, sizeof(d->key));
		d->value[0] = '\0';
		if (json_object_object_get_ex(kv, "value", &f)) {
			if (!json_object_is_type(f, json_type_string)) {
				err = -EPROTO;
				goto out;
			}
			vl = hmac_b64_decode(json_object_get_string(f), d->value, sizeof(d->value));
		}
		if (kl == -E2BIG || vl == -E2BIG)
			continue; /* not one of ours: skipped, the others still count */
		if (kl < 0 || vl < 0) {
			err = kl < 0 ? (int)kl : (int)vl;
			goto out;
		}
		if (field_i64(kv, "create_revision", &d->create_rev) != 0 ||
		    field_i64(kv, "mod_revision", &d->mod_rev) != 0 ||
		    field_i64(kv, "version", &d->version) != 0 ||
		    field_i64(kv, "lease", &d->lease) != 0) {
			err = -EPROTO;
			goto out;
		}
		(*n)++;
	}
out:
	json_object_put(o);
	return err;
}

int
ctl_etcd_parse_txn(const char *json, size_t len, bool *ok)
{
	struct json_object *o = parse(json, len);
	struct json_object *f;

	if (o == NULL)
		return -EPROTO;
	/* "succeeded" is left out when false (proto3's default) */
	*ok = json_object_object_get_ex(o, "succeeded", &f) && json_object_get_boolean(f);
	json_object_put(o);
	return 0;
}

/* ---- calls ---- */

int
ctl_etcd_grant(struct ctl_etcd *e, uint32_t ttl_s, int64_t *lease)
{
	struct jbuf b;
	char *body;
	size_t bl;
	int err;

	jbuf_init(&b);
	jbuf_lit(&b, "{");
	jbuf_kv_i64(&b, "TTL", ttl_s);
	jbuf_lit(&b, "}");
	err = post(e, "/v3/lease/grant", &b, &body, &bl);
	jbuf_free(&b);
	return err ? err : ctl_etcd_parse_grant(body, bl, lease);
}

static void
kv_lease(struct jbuf *b, const char *k, int64_t lease)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, lease);
	jbuf_kv_str(b, k, s);
}

/* POST {"ID":"<lease>"} to @path (keepalive, revoke) */
static int
lease_post(struct ctl_etcd *e, const char *path, int64_t lease, char **body, size_t *bl)
{
	struct jbuf b;
	int err;

	jbuf_init(&b);
	jbuf_lit(&b, "{");
	kv_lease(&b, "ID", lease);
	jbuf_lit(&b, "}");
	err = post(e, path, &b, body, bl);
	jbuf_free(&b);
	return err;
}

int
ctl_etcd_keepalive(struct ctl_etcd *e, int64_t lease, int64_t *ttl_left)
{
	char *body;
	size_t bl;
	int err = lease_post(e, "/v3/lease/keepalive", lease, &body, &bl);

	return err ? err : ctl_etcd_parse_keepalive(body, bl, ttl_left);
}

int
ctl_etcd_revoke(struct ctl_etcd *e, int64_t lease)
{
	char *body;
	size_t bl;

	return lease_post(e, "/v3/lease/revoke", lease, &body, &bl);
}

int
ctl_etcd_get(struct ctl_etcd *e, const char *key, bool prefix, struct ctl_etcd_kv *kvs, size_t cap,
	     size_t *n)
{
	struct jbuf b;
	char *body;
	size_t bl;
	int err;

	jbuf_init(&b);
	*n = 0;
	if (!key_ok(key))
		return -E2BIG;
	jbuf_lit(&b, "{");
	kv_b64(&b, "key", key, strlen(key));
	if (prefix) {
		jbuf_lit(&b, ",");
		kv_prefix_end(&b, key);
	}
	jbuf_lit(&b, "}");
	err = post(e, "/v3/kv/range", &b, &body, &bl);
	jbuf_free(&b);
	return err ? err : ctl_etcd_parse_range(body, bl, kvs, cap, n);
}

static int
op_put(struct jbuf *b, const struct ctl_etcd_op *op)
{
	if (!key_ok(op->key) || strlen(op->value) >= CTL_ETCD_VALUE_MAX)
		return -E2BIG;
	kv_b64(b, "key", op->key, strlen(op->key));
	jbuf_lit(b, ",");
	kv_b64(b, "value", op->value, strlen(op->value));
	if (op->lease) {
		jbuf_lit(b, ",");
		kv_lease(b, "lease", op->lease);
	}
	return 0;
}

int
ctl_etcd_put(struct ctl_etcd *e, const char *key, const char *value, int64_t lease)
{
	const struct ctl_etcd_op op = {.key = key, .value = value, .lease = lease};
	struct jbuf b;
	char *body;
	size_t bl;
	int err;

	jbuf_init(&b);
	jbuf_lit(&b, "{");
	err = op_put(&b, &op);
	jbuf_lit(&b, "}");
	if (err == 0)
		err = post(e, "/v3/kv/put", &b, &body, &bl);
	jbuf_free(&b);
	return err;
}

int
ctl_etcd_del(struct ctl_etcd *e, const char *key)
{
	struct jbuf b;
	char *body;
	size_t bl;
	int err;

	jbuf_init(&b);
	if (!key_ok(key))
		return -E2BIG;
	jbuf_lit(&b, "{");
	kv_b64(&b, "key", key, strlen(key));
	jbuf_lit(&b, "}");
	err = post(e, "/v3/kv/deleterange", &b, &body, &bl);
	jbuf_free(&b);
	return err;
}

int
ctl_etcd_txn(struct ctl_etcd *e, const struct ctl_etcd_cmp *cmp, size_t ncmp,
	     const struct ctl_etcd_op *ops, size_t nops, bool *ok)
{
	struct jbuf b;
	char *body;
	size_t bl;
	int err = 0;

	jbuf_init(&b);
	*ok = false;
	jbuf_lit(&b, "{\"compare\":[");
	for (size_t i = 0; i < ncmp && err == 0; i++) {
		const struct ctl_etcd_cmp *c = &cmp[i];

		if (!key_ok(c->key) ||
		    (c->kind == CTL_ETCD_CMP_VALUE && strlen(c->value) >= CTL_ETCD_VALUE_MAX)) {
			err = -E2BIG;
			break;
		}
		jbuf_lit(&b, i ? ",{" : "{");
		kv_b64(&b, "key", c->key, strlen(c->key));
		jbuf_lit(&b, ",\"result\":\"EQUAL\",");
		switch (c->kind) {
		case CTL_ETCD_CMP_ABSENT:
			jbuf_lit(&b, "\"target\":\"CREATE\",\"create_revision\":\"0\"");
			break;
		case CTL_ETCD_CMP_MOD_REV:
			jbuf_lit(&b, "\"target\":\"MOD\",");
			kv_lease(&b, "mod_revision", c->rev);
			break;
		case CTL_ETCD_CMP_VALUE:
			jbuf_lit(&b, "\"target\":\"VALUE\",");
			kv_b64(&b, "value", c->value, strlen(c->value));
			break;
		}
		jbuf_lit(&b, "}");
	}
	jbuf_lit(&b, "],\"success\":[");
	for (size_t i = 0; i < nops && err == 0; i++) {
		if (ops[i].value != NULL) {
			jbuf_lit(&b, i ? ",{\"request_put\":{" : "{\"request_put\":{");
			err = op_put(&b, &ops[i]);
		} else if (!key_ok(ops[i].key)) {
			err = -E2BIG;
		} else {
			jbuf_lit(&b, i ? ",{\"request_delete_range\":{"
				       : "{\"request_delete_range\":{");
			kv_b64(&b, "key", ops[i].key, strlen(ops[i].key));
		}
		jbuf_lit(&b, "}}");
	}
	jbuf_lit(&b, "]}");
	if (err == 0)
		err = post(e, "/v3/kv/txn", &b, &body, &bl);
	jbuf_free(&b);
	return err ? err : ctl_etcd_parse_txn(body, bl, ok);
}
