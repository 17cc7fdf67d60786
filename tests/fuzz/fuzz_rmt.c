// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_rmt.c - the broker's RocketMQ remoting server (broker/remoting/bk_rmt.c) and,
 * behind it, the cores' request handlers (broker/core/bk_core.c), on a real store.
 *
 * Each input is a byte stream of remoting frames, fed with bk_rmt_feed() as
 * if read from one TCP connection whose output is discarded. The stream is
 * cut after its last whole frame: a partial frame would stay buffered and
 * glue this input to the next one. A malformed frame closes the connection
 * there, as on a socket.
 *
 * There are no core threads: after the feed the harness plays both cores
 * (DESIGN below) until no command is in flight, then feeds eight zero bytes,
 * a frame length of 0, which closes the connection; the server reopens it as
 * a new one, so every input starts on an empty connection and its consumers
 * left their groups. Server state that outlives a connection (groups, locks,
 * topics, offsets, the store) carries over, as in a broker.
 *
 * DESIGN
 * Two cores, so queues, SEND_BACK and QUERY_MESSAGE reach either. One round:
 * each core drains its command ring through bk_core_cmd(), ticks, then
 * bk_rmt_run() reaps the completions. The first round's tick is 1 ms after
 * the last one, so a pull parked by a PULL ... SEND stream is answered
 * because data came; later rounds step 61 s, past any suspend (60 s at most),
 * so parked pulls end at their deadline. The remoting clock is the same fake
 * clock: locks (60 s) and silent consumers (120 s) expire within a few inputs.
 *
 * Topic creation (heartbeat retry topics, auto-creation on SEND,
 * UPDATE_AND_CREATE_TOPIC) runs the harness's topic_put, which builds the
 * topic as the broker's does and swaps the table with no grace period (no
 * reader runs concurrently). It refuses more than FUZZ_TOPICS_MAX new topics
 * or FUZZ_QUEUES_MAX queues per topic, so a long run cannot fill the disk;
 * refusals exercise the server's "creating the topic failed" paths.
 *
 * Oracle beyond "no crash, no leak":
 *  - every command a core completes is one the server posted and the core
 *    had not completed yet (no double completion, no stray pointer);
 *  - a completion's answer fits its buffer; one asking for a bigger buffer
 *    asks for more than it had; a dataplane op's answer starts with a
 *    response head that decodes;
 *  - every command comes back within FUZZ_ROUNDS_MAX rounds (nothing leaks
 *    in a ring or a park slot).
 *
 * Run: scripts/fuzz.sh 300 rmt (FUZZ_RMT_STATS=1 prints, at exit, what the
 * cores answered by op and status). Seeds: tests/fuzz/gen_rmt_corpus.py.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bk_priv.h"
#include "remoting/bk_rmt.h"
#include "common/acl.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/ring.h"
#include "wire/dp.h"
#include "wire/remoting.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CORES 2
#define FUZZ_RING 1024
#define FUZZ_MAX_FRAME (1u << 20)
#define FUZZ_TOPICS_MAX 32
#define FUZZ_QUEUES_MAX 8
#define FUZZ_ROUNDS_MAX 256  /* QUERY_MESSAGE of 64 records over 64 KiB: a round each */
#define FUZZ_RETAIN_EVERY 16 /* inputs */
#define FUZZ_INFLIGHT_MAX (FUZZ_CORES * FUZZ_RING)
/*
 * A `flag` bit the server ignores: after this frame the client waits for
 * every answer before it sends on (a SEND whose record a QUERY_MESSAGE
 * looks for). Without it, frames are pipelined as a client's async calls.
 */
#define FUZZ_FLAG_WAIT 0x4

static struct bk bk;
static struct bk_core cores[FUZZ_CORES];
static struct bk_rmt *rmt;
static uint64_t fake_ns;
static int64_t store_ms;  /* the store's clock: 1 ms a round, so it flushes every 500 rounds */
static int64_t retain_ms; /* retention's: a minute a round, past the unmap grace */
static unsigned inputs;
static unsigned topics_made;
static char root[] = "/tmp/sp-fuzz-rmt-XXXXXX";
static char *scratch; /* header strings of the frame being split */
static size_t scratch_cap;

