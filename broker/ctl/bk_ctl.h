/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_ctl.h - the broker's control side (broker_main.c), shared with the
 * files that carry parts of it: bk_keys.c (the configuration keys),
 * bk_slave.c (what the control thread does for a slave), bk_delay_ctl.c
 * (delay levels: the schedule topic and delayOffset.json) and bk_timer_ctl.c
 * (delivery times: the timer topic, the timer thread, timercheck).
 *
 * Ownership: struct bk_ctl belongs to the control thread (docs/ownership.md).
 */
#ifndef SP_BROKER_BK_CTL_H
#define SP_BROKER_BK_CTL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bk_priv.h"
#include "control/httpd.h"
#include "common/acl.h"
#include "common/config.h"

#define BK_TAG "broker"

struct ctl_breg;
struct bk_rmt;
struct bk_follow;
struct bk_sync;
struct bk_timer;
struct httpd;

struct jbuf;

/* GET_BROKER_RUNTIME_INFO's figures (bk_admin_ctl.c). */
#define BK_ADMIN_SAMPLES 601 /* one a second: rates over 10 s, 1 min, 10 min */
struct bk_admin {
	int64_t boot_ms;
	int64_t today_ms; /* local midnight */
	uint64_t next_sample_ms;
	uint64_t next_refused_ms; /* bk_ctl_ns_refused_tick() */
	uint64_t at;		  /* samples taken */
	uint64_t in[BK_ADMIN_SAMPLES], out[BK_ADMIN_SAMPLES];
	uint64_t in_today, out_today, in_yesterday, out_yesterday; /* totals at midnight */
};

struct bk_ctl {
	struct bk bk;
	const struct cfg *cfg;
	char topics_path[PATH_MAX];
	char journal_path[PATH_MAX]; /* topics.json.journal (store/meta_journal.c) */
	size_t journal_bytes;	     /* its size: topics.json takes it in past about its own */
	char offsets_path[PATH_MAX];
	char delay_path[PATH_MAX]; /* delayOffset.json */
	char timer_path[PATH_MAX]; /* timercheck */
	char tx_path[PATH_MAX];	   /* transcheck */
	struct bk_timer *timer;	   /* NULL: timers off, or a slave */
	char *delay_synced;	   /* SLAVE: the master's delayOffset.json as last written */
	size_t delay_synced_len;
	struct dp_port *ports[BK_CORES_MAX];
	uint32_t nports; /* ncores, and on a dpdk slave one more per shard for bk_follow */
	bool cores_running;
	/* the registration snapshot: topics as registered, under mu (agent thread reads) */
	pthread_mutex_t mu;
	struct meta_topic *reg;
	size_t nreg;
	uint16_t **reg_cores;
	size_t reg_cap;
	/* reg's index by name: open addressing of reg positions + 1 (0 empty), under mu */
	uint32_t *reg_ix;
	uint32_t reg_ix_mask;
	bool save_deferred; /* starting: topics.json is saved once the system topics are made */
	bool save_due;	    /* a save was deferred */
	uint64_t dv_counter;
	int64_t dv_ts;
	struct ctl_breg *breg;
	struct bk_rmt *rmt;
	struct bk_follow *follow; /* SLAVE: the replication sessions */
	struct bk_sync *sync;	  /* SLAVE: topics and offsets from the master */
	bool master_fixed;	  /* haMasterAddress given: never from the NameServer */
	uint64_t follow_kick_ms;  /* last registration asked for to learn the master */
	uint64_t follow_poll_ms;  /* last look at the registration's answer */
	int cpus[BK_CORES_MAX];
	/* consumerOffset.json writer: its fsync must not stall the control thread's remoting */
	pthread_t persist;
	_Atomic bool persist_stop;
	struct bk_admin admin;
	/* subscription groups (bk_group_ctl.c): control thread only */
	struct bk_subgroup *groups;
	size_t ngroups;
	uint64_t gdv_counter;
	int64_t gdv_ts;
	char groups_path[PATH_MAX];
	bool groups_dirty;	 /* a group made by a heartbeat, not saved yet */
	uint64_t groups_save_ms; /* not before (ms, monotonic) */
	struct bk_stats *stats;	 /* bk_stats_ctl.c: control thread only */
	/* the ACL file (bk_acl_ctl.c): control thread only */
	struct acl_watch acl_watch;
	struct httpd *http;	     /* bk_http.c: /metrics, /health (NULL: off) */
	struct httpd_auth http_auth; /* bk_http.c: who may read which page; control thread */
	uint64_t http_hidden;	     /* messages /api/message left out (ACL); control thread */
	uint64_t disk_keep_ms;	     /* bk_disk_keep_tick(): next run */
	struct bk_ha *ha;	     /* bk_ha.c: failover through etcd (NULL: static roles) */
};

