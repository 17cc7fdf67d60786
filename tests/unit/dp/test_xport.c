// SPDX-License-Identifier: Apache-2.0
/*
 * test_xport.c - the session transport over real kernel UDP sockets on
 * loopback: echo of every size up to the message limit, exactly-once
 * execution under 10% loss + 10% duplication + 10% reordering, garbage and
 * forged packets, session limits and idle expiry.
 *
 * The server runs on its own thread with its own port, as a dataplane core
 * does; the client polls on the test's thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "dp/port.h"
#include "dp/port_fault.h"
#include "dp/xport.h"
#include "harness.h"
#include "wire/dp.h"

struct srv {
	struct dp_port *port;
	struct dp_xsrv *x;
	atomic_bool stop;
	pthread_t th;
	uint32_t *exec; /* executions per request id */
	uint32_t nexec;
};

static void
handler(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	struct srv *sv = arg;
	struct wire_dp_resp_head head = {.status = WIRE_DP_ST_SUCCESS, .ts_recv_ns = r->ts_recv_ns};
	uint8_t *buf;

	if (r->op == WIRE_DP_OP_PING) {
		struct wire_dp_ping_req q;
		struct wire_dp_ping_resp p = {.head = head};
		uint32_t len;

		if (wire_dp_ping_req_decode(r->msg, r->len, &q) != 0)
			return;
		p.echo_ts_ns = q.client_ts_ns;
		p.pad = q.pad;
		p.pad_len = q.pad_len;
		len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PING_RESP_FIXED + q.pad_len;
		buf = dp_xsrv_resp_buf(s, r->h, len);
		T_ASSERT(buf != NULL);
		T_ASSERT_EQ(wire_dp_ping_resp_encode(&p, buf, len), (long)len);
		T_ASSERT_EQ(dp_xsrv_respond(s, r->h, len), 0);
		return;
	}
	/* Anything else: count the execution by the id in its first 8 bytes, echo it back. */
	if (r->len >= 8) {
		uint64_t id;

		memcpy(&id, r->msg, 8);
		if (id < sv->nexec)
			sv->exec[id]++;
	}
	buf = dp_xsrv_resp_buf(s, r->h, WIRE_DP_RESP_HEAD_LEN + r->len);
	if (!buf) {
		buf = dp_xsrv_resp_buf(s, r->h, WIRE_DP_RESP_HEAD_LEN + 8);
		T_ASSERT(buf != NULL);
		head.status = WIRE_DP_ST_SYSTEM_BUSY;
		T_ASSERT(wire_dp_resp_error_encode(WIRE_DP_OP_SEND_BACK, &head, buf, 48) > 0);
		T_ASSERT_EQ(dp_xsrv_respond(s, r->h, WIRE_DP_RESP_HEAD_LEN + 8), 0);
		return;
	}
	T_ASSERT_EQ(wire_dp_bare_resp_encode(WIRE_DP_OP_SEND_BACK, &head, buf, 40), 40);
	memcpy(buf + 40, r->msg, r->len);
	T_ASSERT_EQ(dp_xsrv_respond(s, r->h, WIRE_DP_RESP_HEAD_LEN + r->len), 0);
}

static void *
srv_main(void *a)
{
	struct srv *sv = a;

	while (!atomic_load(&sv->stop)) {
		if (dp_xsrv_poll(sv->x, clk_mono_ns()) == 0)
			dp_port_wait(sv->port, 200);
	}
	return NULL;
}

static struct dp_port *
udp_port(uint16_t port)
{
	struct dp_port_cfg pc = {
		.backend = DP_BACKEND_UDP,
		.ip = htonl(INADDR_LOOPBACK),
		.base_port = port,
		.n = 1,
	};
	struct dp_port *p = NULL;

	T_ASSERT_EQ(dp_ports_open(&pc, &p), 0);
	return p;
}

static void
srv_start(struct srv *sv, const struct dp_xsrv_cfg *cfg, const struct port_fault_cfg *fault)
{
	memset(sv, 0, sizeof(*sv));
	sv->port = udp_port(0);
	if (fault) {
		struct dp_port *w;

		T_ASSERT_EQ(port_fault_wrap(sv->port, fault, &w), 0);
		sv->port = w;
	}
	T_ASSERT_EQ(dp_xsrv_create(cfg, sv->port, handler, sv, &sv->x), 0);
	T_ASSERT_EQ(pthread_create(&sv->th, NULL, srv_main, sv), 0);
}

