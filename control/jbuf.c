// SPDX-License-Identifier: Apache-2.0
/*
 * jbuf.c - compact JSON output into a growable buffer (see jbuf_priv.h).
 *
 * Strings are escaped as fastjson does for what the NameServer emits: '"',
 * '\\' and bytes below 0x20; other bytes (UTF-8) pass through, so a broker
 * name round-trips byte for byte.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "jbuf_priv.h"

#define JBUF_MIN_CAP 256

void
ctl_jbuf_init(struct ctl_jbuf *b)
{
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	b->err = 0;
}

void
ctl_jbuf_free(struct ctl_jbuf *b)
{
	free(b->p);
	ctl_jbuf_init(b);
}

int
ctl_jbuf_reserve(struct ctl_jbuf *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->err != 0)
		return b->err;
	if (n <= b->cap - b->len)
		return 0;
	cap = b->cap ? b->cap : JBUF_MIN_CAP;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2) {
			b->err = -ENOMEM;
			return b->err;
		}
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (p == NULL) {
		b->err = -ENOMEM;
		return b->err;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void
ctl_jbuf_raw(struct ctl_jbuf *b, const void *s, size_t n)
{
	if (n == 0 || ctl_jbuf_reserve(b, n) != 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void
ctl_jbuf_str(struct ctl_jbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t *o;

	/* Worst case every byte becomes \u00XX. */
	if (n > (SIZE_MAX - 2) / 6 || ctl_jbuf_reserve(b, n * 6 + 2) != 0)
		return;
	o = b->p + b->len;
	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)s[i];

		if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = c;
		} else if (c < 0x20) {
			*o++ = '\\';
			*o++ = 'u';
			*o++ = '0';
			*o++ = '0';
			*o++ = (uint8_t)hex[c >> 4];
			*o++ = (uint8_t)hex[c & 15];
		} else {
			*o++ = c;
		}
	}
	*o++ = '"';
	b->len = (size_t)(o - b->p);
}

void
ctl_jbuf_i64(struct ctl_jbuf *b, int64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);

	ctl_jbuf_raw(b, tmp, (size_t)n);
}

uint8_t *
ctl_jbuf_take(struct ctl_jbuf *b, size_t *len)
{
	uint8_t *p = b->p;

	*len = b->len;
	ctl_jbuf_init(b);
	return p;
}
