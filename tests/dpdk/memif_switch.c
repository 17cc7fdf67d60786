// SPDX-License-Identifier: Apache-2.0
/*
 * memif_switch.c - a learning Ethernet switch between DPDK ports, for tests
 * that need more than two dpdk processes on one segment.
 *
 *   memif_switch EAL-ARGS (one --vdev per port)
 *
 * net_memif is point to point: one interface joins exactly two processes.
 * A NIC host reaches every broker through one port and a switch; this is
 * that switch for memif. Each port is one --vdev (role=client towards a
 * broker's role=server socket, role=server towards a client). A frame's
 * source MAC teaches which port reaches it; a frame to a known unicast MAC
 * goes out of that port only, anything else (ARP requests, unknown MACs)
 * out of every other port. So ARP, the dataplane's UDP and its checks work
 * as they do behind a real switch. The ports must have distinct MACs
 * (memif's mac= argument).
 *
 * It polls, and sleeps 50 us after 1,000 empty rounds, so it does not hold
 * a CPU of a small test machine. Prints "ready N" (ports) once running;
 * SIGTERM or SIGINT stops it, with the counts on stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#define SW_PORTS_MAX 8
#define SW_MACS_MAX 64
#define SW_BURST 32
#define SW_RING 1024
#define SW_IDLE_ROUNDS 1000
#define SW_IDLE_SLEEP_US 50

static volatile sig_atomic_t g_stop;

struct sw_mac {
	struct rte_ether_addr addr;
	uint16_t port;
};

struct sw {
	uint16_t n_ports;
	uint16_t ports[SW_PORTS_MAX];
	struct sw_mac macs[SW_MACS_MAX];
	unsigned n_macs;
	uint64_t fwd;
	uint64_t flood;
	uint64_t drop;
};

static void
on_stop(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int
port_up(uint16_t pid, struct rte_mempool *mp)
{
	struct rte_eth_conf conf;
	int rc;

	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_configure(pid, 1, 1, &conf);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(pid, 0, SW_RING, (unsigned)rte_eth_dev_socket_id(pid),
					    NULL, mp);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(pid, 0, SW_RING, (unsigned)rte_eth_dev_socket_id(pid),
					    NULL);
	/* A role=client memif starts only once its server listens: wait 30 s. */
	for (int t = 0; rc == 0 || rc == -EPERM; t++) {
		rc = rte_eth_dev_start(pid);
		if (rc != -EPERM || t == 3000)
			break;
		usleep(10000);
	}
	if (rc != 0)
		fprintf(stderr, "memif_switch: port %u: %s\n", pid, rte_strerror(-rc));
	return rc;
}

/* The port index (into sw->ports) that reaches @a, or -1. */
static int
mac_find(const struct sw *sw, const struct rte_ether_addr *a)
{
	for (unsigned i = 0; i < sw->n_macs; i++) {
		if (rte_is_same_ether_addr(&sw->macs[i].addr, a))
			return sw->macs[i].port;
	}
	return -1;
}

static void
mac_learn(struct sw *sw, const struct rte_ether_addr *a, uint16_t port)
{
	unsigned i;

	if (!rte_is_unicast_ether_addr(a))
		return;
	for (i = 0; i < sw->n_macs; i++) {
		if (rte_is_same_ether_addr(&sw->macs[i].addr, a)) {
			sw->macs[i].port = port; /* a host moved */
			return;
		}
	}
	if (sw->n_macs < SW_MACS_MAX) {
		sw->macs[sw->n_macs].addr = *a;
		sw->macs[sw->n_macs++].port = port;
	}
}

static void
send_one(struct sw *sw, uint16_t out, struct rte_mbuf *m)
{
	if (rte_eth_tx_burst(sw->ports[out], 0, &m, 1) != 1) {
		rte_pktmbuf_free(m);
		sw->drop++;
	}
}

static void
forward(struct sw *sw, uint16_t in, struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eh;
	int out;

	if (m->data_len < sizeof(*eh)) {
		rte_pktmbuf_free(m);
		sw->drop++;
		return;
	}
	eh = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	mac_learn(sw, &eh->src_addr, in);
	out = rte_is_unicast_ether_addr(&eh->dst_addr) ? mac_find(sw, &eh->dst_addr) : -1;
	if (out == (int)in) {
		rte_pktmbuf_free(m); /* both ends behind the same port */
		sw->drop++;
		return;
	}
	if (out >= 0) {
		sw->fwd++;
		send_one(sw, (uint16_t)out, m);
		return;
	}
	/* Flood: every other port (main() ensures two or more) gets a reference. */
	sw->flood++;
	rte_mbuf_refcnt_update(m, (int16_t)(sw->n_ports - 2));
	for (uint16_t p = 0; p < sw->n_ports; p++) {
		if (p != in)
			send_one(sw, p, m);
	}
}

int
main(int argc, char **argv)
{
	struct rte_mbuf *pkts[SW_BURST];
	struct rte_mempool *mp;
	struct sw sw;
	unsigned idle = 0;
	uint16_t pid;
	int rc;

	memset(&sw, 0, sizeof(sw));
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		fprintf(stderr, "memif_switch: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	mp = rte_pktmbuf_pool_create("sw_pool", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				     (int)rte_socket_id());
	if (mp == NULL) {
		fprintf(stderr, "memif_switch: no mbuf pool: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	RTE_ETH_FOREACH_DEV(pid)
	{
		if (sw.n_ports == SW_PORTS_MAX) {
			fprintf(stderr, "memif_switch: at most %d ports\n", SW_PORTS_MAX);
			return 2;
		}
		if (port_up(pid, mp) != 0)
			return 1;
		sw.ports[sw.n_ports++] = pid;
	}
	if (sw.n_ports < 2) {
		fprintf(stderr, "memif_switch: needs two ports or more, got %u\n", sw.n_ports);
		return 2;
	}
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	printf("ready %u\n", sw.n_ports);
	fflush(stdout);
	while (!g_stop) {
		bool got = false;

		for (uint16_t p = 0; p < sw.n_ports; p++) {
			uint16_t n = rte_eth_rx_burst(sw.ports[p], 0, pkts, SW_BURST);

			for (uint16_t k = 0; k < n; k++)
				forward(&sw, p, pkts[k]);
			got |= n > 0;
		}
		if (got) {
			idle = 0;
		} else if (++idle >= SW_IDLE_ROUNDS) {
			usleep(SW_IDLE_SLEEP_US);
			idle = SW_IDLE_ROUNDS - 10; /* after a sleep, a few polls before the next */
		}
	}
	fprintf(stderr,
		"memif_switch: %" PRIu64 " forwarded, %" PRIu64 " flooded, %" PRIu64
		" dropped, %u MACs\n",
		sw.fwd, sw.flood, sw.drop, sw.n_macs);
	RTE_ETH_FOREACH_DEV(pid)
	{
		rte_eth_dev_stop(pid);
		rte_eth_dev_close(pid);
	}
	rte_mempool_free(mp);
	rte_eal_cleanup();
	return 0;
}
