/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ipcount.h - what each source address holds (connections, requests in
 * flight, sessions), for a per-address cap next to a total one
 * (remotingMaxConnectionsPerAddr, remotingMaxInflightPerAddr, ...): one host
 * cannot take everything a daemon has.
 *
 * An open-addressing table sized at init for the daemon's total cap, so it
 * never grows and never fails for a daemon within its cap; past twice that
 * many addresses a new one is not counted (ipcount_add() says 0). No
 * allocation after init: usable on a dataplane core.
 * Ownership: the thread that accepts and closes connections.
 */
#ifndef SP_COMMON_IPCOUNT_H
#define SP_COMMON_IPCOUNT_H

#include <stdint.h>

#include "common/compiler.h"

struct ipcount_slot {
	uint32_t ip; /* network order; 0: empty (0.0.0.0 is never a peer) */
	uint32_t n;
};

struct ipcount {
	uint32_t mask;
	uint32_t used; /* addresses in the table */
	struct ipcount_slot *v;
};

/* For up to @max_addrs addresses at once. Return: 0, -ENOMEM. */
MUST_CHECK int ipcount_init(struct ipcount *t, uint32_t max_addrs);
void ipcount_fini(struct ipcount *t);

/* Connections from @ip now. */
uint32_t ipcount_get(const struct ipcount *t, uint32_t ip);
/* One more from @ip. Return: the new count, or 0: the table is full, @ip not counted. */
uint32_t ipcount_add(struct ipcount *t, uint32_t ip);
/* One fewer from @ip (one that ipcount_add() counted). */
void ipcount_sub(struct ipcount *t, uint32_t ip);

#endif /* SP_COMMON_IPCOUNT_H */
