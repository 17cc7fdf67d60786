/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dp.h - wire codec B: the dataplane packet format (docs/protocol.md).
 *
 * A UDP datagram is one packet: a 48-byte little-endian header and a payload.
 * Payloads concatenate into a message, whose body is defined per op. Every
 * response starts with a 40-byte common part (status, redirect, the broker's
 * per-stage timestamps) followed by its op part.
 *
 * Decoded structs point into the caller's buffer for strings, bodies and
 * arrays; nothing is copied and nothing is NUL-terminated. Arrays of integers
 * (tag hashes, batch offsets) are exposed as little-endian bytes: read them
 * with the accessors below; on the little-endian hosts sprocket supports an
 * encoder may point them at a plain int32_t/int64_t array.
 *
 * Pure functions over caller buffers: no allocation, no I/O, no logging, no
 * global state. Every decoder checks every length against the buffer and
 * never reads outside it. Encoders refuse (-EINVAL) anything the matching
 * decoder would reject, so whatever they write decodes back to the same
 * fields.
 */
#ifndef SP_WIRE_DP_H
#define SP_WIRE_DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

/* ---- packet header (docs/protocol.md §2) ---- */

#define WIRE_DP_MAGIC 0x4B525053u /* bytes "SPRK" on the wire */
#define WIRE_DP_VERSION 1
#define WIRE_DP_HDR_LEN 48

enum wire_dp_type {
	WIRE_DP_T_REQ = 1,
	WIRE_DP_T_RESP = 2,
	WIRE_DP_T_CREDIT = 3,
	WIRE_DP_T_RESET = 4,
};

#define WIRE_DP_F_RETRANS 0x0001u /* a retransmission (statistics only) */
#define WIRE_DP_F_ALL WIRE_DP_F_RETRANS

enum wire_dp_op {
	WIRE_DP_OP_NONE = 0, /* RESET only */
	WIRE_DP_OP_SEND = 1,
	WIRE_DP_OP_SEND_BATCH = 2,
	WIRE_DP_OP_PULL = 3,
	WIRE_DP_OP_QUERY_OFFSET = 4,
	WIRE_DP_OP_UPDATE_OFFSET = 5,
	WIRE_DP_OP_GET_MIN_OFFSET = 6,
	WIRE_DP_OP_GET_MAX_OFFSET = 7,
	WIRE_DP_OP_SEARCH_OFFSET = 8,
	WIRE_DP_OP_SEND_BACK = 9,
	WIRE_DP_OP_CONNECT = 10,
	WIRE_DP_OP_DISCONNECT = 11,
	WIRE_DP_OP_PING = 12,
	WIRE_DP_OP_REPL = 13, /* a slave's core follows its master's shard (docs/replication.md) */
	WIRE_DP_OP_MAX = WIRE_DP_OP_REPL,
};

/* ---- limits (docs/protocol.md §3) ---- */

#define WIRE_DP_TOPIC_MAX 127
#define WIRE_DP_GROUP_MAX 255
#define WIRE_DP_CLIENT_ID_MAX 255
#define WIRE_DP_PROPS_MAX 32767
#define WIRE_DP_EXPR_MAX 4096
#define WIRE_DP_TAGS_MAX 256
#define WIRE_DP_MSGID_MAX 64
#define WIRE_DP_SLOTS_MAX 256
#define WIRE_DP_BODY_MAX_DEFAULT (4u << 20) /* RocketMQ maxMessageSize */
#define WIRE_DP_MSG_OVERHEAD (64u << 10)    /* headers, props, record fields */
#define WIRE_DP_MSG_MAX_DEFAULT (WIRE_DP_BODY_MAX_DEFAULT + WIRE_DP_MSG_OVERHEAD)
#define WIRE_DP_MSG_MIN 4096u
#define WIRE_DP_MSG_LIMIT (256u << 20) /* protocol limit on msg_len */
#define WIRE_DP_MTU_MIN 576u
#define WIRE_DP_MTU_MAX 65535u
#define WIRE_DP_PAYLOAD_MIN 256u

/* ---- status codes (RocketMQ's where they exist; docs/protocol.md §5.1) ---- */

