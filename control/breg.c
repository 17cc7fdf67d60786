// SPDX-License-Identifier: Apache-2.0
/*
 * breg.c - the broker registers with its NameServers (breg.h).
 *
 * RocketMQ's broker registers with every NameServer at start, every 30 s
 * and on each topic change, all NameServers in parallel, and unregisters at
 * shutdown (docs/rocketmq-protocol.md §3.1-§3.2). sprocket does the same, and adds the
 * dataplane endpoint and each topic's queue->core map (docs/namesrv.md,
 * "Dataplane fields") so clients can address the owning core directly.
 *
 * DESIGN
 * One agent thread and one worker thread per NameServer. The agent wakes at
 * each interval or kick, takes the topic snapshot through the broker's
 * callback, builds the RegisterBrokerBody once (with its bodyCrc32, which
 * the NameServer checks) and hands the same immutable, reference-counted
 * body to every worker. Each worker owns one persistent connection and
 * registers whatever body is newest when it gets to it, so a NameServer
 * that is slow or black-holed delays only its own worker, never the others,
 * and a worker that falls behind skips straight to the latest body.
 *
 * The connection is kept between rounds because a NameServer drops a broker
 * the moment the connection it registered over closes. If a call on a kept
 * connection fails (the server restarted, or closed it idle), the worker
 * reconnects and retries once at once; any other failure is retried with
 * exponential backoff (250 ms doubling, capped at 5 s and at the interval)
 * and logged rate-limited. Workers never give up while the broker runs.
 *
 * "Registered" is tracked per kick generation: ctl_breg_kick() bumps the
 * generation, each body carries the generation its snapshot was taken for,
 * and ctl_breg_wait_registered() waits until every worker has had a body of
 * the current generation accepted.
 *
 * Ownership: everything marked "under mu" is shared between the agent, the
 * workers and callers of kick/wait; the rest of struct ctl_breg is
 * immutable after ctl_breg_start(). A worker's connection is its own.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/crc32.h"
#include "common/err.h"
#include "common/log.h"
#include "control/breg.h"
#include "common/jbuf.h"
#include "sprocket/remoting.h"

#define BREG_TAG "ctl.breg"
#define BREG_NS_MAX 64
#define BREG_BACKOFF_MIN_MS 250
#define BREG_BACKOFF_MAX_MS 5000
#define BREG_SNAPSHOT_RETRY_MS 1000

#define DV_JSON_MAX 80

/* A DataVersion object as RocketMQ writes it, in @buf (DV_JSON_MAX). Return: its length. */
static size_t
dv_json(char *buf, uint64_t counter, int64_t ts)
{
	return (size_t)snprintf(buf, DV_JSON_MAX,
				"{\"counter\":%" PRIu64 ",\"timestamp\":%" PRId64 "}", counter, ts);
}

/* One round's registration body, shared by the workers. */
struct breg_body {
	uint32_t refs; /* under mu */
	/* immutable after publish */
	uint64_t seq; /* round number */
	uint64_t gen; /* kick generation its snapshot was taken for */
	size_t n_topics;
	uint64_t dv_counter;
	int64_t dv_ts;
	char *json;
	size_t len;
	char crc[12]; /* bodyCrc32, decimal */
	/* the change since body @base_seq (NULL: none built): for servers that hold that one */
	char *delta;
	size_t delta_len;
	char delta_crc[12];
	char delta_base[DV_JSON_MAX]; /* WIRE_EXT_DELTA_BASE: the data version of body base_seq */
	uint64_t base_seq;
	size_t n_changed, n_deleted;
};

/* One NameServer. */
struct breg_ns {
	struct ctl_breg *b;
	char *addr; /* immutable */
	pthread_t thr;
	bool started;
	/* worker only */
	struct sp_rem *conn;
	bool ever_ok;
	uint64_t full_seq; /* a delta of this body was refused: send it whole */
	char said[200];	   /* the refusal or failure last logged (worker only) */
	/* under mu */
	bool takes_delta;      /* its last accepted registration's answer offered deltas */
	uint64_t wait_seq;     /* this body has no whole set, which it needs: wait for the next */
	struct breg_body *cur; /* newest body for this server (a reference) */
	uint64_t done_seq;     /* cur->seq once accepted */
	bool hb_due;	       /* a round with cur's data version: ask, register if changed */
	uint64_t ok_gen;       /* generation of the newest accepted body */
	uint64_t retry_at_ns;  /* after a failure: not before this */
	uint32_t fails;	       /* consecutive */
	char refused[200];     /* its latest answer refused us: why ("" otherwise) */
};

