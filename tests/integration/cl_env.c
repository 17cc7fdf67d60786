// SPDX-License-Identifier: Apache-2.0
/*
 * cl_env.c - NameServer + brokers + libsprocket clients on one backend, for
 * test_client.c (see cl_env.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl_env.h"
#include "common/clock.h"
#include "dpdk/dpdk_test.h"
#include "harness.h"
#include "sprocket/route.h"
#include "store/meta.h"

#define DPDK_NET "10.250.7."

int
cl_backend_parse(const char *s)
{
	if (strcmp(s, "udp") == 0)
		return SP_BACKEND_UDP;
	if (strcmp(s, "af_packet") == 0)
		return SP_BACKEND_AF_PACKET;
	if (strcmp(s, "dpdk") == 0)
		return SP_BACKEND_DPDK;
	return -1;
}

bool
cl_env_check(enum sp_backend be)
{
	if (be == SP_BACKEND_UDP)
		return true;
	if (geteuid() != 0) {
		printf("skipped: %s needs root\n", be == SP_BACKEND_DPDK ? "dpdk" : "af_packet");
		return false;
	}
#ifndef CL_HAVE_DPDK
	if (be == SP_BACKEND_DPDK) {
		printf("skipped: built without DPDK\n");
		return false;
	}
#endif
	return true;
}

static void
side(struct cl_env *e, int s)
{
	if (e->be == SP_BACKEND_AF_PACKET)
		T_ASSERT_EQ(t_netns_enter(&e->ns, s), 0);
}

void
cl_env_start(struct cl_env *e, enum sp_backend be)
{
	const char *nargs[] = {"--bindAddress=0.0.0.0", NULL};

	memset(e, 0, sizeof(*e));
	e->be = be;
	clk_init();
	if (be == SP_BACKEND_AF_PACKET)
		T_ASSERT_EQ(t_netns_create(&e->ns), 0);
	if (be == SP_BACKEND_DPDK)
		T_ASSERT_EQ(t_dpdk_rundir(e->rundir, sizeof(e->rundir)), 0);
	side(e, 1);
	T_ASSERT_EQ(nsp_start(SP_NAMESRV_BIN, NULL, be == SP_BACKEND_AF_PACKET ? nargs : NULL,
			      &e->nsrv),
		    0);
	side(e, 0);
	snprintf(e->namesrv, sizeof(e->namesrv), "%s:%u",
		 be == SP_BACKEND_AF_PACKET ? e->ns.ip[1] : "127.0.0.1", e->nsrv.port);
}

static void
broker_run(struct cl_env *e, unsigned i)
{
	static char a[12][512];
	const char *args[32];
	unsigned n = 0;
	int rc;

	snprintf(a[0], sizeof(a[0]), "--dataplaneBackend=%s",
		 e->be == SP_BACKEND_UDP    ? "udp"
		 : e->be == SP_BACKEND_DPDK ? "dpdk"
					    : "af_packet");
	snprintf(a[1], sizeof(a[1]), "--namesrvAddr=127.0.0.1:%u", e->nsrv.port);
	snprintf(a[2], sizeof(a[2]), "--brokerName=broker-%c", 'a' + i);
	snprintf(a[3], sizeof(a[3]), "--dataplaneCores=2");
	snprintf(a[4], sizeof(a[4]), "--listenPort=0");
	for (unsigned k = 0; k < 5; k++)
		args[n++] = a[k];
	switch (e->be) {
	case SP_BACKEND_UDP:
		args[n++] = "--dataplaneIp=127.0.0.1";
		break;
	case SP_BACKEND_AF_PACKET:
		snprintf(a[5], sizeof(a[5]), "--dataplaneIp=%s", e->ns.ip[1]);
		snprintf(a[6], sizeof(a[6]), "--dataplaneInterface=%s", e->ns.ifn[1]);
		snprintf(a[7], sizeof(a[7]), "--brokerIP1=%s", e->ns.ip[1]);
		args[n++] = a[5];
		args[n++] = a[6];
		args[n++] = a[7];
		break;
	case SP_BACKEND_DPDK: {
		char vdev[128];
		char eal[400];
		char tag[16];

		/* Distinct MACs: a switch learns where each one is. */
		snprintf(vdev, sizeof(vdev),
			 "net_memif0,role=server,socket=/sp-cl-%d-%u,socket-abstract=yes,"
			 "mac=02:5a:00:00:00:%02x",
			 (int)getpid(), i, i + 1);
		snprintf(tag, sizeof(tag), "clbk%u", i);
		t_dpdk_eal_args(eal, sizeof(eal), tag, t_dpdk_cpu(1), vdev);
		snprintf(a[5], sizeof(a[5]), "--dpdkArgs=%s", eal);
		snprintf(a[6], sizeof(a[6]), "--dataplaneIp=" DPDK_NET "%u", 2 + i);
		args[n++] = a[5];
		args[n++] = a[6];
		break;
	}
	}
	for (unsigned k = 0; k < e->n_extra[i]; k++)
		args[n++] = e->bk_extra[i][k];
	args[n] = NULL;
	if (e->bk[i].dp_port == 0)
		e->bk[i].dp_port = (uint16_t)(31000 + (getpid() % 3000) * 8 + i * 4);
	side(e, 1);
	rc = bk_start(SP_BROKER_BIN, args, &e->bk[i]);
	side(e, 0);
	T_ASSERT_EQ(rc, 0);
}

