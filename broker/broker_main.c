// SPDX-License-Identifier: Apache-2.0
/*
 * broker_main.c - sprocket-broker: configuration, startup, the control
 * thread, shutdown (docs/broker.md).
 *
 *   sprocket-broker [-c broker.properties] [--key=value ...]
 *
 * The control thread (this one, after startup) owns the topic set: it loads
 * topics.json, creates store queues (file creation blocks, so never on a
 * core), publishes the topic table with RCU, answers the cores' auto-creation
 * requests, persists consumer offsets every flushConsumerOffsetInterval and
 * hands the registration agent (ctl_breg) the topic set to register with
 * every NameServer.
 *
 * Signals (signalfd): SIGTERM/SIGINT shut down cleanly (unregister, stop
 * cores, save offsets, flush and checkpoint the store, remove the abort
 * file). SIGUSR1 write-protects the broker (brokerPermission 4: SENDs answer
 * NO_PERMISSION and the registration drops the write bit so clients move
 * away, RocketMQ's way to drain a broker); SIGUSR2 restores it. SIGHUP
 * reopens logFile (logrotate) and never stops the broker. The exit status
 * is 0 only after a clean shutdown: 1 when the store's close (last flush,
 * checkpoint) or saving offsets, delay or timer progress failed.
 *
 * Size: over 1,000 lines because it is start-up is one sequence in one place: each step's failure unwinds the
 * steps before it, and shutdown runs them backwards; the features' own start and stop
 * functions live in their rooms (ctl/, ha/, http/, remoting/).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <urcu/urcu-qsbr.h>

#include "ctl/bk_ctl.h"
#include "control/httpd.h"
#include "bk_priv.h"
#include "ha/bk_follow.h"
#include "ha/bk_ha.h"
#include "remoting/bk_rmt.h"
#include "ha/bk_sync.h"
#include "common/clock.h"
#include "common/cidr.h"
#include "common/config.h"
#include "common/fdlimit.h"
#include "common/log.h"
#include "control/breg.h"
#include "control/notify.h"
#include "store/verify.h"
#include "wire/dp.h"
#include "wire/remoting.h"
#include "sp_config.h"

#define RMT_SPIN_NS 50000ull /* control polls without sleeping this long after remoting work */
#define RMT_RING 4096	     /* command/completion ring per core; remoting keeps fewer in flight */
#define TBW102 "TBW102"	     /* RocketMQ's AUTO_CREATE_TOPIC_KEY_TOPIC */
#define BK_READY_REG_WAIT_MS 12000 /* at start, for the first registration round (2 timeouts) */

static int
rmt_topic_put(void *arg, const struct meta_topic *mt)
{
	return bk_ctl_topic_put(arg, mt, true);
}

/* GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET for a slave (bk_rmt_ops.dump). */
static int
rmt_dump(void *arg, int32_t code, char **json, size_t *len)
{
	struct bk_ctl *x = arg;
	struct meta_offset *o = NULL;
	size_t n = 0;
	int err;

	if (code == WIRE_REQ_GET_ALL_TOPIC_CONFIG) {
		struct meta_version v;

		pthread_mutex_lock(&x->mu);
		v = (struct meta_version){.counter = x->dv_counter, .timestamp_ms = x->dv_ts};
		err = meta_topics_json(x->reg, x->nreg, &v, json, len);
		pthread_mutex_unlock(&x->mu);
		return err;
	}
	if (code == WIRE_REQ_GET_ALL_DELAY_OFFSET)
		return bk_delay_json(x, json, len);
	if (code == WIRE_REQ_GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
		return bk_ctl_groups_json(x, json, len);
	err = bk_offsets_collect(x, &o, &n);
	if (err == 0)
		err = meta_offsets_json(o, n, json, len);
	free(o);
	return err;
}

static int
rmt_config_text(void *arg, char **text, size_t *len)
{
	return bk_ctl_config_text(arg, text, len);
}

static int
rmt_config_update(void *arg, const char *body, size_t len, const char *by, char *why,
		  size_t why_len)
{
	return bk_ctl_config_update(arg, body, len, by, why, why_len);
}

static const struct bk_subgroup *
rmt_group_get(void *arg, const char *name)
{
	return bk_ctl_group_get(arg, name);
}

static int
rmt_group_put(void *arg, const char *body, size_t len, char *why, size_t why_len)
{
	return bk_ctl_group_put_json(arg, body, len, why, why_len);
}

static int
rmt_group_delete(void *arg, const char *name)
{
	return bk_ctl_group_delete(arg, name);
}

static void
rmt_group_seen(void *arg, const char *name)
{
	bk_ctl_group_seen(arg, name);
}

static int
rmt_stats_data(void *arg, const char *name, const char *key, struct jbuf *b)
{
	return bk_stats_data(arg, name, key, b);
}

static double
rmt_group_tps(void *arg, const char *group, const char *topic)
{
	return bk_stats_group_tps(arg, group, topic);
}

static long
rmt_clean_queues(void *arg)
{
	return bk_ctl_clean_queues(arg);
}

static int
rmt_topic_delete(void *arg, const char *name)
{
	return bk_ctl_topic_delete(arg, name);
}

static int
rmt_runtime_info(void *arg, struct jbuf *b)
{
	return bk_ctl_runtime_info(arg, b);
}

/*
 * Return: a SIGTERM/SIGINT is waiting (startup can take a while: let it
 * stop). Pending, not polled on the signalfd: a SIGHUP waiting there is
 * no stop.
 */
static bool
stop_requested(void)
{
	sigset_t p;

	return sigpending(&p) == 0 &&
	       (sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1);
}

static int
topics_load(struct bk_ctl *x)
{
	struct meta_topic *ts = NULL;
	size_t n = 0;
	int err = meta_topics_load(&store_io_posix, x->topics_path, &ts, &n, NULL);

	if (err) {
		log_err(BK_TAG, "%s: %s%s", x->topics_path, strerror(-err),
			err == -EFBIG ? " (over 512 MiB: more topics than a broker holds)" : "");
		return err;
	}
	{
		/* the changes since topics.json was last written whole (store/meta_journal.c) */
		struct meta_journal_replay jr;

		err = meta_journal_replay(x->journal_path, &ts, &n, NULL, &jr);
		if (err) {
			if (err == -EBADMSG)
				log_err(BK_TAG,
					"%s: line %zu is damaged; the topic changes from it on "
					"cannot be read, and the broker does not start without "
					"them: repair or remove that line (a topic it held can be "
					"created again)",
					x->journal_path, jr.bad_line);
			else
				log_err(BK_TAG, "%s: %s", x->journal_path, strerror(-err));
			free(ts);
			return err;
		}
		if (jr.applied > 0 || jr.torn)
			log_info(BK_TAG, "%zu topic changes replayed from %s%s", jr.applied,
				 x->journal_path,
				 jr.torn ? " (and a last line a crash cut, left out)" : "");
		x->journal_bytes = jr.bytes;
		/* folded into topics.json by the save at the end of the start */
		x->save_due |= jr.bytes > 0;
	}
	{
		uint64_t queues = 0;

		for (size_t i = 0; i < n; i++)
			queues += SP_MAX(ts[i].read_queues, ts[i].write_queues);
		err = bk_sizing_check(x, n, queues);
	}
	for (size_t i = 0; i < n && !err; i++) {
		err = bk_ctl_topic_put(x, &ts[i], false);
		if (err == 0 && i % 64 == 63 && stop_requested()) {
			log_info(BK_TAG, "stopped while loading topics (%zu of %zu)", i + 1, n);
			err = -EINTR;
		}
	}
	free(ts);
	if (err)
		return err;
	if (x->bk.conf.auto_create && bk_topic_find(&x->bk, TBW102, strlen(TBW102)) == NULL) {
		struct meta_topic d = {.read_queues = x->bk.conf.default_queues,
				       .write_queues = x->bk.conf.default_queues,
				       .perm = META_PERM_INHERIT | META_PERM_READ |
					       META_PERM_WRITE};

		strcpy(d.name, TBW102);
		err = bk_ctl_topic_put(x, &d, true);
	}
	log_info(BK_TAG, "%zu topics loaded from %s", n, x->topics_path);
	return err;
}

/* The cores' auto-creation mailboxes. Return: topics created. */
static unsigned
creates_poll(struct bk_ctl *x)
{
	unsigned done = 0;

	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct bk_core *c = &x->bk.cores[i];
		struct meta_topic mt = {.perm = META_PERM_READ | META_PERM_WRITE};

		/* acquire: pairs with the core's release in request_create() */
		if (!atomic_load_acquire(&c->create_full))
			continue;
		memcpy(mt.name, c->create_req.name, sizeof(mt.name));
		mt.read_queues = mt.write_queues = c->create_req.queues;
		if (bk_topic_find(&x->bk, mt.name, strlen(mt.name)) == NULL) {
			int err = bk_ctl_topic_put(x, &mt, true);

			if (err)
				log_warn(BK_TAG, "auto-creating topic %s: %s", mt.name,
					 strerror(-err));
			else
				log_info(BK_TAG, "topic %s created (%u queues)", mt.name,
					 mt.write_queues);
			done++;
		}
		/* release: pairs with the core's acquire in request_create() */
		atomic_store_release(&c->create_full, 0);
	}
	return done;
}

