// SPDX-License-Identifier: Apache-2.0
/*
 * port_dpdk.c - the DPDK backend: one ethdev, one RX/TX queue pair per port,
 * per-port mbuf pools, software steering over rte_rings, ARP. What memif in
 * DPDK 22.11 needs besides (the peer-death handshake held around every
 * burst, stops and re-arms on the EAL interrupt thread) is in
 * port_dpdk_memif.c.
 *
 * EAL is initialised once per process from cfg->dpdk_args (space-separated,
 * argv[0] "sprocket"); a later dp_ports_open() with the same string reuses it,
 * one with a different string fails with -EALREADY. The first ethdev (a
 * --vdev on the machines this project tests on) carries all n ports.
 *
 * DESIGN
 *
 * Queues and steering. nq = min(n, max_rx_queues, max_tx_queues) queue
 * pairs; port i < nq polls RX queue i and sends on TX queue i. When the PMD
 * accepts rte_flow rules (validated first) UDP dst port base+i is steered to
 * queue i. Otherwise (every vdev here) a packet lands wherever the peer or the
 * PMD put it, and the port that receives a UDP datagram for another port's
 * dst port hands the mbuf over on that port's rte_ring (multi-producer,
 * single-consumer: any queue owner may enqueue, only the owner dequeues). A
 * port i >= nq has no RX queue and gets its packets only from its ring; it
 * sends on TX queue i % nq, which is then shared and guarded by a spinlock
 * (a few ns when uncontended; the alternative, handing TX mbufs to the queue
 * owner, would add that owner's loop latency to every send). ARP frames are
 * answered by the port that receives them and then passed by reference
 * (refcount) to every other port's ring so that each port's ARP cache learns
 * the sender.
 *
 * mbufs cross ports only through the rings. A handed-over mbuf goes back to
 * the receiving port's pool from the owner's thread: DPDK mempools are
 * multi-producer safe, so this is the one place where an object is freed off
 * the core that allocated it (docs/style.md 9.5), and it is fine here.
 *
 * Link state. Every port refreshes its view of the link with
 * rte_eth_link_get_nowait() at most once a millisecond (no syscall), stops
 * polling and sending while it is down (TX drops and counts) and counts each
 * up->down edge in st.link_downs. A memif client re-arms (stop + start, which
 * reconnects the control socket) from dp_port_wait() on port 0, at most every
 * 250 ms and only once the PMD has dropped the old control channel, because
 * the PMD never reconnects on its own (port_dpdk_memif.c).
 *
 * SPROCKET_DPDK_QUEUES=N caps the queue pairs, as a device with fewer queues
 * would; tests use it to reach the ports-without-a-queue path on net_ring.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "common/clock.h"
#include "common/log.h"
#include "port_dpdk_priv.h"

#define DPDK_DESC_DEFAULT 512u
#define DPDK_LINK_POLL_HZ 1000u	  /* link checks per second, per port */
#define DPDK_START_RETRY_MS 2000u /* memif client: wait for its server at open */
#define DPDK_WAIT_MAX_US 100u	  /* longest nanosleep in wait() */
#define DPDK_ARGV_MAX 64

static struct dpdk_dev g_dev;
static int g_eal_state; /* 0 not tried, 1 up, <0 failed with this errno */
static char *g_eal_args;
static char g_devargs[512]; /* the device, to probe it again after a close */
static unsigned g_gen;

static const uint8_t zero_mac[6];

/* ------------------------------------------------------------------------ */
/* Datapath */

/* Reads the link now; counts up->down edges. Context: owner; under cc_lock on memif. */
static bool
link_read(struct dpdk_port *p)
{
	struct rte_eth_link l;
	bool up = false;

	if (rte_eth_link_get_nowait(p->dev->port_id, &l) == 0)
		up = l.link_status == RTE_ETH_LINK_UP;
	if (p->link && !up)
		p->base.st.link_downs++;
	p->link = up;
	return up;
}

/* Periodic link check for ports that do not read the link on every burst. */
static void
link_refresh(struct dpdk_port *p)
{
	uint64_t now = rte_get_tsc_cycles();

	if (now < p->next_link_tsc)
		return;
	p->next_link_tsc = now + p->link_period;
	link_read(p);
}

