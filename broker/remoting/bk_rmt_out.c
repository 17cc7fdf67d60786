// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_out.c - what every request family of the remoting port answers
 * with (bk_rmt_share.h): the connection's output buffer and its flush,
 * responses and replies, the jobs posted to the cores and their shares
 * (SYSTEM_BUSY with the reason), and the helpers for a request's
 * extFields and topic. bk_rmt.c (the server) and the family files
 * (bk_rmt_data.c, bk_rmt_client.c, ...) call down into it; it calls none of
 * them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bk_rmt.h"
#include "bk_rmt_share.h"
#include "common/clock.h"
#include "common/log.h"
#include "core/bk_msgtype.h"
#include "store/clog.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

/*
 * Marks @c closed; conns_reap() tears it down once nothing up the stack
 * uses it (a close can happen deep inside a notify loop).
 */
void
bk_rmt__conn_close(struct bk_rmt *r, struct rconn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		log_warn(TAG, "closing the connection from %s: %s", c->peer_s, why);
	c->closing = true;
	r->any_closing = true;
}

/* ---- connections: output ---- */

void
bk_rmt__conn_events(struct bk_rmt *r, struct rconn *c)
{
	struct epoll_event ev = {.events = (c->paused || c->backlog ? 0 : EPOLLIN) |
					   (c->want_out || c->tls_want_out ? EPOLLOUT : 0),
				 .data.u32 = c->id};

	if (c->fd >= 0)
		(void)epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Writes what it can. Return: 0, -1 the connection was closed. */
int
bk_rmt__conn_flush(struct bk_rmt *r, struct rconn *c)
{
	char why[160];

	if (c->closing)
		return -1;
	while (c->out_off < c->out_len) {
		ssize_t n;

		if (c->fd < 0) { /* fuzzing: nobody reads */
			c->out_off = c->out_len;
			break;
		}
		n = bk_rmt__io_send(r, c, c->out + c->out_off, c->out_len - c->out_off, why,
				    sizeof(why));
		if (n < 0) {
			if (n == -EAGAIN)
				break;
			bk_rmt__conn_close(r, c, n == -EPROTO ? why : strerror((int)-n));
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
		bk_rmt__conn_events(r, c);
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

void
bk_rmt__resp_ext(struct rresp *o, const char *k, const char *v)
{
	if (o->n_ext < 16) {
		o->ext[o->n_ext][0] = k;
		o->ext[o->n_ext][1] = v;
		o->n_ext++;
	}
}

void
bk_rmt__conn_send(struct bk_rmt *r, struct rconn *c, const struct rresp *o)
{
	struct wire_rem_cmd cmd = {
		.code = o->code,
		.opaque = o->opaque,
		.flag = o->request_sync ? 0
			: o->request	? WIRE_REM_FLAG_ONEWAY
					: WIRE_REM_FLAG_RESPONSE,
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
			bk_rmt__conn_close(r, c, "out of memory");
			return;
		}
		r->hdr = b;
		r->hdr_cap = need;
	}
	err = wire_rem_encode_header(&cmd, r->hdr, r->hdr_cap, &hl);
	if (err != 0) {
		log_warn_ratelimited(TAG, "cannot encode the answer to request %d: %s", o->opaque,
				     strerror(-err));
		bk_rmt__conn_close(r, c, "cannot encode a response header");
		return;
	}
	if (conn_append(c, r->hdr, hl) != 0 ||
	    (o->body_len && conn_append(c, o->body, o->body_len) != 0)) {
		bk_rmt__conn_close(r, c, "out of memory");
		return;
	}
	(void)bk_rmt__conn_flush(r, c);
}

void
bk_rmt__reply(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, int32_t code,
	      const char *remark)
{
	struct rresp o = {
		.code = code, .opaque = q->opaque, .serialize = q->serialize, .remark = remark};

	if (q->flag & WIRE_REM_FLAG_ONEWAY)
		return;
	bk_rmt__conn_send(r, c, &o);
}

/* ---- jobs ---- */

struct rconn *
bk_rmt__conn_get(struct bk_rmt *r, uint32_t id, uint32_t gen)
{
	if (id < r->nconns && r->conns[id] && r->conns[id]->gen == gen && !r->conns[id]->closing)
		return r->conns[id];
	if (r->fuzz_conn && r->fuzz_conn->id == id && r->fuzz_conn->gen == gen &&
	    !r->fuzz_conn->closing)
		return r->fuzz_conn;
	return NULL;
}

/* @j no longer counts against its address (remotingMaxInflightPerAddr). */
void
bk_rmt__job_addr_uncount(struct bk_rmt *r, struct rjob *j)
{
	if (j->addr_counted)
		ipcount_sub(&r->jobs_addr, j->c.peer.ip);
	j->addr_counted = false;
}

void
bk_rmt__job_quick_uncount(struct bk_rmt *r, struct rconn *c, struct rjob *j)
{
	if (c && j->quick && c->quick)
		c->quick--;
	j->quick = false;
	if (j->quick_addr)
		ipcount_sub(&r->quick_addr, j->c.peer.ip);
	j->quick_addr = false;
}

void
bk_rmt__job_free(struct bk_rmt *r, struct rjob *j)
{
	struct rconn *c = bk_rmt__conn_get(r, j->conn, j->gen);

	if (j->agg)
		bk_rmt__agg_drop(j);
	if (j->held)
		bk_rmt__held_forget(r, j);
	if (c && c->jobs && !j->uncounted)
		c->jobs--;
	bk_rmt__job_quick_uncount(r, c, j);
	bk_rmt__job_addr_uncount(r, j);
	bk_rmt__poll_uncount(r, j);
	if (j->prev)
		j->prev->next = j->next;
	else
		r->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	free(j->reqbuf);
	free(j->c.resp);
	free(j->ak);
	free(j);
}

void
bk_rmt__busy_set(struct bk_rmt *r, enum bk_rmt_busy why, uint16_t core, uint32_t ip)
{
	r->busy_why = (uint8_t)why;
	r->busy_core = core;
	r->busy_addr = ip;
}

/*
 * Return: a new job for @c's request @q, or NULL: out of memory, or @c or its
 * address has too many requests in flight (bk_rmt__busy() says which).
 */
struct rjob *
bk_rmt__job_new(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, uint16_t op,
		uint32_t req_cap, uint32_t resp_cap)
{
	struct rjob *j;

	bk_rmt__busy_set(r, BK_RMT_BUSY_CORE, UINT16_MAX, 0);
	if (c->jobs >= r->conf.max_jobs_per_conn) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_CONN, UINT16_MAX, c->peer.ip);
		return NULL;
	}
	if (r->conf.max_jobs_per_addr &&
	    ipcount_get(&r->jobs_addr, c->peer.ip) >= r->conf.max_jobs_per_addr) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_ADDR, UINT16_MAX, c->peer.ip);
		return NULL;
	}
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
	/* a full table (twice as many addresses as connections allowed) counts nobody more */
	j->addr_counted = ipcount_add(&r->jobs_addr, c->peer.ip) != 0;
	return j;
}

