// SPDX-License-Identifier: Apache-2.0
/*
 * test_rmt.c - sprocket-broker's RocketMQ remoting port (broker/remoting/bk_rmt.c) as
 * a process, driven by a remoting client over TCP with the project's codec:
 * sends (V1, V2, batch, binary header), pulls with long polling and tag
 * filters, offsets, heartbeats and consumer lists with the notify pushed to
 * members, send-back to %RETRY%, lookups by id and key, queue locks, topic
 * creation, unknown codes, and malformed or oversized frames (only that
 * connection closes). ali-ons (tests/compat) covers a real client.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bk_proc.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "harness.h"
#include "ns_client.h"
#include "wire/record.h"
#include "wire/remoting.h"

#define T 5000

static struct bk_proc B;

static void
start(const char *const *extra)
{
	static const char *const none[] = {NULL};

	memset(&B, 0, sizeof(B));
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, extra ? extra : none, &B), 0);
	T_ASSERT(B.rmt_port != 0);
}

static void
conn(struct ns_client *c)
{
	T_ASSERT_EQ(nsc_connect(B.rmt_port, c), 0);
}

/* SEND_MESSAGE_V2 as ali-ons sends it. Return: the response code; msgId etc. in c->rsp. */
static int
send_v2(struct ns_client *c, const char *topic, int qid, const char *props, const char *body)
{
	char q[16], born[24];
	const char *ext[] = {"a", "PID_T", "b", topic, "c", "TBW102", "d", "4",
			     "e", q,	   "f", "0",   "g", born,     "h", "0",
			     "i", props,   "j", "0",   "k", "false",  NULL};

	snprintf(q, sizeof(q), "%d", qid);
	snprintf(born, sizeof(born), "%lld", (long long)clk_wall_ms());
	return nsc_call(c, WIRE_REQ_SEND_MESSAGE_V2, ext, body, strlen(body));
}

static int
pull(struct ns_client *c, const char *group, const char *topic, int qid, long long off,
     const char *sub, long long suspend_ms)
{
	char q[16], o[24], s[24], flag[8];
	const char *ext[] = {"consumerGroup",
			     group,
			     "topic",
			     topic,
			     "queueId",
			     q,
			     "queueOffset",
			     o,
			     "maxMsgNums",
			     "32",
			     "sysFlag",
			     flag,
			     "commitOffset",
			     "-1",
			     "suspendTimeoutMillis",
			     s,
			     "subscription",
			     sub,
			     "subVersion",
			     "1",
			     NULL};

	snprintf(q, sizeof(q), "%d", qid);
	snprintf(o, sizeof(o), "%lld", off);
	snprintf(s, sizeof(s), "%lld", suspend_ms);
	snprintf(flag, sizeof(flag), "%d", suspend_ms ? 6 : 4);
	return nsc_call(c, WIRE_REQ_PULL_MESSAGE, ext, NULL, 0);
}

static long long
ext_ll(const struct ns_client *c, const char *k)
{
	const char *v = nsc_ext(c, k);

	T_ASSERT(v != NULL);
	return atoll(v);
}

/* Decode the records of the last response body into @m (up to @max). Return: count. */
static int
records(const struct ns_client *c, struct wire_msg *m, int max)
{
	size_t at = 0;
	int n = 0;

	while (at < c->rsp.body_len && n < max) {
		long l = wire_rec_decode(c->rsp.body + at, c->rsp.body_len - at,
					 WIRE_REC_VERIFY_CRC, &m[n]);

		T_ASSERT(l > 0);
		at += (size_t)l;
		n++;
	}
	T_ASSERT_EQ(at, c->rsp.body_len);
	return n;
}

static bool
prop_is(const struct wire_msg *m, const char *k, const char *v)
{
	const char *got;
	size_t len;

	return wire_props_get(m->props, m->props_len, k, &got, &len) && len == strlen(v) &&
	       memcmp(got, v, len) == 0;
}

