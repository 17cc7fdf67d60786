// SPDX-License-Identifier: Apache-2.0
/*
 * bk_follow.c - replication, the slave's side (docs/replication.md): one
 * session per CommitLog shard that copies master core c's shard into this
 * broker's shard c.
 *
 * Each shard has a thread with its own kernel UDP port and transport
 * client. It connects to master core c (the master's dataplane endpoint,
 * port + c), then asks, over and over, for the bytes past its own end of
 * log with a REPL request that also acknowledges what it holds. A parked
 * request comes back as soon as the master appends; the thread writes the
 * bytes with store_repl_write() (each record checked, ConsumeQueues built
 * as recovery builds them) and asks again at once, so a SYNC_MASTER's
 * SEND waits one round trip and one copy.
 *
 * On a slave this thread is the only writer of its shard: the cores refuse
 * SENDs (bk_core.c), so store_put() never runs here.
 *
 * The master's address comes from haMasterAddress or from the NameServer's
 * registration answer (bk_follow_set_master()); a new address ends the
 * current session and starts one to the new master. A master with another
 * geometry (dataplaneCores, mapedFileSizeCommitLog) or another brokerName
 * is refused with an error naming both values; the thread keeps asking
 * every few seconds, so a corrected master is followed without a restart.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bk_follow.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/log.h"
#include "wire/dp.h"
#include "wire/record.h"

#define FOLLOW_TAG "broker.repl"
#define FOLLOW_MAX_BYTES (4u << 20) /* per answer */
#define FOLLOW_SUSPEND_MS 1000u
#define FOLLOW_SPIN_NS 0ull /* poll without sleeping this long after sending */
#define FOLLOW_RETRY_MS 1000u
#define FOLLOW_REFUSED_MS 5000u
#define FOLLOW_ROLL_WAIT_MS 2000u	     /* for the next segment, answer in hand */
#define FOLLOW_LAG_LOG_MS 1000u		     /* log a shard this far behind ... */
#define FOLLOW_LAG_LOG_EVERY_MS 10000u	     /* ... at most this often */
#define FOLLOW_CATCH_LOG_BYTES (64ull << 20) /* log a catch-up that copied this much */

struct follow_shard {
	struct bk_follow *f;
	uint32_t shard;
	pthread_t thr;
	bool started;
	/* the thread only */
	struct dp_port *port;
	bool own_port;	  /* opened here (kernel UDP), closed here */
	uint32_t port_ip; /* ... bound to this address */
	struct dp_xcli *cli;
	struct dp_xsess *sess;
	bool done;
	bool dead;
	bool chained; /* on_answer() sent the next request already */
	bool closing; /* the session is being closed: answers are dropped */
	uint32_t backoff_ms;
	int last_refusal;	 /* the status last logged, to log a refusal once */
	uint32_t busy_row;	 /* SYSTEM_BUSY answers in a row */
	_Atomic bool halted;	 /* the logs diverged beyond repair, or a cut waits for a restart */
	_Atomic int taken;	 /* taking a tail back: 0 going on, 1 done, -1 given up */
	_Atomic bool in_session; /* a session to the master is up (stats, relaxed) */
	/* the shard's last record (REPL prev_*): what the master checks */
	uint64_t prev_off;
	uint32_t prev_size;
	uint32_t prev_hash;
	uint8_t req[WIRE_DP_REPL_REQ_FIXED + WIRE_DP_TOPIC_MAX];
	char client_id[80];
	/* the thread writes, stats read relaxed */
	_Atomic uint64_t master_end;
	_Atomic uint64_t bytes;
	_Atomic uint64_t last_ok_ms;
	struct bk_follow_lag lag;
	/* the thread only */
	uint64_t lag_log_ms;  /* when "behind" was last logged */
	uint64_t catch_ns;    /* behind since (0: caught up) ... */
	uint64_t catch_bytes; /* ... with this much copied then */
};

struct bk_follow {
	struct bk *bk;
	bool recover; /* a master taking its lost tail back from a slave (immutable) */
	_Atomic bool stop;
	pthread_mutex_t mu;
	/* under mu */
	struct dp_addr master; /* ip 0: none known */
	char master_str[64];
	uint64_t gen;
	struct follow_shard sh[BK_CORES_MAX];
};

