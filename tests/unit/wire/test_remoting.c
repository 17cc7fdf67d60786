// SPDX-License-Identifier: Apache-2.0
/* test_remoting.c - remoting frames: round trips, client quirks, bad input. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "wire/remoting.h"

static struct wire_rem_cmd c;
static struct wire_rem_cmd d;
static char scratch[65536];
static uint8_t frame[65536];

static size_t
json_frame(const char *hdr, const char *body, uint8_t *out)
{
	size_t hl = strlen(hdr);
	size_t bl = body ? strlen(body) : 0;
	uint32_t length = (uint32_t)(4 + hl + bl);

	out[0] = (uint8_t)(length >> 24);
	out[1] = (uint8_t)(length >> 16);
	out[2] = (uint8_t)(length >> 8);
	out[3] = (uint8_t)length;
	out[4] = 0;
	out[5] = (uint8_t)(hl >> 16);
	out[6] = (uint8_t)(hl >> 8);
	out[7] = (uint8_t)hl;
	memcpy(out + 8, hdr, hl);
	if (bl)
		memcpy(out + 8 + hl, body, bl);
	return 8 + hl + bl;
}

static void
fill_cmd(struct wire_rem_cmd *x, uint8_t ser)
{
	memset(x, 0, sizeof(*x));
	x->code = WIRE_REQ_PULL_MESSAGE;
	x->opaque = 123456;
	x->flag = WIRE_REM_FLAG_ONEWAY;
	x->version = WIRE_REM_VERSION_V4_9_8;
	x->language = WIRE_LANG_GO;
	x->serialize = ser;
	x->remark = "a \"quoted\" remark\x01";
	x->remark_len = (uint32_t)strlen(x->remark);
	T_ASSERT_EQ(wire_rem_ext_add(x, "topic", "TopicTest"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(x, "queueId", "3"), 0);
	T_ASSERT_EQ(wire_rem_ext_add(x, "props", "TAGS\001A\002"), 0);
	x->body = (const uint8_t *)"payload";
	x->body_len = 7;
}

static void
roundtrip(uint8_t ser)
{
	size_t n;
	size_t flen;
	int64_t q;

	fill_cmd(&c, ser);
	T_ASSERT_EQ(wire_rem_encode(&c, frame, sizeof(frame), &n), 0);
	T_ASSERT_EQ(wire_rem_frame_len(frame, n, WIRE_REM_FRAME_MAX_DEFAULT, &flen), 0);
	T_ASSERT_EQ(flen, n);
	T_ASSERT_EQ(wire_rem_decode(frame, n, &d, scratch, sizeof(scratch)), 0);
	T_ASSERT_EQ(d.serialize, ser);
	T_ASSERT_EQ(d.code, c.code);
	T_ASSERT_EQ(d.opaque, c.opaque);
	T_ASSERT_EQ(d.flag, c.flag);
	T_ASSERT_EQ(d.version, c.version);
	T_ASSERT_EQ(d.language, WIRE_LANG_GO);
	T_ASSERT_EQ(d.remark_len, c.remark_len);
	T_ASSERT_MEMEQ(d.remark, c.remark, c.remark_len);
	T_ASSERT_EQ(d.n_ext, 3);
	T_ASSERT_EQ(wire_rem_ext_i64(&d, "queueId", &q), 0);
	T_ASSERT_EQ(q, 3);
	T_ASSERT_EQ(wire_rem_ext_get(&d, "props")->val_len, 7);
	T_ASSERT_EQ(d.body_len, 7);
	T_ASSERT_MEMEQ(d.body, "payload", 7);
	/* Every shorter prefix is incomplete, never a crash or a bogus success. */
	for (size_t i = 0; i < n; i++)
		T_ASSERT_EQ(wire_rem_frame_len(frame, i, WIRE_REM_FRAME_MAX_DEFAULT, &flen),
			    -EAGAIN);
}

static void
test_roundtrip_json(void)
{
	roundtrip(WIRE_REM_JSON);
}

static void
test_roundtrip_binary(void)
{
	roundtrip(WIRE_REM_ROCKETMQ);
}

static void
test_json_output_shape(void)
{
	size_t n;
	char *hdr;

	memset(&c, 0, sizeof(c));
	c.code = WIRE_RSP_SUCCESS;
	c.flag = WIRE_REM_FLAG_RESPONSE;
	c.opaque = 9;
	c.version = WIRE_REM_VERSION_V4_9_8;
	T_ASSERT_EQ(wire_rem_ext_add(&c, "queueOffset", "17"), 0);
	T_ASSERT_EQ(wire_rem_encode(&c, frame, sizeof(frame), &n), 0);
	hdr = strndup((const char *)frame + 8, n - 8);
	/* Values are strings, extFields always present, keys in fastjson order. */
	T_ASSERT_STREQ(hdr, "{\"code\":0,\"extFields\":{\"queueOffset\":\"17\"},\"flag\":1,"
			    "\"language\":\"JAVA\",\"opaque\":9,"
			    "\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}");
	free(hdr);

	memset(&c, 0, sizeof(c));
	T_ASSERT_EQ(wire_rem_encode(&c, frame, sizeof(frame), &n), 0);
	hdr = strndup((const char *)frame + 8, n - 8);
	T_ASSERT(strstr(hdr, "\"extFields\":{}") != NULL);
	free(hdr);
}

