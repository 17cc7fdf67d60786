// SPDX-License-Identifier: Apache-2.0
/*
 * test_meta.c - topics.json and consumerOffset.json: round trips, a missing
 * file, malformed files of every kind (-EBADMSG), refused saves, atomic
 * replacement (also when the rename fails) and a human-readable layout.
 */
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "harness.h"
#include "store/meta_delay.h"
#include "store/meta_timer.h"
#include "store/io.h"
#include "store/meta.h"

static char root[64];
static char path[128];

static void
setup(const char *name)
{
	snprintf(root, sizeof(root), "/tmp/sp_meta_XXXXXX");
	T_ASSERT(mkdtemp(root) != NULL);
	snprintf(path, sizeof(path), "%s/%s", root, name);
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void
teardown(void)
{
	T_ASSERT_EQ(nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static void
write_text(const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t len = strlen(text);

	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static char *
read_text(const char *p)
{
	char *buf = NULL;
	size_t len = 0;

	T_ASSERT_EQ(store_io_read_file(&store_io_posix, p, 1 << 24, &buf, &len), 0);
	return buf;
}

static bool
exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

static void
make_topic(struct meta_topic *t, unsigned i)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "Topic_%u", i);
	t->read_queues = 1 + i % 16;
	t->write_queues = 1 + (i * 7) % 16;
	t->perm = i % 16;
	t->sys_flag = i * 3;
	t->order = i % 3 == 0;
	t->multi_tag = i % 5 == 0;
}

static void
topic_eq(const struct meta_topic *a, const struct meta_topic *b)
{
	T_ASSERT_STREQ(a->name, b->name);
	T_ASSERT_EQ(a->read_queues, b->read_queues);
	T_ASSERT_EQ(a->write_queues, b->write_queues);
	T_ASSERT_EQ(a->perm, b->perm);
	T_ASSERT_EQ(a->sys_flag, b->sys_flag);
	T_ASSERT_EQ(a->order, b->order);
	T_ASSERT_EQ(a->multi_tag, b->multi_tag);
}

#define NTOPICS 300

static void
test_topics_round_trip(void)
{
	static struct meta_topic in[NTOPICS];
	struct meta_version ver = {.counter = 123456789012ull, .timestamp_ms = 1700000000123};
	struct meta_version got_ver;
	struct meta_topic *out = NULL;
	size_t n = 0;

	setup("topics.json");
	for (unsigned i = 0; i < NTOPICS; i++)
		make_topic(&in[i], i);
	/* Edge names: longest, one byte, RocketMQ system style, with a slash and UTF-8. */
	memset(in[0].name, 'x', META_TOPIC_MAX);
	in[0].name[META_TOPIC_MAX] = '\0';
	snprintf(in[1].name, sizeof(in[1].name), "T");
	snprintf(in[2].name, sizeof(in[2].name), "%%RETRY%%GID_consumer");
	snprintf(in[3].name, sizeof(in[3].name), "a/b\"c\\d");
	snprintf(in[4].name, sizeof(in[4].name), "t\xc3\xa9st");
	in[5].read_queues = META_QUEUES_MAX;
	in[5].write_queues = 1;
	in[6].sys_flag = UINT32_MAX;
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, in, NTOPICS, &ver), 0);
	T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, &got_ver), 0);
	T_ASSERT_EQ(n, NTOPICS);
	for (unsigned i = 0; i < NTOPICS; i++)
		topic_eq(&out[i], &in[i]); /* file order is save order */
	T_ASSERT_EQ_U64(got_ver.counter, ver.counter);
	T_ASSERT_EQ(got_ver.timestamp_ms, ver.timestamp_ms);
	free(out);

	/* No version given: zeros. A NULL ver on load is allowed. */
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, in, 2, NULL), 0);
	T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, &got_ver), 0);
	T_ASSERT_EQ(n, 2);
	T_ASSERT_EQ_U64(got_ver.counter, 0);
	free(out);
	T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, NULL), 0);
	free(out);

	/* Zero topics. */
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, NULL, 0, &ver), 0);
	T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, &got_ver), 0);
	T_ASSERT_EQ(n, 0);
	T_ASSERT(out == NULL);
	T_ASSERT_EQ_U64(got_ver.counter, ver.counter);
	teardown();
}

static int
off_cmp(const void *pa, const void *pb)
{
	const struct meta_offset *a = pa;
	const struct meta_offset *b = pb;
	int c = strcmp(a->topic, b->topic);

	if (c == 0)
		c = strcmp(a->group, b->group);
	if (c == 0)
		c = a->queue_id < b->queue_id ? -1 : a->queue_id > b->queue_id;
	return c;
}

