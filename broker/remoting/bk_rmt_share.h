/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_rmt_share.h - what the remoting port's files share (bk_rmt.h is the
 * outside's view): the state, the response builder and the helpers, one
 * file per request family, as RocketMQ's broker has one processor each:
 *  - bk_rmt.c        connections, frames, jobs at the cores, the loop;
 *  - bk_rmt_client.c HEART_BEAT, UNREGISTER_CLIENT, consumer lists, queue
 *                    locks (ClientManageProcessor, ConsumerManageProcessor);
 *  - bk_rmt_data.c   SEND, PULL, offsets, SEND_BACK, message lookups and
 *                    the cores' answers (SendMessageProcessor,
 *                    PullMessageProcessor, QueryMessageProcessor);
 *  - bk_rmt_admin.c  topics, subscription groups, broker config and runtime
 *                    info, a slave's GET_ALL_* (AdminBrokerProcessor);
 *  - bk_rmt_stats.c  the admin requests over every queue of a topic or group:
 *                    topic stats, consume stats, offset reset, consumed by who;
 *  - bk_rmt_tx.c     END_TRANSACTION and check-backs;
 *  - bk_rmt_acl.c    the ACL check every request passes first (aclEnable).
 * Everything here runs on the control thread (docs/ownership.md).
 */
#ifndef SP_BROKER_BK_RMT_PRIV_H
#define SP_BROKER_BK_RMT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bk_rmt.h"
#include "common/acl_door.h"
#include "common/ipcount.h"
#include "wire/remoting.h"

#define TAG "broker.remoting"
#define OUT_PAUSE (16u << 20) /* stop reading a connection with this much unsent */
/*
 * Whole frames of one connection handled in one turn; the rest wait, the
 * connection unread, until every other connection with work had its turn
 * (bk_rmt.c's "turns"): one connection's pipeline cannot hold the thread.
 */
#define RMT_FRAMES_PER_TURN 2u
/*
 * A connection with this many requests at the cores that are neither long
 * polls nor writes is not given a turn until some are answered: the cores'
 * rings stay shallow for everyone else (remotingMaxInflightPerConnection
 * still refuses past its own, larger cap; writes count only there).
 */
#define RMT_QUICK_PER_CONN 4u
/*
 * The same two shares for a source address, whatever number of connections
 * it opens (remotingMaxConnectionsPerAddr allows thousands): its connections
 * together handle at most RMT_FRAMES_PER_ADDR frames in one pass of the
 * control thread's loop, and have at most RMT_QUICK_PER_ADDR such requests
 * at the cores.
 */
#define RMT_FRAMES_PER_ADDR 4u
#define RMT_QUICK_PER_ADDR 8u
#define PULL_MAX_BYTES (256u << 10) /* RocketMQ's in-memory transfer limit */
#define PULL_MAX_MSGS 32
#define QUERY_MAX 64
#define HDR_MIN (64u << 10) /* header buffer; grows for long extFields (batch msgIds) */
#define SUBS_MAX 64
/* room for a topic or a group name */
#define RNAME_W (META_GROUP_MAX > META_TOPIC_MAX ? META_GROUP_MAX + 1 : META_TOPIC_MAX + 1)
#define SUB_CODES_MAX BK_PULL_TAGS_MAX
#define READ_CHUNK (64u << 10)
/* ---- state ---- */

enum rtls_state {
	RTLS_PLAIN,	/* plain TCP */
	RTLS_UNDECIDED, /* TLS on the port: the client's first byte decides */
	RTLS_ON,
};

