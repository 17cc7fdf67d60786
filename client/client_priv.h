/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_priv.h - libsprocket internals shared by its files.
 *
 * Calls: a caller encodes a request message into a struct sp__call and hands
 * it to the I/O thread (sp__call_submit); the I/O thread puts it on the
 * session of its destination (broker ip, core port), connecting lazily, and
 * completes it with the response copied into call->resp. A sync call waits
 * on call->sem; an async one has call->done run on the I/O thread, which
 * must only record the outcome and hand further work to the callback
 * thread (sp__exec_post) or a consumer's thread.
 *
 * Ownership: a call belongs to its creator until it is submitted, to the I/O
 * thread until it completes, to its creator again after that (the I/O
 * thread never touches it after sem_post()/done()).
 */
#ifndef SP_CLIENT_PRIV_H
#define SP_CLIENT_PRIV_H

#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"
#include "common/hmac.h"
#include "dp/port.h"
#include "dp/xport.h"
#include "sprocket/client.h"
#include "sprocket/consumer.h"
#include "sprocket/route.h"
#include "wire/dp.h"

struct sp__ep;

struct sp__call {
	struct sp__call *next; /* I/O thread: submission and pending lists */
	struct dp_addr dst;
	uint16_t op;
	bool long_poll;		/* a PULL that may park: the I/O thread may sleep longer */
	uint8_t resets;		/* re-sent after a session RESET (at most twice) */
	uint64_t not_before_ns; /* > now: the I/O thread holds it back until then (backoff) */
	uint8_t *req;		/* owned by the creator; must live until completion */
	uint32_t req_len;
	/* written by the I/O thread before completion */
	int err;       /* 0: resp holds the response; -errno from the transport */
	uint8_t *resp; /* malloc'd; sp__call_reset()/sp__call_free() frees */
	uint32_t resp_len;
	uint64_t t_submit_ns;
	uint64_t t_done_ns;
	/* completion: done == NULL: sem is posted */
	void (*done)(struct sp__call *call);
	void *arg;
	sem_t sem;
	struct sp__ep *ep; /* I/O thread only */
};

/* ---- route cache (topic.c) ---- */

/* One queue of a topic, resolved for addressing. */
struct sp__tq {
	uint32_t broker; /* index into route->brokers */
	int32_t queue_id;
	uint16_t core;
};

/* Ownership: immutable after build; refcounted (sp__topic_put). */
struct sp__topic {
	char name[SP_TOPIC_MAX + 1];
	struct sp_route *route;
	struct sp__tq *wq; /* write queues, sorted (broker name, queue id) */
	size_t n_wq;
	struct sp__tq *rq; /* read queues, sorted likewise */
	size_t n_rq;
	unsigned refs; /* under the cache lock */
	uint64_t fetched_ns;
	/*
	 * The topic has no route yet: this snapshot is TBW102's brokers with
	 * their default queue count (producers only; refreshed quickly).
	 */
	bool provisional;
};

/* Latency fault tolerance (fault.c), pure logic under the producer's lock. */
#define SP__FAULT_MAX 64
struct sp__fault_ent {
	char broker[SP_BROKER_MAX + 1];
	uint64_t until_ns; /* avoided before this time */
	uint32_t last_latency_ms;
};

struct sp__fault {
	struct sp__fault_ent ent[SP__FAULT_MAX];
	unsigned n;
	uint32_t fail_avoid_ms;
};

struct sp_client {
	struct sp_client_cfg cfg;
	char namesrv[1024];
	char client_id[WIRE_DP_CLIENT_ID_MAX + 1];
	bool client_id_given; /* by the application (else "sprocket@<pid>") */
	/* ACL account for remoting calls (push consumers' heartbeats): the access key and the
	 * HMAC state of the secret, not the secret (docs/security.md); ak[0] 0: none */
	char ak[257];
	struct hmac_sha1 rem_key;

	/* I/O thread */
	struct dp_port *port;
	struct dp_xcli *xcli;
	pthread_t io_thread;
	int doorbell_fd; /* udp: a datagram to our own port wakes the port's wait() */
	struct dp_addr doorbell_dst;

