// SPDX-License-Identifier: Apache-2.0
/*
 * test_broker.c - sprocket-broker as a process, driven over its dataplane
 * with the session transport client and the wire codecs (no libsprocket):
 * every op, bad input to every op (a clear status, nothing written),
 * redirects, long polling, SEND_BACK to %RETRY% and %DLQ%, write
 * protection, SYNC_FLUSH, and offsets and data across a clean restart.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bk_proc.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "dp/port.h"
#include "dp/xport.h"
#include "harness.h"
#include "store/meta.h"
#include "wire/dp.h"
#include "wire/record.h"

#define WAIT_MS 5000

struct conn {
	struct dp_port *port;
	struct dp_xcli *cli;
	struct dp_xsess *s[2];
};

struct call {
	bool done;
	int err;
	uint8_t *resp;
	uint32_t len;
};

static void
on_done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct call *c = arg;

	c->done = true;
	c->err = err;
	if (err == 0) {
		c->resp = malloc(len ? len : 1);
		memcpy(c->resp, msg, len);
		c->len = len;
	}
}

static void
conn_open(struct conn *k, uint16_t base)
{
	struct dp_port_cfg pc = {.backend = DP_BACKEND_UDP, .ip = htonl(INADDR_LOOPBACK), .n = 1};
	struct dp_xcli_cfg cc = {0};

	clk_init();
	T_ASSERT_EQ(dp_ports_open(&pc, &k->port), 0);
	T_ASSERT_EQ(dp_xcli_create(&cc, k->port, &k->cli), 0);
	for (unsigned i = 0; i < 2; i++) {
		struct dp_addr a = {.ip = htonl(INADDR_LOOPBACK), .port = (uint16_t)(base + i)};

		T_ASSERT_EQ(dp_xcli_connect(k->cli, a, WAIT_MS, &k->s[i]), 0);
	}
}

static void
conn_close(struct conn *k)
{
	for (unsigned i = 0; i < 2; i++)
		dp_xcli_close(k->s[i], 200);
	dp_xcli_destroy(k->cli);
	dp_ports_close(&k->port, 1);
}

/* Submits and polls until @c completes (or @timeout_ms). */
static void
call_wait(struct conn *k, struct call *c, uint32_t timeout_ms)
{
	uint64_t end = clk_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

	while (!c->done) {
		T_ASSERT(clk_mono_ns() < end);
		(void)dp_xcli_poll(k->cli);
	}
	T_ASSERT_EQ(c->err, 0);
}

static struct call
call(struct conn *k, unsigned core, uint16_t op, const uint8_t *msg, uint32_t len)
{
	struct call c = {0};

	T_ASSERT_EQ(dp_xcli_submit(k->s[core], op, msg, len, on_done, &c), 0);
	call_wait(k, &c, WAIT_MS);
	return c;
}

static int32_t
status_of(const struct call *c)
{
	struct wire_dp_resp_head h;

	T_ASSERT_EQ(wire_dp_resp_head_decode(c->resp, c->len, &h), 0);
	return h.status;
}

/* SEND @body with properties @props to (@topic, @qid) via core @core. */
static struct call
send_props(struct conn *k, unsigned core, const char *topic, int32_t qid, const char *props,
	   size_t plen, const void *body, uint32_t blen)
{
	static uint8_t buf[1 << 17];
	struct wire_dp_send_req r = {.born_ts = clk_wall_ms(),
				     .queue_id = qid,
				     .topic = topic,
				     .topic_len = (uint16_t)strlen(topic),
				     .props = props,
				     .props_len = (uint16_t)plen,
				     .body = body,
				     .body_len = blen};
	long n = wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf, sizeof(buf));

	T_ASSERT(n > 0);
	return call(k, core, WIRE_DP_OP_SEND, buf, (uint32_t)n);
}

/* SEND @body to (@topic, @qid) via core @core. Return: the response (caller frees resp). */
static struct call
send_msg(struct conn *k, unsigned core, const char *topic, int32_t qid, const char *tags,
	 const void *body, uint32_t blen)
{
	char props[256];
	size_t plen = 0;

	if (tags)
		T_ASSERT_EQ(wire_props_append(props, sizeof(props), &plen, "TAGS", 4, tags,
					      strlen(tags)),
			    0);
	return send_props(k, core, topic, qid, props, plen, body, blen);
}

/* SEND until the status is not SYSTEM_BUSY (a topic being auto-created). */
static struct call
send_retry(struct conn *k, unsigned core, const char *topic, int32_t qid, const char *tags,
	   const void *body, uint32_t blen)
{
	for (int i = 0; i < 500; i++) {
		struct call c = send_msg(k, core, topic, qid, tags, body, blen);

		if (status_of(&c) != WIRE_DP_ST_SYSTEM_BUSY)
			return c;
		free(c.resp);
		usleep(10000);
	}
	T_FAIL("topic %s never left SYSTEM_BUSY", topic);
}

