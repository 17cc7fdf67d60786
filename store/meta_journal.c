// SPDX-License-Identifier: Apache-2.0
/*
 * meta_journal.c - topics.json's journal: one line per topic change.
 *
 * DESIGN
 * topics.json is rewritten whole, and synced, to be replaced atomically:
 * 15 MB at 100,000 topics, 38 MB at 250,000, for every topic created,
 * updated or deleted. The journal beside it (topics.json.journal) takes one
 * line per change instead, appended and synced (a few hundred bytes), and
 * the broker folds it into topics.json now and then (meta_journal_* callers:
 * broker/ctl/bk_topic_ctl.c): at start, at a clean stop, and when it has
 * grown as large as topics.json itself, so its cost per change stays O(1)
 * amortized. A reader of topics.json alone (RocketMQ's tools) sees every
 * topic after a clean stop.
 *
 * A line is one JSON object, the change and the data version it made:
 *   {"put":{TopicConfig},"dataVersion":{"counter":N,"timestamp":T}}
 *   {"delete":"NAME","dataVersion":{...}}
 * Replaying applies them in order onto the topics of topics.json: a put
 * replaces the topic of that name or adds it, a delete removes it; both are
 * idempotent, so a crash between writing topics.json and emptying the
 * journal replays changes topics.json already holds, harmlessly. A last line
 * without its newline is a write the crash cut: it is left out (its change
 * was never reported done). Any other damaged line is -EBADMSG: the broker
 * refuses to start rather than drop the topics after it silently, as for a
 * damaged topics.json.
 *
 * Context: control thread, blocking.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "store/io.h"
#include "store/meta.h"

#define JOURNAL_MAX (512u << 20) /* as topics.json: larger is refused (-EFBIG) */

static int
line_of(struct json_object *o, const struct meta_version *ver, const char *path, size_t *bytes)
{
	struct json_object *dv = json_object_new_object();
	const char *s;
	size_t len;
	char *line;
	int rc;

	if (dv == NULL) {
		json_object_put(o);
		return -ENOMEM;
	}
	if (json_object_object_add(dv, "counter",
				   json_object_new_int64(ver ? (int64_t)ver->counter : 0)) != 0 ||
	    json_object_object_add(dv, "timestamp",
				   json_object_new_int64(ver ? ver->timestamp_ms : 0)) != 0 ||
	    json_object_object_add(o, "dataVersion", dv) != 0) {
		json_object_put(dv);
		json_object_put(o);
		return -ENOMEM;
	}
	s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	line = s ? malloc(len + 1) : NULL;
	if (line == NULL) {
		json_object_put(o);
		return -ENOMEM;
	}
	memcpy(line, s, len);
	line[len] = '\n';
	json_object_put(o);
	rc = store_io_append(&store_io_posix, path, line, len + 1);
	free(line);
	if (rc == 0 && bytes != NULL)
		*bytes = len + 1;
	return rc;
}

int
meta_journal_put(const char *path, const struct meta_topic *t, const struct meta_version *ver,
		 size_t *bytes)
{
	struct json_object *o, *tc;
	int rc;

	if (path == NULL || t == NULL)
		return -EINVAL;
	if ((rc = meta__topic_to_json(t, &tc)) != 0)
		return rc;
	o = json_object_new_object();
	if (o == NULL || json_object_object_add(o, "put", tc) != 0) {
		json_object_put(tc);
		json_object_put(o);
		return -ENOMEM;
	}
	return line_of(o, ver, path, bytes);
}

int
meta_journal_delete(const char *path, const char *name, const struct meta_version *ver,
		    size_t *bytes)
{
	struct json_object *o, *n;

	if (path == NULL || name == NULL || name[0] == '\0' || strlen(name) > META_TOPIC_MAX)
		return -EINVAL;
	o = json_object_new_object();
	n = json_object_new_string(name);
	if (o == NULL || n == NULL || json_object_object_add(o, "delete", n) != 0) {
		json_object_put(n);
		json_object_put(o);
		return -ENOMEM;
	}
	return line_of(o, ver, path, bytes);
}

int
meta_journal_reset(const char *path)
{
	const struct store_io_ops *io = &store_io_posix;
	int fd = io->open(io->ctx, path, O_WRONLY | O_TRUNC, 0);
	int rc;

	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	rc = io->fdatasync(io->ctx, fd);
	io->close(io->ctx, fd);
	return rc;
}

/* The index of topics by name: open addressing, slot = index + 1, 0 empty. */
struct jindex {
	uint32_t *slot;
	uint32_t mask;
};

