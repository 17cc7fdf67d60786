// SPDX-License-Identifier: Apache-2.0
/*
 * record.c - RocketMQ's message record (§5.1): the CommitLog's on-disk
 * format and the body of pull responses, byte for byte.
 *
 *  TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG
 *  BORNTIMESTAMP BORNHOST STORETIMESTAMP STOREHOST RECONSUMETIMES
 *  PREPARED_TX_OFFSET BODYLEN BODY TOPICLEN(int8) TOPIC PROPLEN(int16) PROPS
 *
 * Readers in every client parse fields in sequence and never use TOTALSIZE
 * to skip, so the decoder insists that the fields end exactly at TOTALSIZE:
 * a record that would decode differently in Java and here is rejected. The
 * host widths follow SYSFLAG bits 4 and 5 (IPv6), as Java and Go read them.
 */
#include <errno.h>
#include <string.h>

#include "bytes_priv.h"
#include "common/crc32.h"
#include "wire/record.h"

static size_t
rec_host_len(const struct wire_host *h)
{
	return h->v6 ? 20 : 8;
}

size_t
wire_rec_size(const struct wire_msg *m)
{
	if (m->topic_len == 0 || m->topic_len > WIRE_TOPIC_MAX || m->props_len > WIRE_PROPS_MAX)
		return 0;
	return WIRE_REC_FIXED_V4 - 16 + rec_host_len(&m->born_host) + rec_host_len(&m->store_host) +
	       m->body_len + m->topic_len + m->props_len;
}

static uint8_t *
rec_put_host(uint8_t *p, const struct wire_host *h)
{
	size_t n = h->v6 ? 16 : 4;

	memcpy(p, h->addr, n);
	wire_st_be32(p + n, h->port);
	return p + n + 4;
}

long
wire_rec_encode(const struct wire_msg *m, uint8_t *buf, size_t cap)
{
	size_t size = wire_rec_size(m);
	int32_t sys_flag = m->sys_flag & ~(WIRE_SYSFLAG_BORNHOST_V6 | WIRE_SYSFLAG_STOREHOST_V6);
	uint8_t *p = buf;

	if (size == 0 || size > INT32_MAX)
		return -EINVAL;
	if (size > cap)
		return -ENOBUFS;
	if (m->born_host.v6)
		sys_flag |= WIRE_SYSFLAG_BORNHOST_V6;
	if (m->store_host.v6)
		sys_flag |= WIRE_SYSFLAG_STOREHOST_V6;

	wire_st_be32(p, (uint32_t)size);
	wire_st_be32(p + 4, WIRE_MAGIC_MESSAGE);
	wire_st_be32(p + 8, crc32_body(m->body, m->body_len));
	wire_st_be32(p + 12, (uint32_t)m->queue_id);
	wire_st_be32(p + 16, (uint32_t)m->flag);
	wire_st_be64(p + 20, (uint64_t)m->queue_offset);
	wire_st_be64(p + 28, (uint64_t)m->phys_offset);
	wire_st_be32(p + 36, (uint32_t)sys_flag);
	wire_st_be64(p + 40, (uint64_t)m->born_ts);
	p = rec_put_host(p + 48, &m->born_host);
	wire_st_be64(p, (uint64_t)m->store_ts);
	p = rec_put_host(p + 8, &m->store_host);
	wire_st_be32(p, (uint32_t)m->reconsume_times);
	wire_st_be64(p + 4, (uint64_t)m->prepared_tx_offset);
	wire_st_be32(p + 12, m->body_len);
	p += 16;
	if (m->body_len > 0)
		memcpy(p, m->body, m->body_len);
	p += m->body_len;
	*p++ = m->topic_len;
	memcpy(p, m->topic, m->topic_len);
	p += m->topic_len;
	wire_st_be16(p, m->props_len);
	p += 2;
	if (m->props_len > 0)
		memcpy(p, m->props, m->props_len);
	p += m->props_len;
	return (long)(p - buf);
}

