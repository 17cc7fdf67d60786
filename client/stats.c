// SPDX-License-Identifier: Apache-2.0
/*
 * stats.c - per-broker send figures for the application's stats callback
 * (sp_client_cfg.stats): attempts, failures, retries, attempts in flight,
 * and the latency of answered attempts (handed to the port -> answer) as
 * percentiles over each interval, on a thread of its own ("sp-stats") so a
 * slow callback delays nothing else.
 *
 * The producer counts (producer.c: sp__stats_*); the figures are under
 * c->stats_lock, a short critical section per attempt. Without a callback
 * nothing is counted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_priv.h"
#include "common/clock.h"
#include "common/hist.h"

#define STATS_HIST_MAX (10ull * 1000000000ull) /* 10 s: longer answers count as that */

/* The broker's row, created on first use. Context: c->stats_lock held. */
static struct sp__bstats *
row(struct sp_client *c, const char *broker)
{
	struct sp__bstats *v;

	for (size_t i = 0; i < c->n_bst; i++)
		if (strcmp(c->bst[i].broker, broker) == 0)
			return &c->bst[i];
	v = realloc(c->bst, (c->n_bst + 1) * sizeof(*v));
	if (v == NULL)
		return NULL;
	c->bst = v;
	v = &c->bst[c->n_bst];
	memset(v, 0, sizeof(*v));
	if (hist_create(STATS_HIST_MAX, &v->lat) != 0)
		return NULL;
	snprintf(v->broker, sizeof(v->broker), "%s", broker);
	c->n_bst++;
	return v;
}

void
sp__stats_sent(struct sp_client *c, const char *broker)
{
	struct sp__bstats *r;

	if (!c->cfg.stats)
		return;
	pthread_mutex_lock(&c->stats_lock);
	if ((r = row(c, broker)) != NULL)
		r->in_flight++;
	pthread_mutex_unlock(&c->stats_lock);
}

void
sp__stats_answer(struct sp_client *c, const char *broker, uint64_t lat_ns, bool answered)
{
	struct sp__bstats *r;

	if (!c->cfg.stats)
		return;
	pthread_mutex_lock(&c->stats_lock);
	if ((r = row(c, broker)) != NULL) {
		r->in_flight -= r->in_flight > 0;
		r->sends++;
		if (answered)
			hist_record(r->lat, lat_ns < STATS_HIST_MAX ? lat_ns : STATS_HIST_MAX);
	}
	pthread_mutex_unlock(&c->stats_lock);
}

void
sp__stats_count(struct sp_client *c, const char *broker, bool retry)
{
	struct sp__bstats *r;

	if (!c->cfg.stats)
		return;
	pthread_mutex_lock(&c->stats_lock);
	if ((r = row(c, broker)) != NULL) {
		if (retry)
			r->retries++;
		else
			r->errors++;
	}
	pthread_mutex_unlock(&c->stats_lock);
}

/* Every stats_interval_ms: the interval's figures to the callback, then start over. */
static void *
stats_main(void *arg)
{
	struct sp_client *c = arg;

	pthread_setname_np(pthread_self(), "sp-stats");
	pthread_mutex_lock(&c->stats_lock);
	while (!c->stats_stop) {
		struct sp_broker_stats *out;
		struct timespec ts;
		size_t n;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += c->cfg.stats_interval_ms / 1000;
		ts.tv_nsec += (long)(c->cfg.stats_interval_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!c->stats_stop &&
		       pthread_cond_timedwait(&c->stats_cond, &c->stats_lock, &ts) == 0)
			;
		if (c->stats_stop)
			break;
		n = c->n_bst;
		out = calloc(n + 1, sizeof(*out));
		for (size_t i = 0; out && i < n; i++) {
			struct sp__bstats *r = &c->bst[i];

			out[i] = (struct sp_broker_stats){
				.sends = r->sends,
				.errors = r->errors,
				.retries = r->retries,
				.in_flight = (uint64_t)r->in_flight,
				.p50_ns = hist_percentile(r->lat, 50),
				.p99_ns = hist_percentile(r->lat, 99),
				.p999_ns = hist_percentile(r->lat, 99.9),
				.max_ns = hist_max(r->lat),
			};
			memcpy(out[i].broker, r->broker, sizeof(out[i].broker));
			r->sends = r->errors = r->retries = 0;
			hist_reset(r->lat);
		}
		pthread_mutex_unlock(&c->stats_lock); /* the callback runs unlocked, on copies */
		if (out)
			c->cfg.stats(c->cfg.stats_arg, out, n);
		free(out);
		pthread_mutex_lock(&c->stats_lock);
	}
	pthread_mutex_unlock(&c->stats_lock);
	return NULL;
}

int
sp__stats_start(struct sp_client *c)
{
	pthread_mutex_init(&c->stats_lock, NULL);
	pthread_cond_init(&c->stats_cond, NULL);
	if (!c->cfg.stats)
		return 0;
	if (!c->cfg.stats_interval_ms)
		c->cfg.stats_interval_ms = 10000;
	return -pthread_create(&c->stats_thread, NULL, stats_main, c);
}

void
sp__stats_stop(struct sp_client *c)
{
	if (c->cfg.stats) {
		pthread_mutex_lock(&c->stats_lock);
		c->stats_stop = true;
		pthread_cond_signal(&c->stats_cond);
		pthread_mutex_unlock(&c->stats_lock);
		pthread_join(c->stats_thread, NULL);
	}
	for (size_t i = 0; i < c->n_bst; i++)
		hist_destroy(c->bst[i].lat);
	free(c->bst);
	c->bst = NULL;
	c->n_bst = 0;
	pthread_mutex_destroy(&c->stats_lock);
	pthread_cond_destroy(&c->stats_cond);
}