/* The slot of @name, or the empty one where it would go. Deleted topics keep their slot. */
static uint32_t *
ix_find(const struct jindex *ix, const struct meta_topic *t, const char *name)
{
	for (uint32_t i = meta__name_hash(name) & ix->mask;; i = (i + 1) & ix->mask) {
		uint32_t *s = &ix->slot[i];

		if (*s == 0 || strcmp(t[*s - 1].name, name) == 0)
			return s;
	}
}

/* Apply one line (NUL-terminated at @len). Return: 0, -EBADMSG, -ENOMEM. */
static int
apply(const char *line, size_t len, struct meta_topic **topics, size_t *n, size_t *cap,
      struct jindex *ix, bool *gone, struct meta_version *ver)
{
	struct json_object *root, *v;
	struct meta_topic t;
	uint32_t *s;
	int rc = meta__json_parse(line, len, &root);

	if (rc != 0)
		return rc == -EFBIG ? -EBADMSG : rc;
	if ((rc = meta__version_from_json(root, ver)) != 0)
		goto out;
	if (json_object_object_get_ex(root, "put", &v)) {
		struct json_object *name;

		rc = -EBADMSG;
		if (!json_object_is_type(v, json_type_object) ||
		    !json_object_object_get_ex(v, "topicName", &name) ||
		    !json_object_is_type(name, json_type_string) ||
		    (rc = meta__topic_from_json(json_object_get_string(name), v, &t)) != 0)
			goto out;
		s = ix_find(ix, *topics, t.name);
		if (*s != 0) {
			(*topics)[*s - 1] = t;
			gone[*s - 1] = false;
			goto out;
		}
		if (*n == *cap) {
			rc = -ENOMEM; /* sized by the caller: a line adds at most one */
			goto out;
		}
		(*topics)[*n] = t;
		gone[*n] = false;
		*s = (uint32_t)++ * n;
	} else if (json_object_object_get_ex(root, "delete", &v)) {
		rc = -EBADMSG;
		if (!json_object_is_type(v, json_type_string) ||
		    json_object_get_string_len(v) > META_TOPIC_MAX)
			goto out;
		rc = 0;
		s = ix_find(ix, *topics, json_object_get_string(v));
		if (*s != 0)
			gone[*s - 1] = true;
	} else {
		rc = -EBADMSG;
	}
out:
	json_object_put(root);
	return rc;
}

int
meta_journal_replay_buf(char *buf, size_t len, struct meta_topic **topics, size_t *n,
			struct meta_version *ver, struct meta_journal_replay *out)
{
	struct jindex ix = {0};
	struct meta_version scratch;
	struct meta_topic *t = *topics;
	size_t lines = 0, cap, size = 16, k = 0;
	bool *gone = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (ver == NULL)
		ver = &scratch;
	out->bytes = len;
	if (len == 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	cap = *n + lines;
	while (size < 2 * cap)
		size *= 2;
	ix.slot = calloc(size, sizeof(*ix.slot));
	ix.mask = (uint32_t)size - 1;
	gone = calloc(cap ? cap : 1, sizeof(*gone));
	if (cap > *n && t != NULL) {
		struct meta_topic *g = realloc(t, sizeof(*t) * cap);

		if (g != NULL)
			t = *topics = g;
		else
			rc = -ENOMEM;
	} else if (cap > 0 && t == NULL) {
		t = *topics = calloc(cap, sizeof(*t));
		rc = t == NULL ? -ENOMEM : 0;
	}
	if (rc != 0 || ix.slot == NULL || gone == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < *n; i++)
		*ix_find(&ix, t, t[i].name) = (uint32_t)i + 1;
	for (size_t at = 0, line = 1; at < len; line++) {
		char *nl = memchr(buf + at, '\n', len - at);

		if (nl == NULL) {
			out->torn = true; /* the last write, cut by a crash: never reported done */
			break;
		}
		*nl = '\0';
		rc = apply(buf + at, (size_t)(nl - (buf + at)), topics, n, &cap, &ix, gone, ver);
		if (rc != 0) {
			out->bad_line = line;
			goto out;
		}
		t = *topics;
		out->applied++;
		at = (size_t)(nl - buf) + 1;
	}
	/* drop the deleted, keeping the order of the others */
	for (size_t i = 0; i < *n; i++)
		if (!gone[i])
			t[k++] = t[i];
	*n = k;
out:
	free(ix.slot);
	free(gone);
	return rc;
}

int
meta_journal_replay(const char *path, struct meta_topic **topics, size_t *n,
		    struct meta_version *ver, struct meta_journal_replay *out)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = store_io_read_file(&store_io_posix, path, JOURNAL_MAX, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0)
		rc = meta_journal_replay_buf(buf, len, topics, n, ver, out);
	free(buf);
	return rc;
}
