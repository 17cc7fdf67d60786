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
#include "common/hmac.h"
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
	/* The client acknowledged every multi-packet response: the pool got them back. */
	T_ASSERT(dp_xsrv_stats(sv.x)->resp_released >= 4); /* 5 multi-packet answers */
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

	if (err != 0 || len != ps->len + 40 || memcmp(msg + 40, ps->msg, ps->len) != 0) {
		fprintf(stderr, "request %llu (%u bytes) failed: err %d, answer %u bytes\n",
			(unsigned long long)ps->id, ps->len, err, err ? 0 : len);
		d->p->failures++;
	}
	ps->busy = false;
	d->p->completed++;
}

static void
test_faults_exactly_once(void)
{
	struct port_fault_cfg fc = {.drop_pct = 10, .dup_pct = 10, .reorder_pct = 10, .seed = 7};
	struct port_fault_cfg fc2 = fc;
	/*
	 * 8 slots can hold 8 reassembly buffers and 8 stored answers; answers
	 * whose final CREDIT was dropped wait in limbo until the next flush. 16
	 * buffers left no margin: a loaded box once ran out and the handler
	 * answered SYSTEM_BUSY (a failure here, correct behaviour there).
	 */
	struct dp_xsrv_cfg cfg = {.max_sessions = 4, .big_bufs = 32};
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

/* ---- garbage, forged packets, limits ---- */

static int
raw_sock_at(uint32_t ip)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(ip)};
	struct timeval tv = {.tv_sec = 2};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	return fd;
}

static int
raw_sock(void)
{
	return raw_sock_at(INADDR_LOOPBACK);
}

static void
raw_send(int fd, struct dp_addr to, const void *buf, size_t len)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET, .sin_addr.s_addr = to.ip, .sin_port = htons(to.port)};

	T_ASSERT_EQ(sendto(fd, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa)), (ssize_t)len);
}

static long
raw_pkt(uint8_t *out, const struct wire_dp_hdr *h, const void *pl)
{
	long n = wire_dp_hdr_encode(h, out, WIRE_DP_HDR_LEN);

	T_ASSERT_EQ(n, WIRE_DP_HDR_LEN);
	if (h->payload_len)
		memcpy(out + WIRE_DP_HDR_LEN, pl, h->payload_len);
	return WIRE_DP_HDR_LEN + h->payload_len;
}

/* CONNECT by hand; Return: the decoded answer. */
static struct wire_dp_connect_resp
raw_connect(int fd, struct dp_addr to, uint64_t nonce)
{
	struct wire_dp_connect_req rq = {.nonce = nonce,
					 .max_msg = 1u << 20,
					 .mtu = 1500,
					 .slots = 2,
					 .client_id = "raw",
					 .client_id_len = 3};
	struct wire_dp_connect_resp rs;
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ, .op = WIRE_DP_OP_CONNECT, .pkt_cnt = 1};
	uint8_t body[64];
	uint8_t pkt[2048];
	long n = wire_dp_connect_req_encode(&rq, body, sizeof(body));
	ssize_t got;

	T_ASSERT(n > 0);
	h.msg_len = h.payload_len = (uint32_t)n;
	raw_send(fd, to, pkt, (size_t)raw_pkt(pkt, &h, body));
	got = recv(fd, pkt, sizeof(pkt), 0);
	T_ASSERT(got > WIRE_DP_HDR_LEN);
	T_ASSERT_EQ(wire_dp_hdr_decode(pkt, (size_t)got, &h), 0);
	T_ASSERT_EQ(wire_dp_connect_resp_decode(pkt + WIRE_DP_HDR_LEN, h.payload_len, &rs), 0);
	T_ASSERT_EQ_U64(rs.nonce, nonce);
	return rs;
}

