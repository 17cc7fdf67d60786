// SPDX-License-Identifier: Apache-2.0
/*
 * bk_admin_ctl.c - the control side of the broker's admin requests
 * (bk_rmt_admin.c decodes them): brokerPermission, the configuration as
 * text and its run-time changes, and the runtime figures behind
 * GET_BROKER_RUNTIME_INFO (message rates sampled every second).
 *
 * Only keys that are safe to change while the broker runs are accepted by
 * UPDATE_BROKER_CONFIG (RUNTIME_KEYS); never a path, a file, a command or an
 * address: RocketMQ's CVE-2023-33246 and CVE-2023-37582 came from a config
 * update that could set those.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "bk_ctl.h"
#include "ha/bk_follow.h"
#include "remoting/bk_rmt.h"
#include "bk_priv.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/jbuf.h"
#include "common/log.h"
#include "control/breg.h"
#include "store/clog.h"
#include "wire/remoting.h"
#include "sp_config.h"

static const char *const RUNTIME_KEYS[] = {"brokerPermission", "logLevel"};

void
bk_ctl_perm_set(struct bk_ctl *x, uint32_t perm, const char *by)
{
	atomic_store_relaxed(&x->bk.perm, perm);
	log_info(BK_TAG, "brokerPermission %u (%s), by %s", perm,
		 perm & META_PERM_WRITE ? "writable" : "write-protected", by);
	if (x->breg)
		ctl_breg_kick(x->breg);
}

/*
 * A master a NameServer refuses because another master holds our brokerName
 * and brokerId there (ctl_breg_refused()) gets writes no route leads to: it refuses SENDs NO_PERMISSION with the reason, says so on /health and
 * in the log, and takes writes again once every NameServer that answers
 * accepts it. Checked once a second.
 */
void
bk_ctl_ns_refused_tick(struct bk_ctl *x, uint64_t now_ms)
{
	char why[sizeof(x->bk.ns_refused_why)];
	bool refused;

	if (x->breg == NULL || now_ms < x->admin.next_refused_ms)
		return;
	x->admin.next_refused_ms = now_ms + 1000;
	refused = x->bk.conf.role != BK_ROLE_SLAVE && ctl_breg_refused(x->breg, why, sizeof(why));
	if (refused && strcmp(why, x->bk.ns_refused_why) != 0) {
		snprintf(x->bk.ns_refused_why, sizeof(x->bk.ns_refused_why), "%s", why);
		if (!atomic_load_relaxed(&x->bk.ns_refused))
			log_err(BK_TAG,
				"write-protected: %s; SENDs are refused NO_PERMISSION until a "
				"registration is accepted again",
				why);
		atomic_store_relaxed(&x->bk.ns_refused, 1);
	} else if (!refused && atomic_load_relaxed(&x->bk.ns_refused)) {
		atomic_store_relaxed(&x->bk.ns_refused, 0);
		x->bk.ns_refused_why[0] = '\0';
		log_info(BK_TAG, "the NameServers accept our registration again: SENDs are taken");
	}
}

/* ---- configuration ---- */

/* Replaces the value of "@key=" in @text (a line of its own) by @val. Return: 0, -ENOMEM. */
static int
text_override(char **text, size_t *len, const char *key, const char *val)
{
	size_t kl = strlen(key);
	char *p = *text;

	while (p && *p) {
		char *eol = strchr(p, '\n');

		if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t head = (size_t)(p - *text) + kl + 1;
			size_t tail_at = eol ? (size_t)(eol - *text) : *len;
			size_t nl = head + strlen(val) + (*len - tail_at);
			char *n = malloc(nl + 1);

			if (n == NULL)
				return -ENOMEM;
			memcpy(n, *text, head);
			memcpy(n + head, val, strlen(val));
			memcpy(n + head + strlen(val), *text + tail_at, *len - tail_at);
			n[nl] = '\0';
			free(*text);
			*text = n;
			*len = nl;
			return 0;
		}
		p = eol ? eol + 1 : NULL;
	}
	return 0;
}

