/* SPDX-License-Identifier: Apache-2.0 */
/* kv.h - a key/value view into a decoded buffer, shared by the wire codecs. */
#ifndef SP_WIRE_KV_H
#define SP_WIRE_KV_H

#include <stdint.h>

struct wire_kv {
	const char *key;
	const char *val;
	uint32_t key_len;
	uint32_t val_len;
};

#endif /* SP_WIRE_KV_H */
