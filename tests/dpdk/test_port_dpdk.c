// SPDX-License-Identifier: Apache-2.0
/*
 * test_port_dpdk.c - the dpdk port over net_ring0 in one process.
 *
 * net_ring0 is a loopback: what a port transmits comes back on its RX queue.
 * That makes ARP observable without a peer (a port that sends to its own IP
 * asks, hears its own request, answers it and learns itself), and lets the
 * tests inject hand-made frames with rte_eth_tx_burst() and read what the
 * port sent with rte_eth_rx_burst(). Each case runs in its own forked child
 * (harness.h), so each gets a fresh EAL.
 */
#include <arpa/inet.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dpdk/dpdk_test.h"
#include "harness.h"
#include "dp/port.h"
#include "port_priv.h"

#define T_IP "10.88.0.1"
#define T_FOREIGN_IP "10.88.0.9"
#define T_BASE 7000

static const uint8_t foreign_mac[6] = {0x02, 0, 0, 0, 0, 0x09};

static uint32_t
ip_of(const char *s)
{
	struct in_addr in;

	T_ASSERT(inet_aton(s, &in));
	return in.s_addr;
}

static char g_rundir[64];
static char g_args[512];

static int
open_ring(unsigned n, struct dp_port **ports)
{
	struct dp_port_cfg cfg = {
		.backend = DP_BACKEND_DPDK,
		.ip = ip_of(T_IP),
		.base_port = T_BASE,
		.n = n,
		.dpdk_args = g_args,
	};

	if (!g_rundir[0]) {
		T_ASSERT_EQ(t_dpdk_rundir(g_rundir, sizeof(g_rundir)), 0);
		t_dpdk_eal_args(g_args, sizeof(g_args), "ring", t_dpdk_cpu(0), "net_ring0");
	}
	return dp_ports_open(&cfg, ports);
}

static void
cleanup(void)
{
	t_dpdk_rundir_rm(g_rundir);
}

/* Polls @p until a datagram arrives (or about a second passes). Return: count. */
static unsigned
poll_rx(struct dp_port *p, struct dp_rx *rx)
{
	for (int i = 0; i < 100000; i++) {
		unsigned n = dp_port_rx_burst(p, rx, DP_BURST_MAX);

		if (n)
			return n;
		dp_port_rx_done(p);
	}
	return 0;
}

/* Sends a hand-made frame into the ring as if it came from the wire. */
static void
inject(const uint8_t *frame, uint32_t len)
{
	struct rte_mempool *mp = rte_mempool_lookup("sp0_pool0");
	struct rte_mbuf *m;

	T_ASSERT(mp != NULL);
	m = rte_pktmbuf_alloc(mp);
	T_ASSERT(m != NULL);
	memcpy(rte_pktmbuf_mtod(m, uint8_t *), frame, len);
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
	T_ASSERT_EQ(rte_eth_tx_burst(0, 0, &m, 1), 1);
}

/* Takes the next frame the port sent out of the ring, bypassing the port. */
static struct rte_mbuf *
sniff(void)
{
	struct rte_mbuf *m = NULL;

	for (int i = 0; i < 1000; i++)
		if (rte_eth_rx_burst(0, 0, &m, 1) == 1)
			return m;
	T_FAIL("no frame in the ring");
}