struct rconn {
	int fd;
	uint32_t id;  /* slot in r->conns */
	uint32_t gen; /* bumped when the slot is reused */
	char peer_s[24];
	struct dp_addr peer;
	uint8_t *in;
	size_t in_len, in_cap;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	int32_t next_opaque; /* our requests to the client (NOTIFY_CONSUMER_IDS_CHANGED) */
	uint32_t jobs;	     /* its requests at the cores */
	uint32_t quick;	     /* ... of them not long polls (RMT_QUICK_PER_CONN) */
	uint32_t polls;	     /* ... of them parked at the cores (at most half of jobs' cap) */
	uint32_t held;	     /* its long polls held by the remoting thread (bk_rmt_held.c) */
	bool paused;	     /* EPOLLIN off: too much unsent */
	bool backlog;	     /* EPOLLIN off: frames wait for its next turn (in r->turns) */
	bool closing;	     /* closed: torn down by conns_reap(), never used again */
	bool want_out;	     /* EPOLLOUT on */
	bool counted;	     /* in r->per_addr */
	uint8_t tls_state;   /* enum rtls_state */
	bool tls_want_out;   /* OpenSSL wants to write before it can read on: EPOLLOUT */
	struct ssl_st *ssl;  /* TLS (bk_rmt_tls.c); NULL: plain TCP */
	uint8_t lang;	     /* of its last request (enum wire_rem_lang): connection lists */
	int32_t version;
};

/* A request at a core. bk_rcmd first: the core sees only that. */
struct rjob {
	struct bk_rcmd c;
	uint32_t conn, gen;
	int32_t opaque;
	int32_t code;
	uint8_t serialize;
	bool oneway;
	uint8_t redirects;
	uint32_t batch_n;
	bool addr_counted; /* in r->jobs_addr (under j->c.peer.ip) */
	bool poll;	   /* a PULL that may park: counted in r->polls[core] */
	bool quick;	   /* counted in its connection's quick */
	bool quick_addr;   /* ... and in r->quick_addr */
	bool polled;	   /* ... and counted */
	bool polls_addr;   /* ... and in r->polls_addr */
	/* a long poll the remoting thread may hold (bk_rmt_held.c) */
	bool held;		      /* held now: in r->held and its queue's chain */
	bool held_counted;	      /* in r->held_addr */
	bool uncounted;		      /* not in its connection's jobs nor r->jobs_addr */
	uint16_t held_core;	      /* the core it goes back to */
	uint32_t held_ix;	      /* in r->held */
	uint32_t resp_full;	      /* resp_cap to post it with again */
	uint64_t deadline_ms;	      /* answered PULL_NOT_FOUND then */
	const struct store_queue *sq; /* its queue */
	struct rjob *held_next;	      /* its queue's next held pull */
	struct rjob *prev, *next;     /* every job in flight, for teardown */
	uint8_t *reqbuf;
	struct ragg *agg; /* one part of an admin request over many queues (bk_rmt_stats.c) */
	int64_t phys[QUERY_MAX];
	char *ak; /* a lookup's account: each record found is checked on its topic (or NULL) */
};

struct rsub {
	char topic[META_TOPIC_MAX + 1];
	uint16_t ncodes; /* 0: every tag */
	int32_t codes[SUB_CODES_MAX];
	char expr[256];	 /* subString, as the client sent it (cut at 255 bytes) */
	char etype[8];	 /* expressionType: TAG or SQL92 */
	int64_t version; /* subVersion */
};

struct rmember {
	char client_id[256];
	uint32_t conn, gen;
	uint64_t last_ms;
	uint16_t nsubs;
	struct rsub subs[SUBS_MAX];
};

struct rgroup {
	char name[META_GROUP_MAX + 1];
	/* of its latest heartbeat (RocketMQ's ConsumerGroupInfo) */
	char consume_type[24];	/* CONSUME_ACTIVELY, CONSUME_PASSIVELY */
	char message_model[16]; /* CLUSTERING, BROADCASTING */
	char from_where[48];	/* CONSUME_FROM_LAST_OFFSET ... */
	struct rmember *m;
	size_t n, cap;
};

