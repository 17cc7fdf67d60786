// SPDX-License-Identifier: Apache-2.0
/*
 * test_namesrv.c - sprocket-namesrv end to end: the real binary on
 * 127.0.0.1 (a free port, a private data dir) and a C remoting client.
 *
 * Each case starts its own server(s). Nothing here asserts a duration:
 * waits for the server to act (expiry, connection close) poll with a
 * generous deadline and only check that the effect happens.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#include "common/crc32.h"
#include "harness.h"
#include "ns_client.h"

#define BIN SP_NAMESRV_BIN
#define WAIT_MS 30000

static void
start(struct ns_proc *p, const char *dir, const char *const *args)
{
	T_ASSERT_EQ(nsp_start(BIN, dir, args, p), 0);
	T_ASSERT(p->port != 0);
}

/* SIGTERM; a clean exit (0) also means no sanitizer report, leak included. */
static void
finish(struct ns_proc *p)
{
	int rc = p->pid > 0 ? nsp_stop(p) : 0;
	char cmd[160];

	if (rc != 0) {
		snprintf(cmd, sizeof(cmd), "cat %s/namesrv.log >&2", p->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "no log\n");
	}
	nsp_cleanup(p);
	T_ASSERT_EQ(rc, 0);
}

static void
connect_to(const struct ns_proc *p, struct ns_client *c)
{
	T_ASSERT_EQ(nsc_connect(p->port, c), 0);
}

/* REGISTER_BROKER with @n topics "<prefix><i>". Return: response code. */
static int
reg_full(struct ns_client *c, const char *bname, const char *addr, const char *id,
	 const char *prefix, uint32_t n, int64_t counter, bool dp)
{
	const char *ext[32] = {"brokerName",
			       bname,
			       "brokerAddr",
			       addr,
			       "clusterName",
			       "DefaultCluster",
			       "haServerAddr",
			       "127.0.0.1:10912",
			       "brokerId",
			       id,
			       NULL};
	size_t len;
	char *body = nsc_register_body(prefix, n, 1700000000000, counter, &len);
	int rc;

	T_ASSERT(body != NULL);
	if (dp) {
		const char *more[] = {"dataplaneIp",
				      "127.0.0.1",
				      "dataplaneMac",
				      "02:00:00:00:00:0a",
				      "dataplanePort",
				      "20911",
				      "dataplaneCores",
				      "2",
				      NULL};

		memcpy(ext + 10, more, sizeof(more));
	}
	rc = nsc_call(c, WIRE_REQ_REGISTER_BROKER, ext, body, len);
	free(body);
	return rc;
}

static int
reg(struct ns_client *c, const char *bname, const char *addr, const char *id, const char *prefix,
    uint32_t n, int64_t counter)
{
	return reg_full(c, bname, addr, id, prefix, n, counter, false);
}

static int
route(struct ns_client *c, const char *topic)
{
	const char *ext[] = {"topic", topic, NULL};

	return nsc_call(c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0);
}

/* The response body as a strict JSON object (caller puts it). */
static struct json_object *
body_json(const struct ns_client *c)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;

	T_ASSERT(c->rsp.body_len > 0);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, (const char *)c->rsp.body, (int)c->rsp.body_len);
	T_ASSERT(o != NULL && json_tokener_get_error(tok) == json_tokener_success);
	json_tokener_free(tok);
	return o;
}

static struct json_object *
jget(struct json_object *o, const char *path)
{
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, ".", &save); t != NULL; t = strtok_r(NULL, ".", &save)) {
		if (json_object_is_type(o, json_type_array))
			o = json_object_array_get_idx(o, (size_t)atoi(t));
		else
			o = json_object_object_get(o, t);
		if (o == NULL)
			T_FAIL("no %s in JSON", path);
	}
	return o;
}

static int64_t
jint(struct json_object *o, const char *path)
{
	return json_object_get_int64(jget(o, path));
}

static const char *
jstr(struct json_object *o, const char *path)
{
	return json_object_get_string(jget(o, path));
}

/* Poll @topic's route until its code is @want. Return: true when it happened in time. */
static bool
wait_route(struct ns_client *c, const char *topic, int want)
{
	for (int i = 0; i < WAIT_MS / 20; i++) {
		if (route(c, topic) == want)
			return true;
		usleep(20000);
	}
	return false;
}

