// SPDX-License-Identifier: Apache-2.0
/*
 * verify.c - `sprocket-broker --verify`: an offline check of a store that
 * changes nothing in it (store/verify.h).
 *
 * DESIGN
 * Recovery (clog_recover.c) repairs as it reads: it extends short files,
 * recreates missing segments, blanks damage, writes files aside. A check
 * an operator runs to see what is wrong must not, so this file opens every
 * file O_RDONLY and maps it PROT_READ, and its scanner is its own: a pure
 * function over a segment's bytes (store_verify_seg(), also the fuzz
 * target), with the same validity rule as recovery (magic, size, BODYCRC,
 * PHYSICALOFFSET where it lies) and the same way past damage (the next
 * valid record, byte by byte). The segments stay mapped while the
 * ConsumeQueue units are checked against them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/clog.h"
#include "store/cq.h"
#include "store/verify.h"

#include "store_priv.h"
#include "wire/record.h"

/* Damaged ranges listed per shard in the report; the rest are counted only. */
#define VERIFY_LIST_MAX 64

/* The record at @in of the segment, valid where it lies: its length, else <= 0. */
static long
verify_rec_at(const uint8_t *p, uint64_t len, uint64_t seg_size, uint32_t shard, uint64_t start,
	      uint64_t in)
{
	struct wire_msg m;
	long r = wire_rec_decode(p + in, len - in, WIRE_REC_VERIFY_CRC, &m);

	if (r > 0 && (m.phys_offset != clog_phys(shard, start + in) ||
		      seg_size - in - (uint64_t)r < WIRE_BLANK_LEN))
		return -ERANGE;
	return r;
}

static const char *
verify_why(const uint8_t *p, uint64_t len, uint64_t in, long r)
{
	static const uint8_t zero[WIRE_BLANK_LEN];

	if (len - in >= WIRE_BLANK_LEN && memcmp(p + in, zero, WIRE_BLANK_LEN) == 0)
		return "zeros";
	switch (r) {
	case -EILSEQ:
		return "body CRC mismatch";
	case -EPROTO:
		return "bad magic";
	case -ERANGE:
		return "a record naming another offset";
	case -ENODATA:
		return "a BLANK that does not reach the segment's end";
	default:
		return "a malformed or truncated record";
	}
}

/* Past the last non-zero byte of [@in, @len). */
static uint64_t
verify_nonzero_end(const uint8_t *p, uint64_t in, uint64_t len)
{
	while (len > in && p[len - 1] == 0)
		len--;
	return len;
}

int
store_verify_seg(const uint8_t *p, uint64_t len, uint64_t seg_size, uint32_t shard, uint64_t start,
		 struct store_verify_seg_res *res, store_verify_bad_fn bad, void *arg)
{
	const uint8_t magic[4] = {0xDA, 0xA3, 0x20, 0xA7}; /* WIRE_MAGIC_MESSAGE, big-endian */
	uint64_t in = 0;

	memset(res, 0, sizeof(*res));
	if (len > seg_size)
		len = seg_size;
	while (in + WIRE_BLANK_LEN <= len) {
		uint64_t next = 0;
		long r = verify_rec_at(p, len, seg_size, shard, start, in);
		uint64_t hi;

		if (r > 0) {
			res->recs++;
			in += (uint64_t)r;
			res->end = in;
			continue;
		}
		if (r == -ENODATA) {
			uint32_t total;

			memcpy(&total, p + in, 4);
			if (__builtin_bswap32(total) == seg_size - in) {
				res->end = in;
				res->sealed = true;
				return 0;
			}
		}
		/* Zeros from here on: the log (or what the file holds of it) stops here. */
		hi = verify_nonzero_end(p, in, len);
		if (hi == in)
			return 0;
		for (uint64_t at = in + 1; at + WIRE_REC_FIXED_V4 <= hi; at++) {
			if (memcmp(p + at + 4, magic, 4) != 0)
				continue;
			if (verify_rec_at(p, len, seg_size, shard, start, at) > 0) {
				next = at;
				break;
			}
		}
		if (next == 0)
			next = hi;
		res->spans++;
		res->bytes += next - in;
		if (bad != NULL)
			bad(arg, in, next, verify_why(p, len, in, r));
		in = next;
		res->end = in;
	}
	return 0;
}

