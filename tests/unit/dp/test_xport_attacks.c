// SPDX-License-Identifier: Apache-2.0
/*
 * test_xport_attacks.c - adversarial packet sequences against the session
 * transport, from an independent review: exact bursts through a scripted
 * port (a mock, used only to inject these sequences).
 *
 * T1 a re-sent CONNECT answer queued before its session is freed and its
 *    entry reused must not carry the new owner's token;
 * T2 a pool buffer released in a burst must not be reused before the flush
 *    (another session's bytes to this peer);
 * T3 the client never reads a caller's message after its completion;
 * T5 a deferred handle never matches a later session that reuses the id;
 * T7 one spoofed CREDIT cannot make the server send beyond the window, nor
 *    to a new address.
 * Closing a session from a completion callback is API misuse and asserts
 * (xport.h); pool buffers held by answered responses are a documented
 * limit (docs/dataplane.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "dp/port.h"
#include "dp/xport.h"
#include "wire/dp.h"
#include "common/clock.h"

#define MAXQ 4096
struct pkt {
	uint8_t b[2048];
	uint32_t len;
	struct dp_addr a;
};
struct mport {
	struct dp_port p;
	struct pkt tx[MAXQ];
	unsigned ntx;
	struct pkt rx[MAXQ];
	unsigned nrx, rxpos;
	int auto_connect; /* client side: answer CONNECT */
};
static unsigned
m_rx(struct dp_port *p, struct dp_rx *rx, unsigned n)
{
	struct mport *m = (struct mport *)p;
	unsigned k = 0;
	while (k < n && m->rxpos < m->nrx) {
		struct pkt *q = &m->rx[m->rxpos++];
		rx[k++] = (struct dp_rx){.data = q->b, .len = q->len, .src = q->a};
	}
	if (m->rxpos == m->nrx)
		m->rxpos = m->nrx = 0;
	return k;
}
static void
m_rxdone(struct dp_port *p)
{
	(void)p;
}
static void
push_rx(struct mport *m, const uint8_t *b, uint32_t len, struct dp_addr a)
{
	struct pkt *q = &m->rx[m->nrx++];
	memcpy(q->b, b, len);
	q->len = len;
	q->a = a;
}
static uint32_t
mkpkt(uint8_t *out, struct wire_dp_hdr h, const uint8_t *pl)
{
	if (wire_dp_hdr_encode(&h, out, WIRE_DP_HDR_LEN) != WIRE_DP_HDR_LEN) {
		printf("encode fail\n");
		exit(2);
	}
	if (h.payload_len)
		memcpy(out + WIRE_DP_HDR_LEN, pl, h.payload_len);
	return WIRE_DP_HDR_LEN + h.payload_len;
}
static unsigned
m_tx(struct dp_port *p, const struct dp_tx *tx, unsigned n)
{
	struct mport *m = (struct mport *)p;
	for (unsigned i = 0; i < n; i++) {
		struct pkt *q = &m->tx[m->ntx++ % MAXQ];
		memcpy(q->b, tx[i].hdr, tx[i].hdr_len);
		if (tx[i].len)
			memcpy(q->b + tx[i].hdr_len, tx[i].data,
			       tx[i].len); /* reads payload: ASan sees UAF */
		q->len = tx[i].hdr_len + tx[i].len;
		q->a = tx[i].dst;
		if (m->auto_connect) {
			struct wire_dp_hdr h;
			struct wire_dp_connect_req rq;
			if (wire_dp_hdr_decode(q->b, q->len, &h) == 0 &&
			    h.op == WIRE_DP_OP_CONNECT &&
			    wire_dp_connect_req_decode(q->b + 48, h.payload_len, &rq) == 0) {
				struct wire_dp_connect_resp rs = {.nonce = rq.nonce,
								  .token = 77,
								  .session_id = 0x10001,
								  .max_msg = 1 << 20,
								  .idle_timeout_ms = 30000,
								  .slots = 8,
								  .credits = 64,
								  .max_payload = 1000,
								  .core = 0};
				uint8_t pl[80], b[200];
				long nn = wire_dp_connect_resp_encode(&rs, pl, sizeof pl);
				struct wire_dp_hdr r = {.type = WIRE_DP_T_RESP,
							.token = 77,
							.session_id = 0x10001,
							.op = WIRE_DP_OP_CONNECT,
							.pkt_cnt = 1,
							.msg_len = nn,
							.payload_len = nn};
				push_rx(m, b, mkpkt(b, r, pl), tx[i].dst);
			}
		}
	}
	return n;
}
static void
m_wait(struct dp_port *p, unsigned us, int wake_fd)
{
	(void)p;
	(void)us;
	(void)wake_fd;
}
static bool
m_up(struct dp_port *p)
{
	(void)p;
	return true;
}
static void
m_close(struct dp_port *p)
{
	(void)p;
}
static const struct dp_port_ops mops = {"mock", m_rx, m_rxdone, m_tx, m_wait, m_up, m_close};