static int64_t
offset_op(struct conn *k, unsigned core, uint16_t op, const char *topic, const char *group,
	  int32_t qid, int64_t value, int32_t *status)
{
	uint8_t buf[1024];
	struct wire_dp_offset_req r = {.queue_id = qid,
				       .topic = topic,
				       .topic_len = (uint16_t)strlen(topic),
				       .value = value};
	struct wire_dp_offset_resp o;
	struct call c;
	long n;

	if (group) {
		r.group = group;
		r.group_len = (uint16_t)strlen(group);
	}
	n = wire_dp_offset_req_encode(op, &r, buf, sizeof(buf));
	T_ASSERT(n > 0);
	c = call(k, core, op, buf, (uint32_t)n);
	*status = status_of(&c);
	if (*status == WIRE_DP_ST_SUCCESS) {
		T_ASSERT_EQ(wire_dp_offset_resp_decode(op, c.resp, c.len, &o), 0);
		free(c.resp);
		return o.offset;
	}
	free(c.resp);
	return -1;
}

static int64_t
max_offset(struct conn *k, unsigned core, const char *topic, int32_t qid)
{
	int32_t st;
	int64_t v = offset_op(k, core, WIRE_DP_OP_GET_MAX_OFFSET, topic, NULL, qid, 0, &st);

	T_ASSERT_EQ(st, WIRE_DP_ST_SUCCESS);
	return v;
}

static uint32_t
pull_encode(uint8_t *buf, size_t cap, const char *topic, int32_t qid, int64_t off, uint32_t sysflag,
	    uint32_t suspend_ms, const int32_t *tags, uint16_t ntags)
{
	struct wire_dp_pull_req r = {.queue_offset = off,
				     .commit_offset = -1,
				     .queue_id = qid,
				     .max_msgs = 32,
				     .max_bytes = 1 << 20,
				     .sysflag = sysflag,
				     .suspend_timeout_ms = suspend_ms,
				     .expr_type = WIRE_DP_EXPR_TAG,
				     .tag_hashes = (const uint8_t *)tags,
				     .tag_count = ntags,
				     .group = "G",
				     .group_len = 1,
				     .topic = topic,
				     .topic_len = (uint16_t)strlen(topic)};
	long n = wire_dp_pull_req_encode(&r, buf, cap);

	T_ASSERT(n > 0);
	return (uint32_t)n;
}

/* Decodes a PULL answer's records; checks each body is "m<i>" for consecutive i from *@next. */
static uint32_t
pull_check(const struct call *c, struct wire_dp_pull_resp *p, int *next, const char *topic)
{
	size_t pos = 0;
	uint32_t n = 0;

	T_ASSERT_EQ(wire_dp_pull_resp_decode(c->resp, c->len, p), 0);
	while (pos < p->records_len) {
		struct wire_msg m;
		char want[32];
		long len = wire_rec_decode(p->records + pos, p->records_len - pos,
					   WIRE_REC_VERIFY_CRC, &m);

		T_ASSERT(len > 0);
		T_ASSERT_EQ(m.topic_len, strlen(topic));
		T_ASSERT(memcmp(m.topic, topic, m.topic_len) == 0);
		if (next) {
			snprintf(want, sizeof(want), "m%d", (*next)++);
			T_ASSERT_EQ(m.body_len, strlen(want));
			T_ASSERT(memcmp(m.body, want, m.body_len) == 0);
		}
		pos += (size_t)len;
		n++;
	}
	T_ASSERT_EQ(n, p->rec_count);
	return n;
}

/* A broker with topic T (4 queues) in topics.json and auto-creation off. */
static void
start_with_topic(struct bk_proc *b, const char *const *extra)
{
	const char *args[16] = {"--autoCreateTopicEnable=false", "--maxMessageSize=4096"};
	struct meta_topic t = {.name = "T", .read_queues = 4, .write_queues = 4, .perm = 6};
	char path[256];
	unsigned n = 2;

	memset(b, 0, sizeof(*b));
	snprintf(b->dir, sizeof(b->dir), "/tmp/sp-bk-XXXXXX");
	T_ASSERT(mkdtemp(b->dir) != NULL);
	snprintf(path, sizeof(path), "mkdir -p %s/store/config", b->dir);
	T_ASSERT_EQ(system(path), 0);
	snprintf(path, sizeof(path), "%s/store/config/topics.json", b->dir);
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, &t, 1, NULL), 0);
	for (unsigned i = 0; extra && extra[i] && n < 15; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, b), 0);
}