/*
 * ACL inputs (one in five, by length: the corpus keeps its meaning): the
 * broker has aclEnable with the accounts below, and every whole frame is
 * signed here as fuzzuser1 before it is fed, so the permission checks of
 * bk_rmt_acl.c see what the fuzzer wrote (heartbeats included); a frame that
 * cannot be re-encoded goes as it came (refused: no key).
 */
static const char fuzz_acl_yml[] = "accounts:\n"
				   "  - accessKey: fuzzuser1\n"
				   "    secretKey: fuzzsecret1\n"
				   "    defaultTopicPerm: SUB\n"
				   "    defaultGroupPerm: SUB\n"
				   "    topicPerms: [T=PUB|SUB, X=DENY]\n"
				   "    groupPerms: [D=DENY]\n";
static struct acl *fuzz_acl;
static struct hmac_sha1 fuzz_key;
static uint8_t *signed_buf;
static size_t signed_cap, signed_len;

/* Commands a core holds: taken off a command ring, not completed yet. */
static const struct bk_rcmd *held[FUZZ_INFLIGHT_MAX];
static unsigned nheld;

/* FUZZ_RMT_STATS: completions by op (dataplane ops, then the two internal ones) and status. */
#define STAT_OPS 16
#define STAT_ST 32 /* the last one: 31 and up */
static uint64_t cpl_by[STAT_OPS][STAT_ST];
static uint64_t cpl_need;

static void
topic_free(struct bk_topic *t)
{
	if (t) {
		free(t->sq);
		free(t->core);
		free(t);
	}
}

/* bk_rmt_ops.topic_put: broker_main.c's topic_put without persistence. */
static int
topic_put(void *arg, const struct meta_topic *mt)
{
	struct bk_topic *t, *old;
	struct bk_ttab *old_tab;
	size_t len = strnlen(mt->name, sizeof(mt->name));
	bool known = bk_topic_find(&bk, mt->name, len) != NULL;
	int err;

	(void)arg;
	if (len == 0 || len > META_TOPIC_MAX)
		abort(); /* the server validates names before it asks */
	if ((!known && topics_made >= FUZZ_TOPICS_MAX) ||
	    SP_MAX(mt->read_queues, mt->write_queues) > FUZZ_QUEUES_MAX)
		return -ENOSPC;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	memcpy(t->name, mt->name, len);
	t->name_len = (uint32_t)len;
	t->hash = bk_name_hash(t->name, t->name_len);
	t->perm = mt->perm;
	t->read_queues = mt->read_queues;
	t->write_queues = mt->write_queues;
	t->sys_flag = mt->sys_flag;
	t->order = mt->order;
	t->nq = SP_MAX(mt->read_queues, mt->write_queues);
	t->sq = calloc(t->nq ? t->nq : 1, sizeof(*t->sq));
	t->core = calloc(t->nq ? t->nq : 1, sizeof(*t->core));
	if (!t->sq || !t->core) {
		topic_free(t);
		return -ENOMEM;
	}
	for (uint32_t q = 0; q < t->nq; q++) {
		t->core[q] = (uint16_t)(q % bk.ncores);
		err = store_queue_get(bk.store, t->name, q, t->core[q], &t->sq[q]);
		if (err) {
			topic_free(t);
			return err;
		}
	}
	err = bk_ttab_put(&bk.ttab, t, &old_tab, &old);
	if (err) {
		topic_free(t);
		return err;
	}
	/* no core thread reads the table: nothing to wait for before freeing */
	bk_ttab_free(old_tab);
	topic_free(old);
	if (!known)
		topics_made++;
	return 0;
}

/* bk_rmt_ops.topic_delete: bk_topic_ctl.c's delete without persistence. */
static int
topic_delete(void *arg, const char *name)
{
	struct bk_ttab *nt;
	struct bk_topic *old;
	int err;

	(void)arg;
	err = bk_ttab_without(bk.ttab, name, strlen(name), &nt, &old);
	if (err)
		return err;
	bk_ttab_free(bk.ttab);
	bk.ttab = nt;
	if (old == NULL)
		return -ENOENT;
	topic_free(old);
	(void)store_queue_retire(bk.store, name);
	return 0;
}