enum wire_dp_status {
	WIRE_DP_ST_SUCCESS = 0,
	WIRE_DP_ST_SYSTEM_ERROR = 1,
	WIRE_DP_ST_SYSTEM_BUSY = 2,
	/* a message type (delay, timer, transaction) this broker does not take yet */
	WIRE_DP_ST_NOT_SUPPORTED = 3,
	WIRE_DP_ST_FLUSH_DISK_TIMEOUT = 10,
	WIRE_DP_ST_SLAVE_NOT_AVAILABLE = 11,
	WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT = 12,
	WIRE_DP_ST_MESSAGE_ILLEGAL = 13,
	WIRE_DP_ST_SERVICE_NOT_AVAILABLE = 14,
	WIRE_DP_ST_NO_PERMISSION = 16,
	WIRE_DP_ST_TOPIC_NOT_EXIST = 17,
	WIRE_DP_ST_PULL_NOT_FOUND = 19,
	WIRE_DP_ST_PULL_RETRY_IMMEDIATELY = 20,
	WIRE_DP_ST_PULL_OFFSET_MOVED = 21,
	WIRE_DP_ST_QUERY_NOT_FOUND = 22,
	WIRE_DP_ST_SUBSCRIPTION_PARSE_FAILED = 23,
	WIRE_DP_ST_SUBSCRIPTION_GROUP_NOT_EXIST = 26,
	/* sprocket's own */
	WIRE_DP_ST_REDIRECT = 1000,
	WIRE_DP_ST_BAD_REQUEST = 1001,
	/* CONNECT with credentials: prove them over this challenge (the response's token) */
	WIRE_DP_ST_AUTH_CHALLENGE = 1002,
};

/* PULL sysflag (RocketMQ PullSysFlag). */
#define WIRE_DP_PULL_COMMIT_OFFSET 0x1u
#define WIRE_DP_PULL_SUSPEND 0x2u
#define WIRE_DP_PULL_SUBSCRIPTION 0x4u
#define WIRE_DP_PULL_CLASS_FILTER 0x8u
#define WIRE_DP_PULL_LITE_PULL 0x10u

enum wire_dp_expr_type {
	WIRE_DP_EXPR_TAG = 0,
	WIRE_DP_EXPR_SQL92 = 1,
};

enum wire_dp_reset_reason {
	WIRE_DP_RESET_SHUTDOWN = 1,
	WIRE_DP_RESET_IDLE = 2,
	WIRE_DP_RESET_PROTOCOL = 3,
	WIRE_DP_RESET_EVICTED = 4,
};

/* Body sizes (fixed parts). */
#define WIRE_DP_RESP_HEAD_LEN 40
#define WIRE_DP_SEND_REQ_FIXED 32
#define WIRE_DP_SEND_RESP_FIXED 24
#define WIRE_DP_PULL_REQ_FIXED 48
#define WIRE_DP_PULL_RESP_FIXED 40
#define WIRE_DP_OFFSET_REQ_FIXED 16
#define WIRE_DP_OFFSET_RESP_FIXED 8
#define WIRE_DP_SEND_BACK_REQ_FIXED 24
#define WIRE_DP_CONNECT_REQ_FIXED 24
#define WIRE_DP_CONNECT_RESP_FIXED 40
#define WIRE_DP_PING_REQ_FIXED 8
#define WIRE_DP_PING_RESP_FIXED 8
#define WIRE_DP_RESET_LEN 8
#define WIRE_DP_REPL_REQ_FIXED 64
#define WIRE_DP_REPL_RESP_FIXED 56

/* A decoded packet header (magic and version are implied). */
struct wire_dp_hdr {
	uint8_t type; /* enum wire_dp_type */
	uint16_t flags;
	uint64_t token;
	uint32_t session_id;
	uint16_t slot;
	uint16_t op; /* enum wire_dp_op */
	uint32_t seq;
	uint32_t pkt_idx; /* CREDIT: next packet expected */
	uint32_t pkt_cnt;
	uint32_t credit; /* CREDIT only */
	uint32_t msg_len;
	uint32_t payload_len;
};

/**
 * wire_dp_hdr_encode() - write the 48-byte header @h at @buf.
 *
 * The payload (h->payload_len bytes) goes right after it; the caller writes it.
 *
 * Context: any thread, pure.
 * Return: WIRE_DP_HDR_LEN, -ENOBUFS @cap < 48, -EINVAL @h breaks a rule of
 * docs/protocol.md §2.2 (unknown type/op/flag, inconsistent lengths, ...).
 */
