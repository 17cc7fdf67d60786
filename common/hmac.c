// SPDX-License-Identifier: Apache-2.0
/*
 * hmac.c - SHA-1 (FIPS 180-4), HMAC (RFC 2104) and base64 (RFC 4648) for
 * request signatures (hmac.h).
 */
#include <string.h>

#include "common/hmac.h"

static inline uint32_t
rol(uint32_t x, unsigned n)
{
	return x << n | x >> (32 - n);
}

static void
sha1_block(uint32_t h[5], const uint8_t *p)
{
	uint32_t w[80];
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k, t;

		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5A827999u;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ED9EBA1u;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8F1BBCDCu;
		} else {
			f = b ^ c ^ d;
			k = 0xCA62C1D6u;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void
sha1_init(struct sha1 *c)
{
	c->h[0] = 0x67452301u;
	c->h[1] = 0xEFCDAB89u;
	c->h[2] = 0x98BADCFEu;
	c->h[3] = 0x10325476u;
	c->h[4] = 0xC3D2E1F0u;
	c->len = 0;
}

void
sha1_update(struct sha1 *c, const void *p, size_t n)
{
	const uint8_t *s = p;
	size_t have = (size_t)(c->len % 64);

	c->len += n;
	if (have) {
		size_t take = 64 - have < n ? 64 - have : n;

		memcpy(c->buf + have, s, take);
		s += take;
		n -= take;
		if (have + take < 64)
			return;
		sha1_block(c->h, c->buf);
	}
	for (; n >= 64; s += 64, n -= 64)
		sha1_block(c->h, s);
	if (n)
		memcpy(c->buf, s, n);
}

void
sha1_final(struct sha1 *c, uint8_t out[SHA1_LEN])
{
	uint64_t bits = c->len * 8;
	size_t have = (size_t)(c->len % 64);

	c->buf[have++] = 0x80;
	if (have > 56) {
		memset(c->buf + have, 0, 64 - have);
		sha1_block(c->h, c->buf);
		have = 0;
	}
	memset(c->buf + have, 0, 56 - have);
	for (int i = 0; i < 8; i++)
		c->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_block(c->h, c->buf);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void
hmac_sha1_key(struct hmac_sha1 *h, const void *key, size_t key_len)
{
	uint8_t k[64] = {0};
	uint8_t pad[64];

	if (key_len > 64) {
		struct sha1 t;

		sha1_init(&t);
		sha1_update(&t, key, key_len);
		sha1_final(&t, k);
	} else if (key_len) {
		memcpy(k, key, key_len);
	}
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	sha1_init(&h->in);
	sha1_update(&h->in, pad, 64);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	sha1_init(&h->out);
	sha1_update(&h->out, pad, 64);
	memset(k, 0, sizeof(k));
}

void
hmac_sha1_update(struct hmac_sha1 *h, const void *p, size_t n)
{
	sha1_update(&h->in, p, n);
}

void
hmac_sha1_final(struct hmac_sha1 *h, uint8_t out[SHA1_LEN])
{
	uint8_t inner[SHA1_LEN];

	sha1_final(&h->in, inner);
	sha1_update(&h->out, inner, sizeof(inner));
	sha1_final(&h->out, out);
}

size_t
hmac_b64(const uint8_t *in, size_t n, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

bool
hmac_equal(const void *a, const void *b, size_t n)
{
	const volatile uint8_t *x = a;
	const volatile uint8_t *y = b;
	uint8_t d = 0;

	for (size_t i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}
