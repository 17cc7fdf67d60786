// SPDX-License-Identifier: Apache-2.0
/*
 * test_breg.c - the RegisterBrokerBody a broker sends (ctl_breg_body()):
 * fastjson's exact form, argument checks, and a round trip in one process
 * through the NameServer's own handlers (ns_handle()) and back out through
 * the client's route parser, so broker, NameServer and client agree on
 * every dataplane field. tests/integration/test_breg.c runs the agent
 * against real NameServer processes.
 */
#include <arpa/inet.h>
#include <string.h>

#include "common/crc32.h"
#include "control/breg.h"
#include "control/ns.h"
#include "harness.h"
#include "sprocket/route.h"
#include "wire/remoting.h"

static const uint16_t cores_a[] = {0, 1, 1, 0};

static const struct ctl_breg_topic topics[] = {
	{.name = "TopicA",
	 .read_queues = 4,
	 .write_queues = 4,
	 .perm = 6,
	 .queue_cores = cores_a,
	 .n_queue_cores = 4},
	{.name = "TopicB",
	 .read_queues = 8,
	 .write_queues = 2,
	 .perm = 4,
	 .sys_flag = 1,
	 .order = true},
};

static void
test_body_exact(void)
{
	static const char want[] =
		"{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{"
		"\"dataVersion\":{\"counter\":18446744073709551615,\"timestamp\":1700000000000},"
		"\"topicConfigTable\":{"
		"\"TopicA\":{\"dataplaneQueueCores\":[0,1,1,0],\"order\":false,\"perm\":6,"
		"\"readQueueNums\":4,\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":\"TopicA\","
		"\"topicSysFlag\":0,\"writeQueueNums\":4},"
		"\"TopicB\":{\"order\":true,\"perm\":4,\"readQueueNums\":8,"
		"\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":\"TopicB\",\"topicSysFlag\":1,"
		"\"writeQueueNums\":2}}}}";
	char *json = NULL;
	size_t len = 0;

	T_ASSERT_EQ(ctl_breg_body(topics, 2, UINT64_MAX, 1700000000000, &json, &len), 0);
	T_ASSERT_EQ(len, strlen(want));
	T_ASSERT_STREQ(json, want);
	free(json);

	/* No topics: still a valid body with a data version (a heartbeat). */
	T_ASSERT_EQ(ctl_breg_body(NULL, 0, 1, 2, &json, &len), 0);
	T_ASSERT_STREQ(json, "{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{"
			     "\"dataVersion\":{\"counter\":1,\"timestamp\":2},"
			     "\"topicConfigTable\":{}}}");
	free(json);

	/* Names are JSON strings: escaped, never spliced. */
	{
		struct ctl_breg_topic t = {.name = "a\"b\\c\n", .perm = 6};

		T_ASSERT_EQ(ctl_breg_body(&t, 1, 1, 2, &json, &len), 0);
		T_ASSERT(strstr(json, "\"a\\\"b\\\\c\\u000a\":{") != NULL);
		free(json);
	}
}

static void
test_body_invalid(void)
{
	struct ctl_breg_topic t = {.name = "T", .n_queue_cores = 2};
	char *json = NULL;
	size_t len = 0;

	T_ASSERT_EQ(ctl_breg_body(NULL, 1, 1, 2, &json, &len), -EINVAL);
	T_ASSERT_EQ(ctl_breg_body(&t, 1, 1, 2, &json, &len), -EINVAL); /* map without array */
	t.n_queue_cores = 0;
	t.name = NULL;
	T_ASSERT_EQ(ctl_breg_body(&t, 1, 1, 2, &json, &len), -EINVAL);
	t.name = "";
	T_ASSERT_EQ(ctl_breg_body(&t, 1, 1, 2, &json, &len), -EINVAL);
	T_ASSERT(json == NULL);
}

/* Run one request through ns_handle() (writer role). Return: the response code. */
static int
handle(struct ns_state *st, struct wire_rem_cmd *cmd, const char *body, size_t body_len,
       struct sp_route **route)
{
	size_t cap = 8192 + body_len;
	uint8_t *frame = malloc(cap);
	char *scratch = malloc(65536);
	struct wire_rem_cmd *rsp = calloc(1, sizeof(*rsp));
	uint8_t *out = NULL;
	size_t out_len = 0;
	size_t n = 0;
	int code;

