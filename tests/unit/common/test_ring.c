// SPDX-License-Identifier: Apache-2.0
/*
 * test_ring.c - the SPSC ring: bounds, wrap-around, and two threads moving
 * 2 million objects in order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "common/ring.h"
#include "harness.h"

#define MOVE_N 2000000u

static void
test_bounds(void)
{
	struct ring *r;
	void *objs[8] = {(void *)1, (void *)2, (void *)3, (void *)4, (void *)5};
	void *out[8];

	T_ASSERT_EQ(ring_create(3, &r), -EINVAL);
	T_ASSERT_EQ(ring_create(0, &r), -EINVAL);
	T_ASSERT_EQ(ring_create(4, &r), 0);
	T_ASSERT_EQ(ring_enqueue_burst(r, objs, 5), 4);
	T_ASSERT_EQ(ring_enqueue_burst(r, objs, 1), 0);
	T_ASSERT_EQ(ring_count(r), 4);
	for (unsigned round = 0; round < 10; round++) {
		T_ASSERT_EQ(ring_dequeue_burst(r, out, 3), 3);
		T_ASSERT_EQ(ring_enqueue_burst(r, objs, 3), 3);
		T_ASSERT_EQ(ring_count(r), 4);
	}
	T_ASSERT_EQ(ring_dequeue_burst(r, out, 8), 4);
	T_ASSERT_EQ(ring_dequeue_burst(r, out, 8), 0);
	ring_free(r);
}

static void *
producer(void *a)
{
	struct ring *r = a;
	uintptr_t next = 1;

	while (next <= MOVE_N) {
		void *objs[16];
		unsigned n = 0;

		for (uintptr_t v = next; n < 16 && v <= MOVE_N; v++)
			objs[n++] = (void *)v;
		next += ring_enqueue_burst(r, objs, n);
	}
	return NULL;
}

static void
test_two_threads_in_order(void)
{
	struct ring *r;
	pthread_t th;
	uintptr_t expect = 1;

	T_ASSERT_EQ(ring_create(64, &r), 0);
	T_ASSERT_EQ(pthread_create(&th, NULL, producer, r), 0);
	while (expect <= MOVE_N) {
		void *out[32];
		unsigned n = ring_dequeue_burst(r, out, 32);

		for (unsigned i = 0; i < n; i++) {
			if ((uintptr_t)out[i] != expect)
				T_FAIL("got %zu, expected %zu", (size_t)(uintptr_t)out[i],
				       (size_t)expect);
			expect++;
		}
	}
	pthread_join(th, NULL);
	T_ASSERT_EQ(ring_count(r), 0);
	ring_free(r);
}

T_MAIN(T_CASE(test_bounds), T_CASE(test_two_threads_in_order))
