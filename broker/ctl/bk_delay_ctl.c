// SPDX-License-Identifier: Apache-2.0
/*
 * bk_delay_ctl.c - delay levels, the control side (bk_ctl.h): the level
 * table from messageDelayLevel, SCHEDULE_TOPIC_XXXX, and delayOffset.json.
 * The cores deliver (bk_delay.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bk_ctl.h"
#include "common/log.h"
#include "store/meta_delay.h"
#include "store/io.h"
#include "store/store.h"
#include "wire/record.h"

int
bk_delay_conf(struct bk_ctl *x)
{
	const char *s = cfg_get_str(x->cfg, "messageDelayLevel");
	struct bk_conf *conf = &x->bk.conf;
	uint32_t n = 0;

	/* RocketMQ's parseDelayLevel: "1s 5s ... 2h", units s m h d, level = position. */
	while (s != NULL && *s != '\0') {
		const char *end = strchr(s, ' ');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		uint64_t unit, num = 0;

		if (len == 0) {
			s++;
			continue;
		}
		switch (s[len - 1]) {
		case 's':
			unit = 1000;
			break;
		case 'm':
			unit = 60000;
			break;
		case 'h':
			unit = 3600000;
			break;
		case 'd':
			unit = 86400000;
			break;
		default:
			unit = 0;
		}
		for (size_t i = 0; i + 1 < len && unit; i++) {
			if (s[i] < '0' || s[i] > '9' || num > UINT32_MAX)
				unit = 0;
			else
				num = num * 10 + (uint64_t)(s[i] - '0');
		}
		if (unit == 0 || len < 2 || n >= BK_DELAY_LEVELS_MAX) {
			log_err(BK_TAG,
				"messageDelayLevel: '%.*s' is not a delay (a number and s, m, h or "
				"d; "
				"at most %u levels)",
				(int)SP_MIN(len, (size_t)32), s, BK_DELAY_LEVELS_MAX);
			return -EINVAL;
		}
		conf->delay_ms[++n] = num * unit;
		s += len;
	}
	conf->delay_levels = n;
	return 0;
}

#define DELAY_DUP_SCAN 10000u /* units of a real queue searched for a delivered copy */

/*
 * Was the schedule record at @phys (due at @due_ms) delivered already? Its
 * copy names it (BK_DELAY_SRC_PROP) and was stored at or after @due_ms in
 * its real queue. Before the cores run (the control thread reads the store).
 */
static bool
delivered(struct bk_ctl *x, const struct wire_msg *s, int64_t due_ms)
{
	struct bk *bk = &x->bk;
	const struct bk_topic *t;
	const char *rt;
	size_t rtl;
	uint64_t from, max;
	uint32_t qid;

	if (!bk_delay_target(s, &rt, &rtl, &qid))
		return false;
	t = bk_topic_find(bk, rt, rtl);
	if (t == NULL || qid >= t->nq ||
	    store_search_time(bk->store, t->sq[qid], due_ms, &from) != 0)
		return false;
	max = store_queue_max(bk->store, t->sq[qid]);
	for (uint64_t o = from; o < max && o < from + DELAY_DUP_SCAN; o++) {
		const uint8_t *rec;
		struct cq_unit u;
		struct wire_msg m;
		uint64_t src;
		long n = store_get(bk->store, t->sq[qid], o, &rec, &u);

		if (n < 0 || wire_rec_decode(rec, (size_t)n, 0, &m) < 0)
			continue;
		if (wire_props_get_uint(m.props, m.props_len, BK_DELAY_SRC_PROP, &src) &&
		    src == (uint64_t)s->phys_offset)
			return true;
	}
	return false;
}

/* Move @d past the records at its head that a crash kept it from recording as delivered. */
static void
skip_delivered(struct bk_ctl *x, struct bk_delay_q *d, uint32_t level, uint32_t q)
{
	struct bk *bk = &x->bk;
	uint64_t first = d->off;

	while (d->off < store_queue_max(bk->store, d->sq)) {
		const uint8_t *rec;
		struct cq_unit u;
		struct wire_msg m;
		long n = store_get(bk->store, d->sq, d->off, &rec, &u);

		if (n < 0 || wire_rec_decode(rec, (size_t)n, 0, &m) < 0 ||
		    !delivered(x, &m, m.store_ts + (int64_t)bk->conf.delay_ms[level]))
			break;
		d->off++;
	}
	if (d->off != first)
		log_info(BK_TAG,
			 "%s queue %u: %" PRIu64 " message(s) from offset %" PRIu64
			 " were delivered before the last stop without being recorded: not again",
			 BK_SCHED_TOPIC, q, d->off - first, first);
}