static void
sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Sleep @ms in slices, returning early at stop. */
static void
nap(struct bk_follow *f, uint32_t ms)
{
	while (ms > 0 && !atomic_load_relaxed(&f->stop)) {
		uint32_t d = ms < 50 ? ms : 50;

		sleep_ms(d);
		ms -= d;
	}
}

static const char *
status_name(int32_t st)
{
	switch (st) {
	case WIRE_DP_ST_BAD_REQUEST:
		return "geometry differs";
	case WIRE_DP_ST_NO_PERMISSION:
		return "another broker group";
	case WIRE_DP_ST_SERVICE_NOT_AVAILABLE:
		return "not a master";
	case WIRE_DP_ST_PULL_OFFSET_MOVED:
		return "offset outside the master's log";
	default:
		return "error";
	}
}

/*
 * The master's log is shorter than ours, or its record before our end is
 * not ours: it lost a tail in a crash (and may have taken new writes
 * since). What both hold is its log up to base_end (its end when it
 * started); ours is cut there at our next start, and the broker restarts
 * itself to do it. Under SYNC_MASTER nothing past that was acknowledged.
 */
static void
diverged(struct follow_shard *fs, const struct wire_dp_repl_resp *r, uint64_t off)
{
	struct bk *bk = fs->f->bk;
	uint64_t to = r->base_end;
	uint64_t one = 1;
	int err;

	if (r->flags & WIRE_DP_REPL_F_SLAVE_ACKED && to < off) {
		/*
		 * A SYNC_MASTER with ASYNC_FLUSH answered SEND_OK once we held
		 * the bytes: past what it kept may be acknowledged messages of
		 * which this is the only copy. Never cut those.
		 */
		log_err(FOLLOW_TAG,
			"shard %u: this slave holds %" PRIu64
			" bytes past what master %s kept (%" PRIu64 " here, it kept %" PRIu64
			"); the master acknowledges SENDs once a slave holds them (SYNC_MASTER), "
			"so they may be acknowledged messages: not cutting; following again once "
			"the master has taken them back (at its start), asking every %u ms",
			fs->shard, off - to, fs->f->master_str, off, to, FOLLOW_RETRY_MS);
		return;
	}
	if (to < clog_min(store_clog(bk->store, fs->shard))) {
		log_err(FOLLOW_TAG,
			"shard %u: master %s kept less (%" PRIu64
			") than where this slave's log starts "
			"(%" PRIu64
			"): not cutting it all; empty this slave's store to copy it anew",
			fs->shard, fs->f->master_str, to,
			clog_min(store_clog(bk->store, fs->shard)));
		atomic_store_relaxed(&fs->halted, true);
		return;
	}
	if (off < r->min_offset) {
		log_err(FOLLOW_TAG,
			"shard %u: master %s no longer has offset %" PRIu64
			" (its log starts at %" PRIu64
			"): this slave cannot catch up; empty its store to copy it anew",
			fs->shard, fs->f->master_str, off, r->min_offset);
		atomic_store_relaxed(&fs->halted, true);
		return;
	}
	if (to >= off) {
		log_err(FOLLOW_TAG,
			"shard %u: this slave's log and master %s's differ before offset %" PRIu64
			" and no common end is known: not following; empty this slave's store to "
			"copy "
			"it anew",
			fs->shard, fs->f->master_str, off);
		atomic_store_relaxed(&fs->halted, true);
		return;
	}
	log_err(FOLLOW_TAG,
		"shard %u: this slave's log runs past what master %s kept (%" PRIu64
		" here, it kept %" PRIu64 ", now at %" PRIu64 "): cutting %" PRIu64
		" bytes at a restart",
		fs->shard, fs->f->master_str, off, to, r->master_end, off - to);
	err = store_truncate_mark(bk->store, fs->shard, to);
	atomic_store_relaxed(&fs->halted, true);
	if (err != 0) {
		log_err(FOLLOW_TAG, "shard %u: recording the cut: %s", fs->shard, strerror(-err));
		return;
	}
	atomic_store(&bk->restart, true);
	if (write(bk->efd, &one, sizeof(one)) < 0)
		return; /* control also looks on its timer */
}

