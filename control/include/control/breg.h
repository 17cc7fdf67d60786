/* SPDX-License-Identifier: Apache-2.0 */
/*
 * breg.h - the broker's registration with its NameServers (REGISTER_BROKER,
 * docs/rocketmq-protocol.md §3.1): at start, every interval (30 s), and whenever the topic
 * set changes; UNREGISTER_BROKER at shutdown.
 *
 * A background agent owns it: it takes a snapshot of the broker's topics
 * through a callback, builds one RegisterBrokerBody, and registers it with
 * every NameServer in parallel, each over its own persistent connection
 * (a NameServer drops a broker as soon as the connection it registered over
 * closes, so the connection is kept). Failures are retried with backoff and
 * logged rate-limited; the agent never gives up while the broker runs.
 *
 * Ownership: struct ctl_breg is created and stopped by one control thread;
 * ctl_breg_kick() and ctl_breg_wait_registered() may be called from any
 * control thread in between.
 */
#ifndef SP_CONTROL_BREG_H
#define SP_CONTROL_BREG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

#define CTL_BREG_INTERVAL_MS 30000 /* registerNameServerPeriod */
#define CTL_BREG_TIMEOUT_MS 6000   /* RocketMQ's registration timeout */
#define CTL_BREG_ADDR_MAX 64

/* One TopicConfig. */
struct ctl_breg_topic {
	const char *name;
	uint32_t read_queues;
	uint32_t write_queues;
	uint32_t perm; /* 2 write, 4 read, 1 inherit */
	uint32_t sys_flag;
	bool order;
	/* owning dataplane core of queue i (dataplaneQueueCores); NULL: none sent */
	const uint16_t *queue_cores;
	uint32_t n_queue_cores;
};

/* Who registers: the REGISTER_BROKER extFields. */
struct ctl_breg_info {
	const char *cluster;
	const char *broker_name;
	int64_t broker_id;	 /* 0 master, > 0 slave */
	const char *broker_addr; /* remoting "ip:port" clients use */
	const char *ha_addr;	 /* "ip:port", NULL: not sent */
	/* Dataplane endpoint (docs/namesrv.md "Dataplane fields"), sent when has_dp. */
	bool has_dp;
	const char *dp_ip;  /* dotted IPv4 */
	const char *dp_mac; /* "xx:xx:xx:xx:xx:xx" */
	uint16_t dp_port;   /* base UDP port: core c listens on dp_port + c */
	uint16_t dp_cores;
	/*
	 * The group's epoch this broker is master of (failover,
	 * docs/failover.md; 0: static roles), sent as sprocketEpoch: a
	 * NameServer lets a master of a later epoch replace a live one.
	 */
	uint64_t epoch;
};

/**
 * typedef ctl_breg_snapshot_fn - the broker's current topics.
 * @t, @n: a malloc'd array (and what it points to) that the matching
 * release callback frees; @n may be 0.
 * @dv_counter, @dv_ts: the topic set's data version. Change it whenever the
 * topics change: a NameServer re-reads the topics only for a new version.
 *
 * Context: the agent thread; may block briefly (take the topic lock).
 * Return: 0, or a negative errno (logged; the round is retried later).
 */
typedef int (*ctl_breg_snapshot_fn)(void *arg, struct ctl_breg_topic **t, size_t *n,
				    uint64_t *dv_counter, int64_t *dv_ts);

/* Frees what a successful snapshot returned. Context: the agent thread. */
typedef void (*ctl_breg_release_fn)(void *arg, struct ctl_breg_topic *t, size_t n);

/* The topic set's data version alone (no snapshot). Context: the agent thread. */
typedef void (*ctl_breg_dv_fn)(void *arg, uint64_t *dv_counter, int64_t *dv_ts);

struct ctl_breg_cfg {
	const char *namesrv;  /* "a:p;b:p" */
	uint32_t interval_ms; /* 0: CTL_BREG_INTERVAL_MS */
	uint32_t timeout_ms;  /* per request, connect included; 0: CTL_BREG_TIMEOUT_MS */
	struct ctl_breg_info info;
	ctl_breg_snapshot_fn snapshot;
	ctl_breg_release_fn release;
	/*
	 * NULL, or force_register: every round registers every topic (RocketMQ's
	 * forceRegister=true). Else a round whose data version a NameServer
	 * already holds only asks it (QUERY_DATA_VERSION, which refreshes the
	 * broker's heartbeat there), and registers when it answers changed.
	 */
	ctl_breg_dv_fn dv;
	bool force_register;
	void *arg;
	/* the broker's accessKey/secretKey: every request to a NameServer is signed (NULL: not) */
	const char *access_key;
	const char *secret_key;
};

struct ctl_breg;

/**
 * ctl_breg_body() - the RegisterBrokerBody JSON for @t (fastjson's form:
 * keys sorted, no blanks), with dataplaneQueueCores for topics that have a
 * map.
 * @json: malloc'd, NUL-terminated (caller frees); @len: its length.
 *
 * Context: any thread, allocates.
 * Return: 0, -EINVAL a topic without a name or a map without its array,
 * -ENOMEM.
 */