struct rlock {
	char group[META_GROUP_MAX + 1];
	char topic[META_TOPIC_MAX + 1];
	int32_t qid;
	char client_id[256];
	uint64_t last_ms;
};

struct bk_rmt {
	struct bk *bk;
	struct bk_rmt_conf conf;
	struct bk_rmt_ops ops;
	int ep;
	int lfd;
	uint16_t port;
	struct rconn **conns;
	uint32_t nconns;
	/* connections with frames left for their next turn, in order (id, gen pairs) */
	uint32_t *turns;
	uint32_t nturns, turns_cap;
	uint64_t turns_deferred; /* turns a connection ended with frames left (stats) */
	uint64_t turns_addr;	 /* turns put off: the connection's address had its share */
	/* frames handled per address in this pass (RMT_FRAMES_PER_ADDR), and the
	 * addresses counted, one entry per frame, to uncount when the pass ends */
	struct ipcount pass_addr;
	uint32_t *pass_ips;
	uint32_t npass_ips, pass_ips_cap;
	struct ipcount quick_addr; /* quick jobs per address (RMT_QUICK_PER_ADDR) */
	struct ipcount polls_addr; /* long polls parked at the cores, per address */
	/* held long polls (bk_rmt_held.c) */
	struct rjob **held;
	uint32_t nheld, held_cap;
	struct rheld_slot *held_ix; /* open addressing by queue */
	uint32_t held_mask, held_used;
	struct ipcount held_addr;
	const struct store_queue **wakes; /* taken off the cores' rings, not applied yet */
	uint32_t nwakes, wakes_cap;
	uint64_t held_all; /* cores whose every held pull goes back */
	uint64_t next_held_ms;
	uint64_t held_total, held_timeouts;
	uint32_t serial;
	uint32_t *inflight; /* per core */
	struct rjob *jobs;
	struct rgroup *groups;
	size_t ngroups;
	struct rlock *locks;
	size_t nlocks, locks_cap;
	char *scratch;
	size_t scratch_cap;
	uint8_t *hdr;
	size_t hdr_cap;
	uint64_t now_ms;
	uint64_t next_sweep_ms;
	struct rconn *fuzz_conn;
	bool any_closing;
	unsigned work; /* frames and completions handled by this bk_rmt_run() */
	/* transactions (bk_rmt_tx.c) */
	struct rproducer *producers;
	size_t nproducers, producers_cap;
	size_t producer_rr;
	bool tx_checking[BK_CORES_MAX]; /* a BK_ROP_TX_CHECK at the core */
	uint64_t next_tx_ms;
	/* requests relayed to clients, waiting for their answers (GET_CONSUMER_RUNNING_INFO) */
	struct rproxy *proxies;
	size_t nproxies, proxies_cap;
	/* offsets reset by INVOKE_BROKER_TO_RESET_OFFSET, not yet seen by the group's pulls */
	struct rreset *resets;
	size_t nresets, resets_cap;
	/* the configuration's DataVersion (GET_BROKER_CONFIG's header) */
	uint64_t config_version;
	int64_t config_version_ms;
	/* TLS (bk_rmt_tls.c): the server context, NULL when disabled */
	struct ssl_ctx_st *tls;
	enum bk_tls_mode tls_mode;
	uint64_t tls_conns;  /* connections that spoke TLS */
	uint64_t tls_failed; /* handshakes or records that failed */
	/* connections open per source address (remotingMaxConnectionsPerAddr) */
	struct ipcount per_addr;
	/* connections refused or closed by a limit (enum bk_rmt_refuse) */
	uint64_t refused[BK_RMT_REFUSE_REASONS];
	/* bytes of the connections' receive buffers (remotingMaxFrameMemory) */
	uint64_t frame_mem;
	/* accept() out of descriptors: the listener rests until accept_resume_ms */
	uint64_t accept_resume_ms;
	uint32_t accept_backoff_ms;
	/* requests the ACL refused, by reason (bk_rmt_acl.c) */
	uint64_t acl_denied[BK_ACL_REASONS];
	uint64_t
		acl_hidden; /* records a lookup found and left out: the account may not read them */
	const struct acl_account *req_acc; /* the request being dispatched was checked against */
	/* per-client quotas (docs/isolation.md): jobs in flight per source address, long
	 * polls per core, refusals by reason, and the reason of the refusal being answered */
	struct ipcount jobs_addr;
	uint32_t *polls;
	uint64_t busy[BK_RMT_BUSY_REASONS];
	uint8_t busy_why;
	uint16_t busy_core;
	uint32_t busy_addr;
};

