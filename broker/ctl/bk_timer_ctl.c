// SPDX-License-Identifier: Apache-2.0
/*
 * bk_timer_ctl.c - delivery-time timers, off the cores (bk_ctl.h): the
 * timer topic, the timer thread and its wheels, timercheck. The cores
 * append, fire and publish (bk_timer.c).
 *
 * The timer thread, every millisecond, for each core: reads the units the
 * core added to its timer queue (store_queue_max(): in SYNC_FLUSH only
 * durable ones) into the core's wheel (store/tw.h: pending timers live on
 * disk), takes what is due from the wheel and hands it to the core on its
 * ring, then a mark (cursor, queue offset read up to). Nothing it does
 * blocks a core; when a ring is full it waits.
 *
 * At start, before the cores run, each wheel is rebuilt from the timer
 * queue: every unit but those the saved mark covers (below its queue offset
 * and fire time), minus the units whose copy is in the log after the mark's
 * log offset (fired after the mark was saved: a crash lost the news).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bk_ctl.h"
#include "common/clock.h"
#include "common/log.h"
#include "store/meta_timer.h"
#include "store/tw.h"
#include "wire/record.h"

#define ENQ_BUDGET 65536u /* units read into one wheel per round */
#define EXP_BATCH 256u

struct timer_shard {
	struct tw *tw;
	uint64_t enq_off; /* the next unit to read into the wheel */
	uint64_t mark_e;  /* the queue offset of the last mark handed over */
	uint64_t handed;  /* items on the ring since the last mark */
	uint64_t skipped; /* units found fired after the saved mark (a crash) */
	bool add_failed;  /* logged once */
	bool lost_logged;
};

/* A delivered or rolled copy in the log: which timer record, and its UNIQ_KEY's hash. */
struct fired {
	int64_t src;
	uint32_t key;
};

struct bk_timer {
	struct bk_ctl *x;
	pthread_t th;
	bool running;
	_Atomic bool stop;
	struct timer_shard sh[BK_CORES_MAX];
	struct tw_ent out[EXP_BATCH];
};

int
bk_timer_conf(struct bk_ctl *x)
{
	struct bk_conf *conf = &x->bk.conf;
	uint64_t keep = (uint64_t)cfg_get_int(x->cfg, "fileReservedTime") * 3600000;
	uint64_t roll = (uint64_t)cfg_get_int(x->cfg, "timerRollWindowSec") * 1000;

	conf->timers = cfg_get_bool(x->cfg, "timerWheelEnable");
	conf->timer_max_ms = (uint64_t)cfg_get_int(x->cfg, "timerMaxDelaySec") * 1000;
	/* Written again well before retention may take the segment: half of it, at most 2 days. */
	conf->timer_roll_ms = roll ? roll : SP_MIN(keep / 2, (uint64_t)2 * 86400000);
	if (conf->timers && conf->timer_roll_ms >= keep) {
		log_err(BK_TAG,
			"timerRollWindowSec: %" PRIu64 " s is not shorter than "
			"fileReservedTime (%" PRIu64 " h): retention would take timers",
			conf->timer_roll_ms / 1000, keep / 3600000);
		return -EINVAL;
	}
	return 0;
}

static int
cmp_fired(const void *a, const void *b)
{
	const struct fired *x = a, *y = b;

	if (x->src != y->src)
		return (x->src > y->src) - (x->src < y->src);
	return (x->key > y->key) - (x->key < y->key);
}

struct fired_set {
	struct fired *f;
	size_t n, cap;
};

static int
collect_fired(void *arg, const struct wire_msg *m)
{
	struct fired_set *fs = arg;
	uint64_t src;

	if (!wire_props_get_uint(m->props, m->props_len, BK_TIMER_SRC_PROP, &src) ||
	    src > INT64_MAX)
		return 0;
	if (fs->n == fs->cap) {
		size_t nc = fs->cap ? fs->cap * 2 : 1024;
		struct fired *nf = realloc(fs->f, sizeof(*nf) * nc);

		if (nf == NULL)
			return -ENOMEM;
		fs->f = nf;
		fs->cap = nc;
	}
	fs->f[fs->n++] = (struct fired){.src = (int64_t)src, .key = bk_uniq_hash(m)};
	return 0;
}

/*
 * The copies of timer records (BK_TIMER_SRC_PROP) in shard @i's log from
 * @from on, sorted, into *@out (malloc'd). Return: 0, -errno.
 */
static int
scan_fired(struct bk_ctl *x, uint32_t i, uint64_t from, struct fired **out, size_t *n_out)
{
	struct fired_set fs = {0};
	int err = bk_log_scan(x->bk.store, i, from, collect_fired, &fs);

	if (err != 0) {
		free(fs.f);
		return err;
	}
	if (fs.n > 1)
		qsort(fs.f, fs.n, sizeof(*fs.f), cmp_fired);
	*out = fs.f;
	*n_out = fs.n;
	return 0;
}