static void
test_register_and_route(void)
{
	struct ns_proc p;
	struct ns_client c;
	struct json_object *o;

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	T_ASSERT_EQ(reg_full(&c, "broker-a", "127.0.0.1:10911", "0", "T", 3, 1, true), 0);

	T_ASSERT_EQ(route(&c, "T1"), 0);
	/* Compact and standard: quoted broker ids, no blanks. */
	T_ASSERT(memchr(c.rsp.body, ' ', c.rsp.body_len) == NULL);
	T_ASSERT(memmem(c.rsp.body, c.rsp.body_len, "{\"0\":\"127.0.0.1:10911\"}", 23) != NULL);
	o = body_json(&c);
	T_ASSERT_STREQ(jstr(o, "brokerDatas.0.brokerName"), "broker-a");
	T_ASSERT_STREQ(jstr(o, "brokerDatas.0.cluster"), "DefaultCluster");
	T_ASSERT_STREQ(jstr(o, "brokerDatas.0.brokerAddrs.0"), "127.0.0.1:10911");
	T_ASSERT_STREQ(jstr(o, "brokerDatas.0.dataplaneAddrs.0.ip"), "127.0.0.1");
	T_ASSERT_STREQ(jstr(o, "brokerDatas.0.dataplaneAddrs.0.mac"), "02:00:00:00:00:0a");
	T_ASSERT_EQ(jint(o, "brokerDatas.0.dataplaneAddrs.0.port"), 20911);
	T_ASSERT_EQ(jint(o, "brokerDatas.0.dataplaneAddrs.0.cores"), 2);
	T_ASSERT_EQ(json_object_object_length(jget(o, "filterServerTable")), 0);
	T_ASSERT_STREQ(jstr(o, "queueDatas.0.brokerName"), "broker-a");
	T_ASSERT_EQ(jint(o, "queueDatas.0.perm"), 6);
	T_ASSERT_EQ(jint(o, "queueDatas.0.readQueueNums"), 4);
	T_ASSERT_EQ(jint(o, "queueDatas.0.writeQueueNums"), 4);
	T_ASSERT_EQ(jint(o, "queueDatas.0.topicSysFlag"), 0);
	T_ASSERT_EQ(jint(o, "queueDatas.0.topicSynFlag"), 0);
	T_ASSERT_EQ(json_object_array_length(jget(o, "queueDatas.0.dataplaneQueueCores")), 4);
	T_ASSERT_EQ(jint(o, "queueDatas.0.dataplaneQueueCores.3"), 1);
	json_object_put(o);

	T_ASSERT_EQ(route(&c, "Nope"), WIRE_RSP_TOPIC_NOT_EXIST);
	T_ASSERT(c.rsp.remark != NULL && strstr(c.rsp.remark, "Nope") != NULL);

	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_BROKER_CLUSTER_INFO, NULL, NULL, 0), 0);
	o = body_json(&c);
	T_ASSERT_STREQ(jstr(o, "brokerAddrTable.broker-a.brokerAddrs.0"), "127.0.0.1:10911");
	T_ASSERT_STREQ(jstr(o, "clusterAddrTable.DefaultCluster.0"), "broker-a");
	json_object_put(o);

	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER, NULL, NULL, 0), 0);
	o = body_json(&c);
	T_ASSERT_EQ(json_object_array_length(jget(o, "topicList")), 3);
	json_object_put(o);

	nsc_close(&c);
	T_ASSERT_EQ(nsp_stop(&p), 0);
	T_ASSERT(nsp_log_has(&p, "listening on 127.0.0.1:"));
	T_ASSERT(nsp_log_has(&p, "sprocket-namesrv stopped"));
	finish(&p);
}

static void
test_slave_and_unregister(void)
{
	const char *unreg_m[] = {"brokerName",	    "broker-a",	   "brokerAddr",
				 "127.0.0.1:10911", "clusterName", "DefaultCluster",
				 "brokerId",	    "0",	   NULL};
	const char *unreg_s[] = {"brokerName",	    "broker-a",	   "brokerAddr",
				 "127.0.0.1:10921", "clusterName", "DefaultCluster",
				 "brokerId",	    "1",	   NULL};
	struct ns_proc p;
	struct ns_client c;
	struct json_object *o;

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "T", 2, 1), 0);
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10921", "1", "T", 2, 1), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "masterAddr"), "127.0.0.1:10911");
	T_ASSERT_STREQ(nsc_ext(&c, "haServerAddr"), "127.0.0.1:10912");

	T_ASSERT_EQ(route(&c, "T0"), 0);
	o = body_json(&c);
	T_ASSERT_STREQ(jstr(o, "brokerDatas.0.brokerAddrs.1"), "127.0.0.1:10921");
	json_object_put(o);

	/* Master gone, slave left: the topic stays readable from the slave. */
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UNREGISTER_BROKER, unreg_m, NULL, 0), 0);
	T_ASSERT_EQ(route(&c, "T0"), 0);
	o = body_json(&c);
	T_ASSERT(json_object_object_get(jget(o, "brokerDatas.0.brokerAddrs"), "0") == NULL);
	json_object_put(o);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UNREGISTER_BROKER, unreg_s, NULL, 0), 0);
	T_ASSERT_EQ(route(&c, "T0"), WIRE_RSP_TOPIC_NOT_EXIST);
	/* A master with no topics at all: lookups miss, nothing breaks. */
	T_ASSERT_EQ(reg(&c, "broker-e", "127.0.0.1:10941", "0", "E", 0, 1), 0);
	T_ASSERT_EQ(route(&c, "E0"), WIRE_RSP_TOPIC_NOT_EXIST);
	/* Unknown brokers unregister fine. */
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_UNREGISTER_BROKER, unreg_s, NULL, 0), 0);
	nsc_close(&c);
	finish(&p);
}

