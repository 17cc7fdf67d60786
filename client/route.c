// SPDX-License-Identifier: Apache-2.0
/*
 * route.c - a topic's route: GET_ROUTEINFO_BY_TOPIC from the NameServers and
 * the TopicRouteData JSON it returns (docs/rocketmq-protocol.md §3.3, docs/namesrv.md).
 *
 * The body comes from the network, so it is untrusted (and fuzzed,
 * tests/fuzz/fuzz_route.c): json-c in strict mode with a small depth
 * limit, every field type- and range-checked, and the whole route laid out
 * in one allocation sized from the JSON itself. What a client cannot work
 * without is required (brokerName, the queue numbers, perm); what older or
 * other NameServers leave out is optional (cluster, brokerAddrs,
 * topicSysFlag, which RocketMQ <= 4.8 spells topicSynFlag, and sprocket's
 * dataplane fields). A field that is present with the wrong type or out of
 * range makes the route -EBADMSG: guessing at a half-valid endpoint would
 * send messages to the wrong place.
 *
 * A NameServer older than 4.9.4, or one that ignores acceptStandardJsonOnly,
 * writes brokerAddrs with bare integer keys ({0:"ip:port"}), which is not
 * JSON. When the strict parse fails the body is parsed once more with those
 * keys quoted, so such servers still work; standard JSON never pays for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/clock.h"
#include "sprocket/remoting.h"
#include "sprocket/route.h"

#define ROUTE_JSON_DEPTH 8	    /* route > brokerDatas > {} > dataplaneAddrs > "0" > field */
#define ROUTE_QUEUES_MAX 65536	    /* per queueData; RocketMQ's own limit is far lower */
#define ROUTE_KEY_DEPTH_MAX 64	    /* nesting the bare-key fixer follows */
#define ROUTE_FRAME_MAX (64u << 20) /* a route is small; the namesrv's own frame limit */
/* A C client: LanguageCode has no C, and CPP would claim rocketmq-client-cpp's quirks. */
#define ROUTE_LANGUAGE WIRE_LANG_OTHER

static struct json_object *
parse_strict(const char *json, size_t len)
{
	struct json_tokener *tok;
	struct json_object *o;
	size_t end;

	if (len > INT_MAX)
		return NULL;
	tok = json_tokener_new_ex(ROUTE_JSON_DEPTH);
	if (tok == NULL)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, json, (int)len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		json_tokener_free(tok);
		return NULL;
	}
	/* Trailing bytes: blanks only. */
	for (end = json_tokener_get_parse_end(tok); end < len; end++) {
		char ch = json[end];

		if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
			json_object_put(o);
			o = NULL;
			break;
		}
	}
	json_tokener_free(tok);
	return o;
}

/*
 * Copy @json with every bare integer object key ({0:"a"}) quoted ({"0":"a"}).
 * Return: the copy (malloc'd, NUL-terminated), or NULL when it nests too deep
 * or memory is short; the caller then reports the original parse failure.
 */
static char *
quote_bare_keys(const char *json, size_t len, size_t *out_len)
{
	bool obj[ROUTE_KEY_DEPTH_MAX]; /* container kinds, innermost last */
	int depth = 0;
	bool want_key = false;
	bool in_str = false;
	char *out;
	size_t o = 0;

	/* A bare key is at least a digit after '{' or ',': at most len / 2 keys grow by 2. */
	if (len > SIZE_MAX / 2 - 2)
		return NULL;
	out = malloc(len * 2 + 2);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		char ch = json[i];

		if (in_str) {
			out[o++] = ch;
			if (ch == '\\' && i + 1 < len)
				out[o++] = json[++i];
			else if (ch == '"')
				in_str = false;
			continue;
		}
		if (want_key && (ch == '-' || (ch >= '0' && ch <= '9'))) {
			out[o++] = '"';
			while (i < len && (json[i] == '-' || (json[i] >= '0' && json[i] <= '9')))
				out[o++] = json[i++];
			out[o++] = '"';
			i--;
			want_key = false;
			continue;
		}
		out[o++] = ch;
		if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
			continue;
		want_key = false;
		if (ch == '"') {
			in_str = true;
		} else if (ch == '{' || ch == '[') {
			if (depth == ROUTE_KEY_DEPTH_MAX) {
				free(out);
				return NULL;
			}
			obj[depth++] = ch == '{';
			want_key = ch == '{';
		} else if (ch == '}' || ch == ']') {
			depth -= depth > 0;
		} else if (ch == ',') {
			want_key = depth > 0 && obj[depth - 1];
		}
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}

/* @o as an int in [@min, @max]. Return: 0, -EBADMSG. */
static int
get_int(struct json_object *o, int64_t min, int64_t max, int64_t *v)
{
	if (!json_object_is_type(o, json_type_int))
		return -EBADMSG;
	*v = json_object_get_int64(o);
	return *v < min || *v > max ? -EBADMSG : 0;
}

