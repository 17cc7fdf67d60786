// SPDX-License-Identifier: Apache-2.0
/*
 * bk_ha.c - automatic failover: a broker group's master is whoever holds
 * the group's lease-backed record in etcd; when it dies, the most
 * caught-up in-sync slave takes the record with the next epoch
 * (docs/failover.md).
 *
 * Records, under <controllerKeyPrefix>/<cluster>/<brokerName>/:
 *   master        {"epoch":E,"id":I,"addr":..,"ha":..,"lease":".."}, on the
 *                 master's lease: it vanishes when the master stops renewing
 *   epoch         the last epoch given out (no lease): elections compare it
 *   members/<id>  each live member's {"id","role","epoch","end","insync",
 *                 "candidate","last","addr","ha"}, on its own lease
 *   hold          an operator forbids elections (`sprocket broker failover --hold`)
 *   switch        an operator asks the master to hand over to member <id>
 *   prefer        the member the next election must pick (set by a handover
 *                 or by an operator's --to when no master is left)
 *
 * DESIGN
 * One thread per broker, four turns a second on a master and ten on a
 * slave (which waits for the record to go): read the group's records
 * (one range request), renew the lease (a master) or the member record (a
 * slave), and act. No consensus of our own: the election is one etcd
 * transaction (the master record absent and the epoch key unchanged since
 * read: put both), which etcd orders.
 *
 * No two writable masters: a master takes writes only until its last
 * successful renewal's send time plus the lease less a margin
 * (bk->write_until_ns, checked by the cores on every write, so it holds
 * even if this thread stalls); etcd frees the record no earlier than a
 * full lease after that renewal reached it. A slave that follows a later
 * epoch tells the master so in every REPL request; the master's core
 * fences itself at once (bk_repl.c).
 *
 * A role is fixed for the life of a process image: a promoted slave and a
 * deposed master restart in place (exec, same pid and arguments, as a
 * slave's cut already does; docs/replication.md), so each role's start-up
 * code is the only code that sets it up. A promoted slave hands its lease
 * to the next image in the environment (SPROCKET_HA_LEASE); a deposed master
 * comes back as a slave and, following the new master, cuts what it wrote
 * past the new master's log (never acknowledged under SYNC_MASTER, since the
 * new master is the slave that held the most).
 *
 * Size: about 1,000 lines because it is one state machine: the lease, the record's epochs and the
 * take-over steps read and write the same failover state.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "ctl/bk_ctl.h"
#include "bk_follow.h"
#include "bk_ha.h"
#include "remoting/bk_rmt.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/jbuf.h"
#include "common/log.h"
#include "control/etcd.h"
#include "control/httpd.h"
#include "store/clog.h"
#include "store/io.h"

#define HA_TAG "broker.ha"
#define HA_TURN_MS 250
/* a slave looks for its master's record this often: the record's loss starts an election */
#define HA_SLAVE_TURN_MS 100
#define HA_MEMBERS_MAX 16
#define HA_ENV "SPROCKET_HA_LEASE"
/* a slave in contact with the master this recently (before the record vanished) is in sync */
#define HA_CONTACT_MS 3000

struct ha_master {
	bool present;
	uint64_t epoch;
	int64_t id;
	int64_t lease;
	int64_t mod_rev;
	char addr[64];
	char ha[64];
};

struct ha_member {
	int64_t id;
	uint64_t epoch;
	uint64_t end;
	uint64_t last; /* the epoch it was last master of */
	bool insync;
	bool candidate;
};

struct ha_view {
	struct ha_master m;
	uint64_t epoch;	   /* the epoch key (0: none yet) */
	int64_t epoch_rev; /* its mod revision (0: absent) */
	bool hold;
	int64_t switch_to;  /* -1: none */
	int64_t prefer;	    /* -1: none */
	int64_t prefer_rev; /* its mod revision */
	struct ha_member mem[HA_MEMBERS_MAX];
	size_t nmem;
};

struct bk_ha {
	struct bk_ctl *x;
	struct ctl_etcd *etcd;
	char k_master[CTL_ETCD_KEY_MAX];
	char k_epoch[CTL_ETCD_KEY_MAX];
	char k_hold[CTL_ETCD_KEY_MAX];
	char k_switch[CTL_ETCD_KEY_MAX];
	char k_prefer[CTL_ETCD_KEY_MAX];
	char k_members[CTL_ETCD_KEY_MAX];
	char k_me[CTL_ETCD_KEY_MAX];
	char pfx[CTL_ETCD_KEY_MAX - 48]; /* room for the longest name after it */
	char epoch_path[4096];
	int64_t id;
	bool candidate;
	bool master;
	int master_role; /* BK_ROLE_* this member is when elected */
	uint32_t lease_ms;
	int64_t lease;	     /* master: the record's; slave: the member record's */
	uint64_t renewed_ns; /* the last renewal's send time */
	uint64_t last;	     /* the epoch this member was last master of (epoch file) */
	char addr[64];	     /* remoting */
	char ha[64];	     /* dataplane */
	char following[64];  /* slave: the master's dataplane endpoint ("" none) */
	uint64_t absent_ms;  /* slave: the master record missing since (wall ms; 0 present) */
	bool said_hold;
	bool said_none;
	bool handover;	     /* master: asked to restart holding its lease (a promotion) */
	int64_t stale_lease; /* a record of this member's previous image, freed at start */
	bool absent_seen;    /* slave: the record's absence was published in a member record */
	const char *restart_why;
	char why[200];
	pthread_t th;
	bool running;
	_Atomic bool stop;
	_Atomic uint64_t elections_won; /* metrics */
};

