// SPDX-License-Identifier: Apache-2.0
/*
 * remoting.c - a blocking RocketMQ remoting client over one TCP connection.
 *
 * The socket is non-blocking and every wait is a poll() against one
 * deadline per call, so no timeout can be stretched by a peer that trickles
 * bytes: connect, send and receive together take at most the caller's
 * @timeout_ms. Frames go through the project's codec (wire/remoting.h); the
 * header and the body leave in one sendmsg() of two iovecs, never copied
 * into one buffer.
 *
 * Responses are matched by opaque (docs/rocketmq-protocol.md §1.4): a frame that is not a
 * response, or is one for another opaque (a reply to an earlier call that
 * timed out), is decoded, to prove it is well formed, and dropped. The
 * receive buffer grows only with bytes that actually arrive, never to a
 * length a header merely announces, and a response that fills it exactly
 * (the usual case) is handed to the caller without a copy.
 *
 * After any error the stream position is unknown (a half-read frame, a
 * late reply), so the connection refuses further calls with -ENOTCONN.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "sprocket/remoting.h"

#define REM_RBUF_MIN 4096
#define REM_HOST_MAX 255

/* Ownership: one thread at a time (remoting.h). */
struct sp_rem {
	int fd;
	bool broken; /* an error left the stream at an unknown position */
	int32_t opaque;
	uint8_t *rbuf; /* received bytes not yet consumed, from offset 0 */
	size_t rlen;
	size_t rcap;
	char *ak; /* sp_rem_credentials(): sign requests */
	struct hmac_sha1 key;
	char sig[HMAC_B64_LEN + 1];
};

/* Milliseconds left until @deadline_ns for poll(): 0 when past. */
static int
ms_left(uint64_t deadline_ns)
{
	uint64_t now = clk_mono_ns();
	uint64_t ms;

	if (now >= deadline_ns)
		return 0;
	ms = (deadline_ns - now + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Wait for @events on @fd. Return: 0, -ETIMEDOUT, -errno. */
static int
wait_fd(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int ms = ms_left(deadline_ns);
		int rc;

		if (ms == 0)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, ms);
		if (rc > 0)
			return 0; /* readable, writable, or an error the next call reports */
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Split "host:port" or "[v6]:port". Return: 0, -EINVAL. */
static int
addr_split(const char *addr, char host[REM_HOST_MAX + 1], char port[6])
{
	const char *colon = addr != NULL ? strrchr(addr, ':') : NULL;
	const char *h = addr;
	size_t hlen;
	size_t plen;
	long pnum;
	char *end;

	if (colon == NULL)
		return -EINVAL;
	hlen = (size_t)(colon - addr);
	if (hlen >= 2 && addr[0] == '[' && addr[hlen - 1] == ']') {
		h = addr + 1;
		hlen -= 2;
	}
	plen = strlen(colon + 1);
	if (hlen == 0 || hlen > REM_HOST_MAX || plen == 0 || plen > 5)
		return -EINVAL;
	if (colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	pnum = strtol(colon + 1, &end, 10);
	if (*end != '\0' || pnum < 1 || pnum > 65535)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memcpy(port, colon + 1, plen + 1);
	return 0;
}

/* One non-blocking connect to @ai, bounded by @deadline_ns. Return: the fd or -errno. */
static int
connect_one(const struct addrinfo *ai, uint64_t deadline_ns)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t elen = sizeof(int);
	int one = 1;
	int err = 0;
	int rc;

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto err_close;
		}
		rc = wait_fd(fd, POLLOUT, deadline_ns);
		if (rc != 0)
			goto err_close;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
			rc = -errno;
			goto err_close;
		}
		if (err != 0) {
			rc = -err;
			goto err_close;
		}
	}
	/* Requests are small and answered one at a time: never wait for Nagle. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;

err_close:
	close(fd);
	return rc;
}

int
sp_rem_connect(const char *addr, uint32_t timeout_ms, struct sp_rem **out)
{
	uint64_t deadline = clk_mono_ns() + (uint64_t)timeout_ms * 1000000;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	char host[REM_HOST_MAX + 1];
	struct addrinfo *res;
	struct sp_rem *c;
	char port[6];
	int fd = -EINVAL;
	int rc;

	rc = addr_split(addr, host, port);
	if (rc != 0)
		return rc;
	/* Names resolve through the system resolver, which the deadline cannot bound. */
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0)
		return rc == EAI_SYSTEM	  ? -errno
		       : rc == EAI_MEMORY ? -ENOMEM
		       : rc == EAI_AGAIN  ? -EHOSTUNREACH
					  : -EINVAL;
	for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		fd = connect_one(ai, deadline);
		if (fd >= 0 || fd == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return fd;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	*out = c;
	return 0;
}

