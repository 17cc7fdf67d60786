// SPDX-License-Identifier: Apache-2.0
/*
 * meta.c - topics.json and consumerOffset.json.
 *
 * The broker's two small state files, in RocketMQ's shape (docs/rocketmq-protocol.md §6.7)
 * but as standard JSON: RocketMQ's fastjson writes bare integer map keys
 * ({0:12}), which strict parsers refuse, so queue ids are quoted here.
 * Files are pretty-printed (people read and diff them during incidents) and
 * replaced with store_io_write_atomic(), so a crash leaves the old file or
 * the new one.
 *
 * Loading treats the file as untrusted input: it is size-capped, parsed in
 * json-c's strict mode with a small depth limit, and every field is checked
 * for type and range; anything off is -EBADMSG and nothing is returned, so a
 * damaged file stops the broker instead of silently dropping topics or
 * rewinding consumers. Unknown keys are ignored, so a file written by a
 * newer version (or with RocketMQ's extra fields) still loads.
 *
 * consumerOffset.json keys are "topic@group". RocketMQ topics and groups
 * are both [%|a-zA-Z0-9_-]+, so neither holds an '@'; this code only relies
 * on groups not holding one: the key is split at its LAST '@', and saving a
 * group with an '@' is refused (-EINVAL) so every saved file loads back.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/compiler.h"
#include "meta_int.h"
#include "store/meta.h"

/* larger files are refused (-EFBIG): 1,000,000 topics make a topics.json of ~180 MB */
#define META_FILE_MAX (512u << 20)
#define META_JSON_DEPTH 8 /* deepest valid file: root/table/topic/value */
#define META_JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)
#define META_QID_DIGITS 5 /* queue ids < META_QUEUES_MAX */

STATIC_ASSERT(META_QUEUES_MAX <= 99999, "queue ids fit META_QID_DIGITS");

/*
 * Validation shared by save (-EINVAL) and load (-EBADMSG).
 */

static bool
name_ok(const char *s, size_t len, size_t max)
{
	return len > 0 && len <= max && memchr(s, '\0', len) == NULL;
}

static bool
topic_ok(const struct meta_topic *t)
{
	size_t len = strnlen(t->name, sizeof(t->name));

	return len < sizeof(t->name) && name_ok(t->name, len, META_TOPIC_MAX) &&
	       t->read_queues >= 1 && t->read_queues <= META_QUEUES_MAX && t->write_queues >= 1 &&
	       t->write_queues <= META_QUEUES_MAX && t->perm <= META_PERM_MAX;
}

static bool
offset_ok(const struct meta_offset *o)
{
	size_t tlen = strnlen(o->topic, sizeof(o->topic));
	size_t glen = strnlen(o->group, sizeof(o->group));

	return tlen < sizeof(o->topic) && name_ok(o->topic, tlen, META_TOPIC_MAX) &&
	       glen < sizeof(o->group) && name_ok(o->group, glen, META_GROUP_MAX) &&
	       memchr(o->group, '@', glen) == NULL && o->queue_id < META_QUEUES_MAX;
}

/*
 * Saving.
 */

/* @root as text, malloc'd, with a trailing newline as text files have. */
static int
json_text(struct json_object *root, char **out, size_t *out_len)
{
	const char *s;
	size_t len;
	char *buf;

	s = json_object_to_json_string_length(root, META_JSON_FLAGS, &len);
	if (s == NULL)
		return -ENOMEM;
	buf = malloc(len + 1);
	if (buf == NULL)
		return -ENOMEM;
	memcpy(buf, s, len);
	buf[len] = '\n';
	*out = buf;
	*out_len = len + 1;
	return 0;
}