static void
sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t
now_ms(void)
{
	return clk_mono_ns() / 1000000;
}

/* ---- records ---- */

static int64_t
jint(struct json_object *o, const char *k, int64_t def)
{
	struct json_object *f;

	if (!json_object_object_get_ex(o, k, &f) || f == NULL)
		return def;
	if (json_object_is_type(f, json_type_string))
		return strtoll(json_object_get_string(f), NULL, 10);
	return json_object_get_int64(f);
}

static void
jstr(struct json_object *o, const char *k, char *out, size_t cap)
{
	struct json_object *f;

	out[0] = '\0';
	if (json_object_object_get_ex(o, k, &f) && json_object_is_type(f, json_type_string))
		snprintf(out, cap, "%s", json_object_get_string(f));
}

static bool
jbool(struct json_object *o, const char *k)
{
	struct json_object *f;

	return json_object_object_get_ex(o, k, &f) && json_object_get_boolean(f);
}

static struct json_object *
jparse(const char *s)
{
	struct json_object *o = json_tokener_parse(s);

	if (o != NULL && !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
	}
	return o;
}

/* Read the group's records. Return: 0, -errno (etcd not reachable, logged by the caller). */
static int
view_read(struct bk_ha *h, struct ha_view *v)
{
	static struct ctl_etcd_kv kvs[4 * HA_MEMBERS_MAX];
	size_t n = 0;
	int err;

	memset(v, 0, sizeof(*v));
	v->switch_to = -1;
	v->prefer = -1;
	err = ctl_etcd_get(h->etcd, h->pfx, true, kvs, sizeof(kvs) / sizeof(kvs[0]), &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		const char *k = kvs[i].key;
		struct json_object *o;

		if (strcmp(k, h->k_master) == 0 && (o = jparse(kvs[i].value)) != NULL) {
			v->m.present = true;
			v->m.epoch = (uint64_t)jint(o, "epoch", 0);
			v->m.id = jint(o, "id", -1);
			v->m.lease = kvs[i].lease;
			v->m.mod_rev = kvs[i].mod_rev;
			jstr(o, "addr", v->m.addr, sizeof(v->m.addr));
			jstr(o, "ha", v->m.ha, sizeof(v->m.ha));
			json_object_put(o);
		} else if (strcmp(k, h->k_epoch) == 0) {
			v->epoch = strtoull(kvs[i].value, NULL, 10);
			v->epoch_rev = kvs[i].mod_rev;
		} else if (strcmp(k, h->k_hold) == 0) {
			v->hold = true;
		} else if (strcmp(k, h->k_switch) == 0) {
			v->switch_to = strtoll(kvs[i].value, NULL, 10);
		} else if (strcmp(k, h->k_prefer) == 0) {
			v->prefer = strtoll(kvs[i].value, NULL, 10);
			v->prefer_rev = kvs[i].mod_rev;
		} else if (strncmp(k, h->k_members, strlen(h->k_members)) == 0 &&
			   v->nmem < HA_MEMBERS_MAX && (o = jparse(kvs[i].value)) != NULL) {
			struct ha_member *m = &v->mem[v->nmem++];

			m->id = jint(o, "id", -1);
			m->epoch = (uint64_t)jint(o, "epoch", 0);
			m->end = (uint64_t)jint(o, "end", 0);
			m->last = (uint64_t)jint(o, "last", 0);
			m->insync = jbool(o, "insync");
			m->candidate = jbool(o, "candidate");
			json_object_put(o);
		}
	}
	return 0;
}

static const struct ha_member *
member(const struct ha_view *v, int64_t id)
{
	for (size_t i = 0; i < v->nmem; i++)
		if (v->mem[i].id == id)
			return &v->mem[i];
	return NULL;
}

static uint64_t
log_end(const struct bk_ha *h)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < h->x->bk.ncores; i++)
		sum += clog_written(store_clog(h->x->bk.store, i));
	return sum;
}

/*
 * In sync: a master; or a slave following the current epoch whose last
 * answer from its master came within HA_CONTACT_MS of now (master present)
 * or of the record's disappearance, and was not more than
 * haMaxGapNotInSync behind; or the group's last master itself.
 */
