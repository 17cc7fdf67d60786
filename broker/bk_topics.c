// SPDX-License-Identifier: Apache-2.0
/*
 * bk_topics.c - the broker's topic table: an immutable open-addressing hash
 * of immutable topics, published by the control thread with
 * rcu_assign_pointer() and read by the dataplane cores under QSBR without a
 * lock.
 *
 * A created or changed topic goes into its slot in place
 * (rcu_assign_pointer()): a reader finds either the old slot's content or
 * the whole new topic, and probe chains never break, as only a deletion
 * empties a slot, and a deletion builds a new table. A table over half full
 * is replaced by one twice its size. The control thread frees a replaced
 * table or topic after synchronize_rcu(). Building a whole table per topic
 * made loading N topics O(N^2): 19,500 topics took 23-34 s to start.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "bk_priv.h"
#include "wire/record.h"

uint32_t
bk_name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

bool
bk_topic_name_ok(const char *s, size_t len)
{
	return len <= META_TOPIC_MAX && wire_topic_name_ok(s, len);
}

/*
 * RocketMQ's system topics (TopicValidator): the broker creates and writes
 * them itself; an admin request must never create or overwrite one.
 */
bool
bk_topic_is_system(const char *name)
{
	static const char *const names[] = {"TBW102",
					    "SCHEDULE_TOPIC_XXXX",
					    "BenchmarkTest",
					    "OFFSET_MOVED_EVENT",
					    "TRANS_CHECK_MAX_TIME_TOPIC",
					    "SELF_TEST_TOPIC",
					    BK_TIMER_TOPIC};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return strncmp(name, "RMQ_SYS_", 8) == 0 || strncmp(name, "rmq_sys_", 8) == 0;
}

const struct bk_group *
bk_group_find(const struct bk *bk, const char *name, size_t len)
{
	/* pairs with rcu_assign_pointer() in bk_group_ctl.c's publish */
	const struct bk_gtab *t = rcu_dereference(bk->gtab);
	uint32_t h;

	if (t == NULL)
		return NULL;
	h = bk_name_hash(name, len);
	for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
		const struct bk_group *g = &t->slot[i];

		if (g->name_len == 0)
			return NULL;
		if (g->hash == h && g->name_len == len && memcmp(g->name, name, len) == 0)
			return g;
	}
}

int
bk_gtab_build(const struct bk_group *g, size_t n, struct bk_gtab **out)
{
	uint32_t slots = 16;
	struct bk_gtab *t;

	while (slots < n * 2)
		slots <<= 1;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->slot = calloc(slots, sizeof(*t->slot));
	if (t->slot == NULL) {
		free(t);
		return -ENOMEM;
	}
	t->mask = slots - 1;
	for (size_t k = 0; k < n; k++) {
		uint32_t h = bk_name_hash(g[k].name, g[k].name_len);

		for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
			if (t->slot[i].name_len == 0) {
				t->slot[i] = g[k];
				t->slot[i].hash = h;
				t->n++;
				break;
			}
		}
	}
	*out = t;
	return 0;
}

void
bk_gtab_free(struct bk_gtab *t)
{
	if (t == NULL)
		return;
	free(t->slot);
	free(t);
}

static const struct bk_topic *
tab_find(const struct bk_ttab *t, const char *name, size_t len, uint32_t h)
{
	if (t == NULL)
		return NULL;
	for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
		/* pairs with rcu_assign_pointer() in bk_ttab_put() (a topic put in place) */
		const struct bk_topic *p = rcu_dereference(t->slot[i]);

		if (p == NULL)
			return NULL;
		if (p->hash == h && p->name_len == len && memcmp(p->name, name, len) == 0)
			return p;
	}
}

const struct bk_topic *
bk_topic_find(const struct bk *bk, const char *name, size_t len)
{
	/* pairs with rcu_assign_pointer() in the control thread's publish */
	const struct bk_ttab *t = rcu_dereference(bk->ttab);

	return tab_find(t, name, len, bk_name_hash(name, len));
}

static void
tab_put(struct bk_ttab *t, struct bk_topic *p)
{
	for (uint32_t i = p->hash & t->mask;; i = (i + 1) & t->mask) {
		if (t->slot[i] == NULL) {
			t->slot[i] = p;
			t->n++;
			return;
		}
	}
}

/* An empty table with room for @n topics at most half full. */
static struct bk_ttab *
tab_new(uint32_t n)
{
	uint32_t slots = 16;
	struct bk_ttab *nt;

	while (slots < n * 2)
		slots <<= 1;
	nt = calloc(1, sizeof(*nt));
	if (nt == NULL)
		return NULL;
	nt->slot = calloc(slots, sizeof(*nt->slot));
	if (nt->slot == NULL) {
		free(nt);
		return NULL;
	}
	nt->mask = slots - 1;
	return nt;
}

int
bk_ttab_without(const struct bk_ttab *cur, const char *name, size_t len, struct bk_ttab **out,
		struct bk_topic **old)
{
	struct bk_ttab *nt = tab_new(cur ? cur->n : 0);

	*old = NULL;
	if (nt == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; cur && i <= cur->mask; i++) {
		struct bk_topic *p = cur->slot[i];

		if (p == NULL)
			continue;
		if (p->name_len == len && memcmp(p->name, name, len) == 0) {
			*old = p;
			continue;
		}
		tab_put(nt, p);
	}
	*out = nt;
	return 0;
}

int
bk_ttab_put(struct bk_ttab **tabp, struct bk_topic *t, struct bk_ttab **old_tab,
	    struct bk_topic **old)
{
	struct bk_ttab *cur = *tabp; /* the control thread is the only writer */
	struct bk_ttab *nt;

	*old = NULL;
	*old_tab = NULL;
	if (cur != NULL) {
		for (uint32_t i = t->hash & cur->mask;; i = (i + 1) & cur->mask) {
			struct bk_topic *p = cur->slot[i];

			if (p != NULL && (p->hash != t->hash || p->name_len != t->name_len ||
					  memcmp(p->name, t->name, t->name_len) != 0))
				continue;
			if (p == NULL && (uint64_t)(cur->n + 1) * 2 > (uint64_t)cur->mask + 1)
				break; /* a new topic in a table half full: grow */
			/* pairs with rcu_dereference() in tab_find() */
			rcu_assign_pointer(cur->slot[i], t);
			if (p == NULL)
				cur->n++;
			*old = p;
			return 0;
		}
	}
	nt = tab_new(cur ? 2 * (cur->n + 1) : 1);
	if (nt == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; cur && i <= cur->mask; i++)
		if (cur->slot[i] != NULL)
			tab_put(nt, cur->slot[i]);
	tab_put(nt, t);
	/* pairs with rcu_dereference() in bk_topic_find() */
	rcu_assign_pointer(*tabp, nt);
	*old_tab = cur;
	return 0;
}

void
bk_ttab_free(struct bk_ttab *tab)
{
	if (tab == NULL)
		return;
	free(tab->slot);
	free(tab);
}
