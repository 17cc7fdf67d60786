// SPDX-License-Identifier: Apache-2.0
/*
 * xport_srv.c - the server half of the session transport, one per core.
 *
 * Every datagram is checked in the order of docs/protocol.md §2.2 and §7
 * before anything is executed: magic, version, header consistency, session
 * id, token, geometry. What fails is dropped and counted; nothing
 * unauthenticated is ever answered except a CONNECT.
 *
 * DESIGN
 * Sessions live in a table fixed at create time; a session id is the table
 * index + 1 in the low 16 bits and a generation in the high 16, so a stale
 * id (or a handle kept by a deferred handler across an expiry) never reaches
 * a reused entry. Each slot keeps a 256-byte inline buffer, enough for every
 * fixed-size response, so the common case never touches the pool. Messages
 * larger than that (multi-packet requests, PULL responses) use buffers of
 * max_msg bytes from a per-core pool mmap'd with MAP_NORESERVE at create
 * time: pages are only paid for when touched, and an empty pool is answered
 * with SYSTEM_BUSY, never with an allocation. A single-packet request is
 * handed to its handler straight from the RX buffer (no copy).
 *
 * Session tokens are 64 bits of HMAC-SHA1 under a per-core secret drawn from
 * getrandom() at create (a client that sees its own tokens learns nothing of
 * the next), and a session answers only the address that opened it. With a
 * key function (aclEnable) a CONNECT must carry an access key and prove its
 * secret: the first attempt gets AUTH_CHALLENGE with a challenge that is an
 * HMAC of the client's address, its nonce and the current 30 s epoch under
 * the core's secret (no state is kept for it, so a CONNECT flood fills
 * nothing); the second attempt carries HMAC(secret key, challenge, nonce,
 * client id, access key). docs/security.md has the threat model.
 *
 * Per-client shares (docs/isolation.md): sessions and pool buffers are
 * counted per source address (ipcount, sized at create), and a CONNECT or a
 * big buffer past an address's share is refused SYSTEM_BUSY while the rest of
 * the table and pool stay for others. A multi-packet request has
 * reassemblyTimeoutMs from its first packet to its last; then its buffer goes
 * back and the request is answered SYSTEM_BUSY.
 *
 * The transport never retransmits on its own (the client owns the timers):
 * a duplicate request re-sends the stored response, and a CREDIT flagged
 * RETRANS from a client that lost part of a response re-sends from the
 * packet it names.
 *
 * Size: over 1,000 lines because it is the session state machine: every check in protocol order over one session
 * table, which no other file may touch.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "common/hmac.h"
#include "common/ipcount.h"
#include "common/log.h"
#include "dp/xport.h"
#include "wire/dp.h"
#include "xport_priv.h"

#define XS_INLINE 256
#define XS_SCAN_NS 1000000ull		 /* expiry scan period */
#define XS_SCAN_BATCH 64		 /* sessions looked at per scan */
#define XS_CLOSE_LINGER_NS 1000000000ull /* answer duplicate DISCONNECTs for 1 s */

enum xs_state {
	XS_IDLE = 0,
	XS_RECV = 1, /* multi-packet request arriving */
	XS_PROC = 2, /* handed to the handler, no answer yet */
	XS_DONE = 3, /* answered; response kept for duplicates */
};

struct xs_big {
	uint8_t *buf;
	uint64_t *bits; /* received-packet bitmap while reassembling */
	uint32_t ip;	/* the address it is counted against (0: none) */
	struct xs_big *next;
};

struct xs_slot {
	uint32_t seq;
	uint8_t state;
	uint16_t op;
	/* XS_RECV */
	struct xs_big *rq;
	uint32_t rq_len;
	uint32_t rq_cnt;
	uint32_t rq_inorder; /* packets 0..rq_inorder-1 all arrived */
	uint32_t rq_since_credit;
	uint64_t rq_start; /* its first packet */
	/* XS_PROC (buffer reserved by resp_buf) and XS_DONE */
	uint8_t *resp;
	struct xs_big *rs_big;
	uint32_t rs_len;
	uint32_t rs_cnt;
	uint32_t rs_next;  /* next packet to send */
	uint32_t rs_limit; /* may send packets below this */
	uint64_t ts_recv;
	uint64_t req_id; /* names the request being processed, for handles */
	alignas(8) uint8_t inl[XS_INLINE];
};

struct xs_sess {
	uint32_t id; /* 0: free */
	uint16_t gen;
	uint16_t slots;
	uint16_t credits;
	uint32_t max_payload;
	uint32_t max_msg;
	uint64_t token;
	uint64_t nonce;
	struct dp_addr peer;
	uint64_t last_rx_ns;
	uint64_t close_at; /* != 0: DISCONNECTed, freed at this time */
	unsigned processing;
	uint32_t counted_ip; /* the address its session is counted against (0: none) */
	uint8_t ak_len;	     /* 0: opened without credentials */
	char ak[WIRE_DP_AK_MAX];
	const void *auth_cache[2];
	struct xs_slot *slot;
	uint8_t conn_resp[WIRE_DP_RESP_HEAD_LEN + WIRE_DP_CONNECT_RESP_FIXED];
	struct xs_sess *next_free;
	uint32_t nonce_next; /* the next session of its nonce's bucket (index + 1; 0: none) */
};

