/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.h - wire codec A, part 2: RocketMQ message records and what rides in
 * them (docs/rocketmq-protocol.md §5).
 *
 * A record is both the CommitLog's on-disk format and the body of pull,
 * query and view responses, so the broker can serve a pull from the log as
 * it is. All integers big-endian. Also here: property strings (§5.2),
 * offset msgIds (§5.3), SEND_BATCH bodies (§5.4) and the tag hash (§5.6).
 *
 * Pure functions over caller buffers: no allocation, no I/O, no logging.
 */
#ifndef SP_WIRE_RECORD_H
#define SP_WIRE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "wire/kv.h"

#define WIRE_MAGIC_MESSAGE 0xDAA320A7u
#define WIRE_MAGIC_BLANK 0xCBD43194u

#define WIRE_SYSFLAG_COMPRESSED 0x1
#define WIRE_SYSFLAG_MULTI_TAGS 0x2
#define WIRE_SYSFLAG_TX_MASK 0xC
#define WIRE_SYSFLAG_TX_NOT 0x0
#define WIRE_SYSFLAG_TX_PREPARED 0x4
#define WIRE_SYSFLAG_TX_COMMIT 0x8
#define WIRE_SYSFLAG_TX_ROLLBACK 0xC
#define WIRE_SYSFLAG_BORNHOST_V6 0x10
#define WIRE_SYSFLAG_STOREHOST_V6 0x20

#define WIRE_TOPIC_MAX 127	  /* int8 length */
#define WIRE_PROPS_MAX 32767	  /* int16 length */
#define WIRE_REC_FIXED_V4 91	  /* record size without body, topic, properties */
#define WIRE_REC_HOST_V6_EXTRA 12 /* each IPv6 host adds 12 bytes */
#define WIRE_BLANK_LEN 8	  /* TOTALSIZE + MAGIC of the end-of-file filler */

#define WIRE_PROP_SEP_KV '\x01'
#define WIRE_PROP_SEP_ITEM '\x02'

struct wire_host {
	uint8_t addr[16]; /* IPv4 uses the first 4 bytes, network order */
	uint32_t port;
	bool v6;
};

/* A decoded record; pointers refer into the decoded buffer. */
struct wire_msg {
	uint32_t total_size;
	uint32_t body_crc;
	int32_t queue_id;
	int32_t flag;
	int64_t queue_offset;
	int64_t phys_offset;
	int32_t sys_flag; /* host v6 bits are derived from born_host/store_host on encode */
	int64_t born_ts;
	struct wire_host born_host;
	int64_t store_ts;
	struct wire_host store_host;
	int32_t reconsume_times;
	int64_t prepared_tx_offset;
	const uint8_t *body;
	uint32_t body_len;
	const char *topic;
	uint8_t topic_len;
	const char *props;
	uint16_t props_len;
};

/* Return: the encoded size of @m (0 if topic/props lengths are out of range). */
size_t wire_rec_size(const struct wire_msg *m);

/**
 * wire_rec_encode() - write @m as a record; computes BODYCRC and TOTALSIZE.
 *
 * Context: any thread, pure; the store calls it on the append path.
 * Return: bytes written, -EINVAL topic empty/too long or properties too long,
 * -ENOBUFS @cap too small.
 */
MUST_CHECK long wire_rec_encode(const struct wire_msg *m, uint8_t *buf, size_t cap);

#define WIRE_REC_VERIFY_CRC 0x1

/**
 * wire_rec_decode() - decode the record at the start of @buf.
 * @flags: WIRE_REC_VERIFY_CRC to check BODYCRC.
 *
 * Every length is checked against TOTALSIZE and @len; the record must be
 * exact (fields end at TOTALSIZE) as readers parse sequentially.
 *
 * Return: record length (> 0); -ENODATA a BLANK filler (m->total_size set);
 * -EBADMSG malformed or truncated; -EPROTO bad magic; -EILSEQ CRC mismatch.
 */
MUST_CHECK long wire_rec_decode(const uint8_t *buf, size_t len, unsigned flags, struct wire_msg *m);

/* Writes the 8-byte BLANK filler header announcing @fill bytes. Return: 8 or -ENOBUFS. */
MUST_CHECK long wire_rec_encode_blank(uint32_t fill, uint8_t *buf, size_t cap);