static void
srv_stop(struct srv *sv)
{
	atomic_store(&sv->stop, true);
	T_ASSERT_EQ(pthread_join(sv->th, NULL), 0);
}

static void
srv_free(struct srv *sv)
{
	dp_xsrv_destroy(sv->x);
	sv->port->ops->close(sv->port);
}

struct call {
	bool done;
	int err;
	uint8_t *resp;
	uint32_t len;
};

static void
call_done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct call *c = arg;

	c->done = true;
	c->err = err;
	c->len = len;
	if (err == 0) {
		c->resp = malloc(len ? len : 1);
		T_ASSERT(c->resp != NULL);
		memcpy(c->resp, msg, len);
	}
}

static int
call(struct dp_xcli *cli, struct dp_xsess *s, uint16_t op, const uint8_t *msg, uint32_t len,
     struct call *c)
{
	int err;

	memset(c, 0, sizeof(*c));
	err = dp_xcli_submit(s, op, msg, len, call_done, c);
	if (err)
		return err;
	while (!c->done)
		(void)dp_xcli_poll(cli);
	return c->err;
}

static void
fill(uint8_t *b, uint32_t len, uint64_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

/* Echo every size class, single and multi-packet, up to the negotiated limit. */
static void
test_echo_sizes(void)
{
	struct dp_xsrv_cfg cfg = {.max_sessions = 16};
	struct dp_xcli_cfg ccfg = {0};
	struct dp_port *cp = udp_port(0);
	struct dp_xcli *cli;
	struct dp_xsess *s;
	struct srv sv;
	struct call c;
	uint8_t *msg;
	static const uint32_t sizes[] = {8,	9,     64,    1000,   1472,
					 65000, 65459, 65460, 200000, 1u << 20};

	srv_start(&sv, &cfg, NULL);
	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s), 0);
	T_ASSERT_EQ(dp_xsess_slots(s), 8);
	T_ASSERT_EQ_U64(dp_xsess_max_msg(s), WIRE_DP_MSG_MAX_DEFAULT);
	msg = malloc(WIRE_DP_MSG_MAX_DEFAULT);
	T_ASSERT(msg != NULL);

	for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
		struct wire_dp_ping_req q = {
			.client_ts_ns = 1000 + k, .pad = msg, .pad_len = sizes[k]};
		struct wire_dp_ping_resp p;
		uint8_t *req = malloc(8 + sizes[k]);
		long n;

		fill(msg, sizes[k], k);
		n = wire_dp_ping_req_encode(&q, req, 8 + sizes[k]);
		T_ASSERT_EQ(n, (long)(8 + sizes[k]));
		T_ASSERT_EQ(call(cli, s, WIRE_DP_OP_PING, req, (uint32_t)n, &c), 0);
		T_ASSERT_EQ(wire_dp_ping_resp_decode(c.resp, c.len, &p), 0);
		T_ASSERT_EQ_U64(p.echo_ts_ns, 1000 + k);
		T_ASSERT_EQ(p.pad_len, sizes[k]);
		T_ASSERT_MEMEQ(p.pad, msg, sizes[k]);
		T_ASSERT(p.head.ts_recv_ns != 0 && p.head.ts_sent_ns >= p.head.ts_recv_ns);
		free(c.resp);
		free(req);
	}
	/* The largest message the session allows, echoed back (response = 40 + request). */
	uint32_t big = WIRE_DP_MSG_MAX_DEFAULT - WIRE_DP_RESP_HEAD_LEN;

	fill(msg, big, 99);
	memset(msg, 0xff, 8); /* an id outside the execution table */
	T_ASSERT_EQ(call(cli, s, WIRE_DP_OP_SEND, msg, big, &c), 0);
	T_ASSERT_EQ(c.len, big + WIRE_DP_RESP_HEAD_LEN);
	T_ASSERT_MEMEQ(c.resp + 40, msg, big);
	free(c.resp);
	/* Over the session's limit: refused locally, never sent. */
	T_ASSERT_EQ(
		dp_xcli_submit(s, WIRE_DP_OP_SEND, msg, WIRE_DP_MSG_MAX_DEFAULT + 1, call_done, &c),
		-EMSGSIZE);

	dp_xcli_close(s, 1000);
	srv_stop(&sv);
	srv_free(&sv);
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
	free(msg);
}

/* ---- exactly once under loss, duplication and reordering ---- */

#define FAULT_N 100000u

struct pipe_slot {
	uint8_t *msg;
	uint32_t len;
	uint64_t id;
	bool busy;
};