static void
test_bad_input_writes_nothing(void)
{
	static uint8_t big[8192];
	struct bk_proc b;
	struct conn k;
	struct call c;
	uint8_t buf[2048];
	int32_t st;

	start_with_topic(&b, NULL);
	conn_open(&k, b.dp_port);
	/* unknown topic, auto-creation off */
	c = send_msg(&k, 0, "Nope", 0, NULL, "x", 1);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_TOPIC_NOT_EXIST);
	free(c.resp);
	/* invalid names */
	c = send_msg(&k, 0, "bad topic", 0, NULL, "x", 1);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_MESSAGE_ILLEGAL);
	free(c.resp);
	c = send_msg(&k, 0, "a/../b", 0, NULL, "x", 1);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_MESSAGE_ILLEGAL);
	free(c.resp);
	/* oversized body (maxMessageSize=4096), empty body */
	c = send_msg(&k, 0, "T", 0, NULL, big, sizeof(big));
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_MESSAGE_ILLEGAL);
	free(c.resp);
	c = send_msg(&k, 0, "T", 0, NULL, "", 0);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_MESSAGE_ILLEGAL);
	free(c.resp);
	/* queue out of range, negative */
	c = send_msg(&k, 0, "T", 4, NULL, "x", 1);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_BAD_REQUEST);
	free(c.resp);
	c = send_msg(&k, 0, "T", -1, NULL, "x", 1);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_BAD_REQUEST);
	free(c.resp);
	/* malformed bodies for every op */
	memset(buf, 0xee, sizeof(buf));
	for (uint16_t op = WIRE_DP_OP_SEND; op <= WIRE_DP_OP_SEND_BACK; op++) {
		c = call(&k, 0, op, buf, 37);
		T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_BAD_REQUEST);
		free(c.resp);
	}
	/* a SEND_BATCH whose second item is broken stores nothing */
	{
		uint8_t body[256];
		size_t blen = 0;
		struct wire_batch_item it = {.body = (const uint8_t *)"ok", .body_len = 2};
		struct wire_dp_send_req r = {.queue_id = 0, .topic = "T", .topic_len = 1};
		long n;

		T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &blen, &it), 0);
		T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &blen, &it), 0);
		/* item 1 is 22 + 2 bytes: break item 2's TOTALSIZE */
		memset(body + 24, 0xff, 4);
		r.body = body;
		r.body_len = (uint32_t)blen;
		n = wire_dp_send_req_encode(WIRE_DP_OP_SEND_BATCH, &r, buf, sizeof(buf));
		T_ASSERT(n > 0);
		c = call(&k, 0, WIRE_DP_OP_SEND_BATCH, buf, (uint32_t)n);
		T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_MESSAGE_ILLEGAL);
		free(c.resp);
	}
	/*
	 * Message types not taken are refused, nothing stored: a delay level,
	 * a delivery time or a transactional half in a batch, a SEND with
	 * sysFlag COMMIT (only END_TRANSACTION commits); a delivery time too far
	 * away or not a number (MESSAGE_ILLEGAL), a delay level with a
	 * delivery time. DELAY=0 is a plain message (sent last, below).
	 */
	{
		static const char *const refused[][2] = {
			{"DELAY", "2"},		  {"__STARTDELIVERTIME", "1700000000000"},
			{"TIMER_DELAY_MS", "5"},  {"TIMER_DELIVER_MS", "1"},
			{"TIMER_DELAY_SEC", "1"}, {"TRAN_MSG", "true"},
		};
		uint8_t body[256];
		char props[64];

		for (size_t i = 0; i < ARRAY_SIZE(refused) * 2 + 1; i++) {
			bool batch = i >= ARRAY_SIZE(refused);
			size_t plen = 0, blen = 0;
			struct wire_dp_send_req r = {.queue_id = 0, .topic = "T", .topic_len = 1};
			struct wire_batch_item it = {.body = (const uint8_t *)"x", .body_len = 1};
			long n;

			if (!batch && i < ARRAY_SIZE(refused))
				continue; /* taken alone (test_delay_levels, test_rmt's timers, transactions) */
			if (i < ARRAY_SIZE(refused) * 2) {
				const char *const *kv = refused[i % ARRAY_SIZE(refused)];

				T_ASSERT_EQ(wire_props_append(props, sizeof(props), &plen, kv[0],
							      strlen(kv[0]), kv[1], strlen(kv[1])),
					    0);
			} else {
				r.sysflag =
					WIRE_SYSFLAG_TX_COMMIT; /* END_TRANSACTION's, not a SEND's */
				batch = false;
			}
			if (batch) {
				T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &blen, &it), 0);
				it.props = props;
				it.props_len = (uint16_t)plen;
				T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &blen, &it), 0);
				r.body = body;
				r.body_len = (uint32_t)blen;
			} else {
				r.props = props;
				r.props_len = (uint16_t)plen;
				r.body = (const uint8_t *)"x";
				r.body_len = 1;
			}
			n = wire_dp_send_req_encode(batch ? WIRE_DP_OP_SEND_BATCH : WIRE_DP_OP_SEND,
						    &r, buf, sizeof(buf));
			T_ASSERT(n > 0);
			c = call(&k, 0, batch ? WIRE_DP_OP_SEND_BATCH : WIRE_DP_OP_SEND, buf,
				 (uint32_t)n);
			T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_NOT_SUPPORTED);
			free(c.resp);
		}
	}
	{
		static const char *const bad[] = {
			"TIMER_DELAY_SEC\0013456001",	       /* past timerMaxDelaySec */
			"TIMER_DELIVER_MS\0011x",	       /* not a number */
			"TIMER_DELAY_MS\001100\002DELAY\0011", /* both */
		};

		for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
			struct wire_dp_send_req r = {.queue_id = 0, .topic = "T", .topic_len = 1};
			long n;

			r.props = bad[i];
			r.props_len = (uint16_t)strlen(bad[i]);
			r.body = (const uint8_t *)"x";
			r.body_len = 1;
			n = wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf, sizeof(buf));
			T_ASSERT(n > 0);
			c = call(&k, 0, WIRE_DP_OP_SEND, buf, (uint32_t)n);
			T_ASSERT_EQ(status_of(&c),
				    i == 2 ? WIRE_DP_ST_NOT_SUPPORTED : WIRE_DP_ST_MESSAGE_ILLEGAL);
			free(c.resp);
		}
	}
	/* the topics only the broker writes (a forged record would be delivered by it) */
	{
		static const char *const own[] = {"rmq_sys_wheel_timer", "SCHEDULE_TOPIC_XXXX"};

		for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
			struct wire_dp_send_req r = {.queue_id = 0, .topic = own[i]};
			long n;

			r.topic_len = (uint8_t)strlen(own[i]);
			r.props = "REAL_TOPIC\001T\002REAL_QID\0010";
			r.props_len = (uint16_t)strlen(r.props);
			r.body = (const uint8_t *)"x";
			r.body_len = 1;
			n = wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf, sizeof(buf));
			T_ASSERT(n > 0);
			c = call(&k, 0, WIRE_DP_OP_SEND, buf, (uint32_t)n);
			T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_NO_PERMISSION);
			free(c.resp);
		}
	}
	/* pulls: unknown topic, bad queue, negative and past-the-end offsets */
	c = call(&k, 0, WIRE_DP_OP_PULL, buf,
		 pull_encode(buf, sizeof(buf), "Nope", 0, 0, 0, 0, NULL, 0));
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_TOPIC_NOT_EXIST);
	free(c.resp);
	c = call(&k, 0, WIRE_DP_OP_PULL, buf,
		 pull_encode(buf, sizeof(buf), "T", 9, 0, 0, 0, NULL, 0));
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_BAD_REQUEST);
	free(c.resp);
	{
		struct wire_dp_pull_resp p;

		c = call(&k, 0, WIRE_DP_OP_PULL, buf,
			 pull_encode(buf, sizeof(buf), "T", 0, 7, 0, 0, NULL, 0));
		T_ASSERT_EQ(wire_dp_pull_resp_decode(c.resp, c.len, &p), 0);
		T_ASSERT_EQ(p.head.status, WIRE_DP_ST_PULL_OFFSET_MOVED);
		T_ASSERT_EQ(p.next_begin_offset, 0);
		free(c.resp);
		c = call(&k, 0, WIRE_DP_OP_PULL, buf,
			 pull_encode(buf, sizeof(buf), "T", 0, -3, 0, 0, NULL, 0));
		T_ASSERT_EQ(wire_dp_pull_resp_decode(c.resp, c.len, &p), 0);
		T_ASSERT_EQ(p.head.status, WIRE_DP_ST_PULL_OFFSET_MOVED);
		free(c.resp);
	}
	/* negative committed offset */
	(void)offset_op(&k, 0, WIRE_DP_OP_UPDATE_OFFSET, "T", "G", 0, -5, &st);
	T_ASSERT_EQ(st, WIRE_DP_ST_BAD_REQUEST);
	(void)offset_op(&k, 0, WIRE_DP_OP_QUERY_OFFSET, "T", "G", 0, 0, &st);
	T_ASSERT_EQ(st, WIRE_DP_ST_QUERY_NOT_FOUND);
	/* nothing was written anywhere */
	for (int q = 0; q < 4; q++)
		T_ASSERT_EQ(max_offset(&k, (unsigned)q % 2, "T", q), 0);
	/* and the broker still serves, a message with DELAY=0 too (a plain one) */
	c = send_props(&k, 0, "T", 0, "DELAY\0010\002", 8, "fine", 4);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
	free(c.resp);
	T_ASSERT_EQ(max_offset(&k, 0, "T", 0), 1);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