void
cl_env_switch(struct cl_env *e)
{
#ifdef T_MEMIF_SWITCH
	char a[8 + CL_MAX_BROKERS][160];
	char *argv[16 + CL_MAX_BROKERS];
	char line[64];
	unsigned n = 0;

	if (e->be != SP_BACKEND_DPDK)
		return;
	snprintf(a[0], sizeof(a[0]), "--file-prefix=sp-clsw-%d", (int)getpid());
	snprintf(a[1], sizeof(a[1]), "%d", t_dpdk_cpu(0));
	for (unsigned i = 0; i < CL_MAX_BROKERS; i++)
		snprintf(a[2 + i], sizeof(a[2 + i]),
			 "--vdev=net_memif%u,role=client,socket=/sp-cl-%d-%u,socket-abstract=yes,"
			 "mac=02:5a:00:00:01:%02x",
			 i, (int)getpid(), i, i);
	snprintf(a[2 + CL_MAX_BROKERS], sizeof(a[0]),
		 "--vdev=net_memif%u,role=server,socket=/sp-cl-%d-sw,socket-abstract=yes,"
		 "mac=02:5a:00:00:01:%02x",
		 CL_MAX_BROKERS, (int)getpid(), CL_MAX_BROKERS);
	argv[n++] = (char *)T_MEMIF_SWITCH;
	argv[n++] = (char *)"--no-pci";
	argv[n++] = (char *)"--no-huge";
	argv[n++] = (char *)"--no-shconf";
	argv[n++] = (char *)"--no-telemetry";
	argv[n++] = (char *)"-m128";
	argv[n++] = a[0];
	argv[n++] = (char *)"-l";
	argv[n++] = a[1];
	argv[n++] = (char *)"--log-level=*:warning";
	for (unsigned i = 0; i <= CL_MAX_BROKERS; i++)
		argv[n++] = a[2 + i];
	argv[n] = NULL;
	T_ASSERT_EQ(t_spawn(argv, &e->sw), 0);
	/* "ready N" once every port started: the client's memif finds its socket. */
	T_ASSERT(t_child_line(&e->sw, line, sizeof(line), 60000) > 0);
	T_ASSERT(strncmp(line, "ready ", 6) == 0);
#else
	(void)e;
#endif
}

void
cl_env_switch_stop(struct cl_env *e)
{
	int st;

	if (e->sw.pid <= 0)
		return;
	kill(e->sw.pid, SIGTERM);
	st = t_child_wait(&e->sw, 10000);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	e->sw.pid = 0;
}

void
cl_broker_start(struct cl_env *e, unsigned i, const char *const *extra)
{
	char name[32];

	T_ASSERT(i < CL_MAX_BROKERS);
	e->n_extra[i] = 0;
	for (unsigned k = 0; extra && extra[k] && k < 8; k++)
		snprintf(e->bk_extra[i][e->n_extra[i]++], sizeof(e->bk_extra[i][0]), "%s",
			 extra[k]);
	broker_run(e, i);
	snprintf(name, sizeof(name), "broker-%c", 'a' + i);
	/* registered: TBW102 (auto-creation) or the topic the test names lists this broker */
	for (int t = 0; t < 1000; t++) {
		struct sp_route *r;

		if (sp_route_fetch(e->namesrv, e->wait_topic ? e->wait_topic : "TBW102", 1000,
				   &r) == 0) {
			bool found = false;

			for (uint32_t k = 0; k < r->n_brokers; k++)
				found |= strcmp(r->brokers[k].name, name) == 0;
			sp_route_free(r);
			if (found)
				return;
		}
		usleep(10000);
	}
	T_FAIL("broker %s never registered %s", name, e->wait_topic ? e->wait_topic : "TBW102");
}

