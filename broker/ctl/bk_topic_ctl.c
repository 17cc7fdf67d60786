// SPDX-License-Identifier: Apache-2.0
/*
 * bk_topic_ctl.c - the control thread's topic set (docs/broker.md): store
 * queues created, the RCU topic table published, the registration
 * snapshot and topics.json kept in step; topics created, updated and
 * deleted (DELETE_TOPIC_IN_BROKER).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "bk_ctl.h"
#include "bk_priv.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/breg.h"

/* ---- topics ---- */

static void
topic_free(struct bk_topic *t)
{
	if (t == NULL)
		return;
	free(t->sq);
	free(t->core);
	free(t);
}

/*
 * The registration snapshot's index by name, rebuilt when it grows past half
 * full or loses a topic. Without it every topic loaded or created searched
 * the whole snapshot: O(N^2) to load N topics. Caller holds mu.
 */
static int
reg_ix_build(struct bk_ctl *x, size_t want)
{
	uint32_t slots = 64;
	uint32_t *ix;

	while (slots < want * 2)
		slots <<= 1;
	ix = calloc(slots, sizeof(*ix));
	if (ix == NULL)
		return -ENOMEM;
	free(x->reg_ix);
	x->reg_ix = ix;
	x->reg_ix_mask = slots - 1;
	for (size_t i = 0; i < x->nreg; i++) {
		uint32_t h = bk_name_hash(x->reg[i].name, strlen(x->reg[i].name));

		for (uint32_t k = h & x->reg_ix_mask;; k = (k + 1) & x->reg_ix_mask) {
			if (ix[k] == 0) {
				ix[k] = (uint32_t)i + 1;
				break;
			}
		}
	}
	return 0;
}

/* Position of @name in reg, or nreg. Caller holds mu. */
static size_t
reg_find(const struct bk_ctl *x, const char *name, uint32_t *slot)
{
	uint32_t h = bk_name_hash(name, strlen(name));

	for (uint32_t k = h & x->reg_ix_mask;; k = (k + 1) & x->reg_ix_mask) {
		uint32_t v = x->reg_ix[k];

		if (v == 0) {
			*slot = k;
			return x->nreg;
		}
		if (strcmp(x->reg[v - 1].name, name) == 0)
			return v - 1;
	}
}

static int
reg_add(struct bk_ctl *x, const struct bk_topic *t)
{
	uint16_t *cores;
	uint32_t slot = 0;
	size_t i;
	int err = 0;

	cores = malloc(sizeof(*cores) * t->nq);
	if (cores == NULL)
		return -ENOMEM;
	memcpy(cores, t->core, sizeof(*cores) * t->nq);
	pthread_mutex_lock(&x->mu);
	if (x->reg_ix == NULL || (x->nreg + 1) * 2 > (size_t)x->reg_ix_mask + 1)
		err = reg_ix_build(x, x->nreg + 1);
	i = err ? 0 : reg_find(x, t->name, &slot);
	if (err == 0 && i == x->nreg && x->nreg == x->reg_cap) {
		size_t cap = x->reg_cap ? x->reg_cap * 2 : 64;
		struct meta_topic *n = realloc(x->reg, sizeof(*n) * cap);
		uint16_t **nc = n ? realloc(x->reg_cores, sizeof(*nc) * cap) : NULL;

		if (n)
			x->reg = n;
		if (nc == NULL)
			err = -ENOMEM;
		else {
			x->reg_cores = nc;
			x->reg_cap = cap;
		}
	}
	if (err) {
		pthread_mutex_unlock(&x->mu);
		free(cores);
		return err;
	}
	if (i == x->nreg) {
		x->reg_cores[i] = NULL;
		x->reg_ix[slot] = (uint32_t)i + 1;
		x->nreg++;
	}
	memset(&x->reg[i], 0, sizeof(x->reg[i]));
	memcpy(x->reg[i].name, t->name, t->name_len + 1);
	x->reg[i].read_queues = t->read_queues;
	x->reg[i].write_queues = t->write_queues;
	x->reg[i].perm = t->perm;
	x->reg[i].sys_flag = t->sys_flag;
	x->reg[i].order = t->order;
	free(x->reg_cores[i]);
	x->reg_cores[i] = cores;
	x->dv_counter++;
	x->dv_ts = clk_wall_ms();
	pthread_mutex_unlock(&x->mu);
	return 0;
}

