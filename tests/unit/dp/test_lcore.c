// SPDX-License-Identifier: Apache-2.0
/*
 * test_lcore.c - the per-core loop: serves the transport, runs commands
 * handed over on its ring and answers on the completion ring, counts stalls,
 * and lets RCU grace periods complete while it is busy and while it idles.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <urcu/urcu-qsbr.h>

#include "common/clock.h"
#include "dp/lcore.h"
#include "harness.h"
#include "wire/dp.h"

static void
handler(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	struct wire_dp_resp_head head = {.status = WIRE_DP_ST_SUCCESS, .ts_recv_ns = r->ts_recv_ns};
	uint8_t *buf = dp_xsrv_resp_buf(s, r->h, 40);

	(void)arg;
	if (r->op == WIRE_DP_OP_SEND_BACK)
		usleep(3000); /* a handler that blocks: the stall detector must see it */
	T_ASSERT(buf != NULL);
	T_ASSERT_EQ(wire_dp_bare_resp_encode(WIRE_DP_OP_SEND_BACK, &head, buf, 40), 40);
	T_ASSERT_EQ(dp_xsrv_respond(s, r->h, 40), 0);
}

struct cmd {
	unsigned value;
	unsigned core_seen;
};

static void
on_cmd(struct dp_lcore *lc, void *c, void *arg)
{
	struct cmd *cmd = c;

	(void)arg;
	cmd->core_seen = lc->id + 100;
	while (dp_lcore_complete(lc, cmd) != 0)
		;
}

static bool done_flag;

static void
done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	(void)msg;
	(void)len;
	T_ASSERT_EQ(err, 0);
	*(bool *)arg = true;
}

static void
roundtrip(struct dp_xcli *cli, struct dp_xsess *s, uint16_t op)
{
	uint8_t msg[8] = {0};

	done_flag = false;
	T_ASSERT_EQ(dp_xcli_submit(s, op, msg, sizeof(msg), done, &done_flag), 0);
	while (!done_flag)
		(void)dp_xcli_poll(cli);
}

static void
test_loop(void)
{
	struct dp_port_cfg pc = {.backend = DP_BACKEND_UDP, .ip = htonl(INADDR_LOOPBACK), .n = 1};
	struct dp_xsrv_cfg xc = {.max_sessions = 8};
	struct dp_lcore_cfg lcfg = {.cpu = -1, .on_cmd = on_cmd, .spin_us = 10, .wait_us = 500};
	struct dp_xcli_cfg ccfg = {0};
	struct dp_port *sp;
	struct dp_port *cp;
	struct dp_xsrv *x;
	struct dp_xcli *cli;
	struct dp_xsess *s;
	struct dp_lcore *lc = aligned_alloc(64, sizeof(*lc));
	struct cmd cmds[100];

	T_ASSERT(lc != NULL);
	clk_init();
	T_ASSERT_EQ(dp_ports_open(&pc, &sp), 0);
	T_ASSERT_EQ(dp_ports_open(&pc, &cp), 0);
	T_ASSERT_EQ(dp_xsrv_create(&xc, sp, handler, NULL, &x), 0);
	T_ASSERT_EQ(dp_lcore_start(lc, 3, &lcfg, sp, x), 0);

	T_ASSERT_EQ(dp_xcli_create(&ccfg, cp, &cli), 0);
	T_ASSERT_EQ(dp_xcli_connect(cli, sp->local, 2000, &s), 0);
	for (int i = 0; i < 100; i++)
		roundtrip(cli, s, WIRE_DP_OP_PING);

	/* Commands in, completions out, in order, each run on the core. */
	for (unsigned i = 0; i < 100; i++) {
		cmds[i].value = i;
		T_ASSERT_EQ(dp_lcore_post(lc, &cmds[i]), 0);
	}
	for (unsigned got = 0; got < 100;) {
		void *out[16];
		unsigned n = dp_lcore_reap(lc, out, 16);

		for (unsigned i = 0; i < n; i++, got++) {
			struct cmd *c = out[i];

			T_ASSERT_EQ(c->value, got);
			T_ASSERT_EQ(c->core_seen, 103);
		}
	}

	/* Grace periods complete while the core idles (offline) and while it works. */
	urcu_qsbr_synchronize_rcu();
	roundtrip(cli, s, WIRE_DP_OP_PING);
	urcu_qsbr_synchronize_rcu();

	/* A 3 ms handler is a stall. */
	/* (Preemption on a loaded box may already have counted stalls: compare, don't assume 0.) */
	uint64_t stalls0 = atomic_load(&lc->st.stalls);

	roundtrip(cli, s, WIRE_DP_OP_SEND_BACK);
	/* The answer leaves before the core closes the iteration: give it a moment. */
	for (int i = 0; i < 1000 && atomic_load(&lc->st.stalls) == stalls0; i++)
		usleep(1000);
	T_ASSERT(atomic_load(&lc->st.stalls) > stalls0);
	T_ASSERT(atomic_load(&lc->st.stall_max_ns) >= 3000000);
	T_ASSERT(atomic_load(&lc->st.waits) > 0); /* it idled between our requests */
	T_ASSERT_EQ_U64(atomic_load(&lc->st.cmds), 100);

	/* Its page faults while it runs (its /proc stat), and in all once it has exited. */
	uint64_t mn = 0, mj = 0, mn2 = 0, mj2 = 0;

	T_ASSERT_EQ(dp_lcore_faults(lc, &mn, &mj), 0);
	T_ASSERT(mn > 0); /* its stack, at least */
	dp_xcli_destroy(cli);
	dp_lcore_stop(lc);
	T_ASSERT_EQ(dp_lcore_faults(lc, &mn2, &mj2), 0);
	T_ASSERT(mn2 >= mn && mj2 >= mj);
	dp_xsrv_destroy(x);
	dp_ports_close(&cp, 1);
	dp_ports_close(&sp, 1);
	free(lc);
}

