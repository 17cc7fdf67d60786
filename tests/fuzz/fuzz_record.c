// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_record.c - message records, batch bodies, properties, msgIds, tags.
 *
 * The first byte picks the decoder. Oracles: a record that decodes must
 * re-encode to exactly its input bytes (RocketMQ readers parse sequentially,
 * so a lossy decode would mean two readers see two messages), and a batch
 * item re-appends to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wire/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[1 << 20];

static void
fuzz_rec(const uint8_t *p, size_t n, unsigned flags)
{
	struct wire_msg m;
	long len = wire_rec_decode(p, n, flags, &m);

	if (len <= 0)
		return;
	if ((size_t)len > sizeof(out))
		return;
	if (wire_rec_encode(&m, out, sizeof(out)) != len)
		abort();
	/* BODYCRC is recomputed on encode; compare it only when verified. */
	if (memcmp(out, p, 8) != 0 || memcmp(out + 12, p + 12, (size_t)len - 12) != 0)
		abort();
	if ((flags & WIRE_REC_VERIFY_CRC) && memcmp(out + 8, p + 8, 4) != 0)
		abort();
}

static void
fuzz_batch(const uint8_t *p, size_t n)
{
	struct wire_batch_item it;
	size_t pos = 0;
	size_t start = 0;

	while (wire_batch_next(p, n, &pos, &it) == 1) {
		size_t len = 0;

		if (wire_batch_append(out, sizeof(out), &len, &it) != 0 || len != pos - start)
			abort();
		if (memcmp(out + 12, p + start + 12, len - 12) != 0)
			abort();
		start = pos;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_kv kv;
	struct wire_host h;
	const char *v;
	size_t vlen;
	size_t pos = 0;
	int64_t off;
	char id[WIRE_MSGID_MAX];

	if (size < 1)
		return 0;
	switch (data[0] % 5) {
	case 0:
		fuzz_rec(data + 1, size - 1, WIRE_REC_VERIFY_CRC);
		break;
	case 1:
		fuzz_rec(data + 1, size - 1, 0);
		break;
	case 2:
		fuzz_batch(data + 1, size - 1);
		break;
	case 3:
		while (wire_props_next((const char *)data + 1, size - 1, &pos, &kv))
			(void)wire_tag_hash(kv.val, kv.val_len);
		(void)wire_props_get((const char *)data + 1, size - 1, "TAGS", &v, &vlen);
		break;
	case 4:
		if (wire_msgid_decode((const char *)data + 1, size - 1, &h, &off) == 0) {
			size_t n = wire_msgid_encode(&h, off, id);

			if (n != size - 1 || strncasecmp(id, (const char *)data + 1, n) != 0)
				abort();
		}
		break;
	}
	return 0;
}
