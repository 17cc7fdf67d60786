// SPDX-License-Identifier: Apache-2.0
/*
 * test_io.c - libsprocket end to end against a fake two-core broker.
 *
 * The fake runs the real transport server (dp_xsrv) on two udp ports of
 * 127.0.0.1 in one thread and keeps queues in memory as RocketMQ stored
 * records: enough of docs/protocol.md to exercise the client's I/O thread,
 * the producer (sync, async, one-way, batch, selector, REDIRECT from a
 * stale queue->core map, retry after SYSTEM_BUSY), the pull API, offsets,
 * SEND_BACK and the push consumer. Its route is put in the client's cache
 * directly; the NameServer address points at nothing.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../../../client/client_priv.h"
#include "common/clock.h"
#include "harness.h"
#include "sprocket/consumer.h"
#include "sprocket/producer.h"
#include "wire/record.h"

#define NQ 4
#define QCAP 4096

struct fq {
	uint8_t *recs[QCAP];
	uint32_t len[QCAP];
	int64_t n;
};

static struct fake {
	struct dp_port *ports[2];
	struct dp_xsrv *srv[2];
	uint16_t base;
	pthread_t th;
	_Atomic bool stop;
	pthread_mutex_t lock;
	struct fq q[NQ];
	int64_t phys;
	int64_t committed[NQ]; /* group "G" */
	bool has_commit[NQ];
	_Atomic int busy_left; /* answer SYSTEM_BUSY this many SENDs */
	_Atomic int sends;
	_Atomic int redirects;
	_Atomic int send_backs;
} F;

static struct dp_xsrv *
srv_of(struct dp_xsrv *s, int *core)
{
	*core = s == F.srv[0] ? 0 : 1;
	return s;
}

static void
respond(struct dp_xsrv *s, struct dp_xhandle h, const uint8_t *buf, long n)
{
	uint8_t *out;

	T_ASSERT(n > 0);
	out = dp_xsrv_resp_buf(s, h, (uint32_t)n);
	T_ASSERT(out != NULL);
	memcpy(out, buf, (size_t)n);
	T_ASSERT_EQ(dp_xsrv_respond(s, h, (uint32_t)n), 0);
}

static void
error_resp(struct dp_xsrv *s, const struct dp_xreq *rq, int32_t st, int core_owner)
{
	struct wire_dp_resp_head h = {.status = st};
	uint8_t buf[128];

	if (st == WIRE_DP_ST_REDIRECT) {
		h.redirect_core = (uint16_t)core_owner;
		h.redirect_port = (uint16_t)(F.base + core_owner);
		atomic_fetch_add(&F.redirects, 1);
	}
	respond(s, rq->h, buf, wire_dp_resp_error_encode(rq->op, &h, buf, sizeof(buf)));
}

/* Stores one message; F.lock held. Return: its queue offset. */
static int64_t
store(int32_t qid, const char *topic, uint16_t tl, const char *props, uint16_t pl,
      const uint8_t *body, uint32_t bl, int64_t *phys)
{
	struct fq *q = &F.q[qid];
	struct wire_msg m = {0};
	size_t sz;
	uint8_t *rec;

	m.queue_id = qid;
	m.queue_offset = q->n;
	m.phys_offset = F.phys;
	m.born_ts = clk_wall_ms();
	m.store_ts = clk_wall_ms();
	m.born_host.addr[0] = 127;
	m.store_host.addr[0] = 127;
	m.store_host.port = 10911;
	m.body = body;
	m.body_len = bl;
	m.topic = topic;
	m.topic_len = (uint8_t)tl;
	m.props = props;
	m.props_len = pl;
	sz = wire_rec_size(&m);
	rec = malloc(sz);
	T_ASSERT(rec && q->n < QCAP);
	T_ASSERT_EQ(wire_rec_encode(&m, rec, sz), (long)sz);
	q->recs[q->n] = rec;
	q->len[q->n] = (uint32_t)sz;
	*phys = F.phys;
	F.phys += (int64_t)sz;
	return q->n++;
}