static struct mport *
mport_new(void)
{
	struct mport *m = calloc(1, sizeof *m);
	m->p.ops = &mops;
	m->p.max_dgram = 1472;
	return m;
}

/* echo handler */
static void
handler(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	(void)arg;
	struct wire_dp_resp_head head = {.status = 0, .ts_recv_ns = r->ts_recv_ns};
	uint8_t *buf = dp_xsrv_resp_buf(s, r->h, 40 + r->len);
	if (!buf)
		return;
	if (wire_dp_bare_resp_encode(r->op, &head, buf, 40) != 40) {
		printf("bare enc\n");
	}
	memcpy(buf + 40, r->msg, r->len);
	if (dp_xsrv_respond(s, r->h, 40 + r->len))
		printf("respond fail\n");
}

static uint32_t
connect_pkt(uint8_t *b, uint64_t nonce)
{
	struct wire_dp_connect_req rq = {.nonce = nonce,
					 .max_msg = 1 << 20,
					 .mtu = 1500,
					 .slots = 8,
					 .client_id = "x",
					 .client_id_len = 1};
	uint8_t pl[64];
	long n = wire_dp_connect_req_encode(&rq, pl, sizeof pl);
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
				.op = WIRE_DP_OP_CONNECT,
				.pkt_cnt = 1,
				.msg_len = n,
				.payload_len = n};
	return mkpkt(b, h, pl);
}
static int
last_connect_resp(struct mport *m, struct dp_addr to, struct wire_dp_connect_resp *r,
		  struct wire_dp_hdr *hh)
{
	for (unsigned i = m->ntx; i-- > 0;) {
		struct wire_dp_hdr h;
		if (m->tx[i].a.port != to.port)
			continue;
		if (wire_dp_hdr_decode(m->tx[i].b, m->tx[i].len, &h) || h.op != WIRE_DP_OP_CONNECT)
			continue;
		if (hh)
			*hh = h;
		return wire_dp_connect_resp_decode(m->tx[i].b + 48, h.payload_len, r);
	}
	return -1;
}

/* CONNECT from @peer in a burst of its own; the answer is decoded into @r (and @hh). */
static void
mock_connect(struct mport *m, struct dp_xsrv *s, uint64_t nonce, struct dp_addr peer, uint64_t now,
	     struct wire_dp_connect_resp *r, struct wire_dp_hdr *hh)
{
	static uint8_t b[256];
	struct dp_rx rx = {b, connect_pkt(b, nonce), peer};

	dp_xsrv_input(s, &rx, 1, now);
	last_connect_resp(m, peer, r, hh);
}