#define NGROUPS 40
#define NQUEUES 8

static void
test_offsets_round_trip(void)
{
	static struct meta_offset in[3 * NGROUPS * NQUEUES + 2];
	struct meta_offset *out = NULL;
	size_t n = 0;
	size_t k = 0;

	setup("consumerOffset.json");
	for (unsigned t = 0; t < 3; t++) {
		for (unsigned g = 0; g < NGROUPS; g++) {
			for (unsigned qi = 0; qi < NQUEUES; qi++) {
				struct meta_offset *o = &in[k++];

				memset(o, 0, sizeof(*o));
				snprintf(o->topic, sizeof(o->topic),
					 t == 2 ? "%%RETRY%%G%u" : "T%u", t == 2 ? g : t);
				snprintf(o->group, sizeof(o->group), "GID_%u", g);
				/* Queues out of order within a group. */
				o->queue_id = (qi * 5) % NQUEUES + t * 100;
				o->offset = (int64_t)(g * 1000 + qi) - 3;
			}
		}
	}
	in[7].offset = -1;
	in[8].offset = INT64_MIN;
	in[9].offset = INT64_MAX;
	/* A topic with an '@' (split at the last one) and the longest names. */
	memset(&in[k], 0, sizeof(in[k]));
	snprintf(in[k].topic, sizeof(in[k].topic), "odd@topic");
	snprintf(in[k].group, sizeof(in[k].group), "G");
	in[k].queue_id = META_QUEUES_MAX - 1;
	in[k++].offset = 77;
	memset(&in[k], 0, sizeof(in[k]));
	memset(in[k].topic, 't', META_TOPIC_MAX);
	memset(in[k].group, 'g', META_GROUP_MAX);
	in[k++].offset = 5;

	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, in, k), 0);
	T_ASSERT_EQ(meta_offsets_load(&store_io_posix, path, &out, &n), 0);
	T_ASSERT_EQ(n, k);
	qsort(in, k, sizeof(in[0]), off_cmp);
	qsort(out, n, sizeof(out[0]), off_cmp);
	for (size_t i = 0; i < k; i++) {
		T_ASSERT_STREQ(out[i].topic, in[i].topic);
		T_ASSERT_STREQ(out[i].group, in[i].group);
		T_ASSERT_EQ(out[i].queue_id, in[i].queue_id);
		T_ASSERT_EQ(out[i].offset, in[i].offset);
	}
	free(out);
	teardown();
}

static void
test_missing_file(void)
{
	struct meta_version ver = {.counter = 9, .timestamp_ms = 9};
	struct meta_topic *topics = (void *)1;
	struct meta_offset *offs = (void *)1;
	size_t n = 99;

	setup("nothing.json");
	T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &topics, &n, &ver), 0);
	T_ASSERT_EQ(n, 0);
	T_ASSERT(topics == NULL);
	T_ASSERT_EQ_U64(ver.counter, 0);
	T_ASSERT_EQ(ver.timestamp_ms, 0);
	n = 99;
	T_ASSERT_EQ(meta_offsets_load(&store_io_posix, path, &offs, &n), 0);
	T_ASSERT_EQ(n, 0);
	T_ASSERT(offs == NULL);
	/* A directory where the file should be is an I/O error, not "missing". */
	T_ASSERT_EQ(mkdir(path, 0755), 0);
	T_ASSERT(meta_offsets_load(&store_io_posix, path, &offs, &n) < 0);
	T_ASSERT_EQ(rmdir(path), 0);
	teardown();
}

#define TOPIC_OK "\"readQueueNums\":4,\"writeQueueNums\":4,\"perm\":6"