static void
h_send(struct dp_xsrv *s, const struct dp_xreq *rq, int core)
{
	struct wire_dp_send_req r;
	struct wire_dp_send_resp o = {0};
	int64_t phys[64];
	uint8_t buf[64 + 8 * 64];

	T_ASSERT_EQ(wire_dp_send_req_decode(rq->op, rq->msg, rq->len, &r), 0);
	if (r.queue_id < 0 || r.queue_id >= NQ) {
		error_resp(s, rq, WIRE_DP_ST_SYSTEM_ERROR, 0);
		return;
	}
	if (r.queue_id % 2 != core) {
		error_resp(s, rq, WIRE_DP_ST_REDIRECT, r.queue_id % 2);
		return;
	}
	if (atomic_fetch_sub(&F.busy_left, 1) > 0) {
		error_resp(s, rq, WIRE_DP_ST_SYSTEM_BUSY, 0);
		return;
	}
	pthread_mutex_lock(&F.lock);
	if (rq->op == WIRE_DP_OP_SEND) {
		o.queue_offset = store(r.queue_id, r.topic, r.topic_len, r.props, r.props_len,
				       r.body, r.body_len, &o.phys_offset);
		o.count = 1;
	} else {
		struct wire_batch_item it;
		size_t pos = 0;

		while (wire_batch_next(r.body, r.body_len, &pos, &it) == 1) {
			int64_t qo = store(r.queue_id, r.topic, r.topic_len, it.props, it.props_len,
					   it.body, it.body_len, &phys[o.count]);

			if (o.count == 0) {
				o.queue_offset = qo;
				o.phys_offset = phys[0];
			}
			o.count++;
		}
		o.phys_offsets = (const uint8_t *)phys;
	}
	pthread_mutex_unlock(&F.lock);
	atomic_fetch_add(&F.sends, 1);
	o.queue_id = r.queue_id;
	respond(s, rq->h, buf, wire_dp_send_resp_encode(rq->op, &o, buf, sizeof(buf)));
}

static void
h_pull(struct dp_xsrv *s, const struct dp_xreq *rq, int core)
{
	struct wire_dp_pull_req r;
	struct wire_dp_pull_resp o = {0};
	static uint8_t recs[1 << 20];
	static uint8_t buf[(1 << 20) + 128];
	struct fq *q;

	T_ASSERT_EQ(wire_dp_pull_req_decode(rq->msg, rq->len, &r), 0);
	if (r.queue_id % 2 != core) {
		error_resp(s, rq, WIRE_DP_ST_REDIRECT, r.queue_id % 2);
		return;
	}
	pthread_mutex_lock(&F.lock);
	q = &F.q[r.queue_id];
	if (r.sysflag & WIRE_DP_PULL_COMMIT_OFFSET) {
		F.committed[r.queue_id] = r.commit_offset;
		F.has_commit[r.queue_id] = true;
	}
	o.min_offset = 0;
	o.max_offset = q->n;
	if (r.queue_offset > q->n) {
		o.head.status = WIRE_DP_ST_PULL_OFFSET_MOVED;
		o.next_begin_offset = q->n;
	} else if (r.queue_offset == q->n) {
		o.head.status = WIRE_DP_ST_PULL_NOT_FOUND;
		o.next_begin_offset = q->n;
	} else {
		int64_t i = r.queue_offset;

		while (i < q->n && o.rec_count < (uint32_t)r.max_msgs &&
		       o.records_len + q->len[i] < sizeof(recs)) {
			memcpy(recs + o.records_len, q->recs[i], q->len[i]);
			o.records_len += q->len[i];
			o.rec_count++;
			i++;
		}
		o.next_begin_offset = i;
		o.records = recs;
	}
	pthread_mutex_unlock(&F.lock);
	if (o.head.status == WIRE_DP_ST_PULL_NOT_FOUND && (r.sysflag & WIRE_DP_PULL_SUSPEND))
		usleep(1000); /* a crude long poll: the test's pulls come back soon */
	respond(s, rq->h, buf, wire_dp_pull_resp_encode(&o, buf, sizeof(buf)));
}