/* json_object_object_add() that reports allocation failure. */
static int
obj_add(struct json_object *o, const char *key, struct json_object *v)
{
	if (v == NULL)
		return -ENOMEM;
	if (json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

uint32_t
meta__name_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

int
meta__topic_to_json(const struct meta_topic *t, struct json_object **out)
{
	struct json_object *o = json_object_new_object();
	int rc;

	if (o == NULL)
		return -ENOMEM;
	/* Field order as RocketMQ's TopicConfig. */
	rc = obj_add(o, "topicName", json_object_new_string(t->name));
	if (rc == 0)
		rc = obj_add(o, "readQueueNums", json_object_new_int64(t->read_queues));
	if (rc == 0)
		rc = obj_add(o, "writeQueueNums", json_object_new_int64(t->write_queues));
	if (rc == 0)
		rc = obj_add(o, "perm", json_object_new_int64(t->perm));
	if (rc == 0)
		rc = obj_add(o, "topicFilterType",
			     json_object_new_string(t->multi_tag ? "MULTI_TAG" : "SINGLE_TAG"));
	if (rc == 0)
		rc = obj_add(o, "topicSysFlag", json_object_new_int64(t->sys_flag));
	if (rc == 0)
		rc = obj_add(o, "order", json_object_new_boolean(t->order));
	if (rc != 0) {
		json_object_put(o);
		return rc;
	}
	*out = o;
	return 0;
}

/* The topics.json document of @topics and @ver. */
static int
topics_root(const struct meta_topic *topics, size_t n, const struct meta_version *ver,
	    struct json_object **out)
{
	struct json_object *root;
	struct json_object *dv;
	struct json_object *table;
	int rc;

	if (topics == NULL && n > 0)
		return -EINVAL;
	if (ver != NULL && ver->counter > INT64_MAX)
		return -EINVAL;
	root = json_object_new_object();
	if (root == NULL)
		return -ENOMEM;
	/* Each object is added to its parent as soon as it exists: root owns them all. */
	dv = json_object_new_object();
	rc = obj_add(root, "dataVersion", dv);
	if (rc == 0)
		rc = obj_add(dv, "counter", json_object_new_int64(ver ? (int64_t)ver->counter : 0));
	if (rc == 0)
		rc = obj_add(dv, "timestamp", json_object_new_int64(ver ? ver->timestamp_ms : 0));
	if (rc != 0)
		goto out_put;
	table = json_object_new_object();
	rc = obj_add(root, "topicConfigTable", table);
	if (rc != 0)
		goto out_put;
	for (size_t i = 0; i < n; i++) {
		struct json_object *o;

		if (!topic_ok(&topics[i]) ||
		    json_object_object_get_ex(table, topics[i].name, NULL)) {
			rc = -EINVAL; /* bad or duplicate topic */
			goto out_put;
		}
		rc = meta__topic_to_json(&topics[i], &o);
		if (rc == 0)
			rc = obj_add(table, topics[i].name, o);
		if (rc != 0)
			goto out_put;
	}
	*out = root;
	return 0;
out_put:
	json_object_put(root);
	return rc;
}

/* Write @buf (from a *_json() call) to @path atomically and free it. */
static int
text_save(const struct store_io_ops *io, const char *path, char *buf, size_t len)
{
	int rc = store_io_write_atomic(io, path, buf, len);

	free(buf);
	return rc;
}

int
meta_topics_save(const struct store_io_ops *io, const char *path, const struct meta_topic *topics,
		 size_t n, const struct meta_version *ver)
{
	char *buf;
	size_t len;
	int rc;

	if (io == NULL || path == NULL)
		return -EINVAL;
	rc = meta_topics_json(topics, n, ver, &buf, &len);
	return rc != 0 ? rc : text_save(io, path, buf, len);
}

/* RocketMQ's topic name characters: nothing json-c would escape. */
static bool
name_plain(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '%' || *s == '|' || *s == '_' || *s == '-'))
			return false;
	return true;
}

static char *
put_s(char *p, const char *s)
{
	size_t l = strlen(s);

	memcpy(p, s, l);
	return p + l;
}

static char *
put_i(char *p, int64_t v)
{
	return p + sprintf(p, "%" PRId64, v);
}

/*
 * topics.json written straight, byte for byte what json-c's pretty printer
 * makes of topics_root() (test_meta.c compares them): building 250,000
 * json-c objects for every save took 2.5 s, and each topic creation saves.
 * Return: 0, -EINVAL a bad or duplicate topic, -ENOMEM, -EAGAIN a name
 * json-c would escape (the caller takes the json-c path).
 */
