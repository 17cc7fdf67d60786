/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_priv.h - sprocket-broker's internal types: where the dataplane (per-core
 * request handlers) and the control side (topics, registration, offsets
 * persistence) meet. docs/broker.md has the design.
 *
 * Threads:
 *  - N dataplane cores (dp_lcore), core c owns store shard c and every queue
 *    whose owner (qid % N) is c; they run bk_core_handle() and bk_core_tick();
 *  - the control thread (main): signals, topic creation on request from the
 *    cores, topic table publication with RCU (urcu-qsbr), offsets persistence;
 *  - the registration agent (ctl_breg), the store's flusher/service/indexer.
 */
#ifndef SP_BROKER_BK_PRIV_H
#define SP_BROKER_BK_PRIV_H

#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/acl.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/phist.h"
#include "dp/lcore.h"
#include "dp/port.h"
#include "dp/xport.h"
#include "store/meta.h"
#include "store/store.h"
#include "wire/record.h"

#define BK_CORES_MAX 64
#define BK_PULL_TAGS_MAX 32
#define BK_PULL_MSGS_MAX 1024 /* records per PULL answer */
#define BK_SUSPEND_MAX_MS 60000u
#define BK_HELD_WAKE_RING 4096u /* queues a core tells of per control loop before held_all */
#define BK_HELD_ALL_NS (10 * 1000 * 1000ull) /* held_all at most this often */
#define BK_DLQ_PREFIX "%DLQ%"
#define BK_RETRY_PREFIX "%RETRY%"
#define BK_SCHED_TOPIC STORE_SCHED_TOPIC /* RocketMQ's delay-level queues */
#define BK_DELAY_LEVELS_MAX 64
#define BK_DELAY_SRC_PROP "__SP_SCHED_PHYS"  /* a delivered copy's schedule record */
#define BK_TIMER_TOPIC STORE_TIMER_TOPIC     /* delivery-time timers (bk_timer.c) */
#define BK_TIMER_SRC_PROP "__SP_TIMER_SRC"   /* a delivered or rolled copy's timer record */
#define BK_TIMER_RING 8192u		     /* timer thread -> core items */
#define BK_TX_HALF_TOPIC STORE_TX_HALF_TOPIC /* transactions' halves (bk_tx.c) */
#define BK_TX_OP_TOPIC STORE_TX_OP_TOPIC     /* and their resolutions */
#define BK_TX_HALF_PROP "__SP_TX_HALF"	     /* a committed copy's half record */
#define BK_TX_WINDOW (1u << 22)		     /* halves in doubt per core */
#define BK_TX_OPS_LATER 64u		     /* resolutions whose op record waits */
/* Room a delayed or timed record keeps in its properties for what its delivery or roll adds */
#define BK_PROPS_SLACK 48u

/*
 * A topic: immutable once published. The control thread makes a new one for
 * any change and frees the old one after a grace period.
 */
struct bk_topic {
	char name[META_TOPIC_MAX + 1];
	uint32_t name_len;
	uint32_t hash;
	uint32_t perm; /* META_PERM_* */
	uint32_t read_queues;
	uint32_t write_queues;
	uint32_t sys_flag;
	bool order;
	uint32_t nq;		 /* max(read, write) queues */
	struct store_queue **sq; /* nq queues; sq[i] lives in shard core[i] */
	uint16_t *core;		 /* owning core of queue i */
};

/* Published with rcu_assign_pointer; read by cores under QSBR. */
struct bk_ttab {
	uint32_t mask; /* open addressing, power of two slots */
	uint32_t n;
	struct bk_topic **slot;
};

/* A consumer offset slot in a core's table. Key written once, then `used` (release). */
struct bk_off {
	_Atomic uint32_t used; /* 0 empty, 1 key valid: pairs with acquire in bk_offsets_save() */
	uint32_t qid;
	uint32_t hash;
	uint16_t topic_len;
	uint16_t group_len;
	char topic[META_TOPIC_MAX + 1];
	char group[META_GROUP_MAX + 1];
	_Atomic int64_t offset; /* written by the owning core, read relaxed by control */
	/* PULLs of the group that found messages, and the messages (statsAll's GROUP_GET_NUMS) */
	_Atomic uint64_t pulls;
	_Atomic uint64_t pulled;
};

/* A SEND waiting for its flush (SYNC_FLUSH) or a slave (SYNC_MASTER). FIFO per core: tickets grow. */
struct bk_ack {
	struct dp_xhandle h;
	uint64_t ticket;
	bool wait_slave;   /* SYNC_MASTER with a slave in sync: also wait for its ack */
	int32_t ok_status; /* the answer once durable: SUCCESS, or SLAVE_NOT_AVAILABLE */
	uint64_t put_ns;
	uint64_t recv_ns;
	uint64_t handled_ns;
	int64_t phys;
	int64_t qoff;
	int32_t qid;
	const struct store_queue *sq; /* where it went: its parked pulls may answer */
	uint16_t op;
	uint32_t count;	      /* SEND_BATCH: records, phys offsets in batch_phys */
	uint32_t batch_first; /* index into the core's batch offset pool */
};

