// SPDX-License-Identifier: Apache-2.0
/*
 * msg.c - messages on the client side: properties out, records in.
 *
 * Out: a sent message's properties string is RocketMQ's (k\x01v\x02...),
 * written with wire_props_append(): the caller's properties, then KEYS,
 * TAGS, WAIT and UNIQ_KEY, as RocketMQ's producer sets them. UNIQ_KEY
 * follows MessageClientIDSetter's layout, 16 bytes as 32 uppercase hex:
 * 4 bytes of address (the client's, or random), 2 of pid, 4 random bytes
 * per process where Java puts a class loader's hash, 4 bytes of
 * milliseconds since the start of the month and a 2-byte counter.
 *
 * In: a PULL response's records are RocketMQ stored records, decoded with
 * wire_rec_decode(); TAGS, KEYS and UNIQ_KEY are copied out NUL-terminated,
 * and a message whose TAGS fail the subscription expression (the broker
 * matched a hash only) is dropped here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"
#include "common/clock.h"
#include "sprocket/consumer.h"
#include "wire/record.h"

/* ---- properties ---- */

static int
prop(char *buf, size_t cap, size_t *len, const char *k, const char *v)
{
	return wire_props_append(buf, cap, len, k, strlen(k), v, strlen(v));
}

int
sp__msg_check(const struct sp_msg *m)
{
	size_t tl;

	if (!m || !m->topic)
		return -EINVAL;
	tl = strlen(m->topic);
	/* Refused here, as RocketMQ's client does, not as "no route" later. */
	if (tl > WIRE_DP_TOPIC_MAX || !wire_topic_name_ok(m->topic, tl))
		return -EINVAL;
	if (m->body_len && !m->body)
		return -EINVAL;
	if (m->n_props && !m->props)
		return -EINVAL;
	if (m->body_len > WIRE_DP_BODY_MAX_DEFAULT)
		return -EMSGSIZE;
	return 0;
}

int
sp__msg_props(const struct sp_msg *m, const char *uniq, char *buf, size_t cap, size_t *len)
{
	int err;

	*len = 0;
	for (size_t i = 0; i < m->n_props; i++) {
		if (!m->props[i].key || !m->props[i].val)
			return -EINVAL;
		err = prop(buf, cap, len, m->props[i].key, m->props[i].val);
		if (err)
			return err;
	}
	if (m->keys && m->keys[0]) {
		err = prop(buf, cap, len, "KEYS", m->keys);
		if (err)
			return err;
	}
	if (m->tags && m->tags[0]) {
		err = prop(buf, cap, len, "TAGS", m->tags);
		if (err)
			return err;
	}
	if (m->delay_level < 0 || m->deliver_ms < 0 || (m->delay_level > 0 && m->deliver_ms > 0))
		return -EINVAL;
	if (m->deliver_ms > 0) {
		char ms[24];

		snprintf(ms, sizeof(ms), "%lld", (long long)m->deliver_ms);
		err = prop(buf, cap, len, "TIMER_DELIVER_MS", ms);
		if (err)
			return err;
	}
	if (m->delay_level > 0) {
		char lvl[16];

		snprintf(lvl, sizeof(lvl), "%d", m->delay_level);
		err = prop(buf, cap, len, "DELAY", lvl);
		if (err)
			return err;
	}
	err = prop(buf, cap, len, "WAIT", "true");
	if (err)
		return err;
	if (uniq)
		err = prop(buf, cap, len, "UNIQ_KEY", uniq);
	return err;
}

/* ---- UNIQ_KEY ---- */

static pthread_once_t msgid_once = PTHREAD_ONCE_INIT;
static uint8_t msgid_fix[10]; /* address, pid, random */
static _Atomic uint32_t msgid_counter;

static void
msgid_init(void)
{
	uint32_t pid = (uint32_t)getpid();
	uint32_t seed;

	if (getrandom(msgid_fix, sizeof(msgid_fix), GRND_NONBLOCK) != sizeof(msgid_fix)) {
		uint64_t t = clk_mono_ns();

		memcpy(msgid_fix, &t, 8);
	}
	msgid_fix[4] = (uint8_t)(pid >> 8);
	msgid_fix[5] = (uint8_t)pid;
	memcpy(&seed, msgid_fix + 6, sizeof(seed));
	atomic_store_explicit(&msgid_counter, seed, memory_order_relaxed);
}

/* Return: ms since the start of this month (UTC), as RocketMQ's setStartTime. */
static uint32_t
month_ms(void)
{
	struct timespec ts;
	struct tm tm;
	time_t start;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	tm.tm_mday = 1;
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	start = timegm(&tm);
	return (uint32_t)((ts.tv_sec - start) * 1000 + ts.tv_nsec / 1000000);
}

void
sp__msgid_new(char out[SP_MSGID_LEN + 1])
{
	static const char hex[] = "0123456789ABCDEF";
	uint8_t b[16];
	uint32_t t;
	uint32_t n;

	pthread_once(&msgid_once, msgid_init);
	/* relaxed: only uniqueness matters, no ordering with other memory */
	n = atomic_fetch_add_explicit(&msgid_counter, 1, memory_order_relaxed);
	t = month_ms();
	memcpy(b, msgid_fix, 10);
	b[10] = (uint8_t)(t >> 24);
	b[11] = (uint8_t)(t >> 16);
	b[12] = (uint8_t)(t >> 8);
	b[13] = (uint8_t)t;
	b[14] = (uint8_t)(n >> 8);
	b[15] = (uint8_t)n;
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[SP_MSGID_LEN] = '\0';
}