static bool
in_sync(const struct bk_ha *h, const struct ha_view *v)
{
	const struct bk_ctl *x = h->x;
	uint64_t contact;
	uint64_t ref;
	uint64_t lag = 0;

	if (h->master)
		return true;
	if (h->last != 0 && h->last == v->epoch)
		return true;
	if (x->follow == NULL || h->following[0] == '\0' ||
	    atomic_load_relaxed(&x->bk.epoch) != v->epoch)
		return false;
	contact = bk_follow_contact_ms(x->follow);
	ref = h->absent_ms ? h->absent_ms : (uint64_t)clk_wall_ms();
	if (contact == 0 || contact + HA_CONTACT_MS + (h->absent_ms ? h->lease_ms : 0) < ref)
		return false;
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct bk_follow_lag g = {0};
		uint64_t end = 0;
		uint64_t bytes = 0;

		bk_follow_stats(x->follow, i, &end, &bytes, &g);
		lag += atomic_load_relaxed(&g.bytes);
	}
	return lag <= x->bk.conf.ha_max_gap;
}

static int
member_put(struct bk_ha *h, const struct ha_view *v)
{
	char val[512];

	snprintf(val, sizeof(val),
		 "{\"id\":%" PRId64 ",\"role\":\"%s\",\"epoch\":%" PRIu64 ",\"end\":%" PRIu64
		 ",\"insync\":%s,\"candidate\":%s,\"last\":%" PRIu64
		 ",\"addr\":\"%s\",\"ha\":\"%s\"}",
		 h->id, h->master ? "master" : "slave", atomic_load_relaxed(&h->x->bk.epoch),
		 log_end(h), in_sync(h, v) ? "true" : "false", h->candidate ? "true" : "false",
		 h->last, h->addr, h->ha);
	return ctl_etcd_put(h->etcd, h->k_me, val, h->lease);
}

/* The last epoch this member was master of, from <storePathRootDir>/epoch (0: never). */
static uint64_t
epoch_file_read(const char *path)
{
	char buf[32] = {0};
	FILE *f = fopen(path, "re");
	uint64_t e = 0;

	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL)
		e = strtoull(buf, NULL, 10);
	fclose(f);
	return e;
}

static void
epoch_file_write(const char *path, uint64_t e)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", e);
	int err = store_io_write_atomic(&store_io_posix, path, buf, (size_t)n);

	if (err)
		log_warn(HA_TAG, "saving %s: %s", path, strerror(-err));
}

/* ---- set-up: the role of this image ---- */

static void
lease_window(struct bk_ha *h, uint64_t sent_ns)
{
	/* a sixth of the lease (500 ms of 3 s) before etcd could free the record */
	uint64_t keep = (uint64_t)h->lease_ms * 1000000u * 5 / 6;

	h->renewed_ns = sent_ns;
	atomic_store(&h->x->bk.write_until_ns, sent_ns + keep);
}

/* The lease a promoted image was handed ("lease:epoch"), or 0. */
static int64_t
handed_lease(uint64_t *epoch)
{
	const char *s = getenv(HA_ENV);
	int64_t lease = 0;
	char *end;

	*epoch = 0;
	if (s == NULL)
		return 0;
	lease = strtoll(s, &end, 10);
	if (*end == ':')
		*epoch = strtoull(end + 1, NULL, 10);
	unsetenv(HA_ENV);
	return *epoch ? lease : 0;
}

