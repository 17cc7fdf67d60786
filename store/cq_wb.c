// SPDX-License-Identifier: Apache-2.0
/*
 * cq_wb.c - the ConsumeQueue's write-behind ring: the appending core stores
 * units in anonymous memory, and the store's background side copies them
 * into the queue's files.
 *
 * Why: a file's shared mapping is write-protected again each time its
 * dirty pages are written back (fdatasync, the kernel's flusher), so a core
 * that stored units into it took a minor fault every 4 KiB page, one per
 * 204 units. Anonymous memory is never written back: once its pages are
 * faulted in, the core's stores never fault (docs/store.md, "Page faults on
 * the core").
 *
 * DESIGN
 * Unit i lives in ring slot i % CQ_WB_UNITS from its append until the
 * drainer (cq_wb_drain(), on the background side) copies it into its file
 * and raises wb past it. The core writes unit i only while
 * i - wb < CQ_WB_UNITS, so a slot is reused only once the unit it held is
 * in the file; a full ring answers -EAGAIN (cq_can_append() false), which
 * is the store's busy answer for a background side that has fallen
 * CQ_WB_UNITS behind on one queue. A drain raises wb every CQ_WB_PUB
 * units, not only at its end, so a drainer preempted mid-copy has freed
 * what it copied.
 *
 * Readers (cq__unit_read()) take unit i from the files below wb, else from
 * the ring, checking wb again after the copy, as a seqlock reader checks
 * its sequence: when the slot was reused meanwhile, wb had passed i before
 * the core wrote it, so the reader sees that wb and reads the file.
 *
 * The files hold a prefix of the queue: units [.., wb). A killed process
 * loses what only the ring held (units stored into a file's mapping used to
 * survive in the page cache); the checkpoint's cq_safe is read
 * before a flush pass, and cq_flush() drains before it syncs, so the
 * re-dispatch from cq_safe (dispatch.c) puts back every unit that was only in
 * the ring.
 *
 * Ownership: ring pointer immutable after cq_open(); slots written by the
 * owning core, read by any thread; wb as in struct cq. The copies into the
 * files and warm_hi: one drainer at a time, under wb_lock (the store's
 * drainer thread, a flush, a replication append that found the ring full),
 * beside cq_append(), cq_prepare_next() and cq_trim_phys(), which deletes no
 * file past wb. Two drainers at once would be wrong, not just slow: the
 * second could copy a slot the core reused after the first raised wb.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"

#include "cq_priv.h"

#define CQ_RING_BYTES ((size_t)CQ_WB_UNITS * sizeof(struct cq_slot))

/*
 * Rings come from slabs of CQ_RINGS_PER_SLAB, one mapping each, not one
 * mapping per queue: a million queues would pass vm.max_map_count (65530
 * by default) with their rings alone. A ring costs no memory until used;
 * a closed queue's ring gives its pages back and is reused. Slabs are
 * never unmapped (the process's peak queue count). Context: cq_open() and
 * cq_close() (control or background threads), under ring_mu.
 */
#define CQ_RINGS_PER_SLAB 1024

static pthread_mutex_t ring_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cq_slot **ring_free; /* stack of unused rings */
static size_t ring_nfree;
static size_t ring_cap;
static size_t ring_total; /* rings in all slabs: the stack has room for all */

