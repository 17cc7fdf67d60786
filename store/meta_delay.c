// SPDX-License-Identifier: Apache-2.0
/*
 * meta_delay.c - delayOffset.json (meta_delay.h). json-c refuses fastjson's
 * unquoted Integer keys, so this tiny grammar is read by hand:
 *   { "offsetTable" : { KEY : INT (, KEY : INT)* } }   KEY = INT | "INT"
 */
#include "store/meta_delay.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define META_DELAY_FILE_MAX (1u << 20)

long
meta_delay_json(const int64_t *off, size_t n, char *buf, size_t cap)
{
	size_t at = 0;
	bool first = true;
	int w;

	w = snprintf(buf, cap, "{\"offsetTable\":{");
	if (w < 0 || (size_t)w >= cap)
		return -ENOBUFS;
	at = (size_t)w;
	for (size_t i = 0; i < n; i++) {
		if (off[i] < 0)
			continue;
		w = snprintf(buf + at, cap - at, "%s%zu:%lld", first ? "" : ",", i + 1,
			     (long long)off[i]);
		if (w < 0 || (size_t)w >= cap - at)
			return -ENOBUFS;
		at += (size_t)w;
		first = false;
	}
	w = snprintf(buf + at, cap - at, "}}");
	if (w < 0 || (size_t)w >= cap - at)
		return -ENOBUFS;
	return (long)(at + (size_t)w);
}

struct rd {
	const char *p;
	const char *end;
};

static void
ws(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static bool
eat(struct rd *r, char ch)
{
	ws(r);
	if (r->p < r->end && *r->p == ch) {
		r->p++;
		return true;
	}
	return false;
}

static bool
word(struct rd *r, const char *w)
{
	ws(r);
	for (; *w; w++, r->p++)
		if (r->p >= r->end || *r->p != *w)
			return false;
	return true;
}

/* A decimal integer, optionally quoted, in [lo, hi]. */
static bool
num(struct rd *r, bool quotes_ok, int64_t lo, int64_t hi, int64_t *out)
{
	bool q = quotes_ok && eat(r, '"');
	bool neg = false;
	int64_t v = 0;
	int digits = 0;

	ws(r);
	if (!q && r->p < r->end && *r->p == '-') {
		neg = true;
		r->p++;
	}
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
		int d = *r->p - '0';

		if (v > (INT64_MAX - d) / 10)
			return false; /* past int64: no offset is that large */
		v = v * 10 + d;
		r->p++;
		digits++;
	}
	if (digits == 0)
		return false;
	if (neg)
		v = -v;
	if (q && !eat(r, '"'))
		return false;
	if (v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

int
meta_delay_parse(const char *json, size_t len, int64_t *off, size_t n)
{
	struct rd r = {json, json + len};

	for (size_t i = 0; i < n; i++)
		off[i] = -1;
	if (!eat(&r, '{') || !word(&r, "\"offsetTable\"") || !eat(&r, ':') || !eat(&r, '{'))
		return -EBADMSG;
	if (!eat(&r, '}')) {
		do {
			int64_t k, v;

			if (!num(&r, true, 1, (int64_t)n, &k) || !eat(&r, ':') ||
			    !num(&r, false, 0, INT64_MAX, &v))
				return -EBADMSG;
			off[k - 1] = v;
		} while (eat(&r, ','));
		if (!eat(&r, '}'))
			return -EBADMSG;
	}
	if (!eat(&r, '}'))
		return -EBADMSG;
	ws(&r);
	return r.p == r.end ? 0 : -EBADMSG;
}

int
meta_delay_save(const struct store_io_ops *io, const char *path, const int64_t *off, size_t n)
{
	size_t cap = 32 + n * 32;
	char *buf = malloc(cap);
	long len;
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	len = meta_delay_json(off, n, buf, cap);
	rc = len < 0 ? (int)len : store_io_write_atomic(io, path, buf, (size_t)len);
	free(buf);
	return rc;
}

int
meta_delay_load(const struct store_io_ops *io, const char *path, int64_t *off, size_t n)
{
	char *buf;
	size_t len;
	int rc = store_io_read_file(io, path, META_DELAY_FILE_MAX, &buf, &len);

	if (rc == -ENOENT) {
		for (size_t i = 0; i < n; i++)
			off[i] = -1;
		return 0;
	}
	if (rc != 0)
		return rc;
	rc = meta_delay_parse(buf, len, off, n);
	free(buf);
	return rc;
}