static void
test_data_version(void)
{
	const char *q[] = {"brokerName",      "broker-a",    "brokerAddr",
			   "127.0.0.1:10911", "clusterName", "DefaultCluster",
			   "brokerId",	      "0",	     NULL};
	const char *same = "{\"counter\":2,\"timestamp\":1700000000000}";
	const char *other = "{\"counter\":3,\"timestamp\":1700000000000}";
	struct ns_proc p;
	struct ns_client c;

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "A", 1, 1), 0);
	T_ASSERT_EQ(route(&c, "A0"), 0);
	/* Same data version: the body is not re-parsed, so A1 does not appear. */
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "A", 2, 1), 0);
	T_ASSERT_EQ(route(&c, "A1"), WIRE_RSP_TOPIC_NOT_EXIST);
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "A", 2, 2), 0);
	T_ASSERT_EQ(route(&c, "A1"), 0);

	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_QUERY_DATA_VERSION, q, same, strlen(same)), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "changed"), "false");
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_QUERY_DATA_VERSION, q, other, strlen(other)), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "changed"), "true");
	T_ASSERT(c.rsp.body_len == strlen(same) && memcmp(c.rsp.body, same, strlen(same)) == 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_QUERY_DATA_VERSION, q, "{", 1), WIRE_RSP_SYSTEM_ERROR);
	nsc_close(&c);
	finish(&p);
}

static void
test_wipe_write_perm(void)
{
	const char *w[] = {"brokerName", "broker-a", NULL};
	struct ns_proc p;
	struct ns_client c;
	struct json_object *o;

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "T", 5, 1), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_WIPE_WRITE_PERM_OF_BROKER, w, NULL, 0), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "wipeTopicCount"), "5");
	T_ASSERT_EQ(route(&c, "T4"), 0);
	o = body_json(&c);
	T_ASSERT_EQ(jint(o, "queueDatas.0.perm"), 4);
	json_object_put(o);
	/* A new topic set from the master restores its permissions. */
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "T", 5, 2), 0);
	T_ASSERT_EQ(route(&c, "T4"), 0);
	o = body_json(&c);
	T_ASSERT_EQ(jint(o, "queueDatas.0.perm"), 6);
	json_object_put(o);
	nsc_close(&c);
	finish(&p);
}

