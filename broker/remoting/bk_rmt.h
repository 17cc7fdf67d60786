/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_rmt.h - the broker's RocketMQ remoting server (TCP, listenPort), run by
 * the control thread so that RocketMQ 4.x clients work unchanged.
 * docs/remoting.md has the design.
 *
 * The server decodes frames, keeps what is control-side state (consumer
 * groups from heartbeats, queue locks, topic creation) and turns every data
 * request into a dataplane request that it posts on the owning core's
 * command ring (struct bk_rcmd); the core answers on its completion ring and
 * the server turns that answer into the remoting response. The control side
 * never appends and never reads the log.
 */
#ifndef SP_BROKER_BK_RMT_H
#define SP_BROKER_BK_RMT_H

#include <stdbool.h>
#include <stdint.h>

#include "bk_priv.h"
#include "common/cidr.h"
#include "common/compiler.h"
#include "store/meta.h"

struct bk_rmt;
struct jbuf;

/* TLS on listenPort (bk_rmt_tls.c): RocketMQ's tlsServerMode. */
enum bk_tls_mode {
	BK_TLS_DISABLED,
	BK_TLS_PERMISSIVE, /* TLS and plain TCP, told apart by the first byte */
	BK_TLS_ENFORCING,  /* TLS only */
};

struct bk_rmt_tls {
	enum bk_tls_mode mode;
	const char *cert;	  /* tlsServerCertPath: PEM chain */
	const char *key;	  /* tlsServerKeyPath: PEM */
	const char *key_password; /* tlsServerKeyPassword, or NULL/"" */
	bool auth_client;	  /* tlsServerAuthClient: clients need a certificate... */
	const char *trust;	  /* ... signed by tlsServerTrustCertPath */
};

struct bk_rmt_conf {
	const char *ip;		    /* listen address (IPv4) */
	uint16_t port;		    /* 0: any free port */
	uint32_t max_frame;	    /* remotingMaxFrameSize: one connection's frame at most */
	uint64_t frame_mem_max;	    /* remotingMaxFrameMemory: all connections' frames */
	uint32_t inflight_per_core; /* commands at one core at most (< its ring) */
	uint32_t max_conns;
	uint32_t fd_ceiling;	     /* refuse a connection whose descriptor is >= this (0: none) */
	uint32_t max_conns_per_addr; /* remotingMaxConnectionsPerAddr (0: no cap) */
	uint32_t max_jobs_per_conn;  /* remotingMaxInflightPerConnection */
	uint32_t max_jobs_per_addr;  /* remotingMaxInflightPerAddr (0: no cap of its own) */
	uint32_t polls_per_core;     /* remotingLongPollsPerCore: parked PULLs of one core */
	uint32_t held_max;	     /* remotingLongPollsMax: long polls held off the cores */
	uint32_t held_per_addr;	     /* remotingLongPollsPerAddr: ... for one client address */
	uint64_t client_expire_ms;   /* consumers silent this long leave their group (120 s) */
	uint64_t lock_expire_ms;     /* LOCK_BATCH_MQ locks (60 s) */
	struct cidr_list admin_addrs; /* adminAllowedAddrs */
};

/* RocketMQ's SubscriptionGroupConfig (bk_group_ctl.c keeps them). */
struct bk_subgroup {
	char name[META_GROUP_MAX + 1];
	int64_t broker_id;
	bool consume_broadcast;
	bool consume_enable;
	bool consume_from_min;
	bool notify_ids_changed;
	int64_t retry_max;
	int64_t retry_queues;
	int64_t slow_broker; /* whichBrokerWhenConsumeSlowly */
};

struct bk_rmt_ops {
	/* Creates or updates a topic, publishes and persists it. Control thread. */
	int (*topic_put)(void *arg, const struct meta_topic *mt);
	/*
	 * The body of GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
	 * GET_ALL_DELAY_OFFSET or GET_ALL_SUBSCRIPTIONGROUP_CONFIG (@code):
	 * malloc'd JSON in *@json (the caller frees). Control thread.
	 */
	int (*dump)(void *arg, int32_t code, char **json, size_t *len);
	/* GET_BROKER_CONFIG's body: properties text (malloc'd, caller frees). */
	int (*config_text)(void *arg, char **text, size_t *len);
	/* UPDATE_BROKER_CONFIG: 0, or -errno with the reason in @why. */
	int (*config_update)(void *arg, const char *body, size_t len, const char *by, char *why,
			     size_t why_len);
	/* VIEW_BROKER_STATS_DATA's body into @b (0, -ENOENT unknown); a group's pulled messages
	 * per second on a topic, the last minute (ConsumeStats' consumeTps). */
	int (*stats_data)(void *arg, const char *name, const char *key, struct jbuf *b);
	double (*group_tps)(void *arg, const char *group, const char *topic);
	/* CLEAN_EXPIRED_CONSUMEQUEUE: queues of topics that do not exist retired. Topics or -errno. */
	long (*clean_queues)(void *arg);
	/* DELETE_TOPIC_IN_BROKER: unpublish, retire its queues, persist. 0, -ENOENT, -errno. */
	int (*topic_delete)(void *arg, const char *name);
	/* Subscription groups: the config of @name (NULL: none); a SubscriptionGroupConfig body
	 * (0, or -errno with @why); delete (0, -ENOENT); a group's heartbeat (auto-creation). */
	const struct bk_subgroup *(*group_get)(void *arg, const char *name);
	int (*group_put)(void *arg, const char *body, size_t len, char *why, size_t why_len);
	int (*group_delete)(void *arg, const char *name);
	void (*group_seen)(void *arg, const char *name);
	/* GET_BROKER_RUNTIME_INFO's KVTable into @b (common/jbuf.h). */
	int (*runtime_info)(void *arg, struct jbuf *b);
	void *arg;
};

