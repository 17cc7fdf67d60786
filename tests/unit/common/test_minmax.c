// SPDX-License-Identifier: Apache-2.0
/*
 * test_minmax.c - SP_MIN and SP_MAX evaluate each argument once. The
 * ConsumeQueue drainer once wrote SP_MAX(most, cq_wb_drain(q)): the drain
 * ran twice, the second (near-empty) count won, and the drainer backed off
 * while rings filled.
 */
#include <stdint.h>

#include "harness.h"
#include "common/compiler.h"

static int calls;

static uint64_t
take(uint64_t v)
{
	calls++;
	return v;
}

static void
test_once(void)
{
	uint64_t most = 0;

	calls = 0;
	most = SP_MAX(most, take(7));
	T_ASSERT(most == 7);
	T_ASSERT(calls == 1);
	calls = 0;
	T_ASSERT(SP_MIN(take(3), take(9)) == 3);
	T_ASSERT(calls == 2);
	calls = 0;
	T_ASSERT(SP_MAX(take(3), take(9)) == 9);
	T_ASSERT(calls == 2);
}

static void
test_nested_and_types(void)
{
	uint32_t a = 5;
	uint64_t b = 1ull << 40;
	int i = -1;
	int j = 2;

	/* nested: the hidden names of the inner and outer expansion differ */
	T_ASSERT(SP_MIN(SP_MAX(a, 2u), 4u) == 4);
	/* the usual arithmetic conversions, as the plain ternary had them */
	T_ASSERT(SP_MAX((uint64_t)a, b) == b);
	T_ASSERT(SP_MIN(i, j) == -1);
	T_ASSERT(SP_MAX(i, j) == 2);
}

T_MAIN(T_CASE(test_once), T_CASE(test_nested_and_types))
