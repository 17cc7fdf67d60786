// SPDX-License-Identifier: Apache-2.0
/*
 * xport_cli.c - the client half of the session transport.
 *
 * The client owns every timer (docs/protocol.md §6.1). Per slot it keeps the
 * caller's request (by reference: nothing is copied), what the server has
 * acknowledged of it, and the response being reassembled. A slot whose
 * deadline passes is retransmitted with exponential backoff: the unacked
 * part of the request, or a CREDIT flagged RETRANS naming the next response
 * packet it needs, or (the server said "working") a keepalive copy of packet
 * 0. Any packet from the server for the slot resets its retry count; after
 * max_retries silent timeouts the whole session is declared dead and every
 * request on it completes with -ETIMEDOUT.
 *
 * Single-packet responses are delivered straight from the port's RX buffer;
 * larger ones are reassembled into a per-slot buffer that grows on first use
 * up to the session's max_msg and is then reused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hmac.h"
#include "dp/xport.h"
#include "wire/dp.h"
#include "xport_priv.h"

struct xc_slot {
	uint32_t seq;
	bool busy;
	bool working; /* the server has the whole request */
	bool parked;  /* the server said "working" before answering (no RTT sample) */
	uint16_t op;
	/* request */
	const uint8_t *msg;
	uint32_t len;
	uint32_t cnt;
	uint32_t acked; /* server's in-order count */
	uint32_t next;
	uint32_t limit;
	uint32_t last_credit; /* pkt_idx of the previous CREDIT */
	uint32_t fast;	      /* packet fast-retransmitted last (UINT32_MAX: none) */
	/* response */
	uint8_t *rbuf;
	uint32_t rcap;
	uint64_t *rbits;
	uint32_t rbits_words;
	bool rstarted;
	uint32_t rlen;
	uint32_t rcnt;
	uint32_t rinorder;
	uint32_t rsince;
	/* timer */
	uint64_t sent_ns;
	bool resent; /* Karn: no RTT sample from a retransmitted request */
	uint64_t deadline;
	uint32_t rto_us;
	unsigned retries;
	dp_xcli_done_fn done;
	void *arg;
};

struct dp_xsess {
	struct dp_xcli *cli;
	struct dp_xsess *next;
	struct dp_addr server;
	uint64_t nonce;
	uint32_t id;
	uint64_t token;
	bool connected;
	bool dead;
	int conn_err;
	uint64_t challenge; /* AUTH_CHALLENGE's, to prove the secret over */
	bool challenged;    /* a challenge arrived: send the proof now */
	uint16_t slots;
	uint16_t credits;
	uint16_t core;
	uint32_t max_payload;
	uint32_t max_msg;
	uint32_t idle_ms;
	unsigned inflight;
	/* RFC 6298 estimator over whole request/response times, in ns */
	uint64_t srtt;
	uint64_t rttvar;
	uint32_t rto_us; /* current initial RTO for new requests */
	struct xc_slot *slot;
};

struct dp_xcli {
	struct dp_xcli_cfg cfg;
	bool in_poll; /* inside dp_xcli_poll(): callbacks may run */
	uint64_t now; /* clk_mono_fast_ns() at the start of the last poll */
	char client_id[64];
	char ak[WIRE_DP_AK_MAX + 1]; /* "" none */
	struct hmac_sha1 sk;
	struct dp_port *port;
	struct dp_xsess *sessions;
	uint64_t rng;
	struct dp_xtxq txq;
	struct dp_xcli_stats st;
};

static void
send_req_pkts(struct dp_xcli *c, struct dp_xsess *s, uint16_t slot_no, bool retrans)
{
	struct xc_slot *sl = &s->slot[slot_no];
	uint32_t end = SP_MIN(sl->cnt, sl->limit);

	while (sl->next < end) {
		uint32_t i = sl->next++;
		uint32_t off = i * s->max_payload;
		uint32_t plen = sl->len ? SP_MIN(s->max_payload, sl->len - off) : 0;
		struct wire_dp_hdr h = {
			.type = WIRE_DP_T_REQ,
			.flags = retrans ? WIRE_DP_F_RETRANS : 0,
			.token = s->token,
			.session_id = s->id,
			.slot = slot_no,
			.op = sl->op,
			.seq = sl->seq,
			.pkt_idx = i,
			.pkt_cnt = sl->cnt,
			.msg_len = sl->len,
			.payload_len = plen,
		};

		if (retrans)
			c->st.tx_retrans++;
		dp__txq_push(&c->txq, c->port, &h, sl->msg + off, s->server);
	}
}

