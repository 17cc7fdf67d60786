// SPDX-License-Identifier: Apache-2.0
/*
 * dpdk_peer.c - a small DPDK port program for the multi-process tests and
 * the raw ping-pong measurement. It talks only through dp/port.h, so it
 * exercises the backend exactly as the broker and the client do.
 *
 *   dpdk_peer MODE --vdev=SPEC --cpu=N --ip=A --port=P [--peer-ip=B]
 *             [--peer-port=Q] [--size=S] [--count=C] [--busy] [--tag=T]
 *
 * MODE echo:   answer every datagram with the same bytes, until SIGTERM.
 * MODE sizes:  send every size 1..max_dgram to the peer, check each echo.
 * MODE ping:   RTT of --count round trips of --size bytes (after a warm-up);
 *              prints p50/p90/p99/p99.9/max in ns.
 * MODE stream: keep 32 datagrams in flight to the peer forever (the victim
 *              of the kill test); exits 0 after --count echoes if given.
 *
 * Each mode prints "ready MAX_DGRAM" on stdout once the port is open (echo)
 * or once the first echo came back (the others), so a driver can time kills.
 * EAL runs with the test flags from dpdk_test.h; RUNTIME_DIRECTORY comes from
 * the environment (the driver's private directory).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "dp/port.h"
#include "dpdk/dpdk_test.h"

#define PEER_TIMEOUT_NS 200000000ull
#define PEER_WARMUP 5000u

static volatile sig_atomic_t g_stop;

struct opts {
	const char *mode;
	const char *vdev;
	const char *tag;
	int cpu;
	uint32_t ip;
	uint16_t port;
	uint32_t peer_ip;
	uint16_t peer_port;
	uint32_t size;
	uint64_t count;
	unsigned nports; /* echo: ports base..base+n-1, all polled by this thread */
	bool busy;
};

static void
on_term(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int
parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->tag = "peer";
	o->size = 64;
	o->nports = 1;
	if (argc < 2)
		return -1;
	o->mode = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		struct in_addr in;

		if (strncmp(a, "--vdev=", 7) == 0)
			o->vdev = a + 7;
		else if (strncmp(a, "--tag=", 6) == 0)
			o->tag = a + 6;
		else if (strncmp(a, "--cpu=", 6) == 0)
			o->cpu = atoi(a + 6);
		else if (strncmp(a, "--ip=", 5) == 0 && inet_aton(a + 5, &in))
			o->ip = in.s_addr;
		else if (strncmp(a, "--peer-ip=", 10) == 0 && inet_aton(a + 10, &in))
			o->peer_ip = in.s_addr;
		else if (strncmp(a, "--port=", 7) == 0)
			o->port = (uint16_t)atoi(a + 7);
		else if (strncmp(a, "--peer-port=", 12) == 0)
			o->peer_port = (uint16_t)atoi(a + 12);
		else if (strncmp(a, "--size=", 7) == 0)
			o->size = (uint32_t)atoi(a + 7);
		else if (strncmp(a, "--count=", 8) == 0)
			o->count = strtoull(a + 8, NULL, 10);
		else if (strncmp(a, "--n=", 4) == 0)
			o->nports = (unsigned)atoi(a + 4);
		else if (strcmp(a, "--busy") == 0)
			o->busy = true;
		else
			return -1;
	}
	return o->vdev && o->ip && o->port ? 0 : -1;
}

/* Busy-polling owners still call wait(0) while the link is down: that is where it re-arms. */
static void
idle(struct dp_port *p, bool busy)
{
	if (!busy)
		dp_port_wait(p, 50);
	else if (!dp_port_link_up(p))
		dp_port_wait(p, 0);
}

static int
run_echo(struct dp_port **ports, const struct opts *o)
{
	struct dp_rx rx[DP_BURST_MAX];
	struct dp_tx tx[DP_BURST_MAX];

	while (!g_stop) {
		unsigned total = 0;

		for (unsigned k = 0; k < o->nports; k++) {
			struct dp_port *p = ports[k];
			unsigned n = dp_port_rx_burst(p, rx, DP_BURST_MAX);

			for (unsigned i = 0; i < n; i++)
				tx[i] = (struct dp_tx){
					.data = rx[i].data, .len = rx[i].len, .dst = rx[i].src};
			if (n)
				(void)dp_port_tx_burst(p, tx, n);
			dp_port_rx_done(p);
			total += n;
		}
		if (total == 0)
			idle(ports[0], o->busy);
	}
	return 0;
}