/* A parked PULL (long polling). */
struct bk_park {
	bool used;
	struct dp_xhandle h;
	uint64_t recv_ns;
	uint64_t deadline_ns;
	const struct store_queue *sq; /* store queues live as long as the store */
	int64_t offset;
	int32_t qid;
	int32_t max_msgs;
	uint32_t max_bytes;
	uint16_t tag_count; /* 0: no filter */
	int32_t tags[BK_PULL_TAGS_MAX];
	struct bk_off *off; /* the group's slot for this queue (counts), or NULL */
};

/*
 * A slave following this core's shard (bk_repl.c): one slot per
 * replication session. Owner: the core.
 */
#define BK_REPL_SLAVES 4
struct bk_repl_slave {
	bool used;
	bool parked;  /* h waits for bytes past offset until deadline_ns */
	bool in_sync; /* its last request's log matched ours: acked is real */
	uint32_t session_id;
	struct dp_addr peer;
	uint64_t acked;	  /* the slave holds every byte below this */
	uint64_t flushed; /* ... and has synced every byte below this */
	uint64_t last_ns; /* its last request */
	struct dp_xhandle h;
	uint64_t recv_ns;
	uint64_t deadline_ns;
	uint64_t offset;
	uint32_t max_bytes;
	uint64_t new_ns; /* ASYNC_MASTER: bytes past offset first seen (0: none) */
};

struct bk;

/*
 * A request that came in over TCP (RocketMQ remoting, bk_rmt.c). The
 * control thread fills it and posts it on the owning core's command ring;
 * the core runs it through the same handlers as a dataplane request (the
 * handle's session_id is BK_RMT_SESSION, req_id points here), writes the
 * answer into resp and posts it on its completion ring. Between post and
 * completion the core owns it; control never touches it.
 */
#define BK_RMT_SESSION UINT32_MAX

enum bk_rop {
	/* internal ops (not on the dataplane wire) */
	BK_ROP_EARLIEST = 100, /* store time of sq's first message -> value */
	BK_ROP_GATHER = 101,   /* the records at phys[nphys_done..nphys) -> resp */
	/* req: an UPDATE_OFFSET request; raise the committed offset to its value, never lower */
	BK_ROP_OFFSET_RAISE = 102,
	/* req: struct bk_tx_end_req; value: enum bk_tx_end_res */
	BK_ROP_END_TX = 103,
	/* resp: struct bk_tx_check_item + record, ...; value 1: more to come */
	BK_ROP_TX_CHECK = 104,
	/* resp: struct bk_qstat[resp_len / sizeof]; control fills sq, the core the rest */
	BK_ROP_QSTAT = 105,
	/* req: 'T' + topic or 'G' + group (req_len bytes): forget every consumer offset of it
	 * in slots [value, value + BK_OFF_DROP_SPAN) */
	BK_ROP_OFFSET_DROP = 106,
};

#define BK_OFF_DROP_SPAN 4096u /* offset slots one BK_ROP_OFFSET_DROP looks at */
#define BK_QSTAT_ROWS 16u      /* queues one BK_ROP_QSTAT reads (bounds a core's pause) */

/* One queue's figures for the admin requests (BK_ROP_QSTAT). */
struct bk_qstat {
	const struct store_queue *sq; /* control */
	uint32_t idx;		      /* control: the caller's row */
	uint64_t min, max;	      /* ConsumeQueue offsets */
	int64_t last_ms;	      /* store time of the last message, 0 when empty */
	uint64_t at_time; /* first offset stored at or after cmd->value ms (value >= 0) */
	uint64_t probe;	  /* control: an offset whose store time it wants, or UINT64_MAX */
	int64_t probe_ms; /* its store time, 0 when not in the queue */
};

struct bk_rcmd {
	/* control writes before posting */
	uint16_t op; /* WIRE_DP_OP_* (req holds the dataplane request) or BK_ROP_* */
	uint16_t core;
	uint32_t serial; /* unique among commands in flight: the handle's seq */
	uint64_t recv_ns;
	struct dp_addr peer;
	const uint8_t *req;
	uint32_t req_len;
	uint8_t *resp;
	uint32_t resp_cap;
	const struct store_queue *sq; /* BK_ROP_EARLIEST */
	const char *
		ak; /* the remoting request's account (NULL: none needed): SEND_BACK and END_TRANSACTION check what they read with it */
	int64_t *phys; /* BK_ROP_GATHER */
	uint32_t nphys;
	/* the core writes */
	uint32_t nphys_done; /* BK_ROP_GATHER: control zeroes it once */
	uint32_t found;	     /* BK_ROP_GATHER: records copied */
	uint32_t resp_len;   /* kept across a BK_ROP_GATHER re-run */
	uint32_t need;	     /* resp was too small: run again with this many bytes */
	int32_t status;	     /* BK_ROP_*: WIRE_DP_ST_* */
	int64_t value;	     /* BK_ROP_EARLIEST */
	/*
	 * A long-polling PULL the core does not park (@no_park, set by control
	 * before posting; or its park table is full): when it finds nothing, the
	 * core answers PULL_NOT_FOUND, marks the queue (store_queue_wait()) and
	 * sets @held: the remoting thread holds the pull until the core says the
	 * queue grew (bk_core's held wake ring) or its deadline passes.
	 */
	bool no_park;
	bool held;
	bool again; /* control: a held pull posted again (its commit is old) */
	const struct store_queue *held_sq; /* the core: the queue it marked */
	/* control writes after posting: the connection closed, a parked pull answers now */
	_Atomic bool cancelled;
};

