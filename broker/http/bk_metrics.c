// SPDX-License-Identifier: Apache-2.0
/*
 * bk_metrics.c - the broker's /metrics in Prometheus' text format (0.0.4),
 * written on the control thread (docs/observability.md lists every family).
 *
 * What the cores count they write alone (struct bk_core_stats, the
 * transport's and the lcore's counters); this file reads them with relaxed
 * loads, as GET_BROKER_RUNTIME_INFO does, so a scrape costs the cores
 * nothing. What the control thread owns (remoting, ACL of the remoting port)
 * it reads directly: httpd runs this handler on that thread.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "ctl/bk_ctl.h"
#include "ha/bk_follow.h"
#include "ha/bk_ha.h"
#include "remoting/bk_rmt.h"
#include "common/clock.h"
#include "control/httpd.h"
#include "common/jbuf.h"
#include "common/log.h"
#include "control/breg.h"
#include "dp/lcore.h"
#include "dp/xport.h"
#include "sp_config.h"
#include "store/clog.h"
#include "store/store.h"

#define LD(v) __atomic_load_n(&(v), __ATOMIC_RELAXED)

/* Label values of enum bk_busy_why (bk_busy_names[] are for the log). */
static const char *const busy_labels[BK_BUSY_WHYS] = {
	[BK_BUSY_OTHER] = "other",
	[BK_BUSY_STORE] = "store_not_ready",
	[BK_BUSY_INFLIGHT] = "acks_in_flight",
	[BK_BUSY_ANSWER_BUF] = "answer_buffers",
	[BK_BUSY_TOPIC_CREATE] = "topic_being_created",
	[BK_BUSY_OFFSETS] = "offset_table_full",
	[BK_BUSY_TX_WINDOW] = "transactions_in_doubt",
	[BK_BUSY_REPL] = "replication",
};

static const char *const rmt_busy_labels[BK_RMT_BUSY_REASONS] = {
	[BK_RMT_BUSY_CORE] = "core_inflight",
	[BK_RMT_BUSY_CONN] = "connection_inflight",
	[BK_RMT_BUSY_ADDR] = "address_inflight",
	[BK_RMT_BUSY_POLLS] = "long_polls",
	[BK_RMT_BUSY_HELD] = "long_polls_held",
	[BK_RMT_BUSY_HELD_ADDR] = "long_polls_held_address",
};

static const char *const rmt_refused_labels[BK_RMT_REFUSE_REASONS] = {
	[BK_RMT_REFUSE_CONNS] = "max_connections",  [BK_RMT_REFUSE_ADDR] = "per_address",
	[BK_RMT_REFUSE_NOFD] = "no_descriptor",	    [BK_RMT_REFUSE_FRAME_SIZE] = "frame_size",
	[BK_RMT_REFUSE_FRAME_MEM] = "frame_memory",
};

/* name{core="i"} v, or name{core="i",k="lv"} v */
static void
at_core(struct jbuf *b, const char *name, uint32_t core, const char *k, const char *lv, uint64_t v)
{
	jbuf_lit(b, name);
	jbuf_lit(b, "{core=\"");
	httpd_prom_u64(b, core);
	jbuf_lit(b, "\"");
	if (k) {
		jbuf_lit(b, ",");
		jbuf_lit(b, k);
		jbuf_lit(b, "=\"");
		httpd_prom_label(b, lv);
		jbuf_lit(b, "\"");
	}
	jbuf_lit(b, "} ");
	httpd_prom_u64(b, v);
	jbuf_lit(b, "\n");
}