/* Posts @j to @core. Return: 0, -EAGAIN (bk_rmt__busy: @j is freed, caller answers). */
int
bk_rmt__job_post(struct bk_rmt *r, struct rjob *j, uint16_t core)
{
	int rc = bk_rmt__job_post_keep(r, j, core);

	if (rc != 0)
		bk_rmt__job_free(r, j);
	return rc;
}

int
bk_rmt__job_post_keep(struct bk_rmt *r, struct rjob *j, uint16_t core)
{
	if (core >= r->bk->ncores || r->inflight[core] >= r->conf.inflight_per_core) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_CORE, core, 0);
		return -EAGAIN;
	}
	if (j->poll && r->polls[core] >= r->conf.polls_per_core) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_POLLS, core, 0);
		return -EAGAIN;
	}
	j->c.core = core;
	j->c.serial = ++r->serial ? r->serial : ++r->serial; /* never 0 */
	j->c.recv_ns = j->c.recv_ns ? j->c.recv_ns : clk_mono_ns();
	if (dp_lcore_post(&r->bk->cores[core].lc, &j->c) != 0)
		return -EAGAIN;
	r->inflight[core]++;
	bk_rmt__poll_count(r, j, core);
	/*
	 * Writes do not count: a SEND waits at its core for the flush or the
	 * slave (SYNC_*) after it left the ring, and a producer's pipeline is
	 * what group commit feeds on; they keep remotingMaxInflightPerConnection.
	 */
	if (!j->poll && !j->quick && j->c.op != WIRE_DP_OP_SEND &&
	    j->c.op != WIRE_DP_OP_SEND_BATCH && j->c.op != WIRE_DP_OP_SEND_BACK &&
	    j->c.op != BK_ROP_END_TX) {
		struct rconn *c = bk_rmt__conn_get(r, j->conn, j->gen);

		j->quick = c != NULL;
		if (c)
			c->quick++;
		j->quick_addr = ipcount_add(&r->quick_addr, j->c.peer.ip) != 0;
	}
	return 0;
}

