// SPDX-License-Identifier: Apache-2.0
/*
 * crash_dpdk_memif.c - kill memif peers mid-stream; the survivor must live.
 *
 *   crash_dpdk_memif PEER KILLS [client|server] [measure]
 *
 * A busy-polling echo process holds one end of a memif link. A stream
 * process on the other end keeps 32 datagrams in flight; once its first echo
 * is back it is kill -9'ed after a random 0-20 ms, and a new one starts.
 * After every kill the survivor must still be running, and at the end one
 * more peer checks that the survivor still answers. With "client" (the
 * default) the killed side is the memif client and the survivor the server
 * (the broker's position); with "server" the roles swap, and the surviving
 * client has to re-arm its link after each server restart.
 *
 * "measure" counts survivor deaths instead of failing on the first one,
 * restarts the survivor and prints the rate: run it with
 * SPROCKET_DPDK_MEMIF_GUARD=0 in the environment to measure the PMD without
 * the handshake in port_dpdk.c.
 */
#include <stdint.h>
#include <string.h>

#include "dpdk/dpdk_test.h"

static const char *g_peer;
static char g_vdev_srv[192];
static char g_vdev_cli[192];
static char g_cpu_a[16];
static char g_cpu_b[16];

/* The long-lived side: echo, busy-polling. */
static int
start_survivor(bool server, struct t_child *c)
{
	char v[256];
	char line[64];
	char *argv[] = {(char *)g_peer,	  (char *)"echo",	    v,
			g_cpu_a,	  (char *)"--ip=10.98.0.1", (char *)"--port=9000",
			(char *)"--busy", (char *)"--tag=survivor", NULL};

	snprintf(v, sizeof(v), "--vdev=%s", server ? g_vdev_srv : g_vdev_cli);
	if (t_spawn(argv, c) != 0)
		return -1;
	if (t_child_line(c, line, sizeof(line), 20000) <= 0 || strncmp(line, "ready", 5) != 0)
		return -1;
	return 0;
}

/* The victim: streams to the survivor. @count 0 = until killed. */
static int
start_victim(bool server, uint64_t count, struct t_child *c)
{
	char v[256];
	char cnt[32];
	char *argv[] = {(char *)g_peer,
			(char *)"stream",
			v,
			g_cpu_b,
			(char *)"--ip=10.98.0.2",
			(char *)"--port=9100",
			(char *)"--peer-ip=10.98.0.1",
			(char *)"--peer-port=9000",
			(char *)"--tag=victim",
			cnt,
			NULL};

	snprintf(v, sizeof(v), "--vdev=%s", server ? g_vdev_srv : g_vdev_cli);
	snprintf(cnt, sizeof(cnt), "--count=%llu", (unsigned long long)count);
	return t_spawn(argv, c);
}

/* Starts the survivor; a client survivor first needs a server to connect to. */
static int
start_pair(bool victim_server, struct t_child *surv)
{
	struct t_child first;

	if (!victim_server)
		return start_survivor(true, surv);
	if (start_victim(true, 0, &first) != 0)
		return -1;
	usleep(300000);
	if (start_survivor(false, surv) != 0)
		return -1;
	kill(first.pid, SIGKILL);
	t_child_wait(&first, 5000);
	return 0;
}

static long long
clk_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
alive(struct t_child *c, int *status)
{
	return waitpid(c->pid, status, WNOHANG) == 0;
}

int
main(int argc, char **argv)
{
	struct t_child surv;
	char rundir[64];
	unsigned kills;
	bool victim_server;
	bool measure;
	unsigned deaths = 0;
	unsigned k = 0;
	unsigned no_ready = 0;
	int st = 0;
	int rc = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: crash_dpdk_memif PEER KILLS [client|server] [measure]\n");
		return 2;
	}
	g_peer = argv[1];
	kills = (unsigned)atoi(argv[2]);
	victim_server = argc > 3 && strcmp(argv[3], "server") == 0;
	measure = argc > 4 && strcmp(argv[4], "measure") == 0;
	signal(SIGPIPE, SIG_IGN);
	srand((unsigned)getpid());
	if (t_dpdk_rundir(rundir, sizeof(rundir)) != 0)
		return 1;
	snprintf(g_vdev_srv, sizeof(g_vdev_srv),
		 "net_memif0,role=server,socket=/sprocket-test-%d-crash", (int)getpid());
	snprintf(g_vdev_cli, sizeof(g_vdev_cli),
		 "net_memif0,role=client,socket=/sprocket-test-%d-crash", (int)getpid());
	snprintf(g_cpu_a, sizeof(g_cpu_a), "--cpu=%d", t_dpdk_cpu(1));
	snprintf(g_cpu_b, sizeof(g_cpu_b), "--cpu=%d", t_dpdk_cpu(0));

	if (start_pair(victim_server, &surv) != 0) {
		fprintf(stderr, "survivor did not start\n");
		return 1;
	}

	for (k = 0; k < kills; k++) {
		struct t_child v;
		char line[64];
		long long t0;

		if (start_victim(victim_server, 0, &v) != 0)
			return 1;
		/* Streaming (first echo back), or give up on this one after 20 s. */
		t0 = clk_ms();
		if (t_child_line(&v, line, sizeof(line), 20000) <= 0)
			no_ready++;
		if (getenv("T_VERBOSE"))
			fprintf(stderr, "kill %u: streaming after %lld ms\n", k + 1, clk_ms() - t0);
		usleep((useconds_t)(rand() % 20000));
		kill(v.pid, SIGKILL);
		t_child_wait(&v, 5000);
		/* The survivor notices within a few ms; give it 50 ms to fall over. */
		usleep(50000);
		if (!alive(&surv, &st)) {
			deaths++;
			fprintf(stderr, "kill %u: survivor died: %s %d\n", k + 1,
				WIFSIGNALED(st) ? "signal" : "exit",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			close(surv.out);
			if (!measure) {
				rc = 1;
				goto out;
			}
			if (start_pair(victim_server, &surv) != 0) {
				fprintf(stderr, "survivor did not restart\n");
				rc = 1;
				goto out;
			}
		}
	}

	/* The survivor still serves a new peer: 10000 echoes. */
	{
		struct t_child v;

		if (start_victim(victim_server, 10000, &v) != 0)
			return 1;
		st = t_child_wait(&v, 60000);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "final peer got no service (status %d)\n", st);
			rc = 1;
		}
	}
	if (!alive(&surv, &st)) {
		fprintf(stderr, "survivor died at the end\n");
		deaths++;
		rc = 1;
	}
out:
	printf("memif %s kills=%u survivor_deaths=%u victims_never_streaming=%u guard=%s\n",
	       victim_server ? "server" : "client", k, deaths, no_ready,
	       getenv("SPROCKET_DPDK_MEMIF_GUARD") ? getenv("SPROCKET_DPDK_MEMIF_GUARD")
						   : "default");
	kill(surv.pid, SIGTERM);
	t_child_wait(&surv, 10000);
	t_dpdk_rundir_rm(rundir);
	if (measure)
		return rc;
	return deaths ? 1 : rc;
}
