// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_dp.c - libFuzzer target for wire codec B (docs/protocol.md).
 *
 * The input is decoded as a datagram header, then as every op's request and
 * response body, twice: the whole input, and the payload after a 48-byte
 * header (so the corpus of real datagrams reaches deep into the bodies).
 * Besides crashes and overreads (ASan), it checks the codec's one algebraic
 * promise: whatever decodes re-encodes to exactly the input bytes, since the
 * format has no ignored or optional bits. A mismatch aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/dp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_CAP (1u << 20)

static uint8_t out[OUT_CAP];
static uint8_t err_msg[256];

static void
check(long n, const uint8_t *in, size_t len)
{
	if (n < 0)
		return;
	if ((size_t)n != len || memcmp(out, in, len) != 0)
		abort();
}

static void
fuzz_req(uint16_t op, const uint8_t *m, size_t len)
{
	switch (op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH: {
		struct wire_dp_send_req r;

		if (wire_dp_send_req_decode(op, m, len, &r) == 0)
			check(wire_dp_send_req_encode(op, &r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_PULL: {
		struct wire_dp_pull_req r;
		uint64_t sum = 0; /* touch every element; wraps */

		if (wire_dp_pull_req_decode(m, len, &r) != 0)
			break;
		for (uint16_t i = 0; i < r.tag_count; i++)
			sum += (uint64_t)wire_dp_pull_req_tag(&r, i);
		(void)sum;
		check(wire_dp_pull_req_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET: {
		struct wire_dp_offset_req r;

		if (wire_dp_offset_req_decode(op, m, len, &r) == 0)
			check(wire_dp_offset_req_encode(op, &r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_SEND_BACK: {
		struct wire_dp_send_back_req r;

		if (wire_dp_send_back_req_decode(m, len, &r) == 0)
			check(wire_dp_send_back_req_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_CONNECT: {
		struct wire_dp_connect_req r;

		if (wire_dp_connect_req_decode(m, len, &r) == 0)
			check(wire_dp_connect_req_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_DISCONNECT:
		if (wire_dp_disconnect_req_decode(m, len) == 0)
			check(wire_dp_disconnect_req_encode(out, OUT_CAP), m, len);
		break;
	case WIRE_DP_OP_PING: {
		struct wire_dp_ping_req r;

		if (wire_dp_ping_req_decode(m, len, &r) == 0)
			check(wire_dp_ping_req_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_REPL: {
		struct wire_dp_repl_req r;

		if (wire_dp_repl_req_decode(m, len, &r) == 0)
			check(wire_dp_repl_req_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	default:
		break;
	}
}

static void
fuzz_resp(uint16_t op, const uint8_t *m, size_t len)
{
	switch (op) {
	case WIRE_DP_OP_SEND:
	case WIRE_DP_OP_SEND_BATCH: {
		struct wire_dp_send_resp r;
		uint64_t sum = 0; /* touch every element; wraps */

		if (wire_dp_send_resp_decode(op, m, len, &r) != 0)
			break;
		if (op == WIRE_DP_OP_SEND_BATCH)
			for (uint32_t i = 0; i < r.count; i++)
				sum += (uint64_t)wire_dp_send_resp_phys(&r, i);
		(void)sum;
		check(wire_dp_send_resp_encode(op, &r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_PULL: {
		struct wire_dp_pull_resp r;

		if (wire_dp_pull_resp_decode(m, len, &r) == 0)
			check(wire_dp_pull_resp_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_QUERY_OFFSET:
	case WIRE_DP_OP_UPDATE_OFFSET:
	case WIRE_DP_OP_GET_MIN_OFFSET:
	case WIRE_DP_OP_GET_MAX_OFFSET:
	case WIRE_DP_OP_SEARCH_OFFSET: {
		struct wire_dp_offset_resp r;

		if (wire_dp_offset_resp_decode(op, m, len, &r) == 0)
			check(wire_dp_offset_resp_encode(op, &r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_SEND_BACK:
	case WIRE_DP_OP_DISCONNECT: {
		struct wire_dp_resp_head h;

		if (wire_dp_bare_resp_decode(op, m, len, &h) == 0)
			check(wire_dp_bare_resp_encode(op, &h, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_CONNECT: {
		struct wire_dp_connect_resp r;

		if (wire_dp_connect_resp_decode(m, len, &r) == 0)
			check(wire_dp_connect_resp_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_PING: {
		struct wire_dp_ping_resp r;

		if (wire_dp_ping_resp_decode(m, len, &r) == 0)
			check(wire_dp_ping_resp_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	case WIRE_DP_OP_REPL: {
		struct wire_dp_repl_resp r;

		if (wire_dp_repl_resp_decode(m, len, &r) == 0)
			check(wire_dp_repl_resp_encode(&r, out, OUT_CAP), m, len);
		break;
	}
	default:
		break;
	}
}

static void
fuzz_bodies(const uint8_t *m, size_t len)
{
	struct wire_dp_resp_head h;
	struct wire_dp_reset rs;

	for (uint16_t op = 1; op <= WIRE_DP_OP_MAX; op++) {
		fuzz_req(op, m, len);
		fuzz_resp(op, m, len);
	}
	if (wire_dp_resp_head_decode(m, len, &h) == 0 && h.status != WIRE_DP_ST_SUCCESS) {
		/* an error response for any op decodes with that op's decoder */
		for (uint16_t op = 1; op <= WIRE_DP_OP_MAX; op++) {
			long n = wire_dp_resp_error_encode(op, &h, err_msg, sizeof(err_msg));

			if (n > 0)
				fuzz_resp(op, err_msg, (size_t)n);
		}
	}
	if (wire_dp_reset_decode(m, len, &rs) == 0)
		check(wire_dp_reset_encode(&rs, out, OUT_CAP), m, len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_dp_hdr h;

	if (size > OUT_CAP)
		return 0;
	if (wire_dp_hdr_decode(data, size, &h) == 0) {
		if (wire_dp_hdr_encode(&h, out, OUT_CAP) != WIRE_DP_HDR_LEN ||
		    memcmp(out, data, WIRE_DP_HDR_LEN) != 0)
			abort();
		/* geometry at a few packet sizes: must not crash, result is free */
		if (wire_dp_hdr_check_geometry(&h, 1424) == -EINVAL ||
		    wire_dp_hdr_check_geometry(&h, WIRE_DP_PAYLOAD_MIN) == -EINVAL)
			abort();
	}
	fuzz_bodies(data, size);
	if (size >= WIRE_DP_HDR_LEN)
		fuzz_bodies(data + WIRE_DP_HDR_LEN, size - WIRE_DP_HDR_LEN);
	return 0;
}
