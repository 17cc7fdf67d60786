// SPDX-License-Identifier: Apache-2.0
/*
 * test_acl.c - plain_acl.yml as RocketMQ reads it: the sample file of
 * RocketMQ's distribution, address patterns, permissions with defaults and
 * admin, every malformed file refused with a reason that never shows a
 * secret, the file-mode rule, and the request signatures of
 * tests/vectors/acl/signatures.json (computed by Java's HmacSHA1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/acl.h"
#include "harness.h"
#include "wire/remoting.h"

static const char sample[] = "globalWhiteRemoteAddresses:\n"
			     "  - 10.10.103.*\n"
			     "  - 192.168.0.*\n"
			     "\n"
			     "accounts:\n"
			     "  - accessKey: RocketMQ\n"
			     "    secretKey: 12345678\n"
			     "    whiteRemoteAddress:\n"
			     "    admin: false\n"
			     "    defaultTopicPerm: DENY\n"
			     "    defaultGroupPerm: SUB\n"
			     "    topicPerms:\n"
			     "      - topicA=DENY\n"
			     "      - topicB=PUB|SUB\n"
			     "      - topicC=SUB\n"
			     "    groupPerms:\n"
			     "      # the group should convert to retry topic\n"
			     "      - groupA=DENY\n"
			     "      - groupB=PUB|SUB\n"
			     "      - groupC=SUB\n"
			     "\n"
			     "  - accessKey: rocketmq2\n"
			     "    secretKey: 12345678\n"
			     "    whiteRemoteAddress: 192.168.1.*\n"
			     "    # if it is admin, it could access all resources\n"
			     "    admin: true\n";

static uint32_t
ip(const char *s)
{
	struct in_addr a;

	T_ASSERT_EQ(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static void
test_sample(void)
{
	struct acl *a;
	const struct acl_account *u, *adm;
	char why[256];

	T_ASSERT_EQ(acl_parse(sample, strlen(sample), &a, why, sizeof(why)), 0);
	T_ASSERT_EQ(a->n, 2u);
	T_ASSERT(acl_addrs_match(&a->global, ip("10.10.103.7")));
	T_ASSERT(acl_addrs_match(&a->global, ip("192.168.0.255")));
	T_ASSERT(!acl_addrs_match(&a->global, ip("192.168.1.1")));
	u = acl_find(a, "RocketMQ", 8);
	adm = acl_find(a, "rocketmq2", 9);
	T_ASSERT(u != NULL && adm != NULL);
	T_ASSERT(acl_find(a, "RocketM", 7) == NULL);
	T_ASSERT(acl_find(a, "RocketMQQ", 9) == NULL);
	T_ASSERT(!u->admin && adm->admin);
	T_ASSERT(!acl_addrs_match(&u->white, ip("127.0.0.1"))); /* blank: nobody */
	T_ASSERT(acl_addrs_match(&adm->white, ip("192.168.1.20")));
	/* topics: own entries, else defaultTopicPerm DENY */
	T_ASSERT(!acl_allowed(u, "topicA", 6, false, ACL_PUB));
	T_ASSERT(!acl_allowed(u, "topicA", 6, false, ACL_SUB));
	T_ASSERT(acl_allowed(u, "topicB", 6, false, ACL_PUB));
	T_ASSERT(acl_allowed(u, "topicB", 6, false, ACL_SUB));
	T_ASSERT(!acl_allowed(u, "topicC", 6, false, ACL_PUB));
	T_ASSERT(acl_allowed(u, "topicC", 6, false, ACL_SUB));
	T_ASSERT(!acl_allowed(u, "topicD", 6, false, ACL_SUB));
	T_ASSERT(acl_allowed(u, "topicC", 6, false, ACL_ANY));
	/* groups: own entries, else defaultGroupPerm SUB; "%RETRY%g" is group g */
	T_ASSERT(!acl_allowed(u, "groupA", 6, true, ACL_SUB));
	T_ASSERT(acl_allowed(u, "groupC", 6, true, ACL_SUB));
	T_ASSERT(acl_allowed(u, "groupZ", 6, true, ACL_SUB));
	T_ASSERT(!acl_allowed(u, "groupZ", 6, true, ACL_PUB));
	T_ASSERT(!acl_allowed(u, "%RETRY%groupA", 13, false, ACL_SUB));
	T_ASSERT(acl_allowed(u, "%RETRY%groupB", 13, false, ACL_SUB));
	/* an admin without entries may do anything */
	T_ASSERT(acl_allowed(adm, "anything", 8, false, ACL_PUB));
	T_ASSERT(acl_allowed(adm, "g", 1, true, ACL_SUB));
	T_ASSERT_STREQ(acl_perm_name(ACL_PUB | ACL_SUB), "PUB|SUB");
	acl_free(a);
}