struct ctl_breg {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* any change under mu; always broadcast */
	/* immutable after start */
	uint32_t interval_ms;
	uint32_t timeout_ms;
	struct ctl_breg_info info; /* strings point into strs */
	char *strs;
	char broker_id[24];
	char dp_port[8];
	char dp_cores[8];
	char epoch[24];
	ctl_breg_snapshot_fn snapshot;
	ctl_breg_release_fn release;
	ctl_breg_dv_fn dv;
	bool force_register;
	void *arg;
	char *ak, *sk; /* accessKey/secretKey, or NULL */
	pthread_t agent;
	bool agent_started;
	uint32_t n_ns;
	struct breg_ns *ns;
	/* under mu */
	bool stop;
	uint64_t kick_gen;
	uint64_t seq;
	struct breg_body *last; /* the newest body built (a reference) */
	bool want_full;		/* a server needs the whole set: build it in the next body */
	struct ctl_breg_stats stats;
	/* agent only: the snapshot b->last was built from, for the next delta */
	struct ctl_breg_topic *prev_t;
	size_t prev_n;
	/* a slave's master, from the newest registration answer that named one */
	char master_ha[CTL_BREG_ADDR_MAX];
	char master_addr[CTL_BREG_ADDR_MAX];
};

/* ------------------------------------------------------------------ body */

/* Context: under mu. */
static void
body_put(struct breg_body *body)
{
	if (body == NULL || --body->refs > 0)
		return;
	free(body->json);
	free(body->delta);
	free(body);
}

/*
 * Snapshot and build a body (one reference, the caller's): the delta since
 * the newest body, and the whole set only when @full (a server does not hold
 * the newest body, or cannot take deltas) or no delta could be made. At
 * 100,000 topics the whole set is 15 MB of JSON, most of a topic creation's
 * time when built every time. Context: agent, not under mu.
 */
static int
body_build(struct ctl_breg *b, uint64_t gen, bool full, struct breg_body **out)
{
	struct ctl_breg_topic *t = NULL;
	struct breg_body *body;
	uint64_t dv_counter = 0;
	int64_t dv_ts = 0;
	size_t n = 0;
	int rc;

	body = calloc(1, sizeof(*body));
	if (body == NULL)
		return -ENOMEM;
	rc = b->snapshot(b->arg, &t, &n, &dv_counter, &dv_ts);
	if (rc != 0)
		goto err_free;
	/*
	 * The change since the newest body, for the servers that hold it. The
	 * agent alone sets b->last, so reading it here unlocked is safe; a
	 * failed delta only means a whole body this round.
	 */
	if (b->prev_t != NULL && b->last != NULL &&
	    ctl_breg_delta(b->prev_t, b->prev_n, t, n, dv_counter, dv_ts, &body->delta,
			   &body->delta_len, &body->n_changed, &body->n_deleted) == 0) {
		body->base_seq = b->last->seq;
		dv_json(body->delta_base, b->last->dv_counter, b->last->dv_ts);
		snprintf(body->delta_crc, sizeof(body->delta_crc), "%" PRIu32,
			 crc32_body(body->delta, body->delta_len));
	}
	if (full || body->delta == NULL) {
		rc = ctl_breg_body(t, n, dv_counter, dv_ts, &body->json, &body->len);
		if (rc == 0)
			snprintf(body->crc, sizeof(body->crc), "%" PRIu32,
				 crc32_body(body->json, body->len));
	}
	if (rc != 0) {
		b->release(b->arg, t, n);
		goto err_free;
	}
	/* kept for the next round's delta */
	if (b->prev_t != NULL)
		b->release(b->arg, b->prev_t, b->prev_n);
	b->prev_t = t;
	b->prev_n = n;
	body->refs = 1;
	body->gen = gen;
	body->n_topics = n;
	body->dv_counter = dv_counter;
	body->dv_ts = dv_ts;
	*out = body;
	return 0;

err_free:
	free(body->json);
	free(body->delta);
	free(body);
	return rc;
}

/* ------------------------------------------------------------- requests */

static uint64_t
deadline_after(uint32_t ms)
{
	return clk_mono_ns() + (uint64_t)ms * 1000000;
}

static uint32_t
ms_until(uint64_t deadline_ns)
{
	uint64_t now = clk_mono_ns();

	return now >= deadline_ns ? 0 : (uint32_t)((deadline_ns - now + 999999) / 1000000);
}

