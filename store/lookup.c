// SPDX-License-Identifier: Apache-2.0
/*
 * lookup.c - finding messages (store_int.h): a queue offset by store time,
 * the store time of a unit, messages by key through the IndexFiles, and the
 * indexer's rounds that build them.
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

struct time_ctx {
	const struct store *s;
};

/*
 * The store time of the first record at or after global @phys, BLANKs and
 * spans recovery blanked skipped: what a lost message's time is taken to be.
 */
static int
lost_unit_time(const struct store *s, int64_t phys, int64_t *out)
{
	uint32_t shard = clog_phys_shard(phys);
	const struct clog *c;
	struct wire_msg m;
	uint64_t off;
	long r;

	if (shard >= s->cfg.shards)
		return -ERANGE;
	c = s->shard[shard].clog;
	off = clog_phys_local(phys);
	/* Inside a blanked span: the log goes on at the next segment. */
	if (clog_read(c, off, &(const uint8_t *){NULL}, &(uint64_t){0}) == -ENOENT)
		off += clog_seg_size(c) - off % clog_seg_size(c);
	r = store__next_record(c, &off, s->cfg.sync_flush ? clog_flushed(c) : clog_written(c), &m);
	if (r <= 0)
		return r == 0 ? -ERANGE : (int)r;
	*out = m.store_ts;
	return 0;
}

static int
unit_store_time(void *ctx, const struct cq_unit *u, int64_t *out)
{
	const struct time_ctx *t = ctx;
	const uint8_t *rec;
	struct wire_msg m;
	long r;

	/*
	 * A lost message: the time of the next one the log kept (keeps the
	 * search monotonic). A lost unit points at its span's BLANK, or just
	 * before that next one.
	 */
	if (u->size == CQ_LOST_SIZE) {
		r = store_get_phys(t->s, u->phys + CQ_LOST_SIZE, &rec);
		if (r > 0 && wire_rec_decode(rec, (size_t)r, 0, &m) == r) {
			*out = m.store_ts;
			return 0;
		}
		return lost_unit_time(t->s, u->phys, out);
	}
	r = store_get_phys(t->s, u->phys, &rec);
	if (r == -ENOENT)
		return lost_unit_time(t->s, u->phys, out);
	if (r < 0)
		return (int)r;
	if (wire_rec_decode(rec, (size_t)r, 0, &m) != r)
		return -EBADMSG;
	*out = m.store_ts;
	return 0;
}

int
store_search_time(const struct store *s, const struct store_queue *q, int64_t ms, uint64_t *qoff)
{
	struct time_ctx t = {.s = s};

	return cq_search(q->cq, ms, unit_store_time, &t, qoff);
}

int
store_queue_time(const struct store *s, const struct store_queue *q, uint64_t qoff, int64_t *ms)
{
	struct time_ctx t = {.s = s};
	struct cq_unit u;
	int rc;

	if (qoff < cq_min(q->cq) || qoff >= store_queue_max(s, q))
		return -ENOENT;
	rc = cq_get(q->cq, qoff, &u);
	if (rc != 0)
		return rc;
	return unit_store_time(&t, &u, ms);
}

int
store_earliest_time(const struct store *s, const struct store_queue *q, int64_t *ms)
{
	return store_queue_time(s, q, cq_min(q->cq), ms);
}

/* ---- key index ---- */

