// SPDX-License-Identifier: Apache-2.0
/*
 * acl_door.c - the permission table of every door (acl_door.h).
 *
 * One row per request code a daemon answers. Where RocketMQ 4.9 is looser
 * the row is stricter, and docs/security.md says where: the offset and
 * time lookups need SUB on their topic (RocketMQ checks nothing), lookups
 * by id or key check each record's own topic, END_TRANSACTION needs PUB on
 * the half's real topic, a slave's GET_ALL_* sync needs an admin account
 * (brokers sign with one already), and locks need the group and topics.
 *
 * The tables are sorted by code (dataplane: by op), searched by bisection.
 */
#include <string.h>

#include "common/acl_door.h"
#include "common/compiler.h"
#include "wire/dp.h"
#include "wire/remoting.h"

#define E(c, cls, fl)                                                                              \
	{                                                                                          \
		WIRE_REQ_##c, #c, ACL_DOOR_##cls, (fl)                                             \
	}
#define ADDRS ACL_DOOR_ADDRS
#define RECORDS ACL_DOOR_RECORDS
#define WRITE ACL_DOOR_WRITE

static const struct acl_door broker[] = {
	E(SEND_MESSAGE, TOPIC_PUB, 0),
	E(PULL_MESSAGE, TOPIC_SUB, 0),
	E(QUERY_MESSAGE, TOPIC_SUB, RECORDS),
	E(QUERY_CONSUMER_OFFSET, GROUP, 0),
	E(UPDATE_CONSUMER_OFFSET, GROUP, 0),
	E(UPDATE_AND_CREATE_TOPIC, ADMIN, ADDRS),
	E(GET_ALL_TOPIC_CONFIG, ADMIN, 0),
	E(UPDATE_BROKER_CONFIG, ADMIN, ADDRS),
	E(GET_BROKER_CONFIG, ADMIN, ADDRS),
	E(GET_BROKER_RUNTIME_INFO, ADMIN, ADDRS),
	E(SEARCH_OFFSET_BY_TIMESTAMP, TOPIC_SUB, 0),
	E(GET_MAX_OFFSET, TOPIC_SUB, 0),
	E(GET_MIN_OFFSET, TOPIC_SUB, 0),
	E(GET_EARLIEST_MSG_STORETIME, TOPIC_SUB, 0),
	E(VIEW_MESSAGE_BY_ID, SIGNED, RECORDS),
	E(HEART_BEAT, GROUP, 0),
	E(UNREGISTER_CLIENT, GROUP, 0),
	E(CONSUMER_SEND_MSG_BACK, GROUP, 0),
	E(END_TRANSACTION, TOPIC_PUB, RECORDS),
	E(GET_CONSUMER_LIST_BY_GROUP, GROUP, 0),
	E(LOCK_BATCH_MQ, GROUP, 0),
	E(UNLOCK_BATCH_MQ, GROUP, 0),
	E(GET_ALL_CONSUMER_OFFSET, ADMIN, 0),
	E(GET_ALL_DELAY_OFFSET, ADMIN, 0),
	E(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, ADMIN, ADDRS),
	E(GET_ALL_SUBSCRIPTIONGROUP_CONFIG, ADMIN, 0),
	E(GET_TOPIC_STATS_INFO, ADMIN, ADDRS),
	E(GET_CONSUMER_CONNECTION_LIST, ADMIN, ADDRS),
	E(GET_PRODUCER_CONNECTION_LIST, ADMIN, ADDRS),
	E(DELETE_SUBSCRIPTIONGROUP, ADMIN, ADDRS),
	E(GET_CONSUME_STATS, ADMIN, ADDRS),
	E(DELETE_TOPIC_IN_BROKER, ADMIN, ADDRS),
	E(INVOKE_BROKER_TO_RESET_OFFSET, ADMIN, ADDRS),
	E(QUERY_TOPIC_CONSUME_BY_WHO, ADMIN, ADDRS),
	E(CLEAN_EXPIRED_CONSUMEQUEUE, ADMIN, ADDRS),
	E(GET_CONSUMER_RUNNING_INFO, ADMIN, ADDRS),
	E(SEND_MESSAGE_V2, TOPIC_PUB, 0),
	E(VIEW_BROKER_STATS_DATA, ADMIN, ADDRS),
	E(SEND_BATCH_MESSAGE, TOPIC_PUB, 0),
};

