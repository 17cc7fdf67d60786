// SPDX-License-Identifier: Apache-2.0
/*
 * producer.c - SEND and SEND_BATCH with queue choice, retries and redirects.
 *
 * A send is a small state machine (struct psend) around one call: the
 * request is encoded once (the message is copied once, into the call's
 * request buffer) and only its queue_id field is patched when a retry moves
 * it to another queue. Each answer goes through send_step(): stored ->
 * done; REDIRECT -> the same request to the core the broker named (the
 * route is refreshed in the background; a redirect is not a retry, but at
 * most MAX_REDIRECTS are followed); a refusal that did not store the
 * message or a transport failure -> the fault table learns about the
 * broker and, while tries and time are left, the request goes to another
 * queue, preferring another broker. SYSTEM_BUSY is back-pressure, not a
 * failure: a topic being auto-created, a full table, a segment being
 * rotated. The same request goes to the same queue again after a pause
 * (BUSY_DELAY_MIN_MS doubling up to BUSY_DELAY_MAX_MS, held on the I/O
 * thread's delayed list), within send_timeout_ms and without using a retry
 * or marking the broker faulty. NO_PERMISSION (a write-protected broker)
 * also asks for a route refresh, which drops the broker's write queues. A sync send runs the steps on the
 * caller's thread; an async send runs them on the client's callback thread
 * (the I/O thread only posts the completion there).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "client_priv.h"
#include "common/clock.h"
#include "sprocket/producer.h"
#include "wire/record.h"

#define MAX_REDIRECTS 3
#define BUSY_DELAY_MIN_MS 1
#define BUSY_DELAY_MAX_MS 50
#define NO_PERM_FAST_REFRESH_MS 3000
#define SEND_QUEUE_ID_OFF 8 /* docs/protocol.md §5.2 */

struct sp_producer {
	struct sp_client *c;
	struct sp_producer_cfg cfg;
	pthread_mutex_t lock; /* fault, rr, inflight */
	pthread_cond_t idle;
	struct sp__fault fault;
	uint32_t rr;
	unsigned inflight; /* async sends not finished */
};

struct psend {
	struct sp_producer *p;
	struct sp__call *call;
	uint16_t op;
	char topic[SP_TOPIC_MAX + 1];
	bool fixed; /* a selector chose the queue: retries stay on it */
	int32_t fixed_qid;
	char fixed_broker[SP_BROKER_MAX + 1];
	char broker[SP_BROKER_MAX + 1]; /* target of the current try */
	char store_addr[64];		/* its remoting address, for the offset msgId */
	unsigned redirects;
	unsigned busy; /* SYSTEM_BUSY answers so far (the backoff) */
	uint64_t deadline_ns;
	int err;
	struct sp_send_result res;
	sp_send_cb cb;
	void *cb_arg;
};

size_t
sp_select_by_key_hash(size_t n_queues, const struct sp_msg *msg, void *arg)
{
	const char *k = msg->keys ? msg->keys : "";
	int64_t h = wire_tag_hash(k, strlen(k));

	(void)arg;
	if (!n_queues)
		return 0;
	h %= (int64_t)n_queues;
	return (size_t)(h < 0 ? -h : h);
}

int
sp_producer_create(struct sp_client *c, const struct sp_producer_cfg *cfg, struct sp_producer **out)
{
	struct sp_producer *p;

	if (!c)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->c = c;
	if (cfg)
		p->cfg = *cfg;
	else
		p->cfg.retry_times = 2, p->cfg.fault_tolerance = true;
	p->cfg.group = NULL; /* not kept */
	if (!p->cfg.compress_over)
		p->cfg.compress_over = 4096;
	if (p->cfg.compress_level < 1 || p->cfg.compress_level > 9)
		p->cfg.compress_level = 5;
	if (!p->cfg.send_timeout_ms)
		p->cfg.send_timeout_ms = 3000;
	if (p->cfg.retry_times > 16)
		p->cfg.retry_times = 16;
	sp__fault_init(&p->fault, p->cfg.fault_avoid_ms);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	*out = p;
	return 0;
}

void
sp_producer_destroy(struct sp_producer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	while (p->inflight)
		pthread_cond_wait(&p->idle, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->idle);
	free(p);
}

static void
psend_free(struct psend *s)
{
	sp__call_free(s->call);
	free(s);
}

/* ---- encoding ---- */