static void
test_expiry_after_silence(void)
{
	const char *args[] = {"--brokerExpireMs=200", "--scanNotActiveBrokerInterval=50", NULL};
	struct ns_proc p;
	struct ns_client b;
	struct ns_client c;

	start(&p, NULL, args);
	connect_to(&p, &b);
	connect_to(&p, &c);
	T_ASSERT_EQ(reg(&b, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);
	/* The broker's connection stays open but it never registers again. */
	T_ASSERT(wait_route(&c, "T0", WIRE_RSP_TOPIC_NOT_EXIST));
	/* The writer logs after it publishes the drop (and runs at nice 10): wait for the line. */
	for (int i = 0; i < 500 && !nsp_log_has(&p, "silent for over 200 ms dropped"); i++)
		usleep(10000);
	T_ASSERT(nsp_log_has(&p, "silent for over 200 ms dropped"));
	/* It comes back with its next registration. */
	T_ASSERT_EQ(reg(&b, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);
	T_ASSERT_EQ(route(&c, "T0"), 0);
	nsc_close(&b);
	nsc_close(&c);
	finish(&p);
}

static void
test_close_drops_routes(void)
{
	struct ns_proc p;
	struct ns_client a;
	struct ns_client b;
	struct ns_client c;

	start(&p, NULL, NULL);
	connect_to(&p, &a);
	connect_to(&p, &b);
	connect_to(&p, &c);
	/* broker-x stays on a; broker-y moves from a to b before a closes. */
	T_ASSERT_EQ(reg(&a, "broker-x", "127.0.0.1:10911", "0", "X", 1, 1), 0);
	T_ASSERT_EQ(reg(&a, "broker-y", "127.0.0.1:10931", "0", "Y", 1, 1), 0);
	T_ASSERT_EQ(reg(&b, "broker-y", "127.0.0.1:10931", "0", "Y", 1, 1), 0);
	T_ASSERT_EQ(route(&c, "X0"), 0);
	nsc_close(&a);
	/* Close drops at once (no expiry here: the default is 120 s). */
	T_ASSERT(wait_route(&c, "X0", WIRE_RSP_TOPIC_NOT_EXIST));
	T_ASSERT_EQ(route(&c, "Y0"), 0);
	nsc_close(&b);
	T_ASSERT(wait_route(&c, "Y0", WIRE_RSP_TOPIC_NOT_EXIST));
	nsc_close(&c);
	finish(&p);
}

static void
test_idle_connection_closed(void)
{
	const char *args[] = {"--serverChannelMaxIdleTimeSeconds=1", NULL};
	struct ns_proc p;
	struct ns_client a;
	struct ns_client c;

	start(&p, NULL, args);
	connect_to(&p, &a);
	connect_to(&p, &c);
	T_ASSERT_EQ(reg(&a, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);
	/* a stays silent: the server closes it, which drops its broker; c keeps asking. */
	T_ASSERT(wait_route(&c, "T0", WIRE_RSP_TOPIC_NOT_EXIST));
	T_ASSERT(nsc_wait_closed(&a, WAIT_MS));
	nsc_close(&a);
	nsc_close(&c);
	finish(&p);
}

static void
test_two_namesrvs(void)
{
	struct ns_proc p1;
	struct ns_proc p2;
	struct ns_client c1;
	struct ns_client c2;

	start(&p1, NULL, NULL);
	start(&p2, NULL, NULL);
	T_ASSERT(p1.port != p2.port);
	connect_to(&p1, &c1);
	connect_to(&p2, &c2);
	/* A broker registers with every NameServer; they never talk to each other. */
	T_ASSERT_EQ(reg(&c1, "broker-a", "127.0.0.1:10911", "0", "T", 2, 1), 0);
	T_ASSERT_EQ(route(&c2, "T0"), WIRE_RSP_TOPIC_NOT_EXIST);
	T_ASSERT_EQ(reg(&c2, "broker-a", "127.0.0.1:10911", "0", "T", 2, 1), 0);
	T_ASSERT_EQ(route(&c1, "T1"), 0);
	T_ASSERT_EQ(route(&c2, "T1"), 0);
	nsc_close(&c1);
	T_ASSERT_EQ(nsp_stop(&p1), 0);
	/* The survivor still serves (its broker connection is open). */
	T_ASSERT_EQ(route(&c2, "T1"), 0);
	nsc_close(&c2);
	finish(&p1);
	finish(&p2);
}

static void
test_unknown_codes(void)
{
	const char *t[] = {"topic", "T0", NULL};
	struct ns_proc p;
	struct ns_client c;
	int op;

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	/* UPDATE_NAMESRV_CONFIG changes only logLevel: never a port, a path or an address. */
	T_ASSERT_EQ(nsc_call(&c, 318, NULL, "listenPort=1", 12), WIRE_RSP_NO_PERMISSION);
	T_ASSERT(c.rsp.remark != NULL &&
		 strstr(c.rsp.remark, "listenPort cannot be changed") != NULL);
	T_ASSERT_EQ(nsc_call(&c, 318, NULL, "kvConfigPath=/tmp/x", 19), WIRE_RSP_NO_PERMISSION);
	T_ASSERT_EQ(nsc_call(&c, 318, NULL, "logLevel=loud", 13), WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(nsc_call(&c, 318, NULL, "logLevel=debug", 14), WIRE_RSP_SUCCESS);
	T_ASSERT_EQ(nsc_call(&c, 319, NULL, NULL, 0), WIRE_RSP_SUCCESS);
	T_ASSERT(c.rsp.body_len > 0 &&
		 memmem(c.rsp.body, c.rsp.body_len, "logLevel=debug\n", 15) != NULL);
	T_ASSERT_EQ(nsc_call(&c, 9999, NULL, NULL, 0), WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED);
	T_ASSERT_EQ(nsc_call(&c, -5, NULL, NULL, 0), WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED);
	/* Oneway and response frames get no answer; the next request does. */
	T_ASSERT(nsc_send(&c, 9999, WIRE_REM_FLAG_ONEWAY, WIRE_REM_JSON, NULL, NULL, 0) > 0);
	T_ASSERT(nsc_send(&c, 0, WIRE_REM_FLAG_RESPONSE, WIRE_REM_JSON, NULL, NULL, 0) > 0);
	op = nsc_send(&c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, 0, WIRE_REM_JSON, t, NULL, 0);
	T_ASSERT_EQ(nsc_recv(&c, WAIT_MS), 0);
	T_ASSERT_EQ(c.rsp.opaque, op);
	T_ASSERT_EQ(c.rsp.code, WIRE_RSP_TOPIC_NOT_EXIST);
	/* The ROCKETMQ binary header is answered in kind. */
	op = nsc_send(&c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, 0, WIRE_REM_ROCKETMQ, t, NULL, 0);
	T_ASSERT_EQ(nsc_recv(&c, WAIT_MS), 0);
	T_ASSERT_EQ(c.rsp.opaque, op);
	T_ASSERT_EQ(c.rsp.serialize, WIRE_REM_ROCKETMQ);
	T_ASSERT_EQ(c.rsp.code, WIRE_RSP_TOPIC_NOT_EXIST);
	nsc_close(&c);
	finish(&p);
}

static void
expect_closed_by(const struct ns_proc *p, struct ns_client *good, const void *bytes, size_t n)
{
	struct ns_client c;

	connect_to(p, &c);
	T_ASSERT_EQ(nsc_send_raw(&c, bytes, n), 0);
	T_ASSERT(nsc_wait_closed(&c, WAIT_MS));
	nsc_close(&c);
	/* Only that connection: the server and other clients carry on. */
	T_ASSERT_EQ(route(good, "T0"), 0);
}

static void
test_malformed_frames(void)
{
	const char *args[] = {"--frameMaxLength=65536", NULL};
	static const uint8_t short_len[] = {0, 0, 0, 2, 0, 0};
	static const uint8_t too_big[] = {0, 0x10, 0, 0, 0, 0, 0, 10};
	static const uint8_t hdr_over[] = {0, 0, 0, 8, 0, 0, 0, 200, 'x', 'x', 'x', 'x'};
	static const uint8_t bad_json[] = {0,	0,   0,	  13,  0,   0,	 0,   9,  '{',
					   'n', 'o', 't', ' ', 'j', 's', 'o', 'n'};
	static const uint8_t bad_type[] = {0, 0, 0, 6, 7, 0, 0, 2, '{', '}'};
	static const uint8_t array_hdr[] = {0, 0, 0, 6, 0, 0, 0, 2, '[', ']'};
	static const uint8_t bin_short[] = {0, 0, 0, 8, 1, 0, 0, 4, 0, 1, 2, 3};
	const char *bad_reg[] = {"brokerAddr", "127.0.0.1:1", NULL};
	const char *reg_ext[] = {"brokerName",	"broker-z", "brokerAddr", "127.0.0.1:10999",
				 "clusterName", "C",	    "brokerId",	  "0",
				 "bodyCrc32",	"12345",    NULL};
	struct ns_proc p;
	struct ns_client good;
	struct ns_client c;

	start(&p, NULL, args);
	connect_to(&p, &good);
	T_ASSERT_EQ(reg(&good, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);

	expect_closed_by(&p, &good, short_len, sizeof(short_len));
	expect_closed_by(&p, &good, too_big, sizeof(too_big));
	expect_closed_by(&p, &good, hdr_over, sizeof(hdr_over));
	expect_closed_by(&p, &good, bad_json, sizeof(bad_json));
	expect_closed_by(&p, &good, bad_type, sizeof(bad_type));
	expect_closed_by(&p, &good, array_hdr, sizeof(array_hdr));
	expect_closed_by(&p, &good, bin_short, sizeof(bin_short));

	/* A peer that dies mid-frame. */
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_send_raw(&c, too_big, 6), 0);
	nsc_close(&c);
	T_ASSERT_EQ(route(&good, "T0"), 0);

	/* Decodable but wrong: an error response, and the connection stays. */
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_REGISTER_BROKER, bad_reg, NULL, 0),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_REGISTER_BROKER, reg_ext, "{}", 2),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT(strstr(c.rsp.remark, "crc32") != NULL);
	reg_ext[8] = NULL;
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_REGISTER_BROKER, reg_ext, "{\"a\":", 5),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, NULL, NULL, 0),
		    WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(route(&c, "T0"), 0);
	nsc_close(&c);
	nsc_close(&good);
	finish(&p);
}