void
cl_broker_precreate(struct cl_env *e, unsigned i, const char *topic, uint32_t queues)
{
	struct meta_topic t = {.read_queues = queues, .write_queues = queues, .perm = 6};
	struct bk_proc *b = &e->bk[i];
	char path[256];

	T_ASSERT(b->dir[0] == '\0' && strlen(topic) <= META_TOPIC_MAX);
	snprintf(t.name, sizeof(t.name), "%s", topic);
	snprintf(b->dir, sizeof(b->dir), "/tmp/sp-bk-XXXXXX");
	T_ASSERT(mkdtemp(b->dir) != NULL);
	snprintf(path, sizeof(path), "mkdir -p %s/store/config", b->dir);
	T_ASSERT_EQ(system(path), 0);
	snprintf(path, sizeof(path), "%s/store/config/topics.json", b->dir);
	T_ASSERT_EQ(meta_topics_save(&store_io_posix, path, &t, 1, NULL), 0);
}

void
cl_broker_kill(struct cl_env *e, unsigned i)
{
	bk_kill(&e->bk[i]);
}

void
cl_broker_restart(struct cl_env *e, unsigned i)
{
	broker_run(e, i);
}

int
cl_broker_pid(const struct cl_env *e, unsigned i)
{
	return (int)e->bk[i].pid;
}

static void
log_cb(void *arg, enum sp_log_level level, const char *line)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};

	(void)arg;
	fprintf(stderr, "# libsprocket %s: %s\n", names[level & 3], line);
}

struct sp_client *
cl_client_new(struct cl_env *e)
{
	const char *v = getenv("T_VERBOSE");
	struct sp_client_cfg cfg = {
		.namesrv = e->namesrv,
		.backend = e->be,
		.log = log_cb,
		/* a loaded 2-CPU box can take over a second to answer a fresh broker's CONNECT */
		.connect_timeout_ms = e->connect_timeout_ms ? e->connect_timeout_ms : 5000,
		.route_refresh_ms = e->route_refresh_ms,
		.stats = e->stats,
		.stats_interval_ms = e->stats_interval_ms,
		.log_level = v && v[0] == '2' ? SP_LOG_DEBUG
			     : v	      ? SP_LOG_INFO
					      : SP_LOG_WARN,
	};
	char eal[400];
	char vdev[128];
	struct sp_client *c;

	switch (e->be) {
	case SP_BACKEND_UDP:
		cfg.local_ip = htonl(INADDR_LOOPBACK);
		break;
	case SP_BACKEND_AF_PACKET:
		cfg.local_ip = inet_addr(e->ns.ip[0]);
		cfg.iface = e->ns.ifn[0];
		break;
	case SP_BACKEND_DPDK:
		/* Through the switch when there is one, else straight to broker 0. */
		snprintf(vdev, sizeof(vdev),
			 "net_memif0,role=client,socket=/sp-cl-%d-%s,socket-abstract=yes,"
			 "mac=02:5a:00:00:00:10",
			 (int)getpid(), e->sw.pid > 0 ? "sw" : "0");
		t_dpdk_eal_args(eal, sizeof(eal), "clcl", t_dpdk_cpu(0), vdev);
		cfg.local_ip = inet_addr(DPDK_NET "1");
		cfg.dpdk_args = eal;
		break;
	}
	T_ASSERT_EQ(sp_client_create(&cfg, &c), 0);
	return c;
}

void
cl_env_stop(struct cl_env *e)
{
	for (unsigned i = 0; i < CL_MAX_BROKERS; i++) {
		if (e->bk[i].dir[0]) {
			if (e->bk[i].pid > 0)
				T_ASSERT_EQ(bk_stop(&e->bk[i]), 0);
			bk_cleanup(&e->bk[i]);
		}
	}
	cl_env_switch_stop(e);
	if (e->nsrv.pid > 0)
		(void)nsp_stop(&e->nsrv);
	nsp_cleanup(&e->nsrv);
	if (e->be == SP_BACKEND_AF_PACKET)
		t_netns_destroy();
	if (e->be == SP_BACKEND_DPDK)
		t_dpdk_rundir_rm(e->rundir);
}

int
cl_wait_route(struct cl_env *e, const char *topic, unsigned brokers, unsigned write_queues,
	      unsigned timeout_ms)
{
	uint64_t end = clk_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

	(void)e;
	while (clk_mono_ns() < end) {
		struct sp_route *r;

		if (sp_route_fetch(e->namesrv, topic, 1000, &r) == 0) {
			unsigned wq = 0;

			for (uint32_t k = 0; k < r->n_queues; k++)
				if (r->queues[k].perm & 2)
					wq += r->queues[k].write_queues;
			if (r->n_brokers >= brokers && wq >= write_queues) {
				sp_route_free(r);
				return 0;
			}
			sp_route_free(r);
		}
		usleep(20000);
	}
	return -ETIMEDOUT;
}