/* ---- registration snapshot (agent thread) ---- */

/* ctl_breg_dv_fn: the registration snapshot's data version. */
static void
reg_dv(void *arg, uint64_t *dv_counter, int64_t *dv_ts)
{
	struct bk_ctl *x = arg;

	pthread_mutex_lock(&x->mu);
	*dv_counter = x->dv_counter;
	*dv_ts = x->dv_ts;
	pthread_mutex_unlock(&x->mu);
}

/*
 * The snapshot in one allocation: the array, then each topic's queue map
 * (uint16_t, so first), then the names. At 250,000 topics two mallocs a topic
 * were most of a registration's snapshot.
 */
static int
reg_snapshot(void *arg, struct ctl_breg_topic **out, size_t *n, uint64_t *dv_counter,
	     int64_t *dv_ts)
{
	struct bk_ctl *x = arg;
	uint32_t bperm = atomic_load_relaxed(&x->bk.perm);
	struct ctl_breg_topic *t;
	size_t maps = 0, names = 0;
	uint16_t *qc;
	char *nm;

	pthread_mutex_lock(&x->mu);
	for (size_t i = 0; i < x->nreg; i++) {
		maps += SP_MAX(x->reg[i].read_queues, x->reg[i].write_queues);
		names += strlen(x->reg[i].name) + 1;
	}
	t = malloc(sizeof(*t) * (x->nreg ? x->nreg : 1) + sizeof(uint16_t) * maps + names);
	if (t == NULL) {
		pthread_mutex_unlock(&x->mu);
		return -ENOMEM;
	}
	qc = (uint16_t *)(t + x->nreg);
	nm = (char *)(qc + maps);
	for (size_t i = 0; i < x->nreg; i++) {
		const struct meta_topic *m = &x->reg[i];
		uint32_t nq = SP_MAX(m->read_queues, m->write_queues);
		size_t len = strlen(m->name) + 1;

		memcpy(nm, m->name, len);
		memcpy(qc, x->reg_cores[i], sizeof(uint16_t) * nq);
		t[i] = (struct ctl_breg_topic){
			.name = nm,
			.read_queues = m->read_queues,
			.write_queues = m->write_queues,
			/* a write-protected broker registers its topics without the write bit */
			.perm = m->perm & (bperm | META_PERM_INHERIT),
			.sys_flag = m->sys_flag,
			.order = m->order,
			.n_queue_cores = nq,
			.queue_cores = qc,
		};
		nm += len;
		qc += nq;
	}
	*out = t;
	*n = x->nreg;
	/* a permission change is a new version too (perm < 8: no two states share one) */
	*dv_counter = x->dv_counter * 8 + bperm;
	*dv_ts = x->dv_ts;
	pthread_mutex_unlock(&x->mu);
	return 0;
}

static void
reg_release(void *arg, struct ctl_breg_topic *t, size_t n)
{
	(void)arg;
	(void)n;
	free(t);
}

/* ---- startup ---- */

static int
parse_cpus(const char *s, int *cpus, unsigned n)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned i = 0;

	if (online < 1)
		online = 1;
	if (s == NULL || *s == '\0') {
		for (i = 0; i < n; i++)
			cpus[i] = (int)(i % (unsigned long)online);
		return 0;
	}
	while (*s && i < n) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v >= 4096)
			return -EINVAL;
		cpus[i++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -EINVAL;
	}
	return i == n ? 0 : -EINVAL;
}

/*
 * Every thread but the dataplane cores (store flusher, service, indexer,
 * registration, control) inherits this affinity: all online CPUs except the
 * cores'. A 1 ms service tick that lands on a core's CPU preempts its poll
 * loop and shows in the tail; thread-per-core wants those CPUs to itself.
 */
