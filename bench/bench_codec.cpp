// SPDX-License-Identifier: Apache-2.0
/*
 * bench_codec.cpp - ns/op of the wire codecs and GB/s of CRC-32 next to
 * memcpy in the same run, so the numbers can be compared on any machine;
 * and the clocks a request's path reads (clk_mono_fast_ns() next to
 * clock_gettime() through clk_mono_ns()).
 *
 *   build/bench/bench_codec [--benchmark_format=json]
 */
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include <zlib.h>

extern "C" {
#include "common/clock.h"
#include "common/crc32.h"
#include "common/hmac.h"
#include "wire/record.h"
#include "wire/remoting.h"
}

static void
fill_msg(struct wire_msg *m, const std::vector<uint8_t> &body)
{
	static const char props[] = "TAGS\001TagA\002KEYS\001order-42\002UNIQ_KEY\001"
				    "7F0000010000A1B2C3D4E5F6000000000001";

	std::memset(m, 0, sizeof(*m));
	m->queue_id = 3;
	m->queue_offset = 123456;
	m->phys_offset = 1 << 30;
	m->born_ts = 1796059809951LL;
	m->store_ts = 1796059810000LL;
	m->born_host.addr[0] = 10;
	m->store_host.addr[0] = 127;
	m->body = body.data();
	m->body_len = (uint32_t)body.size();
	m->topic = "TopicTest";
	m->topic_len = 9;
	m->props = props;
	m->props_len = sizeof(props) - 1;
}

