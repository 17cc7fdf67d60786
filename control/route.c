// SPDX-License-Identifier: Apache-2.0
/*
 * route.c - the NameServer's RCU-published route table (route.h).
 *
 * DESIGN
 * A snapshot is an array of pointers to immutable brokerName records, each
 * pointing at an immutable, reference-counted topic set. A writer copies the
 * pointer array, clones only the records it edits (struct route_txn), and
 * publishes the new array; records it did not touch are shared with the old
 * snapshot. So a broker re-registering 100,000 topics costs one new topic
 * set, and a heartbeat of an unchanged broker costs no publish at all: its
 * liveness (last heartbeat, data version, connection) is writer-private.
 *
 * Lookups probe each brokerName's topic set (an open-addressing hash of
 * 64-bit FNV-1a). Clusters hold a handful of brokerNames, so a lookup is a
 * few probes; a global topic index would make every registration rebuild it.
 *
 * Reclamation: after rcu_assign_pointer() the writer waits for a grace
 * period (urcu_memb_synchronize_rcu()), then frees the old array and the
 * records the transaction replaced, dropping their topic-set references.
 * Topic-set reference counts are touched by the writer thread only.
 *
 * Size: over 1,000 lines because it is one data structure: the snapshot and the copy-on-write transaction that edits
 * it share the private layout of brokerName records and topic sets; split, that layout
 * would become a header every file of control/ could reach into.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-memb.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "control/route.h"
#include "wire/record.h"
#include "common/jbuf.h"

struct route_topic {
	uint64_t hash;
	uint32_t name_off; /* into names */
	uint16_t name_len; /* 0: replaced by a later duplicate */
	uint16_t read_q;
	uint16_t write_q;
	uint8_t perm;
	uint32_t sysflag;
	uint32_t n_cores;
	uint32_t cores_off; /* into cores */
};

/* Ownership: see route.h. refs and everything else: writer thread only. */
struct route_tset {
	uint32_t refs;
	uint32_t n;
	uint32_t cap;
	struct route_topic *topics;
	char *names;
	size_t names_len;
	size_t names_cap;
	uint16_t *cores;
	size_t cores_len;
	size_t cores_cap;
	uint32_t *slots; /* index + 1 into topics; 0 empty; mask + 1 entries */
	uint32_t mask;
};

struct route_addr {
	int64_t id;
	char addr[ROUTE_ADDR_MAX + 1];
	struct route_dp dp;
};

/* Immutable once published. gen: the transaction that created it. */
struct route_bname {
	uint64_t gen;
	char name[ROUTE_NAME_MAX + 1];
	char cluster[ROUTE_NAME_MAX + 1];
	uint8_t perm_clear; /* bits removed by WIPE_WRITE_PERM_OF_BROKER */
	uint32_t n_addrs;
	struct route_addr addrs[ROUTE_ADDRS_MAX]; /* sorted by id */
	struct route_tset *topics;		  /* NULL until a master registered */
};

/*
 * Groups whose last address went without unregistering (its connection
 * closed, or its registration expired): a master that was killed, and the
 * whole group with it when it had no slave. Immutable once published; a
 * group leaves the set when one of its brokers registers again.
 */
struct route_lost {
	char name[ROUTE_NAME_MAX + 1];
	char cluster[ROUTE_NAME_MAX + 1];
	char addr[ROUTE_ADDR_MAX + 1]; /* the last address it had */
	int64_t lost_ms;	       /* wall clock */
};

struct route_lostset {
	uint32_t n;
	struct route_lost g[];
};

/* RCU: the writer publishes, readers see it whole. */
struct route_table {
	const struct route_lostset *lost; /* NULL: none; shared by tables until it changes */
	uint32_t n;
	struct route_bname *b[];
};

/* Writer-private liveness of one broker address. */
struct route_live {
	char addr[ROUTE_ADDR_MAX + 1];
	char bname[ROUTE_NAME_MAX + 1];
	char ha[ROUTE_ADDR_MAX + 1];
	int64_t id;
	uint64_t last_ms;
	struct route_dv dv;
	uint64_t conn;
	uint64_t epoch;
};

/*
 * Ownership: one writer thread calls every mutator; cur is RCU-published to
 * readers on any thread.
 */
struct route_db {
	struct route_table *cur; /* RCU: writer publishes */
	uint64_t gen;		 /* writer only, from here down */
	struct route_live *live;
	uint32_t n_live;
	uint32_t cap_live;
};

/* One batch of edits, published at once by txn_commit(). */
struct route_txn {
	struct route_db *db;
	uint64_t gen;
	struct route_table *nt;
	uint32_t cap;
	bool dirty;
	bool unclean; /* drops of addresses that did not unregister (connection, expiry) */
	struct route_bname **retired; /* published records this txn replaced */
	uint32_t n_retired;
	uint32_t cap_retired;
};

/*
 * Topic sets
 */

static uint64_t
route_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

bool
route_topic_name_ok(const char *name, size_t len)
{
	return len <= ROUTE_TOPIC_MAX && wire_topic_name_ok(name, len);
}

int
route_tset_create(uint32_t size_hint, struct route_tset **out)
{
	struct route_tset *ts = calloc(1, sizeof(*ts));

	if (ts == NULL)
		return -ENOMEM;
	ts->refs = 1;
	ts->cap = size_hint > 16 && size_hint < (1u << 24) ? size_hint : 16;
	ts->topics = malloc(sizeof(*ts->topics) * ts->cap);
	ts->names_cap = (size_t)ts->cap * 24;
	ts->names = malloc(ts->names_cap);
	if (ts->topics == NULL || ts->names == NULL) {
		route_tset_put(ts);
		return -ENOMEM;
	}
	*out = ts;
	return 0;
}

void
route_tset_put(struct route_tset *ts)
{
	if (ts == NULL || --ts->refs > 0)
		return;
	free(ts->topics);
	free(ts->names);
	free(ts->cores);
	free(ts->slots);
	free(ts);
}

uint32_t
route_tset_count(const struct route_tset *ts)
{
	return ts->n;
}