static void
send_resp_credit(struct dp_xcli *c, struct dp_xsess *s, uint16_t slot_no, bool stalled)
{
	struct xc_slot *sl = &s->slot[slot_no];
	struct wire_dp_hdr h = {
		.type = WIRE_DP_T_CREDIT,
		.flags = stalled ? WIRE_DP_F_RETRANS : 0,
		.token = s->token,
		.session_id = s->id,
		.slot = slot_no,
		.op = sl->op,
		.seq = sl->seq,
		.pkt_idx = sl->rinorder,
		.pkt_cnt = sl->rcnt,
		.credit = s->credits,
		.msg_len = sl->rlen,
	};

	sl->rsince = 0;
	dp__txq_push(&c->txq, c->port, &h, NULL, s->server);
}

/*
 * RTO from measured round trips (RFC 6298: srtt + 4 * rttvar), never below
 * the configured initial RTO, so a loaded machine that answers in 5 ms does
 * not see spurious retransmissions while a quiet one recovers losses fast.
 */
static void
rtt_sample(struct dp_xcli *c, struct dp_xsess *s, uint64_t r)
{
	uint64_t rto;

	if (!s->srtt) {
		s->srtt = r;
		s->rttvar = r / 2;
	} else {
		uint64_t d = r > s->srtt ? r - s->srtt : s->srtt - r;

		s->rttvar = (3 * s->rttvar + d) / 4;
		s->srtt = (7 * s->srtt + r) / 8;
	}
	rto = (s->srtt + 4 * s->rttvar) / 1000;
	if (rto < c->cfg.rto_us)
		rto = c->cfg.rto_us;
	if (rto > c->cfg.rto_max_us)
		rto = c->cfg.rto_max_us;
	s->rto_us = (uint32_t)rto;
}

static void
complete(struct dp_xsess *s, struct xc_slot *sl, int err, const uint8_t *msg, uint32_t len)
{
	dp_xcli_done_fn done = sl->done;
	void *arg = sl->arg;

	/*
	 * Packets queued this poll may point into the caller's message, which
	 * the callback may free or reuse: send them before handing it back.
	 */
	dp__txq_flush(&s->cli->txq, s->cli->port);

	sl->busy = false;
	sl->done = NULL;
	sl->msg = NULL;
	s->inflight--;
	done(arg, err, msg, len);
}

static void
sess_fail(struct dp_xcli *c, struct dp_xsess *s, int err)
{
	s->dead = true;
	if (err == -ETIMEDOUT)
		c->st.timeouts++;
	else if (err == -ECONNRESET)
		c->st.resets++;
	for (unsigned i = 0; i < s->slots; i++) {
		if (s->slot[i].busy)
			complete(s, &s->slot[i], err, NULL, 0);
	}
}

static uint64_t
rto_ns(uint32_t us)
{
	return (uint64_t)us * 1000ull;
}

/* ---- RX ---- */