int
sp_rem_credentials(struct sp_rem *c, const char *ak, const char *sk)
{
	struct hmac_sha1 key;
	int rc;

	if (!sk || !sk[0] || strlen(sk) > 256)
		return -EINVAL;
	hmac_sha1_key(&key, sk, strlen(sk));
	rc = sp_rem_credentials_key(c, ak, &key);
	memset(&key, 0, sizeof(key));
	return rc;
}

int
sp_rem_credentials_key(struct sp_rem *c, const char *ak, const struct hmac_sha1 *key)
{
	char *k;

	if (!ak || !ak[0] || strlen(ak) > 256)
		return -EINVAL;
	k = strdup(ak);
	if (!k)
		return -ENOMEM;
	free(c->ak);
	c->ak = k;
	c->key = *key;
	return 0;
}

void
sp_rem_wake(struct sp_rem *c)
{
	(void)shutdown(c->fd, SHUT_RDWR);
}

void
sp_rem_close(struct sp_rem *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c->rbuf);
	free(c->ak);
	memset(&c->key, 0, sizeof(c->key));
	free(c);
}

void
sp_rem_resp_free(struct sp_rem_resp *resp)
{
	if (resp == NULL)
		return;
	free(resp->frame);
	free(resp->scratch);
	memset(resp, 0, sizeof(*resp));
}

