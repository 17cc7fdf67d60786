// SPDX-License-Identifier: Apache-2.0
/*
 * test_route.c - sp_route_parse() on the routes NameServers write: sprocket's
 * with dataplane fields, RocketMQ's with and without quoted broker ids, ones
 * that leave optional fields out, and bodies that must be refused.
 */
#include <arpa/inet.h>
#include <string.h>

#include "harness.h"
#include "sprocket/route.h"

/* docs/namesrv.md's example, as sprocket-namesrv writes it (one line, no blanks). */
static const char dp_route[] =
	"{\"brokerDatas\":[{\"brokerAddrs\":{\"0\":\"10.0.0.5:10911\",\"1\":\"10.0.0.6:10911\"},"
	"\"brokerName\":\"broker-a\",\"cluster\":\"DefaultCluster\","
	"\"dataplaneAddrs\":{\"0\":{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:01\","
	"\"port\":20911}}}],\"filterServerTable\":{},"
	"\"queueDatas\":[{\"brokerName\":\"broker-a\",\"dataplaneQueueCores\":[0,1,3,2],"
	"\"perm\":6,\"readQueueNums\":4,\"topicSynFlag\":0,\"topicSysFlag\":0,"
	"\"writeQueueNums\":4}]}";

static struct sp_route *
parse_ok(const char *json)
{
	struct sp_route *r = NULL;

	T_ASSERT_EQ(sp_route_parse(json, strlen(json), &r), 0);
	T_ASSERT(r != NULL);
	return r;
}

static void
parse_bad(const char *json)
{
	struct sp_route *r = NULL;
	int rc = sp_route_parse(json, strlen(json), &r);

	if (rc != -EBADMSG)
		T_FAIL("accepted (rc %d): %s", rc, json);
	T_ASSERT(r == NULL);
}

static void
test_sprocket_route(void)
{
	struct sp_route *r = parse_ok(dp_route);
	const struct sp_route_broker *b;
	const struct sp_route_queue *q;
	const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};

	T_ASSERT_EQ(r->n_brokers, 1);
	T_ASSERT_EQ(r->n_queues, 1);
	b = &r->brokers[0];
	T_ASSERT_STREQ(b->name, "broker-a");
	T_ASSERT_STREQ(b->cluster, "DefaultCluster");
	T_ASSERT_STREQ(b->addr, "10.0.0.5:10911");
	T_ASSERT(b->has_dp);
	T_ASSERT_EQ(b->dp_ip, inet_addr("10.0.0.5"));
	T_ASSERT_MEMEQ(b->dp_mac, mac, 6);
	T_ASSERT_EQ(b->dp_port, 20911);
	T_ASSERT_EQ(b->dp_cores, 4);
	q = &r->queues[0];
	T_ASSERT_EQ(q->broker, 0);
	T_ASSERT_EQ(q->read_queues, 4);
	T_ASSERT_EQ(q->write_queues, 4);
	T_ASSERT_EQ(q->perm, 6);
	T_ASSERT_EQ(q->sys_flag, 0);
	T_ASSERT_EQ(q->n_cores, 4);
	T_ASSERT_EQ(q->queue_cores[2], 3);
	T_ASSERT_EQ(sp_route_queue_core(r, q, 0), 0);
	T_ASSERT_EQ(sp_route_queue_core(r, q, 2), 3);
	T_ASSERT_EQ(sp_route_queue_core(r, q, 3), 2);
	/* Past the map: queue id modulo the cores. */
	T_ASSERT_EQ(sp_route_queue_core(r, q, 6), 2);
	sp_route_free(r);
}