void
bk_ctl_ttab_destroy(struct bk_ttab *t)
{
	if (t == NULL)
		return;
	for (uint32_t i = 0; i <= t->mask; i++)
		topic_free(t->slot[i]);
	bk_ttab_free(t);
}

void
bk_ctl_reg_clear(struct bk_ctl *x)
{
	for (size_t i = 0; i < x->nreg; i++)
		free(x->reg_cores[i]);
	free(x->reg_cores);
	free(x->reg);
	free(x->reg_ix);
	x->reg = NULL;
	x->reg_cores = NULL;
	x->reg_ix = NULL;
	x->nreg = 0;
	x->reg_cap = 0;
}

/*
 * The change to topic @name (NULL: none named) onto disk, and a new
 * registration at once: one line appended to topics.json's journal
 * (store/meta_journal.c) while the journal is smaller than topics.json is
 * about (160 bytes a topic), else topics.json rewritten whole from the
 * registration snapshot and the journal emptied. Context: under x->mu.
 * Return: 0, -errno.
 */
static int
save_locked(struct bk_ctl *x, const char *name)
{
	struct meta_version v = {.counter = x->dv_counter, .timestamp_ms = x->dv_ts};
	size_t limit = SP_MAX((size_t)1 << 20, x->nreg * 160);
	int err = -E2BIG;

	if (name != NULL && x->journal_bytes < limit) {
		uint32_t slot;
		size_t i = x->reg_ix ? reg_find(x, name, &slot) : x->nreg;
		size_t b = 0;

		if (x->reg_ix == NULL) {
			for (i = 0; i < x->nreg && strcmp(x->reg[i].name, name) != 0; i++)
				;
		}
		err = i < x->nreg ? meta_journal_put(x->journal_path, &x->reg[i], &v, &b)
				  : meta_journal_delete(x->journal_path, name, &v, &b);
		if (err == 0)
			x->journal_bytes += b;
		else
			log_warn(BK_TAG, "appending to %s: %s; saving %s whole", x->journal_path,
				 strerror(-err), x->topics_path);
	}
	if (err != 0) {
		err = meta_topics_save(&store_io_posix, x->topics_path, x->reg, x->nreg, &v);
		if (err == 0 && x->journal_bytes > 0 &&
		    (err = meta_journal_reset(x->journal_path)) == 0)
			x->journal_bytes = 0;
		if (err)
			log_err(BK_TAG, "saving %s: %s", x->topics_path, strerror(-err));
	}
	return err;
}

static int
persist(struct bk_ctl *x, const char *name)
{
	int err;

	if (x->save_deferred) {
		x->save_due = true;
		return 0;
	}
	pthread_mutex_lock(&x->mu);
	err = save_locked(x, name);
	pthread_mutex_unlock(&x->mu);
	if (x->breg)
		ctl_breg_kick(x->breg);
	return err;
}

int
bk_ctl_topics_compact(struct bk_ctl *x)
{
	int err = 0;

	pthread_mutex_lock(&x->mu);
	if (x->journal_bytes > 0)
		err = save_locked(x, NULL);
	pthread_mutex_unlock(&x->mu);
	return err;
}

int
bk_ctl_topics_save_deferred(struct bk_ctl *x)
{
	x->save_deferred = false;
	if (!x->save_due)
		return 0;
	x->save_due = false;
	return persist(x, NULL);
}

/* Creates (or updates) topic @mt: store queues, publish, persist, register. */
int
bk_ctl_topic_put(struct bk_ctl *x, const struct meta_topic *mt, bool save)
{
	struct bk *bk = &x->bk;
	struct bk_topic *t, *old;
	struct bk_ttab *old_tab;
	int err;

	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->name_len = (uint32_t)strlen(mt->name);
	memcpy(t->name, mt->name, t->name_len + 1);
	t->hash = bk_name_hash(t->name, t->name_len);
	t->perm = mt->perm;
	t->read_queues = mt->read_queues;
	t->write_queues = mt->write_queues;
	t->sys_flag = mt->sys_flag;
	t->order = mt->order;
	t->nq = SP_MAX(mt->read_queues, mt->write_queues);
	t->sq = calloc(t->nq, sizeof(*t->sq));
	t->core = calloc(t->nq, sizeof(*t->core));
	if (!t->sq || !t->core) {
		topic_free(t);
		return -ENOMEM;
	}
	for (uint32_t q = 0; q < t->nq; q++) {
		t->core[q] = (uint16_t)(q % bk->ncores);
		err = store_queue_get(bk->store, t->name, q, t->core[q], &t->sq[q]);
		if (err) {
			log_err(BK_TAG, "topic %s queue %u: %s", t->name, q, strerror(-err));
			topic_free(t);
			return err;
		}
	}
	err = bk_ttab_put(&bk->ttab, t, &old_tab, &old);
	if (err) {
		topic_free(t);
		return err;
	}
	/* A new topic put in place frees nothing: no grace period to wait for. */
	if (x->cores_running && (old_tab != NULL || old != NULL))
		urcu_qsbr_synchronize_rcu();
	bk_ttab_free(old_tab);
	topic_free(old);
	err = reg_add(x, t);
	if (err)
		return err;
	if (save)
		(void)persist(x,
			      mt->name); /* logged; the topic serves, saved with the next change */
	else if (x->breg)
		ctl_breg_kick(x->breg);
	return 0;
}

