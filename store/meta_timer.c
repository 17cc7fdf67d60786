// SPDX-License-Identifier: Apache-2.0
/*
 * meta_timer.c - the timerCheck file (meta_timer.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/meta_timer.h"

#define FILE_MAX (64u * 1024)

long
meta_timer_text(const char *header, const struct meta_timer_mark *m, size_t n, char *buf,
		size_t cap)
{
	size_t len = 0;
	int w = snprintf(buf, cap, "%s", header);

	if (w < 0 || (size_t)w >= cap)
		return -ENOBUFS;
	len = (size_t)w;
	for (size_t q = 0; q < n; q++) {
		if (m[q].done_ms < 0)
			continue;
		w = snprintf(buf + len, cap - len, "%zu %" PRId64 " %" PRIu64 " %" PRIu64 "\n", q,
			     m[q].done_ms, m[q].done_qoff, m[q].done_log);
		if (w < 0 || (size_t)w >= cap - len)
			return -ENOBUFS;
		len += (size_t)w;
	}
	return (long)len;
}

/* One decimal number ending at a space (@last: a newline or the end). */
static bool
number(const char **p, const char *end, bool last, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	while (s < end && *s >= '0' && *s <= '9') {
		if (v > ((uint64_t)INT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s++ - '0');
	}
	if (last ? (s < end && *s != '\n') : (s >= end || *s != ' '))
		return false;
	*p = s < end ? s + 1 : s;
	*out = v;
	return true;
}

int
meta_timer_parse(const char *txt, size_t len, struct meta_timer_mark *m, size_t n)
{
	const char *p = txt, *end = txt + len;

	for (size_t q = 0; q < n; q++)
		m[q] = (struct meta_timer_mark){.done_ms = -1};
	while (p < end) {
		uint64_t q, ms, qoff, log;

		if (*p == '\n') {
			p++;
			continue;
		}
		if (*p == '#') {
			while (p < end && *p != '\n')
				p++;
			continue;
		}
		if (!number(&p, end, false, &q) || !number(&p, end, false, &ms) ||
		    !number(&p, end, false, &qoff) || !number(&p, end, true, &log) || q >= n ||
		    m[q].done_ms >= 0)
			return -EBADMSG;
		m[q] = (struct meta_timer_mark){
			.done_ms = (int64_t)ms, .done_qoff = qoff, .done_log = log};
	}
	return 0;
}

int
meta_timer_save(const struct store_io_ops *io, const char *path, const char *header,
		const struct meta_timer_mark *m, size_t n)
{
	size_t cap = strlen(header) + 1 + n * 80;
	char *buf = malloc(cap);
	long len;
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	len = meta_timer_text(header, m, n, buf, cap);
	rc = len < 0 ? (int)len : store_io_write_atomic(io, path, buf, (size_t)len);
	free(buf);
	return rc;
}

int
meta_timer_load(const struct store_io_ops *io, const char *path, struct meta_timer_mark *m,
		size_t n)
{
	char *buf;
	size_t len;
	int rc = store_io_read_file(io, path, FILE_MAX, &buf, &len);

	if (rc == -ENOENT)
		return meta_timer_parse("", 0, m, n);
	if (rc != 0)
		return rc;
	rc = meta_timer_parse(buf, len, m, n);
	free(buf);
	return rc;
}
