// SPDX-License-Identifier: Apache-2.0
/*
 * breg_body.c - the bodies a broker registers with: its whole topic set, or
 * the change since the set a NameServer already holds (breg.h).
 *
 * DESIGN
 * A whole RegisterBrokerBody grows with the topic count: about 150 bytes a
 * topic, 15 MB at 100,000 topics, resent on every topic change. A delta
 * names only the topics added or changed since the previous snapshot and the
 * names removed (sprocketDeletedTopics), so one topic creation costs bytes
 * proportional to one topic (docs/namesrv.md, "Delta registration"). The
 * delta is found by comparing two snapshots: an index of the older one by
 * name, one probe per topic of the newer, and a mark per older topic seen;
 * unmarked ones were removed. That is O(topics) of CPU on the agent thread,
 * the same order as taking the snapshot itself.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jbuf.h"
#include "control/breg.h"

static void
jbuf_u64(struct jbuf *o, uint64_t v)
{
	char s[24];
	int n = snprintf(s, sizeof(s), "%" PRIu64, v);

	jbuf_raw(o, s, (size_t)n);
}

static bool
topics_ok(const struct ctl_breg_topic *t, size_t n)
{
	if (n > 0 && t == NULL)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (t[i].name == NULL || t[i].name[0] == '\0' ||
		    (t[i].n_queue_cores > 0 && t[i].queue_cores == NULL))
			return false;
	}
	return true;
}

static void
topic_json(struct jbuf *o, const struct ctl_breg_topic *x)
{
	jbuf_cstr(o, x->name);
	jbuf_lit(o, ":{");
	if (x->n_queue_cores > 0) {
		jbuf_lit(o, "\"dataplaneQueueCores\":[");
		for (uint32_t q = 0; q < x->n_queue_cores; q++) {
			if (q > 0)
				jbuf_lit(o, ",");
			jbuf_i64(o, x->queue_cores[q]);
		}
		jbuf_lit(o, "],");
	}
	jbuf_lit(o, x->order ? "\"order\":true,\"perm\":" : "\"order\":false,\"perm\":");
	jbuf_i64(o, x->perm);
	jbuf_lit(o, ",\"readQueueNums\":");
	jbuf_i64(o, x->read_queues);
	jbuf_lit(o, ",\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":");
	jbuf_cstr(o, x->name);
	jbuf_lit(o, ",\"topicSysFlag\":");
	jbuf_i64(o, x->sys_flag);
	jbuf_lit(o, ",\"writeQueueNums\":");
	jbuf_i64(o, x->write_queues);
	jbuf_lit(o, "}");
}

/*
 * The body of @t's topics (those at @pick[0..n) when @pick is set), and for a
 * delta (@del set) the removed names. fastjson's order: keys sorted at every
 * level, no blanks.
 */
static int
body_json(const struct ctl_breg_topic *t, const uint32_t *pick, size_t n, const char *const *del,
	  size_t ndel, uint64_t dv_counter, int64_t dv_ts, char **json, size_t *len)
{
	struct jbuf o;
	size_t blen = 0;
	uint8_t *p;

	jbuf_init(&o);
	jbuf_lit(&o, "{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{"
		     "\"dataVersion\":{\"counter\":");
	jbuf_u64(&o, dv_counter);
	jbuf_lit(&o, ",\"timestamp\":");
	jbuf_i64(&o, dv_ts);
	jbuf_lit(&o, "},");
	if (del != NULL) {
		jbuf_lit(&o, "\"sprocketDeletedTopics\":[");
		for (size_t i = 0; i < ndel; i++) {
			if (i > 0)
				jbuf_lit(&o, ",");
			jbuf_cstr(&o, del[i]);
		}
		jbuf_lit(&o, "],");
	}
	jbuf_lit(&o, "\"topicConfigTable\":{");
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			jbuf_lit(&o, ",");
		topic_json(&o, &t[pick ? pick[i] : i]);
	}
	jbuf_lit(&o, "}}}");
	jbuf_raw(&o, "", 1); /* NUL, not counted */
	if (o.err != 0) {
		jbuf_free(&o);
		return -ENOMEM;
	}
	p = jbuf_take(&o, &blen);
	*json = (char *)p;
	*len = blen - 1;
	return 0;
}