static const struct route_topic *
tset_find(const struct route_tset *ts, const char *name, size_t len, uint64_t h)
{
	if (ts->slots == NULL)
		return NULL; /* a master that registered no topics */
	for (uint32_t i = (uint32_t)h & ts->mask;; i = (i + 1) & ts->mask) {
		uint32_t s = ts->slots[i];
		const struct route_topic *t;

		if (s == 0)
			return NULL;
		t = &ts->topics[s - 1];
		if (t->hash == h && t->name_len == len &&
		    memcmp(ts->names + t->name_off, name, len) == 0)
			return t;
	}
}

/* Insert topics[idx]; a duplicate name takes over the old slot. Table has room. */
static void
tset_index(struct route_tset *ts, uint32_t idx)
{
	struct route_topic *t = &ts->topics[idx];

	for (uint32_t i = (uint32_t)t->hash & ts->mask;; i = (i + 1) & ts->mask) {
		uint32_t s = ts->slots[i];
		struct route_topic *o;

		if (s == 0) {
			ts->slots[i] = idx + 1;
			return;
		}
		o = &ts->topics[s - 1];
		if (o->hash == t->hash && o->name_len == t->name_len &&
		    memcmp(ts->names + o->name_off, ts->names + t->name_off, t->name_len) == 0) {
			o->name_len = 0; /* dead: iteration skips it */
			ts->slots[i] = idx + 1;
			return;
		}
	}
}

static int
tset_grow_index(struct route_tset *ts, uint32_t want)
{
	uint32_t size = 16;
	uint32_t *slots;

	/* Load factor at most 1/2. */
	while (size < want * 2) {
		if (size >= (1u << 30))
			return -ENOMEM;
		size *= 2;
	}
	if (ts->slots != NULL && size <= ts->mask + 1)
		return 0;
	slots = calloc(size, sizeof(*slots));
	if (slots == NULL)
		return -ENOMEM;
	free(ts->slots);
	ts->slots = slots;
	ts->mask = size - 1;
	for (uint32_t i = 0; i < ts->n; i++) {
		if (ts->topics[i].name_len != 0)
			tset_index(ts, i);
	}
	return 0;
}

static int
grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	np = realloc(*p, c * elem);
	if (np == NULL)
		return -ENOMEM;
	*p = np;
	*cap = c;
	return 0;
}

int
route_tset_add(struct route_tset *ts, const struct route_topic_in *in)
{
	size_t cap_topics = ts->cap;
	struct route_topic *t;
	int rc;

	if (!route_topic_name_ok(in->name, in->name_len) || in->read_q < 0 ||
	    in->read_q > ROUTE_QUEUES_MAX || in->write_q < 0 || in->write_q > ROUTE_QUEUES_MAX ||
	    in->perm < 0 || in->perm > ROUTE_PERM_MAX || in->sysflag < 0 ||
	    in->sysflag > INT32_MAX || in->n_cores > ROUTE_QUEUES_MAX)
		return -EINVAL;
	if (ts->n >= (1u << 28) || ts->names_len + in->name_len > UINT32_MAX ||
	    ts->cores_len + in->n_cores > UINT32_MAX)
		return -ENOMEM;
	if ((rc = grow((void **)&ts->topics, &cap_topics, ts->n + 1, sizeof(*ts->topics))) != 0)
		return rc;
	ts->cap = (uint32_t)cap_topics;
	if ((rc = grow((void **)&ts->names, &ts->names_cap, ts->names_len + in->name_len, 1)) != 0)
		return rc;
	if (in->n_cores > 0 && (rc = grow((void **)&ts->cores, &ts->cores_cap,
					  ts->cores_len + in->n_cores, sizeof(*ts->cores))) != 0)
		return rc;
	if ((rc = tset_grow_index(ts, ts->n + 1)) != 0)
		return rc;

	t = &ts->topics[ts->n];
	t->hash = route_hash(in->name, in->name_len);
	t->name_off = (uint32_t)ts->names_len;
	t->name_len = (uint16_t)in->name_len;
	t->read_q = (uint16_t)in->read_q;
	t->write_q = (uint16_t)in->write_q;
	t->perm = (uint8_t)in->perm;
	t->sysflag = (uint32_t)in->sysflag;
	t->n_cores = in->n_cores;
	t->cores_off = (uint32_t)ts->cores_len;
	memcpy(ts->names + ts->names_len, in->name, in->name_len);
	ts->names_len += in->name_len;
	if (in->n_cores > 0) {
		memcpy(ts->cores + ts->cores_len, in->cores, in->n_cores * sizeof(*ts->cores));
		ts->cores_len += in->n_cores;
	}
	tset_index(ts, ts->n);
	ts->n++;
	return 0;
}

/*
 * Snapshots and transactions (writer thread)
 */

int
route_db_create(struct route_db **out)
{
	struct route_db *db = calloc(1, sizeof(*db));

	if (db == NULL)
		return -ENOMEM;
	db->cur = calloc(1, sizeof(struct route_table));
	if (db->cur == NULL) {
		free(db);
		return -ENOMEM;
	}
	*out = db;
	return 0;
}

static void
bname_free(struct route_bname *b)
{
	route_tset_put(b->topics);
	free(b);
}

static bool
table_has(const struct route_table *t, const char *name)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->b[i]->n_addrs > 0 && strcmp(t->b[i]->name, name) == 0)
			return true;
	return false;
}

/*
 * The lost groups after a transaction: the old ones still absent from @nt,
 * and, when @vanished (records that lost their last address uncleanly), those
 * too. Return: the new set (NULL: none), or @old itself when unchanged.
 */
static const struct route_lostset *
lost_next(const struct route_table *was, const struct route_table *nt,
	  struct route_bname *const *vanished, uint32_t n_vanished)
{
	const struct route_lostset *old = was->lost;
	uint32_t keep = 0, cap = n_vanished + (old ? old->n : 0);
	struct route_lostset *ls;
	bool same = true;