/* Member @key of @obj as an int; -ENOENT when absent. */
static int
member_int(struct json_object *obj, const char *key, int64_t min, int64_t max, int64_t *v)
{
	struct json_object *m;

	if (!json_object_object_get_ex(obj, key, &m) || m == NULL)
		return -ENOENT;
	return get_int(m, min, max, v);
}

/* Member @key as a string of 1 .. @cap - 1 bytes without NUL, copied to @dst; -ENOENT absent. */
static int
member_str(struct json_object *obj, const char *key, char *dst, size_t cap)
{
	struct json_object *m;
	const char *s;
	size_t n;

	if (!json_object_object_get_ex(obj, key, &m) || m == NULL)
		return -ENOENT;
	if (!json_object_is_type(m, json_type_string))
		return -EBADMSG;
	s = json_object_get_string(m);
	n = (size_t)json_object_get_string_len(m);
	if (n == 0 || n >= cap || memchr(s, '\0', n) != NULL)
		return -EBADMSG;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

static bool
mac_parse(const char *s, uint8_t mac[6])
{
	for (int i = 0; i < 6; i++) {
		const char *p = s + i * 3;
		unsigned v = 0;

		for (int k = 0; k < 2; k++) {
			char ch = p[k];

			if (ch >= '0' && ch <= '9')
				v = v * 16 + (unsigned)(ch - '0');
			else if (ch >= 'a' && ch <= 'f')
				v = v * 16 + (unsigned)(ch - 'a' + 10);
			else if (ch >= 'A' && ch <= 'F')
				v = v * 16 + (unsigned)(ch - 'A' + 10);
			else
				return false;
		}
		if (p[2] != (i < 5 ? ':' : '\0'))
			return false;
		mac[i] = (uint8_t)v;
	}
	return true;
}

/* dataplaneAddrs["0"]: all four fields, each valid. */
static int
parse_dp(struct json_object *dp, struct sp_route_broker *b)
{
	char ip[16];
	char mac[18];
	int64_t cores;
	int64_t port;
	struct in_addr a;

	if (!json_object_is_type(dp, json_type_object))
		return -EBADMSG;
	if (member_str(dp, "ip", ip, sizeof(ip)) != 0 || inet_pton(AF_INET, ip, &a) != 1)
		return -EBADMSG;
	if (member_str(dp, "mac", mac, sizeof(mac)) != 0 || !mac_parse(mac, b->dp_mac))
		return -EBADMSG;
	if (member_int(dp, "port", 1, 65535, &port) != 0 ||
	    member_int(dp, "cores", 1, 65535, &cores) != 0 || port + cores - 1 > 65535)
		return -EBADMSG;
	b->dp_ip = a.s_addr;
	b->dp_port = (uint16_t)port;
	b->dp_cores = (uint16_t)cores;
	b->has_dp = true;
	return 0;
}

static int
parse_broker(struct json_object *bd, struct sp_route_broker *b)
{
	struct json_object *m;
	struct json_object *v;
	int rc;

	if (!json_object_is_type(bd, json_type_object))
		return -EBADMSG;
	if (member_str(bd, "brokerName", b->name, sizeof(b->name)) != 0)
		return -EBADMSG;
	rc = member_str(bd, "cluster", b->cluster, sizeof(b->cluster));
	if (rc == -EBADMSG)
		return rc;
	if (json_object_object_get_ex(bd, "brokerAddrs", &m) && m != NULL) {
		if (!json_object_is_type(m, json_type_object))
			return -EBADMSG;
		rc = member_str(m, "0", b->addr, sizeof(b->addr));
		if (rc == -EBADMSG)
			return rc;
	}
	if (json_object_object_get_ex(bd, "dataplaneAddrs", &m) && m != NULL) {
		long best = -1;

		if (!json_object_is_type(m, json_type_object))
			return -EBADMSG;
		if (json_object_object_get_ex(m, "0", &v) && v != NULL)
			return parse_dp(v, b);
		/*
		 * No master: the group's slave with the lowest brokerId serves
		 * reads (docs/replication.md); sends go to other groups.
		 */
		json_object_object_foreach(m, key, val)
		{
			char *end;
			long id = strtol(key, &end, 10);

			if (*end == '\0' && id > 0 && (best < 0 || id < best) && val != NULL) {
				best = id;
				v = val;
			}
		}
		if (best > 0) {
			rc = parse_dp(v, b);
			b->dp_is_slave = rc == 0;
			return rc;
		}
	}
	return 0;
}

static int
find_broker(const struct sp_route *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_brokers; i++) {
		if (strcmp(r->brokers[i].name, name) == 0)
			return (int)i;
	}
	return -1;
}

