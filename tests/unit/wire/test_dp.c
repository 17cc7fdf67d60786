// SPDX-License-Identifier: Apache-2.0
/*
 * test_dp.c - wire codec B (docs/protocol.md): the packet header and every
 * op's request and response body.
 *
 * Round trips pin the encoders to the decoders; the header error table pins
 * each rule of §2.2 to its errno, with headers written by an independent raw
 * writer here since the encoder refuses invalid ones. Truncation and bit-flip
 * sweeps run every decoder over every prefix and every one-bit corruption of
 * a sample of each message, in exactly-sized heap buffers so ASan sees any
 * overread; a flip that still decodes must re-encode to the same bytes (the
 * format has no ignored bits). The committed vectors in tests/vectors/dp were
 * written by a separate implementation from the doc tables; they must decode
 * to the fields their README lists and re-encode byte for byte.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wire/dp.h"

#define TOKEN 0x1122334455667788ull
#define SESSION 7u
#define BUF_CAP (64u << 10)

enum { K_REQ, K_RESP };

static uint8_t buf_a[BUF_CAP];
static uint8_t buf_b[BUF_CAP];

static void
assert_str(const void *p, size_t n, const char *want)
{
	size_t wn = strlen(want);

	if (n != wn)
		T_FAIL("length %zu, want %zu (\"%s\")", n, wn, want);
	if (n != 0 && (p == NULL || memcmp(p, want, n) != 0))
		T_FAIL("bytes differ from \"%s\"", want);
}

/* Copy into an exactly-sized heap buffer so ASan catches a read past @n. */
static uint8_t *
dup_exact(const uint8_t *src, size_t n)
{
	uint8_t *p = malloc(n != 0 ? n : 1);

	T_ASSERT(p != NULL);
	if (n != 0)
		memcpy(p, src, n);
	return p;
}

/* ---- an independent raw header writer (no validation) ---- */

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
raw_hdr(const struct wire_dp_hdr *h, uint32_t magic, uint8_t version, uint8_t *b)
{
	put32(b + 0, magic);
	b[4] = version;
	b[5] = h->type;
	put16(b + 6, h->flags);
	put64(b + 8, h->token);
	put32(b + 16, h->session_id);
	put16(b + 20, h->slot);
	put16(b + 22, h->op);
	put32(b + 24, h->seq);
	put32(b + 28, h->pkt_idx);
	put32(b + 32, h->pkt_cnt);
	put32(b + 36, h->credit);
	put32(b + 40, h->msg_len);
	put32(b + 44, h->payload_len);
}

static struct wire_dp_hdr
mk_hdr(uint8_t type, uint16_t op, uint32_t msg_len)
{
	struct wire_dp_hdr h = {
		.type = type,
		.token = TOKEN,
		.session_id = SESSION,
		.slot = 1,
		.op = op,
		.seq = 1,
		.pkt_idx = 0,
		.pkt_cnt = 1,
		.msg_len = msg_len,
		.payload_len = msg_len,
	};

	return h;
}

static void
assert_hdr_eq(const struct wire_dp_hdr *a, const struct wire_dp_hdr *b)
{
	T_ASSERT_EQ(a->type, b->type);
	T_ASSERT_EQ(a->flags, b->flags);
	T_ASSERT_EQ_U64(a->token, b->token);
	T_ASSERT_EQ(a->session_id, b->session_id);
	T_ASSERT_EQ(a->slot, b->slot);
	T_ASSERT_EQ(a->op, b->op);
	T_ASSERT_EQ(a->seq, b->seq);
	T_ASSERT_EQ(a->pkt_idx, b->pkt_idx);
	T_ASSERT_EQ(a->pkt_cnt, b->pkt_cnt);
	T_ASSERT_EQ(a->credit, b->credit);
	T_ASSERT_EQ(a->msg_len, b->msg_len);
	T_ASSERT_EQ(a->payload_len, b->payload_len);
}

/* Encode @h with a zero payload of h->payload_len, decode it back, compare. */
static void
hdr_roundtrip(const struct wire_dp_hdr *h)
{
	struct wire_dp_hdr d;
	size_t n = WIRE_DP_HDR_LEN + h->payload_len;
	uint8_t *p;

	T_ASSERT(n <= BUF_CAP);
	memset(buf_a, 0, n);
	T_ASSERT_EQ(wire_dp_hdr_encode(h, buf_a, BUF_CAP), WIRE_DP_HDR_LEN);
	p = dup_exact(buf_a, n);
	T_ASSERT_EQ(wire_dp_hdr_decode(p, n, &d), 0);
	assert_hdr_eq(h, &d);
	free(p);
}

/* ---- decode + re-encode of any body, the oracle for sweeps ---- */

static long
reencode_req(uint16_t op, const uint8_t *m, size_t len, uint8_t *out, size_t cap)
{
	int err;

	switch (op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH: {
		struct wire_dp_send_req r;

		err = wire_dp_send_req_decode(op, m, len, &r);
		return err != 0 ? err : wire_dp_send_req_encode(op, &r, out, cap);
	}
	case WIRE_DP_OP_PULL: {
		struct wire_dp_pull_req r;

		err = wire_dp_pull_req_decode(m, len, &r);
		return err != 0 ? err : wire_dp_pull_req_encode(&r, out, cap);
	}
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET: {
		struct wire_dp_offset_req r;

		err = wire_dp_offset_req_decode(op, m, len, &r);
		return err != 0 ? err : wire_dp_offset_req_encode(op, &r, out, cap);
	}
	case WIRE_DP_OP_SEND_BACK: {
		struct wire_dp_send_back_req r;

		err = wire_dp_send_back_req_decode(m, len, &r);
		return err != 0 ? err : wire_dp_send_back_req_encode(&r, out, cap);
	}
	case WIRE_DP_OP_CONNECT: {
		struct wire_dp_connect_req r;

		err = wire_dp_connect_req_decode(m, len, &r);
		return err != 0 ? err : wire_dp_connect_req_encode(&r, out, cap);
	}
	case WIRE_DP_OP_DISCONNECT:
		err = wire_dp_disconnect_req_decode(m, len);
		return err != 0 ? err : wire_dp_disconnect_req_encode(out, cap);
	case WIRE_DP_OP_PING: {
		struct wire_dp_ping_req r;

		err = wire_dp_ping_req_decode(m, len, &r);
		return err != 0 ? err : wire_dp_ping_req_encode(&r, out, cap);
	}
	case WIRE_DP_OP_REPL: {
		struct wire_dp_repl_req r;

		err = wire_dp_repl_req_decode(m, len, &r);
		return err != 0 ? err : wire_dp_repl_req_encode(&r, out, cap);
	}
	default:
		return -EINVAL;
	}
}

static long
reencode_resp(uint16_t op, const uint8_t *m, size_t len, uint8_t *out, size_t cap)
{
	int err;

	switch (op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH: {
		struct wire_dp_send_resp r;

		err = wire_dp_send_resp_decode(op, m, len, &r);
		return err != 0 ? err : wire_dp_send_resp_encode(op, &r, out, cap);
	}
	case WIRE_DP_OP_PULL: {
		struct wire_dp_pull_resp r;

		err = wire_dp_pull_resp_decode(m, len, &r);
		return err != 0 ? err : wire_dp_pull_resp_encode(&r, out, cap);
	}
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET: {
		struct wire_dp_offset_resp r;

		err = wire_dp_offset_resp_decode(op, m, len, &r);
		return err != 0 ? err : wire_dp_offset_resp_encode(op, &r, out, cap);
	}
	case WIRE_DP_OP_SEND_BACK:
	case WIRE_DP_OP_DISCONNECT: {
		struct wire_dp_resp_head h;

		err = wire_dp_bare_resp_decode(op, m, len, &h);
		return err != 0 ? err : wire_dp_bare_resp_encode(op, &h, out, cap);
	}
	case WIRE_DP_OP_CONNECT: {
		struct wire_dp_connect_resp r;

		err = wire_dp_connect_resp_decode(m, len, &r);
		return err != 0 ? err : wire_dp_connect_resp_encode(&r, out, cap);
	}
	case WIRE_DP_OP_PING: {
		struct wire_dp_ping_resp r;

		err = wire_dp_ping_resp_decode(m, len, &r);
		return err != 0 ? err : wire_dp_ping_resp_encode(&r, out, cap);
	}
	case WIRE_DP_OP_REPL: {
		struct wire_dp_repl_resp r;

		err = wire_dp_repl_resp_decode(m, len, &r);
		return err != 0 ? err : wire_dp_repl_resp_encode(&r, out, cap);
	}
	default:
		return -EINVAL;
	}
}

static long
reencode(int kind, uint16_t op, const uint8_t *m, size_t len, uint8_t *out, size_t cap)
{
	return kind == K_REQ ? reencode_req(op, m, len, out, cap)
			     : reencode_resp(op, m, len, out, cap);
}

/* Decoding must succeed and re-encode to the same bytes. */
static void
assert_canonical(int kind, uint16_t op, const uint8_t *m, size_t len)
{
	uint8_t *p = dup_exact(m, len);
	long n = reencode(kind, op, p, len, buf_b, BUF_CAP);

	if (n != (long)len)
		T_FAIL("%s %s: reencode gave %ld, want %zu", kind == K_REQ ? "req" : "resp",
		       wire_dp_op_name(op), n, len);
	T_ASSERT_MEMEQ(buf_b, m, len);
	free(p);
}

/* ---- sample messages (every op, request and response) ---- */

struct sample {
	int kind;
	uint16_t op;
	size_t len;
	uint8_t bytes[512];
};

static const struct wire_dp_resp_head head_ok = {
	.status = WIRE_DP_ST_SUCCESS,
	.ts_recv_ns = 1000,
	.ts_handled_ns = 2000,
	.ts_durable_ns = 3000,
	.ts_sent_ns = 4000,
};

static const int32_t tags[] = {2598919, -7};
static const int64_t batch_offs[] = {8192, 8300, 8411};
static const uint8_t records[] = {0, 0, 0, 12, 0xDA, 0xA3, 0x20, 0xA7, 1, 2, 3, 4};

static void
add_sample(struct sample *s, size_t *n, int kind, uint16_t op, long len)
{
	T_ASSERT(len >= 0 && (size_t)len <= sizeof(s[*n].bytes));
	s[*n].kind = kind;
	s[*n].op = op;
	s[*n].len = (size_t)len;
	memcpy(s[*n].bytes, buf_a, (size_t)len);
	(*n)++;
}

