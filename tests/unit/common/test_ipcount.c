// SPDX-License-Identifier: Apache-2.0
/*
 * test_ipcount.c - per-address connection counts against a plain array
 * model, with random adds and removes that collide (a small table), so the
 * backward-shift deletion is exercised on long probe runs.
 */
#include <stdlib.h>

#include "common/ipcount.h"
#include "harness.h"

static void
test_model(void)
{
	struct ipcount t;
	uint32_t model[64] = {0};
	unsigned seed = 7;

	T_ASSERT_EQ(ipcount_init(&t, 64), 0);
	for (int step = 0; step < 200000; step++) {
		unsigned k = (unsigned)rand_r(&seed) % 64;
		uint32_t ip = 0x0a000000u + k * 256u; /* collide in the hash's low bits */

		if (rand_r(&seed) % 2 && model[k] < 1000) {
			T_ASSERT_EQ(ipcount_add(&t, ip), model[k] + 1);
			model[k]++;
		} else if (model[k]) {
			ipcount_sub(&t, ip);
			model[k]--;
		}
		if (step % 997 == 0)
			for (unsigned j = 0; j < 64; j++)
				T_ASSERT_EQ(ipcount_get(&t, 0x0a000000u + j * 256u), model[j]);
	}
	for (unsigned j = 0; j < 64; j++)
		T_ASSERT_EQ(ipcount_get(&t, 0x0a000000u + j * 256u), model[j]);
	ipcount_sub(&t, 0x7f000001); /* never added: no-op */
	ipcount_fini(&t);
}

/* Past twice the addresses it was made for, a new address is not counted; an old one is. */
static void
test_full(void)
{
	struct ipcount t;

	T_ASSERT_EQ(ipcount_init(&t, 4), 0);
	for (uint32_t k = 1; k <= 8; k++)
		T_ASSERT_EQ(ipcount_add(&t, k), 1u);
	T_ASSERT_EQ(ipcount_add(&t, 9), 0u);
	T_ASSERT_EQ(ipcount_get(&t, 9), 0u);
	T_ASSERT_EQ(ipcount_add(&t, 3), 2u);
	ipcount_sub(&t, 5);
	T_ASSERT_EQ(ipcount_add(&t, 9), 1u);
	T_ASSERT_EQ(ipcount_add(&t, 10), 0u);
	ipcount_fini(&t);
}

T_MAIN(T_CASE(test_model), T_CASE(test_full))
