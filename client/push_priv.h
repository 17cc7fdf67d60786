/* SPDX-License-Identifier: Apache-2.0 */
/*
 * push_priv.h - the push consumer's state, shared by push.c (pulling,
 * consuming, offsets, start and stop) and push_group.c (its queues in the
 * group: rebalance and queue locks). Ownership: see push.c's comment.
 */
#ifndef SP_CLIENT_PUSH_PRIV_H
#define SP_CLIENT_PUSH_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client_priv.h"
#include "sprocket/consumer.h"

#define MAX_REDIRECTS 3 /* a queue redirected more in a row: a pull error */
#define RETRY_NS (1000ull * 1000000ull)
#define RETRY_ROUTE_NS (1000ull * 1000000ull)
#define RETRY_QUEUES_MAX 16
#define SEND_BACK_TRIES 3
#define SEND_BACK_BUSY_MS 5000 /* how long SYSTEM_BUSY answers are waited out */
#define CONSUME_LATER_MS 1000
#define RETRY_PREFIX "%RETRY%"
#define LOCK_RENEW_NS (20000ull * 1000000ull) /* RocketMQ's REBALANCE_LOCK_INTERVAL */
#define LOCK_RETRY_NS (1000ull * 1000000ull)  /* a queue not locked yet: ask again */
#define LOCK_LIVE_NS (30000ull * 1000000ull)  /* rebalanceLockMaxLiveTime: stop after */

struct sp_push;

struct pq {
	struct sp_push *p;
	struct sp_mq mq;
	unsigned worker;
	bool used;	     /* the slot holds a queue (slots never move: pulls point at them) */
	bool dropped;	     /* rebalanced away: no more pulls or messages; freed once idle */
	unsigned inwork;     /* answers queued for or in its consume thread */
	bool locked;	     /* orderly: this client holds the broker's lock on it */
	uint64_t locked_ns;  /* orderly: when the lock was last granted */
	unsigned lock_epoch; /* orderly: +1 each time the lock is lost */
	unsigned pull_epoch; /* orderly: lock_epoch when the PULL out now was issued */
	bool have_offset;    /* the start offset is known */
	bool pulling;	     /* a PULL is in flight or queued for the consume thread */
	bool paused;	     /* backlog full: the consume thread pulls when it drains */
	bool retry;	     /* a queue of %RETRY%<group> (immutable once added) */
	int64_t next_pull;
	int64_t consumed; /* everything before it is consumed */
	int64_t committed;
	unsigned backlog;
	uint64_t retry_at_ns;
	uint16_t redirect_port; /* a REDIRECT named the owning core: the route is stale */
	uint8_t redirects;	/* REDIRECTs in a row (MAX_REDIRECTS, then an error) */
};

struct item {
	struct item *next;
	struct pq *q;
	struct sp__call *call;
};

struct worker {
	struct sp_push *p;
	pthread_t th;
	pthread_cond_t cond;
	struct item *head;
	struct item *tail;
};

struct sp_push {
	struct sp_client *c;
	struct sp_push_cfg cfg;
	char group[WIRE_DP_GROUP_MAX + 1];
	char topic[SP_TOPIC_MAX + 1];
	char *expr;

	pthread_mutex_t lock;
	pthread_cond_t ctl_cond;
	bool stopping;
	unsigned refs; /* owner + PULLs in flight */
	struct pq *qs; /* room for cap_q: retry queues are added later, qs never moves */
	size_t n_q;    /* written by the control thread under lock */
	size_t cap_q;
	char retry_topic[SP_TOPIC_MAX + 1]; /* "" when none (name too long) */
	bool retry_added;		    /* control thread only */
	uint64_t retry_check_ns;	    /* next route lookup of retry_topic */
	struct worker *w;
	unsigned n_w;
	pthread_t ctl;
	bool dynamic;		   /* rebalancing membership (member_count 0) */
	struct sp__rbl rbl;	   /* control thread */
	uint64_t rbl_next_ns;	   /* control thread: next heartbeat and rebalance */
	uint64_t lock_next_ns;	   /* control thread, orderly: next LOCK_BATCH_MQ round */
	struct json_object *local; /* broadcast: the offset table (push_local.c), under lock */
	char *local_path;
};

/* push.c */
/* Starts the next PULL of @q. Context: p->lock not held. */
void sp__push_issue_pull(struct pq *q);
/* @q's start: the group's committed offset, else consume_from. Return: 0 or -errno. */
MUST_CHECK int sp__push_start_offset(struct sp_push *p, struct pq *q);

/* push_local.c: a broadcast consumer's offsets on its own disk */
MUST_CHECK int sp__push_local_open(struct sp_push *p, const char *dir);
/* Return: 0 with *@off, -ENOENT none kept for @mq. */
MUST_CHECK int sp__push_local_get(struct sp_push *p, const struct sp_mq *mq, int64_t *off);
/* Write every queue's consumed offset (when one changed). Return: 0 or -errno (logged). */
int sp__push_local_save(struct sp_push *p);
void sp__push_local_close(struct sp_push *p);

/* push_group.c, on the control thread */
void sp__push_rebalance(struct sp_push *p, uint64_t now);
void sp__push_free_dropped(struct sp_push *p);
void sp__push_lock_round(struct sp_push *p, uint64_t now);
/* At stop, after the last commit: let go of every queue lock. */
void sp__push_unlock_all(struct sp_push *p);

#endif /* SP_CLIENT_PUSH_PRIV_H */