int
bk_ctl_config_text(struct bk_ctl *x, char **out, size_t *len)
{
	char perm[16];
	int err = cfg_to_text(x->cfg, out, len);

	/* what changed since the start (UPDATE_BROKER_CONFIG, signals) */
	snprintf(perm, sizeof(perm), "%u", (unsigned)atomic_load_relaxed(&x->bk.perm));
	if (err == 0)
		err = text_override(out, len, "brokerPermission", perm);
	if (err == 0)
		err = text_override(out, len, "logLevel",
				    log_level_name((enum log_level)atomic_load_explicit(
					    &log_level_cur, memory_order_relaxed)));
	if (err) {
		free(*out);
		*out = NULL;
	}
	return err;
}

static bool
runtime_key(const char *k)
{
	for (size_t i = 0; i < sizeof(RUNTIME_KEYS) / sizeof(RUNTIME_KEYS[0]); i++)
		if (strcmp(k, RUNTIME_KEYS[i]) == 0)
			return true;
	return false;
}

int
bk_ctl_config_update(struct bk_ctl *x, const char *body, size_t len, const char *by, char *why,
		     size_t why_len)
{
	struct cfg *n = NULL;
	struct cfg_err ce = {{0}};
	size_t changed = 0;
	int err;

	if (cfg_create(bk_keys, bk_nkeys, &n, &ce) != 0) {
		snprintf(why, why_len, "%s", ce.msg);
		return -ENOMEM;
	}
	/* every key and value checked before anything changes */
	err = cfg_parse_buf(n, "the request body", body, len, &ce);
	if (err) {
		snprintf(why, why_len, "%s", ce.msg);
		cfg_destroy(n);
		return -EINVAL;
	}
	for (size_t i = 0; i < bk_nkeys; i++) {
		const char *k = bk_keys[i].name;

		if (!cfg_is_set(n, k))
			continue;
		if (!runtime_key(k)) {
			snprintf(
				why, why_len,
				"%s cannot be changed while the broker runs (only brokerPermission "
				"and logLevel can); set it in the broker's properties and restart",
				k);
			cfg_destroy(n);
			return -EPERM;
		}
		changed++;
	}
	if (changed == 0) {
		snprintf(why, why_len, "the body names no key (key=value lines)");
		cfg_destroy(n);
		return -EINVAL;
	}
	if (cfg_is_set(n, "logLevel")) {
		enum log_level lv;

		if (log_level_parse(cfg_get_str(n, "logLevel"), &lv) == 0) {
			log_set_level(lv);
			log_info(BK_TAG, "logLevel %s, by %s", cfg_get_str(n, "logLevel"), by);
		}
	}
	if (cfg_is_set(n, "brokerPermission"))
		bk_ctl_perm_set(x, (uint32_t)cfg_get_int(n, "brokerPermission"), by);
	cfg_destroy(n);
	return 0;
}

/* ---- runtime figures ---- */

static void
totals(const struct bk_ctl *x, uint64_t *in, uint64_t *out)
{
	*in = *out = 0;
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		/* written by the core alone: a relaxed read of an aligned word */
		*in += __atomic_load_n(&x->bk.cores[i].st.msgs_in, __ATOMIC_RELAXED);
		*out += __atomic_load_n(&x->bk.cores[i].st.msgs_out, __ATOMIC_RELAXED);
	}
}