/* Fill @cmd's common fields and the broker's identity. Return: 0, -E2BIG. */
static int
cmd_init(const struct ctl_breg *b, struct wire_rem_cmd *cmd, int32_t code)
{
	int rc;

	memset(cmd, 0, sizeof(*cmd));
	cmd->code = code;
	cmd->version = WIRE_REM_VERSION_V4_9_8;
	cmd->language = WIRE_LANG_JAVA; /* what a RocketMQ broker says */
	cmd->serialize = WIRE_REM_JSON;
	if ((rc = wire_rem_ext_add(cmd, "brokerName", b->info.broker_name)) != 0 ||
	    (rc = wire_rem_ext_add(cmd, "brokerAddr", b->info.broker_addr)) != 0 ||
	    (rc = wire_rem_ext_add(cmd, "clusterName", b->info.cluster)) != 0 ||
	    (rc = wire_rem_ext_add(cmd, "brokerId", b->broker_id)) != 0)
		return rc;
	return 0;
}

static void
kv_copy(const struct wire_kv *kv, char *dst, size_t cap)
{
	if (kv != NULL && kv->val_len > 0 && kv->val_len < cap) {
		memcpy(dst, kv->val, kv->val_len);
		dst[kv->val_len] = '\0';
	}
}

/* A registration answer names the group's master (RocketMQ's RegisterBrokerResult). */
static void
take_master(struct ctl_breg *b, const struct wire_rem_cmd *resp)
{
	const struct wire_kv *ha = wire_rem_ext_get(resp, "haServerAddr");
	const struct wire_kv *ma = wire_rem_ext_get(resp, "masterAddr");

	if (ma == NULL || ma->val_len == 0)
		return;
	pthread_mutex_lock(&b->mu);
	kv_copy(ha, b->master_ha, sizeof(b->master_ha));
	kv_copy(ma, b->master_addr, sizeof(b->master_addr));
	pthread_mutex_unlock(&b->mu);
}

bool
ctl_breg_master(struct ctl_breg *b, char *ha, size_t ha_cap, char *addr, size_t addr_cap)
{
	bool found;

	pthread_mutex_lock(&b->mu);
	found = b->master_addr[0] != '\0';
	snprintf(ha, ha_cap, "%s", b->master_ha);
	snprintf(addr, addr_cap, "%s", b->master_addr);
	pthread_mutex_unlock(&b->mu);
	return found;
}

/*
 * One request on @ns's connection, connecting first when there is none,
 * within one timeout. A kept connection that fails is replaced once at
 * once: it may simply have been closed by a restarted server.
 * Return: the response code (>= 0; @remark set when the server sent one),
 * or a negative errno (the connection is closed).
 */
static int
ns_call(struct breg_ns *ns, struct wire_rem_cmd *cmd, const char *body, size_t len, char *remark,
	size_t remark_cap, bool *changed, bool *takes_delta)
{
	uint64_t deadline = deadline_after(ns->b->timeout_ms);
	struct sp_rem_resp resp;
	int rc = -ETIMEDOUT;

	remark[0] = '\0';
	for (int attempt = 0; attempt < 2; attempt++) {
		bool kept = ns->conn != NULL;
		uint32_t left = ms_until(deadline);

		if (left == 0)
			return -ETIMEDOUT;
		if (!kept) {
			rc = sp_rem_connect(ns->addr, left, &ns->conn);
			if (rc != 0)
				return rc;
			rc = ctl_breg_credentials(ns->b, ns->conn);
			if (rc != 0) {
				sp_rem_close(ns->conn);
				ns->conn = NULL;
				return rc;
			}
			left = ms_until(deadline);
		}
		rc = sp_rem_call(ns->conn, cmd, body, len, left, 0, &resp);
		if (rc == 0) {
			if (resp.cmd.remark != NULL)
				snprintf(remark, remark_cap, "%.*s", (int)resp.cmd.remark_len,
					 resp.cmd.remark);
			rc = resp.cmd.code < 0 ? -EPROTO : resp.cmd.code;
			if (rc == 0 && cmd->code == WIRE_REQ_REGISTER_BROKER) {
				const struct wire_kv *kv =
					wire_rem_ext_get(&resp.cmd, WIRE_EXT_DELTA);

				take_master(ns->b, &resp.cmd);
				*takes_delta = kv != NULL && kv->val_len == 4 &&
					       memcmp(kv->val, "true", 4) == 0;
			}
			if (rc == 0 && changed != NULL) {
				const struct wire_kv *kv = wire_rem_ext_get(&resp.cmd, "changed");

				/* no answer is an old server's: register, to be sure */
				*changed = kv == NULL || kv->val_len != 5 ||
					   memcmp(kv->val, "false", 5) != 0;
			}
			sp_rem_resp_free(&resp);
			return rc;
		}
		sp_rem_close(ns->conn);
		ns->conn = NULL;
		if (!kept)
			break;
	}
	return rc;
}

/*
 * A failed round, said once per streak and reason: the first failure, a
 * new reason, and then at the 10th, 100th, ... in a row (the worker retries
 * with back-off every few seconds; "registered ... " says when it is over).
 * Context: @ns's worker (it alone writes ns->fails, so reads it unlocked).
 */