/* The per-core counters that are one field of struct bk_core_stats each. */
static const struct stat_family {
	const char *name, *type, *help;
	size_t off;
} core_stats[] = {
#define ST(f) offsetof(struct bk_core_stats, f)
	{"sprocket_core_messages_in_total", "counter",
	 "messages stored by SEND and SEND_BATCH (dataplane and remoting)", ST(msgs_in)},
	{"sprocket_core_messages_out_total", "counter", "messages delivered in PULL answers",
	 ST(msgs_out)},
	{"sprocket_core_message_bytes_in_total", "counter",
	 "CommitLog bytes of the messages stored (records, headers included)", ST(bytes_in)},
	{"sprocket_core_message_bytes_out_total", "counter",
	 "record bytes delivered in PULL answers", ST(bytes_out)},
	{"sprocket_core_pulls_parked_total", "counter", "PULLs held as long polls", ST(parked)},
	{"sprocket_core_pulls_held_total", "counter",
	 "long-polling PULLs that found nothing and went back to the remoting thread to wait "
	 "there (no room in the core's park table)",
	 ST(held)},
	{"sprocket_core_redirects_total", "counter",
	 "requests answered with the core that owns the queue", ST(redirects)},
	{"sprocket_core_types_refused_total", "counter",
	 "SENDs of a message type this broker does not take", ST(type_refused)},
	{"sprocket_core_flush_timeouts_total", "counter", "SYNC_FLUSH answers FLUSH_DISK_TIMEOUT",
	 ST(flush_timeouts)},
	{"sprocket_core_writes_refused_total", "counter",
	 "SENDs refused because this broker is a slave", ST(write_refused)},
	{"sprocket_replication_sent_bytes_total", "counter",
	 "CommitLog bytes a master sent its slaves", ST(repl_bytes)},
	{"sprocket_replication_slave_timeouts_total", "counter",
	 "SYNC_MASTER answers FLUSH_SLAVE_TIMEOUT", ST(slave_timeouts)},
#undef ST
};

static void
core_stat(struct bk_ctl *x, struct jbuf *b, const struct stat_family *f)
{
	httpd_prom_family(b, f->name, f->type, f->help);
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const uint64_t *p = (const uint64_t *)((const char *)&x->bk.cores[i].st + f->off);

		at_core(b, f->name, i, NULL, NULL, __atomic_load_n(p, __ATOMIC_RELAXED));
	}
}

/* What a core holds now: acknowledgements waiting for a flush or a slave, parked PULLs. */
static void
waiting(struct bk_ctl *x, struct jbuf *b)
{
	httpd_prom_family(b, "sprocket_core_pending_acks", "gauge",
			  "SENDs stored and waiting for their flush (SYNC_FLUSH) or a slave "
			  "(SYNC_MASTER)");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];
		uint32_t head = __atomic_load_n(&c->ack_head, __ATOMIC_RELAXED);
		uint32_t tail = __atomic_load_n(&c->ack_tail, __ATOMIC_RELAXED);

		/* two relaxed reads of the core's plain indexes: head first, so head <= tail */
		at_core(b, "sprocket_core_pending_acks", i, NULL, NULL,
			tail - head <= c->ack_cap ? tail - head : 0);
	}
	httpd_prom_family(b, "sprocket_core_pulls_parked", "gauge", "PULLs held as long polls now");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_core_pulls_parked", i, NULL, NULL,
			__atomic_load_n(&x->bk.cores[i].park_n, __ATOMIC_RELAXED));
}

static void
stalls(struct bk_ctl *x, struct jbuf *b)
{
	httpd_prom_family(b, "sprocket_core_stalls_total", "counter",
			  "loop iterations of a core that took over its stall threshold");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_core_stalls_total", i, NULL, NULL,
			atomic_load_relaxed(&x->bk.cores[i].lc.st.stalls));
	httpd_prom_family(b, "sprocket_core_stall_max_seconds", "gauge",
			  "the longest such iteration");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		jbuf_lit(b, "sprocket_core_stall_max_seconds{core=\"");
		httpd_prom_u64(b, i);
		jbuf_lit(b, "\"} ");
		httpd_prom_seconds(b, atomic_load_relaxed(&x->bk.cores[i].lc.st.stall_max_ns));
		jbuf_lit(b, "\n");
	}
}

static const char *const err_ops[BK_ERR_OPS] = {"send", "send_batch", "pull", "other"};
/* in err_status()'s order (bk_core.c): RocketMQ's ResponseCode names */
static const char *const err_statuses[BK_ERR_STATUSES] = {
	"OTHER",
	"SYSTEM_ERROR",
	"NOT_SUPPORTED",
	"FLUSH_DISK_TIMEOUT",
	"SLAVE_NOT_AVAILABLE",
	"FLUSH_SLAVE_TIMEOUT",
	"MESSAGE_ILLEGAL",
	"SERVICE_NOT_AVAILABLE",
	"NO_PERMISSION",
	"TOPIC_NOT_EXIST",
	"PULL_NOT_FOUND",
	"PULL_RETRY_IMMEDIATELY",
	"PULL_OFFSET_MOVED",
	"QUERY_NOT_FOUND",
	"SUBSCRIPTION_GROUP_NOT_EXIST",
	"BAD_REQUEST",
};