static void
test_redirect(void)
{
	struct bk_proc b;
	struct conn k;
	struct call c;
	struct wire_dp_resp_head h;

	start_with_topic(&b, NULL);
	conn_open(&k, b.dp_port);
	/* queue 1 belongs to core 1: core 0 redirects and stores nothing */
	c = send_msg(&k, 0, "T", 1, NULL, "x", 1);
	T_ASSERT_EQ(wire_dp_resp_head_decode(c.resp, c.len, &h), 0);
	T_ASSERT_EQ(h.status, WIRE_DP_ST_REDIRECT);
	T_ASSERT_EQ(h.redirect_core, 1);
	T_ASSERT_EQ(h.redirect_port, b.dp_port + 1);
	free(c.resp);
	T_ASSERT_EQ(max_offset(&k, 1, "T", 1), 0);
	c = send_msg(&k, 1, "T", 1, NULL, "x", 1);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
	free(c.resp);
	T_ASSERT_EQ(max_offset(&k, 1, "T", 1), 1);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

static void
test_send_pull_offsets_restart(void)
{
	const char *extra[] = {"--flushConsumerOffsetInterval=200", NULL};
	struct bk_proc b;
	struct conn k;
	struct call c;
	struct wire_dp_pull_resp p;
	uint8_t buf[2048];
	int32_t st;
	int next = 0;
	int64_t t_mid = 0;

	start_with_topic(&b, extra);
	conn_open(&k, b.dp_port);
	for (int i = 0; i < 100; i++) {
		char body[32];
		struct wire_dp_send_resp r;

		snprintf(body, sizeof(body), "m%d", i);
		if (i == 50) {
			usleep(20000);
			t_mid = clk_wall_ms();
			usleep(20000);
		}
		c = send_msg(&k, 0, "T", 2, i % 2 ? "odd" : "even", body, (uint32_t)strlen(body));
		T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, c.resp, c.len, &r), 0);
		T_ASSERT_EQ(r.head.status, WIRE_DP_ST_SUCCESS);
		T_ASSERT_EQ(r.queue_offset, i);
		T_ASSERT_EQ(r.queue_id, 2);
		T_ASSERT(r.head.ts_recv_ns != 0 && r.head.ts_handled_ns >= r.head.ts_recv_ns);
		free(c.resp);
	}
	/* pull everything back in order, 32 at a time */
	for (int64_t off = 0; off < 100;) {
		c = call(&k, 0, WIRE_DP_OP_PULL, buf,
			 pull_encode(buf, sizeof(buf), "T", 2, off, 0, 0, NULL, 0));
		pull_check(&c, &p, &next, "T");
		T_ASSERT_EQ(p.head.status, WIRE_DP_ST_SUCCESS);
		T_ASSERT_EQ(p.max_offset, 100);
		off = p.next_begin_offset;
		free(c.resp);
	}
	T_ASSERT_EQ(next, 100);
	/* tag filter by hash: only "odd" */
	{
		int32_t odd = wire_tag_hash("odd", 3);

		c = call(&k, 0, WIRE_DP_OP_PULL, buf,
			 pull_encode(buf, sizeof(buf), "T", 2, 0, 0, 0, &odd, 1));
		T_ASSERT_EQ(pull_check(&c, &p, NULL, "T"), 32);
		T_ASSERT_EQ(p.next_begin_offset, 64);
		free(c.resp);
	}
	/* offsets */
	T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_GET_MIN_OFFSET, "T", NULL, 2, 0, &st), 0);
	T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_SEARCH_OFFSET, "T", NULL, 2, t_mid, &st), 50);
	T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_UPDATE_OFFSET, "T", "G", 2, 77, &st), 77);
	T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_QUERY_OFFSET, "T", "G", 2, 0, &st), 77);
	/* the PULL commit-offset flag commits too */
	{
		struct wire_dp_pull_req r = {.queue_offset = 90,
					     .commit_offset = 88,
					     .queue_id = 2,
					     .max_msgs = 1,
					     .max_bytes = 4096,
					     .sysflag = WIRE_DP_PULL_COMMIT_OFFSET,
					     .group = "H",
					     .group_len = 1,
					     .topic = "T",
					     .topic_len = 1};
		long n = wire_dp_pull_req_encode(&r, buf, sizeof(buf));

		c = call(&k, 0, WIRE_DP_OP_PULL, buf, (uint32_t)n);
		free(c.resp);
		T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_QUERY_OFFSET, "T", "H", 2, 0, &st), 88);
	}
	conn_close(&k);
	/* clean restart: data and committed offsets are back */
	T_ASSERT_EQ(bk_stop(&b), 0);
	T_ASSERT(!bk_log_has(&b, "crash"));
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, extra, &b), 0);
	conn_open(&k, b.dp_port);
	T_ASSERT_EQ(max_offset(&k, 0, "T", 2), 100);
	T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_QUERY_OFFSET, "T", "G", 2, 0, &st), 77);
	T_ASSERT_EQ(offset_op(&k, 0, WIRE_DP_OP_QUERY_OFFSET, "T", "H", 2, 0, &st), 88);
	next = 0;
	c = call(&k, 0, WIRE_DP_OP_PULL, buf,
		 pull_encode(buf, sizeof(buf), "T", 2, 0, 0, 0, NULL, 0));
	T_ASSERT_EQ(pull_check(&c, &p, &next, "T"), 32);
	free(c.resp);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

