// SPDX-License-Identifier: Apache-2.0
/*
 * test_hmac.c - SHA-1 (FIPS 180 examples, a million 'a's, every split of the
 * input), HMAC-SHA1 (RFC 2202's seven cases), base64 (RFC 4648 §10) and the
 * constant-time comparison.
 */
#include <stdio.h>
#include <string.h>

#include "common/hmac.h"
#include "harness.h"

static void
hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void
sha1_of(const void *p, size_t n, char out[41])
{
	struct sha1 c;
	uint8_t d[SHA1_LEN];

	sha1_init(&c);
	sha1_update(&c, p, n);
	sha1_final(&c, d);
	hex(d, sizeof(d), out);
}

static void
test_sha1(void)
{
	static const char *abc2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char h[41];
	struct sha1 c;
	uint8_t d[SHA1_LEN];
	static uint8_t a[1000];

	sha1_of("", 0, h);
	T_ASSERT_STREQ(h, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	sha1_of("abc", 3, h);
	T_ASSERT_STREQ(h, "a9993e364706816aba3e25717850c26c9cd0d89d");
	sha1_of(abc2, strlen(abc2), h);
	T_ASSERT_STREQ(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	memset(a, 'a', sizeof(a));
	sha1_init(&c);
	for (int i = 0; i < 1000; i++)
		sha1_update(&c, a, sizeof(a));
	sha1_final(&c, d);
	hex(d, sizeof(d), h);
	T_ASSERT_STREQ(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	/* every split point of a 56-byte input (padding crosses a block) */
	for (size_t cut = 0; cut <= strlen(abc2); cut++) {
		sha1_init(&c);
		sha1_update(&c, abc2, cut);
		sha1_update(&c, abc2 + cut, strlen(abc2) - cut);
		sha1_final(&c, d);
		hex(d, sizeof(d), h);
		T_ASSERT_STREQ(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	}
}

static void
test_rfc2202(void)
{
	static uint8_t k3[20], d3[50], k4[25], d4[50], k6[80];
	struct {
		const void *key;
		size_t klen;
		const void *data;
		size_t dlen;
		const char *mac;
	} v[7] = {
		{"\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b",
		 20, "Hi There", 8, "b617318655057264e28bc0b6fb378c8ef146be00"},
		{"Jefe", 4, "what do ya want for nothing?", 28,
		 "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
		{k3, 20, d3, 50, "125d7342b9ac11cd91a39af48aa17b4f63f175d3"},
		{k4, 25, d4, 50, "4c9007f4026250c6bc8414f9bf50c86c2d7235da"},
		{"\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c",
		 20, "Test With Truncation", 20, "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"},
		{k6, 80, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
		 "aa4ae5e15272d00e95705637ce8a3b55ed402112"},
		{k6, 80,
		 "Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data", 73,
		 "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"},
	};

	memset(k3, 0xaa, sizeof(k3));
	memset(d3, 0xdd, sizeof(d3));
	for (int i = 0; i < 25; i++)
		k4[i] = (uint8_t)(i + 1);
	memset(d4, 0xcd, sizeof(d4));
	memset(k6, 0xaa, sizeof(k6));
	for (int i = 0; i < 7; i++) {
		struct hmac_sha1 key, h;
		uint8_t d[SHA1_LEN];
		char s[41];

		hmac_sha1_key(&key, v[i].key, v[i].klen);
		h = key; /* a prepared key is reused by copy */
		hmac_sha1_update(&h, v[i].data, v[i].dlen);
		hmac_sha1_final(&h, d);
		hex(d, sizeof(d), s);
		T_ASSERT_STREQ(s, v[i].mac);
		h = key;
		for (size_t k = 0; k < v[i].dlen; k++)
			hmac_sha1_update(&h, (const uint8_t *)v[i].data + k, 1);
		hmac_sha1_final(&h, d);
		hex(d, sizeof(d), s);
		T_ASSERT_STREQ(s, v[i].mac);
	}
}

static void
test_b64(void)
{
	static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	char b[16];

	for (int i = 0; i < 7; i++) {
		size_t n = hmac_b64((const uint8_t *)in[i], strlen(in[i]), b);

		T_ASSERT_STREQ(b, out[i]);
		T_ASSERT_EQ(n, strlen(out[i]));
	}
	T_ASSERT(hmac_equal("abcdef", "abcdef", 6));
	T_ASSERT(!hmac_equal("abcdef", "abcdeg", 6));
	T_ASSERT(!hmac_equal("xbcdef", "abcdef", 6));
	T_ASSERT(hmac_equal("", "x", 0));
}

T_MAIN(T_CASE(test_sha1), T_CASE(test_rfc2202), T_CASE(test_b64))