static void
requests(struct bk_ctl *x, struct jbuf *b)
{
	httpd_prom_family(b, "sprocket_core_requests_total", "counter",
			  "dataplane requests a core handled, by operation");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];

		at_core(b, "sprocket_core_requests_total", i, "op", "send", LD(c->st.sends));
		at_core(b, "sprocket_core_requests_total", i, "op", "send_batch",
			LD(c->st.send_batches));
		at_core(b, "sprocket_core_requests_total", i, "op", "pull", LD(c->st.pulls));
	}
	httpd_prom_family(b, "sprocket_core_errors_total", "counter",
			  "requests answered with an error status (not SYSTEM_BUSY, not a "
			  "redirect), by operation and status; only those that happened");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		for (unsigned o = 0; o < BK_ERR_OPS; o++)
			for (unsigned k = 0; k < BK_ERR_STATUSES; k++) {
				uint64_t v = LD(x->bk.cores[i].st.err_by[o][k]);

				if (v == 0)
					continue;
				jbuf_lit(b, "sprocket_core_errors_total{core=\"");
				httpd_prom_u64(b, i);
				jbuf_lit(b, "\",op=\"");
				jbuf_lit(b, err_ops[o]);
				jbuf_lit(b, "\",status=\"");
				jbuf_lit(b, err_statuses[k]);
				jbuf_lit(b, "\"} ");
				httpd_prom_u64(b, v);
				jbuf_lit(b, "\n");
			}
	httpd_prom_family(b, "sprocket_core_busy_total", "counter",
			  "requests a core answered SYSTEM_BUSY, by reason (docs/isolation.md)");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		for (unsigned r = 0; r < BK_BUSY_WHYS; r++)
			at_core(b, "sprocket_core_busy_total", i, "reason", busy_labels[r],
				LD(x->bk.cores[i].st.busy_by[r]));
	httpd_prom_family(b, "sprocket_core_acl_denied_total", "counter",
			  "dataplane requests the ACL refused, by reason");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		for (unsigned r = 0; r < BK_ACL_REASONS; r++)
			at_core(b, "sprocket_core_acl_denied_total", i, "reason",
				bk_acl_reason_name(r), LD(x->bk.cores[i].st.acl_denied[r]));
}

/* The latency histograms of enum bk_lat: one family each, the two request ones by port. */
static const struct lat_family {
	enum bk_lat k;
	const char *name, *help, *label;
} lat_families[] = {
	{BK_LAT_REQ_DP, "sprocket_core_request_seconds",
	 "a request's time on a core, from its receipt to its answer (or its park)",
	 ",port=\"dataplane\""},
	{BK_LAT_REQ_RMT, "sprocket_core_request_seconds", NULL, ",port=\"remoting\""},
	{BK_LAT_APPEND, "sprocket_core_store_append_seconds",
	 "the store's append of one SEND or SEND_BATCH", ""},
	{BK_LAT_DURABLE, "sprocket_core_durable_wait_seconds",
	 "SYNC_FLUSH or SYNC_MASTER: from the append to the answer (flushed, slave acked, or timed "
	 "out)",
	 ""},
	{BK_LAT_WAKE, "sprocket_core_long_poll_wake_seconds",
	 "a parked PULL: from the append that woke it to its answer", ""},
};

static void
latency(struct bk_ctl *x, struct jbuf *b)
{
	for (size_t j = 0; j < sizeof(lat_families) / sizeof(lat_families[0]); j++) {
		const struct lat_family *f = &lat_families[j];

		if (f->help)
			httpd_prom_family(b, f->name, "histogram", f->help);
		for (uint32_t i = 0; i < x->bk.ncores; i++) {
			char labels[64];

			snprintf(labels, sizeof(labels), "core=\"%u\"%s", i, f->label);
			httpd_prom_histogram(b, f->name, labels, &x->bk.cores[i].st.lat[f->k]);
		}
	}
}