long
wire_rec_encode_blank(uint32_t fill, uint8_t *buf, size_t cap)
{
	if (cap < WIRE_BLANK_LEN)
		return -ENOBUFS;
	wire_st_be32(buf, fill);
	wire_st_be32(buf + 4, WIRE_MAGIC_BLANK);
	return WIRE_BLANK_LEN;
}

static const uint8_t *
rec_get_host(const uint8_t *p, bool v6, struct wire_host *h)
{
	size_t n = v6 ? 16 : 4;

	memset(h->addr, 0, sizeof(h->addr));
	memcpy(h->addr, p, n);
	h->port = wire_ld_be32(p + n);
	h->v6 = v6;
	return p + n + 4;
}

long
wire_rec_decode(const uint8_t *buf, size_t len, unsigned flags, struct wire_msg *m)
{
	const uint8_t *p;
	const uint8_t *end;
	uint32_t total;
	uint32_t magic;
	size_t fixed;
	int16_t props_len;
	int8_t topic_len;

	if (len < WIRE_BLANK_LEN)
		return -EBADMSG;
	total = wire_ld_be32(buf);
	magic = wire_ld_be32(buf + 4);
	m->total_size = total;
	if (magic == WIRE_MAGIC_BLANK)
		return total >= WIRE_BLANK_LEN ? -ENODATA : -EBADMSG;
	if (magic != WIRE_MAGIC_MESSAGE)
		return -EPROTO;
	if (total < WIRE_REC_FIXED_V4 || total > len || total > INT32_MAX)
		return -EBADMSG;

	m->body_crc = wire_ld_be32(buf + 8);
	m->queue_id = (int32_t)wire_ld_be32(buf + 12);
	m->flag = (int32_t)wire_ld_be32(buf + 16);
	m->queue_offset = (int64_t)wire_ld_be64(buf + 20);
	m->phys_offset = (int64_t)wire_ld_be64(buf + 28);
	m->sys_flag = (int32_t)wire_ld_be32(buf + 36);
	fixed = WIRE_REC_FIXED_V4;
	if (m->sys_flag & WIRE_SYSFLAG_BORNHOST_V6)
		fixed += WIRE_REC_HOST_V6_EXTRA;
	if (m->sys_flag & WIRE_SYSFLAG_STOREHOST_V6)
		fixed += WIRE_REC_HOST_V6_EXTRA;
	if (total < fixed)
		return -EBADMSG;
	end = buf + total;

	m->born_ts = (int64_t)wire_ld_be64(buf + 40);
	p = rec_get_host(buf + 48, m->sys_flag & WIRE_SYSFLAG_BORNHOST_V6, &m->born_host);
	m->store_ts = (int64_t)wire_ld_be64(p);
	p = rec_get_host(p + 8, m->sys_flag & WIRE_SYSFLAG_STOREHOST_V6, &m->store_host);
	m->reconsume_times = (int32_t)wire_ld_be32(p);
	m->prepared_tx_offset = (int64_t)wire_ld_be64(p + 4);
	m->body_len = wire_ld_be32(p + 12);
	p += 16;
	/* Remaining bytes: body, 1 (topic len), topic, 2 (props len), props. */
	if (m->body_len > (size_t)(end - p) - 3)
		return -EBADMSG;
	m->body = p;
	p += m->body_len;
	topic_len = (int8_t)*p++;
	if (topic_len <= 0 || (size_t)topic_len > (size_t)(end - p) - 2)
		return -EBADMSG;
	m->topic = (const char *)p;
	m->topic_len = (uint8_t)topic_len;
	p += topic_len;
	props_len = (int16_t)wire_ld_be16(p);
	p += 2;
	if (props_len < 0 || (size_t)props_len != (size_t)(end - p))
		return -EBADMSG;
	m->props = (const char *)p;
	m->props_len = (uint16_t)props_len;

	if ((flags & WIRE_REC_VERIFY_CRC) && crc32_body(m->body, m->body_len) != m->body_crc)
		return -EILSEQ;
	return (long)total;
}