/* Sends @k frames on the port's TX queue; Return: frames the PMD took. */
static unsigned
xmit(struct dpdk_port *p, struct rte_mbuf **m, unsigned k)
{
	struct dpdk_dev *d = p->dev;
	unsigned sent = 0;

	if (k == 0)
		return 0;
	dev_enter(d);
	/* memif: re-read under the lock (port_dpdk_memif.c). Elsewhere the cached state. */
	if (d->cc_lock ? link_read(p) : p->link) {
		uint16_t q = p->txq;

		/*
		 * A memif queue without a ring sends on queue 0 instead; cc_lock
		 * already serialises every memif burst, so no TX lock is needed.
		 */
		if (d->cc_lock && q >= memif_rings(d, false))
			q = 0;
		if (p->txq_shared)
			rte_spinlock_lock(&d->txq_lock[p->txq]);
		sent = rte_eth_tx_burst(d->port_id, q, m, (uint16_t)k);
		if (p->txq_shared)
			rte_spinlock_unlock(&d->txq_lock[p->txq]);
	}
	dev_exit(d);
	if (sent < k)
		rte_pktmbuf_free_bulk(m + sent, k - sent);
	return sent;
}

static void
send_arp(struct dpdk_port *p, uint16_t op, const uint8_t tha[6], uint32_t tpa)
{
	struct dpdk_dev *d = p->dev;
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	uint32_t len;

	if (!m)
		return;
	len = dp__frame_arp(rte_pktmbuf_mtod(m, uint8_t *), op, d->mac, d->ip, tha, tpa);
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
	if (xmit(p, &m, 1))
		p->base.st.arp_tx++;
}

/*
 * Handles one ARP frame: learn the sender; answer a request for our IP when
 * the frame came from the wire (@from_hw); pass it by reference to the other
 * ports so that they learn too. The caller still frees its own reference.
 */
static void
handle_arp(struct dpdk_port *p, struct rte_mbuf *m, const struct dp__frame *f, bool from_hw)
{
	struct dpdk_dev *d = p->dev;

	p->base.st.arp_rx++;
	if (f->arp_spa != 0)
		dp__arp_learn(&p->arp, f->arp_spa, f->arp_sha);
	if (!from_hw)
		return;
	if (f->arp_op == DP_ARP_REQUEST && f->arp_tpa == d->ip)
		send_arp(p, DP_ARP_REPLY, f->arp_sha, f->arp_spa);
	if (d->n > 1 && f->arp_spa != 0) {
		unsigned others = 0;

		for (unsigned j = 0; j < d->n; j++)
			others += j != p->base.index;
		rte_mbuf_refcnt_update(m, (int16_t)others);
		for (unsigned j = 0; j < d->n; j++) {
			if (j == p->base.index)
				continue;
			if (rte_ring_mp_enqueue(d->rings[j], m) != 0)
				rte_pktmbuf_free(m);
		}
	}
}

/*
 * Classifies @m and either delivers it into @rx (kept in held[]), hands it to
 * its owner, or returns it for freeing. Return: 1 delivered, 0 consumed or
 * handed over, -1 caller frees.
 */