/* Command from a core to control: create a topic (auto-creation). */
struct bk_create_req {
	char name[META_TOPIC_MAX + 1];
	uint32_t queues;
};

/*
 * A core's counters: written by the core alone, read by control with
 * __atomic_load_n(relaxed) (runtime info; aligned 64-bit words).
 */
/* Why the ACL refused a request (bk_rmt_acl.c, and the cores' CONNECT check). */
enum bk_acl_reason {
	BK_ACL_NO_KEY,
	BK_ACL_UNKNOWN_KEY,
	BK_ACL_BAD_SIG,
	BK_ACL_NOT_ADMIN,
	BK_ACL_NO_PERM,
	BK_ACL_REASONS,
};

/* "no_access_key", "bad_signature"... for logs and stats. */
const char *bk_acl_reason_name(unsigned reason);

/* Why a core answered SYSTEM_BUSY (bk_core_busy(); the stop log and runtime info say each). */
enum bk_busy_why {
	BK_BUSY_OTHER,
	BK_BUSY_STORE,	      /* the store's next file or write-behind window not ready */
	BK_BUSY_INFLIGHT,     /* the pending acknowledgements ring is full */
	BK_BUSY_ANSWER_BUF,   /* no buffer free for a big answer */
	BK_BUSY_TOPIC_CREATE, /* the topic is being created (auto-create) */
	BK_BUSY_OFFSETS,      /* the offset table is full */
	BK_BUSY_TX_WINDOW,    /* too many transactional halves in doubt */
	BK_BUSY_REPL,	      /* a replication slot or answer buffer */
	BK_BUSY_WHYS
};

/* Latency histograms a core records on its hot path (bk_core.c), exported by /metrics. */
enum bk_lat {
	BK_LAT_REQ_DP,	/* a transport request: received -> handled (answered or parked) */
	BK_LAT_REQ_RMT, /* a remoting request on this core: received by control -> handled */
	BK_LAT_APPEND,	/* the store's append of one SEND or SEND_BATCH */
	BK_LAT_DURABLE, /* SYNC_FLUSH / SYNC_MASTER: appended -> answered (flushed, slave acked) */
	BK_LAT_WAKE,	/* a parked PULL: the append that woke it -> its answer */
	BK_LATS
};

/* Error answers by operation and status (sprocket_core_errors_total{op,status}, bk_metrics.c). */
enum bk_err_op { BK_ERR_SEND, BK_ERR_SEND_BATCH, BK_ERR_PULL, BK_ERR_OTHER_OP, BK_ERR_OPS };

#define BK_ERR_STATUSES 16 /* the statuses err_status() (bk_core.c) names, and 0: any other */

struct bk_core_stats {
	uint64_t msgs_in;   /* messages stored by SEND and SEND_BATCH */
	uint64_t msgs_out;  /* messages in PULL answers */
	uint64_t bytes_in;  /* CommitLog record bytes of those stored */
	uint64_t bytes_out; /* record bytes in PULL answers */
	uint64_t sends;
	uint64_t send_batches;
	uint64_t pulls;
	uint64_t parked;
	uint64_t held; /* PULLs handed to the remoting thread to hold (bk_rcmd.held) */
	uint64_t redirects;
	uint64_t busy;
	uint64_t busy_by[BK_BUSY_WHYS]; /* busy by reason (enum bk_busy_why) */
	uint64_t errors;
	uint64_t err_by[BK_ERR_OPS]
		       [BK_ERR_STATUSES]; /* errors by err_op(), err_status() (bk_core.c) */
	uint64_t flush_timeouts;
	uint64_t gone;		 /* answers whose request had gone */
	uint64_t slave_timeouts; /* SYNC_MASTER: FLUSH_SLAVE_TIMEOUT answers */
	uint64_t slave_missing;	 /* SYNC_MASTER: SLAVE_NOT_AVAILABLE answers */
	uint64_t repl_requests;	 /* REPL requests from slaves */
	uint64_t repl_bytes;	 /* log bytes sent to slaves */
	uint64_t write_refused;	 /* SENDs refused: a slave, or a master without its lease */
	uint64_t repl_fenced;	 /* REPLs of a later epoch: this master was replaced */
	uint64_t repl_recover;	 /* on a slave: its master taking back a lost tail */
	uint64_t type_refused;	 /* SENDs of a type not taken yet (bk_msgtype.h) */
	uint64_t delayed;	 /* messages put into SCHEDULE_TOPIC_XXXX */
	uint64_t delay_delivered;
	uint64_t delay_dropped; /* due, but no REAL_TOPIC/REAL_QID this core can write */
	uint64_t timed;		/* messages put into the timer topic */
	uint64_t timer_delivered;
	uint64_t timer_rolled;	/* written again (the log keeps them: timer_roll_ms) */
	uint64_t timer_dropped; /* due, but unreadable or no REAL_TOPIC/REAL_QID here */
	uint64_t tx_halves;	/* transactional halves stored */
	uint64_t tx_commits;
	uint64_t tx_rollbacks;
	uint64_t tx_again;     /* END_TRANSACTION for a half already resolved: nothing done */
	uint64_t tx_checks;    /* check-backs handed to the remoting port */
	uint64_t tx_discarded; /* unresolved after transactionCheckMax checks */
	uint64_t acl_denied[BK_ACL_REASONS]; /* dataplane requests the ACL refused (bk_acl.c) */
	struct phist lat[BK_LATS];
};

