// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_acl.c - plain_acl.yml (common/acl.c, over libyaml) and the request
 * signature (common/wire/rem_sign.c).
 *
 * The input's first byte picks the target:
 *  - even: the rest is an ACL file. Oracle beyond "no crash, no leak": a
 *    file that parses has every account findable by its own key and by no
 *    prefix of it; a topic or group with no entry gets the account's default.
 *  - odd: the rest is a remoting frame. Oracle: when it decodes, its
 *    signature equals a reference computed the slow way (every value
 *    concatenated into one buffer in qsort order, then one HMAC), the way
 *    RocketMQ's AclUtils builds its content.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/acl.h"
#include "wire/remoting.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_file(const uint8_t *data, size_t size)
{
	struct acl *a;
	char why[256];

	if (acl_parse((const char *)data, size, &a, why, sizeof(why)) != 0)
		return;
	for (uint32_t i = 0; i < a->n; i++) {
		const struct acl_account *acc = &a->acc[i];
		size_t n = strlen(acc->ak);

		if (acl_find(a, acc->ak, n) != acc)
			abort();
		if (n > 1 && acl_find(a, acc->ak, n - 1) == acc)
			abort();
		if (acc->nres == 0 && !acc->admin &&
		    acl_allowed(acc, "\x01nothing", 8, false, ACL_PUB) !=
			    acl_perm_ok(ACL_PUB, acc->def_topic))
			abort();
		(void)acl_addrs_match(&acc->white, 0x0100007f);
	}
	(void)acl_addrs_match(&a->global, 0x0100007f);
	acl_free(a);
}

static const struct wire_kv *sort_base;

static int
kv_cmp(const void *x, const void *y)
{
	const struct wire_kv *a = *(const struct wire_kv *const *)x;
	const struct wire_kv *b = *(const struct wire_kv *const *)y;
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, n);

	if (c)
		return c;
	if (a->key_len != b->key_len)
		return a->key_len < b->key_len ? -1 : 1;
	return a < b ? -1 : a > b; /* equal keys: input order, as the insertion sort keeps */
}

static void
fuzz_sign(const uint8_t *data, size_t size)
{
	static struct wire_rem_cmd q;
	static char scratch[1 << 20];
	const struct wire_kv *v[WIRE_REM_EXT_MAX];
	struct hmac_sha1 key, h;
	char got[HMAC_B64_LEN + 1], want[HMAC_B64_LEN + 1];
	uint8_t mac[SHA1_LEN];
	uint8_t *buf;
	size_t n = 0, len = 0;

	if (size > sizeof(scratch) / 3 ||
	    wire_rem_decode(data, size, &q, scratch, sizeof(scratch)) != 0)
		return;
	hmac_sha1_key(&key, "fuzzsecret1", 11);
	wire_rem_sign(&q, &key, got);
	sort_base = q.ext;
	for (unsigned i = 0; i < q.n_ext && i < WIRE_REM_EXT_MAX; i++) {
		const struct wire_kv *kv = &q.ext[i];

		if ((kv->key_len == 9 && memcmp(kv->key, "Signature", 9) == 0) ||
		    (kv->key_len == 17 && memcmp(kv->key, "_UNIQUE_KEY_QUERY", 17) == 0))
			continue;
		v[n++] = kv;
		len += kv->val_len;
	}
	qsort(v, n, sizeof(v[0]), kv_cmp);
	buf = malloc(len + q.body_len + 1);
	if (!buf)
		abort();
	len = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + len, v[i]->val, v[i]->val_len);
		len += v[i]->val_len;
	}
	if (q.body_len)
		memcpy(buf + len, q.body, q.body_len);
	h = key;
	hmac_sha1_update(&h, buf, len + q.body_len);
	hmac_sha1_final(&h, mac);
	hmac_b64(mac, sizeof(mac), want);
	free(buf);
	if (strcmp(got, want) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_sign(data + 1, size - 1);
	else
		fuzz_file(data + 1, size - 1);
	return 0;
}