static void
BM_record_encode(benchmark::State &st)
{
	std::vector<uint8_t> body((size_t)st.range(0), 'x');
	std::vector<uint8_t> out(body.size() + 512);
	struct wire_msg m;

	fill_msg(&m, body);
	for (auto _ : st) {
		long n = wire_rec_encode(&m, out.data(), out.size());
		benchmark::DoNotOptimize(n);
		benchmark::ClobberMemory();
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_record_encode)->Arg(128)->Arg(1024)->Arg(16384);

static void
BM_record_decode(benchmark::State &st)
{
	std::vector<uint8_t> body((size_t)st.range(0), 'x');
	std::vector<uint8_t> out(body.size() + 512);
	struct wire_msg m;
	struct wire_msg d;
	long n;

	fill_msg(&m, body);
	n = wire_rec_encode(&m, out.data(), out.size());
	for (auto _ : st) {
		long r = wire_rec_decode(out.data(), (size_t)n, WIRE_REC_VERIFY_CRC, &d);
		benchmark::DoNotOptimize(r);
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_record_decode)->Arg(128)->Arg(1024)->Arg(4096)->Arg(16384);

/*
 * The same decode without the BODYCRC check, as clog_read() does it: the
 * difference to BM_record_decode is what clog_read_checked() adds to a
 * read for delivery (docs/benchmarks.md, "BODYCRC on delivery reads").
 */
static void
BM_record_decode_nocrc(benchmark::State &st)
{
	std::vector<uint8_t> body((size_t)st.range(0), 'x');
	std::vector<uint8_t> out(body.size() + 512);
	struct wire_msg m;
	struct wire_msg d;
	long n;

	fill_msg(&m, body);
	n = wire_rec_encode(&m, out.data(), out.size());
	for (auto _ : st) {
		long r = wire_rec_decode(out.data(), (size_t)n, 0, &d);
		benchmark::DoNotOptimize(r);
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_record_decode_nocrc)->Arg(128)->Arg(1024)->Arg(4096)->Arg(16384);

static void
BM_crc32(benchmark::State &st)
{
	std::vector<uint8_t> buf((size_t)st.range(0), 0x5a);

	for (auto _ : st) {
		uint32_t c = crc32_java(buf.data(), buf.size());
		benchmark::DoNotOptimize(c);
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_crc32)->Arg(128)->Arg(4096)->Arg(1 << 20);

static void
BM_crc32_zlib(benchmark::State &st)
{
	std::vector<uint8_t> buf((size_t)st.range(0), 0x5a);

	for (auto _ : st) {
		uLong c = crc32(0, buf.data(), (uInt)buf.size());
		benchmark::DoNotOptimize(c);
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_crc32_zlib)->Arg(128)->Arg(4096)->Arg(1 << 20);

static void
BM_memcpy(benchmark::State &st)
{
	std::vector<uint8_t> src((size_t)st.range(0), 0x5a);
	std::vector<uint8_t> dst((size_t)st.range(0));

	for (auto _ : st) {
		std::memcpy(dst.data(), src.data(), src.size());
		benchmark::ClobberMemory();
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_memcpy)->Arg(128)->Arg(4096)->Arg(1 << 20);

static const char send_hdr[] =
	"{\"code\":310,\"extFields\":{\"a\":\"PID_TEST\",\"b\":\"TopicTest\",\"c\":\"TBW102\","
	"\"d\":4,\"e\":1,\"f\":0,\"g\":1796059809951,\"h\":0,"
	"\"i\":\"TAGS\\u0001TagA\\u0002KEYS\\u0001k1\\u0002\",\"j\":0,\"k\":false},"
	"\"flag\":0,\"language\":\"JAVA\",\"opaque\":7,\"version\":121}";

/* The same SEND as an ACL client signs it (AccessKey, Signature, OnsChannel as ali-ons adds). */
static const char send_hdr_signed[] =
	"{\"code\":310,\"extFields\":{\"a\":\"PID_TEST\",\"b\":\"TopicTest\",\"c\":\"TBW102\","
	"\"d\":4,\"e\":1,\"f\":0,\"g\":1796059809951,\"h\":0,"
	"\"i\":\"TAGS\\u0001TagA\\u0002KEYS\\u0001k1\\u0002\",\"j\":0,\"k\":false,"
	"\"AccessKey\":\"appuser1\",\"OnsChannel\":\"ALIYUN\","
	"\"Signature\":\"yleJRo47BO05SrT78ffIeuf18U0=\"},"
	"\"flag\":0,\"language\":\"JAVA\",\"opaque\":7,\"version\":121}";

/* A remoting frame: JSON header @hdr, then @body_len bytes of body. */
static std::vector<uint8_t>
frame_of(const char *hdr, size_t hdr_len, size_t body_len)
{
	std::vector<uint8_t> f(8 + hdr_len + body_len, 'b');
	uint32_t hl = (uint32_t)hdr_len;
	uint32_t len = (uint32_t)(f.size() - 4);

	f[0] = (uint8_t)(len >> 24);
	f[1] = (uint8_t)(len >> 16);
	f[2] = (uint8_t)(len >> 8);
	f[3] = (uint8_t)len;
	f[4] = 0;
	f[5] = 0;
	f[6] = (uint8_t)(hl >> 8);
	f[7] = (uint8_t)hl;
	std::memcpy(f.data() + 8, hdr, hl);
	return f;
}

static void
decode_send(benchmark::State &st, const char *hdr, size_t hdr_len)
{
	static struct wire_rem_cmd c;
	static char scratch[4096];
	std::vector<uint8_t> f = frame_of(hdr, hdr_len, 1024);

	for (auto _ : st) {
		int rc = wire_rem_decode(f.data(), f.size(), &c, scratch, sizeof(scratch));
		benchmark::DoNotOptimize(rc);
	}
}

static void
BM_remoting_decode_send(benchmark::State &st)
{
	decode_send(st, send_hdr, sizeof(send_hdr) - 1);
}
BENCHMARK(BM_remoting_decode_send);

static void
BM_remoting_decode_send_signed(benchmark::State &st)
{
	decode_send(st, send_hdr_signed, sizeof(send_hdr_signed) - 1);
}
BENCHMARK(BM_remoting_decode_send_signed);

/* HMAC-SHA1 with a prepared key (common/hmac.h): what a per-packet MAC would cost. */
static void
BM_hmac_sha1(benchmark::State &st)
{
	struct hmac_sha1 key;
	std::vector<uint8_t> b((size_t)st.range(0), 'm');
	uint8_t mac[SHA1_LEN];

	hmac_sha1_key(&key, "appsecret1", 10);
	for (auto _ : st) {
		struct hmac_sha1 h = key;

		hmac_sha1_update(&h, b.data(), b.size());
		hmac_sha1_final(&h, mac);
		benchmark::DoNotOptimize(mac);
	}
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}
BENCHMARK(BM_hmac_sha1)->Arg(64)->Arg(128)->Arg(1024);

/* The broker's check of a signed SEND_MESSAGE_V2 (1 KiB body): sort, HMAC, base64. */
static void
BM_remoting_sign_send(benchmark::State &st)
{
	static struct wire_rem_cmd c;
	static char scratch[4096];
	std::vector<uint8_t> f = frame_of(send_hdr, sizeof(send_hdr) - 1, (size_t)st.range(0));
	struct hmac_sha1 key;
	char sig[HMAC_B64_LEN + 1];

	if (wire_rem_decode(f.data(), f.size(), &c, scratch, sizeof(scratch)) != 0)
		st.SkipWithError("decode");
	hmac_sha1_key(&key, "appsecret1", 10);
	for (auto _ : st) {
		wire_rem_sign(&c, &key, sig);
		benchmark::DoNotOptimize(sig);
	}
}
BENCHMARK(BM_remoting_sign_send)->Arg(64)->Arg(1024);

static void
BM_remoting_encode_send_response(benchmark::State &st)
{
	static struct wire_rem_cmd c;
	static uint8_t out[4096];
	size_t n;

	std::memset(&c, 0, sizeof(c));
	c.flag = WIRE_REM_FLAG_RESPONSE;
	c.opaque = 7;
	c.version = WIRE_REM_VERSION_V4_9_8;
	(void)!wire_rem_ext_add(&c, "msgId", "7F00000100002A9F0000000000001000");
	(void)!wire_rem_ext_add(&c, "queueId", "1");
	(void)!wire_rem_ext_add(&c, "queueOffset", "123456");
	(void)!wire_rem_ext_add(&c, "MSG_REGION", "DefaultRegion");
	(void)!wire_rem_ext_add(&c, "TRACE_ON", "true");
	for (auto _ : st) {
		int rc = wire_rem_encode_header(&c, out, sizeof(out), &n);
		benchmark::DoNotOptimize(rc);
	}
}
BENCHMARK(BM_remoting_encode_send_response);

static void
BM_tag_hash(benchmark::State &st)
{
	for (auto _ : st) {
		int32_t h = wire_tag_hash("TagA", 4);
		benchmark::DoNotOptimize(h);
	}
}
BENCHMARK(BM_tag_hash);

/* The reference: CLOCK_MONOTONIC through the vDSO. */
static void
BM_clk_mono_ns(benchmark::State &st)
{
	uint64_t x = 0;

	for (auto _ : st)
		benchmark::DoNotOptimize(x += clk_mono_ns());
}
BENCHMARK(BM_clk_mono_ns);

/* The dataplane's: the same clock from the TSC (common/clock.h). */
static void
BM_clk_mono_fast_ns(benchmark::State &st)
{
	uint64_t x = 0;

	clk_init();
	st.counters["tsc"] = clk_tsc_is_invariant() ? 1 : 0;
	for (auto _ : st)
		benchmark::DoNotOptimize(x += clk_mono_fast_ns());
}
BENCHMARK(BM_clk_mono_fast_ns);

/* The store's and the producer's wall-clock ms. */
static void
BM_clk_wall_ms_fast(benchmark::State &st)
{
	int64_t x = 0;

	clk_init();
	for (auto _ : st)
		benchmark::DoNotOptimize(x += clk_wall_ms_fast());
}
BENCHMARK(BM_clk_wall_ms_fast);

BENCHMARK_MAIN();