/* A Java NameServer before 4.9.4 writes broker ids as bare integers. */
static void
test_java_bare_keys(void)
{
	struct sp_route *r = parse_ok(
		"{\"brokerDatas\":[{\"brokerAddrs\":{1:\"10.0.0.6:10911\", 0:\"10.0.0.5:10911\"},"
		"\"brokerName\":\"b\\\"{0:x\",\"cluster\":\"C\"}],\"filterServerTable\":{},"
		"\"queueDatas\":[{\"brokerName\":\"b\\\"{0:x\",\"perm\":6,\"readQueueNums\":8,"
		"\"topicSynFlag\":3,\"writeQueueNums\":2}]}");

	T_ASSERT_EQ(r->n_brokers, 1);
	T_ASSERT_STREQ(r->brokers[0].name, "b\"{0:x"); /* a bare key inside a string stays */
	T_ASSERT_STREQ(r->brokers[0].addr, "10.0.0.5:10911");
	T_ASSERT(!r->brokers[0].has_dp);
	T_ASSERT_EQ(r->queues[0].read_queues, 8);
	T_ASSERT_EQ(r->queues[0].write_queues, 2);
	T_ASSERT_EQ(r->queues[0].sys_flag, 3); /* RocketMQ <= 4.8's topicSynFlag */
	T_ASSERT(r->queues[0].queue_cores == NULL);
	/* No dataplane: every queue on core 0. */
	T_ASSERT_EQ(sp_route_queue_core(r, &r->queues[0], 5), 0);
	sp_route_free(r);
}

static void
test_optional_fields(void)
{
	struct sp_route *r;

	/* Blank-separated, no cluster, no master address, no flag, a slave only. */
	r = parse_ok(
		" {\n \"brokerDatas\" : [ {\"brokerName\":\"a\",\"brokerAddrs\":{\"1\":\"x:1\"}},"
		"{\"brokerName\":\"b\"} ] , \"queueDatas\":[{\"brokerName\":\"b\",\"perm\":4,"
		"\"readQueueNums\":1,\"writeQueueNums\":0},{\"brokerName\":\"nobody\","
		"\"perm\":6,\"readQueueNums\":1,\"writeQueueNums\":1,"
		"\"dataplaneQueueCores\":[9,9]}],\"orderTopicConf\":\"a:4\"}\n\t ");
	T_ASSERT_EQ(r->n_brokers, 2);
	T_ASSERT_STREQ(r->brokers[0].cluster, "");
	T_ASSERT_STREQ(r->brokers[0].addr, "");
	/* The queueData naming no brokerData is dropped. */
	T_ASSERT_EQ(r->n_queues, 1);
	T_ASSERT_EQ(r->queues[0].broker, 1);
	T_ASSERT_EQ(r->queues[0].perm, 4);
	T_ASSERT_EQ(r->queues[0].sys_flag, 0);
	sp_route_free(r);

	r = parse_ok("{}");
	T_ASSERT_EQ(r->n_brokers, 0);
	T_ASSERT_EQ(r->n_queues, 0);
	sp_route_free(r);

	/* null members are absent members (fastjson omits them, others may not). */
	r = parse_ok("{\"brokerDatas\":[{\"brokerName\":\"a\",\"cluster\":null,"
		     "\"brokerAddrs\":null,\"dataplaneAddrs\":null}],\"queueDatas\":null}");
	T_ASSERT_EQ(r->n_brokers, 1);
	T_ASSERT_EQ(r->n_queues, 0);
	sp_route_free(r);

	/* Endpoints for slaves only (the master is away): the lowest brokerId, read only. */
	r = parse_ok(
		"{\"brokerDatas\":[{\"brokerName\":\"a\",\"dataplaneAddrs\":{\"2\":"
		"{\"cores\":1,\"ip\":\"1.2.3.5\",\"mac\":\"02:00:00:00:00:02\",\"port\":2},\"1\":"
		"{\"cores\":1,\"ip\":\"1.2.3.4\",\"mac\":\"02:00:00:00:00:01\",\"port\":1}}}]}");
	T_ASSERT(r->brokers[0].has_dp);
	T_ASSERT(r->brokers[0].dp_is_slave);
	T_ASSERT_EQ(r->brokers[0].dp_port, 1);
	sp_route_free(r);
	/* With the master's endpoint, the master's. */
	r = parse_ok(
		"{\"brokerDatas\":[{\"brokerName\":\"a\",\"dataplaneAddrs\":{\"1\":"
		"{\"cores\":1,\"ip\":\"1.2.3.4\",\"mac\":\"02:00:00:00:00:01\",\"port\":1},\"0\":"
		"{\"cores\":1,\"ip\":\"1.2.3.6\",\"mac\":\"02:00:00:00:00:03\",\"port\":3}}}]}");
	T_ASSERT(r->brokers[0].has_dp);
	T_ASSERT(!r->brokers[0].dp_is_slave);
	T_ASSERT_EQ(r->brokers[0].dp_port, 3);
	sp_route_free(r);
}