/* Send, pull back byte-equal with tags and keys; the pull's four offsets on every answer. */
static void
test_send_pull(void)
{
	struct ns_client c;
	struct wire_msg m[32];
	char id[64];
	long long qoff;

	start(NULL);
	conn(&c);
	T_ASSERT_EQ(send_v2(&c, "RmtA", 1, "TAGS\001TagA\002KEYS\001k1\002u\001v\002", "hello"),
		    WIRE_RSP_SUCCESS);
	snprintf(id, sizeof(id), "%s", nsc_ext(&c, "msgId"));
	T_ASSERT_EQ(strlen(id), 32u);
	T_ASSERT_EQ(ext_ll(&c, "queueId"), 1);
	qoff = ext_ll(&c, "queueOffset");
	T_ASSERT_EQ(qoff, 0);
	T_ASSERT(nsc_ext(&c, "MSG_REGION") != NULL);
	T_ASSERT_EQ(send_v2(&c, "RmtA", 1, "TAGS\001TagB\002", "other"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(send_v2(&c, "RmtA", 1, "TAGS\001TagA\002", "third"), WIRE_RSP_SUCCESS);

	T_ASSERT_EQ(pull(&c, "G1", "RmtA", 1, 0, "*", 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&c, m, 32), 3);
	T_ASSERT_EQ(m[0].body_len, 5u);
	T_ASSERT_MEMEQ(m[0].body, "hello", 5);
	T_ASSERT(prop_is(&m[0], "TAGS", "TagA"));
	T_ASSERT(prop_is(&m[0], "KEYS", "k1"));
	T_ASSERT(prop_is(&m[0], "u", "v"));
	T_ASSERT_EQ(m[0].queue_id, 1);
	T_ASSERT_EQ(ext_ll(&c, "nextBeginOffset"), 3);
	T_ASSERT_EQ(ext_ll(&c, "maxOffset"), 3);
	T_ASSERT_EQ(ext_ll(&c, "minOffset"), 0);
	T_ASSERT(nsc_ext(&c, "suggestWhichBrokerId") != NULL);

	/* Tag filter: TagA only (the broker filters by hash). */
	T_ASSERT_EQ(pull(&c, "G1", "RmtA", 1, 0, "TagA || TagC", 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&c, m, 32), 2);
	T_ASSERT_MEMEQ(m[1].body, "third", 5);

	/*
	 * Nothing matches, even with suspend: RETRY_IMMEDIATELY past what was
	 * scanned (RocketMQ's NO_MATCHED_MESSAGE), not a parked pull that
	 * leaves the consumer's offset behind.
	 */
	T_ASSERT_EQ(pull(&c, "G1", "RmtA", 1, 0, "TagC", 20000), WIRE_RSP_PULL_RETRY_IMMEDIATELY);
	T_ASSERT_EQ(ext_ll(&c, "nextBeginOffset"), 3);
	/* Nothing new and no suspend: PULL_NOT_FOUND, with the offsets. */
	T_ASSERT_EQ(pull(&c, "G1", "RmtA", 1, 3, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	T_ASSERT_EQ(ext_ll(&c, "nextBeginOffset"), 3);
	/* Past the end: OFFSET_MOVED to max. */
	T_ASSERT_EQ(pull(&c, "G1", "RmtA", 1, 99, "*", 0), WIRE_RSP_PULL_OFFSET_MOVED);
	T_ASSERT_EQ(ext_ll(&c, "nextBeginOffset"), 3);
	/* Unknown topic: TOPIC_NOT_EXIST, still with the four fields. */
	T_ASSERT_EQ(pull(&c, "G1", "NoSuch", 0, 0, "*", 0), WIRE_RSP_TOPIC_NOT_EXIST);
	T_ASSERT(nsc_ext(&c, "maxOffset") != NULL);
	/* Queue out of range. */
	T_ASSERT_EQ(pull(&c, "G1", "RmtA", 99, 0, "*", 0), WIRE_RSP_SYSTEM_ERROR);

	/* VIEW_MESSAGE_BY_ID: the offset inside the msgId. */
	{
		struct wire_host h;
		int64_t phys;
		char off[24];
		const char *ext[] = {"offset", off, NULL};

		T_ASSERT_EQ(wire_msgid_decode(id, strlen(id), &h, &phys), 0);
		T_ASSERT_EQ(h.port, B.rmt_port); /* STOREHOST is the advertised remoting address */
		snprintf(off, sizeof(off), "%lld", (long long)phys);
		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_VIEW_MESSAGE_BY_ID, ext, NULL, 0),
			    WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(records(&c, m, 1), 1);
		T_ASSERT_MEMEQ(m[0].body, "hello", 5);
		snprintf(off, sizeof(off), "%lld", (long long)phys + 3);
		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_VIEW_MESSAGE_BY_ID, ext, NULL, 0),
			    WIRE_RSP_SYSTEM_ERROR);
	}
	/* QUERY_MESSAGE by key: the indexer runs in the background, so wait for it. */
	{
		char end[24];
		const char *ext[] = {"topic",	       "RmtA", "key",	       "k1", "maxNum", "32",
				     "beginTimestamp", "0",    "endTimestamp", end,  NULL};
		int rc = -1;

		snprintf(end, sizeof(end), "%lld", (long long)clk_wall_ms() + 60000);
		for (int i = 0; i < 100 && rc != WIRE_RSP_SUCCESS; i++) {
			rc = nsc_call(&c, WIRE_REQ_QUERY_MESSAGE, ext, NULL, 0);
			if (rc != WIRE_RSP_SUCCESS)
				usleep(50000);
		}
		T_ASSERT_EQ(rc, WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(records(&c, m, 32), 1);
		T_ASSERT_MEMEQ(m[0].body, "hello", 5);
		T_ASSERT(nsc_ext(&c, "indexLastUpdateTimestamp") != NULL);
	}
	/* V1 names, binary (ROCKETMQ) header: the answer comes in the request's type. */
	{
		char born[24];
		const char *ext[] = {"producerGroup",
				     "P",
				     "topic",
				     "RmtA",
				     "defaultTopic",
				     "TBW102",
				     "defaultTopicQueueNums",
				     "4",
				     "queueId",
				     "-1",
				     "sysFlag",
				     "0",
				     "bornTimestamp",
				     born,
				     "flag",
				     "7",
				     "properties",
				     "TAGS\001TagZ",
				     NULL};
		int op;

		snprintf(born, sizeof(born), "%lld", (long long)clk_wall_ms());
		op = nsc_send(&c, WIRE_REQ_SEND_MESSAGE, 0, WIRE_REM_ROCKETMQ, ext, "v1", 2);
		T_ASSERT(op >= 0);
		T_ASSERT_EQ(nsc_recv(&c, T), 0);
		T_ASSERT_EQ(c.rsp.opaque, op);
		T_ASSERT_EQ(c.rsp.serialize, WIRE_REM_ROCKETMQ);
		T_ASSERT_EQ(c.rsp.code, WIRE_RSP_SUCCESS);
		T_ASSERT(ext_ll(&c, "queueId") >= 0 && ext_ll(&c, "queueId") < 4);
	}
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

/* A parked pull is answered by a send from another connection; one that finds nothing times out. */
static void
test_long_poll(void)
{
	struct ns_client c, p;
	struct wire_msg m[4];
	int op;
	char q[8] = "0", o[8] = "0";
	const char *ext[] = {"consumerGroup",
			     "G",
			     "topic",
			     "RmtL",
			     "queueId",
			     q,
			     "queueOffset",
			     o,
			     "maxMsgNums",
			     "32",
			     "sysFlag",
			     "6",
			     "commitOffset",
			     "-1",
			     "suspendTimeoutMillis",
			     "20000",
			     "subscription",
			     "*",
			     "subVersion",
			     "1",
			     NULL};

	start(NULL);
	conn(&c);
	conn(&p);
	/* The topic exists (auto-created by a first send); queue 2 is empty. */
	T_ASSERT_EQ(send_v2(&p, "RmtL", 0, "", "x"), WIRE_RSP_SUCCESS);
	snprintf(q, sizeof(q), "2");
	op = nsc_send(&c, WIRE_REQ_PULL_MESSAGE, 0, WIRE_REM_JSON, ext, NULL, 0);
	T_ASSERT(op >= 0);
	T_ASSERT_EQ(nsc_recv(&c, 300), -ETIMEDOUT); /* parked, not answered */
	T_ASSERT_EQ(send_v2(&p, "RmtL", 2, "", "wake"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(nsc_recv(&c, T), 0);
	T_ASSERT_EQ(c.rsp.opaque, op);
	T_ASSERT_EQ(c.rsp.code, WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&c, m, 4), 1);
	T_ASSERT_MEMEQ(m[0].body, "wake", 4);
	/* A parked pull filtering TagA skips a TagB that arrives and waits for a TagA. */
	{
		const char *tx[] = {"consumerGroup",
				    "G",
				    "topic",
				    "RmtL",
				    "queueId",
				    "1",
				    "queueOffset",
				    "0",
				    "maxMsgNums",
				    "32",
				    "sysFlag",
				    "6",
				    "commitOffset",
				    "-1",
				    "suspendTimeoutMillis",
				    "20000",
				    "subscription",
				    "TagA",
				    "subVersion",
				    "1",
				    NULL};

		op = nsc_send(&c, WIRE_REQ_PULL_MESSAGE, 0, WIRE_REM_JSON, tx, NULL, 0);
		T_ASSERT(op >= 0);
		/*
		 * Parked before the TagB goes in: the pull reaches its core through
		 * control, the SEND through another connection, so without this wait
		 * the TagB can be stored first (seen under ASan) and the pull then
		 * answers at once, past it (RETRY_IMMEDIATELY), not parked.
		 */
		T_ASSERT_EQ(nsc_recv(&c, 300), -ETIMEDOUT);
		T_ASSERT_EQ(send_v2(&p, "RmtL", 1, "TAGS\001TagB\002", "b"), WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(nsc_recv(&c, 300), -ETIMEDOUT); /* still parked */
		T_ASSERT_EQ(send_v2(&p, "RmtL", 1, "TAGS\001TagA\002", "a"), WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(nsc_recv(&c, T), 0);
		T_ASSERT_EQ(c.rsp.opaque, op);
		T_ASSERT_EQ(c.rsp.code, WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(records(&c, m, 4), 1);
		T_ASSERT_MEMEQ(m[0].body, "a", 1);
		T_ASSERT_EQ(ext_ll(&c, "nextBeginOffset"), 2);
	}
	/* Suspended but nothing comes: PULL_NOT_FOUND at the end of the suspend time. */
	T_ASSERT_EQ(pull(&c, "G", "RmtL", 3, 0, "*", 200), WIRE_RSP_PULL_NOT_FOUND);
	T_ASSERT_EQ(ext_ll(&c, "nextBeginOffset"), 0);
	/*
	 * One connection keeps 1025 long polls on one queue: half its 1024
	 * requests in flight park at the core, the rest the remoting thread
	 * holds (bk_rmt_held.c); none is refused, none answered before the
	 * queue grows, and one message then answers every one of them.
	 */
	{
		struct ns_client h;
		int n = 0, found = 0;

		conn(&h);
		snprintf(q, sizeof(q), "3");
		for (int i = 0; i < 1025; i++)
			T_ASSERT(nsc_send(&h, WIRE_REQ_PULL_MESSAGE, 0, WIRE_REM_JSON, ext, NULL,
					  0) >= 0);
		T_ASSERT_EQ(nsc_recv(&h, 500), -ETIMEDOUT);
		T_ASSERT_EQ(send_v2(&p, "RmtL", 3, "", "many"), WIRE_RSP_SUCCESS);
		for (; n < 1025 && nsc_recv(&h, T) == 0; n++) {
			found += h.rsp.code == WIRE_RSP_SUCCESS && records(&h, m, 4) == 1 &&
				 memcmp(m[0].body, "many", 4) == 0;
			T_ASSERT(nsc_ext(&h, "nextBeginOffset") != NULL);
		}
		T_ASSERT_EQ(n, 1025);
		T_ASSERT_EQ(found, 1025);
		nsc_close(&h);
	}
	/*
	 * A client that leaves with a pull parked does not disturb anyone. Until
	 * the broker has seen it close, a SEND racing that may be answered
	 * SYSTEM_BUSY, which clients retry.
	 */
	T_ASSERT(nsc_send(&p, WIRE_REQ_PULL_MESSAGE, 0, WIRE_REM_JSON, ext, NULL, 0) >= 0);
	nsc_close(&p);
	{
		int rc = WIRE_RSP_SYSTEM_BUSY;

		for (int i = 0; i < 100 && rc == WIRE_RSP_SYSTEM_BUSY; i++) {
			rc = send_v2(&c, "RmtL", 2, "", "after");
			if (rc == WIRE_RSP_SYSTEM_BUSY)
				usleep(20 * 1000);
		}
		T_ASSERT_EQ(rc, WIRE_RSP_SUCCESS);
	}
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

static int
offset_call(struct ns_client *c, int code, const char *group, const char *topic, int qid,
	    const char *k, const char *v)
{
	char q[8];
	const char *ext[] = {"consumerGroup", group, "topic", topic, "queueId", q, k, v, NULL};

	snprintf(q, sizeof(q), "%d", qid);
	if (k == NULL)
		ext[6] = NULL;
	return nsc_call(c, code, ext, NULL, 0);
}

/*
 * A long poll the remoting thread holds (the cores' park tables full: one
 * place here): a message wakes it, and posted again it does not write back
 * the commit it carried, which the group has moved past meanwhile.
 */
static void
test_held_pull(void)
{
	static const char *const args[] = {"--remotingLongPollsPerCore=1", NULL};
	struct ns_client a, h, p;
	struct wire_msg m[4];
	char q[8] = "3", g[8] = "GA", flag[8] = "6"; /* queues 1 and 3: one core of 1 or 2 */
	const char *ext[] = {"consumerGroup",
			     g,
			     "topic",
			     "RmtH",
			     "queueId",
			     q,
			     "queueOffset",
			     "0",
			     "maxMsgNums",
			     "32",
			     "sysFlag",
			     flag,
			     "commitOffset",
			     "3",
			     "suspendTimeoutMillis",
			     "20000",
			     "subscription",
			     "*",
			     "subVersion",
			     "1",
			     NULL};

	start(args);
	conn(&a);
	conn(&h);
	conn(&p);
	T_ASSERT_EQ(send_v2(&p, "RmtH", 0, "", "x"), WIRE_RSP_SUCCESS);
	/* a's pull takes the core's one place (queue 3, on queue 1's core) */
	T_ASSERT(nsc_send(&a, WIRE_REQ_PULL_MESSAGE, 0, WIRE_REM_JSON, ext, NULL, 0) >= 0);
	T_ASSERT_EQ(nsc_recv(&a, 300), -ETIMEDOUT);
	/* h's, committing 3 (sysFlag 7: commit, suspend, subscription), is held */
	snprintf(q, sizeof(q), "1");
	snprintf(g, sizeof(g), "GH");
	snprintf(flag, sizeof(flag), "7");
	T_ASSERT(nsc_send(&h, WIRE_REQ_PULL_MESSAGE, 0, WIRE_REM_JSON, ext, NULL, 0) >= 0);
	T_ASSERT_EQ(nsc_recv(&h, 300), -ETIMEDOUT);
	T_ASSERT_EQ(offset_call(&p, WIRE_REQ_UPDATE_CONSUMER_OFFSET, "GH", "RmtH", 1,
				"commitOffset", "7"),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(send_v2(&p, "RmtH", 1, "", "wake"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(nsc_recv(&h, T), 0);
	T_ASSERT_EQ(h.rsp.code, WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&h, m, 4), 1);
	T_ASSERT_MEMEQ(m[0].body, "wake", 4);
	T_ASSERT_EQ(offset_call(&p, WIRE_REQ_QUERY_CONSUMER_OFFSET, "GH", "RmtH", 1, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&p, "offset"), 7);
	nsc_close(&a);
	nsc_close(&h);
	nsc_close(&p);
	T_ASSERT_EQ(bk_stop(&B), 0);
	T_ASSERT(bk_log_has(&B, "1 long polls held off the cores"));
	bk_cleanup(&B);
}

/* Offsets: commit and query, unknown, -1 from ali-ons; min, max, search, earliest; restart. */
static void
test_offsets(void)
{
	struct ns_client c;
	long long t0;

	start(NULL);
	conn(&c);
	T_ASSERT_EQ(send_v2(&c, "RmtO", 0, "", "a"), WIRE_RSP_SUCCESS);
	t0 = clk_wall_ms();
	usleep(20000);
	T_ASSERT_EQ(send_v2(&c, "RmtO", 0, "", "b"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_QUERY_CONSUMER_OFFSET, "GO", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_QUERY_NOT_FOUND);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_UPDATE_CONSUMER_OFFSET, "GO", "RmtO", 0,
				"commitOffset", "-1"),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_QUERY_CONSUMER_OFFSET, "GO", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_QUERY_NOT_FOUND);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_UPDATE_CONSUMER_OFFSET, "GO", "RmtO", 0,
				"commitOffset", "1"),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_QUERY_CONSUMER_OFFSET, "GO", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&c, "offset"), 1);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_GET_MAX_OFFSET, "", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&c, "offset"), 2);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_GET_MIN_OFFSET, "", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&c, "offset"), 0);
	{
		char ts[24];

		snprintf(ts, sizeof(ts), "%lld", t0 + 5);
		T_ASSERT_EQ(offset_call(&c, WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP, "", "RmtO", 0,
					"timestamp", ts),
			    WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(ext_ll(&c, "offset"), 1);
	}
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_GET_EARLIEST_MSG_STORETIME, "", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	T_ASSERT(ext_ll(&c, "timestamp") <= t0 && ext_ll(&c, "timestamp") > t0 - 60000);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_GET_MAX_OFFSET, "", "NoSuchTopic", 0, NULL, NULL),
		    WIRE_RSP_TOPIC_NOT_EXIST);
	/* Piggy-backed commit on a pull (sysFlag bit 0). */
	{
		const char *ext[] = {"consumerGroup",
				     "GO",
				     "topic",
				     "RmtO",
				     "queueId",
				     "0",
				     "queueOffset",
				     "2",
				     "maxMsgNums",
				     "32",
				     "sysFlag",
				     "1",
				     "commitOffset",
				     "2",
				     "suspendTimeoutMillis",
				     "0",
				     "subVersion",
				     "1",
				     NULL};

		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_PULL_MESSAGE, ext, NULL, 0),
			    WIRE_RSP_PULL_NOT_FOUND);
	}
	nsc_close(&c);
	/* Committed offsets survive a clean restart (consumerOffset.json). */
	T_ASSERT_EQ(bk_stop(&B), 0);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, (const char *const[]){NULL}, &B), 0);
	conn(&c);
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_QUERY_CONSUMER_OFFSET, "GO", "RmtO", 0, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&c, "offset"), 2);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

