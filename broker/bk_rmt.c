// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt.c - RocketMQ remoting on the broker's TCP port (bk_rmt.h,
 * docs/remoting.md, ../shared/reference/rocketmq-remoting.md §1, §4).
 *
 * DESIGN
 * One epoll loop in the control thread. A frame is decoded, checked, and
 * either answered here (heartbeats, consumer lists, locks, topic creation,
 * unknown codes) or turned into the dataplane request the core already
 * knows (SEND, SEND_BATCH, PULL, offsets, SEND_BACK) or an internal op
 * (earliest store time, records by physical offset), wrapped in a job and
 * posted on the owning core's command ring. The core answers into the job's
 * buffer; here the answer becomes the remoting response. A job whose
 * connection closed meanwhile is freed when it comes back (a parked pull
 * comes back at its deadline at the latest).
 *
 * Bounds: jobs in flight per core (SYSTEM_BUSY past it), bytes queued per
 * connection (reading pauses past it), frame size (the connection closes).
 * A malformed frame closes that connection only, with a log line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bk_msgtype.h"
#include "bk_rmt.h"
#include "common/clock.h"
#include "common/log.h"
#include "store/clog.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

#define TAG "broker.remoting"
#define OUT_PAUSE (16u << 20)	    /* stop reading a connection with this much unsent */
#define PULL_MAX_BYTES (256u << 10) /* RocketMQ's in-memory transfer limit */
#define PULL_MAX_MSGS 32
#define QUERY_MAX 64
#define HDR_MIN (64u << 10) /* header buffer; grows for long extFields (batch msgIds) */
#define SUBS_MAX 64
#define SUB_CODES_MAX BK_PULL_TAGS_MAX
#define READ_CHUNK (64u << 10)
/* Requests of one connection at the cores at once: bounds what its answers can hold (256 MiB). */
#define CONN_JOBS_MAX 1024u

/* ---- state ---- */

struct rconn {
	int fd;
	uint32_t id;  /* slot in r->conns */
	uint32_t gen; /* bumped when the slot is reused */
	char peer_s[24];
	struct dp_addr peer;
	uint8_t *in;
	size_t in_len, in_cap;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	int32_t next_opaque; /* our requests to the client (NOTIFY_CONSUMER_IDS_CHANGED) */
	uint32_t jobs;	     /* its requests at the cores */
	bool paused;	     /* EPOLLIN off: too much unsent */
	bool closing;	     /* closed: torn down by conns_reap(), never used again */
	bool want_out;	     /* EPOLLOUT on */
};

/* A request at a core. bk_rcmd first: the core sees only that. */
struct rjob {
	struct bk_rcmd c;
	uint32_t conn, gen;
	int32_t opaque;
	int32_t code;
	uint8_t serialize;
	bool oneway;
	uint8_t redirects;
	uint32_t batch_n;
	struct rjob *prev, *next; /* every job in flight, for teardown */
	uint8_t *reqbuf;
	int64_t phys[QUERY_MAX];
};

struct rsub {
	char topic[META_TOPIC_MAX + 1];
	uint16_t ncodes; /* 0: every tag */
	int32_t codes[SUB_CODES_MAX];
};

struct rmember {
	char client_id[256];
	uint32_t conn, gen;
	uint64_t last_ms;
	uint16_t nsubs;
	struct rsub subs[SUBS_MAX];
};

struct rgroup {
	char name[META_GROUP_MAX + 1];
	struct rmember *m;
	size_t n, cap;
};

struct rlock {
	char group[META_GROUP_MAX + 1];
	char topic[META_TOPIC_MAX + 1];
	int32_t qid;
	char client_id[256];
	uint64_t last_ms;
};

struct bk_rmt {
	struct bk *bk;
	struct bk_rmt_conf conf;
	struct bk_rmt_ops ops;
	int ep;
	int lfd;
	uint16_t port;
	struct rconn **conns;
	uint32_t nconns;
	uint32_t serial;
	uint32_t *inflight; /* per core */
	struct rjob *jobs;
	struct rgroup *groups;
	size_t ngroups;
	struct rlock *locks;
	size_t nlocks, locks_cap;
	char *scratch;
	size_t scratch_cap;
	uint8_t *hdr;
	size_t hdr_cap;
	uint64_t now_ms;
	uint64_t next_sweep_ms;
	struct rconn *fuzz_conn;
	bool any_closing;
	unsigned work; /* frames and completions handled by this bk_rmt_run() */
};

/* ---- connections: output ---- */