/*
 * A core's published transaction progress (seqlock): every half below @base
 * is resolved, every op unit below @op_base names such a half. Context:
 * control (bk_tx_ctl.c).
 */
void bk_tx_progress(const struct bk_tx *t, uint64_t *base, uint64_t *op_base, uint64_t *log);

/*
 * Every few seconds: what retention must keep for the consumer groups, the
 * delay levels and the unresolved transaction halves (bk_disk_ctl.c).
 */
void bk_disk_keep_tick(struct bk_ctl *x, uint64_t now_ms);

/* Once a second: a master a NameServer refuses write-protects itself (bk_admin_ctl.c). */
void bk_ctl_ns_refused_tick(struct bk_ctl *x, uint64_t now_ms);

/*
 * bk_tailback.c: a SYNC_MASTER (static roles) takes back from its slave what
 * the slave holds past its log. Context: control thread at start, before the
 * cores start; blocks up to haTailRecoverTimeout.
 */
void bk_tailback(struct bk_ctl *x);

/* aclEnable/aclFile (bk_acl_ctl.c): load at start (0, -errno logged), watch, free at stop. */
int bk_acl_start(struct bk_ctl *x);
void bk_acl_tick(struct bk_ctl *x, uint64_t now_ms);
void bk_acl_stop(struct bk_ctl *x);
/* At stop, before the cores and the remoting port go: refusals by reason, per core. */
void bk_acl_report(const struct bk_ctl *x);

/*
 * HTTP endpoints (bk_http.c): start after the broker is ready (0, or -errno
 * when an explicit httpPort cannot be had, logged); stop before the cores.
 * bk_metrics.c writes /metrics on the control thread.
 */
int bk_http_start(struct bk_ctl *x);
void bk_http_stop(struct bk_ctl *x);
void bk_metrics_render(struct bk_ctl *x, struct jbuf *b);
struct httpd_req;
/* /health's answer (bk_health.c): status 200 "ready ..." or 503 "not ready: why". */
void bk_http_health(struct bk_ctl *x, struct httpd_req *r);
/*
 * bk_committed_each() (bk_offsets_ctl.c) - call @fn for every committed consumer
 * offset (>= 0) whose topic and queue exist, from the core that owns the
 * queue (so each group, topic and queue once), skipping names with a NUL.
 * /metrics' consumer lag and /api/groups read them so. Context: control
 * thread. Return: 0, or the first non-zero @fn returned (the walk stops).
 */
int bk_committed_each(struct bk_ctl *x,
		      int (*fn)(void *arg, const struct bk_off *e, const struct bk_topic *t,
				int64_t offset),
		      void *arg);
/* consumer offsets (bk_offsets_ctl.c) */
/* Every committed offset of every core, malloc'd. Return: 0, -ENOMEM. */
struct meta_offset;
int bk_offsets_collect(struct bk_ctl *x, struct meta_offset **out, size_t *out_n);
/* Writes consumerOffset.json (x->offsets_path). Return: 0, -errno (logged). */
int bk_offsets_save(struct bk_ctl *x);
/* Loads consumerOffset.json into the cores' tables, at start. Return: 0, -errno (logged). */
int bk_offsets_load(struct bk_ctl *x);
/* The persist thread ("bk-persist") until x->persist_stop. */
void *bk_persist_main(void *arg);
/*
 * /api/message?topic=&key= | ?id= [&topic=] (bk_api_msg.c): status and body in
 * @r. @acc (ACL on): a message of a topic it may not SUB is left out; a topic
 * named that it may not SUB is 403.
 */