/* One queueData into r->queues[r->n_queues] (dropped when its broker is unknown). */
static int
parse_queue(struct json_object *qd, struct sp_route *r, uint16_t **cores_next)
{
	struct sp_route_queue *q = &r->queues[r->n_queues];
	char name[SP_NAME_MAX + 1];
	const struct sp_route_broker *b;
	struct json_object *m;
	int64_t rq;
	int64_t wq;
	int64_t perm;
	int64_t flag = 0;
	int bi;
	int rc;

	if (!json_object_is_type(qd, json_type_object))
		return -EBADMSG;
	if (member_str(qd, "brokerName", name, sizeof(name)) != 0 ||
	    member_int(qd, "readQueueNums", 0, ROUTE_QUEUES_MAX, &rq) != 0 ||
	    member_int(qd, "writeQueueNums", 0, ROUTE_QUEUES_MAX, &wq) != 0 ||
	    member_int(qd, "perm", 0, INT32_MAX, &perm) != 0)
		return -EBADMSG;
	rc = member_int(qd, "topicSysFlag", 0, INT32_MAX, &flag);
	if (rc == -ENOENT)
		rc = member_int(qd, "topicSynFlag", 0, INT32_MAX, &flag);
	if (rc == -EBADMSG)
		return rc;
	bi = find_broker(r, name);
	b = bi >= 0 ? &r->brokers[bi] : NULL;
	memset(q, 0, sizeof(*q));
	if (json_object_object_get_ex(qd, "dataplaneQueueCores", &m) && m != NULL) {
		size_t n;

		if (!json_object_is_type(m, json_type_array))
			return -EBADMSG;
		n = json_object_array_length(m);
		if (n > ROUTE_QUEUES_MAX)
			return -EBADMSG;
		for (size_t i = 0; i < n; i++) {
			int64_t c;

			if (get_int(json_object_array_get_idx(m, i), 0, 65535, &c) != 0)
				return -EBADMSG;
			/* A core the broker does not have: the map and the endpoint disagree. */
			if (b != NULL && b->has_dp && c >= b->dp_cores)
				return -EBADMSG;
			(*cores_next)[i] = (uint16_t)c;
		}
		if (n > 0 && b != NULL) {
			q->queue_cores = *cores_next;
			q->n_cores = (uint32_t)n;
			*cores_next += n;
		}
	}
	if (b == NULL)
		return 0; /* a queueData naming no brokerData: dropped (route.h) */
	q->broker = (uint32_t)bi;
	q->read_queues = (uint32_t)rq;
	q->write_queues = (uint32_t)wq;
	q->perm = (uint32_t)perm;
	q->sys_flag = (uint32_t)flag;
	r->n_queues++;
	return 0;
}

/* Member @key of @top as an array; an absent one is empty. Return: 0, -EBADMSG. */
static int
member_array(struct json_object *top, const char *key, struct json_object **arr, size_t *n)
{
	*arr = NULL;
	*n = 0;
	if (!json_object_object_get_ex(top, key, arr) || *arr == NULL)
		return 0;
	if (!json_object_is_type(*arr, json_type_array))
		return -EBADMSG;
	*n = json_object_array_length(*arr);
	return 0;
}

static int
route_build(struct json_object *top, struct sp_route **out)
{
	struct json_object *bds;
	struct json_object *qds;
	size_t nb;
	size_t nq;
	size_t ncores = 0;
	size_t off_b;
	size_t off_c;
	struct sp_route *r;
	uint16_t *cores;
	int rc;

	if (!json_object_is_type(top, json_type_object))
		return -EBADMSG;
	if (member_array(top, "brokerDatas", &bds, &nb) != 0 ||
	    member_array(top, "queueDatas", &qds, &nq) != 0)
		return -EBADMSG;
	/* Upper bounds from the JSON; what is dropped only leaves slack. */
	for (size_t i = 0; i < nq; i++) {
		struct json_object *m;

		if (json_object_object_get_ex(json_object_array_get_idx(qds, i),
					      "dataplaneQueueCores", &m) &&
		    json_object_is_type(m, json_type_array))
			ncores += json_object_array_length(m);
	}
	/* One block: route, queues, brokers, cores (alignment decreasing). */
	STATIC_ASSERT(sizeof(struct sp_route) % alignof(struct sp_route_queue) == 0, "layout");
	STATIC_ASSERT(sizeof(struct sp_route_queue) % alignof(struct sp_route_broker) == 0,
		      "layout");
	STATIC_ASSERT(sizeof(struct sp_route_broker) % alignof(uint16_t) == 0, "layout");
	off_b = sizeof(*r) + nq * sizeof(struct sp_route_queue);
	off_c = off_b + nb * sizeof(struct sp_route_broker);
	r = calloc(1, off_c + ncores * sizeof(uint16_t));
	if (r == NULL)
		return -ENOMEM;
	r->queues = (struct sp_route_queue *)(r + 1);
	r->brokers = (struct sp_route_broker *)((uint8_t *)r + off_b);
	cores = (uint16_t *)((uint8_t *)r + off_c);
	for (size_t i = 0; i < nb; i++) {
		rc = parse_broker(json_object_array_get_idx(bds, i), &r->brokers[i]);
		if (rc != 0)
			goto err_free;
		r->n_brokers++;
	}
	for (size_t i = 0; i < nq; i++) {
		rc = parse_queue(json_object_array_get_idx(qds, i), r, &cores);
		if (rc != 0)
			goto err_free;
	}
	if (r->n_brokers == 0)
		r->brokers = NULL;
	if (r->n_queues == 0)
		r->queues = NULL;
	*out = r;
	return 0;

err_free:
	free(r);
	return rc;
}