/* Our last record, as the master will check it (prev_*). */
static void
prev_from_log(struct follow_shard *fs, uint64_t last)
{
	fs->prev_size = 0;
	fs->prev_hash = 0;
	fs->prev_off = last;
	if (store_repl_rec_id(fs->f->bk->store, fs->shard, last, &fs->prev_size, &fs->prev_hash) !=
	    0)
		fs->prev_size = 0;
}

/* At a session's start: find our last record (walks its segment). */
static void
prev_init(struct follow_shard *fs)
{
	uint64_t last;

	fs->prev_size = 0;
	if (store_repl_last(fs->f->bk->store, fs->shard, &last) == 0)
		prev_from_log(fs, last);
}

/* A refusal: log it once per kind (it repeats every few seconds) and back off. */
static void
refused(struct follow_shard *fs, const struct wire_dp_repl_resp *r, uint64_t off)
{
	const struct bk_conf *cf = &fs->f->bk->conf;
	int32_t st = r->head.status;

	/* a master that may take our tail back soon is asked again sooner */
	fs->backoff_ms =
		st == WIRE_DP_ST_PULL_OFFSET_MOVED && (r->flags & WIRE_DP_REPL_F_SLAVE_ACKED)
			? FOLLOW_RETRY_MS
			: FOLLOW_REFUSED_MS;
	if (fs->last_refusal == st)
		return;
	fs->last_refusal = st;
	switch (st) {
	case WIRE_DP_ST_BAD_REQUEST:
		log_err(FOLLOW_TAG,
			"shard %u: refusing to follow master %s: dataplaneCores %u here, %u there; "
			"mapedFileSizeCommitLog %" PRIu64 " here, %" PRIu64
			" there (a slave copies each shard byte for byte: both must match)",
			fs->shard, fs->f->master_str, fs->f->bk->ncores, r->cores, cf->seg_size,
			r->seg_size);
		break;
	case WIRE_DP_ST_NO_PERMISSION:
		log_err(FOLLOW_TAG, "shard %u: master %s is not brokerName %s's master", fs->shard,
			fs->f->master_str, cf->broker_name);
		break;
	case WIRE_DP_ST_PULL_OFFSET_MOVED:
		diverged(fs, r, off);
		break;
	default:
		log_err(FOLLOW_TAG, "shard %u: master %s refused to replicate: %s (status %d)",
			fs->shard, fs->f->master_str, status_name(st), st);
		break;
	}
}

static int submit(struct follow_shard *fs, uint64_t offset);

/*
 * Taking a tail back (bk_follow_recover_start()): the slave's answer @r to
 * our request at @off ends it, or not yet. Return: true when it ended.
 */
static bool
recover_end(struct follow_shard *fs, const struct wire_dp_repl_resp *r, uint64_t off)
{
	const char *peer = fs->f->master_str;

	if (r->head.status == WIRE_DP_ST_SUCCESS && (r->data_len > 0 || r->master_end > off))
		return false; /* more to come */
	if (r->head.status == WIRE_DP_ST_SUCCESS ||
	    (r->head.status == WIRE_DP_ST_PULL_OFFSET_MOVED && r->master_end < off)) {
		uint64_t got = atomic_load_relaxed(&fs->bytes);

		if (got > 0)
			log_warn(FOLLOW_TAG,
				 "shard %u: took back %" PRIu64 " bytes this master had lost from "
				 "slave %s: its log ends at %" PRIu64 " again",
				 fs->shard, got, peer, off);
		else
			log_info(FOLLOW_TAG,
				 "shard %u: slave %s holds nothing past this master's end %" PRIu64
				 " (it is at %" PRIu64 ")",
				 fs->shard, peer, off, r->master_end);
		atomic_store(&fs->taken, 1);
		return true;
	}
	if (r->head.status == WIRE_DP_ST_SYSTEM_BUSY)
		return false;
	log_err(FOLLOW_TAG,
		"shard %u: cannot take back a tail from slave %s at %" PRIu64 " (it is at %" PRIu64
		"): %s (status %d)%s",
		fs->shard, peer, off, r->master_end, status_name(r->head.status), r->head.status,
		r->head.status == WIRE_DP_ST_PULL_OFFSET_MOVED
			? ": its record before this master's end is not this master's (the logs "
			  "forked); the slave keeps its copy and says so"
			: "");
	atomic_store(&fs->taken, -1);
	return true;
}

