// SPDX-License-Identifier: Apache-2.0
/*
 * wake.c - which queues the background side looks at: those that took
 * units since it last found them idle, never a walk over every queue.
 *
 * A broker with a million queues, most of them idle, spent its drainer's
 * and service's rounds walking all of them (3.6-6.6% of a CPU at 10-20 k
 * queues, docs/store.md "Many queues"). Instead, whoever appends a unit
 * (the owning core in store_put(), the background side in a dispatch)
 * pushes the queue onto two lock-free stacks, the drainer's and the
 * service's, unless it is on them already (on_dl, on_sl). Each thread takes
 * its stack whole onto a private list, works the list, and drops a queue
 * once it has nothing left to do: drained for the drainer; drained,
 * flushed and needing no file for the service.
 *
 * Dropping races with an append: the appender stores max, then reads the
 * flag; the dropper clears the flag, then reads max. A seq_cst fence on
 * each side between the store and the load (Dekker's pattern) makes sure at
 * least one of them sees the other: either the appender sees the flag
 * clear and pushes the queue again, or the dropper sees the new max and
 * keeps it. A queue's link is written only by whoever set its flag.
 *
 * The checkpoint counts on it (service.c): a unit below the log offset a
 * flush pass reads at its start was appended, and its queue pushed, before
 * that record was committed, so the pass, which takes the stack after that
 * read, finds every queue it must flush.
 *
 * Ownership: the stacks: any thread pushes (CAS), one thread takes
 * (exchange). dl_list: the drainer thread. sl_list, sl_len, pass_v: the
 * service thread (store_service()) or an exclusive caller, under qlock.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "store_int.h"

static void
push(struct store_queue *_Atomic *head, struct store_queue *q, struct store_queue **link)
{
	struct store_queue *h = atomic_load_relaxed(head);

	do {
		*link = h;
		/* release: the queue and its link are written before a taker sees them */
	} while (!atomic_compare_exchange_weak_explicit(head, &h, q, memory_order_release,
							memory_order_relaxed));
}

void
store__queue_wake(struct store *s, struct store_queue *q)
{
	/* seq_cst: max (stored by the caller) before the flags are read; see DESIGN above */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_relaxed(&q->on_dl) && !atomic_exchange(&q->on_dl, 1))
		push(&s->dl_stack, q, &q->dl_next);
	if (!atomic_load_relaxed(&q->on_sl) && !atomic_exchange(&q->on_sl, 1))
		push(&s->sl_stack, q, &q->sl_next);
}

/*
 * Clear @flag of a queue found idle, then look again: true when the queue
 * may go (it stays on no list), false when the caller keeps it (work came
 * meanwhile, and the caller set the flag again). @busy: the work test.
 */
static bool
drop(_Atomic uint8_t *flag, const struct store_queue *q, bool (*busy)(const struct cq *))
{
	atomic_store_relaxed(flag, 0);
	/* seq_cst: the flag cleared before max is read again; see DESIGN above */
	atomic_thread_fence(memory_order_seq_cst);
	if (!busy(q->cq))
		return true;
	/* An appender that saw the flag clear pushed it: it comes back through the stack. */
	return atomic_exchange(flag, 1) != 0;
}

static bool
undrained(const struct cq *q)
{
	return !cq_drained(q);
}

uint64_t
store__drain_round(struct store *s)
{
	/* acquire: pairs with the release CAS in push() */
	struct store_queue *q = atomic_exchange_explicit(&s->dl_stack, NULL, memory_order_acquire);
	struct store_queue **pp;
	uint64_t most = 0;

	while (q != NULL) {
		struct store_queue *next = q->dl_next;

		q->dl_next = s->dl_list;
		s->dl_list = q;
		q = next;
	}
	for (pp = &s->dl_list; (q = *pp) != NULL;) {
		struct store_queue *next = q->dl_next;

		most = SP_MAX(most, cq_wb_drain(q->cq));
		/* A unit whose file is not made yet stays: the service makes it. */
		if (!cq_drained(q->cq) || !drop(&q->on_dl, q, undrained)) {
			pp = &q->dl_next;
			continue;
		}
		*pp = next; /* q's link is no longer ours */
	}
	return most;
}

void
store__sl_take(struct store *s)
{
	/* acquire: pairs with the release CAS in push() */
	struct store_queue *q = atomic_exchange_explicit(&s->sl_stack, NULL, memory_order_acquire);

	while (q != NULL) {
		struct store_queue *next = q->sl_next;

		q->sl_next = s->sl_list;
		s->sl_list = q;
		s->sl_len++;
		q = next;
	}
}

static bool
not_idle(const struct cq *q)
{
	return !cq_idle(q);
}

void
store__sl_prune(struct store *s)
{
	struct store_queue **pp = &s->sl_list;
	struct store_queue *q;

	while ((q = *pp) != NULL) {
		struct store_queue *next = q->sl_next;

		/* A retired queue's files are gone: nothing to flush or make. */
		if (!q->retired && (!cq_idle(q->cq) || !drop(&q->on_sl, q, not_idle))) {
			pp = &q->sl_next;
			continue;
		}
		if (q->retired)
			atomic_store_relaxed(&q->on_sl, 0); /* never appended to again */
		*pp = next;
		s->sl_len--;
	}
}

int
store__pass_begin(struct store *s)
{
	size_t n = 0;

	store__sl_take(s);
	if (s->sl_len > s->pass_cap) {
		size_t cap = s->sl_len + s->sl_len / 2 + 16;
		struct store_queue **v = realloc(s->pass_v, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		s->pass_v = v;
		s->pass_cap = cap;
	}
	for (struct store_queue *q = s->sl_list; q != NULL; q = q->sl_next)
		if (!q->retired)
			s->pass_v[n++] = q;
	s->pass_n = n;
	s->pass_i = 0;
	return 0;
}