/*
 * A core's transactions (bk_tx.c, bk_tx_ctl.c): its queues of the half and
 * op topics and the state of every half from base up: bit 0 resolved
 * (committed, rolled back or discarded), bits 1-7 check-backs sent. The
 * core owns all of it; the control side reads only the published progress
 * (seqlock), which transcheck saves.
 */
struct bk_tx {
	struct store_queue *hq, *oq;
	uint8_t *st;	  /* BK_TX_WINDOW, indexed by half offset % BK_TX_WINDOW */
	uint64_t base;	  /* every half below is resolved */
	uint64_t op_base; /* every op unit below names a half below base */
	uint64_t scan;	  /* the check pass's next half; 0: no pass running */
	int64_t next_pass_ms;
	uint64_t last_ticket;		 /* of the last commit or op append */
	uint64_t next_pub_ns;		 /* progress is taken at least this often */
	uint64_t later[BK_TX_OPS_LATER]; /* resolved halves whose op record is not written yet */
	uint32_t nlater;
	bool pending; /* progress waits for pend_ticket */
	uint64_t pend_ticket, pend_base, pend_op_base, pend_log;
	alignas(64) _Atomic uint32_t seq;
	_Atomic uint64_t pub_base, pub_op_base, pub_log;
};

/* BK_ROP_END_TX's request (RocketMQ's END_TRANSACTION header, checked by control). */
struct bk_tx_end_req {
	int64_t phys;  /* commitLogOffset */
	uint64_t qoff; /* tranStateTableOffset */
	int32_t kind;  /* WIRE_SYSFLAG_TX_COMMIT or _ROLLBACK */
	char group[META_GROUP_MAX + 1];
};

/* How END_TRANSACTION ended (bk_rcmd.value), for RocketMQ's remarks. */
enum bk_tx_end_res {
	BK_TX_END_OK,
	BK_TX_END_NOT_FOUND,   /* "Find prepared transaction message failed" */
	BK_TX_END_GROUP_WRONG, /* "The producer group wrong" */
	BK_TX_END_QOFF_WRONG,  /* "The transaction state table offset wrong" */
	BK_TX_END_BUSY,	       /* the store took nothing now: the check-back will ask again */
	BK_TX_END_NO_TOPIC,    /* the half's REAL_TOPIC/REAL_QID is not writable here */
	BK_TX_END_FENCED,      /* not the writable master (failover): the next master asks */
	BK_TX_END_NO_PERM,     /* the account may not publish to the half's real topic */
};

/* One item of a BK_ROP_TX_CHECK answer, followed by its half record. */
struct bk_tx_check_item {
	uint32_t len;	 /* the record's */
	uint8_t discard; /* 1: past transactionCheckMax, resolved as discarded */
	uint8_t checks;	 /* check-backs sent for it, this one included */
	uint16_t rsv;
	uint64_t qoff;
	int64_t phys;
};

/* What the timer thread hands a core: a due timer record, or a mark. */
struct bk_timer_item {
	int64_t phys; /* BK_TIMER_ITEM_FIRE: the record; MARK: -1 */
	int64_t w;    /* FIRE: its fire time; MARK: every unit fired below it ... */
	uint64_t e;   /* MARK: ... among the units below this queue offset */
	uint32_t size;
	uint32_t rsv;
};

/*
 * A core's delivery-time timers (bk_timer.c, bk_timer_ctl.c): its queue of
 * BK_TIMER_TOPIC, the ring the timer thread feeds (single producer, single
 * consumer, the pattern of common/ring.h over items), and the durable
 * progress the core publishes (seqlock: the core writes, control reads).
 */
struct bk_timer_q {
	struct store_queue *sq;
	struct bk_timer_item *items;	   /* BK_TIMER_RING */
	alignas(64) _Atomic uint32_t head; /* producer */
	uint32_t prod_tail_cache;
	alignas(64) _Atomic uint32_t tail; /* consumer */
	uint32_t cons_head_cache;
	/* core only */
	alignas(64) uint64_t last_ticket; /* of the last timer append */
	bool pending;			  /* a mark waits for pend_ticket */
	bool has_next;			  /* and a newer one behind it */
	uint64_t pend_ticket, next_ticket;
	int64_t pend_w, next_w;
	uint64_t pend_e, pend_log, next_e, next_log;
	/* published */
	alignas(64) _Atomic uint32_t seq; /* odd while being written */
	_Atomic int64_t done_w;		  /* -1: none yet */
	_Atomic uint64_t done_e, done_log;
};

/*
 * A delay level's SCHEDULE_TOPIC_XXXX queue on one core (bk_delay.c): queue
 * (level - 1) * cores + core, so the core that took the message owns it.
 */
struct bk_delay_q {
	struct store_queue *sq;
	uint64_t off;	   /* the next unit to deliver */
	int64_t due_ms;	   /* its due time once read, else 0 */
	uint64_t pend_off; /* progress to publish once pend_ticket is durable */
	uint64_t pend_ticket;
	bool pending;
	_Atomic uint64_t pub_off; /* durable progress (owner writes; control saves it) */
};