static void
test_loopback_roundtrip_with_arp(void)
{
	struct dp_port *p;
	struct dp_rx rx[DP_BURST_MAX];
	uint8_t hdr[16];
	uint8_t data[700];
	struct dp_tx t = {.hdr = hdr, .hdr_len = sizeof(hdr), .data = data, .len = sizeof(data)};
	unsigned n;

	T_ASSERT_EQ(open_ring(1, &p), 0);
	T_ASSERT_STREQ(p->ops->name, "dpdk");
	T_ASSERT(dp_port_link_up(p));
	T_ASSERT_EQ(p->max_dgram, 1472);
	T_ASSERT_EQ(p->local.port, T_BASE);
	for (unsigned i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)(0xa0 + i);
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	t.dst.ip = p->local.ip;
	t.dst.port = T_BASE;

	/* Unknown MAC: dropped, counted, and an ARP request goes out. */
	T_ASSERT_EQ(dp_port_tx_burst(p, &t, 1), 0);
	T_ASSERT_EQ(p->st.tx_no_arp, 1);
	T_ASSERT_EQ(p->st.arp_tx, 1);
	/* The request comes back: answered (our IP) and learnt. */
	T_ASSERT_EQ(dp_port_rx_burst(p, rx, DP_BURST_MAX), 0);
	dp_port_rx_done(p);
	T_ASSERT_EQ(p->st.arp_rx, 1);
	T_ASSERT_EQ(p->st.arp_tx, 2);
	T_ASSERT_EQ(dp_port_rx_burst(p, rx, DP_BURST_MAX), 0); /* the reply */
	dp_port_rx_done(p);
	T_ASSERT_EQ(p->st.arp_rx, 2);

	T_ASSERT_EQ(dp_port_tx_burst(p, &t, 1), 1);
	n = poll_rx(p, rx);
	T_ASSERT_EQ(n, 1);
	T_ASSERT_EQ(rx[0].len, sizeof(hdr) + sizeof(data));
	T_ASSERT_MEMEQ(rx[0].data, hdr, sizeof(hdr));
	T_ASSERT_MEMEQ(rx[0].data + sizeof(hdr), data, sizeof(data));
	T_ASSERT_EQ(rx[0].src.ip, p->local.ip);
	T_ASSERT_EQ(rx[0].src.port, T_BASE);
	dp_port_rx_done(p);

	/* Largest and too large. */
	t.hdr_len = 0;
	t.len = p->max_dgram;
	{
		static uint8_t big[2048];

		t.data = big;
		big[0] = 1;
		big[p->max_dgram - 1] = 2;
		T_ASSERT_EQ(dp_port_tx_burst(p, &t, 1), 1);
		n = poll_rx(p, rx);
		T_ASSERT_EQ(n, 1);
		T_ASSERT_EQ(rx[0].len, p->max_dgram);
		T_ASSERT_MEMEQ(rx[0].data, big, p->max_dgram);
		dp_port_rx_done(p);
		t.len = p->max_dgram + 1;
		T_ASSERT_EQ(dp_port_tx_burst(p, &t, 1), 0);
		T_ASSERT_EQ(p->st.tx_dropped, 1);
	}
	T_ASSERT_EQ(p->st.rx_pkts, 2);
	T_ASSERT_EQ(p->st.tx_pkts, 2);
	dp_ports_close(&p, 1);
	cleanup();
}

