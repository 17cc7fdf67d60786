// SPDX-License-Identifier: Apache-2.0
/*
 * dp.c - wire codec B: dataplane packets and message bodies.
 *
 * The dataplane's own format (docs/protocol.md), spoken only between sprocket
 * ends, so it is little-endian and naturally aligned: on the CPUs we run on
 * every field is a plain load. Every datagram is one packet, a 48-byte header
 * and a payload; payloads concatenate into a message whose body is defined per
 * op. The RocketMQ formats carried inside (PULL records, SEND_BATCH bodies)
 * are opaque here and stay big-endian; codec A owns them.
 *
 * DESIGN
 * Every input reaches these decoders straight off the wire, from anyone, so
 * each decoder first proves the lengths it is about to use add up exactly to
 * the buffer (in 64-bit arithmetic, so no sum of u16/u32 fields can wrap) and
 * only then reads. Bodies are "fixed part, then strings back to back", so a
 * decode is: check len >= fixed, read the lengths, check the sum == len, hand
 * out pointers. There are no trailing bytes, no optional fields and no
 * non-zero reserved bytes: anything else is -EBADMSG, which keeps the format
 * free of "ignored" space that two versions could read differently.
 *
 * Encoders run the same checks on the struct before writing, so every encoder
 * output decodes back to the same fields; a test round-trips every op to pin
 * that. The header checks return -EPROTO for what a newer or foreign sender
 * would produce (magic, version, type, op, flag) and -EBADMSG for what no
 * correct sender produces, so the dataplane can count the two apart.
 *
 * Pure: no allocation, no I/O, no logging, no global state beyond constant
 * tables.
 *
 * Size: over 1,000 lines because it is one short encode/decode pair per op over shared framing helpers, fuzzed as one
 * decoder (tests/fuzz/fuzz_dp.c); split by op family, the helpers would have to be
 * exported.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/compiler.h"
#include "common/hmac.h"
#include "wire/dp.h"

#include "bytes_priv.h"
#include "dp_priv.h"

STATIC_ASSERT(WIRE_DP_HDR_LEN == 48, "header size is part of the protocol");
STATIC_ASSERT(WIRE_DP_RESP_HEAD_LEN % 8 == 0, "op parts start 8-aligned");
STATIC_ASSERT(WIRE_DP_MSG_LIMIT <= UINT32_MAX, "msg_len is a u32");

/* Header field offsets (docs/protocol.md §2). */
enum {
	H_MAGIC = 0,
	H_VERSION = 4,
	H_TYPE = 5,
	H_FLAGS = 6,
	H_TOKEN = 8,
	H_SESSION = 16,
	H_SLOT = 20,
	H_OP = 22,
	H_SEQ = 24,
	H_PKT_IDX = 28,
	H_PKT_CNT = 32,
	H_CREDIT = 36,
	H_MSG_LEN = 40,
	H_PAYLOAD_LEN = 44,
};

static const char *const op_names[] = {
	[WIRE_DP_OP_NONE] = "NONE",
	[WIRE_DP_OP_SEND] = "SEND",
	[WIRE_DP_OP_SEND_BATCH] = "SEND_BATCH",
	[WIRE_DP_OP_PULL] = "PULL",
	[WIRE_DP_OP_QUERY_OFFSET] = "QUERY_OFFSET",
	[WIRE_DP_OP_UPDATE_OFFSET] = "UPDATE_OFFSET",
	[WIRE_DP_OP_GET_MIN_OFFSET] = "GET_MIN_OFFSET",
	[WIRE_DP_OP_GET_MAX_OFFSET] = "GET_MAX_OFFSET",
	[WIRE_DP_OP_SEARCH_OFFSET] = "SEARCH_OFFSET",
	[WIRE_DP_OP_SEND_BACK] = "SEND_BACK",
	[WIRE_DP_OP_CONNECT] = "CONNECT",
	[WIRE_DP_OP_DISCONNECT] = "DISCONNECT",
	[WIRE_DP_OP_PING] = "PING",
	[WIRE_DP_OP_REPL] = "REPL",
};

bool
wire_dp_op_is_valid(uint16_t op)
{
	return op >= WIRE_DP_OP_SEND && op <= WIRE_DP_OP_MAX;
}

const char *
wire_dp_op_name(uint16_t op)
{
	return op < ARRAY_SIZE(op_names) ? op_names[op] : "?";
}

long
wire_dp_resp_fixed_len(uint16_t op)
{
	switch (op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH:
		return WIRE_DP_SEND_RESP_FIXED;
	case WIRE_DP_OP_PULL:
		return WIRE_DP_PULL_RESP_FIXED;
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET:
		return WIRE_DP_OFFSET_RESP_FIXED;
	case WIRE_DP_OP_SEND_BACK:
	case WIRE_DP_OP_DISCONNECT:
		return 0;
	case WIRE_DP_OP_CONNECT:
		return WIRE_DP_CONNECT_RESP_FIXED;
	case WIRE_DP_OP_PING:
		return WIRE_DP_PING_RESP_FIXED;
	case WIRE_DP_OP_REPL:
		return WIRE_DP_REPL_RESP_FIXED;
	default:
		return -EINVAL;
	}
}

bool
wire_dp_status_is_stored(int32_t status)
{
	return status == WIRE_DP_ST_SUCCESS || status == WIRE_DP_ST_FLUSH_DISK_TIMEOUT ||
	       status == WIRE_DP_ST_SLAVE_NOT_AVAILABLE || status == WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT;
}

/* ---- packet header ---- */

/*
 * The rules of docs/protocol.md §2.2 on a header struct, shared by encode and
 * decode. -EPROTO checks come first so a foreign packet is classified as such
 * even when its lengths are also nonsense.
 */