static int
rx_one(struct dpdk_port *p, struct rte_mbuf *m, struct dp_rx *rx, bool from_hw)
{
	struct dpdk_dev *d = p->dev;
	struct dp__frame f;
	bool verify = true;
	int kind;

	if (m->nb_segs != 1) {
		p->base.st.rx_ignored++;
		return -1;
	}
	if (d->rx_csum) {
		uint64_t fl = m->ol_flags;

		if ((fl & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
		    (fl & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
			p->base.st.rx_ignored++;
			return -1;
		}
		verify = (fl & RTE_MBUF_F_RX_IP_CKSUM_MASK) != RTE_MBUF_F_RX_IP_CKSUM_GOOD ||
			 (fl & RTE_MBUF_F_RX_L4_CKSUM_MASK) != RTE_MBUF_F_RX_L4_CKSUM_GOOD;
	}
	kind = dp__frame_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, verify, &f);
	if (kind == DP__FRAME_ARP) {
		handle_arp(p, m, &f, from_hw);
		return -1;
	}
	if (kind != DP__FRAME_UDP || f.dst_ip != d->ip) {
		p->base.st.rx_ignored++;
		return -1;
	}
	if (f.dst_port != p->base.local.port) {
		unsigned owner = (unsigned)(uint16_t)(f.dst_port - d->base_port);

		if (!from_hw || owner >= d->n) {
			p->base.st.rx_ignored++;
			return -1;
		}
		if (rte_ring_mp_enqueue(d->rings[owner], m) != 0) {
			p->base.st.rx_ignored++;
			return -1;
		}
		p->base.st.rx_handoff++;
		return 0;
	}
	dp__arp_learn(&p->arp, f.src_ip, f.src_mac);
	rx->data = f.payload;
	rx->len = f.payload_len;
	rx->src.ip = f.src_ip;
	rx->src.port = f.src_port;
	p->base.st.rx_pkts++;
	p->base.st.rx_bytes += f.payload_len;
	return 1;
}

static void
dpdk_rx_done(struct dp_port *dp)
{
	struct dpdk_port *p = (struct dpdk_port *)dp;

	if (p->nheld) {
		rte_pktmbuf_free_bulk(p->held, p->nheld);
		p->nheld = 0;
	}
}

static unsigned
dpdk_rx_burst(struct dp_port *dp, struct dp_rx *rx, unsigned n)
{
	struct dpdk_port *p = (struct dpdk_port *)dp;
	struct dpdk_dev *d = p->dev;
	struct rte_mbuf *m[DP_BURST_MAX];
	struct rte_mbuf *drop[DP_BURST_MAX];
	void *objs[DP_BURST_MAX];
	unsigned ndrop = 0;
	unsigned got = 0;
	unsigned k;

	/* Views from an earlier burst that was never released die now. */
	dpdk_rx_done(dp);
	if (n > DP_BURST_MAX)
		n = DP_BURST_MAX;

	/* 1. What other ports handed over (our memory: safe whatever the link). */
	/*
	 * DPDK's inline ring copies store through uint64_t *; without
	 * -fno-strict-aliasing (meson.build) clang read the slots before that
	 * copy had written them. void * slots, then the mbuf array.
	 */
	k = rte_ring_sc_dequeue_burst(p->ring, objs, n, NULL);
	for (unsigned i = 0; i < k; i++)
		m[i] = objs[i];
	for (unsigned i = 0; i < k; i++) {
		int r = rx_one(p, m[i], &rx[got], false);

		if (r > 0)
			p->held[p->nheld++] = m[i];
		else if (r < 0)
			drop[ndrop++] = m[i];
		got += r > 0;
	}
	if (ndrop) {
		rte_pktmbuf_free_bulk(drop, ndrop);
		ndrop = 0;
	}

	/* 2. The hardware queue. */
	if (p->rxq < 0 || got == n) {
		link_refresh(p);
		return got;
	}
	k = 0;
	if (d->cc_lock) {
		if (dev_enter_try(d)) {
			if (link_read(p) && (unsigned)p->rxq < memif_rings(d, true))
				k = rte_eth_rx_burst(d->port_id, (uint16_t)p->rxq, m,
						     (uint16_t)(n - got));
			dev_exit(d);
		}
	} else {
		/* memif without the handshake reads the link every time: a smaller window */
		if (d->memif)
			link_read(p);
		else
			link_refresh(p);
		if (p->link)
			k = rte_eth_rx_burst(d->port_id, (uint16_t)p->rxq, m, (uint16_t)(n - got));
	}
	for (unsigned i = 0; i < k; i++) {
		int r = rx_one(p, m[i], &rx[got], true);

		if (r > 0)
			p->held[p->nheld++] = m[i];
		else if (r < 0)
			drop[ndrop++] = m[i];
		got += r > 0;
	}
	if (ndrop)
		rte_pktmbuf_free_bulk(drop, ndrop);
	return got;
}

static unsigned
dpdk_tx_burst(struct dp_port *dp, const struct dp_tx *tx, unsigned n)
{
	struct dpdk_port *p = (struct dpdk_port *)dp;
	struct dpdk_dev *d = p->dev;
	struct rte_mbuf *m[DP_BURST_MAX];
	uint64_t bytes[DP_BURST_MAX];
	unsigned taken = 0;

	if (d->cc_lock == NULL)
		link_refresh(p);
	for (unsigned off = 0; off < n;) {
		unsigned chunk = SP_MIN(n - off, (unsigned)DP_BURST_MAX);
		unsigned k = 0;
		unsigned sent;

		for (unsigned i = 0; i < chunk; i++) {
			const struct dp_tx *t = &tx[off + i];
			uint32_t len = t->hdr_len + t->len;
			uint8_t dmac[6];
			uint8_t *f;
			struct rte_mbuf *b;

			if (len > p->base.max_dgram || !p->link) {
				p->base.st.tx_dropped++;
				continue;
			}
			if (!dp__arp_lookup(&p->arp, t->dst.ip, dmac)) {
				if (dp__arp_should_ask(&p->arp, t->dst.ip, clk_mono_ns()))
					send_arp(p, DP_ARP_REQUEST, zero_mac, t->dst.ip);
				p->base.st.tx_no_arp++;
				continue;
			}
			b = rte_pktmbuf_alloc(p->pool);
			if (!b) {
				p->base.st.tx_dropped++;
				continue;
			}
			f = rte_pktmbuf_mtod(b, uint8_t *);
			if (t->hdr_len)
				memcpy(f + DP_UDP_HDRS, t->hdr, t->hdr_len);
			if (t->len)
				memcpy(f + DP_UDP_HDRS + t->hdr_len, t->data, t->len);
			dp__frame_udp_hdrs(f, d->mac, dmac, d->ip, t->dst.ip, p->base.local.port,
					   t->dst.port, len, p->ip_id++, !d->tx_udp_csum);
			if (d->tx_ip_csum || d->tx_udp_csum) {
				struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + DP_ETH_HLEN);

				b->l2_len = DP_ETH_HLEN;
				b->l3_len = DP_IP4_HLEN;
				b->ol_flags |= RTE_MBUF_F_TX_IPV4;
				if (d->tx_ip_csum) {
					ip->hdr_checksum = 0;
					b->ol_flags |= RTE_MBUF_F_TX_IP_CKSUM;
				}
				if (d->tx_udp_csum) {
					struct rte_udp_hdr *u =
						(struct rte_udp_hdr *)(f + DP_ETH_HLEN +
								       DP_IP4_HLEN);

					u->dgram_cksum = rte_ipv4_phdr_cksum(ip, b->ol_flags);
					b->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
				}
			}
			b->data_len = (uint16_t)(DP_UDP_HDRS + len);
			b->pkt_len = DP_UDP_HDRS + len;
			bytes[k] = len;
			m[k++] = b;
		}
		sent = xmit(p, m, k);
		for (unsigned i = 0; i < sent; i++)
			p->base.st.tx_bytes += bytes[i];
		p->base.st.tx_pkts += sent;
		p->base.st.tx_dropped += k - sent;
		taken += sent;
		off += chunk;
	}
	return taken;
}

