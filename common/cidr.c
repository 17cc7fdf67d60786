// SPDX-License-Identifier: Apache-2.0
/*
 * cidr.c - IPv4 address and network lists (cidr.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cidr.h"

/* "a.b.c.d", each 0..255 in decimal. Return: true and the address in host order. */
static bool
quad(const char *s, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		unsigned o = 0, digits = 0;

		while (*s >= '0' && *s <= '9' && digits < 4) {
			o = o * 10 + (unsigned)(*s++ - '0');
			digits++;
		}
		if (digits == 0 || digits > 3 || o > 255)
			return false;
		v = v << 8 | o;
		if (i < 3 && *s++ != '.')
			return false;
	}
	if (*s != '\0')
		return false;
	*out = v;
	return true;
}

static int
item(const char *p, size_t n, struct cidr_list *out, char *why, size_t why_len)
{
	char buf[32];
	char *slash;
	long bits = 32;
	uint32_t a;

	if (n == 1 && p[0] == '*') {
		out->any = true;
		return 0;
	}
	if (n >= sizeof(buf))
		goto bad;
	memcpy(buf, p, n);
	buf[n] = '\0';
	slash = strchr(buf, '/');
	if (slash) {
		char *end;

		*slash = '\0';
		if (slash[1] < '0' || slash[1] > '9')
			goto bad;
		bits = strtol(slash + 1, &end, 10);
		if (*end != '\0' || bits < 0 || bits > 32)
			goto bad;
	}
	if (!quad(buf, &a))
		goto bad;
	if (out->n == CIDR_MAX) {
		snprintf(why, why_len, "more than %d addresses or networks", CIDR_MAX);
		return -EINVAL;
	}
	out->mask[out->n] = bits == 0 ? 0 : ~0u << (32 - bits);
	out->net[out->n] = a & out->mask[out->n];
	out->n++;
	return 0;
bad:
	snprintf(why, why_len, "'%.*s' is not an IPv4 address, ADDR/BITS or *",
		 (int)(n > 40 ? 40 : n), p);
	return -EINVAL;
}

int
cidr_list_parse(const char *s, struct cidr_list *out, char *why, size_t why_len)
{
	memset(out, 0, sizeof(*out));
	while (*s) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		int rc;

		while (n > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n > 0 && (rc = item(s, n, out, why, why_len)) != 0)
			return rc;
		if (n == 0 && e == NULL && out->n == 0 && !out->any)
			break;
		s = e ? e + 1 : s + strlen(s);
	}
	return 0;
}

bool
cidr_list_has(const struct cidr_list *l, uint32_t ip)
{
	const uint8_t *b = (const uint8_t *)&ip; /* network order */
	uint32_t h = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];

	if (l->any)
		return true;
	for (uint32_t i = 0; i < l->n; i++)
		if ((h & l->mask[i]) == l->net[i])
			return true;
	return false;
}