struct verify_seg {
	uint64_t start;
	const uint8_t *map;
	uint64_t len;
};

struct verify_span {
	uint64_t lo; /* local offsets */
	uint64_t hi;
};

/* Local offsets of records some unit points at (open addressing; key off + 1, 0 empty). */
struct verify_set {
	uint64_t *keys;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

struct verify_shard {
	struct verify_seg *segs;
	size_t nsegs;
	struct verify_span *bad;
	size_t nbad;
	size_t capbad;
	struct verify_set units; /* records a good unit points at */
};

/* A queue some records of the log have no unit in (listed up to VERIFY_LIST_MAX). */
struct verify_orphans {
	char topic[WIRE_TOPIC_MAX + 1];
	uint32_t qid;
	uint32_t shard;
	uint64_t n;
	uint64_t first; /* local offset of the first */
};

struct verify_ctx {
	FILE *out;
	uint32_t shard;
	uint64_t start;
	struct verify_shard *sh;
	int err;
};

static void
verify_bad(void *arg, uint64_t lo, uint64_t hi, const char *why)
{
	struct verify_ctx *x = arg;
	struct verify_shard *sh = x->sh;

	if (sh->nbad < VERIFY_LIST_MAX)
		fprintf(x->out,
			"shard %u: segment %020" PRIu64 ": damaged bytes %" PRIu64 "..%" PRIu64
			" (%" PRIu64 " bytes, %s)\n",
			x->shard, x->start, x->start + lo, x->start + hi, hi - lo, why);
	if (sh->nbad == sh->capbad) {
		size_t cap = sh->capbad ? sh->capbad * 2 : 16;
		struct verify_span *v = realloc(sh->bad, cap * sizeof(*v));

		if (v == NULL) {
			x->err = -ENOMEM;
			return;
		}
		sh->bad = v;
		sh->capbad = cap;
	}
	sh->bad[sh->nbad++] = (struct verify_span){x->start + lo, x->start + hi};
}

static bool
verify_is_digits(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* The 20-digit names in @dir, sorted, into *@out (malloc'd). Return: count or -errno. */
static long
verify_list(const char *dir, uint64_t **out)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t *v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	if (d == NULL)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		if (!verify_is_digits(de->d_name, 20))
			continue;
		if (store__u64_push(&v, &n, &cap, strtoull(de->d_name, NULL, 10)) != 0) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
	}
	closedir(d);
	if (n > 0)
		qsort(v, n, sizeof(*v), store__u64_cmp);
	*out = v;
	return (long)n;
}

/* Map <dir>/<20-digit start> read-only. Return: 0, or -errno. */
static int
verify_map(const char *dir, uint64_t start, struct verify_seg *s)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%020" PRIu64, dir, start);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -errno;
	}
	s->start = start;
	s->len = (uint64_t)st.st_size;
	s->map = NULL;
	if (s->len > 0) {
		void *m = mmap(NULL, s->len, PROT_READ, MAP_SHARED, fd, 0);

		if (m == MAP_FAILED) {
			close(fd);
			return -errno;
		}
		s->map = m;
	}
	close(fd);
	return 0;
}

static int
verify_shard(const struct store_verify_cfg *cfg, uint32_t i, FILE *out, struct verify_shard *sh,
	     struct store_verify_res *res)
{
	char dir[PATH_MAX];
	uint64_t *starts;
	uint64_t recs = 0, bytes = 0, end = 0;
	long n;
	struct verify_ctx x = {.out = out, .shard = i, .sh = sh};