static void
on_connect_resp(struct dp_xcli *c, const struct wire_dp_hdr *h, const uint8_t *pl)
{
	struct wire_dp_connect_resp r;

	if (wire_dp_connect_resp_decode(pl, h->payload_len, &r) != 0) {
		c->st.rx_dropped++;
		return;
	}
	for (struct dp_xsess *s = c->sessions; s; s = s->next) {
		if (s->connected || s->dead || s->nonce != r.nonce)
			continue;
		if (r.head.status == WIRE_DP_ST_AUTH_CHALLENGE && c->ak[0]) {
			if (!s->challenged && s->challenge != r.token) {
				s->challenge = r.token;
				s->challenged = true;
			}
			return;
		}
		if (r.head.status != WIRE_DP_ST_SUCCESS) {
			s->conn_err = r.head.status == WIRE_DP_ST_SYSTEM_BUSY	   ? -EBUSY
				      : r.head.status == WIRE_DP_ST_NO_PERMISSION  ? -EACCES
				      : r.head.status == WIRE_DP_ST_AUTH_CHALLENGE ? -EACCES
										   : -EPROTO;
			s->dead = true;
			return;
		}
		if (r.session_id != h->session_id || r.token != h->token ||
		    r.max_payload < WIRE_DP_PAYLOAD_MIN ||
		    (uint32_t)r.max_payload + WIRE_DP_HDR_LEN > c->port->max_dgram ||
		    r.slots == 0 || r.slots > s->slots || r.credits == 0) {
			s->conn_err = -EPROTO;
			s->dead = true;
			return;
		}
		s->id = r.session_id;
		s->token = r.token;
		s->slots = r.slots;
		s->credits = r.credits;
		s->max_payload = r.max_payload;
		s->max_msg = r.max_msg;
		s->idle_ms = r.idle_timeout_ms;
		s->core = r.core;
		s->connected = true;
		return;
	}
	c->st.rx_dropped++;
}

static void
on_credit(struct dp_xcli *c, struct dp_xsess *s, const struct wire_dp_hdr *h, uint64_t now)
{
	struct xc_slot *sl = &s->slot[h->slot];

	c->st.rx_credits++;
	if (h->pkt_cnt != sl->cnt || h->msg_len != sl->len) {
		c->st.rx_dropped++;
		return;
	}
	sl->retries = 0;
	if (h->pkt_idx > sl->acked)
		sl->acked = h->pkt_idx;
	if (sl->acked >= sl->cnt) {
		/* The server has it all and is working on it: wait, keep alive slowly. */
		sl->working = true;
		sl->parked = true;
		sl->deadline = now + rto_ns(c->cfg.rto_max_us);
		return;
	}
	if (sl->next < sl->acked)
		sl->next = sl->acked;
	/*
	 * The server sends a CREDIT at once when a packet arrives out of
	 * order: a second one naming the same missing packet is a duplicate
	 * acknowledgement, and that packet is re-sent now (once) rather than
	 * after a timeout, as TCP's fast retransmit does.
	 */
	if (h->pkt_idx == sl->last_credit && h->pkt_idx < sl->next && sl->fast != h->pkt_idx) {
		uint32_t keep = sl->next;

		sl->fast = h->pkt_idx;
		sl->resent = true;
		sl->next = h->pkt_idx;
		sl->limit = h->pkt_idx + 1;
		send_req_pkts(c, s, h->slot, true);
		sl->next = keep;
	}
	sl->last_credit = h->pkt_idx;
	sl->rto_us = s->rto_us;
	sl->limit = h->pkt_idx + h->credit;
	send_req_pkts(c, s, h->slot, false);
	sl->deadline = now + rto_ns(sl->rto_us);
}

static int
grow(struct xc_slot *sl, uint32_t len, uint32_t cnt)
{
	uint32_t words = (cnt + 63) / 64;

	if (sl->rcap < len) {
		uint8_t *b = realloc(sl->rbuf, len);

		if (!b)
			return -ENOMEM;
		sl->rbuf = b;
		sl->rcap = len;
	}
	if (sl->rbits_words < words) {
		uint64_t *w = realloc(sl->rbits, (size_t)words * 8);

		if (!w)
			return -ENOMEM;
		sl->rbits = w;
		sl->rbits_words = words;
	}
	memset(sl->rbits, 0, (size_t)words * 8);
	return 0;
}