static bool
rec_has_key(const struct wire_msg *m, const char *key, size_t klen)
{
	const char *v;
	size_t vlen;

	if (wire_props_get(m->props, m->props_len, "UNIQ_KEY", &v, &vlen) && vlen == klen &&
	    memcmp(v, key, klen) == 0)
		return true;
	if (!wire_props_get(m->props, m->props_len, "KEYS", &v, &vlen))
		return false;
	for (size_t i = 0; i < vlen;) {
		size_t j = i;

		while (j < vlen && v[j] != ' ')
			j++;
		if (j - i == klen && memcmp(v + i, key, klen) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

long
store_query_key(struct store *s, const char *topic, const char *key, int64_t begin_ms,
		int64_t end_ms, int64_t *phys, size_t max)
{
	char full[WIRE_TOPIC_MAX + 2 + 1024 + 8];
	size_t tlen = strlen(topic);
	size_t klen = strlen(key);
	size_t found = 0;
	int64_t cand[64];

	long rc = 0;
	unsigned e;

	if (tlen == 0 || tlen > WIRE_TOPIC_MAX || klen == 0 || klen > 1024)
		return -EINVAL;
	snprintf(full, sizeof(full), "%s#%s", topic, key);
	e = store__bg_read_enter(s); /* any thread: not one the reader_sync hook covers */
	for (uint32_t i = 0; i < s->cfg.shards && found < max; i++) {
		long n = idx_query(s->shard[i].idx, full, tlen + 1 + klen, begin_ms, end_ms, cand,
				   ARRAY_SIZE(cand));

		if (n < 0) {
			rc = n;
			break;
		}
		for (long k = 0; k < n && found < max; k++) {
			const uint8_t *rec;
			struct wire_msg m;
			long r = store_get_phys(s, cand[k], &rec);

			if (r <= 0 || wire_rec_decode(rec, (size_t)r, 0, &m) != r)
				continue;
			if (m.topic_len != tlen || memcmp(m.topic, topic, tlen) != 0 ||
			    !rec_has_key(&m, key, klen))
				continue;
			phys[found++] = cand[k];
		}
	}
	store__bg_read_exit(s, e);
	return rc < 0 ? rc : (long)found;
}

long
store_copy_phys(struct store *s, int64_t phys, uint8_t *buf, size_t cap)
{
	const uint8_t *rec;
	unsigned e = store__bg_read_enter(s); /* any thread: as store_query_key() */
	long n = store_get_phys(s, phys, &rec);

	if (n > 0 && (size_t)n <= cap)
		memcpy(buf, rec, (size_t)n);
	store__bg_read_exit(s, e);
	return n;
}

static int
index_record(struct idx *x, const struct wire_msg *m, int64_t phys)
{
	char key[WIRE_TOPIC_MAX + 1 + WIRE_PROPS_MAX];
	const char *v;
	size_t vlen;
	int rc;

	memcpy(key, m->topic, m->topic_len);
	key[m->topic_len] = '#';
	if (wire_props_get(m->props, m->props_len, "UNIQ_KEY", &v, &vlen) && vlen > 0) {
		memcpy(key + m->topic_len + 1, v, vlen);
		rc = idx_put(x, key, m->topic_len + 1 + vlen, phys, m->store_ts);
		if (rc != 0)
			return rc;
	}
	if (!wire_props_get(m->props, m->props_len, "KEYS", &v, &vlen))
		return 0;
	for (size_t i = 0; i < vlen;) {
		size_t j = i;

		while (j < vlen && v[j] != ' ')
			j++;
		if (j > i) {
			memcpy(key + m->topic_len + 1, v + i, j - i);
			rc = idx_put(x, key, m->topic_len + 1 + (j - i), phys, m->store_ts);
			if (rc != 0)
				return rc;
		}
		i = j + 1;
	}
	return 0;
}

long
store_index_round(struct store *s)
{
	long done = 0;

	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		struct store_shard *sh = &s->shard[i];
		uint64_t end = s->cfg.sync_flush ? clog_flushed(sh->clog) : clog_written(sh->clog);
		uint64_t pos = atomic_load_relaxed(&sh->idx_pos);

		if (pos < clog_min(sh->clog))
			pos = clog_min(sh->clog);
		struct wire_msg m;
		long r = 0;

		while (done < 4096 && (r = store__next_record(sh->clog, &pos, end, &m)) > 0) {
			if ((m.sys_flag & WIRE_SYSFLAG_TX_MASK) != WIRE_SYSFLAG_TX_ROLLBACK) {
				int rc = index_record(sh->idx, &m, clog_phys(i, pos));

				if (rc != 0) {
					atomic_store_relaxed(&sh->idx_pos, pos);
					return rc;
				}
			}
			pos += (uint64_t)r;
			done++;
		}
		atomic_store_relaxed(&sh->idx_pos, pos);
		if (r < 0)
			return r;
	}
	return done;
}