	snprintf(dir, sizeof(dir), "%s/%u", cfg->clog_dir, i);
	n = verify_list(dir, &starts);
	if (n < 0) {
		fprintf(out, "shard %u: cannot read %s: %s\n", i, dir, strerror((int)-n));
		return (int)n;
	}
	sh->segs = calloc(n > 0 ? (size_t)n : 1, sizeof(*sh->segs));
	if (sh->segs == NULL) {
		free(starts);
		return -ENOMEM;
	}
	for (long k = 0; k < n; k++) {
		struct verify_seg *s = &sh->segs[sh->nsegs];
		struct store_verify_seg_res sr;
		int rc;

		if (starts[k] % cfg->seg_size != 0) {
			fprintf(out, "shard %u: %s/%020" PRIu64 " is not at a segment start\n", i,
				dir, starts[k]);
			res->segs_odd++;
			continue;
		}
		if (k > 0 && starts[k] != starts[k - 1] + cfg->seg_size) {
			fprintf(out,
				"shard %u: segments missing between %020" PRIu64 " and %020" PRIu64
				"\n",
				i, starts[k - 1], starts[k]);
			res->segs_odd++;
		}
		rc = verify_map(dir, starts[k], s);
		if (rc != 0) {
			fprintf(out, "shard %u: cannot read segment %020" PRIu64 ": %s\n", i,
				starts[k], strerror(-rc));
			res->segs_odd++;
			continue;
		}
		sh->nsegs++;
		res->segs++;
		if (s->len != cfg->seg_size) {
			fprintf(out,
				"shard %u: segment %020" PRIu64 " is %" PRIu64
				" bytes, not %" PRIu64 "\n",
				i, s->start, s->len, cfg->seg_size);
			res->segs_odd++;
		}
		x.start = s->start;
		(void)!store_verify_seg(s->map, s->len, cfg->seg_size, i, s->start, &sr, verify_bad,
					&x);
		if (x.err != 0) {
			free(starts);
			return x.err;
		}
		recs += sr.recs;
		bytes += sr.bytes;
		if (sr.recs > 0 || sr.sealed || sr.spans > 0)
			end = s->start + sr.end;
	}
	free(starts);
	if (sh->nbad > VERIFY_LIST_MAX)
		fprintf(out, "shard %u: %zu more damaged ranges not listed\n", i,
			sh->nbad - VERIFY_LIST_MAX);
	fprintf(out,
		"shard %u: %zu segments, %" PRIu64 " records up to %" PRIu64
		", %zu damaged ranges (%" PRIu64 " bytes)\n",
		i, sh->nsegs, recs, end, sh->nbad, bytes);
	res->recs += recs;
	res->bad_spans += sh->nbad;
	res->bad_bytes += bytes;
	return 0;
}

/* Is local @off of @sh in a damaged range? */
/* The damaged range of @sh that holds local @off (they are sorted), or NULL. */
static const struct verify_span *
verify_bad_at(const struct verify_shard *sh, uint64_t off)
{
	size_t lo = 0, hi = sh->nbad;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (off < sh->bad[mid].lo)
			hi = mid;
		else if (off >= sh->bad[mid].hi)
			lo = mid + 1;
		else
			return &sh->bad[mid];
	}
	return NULL;
}

static uint64_t
verify_mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static bool
verify_set_has(const struct verify_set *set, uint64_t off)
{
	if (set->cap == 0)
		return false;
	for (size_t i = verify_mix(off + 1) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
		if (set->keys[i] == off + 1)
			return true;
		if (set->keys[i] == 0)
			return false;
	}
}

static int
verify_set_add(struct verify_set *set, uint64_t off)
{
	if (verify_set_has(set, off))
		return 0;
	if ((set->n + 1) * 2 > set->cap) {
		struct verify_set big = {.cap = set->cap ? set->cap * 2 : 1024};

		big.keys = calloc(big.cap, sizeof(*big.keys));
		if (big.keys == NULL)
			return -ENOMEM;
		for (size_t i = 0; i < set->cap; i++)
			if (set->keys[i] != 0)
				(void)verify_set_add(&big, set->keys[i] - 1);
		free(set->keys);
		*set = big;
	}
	for (size_t i = verify_mix(off + 1) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
		if (set->keys[i] == 0) {
			set->keys[i] = off + 1;
			set->n++;
			return 0;
		}
	}
}

/*
 * Does a valid record of @size bytes start at local @off of @sh? 1 yes, 0
 * no, -1 yes but of another queue or offset than @topic:@qid at @qoff (a
 * foreign unit: a copy from another queue, or a damaged topic).
 */
