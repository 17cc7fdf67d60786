/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xport_priv.h - what the transport's server and client halves share: a TX
 * staging queue that turns (header, payload view) pairs into one port burst,
 * a small PRNG and the default credit window.
 */
#ifndef SP_DP_XPORT_PRIV_H
#define SP_DP_XPORT_PRIV_H

#include <stdint.h>

#include "common/compiler.h"
#include "dp/port.h"
#include "wire/dp.h"

#define DP_XTXQ_SCRATCH 128 /* bytes per small payload kept until the flush */

/*
 * Ownership: one thread. Payload pointers pushed here must stay valid until
 * the next flush (slot buffers and the queue's own scratch do).
 */
struct dp_xtxq {
	unsigned n;
	unsigned nscratch;
	struct dp_tx tx[DP_BURST_MAX];
	uint8_t hdr[DP_BURST_MAX][WIRE_DP_HDR_LEN];
	uint8_t scratch[DP_BURST_MAX][DP_XTXQ_SCRATCH];
};

static inline void
dp__txq_init(struct dp_xtxq *q)
{
	q->n = 0;
	q->nscratch = 0;
}

static inline void
dp__txq_flush(struct dp_xtxq *q, struct dp_port *port)
{
	if (q->n)
		(void)dp_port_tx_burst(port, q->tx, q->n);
	q->n = 0;
	q->nscratch = 0;
}

/* Queues one packet: @h is encoded now, @payload (h->payload_len bytes) read at the flush. */
static inline void
dp__txq_push(struct dp_xtxq *q, struct dp_port *port, const struct wire_dp_hdr *h,
	     const uint8_t *payload, struct dp_addr dst)
{
	if (q->n == DP_BURST_MAX)
		dp__txq_flush(q, port);
	/* Our own headers always encode; a failure would be a transport bug. */
	if (wire_dp_hdr_encode(h, q->hdr[q->n], WIRE_DP_HDR_LEN) != WIRE_DP_HDR_LEN)
		return;
	q->tx[q->n] = (struct dp_tx){
		.hdr = q->hdr[q->n],
		.hdr_len = WIRE_DP_HDR_LEN,
		.data = payload,
		.len = h->payload_len,
		.dst = dst,
	};
	q->n++;
}

/* A scratch buffer of @len <= DP_XTXQ_SCRATCH bytes that lives until the next flush. */
static inline uint8_t *
dp__txq_scratch(struct dp_xtxq *q, struct dp_port *port, uint32_t len)
{
	BASSERT(len <= DP_XTXQ_SCRATCH);
	/*
	 * Flush when the packet queue is full too: the push that follows
	 * would flush and reset nscratch while its packet points here, and a
	 * later scratch would overwrite it.
	 */
	if (q->nscratch == DP_BURST_MAX || q->n == DP_BURST_MAX)
		dp__txq_flush(q, port);
	return q->scratch[q->nscratch++];
}

static inline uint64_t
dp__splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* About 256 KiB in flight per message: 4 packets of 64 KiB, 64 of 1.4 KiB. */
static inline uint16_t
dp__credits_for(uint32_t max_payload)
{
	uint32_t c = (256u << 10) / (max_payload ? max_payload : 1);

	return (uint16_t)(c < 4 ? 4 : c > 64 ? 64 : c);
}

#endif /* SP_DP_XPORT_PRIV_H */
