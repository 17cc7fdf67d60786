/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.h - a bounded single-producer single-consumer ring of pointers.
 *
 * How objects cross threads (docs/style.md 9.5): the control thread hands a
 * command to a dataplane core on the core's command ring, the core answers
 * on its completion ring, and whoever dequeues becomes the owner. Head and
 * tail sit on their own cache lines; each side caches the other's index so
 * a burst costs one acquire load in the common case. Never blocks, never
 * allocates after ring_create().
 */
#ifndef SP_COMMON_RING_H
#define SP_COMMON_RING_H

#include <stdalign.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/compiler.h"

/*
 * Ownership: prod_* fields belong to the one producer thread, cons_* to the
 * one consumer thread; head and tail are the only shared words.
 */
struct ring {
	alignas(64) _Atomic uint32_t head; /* written by the producer */
	uint32_t prod_tail_cache;
	alignas(64) _Atomic uint32_t tail; /* written by the consumer */
	uint32_t cons_head_cache;
	alignas(64) uint32_t mask; /* immutable after create */
	void *slot[];
};

/* Context: startup. Return: 0, -EINVAL @cap not a power of two in 2..2^30, -ENOMEM. */
MUST_CHECK int ring_create(uint32_t cap, struct ring **out);
void ring_free(struct ring *r);

/* Producer only. Return: objects enqueued (0..@n), in order. */
static inline unsigned
ring_enqueue_burst(struct ring *r, void *const *objs, unsigned n)
{
	uint32_t head = atomic_load_relaxed(&r->head);
	uint32_t cap = r->mask + 1;
	unsigned room;

	if (head - r->prod_tail_cache + n > cap)
		/* acquire: pairs with the release store of tail in ring_dequeue_burst() */
		r->prod_tail_cache = atomic_load_acquire(&r->tail);
	room = cap - (head - r->prod_tail_cache);
	if (n > room)
		n = room;
	for (unsigned i = 0; i < n; i++)
		r->slot[(head + i) & r->mask] = objs[i];
	/* release: publishes the slots; pairs with the acquire of head in ring_dequeue_burst() */
	atomic_store_release(&r->head, head + n);
	return n;
}

/* Consumer only. Return: objects dequeued (0..@n). */
static inline unsigned
ring_dequeue_burst(struct ring *r, void **objs, unsigned n)
{
	uint32_t tail = atomic_load_relaxed(&r->tail);
	unsigned avail = r->cons_head_cache - tail;

	if (avail < n) {
		/* acquire: pairs with the release store of head in ring_enqueue_burst() */
		r->cons_head_cache = atomic_load_acquire(&r->head);
		avail = r->cons_head_cache - tail;
	}
	if (n > avail)
		n = avail;
	for (unsigned i = 0; i < n; i++)
		objs[i] = r->slot[(tail + i) & r->mask];
	/* release: the slots may be reused; pairs with the acquire of tail in ring_enqueue_burst() */
	atomic_store_release(&r->tail, tail + n);
	return n;
}

/* Return: objects queued now (approximate from a third thread). */
static inline unsigned
ring_count(struct ring *r)
{
	return atomic_load_relaxed(&r->head) - atomic_load_relaxed(&r->tail);
}

#endif /* SP_COMMON_RING_H */