MUST_CHECK int ctl_breg_body(const struct ctl_breg_topic *t, size_t n, uint64_t dv_counter,
			     int64_t dv_ts, char **json, size_t *len);

/**
 * ctl_breg_delta() - a delta registration body (docs/namesrv.md, "Delta
 * registration"): the topics of @t that are new or differ from @prev's topic
 * of the same name, and in sprocketDeletedTopics the names of @prev that @t
 * lacks, with @t's data version.
 * @n_changed, @n_deleted: what it holds.
 *
 * Context: any thread, allocates; O(@prev_n + @n).
 * Return: as ctl_breg_body().
 */
MUST_CHECK int ctl_breg_delta(const struct ctl_breg_topic *prev, size_t prev_n,
			      const struct ctl_breg_topic *t, size_t n, uint64_t dv_counter,
			      int64_t dv_ts, char **json, size_t *len, size_t *n_changed,
			      size_t *n_deleted);

/**
 * ctl_breg_start() - start the agent: it registers with every NameServer at
 * once, then every @cfg->interval_ms and after each ctl_breg_kick().
 * @cfg: copied (strings included); the callbacks and @cfg->arg must stay
 * valid until ctl_breg_stop() returns.
 *
 * Context: control thread; starts threads, does not wait for a NameServer.
 * Return: 0, -EINVAL (no NameServer, a missing name, address or callback,
 * a dataplane endpoint without cores), -ENOMEM, -errno from pthread_create.
 */
MUST_CHECK int ctl_breg_start(const struct ctl_breg_cfg *cfg, struct ctl_breg **out);

/**
 * ctl_breg_kick() - the topic set changed: take a snapshot and register now.
 * Context: any control thread; non-blocking (a short mutex, no I/O).
 */
void ctl_breg_kick(struct ctl_breg *b);

/**
 * ctl_breg_wait_registered() - wait until every NameServer has accepted a
 * registration made since ctl_breg_start() or the last ctl_breg_kick().
 * Context: any control thread; blocks up to @timeout_ms.
 * Return: 0, -ETIMEDOUT.
 */
MUST_CHECK int ctl_breg_wait_registered(struct ctl_breg *b, uint32_t timeout_ms);

/**
 * ctl_breg_wait_first() - wait until every NameServer has answered the first
 * round (accepted, refused, or failed at least once), so that a broker says
 * "ready" only once clients can find it through a route, or once it knows
 * they cannot yet (docs/broker.md, "Start-up").
 * Context: the broker's main thread at start; blocks up to @timeout_ms.
 * ctl_breg_accepted() then says how many accepted it.
 */
void ctl_breg_wait_first(struct ctl_breg *b, uint32_t timeout_ms);

/**
 * ctl_breg_accepted() - how many of the NameServers accepted this broker's
 * latest registration with them (@accepted: once accepted, and neither
 * failed nor refused since), of how many (@total). A NameServer that went
 * away counts out at the next round that fails (registerNameServerPeriod).
 * Context: any control thread; a short mutex, never waits on I/O.
 */
void ctl_breg_accepted(struct ctl_breg *b, uint32_t *accepted, uint32_t *total);

/* Registrations accepted, over all NameServers, since start. */
struct ctl_breg_stats {
	uint64_t whole;	      /* with the whole topic set */
	uint64_t deltas;      /* with the change since the set the server held */
	uint64_t body_bytes;  /* their bodies' bytes */
	uint64_t delta_stale; /* deltas refused for an unknown base, then sent whole */
};

/* Context: any control thread; a short mutex. */
void ctl_breg_stats(struct ctl_breg *b, struct ctl_breg_stats *out);
/*
 * ctl_breg_refused() - did a NameServer's latest answer to our registration
 * refuse it because another broker holds our brokerName and brokerId there
 * (its route leads there, not here)? Then true, with the first such server
 * and its reason in @why. Other refusals (a signature, a limit) are logged
 * only; an unreachable server keeps its last answer.
 * Context: any thread.
 */
bool ctl_breg_refused(struct ctl_breg *b, char *why, size_t why_len);

/**
 * ctl_breg_master() - a slave's master as the newest registration answer
 * named it (RegisterBrokerResult's haServerAddr and masterAddr).
 * Context: any control thread; a short mutex.
 * Return: true when an answer named a master (@ha may be "" if it sent none).
 */
bool ctl_breg_master(struct ctl_breg *b, char *ha, size_t ha_cap, char *addr, size_t addr_cap);

struct sp_rem;

/**
 * ctl_breg_credentials() - sign what goes out on @c with the broker's
 * accessKey/secretKey (a slave's sync with its master). No-op without them.
 * Return: 0, -errno of sp_rem_credentials().
 */
MUST_CHECK int ctl_breg_credentials(const struct ctl_breg *b, struct sp_rem *c);

/**
 * ctl_breg_stop() - stop the agent: send UNREGISTER_BROKER to every
 * NameServer (best effort, in parallel, each bounded by the timeout),
 * close the connections, join the threads and free @b. NULL is a no-op.
 * Context: the control thread that started it; blocks up to about two
 * timeouts (a registration in flight, then the unregistration).
 */
void ctl_breg_stop(struct ctl_breg *b);

#endif /* SP_CONTROL_BREG_H */