	for (uint32_t i = 0; old && i < old->n; i++)
		same &= !table_has(nt, old->g[i].name);
	if (same && n_vanished == 0)
		return old;
	if (cap == 0)
		return NULL;
	ls = malloc(sizeof(*ls) + sizeof(ls->g[0]) * cap);
	if (ls == NULL)
		return old; /* out of memory: the set stays as it was */
	for (uint32_t i = 0; old && i < old->n; i++) {
		bool again = table_has(nt, old->g[i].name);

		for (uint32_t k = 0; k < n_vanished && !again; k++)
			again = strcmp(vanished[k]->name, old->g[i].name) == 0;
		if (!again)
			ls->g[keep++] = old->g[i];
	}
	for (uint32_t k = 0; k < n_vanished; k++) {
		struct route_lost *g = &ls->g[keep++];

		snprintf(g->name, sizeof(g->name), "%s", vanished[k]->name);
		snprintf(g->cluster, sizeof(g->cluster), "%s", vanished[k]->cluster);
		g->addr[0] = '\0';
		for (uint32_t i = 0; i < was->n; i++)
			if (strcmp(was->b[i]->name, g->name) == 0 && was->b[i]->n_addrs > 0)
				snprintf(g->addr, sizeof(g->addr), "%s", was->b[i]->addrs[0].addr);
		g->lost_ms = clk_wall_ms();
	}
	ls->n = keep;
	if (keep == 0) {
		free(ls);
		return NULL;
	}
	return ls;
}

void
route_db_destroy(struct route_db *db)
{
	if (db == NULL)
		return;
	for (uint32_t i = 0; i < db->cur->n; i++)
		bname_free(db->cur->b[i]);
	free((void *)db->cur->lost);
	free(db->cur);
	free(db->live);
	free(db);
}

const struct route_table *
route_db_current(struct route_db *db)
{
	return rcu_dereference(db->cur);
}

uint32_t
route_db_live_count(const struct route_db *db)
{
	return db->n_live;
}

static int
txn_begin(struct route_db *db, struct route_txn *tx)
{
	const struct route_table *cur = db->cur;

	memset(tx, 0, sizeof(*tx));
	tx->db = db;
	tx->gen = db->gen + 1;
	tx->cap = cur->n + 1;
	tx->nt = malloc(sizeof(*tx->nt) + sizeof(tx->nt->b[0]) * tx->cap);
	if (tx->nt == NULL)
		return -ENOMEM;
	tx->nt->n = cur->n;
	tx->nt->lost = cur->lost;
	memcpy(tx->nt->b, cur->b, sizeof(cur->b[0]) * cur->n);
	return 0;
}

static int
txn_retire(struct route_txn *tx, struct route_bname *b)
{
	size_t cap = tx->cap_retired;
	int rc = grow((void **)&tx->retired, &cap, tx->n_retired + 1, sizeof(*tx->retired));

	if (rc != 0)
		return rc;
	tx->cap_retired = (uint32_t)cap;
	tx->retired[tx->n_retired++] = b;
	return 0;
}

/* Return: index of @name in the new table, or -1. */
static int
txn_find(const struct route_txn *tx, const char *name)
{
	for (uint32_t i = 0; i < tx->nt->n; i++) {
		if (strcmp(tx->nt->b[i]->name, name) == 0)
			return (int)i;
	}
	return -1;
}

/*
 * txn_edit() - a writable record for @name, cloned on first edit in this
 * transaction, created when @create. Return: the record or NULL (-ENOENT /
 * -ENOMEM in *rc).
 */
static struct route_bname *
txn_edit(struct route_txn *tx, const char *name, bool create, int *rc)
{
	int i = txn_find(tx, name);
	struct route_bname *b;

	*rc = 0;
	if (i >= 0 && tx->nt->b[i]->gen == tx->gen)
		return tx->nt->b[i];
	if (i < 0 && !create) {
		*rc = -ENOENT;
		return NULL;
	}
	b = malloc(sizeof(*b));
	if (b == NULL) {
		*rc = -ENOMEM;
		return NULL;
	}
	if (i >= 0) {
		if ((*rc = txn_retire(tx, tx->nt->b[i])) != 0) {
			free(b);
			return NULL;
		}
		*b = *tx->nt->b[i];
		if (b->topics != NULL)
			b->topics->refs++;
		tx->nt->b[i] = b;
	} else {
		memset(b, 0, sizeof(*b));
		snprintf(b->name, sizeof(b->name), "%s", name);
		tx->nt->b[tx->nt->n++] = b; /* cap = old n + 1: one creation per txn */
	}
	b->gen = tx->gen;
	tx->dirty = true;
	return b;
}

static void
txn_abort(struct route_txn *tx)
{
	/* Fresh records were never published: free them now. */
	for (uint32_t i = 0; i < tx->nt->n; i++) {
		if (tx->nt->b[i]->gen == tx->gen)
			bname_free(tx->nt->b[i]);
	}
	free(tx->nt);
	free(tx->retired);
}

static void
txn_commit(struct route_txn *tx)
{
	struct route_db *db = tx->db;
	struct route_table *old = db->cur;
	uint32_t n = 0;

	if (!tx->dirty) {
		txn_abort(tx);
		return;
	}
	struct route_bname *vanished[16];
	uint32_t n_vanished = 0;
	const struct route_lostset *lost;

	/* A brokerName without addresses leaves, with its topics (RocketMQ). */
	for (uint32_t i = 0; i < tx->nt->n; i++) {
		struct route_bname *b = tx->nt->b[i];

		if (b->n_addrs > 0) {
			tx->nt->b[n++] = b;
			continue;
		}
		if (tx->unclean && n_vanished < ARRAY_SIZE(vanished) && table_has(old, b->name))
			vanished[n_vanished++] =
				b; /* freed below, after the lost set took its name */
		else
			bname_free(b); /* fresh (only edits empty a record): unpublished */
	}
	tx->nt->n = n;
	lost = lost_next(old, tx->nt, vanished, n_vanished);
	for (uint32_t k = 0; k < n_vanished; k++)
		bname_free(vanished[k]);
	tx->nt->lost = lost;
	db->gen = tx->gen;
	/* Publish: pairs with rcu_dereference() in route_db_current(). */
	rcu_assign_pointer(db->cur, tx->nt);
	urcu_memb_synchronize_rcu();
	if (lost != old->lost)
		free((void *)old->lost);
	free(old);
	for (uint32_t i = 0; i < tx->n_retired; i++)
		bname_free(tx->retired[i]);
	free(tx->retired);
}