static void
dpdk_wait(struct dp_port *dp, unsigned timeout_us, int wake_fd)
{
	struct dpdk_port *p = (struct dpdk_port *)dp;
	struct dpdk_dev *d = p->dev;
	unsigned us = SP_MIN(timeout_us, DPDK_WAIT_MAX_US);
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)us * 1000};

	if (d->memif_client && !p->link && p->base.index == 0)
		dp__memif_rearm(p);
	if (rte_ring_count(p->ring) || us == 0)
		return;
	if (wake_fd >= 0) {
		struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};

		/* ALLOW-BLOCKING: the one call that may sleep (port.h). */
		(void)ppoll(&pfd, 1, &ts, NULL);
		return;
	}
	/* ALLOW-BLOCKING: the one call that may sleep (port.h). */
	nanosleep(&ts, NULL);
}

static bool
dpdk_link_up(struct dp_port *dp)
{
	struct dpdk_port *p = (struct dpdk_port *)dp;

	/*
	 * Owners that stop polling a down link (the core loop, the bench's
	 * echo peer) learn that it is back only here, so refresh (at most
	 * once per link period, no syscall) instead of trusting the value the
	 * last burst saw.
	 */
	link_refresh(p);
	return p->link;
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown (control thread). */

static void
port_free(struct dpdk_port *p)
{
	void *obj;

	dpdk_rx_done(&p->base);
	if (p->ring) {
		while (rte_ring_sc_dequeue(p->ring, &obj) == 0)
			rte_pktmbuf_free(obj);
		rte_ring_free(p->ring);
	}
	/* The pool is freed with the device: stopped queues may still name it. */
	free(p);
}

static void
dev_teardown(struct dpdk_dev *d)
{
	struct rte_flow_error ferr;

	for (unsigned i = 0; i < DP_PORTS_MAX; i++) {
		if (d->flows[i])
			(void)rte_flow_destroy(d->port_id, d->flows[i], &ferr);
		d->flows[i] = NULL;
	}
	/*
	 * A memif device is stopped on the interrupt thread (dp__memif_stop()).
	 * Closing and removing the device releases its queues; a later open
	 * probes it again from g_devargs. Not for memif: 22.11's close frees
	 * its process-private data twice ("EAL: Error: Invalid memory") and
	 * leaves the listener's callback registered on a closed fd, which then
	 * spins; a stopped memif device is reconfigured by the next open.
	 */
	if (d->device) {
		if (d->memif) {
			dp__memif_stop(d);
		} else {
			(void)rte_eth_dev_stop(d->port_id);
			(void)rte_eth_dev_close(d->port_id);
			(void)rte_dev_remove(d->device);
		}
		d->device = NULL;
	}
	for (unsigned i = 0; i < d->n; i++) {
		if (d->ports[i]) {
			struct rte_mempool *pool = d->ports[i]->pool;

			port_free(d->ports[i]);
			d->ports[i] = NULL;
			rte_mempool_free(pool);
		}
		d->rings[i] = NULL;
	}
	d->cc_lock = NULL;
	d->memif_pmd = NULL;
	d->open_ports = 0;
}

static void
dpdk_close(struct dp_port *dp)
{
	struct dpdk_port *p = (struct dpdk_port *)dp;
	struct dpdk_dev *d = p->dev;

	if (d->open_ports > 0)
		d->open_ports--;
	if (d->open_ports == 0)
		dev_teardown(d);
}

static const struct dp_port_ops dpdk_ops = {
	.name = "dpdk",
	.rx_burst = dpdk_rx_burst,
	.rx_done = dpdk_rx_done,
	.tx_burst = dpdk_tx_burst,
	.wait = dpdk_wait,
	.link_up = dpdk_link_up,
	.close = dpdk_close,
};

/* Splits @args on spaces into a static argv and runs rte_eal_init() once. */
static int
eal_init_once(const char *args)
{
	char *argv[DPDK_ARGV_MAX];
	char *buf;
	int argc = 0;
	char *save = NULL;
	int rc;

	if (g_eal_state == 1) {
		if (strcmp(g_eal_args, args) != 0) {
			log_err("dp.dpdk",
				"EAL is already initialised with other arguments (\"%s\"); "
				"one process runs one EAL",
				g_eal_args);
			return -EALREADY;
		}
		return 0;
	}
	if (g_eal_state < 0) {
		log_err("dp.dpdk", "EAL initialisation failed earlier in this process: %s",
			rte_strerror(-g_eal_state));
		return g_eal_state;
	}
	buf = strdup(args);
	if (!buf)
		return -ENOMEM;
	argv[argc++] = (char *)"sprocket";
	for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (argc == DPDK_ARGV_MAX - 1) {
			log_err("dp.dpdk", "dpdkArgs has more than %d arguments",
				DPDK_ARGV_MAX - 2);
			free(buf);
			return -EINVAL;
		}
		argv[argc++] = tok;
	}
	argv[argc] = NULL;
	g_eal_args = strdup(args);
	if (!g_eal_args) {
		free(buf);
		return -ENOMEM;
	}
	rc = rte_eal_init(argc, argv);
	/* EAL copies what it keeps of argv (eal_save_args, devargs, prefixes). */
	free(buf);
	if (rc < 0) {
		int e = rte_errno ? rte_errno : EINVAL;

		log_err("dp.dpdk", "EAL initialisation failed (dpdkArgs \"%s\"): %s", args,
			rte_strerror(e));
		g_eal_state = -e;
		return -e;
	}
	g_eal_state = 1;
	return 0;
}