static int
topics_text(const struct meta_topic *topics, size_t n, const struct meta_version *ver, char **json,
	    size_t *len)
{
	uint32_t mask = 15;
	uint32_t *seen;
	char *buf;
	char *p;

	if (topics == NULL && n > 0)
		return -EINVAL;
	if (ver != NULL && ver->counter > INT64_MAX)
		return -EINVAL;
	while ((size_t)mask + 1 < 2 * n + 2) {
		if (mask >= (1u << 30))
			return -ENOMEM;
		mask = mask * 2 + 1;
	}
	seen = calloc((size_t)mask + 1, sizeof(*seen));
	/* per topic: its name twice and at most 240 bytes of fields and indents */
	buf = malloc(160 + n * (2 * (META_TOPIC_MAX + 1) + 240));
	if (seen == NULL || buf == NULL) {
		free(seen);
		free(buf);
		return -ENOMEM;
	}
	p = put_s(buf, "{\n  \"dataVersion\":{\n    \"counter\":");
	p = put_i(p, ver ? (int64_t)ver->counter : 0);
	p = put_s(p, ",\n    \"timestamp\":");
	p = put_i(p, ver ? ver->timestamp_ms : 0);
	p = put_s(p, "\n  },\n  \"topicConfigTable\":{");
	for (size_t i = 0; i < n; i++) {
		const struct meta_topic *t = &topics[i];
		uint32_t h;

		if (!topic_ok(t)) {
			free(seen);
			free(buf);
			return -EINVAL;
		}
		if (!name_plain(t->name)) {
			free(seen);
			free(buf);
			return -EAGAIN;
		}
		h = meta__name_hash(t->name);
		for (h &= mask; seen[h] != 0; h = (h + 1) & mask)
			if (strcmp(topics[seen[h] - 1].name, t->name) == 0) {
				free(seen);
				free(buf);
				return -EINVAL; /* a duplicate */
			}
		seen[h] = (uint32_t)i + 1;
		p = put_s(p, i ? ",\n    \"" : "\n    \"");
		p = put_s(p, t->name);
		p = put_s(p, "\":{\n      \"topicName\":\"");
		p = put_s(p, t->name);
		p = put_s(p, "\",\n      \"readQueueNums\":");
		p = put_i(p, t->read_queues);
		p = put_s(p, ",\n      \"writeQueueNums\":");
		p = put_i(p, t->write_queues);
		p = put_s(p, ",\n      \"perm\":");
		p = put_i(p, t->perm);
		p = put_s(p, t->multi_tag ? ",\n      \"topicFilterType\":\"MULTI_TAG\""
					  : ",\n      \"topicFilterType\":\"SINGLE_TAG\"");
		p = put_s(p, ",\n      \"topicSysFlag\":");
		p = put_i(p, t->sys_flag);
		p = put_s(p, t->order ? ",\n      \"order\":true\n    }"
				      : ",\n      \"order\":false\n    }");
	}
	p = put_s(p, "\n  }\n}\n");
	free(seen);
	*json = buf;
	*len = (size_t)(p - buf);
	return 0;
}

int
meta_topics_json(const struct meta_topic *topics, size_t n, const struct meta_version *ver,
		 char **json, size_t *len)
{
	struct json_object *root;
	int rc = topics_text(topics, n, ver, json, len);

	if (rc != -EAGAIN)
		return rc;
	rc = topics_root(topics, n, ver, &root);

	if (rc != 0)
		return rc;
	rc = json_text(root, json, len);
	json_object_put(root);
	return rc;
}

static int
offsets_root(const struct meta_offset *offs, size_t n, struct json_object **out)
{
	struct json_object *root;
	struct json_object *table;
	int rc;

	if (offs == NULL && n > 0)
		return -EINVAL;
	root = json_object_new_object();
	if (root == NULL)
		return -ENOMEM;
	table = json_object_new_object();
	rc = obj_add(root, "offsetTable", table);
	if (rc != 0)
		goto out_put;
	for (size_t i = 0; i < n; i++) {
		const struct meta_offset *o = &offs[i];
		char key[META_TOPIC_MAX + 1 + META_GROUP_MAX + 1];
		char qid[META_QID_DIGITS + 1];
		struct json_object *queues;

		if (!offset_ok(o)) {
			rc = -EINVAL;
			goto out_put;
		}
		snprintf(key, sizeof(key), "%s@%s", o->topic, o->group);
		snprintf(qid, sizeof(qid), "%u", o->queue_id);
		if (!json_object_object_get_ex(table, key, &queues)) {
			queues = json_object_new_object();
			rc = obj_add(table, key, queues);
			if (rc != 0)
				goto out_put;
		}
		if (json_object_object_get_ex(queues, qid, NULL)) {
			rc = -EINVAL; /* the same queue twice */
			goto out_put;
		}
		rc = obj_add(queues, qid, json_object_new_int64(o->offset));
		if (rc != 0)
			goto out_put;
	}
	*out = root;
	return 0;
out_put:
	json_object_put(root);
	return rc;
}