MUST_CHECK long wire_dp_hdr_encode(const struct wire_dp_hdr *h, uint8_t *buf, size_t cap);

/**
 * wire_dp_hdr_decode() - decode and validate the header of the datagram @buf.
 * @len: the datagram's length (UDP payload); must be 48 + payload_len exactly.
 *
 * The payload is at @buf + WIRE_DP_HDR_LEN. Session, token and geometry are
 * the caller's to check (see wire_dp_hdr_check_geometry()).
 *
 * Context: any thread, pure; the dataplane's RX path.
 * Return: 0; -EBADMSG malformed (short, inconsistent lengths or indexes);
 * -EPROTO wrong magic or version, unknown type, op or flag.
 */
MUST_CHECK int wire_dp_hdr_decode(const uint8_t *buf, size_t len, struct wire_dp_hdr *h);

/* Return: packets needed for a @msg_len message at @max_payload per packet (>= 1; 0 if
 * @max_payload is 0). */
uint32_t wire_dp_pkt_count(uint32_t msg_len, uint32_t max_payload);

/**
 * wire_dp_hdr_check_geometry() - check a decoded REQ/RESP header against the
 * session's @max_payload: pkt_cnt and payload_len are exactly what splitting
 * msg_len into @max_payload packets gives. Packet i's payload then belongs at
 * message offset i * @max_payload.
 *
 * Context: any thread, pure.
 * Return: 0, -EBADMSG inconsistent, -EINVAL @max_payload is 0.
 */
MUST_CHECK int wire_dp_hdr_check_geometry(const struct wire_dp_hdr *h, uint32_t max_payload);

/* Return: true for ops 1..WIRE_DP_OP_MAX. */
bool wire_dp_op_is_valid(uint16_t op);

/* Return: the op's name ("SEND", ...), "NONE" for 0, "?" if unknown. */
const char *wire_dp_op_name(uint16_t op);

/* Return: the size of @op's fixed response op part, or -EINVAL unknown op. */
MUST_CHECK long wire_dp_resp_fixed_len(uint16_t op);

/* Return: true when a SEND/SEND_BATCH with @status was stored (0, 10, 11, 12). */
bool wire_dp_status_is_stored(int32_t status);

/* ---- RESET payload (§5.13) ---- */

struct wire_dp_reset {
	uint32_t reason; /* enum wire_dp_reset_reason, never 0 */
	uint32_t detail;
};

/* Return: WIRE_DP_RESET_LEN, -ENOBUFS, -EINVAL reason 0. */
MUST_CHECK long wire_dp_reset_encode(const struct wire_dp_reset *r, uint8_t *buf, size_t cap);
/* Return: 0, -EBADMSG wrong length or reason 0. */
MUST_CHECK int wire_dp_reset_decode(const uint8_t *buf, size_t len, struct wire_dp_reset *r);

/* ---- response common part (§5.1) ---- */

struct wire_dp_resp_head {
	int32_t status; /* enum wire_dp_status */
	uint16_t redirect_core;
	uint16_t redirect_port; /* != 0 iff status == REDIRECT */
	uint64_t ts_recv_ns;
	uint64_t ts_handled_ns;
	uint64_t ts_durable_ns;
	uint64_t ts_sent_ns;
};

/**
 * wire_dp_resp_head_decode() - decode only the common part at the start of a
 * response message (for instance to read the status before the op part).
 *
 * Context: any thread, pure.
 * Return: 0, -EBADMSG shorter than 40 bytes or redirect fields inconsistent
 * with the status.
 */
MUST_CHECK int wire_dp_resp_head_decode(const uint8_t *msg, size_t len,
					struct wire_dp_resp_head *h);

/**
 * wire_dp_resp_stamp_sent() - overwrite ts_sent_ns in an encoded response
 * (packet 0's payload), just before it goes on the TX burst.
 *
 * Context: any thread, pure; the dataplane's TX path.
 * Return: 0, -EBADMSG @len < 40.
 */
MUST_CHECK int wire_dp_resp_stamp_sent(uint8_t *msg, size_t len, uint64_t ts_ns);

