/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route.h - the NameServer's route table: which brokers serve which topics.
 *
 * Readers (the io thread answering GET_ROUTEINFO_BY_TOPIC and friends) see
 * an immutable snapshot, struct route_table, through RCU (liburcu, memb
 * flavour): they take urcu_memb_read_lock(), call route_db_current() and one
 * of the route_json_*() encoders, and drop the lock. They never take a lock
 * and never wait for a writer.
 *
 * One writer thread (the NameServer's registrar) changes the table: every
 * route_db_*() mutator builds a new snapshot off to the side, sharing every
 * broker it does not touch, publishes it with rcu_assign_pointer() and frees
 * what it replaced after urcu_memb_synchronize_rcu(). A registration whose
 * topic set is unchanged (same dataVersion) only refreshes the broker's
 * liveness, which lives in writer-private state, and publishes nothing.
 *
 * Model (RocketMQ's RouteInfoManager, docs/rocketmq-protocol.md §3.1): a brokerName
 * has up to ROUTE_ADDRS_MAX addresses keyed by brokerId (0 = master), a
 * cluster, a topic set (from the master's registrations) and a write-perm
 * mask (WIPE_WRITE_PERM_OF_BROKER). Each address is live while it
 * re-registers within the expiry time and its registering connection is
 * open; when the last address of a brokerName goes, the brokerName and its
 * topics go too.
 */
#ifndef SP_CONTROL_ROUTE_H
#define SP_CONTROL_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

#define ROUTE_TOPIC_MAX 127 /* RocketMQ's TopicValidator limit */
#define ROUTE_NAME_MAX 127  /* brokerName, clusterName */
#define ROUTE_ADDR_MAX 63   /* "host:port" */
#define ROUTE_ADDRS_MAX 16  /* broker ids per brokerName */
#define ROUTE_QUEUES_MAX                                                                           \
	65535		     /* read/write queue numbers per topic (the broker's META_QUEUES_MAX) */
#define ROUTE_CORES_MAX 1024 /* dataplane cores per broker */

#define ROUTE_PERM_INHERIT 0x1
#define ROUTE_PERM_WRITE 0x2
#define ROUTE_PERM_READ 0x4
#define ROUTE_PERM_MAX 0xF

/* A broker process's sprocket dataplane endpoint (docs/namesrv.md). */
struct route_dp {
	bool present;
	char ip[16]; /* dotted IPv4, validated */
	uint8_t mac[6];
	uint16_t port;	/* base UDP port; core c listens on port + c */
	uint16_t cores; /* 1..ROUTE_CORES_MAX */
};

/* A broker's data version (RocketMQ DataVersion). */
struct route_dv {
	int64_t timestamp;
	int64_t counter;
};

/* One TopicConfig as parsed from a registration. */
struct route_topic_in {
	const char *name;
	size_t name_len;
	int64_t read_q;
	int64_t write_q;
	int64_t perm;
	int64_t sysflag;
	/* Optional explicit queue -> core map (dataplaneQueueCores), n_cores entries. */
	const uint16_t *cores;
	uint32_t n_cores;
};

/*
 * The topic set of one brokerName: built by the writer, then immutable and
 * shared by every snapshot that still holds that brokerName unchanged.
 * Ownership: writer thread only for create/add/seal/put; readers only look up
 * through a published table.
 */
struct route_tset;

/* Context: writer (or a parser feeding it). Return: 0, -ENOMEM. */
MUST_CHECK int route_tset_create(uint32_t size_hint, struct route_tset **out);

/**
 * route_tset_add() - add or replace (the later one wins) a topic.
 *
 * Context: writer, before route_tset_seal().
 * Return: 0, -EINVAL name outside ^[%|a-zA-Z0-9_-]{1,127}$ or a number out of
 * range (the caller skips that topic), -ENOMEM.
 */
MUST_CHECK int route_tset_add(struct route_tset *ts, const struct route_topic_in *t);

/* Return: topics in the set. */
uint32_t route_tset_count(const struct route_tset *ts);

/* Drop the creator's reference of a set never handed to route_db_register(). */
void route_tset_put(struct route_tset *ts);

/* Return: true when @name is a valid RocketMQ topic name. */
bool route_topic_name_ok(const char *name, size_t len);

/* One REGISTER_BROKER, validated by the caller (non-empty names within limits). */
struct route_reg {
	const char *cluster;
	const char *bname;
	const char *addr;
	const char *ha_addr;
	int64_t id;
	struct route_dp dp;
	struct route_dv dv;
	uint64_t conn;	/* registering connection; its close drops the address */
	uint64_t epoch; /* failover: a master of a later epoch replaces a live one (0: none) */
	/* NULL keeps the current set; else a new set whose reference passes to the db. */
	struct route_tset *topics;
	/*
	 * A delta registration (docs/namesrv.md): the version it applies to.
	 * @topics then holds the added and changed topics only, and @deleted
	 * (its reference also passes to the db; NULL: none) the removed names.
	 */
	const struct route_dv *base;
	struct route_tset *deleted;
};

/* What a registering slave learns about its master. */
struct route_reg_out {
	char master_addr[ROUTE_ADDR_MAX + 1];
	char master_ha[ROUTE_ADDR_MAX + 1];
	char holder[ROUTE_ADDR_MAX + 1]; /* -EEXIST: the live address that holds the id */
	/* 0 and a live address replaced: it held the id in this earlier epoch */
	uint64_t replaced_epoch;
	char replaced[ROUTE_ADDR_MAX + 1];
};

struct route_db;
struct route_table;

/* Context: startup. Return: 0, -ENOMEM. */
MUST_CHECK int route_db_create(struct route_db **out);

/* Context: shutdown, after every reader has stopped. */
void route_db_destroy(struct route_db *db);

/**
 * route_db_wants_topics() - does a registration need its topic set parsed?
 *
 * True for a master (id 0) whose address is not live yet or whose data
 * version differs from the last one registered. Slaves never carry topics.
 * Context: writer thread.
 */
bool route_db_wants_topics(const struct route_db *db, const char *addr, int64_t id,
			   const struct route_dv *dv);

/**
 * route_db_register() - register or refresh a broker address.
 * @now_ms: monotonic ms, recorded as the address's last heartbeat.
 *
 * Takes @reg->topics and @reg->deleted (also on error). A delta (@reg->base
 * set) applies to the set registered from @reg->addr as master of
 * @reg->bname at version *@reg->base, and is refused -ESTALE otherwise: the
 * broker then registers its whole set. Publishes a new snapshot when anything
 * a reader sees changed, and waits for a grace period before freeing the old
 * one (blocking).
 * Context: writer thread, not inside an RCU read section.
 * Return: 0, -ENOSPC brokerName has ROUTE_ADDRS_MAX addresses, -EEXIST
 * another live address holds (brokerName, brokerId) (@out->holder; two
 * masters of one group, say: the first keeps it until it unregisters,
 * its connection closes or it expires), -ESTALE (a delta, above), -ENOMEM.
 */
MUST_CHECK int route_db_register(struct route_db *db, struct route_reg *reg, uint64_t now_ms,
				 struct route_reg_out *out);

/**
 * route_db_unregister() - remove one address (UNREGISTER_BROKER).
 * Context: writer thread. Return: 0, -ENOENT not registered, -ENOMEM.
 */
MUST_CHECK int route_db_unregister(struct route_db *db, const char *bname, const char *addr,
				   int64_t id);

/* Remove every address registered over @conn. Context: writer. Return: count or -ENOMEM. */
MUST_CHECK int route_db_conn_closed(struct route_db *db, uint64_t conn);

/* Remove every address silent for more than @expire_ms. Context: writer. Return: count or -ENOMEM. */
MUST_CHECK int route_db_expire(struct route_db *db, uint64_t now_ms, uint64_t expire_ms);

/**
 * route_db_write_perm() - clear WRITE from every topic of @bname until its
 * master registers a new topic set (@add false: WIPE_WRITE_PERM_OF_BROKER),
 * or give it back (ADD_WRITE_PERM_OF_BROKER).
 * @count: topics that were writable (wipe) or are writable now (add).
 * Context: writer. Return: 0, -ENOENT unknown brokerName, -ENOMEM.
 */
MUST_CHECK int route_db_write_perm(struct route_db *db, const char *bname, bool add,
				   uint32_t *count);

/**
 * route_db_delete_topic() - remove @topic from the topic set of every
 * brokerName of @cluster (NULL: of every cluster); a master that still has it
 * brings it back with its next new topic set.
 * @count: brokerNames that had it.
 * Context: writer. Return: 0, -ENOENT nowhere, -ENOMEM.
 */
MUST_CHECK int route_db_delete_topic(struct route_db *db, const char *topic, const char *cluster,
				     uint32_t *count);

/**
 * route_db_query_dv() - QUERY_DATA_VERSION: compare @dv with the stored one
 * and, when equal, count it as a heartbeat.
 * @stored: the stored version, when the address is live (*@have set).
 * Context: writer. Return: true when changed (or not registered).
 */
bool route_db_query_dv(struct route_db *db, const char *addr, const struct route_dv *dv,
		       uint64_t now_ms, struct route_dv *stored, bool *have);

/* Return: live addresses (writer thread; tests and logs). */
uint32_t route_db_live_count(const struct route_db *db);

/**
 * route_db_current() - the published snapshot.
 * Context: inside urcu_memb_read_lock(); the pointer is valid until the
 * matching unlock. The writer thread may call it without the lock.
 */
const struct route_table *route_db_current(struct route_db *db);

/**
 * route_json_topic() - TopicRouteData JSON for @topic (docs/rocketmq-protocol.md
 * §3.3, plus the dataplane fields of docs/namesrv.md).
 * @order_conf: orderTopicConf value to include, or NULL.
 * @out: malloc'd body (caller frees).
 *
 * Context: any thread holding the RCU read lock for @t, non-blocking.
 * Return: 0, -ENOENT no queue data for @topic, -ENOMEM.
 */
MUST_CHECK int route_json_topic(const struct route_table *t, const char *topic, size_t len,
				const char *order_conf, uint8_t **out, size_t *out_len);

/* ClusterInfo JSON (GET_BROKER_CLUSTER_INFO). Context and Return as route_json_topic(). */
MUST_CHECK int route_json_cluster(const struct route_table *t, uint8_t **out, size_t *out_len);

/* {"topicList":[...]} over all brokerNames, each topic once. As route_json_topic(). */
MUST_CHECK int route_json_topic_list(const struct route_table *t, uint8_t **out, size_t *out_len);

/* {"topicList":[...]}: the topics of @cluster's brokers (GET_TOPICS_BY_CLUSTER). */
MUST_CHECK int route_json_cluster_topics(const struct route_table *t, const char *cluster,
					 uint8_t **out, size_t *out_len);

/* RocketMQ's system topic list: every cluster and brokerName, and a master's address. */
MUST_CHECK int route_json_system_topics(const struct route_table *t, uint8_t **out,
					size_t *out_len);

/* Return: topics across all brokerNames, duplicates counted once per brokerName. */
uint64_t route_table_topic_count(const struct route_table *t);

/* One broker address of a snapshot (route_table_each()). */
struct route_addr_info {
	const char *cluster, *bname, *addr;
	int64_t id;
	uint32_t topics; /* of its brokerName (a master's registration) */
	bool writable;	 /* not wiped by WIPE_WRITE_PERM_OF_BROKER */
};

/* Call @fn for each registered address of @t. Context: an RCU reader of @t. */
void route_table_each(const struct route_table *t,
		      void (*fn)(void *arg, const struct route_addr_info *a), void *arg);

/* One topic of one brokerName (route_table_each_topic()); @name is not NUL-terminated. */
struct route_topic_info {
	const char *cluster, *bname;
	const char *name;
	size_t name_len;
	uint16_t read_q, write_q;
	uint8_t perm; /* with WIPE_WRITE_PERM's bits cleared */
};

/* Call @fn for each topic of each brokerName of @t. Context: an RCU reader of @t. */
void route_table_each_topic(const struct route_table *t,
			    void (*fn)(void *arg, const struct route_topic_info *ti), void *arg);

#endif /* SP_CONTROL_ROUTE_H */