static void
conn_events(struct bk_rmt *r, struct rconn *c)
{
	struct epoll_event ev = {.events = (c->paused ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0),
				 .data.u32 = c->id};

	if (c->fd >= 0)
		(void)epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_close(struct bk_rmt *r, struct rconn *c, const char *why);

/* Writes what it can. Return: 0, -1 the connection was closed. */
static int
conn_flush(struct bk_rmt *r, struct rconn *c)
{
	if (c->closing)
		return -1;
	while (c->out_off < c->out_len) {
		ssize_t n;

		if (c->fd < 0) { /* fuzzing: nobody reads */
			c->out_off = c->out_len;
			break;
		}
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			conn_close(r, c, strerror(errno));
			return -1;
		}
		c->out_off += (size_t)n;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	bool want = c->out_len > 0;
	bool pause = c->out_len - c->out_off > OUT_PAUSE;

	if (want != c->want_out || pause != c->paused) {
		c->want_out = want;
		c->paused = pause;
		conn_events(r, c);
	}
	return 0;
}

static int
conn_append(struct rconn *c, const void *p, size_t n)
{
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		uint8_t *b;

		if (c->out_off > 0) { /* compact first */
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		while (cap < c->out_len + n)
			cap *= 2;
		if (cap != c->out_cap) {
			b = realloc(c->out, cap);
			if (b == NULL)
				return -ENOMEM;
			c->out = b;
			c->out_cap = cap;
		}
	}
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
	return 0;
}

/* A response (or, with @request, a request of ours) to @c. */
struct rresp {
	int32_t code;
	int32_t opaque;
	uint8_t serialize;
	bool request; /* a oneway request from us */
	const char *remark;
	uint16_t n_ext;
	const char *ext[16][2];
	const uint8_t *body;
	uint32_t body_len;
};

static void
resp_ext(struct rresp *o, const char *k, const char *v)
{
	if (o->n_ext < 16) {
		o->ext[o->n_ext][0] = k;
		o->ext[o->n_ext][1] = v;
		o->n_ext++;
	}
}

static void
conn_send(struct bk_rmt *r, struct rconn *c, const struct rresp *o)
{
	struct wire_rem_cmd cmd = {
		.code = o->code,
		.opaque = o->opaque,
		.flag = o->request ? WIRE_REM_FLAG_ONEWAY : WIRE_REM_FLAG_RESPONSE,
		.version = WIRE_REM_VERSION_V4_9_8,
		.language = WIRE_LANG_JAVA,
		.serialize = o->serialize,
		.remark = o->remark,
		.remark_len = o->remark ? (uint32_t)strlen(o->remark) : 0,
		.body_len = o->body_len,
	};
	size_t hl, need = 1024 + cmd.remark_len * 6;
	int err;

	for (uint16_t i = 0; i < o->n_ext; i++) {
		if (wire_rem_ext_add(&cmd, o->ext[i][0], o->ext[i][1]) != 0)
			break;
		/* JSON escapes at most 6 bytes per byte (\u00XX) */
		need += (strlen(o->ext[i][0]) + strlen(o->ext[i][1])) * 6 + 8;
	}
	if (need > r->hdr_cap) {
		uint8_t *b = realloc(r->hdr, need);

		if (b == NULL) {
			conn_close(r, c, "out of memory");
			return;
		}
		r->hdr = b;
		r->hdr_cap = need;
	}
	err = wire_rem_encode_header(&cmd, r->hdr, r->hdr_cap, &hl);
	if (err != 0) {
		log_warn_ratelimited(TAG, "cannot encode the answer to request %d: %s", o->opaque,
				     strerror(-err));
		conn_close(r, c, "cannot encode a response header");
		return;
	}
	if (conn_append(c, r->hdr, hl) != 0 ||
	    (o->body_len && conn_append(c, o->body, o->body_len) != 0)) {
		conn_close(r, c, "out of memory");
		return;
	}
	(void)conn_flush(r, c);
}

static void
reply(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, int32_t code,
      const char *remark)
{
	struct rresp o = {
		.code = code, .opaque = q->opaque, .serialize = q->serialize, .remark = remark};

	if (q->flag & WIRE_REM_FLAG_ONEWAY)
		return;
	conn_send(r, c, &o);
}

/* ---- jobs ---- */

static struct rconn *
conn_get(struct bk_rmt *r, uint32_t id, uint32_t gen)
{
	if (id < r->nconns && r->conns[id] && r->conns[id]->gen == gen && !r->conns[id]->closing)
		return r->conns[id];
	if (r->fuzz_conn && r->fuzz_conn->id == id && r->fuzz_conn->gen == gen &&
	    !r->fuzz_conn->closing)
		return r->fuzz_conn;
	return NULL;
}

static void
job_free(struct bk_rmt *r, struct rjob *j)
{
	struct rconn *c = conn_get(r, j->conn, j->gen);

	if (c && c->jobs)
		c->jobs--;
	if (j->prev)
		j->prev->next = j->next;
	else
		r->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	free(j->reqbuf);
	free(j->c.resp);
	free(j);
}

/* Return: a new job for @c's request @q, or NULL: out of memory or @c has too many (busy). */
static struct rjob *
job_new(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, uint16_t op,
	uint32_t req_cap, uint32_t resp_cap)
{
	struct rjob *j;

	if (c->jobs >= CONN_JOBS_MAX)
		return NULL;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	j->reqbuf = req_cap ? malloc(req_cap) : NULL;
	j->c.resp = malloc(resp_cap);
	if ((req_cap && !j->reqbuf) || !j->c.resp) {
		free(j->reqbuf);
		free(j->c.resp);
		free(j);
		return NULL;
	}
	j->c.op = op;
	j->c.resp_cap = resp_cap;
	j->c.req = j->reqbuf;
	j->c.peer = c->peer;
	j->conn = c->id;
	j->gen = c->gen;
	j->opaque = q->opaque;
	j->code = q->code;
	j->serialize = q->serialize;
	j->oneway = (q->flag & WIRE_REM_FLAG_ONEWAY) != 0;
	j->next = r->jobs;
	if (r->jobs)
		r->jobs->prev = j;
	r->jobs = j;
	c->jobs++;
	return j;
}

/* Posts @j to @core. Return: 0, -EAGAIN (busy: @j is freed, caller answers). */
static int
job_post(struct bk_rmt *r, struct rjob *j, uint16_t core)
{
	if (core >= r->bk->ncores || r->inflight[core] >= r->conf.inflight_per_core) {
		job_free(r, j);
		return -EAGAIN;
	}
	j->c.core = core;
	j->c.serial = ++r->serial ? r->serial : ++r->serial; /* never 0 */
	j->c.recv_ns = j->c.recv_ns ? j->c.recv_ns : clk_mono_ns();
	if (dp_lcore_post(&r->bk->cores[core].lc, &j->c) != 0) {
		job_free(r, j);
		return -EAGAIN;
	}
	r->inflight[core]++;
	return 0;
}

static void
busy_answer(struct bk_rmt *r, struct rconn *c, int32_t code, int32_t opaque, uint8_t serialize)
{
	struct rresp o = {.code = WIRE_RSP_SYSTEM_BUSY,
			  .opaque = opaque,
			  .serialize = serialize,
			  .remark = "[OVERLOAD]system busy, too many requests in flight"};

	/* clients read the four offsets from every pull answer */
	if (code == WIRE_REQ_PULL_MESSAGE) {
		resp_ext(&o, "nextBeginOffset", "0");
		resp_ext(&o, "minOffset", "0");
		resp_ext(&o, "maxOffset", "0");
		resp_ext(&o, "suggestWhichBrokerId", "0");
	}
	conn_send(r, c, &o);
}

static void
busy(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		busy_answer(r, c, q->code, q->opaque, q->serialize);
}

/* ---- helpers ---- */

/* Return: extField @k as a NUL-terminated string (the decoder terminates them), or NULL. */
static const char *
ext_s(const struct wire_rem_cmd *q, const char *k, size_t *len)
{
	const struct wire_kv *kv = wire_rem_ext_get(q, k);

	if (kv == NULL)
		return NULL;
	if (len)
		*len = kv->val_len;
	return kv->val;
}

/* Return: 0 and *@v, or -1 when absent or not an integer. Several names: V1 then V2. */
static int
ext_i(const struct wire_rem_cmd *q, const char *k, const char *k2, int64_t *v)
{
	if (wire_rem_ext_i64(q, k, v) == 0)
		return 0;
	if (k2 && wire_rem_ext_i64(q, k2, v) == 0)
		return 0;
	return -1;
}

static const char *
ext_s2(const struct wire_rem_cmd *q, const char *k, const char *k2, size_t *len)
{
	const char *s = ext_s(q, k, len);

	return s ? s : (k2 ? ext_s(q, k2, len) : NULL);
}

static bool
is_send_forbidden(const char *t)
{
	static const char *const sys[] = {"SCHEDULE_TOPIC_XXXX",
					  "RMQ_SYS_TRANS_HALF_TOPIC",
					  "RMQ_SYS_TRANS_OP_HALF_TOPIC",
					  "TRANS_CHECK_MAX_TIME_TOPIC",
					  "SELF_TEST_TOPIC",
					  "OFFSET_MOVED_EVENT",
					  NULL};

	for (unsigned i = 0; sys[i]; i++)
		if (strcmp(t, sys[i]) == 0)
			return true;
	return false;
}

/* Tag hashes of a TAG expression ("*", "", "a || b"). Return: count, 0 = every tag. */
static uint16_t
expr_codes(const char *e, size_t len, int32_t *codes, uint16_t max, bool *too_many)
{
	uint16_t n = 0;
	size_t i = 0;

	*too_many = false;
	while (i < len) {
		size_t s, t;

		while (i < len && (e[i] == ' ' || e[i] == '\t'))
			i++;
		s = i;
		while (i < len && !(e[i] == '|' && i + 1 < len && e[i + 1] == '|'))
			i++;
		t = i;
		while (t > s && (e[t - 1] == ' ' || e[t - 1] == '\t'))
			t--;
		if (t - s == 1 && e[s] == '*')
			return 0;
		if (t > s) {
			if (n == max) {
				*too_many = true;
				return 0;
			}
			codes[n++] = wire_tag_hash(e + s, t - s);
		}
		if (i < len)
			i += 2;
	}
	return n;
}

/* The topic @name, creating it when allowed. Return: the topic, or NULL with *@code set. */
static const struct bk_topic *
topic_get(struct bk_rmt *r, const char *name, size_t len, uint32_t create_queues, int32_t *code,
	  const char **why)
{
	const struct bk_topic *t = bk_topic_find(r->bk, name, len);
	struct meta_topic mt = {0};

	if (t || create_queues == 0) {
		if (!t) {
			*code = WIRE_RSP_TOPIC_NOT_EXIST;
			*why = "topic not exist, apply first please!";
		}
		return t;
	}
	if (!bk_topic_name_ok(name, len)) {
		*code = WIRE_RSP_SYSTEM_ERROR;
		*why = "the topic name is not valid: ^[%|a-zA-Z0-9_-]{1,127}$";
		return NULL;
	}
	memcpy(mt.name, name, len);
	mt.read_queues = mt.write_queues = create_queues;
	mt.perm = META_PERM_READ | META_PERM_WRITE;
	if (r->ops.topic_put(r->ops.arg, &mt) != 0) {
		*code = WIRE_RSP_SYSTEM_ERROR;
		*why = "creating the topic failed";
		return NULL;
	}
	t = bk_topic_find(r->bk, name, len);
	if (t == NULL) {
		*code = WIRE_RSP_SYSTEM_ERROR;
		*why = "creating the topic failed";
	}
	return t;
}

static uint32_t
rnd(void)
{
	static uint32_t x = 2463534242u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

/* ---- consumer groups ---- */

static struct rgroup *
group_find(struct bk_rmt *r, const char *g, bool create)
{
	struct rgroup *n;

	for (size_t i = 0; i < r->ngroups; i++)
		if (strcmp(r->groups[i].name, g) == 0)
			return &r->groups[i];
	if (!create || strlen(g) > META_GROUP_MAX)
		return NULL;
	n = realloc(r->groups, sizeof(*n) * (r->ngroups + 1));
	if (n == NULL)
		return NULL;
	r->groups = n;
	n = &r->groups[r->ngroups++];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", g);
	return n;
}

static void
group_notify(struct bk_rmt *r, const struct rgroup *g)
{
	for (size_t i = 0; i < g->n; i++) {
		struct rconn *c = conn_get(r, g->m[i].conn, g->m[i].gen);
		struct rresp o = {.code = WIRE_REQ_NOTIFY_CONSUMER_IDS_CHANGED, .request = true};

		if (c == NULL)
			continue;
		o.opaque = c->next_opaque++;
		resp_ext(&o, "consumerGroup", g->name);
		conn_send(r, c, &o);
	}
}

static void
member_remove(struct rgroup *g, size_t i)
{
	g->m[i] = g->m[--g->n];
}

/* Forgets groups without members: client-chosen names must not grow memory for ever. */
static void
groups_drop_empty(struct bk_rmt *r)
{
	for (size_t k = 0; k < r->ngroups;) {
		if (r->groups[k].n == 0) {
			free(r->groups[k].m);
			r->groups[k] = r->groups[--r->ngroups];
			continue;
		}
		k++;
	}
}

/* Drops members of connection @id (closed) or silent ones; notifies the groups that changed. */
static void
groups_sweep(struct bk_rmt *r, bool by_conn, uint32_t id, uint32_t gen)
{
	for (size_t k = 0; k < r->ngroups; k++) {
		struct rgroup *g = &r->groups[k];
		bool changed = false;

		for (size_t i = 0; i < g->n;) {
			struct rmember *m = &g->m[i];
			bool drop = by_conn ? (m->conn == id && m->gen == gen)
					    : r->now_ms - m->last_ms > r->conf.client_expire_ms;

			if (drop) {
				log_info(TAG, "group %s: consumer %s left (%s)", g->name,
					 m->client_id, by_conn ? "connection closed" : "silent");
				member_remove(g, i);
				changed = true;
				continue;
			}
			i++;
		}
		if (changed)
			group_notify(r, g);
	}
	groups_drop_empty(r);
}

static const struct rsub *
group_sub(struct bk_rmt *r, const char *group, const char *topic)
{
	struct rgroup *g = group_find(r, group, false);

	if (g == NULL)
		return NULL;
	for (size_t i = 0; i < g->n; i++)
		for (uint16_t k = 0; k < g->m[i].nsubs; k++)
			if (strcmp(g->m[i].subs[k].topic, topic) == 0)
				return &g->m[i].subs[k];
	return NULL;
}

static const char *
js(json_object *o, const char *k)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static json_object *
jparse(const uint8_t *b, size_t len)
{
	struct json_tokener *tok;
	json_object *o;

	if (len == 0 || len > (64u << 20))
		return NULL;
	tok = json_tokener_new();
	if (tok == NULL)
		return NULL;
	o = json_tokener_parse_ex(tok, (const char *)b, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static void
sub_parse(json_object *s, struct rsub *out)
{
	json_object *cs;
	const char *topic = js(s, "topic");
	const char *expr = js(s, "subString");
	bool many;

	memset(out, 0, sizeof(*out));
	if (topic)
		snprintf(out->topic, sizeof(out->topic), "%s", topic);
	if (json_object_object_get_ex(s, "codeSet", &cs) &&
	    json_object_is_type(cs, json_type_array) && json_object_array_length(cs) > 0) {
		size_t n = json_object_array_length(cs);

		if (n > SUB_CODES_MAX)
			return; /* too many to filter on the broker: the client filters */
		for (size_t i = 0; i < n; i++)
			out->codes[out->ncodes++] =
				(int32_t)json_object_get_int64(json_object_array_get_idx(cs, i));
		return;
	}
	if (expr)
		out->ncodes = expr_codes(expr, strlen(expr), out->codes, SUB_CODES_MAX, &many);
}

static bool
subs_eq(const struct rmember *a, const struct rmember *b)
{
	if (a->nsubs != b->nsubs)
		return false;
	for (uint16_t i = 0; i < a->nsubs; i++) {
		const struct rsub *x = &a->subs[i], *y = &b->subs[i];

		if (strcmp(x->topic, y->topic) != 0 || x->ncodes != y->ncodes ||
		    memcmp(x->codes, y->codes, sizeof(x->codes[0]) * x->ncodes) != 0)
			return false;
	}
	return true;
}

static void
do_heartbeat(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	json_object *o = jparse(q->body, q->body_len), *set;
	const char *cid;

	if (o == NULL || (cid = js(o, "clientID")) == NULL || strlen(cid) >= 256) {
		json_object_put(o);
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "heartbeat body is not valid HeartbeatData");
		return;
	}
	if (json_object_object_get_ex(o, "consumerDataSet", &set) &&
	    json_object_is_type(set, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(set); i++) {
			json_object *cd = json_object_array_get_idx(set, i), *subs;
			const char *gname = js(cd, "groupName");
			struct rgroup *g;
			struct rmember nm = {0}, *m = NULL;
			char retry[META_TOPIC_MAX + 1];
			int32_t code;
			const char *why;
			bool changed = false;

			if (gname == NULL || !gname[0] || strlen(gname) > META_GROUP_MAX)
				continue;
			g = group_find(r, gname, true);
			if (g == NULL)
				continue;
			snprintf(nm.client_id, sizeof(nm.client_id), "%s", cid);
			nm.conn = c->id;
			nm.gen = c->gen;
			nm.last_ms = r->now_ms;
			if (json_object_object_get_ex(cd, "subscriptionDataSet", &subs) &&
			    json_object_is_type(subs, json_type_array))
				for (size_t k = 0;
				     k < json_object_array_length(subs) && nm.nsubs < SUBS_MAX; k++)
					sub_parse(json_object_array_get_idx(subs, k),
						  &nm.subs[nm.nsubs++]);
			for (size_t k = 0; k < g->n; k++)
				if (strcmp(g->m[k].client_id, cid) == 0)
					m = &g->m[k];
			if (m == NULL) {
				if (g->n == g->cap) {
					size_t cap = g->cap ? g->cap * 2 : 4;
					struct rmember *nmv = realloc(g->m, sizeof(*nmv) * cap);

					if (nmv == NULL)
						continue;
					g->m = nmv;
					g->cap = cap;
				}
				m = &g->m[g->n++];
				changed = true;
				log_info(TAG, "group %s: consumer %s joined from %s", gname, cid,
					 c->peer_s);
			} else if (m->conn != nm.conn || m->gen != nm.gen || !subs_eq(m, &nm)) {
				changed = true;
			}
			*m = nm;
			/* Its retry topic, as RocketMQ: one queue, read and write. */
			if (strlen(gname) + 7 <= META_TOPIC_MAX) {
				snprintf(retry, sizeof(retry), "%s%s", BK_RETRY_PREFIX, gname);
				(void)topic_get(r, retry, strlen(retry), 1, &code, &why);
			}
			if (changed)
				group_notify(r, g);
		}
	}
	json_object_put(o);
	reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

static void
do_unregister(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *cid = ext_s(q, "clientID", NULL);
	const char *gname = ext_s(q, "consumerGroup", NULL);
	struct rgroup *g = gname ? group_find(r, gname, false) : NULL;

	if (cid && g) {
		for (size_t i = 0; i < g->n; i++) {
			if (strcmp(g->m[i].client_id, cid) == 0) {
				log_info(TAG, "group %s: consumer %s unregistered", g->name, cid);
				member_remove(g, i);
				group_notify(r, g);
				break;
			}
		}
	}
	reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
do_consumer_list(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const char *gname = ext_s(q, "consumerGroup", NULL);
	struct rgroup *g = gname ? group_find(r, gname, false) : NULL;
	char remark[320];
	json_object *o, *arr;
	const char **ids;
	struct rresp out = {
		.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
	const char *s;

	if (g == NULL || g->n == 0) {
		snprintf(remark, sizeof(remark), "no consumer for this group, %s",
			 gname ? gname : "");
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, remark);
		return;
	}
	ids = malloc(sizeof(*ids) * g->n);
	o = json_object_new_object();
	arr = json_object_new_array();
	if (!ids || !o || !arr) {
		free(ids);
		json_object_put(o);
		json_object_put(arr);
		busy(r, c, q);
		return;
	}
	for (size_t i = 0; i < g->n; i++)
		ids[i] = g->m[i].client_id;
	qsort(ids, g->n, sizeof(*ids), cmp_str);
	for (size_t i = 0; i < g->n; i++)
		if (i == 0 || strcmp(ids[i], ids[i - 1]) != 0)
			json_object_array_add(arr, json_object_new_string(ids[i]));
	json_object_object_add(o, "consumerIdList", arr);
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	out.body = (const uint8_t *)s;
	out.body_len = (uint32_t)strlen(s);
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		conn_send(r, c, &out);
	json_object_put(o);
	free(ids);
}

/* ---- queue locks (orderly consumers) ---- */

static struct rlock *
lock_find(struct bk_rmt *r, const char *g, const char *t, int32_t qid)
{
	for (size_t i = 0; i < r->nlocks; i++)
		if (r->locks[i].qid == qid && strcmp(r->locks[i].group, g) == 0 &&
		    strcmp(r->locks[i].topic, t) == 0)
			return &r->locks[i];
	return NULL;
}

static void
do_lock(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, bool lock)
{
	json_object *o = jparse(q->body, q->body_len), *set, *ok = NULL, *res = NULL;
	const char *g = o ? js(o, "consumerGroup") : NULL;
	const char *cid = o ? js(o, "clientId") : NULL;
	struct rresp out = {
		.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};

	if (!g || !cid || strlen(g) > META_GROUP_MAX || strlen(cid) >= 256 ||
	    !json_object_object_get_ex(o, "mqSet", &set) ||
	    !json_object_is_type(set, json_type_array)) {
		json_object_put(o);
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
		      "lock body is not valid LockBatchRequestBody");
		return;
	}
	if (lock) {
		res = json_object_new_object();
		ok = json_object_new_array();
	}
	for (size_t i = 0; i < json_object_array_length(set); i++) {
		json_object *mq = json_object_array_get_idx(set, i), *qv;
		const char *t = js(mq, "topic");
		int32_t qid;
		struct rlock *l;

		if (!t || strlen(t) > META_TOPIC_MAX ||
		    !json_object_object_get_ex(mq, "queueId", &qv))
			continue;
		qid = (int32_t)json_object_get_int(qv);
		l = lock_find(r, g, t, qid);
		if (!lock) {
			if (l && strcmp(l->client_id, cid) == 0)
				*l = r->locks[--r->nlocks];
			continue;
		}
		if (l && strcmp(l->client_id, cid) != 0 &&
		    r->now_ms - l->last_ms <= r->conf.lock_expire_ms)
			continue; /* someone else holds it */
		if (l == NULL) {
			if (r->nlocks == r->locks_cap) {
				size_t cap = r->locks_cap ? r->locks_cap * 2 : 64;
				struct rlock *nl = realloc(r->locks, sizeof(*nl) * cap);

				if (nl == NULL)
					continue;
				r->locks = nl;
				r->locks_cap = cap;
			}
			l = &r->locks[r->nlocks++];
			snprintf(l->group, sizeof(l->group), "%s", g);
			snprintf(l->topic, sizeof(l->topic), "%s", t);
			l->qid = qid;
		}
		snprintf(l->client_id, sizeof(l->client_id), "%s", cid);
		l->last_ms = r->now_ms;
		if (ok)
			json_object_array_add(ok, json_object_get(mq));
	}
	if (lock && res && ok) {
		const char *s;

		json_object_object_add(res, "lockOKMQSet", ok);
		s = json_object_to_json_string_ext(res, JSON_C_TO_STRING_PLAIN);
		out.body = (const uint8_t *)s;
		out.body_len = (uint32_t)strlen(s);
		if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
			conn_send(r, c, &out);
		json_object_put(res);
	} else {
		json_object_put(res);
		json_object_put(ok);
		reply(r, c, q, lock ? WIRE_RSP_SYSTEM_BUSY : WIRE_RSP_SUCCESS, NULL);
	}
	json_object_put(o);
}

/* ---- topic creation ---- */

static void
do_create_topic(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t len;
	const char *name = ext_s(q, "topic", &len);
	int64_t rq = 0, wq = 0, perm = 6, sysflag = 0;
	struct meta_topic mt = {0};
	bool order = false;

	if (name == NULL || !bk_topic_name_ok(name, len)) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the topic name is not valid");
		return;
	}
	if (ext_i(q, "readQueueNums", NULL, &rq) || ext_i(q, "writeQueueNums", NULL, &wq) ||
	    rq < 1 || wq < 1 || rq > 65535 || wq > 65535) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
		      "readQueueNums and writeQueueNums must be 1..65535");
		return;
	}
	(void)ext_i(q, "perm", NULL, &perm);
	(void)ext_i(q, "topicSysFlag", NULL, &sysflag);
	if (wire_rem_ext_bool(q, "order", &order) != 0)
		order = false;
	if (perm < 0 || perm > META_PERM_MAX) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "perm must be 0..15");
		return;
	}
	memcpy(mt.name, name, len);
	mt.read_queues = (uint32_t)rq;
	mt.write_queues = (uint32_t)wq;
	mt.perm = (uint32_t)perm;
	mt.sys_flag = (uint32_t)sysflag;
	mt.order = order;
	if (r->ops.topic_put(r->ops.arg, &mt) != 0) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "creating the topic failed (see the log)");
		return;
	}
	log_info(TAG, "topic %s created or updated by %s (%u/%u queues, perm %u)", mt.name,
		 c->peer_s, mt.read_queues, mt.write_queues, mt.perm);
	reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
}

