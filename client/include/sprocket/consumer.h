/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer.h - libsprocket's consumers: the pull API (one call per PULL and
 * per offset op) and a push consumer (long polling, a consume thread pool,
 * offsets committed to the broker, failed messages sent back).
 *
 * Tag filtering: the broker filters by tag hash only (docs/protocol.md §5.4);
 * both consumers re-check every message's TAGS against the expression by
 * string, as RocketMQ clients do, so hash collisions never reach the caller.
 *
 * Clustering: the members of a group share the topic's queues, each queue
 * consumed by one member, and they rebalance as members come and go, as
 * RocketMQ's consumers do: every rebalance_ms a push consumer sends a
 * heartbeat to the topic's brokers (RocketMQ's HEART_BEAT on their remoting
 * port, where the member lists live, so Java and ali-ons consumers may share
 * the group), reads the member list and takes its share by the allocation
 * strategy (@allocate). A queue it gives up stops at the next message, and
 * its offset is committed before another member starts from it (a message
 * in the callback then may be consumed twice: at least once). Or fixed
 * membership: member_count > 0 gives this member the share member_index of
 * member_count, no heartbeats (every member configured alike).
 * One push consumer per group per client: the client id names the member.
 *
 * Retries: as RocketMQ's, the push consumer also subscribes to
 * %RETRY%<group>, where the broker puts the messages it sent back, as soon
 * as that topic exists; a failed message is therefore consumed again.
 */
#ifndef SPROCKET_CONSUMER_H
#define SPROCKET_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sprocket/client.h"

/* ---- pull ---- */

/* PULL outcomes, RocketMQ's PullStatus: the broker status they come from. */
enum sp_pull_status {
	SP_PULL_FOUND = 0,	     /* SUCCESS */
	SP_PULL_NO_NEW_MSG = 19,     /* PULL_NOT_FOUND */
	SP_PULL_NO_MATCHED_MSG = 20, /* PULL_RETRY_IMMEDIATELY */
	SP_PULL_OFFSET_ILLEGAL = 21, /* PULL_OFFSET_MOVED: restart at next_offset */
};

struct sp_pull_req {
	int64_t offset;	       /* queue offset to read from */
	uint32_t max_msgs;     /* default 32 */
	uint32_t max_bytes;    /* default 4 MiB */
	const char *expr;      /* tag expression "a || b"; NULL or "*" = all */
	uint32_t suspend_ms;   /* > 0: long poll up to this long (SUSPEND) */
	const char *group;     /* consumer group (required by the broker) */
	int64_t commit_offset; /* > 0: also commit this offset for @group */
};

struct sp_pull_result {
	enum sp_pull_status status;
	int64_t next_offset; /* where the next pull starts */
	int64_t min_offset;
	int64_t max_offset;
	size_t n_msgs; /* after the client's tag re-check */
	struct sp_msg_ext *msgs;
	struct sp_broker_ts ts;
	void *priv_; /* the response buffer; freed by sp_pull_result_free() */
};

/**
 * sp_pull() - one PULL from @mq (RocketMQ DefaultMQPullConsumer.pull).
 * Context: any thread; blocks up to req->suspend_ms plus the round trip.
 * Return: 0 with @res filled (free with sp_pull_result_free(), whatever the
 * status); -EINVAL; -ENOENT no route or queue; SP_ERR_STATUS(st) another
 * broker status; transport errors.
 */
SP_MUST_CHECK int sp_pull(struct sp_client *c, const struct sp_mq *mq,
			  const struct sp_pull_req *req, struct sp_pull_result *res);

void sp_pull_result_free(struct sp_pull_result *res);

/*
 * Queue offsets (GET_MIN_OFFSET, GET_MAX_OFFSET: the next offset to be
 * written, SEARCH_OFFSET: first message stored at or after @ts_ms) and a
 * group's committed offset (QUERY_OFFSET: SP_ERR_STATUS(22) QUERY_NOT_FOUND
 * when the group has none; UPDATE_OFFSET).
 * Context: any thread; blocks for one round trip.
 * Return: 0 with *@off set, or a negative error.
 */
SP_MUST_CHECK int sp_min_offset(struct sp_client *c, const struct sp_mq *mq, int64_t *off);
SP_MUST_CHECK int sp_max_offset(struct sp_client *c, const struct sp_mq *mq, int64_t *off);
SP_MUST_CHECK int sp_search_offset(struct sp_client *c, const struct sp_mq *mq, int64_t ts_ms,
				   int64_t *off);
SP_MUST_CHECK int sp_query_offset(struct sp_client *c, const char *group, const struct sp_mq *mq,
				  int64_t *off);
SP_MUST_CHECK int sp_update_offset(struct sp_client *c, const char *group, const struct sp_mq *mq,
				   int64_t off);

/**
 * sp_send_back() - hand a message that failed to be consumed back to the
 * broker (CONSUMER_SEND_MSG_BACK): it lands in %RETRY%<@group>, or in the
 * DLQ after @max_reconsume tries.
 * @delay_level: 0 the broker decides (3 + reconsume times); < 0 DLQ at once.
 * Context: any thread; blocks for one round trip.
 * Return: 0 or a negative error.
 */
