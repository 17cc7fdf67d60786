// SPDX-License-Identifier: Apache-2.0
/*
 * test_afp.c - the af_packet port on a veth pair between two network
 * namespaces this test creates (and always deletes).
 *
 * One thread drives both ends: it opens each side's ports after setns()
 * into that side's namespace (sockets keep the namespace they were created
 * in), then pumps every port in one loop, so no timing is asserted, only
 * delivery, addresses, ARP behaviour, steering and the kernel's ICMP and
 * UDP counters. Skips (77) without root / CAP_NET_RAW.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "dp/port.h"
#include "harness.h"
#include "integration/netns.h"

#define A_PORT 9100
#define B_PORT 9200
#define K_PORT 9300
#define MAXQ 64

static struct t_netns g_ns;
static unsigned g_ring_frames; /* 0: the backend's default */

/* A port under test and what it received (copied out of the ring). */
struct tport {
	struct dp_port *p;
	unsigned nq;
	struct {
		uint8_t data[9000];
		uint32_t len;
		struct dp_addr src;
	} q[MAXQ];
};

static uint32_t
ip_of(const char *s)
{
	struct in_addr a;

	T_ASSERT(inet_pton(AF_INET, s, &a) == 1);
	return a.s_addr;
}

static struct dp_port *
open_ports(int side, const char *ip, uint16_t base, unsigned n, bool guard, struct dp_port **out)
{
	struct dp_port_cfg cfg = {
		.backend = DP_BACKEND_AF_PACKET,
		.ip = ip ? ip_of(ip) : 0,
		.base_port = base,
		.n = n,
		.iface = g_ns.ifn[side],
		.icmp_guard = guard,
		.ring_frames = g_ring_frames,
	};
	int rc;

	T_ASSERT_EQ(t_netns_enter(&g_ns, side), 0);
	rc = dp_ports_open(&cfg, out);
	T_ASSERT_EQ(rc, 0);
	return out[0];
}

/* One pass over every port: queue what arrived, release the frames. */
static void
pump(struct tport **ps, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct tport *t = ps[i];
		struct dp_rx rx[DP_BURST_MAX];
		unsigned got = dp_port_rx_burst(t->p, rx, DP_BURST_MAX);

		for (unsigned k = 0; k < got; k++) {
			T_ASSERT(t->nq < MAXQ);
			T_ASSERT(rx[k].len <= sizeof(t->q[0].data));
			memcpy(t->q[t->nq].data, rx[k].data, rx[k].len);
			t->q[t->nq].len = rx[k].len;
			t->q[t->nq].src = rx[k].src;
			t->nq++;
		}
		dp_port_rx_done(t->p);
	}
}

/* Pumps until @want has @count datagrams or @ms pass. Return: whether it got them. */
static bool
pump_until(struct tport **ps, unsigned n, struct tport *want, unsigned count, unsigned ms)
{
	uint64_t end = clk_mono_ns() + (uint64_t)ms * 1000000;

	while (want->nq < count && clk_mono_ns() < end) {
		pump(ps, n);
		if (want->nq < count)
			usleep(100);
	}
	return want->nq >= count;
}

static void
fill(uint8_t *b, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(i * 7 + seed);
}

static unsigned
send1(struct dp_port *p, const uint8_t *buf, uint32_t len, uint32_t hdr_len, uint32_t ip,
      uint16_t port)
{
	struct dp_tx tx = {
		.hdr = hdr_len ? buf : NULL,
		.hdr_len = hdr_len,
		.data = buf + hdr_len,
		.len = len - hdr_len,
		.dst = {.ip = ip, .port = port},
	};

	return dp_port_tx_burst(p, &tx, 1);
}

/* Sends until the datagram arrives (the first sends may wait for ARP). */
static void
deliver(struct tport **ps, unsigned n, struct tport *from, struct tport *to, const uint8_t *buf,
	uint32_t len)
{
	unsigned before = to->nq;

	for (int tries = 0; tries < 40; tries++) {
		send1(from->p, buf, len, len >= 16 ? 7 : 0, to->p->local.ip, to->p->local.port);
		if (pump_until(ps, n, to, before + 1, 100))
			return;
	}
	T_FAIL("datagram of %u bytes from port %u never reached port %u", len, from->p->local.port,
	       to->p->local.port);
}

