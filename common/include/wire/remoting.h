/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remoting.h - wire codec A, part 1: RocketMQ remoting frames and headers
 * (docs/rocketmq-protocol.md §1-§2).
 *
 *   int32 length | int32 (serializeType << 24 | headerLen) | header | body
 *
 * The header is JSON (serializeType 0, what every client sends by default)
 * or the ROCKETMQ binary layout (1). A decoded command points into the frame
 * for the body and into a caller-supplied scratch area for header strings,
 * which are NUL-terminated and may contain NUL bytes (lengths are kept).
 *
 * JSON is parsed and printed with json-c (strict mode, depth-limited). That
 * is the one place a wire function allocates: json-c's transient tree, sized
 * by the header (itself bounded by the frame limit) and freed before the
 * function returns. Nothing else here allocates, logs or does I/O.
 *
 * extFields: values are emitted as JSON strings (the Go client fails on
 * numbers); numbers and booleans are accepted on input and kept as their
 * text, null is treated as absent, a missing extFields is an empty map.
 */
#ifndef SP_WIRE_REMOTING_H
#define SP_WIRE_REMOTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "common/hmac.h"
#include "wire/kv.h"

#define WIRE_REM_FRAME_MAX_DEFAULT (16u << 20) /* Netty's default frameMaxLength */
#define WIRE_REM_HDR_MAX ((1u << 24) - 1)      /* 24-bit header length */
#define WIRE_REM_EXT_MAX 64		       /* extFields entries kept per command */

enum wire_rem_serialize {
	WIRE_REM_JSON = 0,
	WIRE_REM_ROCKETMQ = 1,
};

#define WIRE_REM_FLAG_RESPONSE 0x1
#define WIRE_REM_FLAG_ONEWAY 0x2

/* LanguageCode (numeric value = enum ordinal in Java). */
enum wire_rem_lang {
	WIRE_LANG_JAVA = 0,
	WIRE_LANG_CPP,
	WIRE_LANG_DOTNET,
	WIRE_LANG_PYTHON,
	WIRE_LANG_DELPHI,
	WIRE_LANG_ERLANG,
	WIRE_LANG_RUBY,
	WIRE_LANG_OTHER,
	WIRE_LANG_HTTP,
	WIRE_LANG_GO,
	WIRE_LANG_PHP,
	WIRE_LANG_OMS,
	WIRE_LANG_RUST,
	WIRE_LANG_COUNT,
};