struct dp_xsrv {
	/* immutable after create */
	struct dp_xsrv_cfg cfg;
	struct dp_port *port;
	dp_xsrv_handler_fn handler;
	void *arg;
	size_t big_size; /* bytes per pool entry incl. bitmap */
	/* owner only */
	struct xs_sess *sess;
	struct xs_slot *slots;
	struct xs_sess *free_sess;
	struct xs_big *bigs;
	struct xs_big *free_big;
	struct xs_big *limbo_big; /* released, free again after the next flush */
	uint64_t req_ids;	  /* requests handed to the handler so far */
	void *pool;
	size_t pool_len;
	struct hmac_sha1 secret;  /* tokens and challenges */
	struct ipcount sess_addr; /* sessions per source address */
	uint32_t *nonce_heads;	  /* sessions by CONNECT nonce: bucket -> first (index + 1) */
	uint32_t nonce_mask;
	uint64_t nonce_seed;	  /* keys the hash: a client cannot choose nonces that collide */
	struct ipcount bufs_addr; /* pool buffers per source address */
	uint64_t token_ctr;
	uint64_t now;
	uint64_t next_scan;
	unsigned scan_pos;
	bool in_poll;
	struct dp_xtxq txq;
	struct dp_xsrv_stats st;
};

/* 64 bits of HMAC(core secret, @what, @a, @b): unpredictable without the secret. */
static uint64_t
xs_prf(const struct dp_xsrv *s, const char *what, uint64_t a, uint64_t b)
{
	struct hmac_sha1 h = s->secret;
	uint8_t d[SHA1_LEN];
	uint64_t v[2] = {a, b};
	uint64_t out;

	hmac_sha1_update(&h, what, strlen(what));
	hmac_sha1_update(&h, v, sizeof(v));
	hmac_sha1_final(&h, d);
	memcpy(&out, d, sizeof(out));
	return out;
}

static uint64_t
xs_token(struct dp_xsrv *s)
{
	return xs_prf(s, "token", ++s->token_ctr, 0);
}

#define XS_EPOCH_NS (30ull * 1000000000ull)

/* The challenge for a CONNECT from @peer with @nonce, in @epoch; never 0. */
static uint64_t
xs_challenge(const struct dp_xsrv *s, struct dp_addr peer, uint64_t nonce, uint64_t epoch)
{
	return xs_prf(s, "challenge", (uint64_t)peer.ip << 16 | peer.port,
		      nonce ^ epoch * 0x9E3779B97F4A7C15ull) |
	       1;
}

/* A pool buffer for session @se, within its address's share. NULL: SYSTEM_BUSY (counted). */
static struct xs_big *
big_get(struct dp_xsrv *s, const struct xs_sess *se)
{
	struct xs_big *b = s->free_big;
	uint32_t ip = se->peer.ip;

	if (!b) {
		s->st.busy++;
		return NULL;
	}
	if (s->cfg.big_bufs_per_addr &&
	    ipcount_get(&s->bufs_addr, ip) >= s->cfg.big_bufs_per_addr) {
		s->st.busy_addr++;
		return NULL;
	}
	s->free_big = b->next;
	b->ip = ipcount_add(&s->bufs_addr, ip) ? ip : 0;
	return b;
}

/*
 * A released buffer waits in limbo until the next TX flush: packets queued
 * before the release still point into it, and handing it to another
 * request first would send that request's bytes to this one's peer.
 */
static void
big_put(struct dp_xsrv *s, struct xs_big *b)
{
	if (!b)
		return;
	if (b->ip)
		ipcount_sub(&s->bufs_addr, b->ip);
	b->ip = 0;
	b->next = s->limbo_big;
	s->limbo_big = b;
}

static void
big_limbo_release(struct dp_xsrv *s)
{
	while (s->limbo_big) {
		struct xs_big *b = s->limbo_big;

		s->limbo_big = b->next;
		b->next = s->free_big;
		s->free_big = b;
	}
}

static void
slot_release(struct dp_xsrv *s, struct xs_slot *sl)
{
	big_put(s, sl->rq);
	sl->rq = NULL;
	big_put(s, sl->rs_big);
	sl->rs_big = NULL;
	sl->resp = NULL;
	sl->rs_len = 0;
}

static uint32_t *
nonce_bucket(const struct dp_xsrv *s, uint64_t nonce)
{
	uint64_t h = (nonce ^ s->nonce_seed) * 0x9E3779B97F4A7C15ull;

	return &s->nonce_heads[(uint32_t)((h ^ h >> 29) >> 24) & s->nonce_mask];
}

/* The session a CONNECT (@nonce from @peer) already opened, or NULL: O(1), not a table scan. */
static struct xs_sess *
nonce_find(const struct dp_xsrv *s, uint64_t nonce, struct dp_addr peer)
{
	for (uint32_t i = *nonce_bucket(s, nonce); i; i = s->sess[i - 1].nonce_next) {
		struct xs_sess *c = &s->sess[i - 1];

		if (c->nonce == nonce && c->peer.ip == peer.ip && c->peer.port == peer.port)
			return c;
	}
	return NULL;
}

static void
nonce_unlink(struct dp_xsrv *s, struct xs_sess *se)
{
	uint32_t me = (uint32_t)(se - s->sess) + 1;

	for (uint32_t *pp = nonce_bucket(s, se->nonce); *pp; pp = &s->sess[*pp - 1].nonce_next)
		if (*pp == me) {
			*pp = se->nonce_next;
			break;
		}
	se->nonce_next = 0;
}

