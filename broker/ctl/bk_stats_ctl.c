// SPDX-License-Identifier: Apache-2.0
/*
 * bk_stats_ctl.c - per-topic and per-group counts by minute, hour and day
 * (RocketMQ's BrokerStatsManager as mqadmin statsAll reads it with
 * VIEW_BROKER_STATS_DATA, and ConsumeStats' consumeTps).
 *
 * Once a minute the control thread samples two kinds of totals, lock-free:
 *  - TOPIC_PUT_NUMS <topic>: messages stored, the sum of its ConsumeQueues'
 *    max offsets (cq_max(), acquire);
 *  - GROUP_GET_NUMS <topic>@<group>: messages the group pulled and the pulls
 *    that found some, the cores' counters in its offset slots.
 * A series keeps 61 minute samples and 25 hour samples (about 1.4 KB), so a
 * day's figure spans up to 24 hours. Figures are differences between
 * samples: the last minute, the last hour, the last day (or since the
 * series began).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bk_ctl.h"
#include "bk_priv.h"
#include "common/config.h"
#include "common/jbuf.h"
#include "common/log.h"
#include "store/cq.h"

#define MIN_N 61
#define HOUR_N 25

struct series {
	char key[META_TOPIC_MAX + META_GROUP_MAX + 3]; /* 'P' or 'G', then the RocketMQ key */
	uint64_t born;				       /* its first sample (0 there) */
	uint64_t cur_msgs, cur_calls;		       /* being summed by this sample */
	uint64_t msgs[MIN_N], calls[MIN_N];
	uint64_t hmsgs[HOUR_N], hcalls[HOUR_N];
};

struct bk_stats {
	struct series *s;
	size_t n, cap;
	uint32_t *idx; /* open addressing: index + 1, 0 empty */
	uint32_t mask;
	uint64_t at; /* minute samples taken */
	uint64_t next_ms;
	uint32_t sample_ms; /* statsSampleMillis: a "minute" (60000; tests shorten it) */
};

static uint32_t
key_hash(const char *k)
{
	return bk_name_hash(k, strlen(k));
}

static int
index_grow(struct bk_stats *st)
{
	uint32_t size = st->idx ? (st->mask + 1) * 2 : 1024;
	uint32_t *idx = calloc(size, sizeof(*idx));

	if (idx == NULL)
		return -ENOMEM;
	free(st->idx);
	st->idx = idx;
	st->mask = size - 1;
	for (size_t i = 0; i < st->n; i++) {
		uint32_t h = key_hash(st->s[i].key) & st->mask;

		while (st->idx[h])
			h = (h + 1) & st->mask;
		st->idx[h] = (uint32_t)i + 1;
	}
	return 0;
}

static struct series *
find(struct bk_stats *st, const char *key, bool create)
{
	uint32_t h;

	if (st->idx == NULL && (!create || index_grow(st) != 0))
		return NULL;
	for (h = key_hash(key) & st->mask; st->idx[h]; h = (h + 1) & st->mask)
		if (strcmp(st->s[st->idx[h] - 1].key, key) == 0)
			return &st->s[st->idx[h] - 1];
	if (!create)
		return NULL;
	if ((st->n + 1) * 2 > st->mask + 1) {
		if (index_grow(st) != 0)
			return NULL;
		return find(st, key, true);
	}
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 256;
		struct series *n = realloc(st->s, cap * sizeof(*n));

		if (n == NULL)
			return NULL;
		st->s = n;
		st->cap = cap;
	}
	memset(&st->s[st->n], 0, sizeof(st->s[st->n]));
	snprintf(st->s[st->n].key, sizeof(st->s[st->n].key), "%s", key);
	/* it had nothing one sample ago (a new topic, a group's first pull), so its first sample
	 * counts; what a topic held when the broker started is not counted */
	st->s[st->n].born = st->at ? st->at - 1 : 0;
	st->idx[h] = (uint32_t)st->n + 1;
	return &st->s[st->n++];
}

static void
add(struct bk_stats *st, const char *key, uint64_t msgs, uint64_t calls)
{
	/*
	 * A total still 0 has nothing to show: no series (1.8 KB each) until
	 * it moves, so 250,000 idle topics cost no 450 MB of empty series.
	 */
	struct series *s = find(st, key, msgs > 0 || calls > 0);

	if (s) {
		s->cur_msgs += msgs;
		s->cur_calls += calls;
	}
}

static void
sample(struct bk_ctl *x, struct bk_stats *st)
{
	const struct bk_ttab *t = x->bk.ttab; /* this thread publishes it */
	char key[sizeof(((struct series *)0)->key)];

	for (uint32_t i = 0; t && i <= t->mask; i++) {
		const struct bk_topic *tp = t->slot[i];
		uint64_t sum = 0;

		if (tp == NULL)
			continue;
		for (uint32_t q = 0; q < tp->nq; q++)
			sum += cq_max(store_queue_cq(tp->sq[q]));
		snprintf(key, sizeof(key), "P%s", tp->name);
		add(st, key, sum, sum);
	}
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];

		for (uint32_t k = 0; k <= c->off_mask; k++) {
			const struct bk_off *e = &c->offs[k];

			/* acquire: pairs with the release in off_find(); the key is immutable after */
			if (!atomic_load_acquire(&e->used))
				continue;
			snprintf(key, sizeof(key), "G%s@%s", e->topic, e->group);
			add(st, key, atomic_load_relaxed(&e->pulled),
			    atomic_load_relaxed(&e->pulls));
		}
	}
	for (size_t i = 0; i < st->n; i++) {
		struct series *s = &st->s[i];

		s->msgs[st->at % MIN_N] = s->cur_msgs;
		s->calls[st->at % MIN_N] = s->cur_calls;
		if (st->at % 60 == 0) {
			s->hmsgs[(st->at / 60) % HOUR_N] = s->cur_msgs;
			s->hcalls[(st->at / 60) % HOUR_N] = s->cur_calls;
		}
		s->cur_msgs = s->cur_calls = 0;
	}
	st->at++;
}