static const char *const bad_topics[] = {
	"",
	"   ",
	"{",
	"not json",
	"[]",
	"null",
	"42",
	"{}",
	"{\"topicConfigTable\":[]}",
	"{\"topicConfigTable\":{\"T\":[]}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK "}}} x",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK "}}}{}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK "}}",
	/* wrong types */
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":\"4\",\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":4.0,\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":true,\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"order\":\"true\"}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"order\":1}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicFilterType\":1}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicFilterType\":\"ANY\"}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicName\":\"U\"}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicName\":7}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicName\":\"T\\u0000\"}}}",
	"{\"dataVersion\":[],\"topicConfigTable\":{}}",
	"{\"dataVersion\":{\"counter\":-1},\"topicConfigTable\":{}}",
	"{\"dataVersion\":{\"counter\":18446744073709551615},\"topicConfigTable\":{}}",
	"{\"dataVersion\":{\"timestamp\":\"now\"},\"topicConfigTable\":{}}",
	/* missing required fields */
	"{\"topicConfigTable\":{\"T\":{\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":4,\"writeQueueNums\":4}}}",
	/* ranges */
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":0,\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":65536,\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":4,\"writeQueueNums\":-4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":4,\"writeQueueNums\":4,\"perm\":16}}}",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":4,\"writeQueueNums\":4,\"perm\":-1}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicSysFlag\":4294967296}}}",
	"{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"topicSysFlag\":-1}}}",
	"{\"topicConfigTable\":{\"\":{" TOPIC_OK "}}}",
	/* not strict JSON (json-c 0.16 still takes single-quoted strings even when strict) */
	"{\"topicConfigTable\":{},}",
	"{\"topicConfigTable\":{}} // comment",
	"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":NaN,\"writeQueueNums\":4,\"perm\":6}}}",
	"{\"topicConfigTable\":{\"\xff\":{" TOPIC_OK "}}}",
	/* too deep, even in an ignored field */
	"{\"x\":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]],\"topicConfigTable\":{}}",
};

static void
test_topics_malformed(void)
{
	struct meta_topic *out = NULL;
	struct meta_topic good[2];
	char longname[600];
	char *text;
	size_t n = 0;

	setup("topics.json");
	for (size_t i = 0; i < ARRAY_SIZE(bad_topics); i++) {
		int rc;

		write_text(bad_topics[i]);
		rc = meta_topics_load(&store_io_posix, path, &out, &n, NULL);
		if (rc != -EBADMSG)
			T_FAIL("bad_topics[%zu] %s: %d", i, bad_topics[i], rc);
	}
	/* The control case loads, with defaults and unknown fields ignored. */
	write_text("{\"topicConfigTable\":{\"T\":{" TOPIC_OK ",\"attributes\":{}}},\"x\":1}\n");
	T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, NULL), 0);
	T_ASSERT_EQ(n, 1);
	T_ASSERT_STREQ(out[0].name, "T");
	T_ASSERT_EQ(out[0].perm, 6);
	T_ASSERT(!out[0].order && !out[0].multi_tag);
	free(out);

	/* A name one byte too long. */
	memset(longname, 'n', META_TOPIC_MAX + 1);
	longname[META_TOPIC_MAX + 1] = '\0';
	{
		char doc[1024];

		snprintf(doc, sizeof(doc), "{\"topicConfigTable\":{\"%s\":{" TOPIC_OK "}}}",
			 longname);
		write_text(doc);
		T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, NULL), -EBADMSG);
		longname[META_TOPIC_MAX] = '\0';
		snprintf(doc, sizeof(doc), "{\"topicConfigTable\":{\"%s\":{" TOPIC_OK "}}}",
			 longname);
		write_text(doc);
		T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, NULL), 0);
		free(out);
	}

	/* Every truncation of a valid file fails cleanly. */
	make_topic(&good[0], 1);
	make_topic(&good[1], 2);
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, good, 2, NULL), 0);
	text = read_text(path);
	for (size_t cut = 0; cut + 2 < strlen(text); cut++) {
		char *part = strndup(text, cut);

		write_text(part);
		free(part);
		T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, NULL), -EBADMSG);
	}
	free(text);

	/* Over the size cap (sparse, never read). */
	{
		int fd = open(path, O_WRONLY | O_TRUNC);

		T_ASSERT(fd >= 0);
		T_ASSERT_EQ(ftruncate(fd, (512 << 20) + 1), 0);
		close(fd);
		T_ASSERT_EQ(meta_topics_load(&store_io_posix, path, &out, &n, NULL), -EFBIG);
	}
	teardown();
}

static const char *const bad_offsets[] = {
	"{}",
	"{\"offsetTable\":[]}",
	"{\"offsetTable\":{\"T@G\":[]}}",
	"{\"offsetTable\":{\"T@G\":{\"0\":\"12\"}}}",
	"{\"offsetTable\":{\"T@G\":{\"0\":1.5}}}",
	"{\"offsetTable\":{\"T@G\":{\"0\":null}}}",
	"{\"offsetTable\":{\"T@G\":{\"0\":9223372036854775808}}}",
	"{\"offsetTable\":{\"TG\":{\"0\":1}}}",
	"{\"offsetTable\":{\"@G\":{\"0\":1}}}",
	"{\"offsetTable\":{\"T@\":{\"0\":1}}}",
	"{\"offsetTable\":{\"T@G@\":{\"0\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"01\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"-1\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"+1\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"65535\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"123456\":1}}}",
	"{\"offsetTable\":{\"T@G\":{\"q\":1}}}",
	"{\"offsetTable\":{\"T@G\":{0:1}}}", /* RocketMQ's bare keys are not JSON */
	"{\"offsetTable\":{\"T@G\":{\"0\":1}}",
};

