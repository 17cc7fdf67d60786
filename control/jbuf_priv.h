/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jbuf_priv.h - a growable byte buffer that writes compact JSON.
 *
 * Every route and cluster body the NameServer sends is written here by hand
 * rather than through json-c: the shapes are fixed, the output must be
 * fastjson's (keys in alphabetical order, no blanks, quoted map keys), and a
 * route lookup is on the io thread's hot path. Errors are sticky: after an
 * allocation failure every call is a no-op and ctl_jbuf_err() says -ENOMEM,
 * so writers check once at the end.
 *
 * Ownership: one thread builds a buffer; ctl_jbuf_take() hands the bytes on.
 */
#ifndef SP_CONTROL_JBUF_PRIV_H
#define SP_CONTROL_JBUF_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct ctl_jbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
	int err; /* 0 or -ENOMEM, sticky */
};

void ctl_jbuf_init(struct ctl_jbuf *b);
void ctl_jbuf_free(struct ctl_jbuf *b);
/* Reserve @n more bytes; Return: 0 or -ENOMEM (also made sticky). */
int ctl_jbuf_reserve(struct ctl_jbuf *b, size_t n);
void ctl_jbuf_raw(struct ctl_jbuf *b, const void *s, size_t n);
/* A JSON string: quotes, escapes for '"', '\\' and control bytes. */
void ctl_jbuf_str(struct ctl_jbuf *b, const char *s, size_t n);
void ctl_jbuf_i64(struct ctl_jbuf *b, int64_t v);
/* Return: the bytes (malloc'd, caller frees) and their length; @b is reset. */
uint8_t *ctl_jbuf_take(struct ctl_jbuf *b, size_t *len);

static inline void
ctl_jbuf_lit(struct ctl_jbuf *b, const char *s)
{
	ctl_jbuf_raw(b, s, strlen(s));
}

static inline void
ctl_jbuf_cstr(struct ctl_jbuf *b, const char *s)
{
	ctl_jbuf_str(b, s, strlen(s));
}

#endif /* SP_CONTROL_JBUF_PRIV_H */