	T_ASSERT(frame != NULL && scratch != NULL && rsp != NULL);
	cmd->version = WIRE_REM_VERSION_V4_9_8;
	cmd->body = (const uint8_t *)body;
	cmd->body_len = (uint32_t)body_len;
	T_ASSERT_EQ(wire_rem_encode(cmd, frame, cap, &n), 0);
	T_ASSERT_EQ(ns_handle(st, NS_ROLE_WRITER, 1, htonl(INADDR_LOOPBACK), 1000, frame, n, &out,
			      &out_len),
		    0);
	T_ASSERT(out != NULL);
	T_ASSERT_EQ(wire_rem_decode(out, out_len, rsp, scratch, 65536), 0);
	code = rsp->code;
	if (code != 0 && rsp->remark != NULL)
		fprintf(stderr, "namesrv: code %d %s\n", code, rsp->remark);
	if (route != NULL && code == 0)
		T_ASSERT_EQ(sp_route_parse((const char *)rsp->body, rsp->body_len, route), 0);
	free(out);
	free(rsp);
	free(scratch);
	free(frame);
	return code;
}

static void
test_namesrv_round_trip(void)
{
	struct ns_conf conf = {.kv_path = ""};
	struct wire_rem_cmd *cmd = calloc(1, sizeof(*cmd));
	struct ns_state *st = NULL;
	struct sp_route *r = NULL;
	const uint8_t mac[6] = {2, 0, 0, 0, 0, 0x0b};
	char crc[16];
	char *json;
	size_t len;

	T_ASSERT(cmd != NULL);
	T_ASSERT_EQ(ns_state_create(&conf, &st), 0);
	T_ASSERT_EQ(ctl_breg_body(topics, 2, 3, 1700000000000, &json, &len), 0);
	snprintf(crc, sizeof(crc), "%u", crc32_body(json, len));
	cmd->code = WIRE_REQ_REGISTER_BROKER;
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "brokerName", "broker-a"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "brokerAddr", "127.0.0.1:10911"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "clusterName", "C"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "brokerId", "0"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "bodyCrc32", crc), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "dataplaneIp", "10.1.2.3"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "dataplaneMac", "02:00:00:00:00:0b"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "dataplanePort", "20911"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "dataplaneCores", "2"), 0);
	T_ASSERT_EQ(handle(st, cmd, json, len, NULL), WIRE_RSP_SUCCESS);

	/* TopicA: the broker's explicit map. */
	memset(cmd, 0, sizeof(*cmd));
	cmd->code = WIRE_REQ_GET_ROUTEINFO_BY_TOPIC;
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "topic", "TopicA"), 0);
	T_ASSERT_EQ(handle(st, cmd, NULL, 0, &r), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(r->n_brokers, 1);
	T_ASSERT_STREQ(r->brokers[0].addr, "127.0.0.1:10911");
	T_ASSERT_STREQ(r->brokers[0].cluster, "C");
	T_ASSERT(r->brokers[0].has_dp);
	T_ASSERT_EQ(r->brokers[0].dp_ip, inet_addr("10.1.2.3"));
	T_ASSERT_MEMEQ(r->brokers[0].dp_mac, mac, 6);
	T_ASSERT_EQ(r->brokers[0].dp_port, 20911);
	T_ASSERT_EQ(r->brokers[0].dp_cores, 2);
	T_ASSERT_EQ(r->n_queues, 1);
	T_ASSERT_EQ(r->queues[0].n_cores, 4);
	T_ASSERT_MEMEQ(r->queues[0].queue_cores, cores_a, sizeof(cores_a));
	sp_route_free(r);

	/* TopicB: no map sent, so the NameServer's q % cores. */
	memset(cmd, 0, sizeof(*cmd));
	cmd->code = WIRE_REQ_GET_ROUTEINFO_BY_TOPIC;
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "topic", "TopicB"), 0);
	T_ASSERT_EQ(handle(st, cmd, NULL, 0, &r), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(r->queues[0].read_queues, 8);
	T_ASSERT_EQ(r->queues[0].write_queues, 2);
	T_ASSERT_EQ(r->queues[0].perm, 4);
	T_ASSERT_EQ(r->queues[0].sys_flag, 1);
	T_ASSERT_EQ(r->queues[0].n_cores, 8);
	for (uint32_t q = 0; q < 8; q++)
		T_ASSERT_EQ(sp_route_queue_core(r, &r->queues[0], q), q % 2);
	sp_route_free(r);

	/* A wrong bodyCrc32 is refused, as RocketMQ's NameServer does. */
	memset(cmd, 0, sizeof(*cmd));
	cmd->code = WIRE_REQ_REGISTER_BROKER;
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "brokerName", "broker-a"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "brokerAddr", "127.0.0.1:10911"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "clusterName", "C"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "brokerId", "0"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(cmd, "bodyCrc32", "12345"), 0);
	T_ASSERT_EQ(handle(st, cmd, json, len, NULL), WIRE_RSP_SYSTEM_ERROR);

	free(json);
	free(cmd);
	ns_state_destroy(st);
}

static int
no_snapshot(void *arg, struct ctl_breg_topic **t, size_t *n, uint64_t *c, int64_t *ts)
{
	(void)arg;
	(void)t;
	(void)n;
	(void)c;
	(void)ts;
	return -EIO;
}

static void
no_release(void *arg, struct ctl_breg_topic *t, size_t n)
{
	(void)arg;
	(void)t;
	(void)n;
}