static void
test_garbage(void)
{
	static const char *const bad[] = {
		"",
		"   ",
		"x",
		"[]",
		"null",
		"{\"brokerDatas\":{}}",
		"{\"queueDatas\":\"x\"}",
		"{\"brokerDatas\":[1]}",
		"{\"brokerDatas\":[{}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"\"}]}",
		"{\"brokerDatas\":[{\"brokerName\":7}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\",\"cluster\":1}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\",\"brokerAddrs\":[]}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\",\"brokerAddrs\":{\"0\":5}}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\\u0000b\"}]}",
		/* Truncated, and trailing bytes. */
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}",
		"{} {}",
		"{}x",
		/* Not JSON: a trailing comma, bare words (json-c lets single-quoted keys by). */
		"{\"brokerDatas\":[\"a\",]}",
		"{\"brokerDatas\":[],}",
		"{brokerDatas:[]}",
		/* Queue fields: required, typed, in range. */
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\"}]"
		"}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":\"4\",\"writeQueueNums\":4}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":-1,\"writeQueueNums\":4}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":4.5,\"writeQueueNums\":4}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":99999999999999999999,\"writeQueueNums\":4}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":4,\"writeQueueNums\":4,\"topicSysFlag\":true}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":4,\"writeQueueNums\":4,\"dataplaneQueueCores\":{}}]}",
		"{\"brokerDatas\":[{\"brokerName\":\"a\"}],\"queueDatas\":[{\"brokerName\":\"a\","
		"\"perm\":6,\"readQueueNums\":4,\"writeQueueNums\":4,"
		"\"dataplaneQueueCores\":[0,65536]}]}",
		/* Too deep for a route. */
		"{\"a\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]}",
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		parse_bad(bad[i]);
}

/* Dataplane endpoints: all four fields, each valid, and a map that fits them. */
static void
test_bad_dataplane(void)
{
	static const char *const dp[] = {
		"{}",
		"[]",
		"{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:01\"}",
		"{\"cores\":0,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:01\",\"port\":1}",
		"{\"cores\":4,\"ip\":\"10.0.0.256\",\"mac\":\"02:00:00:00:00:01\",\"port\":1}",
		"{\"cores\":4,\"ip\":\"::1\",\"mac\":\"02:00:00:00:00:01\",\"port\":1}",
		"{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00\",\"port\":1}",
		"{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:0g\",\"port\":1}",
		"{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02-00-00-00-00-01\",\"port\":1}",
		"{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:01\",\"port\":0}",
		"{\"cores\":4,\"ip\":\"10.0.0.5\",\"mac\":\"02:00:00:00:00:01\",\"port\":65534}",
		"{\"cores\":4,\"ip\":10,\"mac\":\"02:00:00:00:00:01\",\"port\":1}",
	};
	char json[1024];
	struct sp_route *r;

	for (size_t i = 0; i < ARRAY_SIZE(dp); i++) {
		snprintf(json, sizeof(json),
			 "{\"brokerDatas\":[{\"brokerName\":\"a\",\"dataplaneAddrs\":{\"0\":%s}}]}",
			 dp[i]);
		parse_bad(json);
	}
	/* The upper edges are fine. */
	r = parse_ok("{\"brokerDatas\":[{\"brokerName\":\"a\",\"dataplaneAddrs\":{\"0\":"
		     "{\"cores\":2,\"ip\":\"255.255.255.255\",\"mac\":\"FF:ff:00:00:00:0A\","
		     "\"port\":65534}}}]}");
	T_ASSERT(r->brokers[0].has_dp);
	T_ASSERT_EQ(r->brokers[0].dp_mac[0], 0xff);
	T_ASSERT_EQ(r->brokers[0].dp_mac[5], 0x0a);
	sp_route_free(r);
	/* A queue mapped to a core the endpoint does not have. */
	parse_bad("{\"brokerDatas\":[{\"brokerName\":\"a\",\"dataplaneAddrs\":{\"0\":{\"cores\":2,"
		  "\"ip\":\"1.2.3.4\",\"mac\":\"02:00:00:00:00:01\",\"port\":1}}}],"
		  "\"queueDatas\":[{\"brokerName\":\"a\",\"dataplaneQueueCores\":[0,1,2],"
		  "\"perm\":6,\"readQueueNums\":3,\"writeQueueNums\":3}]}");
}