	pthread_mutex_t lock; /* guards sub_*, sleep_mode, stopping */
	pthread_cond_t cond;
	struct sp__call *sub_head;
	struct sp__call *sub_tail;
	int sleep_mode; /* 0 running, 1 waiting on cond, 2 waiting in the port */
	bool stopping;
	bool io_exited;

	/* I/O thread only */
	struct sp__ep *eps;
	struct sp__call *delayed; /* submitted with not_before_ns in the future */

	/* route cache */
	pthread_mutex_t route_lock;
	pthread_cond_t route_cond;
	struct sp__topic **topics;
	size_t n_topics;
	size_t cap_topics;
	pthread_t route_thread;
	bool route_stop;
	bool route_refresh_now;
	uint64_t route_fast_until_ns; /* refresh every 100 ms until then */

	/* callback executor */
	pthread_mutex_t exec_lock;
	pthread_cond_t exec_cond;
	struct sp__work *exec_head;
	struct sp__work *exec_tail;
	bool exec_stop;
	bool exec_exited;
	pthread_t exec_thread;

	/* stats for sp_client_cfg.stats (stats.c), under stats_lock */
	pthread_mutex_t stats_lock;
	pthread_cond_t stats_cond;
	struct sp__bstats *bst;
	size_t n_bst;
	bool stats_stop;
	pthread_t stats_thread;
};

/* One broker's figures (stats.c). */
struct sp__bstats {
	char broker[SP_BROKER_MAX + 1];
	uint64_t sends, errors, retries;
	int64_t in_flight;
	struct hist *lat; /* ns, answered attempts */
};

/* stats.c: no-ops without a stats callback */
int sp__stats_start(struct sp_client *c);
void sp__stats_stop(struct sp_client *c);
/* An attempt handed to the port for @broker. */
void sp__stats_sent(struct sp_client *c, const char *broker);
/* Its end: answered after @lat_ns, or failed without an answer. */
void sp__stats_answer(struct sp_client *c, const char *broker, uint64_t lat_ns, bool answered);
/* A failed attempt made again (@retry), or a send that failed in the end. */
void sp__stats_count(struct sp_client *c, const char *broker, bool retry);

/* A unit of work for the callback thread. */
struct sp__work {
	struct sp__work *next;
	void (*fn)(void *arg);
	void *arg;
};

/* ---- client.c ---- */

void sp__log(struct sp_client *c, enum sp_log_level lvl, const char *fmt, ...) SP_PRINTF(3, 4);

/* Return: a zeroed call with its semaphore ready, or NULL. */
struct sp__call *sp__call_new(void);
/* Frees resp (for reuse of the call for a retry). */
void sp__call_reset(struct sp__call *call);
/* Frees req, resp and the call. */
void sp__call_free(struct sp__call *call);

/* Hands @call to the I/O thread. Context: any thread but the I/O thread's callbacks. */
void sp__call_submit(struct sp_client *c, struct sp__call *call);
/* Submits and waits. Return: call->err (also left in the call for the caller to read). */
int sp__call_sync(struct sp_client *c, struct sp__call *call);

/* Runs @fn(@arg) on the callback thread. Return: 0, -ENOMEM. */
MUST_CHECK int sp__exec_post(struct sp_client *c, void (*fn)(void *arg), void *arg);

/* ---- topic.c ---- */

/*
 * Return: 0 with a referenced snapshot of @topic's own route (fetched on
 * first use, or when the cached one is provisional); -ENOENT no route.
 */
MUST_CHECK int sp__topic_get(struct sp_client *c, const char *topic, struct sp__topic **out);
/*
 * As sp__topic_get(), for producers: a topic with no route yet gets a
 * provisional snapshot built from TBW102's route (RocketMQ's auto-creation
 * key topic) so that its first SEND makes a broker create it.
 */