/* ---- data requests: to the owning core ---- */

/* A slave takes no write (RocketMQ: "messages are put to the slave"). Return: refused. */
static bool
slave_refuses(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	char remark[200];

	if (r->bk->conf.role != BK_ROLE_SLAVE)
		return false;
	snprintf(remark, sizeof(remark),
		 "service not available now: this broker is a slave (brokerId %" PRId64
		 " of %s) and takes no writes; send to its master",
		 r->bk->conf.broker_id, r->bk->conf.broker_name);
	reply(r, c, q, WIRE_RSP_SERVICE_NOT_AVAILABLE, remark);
	return true;
}

static void
do_send(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	bool batch = q->code == WIRE_REQ_SEND_BATCH_MESSAGE;
	size_t tl = 0, pl = 0;
	const char *topic = ext_s2(q, "topic", "b", &tl);
	const char *props = ext_s2(q, "properties", "i", &pl);
	int64_t qid = -1, sysflag = 0, born = 0, flag = 0, recon = 0, dq = 0, maxre = -1;
	struct wire_dp_send_req s = {0};
	const struct bk_topic *t;
	char dlq[META_TOPIC_MAX + 1];
	struct rjob *j;
	const char *why = NULL;
	unsigned asks = 0;
	int32_t code = 0;
	uint32_t n = 0, cap;
	long len;

	if (slave_refuses(r, c, q))
		return;
	if (topic == NULL || ext_i(q, "queueId", "e", &qid) ||
	    ext_i(q, "bornTimestamp", "g", &born)) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
		      "the send header lacks topic, queueId or bornTimestamp");
		return;
	}
	(void)ext_i(q, "sysFlag", "f", &sysflag);
	(void)ext_i(q, "flag", "h", &flag);
	(void)ext_i(q, "reconsumeTimes", "j", &recon);
	(void)ext_i(q, "defaultTopicQueueNums", "d", &dq);
	(void)ext_i(q, "maxReconsumeTimes", "l", &maxre);
	if (!bk_topic_name_ok(topic, tl)) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
		      "the topic name is not valid: ^[%|a-zA-Z0-9_-]{1,127}$");
		return;
	}
	if (is_send_forbidden(topic)) {
		reply(r, c, q, WIRE_RSP_NO_PERMISSION, "sending to this system topic is forbidden");
		return;
	}
	if (q->body_len == 0 || (!batch && q->body_len > r->bk->conf.max_msg_size)) {
		reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL,
		      q->body_len ? "the message body is larger than maxMessageSize"
				  : "the message body is empty");
		return;
	}
	if (pl > WIRE_DP_PROPS_MAX) {
		reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL, "the message properties are too long");
		return;
	}
	/* Not retried by RocketMQ's producers (MESSAGE_ILLEGAL): the reason reaches the caller. */
	why = bk_msg_refused(props, pl, (int32_t)sysflag,
			     batch ? 0u : bk_core_msg_allow(&r->bk->cores[0]), &asks);
	if (why == NULL && (asks & BK_MSG_TIMER)) {
		int64_t due;

		if (bk_timer_due(r->bk, props, pl, clk_wall_ms(), &due, &why) >= 0)
			why = NULL;
	}
	if (why != NULL) {
		reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL, why);
		return;
	}
	/* A retry-topic send past maxReconsumeTimes goes to the group's DLQ (RocketMQ). */
	if (!batch && tl > 7 && memcmp(topic, BK_RETRY_PREFIX, 7) == 0 &&
	    recon >= (maxre >= 0 ? maxre : (int64_t)r->bk->conf.max_reconsume) &&
	    tl - 7 + 5 <= META_TOPIC_MAX) {
		snprintf(dlq, sizeof(dlq), "%s%.*s", BK_DLQ_PREFIX, (int)(tl - 7), topic + 7);
		topic = dlq;
		tl = strlen(dlq);
		qid = 0;
	}
	{
		uint32_t create = 0;

		if (tl > 7 && memcmp(topic, BK_RETRY_PREFIX, 7) == 0)
			create = 1;
		else if (tl > 5 && memcmp(topic, BK_DLQ_PREFIX, 5) == 0)
			create = 1;
		else if (r->bk->conf.auto_create)
			create = dq > 0 ? (uint32_t)SP_MIN((uint64_t)dq,
							   (uint64_t)r->bk->conf.default_queues)
					: r->bk->conf.default_queues;
		t = topic_get(r, topic, tl, create, &code, &why);
	}
	if (t == NULL) {
		char remark[200];

		snprintf(remark, sizeof(remark), "topic[%.*s] %s", (int)tl, topic, why);
		reply(r, c, q, code, remark);
		return;
	}
	if (qid < 0)
		qid = (int64_t)(rnd() % t->write_queues);
	if ((uint64_t)qid >= t->write_queues) {
		char remark[160];

		/* RocketMQ takes any queue < max(read, write); the core writes only to write queues. */
		snprintf(remark, sizeof(remark),
			 "request queueId[%" PRId64 "] is illegal, topic has %u write queues", qid,
			 t->write_queues);
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, remark);
		return;
	}
	if (batch) {
		struct wire_batch_item it;
		size_t pos = 0;
		int k;

		while ((k = wire_batch_next(q->body, q->body_len, &pos, &it)) == 1) {
			why = bk_msg_refused(it.props, it.props_len, (int32_t)sysflag, 0, NULL);
			if (why != NULL) {
				reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL, why);
				return;
			}
			n++;
		}
		if (k < 0 || n == 0) {
			reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL, "the batch body is malformed");
			return;
		}
	}
	s.born_ts = born;
	s.queue_id = (int32_t)qid;
	s.flag = batch ? 0 : (int32_t)flag;
	s.sysflag = (int32_t)sysflag;
	s.reconsume_times = batch ? 0 : (int32_t)recon;
	s.topic = topic;
	s.topic_len = (uint16_t)tl;
	s.props = batch ? NULL : props;
	s.props_len = batch ? 0 : (uint16_t)pl;
	s.body = q->body;
	s.body_len = q->body_len;
	cap = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_SEND_RESP_FIXED + 8u * n + 64;
	j = job_new(r, c, q, batch ? WIRE_DP_OP_SEND_BATCH : WIRE_DP_OP_SEND,
		    q->body_len + (uint32_t)pl + (uint32_t)tl + 256, cap);
	if (j == NULL) {
		busy(r, c, q);
		return;
	}
	len = wire_dp_send_req_encode(j->c.op, &s, j->reqbuf, q->body_len + pl + tl + 256);
	if (len < 0) {
		job_free(r, j);
		reply(r, c, q, WIRE_RSP_MESSAGE_ILLEGAL,
		      "the message does not fit the dataplane format");
		return;
	}
	j->c.req_len = (uint32_t)len;
	j->batch_n = n;
	if (job_post(r, j, t->core[qid]) != 0)
		busy(r, c, q);
}