static void
test_addresses(void)
{
	static const struct {
		const char *pat, *yes, *no;
	} v[] = {
		{"*", "1.2.3.4", NULL},
		{"*.*.*.*", "9.9.9.9", NULL},
		{"127.0.0.1", "127.0.0.1", "127.0.0.2"},
		{"127.0.0.1,10.0.0.2", "10.0.0.2", "10.0.0.3"},
		{"192.168.1.{1,5,9}", "192.168.1.5", "192.168.1.6"},
		{"192.168.*", "192.168.77.1", "192.169.0.1"},
		{"192.168.1.10-20", "192.168.1.15", "192.168.1.21"},
		{"10.1-3.*.*", "10.2.200.1", "10.4.0.0"},
	};
	static const char *bad[] = {"1.2.3", "1.2.3.4.5", "300.1.1.1", "1.2.3.9-4", "1.2.3.{a}",
				    "::1",   "a.b.c.d",	  "1.2.*.4",   "-1.2.3.4"};
	char buf[512], why[256];
	struct acl *a;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		snprintf(buf, sizeof(buf), "globalWhiteRemoteAddresses:\n  - \"%s\"\n", v[i].pat);
		T_ASSERT_EQ(acl_parse(buf, strlen(buf), &a, why, sizeof(why)), 0);
		T_ASSERT(acl_addrs_match(&a->global, ip(v[i].yes)));
		if (v[i].no)
			T_ASSERT(!acl_addrs_match(&a->global, ip(v[i].no)));
		acl_free(a);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "globalWhiteRemoteAddresses:\n  - \"%s\"\n", bad[i]);
		if (acl_parse(buf, strlen(buf), &a, why, sizeof(why)) != -EINVAL)
			T_FAIL("'%s' accepted", bad[i]);
		T_ASSERT(strstr(why, "address pattern") != NULL);
	}
}

static void
test_bad_files(void)
{
	static const struct {
		const char *text, *says;
	} v[] = {
		{"accounts: [", "YAML error"},
		{"- a\n- b\n", "must be a mapping"},
		{"accounts:\n  - accessKey: short\n    secretKey: 1234567890\n",
		 "accessKey and secretKey"},
		{"accounts:\n  - accessKey: longenough\n    secretKey: s3cr\n",
		 "accessKey and secretKey"},
		{"accounts:\n  - accessKey: longenough\n    secretKey: verysecret1\n    "
		 "topicPerms:\n"
		 "      - t=PUBLISH\n",
		 "PUB, SUB, PUB|SUB or DENY"},
		{"accounts:\n  - accessKey: longenough\n    secretKey: verysecret1\n    "
		 "groupPerms:\n"
		 "      - nameonly\n",
		 "name=PERM"},
		{"accounts:\n  - accessKey: longenough\n    secretKey: verysecret1\n    admin: "
		 "maybe\n",
		 "admin must be"},
		{"accounts:\n  - accessKey: longenough\n    secretKey: verysecret1\n  - accessKey: "
		 "longenough\n    secretKey: verysecret2\n",
		 "appears twice"},
		{"accounts: 3\n", "must be a list"},
		{"accounts:\n  - accessKey: longenough\n    secretKey: verysecret1\n    "
		 "defaultTopicPerm: ALL\n",
		 "defaultTopicPerm"},
	};
	char why[256];
	struct acl *a;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		why[0] = '\0';
		T_ASSERT_EQ(acl_parse(v[i].text, strlen(v[i].text), &a, why, sizeof(why)), -EINVAL);
		T_ASSERT(a == NULL);
		if (!strstr(why, v[i].says))
			T_FAIL("case %zu: '%s' does not say '%s'", i, why, v[i].says);
		T_ASSERT(strstr(why, "verysecret") == NULL);
	}
	/* an empty file and a file with no accounts are valid (nobody gets in) */
	T_ASSERT_EQ(acl_parse("globalWhiteRemoteAddresses:\n", 28, &a, why, sizeof(why)), 0);
	T_ASSERT_EQ(a->n, 0u);
	acl_free(a);
}

