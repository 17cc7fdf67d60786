// SPDX-License-Identifier: Apache-2.0
/*
 * msgid.c - offset message ids (§5.3): uppercase hex of the store host's
 * address, its port (int32) and the record's PHYSICALOFFSET (int64). 32 hex
 * characters for IPv4, 56 for IPv6. Clients hand them back in
 * VIEW_MESSAGE_BY_ID, so decoding must reject anything not exactly that.
 */
#include <errno.h>
#include <string.h>

#include "bytes_priv.h"
#include "wire/record.h"

static const char msgid_hex[] = "0123456789ABCDEF";

/* Appends @v in decimal at @out[*at] within @len (keeping room for the NUL). */
static void
put_dec(char *out, size_t len, size_t *at, unsigned v)
{
	char d[10];
	size_t n = 0;

	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && *at + 1 < len)
		out[(*at)++] = d[--n];
}

static void
put_str(char *out, size_t len, size_t *at, const char *s)
{
	while (*s && *at + 1 < len)
		out[(*at)++] = *s++;
}

void
wire_host_format(const struct wire_host *h, char *out, size_t len)
{
	size_t at = 0;

	if (len == 0)
		return;
	if (h->v6) {
		put_str(out, len, &at, "[ipv6]");
	} else {
		for (int i = 0; i < 4; i++) {
			if (i)
				put_str(out, len, &at, ".");
			put_dec(out, len, &at, h->addr[i]);
		}
	}
	put_str(out, len, &at, ":");
	put_dec(out, len, &at, h->port);
	out[at] = '\0';
}

size_t
wire_msgid_encode(const struct wire_host *store_host, int64_t phys_offset, char out[WIRE_MSGID_MAX])
{
	uint8_t raw[28];
	size_t alen = store_host->v6 ? 16 : 4;
	size_t n = alen + 12;

	memcpy(raw, store_host->addr, alen);
	wire_st_be32(raw + alen, store_host->port);
	wire_st_be64(raw + alen + 4, (uint64_t)phys_offset);
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = msgid_hex[raw[i] >> 4];
		out[2 * i + 1] = msgid_hex[raw[i] & 0xF];
	}
	out[2 * n] = '\0';
	return 2 * n;
}

static int
msgid_nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int
wire_msgid_decode(const char *id, size_t len, struct wire_host *store_host, int64_t *phys_offset)
{
	uint8_t raw[28];
	size_t alen;

	if (len == WIRE_MSGID_V4_LEN)
		alen = 4;
	else if (len == WIRE_MSGID_V6_LEN)
		alen = 16;
	else
		return -EINVAL;
	for (size_t i = 0; i < len / 2; i++) {
		int hi = msgid_nibble(id[2 * i]);
		int lo = msgid_nibble(id[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		raw[i] = (uint8_t)(hi << 4 | lo);
	}
	memset(store_host->addr, 0, sizeof(store_host->addr));
	memcpy(store_host->addr, raw, alen);
	store_host->v6 = alen == 16;
	store_host->port = wire_ld_be32(raw + alen);
	*phys_offset = (int64_t)wire_ld_be64(raw + alen + 4);
	return 0;
}