int
meta_offsets_save(const struct store_io_ops *io, const char *path, const struct meta_offset *offs,
		  size_t n)
{
	char *buf;
	size_t len;
	int rc;

	if (io == NULL || path == NULL)
		return -EINVAL;
	rc = meta_offsets_json(offs, n, &buf, &len);
	return rc != 0 ? rc : text_save(io, path, buf, len);
}

int
meta_offsets_json(const struct meta_offset *offs, size_t n, char **json, size_t *len)
{
	struct json_object *root;
	int rc = offsets_root(offs, n, &root);

	if (rc != 0)
		return rc;
	rc = json_text(root, json, len);
	json_object_put(root);
	return rc;
}

/*
 * Loading.
 */

/*
 * Read and parse @path. Return: 0 with *@root (NULL when the file does not
 * exist), -EBADMSG not a JSON object, -errno.
 */
int
meta__json_parse(const char *buf, size_t len, struct json_object **root)
{
	struct json_tokener *tok;
	struct json_object *obj;
	size_t end;
	int rc = 0;

	*root = NULL;
	if (len > META_FILE_MAX)
		return -EFBIG;
	tok = json_tokener_new_ex(META_JSON_DEPTH);
	if (tok == NULL)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	/* len <= META_FILE_MAX fits an int. */
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		rc = -EBADMSG;
		goto out_free_tok;
	}
	for (end = json_tokener_get_parse_end(tok); end < len; end++) {
		if (buf[end] != ' ' && buf[end] != '\t' && buf[end] != '\n' && buf[end] != '\r') {
			json_object_put(obj);
			rc = -EBADMSG;
			goto out_free_tok;
		}
	}
	*root = obj;
out_free_tok:
	json_tokener_free(tok);
	return rc;
}

static int
json_load(const struct store_io_ops *io, const char *path, struct json_object **root)
{
	size_t len;
	char *buf;
	int rc;

	*root = NULL;
	rc = store_io_read_file(io, path, META_FILE_MAX, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	rc = meta__json_parse(buf, len, root);
	free(buf);
	return rc;
}

/* Integer member @key of @o in [lo, hi]; absent: *@out = @dflt, or -EBADMSG when @required. */
static int
get_int(struct json_object *o, const char *key, bool required, int64_t dflt, int64_t lo, int64_t hi,
	int64_t *out)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, key, &v)) {
		*out = dflt;
		return required ? -EBADMSG : 0;
	}
	if (!json_object_is_type(v, json_type_int))
		return -EBADMSG;
	x = json_object_get_int64(v);
	/* json-c saturates values above INT64_MAX (kept as uint64): refuse them. */
	if (x == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
		return -EBADMSG;
	if (x < lo || x > hi)
		return -EBADMSG;
	*out = x;
	return 0;
}

/* Copy a JSON string of @len bytes into @dst (capacity @max + 1) if it is a valid name. */
static int
copy_name(char *dst, const char *s, size_t len, size_t max)
{
	if (!name_ok(s, len, max))
		return -EBADMSG;
	memcpy(dst, s, len);
	dst[len] = '\0';
	return 0;
}

