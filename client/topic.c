// SPDX-License-Identifier: Apache-2.0
/*
 * topic.c - the client's route cache: one immutable snapshot per topic.
 *
 * A topic's route is fetched from the NameServer (sp_route_fetch) on the
 * first use of the topic, by the thread that uses it, and then refreshed by
 * the route thread every route_refresh_ms, or soon after a REDIRECT told a
 * producer that the queue->core map it used is stale. A snapshot flattens
 * the route into sorted lists of addressable queues (broker, queue id,
 * owning core); queues of a broker that sent no dataplane endpoint are
 * left out, since this client cannot reach them.
 *
 * A topic nobody created yet has no route (TOPIC_NOT_EXIST). Like
 * RocketMQ's producer, sp__topic_get_pub() then borrows the route of
 * TBW102, the topic every broker with autoCreateTopicEnable registers: its
 * writable brokers, each with its default queue count. The first SEND makes
 * the broker create the topic (SYSTEM_BUSY until its control thread has
 * published it; the producer backs off and resends), the broker registers
 * it, and the route thread, which refreshes provisional snapshots every
 * PROVISIONAL_REFRESH_MS, swaps in the real route. Consumers never see a
 * provisional snapshot: sp__topic_get() fetches the real route instead.
 *
 * Ownership: snapshots are immutable and refcounted under route_lock; the
 * cache holds one reference to the newest snapshot of each topic, callers
 * take their own with sp__topic_get() and drop it with sp__topic_put(). The
 * route thread swaps in new snapshots; readers keep using the one they hold.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_priv.h"
#include "common/clock.h"

#define TBW102 "TBW102" /* RocketMQ's AUTO_CREATE_TOPIC_KEY_TOPIC */
#define PROVISIONAL_REFRESH_MS 100
/*
 * After a provisional topic got its route, other brokers may still be
 * creating it (each creates it on its first SEND): keep refreshing quickly
 * this long, so their queues are picked up in time.
 */
#define AFTER_CREATE_FAST_MS 3000
#define REFRESH_MIN_GAP_MS 20 /* forced refreshes (after REDIRECT, BUSY) are coalesced */

static const char *
tq_broker_name(const struct sp_route *r, const struct sp__tq *q)
{
	return r->brokers[q->broker].name;
}

static const struct sp_route *sort_route; /* qsort has no context argument */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int
tq_cmp(const void *a, const void *b)
{
	const struct sp__tq *x = a;
	const struct sp__tq *y = b;
	int d = strcmp(tq_broker_name(sort_route, x), tq_broker_name(sort_route, y));

	if (d)
		return d;
	return (x->queue_id > y->queue_id) - (x->queue_id < y->queue_id);
}

void
sp__topic_free(struct sp__topic *t)
{
	if (!t)
		return;
	sp_route_free(t->route);
	free(t->wq);
	free(t->rq);
	free(t);
}