/* The zlib form of a registration (docs/rocketmq-protocol.md §3.1). */
static uint8_t *
compressed_body(const char *prefix, uint32_t n, int64_t counter, size_t *out_len)
{
	size_t cap = 64 + (size_t)n * 64;
	uint8_t *raw = malloc(cap);
	uint8_t *z;
	uLongf zlen;
	size_t o = 0;
	char tmp[128];
	int len;

#define PUT32(v)                                                                                   \
	do {                                                                                       \
		uint32_t v_ = (uint32_t)(v);                                                       \
		raw[o++] = (uint8_t)(v_ >> 24);                                                    \
		raw[o++] = (uint8_t)(v_ >> 16);                                                    \
		raw[o++] = (uint8_t)(v_ >> 8);                                                     \
		raw[o++] = (uint8_t)v_;                                                            \
	} while (0)
	T_ASSERT(raw != NULL);
	len = snprintf(tmp, sizeof(tmp), "{\"counter\":%" PRId64 ",\"timestamp\":1}", counter);
	PUT32(len);
	memcpy(raw + o, tmp, (size_t)len);
	o += (size_t)len;
	PUT32(n);
	for (uint32_t i = 0; i < n; i++) {
		len = snprintf(tmp, sizeof(tmp), "%s%u 8 8 6 SINGLE_TAG", prefix, i);
		PUT32(len);
		memcpy(raw + o, tmp, (size_t)len);
		o += (size_t)len;
	}
	PUT32(2);
	memcpy(raw + o, "[]", 2);
	o += 2;
#undef PUT32
	zlen = compressBound(o);
	z = malloc(zlen);
	T_ASSERT(z != NULL);
	T_ASSERT_EQ(compress2(z, &zlen, raw, o, 9), Z_OK);
	free(raw);
	*out_len = zlen;
	return z;
}