int
meta__topic_from_json(const char *key, struct json_object *o, struct meta_topic *t)
{
	struct json_object *v;
	int64_t x;
	int rc;

	if (!json_object_is_type(o, json_type_object))
		return -EBADMSG;
	memset(t, 0, sizeof(*t));
	rc = copy_name(t->name, key, strlen(key), META_TOPIC_MAX);
	if (rc != 0)
		return rc;
	if (json_object_object_get_ex(o, "topicName", &v)) {
		if (!json_object_is_type(v, json_type_string) ||
		    (size_t)json_object_get_string_len(v) != strlen(key) ||
		    memcmp(json_object_get_string(v), key, strlen(key)) != 0)
			return -EBADMSG; /* the key and the name disagree */
	}
	rc = get_int(o, "readQueueNums", true, 0, 1, META_QUEUES_MAX, &x);
	if (rc != 0)
		return rc;
	t->read_queues = (uint32_t)x;
	rc = get_int(o, "writeQueueNums", true, 0, 1, META_QUEUES_MAX, &x);
	if (rc != 0)
		return rc;
	t->write_queues = (uint32_t)x;
	rc = get_int(o, "perm", true, 0, 0, META_PERM_MAX, &x);
	if (rc != 0)
		return rc;
	t->perm = (uint32_t)x;
	rc = get_int(o, "topicSysFlag", false, 0, 0, UINT32_MAX, &x);
	if (rc != 0)
		return rc;
	t->sys_flag = (uint32_t)x;
	if (json_object_object_get_ex(o, "topicFilterType", &v)) {
		const char *s;

		if (!json_object_is_type(v, json_type_string))
			return -EBADMSG;
		s = json_object_get_string(v);
		if (strcmp(s, "MULTI_TAG") == 0)
			t->multi_tag = true;
		else if (strcmp(s, "SINGLE_TAG") != 0)
			return -EBADMSG;
	}
	if (json_object_object_get_ex(o, "order", &v)) {
		if (!json_object_is_type(v, json_type_boolean))
			return -EBADMSG;
		t->order = json_object_get_boolean(v);
	}
	return 0;
}

int
meta__version_from_json(struct json_object *root, struct meta_version *ver)
{
	struct json_object *dv;
	int64_t x;
	int rc;

	memset(ver, 0, sizeof(*ver));
	if (!json_object_object_get_ex(root, "dataVersion", &dv))
		return 0;
	if (!json_object_is_type(dv, json_type_object))
		return -EBADMSG;
	rc = get_int(dv, "counter", false, 0, 0, INT64_MAX, &x);
	if (rc != 0)
		return rc;
	ver->counter = (uint64_t)x;
	return get_int(dv, "timestamp", false, 0, INT64_MIN, INT64_MAX, &ver->timestamp_ms);
}

/* Takes @root (NULL: no topics) and frees it. */
static int
topics_from_root(struct json_object *root, struct meta_topic **topics, size_t *n,
		 struct meta_version *ver)
{
	struct meta_topic *arr = NULL;
	struct meta_version v = {0};
	struct json_object *table;
	size_t count;
	size_t i = 0;
	int rc;

	if (root == NULL)
		goto out_ok; /* no file yet: no topics */
	rc = meta__version_from_json(root, &v);
	if (rc != 0)
		goto out_put;
	if (!json_object_object_get_ex(root, "topicConfigTable", &table) ||
	    !json_object_is_type(table, json_type_object)) {
		rc = -EBADMSG;
		goto out_put;
	}
	count = (size_t)json_object_object_length(table);
	if (count > 0) {
		arr = calloc(count, sizeof(*arr));
		if (arr == NULL) {
			rc = -ENOMEM;
			goto out_put;
		}
	}
	json_object_object_foreach(table, key, val)
	{
		rc = meta__topic_from_json(key, val, &arr[i++]);
		if (rc != 0)
			goto out_put;
	}
	json_object_put(root);
	root = NULL;
out_ok:
	*topics = arr;
	*n = i;
	if (ver != NULL)
		*ver = v;
	return 0;

out_put:
	json_object_put(root);
	free(arr);
	return rc;
}

int
meta_topics_load(const struct store_io_ops *io, const char *path, struct meta_topic **topics,
		 size_t *n, struct meta_version *ver)
{
	struct json_object *root;
	int rc;

	if (io == NULL || path == NULL || topics == NULL || n == NULL)
		return -EINVAL;
	rc = json_load(io, path, &root);
	return rc != 0 ? rc : topics_from_root(root, topics, n, ver);
}

int
meta_topics_parse(const char *json, size_t len, struct meta_topic **topics, size_t *n,
		  struct meta_version *ver)
{
	struct json_object *root;
	int rc;