uint64_t
bk_rmt_refused(const struct bk_rmt *r, unsigned reason)
{
	return reason < BK_RMT_REFUSE_REASONS ? r->refused[reason] : 0;
}

uint64_t
bk_rmt_frame_mem(const struct bk_rmt *r)
{
	return r->frame_mem;
}

uint64_t
bk_rmt_busy_count(const struct bk_rmt *r, unsigned reason)
{
	return reason < BK_RMT_BUSY_REASONS ? r->busy[reason] : 0;
}

/* Answers SYSTEM_BUSY with the reason bk_rmt__busy_set() recorded last, and counts it. */
void
bk_rmt__busy_answer(struct bk_rmt *r, struct rconn *c, int32_t code, int32_t opaque,
		    uint8_t serialize)
{
	char remark[192], ip[16];
	struct rresp o = {.code = WIRE_RSP_SYSTEM_BUSY,
			  .opaque = opaque,
			  .serialize = serialize,
			  .remark = remark};

	r->busy[r->busy_why]++;
	inet_ntop(AF_INET, &r->busy_addr, ip, sizeof(ip));
	switch (r->busy_why) {
	case BK_RMT_BUSY_CONN:
		snprintf(remark, sizeof(remark),
			 "[OVERLOAD]system busy: %u requests of this connection in flight "
			 "(remotingMaxInflightPerConnection)",
			 c->jobs);
		break;
	case BK_RMT_BUSY_ADDR:
		snprintf(remark, sizeof(remark),
			 "[OVERLOAD]system busy: %u requests from %s in flight "
			 "(remotingMaxInflightPerAddr)",
			 ipcount_get(&r->jobs_addr, r->busy_addr), ip);
		break;
	case BK_RMT_BUSY_POLLS:
		snprintf(remark, sizeof(remark),
			 "[OVERLOAD]system busy: %u long-polling pulls parked at core %u "
			 "(remotingLongPollsPerCore)",
			 r->busy_core < r->bk->ncores ? r->polls[r->busy_core] : 0, r->busy_core);
		break;
	case BK_RMT_BUSY_HELD:
		snprintf(remark, sizeof(remark),
			 "[OVERLOAD]system busy: %u long-polling pulls held in all "
			 "(remotingLongPollsMax)",
			 r->nheld);
		break;
	case BK_RMT_BUSY_HELD_ADDR:
		snprintf(remark, sizeof(remark),
			 "[OVERLOAD]system busy: %u long-polling pulls held for %s "
			 "(remotingLongPollsPerAddr)",
			 ipcount_get(&r->held_addr, r->busy_addr), ip);
		break;
	default:
		if (r->busy_core < r->bk->ncores)
			snprintf(remark, sizeof(remark),
				 "[OVERLOAD]system busy: too many requests in flight at core %u",
				 r->busy_core);
		else
			snprintf(remark, sizeof(remark), "[OVERLOAD]system busy");
		break;
	}
	bk_rmt__busy_set(r, BK_RMT_BUSY_CORE, UINT16_MAX, 0);

	/* clients read the four offsets from every pull answer */
	if (code == WIRE_REQ_PULL_MESSAGE) {
		bk_rmt__resp_ext(&o, "nextBeginOffset", "0");
		bk_rmt__resp_ext(&o, "minOffset", "0");
		bk_rmt__resp_ext(&o, "maxOffset", "0");
		bk_rmt__resp_ext(&o, "suggestWhichBrokerId", "0");
	}
	bk_rmt__conn_send(r, c, &o);
}