static void
on_resp(struct dp_xcli *c, struct dp_xsess *s, const struct wire_dp_hdr *h, const uint8_t *pl,
	uint64_t now)
{
	struct xc_slot *sl = &s->slot[h->slot];

	if (wire_dp_hdr_check_geometry(h, s->max_payload) != 0 || h->msg_len > s->max_msg) {
		c->st.rx_dropped++;
		return;
	}
	sl->retries = 0;
	sl->rto_us = s->rto_us;
	sl->working = true; /* a response implies the request arrived */
	if (h->pkt_cnt == 1) {
		/* Single-packet exchanges only: a big transfer's time is not a round trip. */
		if (!sl->resent && !sl->parked && sl->cnt == 1)
			rtt_sample(c, s, now - sl->sent_ns);
		c->st.rx_responses++;
		complete(s, sl, 0, pl, h->payload_len);
		return;
	}
	if (!sl->rstarted || sl->rlen != h->msg_len) {
		if (grow(sl, h->msg_len, h->pkt_cnt) != 0) {
			c->st.rx_dropped++;
			return;
		}
		sl->rstarted = true;
		sl->rlen = h->msg_len;
		sl->rcnt = h->pkt_cnt;
		sl->rinorder = 0;
		sl->rsince = 0;
	}
	uint64_t bit = 1ull << (h->pkt_idx % 64);
	uint64_t *w = &sl->rbits[h->pkt_idx / 64];
	bool hole = h->pkt_idx != sl->rinorder;

	if (*w & bit) {
		send_resp_credit(c, s, h->slot, false);
		return;
	}
	*w |= bit;
	memcpy(sl->rbuf + (size_t)h->pkt_idx * s->max_payload, pl, h->payload_len);
	while (sl->rinorder < sl->rcnt && (sl->rbits[sl->rinorder / 64] >> (sl->rinorder % 64) & 1))
		sl->rinorder++;
	if (sl->rinorder == sl->rcnt) {
		/* Tell the server it may free its stored copy (protocol.md §6.2). */
		send_resp_credit(c, s, h->slot, false);
		sl->rstarted = false;
		c->st.rx_responses++;
		complete(s, sl, 0, sl->rbuf, sl->rlen);
		return;
	}
	if (hole || ++sl->rsince >= SP_MAX(1u, s->credits / 2u))
		send_resp_credit(c, s, h->slot, false);
	sl->deadline = now + rto_ns(sl->rto_us);
}

static void
rx_one(struct dp_xcli *c, const struct dp_rx *rx, uint64_t now)
{
	struct wire_dp_hdr h;
	struct dp_xsess *s;
	const uint8_t *pl;

	if (wire_dp_hdr_decode(rx->data, rx->len, &h) != 0 || h.type == WIRE_DP_T_REQ) {
		c->st.rx_dropped++;
		return;
	}
	pl = rx->data + WIRE_DP_HDR_LEN;
	if (h.op == WIRE_DP_OP_CONNECT && h.type == WIRE_DP_T_RESP) {
		on_connect_resp(c, &h, pl);
		return;
	}
	/*
	 * Session ids are per server core: two cores may hand out the same id,
	 * so a session is named by its server's address and the id.
	 */
	for (s = c->sessions; s; s = s->next) {
		if (s->connected && s->id == h.session_id && s->server.ip == rx->src.ip &&
		    s->server.port == rx->src.port)
			break;
	}
	if (!s || s->token != h.token || s->dead) {
		c->st.rx_dropped++;
		return;
	}
	if (h.type == WIRE_DP_T_RESET) {
		sess_fail(c, s, -ECONNRESET);
		return;
	}
	if (h.slot >= s->slots) {
		c->st.rx_dropped++;
		return;
	}
	struct xc_slot *sl = &s->slot[h.slot];

	if (!sl->busy || sl->seq != h.seq || sl->op != h.op) {
		c->st.rx_dropped++;
		return;
	}
	if (h.type == WIRE_DP_T_CREDIT)
		on_credit(c, s, &h, now);
	else
		on_resp(c, s, &h, pl, now);
}

/* ---- timers ---- */

static void
slot_timeout(struct dp_xcli *c, struct dp_xsess *s, uint16_t slot_no, uint64_t now)
{
	struct xc_slot *sl = &s->slot[slot_no];

	if (++sl->retries > c->cfg.max_retries) {
		sess_fail(c, s, -ETIMEDOUT);
		return;
	}
	sl->resent = true;
	if (sl->rstarted) {
		send_resp_credit(c, s, slot_no, true);
	} else if (sl->working) {
		/* Keepalive: packet 0 again; the server answers "working" or the response. */
		sl->next = 0;
		sl->limit = 1;
		send_req_pkts(c, s, slot_no, true);
		sl->next = sl->cnt;
	} else {
		/*
		 * Packet 0 goes too when the server acknowledged part of the
		 * request: if it has finished and its response was lost, only
		 * a duplicate of packet 0 makes it re-send the response.
		 */
		if (sl->acked > 0 && sl->acked < sl->cnt) {
			sl->next = 0;
			sl->limit = 1;
			send_req_pkts(c, s, slot_no, true);
		}
		sl->next = sl->acked;
		sl->limit = sl->acked + s->credits;
		send_req_pkts(c, s, slot_no, true);
	}
	if (!sl->working) {
		sl->rto_us = SP_MIN(sl->rto_us * 2, c->cfg.rto_max_us);
		sl->deadline = now + rto_ns(sl->rto_us);
	} else {
		sl->deadline = now + rto_ns(c->cfg.rto_max_us);
	}
}