/* name{group="g",topic="t",queue="q"} v */
static void
at_queue(struct jbuf *b, const char *name, const struct bk_off *e, uint64_t v)
{
	jbuf_lit(b, name);
	jbuf_lit(b, "{group=\"");
	httpd_prom_label(b, e->group);
	jbuf_lit(b, "\",topic=\"");
	httpd_prom_label(b, e->topic);
	jbuf_lit(b, "\",queue=\"");
	httpd_prom_u64(b, e->qid);
	jbuf_lit(b, "\"} ");
	httpd_prom_u64(b, v);
	jbuf_lit(b, "\n");
}

/*
 * Consumer lag: every group's committed offset in every queue, against the
 * queue's end (what a consumer may read: in SYNC_FLUSH, the flushed end);
 * bk_committed_each() gives each group, topic and queue once.
 */
struct consumers {
	struct bk_ctl *x;
	struct jbuf *b;
	const char *name;
	bool lag;
};

static int
consumer_row(void *arg, const struct bk_off *e, const struct bk_topic *t, int64_t off)
{
	const struct consumers *w = arg;
	uint64_t end;

	if (!w->lag) {
		at_queue(w->b, w->name, e, (uint64_t)off);
		return 0;
	}
	end = store_queue_max(w->x->bk.store, t->sq[e->qid]);
	at_queue(w->b, w->name, e, end > (uint64_t)off ? end - (uint64_t)off : 0);
	return 0;
}

static void
consumers(struct bk_ctl *x, struct jbuf *b, bool lag)
{
	struct consumers w = {
		.x = x,
		.b = b,
		.name = lag ? "sprocket_consumer_lag_messages" : "sprocket_consumer_offset",
		.lag = lag,
	};

	httpd_prom_family(b, w.name, "gauge",
			  lag ? "messages a group has yet to consume in a queue: the queue's end "
				"minus the group's committed offset"
			      : "a group's committed offset in a queue");
	(void)bk_committed_each(x, consumer_row, &w);
}

static void
transport(struct bk_ctl *x, struct jbuf *b)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} f[] = {
		{"sprocket_transport_retransmits_total", "response packets sent again",
		 offsetof(struct dp_xsrv_stats, tx_retrans)},
		{"sprocket_transport_duplicates_total",
		 "requests received again (answered from the slot)",
		 offsetof(struct dp_xsrv_stats, rx_dup)},
		{"sprocket_transport_malformed_total", "packets dropped as malformed",
		 offsetof(struct dp_xsrv_stats, rx_malformed)},
		{"sprocket_transport_sessions_opened_total", "sessions opened",
		 offsetof(struct dp_xsrv_stats, sessions_opened)},
		{"sprocket_transport_sessions_refused_total",
		 "CONNECTs refused: session table full",
		 offsetof(struct dp_xsrv_stats, sessions_refused)},
		{"sprocket_transport_sessions_expired_total", "sessions closed for silence",
		 offsetof(struct dp_xsrv_stats, sessions_expired)},
		{"sprocket_transport_sessions_unauthenticated_total",
		 "CONNECTs refused: missing, unknown or wrong credentials",
		 offsetof(struct dp_xsrv_stats, sessions_unauth)},
		{"sprocket_transport_sessions_open", "sessions open now",
		 offsetof(struct dp_xsrv_stats, sessions_open)},
	};

	for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
		httpd_prom_family(b, f[k].name,
				  k + 1 == sizeof(f) / sizeof(f[0]) ? "gauge" : "counter",
				  f[k].help);
		for (uint32_t i = 0; i < x->bk.ncores; i++) {
			const struct dp_xsrv *xs = x->bk.cores[i].xs;
			uint64_t v = 0;

			if (xs) {
				const uint64_t *p =
					(const uint64_t *)((const char *)dp_xsrv_stats(xs) +
							   f[k].off);

				v = __atomic_load_n(p, __ATOMIC_RELAXED);
			}
			at_core(b, f[k].name, i, NULL, NULL, v);
		}
	}
}