static int
keep_off_cores(const int *cpus, unsigned n, const char *control)
{
	cpu_set_t set;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int left = 0;

	CPU_ZERO(&set);
	if (control != NULL && control[0] != '\0') {
		/* an explicit list: a 2-CPU benchmark box keeps its client's CPU clean */
		for (const char *p = control; *p;) {
			char *end;
			long v = strtol(p, &end, 10);

			if (end == p || v < 0 || v >= CPU_SETSIZE || (*end && *end != ',')) {
				log_err(BK_TAG, "controlCpus '%s' is not a list of CPU numbers",
					control);
				return -EINVAL;
			}
			CPU_SET((int)v, &set);
			p = *end ? end + 1 : end;
		}
	} else {
		for (long c = 0; c < online && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &set);
		for (unsigned i = 0; i < n; i++)
			if (cpus[i] >= 0 && cpus[i] < CPU_SETSIZE)
				CPU_CLR(cpus[i], &set);
	}
	for (long c = 0; c < CPU_SETSIZE; c++)
		left += CPU_ISSET((int)c, &set) ? 1 : 0;
	if (left == 0) {
		log_warn(BK_TAG, "the dataplane cores use every CPU: control and store threads "
				 "share them (expect a longer tail)");
		return 0;
	}
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		log_warn(BK_TAG, "cannot place control threads: %s", strerror(errno));
	return 0;
}

/*
 * store_cfg.reader_sync: the cores read records (pulls, lookups by
 * offset) only between two quiescent states of their loop, and no other
 * broker thread reads them but through the store's own guard
 * (store_query_key()). Before the cores start and after they stop no one
 * is registered and it returns at once.
 */
static void
bk_store_reader_sync(void *arg)
{
	(void)arg;
	urcu_qsbr_synchronize_rcu();
}

static int
mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int
start_cores(struct bk_ctl *x)
{
	const struct cfg *cfg = x->cfg;
	struct bk *bk = &x->bk;
	struct dp_port_cfg pc = {
		.base_port = bk->conf.dp_port,
		.n = x->nports,
		.iface = cfg_get_str(cfg, "dataplaneInterface")[0]
				 ? cfg_get_str(cfg, "dataplaneInterface")
				 : NULL,
		.dpdk_args = cfg_get_str(cfg, "dpdkArgs"),
		.icmp_guard = true,
	};
	const int *cpus = x->cpus;
	struct in_addr a;
	int err;

	err = dp_backend_parse(cfg_get_str(cfg, "dataplaneBackend"), &pc.backend);
	if (err)
		return err;
	if (inet_pton(AF_INET, cfg_get_str(cfg, "dataplaneIp"), &a) != 1) {
		log_err(BK_TAG, "dataplaneIp '%s' is not an IPv4 address",
			cfg_get_str(cfg, "dataplaneIp"));
		return -EINVAL;
	}
	pc.ip = a.s_addr;
	bk->conf.dp_ip = a.s_addr;
	/*
	 * rte_eal_init() pins the calling thread to DPDK's main lcore, a
	 * dataplane core's CPU: without this the main thread and every thread
	 * it starts later (registration, offsets writer) ran there, beside
	 * the core. Put back the placement keep_off_cores() chose.
	 */
	cpu_set_t ctl_set;
	bool have_set = sched_getaffinity(0, sizeof(ctl_set), &ctl_set) == 0;

	err = dp_ports_open(&pc, x->ports);
	if (have_set && sched_setaffinity(0, sizeof(ctl_set), &ctl_set) != 0)
		log_warn(BK_TAG, "cannot place the control threads again: %s", strerror(errno));
	if (err) {
		log_err(BK_TAG, "opening %u %s ports at %s:%u: %s", bk->ncores,
			dp_backend_name(pc.backend), cfg_get_str(cfg, "dataplaneIp"),
			bk->conf.dp_port, strerror(-err));
		return err;
	}
	for (uint32_t i = 0; i < bk->ncores; i++) {
		struct bk_core *c = &bk->cores[i];
		struct dp_xsrv_cfg xc = {
			.max_sessions = (unsigned)cfg_get_int(cfg, "maxSessionsPerCore"),
			.slots = (uint16_t)cfg_get_int(cfg, "slotsPerSession"),
			.max_msg = bk->conf.max_msg_size + WIRE_DP_MSG_OVERHEAD,
			.core = (uint16_t)i,
			.raw_echo = cfg_get_bool(cfg, "dataplaneRawEcho"),
			.key_fn = bk->acl_on ? bk_acl_key : NULL,
			.key_arg = bk,
			.max_sessions_per_addr = (unsigned)cfg_get_int(cfg, "maxSessionsPerAddr"),
			.big_bufs_per_addr = (unsigned)cfg_get_int(cfg, "bigBuffersPerAddr"),
			.reasm_timeout_ms = (uint32_t)cfg_get_int(cfg, "reassemblyTimeoutMs"),
		};

		c->port = x->ports[i];
		err = dp_xsrv_create(&xc, c->port, bk_core_handle, c, &c->xs);
		if (err) {
			log_err(BK_TAG, "core %u transport: %s", i, strerror(-err));
			return err;
		}
	}
	x->cores_running = true;
	for (uint32_t i = 0; i < bk->ncores; i++) {
		struct bk_core *c = &bk->cores[i];
		struct dp_lcore_cfg lc = {
			.cpu = cpus[i],
			.busy_poll = cfg_get_bool(cfg, "busyPoll"),
			.ring_cap = RMT_RING,
			.on_cmd = bk_core_cmd,
			.tick = bk_core_tick,
			.arg = c,
		};

		err = dp_lcore_start(&c->lc, i, &lc, c->port, c->xs);
		if (err) {
			log_err(BK_TAG, "core %u: %s", i, strerror(-err));
			for (uint32_t k = 0; k < i; k++)
				dp_lcore_stop(&bk->cores[k].lc);
			x->cores_running = false;
			return err;
		}
	}
	return 0;
}

/* A core's transport counters, logged at stop (docs/isolation.md names the limits). */
static void
print_xsrv_stats(uint32_t i, const struct dp_xsrv *x)
{
	const struct dp_xsrv_stats *xs = dp_xsrv_stats(x);

	log_info(BK_TAG,
		 "core %u sessions: opened %" PRIu64 ", refused %" PRIu64 " (table full %" PRIu64
		 ", maxSessionsPerAddr %" PRIu64 "), expired %" PRIu64 "; no buffer %" PRIu64
		 " (bigBuffersPerAddr %" PRIu64 "); reassembly timeouts %" PRIu64,
		 i, xs->sessions_opened, xs->sessions_refused + xs->sessions_refused_addr,
		 xs->sessions_refused, xs->sessions_refused_addr, xs->sessions_expired, xs->busy,
		 xs->busy_addr, xs->reasm_timeouts);
}

