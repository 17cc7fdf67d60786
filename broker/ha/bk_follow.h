/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_follow.h - a slave's replication sessions, one per shard (bk_follow.c,
 * docs/replication.md).
 *
 * Ownership: created and stopped by the control thread; the master's
 * address may be set from any control thread in between.
 */
#ifndef SP_BROKER_BK_FOLLOW_H
#define SP_BROKER_BK_FOLLOW_H

#include <stdint.h>

#include "bk_priv.h"

struct bk_follow;

/**
 * bk_follow_start() - start one replication session per shard.
 * @master: the master's dataplane endpoint "ip:port" (haMasterAddress), or
 *          NULL/"" to wait for bk_follow_set_master().
 * @ports: one open dataplane port per shard for the sessions (a dpdk slave's
 *         extra ports; they stay the caller's to close, after
 *         bk_follow_stop()), or NULL: each session opens a kernel UDP port.
 * Context: control thread, after the store is open. Return: 0, -errno.
 */
MUST_CHECK int bk_follow_start(struct bk *bk, const char *master, struct dp_port *const *ports,
			       struct bk_follow **out);

/**
 * bk_follow_recover_start() - a master that restarted with a log shorter
 * than its slave's takes the slave's bytes past its end back, one session
 * per shard to the slave's core (@slave: its dataplane endpoint "ip:port"),
 * with REPL requests flagged RECOVER, until the slave has nothing more.
 * The store must have no other writer meanwhile (the cores are not started).
 * Context: control thread. Return: 0, -errno.
 */
MUST_CHECK int bk_follow_recover_start(struct bk *bk, const char *slave, struct bk_follow **out);

/* Taking back: 0 going on, 1 every shard done, -1 a shard gave up (logged). Relaxed. */
int bk_follow_recover_state(const struct bk_follow *f);

/* Follow the master at "ip:port" (a change restarts the sessions). Context: control. */
void bk_follow_set_master(struct bk_follow *f, const char *addr);

/* Stop the sessions and free @f (NULL: no-op). Context: control thread. */
void bk_follow_stop(struct bk_follow *f);

/* Every shard that can follow has a session to the master (relaxed). */
bool bk_follow_connected(const struct bk_follow *f);

/* The oldest of the shards' last answers from the master (wall ms; 0: a shard had none). */
uint64_t bk_follow_contact_ms(const struct bk_follow *f);

/*
 * How far a shard is behind its master, as of its last answer: bytes the
 * master had past ours, and the age of our newest record while any (0 when
 * caught up); and the most of each since start. The session writes.
 */
struct bk_follow_lag {
	_Atomic uint64_t bytes;
	_Atomic uint64_t ms;
	_Atomic uint64_t max_bytes;
	_Atomic uint64_t max_ms;
	_Atomic uint64_t seg_wait_ms; /* spent waiting for the store's next segment */
};

/* Shard @shard's last seen master end of log, bytes copied and lag (NULL: not wanted). */
void bk_follow_stats(const struct bk_follow *f, uint32_t shard, uint64_t *master_end,
		     uint64_t *bytes, struct bk_follow_lag *lag);

#endif /* SP_BROKER_BK_FOLLOW_H */
