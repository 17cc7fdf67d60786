// SPDX-License-Identifier: Apache-2.0
#include "harness.h"
static void
test_placeholder(void)
{
	T_FAIL("PLACEHOLDER: not written yet");
}
T_MAIN(T_CASE(test_placeholder))
