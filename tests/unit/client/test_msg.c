// SPDX-License-Identifier: Apache-2.0
/*
 * test_msg.c - libsprocket's pure parts: error strings, message properties,
 * UNIQ_KEY, tag expressions, the latency fault table, queue allocation,
 * route snapshots, batch bodies and PULL record decoding. No broker, no
 * threads.
 */
#include <arpa/inet.h>
#include <string.h>

#include "../../../client/client_priv.h"
#include "harness.h"
#include "sprocket/consumer.h"
#include "sprocket/producer.h"
#include "wire/record.h"

static void
test_strerror(void)
{
	T_ASSERT_STREQ(sp_strerror(0), "success");
	T_ASSERT(strstr(sp_strerror(-EINVAL), "nvalid") != NULL);
	T_ASSERT(strstr(sp_strerror(-ETIMEDOUT), "timed out") != NULL);
	T_ASSERT(strstr(sp_strerror(SP_ERR_STATUS(WIRE_DP_ST_NO_PERMISSION)), "NO_PERMISSION"));
	T_ASSERT(strstr(sp_strerror(SP_ERR_STATUS(WIRE_DP_ST_REDIRECT)), "REDIRECT"));
	T_ASSERT(strstr(sp_strerror(SP_ERR_STATUS(WIRE_DP_ST_QUERY_NOT_FOUND)), "QUERY_NOT_FOUND"));
	T_ASSERT_STREQ(sp_strerror(SP_ERR_STATUS(999)), "broker: unknown status");
	T_ASSERT_EQ(sp_err_status(SP_ERR_STATUS(2)), 2);
	T_ASSERT_EQ(sp_err_status(SP_ERR_STATUS(1001)), 1001);
	T_ASSERT_EQ(sp_err_status(-EINVAL), -1);
	T_ASSERT_EQ(sp_err_status(0), -1);
	T_ASSERT(sp_strerror(-99999) != NULL);
	T_ASSERT(sp_strerror(12345) != NULL);
}

static void
test_props(void)
{
	const struct sp_prop up[] = {{"color", "red"}, {"size", "9"}};
	struct sp_msg m = {
		.topic = "T",
		.tags = "TagA",
		.keys = "k1 k2",
		.props = up,
		.n_props = 2,
	};
	char buf[512];
	size_t len;
	const char *v;
	size_t vl;

	T_ASSERT_EQ(sp__msg_props(&m, "0123456789ABCDEF0123456789ABCDEF", buf, sizeof(buf), &len),
		    0);
	T_ASSERT(wire_props_get(buf, len, "TAGS", &v, &vl));
	T_ASSERT(vl == 4 && memcmp(v, "TagA", 4) == 0);
	T_ASSERT(wire_props_get(buf, len, "KEYS", &v, &vl));
	T_ASSERT(vl == 5 && memcmp(v, "k1 k2", 5) == 0);
	T_ASSERT(wire_props_get(buf, len, "UNIQ_KEY", &v, &vl));
	T_ASSERT_EQ(vl, 32);
	T_ASSERT(wire_props_get(buf, len, "color", &v, &vl));
	T_ASSERT(vl == 3 && memcmp(v, "red", 3) == 0);
	T_ASSERT(wire_props_get(buf, len, "WAIT", &v, &vl));
	/* an item separator in a user value is refused */
	{
		const struct sp_prop bad[] = {{"k", "a\x02"
						    "b"}};

		m.props = bad;
		m.n_props = 1;
		T_ASSERT_EQ(sp__msg_props(&m, NULL, buf, sizeof(buf), &len), -EINVAL);
	}
	/* too small a buffer */
	m.n_props = 0;
	T_ASSERT_EQ(sp__msg_props(&m, NULL, buf, 8, &len), -ENOBUFS);
	/* message checks */
	T_ASSERT_EQ(sp__msg_check(&m), 0);
	m.topic = "";
	T_ASSERT_EQ(sp__msg_check(&m), -EINVAL);
	m.topic = NULL;
	T_ASSERT_EQ(sp__msg_check(&m), -EINVAL);
	m.topic = "T";
	m.body_len = 3;
	T_ASSERT_EQ(sp__msg_check(&m), -EINVAL); /* body NULL */
}

