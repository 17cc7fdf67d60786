/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.h - libsprocket: the client object, messages, queues and errors.
 *
 * A struct sp_client is what a process creates once per broker cluster. It
 * owns one I/O thread that runs a dataplane port (udp, af_packet or dpdk;
 * docs/dataplane.md) and the session transport to every broker core it
 * talks to. Producers (sprocket/producer.h) and consumers
 * (sprocket/consumer.h) are created on a client and share its I/O thread,
 * its routes and its sessions.
 *
 * Threads: caller threads encode requests and hand them to the I/O thread
 * (a mutex-protected queue plus a wake-up); synchronous calls block on a
 * semaphore until the I/O thread completes them. The client also runs a
 * route refresh thread (every route_refresh_ms, default 30 s) and a
 * callback thread that runs asynchronous completions (send callbacks), so a
 * slow callback never stalls the I/O thread.
 *
 * Errors: every int function returns 0 or a negative value: a negative
 * errno, or SP_ERR_STATUS(st) for a broker status st (docs/protocol.md
 * §5.1). sp_strerror() names both. The library never calls exit() and never
 * prints; set a log callback to see its log lines. (The packet ports of
 * sp_net log their own startup errors through common/log.h, on stderr by
 * default.)
 *
 * Ownership: a struct sp_client may be used from any number of threads at
 * once; destroy it after every producer and consumer made on it.
 */
#ifndef SPROCKET_CLIENT_H
#define SPROCKET_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A result the caller must look at (GCC and clang; empty elsewhere). */
#ifndef SP_MUST_CHECK
#if defined(__GNUC__)
#define SP_MUST_CHECK __attribute__((warn_unused_result))
#else
#define SP_MUST_CHECK
#endif
#endif

/* ---- the library ---- */

/* The library's version, "MAJOR.MINOR.PATCH" (the release it was built from). */
const char *sp_version(void);

/* ---- errors ---- */

/* A broker status (docs/protocol.md §5.1) as a negative error value. */
#define SP_ERR_STATUS_BASE 20000
#define SP_ERR_STATUS(st) (-(SP_ERR_STATUS_BASE + (int)(st)))

/* Return: the broker status carried by @err, or -1 when @err is an errno or 0. */
int sp_err_status(int err);

/**
 * sp_strerror() - a readable string for any value a libsprocket function
 * returns: 0, a negative errno, SP_ERR_STATUS(status).
 * Context: any thread.
 * Return: a static string (never NULL).
 */
const char *sp_strerror(int err);

/* ---- logging ---- */

enum sp_log_level {
	SP_LOG_ERR = 0,
	SP_LOG_WARN = 1,
	SP_LOG_INFO = 2,
	SP_LOG_DEBUG = 3,
};

/* Called with one formatted line (no newline), from any of the client's threads. */
typedef void (*sp_log_fn)(void *arg, enum sp_log_level level, const char *line);

/* ---- the client ---- */

enum sp_backend {
	SP_BACKEND_UDP = 0, /* kernel sockets, unprivileged (default) */
	SP_BACKEND_AF_PACKET = 1,
	SP_BACKEND_DPDK = 2,
};

/* ---- stats ---- */

/* One broker's sends over the last interval (sp_client_cfg.stats). */
struct sp_broker_stats {
	char broker[128];   /* brokerName */
	uint64_t sends;	    /* attempts answered or failed in the interval */
	uint64_t errors;    /* sends that failed in the end (after their retries) */
	uint64_t retries;   /* attempts that failed here and were made again */
	uint64_t in_flight; /* attempts out now */
	/* answered attempts: handed to the port -> answer, over the interval (0: none) */
	uint64_t p50_ns, p99_ns, p999_ns, max_ns;
};

/* Called every stats_interval_ms on the client's "sp-stats" thread, one row per broker sent to. */
typedef void (*sp_stats_fn)(void *arg, const struct sp_broker_stats *st, size_t n);

struct sp_client_cfg {
	const char *namesrv; /* "host:port;host:port" (required) */
	enum sp_backend backend;
	uint32_t local_ip;     /* IPv4, network order; udp: 0 = any */
	uint16_t local_port;   /* the client's UDP port; 0: udp any, others one picked per client */
	const char *iface;     /* af_packet: interface */
	const char *dpdk_args; /* dpdk: EAL arguments */
	const char *client_id; /* RocketMQ clientID "ip@instance"; default "sprocket@<pid>" */
	uint16_t slots;	       /* transport slots requested per broker core (default 8) */
	uint32_t connect_timeout_ms; /* per session CONNECT (default 1000) */
	uint32_t route_timeout_ms;   /* per NameServer request (default 3000) */
	uint32_t route_refresh_ms;   /* route refresh period (default 30000) */
	uint32_t spin_us;      /* I/O thread spins this long after work before it sleeps (50) */
	uint32_t keepalive_ms; /* PING a session idle this long (default 10000) */
	sp_log_fn log;	       /* NULL: the library stays silent */
	void *log_arg;
	enum sp_log_level log_level; /* most verbose level passed to @log (default INFO) */
	/* brokers with aclEnable: an account of their ACL file (NULL: none); the secret is
	 * absorbed at create and not kept (docs/security.md) */
	const char *access_key;
	const char *secret_key;
	sp_stats_fn stats; /* NULL: no figures kept */
	void *stats_arg;
	uint32_t stats_interval_ms; /* default 10000 */
};