static void
bname_del_addr(struct route_bname *b, uint32_t i)
{
	memmove(&b->addrs[i], &b->addrs[i + 1], sizeof(b->addrs[0]) * (b->n_addrs - i - 1));
	b->n_addrs--;
}

static int
bname_find_id(const struct route_bname *b, int64_t id)
{
	for (uint32_t i = 0; i < b->n_addrs; i++) {
		if (b->addrs[i].id == id)
			return (int)i;
	}
	return -1;
}

static struct route_live *
live_find(const struct route_db *db, const char *addr)
{
	for (uint32_t i = 0; i < db->n_live; i++) {
		if (strcmp(db->live[i].addr, addr) == 0)
			return &db->live[i];
	}
	return NULL;
}

/* Drop live entry @i and its address from its brokerName. */
static int
txn_drop_live(struct route_txn *tx, uint32_t i)
{
	struct route_db *db = tx->db;
	struct route_live *l = &db->live[i];
	struct route_bname *b;
	int rc;
	int k;

	b = txn_edit(tx, l->bname, false, &rc);
	if (b == NULL && rc != -ENOENT)
		return rc;
	if (b != NULL && (k = bname_find_id(b, l->id)) >= 0 &&
	    strcmp(b->addrs[k].addr, l->addr) == 0)
		bname_del_addr(b, (uint32_t)k);
	db->live[i] = db->live[--db->n_live];
	return 0;
}

static bool
dv_equal(const struct route_dv *a, const struct route_dv *b)
{
	return a->timestamp == b->timestamp && a->counter == b->counter;
}

bool
route_db_wants_topics(const struct route_db *db, const char *addr, int64_t id,
		      const struct route_dv *dv)
{
	const struct route_live *l;

	if (id != 0)
		return false;
	l = live_find(db, addr);
	return l == NULL || l->id != 0 || !dv_equal(&l->dv, dv);
}

static bool
dp_equal(const struct route_dp *a, const struct route_dp *b)
{
	if (a->present != b->present)
		return false;
	return !a->present || (strcmp(a->ip, b->ip) == 0 && memcmp(a->mac, b->mac, 6) == 0 &&
			       a->port == b->port && a->cores == b->cores);
}

/* Does @reg change anything readers see in @b (NULL: brokerName unknown)? */
static bool
reg_changes(const struct route_bname *b, const struct route_reg *reg)
{
	int k;

	if (b == NULL || strcmp(b->cluster, reg->cluster) != 0)
		return true;
	k = bname_find_id(b, reg->id);
	return k < 0 || strcmp(b->addrs[k].addr, reg->addr) != 0 ||
	       !dp_equal(&b->addrs[k].dp, &reg->dp);
}

static const struct route_bname *
table_find(const struct route_table *t, const char *name)
{
	for (uint32_t i = 0; i < t->n; i++) {
		if (strcmp(t->b[i]->name, name) == 0)
			return t->b[i];
	}
	return NULL;
}

/* Room for one more live entry, so live_upsert() cannot fail mid-transaction. */
static int
live_reserve(struct route_db *db)
{
	size_t cap = db->cap_live;
	int rc = grow((void **)&db->live, &cap, db->n_live + 1, sizeof(*db->live));

	if (rc == 0)
		db->cap_live = (uint32_t)cap;
	return rc;
}

/* Context: after live_reserve(). */
static void
live_upsert(struct route_db *db, const struct route_reg *reg, uint64_t now_ms)
{
	struct route_live *l = live_find(db, reg->addr);

	if (l == NULL) {
		BASSERT(db->n_live < db->cap_live);
		l = &db->live[db->n_live++];
		snprintf(l->addr, sizeof(l->addr), "%s", reg->addr);
	}
	snprintf(l->bname, sizeof(l->bname), "%s", reg->bname);
	snprintf(l->ha, sizeof(l->ha), "%s", reg->ha_addr);
	l->id = reg->id;
	l->last_ms = now_ms;
	l->dv = reg->dv;
	l->conn = reg->conn;
	l->epoch = reg->epoch;
}

static void
reg_out_fill(const struct route_db *db, const struct route_reg *reg, struct route_reg_out *out)
{
	const struct route_bname *b = table_find(db->cur, reg->bname);
	const struct route_live *m;
	int k;

	out->master_addr[0] = '\0';
	out->master_ha[0] = '\0';
	if (reg->id == 0 || b == NULL || (k = bname_find_id(b, 0)) < 0)
		return;
	snprintf(out->master_addr, sizeof(out->master_addr), "%s", b->addrs[k].addr);
	m = live_find(db, b->addrs[k].addr);
	if (m != NULL)
		snprintf(out->master_ha, sizeof(out->master_ha), "%s", m->ha);
}

/* @t of @ts as route_tset_add() takes it. */
static struct route_topic_in
topic_in(const struct route_tset *ts, const struct route_topic *t)
{
	return (struct route_topic_in){.name = ts->names + t->name_off,
				       .name_len = t->name_len,
				       .read_q = t->read_q,
				       .write_q = t->write_q,
				       .perm = t->perm,
				       .sysflag = t->sysflag,
				       .cores = t->n_cores ? ts->cores + t->cores_off : NULL,
				       .n_cores = t->n_cores};
}

/*
 * @base without @deleted's names, with @delta's topics (added or replacing
 * one of the same name): a delta registration's new set. O(topics) copies,
 * for bytes on the wire proportional to the change. Return: 0, -ENOMEM.
 */
static int
tset_merged(const struct route_tset *base, const struct route_tset *delta,
	    const struct route_tset *deleted, struct route_tset **out)
{
	uint32_t nd = delta != NULL ? delta->n : 0;
	struct route_tset *n;
	int rc = route_tset_create(base->n + nd, &n);

	for (uint32_t i = 0; rc == 0 && i < base->n + nd; i++) {
		const struct route_tset *ts = i < base->n ? base : delta;
		const struct route_topic *t = &ts->topics[i < base->n ? i : i - base->n];
		struct route_topic_in in = topic_in(ts, t);

		/* a base topic the delta replaces is added again below, where the delta's order puts it */
		if (t->name_len == 0 ||
		    (ts == base &&
		     ((delta != NULL && tset_find(delta, in.name, t->name_len, t->hash) != NULL) ||
		      (deleted != NULL &&
		       tset_find(deleted, in.name, t->name_len, t->hash) != NULL))))
			continue;
		rc = route_tset_add(n, &in);
	}
	if (rc != 0) {
		route_tset_put(n);
		return rc;
	}
	*out = n;
	return 0;
}

