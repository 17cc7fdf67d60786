/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route.h - a topic's route as a NameServer returns it (GET_ROUTEINFO_BY_TOPIC),
 * with sprocket's dataplane fields (docs/namesrv.md, "Dataplane fields").
 *
 * Ownership: a parsed route is immutable; one malloc'd block, sp_route_free().
 */
#ifndef SPROCKET_ROUTE_H
#define SPROCKET_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

#define SP_NAME_MAX 127

struct sp_route_broker {
	char name[SP_NAME_MAX + 1];    /* brokerName */
	char cluster[SP_NAME_MAX + 1]; /* cluster */
	char addr[64];		       /* master's (brokerId 0) remoting "ip:port"; "" if none */
	bool has_dp;	  /* a dataplane endpoint is known (the master's, else a slave's) */
	bool dp_is_slave; /* the endpoint is a slave's (no master registered): read only */
	uint32_t dp_ip;	  /* IPv4, network byte order */
	uint8_t dp_mac[6];
	uint16_t dp_port; /* base UDP port: core c listens on dp_port + c */
	uint16_t dp_cores;
};

struct sp_route_queue {
	uint32_t broker; /* index into sp_route.brokers */
	uint32_t read_queues;
	uint32_t write_queues;
	uint32_t perm; /* 2 write, 4 read */
	uint32_t sys_flag;
	/* owning core of queue id i, i < n_cores (dataplaneQueueCores); NULL when absent */
	const uint16_t *queue_cores;
	uint32_t n_cores;
};

struct sp_route {
	uint32_t n_brokers;
	uint32_t n_queues;
	struct sp_route_broker *brokers;
	struct sp_route_queue *queues; /* one per broker name, as queueDatas */
};

/**
 * sp_route_parse() - parse a GET_ROUTEINFO_BY_TOPIC response body.
 * Context: any thread; allocates. Untrusted input (fuzzed).
 * Return: 0, -EBADMSG malformed or inconsistent (a queueData naming no
 * brokerData is dropped, not an error), -ENOMEM.
 */
MUST_CHECK int sp_route_parse(const char *json, size_t len, struct sp_route **out);

void sp_route_free(struct sp_route *r);

/**
 * sp_route_fetch() - ask the NameServers in @namesrv ("a:p;b:p", tried in
 * order until one answers) for @topic's route.
 * Context: control thread of the caller; blocks up to @timeout_ms per server.
 * Return: 0; -ENOENT TOPIC_NOT_EXIST from a server; -ETIMEDOUT/-ECONNREFUSED
 * when none answered; -EBADMSG a bad answer.
 */
MUST_CHECK int sp_route_fetch(const char *namesrv, const char *topic, uint32_t timeout_ms,
			      struct sp_route **out);

/* Return: the owning core of @qid on @q's broker (qid % dp_cores when no map). */
uint16_t sp_route_queue_core(const struct sp_route *r, const struct sp_route_queue *q,
			     uint32_t qid);

#endif /* SPROCKET_ROUTE_H */
