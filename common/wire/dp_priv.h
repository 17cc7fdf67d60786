/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dp_priv.h - what the dataplane codec's files share (dp.c, dp_repl.c):
 * the response common part's writer and checked reader.
 */
#ifndef SP_WIRE_DP_PRIV_H
#define SP_WIRE_DP_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/dp.h"

/* Check @h and @total against the limits and @cap, then write the common part. */
int wire__dp_resp_begin(const struct wire_dp_resp_head *h, uint64_t total, uint8_t *buf,
			size_t cap);
/* Decode the head of a response that must be exactly @want bytes (at least, if @at_least). */
int wire__dp_resp_head_take(const uint8_t *msg, size_t len, size_t want, bool at_least,
			    struct wire_dp_resp_head *h);

#endif /* SP_WIRE_DP_PRIV_H */
