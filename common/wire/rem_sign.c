// SPDX-License-Identifier: Apache-2.0
/*
 * rem_sign.c - RocketMQ's ACL signature of a remoting command (remoting.h).
 *
 * What RocketMQ 4.9's broker checks (PlainAccessValidator.parse and
 * AclUtils.combineRequestContent): the extFields sorted by key as Java's
 * TreeMap sorts Strings, without Signature and _UNIQUE_KEY_QUERY, their
 * values concatenated (UTF-8), then the body; HmacSHA1 with the account's
 * secretKey, base64. For keys of ASCII (all RocketMQ's are), byte order is
 * Java's String order; beyond it UTF-8 byte order is code point order, which
 * differs from Java's UTF-16 order only for supplementary characters.
 */
#include <string.h>

#include "wire/remoting.h"

static int
key_cmp(const struct wire_kv *a, const struct wire_kv *b)
{
	uint32_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c;

	/* RocketMQ's keys mostly differ in their first byte ("a".."n", "AccessKey") */
	if (n && a->key[0] != b->key[0])
		return (unsigned char)a->key[0] < (unsigned char)b->key[0] ? -1 : 1;
	c = memcmp(a->key, b->key, n);

	if (c)
		return c;
	return a->key_len < b->key_len ? -1 : a->key_len > b->key_len ? 1 : 0;
}

static bool
is_key(const struct wire_kv *kv, const char *k, size_t n)
{
	return kv->key_len == n && kv->key[0] == k[0] && memcmp(kv->key, k, n) == 0;
}

void
wire_rem_sign(const struct wire_rem_cmd *cmd, const struct hmac_sha1 *key,
	      char out[HMAC_B64_LEN + 1])
{
	const struct wire_kv *v[WIRE_REM_EXT_MAX];
	struct hmac_sha1 h = *key;
	uint8_t mac[SHA1_LEN];
	unsigned n = 0;

	for (unsigned i = 0; i < cmd->n_ext && i < WIRE_REM_EXT_MAX; i++) {
		const struct wire_kv *kv = &cmd->ext[i];
		unsigned j;

		if (is_key(kv, "Signature", 9) || is_key(kv, "_UNIQUE_KEY_QUERY", 17))
			continue;
		/* insertion sort: a header has a dozen fields */
		for (j = n; j > 0 && key_cmp(v[j - 1], kv) > 0; j--)
			v[j] = v[j - 1];
		v[j] = kv;
		n++;
	}
	/* values gathered, then hashed in one call: a call per short value costs more */
	{
		uint8_t buf[1024];
		size_t used = 0;

		for (unsigned i = 0; i < n; i++) {
			if (used + v[i]->val_len > sizeof(buf)) {
				hmac_sha1_update(&h, buf, used);
				used = 0;
			}
			if (v[i]->val_len > sizeof(buf)) {
				hmac_sha1_update(&h, v[i]->val, v[i]->val_len);
				continue;
			}
			memcpy(buf + used, v[i]->val, v[i]->val_len);
			used += v[i]->val_len;
		}
		if (used)
			hmac_sha1_update(&h, buf, used);
	}
	if (cmd->body_len)
		hmac_sha1_update(&h, cmd->body, cmd->body_len);
	hmac_sha1_final(&h, mac);
	(void)hmac_b64(mac, sizeof(mac), out);
}