static int
heartbeat(struct ns_client *c, const char *client_id, const char *group)
{
	char body[1024];

	snprintf(body, sizeof(body),
		 "{\"clientID\":\"%s\",\"consumerDataSet\":[{\"consumeFromWhere\":"
		 "\"CONSUME_FROM_FIRST_OFFSET\",\"consumeType\":\"CONSUME_PASSIVELY\","
		 "\"groupName\":\"%s\",\"messageModel\":\"CLUSTERING\",\"subscriptionDataSet\":"
		 "[{\"classFilterMode\":false,\"codeSet\":[],\"subString\":\"TagA\","
		 "\"subVersion\":1,\"tagsSet\":[\"TagA\"],\"topic\":\"RmtG\"}],"
		 "\"unitMode\":false}],\"producerDataSet\":[{\"groupName\":\"P\"}]}",
		 client_id, group);
	return nsc_call(c, WIRE_REQ_HEART_BEAT, NULL, body, strlen(body));
}

/* Skips server-initiated requests until a NOTIFY_CONSUMER_IDS_CHANGED for @group. */
static bool
notified(struct ns_client *c, const char *group)
{
	while (nsc_recv(c, T) == 0) {
		const char *g = nsc_ext(c, "consumerGroup");

		if (c->rsp.code == WIRE_REQ_NOTIFY_CONSUMER_IDS_CHANGED &&
		    !(c->rsp.flag & WIRE_REM_FLAG_RESPONSE) && g && strcmp(g, group) == 0)
			return true;
	}
	return false;
}

static int
consumer_list(struct ns_client *c, const char *group, char *out, size_t cap)
{
	const char *ext[] = {"consumerGroup", group, NULL};
	int rc = nsc_call(c, WIRE_REQ_GET_CONSUMER_LIST_BY_GROUP, ext, NULL, 0);

	snprintf(out, cap, "%.*s", (int)c->rsp.body_len, (const char *)c->rsp.body);
	return rc;
}

