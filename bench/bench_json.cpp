// SPDX-License-Identifier: Apache-2.0
/*
 * bench_json.cpp - pick the JSON library by measurement: parse the header of
 * a real ali-ons SEND_MESSAGE_V2 (docs/rocketmq-protocol.md §4.1) and fetch
 * extFields, with json-c and with jansson, in the same run.
 */
#include <benchmark/benchmark.h>

#include <cstring>

#include <json-c/json.h>

extern "C" long bench_jansson_parse(const char *txt, size_t len);

static const char hdr[] =
	"{\"code\":310,\"extFields\":{\"a\":\"PID_TEST\",\"b\":\"TopicTest\",\"c\":\"TBW102\","
	"\"d\":4,\"e\":1,\"f\":0,\"g\":1796059809951,\"h\":0,"
	"\"i\":\"TAGS\\u0001TagA\\u0002KEYS\\u0001k1\\u0002\",\"j\":0,\"k\":false},"
	"\"flag\":0,\"language\":\"JAVA\",\"opaque\":7,\"version\":121}";

static void
BM_json_c_parse(benchmark::State &st)
{
	for (auto _ : st) {
		json_tokener *tok = json_tokener_new_ex(8);
		json_object *root = json_tokener_parse_ex(tok, hdr, (int)sizeof(hdr) - 1);
		json_object *ext = json_object_object_get(root, "extFields");
		long n = json_object_object_length(ext);

		benchmark::DoNotOptimize(n);
		json_object_put(root);
		json_tokener_free(tok);
	}
}
BENCHMARK(BM_json_c_parse);

static void
BM_jansson_parse(benchmark::State &st)
{
	for (auto _ : st) {
		long n = bench_jansson_parse(hdr, sizeof(hdr) - 1);
		benchmark::DoNotOptimize(n);
	}
}
BENCHMARK(BM_jansson_parse);

BENCHMARK_MAIN();
