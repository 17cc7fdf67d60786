// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_broker.c - the broker's request handlers (broker/core/bk_core.c) behind
 * the real transport server, on a real store.
 *
 * One session is opened at start with a CONNECT through dp_xsrv_input(); each
 * input is then one request on it: byte 0 picks the op, the rest is the
 * message body (SEND, SEND_BATCH, PULL, the offset ops, SEND_BACK, PING),
 * sent as one packet on the next slot with the next sequence.
 * The core's tick runs after each request (deferred acks, parked pulls), on a
 * clock a minute later each time so parked pulls end and free their slots.
 * Topic "T" (4 queues) and "%RETRY%G" exist; auto-creation requests are
 * dropped (no control thread), so unknown topics stay unknown.
 *
 * Oracle beyond "no crash, no leak": every packet the server sends decodes,
 * and every single-packet response's common part decodes.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bk_priv.h"
#include "common/clock.h"
#include "common/log.h"
#include "wire/dp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct cport {
	struct dp_port p;
	uint8_t last[2048];
	uint32_t last_len;
	unsigned sent;
};

static unsigned
c_rx(struct dp_port *p, struct dp_rx *rx, unsigned n)
{
	(void)p;
	(void)rx;
	(void)n;
	return 0;
}

static void
c_rxdone(struct dp_port *p)
{
	(void)p;
}

/* Checks every packet the server sends; keeps the last one. */
static unsigned
c_tx(struct dp_port *p, const struct dp_tx *tx, unsigned n)
{
	struct cport *c = (struct cport *)p;

	for (unsigned i = 0; i < n; i++) {
		uint32_t len = tx[i].hdr_len + tx[i].len;
		struct wire_dp_hdr h;

		if (len > sizeof(c->last))
			abort();
		if (tx[i].hdr_len)
			memcpy(c->last, tx[i].hdr, tx[i].hdr_len);
		if (tx[i].len)
			memcpy(c->last + tx[i].hdr_len, tx[i].data, tx[i].len);
		c->last_len = len;
		if (len >= 4 && memcmp(c->last, "PRAW", 4) == 0)
			continue;
		if (wire_dp_hdr_decode(c->last, len, &h) != 0)
			abort();
		if (h.type == WIRE_DP_T_RESP && h.pkt_cnt == 1 && h.op != WIRE_DP_OP_CONNECT) {
			struct wire_dp_resp_head rh;

			if (wire_dp_resp_head_decode(c->last + WIRE_DP_HDR_LEN, h.payload_len,
						     &rh) != 0)
				abort();
		}
		c->sent++;
	}
	return n;
}

static void
c_wait(struct dp_port *p, unsigned us, int wake_fd)
{
	(void)p;
	(void)us;
	(void)wake_fd;
}

static bool
c_up(struct dp_port *p)
{
	(void)p;
	return true;
}

static void
c_close(struct dp_port *p)
{
	(void)p;
}

static const struct dp_port_ops cops = {"capture", c_rx, c_rxdone, c_tx, c_wait, c_up, c_close};

static struct cport port = {.p = {.ops = &cops, .max_dgram = 1472}};
static struct bk bk;
static struct bk_core core;
static struct dp_xsrv *xs;
static struct dp_addr peer;
static struct wire_dp_connect_resp sess;
static uint32_t seq[WIRE_DP_SLOTS_MAX];
static unsigned next_slot;
static uint64_t fake_now; /* the loop clock handed to the transport and the tick */

static void
add_topic(const char *name, uint32_t nq)
{
	struct bk_topic *t = calloc(1, sizeof(*t));
	struct bk_ttab *old_tab;
	struct bk_topic *old;

	if (t == NULL)
		abort();
	t->name_len = (uint32_t)strlen(name);
	memcpy(t->name, name, t->name_len);
	t->hash = bk_name_hash(name, t->name_len);
	t->perm = META_PERM_READ | META_PERM_WRITE;
	t->read_queues = t->write_queues = t->nq = nq;
	t->sq = calloc(nq, sizeof(*t->sq));
	t->core = calloc(nq, sizeof(*t->core));
	if (!t->sq || !t->core)
		abort();
	for (uint32_t q = 0; q < nq; q++)
		if (store_queue_get(bk.store, name, q, 0, &t->sq[q]) != 0)
			abort();
	if (bk_ttab_put(&bk.ttab, t, &old_tab, &old) != 0)
		abort();
	bk_ttab_free(old_tab); /* no reader runs yet: no grace period to wait for */
}

static char root[] = "/tmp/sp-fuzz-broker-XXXXXX";

/* At exit: stop the store's threads and remove its files. */
static void
teardown(void)
{
	char cmd[128];

	if (xs && getenv("FUZZ_BROKER_STATS")) {
		const struct dp_xsrv_stats *st = dp_xsrv_stats(xs);

		fprintf(stderr,
			"fuzz_broker: executed %llu sends %llu pulls %llu parked %llu errors %llu "
			"busy %llu no_session %llu slot_busy %llu\n",
			(unsigned long long)st->executed, (unsigned long long)core.st.sends,
			(unsigned long long)core.st.pulls, (unsigned long long)core.st.parked,
			(unsigned long long)core.st.errors, (unsigned long long)core.st.busy,
			(unsigned long long)st->rx_no_session,
			(unsigned long long)st->rx_slot_busy);
	}
	if (xs)
		dp_xsrv_destroy(xs);
	bk_core_fini(&core);
	for (uint32_t i = 0; bk.ttab && i <= bk.ttab->mask; i++) {
		struct bk_topic *t = bk.ttab->slot[i];

		if (t) {
			free(t->sq);
			free(t->core);
			free(t);
		}
	}
	bk_ttab_free(bk.ttab);
	close(bk.efd);
	store_close(bk.store);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_broker: could not remove %s\n", root);
}