static size_t
build_samples(struct sample *s)
{
	size_t n = 0;
	struct wire_dp_send_req sr = {
		.born_ts = 1700000000123,
		.queue_id = 3,
		.flag = 9,
		.sysflag = 1,
		.reconsume_times = 2,
		.topic = "TopicTest",
		.topic_len = 9,
		.props = "TAGS\001TagA\002",
		.props_len = 10,
		.body = (const uint8_t *)"hello",
		.body_len = 5,
	};
	struct wire_dp_send_req br = sr;
	struct wire_dp_send_resp srsp = {head_ok, 8192, 42, 3, 1, NULL};
	struct wire_dp_send_resp brsp = {head_ok, 8192, 42, 3, 3, (const uint8_t *)batch_offs};
	struct wire_dp_pull_req pr = {
		.queue_offset = 42,
		.commit_offset = 40,
		.queue_id = 3,
		.max_msgs = 32,
		.max_bytes = 262144,
		.sysflag = 7,
		.suspend_timeout_ms = 15000,
		.expr_type = WIRE_DP_EXPR_TAG,
		.tag_hashes = (const uint8_t *)tags,
		.tag_count = 2,
		.group = "GID_X",
		.group_len = 5,
		.topic = "TopicTest",
		.topic_len = 9,
		.expr = "TagA || TagB",
		.expr_len = 12,
	};
	struct wire_dp_pull_resp prsp = {head_ok, 43, 0, 43, 1, 0, records, sizeof(records)};
	struct wire_dp_offset_req orq = {0, 3, "GID_X", 5, "TopicTest", 9};
	struct wire_dp_offset_resp orsp = {head_ok, 77};
	struct wire_dp_send_back_req sb = {8192, 0, 16, "GID_X", 5, "TopicTest", 9, "0A0B", 4};
	struct wire_dp_connect_req cr = {0xABCDEFull, WIRE_DP_MSG_MAX_DEFAULT, 1500, 8, "c@1", 3};
	struct wire_dp_connect_resp crsp = {
		head_ok, 0xABCDEFull, TOKEN, SESSION, WIRE_DP_MSG_MAX_DEFAULT,
		30000,	 8,	      32,    1424,    1,
	};
	struct wire_dp_ping_req pq = {99};
	struct wire_dp_ping_resp pp = {head_ok, 99};
	static const uint8_t repl_data[16] = {0, 0, 0, 8, 0xcb, 0xd4, 0x3e, 0x11, 1, 2, 3};
	struct wire_dp_repl_req rq = {.offset = 4096,
				      .seg_size = 1u << 30,
				      .flushed = 1024,
				      .prev_off = 3900,
				      .prev_size = 196,
				      .prev_hash = 0xdeadbeef,
				      .max_bytes = 1u << 20,
				      .suspend_ms = 1000,
				      .shard = 1,
				      .cores = 2,
				      .name = "broker-a",
				      .name_len = 8};
	struct wire_dp_repl_resp rp = {.head = head_ok,
				       .master_end = 8192,
				       .data_offset = 4096,
				       .min_offset = 0,
				       .seg_size = 1u << 30,
				       .cores = 2,
				       .flags = WIRE_DP_REPL_F_SLAVE_ACKED,
				       .data = repl_data,
				       .data_len = sizeof(repl_data)};

	br.flag = 0;
	br.reconsume_times = 0;
	add_sample(s, &n, K_REQ, WIRE_DP_OP_SEND,
		   wire_dp_send_req_encode(WIRE_DP_OP_SEND, &sr, buf_a, BUF_CAP));
	add_sample(s, &n, K_REQ, WIRE_DP_OP_SEND_BATCH,
		   wire_dp_send_req_encode(WIRE_DP_OP_SEND_BATCH, &br, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_SEND,
		   wire_dp_send_resp_encode(WIRE_DP_OP_SEND, &srsp, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_SEND_BATCH,
		   wire_dp_send_resp_encode(WIRE_DP_OP_SEND_BATCH, &brsp, buf_a, BUF_CAP));
	add_sample(s, &n, K_REQ, WIRE_DP_OP_PULL, wire_dp_pull_req_encode(&pr, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_PULL, wire_dp_pull_resp_encode(&prsp, buf_a, BUF_CAP));
	for (uint16_t op = WIRE_DP_OP_QUERY_OFFSET; op <= WIRE_DP_OP_SEARCH_OFFSET; op++) {
		struct wire_dp_offset_req q = orq;

		if (op != WIRE_DP_OP_QUERY_OFFSET && op != WIRE_DP_OP_UPDATE_OFFSET) {
			q.group = NULL;
			q.group_len = 0;
		}
		if (op == WIRE_DP_OP_UPDATE_OFFSET || op == WIRE_DP_OP_SEARCH_OFFSET)
			q.value = 1700000000000;
		add_sample(s, &n, K_REQ, op, wire_dp_offset_req_encode(op, &q, buf_a, BUF_CAP));
		add_sample(s, &n, K_RESP, op,
			   wire_dp_offset_resp_encode(op, &orsp, buf_a, BUF_CAP));
	}
	add_sample(s, &n, K_REQ, WIRE_DP_OP_SEND_BACK,
		   wire_dp_send_back_req_encode(&sb, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_SEND_BACK,
		   wire_dp_bare_resp_encode(WIRE_DP_OP_SEND_BACK, &head_ok, buf_a, BUF_CAP));
	add_sample(s, &n, K_REQ, WIRE_DP_OP_CONNECT,
		   wire_dp_connect_req_encode(&cr, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_CONNECT,
		   wire_dp_connect_resp_encode(&crsp, buf_a, BUF_CAP));
	add_sample(s, &n, K_REQ, WIRE_DP_OP_DISCONNECT, wire_dp_disconnect_req_encode(buf_a, 0));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_DISCONNECT,
		   wire_dp_bare_resp_encode(WIRE_DP_OP_DISCONNECT, &head_ok, buf_a, BUF_CAP));
	add_sample(s, &n, K_REQ, WIRE_DP_OP_PING, wire_dp_ping_req_encode(&pq, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_PING, wire_dp_ping_resp_encode(&pp, buf_a, BUF_CAP));
	add_sample(s, &n, K_REQ, WIRE_DP_OP_REPL, wire_dp_repl_req_encode(&rq, buf_a, BUF_CAP));
	add_sample(s, &n, K_RESP, WIRE_DP_OP_REPL, wire_dp_repl_resp_encode(&rp, buf_a, BUF_CAP));
	return n;
}

static struct sample samples[64];

/* ---- header ---- */

static void
test_hdr_roundtrip(void)
{
	struct wire_dp_hdr h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_SEND, 56);

	hdr_roundtrip(&h);
	h.flags = WIRE_DP_F_RETRANS;
	h.slot = 65535;
	h.seq = 0xFFFFFFFFu;
	hdr_roundtrip(&h);

	/* middle and last packet of a 3000-byte message at 1424 per packet */
	h = mk_hdr(WIRE_DP_T_RESP, WIRE_DP_OP_PULL, 3000);
	h.pkt_cnt = 3;
	h.pkt_idx = 1;
	h.payload_len = 1424;
	hdr_roundtrip(&h);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);
	h.pkt_idx = 2;
	h.payload_len = 3000 - 2 * 1424;
	hdr_roundtrip(&h);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);

	h = mk_hdr(WIRE_DP_T_CREDIT, WIRE_DP_OP_SEND, 5000);
	h.pkt_cnt = 4;
	h.pkt_idx = 4; /* whole message received: "have it, working" */
	h.payload_len = 0;
	h.credit = 8;
	hdr_roundtrip(&h);

	h = mk_hdr(WIRE_DP_T_RESET, WIRE_DP_OP_NONE, WIRE_DP_RESET_LEN);
	h.seq = 0;
	hdr_roundtrip(&h);

	h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_CONNECT, 40);
	h.token = 0;
	h.session_id = 0;
	h.slot = 0;
	h.seq = 0;
	hdr_roundtrip(&h);
	h.type = WIRE_DP_T_RESP; /* a failed CONNECT: no session */
	hdr_roundtrip(&h);
	h.session_id = 9;
	h.token = TOKEN;
	hdr_roundtrip(&h);

	h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_DISCONNECT, 0);
	hdr_roundtrip(&h);

	T_ASSERT_EQ(wire_dp_hdr_encode(&h, buf_a, WIRE_DP_HDR_LEN - 1), -ENOBUFS);
	T_ASSERT_EQ(buf_a[0], 0x53); /* "SPRK" in a dump */
	T_ASSERT_EQ(buf_a[3], 0x4B);
}

struct hdr_case {
	const char *what;
	int want;
	void (*mutate)(struct wire_dp_hdr *h);
};

#define MUT(name, body)                                                                            \
	static void name(struct wire_dp_hdr *h)                                                    \
	{                                                                                          \
		body;                                                                              \
	}

MUT(m_type0, h->type = 0)
MUT(m_type5, h->type = 5)
MUT(m_flags, h->flags = 0x2)
MUT(m_op0, h->op = 0)
MUT(m_op13, h->op = WIRE_DP_OP_MAX + 1)
MUT(m_msg_limit, h->msg_len = WIRE_DP_MSG_LIMIT + 1; h->pkt_cnt = 2; h->payload_len = 0)
MUT(m_cnt0, h->pkt_cnt = 0)
MUT(m_empty_two, h->msg_len = 0; h->payload_len = 0; h->pkt_cnt = 2)
MUT(m_cnt_gt_len, h->pkt_cnt = 57)
MUT(m_idx_eq_cnt, h->pkt_idx = 1)
MUT(m_credit, h->credit = 1)
MUT(m_single_short, h->payload_len = 55)
MUT(m_multi_empty, h->pkt_cnt = 2; h->payload_len = 0)
MUT(m_nonlast_big, h->pkt_cnt = 2; h->payload_len = 56)
MUT(m_nonlast_small, h->pkt_cnt = 2; h->payload_len = 27)
MUT(m_session0, h->session_id = 0)
MUT(m_seq0, h->seq = 0)