int
bk_ha_setup(struct bk_ctl *x)
{
	const struct cfg *cfg = x->cfg;
	const char *eps = cfg_get_str(cfg, "controllerAddr");
	const char *role = cfg_get_str(cfg, "brokerRole");
	struct bk_conf *cf = &x->bk.conf;
	struct ha_view v;
	struct bk_ha *h;
	uint64_t handed_epoch;
	int64_t handed;
	int err;

	if (eps[0] == '\0')
		return 0;
	if (cf->broker_id < 1) {
		log_err(BK_TAG,
			"controllerAddr: brokerId names this member of group %s and must be 1 or "
			"more (got %" PRId64 "; the master registers as 0 whichever member it is)",
			cf->broker_name, cf->broker_id);
		return -EINVAL;
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->x = x;
	h->id = cf->broker_id;
	h->candidate = strcmp(role, "SLAVE") != 0;
	h->master_role =
		strcmp(role, "SYNC_MASTER") == 0 ? BK_ROLE_SYNC_MASTER : BK_ROLE_ASYNC_MASTER;
	h->lease_ms = (uint32_t)cfg_get_int(cfg, "controllerLeaseSeconds") * 1000u;
	if ((size_t)snprintf(h->pfx, sizeof(h->pfx), "%s/%s/%s/",
			     cfg_get_str(cfg, "controllerKeyPrefix"), cf->cluster,
			     cf->broker_name) >= sizeof(h->pfx)) {
		log_err(BK_TAG, "controllerKeyPrefix/brokerClusterName/brokerName: longer than %zu",
			sizeof(h->pfx) - 1);
		free(h);
		return -ENAMETOOLONG;
	}
	snprintf(h->k_master, sizeof(h->k_master), "%smaster", h->pfx);
	snprintf(h->k_epoch, sizeof(h->k_epoch), "%sepoch", h->pfx);
	snprintf(h->k_hold, sizeof(h->k_hold), "%shold", h->pfx);
	snprintf(h->k_switch, sizeof(h->k_switch), "%sswitch", h->pfx);
	snprintf(h->k_prefer, sizeof(h->k_prefer), "%sprefer", h->pfx);
	snprintf(h->k_members, sizeof(h->k_members), "%smembers/", h->pfx);
	snprintf(h->k_me, sizeof(h->k_me), "%smembers/%" PRId64, h->pfx, h->id);
	snprintf(h->epoch_path, sizeof(h->epoch_path), "%s/epoch",
		 cfg_get_str(cfg, "storePathRootDir"));
	snprintf(h->ha, sizeof(h->ha), "%s:%" PRId64, cfg_get_str(cfg, "dataplaneIp"),
		 cfg_get_int(cfg, "dataplanePort"));
	h->last = epoch_file_read(h->epoch_path);
	/* a second for the etcd calls of this turn: a lease is seconds */
	err = ctl_etcd_open(eps, h->lease_ms / 3 < 1000 ? h->lease_ms / 3 : 1000, &h->etcd);
	if (err) {
		log_err(BK_TAG, "controllerAddr '%s': not host:port;host:port...", eps);
		free(h);
		return err;
	}
	x->ha = h;
	/* until the thread knows better: a slave that follows nobody and takes no write */
	cf->role = BK_ROLE_SLAVE;
	atomic_store(&x->bk.write_until_ns, 0);
	handed = handed_lease(&handed_epoch);
	err = view_read(h, &v);
	if (err) {
		log_warn(HA_TAG, "etcd at %s: %s; starting as a slave of group %s until it answers",
			 eps, strerror(-err), cf->broker_name);
		if (handed)
			log_warn(HA_TAG, "the lease of epoch %" PRIu64 " is lost with it",
				 handed_epoch);
		return 1;
	}
	if (v.m.present && v.m.id == h->id && handed != 0 && v.m.lease == handed &&
	    v.m.epoch == handed_epoch) {
		int64_t ttl = 0;
		uint64_t t0 = clk_mono_ns();

		/* a failed call is retried while the lease may still hold */
		for (int i = 0; i < 4; i++) {
			t0 = clk_mono_ns();
			err = ctl_etcd_keepalive(h->etcd, handed, &ttl);
			if (err == 0)
				break;
			sleep_ms(h->lease_ms / 12);
		}
		if (err == 0 && ttl > 0) {
			h->master = true;
			h->lease = handed;
			lease_window(h, t0);
			cf->role = h->master_role;
			cf->broker_id = 0;
			atomic_store(&x->bk.epoch, v.m.epoch);
			h->last = v.m.epoch;
			epoch_file_write(h->epoch_path, v.m.epoch);
			log_info(HA_TAG,
				 "master of group %s in epoch %" PRIu64 " (member %" PRId64 ")",
				 cf->broker_name, v.m.epoch, h->id);
			return 1;
		}
		log_warn(HA_TAG,
			 "the lease of epoch %" PRIu64 " expired during the restart (%s): "
			 "starting as a slave",
			 handed_epoch, err ? strerror(-err) : "etcd says so");
		h->stale_lease = handed; /* freed at start, if it still holds */
		v.m.present = false;
	} else if (v.m.present && v.m.id == h->id) {
		/*
		 * Our previous life's record (killed, restarted within the
		 * lease): nobody renews it. It is freed once this process
		 * holds the store's lock (bk_ha_start()): only then is the
		 * process it belonged to surely gone.
		 */
		log_warn(HA_TAG,
			 "the record names this member master of epoch %" PRIu64
			 " from before its restart: its lease is given up once the store is ours",
			 v.m.epoch);
		h->stale_lease = v.m.lease;
		v.m.present = false;
	}
	cf->broker_id = h->id;
	if (v.m.present) {
		atomic_store(&x->bk.epoch, v.m.epoch);
		snprintf(h->following, sizeof(h->following), "%s", v.m.ha);
		log_info(HA_TAG,
			 "slave of group %s: following member %" PRId64 " at %s (epoch %" PRIu64
			 ")",
			 cf->broker_name, v.m.id, v.m.ha, v.m.epoch);
	} else {
		log_info(HA_TAG, "group %s has no master in etcd: starting as a slave%s",
			 cf->broker_name, h->candidate ? " and a candidate" : "");
	}
	return 1;
}

const char *
bk_ha_master(const struct bk_ctl *x)
{
	return x->ha ? x->ha->following : "";
}

const char *
bk_ha_restart_why(const struct bk_ctl *x)
{
	return x->ha ? x->ha->restart_why : NULL;
}

/* ---- the thread ---- */

static void
restart(struct bk_ha *h, const char *why)
{
	h->restart_why = why;
	atomic_store(&h->x->bk.restart, true);
	atomic_store(&h->stop, true);
}

/* A master that lost its claim: no write from now on, back as a slave. */
static void
step_down(struct bk_ha *h, const char *why)
{
	uint64_t now = clk_mono_ns();
	uint64_t until = atomic_load(&h->x->bk.write_until_ns);
	/* when the cores stopped taking writes: the lease window's end, or now */
	uint64_t since = (uint64_t)clk_wall_ms() - (until < now ? (now - until) / 1000000 : 0);

	atomic_store(&h->x->bk.fenced, true);
	snprintf(h->why, sizeof(h->why),
		 "master of epoch %" PRIu64 " stepping down: %s; no write since wall ms %" PRIu64
		 ", restarting as a slave",
		 atomic_load_relaxed(&h->x->bk.epoch), why, since);
	log_warn(HA_TAG, "%s", h->why);
	restart(h, h->why);
}

/*
 * An operator's switch to member @to: stop writes, wait (up to 5 s) until
 * @to holds everything, then free the record for it.
 */
static void
hand_over(struct bk_ha *h, int64_t to)
{
	uint64_t end = log_end(h);
	uint64_t until = now_ms() + 5000;
	const struct ha_member *m = NULL;
	struct ha_view v;
	char val[32];
	const struct ctl_etcd_op ops[] = {
		{.key = h->k_master},
		{.key = h->k_switch},
		{.key = h->k_prefer, .value = val},
	};
	struct ctl_etcd_cmp cmp = {.kind = CTL_ETCD_CMP_MOD_REV, .key = h->k_master};
	bool ok = false;
	int64_t ttl;

	atomic_store(&h->x->bk.fenced, true);
	log_warn(HA_TAG,
		 "handing group %s over to member %" PRId64
		 " (asked in etcd): no write from now on",
		 h->x->bk.conf.broker_name, to);
	/* the lease is kept (renewed) while waiting: the record must stay ours */
	while (now_ms() < until && !atomic_load(&h->stop)) {
		if (ctl_etcd_keepalive(h->etcd, h->lease, &ttl) != 0 || ttl == 0)
			break;
		if (view_read(h, &v) != 0 || !v.m.present || v.m.lease != h->lease)
			break;
		cmp.rev = v.m.mod_rev;
		if ((m = member(&v, to)) != NULL && m->end >= end)
			break;
		m = NULL;
		sleep_ms(100);
	}
	snprintf(val, sizeof(val), "%" PRId64, to);
	if (m == NULL) {
		/* the lease runs out and the normal pick chooses: never a lagging member by name */
		log_warn(HA_TAG,
			 "member %" PRId64 " did not catch up with %" PRIu64
			 " bytes in 5 s: stepping down without naming it",
			 to, end);
		(void)ctl_etcd_del(h->etcd, h->k_switch);
	} else if (cmp.rev == 0 || ctl_etcd_txn(h->etcd, &cmp, 1, ops, 3, &ok) != 0 || !ok) {
		/* only while the record is still ours (its mod revision as we read it) */
		log_warn(HA_TAG, "handing over: etcd did not take it; the lease runs out instead");
	}
	if (m != NULL)
		(void)ctl_etcd_revoke(h->etcd, h->lease);
	step_down(h, "handed over by an operator");
}

static void
master_turn(struct bk_ha *h, uint64_t *next_renew)
{
	struct ha_view v;
	int err;

	if (now_ms() >= *next_renew) {
		uint64_t t0 = clk_mono_ns();
		int64_t ttl = 0;

		err = ctl_etcd_keepalive(h->etcd, h->lease, &ttl);
		if (err == 0 && ttl == 0) {
			step_down(h, "etcd says its lease expired");
			return;
		}
		if (err == 0)
			lease_window(h, t0);
		else
			log_warn_ratelimited(HA_TAG, "renewing the lease at etcd %s: %s",
					     ctl_etcd_endpoint(h->etcd), strerror(-err));
		*next_renew = now_ms() + h->lease_ms / 6;
	}
	if (clk_mono_ns() >= atomic_load_relaxed(&h->x->bk.write_until_ns)) {
		step_down(h, "its lease could not be renewed in time (etcd unreachable?)");
		return;
	}
	if (atomic_load_relaxed(&h->x->bk.fenced)) {
		step_down(h, "a slave follows a later epoch");
		return;
	}
	err = view_read(h, &v);
	if (err)
		return; /* the lease's clock decides */
	if (!v.m.present || v.m.id != h->id || v.m.lease != h->lease) {
		step_down(h, "the group's record in etcd is gone or names another master");
		return;
	}
	if (v.switch_to >= 0 && v.switch_to != h->id) {
		hand_over(h, v.switch_to);
		return;
	}
	if (v.switch_to == h->id)
		(void)ctl_etcd_del(h->etcd, h->k_switch);
	if (v.prefer >= 0)
		(void)ctl_etcd_del(h->etcd, h->k_prefer); /* it named the next master: us */
	if (member_put(h, &v) != 0)
		log_warn_ratelimited(HA_TAG, "etcd %s: member record not written",
				     ctl_etcd_endpoint(h->etcd));
}

/* Whom the election picks among live members (-1: nobody eligible). */
static int64_t
pick(const struct bk_ha *h, const struct ha_view *v)
{
	const struct ha_member *best = NULL;

	if (v->prefer >= 0 && member(v, v->prefer) != NULL && member(v, v->prefer)->candidate)
		return v->prefer;
	for (size_t i = 0; i < v->nmem; i++) {
		const struct ha_member *m = &v->mem[i];
		bool last = m->last != 0 && m->last == v->epoch;

		/* a group's first election (no epoch yet): any candidate */
		if (!m->candidate || !(m->insync || last || v->epoch == 0))
			continue;
		if (best == NULL || m->end > best->end ||
		    (m->end == best->end &&
		     (last > (best->last == v->epoch) ||
		      (last == (best->last == v->epoch) && m->id < best->id))))
			best = m;
	}
	(void)h;
	return best ? best->id : -1;
}

static void
campaign(struct bk_ha *h, const struct ha_view *v)
{
	uint64_t epoch = v->epoch + 1;
	char mval[512];
	char eval[32];
	bool ok = false;
	int64_t lease = 0;
	uint64_t t0 = clk_mono_ns();
	int err;

	err = ctl_etcd_grant(h->etcd, h->lease_ms / 1000, &lease);
	if (err) {
		log_warn_ratelimited(HA_TAG, "etcd: lease for an election: %s", strerror(-err));
		return;
	}
	snprintf(mval, sizeof(mval),
		 "{\"epoch\":%" PRIu64 ",\"id\":%" PRId64
		 ",\"addr\":\"%s\",\"ha\":\"%s\",\"lease\":\"%" PRId64 "\"}",
		 epoch, h->id, h->addr, h->ha, lease);
	snprintf(eval, sizeof(eval), "%" PRIu64, epoch);
	{
		const struct ctl_etcd_cmp cmp[] = {
			{.kind = CTL_ETCD_CMP_ABSENT, .key = h->k_master},
			{.kind = CTL_ETCD_CMP_MOD_REV, .key = h->k_epoch, .rev = v->epoch_rev},
		};
		const struct ctl_etcd_op ops[] = {
			{.key = h->k_master, .value = mval, .lease = lease},
			{.key = h->k_epoch, .value = eval},
			{.key = h->k_prefer},
		};

		err = ctl_etcd_txn(h->etcd, cmp, 2, ops, 3, &ok);
	}
	if (err || !ok) {
		(void)ctl_etcd_revoke(h->etcd, lease);
		if (err)
			log_warn_ratelimited(HA_TAG, "etcd: election: %s", strerror(-err));
		return;
	}
	atomic_add_relaxed(&h->elections_won, 1);
	h->lease = lease;
	h->renewed_ns = t0;
	h->handover = true;
	h->last = epoch;
	epoch_file_write(h->epoch_path, epoch);
	snprintf(h->why, sizeof(h->why),
		 "elected master of group %s in epoch %" PRIu64 " (member %" PRId64 ", %" PRIu64
		 " bytes of log; the record was gone for %" PRIu64 " ms): restarting as master",
		 h->x->bk.conf.broker_name, epoch, h->id, log_end(h),
		 (uint64_t)clk_wall_ms() - h->absent_ms);
	log_warn(HA_TAG, "%s", h->why);
	restart(h, h->why);
}

static void
slave_turn(struct bk_ha *h, uint64_t *next_renew)
{
	struct bk_ctl *x = h->x;
	struct ha_view v;
	int64_t who;
	int err;

	err = view_read(h, &v);
	if (err) {
		log_warn_ratelimited(HA_TAG, "etcd %s: %s", ctl_etcd_endpoint(h->etcd),
				     strerror(-err));
		return;
	}
	if (v.m.present) {
		h->absent_ms = 0;
		h->said_hold = h->said_none = false;
		if (v.m.id == h->id) {
			/* a record of ours nobody renews (a crash between election and restart) */
			if (v.m.lease != h->lease)
				(void)ctl_etcd_revoke(h->etcd, v.m.lease);
		} else if (v.m.epoch != atomic_load_relaxed(&x->bk.epoch) ||
			   strcmp(v.m.ha, h->following) != 0) {
			atomic_store(&x->bk.epoch, v.m.epoch);
			snprintf(h->following, sizeof(h->following), "%s", v.m.ha);
			log_info(HA_TAG,
				 "following member %" PRId64 " at %s, master of epoch %" PRIu64,
				 v.m.id, v.m.ha, v.m.epoch);
			if (x->follow != NULL)
				bk_follow_set_master(x->follow, v.m.ha);
		}
	} else if (h->absent_ms == 0) {
		h->absent_ms = (uint64_t)clk_wall_ms();
		h->absent_seen = false;
		*next_renew = 0; /* publish our end and sync now, for the pick */
		log_warn(HA_TAG, "group %s has no master in etcd (epoch %" PRIu64 ")",
			 x->bk.conf.broker_name, v.epoch);
	}
	if (now_ms() >= *next_renew) {
		int64_t ttl = 0;

		if (h->lease != 0 && (ctl_etcd_keepalive(h->etcd, h->lease, &ttl) != 0 || ttl == 0))
			h->lease = 0;
		if (h->lease == 0)
			(void)ctl_etcd_grant(h->etcd, h->lease_ms / 1000, &h->lease);
		if (h->lease != 0 && member_put(h, &v) == 0) {
			*next_renew = now_ms() + h->lease_ms / 6;
			if (h->absent_ms != 0 && !h->absent_seen) {
				/* every member republishes on seeing the record gone: pick next turn */
				h->absent_seen = true;
				return;
			}
		}
	}
	if (v.m.present || !h->candidate || !h->absent_seen)
		return;
	if (v.hold) {
		if (!h->said_hold)
			log_warn(HA_TAG, "no master, and elections are held by an operator "
					 "(sprocket broker failover --release)");
		h->said_hold = true;
		return;
	}
	who = pick(h, &v);
	if (who < 0) {
		if (!h->said_none)
			log_warn(HA_TAG,
				 "no master and no member in sync with epoch %" PRIu64
				 ": not electing (an operator can pick one: sprocket broker "
				 "failover --to ID)",
				 v.epoch);
		h->said_none = true;
		return;
	}
	if (who == h->id)
		campaign(h, &v);
}

static void *
ha_main(void *arg)
{
	struct bk_ha *h = arg;
	uint64_t next_renew = 0;

	while (!atomic_load(&h->stop)) {
		uint64_t t = now_ms();

		if (h->master)
			master_turn(h, &next_renew);
		else
			slave_turn(h, &next_renew);
		t = now_ms() - t;
		if (!atomic_load(&h->stop) && t < (h->master ? HA_TURN_MS : HA_SLAVE_TURN_MS))
			sleep_ms((h->master ? HA_TURN_MS : HA_SLAVE_TURN_MS) - (uint32_t)t);
	}
	return NULL;
}

int
bk_ha_start(struct bk_ctl *x)
{
	struct bk_ha *h = x->ha;
	int err;

	if (h == NULL)
		return 0;
	snprintf(h->addr, sizeof(h->addr), "%s:%u", cfg_get_str(x->cfg, "brokerIP1"),
		 bk_rmt_port(x->rmt));
	if (h->stale_lease != 0) {
		/* this process holds the store's lock: the record's owner is gone */
		(void)ctl_etcd_revoke(h->etcd, h->stale_lease);
		h->stale_lease = 0;
	}
	err = pthread_create(&h->th, NULL, ha_main, h);
	if (err) {
		log_err(BK_TAG, "failover thread: %s", strerror(err));
		return -err;
	}
	h->running = true;
	return 0;
}

/*
 * A promotion's lease, kept from bk_ha_stop() to bk_ha_exec_handoff(). A
 * keeper thread renews it meanwhile: the rest of the stop (a follow or sync
 * thread's connect to an unreachable old master, the store's close) can take
 * longer than the lease, and a lease lost there costs one more election.
 */
static struct {
	struct ctl_etcd *etcd;
	int64_t lease;
	uint64_t epoch;
	uint32_t period_ms;
	uint32_t limit_ms; /* a stop that hangs longer gives the group back to an election */
	pthread_t keeper;
	bool keeping;
	atomic_bool stop;
} handoff;

static void *
keeper_main(void *arg)
{
	uint64_t start = now_ms();
	uint64_t next = start + handoff.period_ms;

	(void)arg;
	while (!atomic_load(&handoff.stop)) {
		uint64_t now;
		int64_t ttl = 0;
		int err;

		sleep_ms(20);
		now = now_ms();
		if (now < next)
			continue;
		if (now - start >= handoff.limit_ms) {
			log_warn(HA_TAG,
				 "the restart to master of epoch %" PRIu64
				 " is still stopping after %" PRIu64
				 " ms: the lease is left to run out (the group elects again)",
				 handoff.epoch, now - start);
			break;
		}
		err = ctl_etcd_keepalive(handoff.etcd, handoff.lease, &ttl);
		if (err != 0 || ttl == 0)
			log_warn_ratelimited(
				HA_TAG,
				"keeping the lease of epoch %" PRIu64 " through the restart: %s",
				handoff.epoch, err ? strerror(-err) : "etcd says it expired");
		next = now_ms() + handoff.period_ms;
	}
	return NULL;
}

static void
keeper_stop(void)
{
	if (handoff.keeping) {
		atomic_store(&handoff.stop, true);
		pthread_join(handoff.keeper, NULL);
		handoff.keeping = false;
	}
}

void
bk_ha_handoff_drop(void)
{
	if (handoff.etcd == NULL)
		return;
	keeper_stop();
	/* no exec after all (it failed, or the stop did): free the group for an election now */
	(void)ctl_etcd_revoke(handoff.etcd, handoff.lease);
	log_warn(HA_TAG,
		 "the restart to master of epoch %" PRIu64 " did not happen: lease given up",
		 handoff.epoch);
	ctl_etcd_close(handoff.etcd);
	handoff.etcd = NULL;
}

void
bk_ha_exec_handoff(void)
{
	int64_t ttl = 0;
	char env[64];

	if (handoff.etcd == NULL)
		return;
	keeper_stop();
	/* renewed last thing before the exec: the new image renews it again at its set-up */
	if (ctl_etcd_keepalive(handoff.etcd, handoff.lease, &ttl) == 0 && ttl > 0) {
		snprintf(env, sizeof(env), "%" PRId64 ":%" PRIu64, handoff.lease, handoff.epoch);
		setenv(HA_ENV, env, 1);
	}
	ctl_etcd_close(handoff.etcd);
	handoff.etcd = NULL;
}

void
bk_ha_stop(struct bk_ctl *x)
{
	struct bk_ha *h = x->ha;

	if (h == NULL)
		return;
	atomic_store(&h->stop, true);
	if (h->running)
		pthread_join(h->th, NULL);
	h->running = false;
	if (h->handover && atomic_load(&x->bk.restart)) {
		/* the etcd client lives on until the exec (bk_ha_exec_handoff()) */
		handoff.etcd = h->etcd;
		handoff.lease = h->lease;
		handoff.epoch = h->last;
		handoff.period_ms = SP_MAX(h->lease_ms / 6, 100u);
		handoff.limit_ms = SP_MAX(3 * h->lease_ms, 10000u);
		h->etcd = NULL;
		atomic_store(&handoff.stop, false);
		handoff.keeping = pthread_create(&handoff.keeper, NULL, keeper_main, NULL) == 0;
	} else if (h->master && !atomic_load(&x->bk.restart)) {
		/* stopping for good: no write from here, and a slave takes over now */
		atomic_store(&x->bk.fenced, true);
		(void)ctl_etcd_revoke(h->etcd, h->lease);
		log_info(HA_TAG, "master of epoch %" PRIu64 " stopped: lease given up",
			 atomic_load_relaxed(&x->bk.epoch));
	} else if (!h->master && h->lease != 0) {
		(void)ctl_etcd_revoke(h->etcd, h->lease); /* the member record goes now */
	}
	ctl_etcd_close(h->etcd); /* NULL-safe */
	x->ha = NULL;
	free(h);
}

void
bk_ha_metrics(const struct bk_ctl *x, struct jbuf *b)
{
	const struct bk_ha *h = x->ha;
	uint64_t until;
	uint64_t now = clk_mono_ns();

	if (h == NULL)
		return;
	httpd_prom_family(b, "sprocket_ha_epoch", "gauge",
			  "failover: the group's epoch this broker is master of or follows");
	jbuf_lit(b, "sprocket_ha_epoch ");
	httpd_prom_u64(b, atomic_load_relaxed(&x->bk.epoch));
	jbuf_lit(b, "\n");
	httpd_prom_family(b, "sprocket_ha_master", "gauge",
			  "failover: 1 while this broker is its group's writable master");
	jbuf_lit(b, "sprocket_ha_master ");
	until = atomic_load_relaxed(&x->bk.write_until_ns);
	httpd_prom_u64(b, h->master && !atomic_load_relaxed(&x->bk.fenced) && now < until);
	jbuf_lit(b, "\n");
	httpd_prom_family(b, "sprocket_ha_lease_remaining_seconds", "gauge",
			  "failover: how long a master may still write without renewing its lease");
	jbuf_lit(b, "sprocket_ha_lease_remaining_seconds ");
	httpd_prom_seconds(b, h->master && now < until ? until - now : 0);
	jbuf_lit(b, "\n");
}