/* Reads one counter of /proc/net/snmp in the calling thread's namespace. */
static long long
snmp(const char *proto, const char *field)
{
	FILE *f = fopen("/proc/thread-self/net/snmp", "re");
	char hdr[1024];
	char val[1024];
	long long v = -1;

	T_ASSERT(f != NULL);
	while (fgets(hdr, sizeof(hdr), f) && fgets(val, sizeof(val), f)) {
		char *sh;
		char *sv;
		char *h;
		char *x;

		if (strncmp(hdr, proto, strlen(proto)) != 0 || hdr[strlen(proto)] != ':')
			continue;
		h = strtok_r(hdr, " \n", &sh);
		x = strtok_r(val, " \n", &sv);
		while ((h = strtok_r(NULL, " \n", &sh)) && (x = strtok_r(NULL, " \n", &sv))) {
			if (strcmp(h, field) == 0) {
				v = atoll(x);
				break;
			}
		}
		break;
	}
	fclose(f);
	T_ASSERT(v >= 0);
	return v;
}

static int
kernel_udp(int side, const char *ip, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd;

	T_ASSERT_EQ(t_netns_enter(&g_ns, side), 0);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0);
	sa.sin_addr.s_addr = ip_of(ip);
	T_ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* 1 B, 64 B, 1 KiB and max_dgram both ways; ARP from a cold cache on A only. */
static void
test_sizes_both_ways(void)
{
	static uint8_t buf[9000];
	static struct tport a;
	static struct tport b;
	struct tport *ps[] = {&a, &b};
	struct dp_port *pa[1];
	struct dp_port *pb[1];

	a.p = open_ports(0, NULL, A_PORT, 1, true, pa); /* ip from the interface */
	b.p = open_ports(1, g_ns.ip[1], B_PORT, 1, true, pb);
	T_ASSERT_EQ(a.p->local.ip, ip_of(g_ns.ip[0]));
	T_ASSERT_EQ(a.p->max_dgram, 1500 - 28);
	T_ASSERT_EQ(b.p->max_dgram, 1500 - 28);
	T_ASSERT(dp_port_link_up(a.p) && dp_port_link_up(b.p));

	const uint32_t sizes[] = {1, 64, 1024, a.p->max_dgram};

	for (unsigned s = 0; s < ARRAY_SIZE(sizes); s++) {
		uint32_t len = sizes[s];

		fill(buf, len, s);
		deliver(ps, 2, &a, &b, buf, len);
		T_ASSERT_EQ(b.q[b.nq - 1].len, len);
		T_ASSERT_MEMEQ(b.q[b.nq - 1].data, buf, len);
		T_ASSERT_EQ(b.q[b.nq - 1].src.ip, a.p->local.ip);
		T_ASSERT_EQ(b.q[b.nq - 1].src.port, A_PORT);

		fill(buf, len, s + 100);
		T_ASSERT_EQ(send1(b.p, buf, len, len >= 16 ? 9 : 0, a.p->local.ip, A_PORT), 1);
		T_ASSERT(pump_until(ps, 2, &a, a.nq + 1, 2000));
		T_ASSERT_EQ(a.q[a.nq - 1].len, len);
		T_ASSERT_MEMEQ(a.q[a.nq - 1].data, buf, len);
		T_ASSERT_EQ(a.q[a.nq - 1].src.ip, b.p->local.ip);
		T_ASSERT_EQ(a.q[a.nq - 1].src.port, B_PORT);
	}
	/* A asked (cold cache); the kernel on B answered, so B never sent ARP. */
	T_ASSERT(a.p->st.tx_no_arp >= 1);
	T_ASSERT(a.p->st.arp_tx >= 1);
	T_ASSERT(a.p->st.arp_rx >= 1);
	/* B learnt A's MAC from the datagram itself. */
	T_ASSERT_EQ(b.p->st.tx_no_arp, 0);
	T_ASSERT_EQ(b.p->st.arp_tx, 0);
	T_ASSERT_EQ(b.p->st.tx_pkts, ARRAY_SIZE(sizes));
	T_ASSERT(b.p->st.rx_pkts >= ARRAY_SIZE(sizes));

	/* One byte over max_dgram is dropped and counted, not sent. */
	uint64_t drops = a.p->st.tx_dropped;

	send1(a.p, buf, a.p->max_dgram + 1, 0, b.p->local.ip, B_PORT);
	T_ASSERT_EQ(a.p->st.tx_dropped, drops + 1);

	dp_ports_close(pa, 1);
	dp_ports_close(pb, 1);
}

