// SPDX-License-Identifier: Apache-2.0
/*
 * bench_json_jansson.c - the jansson side of bench_json (its own translation
 * unit: jansson and json-c declare clashing names such as json_object).
 */
#include <jansson.h>

long bench_jansson_parse(const char *txt, size_t len);

long
bench_jansson_parse(const char *txt, size_t len)
{
	json_error_t e;
	json_t *root = json_loadb(txt, len, 0, &e);
	long n = (long)json_object_size(json_object_get(root, "extFields"));

	json_decref(root);
	return n;
}
