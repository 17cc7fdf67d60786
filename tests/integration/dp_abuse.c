// SPDX-License-Identifier: Apache-2.0
/*
 * dp_abuse.c - a hostile dataplane client, for tests/integration/isolation.py
 * (docs/isolation.md). Plain UDP from a chosen source address, packets built
 * with the wire codec; test code, it asserts nothing itself.
 *
 *   dp_abuse connect-flood HOST PORT SRC N
 *       N CONNECTs (each its own nonce) from SRC; prints
 *       {"success": a, "busy": b, "other": c, "silent": d}
 *   dp_abuse reasm-hold HOST PORT SRC SESSIONS SECS
 *       opens SESSIONS sessions from SRC and starts, in every slot of each, a
 *       SEND of 1 MiB whose first packet alone is ever sent; for SECS seconds,
 *       200 ms after one is answered (SYSTEM_BUSY: no buffer, or its
 *       reassemblyTimeoutMs passed) it starts the next one in that slot the
 *       same way, so it keeps holding what the broker lets it; prints
 *       {"sessions": n, "started": k, "busy": b, "answers": a}
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire/dp.h"

#define MSG_LEN (1u << 20)

#define SLOTS 8

struct sess {
	uint32_t id;
	uint64_t token;
	uint16_t slots;
	uint16_t max_payload;
	uint32_t seq[SLOTS];
	uint64_t due[SLOTS]; /* start the next request in this slot then (0: holding one) */
};

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int
udp_from(const char *src, const char *host, int port, struct sockaddr_in *dst)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int big = 8 << 20;

	if (fd < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (inet_pton(AF_INET, src, &a.sin_addr) != 1 || bind(fd, (void *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	memset(dst, 0, sizeof(*dst));
	dst->sin_family = AF_INET;
	dst->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &dst->sin_addr) != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
send_pkt(int fd, const struct sockaddr_in *dst, const struct wire_dp_hdr *h, const void *pl)
{
	uint8_t b[WIRE_DP_HDR_LEN + 2048];

	if (h->payload_len > sizeof(b) - WIRE_DP_HDR_LEN ||
	    wire_dp_hdr_encode(h, b, sizeof(b)) != WIRE_DP_HDR_LEN)
		return -1;
	memcpy(b + WIRE_DP_HDR_LEN, pl, h->payload_len);
	return sendto(fd, b, WIRE_DP_HDR_LEN + h->payload_len, 0, (const void *)dst, sizeof(*dst)) <
			       0
		       ? -1
		       : 0;
}

static int
send_connect(int fd, const struct sockaddr_in *dst, uint64_t nonce)
{
	struct wire_dp_connect_req rq = {.nonce = nonce,
					 .max_msg = 4u << 20,
					 .mtu = 1500,
					 .slots = 8,
					 .client_id = "dp_abuse",
					 .client_id_len = 8};
	uint8_t pl[256];
	long n = wire_dp_connect_req_encode(&rq, pl, sizeof(pl));
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
				.op = WIRE_DP_OP_CONNECT,
				.pkt_cnt = 1,
				.msg_len = (uint32_t)n,
				.payload_len = (uint32_t)n};

	return n < 0 ? -1 : send_pkt(fd, dst, &h, pl);
}

/* One datagram within @ms into @h and @pl. Return: payload length, -1 none. */
static long
recv_pkt(int fd, int ms, struct wire_dp_hdr *h, uint8_t *buf, size_t cap)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return -1;
	n = recv(fd, buf, cap, 0);
	if (n < (ssize_t)WIRE_DP_HDR_LEN || wire_dp_hdr_decode(buf, (size_t)n, h) != 0)
		return -2;
	return n - WIRE_DP_HDR_LEN;
}

static int
connect_flood(const char *host, int port, const char *src, unsigned n)
{
	struct sockaddr_in dst;
	int fd = udp_from(src, host, port, &dst);
	unsigned ok = 0, busy = 0, other = 0, got = 0;
	uint8_t buf[4096];

	if (fd < 0) {
		perror("dp_abuse: socket");
		return 2;
	}
	for (unsigned i = 0; i < n; i++) {
		struct wire_dp_hdr h;
		long l;

		(void)send_connect(fd, &dst, 0x5eed0000ull + i);
		/* one at a time: the server's answers are what is counted */
		l = recv_pkt(fd, 200, &h, buf, sizeof(buf));
		if (l >= 0 && h.op == WIRE_DP_OP_CONNECT) {
			struct wire_dp_connect_resp r;

			got++;
			if (wire_dp_connect_resp_decode(buf + WIRE_DP_HDR_LEN, (size_t)l, &r) != 0)
				other++;
			else if (r.head.status == WIRE_DP_ST_SUCCESS)
				ok++;
			else if (r.head.status == WIRE_DP_ST_SYSTEM_BUSY)
				busy++;
			else
				other++;
		}
	}
	printf("{\"success\": %u, \"busy\": %u, \"other\": %u, \"silent\": %u}\n", ok, busy, other,
	       n - got);
	close(fd);
	return 0;
}

/* The first packet of a 1 MiB SEND in @slot of @se (its next seq), and no other. */
static int
first_packet(int fd, const struct sockaddr_in *dst, struct sess *se, uint16_t slot,
	     const uint8_t *zero)
{
	uint32_t pl = se->max_payload;
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ,
				.token = se->token,
				.session_id = se->id,
				.slot = slot,
				.op = WIRE_DP_OP_SEND,
				.seq = se->seq[slot] ? se->seq[slot] : (se->seq[slot] = 1),
				.pkt_idx = 0,
				.pkt_cnt = (MSG_LEN + pl - 1) / pl,
				.msg_len = MSG_LEN,
				.payload_len = pl};

	return send_pkt(fd, dst, &h, zero);
}

