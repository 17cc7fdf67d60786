// SPDX-License-Identifier: Apache-2.0
/*
 * batch.c - SEND_BATCH_MESSAGE bodies (§5.4): records of
 *   int32 TOTALSIZE, int32 MAGIC (0), int32 BODYCRC (0), int32 FLAG,
 *   int32 BODYLEN, body, int16 PROPLEN, properties
 * back to back. The broker recomputes CRCs and ignores MAGIC/BODYCRC as
 * Java does; TOTALSIZE must match the fields exactly.
 */
#include <errno.h>
#include <string.h>

#include "bytes_priv.h"
#include "wire/record.h"

int
wire_batch_next(const uint8_t *buf, size_t len, size_t *pos, struct wire_batch_item *it)
{
	const uint8_t *p;
	size_t left;
	uint32_t total;
	uint32_t body_len;
	int16_t props_len;

	if (*pos >= len)
		return 0;
	p = buf + *pos;
	left = len - *pos;
	if (left < WIRE_BATCH_ITEM_FIXED)
		return -EBADMSG;
	total = wire_ld_be32(p);
	if (total < WIRE_BATCH_ITEM_FIXED || total > left)
		return -EBADMSG;
	it->flag = (int32_t)wire_ld_be32(p + 12);
	body_len = wire_ld_be32(p + 16);
	if (body_len > total - WIRE_BATCH_ITEM_FIXED)
		return -EBADMSG;
	props_len = (int16_t)wire_ld_be16(p + 20 + body_len);
	if (props_len < 0 || (size_t)WIRE_BATCH_ITEM_FIXED + body_len + (size_t)props_len != total)
		return -EBADMSG;
	it->body = p + 20;
	it->body_len = body_len;
	it->props = (const char *)p + 22 + body_len;
	it->props_len = (uint16_t)props_len;
	*pos += total;
	return 1;
}

int
wire_batch_append(uint8_t *buf, size_t cap, size_t *len, const struct wire_batch_item *it)
{
	size_t total = (size_t)WIRE_BATCH_ITEM_FIXED + it->body_len + it->props_len;
	uint8_t *p;

	if (it->props_len > WIRE_PROPS_MAX || total > INT32_MAX)
		return -EINVAL;
	if (*len > cap || total > cap - *len)
		return -ENOBUFS;
	p = buf + *len;
	wire_st_be32(p, (uint32_t)total);
	wire_st_be32(p + 4, 0);
	wire_st_be32(p + 8, 0);
	wire_st_be32(p + 12, (uint32_t)it->flag);
	wire_st_be32(p + 16, it->body_len);
	if (it->body_len > 0)
		memcpy(p + 20, it->body, it->body_len);
	wire_st_be16(p + 20 + it->body_len, it->props_len);
	if (it->props_len > 0)
		memcpy(p + 22 + it->body_len, it->props, it->props_len);
	*len += total;
	return 0;
}
