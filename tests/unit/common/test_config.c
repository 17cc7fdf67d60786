// SPDX-License-Identifier: Apache-2.0
/*
 * test_config.c - properties config: defaults < file < command line, the
 * file syntax, and that every error names its file, line and key.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "harness.h"

static const char *const role_choices[] = {"ASYNC_MASTER", "SYNC_MASTER", "SLAVE", NULL};

static const struct cfg_key keys[] = {
	{"brokerName", CFG_STRING, "broker-a", 1, 64, NULL, "name of this broker"},
	{"listenPort", CFG_INT, "10911", 1, 65535, NULL, "remoting listen port"},
	{"brokerRole", CFG_ENUM, "ASYNC_MASTER", 0, 0, role_choices, "replication role"},
	{"autoCreateTopicEnable", CFG_BOOL, "true", 0, 0, NULL, "create topics on first send"},
	{"storePathRootDir", CFG_STRING, NULL, 0, 0, NULL, "store root"},
	{"namesrvAddr", CFG_STRING, "127.0.0.1:9876", 0, 0, NULL, "name servers"},
	{"offset", CFG_INT, "-5", 0, 0, NULL, "any int64"},
	{"brokerClusterName", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
};

static struct cfg *
new_cfg(void)
{
	struct cfg_err err = {{0}};
	struct cfg *cfg = NULL;

	T_ASSERT_EQ(cfg_create(keys, ARRAY_SIZE(keys), &cfg, &err), 0);
	T_ASSERT(cfg != NULL);
	return cfg;
}

static int
parse(struct cfg *cfg, const char *text, struct cfg_err *err)
{
	return cfg_parse_buf(cfg, "broker.conf", text, strlen(text), err);
}

/* Parse @text, expect @rc and exactly @msg. */
static void
expect_err(const char *text, int rc, const char *msg)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};

	T_ASSERT_EQ(parse(cfg, text, &err), rc);
	T_ASSERT_STREQ(err.msg, msg);
	cfg_destroy(cfg);
}

static void
write_file(char *path, const char *text)
{
	int fd;

	strcpy(path, "/tmp/sp_test_config_XXXXXX");
	fd = mkstemp(path);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
	T_ASSERT_EQ(close(fd), 0);
}

/* Read what was written to the read end of a pipe so far. */
static void
drain(int fd, char *buf, size_t size)
{
	ssize_t n;

	T_ASSERT_EQ(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	n = read(fd, buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
}

static void
test_defaults(void)
{
	struct cfg *cfg = new_cfg();

	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerName"), "broker-a");
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 10911);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerRole"), "ASYNC_MASTER");
	T_ASSERT(cfg_get_bool(cfg, "autoCreateTopicEnable"));
	T_ASSERT_STREQ(cfg_get_str(cfg, "storePathRootDir"), "");
	T_ASSERT_EQ(cfg_get_int(cfg, "offset"), -5);
	T_ASSERT(!cfg_is_set(cfg, "listenPort"));
	T_ASSERT(!cfg_is_set(cfg, "brokerName"));
	cfg_destroy(cfg);
	cfg_destroy(NULL);
}

static void
test_file_parse(void)
{
	struct cfg_err err = {{0}};
	struct cfg *cfg = new_cfg();
	char path[64];

	write_file(path, "# broker.properties\n"
			 "brokerName=broker-b\n"
			 "listenPort = 10921\n"
			 "brokerRole=SYNC_MASTER\n"
			 "autoCreateTopicEnable=false\n"
			 "storePathRootDir=/data/rocketmq/store\n");
	T_ASSERT_EQ(cfg_load_file(cfg, path, &err), 0);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerName"), "broker-b");
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 10921);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerRole"), "SYNC_MASTER");
	T_ASSERT(!cfg_get_bool(cfg, "autoCreateTopicEnable"));
	T_ASSERT_STREQ(cfg_get_str(cfg, "storePathRootDir"), "/data/rocketmq/store");
	T_ASSERT(cfg_is_set(cfg, "listenPort"));
	T_ASSERT(!cfg_is_set(cfg, "namesrvAddr"));
	T_ASSERT_EQ(unlink(path), 0);

	/* A missing file is -ENOENT and its message names the path. */
	T_ASSERT_EQ(cfg_load_file(cfg, path, &err), -ENOENT);
	T_ASSERT(strncmp(err.msg, path, strlen(path)) == 0);
	T_ASSERT(strstr(err.msg, "cannot open") != NULL);
	cfg_destroy(cfg);
}

