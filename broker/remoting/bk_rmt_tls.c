// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt_tls.c - TLS on the remoting port (OpenSSL; docs/security.md).
 *
 * RocketMQ's modes (tlsServerMode): disabled (plain TCP), permissive (a
 * connection whose first byte is a TLS handshake record, 0x16, speaks TLS;
 * any other speaks plain TCP, as RocketMQ's TlsModeHandler decides), and
 * enforcing (plain TCP is refused and closed, with a log line). The choice
 * is made on the first byte, peeked, so nothing is consumed twice.
 *
 * The socket stays non-blocking; OpenSSL's WANT_READ means "wait for
 * EPOLLIN" and WANT_WRITE means "wait for EPOLLOUT, then read again" (the
 * handshake writes inside SSL_read). Session tickets and renegotiation are
 * off, so after the handshake a read never writes and a write never reads:
 * pausing a connection's reads for its output stays safe. TLS 1.2 is the
 * oldest version taken.
 * All of it runs on the control thread; the dataplane cores never see TLS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "bk_rmt_share.h"
#include "common/log.h"

static int
key_password(char *buf, int size, int rwflag, void *u)
{
	const char *pw = u;
	size_t n = strlen(pw);

	(void)rwflag;
	if (n >= (size_t)size)
		return 0;
	memcpy(buf, pw, n);
	return (int)n;
}

static void
ssl_why(char *why, size_t len, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(why, len, "%s: %s", what, buf[0] ? buf : "unknown error");
	ERR_clear_error();
}

int
bk_rmt_tls_init(struct bk_rmt *r, const struct bk_rmt_tls *t, char *why, size_t why_len)
{
	SSL_CTX *ctx;

	r->tls_mode = t->mode;
	if (t->mode == BK_TLS_DISABLED)
		return 0;
	if (!t->cert || !t->cert[0] || !t->key || !t->key[0]) {
		snprintf(
			why, why_len,
			"tlsServerMode=%s needs tlsServerCertPath and tlsServerKeyPath (PEM files)",
			t->mode == BK_TLS_PERMISSIVE ? "permissive" : "enforcing");
		return -EINVAL;
	}
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		ssl_why(why, why_len, "SSL_CTX_new");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_num_tickets(ctx, 0);
	/* a client that closes without close_notify (most do) is a close, not a failure */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (t->key_password && t->key_password[0]) {
		SSL_CTX_set_default_passwd_cb(ctx, key_password);
		SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)(uintptr_t)t->key_password);
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
		ssl_why(why, why_len, "tlsServerCertPath");
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1) {
		ssl_why(why, why_len, "tlsServerKeyPath");
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_why(why, why_len, "tlsServerKeyPath does not match tlsServerCertPath");
		goto fail;
	}
	/* the password callback holds a pointer into the configuration: not needed any more */
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	if (t->auth_client) {
		if (!t->trust || !t->trust[0] ||
		    SSL_CTX_load_verify_locations(ctx, t->trust, NULL) != 1) {
			ssl_why(why, why_len,
				"tlsServerAuthClient needs tlsServerTrustCertPath (the clients' "
				"CA, PEM)");
			goto fail;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	r->tls = ctx;
	return 0;
fail:
	SSL_CTX_free(ctx);
	return -EINVAL;
}

void
bk_rmt_tls_fini(struct bk_rmt *r)
{
	if (r->tls)
		log_info(TAG, "TLS: %" PRIu64 " connections spoke TLS, %" PRIu64 " failed",
			 r->tls_conns, r->tls_failed);
	SSL_CTX_free(r->tls);
	r->tls = NULL;
}

void
bk_rmt__tls_free(struct rconn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
}

/* The first byte decides (peeked). Return: 0 decided, -EAGAIN not yet, 0-byte EOF as -EPIPE. */
static int
decide(struct bk_rmt *r, struct rconn *c)
{
	uint8_t b;
	ssize_t k = recv(c->fd, &b, 1, MSG_PEEK);

	if (k == 0)
		return -EPIPE;
	if (k < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	if (b != 0x16) {
		if (r->tls_mode == BK_TLS_ENFORCING)
			return -EPROTONOSUPPORT;
		c->tls_state = RTLS_PLAIN;
		return 0;
	}
	c->ssl = SSL_new(r->tls);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
		return -ENOMEM;
	SSL_set_accept_state(c->ssl);
	c->tls_state = RTLS_ON;
	r->tls_conns++;
	return 0;
}

/* After an SSL call returned @k <= 0. Return: -EAGAIN, 0 (orderly close), -EPROTO. */
static ssize_t
ssl_fail(struct bk_rmt *r, struct rconn *c, int k, char *why, size_t why_len)
{
	int e = SSL_get_error(c->ssl, k);

	switch (e) {
	case SSL_ERROR_WANT_READ:
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		c->tls_want_out = true;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return -EAGAIN;
		ERR_clear_error();
		return 0; /* the peer went away mid-record */
	default:
		ssl_why(why, why_len, SSL_is_init_finished(c->ssl) ? "TLS" : "TLS handshake");
		r->tls_failed++;
		return -EPROTO;
	}
}

ssize_t
bk_rmt__io_recv(struct bk_rmt *r, struct rconn *c, void *buf, size_t n, char *why, size_t why_len)
{
	int k;

	if (c->tls_state == RTLS_UNDECIDED) {
		int err = decide(r, c);

		if (err == -EPIPE)
			return 0;
		if (err == -EPROTONOSUPPORT) {
			snprintf(why, why_len,
				 "plain TCP on a TLS-only port (tlsServerMode=enforcing)");
			return -EPROTO;
		}
		if (err)
			return err;
	}
	if (!c->ssl) {
		ssize_t s = recv(c->fd, buf, n, 0);

		if (s >= 0)
			return s;
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	}
	k = SSL_read(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
	if (k > 0)
		return k;
	return ssl_fail(r, c, k, why, why_len);
}

ssize_t
bk_rmt__io_send(struct bk_rmt *r, struct rconn *c, const void *buf, size_t n, char *why,
		size_t why_len)
{
	int k;

	if (!c->ssl) {
		ssize_t s;

		if (c->tls_state == RTLS_UNDECIDED)
			return -EAGAIN; /* nothing is sent before the client's first byte */
		s = send(c->fd, buf, n, MSG_NOSIGNAL);
		if (s >= 0)
			return s;
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	}
	k = SSL_write(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
	if (k > 0)
		return k;
	{
		ssize_t e = ssl_fail(r, c, k, why, why_len);

		return e == 0 ? -EPIPE : e;
	}
}