/*
 * A queue's offset reset for a group: the group's next PULL there at another
 * offset is answered PULL_OFFSET_MOVED with this one as nextBeginOffset, so a
 * live consumer that ignores RESET_CONSUMER_CLIENT_OFFSET (ali-ons) moves too.
 */
struct rreset {
	uint32_t hash; /* of group, topic and qid */
	char group[META_GROUP_MAX + 1];
	char topic[META_TOPIC_MAX + 1];
	uint32_t qid;
	int64_t offset;
	uint64_t expire_ms;
};

/* A request relayed to a client; its answer goes back to the admin connection. */
struct rproxy {
	uint32_t client, client_gen;
	int32_t client_opaque;
	uint32_t admin, admin_gen;
	int32_t admin_opaque;
	uint8_t serialize;
	uint64_t deadline_ms;
	char what[META_GROUP_MAX + 300]; /* "<group> <clientId>", for errors */
};

/* A producer group's connection, from its HEART_BEAT (RocketMQ's ProducerManager). */
struct rproducer {
	char group[META_GROUP_MAX + 1];
	char client_id[256];
	uint32_t conn, gen;
	uint64_t last_ms;
};

struct rresp {
	int32_t code;
	int32_t opaque;
	uint8_t serialize;
	bool request;	   /* a oneway request from us */
	bool request_sync; /* a request from us that the peer answers (relayed) */
	const char *remark;
	uint16_t n_ext;
	const char *ext[16][2];
	const uint8_t *body;
	uint32_t body_len;
};

/* An admin request over many queues (bk_rmt_stats.c): its rows, and its jobs at the cores. */
struct ragg_row {
	char topic[META_TOPIC_MAX + 1];
	uint32_t qid;
	uint16_t core;
	const struct store_queue *sq;
	int64_t cons; /* the group's committed offset, -1 none */
	struct bk_qstat st;
};

struct ragg {
	uint32_t conn, gen;
	int32_t opaque;
	int32_t code;
	uint8_t serialize;
	uint32_t pending; /* jobs at the cores */
	bool failed;	  /* a job could not be posted or came back failed */
	void (*finish)(struct bk_rmt *r, struct ragg *a, struct rconn *c);
	struct ragg_row *rows;
	size_t n, cap;
	char topic[META_TOPIC_MAX + 1];
	char group[META_GROUP_MAX + 1];
	int64_t ts; /* reset: the time, -1 latest */
	bool force;
};

/* ---- output, answers, jobs (bk_rmt_out.c) ---- */
/* Marks @c closed (@why logged unless NULL); conns_reap() tears it down later. */
void bk_rmt__conn_close(struct bk_rmt *r, struct rconn *c, const char *why);
/* Sets @c's epoll events from its state (reading on unless paused or backlogged). */
void bk_rmt__conn_events(struct bk_rmt *r, struct rconn *c);
/* Writes what it can of @c's output. Return: 0, -1 the connection was closed. */
int bk_rmt__conn_flush(struct bk_rmt *r, struct rconn *c);
/* Frees an admin request's row set. */
void bk_rmt__agg_free(struct ragg *a);
/* @j no longer counts against its address (remotingMaxInflightPerAddr). */
void bk_rmt__job_addr_uncount(struct bk_rmt *r, struct rjob *j);