static void
add_topic(const char *name, uint32_t nq)
{
	struct meta_topic mt = {
		.read_queues = nq, .write_queues = nq, .perm = META_PERM_READ | META_PERM_WRITE};

	snprintf(mt.name, sizeof(mt.name), "%s", name);
	if (topic_put(NULL, &mt) != 0)
		abort();
}

static void
teardown(void)
{
	char cmd[128];

	if (getenv("FUZZ_RMT_STATS")) {
		for (unsigned i = 0; i < FUZZ_CORES; i++) {
			const struct bk_core_stats *st = &cores[i].st;

			fprintf(stderr,
				"fuzz_rmt: core %u sends %llu batches %llu pulls %llu parked %llu "
				"redirects %llu busy %llu errors %llu gone %llu\n",
				i, (unsigned long long)st->sends,
				(unsigned long long)st->send_batches, (unsigned long long)st->pulls,
				(unsigned long long)st->parked, (unsigned long long)st->redirects,
				(unsigned long long)st->busy, (unsigned long long)st->errors,
				(unsigned long long)st->gone);
		}
		fprintf(stderr, "fuzz_rmt: %u topics created, %llu answers asked for more room\n",
			topics_made, (unsigned long long)cpl_need);
		for (unsigned op = 0; op < STAT_OPS; op++) {
			for (unsigned st = 0; st < STAT_ST; st++)
				if (cpl_by[op][st])
					fprintf(stderr, "fuzz_rmt: op %u status %u: %llu\n", op, st,
						(unsigned long long)cpl_by[op][st]);
		}
	}
	bk_rmt_destroy(rmt); /* frees every command: none is held by a core now */
	for (unsigned i = 0; i < FUZZ_CORES; i++) {
		ring_free(cores[i].lc.cmd);
		ring_free(cores[i].lc.cpl);
		bk_core_fini(&cores[i]);
	}
	for (uint32_t i = 0; bk.ttab && i <= bk.ttab->mask; i++)
		topic_free(bk.ttab->slot[i]);
	bk_ttab_free(bk.ttab);
	close(bk.efd);
	store_close(bk.store);
	free(scratch);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_rmt: could not remove %s\n", root);
}

static void
setup(void)
{
	struct store_cfg sc;
	struct bk_rmt_conf rc = {.admin_addrs = {.any = true},
				 .ip = "127.0.0.1",
				 .port = 0,
				 .max_frame = FUZZ_MAX_FRAME,
				 .inflight_per_core = FUZZ_RING - 64,
				 .max_conns = 4,
				 .client_expire_ms = 120000,
				 .lock_expire_ms = 60000};
	struct bk_rmt_ops ro = {.topic_put = topic_put, .topic_delete = topic_delete};

	clk_init();
	log_set_level(LOG_LVL_ERR);
	if (mkdtemp(root) == NULL)
		abort();
	store_cfg_default(&sc);
	sc.root = root;
	sc.shards = FUZZ_CORES;
	sc.seg_size = 1u << 20;
	sc.cq_units = 4096;
	sc.threads = false; /* settle() runs the service and indexer rounds */
	sc.idx_slots = 1024;
	sc.idx_entries = 4096;
	/* Always "fuller than the limit": each retention round drops the oldest segment. */
	sc.disk_max_used_ratio = 0;
	if (store_open(&sc, &bk.store) != 0)
		abort();
	bk.conf = (struct bk_conf){.auto_create = true,
				   .default_queues = 4,
				   .max_msg_size = 131072,
				   .max_reconsume = 3,
				   .cores = FUZZ_CORES,
				   .dp_port = 9000,
				   .pending_acks = 2048, /* SEND_BATCH up to 8192 records */
				   .parked_pulls = 16,
				   .offset_slots = 1024};
	bk.ncores = FUZZ_CORES;
	bk.cores = cores;
	bk.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	bk.store_host = sc.store_host;
	atomic_store_relaxed(&bk.perm, META_PERM_READ | META_PERM_WRITE);
	if (bk.efd < 0)
		abort();
	for (unsigned i = 0; i < FUZZ_CORES; i++) {
		struct dp_lcore *lc = &cores[i].lc;

		if (bk_core_init(&bk, &cores[i], i) != 0)
			abort();
		/* what dp_lcore_start() sets up, minus the thread */
		lc->id = i;
		lc->wake_fd = -1; /* never written: `sleeping` stays false */
		if (ring_create(FUZZ_RING, &lc->cmd) != 0 || ring_create(FUZZ_RING, &lc->cpl) != 0)
			abort();
	}
	{
		char why[128];

		if (acl_parse(fuzz_acl_yml, strlen(fuzz_acl_yml), &fuzz_acl, why, sizeof(why)) != 0)
			abort();
		hmac_sha1_key(&fuzz_key, "fuzzsecret1", 11);
	}
	add_topic("T", 4);
	add_topic("%RETRY%G", 1);
	if (bk_rmt_create(&bk, &rc, &ro, &rmt) != 0)
		abort();
	bk.store_host.port = bk_rmt_port(rmt);
	atexit(teardown);
	fake_ns = clk_mono_ns();
	store_ms = (int64_t)clk_wall_ms();
	retain_ms = store_ms;
}

