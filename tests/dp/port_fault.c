// SPDX-License-Identifier: Apache-2.0
/*
 * port_fault.c - see port_fault.h. TX only: wrapping both ends' ports covers
 * both directions. A held-back (reordered) datagram is copied and sent after
 * the next burst's first datagram, or at the next poll when nothing follows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "port_fault.h"

#define HOLD_MAX 8

struct fault_port {
	struct dp_port base;
	struct dp_port *in;
	struct port_fault_cfg cfg;
	struct port_fault_stats st;
	uint64_t rng;
	unsigned nheld;
	struct {
		uint8_t *buf;
		uint32_t len;
		struct dp_addr dst;
	} held[HOLD_MAX];
};

static unsigned
rnd(struct fault_port *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return (unsigned)(f->rng % 100);
}

static void
release_held(struct fault_port *f)
{
	for (unsigned i = 0; i < f->nheld; i++) {
		struct dp_tx t = {
			.data = f->held[i].buf, .len = f->held[i].len, .dst = f->held[i].dst};

		(void)dp_port_tx_burst(f->in, &t, 1);
	}
	f->nheld = 0;
}

static unsigned
fault_rx_burst(struct dp_port *p, struct dp_rx *rx, unsigned n)
{
	struct fault_port *f = (struct fault_port *)p;

	if (f->nheld)
		release_held(f);
	return dp_port_rx_burst(f->in, rx, n);
}

static void
fault_rx_done(struct dp_port *p)
{
	dp_port_rx_done(((struct fault_port *)p)->in);
}

static unsigned
fault_tx_burst(struct dp_port *p, const struct dp_tx *tx, unsigned n)
{
	struct fault_port *f = (struct fault_port *)p;

	for (unsigned i = 0; i < n; i++) {
		unsigned r = rnd(f);

		if (r < f->cfg.drop_pct) {
			f->st.dropped++;
			continue;
		}
		r = rnd(f);
		if (r < f->cfg.reorder_pct && f->nheld < HOLD_MAX) {
			uint32_t len = tx[i].hdr_len + tx[i].len;

			memcpy(f->held[f->nheld].buf, tx[i].hdr, tx[i].hdr_len);
			if (tx[i].len)
				memcpy(f->held[f->nheld].buf + tx[i].hdr_len, tx[i].data,
				       tx[i].len);
			f->held[f->nheld].len = len;
			f->held[f->nheld].dst = tx[i].dst;
			f->nheld++;
			f->st.reordered++;
			continue;
		}
		(void)dp_port_tx_burst(f->in, &tx[i], 1);
		if (f->nheld)
			release_held(f); /* after a later datagram: reordered */
		if (rnd(f) < f->cfg.dup_pct) {
			(void)dp_port_tx_burst(f->in, &tx[i], 1);
			f->st.duplicated++;
		}
	}
	return n;
}

static void
fault_wait(struct dp_port *p, unsigned us, int wake_fd)
{
	struct fault_port *f = (struct fault_port *)p;

	if (f->nheld) {
		release_held(f);
		return;
	}
	dp_port_wait_fd(f->in, us, wake_fd);
}

static bool
fault_link_up(struct dp_port *p)
{
	return dp_port_link_up(((struct fault_port *)p)->in);
}

static void
fault_close(struct dp_port *p)
{
	struct fault_port *f = (struct fault_port *)p;

	f->in->ops->close(f->in);
	for (unsigned i = 0; i < HOLD_MAX; i++)
		free(f->held[i].buf);
	free(f);
}

static const struct dp_port_ops fault_ops = {
	.name = "fault",
	.rx_burst = fault_rx_burst,
	.rx_done = fault_rx_done,
	.tx_burst = fault_tx_burst,
	.wait = fault_wait,
	.link_up = fault_link_up,
	.close = fault_close,
};

int
port_fault_wrap(struct dp_port *inner, const struct port_fault_cfg *cfg, struct dp_port **out)
{
	struct fault_port *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	for (unsigned i = 0; i < HOLD_MAX; i++) {
		f->held[i].buf = malloc(inner->max_dgram);
		if (!f->held[i].buf) {
			for (unsigned k = 0; k < i; k++)
				free(f->held[k].buf);
			free(f);
			return -ENOMEM;
		}
	}
	f->base = *inner;
	f->base.ops = &fault_ops;
	f->in = inner;
	f->cfg = *cfg;
	f->rng = cfg->seed ? cfg->seed : 0x9e3779b97f4a7c15ull;
	*out = &f->base;
	return 0;
}

const struct port_fault_stats *
port_fault_stats(const struct dp_port *p)
{
	return &((const struct fault_port *)p)->st;
}