/* Request codes sprocket knows (§2.1). */
enum {
	WIRE_REQ_SEND_MESSAGE = 10,
	WIRE_REQ_PULL_MESSAGE = 11,
	WIRE_REQ_QUERY_MESSAGE = 12,
	WIRE_REQ_QUERY_CONSUMER_OFFSET = 14,
	WIRE_REQ_UPDATE_CONSUMER_OFFSET = 15,
	WIRE_REQ_UPDATE_AND_CREATE_TOPIC = 17,
	WIRE_REQ_GET_ALL_TOPIC_CONFIG = 21,
	WIRE_REQ_UPDATE_BROKER_CONFIG = 25,
	WIRE_REQ_GET_BROKER_CONFIG = 26,
	WIRE_REQ_GET_BROKER_RUNTIME_INFO = 28,
	WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP = 29,
	WIRE_REQ_GET_MAX_OFFSET = 30,
	WIRE_REQ_GET_MIN_OFFSET = 31,
	WIRE_REQ_GET_EARLIEST_MSG_STORETIME = 32,
	WIRE_REQ_VIEW_MESSAGE_BY_ID = 33,
	WIRE_REQ_HEART_BEAT = 34,
	WIRE_REQ_UNREGISTER_CLIENT = 35,
	WIRE_REQ_CONSUMER_SEND_MSG_BACK = 36,
	WIRE_REQ_END_TRANSACTION = 37,
	WIRE_REQ_GET_CONSUMER_LIST_BY_GROUP = 38,
	WIRE_REQ_CHECK_TRANSACTION_STATE = 39,
	WIRE_REQ_NOTIFY_CONSUMER_IDS_CHANGED = 40,
	WIRE_REQ_LOCK_BATCH_MQ = 41,
	WIRE_REQ_UNLOCK_BATCH_MQ = 42,
	WIRE_REQ_GET_ALL_CONSUMER_OFFSET = 43,
	WIRE_REQ_GET_ALL_DELAY_OFFSET = 45,
	WIRE_REQ_PUT_KV_CONFIG = 100,
	WIRE_REQ_GET_KV_CONFIG = 101,
	WIRE_REQ_DELETE_KV_CONFIG = 102,
	WIRE_REQ_REGISTER_BROKER = 103,
	WIRE_REQ_UNREGISTER_BROKER = 104,
	WIRE_REQ_GET_ROUTEINFO_BY_TOPIC = 105,
	WIRE_REQ_GET_BROKER_CLUSTER_INFO = 106,
	WIRE_REQ_UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
	WIRE_REQ_GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
	WIRE_REQ_GET_TOPIC_STATS_INFO = 202,
	WIRE_REQ_GET_CONSUMER_CONNECTION_LIST = 203,
	WIRE_REQ_GET_PRODUCER_CONNECTION_LIST = 204,
	WIRE_REQ_WIPE_WRITE_PERM_OF_BROKER = 205,
	WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
	WIRE_REQ_DELETE_SUBSCRIPTIONGROUP = 207,
	WIRE_REQ_GET_CONSUME_STATS = 208,
	WIRE_REQ_DELETE_TOPIC_IN_BROKER = 215,
	WIRE_REQ_DELETE_TOPIC_IN_NAMESRV = 216,
	WIRE_REQ_RESET_CONSUMER_CLIENT_OFFSET = 220,
	WIRE_REQ_INVOKE_BROKER_TO_RESET_OFFSET = 222,
	WIRE_REQ_GET_TOPICS_BY_CLUSTER = 224,
	WIRE_REQ_QUERY_TOPIC_CONSUME_BY_WHO = 300,
	WIRE_REQ_GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
	WIRE_REQ_CLEAN_EXPIRED_CONSUMEQUEUE = 306,
	WIRE_REQ_GET_CONSUMER_RUNNING_INFO = 307,
	WIRE_REQ_VIEW_BROKER_STATS_DATA = 315,
	WIRE_REQ_SEND_MESSAGE_V2 = 310,
	WIRE_REQ_SEND_BATCH_MESSAGE = 320,
	WIRE_REQ_UPDATE_NAMESRV_CONFIG = 318,
	WIRE_REQ_GET_NAMESRV_CONFIG = 319,
	WIRE_REQ_QUERY_DATA_VERSION = 322,
	WIRE_REQ_ADD_WRITE_PERM_OF_BROKER = 327,
};

/* Response codes (§2.2). */
enum {
	WIRE_RSP_SUCCESS = 0,
	WIRE_RSP_SYSTEM_ERROR = 1,
	WIRE_RSP_SYSTEM_BUSY = 2,
	WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED = 3,
	WIRE_RSP_FLUSH_DISK_TIMEOUT = 10,
	WIRE_RSP_SLAVE_NOT_AVAILABLE = 11,
	WIRE_RSP_FLUSH_SLAVE_TIMEOUT = 12,
	WIRE_RSP_MESSAGE_ILLEGAL = 13,
	WIRE_RSP_SERVICE_NOT_AVAILABLE = 14,
	WIRE_RSP_NO_PERMISSION = 16,
	WIRE_RSP_TOPIC_NOT_EXIST = 17,
	WIRE_RSP_PULL_NOT_FOUND = 19,
	WIRE_RSP_PULL_RETRY_IMMEDIATELY = 20,
	WIRE_RSP_PULL_OFFSET_MOVED = 21,
	WIRE_RSP_QUERY_NOT_FOUND = 22,
	WIRE_RSP_SUBSCRIPTION_GROUP_NOT_EXIST = 26,
	WIRE_RSP_CONSUMER_NOT_ONLINE = 206,
	WIRE_RSP_CONSUME_MSG_TIMEOUT = 207,
};

#define WIRE_REM_VERSION_V4_9_8 409

/*
 * One remoting command. On decode every pointer refers to the frame (body)
 * or the scratch buffer (strings); on encode the caller fills the fields.
 */
struct wire_rem_cmd {
	int32_t code;
	int32_t opaque;
	int32_t flag;
	int32_t version;
	uint8_t language;  /* enum wire_rem_lang */
	uint8_t serialize; /* enum wire_rem_serialize */
	uint16_t n_ext;
	const char *remark; /* NULL when absent */
	uint32_t remark_len;
	struct wire_kv ext[WIRE_REM_EXT_MAX];
	const uint8_t *body;
	uint32_t body_len;
};