/* A pull refused here: clients read the four offsets from every pull answer. */
static void
pull_error(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, int32_t code,
	   const char *remark)
{
	struct rresp o = {
		.code = code, .opaque = q->opaque, .serialize = q->serialize, .remark = remark};

	resp_ext(&o, "nextBeginOffset", "0");
	resp_ext(&o, "minOffset", "0");
	resp_ext(&o, "maxOffset", "0");
	resp_ext(&o, "suggestWhichBrokerId", "0");
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		conn_send(r, c, &o);
}

static void
do_pull(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl = 0, tl = 0, el = 0;
	const char *group = ext_s(q, "consumerGroup", &gl);
	const char *topic = ext_s(q, "topic", &tl);
	const char *expr = ext_s(q, "subscription", &el);
	const char *etype = ext_s(q, "expressionType", NULL);
	int64_t qid, qoff, maxn = PULL_MAX_MSGS, sysflag = 0, commit = -1, suspend = 0;
	struct wire_dp_pull_req p = {0};
	int32_t codes[SUB_CODES_MAX];
	uint16_t ncodes = 0;
	const struct bk_topic *t;
	struct rjob *j;
	bool many = false;
	long len;

	if (!group || !topic || ext_i(q, "queueId", NULL, &qid) ||
	    ext_i(q, "queueOffset", NULL, &qoff) || gl > META_GROUP_MAX || gl == 0) {
		pull_error(r, c, q, WIRE_RSP_SYSTEM_ERROR,
			   "the pull header lacks consumerGroup, topic, queueId or queueOffset");
		return;
	}
	(void)ext_i(q, "maxMsgNums", NULL, &maxn);
	(void)ext_i(q, "sysFlag", NULL, &sysflag);
	(void)ext_i(q, "commitOffset", NULL, &commit);
	(void)ext_i(q, "suspendTimeoutMillis", NULL, &suspend);
	t = bk_topic_find(r->bk, topic, tl);
	if (t == NULL || qid < 0 || (uint64_t)qid >= t->read_queues ||
	    (etype && strcmp(etype, "TAG") != 0)) {
		char remark[200];

		if (t == NULL)
			snprintf(remark, sizeof(remark),
				 "topic[%.*s] not exist, apply first please!", (int)tl, topic);
		else if (etype && strcmp(etype, "TAG") != 0)
			snprintf(remark, sizeof(remark),
				 "the broker filters by TAG only, not %.32s", etype);
		else
			snprintf(remark, sizeof(remark), "queueId[%" PRId64 "] is illegal", qid);
		pull_error(r, c, q, t ? WIRE_RSP_SYSTEM_ERROR : WIRE_RSP_TOPIC_NOT_EXIST, remark);
		return;
	}
	if ((sysflag & WIRE_DP_PULL_SUBSCRIPTION) && expr) {
		ncodes = expr_codes(expr, el, codes, SUB_CODES_MAX, &many);
	} else {
		/* The subscription its heartbeat registered (Java sends none on the pull). */
		const struct rsub *s = group_sub(r, group, topic);

		if (s) {
			ncodes = s->ncodes;
			memcpy(codes, s->codes, sizeof(codes[0]) * ncodes);
		}
	}
	p.queue_offset = qoff;
	p.commit_offset = commit;
	p.queue_id = (int32_t)qid;
	p.max_msgs = (int32_t)(maxn <= 0 ? 1 : SP_MIN(maxn, (int64_t)BK_PULL_MSGS_MAX));
	p.max_bytes = PULL_MAX_BYTES;
	p.sysflag = (uint32_t)sysflag & (WIRE_DP_PULL_COMMIT_OFFSET | WIRE_DP_PULL_SUSPEND);
	p.suspend_timeout_ms =
		suspend < 0 ? 0 : (uint32_t)SP_MIN(suspend, (int64_t)BK_SUSPEND_MAX_MS);
	p.expr_type = WIRE_DP_EXPR_TAG;
	p.tag_hashes = (const uint8_t *)codes; /* little-endian host (wire/dp.h) */
	p.tag_count = ncodes;
	p.group = group;
	p.group_len = (uint16_t)gl;
	p.topic = topic;
	p.topic_len = (uint16_t)tl;
	j = job_new(r, c, q, WIRE_DP_OP_PULL, 1024 + (uint32_t)(gl + tl + 4u * ncodes),
		    WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PULL_RESP_FIXED + PULL_MAX_BYTES + 4096);
	if (j == NULL) {
		busy(r, c, q);
		return;
	}
	len = wire_dp_pull_req_encode(&p, j->reqbuf, 1024 + gl + tl + 4u * ncodes);
	if (len < 0) {
		job_free(r, j);
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the pull does not fit the dataplane format");
		return;
	}
	j->c.req_len = (uint32_t)len;
	if (job_post(r, j, t->core[qid]) != 0)
		busy(r, c, q);
}