struct bk_core {
	unsigned id;
	uint8_t busy_why; /* enum bk_busy_why of the next SYSTEM_BUSY answer */
	struct bk *bk;
	struct dp_port *port;
	struct dp_xsrv *xs;
	struct dp_lcore lc;
	uint64_t now_ns;
	/* pending acks (SYNC_FLUSH): ring */
	struct bk_ack *acks;
	uint32_t ack_cap, ack_head, ack_tail;
	int64_t *batch_phys; /* ring of per-record phys offsets for pending SEND_BATCHes */
	uint32_t bp_cap, bp_head, bp_tail;
	/* parked pulls */
	struct bk_park *parks;
	uint32_t park_cap, park_n;
	uint64_t park_next_deadline;
	bool park_dirty; /* data may have become visible since the last scan */
	/*
	 * ... in these queues alone (bk_core_park_touch()); park_dirty_all: in
	 * any (too many queues, replication, a cancelled pull). A scan then runs
	 * only the parked pulls of those queues: an append costs a pointer
	 * compare per parked pull of other queues, not a pull each.
	 */
	bool park_dirty_all;
	const struct store_queue **park_sq; /* parks[i].sq while parks[i] is used, else NULL */
	uint32_t park_hi;		    /* no park at or past this index */
	uint8_t park_ndirty;
	const struct store_queue *park_dirty_q[8];
	uint64_t park_touch_ns; /* the first append since the last scan, while pulls are parked */
	/* consumer offsets: open addressing, never shrinks */
	struct bk_off *offs;
	uint32_t off_mask;
	uint32_t off_n;
	/*
	 * Auto-creation mailbox, core -> control: the core fills create_req and
	 * sets create_full (release, pairs with the acquire in the control
	 * thread's bk_ctl_poll_creates()), then pokes bk->efd; control creates
	 * the topic, publishes it, and clears create_full (release, pairs with
	 * the core's acquire before it writes the next request).
	 */
	_Atomic uint32_t create_full;
	struct bk_create_req create_req;
	char props[WIRE_PROPS_MAX + 1];	 /* SEND_BACK, delivery: the rebuilt properties */
	char dprops[WIRE_PROPS_MAX + 1]; /* a delayed message's (bk_delay_wrap()) */
	bool rmt_posted;		 /* completions posted since the last wake-up check */
	/*
	 * Held pulls (bk_rcmd.held): the queues touched since the last tick
	 * (bk_core_park_touch()), and the ring the tick tells the remoting
	 * thread on, core -> control, of those marked store_queue_wait(). A
	 * full ring or list, or growth the core cannot place (a slave's
	 * replication), sets held_all instead: every held pull of this core
	 * is tried again.
	 */
	uint8_t held_n;
	bool held_touch_all;
	uint32_t held_marks;  /* queues marked now */
	uint64_t held_all_ns; /* when held_all was last set (at most every BK_HELD_ALL_NS) */
	const struct store_queue *held_q[32];
	struct ring *held_wake;
	_Atomic uint32_t held_all;
	_Atomic uint32_t rmt_kick; /* control: look at the parked pulls (some were cancelled) */
	uint32_t rmt_gone;	   /* serial of the command just sent back for a bigger buffer */
	/* replication, master side (bk_repl.c): owner only */
	struct bk_repl_slave repl[BK_REPL_SLAVES];
	uint64_t repl_acked; /* highest offset a slave acknowledged (never goes back) */
	uint64_t
		repl_base_end; /* the shard's end when the broker started (set before the core runs) */
	unsigned repl_parked;
	uint64_t slave_seen; /* SLAVE: the shard's end at the last tick (replication appends) */
	/* owner writes, stats read relaxed */
	_Atomic uint64_t repl_acked_pub;
	/* delay levels (bk_delay.c): conf.delay_levels queues, NULL on a slave */
	struct bk_delay_q *dq;
	/* delivery-time timers (bk_timer.c): NULL when off and on a slave */
	struct bk_timer_q *tq;
	/* transactions (bk_tx.c): NULL on a slave */
	struct bk_tx *tx;
	uint64_t delay_next_ns; /* the next look at the queues' heads */
	/* PULL: the records chosen by the first pass, copied by the second */
	const uint8_t *pull_rec[BK_PULL_MSGS_MAX];
	uint32_t pull_len[BK_PULL_MSGS_MAX];
	alignas(64) struct bk_core_stats st;
};

enum bk_role {
	BK_ROLE_ASYNC_MASTER = 0,
	BK_ROLE_SYNC_MASTER = 1,
	BK_ROLE_SLAVE = 2,
};

struct bk_conf {
	const char *access_key; /* accessKey/secretKey: a slave's replication sessions sign in */
	const char *secret_key;
	const char *cluster;
	const char *broker_name;
	int64_t broker_id;
	enum bk_role role;
	bool sync_flush;	   /* flushDiskType=SYNC_FLUSH */
	uint64_t seg_size;	   /* mapedFileSizeCommitLog: slaves must match */
	uint32_t slave_timeout_ms; /* SYNC_MASTER: FLUSH_SLAVE_TIMEOUT after (syncFlushTimeout) */
	uint64_t ha_max_gap;	   /* haMaxGapNotInSync: a slave further behind is not in sync */
	bool auto_create;
	uint32_t default_queues;
	uint32_t max_msg_size;
	uint32_t max_reconsume;
	uint32_t cores;
	uint16_t dp_port;
	uint32_t dp_ip; /* dataplaneIp, network order (set when the ports open) */
	uint32_t pending_acks;
	uint32_t parked_pulls;
	uint32_t offset_slots;
	uint32_t delay_levels;			    /* messageDelayLevel: how many */
	uint64_t delay_ms[BK_DELAY_LEVELS_MAX + 1]; /* [level], level 1 .. delay_levels */
	bool timers;				    /* timerWheelEnable */
	bool tx_reject;				    /* rejectTransactionMessage */
	uint64_t tx_timeout_ms;			    /* transactionTimeOut */
	uint32_t tx_check_max;			    /* transactionCheckMax */
	uint64_t tx_check_ms;			    /* transactionCheckInterval */
	uint64_t timer_max_ms;			    /* timerMaxDelaySec, in ms */
	uint64_t timer_roll_ms; /* a timer record is written again this often until due */
};