/* Send all of @iov. Return: 0, -ETIMEDOUT, -ECONNRESET, -errno. */
static int
send_all(struct sp_rem *c, struct iovec *iov, int iovcnt, uint64_t deadline_ns)
{
	while (iovcnt > 0) {
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		int rc;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EPIPE)
				return -ECONNRESET;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			rc = wait_fd(c->fd, POLLOUT, deadline_ns);
			if (rc != 0)
				return rc;
			continue;
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Receive more bytes into rbuf. Return: 0, -ETIMEDOUT, -ECONNRESET (EOF), -ENOMEM, -errno. */
static int
recv_some(struct sp_rem *c, uint64_t deadline_ns)
{
	if (c->rcap - c->rlen < REM_RBUF_MIN / 2) {
		size_t cap = c->rcap != 0 ? c->rcap * 2 : REM_RBUF_MIN;
		uint8_t *nb = realloc(c->rbuf, cap);

		if (nb == NULL)
			return -ENOMEM;
		c->rbuf = nb;
		c->rcap = cap;
	}
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		int rc;

		if (n > 0) {
			c->rlen += (size_t)n;
			return 0;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = wait_fd(c->fd, POLLIN, deadline_ns);
		if (rc != 0)
			return rc;
	}
}

/*
 * Take the first @flen bytes of rbuf as a frame of their own: rbuf itself
 * when it holds exactly that frame, else a copy (and the rest moves down).
 */
static uint8_t *
take_frame(struct sp_rem *c, size_t flen)
{
	uint8_t *f;

	if (c->rlen == flen) {
		f = c->rbuf;
		c->rbuf = NULL;
		c->rlen = 0;
		c->rcap = 0;
		return f;
	}
	f = malloc(flen);
	if (f == NULL)
		return NULL;
	memcpy(f, c->rbuf, flen);
	memmove(c->rbuf, c->rbuf + flen, c->rlen - flen);
	c->rlen -= flen;
	return f;
}

/*
 * Read frames until the response to @opaque (@any: until any frame).
 * Return: 0 with @resp filled, -errno.
 */
static int
recv_frame(struct sp_rem *c, int32_t opaque, bool any, size_t frame_max, uint64_t deadline_ns,
	   struct sp_rem_resp *resp)
{
	for (;;) {
		size_t flen = 0;
		size_t scap;
		uint8_t *frame;
		char *scratch;
		int rc;

		rc = c->rlen >= 4 ? wire_rem_frame_len(c->rbuf, c->rlen, frame_max, &flen)
				  : -EAGAIN;
		if (rc == -EAGAIN) {
			rc = recv_some(c, deadline_ns);
			if (rc != 0)
				return rc;
			continue;
		}
		if (rc != 0)
			return rc;
		/* Header length from the header word (frame_len checked it fits). */
		scap = (size_t)((uint32_t)c->rbuf[5] << 16 | (uint32_t)c->rbuf[6] << 8 |
				c->rbuf[7]) *
			       3 +
		       256;
		scratch = malloc(scap);
		frame = scratch != NULL ? take_frame(c, flen) : NULL;
		if (frame == NULL) {
			free(scratch);
			return -ENOMEM;
		}
		rc = wire_rem_decode(frame, flen, &resp->cmd, scratch, scap);
		if (rc == 0 && (any || ((resp->cmd.flag & WIRE_REM_FLAG_RESPONSE) != 0 &&
					resp->cmd.opaque == opaque))) {
			resp->frame = frame;
			resp->scratch = scratch;
			return 0;
		}
		/* A request the server pushed, or a late reply to an abandoned call. */
		free(frame);
		free(scratch);
		memset(&resp->cmd, 0, sizeof(resp->cmd));
		if (rc != 0)
			return rc;
	}
}

/* Header bytes wire_rem_encode_header() may need: JSON escapes at most 6x. */
static size_t
header_cap(const struct wire_rem_cmd *req)
{
	size_t cap = 512 + (size_t)req->remark_len * 6;

	for (unsigned i = 0; i < req->n_ext && i < WIRE_REM_EXT_MAX; i++)
		cap += ((size_t)req->ext[i].key_len + req->ext[i].val_len) * 6 + 16;
	return cap;
}

/*
 * Oneway requests (WIRE_REM_FLAG_ONEWAY) get no response: sp_rem_call()
 * returns 0 once the request is sent, with @resp zeroed.
 */
int
sp_rem_call(struct sp_rem *c, struct wire_rem_cmd *req, const void *body, size_t body_len,
	    uint32_t timeout_ms, size_t frame_max, struct sp_rem_resp *resp)
{
	uint64_t deadline = clk_mono_ns() + (uint64_t)timeout_ms * 1000000;
	struct iovec iov[2];
	uint16_t n_ext;
	size_t hlen = 0;
	size_t cap;
	uint8_t *hdr;
	int rc;

	memset(resp, 0, sizeof(*resp));
	if (c->broken)
		return -ENOTCONN;
	if (body_len > INT32_MAX)
		return -EMSGSIZE;
	if (frame_max == 0)
		frame_max = WIRE_REM_FRAME_MAX_DEFAULT;
	/* Positive and never 0, as RocketMQ's Java and Go clients number requests. */
	c->opaque = c->opaque >= INT32_MAX - 1 ? 1 : c->opaque + 1;
	req->opaque = c->opaque;
	req->body = body;
	req->body_len = (uint32_t)body_len;
	n_ext = req->n_ext;
	if (c->ak) {
		/* the caller's fields, AccessKey, then Signature over all of them */
		if ((rc = wire_rem_ext_add(req, "AccessKey", c->ak)) != 0)
			return rc;
		wire_rem_sign(req, &c->key, c->sig);
		if ((rc = wire_rem_ext_add(req, "Signature", c->sig)) != 0) {
			req->n_ext = n_ext;
			return rc;
		}
	}
	cap = header_cap(req);
	hdr = malloc(cap);
	if (hdr == NULL) {
		req->n_ext = n_ext;
		return -ENOMEM;
	}
	rc = wire_rem_encode_header(req, hdr, cap, &hlen);
	req->n_ext = n_ext; /* a retry of @req signs again */
	if (rc != 0) {
		/* Nothing was sent: the connection is still usable. */
		free(hdr);
		return rc;
	}
	iov[0] = (struct iovec){.iov_base = hdr, .iov_len = hlen};
	iov[1] = (struct iovec){.iov_base = (void *)(uintptr_t)body, .iov_len = body_len};
	rc = send_all(c, iov, body_len > 0 ? 2 : 1, deadline);
	free(hdr);
	if (rc == 0 && (req->flag & WIRE_REM_FLAG_ONEWAY) == 0)
		rc = recv_frame(c, req->opaque, false, frame_max, deadline, resp);
	if (rc != 0)
		c->broken = true;
	return rc;
}

int
sp_rem_next(struct sp_rem *c, uint32_t timeout_ms, size_t frame_max, struct sp_rem_resp *resp)
{
	int rc;

	memset(resp, 0, sizeof(*resp));
	if (c->broken)
		return -ENOTCONN;
	rc = recv_frame(c, 0, true, frame_max ? frame_max : WIRE_REM_FRAME_MAX_DEFAULT,
			clk_mono_ns() + (uint64_t)timeout_ms * 1000000, resp);
	if (rc != 0 && rc != -ETIMEDOUT)
		c->broken = true;
	return rc;
}