static const struct acl_door namesrv[] = {
	E(PUT_KV_CONFIG, ADMIN, ADDRS | WRITE),
	E(GET_KV_CONFIG, OPEN, 0),
	E(DELETE_KV_CONFIG, ADMIN, ADDRS | WRITE),
	E(REGISTER_BROKER, ADMIN, WRITE),
	E(UNREGISTER_BROKER, ADMIN, WRITE),
	E(GET_ROUTEINFO_BY_TOPIC, OPEN, 0),
	E(GET_BROKER_CLUSTER_INFO, OPEN, 0),
	E(WIPE_WRITE_PERM_OF_BROKER, ADMIN, ADDRS | WRITE),
	E(GET_ALL_TOPIC_LIST_FROM_NAMESERVER, OPEN, 0),
	E(DELETE_TOPIC_IN_NAMESRV, ADMIN, ADDRS | WRITE),
	E(GET_TOPICS_BY_CLUSTER, OPEN, 0),
	E(GET_SYSTEM_TOPIC_LIST_FROM_NS, OPEN, 0),
	E(UPDATE_NAMESRV_CONFIG, ADMIN, ADDRS | WRITE),
	E(GET_NAMESRV_CONFIG, ADMIN, ADDRS),
	E(QUERY_DATA_VERSION, ADMIN, WRITE),
	E(ADD_WRITE_PERM_OF_BROKER, ADMIN, ADDRS | WRITE),
};

#undef E
#define E(c, cls, fl)                                                                              \
	{                                                                                          \
		WIRE_DP_OP_##c, #c, ACL_DOOR_##cls, (fl)                                           \
	}

static const struct acl_door dataplane[] = {
	E(SEND, TOPIC_PUB, 0),
	E(SEND_BATCH, TOPIC_PUB, 0),
	E(PULL, TOPIC_SUB, 0),
	E(QUERY_OFFSET, GROUP, 0),
	E(UPDATE_OFFSET, GROUP, 0),
	E(GET_MIN_OFFSET, TOPIC_SUB, 0),
	E(GET_MAX_OFFSET, TOPIC_SUB, 0),
	E(SEARCH_OFFSET, TOPIC_SUB, 0),
	E(SEND_BACK, GROUP, 0),
	E(DISCONNECT, OPEN, 0),
	E(PING, OPEN, 0),
	E(REPL, ADMIN, 0),
};

#undef E
#define E(path, cls, fl)                                                                           \
	{                                                                                          \
		0, path, ACL_DOOR_##cls, (fl)                                                      \
	}

/* In match order: exact paths, then the console (its page and files: every other path). */
static const struct acl_door http_broker[] = {
	E("/metrics", OPEN, 0),
	E("/health", OPEN, 0),
	E("/api/broker", SIGNED, 0),
	E("/api/topics", SIGNED, 0),
	E("/api/groups", SIGNED, 0),
	E("/api/latency", SIGNED, 0),
	E("/api/message", TOPIC_SUB, RECORDS),
	E("/*", SIGNED, 0),
};

static const struct acl_door http_namesrv[] = {
	E("/metrics", OPEN, 0),
	E("/health", OPEN, 0),
	E("/api/cluster", SIGNED, 0),
	E("/*", SIGNED, 0),
};

static const struct acl_door *
find(const struct acl_door *t, size_t n, int32_t code)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t[mid].code == code)
			return &t[mid];
		if (t[mid].code < code)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct acl_door *
acl_door_broker(int32_t code)
{
	return find(broker, ARRAY_SIZE(broker), code);
}

const struct acl_door *
acl_door_namesrv(int32_t code)
{
	return find(namesrv, ARRAY_SIZE(namesrv), code);
}

const struct acl_door *
acl_door_dataplane(int32_t op)
{
	return find(dataplane, ARRAY_SIZE(dataplane), op);
}

const struct acl_door *
acl_door_http(bool ns, const char *path)
{
	const struct acl_door *t = ns ? http_namesrv : http_broker;
	size_t n = ns ? ARRAY_SIZE(http_namesrv) : ARRAY_SIZE(http_broker);

	for (size_t i = 0; i < n; i++) {
		const char *p = t[i].name;
		size_t pl = strlen(p);

		if (pl >= 2 && p[pl - 1] == '*' ? strncmp(path, p, pl - 1) == 0
						: strcmp(path, p) == 0)
			return &t[i];
	}
	return NULL;
}

const struct acl_door *
acl_door_table(enum acl_door_table t, size_t *n)
{
	switch (t) {
	case ACL_DOOR_T_BROKER:
		*n = ARRAY_SIZE(broker);
		return broker;
	case ACL_DOOR_T_NAMESRV:
		*n = ARRAY_SIZE(namesrv);
		return namesrv;
	case ACL_DOOR_T_DATAPLANE:
		*n = ARRAY_SIZE(dataplane);
		return dataplane;
	case ACL_DOOR_T_HTTP_BROKER:
		*n = ARRAY_SIZE(http_broker);
		return http_broker;
	case ACL_DOOR_T_HTTP_NAMESRV:
		*n = ARRAY_SIZE(http_namesrv);
		return http_namesrv;
	default:
		*n = 0;
		return NULL;
	}
}

const char *
acl_door_class_name(unsigned cls)
{
	static const char *const names[] = {
		[ACL_DOOR_OPEN] = "open",	    [ACL_DOOR_SIGNED] = "signed",
		[ACL_DOOR_TOPIC_PUB] = "topic PUB", [ACL_DOOR_TOPIC_SUB] = "topic SUB",
		[ACL_DOOR_GROUP] = "group",	    [ACL_DOOR_ADMIN] = "admin",
	};

	return cls < ARRAY_SIZE(names) ? names[cls] : "?";
}