int
route_db_register(struct route_db *db, struct route_reg *reg, uint64_t now_ms,
		  struct route_reg_out *out)
{
	struct route_live *prev = live_find(db, reg->addr);
	struct route_tset *topics = reg->topics;
	struct route_bname *b;
	struct route_txn tx;
	int rc;
	int k;

	const struct route_bname *cb = table_find(db->cur, reg->bname);
	struct route_tset *deleted = reg->deleted;

	reg->topics = NULL;
	reg->deleted = NULL;
	out->replaced[0] = '\0';
	out->replaced_epoch = 0;
	if ((rc = live_reserve(db)) != 0)
		goto err_put;
	if (reg->base != NULL && topics != NULL) {
		struct route_tset *merged;

		/* only onto the set this very master registered at that version */
		if (reg->id != 0 || prev == NULL || prev->id != 0 ||
		    strcmp(prev->bname, reg->bname) != 0 || !dv_equal(&prev->dv, reg->base) ||
		    cb == NULL || cb->topics == NULL || (k = bname_find_id(cb, 0)) < 0 ||
		    strcmp(cb->addrs[k].addr, reg->addr) != 0) {
			rc = -ESTALE;
			goto err_put;
		}
		if ((rc = tset_merged(cb->topics, topics, deleted, &merged)) != 0)
			goto err_put;
		route_tset_put(topics);
		topics = merged;
	}
	route_tset_put(deleted);
	deleted = NULL;
	if (topics == NULL && !reg_changes(cb, reg) && prev != NULL &&
	    strcmp(prev->bname, reg->bname) == 0 && prev->id == reg->id) {
		/* Heartbeat: liveness only, nothing to publish. */
		live_upsert(db, reg, now_ms);
		reg_out_fill(db, reg, out);
		return 0;
	}
	/*
	 * Refuse a second live process under one (brokerName, brokerId): two
	 * masters of a group would otherwise replace each other at every
	 * registration, and clients would flip between them. Unless the
	 * newcomer is master of a later epoch (failover, docs/failover.md):
	 * the holder was replaced and will step down (its later registrations,
	 * of the old epoch, are refused here in turn).
	 */
	if (cb != NULL && (k = bname_find_id(cb, reg->id)) >= 0 &&
	    strcmp(cb->addrs[k].addr, reg->addr) != 0) {
		const struct route_live *h = live_find(db, cb->addrs[k].addr);

		if (h != NULL && (reg->id != 0 || reg->epoch <= h->epoch)) {
			snprintf(out->holder, sizeof(out->holder), "%s", cb->addrs[k].addr);
			rc = -EEXIST;
			goto err_put;
		}
		if (h != NULL) {
			snprintf(out->replaced, sizeof(out->replaced), "%s", h->addr);
			out->replaced_epoch = h->epoch;
		}
	}
	/* Refuse a full brokerName before changing anything. */
	if (cb != NULL && cb->n_addrs >= ROUTE_ADDRS_MAX && bname_find_id(cb, reg->id) < 0) {
		bool same_addr = false;

		for (uint32_t i = 0; i < cb->n_addrs; i++)
			same_addr |= strcmp(cb->addrs[i].addr, reg->addr) == 0;
		if (!same_addr) {
			rc = -ENOSPC;
			goto err_put;
		}
	}

	/*
	 * From here the live table and the snapshot change together: on an
	 * error the edits made so far are still committed (txn_commit() cannot
	 * fail), so an address is never in one without the other.
	 */
	if ((rc = txn_begin(db, &tx)) != 0)
		goto err_put;
	/* The address moved (other brokerName or id): drop its old place first. */
	if (prev != NULL && (strcmp(prev->bname, reg->bname) != 0 || prev->id != reg->id) &&
	    (rc = txn_drop_live(&tx, (uint32_t)(prev - db->live))) != 0)
		goto err_commit;
	b = txn_edit(&tx, reg->bname, true, &rc);
	if (b == NULL)
		goto err_commit;
	snprintf(b->cluster, sizeof(b->cluster), "%s", reg->cluster);
	/* Same address under another id: the old entry goes (slave -> master switch). */
	for (uint32_t i = 0; i < b->n_addrs; i++) {
		if (b->addrs[i].id != reg->id && strcmp(b->addrs[i].addr, reg->addr) == 0) {
			bname_del_addr(b, i);
			break;
		}
	}
	k = bname_find_id(b, reg->id);
	if (k < 0) {
		uint32_t pos = 0;

		if (b->n_addrs >= ROUTE_ADDRS_MAX) {
			rc = -ENOSPC; /* only when the address moved in from this brokerName */
			goto err_commit;
		}
		while (pos < b->n_addrs && b->addrs[pos].id < reg->id)
			pos++;
		memmove(&b->addrs[pos + 1], &b->addrs[pos],
			sizeof(b->addrs[0]) * (b->n_addrs - pos));
		b->n_addrs++;
		k = (int)pos;
	}
	b->addrs[k].id = reg->id;
	snprintf(b->addrs[k].addr, sizeof(b->addrs[k].addr), "%s", reg->addr);
	b->addrs[k].dp = reg->dp;
	if (topics != NULL) {
		route_tset_put(b->topics);
		b->topics = topics;
		b->perm_clear = 0;
		topics = NULL;
	}
	live_upsert(db, reg, now_ms);
	txn_commit(&tx);
	reg_out_fill(db, reg, out);
	return 0;

err_commit:
	txn_commit(&tx);
err_put:
	route_tset_put(topics);
	route_tset_put(deleted);
	return rc;
}