static int
verify_unit_ok(const struct store_verify_cfg *cfg, const struct verify_shard *sh, uint32_t shard,
	       uint64_t off, uint32_t size, const char *topic, uint32_t qid, uint64_t qoff)
{
	uint64_t start = off - off % cfg->seg_size;

	for (size_t k = 0; k < sh->nsegs; k++) {
		const struct verify_seg *s = &sh->segs[k];

		if (s->start != start)
			continue;
		struct wire_msg m;

		if (off - start >= s->len)
			return 0;
		if (verify_rec_at(s->map, s->len, cfg->seg_size, shard, start, off - start) !=
			    (long)size ||
		    wire_rec_decode(s->map + (off - start), s->len - (off - start), 0, &m) <= 0)
			return 0;
		return m.queue_id >= 0 && (uint32_t)m.queue_id == qid && m.queue_offset >= 0 &&
				       (uint64_t)m.queue_offset == qoff &&
				       m.topic_len == strlen(topic) &&
				       memcmp(m.topic, topic, m.topic_len) == 0
			       ? 1
			       : -1;
	}
	return 0;
}

struct verify_q {
	const char *topic;
	uint32_t qid;
	uint64_t units, bad, gone, lost, foreign;
	uint64_t first_bad; /* queue offset of the first unit pointing at no good record */
	bool nomem;	    /* a unit could not be remembered for the records' check */
};

static void
verify_unit(const struct store_verify_cfg *cfg, struct verify_shard *shs, const uint8_t *u,
	    uint64_t qoff, struct verify_q *q)
{
	uint64_t phys = 0;
	uint32_t size = 0;
	uint32_t shard;
	uint64_t off;
	int ok;

	for (int k = 0; k < 8; k++)
		phys = phys << 8 | u[k];
	for (int k = 8; k < 12; k++)
		size = size << 8 | u[k];
	q->units++;
	if (size == CQ_LOST_SIZE) {
		q->lost++;
		return;
	}
	shard = clog_phys_shard((int64_t)phys);
	off = clog_phys_local((int64_t)phys);
	if (shard < cfg->shards && verify_bad_at(&shs[shard], off) != NULL) {
		if (q->bad + q->gone + q->foreign == 0)
			q->first_bad = qoff;
		q->bad++;
		return;
	}
	ok = shard < cfg->shards
		     ? verify_unit_ok(cfg, &shs[shard], shard, off, size, q->topic, q->qid, qoff)
		     : 0;
	if (ok == 1) {
		if (verify_set_add(&shs[shard].units, off) != 0)
			q->nomem = true;
		return;
	}
	if (q->bad + q->gone + q->foreign == 0)
		q->first_bad = qoff;
	if (ok < 0)
		q->foreign++;
	else
		q->gone++;
}

static int
verify_queue(const struct store_verify_cfg *cfg, struct verify_shard *shs, const char *topic,
	     const char *qid, FILE *out, struct store_verify_res *res)
{
	char dir[PATH_MAX];
	uint64_t *files;
	struct verify_q q = {.topic = topic, .qid = (uint32_t)strtoul(qid, NULL, 10)};
	long n;

	snprintf(dir, sizeof(dir), "%s/%s/%s", cfg->cq_dir, topic, qid);
	n = verify_list(dir, &files);
	if (n < 0)
		return (int)n;
	for (long k = 0; k < n; k++) {
		struct verify_seg f;
		bool done = false;

		if (verify_map(dir, files[k], &f) != 0 || f.map == NULL)
			continue;
		for (uint64_t at = 0; at + CQ_UNIT_SIZE <= f.len; at += CQ_UNIT_SIZE) {
			static const uint8_t zero[CQ_UNIT_SIZE];

			/* An all-zero unit: the file's unwritten tail. */
			if (memcmp(f.map + at, zero, CQ_UNIT_SIZE) == 0) {
				done = true;
				break;
			}
			verify_unit(cfg, shs, f.map + at, (files[k] + at) / CQ_UNIT_SIZE, &q);
		}
		munmap((void *)f.map, f.len);
		if (done)
			break;
	}
	free(files);
	if (q.nomem)
		return -ENOMEM;
	res->units += q.units;
	res->units_bad += q.bad;
	res->units_gone += q.gone;
	res->units_lost += q.lost;
	res->units_foreign += q.foreign;
	if (q.bad + q.gone + q.lost + q.foreign > 0)
		fprintf(out,
			"queue %s:%s: %" PRIu64 " units, %" PRIu64
			" point into damaged ranges, %" PRIu64 " at no record, %" PRIu64
			" at another queue's or offset's record, %" PRIu64
			" written as lost by a recovery%s",
			topic, qid, q.units, q.bad, q.gone, q.foreign, q.lost,
			q.bad + q.gone + q.foreign > 0 ? "; the first bad one at queue offset "
						       : "\n");
	if (q.bad + q.gone + q.foreign > 0)
		fprintf(out, "%" PRIu64 "\n", q.first_bad);
	return 0;
}