static int
encode(struct psend *s, uint16_t op, const char *topic, const char *props, size_t props_len,
       const void *body, size_t body_len, int32_t flag, int32_t sysflag)
{
	struct wire_dp_send_req r = {
		.born_ts = clk_wall_ms_fast(),
		.queue_id = 0,
		.flag = op == WIRE_DP_OP_SEND ? flag : 0,
		.sysflag = sysflag,
		.topic = topic,
		.topic_len = (uint16_t)strlen(topic),
		.props = props,
		.props_len = (uint16_t)props_len,
		.body = body,
		.body_len = (uint32_t)body_len,
	};
	size_t cap = WIRE_DP_SEND_REQ_FIXED + r.topic_len + props_len + body_len;
	long n;

	if (cap > WIRE_DP_MSG_MAX_DEFAULT)
		return -EMSGSIZE;
	s->call->req = malloc(cap);
	if (!s->call->req)
		return -ENOMEM;
	n = wire_dp_send_req_encode(op, &r, s->call->req, cap);
	if (n < 0)
		return (int)n;
	s->call->req_len = (uint32_t)n;
	s->call->op = op;
	s->op = op;
	return 0;
}

static struct psend *
psend_new(struct sp_producer *p, const char *topic)
{
	struct psend *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->call = sp__call_new();
	if (!s->call) {
		free(s);
		return NULL;
	}
	s->p = p;
	snprintf(s->topic, sizeof(s->topic), "%s", topic);
	s->deadline_ns = clk_mono_ns() + (uint64_t)p->cfg.send_timeout_ms * 1000000ull;
	return s;
}

static int
prepare_one(struct sp_producer *p, const struct sp_msg *m, struct psend **out)
{
	char *props;
	size_t plen;
	struct psend *s;
	int err;

	err = sp__msg_check(m);
	if (err)
		return err;
	s = psend_new(p, m->topic);
	if (!s)
		return -ENOMEM;
	props = malloc(SP__PROPS_MAX);
	if (!props) {
		psend_free(s);
		return -ENOMEM;
	}
	sp__msgid_new(s->res.msg_id);
	err = sp__msg_props(m, s->res.msg_id, props, SP__PROPS_MAX, &plen);
	if (!err && m->body_len >= p->cfg.compress_over) {
		/* as RocketMQ's producer: zlib, kept whatever its size */
		uLongf zlen = compressBound((uLong)m->body_len);
		uint8_t *z = malloc(zlen);

		if (z == NULL)
			err = -ENOMEM;
		else if (compress2(z, &zlen, m->body, (uLong)m->body_len, p->cfg.compress_level) !=
			 Z_OK)
			err = -EINVAL;
		else
			err = encode(s, WIRE_DP_OP_SEND, m->topic, props, plen, z, zlen, m->flag,
				     WIRE_SYSFLAG_COMPRESSED);
		free(z);
	} else if (!err) {
		err = encode(s, WIRE_DP_OP_SEND, m->topic, props, plen, m->body, m->body_len,
			     m->flag, 0);
	}
	free(props);
	if (err) {
		psend_free(s);
		return err;
	}
	*out = s;
	return 0;
}

/* ---- queue choice ---- */

static void
put_le32(uint8_t *b, int32_t v)
{
	uint32_t u = (uint32_t)v;

	b[0] = (uint8_t)u;
	b[1] = (uint8_t)(u >> 8);
	b[2] = (uint8_t)(u >> 16);
	b[3] = (uint8_t)(u >> 24);
}

static const struct sp__tq *
pick(struct psend *s, struct sp__topic *t)
{
	struct sp_producer *p = s->p;
	const struct sp__tq *best = NULL;
	uint64_t best_until = UINT64_MAX;
	uint64_t now = clk_mono_ns();
	uint32_t start;

	if (s->fixed)
		return sp__topic_find(t, s->fixed_broker, s->fixed_qid, false);
	if (!t->n_wq)
		return NULL;
	pthread_mutex_lock(&p->lock);
	start = p->rr++;
	/* 1: an available queue of another broker than the last try's */
	for (size_t i = 0; i < t->n_wq; i++) {
		const struct sp__tq *q = &t->wq[(start + i) % t->n_wq];
		const char *b = t->route->brokers[q->broker].name;
		uint64_t until;

		if (s->res.tries && strcmp(b, s->broker) == 0)
			continue;
		if (!p->cfg.fault_tolerance || sp__fault_is_available(&p->fault, b, now)) {
			best = q;
			break;
		}
		until = sp__fault_until(&p->fault, b);
		if (until < best_until) {
			best_until = until;
			best = q; /* 2: the avoided broker that recovers first */
		}
	}
	/* 3: the last try's broker, when it is the only one */
	if (!best)
		best = &t->wq[start % t->n_wq];
	pthread_mutex_unlock(&p->lock);
	return best;
}