static void
sess_free(struct dp_xsrv *s, struct xs_sess *se)
{
	for (unsigned i = 0; i < s->cfg.slots; i++) {
		slot_release(s, &se->slot[i]);
		se->slot[i].state = XS_IDLE;
		se->slot[i].seq = 0;
	}
	if (se->counted_ip)
		ipcount_sub(&s->sess_addr, se->counted_ip);
	se->counted_ip = 0;
	nonce_unlink(s, se);
	se->id = 0;
	se->close_at = 0;
	se->processing = 0;
	se->next_free = s->free_sess;
	s->free_sess = se;
	s->st.sessions_open--;
}

static struct xs_sess *
sess_find(const struct dp_xsrv *s, uint32_t id)
{
	uint32_t idx = (id & 0xffffu) - 1;

	if (id == 0 || idx >= s->cfg.max_sessions)
		return NULL;
	struct xs_sess *se = &s->sess[idx];

	return se->id == id ? se : NULL;
}

/* ---- TX ---- */

void
dp_xsrv_flush(struct dp_xsrv *s)
{
	dp__txq_flush(&s->txq, s->port);
	big_limbo_release(s);
}

static void
send_ctrl(struct dp_xsrv *s, const struct xs_sess *se, uint8_t type, uint16_t slot, uint16_t op,
	  uint32_t seq, uint32_t pkt_idx, uint32_t pkt_cnt, uint32_t credit, uint32_t msg_len,
	  const uint8_t *payload, uint32_t payload_len)
{
	struct wire_dp_hdr h = {
		.type = type,
		.token = se->token,
		.session_id = se->id,
		.slot = slot,
		.op = op,
		.seq = seq,
		.pkt_idx = pkt_idx,
		.pkt_cnt = pkt_cnt,
		.credit = credit,
		.msg_len = msg_len,
		.payload_len = payload_len,
	};

	dp__txq_push(&s->txq, s->port, &h, payload, se->peer);
}

static void
send_reset(struct dp_xsrv *s, struct xs_sess *se, uint32_t reason, uint32_t detail)
{
	struct wire_dp_reset r = {.reason = reason, .detail = detail};
	uint8_t *pl = dp__txq_scratch(&s->txq, s->port, WIRE_DP_RESET_LEN);

	if (wire_dp_reset_encode(&r, pl, WIRE_DP_RESET_LEN) != WIRE_DP_RESET_LEN)
		return;
	send_ctrl(s, se, WIRE_DP_T_RESET, 0, WIRE_DP_OP_NONE, 0, 0, 1, 0, WIRE_DP_RESET_LEN, pl,
		  WIRE_DP_RESET_LEN);
	s->st.tx_reset++;
}

/* Sends response packets [rs_next, min(rs_cnt, rs_limit)). */
static void
resp_pump(struct dp_xsrv *s, struct xs_sess *se, uint16_t slot_no, bool retrans)
{
	struct xs_slot *sl = &se->slot[slot_no];
	uint32_t end = SP_MIN(sl->rs_cnt, sl->rs_limit);

	while (sl->rs_next < end) {
		uint32_t i = sl->rs_next++;
		uint32_t off = i * se->max_payload;
		uint32_t plen = SP_MIN(se->max_payload, sl->rs_len - off);
		struct wire_dp_hdr h = {
			.type = WIRE_DP_T_RESP,
			.flags = retrans ? WIRE_DP_F_RETRANS : 0,
			.token = se->token,
			.session_id = se->id,
			.slot = slot_no,
			.op = sl->op,
			.seq = sl->seq,
			.pkt_idx = i,
			.pkt_cnt = sl->rs_cnt,
			.msg_len = sl->rs_len,
			.payload_len = plen,
		};

		if (i == 0)
			if (wire_dp_resp_stamp_sent(sl->resp, sl->rs_len, clk_mono_fast_ns()) != 0)
				return; /* never: rs_len >= 40 for every response */
		if (retrans)
			s->st.tx_retrans++;
		dp__txq_push(&s->txq, s->port, &h, sl->resp + off, se->peer);
	}
}

/* ---- requests ---- */

static void
execute(struct dp_xsrv *s, struct xs_sess *se, uint16_t slot_no, const uint8_t *msg, uint32_t len)
{
	struct xs_slot *sl = &se->slot[slot_no];
	struct dp_xreq req = {
		.op = sl->op,
		.msg = msg,
		.len = len,
		.ts_recv_ns = sl->ts_recv,
		.h = {.session_id = se->id, .slot = slot_no, .seq = sl->seq},
		.peer = se->peer,
		.ak = se->ak_len ? se->ak : NULL,
		.ak_len = se->ak_len,
		.auth_cache = se->auth_cache,
	};

	sl->state = XS_PROC;
	sl->req_id = ++s->req_ids;
	req.h.req_id = sl->req_id;
	se->processing++;
	s->st.executed++;
	s->handler(s, &req, s->arg);
	/* The message was valid for the call only; a reassembly buffer goes back now. */
	if (se->id == req.h.session_id && sl->seq == req.h.seq) {
		big_put(s, sl->rq);
		sl->rq = NULL;
	}
}

