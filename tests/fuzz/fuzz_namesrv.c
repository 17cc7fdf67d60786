// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_namesrv.c - the NameServer's request handlers: frames in, responses out.
 *
 * The input is a stream of remoting frames, run through ns_handle() as the
 * server does: the reader role first, the writer role when the request
 * changes state. Frame i arrives on connection i % 3 at time i seconds; at
 * the end one connection closes and an expiry scan drops everything, so the
 * route table's publish and reclaim paths run on every input. KV config
 * stays in memory (no files).
 *
 * Oracle beyond "no crash, no leak": every response decodes, echoes the
 * request's opaque with the response flag, and every JSON body the server
 * writes (routes, cluster info, topic lists, KV lists, data versions) is
 * strict JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <json-c/json.h>
#include <urcu/urcu-memb.h>

#include "common/log.h"
#include "control/ns.h"
#include "wire/remoting.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_FRAME_MAX (4u << 20)

static struct wire_rem_cmd req;
static struct wire_rem_cmd rsp;

static void
check_json(const uint8_t *p, size_t n)
{
	struct json_tokener *tok = json_tokener_new_ex(32);
	struct json_object *o;

	if (tok == NULL)
		abort();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, (const char *)p, (int)n);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != n)
		abort();
	json_object_put(o);
	json_tokener_free(tok);
}

static void
check_response(const uint8_t *frame, size_t len, const uint8_t *out, size_t out_len)
{
	size_t cap = out_len * 3 + 256;
	char *s1 = malloc(len * 3 + 256);
	char *s2 = malloc(cap);
	size_t flen;

	if (s1 == NULL || s2 == NULL)
		abort();
	/* The request decoded on the server, so it decodes here. */
	if (wire_rem_decode(frame, len, &req, s1, len * 3 + 256) != 0)
		abort();
	if (wire_rem_frame_len(out, out_len, SIZE_MAX, &flen) != 0 || flen != out_len ||
	    wire_rem_decode(out, out_len, &rsp, s2, cap) != 0)
		abort();
	if (rsp.opaque != req.opaque || !(rsp.flag & WIRE_REM_FLAG_RESPONSE) ||
	    rsp.serialize != req.serialize)
		abort();
	if (rsp.body_len > 0)
		check_json(rsp.body, rsp.body_len);
	free(s1);
	free(s2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int registered;
	struct ns_conf conf = {.order_msg = true, .kv_path = "", .admin = {.any = true}};
	struct ns_state *st;
	size_t off = 0;
	uint64_t i = 0;

	if (!registered) {
		urcu_memb_register_thread();
		log_set_level(LOG_LVL_ERR); /* every registration logs at info */
		registered = 1;
	}
	if (ns_state_create(&conf, &st) != 0)
		return 0;
	while (off < size) {
		uint64_t conn = i % 3 + 1;
		uint64_t now = 1000 * (i + 1);
		uint8_t *out = NULL;
		size_t out_len = 0;
		size_t flen;
		int rc;

		if (wire_rem_frame_len(data + off, size - off, FUZZ_FRAME_MAX, &flen) != 0)
			break;
		rc = ns_handle(st, NS_ROLE_READER, conn, htonl(INADDR_LOOPBACK), now, data + off,
			       flen, &out, &out_len);
		if (rc == NS_HANDLE_WRITER)
			rc = ns_handle(st, NS_ROLE_WRITER, conn, htonl(INADDR_LOOPBACK), now,
				       data + off, flen, &out, &out_len);
		if (rc < 0 && out != NULL)
			abort();
		if (rc == 0 && out != NULL)
			check_response(data + off, flen, out, out_len);
		free(out);
		if (rc < 0)
			break; /* the server closes this connection */
		off += flen;
		i++;
	}
	if (ns_conn_closed(st, 2) < 0 || ns_expire(st, 1000 * (i + 1) + 1000, 500) < 0)
		abort();
	if (ns_live_brokers(st) != 0 && ns_expire(st, UINT64_MAX / 2, 0) < 0)
		abort();
	ns_state_destroy(st);
	return 0;
}