/* ---- properties (§5.2): "k\1v\2k\1v\2", with or without the trailing \2 ---- */

/**
 * wire_props_next() - iterate items; skips items Java would skip (shorter than
 * 3 bytes, or with \1 missing, first or last).
 * @pos: cursor, start at 0.
 * Return: true with @kv set, false at the end.
 */
bool wire_props_next(const char *props, size_t len, size_t *pos, struct wire_kv *kv);

/* Return: true and the value of the last item named @key (later duplicates win). */
bool wire_props_get(const char *props, size_t len, const char *key, const char **val,
		    size_t *val_len);

/**
 * wire_props_append() - append "key\1val\2" at *@len.
 * Return: 0, -EINVAL key/value contains a separator or key empty,
 * -ENOBUFS it would pass @cap (or WIRE_PROPS_MAX).
 */
MUST_CHECK int wire_props_append(char *buf, size_t cap, size_t *len, const char *key,
				 size_t key_len, const char *val, size_t val_len);

/*
 * The value of @key as an unsigned decimal (digits only, at least one;
 * saturating at UINT64_MAX). Return: false when absent or not such a number.
 */
bool wire_props_get_uint(const char *props, size_t len, const char *key, uint64_t *out);

/**
 * wire_props_copy_except() - @props into @dst without the items whose key is
 * in @skip (NULL-terminated), as wire_props_next() reads them.
 * Return: 0, -ENOBUFS (@cap or WIRE_PROPS_MAX).
 */
MUST_CHECK int wire_props_copy_except(char *dst, size_t cap, size_t *len, const char *props,
				      size_t plen, const char *const *skip);

/* ---- offset msgId (§5.3): hex(storeHost ip + port + PHYSICALOFFSET) ---- */

#define WIRE_MSGID_V4_LEN 32
#define WIRE_MSGID_V6_LEN 56
#define WIRE_MSGID_MAX (WIRE_MSGID_V6_LEN + 1)

/* "a.b.c.d:port" (IPv6: "[ipv6]:port") into @out, as the CLI and the console show hosts. */
void wire_host_format(const struct wire_host *h, char *out, size_t len);

/* Writes the uppercase hex id and a NUL. Return: its length (32 or 56). */
size_t wire_msgid_encode(const struct wire_host *store_host, int64_t phys_offset,
			 char out[WIRE_MSGID_MAX]);

/* Return: 0, -EINVAL wrong length or a non-hex character. */
MUST_CHECK int wire_msgid_decode(const char *id, size_t len, struct wire_host *store_host,
				 int64_t *phys_offset);

/* ---- SEND_BATCH body (§5.4) ---- */

#define WIRE_BATCH_ITEM_FIXED 22 /* size, magic, crc, flag, bodyLen, propLen */

struct wire_batch_item {
	int32_t flag;
	const uint8_t *body;
	uint32_t body_len;
	const char *props;
	uint16_t props_len;
};

/**
 * wire_batch_next() - decode the item at *@pos and advance.
 * Return: 1 item decoded, 0 end of body, -EBADMSG malformed.
 */
MUST_CHECK int wire_batch_next(const uint8_t *buf, size_t len, size_t *pos,
			       struct wire_batch_item *it);

/* Append one item. Return: 0, -ENOBUFS, -EINVAL props too long. */
MUST_CHECK int wire_batch_append(uint8_t *buf, size_t cap, size_t *len,
				 const struct wire_batch_item *it);

/* ---- tags ---- */

/**
 * wire_tag_hash() - Java String.hashCode() of a UTF-8 string, i.e. over its
 * UTF-16 code units; invalid UTF-8 bytes count as U+FFFD as Java's decoder
 * replaces them. The ConsumeQueue's tagsCode.
 */
int32_t wire_tag_hash(const char *utf8, size_t len);

/* ---- topic names ---- */

/**
 * wire_topic_name_ok() - RocketMQ's topic rule (TopicValidator): 1 to
 * WIRE_TOPIC_MAX bytes of a-z A-Z 0-9 % | _ -. Broker, NameServer and
 * client all apply this one.
 */
bool wire_topic_name_ok(const char *s, size_t len);

#endif /* SP_WIRE_RECORD_H */