static void
test_100k_topics(void)
{
	const char *zext[] = {"brokerName",  "broker-z",       "brokerAddr", "127.0.0.1:10951",
			      "clusterName", "DefaultCluster", "brokerId",   "0",
			      "compressed",  "true",	       "bodyCrc32",  NULL,
			      NULL};
	struct ns_proc p;
	struct ns_client c;
	struct json_object *o;
	size_t zlen;
	uint8_t *z;
	char crc[16];

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	/* One frame of about 15 MB: RocketMQ's 16 MiB limit breaks at 60-70k topics. */
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "Topic", 100000, 1), 0);
	T_ASSERT_EQ(route(&c, "Topic99999"), 0);
	T_ASSERT_EQ(route(&c, "Topic0"), 0);
	/* Heartbeats with the same version keep it registered. */
	for (int i = 0; i < 3; i++)
		T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "Topic", 100000, 1), 0);
	T_ASSERT_EQ(route(&c, "Topic54321"), 0);

	z = compressed_body("Zip", 100000, 7, &zlen);
	snprintf(crc, sizeof(crc), "%u", crc32_body(z, zlen));
	zext[11] = crc;
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_REGISTER_BROKER, zext, z, zlen), 0);
	free(z);
	T_ASSERT_EQ(route(&c, "Zip99999"), 0);
	o = body_json(&c);
	T_ASSERT_EQ(jint(o, "queueDatas.0.readQueueNums"), 8);
	json_object_put(o);

	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER, NULL, NULL, 0), 0);
	o = body_json(&c);
	T_ASSERT_EQ(json_object_array_length(jget(o, "topicList")), 200000);
	json_object_put(o);
	T_ASSERT_EQ(route(&c, "Topic99999"), 0);
	nsc_close(&c);
	finish(&p);
}

/* Peak resident memory of @pid (VmHWM), in KiB; -1 if unknown. */
static long
peak_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/*
 * A zip bomb: one compressed REGISTER_BROKER body of 256 KiB that inflates to
 * 256 MiB (a topic line of zeros). Refused once it passes 64 times its size,
 * with the key named; the NameServer never held the inflated bytes, and a
 * real registration still works.
 */
static void
test_zip_bomb(void)
{
	const char *zext[] = {"brokerName",  "broker-z",       "brokerAddr", "127.0.0.1:10951",
			      "clusterName", "DefaultCluster", "brokerId",   "0",
			      "compressed",  "true",	       NULL};
	const size_t big = (size_t)256 << 20;
	static const char dv[] = "{\"counter\":1,\"timestamp\":1}";
	uint8_t *raw = calloc(1, big + 64), *z;
	uLongf zlen = compressBound(big + 64);
	struct ns_proc p;
	struct ns_client c;
	size_t o = 0;
	long before, after;

	T_ASSERT(raw != NULL);
	raw[o + 3] = (uint8_t)(sizeof(dv) - 1);
	o += 4;
	memcpy(raw + o, dv, sizeof(dv) - 1);
	o += sizeof(dv) - 1;
	raw[o + 3] = 1; /* one topic line ... */
	o += 4;
	raw[o] = (uint8_t)((big - 64) >> 24); /* ... of 256 MiB - 64 bytes of zeros */
	raw[o + 1] = (uint8_t)((big - 64) >> 16);
	o += 4 + big - 64;
	z = malloc(zlen);
	T_ASSERT(z != NULL);
	T_ASSERT_EQ(compress2(z, &zlen, raw, o, 9), Z_OK);
	free(raw);
	T_ASSERT(zlen < big / 512);

	start(&p, NULL, NULL);
	connect_to(&p, &c);
	before = peak_rss_kib(p.pid);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_REGISTER_BROKER, zext, z, zlen), WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT(c.rsp.remark != NULL && strstr(c.rsp.remark, "maxInflatedBodySize") != NULL);
	after = peak_rss_kib(p.pid);
	/* 64 x 256 KiB is the most it may inflate: far below the bomb's 256 MiB */
	T_ASSERT(before > 0 && after > 0);
	T_ASSERT(after - before < 64 * 1024);
	free(z);
	T_ASSERT_EQ(route(&c, "Zip0"), WIRE_RSP_TOPIC_NOT_EXIST);
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);
	T_ASSERT_EQ(route(&c, "T0"), 0);
	nsc_close(&c);
	finish(&p);
}