static void
breg_said(struct breg_ns *ns, bool refused, const char *why)
{
	const char *what = refused ? "refused the registration" : "did not answer the registration";

	uint32_t n = ns->fails + 1; /* counting this one */
	bool decade = n >= 10;

	for (uint32_t d = n; decade && d > 1; d /= 10)
		decade = d % 10 == 0;
	if (ns->fails == 0 || strcmp(ns->said, why) != 0)
		log_warn(BREG_TAG,
			 "namesrv %s %s: %s (retried with back-off; said again when "
			 "the reason changes)",
			 ns->addr, what, why);
	else if (decade)
		log_warn(BREG_TAG, "namesrv %s %s %u times in a row: %s", ns->addr, what, n, why);
	snprintf(ns->said, sizeof(ns->said), "%s", why);
}

/*
 * ns_call()'s answer as a worker's result: a refusal (> 0, the server's
 * remark or its code in @remark) is -EPROTO; both it and a failure are said.
 */
static int
said(struct breg_ns *ns, int rc, char *remark, size_t remark_cap)
{
	if (rc > 0) {
		if (remark[0] == '\0')
			snprintf(remark, remark_cap, "code %d", rc);
		breg_said(ns, true, remark);
		return -EPROTO;
	}
	if (rc < 0)
		breg_said(ns, false, err_str(rc));
	return rc;
}

/*
 * REGISTER_BROKER with @body, or its delta when @delta. Return: 0 and
 * *@takes_delta (the answer offers deltas), -ESTALE the delta was refused
 * (the server no longer holds its base: send it whole), -EPROTO refused,
 * -errno. Context: @ns's worker.
 */
static int
ns_register(struct breg_ns *ns, const struct breg_body *body, bool delta, bool *takes_delta,
	    char *remark, size_t remark_cap)
{
	const struct ctl_breg *b = ns->b;
	struct wire_rem_cmd *cmd = malloc(sizeof(*cmd));
	int rc;

	if (cmd == NULL)
		return -ENOMEM;
	rc = cmd_init(b, cmd, WIRE_REQ_REGISTER_BROKER);
	if (rc == 0 && b->info.ha_addr != NULL)
		rc = wire_rem_ext_add(cmd, "haServerAddr", b->info.ha_addr);
	if (rc == 0 && b->info.epoch != 0)
		rc = wire_rem_ext_add(cmd, "sprocketEpoch", b->epoch);
	if (rc == 0 && (rc = wire_rem_ext_add(cmd, "compressed", "false")) == 0)
		rc = wire_rem_ext_add(cmd, "bodyCrc32", delta ? body->delta_crc : body->crc);
	if (rc == 0 && delta)
		rc = wire_rem_ext_add(cmd, WIRE_EXT_DELTA_BASE, body->delta_base);
	if (rc == 0 && b->info.has_dp) {
		/* All four or none (docs/namesrv.md). */
		if ((rc = wire_rem_ext_add(cmd, "dataplaneIp", b->info.dp_ip)) == 0 &&
		    (rc = wire_rem_ext_add(cmd, "dataplaneMac", b->info.dp_mac)) == 0 &&
		    (rc = wire_rem_ext_add(cmd, "dataplanePort", b->dp_port)) == 0)
			rc = wire_rem_ext_add(cmd, "dataplaneCores", b->dp_cores);
	}
	if (rc == 0)
		rc = ns_call(ns, cmd, delta ? body->delta : body->json,
			     delta ? body->delta_len : body->len, remark, remark_cap, NULL,
			     takes_delta);
	free(cmd);
	if (delta && rc > 0 && strncmp(remark, WIRE_DELTA_STALE, strlen(WIRE_DELTA_STALE)) == 0) {
		log_info(BREG_TAG, "namesrv %s: %s; registering all %zu topics", ns->addr, remark,
			 body->n_topics);
		return -ESTALE;
	}
	return said(ns, rc, remark, remark_cap);
}

/*
 * QUERY_DATA_VERSION with @body's data version: the server refreshes our
 * heartbeat, and says whether it holds that version. Return: 0 and
 * *@changed, -EPROTO refused, -errno. Context: @ns's worker.
 */
static int
ns_query(struct breg_ns *ns, const struct breg_body *body, bool *changed, char *remark,
	 size_t remark_cap)
{
	struct wire_rem_cmd *cmd = malloc(sizeof(*cmd));
	char dv[DV_JSON_MAX];
	size_t n = dv_json(dv, body->dv_counter, body->dv_ts);
	int rc = cmd == NULL ? -ENOMEM : cmd_init(ns->b, cmd, WIRE_REQ_QUERY_DATA_VERSION);

	if (rc == 0)
		rc = ns_call(ns, cmd, dv, n, remark, remark_cap, changed, NULL);
	free(cmd);
	return said(ns, rc, remark, remark_cap);
}

