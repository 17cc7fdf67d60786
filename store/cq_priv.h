/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cq_priv.h - what cq.c (files, append, recovery, trim, flush) and cq_wb.c
 * (the write-behind ring between the appending core and the files) share:
 * the queue's structs and the unit codec. Private to store/.
 */
#ifndef SP_STORE_CQ_PRIV_H
#define SP_STORE_CQ_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "store/cq.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define CQ_TAG "store.cq"
#define CQ_FILLER_SIZE 0x7FFFFFFFu /* RocketMQ's gap filler: (0, INT_MAX, 0) */
#define CQ_NONE UINT64_MAX
STATIC_ASSERT((CQ_WB_UNITS & (CQ_WB_UNITS - 1)) == 0, "ring size is a power of two");

/* One mapped file. Immutable once created, so it can be copied freely. */
struct cq_file {
	uint8_t *map;	/* upf * CQ_UNIT_SIZE bytes, MAP_SHARED */
	uint64_t first; /* logical offset of unit 0 */
	int fd;
};

/*
 * Files [first_idx, first_idx + n) of the queue, contiguous. Once published
 * only n grows (f[n] is written before it, and first_idx before n leaves
 * 0); first_idx and the slots below n never change after that.
 */
struct cq_tab {
	uint64_t first_idx; /* file index (first / upf) of f[0] */
	_Atomic uint32_t n; /* background writes (release), readers acquire */
	uint32_t cap;
	/* background only, once replaced: see cq_graveyard_add() */
	struct cq_tab *grave_next;
	int64_t free_due_ms; /* CQ_DUE_UNSET until the next cq_trim_phys() stamps it */
	uint32_t n_dead;     /* f[0, n_dead) were trimmed: released with the table */
	struct cq_file f[];
};

/*
 * A unit in the ring, in host order. The appender stores it, the drainer
 * and readers load it while it may be rewritten (cq__unit_read()): relaxed
 * atomics, which compile to plain moves.
 */
struct cq_slot {
	_Atomic int64_t phys;
	_Atomic uint32_t size;
	_Atomic int64_t tag_hash;
};

struct cq {
	/* immutable after cq_open() */
	const struct store_io_ops *io;
	char *dir;
	uint32_t upf;
	struct cq_slot *ring; /* CQ_WB_UNITS slots: unit i in ring[i % CQ_WB_UNITS] */

	/* owner writes (release), any thread reads (acquire) */
	_Atomic uint64_t max;
	/* owner (queue start) stores, background CAS-raises (trim); any thread reads */
	_Atomic uint64_t min;
	/*
	 * Units below wb are in the files, those in [wb, max) only in the
	 * ring. The drainer CAS-raises it (release) once it copied them; the
	 * owner stores it at a queue start, when wb == max; any thread reads
	 * (acquire). The owner writes unit i only while i - wb < CQ_WB_UNITS.
	 */
	_Atomic uint64_t wb;

	/* owner only */
	struct cq_file cur; /* map == NULL: the queue has no file yet */

	/* mailbox: see Ownership in cq.c */
	struct cq_file next;
	_Atomic uint32_t next_ready;
	_Atomic uint64_t cur_end; /* end (logical) of cur; 0 while there is no file */
	/* an offset the core asked for past its file (or of a queue with no file yet) */
	_Atomic uint64_t start_req;

	/* background writes (release), readers acquire */
	struct cq_tab *_Atomic tab;

	/* background only */
	struct cq_tab *graveyard; /* replaced tables, see Reclamation in cq.c */
	uint64_t flushed;	  /* units below this are durable */
	uint64_t dirty_hi;	  /* end of units zeroed by truncation, not yet synced */
	/* the drainers (cq_wb_drain()): one at a time, the core never takes it */
	pthread_mutex_t wb_lock;
	uint64_t warm_hi; /* slots [0, warm_hi) of the ring are faulted in (under wb_lock) */
	/* a file was created or renamed in dir since the last flush: any thread sets, flush clears */
	atomic_bool dir_dirty;
	/* dir itself was made (with the first file): the flush syncs the two directories above */
	atomic_bool parents_dirty;
};

static inline void
cq__be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline uint64_t
cq__be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* Encode @u as the 20 big-endian bytes of a file's unit at @p. */
static inline void
cq__unit_store(uint8_t *p, const struct cq_unit *u)
{
	cq__be64_put(p, (uint64_t)u->phys);
	p[8] = (uint8_t)(u->size >> 24);
	p[9] = (uint8_t)(u->size >> 16);
	p[10] = (uint8_t)(u->size >> 8);
	p[11] = (uint8_t)u->size;
	cq__be64_put(p + 12, (uint64_t)u->tag_hash);
}

static inline void
cq__unit_load(const uint8_t *p, struct cq_unit *u)
{
	u->phys = (int64_t)cq__be64_get(p);
	u->size = (uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 | (uint32_t)p[10] << 8 | p[11];
	u->tag_hash = (int64_t)cq__be64_get(p + 12);
}

/*
 * Address of unit @qoff in the files, or NULL when no file holds it.
 * Context: any thread (cq.c, "Reclamation").
 */
uint8_t *cq__unit_ptr(const struct cq *q, uint64_t qoff);

/*
 * Read unit @qoff (below max, not trimmed) into *@u, from the ring or the
 * files, whichever holds it. Context: any thread. Return: false when no
 * file holds it (a bug or a trimmed unit).
 */
bool cq__unit_read(const struct cq *q, uint64_t qoff, struct cq_unit *u);

/* Map the ring (no memory until used). Context: cq_open(). Return: 0, -ENOMEM. */
int cq__wb_init(struct cq *q);

/* cq_wb_drain() for a caller that holds q->wb_lock. */
uint64_t cq__wb_drain_locked(struct cq *q);

/* Unmap the ring. Context: exclusive (cq_close()). */
void cq__wb_free(struct cq *q);

/*
 * Store unit @qoff in the ring. Context: owning core, after it checked
 * qoff - wb < CQ_WB_UNITS; publishing max is the caller's.
 */
static inline void
cq__wb_put(struct cq *q, uint64_t qoff, const struct cq_unit *u)
{
	struct cq_slot *s = &q->ring[qoff & (CQ_WB_UNITS - 1)];

	/*
	 * release: pairs with the acquire fence in cq__unit_read(). The slot
	 * held unit qoff - CQ_WB_UNITS, which our load of wb saw in the files:
	 * a reader that sees this store then sees that wb too, and rereads
	 * from the file.
	 */
	atomic_thread_fence(memory_order_release);
	atomic_store_relaxed(&s->phys, u->phys);
	atomic_store_relaxed(&s->size, u->size);
	atomic_store_relaxed(&s->tag_hash, u->tag_hash);
}

#endif /* SP_STORE_CQ_PRIV_H */
