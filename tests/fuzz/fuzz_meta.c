// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_meta.c - topics.json, consumerOffset.json and topics.json's journal
 * (store/meta.c, store/meta_journal.c) on arbitrary bytes. The first byte
 * picks the reader. Oracles beyond "no crash, no overread, no leak" (ASan):
 * accepted topics are valid (names, queue counts, permissions) and write
 * back and read again to the same table; a replay onto a base of two topics
 * leaves valid, distinct topics only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_topics(const struct meta_topic *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (t[i].name[0] == '\0' || strlen(t[i].name) > META_TOPIC_MAX ||
		    t[i].read_queues < 1 || t[i].read_queues > META_QUEUES_MAX ||
		    t[i].write_queues < 1 || t[i].write_queues > META_QUEUES_MAX ||
		    t[i].perm > META_PERM_MAX)
			abort();
		for (size_t k = 0; k < i; k++)
			if (strcmp(t[i].name, t[k].name) == 0)
				abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_topic *t = NULL, *again = NULL;
	struct meta_version v, v2;
	size_t n = 0, n2 = 0, len;
	char *buf, *json;

	if (size < 1)
		return 0;
	buf = malloc(size);
	if (buf == NULL)
		return 0;
	memcpy(buf, data + 1, size - 1);
	switch (data[0] % 3) {
	case 0:
		if (meta_topics_parse(buf, size - 1, &t, &n, &v) == 0) {
			check_topics(t, n);
			if (meta_topics_json(t, n, &v, &json, &len) != 0)
				abort();
			if (meta_topics_parse(json, len, &again, &n2, &v2) != 0 || n2 != n ||
			    (n > 0 && memcmp(t, again, sizeof(*t) * n) != 0) ||
			    v2.counter != v.counter)
				abort();
			free(json);
		}
		break;
	case 1: {
		struct meta_offset *o = NULL;

		if (meta_offsets_parse(buf, size - 1, &o, &n) == 0)
			for (size_t i = 0; i < n; i++)
				if (o[i].topic[0] == '\0' || o[i].group[0] == '\0')
					abort();
		free(o);
		break;
	}
	default: {
		struct meta_journal_replay jr;

		t = calloc(2, sizeof(*t));
		if (t == NULL)
			break;
		strcpy(t[0].name, "A");
		strcpy(t[1].name, "B");
		t[0].read_queues = t[0].write_queues = t[1].read_queues = t[1].write_queues = 4;
		n = 2;
		if (meta_journal_replay_buf(buf, size - 1, &t, &n, NULL, &jr) == 0)
			check_topics(t, n);
		break;
	}
	}
	free(t);
	free(again);
	free(buf);
	return 0;
}