static void
test_syntax(void)
{
	struct cfg_err err = {{0}};
	struct cfg *cfg = new_cfg();

	T_ASSERT_EQ(parse(cfg,
			  "\xef\xbb\xbf# comment\n"
			  "! also a comment = not a key\n"
			  "\n"
			  "   \t\n"
			  "  \t brokerName  =  spaced name \t \n"
			  "listenPort: 2000\r\n"
			  "brokerRole SLAVE\r"
			  "namesrvAddr=a:9876;b:9876 # not a comment\n"
			  "   # indented comment\n"
			  "offset=+42",
			  &err),
		    0);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerName"), "spaced name");
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 2000);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerRole"), "SLAVE");
	T_ASSERT_STREQ(cfg_get_str(cfg, "namesrvAddr"), "a:9876;b:9876 # not a comment");
	T_ASSERT_EQ(cfg_get_int(cfg, "offset"), 42);

	/* Escapes: \uXXXX as UTF-8, an escaped trailing blank kept, \\ at the end. */
	T_ASSERT_EQ(parse(cfg, "storePathRootDir=caf\\u00e9\\t\\ \n", &err), 0);
	T_ASSERT_STREQ(cfg_get_str(cfg, "storePathRootDir"), "caf\xc3\xa9\t ");
	T_ASSERT_EQ(parse(cfg, "storePathRootDir=C:\\\\data\\\\\n", &err), 0);
	T_ASSERT_STREQ(cfg_get_str(cfg, "storePathRootDir"), "C:\\data\\");
	T_ASSERT_EQ(parse(cfg, "list\\u0065nPort=3\n", &err), 0);
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 3);

	/* Empty value for a string without a length range; last duplicate wins. */
	T_ASSERT_EQ(parse(cfg, "storePathRootDir=\nstorePathRootDir=x\nstorePathRootDir", &err), 0);
	T_ASSERT_STREQ(cfg_get_str(cfg, "storePathRootDir"), "");
	T_ASSERT_EQ(parse(cfg, "", &err), 0);
	T_ASSERT_EQ(cfg_parse_buf(cfg, "broker.conf", NULL, 0, &err), 0);
	cfg_destroy(cfg);
}

static void
test_errors_name_file_line_key(void)
{
	expect_err("\n\n# c\nfoo=1\n", -ENOENT, "broker.conf:4: key 'foo': unknown key");
	expect_err("brokerName=a\n\n\n\n\n\n\n\n\n\n\nlistenPort=70000\n", -EINVAL,
		   "broker.conf:12: key 'listenPort': value 70000 out of range [1, 65535]");
	expect_err("listenPort=0", -EINVAL,
		   "broker.conf:1: key 'listenPort': value 0 out of range [1, 65535]");
	expect_err("listenPort=10911x", -EINVAL,
		   "broker.conf:1: key 'listenPort': value '10911x' is not a decimal integer");
	expect_err("x=1\r\nlistenPort=", -EINVAL,
		   "broker.conf:1: key 'x': unknown key; broker.conf:2: key 'listenPort': value '' "
		   "is not a decimal integer");
	/* every unknown key of a file at once */
	expect_err("a=1\nbrokerName=b\nc=2\nd=3\n", -ENOENT,
		   "broker.conf:1: key 'a': unknown key; broker.conf:3: key 'c': unknown key; "
		   "broker.conf:4: key 'd': unknown key");
	expect_err("\r\nlistenPort=", -EINVAL,
		   "broker.conf:2: key 'listenPort': value '' is not a decimal integer");
	expect_err("\r\rbrokerRole=slave", -EINVAL,
		   "broker.conf:3: key 'brokerRole': value 'slave' is not one of "
		   "ASYNC_MASTER|SYNC_MASTER|SLAVE");
	expect_err("autoCreateTopicEnable=yes", -EINVAL,
		   "broker.conf:1: key 'autoCreateTopicEnable': value 'yes' is not true or false");
	expect_err("brokerName=", -EINVAL,
		   "broker.conf:1: key 'brokerName': value length 0 out of range [1, 64]");
	expect_err("=value", -EINVAL, "broker.conf:1: empty key");
	expect_err("\nbrokerName=a\\\nlistenPort=1\n", -EINVAL,
		   "broker.conf:2: line continuation (trailing '\\') is not supported");
	expect_err("brokerName=\\u00zz", -EINVAL,
		   "broker.conf:1: key 'brokerName': malformed \\uXXXX escape in value");
	expect_err("brokerName=\\u0000", -EINVAL,
		   "broker.conf:1: key 'brokerName': malformed \\uXXXX escape in value");
	/* Untrusted bytes are echoed escaped, never raw. */
	expect_err("k\x1b[2J=1", -ENOENT, "broker.conf:1: key 'k\\x1b[2J': unknown key");
}