static void
faults(struct bk_ctl *x, struct jbuf *b)
{
	httpd_prom_family(b, "sprocket_core_page_faults_total", "counter",
			  "page faults a dataplane core's thread took (0 in steady state)");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		uint64_t mn = 0, mj = 0;

		if (dp_lcore_faults(&x->bk.cores[i].lc, &mn, &mj) != 0)
			continue;
		at_core(b, "sprocket_core_page_faults_total", i, "kind", "minor", mn);
		at_core(b, "sprocket_core_page_faults_total", i, "kind", "major", mj);
	}
}

static void
store(struct bk_ctl *x, struct jbuf *b)
{
	struct statvfs vfs;

	httpd_prom_family(b, "sprocket_store_commitlog_written_bytes", "gauge",
			  "end of the shard's CommitLog (bytes ever appended)");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_store_commitlog_written_bytes", i, NULL, NULL,
			clog_written(store_clog(x->bk.store, i)));
	httpd_prom_family(b, "sprocket_store_commitlog_flushed_bytes", "gauge",
			  "end of the shard's durable CommitLog (fdatasync done)");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_store_commitlog_flushed_bytes", i, NULL, NULL,
			clog_flushed(store_clog(x->bk.store, i)));
	httpd_prom_family(b, "sprocket_store_commitlog_min_bytes", "gauge",
			  "first CommitLog offset still stored (older segments deleted)");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_store_commitlog_min_bytes", i, NULL, NULL,
			clog_min(store_clog(x->bk.store, i)));
	httpd_prom_family(b, "sprocket_store_commitlog_cut_bytes", "gauge",
			  "bytes cut from the log at this start to follow the master: a slave "
			  "that forked from it, or a deposed master's unreplicated tail");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct store_recovery r;

		if (store_recovery(x->bk.store, i, &r) == 0 && r.clog != NULL)
			at_core(b, "sprocket_store_commitlog_cut_bytes", i, NULL, NULL,
				r.clog->cut);
	}
	httpd_prom_family(b, "sprocket_store_syncs_total", "counter",
			  "flush rounds that synced CommitLog data");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_store_syncs_total", i, NULL, NULL,
			clog_syncs(store_clog(x->bk.store, i)));
	httpd_prom_family(b, "sprocket_store_flush_seconds", "histogram",
			  "a flush round of the shard's CommitLog: write-back and fdatasync");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		char labels[32];

		snprintf(labels, sizeof(labels), "core=\"%u\"", i);
		httpd_prom_histogram(b, "sprocket_store_flush_seconds", labels,
				     clog_flush_hist(store_clog(x->bk.store, i)));
	}
	httpd_prom_family(b, "sprocket_store_commitlog_segments", "gauge",
			  "CommitLog segment files the shard holds (mapedFileSizeCommitLog each)");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct clog *cl = store_clog(x->bk.store, i);
		uint64_t seg = clog_seg_size(cl), lo = clog_min(cl) / seg * seg;

		at_core(b, "sprocket_store_commitlog_segments", i, NULL, NULL,
			(clog_written(cl) - lo) / seg + 1);
	}
	httpd_prom_family(
		b, "sprocket_store_busy_total", "counter",
		"appends the store refused for a while (SYSTEM_BUSY), by what was not ready");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct store_busy_counts sb = {0};

		(void)store_busy(x->bk.store, i, &sb);
		at_core(b, "sprocket_store_busy_total", i, "reason", "consumequeue_file",
			sb.cq_file);
		at_core(b, "sprocket_store_busy_total", i, "reason", "consumequeue_ring",
			sb.cq_ring);
		at_core(b, "sprocket_store_busy_total", i, "reason", "commitlog", sb.clog);
	}
	httpd_prom_family(b, "sprocket_store_damaged_reads_total", "counter",
			  "reads that met a record whose CRC failed (never delivered)");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct store_damage d = {0};

		if (store_damage(x->bk.store, i, &d) != 0)
			continue;
		at_core(b, "sprocket_store_damaged_reads_total", i, NULL, NULL, d.bad_reads);
	}
	httpd_prom_family(b, "sprocket_store_buffer_degraded", "gauge",
			  "1 while the shard's write-behind buffer is anonymous memory "
			  "(acknowledgements wait for the write-back)");
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		at_core(b, "sprocket_store_buffer_degraded", i, NULL, NULL,
			clog_bufs_degraded(store_clog(x->bk.store, i)));
	if (statvfs(cfg_get_str(x->cfg, "storePathRootDir"), &vfs) == 0) {
		httpd_prom_family(b, "sprocket_store_disk_bytes", "gauge",
				  "the store's file system: size and what is free to the broker");
		httpd_prom_sample(b, "sprocket_store_disk_bytes", "kind", "total",
				  (uint64_t)vfs.f_blocks * vfs.f_frsize);
		httpd_prom_sample(b, "sprocket_store_disk_bytes", "kind", "available",
				  (uint64_t)vfs.f_bavail * vfs.f_frsize);
	}
}