static uint32_t
be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return __builtin_bswap32(v);
}

/*
 * Lag after an answer: the bytes the master had past ours (@own) when it
 * answered, and, while there are any, the age of our newest record (its
 * storeTimestamp on the master's clock, as the append read it): every
 * message we lack is younger, so none has waited longer than that to reach
 * this slave.
 */
static void
lag_update(struct follow_shard *fs, uint64_t master_end, uint64_t own)
{
	struct bk_follow_lag *g = &fs->lag;
	uint64_t now = (uint64_t)clk_wall_ms();
	int64_t newest = clog_last_store_ms(store_clog(fs->f->bk->store, fs->shard));
	uint64_t bytes = master_end > own ? master_end - own : 0;
	uint64_t ms = 0;

	if (fs->f->recover)
		return; /* a master taking its tail back: no lag to watch */
	if (bytes > 0 && newest > 0 && newest != INT64_MAX && (int64_t)now > newest)
		ms = now - (uint64_t)newest;
	atomic_store_relaxed(&g->bytes, bytes);
	atomic_store_relaxed(&g->ms, ms);
	if (bytes > atomic_load_relaxed(&g->max_bytes))
		atomic_store_relaxed(&g->max_bytes, bytes);
	if (ms > atomic_load_relaxed(&g->max_ms))
		atomic_store_relaxed(&g->max_ms, ms);
	if (bytes > 0 && fs->catch_ns == 0) {
		fs->catch_ns = clk_mono_ns();
		fs->catch_bytes = atomic_load_relaxed(&fs->bytes);
	} else if (bytes == 0 && fs->catch_ns != 0) {
		uint64_t d = atomic_load_relaxed(&fs->bytes) - fs->catch_bytes;
		uint64_t ns = clk_mono_ns() - fs->catch_ns;

		fs->catch_ns = 0;
		if (d >= FOLLOW_CATCH_LOG_BYTES && ns > 0)
			log_info(FOLLOW_TAG,
				 "shard %u: caught up with master %s at %" PRIu64 ": %" PRIu64
				 " bytes in %" PRIu64 " ms (%.1f MB/s)",
				 fs->shard, fs->f->master_str, own, d, ns / 1000000,
				 (double)d * 1e3 / (double)ns);
	}
	if (ms >= FOLLOW_LAG_LOG_MS && now - fs->lag_log_ms >= FOLLOW_LAG_LOG_EVERY_MS) {
		fs->lag_log_ms = now;
		log_info(FOLLOW_TAG,
			 "shard %u: %" PRIu64 " bytes (%" PRIu64 " ms) behind master %s, copying",
			 fs->shard, bytes, ms, fs->f->master_str);
	}
}