static void
test_msgid(void)
{
	char a[SP_MSGID_LEN + 1];
	char b[SP_MSGID_LEN + 1];

	sp__msgid_new(a);
	sp__msgid_new(b);
	T_ASSERT_EQ(strlen(a), 32);
	T_ASSERT(strcmp(a, b) != 0);
	for (int i = 0; i < 32; i++)
		T_ASSERT((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'A' && a[i] <= 'F'));
	/* the fixed part (address, pid, random) is the same; the counter moved */
	T_ASSERT(memcmp(a, b, 20) == 0);
	T_ASSERT(strcmp(a + 28, b + 28) != 0);
}

static void
test_tag_expr(void)
{
	int32_t h[4];

	T_ASSERT(sp_tag_expr_match("*", "x"));
	T_ASSERT(sp_tag_expr_match(NULL, ""));
	T_ASSERT(sp_tag_expr_match("", "x"));
	T_ASSERT(sp_tag_expr_match(" * ", "x"));
	T_ASSERT(sp_tag_expr_match("a || b", "a"));
	T_ASSERT(sp_tag_expr_match("a || b", "b"));
	T_ASSERT(sp_tag_expr_match("a||b", "b"));
	T_ASSERT(!sp_tag_expr_match("a || b", "c"));
	T_ASSERT(!sp_tag_expr_match("a || b", "ab"));
	T_ASSERT(!sp_tag_expr_match("a || b", ""));
	T_ASSERT(!sp_tag_expr_match("TagA", NULL));
	T_ASSERT_EQ(sp__tag_hashes("*", h, 4), 0);
	T_ASSERT_EQ(sp__tag_hashes("a || bb", h, 4), 2);
	T_ASSERT_EQ(h[0], 97);
	T_ASSERT_EQ(h[1], 98 * 31 + 98);
	T_ASSERT_EQ(sp__tag_hashes("a||b||c||d||e", h, 4), -EINVAL);
	/* Java "TagA".hashCode() */
	T_ASSERT_EQ(sp__tag_hashes("TagA", h, 4), 1);
	T_ASSERT_EQ(h[0], 2598919);
}

static void
test_fault(void)
{
	struct sp__fault f;
	uint64_t t0 = 1000ull * 1000000000ull;

	sp__fault_init(&f, 10000);
	T_ASSERT(sp__fault_is_available(&f, "a", t0));
	/* fast successes are not remembered */
	sp__fault_update(&f, "a", 3, false, t0);
	T_ASSERT_EQ(f.n, 0);
	/* a failure avoids the broker for fail_avoid_ms */
	sp__fault_update(&f, "a", 3, true, t0);
	T_ASSERT(!sp__fault_is_available(&f, "a", t0 + 9999ull * 1000000ull));
	T_ASSERT(sp__fault_is_available(&f, "a", t0 + 10000ull * 1000000ull));
	T_ASSERT(sp__fault_is_available(&f, "b", t0));
	T_ASSERT_EQ(sp__fault_until(&f, "a"), t0 + 10000ull * 1000000ull);
	/* a fast success clears it */
	sp__fault_update(&f, "a", 1, false, t0 + 1);
	T_ASSERT(sp__fault_is_available(&f, "a", t0 + 2));
	/* slow: 600 ms -> RocketMQ's 30 s scaled by 10 s / 30 s = 10 s */
	sp__fault_update(&f, "b", 600, false, t0);
	T_ASSERT(!sp__fault_is_available(&f, "b", t0 + 9000ull * 1000000ull));
	T_ASSERT(sp__fault_is_available(&f, "b", t0 + 10000ull * 1000000ull));
	/* 200 ms is not slow */
	sp__fault_update(&f, "c", 200, false, t0);
	T_ASSERT(sp__fault_is_available(&f, "c", t0));
	/* the table never overflows */
	for (int i = 0; i < 200; i++) {
		char name[16];

		snprintf(name, sizeof(name), "x%d", i);
		sp__fault_update(&f, name, 1, true, t0 + (uint64_t)i);
	}
	T_ASSERT_EQ(f.n, SP__FAULT_MAX);
	T_ASSERT(!sp__fault_is_available(&f, "x199", t0 + 200));
}