/* Local midnight before @wall_ms, in ms. */
static int64_t
midnight_ms(int64_t wall_ms)
{
	time_t t = (time_t)(wall_ms / 1000);
	struct tm tm;

	localtime_r(&t, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	return (int64_t)mktime(&tm) * 1000;
}

void
bk_ctl_admin_tick(struct bk_ctl *x, uint64_t now_ms)
{
	struct bk_admin *a = &x->admin;
	int64_t wall = clk_wall_ms();
	uint64_t in, out;

	if (a->boot_ms == 0) {
		a->boot_ms = wall;
		a->today_ms = midnight_ms(wall);
	}
	if (now_ms < a->next_sample_ms)
		return;
	a->next_sample_ms = now_ms + 1000;
	totals(x, &in, &out);
	a->in[a->at % BK_ADMIN_SAMPLES] = in;
	a->out[a->at % BK_ADMIN_SAMPLES] = out;
	a->at++;
	if (midnight_ms(wall) != a->today_ms) {
		/* a new day: today's morning becomes yesterday's */
		a->in_yesterday = a->in_today;
		a->out_yesterday = a->out_today;
		a->in_today = in;
		a->out_today = out;
		a->today_ms = midnight_ms(wall);
	}
}

/* Messages per second over the last @secs samples (fewer after a start). */
static double
rate(const struct bk_admin *a, const uint64_t *v, uint32_t secs)
{
	uint64_t n = a->at;
	uint32_t span;

	if (n < 2)
		return 0.0;
	span = n - 1 < secs ? (uint32_t)(n - 1) : secs;
	return (double)(v[(n - 1) % BK_ADMIN_SAMPLES] - v[(n - 1 - span) % BK_ADMIN_SAMPLES]) /
	       span;
}

static void
kv(struct jbuf *b, const char *k, const char *v)
{
	jbuf_cstr(b, k);
	jbuf_lit(b, ":");
	jbuf_cstr(b, v);
	jbuf_lit(b, ",");
}

static void
kv_u(struct jbuf *b, const char *k, uint64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRIu64, v);
	kv(b, k, s);
}

static void
kv_tps(struct jbuf *b, const char *k, const struct bk_admin *a, const uint64_t *v)
{
	char s[96];

	/* RocketMQ's "10 s, 1 min, 10 min" triple */
	snprintf(s, sizeof(s), "%.2f %.2f %.2f", rate(a, v, 10), rate(a, v, 60), rate(a, v, 600));
	kv(b, k, s);
}

static void
human(char *out, size_t len, uint64_t bytes)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	unsigned i = 0;

	while (v >= 1024 && i + 1 < sizeof(u) / sizeof(u[0])) {
		v /= 1024;
		i++;
	}
	snprintf(out, len, "%.2f %s", v, u[i]);
}