static int
decode_hdr(const char *hdr)
{
	size_t n = json_frame(hdr, NULL, frame);

	return wire_rem_decode(frame, n, &d, scratch, sizeof(scratch));
}

static void
test_json_quirks(void)
{
	bool b;
	int64_t v;

	/* Numbers, booleans and null as extFields values (ali-ons). */
	T_ASSERT_EQ(decode_hdr("{\"code\":11,\"extFields\":{\"queueId\":0,\"k\":false,"
			       "\"commitOffset\":-1,\"x\":null,\"d\":1.5}}"),
		    0);
	T_ASSERT_EQ(d.n_ext, 4);
	T_ASSERT_EQ(wire_rem_ext_i64(&d, "commitOffset", &v), 0);
	T_ASSERT_EQ(v, -1);
	T_ASSERT_EQ(wire_rem_ext_bool(&d, "k", &b), 0);
	T_ASSERT(!b);
	T_ASSERT(wire_rem_ext_get(&d, "x") == NULL);
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "d")->val, "1.5");
	T_ASSERT_EQ(wire_rem_ext_i64(&d, "d", &v), -EINVAL);
	T_ASSERT_EQ(wire_rem_ext_i64(&d, "nope", &v), -ENOENT);

	/* Missing extFields and members, unknown members, unknown language. */
	T_ASSERT_EQ(decode_hdr("{\"code\":105,\"newField\":[1,2],\"language\":\"COBOL\"}"), 0);
	T_ASSERT_EQ(d.code, 105);
	T_ASSERT_EQ(d.n_ext, 0);
	T_ASSERT_EQ(d.language, WIRE_LANG_OTHER);
	T_ASSERT_EQ(decode_hdr("{}"), 0);
	T_ASSERT_EQ(decode_hdr("{\"extFields\":null,\"remark\":null} \n"), 0);

	/* Escapes, including the property separators and a surrogate pair. */
	T_ASSERT_EQ(
		decode_hdr(
			"{\"extFields\":{\"i\":\"TAGS\\u0001A\\u0002\",\"e\":\"\\ud83d\\ude00\"}}"),
		0);
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "i")->val, "TAGS\001A\002");
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "e")->val, "\xf0\x9f\x98\x80");
}

/* What fastjson takes in a header RocketMQ's Java broker reads (HashMap<String, String>). */
static void
test_json_fastjson(void)
{
	char hdr[1024];
	size_t n = 0;

	/* An object or array as an extFields value: its compact JSON text. */
	T_ASSERT_EQ(decode_hdr("{\"code\":10,\"extFields\":{\"a\":{\"x\": [1, \"y/z\"]},"
			       "\"b\":[],\"topic\":\"T\"}}"),
		    0);
	T_ASSERT_EQ(d.n_ext, 3);
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "a")->val, "{\"x\":[1,\"y/z\"]}");
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "b")->val, "[]");
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "topic")->val, "T");

	/* Nesting 8 and more levels deep, in a member of its own and in extFields. */
	n += (size_t)sprintf(hdr, "{\"code\":11,\"deep\":");
	for (int i = 0; i < 40; i++)
		hdr[n++] = '[';
	for (int i = 0; i < 40; i++)
		hdr[n++] = ']';
	n += (size_t)sprintf(hdr + n, ",\"extFields\":{\"k\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":"
				      "{\"f\":{\"g\":{\"h\":1}}}}}}}},\"topic\":\"T\"}}");
	T_ASSERT_EQ(decode_hdr(hdr), 0);
	T_ASSERT_EQ(d.code, 11);
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "topic")->val, "T");
	T_ASSERT_STREQ(wire_rem_ext_get(&d, "k")->val,
		       "{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{\"h\":1}}}}}}}}");
}

static void
test_json_bad(void)
{
	static const char *const bad[] = {
		"",
		"{",
		"[]",
		"{\"code\":\"10\"}",
		"{\"code\":1e3}",
		"{\"code\":99999999999}",
		"{\"extFields\":[]}",
		"{\"code\":1} x",
		"{\"a\":\"\xff\"}",
		"{\"code\":1,}",
		"{\"remark\":5}",
		"{\"language\":1}",
		"nul",
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = decode_hdr(bad[i]);

		if (rc != -EBADMSG && rc != -EPROTO)
			T_FAIL("header %zu <%s> gave %d", i, bad[i], rc);
	}
}

