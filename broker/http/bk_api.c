// SPDX-License-Identifier: Apache-2.0
/*
 * bk_api.c - the broker's JSON API under /api/ (docs/observability.md), the
 * data behind the console (console/broker.html), answered on the control
 * thread like /metrics. Field names follow the CLI's --json output
 * (brokerName, queueId, minOffset, maxOffset, brokerOffset, consumerOffset,
 * lag) so a script reads either.
 *
 *   /api/broker   who this is, ready or why not, message counts
 *   /api/topics   every topic (system ones flagged), its queues' offsets
 *   /api/groups   every consumer group with committed offsets: per queue
 *                 offsets and lag, its live members (remoting clients)
 *   /api/latency  the cores' latency histograms, raw bucket counts
 *   /api/message  a message lookup by key or msgId (bk_api_msg.c)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/bk_ctl.h"
#include "remoting/bk_rmt.h"
#include "common/clock.h"
#include "common/jbuf.h"
#include "control/httpd.h"
#include "sp_config.h"
#include "store/store.h"

#define LD(v) __atomic_load_n(&(v), __ATOMIC_RELAXED)

static void
broker(struct bk_ctl *x, struct jbuf *b)
{
	struct httpd_req h = {.status = 200};
	uint64_t in = 0, out = 0;

	jbuf_init(&h.body);
	bk_http_health(x, &h);
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		in += LD(x->bk.cores[i].st.msgs_in);
		out += LD(x->bk.cores[i].st.msgs_out);
	}
	jbuf_lit(b, "{");
	jbuf_kv_str(b, "cluster", x->bk.conf.cluster);
	jbuf_lit(b, ",");
	jbuf_kv_str(b, "brokerName", x->bk.conf.broker_name);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "brokerId", x->bk.conf.broker_id);
	jbuf_lit(b, ",");
	jbuf_kv_str(b, "role", cfg_get_str(x->cfg, "brokerRole"));
	jbuf_lit(b, ",");
	jbuf_kv_str(b, "version", SP_VERSION);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "cores", x->bk.ncores);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "uptimeMs", clk_wall_ms() - x->admin.boot_ms);
	jbuf_lit(b, ",");
	jbuf_key(b, "ready");
	jbuf_bool(b, h.status == 200);
	jbuf_lit(b, ",");
	jbuf_key(b, "health");
	jbuf_str(b, (const char *)h.body.p, h.body.len);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "msgsIn", (int64_t)in);
	jbuf_lit(b, ",");
	jbuf_kv_i64(b, "msgsOut", (int64_t)out);
	jbuf_lit(b, "}");
	jbuf_free(&h.body);
}

static int
topic_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct bk_topic *const *)a)->name,
		      (*(const struct bk_topic *const *)b)->name);
}

static void
topics(struct bk_ctl *x, struct jbuf *b)
{
	const struct bk_ttab *t = x->bk.ttab; /* this thread publishes it */
	const struct bk_topic **v = NULL;
	size_t n = 0;

	if (t && t->n && (v = calloc(t->n, sizeof(*v))) == NULL) {
		b->err = -ENOMEM; /* a 500, not an empty list */
		return;
	}
	for (uint32_t i = 0; v && i <= t->mask; i++)
		if (t->slot[i] && n < t->n)
			v[n++] = t->slot[i];
	if (n)
		qsort(v, n, sizeof(*v), topic_cmp);
	jbuf_lit(b, "[");
	for (size_t i = 0; i < n; i++) {
		const struct bk_topic *tp = v[i];

		jbuf_lit(b, i ? ",{" : "{");
		jbuf_kv_str(b, "topic", tp->name);
		jbuf_lit(b, ",");
		jbuf_key(b, "system");
		jbuf_bool(b, bk_topic_is_system(tp->name));
		jbuf_lit(b, ",");
		jbuf_kv_i64(b, "perm", tp->perm);
		jbuf_lit(b, ",");
		jbuf_kv_i64(b, "readQueueNums", tp->read_queues);
		jbuf_lit(b, ",");
		jbuf_kv_i64(b, "writeQueueNums", tp->write_queues);
		jbuf_lit(b, ",");
		jbuf_key(b, "order");
		jbuf_bool(b, tp->order);
		jbuf_lit(b, ",\"queues\":[");
		for (uint32_t q = 0; q < tp->nq; q++) {
			jbuf_lit(b, q ? ",{" : "{");
			jbuf_kv_i64(b, "queueId", q);
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "core", tp->core[q]);
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "minOffset",
				    (int64_t)store_queue_min(x->bk.store, tp->sq[q]));
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "maxOffset",
				    (int64_t)store_queue_max(x->bk.store, tp->sq[q]));
			jbuf_lit(b, "}");
		}
		jbuf_lit(b, "]}");
	}
	jbuf_lit(b, "]");
	free(v);
}

struct grow {
	const char *group, *topic;
	uint32_t qid;
	int64_t offset, end;
};