static void
on_answer(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct follow_shard *fs = arg;
	struct store *s = fs->f->bk->store;
	struct wire_dp_repl_resp r;
	uint64_t off = clog_written(store_clog(s, fs->shard));
	uint64_t last = 0;
	long w;

	fs->done = true;
	if (fs->closing)
		return; /* dp_xcli_close() polls: nothing is taken or asked for now */
	if (err != 0) {
		fs->dead = true;
		if (atomic_load_relaxed(&fs->f->stop))
			return; /* closed at our stop */
		log_warn_ratelimited(FOLLOW_TAG, "shard %u: session to master %s lost: %s",
				     fs->shard, fs->f->master_str, strerror(-err));
		return;
	}
	if (wire_dp_repl_resp_decode(msg, len, &r) != 0) {
		fs->dead = true;
		log_warn_ratelimited(FOLLOW_TAG, "shard %u: malformed REPL answer from %s",
				     fs->shard, fs->f->master_str);
		return;
	}
	if (r.epoch != 0 && r.epoch < atomic_load_relaxed(&fs->f->bk->epoch)) {
		/* a replaced master (docs/failover.md): nothing of it is taken */
		fs->backoff_ms = FOLLOW_RETRY_MS;
		log_warn_ratelimited(FOLLOW_TAG,
				     "shard %u: %s is master of epoch %" PRIu64
				     ", replaced in epoch %" PRIu64 ": not following it",
				     fs->shard, fs->f->master_str, r.epoch,
				     atomic_load_relaxed(&fs->f->bk->epoch));
		return;
	}
	if (r.head.status == WIRE_DP_ST_SYSTEM_BUSY) {
		fs->backoff_ms = 1;
		if (++fs->busy_row % 1000 == 0)
			log_warn_ratelimited(
				FOLLOW_TAG,
				"shard %u: master %s answered SYSTEM_BUSY %u times in a row "
				"at offset %" PRIu64 " (no buffer for a record that large? "
				"maxMessageSize must be the same on both)",
				fs->shard, fs->f->master_str, fs->busy_row, off);
		return;
	}
	fs->busy_row = 0;
	if (fs->f->recover && recover_end(fs, &r, off))
		return;
	if (r.head.status != WIRE_DP_ST_SUCCESS) {
		refused(fs, &r, off);
		return;
	}
	if (fs->last_refusal != 0)
		log_info(FOLLOW_TAG, "shard %u: following master %s from offset %" PRIu64,
			 fs->shard, fs->f->master_str, off);
	fs->last_refusal = 0;
	atomic_store_relaxed(&fs->master_end, r.master_end);
	atomic_store_relaxed(&fs->last_ok_ms, (uint64_t)clk_wall_ms());
	if (r.data_len == 0) {
		lag_update(fs, r.master_end, off);
		return;
	}
	w = store_repl_append(s, fs->shard, r.data_offset, r.data, r.data_len, &last);
	/*
	 * The bytes start a segment that the store's service thread is still
	 * preparing: wait for it here, with the answer in hand. Asking again
	 * instead had the master send the same 4 MiB every millisecond until
	 * the file was ready (2.4 GB sent for 0.8 GB kept in one 8 s run),
	 * which took the CPU the preparation needed.
	 */
	if (w == -EAGAIN) {
		uint64_t t0 = clk_mono_ns();

		for (uint32_t i = 0; w == -EAGAIN && i < FOLLOW_ROLL_WAIT_MS; i++) {
			if (atomic_load_relaxed(&fs->f->stop))
				return;
			sleep_ms(1);
			w = store_repl_append(s, fs->shard, r.data_offset, r.data, r.data_len,
					      &last);
		}
		atomic_add_relaxed(&fs->lag.seg_wait_ms, (clk_mono_ns() - t0) / 1000000);
	}
	if (w == -EAGAIN) {
		fs->backoff_ms = FOLLOW_RETRY_MS;
		log_warn_ratelimited(FOLLOW_TAG,
				     "shard %u: the segment at offset %" PRIu64
				     " is not ready after %u ms; asking again",
				     fs->shard, r.data_offset, FOLLOW_ROLL_WAIT_MS);
		return;
	}
	if (w > 0) {
		/*
		 * The bytes are in our log: acknowledge them (ask for more)
		 * before the ConsumeQueue units are written and the bytes
		 * published, so a SYNC_MASTER's SEND waits for the copy alone.
		 * A crash in between loses nothing: the log holds the bytes
		 * and recovery dispatches them. When the copy ends with a
		 * BLANK, its identity is read back from the log afterwards.
		 */
		const uint8_t *lr = r.data + (last - r.data_offset);
		uint32_t size = be32(lr);

		if (be32(lr + 4) == WIRE_MAGIC_MESSAGE &&
		    last + size == r.data_offset + (uint64_t)w) {
			fs->prev_off = last;
			fs->prev_size = size;
			fs->prev_hash = clog_rec_hash(lr, size, size); /* all of it at hand */
			dp_xcli_clock(fs->cli); /* the append took a while: date the request now */
			fs->chained = submit(fs, r.data_offset + (uint64_t)w) == 0;
		}
		w = store_repl_publish(s, fs->shard, r.data_offset, (size_t)w);
	}
	if (clog_written(store_clog(s, fs->shard)) > off) {
		atomic_add_relaxed(&fs->bytes, clog_written(store_clog(s, fs->shard)) - off);
		if (!fs->chained)
			prev_from_log(fs, last);
		lag_update(fs, r.master_end, clog_written(store_clog(s, fs->shard)));
	}
	if (w < 0) {
		fs->backoff_ms = FOLLOW_RETRY_MS;
		log_err_ratelimited(
			FOLLOW_TAG,
			"shard %u: %u bytes from master %s at offset %" PRIu64 " not taken: %s",
			fs->shard, r.data_len, fs->f->master_str, r.data_offset, strerror((int)-w));
	}
}

