// SPDX-License-Identifier: Apache-2.0
/*
 * queues.c - the store's queue registry (store_int.h): one ConsumeQueue per
 * (topic, queue id), found by hash under the registry mutex, created on
 * first use, retired when its topic is deleted (kept mapped until close).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bytes_priv.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "common/log.h"
#include "store/idx.h"
#include "store/store.h"
#include "store_priv.h"
#include "store_int.h"

static uint32_t
qmap_hash(const char *topic, size_t len, uint32_t qid)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)topic[i]) * 16777619u;
	h = (h ^ qid) * 16777619u;
	return h;
}

struct store_queue *
store__qmap_find(struct store *s, const char *topic, size_t len, uint32_t qid)
{
	for (struct store_queue *q = s->qmap[qmap_hash(topic, len, qid) & s->qmap_mask]; q;
	     q = q->hnext) {
		if (q->qid == qid && q->topic_len == len && memcmp(q->topic, topic, len) == 0)
			return q;
	}
	return NULL;
}

/*
 * Twice the buckets once there are two queues a bucket: a fixed 4,096 made
 * a lookup walk ~100 queues at 400,000 (18% of a start's CPU). Caller
 * holds qlock. Return: 0, -ENOMEM (the map stays as it was, and works).
 */
static int
qmap_grow(struct store *s)
{
	uint32_t n = (s->qmap_mask + 1) * 2;
	struct store_queue **m = calloc(n, sizeof(*m));

	if (m == NULL)
		return -ENOMEM;
	for (uint32_t b = 0; b <= s->qmap_mask; b++) {
		struct store_queue *q = s->qmap[b];

		while (q != NULL) {
			struct store_queue *next = q->hnext;
			uint32_t h = qmap_hash(q->topic, q->topic_len, q->qid) & (n - 1);

			q->hnext = m[h];
			m[h] = q;
			q = next;
		}
	}
	free(s->qmap);
	s->qmap = m;
	s->qmap_mask = n - 1;
	return 0;
}

int
store__qmap_init(struct store *s)
{
	s->qmap = calloc(QMAP_BUCKETS, sizeof(*s->qmap));
	s->qmap_mask = QMAP_BUCKETS - 1;
	return s->qmap == NULL ? -ENOMEM : 0;
}

/* Find or open the queue. Caller holds qlock. */
/*
 * Units per ConsumeQueue file of @topic: mapedFileSizeConsumeQueue's, but a
 * sixteenth for STORE_SCHED_TOPIC, whose levels x cores queues each get a
 * first file at start (pre-allocated and pre-faulted): 36 such files of
 * 5.7 MB were 207 MB of page cache before any delayed message.
 */
uint32_t
store__queue_units(const struct store *s, const char *topic, size_t len)
{
	if (len == sizeof(STORE_SCHED_TOPIC) - 1 && memcmp(topic, STORE_SCHED_TOPIC, len) == 0)
		return SP_MAX(s->cfg.cq_units / 16, SP_MIN(s->cfg.cq_units, 1024u));
	return s->cfg.cq_units;
}