/* A whole REGISTER_BROKER frame of @n topics, to send in pieces. Return: malloc'd. */
static uint8_t *
reg_frame(const char *bname, const char *addr, const char *prefix, uint32_t n, size_t *out_len)
{
	struct wire_rem_cmd cmd = {.code = WIRE_REQ_REGISTER_BROKER,
				   .opaque = 1,
				   .version = WIRE_REM_VERSION_V4_9_8,
				   .language = WIRE_LANG_JAVA,
				   .serialize = WIRE_REM_JSON};
	size_t blen;
	char *body = nsc_register_body(prefix, n, 1700000000000, 1, &blen);
	uint8_t *f = malloc(4096 + blen);
	size_t hlen;

	T_ASSERT(body != NULL && f != NULL);
	cmd.body_len = (uint32_t)blen;
	T_ASSERT_EQ(wire_rem_ext_add(&cmd, "brokerName", bname), 0);
	T_ASSERT_EQ(wire_rem_ext_add(&cmd, "brokerAddr", addr), 0);
	T_ASSERT_EQ(wire_rem_ext_add(&cmd, "clusterName", "DefaultCluster"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(&cmd, "brokerId", "0"), 0);
	T_ASSERT_EQ(wire_rem_encode_header(&cmd, f, 4096, &hlen), 0);
	memcpy(f + hlen, body, blen);
	free(body);
	*out_len = hlen + blen;
	return f;
}

/*
 * Frames of 256 KiB and more are received off the io thread (ns_server.c):
 * lookups are answered while one arrives slowly, and a peer that stalls or
 * dies in the middle of one loses only its own connection.
 */
static void
test_large_frames(void)
{
	const char *args[] = {"--serverChannelMaxIdleTimeSeconds=2", NULL};
	struct ns_proc p;
	struct ns_client good;
	struct ns_client slow;
	struct ns_client c;
	size_t flen;
	uint8_t *f = reg_frame("broker-b", "127.0.0.1:10921", "Big", 5000, &flen);

	T_ASSERT(flen > 512 * 1024);
	start(&p, NULL, args);
	connect_to(&p, &good);
	connect_to(&p, &slow);
	T_ASSERT_EQ(reg(&good, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);

	/* In 8 pieces, with lookups on another connection between them. */
	for (size_t k = 0; k < 8; k++) {
		size_t from = flen * k / 8;

		T_ASSERT_EQ(nsc_send_raw(&slow, f + from, flen * (k + 1) / 8 - from), 0);
		usleep(50 * 1000);
		T_ASSERT_EQ(route(&good, "T0"), 0);
	}
	T_ASSERT_EQ(nsc_recv(&slow, WAIT_MS), 0);
	T_ASSERT_EQ(slow.rsp.code, 0);
	T_ASSERT_EQ(route(&good, "Big4999"), 0);
	/* The same connection goes on with small requests after a large one. */
	T_ASSERT_EQ(route(&slow, "Big0"), 0);

	/* A peer that dies in the middle: only its connection goes. */
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_send_raw(&c, f, flen / 2), 0);
	usleep(100 * 1000);
	nsc_close(&c);
	T_ASSERT_EQ(route(&good, "Big1"), 0);

	/* A peer that stops in the middle is closed as idle; the others go on. */
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_send_raw(&c, f, flen / 2), 0);
	T_ASSERT_EQ(route(&good, "T0"), 0);
	T_ASSERT(nsc_wait_closed(&c, WAIT_MS));
	nsc_close(&c);
	T_ASSERT(nsp_log_has(&p, "idle in the middle of a frame"));
	nsc_close(&good);
	nsc_close(&slow);
	connect_to(&p, &good);
	T_ASSERT_EQ(route(&good, "NoSuchTopic"), WIRE_RSP_TOPIC_NOT_EXIST);
	nsc_close(&good);
	free(f);
	finish(&p);
}

