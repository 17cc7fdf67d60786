/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remoting.h - a blocking RocketMQ remoting (TCP) client: one connection,
 * one request at a time, matched to its response by opaque.
 *
 * libsprocket uses it to read routes from NameServers; the broker's control
 * thread uses it to register with them. It is control-path code: it
 * allocates and blocks (bounded by the timeouts given).
 *
 * Ownership: a struct sp_rem belongs to one thread at a time.
 */
#ifndef SPROCKET_REMOTING_H
#define SPROCKET_REMOTING_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "wire/remoting.h"

struct sp_rem;

/* A response: @cmd points into @frame and @scratch (both malloc'd, owned). */
struct sp_rem_resp {
	struct wire_rem_cmd cmd;
	uint8_t *frame;
	char *scratch;
};

/**
 * sp_rem_connect() - connect to @addr ("a.b.c.d:port" or "host:port").
 * Context: control thread; blocks up to @timeout_ms.
 * Return: 0, -EINVAL bad address, -ETIMEDOUT, -ECONNREFUSED, -errno.
 */
MUST_CHECK int sp_rem_connect(const char *addr, uint32_t timeout_ms, struct sp_rem **out);

/**
 * sp_rem_call() - send @req (its opaque is assigned here) with @body, wait for
 * the response with the same opaque. Requests the server pushes meanwhile
 * are skipped.
 * @frame_max: largest response frame accepted (0: WIRE_REM_FRAME_MAX_DEFAULT).
 *
 * Context: the owning thread; blocks up to @timeout_ms.
 * Return: 0 with @resp filled (free with sp_rem_resp_free()); -ETIMEDOUT;
 * -ECONNRESET the peer closed; -EBADMSG/-EPROTO/-EMSGSIZE bad frame (the
 * connection is unusable after any error: close it).
 */
MUST_CHECK int sp_rem_call(struct sp_rem *c, struct wire_rem_cmd *req, const void *body,
			   size_t body_len, uint32_t timeout_ms, size_t frame_max,
			   struct sp_rem_resp *resp);

/**
 * sp_rem_wake() - make a call blocked on @c (in another thread) fail now, and
 * every later one: shutdown(2) of the connection, which stays open until
 * sp_rem_close().
 * Context: any thread, while @c is open (the caller's lock keeps it so).
 */
void sp_rem_wake(struct sp_rem *c);

/**
 * sp_rem_next() - the next frame the server sends, a request it pushes
 * (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) or a response.
 * Context: the owning thread; blocks up to @timeout_ms.
 * Return: 0 with @resp filled (free with sp_rem_resp_free()); -ETIMEDOUT
 * (nothing yet: the connection is still usable); other errors as sp_rem_call().
 */
MUST_CHECK int sp_rem_next(struct sp_rem *c, uint32_t timeout_ms, size_t frame_max,
			   struct sp_rem_resp *resp);

/**
 * sp_rem_credentials() - sign every later request on @c as RocketMQ's ACL
 * client does (AccessKey and Signature extFields, HmacSHA1 with @sk;
 * docs/security.md). @ak is copied; @sk is absorbed and not kept.
 * Return: 0, -EINVAL (empty or too long), -ENOMEM.
 */
MUST_CHECK int sp_rem_credentials(struct sp_rem *c, const char *ak, const char *sk);
struct hmac_sha1;
/* As sp_rem_credentials(), with the HMAC state sp_rem_credentials() would make of the secret. */
MUST_CHECK int sp_rem_credentials_key(struct sp_rem *c, const char *ak,
				      const struct hmac_sha1 *key);

void sp_rem_resp_free(struct sp_rem_resp *resp);
void sp_rem_close(struct sp_rem *c);

#endif /* SPROCKET_REMOTING_H */