int
sp__topic_build(const char *name, struct sp_route *r, struct sp__topic **out)
{
	struct sp__topic *t;
	size_t nw = 0;
	size_t nr = 0;

	if (strlen(name) > SP_TOPIC_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < r->n_queues; i++) {
		const struct sp_route_queue *q = &r->queues[i];

		if (q->broker >= r->n_brokers || !r->brokers[q->broker].has_dp ||
		    !r->brokers[q->broker].dp_cores)
			continue;
		if ((q->perm & 2) && !r->brokers[q->broker].dp_is_slave)
			nw += q->write_queues;
		if (q->perm & 4)
			nr += q->read_queues;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->wq = calloc(nw ? nw : 1, sizeof(*t->wq));
	t->rq = calloc(nr ? nr : 1, sizeof(*t->rq));
	if (!t->wq || !t->rq) {
		free(t->wq);
		free(t->rq);
		free(t);
		return -ENOMEM;
	}
	strcpy(t->name, name);
	t->route = r;
	for (uint32_t i = 0; i < r->n_queues; i++) {
		const struct sp_route_queue *q = &r->queues[i];

		if (q->broker >= r->n_brokers || !r->brokers[q->broker].has_dp ||
		    !r->brokers[q->broker].dp_cores)
			continue;
		/* a slave's endpoint (its master is away) serves reads only */
		bool writable = (q->perm & 2) && !r->brokers[q->broker].dp_is_slave;

		for (uint32_t k = 0; writable && k < q->write_queues; k++)
			t->wq[t->n_wq++] = (struct sp__tq){
				.broker = q->broker,
				.queue_id = (int32_t)k,
				.core = sp_route_queue_core(r, q, k),
			};
		for (uint32_t k = 0; (q->perm & 4) && k < q->read_queues; k++)
			t->rq[t->n_rq++] = (struct sp__tq){
				.broker = q->broker,
				.queue_id = (int32_t)k,
				.core = sp_route_queue_core(r, q, k),
			};
	}
	pthread_mutex_lock(&sort_lock);
	sort_route = r;
	qsort(t->wq, t->n_wq, sizeof(*t->wq), tq_cmp);
	qsort(t->rq, t->n_rq, sizeof(*t->rq), tq_cmp);
	sort_route = NULL;
	pthread_mutex_unlock(&sort_lock);
	t->fetched_ns = clk_mono_ns();
	*out = t;
	return 0;
}

int
sp__topic_build_default(const char *name, struct sp_route *tbw, struct sp__topic **out)
{
	struct sp__topic *t;
	size_t nw = 0;

	if (strlen(name) > SP_TOPIC_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < tbw->n_queues; i++) {
		const struct sp_route_queue *q = &tbw->queues[i];

		if (q->broker < tbw->n_brokers && tbw->brokers[q->broker].has_dp &&
		    !tbw->brokers[q->broker].dp_is_slave && tbw->brokers[q->broker].dp_cores &&
		    (q->perm & 2))
			nw += q->write_queues;
	}
	if (!nw)
		return -ENOENT;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->wq = calloc(nw, sizeof(*t->wq));
	t->rq = calloc(1, sizeof(*t->rq));
	if (!t->wq || !t->rq) {
		free(t->wq);
		free(t->rq);
		free(t);
		return -ENOMEM;
	}
	strcpy(t->name, name);
	t->route = tbw;
	for (uint32_t i = 0; i < tbw->n_queues; i++) {
		const struct sp_route_queue *q = &tbw->queues[i];
		const struct sp_route_broker *b = &tbw->brokers[q->broker];

		if (q->broker >= tbw->n_brokers || !b->has_dp || b->dp_is_slave || !b->dp_cores ||
		    !(q->perm & 2))
			continue;
		/* the broker will create it with its own map: queue q on core q % cores */
		for (uint32_t k = 0; k < q->write_queues; k++)
			t->wq[t->n_wq++] = (struct sp__tq){
				.broker = q->broker,
				.queue_id = (int32_t)k,
				.core = (uint16_t)(k % b->dp_cores),
			};
	}
	pthread_mutex_lock(&sort_lock);
	sort_route = tbw;
	qsort(t->wq, t->n_wq, sizeof(*t->wq), tq_cmp);
	sort_route = NULL;
	pthread_mutex_unlock(&sort_lock);
	t->fetched_ns = clk_mono_ns();
	t->provisional = true;
	*out = t;
	return 0;
}

struct dp_addr
sp__tq_addr(const struct sp__topic *t, const struct sp__tq *q)
{
	const struct sp_route_broker *b = &t->route->brokers[q->broker];

	return (struct dp_addr){.ip = b->dp_ip, .port = (uint16_t)(b->dp_port + q->core)};
}

const struct sp__tq *
sp__topic_find(const struct sp__topic *t, const char *broker, int32_t qid, bool readable)
{
	const struct sp__tq *v = readable ? t->rq : t->wq;
	size_t n = readable ? t->n_rq : t->n_wq;

	for (size_t i = 0; i < n; i++) {
		if (v[i].queue_id != qid)
			continue;
		if (!broker || !broker[0] ||
		    strcmp(t->route->brokers[v[i].broker].name, broker) == 0)
			return &v[i];
	}
	return NULL;
}

/* ---- the cache ---- */

static struct sp__topic **
cache_slot(struct sp_client *c, const char *topic)
{
	for (size_t i = 0; i < c->n_topics; i++)
		if (strcmp(c->topics[i]->name, topic) == 0)
			return &c->topics[i];
	return NULL;
}

static void
put_locked(struct sp__topic *t)
{
	if (--t->refs == 0)
		sp__topic_free(t);
}

void
sp__topic_put(struct sp_client *c, struct sp__topic *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&c->route_lock);
	put_locked(t);
	pthread_mutex_unlock(&c->route_lock);
}

/* Installs @t (one reference for the cache). Return: the installed snapshot, referenced. */
struct sp__topic *
sp__topic_install(struct sp_client *c, struct sp__topic *t, bool replace)
{
	struct sp__topic **slot;
	struct sp__topic *res;

	pthread_mutex_lock(&c->route_lock);
	slot = cache_slot(c, t->name);
	if (slot && !replace) {
		sp__topic_free(t); /* another thread fetched it meanwhile */
		res = *slot;
	} else if (slot) {
		t->refs = 1;
		put_locked(*slot);
		*slot = t;
		res = t;
	} else {
		if (c->n_topics == c->cap_topics) {
			size_t cap = c->cap_topics ? c->cap_topics * 2 : 16;
			struct sp__topic **v = realloc(c->topics, cap * sizeof(*v));

			if (!v) {
				pthread_mutex_unlock(&c->route_lock);
				sp__topic_free(t);
				return NULL;
			}
			c->topics = v;
			c->cap_topics = cap;
		}
		t->refs = 1;
		c->topics[c->n_topics++] = t;
		res = t;
	}
	res->refs++;
	pthread_mutex_unlock(&c->route_lock);
	return res;
}

