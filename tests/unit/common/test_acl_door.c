// SPDX-License-Identifier: Apache-2.0
/*
 * test_acl_door.c - the permission table of every door (common/acl_door.c):
 * each table sorted and without duplicates (the lookups bisect), a code with
 * no row is not answered, the classes the security model promises (route
 * reads open, route changes admin, lookups by id checked per record,
 * END_TRANSACTION PUB on the record), HTTP paths and the console's pattern;
 * acl_allowed() on %RETRY%g and %DLQ%g named as topics and as groups; and
 * HTTP Basic's parser (control/httpd_auth.c).
 */
#include <string.h>

#include "common/acl.h"
#include "common/acl_door.h"
#include "control/httpd.h"
#include "harness.h"
#include "wire/dp.h"
#include "wire/remoting.h"

static void
test_sorted_unique(void)
{
	for (unsigned t = 0; t < ACL_DOOR_T_HTTP_BROKER; t++) {
		size_t n;
		const struct acl_door *d = acl_door_table(t, &n);

		T_ASSERT(n > 0);
		for (size_t i = 1; i < n; i++)
			if (d[i - 1].code >= d[i].code)
				T_FAIL("table %u: %s (%d) before %s (%d)", t, d[i - 1].name,
				       d[i - 1].code, d[i].name, d[i].code);
		for (size_t i = 0; i < n; i++) {
			const struct acl_door *f =
				t == ACL_DOOR_T_BROKER	  ? acl_door_broker(d[i].code)
				: t == ACL_DOOR_T_NAMESRV ? acl_door_namesrv(d[i].code)
							  : acl_door_dataplane(d[i].code);

			T_ASSERT(f == &d[i]);
			T_ASSERT(d[i].cls <= ACL_DOOR_ADMIN);
		}
	}
}

static void
test_classes(void)
{
	T_ASSERT(acl_door_broker(999999) == NULL);
	T_ASSERT(acl_door_broker(WIRE_REQ_REGISTER_BROKER) == NULL); /* a NameServer's code */
	T_ASSERT(acl_door_namesrv(WIRE_REQ_SEND_MESSAGE) == NULL);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_SEND_MESSAGE_V2)->cls, ACL_DOOR_TOPIC_PUB);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_VIEW_MESSAGE_BY_ID)->flags & ACL_DOOR_RECORDS,
		    ACL_DOOR_RECORDS);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_QUERY_MESSAGE)->flags & ACL_DOOR_RECORDS,
		    ACL_DOOR_RECORDS);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_END_TRANSACTION)->cls, ACL_DOOR_TOPIC_PUB);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_GET_MAX_OFFSET)->cls, ACL_DOOR_TOPIC_SUB);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_GET_ALL_TOPIC_CONFIG)->cls, ACL_DOOR_ADMIN);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_GET_ALL_TOPIC_CONFIG)->flags & ACL_DOOR_ADDRS, 0);
	T_ASSERT_EQ(acl_door_broker(WIRE_REQ_DELETE_TOPIC_IN_BROKER)->flags & ACL_DOOR_ADDRS,
		    ACL_DOOR_ADDRS);
	T_ASSERT_EQ(acl_door_namesrv(WIRE_REQ_GET_ROUTEINFO_BY_TOPIC)->cls, ACL_DOOR_OPEN);
	T_ASSERT_EQ(acl_door_namesrv(WIRE_REQ_REGISTER_BROKER)->cls, ACL_DOOR_ADMIN);
	T_ASSERT_EQ(acl_door_namesrv(WIRE_REQ_REGISTER_BROKER)->flags & ACL_DOOR_WRITE,
		    ACL_DOOR_WRITE);
	T_ASSERT_EQ(acl_door_dataplane(WIRE_DP_OP_SEARCH_OFFSET)->cls, ACL_DOOR_TOPIC_SUB);
	T_ASSERT_EQ(acl_door_dataplane(WIRE_DP_OP_REPL)->cls, ACL_DOOR_ADMIN);
	T_ASSERT(acl_door_dataplane(WIRE_DP_OP_CONNECT) == NULL); /* the ACL's own handshake */
	T_ASSERT_STREQ(acl_door_class_name(ACL_DOOR_TOPIC_SUB), "topic SUB");
}

static void
test_http(void)
{
	T_ASSERT_EQ(acl_door_http(false, "/metrics")->cls, ACL_DOOR_OPEN);
	T_ASSERT_EQ(acl_door_http(false, "/health")->cls, ACL_DOOR_OPEN);
	T_ASSERT_EQ(acl_door_http(false, "/api/message")->cls, ACL_DOOR_TOPIC_SUB);
	T_ASSERT_EQ(acl_door_http(false, "/api/topics")->cls, ACL_DOOR_SIGNED);
	/* the console: every other path, never open */
	T_ASSERT_EQ(acl_door_http(false, "/")->cls, ACL_DOOR_SIGNED);
	T_ASSERT_EQ(acl_door_http(false, "/console.js")->cls, ACL_DOOR_SIGNED);
	T_ASSERT_EQ(acl_door_http(false, "/metricsX")->cls, ACL_DOOR_SIGNED);
	T_ASSERT_EQ(acl_door_http(true, "/api/cluster")->cls, ACL_DOOR_SIGNED);
	T_ASSERT_EQ(acl_door_http(true, "/metrics")->cls, ACL_DOOR_OPEN);
	T_ASSERT(acl_door_http(true, "") == NULL);
}