/* Is unit @o (at @u) among @f: a copy in the log names it, with its UNIQ_KEY? */
static bool
was_fired(struct bk_ctl *x, const struct store_queue *sq, uint64_t o, const struct cq_unit *u,
	  const struct fired *f, size_t n)
{
	struct fired want = {.src = u->phys, .key = 0};
	size_t lo = 0, hi = n;
	const uint8_t *rec;
	struct cq_unit ru;
	struct wire_msg m;
	long len;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f[mid].src < want.src)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == n || f[lo].src != want.src)
		return false;
	/* A SEND that carried the property by itself does not count: the copy has the record's UNIQ_KEY */
	len = store_get(x->bk.store, sq, o, &rec, &ru);
	if (len < 0 || wire_rec_decode(rec, (size_t)len, 0, &m) < 0)
		return false;
	want.key = bk_uniq_hash(&m);
	for (; lo < n && f[lo].src == want.src; lo++)
		if (f[lo].key == want.key)
			return true;
	return false;
}

/* Shard @i's wheel from its timer queue, with @mk the saved mark. */
static int
rebuild(struct bk_ctl *x, uint32_t i, const struct meta_timer_mark *mk, struct timer_shard *s)
{
	struct bk_timer_q *q = x->bk.cores[i].tq;
	const struct cq *cq = store_queue_cq(q->sq);
	uint64_t min = cq_min(cq), max = cq_max(cq), added = 0;
	int64_t t0 = (int64_t)clk_mono_ns();
	struct fired *f = NULL;
	size_t nf = 0;
	char dir[PATH_MAX];
	int err;

	snprintf(dir, sizeof(dir), "%s/timer", cfg_get_str(x->cfg, "storePathRootDir"));
	(void)mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/timer/%u", cfg_get_str(x->cfg, "storePathRootDir"), i);
	err = tw_open(dir, clk_wall_ms(), &s->tw);
	if (err)
		return err;
	err = scan_fired(x, i, mk->done_ms >= 0 ? mk->done_log : 0, &f, &nf);
	if (err)
		return err;
	for (uint64_t o = min; o < max && err == 0; o++) {
		struct cq_unit u;
		struct tw_ent e;

		if (cq_get(cq, o, &u) != 0)
			continue;
		if (o < mk->done_qoff && u.tag_hash < mk->done_ms)
			continue; /* fired before the mark */
		if (nf > 0 && was_fired(x, q->sq, o, &u, f, nf)) {
			s->skipped++; /* fired after it: the crash lost the news */
			continue;
		}
		e = (struct tw_ent){.phys = u.phys, .due_ms = u.tag_hash, .size = u.size};
		err = tw_add(s->tw, &e);
		added += err == 0;
	}
	free(f);
	if (err)
		return err;
	s->enq_off = max;
	s->mark_e = UINT64_MAX; /* the first round marks */
	if (added || s->skipped)
		log_info(BK_TAG,
			 "timers, core %u: %" PRIu64 " pending (queue offsets %" PRIu64 "..%" PRIu64
			 "), %" PRIu64 " fired after the last saved mark, in %" PRId64 " ms",
			 i, added, min, max, s->skipped, ((int64_t)clk_mono_ns() - t0) / 1000000);
	return 0;
}