/* Answers a request the transport itself refuses (too big, no buffer). */
static void
answer_error(struct dp_xsrv *s, struct xs_sess *se, uint16_t slot_no, int32_t status)
{
	struct xs_slot *sl = &se->slot[slot_no];
	struct wire_dp_resp_head head = {.status = status, .ts_recv_ns = sl->ts_recv};
	long n;

	n = wire_dp_resp_error_encode(sl->op, &head, sl->inl, sizeof(sl->inl));
	if (n < 0)
		return;
	sl->state = XS_DONE;
	sl->resp = sl->inl;
	sl->rs_len = (uint32_t)n;
	sl->rs_cnt = 1;
	sl->rs_next = 0;
	sl->rs_limit = 1;
	resp_pump(s, se, slot_no, false);
}

static void
send_credit(struct dp_xsrv *s, struct xs_sess *se, uint16_t slot_no)
{
	struct xs_slot *sl = &se->slot[slot_no];

	sl->rq_since_credit = 0;
	send_ctrl(s, se, WIRE_DP_T_CREDIT, slot_no, sl->op, sl->seq, sl->rq_inorder, sl->rq_cnt,
		  se->credits, sl->rq_len, NULL, 0);
}

static void
req_packet(struct dp_xsrv *s, struct xs_sess *se, const struct wire_dp_hdr *h, const uint8_t *pl,
	   struct dp_addr src)
{
	struct xs_slot *sl = &se->slot[h->slot];
	int32_t d = (int32_t)(h->seq - sl->seq);

	if (d < 0 || (d == 0 && sl->state == XS_IDLE)) {
		s->st.rx_stale++;
		return;
	}
	if (d > 0) {
		if (sl->state == XS_PROC) {
			s->st.rx_slot_busy++;
			return;
		}
		/*
		 * A new request: whatever the slot held is done with. Only a
		 * request that moves the session forward may move its peer
		 * address (NAT rebinding, a restarted client port); duplicates
		 * and CREDITs never do, so a spoofed copy of an old packet
		 * cannot redirect answers to a third party.
		 */
		if (se->peer.ip != src.ip && se->counted_ip) {
			ipcount_sub(&s->sess_addr, se->counted_ip);
			se->counted_ip = ipcount_add(&s->sess_addr, src.ip) ? src.ip : 0;
		}
		se->peer = src;
		slot_release(s, sl);
		sl->seq = h->seq;
		sl->op = h->op;
		sl->state = XS_RECV;
		sl->ts_recv = s->now;
		if (h->msg_len > se->max_msg) {
			s->st.rx_too_big++;
			answer_error(s, se, h->slot, WIRE_DP_ST_MESSAGE_ILLEGAL);
			return;
		}
		if (h->pkt_cnt == 1) {
			execute(s, se, h->slot, pl, h->payload_len);
			return;
		}
		sl->rq = big_get(s, se);
		if (!sl->rq) {
			answer_error(s, se, h->slot, WIRE_DP_ST_SYSTEM_BUSY);
			return;
		}
		sl->rq_start = s->now;
		memset(sl->rq->bits, 0, (h->pkt_cnt + 63) / 64 * 8);
		sl->rq_len = h->msg_len;
		sl->rq_cnt = h->pkt_cnt;
		sl->rq_inorder = 0;
		sl->rq_since_credit = 0;
	} else if (sl->op != h->op || (sl->state == XS_RECV && (h->msg_len != sl->rq_len))) {
		/* Same (slot, seq), different request: the client is confused. */
		s->st.rx_malformed++;
		return;
	}

	switch (sl->state) {
	case XS_RECV: {
		uint64_t bit = 1ull << (h->pkt_idx % 64);
		uint64_t *w = &sl->rq->bits[h->pkt_idx / 64];
		bool hole;

		if (h->pkt_cnt != sl->rq_cnt) {
			s->st.rx_malformed++;
			return;
		}
		if (*w & bit) {
			s->st.rx_dup++;
			send_credit(s, se, h->slot);
			return;
		}
		*w |= bit;
		memcpy(sl->rq->buf + (size_t)h->pkt_idx * se->max_payload, pl, h->payload_len);
		hole = h->pkt_idx != sl->rq_inorder;
		while (sl->rq_inorder < sl->rq_cnt &&
		       (sl->rq->bits[sl->rq_inorder / 64] >> (sl->rq_inorder % 64) & 1))
			sl->rq_inorder++;
		if (sl->rq_inorder == sl->rq_cnt) {
			sl->ts_recv = s->now;
			execute(s, se, h->slot, sl->rq->buf, sl->rq_len);
			return;
		}
		if (hole || ++sl->rq_since_credit >= SP_MAX(1u, se->credits / 2u))
			send_credit(s, se, h->slot);
		return;
	}
	case XS_PROC:
		/* "Have it, working": the client stops retransmitting. */
		s->st.rx_dup++;
		send_ctrl(s, se, WIRE_DP_T_CREDIT, h->slot, sl->op, sl->seq, h->pkt_cnt, h->pkt_cnt,
			  se->credits, h->msg_len, NULL, 0);
		return;
	case XS_DONE:
		/* Only the first packet of a duplicate triggers the re-send. */
		s->st.rx_dup++;
		if (!sl->resp)
			return; /* released: the client said it has the response */
		if (h->pkt_idx == 0 || h->pkt_cnt == 1) {
			sl->rs_next = 0;
			sl->rs_limit = se->credits;
			resp_pump(s, se, h->slot, true);
		}
		return;
	default:
		return;
	}
}