static void
test_offsets_malformed(void)
{
	struct meta_offset *out = NULL;
	char doc[1024];
	char name[300];
	size_t n = 0;

	setup("consumerOffset.json");
	for (size_t i = 0; i < ARRAY_SIZE(bad_offsets); i++) {
		int rc;

		write_text(bad_offsets[i]);
		rc = meta_offsets_load(&store_io_posix, path, &out, &n);
		if (rc != -EBADMSG)
			T_FAIL("bad_offsets[%zu] %s: %d", i, bad_offsets[i], rc);
	}
	/* Group one byte too long, then just right. */
	memset(name, 'g', META_GROUP_MAX + 1);
	name[META_GROUP_MAX + 1] = '\0';
	snprintf(doc, sizeof(doc), "{\"offsetTable\":{\"T@%s\":{\"0\":1}}}", name);
	write_text(doc);
	T_ASSERT_EQ(meta_offsets_load(&store_io_posix, path, &out, &n), -EBADMSG);
	name[META_GROUP_MAX] = '\0';
	snprintf(doc, sizeof(doc), "{\"offsetTable\":{\"T@%s\":{\"0\":1}}}", name);
	write_text(doc);
	T_ASSERT_EQ(meta_offsets_load(&store_io_posix, path, &out, &n), 0);
	T_ASSERT_EQ(n, 1);
	free(out);
	/* Topic one byte too long. */
	memset(name, 't', META_TOPIC_MAX + 1);
	name[META_TOPIC_MAX + 1] = '\0';
	snprintf(doc, sizeof(doc), "{\"offsetTable\":{\"%s@G\":{\"0\":1}}}", name);
	write_text(doc);
	T_ASSERT_EQ(meta_offsets_load(&store_io_posix, path, &out, &n), -EBADMSG);
	/* Control: an empty key object is zero offsets, a topic may hold '@'. */
	write_text("{\"offsetTable\":{\"T@G\":{},\"a@b@G\":{\"3\":-1}}}");
	T_ASSERT_EQ(meta_offsets_load(&store_io_posix, path, &out, &n), 0);
	T_ASSERT_EQ(n, 1);
	T_ASSERT_STREQ(out[0].topic, "a@b");
	T_ASSERT_STREQ(out[0].group, "G");
	T_ASSERT_EQ(out[0].queue_id, 3);
	T_ASSERT_EQ(out[0].offset, -1);
	free(out);
	teardown();
}

static void
test_save_refuses(void)
{
	struct meta_version big = {.counter = UINT64_MAX};
	struct meta_topic t[2];
	struct meta_offset o[2];

	setup("x.json");
	make_topic(&t[0], 1);
	make_topic(&t[1], 2);
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, &big), -EINVAL);
	t[1].name[0] = '\0';
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, NULL), -EINVAL);
	make_topic(&t[1], 1); /* duplicate */
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, NULL), -EINVAL);
	make_topic(&t[1], 2);
	t[1].read_queues = 0;
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, NULL), -EINVAL);
	t[1].read_queues = 1;
	t[1].write_queues = META_QUEUES_MAX + 1;
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, NULL), -EINVAL);
	t[1].write_queues = 1;
	t[1].perm = 16;
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, NULL), -EINVAL);
	t[1].perm = 6;
	memset(t[1].name, 'x', sizeof(t[1].name)); /* not terminated */
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 2, NULL), -EINVAL);
	T_ASSERT(!exists(path));

	memset(o, 0, sizeof(o));
	snprintf(o[0].topic, sizeof(o[0].topic), "T");
	snprintf(o[0].group, sizeof(o[0].group), "G");
	o[1] = o[0];
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, o, 2), -EINVAL); /* same queue */
	o[1].queue_id = META_QUEUES_MAX;
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, o, 2), -EINVAL);
	o[1].queue_id = 1;
	snprintf(o[1].group, sizeof(o[1].group), "G@H");
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, o, 2), -EINVAL);
	snprintf(o[1].group, sizeof(o[1].group), "%s", "");
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, o, 2), -EINVAL);
	snprintf(o[1].group, sizeof(o[1].group), "H");
	o[1].topic[0] = '\0';
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, o, 2), -EINVAL);
	T_ASSERT(!exists(path));
	snprintf(o[1].topic, sizeof(o[1].topic), "T");
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, o, 2), 0);
	teardown();
}