static void
h_offset(struct dp_xsrv *s, const struct dp_xreq *rq, int core)
{
	struct wire_dp_offset_req r;
	struct wire_dp_offset_resp o = {0};
	uint8_t buf[64];

	T_ASSERT_EQ(wire_dp_offset_req_decode(rq->op, rq->msg, rq->len, &r), 0);
	if (r.queue_id % 2 != core) {
		error_resp(s, rq, WIRE_DP_ST_REDIRECT, r.queue_id % 2);
		return;
	}
	pthread_mutex_lock(&F.lock);
	switch (rq->op) {
	case WIRE_DP_OP_QUERY_OFFSET:
		if (F.has_commit[r.queue_id])
			o.offset = F.committed[r.queue_id];
		else
			o.head.status = WIRE_DP_ST_QUERY_NOT_FOUND;
		break;
	case WIRE_DP_OP_UPDATE_OFFSET:
		F.committed[r.queue_id] = r.value;
		F.has_commit[r.queue_id] = true;
		o.offset = r.value;
		break;
	case WIRE_DP_OP_GET_MIN_OFFSET:
		o.offset = 0;
		break;
	case WIRE_DP_OP_GET_MAX_OFFSET:
		o.offset = F.q[r.queue_id].n;
		break;
	default: /* SEARCH: everything is "now" */
		o.offset = 0;
		break;
	}
	pthread_mutex_unlock(&F.lock);
	respond(s, rq->h, buf, wire_dp_offset_resp_encode(rq->op, &o, buf, sizeof(buf)));
}

static void
handler(struct dp_xsrv *s, const struct dp_xreq *rq, void *arg)
{
	struct wire_dp_resp_head h = {0};
	uint8_t buf[128];
	int core;

	(void)arg;
	(void)srv_of(s, &core);
	switch (rq->op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH:
		h_send(s, rq, core);
		break;
	case WIRE_DP_OP_PULL:
		h_pull(s, rq, core);
		break;
	case WIRE_DP_OP_SEND_BACK: {
		struct wire_dp_send_back_req r;

		T_ASSERT_EQ(wire_dp_send_back_req_decode(rq->msg, rq->len, &r), 0);
		T_ASSERT_EQ(r.max_reconsume_times, 16);
		atomic_fetch_add(&F.send_backs, 1);
		respond(s, rq->h, buf, wire_dp_bare_resp_encode(rq->op, &h, buf, sizeof(buf)));
		break;
	}
	case WIRE_DP_OP_PING: {
		struct wire_dp_ping_req r;
		struct wire_dp_ping_resp o = {0};

		T_ASSERT_EQ(wire_dp_ping_req_decode(rq->msg, rq->len, &r), 0);
		o.echo_ts_ns = r.client_ts_ns;
		respond(s, rq->h, buf, wire_dp_ping_resp_encode(&o, buf, sizeof(buf)));
		break;
	}
	case WIRE_DP_OP_DISCONNECT:
		respond(s, rq->h, buf, wire_dp_bare_resp_encode(rq->op, &h, buf, sizeof(buf)));
		break;
	default:
		h_offset(s, rq, core);
		break;
	}
}

static void *
fake_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&F.stop)) {
		unsigned n = 0;

		for (int i = 0; i < 2; i++)
			n += dp_xsrv_poll(F.srv[i], clk_mono_ns());
		if (!n)
			dp_port_wait(F.ports[0], 100);
	}
	return NULL;
}

