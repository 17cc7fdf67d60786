// SPDX-License-Identifier: Apache-2.0
/*
 * test_vectors.c - decode the shared RocketMQ vectors (tests/vectors/remoting)
 * with the codec every sprocket process links. The vectors come from an
 * independent Python encoder (gen_remoting.py) and real client captures.
 */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "wire/record.h"
#include "wire/remoting.h"

static uint8_t *
load(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	uint8_t *buf;
	long n;

	snprintf(path, sizeof(path), "%s/remoting/%s", SP_VECTORS_DIR, name);
	f = fopen(path, "rb");
	if (f == NULL)
		T_FAIL("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n);
	T_ASSERT(buf != NULL);
	T_ASSERT(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void
expect_ext(const struct wire_rem_cmd *c, const char *key, const char *val)
{
	const struct wire_kv *kv = wire_rem_ext_get(c, key);

	if (kv == NULL)
		T_FAIL("extField %s missing", key);
	T_ASSERT_EQ(kv->val_len, strlen(val));
	T_ASSERT_MEMEQ(kv->val, val, kv->val_len);
}

static void
test_send_v2_alions(void)
{
	static struct wire_rem_cmd c;
	char scratch[4096];
	size_t len;
	size_t flen;
	uint8_t *f = load("send_v2_alions.bin", &len);

	T_ASSERT_EQ(wire_rem_frame_len(f, len, WIRE_REM_FRAME_MAX_DEFAULT, &flen), 0);
	T_ASSERT_EQ(flen, len);
	T_ASSERT_EQ(wire_rem_decode(f, len, &c, scratch, sizeof(scratch)), 0);
	T_ASSERT_EQ(c.code, WIRE_REQ_SEND_MESSAGE_V2);
	T_ASSERT_EQ(c.opaque, 7);
	T_ASSERT_EQ(c.version, 121);
	T_ASSERT_EQ(c.language, WIRE_LANG_JAVA);
	T_ASSERT_EQ(c.n_ext, 11);
	expect_ext(&c, "a", "PID_TEST");
	expect_ext(&c, "d", "4");
	expect_ext(&c, "g", "1796059809951");
	expect_ext(&c, "k", "false");
	expect_ext(&c, "i", "TAGS\001TagA\002KEYS\001k1\002");
	T_ASSERT_EQ(c.body_len, 5);
	T_ASSERT_MEMEQ(c.body, "hello", 5);
	free(f);
}

static void
test_resp_java(void)
{
	static struct wire_rem_cmd c;
	char scratch[1024];
	size_t len;
	uint8_t *f = load("resp_java.bin", &len);

	T_ASSERT_EQ(wire_rem_decode(f, len, &c, scratch, sizeof(scratch)), 0);
	T_ASSERT_EQ(c.code, 0);
	T_ASSERT_EQ(c.flag, WIRE_REM_FLAG_RESPONSE);
	T_ASSERT_EQ(c.version, 403);
	T_ASSERT_EQ(c.n_ext, 0);
	T_ASSERT(c.remark == NULL);
	T_ASSERT_EQ(c.body_len, 0);
	free(f);
}

static void
test_route_req_bin(void)
{
	static struct wire_rem_cmd c;
	char scratch[1024];
	size_t len;
	uint8_t *f = load("route_req_bin.bin", &len);

	T_ASSERT_EQ(wire_rem_decode(f, len, &c, scratch, sizeof(scratch)), 0);
	T_ASSERT_EQ(c.serialize, WIRE_REM_ROCKETMQ);
	T_ASSERT_EQ(c.code, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC);
	T_ASSERT_EQ(c.opaque, 42);
	T_ASSERT_EQ(c.version, 409);
	T_ASSERT_STREQ(c.remark, "hi");
	T_ASSERT_EQ(c.n_ext, 1);
	expect_ext(&c, "topic", "TopicTest");
	free(f);
}

static void
test_record_v4(void)
{
	struct wire_msg m;
	char id[WIRE_MSGID_MAX];
	const char *tags;
	size_t tags_len;
	size_t len;
	uint8_t *f = load("record_v4.bin", &len);

	T_ASSERT_EQ(wire_rec_decode(f, len, WIRE_REC_VERIFY_CRC, &m), (long)len);
	T_ASSERT_EQ(m.queue_id, 1);
	T_ASSERT_EQ(m.queue_offset, 5);
	T_ASSERT_EQ(m.phys_offset, 0);
	T_ASSERT_EQ(m.body_crc, 907060870u);
	T_ASSERT_EQ(m.born_host.port, 51234);
	T_ASSERT_EQ(m.born_host.addr[0], 192);
	T_ASSERT_EQ(m.store_host.port, 19876);
	T_ASSERT_EQ(m.body_len, 5);
	T_ASSERT_MEMEQ(m.body, "hello", 5);
	T_ASSERT_EQ(m.topic_len, 9);
	T_ASSERT_MEMEQ(m.topic, "TopicTest", 9);
	T_ASSERT(wire_props_get(m.props, m.props_len, "TAGS", &tags, &tags_len));
	T_ASSERT_EQ(tags_len, 4);
	T_ASSERT_MEMEQ(tags, "TagA", 4);
	T_ASSERT_EQ(wire_msgid_encode(&m.store_host, m.phys_offset, id), 32);
	T_ASSERT_STREQ(id, "7F00000100004DA40000000000000000");

	/* Our encoder must reproduce the independent encoder's bytes exactly. */
	{
		uint8_t out[256];

		T_ASSERT_EQ(wire_rec_encode(&m, out, sizeof(out)), (long)len);
		T_ASSERT_MEMEQ(out, f, len);
	}
	free(f);
}

static void
test_batch_two(void)
{
	struct wire_batch_item it;
	size_t pos = 0;
	size_t len;
	uint8_t *f = load("batch_two.bin", &len);
	const char *v;
	size_t vlen;

	T_ASSERT_EQ(wire_batch_next(f, len, &pos, &it), 1);
	T_ASSERT_EQ(it.flag, 0);
	T_ASSERT_EQ(it.body_len, 2);
	T_ASSERT_MEMEQ(it.body, "m1", 2);
	T_ASSERT(wire_props_get(it.props, it.props_len, "TAGS", &v, &vlen));
	T_ASSERT_EQ(vlen, 1);
	T_ASSERT_EQ(wire_batch_next(f, len, &pos, &it), 1);
	T_ASSERT_EQ(it.flag, 3);
	T_ASSERT_EQ(it.body_len, 9);
	T_ASSERT(wire_props_get(it.props, it.props_len, "KEYS", &v, &vlen));
	T_ASSERT_MEMEQ(v, "k2", 2);
	T_ASSERT_EQ(wire_batch_next(f, len, &pos, &it), 0);
	free(f);
}

T_MAIN(T_CASE(test_send_v2_alions), T_CASE(test_resp_java), T_CASE(test_route_req_bin),
       T_CASE(test_record_v4), T_CASE(test_batch_two))
