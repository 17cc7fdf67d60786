/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ns.h - sprocket-namesrv: the NameServer, RocketMQ's route registry.
 *
 * Two layers. struct ns_state is what requests act on (route table, KV
 * config) with a frames-in, responses-out entry point, ns_handle(), that the
 * server, the fuzz target and tests share. struct ns_server is the daemon
 * around it: one epoll io thread that owns every connection and answers
 * lookups itself, and one writer thread (the registrar) that runs every
 * request that changes state, plus the expiry scan, so a 100,000-topic
 * registration never stalls a lookup. docs/namesrv.md has the whole design.
 */
#ifndef SP_CONTROL_NS_H
#define SP_CONTROL_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cidr.h"
#include "common/compiler.h"

/* Request-level settings. */
struct cfg;
struct cfg_key;

struct ns_conf {
	bool order_msg;		/* orderMessageEnable: add orderTopicConf to routes */
	const char *kv_path;	/* KV config file; "" keeps KV in memory only */
	struct cidr_list admin; /* adminAllowedAddrs: who may send admin requests */
	bool acl_enable;	/* aclEnable: route changes need an admin account's signature */
	const char *acl_path;	/* aclFile */
	bool protected_mode;	/* ACL off and no bindAddress: route changes from loopback only */
	size_t inflate_max;	/* maxInflatedBodySize: a compressed registration's inflated cap */
	/* GET/UPDATE_NAMESRV_CONFIG: the daemon's configuration and its keys (NULL: refused) */
	const struct cfg *cfg;
	const struct cfg_key *keys;
	size_t n_keys;
};

enum ns_role {
	NS_ROLE_READER = 0, /* io thread: RCU reader, answers lookups */
	NS_ROLE_WRITER = 1, /* the writer thread: runs everything that changes state */
};

/* ns_handle() result: the request changes state; run it on the writer. */
#define NS_HANDLE_WRITER 1

struct ns_state;

/**
 * ns_state_create() - empty route table, KV config loaded from @conf->kv_path
 * (its directory is created when missing).
 * Context: startup. Return: 0, -ENOMEM, -errno or -EBADMSG from the KV file.
 */
MUST_CHECK int ns_state_create(const struct ns_conf *conf, struct ns_state **out);

/* REGISTER_BROKER bodies refused for inflating past maxInflatedBodySize or 64x. */
uint64_t ns_inflate_refused(struct ns_state *st);

/* Context: shutdown, after both roles stopped calling in. */
void ns_state_destroy(struct ns_state *st);

/**
 * ns_handle() - decode one complete frame, run it, encode the response.
 * @role: the calling thread's role; each role may be used by one thread at a time.
 * @conn: the connection the frame came on (REGISTER_BROKER binds the broker to it).
 * @peer_ip: the sender's IPv4 address, network order (adminAllowedAddrs).
 * @now_ms: monotonic ms (heartbeat time).
 * @resp: malloc'd response frame (caller frees), NULL when none is due
 * (oneway request, or a response frame from the peer).
 *
 * Context: NS_ROLE_READER: a thread registered with urcu_memb_register_thread(),
 * outside a read section; non-blocking. NS_ROLE_WRITER: may block (fsync,
 * grace periods); not inside a read section.
 * Return: 0; NS_HANDLE_WRITER (reader role only) when the request must run on
 * the writer; -EBADMSG/-EPROTO/-E2BIG/-ENOBUFS the frame does not decode (the
 * caller closes the connection, as RocketMQ does); -ENOMEM.
 */
MUST_CHECK int ns_handle(struct ns_state *st, enum ns_role role, uint64_t conn, uint32_t peer_ip,
			 uint64_t now_ms, const uint8_t *frame, size_t len, uint8_t **resp,
			 size_t *resp_len);

/* Connection @conn closed: drop the brokers it registered. Context: writer. Return: count, -ENOMEM. */
MUST_CHECK int ns_conn_closed(struct ns_state *st, uint64_t conn);

/* Drop brokers silent for more than @expire_ms. Context: writer. Return: count, -ENOMEM. */
MUST_CHECK int ns_expire(struct ns_state *st, uint64_t now_ms, uint64_t expire_ms);

/* Return: live broker addresses (writer thread). */
uint32_t ns_live_brokers(const struct ns_state *st);

/* Once a second on the writer thread: the ACL file's reload (docs/security.md). */
void ns_tick(struct ns_state *st, uint64_t now_ms);

/* Requests the ACL or protected mode refused, by reason (0 .. 4: no_access_key,
 * unknown_access_key, bad_signature, not_admin, protected_mode). */
uint64_t ns_acl_denied(struct ns_state *st, unsigned reason);
const char *ns_acl_reason_name(unsigned reason);

/* The daemon. */
struct ns_server_conf {
	const char *bind_addr;	     /* IPv4 literal, "0.0.0.0" for all */
	uint16_t port;		     /* 0: the kernel picks (tests) */
	size_t frame_max;	     /* largest frame, length field included */
	uint64_t frame_mem_max;	     /* receive buffers of frames not yet whole, all together */
	uint32_t max_conns;	     /* connections beyond this are closed at accept */
	uint32_t fd_ceiling;	     /* ... and one whose descriptor is >= this (0: none) */
	uint32_t max_conns_per_addr; /* ... and beyond this many from one address (0: no cap) */
	uint64_t scan_ms;	     /* expiry scan interval */
	uint64_t expire_ms;	     /* broker silence before it is dropped */
	uint64_t idle_ms;	     /* close connections idle this long; 0: never */
	struct ns_conf st;
};

struct ns_server;

/**
 * ns_server_create() - state, listening socket (bound now, so the port is
 * known), epoll set. No thread runs until ns_server_run().
 * Context: startup. Return: 0, -errno.
 */
MUST_CHECK int ns_server_create(const struct ns_server_conf *conf, struct ns_server **out);

/* Return: the bound port (useful with port 0). */
uint16_t ns_server_port(const struct ns_server *srv);

/**
 * ns_server_run() - start the writer thread and run the io loop on the
 * calling thread until ns_server_stop() or, when @sig_fd >= 0, until that
 * signalfd becomes readable.
 * Context: the thread that created @srv; blocking.
 * Return: 0 after a clean stop, -errno on a fatal error.
 */
MUST_CHECK int ns_server_run(struct ns_server *srv, int sig_fd);

/*
 * The io loop's eventfd: another thread that writes it wakes the loop, which
 * then calls the ns_server_set_poll() function (the HTTP endpoints hand their
 * requests to the io thread so, ns_http.c). Context: before ns_server_run().
 */
int ns_server_wake_fd(const struct ns_server *srv);
void ns_server_set_poll(struct ns_server *srv, void (*fn)(void *arg), void *arg);
/* The state the server's requests act on. */
struct ns_state *ns_server_state(struct ns_server *srv);

/* Connections and refusals (docs/isolation.md). Context: the io thread. */
struct ns_server_stats {
	uint32_t conns;
	uint64_t refused_conns, refused_addr, refused_nofd; /* at accept */
	uint64_t refused_size, refused_mem;		    /* frames */
	uint64_t frame_mem;				    /* bytes of partial frames held */
};
void ns_server_stats(const struct ns_server *srv, struct ns_server_stats *out);

/* Ask ns_server_run() to return. Context: any thread (not a signal handler). */
void ns_server_stop(struct ns_server *srv);

/* Context: after ns_server_run() returned (or was never called). */
void ns_server_destroy(struct ns_server *srv);

#endif /* SP_CONTROL_NS_H */