static void
credit_packet(struct dp_xsrv *s, struct xs_sess *se, const struct wire_dp_hdr *h)
{
	struct xs_slot *sl = &se->slot[h->slot];

	if (sl->seq != h->seq || sl->state != XS_DONE || sl->rs_cnt <= 1 ||
	    h->pkt_cnt != sl->rs_cnt || h->msg_len != sl->rs_len) {
		s->st.rx_stray_credit++;
		return;
	}
	if (h->pkt_idx == sl->rs_cnt && !(h->flags & WIRE_DP_F_RETRANS)) {
		/*
		 * The client has the whole response (protocol.md §6.2): give
		 * the pool buffer back now instead of at the slot's next
		 * request. A late duplicate of the request is then dropped.
		 */
		big_put(s, sl->rs_big);
		sl->rs_big = NULL;
		sl->resp = NULL;
		sl->rs_cnt = 0;
		s->st.resp_released++;
		return;
	}
	if (h->flags & WIRE_DP_F_RETRANS) {
		/* The client stalled: re-send from the packet it needs. */
		if (h->pkt_idx < sl->rs_next)
			sl->rs_next = h->pkt_idx;
	} else if (h->pkt_idx > sl->rs_next) {
		sl->rs_next = h->pkt_idx;
	}
	/* Never more than the session's window, never past the end (64-bit: no wrap). */
	sl->rs_limit = (uint32_t)SP_MIN((uint64_t)h->pkt_idx + SP_MIN(h->credit, se->credits),
					(uint64_t)sl->rs_cnt);
	resp_pump(s, se, h->slot, (h->flags & WIRE_DP_F_RETRANS) != 0);
}

/* ---- CONNECT / DISCONNECT ---- */

/*
 * The stored answer goes out from a copy in the TX queue's scratch: the
 * session may be freed and its entry reused by another client's CONNECT
 * before the flush, and that client's token must never leave here.
 */
static void
send_conn_resp(struct dp_xsrv *s, struct xs_sess *se)
{
	uint8_t *pl = dp__txq_scratch(&s->txq, s->port, sizeof(se->conn_resp));

	memcpy(pl, se->conn_resp, sizeof(se->conn_resp));
	send_ctrl(s, se, WIRE_DP_T_RESP, 0, WIRE_DP_OP_CONNECT, 0, 0, 1, 0, sizeof(se->conn_resp),
		  pl, sizeof(se->conn_resp));
}

/* A CONNECT refused (@status), or AUTH_CHALLENGE (rs->token holds it): no session kept. */
static void
connect_refuse(struct dp_xsrv *s, const struct dp_rx *rx, struct wire_dp_connect_resp *rs,
	       uint16_t status)
{
	struct xs_sess tmp = {0};
	uint8_t *out;
	long n;

	rs->head.status = status;
	tmp.peer = rx->src;
	out = dp__txq_scratch(&s->txq, s->port, sizeof(tmp.conn_resp));
	n = wire_dp_connect_resp_encode(rs, out, sizeof(tmp.conn_resp));
	if (n > 0)
		send_ctrl(s, &tmp, WIRE_DP_T_RESP, 0, WIRE_DP_OP_CONNECT, 0, 0, 1, 0, (uint32_t)n,
			  out, (uint32_t)n);
}

/*
 * With a key function: SUCCESS if @rq proves the secret of its access key over a
 * challenge this core gave @rx's address for its nonce in this or the last
 * epoch; AUTH_CHALLENGE if it carries a key but no valid challenge yet;
 * NO_PERMISSION otherwise.
 */
static uint16_t
connect_auth(struct dp_xsrv *s, const struct dp_rx *rx, const struct wire_dp_connect_req *rq)
{
	const struct hmac_sha1 *key;
	uint8_t want[WIRE_DP_PROOF_LEN];
	uint64_t epoch = s->now / XS_EPOCH_NS;

	if (rq->ak_len == 0)
		return WIRE_DP_ST_NO_PERMISSION;
	if (rq->challenge == 0 ||
	    (rq->challenge != xs_challenge(s, rx->src, rq->nonce, epoch) &&
	     (epoch == 0 || rq->challenge != xs_challenge(s, rx->src, rq->nonce, epoch - 1))))
		return WIRE_DP_ST_AUTH_CHALLENGE;
	key = s->cfg.key_fn(s->cfg.key_arg, rq->ak, rq->ak_len);
	if (!key)
		return WIRE_DP_ST_NO_PERMISSION;
	wire_dp_connect_proof(rq, key, want);
	return hmac_equal(want, rq->proof, sizeof(want)) ? WIRE_DP_ST_SUCCESS
							 : WIRE_DP_ST_NO_PERMISSION;
}

