/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hmac.h - SHA-1, HMAC-SHA1 and base64: what RocketMQ's ACL signs requests
 * with (AclSigner: HmacSHA1 over the request content, base64), and what a
 * dataplane session proves its credentials with (docs/security.md).
 *
 * A dataplane core uses it: no allocation, no locks, no global state, state
 * on the caller's stack (SHA-1 is OpenSSL's low-level API, hmac.c). A keyed
 * state (hmac_sha1_key) is prepared once per secret and copied per message,
 * so a verification costs one SHA-1 pass over the content, one block more,
 * and no re-keying. Checked against RFC 2202's vectors and against Java's
 * javax.crypto HmacSHA1 (tests/vectors/acl/).
 */
#ifndef SP_COMMON_HMAC_H
#define SP_COMMON_HMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>

#define SHA1_LEN 20
#define HMAC_B64_LEN 28 /* base64 of a SHA-1 digest, without the NUL */

struct sha1 {
	SHA_CTX ctx;
};

void sha1_init(struct sha1 *c);
void sha1_update(struct sha1 *c, const void *p, size_t n);
void sha1_final(struct sha1 *c, uint8_t out[SHA1_LEN]);

/* A secret absorbed into the inner and outer states; copy it per message. */
struct hmac_sha1 {
	struct sha1 in;
	struct sha1 out;
};

/* Context: any thread; @key of any length (longer than 64 bytes is hashed, RFC 2104). */
void hmac_sha1_key(struct hmac_sha1 *h, const void *key, size_t key_len);
void hmac_sha1_update(struct hmac_sha1 *h, const void *p, size_t n);
/* Finishes @h (it cannot be updated again) into @out. */
void hmac_sha1_final(struct hmac_sha1 *h, uint8_t out[SHA1_LEN]);

/*
 * hmac_b64() - standard base64 with padding (RFC 4648 §4) of @n bytes into
 * @out, NUL-terminated; @out holds 4 * ((n + 2) / 3) + 1 bytes.
 * Return: characters written (without the NUL).
 */
size_t hmac_b64(const uint8_t *in, size_t n, char *out);
/*
 * hmac_b64_decode() - base64 (standard or URL-safe alphabet; decoding stops at
 * the first '=') of @in into @out, NUL-terminated within @cap bytes.
 * Return: bytes decoded, -EPROTO a character outside the alphabet, -E2BIG.
 */
long hmac_b64_decode(const char *in, char *out, size_t cap);

/* Return: @a and @b (@n bytes each) are equal; time independent of where they differ. */
bool hmac_equal(const void *a, const void *b, size_t n);

#endif /* SP_COMMON_HMAC_H */