static void
remoting(struct bk_ctl *x, struct jbuf *b)
{
	if (x->rmt == NULL)
		return;
	httpd_prom_family(b, "sprocket_remoting_busy_total", "counter",
			  "remoting requests answered SYSTEM_BUSY, by the limit hit");
	for (unsigned i = 0; i < BK_RMT_BUSY_REASONS; i++)
		httpd_prom_sample(b, "sprocket_remoting_busy_total", "reason", rmt_busy_labels[i],
				  bk_rmt_busy_count(x->rmt, i));
	httpd_prom_family(b, "sprocket_remoting_refused_total", "counter",
			  "remoting connections refused or closed by a limit");
	for (unsigned i = 0; i < BK_RMT_REFUSE_REASONS; i++)
		httpd_prom_sample(b, "sprocket_remoting_refused_total", "reason",
				  rmt_refused_labels[i], bk_rmt_refused(x->rmt, i));
	httpd_prom_family(b, "sprocket_remoting_acl_denied_total", "counter",
			  "remoting requests the ACL refused, by reason");
	for (unsigned i = 0; i < BK_ACL_REASONS; i++)
		httpd_prom_sample(b, "sprocket_remoting_acl_denied_total", "reason",
				  bk_acl_reason_name(i), bk_rmt_acl_denied(x->rmt, i));
	httpd_prom_family(
		b, "sprocket_store_disk_full", "gauge",
		"1 while writes are refused for disk space (diskSpaceWarningLevelRatio, or "
		"a forced deletion kept messages groups have not read)");
	httpd_prom_sample(b, "sprocket_store_disk_full", NULL, NULL,
			  store_disk_full(x->bk.store, NULL, 0));
	httpd_prom_family(b, "sprocket_store_unread_deleted_total", "counter",
			  "segments a forced deletion took while groups had not read them "
			  "(deleteUnconsumedWhenDiskFull)");
	httpd_prom_sample(b, "sprocket_store_unread_deleted_total", NULL, NULL,
			  store_unread_deleted(x->bk.store));
	httpd_prom_family(b, "sprocket_broker_namesrv_refused", "gauge",
			  "1 while a NameServer refuses this master's registration: SENDs refused");
	httpd_prom_sample(b, "sprocket_broker_namesrv_refused", NULL, NULL,
			  atomic_load_relaxed(&x->bk.ns_refused));
	if (x->breg != NULL) {
		struct ctl_breg_stats rs;

		ctl_breg_stats(x->breg, &rs);
		httpd_prom_family(b, "sprocket_broker_registrations_total", "counter",
				  "registrations NameServers accepted, by form: the whole topic "
				  "set, or the change since the one the server held");
		httpd_prom_sample(b, "sprocket_broker_registrations_total", "form", "whole",
				  rs.whole);
		httpd_prom_sample(b, "sprocket_broker_registrations_total", "form", "delta",
				  rs.deltas);
		httpd_prom_family(b, "sprocket_broker_registration_body_bytes_total", "counter",
				  "bytes of the registration bodies NameServers accepted");
		httpd_prom_sample(b, "sprocket_broker_registration_body_bytes_total", NULL, NULL,
				  rs.body_bytes);
	}
	httpd_prom_family(b, "sprocket_acl_hidden_records_total", "counter",
			  "records a lookup found and left out: the account may not read their "
			  "topic, by door");
	httpd_prom_sample(b, "sprocket_acl_hidden_records_total", "door", "remoting",
			  bk_rmt_acl_hidden(x->rmt));
	httpd_prom_sample(b, "sprocket_acl_hidden_records_total", "door", "http", x->http_hidden);
	httpd_auth_prom(&x->http_auth, x->http, b, "sprocket_http_refused_total");
	httpd_prom_family(b, "sprocket_remoting_long_polls_held", "gauge",
			  "long-polling PULLs the control thread holds now, off the cores' park "
			  "tables (remotingLongPollsMax)");
	httpd_prom_sample(b, "sprocket_remoting_long_polls_held", NULL, NULL,
			  bk_rmt_held_now(x->rmt));
	httpd_prom_family(b, "sprocket_remoting_frame_memory_bytes", "gauge",
			  "memory held by remoting frames not yet whole");
	httpd_prom_sample(b, "sprocket_remoting_frame_memory_bytes", NULL, NULL,
			  bk_rmt_frame_mem(x->rmt));
}