int
route_db_unregister(struct route_db *db, const char *bname, const char *addr, int64_t id)
{
	struct route_live *l = live_find(db, addr);
	struct route_txn tx;
	int rc;

	if (l == NULL || strcmp(l->bname, bname) != 0 || l->id != id)
		return -ENOENT;
	if ((rc = txn_begin(db, &tx)) != 0)
		return rc;
	if ((rc = txn_drop_live(&tx, (uint32_t)(l - db->live))) != 0) {
		txn_abort(&tx);
		return rc;
	}
	txn_commit(&tx);
	return 0;
}

/* Drop every live entry for which @pred holds, in one transaction. */
static int
drop_where(struct route_db *db, bool (*pred)(const struct route_live *, const void *),
	   const void *arg)
{
	struct route_txn tx;
	int dropped = 0;
	int rc;

	if ((rc = txn_begin(db, &tx)) != 0)
		return rc;
	tx.unclean = true; /* connections closed and registrations expired, never UNREGISTER */
	for (uint32_t i = 0; i < db->n_live;) {
		if (!pred(&db->live[i], arg)) {
			i++;
			continue;
		}
		/* txn_drop_live() moves the last entry into slot i. On an error
		 * it changed nothing; publish the drops done so far. */
		if ((rc = txn_drop_live(&tx, i)) != 0) {
			txn_commit(&tx);
			return rc;
		}
		dropped++;
	}
	txn_commit(&tx);
	return dropped;
}

static bool
live_on_conn(const struct route_live *l, const void *arg)
{
	return l->conn == *(const uint64_t *)arg;
}

int
route_db_conn_closed(struct route_db *db, uint64_t conn)
{
	return drop_where(db, live_on_conn, &conn);
}

struct expire_arg {
	uint64_t now_ms;
	uint64_t expire_ms;
};

static bool
live_expired(const struct route_live *l, const void *arg)
{
	const struct expire_arg *e = arg;

	return e->now_ms > l->last_ms && e->now_ms - l->last_ms > e->expire_ms;
}

int
route_db_expire(struct route_db *db, uint64_t now_ms, uint64_t expire_ms)
{
	struct expire_arg e = {.now_ms = now_ms, .expire_ms = expire_ms};

	return drop_where(db, live_expired, &e);
}

int
route_db_write_perm(struct route_db *db, const char *bname, bool add, uint32_t *count)
{
	struct route_bname *b;
	struct route_txn tx;
	int rc;

	*count = 0;
	if ((rc = txn_begin(db, &tx)) != 0)
		return rc;
	b = txn_edit(&tx, bname, false, &rc);
	if (b == NULL) {
		txn_abort(&tx);
		return rc;
	}
	/* wipe counts the topics that were writable, add those writable now (RocketMQ's) */
	if (add)
		b->perm_clear &= (uint8_t)~ROUTE_PERM_WRITE;
	if (b->topics != NULL) {
		for (uint32_t i = 0; i < b->topics->n; i++) {
			const struct route_topic *t = &b->topics->topics[i];

			if (t->name_len != 0 && (t->perm & ~b->perm_clear & ROUTE_PERM_WRITE))
				(*count)++;
		}
	}
	if (!add)
		b->perm_clear |= ROUTE_PERM_WRITE;
	txn_commit(&tx);
	return 0;
}

/* A copy of @ts without @name. Return: 0, -ENOMEM. */
static int
tset_without(const struct route_tset *ts, const char *name, size_t len, struct route_tset **out)
{
	struct route_topic_in in = {.name = name, .name_len = len};
	struct route_tset *del = NULL;
	int rc = route_tset_create(1, &del);

	if (rc == 0 && (rc = route_tset_add(del, &in)) == 0)
		rc = tset_merged(ts, NULL, del, out);
	route_tset_put(del);
	return rc == -EINVAL ? -ENOMEM : rc;
}

int
route_db_delete_topic(struct route_db *db, const char *topic, const char *cluster, uint32_t *count)
{
	size_t len = strlen(topic);
	uint64_t h = route_hash(topic, len);
	struct route_txn tx;
	int rc;

	*count = 0;
	if ((rc = txn_begin(db, &tx)) != 0)
		return rc;
	for (uint32_t i = 0; i < tx.nt->n; i++) {
		struct route_bname *b = tx.nt->b[i];
		struct route_tset *n;

		if (b->topics == NULL || tset_find(b->topics, topic, len, h) == NULL ||
		    (cluster && strcmp(b->cluster, cluster) != 0))
			continue;
		b = txn_edit(&tx, b->name, false, &rc);
		if (b == NULL || (rc = tset_without(b->topics, topic, len, &n)) != 0) {
			txn_abort(&tx);
			return rc ? rc : -ENOMEM;
		}
		route_tset_put(b->topics);
		b->topics = n;
		(*count)++;
	}
	if (*count == 0) {
		txn_abort(&tx);
		return -ENOENT;
	}
	txn_commit(&tx);
	return 0;
}

bool
route_db_query_dv(struct route_db *db, const char *addr, const struct route_dv *dv, uint64_t now_ms,
		  struct route_dv *stored, bool *have)
{
	struct route_live *l = live_find(db, addr);
	bool changed;

	*have = l != NULL;
	if (l == NULL)
		return true;
	*stored = l->dv;
	changed = !dv_equal(&l->dv, dv);
	if (!changed)
		l->last_ms = now_ms;
	return changed;
}

/*
 * JSON encoders (readers)
 */

