/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta_timer.h - timerCheck: how far the delivery-time wheel of each shard
 * has fired (docs/messages.md, "Delivery times"). One line per timer queue
 * (one per shard):
 *
 *   # queue doneMs doneQueueOffset doneLogOffset
 *   0 1764780000000 1200 53687091
 *
 * meaning: every unit of the queue below doneQueueOffset whose fire time is
 * below doneMs was delivered (or rolled on) durably, and whatever was
 * delivered after that lies at or after doneLogOffset in the shard's log.
 */
#ifndef SP_STORE_META_TIMER_H
#define SP_STORE_META_TIMER_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/io.h"

#define META_TIMER_QUEUES_MAX 64u

struct meta_timer_mark {
	int64_t done_ms; /* -1: nothing recorded */
	uint64_t done_qoff;
	uint64_t done_log; /* local offset in the shard's log */
};

/* The header line of timercheck; transcheck has its own (docs/messages.md) */
#define META_TIMER_HEADER "# queue doneMs doneQueueOffset doneLogOffset\n"

/*
 * The text for @n marks (marks with done_ms < 0 left out) under @header (a
 * comment line). Return: bytes, -ENOBUFS.
 */
MUST_CHECK long meta_timer_text(const char *header, const struct meta_timer_mark *m, size_t n,
				char *buf, size_t cap);
/*
 * Read the text: @m[q] for each line of queue q < @n, done_ms -1 for the
 * others. Return: 0, -EBADMSG (a line not of four numbers, a queue twice or
 * >= @n, a number past INT64_MAX).
 */
MUST_CHECK int meta_timer_parse(const char *txt, size_t len, struct meta_timer_mark *m, size_t n);
/* The file: replaced atomically; missing: all -1. Return: 0, -errno. */
MUST_CHECK int meta_timer_save(const struct store_io_ops *io, const char *path, const char *header,
			       const struct meta_timer_mark *m, size_t n);
MUST_CHECK int meta_timer_load(const struct store_io_ops *io, const char *path,
			       struct meta_timer_mark *m, size_t n);

#endif /* SP_STORE_META_TIMER_H */
