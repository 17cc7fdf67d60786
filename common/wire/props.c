// SPDX-License-Identifier: Apache-2.0
/*
 * props.c - RocketMQ property strings (§5.2) and the tag hash (§5.6).
 *
 * "name\1value\2name\1value\2": Java 4.9.8 writes no trailing \2, older
 * clients and ali-ons do; both parse the same here. An item is used only when
 * Java would use it (at least 3 bytes, \1 neither first nor last), and a later
 * duplicate wins, so sprocket and Java clients agree on every string.
 *
 * The tag hash is Java's String.hashCode() over UTF-16 code units, which is
 * what RocketMQ stores as the ConsumeQueue tagsCode and what clients send as
 * subscription codeSet: sprocket must produce the same int32 from UTF-8.
 */
#include <errno.h>
#include <string.h>

#include "wire/record.h"

bool
wire_props_next(const char *props, size_t len, size_t *pos, struct wire_kv *kv)
{
	while (*pos < len) {
		const char *item = props + *pos;
		const char *sep_item = memchr(item, WIRE_PROP_SEP_ITEM, len - *pos);
		size_t ilen = sep_item ? (size_t)(sep_item - item) : len - *pos;
		const char *sep_kv;

		*pos += ilen + (sep_item ? 1 : 0);
		if (ilen < 3)
			continue;
		sep_kv = memchr(item, WIRE_PROP_SEP_KV, ilen);
		if (sep_kv == NULL || sep_kv == item || sep_kv == item + ilen - 1)
			continue;
		kv->key = item;
		kv->key_len = (uint32_t)(sep_kv - item);
		kv->val = sep_kv + 1;
		kv->val_len = (uint32_t)(ilen - kv->key_len - 1);
		return true;
	}
	return false;
}

bool
wire_props_get(const char *props, size_t len, const char *key, const char **val, size_t *val_len)
{
	size_t klen = strlen(key);
	size_t pos = 0;
	struct wire_kv kv;
	bool found = false;

	while (wire_props_next(props, len, &pos, &kv)) {
		if (kv.key_len == klen && memcmp(kv.key, key, klen) == 0) {
			*val = kv.val;
			*val_len = kv.val_len;
			found = true;
		}
	}
	return found;
}

int
wire_props_append(char *buf, size_t cap, size_t *len, const char *key, size_t key_len,
		  const char *val, size_t val_len)
{
	size_t need = key_len + 1 + val_len + 1;

	if (key_len == 0 || memchr(key, WIRE_PROP_SEP_KV, key_len) ||
	    memchr(key, WIRE_PROP_SEP_ITEM, key_len) || memchr(val, WIRE_PROP_SEP_ITEM, val_len))
		return -EINVAL;
	if (cap > WIRE_PROPS_MAX)
		cap = WIRE_PROPS_MAX;
	if (*len > cap || need > cap - *len)
		return -ENOBUFS;
	memcpy(buf + *len, key, key_len);
	buf[*len + key_len] = WIRE_PROP_SEP_KV;
	memcpy(buf + *len + key_len + 1, val, val_len);
	buf[*len + need - 1] = WIRE_PROP_SEP_ITEM;
	*len += need;
	return 0;
}

bool
wire_props_get_uint(const char *props, size_t len, const char *key, uint64_t *out)
{
	const char *v;
	size_t vl;
	uint64_t x = 0;

	if (!wire_props_get(props, len, key, &v, &vl) || vl == 0)
		return false;
	for (size_t i = 0; i < vl; i++) {
		uint64_t d = (uint64_t)(v[i] - '0');

		if (v[i] < '0' || v[i] > '9')
			return false;
		x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
	}
	*out = x;
	return true;
}

int
wire_props_copy_except(char *dst, size_t cap, size_t *len, const char *props, size_t plen,
		       const char *const *skip)
{
	struct wire_kv kv;
	size_t pos = 0;

	*len = 0;
	while (wire_props_next(props, plen, &pos, &kv)) {
		bool drop = false;

		for (unsigned i = 0; skip[i] != NULL && !drop; i++)
			drop = kv.key_len == strlen(skip[i]) &&
			       memcmp(kv.key, skip[i], kv.key_len) == 0;
		if (!drop &&
		    wire_props_append(dst, cap, len, kv.key, kv.key_len, kv.val, kv.val_len) != 0)
			return -ENOBUFS;
	}
	return 0;
}

/*
 * Decode one UTF-8 sequence at s[0..n). Malformed input yields U+FFFD, as
 * Java's decoder does: one per stray byte, one per truncated sequence (the
 * lead and its continuation bytes). Overlongs and surrogates consume the
 * whole sequence here where Java may emit several; tags are ASCII in practice.
 */
static uint32_t
utf8_next(const unsigned char *s, size_t n, size_t *used)
{
	uint32_t cp;
	size_t need;
	uint32_t min;

	*used = 1;
	if (s[0] < 0x80)
		return s[0];
	if ((s[0] & 0xE0) == 0xC0) {
		cp = s[0] & 0x1F;
		need = 1;
		min = 0x80;
	} else if ((s[0] & 0xF0) == 0xE0) {
		cp = s[0] & 0x0F;
		need = 2;
		min = 0x800;
	} else if ((s[0] & 0xF8) == 0xF0) {
		cp = s[0] & 0x07;
		need = 3;
		min = 0x10000;
	} else {
		return 0xFFFD;
	}
	for (size_t i = 1; i <= need; i++) {
		/* Truncated or broken: one U+FFFD for the lead and the continuations seen. */
		if (i >= n || (s[i] & 0xC0) != 0x80) {
			*used = i;
			return 0xFFFD;
		}
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	*used = need + 1;
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0xFFFD;
	return cp;
}

int32_t
wire_tag_hash(const char *utf8, size_t len)
{
	const unsigned char *s = (const unsigned char *)utf8;
	uint32_t h = 0; /* unsigned: Java's int wraps, C's signed overflow is UB */
	size_t i = 0;

	while (i < len) {
		size_t used;
		uint32_t cp = utf8_next(s + i, len - i, &used);

		i += used;
		if (cp >= 0x10000) {
			cp -= 0x10000;
			h = 31 * h + (0xD800 + (cp >> 10));
			h = 31 * h + (0xDC00 + (cp & 0x3FF));
		} else {
			h = 31 * h + cp;
		}
	}
	return (int32_t)h;
}

bool
wire_topic_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > WIRE_TOPIC_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '%' || c == '|' || c == '_' || c == '-'))
			return false;
	}
	return true;
}