SP_MUST_CHECK int sp_send_back(struct sp_client *c, const char *group, const struct sp_msg_ext *m,
			       const char *broker, int32_t delay_level, int32_t max_reconsume);

/* ---- tag expressions ---- */

/**
 * sp_tag_expr_match() - whether @tags matches @expr ("*", "" or NULL: all;
 * else "a || b || c", compared as whole strings after trimming spaces).
 * Context: any thread, pure.
 */
bool sp_tag_expr_match(const char *expr, const char *tags);

/* ---- push ---- */

enum sp_consume_status {
	SP_CONSUME_SUCCESS = 0,
	SP_CONSUME_LATER = 1, /* RECONSUME_LATER: send it back to %RETRY%<group> */
};

/*
 * One message to consume. Runs on a consume thread; messages of one queue
 * are delivered one at a time in queue order (each queue is served by one
 * consume thread), different queues in parallel. A message that failed
 * earlier comes back from %RETRY%<group> (@mq is then that queue) with
 * msg->topic restored to its original topic and msg->reconsume_times > 0.
 */
typedef enum sp_consume_status (*sp_consume_fn)(void *arg, const struct sp_mq *mq,
						const struct sp_msg_ext *msg);

enum sp_consume_from {
	SP_FROM_LAST = 0,      /* CONSUME_FROM_LAST_OFFSET (RocketMQ's default) */
	SP_FROM_FIRST = 1,     /* CONSUME_FROM_FIRST_OFFSET */
	SP_FROM_TIMESTAMP = 2, /* CONSUME_FROM_TIMESTAMP, see from_ts_ms */
};

/* How a group's members split the queues (their allocation strategy). */
enum sp_rebalance {
	SP_REBALANCE_AVERAGE = 0, /* AllocateMessageQueueAveragely: contiguous ranges */
	/*
	 * AllocateMessageQueueConsistentHash: a hash ring of the members; a
	 * member joining or leaving moves only the queues next to its points
	 * (sticky), at the price of a less even split.
	 */
	SP_REBALANCE_CONSISTENT_HASH = 1,
};

struct sp_push_cfg {
	const char *group;
	const char *topic;
	const char *expr; /* "*" (default) or "a || b" */
	sp_consume_fn fn;
	void *arg;
	unsigned threads;	    /* consume threads (default 4) */
	unsigned member_index;	    /* fixed membership: this member's place, 0..member_count-1 */
	unsigned member_count;	    /* > 0: fixed membership of this many; 0: rebalance (default) */
	enum sp_rebalance allocate; /* the strategy when rebalancing (AVERAGE) */
	/*
	 * RocketMQ's MessageListenerOrderly: each queue is consumed by one
	 * thread of one member at a time, in queue order, also across a
	 * rebalance (the member holds the broker's lock on the queue,
	 * LOCK_BATCH_MQ, renewed every 20 s; a new owner starts once the old
	 * one let go, or its lock expired after the broker's 60 s). A message
	 * the callback fails is retried in place every second, up to
	 * max_reconsume times, then goes to the group's DLQ.
	 */
	bool orderly;
	/*
	 * BROADCASTING: every member consumes every queue, each from its own
	 * place, kept on its own disk (RocketMQ's LocalFileOffsetStore):
	 * <offset_dir>/<group>.json, offset_dir NULL: $HOME/.sprocket/offsets.
	 * A message the callback fails is logged and not consumed again, as in
	 * RocketMQ. Not with orderly or member_count.
	 */
	bool broadcast;
	const char *offset_dir;
	uint32_t rebalance_ms;	   /* heartbeat and rebalance period (20000, RocketMQ's) */
	enum sp_consume_from from; /* where to start when the group has no committed offset */
	int64_t from_ts_ms;
	uint32_t pull_batch;	     /* max messages per pull (32) */
	uint32_t suspend_ms;	     /* long-poll time (15000) */
	uint32_t commit_interval_ms; /* UPDATE_OFFSET period (5000) */
	int32_t max_reconsume;	     /* maxReconsumeTimes (16) */
	uint32_t max_backlog; /* pulled-not-consumed messages per queue before pulls pause (1000) */
};

struct sp_push;

/**
 * sp_push_start() - subscribe and start consuming.
 * Context: any thread; allocates, fetches the route and the starting offsets
 * (blocks for those round trips), starts the consume threads.
 * Return: 0; -EINVAL; -ENOENT the topic has no route; other negative errors.
 */
SP_MUST_CHECK int sp_push_start(struct sp_client *c, const struct sp_push_cfg *cfg,
				struct sp_push **out);

/**
 * sp_push_stop() - stop pulling, let the consume threads finish the message
 * in hand, commit the offsets of what was consumed, free the consumer.
 * Messages pulled but not consumed are delivered again by the next start.
 * Context: any thread but a consume thread.
 */
void sp_push_stop(struct sp_push *p);

/*
 * Return: the queues this member consumes, its %RETRY%<group> queues
 * included once that topic exists (a malloc'd copy in *@out; free() it).
 */
SP_MUST_CHECK int sp_push_queues(struct sp_push *p, struct sp_mq **out, size_t *n);

#endif /* SPROCKET_CONSUMER_H */