static void
test_long_polling(void)
{
	struct bk_proc b;
	struct conn k;
	struct call pull = {0}, nf = {0};
	struct wire_dp_pull_resp p;
	uint8_t buf[2048], buf2[2048];
	uint64_t t0, t1;
	int next = 0;

	start_with_topic(&b, NULL);
	conn_open(&k, b.dp_port);
	/* parked with nothing to read, then a SEND wakes it */
	T_ASSERT_EQ(dp_xcli_submit(k.s[0], WIRE_DP_OP_PULL, buf,
				   pull_encode(buf, sizeof(buf), "T", 0, 0, WIRE_DP_PULL_SUSPEND,
					       20000, NULL, 0),
				   on_done, &pull),
		    0);
	t0 = clk_mono_ns();
	while (clk_mono_ns() - t0 < 100000000ull)
		(void)dp_xcli_poll(k.cli);
	T_ASSERT(!pull.done);
	{
		struct call c = send_msg(&k, 0, "T", 0, NULL, "m0", 2);

		T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
		free(c.resp);
	}
	call_wait(&k, &pull, WAIT_MS);
	t1 = clk_mono_ns();
	T_ASSERT_EQ(pull_check(&pull, &p, &next, "T"), 1);
	T_ASSERT_EQ(p.head.status, WIRE_DP_ST_SUCCESS);
	/* answered by the SEND, not by the 20 s suspend timeout */
	T_ASSERT(t1 - t0 < 15000000000ull);
	free(pull.resp);
	/* nothing arrives: PULL_NOT_FOUND after the suspend time */
	T_ASSERT_EQ(dp_xcli_submit(k.s[0], WIRE_DP_OP_PULL, buf2,
				   pull_encode(buf2, sizeof(buf2), "T", 0, 1, WIRE_DP_PULL_SUSPEND,
					       300, NULL, 0),
				   on_done, &nf),
		    0);
	call_wait(&k, &nf, WAIT_MS);
	T_ASSERT_EQ(wire_dp_pull_resp_decode(nf.resp, nf.len, &p), 0);
	T_ASSERT_EQ(p.head.status, WIRE_DP_ST_PULL_NOT_FOUND);
	T_ASSERT_EQ(p.next_begin_offset, 1);
	free(nf.resp);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

/* SEND_BACK of the record at @phys; retries while the retry topic is being created. */
static int32_t
send_back(struct conn *k, int64_t phys, int32_t max_re)
{
	uint8_t buf[512];
	struct wire_dp_send_back_req r = {.phys_offset = phys,
					  .delay_level = 0,
					  .max_reconsume_times = max_re,
					  .group = "G",
					  .group_len = 1,
					  .origin_topic = "T",
					  .origin_topic_len = 1};
	long n = wire_dp_send_back_req_encode(&r, buf, sizeof(buf));

	T_ASSERT(n > 0);
	for (int i = 0; i < 500; i++) {
		/* retry and DLQ topics have one queue, on core 0 */
		struct call c = call(k, 0, WIRE_DP_OP_SEND_BACK, buf, (uint32_t)n);
		int32_t st = status_of(&c);

		free(c.resp);
		if (st != WIRE_DP_ST_SYSTEM_BUSY)
			return st;
		usleep(10000);
	}
	return WIRE_DP_ST_SYSTEM_BUSY;
}

static int64_t
first_phys(struct conn *k, const char *topic, const char **prop, const char *want,
	   int32_t *reconsume)
{
	uint8_t buf[2048];
	struct wire_dp_pull_resp p;
	struct wire_msg m;
	struct call c = call(k, 0, WIRE_DP_OP_PULL, buf,
			     pull_encode(buf, sizeof(buf), topic, 0, 0, 0, 0, NULL, 0));
	const char *v;
	size_t vl;
	int64_t phys;

	T_ASSERT_EQ(wire_dp_pull_resp_decode(c.resp, c.len, &p), 0);
	T_ASSERT_EQ(p.head.status, WIRE_DP_ST_SUCCESS);
	T_ASSERT(wire_rec_decode(p.records, p.records_len, WIRE_REC_VERIFY_CRC, &m) > 0);
	T_ASSERT_EQ(m.body_len, 2);
	T_ASSERT(memcmp(m.body, "m0", 2) == 0);
	if (prop) {
		T_ASSERT(wire_props_get(m.props, m.props_len, *prop, &v, &vl));
		T_ASSERT_EQ(vl, strlen(want));
		T_ASSERT(memcmp(v, want, vl) == 0);
	}
	*reconsume = m.reconsume_times;
	phys = m.phys_offset;
	free(c.resp);
	return phys;
}

static void
test_send_back_retry_then_dlq(void)
{
	const char *rt = "RETRY_TOPIC";
	struct bk_proc b;
	struct conn k;
	struct call c;
	struct wire_dp_send_resp r;
	int32_t re;
	int64_t phys;

	static const char *const no_delays[] = {"--messageDelayLevel=", NULL};

	start_with_topic(&b, no_delays); /* retries at once: test_delay_levels has them delayed */
	conn_open(&k, b.dp_port);
	c = send_msg(&k, 0, "T", 0, "tg", "m0", 2);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, c.resp, c.len, &r), 0);
	free(c.resp);
	/* first failure: %RETRY%G (created on demand even with auto-creation off) */
	T_ASSERT_EQ(send_back(&k, r.phys_offset, 2), WIRE_DP_ST_SUCCESS);
	phys = first_phys(&k, "%RETRY%G", &rt, "T", &re);
	T_ASSERT_EQ(re, 1);
	/* second: still retry; third passes maxReconsumeTimes=2: %DLQ%G */
	T_ASSERT_EQ(send_back(&k, phys, 2), WIRE_DP_ST_SUCCESS);
	{
		uint8_t buf[2048];
		struct wire_dp_pull_resp p;
		struct call pc =
			call(&k, 0, WIRE_DP_OP_PULL, buf,
			     pull_encode(buf, sizeof(buf), "%RETRY%G", 0, 1, 0, 0, NULL, 0));
		struct wire_msg m;

		T_ASSERT_EQ(wire_dp_pull_resp_decode(pc.resp, pc.len, &p), 0);
		T_ASSERT_EQ(p.head.status, WIRE_DP_ST_SUCCESS);
		T_ASSERT(wire_rec_decode(p.records, p.records_len, 0, &m) > 0);
		T_ASSERT_EQ(m.reconsume_times, 2);
		T_ASSERT_EQ(send_back(&k, m.phys_offset, 2), WIRE_DP_ST_SUCCESS);
		free(pc.resp);
	}
	(void)first_phys(&k, "%DLQ%G", &rt, "T", &re);
	T_ASSERT_EQ(re, 3);
	{
		/* the origin id is the first delivery's, through both retries */
		const char *oid = "ORIGIN_MESSAGE_ID";
		char want[WIRE_MSGID_MAX];
		struct wire_host host = {.addr = {127, 0, 0, 1}, .port = b.rmt_port};

		wire_msgid_encode(&host, r.phys_offset, want);
		(void)first_phys(&k, "%RETRY%G", &oid, want, &re);
		(void)first_phys(&k, "%DLQ%G", &oid, want, &re);
	}
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