static void
stop_cores(struct bk_ctl *x)
{
	struct bk *bk = &x->bk;

	if (x->cores_running)
		for (uint32_t i = 0; i < bk->ncores; i++)
			dp_lcore_stop(&bk->cores[i].lc);
	x->cores_running = false;
	for (uint32_t i = 0; i < bk->ncores; i++) {
		if (bk->cores[i].xs) {
			print_xsrv_stats(i, bk->cores[i].xs);
			dp_xsrv_destroy(bk->cores[i].xs);
		}
		bk->cores[i].xs = NULL;
	}
	if (x->ports[0])
		dp_ports_close(x->ports, x->nports);
	x->ports[0] = NULL;
}

static void
print_stats(const struct bk_ctl *x)
{
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];
		uint64_t mn = 0, mj = 0;

		if (dp_lcore_faults(&c->lc, &mn, &mj) == 0)
			log_info(BK_TAG,
				 "core %u: page faults %" PRIu64 " minor, %" PRIu64 " major", i, mn,
				 mj);
		log_info(BK_TAG,
			 "core %u: sends %" PRIu64 " batches %" PRIu64 " pulls %" PRIu64
			 " parked %" PRIu64 " held %" PRIu64 " redirects %" PRIu64 " busy %" PRIu64
			 " errors %" PRIu64 " (types refused %" PRIu64 ") flush timeouts %" PRIu64
			 " stalls %" PRIu64 " (longest %" PRIu64 " us)",
			 i, c->st.sends, c->st.send_batches, c->st.pulls, c->st.parked, c->st.held,
			 c->st.redirects, c->st.busy, c->st.errors, c->st.type_refused,
			 c->st.flush_timeouts, (uint64_t)atomic_load_relaxed(&c->lc.st.stalls),
			 (uint64_t)atomic_load_relaxed(&c->lc.st.stall_max_ns) / 1000);
		if (c->st.busy > 0) {
			char why[256];
			size_t k = 0;

			why[0] = '\0';
			for (unsigned r = 0; r < BK_BUSY_WHYS && k < sizeof(why); r++)
				if (c->st.busy_by[r] > 0)
					k += (size_t)snprintf(why + k, sizeof(why) - k,
							      "%s%s %" PRIu64, k ? ", " : "",
							      bk_busy_names[r], c->st.busy_by[r]);
			{
				struct store_busy_counts sb = {0};

				(void)store_busy(x->bk.store, i, &sb);
				log_info(BK_TAG,
					 "core %u: busy by reason: %s (store: ConsumeQueue file "
					 "%" PRIu64 ", ConsumeQueue ring %" PRIu64
					 ", CommitLog window or segment %" PRIu64 ")",
					 i, why, sb.cq_file, sb.cq_ring, sb.clog);
			}
		}
		if (c->st.delayed || c->st.delay_delivered || c->st.delay_dropped)
			log_info(BK_TAG,
				 "core %u delay levels: delayed %" PRIu64 " delivered %" PRIu64
				 " dropped %" PRIu64,
				 i, c->st.delayed, c->st.delay_delivered, c->st.delay_dropped);
		if (x->bk.conf.role != BK_ROLE_ASYNC_MASTER || c->st.repl_requests)
			log_info(BK_TAG,
				 "core %u replication: requests %" PRIu64 " bytes sent %" PRIu64
				 " slave acked %" PRIu64 " of %" PRIu64 ", slave timeouts %" PRIu64
				 ", no slave %" PRIu64 ", writes refused %" PRIu64,
				 i, c->st.repl_requests, c->st.repl_bytes,
				 (uint64_t)atomic_load_relaxed(&c->repl_acked_pub),
				 clog_written(store_clog(x->bk.store, i)), c->st.slave_timeouts,
				 c->st.slave_missing, c->st.write_refused);
	}
}