static int
fetch(struct sp_client *c, const char *topic, struct sp__topic **out)
{
	struct sp_route *r;
	int err;

	err = sp_route_fetch(c->namesrv, topic, c->cfg.route_timeout_ms, &r);
	if (err)
		return err;
	err = sp__topic_build(topic, r, out);
	if (err)
		sp_route_free(r);
	return err;
}

/* Retry and DLQ topics are made by SEND_BACK, never by a producer's first SEND. */
static bool
may_auto_create(const char *topic)
{
	return strncmp(topic, "%RETRY%", 7) != 0 && strncmp(topic, "%DLQ%", 5) != 0 &&
	       strcmp(topic, TBW102) != 0;
}

/* A provisional snapshot of @topic from TBW102's route. Return: 0 or -ENOENT, route errors. */
static int
fetch_default(struct sp_client *c, const char *topic, struct sp__topic **out)
{
	struct sp_route *r;
	int err;

	if (!may_auto_create(topic))
		return -ENOENT;
	err = sp_route_fetch(c->namesrv, TBW102, c->cfg.route_timeout_ms, &r);
	if (err)
		return err;
	err = sp__topic_build_default(topic, r, out);
	if (err)
		sp_route_free(r);
	return err;
}

/* Return: 0 with @topic's cached snapshot, referenced, unless it is missing or provisional and !@pub. */
static bool
cache_get(struct sp_client *c, const char *topic, bool pub, struct sp__topic **out)
{
	struct sp__topic **slot;
	bool hit = false;

	pthread_mutex_lock(&c->route_lock);
	slot = cache_slot(c, topic);
	if (slot && (pub || !(*slot)->provisional)) {
		(*slot)->refs++;
		*out = *slot;
		hit = true;
	}
	pthread_mutex_unlock(&c->route_lock);
	return hit;
}

static int
topic_get(struct sp_client *c, const char *topic, bool pub, struct sp__topic **out)
{
	struct sp__topic *t;
	bool replace = false;
	int err;

	if (!topic || !topic[0] || strlen(topic) > SP_TOPIC_MAX)
		return -EINVAL;
	if (cache_get(c, topic, pub, out))
		return 0;
	err = fetch(c, topic, &t);
	if (!err) {
		replace = true; /* the real route wins over a provisional one */
	} else if (err == -ENOENT && pub) {
		err = fetch_default(c, topic, &t);
		if (!err)
			sp__log(c, SP_LOG_INFO, "topic %s has no route yet: sending by %s's", topic,
				TBW102);
	}
	if (err) {
		sp__log(c, err == -ENOENT ? SP_LOG_DEBUG : SP_LOG_WARN, "route of topic %s: %s",
			topic, sp_strerror(err));
		return err;
	}
	t = sp__topic_install(c, t, replace);
	if (!t)
		return -ENOMEM;
	if (t->provisional)
		sp__topic_refresh_soon(c, topic);
	*out = t;
	return 0;
}

int
sp__topic_get(struct sp_client *c, const char *topic, struct sp__topic **out)
{
	return topic_get(c, topic, false, out);
}

int
sp__topic_get_pub(struct sp_client *c, const char *topic, struct sp__topic **out)
{
	return topic_get(c, topic, true, out);
}

int
sp__topic_refresh_now(struct sp_client *c, const char *topic)
{
	struct sp__topic *t;
	int err = fetch(c, topic, &t);

	if (err)
		return err;
	t = sp__topic_install(c, t, true);
	if (!t)
		return -ENOMEM;
	sp__topic_put(c, t);
	return 0;
}

void
sp__topic_refresh_fast(struct sp_client *c, uint32_t ms)
{
	pthread_mutex_lock(&c->route_lock);
	c->route_fast_until_ns =
		SP_MAX(c->route_fast_until_ns, clk_mono_ns() + (uint64_t)ms * 1000000ull);
	c->route_refresh_now = true;
	pthread_cond_signal(&c->route_cond);
	pthread_mutex_unlock(&c->route_lock);
}

void
sp__topic_refresh_soon(struct sp_client *c, const char *topic)
{
	(void)topic; /* the route thread refreshes every cached topic */
	pthread_mutex_lock(&c->route_lock);
	if (!c->route_refresh_now) {
		c->route_refresh_now = true;
		pthread_cond_signal(&c->route_cond);
	}
	pthread_mutex_unlock(&c->route_lock);
}