static void
test_limits(void)
{
	char hdr[8192];
	size_t n = 0;
	size_t flen;

	/* More extFields than WIRE_REM_EXT_MAX. */
	n += (size_t)sprintf(hdr, "{\"extFields\":{");
	for (int i = 0; i < WIRE_REM_EXT_MAX + 1; i++)
		n += (size_t)sprintf(hdr + n, "%s\"k%d\":\"v\"", i ? "," : "", i);
	sprintf(hdr + n, "}}");
	T_ASSERT_EQ(decode_hdr(hdr), -E2BIG);

	/* Scratch too small. */
	n = json_frame("{\"remark\":\"0123456789abcdef\"}", NULL, frame);
	T_ASSERT_EQ(wire_rem_decode(frame, n, &d, scratch, 8), -ENOBUFS);
	T_ASSERT_EQ(wire_rem_decode(frame, n, &d, scratch, 0), -ENOBUFS);

	/* Deep nesting is refused by the depth limit, not the stack. */
	memset(hdr, '[', 4000);
	hdr[4000] = '\0';
	T_ASSERT_EQ(decode_hdr(hdr), -EBADMSG);

	/* Frame lengths: too big, too small, header longer than the frame. */
	memcpy(frame, "\x01\x00\x00\x04\x00\x00\x00\x00", 8);
	T_ASSERT_EQ(wire_rem_frame_len(frame, 8, WIRE_REM_FRAME_MAX_DEFAULT, &flen), -EMSGSIZE);
	memcpy(frame, "\x00\x00\x00\x03\x00\x00\x00\x00", 8);
	T_ASSERT_EQ(wire_rem_frame_len(frame, 8, WIRE_REM_FRAME_MAX_DEFAULT, &flen), -EBADMSG);
	memcpy(frame, "\x00\x00\x00\x08\x00\x00\x00\x05", 8);
	T_ASSERT_EQ(wire_rem_frame_len(frame, 8, WIRE_REM_FRAME_MAX_DEFAULT, &flen), -EBADMSG);
	memcpy(frame, "\x80\x00\x00\x08\x00\x00\x00\x05", 8);
	T_ASSERT_EQ(wire_rem_frame_len(frame, 8, SIZE_MAX, &flen), -EBADMSG);

	/* Unknown serialize type; length field disagreeing with the buffer. */
	n = json_frame("{}", NULL, frame);
	frame[4] = 2;
	T_ASSERT_EQ(wire_rem_decode(frame, n, &d, scratch, sizeof(scratch)), -EPROTO);
	n = json_frame("{}", NULL, frame);
	T_ASSERT_EQ(wire_rem_decode(frame, n - 1, &d, scratch, sizeof(scratch)), -EBADMSG);

	/* Encoder: buffer too small at every size, bad language. */
	fill_cmd(&c, WIRE_REM_JSON);
	T_ASSERT_EQ(wire_rem_encode(&c, frame, sizeof(frame), &n), 0);
	for (size_t cap = 0; cap < n; cap++) {
		size_t m;

		T_ASSERT_EQ(wire_rem_encode(&c, frame, cap, &m), -ENOBUFS);
	}
	c.language = WIRE_LANG_COUNT;
	T_ASSERT_EQ(wire_rem_encode(&c, frame, sizeof(frame), &n), -EINVAL);
}

static void
test_binary_bad(void)
{
	size_t n;

	fill_cmd(&c, WIRE_REM_ROCKETMQ);
	c.body_len = 0;
	T_ASSERT_EQ(wire_rem_encode(&c, frame, sizeof(frame), &n), 0);
	/* Shrink the header length word: every cut inside the header must fail. */
	for (uint32_t hl = 0; hl + 8 < n; hl++) {
		uint8_t copy[512];
		uint32_t length = 4 + hl;
		int rc;

		memcpy(copy, frame, 8 + hl);
		copy[0] = (uint8_t)(length >> 24);
		copy[1] = (uint8_t)(length >> 16);
		copy[2] = (uint8_t)(length >> 8);
		copy[3] = (uint8_t)length;
		copy[5] = (uint8_t)(hl >> 16);
		copy[6] = (uint8_t)(hl >> 8);
		copy[7] = (uint8_t)hl;
		copy[4] = 1;
		rc = wire_rem_decode(copy, 8 + hl, &d, scratch, sizeof(scratch));
		if (rc != -EBADMSG)
			T_FAIL("header cut at %u gave %d", hl, rc);
	}
	/* A remark length that points past the header. */
	frame[8 + 13] = 0x7f;
	T_ASSERT_EQ(wire_rem_decode(frame, n, &d, scratch, sizeof(scratch)), -EBADMSG);
}

static void
test_lang_names(void)
{
	T_ASSERT_STREQ(wire_rem_lang_name(WIRE_LANG_JAVA), "JAVA");
	T_ASSERT_STREQ(wire_rem_lang_name(WIRE_LANG_GO), "GO");
	T_ASSERT(wire_rem_lang_name(WIRE_LANG_COUNT) == NULL);
}

T_MAIN(T_CASE(test_roundtrip_json), T_CASE(test_roundtrip_binary), T_CASE(test_json_output_shape),
       T_CASE(test_json_quirks), T_CASE(test_json_fastjson), T_CASE(test_json_bad),
       T_CASE(test_limits), T_CASE(test_binary_bad), T_CASE(test_lang_names))