int
bk_ctl_topic_ensure(struct bk_ctl *x, const char *name, uint32_t nq, const struct bk_topic **out)
{
	const struct bk_topic *t = bk_topic_find(&x->bk, name, strlen(name));

	if (t == NULL || t->nq < nq) {
		struct meta_topic mt = {.read_queues = nq,
					.write_queues = nq,
					.perm = META_PERM_READ | META_PERM_WRITE};
		int err;

		snprintf(mt.name, sizeof(mt.name), "%s", name);
		err = bk_ctl_topic_put(x, &mt, true);
		if (err)
			return err;
		t = bk_topic_find(&x->bk, name, strlen(name));
		if (t == NULL)
			return -ENOENT;
	}
	*out = t;
	return 0;
}

/* Drops @name from the registration snapshot. Return: it was there. */
static bool
reg_remove(struct bk_ctl *x, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&x->mu);
	for (size_t i = 0; i < x->nreg; i++) {
		if (strcmp(x->reg[i].name, name) != 0)
			continue;
		free(x->reg_cores[i]);
		x->reg[i] = x->reg[x->nreg - 1];
		x->reg_cores[i] = x->reg_cores[x->nreg - 1];
		x->nreg--;
		x->dv_counter++;
		x->dv_ts = clk_wall_ms();
		found = true;
		break;
	}
	/* Positions moved: the index again (a deletion is rare; on failure, at the next add). */
	if (found && reg_ix_build(x, x->nreg) != 0) {
		free(x->reg_ix);
		x->reg_ix = NULL;
	}
	pthread_mutex_unlock(&x->mu);
	return found;
}

int
bk_ctl_topic_delete(struct bk_ctl *x, const char *name)
{
	struct bk *bk = &x->bk;
	struct bk_ttab *nt, *cur = bk->ttab;
	struct bk_topic *old;
	long n;
	int err;

	err = bk_ttab_without(cur, name, strlen(name), &nt, &old);
	if (err)
		return err;
	if (old == NULL) {
		bk_ttab_free(nt);
		return -ENOENT;
	}
	/* pairs with rcu_dereference() in bk_topic_find() */
	rcu_assign_pointer(bk->ttab, nt);
	if (x->cores_running)
		urcu_qsbr_synchronize_rcu();
	bk_ttab_free(cur);
	topic_free(old);
	/* no core reaches its queues now */
	n = store_queue_retire(bk->store, name);
	reg_remove(x, name);
	err = persist(x, name);
	log_info(BK_TAG,
		 "topic %s deleted (%ld queues; its records stay in the CommitLog until "
		 "retention)",
		 name, n);
	return err;
}

long
bk_ctl_clean_queues(struct bk_ctl *x)
{
	size_t max = 4096;
	char(*names)[WIRE_TOPIC_MAX + 1] = NULL;
	long n, done = 0;

	for (;;) {
		names = calloc(max, sizeof(*names));
		if (names == NULL)
			return -ENOMEM;
		n = store_queue_topics(x->bk.store, names, max);
		if (n != -ENOSPC)
			break;
		free(names);
		max *= 4;
	}
	/* a queue whose topic is gone: recovery re-dispatched a deleted topic's records */
	for (long i = 0; i < n; i++) {
		if (bk_topic_find(&x->bk, names[i], strlen(names[i])) != NULL)
			continue;
		if (store_queue_retire(x->bk.store, names[i]) > 0) {
			log_info(BK_TAG, "ConsumeQueues of %s deleted: no such topic", names[i]);
			done++;
		}
	}
	free(names);
	return n < 0 ? n : done;
}
