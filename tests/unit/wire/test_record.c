// SPDX-License-Identifier: Apache-2.0
/* test_record.c - message records, properties, msgIds, batch bodies, tag hash. */
#include "harness.h"
#include "common/crc32.h"
#include "wire/record.h"

static uint8_t buf[4096];

static void
fill_msg(struct wire_msg *m, bool v6)
{
	static const char props[] = "TAGS\001TagA\002KEYS\001k1 k2";

	memset(m, 0, sizeof(*m));
	m->queue_id = 3;
	m->flag = 7;
	m->queue_offset = 123456789012LL;
	m->phys_offset = (5LL << 48) | 4096;
	m->sys_flag = WIRE_SYSFLAG_TX_COMMIT;
	m->born_ts = 1796059809951LL;
	m->born_host.addr[0] = 10;
	m->born_host.addr[3] = 9;
	m->born_host.port = 40000;
	m->born_host.v6 = v6;
	m->store_ts = 1796059810000LL;
	m->store_host.addr[0] = 127;
	m->store_host.addr[3] = 1;
	m->store_host.port = 10911;
	m->store_host.v6 = v6;
	m->reconsume_times = 2;
	m->prepared_tx_offset = 77;
	m->body = (const uint8_t *)"body bytes";
	m->body_len = 10;
	m->topic = "TopicTest";
	m->topic_len = 9;
	m->props = props;
	m->props_len = sizeof(props) - 1;
}

static void
roundtrip(bool v6)
{
	struct wire_msg m;
	struct wire_msg d;
	long n;

	fill_msg(&m, v6);
	n = wire_rec_encode(&m, buf, sizeof(buf));
	T_ASSERT_EQ(n, (long)wire_rec_size(&m));
	T_ASSERT_EQ(n, 91 + (v6 ? 24 : 0) + 10 + 9 + (long)m.props_len);
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, WIRE_REC_VERIFY_CRC, &d), n);
	T_ASSERT_EQ(d.queue_id, 3);
	T_ASSERT_EQ(d.flag, 7);
	T_ASSERT_EQ(d.queue_offset, m.queue_offset);
	T_ASSERT_EQ(d.phys_offset, m.phys_offset);
	T_ASSERT_EQ(d.sys_flag & WIRE_SYSFLAG_TX_MASK, WIRE_SYSFLAG_TX_COMMIT);
	T_ASSERT_EQ(!!(d.sys_flag & WIRE_SYSFLAG_BORNHOST_V6), v6);
	T_ASSERT_EQ(d.born_ts, m.born_ts);
	T_ASSERT_MEMEQ(d.born_host.addr, m.born_host.addr, 16);
	T_ASSERT_EQ(d.born_host.port, 40000);
	T_ASSERT_EQ(d.store_ts, m.store_ts);
	T_ASSERT_EQ(d.store_host.port, 10911);
	T_ASSERT_EQ(d.reconsume_times, 2);
	T_ASSERT_EQ(d.prepared_tx_offset, 77);
	T_ASSERT_EQ(d.body_crc, crc32_body("body bytes", 10));
	T_ASSERT_EQ(d.body_len, 10);
	T_ASSERT_MEMEQ(d.body, "body bytes", 10);
	T_ASSERT_EQ(d.topic_len, 9);
	T_ASSERT_EQ(d.props_len, m.props_len);

	/* Any truncation is an error, never a partial success. */
	for (long i = 0; i < n; i++) {
		long rc = wire_rec_decode(buf, (size_t)i, 0, &d);

		if (rc != -EBADMSG)
			T_FAIL("truncated at %ld gave %ld", i, rc);
	}
	/* Encoding into any smaller buffer fails cleanly. */
	for (long i = 0; i < n; i++)
		T_ASSERT_EQ(wire_rec_encode(&m, buf, (size_t)i), -ENOBUFS);
}

static void
test_roundtrip_v4(void)
{
	roundtrip(false);
}

static void
test_roundtrip_v6(void)
{
	roundtrip(true);
}