/* Heartbeats make a group; members hear of every change; a closed connection leaves. */
static void
test_groups(void)
{
	struct ns_client a, b, c;
	char list[512];
	struct wire_msg m[4];

	start(NULL);
	conn(&a);
	conn(&b);
	conn(&c);
	T_ASSERT_EQ(consumer_list(&c, "GG", list, sizeof(list)), WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(heartbeat(&a, "10.0.0.1@1", "GG"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(consumer_list(&c, "GG", list, sizeof(list)), WIRE_RSP_SUCCESS);
	T_ASSERT_STREQ(list, "{\"consumerIdList\":[\"10.0.0.1@1\"]}");
	T_ASSERT_EQ(heartbeat(&b, "10.0.0.2@2", "GG"), WIRE_RSP_SUCCESS);
	T_ASSERT(notified(&a, "GG"));
	T_ASSERT_EQ(consumer_list(&c, "GG", list, sizeof(list)), WIRE_RSP_SUCCESS);
	T_ASSERT_STREQ(list, "{\"consumerIdList\":[\"10.0.0.1@1\",\"10.0.0.2@2\"]}");
	/* The same heartbeat again changes nothing: no notify (checked below: next is one). */
	T_ASSERT_EQ(heartbeat(&b, "10.0.0.2@2", "GG"), WIRE_RSP_SUCCESS);
	nsc_close(&b);
	T_ASSERT(notified(&a, "GG"));
	T_ASSERT_EQ(consumer_list(&c, "GG", list, sizeof(list)), WIRE_RSP_SUCCESS);
	T_ASSERT_STREQ(list, "{\"consumerIdList\":[\"10.0.0.1@1\"]}");
	/* Its retry topic exists now (auto-created by the heartbeat, 1 queue). */
	T_ASSERT_EQ(offset_call(&c, WIRE_REQ_GET_MAX_OFFSET, "", "%RETRY%GG", 0, NULL, NULL),
		    WIRE_RSP_SUCCESS);
	/* A pull without a subscription uses the heartbeat's (TagA). */
	T_ASSERT_EQ(send_v2(&c, "RmtG", 0, "TAGS\001TagB\002", "b"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(send_v2(&c, "RmtG", 0, "TAGS\001TagA\002", "a"), WIRE_RSP_SUCCESS);
	{
		const char *ext[] = {"consumerGroup",
				     "GG",
				     "topic",
				     "RmtG",
				     "queueId",
				     "0",
				     "queueOffset",
				     "0",
				     "maxMsgNums",
				     "32",
				     "sysFlag",
				     "0",
				     "commitOffset",
				     "0",
				     "suspendTimeoutMillis",
				     "0",
				     "subVersion",
				     "1",
				     NULL};

		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_PULL_MESSAGE, ext, NULL, 0), WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(records(&c, m, 4), 1);
		T_ASSERT_MEMEQ(m[0].body, "a", 1);
	}
	/* UNREGISTER_CLIENT leaves at once. */
	{
		const char *ext[] = {"clientID", "10.0.0.1@1", "consumerGroup", "GG", NULL};

		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UNREGISTER_CLIENT, ext, NULL, 0),
			    WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(consumer_list(&c, "GG", list, sizeof(list)), WIRE_RSP_SYSTEM_ERROR);
	}
	/* Bad heartbeat JSON: an error answer, the connection stays. */
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_HEART_BEAT, NULL, "{nope", 5), WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(heartbeat(&c, "10.0.0.3@3", "GG"), WIRE_RSP_SUCCESS);
	nsc_close(&a);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

/* SEND_BACK: to %RETRY%<group> with RETRY_TOPIC and ORIGIN_MESSAGE_ID; -1 goes to the DLQ. */
static void
test_send_back(void)
{
	struct ns_client c;
	struct wire_msg m[4];
	struct wire_host h;
	int64_t phys;
	char off[24], id[64];
	const char *ext[] = {"offset",
			     off,
			     "group",
			     "GB",
			     "delayLevel",
			     "0",
			     "originMsgId",
			     id,
			     "originTopic",
			     "RmtB",
			     "unitMode",
			     "false",
			     "maxReconsumeTimes",
			     "16",
			     NULL};
	/* Without delay levels a retry comes back at once (test_delay_levels: with them) */
	static const char *const no_delays[] = {"--messageDelayLevel=", NULL};

	start(no_delays);
	conn(&c);
	T_ASSERT_EQ(send_v2(&c, "RmtB", 0, "TAGS\001T\002", "retry me"), WIRE_RSP_SUCCESS);
	snprintf(id, sizeof(id), "%s", nsc_ext(&c, "msgId"));
	T_ASSERT_EQ(wire_msgid_decode(id, strlen(id), &h, &phys), 0);
	snprintf(off, sizeof(off), "%lld", (long long)phys);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_CONSUMER_SEND_MSG_BACK, ext, NULL, 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(pull(&c, "GB", "%RETRY%GB", 0, 0, "*", 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&c, m, 4), 1);
	T_ASSERT_MEMEQ(m[0].body, "retry me", 8);
	T_ASSERT_EQ(m[0].reconsume_times, 1);
	T_ASSERT(prop_is(&m[0], "RETRY_TOPIC", "RmtB"));
	T_ASSERT(prop_is(&m[0], "ORIGIN_MESSAGE_ID", id));
	/* delayLevel -1: straight to the DLQ. */
	ext[5] = "-1";
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_CONSUMER_SEND_MSG_BACK, ext, NULL, 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(pull(&c, "GB", "%DLQ%GB", 0, 0, "*", 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&c, m, 4), 1);
	/* An offset with nothing there. */
	snprintf(off, sizeof(off), "%lld", (long long)phys + 1);
	ext[5] = "0";
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_CONSUMER_SEND_MSG_BACK, ext, NULL, 0),
		    WIRE_RSP_SYSTEM_ERROR);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

/*
 * Message types not taken (a transactional half, a delay level or a
 * delivery time in a batch, both at once, a delivery time that is not a
 * number or too far, timers off) get MESSAGE_ILLEGAL with the reason, which
 * RocketMQ's producers do not retry, and nothing is stored; DELAY=0 is a
 * plain message.
 */
static void
test_types_refused(void)
{
	static const char *const refused[][2] = {
		{"TIMER_DELAY_SEC\0013456001\002", "timerMaxDelaySec"},
		{"TIMER_DELIVER_MS\00117x\002", "not a number"},
		{"DELAY\0011\002TIMER_DELAY_MS\001500\002", "both"},
	};
	static const char *const no_timers[] = {"--timerWheelEnable=false", NULL};
	struct ns_client c;
	uint8_t body[256];
	size_t len = 0;
	char born[24];
	const char *ext[] = {"a", "P", "b", "RmtTypes", "c", "TBW102", "d", "4",    "e", "0",
			     "f", "0", "g", born,	"h", "0",      "m", "true", NULL};
	struct wire_batch_item it = {.body = (const uint8_t *)"b", .body_len = 1};

	snprintf(born, sizeof(born), "%lld", (long long)clk_wall_ms());
	start(NULL);
	conn(&c);
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		T_ASSERT_EQ(send_v2(&c, "RmtTypes", 0, refused[i][0], "x"),
			    WIRE_RSP_MESSAGE_ILLEGAL);
		T_ASSERT(c.rsp.remark != NULL && strstr(c.rsp.remark, refused[i][1]) != NULL);
	}
	/* a batch with one delayed item, one timed item */
	T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &len, &it), 0);
	it.props = "DELAY\0011";
	it.props_len = 7;
	T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &len, &it), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_SEND_BATCH_MESSAGE, ext, body, len),
		    WIRE_RSP_MESSAGE_ILLEGAL);
	T_ASSERT(strstr(c.rsp.remark, "batch") != NULL);
	len = 0;
	it.props = "TIMER_DELAY_MS\0011000";
	it.props_len = (uint16_t)strlen(it.props);
	T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &len, &it), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_SEND_BATCH_MESSAGE, ext, body, len),
		    WIRE_RSP_MESSAGE_ILLEGAL);
	T_ASSERT(strstr(c.rsp.remark, "batch") != NULL);
	/* the topics only the broker writes */
	T_ASSERT_EQ(send_v2(&c, "rmq_sys_wheel_timer", 0,
			    "REAL_TOPIC\001RmtTypes\002REAL_QID\0010\002", "forged"),
		    WIRE_RSP_NO_PERMISSION);
	T_ASSERT_EQ(send_v2(&c, "SCHEDULE_TOPIC_XXXX", 0, "", "forged"), WIRE_RSP_NO_PERMISSION);
	/* nothing stored: the first message that is taken gets offset 0 */
	T_ASSERT_EQ(send_v2(&c, "RmtTypes", 0, "DELAY\0010\002", "plain"), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&c, "queueOffset"), 0);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
	/* timerWheelEnable=false: delivery times refused */
	start(no_timers);
	conn(&c);
	T_ASSERT_EQ(send_v2(&c, "RmtTypes", 0, "__STARTDELIVERTIME\0011700000000000\002", "x"),
		    WIRE_RSP_MESSAGE_ILLEGAL);
	T_ASSERT(strstr(c.rsp.remark, "timerWheelEnable") != NULL);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
}

/* Pull @topic/@qid at @off until a record comes (or @ms pass). Return: records decoded. */
static int
pull_wait(struct ns_client *c, const char *topic, int qid, long long off, struct wire_msg *m,
	  int max, int ms)
{
	for (int waited = 0; waited <= ms; waited += 20) {
		int code = pull(c, "GD", topic, qid, off, "*", 0);

		if (code == WIRE_RSP_SUCCESS)
			return records(c, m, max);
		T_ASSERT(code == WIRE_RSP_PULL_NOT_FOUND || code == WIRE_RSP_PULL_OFFSET_MOVED);
		usleep(20000);
	}
	return 0;
}

/* The SCHEDULE_TOPIC_XXXX record of @topic's queue 0's message at @level (2 cores: core 0). */
static int64_t
sched_store_ts(struct ns_client *c, int level, long long off)
{
	struct wire_msg m[4];

	T_ASSERT_EQ(pull(c, "GD", "SCHEDULE_TOPIC_XXXX", (level - 1) * 2, off, "*", 0),
		    WIRE_RSP_SUCCESS);
	T_ASSERT(records(c, m, 4) >= 1);
	T_ASSERT(prop_is(&m[0], "DELAY", level == 1 ? "1" : "2"));
	return m[0].store_ts;
}

/*
 * Delay levels (messageDelayLevel "1s 2s"): stored in SCHEDULE_TOPIC_XXXX
 * with REAL_TOPIC/REAL_QID, delivered to the queue asked for not before
 * its level's delay, DELAY removed; a level past the table is its last; a
 * SEND_BACK backs off (level 3 + reconsume times, clamped); the progress
 * survives a clean restart and SIGKILL (delayOffset.json); GET_ALL_DELAY_OFFSET.
 */