static void
connect_packet(struct dp_xsrv *s, const struct dp_rx *rx, const struct wire_dp_hdr *h,
	       const uint8_t *pl)
{
	struct wire_dp_connect_req rq;
	struct wire_dp_connect_resp rs = {0};
	struct xs_sess *se = NULL;
	long n;

	if (wire_dp_connect_req_decode(pl, h->payload_len, &rq) != 0) {
		s->st.rx_malformed++;
		return;
	}
	/* A retransmitted CONNECT gets the same session, not a second one. */
	se = nonce_find(s, rq.nonce, rx->src);
	if (se) {
		se->last_rx_ns = s->now;
		send_conn_resp(s, se);
		return;
	}
	rs.nonce = rq.nonce;
	rs.head.ts_recv_ns = s->now;
	if (s->cfg.key_fn) {
		uint16_t st = connect_auth(s, rx, &rq);

		if (st != WIRE_DP_ST_SUCCESS) {
			if (st == WIRE_DP_ST_AUTH_CHALLENGE) {
				s->st.challenges++;
				rs.token = xs_challenge(s, rx->src, rq.nonce, s->now / XS_EPOCH_NS);
			} else {
				s->st.sessions_unauth++;
			}
			connect_refuse(s, rx, &rs, st);
			return;
		}
	}
	if (s->cfg.max_sessions_per_addr &&
	    ipcount_get(&s->sess_addr, rx->src.ip) >= s->cfg.max_sessions_per_addr) {
		s->st.sessions_refused_addr++;
		connect_refuse(s, rx, &rs, WIRE_DP_ST_SYSTEM_BUSY);
		return;
	}
	se = s->free_sess;
	if (!se) {
		s->st.sessions_refused++;
		connect_refuse(s, rx, &rs, WIRE_DP_ST_SYSTEM_BUSY);
		return;
	}
	s->free_sess = se->next_free;
	se->gen++;
	se->id = (uint32_t)se->gen << 16 | (uint32_t)(se - s->sess + 1);
	do
		se->token = xs_token(s);
	while (se->token == 0);
	se->nonce = rq.nonce;
	se->nonce_next = *nonce_bucket(s, rq.nonce);
	*nonce_bucket(s, rq.nonce) = (uint32_t)(se - s->sess) + 1;
	se->ak_len = (uint8_t)(s->cfg.key_fn ? rq.ak_len : 0);
	if (se->ak_len)
		memcpy(se->ak, rq.ak, se->ak_len);
	se->auth_cache[0] = se->auth_cache[1] = NULL;
	se->peer = rx->src;
	se->counted_ip = ipcount_add(&s->sess_addr, rx->src.ip) ? rx->src.ip : 0;
	se->last_rx_ns = s->now;
	se->close_at = 0;
	se->processing = 0;
	se->slots = SP_MIN(rq.slots, s->cfg.slots);
	se->max_msg = SP_MIN(rq.max_msg, s->cfg.max_msg);
	se->max_payload = SP_MIN(s->port->max_dgram, rq.mtu - 28u) - WIRE_DP_HDR_LEN;
	if (se->max_payload > 65535 - WIRE_DP_HDR_LEN)
		se->max_payload = 65535 - WIRE_DP_HDR_LEN;
	se->credits = s->cfg.credits ? s->cfg.credits : dp__credits_for(se->max_payload);
	for (unsigned i = 0; i < s->cfg.slots; i++) {
		se->slot[i].state = XS_IDLE;
		se->slot[i].seq = 0;
	}
	s->st.sessions_open++;
	s->st.sessions_opened++;

	rs.token = se->token;
	rs.session_id = se->id;
	rs.max_msg = se->max_msg;
	rs.idle_timeout_ms = s->cfg.idle_timeout_ms;
	rs.slots = se->slots;
	rs.credits = se->credits;
	rs.max_payload = (uint16_t)se->max_payload;
	rs.core = s->cfg.core;
	rs.head.ts_handled_ns = clk_mono_fast_ns();
	n = wire_dp_connect_resp_encode(&rs, se->conn_resp, sizeof(se->conn_resp));
	BASSERT(n == (long)sizeof(se->conn_resp));
	send_conn_resp(s, se);
}

/* ---- RX ---- */

static void
rx_one(struct dp_xsrv *s, const struct dp_rx *rx)
{
	struct wire_dp_hdr h;
	struct xs_sess *se;
	const uint8_t *pl;
	uint32_t magic;
	int err;

	if (rx->len >= 4) {
		memcpy(&magic, rx->data, 4);
		if (magic == DP_RAW_MAGIC && s->cfg.raw_echo) {
			struct dp_tx tx = {.data = rx->data, .len = rx->len, .dst = rx->src};

			/* Now: the datagram is only valid until the burst's rx_done(). */
			s->st.raw_echoed += dp_port_tx_burst(s->port, &tx, 1);
			return;
		}
		if (magic != WIRE_DP_MAGIC) {
			s->st.rx_bad_magic++;
			return;
		}
	}
	err = wire_dp_hdr_decode(rx->data, rx->len, &h);
	if (err == -EPROTO) {
		s->st.rx_bad_version++;
		return;
	}
	if (err) {
		s->st.rx_malformed++;
		return;
	}
	pl = rx->data + WIRE_DP_HDR_LEN;
	if (h.type == WIRE_DP_T_RESET) {
		s->st.rx_reset++;
		return;
	}
	if (h.type == WIRE_DP_T_RESP) {
		s->st.rx_malformed++;
		return;
	}
	if (h.op == WIRE_DP_OP_CONNECT) {
		if (h.type == WIRE_DP_T_REQ)
			connect_packet(s, rx, &h, pl);
		else
			s->st.rx_malformed++;
		return;
	}
	se = sess_find(s, h.session_id);
	if (!se) {
		s->st.rx_no_session++;
		return;
	}
	if (se->token != h.token) {
		s->st.rx_bad_token++;
		return;
	}
	if (se->peer.ip != rx->src.ip || se->peer.port != rx->src.port) {
		s->st.rx_bad_peer++;
		return;
	}
	if (h.slot >= se->slots) {
		send_reset(s, se, WIRE_DP_RESET_PROTOCOL, h.slot);
		sess_free(s, se);
		return;
	}
	if (h.type == WIRE_DP_T_REQ && wire_dp_hdr_check_geometry(&h, se->max_payload) != 0) {
		s->st.rx_bad_geometry++;
		return;
	}
	se->last_rx_ns = s->now;
	if (h.type == WIRE_DP_T_CREDIT) {
		credit_packet(s, se, &h);
		return;
	}
	if (se->close_at) {
		/* DISCONNECTed: only a duplicate DISCONNECT is answered. */
		if (h.op != WIRE_DP_OP_DISCONNECT) {
			s->st.rx_no_session++;
			return;
		}
	}
	req_packet(s, se, &h, pl, rx->src);
	if (h.op == WIRE_DP_OP_DISCONNECT && !se->close_at)
		se->close_at = s->now + XS_CLOSE_LINGER_NS;
}