/* n = 2 on one interface: each port gets only its own destination port. */
static void
test_two_ports_steering(void)
{
	static uint8_t buf[64];
	static struct tport a;
	static struct tport b0;
	static struct tport b1;
	struct tport *ps[] = {&a, &b0, &b1};
	struct dp_port *pa[1];
	struct dp_port *pb[2];
	const int rounds = 20;

	a.p = open_ports(0, g_ns.ip[0], A_PORT, 1, true, pa);
	open_ports(1, g_ns.ip[1], B_PORT, 2, true, pb);
	b0.p = pb[0];
	b1.p = pb[1];
	T_ASSERT_EQ(b0.p->local.port, B_PORT);
	T_ASSERT_EQ(b1.p->local.port, B_PORT + 1);

	/* Resolve ARP once, then send both ways without retries. */
	buf[0] = 0xee;
	deliver(ps, 3, &a, &b0, buf, 1);
	b0.nq = 0;
	for (int r = 0; r < rounds; r++) {
		buf[0] = 0;
		buf[1] = (uint8_t)r;
		T_ASSERT_EQ(send1(a.p, buf, 2, 0, b0.p->local.ip, B_PORT), 1);
		buf[0] = 1;
		T_ASSERT_EQ(send1(a.p, buf, 2, 0, b1.p->local.ip, B_PORT + 1), 1);
		pump(ps, 3);
	}
	T_ASSERT(pump_until(ps, 3, &b0, rounds, 2000));
	T_ASSERT(pump_until(ps, 3, &b1, rounds, 2000));
	pump(ps, 3);
	T_ASSERT_EQ(b0.nq, rounds);
	T_ASSERT_EQ(b1.nq, rounds);
	for (int r = 0; r < rounds; r++) {
		T_ASSERT_EQ(b0.q[r].data[0], 0);
		T_ASSERT_EQ(b1.q[r].data[0], 1);
		T_ASSERT_EQ(b0.q[r].data[1], r);
		T_ASSERT_EQ(b1.q[r].data[1], r);
	}
	/* Each reply leaves from its own port. */
	T_ASSERT_EQ(send1(b1.p, buf, 2, 0, a.p->local.ip, A_PORT), 1);
	T_ASSERT(pump_until(ps, 3, &a, 1, 2000));
	T_ASSERT_EQ(a.q[0].src.port, B_PORT + 1);

	dp_ports_close(pa, 1);
	dp_ports_close(pb, 2);
}

/*
 * Views stay valid until rx_done(), across rx_burst() calls, with an ARP
 * frame (not handed out) between held ones; then the ring keeps working.
 */