int
bk_timer_setup(struct bk_ctl *x)
{
	struct bk *bk = &x->bk;
	struct meta_timer_mark mk[META_TIMER_QUEUES_MAX];
	const struct bk_topic *t;
	int err;

	snprintf(x->timer_path, sizeof(x->timer_path), "%s/config/timercheck",
		 cfg_get_str(x->cfg, "storePathRootDir"));
	/* A slave copies the timer queues with its log and fires nothing. */
	if (!bk->conf.timers || bk->conf.role == BK_ROLE_SLAVE)
		return 0;
	if (bk->ncores > META_TIMER_QUEUES_MAX)
		return -EINVAL;
	err = bk_ctl_topic_ensure(x, BK_TIMER_TOPIC, bk->ncores, &t);
	if (err)
		return err;
	if (t->nq > bk->ncores)
		log_warn(BK_TAG,
			 "%s has %u queues for %u cores: timers in queues %u.. wait until the "
			 "broker runs with as many cores again",
			 BK_TIMER_TOPIC, t->nq, bk->ncores, bk->ncores);
	err = meta_timer_load(&store_io_posix, x->timer_path, mk, META_TIMER_QUEUES_MAX);
	if (err) {
		log_err(BK_TAG, "%s: %s", x->timer_path, strerror(-err));
		return err;
	}
	x->timer = calloc(1, sizeof(*x->timer));
	if (x->timer == NULL)
		return -ENOMEM;
	x->timer->x = x;
	for (uint32_t i = 0; i < bk->ncores; i++) {
		struct bk_core *c = &bk->cores[i];
		struct bk_timer_q *q = aligned_alloc(64, sizeof(*q));

		if (q == NULL)
			return -ENOMEM;
		memset(q, 0, sizeof(*q));
		c->tq = q;
		q->sq = t->sq[i];
		q->items = calloc(BK_TIMER_RING, sizeof(*q->items));
		if (q->items == NULL)
			return -ENOMEM;
		/* What a save writes until the core publishes a mark of its own. */
		atomic_store_relaxed(&q->done_w, mk[i].done_ms);
		atomic_store_relaxed(&q->done_e, mk[i].done_qoff);
		atomic_store_relaxed(&q->done_log, mk[i].done_log);
		err = rebuild(x, i, &mk[i], &x->timer->sh[i]);
		if (err) {
			log_err(BK_TAG, "timers, core %u: %s", i, strerror(-err));
			return err;
		}
	}
	log_info(BK_TAG,
		 "delivery-time timers: up to %" PRIu64 " s ahead, written again every %" PRIu64
		 " s until due, %s",
		 bk->conf.timer_max_ms / 1000, bk->conf.timer_roll_ms / 1000, x->timer_path);
	return 0;
}

/* Items the ring of @q has room for (producer side). */
static uint32_t
ring_room(struct bk_timer_q *q)
{
	uint32_t head = atomic_load_relaxed(&q->head);

	if (head - q->prod_tail_cache >= BK_TIMER_RING - EXP_BATCH)
		/* acquire: pairs with the core's release of tail */
		q->prod_tail_cache = atomic_load_acquire(&q->tail);
	return BK_TIMER_RING - (head - q->prod_tail_cache);
}

/* One round for core @i. Return: true when there was work. */
static bool
shard_round(struct bk_timer *tm, uint32_t i, int64_t now)
{
	struct bk_ctl *x = tm->x;
	struct bk_timer_q *q = x->bk.cores[i].tq;
	struct timer_shard *s = &tm->sh[i];
	const struct cq *cq = store_queue_cq(q->sq);
	uint64_t max = store_queue_max(x->bk.store, q->sq);
	uint32_t head = atomic_load_relaxed(&q->head), room;
	bool work = false;

	for (unsigned b = 0; s->enq_off < max && b < ENQ_BUDGET; b++) {
		struct cq_unit u;
		struct tw_ent e;
		int err;

		if (cq_get(cq, s->enq_off, &u) != 0) {
			uint64_t min = cq_min(cq);

			if (min <= s->enq_off)
				break; /* not readable yet */
			log_err(BK_TAG,
				"timers, core %u: units %" PRIu64 "..%" PRIu64
				" were deleted by retention before they were read",
				i, s->enq_off, min - 1);
			s->enq_off = min;
			continue;
		}
		e = (struct tw_ent){.phys = u.phys, .due_ms = u.tag_hash, .size = u.size};
		err = tw_add(s->tw, &e);
		if (err) {
			if (!s->add_failed)
				log_err(BK_TAG, "timers, core %u: the wheel: %s (retrying)", i,
					strerror(-err));
			s->add_failed = true;
			break;
		}
		s->add_failed = false;
		s->enq_off++;
		work = true;
	}
	room = ring_room(q);
	while (room > 1) {
		size_t want = SP_MIN((size_t)(room - 1), (size_t)EXP_BATCH);
		size_t n = tw_expire(s->tw, now, tm->out, want);

		for (size_t k = 0; k < n; k++) {
			q->items[head % BK_TIMER_RING] =
				(struct bk_timer_item){.phys = tm->out[k].phys,
						       .w = tm->out[k].due_ms,
						       .size = tm->out[k].size};
			head++;
			room--;
		}
		s->handed += n;
		work |= n > 0;
		if (n < want)
			break;
	}
	/*
	 * Caught up: a mark for what is handed over (when anything was, or
	 * more was read). None once the wheel lost timers to an unreadable
	 * file: the saved progress stays before them, a restart rebuilds them.
	 */
	if (tw_lost(s->tw) > 0 && !s->lost_logged) {
		log_err(BK_TAG,
			"timers, core %u: %" PRIu64 " lost in the wheel's files: progress is no "
			"longer saved, a restart brings them back from the queue",
			i, tw_lost(s->tw));
		s->lost_logged = true;
	}
	if (tw_cursor(s->tw) > now && room > 0 && tw_lost(s->tw) == 0 &&
	    (s->handed > 0 || s->enq_off != s->mark_e)) {
		q->items[head % BK_TIMER_RING] =
			(struct bk_timer_item){.phys = -1, .w = tw_cursor(s->tw), .e = s->enq_off};
		head++;
		s->mark_e = s->enq_off;
		s->handed = 0;
	}
	/* release: publishes the items; pairs with the core's acquire of head */
	atomic_store_release(&q->head, head);
	return work;
}