static int
run(struct bk_ctl *x, int sfd)
{
	uint64_t last_work = 0, next_rl = 0;

	for (;;) {
		struct pollfd p[3] = {{.fd = sfd, .events = POLLIN},
				      {.fd = x->bk.efd, .events = POLLIN},
				      {.fd = bk_rmt_fd(x->rmt), .events = POLLIN}};
		int timeout = 100;
		uint64_t now = clk_mono_ns();

		/*
		 * seq_cst store, then look at the completion rings: a core
		 * posts, then loads ctl_sleeping; one of us sees the other.
		 * Right after remoting work, poll without sleeping for
		 * RMT_SPIN_NS: the answer to what was just posted usually
		 * comes within it, and a wake-up through the eventfd costs
		 * more than the wait.
		 */
		atomic_store(&x->bk.ctl_sleeping, true);
		if (bk_rmt_pending(x->rmt) || now - last_work < RMT_SPIN_NS)
			timeout = 0;
		if (poll(p, 3, timeout) < 0 && errno != EINTR) {
			atomic_store(&x->bk.ctl_sleeping, false);
			return -errno;
		}
		atomic_store(&x->bk.ctl_sleeping, false);
		if (bk_rmt_run(x->rmt, clk_mono_ns() / 1000000) > 0)
			last_work = clk_mono_ns();
		if (p[1].revents & POLLIN) {
			uint64_t v;

			if (read(x->bk.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				return -errno;
		}
		/* Also on the timer: a core's eventfd write may have failed. */
		creates_poll(x);
		bk_ctl_admin_tick(x, clk_mono_ns() / 1000000);
		bk_ctl_ns_refused_tick(x, clk_mono_ns() / 1000000);
		bk_disk_keep_tick(x, clk_mono_ns() / 1000000);
		bk_stats_tick(x, clk_mono_ns() / 1000000);
		bk_group_tick(x, clk_mono_ns() / 1000000);
		bk_acl_tick(x, clk_mono_ns() / 1000000);
		httpd_poll(x->http);
		bk_slave_follow_poll(x);
		bk_slave_sync_apply(x);
		if (clk_mono_ns() >= next_rl) {
			/* the count of every flood of warnings whose window ended */
			(void)log_rl_flush();
			next_rl = clk_mono_ns() + 1000000000ull;
		}
		if (atomic_load(&x->bk.restart)) {
			if (bk_ha_restart_why(x) == NULL)
				log_warn(BK_TAG,
					 "restarting: the log is cut to the master's at the start");
			return 0;
		}
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo == SIGUSR1 || si.ssi_signo == SIGUSR2) {
				uint32_t perm = si.ssi_signo == SIGUSR1
							? META_PERM_READ
							: META_PERM_READ | META_PERM_WRITE;

				bk_ctl_perm_set(x, perm,
						si.ssi_signo == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
				continue;
			}
			/* logrotate's: reopen logFile, never stop */
			if (si.ssi_signo == SIGHUP) {
				log_reopen_said(BK_TAG);
				continue;
			}
			log_info(BK_TAG, "signal %u: shutting down", si.ssi_signo);
			return 0;
		}
	}
}

/*
 * --verify: store_verify() on the store the keys name, as a start would
 * open it (storePathRootDir, storePathCommitLog, storePathConsumeQueue,
 * mapedFileSizeCommitLog, dataplaneCores), writing nothing there.
 * Return: the exit status: 0 clean, 1 damaged, 2 unreadable.
 */
static int
bk_verify_store(struct cfg *cfg)
{
	const char *root = cfg_get_str(cfg, "storePathRootDir");
	const char *cl = cfg_get_str(cfg, "storePathCommitLog");
	const char *cq = cfg_get_str(cfg, "storePathConsumeQueue");
	char cl_dir[PATH_MAX];
	char cq_dir[PATH_MAX];
	struct store_verify_cfg vc = {
		.root = root,
		.clog_dir = cl_dir,
		.cq_dir = cq_dir,
		.shards = (uint32_t)cfg_get_int(cfg, "dataplaneCores"),
		.seg_size = (uint64_t)cfg_get_int(cfg, "mapedFileSizeCommitLog"),
	};
	const char *ab = cfg_get_str(cfg, "abortFile");
	char abort_path[PATH_MAX];
	struct store_verify_res res;
	int rc;

	if (ab != NULL && ab[0] != '\0')
		snprintf(abort_path, sizeof(abort_path), "%s", ab);
	else
		snprintf(abort_path, sizeof(abort_path), "%s/abort", root);
	vc.abort_path = abort_path;
	if (cl != NULL && cl[0] != '\0')
		snprintf(cl_dir, sizeof(cl_dir), "%s", cl);
	else
		snprintf(cl_dir, sizeof(cl_dir), "%s/commitlog", root);
	if (cq != NULL && cq[0] != '\0')
		snprintf(cq_dir, sizeof(cq_dir), "%s", cq);
	else
		snprintf(cq_dir, sizeof(cq_dir), "%s/consumequeue", root);
	rc = store_verify(&vc, stdout, &res);
	if (rc != 0) {
		fprintf(stderr, "sprocket-broker: --verify of %s: %s\n", root, strerror(-rc));
		return 2;
	}
	return store_verify_damaged(&res) ? 1 : 0;
}

int
main(int argc, char **argv)
{
	struct bk_ctl *x;
	struct cfg *cfg;
	struct cfg_err cerr;
	struct store_cfg sc;
	sigset_t sigs;
	bool help = false;
	bool verify = false;
	bool restart = false;
	int sfd, err, rc = 1;
	struct in_addr a;
	char dp_mac[24];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			printf("sprocket-broker %s\n", SP_VERSION);
			return 0;
		}
		/* Not a configuration key: taken out before the keys are parsed. */
		if (strcmp(argv[i], "--verify") == 0) {
			verify = true;
			memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof(*argv));
			argc--;
			i--;
		}
	}
	clk_init();
	if (cfg_create(bk_keys, bk_nkeys, &cfg, &cerr) != 0) {
		fprintf(stderr, "sprocket-broker: %s\n", cerr.msg);
		return 2;
	}
	if (cfg_parse_args(cfg, argc, argv, &help, &cerr) != 0) {
		fprintf(stderr, "sprocket-broker: %s\n", cerr.msg);
		cfg_destroy(cfg);
		return 2;
	}
	if (help) {
		printf("usage: sprocket-broker [-c broker.properties] [--key=value ...] "
		       "[--version] [--verify]\n"
		       "--verify: check the store offline, read-only, and report; exit 0 "
		       "clean, 1 damaged, 2 unreadable (docs/store.md, \"Damage\")\n"
		       "keys:\n");
		fflush(stdout);
		cfg_print_help(cfg, STDOUT_FILENO);
		cfg_destroy(cfg);
		return 0;
	}
	{
		enum log_level lvl = LOG_LVL_INFO;

		if (log_level_parse(cfg_get_str(cfg, "logLevel"), &lvl) == 0)
			log_set_level(lvl);
	}
	if (verify) {
		rc = bk_verify_store(cfg);
		cfg_destroy(cfg);
		return rc;
	}
	if (cfg_get_str(cfg, "logFile")[0] != '\0') {
		err = log_open_file(cfg_get_str(cfg, "logFile"));
		if (err) {
			fprintf(stderr, "sprocket-broker: logFile %s: %s\n",
				cfg_get_str(cfg, "logFile"), strerror(-err));
			cfg_destroy(cfg);
			return 2;
		}
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return 1;
	x->cfg = cfg;
	pthread_mutex_init(&x->mu, NULL);
	x->bk.conf = (struct bk_conf){
		.access_key = cfg_get_str(cfg, "accessKey"),
		.secret_key = cfg_get_str(cfg, "secretKey"),
		.cluster = cfg_get_str(cfg, "brokerClusterName"),
		.broker_name = cfg_get_str(cfg, "brokerName"),
		.broker_id = cfg_get_int(cfg, "brokerId"),
		.sync_flush = strcmp(cfg_get_str(cfg, "flushDiskType"), "SYNC_FLUSH") == 0,
		.seg_size = (uint64_t)cfg_get_int(cfg, "mapedFileSizeCommitLog"),
		.slave_timeout_ms = (uint32_t)cfg_get_int(cfg, "syncFlushTimeout"),
		.ha_max_gap = (uint64_t)cfg_get_int(cfg, "haMaxGapNotInSync"),
		.auto_create = cfg_get_bool(cfg, "autoCreateTopicEnable"),
		.default_queues = (uint32_t)cfg_get_int(cfg, "defaultTopicQueueNums"),
		.max_msg_size = (uint32_t)cfg_get_int(cfg, "maxMessageSize"),
		.max_reconsume = (uint32_t)cfg_get_int(cfg, "maxReconsumeTimes"),
		.cores = (uint32_t)cfg_get_int(cfg, "dataplaneCores"),
		.dp_port = (uint16_t)cfg_get_int(cfg, "dataplanePort"),
		.pending_acks = (uint32_t)cfg_get_int(cfg, "pendingAcksPerCore"),
		.parked_pulls = (uint32_t)cfg_get_int(cfg, "parkedPullsPerCore"),
		.offset_slots = (uint32_t)cfg_get_int(cfg, "consumerOffsetSlotsPerCore"),
	};
	x->bk.ncores = x->bk.conf.cores;
	atomic_store_relaxed(&x->bk.write_until_ns, UINT64_MAX); /* static roles: no lease */
	/* With controllerAddr, etcd's record decides the role (docs/failover.md). */
	err = bk_ha_setup(x);
	if (err < 0 || (err == 0 && bk_ctl_role_setup(x) != 0) || bk_delay_conf(x) != 0 ||
	    bk_timer_conf(x) != 0 || bk_tx_conf(x) != 0)
		goto out;
	/*
	 * A slave on dpdk follows its master through its own device (the
	 * only way out of a kernel-bypass host): one more port per shard,
	 * dataplanePort + dataplaneCores + i, for bk_follow's session i.
	 */
	x->nports = x->bk.ncores;
	if ((x->bk.conf.role == BK_ROLE_SLAVE || x->ha != NULL) &&
	    strcmp(cfg_get_str(cfg, "dataplaneBackend"), "dpdk") == 0)
		x->nports = 2 * x->bk.ncores;
	if (x->nports > DP_PORTS_MAX) {
		log_err(BK_TAG,
			"a dpdk slave needs a port per core and one per shard to follow its "
			"master: dataplaneCores %u is more than %u",
			x->bk.ncores, DP_PORTS_MAX / 2);
		goto out;
	}
	if ((uint32_t)x->bk.conf.dp_port + x->nports - 1 > 65535) {
		log_err(BK_TAG, "dataplanePort + %u passes 65535", x->nports - 1);
		goto out;
	}
	atomic_store_relaxed(&x->bk.perm, (uint32_t)cfg_get_int(cfg, "brokerPermission"));
	if (inet_pton(AF_INET, cfg_get_str(cfg, "brokerIP1"), &a) != 1) {
		log_err(BK_TAG, "brokerIP1 '%s' is not an IPv4 address",
			cfg_get_str(cfg, "brokerIP1"));
		goto out;
	}
	memcpy(x->bk.store_host.addr, &a.s_addr, 4);
	x->bk.store_host.port = (uint32_t)cfg_get_int(cfg, "listenPort");

	if (parse_cpus(cfg_get_str(cfg, "dataplaneCpus"), x->cpus, x->bk.ncores) != 0) {
		log_err(BK_TAG, "dataplaneCpus '%s' must list %u CPU numbers",
			cfg_get_str(cfg, "dataplaneCpus"), x->bk.ncores);
		goto out;
	}
	if (keep_off_cores(x->cpus, x->bk.ncores, cfg_get_str(cfg, "controlCpus")) != 0)
		goto out;

	/* Signals go to the signalfd: block them before any thread starts. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	x->bk.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sfd < 0 || x->bk.efd < 0) {
		log_err(BK_TAG, "signalfd/eventfd: %s", strerror(errno));
		goto out;
	}
	if (bk_acl_start(x) != 0)
		goto out;
	{
		/* Listen first: listenPort=0 picks a port, and records carry it (STOREHOST). */
		uint32_t want_conns = (uint32_t)cfg_get_int(cfg, "remotingMaxConnections");
		uint32_t ceiling;
		/* the descriptor budget: idle connections never take the store's descriptors */
		uint32_t conns = fdlim_plan(BK_TAG, "remotingMaxConnections", want_conns,
					    (uint32_t)cfg_get_int(cfg, "fdReserve"), &ceiling);
		struct bk_rmt_conf rcf = {
			.ip = cfg_get_str(cfg, "brokerIP1"),
			.port = (uint16_t)cfg_get_int(cfg, "listenPort"),
			.max_frame = (uint32_t)cfg_get_int(cfg, "remotingMaxFrameSize"),
			.frame_mem_max = (uint64_t)cfg_get_int(cfg, "remotingMaxFrameMemory"),
			.inflight_per_core = RMT_RING - 64,
			.max_conns = conns,
			.fd_ceiling = ceiling,
			.max_conns_per_addr =
				(uint32_t)cfg_get_int(cfg, "remotingMaxConnectionsPerAddr"),
			.max_jobs_per_conn =
				(uint32_t)cfg_get_int(cfg, "remotingMaxInflightPerConnection"),
			.max_jobs_per_addr =
				(uint32_t)cfg_get_int(cfg, "remotingMaxInflightPerAddr"),
			.polls_per_core = (uint32_t)cfg_get_int(cfg, "remotingLongPollsPerCore"),
			.held_max = (uint32_t)cfg_get_int(cfg, "remotingLongPollsMax"),
			.held_per_addr = (uint32_t)cfg_get_int(cfg, "remotingLongPollsPerAddr"),
			.client_expire_ms =
				(uint64_t)cfg_get_int(cfg, "clientChannelExpiredMillis"),
			.lock_expire_ms = 60000,
		};
		struct bk_rmt_ops ro = {.topic_put = rmt_topic_put,
					.dump = rmt_dump,
					.config_text = rmt_config_text,
					.config_update = rmt_config_update,
					.runtime_info = rmt_runtime_info,
					.topic_delete = rmt_topic_delete,
					.clean_queues = rmt_clean_queues,
					.stats_data = rmt_stats_data,
					.group_tps = rmt_group_tps,
					.group_get = rmt_group_get,
					.group_put = rmt_group_put,
					.group_delete = rmt_group_delete,
					.group_seen = rmt_group_seen,
					.arg = x};
		char why[160];

		if (conns == 0)
			goto out; /* too few descriptors for any client: said by fdlim_plan() */
		if (cidr_list_parse(cfg_get_str(cfg, "adminAllowedAddrs"), &rcf.admin_addrs, why,
				    sizeof(why)) != 0) {
			log_err(BK_TAG, "adminAllowedAddrs: %s", why);
			goto out;
		}

		if (rcf.max_frame < x->bk.conf.max_msg_size + (64u << 10))
			rcf.max_frame = x->bk.conf.max_msg_size + (64u << 10);
		if (bk_rmt_create(&x->bk, &rcf, &ro, &x->rmt) != 0)
			goto out;
		{
			const char *m = cfg_get_str(cfg, "tlsServerMode");
			struct bk_rmt_tls tls = {
				.mode = strcmp(m, "permissive") == 0  ? BK_TLS_PERMISSIVE
					: strcmp(m, "enforcing") == 0 ? BK_TLS_ENFORCING
								      : BK_TLS_DISABLED,
				.cert = cfg_get_str(cfg, "tlsServerCertPath"),
				.key = cfg_get_str(cfg, "tlsServerKeyPath"),
				.key_password = cfg_get_str(cfg, "tlsServerKeyPassword"),
				.auth_client = cfg_get_bool(cfg, "tlsServerAuthClient"),
				.trust = cfg_get_str(cfg, "tlsServerTrustCertPath"),
			};

			if (cfg_get_bool(cfg, "tlsEnable") && !cfg_is_set(cfg, "tlsServerMode"))
				tls.mode = BK_TLS_ENFORCING;
			if (bk_rmt_tls_init(x->rmt, &tls, why, sizeof(why)) != 0) {
				log_err(BK_TAG, "TLS: %s", why);
				goto out;
			}
			if (tls.mode != BK_TLS_DISABLED)
				log_info(BK_TAG, "TLS on listenPort: %s%s, certificate %s",
					 tls.mode == BK_TLS_ENFORCING ? "enforcing" : "permissive",
					 tls.auth_client ? ", client certificates required" : "",
					 tls.cert);
		}
		x->bk.store_host.port = bk_rmt_port(x->rmt);
	}

	store_cfg_default(&sc);
	sc.root = cfg_get_str(cfg, "storePathRootDir");
	sc.path_commitlog = cfg_get_str(cfg, "storePathCommitLog");
	sc.path_cq = cfg_get_str(cfg, "storePathConsumeQueue");
	sc.path_index = cfg_get_str(cfg, "storePathIndex");
	sc.path_checkpoint = cfg_get_str(cfg, "storeCheckpoint");
	sc.path_abort = cfg_get_str(cfg, "abortFile");
	sc.shards = x->bk.ncores;
	sc.seg_size = (uint64_t)cfg_get_int(cfg, "mapedFileSizeCommitLog");
	sc.cq_units = (uint32_t)(cfg_get_int(cfg, "mapedFileSizeConsumeQueue") / 20);
	sc.sync_flush = x->bk.conf.sync_flush;
	/* auto: warm, but not a SLAVE under ASYNC_FLUSH (docs/replication.md). */
	if (strcmp(cfg_get_str(cfg, "warmMapedFileEnable"), "auto") != 0)
		sc.no_warm = strcmp(cfg_get_str(cfg, "warmMapedFileEnable"), "false") == 0;
	else
		sc.no_warm = x->bk.conf.role == BK_ROLE_SLAVE && !sc.sync_flush;
	if (sc.no_warm)
		log_info(BK_TAG,
			 "new CommitLog segments are fallocated, not zero-filled "
			 "(warmMapedFileEnable=%s)",
			 cfg_get_str(cfg, "warmMapedFileEnable"));
	sc.flush_interval_ms = (uint32_t)cfg_get_int(cfg, "flushIntervalCommitLog");
	sc.sync_timeout_ms = (uint32_t)cfg_get_int(cfg, "syncFlushTimeout");
	sc.file_reserved_hours = (uint32_t)cfg_get_int(cfg, "fileReservedTime");
	sc.delete_when_hour = atoi(cfg_get_str(cfg, "deleteWhen")) % 24;
	sc.disk_max_used_ratio = (uint32_t)cfg_get_int(cfg, "diskMaxUsedSpaceRatio");
	sc.disk_clean_ratio = (uint32_t)cfg_get_int(cfg, "diskSpaceCleanForciblyRatio");
	sc.disk_warn_ratio = (uint32_t)cfg_get_int(cfg, "diskSpaceWarningLevelRatio");
	sc.clean_forcibly = cfg_get_bool(cfg, "cleanFileForciblyEnable");
	sc.keep_unconsumed = true;
	sc.delete_unconsumed = cfg_get_bool(cfg, "deleteUnconsumedWhenDiskFull");
	sc.store_host = x->bk.store_host;
	sc.buf_dir = cfg_get_str(cfg, "storeBufferDir");
	sc.buf_window = (uint64_t)cfg_get_int(cfg, "storeBufferWindow");
	/* Cores read records only inside their loop: a QSBR grace period covers them. */
	sc.reader_sync = bk_store_reader_sync;
	snprintf(x->offsets_path, sizeof(x->offsets_path), "%s/config/consumerOffset.json",
		 sc.root);
	/* First: store_open() takes <root>/lock before it reads or writes anything there. */
	err = store_open(&sc, &x->bk.store);
	if (err) {
		log_err(BK_TAG, "opening the store at %s: %s", sc.root, strerror(-err));
		goto out;
	}
	snprintf(x->topics_path, sizeof(x->topics_path), "%s/config", sc.root);
	err = mkdirs(x->topics_path);
	if (err) {
		log_err(BK_TAG, "%s: %s", x->topics_path, strerror(-err));
		goto out_store;
	}
	snprintf(x->topics_path, sizeof(x->topics_path), "%s/config/topics.json", sc.root);
	snprintf(x->journal_path, sizeof(x->journal_path), "%s/config/topics.json.journal",
		 sc.root);
	x->bk.cores = calloc(x->bk.ncores, sizeof(*x->bk.cores));
	if (x->bk.cores == NULL)
		goto out_store;
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		err = bk_core_init(&x->bk, &x->bk.cores[i], i);
		if (err) {
			log_err(BK_TAG, "core %u tables: %s", i, strerror(-err));
			goto out_cores;
		}
	}
	/*
	 * The system topics the setups create are saved once, at the end: each
	 * save rewrites topics.json whole (2.5 s at 250,000 topics).
	 */
	x->save_deferred = true;
	if (topics_load(x) != 0 || bk_offsets_load(x) != 0 || bk_delay_setup(x) != 0 ||
	    bk_timer_setup(x) != 0 || bk_tx_setup(x) != 0 || bk_group_setup(x) != 0)
		goto out_cores;
	(void)bk_ctl_topics_save_deferred(x); /* logged; saved again with the next change */
	bk_tailback(x);
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		x->bk.cores[i].repl_base_end = clog_written(store_clog(x->bk.store, i));
	if (start_cores(x) != 0 || bk_timer_start(x) != 0)
		goto out_ports;

	snprintf(dp_mac, sizeof(dp_mac), "%02x:%02x:%02x:%02x:%02x:%02x", x->ports[0]->mac[0],
		 x->ports[0]->mac[1], x->ports[0]->mac[2], x->ports[0]->mac[3], x->ports[0]->mac[4],
		 x->ports[0]->mac[5]);
	{
		char addr[64];
		char ha_addr[64];
		struct ctl_breg_cfg bc = {
			.namesrv = cfg_get_str(cfg, "namesrvAddr"),
			.interval_ms = (uint32_t)cfg_get_int(cfg, "registerNameServerPeriod"),
			.timeout_ms = 6000,
			.info =
				{
					.cluster = x->bk.conf.cluster,
					.broker_name = x->bk.conf.broker_name,
					.broker_id = x->bk.conf.broker_id,
					.broker_addr = addr,
					.ha_addr = ha_addr,
					.has_dp = true,
					.dp_ip = cfg_get_str(cfg, "dataplaneIp"),
					.dp_mac = dp_mac,
					.dp_port = x->bk.conf.dp_port,
					.dp_cores = (uint16_t)x->bk.ncores,
					.epoch = x->bk.conf.role != BK_ROLE_SLAVE
							 ? atomic_load(&x->bk.epoch)
							 : 0,
				},
			.snapshot = reg_snapshot,
			.release = reg_release,
			.dv = reg_dv,
			.force_register = cfg_get_bool(cfg, "forceRegister"),
			.arg = x,
			.access_key = cfg_get_str(cfg, "accessKey"),
			.secret_key = cfg_get_str(cfg, "secretKey"),
		};

		snprintf(addr, sizeof(addr), "%s:%u", cfg_get_str(cfg, "brokerIP1"),
			 bk_rmt_port(x->rmt));
		/* A slave follows the master's dataplane endpoint (docs/replication.md). */
		snprintf(ha_addr, sizeof(ha_addr), "%s:%u", cfg_get_str(cfg, "dataplaneIp"),
			 x->bk.conf.dp_port);
		if (bc.namesrv[0]) {
			err = ctl_breg_start(&bc, &x->breg);
			if (err) {
				log_err(BK_TAG, "registration: %s", strerror(-err));
				goto out_run;
			}
		}
	}
	if (x->bk.conf.role == BK_ROLE_SLAVE) {
		const char *m = x->ha ? bk_ha_master(x) : cfg_get_str(cfg, "haMasterAddress");

		/* with failover, the master comes from etcd (bk_ha.c), not the NameServer */
		x->master_fixed = m[0] != '\0' || x->ha != NULL;
		if (bk_follow_start(&x->bk, m,
				    x->nports > x->bk.ncores ? &x->ports[x->bk.ncores] : NULL,
				    &x->follow) != 0)
			goto out_breg;
		bk_slave_follow_poll(x);
		if (x->breg == NULL)
			log_warn(BK_TAG, "no NameServer: topic configs and consumer offsets will "
					 "not follow the master");
		else if (bk_sync_start(x->breg, BK_SYNC_PERIOD_MS, &x->sync) != 0)
			goto out_breg;
	}
	if (bk_http_start(x) != 0 || bk_ha_start(x) != 0)
		goto out_breg;
	err = pthread_create(&x->persist, NULL, bk_persist_main, x);
	if (err) {
		log_err(BK_TAG, "offsets writer thread: %s", strerror(err));
		goto out_breg;
	}
	/*
	 * "ready" (and READY=1) only once every port is bound and every
	 * NameServer has answered the first registration: a script or unit that
	 * waits for it can then find this broker through a route, as RocketMQ's
	 * BrokerController.start() registers before its "boot success".
	 */
	if (x->breg != NULL) {
		uint32_t ok, total;

		ctl_breg_wait_first(x->breg, BK_READY_REG_WAIT_MS);
		ctl_breg_accepted(x->breg, &ok, &total);
		if (ok == 0)
			log_warn(BK_TAG,
				 "none of the %u NameServers (namesrvAddr) has accepted the "
				 "registration yet: no client finds a route to this broker until "
				 "one does (retried with back-off; /health says 503 until then)",
				 total);
	}
	log_info(BK_TAG,
		 "sprocket-broker %s id %" PRId64 " %s (%s) ready: %u %s cores at %s:%u.., "
		 "remoting %s:%u, store %s (%s), namesrv %s",
		 x->bk.conf.broker_name, x->bk.conf.broker_id, cfg_get_str(cfg, "brokerRole"),
		 SP_VERSION, x->bk.ncores, cfg_get_str(cfg, "dataplaneBackend"),
		 cfg_get_str(cfg, "dataplaneIp"), x->bk.conf.dp_port, cfg_get_str(cfg, "brokerIP1"),
		 bk_rmt_port(x->rmt), sc.root, cfg_get_str(cfg, "flushDiskType"),
		 cfg_get_str(cfg, "namesrvAddr")[0] ? cfg_get_str(cfg, "namesrvAddr") : "(none)");
	ctl_notify(BK_TAG, "READY=1");
	err = run(x, sfd);
	ctl_notify(BK_TAG, "STOPPING=1");
	bk_http_stop(x);
	rc = err ? 1 : 0;
	restart = atomic_load(&x->bk.restart);
	atomic_store_relaxed(&x->persist_stop, true);
	pthread_join(x->persist, NULL);