static void
test_rx_views_held_until_done(void)
{
	static uint8_t buf[256];
	static struct tport a;
	static struct tport b;
	struct tport *ps[] = {&a, &b};
	struct dp_port *pa[1];
	struct dp_port *pb[1];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(B_PORT)};
	struct dp_rx rx[4];
	unsigned got = 0;
	uint64_t end;
	int k;

	a.p = open_ports(0, g_ns.ip[0], A_PORT, 1, true, pa);
	b.p = open_ports(1, g_ns.ip[1], B_PORT, 1, true, pb);
	deliver(ps, 2, &a, &b, buf, 1); /* A's port learns B's MAC */
	k = kernel_udp(0, g_ns.ip[0], K_PORT);
	to.sin_addr.s_addr = b.p->local.ip;
	/* d1 from A's port, then the kernel of A asks ARP for B and sends d2, then d3. */
	fill(buf, 100, 1);
	T_ASSERT_EQ(send1(a.p, buf, 100, 0, b.p->local.ip, B_PORT), 1);
	T_ASSERT_EQ(t_sh("ip -n %s neigh flush dev %s", g_ns.ns[0], g_ns.ifn[0]), 0);
	fill(buf, 100, 2);
	T_ASSERT_EQ(sendto(k, buf, 100, 0, (struct sockaddr *)&to, sizeof(to)), 100);
	fill(buf, 100, 3);
	T_ASSERT_EQ(send1(a.p, buf, 100, 0, b.p->local.ip, B_PORT), 1);
	/* One datagram per call, nothing released in between. */
	end = clk_mono_ns() + 3000000000ull;
	while (got < 3 && clk_mono_ns() < end)
		got += dp_port_rx_burst(b.p, &rx[got], 1);
	T_ASSERT_EQ(got, 3);
	T_ASSERT(b.p->st.arp_rx >= 1);
	for (unsigned i = 0; i < 3; i++) {
		bool kernel = rx[i].src.port == K_PORT;

		T_ASSERT_EQ(rx[i].len, 100);
		fill(buf, 100, kernel ? 2 : (rx[i].data[0] == (uint8_t)1 ? 1 : 3));
		T_ASSERT_MEMEQ(rx[i].data, buf, 100);
	}
	dp_port_rx_done(b.p);
	/* Still in step with the kernel: more than a ring's worth flows through. */
	b.nq = 0;
	for (int i = 0; i < 300; i++) {
		(void)send1(a.p, buf, 10, 0, b.p->local.ip, B_PORT);
		pump(ps, 2);
		b.nq = 0;
	}
	deliver(ps, 2, &a, &b, buf, 10);
	close(k);
	dp_ports_close(pa, 1);
	dp_ports_close(pb, 1);
}

/* An RX ring whose every frame is held stops handing out; rx_done() revives it. */
static void
test_rx_ring_full(void)
{
	static uint8_t buf[32];
	static struct tport a;
	static struct tport b;
	struct tport *ps[] = {&a, &b};
	struct dp_port *pa[1];
	struct dp_port *pb[1];
	struct dp_rx rx[DP_BURST_MAX];
	unsigned held = 0;
	unsigned n;

	g_ring_frames = 64;
	a.p = open_ports(0, g_ns.ip[0], A_PORT, 1, true, pa);
	b.p = open_ports(1, g_ns.ip[1], B_PORT, 1, true, pb);
	deliver(ps, 2, &a, &b, buf, 1);
	for (int i = 0; i < 100; i++) {
		int tries = 0;

		/* A TX frame is free again once the far side is done with it. */
		while (send1(a.p, buf, sizeof(buf), 0, b.p->local.ip, B_PORT) != 1 &&
		       tries++ < 1000)
			usleep(1000);
	}
	usleep(20000);
	while ((n = dp_port_rx_burst(b.p, rx, DP_BURST_MAX)) > 0)
		held += n;
	T_ASSERT_EQ(held, 64); /* the kernel dropped the other 36 */
	dp_port_rx_done(b.p);
	b.nq = 0;
	deliver(ps, 2, &a, &b, buf, 5);
	T_ASSERT_EQ(b.q[0].len, 5);
	dp_ports_close(pa, 1);
	dp_ports_close(pb, 1);
}

/* One tx_burst() larger than the TX ring: the ring's worth goes, the rest is counted. */
static void
test_tx_ring_full(void)
{
	static uint8_t buf[32];
	static struct tport a;
	static struct tport b;
	static struct dp_tx tx[100];
	struct tport *ps[] = {&a, &b};
	struct dp_port *pa[1];
	struct dp_port *pb[1];
	uint64_t drops;

	g_ring_frames = 64;
	a.p = open_ports(0, g_ns.ip[0], A_PORT, 1, true, pa);
	g_ring_frames = 0;
	b.p = open_ports(1, g_ns.ip[1], B_PORT, 1, true, pb);
	deliver(ps, 2, &a, &b, buf, 1);
	b.nq = 0;
	for (unsigned i = 0; i < ARRAY_SIZE(tx); i++)
		tx[i] = (struct dp_tx){.data = buf, .len = sizeof(buf), .dst = b.p->local};
	usleep(20000); /* every TX frame back from the kernel */
	drops = a.p->st.tx_dropped;
	T_ASSERT_EQ(dp_port_tx_burst(a.p, tx, ARRAY_SIZE(tx)), 64);
	T_ASSERT_EQ(a.p->st.tx_dropped - drops, 36);
	T_ASSERT(pump_until(ps, 2, &b, 64, 3000));
	usleep(20000);
	pump(ps, 2);
	T_ASSERT_EQ(b.nq, 64);
	dp_ports_close(pa, 1);
	dp_ports_close(pb, 1);
}