MUST_CHECK int sp__topic_get_pub(struct sp_client *c, const char *topic, struct sp__topic **out);
void sp__topic_put(struct sp_client *c, struct sp__topic *t);
/*
 * Fetches @topic's route now and caches it. Context: blocks up to
 * route_timeout_ms per NameServer. Return: 0 or the fetch's error.
 */
MUST_CHECK int sp__topic_refresh_now(struct sp_client *c, const char *topic);
/*
 * Has the route thread refetch every topic now and every 100 ms for @ms:
 * a broker's re-registration (write protection) reaches the NameServer a
 * little after the broker's first answer that shows it.
 */
void sp__topic_refresh_fast(struct sp_client *c, uint32_t ms);
/* Asks the route thread to refetch @topic soon (after a REDIRECT). */
void sp__topic_refresh_soon(struct sp_client *c, const char *topic);
/* Return: the dataplane address of queue @q of @t. */
struct dp_addr sp__tq_addr(const struct sp__topic *t, const struct sp__tq *q);
/* Return: the queue of broker @broker ("" any) and @qid in @t (read or write list), or NULL. */
const struct sp__tq *sp__topic_find(const struct sp__topic *t, const char *broker, int32_t qid,
				    bool readable);
/* Builds the queue lists of a parsed route (exposed for unit tests). */
MUST_CHECK int sp__topic_build(const char *name, struct sp_route *r, struct sp__topic **out);
/*
 * Builds a provisional snapshot of @name from @tbw, TBW102's route: the
 * write queues of each writable broker, queue q on core q % dp_cores, no
 * read queues. Return: 0, -ENOENT no writable broker, -ENOMEM.
 */
MUST_CHECK int sp__topic_build_default(const char *name, struct sp_route *tbw,
				       struct sp__topic **out);
void sp__topic_free(struct sp__topic *t);
/*
 * Puts @t in the cache (taking it over; @replace: over an older snapshot).
 * Return: the cached snapshot, referenced; NULL out of memory.
 */
struct sp__topic *sp__topic_install(struct sp_client *c, struct sp__topic *t, bool replace);
int sp__route_thread_start(struct sp_client *c);
void sp__route_thread_stop(struct sp_client *c);

/* ---- fault.c ---- */

void sp__fault_init(struct sp__fault *f, uint32_t fail_avoid_ms);
/* Records a send to @broker: @latency_ms, @failed. */
void sp__fault_update(struct sp__fault *f, const char *broker, uint32_t latency_ms, bool failed,
		      uint64_t now_ns);
bool sp__fault_is_available(const struct sp__fault *f, const char *broker, uint64_t now_ns);
/* Return: when @broker stops being avoided (0: not avoided). */
uint64_t sp__fault_until(const struct sp__fault *f, const char *broker);

/* ---- msg.c ---- */

#define SP__PROPS_MAX WIRE_DP_PROPS_MAX

/*
 * Writes the properties of @m (user props, TAGS, KEYS, UNIQ_KEY=@uniq, WAIT)
 * into @buf. Return: 0, -EINVAL a separator in a key or value, -ENOBUFS.
 */
MUST_CHECK int sp__msg_props(const struct sp_msg *m, const char *uniq, char *buf, size_t cap,
			     size_t *len);
/* A new UNIQ_KEY (32 uppercase hex + NUL). Context: any thread. */
void sp__msgid_new(char out[SP_MSGID_LEN + 1]);
/* Return: 0 when @m is sendable, else -EINVAL. */
MUST_CHECK int sp__msg_check(const struct sp_msg *m);
/* Tag expression -> tag hashes (at most @max). Return: count, or -EINVAL too many. */
MUST_CHECK int sp__tag_hashes(const char *expr, int32_t *out, size_t max);

/*
 * Decodes the records of a PULL response into @out (n_out slots), keeping
 * those whose TAGS match @expr. Strings are written NUL-terminated into
 * @strbuf (caller-sized: sp__rec_strbuf_size()).
 * Return: messages kept, or -EBADMSG.
 */
MUST_CHECK long sp__records_decode(const uint8_t *recs, size_t len, const char *expr,
				   struct sp_msg_ext *out, size_t n_out, char *strbuf,
				   size_t strbuf_cap);
