/* SPDX-License-Identifier: Apache-2.0 */
/*
 * producer.h - libsprocket's producer: sync, async, one-way and batch sends
 * over the dataplane (op SEND / SEND_BATCH, docs/protocol.md §5.2).
 *
 * Queue choice: round robin over the topic's write queues, skipping brokers
 * the latency fault table avoids (a broker that failed, or answered slowly,
 * is avoided for a while, as RocketMQ's MQFaultStrategy does), or a
 * caller's queue selector (same key -> same queue). A send that failed
 * without storing the message (SYSTEM_BUSY, NO_PERMISSION, a timeout, a
 * dead session...) is retried up to retry_times more times, on a queue of
 * another broker when there is one (on the same queue with a selector, to
 * keep per-key order). A REDIRECT means the route's queue->core map is
 * stale: the send goes to the core named in the answer (not counted as a
 * retry) and the route is refreshed.
 *
 * Every message gets UNIQ_KEY (a 32-hex client-side id, RocketMQ's
 * MessageClientIDSetter format), and TAGS/KEYS properties.
 *
 * Ownership: a producer may be used from any number of threads at once.
 */
#ifndef SPROCKET_PRODUCER_H
#define SPROCKET_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include "sprocket/client.h"

/*
 * Picks a queue for @msg among @n_queues write queues; returns an index in
 * [0, n_queues). Called on the sending thread.
 */
typedef size_t (*sp_queue_select_fn)(size_t n_queues, const struct sp_msg *msg, void *arg);

/* A ready-made selector: a hash of msg->keys (Java String.hashCode(), like RocketMQ's SelectMessageQueueByHash). */
size_t sp_select_by_key_hash(size_t n_queues, const struct sp_msg *msg, void *arg);

struct sp_producer_cfg {
	const char *group; /* producer group (informational; default "DEFAULT_PRODUCER") */
	unsigned
		retry_times; /* retries after the first try; RocketMQ retryTimesWhenSendFailed (2) */
	uint32_t send_timeout_ms;    /* overall budget of one send with its retries (3000) */
	bool fault_tolerance;	     /* avoid failed/slow brokers (true) */
	uint32_t fault_avoid_ms;     /* how long a failed broker is avoided (30000) */
	sp_queue_select_fn selector; /* NULL: round robin */
	void *selector_arg;
	/*
	 * RocketMQ's compressMsgBodyOverHowmuch: a body of at least this many
	 * bytes is sent zlib-compressed (sysFlag bit 0; consumers inflate it);
	 * 0: 4096, as RocketMQ; SP_COMPRESS_OFF: never. Batches are not.
	 */
	uint32_t compress_over;
	int compress_level; /* zlib level 1..9; 0: 5 (RocketMQ's default) */
};

#define SP_COMPRESS_OFF UINT32_MAX

struct sp_producer;

/* The result of a send. */
struct sp_send_result {
	int32_t status;		       /* 0 SEND_OK, or a stored-but status: 10 FLUSH_DISK_TIMEOUT,
			   11 SLAVE_NOT_AVAILABLE, 12 FLUSH_SLAVE_TIMEOUT */
	char msg_id[SP_MSGID_LEN + 1]; /* UNIQ_KEY (batch: of the first message) */
	char offset_msg_id[SP_OFFSET_MSGID_MAX]; /* hex(store host, phys offset); "" if unknown */
	char broker[SP_BROKER_MAX + 1];
	int32_t queue_id;
	int64_t queue_offset;	/* batch: of the first message */
	int64_t phys_offset;	/* batch: of the first message */
	uint32_t count;		/* messages stored (batch: n) */
	unsigned tries;		/* 1 + retries used (redirects not counted) */
	struct sp_broker_ts ts; /* of the answer that completed the send */
	uint64_t t_submit_ns;	/* client CLOCK_MONOTONIC: request handed to the port */
	uint64_t t_done_ns;	/* client CLOCK_MONOTONIC: response complete */
};

/*
 * An async send finished: @err 0 with @res, or a negative error (@res has
 * msg_id and tries). Runs on the client's callback thread; may send again.
 */
typedef void (*sp_send_cb)(void *arg, int err, const struct sp_send_result *res);

/**
 * sp_producer_create() - a producer on @c.
 * Context: any thread; allocates.
 * Return: 0, -EINVAL, -ENOMEM.
 */
SP_MUST_CHECK int sp_producer_create(struct sp_client *c, const struct sp_producer_cfg *cfg,
				     struct sp_producer **out);

/* Waits for async sends in flight, then frees. Context: not from a send callback. */
void sp_producer_destroy(struct sp_producer *p);