/*
 * A kernel UDP socket that has not read yet must not see TX ring frames
 * rewritten under it: 300 datagrams through a 64-frame ring arrive intact.
 */
static void
test_tx_frames_reused_while_kernel_holds(void)
{
	static uint8_t buf[1000];
	static uint8_t got[2000];
	static struct tport a;
	struct tport *ps[] = {&a};
	struct dp_port *pa[1];
	struct dp_tx tx = {.data = buf, .len = sizeof(buf)};
	int rcvbuf = 8 << 20;
	unsigned n = 0;
	ssize_t r;
	int k;

	g_ring_frames = 64;
	a.p = open_ports(0, g_ns.ip[0], A_PORT, 1, true, pa);
	k = kernel_udp(1, g_ns.ip[1], K_PORT);
	T_ASSERT_EQ(setsockopt(k, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)), 0);
	tx.dst.ip = ip_of(g_ns.ip[1]);
	tx.dst.port = K_PORT;
	/* Resolve ARP first, then empty the socket. */
	for (int i = 0; i < 3000 && a.p->st.tx_pkts == 0; i++) {
		dp_port_tx_burst(a.p, &tx, 1);
		pump(ps, 1);
		usleep(1000);
	}
	T_ASSERT(a.p->st.tx_pkts > 0);
	usleep(20000);
	while (recv(k, got, sizeof(got), 0) > 0)
		;
	for (unsigned i = 0; i < 300; i++) {
		int tries = 0;

		memset(buf, (int)(i & 0xff), sizeof(buf));
		buf[0] = (uint8_t)i;
		buf[1] = (uint8_t)(i >> 8);
		while (dp_port_tx_burst(a.p, &tx, 1) != 1 && tries++ < 1000)
			usleep(1000);
	}
	usleep(50000);
	while ((r = recv(k, got, sizeof(got), 0)) > 0) {
		unsigned i = got[0] | (unsigned)got[1] << 8;

		T_ASSERT_EQ(r, (ssize_t)sizeof(buf));
		T_ASSERT_EQ(got[2], (uint8_t)i);
		T_ASSERT_EQ(got[sizeof(buf) - 1], (uint8_t)i);
		n++;
	}
	T_ASSERT_EQ(n, 300);
	close(k);
	dp_ports_close(pa, 1);
}

/*
 * The kernel in B's namespace sees every frame B's port receives. Returns
 * the increase of Udp NoPorts and Icmp OutDestUnreachs while @count
 * datagrams go from A to B.
 */
static void
icmp_run(bool guard, int count, long long *noports, long long *unreach)
{
	static uint8_t buf[100];
	static struct tport a;
	static struct tport b;
	struct tport *ps[] = {&a, &b};
	struct dp_port *pa[1];
	struct dp_port *pb[1];
	long long np0;
	long long du0;

	a.nq = 0;
	b.nq = 0;
	a.p = open_ports(0, g_ns.ip[0], A_PORT, 1, false, pa);
	b.p = open_ports(1, g_ns.ip[1], B_PORT, 1, guard, pb);
	T_ASSERT_EQ(t_netns_enter(&g_ns, 1), 0);
	np0 = snmp("Udp", "NoPorts");
	du0 = snmp("Icmp", "OutDestUnreachs");
	deliver(ps, 2, &a, &b, buf, sizeof(buf));
	for (int i = 1; i < count; i++) {
		T_ASSERT_EQ(send1(a.p, buf, sizeof(buf), 0, b.p->local.ip, B_PORT), 1);
		pump(ps, 2);
	}
	T_ASSERT(pump_until(ps, 2, &b, (unsigned)count, 2000));
	usleep(20000); /* let the kernel's own path finish with the last frames */
	*noports = snmp("Udp", "NoPorts") - np0;
	*unreach = snmp("Icmp", "OutDestUnreachs") - du0;
	dp_ports_close(pa, 1);
	dp_ports_close(pb, 1);
}