static void
test_arp_reply_and_udp_frames(void)
{
	struct dp_port *p;
	struct dp_rx rx[DP_BURST_MAX];
	uint8_t frame[128];
	struct dp__frame f;
	struct rte_mbuf *m;
	uint32_t len;
	const char msg[] = "hello from the wire";
	struct dp_tx t = {.data = (const uint8_t *)msg, .len = sizeof(msg)};

	T_ASSERT_EQ(open_ring(1, &p), 0);

	/* A foreign host asks for our IP. */
	len = dp__frame_arp(frame, DP_ARP_REQUEST, foreign_mac, ip_of(T_FOREIGN_IP),
			    (const uint8_t[6]){0}, p->local.ip);
	inject(frame, len);
	T_ASSERT_EQ(dp_port_rx_burst(p, rx, DP_BURST_MAX), 0);
	dp_port_rx_done(p);
	T_ASSERT_EQ(p->st.arp_rx, 1);
	T_ASSERT_EQ(p->st.arp_tx, 1);
	m = sniff();
	T_ASSERT_EQ(dp__frame_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, true, &f),
		    DP__FRAME_ARP);
	T_ASSERT_EQ(f.arp_op, DP_ARP_REPLY);
	T_ASSERT_MEMEQ(f.dst_mac, foreign_mac, 6);
	T_ASSERT_MEMEQ(f.src_mac, p->mac, 6);
	T_ASSERT_MEMEQ(f.arp_sha, p->mac, 6);
	T_ASSERT_EQ(f.arp_spa, p->local.ip);
	T_ASSERT_EQ(f.arp_tpa, ip_of(T_FOREIGN_IP));
	rte_pktmbuf_free(m);

	/* A request for another IP is learnt from but not answered. */
	len = dp__frame_arp(frame, DP_ARP_REQUEST, foreign_mac, ip_of(T_FOREIGN_IP),
			    (const uint8_t[6]){0}, ip_of("10.88.0.77"));
	inject(frame, len);
	T_ASSERT_EQ(dp_port_rx_burst(p, rx, DP_BURST_MAX), 0);
	dp_port_rx_done(p);
	T_ASSERT_EQ(p->st.arp_tx, 1);

	/* The foreign MAC was learnt: UDP goes straight out with correct headers. */
	t.dst.ip = ip_of(T_FOREIGN_IP);
	t.dst.port = 5555;
	T_ASSERT_EQ(dp_port_tx_burst(p, &t, 1), 1);
	m = sniff();
	T_ASSERT_EQ(dp__frame_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, true, &f),
		    DP__FRAME_UDP);
	T_ASSERT_MEMEQ(f.dst_mac, foreign_mac, 6);
	T_ASSERT_MEMEQ(f.src_mac, p->mac, 6);
	T_ASSERT_EQ(f.src_ip, p->local.ip);
	T_ASSERT_EQ(f.dst_ip, ip_of(T_FOREIGN_IP));
	T_ASSERT_EQ(f.src_port, T_BASE);
	T_ASSERT_EQ(f.dst_port, 5555);
	T_ASSERT_EQ(f.payload_len, sizeof(msg));
	T_ASSERT_MEMEQ(f.payload, msg, sizeof(msg));
	rte_pktmbuf_free(m);

	/* A datagram from the foreign host is delivered with its address. */
	memcpy(frame + DP_UDP_HDRS, msg, sizeof(msg));
	dp__frame_udp_hdrs(frame, foreign_mac, p->mac, ip_of(T_FOREIGN_IP), p->local.ip, 5555,
			   T_BASE, sizeof(msg), 1, true);
	inject(frame, DP_UDP_HDRS + sizeof(msg));
	T_ASSERT_EQ(poll_rx(p, rx), 1);
	T_ASSERT_EQ(rx[0].src.ip, ip_of(T_FOREIGN_IP));
	T_ASSERT_EQ(rx[0].src.port, 5555);
	T_ASSERT_EQ(rx[0].len, sizeof(msg));
	T_ASSERT_MEMEQ(rx[0].data, msg, sizeof(msg));
	dp_port_rx_done(p);

	/* Bad UDP checksum, another IP, a port nobody owns: ignored and counted. */
	frame[DP_UDP_HDRS] ^= 0xff;
	inject(frame, DP_UDP_HDRS + sizeof(msg));
	frame[DP_UDP_HDRS] ^= 0xff;
	dp__frame_udp_hdrs(frame, foreign_mac, p->mac, ip_of(T_FOREIGN_IP), ip_of("10.88.0.2"),
			   5555, T_BASE, sizeof(msg), 2, true);
	inject(frame, DP_UDP_HDRS + sizeof(msg));
	dp__frame_udp_hdrs(frame, foreign_mac, p->mac, ip_of(T_FOREIGN_IP), p->local.ip, 5555,
			   T_BASE + 5, sizeof(msg), 3, true);
	inject(frame, DP_UDP_HDRS + sizeof(msg));
	T_ASSERT_EQ(dp_port_rx_burst(p, rx, DP_BURST_MAX), 0);
	dp_port_rx_done(p);
	T_ASSERT_EQ(p->st.rx_ignored, 3);
	dp_ports_close(&p, 1);
	cleanup();
}

static void
test_handoff_two_ports(void)
{
	struct dp_port *p[2];
	struct dp_rx rx[DP_BURST_MAX];
	const char m0[] = "to port one";
	const char m1[] = "to port zero";
	struct dp_tx t0 = {.data = (const uint8_t *)m0, .len = sizeof(m0)};
	struct dp_tx t1 = {.data = (const uint8_t *)m1, .len = sizeof(m1)};
	bool got0 = false;
	bool got1 = false;

	T_ASSERT_EQ(open_ring(2, p), 0);
	T_ASSERT_EQ(p[1]->local.port, T_BASE + 1);
	t0.dst = (struct dp_addr){.ip = p[0]->local.ip, .port = T_BASE + 1};
	t1.dst = (struct dp_addr){.ip = p[0]->local.ip, .port = T_BASE};

	/* One thread drives both ports in turn: ARP first, then the datagrams. */
	for (int i = 0; i < 20000 && !(got0 && got1); i++) {
		if (i % 100 == 0) {
			(void)dp_port_tx_burst(p[0], &t0, 1);
			(void)dp_port_tx_burst(p[1], &t1, 1);
		}
		for (int k = 0; k < 2; k++) {
			unsigned n = dp_port_rx_burst(p[k], rx, DP_BURST_MAX);

			for (unsigned j = 0; j < n; j++) {
				if (k == 1) {
					T_ASSERT_EQ(rx[j].len, sizeof(m0));
					T_ASSERT_MEMEQ(rx[j].data, m0, sizeof(m0));
					T_ASSERT_EQ(rx[j].src.port, T_BASE);
					got1 = true;
				} else {
					T_ASSERT_EQ(rx[j].len, sizeof(m1));
					T_ASSERT_MEMEQ(rx[j].data, m1, sizeof(m1));
					T_ASSERT_EQ(rx[j].src.port, T_BASE + 1);
					got0 = true;
				}
			}
			dp_port_rx_done(p[k]);
		}
	}
	T_ASSERT(got0 && got1);
	/* net_ring0 has one queue: everything arrives on port 0's, port 1's came by ring. */
	T_ASSERT(p[0]->st.rx_handoff > 0);
	T_ASSERT(p[1]->st.arp_rx > 0); /* learnt from ARP passed over by port 0 */
	dp_ports_close(p, 2);
	cleanup();
}