/**
 * wire_dp_resp_error_encode() - a response to @op with a non-success status:
 * the common part @h and the op part zero-filled, no variable part.
 *
 * Context: any thread, pure; answers REDIRECT, SYSTEM_BUSY, BAD_REQUEST, ...
 * Return: bytes written, -ENOBUFS, -EINVAL unknown op or CONNECT (whose
 * failure echoes the nonce: use wire_dp_connect_resp_encode()), status
 * SUCCESS, or redirect fields inconsistent with the status.
 */
MUST_CHECK long wire_dp_resp_error_encode(uint16_t op, const struct wire_dp_resp_head *h,
					  uint8_t *buf, size_t cap);

/*
 * Responses that are the common part only: SEND_BACK and DISCONNECT.
 * Return: encode 40 or -ENOBUFS/-EINVAL; decode 0 or -EBADMSG (length != 40)
 * or -EINVAL @op has an op part.
 */
MUST_CHECK long wire_dp_bare_resp_encode(uint16_t op, const struct wire_dp_resp_head *h,
					 uint8_t *buf, size_t cap);
MUST_CHECK int wire_dp_bare_resp_decode(uint16_t op, const uint8_t *msg, size_t len,
					struct wire_dp_resp_head *h);

/* ---- SEND, SEND_BATCH (§5.2, §5.3) ---- */

struct wire_dp_send_req {
	int64_t born_ts;
	int32_t queue_id;
	int32_t flag; /* SEND_BATCH: 0 */
	int32_t sysflag;
	int32_t reconsume_times; /* SEND_BATCH: 0 */
	const char *topic;
	uint16_t topic_len;
	const char *props;
	uint16_t props_len;
	const uint8_t *body; /* SEND_BATCH: RocketMQ batch body, opaque here */
	uint32_t body_len;
};

/**
 * wire_dp_send_req_encode() - encode a SEND or SEND_BATCH request body.
 * @op: WIRE_DP_OP_SEND or WIRE_DP_OP_SEND_BATCH.
 *
 * Context: any thread, pure.
 * Return: bytes written, -ENOBUFS @cap too small, -EINVAL a length out of
 * range, a NULL pointer with a non-zero length, or a wrong @op.
 */
MUST_CHECK long wire_dp_send_req_encode(uint16_t op, const struct wire_dp_send_req *r, uint8_t *buf,
					size_t cap);

/**
 * wire_dp_send_req_decode() - decode a SEND or SEND_BATCH request message.
 *
 * Context: any thread, pure.
 * Return: 0, -EBADMSG malformed (lengths out of range or not summing to @len,
 * SEND_BATCH flag/reconsume_times not 0), -EINVAL wrong @op.
 */
MUST_CHECK int wire_dp_send_req_decode(uint16_t op, const uint8_t *msg, size_t len,
				       struct wire_dp_send_req *r);

struct wire_dp_send_resp {
	struct wire_dp_resp_head head;
	int64_t phys_offset;
	int64_t queue_offset;
	int32_t queue_id;
	uint32_t count;		     /* SEND: 0 or 1 */
	const uint8_t *phys_offsets; /* SEND_BATCH: count LE int64; NULL for SEND */
};

/* Return: bytes written, -ENOBUFS, -EINVAL (SEND count > 1, SEND_BATCH count > 0 with
 * phys_offsets NULL, wrong @op, bad head). */
MUST_CHECK long wire_dp_send_resp_encode(uint16_t op, const struct wire_dp_send_resp *r,
					 uint8_t *buf, size_t cap);
/* Return: 0, -EBADMSG, -EINVAL wrong @op. */
MUST_CHECK int wire_dp_send_resp_decode(uint16_t op, const uint8_t *msg, size_t len,
					struct wire_dp_send_resp *r);
/* Return: the @i-th record's PHYSICALOFFSET of a SEND_BATCH response (@i < count). */
int64_t wire_dp_send_resp_phys(const struct wire_dp_send_resp *r, uint32_t i);

/* ---- PULL (§5.4, §5.5) ---- */

struct wire_dp_pull_req {
	int64_t queue_offset;
	int64_t commit_offset;
	int32_t queue_id;
	int32_t max_msgs;
	uint32_t max_bytes;
	uint32_t sysflag; /* WIRE_DP_PULL_* */
	uint32_t suspend_timeout_ms;
	uint8_t expr_type;	   /* enum wire_dp_expr_type */
	const uint8_t *tag_hashes; /* tag_count LE int32 */
	uint16_t tag_count;
	const char *group;
	uint16_t group_len;
	const char *topic;
	uint16_t topic_len;
	const char *expr;
	uint16_t expr_len;
};