/* A table whose rename fails: the old file must survive, the temp must go. */
static int fail_rename;

static int
t_rename(void *c, const char *a, const char *b)
{
	if (fail_rename)
		return -EIO;
	return store_io_posix.rename(c, a, b);
}

static void
test_atomic_replace(void)
{
	struct store_io_ops io = store_io_posix;
	struct meta_topic t[2];
	struct meta_topic *out = NULL;
	char tmp[160];
	size_t n = 0;

	io.rename = t_rename;
	setup("topics.json");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	make_topic(&t[0], 1);
	make_topic(&t[1], 2);
	T_ASSERT_EQ(meta_topics_save(&io, path, t, 1, NULL), 0);
	T_ASSERT(!exists(tmp));
	T_ASSERT_EQ(meta_topics_save(&io, path, t, 2, NULL), 0);
	T_ASSERT(!exists(tmp));
	T_ASSERT_EQ(meta_topics_load(&io, path, &out, &n, NULL), 0);
	T_ASSERT_EQ(n, 2);
	free(out);

	fail_rename = 1;
	T_ASSERT_EQ(meta_topics_save(&io, path, t, 1, NULL), -EIO);
	T_ASSERT(!exists(tmp));
	fail_rename = 0;
	T_ASSERT_EQ(meta_topics_load(&io, path, &out, &n, NULL), 0);
	T_ASSERT_EQ(n, 2); /* still the previous version */
	topic_eq(&out[1], &t[1]);
	free(out);
	teardown();
}

static void
test_human_readable(void)
{
	struct meta_topic t[1];
	struct meta_offset o = {.queue_id = 3, .offset = 42};
	char *text;

	setup("topics.json");
	make_topic(&t[0], 0);
	snprintf(t[0].name, sizeof(t[0].name), "orders/eu-west");
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, t, 1, NULL), 0);
	text = read_text(path);
	T_ASSERT(strchr(text, '\n') != NULL);
	T_ASSERT(strstr(text, "\"orders/eu-west\"") != NULL); /* no "\/" escapes */
	T_ASSERT(strstr(text, "\"topicConfigTable\"") != NULL);
	T_ASSERT(strstr(text, "\"readQueueNums\"") != NULL);
	T_ASSERT(text[strlen(text) - 1] == '\n');
	free(text);

	snprintf(o.topic, sizeof(o.topic), "orders");
	snprintf(o.group, sizeof(o.group), "billing");
	T_ASSERT_EQ(meta_offsets_save(&store_io_posix, path, &o, 1), 0);
	text = read_text(path);
	T_ASSERT(strchr(text, '\n') != NULL);
	T_ASSERT(strstr(text, "\"orders@billing\"") != NULL);
	T_ASSERT(strstr(text, "\"3\"") != NULL);
	free(text);
	teardown();
}

/* The in-memory forms a master sends its slave: round trip, and bad text refused. */
static void
test_in_memory(void)
{
	struct meta_topic t[2] = {{.name = "A", .read_queues = 4, .write_queues = 4, .perm = 6},
				  {.name = "%RETRY%g",
				   .read_queues = 1,
				   .write_queues = 1,
				   .perm = 6,
				   .order = true}};
	struct meta_offset o[2] = {{.topic = "A", .group = "g", .queue_id = 3, .offset = 42},
				   {.topic = "A", .group = "h", .queue_id = 0, .offset = 7}};
	struct meta_version v = {.counter = 9, .timestamp_ms = 1700000000000};
	struct meta_version v2;
	struct meta_topic *tt;
	struct meta_offset *oo;
	size_t n, len;
	char *json;

	T_ASSERT_EQ(meta_topics_json(t, 2, &v, &json, &len), 0);
	T_ASSERT_EQ(meta_topics_parse(json, len, &tt, &n, &v2), 0);
	T_ASSERT_EQ(n, 2);
	T_ASSERT_STREQ(tt[1].name, "%RETRY%g");
	T_ASSERT(tt[1].order);
	T_ASSERT_EQ(v2.counter, 9);
	free(tt);
	T_ASSERT_EQ(meta_topics_parse(json, len - 2, &tt, &n, NULL), -EBADMSG);
	free(json);
	T_ASSERT_EQ(meta_offsets_json(o, 2, &json, &len), 0);
	T_ASSERT_EQ(meta_offsets_parse(json, len, &oo, &n), 0);
	T_ASSERT_EQ(n, 2);
	T_ASSERT_EQ(oo[0].offset + oo[1].offset, 49);
	free(oo);
	free(json);
	T_ASSERT_EQ(meta_offsets_parse("", 0, &oo, &n), -EBADMSG);
	{
		const char *no_at = "{\"offsetTable\":{\"A\":{\"0\":1}}}";
		const char *ok = "{\"offsetTable\":{\"A@g\":{\"0\":1}}}";

		T_ASSERT_EQ(meta_offsets_parse(no_at, strlen(no_at), &oo, &n), -EBADMSG);
		T_ASSERT_EQ(meta_offsets_parse(ok, strlen(ok), &oo, &n), 0);
		T_ASSERT_EQ(n, 1);
		free(oo);
	}
}