static void
timers(struct dp_xcli *c, uint64_t now)
{
	for (struct dp_xsess *s = c->sessions; s; s = s->next) {
		if (!s->connected || s->dead || !s->inflight)
			continue;
		for (uint16_t i = 0; i < s->slots && !s->dead; i++) {
			if (s->slot[i].busy && now >= s->slot[i].deadline)
				slot_timeout(c, s, i, now);
		}
	}
}

unsigned
dp_xcli_poll(struct dp_xcli *c)
{
	struct dp_rx rx[DP_BURST_MAX];
	uint64_t now = clk_mono_fast_ns();
	unsigned n;

	BASSERT(!c->in_poll); /* no dp_xcli_poll() from a completion callback */
	c->in_poll = true;
	c->now = now;
	n = dp_port_rx_burst(c->port, rx, DP_BURST_MAX);
	for (unsigned i = 0; i < n; i++)
		rx_one(c, &rx[i], now);
	if (n)
		dp_port_rx_done(c->port);
	timers(c, now);
	dp__txq_flush(&c->txq, c->port);
	c->in_poll = false;
	return n;
}

/* ---- requests ---- */

void
dp_xcli_clock(struct dp_xcli *c)
{
	c->now = clk_mono_fast_ns();
}

int
dp_xcli_submit(struct dp_xsess *s, uint16_t op, const uint8_t *msg, uint32_t len,
	       dp_xcli_done_fn done, void *arg)
{
	struct dp_xcli *c = s->cli;
	struct xc_slot *sl = NULL;
	uint16_t slot_no = 0;

	if (s->dead || !s->connected)
		return -ENOTCONN;
	if (len > s->max_msg)
		return -EMSGSIZE;
	if (s->inflight >= s->slots)
		return -EAGAIN;
	/*
	 * Lowest free slot: the server keeps each slot's last response (a big
	 * one in a pool buffer) until the slot's next request, so reusing
	 * slot 0 for sequential requests pins one buffer, not all eight.
	 */
	for (unsigned i = 0; i < s->slots; i++) {
		if (!s->slot[i].busy) {
			sl = &s->slot[i];
			slot_no = (uint16_t)i;
			break;
		}
	}
	if (!sl)
		return -EAGAIN;
	sl->seq++;
	if (sl->seq == 0)
		sl->seq = 1;
	sl->busy = true;
	sl->working = false;
	sl->parked = false;
	sl->resent = false;
	sl->op = op;
	sl->msg = msg;
	sl->len = len;
	sl->cnt = wire_dp_pkt_count(len, s->max_payload);
	sl->acked = 0;
	sl->last_credit = UINT32_MAX;
	sl->fast = UINT32_MAX;
	sl->next = 0;
	sl->limit = s->credits;
	sl->rstarted = false;
	sl->retries = 0;
	sl->rto_us = s->rto_us;
	/*
	 * The last poll's clock, not a fresh read: a submit usually follows a
	 * poll at once (a completion callback, the caller's loop), and a read
	 * here would sit on every request's critical path. It only arms the
	 * RTO and dates the RTT sample, both fine a poll early.
	 */
	sl->sent_ns = c->now ? c->now : clk_mono_fast_ns();
	sl->deadline = sl->sent_ns + rto_ns(sl->rto_us);
	sl->done = done;
	sl->arg = arg;
	s->inflight++;
	c->st.tx_requests++;
	send_req_pkts(c, s, slot_no, false);
	dp__txq_flush(&c->txq, c->port);
	return 0;
}

