/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta.h - the broker's small JSON files: topics.json (topic configs) and
 * consumerOffset.json (committed consumer offsets).
 *
 * Formats follow RocketMQ's (§6.7) but as standard JSON (quoted map keys),
 * pretty-printed so people can read and diff them:
 *   topics.json:  {"dataVersion":{"counter":N,"timestamp":MS},
 *                  "topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,
 *                     "writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG",
 *                     "topicSysFlag":0,"order":false}}}
 *   consumerOffset.json: {"offsetTable":{"T@G":{"0":12,"1":7}}}
 * Files are replaced atomically (temp file, fdatasync, rename, directory
 * fsync) so a crash leaves the old or the new version, never a mix.
 *
 * Context: control or background threads only (allocates, blocks).
 */
#ifndef SP_STORE_META_H
#define SP_STORE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/io.h"

#define META_TOPIC_MAX 127    /* bytes, NUL excluded; names are never empty */
#define META_GROUP_MAX 255    /* bytes, NUL excluded; a group never holds '@' */
#define META_QUEUES_MAX 65535 /* read/write queue counts are 1..this; queue ids below it */
#define META_PERM_MAX 15

#define META_PERM_INHERIT 1
#define META_PERM_WRITE 2
#define META_PERM_READ 4

struct meta_topic {
	char name[META_TOPIC_MAX + 1];
	uint32_t read_queues;
	uint32_t write_queues;
	uint32_t perm;
	uint32_t sys_flag;
	bool order;
	bool multi_tag; /* topicFilterType MULTI_TAG (else SINGLE_TAG) */
};

struct meta_offset {
	char topic[META_TOPIC_MAX + 1];
	char group[META_GROUP_MAX + 1];
	uint32_t queue_id;
	int64_t offset;
};

struct meta_version {
	uint64_t counter;
	int64_t timestamp_ms;
};

/**
 * meta_topics_save() - write @n topics (in that order) and @ver (NULL: zeros)
 * to @path, replacing it atomically.
 * Return: 0, -EINVAL a name empty or too long, a count or perm out of range,
 * the same topic twice, -errno from I/O (@path then keeps its old content).
 */
MUST_CHECK int meta_topics_save(const struct store_io_ops *io, const char *path,
				const struct meta_topic *topics, size_t n,
				const struct meta_version *ver);

/**
 * meta_topics_load() - read topics.json into a malloc'd array (free(); NULL
 * when there are none), in file order. @ver may be NULL. Missing optional
 * fields (topicFilterType, topicSysFlag, order, dataVersion) take RocketMQ's
 * defaults; unknown fields are ignored.
 * Return: 0 (a missing file is 0 topics), -EBADMSG malformed JSON or a field
 * of the wrong type or range (names longer than META_TOPIC_MAX included),
 * -EFBIG a file over 512 MiB, -errno.
 */
MUST_CHECK int meta_topics_load(const struct store_io_ops *io, const char *path,
				struct meta_topic **topics, size_t *n, struct meta_version *ver);

/**
 * meta_offsets_save() - write @n committed offsets to @path, replacing it
 * atomically; entries of one topic@group share a key (first-seen order).
 * Return: 0, -EINVAL a bad name, a group holding '@', a queue id >=
 * META_QUEUES_MAX, the same (topic, group, queue) twice, -errno from I/O.
 */
MUST_CHECK int meta_offsets_save(const struct store_io_ops *io, const char *path,
				 const struct meta_offset *offs, size_t n);

/*
 * As meta_topics_load(), for consumerOffset.json: "topic@group" keys are
 * split at the last '@'; queue ids are decimal strings without leading
 * zeros; offsets any int64 (-1 included).
 */
MUST_CHECK int meta_offsets_load(const struct store_io_ops *io, const char *path,
				 struct meta_offset **offs, size_t *n);

/*
 * In memory, as a master answers GET_ALL_TOPIC_CONFIG / GET_ALL_CONSUMER_OFFSET
 * and its slave reads the answer: the files' text and validation.
 * *_json: @json malloc'd (free()), @len bytes, same rules as *_save().
 * *_parse: same results as *_load() (an empty text is -EBADMSG).
 */
MUST_CHECK int meta_topics_json(const struct meta_topic *topics, size_t n,
				const struct meta_version *ver, char **json, size_t *len);
MUST_CHECK int meta_topics_parse(const char *json, size_t len, struct meta_topic **topics,
				 size_t *n, struct meta_version *ver);
MUST_CHECK int meta_offsets_json(const struct meta_offset *offs, size_t n, char **json,
				 size_t *len);
MUST_CHECK int meta_offsets_parse(const char *json, size_t len, struct meta_offset **offs,
				  size_t *n);

/*
 * topics.json's journal (meta_journal.c; docs/store.md, "topics.json and its
 * journal"): one line per topic change, appended and synced. put and delete
 * append one (@bytes: its size); reset empties the journal once topics.json
 * holds everything (after meta_topics_save()); replay applies the journal at
 * @path onto @topics (a malloc'd array as meta_topics_load() returns, which
 * may be reallocated), setting @ver to the newest line's version.
 * Context: control thread, blocking (each append is fdatasync'd).
 * Return: 0, -EINVAL, -ENOMEM, -errno; replay: -EBADMSG a damaged line that
 * is not the last (its number in @out->bad_line), -EFBIG over 512 MiB. A
 * missing journal replays nothing.
 */
struct meta_journal_replay {
	size_t applied; /* lines applied */
	size_t bytes;	/* the journal's size */
	size_t bad_line;
	bool torn; /* a last line without its newline: a write a crash cut, left out */
};

MUST_CHECK int meta_journal_put(const char *path, const struct meta_topic *t,
				const struct meta_version *ver, size_t *bytes);
MUST_CHECK int meta_journal_delete(const char *path, const char *name,
				   const struct meta_version *ver, size_t *bytes);
MUST_CHECK int meta_journal_reset(const char *path);
MUST_CHECK int meta_journal_replay(const char *path, struct meta_topic **topics, size_t *n,
				   struct meta_version *ver, struct meta_journal_replay *out);
/* As meta_journal_replay(), from @buf (its lines are cut in place). */
MUST_CHECK int meta_journal_replay_buf(char *buf, size_t len, struct meta_topic **topics, size_t *n,
				       struct meta_version *ver, struct meta_journal_replay *out);

#endif /* SP_STORE_META_H */