static const struct hdr_case hdr_cases[] = {
	{"type 0", -EPROTO, m_type0},
	{"type 5", -EPROTO, m_type5},
	{"reserved flag", -EPROTO, m_flags},
	{"op 0 in a request", -EPROTO, m_op0},
	{"unknown op", -EPROTO, m_op13},
	{"msg_len over the limit", -EBADMSG, m_msg_limit},
	{"pkt_cnt 0", -EBADMSG, m_cnt0},
	{"empty message in 2 packets", -EBADMSG, m_empty_two},
	{"more packets than bytes", -EBADMSG, m_cnt_gt_len},
	{"pkt_idx == pkt_cnt", -EBADMSG, m_idx_eq_cnt},
	{"credit in a request", -EBADMSG, m_credit},
	{"single packet shorter than msg_len", -EBADMSG, m_single_short},
	{"empty packet of a multi-packet message", -EBADMSG, m_multi_empty},
	{"non-last packet holds the whole message", -EBADMSG, m_nonlast_big},
	{"non-last packets cannot cover msg_len", -EBADMSG, m_nonlast_small},
	{"session 0", -EBADMSG, m_session0},
	{"seq 0", -EBADMSG, m_seq0},
};

/* Write @h raw (no validation), with a zero payload of payload_len, and decode it. */
static int
decode_raw(const struct wire_dp_hdr *h, uint32_t magic, uint8_t version, size_t extra)
{
	size_t n = WIRE_DP_HDR_LEN + (size_t)h->payload_len + extra;
	uint8_t *p;
	struct wire_dp_hdr d;
	int err;

	T_ASSERT(n <= BUF_CAP);
	memset(buf_a, 0, n);
	raw_hdr(h, magic, version, buf_a);
	p = dup_exact(buf_a, n);
	err = wire_dp_hdr_decode(p, n, &d);
	free(p);
	return err;
}

static void
expect_bad(const struct wire_dp_hdr *h, int want, const char *what)
{
	int got = decode_raw(h, WIRE_DP_MAGIC, WIRE_DP_VERSION, 0);

	if (got != want)
		T_FAIL("%s: decode %d, want %d", what, got, want);
	if (wire_dp_hdr_encode(h, buf_a, BUF_CAP) != -EINVAL)
		T_FAIL("%s: encode accepted it", what);
}

static void
test_hdr_errors(void)
{
	struct wire_dp_hdr base = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_SEND, 56);
	struct wire_dp_hdr h;
	uint8_t *p;

	T_ASSERT_EQ(decode_raw(&base, WIRE_DP_MAGIC, WIRE_DP_VERSION, 0), 0);
	for (size_t i = 0; i < ARRAY_SIZE(hdr_cases); i++) {
		h = base;
		hdr_cases[i].mutate(&h);
		expect_bad(&h, hdr_cases[i].want, hdr_cases[i].what);
	}

	/* shorter than a header, at every length */
	raw_hdr(&base, WIRE_DP_MAGIC, WIRE_DP_VERSION, buf_a);
	for (size_t n = 0; n < WIRE_DP_HDR_LEN; n++) {
		p = dup_exact(buf_a, n);
		T_ASSERT_EQ(wire_dp_hdr_decode(p, n, &h), -EBADMSG);
		free(p);
	}
	T_ASSERT_EQ(decode_raw(&base, WIRE_DP_MAGIC ^ 1, WIRE_DP_VERSION, 0), -EPROTO);
	T_ASSERT_EQ(decode_raw(&base, WIRE_DP_MAGIC, 0, 0), -EPROTO);
	T_ASSERT_EQ(decode_raw(&base, WIRE_DP_MAGIC, 2, 0), -EPROTO);
	/* datagram longer than header + payload_len */
	T_ASSERT_EQ(decode_raw(&base, WIRE_DP_MAGIC, WIRE_DP_VERSION, 1), -EBADMSG);
	/* -EPROTO wins over a length error */
	h = base;
	h.op = 99;
	h.pkt_cnt = 0;
	T_ASSERT_EQ(decode_raw(&h, WIRE_DP_MAGIC, WIRE_DP_VERSION, 0), -EPROTO);

	/* CREDIT */
	h = mk_hdr(WIRE_DP_T_CREDIT, WIRE_DP_OP_SEND, 5000);
	h.pkt_cnt = 4;
	h.pkt_idx = 2;
	h.payload_len = 0;
	T_ASSERT_EQ(decode_raw(&h, WIRE_DP_MAGIC, WIRE_DP_VERSION, 0), 0);
	h.pkt_idx = 5;
	expect_bad(&h, -EBADMSG, "credit past pkt_cnt");
	h.pkt_idx = 2;
	h.payload_len = 4;
	expect_bad(&h, -EBADMSG, "credit with payload");
	h.payload_len = 0;
	h.op = WIRE_DP_OP_CONNECT;
	expect_bad(&h, -EBADMSG, "credit for CONNECT");

	/* RESET */
	h = mk_hdr(WIRE_DP_T_RESET, WIRE_DP_OP_NONE, WIRE_DP_RESET_LEN);
	T_ASSERT_EQ(decode_raw(&h, WIRE_DP_MAGIC, WIRE_DP_VERSION, 0), 0);
	h.op = WIRE_DP_OP_MAX + 1;
	expect_bad(&h, -EPROTO, "reset with unknown op");
	h = mk_hdr(WIRE_DP_T_RESET, WIRE_DP_OP_NONE, 4);
	expect_bad(&h, -EBADMSG, "reset of 4 bytes");
	h = mk_hdr(WIRE_DP_T_RESET, WIRE_DP_OP_NONE, WIRE_DP_RESET_LEN);
	h.credit = 1;
	expect_bad(&h, -EBADMSG, "reset with credit");
	h.credit = 0;
	h.session_id = 0;
	expect_bad(&h, -EBADMSG, "reset without session");

	/* CONNECT */
	h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_CONNECT, 40);
	h.session_id = 0;
	h.token = 0;
	h.slot = 0;
	h.seq = 0;
	T_ASSERT_EQ(decode_raw(&h, WIRE_DP_MAGIC, WIRE_DP_VERSION, 0), 0);
	base = h;
	h.session_id = 1;
	expect_bad(&h, -EBADMSG, "connect request with a session");
	h = base;
	h.token = 1;
	expect_bad(&h, -EBADMSG, "connect request with a token");
	h = base;
	h.slot = 1;
	expect_bad(&h, -EBADMSG, "connect request with a slot");
	h = base;
	h.seq = 1;
	expect_bad(&h, -EBADMSG, "connect request with a seq");
	h = base;
	h.pkt_cnt = 2;
	h.payload_len = 20;
	expect_bad(&h, -EBADMSG, "connect in two packets");
	h = base;
	h.type = WIRE_DP_T_RESP;
	h.seq = 3;
	expect_bad(&h, -EBADMSG, "connect response with a seq");
}

static void
test_geometry(void)
{
	struct wire_dp_hdr h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_SEND, 3000);

	T_ASSERT_EQ(wire_dp_pkt_count(0, 1424), 1);
	T_ASSERT_EQ(wire_dp_pkt_count(1, 1424), 1);
	T_ASSERT_EQ(wire_dp_pkt_count(1424, 1424), 1);
	T_ASSERT_EQ(wire_dp_pkt_count(1425, 1424), 2);
	T_ASSERT_EQ(wire_dp_pkt_count(UINT32_MAX, 1), UINT32_MAX);
	T_ASSERT_EQ(wire_dp_pkt_count(5, 0), 0);

	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 3000), 0);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 4000), 0);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), -EBADMSG); /* needs 3 packets */
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 0), -EINVAL);
	h.pkt_cnt = 3;
	h.pkt_idx = 0;
	h.payload_len = 1424;
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1400), -EBADMSG);
	h.pkt_idx = 2;
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), -EBADMSG); /* last carries 152 */
	h.payload_len = 152;
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);
	h.type = WIRE_DP_T_CREDIT;
	h.payload_len = 0;
	h.pkt_idx = 3;
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1500), -EBADMSG);
	h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_DISCONNECT, 0);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);
	h.pkt_idx = 1; /* not from the decoder: still refused */
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), -EBADMSG);
	h = mk_hdr(WIRE_DP_T_RESET, WIRE_DP_OP_NONE, WIRE_DP_RESET_LEN);
	T_ASSERT_EQ(wire_dp_hdr_check_geometry(&h, 1424), 0);
}

/* ---- bodies ---- */

static void
test_send_req(void)
{
	struct wire_dp_send_req r = {
		.born_ts = -5,
		.queue_id = -1,
		.flag = 9,
		.sysflag = 0x10,
		.reconsume_times = 2,
		.topic = "TopicTest",
		.topic_len = 9,
		.props = "TAGS\001TagA\002KEYS\001k1",
		.props_len = 17,
		.body = (const uint8_t *)"hello",
		.body_len = 5,
	};
	struct wire_dp_send_req d;
	long n = wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP);
	uint8_t *p;

	T_ASSERT_EQ(n, 32 + 9 + 17 + 5);
	p = dup_exact(buf_a, (size_t)n);
	T_ASSERT_EQ(wire_dp_send_req_decode(WIRE_DP_OP_SEND, p, (size_t)n, &d), 0);
	T_ASSERT_EQ(d.born_ts, -5);
	T_ASSERT_EQ(d.queue_id, -1);
	T_ASSERT_EQ(d.flag, 9);
	T_ASSERT_EQ(d.sysflag, 0x10);
	T_ASSERT_EQ(d.reconsume_times, 2);
	assert_str(d.topic, d.topic_len, "TopicTest");
	assert_str(d.props, d.props_len, "TAGS\001TagA\002KEYS\001k1");
	assert_str(d.body, d.body_len, "hello");
	T_ASSERT(d.topic == (const char *)p + 32); /* points into the buffer */
	/* a SEND_BATCH body must have flag and reconsume_times 0 */
	T_ASSERT_EQ(wire_dp_send_req_decode(WIRE_DP_OP_SEND_BATCH, p, (size_t)n, &d), -EBADMSG);
	T_ASSERT_EQ(wire_dp_send_req_decode(WIRE_DP_OP_PULL, p, (size_t)n, &d), -EINVAL);
	free(p);

	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND_BATCH, &r, buf_a, BUF_CAP), -EINVAL);
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, (size_t)n - 1), -ENOBUFS);
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_PING, &r, buf_a, BUF_CAP), -EINVAL);

	/* empty props and body, a batch */
	r.flag = 0;
	r.reconsume_times = 0;
	r.props = NULL;
	r.props_len = 0;
	r.body = NULL;
	r.body_len = 0;
	n = wire_dp_send_req_encode(WIRE_DP_OP_SEND_BATCH, &r, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 32 + 9);
	T_ASSERT_EQ(wire_dp_send_req_decode(WIRE_DP_OP_SEND_BATCH, buf_a, (size_t)n, &d), 0);
	T_ASSERT(d.props == NULL && d.body == NULL);

	/* limits */
	r.topic_len = 0;
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP), -EINVAL);
	r.topic = "TopicTest";
	r.topic_len = WIRE_DP_TOPIC_MAX + 1;
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP), -EINVAL);
	r.topic_len = 9;
	r.props_len = 3; /* NULL with a length */
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP), -EINVAL);
	r.props = (const char *)buf_b;
	r.props_len = WIRE_DP_PROPS_MAX + 1;
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP), -EINVAL);
	r.props_len = 0;
	r.body = buf_b;
	r.body_len = WIRE_DP_MSG_LIMIT;
	T_ASSERT_EQ(wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP), -EINVAL);

	/* a decoded topic of 128 bytes is rejected */
	r.body_len = 0;
	r.topic = (const char *)buf_b;
	memset(buf_b, 'T', 200);
	r.topic_len = WIRE_DP_TOPIC_MAX;
	n = wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 32 + 127);
	buf_a[24] = 128;
	buf_a[n] = 'T';
	T_ASSERT_EQ(wire_dp_send_req_decode(WIRE_DP_OP_SEND, buf_a, (size_t)n + 1, &d), -EBADMSG);
}