static int
verify_queues(const struct store_verify_cfg *cfg, struct verify_shard *shs, FILE *out,
	      struct store_verify_res *res)
{
	DIR *d = opendir(cfg->cq_dir);
	struct dirent *de;
	int rc = 0;

	if (d == NULL)
		return errno == ENOENT ? 0 : -errno;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		char tdir[PATH_MAX];
		struct dirent *qe;
		DIR *td;

		if (de->d_name[0] == '.')
			continue;
		snprintf(tdir, sizeof(tdir), "%s/%s", cfg->cq_dir, de->d_name);
		td = opendir(tdir);
		if (td == NULL)
			continue;
		while (rc == 0 && (qe = readdir(td)) != NULL) {
			if (qe->d_name[0] == '.' ||
			    !verify_is_digits(qe->d_name, strlen(qe->d_name)))
				continue;
			rc = verify_queue(cfg, shs, de->d_name, qe->d_name, out, res);
		}
		closedir(td);
	}
	closedir(d);
	return rc;
}

/* As the store's dispatch: a record a ConsumeQueue indexes (dispatch.c store__rec_is_dispatched()). */
static bool
verify_rec_indexed(const struct wire_msg *m)
{
	int tx = m->sys_flag & WIRE_SYSFLAG_TX_MASK;

	return m->queue_id >= 0 && (tx == WIRE_SYSFLAG_TX_NOT || tx == WIRE_SYSFLAG_TX_COMMIT);
}

/* Does the ConsumeQueue directory hold @topic (a topic not deleted)? Cached for the last one. */
static bool
verify_topic_known(const struct store_verify_cfg *cfg, const struct wire_msg *m, char *last,
		   bool *last_known)
{
	char dir[PATH_MAX];
	struct stat st;

	if (strlen(last) == m->topic_len && memcmp(last, m->topic, m->topic_len) == 0)
		return *last_known;
	memcpy(last, m->topic, m->topic_len);
	last[m->topic_len] = '\0';
	snprintf(dir, sizeof(dir), "%s/%s", cfg->cq_dir, last);
	*last_known = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
	return *last_known;
}

static void
verify_orphan(struct verify_orphans *o, size_t *no, const struct wire_msg *m, uint32_t shard,
	      uint64_t off)
{
	size_t i;

	for (i = 0; i < *no; i++)
		if (o[i].qid == (uint32_t)m->queue_id && o[i].shard == shard &&
		    strlen(o[i].topic) == m->topic_len &&
		    memcmp(o[i].topic, m->topic, m->topic_len) == 0)
			break;
	if (i == *no) {
		if (*no == VERIFY_LIST_MAX)
			return;
		memcpy(o[i].topic, m->topic, m->topic_len);
		o[i].topic[m->topic_len] = '\0';
		o[i].qid = (uint32_t)m->queue_id;
		o[i].shard = shard;
		o[i].n = 0;
		o[i].first = off;
		(*no)++;
	}
	o[i].n++;
}

/*
 * Records of the log that no unit points at: their messages are never
 * delivered (a ConsumeQueue file lost or cut). Only after a clean stop: a
 * killed broker's last records get their units from its next start.
 */
static int
verify_records_indexed(const struct store_verify_cfg *cfg, struct verify_shard *shs, FILE *out,
		       struct store_verify_res *res)
{
	struct verify_orphans *o = calloc(VERIFY_LIST_MAX, sizeof(*o));
	char last[WIRE_TOPIC_MAX + 1] = "";
	bool last_known = false;
	size_t no = 0;