static void
test_kv_config(void)
{
	const char *put1[] = {"namespace", "ORDER_TOPIC_CONFIG", "key", "T0",
			      "value",	   "broker-a:4",	 NULL};
	const char *put2[] = {"namespace", "ops", "key", "note", "value", "h\u00e9llo \"q\"", NULL};
	const char *get1[] = {"namespace", "ORDER_TOPIC_CONFIG", "key", "T0", NULL};
	const char *get2[] = {"namespace", "ops", "key", "note", NULL};
	const char *bad[] = {"namespace", "ops", "key", "", "value", "x", NULL};
	const char *args[] = {"--orderMessageEnable=true", NULL};
	struct ns_proc p;
	struct ns_client c;
	struct json_object *o;
	char path[160];
	struct stat sb;

	start(&p, NULL, args);
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_PUT_KV_CONFIG, put1, NULL, 0), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_PUT_KV_CONFIG, put2, NULL, 0), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_PUT_KV_CONFIG, bad, NULL, 0), WIRE_RSP_SYSTEM_ERROR);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_KV_CONFIG, get2, NULL, 0), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "value"), "h\u00e9llo \"q\"");

	/* orderTopicConf rides in the route; the register response carries the namespace. */
	T_ASSERT_EQ(reg(&c, "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);
	o = body_json(&c);
	T_ASSERT_STREQ(jstr(o, "table.T0"), "broker-a:4");
	json_object_put(o);
	T_ASSERT_EQ(route(&c, "T0"), 0);
	o = body_json(&c);
	T_ASSERT_STREQ(jstr(o, "orderTopicConf"), "broker-a:4");
	json_object_put(o);

	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_DELETE_KV_CONFIG, get1, NULL, 0), 0);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_KV_CONFIG, get1, NULL, 0), WIRE_RSP_QUERY_NOT_FOUND);
	nsc_close(&c);
	T_ASSERT_EQ(nsp_stop(&p), 0);

	/* Persisted in the data dir, no temp file left; a restart reads it back. */
	snprintf(path, sizeof(path), "%s/data/kvConfig.json", p.dir);
	T_ASSERT_EQ(stat(path, &sb), 0);
	snprintf(path, sizeof(path), "%s/data/kvConfig.json.tmp", p.dir);
	T_ASSERT(stat(path, &sb) != 0);
	{
		char dir[64];

		snprintf(dir, sizeof(dir), "%s", p.dir);
		start(&p, dir, NULL);
	}
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_KV_CONFIG, get2, NULL, 0), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "value"), "h\u00e9llo \"q\"");
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_KV_CONFIG, get1, NULL, 0), WIRE_RSP_QUERY_NOT_FOUND);
	nsc_close(&c);
	finish(&p);
}

static void
test_kv_file_checked_at_start(void)
{
	const char *get[] = {"namespace", "b", "key", "k2", NULL};
	struct ns_proc p;
	struct ns_client c;
	char path[160];
	char dir[64];
	FILE *f;

	/* A file written by hand (or by RocketMQ) with two namespaces loads. */
	snprintf(dir, sizeof(dir), "/tmp/sp-ns-XXXXXX");
	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/data", dir);
	T_ASSERT_EQ(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/data/kvConfig.json", dir);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fputs("{\"configTable\":{\"b\":{\"k2\":\"v2\",\"k1\":\"v1\"},\"a\":{\"k\":\"v\"}}}", f);
	fclose(f);
	start(&p, dir, NULL);
	connect_to(&p, &c);
	T_ASSERT_EQ(nsc_call(&c, WIRE_REQ_GET_KV_CONFIG, get, NULL, 0), 0);
	T_ASSERT_STREQ(nsc_ext(&c, "value"), "v2");
	nsc_close(&c);
	T_ASSERT_EQ(nsp_stop(&p), 0);
	/* A damaged file stops the start instead of losing the config. */
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fputs("{\"configTable\":{\"b\":{\"k\":1}}}", f);
	fclose(f);
	T_ASSERT(nsp_start(BIN, dir, NULL, &p) != 0);
	T_ASSERT(nsp_log_has(&p, "loading kv config"));
	snprintf(p.dir, sizeof(p.dir), "%s", dir);
	nsp_cleanup(&p);
}

static void
test_many_connections(void)
{
	enum { N = 200 };
	struct ns_client *cs = calloc(N, sizeof(*cs));
	const char *t[] = {"topic", "T0", NULL};
	struct ns_proc p;

	T_ASSERT(cs != NULL);
	start(&p, NULL, NULL);
	for (int i = 0; i < N; i++)
		connect_to(&p, &cs[i]);
	T_ASSERT_EQ(reg(&cs[0], "broker-a", "127.0.0.1:10911", "0", "T", 1, 1), 0);
	/* All requests in flight at once, then all answers. */
	for (int i = 0; i < N; i++)
		T_ASSERT(nsc_send(&cs[i], WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, 0, WIRE_REM_JSON, t,
				  NULL, 0) > 0);
	for (int i = 0; i < N; i++) {
		T_ASSERT_EQ(nsc_recv(&cs[i], WAIT_MS), 0);
		T_ASSERT_EQ(cs[i].rsp.code, 0);
	}
	for (int i = 0; i < N; i++)
		nsc_close(&cs[i]);
	free(cs);
	finish(&p);
}

T_MAIN(T_CASE(test_register_and_route), T_CASE(test_slave_and_unregister),
       T_CASE(test_data_version), T_CASE(test_wipe_write_perm), T_CASE(test_expiry_after_silence),
       T_CASE(test_close_drops_routes), T_CASE(test_idle_connection_closed),
       T_CASE(test_two_namesrvs), T_CASE(test_unknown_codes), T_CASE(test_malformed_frames),
       T_CASE(test_100k_topics), T_CASE(test_kv_config), T_CASE(test_kv_file_checked_at_start),
       T_CASE(test_many_connections), T_CASE(test_large_frames), T_CASE(test_zip_bomb))