/* A file of many unknown keys: one report that fits, ending in "...". */
static void
test_many_unknown_keys(void)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err;
	char buf[4096];
	size_t n = 0;

	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "unknownKey%d=1\n", i);
	T_ASSERT_EQ(cfg_parse_buf(cfg, "b.properties", buf, n, &err), -ENOENT);
	T_ASSERT(strlen(err.msg) < CFG_ERR_MAX);
	T_ASSERT(strncmp(err.msg, "b.properties:1: key 'unknownKey0': unknown key; ", 48) == 0);
	T_ASSERT(strcmp(err.msg + strlen(err.msg) - 3, "...") == 0);
	cfg_destroy(cfg);
}

static void
test_nul_and_long_input(void)
{
	static const char nul_text[] = "brokerName=a\nlisten\0Port=1\n";
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};
	char big[CFG_VALUE_MAX + 64];
	char key[200];

	T_ASSERT_EQ(cfg_parse_buf(cfg, "broker.conf", nul_text, sizeof(nul_text) - 1, &err),
		    -EINVAL);
	T_ASSERT_STREQ(err.msg, "broker.conf:2: NUL byte at column 7");

	/* cfg_parse_buf() honours len: the NUL terminator is not needed. */
	T_ASSERT_EQ(cfg_parse_buf(cfg, "broker.conf", "listenPort=123456", 13, &err), 0);
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 12);

	memcpy(big, "namesrvAddr=", 12);
	memset(big + 12, 'a', CFG_VALUE_MAX);
	big[12 + CFG_VALUE_MAX] = '\0';
	T_ASSERT_EQ(parse(cfg, big, &err), 0);
	T_ASSERT_EQ(strlen(cfg_get_str(cfg, "namesrvAddr")), CFG_VALUE_MAX);
	big[12 + CFG_VALUE_MAX] = 'a';
	big[13 + CFG_VALUE_MAX] = '\0';
	T_ASSERT_EQ(parse(cfg, big, &err), -EINVAL);
	T_ASSERT_STREQ(err.msg, "broker.conf:1: key 'namesrvAddr': value longer than 1024 bytes");

	memset(key, 'k', sizeof(key) - 3);
	memcpy(key + sizeof(key) - 3, "=1", 3);
	T_ASSERT_EQ(parse(cfg, key, &err), -EINVAL);
	T_ASSERT_STREQ(err.msg, "broker.conf:1: key longer than 128 bytes");
	cfg_destroy(cfg);
}

static void
test_int_range_and_overflow(void)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};

	T_ASSERT_EQ(parse(cfg, "listenPort=1", &err), 0);
	T_ASSERT_EQ(parse(cfg, "listenPort=65535", &err), 0);
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 65535);
	T_ASSERT_EQ(parse(cfg, "listenPort=65536", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "listenPort=-1", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "listenPort=00080", &err), 0);
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 80);

	T_ASSERT_EQ(parse(cfg, "offset=9223372036854775807", &err), 0);
	T_ASSERT_EQ(cfg_get_int(cfg, "offset"), INT64_MAX);
	T_ASSERT_EQ(parse(cfg, "offset=-9223372036854775808", &err), 0);
	T_ASSERT_EQ(cfg_get_int(cfg, "offset"), INT64_MIN);
	T_ASSERT_EQ(parse(cfg, "offset=9223372036854775808", &err), -EINVAL);
	T_ASSERT_STREQ(err.msg, "broker.conf:1: key 'offset': value 9223372036854775808 out of "
				"range [-9223372036854775808, 9223372036854775807]");
	T_ASSERT_EQ(parse(cfg, "offset=-9223372036854775809", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "offset=99999999999999999999999x", &err), -EINVAL);
	T_ASSERT(strstr(err.msg, "not a decimal integer") != NULL);
	T_ASSERT_EQ(parse(cfg, "offset=-", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "offset=+", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "offset=--1", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "offset=0x10", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "offset=1 2", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "offset=1.5", &err), -EINVAL);
	/* A failed set keeps the previous value. */
	T_ASSERT_EQ(cfg_get_int(cfg, "offset"), INT64_MIN);
	cfg_destroy(cfg);
}