struct acl;

struct bk {
	struct bk_conf conf;
	bool acl_on; /* aclEnable: every transport session and request is checked */
	/* RCU: aclEnable's accounts (common/acl.h); NULL: ACL off. bk_acl_ctl.c publishes. */
	struct acl *acl;
	struct store *store;
	struct bk_ttab *ttab;  /* RCU */
	struct bk_gtab *gtab;  /* RCU: subscription group settings the cores apply; NULL none */
	_Atomic uint32_t perm; /* brokerPermission: writable/readable */
	/* a NameServer refused our registration (a second master holds the route): SENDs are
	 * refused NO_PERMISSION until one is accepted again; control thread writes (bk_admin_ctl.c) */
	_Atomic uint32_t ns_refused;
	char ns_refused_why[256]; /* why, for remarks and /health; control thread only */
	uint32_t ncores;
	struct bk_core *cores;
	int efd; /* eventfd: a core asks the control thread for work */
	/* a slave's replication asks for a restart (its log is cut at the next start) */
	_Atomic bool restart;
	/*
	 * Failover (bk_ha.c, docs/failover.md). @epoch: the group's epoch this
	 * broker is master of, or follows as a slave (0: static roles; the HA
	 * thread writes, cores and the follow sessions read). A master takes
	 * writes only before @write_until_ns (CLOCK_MONOTONIC; its lease's
	 * end less a margin, renewed by the HA thread; UINT64_MAX with static
	 * roles) and while not @fenced (set once by a core that met a higher
	 * epoch or by the HA thread stepping down; never cleared).
	 */
	_Atomic uint64_t epoch;
	_Atomic uint64_t write_until_ns;
	_Atomic bool fenced;
	/* control is (about to be) waiting: a core that posted a completion pokes efd */
	alignas(64) _Atomic bool ctl_sleeping;
	struct wire_host store_host;
};

/*
 * A topic only the broker itself writes (SCHEDULE_TOPIC_XXXX, the timer
 * topic, the transaction half and op topics): a SEND to it, or a scheduled record naming it as REAL_TOPIC, would
 * be delivered later by an internal put that skips every permission.
 */
static inline bool
bk_topic_broker_only(const struct bk_topic *t)
{
	return (t->name_len == sizeof(BK_SCHED_TOPIC) - 1 &&
		memcmp(t->name, BK_SCHED_TOPIC, t->name_len) == 0) ||
	       (t->name_len == sizeof(BK_TIMER_TOPIC) - 1 &&
		memcmp(t->name, BK_TIMER_TOPIC, t->name_len) == 0) ||
	       (t->name_len == sizeof(STORE_TX_HALF_TOPIC) - 1 &&
		memcmp(t->name, STORE_TX_HALF_TOPIC, t->name_len) == 0) ||
	       (t->name_len == sizeof(STORE_TX_OP_TOPIC) - 1 &&
		memcmp(t->name, STORE_TX_OP_TOPIC, t->name_len) == 0);
}

/*
 * A subscription group's settings the cores apply (RocketMQ's
 * SubscriptionGroupConfig; the control thread keeps the whole config,
 * bk_group_ctl.c). Published as one immutable table with rcu_assign_pointer.
 */
struct bk_group {
	char name[META_GROUP_MAX + 1];
	uint32_t name_len;
	uint32_t hash;
	bool consume_enable; /* false: PULLs answer NO_PERMISSION */
	uint32_t
		retry_max; /* retryMaxTimes: SEND_BACK to the DLQ past it (unless the request says) */
};

struct bk_gtab {
	uint32_t mask; /* open addressing, power of two slots */
	uint32_t n;
	struct bk_group *slot; /* name_len 0: empty */
};

/* Core side: @name's settings, or NULL (defaults). Caller is an RCU reader. */
const struct bk_group *bk_group_find(const struct bk *bk, const char *name, size_t len);
/* Control side: a table of @n groups (copied). Return: 0, -ENOMEM. */
MUST_CHECK int bk_gtab_build(const struct bk_group *g, size_t n, struct bk_gtab **out);
void bk_gtab_free(struct bk_gtab *t);

/* ---- topic table (bk_topics.c) ---- */
/* A RocketMQ system topic (TBW102, SCHEDULE_TOPIC_XXXX, RMQ_SYS_*, ...): the broker's own. */
bool bk_topic_is_system(const char *name);
uint32_t bk_name_hash(const char *s, size_t len);
/* Core side: the topic @name, or NULL. Caller is an RCU reader (QSBR online). */
const struct bk_topic *bk_topic_find(const struct bk *bk, const char *name, size_t len);
/*
 * Control side: put @t into the published table *@tabp, in place (replacing
 * its namesake, returned in *@old) or in a larger table published in its
 * stead (the old one in *@old_tab). Free both after a grace period.
 * Return: 0, -ENOMEM (nothing changed).
 */