static void
fake_start(void)
{
	struct dp_port_cfg pc = {.backend = DP_BACKEND_UDP, .ip = htonl(INADDR_LOOPBACK), .n = 2};
	struct dp_xsrv_cfg sc = {0};
	int err = -1;

	memset(&F, 0, sizeof(F));
	pthread_mutex_init(&F.lock, NULL);
	for (int tries = 0; tries < 50 && err; tries++) {
		pc.base_port = (uint16_t)(20000 + (getpid() * 7 + tries * 131) % 30000);
		err = dp_ports_open(&pc, F.ports);
	}
	T_ASSERT_EQ(err, 0);
	F.base = pc.base_port;
	for (int i = 0; i < 2; i++) {
		sc.core = (uint16_t)i;
		T_ASSERT_EQ(dp_xsrv_create(&sc, F.ports[i], handler, NULL, &F.srv[i]), 0);
	}
	T_ASSERT_EQ(pthread_create(&F.th, NULL, fake_main, NULL), 0);
}

static void
fake_stop(void)
{
	atomic_store(&F.stop, true);
	pthread_join(F.th, NULL);
	for (int i = 0; i < 2; i++)
		dp_xsrv_destroy(F.srv[i]);
	dp_ports_close(F.ports, 2);
	for (int q = 0; q < NQ; q++)
		for (int64_t i = 0; i < F.q[q].n; i++)
			free(F.q[q].recs[i]);
}

static void
t_log(void *arg, enum sp_log_level lvl, const char *line)
{
	(void)arg;
	fprintf(stderr, "log %d: %s\n", (int)lvl, line);
}

/* A client whose cache holds topic "T" on the fake, with every queue mapped to core 0. */
static struct sp_client *
client_new(void)
{
	struct sp_client_cfg cfg = {.namesrv = "127.0.0.1:1",
				    .route_refresh_ms = 600000,
				    .log = getenv("T_LOG") ? t_log : NULL,
				    .log_level = SP_LOG_DEBUG};
	struct sp_client *c;
	char json[1024];
	struct sp_route *r;
	struct sp__topic *t;

	T_ASSERT_EQ(sp_client_create(&cfg, &c), 0);
	snprintf(json, sizeof(json),
		 "{\"brokerDatas\":[{\"brokerAddrs\":{\"0\":\"127.0.0.1:10911\"},"
		 "\"brokerName\":\"fake\",\"cluster\":\"C\","
		 "\"dataplaneAddrs\":{\"0\":{\"cores\":2,\"ip\":\"127.0.0.1\","
		 "\"mac\":\"00:00:00:00:00:00\",\"port\":%u}}}],"
		 "\"queueDatas\":[{\"brokerName\":\"fake\",\"dataplaneQueueCores\":[0,0,0,0],"
		 "\"perm\":6,\"readQueueNums\":4,\"topicSysFlag\":0,\"writeQueueNums\":4}]}",
		 F.base);
	T_ASSERT_EQ(sp_route_parse(json, strlen(json), &r), 0);
	T_ASSERT_EQ(sp__topic_build("T", r, &t), 0);
	t = sp__topic_install(c, t, false);
	T_ASSERT(t != NULL);
	sp__topic_put(c, t);
	return c;
}