static void
test_delay_levels(void)
{
	static const char *const args[] = {"--messageDelayLevel=1s 2s", NULL};
	struct ns_client c;
	struct wire_msg m[4];
	struct wire_host h;
	int64_t phys, sched_ts;
	char off[24], id[64];
	const char *back[] = {"offset",
			      off,
			      "group",
			      "GD",
			      "delayLevel",
			      "0",
			      "originMsgId",
			      id,
			      "originTopic",
			      "RmtDelay",
			      "unitMode",
			      "false",
			      "maxReconsumeTimes",
			      "16",
			      NULL};

	start(args);
	conn(&c);
	/* DELAY=1: not in the topic at once, there after a second */
	T_ASSERT_EQ(send_v2(&c, "RmtDelay", 0, "DELAY\0011\002KEYS\001kd\002", "later"),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(&c, "queueId"), 0);
	T_ASSERT_EQ(pull(&c, "GD", "RmtDelay", 0, 0, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	sched_ts = sched_store_ts(&c, 1, 0);
	T_ASSERT_EQ(pull_wait(&c, "RmtDelay", 0, 0, m, 4, 5000), 1);
	T_ASSERT(m[0].store_ts >= sched_ts + 1000);
	T_ASSERT_MEMEQ(m[0].body, "later", 5);
	T_ASSERT(!wire_props_get(m[0].props, m[0].props_len, "DELAY", &(const char *){0},
				 &(size_t){0}));
	T_ASSERT(prop_is(&m[0], "REAL_TOPIC", "RmtDelay"));
	T_ASSERT(prop_is(&m[0], "REAL_QID", "0"));
	T_ASSERT(prop_is(&m[0], "KEYS", "kd"));
	/* DELAY=9 is past the table: its last level, 2 s */
	T_ASSERT_EQ(send_v2(&c, "RmtDelay", 0, "DELAY\0019\002", "clamped"), WIRE_RSP_SUCCESS);
	sched_ts = sched_store_ts(&c, 2, 0);
	T_ASSERT_EQ(pull_wait(&c, "RmtDelay", 0, 1, m, 4, 6000), 1);
	T_ASSERT(m[0].store_ts >= sched_ts + 2000);
	T_ASSERT_MEMEQ(m[0].body, "clamped", 7);
	/* SEND_BACK with delayLevel 0, never consumed before: level 3, here 2 (2 s) */
	T_ASSERT_EQ(send_v2(&c, "RmtDelay", 0, "", "retry"), WIRE_RSP_SUCCESS);
	snprintf(id, sizeof(id), "%s", nsc_ext(&c, "msgId"));
	T_ASSERT_EQ(wire_msgid_decode(id, strlen(id), &h, &phys), 0);
	snprintf(off, sizeof(off), "%lld", (long long)phys);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_CONSUMER_SEND_MSG_BACK, back, NULL, 0), WIRE_RSP_SUCCESS);
	T_ASSERT(pull(&c, "GD", "%RETRY%GD", 0, 0, "*", 0) != WIRE_RSP_SUCCESS);
	sched_ts = sched_store_ts(&c, 2, 1);
	T_ASSERT_EQ(pull_wait(&c, "%RETRY%GD", 0, 0, m, 4, 6000), 1);
	T_ASSERT(m[0].store_ts >= sched_ts + 2000);
	T_ASSERT_EQ(m[0].reconsume_times, 1);
	T_ASSERT(prop_is(&m[0], "RETRY_TOPIC", "RmtDelay"));
	/* the master's progress, as a slave asks for it */
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_ALL_DELAY_OFFSET, NULL, NULL, 0), WIRE_RSP_SUCCESS);
	T_ASSERT(c.rsp.body_len > 0 &&
		 memmem(c.rsp.body, c.rsp.body_len, "\"offsetTable\":{1:1,", 19) != NULL);
	/* Pending across a clean stop: delivered once, after its time */
	T_ASSERT_EQ(send_v2(&c, "RmtDelay", 0, "DELAY\0012\002", "across a stop"),
		    WIRE_RSP_SUCCESS);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	T_ASSERT_EQ(pull_wait(&c, "RmtDelay", 0, 3, m, 4, 6000), 1); /* 2: "retry" */
	T_ASSERT_MEMEQ(m[0].body, "across a stop", 13);
	/* ... and across a SIGKILL */
	T_ASSERT_EQ(send_v2(&c, "RmtDelay", 0, "DELAY\0012\002", "across a kill"),
		    WIRE_RSP_SUCCESS);
	nsc_close(&c);
	bk_kill(&B);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	T_ASSERT_EQ(pull_wait(&c, "RmtDelay", 0, 4, m, 4, 6000), 1);
	T_ASSERT_MEMEQ(m[0].body, "across a kill", 13);
	/* nothing delivered twice ("across a stop" was not saved as delivered before the kill) */
	usleep(300000);
	T_ASSERT_EQ(pull(&c, "GD", "RmtDelay", 0, 5, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	T_ASSERT(bk_log_has(&B, "were delivered before the last stop without being recorded"));
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
}

static bool
has_prop(const struct wire_msg *m, const char *k)
{
	return wire_props_get(m->props, m->props_len, k, &(const char *){0}, &(size_t){0});
}

static long long
prop_ll(const struct wire_msg *m, const char *k)
{
	uint64_t v = 0;

	T_ASSERT(wire_props_get_uint(m->props, m->props_len, k, &v));
	return (long long)v;
}

/* Send @body to RmtTimer queue @qid with @key=@v (a number). */
static void
send_timed(struct ns_client *c, int qid, const char *key, long long v, const char *body)
{
	char p[96];

	snprintf(p, sizeof(p), "%s\001%lld\002KEYS\001%s\002", key, v, body);
	T_ASSERT_EQ(send_v2(c, "RmtTimer", qid, p, body), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(ext_ll(c, "queueId"), qid);
}

/* Wait for RmtTimer @qid's message at @off: @body, not stored before @due. */
static void
timed_arrives(struct ns_client *c, int qid, long long off, const char *body, long long due)
{
	struct wire_msg m[4];

	T_ASSERT_EQ(pull_wait(c, "RmtTimer", qid, off, m, 4, 8000), 1);
	T_ASSERT_MEMEQ(m[0].body, body, strlen(body));
	T_ASSERT_EQ(m[0].body_len, strlen(body));
	if (m[0].store_ts < due)
		T_FAIL("%s stored at %lld, due %lld", body, (long long)m[0].store_ts, due);
	T_ASSERT(prop_is(&m[0], "KEYS", body));
	T_ASSERT(prop_is(&m[0], "REAL_TOPIC", "RmtTimer"));
	T_ASSERT_EQ(prop_ll(&m[0], "TIMER_OUT_MS"), due);
	T_ASSERT(has_prop(&m[0], "__SP_TIMER_SRC"));
	T_ASSERT(!has_prop(&m[0], "__SP_TIMER_FIRE"));
	T_ASSERT(!has_prop(&m[0], "TIMER_DELAY_MS") && !has_prop(&m[0], "TIMER_DELAY_SEC"));
}

/* The due time of @body's timer record in rmq_sys_wheel_timer queue @q. */
static long long
timer_due(struct ns_client *c, int q, const char *body)
{
	struct wire_msg m[32];
	int n;

	T_ASSERT_EQ(pull(c, "GT", "rmq_sys_wheel_timer", q, 0, "*", 0), WIRE_RSP_SUCCESS);
	n = records(c, m, 32);
	for (int i = 0; i < n; i++)
		if (prop_is(&m[i], "KEYS", body)) {
			T_ASSERT(prop_is(&m[i], "REAL_TOPIC", "RmtTimer"));
			return prop_ll(&m[i], "TIMER_OUT_MS");
		}
	T_FAIL("no timer record for %s", body);
}

/*
 * Delivery times (TIMER_DELAY_MS, TIMER_DELAY_SEC, TIMER_DELIVER_MS,
 * __STARTDELIVERTIME): stored in rmq_sys_wheel_timer with TIMER_OUT_MS,
 * delivered to the queue asked for not before it, once; a time already
 * past is a plain message; a timer further than timerRollWindowSec is
 * written again until due; pending timers survive a clean stop and a
 * SIGKILL, and one fired after the last saved mark is not fired again.
 */
static void
test_timers(void)
{
	static const char *const args[] = {"--timerRollWindowSec=1",
					   "--flushDelayOffsetInterval=3600000",
					   "--mapedFileSizeCommitLog=1048576", NULL};
	static char filler[100001];
	struct ns_client c;
	struct wire_msg m[8];
	long long due, t;
	int n;

	start(args);
	conn(&c);
	/* relative, in ms: not in the topic at once */
	send_timed(&c, 0, "TIMER_DELAY_MS", 1500, "ms");
	T_ASSERT_EQ(pull(&c, "GT", "RmtTimer", 0, 0, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	due = timer_due(&c, 0, "ms");
	T_ASSERT(due >= clk_wall_ms() + 1000);
	timed_arrives(&c, 0, 0, "ms", due);
	/* a delivery time already past: a plain message, at once */
	T_ASSERT_EQ(send_v2(&c, "RmtTimer", 0, "TIMER_DELIVER_MS\0011000\002", "past"),
		    WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(pull(&c, "GT", "RmtTimer", 0, 1, "*", 0), WIRE_RSP_SUCCESS);
	/* absolute: ali-ons' __STARTDELIVERTIME, RocketMQ 5's TIMER_DELIVER_MS */
	t = clk_wall_ms();
	send_timed(&c, 0, "__STARTDELIVERTIME", t + 1200, "ons");
	send_timed(&c, 0, "TIMER_DELIVER_MS", t + 700, "abs");
	timed_arrives(&c, 0, 2, "abs", t + 700);
	timed_arrives(&c, 0, 3, "ons", t + 1200);
	/* 3 s with a roll window of 1 s: written again twice, delivered once (core 1's queue) */
	send_timed(&c, 1, "TIMER_DELAY_SEC", 3, "rolled");
	due = timer_due(&c, 1, "rolled");
	timed_arrives(&c, 1, 0, "rolled", due);
	T_ASSERT_EQ(pull(&c, "GT", "rmq_sys_wheel_timer", 1, 0, "*", 0), WIRE_RSP_SUCCESS);
	n = records(&c, m, 8);
	T_ASSERT(n >= 3);
	for (int i = 1; i < n; i++) {
		T_ASSERT_EQ(prop_ll(&m[i], "TIMER_OUT_MS"), due);
		T_ASSERT_EQ(prop_ll(&m[i], "__SP_TIMER_SRC"), m[i - 1].phys_offset);
		T_ASSERT(prop_ll(&m[i], "__SP_TIMER_FIRE") <= due);
	}
	usleep(300000);
	T_ASSERT_EQ(pull(&c, "GT", "RmtTimer", 1, 1, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	/* pending across a clean stop */
	send_timed(&c, 0, "TIMER_DELAY_MS", 1500, "stop");
	due = timer_due(&c, 0, "stop");
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	timed_arrives(&c, 0, 4, "stop", due);
	/* ... and across a SIGKILL */
	send_timed(&c, 0, "TIMER_DELAY_MS", 1500, "kill");
	due = timer_due(&c, 0, "kill");
	/* a segment's end between the saved mark and where "kill" will be delivered */
	memset(filler, 'f', sizeof(filler) - 1);
	for (int i = 0; i < 12; i++)
		T_ASSERT_EQ(send_v2(&c, "RmtFill", 0, "", filler), WIRE_RSP_SUCCESS);
	T_ASSERT(clk_wall_ms() < due);
	nsc_close(&c);
	bk_kill(&B);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	timed_arrives(&c, 0, 5, "kill", due);
	/* fired, then a SIGKILL before the progress was saved: not fired again */
	nsc_close(&c);
	bk_kill(&B);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	usleep(500000);
	T_ASSERT_EQ(pull(&c, "GT", "RmtTimer", 0, 6, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	T_ASSERT(bk_log_has(&B, "fired after the last saved mark"));
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
}

#define KILL_TIMERS 10000
#define KILL_SPREAD_MS 60000

/*
 * 10,000 timers due over the next 60 s, the broker SIGKILLed a third of the
 * way in: after the restart every one is delivered once, none before its
 * time (what a crash loses of the progress is found in the log).
 */
static void
test_timers_kill(void)
{
	static const char *const args[] = {"--flushDelayOffsetInterval=5000", NULL};
	static uint8_t seen[KILL_TIMERS];
	struct ns_client c;
	struct wire_msg m[32];
	long long t0, due0;
	unsigned got = 0, early = 0;

	start(args);
	conn(&c);
	t0 = clk_wall_ms();
	due0 = t0 + 5000; /* after the last send (a slow one: those due already go at once) */
	for (int i = 0; i < KILL_TIMERS; i++) {
		char p[64], b[16];

		snprintf(p, sizeof(p), "TIMER_DELIVER_MS\001%lld\002",
			 due0 + (long long)i * KILL_SPREAD_MS / KILL_TIMERS);
		snprintf(b, sizeof(b), "t%05d", i);
		T_ASSERT_EQ(send_v2(&c, "RmtKill", i % 4, p, b), WIRE_RSP_SUCCESS);
	}
	printf("# %d timers sent in %lld ms\n", KILL_TIMERS, clk_wall_ms() - t0);
	while (clk_wall_ms() < due0 + KILL_SPREAD_MS / 3)
		usleep(50000);
	nsc_close(&c);
	bk_kill(&B);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	while (clk_wall_ms() < due0 + KILL_SPREAD_MS + 2000)
		usleep(100000);
	for (int q = 0; q < 4; q++) {
		long long off = 0;
		int n;

		while (pull(&c, "GK", "RmtKill", q, off, "*", 0) == WIRE_RSP_SUCCESS &&
		       (n = records(&c, m, 32)) > 0) {
			for (int k = 0; k < n; k++) {
				int i = atoi((const char *)m[k].body + 1);
				long long due = due0 + (long long)i * KILL_SPREAD_MS / KILL_TIMERS;

				T_ASSERT(i >= 0 && i < KILL_TIMERS);
				if (seen[i]++)
					T_FAIL("t%05d delivered twice", i);
				early += m[k].store_ts < due;
				got++;
			}
			off += n;
		}
	}
	if (got != KILL_TIMERS || early)
		T_FAIL("%u of %d delivered, %u before their time", got, KILL_TIMERS, early);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
}

/* SEND_BACK of the record at @phys (topic @origin) for group GR with delayLevel 0. */
static void
send_back_of(struct ns_client *c, long long phys, const char *origin)
{
	char off[24];
	const char *back[] = {"offset",
			      off,
			      "group",
			      "GR",
			      "delayLevel",
			      "0",
			      "originMsgId",
			      "0",
			      "originTopic",
			      origin,
			      "unitMode",
			      "false",
			      "maxReconsumeTimes",
			      "3",
			      NULL};

	snprintf(off, sizeof(off), "%lld", phys);
	T_ASSERT_EQ(nsc_call(c, WIRE_REQ_CONSUMER_SEND_MSG_BACK, back, NULL, 0), WIRE_RSP_SUCCESS);
}

/*
 * Retries back off as RocketMQ's (messageDelayLevel "1s 1s 1s 2s 3s"): a
 * message sent back with delayLevel 0 comes back after level 3 +
 * reconsumeTimes, so after 1 s, then 2 s, then 3 s, never before; past
 * maxReconsumeTimes (3) it goes to %DLQ%GR at once.
 */
static void
test_retry_backoff(void)
{
	static const char *const args[] = {"--messageDelayLevel=1s 1s 1s 2s 3s", NULL};
	static const int64_t wait_ms[] = {1000, 2000, 3000};
	struct ns_client c;
	struct wire_msg m[4];
	struct wire_host h;
	int64_t phys;
	const char *id;

	start(args);
	conn(&c);
	T_ASSERT_EQ(send_v2(&c, "RmtRetry", 0, "", "again"), WIRE_RSP_SUCCESS);
	id = nsc_ext(&c, "msgId");
	T_ASSERT_EQ(wire_msgid_decode(id, strlen(id), &h, &phys), 0);
	for (int i = 0; i < 3; i++) {
		int64_t sent = clk_wall_ms();

		send_back_of(&c, phys, i == 0 ? "RmtRetry" : "%RETRY%GR");
		T_ASSERT_EQ(pull_wait(&c, "%RETRY%GR", 0, i, m, 4, 10000), 1);
		if (m[0].store_ts < sent + wait_ms[i] - 1)
			T_FAIL("retry %d stored %lld ms after its send-back, before %lld ms", i + 1,
			       (long long)(m[0].store_ts - sent), (long long)wait_ms[i]);
		T_ASSERT_EQ(m[0].reconsume_times, i + 1);
		T_ASSERT_MEMEQ(m[0].body, "again", 5);
		phys = m[0].phys_offset;
	}
	/* the fourth failure: past maxReconsumeTimes, the DLQ, at once */
	send_back_of(&c, phys, "%RETRY%GR");
	T_ASSERT_EQ(pull_wait(&c, "%DLQ%GR", 0, 0, m, 4, 2000), 1);
	T_ASSERT_MEMEQ(m[0].body, "again", 5);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
}

/* A transactional half as RocketMQ's producer sends it (TRAN_MSG, PGROUP, sysFlag PREPARED). */
static int
send_half(struct ns_client *c, const char *group, const char *body, long long *qoff,
	  long long *phys)
{
	char props[160], born[24];
	const char *ext[] = {"a", group, "b", "RmtTx", "c", "TBW102", "d", "4",
			     "e", "0",	 "f", "4",     "g", born,     "h", "0",
			     "i", props, "j", "0",     "k", "false",  NULL};
	struct wire_host h;
	int64_t p;
	int code;

	snprintf(props, sizeof(props), "TRAN_MSG\001true\002PGROUP\001%s\002UNIQ_KEY\001U%s\002",
		 group, body);
	snprintf(born, sizeof(born), "%lld", (long long)clk_wall_ms());
	code = nsc_call(c, WIRE_REQ_SEND_MESSAGE_V2, ext, body, strlen(body));
	if (code != WIRE_RSP_SUCCESS)
		return code;
	*qoff = ext_ll(c, "queueOffset");
	T_ASSERT_EQ(ext_ll(c, "queueId"), 0);
	T_ASSERT_EQ(wire_msgid_decode(nsc_ext(c, "msgId"), strlen(nsc_ext(c, "msgId")), &h, &p), 0);
	*phys = p;
	return code;
}

/* END_TRANSACTION (oneway as RocketMQ's producers send it, or not: the answer's code). */
static int
end_tx(struct ns_client *c, const char *group, long long qoff, long long phys, int kind,
       bool oneway)
{
	char q[24], p[24], k[8];
	const char *ext[] = {"producerGroup",
			     group,
			     "tranStateTableOffset",
			     q,
			     "commitLogOffset",
			     p,
			     "commitOrRollback",
			     k,
			     "fromTransactionCheck",
			     "false",
			     NULL};

	snprintf(q, sizeof(q), "%lld", qoff);
	snprintf(p, sizeof(p), "%lld", phys);
	snprintf(k, sizeof(k), "%d", kind);
	if (!oneway)
		return nsc_call(c, WIRE_REQ_END_TRANSACTION, ext, NULL, 0);
	T_ASSERT(nsc_send(c, WIRE_REQ_END_TRANSACTION, WIRE_REM_FLAG_ONEWAY, WIRE_REM_JSON, ext,
			  NULL, 0) >= 0);
	return 0;
}

/* A HEART_BEAT naming producer group @group. */
static void
producer_hello(struct ns_client *c, const char *group)
{
	char body[256];
	const char *ext[] = {NULL};

	snprintf(body, sizeof(body),
		 "{\"clientID\":\"127.0.0.1@tx\",\"producerDataSet\":[{\"groupName\":\"%s\"},"
		 "{\"groupName\":\"CLIENT_INNER_PRODUCER\"}],\"consumerDataSet\":[]}",
		 group);
	T_ASSERT_EQ(nsc_call(c, WIRE_REQ_HEART_BEAT, ext, body, strlen(body)), WIRE_RSP_SUCCESS);
}

/* RmtTx queue 0 holds exactly @n messages, the last with @last as body. */
static void
tx_topic_has(struct ns_client *c, int n, const char *last)
{
	struct wire_msg m[8];

	if (n > 0) {
		T_ASSERT_EQ(pull_wait(c, "RmtTx", 0, n - 1, m, 8, 8000), 1);
		T_ASSERT_EQ(m[0].body_len, strlen(last));
		T_ASSERT_MEMEQ(m[0].body, last, strlen(last));
		T_ASSERT_EQ(m[0].sys_flag & WIRE_SYSFLAG_TX_MASK, WIRE_SYSFLAG_TX_COMMIT);
		T_ASSERT(!has_prop(&m[0], "TRAN_MSG") && !has_prop(&m[0], "REAL_TOPIC"));
		T_ASSERT(has_prop(&m[0], "PGROUP") && has_prop(&m[0], "__SP_TX_HALF"));
	}
	usleep(300000);
	T_ASSERT_EQ(pull(c, "GX", "RmtTx", 0, n, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
}

/*
 * Transactions as RocketMQ's producers run them: a half is invisible until
 * END_TRANSACTION commits it, once (a second commit does nothing); a
 * rollback drops it; an unresolved half is checked back with a producer of
 * its group (CHECK_TRANSACTION_STATE) whose END_TRANSACTION commits it; with
 * no producer it is discarded after transactionCheckMax checks; a half
 * survives a SIGKILL before its commit, and resolved ones stay resolved
 * (not checked again) across restarts.
 */
static void
test_transactions(void)
{
	static const char *const args[] = {
		"--transactionTimeOut=1000", "--transactionCheckInterval=500",
		"--transactionCheckMax=3", "--flushDelayOffsetInterval=3600000", NULL};
	struct ns_client c, p;
	long long qoff, phys;
	struct wire_msg m;
	bool got = false;

	start(args);
	conn(&c);
	conn(&p);
	producer_hello(&p, "PGT");
	/* commit: invisible before, once after, a second commit changes nothing */
	T_ASSERT_EQ(send_half(&c, "PGT", "commit-me", &qoff, &phys), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(pull(&c, "GX", "RmtTx", 0, 0, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, true);
	tx_topic_has(&c, 1, "commit-me");
	end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, true);
	T_ASSERT_EQ(end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, false), WIRE_RSP_SUCCESS);
	tx_topic_has(&c, 1, "commit-me");
	/* RocketMQ's checks, with its remarks */
	T_ASSERT_EQ(end_tx(&c, "Other", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, false),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT(strstr(c.rsp.remark, "producer group wrong") != NULL);
	T_ASSERT_EQ(end_tx(&c, "PGT", qoff + 7, phys, WIRE_SYSFLAG_TX_COMMIT, false),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT(strstr(c.rsp.remark, "state table offset wrong") != NULL);
	T_ASSERT_EQ(end_tx(&c, "PGT", qoff, phys + 1, WIRE_SYSFLAG_TX_COMMIT, false),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT(strstr(c.rsp.remark, "Find prepared transaction message failed") != NULL);
	/* rollback: never visible */
	T_ASSERT_EQ(send_half(&c, "PGT", "roll-me", &qoff, &phys), WIRE_RSP_SUCCESS);
	end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_ROLLBACK, true);
	tx_topic_has(&c, 1, "commit-me");
	/* unknown: checked back with the producer, which commits */
	T_ASSERT_EQ(send_half(&c, "PGT", "ask-me", &qoff, &phys), WIRE_RSP_SUCCESS);
	for (int i = 0; i < 50 && !got; i++) {
		if (nsc_recv(&p, 200) != 0 || p.rsp.code != WIRE_REQ_CHECK_TRANSACTION_STATE)
			continue;
		T_ASSERT(p.rsp.flag & WIRE_REM_FLAG_ONEWAY);
		T_ASSERT_EQ(atoll(nsc_ext(&p, "tranStateTableOffset")), qoff);
		T_ASSERT_EQ(atoll(nsc_ext(&p, "commitLogOffset")), phys);
		T_ASSERT_STREQ(nsc_ext(&p, "transactionId"), "Uask-me");
		T_ASSERT(wire_rec_decode(p.rsp.body, p.rsp.body_len, WIRE_REC_VERIFY_CRC, &m) > 0);
		T_ASSERT(m.topic_len == 5 && memcmp(m.topic, "RmtTx", 5) == 0);
		T_ASSERT(m.body_len == 6 && memcmp(m.body, "ask-me", 6) == 0);
		got = true;
	}
	T_ASSERT(got);
	end_tx(&p, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, true);
	tx_topic_has(&c, 2, "ask-me");
	/* no producer left: discarded after 3 checks, and a late commit does nothing */
	nsc_close(&p);
	T_ASSERT_EQ(send_half(&c, "PGT", "orphan", &qoff, &phys), WIRE_RSP_SUCCESS);
	for (int i = 0; i < 100 && !bk_log_has(&B, "discarded: unresolved after 3"); i++)
		usleep(100000);
	T_ASSERT(bk_log_has(&B, "discarded: unresolved after 3"));
	end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, true);
	tx_topic_has(&c, 2, "ask-me");
	/* SIGKILL between the half and its commit */
	T_ASSERT_EQ(send_half(&c, "PGT", "across-kill", &qoff, &phys), WIRE_RSP_SUCCESS);
	nsc_close(&c);
	bk_kill(&B);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, true);
	tx_topic_has(&c, 3, "across-kill");
	/* what is resolved stays so across a SIGKILL: nothing asked, nothing committed twice */
	nsc_close(&c);
	bk_kill(&B);
	T_ASSERT_EQ(bk_start(SP_BROKER_BIN, args, &B), 0);
	conn(&c);
	conn(&p);
	producer_hello(&p, "PGT");
	for (int i = 0; i < 12; i++)
		if (nsc_recv(&p, 250) == 0)
			T_ASSERT(p.rsp.code != WIRE_REQ_CHECK_TRANSACTION_STATE);
	end_tx(&c, "PGT", qoff, phys, WIRE_SYSFLAG_TX_COMMIT, true);
	tx_topic_has(&c, 3, "across-kill");
	nsc_close(&p);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);
}

/* SEND_BATCH_MESSAGE: one msgId per message, in order; a bad batch stores nothing. */
static void
test_batch(void)
{
	struct ns_client c;
	uint8_t body[4096];
	size_t len = 0;
	struct wire_msg m[8];
	char born[24];
	const char *ext[] = {"a", "P", "b", "RmtBatch", "c", "TBW102", "d", "4",    "e", "0",
			     "f", "0", "g", born,	"h", "0",      "m", "true", NULL};
	const char *ids;

	snprintf(born, sizeof(born), "%lld", (long long)clk_wall_ms());
	for (int i = 0; i < 3; i++) {
		char b[8], p[32];
		struct wire_batch_item it = {0};

		snprintf(b, sizeof(b), "m%d", i);
		snprintf(p, sizeof(p), "KEYS\001k%d", i);
		it.body = (const uint8_t *)b;
		it.body_len = (uint32_t)strlen(b);
		it.props = p;
		it.props_len = (uint16_t)strlen(p);
		T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &len, &it), 0);
	}
	start(NULL);
	conn(&c);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_SEND_BATCH_MESSAGE, ext, body, len), WIRE_RSP_SUCCESS);
	ids = nsc_ext(&c, "msgId");
	T_ASSERT(ids != NULL);
	T_ASSERT_EQ(strlen(ids), 3 * 32u + 2);
	T_ASSERT_EQ(ext_ll(&c, "queueOffset"), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_SEND_BATCH_MESSAGE, ext, body, len - 1),
		    WIRE_RSP_MESSAGE_ILLEGAL);
	T_ASSERT_EQ(pull(&c, "G", "RmtBatch", 0, 0, "*", 0), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(records(&c, m, 8), 3);
	T_ASSERT_MEMEQ(m[2].body, "m2", 2);
	T_ASSERT(prop_is(&m[2], "KEYS", "k2"));
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0);
	bk_cleanup(&B);

	/*
	 * A batch bigger than a ConsumeQueue file (1000 units here) may meet
	 * the file's end before the next one is ready: then the answer must
	 * say how many were stored (never SUCCESS for part of a batch), and
	 * what is stored must be what it says. 2500 msgIds also make a
	 * header far over 64 KiB.
	 */
	{
		static const char *const small_cq[] = {"--mapedFileSizeConsumeQueue=20000", NULL};
		size_t cap = 2500 * 32 + 64, blen = 0;
		uint8_t *big = malloc(cap);
		unsigned stored;
		int rc;

		T_ASSERT(big != NULL);
		for (int i = 0; i < 2500; i++) {
			struct wire_batch_item it = {.body = (const uint8_t *)"x", .body_len = 1};

			T_ASSERT_EQ(wire_batch_append(big, cap, &blen, &it), 0);
		}
		ext[3] = "RmtBig";
		start(small_cq);
		conn(&c);
		rc = nsc_call(&c, WIRE_REQ_SEND_BATCH_MESSAGE, ext, big, blen);
		if (rc == WIRE_RSP_SUCCESS) {
			T_ASSERT_EQ(strlen(nsc_ext(&c, "msgId")), 2500 * 33u - 1);
			stored = 2500;
		} else {
			const char *why = c.rsp.remark ? c.rsp.remark : "";

			T_ASSERT_EQ(rc, WIRE_RSP_SYSTEM_BUSY);
			T_ASSERT(strstr(why, "only ") != NULL);
			stored = (unsigned)atoi(strstr(why, "only ") + 5);
			T_ASSERT(stored < 2500);
		}
		T_ASSERT_EQ(offset_call(&c, WIRE_REQ_GET_MAX_OFFSET, "", "RmtBig", 0, NULL, NULL),
			    WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(ext_ll(&c, "offset"), stored);
		free(big);
		nsc_close(&c);
	}
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

/* Locks: one owner per queue; unlock frees it. Topic creation with auto-creation off. */
static void
test_locks_topics(void)
{
	static const char *const args[] = {"--autoCreateTopicEnable=false", NULL};
	struct ns_client c;
	const char *la = "{\"consumerGroup\":\"GL\",\"clientId\":\"A\",\"mqSet\":[{\"topic\":"
			 "\"T\",\"brokerName\":\"broker-a\",\"queueId\":0}]}";
	const char *lb = "{\"consumerGroup\":\"GL\",\"clientId\":\"B\",\"mqSet\":[{\"topic\":"
			 "\"T\",\"brokerName\":\"broker-a\",\"queueId\":0}]}";

	start(args);
	conn(&c);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_LOCK_BATCH_MQ, NULL, la, strlen(la)), WIRE_RSP_SUCCESS);
	T_ASSERT(strstr((const char *)c.rsp.body, "\"queueId\":0") != NULL);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_LOCK_BATCH_MQ, NULL, lb, strlen(lb)), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(c.rsp.body_len, strlen("{\"lockOKMQSet\":[]}"));
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UNLOCK_BATCH_MQ, NULL, la, strlen(la)), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_LOCK_BATCH_MQ, NULL, lb, strlen(lb)), WIRE_RSP_SUCCESS);
	T_ASSERT(strstr((const char *)c.rsp.body, "\"queueId\":0") != NULL);

	T_ASSERT_EQ(send_v2(&c, "Made", 0, "", "x"), WIRE_RSP_TOPIC_NOT_EXIST);
	{
		const char *ext[] = {"topic",
				     "Made",
				     "defaultTopic",
				     "TBW102",
				     "readQueueNums",
				     "3",
				     "writeQueueNums",
				     "3",
				     "perm",
				     "6",
				     "topicFilterType",
				     "SINGLE_TAG",
				     "topicSysFlag",
				     "0",
				     "order",
				     "false",
				     NULL};
		const char *bad[] = {"topic", "Bad Name", "readQueueNums", "3", "writeQueueNums",
				     "3",     NULL};

		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UPDATE_AND_CREATE_TOPIC, ext, NULL, 0),
			    WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UPDATE_AND_CREATE_TOPIC, bad, NULL, 0),
			    WIRE_RSP_SYSTEM_ERROR);
	}
	T_ASSERT_EQ(send_v2(&c, "Made", 2, "", "x"), WIRE_RSP_SUCCESS);
	{
		/* 4 read queues, 2 write queues: queue 3 is readable, not writable */
		const char *ext[] = {
			"topic", "Shrunk", "readQueueNums", "4", "writeQueueNums", "2", "perm",
			"6",	 NULL};

		T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UPDATE_AND_CREATE_TOPIC, ext, NULL, 0),
			    WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(send_v2(&c, "Shrunk", 3, "", "x"), WIRE_RSP_SYSTEM_ERROR);
		T_ASSERT_EQ(send_v2(&c, "Shrunk", 1, "", "x"), WIRE_RSP_SUCCESS);
		T_ASSERT_EQ(pull(&c, "G", "Shrunk", 3, 0, "*", 0), WIRE_RSP_PULL_NOT_FOUND);
	}
	T_ASSERT_EQ(send_v2(&c, "Made", 3, "", "x"), WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(send_v2(&c, "SCHEDULE_TOPIC_XXXX", 0, "", "x"), WIRE_RSP_NO_PERMISSION);
	nsc_close(&c);
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

/* Bad input: unknown codes answered; malformed and oversized frames close that connection only. */
static void
test_bad_input(void)
{
	static const char *const args[] = {"--remotingMaxFrameSize=65536", "--maxMessageSize=1024",
					   NULL};
	struct ns_client a, b;
	uint8_t big[8] = {0x00, 0x20, 0x00, 0x00, 0, 0, 0, 10};		    /* length 2 MiB */
	uint8_t bad[12] = {0, 0, 0, 8, 0, 0, 0, 200, 'x', 'x', 'x', 'x'};   /* header > length */
	uint8_t json[] = {0, 0, 0, 9, 0, 0, 0, 5, '{', '"', 'c', 'o', 'd'}; /* truncated JSON */
	char body[2048];

	start(args);
	conn(&a);
	conn(&b);
	T_ASSERT_EQ(nsc_call(&a, 9999, NULL, NULL, 0), WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED);
	T_ASSERT(a.rsp.remark != NULL);
	memset(body, 'b', sizeof(body) - 1);
	body[sizeof(body) - 1] = '\0';
	T_ASSERT_EQ(send_v2(&a, "RmtX", 0, "", body), WIRE_RSP_MESSAGE_ILLEGAL);
	T_ASSERT_EQ(send_v2(&a, "bad topic!", 0, "", "x"), WIRE_RSP_SYSTEM_ERROR);
	{
		const char *ext[] = {"b", "RmtX", NULL}; /* no queueId, no bornTimestamp */

		T_ASSERT_EQ(nsc_call(&a, WIRE_REQ_SEND_MESSAGE_V2, ext, "x", 1),
			    WIRE_RSP_SYSTEM_ERROR);
	}
	T_ASSERT_EQ(nsc_send_raw(&a, bad, sizeof(bad)), 0);
	T_ASSERT(nsc_wait_closed(&a, T));
	nsc_close(&a);
	conn(&a);
	T_ASSERT_EQ(nsc_send_raw(&a, json, sizeof(json)), 0);
	T_ASSERT(nsc_wait_closed(&a, T));
	nsc_close(&a);
	conn(&a);
	T_ASSERT_EQ(nsc_send_raw(&a, big, sizeof(big)), 0);
	T_ASSERT(nsc_wait_closed(&a, T));
	nsc_close(&a);
	/* The other connection never noticed. */
	T_ASSERT_EQ(send_v2(&b, "RmtX", 0, "", "still here"), WIRE_RSP_SUCCESS);
	nsc_close(&b);
	T_ASSERT(bk_log_has(&B, "malformed frame"));
	T_ASSERT_EQ(bk_stop(&B), 0); /* a clean exit: no sanitizer report either */
	bk_cleanup(&B);
}

T_MAIN(T_CASE(test_send_pull), T_CASE(test_long_poll), T_CASE(test_held_pull), T_CASE(test_offsets),
       T_CASE(test_groups), T_CASE(test_send_back), T_CASE(test_types_refused),
       T_CASE(test_delay_levels), T_CASE(test_timers), T_CASE(test_timers_kill),
       T_CASE(test_transactions), T_CASE(test_retry_backoff), T_CASE(test_batch),
       T_CASE(test_locks_topics), T_CASE(test_bad_input))