/* UNREGISTER_BROKER, best effort. Context: @ns's worker, at stop. */
static void
ns_unregister(struct breg_ns *ns)
{
	struct wire_rem_cmd *cmd = malloc(sizeof(*cmd));
	char remark[256];
	int rc = cmd == NULL ? -ENOMEM : cmd_init(ns->b, cmd, WIRE_REQ_UNREGISTER_BROKER);

	if (rc == 0)
		rc = ns_call(ns, cmd, NULL, 0, remark, sizeof(remark), NULL, NULL);
	free(cmd);
	if (rc == 0)
		log_info(BREG_TAG, "unregistered from namesrv %s", ns->addr);
	else
		log_warn(BREG_TAG, "unregister from namesrv %s failed: %s", ns->addr,
			 rc > 0 ? remark : err_str(rc));
}

/* ------------------------------------------------------------- threads */

static void
abs_time(uint64_t mono_ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(mono_ns / CLK_NS_PER_SEC);
	ts->tv_nsec = (long)(mono_ns % CLK_NS_PER_SEC);
}

static uint64_t
backoff_ns(const struct ctl_breg *b, uint32_t fails)
{
	uint64_t cap = SP_MIN((uint32_t)BREG_BACKOFF_MAX_MS, b->interval_ms);
	uint64_t ms = (uint64_t)BREG_BACKOFF_MIN_MS << SP_MIN(fails - 1, 8u);

	return SP_MIN(ms, cap) * 1000000;
}

static void *
worker_main(void *arg)
{
	struct breg_ns *ns = arg;
	struct ctl_breg *b = ns->b;
	char remark[200];
	uint32_t fails;

	pthread_mutex_lock(&b->mu);
	while (!b->stop) {
		struct breg_body *body = ns->cur;
		uint64_t now = clk_mono_ns();
		struct timespec ts;
		int rc;

		bool ask;
		bool delta;
		bool takes = false;

		if (body == NULL || (body->seq == ns->done_seq && !ns->hb_due) ||
		    body->seq == ns->wait_seq) {
			pthread_cond_wait(&b->cv, &b->mu);
			continue;
		}
		if (now < ns->retry_at_ns) {
			abs_time(ns->retry_at_ns, &ts);
			(void)pthread_cond_timedwait(&b->cv, &b->mu, &ts);
			continue;
		}
		ask = body->seq == ns->done_seq; /* only a heartbeat is due */
		/* the change alone, to a server that holds the body it was taken against */
		delta = !ask && body->delta != NULL && ns->takes_delta && ns->done_seq != 0 &&
			ns->done_seq == body->base_seq && ns->full_seq != body->seq;
		if (!ask && !delta && body->json == NULL) {
			/* it needs the whole set, which this body lacks: the agent makes one */
			ns->wait_seq = body->seq;
			b->want_full = true;
			b->kick_gen++;
			pthread_cond_broadcast(&b->cv);
			continue;
		}
		body->refs++;
		pthread_mutex_unlock(&b->mu);
		if (ask) {
			bool changed = true;

			rc = ns_query(ns, body, &changed, remark, sizeof(remark));
			pthread_mutex_lock(&b->mu);
			if (rc == 0) {
				ns->hb_due = false;
				ns->fails = 0;
				ns->retry_at_ns = 0;
				/* it lost us (restarted?) or holds another version: register */
				if (changed)
					ns->done_seq = 0;
			} else {
				ns->fails++;
				ns->retry_at_ns = clk_mono_ns() + backoff_ns(b, ns->fails);
			}
			body_put(body);
			pthread_cond_broadcast(&b->cv);
			continue;
		}
		rc = ns_register(ns, body, delta, &takes, remark, sizeof(remark));
		if (rc == 0 && (!ns->ever_ok || ns->fails > 0))
			log_info(BREG_TAG, "registered %zu topics with namesrv %s", body->n_topics,
				 ns->addr);
		ns->ever_ok |= rc == 0;
		pthread_mutex_lock(&b->mu);
		/* another broker holds our brokerName and brokerId there (ns_handle.c's refusal):
		 * writes to us are writes no route of that server leads to */
		if (rc == 0 || (rc == -EPROTO && strstr(remark, "is already registered")))
			snprintf(ns->refused, sizeof(ns->refused), "%s", rc ? remark : "");
		if (rc == -ESTALE) {
			ns->full_seq = body->seq; /* at once, whole */
			b->stats.delta_stale++;
		} else if (rc == 0) {
			b->stats.whole += !delta;
			b->stats.deltas += delta;
			b->stats.body_bytes += delta ? body->delta_len : body->len;
			ns->done_seq = body->seq;
			ns->takes_delta = takes;
			ns->hb_due = false;
			ns->ok_gen = SP_MAX(ns->ok_gen, body->gen);
			ns->fails = 0;
			ns->retry_at_ns = 0;
		} else {
			ns->fails++;
			ns->retry_at_ns = clk_mono_ns() + backoff_ns(b, ns->fails);
		}
		body_put(body);
		pthread_cond_broadcast(&b->cv);
	}
	fails = ns->fails;
	pthread_mutex_unlock(&b->mu);
	/*
	 * Only a server that took us has anything to forget; one whose last
	 * registration failed is likely unreachable, and waiting on its timeout
	 * would hold up a stop or a failover's step-down for seconds (it drops
	 * us itself when our connection closes or our registration expires).
	 */
	if (ns->ever_ok && fails == 0)
		ns_unregister(ns);
	else if (ns->ever_ok)
		log_info(BREG_TAG,
			 "not unregistering from namesrv %s: its last %u registration(s) failed",
			 ns->addr, fails);
	sp_rem_close(ns->conn);
	ns->conn = NULL;
	return NULL;
}