void
bk_stats_tick(struct bk_ctl *x, uint64_t now_ms)
{
	struct bk_stats *st = x->stats;

	if (st == NULL) {
		st = calloc(1, sizeof(*st));
		if (st == NULL)
			return;
		st->sample_ms = (uint32_t)cfg_get_int(x->cfg, "statsSampleMillis");
		x->stats = st;
	}
	if (now_ms < st->next_ms)
		return;
	st->next_ms = now_ms + st->sample_ms;
	sample(x, st);
}

/* The series' growth over the last @mins minutes (less when it is younger). */
static void
window(const struct bk_stats *st, const struct series *s, uint64_t mins, uint64_t *msgs,
       uint64_t *calls, uint64_t *secs)
{
	uint64_t last = st->at - 1;
	uint64_t have = last - s->born; /* minutes of history */
	uint64_t back, m0, c0;

	if (mins <= MIN_N - 1 || have < MIN_N - 1) {
		back = mins < have ? mins : have;
		m0 = s->msgs[(last - back) % MIN_N];
		c0 = s->calls[(last - back) % MIN_N];
	} else {
		/* the oldest hour sample within @mins that the series has (taken at minute j * 60) */
		uint64_t j = (s->born + 59) / 60;

		if (last >= mins && (last - mins + 59) / 60 > j)
			j = (last - mins + 59) / 60;
		back = last - j * 60;
		m0 = s->hmsgs[j % HOUR_N];
		c0 = s->hcalls[j % HOUR_N];
	}
	/* a total that went down (its topic deleted and made again): count from zero */
	*msgs = s->msgs[last % MIN_N] >= m0 ? s->msgs[last % MIN_N] - m0 : s->msgs[last % MIN_N];
	*calls =
		s->calls[last % MIN_N] >= c0 ? s->calls[last % MIN_N] - c0 : s->calls[last % MIN_N];
	*secs = back * st->sample_ms / 1000;
}

static void
item(struct jbuf *b, const char *name, uint64_t msgs, uint64_t calls, uint64_t secs, bool avg)
{
	jbuf_key(b, name);
	jbuf_lit(b, "{\"avgpt\":");
	jbuf_double(b, avg && calls ? (double)msgs / (double)calls : 0.0);
	jbuf_lit(b, ",\"sum\":");
	jbuf_i64(b, (int64_t)msgs);
	jbuf_lit(b, ",\"tps\":");
	jbuf_double(b, secs ? (double)msgs / (double)secs : 0.0);
	jbuf_lit(b, "}");
}

int
bk_stats_data(struct bk_ctl *x, const char *name, const char *key, struct jbuf *b)
{
	struct bk_stats *st = x->stats;
	char k[sizeof(((struct series *)0)->key)];
	const struct series *s;
	bool get = strcmp(name, "GROUP_GET_NUMS") == 0;
	uint64_t m, c, secs;

	if (st == NULL || st->at == 0 || (!get && strcmp(name, "TOPIC_PUT_NUMS") != 0))
		return -ENOENT;
	snprintf(k, sizeof(k), "%c%s", get ? 'G' : 'P', key);
	s = find(st, k, false);
	if (s == NULL)
		return -ENOENT;
	jbuf_lit(b, "{");
	window(st, s, 24 * 60, &m, &c, &secs);
	item(b, "statsDay", m, c, secs, get);
	jbuf_lit(b, ",");
	window(st, s, 60, &m, &c, &secs);
	item(b, "statsHour", m, c, secs, get);
	jbuf_lit(b, ",");
	window(st, s, 1, &m, &c, &secs);
	item(b, "statsMinute", m, c, secs, get);
	jbuf_lit(b, "}");
	return b->err;
}

double
bk_stats_group_tps(struct bk_ctl *x, const char *group, const char *topic)
{
	struct bk_stats *st = x->stats;
	char k[sizeof(((struct series *)0)->key)];
	const struct series *s;
	uint64_t m, c, secs;

	if (st == NULL || st->at == 0)
		return 0.0;
	snprintf(k, sizeof(k), "G%s@%s", topic, group);
	s = find(st, k, false);
	if (s == NULL)
		return 0.0;
	window(st, s, 1, &m, &c, &secs);
	return secs ? (double)m / (double)secs : 0.0;
}

void
bk_stats_fini(struct bk_ctl *x)
{
	struct bk_stats *st = x->stats;

	if (st == NULL)
		return;
	free(st->s);
	free(st->idx);
	free(st);
	x->stats = NULL;
}