out_breg:
	bk_http_stop(x);
	bk_ha_stop(x); /* before the follow sessions and the store it reads */
	bk_sync_stop(x->sync);
	x->sync = NULL;
	bk_slave_report(x);
	bk_follow_stop(x->follow);
	x->follow = NULL;
	if (x->breg)
		ctl_breg_stop(x->breg);
	x->breg = NULL;
out_run:
	bk_acl_report(x);
	bk_timer_stop(x);
	stop_cores(x);
	bk_rmt_destroy(x->rmt);
	x->rmt = NULL;
	print_stats(x);
	bk_timer_report(x);
	bk_tx_report(x);
	if (bk_offsets_save(x) != 0 || bk_delay_save(x) != 0 || bk_timer_save(x) != 0 ||
	    bk_tx_save(x) != 0 || bk_ctl_topics_compact(x) != 0)
		rc = 1;
	goto out_cores;
out_ports:
	bk_timer_stop(x);
	stop_cores(x);
out_cores:
	bk_timer_fini(x);
	bk_tx_fini(x);
	bk_group_fini(x);
	bk_stats_fini(x);
	for (uint32_t i = 0; x->bk.cores && i < x->bk.ncores; i++)
		bk_core_fini(&x->bk.cores[i]);
	free(x->bk.cores);
	bk_ctl_ttab_destroy(x->bk.ttab);
	bk_ctl_reg_clear(x);