static void
setup(void)
{
	struct store_cfg sc;
	struct dp_xsrv_cfg xc = {.max_sessions = 4, .big_bufs = 4, .max_msg = 1u << 20};
	struct wire_dp_connect_req rq = {.nonce = 1,
					 .max_msg = 1u << 20,
					 .mtu = 1500,
					 .slots = 8,
					 .client_id = "f",
					 .client_id_len = 1};
	uint8_t pkt[256];
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ, .op = WIRE_DP_OP_CONNECT, .pkt_cnt = 1};
	long n;

	clk_init();
	log_set_level(LOG_LVL_ERR);
	if (mkdtemp(root) == NULL)
		abort();
	store_cfg_default(&sc);
	sc.root = root;
	sc.shards = 1;
	sc.seg_size = 1u << 20;
	sc.cq_units = 1024;
	if (store_open(&sc, &bk.store) != 0)
		abort();
	atexit(teardown);
	bk.conf = (struct bk_conf){
		.auto_create = true,
		.broker_name = "broker-a",
		.role = BK_ROLE_SYNC_MASTER, /* REPL is served, SENDs wait for it */
		.seg_size = 1u << 20,
		.slave_timeout_ms = 1000,
		.ha_max_gap = 1u << 20,
		.default_queues = 4,
		.max_msg_size = 65536,
		.max_reconsume = 3,
		.cores = 1,
		.dp_port = 9000,
		.pending_acks = 64,
		.parked_pulls = 16,
		.offset_slots = 1024};
	bk.ncores = 1;
	bk.cores = &core;
	bk.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	atomic_store_relaxed(&bk.perm, META_PERM_READ | META_PERM_WRITE);
	if (bk.efd < 0 || bk_core_init(&bk, &core, 0) != 0)
		abort();
	add_topic("T", 4);
	add_topic("%RETRY%G", 1);
	if (dp_xsrv_create(&xc, &port.p, bk_core_handle, &core, &xs) != 0)
		abort();
	core.xs = xs;
	core.port = &port.p;
	peer.ip = htonl(0x7f000001);
	peer.port = 40000;
	n = wire_dp_connect_req_encode(&rq, pkt + WIRE_DP_HDR_LEN, sizeof(pkt) - WIRE_DP_HDR_LEN);
	h.msg_len = h.payload_len = (uint32_t)n;
	if (n < 0 || wire_dp_hdr_encode(&h, pkt, WIRE_DP_HDR_LEN) != WIRE_DP_HDR_LEN)
		abort();
	{
		struct dp_rx rx = {.data = pkt, .len = WIRE_DP_HDR_LEN + (uint32_t)n, .src = peer};
		struct wire_dp_hdr rh;

		fake_now = clk_mono_ns();
		dp_xsrv_input(xs, &rx, 1, fake_now);
		if (wire_dp_hdr_decode(port.last, port.last_len, &rh) != 0 ||
		    wire_dp_connect_resp_decode(port.last + WIRE_DP_HDR_LEN, rh.payload_len,
						&sess) != 0 ||
		    sess.head.status != WIRE_DP_ST_SUCCESS)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[2048];
	struct wire_dp_hdr h = {.type = WIRE_DP_T_REQ, .pkt_cnt = 1};
	uint32_t len;
	uint16_t op;
	uint64_t now;

	if (xs == NULL)
		setup();
	if (size < 1)
		return 0;
	op = (uint16_t)(data[0] % WIRE_DP_OP_MAX + 1);
	if (op == WIRE_DP_OP_CONNECT || op == WIRE_DP_OP_DISCONNECT)
		op = WIRE_DP_OP_PING; /* keep the one session */
	len = (uint32_t)SP_MIN(size - 1, (size_t)sess.max_payload);
	h.token = sess.token;
	h.session_id = sess.session_id;
	h.slot = (uint16_t)(next_slot++ % sess.slots);
	h.op = op;
	h.seq = ++seq[h.slot];
	h.msg_len = h.payload_len = len;
	if (wire_dp_hdr_encode(&h, pkt, WIRE_DP_HDR_LEN) != WIRE_DP_HDR_LEN)
		abort();
	memcpy(pkt + WIRE_DP_HDR_LEN, data + 1, len);
	{
		struct dp_rx rx = {.data = pkt, .len = WIRE_DP_HDR_LEN + len, .src = peer};

		/*
		 * Each input is a minute later: a pull parked by the last one
		 * (suspend at most 60 s) ends at this tick and frees its slot.
		 */
		fake_now += 61000000000ull;
		now = fake_now;
		dp_xsrv_input(xs, &rx, 1, now);
	}
	(void)bk_core_tick(NULL, now, &core);
	dp_xsrv_flush(xs);
	/* no control thread: forget auto-creation requests */
	atomic_store_release(&core.create_full, 0);
	return 0;
}