/* ---- sessions ---- */

static void
send_connect(struct dp_xcli *c, struct dp_xsess *s, uint8_t *buf, uint32_t len)
{
	struct wire_dp_hdr h = {
		.type = WIRE_DP_T_REQ,
		.op = WIRE_DP_OP_CONNECT,
		.pkt_cnt = 1,
		.msg_len = len,
		.payload_len = len,
	};

	dp__txq_push(&c->txq, c->port, &h, buf, s->server);
	dp__txq_flush(&c->txq, c->port);
}

static void
sess_unlink(struct dp_xcli *c, struct dp_xsess *s)
{
	for (struct dp_xsess **pp = &c->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	for (unsigned i = 0; i < WIRE_DP_SLOTS_MAX && s->slot; i++) {
		free(s->slot[i].rbuf);
		free(s->slot[i].rbits);
	}
	free(s->slot);
	free(s);
}

int
dp_xcli_connect(struct dp_xcli *c, struct dp_addr server, uint32_t timeout_ms,
		struct dp_xsess **out)
{
	struct wire_dp_connect_req rq = {0};
	uint8_t buf[WIRE_DP_CONNECT_REQ_FIXED + WIRE_DP_CLIENT_ID_MAX + 28 + WIRE_DP_AK_MAX];
	uint8_t proof[WIRE_DP_PROOF_LEN] = {0};
	struct dp_xsess *s;
	uint64_t start = clk_mono_ns();
	uint64_t next_tx = 0;
	uint32_t rto = c->cfg.rto_us;
	long n;
	int err;

	BASSERT(!c->in_poll); /* see dp_xcli_done_fn */
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->slot = calloc(WIRE_DP_SLOTS_MAX, sizeof(*s->slot));
	if (!s->slot) {
		free(s);
		return -ENOMEM;
	}
	s->cli = c;
	s->server = server;
	s->rto_us = c->cfg.rto_us;
	s->slots = c->cfg.slots;
	do
		s->nonce = dp__splitmix64(&c->rng);
	while (s->nonce == 0);
	rq.nonce = s->nonce;
	rq.max_msg = c->cfg.max_msg;
	rq.mtu = c->port->max_dgram + 28 > 65535 ? 65535 : c->port->max_dgram + 28;
	rq.slots = c->cfg.slots;
	rq.client_id = c->client_id;
	rq.client_id_len = (uint16_t)strlen(c->client_id);
	if (c->ak[0]) {
		/* first attempt: the key only; the broker answers a challenge */
		rq.ak = c->ak;
		rq.ak_len = (uint16_t)strlen(c->ak);
		rq.proof = proof;
	}
	n = wire_dp_connect_req_encode(&rq, buf, sizeof(buf));
	if (n < 0) {
		err = (int)n;
		goto err_free;
	}
	s->next = c->sessions;
	c->sessions = s;
	for (;;) {
		uint64_t now = clk_mono_ns();

		if (s->connected) {
			*out = s;
			return 0;
		}
		if (s->dead) {
			err = s->conn_err ? s->conn_err : -EPROTO;
			break;
		}
		if (now - start > (uint64_t)timeout_ms * 1000000ull) {
			err = -ETIMEDOUT;
			break;
		}
		if (s->challenged) {
			s->challenged = false;
			rq.challenge = s->challenge;
			wire_dp_connect_proof(&rq, &c->sk, proof);
			n = wire_dp_connect_req_encode(&rq, buf, sizeof(buf));
			if (n < 0) {
				err = (int)n;
				break;
			}
			next_tx = 0;
			rto = c->cfg.rto_us;
		}
		if (now >= next_tx) {
			send_connect(c, s, buf, (uint32_t)n);
			next_tx = now + rto_ns(rto);
			rto = SP_MIN(rto * 2, c->cfg.rto_max_us);
		}
		if (dp_xcli_poll(c) == 0)
			dp_port_wait(c->port, 100);
	}
	sess_unlink(c, s);
	return err;

err_free:
	free(s->slot);
	free(s);
	return err;
}

static void
disc_done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	(void)err;
	(void)msg;
	(void)len;
	*(bool *)arg = true;
}