/* A PING on slot @slot, beyond what the session was granted: the server resets the session. */
static uint32_t
bad_slot_pkt(uint8_t *b, const struct wire_dp_connect_resp *r, uint16_t slot)
{
	static const uint8_t z[8];
	struct wire_dp_hdr bad = {.type = WIRE_DP_T_REQ,
				  .token = r->token,
				  .session_id = r->session_id,
				  .slot = slot,
				  .op = WIRE_DP_OP_PING,
				  .seq = 1,
				  .pkt_cnt = 1,
				  .msg_len = 8,
				  .payload_len = 8};

	return mkpkt(b, bad, z);
}

/* T1: CONNECT answer queued by pointer to se->conn_resp; entry freed and reused in the same burst. */
static int
t1(void)
{
	struct mport *m = mport_new();
	struct dp_xsrv *s;
	struct dp_xsrv_cfg cfg = {.max_sessions = 4, .big_bufs = 4, .max_msg = 1 << 20};
	struct dp_addr A = {.ip = 1, .port = 1111}, V = {.ip = 2, .port = 2222};
	uint8_t b[3][256];
	struct dp_rx rx[3];
	struct wire_dp_connect_resp ra, rv;
	struct wire_dp_hdr hv;
	if (dp_xsrv_create(&cfg, &m->p, handler, NULL, &s))
		return 2;
	/* attacker connects first (own burst) */
	mock_connect(m, s, 0xAAAA, A, 1000, &ra, NULL);
	/* burst: retransmitted CONNECT (A), protocol violation (A), victim CONNECT (V) */
	rx[0] = (struct dp_rx){b[0], connect_pkt(b[0], 0xAAAA), A};
	rx[1] = (struct dp_rx){b[1], bad_slot_pkt(b[1], &ra, 200), A};
	rx[2] = (struct dp_rx){b[2], connect_pkt(b[2], 0xBBBB), V};
	dp_xsrv_input(s, rx, 3, 2000);
	last_connect_resp(m, V, &rv, &hv);
	/* the CONNECT answer the attacker got in the last burst: */
	struct wire_dp_connect_resp ra2;
	struct wire_dp_hdr ha2;
	/* find the A-addressed CONNECT answer of burst 2 (second one to A) */
	int seen = 0, leak = 0;
	for (unsigned i = 0; i < m->ntx; i++) {
		if (m->tx[i].a.port != A.port)
			continue;
		if (wire_dp_hdr_decode(m->tx[i].b, m->tx[i].len, &ha2) ||
		    ha2.op != WIRE_DP_OP_CONNECT || ha2.type != WIRE_DP_T_RESP)
			continue;
		if (++seen == 2 &&
		    wire_dp_connect_resp_decode(m->tx[i].b + 48, ha2.payload_len, &ra2) == 0) {
			printf("T1: attacker's re-sent CONNECT answer: token=%llx sid=%x "
			       "nonce=%llx; victim token=%llx sid=%x\n",
			       (unsigned long long)ra2.token, ra2.session_id,
			       (unsigned long long)ra2.nonce, (unsigned long long)rv.token,
			       rv.session_id);
			leak = ra2.token == rv.token;
		}
	}
	printf("T1 %s\n", leak ? "FAIL: victim token leaked to attacker" : "ok");
	dp_xsrv_destroy(s);
	free(m);
	return leak;
}

