// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_config.c - the properties file parser on arbitrary bytes.
 *
 * The input is a broker.properties file; a small key table covers every key
 * type. Oracles beyond "no crash, no overread" (ASan): whatever the input,
 * every value read back satisfies its declared type and range (a rejected
 * line must not leave a half-written value), and an error message is a
 * NUL-terminated string that starts with the file name.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const role_choices[] = {"ASYNC_MASTER", "SYNC_MASTER", "SLAVE", NULL};

static const struct cfg_key fuzz_keys[] = {
	{"brokerName", CFG_STRING, "broker-a", 1, 64, NULL, "broker name"},
	{"storePathRootDir", CFG_STRING, NULL, 0, 0, NULL, "store root"},
	{"listenPort", CFG_INT, "10911", 1, 65535, NULL, "listen port"},
	{"brokerId", CFG_INT, "0", 0, 0, NULL, "any int64"},
	{"autoCreateTopicEnable", CFG_BOOL, "true", 0, 0, NULL, "create topics"},
	{"brokerRole", CFG_ENUM, "ASYNC_MASTER", 0, 0, role_choices, "role"},
	{"brokerClusterName", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"a", CFG_INT, "-1", -1000000, 1000000, NULL, "short key"},
};

static void
check_invariants(const struct cfg *cfg)
{
	const char *role = cfg_get_str(cfg, "brokerRole");
	size_t name_len = strlen(cfg_get_str(cfg, "brokerName"));
	int64_t port = cfg_get_int(cfg, "listenPort");
	int64_t a = cfg_get_int(cfg, "a");
	bool found = false;

	if (port < 1 || port > 65535 || a < -1000000 || a > 1000000)
		abort();
	if (name_len < 1 || name_len > 64)
		abort();
	if (strlen(cfg_get_str(cfg, "storePathRootDir")) > CFG_VALUE_MAX)
		abort();
	for (const char *const *c = role_choices; *c != NULL; c++)
		found |= role == *c;
	if (!found)
		abort();
	(void)cfg_get_bool(cfg, "autoCreateTopicEnable");
	(void)cfg_get_int(cfg, "brokerId");
	(void)cfg_is_set(cfg, "brokerClusterName");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg_err err;
	struct cfg *cfg;
	int rc;

	/* Ignored keys log a notice per line; keep the fuzzer's output readable. */
	log_set_level(LOG_LVL_WARN);
	memset(&err, 0xa5, sizeof(err));
	if (cfg_create(fuzz_keys, sizeof(fuzz_keys) / sizeof(fuzz_keys[0]), &cfg, &err) != 0)
		abort();
	rc = cfg_parse_buf(cfg, "fuzz.conf", (const char *)data, size, &err);
	if (rc != 0) {
		if (rc != -EINVAL && rc != -ENOENT)
			abort();
		if (memchr(err.msg, '\0', sizeof(err.msg)) == NULL ||
		    strncmp(err.msg, "fuzz.conf:", 10) != 0)
			abort();
	}
	check_invariants(cfg);
	cfg_destroy(cfg);
	return 0;
}