static int
grow_cmp(const void *pa, const void *pb)
{
	const struct grow *a = pa, *b = pb;
	int c = strcmp(a->group, b->group);

	if (c == 0)
		c = strcmp(a->topic, b->topic);
	return c ? c : (a->qid > b->qid) - (a->qid < b->qid);
}

struct grows {
	struct bk_ctl *x;
	struct grow *v;
	size_t n, cap;
};

static int
grow_add(void *arg, const struct bk_off *e, const struct bk_topic *t, int64_t off)
{
	struct grows *g = arg;

	if (g->n == g->cap) {
		size_t nc = g->cap ? g->cap * 2 : 64;
		struct grow *nv = realloc(g->v, nc * sizeof(*nv));

		if (nv == NULL)
			return -ENOMEM;
		g->v = nv;
		g->cap = nc;
	}
	g->v[g->n++] = (struct grow){e->group, e->topic, e->qid, off,
				     (int64_t)store_queue_max(g->x->bk.store, t->sq[e->qid])};
	return 0;
}

/* Every committed offset (bk_committed_each()), by group. */
static void
groups(struct bk_ctl *x, struct jbuf *b)
{
	struct grows g = {.x = x};
	struct grow *v;
	size_t n;

	if (bk_committed_each(x, grow_add, &g) != 0) {
		free(g.v);
		b->err = -ENOMEM; /* a 500, not a short list */
		return;
	}
	v = g.v;
	n = g.n;
	if (n)
		qsort(v, n, sizeof(*v), grow_cmp);
	jbuf_lit(b, "[");
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int64_t lag = 0;

		while (j < n && strcmp(v[j].group, v[i].group) == 0) {
			lag += v[j].end > v[j].offset ? v[j].end - v[j].offset : 0;
			j++;
		}
		jbuf_lit(b, i ? ",{" : "{");
		jbuf_kv_str(b, "group", v[i].group);
		jbuf_lit(b, ",");
		jbuf_kv_i64(b, "lag", lag);
		jbuf_lit(b, ",");
		jbuf_key(b, "members");
		bk_rmt_members_json(x->rmt, v[i].group, b);
		jbuf_lit(b, ",\"queues\":[");
		for (size_t k = i; k < j; k++) {
			jbuf_lit(b, k > i ? ",{" : "{");
			jbuf_kv_str(b, "topic", v[k].topic);
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "queueId", v[k].qid);
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "brokerOffset", v[k].end);
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "consumerOffset", v[k].offset);
			jbuf_lit(b, ",");
			jbuf_kv_i64(b, "lag", v[k].end > v[k].offset ? v[k].end - v[k].offset : 0);
			jbuf_lit(b, "}");
		}
		jbuf_lit(b, "]}");
		i = j;
	}
	jbuf_lit(b, "]");
	free(v);
}

static void
latency(struct bk_ctl *x, struct jbuf *b)
{
	static const char *const kinds[BK_LATS] = {
		[BK_LAT_REQ_DP] = "request_dataplane", [BK_LAT_REQ_RMT] = "request_remoting",
		[BK_LAT_APPEND] = "store_append",      [BK_LAT_DURABLE] = "durable_wait",
		[BK_LAT_WAKE] = "long_poll_wake",
	};

	jbuf_lit(b, "{\"boundsNs\":[");
	for (unsigned k = 0; k < PHIST_BUCKETS; k++) {
		if (k)
			jbuf_lit(b, ",");
		jbuf_i64(b, (int64_t)phist_bound_ns(k));
	}
	jbuf_lit(b, "],\"cores\":[");
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		jbuf_lit(b, i ? ",{" : "{");
		jbuf_kv_i64(b, "core", i);
		for (unsigned k = 0; k < BK_LATS; k++) {
			const struct phist *h = &x->bk.cores[i].st.lat[k];

			jbuf_lit(b, ",");
			jbuf_key(b, kinds[k]);
			jbuf_lit(b, "[");
			for (unsigned j = 0; j <= PHIST_BUCKETS; j++) {
				if (j)
					jbuf_lit(b, ",");
				jbuf_i64(b, (int64_t)LD(h->b[j]));
			}
			jbuf_lit(b, "]");
		}
		jbuf_lit(b, "}");
	}
	jbuf_lit(b, "]}");
}

bool
bk_api_render(struct bk_ctl *x, struct httpd_req *r, const struct acl_account *acc)
{
	static const struct {
		const char *path;
		void (*fn)(struct bk_ctl *x, struct jbuf *b);
	} api[] = {
		{"/api/broker", broker},
		{"/api/topics", topics},
		{"/api/groups", groups},
		{"/api/latency", latency},
	};

	if (strcmp(r->path, "/api/message") == 0) {
		bk_api_message(x, r, acc);
		jbuf_lit(&r->body, "\n");
		return true;
	}
	for (size_t i = 0; i < sizeof(api) / sizeof(api[0]); i++) {
		if (strcmp(r->path, api[i].path) != 0)
			continue;
		r->ctype = "application/json";
		api[i].fn(x, &r->body);
		jbuf_lit(&r->body, "\n");
		return true;
	}
	return false;
}