void
bk_rmt__busy(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	if (!(q->flag & WIRE_REM_FLAG_ONEWAY))
		bk_rmt__busy_answer(r, c, q->code, q->opaque, q->serialize);
}

/* ---- helpers ---- */

/* Return: extField @k as a NUL-terminated string (the decoder terminates them), or NULL. */
const char *
bk_rmt__ext_s(const struct wire_rem_cmd *q, const char *k, size_t *len)
{
	const struct wire_kv *kv = wire_rem_ext_get(q, k);

	if (kv == NULL)
		return NULL;
	if (len)
		*len = kv->val_len;
	return kv->val;
}

/* Return: 0 and *@v, or -1 when absent or not an integer. Several names: V1 then V2. */
int
bk_rmt__ext_i(const struct wire_rem_cmd *q, const char *k, const char *k2, int64_t *v)
{
	if (wire_rem_ext_i64(q, k, v) == 0)
		return 0;
	if (k2 && wire_rem_ext_i64(q, k2, v) == 0)
		return 0;
	return -1;
}

const char *
bk_rmt__ext_s2(const struct wire_rem_cmd *q, const char *k, const char *k2, size_t *len)
{
	const char *s = bk_rmt__ext_s(q, k, len);

	return s ? s : (k2 ? bk_rmt__ext_s(q, k2, len) : NULL);
}

bool
bk_rmt__is_send_forbidden(const char *t)
{
	static const char *const sys[] = {
		"SCHEDULE_TOPIC_XXXX",	      BK_TIMER_TOPIC,
		"RMQ_SYS_TRANS_HALF_TOPIC",   "RMQ_SYS_TRANS_OP_HALF_TOPIC",
		"TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
		"OFFSET_MOVED_EVENT",	      NULL};

	for (unsigned i = 0; sys[i]; i++)
		if (strcmp(t, sys[i]) == 0)
			return true;
	return false;
}

/* Tag hashes of a TAG expression ("*", "", "a || b"). Return: count, 0 = every tag. */
uint16_t
bk_rmt__expr_codes(const char *e, size_t len, int32_t *codes, uint16_t max, bool *too_many)
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
const struct bk_topic *
bk_rmt__topic_get(struct bk_rmt *r, const char *name, size_t len, uint32_t create_queues,
		  int32_t *code, const char **why)
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

uint32_t
bk_rmt__rnd(void)
{
	static uint32_t x = 2463534242u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

void
bk_rmt__agg_free(struct ragg *a)
{
	free(a->rows);
	free(a);
}

void
bk_rmt__agg_drop(struct rjob *j)
{
	struct ragg *a = j->agg;

	j->agg = NULL;
	a->failed = true;
	if (--a->pending == 0)
		bk_rmt__agg_free(a);
}

/* RocketMQ's slave guard: topics and groups change on the master only. */
bool
bk_rmt__slave_refuses(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	if (r->bk->conf.role != BK_ROLE_SLAVE)
		return false;
	bk_rmt__reply(
		r, c, q, WIRE_RSP_SYSTEM_ERROR,
		"Can't modify topic or subscription group from slave broker, please execute it "
		"from master broker.");
	return true;
}