	if (json == NULL || topics == NULL || n == NULL)
		return -EINVAL;
	rc = meta__json_parse(json, len, &root);
	if (rc == 0 && root == NULL)
		rc = -EBADMSG;
	return rc != 0 ? rc : topics_from_root(root, topics, n, ver);
}

/* Split "topic@group" at the last '@' into @o. */
static int
offset_key(const char *key, struct meta_offset *o)
{
	const char *at = strrchr(key, '@');
	int rc;

	if (at == NULL)
		return -EBADMSG;
	if ((size_t)(at - key) > META_TOPIC_MAX)
		return -EBADMSG;
	rc = copy_name(o->topic, key, (size_t)(at - key), META_TOPIC_MAX);
	if (rc != 0)
		return rc;
	return copy_name(o->group, at + 1, strlen(at + 1), META_GROUP_MAX);
}

/* A queue id: decimal, no sign, no leading zero, below META_QUEUES_MAX. */
static int
offset_qid(const char *s, uint32_t *out)
{
	size_t len = strlen(s);
	uint32_t v = 0;

	if (len == 0 || len > META_QID_DIGITS || (len > 1 && s[0] == '0'))
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		v = v * 10 + (uint32_t)(s[i] - '0');
	}
	if (v >= META_QUEUES_MAX)
		return -EBADMSG;
	*out = v;
	return 0;
}

/* Takes @root (NULL: no offsets) and frees it. */
static int
offsets_from_root(struct json_object *root, struct meta_offset **offs, size_t *n)
{
	struct meta_offset *arr = NULL;
	struct json_object *table;
	size_t count = 0;
	size_t i = 0;
	int rc;

	if (root == NULL)
		goto out_ok;
	if (!json_object_object_get_ex(root, "offsetTable", &table) ||
	    !json_object_is_type(table, json_type_object)) {
		rc = -EBADMSG;
		goto out_put;
	}
	/* Count first, so the array is allocated once. */
	{
		json_object_object_foreach(table, key, val)
		{
			(void)key;
			if (!json_object_is_type(val, json_type_object)) {
				rc = -EBADMSG;
				goto out_put;
			}
			count += (size_t)json_object_object_length(val);
		}
	}
	if (count > 0) {
		arr = calloc(count, sizeof(*arr));
		if (arr == NULL) {
			rc = -ENOMEM;
			goto out_put;
		}
	}
	{
		json_object_object_foreach(table, key, queues)
		{
			struct meta_offset proto = {0};

			rc = offset_key(key, &proto);
			if (rc != 0)
				goto out_put;
			json_object_object_foreach(queues, qid, off)
			{
				struct meta_offset *o = &arr[i++];

				*o = proto;
				rc = offset_qid(qid, &o->queue_id);
				if (rc != 0)
					goto out_put;
				if (!json_object_is_type(off, json_type_int)) {
					rc = -EBADMSG;
					goto out_put;
				}
				o->offset = json_object_get_int64(off);
				if (o->offset == INT64_MAX &&
				    json_object_get_uint64(off) != (uint64_t)INT64_MAX) {
					rc = -EBADMSG;
					goto out_put;
				}
			}
		}
	}
	json_object_put(root);
out_ok:
	*offs = arr;
	*n = i;
	return 0;

out_put:
	json_object_put(root);
	free(arr);
	return rc;
}

int
meta_offsets_load(const struct store_io_ops *io, const char *path, struct meta_offset **offs,
		  size_t *n)
{
	struct json_object *root;
	int rc;

	if (io == NULL || path == NULL || offs == NULL || n == NULL)
		return -EINVAL;
	rc = json_load(io, path, &root);
	return rc != 0 ? rc : offsets_from_root(root, offs, n);
}

int
meta_offsets_parse(const char *json, size_t len, struct meta_offset **offs, size_t *n)
{
	struct json_object *root;
	int rc;

	if (json == NULL || offs == NULL || n == NULL)
		return -EINVAL;
	rc = meta__json_parse(json, len, &root);
	if (rc == 0 && root == NULL)
		rc = -EBADMSG;
	return rc != 0 ? rc : offsets_from_root(root, offs, n);
}