int
store__queue_get_locked(struct store *s, const char *topic, size_t len, uint32_t qid,
			uint32_t shard, struct store_queue **out)
{
	struct store_queue *q;
	char dir[PATH_MAX];
	uint32_t h;
	int rc;

	if (shard >= s->cfg.shards)
		return -EINVAL;
	q = store__qmap_find(s, topic, len, qid);
	if (q != NULL) {
		atomic_store_release(&q->shard, shard);
		*out = q;
		return 0;
	}
	/* The topic rule also keeps paths inside the store. */
	if (!wire_topic_name_ok(topic, len) || shard >= s->cfg.shards)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	memcpy(q->topic, topic, len);
	q->topic_len = (uint8_t)len;
	q->qid = qid;
	atomic_store_relaxed(&q->shard, shard);
	snprintf(dir, sizeof(dir), "%s/%.*s/%u", s->cq_dir, (int)len, topic, qid);
	rc = (s->queues_opened ? cq_open_new : cq_open)(s->io, dir,
							store__queue_units(s, topic, len), &q->cq);
	if (rc != 0) {
		free(q);
		return rc;
	}
	if (s->n_queues >= 2 * ((size_t)s->qmap_mask + 1))
		(void)qmap_grow(s); /* without memory, longer chains */
	h = qmap_hash(topic, len, qid) & s->qmap_mask;
	q->hnext = s->qmap[h];
	s->qmap[h] = q;
	q->lnext = s->queues;
	s->queues = q;
	s->n_queues++;
	*out = q;
	return 0;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

long
store_queue_topics(struct store *s, char (*out)[WIRE_TOPIC_MAX + 1], size_t max)
{
	size_t n = 0;
	size_t k = 0;

	pthread_mutex_lock(&s->qlock);
	for (struct store_queue *q = s->queues; q != NULL; q = q->lnext) {
		/* A topic's queues are mostly next to each other: the sort below does the rest. */
		if (n > 0 && strlen(out[n - 1]) == q->topic_len &&
		    memcmp(out[n - 1], q->topic, q->topic_len) == 0)
			continue;
		if (n == max) {
			pthread_mutex_unlock(&s->qlock);
			return -ENOSPC;
		}
		memcpy(out[n], q->topic, q->topic_len);
		out[n][q->topic_len] = '\0';
		n++;
	}
	pthread_mutex_unlock(&s->qlock);
	/* Sorted and unique: O(N log N), where a search per queue was O(N^2). */
	qsort(out, n, sizeof(out[0]), name_cmp);
	for (size_t i = 0; i < n; i++)
		if (k == 0 || strcmp(out[k - 1], out[i]) != 0)
			memmove(out[k++], out[i], sizeof(out[0]));
	return (long)k;
}

long
store_queue_retire(struct store *s, const char *topic)
{
	size_t len = strlen(topic);
	char dir[PATH_MAX];
	long n = 0;

	if (!wire_topic_name_ok(topic, len))
		return -EINVAL;
	pthread_mutex_lock(&s->qlock);
	for (struct store_queue **pp = &s->queues; *pp != NULL;) {
		struct store_queue *q = *pp;
		struct store_queue **hp;

		if (q->topic_len != len || memcmp(q->topic, topic, len) != 0) {
			pp = &q->lnext;
			continue;
		}
		for (hp = &s->qmap[qmap_hash(topic, len, q->qid) & s->qmap_mask]; *hp != q;
		     hp = &(*hp)->hnext)
			;
		*hp = q->hnext;
		q->retired = true; /* the flush pass and the service's list skip it */
		*pp = q->lnext;
		q->lnext = s->retired;
		s->retired = q;
		s->n_queues--;
		n++;
	}
	/*
	 * Its files go now, before anyone can open the name again (a slave's
	 * replication dispatches under this lock); the retired queues keep their
	 * mappings, so readers finish safely.
	 */
	snprintf(dir, sizeof(dir), "%s/%s", s->cq_dir, topic);
	{
		int rc = store__rm_rf(dir);

		if (rc != 0)
			log_warn(STORE_TAG, "removing %s: %s", dir, strerror(-rc));
	}
	pthread_mutex_unlock(&s->qlock);
	return n;
}

int
store_queue_get(struct store *s, const char *topic, uint32_t qid, uint32_t shard,
		struct store_queue **out)
{
	int rc;

	pthread_mutex_lock(&s->qlock);
	/* A new queue has no file until it takes a unit (cq_open()). */
	rc = store__queue_get_locked(s, topic, strlen(topic), qid, shard, out);
	pthread_mutex_unlock(&s->qlock);
	return rc;
}

struct clog *
store_clog(const struct store *s, uint32_t shard)
{
	return shard < s->cfg.shards ? s->shard[shard].clog : NULL;
}

void
store_queue_keep_writable(struct store_queue *q)
{
	atomic_store_relaxed(&q->full_ok, true);
}

struct cq *
store_queue_cq(const struct store_queue *q)
{
	return q->cq;
}