/* T2: response packets queued from a big buffer; buffer freed + reused by another session before the flush. */
static int
t2(void)
{
	struct mport *m = mport_new();
	struct dp_xsrv *s;
	struct dp_xsrv_cfg cfg = {.max_sessions = 4, .big_bufs = 4, .max_msg = 1 << 20};
	struct dp_addr A = {.ip = 1, .port = 1111}, B = {.ip = 2, .port = 2222};
	static uint8_t b[8][2048];
	struct dp_rx rx[8];
	struct wire_dp_connect_resp ra, rb;
	if (dp_xsrv_create(&cfg, &m->p, handler, NULL, &s))
		return 2;
	mock_connect(m, s, 0xAAAA, A, 1000, &ra, NULL);
	mock_connect(m, s, 0xBBBB, B, 1000, &rb, NULL);
	uint32_t P = ra.max_payload;
	/* A: single-packet SEND_BACK of 1000 bytes 'a' -> 1040-byte response in a big buffer */
	uint8_t amsg[1000];
	memset(amsg, 'a', sizeof amsg);
	struct wire_dp_hdr ha = {.type = WIRE_DP_T_REQ,
				 .token = ra.token,
				 .session_id = ra.session_id,
				 .slot = 0,
				 .op = WIRE_DP_OP_SEND_BACK,
				 .seq = 1,
				 .pkt_cnt = 1,
				 .msg_len = 1000,
				 .payload_len = 1000};
	rx[0] = (struct dp_rx){b[0], mkpkt(b[0], ha, amsg), A};
	dp_xsrv_input(s, rx, 1, 2000);
	unsigned mark = m->ntx;
	/* burst: duplicate of A's request (re-send from big buf), A protocol violation, B packet 0 of 3000 'B' */
	rx[0] = (struct dp_rx){b[0], mkpkt(b[0], ha, amsg), A};
	struct wire_dp_hdr bad = ha;
	bad.slot = 200;
	rx[1] = (struct dp_rx){b[1], mkpkt(b[1], bad, amsg), A};
	static uint8_t bmsg[3000];
	memset(bmsg, 'B', sizeof bmsg);
	struct wire_dp_hdr hb = {.type = WIRE_DP_T_REQ,
				 .token = rb.token,
				 .session_id = rb.session_id,
				 .slot = 0,
				 .op = WIRE_DP_OP_SEND_BACK,
				 .seq = 1,
				 .pkt_idx = 0,
				 .pkt_cnt = wire_dp_pkt_count(3000, P),
				 .msg_len = 3000,
				 .payload_len = P};
	rx[2] = (struct dp_rx){b[2], mkpkt(b[2], hb, bmsg), B};
	dp_xsrv_input(s, rx, 3, 3000);
	int leak = 0;
	for (unsigned i = mark; i < m->ntx; i++) {
		struct wire_dp_hdr h;
		if (m->tx[i].a.port != A.port || wire_dp_hdr_decode(m->tx[i].b, m->tx[i].len, &h) ||
		    h.type != WIRE_DP_T_RESP)
			continue;
		unsigned nb = 0;
		/* Past the 48-byte header and the 40-byte common part, whose timestamps are noise. */
		for (unsigned k = 48 + 40; k < m->tx[i].len; k++)
			nb += m->tx[i].b[k] == 'B';
		printf("T2: packet to A (resp seq %u, %u bytes): %u bytes of B's request\n", h.seq,
		       h.payload_len, nb);
		leak |= nb > 0;
	}
	printf("T2 %s\n", leak ? "FAIL: B's data sent to A" : "ok");
	dp_xsrv_destroy(s);
	free(m);
	return leak;
}

/* T3: client queues a fast retransmit pointing into the caller's msg, a RESET in the same
 * burst completes the request, the callback frees msg, the flush reads it. */