/* delayOffset.json: RocketMQ's fastjson text both ways, a missing file, bad texts. */
static void
test_delay_offsets(void)
{
	static const char *const bad[] = {
		"",
		"{}",
		"{\"offsetTable\":[]}",
		"{\"offsetTable\":{0:1}}",  /* keys are queue id + 1 */
		"{\"offsetTable\":{5:1}}",  /* past n */
		"{\"offsetTable\":{1:-1}}", /* negative */
		"{\"offsetTable\":{1:2,}}",
		"{\"offsetTable\":{1:2}} x",
		"{\"offsetTable\":{\"1:2}}",
		"{\"offsetTable\":{1:99999999999999999999}}",
	};
	int64_t off[4] = {0, -1, 7, 123456789012LL};
	int64_t back[4];
	char buf[128];
	long len;

	len = meta_delay_json(off, 4, buf, sizeof(buf));
	T_ASSERT(len > 0);
	T_ASSERT_STREQ(buf, "{\"offsetTable\":{1:0,3:7,4:123456789012}}");
	T_ASSERT_EQ(meta_delay_parse(buf, (size_t)len, back, 4), 0);
	T_ASSERT_MEMEQ(back, off, sizeof(off));
	T_ASSERT_EQ(meta_delay_json(off, 4, buf, 20), -ENOBUFS);
	/* fastjson's pretty form, quoted keys too */
	{
		const char *pretty = "{\n\t\"offsetTable\":{\n\t\t\"2\":5,\n\t\t1:3\n\t}\n}\n";

		T_ASSERT_EQ(meta_delay_parse(pretty, strlen(pretty), back, 4), 0);
	}
	T_ASSERT_EQ(back[0], 3);
	T_ASSERT_EQ(back[1], 5);
	T_ASSERT_EQ(back[2], -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		T_ASSERT_EQ(meta_delay_parse(bad[i], strlen(bad[i]), back, 4), -EBADMSG);
	setup("delayOffset.json");
	T_ASSERT_EQ(meta_delay_load(&store_io_posix, path, back, 4), 0);
	T_ASSERT_EQ(back[0], -1);
	T_ASSERT_EQ(meta_delay_save(&store_io_posix, path, off, 4), 0);
	T_ASSERT_EQ(meta_delay_load(&store_io_posix, path, back, 4), 0);
	T_ASSERT_MEMEQ(back, off, sizeof(off));
	teardown();
}

/* timerCheck: both ways, queues left out, bad lines. */
static void
test_timer_marks(void)
{
	static const char *const bad[] = {
		"0 1 2\n",
		"0 1 2 3 4\n",
		"0  1 2 3\n",
		"4 1 2 3\n",
		"0 1 2 3\n0 1 2 3\n",
		"0 -1 2 3\n",
		"0 1 2 99999999999999999999\n",
		"x\n",
	};
	struct meta_timer_mark m[4] = {
		{5, 6, 7}, {-1, 0, 0}, {1764780000000, 1200, 53687091}, {0, 0, 0}};
	struct meta_timer_mark back[4];
	char buf[256];
	long len = meta_timer_text(META_TIMER_HEADER, m, 4, buf, sizeof(buf));

	T_ASSERT(len > 0);
	T_ASSERT_STREQ(buf,
		       "# queue doneMs doneQueueOffset doneLogOffset\n0 5 6 7\n2 1764780000000 "
		       "1200 53687091\n3 0 0 0\n");
	T_ASSERT_EQ(meta_timer_parse(buf, (size_t)len, back, 4), 0);
	T_ASSERT_MEMEQ(back, m, sizeof(m));
	T_ASSERT_EQ(meta_timer_text(META_TIMER_HEADER, m, 4, buf, 60), -ENOBUFS);
	T_ASSERT_EQ(meta_timer_parse("3 1 2 3", 7, back, 4), 0); /* no newline at the end */
	T_ASSERT_EQ(back[3].done_log, 3);
	T_ASSERT_EQ(back[0].done_ms, -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (meta_timer_parse(bad[i], strlen(bad[i]), back, 4) != -EBADMSG)
			T_FAIL("accepted: %s", bad[i]);
}

/* json-c's pretty rendering of @t, as meta.c made topics.json before it wrote it straight. */
static char *
jsonc_topics(const struct meta_topic *t, size_t n, const struct meta_version *v)
{
	json_object *doc = json_object_new_object();
	json_object *dv = json_object_new_object();
	json_object *table = json_object_new_object();
	const char *s;
	char *out;

	json_object_object_add(dv, "counter", json_object_new_int64((int64_t)v->counter));
	json_object_object_add(dv, "timestamp", json_object_new_int64(v->timestamp_ms));
	json_object_object_add(doc, "dataVersion", dv);
	json_object_object_add(doc, "topicConfigTable", table);
	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "topicName", json_object_new_string(t[i].name));
		json_object_object_add(o, "readQueueNums", json_object_new_int64(t[i].read_queues));
		json_object_object_add(o, "writeQueueNums",
				       json_object_new_int64(t[i].write_queues));
		json_object_object_add(o, "perm", json_object_new_int64(t[i].perm));
		json_object_object_add(
			o, "topicFilterType",
			json_object_new_string(t[i].multi_tag ? "MULTI_TAG" : "SINGLE_TAG"));
		json_object_object_add(o, "topicSysFlag", json_object_new_int64(t[i].sys_flag));
		json_object_object_add(o, "order", json_object_new_boolean(t[i].order));
		json_object_object_add(table, t[i].name, o);
	}
	s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
							JSON_C_TO_STRING_NOSLASHESCAPE);
	T_ASSERT(s != NULL);
	T_ASSERT(asprintf(&out, "%s\n", s) > 0);
	json_object_put(doc);
	return out;
}