/* Sets the call's destination for the next try. Return: 0 or a negative error. */
static int
target(struct psend *s)
{
	struct sp__topic *t;
	const struct sp__tq *q;
	const struct sp_route_broker *b;
	int err;

	err = sp__topic_get_pub(s->p->c, s->topic, &t);
	if (err)
		return err;
	q = pick(s, t);
	if (!q) {
		sp__topic_put(s->p->c, t);
		return -ENOENT;
	}
	b = &t->route->brokers[q->broker];
	snprintf(s->broker, sizeof(s->broker), "%s", b->name);
	snprintf(s->store_addr, sizeof(s->store_addr), "%s", b->addr);
	s->res.queue_id = q->queue_id;
	put_le32(s->call->req + SEND_QUEUE_ID_OFF, q->queue_id);
	s->call->dst = sp__tq_addr(t, q);
	sp__topic_put(s->p->c, t);
	return 0;
}

/* Return: whether the cached route has a write queue on another broker than the last try's. */
static bool
other_broker(struct psend *s)
{
	struct sp__topic *t;
	bool found = false;

	if (sp__topic_get_pub(s->p->c, s->topic, &t) != 0)
		return false;
	for (size_t i = 0; i < t->n_wq && !found; i++)
		found = strcmp(t->route->brokers[t->wq[i].broker].name, s->broker) != 0;
	sp__topic_put(s->p->c, t);
	return found;
}

/*
 * A write-protected broker re-registered without its write bit, or a
 * broker is no longer its group's master (SERVICE_NOT_AVAILABLE: a slave,
 * or a master that stepped down in a failover, docs/failover.md). When our
 * route knows no other broker, fetch the new one before the retry picks a
 * queue (it may name brokers we have not seen); else refresh in the background.
 */
static void
refresh_after_refusal(struct psend *s)
{
	int err;

	/* the broker's new registration may not have reached the NameServer yet */
	sp__topic_refresh_fast(s->p->c, NO_PERM_FAST_REFRESH_MS);
	if (other_broker(s))
		return;
	err = sp__topic_refresh_now(s->p->c, s->topic);
	if (err)
		sp__log(s->p->c, SP_LOG_DEBUG, "route refresh of %s: %s", s->topic,
			sp_strerror(err));
}

/*
 * After a SYSTEM_BUSY answer: the same request to the same core after a
 * pause. Return: true when it was set up (time is left).
 */
static bool
busy_again(struct psend *s, uint64_t now)
{
	uint64_t delay = (uint64_t)BUSY_DELAY_MIN_MS << SP_MIN(s->busy, 6u);

	delay = SP_MIN(delay, (uint64_t)BUSY_DELAY_MAX_MS) * 1000000ull;
	if (now + delay >= s->deadline_ns)
		return false;
	s->busy++;
	sp__call_reset(s->call);
	s->call->not_before_ns = now + delay;
	/* an auto-created topic gets registered: pick its real route up soon */
	sp__topic_refresh_soon(s->p->c, s->topic);
	return true;
}

static bool
status_is_retriable(int32_t st)
{
	switch (st) {
	case WIRE_DP_ST_SYSTEM_ERROR:
	case WIRE_DP_ST_SYSTEM_BUSY:
	case WIRE_DP_ST_SERVICE_NOT_AVAILABLE:
	case WIRE_DP_ST_NO_PERMISSION:
	case WIRE_DP_ST_TOPIC_NOT_EXIST:
		return true;
	default:
		return false;
	}
}

static bool
err_is_retriable(int err)
{
	switch (err) {
	case -ETIMEDOUT:
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -ENOTCONN:
	case -EBUSY:
	case -EPROTO:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		return true;
	default:
		return false;
	}
}

static void
offset_msgid(struct psend *s)
{
	struct wire_host h = {0};
	char ip[64];
	char *colon;
	struct in_addr ia;

	s->res.offset_msg_id[0] = '\0';
	snprintf(ip, sizeof(ip), "%s", s->store_addr);
	colon = strrchr(ip, ':');
	if (!colon)
		return;
	*colon = '\0';
	if (inet_pton(AF_INET, ip, &ia) != 1)
		return;
	memcpy(h.addr, &ia, 4);
	h.port = (uint32_t)atoi(colon + 1);
	(void)wire_msgid_encode(&h, s->res.phys_offset, s->res.offset_msg_id);
}

