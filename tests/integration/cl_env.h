/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cl_env.h - a NameServer, sprocket-broker processes and libsprocket clients
 * on one dataplane backend, for tests/integration/test_client.c (test code,
 * not a library).
 *
 * udp: everything on 127.0.0.1. af_packet: the NameServer and the brokers
 * run in one network namespace, the test's clients in another, joined by a
 * veth pair (tests/integration/netns.h); the processes are forked while the
 * calling thread is inside the servers' namespace, everything else happens
 * in the clients'. dpdk: each broker is a net_memif server and the test's
 * one client is the memif client of broker 0 (a memif is point to point, and
 * DPDK allows one device per process, so there is one sp_client per test
 * process and one broker it can reach).
 */
#ifndef SP_TESTS_CL_ENV_H
#define SP_TESTS_CL_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "bk_proc.h"
#include "dpdk/dpdk_test.h"
#include "integration/netns.h"
#include "ns_client.h"
#include "sprocket/client.h"

#define CL_MAX_BROKERS 2

struct cl_env {
	enum sp_backend be;
	struct t_netns ns;   /* af_packet */
	char rundir[64];     /* dpdk RUNTIME_DIRECTORY */
	struct ns_proc nsrv; /* the NameServer */
	char namesrv[64];    /* "ip:port" as the clients reach it */
	struct bk_proc bk[CL_MAX_BROKERS];
	char bk_extra[CL_MAX_BROKERS][8][128]; /* per-broker args, kept for restarts */
	unsigned n_extra[CL_MAX_BROKERS];
	uint32_t connect_timeout_ms; /* of the clients made after it is set (default 5000) */
	uint32_t route_refresh_ms;   /* clients' route refresh period (0: the library's 30 s) */
	const char *wait_topic;	     /* cl_broker_start() waits for its route (NULL: TBW102) */
	struct t_child sw;	     /* dpdk: the memif switch (pid 0: none) */
	sp_stats_fn stats;	     /* the clients' stats callback (NULL: none) */
	uint32_t stats_interval_ms;
};

/* Return: the backend named @s ("udp", "af_packet", "dpdk"), or -1. */
int cl_backend_parse(const char *s);

/*
 * cl_env_check() - whether this machine can run @be: root for af_packet,
 * root and a DPDK build for dpdk. Return: true, or false with a reason printed.
 */
bool cl_env_check(enum sp_backend be);

/* Starts the NameServer (and the namespaces or the dpdk run dir). Asserts. */
void cl_env_start(struct cl_env *e, enum sp_backend be);

/*
 * dpdk: puts a switch (tests/dpdk/memif_switch.c) between the client and
 * every broker, so one client reaches CL_MAX_BROKERS brokers, as a NIC host
 * does through its switch. Without it a client's memif reaches broker 0
 * only. Call once the brokers run (the switch connects to their sockets)
 * and before the first client; on the other backends it does nothing.
 */
void cl_env_switch(struct cl_env *e);

/*
 * Stops the switch (cl_env_stop() does too). DPDK 22.11's memif can crash a
 * process whose peer leaves while it polls (docs/dpdk.md); the switch has no
 * guard against that, so it leaves first, before the clients are destroyed
 * and the brokers stopped, whose ports have the guard.
 */
void cl_env_switch_stop(struct cl_env *e);

/*
 * cl_broker_start() - start broker @i ("broker-a", "broker-b", 2 dataplane
 * cores) with @extra ("--key=value", NULL-terminated, remembered for
 * cl_broker_restart()) and wait until its TBW102 or @wait_topic route shows
 * it at the NameServer. Asserts.
 */
void cl_broker_start(struct cl_env *e, unsigned i, const char *const *extra);

/*
 * cl_broker_precreate() - give broker @i (not started yet) topic @topic with
 * @queues queues in its topics.json, as an operator would. Asserts.
 */
void cl_broker_precreate(struct cl_env *e, unsigned i, const char *topic, uint32_t queues);

/* SIGKILL broker @i (the store stays). */
void cl_broker_kill(struct cl_env *e, unsigned i);

/* Start broker @i again on the same store and ports, with the same args. Asserts. */
void cl_broker_restart(struct cl_env *e, unsigned i);

/* Return: the broker's pid (for signals). */
int cl_broker_pid(const struct cl_env *e, unsigned i);

/* A client on the env's backend (udp/af_packet: any number; dpdk: one per process). Asserts. */
struct sp_client *cl_client_new(struct cl_env *e);

/* Stops every process and removes every directory and namespace. */
void cl_env_stop(struct cl_env *e);

/*
 * cl_wait_route() - poll the NameServer until @topic's route lists @brokers
 * brokers with at least @write_queues writable queues in all (0: any).
 * Return: 0, or -ETIMEDOUT after @timeout_ms.
 */
int cl_wait_route(struct cl_env *e, const char *topic, unsigned brokers, unsigned write_queues,
		  unsigned timeout_ms);

#endif /* SP_TESTS_CL_ENV_H */