/* topics.json written straight is byte for byte json-c's, and a name json-c escapes still goes through json-c. */
static void
test_topics_text_as_jsonc(void)
{
	struct meta_topic t[4] = {
		{.name = "A", .read_queues = 4, .write_queues = 4, .perm = 6},
		{.name = "%RETRY%g|x_y-z",
		 .read_queues = 1,
		 .write_queues = 65535,
		 .perm = 2,
		 .sys_flag = 3,
		 .order = true,
		 .multi_tag = true},
		{.name = "TBW102", .read_queues = 8, .write_queues = 8, .perm = 7},
		{.name = "quote\"and\\slash/", .read_queues = 2, .write_queues = 2, .perm = 6},
	};
	struct meta_version v = {.counter = 42, .timestamp_ms = 1700000000123};

	for (size_t n = 0; n <= 4; n++) {
		char *want = jsonc_topics(t, n, &v);
		char *got = NULL;
		size_t len = 0;
		struct meta_topic *back = NULL;
		size_t nb = 0;

		T_ASSERT_EQ(meta_topics_json(t, n, &v, &got, &len), 0);
		T_ASSERT_EQ(len, strlen(want));
		T_ASSERT_MEMEQ(got, want, len);
		T_ASSERT_EQ(meta_topics_parse(got, len, &back, &nb, NULL), 0);
		T_ASSERT_EQ(nb, n);
		free(back);
		free(got);
		free(want);
	}
	/* a duplicate is refused either way */
	t[1] = t[0];
	{
		char *got = NULL;
		size_t len;

		T_ASSERT_EQ(meta_topics_json(t, 2, &v, &got, &len), -EINVAL);
		T_ASSERT(got == NULL);
	}
}