static void
test_allocate(void)
{
	size_t s;
	size_t l;

	/* 8 queues, 3 members: 3, 3, 2 */
	sp__mq_allocate(8, 0, 3, &s, &l);
	T_ASSERT(s == 0 && l == 3);
	sp__mq_allocate(8, 1, 3, &s, &l);
	T_ASSERT(s == 3 && l == 3);
	sp__mq_allocate(8, 2, 3, &s, &l);
	T_ASSERT(s == 6 && l == 2);
	/* 4 queues, 2 members */
	sp__mq_allocate(4, 1, 2, &s, &l);
	T_ASSERT(s == 2 && l == 2);
	/* more members than queues */
	sp__mq_allocate(2, 1, 3, &s, &l);
	T_ASSERT(s == 1 && l == 1);
	sp__mq_allocate(2, 2, 3, &s, &l);
	T_ASSERT_EQ(l, 0);
	sp__mq_allocate(0, 0, 1, &s, &l);
	T_ASSERT_EQ(l, 0);
}

static const char route_json[] =
	"{\"brokerDatas\":[{\"brokerAddrs\":{\"0\":\"10.0.0.5:10911\"},"
	"\"brokerName\":\"broker-b\",\"cluster\":\"C\","
	"\"dataplaneAddrs\":{\"0\":{\"cores\":2,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:01\","
	"\"port\":20911}}},"
	"{\"brokerAddrs\":{\"0\":\"10.0.0.6:10911\"},\"brokerName\":\"broker-a\",\"cluster\":\"C\","
	"\"dataplaneAddrs\":{\"0\":{\"cores\":2,\"ip\":\"10.0.0.6\",\"mac\":\"02:00:00:00:00:02\","
	"\"port\":30911}}},"
	"{\"brokerAddrs\":{\"0\":\"10.0.0.7:10911\"},\"brokerName\":\"broker-nodp\",\"cluster\":"
	"\"C\"}"
	"],\"filterServerTable\":{},"
	"\"queueDatas\":[{\"brokerName\":\"broker-b\",\"dataplaneQueueCores\":[1,0,1,0],"
	"\"perm\":6,\"readQueueNums\":4,\"topicSysFlag\":0,\"writeQueueNums\":4},"
	"{\"brokerName\":\"broker-a\",\"perm\":4,\"readQueueNums\":2,\"topicSysFlag\":0,"
	"\"writeQueueNums\":2},"
	"{\"brokerName\":\"broker-nodp\",\"perm\":6,\"readQueueNums\":4,\"topicSysFlag\":0,"
	"\"writeQueueNums\":4}]}";

static void
test_topic_build(void)
{
	struct sp_route *r;
	struct sp__topic *t;
	const struct sp__tq *q;
	struct dp_addr a;

	T_ASSERT_EQ(sp_route_parse(route_json, strlen(route_json), &r), 0);
	T_ASSERT_EQ(sp__topic_build("T", r, &t), 0);
	/* broker-a is read-only, broker-nodp has no dataplane */
	T_ASSERT_EQ(t->n_wq, 4);
	T_ASSERT_EQ(t->n_rq, 6);
	/* sorted by broker name: broker-a first */
	T_ASSERT_STREQ(t->route->brokers[t->rq[0].broker].name, "broker-a");
	T_ASSERT_EQ(t->rq[1].queue_id, 1);
	T_ASSERT_STREQ(t->route->brokers[t->rq[2].broker].name, "broker-b");
	q = sp__topic_find(t, "broker-b", 2, false);
	T_ASSERT(q != NULL);
	T_ASSERT_EQ(q->core, 1);
	a = sp__tq_addr(t, q);
	T_ASSERT_EQ(a.ip, inet_addr("10.0.0.5"));
	T_ASSERT_EQ(a.port, 20912);
	q = sp__topic_find(t, "", 1, true);
	T_ASSERT(q != NULL);
	a = sp__tq_addr(t, q);
	T_ASSERT_EQ(a.port, 30912); /* no map: queue id modulo cores */
	T_ASSERT(sp__topic_find(t, "broker-a", 1, false) == NULL);
	T_ASSERT(sp__topic_find(t, "broker-nodp", 0, true) == NULL);
	sp__topic_free(t);
}