static void
done_free(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	(void)msg;
	(void)len;
	printf("T3: done err=%d, freeing msg\n", err);
	free(arg);
}
static int
t3(void)
{
	struct mport *m = mport_new();
	struct dp_xcli *c;
	struct dp_xsess *se;
	struct dp_xcli_cfg cfg = {0};
	struct dp_addr S = {.ip = 9, .port = 9999};
	m->auto_connect = 1;
	if (dp_xcli_create(&cfg, &m->p, &c))
		return 2;
	if (dp_xcli_connect(c, S, 1000, &se)) {
		printf("connect failed\n");
		return 2;
	}
	m->auto_connect = 0;
	uint8_t *msg = malloc(2500);
	memset(msg, 'm', 2500);
	if (dp_xcli_submit(se, WIRE_DP_OP_SEND_BACK, msg, 2500, done_free, msg))
		return 2;
	uint8_t b[256];
	struct wire_dp_hdr cr = {.type = WIRE_DP_T_CREDIT,
				 .token = 77,
				 .session_id = 0x10001,
				 .slot = 0,
				 .op = WIRE_DP_OP_SEND_BACK,
				 .seq = 1,
				 .pkt_idx = 1,
				 .pkt_cnt = 3,
				 .credit = 64,
				 .msg_len = 2500};
	push_rx(m, b, mkpkt(b, cr, NULL), S);
	push_rx(m, b, mkpkt(b, cr, NULL), S);
	struct wire_dp_hdr rs = {.type = WIRE_DP_T_RESET,
				 .token = 77,
				 .session_id = 0x10001,
				 .op = 0,
				 .pkt_cnt = 1,
				 .msg_len = 8,
				 .payload_len = 8};
	uint8_t rp[8];
	struct wire_dp_reset r = {.reason = WIRE_DP_RESET_SHUTDOWN};
	if (wire_dp_reset_encode(&r, rp, 8) != 8)
		return 1;
	push_rx(m, b, mkpkt(b, rs, rp), S);
	dp_xcli_poll(c); /* ASan: heap-use-after-free in m_tx if buggy */
	dp_xcli_destroy(c);
	free(m);
	printf("T3 ok (no UAF detected)\n");
	return 0;
}

static int t5(void);
static int t7(void);
int
main(int argc, char **argv)
{
	int which = argc > 1 ? atoi(argv[1]) : 0, rc = 0;

	clk_init();
	if (!which || which == 1)
		rc |= t1();
	if (!which || which == 2)
		rc |= t2();
	if (!which || which == 3)
		rc |= t3();
	if (!which || which == 5)
		rc |= t5();
	if (!which || which == 7)
		rc |= t7();
	printf("%d passed, %d failed\n", rc ? 0 : 5, rc ? 1 : 0);
	return rc;
}

/* T5: 16-bit session generation wraps: a deferred handle reaches another client's request. */
static struct dp_xhandle g_h[4];
static int g_nh;
static void
park_handler(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	(void)s;
	(void)arg;
	if (g_nh < 4)
		g_h[g_nh++] = r->h; /* park: answer later */
}
static int
t5(void)
{
	struct mport *m = mport_new();
	struct dp_xsrv *s;
	struct dp_xsrv_cfg cfg = {.max_sessions = 1, .big_bufs = 1, .max_msg = 1 << 20};
	struct dp_addr V = {.ip = 1, .port = 1}, A = {.ip = 2, .port = 2};
	static uint8_t b[2][256];
	struct dp_rx rx[2];
	struct wire_dp_connect_resp rc;
	uint8_t z[8] = {0};
	if (dp_xsrv_create(&cfg, &m->p, park_handler, NULL, &s))
		return 2;
	uint64_t t = 1000;
	mock_connect(m, s, 1, V, t++, &rc, NULL);
	struct wire_dp_hdr q = {.type = WIRE_DP_T_REQ,
				.token = rc.token,
				.session_id = rc.session_id,
				.slot = 0,
				.op = WIRE_DP_OP_PULL,
				.seq = 1,
				.pkt_cnt = 1,
				.msg_len = 8,
				.payload_len = 8};
	rx[0] = (struct dp_rx){b[0], mkpkt(b[0], q, z), V};
	dp_xsrv_input(s, rx, 1, t++); /* victim's PULL parked: handle g_h[0] */
	q.slot = 100;
	rx[0] = (struct dp_rx){b[0], mkpkt(b[0], q, z), V};
	dp_xsrv_input(s, rx, 1, t++); /* victim session closed (protocol reset) */
	for (unsigned i = 0; i < 65535; i++) {
		m->ntx = 0;
		mock_connect(m, s, 1000 + i, A, t++, &rc, NULL);
		rx[0] = (struct dp_rx){b[0], bad_slot_pkt(b[0], &rc, 100), A};
		dp_xsrv_input(s, rx, 1, t++);
	}
	m->ntx = 0;
	mock_connect(m, s, 999999, A, t++, &rc, NULL);
	q.slot = 0;
	q.token = rc.token;
	q.session_id = rc.session_id;
	rx[0] = (struct dp_rx){b[0], mkpkt(b[0], q, z), A};
	dp_xsrv_input(s, rx, 1, t++);
	printf("T5: victim handle sid=%x, attacker sid=%x, victim handle pending=%d\n",
	       g_h[0].session_id, rc.session_id, dp_xsrv_is_pending(s, g_h[0]));
	int bug = dp_xsrv_is_pending(s, g_h[0]);
	printf("T5 %s\n", bug ? "FAIL: stale handle reaches a reused session" : "ok");
	dp_xsrv_destroy(s);
	free(m);
	return bug;
}