/* topics.json's journal: puts and deletes replayed in order, a torn last line, a damaged one. */
static void
test_journal(void)
{
	struct meta_topic a = {.name = "JA", .read_queues = 4, .write_queues = 4, .perm = 6};
	struct meta_topic b = {.name = "JB", .read_queues = 8, .write_queues = 2, .perm = 4};
	struct meta_version v = {.counter = 7, .timestamp_ms = 1700000000000};
	struct meta_version got = {0};
	struct meta_journal_replay jr;
	struct meta_topic *t = NULL;
	size_t n = 0, bytes = 0;
	char *text;

	setup("topics.json.journal");
	/* no journal: nothing to replay */
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, &got, &jr), 0);
	T_ASSERT_EQ(n, 0);
	T_ASSERT_EQ(jr.applied, 0);
	T_ASSERT_EQ(meta_journal_reset(path), 0);

	/* the base: JA and JB, as topics.json would give them */
	T_ASSERT((t = calloc(2, sizeof(*t))) != NULL);
	t[0] = a;
	t[1] = b;
	n = 2;
	T_ASSERT_EQ(meta_journal_put(path,
				     &(struct meta_topic){.name = "JC",
							  .read_queues = 1,
							  .write_queues = 1,
							  .perm = 6,
							  .order = true},
				     &v, &bytes),
		    0);
	T_ASSERT(bytes > 0 && bytes < 300);
	b.perm = 6;
	v.counter = 8;
	T_ASSERT_EQ(meta_journal_put(path, &b, &v, NULL), 0);
	v.counter = 9;
	T_ASSERT_EQ(meta_journal_delete(path, "JA", &v, NULL), 0);
	T_ASSERT_EQ(meta_journal_delete(path, "NoSuch", &v, NULL), 0); /* idempotent */
	text = read_text(path);
	T_ASSERT(strstr(text, "{\"put\":{\"topicName\":\"JC\"") == text);
	T_ASSERT(strstr(text, "{\"delete\":\"JA\",\"dataVersion\":{\"counter\":9,") != NULL);
	free(text);
	/* a write a crash cut: left out, said */
	{
		int fd = open(path, O_WRONLY | O_APPEND);

		T_ASSERT(fd >= 0);
		T_ASSERT_EQ(write(fd, "{\"delete\":\"JB\"", 14), 14);
		close(fd);
	}
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, &got, &jr), 0);
	T_ASSERT_EQ(jr.applied, 4);
	T_ASSERT(jr.torn);
	T_ASSERT_EQ(got.counter, 9);
	T_ASSERT_EQ(n, 2);
	T_ASSERT_STREQ(t[0].name, "JB"); /* the order of the others kept */
	T_ASSERT_EQ(t[0].perm, 6);
	T_ASSERT_EQ(t[0].read_queues, 8);
	T_ASSERT_STREQ(t[1].name, "JC");
	T_ASSERT(t[1].order);
	/* replayed again onto its own result: the same (each change is idempotent) */
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, &got, &jr), 0);
	T_ASSERT_EQ(n, 2);
	free(t);

	/* onto no base at all */
	t = NULL;
	n = 0;
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, NULL, &jr), 0);
	T_ASSERT_EQ(n, 2);
	free(t);

	/* a damaged line that is not the last: refused, and which one said */
	write_text("{\"put\":{\"topicName\":\"JD\",\"readQueueNums\":1,\"writeQueueNums\":1,"
		   "\"perm\":6}}\n{\"put\":{\"topicName\":\"JE\",\"readQueueNums\":0}}\n"
		   "{\"delete\":\"JD\"}\n");
	t = NULL;
	n = 0;
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, NULL, &jr), -EBADMSG);
	T_ASSERT_EQ(jr.bad_line, 2);
	free(t);
	write_text("not json\n");
	t = NULL;
	n = 0;
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, NULL, &jr), -EBADMSG);
	T_ASSERT_EQ(jr.bad_line, 1);
	free(t);
	write_text("{\"rename\":\"JD\"}\n");
	t = NULL;
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, NULL, &jr), -EBADMSG);
	free(t);

	/* reset: empty, and nothing replays */
	T_ASSERT_EQ(meta_journal_reset(path), 0);
	t = NULL;
	n = 0;
	T_ASSERT_EQ(meta_journal_replay(path, &t, &n, NULL, &jr), 0);
	T_ASSERT_EQ(jr.applied, 0);
	T_ASSERT_EQ(n, 0);
	free(t);
	T_ASSERT_EQ(meta_journal_delete(path, "", &v, NULL), -EINVAL);
	teardown();
}

T_MAIN(T_CASE(test_topics_round_trip), T_CASE(test_topics_text_as_jsonc),
       T_CASE(test_offsets_round_trip), T_CASE(test_missing_file), T_CASE(test_topics_malformed),
       T_CASE(test_offsets_malformed), T_CASE(test_save_refuses), T_CASE(test_atomic_replace),
       T_CASE(test_human_readable), T_CASE(test_in_memory), T_CASE(test_delay_offsets),
       T_CASE(test_timer_marks), T_CASE(test_journal))