/*
 * Send a REPL request from local @offset (our end of log, or of what we
 * appended and are about to publish), naming our last record (prev_*).
 * Return: 0, or the submit's error.
 */
static int
submit(struct follow_shard *fs, uint64_t offset)
{
	struct bk *bk = fs->f->bk;
	struct clog *c = store_clog(bk->store, fs->shard);
	struct wire_dp_repl_req q = {
		.offset = offset,
		.seg_size = bk->conf.seg_size,
		.flushed = clog_flushed(c),
		.prev_off = fs->prev_off,
		.prev_size = fs->prev_size,
		.prev_hash = fs->prev_hash,
		.max_bytes = FOLLOW_MAX_BYTES,
		.suspend_ms = fs->f->recover ? 0 : FOLLOW_SUSPEND_MS,
		.shard = (uint16_t)fs->shard,
		.cores = (uint16_t)bk->ncores,
		.epoch = atomic_load_relaxed(&bk->epoch),
		.name = bk->conf.broker_name,
		.name_len = (uint16_t)strlen(bk->conf.broker_name),
		.flags = fs->f->recover ? WIRE_DP_REPL_RQ_F_RECOVER : 0,
	};
	long n = wire_dp_repl_req_encode(&q, fs->req, sizeof(fs->req));

	if (n < 0)
		return (int)n;
	return dp_xcli_submit(fs->sess, WIRE_DP_OP_REPL, fs->req, (uint32_t)n, on_answer, fs);
}

/*
 * One REPL round trip (its request may already be in flight: on_answer()
 * sends the next one before it publishes). Return: false when the session
 * is dead.
 */
static bool
ask(struct follow_shard *fs)
{
	uint64_t t0;

	if (fs->chained)
		fs->chained = false;
	else if (submit(fs, clog_written(store_clog(fs->f->bk->store, fs->shard))) != 0)
		return false;
	fs->done = false;
	t0 = clk_mono_ns();
	while (!fs->done) {
		if (dp_xcli_poll(fs->cli) > 0 || fs->done)
			continue;
		if (atomic_load_relaxed(&fs->f->stop))
			return false; /* the session is closed (and the answer dropped) next */
		if (clk_mono_ns() - t0 > FOLLOW_SPIN_NS)
			dp_port_wait(fs->port, 1000);
		else
			sched_yield();
	}
	return !fs->dead;
}

static bool
master_of(struct bk_follow *f, struct dp_addr *a, uint64_t *gen)
{
	pthread_mutex_lock(&f->mu);
	*a = f->master;
	*gen = f->gen;
	pthread_mutex_unlock(&f->mu);
	return a->ip != 0;
}

/* The transport client on fs->port. */
static int
session_client(struct follow_shard *fs)
{
	struct dp_xcli_cfg xc = {
		.slots = 1,
		.max_msg = fs->f->bk->conf.max_msg_size + WIRE_DP_MSG_OVERHEAD,
		.client_id = fs->client_id,
		.access_key = fs->f->bk->conf.access_key,
		.secret_key = fs->f->bk->conf.secret_key,
	};

	return dp_xcli_create(&xc, fs->port, &fs->cli);
}

static bool
is_loopback(uint32_t ip)
{
	return (ntohl(ip) >> 24) == 127;
}

/*
 * A udp or af_packet slave's session port: a kernel UDP socket, opened
 * for the master it is about to reach. To a master on loopback it binds
 * 127.0.0.1 (datagrams of up to 64 KiB: a 4 MiB answer in 64 of them, not
 * 2,850 of 1,472 bytes); otherwise the dataplane's address (its source
 * address) unless that is loopback, then any. Return: 0, -errno.
 */