out_store:
	/* An unclean close (a failed last flush or checkpoint) is a failed run. */
	if (x->bk.store && store_close(x->bk.store) != 0)
		rc = 1;
out:
	bk_rmt_destroy(x->rmt);
	bk_acl_stop(x);
	bk_ha_stop(x);
	(void)log_rl_flush_at(UINT64_MAX); /* what floods were cut short, said at last */
	log_info(BK_TAG, "stopped");
	if (x->bk.efd > 0)
		close(x->bk.efd);
	pthread_mutex_destroy(&x->mu);
	free(x->delay_synced);
	free(x);
	cfg_destroy(cfg);
	if (restart && rc == 0) {
		/*
		 * A slave whose log ran past its master's: everything is closed
		 * cleanly; the same program starts again with the same arguments
		 * and pid, and the store cuts the log as marked (docs/replication.md).
		 */
		pthread_sigmask(SIG_UNBLOCK, &sigs, NULL); /* the signalfd is CLOEXEC */
		bk_ha_exec_handoff();			   /* a promotion: the lease goes along */
		execv("/proc/self/exe", argv);
		log_err(BK_TAG, "restarting: exec: %s", strerror(errno));
		rc = 1;
	}
	bk_ha_handoff_drop(); /* no exec: a promotion's kept lease is given up (a no-op otherwise) */
	return rc;
}