/* QUERY/UPDATE_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST */
static void
do_offset(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl = 0, tl = 0;
	const char *group = ext_s(q, "consumerGroup", &gl);
	const char *topic = ext_s(q, "topic", &tl);
	struct wire_dp_offset_req o = {0};
	const struct bk_topic *t;
	uint16_t op;
	int64_t qid, v = 0;
	struct rjob *j;
	long len;

	switch (q->code) {
	case WIRE_REQ_QUERY_CONSUMER_OFFSET:
		op = WIRE_DP_OP_QUERY_OFFSET;
		break;
	case WIRE_REQ_UPDATE_CONSUMER_OFFSET:
		op = WIRE_DP_OP_UPDATE_OFFSET;
		if (ext_i(q, "commitOffset", NULL, &v)) {
			reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "commitOffset is missing");
			return;
		}
		if (v < 0) { /* ali-ons commits -1 for "unknown": nothing to keep */
			reply(r, c, q, WIRE_RSP_SUCCESS, NULL);
			return;
		}
		break;
	case WIRE_REQ_GET_MIN_OFFSET:
		op = WIRE_DP_OP_GET_MIN_OFFSET;
		group = NULL;
		break;
	case WIRE_REQ_GET_MAX_OFFSET:
		op = WIRE_DP_OP_GET_MAX_OFFSET;
		group = NULL;
		break;
	case WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP:
		op = WIRE_DP_OP_SEARCH_OFFSET;
		group = NULL;
		if (ext_i(q, "timestamp", NULL, &v)) {
			reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "timestamp is missing");
			return;
		}
		break;
	default: /* GET_EARLIEST_MSG_STORETIME */
		op = BK_ROP_EARLIEST;
		group = NULL;
		break;
	}
	if (!topic || ext_i(q, "queueId", NULL, &qid) ||
	    ((op == WIRE_DP_OP_QUERY_OFFSET || op == WIRE_DP_OP_UPDATE_OFFSET) &&
	     (!group || gl == 0 || gl > META_GROUP_MAX))) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR,
		      "the header lacks topic, queueId or consumerGroup");
		return;
	}
	t = bk_topic_find(r->bk, topic, tl);
	if (t == NULL) {
		char remark[200];

		snprintf(remark, sizeof(remark), "topic[%.*s] not exist, apply first please!",
			 (int)tl, topic);
		reply(r, c, q, WIRE_RSP_TOPIC_NOT_EXIST, remark);
		return;
	}
	if (qid < 0 || (uint64_t)qid >= t->nq) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "queueId is illegal");
		return;
	}
	j = job_new(r, c, q, op, (uint32_t)(gl + tl + 64), 256);
	if (j == NULL) {
		busy(r, c, q);
		return;
	}
	if (op == BK_ROP_EARLIEST) {
		j->c.sq = t->sq[qid];
	} else {
		o.value = v;
		o.queue_id = (int32_t)qid;
		o.group = group;
		o.group_len = (uint16_t)(group ? gl : 0);
		o.topic = topic;
		o.topic_len = (uint16_t)tl;
		len = wire_dp_offset_req_encode(op, &o, j->reqbuf, gl + tl + 64);
		if (len < 0) {
			job_free(r, j);
			reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "bad offset request");
			return;
		}
		j->c.req_len = (uint32_t)len;
	}
	if (job_post(r, j, t->core[qid]) != 0)
		busy(r, c, q);
}

static void
do_send_back(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	size_t gl = 0, otl = 0, oil = 0;
	const char *group = ext_s(q, "group", &gl);
	const char *otopic = ext_s(q, "originTopic", &otl);
	const char *oid = ext_s(q, "originMsgId", &oil);
	int64_t off, delay = 0, maxre = -1;
	struct wire_dp_send_back_req b = {0};
	char name[META_TOPIC_MAX + 1];
	const struct bk_topic *t = NULL;
	const char *why;
	int32_t code;
	struct rjob *j;
	long len;

	if (slave_refuses(r, c, q))
		return;

	if (!group || gl == 0 || gl + 7 > META_TOPIC_MAX || ext_i(q, "offset", NULL, &off)) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the header lacks group or offset");
		return;
	}
	(void)ext_i(q, "delayLevel", NULL, &delay);
	(void)ext_i(q, "maxReconsumeTimes", NULL, &maxre);
	/* Both destinations exist before the core decides which one it is. */
	snprintf(name, sizeof(name), "%s%s", BK_DLQ_PREFIX, group);
	if (topic_get(r, name, strlen(name), 1, &code, &why) != NULL) {
		snprintf(name, sizeof(name), "%s%s", BK_RETRY_PREFIX, group);
		t = topic_get(r, name, strlen(name), 1, &code, &why);
	}
	if (t == NULL) {
		reply(r, c, q, code, why);
		return;
	}
	b.phys_offset = off;
	b.delay_level = (int32_t)delay;
	b.max_reconsume_times = (int32_t)(maxre > 0 ? SP_MIN(maxre, (int64_t)INT32_MAX) : 0);
	b.group = group;
	b.group_len = (uint16_t)gl;
	b.origin_topic = otl <= META_TOPIC_MAX ? otopic : NULL;
	b.origin_topic_len = b.origin_topic ? (uint16_t)otl : 0;
	b.origin_msgid = oil < WIRE_MSGID_MAX ? oid : NULL;
	b.origin_msgid_len = b.origin_msgid ? (uint16_t)oil : 0;
	j = job_new(r, c, q, WIRE_DP_OP_SEND_BACK, (uint32_t)(gl + otl + oil + 128), 256);
	if (j == NULL) {
		busy(r, c, q);
		return;
	}
	len = wire_dp_send_back_req_encode(&b, j->reqbuf, gl + otl + oil + 128);
	if (len < 0) {
		job_free(r, j);
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "bad send-back request");
		return;
	}
	j->c.req_len = (uint32_t)len;
	if (job_post(r, j, t->core[0]) != 0)
		busy(r, c, q);
}

