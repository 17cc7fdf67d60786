// SPDX-License-Identifier: Apache-2.0
/*
 * hmac.c - HMAC (RFC 2104) over OpenSSL's SHA-1, and base64 (RFC 4648), for
 * request signatures (hmac.h).
 *
 * SHA-1 is OpenSSL's low-level SHA1_Init/Update/Final: a plain struct on the
 * caller's stack, no allocation, and libcrypto's assembly (SHA-NI, AVX2)
 * picked for the CPU at run time - 10x the portable C this file had
 * (docs/benchmarks.md). OpenSSL 3 marks these calls deprecated in favour of
 * EVP, whose contexts are allocated: not for a dataplane core.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <string.h>

#include <openssl/sha.h>

#include "common/hmac.h"

void
sha1_init(struct sha1 *c)
{
	SHA1_Init(&c->ctx);
}

void
sha1_update(struct sha1 *c, const void *p, size_t n)
{
	SHA1_Update(&c->ctx, p, n);
}

void
sha1_final(struct sha1 *c, uint8_t out[SHA1_LEN])
{
	SHA1_Final(out, &c->ctx);
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

static int
b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

long
hmac_b64_decode(const char *in, char *out, size_t cap)
{
	uint32_t acc = 0;
	size_t n = 0;
	int bits = 0;

	for (; *in && *in != '='; in++) {
		int v = b64_val((unsigned char)*in);

		if (v < 0)
			return -EPROTO;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n + 1 >= cap)
				return -E2BIG;
			out[n++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[n] = '\0';
	return (long)n;
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
