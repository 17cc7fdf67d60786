/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_sync.h - a slave's metadata sync (bk_sync.c, docs/replication.md):
 * the master's topic configs, consumer offsets and delay levels' progress,
 * fetched every few seconds over the master's remoting port.
 *
 * Ownership: the control thread starts, drains (bk_sync_take()) and stops
 * it; the fetching runs on the sync's own thread.
 */
#ifndef SP_BROKER_BK_SYNC_H
#define SP_BROKER_BK_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

struct ctl_breg;
struct bk_sync;

#define BK_SYNC_PERIOD_MS 3000

enum bk_sync_kind {
	BK_SYNC_TOPICS,	 /* GET_ALL_TOPIC_CONFIG (21) */
	BK_SYNC_OFFSETS, /* GET_ALL_CONSUMER_OFFSET (43) */
	BK_SYNC_DELAYS,	 /* GET_ALL_DELAY_OFFSET (45) */
	BK_SYNC_GROUPS,	 /* GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) */
	BK_SYNC_KINDS,
};

/**
 * bk_sync_start() - fetch each bk_sync_kind from the master every @period_ms; the master's remoting address is what
 * the NameServer's registration answer named (ctl_breg_master()).
 * Context: control thread. Return: 0, -errno.
 */
MUST_CHECK int bk_sync_start(struct ctl_breg *breg, uint32_t period_ms, struct bk_sync **out);

/**
 * bk_sync_take() - the newest answer of kind @k not taken yet (malloc'd
 * JSON, the caller frees; NULL when none came since the last call).
 * Context: control thread, non-blocking (a short mutex).
 */
void bk_sync_take(struct bk_sync *s, enum bk_sync_kind k, char **json, size_t *len);

/* Stop the thread and free @s (NULL: no-op). Context: control thread. */
void bk_sync_stop(struct bk_sync *s);

#endif /* SP_BROKER_BK_SYNC_H */