static void
test_sync_send_redirect_pull(void)
{
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_producer_cfg pc = {.retry_times = 2, .fault_tolerance = true};
	int per_q[NQ] = {0};

	fake_start();
	c = client_new();
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	for (int i = 0; i < 200; i++) {
		char body[32];
		struct sp_msg m = {.topic = "T", .tags = i % 2 ? "odd" : "even", .keys = "k"};
		struct sp_send_result res;

		snprintf(body, sizeof(body), "msg-%d", i);
		m.body = body;
		m.body_len = strlen(body);
		T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
		T_ASSERT_EQ(res.status, 0);
		T_ASSERT_EQ(strlen(res.msg_id), 32);
		T_ASSERT_EQ(strlen(res.offset_msg_id), 32);
		T_ASSERT_EQ(res.queue_offset, per_q[res.queue_id]);
		T_ASSERT(res.t_done_ns >= res.t_submit_ns);
		per_q[res.queue_id]++;
	}
	/* round robin: every queue got a share; odd queues came through a redirect */
	for (int q = 0; q < NQ; q++)
		T_ASSERT(per_q[q] >= 40);
	T_ASSERT(atomic_load(&F.redirects) >= 100);
	/* pull queue 1 back: REDIRECT followed, tag re-check */
	{
		struct sp_mq mq = {.topic = "T", .queue_id = 1};
		struct sp_pull_req rq = {.offset = 0, .max_msgs = 1000, .group = "G"};
		struct sp_pull_result res;
		int64_t off;

		T_ASSERT_EQ(sp_pull(c, &mq, &rq, &res), 0);
		T_ASSERT_EQ(res.status, SP_PULL_FOUND);
		T_ASSERT_EQ((long)res.n_msgs, per_q[1]);
		T_ASSERT_EQ(res.next_offset, per_q[1]);
		T_ASSERT_EQ(res.msgs[0].queue_offset, 0);
		T_ASSERT(res.msgs[0].body_len > 4 && memcmp(res.msgs[0].body, "msg-", 4) == 0);
		T_ASSERT_STREQ(res.msgs[0].keys, "k");
		T_ASSERT_EQ(strlen(res.msgs[0].msg_id), 32);
		sp_pull_result_free(&res);
		rq.expr = "odd";
		T_ASSERT_EQ(sp_pull(c, &mq, &rq, &res), 0);
		for (size_t i = 0; i < res.n_msgs; i++)
			T_ASSERT_STREQ(res.msgs[i].tags, "odd");
		sp_pull_result_free(&res);
		rq.offset = per_q[1];
		T_ASSERT_EQ(sp_pull(c, &mq, &rq, &res), 0);
		T_ASSERT_EQ(res.status, SP_PULL_NO_NEW_MSG);
		sp_pull_result_free(&res);
		rq.offset = per_q[1] + 100;
		T_ASSERT_EQ(sp_pull(c, &mq, &rq, &res), 0);
		T_ASSERT_EQ(res.status, SP_PULL_OFFSET_ILLEGAL);
		T_ASSERT_EQ(res.next_offset, per_q[1]);
		sp_pull_result_free(&res);
		/* offsets */
		T_ASSERT_EQ(sp_max_offset(c, &mq, &off), 0);
		T_ASSERT_EQ(off, per_q[1]);
		T_ASSERT_EQ(sp_min_offset(c, &mq, &off), 0);
		T_ASSERT_EQ(off, 0);
		T_ASSERT_EQ(sp_query_offset(c, "G", &mq, &off),
			    SP_ERR_STATUS(WIRE_DP_ST_QUERY_NOT_FOUND));
		T_ASSERT_EQ(sp_update_offset(c, "G", &mq, 7), 0);
		T_ASSERT_EQ(sp_query_offset(c, "G", &mq, &off), 0);
		T_ASSERT_EQ(off, 7);
		T_ASSERT_EQ(sp_search_offset(c, &mq, 0, &off), 0);
		mq.queue_id = 9;
		T_ASSERT_EQ(sp_max_offset(c, &mq, &off), -ENOENT);
	}
	sp_producer_destroy(p);
	sp_client_destroy(c);
	fake_stop();
}

static void
test_retry_after_busy(void)
{
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_producer_cfg pc = {.retry_times = 2, .send_timeout_ms = 300};
	struct sp_msg m = {.topic = "T", .body = "x", .body_len = 1};
	struct sp_send_result res;

	fake_start();
	c = client_new();
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	/* SYSTEM_BUSY is back-pressure: sent again after a pause, not a retry */
	atomic_store(&F.busy_left, 5);
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	T_ASSERT_EQ(res.tries, 1);
	/* until send_timeout_ms runs out */
	atomic_store(&F.busy_left, 1000000);
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), SP_ERR_STATUS(WIRE_DP_ST_SYSTEM_BUSY));
	T_ASSERT_EQ(res.tries, 1);
	atomic_store(&F.busy_left, 0);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	fake_stop();
}