static void
test_send_resp(void)
{
	struct wire_dp_send_resp r = {head_ok, 8192, 42, 3, 1, NULL};
	struct wire_dp_send_resp d;
	long n;

	n = wire_dp_send_resp_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 64);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, buf_a, (size_t)n, &d), 0);
	T_ASSERT_EQ(d.head.status, 0);
	T_ASSERT_EQ_U64(d.head.ts_recv_ns, 1000);
	T_ASSERT_EQ_U64(d.head.ts_handled_ns, 2000);
	T_ASSERT_EQ_U64(d.head.ts_durable_ns, 3000);
	T_ASSERT_EQ_U64(d.head.ts_sent_ns, 4000);
	T_ASSERT_EQ(d.phys_offset, 8192);
	T_ASSERT_EQ(d.queue_offset, 42);
	T_ASSERT_EQ(d.queue_id, 3);
	T_ASSERT_EQ(d.count, 1);
	T_ASSERT(d.phys_offsets == NULL);
	r.count = 2;
	T_ASSERT_EQ(wire_dp_send_resp_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP), -EINVAL);
	buf_a[60] = 2;
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, buf_a, 64, &d), -EBADMSG);

	/* batch: count offsets follow */
	r.count = 3;
	r.phys_offsets = (const uint8_t *)batch_offs;
	n = wire_dp_send_resp_encode(WIRE_DP_OP_SEND_BATCH, &r, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 64 + 24);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND_BATCH, buf_a, (size_t)n, &d), 0);
	T_ASSERT_EQ(d.count, 3);
	for (uint32_t i = 0; i < 3; i++)
		T_ASSERT_EQ(wire_dp_send_resp_phys(&d, i), batch_offs[i]);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND_BATCH, buf_a, (size_t)n - 8, &d),
		    -EBADMSG);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, buf_a, (size_t)n, &d), -EBADMSG);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_PULL, buf_a, (size_t)n, &d), -EINVAL);
	r.phys_offsets = NULL;
	T_ASSERT_EQ(wire_dp_send_resp_encode(WIRE_DP_OP_SEND_BATCH, &r, buf_a, BUF_CAP), -EINVAL);

	/* stored-but-not-flushed statuses carry offsets */
	r.count = 1;
	r.head.status = WIRE_DP_ST_FLUSH_DISK_TIMEOUT;
	n = wire_dp_send_resp_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP);
	T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, buf_a, (size_t)n, &d), 0);
	T_ASSERT(wire_dp_status_is_stored(d.head.status));
	T_ASSERT_EQ(d.phys_offset, 8192);
	T_ASSERT_EQ(wire_dp_send_resp_encode(WIRE_DP_OP_SEND, &r, buf_a, 63), -ENOBUFS);
}

static void
test_pull(void)
{
	struct sample *s = NULL;
	size_t n = build_samples(samples);
	struct wire_dp_pull_req q;
	struct wire_dp_pull_resp r;
	uint8_t *p;

	for (size_t i = 0; i < n; i++)
		if (samples[i].op == WIRE_DP_OP_PULL && samples[i].kind == K_REQ)
			s = &samples[i];
	T_ASSERT(s != NULL);
	T_ASSERT_EQ(s->len, 48 + 8 + 5 + 9 + 12);
	p = dup_exact(s->bytes, s->len);
	T_ASSERT_EQ(wire_dp_pull_req_decode(p, s->len, &q), 0);
	T_ASSERT_EQ(q.queue_offset, 42);
	T_ASSERT_EQ(q.commit_offset, 40);
	T_ASSERT_EQ(q.queue_id, 3);
	T_ASSERT_EQ(q.max_msgs, 32);
	T_ASSERT_EQ(q.max_bytes, 262144);
	T_ASSERT_EQ(q.sysflag,
		    WIRE_DP_PULL_COMMIT_OFFSET | WIRE_DP_PULL_SUSPEND | WIRE_DP_PULL_SUBSCRIPTION);
	T_ASSERT_EQ(q.suspend_timeout_ms, 15000);
	T_ASSERT_EQ(q.expr_type, WIRE_DP_EXPR_TAG);
	T_ASSERT_EQ(q.tag_count, 2);
	T_ASSERT_EQ(wire_dp_pull_req_tag(&q, 0), 2598919);
	T_ASSERT_EQ(wire_dp_pull_req_tag(&q, 1), -7);
	assert_str(q.group, q.group_len, "GID_X");
	assert_str(q.topic, q.topic_len, "TopicTest");
	assert_str(q.expr, q.expr_len, "TagA || TagB");
	free(p);

	/* body rules (decoded into a copy: q points into it while buf_a is rewritten) */
	p = dup_exact(s->bytes, s->len);
	p[44] = 2; /* expr_type */
	T_ASSERT_EQ(wire_dp_pull_req_decode(p, s->len, &q), -EBADMSG);
	p[44] = 0;
	p[46] = 1; /* reserved */
	T_ASSERT_EQ(wire_dp_pull_req_decode(p, s->len, &q), -EBADMSG);
	p[46] = 0;
	T_ASSERT_EQ(wire_dp_pull_req_decode(p, s->len, &q), 0);
	q.tag_count = WIRE_DP_TAGS_MAX + 1;
	q.tag_hashes = buf_b;
	T_ASSERT_EQ(wire_dp_pull_req_encode(&q, buf_a, BUF_CAP), -EINVAL);
	q.tag_count = 0;
	q.group_len = 0;
	T_ASSERT_EQ(wire_dp_pull_req_encode(&q, buf_a, BUF_CAP), -EINVAL);
	q.group = "G";
	q.group_len = 1;
	q.expr = NULL;
	q.expr_len = 0;
	q.expr_type = WIRE_DP_EXPR_SQL92;
	T_ASSERT_EQ(wire_dp_pull_req_encode(&q, buf_a, BUF_CAP), 48 + 1 + 9);
	T_ASSERT_EQ(wire_dp_pull_req_encode(&q, buf_a, 48), -ENOBUFS);
	free(p);

	/* response with records */
	r = (struct wire_dp_pull_resp){head_ok, 43, 1, 44, 1, 5, records, sizeof(records)};
	T_ASSERT_EQ(wire_dp_pull_resp_encode(&r, buf_a, BUF_CAP), 80 + (long)sizeof(records));
	memset(&r, 0xEE, sizeof(r));
	T_ASSERT_EQ(wire_dp_pull_resp_decode(buf_a, 80 + sizeof(records), &r), 0);
	T_ASSERT_EQ(r.next_begin_offset, 43);
	T_ASSERT_EQ(r.min_offset, 1);
	T_ASSERT_EQ(r.max_offset, 44);
	T_ASSERT_EQ(r.rec_count, 1);
	T_ASSERT_EQ(r.suggest_broker_id, 5);
	T_ASSERT_EQ(r.records_len, sizeof(records));
	T_ASSERT(r.records == buf_a + 80);
	T_ASSERT_MEMEQ(r.records, records, sizeof(records));

	T_ASSERT_EQ(wire_dp_pull_resp_encode(&r, buf_b, 80 + sizeof(records) - 1), -ENOBUFS);

	/* zero copy: prefix only, the records are chained by the caller */
	r.records = NULL;
	memset(buf_b, 0, 200);
	T_ASSERT_EQ(wire_dp_pull_resp_encode(&r, buf_b, 80), 80);
	memcpy(buf_b + 80, records, sizeof(records));
	T_ASSERT_MEMEQ(buf_b, buf_a, 80 + sizeof(records));

	/* no records on an error status; count and length agree */
	r.records = records;
	r.head.status = WIRE_DP_ST_PULL_NOT_FOUND;
	T_ASSERT_EQ(wire_dp_pull_resp_encode(&r, buf_a, BUF_CAP), -EINVAL);
	r.head.status = WIRE_DP_ST_SUCCESS;
	r.rec_count = 0;
	T_ASSERT_EQ(wire_dp_pull_resp_encode(&r, buf_a, BUF_CAP), -EINVAL);
	r = (struct wire_dp_pull_resp){head_ok, 43, 1, 44, 0, 0, NULL, 0};
	r.head.status = WIRE_DP_ST_PULL_OFFSET_MOVED;
	T_ASSERT_EQ(wire_dp_pull_resp_encode(&r, buf_a, BUF_CAP), 80);
	T_ASSERT_EQ(wire_dp_pull_resp_decode(buf_a, 80, &r), 0);
	T_ASSERT_EQ(r.head.status, WIRE_DP_ST_PULL_OFFSET_MOVED);
	T_ASSERT_EQ(r.next_begin_offset, 43);
	T_ASSERT(r.records == NULL);
	buf_a[64] = 1; /* rec_count 1, no records */
	T_ASSERT_EQ(wire_dp_pull_resp_decode(buf_a, 80, &r), -EBADMSG);
}

