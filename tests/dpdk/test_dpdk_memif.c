// SPDX-License-Identifier: Apache-2.0
/*
 * test_dpdk_memif.c - the dpdk port between two processes over net_memif.
 *
 * One dpdk_peer echoes, another sends every datagram size from 1 to
 * max_dgram and checks each echo byte for byte (ARP between them included).
 * Both role assignments are run, so either side of memif is exercised as
 * sender and echoer. Each process is pinned to its own CPU where there are
 * two, and idles in dp_port_wait() so the test does not eat the box.
 */
#include <string.h>

#include "dpdk/dpdk_test.h"
#include "harness.h"

static const char *g_echo_ports = "--n=1";
static const char *g_peer_port = "--peer-port=9000";

static void
spawn_echo(const char *vdev, const char *cpu, struct t_child *c)
{
	char v[256];
	char *argv[] = {(char *)T_DPDK_PEER,  (char *)"echo",		v,
			(char *)cpu,	      (char *)"--ip=10.99.0.1", (char *)"--port=9000",
			(char *)"--tag=echo", (char *)g_echo_ports,	NULL};

	snprintf(v, sizeof(v), "--vdev=%s", vdev);
	T_ASSERT_EQ(t_spawn(argv, c), 0);
}

static void
spawn_sizes(const char *vdev, const char *cpu, struct t_child *c)
{
	char v[256];
	char *argv[] = {(char *)T_DPDK_PEER,
			(char *)"sizes",
			v,
			(char *)cpu,
			(char *)"--ip=10.99.0.2",
			(char *)"--port=9100",
			(char *)"--peer-ip=10.99.0.1",
			(char *)g_peer_port,
			(char *)"--tag=sizes",
			NULL};

	snprintf(v, sizeof(v), "--vdev=%s", vdev);
	T_ASSERT_EQ(t_spawn(argv, c), 0);
}

static void
run_pair(const char *echo_role, const char *sizes_role)
{
	char rundir[64];
	char vdev_e[192];
	char vdev_s[192];
	char cpu_e[16];
	char cpu_s[16];
	char line[128];
	struct t_child echo;
	struct t_child sizes;
	int st;

	T_ASSERT_EQ(t_dpdk_rundir(rundir, sizeof(rundir)), 0);
	snprintf(vdev_e, sizeof(vdev_e), "net_memif0,role=%s,id=3,socket=/sprocket-test-%d-%s",
		 echo_role, (int)getpid(), echo_role);
	snprintf(vdev_s, sizeof(vdev_s), "net_memif0,role=%s,id=3,socket=/sprocket-test-%d-%s",
		 sizes_role, (int)getpid(), echo_role);
	snprintf(cpu_e, sizeof(cpu_e), "--cpu=%d", t_dpdk_cpu(1));
	snprintf(cpu_s, sizeof(cpu_s), "--cpu=%d", t_dpdk_cpu(0));
	/* The server starts first; a client retries its connect for 2 s at open. */
	if (strcmp(echo_role, "server") == 0) {
		spawn_echo(vdev_e, cpu_e, &echo);
		T_ASSERT(t_child_line(&echo, line, sizeof(line), 20000) > 0);
		T_ASSERT(strncmp(line, "ready ", 6) == 0);
		spawn_sizes(vdev_s, cpu_s, &sizes);
	} else {
		spawn_sizes(vdev_s, cpu_s, &sizes);
		usleep(200000);
		spawn_echo(vdev_e, cpu_e, &echo);
		T_ASSERT(t_child_line(&echo, line, sizeof(line), 20000) > 0);
		T_ASSERT(strncmp(line, "ready ", 6) == 0);
	}
	if (t_child_line(&sizes, line, sizeof(line), 30000) <= 0) { /* ready */
		st = t_child_wait(&sizes, 1000);
		T_FAIL("sender never got an echo (status %#x)", st);
	}
	T_ASSERT(t_child_line(&sizes, line, sizeof(line), 60000) > 0);
	printf("%s\n", line);
	T_ASSERT(strncmp(line, "ok sizes 1..1472 ", 17) == 0);
	st = t_child_wait(&sizes, 10000);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		T_FAIL("sizes peer ended with status %#x", st);
	kill(echo.pid, SIGTERM);
	st = t_child_wait(&echo, 10000);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		T_FAIL("echo peer ended with status %#x", st);
	t_dpdk_rundir_rm(rundir);
}

static void
test_sizes_client_to_server(void)
{
	run_pair("server", "client");
}

static void
test_sizes_server_to_client(void)
{
	run_pair("client", "server");
}

/*
 * A two-port server and a one-queue client: memif connects one ring pair, so
 * the server's port 1 has no ring of its own. Its datagrams arrive on queue 0
 * and are handed over; its replies leave on queue 0.
 */
static void
test_two_port_server_one_queue_client(void)
{
	g_echo_ports = "--n=2";
	g_peer_port = "--peer-port=9001";
	run_pair("server", "client");
}

T_MAIN(T_CASE(test_sizes_client_to_server), T_CASE(test_sizes_server_to_client),
       T_CASE(test_two_port_server_one_queue_client))