static int
reasm_hold(const char *host, int port, const char *src, unsigned nsess, unsigned secs)
{
	struct sockaddr_in dst;
	int fd = udp_from(src, host, port, &dst);
	struct sess *ss = calloc(nsess, sizeof(*ss));
	unsigned opened = 0, started = 0, busy = 0, answers = 0;
	static uint8_t buf[65536];
	static uint8_t zero[2048];
	uint64_t end;

	if (fd < 0 || !ss) {
		perror("dp_abuse: socket");
		return 2;
	}
	for (unsigned i = 0; i < nsess; i++) {
		struct wire_dp_hdr h;
		struct wire_dp_connect_resp r;
		long l;

		(void)send_connect(fd, &dst, 0xabc00000ull + i);
		l = recv_pkt(fd, 500, &h, buf, sizeof(buf));
		if (l < 0 || h.op != WIRE_DP_OP_CONNECT ||
		    wire_dp_connect_resp_decode(buf + WIRE_DP_HDR_LEN, (size_t)l, &r) != 0 ||
		    r.head.status != WIRE_DP_ST_SUCCESS)
			continue;
		ss[opened].id = r.session_id;
		ss[opened].token = r.token;
		ss[opened].slots = r.slots;
		ss[opened].max_payload = r.max_payload; /* the geometry a first packet must have */
		if (r.max_payload > sizeof(zero))
			continue; /* the 1500-byte MTU asked for keeps it below */
		opened++;
	}
	for (unsigned i = 0; i < opened; i++)
		for (uint16_t s = 0; s < ss[i].slots && s < SLOTS; s++)
			started += first_packet(fd, &dst, &ss[i], s, zero) == 0;
	end = now_ms() + secs * 1000ull;
	while (now_ms() < end) {
		struct wire_dp_hdr h;
		long l = recv_pkt(fd, 20, &h, buf, sizeof(buf));
		struct wire_dp_resp_head rh;
		uint64_t t = now_ms();

		for (unsigned i = 0; i < opened; i++)
			for (uint16_t k = 0; k < SLOTS; k++)
				if (ss[i].due[k] && t >= ss[i].due[k]) {
					ss[i].due[k] = 0;
					started += first_packet(fd, &dst, &ss[i], k, zero) == 0;
				}

		if (l < 0 || h.type != WIRE_DP_T_RESP)
			continue;
		answers++;
		if (wire_dp_resp_head_decode(buf + WIRE_DP_HDR_LEN, (size_t)l, &rh) == 0 &&
		    rh.status == WIRE_DP_ST_SYSTEM_BUSY)
			busy++;
		for (unsigned i = 0; i < opened; i++)
			if (ss[i].id == h.session_id && h.slot < SLOTS &&
			    ss[i].seq[h.slot] == h.seq) {
				ss[i].seq[h.slot]++;
				ss[i].due[h.slot] = now_ms() + 200;
			}
	}
	printf("{\"sessions\": %u, \"started\": %u, \"busy\": %u, \"answers\": %u}\n", opened,
	       started, busy, answers);
	free(ss);
	close(fd);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "connect-flood") == 0)
		return connect_flood(argv[2], atoi(argv[3]), argv[4], (unsigned)atoi(argv[5]));
	if (argc == 7 && strcmp(argv[1], "reasm-hold") == 0)
		return reasm_hold(argv[2], atoi(argv[3]), argv[4], (unsigned)atoi(argv[5]),
				  (unsigned)atoi(argv[6]));
	fprintf(stderr, "usage: dp_abuse connect-flood HOST PORT SRC N\n"
			"       dp_abuse reasm-hold HOST PORT SRC SESSIONS SECS\n");
	return 2;
}