static void
test_offset_ops(void)
{
	for (uint16_t op = WIRE_DP_OP_QUERY_OFFSET; op <= WIRE_DP_OP_SEARCH_OFFSET; op++) {
		bool group = op == WIRE_DP_OP_QUERY_OFFSET || op == WIRE_DP_OP_UPDATE_OFFSET;
		bool value = op == WIRE_DP_OP_UPDATE_OFFSET || op == WIRE_DP_OP_SEARCH_OFFSET;
		struct wire_dp_offset_req r = {
			value ? -123456789012 : 0,
			-2,
			group ? "GID_X" : NULL,
			group ? 5 : 0,
			"TopicTest",
			9,
		};
		struct wire_dp_offset_req d;
		struct wire_dp_offset_resp rs = {head_ok, -1};
		struct wire_dp_offset_resp ds;
		long n = wire_dp_offset_req_encode(op, &r, buf_a, BUF_CAP);

		T_ASSERT_EQ(n, 16 + (group ? 5 : 0) + 9);
		T_ASSERT_EQ(wire_dp_offset_req_decode(op, buf_a, (size_t)n, &d), 0);
		T_ASSERT_EQ(d.value, r.value);
		T_ASSERT_EQ(d.queue_id, -2);
		assert_str(d.group, d.group_len, group ? "GID_X" : "");
		assert_str(d.topic, d.topic_len, "TopicTest");
		T_ASSERT_EQ(wire_dp_offset_req_encode(op, &r, buf_a, (size_t)n - 1), -ENOBUFS);

		/* the other shape of group is refused both ways */
		r.group = group ? NULL : "G";
		r.group_len = group ? 0 : 1;
		T_ASSERT_EQ(wire_dp_offset_req_encode(op, &r, buf_a, BUF_CAP), -EINVAL);
		r.group = group ? "GID_X" : NULL;
		r.group_len = group ? 5 : 0;
		if (!value) {
			r.value = 1;
			T_ASSERT_EQ(wire_dp_offset_req_encode(op, &r, buf_a, BUF_CAP), -EINVAL);
			r.value = 0;
			n = wire_dp_offset_req_encode(op, &r, buf_a, BUF_CAP);
			buf_a[0] = 1;
			T_ASSERT_EQ(wire_dp_offset_req_decode(op, buf_a, (size_t)n, &d), -EBADMSG);
		}

		n = wire_dp_offset_resp_encode(op, &rs, buf_a, BUF_CAP);
		T_ASSERT_EQ(n, 48);
		T_ASSERT_EQ(wire_dp_offset_resp_decode(op, buf_a, (size_t)n, &ds), 0);
		T_ASSERT_EQ(ds.offset, -1);
		T_ASSERT_EQ_U64(ds.head.ts_sent_ns, 4000);
		T_ASSERT_EQ(wire_dp_offset_resp_decode(op, buf_a, (size_t)n + 1, &ds), -EBADMSG);
	}
	{
		struct wire_dp_offset_req r = {0, 0, NULL, 0, "T", 1};
		struct wire_dp_offset_resp rs = {head_ok, 0};

		T_ASSERT_EQ(wire_dp_offset_req_encode(WIRE_DP_OP_SEND, &r, buf_a, BUF_CAP),
			    -EINVAL);
		T_ASSERT_EQ(wire_dp_offset_resp_encode(WIRE_DP_OP_PULL, &rs, buf_a, BUF_CAP),
			    -EINVAL);
		T_ASSERT_EQ(wire_dp_offset_resp_decode(WIRE_DP_OP_PING, buf_a, 48, &rs), -EINVAL);
		T_ASSERT_EQ(wire_dp_offset_req_decode(WIRE_DP_OP_PING, buf_a, 48, &r), -EINVAL);
		T_ASSERT_EQ(wire_dp_offset_resp_encode(WIRE_DP_OP_GET_MAX_OFFSET, &rs, buf_a, 47),
			    -ENOBUFS);
	}
}

static void
test_send_back(void)
{
	struct wire_dp_send_back_req r = {
		8192, -1, 16, "GID_X", 5, "TopicTest", 9, "0A00000500002A9F0000000000002000", 32,
	};
	struct wire_dp_send_back_req d;
	struct wire_dp_resp_head h;
	long n = wire_dp_send_back_req_encode(&r, buf_a, BUF_CAP);

	T_ASSERT_EQ(n, 24 + 5 + 9 + 32);
	T_ASSERT_EQ(wire_dp_send_back_req_decode(buf_a, (size_t)n, &d), 0);
	T_ASSERT_EQ(d.phys_offset, 8192);
	T_ASSERT_EQ(d.delay_level, -1);
	T_ASSERT_EQ(d.max_reconsume_times, 16);
	assert_str(d.group, d.group_len, "GID_X");
	assert_str(d.origin_topic, d.origin_topic_len, "TopicTest");
	assert_str(d.origin_msgid, d.origin_msgid_len, "0A00000500002A9F0000000000002000");
	buf_a[23] = 1;
	T_ASSERT_EQ(wire_dp_send_back_req_decode(buf_a, (size_t)n, &d), -EBADMSG);
	r.origin_msgid_len = WIRE_DP_MSGID_MAX + 1;
	r.origin_msgid = (const char *)buf_b;
	T_ASSERT_EQ(wire_dp_send_back_req_encode(&r, buf_a, BUF_CAP), -EINVAL);
	r.origin_msgid_len = 0;
	r.origin_topic_len = 0;
	r.group_len = 0;
	T_ASSERT_EQ(wire_dp_send_back_req_encode(&r, buf_a, BUF_CAP), -EINVAL);
	r.group_len = 1;
	T_ASSERT_EQ(wire_dp_send_back_req_encode(&r, buf_a, BUF_CAP), 25);
	T_ASSERT_EQ(wire_dp_send_back_req_encode(&r, buf_a, 24), -ENOBUFS);

	/* its response is the common part only */
	n = wire_dp_bare_resp_encode(WIRE_DP_OP_SEND_BACK, &head_ok, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 40);
	T_ASSERT_EQ(wire_dp_bare_resp_decode(WIRE_DP_OP_SEND_BACK, buf_a, 40, &h), 0);
	T_ASSERT_EQ_U64(h.ts_durable_ns, 3000);
	T_ASSERT_EQ(wire_dp_bare_resp_decode(WIRE_DP_OP_SEND_BACK, buf_a, 41, &h), -EBADMSG);
	T_ASSERT_EQ(wire_dp_bare_resp_decode(WIRE_DP_OP_PING, buf_a, 40, &h), -EINVAL);
	T_ASSERT_EQ(wire_dp_bare_resp_encode(WIRE_DP_OP_SEND, &head_ok, buf_a, BUF_CAP), -EINVAL);
	T_ASSERT_EQ(wire_dp_bare_resp_encode(WIRE_DP_OP_DISCONNECT, &head_ok, buf_a, 39), -ENOBUFS);
}

static void
test_connect(void)
{
	struct wire_dp_connect_req r = {0x0123456789ABCDEFull, 1u << 20, 9000, 16,
					"10.0.0.9@x",	       10};
	struct wire_dp_connect_req d;
	struct wire_dp_connect_resp rs = {
		head_ok, 0x0123456789ABCDEFull, TOKEN, SESSION, 1u << 20, 30000, 16, 32, 8900, 3,
	};
	struct wire_dp_connect_resp ds;
	long n = wire_dp_connect_req_encode(&r, buf_a, BUF_CAP);

	T_ASSERT_EQ(n, 24 + 10);
	T_ASSERT_EQ(wire_dp_connect_req_decode(buf_a, (size_t)n, &d), 0);
	T_ASSERT_EQ_U64(d.nonce, 0x0123456789ABCDEFull);
	T_ASSERT_EQ(d.max_msg, 1u << 20);
	T_ASSERT_EQ(d.mtu, 9000);
	T_ASSERT_EQ(d.slots, 16);
	assert_str(d.client_id, d.client_id_len, "10.0.0.9@x");

	d = r;
	d.slots = 0;
	T_ASSERT_EQ(wire_dp_connect_req_encode(&d, buf_a, BUF_CAP), -EINVAL);
	d.slots = WIRE_DP_SLOTS_MAX + 1;
	T_ASSERT_EQ(wire_dp_connect_req_encode(&d, buf_a, BUF_CAP), -EINVAL);
	d = r;
	d.mtu = WIRE_DP_MTU_MIN - 1;
	T_ASSERT_EQ(wire_dp_connect_req_encode(&d, buf_a, BUF_CAP), -EINVAL);
	d = r;
	d.max_msg = WIRE_DP_MSG_LIMIT + 1;
	T_ASSERT_EQ(wire_dp_connect_req_encode(&d, buf_a, BUF_CAP), -EINVAL);
	d.max_msg = WIRE_DP_MSG_MIN - 1;
	T_ASSERT_EQ(wire_dp_connect_req_encode(&d, buf_a, BUF_CAP), -EINVAL);
	d = r;
	d.client_id_len = 0;
	T_ASSERT_EQ(wire_dp_connect_req_encode(&d, buf_a, BUF_CAP), -EINVAL);
	T_ASSERT_EQ(wire_dp_connect_req_encode(&r, buf_a, 33), -ENOBUFS);
	n = wire_dp_connect_req_encode(&r, buf_a, BUF_CAP);
	buf_a[21] = 1; /* reserved */
	T_ASSERT_EQ(wire_dp_connect_req_decode(buf_a, (size_t)n, &d), -EBADMSG);

	n = wire_dp_connect_resp_encode(&rs, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 80);
	T_ASSERT_EQ(wire_dp_connect_resp_decode(buf_a, (size_t)n, &ds), 0);
	T_ASSERT_EQ_U64(ds.nonce, 0x0123456789ABCDEFull);
	T_ASSERT_EQ_U64(ds.token, TOKEN);
	T_ASSERT_EQ(ds.session_id, SESSION);
	T_ASSERT_EQ(ds.max_msg, 1u << 20);
	T_ASSERT_EQ(ds.idle_timeout_ms, 30000);
	T_ASSERT_EQ(ds.slots, 16);
	T_ASSERT_EQ(ds.credits, 32);
	T_ASSERT_EQ(ds.max_payload, 8900);
	T_ASSERT_EQ(ds.core, 3);

	/* success needs a usable session; failure carries only the nonce */
	ds = rs;
	ds.session_id = 0;
	T_ASSERT_EQ(wire_dp_connect_resp_encode(&ds, buf_a, BUF_CAP), -EINVAL);
	ds = rs;
	ds.max_payload = WIRE_DP_PAYLOAD_MIN - 1;
	T_ASSERT_EQ(wire_dp_connect_resp_encode(&ds, buf_a, BUF_CAP), -EINVAL);
	ds = rs;
	ds.credits = 0;
	T_ASSERT_EQ(wire_dp_connect_resp_encode(&ds, buf_a, BUF_CAP), -EINVAL);
	ds = rs;
	ds.head.status = WIRE_DP_ST_SYSTEM_BUSY;
	T_ASSERT_EQ(wire_dp_connect_resp_encode(&ds, buf_a, BUF_CAP), -EINVAL);
	ds = (struct wire_dp_connect_resp){.head = head_ok, .nonce = 5};
	ds.head.status = WIRE_DP_ST_SYSTEM_BUSY;
	n = wire_dp_connect_resp_encode(&ds, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 80);
	T_ASSERT_EQ(wire_dp_connect_resp_decode(buf_a, (size_t)n, &ds), 0);
	T_ASSERT_EQ(ds.head.status, WIRE_DP_ST_SYSTEM_BUSY);
	T_ASSERT_EQ_U64(ds.nonce, 5);
	T_ASSERT_EQ(wire_dp_connect_resp_encode(&ds, buf_a, 79), -ENOBUFS);
}