/* Return: 0, -errno (bind/listen failed: logged). Context: control thread. */
MUST_CHECK int bk_rmt_create(struct bk *bk, const struct bk_rmt_conf *conf,
			     const struct bk_rmt_ops *ops, struct bk_rmt **out);
/* The epoll fd to wait on (readable when a socket needs attention). */
int bk_rmt_fd(const struct bk_rmt *r);
uint16_t bk_rmt_port(const struct bk_rmt *r);
/* Return: completions are waiting on some core's ring. */
bool bk_rmt_pending(const struct bk_rmt *r);
/* Does all ready work without blocking: sockets, completions, expiry. Return: frames + answers. */
unsigned bk_rmt_run(struct bk_rmt *r, uint64_t now_ms);
/*
 * Closes every connection and frees every command. Call after the cores
 * stopped (they may hold commands until then).
 */
void bk_rmt_destroy(struct bk_rmt *r);

/**
 * bk_rmt_offset_put() - set the committed offset of (@topic, @group, @qid) to
 * @offset on the queue's core; with @raise only when that raises it, in one
 * step on the core, so a consumer's commit in between is never undone (a
 * slave applying its master's offsets); without, as a consumer's commit
 * (an offset reset).
 * Context: control thread. Return: 0, -ENOENT unknown topic or queue,
 * -EAGAIN the core's ring is full (try later), -ENOMEM.
 */
MUST_CHECK int bk_rmt_offset_put(struct bk_rmt *r, const char *topic, const char *group,
				 uint32_t qid, int64_t offset, bool raise);

/**
 * bk_rmt_offsets_drop() - forget every committed offset of topic @name
 * (@kind 'T') or group @name ('G') on every core: a slave following its
 * master's deletions.
 * Context: control thread. Return: 0, -EAGAIN a core's ring was full (some
 * slots kept: the next sync tries again), -ENOMEM.
 */
MUST_CHECK int bk_rmt_offsets_drop(struct bk_rmt *r, char kind, const char *name);

/* For the fuzz target: feeds @len bytes as if read from one connection. */
void bk_rmt_feed(struct bk_rmt *r, const uint8_t *buf, size_t len);

/* Requests the ACL refused on the remoting port, by enum bk_acl_reason. Context: control. */
uint64_t bk_rmt_acl_denied(const struct bk_rmt *r, unsigned reason);
/* Records lookups found and left out: the account may not read their topic. */
uint64_t bk_rmt_acl_hidden(const struct bk_rmt *r);

/* Why a request was answered SYSTEM_BUSY (docs/isolation.md). */
enum bk_rmt_busy {
	BK_RMT_BUSY_CORE,      /* the core's requests in flight (its command ring) */
	BK_RMT_BUSY_CONN,      /* remotingMaxInflightPerConnection */
	BK_RMT_BUSY_ADDR,      /* remotingMaxInflightPerAddr */
	BK_RMT_BUSY_POLLS,     /* remotingLongPollsPerCore */
	BK_RMT_BUSY_HELD,      /* remotingLongPollsMax */
	BK_RMT_BUSY_HELD_ADDR, /* remotingLongPollsPerAddr */
	BK_RMT_BUSY_REASONS,
};

/* Long-polling PULLs the remoting thread holds now (bk_rmt_held.c). Context: control. */
uint32_t bk_rmt_held_now(const struct bk_rmt *r);

/* Requests answered SYSTEM_BUSY for @reason so far (GET_BROKER_RUNTIME_INFO). Context: control. */
uint64_t bk_rmt_busy_count(const struct bk_rmt *r, unsigned reason);

/* Why a connection was refused or closed by a limit (docs/isolation.md). */
enum bk_rmt_refuse {
	BK_RMT_REFUSE_CONNS,	  /* remotingMaxConnections */
	BK_RMT_REFUSE_ADDR,	  /* remotingMaxConnectionsPerAddr */
	BK_RMT_REFUSE_NOFD,	  /* accept failed for want of a descriptor (a back-off each) */
	BK_RMT_REFUSE_FRAME_SIZE, /* a frame above remotingMaxFrameSize */
	BK_RMT_REFUSE_FRAME_MEM,  /* remotingMaxFrameMemory held by unfinished frames */
	BK_RMT_REFUSE_REASONS,
};

/* Connections refused or closed for @reason so far. Context: control. */
uint64_t bk_rmt_refused(const struct bk_rmt *r, unsigned reason);
/* Bytes held now by connections' receive buffers (unfinished frames). Context: control. */
uint64_t bk_rmt_frame_mem(const struct bk_rmt *r);
/* The client ids of @group's live members as a JSON array, sorted as they came (control thread). */
struct jbuf;
void bk_rmt_members_json(struct bk_rmt *r, const char *group, struct jbuf *b);

/*
 * bk_rmt_tls_init() - TLS on the remoting port as @t says (before any
 * connection). Return: 0, -EINVAL (the reason in @why: a file missing or not
 * matching), -ENOMEM. Context: control thread, startup.
 */
MUST_CHECK int bk_rmt_tls_init(struct bk_rmt *r, const struct bk_rmt_tls *t, char *why,
			       size_t why_len);
void bk_rmt_tls_fini(struct bk_rmt *r);

#endif /* SP_BROKER_BK_RMT_H */