static void
test_garbage(void)
{
	struct dp_xsrv_cfg cfg = {.max_sessions = 4};
	struct dp_xcli_cfg ccfg = {0};
	struct dp_port *cp = udp_port(0);
	struct dp_xcli *cli;
	struct dp_xsess *s;
	struct srv sv;
	struct call c;
	uint8_t pkt[4096];
	uint8_t ping[8] = {1};
	uint64_t rng = 12345;
	int fd = raw_sock();

	srv_start(&sv, &cfg, NULL);
	struct wire_dp_connect_resp rs = raw_connect(fd, sv.port->local, 77);
	/* Retransmitted CONNECT: the same session, not a second one. */
	struct wire_dp_connect_resp rs2 = raw_connect(fd, sv.port->local, 77);

	T_ASSERT_EQ(rs.head.status, 0);
	T_ASSERT_EQ(rs2.session_id, rs.session_id);
	T_ASSERT_EQ_U64(rs2.token, rs.token);

	/* Random datagrams and truncations of a valid one. */
	for (int i = 0; i < 2000; i++) {
		size_t len = (size_t)((rng >> 33) % sizeof(pkt));

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;

		for (size_t k = 0; k < len; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			pkt[k] = (uint8_t)(rng >> 56);
		}
		if (i % 2)
			memcpy(pkt, "SPRK", len < 4 ? len : 4); /* get past the magic */
		raw_send(fd, sv.port->local, pkt, len);
	}
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
				.token = rs.token,
				.session_id = rs.session_id,
				.slot = 0,
				.op = WIRE_DP_OP_PING,
				.seq = 1,
				.pkt_cnt = 1,
				.msg_len = 8,
				.payload_len = 8};
	long n = raw_pkt(pkt, &h, ping);

	for (long k = 0; k < n; k++)
		raw_send(fd, sv.port->local, pkt, (size_t)k);
	/* Wrong token, unknown session, oversized counts, geometry lies. */
	h.token ^= 1;
	raw_send(fd, sv.port->local, pkt, (size_t)raw_pkt(pkt, &h, ping));
	h.token ^= 1;
	h.session_id ^= 0x10000;
	raw_send(fd, sv.port->local, pkt, (size_t)raw_pkt(pkt, &h, ping));
	h.session_id ^= 0x10000;
	n = raw_pkt(pkt, &h, ping);
	uint32_t huge = 0xffffffffu;

	memcpy(pkt + 32, &huge, 4); /* pkt_cnt */
	memcpy(pkt + 40, &huge, 4); /* msg_len */
	raw_send(fd, sv.port->local, pkt, (size_t)n);
	/* A request over the session's max_msg (1 MiB): MESSAGE_ILLEGAL, not reassembled. */
	h = (struct wire_dp_hdr){.type = WIRE_DP_T_REQ,
				 .token = rs.token,
				 .session_id = rs.session_id,
				 .op = WIRE_DP_OP_SEND,
				 .seq = 1,
				 .slot = 1,
				 .pkt_cnt = wire_dp_pkt_count(2u << 20, rs.max_payload),
				 .msg_len = 2u << 20,
				 .payload_len = rs.max_payload};
	raw_send(fd, sv.port->local, pkt, (size_t)raw_pkt(pkt, &h, pkt + 2048));
	ssize_t got = recv(fd, pkt, sizeof(pkt), 0);
	struct wire_dp_resp_head rh;

	T_ASSERT(got >= WIRE_DP_HDR_LEN + 40);
	T_ASSERT_EQ(wire_dp_hdr_decode(pkt, (size_t)got, &h), 0);
	T_ASSERT_EQ(h.type, WIRE_DP_T_RESP);
	T_ASSERT_EQ(wire_dp_resp_head_decode(pkt + WIRE_DP_HDR_LEN, h.payload_len, &rh), 0);
	T_ASSERT_EQ(rh.status, WIRE_DP_ST_MESSAGE_ILLEGAL);
	/* A slot beyond the grant: the session is reset. */
	h = (struct wire_dp_hdr){.type = WIRE_DP_T_REQ,
				 .token = rs.token,
				 .session_id = rs.session_id,
				 .op = WIRE_DP_OP_PING,
				 .seq = 1,
				 .slot = 5,
				 .pkt_cnt = 1,
				 .msg_len = 8,
				 .payload_len = 8};
	raw_send(fd, sv.port->local, pkt, (size_t)raw_pkt(pkt, &h, ping));
	got = recv(fd, pkt, sizeof(pkt), 0);
	T_ASSERT_EQ(got, WIRE_DP_HDR_LEN + WIRE_DP_RESET_LEN);
	T_ASSERT_EQ(wire_dp_hdr_decode(pkt, (size_t)got, &h), 0);
	T_ASSERT_EQ(h.type, WIRE_DP_T_RESET);

	/* The server still serves a well-behaved client. */
	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s), 0);
	T_ASSERT_EQ(call(cli, s, WIRE_DP_OP_PING, ping, 8, &c), 0);
	free(c.resp);
	srv_stop(&sv);
	const struct dp_xsrv_stats *st = dp_xsrv_stats(sv.x);

	printf("garbage: malformed %llu bad_magic %llu bad_version %llu no_session %llu "
	       "bad_token %llu geometry %llu too_big %llu\n",
	       (unsigned long long)st->rx_malformed, (unsigned long long)st->rx_bad_magic,
	       (unsigned long long)st->rx_bad_version, (unsigned long long)st->rx_no_session,
	       (unsigned long long)st->rx_bad_token, (unsigned long long)st->rx_bad_geometry,
	       (unsigned long long)st->rx_too_big);
	T_ASSERT(st->rx_malformed > 50 && st->rx_bad_magic > 500);
	T_ASSERT_EQ_U64(st->rx_bad_token, 1);
	T_ASSERT(st->rx_no_session >= 1);
	T_ASSERT_EQ_U64(st->rx_too_big, 1);
	T_ASSERT_EQ_U64(st->tx_reset, 1);
	T_ASSERT_EQ_U64(st->sessions_opened, 2);
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
	srv_free(&sv);
	close(fd);
}