static void
test_batch_roundtrip(void)
{
	uint8_t body[4096];
	size_t len = 0;
	size_t pos = 0;
	char props[256];
	size_t pl;
	struct wire_batch_item it;
	struct sp_msg m = {.topic = "T", .tags = "x"};

	for (int i = 0; i < 5; i++) {
		char b[16];
		char id[SP_MSGID_LEN + 1];

		sp__msgid_new(id);
		snprintf(b, sizeof(b), "body-%d", i);
		T_ASSERT_EQ(sp__msg_props(&m, id, props, sizeof(props), &pl), 0);
		it = (struct wire_batch_item){.flag = i,
					      .body = (const uint8_t *)b,
					      .body_len = (uint32_t)strlen(b),
					      .props = props,
					      .props_len = (uint16_t)pl};
		T_ASSERT_EQ(wire_batch_append(body, sizeof(body), &len, &it), 0);
	}
	for (int i = 0; i < 5; i++) {
		char b[16];
		const char *v;
		size_t vl;

		snprintf(b, sizeof(b), "body-%d", i);
		T_ASSERT_EQ(wire_batch_next(body, len, &pos, &it), 1);
		T_ASSERT_EQ(it.flag, i);
		T_ASSERT(it.body_len == strlen(b) && memcmp(it.body, b, it.body_len) == 0);
		T_ASSERT(wire_props_get(it.props, it.props_len, "UNIQ_KEY", &v, &vl));
		T_ASSERT_EQ(vl, 32);
	}
	T_ASSERT_EQ(wire_batch_next(body, len, &pos, &it), 0);
}

/* Encodes one stored record with @tags and @body at queue offset @qo. */
static size_t
put_rec(uint8_t *buf, size_t cap, const char *tags, const char *body, int64_t qo)
{
	char props[128];
	size_t pl = 0;
	struct wire_msg m = {0};
	long n;

	if (tags)
		T_ASSERT_EQ(
			wire_props_append(props, sizeof(props), &pl, "TAGS", 4, tags, strlen(tags)),
			0);
	T_ASSERT_EQ(wire_props_append(props, sizeof(props), &pl, "UNIQ_KEY", 8,
				      "00000000000000000000000000000001", 32),
		    0);
	m.queue_id = 3;
	m.queue_offset = qo;
	m.phys_offset = 1000 + qo;
	m.born_ts = 1;
	m.store_ts = 2;
	m.born_host.addr[0] = 127;
	m.store_host.addr[0] = 10;
	m.store_host.port = 10911;
	m.body = (const uint8_t *)body;
	m.body_len = (uint32_t)strlen(body);
	m.topic = "T";
	m.topic_len = 1;
	m.props = props;
	m.props_len = (uint16_t)pl;
	n = wire_rec_encode(&m, buf, cap);
	T_ASSERT(n > 0);
	return (size_t)n;
}

static void
test_records_decode(void)
{
	uint8_t recs[2048];
	size_t len = 0;
	struct sp_msg_ext out[4];
	char str[2048];
	long n;

	len += put_rec(recs + len, sizeof(recs) - len, "a", "one", 0);
	len += put_rec(recs + len, sizeof(recs) - len, "b", "two", 1);
	len += put_rec(recs + len, sizeof(recs) - len, NULL, "three", 2);
	T_ASSERT_EQ(sp__records_count(recs, len), 3);
	T_ASSERT(sp__rec_strbuf_size(len, 3) <= sizeof(str));
	n = sp__records_decode(recs, len, "*", out, 4, str, sp__rec_strbuf_size(len, 3));
	T_ASSERT_EQ(n, 3);
	T_ASSERT_STREQ(out[0].topic, "T");
	T_ASSERT_STREQ(out[0].tags, "a");
	T_ASSERT_STREQ(out[2].tags, "");
	T_ASSERT(out[1].body_len == 3 && memcmp(out[1].body, "two", 3) == 0);
	T_ASSERT_EQ(out[1].queue_offset, 1);
	T_ASSERT_EQ(out[1].phys_offset, 1001);
	T_ASSERT_EQ(out[1].queue_id, 3);
	T_ASSERT_STREQ(out[0].msg_id, "00000000000000000000000000000001");
	T_ASSERT_EQ(strlen(out[0].offset_msg_id), 32);
	/* the client re-checks tags by string */
	n = sp__records_decode(recs, len, "b || c", out, 4, str, sp__rec_strbuf_size(len, 3));
	T_ASSERT_EQ(n, 1);
	T_ASSERT_STREQ(out[0].tags, "b");
	T_ASSERT_EQ(out[0].queue_offset, 1);
	/* truncated input */
	T_ASSERT_EQ(sp__records_count(recs, len - 1), -EBADMSG);
	T_ASSERT_EQ(sp__records_decode(recs, len - 1, "*", out, 4, str, sizeof(str)), -EBADMSG);
}

