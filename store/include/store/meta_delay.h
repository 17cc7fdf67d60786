/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta_delay.h - delayOffset.json: how far each SCHEDULE_TOPIC_XXXX queue has
 * been delivered, in RocketMQ's text ({"offsetTable":{1:0,2:5}}, keys
 * queue id + 1 as fastjson writes Integer keys: unquoted), which a master
 * also answers GET_ALL_DELAY_OFFSET (45) with. docs/messages.md.
 */
#ifndef SP_STORE_META_DELAY_H
#define SP_STORE_META_DELAY_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/io.h"

#define META_DELAY_KEYS_MAX 4096u /* queue ids 0 .. 4095 */

/*
 * meta_delay_json() - the text for @n offsets (@off[i] of queue i; entries
 * < 0 are left out). Return: bytes written (without NUL), -ENOBUFS.
 */
MUST_CHECK long meta_delay_json(const int64_t *off, size_t n, char *buf, size_t cap);

/*
 * meta_delay_parse() - read the text: @off[i] = the offset of queue i, -1
 * where absent. Keys quoted or not, any whitespace, fastjson's pretty form
 * too. Return: 0, -EBADMSG not that shape, a key outside 1..@n, a negative
 * offset.
 */
MUST_CHECK int meta_delay_parse(const char *json, size_t len, int64_t *off, size_t n);

/* The file: replaced atomically; a missing file loads as all -1. Return: 0 or -errno. */
MUST_CHECK int meta_delay_save(const struct store_io_ops *io, const char *path, const int64_t *off,
			       size_t n);
MUST_CHECK int meta_delay_load(const struct store_io_ops *io, const char *path, int64_t *off,
			       size_t n);

#endif /* SP_STORE_META_DELAY_H */