/* Return: bytes written, -ENOBUFS, -EINVAL. */
MUST_CHECK long wire_dp_pull_req_encode(const struct wire_dp_pull_req *r, uint8_t *buf, size_t cap);
/* Return: 0, -EBADMSG. */
MUST_CHECK int wire_dp_pull_req_decode(const uint8_t *msg, size_t len, struct wire_dp_pull_req *r);
/* Return: the @i-th tag hash (@i < tag_count). */
int32_t wire_dp_pull_req_tag(const struct wire_dp_pull_req *r, uint16_t i);

struct wire_dp_pull_resp {
	struct wire_dp_resp_head head;
	int64_t next_begin_offset;
	int64_t min_offset;
	int64_t max_offset;
	uint32_t rec_count;
	uint32_t suggest_broker_id;
	const uint8_t *records; /* RocketMQ stored records (big-endian), SUCCESS only */
	uint32_t records_len;
};

/**
 * wire_dp_pull_resp_encode() - encode a PULL response.
 *
 * With @r->records NULL and records_len > 0 only the 80-byte prefix is
 * written (zero copy: the caller chains the CommitLog's bytes after it and the
 * message is prefix + records_len long).
 *
 * Context: any thread, pure.
 * Return: bytes written (the prefix alone in the zero-copy case), -ENOBUFS,
 * -EINVAL records on a non-success status, rec_count 0 with records or the
 * reverse, bad head.
 */
MUST_CHECK long wire_dp_pull_resp_encode(const struct wire_dp_pull_resp *r, uint8_t *buf,
					 size_t cap);
/* Return: 0, -EBADMSG. */
MUST_CHECK int wire_dp_pull_resp_decode(const uint8_t *msg, size_t len,
					struct wire_dp_pull_resp *r);

/* ---- QUERY_OFFSET, UPDATE_OFFSET, GET_MIN/GET_MAX_OFFSET, SEARCH_OFFSET (§5.6, §5.7) ---- */

struct wire_dp_offset_req {
	int64_t value; /* UPDATE: offset to commit; SEARCH: timestamp ms; others 0 */
	int32_t queue_id;
	const char *group; /* QUERY/UPDATE only */
	uint16_t group_len;
	const char *topic;
	uint16_t topic_len;
};

/* Return: bytes written, -ENOBUFS, -EINVAL (wrong @op, group present/absent wrongly,
 * value non-zero where it must be 0). */
MUST_CHECK long wire_dp_offset_req_encode(uint16_t op, const struct wire_dp_offset_req *r,
					  uint8_t *buf, size_t cap);
/* Return: 0, -EBADMSG, -EINVAL wrong @op. */
MUST_CHECK int wire_dp_offset_req_decode(uint16_t op, const uint8_t *msg, size_t len,
					 struct wire_dp_offset_req *r);

struct wire_dp_offset_resp {
	struct wire_dp_resp_head head;
	int64_t offset;
};

MUST_CHECK long wire_dp_offset_resp_encode(uint16_t op, const struct wire_dp_offset_resp *r,
					   uint8_t *buf, size_t cap);
MUST_CHECK int wire_dp_offset_resp_decode(uint16_t op, const uint8_t *msg, size_t len,
					  struct wire_dp_offset_resp *r);

/* ---- SEND_BACK (§5.8); its response is wire_dp_bare_resp_* ---- */

struct wire_dp_send_back_req {
	int64_t phys_offset;
	int32_t delay_level;
	int32_t max_reconsume_times;
	const char *group;
	uint16_t group_len;
	const char *origin_topic;
	uint16_t origin_topic_len;
	const char *origin_msgid;
	uint16_t origin_msgid_len;
};

MUST_CHECK long wire_dp_send_back_req_encode(const struct wire_dp_send_back_req *r, uint8_t *buf,
					     size_t cap);
MUST_CHECK int wire_dp_send_back_req_decode(const uint8_t *msg, size_t len,
					    struct wire_dp_send_back_req *r);

/* ---- CONNECT (§5.9, §5.10) ---- */

#define WIRE_DP_AK_MAX 64    /* accessKey bytes a CONNECT carries */
#define WIRE_DP_PROOF_LEN 20 /* HMAC-SHA1 */