static void *
agent_main(void *arg)
{
	struct ctl_breg *b = arg;
	uint64_t built_gen = 0;
	uint64_t next_ns = 0;

	pthread_mutex_lock(&b->mu);
	while (!b->stop) {
		uint64_t now = clk_mono_ns();
		struct breg_body *body = NULL;
		struct timespec ts;
		uint64_t gen;
		bool full;
		int rc;

		if (b->kick_gen == built_gen && now < next_ns) {
			abs_time(next_ns, &ts);
			(void)pthread_cond_timedwait(&b->cv, &b->mu, &ts);
			continue;
		}
		gen = b->kick_gen;
		if (gen == built_gen && !b->force_register && b->dv != NULL && b->last != NULL &&
		    !b->want_full) {
			uint64_t dvc = 0;
			int64_t dvt = 0;

			/* A round, not a kick: with the same version, a heartbeat will do. */
			pthread_mutex_unlock(&b->mu);
			b->dv(b->arg, &dvc, &dvt);
			pthread_mutex_lock(&b->mu);
			if (dvc == b->last->dv_counter && dvt == b->last->dv_ts) {
				next_ns = now + (uint64_t)b->interval_ms * 1000000;
				for (uint32_t i = 0; i < b->n_ns; i++)
					b->ns[i].hb_due = b->ns[i].cur == b->last;
				pthread_cond_broadcast(&b->cv);
				continue;
			}
		}
		/* the whole set only for a server that cannot take the change alone */
		full = b->last == NULL || b->want_full;
		for (uint32_t i = 0; i < b->n_ns && !full; i++)
			full = !b->ns[i].takes_delta || b->ns[i].done_seq != b->last->seq;
		b->want_full = false;
		pthread_mutex_unlock(&b->mu);
		rc = body_build(b, gen, full, &body);
		if (rc != 0)
			log_err_ratelimited(BREG_TAG, "topic snapshot for registration failed: %s",
					    err_str(rc));
		pthread_mutex_lock(&b->mu);
		built_gen = gen;
		next_ns = now + (uint64_t)(rc == 0 ? b->interval_ms
						   : SP_MIN((uint32_t)BREG_SNAPSHOT_RETRY_MS,
							    b->interval_ms)) *
					1000000;
		if (rc != 0) {
			b->want_full |= full; /* the retry's body is whole if this one was to be */
			continue;
		}
		body->seq = ++b->seq;
		body_put(b->last);
		b->last = body;
		body->refs++;
		for (uint32_t i = 0; i < b->n_ns; i++) {
			body_put(b->ns[i].cur);
			b->ns[i].cur = body;
			body->refs++;
		}
		body_put(body);
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

/* --------------------------------------------------------------- API */

void
ctl_breg_kick(struct ctl_breg *b)
{
	pthread_mutex_lock(&b->mu);
	b->kick_gen++;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

int
ctl_breg_wait_registered(struct ctl_breg *b, uint32_t timeout_ms)
{
	uint64_t deadline = deadline_after(timeout_ms);
	struct timespec ts;
	int rc = 0;

	abs_time(deadline, &ts);
	pthread_mutex_lock(&b->mu);
	for (;;) {
		uint32_t i = 0;

		while (i < b->n_ns && b->ns[i].ok_gen >= b->kick_gen)
			i++;
		if (i == b->n_ns)
			break;
		if (clk_mono_ns() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		(void)pthread_cond_timedwait(&b->cv, &b->mu, &ts);
	}
	pthread_mutex_unlock(&b->mu);
	return rc;
}

void
ctl_breg_wait_first(struct ctl_breg *b, uint32_t timeout_ms)
{
	uint64_t deadline = deadline_after(timeout_ms);
	struct timespec ts;

	abs_time(deadline, &ts);
	pthread_mutex_lock(&b->mu);
	for (;;) {
		uint32_t answered = 0;

		for (uint32_t i = 0; i < b->n_ns; i++) {
			const struct breg_ns *n = &b->ns[i];

			answered += n->ok_gen > 0 || n->fails > 0 || n->refused[0] != '\0';
		}
		if (answered == b->n_ns || clk_mono_ns() >= deadline)
			break;
		(void)pthread_cond_timedwait(&b->cv, &b->mu, &ts);
	}
	pthread_mutex_unlock(&b->mu);
}

void
ctl_breg_accepted(struct ctl_breg *b, uint32_t *accepted, uint32_t *total)
{
	uint32_t n = 0;

	pthread_mutex_lock(&b->mu);
	for (uint32_t i = 0; i < b->n_ns; i++)
		n += b->ns[i].ok_gen > 0 && b->ns[i].fails == 0 && b->ns[i].refused[0] == '\0';
	*total = b->n_ns;
	pthread_mutex_unlock(&b->mu);
	*accepted = n;
}

void
ctl_breg_stats(struct ctl_breg *b, struct ctl_breg_stats *out)
{
	pthread_mutex_lock(&b->mu);
	*out = b->stats;
	pthread_mutex_unlock(&b->mu);
}

bool
ctl_breg_refused(struct ctl_breg *b, char *why, size_t why_len)
{
	bool out = false;

	pthread_mutex_lock(&b->mu);
	for (uint32_t i = 0; i < b->n_ns && !out; i++) {
		if (b->ns[i].refused[0] == '\0')
			continue;
		snprintf(why, why_len, "namesrv %s refused the registration: %s", b->ns[i].addr,
			 b->ns[i].refused);
		out = true;
	}
	pthread_mutex_unlock(&b->mu);
	return out;
}

/* Stop and join the threads that started, then free. */
static void
breg_destroy(struct ctl_breg *b)
{
	pthread_mutex_lock(&b->mu);
	b->stop = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	if (b->agent_started)
		pthread_join(b->agent, NULL);
	for (uint32_t i = 0; i < b->n_ns; i++) {
		if (b->ns[i].started)
			pthread_join(b->ns[i].thr, NULL);
	}
	for (uint32_t i = 0; i < b->n_ns; i++) {
		body_put(b->ns[i].cur);
		free(b->ns[i].addr);
	}
	body_put(b->last);
	if (b->prev_t != NULL)
		b->release(b->arg, b->prev_t, b->prev_n);
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b->ns);
	free(b->strs);
	free(b->ak);
	if (b->sk) {
		memset(b->sk, 0, strlen(b->sk));
		free(b->sk);
	}
	free(b);
}

void
ctl_breg_stop(struct ctl_breg *b)
{
	if (b != NULL)
		breg_destroy(b);
}

/* Copy @s (NULL stays NULL) to *@dst at @*p. */
static void
str_place(const char *s, const char **dst, char **p)
{
	size_t n;

	if (s == NULL) {
		*dst = NULL;
		return;
	}
	n = strlen(s) + 1;
	memcpy(*p, s, n);
	*dst = *p;
	*p += n;
}

static bool
info_valid(const struct ctl_breg_info *in)
{
	if (in->cluster == NULL || in->cluster[0] == '\0' || in->broker_name == NULL ||
	    in->broker_name[0] == '\0' || in->broker_addr == NULL || in->broker_addr[0] == '\0' ||
	    in->broker_id < 0)
		return false;
	return !in->has_dp ||
	       (in->dp_ip != NULL && in->dp_mac != NULL && in->dp_port > 0 && in->dp_cores > 0);
}

static int
info_copy(struct ctl_breg *b, const struct ctl_breg_info *in)
{
	const char *s[] = {in->cluster, in->broker_name, in->broker_addr,
			   in->ha_addr, in->dp_ip,	 in->dp_mac};
	size_t total = 0;
	char *p;

	for (size_t i = 0; i < ARRAY_SIZE(s); i++)
		total += s[i] != NULL ? strlen(s[i]) + 1 : 0;
	b->strs = malloc(total + 1);
	if (b->strs == NULL)
		return -ENOMEM;
	p = b->strs;
	b->info = *in;
	str_place(in->cluster, &b->info.cluster, &p);
	str_place(in->broker_name, &b->info.broker_name, &p);
	str_place(in->broker_addr, &b->info.broker_addr, &p);
	str_place(in->ha_addr, &b->info.ha_addr, &p);
	str_place(in->dp_ip, &b->info.dp_ip, &p);
	str_place(in->dp_mac, &b->info.dp_mac, &p);
	snprintf(b->broker_id, sizeof(b->broker_id), "%" PRId64, in->broker_id);
	snprintf(b->dp_port, sizeof(b->dp_port), "%u", (unsigned)in->dp_port);
	snprintf(b->dp_cores, sizeof(b->dp_cores), "%u", (unsigned)in->dp_cores);
	snprintf(b->epoch, sizeof(b->epoch), "%" PRIu64, in->epoch);
	return 0;
}

/* Split "a:p; b:p" into b->ns. Return: 0, -EINVAL none or too many, -ENOMEM. */
static int
ns_parse(struct ctl_breg *b, const char *list)
{
	b->ns = calloc(BREG_NS_MAX, sizeof(*b->ns));
	if (b->ns == NULL)
		return -ENOMEM;
	for (const char *p = list; *p != '\0';) {
		size_t n = strcspn(p, ";");
		const char *s = p;

		p += n + (p[n] == ';');
		while (n > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n == 0)
			continue;
		if (b->n_ns == BREG_NS_MAX)
			return -EINVAL;
		b->ns[b->n_ns].addr = strndup(s, n);
		if (b->ns[b->n_ns].addr == NULL)
			return -ENOMEM;
		b->ns[b->n_ns].b = b;
		b->n_ns++;
	}
	return b->n_ns > 0 ? 0 : -EINVAL;
}

int
ctl_breg_credentials(const struct ctl_breg *b, struct sp_rem *c)
{
	return b->ak ? sp_rem_credentials(c, b->ak, b->sk) : 0;
}

int
ctl_breg_start(const struct ctl_breg_cfg *cfg, struct ctl_breg **out)
{
	pthread_condattr_t ca;
	struct ctl_breg *b;
	int rc;

	if (cfg == NULL || cfg->namesrv == NULL || cfg->snapshot == NULL || cfg->release == NULL ||
	    !info_valid(&cfg->info))
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	if (pthread_mutex_init(&b->mu, NULL) != 0) {
		free(b);
		return -ENOMEM;
	}
	/* Timed waits on the monotonic clock: a wall-clock step must not stall rounds. */
	if (pthread_condattr_init(&ca) != 0) {
		pthread_mutex_destroy(&b->mu);
		free(b);
		return -ENOMEM;
	}
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&b->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0) {
		pthread_mutex_destroy(&b->mu);
		free(b);
		return -rc;
	}
	b->interval_ms = cfg->interval_ms != 0 ? cfg->interval_ms : CTL_BREG_INTERVAL_MS;
	b->timeout_ms = cfg->timeout_ms != 0 ? cfg->timeout_ms : CTL_BREG_TIMEOUT_MS;
	b->snapshot = cfg->snapshot;
	b->dv = cfg->dv;
	b->force_register = cfg->force_register;
	b->release = cfg->release;
	b->arg = cfg->arg;
	b->kick_gen = 1; /* the first round counts as a kick */
	if (cfg->access_key && cfg->access_key[0] && cfg->secret_key && cfg->secret_key[0]) {
		b->ak = strdup(cfg->access_key);
		b->sk = strdup(cfg->secret_key);
		if (!b->ak || !b->sk) {
			rc = -ENOMEM;
			goto err_destroy;
		}
	}
	if ((rc = info_copy(b, &cfg->info)) != 0 || (rc = ns_parse(b, cfg->namesrv)) != 0)
		goto err_destroy;
	for (uint32_t i = 0; i < b->n_ns; i++) {
		char name[16];

		rc = -pthread_create(&b->ns[i].thr, NULL, worker_main, &b->ns[i]);
		if (rc != 0)
			goto err_destroy;
		b->ns[i].started = true;
		snprintf(name, sizeof(name), "ctl-breg-ns%u", i % 1000);
		(void)pthread_setname_np(b->ns[i].thr, name);
	}
	rc = -pthread_create(&b->agent, NULL, agent_main, b);
	if (rc != 0)
		goto err_destroy;
	b->agent_started = true;
	(void)pthread_setname_np(b->agent, "ctl-breg");
	log_info(BREG_TAG, "broker %s id %" PRId64 " registers with %u namesrv(s) every %u ms",
		 b->info.broker_name, b->info.broker_id, b->n_ns, b->interval_ms);
	*out = b;
	return 0;

err_destroy:
	/* No body was published (no agent), so no worker registered: none unregisters. */
	breg_destroy(b);
	return rc;
}