static void
hold(const struct bk_rcmd *c)
{
	for (unsigned i = 0; i < nheld; i++)
		if (held[i] == c)
			abort(); /* posted again while a core still holds it */
	if (nheld == FUZZ_INFLIGHT_MAX)
		abort();
	held[nheld++] = c;
}

static void
release(const struct bk_rcmd *c)
{
	for (unsigned i = 0; i < nheld; i++) {
		if (held[i] == c) {
			held[i] = held[--nheld];
			return;
		}
	}
	abort(); /* completed twice, or never posted */
}

static void
stat(unsigned op, int32_t status)
{
	cpl_by[SP_MIN(op, (unsigned)STAT_OPS - 1)]
	      [status >= 0 && status < STAT_ST ? status : STAT_ST - 1]++;
}

/* Checks what a core put on its completion ring and hands it on to the server. */
static void
check_completions(struct dp_lcore *lc)
{
	void *v[FUZZ_RING];
	unsigned n = ring_dequeue_burst(lc->cpl, v, FUZZ_RING);

	for (unsigned i = 0; i < n; i++) {
		const struct bk_rcmd *c = v[i];

		release(c);
		if (c->core != lc->id)
			abort();
		if (c->need) {
			if (c->need <= c->resp_cap)
				abort();
		} else if (c->resp_len > c->resp_cap) {
			abort();
		}
		if (c->need) {
			cpl_need++;
		} else if (c->op < BK_ROP_EARLIEST) {
			struct wire_dp_resp_head h;

			if (wire_dp_resp_head_decode(c->resp, c->resp_len, &h) != 0)
				abort();
			stat(c->op, h.status);
		} else {
			stat(STAT_OPS - BK_ROP_GATHER - 1 + c->op, c->status);
		}
	}
	if (ring_enqueue_burst(lc->cpl, v, n) != n)
		abort();
}

static bool
core_idle(const struct bk_core *c)
{
	return ring_count(c->lc.cmd) == 0 && ring_count(c->lc.cpl) == 0 && c->park_n == 0 &&
	       c->ack_head == c->ack_tail;
}

/* Plays the cores until every command came back to the server. */
static void
settle(void)
{
	for (unsigned round = 0;; round++) {
		bool idle = true;

		fake_ns += round == 0 ? 1000000ull : 61000000000ull;
		for (unsigned i = 0; i < FUZZ_CORES; i++) {
			struct bk_core *c = &cores[i];
			void *v[64];
			unsigned n;

			while ((n = ring_dequeue_burst(c->lc.cmd, v, 64)) > 0) {
				for (unsigned k = 0; k < n; k++) {
					hold(v[k]);
					bk_core_cmd(&c->lc, v[k], c);
				}
			}
			(void)bk_core_tick(&c->lc, fake_ns, c);
			check_completions(&c->lc);
			/* no control-side mailbox scan: forget auto-creation requests */
			atomic_store_release(&c->create_full, 0);
		}
		bk_rmt_run(rmt, fake_ns / 1000000);
		/* what the store's threads would do meanwhile: next files, flushes, the index */
		int src = store_service(bk.store, ++store_ms); /* a fenced shard is fine here */

		(void)src;
		(void)store_index_round(bk.store);
		for (unsigned i = 0; i < FUZZ_CORES; i++)
			idle = idle && core_idle(&cores[i]);
		if (idle)
			break;
		if (round == FUZZ_ROUNDS_MAX)
			abort(); /* a command never came back */
	}
	if (nheld != 0)
		abort();
}