/* Queue count of SCHEDULE_TOPIC_XXXX: one per level and core. */
static uint32_t
sched_queues(const struct bk_ctl *x)
{
	return x->bk.conf.delay_levels * x->bk.ncores;
}

int
bk_delay_setup(struct bk_ctl *x)
{
	struct bk *bk = &x->bk;
	uint32_t nq = sched_queues(x);
	const struct bk_topic *t;
	int64_t *off;
	int err;

	snprintf(x->delay_path, sizeof(x->delay_path), "%s/config/delayOffset.json",
		 cfg_get_str(x->cfg, "storePathRootDir"));
	/* A slave copies the schedule queues with its log and delivers nothing. */
	if (nq == 0 || bk->conf.role == BK_ROLE_SLAVE)
		return 0;
	err = bk_ctl_topic_ensure(x, BK_SCHED_TOPIC, nq, &t);
	if (err)
		return err;
	off = malloc(sizeof(*off) * t->nq);
	if (off == NULL)
		return -ENOMEM;
	err = meta_delay_load(&store_io_posix, x->delay_path, off,
			      SP_MIN(t->nq, META_DELAY_KEYS_MAX));
	if (err) {
		log_err(BK_TAG, "%s: %s", x->delay_path, strerror(-err));
		free(off);
		return err;
	}
	for (uint32_t i = 0; i < bk->ncores && !err; i++) {
		struct bk_core *c = &bk->cores[i];

		c->dq = calloc(bk->conf.delay_levels, sizeof(*c->dq));
		if (c->dq == NULL) {
			err = -ENOMEM;
			break;
		}
		for (uint32_t l = 0; l < bk->conf.delay_levels; l++) {
			uint32_t q = l * bk->ncores + i;
			struct bk_delay_q *d = &c->dq[l];
			uint64_t min, max;

			d->sq = t->sq[q];
			min = store_queue_min(bk->store, d->sq);
			max = store_queue_max(bk->store, d->sq);
			d->off = q < META_DELAY_KEYS_MAX && off[q] >= 0 ? (uint64_t)off[q] : min;
			if (d->off < min || d->off > max) {
				log_warn(BK_TAG,
					 "%s: queue %u's offset %" PRIu64 " is outside [%" PRIu64
					 ", %" PRIu64 "]: from %" PRIu64,
					 x->delay_path, q, d->off, min, max,
					 d->off < min ? min : max);
				d->off = d->off < min ? min : max;
			}
			skip_delivered(x, d, l + 1, q);
			atomic_store_relaxed(&d->pub_off, d->off);
		}
	}
	free(off);
	if (err == 0)
		log_info(BK_TAG, "delay levels: %u (%" PRIu64 " ms .. %" PRIu64 " ms), %s",
			 bk->conf.delay_levels, bk->conf.delay_ms[1],
			 bk->conf.delay_ms[bk->conf.delay_levels], x->delay_path);
	return err;
}

/* The cores' published progress, queue by queue; -1 where none. */
static int64_t *
progress(struct bk_ctl *x, size_t *n)
{
	struct bk *bk = &x->bk;
	size_t nq = SP_MIN((size_t)sched_queues(x), (size_t)META_DELAY_KEYS_MAX);
	int64_t *off = malloc(sizeof(*off) * (nq ? nq : 1));

	if (off == NULL)
		return NULL;
	for (size_t q = 0; q < nq; q++) {
		const struct bk_core *c = &bk->cores[q % bk->ncores];

		off[q] = c->dq ? (int64_t)atomic_load_relaxed(&c->dq[q / bk->ncores].pub_off) : -1;
	}
	*n = nq;
	return off;
}

int
bk_delay_save(struct bk_ctl *x)
{
	size_t n = 0;
	int64_t *off;
	int err;

	if (x->bk.cores == NULL || x->bk.cores[0].dq == NULL)
		return 0;
	off = progress(x, &n);
	if (off == NULL)
		return -ENOMEM;
	err = meta_delay_save(&store_io_posix, x->delay_path, off, n);
	if (err)
		log_err(BK_TAG, "saving %s: %s", x->delay_path, strerror(-err));
	free(off);
	return err;
}

int
bk_delay_json(struct bk_ctl *x, char **json, size_t *len)
{
	size_t n = 0;
	int64_t *off = progress(x, &n);
	size_t cap = 32 + n * 32;
	long w;

	if (off == NULL)
		return -ENOMEM;
	*json = malloc(cap);
	if (*json == NULL) {
		free(off);
		return -ENOMEM;
	}
	w = meta_delay_json(off, n, *json, cap);
	free(off);
	if (w < 0) {
		free(*json);
		*json = NULL;
		return (int)w;
	}
	*len = (size_t)w;
	return 0;
}
