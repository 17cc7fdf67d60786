/* SPDX-License-Identifier: Apache-2.0 */
/* bench_lookup_bk.h - the broker topic table for bench_lookup.cpp. */
#ifndef SP_BENCH_LOOKUP_BK_H
#define SP_BENCH_LOOKUP_BK_H

#include <stddef.h>

/* A struct bk whose topic table holds @n topics "BenchTopic-%05u". */
void *bench_bk_table(unsigned n);
/* bk_topic_find() on it. */
const void *bench_bk_find(const void *bk, const char *name, size_t len);
void bench_bk_free(void *bk);

#endif /* SP_BENCH_LOOKUP_BK_H */