static int
hdr_check(const struct wire_dp_hdr *h)
{
	bool connect = h->op == WIRE_DP_OP_CONNECT;

	if (h->type < WIRE_DP_T_REQ || h->type > WIRE_DP_T_RESET)
		return -EPROTO;
	if (h->flags & ~WIRE_DP_F_ALL)
		return -EPROTO;
	if (!wire_dp_op_is_valid(h->op) &&
	    !(h->type == WIRE_DP_T_RESET && h->op == WIRE_DP_OP_NONE))
		return -EPROTO;

	if (h->msg_len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	/* Every packet carries at least one byte, except the one of an empty message. */
	if (h->pkt_cnt == 0 || (h->msg_len == 0 && h->pkt_cnt != 1) ||
	    (h->msg_len != 0 && h->pkt_cnt > h->msg_len))
		return -EBADMSG;

	switch (h->type) {
	case WIRE_DP_T_REQ:
	case WIRE_DP_T_RESP:
		if (h->pkt_idx >= h->pkt_cnt || h->credit != 0 || h->payload_len > h->msg_len)
			return -EBADMSG;
		if (h->pkt_cnt == 1) {
			if (h->payload_len != h->msg_len)
				return -EBADMSG;
		} else if (h->payload_len == 0) {
			return -EBADMSG;
		} else if (h->pkt_idx < h->pkt_cnt - 1) {
			/* Non-last packets carry max_payload: (cnt-1)*P < msg_len <= cnt*P. */
			uint64_t p = h->payload_len;

			if ((uint64_t)(h->pkt_cnt - 1) * p >= h->msg_len ||
			    (uint64_t)h->pkt_cnt * p < h->msg_len)
				return -EBADMSG;
		}
		break;
	case WIRE_DP_T_CREDIT:
		if (h->payload_len != 0 || h->pkt_idx > h->pkt_cnt || connect)
			return -EBADMSG;
		break;
	default: /* RESET */
		if (h->payload_len != WIRE_DP_RESET_LEN || h->msg_len != WIRE_DP_RESET_LEN ||
		    h->pkt_cnt != 1 || h->pkt_idx != 0 || h->credit != 0)
			return -EBADMSG;
		break;
	}

	if (connect && (h->type == WIRE_DP_T_REQ || h->type == WIRE_DP_T_RESP)) {
		/* Single packet: max_payload is unknown before the response. */
		if (h->pkt_cnt != 1 || h->slot != 0 || h->seq != 0)
			return -EBADMSG;
		if (h->type == WIRE_DP_T_REQ && (h->session_id != 0 || h->token != 0))
			return -EBADMSG;
		return 0;
	}
	if (h->session_id == 0)
		return -EBADMSG;
	if (h->type != WIRE_DP_T_RESET && h->seq == 0)
		return -EBADMSG;
	return 0;
}

long
wire_dp_hdr_encode(const struct wire_dp_hdr *h, uint8_t *buf, size_t cap)
{
	if (hdr_check(h) != 0)
		return -EINVAL;
	if (cap < WIRE_DP_HDR_LEN)
		return -ENOBUFS;
	wire_st_le32(buf + H_MAGIC, WIRE_DP_MAGIC);
	buf[H_VERSION] = WIRE_DP_VERSION;
	buf[H_TYPE] = h->type;
	wire_st_le16(buf + H_FLAGS, h->flags);
	wire_st_le64(buf + H_TOKEN, h->token);
	wire_st_le32(buf + H_SESSION, h->session_id);
	wire_st_le16(buf + H_SLOT, h->slot);
	wire_st_le16(buf + H_OP, h->op);
	wire_st_le32(buf + H_SEQ, h->seq);
	wire_st_le32(buf + H_PKT_IDX, h->pkt_idx);
	wire_st_le32(buf + H_PKT_CNT, h->pkt_cnt);
	wire_st_le32(buf + H_CREDIT, h->credit);
	wire_st_le32(buf + H_MSG_LEN, h->msg_len);
	wire_st_le32(buf + H_PAYLOAD_LEN, h->payload_len);
	return WIRE_DP_HDR_LEN;
}

int
wire_dp_hdr_decode(const uint8_t *buf, size_t len, struct wire_dp_hdr *h)
{
	int err;

	if (len < WIRE_DP_HDR_LEN)
		return -EBADMSG;
	if (wire_ld_le32(buf + H_MAGIC) != WIRE_DP_MAGIC || buf[H_VERSION] != WIRE_DP_VERSION)
		return -EPROTO;
	h->type = buf[H_TYPE];
	h->flags = wire_ld_le16(buf + H_FLAGS);
	h->token = wire_ld_le64(buf + H_TOKEN);
	h->session_id = wire_ld_le32(buf + H_SESSION);
	h->slot = wire_ld_le16(buf + H_SLOT);
	h->op = wire_ld_le16(buf + H_OP);
	h->seq = wire_ld_le32(buf + H_SEQ);
	h->pkt_idx = wire_ld_le32(buf + H_PKT_IDX);
	h->pkt_cnt = wire_ld_le32(buf + H_PKT_CNT);
	h->credit = wire_ld_le32(buf + H_CREDIT);
	h->msg_len = wire_ld_le32(buf + H_MSG_LEN);
	h->payload_len = wire_ld_le32(buf + H_PAYLOAD_LEN);
	err = hdr_check(h);
	if (err != 0)
		return err;
	if (h->payload_len != len - WIRE_DP_HDR_LEN)
		return -EBADMSG;
	return 0;
}

uint32_t
wire_dp_pkt_count(uint32_t msg_len, uint32_t max_payload)
{
	if (max_payload == 0)
		return 0;
	/* The common case, without a 64-bit division on every packet's path. */
	if (msg_len <= max_payload)
		return 1;
	return (uint32_t)(((uint64_t)msg_len + max_payload - 1) / max_payload);
}

int
wire_dp_hdr_check_geometry(const struct wire_dp_hdr *h, uint32_t max_payload)
{
	uint32_t cnt;
	uint64_t want;

	if (max_payload == 0)
		return -EINVAL;
	if (h->type == WIRE_DP_T_RESET)
		return 0;
	cnt = wire_dp_pkt_count(h->msg_len, max_payload);
	if (h->pkt_cnt != cnt)
		return -EBADMSG;
	if (h->type == WIRE_DP_T_CREDIT)
		return 0;
	if (h->pkt_idx >= cnt)
		return -EBADMSG;
	if (h->pkt_idx < cnt - 1)
		want = max_payload;
	else
		want = h->msg_len - (uint64_t)(cnt - 1) * max_payload;
	return h->payload_len == want ? 0 : -EBADMSG;
}

/* ---- helpers for bodies ---- */

/* A string field: within [min, max] bytes, and a pointer whenever non-empty. */
static bool
str_ok(const void *p, size_t len, size_t min, size_t max)
{
	return len >= min && len <= max && (len == 0 || p != NULL);
}

static uint8_t *
put_bytes(uint8_t *dst, const void *src, size_t n)
{
	if (n != 0)
		memcpy(dst, src, n);
	return dst + n;
}

/* Pointer to @n bytes at *@pos, advancing it; NULL for an empty field. */
static const void *
take(const uint8_t *msg, size_t *pos, size_t n)
{
	const uint8_t *p = n != 0 ? msg + *pos : NULL;

	*pos += n;
	return p;
}

static bool
reserved_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* ---- response common part ---- */

static bool
head_ok(const struct wire_dp_resp_head *h)
{
	if (h->status == WIRE_DP_ST_REDIRECT)
		return h->redirect_port != 0;
	return h->redirect_core == 0 && h->redirect_port == 0;
}

static void
head_put(uint8_t *p, const struct wire_dp_resp_head *h)
{
	wire_st_le32(p + 0, (uint32_t)h->status);
	wire_st_le16(p + 4, h->redirect_core);
	wire_st_le16(p + 6, h->redirect_port);
	wire_st_le64(p + 8, h->ts_recv_ns);
	wire_st_le64(p + 16, h->ts_handled_ns);
	wire_st_le64(p + 24, h->ts_durable_ns);
	wire_st_le64(p + 32, h->ts_sent_ns);
}

int
wire_dp_resp_head_decode(const uint8_t *msg, size_t len, struct wire_dp_resp_head *h)
{
	if (len < WIRE_DP_RESP_HEAD_LEN)
		return -EBADMSG;
	h->status = (int32_t)wire_ld_le32(msg + 0);
	h->redirect_core = wire_ld_le16(msg + 4);
	h->redirect_port = wire_ld_le16(msg + 6);
	h->ts_recv_ns = wire_ld_le64(msg + 8);
	h->ts_handled_ns = wire_ld_le64(msg + 16);
	h->ts_durable_ns = wire_ld_le64(msg + 24);
	h->ts_sent_ns = wire_ld_le64(msg + 32);
	return head_ok(h) ? 0 : -EBADMSG;
}

int
wire_dp_resp_stamp_sent(uint8_t *msg, size_t len, uint64_t ts_ns)
{
	if (len < WIRE_DP_RESP_HEAD_LEN)
		return -EBADMSG;
	wire_st_le64(msg + 32, ts_ns);
	return 0;
}

/*
 * Start a response of @total bytes: validate the head and the size, write the
 * head. Return: 0, -EINVAL, -ENOBUFS.
 */
int
wire__dp_resp_begin(const struct wire_dp_resp_head *h, uint64_t total, uint8_t *buf, size_t cap)
{
	if (!head_ok(h) || total > WIRE_DP_MSG_LIMIT)
		return -EINVAL;
	if (cap < total)
		return -ENOBUFS;
	head_put(buf, h);
	return 0;
}

/* Decode the head of a response that must be exactly @want bytes (at least, if @at_least). */
int
wire__dp_resp_head_take(const uint8_t *msg, size_t len, size_t want, bool at_least,
			struct wire_dp_resp_head *h)
{
	if (len > WIRE_DP_MSG_LIMIT || len < want || (!at_least && len != want))
		return -EBADMSG;
	return wire_dp_resp_head_decode(msg, len, h);
}

long
wire_dp_resp_error_encode(uint16_t op, const struct wire_dp_resp_head *h, uint8_t *buf, size_t cap)
{
	long fixed = wire_dp_resp_fixed_len(op);
	size_t total;
	int err;

	if (fixed < 0 || op == WIRE_DP_OP_CONNECT || h->status == WIRE_DP_ST_SUCCESS)
		return -EINVAL;
	total = WIRE_DP_RESP_HEAD_LEN + (size_t)fixed;
	err = wire__dp_resp_begin(h, total, buf, cap);
	if (err != 0)
		return err;
	memset(buf + WIRE_DP_RESP_HEAD_LEN, 0, (size_t)fixed);
	return (long)total;
}

static bool
op_is_bare(uint16_t op)
{
	return op == WIRE_DP_OP_SEND_BACK || op == WIRE_DP_OP_DISCONNECT;
}

long
wire_dp_bare_resp_encode(uint16_t op, const struct wire_dp_resp_head *h, uint8_t *buf, size_t cap)
{
	int err;

	if (!op_is_bare(op))
		return -EINVAL;
	err = wire__dp_resp_begin(h, WIRE_DP_RESP_HEAD_LEN, buf, cap);
	return err != 0 ? err : WIRE_DP_RESP_HEAD_LEN;
}

int
wire_dp_bare_resp_decode(uint16_t op, const uint8_t *msg, size_t len, struct wire_dp_resp_head *h)
{
	if (!op_is_bare(op))
		return -EINVAL;
	return wire__dp_resp_head_take(msg, len, WIRE_DP_RESP_HEAD_LEN, false, h);
}

/* ---- RESET ---- */

long
wire_dp_reset_encode(const struct wire_dp_reset *r, uint8_t *buf, size_t cap)
{
	if (r->reason == 0)
		return -EINVAL;
	if (cap < WIRE_DP_RESET_LEN)
		return -ENOBUFS;
	wire_st_le32(buf + 0, r->reason);
	wire_st_le32(buf + 4, r->detail);
	return WIRE_DP_RESET_LEN;
}

int
wire_dp_reset_decode(const uint8_t *buf, size_t len, struct wire_dp_reset *r)
{
	if (len != WIRE_DP_RESET_LEN)
		return -EBADMSG;
	r->reason = wire_ld_le32(buf + 0);
	r->detail = wire_ld_le32(buf + 4);
	return r->reason != 0 ? 0 : -EBADMSG;
}

/* ---- SEND, SEND_BATCH ---- */

static bool
op_is_send(uint16_t op)
{
	return op == WIRE_DP_OP_SEND || op == WIRE_DP_OP_SEND_BATCH;
}

static bool
send_req_ok(uint16_t op, const struct wire_dp_send_req *r)
{
	if (!str_ok(r->topic, r->topic_len, 1, WIRE_DP_TOPIC_MAX) ||
	    !str_ok(r->props, r->props_len, 0, WIRE_DP_PROPS_MAX) ||
	    !str_ok(r->body, r->body_len, 0, UINT32_MAX))
		return false;
	if (op == WIRE_DP_OP_SEND_BATCH && (r->flag != 0 || r->reconsume_times != 0))
		return false;
	return (uint64_t)WIRE_DP_SEND_REQ_FIXED + r->topic_len + r->props_len + r->body_len <=
	       WIRE_DP_MSG_LIMIT;
}

long
wire_dp_send_req_encode(uint16_t op, const struct wire_dp_send_req *r, uint8_t *buf, size_t cap)
{
	size_t total;
	uint8_t *p;

	if (!op_is_send(op) || !send_req_ok(op, r))
		return -EINVAL;
	total = (size_t)WIRE_DP_SEND_REQ_FIXED + r->topic_len + r->props_len + r->body_len;
	if (cap < total)
		return -ENOBUFS;
	wire_st_le64(buf + 0, (uint64_t)r->born_ts);
	wire_st_le32(buf + 8, (uint32_t)r->queue_id);
	wire_st_le32(buf + 12, (uint32_t)r->flag);
	wire_st_le32(buf + 16, (uint32_t)r->sysflag);
	wire_st_le32(buf + 20, (uint32_t)r->reconsume_times);
	wire_st_le16(buf + 24, r->topic_len);
	wire_st_le16(buf + 26, r->props_len);
	wire_st_le32(buf + 28, r->body_len);
	p = buf + WIRE_DP_SEND_REQ_FIXED;
	p = put_bytes(p, r->topic, r->topic_len);
	p = put_bytes(p, r->props, r->props_len);
	put_bytes(p, r->body, r->body_len);
	return (long)total;
}

int
wire_dp_send_req_decode(uint16_t op, const uint8_t *msg, size_t len, struct wire_dp_send_req *r)
{
	size_t pos = WIRE_DP_SEND_REQ_FIXED;

	if (!op_is_send(op))
		return -EINVAL;
	if (len < WIRE_DP_SEND_REQ_FIXED || len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	r->born_ts = (int64_t)wire_ld_le64(msg + 0);
	r->queue_id = (int32_t)wire_ld_le32(msg + 8);
	r->flag = (int32_t)wire_ld_le32(msg + 12);
	r->sysflag = (int32_t)wire_ld_le32(msg + 16);
	r->reconsume_times = (int32_t)wire_ld_le32(msg + 20);
	r->topic_len = wire_ld_le16(msg + 24);
	r->props_len = wire_ld_le16(msg + 26);
	r->body_len = wire_ld_le32(msg + 28);
	if ((uint64_t)pos + r->topic_len + r->props_len + r->body_len != len)
		return -EBADMSG;
	r->topic = take(msg, &pos, r->topic_len);
	r->props = take(msg, &pos, r->props_len);
	r->body = take(msg, &pos, r->body_len);
	return send_req_ok(op, r) ? 0 : -EBADMSG;
}

static bool
send_resp_ok(uint16_t op, const struct wire_dp_send_resp *r)
{
	if (op == WIRE_DP_OP_SEND)
		return r->count <= 1;
	return r->count == 0 || r->phys_offsets != NULL;
}

long
wire_dp_send_resp_encode(uint16_t op, const struct wire_dp_send_resp *r, uint8_t *buf, size_t cap)
{
	uint64_t total = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_SEND_RESP_FIXED;
	uint8_t *p;
	int err;

	if (!op_is_send(op) || !send_resp_ok(op, r))
		return -EINVAL;
	if (op == WIRE_DP_OP_SEND_BATCH)
		total += (uint64_t)r->count * 8;
	err = wire__dp_resp_begin(&r->head, total, buf, cap);
	if (err != 0)
		return err;
	p = buf + WIRE_DP_RESP_HEAD_LEN;
	wire_st_le64(p + 0, (uint64_t)r->phys_offset);
	wire_st_le64(p + 8, (uint64_t)r->queue_offset);
	wire_st_le32(p + 16, (uint32_t)r->queue_id);
	wire_st_le32(p + 20, r->count);
	if (op == WIRE_DP_OP_SEND_BATCH)
		put_bytes(p + WIRE_DP_SEND_RESP_FIXED, r->phys_offsets, (size_t)r->count * 8);
	return (long)total;
}

int
wire_dp_send_resp_decode(uint16_t op, const uint8_t *msg, size_t len, struct wire_dp_send_resp *r)
{
	const size_t fixed = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_SEND_RESP_FIXED;
	const uint8_t *p;
	int err;

	if (!op_is_send(op))
		return -EINVAL;
	err = wire__dp_resp_head_take(msg, len, fixed, op == WIRE_DP_OP_SEND_BATCH, &r->head);
	if (err != 0)
		return err;
	p = msg + WIRE_DP_RESP_HEAD_LEN;
	r->phys_offset = (int64_t)wire_ld_le64(p + 0);
	r->queue_offset = (int64_t)wire_ld_le64(p + 8);
	r->queue_id = (int32_t)wire_ld_le32(p + 16);
	r->count = wire_ld_le32(p + 20);
	r->phys_offsets = NULL;
	if (op == WIRE_DP_OP_SEND)
		return r->count <= 1 ? 0 : -EBADMSG;
	if ((uint64_t)fixed + (uint64_t)r->count * 8 != len)
		return -EBADMSG;
	if (r->count != 0)
		r->phys_offsets = msg + fixed;
	return 0;
}

int64_t
wire_dp_send_resp_phys(const struct wire_dp_send_resp *r, uint32_t i)
{
	return (int64_t)wire_ld_le64(r->phys_offsets + (size_t)i * 8);
}

/* ---- PULL ---- */

static bool
pull_req_ok(const struct wire_dp_pull_req *r)
{
	return str_ok(r->group, r->group_len, 1, WIRE_DP_GROUP_MAX) &&
	       str_ok(r->topic, r->topic_len, 1, WIRE_DP_TOPIC_MAX) &&
	       str_ok(r->expr, r->expr_len, 0, WIRE_DP_EXPR_MAX) &&
	       str_ok(r->tag_hashes, r->tag_count, 0, WIRE_DP_TAGS_MAX) &&
	       (r->expr_type == WIRE_DP_EXPR_TAG || r->expr_type == WIRE_DP_EXPR_SQL92);
}

static size_t
pull_req_size(const struct wire_dp_pull_req *r)
{
	return (size_t)WIRE_DP_PULL_REQ_FIXED + (size_t)r->tag_count * 4 + r->group_len +
	       r->topic_len + r->expr_len;
}

long
wire_dp_pull_req_encode(const struct wire_dp_pull_req *r, uint8_t *buf, size_t cap)
{
	size_t total;
	uint8_t *p;

	if (!pull_req_ok(r))
		return -EINVAL;
	total = pull_req_size(r);
	if (cap < total)
		return -ENOBUFS;
	wire_st_le64(buf + 0, (uint64_t)r->queue_offset);
	wire_st_le64(buf + 8, (uint64_t)r->commit_offset);
	wire_st_le32(buf + 16, (uint32_t)r->queue_id);
	wire_st_le32(buf + 20, (uint32_t)r->max_msgs);
	wire_st_le32(buf + 24, r->max_bytes);
	wire_st_le32(buf + 28, r->sysflag);
	wire_st_le32(buf + 32, r->suspend_timeout_ms);
	wire_st_le16(buf + 36, r->group_len);
	wire_st_le16(buf + 38, r->topic_len);
	wire_st_le16(buf + 40, r->expr_len);
	wire_st_le16(buf + 42, r->tag_count);
	buf[44] = r->expr_type;
	memset(buf + 45, 0, 3);
	p = buf + WIRE_DP_PULL_REQ_FIXED;
	p = put_bytes(p, r->tag_hashes, (size_t)r->tag_count * 4);
	p = put_bytes(p, r->group, r->group_len);
	p = put_bytes(p, r->topic, r->topic_len);
	put_bytes(p, r->expr, r->expr_len);
	return (long)total;
}

int
wire_dp_pull_req_decode(const uint8_t *msg, size_t len, struct wire_dp_pull_req *r)
{
	size_t pos = WIRE_DP_PULL_REQ_FIXED;

	if (len < WIRE_DP_PULL_REQ_FIXED || len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	r->queue_offset = (int64_t)wire_ld_le64(msg + 0);
	r->commit_offset = (int64_t)wire_ld_le64(msg + 8);
	r->queue_id = (int32_t)wire_ld_le32(msg + 16);
	r->max_msgs = (int32_t)wire_ld_le32(msg + 20);
	r->max_bytes = wire_ld_le32(msg + 24);
	r->sysflag = wire_ld_le32(msg + 28);
	r->suspend_timeout_ms = wire_ld_le32(msg + 32);
	r->group_len = wire_ld_le16(msg + 36);
	r->topic_len = wire_ld_le16(msg + 38);
	r->expr_len = wire_ld_le16(msg + 40);
	r->tag_count = wire_ld_le16(msg + 42);
	r->expr_type = msg[44];
	if (!reserved_zero(msg + 45, 3) || pull_req_size(r) != len)
		return -EBADMSG;
	r->tag_hashes = take(msg, &pos, (size_t)r->tag_count * 4);
	r->group = take(msg, &pos, r->group_len);
	r->topic = take(msg, &pos, r->topic_len);
	r->expr = take(msg, &pos, r->expr_len);
	return pull_req_ok(r) ? 0 : -EBADMSG;
}

int32_t
wire_dp_pull_req_tag(const struct wire_dp_pull_req *r, uint16_t i)
{
	return (int32_t)wire_ld_le32(r->tag_hashes + (size_t)i * 4);
}

static bool
pull_resp_ok(const struct wire_dp_pull_resp *r)
{
	if ((r->rec_count == 0) != (r->records_len == 0))
		return false;
	return r->records_len == 0 || r->head.status == WIRE_DP_ST_SUCCESS;
}

long
wire_dp_pull_resp_encode(const struct wire_dp_pull_resp *r, uint8_t *buf, size_t cap)
{
	const size_t prefix = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PULL_RESP_FIXED;
	uint8_t *p;
	bool zero_copy = r->records == NULL;
	uint64_t total = (uint64_t)prefix + r->records_len;
	int err;

	if (!pull_resp_ok(r) || total > WIRE_DP_MSG_LIMIT)
		return -EINVAL;
	err = wire__dp_resp_begin(&r->head, zero_copy ? prefix : total, buf, cap);
	if (err != 0)
		return err;
	p = buf + WIRE_DP_RESP_HEAD_LEN;
	wire_st_le64(p + 0, (uint64_t)r->next_begin_offset);
	wire_st_le64(p + 8, (uint64_t)r->min_offset);
	wire_st_le64(p + 16, (uint64_t)r->max_offset);
	wire_st_le32(p + 24, r->rec_count);
	wire_st_le32(p + 28, r->records_len);
	wire_st_le32(p + 32, r->suggest_broker_id);
	wire_st_le32(p + 36, 0);
	if (zero_copy)
		return (long)prefix;
	put_bytes(buf + prefix, r->records, r->records_len);
	return (long)total;
}

int
wire_dp_pull_resp_decode(const uint8_t *msg, size_t len, struct wire_dp_pull_resp *r)
{
	const size_t prefix = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PULL_RESP_FIXED;
	const uint8_t *p;
	int err;

	err = wire__dp_resp_head_take(msg, len, prefix, true, &r->head);
	if (err != 0)
		return err;
	p = msg + WIRE_DP_RESP_HEAD_LEN;
	r->next_begin_offset = (int64_t)wire_ld_le64(p + 0);
	r->min_offset = (int64_t)wire_ld_le64(p + 8);
	r->max_offset = (int64_t)wire_ld_le64(p + 16);
	r->rec_count = wire_ld_le32(p + 24);
	r->records_len = wire_ld_le32(p + 28);
	r->suggest_broker_id = wire_ld_le32(p + 32);
	if (!reserved_zero(p + 36, 4) || (uint64_t)prefix + r->records_len != len)
		return -EBADMSG;
	r->records = r->records_len != 0 ? msg + prefix : NULL;
	return pull_resp_ok(r) ? 0 : -EBADMSG;
}

/* ---- offset ops ---- */

static bool
op_is_offset(uint16_t op)
{
	return op >= WIRE_DP_OP_QUERY_OFFSET && op <= WIRE_DP_OP_SEARCH_OFFSET;
}

static bool
offset_req_ok(uint16_t op, const struct wire_dp_offset_req *r)
{
	bool has_group = op == WIRE_DP_OP_QUERY_OFFSET || op == WIRE_DP_OP_UPDATE_OFFSET;
	bool has_value = op == WIRE_DP_OP_UPDATE_OFFSET || op == WIRE_DP_OP_SEARCH_OFFSET;

	if (!has_value && r->value != 0)
		return false;
	if (!str_ok(r->group, r->group_len, has_group ? 1 : 0, has_group ? WIRE_DP_GROUP_MAX : 0))
		return false;
	return str_ok(r->topic, r->topic_len, 1, WIRE_DP_TOPIC_MAX);
}

long
wire_dp_offset_req_encode(uint16_t op, const struct wire_dp_offset_req *r, uint8_t *buf, size_t cap)
{
	size_t total;
	uint8_t *p;

	if (!op_is_offset(op) || !offset_req_ok(op, r))
		return -EINVAL;
	total = (size_t)WIRE_DP_OFFSET_REQ_FIXED + r->group_len + r->topic_len;
	if (cap < total)
		return -ENOBUFS;
	wire_st_le64(buf + 0, (uint64_t)r->value);
	wire_st_le32(buf + 8, (uint32_t)r->queue_id);
	wire_st_le16(buf + 12, r->group_len);
	wire_st_le16(buf + 14, r->topic_len);
	p = buf + WIRE_DP_OFFSET_REQ_FIXED;
	p = put_bytes(p, r->group, r->group_len);
	put_bytes(p, r->topic, r->topic_len);
	return (long)total;
}

int
wire_dp_offset_req_decode(uint16_t op, const uint8_t *msg, size_t len, struct wire_dp_offset_req *r)
{
	size_t pos = WIRE_DP_OFFSET_REQ_FIXED;

	if (!op_is_offset(op))
		return -EINVAL;
	if (len < WIRE_DP_OFFSET_REQ_FIXED || len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	r->value = (int64_t)wire_ld_le64(msg + 0);
	r->queue_id = (int32_t)wire_ld_le32(msg + 8);
	r->group_len = wire_ld_le16(msg + 12);
	r->topic_len = wire_ld_le16(msg + 14);
	if ((size_t)WIRE_DP_OFFSET_REQ_FIXED + r->group_len + r->topic_len != len)
		return -EBADMSG;
	r->group = take(msg, &pos, r->group_len);
	r->topic = take(msg, &pos, r->topic_len);
	return offset_req_ok(op, r) ? 0 : -EBADMSG;
}

long
wire_dp_offset_resp_encode(uint16_t op, const struct wire_dp_offset_resp *r, uint8_t *buf,
			   size_t cap)
{
	const size_t total = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_OFFSET_RESP_FIXED;
	int err;

	if (!op_is_offset(op))
		return -EINVAL;
	err = wire__dp_resp_begin(&r->head, total, buf, cap);
	if (err != 0)
		return err;
	wire_st_le64(buf + WIRE_DP_RESP_HEAD_LEN, (uint64_t)r->offset);
	return (long)total;
}

int
wire_dp_offset_resp_decode(uint16_t op, const uint8_t *msg, size_t len,
			   struct wire_dp_offset_resp *r)
{
	int err;

	if (!op_is_offset(op))
		return -EINVAL;
	err = wire__dp_resp_head_take(msg, len, WIRE_DP_RESP_HEAD_LEN + WIRE_DP_OFFSET_RESP_FIXED,
				      false, &r->head);
	if (err != 0)
		return err;
	r->offset = (int64_t)wire_ld_le64(msg + WIRE_DP_RESP_HEAD_LEN);
	return 0;
}

/* ---- SEND_BACK ---- */

static bool
send_back_req_ok(const struct wire_dp_send_back_req *r)
{
	return str_ok(r->group, r->group_len, 1, WIRE_DP_GROUP_MAX) &&
	       str_ok(r->origin_topic, r->origin_topic_len, 0, WIRE_DP_TOPIC_MAX) &&
	       str_ok(r->origin_msgid, r->origin_msgid_len, 0, WIRE_DP_MSGID_MAX);
}

long
wire_dp_send_back_req_encode(const struct wire_dp_send_back_req *r, uint8_t *buf, size_t cap)
{
	size_t total;
	uint8_t *p;

	if (!send_back_req_ok(r))
		return -EINVAL;
	total = (size_t)WIRE_DP_SEND_BACK_REQ_FIXED + r->group_len + r->origin_topic_len +
		r->origin_msgid_len;
	if (cap < total)
		return -ENOBUFS;
	wire_st_le64(buf + 0, (uint64_t)r->phys_offset);
	wire_st_le32(buf + 8, (uint32_t)r->delay_level);
	wire_st_le32(buf + 12, (uint32_t)r->max_reconsume_times);
	wire_st_le16(buf + 16, r->group_len);
	wire_st_le16(buf + 18, r->origin_topic_len);
	wire_st_le16(buf + 20, r->origin_msgid_len);
	wire_st_le16(buf + 22, 0);
	p = buf + WIRE_DP_SEND_BACK_REQ_FIXED;
	p = put_bytes(p, r->group, r->group_len);
	p = put_bytes(p, r->origin_topic, r->origin_topic_len);
	put_bytes(p, r->origin_msgid, r->origin_msgid_len);
	return (long)total;
}

int
wire_dp_send_back_req_decode(const uint8_t *msg, size_t len, struct wire_dp_send_back_req *r)
{
	size_t pos = WIRE_DP_SEND_BACK_REQ_FIXED;

	if (len < WIRE_DP_SEND_BACK_REQ_FIXED || len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	r->phys_offset = (int64_t)wire_ld_le64(msg + 0);
	r->delay_level = (int32_t)wire_ld_le32(msg + 8);
	r->max_reconsume_times = (int32_t)wire_ld_le32(msg + 12);
	r->group_len = wire_ld_le16(msg + 16);
	r->origin_topic_len = wire_ld_le16(msg + 18);
	r->origin_msgid_len = wire_ld_le16(msg + 20);
	if (!reserved_zero(msg + 22, 2) ||
	    pos + r->group_len + r->origin_topic_len + r->origin_msgid_len != len)
		return -EBADMSG;
	r->group = take(msg, &pos, r->group_len);
	r->origin_topic = take(msg, &pos, r->origin_topic_len);
	r->origin_msgid = take(msg, &pos, r->origin_msgid_len);
	return send_back_req_ok(r) ? 0 : -EBADMSG;
}

/* ---- CONNECT ---- */

static bool
connect_req_ok(const struct wire_dp_connect_req *r)
{
	return r->max_msg >= WIRE_DP_MSG_MIN && r->max_msg <= WIRE_DP_MSG_LIMIT &&
	       r->mtu >= WIRE_DP_MTU_MIN && r->mtu <= WIRE_DP_MTU_MAX && r->slots >= 1 &&
	       r->slots <= WIRE_DP_SLOTS_MAX &&
	       str_ok(r->client_id, r->client_id_len, 1, WIRE_DP_CLIENT_ID_MAX) &&
	       str_ok(r->ak, r->ak_len, 0, WIRE_DP_AK_MAX) && (r->ak_len == 0 || r->proof != NULL);
}

#define CONNECT_AUTH_FIXED (8u + WIRE_DP_PROOF_LEN)

void
wire_dp_connect_proof(const struct wire_dp_connect_req *r, const struct hmac_sha1 *key,
		      uint8_t out[WIRE_DP_PROOF_LEN])
{
	struct hmac_sha1 h = *key;
	uint8_t n[16];

	wire_st_le64(n, r->challenge);
	wire_st_le64(n + 8, r->nonce);
	hmac_sha1_update(&h, "sprocket-connect-v1", 19);
	hmac_sha1_update(&h, n, sizeof(n));
	hmac_sha1_update(&h, r->client_id, r->client_id_len);
	hmac_sha1_update(&h, r->ak, r->ak_len);
	hmac_sha1_final(&h, out);
}

long
wire_dp_connect_req_encode(const struct wire_dp_connect_req *r, uint8_t *buf, size_t cap)
{
	size_t total;

	if (!connect_req_ok(r))
		return -EINVAL;
	total = (size_t)WIRE_DP_CONNECT_REQ_FIXED + r->client_id_len;
	if (r->ak_len)
		total += CONNECT_AUTH_FIXED + r->ak_len;
	if (cap < total)
		return -ENOBUFS;
	wire_st_le64(buf + 0, r->nonce);
	wire_st_le32(buf + 8, r->max_msg);
	wire_st_le32(buf + 12, r->mtu);
	wire_st_le16(buf + 16, r->slots);
	wire_st_le16(buf + 18, r->client_id_len);
	wire_st_le16(buf + 20, r->ak_len);
	wire_st_le16(buf + 22, 0);
	buf = put_bytes(buf + WIRE_DP_CONNECT_REQ_FIXED, r->client_id, r->client_id_len);
	if (r->ak_len) {
		wire_st_le64(buf, r->challenge);
		buf = put_bytes(buf + 8, r->proof, WIRE_DP_PROOF_LEN);
		put_bytes(buf, r->ak, r->ak_len);
	}
	return (long)total;
}

int
wire_dp_connect_req_decode(const uint8_t *msg, size_t len, struct wire_dp_connect_req *r)
{
	size_t pos = WIRE_DP_CONNECT_REQ_FIXED;

	if (len < WIRE_DP_CONNECT_REQ_FIXED || len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	r->nonce = wire_ld_le64(msg + 0);
	r->max_msg = wire_ld_le32(msg + 8);
	r->mtu = wire_ld_le32(msg + 12);
	r->slots = wire_ld_le16(msg + 16);
	r->client_id_len = wire_ld_le16(msg + 18);
	r->ak_len = wire_ld_le16(msg + 20);
	r->ak = NULL;
	r->proof = NULL;
	r->challenge = 0;
	if (!reserved_zero(msg + 22, 2) ||
	    pos + r->client_id_len + (r->ak_len ? CONNECT_AUTH_FIXED + r->ak_len : 0u) != len)
		return -EBADMSG;
	r->client_id = take(msg, &pos, r->client_id_len);
	if (r->ak_len) {
		r->challenge = wire_ld_le64(msg + pos);
		pos += 8;
		r->proof = msg + pos;
		pos += WIRE_DP_PROOF_LEN;
		r->ak = take(msg, &pos, r->ak_len);
	}
	return connect_req_ok(r) ? 0 : -EBADMSG;
}

static bool
connect_resp_ok(const struct wire_dp_connect_resp *r)
{
	if (r->head.status != WIRE_DP_ST_SUCCESS)
		return (r->token == 0) == (r->head.status != WIRE_DP_ST_AUTH_CHALLENGE) &&
		       r->session_id == 0 && r->max_msg == 0 && r->idle_timeout_ms == 0 &&
		       r->slots == 0 && r->credits == 0 && r->max_payload == 0 && r->core == 0;
	return r->session_id != 0 && r->max_msg >= WIRE_DP_MSG_MIN &&
	       r->max_msg <= WIRE_DP_MSG_LIMIT && r->slots >= 1 && r->slots <= WIRE_DP_SLOTS_MAX &&
	       r->credits >= 1 && r->max_payload >= WIRE_DP_PAYLOAD_MIN;
}

long
wire_dp_connect_resp_encode(const struct wire_dp_connect_resp *r, uint8_t *buf, size_t cap)
{
	const size_t total = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_CONNECT_RESP_FIXED;
	uint8_t *p;
	int err;

	if (!connect_resp_ok(r))
		return -EINVAL;
	err = wire__dp_resp_begin(&r->head, total, buf, cap);
	if (err != 0)
		return err;
	p = buf + WIRE_DP_RESP_HEAD_LEN;
	wire_st_le64(p + 0, r->nonce);
	wire_st_le64(p + 8, r->token);
	wire_st_le32(p + 16, r->session_id);
	wire_st_le32(p + 20, r->max_msg);
	wire_st_le32(p + 24, r->idle_timeout_ms);
	wire_st_le16(p + 28, r->slots);
	wire_st_le16(p + 30, r->credits);
	wire_st_le16(p + 32, r->max_payload);
	wire_st_le16(p + 34, r->core);
	wire_st_le32(p + 36, 0);
	return (long)total;
}

int
wire_dp_connect_resp_decode(const uint8_t *msg, size_t len, struct wire_dp_connect_resp *r)
{
	const uint8_t *p;
	int err;

	err = wire__dp_resp_head_take(msg, len, WIRE_DP_RESP_HEAD_LEN + WIRE_DP_CONNECT_RESP_FIXED,
				      false, &r->head);
	if (err != 0)
		return err;
	p = msg + WIRE_DP_RESP_HEAD_LEN;
	r->nonce = wire_ld_le64(p + 0);
	r->token = wire_ld_le64(p + 8);
	r->session_id = wire_ld_le32(p + 16);
	r->max_msg = wire_ld_le32(p + 20);
	r->idle_timeout_ms = wire_ld_le32(p + 24);
	r->slots = wire_ld_le16(p + 28);
	r->credits = wire_ld_le16(p + 30);
	r->max_payload = wire_ld_le16(p + 32);
	r->core = wire_ld_le16(p + 34);
	if (!reserved_zero(p + 36, 4))
		return -EBADMSG;
	return connect_resp_ok(r) ? 0 : -EBADMSG;
}

/* ---- DISCONNECT ---- */

long
wire_dp_disconnect_req_encode(uint8_t *buf, size_t cap)
{
	(void)buf;
	(void)cap;
	return 0;
}

int
wire_dp_disconnect_req_decode(const uint8_t *msg, size_t len)
{
	(void)msg;
	return len == 0 ? 0 : -EBADMSG;
}

/* ---- PING ---- */

long
wire_dp_ping_req_encode(const struct wire_dp_ping_req *r, uint8_t *buf, size_t cap)
{
	if (r->pad_len && !r->pad)
		return -EINVAL;
	if (r->pad_len > WIRE_DP_MSG_LIMIT - WIRE_DP_RESP_HEAD_LEN - WIRE_DP_PING_RESP_FIXED)
		return -EINVAL;
	if (cap < WIRE_DP_PING_REQ_FIXED + (size_t)r->pad_len)
		return -ENOBUFS;
	wire_st_le64(buf, r->client_ts_ns);
	if (r->pad_len)
		memcpy(buf + WIRE_DP_PING_REQ_FIXED, r->pad, r->pad_len);
	return WIRE_DP_PING_REQ_FIXED + (long)r->pad_len;
}

int
wire_dp_ping_req_decode(const uint8_t *msg, size_t len, struct wire_dp_ping_req *r)
{
	if (len < WIRE_DP_PING_REQ_FIXED ||
	    len - WIRE_DP_PING_REQ_FIXED >
		    WIRE_DP_MSG_LIMIT - WIRE_DP_RESP_HEAD_LEN - WIRE_DP_PING_RESP_FIXED)
		return -EBADMSG;
	r->client_ts_ns = wire_ld_le64(msg);
	r->pad = len > WIRE_DP_PING_REQ_FIXED ? msg + WIRE_DP_PING_REQ_FIXED : NULL;
	r->pad_len = (uint32_t)(len - WIRE_DP_PING_REQ_FIXED);
	return 0;
}

long
wire_dp_ping_resp_encode(const struct wire_dp_ping_resp *r, uint8_t *buf, size_t cap)
{
	const size_t fixed = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PING_RESP_FIXED;
	int err;

	if (r->pad_len && !r->pad)
		return -EINVAL;
	if (r->pad_len > WIRE_DP_MSG_LIMIT - fixed)
		return -EINVAL;
	if (r->pad_len && r->head.status != WIRE_DP_ST_SUCCESS)
		return -EINVAL;
	err = wire__dp_resp_begin(&r->head, fixed + r->pad_len, buf, cap);
	if (err != 0)
		return err;
	wire_st_le64(buf + WIRE_DP_RESP_HEAD_LEN, r->echo_ts_ns);
	if (r->pad_len)
		memmove(buf + fixed, r->pad, r->pad_len);
	return (long)(fixed + r->pad_len);
}

int
wire_dp_ping_resp_decode(const uint8_t *msg, size_t len, struct wire_dp_ping_resp *r)
{
	const size_t fixed = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PING_RESP_FIXED;
	int err;

	if (len < fixed || len > WIRE_DP_MSG_LIMIT)
		return -EBADMSG;
	err = wire__dp_resp_head_take(msg, fixed, fixed, false, &r->head);
	if (err != 0)
		return err;
	r->echo_ts_ns = wire_ld_le64(msg + WIRE_DP_RESP_HEAD_LEN);
	r->pad = len > fixed ? msg + fixed : NULL;
	r->pad_len = (uint32_t)(len - fixed);
	if (r->pad_len && r->head.status != WIRE_DP_ST_SUCCESS)
		return -EBADMSG;
	return 0;
}