static void
json_broker_data(struct jbuf *o, const struct route_bname *b)
{
	bool any_dp = false;

	jbuf_lit(o, "{\"brokerAddrs\":{");
	for (uint32_t i = 0; i < b->n_addrs; i++) {
		if (i > 0)
			jbuf_lit(o, ",");
		/* Quoted ids: standard JSON, which every client reads (docs/rocketmq-protocol.md §3.3). */
		jbuf_lit(o, "\"");
		jbuf_i64(o, b->addrs[i].id);
		jbuf_lit(o, "\":");
		jbuf_cstr(o, b->addrs[i].addr);
		any_dp |= b->addrs[i].dp.present;
	}
	jbuf_lit(o, "},\"brokerName\":");
	jbuf_cstr(o, b->name);
	jbuf_lit(o, ",\"cluster\":");
	jbuf_cstr(o, b->cluster);
	if (any_dp) {
		bool first = true;

		jbuf_lit(o, ",\"dataplaneAddrs\":{");
		for (uint32_t i = 0; i < b->n_addrs; i++) {
			const struct route_dp *dp = &b->addrs[i].dp;
			char mac[18];

			if (!dp->present)
				continue;
			snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", dp->mac[0],
				 dp->mac[1], dp->mac[2], dp->mac[3], dp->mac[4], dp->mac[5]);
			jbuf_lit(o, first ? "\"" : ",\"");
			first = false;
			jbuf_i64(o, b->addrs[i].id);
			jbuf_lit(o, "\":{\"cores\":");
			jbuf_i64(o, dp->cores);
			jbuf_lit(o, ",\"ip\":");
			jbuf_cstr(o, dp->ip);
			jbuf_lit(o, ",\"mac\":");
			jbuf_cstr(o, mac);
			jbuf_lit(o, ",\"port\":");
			jbuf_i64(o, dp->port);
			jbuf_lit(o, "}");
		}
		jbuf_lit(o, "}");
	}
	jbuf_lit(o, "}");
}

static void
json_queue_data(struct jbuf *o, const struct route_bname *b, const struct route_tset *ts,
		const struct route_topic *t)
{
	int m = bname_find_id(b, 0);

	jbuf_lit(o, "{\"brokerName\":");
	jbuf_cstr(o, b->name);
	if (m >= 0 && b->addrs[m].dp.present) {
		/* Queue -> owning core of the master: explicit, else q % cores. */
		uint32_t nq = t->n_cores ? t->n_cores : SP_MAX(t->read_q, t->write_q);

		jbuf_lit(o, ",\"dataplaneQueueCores\":[");
		for (uint32_t q = 0; q < nq; q++) {
			if (q > 0)
				jbuf_lit(o, ",");
			jbuf_i64(o, t->n_cores ? ts->cores[t->cores_off + q]
					       : q % b->addrs[m].dp.cores);
		}
		jbuf_lit(o, "]");
	}
	jbuf_lit(o, ",\"perm\":");
	jbuf_i64(o, t->perm & ~b->perm_clear);
	jbuf_lit(o, ",\"readQueueNums\":");
	jbuf_i64(o, t->read_q);
	/* Both spellings: Go and RocketMQ <= 4.8 read topicSynFlag (docs/rocketmq-protocol.md §3.3). */
	jbuf_lit(o, ",\"topicSynFlag\":");
	jbuf_i64(o, t->sysflag);
	jbuf_lit(o, ",\"topicSysFlag\":");
	jbuf_i64(o, t->sysflag);
	jbuf_lit(o, ",\"writeQueueNums\":");
	jbuf_i64(o, t->write_q);
	jbuf_lit(o, "}");
}

static int
jbuf_finish(struct jbuf *o, uint8_t **out, size_t *out_len)
{
	if (o->err != 0) {
		int rc = o->err;

		jbuf_free(o);
		return rc;
	}
	*out = jbuf_take(o, out_len);
	return 0;
}

int
route_json_topic(const struct route_table *t, const char *topic, size_t len, const char *order_conf,
		 uint8_t **out, size_t *out_len)
{
	uint64_t h = route_hash(topic, len);
	struct jbuf o;
	bool first = true;

	jbuf_init(&o);
	for (uint32_t i = 0; i < t->n; i++) {
		const struct route_bname *b = t->b[i];

		if (b->topics == NULL || tset_find(b->topics, topic, len, h) == NULL)
			continue;
		jbuf_lit(&o, first ? "{\"brokerDatas\":[" : ",");
		first = false;
		json_broker_data(&o, b);
	}
	if (first)
		return -ENOENT;
	jbuf_lit(&o, "],\"filterServerTable\":{}");
	if (order_conf != NULL) {
		jbuf_lit(&o, ",\"orderTopicConf\":");
		jbuf_cstr(&o, order_conf);
	}
	jbuf_lit(&o, ",\"queueDatas\":[");
	first = true;
	for (uint32_t i = 0; i < t->n; i++) {
		const struct route_bname *b = t->b[i];
		const struct route_topic *tp;

		if (b->topics == NULL || (tp = tset_find(b->topics, topic, len, h)) == NULL)
			continue;
		if (!first)
			jbuf_lit(&o, ",");
		first = false;
		json_queue_data(&o, b, b->topics, tp);
	}
	jbuf_lit(&o, "]}");
	return jbuf_finish(&o, out, out_len);
}

int
route_json_cluster(const struct route_table *t, uint8_t **out, size_t *out_len)
{
	struct jbuf o;

	jbuf_init(&o);
	jbuf_lit(&o, "{\"brokerAddrTable\":{");
	for (uint32_t i = 0; i < t->n; i++) {
		if (i > 0)
			jbuf_lit(&o, ",");
		jbuf_cstr(&o, t->b[i]->name);
		jbuf_lit(&o, ":");
		json_broker_data(&o, t->b[i]);
	}
	jbuf_lit(&o, "},\"clusterAddrTable\":{");
	for (uint32_t i = 0, nc = 0; i < t->n; i++) {
		bool seen = false;
		bool first = true;

		/* Each cluster once, at its first brokerName. */
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = strcmp(t->b[j]->cluster, t->b[i]->cluster) == 0;
		if (seen)
			continue;
		if (nc++ > 0)
			jbuf_lit(&o, ",");
		jbuf_cstr(&o, t->b[i]->cluster);
		jbuf_lit(&o, ":[");
		for (uint32_t j = i; j < t->n; j++) {
			if (strcmp(t->b[j]->cluster, t->b[i]->cluster) != 0)
				continue;
			if (!first)
				jbuf_lit(&o, ",");
			first = false;
			jbuf_cstr(&o, t->b[j]->name);
		}
		jbuf_lit(&o, "]");
	}
	jbuf_lit(&o, "}");
	/*
	 * sprocket's: groups whose last broker went without unregistering, so
	 * that `sprocket cluster health` can tell a dead group from none at all
	 * (RocketMQ's readers ignore a field they do not know).
	 */
	if (t->lost != NULL && t->lost->n > 0) {
		jbuf_lit(&o, ",\"sprocketLostGroups\":{");
		for (uint32_t i = 0; i < t->lost->n; i++) {
			const struct route_lost *g = &t->lost->g[i];

			if (i > 0)
				jbuf_lit(&o, ",");
			jbuf_cstr(&o, g->name);
			jbuf_lit(&o, ":{\"cluster\":");
			jbuf_cstr(&o, g->cluster);
			jbuf_lit(&o, ",\"lastAddr\":");
			jbuf_cstr(&o, g->addr);
			jbuf_lit(&o, ",\"lostTimestamp\":");
			jbuf_i64(&o, g->lost_ms);
			jbuf_lit(&o, "}");
		}
		jbuf_lit(&o, "}");
	}
	jbuf_lit(&o, "}");
	return jbuf_finish(&o, out, out_len);
}