MUST_CHECK int bk_ttab_put(struct bk_ttab **tabp, struct bk_topic *t, struct bk_ttab **old_tab,
			   struct bk_topic **old);
/* Control side: the next table without @name; the topic removed (or NULL) in *@old. */
MUST_CHECK int bk_ttab_without(const struct bk_ttab *cur, const char *name, size_t len,
			       struct bk_ttab **out, struct bk_topic **old);
void bk_ttab_free(struct bk_ttab *tab);
/* Valid topic name: ^[%|a-zA-Z0-9_-]{1,127}$ as RocketMQ's TopicValidator. */
bool bk_topic_name_ok(const char *s, size_t len);

/* ---- dataplane core (bk_core.c) ---- */
MUST_CHECK int bk_core_init(struct bk *bk, struct bk_core *c, unsigned id);
void bk_core_fini(struct bk_core *c);
void bk_core_handle(struct dp_xsrv *s, const struct dp_xreq *req, void *arg);
/* dp_lcore on_cmd: runs a struct bk_rcmd from the control thread. */
void bk_core_cmd(struct dp_lcore *lc, void *cmd, void *arg);
/* The next SYSTEM_BUSY answer's reason (bk_core_answer_err() counts it, then forgets it). */
/* Count @ns in the core's histogram @k (single writer: the core). */
static inline void
bk_lat_record(struct bk_core *c, enum bk_lat k, uint64_t ns)
{
	phist_record(&c->st.lat[k], ns);
}

static inline void
bk_core_busy_why(struct bk_core *c, enum bk_busy_why why)
{
	c->busy_why = why;
}
/* Names of enum bk_busy_why, for logs and runtime info. */
extern const char *const bk_busy_names[BK_BUSY_WHYS];
unsigned bk_core_tick(struct dp_lcore *lc, uint64_t now_ns, void *arg);
/*
 * The committed offset of (@topic, @group, @qid) on core @c, or -1.
 * Context: any thread (reads the core's table with acquire; never writes).
 */
int64_t bk_core_offset_peek(const struct bk_core *c, const char *topic, const char *group,
			    uint32_t qid);
/* Answering, for the other request families' files (bk_repl.c). Context: the core. */
uint8_t *bk_core_ans_buf(struct bk_core *c, struct dp_xhandle h, uint32_t len);
bool bk_core_ans_pending(struct bk_core *c, struct dp_xhandle h);
/* @sq got data: its parked pulls run at the next scan (the others stay put). Context: core. */
void bk_core_park_touch(struct bk_core *c, const struct store_queue *sq);
void bk_core_respond(struct bk_core *c, struct dp_xhandle h, uint32_t len);
/* aclEnable on the dataplane (bk_acl.c): the transport's key function (@arg: struct bk), and
 * the per-request check of an authenticated session (answers NO_PERMISSION itself). */
const struct hmac_sha1 *bk_acl_key(void *arg, const char *ak, size_t len);
bool bk_acl_refuses(struct bk_core *c, const struct dp_xreq *req);
/*
 * bk_acl_msg_readable() - may @acc SUB the message @m: its own topic, and the
 * topics it carries (REAL_TOPIC of a half, delayed or timed message,
 * RETRY_TOPIC of a retry or a dead letter)? Pure: any thread.
 */
bool bk_acl_msg_readable(const struct acl_account *acc, const struct wire_msg *m);
/*
 * bk_acl_may_read() - on a core: may the account of @req (a dataplane session's,
 * or the remoting request's a command carries) read @m? True when the ACL is
 * off or the request needed no account (a white-listed source).
 */
bool bk_acl_may_read(struct bk_core *c, const struct dp_xreq *req, const struct wire_msg *m);

int bk_core_answer_err(struct bk_core *c, struct dp_xhandle h, uint16_t op, uint64_t recv_ns,
		       int32_t status, int redirect);

/*
 * The topic for a write to @name, or NULL with *@status set: unknown (auto
 * creation requested: SYSTEM_BUSY, else TOPIC_NOT_EXIST), not writable.
 * Context: the core.
 */
const struct bk_topic *bk_core_topic_for_write(struct bk_core *c, const char *name, size_t len,
					       bool force_create, uint32_t queues, int32_t *status);

/* The message types (bk_msgtype.h BK_MSG_*) a single SEND may ask of core @c. */
unsigned bk_core_msg_allow(const struct bk_core *c);

/*
 * A client's write may be taken on core @c: a master that is not fenced and
 * whose lease (failover, bk_ha.c) holds now (the TSC clock: a few ns).
 */
static inline bool
bk_core_writable(const struct bk_core *c)
{
	const struct bk *bk = c->bk;

	return bk->conf.role != BK_ROLE_SLAVE && !atomic_load_relaxed(&bk->fenced) &&
	       (atomic_load_relaxed(&bk->write_until_ns) == UINT64_MAX ||
		clk_mono_fast_ns() < atomic_load_relaxed(&bk->write_until_ns));
}