/* VIEW_MESSAGE_BY_ID and QUERY_MESSAGE: records by physical offset, copied by a core. */
static void
do_lookup(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	int64_t phys[QUERY_MAX];
	long n = 0;
	struct rjob *j;

	if (q->code == WIRE_REQ_VIEW_MESSAGE_BY_ID) {
		if (ext_i(q, "offset", NULL, &phys[0]) || phys[0] < 0) {
			reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "offset is missing");
			return;
		}
		n = 1;
	} else {
		const char *topic = ext_s(q, "topic", NULL);
		const char *key = ext_s(q, "key", NULL);
		int64_t maxn = QUERY_MAX, begin = 0, end = INT64_MAX;
		bool uniq = false;

		if (!topic || !key) {
			reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "the header lacks topic or key");
			return;
		}
		(void)ext_i(q, "maxNum", NULL, &maxn);
		(void)ext_i(q, "beginTimestamp", NULL, &begin);
		(void)ext_i(q, "endTimestamp", NULL, &end);
		if (wire_rem_ext_bool(q, "_UNIQUE_KEY_QUERY", &uniq) != 0)
			uniq = false;
		if (uniq || maxn > QUERY_MAX)
			maxn = uniq ? 32 : QUERY_MAX;
		if (maxn <= 0)
			maxn = 1;
		n = store_query_key(r->bk->store, topic, key, begin, end, phys, (size_t)maxn);
		if (n <= 0) {
			struct rresp o = {
				.code = WIRE_RSP_QUERY_NOT_FOUND,
				.opaque = q->opaque,
				.serialize = q->serialize,
				.remark = "can not find message, maybe time range not correct"};

			resp_ext(&o, "indexLastUpdateTimestamp", "0");
			resp_ext(&o, "indexLastUpdatePhyoffset", "0");
			if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
				conn_send(r, c, &o);
			return;
		}
	}
	j = job_new(r, c, q, BK_ROP_GATHER, 0, 64u << 10);
	if (j == NULL) {
		busy(r, c, q);
		return;
	}
	memcpy(j->phys, phys, sizeof(phys[0]) * (size_t)n);
	j->c.phys = j->phys;
	j->c.nphys = (uint32_t)n;
	if (job_post(r, j, (uint16_t)(clog_phys_shard(phys[0]) % r->bk->ncores)) != 0)
		busy(r, c, q);
}

/* ---- answers from the cores ---- */

static const char *
status_remark(int32_t st)
{
	switch (st) {
	case WIRE_DP_ST_SYSTEM_BUSY:
		return "[REJECTREQUEST]system busy, start flow control for a while";
	case WIRE_DP_ST_NOT_SUPPORTED:
		return "a delayed, timed or transactional message: not supported yet, not stored";
	case WIRE_DP_ST_FLUSH_DISK_TIMEOUT:
		return "the flush did not complete within syncFlushTimeout";
	case WIRE_DP_ST_MESSAGE_ILLEGAL:
		return "the message is not valid";
	case WIRE_DP_ST_SERVICE_NOT_AVAILABLE:
		return "the store refuses writes (disk error or full disk)";
	case WIRE_DP_ST_NO_PERMISSION:
		return "no permission: the broker or the topic is not writable/readable";
	case WIRE_DP_ST_TOPIC_NOT_EXIST:
		return "topic not exist, apply first please!";
	case WIRE_DP_ST_QUERY_NOT_FOUND:
		return "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first";
	case WIRE_DP_ST_BAD_REQUEST:
		return "the request is not valid";
	default:
		return NULL;
	}
}

static int32_t
status_code(int32_t st)
{
	return st >= 1000 ? WIRE_RSP_SYSTEM_ERROR : st;
}

static void
answer_send(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m, uint32_t len)
{
	struct wire_dp_send_resp s;
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char qid[16], qoff[24], one[WIRE_MSGID_MAX];
	char *ids = NULL;

	if (j->c.op == WIRE_DP_OP_SEND_BACK) {
		struct wire_dp_resp_head h;
		int32_t st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status
								       : WIRE_DP_ST_SYSTEM_ERROR;

		o.code = status_code(st);
		o.remark = status_remark(st);
		conn_send(r, c, &o);
		return;
	}
	if (wire_dp_send_resp_decode(j->c.op, m, len, &s) != 0 ||
	    (s.head.status != WIRE_DP_ST_SUCCESS &&
	     s.head.status != WIRE_DP_ST_FLUSH_DISK_TIMEOUT)) {
		struct wire_dp_resp_head h;
		int32_t st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status
								       : WIRE_DP_ST_SYSTEM_ERROR;

		o.code = status_code(st);
		o.remark = status_remark(st);
		if (o.code == WIRE_RSP_SUCCESS) /* cannot decode a success: treat as an error */
			o.code = WIRE_RSP_SYSTEM_ERROR;
		conn_send(r, c, &o);
		return;
	}
	if (j->c.op == WIRE_DP_OP_SEND_BATCH && s.count != j->batch_n) {
		char remark[160];

		/*
		 * The core stored the first items and hit a full file (the
		 * next one is being prepared): a RocketMQ batch has no
		 * partial answer, so this one is an error that says what
		 * happened; the client's resend duplicates the first items
		 * (at-least-once) instead of losing the rest.
		 */
		snprintf(remark, sizeof(remark),
			 "[REJECTREQUEST] only %u of the %u messages of the batch were stored (a "
			 "store "
			 "file was full); send the batch again",
			 s.count, j->batch_n);
		o.code = WIRE_RSP_SYSTEM_BUSY;
		o.remark = remark;
		conn_send(r, c, &o);
		return;
	}
	o.code = status_code(s.head.status);
	snprintf(qid, sizeof(qid), "%d", s.queue_id);
	snprintf(qoff, sizeof(qoff), "%" PRId64, s.queue_offset);
	if (j->c.op == WIRE_DP_OP_SEND_BATCH) {
		size_t at = 0;

		ids = malloc((size_t)s.count * WIRE_MSGID_MAX + 1);
		if (ids == NULL) {
			o.code = WIRE_RSP_SYSTEM_ERROR;
			o.remark = "out of memory (the batch is stored)";
			conn_send(r, c, &o);
			return;
		}
		ids[0] = '\0';
		for (uint32_t i = 0; i < s.count; i++) {
			if (i)
				ids[at++] = ',';
			at += wire_msgid_encode(&r->bk->store_host, wire_dp_send_resp_phys(&s, i),
						ids + at);
		}
		resp_ext(&o, "msgId", ids);
	} else {
		(void)wire_msgid_encode(&r->bk->store_host, s.phys_offset, one);
		resp_ext(&o, "msgId", one);
	}
	resp_ext(&o, "queueId", qid);
	resp_ext(&o, "queueOffset", qoff);
	resp_ext(&o, "MSG_REGION", "DefaultRegion");
	resp_ext(&o, "TRACE_ON", "true");
	conn_send(r, c, &o);
	free(ids);
}

static void
answer_pull(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m, uint32_t len)
{
	struct wire_dp_pull_resp p;
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char nb[24] = "0", mn[24] = "0", mx[24] = "0";

	if (wire_dp_pull_resp_decode(m, len, &p) == 0) {
		o.code = status_code(p.head.status);
		snprintf(nb, sizeof(nb), "%" PRId64, p.next_begin_offset);
		snprintf(mn, sizeof(mn), "%" PRId64, p.min_offset);
		snprintf(mx, sizeof(mx), "%" PRId64, p.max_offset);
		if (p.head.status == WIRE_DP_ST_SUCCESS) {
			o.body = p.records;
			o.body_len = p.records_len;
			o.remark = "FOUND";
		}
	} else {
		struct wire_dp_resp_head h;
		int32_t st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status
								       : WIRE_DP_ST_SYSTEM_ERROR;

		o.code = status_code(st);
		o.remark = status_remark(st);
		if (o.code == WIRE_RSP_SUCCESS)
			o.code = WIRE_RSP_SYSTEM_ERROR;
	}
	resp_ext(&o, "nextBeginOffset", nb);
	resp_ext(&o, "minOffset", mn);
	resp_ext(&o, "maxOffset", mx);
	resp_ext(&o, "suggestWhichBrokerId", "0");
	conn_send(r, c, &o);
}

static void
answer_offset(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m, uint32_t len)
{
	struct wire_dp_offset_resp v;
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char num[24];
	struct wire_dp_resp_head h;
	int32_t st;

	if (j->c.op == BK_ROP_EARLIEST) {
		o.code = status_code(j->c.status);
		if (j->c.status == WIRE_DP_ST_SUCCESS) {
			snprintf(num, sizeof(num), "%" PRId64, j->c.value);
			resp_ext(&o, "timestamp", num);
		} else {
			o.remark = "the queue has no message";
		}
		conn_send(r, c, &o);
		return;
	}
	if (wire_dp_offset_resp_decode(j->c.op, m, len, &v) == 0 &&
	    v.head.status == WIRE_DP_ST_SUCCESS) {
		o.code = WIRE_RSP_SUCCESS;
		if (j->c.op != WIRE_DP_OP_UPDATE_OFFSET) {
			snprintf(num, sizeof(num), "%" PRId64, v.offset);
			resp_ext(&o, "offset", num);
		}
		conn_send(r, c, &o);
		return;
	}
	st = wire_dp_resp_head_decode(m, len, &h) == 0 ? h.status : WIRE_DP_ST_SYSTEM_ERROR;
	o.code = status_code(st);
	o.remark = status_remark(st);
	if (o.code == WIRE_RSP_SUCCESS)
		o.code = WIRE_RSP_SYSTEM_ERROR;
	conn_send(r, c, &o);
}