static int
ring_slab(void)
{
	size_t want = ring_total + CQ_RINGS_PER_SLAB;
	uint8_t *p;

	if (want > ring_cap) {
		struct cq_slot **v = realloc(ring_free, want * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		ring_free = v;
		ring_cap = want;
	}
	p = mmap(NULL, CQ_RING_BYTES * CQ_RINGS_PER_SLAB, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	for (size_t i = CQ_RINGS_PER_SLAB; i-- > 0;)
		ring_free[ring_nfree++] = (struct cq_slot *)(p + i * CQ_RING_BYTES);
	ring_total += CQ_RINGS_PER_SLAB;
	return 0;
}

int
cq__wb_init(struct cq *q)
{
	int rc = 0;

	if (pthread_mutex_init(&q->wb_lock, NULL) != 0)
		return -ENOMEM;
	pthread_mutex_lock(&ring_mu);
	if (ring_nfree == 0)
		rc = ring_slab();
	if (rc == 0)
		q->ring = ring_free[--ring_nfree];
	pthread_mutex_unlock(&ring_mu);
	if (rc != 0)
		pthread_mutex_destroy(&q->wb_lock);
	return rc;
}

void
cq__wb_free(struct cq *q)
{
	if (q->ring == NULL)
		return;
	/* Exclusive: nobody reads the ring now. Its pages go back; the next queue starts cold. */
	(void)madvise(q->ring, CQ_RING_BYTES, MADV_DONTNEED);
	pthread_mutex_lock(&ring_mu);
	ring_free[ring_nfree++] = q->ring; /* room: every ring came from this stack */
	pthread_mutex_unlock(&ring_mu);
	pthread_mutex_destroy(&q->wb_lock);
	q->ring = NULL;
}

static void
slot_load(const struct cq_slot *s, struct cq_unit *u)
{
	u->phys = atomic_load_relaxed(&s->phys);
	u->size = atomic_load_relaxed(&s->size);
	u->tag_hash = atomic_load_relaxed(&s->tag_hash);
}

bool
cq__unit_read(const struct cq *q, uint64_t qoff, struct cq_unit *u)
{
	/* acquire: pairs with the release CAS in cq_wb_drain(): below wb, the file has it */
	uint64_t wb = atomic_load_acquire(&q->wb);
	const uint8_t *p;

	if (qoff >= wb) {
		slot_load(&q->ring[qoff & (CQ_WB_UNITS - 1)], u);
		/* acquire: pairs with the release fence in cq__wb_put() (a reused slot) */
		atomic_thread_fence(memory_order_acquire);
		/* acquire: as above, for the file read below */
		if (atomic_load_acquire(&q->wb) <= qoff)
			return true;
	}
	p = cq__unit_ptr(q, qoff);
	if (p == NULL)
		return false;
	cq__unit_load(p, u);
	return true;
}

/* Slots faulted in ahead of the core's next unit, at each drain. */
#define CQ_WARM_AHEAD 2048

/*
 * Fault in the ring's pages the core will store into next, up to
 * CQ_WARM_AHEAD slots past @max, so that the core does not fault (it faults
 * on the few pages a new queue's first units touch). Pages are faulted as
 * the queue gets that far, never the whole ring at once: a queue that took
 * a hundred units costs two pages, not 384 KiB (12,000 such queues were
 * 4.8 GB). Context: under wb_lock.
 */
static void
ring_warm(struct cq *q, uint64_t max)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t want = SP_MIN(max + CQ_WARM_AHEAD, (uint64_t)CQ_WB_UNITS);
	uint8_t *lo;
	uint8_t *hi;

	if (q->warm_hi >= want)
		return;
	lo = (uint8_t *)q->ring + q->warm_hi * sizeof(struct cq_slot);
	hi = (uint8_t *)q->ring + want * sizeof(struct cq_slot);
	lo -= (uintptr_t)lo % (uintptr_t)page;
	if (madvise(lo, (size_t)(hi - lo), MADV_POPULATE_WRITE) != 0) {
		/* Before Linux 5.14: a write of what is there, atomically (the core may store). */
		for (uint8_t *p = lo; p < hi; p += page)
			atomic_fetch_add_explicit((_Atomic int64_t *)p, 0, memory_order_relaxed);
	}
	q->warm_hi = want;
}

/* Units copied between two raises of wb within one drain. */
#define CQ_WB_PUB 512

/*
 * Raise wb from *@pub to @to. release: pairs with acquire in
 * cq__unit_read() and cq_append(): the copies are in the files before the
 * core may reuse their slots. Only a queue start moves wb otherwise, and
 * only when wb == max, so the CAS fails only on a bug. Return: false then.
 */
static bool
wb_publish(struct cq *q, uint64_t *pub, uint64_t to)
{
	if (!atomic_compare_exchange_strong_explicit(&q->wb, pub, to, memory_order_release,
						     memory_order_relaxed))
		return false;
	*pub = to;
	return true;
}

uint64_t
cq__wb_drain_locked(struct cq *q)
{
	/* acquire: pairs with release in cq_append(): the slots below max are written */
	uint64_t max = atomic_load_acquire(&q->max);
	/* After max: a queue start stores wb before max (cq_append()). */
	uint64_t wb = atomic_load_acquire(&q->wb);
	uint64_t pub = wb;
	uint64_t i;

	if (wb >= max)
		return 0;
	ring_warm(q, max);
	for (i = wb; i < max; i++) {
		uint8_t *p = cq__unit_ptr(q, i);
		struct cq_unit u;

		/* Its file is not made yet (cq_prepare_next() makes it): the ring keeps it. */
		if (p == NULL)
			break;
		slot_load(&q->ring[i & (CQ_WB_UNITS - 1)], &u);
		cq__unit_store(p, &u);
		/*
		 * Published every CQ_WB_PUB units: a drainer preempted mid-round
		 * (it faults on the files) has freed the slots it copied.
		 */
		if (i + 1 - pub >= CQ_WB_PUB && !wb_publish(q, &pub, i + 1))
			return 0;
	}
	if (i > pub && !wb_publish(q, &pub, i))
		return 0;
	return i - wb;
}

uint64_t
cq_wb_drain(struct cq *q)
{
	uint64_t n;

	/* An idle queue costs two loads, not a lock. */
	if (cq_drained(q))
		return 0;
	pthread_mutex_lock(&q->wb_lock);
	n = cq__wb_drain_locked(q);
	pthread_mutex_unlock(&q->wb_lock);
	return n;
}

bool
cq_drained(const struct cq *q)
{
	/* acquire: pairs with release in cq_append() (max) and in the last drain (wb) */
	return atomic_load_acquire(&q->wb) >= atomic_load_acquire(&q->max);
}