static int
session_port(struct follow_shard *fs, uint32_t master_ip)
{
	uint32_t dp_ip = fs->f->bk->conf.dp_ip;
	uint32_t ip = is_loopback(master_ip) ? htonl(0x7f000001u) : is_loopback(dp_ip) ? 0 : dp_ip;
	struct dp_port_cfg pc = {.backend = DP_BACKEND_UDP, .n = 1, .ip = ip};
	int err;

	if (!fs->own_port && fs->port != NULL)
		return 0; /* the caller's (a dpdk slave's extra port) */
	if (fs->port != NULL && fs->port_ip == ip)
		return 0;
	if (fs->cli != NULL)
		dp_xcli_destroy(fs->cli);
	fs->cli = NULL;
	if (fs->port != NULL)
		dp_ports_close(&fs->port, 1);
	fs->port = NULL;
	err = dp_ports_open(&pc, &fs->port);
	if (err != 0)
		return err;
	fs->own_port = true;
	fs->port_ip = ip;
	err = session_client(fs);
	if (err != 0) {
		dp_ports_close(&fs->port, 1);
		fs->port = NULL;
	}
	return err;
}

static void *
follow_main(void *arg)
{
	struct follow_shard *fs = arg;
	struct bk_follow *f = fs->f;

	while (!atomic_load_relaxed(&f->stop)) {
		struct dp_addr m;
		uint64_t gen;
		uint64_t cur;
		int err;

		if (atomic_load_relaxed(&fs->halted) || atomic_load_relaxed(&fs->taken) != 0 ||
		    !master_of(f, &m, &gen)) {
			nap(f, 100);
			continue;
		}
		m.port = (uint16_t)(m.port + fs->shard);
		err = session_port(fs, m.ip);
		if (err != 0) {
			log_err_ratelimited(FOLLOW_TAG, "shard %u: no port for the session: %s",
					    fs->shard, strerror(-err));
			nap(f, FOLLOW_RETRY_MS);
			continue;
		}
		err = dp_xcli_connect(fs->cli, m, FOLLOW_RETRY_MS, &fs->sess);
		if (err != 0) {
			log_warn_ratelimited(FOLLOW_TAG, "shard %u: cannot reach %s %s: %s",
					     fs->shard, f->recover ? "slave" : "master",
					     f->master_str, strerror(-err));
			nap(f, FOLLOW_RETRY_MS);
			continue;
		}
		log_info(FOLLOW_TAG, "shard %u: session to %s %s core %u", fs->shard,
			 f->recover ? "slave" : "master", f->master_str, fs->shard);
		fs->dead = false;
		fs->chained = false;
		atomic_store_relaxed(&fs->in_session, true);
		prev_init(fs);
		while (!atomic_load_relaxed(&f->stop) && master_of(f, &m, &cur) && cur == gen &&
		       !atomic_load_relaxed(&fs->halted) && atomic_load_relaxed(&fs->taken) == 0) {
			fs->backoff_ms = 0;
			if (!ask(fs))
				break;
			if (fs->backoff_ms)
				nap(f, fs->backoff_ms);
		}
		atomic_store_relaxed(&fs->in_session, false);
		fs->closing = true;
		dp_xcli_close(fs->sess, 100);
		fs->closing = false;
		fs->chained = false;
		fs->sess = NULL;
	}
	return NULL;
}

void
bk_follow_set_master(struct bk_follow *f, const char *addr)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	struct in_addr a;
	long port;

	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		goto bad;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	port = strtol(colon + 1, NULL, 10);
	if (inet_pton(AF_INET, host, &a) != 1 || port <= 0 || port > 65535)
		goto bad;
	pthread_mutex_lock(&f->mu);
	if (f->master.ip != a.s_addr || f->master.port != (uint16_t)port) {
		f->master.ip = a.s_addr;
		f->master.port = (uint16_t)port;
		snprintf(f->master_str, sizeof(f->master_str), "%s", addr);
		f->gen++;
		if (f->recover)
			log_info(FOLLOW_TAG,
				 "asking slave %s of %s for what it holds past this master's end",
				 addr, f->bk->conf.broker_name);
		else
			log_info(FOLLOW_TAG,
				 "following master %s (dataplane %s, core c at port %ld + c)",
				 f->bk->conf.broker_name, addr, port);
	}
	pthread_mutex_unlock(&f->mu);
	return;
bad:
	log_err_ratelimited(FOLLOW_TAG, "master address '%s' is not ipv4:port", addr);
}