/*
 * One answer. Return: 1 send again (call is ready), 0 finished with s->err
 * set (0 or a negative error).
 */
static int
send_step(struct psend *s)
{
	struct sp_producer *p = s->p;
	struct sp__call *call = s->call;
	struct wire_dp_send_resp r;
	uint64_t now = clk_mono_ns();
	uint32_t lat_ms = (uint32_t)((call->t_done_ns - call->t_submit_ns) / 1000000ull);
	bool failed = false;
	int err = call->err;

	s->res.t_submit_ns = call->t_submit_ns;
	s->res.t_done_ns = call->t_done_ns;
	sp__stats_answer(p->c, s->broker, call->t_done_ns - call->t_submit_ns, !err);
	if (!err) {
		err = wire_dp_send_resp_decode(s->op, call->resp, call->resp_len, &r);
		if (err) {
			s->err = err; /* a broken answer: it may have been stored, do not retry */
			return 0;
		}
		s->res.ts = (struct sp_broker_ts){r.head.ts_recv_ns, r.head.ts_handled_ns,
						  r.head.ts_durable_ns, r.head.ts_sent_ns};
		if (r.head.status == WIRE_DP_ST_REDIRECT && s->redirects < MAX_REDIRECTS) {
			s->redirects++;
			call->dst.port = r.head.redirect_port;
			sp__topic_refresh_soon(p->c, s->topic);
			sp__call_reset(call);
			return 1;
		}
		if (wire_dp_status_is_stored(r.head.status)) {
			s->res.status = r.head.status;
			s->res.queue_id = r.queue_id;
			s->res.queue_offset = r.queue_offset;
			s->res.phys_offset = r.phys_offset;
			s->res.count = s->op == WIRE_DP_OP_SEND ? 1 : r.count;
			snprintf(s->res.broker, sizeof(s->res.broker), "%s", s->broker);
			offset_msgid(s);
			pthread_mutex_lock(&p->lock);
			sp__fault_update(&p->fault, s->broker, lat_ms, false, now);
			pthread_mutex_unlock(&p->lock);
			s->err = 0;
			return 0;
		}
		err = SP_ERR_STATUS(r.head.status);
		if (r.head.status == WIRE_DP_ST_SYSTEM_BUSY && busy_again(s, now))
			return 1;
		if (r.head.status == WIRE_DP_ST_NO_PERMISSION ||
		    r.head.status == WIRE_DP_ST_SERVICE_NOT_AVAILABLE)
			refresh_after_refusal(s);
		if (r.head.status == WIRE_DP_ST_SYSTEM_BUSY) {
			s->err = err; /* out of time */
			return 0;
		}
		failed = status_is_retriable(r.head.status);
	} else {
		failed = err_is_retriable(err);
	}
	if (failed) {
		pthread_mutex_lock(&p->lock);
		sp__fault_update(&p->fault, s->broker, lat_ms, true, now);
		pthread_mutex_unlock(&p->lock);
	}
	s->err = err;
	if (!failed || s->res.tries > p->cfg.retry_times || now >= s->deadline_ns)
		return 0;
	sp__log(p->c, SP_LOG_DEBUG, "send to %s queue %d failed (%s), retrying", s->broker,
		(int)s->res.queue_id, sp_strerror(err));
	sp__call_reset(call);
	s->redirects = 0;
	sp__stats_count(p->c, s->broker, true);
	if (target(s))
		return 0; /* keep the send's error, not the route's */
	s->res.tries++;
	return 1;
}

/* ---- sync ---- */

static int
run_sync(struct psend *s, struct sp_send_result *res)
{
	int err = target(s);

	if (!err) {
		s->res.tries = 1;
		for (;;) {
			sp__stats_sent(s->p->c, s->broker);
			(void)sp__call_sync(s->p->c, s->call);
			if (!send_step(s))
				break;
		}
		err = s->err;
		if (err)
			sp__stats_count(s->p->c, s->broker, false);
	}
	if (res)
		*res = s->res;
	psend_free(s);
	return err;
}