void bk_rmt__resp_ext(struct rresp *o, const char *k, const char *v);

void bk_rmt__conn_send(struct bk_rmt *r, struct rconn *c, const struct rresp *o);

void bk_rmt__reply(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, int32_t code,
		   const char *remark);

struct rconn *bk_rmt__conn_get(struct bk_rmt *r, uint32_t id, uint32_t gen);

void bk_rmt__job_free(struct bk_rmt *r, struct rjob *j);

/* Return: a new job for @c's request @q, or NULL: out of memory or @c has too many (busy). */
struct rjob *bk_rmt__job_new(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q,
			     uint16_t op, uint32_t req_cap, uint32_t resp_cap);

/* Posts @j to @core. Return: 0, -EAGAIN (busy: @j is freed, caller answers). */
int bk_rmt__job_post(struct bk_rmt *r, struct rjob *j, uint16_t core);

/* The refusal bk_rmt__busy() answers next: why, and where (UINT16_MAX: no core). */
void bk_rmt__busy_set(struct bk_rmt *r, enum bk_rmt_busy why, uint16_t core, uint32_t ip);

/* @j (of connection @c, or NULL) no longer counts as a quick request (RMT_QUICK_PER_*). */
void bk_rmt__job_quick_uncount(struct bk_rmt *r, struct rconn *c, struct rjob *j);

/* As bk_rmt__job_post(), but @j stays the caller's when it cannot go. */
int bk_rmt__job_post_keep(struct bk_rmt *r, struct rjob *j, uint16_t core);

/* A PULL's answer to its client from the core's @m. */
void bk_rmt__answer_pull(struct bk_rmt *r, struct rconn *c, struct rjob *j, const uint8_t *m,
			 uint32_t len);

/*
 * Held long polls (bk_rmt_held.c). put: hold @j, back from its core with
 * bk_rcmd.held (Return: 0, -ENOSPC over remotingLongPollsMax or ...PerAddr,
 * the busy reason set; -ENOMEM). take: the cores' wakes, before the reap;
 * run: after it, post the woken pulls again and answer those past their
 * deadline. forget: out of the held set (bk_rmt__job_free()). drop_conn: a
 * closed connection's held pulls go.
 */
int bk_rmt__held_put(struct bk_rmt *r, struct rconn *c, struct rjob *j);
/* No room to hold one more pull for @ip (remotingLongPollsMax or ...PerAddr): the busy reason set. */
bool bk_rmt__held_full(struct bk_rmt *r, uint32_t ip);
void bk_rmt__held_take(struct bk_rmt *r);
void bk_rmt__held_run(struct bk_rmt *r);
void bk_rmt__held_forget(struct bk_rmt *r, struct rjob *j);
void bk_rmt__held_drop_conn(struct bk_rmt *r, uint32_t id, uint32_t gen);
void bk_rmt__held_fini(struct bk_rmt *r);

/* @j, posted to @core, is a long poll there (remotingLongPollsPerCore) / is back from it. */
static inline void
bk_rmt__poll_count(struct bk_rmt *r, struct rjob *j, uint16_t core)
{
	if (j->poll) {
		struct rconn *c = bk_rmt__conn_get(r, j->conn, j->gen);

		r->polls[core]++;
		if (c)
			c->polls++;
		j->polls_addr = ipcount_add(&r->polls_addr, j->c.peer.ip) != 0;
		j->polled = true;
	}
}

static inline void
bk_rmt__poll_uncount(struct bk_rmt *r, struct rjob *j)
{
	if (j->polled) {
		struct rconn *c = bk_rmt__conn_get(r, j->conn, j->gen);

		r->polls[j->c.core]--;
		if (c && c->polls)
			c->polls--;
		if (j->polls_addr)
			ipcount_sub(&r->polls_addr, j->c.peer.ip);
		j->polls_addr = false;
		j->polled = false;
	}
}