static void
answer_lookup(struct bk_rmt *r, struct rconn *c, struct rjob *j)
{
	struct rresp o = {.opaque = j->opaque, .serialize = j->serialize};
	char now[24];

	if (j->c.found == 0) {
		char remark[96];

		if (j->code == WIRE_REQ_VIEW_MESSAGE_BY_ID) {
			o.code = WIRE_RSP_SYSTEM_ERROR;
			snprintf(remark, sizeof(remark),
				 "can not find message by the offset, %" PRId64, j->phys[0]);
		} else {
			o.code = WIRE_RSP_QUERY_NOT_FOUND;
			snprintf(remark, sizeof(remark),
				 "can not find message, maybe time range not correct");
		}
		o.remark = remark;
		if (j->code == WIRE_REQ_QUERY_MESSAGE) {
			resp_ext(&o, "indexLastUpdateTimestamp", "0");
			resp_ext(&o, "indexLastUpdatePhyoffset", "0");
		}
		conn_send(r, c, &o);
		return;
	}
	o.code = WIRE_RSP_SUCCESS;
	o.body = j->c.resp;
	o.body_len = j->c.resp_len;
	if (j->code == WIRE_REQ_QUERY_MESSAGE) {
		snprintf(now, sizeof(now), "%" PRId64, clk_wall_ms());
		resp_ext(&o, "indexLastUpdateTimestamp", now);
		resp_ext(&o, "indexLastUpdatePhyoffset", "0");
	}
	conn_send(r, c, &o);
}

/* Return: true when @j was posted again (bigger buffer, or to its queue's real owner). */
static bool
job_again(struct bk_rmt *r, struct rjob *j)
{
	uint16_t core = j->c.core;

	if (conn_get(r, j->conn, j->gen) == NULL)
		return false; /* nobody to answer: free it */
	if (j->c.need) {
		/* a gather of several big records: room for more than the one that did not fit */
		uint32_t cap = j->c.op == BK_ROP_GATHER ? j->c.need * 2 : j->c.need;
		uint8_t *b = realloc(j->c.resp, cap);

		if (b == NULL)
			return false;
		j->c.resp = b;
		j->c.resp_cap = cap;
	} else if (j->c.op < BK_ROP_EARLIEST && j->c.resp_len >= WIRE_DP_RESP_HEAD_LEN) {
		struct wire_dp_resp_head h;

		if (wire_dp_resp_head_decode(j->c.resp, j->c.resp_len, &h) != 0 ||
		    h.status != WIRE_DP_ST_REDIRECT || j->redirects++ > 2)
			return false;
		/* The topic changed between our lookup and the core's: go to the owner. */
		core = h.redirect_core;
	} else {
		return false;
	}
	/* Not postable now: false with `need` set, so job_done() answers SYSTEM_BUSY. */
	if (core >= r->bk->ncores || r->inflight[core] >= r->conf.inflight_per_core) {
		j->c.need = 1;
		return false;
	}
	j->c.core = core;
	j->c.need = 0;
	if (dp_lcore_post(&r->bk->cores[core].lc, &j->c) != 0) {
		j->c.need = 1; /* answered SYSTEM_BUSY */
		return false;
	}
	r->inflight[core]++;
	return true;
}

static void
job_done(struct bk_rmt *r, struct rjob *j)
{
	struct rconn *c;

	r->inflight[j->c.core]--;
	if (job_again(r, j))
		return;
	c = conn_get(r, j->conn, j->gen);
	if (c && !j->oneway) {
		if (j->c.need) {
			busy_answer(r, c, j->code, j->opaque, j->serialize);
		} else {
			switch (j->c.op) {
			case WIRE_DP_OP_SEND:
			case WIRE_DP_OP_SEND_BATCH:
			case WIRE_DP_OP_SEND_BACK:
				answer_send(r, c, j, j->c.resp, j->c.resp_len);
				break;
			case WIRE_DP_OP_PULL:
				answer_pull(r, c, j, j->c.resp, j->c.resp_len);
				break;
			case BK_ROP_GATHER:
				answer_lookup(r, c, j);
				break;
			default:
				answer_offset(r, c, j, j->c.resp, j->c.resp_len);
				break;
			}
		}
	}
	job_free(r, j);
}

static void
reap(struct bk_rmt *r)
{
	for (uint32_t i = 0; i < r->bk->ncores; i++) {
		void *v[64];
		unsigned n;

		while ((n = dp_lcore_reap(&r->bk->cores[i].lc, v, 64)) > 0)
			for (unsigned k = 0; k < n; k++)
				job_done(r, v[k]);
		r->work += n;
	}
}

/* ---- a slave's sync (docs/replication.md) ---- */

/* GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET: the whole table as JSON. */
static void
do_get_all(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	struct rresp o = {.code = WIRE_RSP_SUCCESS, .opaque = q->opaque, .serialize = q->serialize};
	char *json = NULL;
	size_t len = 0;
	int err;

	if (r->ops.dump == NULL) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "not available");
		return;
	}
	err = r->ops.dump(r->ops.arg, q->code, &json, &len);
	if (err != 0 || len > UINT32_MAX) {
		reply(r, c, q, WIRE_RSP_SYSTEM_ERROR, "cannot serialize the table");
		free(json);
		return;
	}
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY)) {
		o.body = (const uint8_t *)json;
		o.body_len = (uint32_t)len;
		conn_send(r, c, &o);
	}
	free(json);
}

int
bk_rmt_offset_set(struct bk_rmt *r, const char *topic, const char *group, uint32_t qid,
		  int64_t offset)
{
	size_t tl = strlen(topic);
	size_t gl = strlen(group);
	const struct bk_topic *t = bk_topic_find(r->bk, topic, tl);
	struct wire_dp_offset_req o = {.value = offset,
				       .queue_id = (int32_t)qid,
				       .group = group,
				       .group_len = (uint16_t)gl,
				       .topic = topic,
				       .topic_len = (uint16_t)tl};
	struct rjob *j;
	long len;

	if (t == NULL || qid >= t->nq || gl == 0 || gl > META_GROUP_MAX)
		return -ENOENT;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -ENOMEM;
	j->reqbuf = malloc(gl + tl + 64);
	j->c.resp = malloc(256);
	if (!j->reqbuf || !j->c.resp) {
		free(j->reqbuf);
		free(j->c.resp);
		free(j);
		return -ENOMEM;
	}
	/* No connection: the answer is dropped (job_done() finds none). */
	j->conn = UINT32_MAX;
	j->oneway = true;
	j->c.op = BK_ROP_OFFSET_RAISE;
	j->c.resp_cap = 256;
	j->c.req = j->reqbuf;
	j->next = r->jobs;
	if (r->jobs)
		r->jobs->prev = j;
	r->jobs = j;
	len = wire_dp_offset_req_encode(WIRE_DP_OP_UPDATE_OFFSET, &o, j->reqbuf, gl + tl + 64);
	if (len < 0) {
		job_free(r, j);
		return (int)len;
	}
	j->c.req_len = (uint32_t)len;
	return job_post(r, j, t->core[qid]);
}

/* ---- frames in ---- */

static void
dispatch(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	char remark[64];

	if (q->flag & WIRE_REM_FLAG_RESPONSE)
		return; /* an answer to our oneway notify: nothing expected */
	switch (q->code) {
	case WIRE_REQ_SEND_MESSAGE:
	case WIRE_REQ_SEND_MESSAGE_V2:
	case WIRE_REQ_SEND_BATCH_MESSAGE:
		do_send(r, c, q);
		return;
	case WIRE_REQ_PULL_MESSAGE:
		do_pull(r, c, q);
		return;
	case WIRE_REQ_QUERY_CONSUMER_OFFSET:
	case WIRE_REQ_UPDATE_CONSUMER_OFFSET:
	case WIRE_REQ_GET_MIN_OFFSET:
	case WIRE_REQ_GET_MAX_OFFSET:
	case WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP:
	case WIRE_REQ_GET_EARLIEST_MSG_STORETIME:
		do_offset(r, c, q);
		return;
	case WIRE_REQ_CONSUMER_SEND_MSG_BACK:
		do_send_back(r, c, q);
		return;
	case WIRE_REQ_QUERY_MESSAGE:
	case WIRE_REQ_VIEW_MESSAGE_BY_ID:
		do_lookup(r, c, q);
		return;
	case WIRE_REQ_HEART_BEAT:
		do_heartbeat(r, c, q);
		return;
	case WIRE_REQ_UNREGISTER_CLIENT:
		do_unregister(r, c, q);
		return;
	case WIRE_REQ_GET_CONSUMER_LIST_BY_GROUP:
		do_consumer_list(r, c, q);
		return;
	case WIRE_REQ_LOCK_BATCH_MQ:
	case WIRE_REQ_UNLOCK_BATCH_MQ:
		do_lock(r, c, q, q->code == WIRE_REQ_LOCK_BATCH_MQ);
		return;
	case WIRE_REQ_UPDATE_AND_CREATE_TOPIC:
		do_create_topic(r, c, q);
		return;
	case WIRE_REQ_GET_ALL_TOPIC_CONFIG:
	case WIRE_REQ_GET_ALL_CONSUMER_OFFSET:
	case WIRE_REQ_GET_ALL_DELAY_OFFSET:
		do_get_all(r, c, q);
		return;
	default:
		snprintf(remark, sizeof(remark), " request type %d not supported", q->code);
		reply(r, c, q, WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED, remark);
		return;
	}
}

/* Handles every whole frame in c->in. Return: 0, -1 closed. */
static int
conn_frames(struct bk_rmt *r, struct rconn *c)
{
	size_t at = 0;

	while (at < c->in_len && !c->closing) {
		struct wire_rem_cmd q;
		size_t flen;
		int err = wire_rem_frame_len(c->in + at, c->in_len - at, r->conf.max_frame, &flen);

		if (err == -EAGAIN)
			break;
		if (err == 0) {
			size_t need = (flen - 4) * 3 + 256;

			if (need > r->scratch_cap) {
				char *s = realloc(r->scratch, need);

				if (s == NULL) {
					conn_close(r, c, "out of memory");
					return -1;
				}
				r->scratch = s;
				r->scratch_cap = need;
			}
			err = wire_rem_decode(c->in + at, flen, &q, r->scratch, r->scratch_cap);
		}
		if (err) {
			char why[96];

			snprintf(why, sizeof(why), "malformed frame (%s)",
				 err == -EMSGSIZE ? "larger than the frame limit" : strerror(-err));
			conn_close(r, c, why);
			return -1;
		}
		dispatch(r, c, &q);
		r->work++;
		if (c->closing)
			return -1; /* closed while answering (torn down later) */
		at += flen;
	}
	if (at) {
		memmove(c->in, c->in + at, c->in_len - at);
		c->in_len -= at;
	}
	return 0;
}