static void
test_icmp_guard_nft(void)
{
	long long np;
	long long du;

	icmp_run(true, 50, &np, &du);
	T_ASSERT_EQ(np, 0);
	T_ASSERT_EQ(du, 0);
}

static void
test_icmp_guard_socket(void)
{
	long long np;
	long long du;

	setenv("SP_AFP_ICMP_GUARD", "socket", 1);
	icmp_run(true, 50, &np, &du);
	T_ASSERT_EQ(np, 0);
	T_ASSERT_EQ(du, 0);
}

/* Without the guard the kernel does answer: proves the counters above can move. */
static void
test_icmp_control_without_guard(void)
{
	long long np;
	long long du;

	icmp_run(false, 5, &np, &du);
	T_ASSERT(np >= 5);
	T_ASSERT(du >= 1);
}

/* Reads `nft list tables` in namespace B. */
static void
nft_tables(char *out, size_t len)
{
	char cmd[128];
	FILE *f;
	size_t n;

	snprintf(cmd, sizeof(cmd), "ip netns exec %s nft list tables 2>/dev/null", g_ns.ns[1]);
	f = popen(cmd, "r");
	T_ASSERT(f != NULL);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	pclose(f);
}

/* A killed process's table is removed at the next open; ours goes at close. */
static void
test_nft_stale_table_and_close(void)
{
	char tables[4096];
	char stale[64];
	char mine[64];
	struct dp_port *pb[2];
	pid_t dead = fork();

	T_ASSERT(dead >= 0);
	if (dead == 0)
		_exit(0);
	T_ASSERT(waitpid(dead, NULL, 0) == dead);
	if (t_sh("ip netns exec %s nft list tables >/dev/null 2>&1", g_ns.ns[1]) != 0) {
		printf("nft not usable here: stale-table check skipped\n");
		return;
	}
	snprintf(stale, sizeof(stale), "sprocket_afp_%d_0", (int)dead);
	T_ASSERT_EQ(t_sh("ip netns exec %s nft add table ip %s", g_ns.ns[1], stale), 0);
	open_ports(1, g_ns.ip[1], B_PORT, 2, true, pb);
	snprintf(mine, sizeof(mine), "sprocket_afp_%d_", (int)getpid());
	nft_tables(tables, sizeof(tables));
	T_ASSERT(strstr(tables, stale) == NULL);
	T_ASSERT(strstr(tables, mine) != NULL);
	/* Close from another namespace: the table still goes from B's. */
	T_ASSERT_EQ(t_netns_enter(&g_ns, -1), 0);
	dp_ports_close(pb, 2);
	nft_tables(tables, sizeof(tables));
	T_ASSERT(strstr(tables, mine) == NULL);
}

/*
 * A kernel UDP client talks to an af_packet port and gets its answer.
 * @ip: the port's address; when it is not assigned to the interface, the
 * port itself must answer the kernel's ARP request.
 */
