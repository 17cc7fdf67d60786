/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler.h - attributes, branch hints and always-on assertions.
 *
 * BASSERT is always compiled in: it guards invariants whose violation means
 * memory is already wrong, so continuing would be worse than stopping.
 * DASSERT is for checks too costly for release builds. Neither may be used
 * to validate input: bad input is an error return, never an abort.
 */
#ifndef SP_COMMON_COMPILER_H
#define SP_COMMON_COMPILER_H

#include <stddef.h>

#define MUST_CHECK __attribute__((warn_unused_result))
#define SP_LIKELY(x) __builtin_expect(!!(x), 1)
#define SP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SP_UNUSED __attribute__((unused))
#define SP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define SP_NORETURN __attribute__((noreturn))
#define SP_CACHE_LINE 64

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
/*
 * Each argument evaluated once, as the kernel's min()/max(): an argument may
 * be a call or an atomic load (SP_MAX(most, drain()) once drained twice and
 * kept the second, smaller answer). Not for constant expressions.
 */
#define SP__CAT2(a, b) a##b
#define SP__CAT(a, b) SP__CAT2(a, b)
#define SP__MIN(a, b, x, y)                                                                        \
	__extension__({                                                                            \
		__auto_type x = (a);                                                               \
		__auto_type y = (b);                                                               \
		x < y ? x : y;                                                                     \
	})
#define SP__MAX(a, b, x, y)                                                                        \
	__extension__({                                                                            \
		__auto_type x = (a);                                                               \
		__auto_type y = (b);                                                               \
		x > y ? x : y;                                                                     \
	})
#define SP_MIN(a, b) SP__MIN(a, b, SP__CAT(sp__a, __COUNTER__), SP__CAT(sp__b, __COUNTER__))
#define SP_MAX(a, b) SP__MAX(a, b, SP__CAT(sp__a, __COUNTER__), SP__CAT(sp__b, __COUNTER__))

SP_NORETURN void sp_assert_fail(const char *expr, const char *file, int line);

#define BASSERT(cond)                                                                              \
	do {                                                                                       \
		if (SP_UNLIKELY(!(cond)))                                                          \
			sp_assert_fail(#cond, __FILE__, __LINE__);                                 \
	} while (0)

#ifdef NDEBUG
#define DASSERT(cond) ((void)0)
#else
#define DASSERT(cond) BASSERT(cond)
#endif

#endif /* SP_COMMON_COMPILER_H */
