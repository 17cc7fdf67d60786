// SPDX-License-Identifier: Apache-2.0
/*
 * test_etcd.c - the etcd client's decoders (control/etcd.c) on answers as
 * etcd 3.4's HTTP/JSON gateway writes them (copied from a real etcd), and
 * the client against a listener that is not etcd. The client against a real
 * etcd runs in tests/integration/failover.py.
 */
#include <errno.h>
#include <string.h>

#include "control/etcd.h"
#include "harness.h"

static void
test_http_body(void)
{
	char *body;
	size_t bl;
	char plain[] = "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
		       "\r\n{}";

	T_ASSERT_EQ(ctl_etcd_http_body(plain, strlen(plain), &body, &bl), 0);
	T_ASSERT_EQ(bl, 2);
	T_ASSERT_MEMEQ(body, "{}", 2);
	char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			 "3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
	T_ASSERT_EQ(ctl_etcd_http_body(chunked, strlen(chunked), &body, &bl), 0);
	T_ASSERT_EQ(bl, 7);
	T_ASSERT_MEMEQ(body, "{\"a\":1}", 7);
	char bad[] = "HTTP/1.1 404 Not Found\r\n\r\n{}";
	T_ASSERT_EQ(ctl_etcd_http_body(bad, strlen(bad), &body, &bl), -EPROTO);
	char cut[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nabc";
	T_ASSERT_EQ(ctl_etcd_http_body(cut, strlen(cut), &body, &bl), -EPROTO);
	char nohead[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n{}";
	T_ASSERT_EQ(ctl_etcd_http_body(nohead, strlen(nohead), &body, &bl), -EPROTO);
}

static void
test_answers(void)
{
	static const char grant[] =
		"{\"header\":{\"cluster_id\":\"324952591200643719\",\"member_id\":"
		"\"3319814642761637952\",\"revision\":\"1\",\"raft_term\":\"2\"},\"ID\":"
		"\"2324035854690392581\",\"TTL\":\"3\"}";
	static const char alive[] = "{\"result\":{\"header\":{\"revision\":\"1\"},\"ID\":"
				    "\"2324035854690392583\",\"TTL\":\"3\"}}";
	static const char expired[] =
		"{\"result\":{\"header\":{\"revision\":\"3\"},\"ID\":\"2324035854690392583\"}}";
	static const char range[] =
		"{\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"aw==\",\"create_revision\":"
		"\"2\",\"mod_revision\":\"5\",\"version\":\"1\",\"value\":\"dg==\",\"lease\":"
		"\"2324035854690392583\"},{\"key\":\"aw==\",\"create_revision\":\"3\","
		"\"mod_revision\":\"3\",\"version\":\"1\"}],\"count\":\"2\"}";
	static const char empty[] = "{\"header\":{\"revision\":\"3\"}}";
	static const char txn_ok[] = "{\"header\":{\"revision\":\"2\"},\"succeeded\":true,"
				     "\"responses\":[{\"response_put\":{\"header\":{}}}]}";
	struct ctl_etcd_kv kv[2];
	int64_t v = 0;
	size_t n = 0;
	bool ok = true;

	T_ASSERT_EQ(ctl_etcd_parse_grant(grant, strlen(grant), &v), 0);
	T_ASSERT(v == 2324035854690392581LL);
	T_ASSERT_EQ(ctl_etcd_parse_grant(empty, strlen(empty), &v), -EPROTO);
	T_ASSERT_EQ(ctl_etcd_parse_keepalive(alive, strlen(alive), &v), 0);
	T_ASSERT(v == 3);
	T_ASSERT_EQ(ctl_etcd_parse_keepalive(expired, strlen(expired), &v), 0);
	T_ASSERT(v == 0);
	T_ASSERT_EQ(ctl_etcd_parse_keepalive(empty, strlen(empty), &v), -EPROTO);
	T_ASSERT_EQ(ctl_etcd_parse_range(range, strlen(range), kv, 2, &n), 0);
	T_ASSERT_EQ(n, 2);
	T_ASSERT_STREQ(kv[0].key, "k");
	T_ASSERT_STREQ(kv[0].value, "v");
	T_ASSERT(kv[0].mod_rev == 5 && kv[0].create_rev == 2 &&
		 kv[0].lease == 2324035854690392583LL);
	T_ASSERT_STREQ(kv[1].value, "");
	T_ASSERT(kv[1].lease == 0);
	/* room for one: one */
	T_ASSERT_EQ(ctl_etcd_parse_range(range, strlen(range), kv, 1, &n), 0);
	T_ASSERT_EQ(n, 1);
	T_ASSERT_EQ(ctl_etcd_parse_range(empty, strlen(empty), kv, 2, &n), 0);
	T_ASSERT_EQ(n, 0);
	T_ASSERT_EQ(ctl_etcd_parse_range("{\"kvs\":[{\"key\":\"%%\"}]}", 20, kv, 2, &n), -EPROTO);
	T_ASSERT_EQ(ctl_etcd_parse_range("[1]", 3, kv, 2, &n), -EPROTO);
	T_ASSERT_EQ(ctl_etcd_parse_txn(txn_ok, strlen(txn_ok), &ok), 0);
	T_ASSERT(ok);
	/* proto3 leaves a false "succeeded" out */
	T_ASSERT_EQ(ctl_etcd_parse_txn(empty, strlen(empty), &ok), 0);
	T_ASSERT(!ok);
	T_ASSERT_EQ(ctl_etcd_parse_txn("{", 1, &ok), -EPROTO);
}

static void
test_endpoints(void)
{
	struct ctl_etcd *e = NULL;
	int64_t lease = 0;

	T_ASSERT_EQ(ctl_etcd_open("", 100, &e), -EINVAL);
	T_ASSERT_EQ(ctl_etcd_open("nohost", 100, &e), -EINVAL);
	T_ASSERT_EQ(ctl_etcd_open("h:p0rt", 100, &e), -EINVAL);
	T_ASSERT_EQ(ctl_etcd_open("http://127.0.0.1:1;127.0.0.1:2", 200, &e), 0);
	T_ASSERT_STREQ(ctl_etcd_endpoint(e), "127.0.0.1:1");
	/* nobody listens there: an error, within the timeout, never a hang */
	T_ASSERT(ctl_etcd_grant(e, 3, &lease) < 0);
	ctl_etcd_close(e);
}

T_MAIN(T_CASE(test_http_body), T_CASE(test_answers), T_CASE(test_endpoints))