void bk_api_message(struct bk_ctl *x, struct httpd_req *r, const struct acl_account *acc);
/* /api/... (bk_api.c). Return: false when @r's path is not one of them. */
bool bk_api_render(struct bk_ctl *x, struct httpd_req *r, const struct acl_account *acc);

/* Every broker key (bk_keys.c). */
extern const struct cfg_key bk_keys[];
extern const size_t bk_nkeys;

/* Create or update a topic and its store queues; @persist: save topics.json (broker_main.c). */
int bk_ctl_topic_put(struct bk_ctl *x, const struct meta_topic *mt, bool persist);
/* Start-up: what @queues queues need against what the host has; -ENOMEM (logged): refuse. */
int bk_sizing_check(struct bk_ctl *x, uint64_t topics, uint64_t queues);
/* Start-up: saves stop being deferred; topics.json is written if a save was. Return: 0, -errno. */
int bk_ctl_topics_save_deferred(struct bk_ctl *x);
/* topics.json whole, the journal emptied, when the journal holds changes (a clean stop). */
int bk_ctl_topics_compact(struct bk_ctl *x);
/* A topic the broker writes itself, created (persisted) with @nq queues unless it has as many. Return: 0, -errno. */
int bk_ctl_topic_ensure(struct bk_ctl *x, const char *name, uint32_t nq,
			const struct bk_topic **out);

/*
 * bk_group_ctl.c: subscription groups. Setup loads subscriptionGroup.json and
 * publishes the cores' table (Return: 0, -errno, logged); put (replace or
 * add), put from a SubscriptionGroupConfig body, delete (-ENOENT): each
 * saves and republishes; a group's first heartbeat creates it with the
 * defaults; GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body (malloc'd); a slave
 * takes its master's table whole; everything freed at exit.
 */
int bk_group_setup(struct bk_ctl *x);
void bk_subgroup_default(struct bk_subgroup *g, const char *name);
const struct bk_subgroup *bk_ctl_group_get(struct bk_ctl *x, const char *name);
int bk_ctl_group_put(struct bk_ctl *x, const struct bk_subgroup *g);
int bk_ctl_group_put_json(struct bk_ctl *x, const char *body, size_t len, char *why,
			  size_t why_len);
int bk_ctl_group_delete(struct bk_ctl *x, const char *name);
void bk_ctl_group_seen(struct bk_ctl *x, const char *name);
int bk_ctl_groups_json(struct bk_ctl *x, char **out, size_t *len);
void bk_group_sync_apply(struct bk_ctl *x, const char *json, size_t len);
void bk_group_tick(struct bk_ctl *x, uint64_t now_ms);
void bk_group_fini(struct bk_ctl *x);

/*
 * bk_stats_ctl.c: per-topic put and per-group get counts, sampled every
 * minute (every loop, acts once a minute); VIEW_BROKER_STATS_DATA's
 * BrokerStatsData for TOPIC_PUT_NUMS/GROUP_GET_NUMS (Return: 0, -ENOENT
 * unknown name or key); a group's messages per second on a topic over the
 * last minute (ConsumeStats' consumeTps); freed at exit.
 */
struct bk_stats;
void bk_stats_tick(struct bk_ctl *x, uint64_t now_ms);
int bk_stats_data(struct bk_ctl *x, const char *name, const char *key, struct jbuf *b);
double bk_stats_group_tps(struct bk_ctl *x, const char *group, const char *topic);
void bk_stats_fini(struct bk_ctl *x);

/*
 * bk_topic_ctl.c: delete a topic: unpublished, its queues retired (files
 * deleted), topics.json and the registration updated (Return: 0, -ENOENT,
 * -errno); the topic table and registration snapshot freed at exit.
 */