static void
replication(struct bk_ctl *x, struct jbuf *b)
{
	if (x->follow == NULL)
		return;
	httpd_prom_family(b, "sprocket_replication_lag_bytes", "gauge",
			  "a slave's shard: bytes of the master's log not copied yet");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct bk_follow_lag lag = {0};
		uint64_t end = 0, bytes = 0;

		bk_follow_stats(x->follow, i, &end, &bytes, &lag);
		at_core(b, "sprocket_replication_lag_bytes", i, NULL, NULL,
			atomic_load_explicit(&lag.bytes, memory_order_relaxed));
	}
	httpd_prom_family(b, "sprocket_replication_lag_seconds", "gauge",
			  "a slave's shard: age of the oldest master record not copied yet");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct bk_follow_lag lag = {0};
		uint64_t end = 0, bytes = 0;

		bk_follow_stats(x->follow, i, &end, &bytes, &lag);
		jbuf_lit(b, "sprocket_replication_lag_seconds{core=\"");
		httpd_prom_u64(b, i);
		jbuf_lit(b, "\"} ");
		httpd_prom_seconds(b,
				   atomic_load_explicit(&lag.ms, memory_order_relaxed) * 1000000u);
		jbuf_lit(b, "\n");
	}
}

void
bk_metrics_render(struct bk_ctl *x, struct jbuf *b)
{
	const struct bk_ttab *t = x->bk.ttab;

	httpd_prom_family(b, "sprocket_broker_info", "gauge", "this broker (value 1)");
	jbuf_lit(b, "sprocket_broker_info{cluster=\"");
	httpd_prom_label(b, x->bk.conf.cluster);
	jbuf_lit(b, "\",broker_name=\"");
	httpd_prom_label(b, x->bk.conf.broker_name);
	jbuf_lit(b, "\",broker_id=\"");
	httpd_prom_u64(b, (uint64_t)x->bk.conf.broker_id);
	jbuf_lit(b, "\",role=\"");
	httpd_prom_label(b, cfg_get_str(x->cfg, "brokerRole"));
	jbuf_lit(b, "\",version=\"" SP_VERSION "\"} 1\n");
	httpd_prom_family(b, "sprocket_broker_uptime_seconds", "gauge", "since the broker started");
	httpd_prom_sample(b, "sprocket_broker_uptime_seconds", NULL, NULL,
			  (uint64_t)(clk_wall_ms() - x->admin.boot_ms) / 1000);
	httpd_prom_family(b, "sprocket_broker_topics", "gauge", "topics this broker serves");
	httpd_prom_sample(b, "sprocket_broker_topics", NULL, NULL, t ? t->n : 0);
	for (size_t i = 0; i < sizeof(core_stats) / sizeof(core_stats[0]); i++)
		core_stat(x, b, &core_stats[i]);
	requests(x, b);
	latency(x, b);
	consumers(x, b, true);
	consumers(x, b, false);
	stalls(x, b);
	waiting(x, b);
	faults(x, b);
	transport(x, b);
	store(x, b);
	remoting(x, b);
	replication(x, b);
	httpd_prom_family(b, "sprocket_log_lines_suppressed_total", "counter",
			  "log lines cut by the per-site rate limit");
	httpd_prom_sample(b, "sprocket_log_lines_suppressed_total", NULL, NULL, log_rl_flush());
	bk_ha_metrics(x, b);
}