/**
 * sp_producer_send() - send @msg and wait for the broker's answer.
 * Context: any thread; blocks up to about send_timeout_ms (plus a route fetch
 * on the first use of a topic).
 * Return: 0 stored (@res->status may be a stored-but status); -EINVAL a bad
 * message; -ENOENT no route; -ETIMEDOUT; SP_ERR_STATUS(st) the broker refused
 * it on the last try; other negative errno.
 */
SP_MUST_CHECK int sp_producer_send(struct sp_producer *p, const struct sp_msg *msg,
				   struct sp_send_result *res);

/**
 * sp_producer_send_async() - send @msg; @cb runs once with the outcome.
 * Context: any thread; blocks only for a route fetch on first use of a topic.
 * Return: 0 (@cb will run exactly once); a negative error (@cb will not run).
 */
SP_MUST_CHECK int sp_producer_send_async(struct sp_producer *p, const struct sp_msg *msg,
					 sp_send_cb cb, void *arg);

/**
 * sp_producer_send_oneway() - send @msg without waiting or retrying; the answer
 * is dropped (RocketMQ sendOneway).
 * Context: any thread.
 * Return: 0 handed to the I/O thread; a negative error.
 */
SP_MUST_CHECK int sp_producer_send_oneway(struct sp_producer *p, const struct sp_msg *msg);

/**
 * sp_producer_send_batch() - send @n messages of one topic as one SEND_BATCH
 * (a RocketMQ batch body) to one queue, atomically stored in order.
 * @msg_ids: optional, receives each message's UNIQ_KEY.
 * Context: any thread; blocks like sp_producer_send().
 * Return: as sp_producer_send(); -EINVAL topics differ or @n is 0; -EMSGSIZE
 * the batch exceeds the transport's message limit.
 */
SP_MUST_CHECK int sp_producer_send_batch(struct sp_producer *p, const struct sp_msg *msgs, size_t n,
					 struct sp_send_result *res,
					 char (*msg_ids)[SP_MSGID_LEN + 1]);

/* ---- transactional producer (RocketMQ's TransactionMQProducer; docs/client.md) ---- */

/* A local transaction's outcome (RocketMQ's LocalTransactionState; END_TRANSACTION's values). */
enum sp_tx_state {
	SP_TX_UNKNOWN = 0,   /* not known yet: the broker checks back later */
	SP_TX_COMMIT = 8,    /* deliver the message */
	SP_TX_ROLLBACK = 12, /* drop it */
};

/* Runs the local transaction of @msg, whose half the broker holds (@half). */
typedef enum sp_tx_state (*sp_tx_exec_fn)(void *arg, const struct sp_msg *msg,
					  const struct sp_send_result *half);
/*
 * The broker asks about a half left unresolved (transactionTimeOut): the
 * local transaction's state now. Runs on the producer's checker thread.
 */
typedef enum sp_tx_state (*sp_tx_check_fn)(void *arg, const struct sp_msg_ext *half);

struct sp_tx_producer_cfg {
	const char *group;    /* producer group (PGROUP): check-backs go to its members */
	sp_tx_check_fn check; /* required */
	void *check_arg;
	uint32_t send_timeout_ms; /* the half's send, and END_TRANSACTION (3000) */
};

struct sp_tx_producer;

/**
 * sp_tx_producer_create() - a transactional producer of @cfg->group on @c,
 * with a checker thread that answers the brokers' check-backs (it holds a
 * remoting connection to each broker it sent a half to, and heartbeats).
 * Context: any thread; allocates. Return: 0, -EINVAL, -ENOMEM, -errno.
 */
SP_MUST_CHECK int sp_tx_producer_create(struct sp_client *c, const struct sp_tx_producer_cfg *cfg,
					struct sp_tx_producer **out);
void sp_tx_producer_destroy(struct sp_tx_producer *p);

/**
 * sp_tx_send() - RocketMQ's sendMessageInTransaction: send @msg as a half
 * (invisible to consumers), run @exec, then commit, roll back or leave it
 * to the check-back (END_TRANSACTION to the half's broker).
 * @res: the half's send result; @state: what @exec returned.
 * Context: any thread; blocks (the send, @exec, END_TRANSACTION).
 * Return: 0 (the half is stored and its outcome handed to the broker, or
 * left to the check-back); a send error (nothing stored, @exec not run);
 * -EINVAL a delay level, a delivery time or a batch; an END_TRANSACTION
 * error (the half is stored: the check-back resolves it).
 */
SP_MUST_CHECK int sp_tx_send(struct sp_tx_producer *p, const struct sp_msg *msg, sp_tx_exec_fn exec,
			     void *arg, struct sp_send_result *res, enum sp_tx_state *state);

#endif /* SPROCKET_PRODUCER_H */