int bk_ctl_topic_delete(struct bk_ctl *x, const char *name);
void bk_ctl_ttab_destroy(struct bk_ttab *t);
/* CLEAN_EXPIRED_CONSUMEQUEUE: retire store queues of topics that do not exist. Return: topics, -errno. */
long bk_ctl_clean_queues(struct bk_ctl *x);
void bk_ctl_reg_clear(struct bk_ctl *x);

/* bk_slave.c: brokerRole and brokerId; a slave's master, sync and exit report. */
int bk_ctl_role_setup(struct bk_ctl *x);
void bk_slave_sync_apply(struct bk_ctl *x);
void bk_slave_follow_poll(struct bk_ctl *x);
void bk_slave_report(const struct bk_ctl *x);

/*
 * bk_delay_ctl.c: messageDelayLevel into conf (Return: 0, -EINVAL, logged);
 * at start, after the topics, before the cores: SCHEDULE_TOPIC_XXXX with a
 * queue per level and core, delayOffset.json, each core's level queues
 * (Return: 0 or -errno, logged); delayOffset.json from the cores'
 * published progress; GET_ALL_DELAY_OFFSET's body (malloc'd).
 */
int bk_delay_conf(struct bk_ctl *x);
int bk_delay_setup(struct bk_ctl *x);
int bk_delay_save(struct bk_ctl *x);
int bk_delay_json(struct bk_ctl *x, char **json, size_t *len);

/*
 * bk_timer_ctl.c: timerWheelEnable and friends into conf; at start, after
 * the topics, before the cores: the timer topic (a queue per core), each
 * core's ring, and its wheel rebuilt from its queue and timercheck (Return:
 * 0 or -errno, logged); the timer thread started once the cores run and
 * stopped before they stop; timercheck from the cores' published marks;
 * counters at exit; everything freed.
 */
int bk_timer_conf(struct bk_ctl *x);
int bk_timer_setup(struct bk_ctl *x);
int bk_timer_start(struct bk_ctl *x);
void bk_timer_stop(struct bk_ctl *x);
int bk_timer_save(struct bk_ctl *x);
void bk_timer_report(const struct bk_ctl *x);
void bk_timer_fini(struct bk_ctl *x);

/*
 * bk_tx_ctl.c: the transaction keys into conf; at start, after the topics,
 * before the cores: the half and op topics (a queue per core), each core's
 * state rebuilt from them, transcheck and its log (Return: 0 or -errno,
 * logged); transcheck from the cores' published progress; counters at
 * exit; everything freed.
 */
/*
 * bk_logscan.c: @fn for every record of @shard's log from local offset
 * @from on, across segment ends, until it returns nonzero (Return: that,
 * 0 at the end, or a store error); a record's UNIQ_KEY hashed (0: none).
 * Context: start, before the cores run.
 */
int bk_log_scan(struct store *st, uint32_t shard, uint64_t from,
		int (*fn)(void *arg, const struct wire_msg *m), void *arg);
uint32_t bk_uniq_hash(const struct wire_msg *m);

int bk_tx_conf(struct bk_ctl *x);
int bk_tx_setup(struct bk_ctl *x);
int bk_tx_save(struct bk_ctl *x);
void bk_tx_report(const struct bk_ctl *x);
void bk_tx_fini(struct bk_ctl *x);

/*
 * bk_admin_ctl.c: brokerPermission (signals and UPDATE_BROKER_CONFIG, @by
 * names who, for the log); the configuration as properties text (malloc'd);
 * a run-time change from properties text (Return: 0; -EINVAL, -EPERM with
 * the reason in @why); the rate samples (every loop, acts once a second);
 * GET_BROKER_RUNTIME_INFO's KVTable.
 */
void bk_ctl_perm_set(struct bk_ctl *x, uint32_t perm, const char *by);
int bk_ctl_config_text(struct bk_ctl *x, char **out, size_t *len);
int bk_ctl_config_update(struct bk_ctl *x, const char *body, size_t len, const char *by, char *why,
			 size_t why_len);
void bk_ctl_admin_tick(struct bk_ctl *x, uint64_t now_ms);
int bk_ctl_runtime_info(struct bk_ctl *x, struct jbuf *b);

#endif /* SP_BROKER_BK_CTL_H */