/**
 * wire_rem_frame_len() - is a whole frame at the start of @buf?
 * @max_frame: largest acceptable frame including the 4-byte length field.
 * @frame_len: set to the full frame length (4 + length) on success.
 *
 * Context: any thread, pure.
 * Return: 0 complete, -EAGAIN need more bytes, -EMSGSIZE larger than
 * @max_frame, -EBADMSG impossible lengths (length < 4 or header > length).
 */
MUST_CHECK int wire_rem_frame_len(const uint8_t *buf, size_t len, size_t max_frame,
				  size_t *frame_len);

/**
 * wire_rem_decode() - decode one complete frame.
 * @frame: starts at the length field; @len is the full frame length.
 * @scratch: receives header strings; needs at most header length + 2 bytes
 * per string, so the header length * 3 + 256 is always enough.
 *
 * Context: any thread; allocates only inside json-c (freed before return).
 * Return: 0; -EBADMSG malformed frame or header; -EPROTO unknown serialize
 * type or a header field of the wrong JSON type; -E2BIG more than
 * WIRE_REM_EXT_MAX extFields; -ENOBUFS @scratch too small.
 */
MUST_CHECK int wire_rem_decode(const uint8_t *frame, size_t len, struct wire_rem_cmd *cmd,
			       char *scratch, size_t scratch_len);

/**
 * wire_rem_encode_header() - write length, header word and header for @cmd,
 * announcing @cmd->body_len body bytes that the caller sends next (writev).
 * Uses @cmd->serialize; ignores @cmd->body.
 * @out_len: bytes written to @buf.
 *
 * Return: 0, -ENOBUFS @buf too small, -EINVAL bad field (language range,
 * header over 16 MiB), -ENOMEM json-c failed.
 */
MUST_CHECK int wire_rem_encode_header(const struct wire_rem_cmd *cmd, uint8_t *buf, size_t cap,
				      size_t *out_len);

/* As wire_rem_encode_header() and then the body copied after it. */
MUST_CHECK int wire_rem_encode(const struct wire_rem_cmd *cmd, uint8_t *buf, size_t cap,
			       size_t *out_len);

/*
 * Delta registration, sprocket's extension of REGISTER_BROKER (docs/namesrv.md,
 * "Delta registration"). A NameServer that takes deltas says so in every
 * registration answer (WIRE_EXT_DELTA "true"); a broker that has heard it
 * may then send only the topics changed since a version the server holds,
 * naming that version in WIRE_EXT_DELTA_BASE (a DataVersion JSON object). A
 * server that no longer holds that version refuses with a remark starting
 * WIRE_DELTA_STALE, and the broker registers its whole set.
 */
#define WIRE_EXT_DELTA "sprocketDelta"
#define WIRE_EXT_DELTA_BASE "sprocketDeltaBase"
#define WIRE_DELTA_STALE "delta registration of an unknown base version"

/* Return: the extField named @key, or NULL. */
const struct wire_kv *wire_rem_ext_get(const struct wire_rem_cmd *cmd, const char *key);

/**
 * wire_rem_ext_i64() - parse extField @key as a decimal int64.
 * Return: 0, -ENOENT absent, -EINVAL not an integer or out of range.
 */
MUST_CHECK int wire_rem_ext_i64(const struct wire_rem_cmd *cmd, const char *key, int64_t *out);

/* Return: 0, -ENOENT absent, -EINVAL not "true"/"false" (case-insensitive). */
MUST_CHECK int wire_rem_ext_bool(const struct wire_rem_cmd *cmd, const char *key, bool *out);

/**
 * wire_rem_ext_add() - append an extField for encoding (pointers kept, not copied).
 * Return: 0, -E2BIG when full.
 */
MUST_CHECK int wire_rem_ext_add(struct wire_rem_cmd *cmd, const char *key, const char *val);

/* Return: the LanguageCode name ("JAVA"), or NULL when out of range. */
const char *wire_rem_lang_name(unsigned lang);

/**
 * wire_rem_sign() - RocketMQ's ACL signature of @cmd (its extFields but
 * Signature and _UNIQUE_KEY_QUERY, sorted by key, values concatenated, then
 * the body; HmacSHA1 with the secret absorbed in @key; base64) into @out.
 * A signer adds AccessKey (and the fields it signs) first, then Signature.
 * Context: any thread, pure, no allocation.
 */
void wire_rem_sign(const struct wire_rem_cmd *cmd, const struct hmac_sha1 *key,
		   char out[HMAC_B64_LEN + 1]);

#endif /* SP_WIRE_REMOTING_H */