static void
test_disconnect_ping(void)
{
	struct wire_dp_ping_req q = {0xFEEDFACECAFEBEEFull};
	struct wire_dp_ping_req dq;
	struct wire_dp_ping_resp r = {head_ok, 0xFEEDFACECAFEBEEFull};
	struct wire_dp_ping_resp dr;
	struct wire_dp_resp_head h;

	T_ASSERT_EQ(wire_dp_disconnect_req_encode(NULL, 0), 0);
	T_ASSERT_EQ(wire_dp_disconnect_req_decode(NULL, 0), 0);
	T_ASSERT_EQ(wire_dp_disconnect_req_decode(buf_a, 1), -EBADMSG);
	T_ASSERT_EQ(wire_dp_bare_resp_encode(WIRE_DP_OP_DISCONNECT, &head_ok, buf_a, BUF_CAP), 40);
	T_ASSERT_EQ(wire_dp_bare_resp_decode(WIRE_DP_OP_DISCONNECT, buf_a, 40, &h), 0);

	T_ASSERT_EQ(wire_dp_ping_req_encode(&q, buf_a, BUF_CAP), 8);
	T_ASSERT_EQ(wire_dp_ping_req_decode(buf_a, 8, &dq), 0);
	T_ASSERT_EQ_U64(dq.client_ts_ns, 0xFEEDFACECAFEBEEFull);
	T_ASSERT_EQ(dq.pad_len, 0);
	T_ASSERT_EQ(wire_dp_ping_req_decode(buf_a, 7, &dq), -EBADMSG);
	T_ASSERT_EQ(wire_dp_ping_req_encode(&q, buf_a, 7), -ENOBUFS);
	/* padding rides along and is echoed */
	q.pad = (const uint8_t *)"abcdef";
	q.pad_len = 6;
	T_ASSERT_EQ(wire_dp_ping_req_encode(&q, buf_a, BUF_CAP), 14);
	T_ASSERT_EQ(wire_dp_ping_req_decode(buf_a, 14, &dq), 0);
	T_ASSERT_EQ(dq.pad_len, 6);
	T_ASSERT(memcmp(dq.pad, "abcdef", 6) == 0);
	q.pad = NULL;
	T_ASSERT_EQ(wire_dp_ping_req_encode(&q, buf_a, BUF_CAP), -EINVAL);
	q.pad_len = 0;
	r.pad = (const uint8_t *)"xyz";
	r.pad_len = 3;
	T_ASSERT_EQ(wire_dp_ping_resp_encode(&r, buf_a, BUF_CAP), 51);
	T_ASSERT_EQ(wire_dp_ping_resp_decode(buf_a, 51, &dr), 0);
	T_ASSERT_EQ(dr.pad_len, 3);
	T_ASSERT(memcmp(dr.pad, "xyz", 3) == 0);
	T_ASSERT_EQ(wire_dp_ping_resp_decode(buf_a, 47, &dr), -EBADMSG);
	r.pad = NULL;
	r.pad_len = 0;
	T_ASSERT_EQ(wire_dp_ping_resp_encode(&r, buf_a, BUF_CAP), 48);
	T_ASSERT_EQ(wire_dp_ping_resp_decode(buf_a, 48, &dr), 0);
	T_ASSERT_EQ_U64(dr.echo_ts_ns, 0xFEEDFACECAFEBEEFull);
	T_ASSERT_EQ(wire_dp_ping_resp_encode(&r, buf_a, 47), -ENOBUFS);
}

static void
test_resp_head_and_errors(void)
{
	struct wire_dp_resp_head h = head_ok;
	struct wire_dp_resp_head d;
	long n;

	/* REDIRECT needs a port; other statuses no redirect fields */
	h.status = WIRE_DP_ST_REDIRECT;
	T_ASSERT_EQ(wire_dp_resp_error_encode(WIRE_DP_OP_SEND, &h, buf_a, BUF_CAP), -EINVAL);
	h.redirect_core = 2;
	h.redirect_port = 10913;
	for (uint16_t op = 1; op <= WIRE_DP_OP_MAX; op++) {
		long fixed = wire_dp_resp_fixed_len(op);

		T_ASSERT(fixed >= 0);
		n = wire_dp_resp_error_encode(op, &h, buf_a, BUF_CAP);
		if (op == WIRE_DP_OP_CONNECT) {
			T_ASSERT_EQ(n, -EINVAL);
			continue;
		}
		T_ASSERT_EQ(n, 40 + fixed);
		T_ASSERT_EQ(wire_dp_resp_head_decode(buf_a, (size_t)n, &d), 0);
		T_ASSERT_EQ(d.status, WIRE_DP_ST_REDIRECT);
		T_ASSERT_EQ(d.redirect_core, 2);
		T_ASSERT_EQ(d.redirect_port, 10913);
		/* the op's own decoder accepts it */
		assert_canonical(K_RESP, op, buf_a, (size_t)n);
		T_ASSERT_EQ(wire_dp_resp_error_encode(op, &h, buf_a, (size_t)n - 1), -ENOBUFS);
	}
	T_ASSERT_EQ(wire_dp_resp_error_encode(0, &h, buf_a, BUF_CAP), -EINVAL);
	T_ASSERT_EQ(wire_dp_resp_error_encode(WIRE_DP_OP_MAX + 1, &h, buf_a, BUF_CAP), -EINVAL);
	T_ASSERT_EQ(wire_dp_resp_error_encode(WIRE_DP_OP_PING, &head_ok, buf_a, BUF_CAP), -EINVAL);

	h.status = WIRE_DP_ST_SYSTEM_BUSY;
	T_ASSERT_EQ(wire_dp_resp_error_encode(WIRE_DP_OP_PING, &h, buf_a, BUF_CAP), -EINVAL);
	h.redirect_core = 0;
	h.redirect_port = 0;
	n = wire_dp_resp_error_encode(WIRE_DP_OP_PING, &h, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, 48);
	buf_a[6] = 1; /* a redirect port on a non-redirect status */
	T_ASSERT_EQ(wire_dp_resp_head_decode(buf_a, 48, &d), -EBADMSG);
	buf_a[6] = 0;
	T_ASSERT_EQ(wire_dp_resp_head_decode(buf_a, 39, &d), -EBADMSG);

	T_ASSERT_EQ(wire_dp_resp_stamp_sent(buf_a, 48, 0x1122334455667788ull), 0);
	T_ASSERT_EQ(wire_dp_resp_head_decode(buf_a, 48, &d), 0);
	T_ASSERT_EQ_U64(d.ts_sent_ns, 0x1122334455667788ull);
	T_ASSERT_EQ_U64(d.ts_recv_ns, 1000);
	T_ASSERT_EQ(wire_dp_resp_stamp_sent(buf_a, 39, 1), -EBADMSG);
}

static void
test_reset(void)
{
	struct wire_dp_reset r = {WIRE_DP_RESET_PROTOCOL, 300};
	struct wire_dp_reset d;

	T_ASSERT_EQ(wire_dp_reset_encode(&r, buf_a, BUF_CAP), WIRE_DP_RESET_LEN);
	T_ASSERT_EQ(wire_dp_reset_decode(buf_a, 8, &d), 0);
	T_ASSERT_EQ(d.reason, WIRE_DP_RESET_PROTOCOL);
	T_ASSERT_EQ(d.detail, 300);
	T_ASSERT_EQ(wire_dp_reset_decode(buf_a, 7, &d), -EBADMSG);
	T_ASSERT_EQ(wire_dp_reset_encode(&r, buf_a, 7), -ENOBUFS);
	r.reason = 0;
	T_ASSERT_EQ(wire_dp_reset_encode(&r, buf_a, BUF_CAP), -EINVAL);
	memset(buf_a, 0, 8);
	T_ASSERT_EQ(wire_dp_reset_decode(buf_a, 8, &d), -EBADMSG);
}

static void
test_names(void)
{
	T_ASSERT_STREQ(wire_dp_op_name(WIRE_DP_OP_SEND), "SEND");
	T_ASSERT_STREQ(wire_dp_op_name(WIRE_DP_OP_SEARCH_OFFSET), "SEARCH_OFFSET");
	T_ASSERT_STREQ(wire_dp_op_name(WIRE_DP_OP_PING), "PING");
	T_ASSERT_STREQ(wire_dp_op_name(0), "NONE");
	T_ASSERT_STREQ(wire_dp_op_name(13), "REPL");
	T_ASSERT_STREQ(wire_dp_op_name(14), "?");
	T_ASSERT(!wire_dp_op_is_valid(0));
	T_ASSERT(wire_dp_op_is_valid(1));
	T_ASSERT(wire_dp_op_is_valid(12));
	T_ASSERT(wire_dp_op_is_valid(13));
	T_ASSERT(!wire_dp_op_is_valid(14));
	T_ASSERT_EQ(wire_dp_resp_fixed_len(0), -EINVAL);
	T_ASSERT_EQ(wire_dp_resp_fixed_len(WIRE_DP_OP_PULL), 40);
	T_ASSERT(!wire_dp_status_is_stored(WIRE_DP_ST_MESSAGE_ILLEGAL));
	T_ASSERT(wire_dp_status_is_stored(WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT));
}

