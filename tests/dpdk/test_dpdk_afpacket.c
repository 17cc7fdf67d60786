// SPDX-License-Identifier: Apache-2.0
/*
 * test_dpdk_afpacket.c - the dpdk port over net_af_packet on a veth pair
 * between two network namespaces this test creates and always deletes.
 *
 * One dpdk_peer echoes in namespace A, another sends every datagram size
 * from 1 to max_dgram from namespace B and checks each echo, ARP included.
 * The 10.97.0.x addresses exist only inside the DPDK ports: the kernel has
 * no address on the veths, so it neither answers ARP nor sends ICMP for
 * them. Needs root (namespaces, CAP_NET_RAW) and iproute2; skipped (77)
 * otherwise.
 */
#include <string.h>

#include "dpdk/dpdk_test.h"
#include "harness.h"

static char g_ip[32];
static char g_ns_a[32];
static char g_ns_b[32];
static char g_if_a[16];
static char g_if_b[16];

static void
netns_del(void)
{
	char cmd[256];

	/* Deleting a namespace deletes the veth end in it, and so the pair. */
	snprintf(cmd, sizeof(cmd), "%s netns del %s 2>/dev/null; %s netns del %s 2>/dev/null", g_ip,
		 g_ns_a, g_ip, g_ns_b);
	(void)system(cmd);
}

static void
netns_add(void)
{
	snprintf(g_ns_a, sizeof(g_ns_a), "sp-dpdk-a-%d", (int)getpid());
	snprintf(g_ns_b, sizeof(g_ns_b), "sp-dpdk-b-%d", (int)getpid());
	snprintf(g_if_a, sizeof(g_if_a), "spa%d", (int)getpid());
	snprintf(g_if_b, sizeof(g_if_b), "spb%d", (int)getpid());
	atexit(netns_del);
	{
		char cmd[512];

		snprintf(cmd, sizeof(cmd), "%s netns add %s && %s netns add %s", g_ip, g_ns_a, g_ip,
			 g_ns_b);
		T_ASSERT_EQ(system(cmd), 0);
		snprintf(cmd, sizeof(cmd),
			 "%s link add %s netns %s type veth peer name %s netns %s && "
			 "%s -n %s link set %s up && %s -n %s link set %s up",
			 g_ip, g_if_a, g_ns_a, g_if_b, g_ns_b, g_ip, g_ns_a, g_if_a, g_ip, g_ns_b,
			 g_if_b);
		T_ASSERT_EQ(system(cmd), 0);
	}
}

static void
spawn_in(const char *ns, char *const *peer_argv, struct t_child *c)
{
	char *argv[24];
	int n = 0;

	argv[n++] = g_ip;
	argv[n++] = (char *)"netns";
	argv[n++] = (char *)"exec";
	argv[n++] = (char *)ns;
	for (int i = 0; peer_argv[i] && n < 23; i++)
		argv[n++] = peer_argv[i];
	argv[n] = NULL;
	T_ASSERT_EQ(t_spawn(argv, c), 0);
}

static void
test_sizes_over_veth(void)
{
	char rundir[64];
	char vdev_a[96];
	char vdev_b[96];
	char cpu_a[16];
	char cpu_b[16];
	char line[128];
	struct t_child echo;
	struct t_child sizes;
	int st;

	T_ASSERT_EQ(t_dpdk_rundir(rundir, sizeof(rundir)), 0);
	netns_add();
	snprintf(vdev_a, sizeof(vdev_a), "--vdev=net_af_packet0,iface=%s", g_if_a);
	snprintf(vdev_b, sizeof(vdev_b), "--vdev=net_af_packet0,iface=%s", g_if_b);
	snprintf(cpu_a, sizeof(cpu_a), "--cpu=%d", t_dpdk_cpu(1));
	snprintf(cpu_b, sizeof(cpu_b), "--cpu=%d", t_dpdk_cpu(0));
	{
		char *argv[] = {(char *)T_DPDK_PEER,
				(char *)"echo",
				vdev_a,
				cpu_a,
				(char *)"--ip=10.97.0.1",
				(char *)"--port=9000",
				(char *)"--tag=afp-echo",
				NULL};

		spawn_in(g_ns_a, argv, &echo);
	}
	T_ASSERT(t_child_line(&echo, line, sizeof(line), 20000) > 0);
	T_ASSERT(strncmp(line, "ready ", 6) == 0);
	{
		char *argv[] = {(char *)T_DPDK_PEER,
				(char *)"sizes",
				vdev_b,
				cpu_b,
				(char *)"--ip=10.97.0.2",
				(char *)"--port=9100",
				(char *)"--peer-ip=10.97.0.1",
				(char *)"--peer-port=9000",
				(char *)"--tag=afp-sizes",
				NULL};

		spawn_in(g_ns_b, argv, &sizes);
	}
	if (t_child_line(&sizes, line, sizeof(line), 30000) <= 0) { /* ready */
		st = t_child_wait(&sizes, 1000);
		T_FAIL("sender never got an echo (status %#x)", st);
	}
	T_ASSERT(t_child_line(&sizes, line, sizeof(line), 60000) > 0);
	printf("%s\n", line);
	T_ASSERT(strncmp(line, "ok sizes 1..1472 ", 17) == 0);
	st = t_child_wait(&sizes, 10000);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	kill(echo.pid, SIGTERM);
	st = t_child_wait(&echo, 10000);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The harness ends a passing case with _exit(): atexit() covers failures only. */
	netns_del();
	t_dpdk_rundir_rm(rundir);
}

int
main(void)
{
	static const struct t_case cases[] = {T_CASE(test_sizes_over_veth)};
	const char *ips[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};

	for (unsigned i = 0; i < ARRAY_SIZE(ips) && !g_ip[0]; i++)
		if (access(ips[i], X_OK) == 0)
			snprintf(g_ip, sizeof(g_ip), "%s", ips[i]);
	if (geteuid() != 0 || !g_ip[0]) {
		puts("skipped: needs root and iproute2 (network namespaces, AF_PACKET)");
		return T_DPDK_SKIP;
	}
	return t_run_all(__FILE__, cases, ARRAY_SIZE(cases));
}