static void
test_enum_and_bool_strict(void)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};
	static const char *const bad_bools[] = {"yes", "1", "0", "tru", "truee", "", "on", "t"};

	T_ASSERT_EQ(parse(cfg, "brokerRole=SLAVE", &err), 0);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerRole"), "SLAVE");
	T_ASSERT_EQ(parse(cfg, "brokerRole=Slave", &err), -EINVAL);
	T_ASSERT_EQ(parse(cfg, "brokerRole=", &err), -EINVAL);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerRole"), "SLAVE");

	T_ASSERT_EQ(parse(cfg, "autoCreateTopicEnable=FALSE", &err), 0);
	T_ASSERT(!cfg_get_bool(cfg, "autoCreateTopicEnable"));
	T_ASSERT_EQ(parse(cfg, "autoCreateTopicEnable=True", &err), 0);
	T_ASSERT(cfg_get_bool(cfg, "autoCreateTopicEnable"));
	for (size_t i = 0; i < ARRAY_SIZE(bad_bools); i++) {
		T_ASSERT_EQ(cfg_set(cfg, "autoCreateTopicEnable", bad_bools[i], "command line", 0,
				    &err),
			    -EINVAL);
		T_ASSERT(strncmp(err.msg, "command line: key 'autoCreateTopicEnable': value '",
				 50) == 0);
	}
	T_ASSERT(cfg_get_bool(cfg, "autoCreateTopicEnable"));
	cfg_destroy(cfg);
}

static void
test_ignored_key_notice(void)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};
	char out[1024];
	int p[2];

	T_ASSERT_EQ(pipe(p), 0);
	log_set_level(LOG_LVL_INFO);
	log_set_fd(p[1]);
	T_ASSERT_EQ(parse(cfg, "\nbrokerClusterName=DefaultCluster\n", &err), 0);
	log_set_fd(2);
	drain(p[0], out, sizeof(out));
	T_ASSERT(strstr(out, "common.config") != NULL);
	T_ASSERT(strstr(out, "broker.conf:2: key 'brokerClusterName'") != NULL);
	T_ASSERT(strstr(out, "ignored") != NULL);
	T_ASSERT(strchr(out, '\n') == out + strlen(out) - 1); /* exactly one line */
	T_ASSERT(cfg_is_set(cfg, "brokerClusterName"));
	close(p[0]);
	close(p[1]);
	cfg_destroy(cfg);
}

static void
test_cmdline_wins(void)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};
	bool help = true;
	char path[64];

	write_file(path, "listenPort=1000\nbrokerName=from-file\n");
	{
		/* --key before -c still wins over the file. */
		char *const argv[] = {"broker", "--listenPort=2000",  "-c",
				      path,	"--brokerRole=SLAVE", NULL};

		T_ASSERT_EQ(cfg_parse_args(cfg, 5, argv, &help, &err), 0);
	}
	T_ASSERT(!help);
	T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 2000);
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerName"), "from-file");
	T_ASSERT_STREQ(cfg_get_str(cfg, "brokerRole"), "SLAVE");
	T_ASSERT(cfg_is_set(cfg, "brokerName"));
	T_ASSERT(!cfg_is_set(cfg, "offset"));
	{
		/* Values may contain '=' and be empty; a later --key wins over an earlier one. */
		char *const argv[] = {"broker",	    "--namesrvAddr=a=b", "--storePathRootDir=",
				      "--offset=1", "--offset=-2",	 NULL};

		T_ASSERT_EQ(cfg_parse_args(cfg, 5, argv, &help, &err), 0);
	}
	T_ASSERT_STREQ(cfg_get_str(cfg, "namesrvAddr"), "a=b");
	T_ASSERT_STREQ(cfg_get_str(cfg, "storePathRootDir"), "");
	T_ASSERT_EQ(cfg_get_int(cfg, "offset"), -2);
	T_ASSERT_EQ(unlink(path), 0);
	cfg_destroy(cfg);
}