struct pipe {
	struct pipe_slot slot[8];
	uint64_t completed;
	uint64_t failures;
};

static uint32_t
size_for(uint64_t id)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull;
	unsigned r = (unsigned)(h >> 40) % 1000;

	if (r < 2)
		return 1u << 20; /* 0.2%: 1 MiB */
	if (r < 30)
		return 4096 + (uint32_t)(h % 200000); /* 2.8%: up to ~200 KiB */
	return 64 + (uint32_t)(h % 1400);	      /* the rest: 64 B .. 1.4 KiB */
}

struct pdone {
	struct pipe *p;
	unsigned i;
};

static void
pipe_done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct pdone *d = arg;
	struct pipe_slot *ps = &d->p->slot[d->i];

	if (err != 0 || len != ps->len + 40 || memcmp(msg + 40, ps->msg, ps->len) != 0)
		d->p->failures++;
	ps->busy = false;
	d->p->completed++;
}

static void
test_faults_exactly_once(void)
{
	struct port_fault_cfg fc = {.drop_pct = 10, .dup_pct = 10, .reorder_pct = 10, .seed = 7};
	struct port_fault_cfg fc2 = fc;
	struct dp_xsrv_cfg cfg = {.max_sessions = 4, .big_bufs = 16};
	struct dp_xcli_cfg ccfg = {.rto_us = 2000, .max_retries = 30};
	struct dp_port *cp;
	struct dp_xcli *cli;
	struct dp_xsess *s;
	struct pdone pd[8];
	struct pipe pp = {0};
	struct srv sv;
	uint64_t next_id = 0;

	srv_start(&sv, &cfg, &fc);
	sv.exec = calloc(FAULT_N, sizeof(*sv.exec));
	T_ASSERT(sv.exec != NULL);
	sv.nexec = FAULT_N;
	fc2.seed = 11;
	T_ASSERT_EQ(port_fault_wrap(udp_port(0), &fc2, &cp), 0);
	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 5000, &s), 0);
	for (unsigned i = 0; i < 8; i++) {
		pp.slot[i].msg = malloc(1u << 20);
		T_ASSERT(pp.slot[i].msg != NULL);
		pd[i] = (struct pdone){&pp, i};
	}
	while (pp.completed < FAULT_N) {
		for (unsigned i = 0; i < 8 && next_id < FAULT_N; i++) {
			struct pipe_slot *ps = &pp.slot[i];

			if (ps->busy)
				continue;
			ps->id = next_id;
			ps->len = size_for(ps->id);
			fill(ps->msg, ps->len, ps->id);
			memcpy(ps->msg, &ps->id, 8);
			if (dp_xcli_submit(s, WIRE_DP_OP_SEND, ps->msg, ps->len, pipe_done,
					   &pd[i]) != 0)
				break;
			ps->busy = true;
			next_id++;
		}
		if (dp_xsess_is_dead(s))
			T_FAIL("session died after %llu completions (retrans %llu timeouts %llu)",
			       (unsigned long long)pp.completed,
			       (unsigned long long)dp_xcli_stats(cli)->tx_retrans,
			       (unsigned long long)dp_xcli_stats(cli)->timeouts);
		(void)dp_xcli_poll(cli);
	}
	T_ASSERT_EQ_U64(pp.failures, 0);
	srv_stop(&sv);
	/* Every request ran exactly once, although many were sent more than once. */
	for (uint32_t i = 0; i < FAULT_N; i++) {
		if (sv.exec[i] != 1)
			T_FAIL("request %u executed %u times", i, sv.exec[i]);
	}
	T_ASSERT(dp_xcli_stats(cli)->tx_retrans > 1000);
	T_ASSERT(port_fault_stats(cp)->dropped > 1000 &&
		 port_fault_stats(sv.port)->duplicated > 1000);
	T_ASSERT(dp_xsrv_stats(sv.x)->rx_dup > 1000);
	printf("faults: %u requests, client retrans %llu, server dup %llu stale %llu\n", FAULT_N,
	       (unsigned long long)dp_xcli_stats(cli)->tx_retrans,
	       (unsigned long long)dp_xsrv_stats(sv.x)->rx_dup,
	       (unsigned long long)dp_xsrv_stats(sv.x)->rx_stale);
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
	srv_free(&sv);
	free(sv.exec);
	for (unsigned i = 0; i < 8; i++)
		free(pp.slot[i].msg);
}

T_MAIN(T_CASE(test_echo_sizes), T_CASE(test_faults_exactly_once))