/* Installs one rte_flow rule per queue when the PMD validates them all. */
static void
flows_setup(struct dpdk_dev *d)
{
	struct rte_flow_error ferr;
	struct rte_flow_attr attr = {.ingress = 1};
	struct rte_flow_item_ipv4 ip_spec = {.hdr.dst_addr = d->ip};
	struct rte_flow_item_ipv4 ip_mask = {.hdr.dst_addr = UINT32_MAX};
	struct rte_flow_item_udp udp_spec;
	struct rte_flow_item_udp udp_mask = {.hdr.dst_port = UINT16_MAX};
	struct rte_flow_action_queue queue;
	struct rte_flow_item pattern[] = {
		{.type = RTE_FLOW_ITEM_TYPE_ETH},
		{.type = RTE_FLOW_ITEM_TYPE_IPV4, .spec = &ip_spec, .mask = &ip_mask},
		{.type = RTE_FLOW_ITEM_TYPE_UDP, .spec = &udp_spec, .mask = &udp_mask},
		{.type = RTE_FLOW_ITEM_TYPE_END},
	};
	struct rte_flow_action actions[] = {
		{.type = RTE_FLOW_ACTION_TYPE_QUEUE, .conf = &queue},
		{.type = RTE_FLOW_ACTION_TYPE_END},
	};

	d->hw_steer = false;
	if (d->nq < 2)
		return;
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < d->nq; i++) {
			memset(&udp_spec, 0, sizeof(udp_spec));
			udp_spec.hdr.dst_port = rte_cpu_to_be_16((uint16_t)(d->base_port + i));
			queue.index = (uint16_t)i;
			if (pass == 0) {
				if (rte_flow_validate(d->port_id, &attr, pattern, actions, &ferr)) {
					log_info("dp.dpdk",
						 "rte_flow steering not available (%s): software "
						 "hand-over",
						 ferr.message ? ferr.message : "no reason given");
					return;
				}
				continue;
			}
			d->flows[i] = rte_flow_create(d->port_id, &attr, pattern, actions, &ferr);
			if (!d->flows[i]) {
				log_warn("dp.dpdk", "rte_flow_create(queue %u) failed: %s", i,
					 ferr.message ? ferr.message : "?");
				(void)rte_flow_flush(d->port_id, &ferr);
				memset(d->flows, 0, sizeof(d->flows));
				return;
			}
		}
	}
	d->hw_steer = true;
}