static _Atomic int async_ok;
static _Atomic int async_fail;

static void
async_cb(void *arg, int err, const struct sp_send_result *res)
{
	(void)arg;
	if (err == 0 && strlen(res->msg_id) == 32)
		atomic_fetch_add(&async_ok, 1);
	else
		atomic_fetch_add(&async_fail, 1);
}

static void
test_async_oneway_batch_selector(void)
{
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_producer *ps;
	struct sp_producer_cfg pc = {.retry_times = 2, .selector = sp_select_by_key_hash};
	struct sp_msg batch[10];
	char ids[10][SP_MSGID_LEN + 1];
	struct sp_send_result res;
	int32_t qid = -1;

	fake_start();
	c = client_new();
	T_ASSERT_EQ(sp_producer_create(c, NULL, &p), 0);
	for (int i = 0; i < 500; i++) {
		struct sp_msg m = {.topic = "T", .body = "async", .body_len = 5};

		T_ASSERT_EQ(sp_producer_send_async(p, &m, async_cb, NULL), 0);
	}
	sp_producer_destroy(p); /* waits for the callbacks */
	T_ASSERT_EQ(atomic_load(&async_ok), 500);
	T_ASSERT_EQ(atomic_load(&async_fail), 0);
	T_ASSERT_EQ(sp_producer_create(c, NULL, &p), 0);
	for (int i = 0; i < 10; i++) {
		struct sp_msg m = {.topic = "T", .body = "oneway", .body_len = 6};

		T_ASSERT_EQ(sp_producer_send_oneway(p, &m), 0);
	}
	for (int i = 0; i < 10; i++)
		batch[i] =
			(struct sp_msg){.topic = "T", .tags = "b", .body = "batch", .body_len = 5};
	T_ASSERT_EQ(sp_producer_send_batch(p, batch, 10, &res, ids), 0);
	T_ASSERT_EQ(res.count, 10);
	T_ASSERT_STREQ(res.msg_id, ids[0]);
	T_ASSERT(strcmp(ids[0], ids[9]) != 0);
	batch[3].topic = "U";
	T_ASSERT_EQ(sp_producer_send_batch(p, batch, 10, &res, NULL), -EINVAL);
	/* a selector keeps a key on one queue */
	T_ASSERT_EQ(sp_producer_create(c, &pc, &ps), 0);
	for (int i = 0; i < 20; i++) {
		struct sp_msg m = {.topic = "T", .keys = "order-1", .body = "s", .body_len = 1};

		T_ASSERT_EQ(sp_producer_send(ps, &m, &res), 0);
		if (qid < 0)
			qid = res.queue_id;
		T_ASSERT_EQ(res.queue_id, qid);
	}
	{
		struct sp_msg m = {.topic = "NoSuchTopic", .body = "s", .body_len = 1};

		T_ASSERT(sp_producer_send(p, &m, &res) < 0); /* no NameServer to ask */
	}
	sp_producer_destroy(ps);
	sp_producer_destroy(p);
	sp_client_destroy(c);
	/* one-way sends may still be in flight when the client closes */
	T_ASSERT(atomic_load(&F.sends) >= 500 + 1 + 20);
	T_ASSERT(atomic_load(&F.sends) <= 500 + 10 + 1 + 20);
	fake_stop();
}

static _Atomic int consumed;
static _Atomic int failed_once;
static int64_t last_off[NQ];
static _Atomic bool order_ok = true;

