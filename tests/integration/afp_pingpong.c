// SPDX-License-Identifier: Apache-2.0
/*
 * afp_pingpong.c - raw round trip of two af_packet ports across a veth pair
 * (no transport): a measuring tool, not a test; sprocket-bench is the real
 * benchmark.
 *
 *   afp_pingpong [round_trips] [size...]      default: 20000 64 1024
 *
 * Builds its own namespaces (netns.h). The pong process lives in namespace B
 * pinned to CPU 1 and echoes every datagram; the ping side lives in A pinned
 * to CPU 0, busy-polls, sends one datagram at a time and records each round
 * trip (CLOCK_MONOTONIC). Prints one line per size: p50/p90/p99/p99.9/max
 * in microseconds. Results on a shared 2-vCPU VM vary run to run.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>

#include "common/clock.h"
#include "dp/port.h"
#include "harness.h"
#include "integration/netns.h"

#define PING_PORT 9100
#define PONG_PORT 9200
#define QUIT_LEN 3

static struct t_netns g_ns;

static void
pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		perror("sched_setaffinity");
}

static struct dp_port *
open_side(int side, uint16_t port, struct dp_port **out)
{
	struct in_addr a;
	struct dp_port_cfg cfg = {
		.backend = DP_BACKEND_AF_PACKET,
		.base_port = port,
		.n = 1,
		.iface = g_ns.ifn[side],
		.icmp_guard = true,
	};

	inet_pton(AF_INET, g_ns.ip[side], &a);
	cfg.ip = a.s_addr;
	if (t_netns_enter(&g_ns, side) < 0 || dp_ports_open(&cfg, out) < 0) {
		fprintf(stderr, "cannot open the af_packet port in namespace %d\n", side);
		exit(1);
	}
	return out[0];
}

static int
pong(void)
{
	struct dp_port *pp[1];
	struct dp_port *p;

	pin(1);
	p = open_side(1, PONG_PORT, pp);
	for (;;) {
		struct dp_rx rx[DP_BURST_MAX];
		struct dp_tx tx[DP_BURST_MAX];
		unsigned n = dp_port_rx_burst(p, rx, DP_BURST_MAX);
		bool quit = false;

		for (unsigned i = 0; i < n; i++) {
			tx[i] = (struct dp_tx){
				.data = rx[i].data, .len = rx[i].len, .dst = rx[i].src};
			quit = quit || rx[i].len == QUIT_LEN; /* sizes are >= 4 */
		}
		if (n)
			dp_port_tx_burst(p, tx, n);
		dp_port_rx_done(p);
		if (quit)
			break;
	}
	dp_ports_close(pp, 1);
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Sends @tx (whose first 4 bytes get a sequence number) and waits for its
 * echo; late echoes of earlier round trips are skipped.
 * Return: the round trip in ns, or 0 when nothing came back within 100 ms.
 */
static uint64_t
round_trip(struct dp_port *p, const struct dp_tx *tx, uint8_t *buf)
{
	static uint32_t seq;
	uint64_t t0;
	uint64_t t1;

	seq++;
	memcpy(buf, &seq, sizeof(seq));
	t0 = clk_mono_ns();
	dp_port_tx_burst(p, tx, 1);
	for (;;) {
		struct dp_rx rx[DP_BURST_MAX];
		unsigned n = dp_port_rx_burst(p, rx, DP_BURST_MAX);
		bool mine = false;

		t1 = clk_mono_ns();
		for (unsigned i = 0; i < n; i++)
			mine = mine ||
			       (rx[i].len >= sizeof(seq) && memcmp(rx[i].data, &seq, 4) == 0);
		dp_port_rx_done(p);
		if (mine)
			return t1 - t0;
		if (t1 - t0 > 100000000ull)
			return 0;
	}
}

static void
ping(unsigned count, const unsigned *sizes, unsigned nsizes)
{
	static uint8_t buf[1500];
	struct dp_port *pp[1];
	struct dp_port *p;
	struct dp_tx tx = {.data = buf};
	uint64_t *lat = calloc(count, sizeof(*lat));
	struct in_addr b;

	pin(0);
	p = open_side(0, PING_PORT, pp);
	inet_pton(AF_INET, g_ns.ip[1], &b);
	tx.dst.ip = b.s_addr;
	tx.dst.port = PONG_PORT;
	/* Warm-up: ARP, caches, the pong's first pass. */
	tx.len = 64;
	for (int i = 0; i < 2000; i++)
		(void)round_trip(p, &tx, buf);
	for (unsigned s = 0; s < nsizes; s++) {
		unsigned lost = 0;
		unsigned n = 0;

		tx.len = sizes[s] > p->max_dgram ? p->max_dgram : sizes[s];
		if (tx.len < 4)
			tx.len = 4; /* room for the sequence number */
		for (unsigned i = 0; i < count; i++) {
			uint64_t ns = round_trip(p, &tx, buf);

			if (ns)
				lat[n++] = ns;
			else
				lost++;
		}
		qsort(lat, n, sizeof(*lat), cmp_u64);
		if (n == 0) {
			printf("size %u: no replies\n", tx.len);
			continue;
		}
		printf("af_packet raw ping-pong veth size=%u round_trips=%u lost=%u "
		       "p50=%.1fus p90=%.1fus p99=%.1fus p99.9=%.1fus max=%.1fus\n",
		       tx.len, n, lost, lat[n / 2] / 1e3, lat[n * 9 / 10] / 1e3,
		       lat[n * 99 / 100] / 1e3, lat[n * 999 / 1000] / 1e3, lat[n - 1] / 1e3);
		fflush(stdout);
	}
	tx.len = QUIT_LEN;
	for (int i = 0; i < 10; i++)
		dp_port_tx_burst(p, &tx, 1);
	free(lat);
	dp_ports_close(pp, 1);
}

int
main(int argc, char **argv)
{
	unsigned sizes[16] = {64, 1024};
	unsigned nsizes = 2;
	unsigned count = argc > 1 ? (unsigned)atoi(argv[1]) : 20000;
	pid_t pid;
	int st = 0;

	if (argc > 2) {
		nsizes = 0;
		for (int i = 2; i < argc && nsizes < ARRAY_SIZE(sizes); i++)
			sizes[nsizes++] = (unsigned)atoi(argv[i]);
	}
	if (count == 0)
		count = 1;
	if (t_netns_create(&g_ns) < 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		_exit(pong());
	usleep(100000); /* the pong opens its port */
	ping(count, sizes, nsizes);
	for (int i = 0; i < 200 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(10000);
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL); /* the quit datagrams were lost */
		waitpid(pid, &st, 0);
	}
	t_netns_destroy();
	return 0;
}