static void
kernel_interop(const char *ip, bool port_answers_arp)
{
	static uint8_t buf[1500];
	static uint8_t got[1500];
	static struct tport a;
	struct tport *ps[] = {&a};
	struct dp_port *pa[1];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(A_PORT)};
	const uint32_t sizes[] = {1, 64, 1024, 1472};
	long long np0;
	long long du0;
	int k;

	a.p = open_ports(0, ip, A_PORT, 1, true, pa);
	T_ASSERT_EQ(t_netns_enter(&g_ns, 0), 0);
	np0 = snmp("Udp", "NoPorts");
	du0 = snmp("Icmp", "OutDestUnreachs");
	k = kernel_udp(1, g_ns.ip[1], K_PORT);
	to.sin_addr.s_addr = ip_of(ip);
	for (unsigned s = 0; s < ARRAY_SIZE(sizes); s++) {
		uint32_t len = sizes[s];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		uint64_t end = clk_mono_ns() + 3000000000ull;
		ssize_t r = -1;

		fill(buf, len, s + 7);
		a.nq = 0;
		T_ASSERT_EQ(sendto(k, buf, len, 0, (struct sockaddr *)&to, sizeof(to)),
			    (ssize_t)len);
		/* The kernel queues the datagram while it resolves ARP; we pump meanwhile. */
		T_ASSERT(pump_until(ps, 1, &a, 1, 3000));
		T_ASSERT_EQ(a.q[0].len, len);
		T_ASSERT_MEMEQ(a.q[0].data, buf, len);
		T_ASSERT_EQ(a.q[0].src.ip, ip_of(g_ns.ip[1]));
		T_ASSERT_EQ(a.q[0].src.port, K_PORT);

		fill(buf, len, s + 50);
		T_ASSERT_EQ(send1(a.p, buf, len, len >= 16 ? 3 : 0, a.q[0].src.ip, K_PORT), 1);
		while (r < 0 && clk_mono_ns() < end) {
			r = recvfrom(k, got, sizeof(got), 0, (struct sockaddr *)&from, &fl);
			if (r < 0)
				usleep(100);
		}
		T_ASSERT_EQ(r, (ssize_t)len);
		T_ASSERT_MEMEQ(got, buf, len);
		T_ASSERT_EQ(from.sin_addr.s_addr, ip_of(ip));
		T_ASSERT_EQ(ntohs(from.sin_port), A_PORT);
	}
	/* The reply used the MAC learnt from the request: no ARP of ours. */
	T_ASSERT_EQ(a.p->st.tx_no_arp, 0);
	if (port_answers_arp)
		T_ASSERT(a.p->st.arp_tx >= 1); /* the replies to the kernel's requests */
	else
		T_ASSERT_EQ(a.p->st.arp_tx, 0); /* the kernel answered: never twice */
	T_ASSERT_EQ(t_netns_enter(&g_ns, 0), 0);
	T_ASSERT_EQ(snmp("Udp", "NoPorts"), np0);
	T_ASSERT_EQ(snmp("Icmp", "OutDestUnreachs"), du0);
	close(k);
	dp_ports_close(pa, 1);
}

static void
test_kernel_udp_interop(void)
{
	kernel_interop(g_ns.ip[0], false);
}

static void
test_kernel_udp_interop_port_answers_arp(void)
{
	kernel_interop("10.77.0.11", true); /* on the link, assigned to no interface */
}

/* Loopback of a namespace: zero MACs, no ARP, a 9000-byte MTU cap. */
static void
test_loopback(void)
{
	static uint8_t buf[9000];
	static struct tport p0;
	static struct tport p1;
	struct tport *ps[] = {&p0, &p1};
	struct dp_port *pl[2];
	struct dp_port_cfg cfg = {
		.backend = DP_BACKEND_AF_PACKET,
		.ip = ip_of("127.0.0.1"),
		.base_port = A_PORT,
		.n = 2,
		.iface = "lo",
		.icmp_guard = true,
	};

	T_ASSERT_EQ(t_netns_enter(&g_ns, 0), 0);
	T_ASSERT_EQ(dp_ports_open(&cfg, pl), 0);
	p0.p = pl[0];
	p1.p = pl[1];
	T_ASSERT_EQ(p0.p->max_dgram, 9000 - 28);
	dp_port_wait(p1.p, 1000); /* nothing there: returns after the timeout */
	fill(buf, p0.p->max_dgram, 3);
	T_ASSERT_EQ(send1(p0.p, buf, p0.p->max_dgram, 48, p1.p->local.ip, A_PORT + 1), 1);
	dp_port_wait(p1.p, 1000000);
	T_ASSERT(pump_until(ps, 2, &p1, 1, 2000));
	T_ASSERT_EQ(p1.q[0].len, p0.p->max_dgram);
	T_ASSERT_MEMEQ(p1.q[0].data, buf, p0.p->max_dgram);
	T_ASSERT_EQ(p1.q[0].src.port, A_PORT);
	T_ASSERT_EQ(p0.nq, 0);
	T_ASSERT_EQ(p0.p->st.arp_tx + p1.p->st.arp_tx, 0);
	dp_ports_close(pl, 2);
}