int
bk_ctl_runtime_info(struct bk_ctl *x, struct jbuf *b)
{
	const struct bk_admin *a = &x->admin;
	int64_t wall = clk_wall_ms();
	int64_t up = (wall - a->boot_ms) / 1000;
	uint64_t in, out, written = 0, flushed = 0;
	char s[160];
	struct statvfs vfs;

	totals(x, &in, &out);
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct clog *c = store_clog(x->bk.store, i);

		written += clog_written(c);
		flushed += clog_flushed(c);
	}
	jbuf_lit(b, "{\"table\":{");
	kv(b, "brokerVersionDesc", "V4_9_8");
	kv_u(b, "brokerVersion", WIRE_REM_VERSION_V4_9_8);
	kv(b, "sprocketVersion", SP_VERSION);
	kv_u(b, "bootTimestamp", (uint64_t)a->boot_ms);
	snprintf(s, sizeof(s),
		 "[ %" PRId64 " days, %" PRId64 " hours, %" PRId64 " minutes, %" PRId64
		 " seconds ]",
		 up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
	kv(b, "runtime", s);
	kv_tps(b, "putTps", a, a->in);
	kv_tps(b, "getTransferedTps", a, a->out);
	kv_u(b, "msgPutTotalTodayNow", in);
	kv_u(b, "msgGetTotalTodayNow", out);
	kv_u(b, "msgPutTotalTodayMorning", a->in_today);
	kv_u(b, "msgGetTotalTodayMorning", a->out_today);
	kv_u(b, "msgPutTotalYesterdayMorning", a->in_yesterday);
	kv_u(b, "msgGetTotalYesterdayMorning", a->out_yesterday);
	kv_u(b, "commitLogMaxOffset", written);
	kv_u(b, "remainHowManyDataToFlush", written - flushed);
	kv_u(b, "dataplaneCores", x->bk.ncores);
	kv(b, "brokerRole",
	   x->bk.conf.role == BK_ROLE_SLAVE	    ? "SLAVE"
	   : x->bk.conf.role == BK_ROLE_SYNC_MASTER ? "SYNC_MASTER"
						    : "ASYNC_MASTER");
	kv_u(b, "brokerPermission", atomic_load_relaxed(&x->bk.perm));
	{
		/* write-behind buffers that are anonymous memory though files were asked for */
		uint64_t degraded = 0, episodes = 0;

		for (uint32_t i = 0; i < x->bk.ncores; i++) {
			const struct clog *cl = store_clog(x->bk.store, i);

			degraded += clog_bufs_degraded(cl);
			episodes += clog_bufs_degraded_episodes(cl);
		}
		kv_u(b, "storeBufferDegradedShards", degraded);
		/* SYSTEM_BUSY answers of the cores by reason (enum bk_busy_why) */
		static const char *const busy_keys[BK_BUSY_WHYS] = {
			[BK_BUSY_OTHER] = "dataplaneBusyOther",
			[BK_BUSY_STORE] = "dataplaneBusyStoreNotReady",
			[BK_BUSY_INFLIGHT] = "dataplaneBusyAcksInFlight",
			[BK_BUSY_ANSWER_BUF] = "dataplaneBusyAnswerBuffers",
			[BK_BUSY_TOPIC_CREATE] = "dataplaneBusyTopicCreate",
			[BK_BUSY_OFFSETS] = "dataplaneBusyOffsetTable",
			[BK_BUSY_TX_WINDOW] = "dataplaneBusyTxWindow",
			[BK_BUSY_REPL] = "dataplaneBusyReplication",
		};

		for (unsigned r = 0; r < BK_BUSY_WHYS; r++) {
			uint64_t n = 0;

			for (uint32_t i = 0; i < x->bk.ncores; i++)
				n += __atomic_load_n(&x->bk.cores[i].st.busy_by[r],
						     __ATOMIC_RELAXED);
			kv_u(b, busy_keys[r], n);
		}
		{
			struct store_busy_counts all = {0};

			for (uint32_t i = 0; i < x->bk.ncores; i++) {
				struct store_busy_counts one = {0};

				(void)store_busy(x->bk.store, i, &one);
				all.cq_file += one.cq_file;
				all.cq_ring += one.cq_ring;
				all.clog += one.clog;
			}
			kv_u(b, "storeBusyConsumeQueue", all.cq_file);
			kv_u(b, "storeBusyConsumeQueueRing", all.cq_ring);
			kv_u(b, "storeBusyCommitLog", all.clog);
		}
		/* a poll-mode core should take none in steady state (docs/dataplane.md) */
		for (uint32_t i = 0; i < x->bk.ncores; i++) {
			uint64_t mn = 0, mj = 0;
			char k[48];

			if (dp_lcore_faults(&x->bk.cores[i].lc, &mn, &mj) != 0)
				continue;
			snprintf(k, sizeof(k), "dataplaneCore%uMinorFaults", i);
			kv_u(b, k, mn);
			snprintf(k, sizeof(k), "dataplaneCore%uMajorFaults", i);
			kv_u(b, k, mj);
		}
		kv_u(b, "storeBufferDegradedEpisodes", episodes);
	}
	{
		/* damage in the CommitLog: found at start, and met by reads since (docs/store.md) */
		uint64_t reads = 0, spans = 0, lost = 0;

		for (uint32_t i = 0; i < x->bk.ncores; i++) {
			struct store_damage d;

			if (store_damage(x->bk.store, i, &d) != 0)
				continue;
			reads += d.bad_reads;
			spans += d.spans;
			lost += d.lost;
		}
		kv_u(b, "storeDamagedReads", reads);
		kv_u(b, "storeDamagedSpans", spans);
		kv_u(b, "storeLostMessages", lost);
		kv_u(b, "logLinesSuppressed", log_rl_flush());
	}
	if (x->follow != NULL) {
		/*
		 * A slave: how far behind its master, over its shards (RocketMQ's
		 * slaveFallBehindMuch, bytes), the oldest lag in ms, and whether
		 * every shard has a session (`sprocket cluster health` reads them).
		 */
		uint64_t bytes = 0, ms = 0;

		for (uint32_t i = 0; i < x->bk.ncores; i++) {
			struct bk_follow_lag g = {0};
			uint64_t end, copied;

			bk_follow_stats(x->follow, i, &end, &copied, &g);
			bytes += atomic_load_relaxed(&g.bytes);
			ms = SP_MAX(ms, atomic_load_relaxed(&g.ms));
		}
		kv_u(b, "slaveFallBehindMuch", bytes);
		kv_u(b, "slaveFallBehindMs", ms);
		kv_u(b, "slaveFollowing", bk_follow_connected(x->follow) ? 1 : 0);
	}
	if (x->rmt) {
		/* remoting requests answered SYSTEM_BUSY, by the limit hit (docs/isolation.md) */
		static const char *const names[BK_RMT_BUSY_REASONS] = {
			[BK_RMT_BUSY_CORE] = "remotingBusyCoreInflight",
			[BK_RMT_BUSY_CONN] = "remotingBusyConnInflight",
			[BK_RMT_BUSY_ADDR] = "remotingBusyAddrInflight",
			[BK_RMT_BUSY_POLLS] = "remotingBusyLongPolls",
			[BK_RMT_BUSY_HELD] = "remotingBusyLongPollsHeld",
			[BK_RMT_BUSY_HELD_ADDR] = "remotingBusyLongPollsHeldAddr",
		};

		/* connections refused or closed by a limit (docs/isolation.md) */
		static const char *const refused[BK_RMT_REFUSE_REASONS] = {
			[BK_RMT_REFUSE_CONNS] = "remotingRefusedMaxConnections",
			[BK_RMT_REFUSE_ADDR] = "remotingRefusedPerAddr",
			[BK_RMT_REFUSE_NOFD] = "remotingRefusedNoFd",
			[BK_RMT_REFUSE_FRAME_SIZE] = "remotingRefusedFrameSize",
			[BK_RMT_REFUSE_FRAME_MEM] = "remotingRefusedFrameMemory",
		};

		for (unsigned i = 0; i < BK_RMT_BUSY_REASONS; i++)
			kv_u(b, names[i], bk_rmt_busy_count(x->rmt, i));
		kv_u(b, "remotingLongPollsHeld", bk_rmt_held_now(x->rmt));
		for (unsigned i = 0; i < BK_RMT_REFUSE_REASONS; i++)
			kv_u(b, refused[i], bk_rmt_refused(x->rmt, i));
		kv_u(b, "remotingFrameMemory", bk_rmt_frame_mem(x->rmt));
	}
	if (statvfs(cfg_get_str(x->cfg, "storePathRootDir"), &vfs) == 0) {
		char t[48], f[48];
		uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
		uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;

		human(t, sizeof(t), total);
		human(f, sizeof(f), avail);
		snprintf(s, sizeof(s), "Total : %s, Free : %s.", t, f);
		kv(b, "commitLogDirCapacity", s);
		snprintf(s, sizeof(s), "%.4f",
			 total ? (double)(total - avail) / (double)total : 0.0);
		kv(b, "commitLogDiskRatio", s);
	}
	jbuf_uncomma(b);
	jbuf_lit(b, "}}");
	return b->err;
}