/* A full table refuses clearly; idle sessions expire with a RESET. */
static void
test_limits_and_expiry(void)
{
	struct dp_xsrv_cfg cfg = {.max_sessions = 2, .idle_timeout_ms = 100};
	struct dp_xcli_cfg ccfg = {.rto_us = 1000};
	struct dp_port *cp = udp_port(0);
	struct dp_xcli *cli;
	struct dp_xsess *s[3];
	struct srv sv;
	struct call c;
	uint8_t ping[8] = {0};

	srv_start(&sv, &cfg, NULL);
	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s[0]), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s[1]), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s[2]), -EBUSY);
	T_ASSERT_EQ(call(cli, s[0], WIRE_DP_OP_PING, ping, 8, &c), 0);
	free(c.resp);
	usleep(400 * 1000);
	/* Both expired: a request now meets RESET (or silence, if the RESET was sent already). */
	int err = call(cli, s[0], WIRE_DP_OP_PING, ping, 8, &c);

	T_ASSERT(err == -ECONNRESET || err == -ETIMEDOUT);
	T_ASSERT(dp_xsess_is_dead(s[0]));
	/* Room again. */
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s[2]), 0);
	T_ASSERT_EQ(call(cli, s[2], WIRE_DP_OP_PING, ping, 8, &c), 0);
	free(c.resp);
	srv_stop(&sv);
	T_ASSERT(dp_xsrv_stats(sv.x)->sessions_expired >= 2);
	/* >= 1: a CONNECT retransmitted before the refusal arrived is refused again */
	T_ASSERT(dp_xsrv_stats(sv.x)->sessions_refused >= 1);
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
	srv_free(&sv);
}

/* The first packet of a @len-byte SEND_BACK in @slot of session @rs, and no more. */
static void
raw_first_packet(int fd, struct dp_addr to, const struct wire_dp_connect_resp *rs, uint16_t slot,
		 uint32_t len)
{
	static uint8_t zero[65536], pkt[WIRE_DP_HDR_LEN + 65536];
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
				.op = WIRE_DP_OP_SEND_BACK,
				.session_id = rs->session_id,
				.token = rs->token,
				.slot = slot,
				.seq = 1,
				.pkt_cnt = (len + rs->max_payload - 1) / rs->max_payload,
				.msg_len = len,
				.payload_len = rs->max_payload};

	raw_send(fd, to, pkt, (size_t)raw_pkt(pkt, &h, zero));
}

/* An answer's status on @fd within 2 s (SO_RCVTIMEO), or -1. */
static int32_t
raw_status(int fd)
{
	uint8_t pkt[2048];
	struct wire_dp_hdr h;
	struct wire_dp_resp_head rh;
	ssize_t got = recv(fd, pkt, sizeof(pkt), 0);

	if (got <= WIRE_DP_HDR_LEN || wire_dp_hdr_decode(pkt, (size_t)got, &h) != 0 ||
	    wire_dp_resp_head_decode(pkt + WIRE_DP_HDR_LEN, h.payload_len, &rh) != 0)
		return -1;
	return rh.status;
}

/*
 * Per-address shares (docs/isolation.md): 127.0.0.2 gets 2 of 8 sessions and 2
 * of 4 pool buffers, its half-sent requests time out; 127.0.0.1 keeps working.
 */