struct wire_dp_connect_req {
	uint64_t nonce;
	uint32_t max_msg; /* WIRE_DP_MSG_MIN..WIRE_DP_MSG_LIMIT */
	uint32_t mtu;	  /* WIRE_DP_MTU_MIN..WIRE_DP_MTU_MAX */
	uint16_t slots;	  /* 1..WIRE_DP_SLOTS_MAX */
	const char *client_id;
	uint16_t client_id_len;
	/* credentials (docs/protocol.md §5.9, docs/security.md); ak_len 0: none */
	const char *ak;
	uint16_t ak_len;      /* 0..WIRE_DP_AK_MAX */
	uint64_t challenge;   /* 0 in the first attempt; then the server's AUTH_CHALLENGE */
	const uint8_t *proof; /* WIRE_DP_PROOF_LEN bytes (wire_dp_connect_proof()) */
};

struct hmac_sha1;

/*
 * wire_dp_connect_proof() - a CONNECT's proof of the secret: HMAC-SHA1 with
 * the secret (absorbed in @key) over "sprocket-connect-v1", the challenge
 * and nonce (little-endian u64), the client id and the access key.
 */
void wire_dp_connect_proof(const struct wire_dp_connect_req *r, const struct hmac_sha1 *key,
			   uint8_t out[WIRE_DP_PROOF_LEN]);

MUST_CHECK long wire_dp_connect_req_encode(const struct wire_dp_connect_req *r, uint8_t *buf,
					   size_t cap);
MUST_CHECK int wire_dp_connect_req_decode(const uint8_t *msg, size_t len,
					  struct wire_dp_connect_req *r);

struct wire_dp_connect_resp {
	struct wire_dp_resp_head head;
	uint64_t nonce; /* the request's, echoed (also on failure) */
	uint64_t token; /* AUTH_CHALLENGE: the challenge (every other op field 0) */
	uint32_t session_id;
	uint32_t max_msg;
	uint32_t idle_timeout_ms;
	uint16_t slots;
	uint16_t credits;
	uint16_t max_payload;
	uint16_t core;
};

/*
 * On SUCCESS: session_id != 0, slots 1..WIRE_DP_SLOTS_MAX, credits >= 1, max_payload >=
 * WIRE_DP_PAYLOAD_MIN, max_msg in range; otherwise every op field but nonce is 0.
 * Return: encode bytes written, -ENOBUFS, -EINVAL; decode 0, -EBADMSG.
 */
MUST_CHECK long wire_dp_connect_resp_encode(const struct wire_dp_connect_resp *r, uint8_t *buf,
					    size_t cap);
MUST_CHECK int wire_dp_connect_resp_decode(const uint8_t *msg, size_t len,
					   struct wire_dp_connect_resp *r);

/* ---- DISCONNECT: empty request; response wire_dp_bare_resp_* ---- */

/* Return: 0 (an empty body), never fails; for symmetry. */
MUST_CHECK long wire_dp_disconnect_req_encode(uint8_t *buf, size_t cap);
/* Return: 0, -EBADMSG @len != 0. */
MUST_CHECK int wire_dp_disconnect_req_decode(const uint8_t *msg, size_t len);

/* ---- PING (§5.11, §5.12) ---- */

/*
 * PING may carry opaque padding after its 8 bytes; the response echoes it
 * after echo_ts_ns (only on SUCCESS). sprocket-bench sizes its transport
 * round trips with it.
 */
struct wire_dp_ping_req {
	uint64_t client_ts_ns;
	const uint8_t *pad;
	uint32_t pad_len;
};

struct wire_dp_ping_resp {
	struct wire_dp_resp_head head;
	uint64_t echo_ts_ns;
	const uint8_t *pad; /* encode: may point into the output at or after +48 */
	uint32_t pad_len;
};

MUST_CHECK long wire_dp_ping_req_encode(const struct wire_dp_ping_req *r, uint8_t *buf, size_t cap);
MUST_CHECK int wire_dp_ping_req_decode(const uint8_t *msg, size_t len, struct wire_dp_ping_req *r);
MUST_CHECK long wire_dp_ping_resp_encode(const struct wire_dp_ping_resp *r, uint8_t *buf,
					 size_t cap);
MUST_CHECK int wire_dp_ping_resp_decode(const uint8_t *msg, size_t len,
					struct wire_dp_ping_resp *r);

