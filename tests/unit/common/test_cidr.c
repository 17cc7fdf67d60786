// SPDX-License-Identifier: Apache-2.0
/*
 * test_cidr.c - address lists (adminAllowedAddrs): addresses, networks, "*",
 * blanks, and every malformed item refused with its name.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/cidr.h"
#include "harness.h"

static uint32_t
ip(const char *s)
{
	struct in_addr a;

	T_ASSERT_EQ(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static void
test_lists(void)
{
	struct cidr_list l;
	char why[128];

	T_ASSERT_EQ(cidr_list_parse("127.0.0.1", &l, why, sizeof(why)), 0);
	T_ASSERT(cidr_list_has(&l, ip("127.0.0.1")));
	T_ASSERT(!cidr_list_has(&l, ip("127.0.0.2")));
	T_ASSERT_EQ(cidr_list_parse(" 10.0.0.0/8 , 192.168.1.7,127.0.0.0/8 ", &l, why, sizeof(why)),
		    0);
	T_ASSERT_EQ(l.n, 3);
	T_ASSERT(cidr_list_has(&l, ip("10.200.3.4")));
	T_ASSERT(cidr_list_has(&l, ip("192.168.1.7")));
	T_ASSERT(!cidr_list_has(&l, ip("192.168.1.8")));
	T_ASSERT(cidr_list_has(&l, ip("127.9.9.9")));
	T_ASSERT(!cidr_list_has(&l, ip("11.0.0.1")));
	T_ASSERT_EQ(cidr_list_parse("", &l, why, sizeof(why)), 0);
	T_ASSERT(!cidr_list_has(&l, ip("127.0.0.1")));
	T_ASSERT_EQ(cidr_list_parse("*", &l, why, sizeof(why)), 0);
	T_ASSERT(cidr_list_has(&l, ip("8.8.8.8")));
	T_ASSERT_EQ(cidr_list_parse("0.0.0.0/0", &l, why, sizeof(why)), 0);
	T_ASSERT(cidr_list_has(&l, ip("1.2.3.4")));
}

static void
test_bad(void)
{
	static const char *const bad[] = {"localhost", "1.2.3",	     "1.2.3.4/33", "1.2.3.4/",
					  "1.2.3.4/x", "1.2.3.4/-1", "::1",	   "1.2.3.4,nope"};
	struct cidr_list l;
	char why[128];
	char many[32 * 12 + 16] = "";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		T_ASSERT_EQ(cidr_list_parse(bad[i], &l, why, sizeof(why)), -EINVAL);
		T_ASSERT(strstr(why, "not an IPv4 address") != NULL);
	}
	for (int i = 0; i < 33; i++)
		strcat(many, "1.1.1.1,");
	T_ASSERT_EQ(cidr_list_parse(many, &l, why, sizeof(why)), -EINVAL);
	T_ASSERT(strstr(why, "more than") != NULL);
}

T_MAIN(T_CASE(test_lists), T_CASE(test_bad))