static void
test_select_by_hash(void)
{
	struct sp_msg a = {.topic = "T", .keys = "order-17"};
	struct sp_msg b = {.topic = "T", .keys = "order-17"};
	struct sp_msg none = {.topic = "T"};

	T_ASSERT_EQ(sp_select_by_key_hash(8, &a, NULL), sp_select_by_key_hash(8, &b, NULL));
	T_ASSERT(sp_select_by_key_hash(8, &a, NULL) < 8);
	T_ASSERT_EQ(sp_select_by_key_hash(8, &none, NULL), 0);
	for (int i = 0; i < 100; i++) {
		char k[32];
		struct sp_msg m = {.topic = "T", .keys = k};

		snprintf(k, sizeof(k), "key-%d-\xe4\xb8\xad", i * 7919);
		T_ASSERT(sp_select_by_key_hash(5, &m, NULL) < 5);
	}
}

/* Each member's share of @nq queues among @n members: owner[q] is its member, or -1 / -2. */
static void
owners(enum sp_rebalance how, size_t nq, size_t n, char **ids, int *owner)
{
	struct sp_mq mqs[64];
	bool mine[64];

	for (size_t q = 0; q < nq; q++) {
		snprintf(mqs[q].topic, sizeof(mqs[q].topic), "T");
		snprintf(mqs[q].broker, sizeof(mqs[q].broker), "broker-%c", q < nq / 2 ? 'a' : 'b');
		mqs[q].queue_id = (int32_t)(q % (nq / 2 ? nq / 2 : 1));
		owner[q] = -1;
	}
	for (size_t m = 0; m < n; m++) {
		T_ASSERT_EQ(sp__rbl_allocate(how, mqs, nq, ids, n, ids[m], mine), 0);
		for (size_t q = 0; q < nq; q++)
			if (mine[q])
				owner[q] = owner[q] == -1 ? (int)m : -2; /* -2: two owners */
	}
}

static void
test_rebalance_allocate(void)
{
	char *ids[] = {"10.0.0.1@100", "10.0.0.2@200", "10.0.0.3@300", "10.0.0.4@400"};
	int o4[16], o3[16];
	bool mine[16];
	struct sp_mq mq = {.topic = "T", .broker = "b", .queue_id = 0};
	size_t moved = 0, counts[4] = {0};

	/* average: contiguous ranges, the first members one more (AllocateMessageQueueAveragely) */
	owners(SP_REBALANCE_AVERAGE, 10, 4, ids, o4);
	for (size_t q = 0; q < 10; q++)
		T_ASSERT_EQ(o4[q], q < 3 ? 0 : q < 6 ? 1 : q < 8 ? 2 : 3);
	/* a member the list lacks gets nothing, and says so */
	T_ASSERT_EQ(sp__rbl_allocate(SP_REBALANCE_AVERAGE, &mq, 1, ids, 4, "stranger", mine),
		    -ENOENT);
	/* more members than queues: the last ones idle */
	owners(SP_REBALANCE_AVERAGE, 2, 4, ids, o4);
	T_ASSERT(o4[0] == 0 && o4[1] == 1);
	/* consistent hash: one owner per queue, every member some of 16 */
	owners(SP_REBALANCE_CONSISTENT_HASH, 16, 4, ids, o4);
	for (size_t q = 0; q < 16; q++) {
		T_ASSERT(o4[q] >= 0);
		counts[o4[q]]++;
	}
	for (size_t m = 0; m < 4; m++)
		T_ASSERT(counts[m] > 0);
	/* the last member leaves: only its queues move */
	owners(SP_REBALANCE_CONSISTENT_HASH, 16, 3, ids, o3);
	for (size_t q = 0; q < 16; q++) {
		T_ASSERT(o3[q] >= 0);
		if (o4[q] != 3)
			T_ASSERT_EQ(o3[q], o4[q]);
		moved += o4[q] != o3[q];
	}
	T_ASSERT_EQ(moved, counts[3]);
}

T_MAIN(T_CASE(test_strerror), T_CASE(test_props), T_CASE(test_msgid), T_CASE(test_tag_expr),
       T_CASE(test_fault), T_CASE(test_allocate), T_CASE(test_topic_build),
       T_CASE(test_batch_roundtrip), T_CASE(test_records_decode), T_CASE(test_select_by_hash),
       T_CASE(test_rebalance_allocate))