static int frame_flag(const uint8_t *frame, size_t len, int32_t *flag);

static void
sign_append(const uint8_t *frame, size_t len)
{
	static struct wire_rem_cmd q;
	char sig[HMAC_B64_LEN + 1];
	size_t need = len + 4096, out;
	int32_t flag;

	if (signed_len + need > signed_cap) {
		uint8_t *b = realloc(signed_buf, signed_len + need);

		if (b == NULL)
			abort();
		signed_buf = b;
		signed_cap = signed_len + need;
	}
	if (frame_flag(frame, len, &flag) != 0 ||
	    wire_rem_decode(frame, len, &q, scratch, scratch_cap) != 0 ||
	    wire_rem_ext_add(&q, "AccessKey", "fuzzuser1") != 0)
		goto as_is;
	wire_rem_sign(&q, &fuzz_key, sig);
	if (wire_rem_ext_add(&q, "Signature", sig) != 0 ||
	    wire_rem_encode(&q, signed_buf + signed_len, signed_cap - signed_len, &out) != 0)
		goto as_is;
	signed_len += out;
	return;
as_is:
	memcpy(signed_buf + signed_len, frame, len);
	signed_len += len;
}

/* Return: 0 and *@flag when @frame (whole) decodes, else -1: the server closes there. */
static int
frame_flag(const uint8_t *frame, size_t len, int32_t *flag)
{
	static struct wire_rem_cmd q;
	size_t need = (len - 4) * 3 + 256;

	if (need > scratch_cap) {
		char *b = realloc(scratch, need);

		if (b == NULL)
			abort();
		scratch = b;
		scratch_cap = need;
	}
	if (wire_rem_decode(frame, len, &q, scratch, scratch_cap) != 0)
		return -1;
	*flag = q.flag;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t reset[8]; /* frame length 0: malformed, the server closes */
	size_t at = 0, fed = 0;

	if (rmt == NULL)
		setup();
	bk.acl = size % 5 == 2 ? fuzz_acl : NULL;
	if (bk.acl) {
		/* sign each whole frame, then feed the signed stream the same way */
		signed_len = 0;
		while (at < size) {
			size_t flen;

			if (wire_rem_frame_len(data + at, size - at, FUZZ_MAX_FRAME, &flen) != 0)
				break;
			sign_append(data + at, flen);
			at += flen;
		}
		if (signed_len)
			bk_rmt_feed(rmt, signed_buf, signed_len);
		settle();
		bk_rmt_feed(rmt, reset, sizeof(reset));
		settle();
		bk.acl = NULL;
		return 0;
	}
	/*
	 * Feed up to each FUZZ_FLAG_WAIT frame and settle there; cut the stream
	 * after its last whole frame; past a frame the server finds malformed,
	 * feed the rest (it closes and drops it).
	 */
	while (at < size) {
		size_t flen;
		int32_t flag;
		int err = wire_rem_frame_len(data + at, size - at, FUZZ_MAX_FRAME, &flen);

		if (err == -EAGAIN)
			break;
		if (err != 0 || frame_flag(data + at, flen, &flag) != 0) {
			at = size;
			break;
		}
		at += flen;
		if (flag & FUZZ_FLAG_WAIT) {
			bk_rmt_feed(rmt, data + fed, at - fed);
			settle();
			fed = at;
		}
	}
	if (at > fed) {
		bk_rmt_feed(rmt, data + fed, at - fed);
		settle();
	}
	bk_rmt_feed(rmt, reset, sizeof(reset));
	settle();
	/*
	 * Bound the store (a run writes tens of MB a second): drop each shard's
	 * oldest segment now and then. Pulls and lookups of what is gone are
	 * paths worth fuzzing too.
	 */
	if (++inputs % FUZZ_RETAIN_EVERY == 0) {
		retain_ms += 60000;
		int rrc = store_retain(bk.store, retain_ms); /* a fenced shard is fine here */

		(void)rrc;
	}
	return 0;
}