/* Three ports on one queue pair: ports 1 and 2 have no RX queue and share TX queue 0. */
static void
test_ports_without_queue(void)
{
	struct dp_port *p[3];
	struct dp_rx rx[DP_BURST_MAX];
	const char msg[] = "hop";
	bool got[3] = {false, false, false};

	T_ASSERT_EQ(setenv("SPROCKET_DPDK_QUEUES", "1", 1), 0);
	T_ASSERT_EQ(open_ring(3, p), 0);
	for (int i = 0; i < 20000 && !(got[0] && got[1] && got[2]); i++) {
		for (unsigned k = 0; k < 3; k++) {
			/* Port k sends to port (k + 1) % 3. */
			struct dp_tx t = {.data = (const uint8_t *)msg,
					  .len = sizeof(msg),
					  .dst = {.ip = p[0]->local.ip,
						  .port = (uint16_t)(T_BASE + (k + 1) % 3)}};
			unsigned n;

			if (i % 100 == 0)
				(void)dp_port_tx_burst(p[k], &t, 1);
			n = dp_port_rx_burst(p[k], rx, DP_BURST_MAX);
			for (unsigned j = 0; j < n; j++) {
				T_ASSERT_EQ(rx[j].src.port, T_BASE + (k + 2) % 3);
				got[k] = true;
			}
			dp_port_rx_done(p[k]);
		}
	}
	T_ASSERT(got[0] && got[1] && got[2]);
	T_ASSERT(p[0]->st.rx_handoff >= 2);
	T_ASSERT_EQ(p[1]->st.rx_handoff, 0);
	T_ASSERT(p[1]->st.tx_pkts > 0 && p[2]->st.tx_pkts > 0);
	dp_ports_close(p, 3);
	cleanup();
}

static void
test_reopen_and_bad_config(void)
{
	struct dp_port *p;
	struct dp_port_cfg cfg = {.backend = DP_BACKEND_DPDK, .base_port = T_BASE, .n = 1};

	T_ASSERT_EQ(open_ring(1, &p), 0);
	/* The device is taken while ports are open. */
	cfg.ip = ip_of(T_IP);
	cfg.dpdk_args = g_args;
	{
		struct dp_port *q;

		T_ASSERT_EQ(dp_ports_open(&cfg, &q), -EBUSY);
	}
	dp_ports_close(&p, 1);
	/* Same arguments: EAL is reused; the device opens again. */
	T_ASSERT_EQ(open_ring(1, &p), 0);
	T_ASSERT(dp_port_link_up(p));
	dp_ports_close(&p, 1);
	/* Other arguments cannot re-initialise EAL in this process. */
	cfg.dpdk_args = "--no-pci --no-huge --vdev=net_ring1";
	T_ASSERT_EQ(dp_ports_open(&cfg, &p), -EALREADY);
	cfg.dpdk_args = g_args;
	cfg.ip = 0;
	T_ASSERT_EQ(dp_ports_open(&cfg, &p), -EINVAL);
	cleanup();
}

T_MAIN(T_CASE(test_loopback_roundtrip_with_arp), T_CASE(test_arp_reply_and_udp_frames),
       T_CASE(test_handoff_two_ports), T_CASE(test_ports_without_queue),
       T_CASE(test_reopen_and_bad_config))