/*
 * A delayed SEND over the dataplane, on core 1 (queue 1): SEND_OK at once,
 * in the queue only after its level's delay (messageDelayLevel "1s").
 */
static void
test_delay_levels(void)
{
	static const char *const args[] = {"--messageDelayLevel=1s", NULL};
	uint8_t buf[2048];
	struct bk_proc b;
	struct conn k;
	struct call c;
	struct wire_dp_pull_resp p;
	struct wire_msg m;
	int64_t sent_ms;
	int got = 0;

	start_with_topic(&b, args);
	conn_open(&k, b.dp_port);
	sent_ms = clk_wall_ms();
	c = send_props(&k, 1, "T", 1, "DELAY\0011\002", 8, "dp later", 8);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
	free(c.resp);
	T_ASSERT_EQ(max_offset(&k, 1, "T", 1), 0);
	for (int i = 0; i < 300 && !got; i++) {
		c = call(&k, 1, WIRE_DP_OP_PULL, buf,
			 pull_encode(buf, sizeof(buf), "T", 1, 0, 0, 0, NULL, 0));
		T_ASSERT_EQ(wire_dp_pull_resp_decode(c.resp, c.len, &p), 0);
		if (p.head.status == WIRE_DP_ST_SUCCESS) {
			T_ASSERT(wire_rec_decode(p.records, p.records_len, WIRE_REC_VERIFY_CRC,
						 &m) > 0);
			T_ASSERT(m.body_len == 8 && memcmp(m.body, "dp later", 8) == 0);
			T_ASSERT(m.store_ts >= sent_ms + 1000);
			got = 1;
		}
		free(c.resp);
		if (!got)
			usleep(20000);
	}
	T_ASSERT(got);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

static void
test_write_protect_and_auto_create(void)
{
	const char *extra[] = {"--autoCreateTopicEnable=true", NULL};
	struct bk_proc b;
	struct conn k;
	struct call c;
	uint8_t buf[2048];

	start_with_topic(&b, extra);
	conn_open(&k, b.dp_port);
	c = send_retry(&k, 0, "Fresh", 0, NULL, "m0", 2);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
	free(c.resp);
	/* the control thread logs after it published the topic: the SEND may be first */
	for (int i = 0; i < 300 && !bk_log_has(&b, "topic Fresh created (4 queues)"); i++)
		usleep(10000);
	T_ASSERT(bk_log_has(&b, "topic Fresh created (4 queues)"));
	/* write-protected: SEND refused, nothing stored, PULL still served */
	kill(b.pid, SIGUSR1);
	for (int i = 0; i < 300 && !bk_log_has(&b, "write-protected"); i++)
		usleep(10000);
	c = send_msg(&k, 0, "Fresh", 0, NULL, "m1", 2);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_NO_PERMISSION);
	free(c.resp);
	T_ASSERT_EQ(max_offset(&k, 0, "Fresh", 0), 1);
	c = call(&k, 0, WIRE_DP_OP_PULL, buf,
		 pull_encode(buf, sizeof(buf), "Fresh", 0, 0, 0, 0, NULL, 0));
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
	free(c.resp);
	kill(b.pid, SIGUSR2);
	for (int i = 0; i < 300 && !bk_log_has(&b, "(writable)"); i++)
		usleep(10000);
	c = send_msg(&k, 0, "Fresh", 0, NULL, "m1", 2);
	T_ASSERT_EQ(status_of(&c), WIRE_DP_ST_SUCCESS);
	free(c.resp);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

static void
test_sync_flush(void)
{
	const char *extra[] = {"--flushDiskType=SYNC_FLUSH", NULL};
	struct bk_proc b;
	struct conn k;

	start_with_topic(&b, extra);
	conn_open(&k, b.dp_port);
	for (int i = 0; i < 50; i++) {
		struct wire_dp_send_resp r;
		struct call c = send_msg(&k, i % 2 ? 1 : 0, "T", i % 2, NULL, "m0", 2);

		T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, c.resp, c.len, &r), 0);
		T_ASSERT_EQ(r.head.status, WIRE_DP_ST_SUCCESS);
		/* durable after it was handled: the flush came between */
		T_ASSERT(r.head.ts_durable_ns >= r.head.ts_handled_ns);
		free(c.resp);
	}
	T_ASSERT_EQ(max_offset(&k, 0, "T", 0), 25);
	conn_close(&k);
	T_ASSERT_EQ(bk_stop(&b), 0);
	bk_cleanup(&b);
}