static const char file[] = "accounts:\n"
			   "  - accessKey: appuser1\n"
			   "    secretKey: appsecret1\n"
			   "    defaultTopicPerm: PUB|SUB\n"
			   "    defaultGroupPerm: SUB\n"
			   "    topicPerms: [\"%DLQ%GroupZ=DENY\"]\n"
			   "    groupPerms: [GroupX=DENY]\n";

static void
test_group_topics(void)
{
	struct acl *a = NULL;
	char why[256];
	const struct acl_account *acc;

	T_ASSERT_EQ(acl_parse(file, strlen(file), &a, why, sizeof(why)), 0);
	acc = acl_find(a, "appuser1", 8);
	T_ASSERT(acc != NULL);
	/* a retry or dead-letter topic is its group, named as a topic or as a group */
	T_ASSERT(!acl_allowed(acc, "%RETRY%GroupX", 13, false, ACL_SUB));
	T_ASSERT(!acl_allowed(acc, "%RETRY%GroupX", 13, true, ACL_SUB));
	T_ASSERT(!acl_allowed(acc, "%DLQ%GroupX", 11, false, ACL_SUB));
	T_ASSERT(!acl_allowed(acc, "%DLQ%GroupX", 11, true, ACL_SUB));
	T_ASSERT(acl_allowed(acc, "%RETRY%GroupY", 13, true, ACL_SUB));
	T_ASSERT(acl_allowed(acc, "%DLQ%GroupY", 11, false, ACL_SUB));
	T_ASSERT(acl_allowed(acc, "TopicA", 6, false, ACL_PUB));
	/* a dead-letter topic keeps its own name's permission too */
	T_ASSERT(!acl_allowed(acc, "%DLQ%GroupZ", 11, false, ACL_SUB));
	T_ASSERT(acl_allowed(acc, "%RETRY%GroupZ", 13, false, ACL_SUB));
	acl_free(a);
}

static void
test_basic_parse(void)
{
	char ak[ACL_KEY_MAX + 1], sk[ACL_KEY_MAX + 1];

	/* "appuser1:appsecret1" */
	T_ASSERT_EQ(httpd_basic_parse("Basic YXBwdXNlcjE6YXBwc2VjcmV0MQ==", ak, sizeof(ak), sk,
				      sizeof(sk)),
		    0);
	T_ASSERT_STREQ(ak, "appuser1");
	T_ASSERT_STREQ(sk, "appsecret1");
	/* a secret with a colon keeps it ("a:b:c" -> a / b:c) */
	T_ASSERT_EQ(httpd_basic_parse("basic  YTpiOmM=", ak, sizeof(ak), sk, sizeof(sk)), 0);
	T_ASSERT_STREQ(ak, "a");
	T_ASSERT_STREQ(sk, "b:c");
	T_ASSERT_EQ(httpd_basic_parse("Bearer x", ak, sizeof(ak), sk, sizeof(sk)), -1);
	T_ASSERT_EQ(httpd_basic_parse("Basic !!!!", ak, sizeof(ak), sk, sizeof(sk)), -1);
	T_ASSERT_EQ(httpd_basic_parse("Basic bm9jb2xvbg==", ak, sizeof(ak), sk, sizeof(sk)),
		    -1); /* "nocolon" */
	T_ASSERT_EQ(httpd_basic_parse("Basic OnNlY3JldA==", ak, sizeof(ak), sk, sizeof(sk)),
		    -1); /* ":secret": no key */
	T_ASSERT_EQ(httpd_basic_parse("Basic YQBiOmM=", ak, sizeof(ak), sk, sizeof(sk)),
		    -1); /* a NUL inside */
	T_ASSERT_EQ(httpd_basic_parse("Basic YTpi=x", ak, sizeof(ak), sk, sizeof(sk)), -1);
	T_ASSERT_EQ(httpd_basic_parse(NULL, ak, sizeof(ak), sk, sizeof(sk)), -1);
	{
		char big[2048] = "Basic ";

		memset(big + 6, 'Q', sizeof(big) - 7);
		big[sizeof(big) - 1] = '\0';
		T_ASSERT_EQ(httpd_basic_parse(big, ak, sizeof(ak), sk, sizeof(sk)), -1);
	}
}

T_MAIN(T_CASE(test_sorted_unique), T_CASE(test_classes), T_CASE(test_http),
       T_CASE(test_group_topics), T_CASE(test_basic_parse))