/* ---- sweeps ---- */

static void
test_samples_roundtrip(void)
{
	size_t n = build_samples(samples);
	unsigned seen_req = 0;
	unsigned seen_resp = 0;

	for (size_t i = 0; i < n; i++) {
		assert_canonical(samples[i].kind, samples[i].op, samples[i].bytes, samples[i].len);
		if (samples[i].kind == K_REQ)
			seen_req |= 1u << samples[i].op;
		else
			seen_resp |= 1u << samples[i].op;
	}
	/* every op, both directions */
	T_ASSERT_EQ(seen_req, 0x3FFEu);
	T_ASSERT_EQ(seen_resp, 0x3FFEu);
}

/* Every proper prefix of every sample fails to decode, as a body and as a datagram. */
static void
test_truncation(void)
{
	size_t n = build_samples(samples);

	for (size_t i = 0; i < n; i++) {
		const struct sample *s = &samples[i];
		struct wire_dp_hdr h = mk_hdr(s->kind == K_REQ ? WIRE_DP_T_REQ : WIRE_DP_T_RESP,
					      s->op, (uint32_t)s->len);
		size_t dlen = WIRE_DP_HDR_LEN + s->len;

		for (size_t cut = 0; cut < s->len; cut++) {
			uint8_t *p = dup_exact(s->bytes, cut);
			long r = reencode(s->kind, s->op, p, cut, buf_b, BUF_CAP);

			if (r >= 0)
				T_FAIL("%s of %zu bytes cut to %zu decoded", wire_dp_op_name(s->op),
				       s->len, cut);
			free(p);
		}
		if (s->op == WIRE_DP_OP_CONNECT) {
			h.session_id = 0;
			h.token = 0;
			h.slot = 0;
			h.seq = 0;
			if (s->kind == K_RESP)
				h.session_id = SESSION;
		}
		T_ASSERT_EQ(wire_dp_hdr_encode(&h, buf_a, BUF_CAP), WIRE_DP_HDR_LEN);
		memcpy(buf_a + WIRE_DP_HDR_LEN, s->bytes, s->len);
		for (size_t cut = 0; cut < dlen; cut++) {
			uint8_t *p = dup_exact(buf_a, cut);
			struct wire_dp_hdr d;

			T_ASSERT(wire_dp_hdr_decode(p, cut, &d) < 0);
			free(p);
		}
	}
}

/*
 * Flip every bit of every sample. No crash, no overread; whatever still
 * decodes re-encodes to exactly the flipped bytes.
 */
static void
test_bitflips(void)
{
	size_t n = build_samples(samples);
	unsigned long accepted = 0;
	unsigned long total = 0;

	for (size_t i = 0; i < n; i++) {
		const struct sample *s = &samples[i];

		for (size_t bit = 0; bit < s->len * 8; bit++) {
			uint8_t *p = dup_exact(s->bytes, s->len);
			long r;

			p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			r = reencode(s->kind, s->op, p, s->len, buf_b, BUF_CAP);
			total++;
			if (r >= 0) {
				accepted++;
				if (r != (long)s->len || memcmp(buf_b, p, s->len) != 0)
					T_FAIL("%s bit %zu: decoded but not canonical",
					       wire_dp_op_name(s->op), bit);
			}
			free(p);
		}
	}
	/* value fields flip freely; length and reserved fields must not */
	T_ASSERT(accepted > 0 && accepted < total);

	/* and the header */
	{
		struct wire_dp_hdr h = mk_hdr(WIRE_DP_T_REQ, WIRE_DP_OP_SEND, 56);
		struct wire_dp_hdr d;

		memset(buf_a, 0, sizeof(buf_a));
		T_ASSERT_EQ(wire_dp_hdr_encode(&h, buf_a, BUF_CAP), WIRE_DP_HDR_LEN);
		for (size_t bit = 0; bit < WIRE_DP_HDR_LEN * 8; bit++) {
			uint8_t *p = dup_exact(buf_a, WIRE_DP_HDR_LEN + 56);

			p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (wire_dp_hdr_decode(p, WIRE_DP_HDR_LEN + 56, &d) == 0) {
				T_ASSERT_EQ(wire_dp_hdr_encode(&d, buf_b, BUF_CAP),
					    WIRE_DP_HDR_LEN);
				T_ASSERT_MEMEQ(buf_b, p, WIRE_DP_HDR_LEN);
			}
			free(p);
		}
	}
}

/* Deterministic garbage through every decoder: nothing may crash or overread. */
static void
test_garbage(void)
{
	uint64_t x = 0x9E3779B97F4A7C15ull;

	for (int iter = 0; iter < 20000; iter++) {
		size_t len;
		uint8_t *p;
		struct wire_dp_hdr h;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		len = (size_t)(x % 200);
		p = malloc(len != 0 ? len : 1);
		T_ASSERT(p != NULL);
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* mostly small bytes, so length fields often land in range */
			p[i] = (uint8_t)((x & 3) ? (x >> 8) % 12 : x >> 8);
		}
		if (wire_dp_hdr_decode(p, len, &h) == 0) {
			T_ASSERT_EQ(wire_dp_hdr_encode(&h, buf_b, BUF_CAP), WIRE_DP_HDR_LEN);
			T_ASSERT_MEMEQ(buf_b, p, WIRE_DP_HDR_LEN);
		}
		for (int kind = K_REQ; kind <= K_RESP; kind++) {
			for (uint16_t op = 1; op <= WIRE_DP_OP_MAX; op++) {
				long r = reencode(kind, op, p, len, buf_b, BUF_CAP);

				if (r >= 0) {
					T_ASSERT_EQ(r, (long)len);
					T_ASSERT_MEMEQ(buf_b, p, len);
				}
			}
		}
		free(p);
	}
}

/* ---- committed vectors (tests/vectors/dp/README.md) ---- */

