// SPDX-License-Identifier: Apache-2.0
/*
 * test_xport_ring.c - the session transport over the dpdk port on net_ring0,
 * server and client in one process.
 *
 * net_ring0 is a loopback device: port 0 (the server, UDP 9000) and port 1
 * (the client, UDP 9001) share the one queue pair; what either sends comes
 * back on the RX queue and the dpdk port hands it to the port that owns its
 * UDP port. Each port has its owner thread, as on a broker: the server's
 * polls port 0, the test's thread is the client on port 1. Single- and
 * multi-packet echoes
 * (up to 200 KB: 140 packets of 1424 bytes with credits), each checked byte
 * for byte, and the server's execution count equals the requests sent.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "dp/port.h"
#include "dp/xport.h"
#include "dpdk_test.h"
#include "harness.h"
#include "wire/dp.h"

static uint64_t executed;
static atomic_bool stop;

struct srv_arg {
	struct dp_xsrv *srv;
};

static void *
srv_main(void *a)
{
	struct srv_arg *sa = a;

	while (!atomic_load(&stop))
		(void)dp_xsrv_poll(sa->srv, clk_mono_ns());
	return NULL;
}

static void
echo(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	struct wire_dp_resp_head head = {.status = WIRE_DP_ST_SUCCESS, .ts_recv_ns = r->ts_recv_ns};
	uint8_t *buf = dp_xsrv_resp_buf(s, r->h, WIRE_DP_RESP_HEAD_LEN + r->len);

	(void)arg;
	executed++;
	T_ASSERT(buf != NULL);
	T_ASSERT_EQ(wire_dp_bare_resp_encode(WIRE_DP_OP_SEND_BACK, &head, buf, 40), 40);
	memcpy(buf + 40, r->msg, r->len);
	T_ASSERT_EQ(dp_xsrv_respond(s, r->h, WIRE_DP_RESP_HEAD_LEN + r->len), 0);
}

struct call {
	bool done;
	int err;
	uint32_t len;
	uint8_t *copy;
};

static void
done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct call *c = arg;

	c->done = true;
	c->err = err;
	c->len = len;
	if (!err) {
		c->copy = malloc(len);
		T_ASSERT(c->copy != NULL);
		memcpy(c->copy, msg, len);
	}
}

static void
test_echo_over_net_ring(void)
{
	char rundir[64];
	char args[512];
	struct dp_port_cfg pc = {.backend = DP_BACKEND_DPDK, .base_port = 9000, .n = 2};
	struct dp_xsrv_cfg sc = {.max_sessions = 4, .big_bufs = 8, .max_msg = 1u << 20};
	struct dp_xcli_cfg cc = {.max_msg = 1u << 20};
	struct dp_port *ports[2];
	struct dp_xsrv *srv;
	struct dp_xcli *cli;
	struct dp_xsess *sess;
	uint8_t *msg = malloc(200000);
	uint64_t sent = 0;
	int err;

	T_ASSERT(msg != NULL);
	clk_init();
	T_ASSERT_EQ(t_dpdk_rundir(rundir, sizeof(rundir)), 0);
	t_dpdk_eal_args(args, sizeof(args), "xring", t_dpdk_cpu(0), "net_ring0");
	pc.dpdk_args = args;
	pc.ip = inet_addr("10.96.0.1");
	T_ASSERT_EQ(dp_ports_open(&pc, ports), 0);
	T_ASSERT_EQ(dp_xsrv_create(&sc, ports[0], echo, NULL, &srv), 0);
	T_ASSERT_EQ(dp_xcli_create(&cc, ports[1], &cli), 0);

	struct dp_addr to = ports[0]->local;
	struct call c = {0};
	struct srv_arg sa = {srv};
	pthread_t th;

	T_ASSERT_EQ(pthread_create(&th, NULL, srv_main, &sa), 0);
	err = dp_xcli_connect(cli, to, 5000, &sess);
	T_ASSERT_EQ(err, 0);

	static const uint32_t sizes[] = {8, 100, 1424, 1425, 5000, 65536, 200000};

	for (int round = 0; round < 20; round++) {
		for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
			uint32_t len = sizes[k];

			for (uint32_t i = 0; i < len; i++)
				msg[i] = (uint8_t)(i * 31 + k + round);
			memset(&c, 0, sizeof(c));
			T_ASSERT_EQ(dp_xcli_submit(sess, WIRE_DP_OP_SEND, msg, len, done, &c), 0);
			sent++;
			while (!c.done)
				(void)dp_xcli_poll(cli);
			T_ASSERT_EQ(c.err, 0);
			T_ASSERT_EQ(c.len, len + 40);
			T_ASSERT_MEMEQ(c.copy + 40, msg, len);
			free(c.copy);
		}
	}
	atomic_store(&stop, true);
	T_ASSERT_EQ(pthread_join(th, NULL), 0);
	T_ASSERT_EQ_U64(executed, sent);
	T_ASSERT(ports[1]->st.rx_handoff + ports[0]->st.rx_handoff > 0);
	dp_xcli_destroy(cli);
	dp_xsrv_destroy(srv);
	dp_ports_close(ports, 2);
	t_dpdk_rundir_rm(rundir);
	free(msg);
}

T_MAIN(T_CASE(test_echo_over_net_ring))