/* The timer thread's sleep while no timer is pending. */
#define TIMER_IDLE_NS (5 * 1000 * 1000L)

static void *
timer_main(void *arg)
{
	struct bk_timer *tm = arg;
	struct bk *bk = &tm->x->bk;
	int64_t last_work = 0;

	pthread_setname_np(pthread_self(), "bk-timer");
	while (!atomic_load_relaxed(&tm->stop)) {
		int64_t now = clk_wall_ms();
		bool work = false;
		bool pending = false;

		for (uint32_t i = 0; i < bk->ncores; i++) {
			work |= shard_round(tm, i, now);
			pending |= tw_pending(tm->sh[i].tw) > 0;
		}
		if (work) {
			last_work = now;
		} else {
			/*
			 * Rounds every 0.5 ms while timers are pending or came within
			 * the last second; a broker with none wakes every TIMER_IDLE_NS
			 * (0.5 ms was 5% of a CPU with nothing to do). A timer due
			 * sooner than that after an idle spell is that much late.
			 */
			bool idle = !pending && now - last_work > 1000;
			struct timespec ts = {.tv_sec = 0,
					      .tv_nsec = idle ? TIMER_IDLE_NS : 500 * 1000L};

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int
bk_timer_start(struct bk_ctl *x)
{
	int err;

	if (x->timer == NULL)
		return 0;
	err = pthread_create(&x->timer->th, NULL, timer_main, x->timer);
	if (err) {
		log_err(BK_TAG, "timer thread: %s", strerror(err));
		return -err;
	}
	x->timer->running = true;
	return 0;
}

void
bk_timer_stop(struct bk_ctl *x)
{
	if (x->timer == NULL || !x->timer->running)
		return;
	atomic_store_relaxed(&x->timer->stop, true);
	pthread_join(x->timer->th, NULL);
	x->timer->running = false;
}

/* Core @c's published mark (seqlock read). */
static void
published(const struct bk_core *c, struct meta_timer_mark *m)
{
	const struct bk_timer_q *q = c->tq;

	for (;;) {
		uint32_t s0 = atomic_load_acquire(&q->seq);

		m->done_ms = atomic_load_relaxed(&q->done_w);
		m->done_qoff = atomic_load_relaxed(&q->done_e);
		m->done_log = atomic_load_relaxed(&q->done_log);
		atomic_thread_fence(memory_order_acquire);
		if ((s0 & 1) == 0 && atomic_load_relaxed(&q->seq) == s0)
			return;
	}
}

int
bk_timer_save(struct bk_ctl *x)
{
	struct meta_timer_mark mk[META_TIMER_QUEUES_MAX];
	int err;

	if (x->timer == NULL)
		return 0;
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		published(&x->bk.cores[i], &mk[i]);
	err = meta_timer_save(&store_io_posix, x->timer_path, META_TIMER_HEADER, mk, x->bk.ncores);
	if (err)
		log_err(BK_TAG, "saving %s: %s", x->timer_path, strerror(-err));
	return err;
}

void
bk_timer_report(const struct bk_ctl *x)
{
	if (x->timer == NULL)
		return;
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];
		const struct timer_shard *s = &x->timer->sh[i];

		if (c->st.timed || c->st.timer_delivered || tw_pending(s->tw))
			log_info(BK_TAG,
				 "core %u timers: timed %" PRIu64 " delivered %" PRIu64
				 " rolled %" PRIu64 " dropped %" PRIu64 " pending %" PRIu64
				 " lost %" PRIu64 " skipped after a crash %" PRIu64,
				 i, c->st.timed, c->st.timer_delivered, c->st.timer_rolled,
				 c->st.timer_dropped, tw_pending(s->tw), tw_lost(s->tw),
				 s->skipped);
	}
}

void
bk_timer_fini(struct bk_ctl *x)
{
	if (x->timer == NULL)
		return;
	bk_timer_stop(x);
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		struct bk_core *c = &x->bk.cores[i];

		tw_close(x->timer->sh[i].tw);
		if (c->tq != NULL) {
			free(c->tq->items);
			free(c->tq);
			c->tq = NULL;
		}
	}
	free(x->timer);
	x->timer = NULL;
}