static uint8_t *
read_vector(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;

	if (f == NULL)
		T_FAIL("cannot open %s", path);
	T_ASSERT(fseek(f, 0, SEEK_END) == 0);
	n = ftell(f);
	T_ASSERT(n > 0 && fseek(f, 0, SEEK_SET) == 0);
	p = malloc((size_t)n);
	T_ASSERT(p != NULL);
	T_ASSERT(fread(p, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* Decode the header of vector @v and check the session fields; Return: the payload. */
static const uint8_t *
vector_hdr(const uint8_t *v, size_t len, uint8_t type, uint16_t op, struct wire_dp_hdr *h)
{
	T_ASSERT_EQ(wire_dp_hdr_decode(v, len, h), 0);
	T_ASSERT_EQ(h->type, type);
	T_ASSERT_EQ(h->op, op);
	T_ASSERT_EQ(h->flags, 0);
	T_ASSERT_EQ(h->pkt_idx, 0);
	T_ASSERT_EQ(h->pkt_cnt, 1);
	T_ASSERT_EQ(h->credit, 0);
	T_ASSERT_EQ(h->msg_len, len - WIRE_DP_HDR_LEN);
	T_ASSERT_EQ(h->payload_len, len - WIRE_DP_HDR_LEN);
	if (op != WIRE_DP_OP_CONNECT) {
		T_ASSERT_EQ_U64(h->token, TOKEN);
		T_ASSERT_EQ(h->session_id, SESSION);
	}
	/* the header re-encodes byte for byte */
	T_ASSERT_EQ(wire_dp_hdr_encode(h, buf_a, BUF_CAP), WIRE_DP_HDR_LEN);
	T_ASSERT_MEMEQ(buf_a, v, WIRE_DP_HDR_LEN);
	return v + WIRE_DP_HDR_LEN;
}

static void
test_vectors(void)
{
	struct wire_dp_hdr h;
	const uint8_t *m;
	uint8_t *v;
	size_t len;
	size_t ml;

	/* connect_req.bin */
	v = read_vector(SP_VECTORS_DIR "/dp/connect_req.bin", &len);
	T_ASSERT_EQ(len, 88);
	m = vector_hdr(v, len, WIRE_DP_T_REQ, WIRE_DP_OP_CONNECT, &h);
	T_ASSERT_EQ_U64(h.token, 0);
	T_ASSERT_EQ(h.session_id, 0);
	T_ASSERT_EQ(h.slot, 0);
	T_ASSERT_EQ(h.seq, 0);
	ml = h.msg_len;
	{
		struct wire_dp_connect_req r;

		T_ASSERT_EQ(wire_dp_connect_req_decode(m, ml, &r), 0);
		T_ASSERT_EQ_U64(r.nonce, 0x0123456789ABCDEFull);
		T_ASSERT_EQ(r.max_msg, WIRE_DP_MSG_MAX_DEFAULT);
		T_ASSERT_EQ(r.mtu, 1500);
		T_ASSERT_EQ(r.slots, 8);
		assert_str(r.client_id, r.client_id_len, "10.0.0.9@bench-1");
	}
	assert_canonical(K_REQ, WIRE_DP_OP_CONNECT, m, ml);
	free(v);

	/* send_req.bin */
	v = read_vector(SP_VECTORS_DIR "/dp/send_req.bin", &len);
	T_ASSERT_EQ(len, 104);
	m = vector_hdr(v, len, WIRE_DP_T_REQ, WIRE_DP_OP_SEND, &h);
	T_ASSERT_EQ(h.slot, 0);
	T_ASSERT_EQ(h.seq, 1);
	ml = h.msg_len;
	{
		struct wire_dp_send_req r;

		T_ASSERT_EQ(wire_dp_send_req_decode(WIRE_DP_OP_SEND, m, ml, &r), 0);
		T_ASSERT_EQ(r.born_ts, 1700000000123);
		T_ASSERT_EQ(r.queue_id, 3);
		T_ASSERT_EQ(r.flag, 0);
		T_ASSERT_EQ(r.sysflag, 0);
		T_ASSERT_EQ(r.reconsume_times, 0);
		assert_str(r.topic, r.topic_len, "TopicTest");
		assert_str(r.props, r.props_len, "TAGS\001TagA\002");
		assert_str(r.body, r.body_len, "hello");
	}
	assert_canonical(K_REQ, WIRE_DP_OP_SEND, m, ml);
	free(v);

	/* send_resp.bin */
	v = read_vector(SP_VECTORS_DIR "/dp/send_resp.bin", &len);
	T_ASSERT_EQ(len, 112);
	m = vector_hdr(v, len, WIRE_DP_T_RESP, WIRE_DP_OP_SEND, &h);
	T_ASSERT_EQ(h.slot, 0);
	T_ASSERT_EQ(h.seq, 1);
	ml = h.msg_len;
	{
		struct wire_dp_send_resp r;

		T_ASSERT_EQ(wire_dp_send_resp_decode(WIRE_DP_OP_SEND, m, ml, &r), 0);
		T_ASSERT_EQ(r.head.status, WIRE_DP_ST_SUCCESS);
		T_ASSERT_EQ(r.head.redirect_core, 0);
		T_ASSERT_EQ(r.head.redirect_port, 0);
		T_ASSERT_EQ_U64(r.head.ts_recv_ns, 1000000000);
		T_ASSERT_EQ_U64(r.head.ts_handled_ns, 1000002500);
		T_ASSERT_EQ_U64(r.head.ts_durable_ns, 0);
		T_ASSERT_EQ_U64(r.head.ts_sent_ns, 1000004000);
		T_ASSERT_EQ(r.phys_offset, 8192);
		T_ASSERT_EQ(r.queue_offset, 42);
		T_ASSERT_EQ(r.queue_id, 3);
		T_ASSERT_EQ(r.count, 1);
	}
	assert_canonical(K_RESP, WIRE_DP_OP_SEND, m, ml);
	free(v);

	/* pull_req.bin */
	v = read_vector(SP_VECTORS_DIR "/dp/pull_req.bin", &len);
	T_ASSERT_EQ(len, 118);
	m = vector_hdr(v, len, WIRE_DP_T_REQ, WIRE_DP_OP_PULL, &h);
	T_ASSERT_EQ(h.slot, 1);
	T_ASSERT_EQ(h.seq, 5);
	ml = h.msg_len;
	{
		struct wire_dp_pull_req r;

		T_ASSERT_EQ(wire_dp_pull_req_decode(m, ml, &r), 0);
		T_ASSERT_EQ(r.queue_offset, 42);
		T_ASSERT_EQ(r.commit_offset, 40);
		T_ASSERT_EQ(r.queue_id, 3);
		T_ASSERT_EQ(r.max_msgs, 32);
		T_ASSERT_EQ(r.max_bytes, 262144);
		T_ASSERT_EQ(r.sysflag, 7);
		T_ASSERT_EQ(r.suspend_timeout_ms, 15000);
		T_ASSERT_EQ(r.expr_type, WIRE_DP_EXPR_TAG);
		T_ASSERT_EQ(r.tag_count, 1);
		T_ASSERT_EQ(wire_dp_pull_req_tag(&r, 0), 2598919); /* "TagA".hashCode() */
		assert_str(r.group, r.group_len, "GID_X");
		assert_str(r.topic, r.topic_len, "TopicTest");
		assert_str(r.expr, r.expr_len, "TagA");
	}
	assert_canonical(K_REQ, WIRE_DP_OP_PULL, m, ml);
	free(v);

	/* pull_resp.bin: one stored record (big-endian, RocketMQ §5.1) */
	v = read_vector(SP_VECTORS_DIR "/dp/pull_resp.bin", &len);
	T_ASSERT_EQ(len, 265);
	m = vector_hdr(v, len, WIRE_DP_T_RESP, WIRE_DP_OP_PULL, &h);
	T_ASSERT_EQ(h.slot, 1);
	T_ASSERT_EQ(h.seq, 5);
	ml = h.msg_len;
	{
		static const uint8_t rec_head[] = {0x00, 0x00, 0x00, 0x89, 0xDA, 0xA3,
						   0x20, 0xA7, 0x36, 0x10, 0xA6, 0x86};
		struct wire_dp_pull_resp r;

		T_ASSERT_EQ(wire_dp_pull_resp_decode(m, ml, &r), 0);
		T_ASSERT_EQ(r.head.status, WIRE_DP_ST_SUCCESS);
		T_ASSERT_EQ_U64(r.head.ts_recv_ns, 2000000000);
		T_ASSERT_EQ_U64(r.head.ts_handled_ns, 2000001200);
		T_ASSERT_EQ_U64(r.head.ts_durable_ns, 0);
		T_ASSERT_EQ_U64(r.head.ts_sent_ns, 2000003000);
		T_ASSERT_EQ(r.next_begin_offset, 43);
		T_ASSERT_EQ(r.min_offset, 0);
		T_ASSERT_EQ(r.max_offset, 43);
		T_ASSERT_EQ(r.rec_count, 1);
		T_ASSERT_EQ(r.suggest_broker_id, 0);
		T_ASSERT_EQ(r.records_len, 137);
		/* TOTALSIZE 137, MAGICCODE, BODYCRC = crc32("hello") & 0x7fffffff */
		T_ASSERT_MEMEQ(r.records, rec_head, sizeof(rec_head));
		assert_str(r.records + 137 - 32, 32, "TAGS\001TagA\002CLUSTER\001DefaultCluster");
	}
	assert_canonical(K_RESP, WIRE_DP_OP_PULL, m, ml);
	free(v);
}

static void
test_repl(void)
{
	static const uint8_t data[8] = {0, 0, 0, 8, 0xcb, 0xd4, 0x3e, 0x11};
	struct wire_dp_repl_req q = {.offset = 77,
				     .seg_size = 65536,
				     .max_bytes = 4096,
				     .shard = 3,
				     .cores = 4,
				     .epoch = 9,
				     .name = "b",
				     .name_len = 1};
	struct wire_dp_repl_resp r = {.head = {.status = WIRE_DP_ST_SUCCESS},
				      .master_end = 85,
				      .data_offset = 77,
				      .seg_size = 65536,
				      .cores = 4,
				      .epoch = 7,
				      .data = data,
				      .data_len = 8};
	struct wire_dp_repl_req q2;
	struct wire_dp_repl_resp r2;
	long n;

	n = wire_dp_repl_req_encode(&q, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, WIRE_DP_REPL_REQ_FIXED + 1);
	T_ASSERT_EQ(wire_dp_repl_req_decode(buf_a, (size_t)n, &q2), 0);
	T_ASSERT_EQ_U64(q2.offset, 77);
	T_ASSERT_EQ(q2.shard, 3);
	T_ASSERT_EQ(q2.cores, 4);
	T_ASSERT_EQ(q2.name_len, 1);
	T_ASSERT_EQ_U64(q2.epoch, 9);
	T_ASSERT_MEMEQ(q2.name, "b", 1);
	T_ASSERT_EQ(q2.flags, 0);
	T_ASSERT_EQ(wire_dp_repl_req_decode(buf_a, (size_t)n - 1, &q2), -EBADMSG);
	buf_a[54] = 1; /* RECOVER */
	T_ASSERT_EQ(wire_dp_repl_req_decode(buf_a, (size_t)n, &q2), 0);
	T_ASSERT_EQ(q2.flags, WIRE_DP_REPL_RQ_F_RECOVER);
	buf_a[54] = 2; /* an unknown flag */
	T_ASSERT_EQ(wire_dp_repl_req_decode(buf_a, (size_t)n, &q2), -EBADMSG);
	q.flags = 2;
	T_ASSERT_EQ(wire_dp_repl_req_encode(&q, buf_a, BUF_CAP), -EINVAL);
	q.flags = 0;
	q.name_len = 0;
	T_ASSERT_EQ(wire_dp_repl_req_encode(&q, buf_a, BUF_CAP), -EINVAL);
	q.name_len = 1;
	q.max_bytes = 0;
	T_ASSERT_EQ(wire_dp_repl_req_encode(&q, buf_a, BUF_CAP), -EINVAL);

	n = wire_dp_repl_resp_encode(&r, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, WIRE_DP_RESP_HEAD_LEN + WIRE_DP_REPL_RESP_FIXED + 8);
	T_ASSERT_EQ(wire_dp_repl_resp_decode(buf_a, (size_t)n, &r2), 0);
	T_ASSERT_EQ_U64(r2.master_end, 85);
	T_ASSERT_EQ_U64(r2.epoch, 7);
	T_ASSERT_EQ(r2.data_len, 8);
	T_ASSERT_MEMEQ(r2.data, data, 8);
	T_ASSERT_EQ(wire_dp_repl_resp_decode(buf_a, (size_t)n - 1, &r2), -EBADMSG);
	/* data on an error status is refused both ways */
	r.head.status = WIRE_DP_ST_SYSTEM_BUSY;
	T_ASSERT_EQ(wire_dp_repl_resp_encode(&r, buf_a, BUF_CAP), -EINVAL);
	r.data_len = 0;
	r.data = NULL;
	n = wire_dp_repl_resp_encode(&r, buf_a, BUF_CAP);
	T_ASSERT_EQ(n, WIRE_DP_RESP_HEAD_LEN + WIRE_DP_REPL_RESP_FIXED);
	T_ASSERT_EQ(wire_dp_repl_resp_decode(buf_a, (size_t)n, &r2), 0);
	T_ASSERT_EQ(r2.head.status, WIRE_DP_ST_SYSTEM_BUSY);
}

T_MAIN(T_CASE(test_hdr_roundtrip), T_CASE(test_hdr_errors), T_CASE(test_geometry),
       T_CASE(test_send_req), T_CASE(test_send_resp), T_CASE(test_pull), T_CASE(test_offset_ops),
       T_CASE(test_send_back), T_CASE(test_connect), T_CASE(test_disconnect_ping),
       T_CASE(test_resp_head_and_errors), T_CASE(test_reset), T_CASE(test_names),
       T_CASE(test_samples_roundtrip), T_CASE(test_truncation), T_CASE(test_bitflips),
       T_CASE(test_garbage), T_CASE(test_vectors), T_CASE(test_repl))