/* Multi-packet requests of @se that did not arrive in reassemblyTimeoutMs: SYSTEM_BUSY. */
static void
reasm_expire(struct dp_xsrv *s, struct xs_sess *se)
{
	uint64_t limit = (uint64_t)s->cfg.reasm_timeout_ms * 1000000ull;

	for (uint16_t i = 0; i < se->slots; i++) {
		struct xs_slot *sl = &se->slot[i];

		if (sl->state != XS_RECV || !sl->rq || s->now - sl->rq_start <= limit)
			continue;
		big_put(s, sl->rq);
		sl->rq = NULL;
		s->st.reasm_timeouts++;
		answer_error(s, se, i, WIRE_DP_ST_SYSTEM_BUSY);
	}
}

static void
expire_scan(struct dp_xsrv *s)
{
	unsigned n = SP_MIN(s->cfg.max_sessions, (uint32_t)XS_SCAN_BATCH);
	uint64_t idle = (uint64_t)s->cfg.idle_timeout_ms * 1000000ull;

	for (unsigned k = 0; k < n; k++) {
		struct xs_sess *se = &s->sess[s->scan_pos];

		s->scan_pos = (s->scan_pos + 1) % s->cfg.max_sessions;
		if (!se->id)
			continue;
		reasm_expire(s, se);
		if (se->close_at) {
			if (s->now >= se->close_at)
				sess_free(s, se);
			continue;
		}
		if (se->processing == 0 && s->now - se->last_rx_ns > idle) {
			send_reset(s, se, WIRE_DP_RESET_IDLE, 0);
			sess_free(s, se);
			s->st.sessions_expired++;
		}
	}
}

static void
maybe_scan(struct dp_xsrv *s, uint64_t now_ns)
{
	if (now_ns >= s->next_scan) {
		s->next_scan = now_ns + XS_SCAN_NS;
		expire_scan(s);
	}
}

void
dp_xsrv_input(struct dp_xsrv *s, const struct dp_rx *rx, unsigned n, uint64_t now_ns)
{
	s->now = now_ns;
	s->in_poll = true;
	for (unsigned i = 0; i < n; i++)
		rx_one(s, &rx[i]);
	maybe_scan(s, now_ns);
	s->in_poll = false;
	dp_xsrv_flush(s);
}

unsigned
dp_xsrv_poll(struct dp_xsrv *s, uint64_t now_ns)
{
	struct dp_rx rx[DP_BURST_MAX];
	unsigned n;

	s->now = now_ns;
	s->in_poll = true;
	n = dp_port_rx_burst(s->port, rx, DP_BURST_MAX);
	for (unsigned i = 0; i < n; i++)
		rx_one(s, &rx[i]);
	if (n)
		dp_port_rx_done(s->port);
	maybe_scan(s, now_ns);
	s->in_poll = false;
	dp_xsrv_flush(s);
	return n;
}

/* ---- deferred answers ---- */

static struct xs_slot *
pending_slot(const struct dp_xsrv *s, struct dp_xhandle h, struct xs_sess **sep)
{
	struct xs_sess *se = sess_find(s, h.session_id);
	struct xs_slot *sl;

	if (!se || h.slot >= se->slots)
		return NULL;
	sl = &se->slot[h.slot];
	/* req_id: a 16-bit generation alone wraps; the 64-bit id never does. */
	if (sl->state != XS_PROC || sl->seq != h.seq || sl->req_id != h.req_id)
		return NULL;
	if (sep)
		*sep = se;
	return sl;
}

bool
dp_xsrv_is_pending(const struct dp_xsrv *s, struct dp_xhandle h)
{
	return pending_slot(s, h, NULL) != NULL;
}

uint8_t *
dp_xsrv_resp_buf(struct dp_xsrv *s, struct dp_xhandle h, uint32_t len)
{
	struct xs_sess *se;
	struct xs_slot *sl = pending_slot(s, h, &se);

	if (!sl || len < WIRE_DP_RESP_HEAD_LEN || len > se->max_msg)
		return NULL;
	big_put(s, sl->rs_big);
	sl->rs_big = NULL;
	if (len <= XS_INLINE) {
		sl->resp = sl->inl;
	} else {
		sl->rs_big = big_get(s, se);
		if (!sl->rs_big) {
			sl->resp = NULL;
			return NULL;
		}
		sl->resp = sl->rs_big->buf;
	}
	sl->rs_len = len;
	return sl->resp;
}