/* ---- delay levels (bk_delay.c) ---- */
/* The level a message's DELAY asks for, clamped to the table (RocketMQ), or 0. */
uint32_t bk_delay_level(const struct bk *bk, const char *props, size_t plen);
/*
 * Core: turn @m (bound for @real queue @rqid) into its SCHEDULE_TOPIC_XXXX
 * record for @level: properties rebuilt in c->dprops. Return: the schedule
 * queue, or NULL (no schedule queue here: a slave; or properties too long,
 * *@status says which).
 */
struct store_queue *bk_delay_wrap(struct bk_core *c, struct wire_msg *m, uint32_t level,
				  int32_t *status);
/* A schedule record's REAL_TOPIC and REAL_QID. Return: false when it names none. */
bool bk_delay_target(const struct wire_msg *s, const char **topic, size_t *len, uint32_t *qid);
/* Core: deliver what is due. Return: work done. */
unsigned bk_delay_tick(struct bk_core *c, uint64_t now_ns);
/*
 * Core: is the append with @ticket durable enough to record progress past
 * it (delayOffset.json, timercheck): as the flush mode requires, and past a
 * crash of the process (written back when the write-behind buffer is not a
 * file)?
 */
bool bk_progress_durable(const struct bk_core *c, uint64_t ticket);
/*
 * Core: @m's properties rebuilt into c->dprops for a record the broker
 * keeps to act on later (a delay level's, a timer's, a half): @m's own but
 * @skip, then @keys = @vals (numbers; NULL-terminated keys, may be NULL),
 * REAL_TOPIC and REAL_QID (@m's topic and queue); @m then names @topic,
 * queue @qid. Return: 0, -ENOBUFS (too long, with BK_PROPS_SLACK kept for
 * what the later copy adds).
 */
int bk_sched_wrap(struct bk_core *c, struct wire_msg *m, const char *const *skip,
		  const char *const *keys, const uint64_t *vals, const char *topic, uint32_t qid);
/* Append "key\1val\2" for an unsigned number. Return: 0, -ENOBUFS (wire_props_append()). */
int bk_props_add_u(char *buf, size_t cap, size_t *len, const char *key, uint64_t v);

enum { BK_DELIVER_LATER, BK_DELIVER_DONE, BK_DELIVER_DROPPED };
/*
 * Core: put the scheduled record @s (a delay level's or a timer's) into its
 * REAL_TOPIC/REAL_QID, an internal put (no permission check; a missing retry
 * or DLQ topic is created), its properties but @skip, plus @src_prop naming
 * @s's physical offset. Return: BK_DELIVER_DONE (*@ticket set), _LATER (the
 * topic is being created, the store is busy), _DROPPED (nowhere this core
 * can put it).
 */
int bk_sched_deliver(struct bk_core *c, const struct wire_msg *s, const char *const *skip,
		     const char *src_prop, uint32_t sys_or, uint64_t *ticket);

/* ---- transactions (bk_tx.c) ---- */
/* Core: turn half @m into its RMQ_SYS_TRANS_HALF_TOPIC record (c->dprops). Return: the queue, or NULL (*@status). */
struct store_queue *bk_tx_wrap(struct bk_core *c, struct wire_msg *m, int32_t *status);
/* Core: BK_ROP_END_TX, BK_ROP_TX_CHECK. */
void bk_tx_end(struct bk_core *c, struct bk_rcmd *cmd);
void bk_tx_check(struct bk_core *c, struct bk_rcmd *cmd);
/* Core: op records left to write, progress to publish. Return: work done. */
unsigned bk_tx_tick(struct bk_core *c);
/* Core: a half just stored at @qoff (its slot is clear). */
void bk_tx_stored(struct bk_core *c, uint64_t qoff);

/* ---- delivery-time timers (bk_timer.c) ---- */
/*
 * The due time (epoch ms) a message's TIMER_DELIVER_MS, __STARTDELIVERTIME,
 * TIMER_DELAY_SEC or TIMER_DELAY_MS asks for (the first present of them).
 * Return: 0 none, 1 *@due set, -1 not a number or further than
 * timerMaxDelaySec (*@why says which).
 */
int bk_timer_due(const struct bk *bk, const char *props, size_t plen, int64_t now_ms, int64_t *due,
		 const char **why);
/* Core: turn @m into its timer record due at @due (properties in c->dprops). Return: the queue, or NULL (*@status). */
struct store_queue *bk_timer_wrap(struct bk_core *c, struct wire_msg *m, int64_t due,
				  int32_t *status);
/* Core: fire what the timer thread handed over. Return: work done. */
unsigned bk_timer_tick(struct bk_core *c);

/* ---- replication, master side (bk_repl.c); Context: the owning core ---- */
/* A slave's REPL request for this core's shard. */
void bk_repl_handle(struct bk_core *c, const struct dp_xreq *req);
/* Answers parked REPL requests that have bytes or reached their deadline. Return: answered. */
unsigned bk_repl_tick(struct bk_core *c, uint64_t now_ns);
/* A slave is connected and within haMaxGapNotInSync of this shard's end. */
bool bk_repl_slave_ok(const struct bk_core *c, uint64_t now_ns);
/* Startup (before the core runs): set a committed offset. Return: 0, -ENOSPC. */
MUST_CHECK int bk_core_offset_load(struct bk_core *c, const char *topic, const char *group,
				   uint32_t qid, int64_t offset);

#endif /* SP_BROKER_BK_PRIV_H */
