// SPDX-License-Identifier: Apache-2.0
/*
 * bk_offsets_ctl.c - consumer offsets, the control side (bk_ctl.h): read
 * from every core's table (the cores commit them), consumerOffset.json
 * loaded into the cores at start and written by the persist thread every
 * flushConsumerOffsetInterval (with the delay, timer and transaction
 * progress every flushDelayOffsetInterval), and the committed offsets as
 * the HTTP API, the console and /metrics walk them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bk_ctl.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "store/meta.h"
#include "store/store.h"

/*
 * Calls @fn for every entry of every core's offset table that holds a
 * committed offset (>= 0), with the core that holds it. Return: 0, or the
 * first non-zero @fn returned (the walk stops).
 */
static int
offs_each(struct bk_ctl *x,
	  int (*fn)(void *arg, uint32_t core, const struct bk_off *e, int64_t off), void *arg)
{
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];

		for (uint32_t k = 0; k <= c->off_mask; k++) {
			const struct bk_off *e = &c->offs[k];
			int64_t off;
			int rc;

			/* acquire: pairs with the release in bk_core__off_find_ex(); the key is
			 * immutable after */
			if (!atomic_load_acquire(&e->used))
				continue;
			off = atomic_load_relaxed(&e->offset);
			if (off < 0)
				continue;
			rc = fn(arg, i, e, off);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

struct collect {
	struct meta_offset *o;
	size_t n, cap;
};

static int
collect_add(void *arg, uint32_t core, const struct bk_off *e, int64_t off)
{
	struct collect *cl = arg;

	(void)core;
	if (cl->n == cl->cap) {
		size_t cap = cl->cap ? cl->cap * 2 : 64;
		struct meta_offset *no = realloc(cl->o, cap * sizeof(*no));

		if (no == NULL)
			return -ENOMEM;
		cl->o = no;
		cl->cap = cap;
	}
	memset(&cl->o[cl->n], 0, sizeof(cl->o[cl->n]));
	memcpy(cl->o[cl->n].topic, e->topic, e->topic_len + 1);
	memcpy(cl->o[cl->n].group, e->group, e->group_len + 1);
	cl->o[cl->n].queue_id = e->qid;
	cl->o[cl->n].offset = off;
	cl->n++;
	return 0;
}

/* Every committed offset of every core, malloc'd. Return: 0, -ENOMEM. */
int
bk_offsets_collect(struct bk_ctl *x, struct meta_offset **out, size_t *out_n)
{
	struct collect cl = {0};
	int err = offs_each(x, collect_add, &cl);

	if (err) {
		free(cl.o);
		return err;
	}
	*out = cl.o;
	*out_n = cl.n;
	return 0;
}

int
bk_offsets_save(struct bk_ctl *x)
{
	struct meta_offset *o = NULL;
	size_t n = 0;
	int err = bk_offsets_collect(x, &o, &n);

	if (err)
		return err;
	err = meta_offsets_save(&store_io_posix, x->offsets_path, o, n);
	if (err)
		log_err(BK_TAG, "saving %s: %s", x->offsets_path, strerror(-err));
	free(o);
	return err;
}

/* Writes consumerOffset.json every flushConsumerOffsetInterval until told to stop. */
void *
bk_persist_main(void *arg)
{
	struct bk_ctl *x = arg;
	uint64_t every = (uint64_t)cfg_get_int(x->cfg, "flushConsumerOffsetInterval");
	uint64_t every_d = (uint64_t)cfg_get_int(x->cfg, "flushDelayOffsetInterval");
	uint64_t next = clk_mono_ns() / 1000000 + every;
	uint64_t next_d = clk_mono_ns() / 1000000 + every_d;

	pthread_setname_np(pthread_self(), "bk-persist");
	while (!atomic_load_relaxed(&x->persist_stop)) {
		uint64_t now = clk_mono_ns() / 1000000;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000L};

		if (now >= next) {
			(void)bk_offsets_save(x);
			next = clk_mono_ns() / 1000000 + every;
			continue;
		}
		if (now >= next_d) {
			(void)bk_delay_save(x);
			(void)bk_timer_save(x);
			(void)bk_tx_save(x);
			next_d = clk_mono_ns() / 1000000 + every_d;
			continue;
		}
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int
bk_offsets_load(struct bk_ctl *x)
{
	struct meta_offset *o = NULL;
	size_t n = 0;
	int err = meta_offsets_load(&store_io_posix, x->offsets_path, &o, &n);

	if (err) {
		log_err(BK_TAG, "%s: %s", x->offsets_path, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n && !err; i++) {
		const struct bk_topic *t = bk_topic_find(&x->bk, o[i].topic, strlen(o[i].topic));
		uint32_t core = t && o[i].queue_id < t->nq ? t->core[o[i].queue_id]
							   : o[i].queue_id % x->bk.ncores;

		err = bk_core_offset_load(&x->bk.cores[core], o[i].topic, o[i].group, o[i].queue_id,
					  o[i].offset);
	}
	free(o);
	if (err)
		log_err(BK_TAG, "consumer offsets do not fit consumerOffsetSlotsPerCore");
	return err;
}

struct committed {
	struct bk_ctl *x;
	int (*fn)(void *arg, const struct bk_off *e, const struct bk_topic *t, int64_t offset);
	void *arg;
};

static int
committed_one(void *arg, uint32_t core, const struct bk_off *e, int64_t off)
{
	struct committed *cm = arg;
	const struct bk_topic *t = bk_topic_find(&cm->x->bk, e->topic, e->topic_len);

	/* a name with a NUL in it (the wire allows one) would repeat a series */
	if (t == NULL || e->qid >= t->nq || t->core[e->qid] != core ||
	    strlen(e->group) != e->group_len)
		return 0;
	return cm->fn(cm->arg, e, t, off);
}

int
bk_committed_each(struct bk_ctl *x,
		  int (*fn)(void *arg, const struct bk_off *e, const struct bk_topic *t,
			    int64_t offset),
		  void *arg)
{
	struct committed cm = {x, fn, arg};

	return offs_each(x, committed_one, &cm);
}