int
ctl_breg_body(const struct ctl_breg_topic *t, size_t n, uint64_t dv_counter, int64_t dv_ts,
	      char **json, size_t *len)
{
	if (!topics_ok(t, n))
		return -EINVAL;
	return body_json(t, NULL, n, NULL, 0, dv_counter, dv_ts, json, len);
}

static uint64_t
name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static bool
topic_same(const struct ctl_breg_topic *a, const struct ctl_breg_topic *b)
{
	return a->read_queues == b->read_queues && a->write_queues == b->write_queues &&
	       a->perm == b->perm && a->sys_flag == b->sys_flag && a->order == b->order &&
	       a->n_queue_cores == b->n_queue_cores &&
	       (a->n_queue_cores == 0 ||
		memcmp(a->queue_cores, b->queue_cores, sizeof(uint16_t) * a->n_queue_cores) == 0);
}

int
ctl_breg_delta(const struct ctl_breg_topic *prev, size_t prev_n, const struct ctl_breg_topic *t,
	       size_t n, uint64_t dv_counter, int64_t dv_ts, char **json, size_t *len,
	       size_t *n_changed, size_t *n_deleted)
{
	uint32_t *slots = NULL;	 /* index + 1 into prev; 0 empty */
	uint8_t *seen = NULL;	 /* per prev topic */
	uint32_t *pick = NULL;	 /* changed topics of t */
	const char **del = NULL; /* removed names */
	size_t size = 16;
	size_t nc = 0;
	size_t nd = 0;
	int rc = -ENOMEM;

	if (!topics_ok(prev, prev_n) || !topics_ok(t, n) || prev_n >= UINT32_MAX || n >= UINT32_MAX)
		return -EINVAL;
	while (size < prev_n * 2)
		size *= 2;
	slots = calloc(size, sizeof(*slots));
	seen = calloc(prev_n ? prev_n : 1, 1);
	pick = malloc(sizeof(*pick) * (n ? n : 1));
	del = malloc(sizeof(*del) * (prev_n ? prev_n : 1));
	if (slots == NULL || seen == NULL || pick == NULL || del == NULL)
		goto out;
	for (size_t i = 0; i < prev_n; i++) {
		size_t k = name_hash(prev[i].name) & (size - 1);

		/* a name twice in a snapshot: the later one is the topic, as for a NameServer */
		while (slots[k] != 0 && strcmp(prev[slots[k] - 1].name, prev[i].name) != 0)
			k = (k + 1) & (size - 1);
		slots[k] = (uint32_t)i + 1;
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = name_hash(t[i].name) & (size - 1);

		while (slots[k] != 0 && strcmp(prev[slots[k] - 1].name, t[i].name) != 0)
			k = (k + 1) & (size - 1);
		if (slots[k] != 0) {
			seen[slots[k] - 1] = 1;
			if (topic_same(&prev[slots[k] - 1], &t[i]))
				continue;
		}
		pick[nc++] = (uint32_t)i;
	}
	for (size_t i = 0; i < prev_n; i++) {
		size_t k = name_hash(prev[i].name) & (size - 1);

		while (strcmp(prev[slots[k] - 1].name, prev[i].name) != 0)
			k = (k + 1) & (size - 1);
		/* each removed name once, at its indexed (latest) entry */
		if (slots[k] == i + 1 && !seen[i])
			del[nd++] = prev[i].name;
	}
	rc = body_json(t, pick, nc, del, nd, dv_counter, dv_ts, json, len);
	if (rc == 0) {
		*n_changed = nc;
		*n_deleted = nd;
	}
out:
	free(slots);
	free(seen);
	free(pick);
	free(del);
	return rc;
}
