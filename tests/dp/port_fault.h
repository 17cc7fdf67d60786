/* SPDX-License-Identifier: Apache-2.0 */
/*
 * port_fault.h - a dp_port wrapper that loses, duplicates and reorders the
 * datagrams it sends, for transport tests (the only mock in the dataplane's
 * tests, and only for fault injection).
 */
#ifndef SP_TESTS_PORT_FAULT_H
#define SP_TESTS_PORT_FAULT_H

#include <stdint.h>

#include "dp/port.h"

struct port_fault_cfg {
	unsigned drop_pct;    /* lose this % of datagrams */
	unsigned dup_pct;     /* send this % twice */
	unsigned reorder_pct; /* hold this % back until after the next one */
	uint64_t seed;
};

struct port_fault_stats {
	uint64_t dropped;
	uint64_t duplicated;
	uint64_t reordered;
};

/* Wraps @inner (which the wrapper then owns and closes). Return: 0 or -ENOMEM. */
int port_fault_wrap(struct dp_port *inner, const struct port_fault_cfg *cfg, struct dp_port **out);
const struct port_fault_stats *port_fault_stats(const struct dp_port *p);

#endif