void bk_rmt__busy_answer(struct bk_rmt *r, struct rconn *c, int32_t code, int32_t opaque,
			 uint8_t serialize);

void bk_rmt__busy(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

/* Return: extField @k as a NUL-terminated string (the decoder terminates them), or NULL. */
const char *bk_rmt__ext_s(const struct wire_rem_cmd *q, const char *k, size_t *len);

/* Return: 0 and *@v, or -1 when absent or not an integer. Several names: V1 then V2. */
int bk_rmt__ext_i(const struct wire_rem_cmd *q, const char *k, const char *k2, int64_t *v);

const char *bk_rmt__ext_s2(const struct wire_rem_cmd *q, const char *k, const char *k2,
			   size_t *len);

bool bk_rmt__is_send_forbidden(const char *t);

/* Tag hashes of a TAG expression ("*", "", "a || b"). Return: count, 0 = every tag. */
uint16_t bk_rmt__expr_codes(const char *e, size_t len, int32_t *codes, uint16_t max,
			    bool *too_many);

/* The topic @name, creating it when allowed. Return: the topic, or NULL with *@code set. */
const struct bk_topic *bk_rmt__topic_get(struct bk_rmt *r, const char *name, size_t len,
					 uint32_t create_queues, int32_t *code, const char **why);

uint32_t bk_rmt__rnd(void);

/* Drops members of connection @id (closed) or silent ones; notifies the groups that changed. */
void bk_rmt__groups_sweep(struct bk_rmt *r, bool by_conn, uint32_t id, uint32_t gen);

const struct rsub *bk_rmt__group_sub(struct bk_rmt *r, const char *group, const char *topic);

void bk_rmt__do_heartbeat(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__do_unregister(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__do_consumer_list(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__do_lock(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q, bool lock);

void bk_rmt__do_create_topic(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

/* GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET: the whole table as JSON. */
void bk_rmt__do_get_all(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__do_send(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__do_pull(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

/* QUERY/UPDATE_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST */
void bk_rmt__do_offset(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__do_send_back(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

/* VIEW_MESSAGE_BY_ID and QUERY_MESSAGE: records by physical offset, copied by a core. */
void bk_rmt__do_lookup(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

void bk_rmt__job_done(struct bk_rmt *r, struct rjob *j);

/* ---- transactions (bk_rmt_tx.c) ---- */
/* A HEART_BEAT named producer group @group on @c. */
void bk_rmt__producer_seen(struct bk_rmt *r, struct rconn *c, const char *group,
			   const char *client_id);
/* Forget producers: of connection (@id, @gen) (of @group only, unless NULL), or silent ones. */
void bk_rmt__producers_sweep(struct bk_rmt *r, bool by_conn, uint32_t id, uint32_t gen,
			     const char *group);
/* END_TRANSACTION (37); its answer when it was not oneway. */
void bk_rmt__do_end_tx(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__answer_end_tx(struct bk_rmt *r, struct rconn *c, struct rjob *j);
/* About every second: ask each core for the halves to check back. */
void bk_rmt__tx_tick(struct bk_rmt *r);
/* A core's BK_ROP_TX_CHECK answer: check-backs sent, discards logged (@j is freed by the caller). */
void bk_rmt__tx_check_done(struct bk_rmt *r, struct rjob *j);

/* ---- admin (bk_rmt_admin.c, bk_rmt_stats.c, bk_rmt_client.c) ---- */
void bk_rmt__do_topic_stats(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_consume_stats(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_consume_by_who(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_reset_offset(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
/* A BK_ROP_QSTAT part of an admin request is back (frees @j; may answer). */
void bk_rmt__agg_done(struct bk_rmt *r, struct rjob *j);
/* @j, part of an admin request, is freed without an answer (teardown; bk_rmt_out.c). */
void bk_rmt__agg_drop(struct rjob *j);
/* Notes a reset of (@group, @topic, @qid) to @offset for the group's next pull there. */
void bk_rmt__reset_note(struct bk_rmt *r, const char *group, const char *topic, uint32_t qid,
			int64_t offset);
/*
 * A PULL of @group at @qoff: a reset waits for it (taken: a pull sees it once).
 * Return: true with *@to when the pull must move there instead.
 */
bool bk_rmt__reset_take(struct bk_rmt *r, const char *group, const char *topic, uint32_t qid,
			int64_t qoff, int64_t *to);
/* Do @group's members heartbeat BROADCASTING? */
bool bk_rmt__group_broadcasting(struct bk_rmt *r, const char *group);
/* Has @group a live member? */
bool bk_rmt__group_online(struct bk_rmt *r, const char *group);
/* Groups with a live member subscribed to @topic, into @out. Return: count (<= @max). */
size_t bk_rmt__groups_of_topic(struct bk_rmt *r, const char *topic, char (*out)[RNAME_W],
			       size_t max);
/* Sends RESET_CONSUMER_CLIENT_OFFSET (oneway) to each live member of @group. Return: how many. */
size_t bk_rmt__group_tell_reset(struct bk_rmt *r, const char *group, const char *topic,
				const char *ts, bool force, const uint8_t *body, size_t len);
void bk_rmt__do_delete_topic(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_delete_group(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_stats_data(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_clean_queues(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_group_put(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
/*
 * A slave answers SYSTEM_ERROR to topic and group changes (RocketMQ's guard;
 * bk_rmt_out.c). Return: it did.
 */
bool bk_rmt__slave_refuses(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
/* GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG, GET_BROKER_RUNTIME_INFO */
void bk_rmt__do_config(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
/* GET_CONSUMER_RUNNING_INFO: relayed to the member; its answer comes back through proxy_answer. */
void bk_rmt__do_running_info(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
/* A response frame from @c: a relayed request's answer is passed on. */
void bk_rmt__proxy_answer(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
/* Relayed requests past their deadline (or whose client left) are answered with an error. */
void bk_rmt__proxy_sweep(struct bk_rmt *r);
void bk_rmt__do_consumer_conns(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);
void bk_rmt__do_producer_conns(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q);

/* A request body as JSON (json-c, strict); NULL if it is not. The caller puts it. */
struct json_object *bk_rmt__jparse(const uint8_t *b, size_t len);

/*
 * bk_rmt__acl_refuses() - with aclEnable, is @q refused (then it is answered
 * NO_PERMISSION and counted)? @door: the code's row of the permission table.
 * Sets r->req_acc to the account @q was checked against (NULL: no ACL, or a
 * white-listed address that needs none).
 */
bool bk_rmt__acl_refuses(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q,
			 const struct acl_door *door);
/*
 * bk_rmt__acl_keep_readable() - leave out of @buf (*@len bytes of records back
 * to back) every record whose topic account @ak may not SUB (now: an account
 * removed by a reload keeps nothing); *@len shrinks. Return: records kept.
 */
uint32_t bk_rmt__acl_keep_readable(struct bk_rmt *r, const char *ak, uint8_t *buf, uint32_t *len);

/*
 * The connection's bytes in and out, plain or TLS (bk_rmt_tls.c). Return:
 * bytes (> 0), 0 the peer closed (recv), -EAGAIN wait for epoll, -EPROTO a
 * TLS failure or plain TCP on a TLS-only port (the reason in @why), -errno.
 */
ssize_t bk_rmt__io_recv(struct bk_rmt *r, struct rconn *c, void *buf, size_t n, char *why,
			size_t why_len);
ssize_t bk_rmt__io_send(struct bk_rmt *r, struct rconn *c, const void *buf, size_t n, char *why,
			size_t why_len);
void bk_rmt__tls_free(struct rconn *c);

#endif /* SP_BROKER_BK_RMT_PRIV_H */
