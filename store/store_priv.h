/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_priv.h - what store.c lends the store's other files.
 */
#ifndef SP_STORE_STORE_PRIV_H
#define SP_STORE_STORE_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * Put the ConsumeQueue unit of every record in @data (the @len bytes at
 * local @off of @shard, checked by clog_append_raw()) into its queue,
 * creating queues and files as needed, as recovery does. Units already
 * there are kept (records carry their queue offset).
 * Context: the shard's writer (may block: takes the registry lock, may
 * create files). Return: 0 or the first error (the other records are
 * still dispatched; a queue with missing units is logged).
 */
int store__dispatch_span(struct store *s, uint32_t shard, uint64_t off, const uint8_t *data,
			 size_t len);

#endif /* SP_STORE_STORE_PRIV_H */
