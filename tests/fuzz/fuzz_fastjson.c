// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_fastjson.c - the CLI's reader of RocketMQ's admin bodies
 * (cli/cli_util.c): fastjson's non-string map keys quoted, then parsed.
 *
 * Oracle beyond "no crash, no leak": the rewrite never writes past its
 * buffer (ASan), and strict JSON (json-c's strict mode takes all of it)
 * comes out byte for byte: only a key that is not a string is rewritten.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
strict_json(const char *s, size_t len)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *j;
	bool ok;

	if (tok == NULL)
		return false;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	j = json_tokener_parse_ex(tok, s, (int)len);
	ok = j != NULL && json_tokener_get_error(tok) == json_tokener_success &&
	     (size_t)json_tokener_get_parse_end(tok) == len;
	json_object_put(j);
	json_tokener_free(tok);
	return ok;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *out;

	if (size > (1u << 20))
		return 0;
	out = cli_fastjson_to_json((const char *)data, size);
	if (out == NULL)
		return 0;
	json_object_put(json_tokener_parse(out));
	if (memchr(data, '\0', size) == NULL && strict_json((const char *)data, size) &&
	    (strlen(out) != size || memcmp(out, data, size) != 0))
		abort();
	free(out);
	return 0;
}
