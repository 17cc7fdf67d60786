// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_held.c - long-polling PULLs the remoting thread holds (control
 * thread): those that found no place in their core's park table.
 *
 * DESIGN
 * A core parks a long poll in a table of remotingLongPollsPerCore slots,
 * which a RocketMQ consumer of a 100,000-queue topic fills alone: it keeps
 * one PULL in flight per queue, all on one connection. Past the table, or
 * past half its connection's remotingMaxInflightPerConnection, a PULL goes
 * to the core with bk_rcmd.no_park: if it finds nothing, the core answers
 * PULL_NOT_FOUND flagged held and marks the queue (store_queue_wait()), and
 * the job comes back here to wait, with no core slot and outside its
 * connection's requests in flight. It keeps its request and the core's
 * answer (shrunk to their length, about 1 KB a pull with the job), in a
 * dense array (deadlines, a closed connection) and in a chain per queue
 * (wakes).
 *
 * When a marked queue grows (an append, a flush, a delayed message coming
 * due), its core puts it on its held wake ring at the next tick
 * (bk_core__held_tell()), and every pull held for it is posted again: it
 * finds the data, or comes back held. When the core cannot say which queue
 * (a slave's replication, a full ring), it sets held_all and every pull held
 * for that core is posted again. A held pull whose deadline passes is
 * answered the PULL_NOT_FOUND it came back with.
 *
 * Order: the core answers a pull held, then later tells of its queue. Here
 * the wakes are taken off the rings before the answers are reaped
 * (bk_rmt_run()), so a wake is applied only after every answer that came
 * before it is held: none is lost.
 *
 * Bounds: remotingLongPollsMax pulls held in all, remotingLongPollsPerAddr
 * per client address; past them a pull is answered SYSTEM_BUSY with the key
 * to change, so the client backs off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bk_rmt_share.h"
#include "common/atomic.h"
#include "common/ring.h"

#define HELD_SCAN_MS 100 /* deadlines are looked at this often */

struct rheld_slot {
	const struct store_queue *sq; /* NULL: empty */
	struct rjob *head;	      /* its held pulls, chained by held_next */
};

static uint32_t
slot_of(const struct bk_rmt *r, const struct store_queue *sq)
{
	uint64_t h = (uint64_t)(uintptr_t)sq * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & r->held_mask;
}

/* The slot of @sq, or of the empty slot where it would go. */
static struct rheld_slot *
slot_find(const struct bk_rmt *r, const struct store_queue *sq)
{
	for (uint32_t i = slot_of(r, sq);; i = (i + 1) & r->held_mask) {
		struct rheld_slot *s = &r->held_ix[i];

		if (s->sq == NULL || s->sq == sq)
			return s;
	}
}

/* Empty @s, shifting back the entries its removal would cut off (linear probing). */
static void
slot_del(struct bk_rmt *r, struct rheld_slot *s)
{
	uint32_t i = (uint32_t)(s - r->held_ix);

	for (uint32_t j = (i + 1) & r->held_mask;; j = (j + 1) & r->held_mask) {
		struct rheld_slot *t = &r->held_ix[j];
		uint32_t home;

		if (t->sq == NULL)
			break;
		home = slot_of(r, t->sq);
		/* t may fill i when its home is not within (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			r->held_ix[i] = *t;
			i = j;
		}
	}
	r->held_ix[i] = (struct rheld_slot){0};
	r->held_used--;
}

static int
index_grow(struct bk_rmt *r)
{
	uint32_t cap = r->held_ix ? (r->held_mask + 1) * 2 : 1024;
	struct rheld_slot *old = r->held_ix;
	uint32_t old_cap = old ? r->held_mask + 1 : 0;
	struct rheld_slot *n = calloc(cap, sizeof(*n));

	if (n == NULL)
		return -ENOMEM;
	r->held_ix = n;
	r->held_mask = cap - 1;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].sq != NULL)
			*slot_find(r, old[i].sq) = old[i];
	free(old);
	return 0;
}

/* Take @j out of the array and its queue's chain (not freed, not counted). */
static void
held_unlink(struct bk_rmt *r, struct rjob *j)
{
	struct rheld_slot *s = slot_find(r, j->sq);
	struct rjob **pp = &s->head;

	while (*pp != NULL && *pp != j)
		pp = &(*pp)->held_next;
	if (*pp == j)
		*pp = j->held_next;
	j->held_next = NULL;
	if (s->sq != NULL && s->head == NULL)
		slot_del(r, s);
	r->held[j->held_ix] = r->held[--r->nheld];
	r->held[j->held_ix]->held_ix = j->held_ix;
	{
		struct rconn *c = bk_rmt__conn_get(r, j->conn, j->gen);

		if (c && c->held)
			c->held--;
	}
	if (j->held_counted)
		ipcount_sub(&r->held_addr, j->c.peer.ip);
	j->held_counted = false;
	j->held = false;
}

void
bk_rmt__held_forget(struct bk_rmt *r, struct rjob *j)
{
	held_unlink(r, j);
}

bool
bk_rmt__held_full(struct bk_rmt *r, uint32_t ip)
{
	if (r->nheld >= r->conf.held_max) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_HELD, UINT16_MAX, 0);
		return true;
	}
	if (ipcount_get(&r->held_addr, ip) >= r->conf.held_per_addr) {
		bk_rmt__busy_set(r, BK_RMT_BUSY_HELD_ADDR, UINT16_MAX, ip);
		return true;
	}
	return false;
}

int
bk_rmt__held_put(struct bk_rmt *r, struct rconn *c, struct rjob *j)
{
	struct rheld_slot *s;
	uint8_t *b;

	if (bk_rmt__held_full(r, c->peer.ip))
		return -ENOSPC;
	if (r->nheld == r->held_cap) {
		uint32_t cap = r->held_cap ? r->held_cap * 2 : 1024;
		struct rjob **v = realloc(r->held, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		r->held = v;
		r->held_cap = cap;
	}
	if ((r->held_used + 1) * 2 > (r->held_ix ? r->held_mask + 1 : 0) && index_grow(r) != 0)
		return -ENOMEM;
	/* what it keeps while it waits: the request, and the answer for its deadline */
	if (j->c.resp_len > 0 && (b = realloc(j->c.resp, j->c.resp_len)) != NULL) {
		j->c.resp = b;
		j->c.resp_cap = j->c.resp_len;
	}
	if (j->c.req_len > 0 && (b = realloc(j->reqbuf, j->c.req_len)) != NULL) {
		j->reqbuf = b;
		j->c.req = b;
	}
	/* its connection's requests in flight, and quick ones, are those at the cores */
	if (!j->uncounted) {
		if (c->jobs)
			c->jobs--;
		bk_rmt__job_addr_uncount(r, j);
		j->uncounted = true;
	}
	bk_rmt__job_quick_uncount(r, c, j);
	/* a full table (twice as many addresses as connections allowed) counts nobody more */
	j->held_counted = ipcount_add(&r->held_addr, c->peer.ip) != 0;
	/* posted again, it goes as a pull that is held, not parked, wherever it waited */
	j->poll = false;
	/* the queue the core marked: the topic may have been made again since the request */
	if (j->c.held_sq != NULL)
		j->sq = j->c.held_sq;
	c->held++;
	s = slot_find(r, j->sq);
	if (s->sq == NULL) {
		s->sq = j->sq;
		r->held_used++;
	}
	j->held_next = s->head;
	s->head = j;
	j->held_ix = r->nheld;
	r->held[r->nheld++] = j;
	j->held = true;
	j->held_core = j->c.core;
	r->held_total++;
	return 0;
}

/* Post held @j to its core again. Return: 0, -EAGAIN not now (still held). */
static int
held_post(struct bk_rmt *r, struct rjob *j)
{
	struct rconn *c = bk_rmt__conn_get(r, j->conn, j->gen);
	uint16_t core = j->held_core;
	uint8_t *b;

	/* room at the core, and in its client's shares of requests in flight */
	if (r->inflight[core] >= r->conf.inflight_per_core ||
	    (c != NULL && (c->jobs >= r->conf.max_jobs_per_conn ||
			   (r->conf.max_jobs_per_addr &&
			    ipcount_get(&r->jobs_addr, c->peer.ip) >= r->conf.max_jobs_per_addr))))
		return -EAGAIN;
	if ((b = realloc(j->c.resp, j->resp_full)) == NULL)
		return -EAGAIN;
	j->c.resp = b;
	j->c.resp_cap = j->resp_full;
	held_unlink(r, j);
	if (c == NULL) {
		bk_rmt__job_free(r, j);
		return 0;
	}
	c->jobs++;
	j->uncounted = false;
	j->addr_counted = ipcount_add(&r->jobs_addr, c->peer.ip) != 0;
	j->c.held = false;
	j->c.held_sq = NULL;
	j->c.again = true;
	j->c.no_park = true;
	j->c.resp_len = 0;
	j->c.need = 0;
	j->redirects = 0;
	if (bk_rmt__job_post_keep(r, j, core) != 0) {
		/* the command ring was full after all: answered, so the client pulls again */
		bk_rmt__busy_answer(r, c, j->code, j->opaque, j->serialize);
		bk_rmt__job_free(r, j);
	}
	return 0;
}

/* Post every pull held for @sq. Return: false when its core had no room (try later). */
static bool
wake_queue(struct bk_rmt *r, const struct store_queue *sq)
{
	struct rheld_slot *s;

	if (r->held_ix == NULL)
		return true;
	s = slot_find(r, sq);
	while (s->sq == sq && s->head != NULL) {
		if (held_post(r, s->head) != 0)
			return false;
		r->work++;
		s = slot_find(r, sq); /* the index may have shifted */
	}
	return true;
}

void
bk_rmt__held_take(struct bk_rmt *r)
{
	for (uint32_t i = 0; i < r->bk->ncores; i++) {
		struct bk_core *c = &r->bk->cores[i];
		void *v[64];
		unsigned n;

		if (atomic_load_relaxed(&c->held_all) &&
		    atomic_exchange_explicit(&c->held_all, 0, memory_order_acquire))
			r->held_all |= 1ull << i;
		while ((n = ring_dequeue_burst(c->held_wake, v, 64)) > 0) {
			if (r->nwakes + n > r->wakes_cap) {
				uint32_t cap = r->wakes_cap ? r->wakes_cap * 2 : 256;
				const struct store_queue **w;

				while (cap < r->nwakes + n)
					cap *= 2;
				w = realloc(r->wakes, cap * sizeof(*w));
				if (w == NULL) {
					r->held_all |= 1ull << i; /* cannot say which: all */
					continue;
				}
				r->wakes = w;
				r->wakes_cap = cap;
			}
			memcpy(r->wakes + r->nwakes, v, n * sizeof(*v));
			r->nwakes += n;
		}
	}
}

void
bk_rmt__held_run(struct bk_rmt *r)
{
	uint32_t keep = 0;

	for (uint32_t i = 0; i < r->nwakes; i++)
		if (!wake_queue(r, r->wakes[i]))
			r->wakes[keep++] = r->wakes[i];
	r->nwakes = keep;
	for (uint32_t core = 0; r->held_all && core < r->bk->ncores; core++) {
		bool done = true;

		if (!(r->held_all >> core & 1))
			continue;
		for (uint32_t k = r->nheld; k-- > 0;) {
			if (k < r->nheld && r->held[k]->held_core == core &&
			    held_post(r, r->held[k]) != 0) {
				done = false;
				break;
			}
		}
		if (done)
			r->held_all &= ~(1ull << core);
	}
	if (r->now_ms < r->next_held_ms)
		return;
	r->next_held_ms = r->now_ms + HELD_SCAN_MS;
	for (uint32_t k = r->nheld; k-- > 0;) {
		struct rjob *j;
		struct rconn *c;

		if (k >= r->nheld || r->held[k]->deadline_ms > r->now_ms)
			continue;
		j = r->held[k];
		held_unlink(r, j);
		c = bk_rmt__conn_get(r, j->conn, j->gen);
		if (c != NULL)
			bk_rmt__answer_pull(r, c, j, j->c.resp, j->c.resp_len);
		r->held_timeouts++;
		bk_rmt__job_free(r, j);
		r->work++;
	}
}

void
bk_rmt__held_drop_conn(struct bk_rmt *r, uint32_t id, uint32_t gen)
{
	struct rconn *c = bk_rmt__conn_get(r, id, gen);
	uint32_t left = c != NULL ? c->held : UINT32_MAX;

	/* a connection that holds nothing costs no walk over everyone's */
	for (uint32_t k = r->nheld; left > 0 && k-- > 0;) {
		if (k >= r->nheld || r->held[k]->conn != id || r->held[k]->gen != gen)
			continue;
		bk_rmt__job_free(r, r->held[k]);
		left--;
	}
}

void
bk_rmt__held_fini(struct bk_rmt *r)
{
	while (r->nheld > 0)
		bk_rmt__job_free(r, r->held[r->nheld - 1]);
	free(r->held);
	free(r->held_ix);
	free(r->wakes);
}

uint32_t
bk_rmt_held_now(const struct bk_rmt *r)
{
	return r->nheld;
}