int
dp_xsrv_respond(struct dp_xsrv *s, struct dp_xhandle h, uint32_t len)
{
	struct xs_sess *se;
	struct xs_slot *sl = pending_slot(s, h, &se);

	if (!sl)
		return -ENOENT;
	if (!sl->resp || len != sl->rs_len)
		return -EINVAL;
	sl->state = XS_DONE;
	se->processing--;
	sl->rs_cnt = wire_dp_pkt_count(len, se->max_payload);
	sl->rs_next = 0;
	sl->rs_limit = se->credits;
	resp_pump(s, se, h.slot, false);
	if (!s->in_poll)
		dp_xsrv_flush(s);
	return 0;
}

const struct dp_xsrv_stats *
dp_xsrv_stats(const struct dp_xsrv *s)
{
	return &s->st;
}

/* ---- life cycle ---- */

int
dp_xsrv_create(const struct dp_xsrv_cfg *cfg, struct dp_port *port, dp_xsrv_handler_fn handler,
	       void *arg, struct dp_xsrv **out)
{
	struct dp_xsrv *s;
	size_t bits_len;

	if (!handler || !port)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	clk_init(); /* the responses' TSC timestamps (calibrated once per process) */
	s->cfg = *cfg;
	if (!s->cfg.max_sessions)
		s->cfg.max_sessions = 1024;
	if (!s->cfg.slots)
		s->cfg.slots = 8;
	if (!s->cfg.max_msg)
		s->cfg.max_msg = WIRE_DP_MSG_MAX_DEFAULT;
	if (!s->cfg.big_bufs)
		s->cfg.big_bufs = 32;
	if (!s->cfg.idle_timeout_ms)
		s->cfg.idle_timeout_ms = 30000;
	if (!s->cfg.reasm_timeout_ms)
		s->cfg.reasm_timeout_ms = 2000;
	if (s->cfg.max_sessions > 65535 || s->cfg.slots > WIRE_DP_SLOTS_MAX ||
	    s->cfg.max_msg < WIRE_DP_MSG_MIN || s->cfg.max_msg > WIRE_DP_MSG_LIMIT ||
	    port->max_dgram < DP_DGRAM_MIN) {
		free(s);
		return -EINVAL;
	}
	s->port = port;
	s->handler = handler;
	s->arg = arg;
	s->sess = calloc(s->cfg.max_sessions, sizeof(*s->sess));
	s->slots = calloc((size_t)s->cfg.max_sessions * s->cfg.slots, sizeof(*s->slots));
	s->bigs = calloc(s->cfg.big_bufs, sizeof(*s->bigs));
	for (s->nonce_mask = 15; s->nonce_mask < 2 * s->cfg.max_sessions;
	     s->nonce_mask = s->nonce_mask * 2 + 1)
		;
	s->nonce_heads = calloc((size_t)s->nonce_mask + 1, sizeof(*s->nonce_heads));
	if (!s->sess || !s->slots || !s->bigs || !s->nonce_heads ||
	    ipcount_init(&s->sess_addr, s->cfg.max_sessions) ||
	    ipcount_init(&s->bufs_addr, s->cfg.big_bufs))
		goto err_free;
	/* Bitmap for the smallest payload a session can have. */
	bits_len = ((size_t)s->cfg.max_msg / WIRE_DP_PAYLOAD_MIN + 64) / 64 * 8;
	s->big_size = ((size_t)s->cfg.max_msg + bits_len + 4095) & ~(size_t)4095;
	s->pool_len = s->big_size * s->cfg.big_bufs;
	s->pool = mmap(NULL, s->pool_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->pool == MAP_FAILED) {
		s->pool = NULL;
		goto err_free;
	}
	for (unsigned i = s->cfg.big_bufs; i-- > 0;) {
		struct xs_big *b = &s->bigs[i];

		b->buf = (uint8_t *)s->pool + s->big_size * i;
		b->bits = (uint64_t *)(void *)(b->buf + s->cfg.max_msg + (-s->cfg.max_msg & 7u));
		big_put(s, b);
	}
	big_limbo_release(s);
	for (unsigned i = s->cfg.max_sessions; i-- > 0;) {
		s->sess[i].slot = &s->slots[(size_t)i * s->cfg.slots];
		s->sess[i].next_free = s->free_sess;
		s->free_sess = &s->sess[i];
	}
	{
		uint8_t k[32];

		if (getrandom(k, sizeof(k), 0) != (ssize_t)sizeof(k) ||
		    getrandom(&s->nonce_seed, sizeof(s->nonce_seed), 0) !=
			    (ssize_t)sizeof(s->nonce_seed))
			goto err_free; /* no entropy, no unguessable tokens */
		hmac_sha1_key(&s->secret, k, sizeof(k));
		memset(k, 0, sizeof(k));
	}
	dp__txq_init(&s->txq);
	*out = s;
	return 0;

err_free:
	ipcount_fini(&s->sess_addr);
	ipcount_fini(&s->bufs_addr);
	free(s->nonce_heads);
	free(s->bigs);
	free(s->slots);
	free(s->sess);
	free(s);
	return -ENOMEM;
}

void
dp_xsrv_destroy(struct dp_xsrv *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->cfg.max_sessions; i++) {
		if (s->sess[i].id) {
			send_reset(s, &s->sess[i], WIRE_DP_RESET_SHUTDOWN, 0);
			sess_free(s, &s->sess[i]);
		}
	}
	dp_xsrv_flush(s);
	if (s->pool)
		munmap(s->pool, s->pool_len);
	ipcount_fini(&s->sess_addr);
	ipcount_fini(&s->bufs_addr);
	free(s->nonce_heads);
	free(s->bigs);
	free(s->slots);
	free(s->sess);
	free(s);
}