static int
port_create(struct dpdk_dev *d, const struct dp_port_cfg *cfg, unsigned i, unsigned ndesc,
	    uint32_t max_dgram, struct dpdk_port **out)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	struct dpdk_port *p;
	unsigned nb_mbufs;
	int socket = rte_eth_dev_socket_id(d->port_id);

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	/* RX descriptors + TX descriptors + the hand-over ring + bursts in flight. */
	nb_mbufs = rte_align32pow2(ndesc * 3 + 4 * DP_BURST_MAX) - 1;
	snprintf(name, sizeof(name), "sp%u_pool%u", d->gen, i);
	p->pool = rte_pktmbuf_pool_create(name, nb_mbufs, SP_MIN(256u, nb_mbufs / 2), 0,
					  RTE_MBUF_DEFAULT_BUF_SIZE,
					  socket < 0 ? SOCKET_ID_ANY : socket);
	if (!p->pool) {
		log_err("dp.dpdk", "mbuf pool for port %u (%u mbufs) failed: %s", i, nb_mbufs,
			rte_strerror(rte_errno));
		free(p);
		return -ENOMEM;
	}
	snprintf(name, sizeof(name), "sp%u_ring%u", d->gen, i);
	p->ring = rte_ring_create(name, rte_align32pow2(ndesc), SOCKET_ID_ANY, RING_F_SC_DEQ);
	if (!p->ring) {
		log_err("dp.dpdk", "hand-over ring for port %u failed: %s", i,
			rte_strerror(rte_errno));
		rte_mempool_free(p->pool);
		free(p);
		return -ENOMEM;
	}
	p->dev = d;
	p->rxq = i < d->nq ? (int)i : -1;
	p->txq = (uint16_t)(i % d->nq);
	p->base.ops = &dpdk_ops;
	p->base.local.ip = cfg->ip;
	p->base.local.port = (uint16_t)(cfg->base_port + i);
	memcpy(p->base.mac, d->mac, 6);
	p->base.max_dgram = max_dgram;
	p->base.index = i;
	p->link_period = rte_get_tsc_hz() / DPDK_LINK_POLL_HZ;
	*out = p;
	return 0;
}