static int
choose_fixed(struct psend *s, const struct sp_msg *m)
{
	struct sp_producer *p = s->p;
	struct sp__topic *t;
	size_t i;
	int err;

	if (!p->cfg.selector)
		return 0;
	err = sp__topic_get_pub(p->c, s->topic, &t);
	if (err)
		return err;
	if (!t->n_wq) {
		sp__topic_put(p->c, t);
		return -ENOENT;
	}
	i = p->cfg.selector(t->n_wq, m, p->cfg.selector_arg);
	if (i >= t->n_wq)
		i %= t->n_wq;
	s->fixed = true;
	s->fixed_qid = t->wq[i].queue_id;
	snprintf(s->fixed_broker, sizeof(s->fixed_broker), "%s",
		 t->route->brokers[t->wq[i].broker].name);
	sp__topic_put(p->c, t);
	return 0;
}

/* A send prepared, placed by the selector and aimed (async and oneway paths). Return: 0 or an error (nothing kept). */
static int
prepare_targeted(struct sp_producer *p, const struct sp_msg *msg, struct psend **out)
{
	struct psend *s;
	int err = prepare_one(p, msg, &s);

	if (err)
		return err;
	err = choose_fixed(s, msg);
	if (!err)
		err = target(s);
	if (err) {
		psend_free(s);
		return err;
	}
	*out = s;
	return 0;
}

int
sp_producer_send(struct sp_producer *p, const struct sp_msg *msg, struct sp_send_result *res)
{
	struct psend *s;
	int err;

	if (!p)
		return -EINVAL;
	err = prepare_one(p, msg, &s);
	if (err)
		return err;
	err = choose_fixed(s, msg);
	if (err) {
		psend_free(s);
		return err;
	}
	return run_sync(s, res);
}

/* ---- async ---- */

static void
async_finish(struct psend *s)
{
	struct sp_producer *p = s->p;

	s->cb(s->cb_arg, s->err, &s->res);
	psend_free(s);
	pthread_mutex_lock(&p->lock);
	if (--p->inflight == 0)
		pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
}

static void async_done(struct sp__call *call);

/* Context: the client's callback thread. */
static void
async_step(void *arg)
{
	struct psend *s = arg;

	if (send_step(s)) {
		s->call->done = async_done;
		sp__stats_sent(s->p->c, s->broker);
		sp__call_submit(s->p->c, s->call);
		return;
	}
	if (s->err)
		sp__stats_count(s->p->c, s->broker, false);
	async_finish(s);
}

/* Context: the I/O thread: hand over, nothing else. */
static void
async_done(struct sp__call *call)
{
	struct psend *s = call->arg;

	if (sp__exec_post(s->p->c, async_step, s) != 0)
		async_step(s); /* out of memory: run it here rather than lose it */
}

int
sp_producer_send_async(struct sp_producer *p, const struct sp_msg *msg, sp_send_cb cb, void *arg)
{
	struct psend *s;
	int err;

	if (!p || !cb)
		return -EINVAL;
	err = prepare_targeted(p, msg, &s);
	if (err)
		return err;
	s->cb = cb;
	s->cb_arg = arg;
	s->res.tries = 1;
	s->call->done = async_done;
	s->call->arg = s;
	pthread_mutex_lock(&p->lock);
	p->inflight++;
	pthread_mutex_unlock(&p->lock);
	sp__stats_sent(p->c, s->broker);
	sp__call_submit(p->c, s->call);
	return 0;
}

/* ---- one-way ---- */

/*
 * Context: the I/O thread. No retries (RocketMQ's sendOneway has none), but a
 * REDIRECT is not a failure: the request goes to the named core; nor is
 * SYSTEM_BUSY, which stored nothing: the request is sent again after a pause,
 * within send_timeout_ms.
 */
static void
oneway_done(struct sp__call *call)
{
	struct psend *s = call->arg;
	struct wire_dp_resp_head h;
	bool ok = !call->err && wire_dp_resp_head_decode(call->resp, call->resp_len, &h) == 0;

	if (ok && h.status == WIRE_DP_ST_REDIRECT && s->redirects < MAX_REDIRECTS) {
		s->redirects++;
		call->dst.port = h.redirect_port;
		sp__call_reset(call);
		sp__topic_refresh_soon(s->p->c, s->topic);
		sp__call_submit(s->p->c, call);
		return;
	}
	/* BUSY stored nothing (an auto-created topic's first messages): send again later */
	if (ok && h.status == WIRE_DP_ST_SYSTEM_BUSY && busy_again(s, clk_mono_ns())) {
		sp__call_submit(s->p->c, call);
		return;
	}
	psend_free(s);
}