/* ---- tag expressions ---- */

/*
 * Calls @fn for each tag of @expr ("a || b"), trimmed. Return: false when
 * @expr means "all" (NULL, "", "*"), true otherwise.
 */
static bool
expr_each(const char *expr, bool (*fn)(void *arg, const char *t, size_t len), void *arg)
{
	const char *p = expr;

	if (!expr)
		return false;
	while (*p == ' ')
		p++;
	if (!*p || (p[0] == '*' && p[strspn(p + 1, " ") + 1] == '\0'))
		return false;
	while (*p) {
		const char *e = strstr(p, "||");
		const char *end = e ? e : p + strlen(p);
		const char *a = p;
		const char *b = end;

		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (b > a && fn(arg, a, (size_t)(b - a)))
			break;
		if (!e)
			break;
		p = e + 2;
	}
	return true;
}

struct hash_ctx {
	int32_t *out;
	size_t max;
	size_t n;
	bool overflow;
};

static bool
hash_one(void *arg, const char *t, size_t len)
{
	struct hash_ctx *h = arg;

	if (h->n == h->max) {
		h->overflow = true;
		return true;
	}
	h->out[h->n++] = wire_tag_hash(t, len);
	return false;
}

int
sp__tag_hashes(const char *expr, int32_t *out, size_t max)
{
	struct hash_ctx h = {.out = out, .max = max};

	if (!expr_each(expr, hash_one, &h))
		return 0;
	return h.overflow ? -EINVAL : (int)h.n;
}

struct match_ctx {
	const char *tags;
	bool hit;
};

static bool
match_one(void *arg, const char *t, size_t len)
{
	struct match_ctx *m = arg;

	if (strlen(m->tags) == len && memcmp(m->tags, t, len) == 0) {
		m->hit = true;
		return true;
	}
	return false;
}

bool
sp_tag_expr_match(const char *expr, const char *tags)
{
	struct match_ctx m = {.tags = tags ? tags : ""};

	if (!expr_each(expr, match_one, &m))
		return true;
	return m.hit && m.tags[0];
}

/* ---- records ---- */

bool
sp_msg_prop(const struct sp_msg_ext *m, const char *key, const char **val, size_t *len)
{
	return wire_props_get(m->props, m->props_len, key, val, len);
}

size_t
sp__rec_strbuf_size(size_t len, size_t n_recs)
{
	return len + 4 * n_recs + 1;
}

long
sp__records_count(const uint8_t *recs, size_t len)
{
	size_t pos = 0;
	long n = 0;

	while (pos < len) {
		uint32_t sz;

		if (len - pos < 4)
			return -EBADMSG;
		sz = (uint32_t)recs[pos] << 24 | (uint32_t)recs[pos + 1] << 16 |
		     (uint32_t)recs[pos + 2] << 8 | recs[pos + 3];
		if (sz < 4 || sz > len - pos)
			return -EBADMSG;
		pos += sz;
		n++;
	}
	return n;
}

static char *
put_str(char **sp, const char *s, size_t len)
{
	char *r = *sp;

	memcpy(r, s, len);
	r[len] = '\0';
	*sp += len + 1;
	return r;
}

long
sp__records_decode(const uint8_t *recs, size_t len, const char *expr, struct sp_msg_ext *out,
		   size_t n_out, char *strbuf, size_t strbuf_cap)
{
	size_t pos = 0;
	size_t kept = 0;
	char *sp = strbuf;

	while (pos < len) {
		struct wire_msg m;
		struct sp_msg_ext *x;
		const char *v;
		size_t vl;
		long n = wire_rec_decode(recs + pos, len - pos, 0, &m);

		if (n == -ENODATA)
			break;
		if (n < 0)
			return -EBADMSG;
		pos += (size_t)n;
		if ((size_t)(sp - strbuf) + m.topic_len + m.props_len + 4 > strbuf_cap ||
		    kept == n_out)
			return -EBADMSG;
		x = &out[kept];
		memset(x, 0, sizeof(*x));
		x->topic = put_str(&sp, m.topic, m.topic_len);
		if (wire_props_get(m.props, m.props_len, "TAGS", &v, &vl))
			x->tags = put_str(&sp, v, vl);
		else
			x->tags = put_str(&sp, "", 0);
		if (!sp_tag_expr_match(expr, x->tags)) {
			sp = (char *)x->topic; /* give the strings back */
			continue;
		}
		if (wire_props_get(m.props, m.props_len, "KEYS", &v, &vl))
			x->keys = put_str(&sp, v, vl);
		else
			x->keys = put_str(&sp, "", 0);
		(void)wire_msgid_encode(&m.store_host, m.phys_offset, x->offset_msg_id);
		if (wire_props_get(m.props, m.props_len, "UNIQ_KEY", &v, &vl))
			x->msg_id = put_str(&sp, v, vl);
		else
			x->msg_id = x->offset_msg_id;
		x->body = m.body;
		x->body_len = m.body_len;
		x->props = m.props;
		x->props_len = m.props_len;
		x->queue_id = m.queue_id;
		x->flag = m.flag;
		x->sys_flag = m.sys_flag;
		x->reconsume_times = m.reconsume_times;
		x->queue_offset = m.queue_offset;
		x->phys_offset = m.phys_offset;
		x->store_ts = m.store_ts;
		x->born_ts = m.born_ts;
		x->store_size = m.total_size;
		kept++;
	}
	return (long)kept;
}