static void
test_load(void)
{
	char path[] = "/tmp/test_acl_XXXXXX";
	int fd = mkstemp(path);
	char why[256];
	struct acl *a;
	uint64_t sig = 0;

	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(write(fd, sample, strlen(sample)), (ssize_t)strlen(sample));
	close(fd);
	T_ASSERT_EQ(chmod(path, 0644), 0);
	T_ASSERT_EQ(acl_load(path, &a, &sig, why, sizeof(why)), -EACCES);
	T_ASSERT(strstr(why, "chmod 600") != NULL);
	T_ASSERT_EQ(chmod(path, 0600), 0);
	T_ASSERT_EQ(acl_load(path, &a, &sig, why, sizeof(why)), 0);
	T_ASSERT(!acl_changed(path, sig));
	acl_free(a);
	fd = open(path, O_WRONLY | O_APPEND);
	T_ASSERT_EQ(write(fd, "\n", 1), 1);
	close(fd);
	T_ASSERT(acl_changed(path, sig));
	unlink(path);
	T_ASSERT(acl_changed(path, sig));
	T_ASSERT_EQ(acl_load(path, &a, &sig, why, sizeof(why)), -ENOENT);
}

static void
test_signature_vectors(void)
{
	json_object *all = json_object_from_file(SP_VECTORS_DIR "/acl/signatures.json");
	size_t n;

	T_ASSERT(all != NULL);
	n = json_object_array_length(all);
	T_ASSERT(n >= 4);
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(all, i), *ext, *x;
		struct wire_rem_cmd cmd = {0};
		struct hmac_sha1 key;
		static uint8_t body[4096];
		const char *hexs, *secret;
		char sig[HMAC_B64_LEN + 1];

		T_ASSERT(json_object_object_get_ex(v, "secret", &x));
		secret = json_object_get_string(x);
		T_ASSERT(json_object_object_get_ex(v, "ext", &ext));
		json_object_object_foreach(ext, k, val)
		{
			T_ASSERT_EQ(wire_rem_ext_add(&cmd, k, json_object_get_string(val)), 0);
		}
		T_ASSERT(json_object_object_get_ex(v, "body_hex", &x));
		hexs = json_object_get_string(x);
		for (size_t b = 0; hexs[2 * b]; b++) {
			unsigned o;

			T_ASSERT_EQ(sscanf(hexs + 2 * b, "%2x", &o), 1);
			body[b] = (uint8_t)o;
			cmd.body_len = (uint32_t)(b + 1);
		}
		cmd.body = body;
		hmac_sha1_key(&key, secret, strlen(secret));
		wire_rem_sign(&cmd, &key, sig);
		T_ASSERT(json_object_object_get_ex(v, "signature", &x));
		if (strcmp(sig, json_object_get_string(x)) != 0)
			T_FAIL("vector %zu: %s != %s", i, sig, json_object_get_string(x));
	}
	json_object_put(all);
}

T_MAIN(T_CASE(test_sample), T_CASE(test_addresses), T_CASE(test_bad_files), T_CASE(test_load),
       T_CASE(test_signature_vectors))