/* Sends @len bytes of @buf and waits for the same bytes back. Return: 0 or -1. */
static int
round_trip(struct dp_port *p, const struct opts *o, const uint8_t *buf, uint32_t len,
	   uint64_t *lost)
{
	struct dp_tx t = {.data = buf, .len = len, .dst = {.ip = o->peer_ip, .port = o->peer_port}};
	struct dp_rx rx[DP_BURST_MAX];

	for (int attempt = 0; attempt < 50 && !g_stop; attempt++) {
		uint64_t start = clk_mono_ns();

		(void)dp_port_tx_burst(p, &t, 1);
		while (clk_mono_ns() - start < PEER_TIMEOUT_NS && !g_stop) {
			unsigned n = dp_port_rx_burst(p, rx, DP_BURST_MAX);
			bool ok = false;

			for (unsigned i = 0; i < n; i++) {
				if (rx[i].len == len && memcmp(rx[i].data, buf, len) == 0 &&
				    rx[i].src.ip == o->peer_ip && rx[i].src.port == o->peer_port)
					ok = true;
			}
			dp_port_rx_done(p);
			if (ok)
				return 0;
			if (n == 0)
				idle(p, o->busy);
		}
		++*lost;
	}
	return -1;
}

static int
run_sizes(struct dp_port *p, const struct opts *o)
{
	uint8_t *buf = malloc(p->max_dgram);
	uint64_t lost = 0;

	if (!buf)
		return 1;
	for (uint32_t s = 1; s <= p->max_dgram; s++) {
		for (uint32_t j = 0; j < s; j++)
			buf[j] = (uint8_t)(s * 7u + j);
		if (round_trip(p, o, buf, s, &lost) != 0) {
			fprintf(stderr, "dpdk_peer: no correct echo for size %u\n", s);
			free(buf);
			return 1;
		}
		if (s == 1) {
			printf("ready %u\n", p->max_dgram);
			fflush(stdout);
		}
	}
	printf("ok sizes 1..%u lost=%" PRIu64 "\n", p->max_dgram, lost);
	free(buf);
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
run_ping(struct dp_port *p, const struct opts *o)
{
	uint64_t n = o->count ? o->count : 50000;
	uint64_t *samples = calloc(n, sizeof(*samples));
	uint8_t *buf = calloc(1, SP_MAX(o->size, 8u));
	uint64_t lost = 0;
	uint64_t got = 0;

	if (!samples || !buf || o->size > p->max_dgram || o->size < 8) {
		fprintf(stderr, "dpdk_peer: bad --size (8..%u) or no memory\n", p->max_dgram);
		return 1;
	}
	clk_init();
	for (uint64_t i = 0; i < PEER_WARMUP + n && !g_stop; i++) {
		uint64_t t0;
		uint64_t t1;

		memcpy(buf, &i, 8);
		t0 = clk_tsc();
		if (round_trip(p, o, buf, o->size, &lost) != 0)
			break;
		t1 = clk_tsc();
		if (i == 0) {
			printf("ready %u\n", p->max_dgram);
			fflush(stdout);
		}
		if (i >= PEER_WARMUP)
			samples[got++] = clk_tsc_to_ns(t1 - t0);
	}
	if (got == 0)
		return 1;
	qsort(samples, got, sizeof(*samples), cmp_u64);
	printf("rtt backend=dpdk size=%u count=%" PRIu64 " min_ns=%" PRIu64 " p50_ns=%" PRIu64
	       " p90_ns=%" PRIu64 " p99_ns=%" PRIu64 " p999_ns=%" PRIu64 " max_ns=%" PRIu64
	       " lost=%" PRIu64 "\n",
	       o->size, got, samples[0], samples[got / 2], samples[got * 9 / 10],
	       samples[got * 99 / 100], samples[got * 999 / 1000], samples[got - 1], lost);
	free(samples);
	free(buf);
	return got == n ? 0 : 1;
}

static int
run_stream(struct dp_port *p, const struct opts *o)
{
	uint8_t buf[256];
	struct dp_tx tx[DP_BURST_MAX];
	struct dp_rx rx[DP_BURST_MAX];
	uint64_t echoes = 0;
	uint64_t last_tx = 0;
	bool ready = false;

	memset(buf, 0x5a, sizeof(buf));
	for (unsigned i = 0; i < DP_BURST_MAX; i++)
		tx[i] = (struct dp_tx){.data = buf,
				       .len = (uint32_t)(64 + i * 6),
				       .dst = {.ip = o->peer_ip, .port = o->peer_port}};
	while (!g_stop) {
		uint64_t now = clk_mono_ns();
		unsigned n;

		/* Keep the pipe full; re-prime after a quiet 10 ms (ARP, losses). */
		if (now - last_tx > 10000000ull) {
			(void)dp_port_tx_burst(p, tx, DP_BURST_MAX);
			last_tx = now;
		}
		n = dp_port_rx_burst(p, rx, DP_BURST_MAX);
		if (n) {
			(void)dp_port_tx_burst(p, tx, n);
			last_tx = now;
		}
		dp_port_rx_done(p);
		echoes += n;
		if (n && !ready) {
			ready = true;
			printf("ready %u\n", p->max_dgram);
			fflush(stdout);
		}
		if (o->count && echoes >= o->count)
			break;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct dp_port_cfg cfg;
	struct dp_port *ports[DP_PORTS_MAX];
	struct dp_port *p = NULL;
	char args[512];
	int rc;

	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: dpdk_peer echo|sizes|ping|stream --vdev=SPEC --cpu=N "
				"--ip=A --port=P [--peer-ip=B --peer-port=Q --size=S --count=C "
				"--busy --tag=T]\n");
		return 2;
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGPIPE, SIG_IGN);
	t_dpdk_eal_args(args, sizeof(args), o.tag, o.cpu, o.vdev);
	memset(&cfg, 0, sizeof(cfg));
	cfg.backend = DP_BACKEND_DPDK;
	cfg.ip = o.ip;
	cfg.base_port = o.port;
	cfg.n = strcmp(o.mode, "echo") == 0 ? SP_MIN(SP_MAX(o.nports, 1u), (unsigned)DP_PORTS_MAX)
					    : 1;
	o.nports = cfg.n;
	cfg.dpdk_args = args;
	rc = dp_ports_open(&cfg, ports);
	if (rc) {
		fprintf(stderr, "dpdk_peer: dp_ports_open: %s\n", strerror(-rc));
		return 1;
	}
	p = ports[0];
	if (strcmp(o.mode, "echo") == 0) {
		printf("ready %u\n", p->max_dgram);
		fflush(stdout);
		rc = run_echo(ports, &o);
	} else if (strcmp(o.mode, "sizes") == 0) {
		rc = run_sizes(p, &o);
	} else if (strcmp(o.mode, "ping") == 0) {
		rc = run_ping(p, &o);
	} else if (strcmp(o.mode, "stream") == 0) {
		rc = run_stream(p, &o);
	} else {
		fprintf(stderr, "dpdk_peer: unknown mode %s\n", o.mode);
		rc = 2;
	}
	fprintf(stderr,
		"dpdk_peer %s: rx=%" PRIu64 " tx=%" PRIu64 " ignored=%" PRIu64
		" tx_dropped=%" PRIu64 " no_arp=%" PRIu64 " arp_rx=%" PRIu64 " arp_tx=%" PRIu64
		" link_downs=%" PRIu64 "\n",
		o.mode, p->st.rx_pkts, p->st.tx_pkts, p->st.rx_ignored, p->st.tx_dropped,
		p->st.tx_no_arp, p->st.arp_rx, p->st.arp_tx, p->st.link_downs);
	for (unsigned k = 1; k < cfg.n; k++)
		fprintf(stderr,
			"dpdk_peer %s port %u: rx=%" PRIu64 " tx=%" PRIu64 " handoff=%" PRIu64 "\n",
			o.mode, k, ports[k]->st.rx_pkts, ports[k]->st.tx_pkts,
			ports[k]->st.rx_handoff);
	dp_ports_close(ports, cfg.n);
	return rc;
}
