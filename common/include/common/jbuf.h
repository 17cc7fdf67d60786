/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jbuf.h - a growable byte buffer that writes compact JSON.
 *
 * Every route and cluster body the NameServer sends, and the broker's admin
 * bodies, are written here by hand rather than through json-c: the shapes are
 * fixed, the output must be fastjson's (keys in alphabetical order, no blanks,
 * maps keyed by objects), and a route lookup is on the io thread's hot path. Errors are sticky: after an
 * allocation failure every call is a no-op and jbuf_err() says -ENOMEM,
 * so writers check once at the end.
 *
 * Ownership: one thread builds a buffer; jbuf_take() hands the bytes on.
 */
#ifndef SP_COMMON_JBUF_H
#define SP_COMMON_JBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct jbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
	int err; /* 0 or -ENOMEM, sticky */
};

void jbuf_init(struct jbuf *b);
void jbuf_free(struct jbuf *b);
/* Reserve @n more bytes; Return: 0 or -ENOMEM (also made sticky). */
int jbuf_reserve(struct jbuf *b, size_t n);
void jbuf_raw(struct jbuf *b, const void *s, size_t n);
/* A JSON string: quotes, escapes for '"', '\\' and control bytes. */
void jbuf_str(struct jbuf *b, const char *s, size_t n);
void jbuf_i64(struct jbuf *b, int64_t v);
/* fastjson's double: the shortest round-trip form, always with a fraction ("0.0", "9.95"); NaN and infinities are null. */
void jbuf_double(struct jbuf *b, double v);
/* Return: the bytes (malloc'd, caller frees) and their length; @b is reset. */
uint8_t *jbuf_take(struct jbuf *b, size_t *len);

static inline void
jbuf_lit(struct jbuf *b, const char *s)
{
	jbuf_raw(b, s, strlen(s));
}

static inline void
jbuf_cstr(struct jbuf *b, const char *s)
{
	jbuf_str(b, s, strlen(s));
}

/* `"key":` (@k is a literal: no escaping). */
static inline void
jbuf_key(struct jbuf *b, const char *k)
{
	jbuf_raw(b, "\"", 1);
	jbuf_raw(b, k, strlen(k));
	jbuf_raw(b, "\":", 2);
}

static inline void
jbuf_bool(struct jbuf *b, bool v)
{
	jbuf_lit(b, v ? "true" : "false");
}

/* `"key":value` members (@k a literal, @v escaped). */
static inline void
jbuf_kv_str(struct jbuf *b, const char *k, const char *v)
{
	jbuf_key(b, k);
	jbuf_cstr(b, v);
}

static inline void
jbuf_kv_i64(struct jbuf *b, const char *k, int64_t v)
{
	jbuf_key(b, k);
	jbuf_i64(b, v);
}

/* Drops a trailing ',' (after the last member of an object or array). */
static inline void
jbuf_uncomma(struct jbuf *b)
{
	if (b->err == 0 && b->len > 0 && b->p[b->len - 1] == ',')
		b->len--;
}

#endif /* SP_COMMON_JBUF_H */