/**
 * dp__dpdk_open() - open @cfg->n ports on the first ethdev (see DESIGN).
 * @cfg: backend configuration; ip, base_port and dpdk_args are required.
 * @out: receives n port pointers.
 *
 * Context: startup, control thread; may sleep (EAL init, a memif client
 * waiting up to 2 s for its server), allocates and logs.
 * Return: 0; -EINVAL bad config; -EALREADY EAL already up with other
 * arguments; -EBUSY the device is open; -ENODEV no ethdev; -ENOMEM; other
 * negative errno from EAL or the PMD (logged).
 */
int
dp__dpdk_open(const struct dp_port_cfg *cfg, struct dp_port **out)
{
	struct dpdk_dev *d = &g_dev;
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	struct rte_ether_addr ea;
	struct memif_args ma;
	uint16_t nb_rxd;
	uint16_t nb_txd;
	uint16_t mtu = 1500;
	uint32_t max_dgram;
	uint16_t pid;
	bool found = false;
	int err;

	if (cfg->ip == 0) {
		log_err("dp.dpdk", "dataplane IPv4 address is required for the dpdk backend");
		return -EINVAL;
	}
	if (cfg->base_port == 0) {
		log_err("dp.dpdk", "a base UDP port is required for the dpdk backend");
		return -EINVAL;
	}
	if (!cfg->dpdk_args || !cfg->dpdk_args[0]) {
		log_err("dp.dpdk", "no DPDK port: pass --vdev=... in dpdkArgs");
		return -EINVAL;
	}
	if (d->open_ports) {
		log_err("dp.dpdk", "the DPDK device is already open (%u ports); close them first",
			d->open_ports);
		return -EBUSY;
	}
	err = eal_init_once(cfg->dpdk_args);
	if (err)
		return err;
	RTE_ETH_FOREACH_DEV(pid)
	{
		found = true;
		break;
	}
	if (!found && g_devargs[0]) {
		/* Closed by an earlier dp_ports_close() in this process. */
		err = rte_dev_probe(g_devargs);
		if (err)
			log_err("dp.dpdk", "probing %s again failed: %s", g_devargs,
				rte_strerror(-err));
		RTE_ETH_FOREACH_DEV(pid)
		{
			found = true;
			break;
		}
	}
	if (!found) {
		log_err("dp.dpdk", "no DPDK port: pass --vdev=... in dpdkArgs");
		return -ENODEV;
	}

	memset(d, 0, sizeof(*d));
	d->port_id = pid;
	d->n = cfg->n;
	d->gen = g_gen++;
	d->ip = cfg->ip;
	d->base_port = cfg->base_port;
	err = rte_eth_dev_info_get(pid, &info);
	if (err) {
		log_err("dp.dpdk", "rte_eth_dev_info_get(port %u) failed: %s", pid,
			rte_strerror(-err));
		return err;
	}
	d->device = info.device;
	{
		const struct rte_devargs *da = rte_dev_devargs(info.device);

		if (da)
			snprintf(g_devargs, sizeof(g_devargs), "%s%s%s", da->name,
				 da->args && da->args[0] ? "," : "", da->args ? da->args : "");
	}
	d->memif = strcmp(info.driver_name, "net_memif") == 0;
	d->nq = SP_MIN(cfg->n, (unsigned)SP_MIN(info.max_rx_queues, info.max_tx_queues));
	/* SPROCKET_DPDK_QUEUES caps the queue pairs, as a device with fewer would (tests). */
	if (getenv("SPROCKET_DPDK_QUEUES"))
		d->nq = SP_MIN(d->nq, (unsigned)atoi(getenv("SPROCKET_DPDK_QUEUES")));
	if (d->nq == 0) {
		log_err("dp.dpdk", "port %u (%s) has no queues", pid, info.driver_name);
		return -ENODEV;
	}
	err = rte_eth_macaddr_get(pid, &ea);
	if (err) {
		log_err("dp.dpdk", "rte_eth_macaddr_get(port %u) failed: %s", pid,
			rte_strerror(-err));
		return err;
	}
	memcpy(d->mac, ea.addr_bytes, 6);

	memset(&conf, 0, sizeof(conf));
	if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) &&
	    (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)) {
		conf.txmode.offloads |=
			RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
		d->tx_ip_csum = d->tx_udp_csum = true;
	}
	if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) &&
	    (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)) {
		conf.rxmode.offloads |=
			RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
		d->rx_csum = true;
	}
	err = rte_eth_dev_configure(pid, (uint16_t)d->nq, (uint16_t)d->nq, &conf);
	if (err) {
		log_err("dp.dpdk", "rte_eth_dev_configure(port %u, %u queues) failed: %s", pid,
			d->nq, rte_strerror(-err));
		return err;
	}
	nb_rxd = nb_txd = (uint16_t)(cfg->ring_frames ? cfg->ring_frames : DPDK_DESC_DEFAULT);
	(void)rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nb_rxd, &nb_txd);

	if (cfg->mtu)
		mtu = (uint16_t)SP_MIN(cfg->mtu, 65535u);
	else if (rte_eth_dev_get_mtu(pid, &mtu) != 0 || mtu == 0)
		mtu = 1500;
	max_dgram = SP_MIN((uint32_t)(RTE_MBUF_DEFAULT_BUF_SIZE - RTE_PKTMBUF_HEADROOM),
			   (uint32_t)mtu + DP_ETH_HLEN) -
		    DP_UDP_HDRS;
	if (max_dgram < DP_DGRAM_MIN) {
		log_err("dp.dpdk", "mtu %u leaves %u bytes per datagram, need %u", mtu, max_dgram,
			DP_DGRAM_MIN);
		return -EINVAL;
	}

	for (unsigned i = 0; i < cfg->n; i++) {
		err = port_create(d, cfg, i, SP_MAX(nb_rxd, nb_txd), max_dgram, &d->ports[i]);
		if (err)
			goto err_ports;
		d->rings[i] = d->ports[i]->ring;
		d->txq_users[d->ports[i]->txq]++;
	}
	for (unsigned i = 0; i < cfg->n; i++) {
		d->ports[i]->txq_shared = d->txq_users[d->ports[i]->txq] > 1;
		rte_spinlock_init(&d->txq_lock[i]);
	}
	for (unsigned q = 0; q < d->nq; q++) {
		int socket = rte_eth_dev_socket_id(pid);
		unsigned s = socket < 0 ? (unsigned)SOCKET_ID_ANY : (unsigned)socket;

		err = rte_eth_rx_queue_setup(pid, (uint16_t)q, nb_rxd, s, NULL, d->ports[q]->pool);
		if (err) {
			log_err("dp.dpdk", "RX queue %u setup failed: %s", q, rte_strerror(-err));
			goto err_ports;
		}
		err = rte_eth_tx_queue_setup(pid, (uint16_t)q, nb_txd, s, NULL);
		if (err) {
			log_err("dp.dpdk", "TX queue %u setup failed: %s", q, rte_strerror(-err));
			goto err_ports;
		}
	}
	err = rte_eth_dev_start(pid);
	for (unsigned ms = 0; err && d->memif && ms < DPDK_START_RETRY_MS; ms += 10) {
		/* A memif client fails to start until its server listens. */
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 10000000};

		nanosleep(&ts, NULL);
		err = rte_eth_dev_start(pid);
	}
	if (err) {
		log_err("dp.dpdk", "rte_eth_dev_start(port %u, %s) failed: %s", pid,
			info.driver_name, rte_strerror(err < 0 ? -err : EIO));
		err = err < 0 ? err : -EIO;
		goto err_ports;
	}
	(void)rte_eth_promiscuous_enable(pid);
	flows_setup(d);
	if (d->memif)
		d->cc_lock = dp__memif_find_cc_lock(d, &info, &ma);

	for (unsigned i = 0; i < cfg->n; i++) {
		link_read(d->ports[i]);
		d->ports[i]->next_rearm_ns = clk_mono_ns() + DPDK_REARM_NS;
		out[i] = &d->ports[i]->base;
	}
	d->open_ports = cfg->n;
	log_info("dp.dpdk",
		 "port %u (%s): %u ports on %u queue pairs, steering %s, tx csum %s, rx csum %s, "
		 "max datagram %u, memif handshake %s",
		 pid, info.driver_name, cfg->n, d->nq, d->hw_steer ? "rte_flow" : "software",
		 d->tx_udp_csum ? "offload" : "software", d->rx_csum ? "offload" : "software",
		 max_dgram, d->cc_lock ? "on" : (d->memif ? "OFF" : "n/a"));
	return 0;

err_ports:
	dev_teardown(d);
	return err;
}