	if (o == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < cfg->shards; i++) {
		for (size_t k = 0; k < shs[i].nsegs; k++) {
			const struct verify_seg *sg = &shs[i].segs[k];
			uint64_t in = 0;

			while (sg->map != NULL && in + WIRE_BLANK_LEN <= sg->len) {
				long r = verify_rec_at(sg->map, sg->len, cfg->seg_size, i,
						       sg->start, in);
				struct wire_msg m;
				uint64_t hi;

				if (r <= 0) {
					const struct verify_span *bad =
						verify_bad_at(&shs[i], sg->start + in);

					hi = bad != NULL ? bad->hi : 0;
					if (hi <= sg->start + in)
						break;
					in = hi - sg->start;
					continue;
				}
				if (wire_rec_decode(sg->map + in, sg->len - in, 0, &m) > 0 &&
				    verify_rec_indexed(&m) &&
				    !verify_set_has(&shs[i].units, sg->start + in) &&
				    verify_topic_known(cfg, &m, last, &last_known)) {
					res->recs_unindexed++;
					verify_orphan(o, &no, &m, i, sg->start + in);
				}
				in += (uint64_t)r;
			}
		}
	}
	for (size_t k = 0; k < no; k++)
		fprintf(out,
			"queue %s:%u: %" PRIu64 " records of shard %u have no ConsumeQueue unit "
			"(the first at log offset %" PRIu64
			"): never delivered until its units are "
			"rebuilt\n",
			o[k].topic, o[k].qid, o[k].n, o[k].shard, o[k].first);
	free(o);
	return 0;
}

bool
store_verify_damaged(const struct store_verify_res *res)
{
	return res->segs_odd + res->bad_spans + res->units_bad + res->units_gone +
		       res->units_foreign + res->recs_unindexed >
	       0;
}

int
store_verify(const struct store_verify_cfg *cfg, FILE *out, struct store_verify_res *res)
{
	struct verify_shard *shs;
	int lock = -1;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	if (cfg->shards == 0 || cfg->seg_size < WIRE_REC_FIXED_V4)
		return -EINVAL;
	/* Offline: a running broker's store is refused, and none starts meanwhile. */
	if (cfg->root != NULL) {
		lock = store__lock_shared(cfg->root);
		if (lock < 0 && lock != -ENOENT)
			return lock;
	}
	shs = calloc(cfg->shards, sizeof(*shs));
	if (shs == NULL) {
		if (lock >= 0)
			close(lock);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cfg->shards && rc == 0; i++)
		rc = verify_shard(cfg, i, out, &shs[i], res);
	if (rc == 0)
		rc = verify_queues(cfg, shs, out, res);
	if (rc == 0 && cfg->abort_path != NULL && access(cfg->abort_path, F_OK) == 0)
		fprintf(out,
			"the last run did not stop cleanly (%s is there): records without a "
			"ConsumeQueue unit are not counted (its next start indexes them)\n",
			cfg->abort_path);
	else if (rc == 0)
		rc = verify_records_indexed(cfg, shs, out, res);
	for (uint32_t i = 0; i < cfg->shards; i++) {
		for (size_t k = 0; k < shs[i].nsegs; k++)
			if (shs[i].segs[k].map != NULL)
				munmap((void *)shs[i].segs[k].map, shs[i].segs[k].len);
		free(shs[i].segs);
		free(shs[i].bad);
		free(shs[i].units.keys);
	}
	free(shs);
	if (lock >= 0)
		close(lock);
	if (rc != 0)
		return rc;
	fprintf(out,
		"%s: %" PRIu64 " segments (%" PRIu64 " odd), %" PRIu64 " records, %" PRIu64
		" damaged ranges (%" PRIu64 " bytes); %" PRIu64 " ConsumeQueue units, %" PRIu64
		" pointing into damaged ranges, %" PRIu64 " at no record, %" PRIu64
		" at another queue's record, %" PRIu64 " lost; %" PRIu64 " records with no unit\n",
		store_verify_damaged(res) ? "damaged" : "clean", res->segs, res->segs_odd,
		res->recs, res->bad_spans, res->bad_bytes, res->units, res->units_bad,
		res->units_gone, res->units_foreign, res->units_lost, res->recs_unindexed);
	return 0;
}