static void
conn_read(struct bk_rmt *r, struct rconn *c)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n;

		if (c->in_cap - c->in_len < READ_CHUNK) {
			size_t cap = c->in_cap ? c->in_cap * 2 : READ_CHUNK * 2;
			uint8_t *b;

			if (cap > (size_t)r->conf.max_frame + 2 * READ_CHUNK) {
				if (c->in_cap - c->in_len == 0) {
					conn_close(r, c, "frame larger than the limit");
					return;
				}
				cap = c->in_cap;
			}
			b = cap != c->in_cap ? realloc(c->in, cap) : c->in;
			if (b == NULL) {
				conn_close(r, c, "out of memory");
				return;
			}
			c->in = b;
			c->in_cap = cap;
		}
		n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
		if (n == 0) {
			conn_close(r, c, NULL);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(r, c, strerror(errno));
			return;
		}
		c->in_len += (size_t)n;
		if (conn_frames(r, c) != 0 || c->paused)
			return;
	}
}

static void
conn_free(struct rconn *c)
{
	free(c->in);
	free(c->out);
	free(c);
}

/*
 * Marks @c closed; conns_reap() tears it down once nothing up the stack
 * uses it (a close can happen deep inside a notify loop).
 */
static void
conn_close(struct bk_rmt *r, struct rconn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		log_warn(TAG, "closing the connection from %s: %s", c->peer_s, why);
	c->closing = true;
	r->any_closing = true;
}

static void
conn_teardown(struct bk_rmt *r, struct rconn *c)
{
	uint32_t id = c->id, gen = c->gen;

	if (c == r->fuzz_conn) {
		/* keep the object: the fuzzer feeds it again, as a new connection */
		c->gen++;
		c->in_len = c->out_len = c->out_off = 0;
		c->closing = false;
	} else {
		if (c->fd >= 0) {
			(void)epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
		}
		r->conns[id] = NULL;
		conn_free(c);
	}
	groups_sweep(r, true, id, gen);
}

static void
conns_reap(struct bk_rmt *r)
{
	while (r->any_closing) {
		r->any_closing = false;
		for (uint32_t i = 0; i < r->nconns; i++)
			if (r->conns[i] && r->conns[i]->closing)
				conn_teardown(r, r->conns[i]);
		if (r->fuzz_conn && r->fuzz_conn->closing)
			conn_teardown(r, r->fuzz_conn);
	}
}

static void
srv_accept(struct bk_rmt *r)
{
	for (;;) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		int fd = accept4(r->lfd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN};
		struct rconn *c;
		uint32_t id;
		int one = 1;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				log_warn_ratelimited(TAG, "accept: %s", strerror(errno));
			return;
		}
		for (id = 0; id < r->nconns && r->conns[id]; id++)
			;
		if (id == r->nconns) {
			if (r->nconns >= r->conf.max_conns) {
				log_warn_ratelimited(TAG,
						     "refusing a connection: %u open (the limit)",
						     r->nconns);
				close(fd);
				continue;
			}
			struct rconn **n = realloc(r->conns, sizeof(*n) * (r->nconns + 1));

			if (n == NULL) {
				close(fd);
				continue;
			}
			r->conns = n;
			r->conns[r->nconns++] = NULL;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->id = id;
		c->gen = ++r->serial;
		c->peer.ip = a.sin_addr.s_addr;
		c->peer.port = ntohs(a.sin_port);
		inet_ntop(AF_INET, &a.sin_addr, c->peer_s, sizeof(c->peer_s));
		snprintf(c->peer_s + strlen(c->peer_s), sizeof(c->peer_s) - strlen(c->peer_s),
			 ":%u", c->peer.port);
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ev.data.u32 = id;
		if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			free(c);
			continue;
		}
		r->conns[id] = c;
	}
}

/* ---- lifecycle ---- */

int
bk_rmt_create(struct bk *bk, const struct bk_rmt_conf *conf, const struct bk_rmt_ops *ops,
	      struct bk_rmt **out)
{
	struct bk_rmt *r = calloc(1, sizeof(*r));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(conf->port)};
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
	socklen_t al = sizeof(a);
	int one = 1, err;

	if (r == NULL)
		return -ENOMEM;
	r->bk = bk;
	r->conf = *conf;
	r->ops = *ops;
	r->lfd = -1;
	r->inflight = calloc(bk->ncores, sizeof(*r->inflight));
	r->hdr_cap = HDR_MIN;
	r->hdr = malloc(r->hdr_cap);
	r->ep = epoll_create1(EPOLL_CLOEXEC);
	if (r->inflight == NULL || r->hdr == NULL || r->ep < 0) {
		err = r->ep < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	if (inet_pton(AF_INET, conf->ip, &a.sin_addr) != 1) {
		log_err(TAG, "listen address '%s' is not IPv4", conf->ip);
		err = -EINVAL;
		goto fail;
	}
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->lfd < 0 || setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(r->lfd, 1024) != 0 ||
	    getsockname(r->lfd, (struct sockaddr *)&a, &al) != 0 ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd, &ev) != 0) {
		err = -errno;
		log_err(TAG, "listening on %s:%u: %s", conf->ip, conf->port, strerror(errno));
		goto fail;
	}
	r->port = ntohs(a.sin_port);
	r->now_ms = clk_mono_ns() / 1000000;
	log_info(TAG, "remoting (RocketMQ clients) listening on %s:%u", conf->ip, r->port);
	*out = r;
	return 0;
fail:
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->ep >= 0)
		close(r->ep);
	free(r->inflight);
	free(r->hdr);
	free(r);
	return err;
}

int
bk_rmt_fd(const struct bk_rmt *r)
{
	return r->ep;
}

uint16_t
bk_rmt_port(const struct bk_rmt *r)
{
	return r->port;
}

bool
bk_rmt_pending(const struct bk_rmt *r)
{
	for (uint32_t i = 0; i < r->bk->ncores; i++)
		if (r->inflight[i] && ring_count(r->bk->cores[i].lc.cpl))
			return true;
	return false;
}

unsigned
bk_rmt_run(struct bk_rmt *r, uint64_t now_ms)
{
	struct epoll_event ev[64];
	int n;

	r->now_ms = now_ms;
	r->work = 0;
	reap(r);
	n = epoll_wait(r->ep, ev, 64, 0);
	for (int i = 0; i < n; i++) {
		uint32_t id = ev[i].data.u32;
		struct rconn *c;

		if (id == UINT32_MAX) {
			srv_accept(r);
			continue;
		}
		c = id < r->nconns ? r->conns[id] : NULL;
		if (c == NULL)
			continue;
		if ((ev[i].events & EPOLLOUT) && conn_flush(r, c) != 0)
			continue;
		if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			conn_read(r, c);
	}
	reap(r);
	conns_reap(r);
	if (now_ms >= r->next_sweep_ms) {
		r->next_sweep_ms = now_ms + 1000;
		groups_sweep(r, false, 0, 0);
		for (size_t i = 0; i < r->nlocks;) {
			if (now_ms - r->locks[i].last_ms > r->conf.lock_expire_ms) {
				r->locks[i] = r->locks[--r->nlocks];
				continue;
			}
			i++;
		}
		conns_reap(r);
	}
	return r->work;
}

void
bk_rmt_feed(struct bk_rmt *r, const uint8_t *buf, size_t len)
{
	struct rconn *c = r->fuzz_conn;

	if (c == NULL) {
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			return;
		c->fd = -1;
		c->id = UINT32_MAX - 1;
		c->gen = 1;
		c->peer.ip = htonl(0x7f000001);
		snprintf(c->peer_s, sizeof(c->peer_s), "fuzz");
		r->fuzz_conn = c;
	}
	while (len > 0) {
		size_t n = SP_MIN(len, (size_t)READ_CHUNK);

		if (c->in_len + n > c->in_cap) {
			size_t cap = c->in_len + n;
			uint8_t *b;

			if (cap > (size_t)r->conf.max_frame + 2 * READ_CHUNK) {
				conn_close(r, c, "frame larger than the limit");
				break;
			}
			b = realloc(c->in, cap);
			if (b == NULL)
				break;
			c->in = b;
			c->in_cap = cap;
		}
		memcpy(c->in + c->in_len, buf, n);
		c->in_len += n;
		buf += n;
		len -= n;
		if (conn_frames(r, c) != 0)
			break;
	}
	reap(r);
	conns_reap(r);
}

void
bk_rmt_destroy(struct bk_rmt *r)
{
	if (r == NULL)
		return;
	while (r->jobs)
		job_free(r, r->jobs);
	for (uint32_t i = 0; i < r->nconns; i++) {
		if (r->conns[i]) {
			close(r->conns[i]->fd);
			conn_free(r->conns[i]);
		}
	}
	if (r->fuzz_conn)
		conn_free(r->fuzz_conn);
	for (size_t i = 0; i < r->ngroups; i++)
		free(r->groups[i].m);
	free(r->groups);
	free(r->locks);
	free(r->conns);
	free(r->scratch);
	free(r->inflight);
	free(r->hdr);
	close(r->lfd);
	close(r->ep);
	free(r);
}