static void
test_bad_config(void)
{
	const char *args[] = {"--dataplaneCores=0", NULL};
	struct bk_proc b = {0};

	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &b), -EIO);
	T_ASSERT(bk_log_has(&b, "dataplaneCores"));
	bk_cleanup(&b);
	/* A slave needs its brokerId (RocketMQ: "Slave's brokerId must be > 0"). */
	{
		const char *slave0[] = {"--brokerRole=SLAVE", NULL};
		const char *slave1[] = {"--brokerRole=SLAVE", "--brokerId=1", NULL};
		struct bk_proc r = {0};

		T_ASSERT_EQ(bk_start(SP_BROKER_BIN, slave0, &r), -EIO);
		T_ASSERT(bk_log_has(&r, "brokerRole SLAVE needs brokerId > 0"));
		bk_cleanup(&r);
		/* with one, it starts, waits for a master and stops cleanly */
		memset(&r, 0, sizeof(r));
		T_ASSERT_EQ(bk_start(SP_BROKER_BIN, slave1, &r), 0);
		T_ASSERT_EQ(bk_stop(&r), 0);
		bk_cleanup(&r);
	}
}

T_MAIN(T_CASE(test_bad_input_writes_nothing), T_CASE(test_redirect),
       T_CASE(test_send_pull_offsets_restart), T_CASE(test_long_polling),
       T_CASE(test_send_back_retry_then_dlq), T_CASE(test_delay_levels),
       T_CASE(test_write_protect_and_auto_create), T_CASE(test_sync_flush), T_CASE(test_bad_config))