static void
test_decode_errors(void)
{
	struct wire_msg m;
	struct wire_msg d;
	long n;

	fill_msg(&m, false);
	n = wire_rec_encode(&m, buf, sizeof(buf));
	T_ASSERT(n > 0);

	buf[90] ^= 1; /* inside the body */
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, WIRE_REC_VERIFY_CRC, &d), -EILSEQ);
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, 0, &d), n);
	buf[90] ^= 1;

	buf[4] ^= 0xFF; /* magic */
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, 0, &d), -EPROTO);
	buf[4] ^= 0xFF;

	/* TOTALSIZE larger than the fields: readers would disagree, reject. */
	buf[3] += 1;
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n + 1, 0, &d), -EBADMSG);
	buf[3] -= 1;

	/* Body length pointing past the record. */
	buf[84] = 0x7F;
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, 0, &d), -EBADMSG);
	buf[84] = 0;

	/* The v6 flag makes the fixed part longer than TOTALSIZE allows. */
	buf[39] |= WIRE_SYSFLAG_BORNHOST_V6;
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, 0, &d), -EBADMSG);
	buf[39] &= (uint8_t)~WIRE_SYSFLAG_BORNHOST_V6;
	T_ASSERT_EQ(wire_rec_decode(buf, (size_t)n, WIRE_REC_VERIFY_CRC, &d), n);

	/* Encoder refuses bad topic and property lengths. */
	m.topic_len = 0;
	T_ASSERT_EQ(wire_rec_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.topic_len = 128;
	T_ASSERT_EQ(wire_rec_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.topic_len = 9;
	m.props_len = 32768;
	T_ASSERT_EQ(wire_rec_encode(&m, buf, sizeof(buf)), -EINVAL);
}

static void
test_blank(void)
{
	struct wire_msg d;

	T_ASSERT_EQ(wire_rec_encode_blank(1000, buf, sizeof(buf)), 8);
	T_ASSERT_EQ(wire_rec_decode(buf, 8, 0, &d), -ENODATA);
	T_ASSERT_EQ(d.total_size, 1000);
	T_ASSERT_EQ(wire_rec_encode_blank(4, buf, sizeof(buf)), 8);
	T_ASSERT_EQ(wire_rec_decode(buf, 8, 0, &d), -EBADMSG);
	T_ASSERT_EQ(wire_rec_encode_blank(8, buf, 7), -ENOBUFS);
}

static void
test_props(void)
{
	static const char p1[] = "TAGS\001A\002KEYS\001k1\002";
	static const char p2[] = "TAGS\001A\002\002x\002\001v\002k\001\002ab\001c\002TAGS\001B";
	struct wire_kv kv;
	const char *v;
	size_t vlen;
	size_t pos = 0;
	char out[64];
	size_t len = 0;
	int items = 0;

	while (wire_props_next(p1, sizeof(p1) - 1, &pos, &kv))
		items++;
	T_ASSERT_EQ(items, 2);
	/* Java skips "x", "\1v" and "k\1"; the later TAGS wins; no trailing \2 is fine. */
	pos = 0;
	items = 0;
	while (wire_props_next(p2, sizeof(p2) - 1, &pos, &kv))
		items++;
	T_ASSERT_EQ(items, 3);
	T_ASSERT(wire_props_get(p2, sizeof(p2) - 1, "TAGS", &v, &vlen));
	T_ASSERT_EQ(vlen, 1);
	T_ASSERT_EQ(v[0], 'B');
	T_ASSERT(wire_props_get(p2, sizeof(p2) - 1, "ab", &v, &vlen));
	T_ASSERT(!wire_props_get(p2, sizeof(p2) - 1, "k", &v, &vlen));
	T_ASSERT(!wire_props_get("", 0, "TAGS", &v, &vlen));

	T_ASSERT_EQ(wire_props_append(out, sizeof(out), &len, "TAGS", 4, "A", 1), 0);
	T_ASSERT_EQ(wire_props_append(out, sizeof(out), &len, "KEYS", 4, "k1", 2), 0);
	T_ASSERT_EQ(len, sizeof(p1) - 1);
	T_ASSERT_MEMEQ(out, p1, len);
	T_ASSERT_EQ(wire_props_append(out, sizeof(out), &len, "", 0, "x", 1), -EINVAL);
	T_ASSERT_EQ(wire_props_append(out, sizeof(out), &len, "a\001", 2, "x", 1), -EINVAL);
	T_ASSERT_EQ(wire_props_append(out, sizeof(out), &len, "a", 1, "x\002", 2), -EINVAL);
	T_ASSERT_EQ(wire_props_append(out, len + 3, &len, "a", 1, "xy", 2), -ENOBUFS);
	/* numbers: digits only, at least one, saturating */
	{
		static const char num[] = "A\0013\002B\001-1\002C\001\002D\0011x\002"
					  "E\00199999999999999999999999\002F\00100042";
		uint64_t u = 7;

		T_ASSERT(wire_props_get_uint(num, sizeof(num) - 1, "A", &u) && u == 3);
		T_ASSERT(!wire_props_get_uint(num, sizeof(num) - 1, "B", &u));
		T_ASSERT(!wire_props_get_uint(num, sizeof(num) - 1, "C", &u));
		T_ASSERT(!wire_props_get_uint(num, sizeof(num) - 1, "D", &u));
		T_ASSERT(!wire_props_get_uint(num, sizeof(num) - 1, "Z", &u));
		T_ASSERT(wire_props_get_uint(num, sizeof(num) - 1, "E", &u) && u == UINT64_MAX);
		T_ASSERT(wire_props_get_uint(num, sizeof(num) - 1, "F", &u) && u == 42);
	}
	/* a copy without some keys: the others in order, short items skipped as Java does */
	{
		static const char src[] =
			"TAGS\001A\002DELAY\0013\002x\002KEYS\001k1\002DELAY\0014";
		static const char *const skip[] = {"DELAY", "NOPE", NULL};
		static const char *const none[] = {NULL};

		T_ASSERT_EQ(
			wire_props_copy_except(out, sizeof(out), &len, src, sizeof(src) - 1, skip),
			0);
		T_ASSERT_EQ(len, sizeof(p1) - 1);
		T_ASSERT_MEMEQ(out, p1, len);
		T_ASSERT_EQ(wire_props_copy_except(out, 8, &len, src, sizeof(src) - 1, none),
			    -ENOBUFS);
	}
}

static void
test_msgid(void)
{
	struct wire_host h = {.addr = {127, 0, 0, 1}, .port = 19876};
	struct wire_host g;
	char id[WIRE_MSGID_MAX];
	int64_t off;

	T_ASSERT_EQ(wire_msgid_encode(&h, 0, id), 32);
	T_ASSERT_STREQ(id, "7F00000100004DA40000000000000000");
	T_ASSERT_EQ(wire_msgid_encode(&h, 0x0123456789ABCDEFLL, id), 32);
	T_ASSERT_EQ(wire_msgid_decode(id, 32, &g, &off), 0);
	T_ASSERT_EQ(off, 0x0123456789ABCDEFLL);
	T_ASSERT_EQ(g.port, 19876);
	T_ASSERT(!g.v6);
	T_ASSERT_MEMEQ(g.addr, h.addr, 4);
	/* Lowercase is accepted; wrong lengths and non-hex are not. */
	T_ASSERT_EQ(wire_msgid_decode("7f00000100004da40000000000000000", 32, &g, &off), 0);
	T_ASSERT_EQ(wire_msgid_decode(id, 31, &g, &off), -EINVAL);
	T_ASSERT_EQ(wire_msgid_decode("7G00000100004DA40000000000000000", 32, &g, &off), -EINVAL);

	h.v6 = true;
	h.addr[15] = 0xAB;
	T_ASSERT_EQ(wire_msgid_encode(&h, -1, id), 56);
	T_ASSERT_EQ(wire_msgid_decode(id, 56, &g, &off), 0);
	T_ASSERT(g.v6);
	T_ASSERT_EQ(g.addr[15], 0xAB);
	T_ASSERT_EQ(off, -1);
}

static void
test_batch(void)
{
	struct wire_batch_item in[3] = {
		{.flag = 1,
		 .body = (const uint8_t *)"a",
		 .body_len = 1,
		 .props = "K\001V",
		 .props_len = 3},
		{.flag = 2, .body = NULL, .body_len = 0, .props = NULL, .props_len = 0},
		{.flag = 3,
		 .body = (const uint8_t *)"ccc",
		 .body_len = 3,
		 .props = "",
		 .props_len = 0},
	};
	struct wire_batch_item it;
	size_t len = 0;
	size_t pos = 0;
	int n = 0;

	for (int i = 0; i < 3; i++)
		T_ASSERT_EQ(wire_batch_append(buf, sizeof(buf), &len, &in[i]), 0);
	while (wire_batch_next(buf, len, &pos, &it) == 1) {
		T_ASSERT_EQ(it.flag, in[n].flag);
		T_ASSERT_EQ(it.body_len, in[n].body_len);
		T_ASSERT_EQ(it.props_len, in[n].props_len);
		n++;
	}
	T_ASSERT_EQ(n, 3);
	T_ASSERT_EQ(pos, len);
	/* A cut anywhere inside the last item is malformed. */
	for (size_t cut = len - 24; cut < len; cut++) {
		pos = 0;
		T_ASSERT_EQ(wire_batch_next(buf, cut, &pos, &it), 1);
		T_ASSERT_EQ(wire_batch_next(buf, cut, &pos, &it), 1);
		T_ASSERT_EQ(wire_batch_next(buf, cut, &pos, &it), -EBADMSG);
	}
	/* Negative property length. */
	buf[20 + 1] = 0xFF;
	pos = 0;
	T_ASSERT_EQ(wire_batch_next(buf, len, &pos, &it), -EBADMSG);
	len = 0;
	T_ASSERT_EQ(wire_batch_append(buf, 10, &len, &in[0]), -ENOBUFS);
}

static void
test_tag_hash(void)
{
	/* Values of java.lang.String.hashCode(). */
	T_ASSERT_EQ(wire_tag_hash("TagA", 4), 2598919);
	T_ASSERT_EQ(wire_tag_hash("", 0), 0);
	T_ASSERT_EQ(wire_tag_hash("hello", 5), 99162322);
	T_ASSERT_EQ(wire_tag_hash("\xe4\xb8\xad", 3), 0x4E2D);	    /* U+4E2D */
	T_ASSERT_EQ(wire_tag_hash("\xf0\x9f\x98\x80", 4), 1772899); /* U+1F600 -> surrogates */
	T_ASSERT_EQ(wire_tag_hash("\xff", 1), 0xFFFD);		    /* replacement char */
	T_ASSERT_EQ(wire_tag_hash("\xe4\xb8", 2), 0xFFFD);	    /* truncated: one */
	T_ASSERT_EQ(wire_tag_hash("\xe4\xb8"
				  "a",
				  3),
		    31 * 0xFFFD + 97);
	/* Wraps like a Java int. */
	T_ASSERT_EQ(wire_tag_hash("polygenelubricants", 18), (int32_t)0x80000000);
}

static void
test_host_format(void)
{
	struct wire_host v4 = {.addr = {10, 0, 255, 1}, .port = 10911};
	struct wire_host v6 = {.port = 65535, .v6 = true};
	char s[32];

	wire_host_format(&v4, s, sizeof(s));
	T_ASSERT_STREQ(s, "10.0.255.1:10911");
	wire_host_format(&v6, s, sizeof(s));
	T_ASSERT_STREQ(s, "[ipv6]:65535");
	wire_host_format(&v4, s, 6); /* cut, still a string */
	T_ASSERT_STREQ(s, "10.0.");
}

T_MAIN(T_CASE(test_roundtrip_v4), T_CASE(test_roundtrip_v6), T_CASE(test_decode_errors),
       T_CASE(test_blank), T_CASE(test_props), T_CASE(test_msgid), T_CASE(test_batch),
       T_CASE(test_tag_hash), T_CASE(test_host_format))
