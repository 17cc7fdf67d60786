/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta_int.h - what meta.c shares with meta_journal.c: one topic to and from
 * its TopicConfig JSON, the strict parser, the dataVersion object.
 */
#ifndef SP_STORE_META_INT_H
#define SP_STORE_META_INT_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "store/meta.h"

/* A topic name's hash, for the indexes by name of topics.json's writer and the journal. */
uint32_t meta__name_hash(const char *s);
/* Return: 0, -ENOMEM. */
int meta__topic_to_json(const struct meta_topic *t, struct json_object **out);
/* @o is topic @key's TopicConfig. Return: 0, -EBADMSG (a field missing, mistyped or out of range). */
int meta__topic_from_json(const char *key, struct json_object *o, struct meta_topic *t);
/* One JSON object, strict, depth-limited, nothing but blanks after it. Return: 0, -EBADMSG, -EFBIG, -ENOMEM. */
int meta__json_parse(const char *buf, size_t len, struct json_object **root);
/* @root's "dataVersion" (zeros when absent). Return: 0, -EBADMSG. */
int meta__version_from_json(struct json_object *root, struct meta_version *ver);

#endif /* SP_STORE_META_INT_H */