static void
test_shares(void)
{
	struct dp_xsrv_cfg cfg = {.max_sessions = 8,
				  .big_bufs = 4,
				  .max_sessions_per_addr = 2,
				  .big_bufs_per_addr = 2,
				  .reasm_timeout_ms = 200};
	struct dp_xcli_cfg ccfg = {.rto_us = 1000};
	struct dp_port *cp = udp_port(0);
	int fd = raw_sock_at(0x7f000002);
	struct wire_dp_connect_resp a, b, again;
	struct dp_xcli *cli;
	struct dp_xsess *s;
	struct srv sv;
	struct call c;
	uint8_t *msg = calloc(1, 200000);

	T_ASSERT(msg != NULL);
	srv_start(&sv, &cfg, NULL);
	a = raw_connect(fd, sv.port->local, 1);
	b = raw_connect(fd, sv.port->local, 2);
	T_ASSERT_EQ(a.head.status, WIRE_DP_ST_SUCCESS);
	T_ASSERT_EQ(b.head.status, WIRE_DP_ST_SUCCESS);
	T_ASSERT_EQ(raw_connect(fd, sv.port->local, 3).head.status, WIRE_DP_ST_SYSTEM_BUSY);
	again = raw_connect(fd, sv.port->local, 1); /* a retransmit: the same session */
	T_ASSERT_EQ(again.session_id, a.session_id);
	/* 127.0.0.2 starts three 200 KB requests: two hold buffers, the third is refused */
	raw_first_packet(fd, sv.port->local, &a, 0, 200000);
	raw_first_packet(fd, sv.port->local, &a, 1, 200000);
	raw_first_packet(fd, sv.port->local, &b, 0, 200000);
	T_ASSERT_EQ(raw_status(fd), WIRE_DP_ST_SYSTEM_BUSY);
	/* 127.0.0.1: its own sessions and buffers (request and answer) */
	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 2000, &s), 0);
	T_ASSERT_EQ(call(cli, s, WIRE_DP_OP_SEND_BACK, msg, 200000, &c), 0);
	T_ASSERT_EQ(c.len, (uint32_t)(WIRE_DP_RESP_HEAD_LEN + 200000));
	free(c.resp);
	/* the two half-sent requests time out: SYSTEM_BUSY, their buffers back */
	T_ASSERT_EQ(raw_status(fd), WIRE_DP_ST_SYSTEM_BUSY);
	T_ASSERT_EQ(raw_status(fd), WIRE_DP_ST_SYSTEM_BUSY);
	dp_xcli_close(s, 1000);
	srv_stop(&sv);
	T_ASSERT_EQ_U64(dp_xsrv_stats(sv.x)->sessions_refused_addr, 1);
	T_ASSERT_EQ_U64(dp_xsrv_stats(sv.x)->busy_addr, 1);
	T_ASSERT_EQ_U64(dp_xsrv_stats(sv.x)->reasm_timeouts, 2);
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
	close(fd);
	free(msg);
	srv_free(&sv);
}

/*
 * Two server cores hand out session ids on their own, so one client holds two
 * sessions with the same id: each answer must reach the session of the
 * server that sent it (the broker's cores did exactly this).
 */
static void
test_same_session_id_two_servers(void)
{
	struct dp_xsrv_cfg cfg = {.max_sessions = 16};
	struct dp_xcli_cfg ccfg = {0};
	struct dp_port *cp = udp_port(0);
	struct dp_xcli *cli;
	struct dp_xsess *s[2];
	struct srv sv[2];
	struct call c;

	srv_start(&sv[0], &cfg, NULL);
	srv_start(&sv[1], &cfg, NULL);
	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv[0].port->local, 2000, &s[0]), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv[1].port->local, 2000, &s[1]), 0);
	for (int round = 0; round < 50; round++) {
		for (int k = 0; k < 2; k++) {
			struct wire_dp_ping_req q = {.client_ts_ns = (uint64_t)(round * 2 + k)};
			struct wire_dp_ping_resp p;
			uint8_t req[8];

			T_ASSERT_EQ(wire_dp_ping_req_encode(&q, req, sizeof(req)), 8);
			T_ASSERT_EQ(call(cli, s[k], WIRE_DP_OP_PING, req, 8, &c), 0);
			T_ASSERT_EQ(wire_dp_ping_resp_decode(c.resp, c.len, &p), 0);
			T_ASSERT_EQ_U64(p.echo_ts_ns, (uint64_t)(round * 2 + k));
			free(c.resp);
		}
	}
	/*
	 * Each echo matched its own request above; retransmissions are not
	 * checked, since a starved box retransmits on its own (before the fix
	 * every answer of one session was dropped and its calls timed out).
	 */
	for (int k = 0; k < 2; k++) {
		dp_xcli_close(s[k], 1000);
		srv_stop(&sv[k]);
		srv_free(&sv[k]);
	}
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
}