int
sp_route_parse(const char *json, size_t len, struct sp_route **out)
{
	struct json_object *top = parse_strict(json, len);
	int rc;

	if (top == NULL) {
		size_t flen = 0;
		char *fixed = quote_bare_keys(json, len, &flen);

		if (fixed == NULL)
			return -EBADMSG;
		top = parse_strict(fixed, flen);
		free(fixed);
		if (top == NULL)
			return -EBADMSG;
	}
	rc = route_build(top, out);
	json_object_put(top);
	return rc;
}

void
sp_route_free(struct sp_route *r)
{
	free(r);
}

uint16_t
sp_route_queue_core(const struct sp_route *r, const struct sp_route_queue *q, uint32_t qid)
{
	uint16_t cores = r->brokers[q->broker].dp_cores;

	if (q->queue_cores != NULL && qid < q->n_cores)
		return q->queue_cores[qid];
	return cores != 0 ? (uint16_t)(qid % cores) : 0;
}

/* One NameServer: connect, ask, parse. Return: 0, -ENOENT, -errno. */
static int
fetch_one(const char *addr, const char *topic, uint32_t timeout_ms, struct sp_route **out)
{
	uint64_t deadline = clk_mono_ns() + (uint64_t)timeout_ms * 1000000;
	struct wire_rem_cmd *req;
	struct sp_rem_resp resp;
	struct sp_rem *c;
	uint64_t now;
	int rc;

	rc = sp_rem_connect(addr, timeout_ms, &c);
	if (rc != 0)
		return rc;
	req = calloc(1, sizeof(*req));
	if (req == NULL) {
		rc = -ENOMEM;
		goto out_close;
	}
	req->code = WIRE_REQ_GET_ROUTEINFO_BY_TOPIC;
	req->version = WIRE_REM_VERSION_V4_9_8;
	req->language = ROUTE_LANGUAGE;
	req->serialize = WIRE_REM_JSON;
	/* Standard JSON (quoted broker ids) from 4.9.4+ Java NameServers too. */
	if ((rc = wire_rem_ext_add(req, "topic", topic)) != 0 ||
	    (rc = wire_rem_ext_add(req, "acceptStandardJsonOnly", "true")) != 0)
		goto out_free;
	now = clk_mono_ns();
	rc = now >= deadline
		     ? -ETIMEDOUT
		     : sp_rem_call(c, req, NULL, 0, (uint32_t)((deadline - now + 999999) / 1000000),
				   ROUTE_FRAME_MAX, &resp);
	if (rc != 0)
		goto out_free;
	if (resp.cmd.code == WIRE_RSP_SUCCESS)
		rc = sp_route_parse((const char *)resp.cmd.body, resp.cmd.body_len, out);
	else if (resp.cmd.code == WIRE_RSP_TOPIC_NOT_EXIST)
		rc = -ENOENT;
	else
		rc = -EPROTO;
	sp_rem_resp_free(&resp);
out_free:
	free(req);
out_close:
	sp_rem_close(c);
	return rc;
}

int
sp_route_fetch(const char *namesrv, const char *topic, uint32_t timeout_ms, struct sp_route **out)
{
	int rc = -EINVAL;

	if (namesrv == NULL || topic == NULL || topic[0] == '\0')
		return -EINVAL;
	for (const char *p = namesrv; *p != '\0';) {
		size_t n = strcspn(p, ";");
		char addr[300];

		/* Blanks around an address are allowed, as in RocketMQ's namesrvAddr. */
		while (n > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n > 0 && n < sizeof(addr)) {
			memcpy(addr, p, n);
			addr[n] = '\0';
			rc = fetch_one(addr, topic, timeout_ms, out);
			/* An answer ends the search; a dead or confused server does not. */
			if (rc == 0 || rc == -ENOENT)
				return rc;
		}
		p += strcspn(p, ";");
		if (*p == ';')
			p++;
	}
	return rc;
}