int
sp_producer_send_oneway(struct sp_producer *p, const struct sp_msg *msg)
{
	struct psend *s;
	int err;

	if (!p)
		return -EINVAL;
	err = prepare_targeted(p, msg, &s);
	if (err)
		return err;
	s->call->done = oneway_done;
	s->call->arg = s;
	sp__call_submit(p->c, s->call);
	return 0;
}

/* ---- batch ---- */

/* Encodes items [@from, @n) of @msgs, with UNIQ_KEYs @ids, as @s's SEND_BATCH. */
static int
batch_encode(struct psend *s, const struct sp_msg *msgs, size_t from, size_t n,
	     char (*ids)[SP_MSGID_LEN + 1])
{
	char *props = malloc(SP__PROPS_MAX);
	uint8_t *body = NULL;
	size_t body_cap = 0;
	size_t body_len = 0;
	size_t l;
	int err = -ENOMEM;

	if (!props)
		return -ENOMEM;
	/* pass 1: sizes */
	for (size_t i = from; i < n; i++) {
		err = sp__msg_props(&msgs[i], ids[i], props, SP__PROPS_MAX, &l);
		if (err)
			goto out;
		body_cap += WIRE_BATCH_ITEM_FIXED + msgs[i].body_len + l;
	}
	err = -EMSGSIZE;
	if (body_cap > WIRE_DP_MSG_MAX_DEFAULT)
		goto out;
	err = -ENOMEM;
	body = malloc(body_cap ? body_cap : 1);
	if (!body)
		goto out;
	/* pass 2: the batch body, each item with its own UNIQ_KEY */
	for (size_t i = from; i < n; i++) {
		struct wire_batch_item it;

		err = sp__msg_props(&msgs[i], ids[i], props, SP__PROPS_MAX, &l);
		if (err)
			goto out;
		it = (struct wire_batch_item){
			.flag = msgs[i].flag,
			.body = msgs[i].body,
			.body_len = (uint32_t)msgs[i].body_len,
			.props = props,
			.props_len = (uint16_t)l,
		};
		err = wire_batch_append(body, body_cap, &body_len, &it);
		if (err)
			goto out;
	}
	free(s->call->req);
	s->call->req = NULL;
	err = encode(s, WIRE_DP_OP_SEND_BATCH, s->topic, NULL, 0, body, body_len, 0, 0);
out:
	free(body);
	free(props);
	return err;
}

/*
 * A broker whose CommitLog segment fills up mid-batch stores the items
 * before that point and answers with their count (docs/broker.md): the rest
 * is sent again as a new batch to the same queue, so the batch still lands
 * whole and in order.
 */
int
sp_producer_send_batch(struct sp_producer *p, const struct sp_msg *msgs, size_t n,
		       struct sp_send_result *res, char (*msg_ids)[SP_MSGID_LEN + 1])
{
	char(*ids)[SP_MSGID_LEN + 1];
	struct sp_send_result first = {0};
	size_t done = 0;
	int err = 0;

	if (!p || !msgs || !n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		err = sp__msg_check(&msgs[i]);
		if (err)
			return err;
		if (strcmp(msgs[i].topic, msgs[0].topic) != 0)
			return -EINVAL;
	}
	ids = malloc(n * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		sp__msgid_new(ids[i]);
	if (msg_ids)
		memcpy(msg_ids, ids, n * sizeof(*ids));
	while (done < n) {
		struct sp_send_result r;
		struct psend *s = psend_new(p, msgs[0].topic);

		if (!s) {
			err = -ENOMEM;
			break;
		}
		memcpy(s->res.msg_id, ids[done], sizeof(ids[done]));
		err = batch_encode(s, msgs, done, n, ids);
		if (!err && done == 0) {
			err = choose_fixed(s, &msgs[0]);
		} else if (!err) {
			s->fixed = true; /* the rest goes where the first part went */
			s->fixed_qid = first.queue_id;
			snprintf(s->fixed_broker, sizeof(s->fixed_broker), "%s", first.broker);
		}
		if (err) {
			psend_free(s);
			break;
		}
		err = run_sync(s, &r);
		if (done == 0) {
			first = r;
			first.count = 0;
		} else {
			first.tries += r.tries;
			first.ts = r.ts;
			first.t_done_ns = r.t_done_ns;
			if (r.status && !first.status)
				first.status = r.status;
		}
		if (err)
			break;
		if (r.count == 0 || r.count > n - done) {
			err = -EPROTO; /* the broker must store at least one item, at most all */
			break;
		}
		first.count += r.count;
		done += r.count;
	}
	free(ids);
	if (res)
		*res = first; /* on an error, count says how many were stored */
	return err;
}