static int
follow_start(struct bk *bk, const char *master, struct dp_port *const *ports, bool recover,
	     struct bk_follow **out)
{
	struct bk_follow *f = calloc(1, sizeof(*f));
	int err = 0;

	if (f == NULL)
		return -ENOMEM;
	f->bk = bk;
	f->recover = recover;
	pthread_mutex_init(&f->mu, NULL);
	if (master != NULL && master[0] != '\0')
		bk_follow_set_master(f, master);
	for (uint32_t i = 0; i < bk->ncores && err == 0; i++) {
		struct follow_shard *fs = &f->sh[i];

		fs->f = f;
		fs->shard = i;
		snprintf(fs->client_id, sizeof(fs->client_id), "sprocket-%s@%.40s/%u",
			 recover ? "master" : "slave", bk->conf.broker_name, i);
		if (ports != NULL) {
			fs->port = ports[i];
			err = session_client(fs);
		}
		if (err == 0)
			err = -pthread_create(&fs->thr, NULL, follow_main, fs);
		fs->started = err == 0;
	}
	if (err != 0) {
		log_err(FOLLOW_TAG, "starting replication sessions: %s", strerror(-err));
		bk_follow_stop(f);
		return err;
	}
	*out = f;
	return 0;
}

int
bk_follow_start(struct bk *bk, const char *master, struct dp_port *const *ports,
		struct bk_follow **out)
{
	return follow_start(bk, master, ports, false, out);
}

int
bk_follow_recover_start(struct bk *bk, const char *slave, struct bk_follow **out)
{
	return follow_start(bk, slave, NULL, true, out);
}

int
bk_follow_recover_state(const struct bk_follow *f)
{
	int st = 1;

	for (uint32_t i = 0; i < f->bk->ncores; i++) {
		int t = atomic_load(&f->sh[i].taken);

		if (t == 0)
			return 0;
		st = t < 0 ? -1 : st;
	}
	return st;
}

void
bk_follow_stop(struct bk_follow *f)
{
	if (f == NULL)
		return;
	atomic_store_relaxed(&f->stop, true);
	for (uint32_t i = 0; i < BK_CORES_MAX; i++) {
		struct follow_shard *fs = &f->sh[i];

		if (fs->started)
			pthread_join(fs->thr, NULL);
		if (fs->sess)
			dp_xcli_close(fs->sess, 100);
		if (fs->cli)
			dp_xcli_destroy(fs->cli);
		if (fs->own_port)
			dp_ports_close(&fs->port, 1);
	}
	pthread_mutex_destroy(&f->mu);
	free(f);
}

void
bk_follow_stats(const struct bk_follow *f, uint32_t shard, uint64_t *master_end, uint64_t *bytes,
		struct bk_follow_lag *lag)
{
	const struct bk_follow_lag *g = &f->sh[shard].lag;

	*master_end = atomic_load_relaxed(&f->sh[shard].master_end);
	*bytes = atomic_load_relaxed(&f->sh[shard].bytes);
	if (lag == NULL)
		return;
	atomic_store_relaxed(&lag->bytes, atomic_load_relaxed(&g->bytes));
	atomic_store_relaxed(&lag->ms, atomic_load_relaxed(&g->ms));
	atomic_store_relaxed(&lag->max_bytes, atomic_load_relaxed(&g->max_bytes));
	atomic_store_relaxed(&lag->max_ms, atomic_load_relaxed(&g->max_ms));
	atomic_store_relaxed(&lag->seg_wait_ms, atomic_load_relaxed(&g->seg_wait_ms));
}

bool
bk_follow_connected(const struct bk_follow *f)
{
	for (uint32_t i = 0; i < f->bk->ncores; i++)
		if (!atomic_load_relaxed(&f->sh[i].in_session) &&
		    !atomic_load_relaxed(&f->sh[i].halted))
			return false;
	return true;
}

uint64_t
bk_follow_contact_ms(const struct bk_follow *f)
{
	uint64_t oldest = UINT64_MAX;

	for (uint32_t i = 0; i < f->bk->ncores; i++) {
		uint64_t t = atomic_load_relaxed(&f->sh[i].last_ok_ms);

		if (t < oldest)
			oldest = t;
	}
	return oldest == UINT64_MAX ? 0 : oldest;
}