static void
expect_args_err(int argc, char *const argv[], int rc, const char *msg)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};
	bool help = true;

	T_ASSERT_EQ(cfg_parse_args(cfg, argc, argv, &help, &err), rc);
	T_ASSERT_STREQ(err.msg, msg);
	T_ASSERT(!help);
	cfg_destroy(cfg);
}

static void
test_cmdline_errors(void)
{
	char path[64];

	{
		char *const argv[] = {"broker", "bogus", NULL};

		expect_args_err(2, argv, -EINVAL,
				"command line: unknown argument 'bogus' (expected -c FILE, "
				"--key=value or -h)");
	}
	{
		char *const argv[] = {"broker", "--listenPort", "10911", NULL};

		expect_args_err(3, argv, -EINVAL,
				"command line: unknown argument '--listenPort' (expected -c "
				"FILE, --key=value or -h)");
	}
	{
		char *const argv[] = {"broker", "--nosuch=1", NULL};

		expect_args_err(2, argv, -ENOENT, "command line: key 'nosuch': unknown key");
	}
	{
		char *const argv[] = {"broker", "--listenPort=70000", NULL};

		expect_args_err(2, argv, -EINVAL,
				"command line: key 'listenPort': value 70000 out of range "
				"[1, 65535]");
	}
	{
		char *const argv[] = {"broker", "-c", NULL};

		expect_args_err(2, argv, -EINVAL, "command line: -c needs a file name");
	}
	{
		char *const argv[] = {"broker", "-c", "a", "-c", "b", NULL};

		expect_args_err(5, argv, -EINVAL, "command line: -c given more than once");
	}
	write_file(path, "listenPort=1\nautoCreateTopicEnable=maybe\n");
	{
		/* Errors from the file named by -c carry the file name and line. */
		char *const argv[] = {"broker", "-c", path, NULL};
		char want[256];

		snprintf(want, sizeof(want),
			 "%s:2: key 'autoCreateTopicEnable': value 'maybe' is not true or false",
			 path);
		expect_args_err(3, argv, -EINVAL, want);
		T_ASSERT_EQ(unlink(path), 0);
	}
}

static void
test_help(void)
{
	struct cfg *cfg = new_cfg();
	struct cfg_err err = {{0}};
	bool help = false;
	char out[4096];
	int p[2];

	{
		/* -h wins over a broken command line tail and loads nothing. */
		char *const argv[] = {"broker",		"-c", "/nonexistent/broker.conf", "-h",
				      "--listenPort=0", NULL};

		T_ASSERT_EQ(cfg_parse_args(cfg, 5, argv, &help, &err), 0);
		T_ASSERT(help);
		T_ASSERT_EQ(cfg_get_int(cfg, "listenPort"), 10911);
	}
	{
		char *const argv[] = {"broker", "--help", NULL};

		help = false;
		T_ASSERT_EQ(cfg_parse_args(cfg, 2, argv, &help, &err), 0);
		T_ASSERT(help);
	}
	{
		char *const argv[] = {"broker", NULL};

		T_ASSERT_EQ(cfg_parse_args(cfg, 1, argv, &help, &err), 0);
		T_ASSERT(!help);
	}

	T_ASSERT_EQ(pipe(p), 0);
	cfg_print_help(cfg, p[1]);
	drain(p[0], out, sizeof(out));
	T_ASSERT(strstr(out, "  listenPort (int in [1, 65535], default 10911): remoting listen "
			     "port\n") != NULL);
	T_ASSERT(strstr(out, "  autoCreateTopicEnable (bool, default true): ") != NULL);
	T_ASSERT(strstr(out, "  brokerRole (one of ASYNC_MASTER|SYNC_MASTER|SLAVE, default "
			     "ASYNC_MASTER): replication role\n") != NULL);
	T_ASSERT(strstr(out, "  brokerName (string, default \"broker-a\"): ") != NULL);
	T_ASSERT(strstr(out, "  offset (int, default -5): any int64\n") != NULL);
	T_ASSERT(strstr(out, "brokerClusterName") == NULL);
	T_ASSERT(strstr(out, "(1 more RocketMQ keys are accepted and ignored)") != NULL);
	close(p[0]);
	close(p[1]);
	cfg_destroy(cfg);
}