/* Return: an upper bound of the string bytes sp__records_decode() needs for @len bytes. */
size_t sp__rec_strbuf_size(size_t len, size_t n_recs);
/* Return: records in @recs (walks TOTALSIZE only), or -EBADMSG. */
MUST_CHECK long sp__records_count(const uint8_t *recs, size_t len);

/* ---- push.c ---- */

/* AllocateMessageQueueAveragely: member @idx of @cnt consumes [start, start + len) of @n. */
void sp__mq_allocate(size_t n, unsigned idx, unsigned cnt, size_t *start, size_t *len);

/* ---- pull.c ---- */

struct sp_pull_req;
struct sp_pull_result;

/* Sets @dst to the core owning @mq. Return: 0, -ENOENT, route errors. */
MUST_CHECK int sp__mq_resolve(struct sp_client *c, const struct sp_mq *mq, struct dp_addr *dst);
/* Runs an offset op on @mq (sync, follows redirects). Return: 0 with *@off, or an error. */
MUST_CHECK int sp__offset_op(struct sp_client *c, uint16_t op, const char *group,
			     const struct sp_mq *mq, int64_t value, int64_t *off);
/* Encodes a PULL into @call (req, dst, op, long_poll). Return: 0 or an error. */
MUST_CHECK int sp__pull_prepare(struct sp_client *c, const struct sp_mq *mq,
				const struct sp_pull_req *req, struct sp__call *call);
/*
 * Decodes @call's PULL response into @res (takes call->resp over on
 * SP_PULL_FOUND). Return: 0, SP_ERR_STATUS(st) another status, -EBADMSG.
 */
/* ---- a push consumer's group (rebalance.c) ---- */

struct sp_rem;
struct sp__rbl_broker {
	char addr[64]; /* a master's remoting address */
	struct sp_rem *rem;
};

/* Ownership: the push consumer's control thread. */
struct sp__rbl {
	struct sp_client *c;
	char cid[256]; /* sp__rbl_cid() */
	struct sp__rbl_broker *b;
	size_t nb;
};

struct sp__rbl_group {
	const char *group, *topic, *expr;
	const char *retry_topic; /* "" or NULL: none */
	enum sp_consume_from from;
};

/*
 * HEART_BEAT to every master of @g->topic, then the group's member ids from
 * one of them: *@ids sorted (sp__rbl_ids_free()). Return: 0 or a negative error.
 */
MUST_CHECK int sp__rbl_members(struct sp__rbl *r, const struct sp__rbl_group *g, char ***ids,
			       size_t *n);
void sp__rbl_ids_free(char **ids, size_t n);
/*
 * LOCK_BATCH_MQ (@lock) or UNLOCK_BATCH_MQ of @mqs for @group at their brokers (orderly
 * consumers): @ok[i] (NULL when unlocking) says which this client holds now,
 * @asked[i] (or NULL) whether its broker answered at all.
 * Return: 0, or the last error (the others were still asked).
 */
MUST_CHECK int sp__rbl_lock(struct sp__rbl *r, const char *group, const struct sp_mq *mqs, size_t n,
			    bool lock, bool *ok, bool *asked);
/* The member id in the group (heartbeats, member lists, locks). */
const char *sp__rbl_cid(struct sp__rbl *r);
/* UNREGISTER_CLIENT of @group (NULL: none) at every broker talked to; close. */
void sp__rbl_close(struct sp__rbl *r, const char *group);
/*
 * @mine[q] = queue @q (of @mqs, sorted) is @me's among @ids (sorted).
 * Return: 0, -ENOENT @me is not among @ids, -ENOMEM.
 */
MUST_CHECK int sp__rbl_allocate(enum sp_rebalance how, const struct sp_mq *mqs, size_t nq,
				char *const *ids, size_t n, const char *me, bool *mine);

MUST_CHECK int sp__pull_parse(struct sp_client *c, struct sp__call *call, const char *expr,
			      struct sp_pull_result *res);

#endif /* SP_CLIENT_PRIV_H */