/* T7: one 48-byte CREDIT (RETRANS, huge credit) from any source address re-sends a whole response there. */
static int
t7(void)
{
	struct mport *m = mport_new();
	struct dp_xsrv *s;
	struct dp_xsrv_cfg cfg = {.max_sessions = 4, .big_bufs = 8, .max_msg = 1 << 20};
	struct dp_addr A = {.ip = 1, .port = 1111}, V = {.ip = 66, .port = 53};
	static uint8_t b[32][2048];
	struct dp_rx rx[32];
	struct wire_dp_connect_resp ra;
	if (dp_xsrv_create(&cfg, &m->p, handler, NULL, &s))
		return 2;
	mock_connect(m, s, 1, A, 1000, &ra, NULL);
	uint32_t P = ra.max_payload, len = 200000, cnt = wire_dp_pkt_count(len, P);
	static uint8_t msg[200000];
	memset(msg, 'x', sizeof msg);
	for (uint32_t i = 0; i < cnt; i++) {
		struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
					.token = ra.token,
					.session_id = ra.session_id,
					.slot = 0,
					.op = WIRE_DP_OP_SEND_BACK,
					.seq = 1,
					.pkt_idx = i,
					.pkt_cnt = cnt,
					.msg_len = len,
					.payload_len = i + 1 < cnt ? P : len - (cnt - 1) * P};
		rx[0] = (struct dp_rx){b[0], mkpkt(b[0], h, msg + (size_t)i * P), A};
		dp_xsrv_input(s, rx, 1, 2000 + i);
	}
	m->ntx = 0;
	uint32_t rcnt = wire_dp_pkt_count(len + 40, P);
	struct wire_dp_hdr c = {.type = WIRE_DP_T_CREDIT,
				.flags = WIRE_DP_F_RETRANS,
				.token = ra.token,
				.session_id = ra.session_id,
				.slot = 0,
				.op = WIRE_DP_OP_SEND_BACK,
				.seq = 1,
				.pkt_idx = 0,
				.pkt_cnt = rcnt,
				.credit = 0xffffff,
				.msg_len = len + 40};
	rx[0] = (struct dp_rx){b[0], mkpkt(b[0], c, NULL), V};
	dp_xsrv_input(s, rx, 1, 900000);
	unsigned to_v = 0;
	uint64_t bytes = 0;
	for (unsigned i = 0; i < m->ntx; i++)
		if (m->tx[i].a.ip == V.ip) {
			to_v++;
			bytes += m->tx[i].len;
		}
	printf("T7: one 48-byte CREDIT from spoofed %u:%u -> %u packets, %llu bytes sent there "
	       "(credits=%u)\n",
	       V.ip, V.port, to_v, (unsigned long long)bytes, ra.credits);
	printf("T7 %s\n", to_v > ra.credits ? "FAIL: window not clamped" : "ok");
	dp_xsrv_destroy(s);
	free(m);
	return to_v > ra.credits;
}