/* aclEnable's session setup: one account "dp-user-1" with secret "dp-secret-1". */
static struct hmac_sha1 acc_key;

static const struct hmac_sha1 *
key_of(void *arg, const char *ak, size_t len)
{
	(void)arg;
	return len == 9 && memcmp(ak, "dp-user-1", 9) == 0 ? &acc_key : NULL;
}

static const char *last_ak;

static void
ak_handler(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	last_ak = r->ak;
	handler(s, r, arg);
}

/*
 * A server with a key function opens sessions only for a CONNECT that proves
 * the account's secret over its challenge: no key, an unknown key and a wrong
 * secret are refused (-EACCES), the right one works and its requests carry the
 * key; a packet with a live session's id and token from another address is
 * dropped (rx_bad_peer).
 */
static void
test_auth(void)
{
	struct dp_xsrv_cfg cfg = {.max_sessions = 8, .key_fn = key_of};
	struct dp_xcli_cfg none = {.rto_us = 1000};
	struct dp_xcli_cfg unknown = {
		.rto_us = 1000, .access_key = "dp-user-2", .secret_key = "dp-secret-1"};
	struct dp_xcli_cfg wrong = {
		.rto_us = 1000, .access_key = "dp-user-1", .secret_key = "dp-secret-2"};
	struct dp_xcli_cfg right = {
		.rto_us = 1000, .access_key = "dp-user-1", .secret_key = "dp-secret-1"};
	const struct dp_xcli_cfg *bad[] = {&none, &unknown, &wrong};
	struct dp_port *cp = udp_port(0), *other = udp_port(0);
	struct dp_xcli *cli;
	struct dp_xsess *se;
	struct srv sv;
	struct call c;
	uint8_t ping[8] = {0};

	hmac_sha1_key(&acc_key, "dp-secret-1", 11);
	memset(&sv, 0, sizeof(sv));
	sv.port = udp_port(0);
	T_ASSERT_EQ(dp_xsrv_create(&cfg, sv.port, ak_handler, &sv, &sv.x), 0);
	T_ASSERT_EQ(pthread_create(&sv.th, NULL, srv_main, &sv), 0);
	for (size_t i = 0; i < 3; i++) {
		T_ASSERT_EQ(dp_xcli_create(bad[i], cp, &cli), 0);
		T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 3000, &se), -EACCES);
		dp_xcli_destroy(cli);
	}
	T_ASSERT_EQ(dp_xcli_create(&right, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sv.port->local, 3000, &se), 0);
	T_ASSERT_EQ(call(cli, se, WIRE_DP_OP_PING, ping, 8, &c), 0);
	free(c.resp);
	T_ASSERT(last_ak != NULL && memcmp(last_ak, "dp-user-1", 9) == 0);
	{
		/* the session's own PING, byte for byte, from another address */
		struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
					.op = WIRE_DP_OP_PING,
					.session_id = dp_xsess_id(se),
					.token = dp_xsess_token(se),
					.pkt_cnt = 1,
					.msg_len = 8,
					.payload_len = 8,
					.seq = 99};
		uint8_t pkt[WIRE_DP_HDR_LEN + 8] = {0};
		struct dp_tx tx = {.hdr = pkt, .hdr_len = sizeof(pkt), .dst = sv.port->local};
		uint64_t before = dp_xsrv_stats(sv.x)->rx_bad_peer;

		T_ASSERT_EQ(wire_dp_hdr_encode(&h, pkt, WIRE_DP_HDR_LEN), WIRE_DP_HDR_LEN);
		T_ASSERT_EQ(dp_port_tx_burst(other, &tx, 1), 1u);
		for (int i = 0; i < 200 && dp_xsrv_stats(sv.x)->rx_bad_peer == before; i++)
			usleep(5000);
		T_ASSERT(dp_xsrv_stats(sv.x)->rx_bad_peer > before);
	}
	dp_xcli_close(se, 1000);
	srv_stop(&sv);
	T_ASSERT(dp_xsrv_stats(sv.x)->sessions_unauth >= 3);
	T_ASSERT(dp_xsrv_stats(sv.x)->challenges >= 3);
	dp_xcli_destroy(cli);
	cp->ops->close(cp);
	other->ops->close(other);
	srv_free(&sv);
}

T_MAIN(T_CASE(test_auth), T_CASE(test_echo_sizes), T_CASE(test_same_session_id_two_servers),
       T_CASE(test_faults_exactly_once), T_CASE(test_garbage), T_CASE(test_limits_and_expiry),
       T_CASE(test_shares))