static void
test_name_limits(void)
{
	char name[SP_NAME_MAX + 2];
	char json[512];
	struct sp_route *r;

	memset(name, 'n', sizeof(name));
	name[SP_NAME_MAX] = '\0';
	snprintf(json, sizeof(json), "{\"brokerDatas\":[{\"brokerName\":\"%s\"}]}", name);
	r = parse_ok(json);
	T_ASSERT_EQ(strlen(r->brokers[0].name), SP_NAME_MAX);
	sp_route_free(r);
	name[SP_NAME_MAX] = 'n';
	name[SP_NAME_MAX + 1] = '\0';
	snprintf(json, sizeof(json), "{\"brokerDatas\":[{\"brokerName\":\"%s\"}]}", name);
	parse_bad(json);
	/* The master's address must fit sp_route_broker.addr. */
	memset(name, '1', 64);
	name[64] = '\0';
	snprintf(json, sizeof(json),
		 "{\"brokerDatas\":[{\"brokerName\":\"a\",\"brokerAddrs\":{\"0\":\"%s\"}}]}", name);
	parse_bad(json);
}

/* Many brokers and queues, every one kept, maps included (one allocation). */
static void
test_many(void)
{
	size_t cap = 1 << 20;
	char *json = malloc(cap);
	size_t o = 0;
	struct sp_route *r;

	T_ASSERT(json != NULL);
	o += (size_t)snprintf(json + o, cap - o, "{\"brokerDatas\":[");
	for (int i = 0; i < 200; i++)
		o += (size_t)snprintf(
			json + o, cap - o,
			"%s{\"brokerName\":\"b%d\",\"dataplaneAddrs\":{\"0\":{\"cores\":"
			"%d,\"ip\":\"10.0.%d.%d\",\"mac\":\"02:00:00:00:00:01\","
			"\"port\":20000}}}",
			i ? "," : "", i, i % 7 + 1, i / 256, i % 256);
	o += (size_t)snprintf(json + o, cap - o, "],\"queueDatas\":[");
	for (int i = 199; i >= 0; i--) {
		o += (size_t)snprintf(json + o, cap - o,
				      "%s{\"brokerName\":\"b%d\",\"perm\":6,\"readQueueNums\":16,"
				      "\"writeQueueNums\":16,\"dataplaneQueueCores\":[",
				      i < 199 ? "," : "", i);
		for (int k = 0; k < 16; k++)
			o += (size_t)snprintf(json + o, cap - o, "%s%d", k ? "," : "",
					      (k + i) % (i % 7 + 1));
		o += (size_t)snprintf(json + o, cap - o, "]}");
	}
	o += (size_t)snprintf(json + o, cap - o, "]}");
	T_ASSERT(o < cap);
	r = parse_ok(json);
	T_ASSERT_EQ(r->n_brokers, 200);
	T_ASSERT_EQ(r->n_queues, 200);
	for (uint32_t i = 0; i < r->n_queues; i++) {
		const struct sp_route_queue *q = &r->queues[i];
		int bi = 199 - (int)i;

		T_ASSERT_EQ(q->broker, bi);
		T_ASSERT_EQ(r->brokers[bi].dp_ip, htonl(0x0a000000u | (uint32_t)bi));
		for (uint32_t k = 0; k < 16; k++)
			T_ASSERT_EQ(sp_route_queue_core(r, q, k), (k + bi) % (bi % 7 + 1));
	}
	sp_route_free(r);
	free(json);
}

T_MAIN(T_CASE(test_sprocket_route), T_CASE(test_java_bare_keys), T_CASE(test_optional_fields),
       T_CASE(test_garbage), T_CASE(test_bad_dataplane), T_CASE(test_name_limits),
       T_CASE(test_many))
