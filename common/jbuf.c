// SPDX-License-Identifier: Apache-2.0
/*
 * jbuf.c - compact JSON output into a growable buffer (see jbuf.h).
 *
 * Strings are escaped as fastjson does for what the NameServer emits: '"',
 * '\\' and bytes below 0x20; other bytes (UTF-8) pass through, so a broker
 * name round-trips byte for byte.
 */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/jbuf.h"

#define JBUF_MIN_CAP 256

void
jbuf_init(struct jbuf *b)
{
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	b->err = 0;
}

void
jbuf_free(struct jbuf *b)
{
	free(b->p);
	jbuf_init(b);
}

int
jbuf_reserve(struct jbuf *b, size_t n)
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
jbuf_raw(struct jbuf *b, const void *s, size_t n)
{
	if (n == 0 || jbuf_reserve(b, n) != 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void
jbuf_str(struct jbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t *o;

	/* Worst case every byte becomes \u00XX. */
	if (n > (SIZE_MAX - 2) / 6 || jbuf_reserve(b, n * 6 + 2) != 0)
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
jbuf_i64(struct jbuf *b, int64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);

	jbuf_raw(b, tmp, (size_t)n);
}

void
jbuf_double(struct jbuf *b, double v)
{
	double m = fabs(v);
	char s[80];

	if (isnan(v) || isinf(v)) {
		jbuf_lit(b, "null");
		return;
	}
	if (m == 0.0 || (m >= 1e-3 && m < 1e7)) {
		/* Java's Double.toString (fastjson's form): plain, the fewest decimals that read back */
		for (int d = 1; d <= 17; d++) {
			snprintf(s, sizeof(s), "%.*f", d, v);
			if (strtod(s, NULL) == v)
				break;
		}
	} else {
		/* scientific: 1.0E20, 1.5E-5 */
		char t[48], *e;
		int p;

		for (p = 0; p < 17; p++) {
			snprintf(t, sizeof(t), "%.*e", p, v);
			if (strtod(t, NULL) == v)
				break;
		}
		e = strchr(t, 'e');
		*e = '\0';
		snprintf(s, sizeof(s), "%s%sE%d", t, strchr(t, '.') ? "" : ".0", atoi(e + 1));
	}
	jbuf_raw(b, s, strlen(s));
}

uint8_t *
jbuf_take(struct jbuf *b, size_t *len)
{
	uint8_t *p = b->p;

	*len = b->len;
	jbuf_init(b);
	return p;
}