/* Peer down: link_up() goes false, TX drops; back up: true again. */
static void
test_link_state(void)
{
	static uint8_t buf[8];
	struct dp_port *pa[1];
	struct dp_port *a = open_ports(0, g_ns.ip[0], A_PORT, 1, false, pa);
	uint64_t end;
	bool up = true;

	T_ASSERT(dp_port_link_up(a));
	T_ASSERT_EQ(t_sh("ip -n %s link set %s down", g_ns.ns[1], g_ns.ifn[1]), 0);
	end = clk_mono_ns() + 3000000000ull;
	while ((up = dp_port_link_up(a)) && clk_mono_ns() < end)
		usleep(1000);
	T_ASSERT(!up);
	T_ASSERT_EQ(a->st.link_downs, 1);
	T_ASSERT_EQ(send1(a, buf, sizeof(buf), 0, ip_of(g_ns.ip[1]), B_PORT), 0);
	T_ASSERT_EQ(a->st.tx_dropped, 1);
	{
		struct dp_rx rx[4];

		T_ASSERT_EQ(dp_port_rx_burst(a, rx, 4), 0);
		dp_port_wait(a, 20000); /* sleeps the timeout, never spins */
	}
	T_ASSERT_EQ(t_sh("ip -n %s link set %s up", g_ns.ns[1], g_ns.ifn[1]), 0);
	end = clk_mono_ns() + 3000000000ull;
	while (!(up = dp_port_link_up(a)) && clk_mono_ns() < end)
		usleep(1000);
	T_ASSERT(up);
	T_ASSERT_EQ(a->st.link_downs, 1);
	dp_ports_close(pa, 1);
}

static void
test_errors(void)
{
	struct dp_port *p[1];
	struct dp_port_cfg cfg = {
		.backend = DP_BACKEND_AF_PACKET,
		.base_port = A_PORT,
		.n = 1,
		.iface = "nosuchif0",
	};
	pid_t pid;
	int st = 0;

	T_ASSERT_EQ(t_netns_enter(&g_ns, 0), 0);
	T_ASSERT_EQ(dp_ports_open(&cfg, p), -ENODEV);
	cfg.iface = g_ns.ifn[0];
	cfg.base_port = 0;
	T_ASSERT_EQ(dp_ports_open(&cfg, p), -EINVAL);
	cfg.base_port = A_PORT;
	/* Without CAP_NET_RAW (user nobody): -EPERM. */
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		_exit(dp_ports_open(&cfg, p) == -EPERM ? 0 : 1);
	}
	T_ASSERT(waitpid(pid, &st, 0) == pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int
main(void)
{
	static const struct t_case cases[] = {
		T_CASE(test_errors),
		T_CASE(test_sizes_both_ways),
		T_CASE(test_two_ports_steering),
		T_CASE(test_rx_views_held_until_done),
		T_CASE(test_rx_ring_full),
		T_CASE(test_tx_ring_full),
		T_CASE(test_tx_frames_reused_while_kernel_holds),
		T_CASE(test_icmp_guard_nft),
		T_CASE(test_icmp_guard_socket),
		T_CASE(test_icmp_control_without_guard),
		T_CASE(test_nft_stale_table_and_close),
		T_CASE(test_kernel_udp_interop),
		T_CASE(test_kernel_udp_interop_port_answers_arp),
		T_CASE(test_loopback),
		T_CASE(test_link_state), /* last: the peer's operstate may lag its return */
	};
	int fd = socket(AF_PACKET, SOCK_RAW, 0);
	int rc;

	if (fd < 0) {
		printf("skip: needs root / CAP_NET_RAW (%s)\n", strerror(errno));
		return 77;
	}
	close(fd);
	if (t_netns_create(&g_ns) < 0)
		return 1;
	rc = t_run_all(__FILE__, cases, ARRAY_SIZE(cases));
	t_netns_destroy();
	return rc;
}