/* Refused configurations start no thread and allocate nothing that leaks. */
static void
test_start_invalid(void)
{
	struct ctl_breg_cfg ok = {
		.namesrv = "127.0.0.1:1",
		.info = {.cluster = "C", .broker_name = "b", .broker_addr = "127.0.0.1:10911"},
		.snapshot = no_snapshot,
		.release = no_release,
	};
	struct ctl_breg_cfg c;
	struct ctl_breg *b = NULL;

	T_ASSERT_EQ(ctl_breg_start(NULL, &b), -EINVAL);
	c = ok;
	c.namesrv = " ; ;";
	T_ASSERT_EQ(ctl_breg_start(&c, &b), -EINVAL);
	c = ok;
	c.snapshot = NULL;
	T_ASSERT_EQ(ctl_breg_start(&c, &b), -EINVAL);
	c = ok;
	c.info.broker_name = "";
	T_ASSERT_EQ(ctl_breg_start(&c, &b), -EINVAL);
	c = ok;
	c.info.broker_id = -1;
	T_ASSERT_EQ(ctl_breg_start(&c, &b), -EINVAL);
	c = ok;
	c.info.has_dp = true;
	c.info.dp_ip = "1.2.3.4";
	c.info.dp_mac = "02:00:00:00:00:01";
	c.info.dp_port = 20911;
	T_ASSERT_EQ(ctl_breg_start(&c, &b), -EINVAL); /* no cores */
	T_ASSERT(b == NULL);
	ctl_breg_stop(NULL);
}

/* ctl_breg_delta(): added and changed topics, removed names, nothing else. */
static void
test_delta_body(void)
{
	static const uint16_t cores_b[] = {1, 1, 0, 0};
	struct ctl_breg_topic now[3] = {
		topics[0], topics[1], {.name = "TopicC", .read_queues = 1, .write_queues = 1}};
	struct ctl_breg_topic dup[3] = {topics[0], topics[0], topics[1]};
	size_t nc = 0;
	size_t nd = 0;
	char *json = NULL;
	size_t len = 0;

	/* the same set: an empty delta with the new version */
	T_ASSERT_EQ(ctl_breg_delta(topics, 2, topics, 2, 7, 9, &json, &len, &nc, &nd), 0);
	T_ASSERT_STREQ(json, "{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{"
			     "\"dataVersion\":{\"counter\":7,\"timestamp\":9},"
			     "\"sprocketDeletedTopics\":[],\"topicConfigTable\":{}}}");
	T_ASSERT_EQ(nc, 0);
	T_ASSERT_EQ(nd, 0);
	free(json);

	/* TopicC added, TopicB's map changed, TopicA the same */
	now[1].queue_cores = cores_b;
	now[1].n_queue_cores = 4;
	T_ASSERT_EQ(ctl_breg_delta(topics, 2, now, 3, 8, 9, &json, &len, &nc, &nd), 0);
	T_ASSERT_EQ(nc, 2);
	T_ASSERT_EQ(nd, 0);
	T_ASSERT(strstr(json, "\"TopicA\"") == NULL);
	T_ASSERT(strstr(json, "\"TopicB\":{\"dataplaneQueueCores\":[1,1,0,0]") != NULL);
	T_ASSERT(strstr(json, "\"TopicC\":{") != NULL);
	T_ASSERT_EQ(len, strlen(json));
	free(json);

	/* TopicA removed; every field of a topic counts */
	now[0] = topics[1];
	now[0].sys_flag = 0;
	T_ASSERT_EQ(ctl_breg_delta(topics, 2, now, 1, 8, 9, &json, &len, &nc, &nd), 0);
	T_ASSERT_EQ(nc, 1);
	T_ASSERT_EQ(nd, 1);
	T_ASSERT(strstr(json, "\"sprocketDeletedTopics\":[\"TopicA\"]") != NULL);
	free(json);

	/* a name twice in the older snapshot is removed once */
	T_ASSERT_EQ(ctl_breg_delta(dup, 3, NULL, 0, 8, 9, &json, &len, &nc, &nd), 0);
	T_ASSERT_EQ(nd, 2);
	T_ASSERT(strstr(json, "[\"TopicA\",\"TopicB\"]") != NULL);
	free(json);

	/* as ctl_breg_body(): a topic without a name is refused */
	now[0].name = NULL;
	T_ASSERT_EQ(ctl_breg_delta(topics, 2, now, 1, 8, 9, &json, &len, &nc, &nd), -EINVAL);
	T_ASSERT_EQ(ctl_breg_delta(NULL, 1, topics, 1, 8, 9, &json, &len, &nc, &nd), -EINVAL);
}

T_MAIN(T_CASE(test_delta_body), T_CASE(test_body_exact), T_CASE(test_body_invalid),
       T_CASE(test_namesrv_round_trip), T_CASE(test_start_invalid))