/* {"topicList":[...]}: each topic once, over the brokerNames of @cluster (NULL: all). */
static int
topic_list_json(const struct route_table *t, const char *cluster, uint8_t **out, size_t *out_len)
{
	struct jbuf o;
	bool first = true;

	jbuf_init(&o);
	jbuf_lit(&o, "{\"topicList\":[");
	for (uint32_t i = 0; i < t->n; i++) {
		const struct route_tset *ts = t->b[i]->topics;

		if (ts == NULL || (cluster && strcmp(t->b[i]->cluster, cluster) != 0))
			continue;
		for (uint32_t k = 0; k < ts->n; k++) {
			const struct route_topic *tp = &ts->topics[k];
			const char *name = ts->names + tp->name_off;
			bool dup = false;

			if (tp->name_len == 0)
				continue;
			/* Listed already by an earlier brokerName (of that cluster)? */
			for (uint32_t j = 0; j < i && !dup; j++)
				dup = t->b[j]->topics != NULL &&
				      (!cluster || strcmp(t->b[j]->cluster, cluster) == 0) &&
				      tset_find(t->b[j]->topics, name, tp->name_len, tp->hash) !=
					      NULL;
			if (dup)
				continue;
			if (!first)
				jbuf_lit(&o, ",");
			first = false;
			jbuf_str(&o, name, tp->name_len);
		}
	}
	jbuf_lit(&o, "]}");
	return jbuf_finish(&o, out, out_len);
}

int
route_json_topic_list(const struct route_table *t, uint8_t **out, size_t *out_len)
{
	return topic_list_json(t, NULL, out, out_len);
}

int
route_json_cluster_topics(const struct route_table *t, const char *cluster, uint8_t **out,
			  size_t *out_len)
{
	return topic_list_json(t, cluster, out, out_len);
}

int
route_json_system_topics(const struct route_table *t, uint8_t **out, size_t *out_len)
{
	struct jbuf o;
	const char *addr = NULL;
	bool first = true;

	jbuf_init(&o);
	jbuf_lit(&o, "{");
	/* RocketMQ: any master's address, for the tool to ask next */
	for (uint32_t i = 0; i < t->n && addr == NULL; i++)
		for (uint32_t k = 0; k < t->b[i]->n_addrs && addr == NULL; k++)
			if (t->b[i]->addrs[k].id == 0)
				addr = t->b[i]->addrs[k].addr;
	if (addr) {
		jbuf_lit(&o, "\"brokerAddr\":");
		jbuf_cstr(&o, addr);
		jbuf_lit(&o, ",");
	}
	jbuf_lit(&o, "\"topicList\":[");
	/* every cluster name and every brokerName: RocketMQ's per-cluster and per-broker topics */
	for (uint32_t i = 0; i < t->n; i++) {
		bool seen = false;

		for (uint32_t j = 0; j < i && !seen; j++)
			seen = strcmp(t->b[j]->cluster, t->b[i]->cluster) == 0;
		if (!seen && t->b[i]->cluster[0]) {
			if (!first)
				jbuf_lit(&o, ",");
			first = false;
			jbuf_cstr(&o, t->b[i]->cluster);
		}
	}
	for (uint32_t i = 0; i < t->n; i++) {
		if (!first)
			jbuf_lit(&o, ",");
		first = false;
		jbuf_cstr(&o, t->b[i]->name);
	}
	jbuf_lit(&o, "]}");
	return jbuf_finish(&o, out, out_len);
}

uint64_t
route_table_topic_count(const struct route_table *t)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < t->n; i++) {
		const struct route_tset *ts = t->b[i]->topics;

		if (ts == NULL)
			continue;
		for (uint32_t k = 0; k < ts->n; k++)
			n += ts->topics[k].name_len != 0;
	}
	return n;
}

void
route_table_each(const struct route_table *t,
		 void (*fn)(void *arg, const struct route_addr_info *a), void *arg)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct route_bname *b = t->b[i];
		struct route_addr_info a = {.cluster = b->cluster, .bname = b->name};

		if (b->topics)
			for (uint32_t k = 0; k < b->topics->n; k++)
				a.topics += b->topics->topics[k].name_len != 0;
		a.writable = !(b->perm_clear & ROUTE_PERM_WRITE);
		for (uint32_t k = 0; k < b->n_addrs; k++) {
			a.addr = b->addrs[k].addr;
			a.id = b->addrs[k].id;
			fn(arg, &a);
		}
	}
}

void
route_table_each_topic(const struct route_table *t,
		       void (*fn)(void *arg, const struct route_topic_info *ti), void *arg)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct route_bname *b = t->b[i];
		const struct route_tset *ts = b->topics;

		for (uint32_t k = 0; ts && k < ts->n; k++) {
			const struct route_topic *tp = &ts->topics[k];
			struct route_topic_info ti = {
				.cluster = b->cluster,
				.bname = b->name,
				.name = ts->names + tp->name_off,
				.name_len = tp->name_len,
				.read_q = tp->read_q,
				.write_q = tp->write_q,
				.perm = (uint8_t)(tp->perm & ~b->perm_clear),
			};

			if (tp->name_len)
				fn(arg, &ti);
		}
	}
}