/* Return: whether a provisional snapshot is left in the cache. */
static bool
refresh_all(struct sp_client *c)
{
	char(*names)[SP_TOPIC_MAX + 1];
	bool *prov;
	bool left = false;
	size_t n;

	pthread_mutex_lock(&c->route_lock);
	n = c->n_topics;
	names = calloc(n ? n : 1, sizeof(*names));
	prov = calloc(n ? n : 1, sizeof(*prov));
	for (size_t i = 0; names && prov && i < n; i++) {
		strcpy(names[i], c->topics[i]->name);
		prov[i] = c->topics[i]->provisional;
	}
	pthread_mutex_unlock(&c->route_lock);
	if (!names || !prov) {
		free(names);
		free(prov);
		return true;
	}
	for (size_t i = 0; i < n; i++) {
		struct sp__topic *t;
		int err = fetch(c, names[i], &t);

		if (err == -ENOENT && prov[i]) {
			/* not registered yet: keep TBW102's brokers a little longer */
			left = true;
			continue;
		}
		if (err) {
			/* keep the old route: a NameServer hiccup must not stop sends */
			sp__log(c, SP_LOG_WARN, "route refresh of %s: %s", names[i],
				sp_strerror(err));
			continue;
		}
		if (prov[i]) {
			sp__log(c, SP_LOG_INFO, "topic %s: route found", names[i]);
			pthread_mutex_lock(&c->route_lock);
			c->route_fast_until_ns = clk_mono_ns() + AFTER_CREATE_FAST_MS * 1000000ull;
			pthread_mutex_unlock(&c->route_lock);
		}
		t = sp__topic_install(c, t, true);
		if (t)
			sp__topic_put(c, t);
	}
	free(names);
	free(prov);
	return left;
}

static void *
route_main(void *arg)
{
	struct sp_client *c = arg;
	uint64_t last = clk_mono_ns();
	bool provisional = false;

	pthread_mutex_lock(&c->route_lock);
	while (!c->route_stop) {
		uint64_t now = clk_mono_ns();
		bool fast = provisional || now < c->route_fast_until_ns;
		uint64_t period =
			(uint64_t)(fast ? PROVISIONAL_REFRESH_MS : c->cfg.route_refresh_ms) *
			1000000ull;
		uint64_t left;
		struct timespec ts;

		if (c->route_refresh_now && now - last >= REFRESH_MIN_GAP_MS * 1000000ull)
			period = 0;
		if (now - last >= period) {
			c->route_refresh_now = false;
			pthread_mutex_unlock(&c->route_lock);
			provisional = refresh_all(c);
			last = clk_mono_ns();
			pthread_mutex_lock(&c->route_lock);
			continue;
		}
		left = period - (now - last);
		if (c->route_refresh_now)
			left = SP_MIN(left, REFRESH_MIN_GAP_MS * 1000000ull - (now - last));
		clock_gettime(CLOCK_REALTIME, &ts);
		{
			uint64_t ns = (uint64_t)ts.tv_nsec + left % 1000000000ull;

			ts.tv_sec += (time_t)(left / 1000000000ull + ns / 1000000000ull);
			ts.tv_nsec = (long)(ns % 1000000000ull);
		}
		pthread_cond_timedwait(&c->route_cond, &c->route_lock, &ts);
	}
	pthread_mutex_unlock(&c->route_lock);
	return NULL;
}

int
sp__route_thread_start(struct sp_client *c)
{
	return -pthread_create(&c->route_thread, NULL, route_main, c);
}

void
sp__route_thread_stop(struct sp_client *c)
{
	pthread_mutex_lock(&c->route_lock);
	c->route_stop = true;
	pthread_cond_signal(&c->route_cond);
	pthread_mutex_unlock(&c->route_lock);
	pthread_join(c->route_thread, NULL);
}

int
sp_topic_queues(struct sp_client *c, const char *topic, bool readable, struct sp_mq **out,
		size_t *n)
{
	struct sp__topic *t;
	const struct sp__tq *v;
	struct sp_mq *m;
	size_t cnt;
	int err;

	err = sp__topic_get(c, topic, &t);
	if (err)
		return err;
	v = readable ? t->rq : t->wq;
	cnt = readable ? t->n_rq : t->n_wq;
	m = calloc(cnt ? cnt : 1, sizeof(*m));
	if (!m) {
		sp__topic_put(c, t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cnt; i++) {
		strcpy(m[i].topic, t->name);
		strcpy(m[i].broker, t->route->brokers[v[i].broker].name);
		m[i].queue_id = v[i].queue_id;
	}
	sp__topic_put(c, t);
	*out = m;
	*n = cnt;
	return 0;
}