void
dp_xcli_close(struct dp_xsess *s, uint32_t timeout_ms)
{
	struct dp_xcli *c = s->cli;
	bool finished = false;

	BASSERT(!c->in_poll); /* see dp_xcli_done_fn */
	if (s->connected && !s->dead) {
		uint64_t end = clk_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
		int err;

		/* Wait for a free slot, then DISCONNECT; requests in flight finish first. */
		do {
			err = dp_xcli_submit(s, WIRE_DP_OP_DISCONNECT, NULL, 0, disc_done,
					     &finished);
			if (err != -EAGAIN)
				break;
			(void)dp_xcli_poll(c);
		} while (clk_mono_ns() < end);
		while (err == 0 && !finished && !s->dead && clk_mono_ns() < end) {
			if (dp_xcli_poll(c) == 0)
				dp_port_wait(c->port, 100);
		}
	}
	if (!s->dead)
		sess_fail(c, s, -ECONNABORTED);
	sess_unlink(c, s);
}

unsigned
dp_xsess_inflight(const struct dp_xsess *s)
{
	return s->inflight;
}

uint16_t
dp_xsess_slots(const struct dp_xsess *s)
{
	return s->slots;
}

uint32_t
dp_xsess_max_msg(const struct dp_xsess *s)
{
	return s->max_msg;
}

uint32_t
dp_xsess_id(const struct dp_xsess *s)
{
	return s->id;
}

uint64_t
dp_xsess_token(const struct dp_xsess *s)
{
	return s->token;
}

bool
dp_xsess_is_dead(const struct dp_xsess *s)
{
	return s->dead;
}

const struct dp_xcli_stats *
dp_xcli_stats(const struct dp_xcli *c)
{
	return &c->st;
}

int
dp_xcli_create(const struct dp_xcli_cfg *cfg, struct dp_port *port, struct dp_xcli **out)
{
	struct dp_xcli *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	if (!c->cfg.slots)
		c->cfg.slots = 8;
	if (!c->cfg.max_msg)
		c->cfg.max_msg = WIRE_DP_MSG_MAX_DEFAULT;
	if (!c->cfg.rto_us)
		c->cfg.rto_us = 2000;
	if (!c->cfg.rto_max_us)
		c->cfg.rto_max_us = 200000;
	if (!c->cfg.max_retries)
		c->cfg.max_retries = 12;
	if (c->cfg.slots > WIRE_DP_SLOTS_MAX || c->cfg.max_msg < WIRE_DP_MSG_MIN ||
	    c->cfg.max_msg > WIRE_DP_MSG_LIMIT || port->max_dgram < DP_DGRAM_MIN) {
		free(c);
		return -EINVAL;
	}
	if (cfg->access_key && cfg->access_key[0]) {
		if (strlen(cfg->access_key) > WIRE_DP_AK_MAX || !cfg->secret_key ||
		    !cfg->secret_key[0]) {
			free(c);
			return -EINVAL;
		}
		snprintf(c->ak, sizeof(c->ak), "%s", cfg->access_key);
		hmac_sha1_key(&c->sk, cfg->secret_key, strlen(cfg->secret_key));
	}
	c->cfg.access_key = c->cfg.secret_key = NULL; /* not kept */
	if (cfg->client_id)
		snprintf(c->client_id, sizeof(c->client_id), "%s", cfg->client_id);
	else
		snprintf(c->client_id, sizeof(c->client_id), "sprocket@%d", (int)getpid());
	c->port = port;
	clk_init(); /* the TSC clock of the poll (calibrated once per process) */
	if (getrandom(&c->rng, sizeof(c->rng), GRND_NONBLOCK) != sizeof(c->rng))
		c->rng = clk_mono_ns() ^ (uint64_t)(uintptr_t)c;
	dp__txq_init(&c->txq);
	*out = c;
	return 0;
}

void
dp_xcli_destroy(struct dp_xcli *c)
{
	if (!c)
		return;
	BASSERT(!c->in_poll);
	while (c->sessions) {
		struct dp_xsess *s = c->sessions;

		if (!s->dead)
			sess_fail(c, s, -ECONNABORTED);
		sess_unlink(c, s);
	}
	free(c);
}
