// SPDX-License-Identifier: Apache-2.0
/*
 * test_remoting.c - sp_rem_* against a scripted server on 127.0.0.1 (a thread
 * in the test process): responses matched by opaque past pushed requests and
 * stale replies, frames split and coalesced, and every failure a caller can
 * meet (timeout, EOF, bad frame, oversized frame, refused connect, bad
 * address) returned rather than hung on. The real NameServer is in
 * tests/integration/test_breg.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"
#include "sprocket/remoting.h"

enum script {
	S_MATCH,     /* pushed request + stale reply, then the answer in two pieces */
	S_COALESCED, /* the answer and a pushed request in one write */
	S_SILENT,    /* read the request, answer nothing */
	S_EOF,	     /* read the request, close */
	S_GARBAGE,   /* an impossible frame length */
	S_HUGE,	     /* a frame larger than the caller accepts */
};

struct server {
	int lfd;
	uint16_t port;
	enum script script;
	int calls; /* requests to serve */
	pthread_t thr;
};

static uint8_t req_buf[1 << 16];
static char req_scratch[1 << 18];

/* Read one request frame. Return: its opaque, or -1 at EOF. */
static int32_t
read_request(int fd, struct wire_rem_cmd *cmd)
{
	size_t len = 0;
	size_t flen = 0;

	for (;;) {
		ssize_t n;

		if (len >= 4 && wire_rem_frame_len(req_buf, len, sizeof(req_buf), &flen) == 0)
			break;
		n = recv(fd, req_buf + len, sizeof(req_buf) - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
	}
	T_ASSERT_EQ(len, flen); /* one request at a time */
	T_ASSERT_EQ(wire_rem_decode(req_buf, flen, cmd, req_scratch, sizeof(req_scratch)), 0);
	return cmd->opaque;
}

/* Encode a frame into @buf. Return: its length. */
static size_t
frame(uint8_t *buf, size_t cap, int32_t code, int32_t opaque, int32_t flag, const char *body)
{
	struct wire_rem_cmd c = {.code = code,
				 .opaque = opaque,
				 .flag = flag,
				 .version = WIRE_REM_VERSION_V4_9_8,
				 .serialize = WIRE_REM_JSON};
	size_t n = 0;

	c.body = (const uint8_t *)body;
	c.body_len = body != NULL ? (uint32_t)strlen(body) : 0;
	T_ASSERT_EQ(wire_rem_ext_add(&c, "k", "v"), 0);
	T_ASSERT_EQ(wire_rem_encode(&c, buf, cap, &n), 0);
	return n;
}

static void
send_all(int fd, const void *p, size_t n)
{
	T_ASSERT_EQ(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void *
server_main(void *arg)
{
	struct server *s = arg;
	struct wire_rem_cmd *req = calloc(1, sizeof(*req));
	int fd = accept(s->lfd, NULL, NULL);
	uint8_t out[4096];

	T_ASSERT(fd >= 0 && req != NULL);
	for (int i = 0; i < s->calls; i++) {
		int32_t op = read_request(fd, req);
		size_t n;
		size_t m;

		if (op < 0)
			break;
		T_ASSERT_EQ(req->code, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC);
		T_ASSERT_EQ(req->body_len, 3);
		T_ASSERT_MEMEQ(req->body, "req", 3);
		switch (s->script) {
		case S_MATCH:
			/* A pushed request with the caller's opaque: still not its answer. */
			n = frame(out, sizeof(out), WIRE_REQ_NOTIFY_CONSUMER_IDS_CHANGED, op, 0,
				  NULL);
			n += frame(out + n, sizeof(out) - n, 1, op + 1000, WIRE_REM_FLAG_RESPONSE,
				   "stale");
			m = frame(out + n, sizeof(out) - n, 0, op, WIRE_REM_FLAG_RESPONSE, "hello");
			send_all(fd, out, n + 5);
			usleep(50000);
			send_all(fd, out + n + 5, m - 5);
			break;
		case S_COALESCED:
			n = frame(out, sizeof(out), 0, op, WIRE_REM_FLAG_RESPONSE, "first");
			n += frame(out + n, sizeof(out) - n, 39, 7, 0, "pushed");
			send_all(fd, out, n);
			break;
		case S_SILENT:
			break;
		case S_EOF:
			close(fd);
			fd = -1;
			break;
		case S_GARBAGE:
			memcpy(out, "\0\0\0\2\0\0\0\0", 8);
			send_all(fd, out, 8);
			break;
		case S_HUGE:
			n = frame(out, sizeof(out), 0, op, WIRE_REM_FLAG_RESPONSE,
				  "0123456789012345678901234567890123456789");
			send_all(fd, out, n);
			break;
		}
		if (fd < 0)
			break;
	}
	/* Hold the connection until the client is done with it. */
	if (fd >= 0) {
		char b;

		while (recv(fd, &b, 1, 0) > 0)
			;
		close(fd);
	}
	free(req);
	return NULL;
}

static void
server_start(struct server *s, enum script script, int calls)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);

	s->script = script;
	s->calls = calls;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(s->lfd >= 0);
	T_ASSERT_EQ(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_ASSERT_EQ(listen(s->lfd, 4), 0);
	T_ASSERT_EQ(getsockname(s->lfd, (struct sockaddr *)&sa, &sl), 0);
	s->port = ntohs(sa.sin_port);
	T_ASSERT_EQ(pthread_create(&s->thr, NULL, server_main, s), 0);
}

static void
server_join(struct server *s)
{
	T_ASSERT_EQ(pthread_join(s->thr, NULL), 0);
	close(s->lfd);
}

static struct sp_rem *
connect_to(const struct server *s)
{
	char addr[32];
	struct sp_rem *c = NULL;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s->port);
	T_ASSERT_EQ(sp_rem_connect(addr, 5000, &c), 0);
	T_ASSERT(c != NULL);
	return c;
}

/* One GET_ROUTEINFO_BY_TOPIC with body "req". Return: sp_rem_call()'s. */
static int
call(struct sp_rem *c, uint32_t timeout_ms, size_t frame_max, struct sp_rem_resp *resp)
{
	struct wire_rem_cmd *req = calloc(1, sizeof(*req));
	int rc;

	T_ASSERT(req != NULL);
	req->code = WIRE_REQ_GET_ROUTEINFO_BY_TOPIC;
	req->version = WIRE_REM_VERSION_V4_9_8;
	req->language = WIRE_LANG_OTHER;
	T_ASSERT_EQ(wire_rem_ext_add(req, "topic", "T"), 0);
	rc = sp_rem_call(c, req, "req", 3, timeout_ms, frame_max, resp);
	free(req);
	return rc;
}

static void
test_match_by_opaque(void)
{
	struct server s;
	struct sp_rem *c;
	struct sp_rem_resp resp;

	server_start(&s, S_MATCH, 3);
	c = connect_to(&s);
	for (int i = 0; i < 3; i++) {
		T_ASSERT_EQ(call(c, 10000, 0, &resp), 0);
		T_ASSERT_EQ(resp.cmd.code, 0);
		T_ASSERT_EQ(resp.cmd.opaque, i + 1);
		T_ASSERT(resp.cmd.flag & WIRE_REM_FLAG_RESPONSE);
		T_ASSERT_EQ(resp.cmd.body_len, 5);
		T_ASSERT_MEMEQ(resp.cmd.body, "hello", 5);
		T_ASSERT(wire_rem_ext_get(&resp.cmd, "k") != NULL);
		sp_rem_resp_free(&resp);
	}
	sp_rem_close(c);
	server_join(&s);
}

/* The answer shares a segment with a pushed request the next call skips. */
static void
test_coalesced(void)
{
	struct server s;
	struct sp_rem *c;
	struct sp_rem_resp resp;

	server_start(&s, S_COALESCED, 2);
	c = connect_to(&s);
	for (int i = 0; i < 2; i++) {
		T_ASSERT_EQ(call(c, 10000, 0, &resp), 0);
		T_ASSERT_EQ(resp.cmd.opaque, i + 1);
		T_ASSERT_MEMEQ(resp.cmd.body, "first", 5);
		sp_rem_resp_free(&resp);
	}
	sp_rem_close(c);
	server_join(&s);
}

static void
test_timeout(void)
{
	struct server s;
	struct sp_rem *c;
	struct sp_rem_resp resp;
	uint64_t t0;

	server_start(&s, S_SILENT, 1);
	c = connect_to(&s);
	t0 = clk_mono_ns();
	T_ASSERT_EQ(call(c, 200, 0, &resp), -ETIMEDOUT);
	/* Bounded by the timeout, not by the silent server (generous for slow CI). */
	T_ASSERT(clk_mono_ns() - t0 < 5 * CLK_NS_PER_SEC);
	T_ASSERT(resp.frame == NULL);
	/* A late answer could still arrive: the connection is done. */
	T_ASSERT_EQ(call(c, 200, 0, &resp), -ENOTCONN);
	sp_rem_close(c);
	server_join(&s);
}

static void
test_peer_errors(void)
{
	static const struct {
		enum script script;
		size_t frame_max;
		int rc;
	} cases[] = {
		{S_EOF, 0, -ECONNRESET},
		{S_GARBAGE, 0, -EBADMSG},
		{S_HUGE, 64, -EMSGSIZE},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct server s;
		struct sp_rem *c;
		struct sp_rem_resp resp;

		server_start(&s, cases[i].script, 1);
		c = connect_to(&s);
		T_ASSERT_EQ(call(c, 10000, cases[i].frame_max, &resp), cases[i].rc);
		T_ASSERT(resp.frame == NULL && resp.scratch == NULL);
		sp_rem_close(c);
		server_join(&s);
	}
}

static void
test_oneway(void)
{
	struct server s;
	struct sp_rem *c;
	struct sp_rem_resp resp;
	struct wire_rem_cmd *req = calloc(1, sizeof(*req));

	T_ASSERT(req != NULL);
	server_start(&s, S_SILENT, 1);
	c = connect_to(&s);
	req->code = WIRE_REQ_GET_ROUTEINFO_BY_TOPIC;
	req->flag = WIRE_REM_FLAG_ONEWAY;
	T_ASSERT_EQ(sp_rem_call(c, req, "req", 3, 1000, 0, &resp), 0);
	T_ASSERT(resp.frame == NULL);
	sp_rem_close(c);
	server_join(&s);
	free(req);
}

static void
test_connect_errors(void)
{
	/* Refused before any name lookup: a test must not wait on DNS. */
	static const char *const bad[] = {
		"",
		"127.0.0.1",
		"127.0.0.1:",
		":9876",
		"127.0.0.1:0",
		"127.0.0.1:65536",
		"127.0.0.1:+80",
		"127.0.0.1:80x",
		"127.0.0.1:123456",
		"[]:80",
	};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct sp_rem *c = NULL;
	char addr[32];
	int fd;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = sp_rem_connect(bad[i], 1000, &c);

		if (rc != -EINVAL)
			T_FAIL("\"%s\": rc %d", bad[i], rc);
	}
	T_ASSERT_EQ(sp_rem_connect(NULL, 1000, &c), -EINVAL);
	/* A port nobody listens on: bound, then closed. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	T_ASSERT_EQ(sp_rem_connect(addr, 1000, &c), -ECONNREFUSED);
	snprintf(addr, sizeof(addr), "localhost:%u", ntohs(sa.sin_port));
	T_ASSERT_EQ(sp_rem_connect(addr, 1000, &c), -ECONNREFUSED);
	sp_rem_close(NULL);
	sp_rem_resp_free(NULL);
}

T_MAIN(T_CASE(test_match_by_opaque), T_CASE(test_coalesced), T_CASE(test_timeout),
       T_CASE(test_peer_errors), T_CASE(test_oneway), T_CASE(test_connect_errors))