/* ---- REPL (§5.14, §5.15; docs/replication.md) ---- */

/*
 * A slave asks master core @shard for the log bytes of its shard from
 * @offset on. @offset also acknowledges: the slave holds every byte below
 * it (SYNC_MASTER acks wait for that). The master answers at once when it
 * has bytes past @offset, else parks the request up to suspend_ms (an
 * answer without data is the heartbeat). Geometry (cores, segment size)
 * travels both ways so either end can refuse a mismatch.
 */
struct wire_dp_repl_req {
	uint64_t offset;   /* slave's end of log in this shard (local bytes) */
	uint64_t seg_size; /* slave's mapedFileSizeCommitLog */
	uint64_t flushed;  /* slave's durable end (lag reporting) */
	/*
	 * The slave's last record (the one ending at offset): where it starts,
	 * its size and the CRC-32 of its first 64 bytes (fewer for a shorter one).
	 * The master checks it holds the same record there before it sends
	 * anything after it (prev_size 0: an empty log, nothing to check).
	 */
	uint64_t prev_off;
	uint32_t prev_size;
	uint32_t prev_hash;
	uint32_t max_bytes;
	uint32_t suspend_ms;
	uint16_t shard;
	uint16_t cores;
	/*
	 * The group's epoch the slave follows (docs/failover.md; 0: static
	 * roles). A master of a lower epoch has been replaced: it stops
	 * taking writes.
	 */
	uint64_t epoch;
	const char *name; /* the slave's brokerName, 1..WIRE_DP_TOPIC_MAX bytes */
	uint16_t name_len;
	uint16_t flags; /* WIRE_DP_REPL_RQ_F_* */
};

/*
 * The request comes from the group's master, restarting with a log shorter
 * than its slave's (it lost a tail): the slave's core answers with its own
 * bytes past @offset, so the master takes back what it acknowledged
 * (docs/replication.md, "A master that lost an acknowledged tail").
 */
#define WIRE_DP_REPL_RQ_F_RECOVER 0x1u
#define WIRE_DP_REPL_RQ_F_ALL WIRE_DP_REPL_RQ_F_RECOVER

/*
 * The master acknowledges SENDs once a slave holds them (SYNC_MASTER, with
 * either flush: a disk that lost what it had synced loses it too): bytes a
 * slave holds past the master's base_end may be acknowledged messages,
 * never to be cut away.
 */
#define WIRE_DP_REPL_F_SLAVE_ACKED 0x1u
#define WIRE_DP_REPL_F_ALL WIRE_DP_REPL_F_SLAVE_ACKED

struct wire_dp_repl_resp {
	struct wire_dp_resp_head head;
	uint64_t master_end;  /* master's end of log in this shard */
	uint64_t data_offset; /* where data belongs (the request's offset) */
	uint64_t min_offset;  /* master's first stored byte */
	/*
	 * master's end when it started: after a crash, what it kept of its old
	 * log. A slave whose log runs past the master's, or whose last record
	 * differs from the master's, shares the master's log up to here (and
	 * cuts its own there).
	 */
	uint64_t base_end;
	uint64_t seg_size;
	uint16_t cores;
	uint16_t flags; /* WIRE_DP_REPL_F_* */
	/* the master's epoch (0: static roles); a slave never follows a lower one */
	uint64_t epoch;
	const uint8_t *data; /* whole records (a BLANK as its 8-byte header), SUCCESS only */
	uint32_t data_len;
};

/* Return: bytes written, -ENOBUFS, -EINVAL (name empty or too long, max_bytes 0). */
MUST_CHECK long wire_dp_repl_req_encode(const struct wire_dp_repl_req *r, uint8_t *buf, size_t cap);
/* Return: 0, -EBADMSG. */
MUST_CHECK int wire_dp_repl_req_decode(const uint8_t *msg, size_t len, struct wire_dp_repl_req *r);
/* Return: bytes written, -ENOBUFS, -EINVAL (data on a non-success status, bad head). */
MUST_CHECK long wire_dp_repl_resp_encode(const struct wire_dp_repl_resp *r, uint8_t *buf,
					 size_t cap);
/* Return: 0, -EBADMSG. */
MUST_CHECK int wire_dp_repl_resp_decode(const uint8_t *msg, size_t len,
					struct wire_dp_repl_resp *r);

#endif /* SP_WIRE_DP_H */