static void
expect_create_err(const struct cfg_key *k, size_t n, const char *msg)
{
	struct cfg_err err = {{0}};
	struct cfg *cfg = (struct cfg *)1;

	T_ASSERT_EQ(cfg_create(k, n, &cfg, &err), -EINVAL);
	T_ASSERT(cfg == NULL);
	T_ASSERT_STREQ(err.msg, msg);
}

static void
test_create_errors(void)
{
	static const char *const none[] = {NULL};
	const struct cfg_key bad_def[] = {{"p", CFG_INT, "80x", 1, 100, NULL, NULL}};
	const struct cfg_key out_of_range[] = {{"p", CFG_INT, "0", 1, 100, NULL, NULL}};
	const struct cfg_key dup[] = {{"a", CFG_BOOL, "true", 0, 0, NULL, NULL},
				      {"b", CFG_BOOL, "true", 0, 0, NULL, NULL},
				      {"a", CFG_INT, "1", 0, 0, NULL, NULL}};
	const struct cfg_key no_choices[] = {{"e", CFG_ENUM, "x", 0, 0, none, NULL}};
	const struct cfg_key long_str[] = {{"s", CFG_STRING, "", 0, CFG_VALUE_MAX + 1, NULL, NULL}};
	const struct cfg_key no_def[] = {{"b", CFG_BOOL, NULL, 0, 0, NULL, NULL}};
	const struct cfg_key min_max[] = {{"i", CFG_INT, "1", 5, 1, NULL, NULL}};
	struct cfg_err err;
	struct cfg *cfg;

	expect_create_err(bad_def, 1, "default: key 'p': value '80x' is not a decimal integer");
	expect_create_err(out_of_range, 1, "default: key 'p': value 0 out of range [1, 100]");
	expect_create_err(dup, 3, "key table: key 'a': declared twice");
	expect_create_err(no_choices, 1, "key table: key 'e': enum without choices");
	expect_create_err(long_str, 1,
			  "key table: key 's': length range [0, 1025] not within [0, 1024]");
	expect_create_err(no_def, 1, "key table: key 'b': bool key without a default");
	expect_create_err(min_max, 1, "key table: key 'i': min > max");

	/* An empty table is valid; NULL err is accepted everywhere. */
	T_ASSERT_EQ(cfg_create(NULL, 0, &cfg, NULL), 0);
	T_ASSERT_EQ(cfg_parse_buf(cfg, NULL, "x=1", 3, NULL), -ENOENT);
	T_ASSERT_EQ(cfg_parse_buf(cfg, NULL, "x=1", 3, &err), -ENOENT);
	T_ASSERT_STREQ(err.msg, "config:1: key 'x': unknown key");
	cfg_destroy(cfg);
}

static void
test_getter_type_mismatch_asserts(void)
{
	struct cfg *cfg = new_cfg();
	pid_t pid;
	int st;

	/* A getter on the wrong type is a programming error: BASSERT aborts. */
	fflush(NULL);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		log_set_fd(devnull);
		(void)cfg_get_int(cfg, "brokerName");
		_exit(0);
	}
	T_ASSERT_EQ(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	cfg_destroy(cfg);
}

T_MAIN(T_CASE(test_defaults), T_CASE(test_file_parse), T_CASE(test_syntax),
       T_CASE(test_errors_name_file_line_key), T_CASE(test_many_unknown_keys),
       T_CASE(test_nul_and_long_input), T_CASE(test_int_range_and_overflow),
       T_CASE(test_enum_and_bool_strict), T_CASE(test_ignored_key_notice),
       T_CASE(test_cmdline_wins), T_CASE(test_cmdline_errors), T_CASE(test_help),
       T_CASE(test_create_errors), T_CASE(test_getter_type_mismatch_asserts))