static enum sp_consume_status
consume(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	(void)arg;
	if (m->queue_offset != last_off[mq->queue_id] + 1)
		atomic_store(&order_ok, false);
	last_off[mq->queue_id] = m->queue_offset;
	atomic_fetch_add(&consumed, 1);
	if (m->queue_offset == 5 && mq->queue_id == 2 && !atomic_exchange(&failed_once, 1))
		return SP_CONSUME_LATER;
	return SP_CONSUME_SUCCESS;
}

static void
test_push(void)
{
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_push *a;
	struct sp_push *b;
	struct sp_push_cfg cfg = {
		.group = "G",
		.topic = "T",
		.fn = consume,
		.threads = 2,
		.member_count = 2,
		.from = SP_FROM_FIRST,
		.suspend_ms = 200,
		.commit_interval_ms = 100,
	};
	struct sp_mq *mqs;
	size_t n;
	uint64_t end;

	fake_start();
	c = client_new();
	for (int q = 0; q < NQ; q++)
		last_off[q] = -1;
	T_ASSERT_EQ(sp_producer_create(c, NULL, &p), 0);
	for (int i = 0; i < 400; i++) {
		struct sp_msg m = {.topic = "T", .body = "push", .body_len = 4};
		struct sp_send_result res;

		T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	}
	T_ASSERT_EQ(sp_push_start(c, &cfg, &a), 0);
	cfg.member_index = 1;
	T_ASSERT_EQ(sp_push_start(c, &cfg, &b), 0);
	T_ASSERT_EQ(sp_push_queues(a, &mqs, &n), 0);
	T_ASSERT_EQ(n, 2);
	T_ASSERT_EQ(mqs[0].queue_id, 0);
	free(mqs);
	end = clk_mono_ns() + 10ull * 1000000000ull;
	while (atomic_load(&consumed) < 400 && clk_mono_ns() < end)
		usleep(1000);
	T_ASSERT_EQ(atomic_load(&consumed), 400);
	/* more while running: the long polls pick them up */
	for (int i = 0; i < 100; i++) {
		struct sp_msg m = {.topic = "T", .body = "push", .body_len = 4};

		T_ASSERT_EQ(sp_producer_send_oneway(p, &m), 0);
	}
	end = clk_mono_ns() + 10ull * 1000000000ull;
	while (atomic_load(&consumed) < 500 && clk_mono_ns() < end)
		usleep(1000);
	usleep(300 * 1000);
	T_ASSERT_EQ(atomic_load(&consumed), 500);
	T_ASSERT(atomic_load(&order_ok));
	T_ASSERT_EQ(atomic_load(&F.send_backs), 1);
	sp_push_stop(a);
	sp_push_stop(b);
	for (int q = 0; q < NQ; q++) {
		T_ASSERT(F.has_commit[q]);
		T_ASSERT_EQ(F.committed[q], F.q[q].n);
	}
	sp_producer_destroy(p);
	sp_client_destroy(c);
	fake_stop();
}

/* The broker goes away: sends fail with a transport error instead of hanging. */
static void
test_dead_broker(void)
{
	struct sp_client *c;
	struct sp_producer *p;
	struct sp_producer_cfg pc = {.retry_times = 1, .send_timeout_ms = 10000};
	struct sp_msg m = {.topic = "T", .body = "x", .body_len = 1};
	struct sp_send_result res;
	int err;

	fake_start();
	c = client_new();
	T_ASSERT_EQ(sp_producer_create(c, &pc, &p), 0);
	T_ASSERT_EQ(sp_producer_send(p, &m, &res), 0);
	fake_stop();
	err = sp_producer_send(p, &m, &res);
	T_ASSERT(err == -ETIMEDOUT || err == -ECONNRESET || err == -ECONNREFUSED);
	sp_producer_destroy(p);
	sp_client_destroy(c);
}

T_MAIN(T_CASE(test_sync_send_redirect_pull), T_CASE(test_retry_after_busy),
       T_CASE(test_async_oneway_batch_selector), T_CASE(test_push), T_CASE(test_dead_broker))