struct sp_client;

/**
 * sp_client_create() - open the port, start the I/O, route and callback threads.
 * Context: any thread; allocates, may sleep.
 * Return: 0; -EINVAL bad config (no namesrv); -ENOTSUP backend not built;
 * -EPERM af_packet without CAP_NET_RAW; -ENOMEM; other negative errno.
 */
SP_MUST_CHECK int sp_client_create(const struct sp_client_cfg *cfg, struct sp_client **out);

/**
 * sp_client_destroy() - stop the threads, close every session (requests in
 * flight complete with -ECONNABORTED), free everything.
 * Context: any thread but the client's own (never from a callback).
 */
void sp_client_destroy(struct sp_client *c);

/* ---- message queues ---- */

#define SP_TOPIC_MAX 127
#define SP_BROKER_MAX 127

/* RocketMQ's MessageQueue: a queue id is unique within a broker only. */
struct sp_mq {
	char topic[SP_TOPIC_MAX + 1];
	char broker[SP_BROKER_MAX + 1]; /* brokerName; "" = the first broker with this queue id */
	int32_t queue_id;
};

/**
 * sp_topic_queues() - the queues of @topic from its route (fetched from the
 * NameServer on first use and cached; refreshed every route_refresh_ms).
 * @readable: the read queues (consumers) or the write queues (producers).
 * @out: receives a malloc'd array (free() it), sorted by broker then queue id.
 *
 * Context: any thread; blocks on the first use of a topic.
 * Return: 0; -ENOENT the topic does not exist; -ENOMEM; route fetch errors.
 */
SP_MUST_CHECK int sp_topic_queues(struct sp_client *c, const char *topic, bool readable,
				  struct sp_mq **out, size_t *n);

/* ---- messages ---- */

/* One user property. Keys and values must not contain \x01 or \x02. */
struct sp_prop {
	const char *key;
	const char *val;
};

/* A message to send. Strings are NUL-terminated; nothing is kept after the call. */
struct sp_msg {
	const char *topic;
	const char *tags; /* NULL: none */
	const char *keys; /* NULL: none; several separated by spaces */
	const void *body;
	size_t body_len;
	const struct sp_prop *props; /* user properties, NULL when n_props is 0 */
	size_t n_props;
	int32_t flag; /* user flag (FLAG) */
	/*
	 * RocketMQ's delay level (DELAY): 0 none; n > 0 delivered after the
	 * broker's nth messageDelayLevel (1s 5s 10s 30s 1m ... by default; a
	 * level past the table is its last). Not in a batch (refused there).
	 */
	int32_t delay_level;
	/*
	 * A delivery time (TIMER_DELIVER_MS, RocketMQ 5's timer): 0 none; else
	 * the epoch ms from which the broker delivers it (one already past: at
	 * once), to the millisecond, at most the broker's timerMaxDelaySec
	 * ahead. Not with delay_level, not in a batch (refused there).
	 */
	int64_t deliver_ms;
};

#define SP_MSGID_LEN 32 /* UNIQ_KEY: 32 uppercase hex characters */
#define SP_OFFSET_MSGID_MAX 57

/*
 * A received message (pull and push consumers). Every pointer stays valid as
 * long as the pull result (or, in a push callback, the call) it came from;
 * strings are NUL-terminated. @props is RocketMQ's raw property string
 * (k\x01v\x02...), read one with sp_msg_prop().
 */
struct sp_msg_ext {
	const char *topic;
	const char *tags;   /* "" when none */
	const char *keys;   /* "" when none */
	const char *msg_id; /* UNIQ_KEY, or the offset msgId when the producer set none */
	char offset_msg_id[SP_OFFSET_MSGID_MAX]; /* hex(store host, phys offset) */
	const void *body;
	size_t body_len;
	const char *props;
	size_t props_len;
	int32_t queue_id;
	int32_t flag;
	int32_t sys_flag;
	int32_t reconsume_times;
	int64_t queue_offset;
	int64_t phys_offset; /* CommitLog offset (SEND_BACK names the message by it) */
	int64_t store_ts;    /* ms since the epoch, the broker's clock */
	int64_t born_ts;     /* ms since the epoch, the producer's clock */
	uint32_t store_size;
};

/**
 * sp_msg_prop() - look up property @key of @m (the last one wins).
 * Context: any thread.
 * Return: true with @val and @len set (not NUL-terminated) or false.
 */
bool sp_msg_prop(const struct sp_msg_ext *m, const char *key, const char **val, size_t *len);

/* ---- broker-side timestamps (every response; docs/protocol.md §5.1) ---- */

struct sp_broker_ts {
	uint64_t recv_ns;    /* the broker received the request */
	uint64_t handled_ns; /* handled (SEND: appended) */
	uint64_t durable_ns; /* durable; 0 when not measured */
	uint64_t sent_ns;    /* the response went on the TX burst */
};

#endif /* SPROCKET_CLIENT_H */
