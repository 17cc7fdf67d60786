/* SPDX-License-Identifier: Apache-2.0 */
/*
 * atomic.h - the one door to <stdatomic.h> (docs/style.md 9.3).
 *
 * Every acquire/release use must name its pair in a comment at the call site.
 */
#ifndef SP_COMMON_ATOMIC_H
#define SP_COMMON_ATOMIC_H

#include <stdatomic.h>

#define atomic_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define atomic_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define atomic_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)

#endif /* SP_COMMON_ATOMIC_H */