/*
 * A command posted to a core idling in its wait wakes it: with a 30 s wait
 * and no packets, each of these commands is run only if the post wakes the
 * core (the loop below gives up after 20 s per command). The posts are
 * spaced so that the core is asleep for most of them.
 */
static void
test_post_wakes_idle_core(void)
{
	struct dp_port_cfg pc = {.backend = DP_BACKEND_UDP, .ip = htonl(INADDR_LOOPBACK), .n = 1};
	struct dp_xsrv_cfg xc = {.max_sessions = 8};
	struct dp_lcore_cfg lcfg = {
		.cpu = -1, .on_cmd = on_cmd, .spin_us = 10, .wait_us = 30000000};
	struct dp_port *sp;
	struct dp_xsrv *x;
	struct dp_lcore *lc = aligned_alloc(64, sizeof(*lc));
	struct cmd cmds[50];

	T_ASSERT(lc != NULL);
	clk_init();
	T_ASSERT_EQ(dp_ports_open(&pc, &sp), 0);
	T_ASSERT_EQ(dp_xsrv_create(&xc, sp, handler, NULL, &x), 0);
	T_ASSERT_EQ(dp_lcore_start(lc, 1, &lcfg, sp, x), 0);
	for (unsigned i = 0; i < 50; i++) {
		uint64_t t0 = clk_mono_ns();
		void *out = NULL;

		usleep(i % 5 == 0 ? 2000 : 200); /* let it go idle: spin 10 us, then wait */
		cmds[i].value = i;
		T_ASSERT_EQ(dp_lcore_post(lc, &cmds[i]), 0);
		while (dp_lcore_reap(lc, &out, 1) == 0) {
			T_ASSERT(clk_mono_ns() - t0 < 20000000000ull);
			usleep(100);
		}
		T_ASSERT(out == &cmds[i]);
	}
	T_ASSERT(atomic_load(&lc->st.waits) > 0); /* it did sleep between the posts */
	dp_lcore_stop(lc);
	dp_xsrv_destroy(x);
	dp_ports_close(&sp, 1);
	free(lc);
}

T_MAIN(T_CASE(test_loop), T_CASE(test_post_wakes_idle_core))
