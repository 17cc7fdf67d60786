// SPDX-License-Identifier: Apache-2.0
/*
 * ns_body.c - REGISTER_BROKER bodies: a streaming JSON scanner and the zlib form.
 *
 * DESIGN
 * A broker with 100,000 topics sends a body of 15+ MB, every 30 s. A tree
 * parser (json-c) would allocate about a kilobyte per topic before the
 * NameServer could even compare the data version, so bodies are read with
 * a small pull scanner instead: ns__body_dv() walks to dataVersion and stops
 * there (fastjson sorts keys, so it comes before topicConfigTable and the
 * topics are never touched), and ns__body_topics() feeds each TopicConfig
 * straight into a topic set with no intermediate tree.
 *
 * The scanner accepts RFC 8259 JSON (nesting capped at JS_DEPTH_MAX, so
 * recursion is bounded); strings are validated but not decoded, because
 * every name the NameServer keeps from a body is a topic name, and those are
 * ^[%|a-zA-Z0-9_-]+$, which has no escapes: a name with an escape is simply
 * an invalid topic and skipped. Unknown members are skipped at any depth.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "common/clock.h"
#include "ns_priv.h"

#define JS_DEPTH_MAX 32
#define NS_PACE_EVERY 64	   /* topics between clock reads */
#define NS_PACE_NS (100 * 1000ull) /* the writer's longest run without a yield */
#define NS_TOPIC_DEFAULT_QUEUES 16 /* TopicConfig defaults when a member is absent */
#define NS_TOPIC_DEFAULT_PERM 6

struct js {
	const uint8_t *p;
	const uint8_t *end;
};

static void
js_ws(struct js *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool
js_peek(struct js *j, uint8_t c)
{
	js_ws(j);
	return j->p < j->end && *j->p == c;
}

static int
js_expect(struct js *j, uint8_t c)
{
	if (!js_peek(j, c))
		return -EBADMSG;
	j->p++;
	return 0;
}

static bool
is_hex(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at the cursor: @s/@n get the raw bytes between the quotes. */
static int
js_string(struct js *j, const uint8_t **s, size_t *n, bool *esc)
{
	const uint8_t *start;

	*esc = false;
	if (!js_peek(j, '"'))
		return -EBADMSG;
	start = ++j->p;
	for (;;) {
		uint8_t c;

		if (j->p >= j->end)
			return -EBADMSG;
		c = *j->p;
		if (c == '"')
			break;
		if (c < 0x20)
			return -EBADMSG;
		if (c == '\\') {
			*esc = true;
			if (j->end - j->p < 2)
				return -EBADMSG;
			c = j->p[1];
			if (c == 'u') {
				if (j->end - j->p < 6 || !is_hex(j->p[2]) || !is_hex(j->p[3]) ||
				    !is_hex(j->p[4]) || !is_hex(j->p[5]))
					return -EBADMSG;
				j->p += 6;
				continue;
			}
			if (strchr("\"\\/bfnrt", c) == NULL || c == '\0')
				return -EBADMSG;
			j->p += 2;
			continue;
		}
		j->p++;
	}
	*s = start;
	*n = (size_t)(j->p - start);
	j->p++;
	return 0;
}

/* A number. Return: 0 with *@v for an integer in int64 range, -EDOM for any
 * other valid number (fraction, exponent, overflow), -EBADMSG. */
static int
js_number(struct js *j, int64_t *v)
{
	bool neg = false;
	bool integral = true;
	uint64_t acc = 0;
	bool overflow = false;

	js_ws(j);
	if (j->p < j->end && *j->p == '-') {
		neg = true;
		j->p++;
	}
	if (j->p >= j->end || *j->p < '0' || *j->p > '9')
		return -EBADMSG;
	if (*j->p == '0' && j->end - j->p > 1 && j->p[1] >= '0' && j->p[1] <= '9')
		return -EBADMSG; /* leading zero */
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
		unsigned d = (unsigned)(*j->p - '0');

		if (acc > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			acc = acc * 10 + d;
		j->p++;
	}
	if (j->p < j->end && *j->p == '.') {
		integral = false;
		j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return -EBADMSG;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		integral = false;
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return -EBADMSG;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (!integral || overflow || acc > (uint64_t)INT64_MAX + neg)
		return -EDOM;
	*v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
	return 0;
}

static int
js_literal(struct js *j, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return -EBADMSG;
	j->p += n;
	return 0;
}

static int js_skip(struct js *j, int depth);

/*
 * Members of an object whose '{' was consumed: 1 with the key (cursor after
 * the ':'), 0 after the closing '}', or an error.
 */
static int
js_member(struct js *j, bool *first, const uint8_t **k, size_t *kn)
{
	bool esc;
	int rc;

	if (js_peek(j, '}')) {
		j->p++;
		return 0;
	}
	if (!*first && (rc = js_expect(j, ',')) != 0)
		return rc;
	*first = false;
	if ((rc = js_string(j, k, kn, &esc)) != 0 || (rc = js_expect(j, ':')) != 0)
		return rc;
	if (esc)
		*kn = 0; /* matches no known member: skipped */
	return 1;
}

/* Elements of an array whose '[' was consumed: 1 (cursor at the value), 0 after ']'. */
static int
js_element(struct js *j, bool *first)
{
	int rc;

	if (js_peek(j, ']')) {
		j->p++;
		return 0;
	}
	if (!*first && (rc = js_expect(j, ',')) != 0)
		return rc;
	*first = false;
	return 1;
}

static int
js_skip(struct js *j, int depth)
{
	const uint8_t *s;
	size_t n;
	bool esc;
	bool first = true;
	int64_t v;
	int rc;

	if (depth > JS_DEPTH_MAX)
		return -EBADMSG;
	js_ws(j);
	if (j->p >= j->end)
		return -EBADMSG;
	switch (*j->p) {
	case '{':
		j->p++;
		while ((rc = js_member(j, &first, &s, &n)) == 1) {
			if ((rc = js_skip(j, depth + 1)) != 0)
				return rc;
		}
		return rc;
	case '[':
		j->p++;
		while ((rc = js_element(j, &first)) == 1) {
			if ((rc = js_skip(j, depth + 1)) != 0)
				return rc;
		}
		return rc;
	case '"':
		return js_string(j, &s, &n, &esc);
	case 't':
		return js_literal(j, "true");
	case 'f':
		return js_literal(j, "false");
	case 'n':
		return js_literal(j, "null");
	default:
		rc = js_number(j, &v);
		return rc == -EDOM ? 0 : rc;
	}
}

static bool
key_is(const uint8_t *k, size_t kn, const char *name)
{
	return kn == strlen(name) && memcmp(k, name, kn) == 0;
}

/*
 * An integer member: a JSON number, or a string holding one (fastjson takes
 * both). Return: 0 (*@ok false when the value was of another kind, which is
 * skipped), or a syntax error.
 */
static int
js_int_member(struct js *j, int64_t *v, bool *ok)
{
	const uint8_t *s;
	size_t n;
	bool esc;
	int rc;

	*ok = false;
	js_ws(j);
	if (j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) {
		rc = js_number(j, v);
		if (rc == -EDOM)
			return 0;
		*ok = rc == 0;
		return rc;
	}
	if (j->p < j->end && *j->p == '"') {
		struct js sub;

		if ((rc = js_string(j, &s, &n, &esc)) != 0)
			return rc;
		sub.p = s;
		sub.end = s + n;
		*ok = !esc && n > 0 && js_number(&sub, v) == 0 && sub.p == sub.end;
		return 0;
	}
	return js_skip(j, 1);
}

static int
parse_dv(struct js *j, struct route_dv *dv)
{
	const uint8_t *k;
	size_t kn;
	bool first = true;
	bool ok;
	int64_t v;
	int rc;

	dv->timestamp = 0;
	dv->counter = 0;
	if (js_peek(j, 'n'))
		return js_literal(j, "null");
	if ((rc = js_expect(j, '{')) != 0)
		return rc;
	while ((rc = js_member(j, &first, &k, &kn)) == 1) {
		if (key_is(k, kn, "timestamp") || key_is(k, kn, "counter")) {
			if ((rc = js_int_member(j, &v, &ok)) != 0)
				return rc;
			if (ok && kn == 9)
				dv->timestamp = v;
			else if (ok)
				dv->counter = v;
		} else if ((rc = js_skip(j, 2)) != 0) {
			return rc;
		}
	}
	return rc;
}

struct body_ctx {
	struct route_tset *ts;	/* NULL: only the data version is wanted */
	struct route_tset *del; /* a delta's removed topics (NULL: not a delta) */
	uint32_t max_cores;
	uint32_t skipped;
	size_t inflate_max; /* maxInflatedBodySize (0: NS_INFLATE_MAX) */
	struct route_dv dv;
	bool have_dv;
	uint16_t cores[ROUTE_QUEUES_MAX];
	uint32_t paced;		/* topics seen, for pace() */
	uint64_t last_yield_ns; /* pace() */
};

/*
 * Parsing 100,000 topics is milliseconds of CPU on the writer thread. On a
 * host with fewer free CPUs than runnable threads, a lookup that wakes up
 * behind it can wait for the writer's whole time slice (2+ ms seen on a
 * 2-vCPU VM, where the scheduler left the waking thread queued behind the
 * writer while the other vCPU idled), even at nice 10. So the writer offers
 * the CPU every NS_PACE_NS: sched_yield() returns at once when nothing else
 * waits, and the parse goes on.
 */
static void
pace(struct body_ctx *c)
{
	uint64_t now;

	if (++c->paced % NS_PACE_EVERY != 0)
		return;
	now = clk_mono_ns();
	if (now - c->last_yield_ns < NS_PACE_NS)
		return;
	sched_yield();
	c->last_yield_ns = clk_mono_ns();
}

static int
parse_cores(struct js *j, struct body_ctx *c, uint32_t *n, bool *ok)
{
	bool first = true;
	int rc;

	*n = 0;
	if (!js_peek(j, '['))
		return js_skip(j, 3);
	j->p++;
	while ((rc = js_element(j, &first)) == 1) {
		int64_t v;
		bool iok;

		if ((rc = js_int_member(j, &v, &iok)) != 0)
			return rc;
		if (!iok || v < 0 || (uint64_t)v >= c->max_cores || *n >= ROUTE_QUEUES_MAX)
			*ok = false;
		else
			c->cores[(*n)++] = (uint16_t)v;
	}
	return rc;
}

/* One TopicConfig object; @key is its map key (the name when topicName is absent). */
static int
parse_topic(struct js *j, struct body_ctx *c, const uint8_t *key, size_t key_n)
{
	struct route_topic_in t = {
		.name = (const char *)key,
		.name_len = key_n,
		.read_q = NS_TOPIC_DEFAULT_QUEUES,
		.write_q = NS_TOPIC_DEFAULT_QUEUES,
		.perm = NS_TOPIC_DEFAULT_PERM,
	};
	const uint8_t *k;
	size_t kn;
	bool first = true;
	bool ok = true;
	int rc;

	if (!js_peek(j, '{')) {
		c->skipped++;
		return js_skip(j, 3);
	}
	j->p++;
	while ((rc = js_member(j, &first, &k, &kn)) == 1) {
		int64_t *field = NULL;

		if (key_is(k, kn, "topicName")) {
			const uint8_t *s;
			size_t n;
			bool esc;

			if (!js_peek(j, '"')) {
				ok = false;
				rc = js_skip(j, 3);
			} else if ((rc = js_string(j, &s, &n, &esc)) == 0) {
				t.name = (const char *)s;
				t.name_len = esc ? 0 : n; /* escapes: not a valid topic name */
			}
			if (rc != 0)
				return rc;
			continue;
		}
		if (key_is(k, kn, "dataplaneQueueCores")) {
			if ((rc = parse_cores(j, c, &t.n_cores, &ok)) != 0)
				return rc;
			t.cores = c->cores;
			continue;
		}
		if (key_is(k, kn, "readQueueNums"))
			field = &t.read_q;
		else if (key_is(k, kn, "writeQueueNums"))
			field = &t.write_q;
		else if (key_is(k, kn, "perm"))
			field = &t.perm;
		else if (key_is(k, kn, "topicSysFlag"))
			field = &t.sysflag;
		if (field != NULL) {
			bool iok;

			if ((rc = js_int_member(j, field, &iok)) != 0)
				return rc;
			ok &= iok;
		} else if ((rc = js_skip(j, 4)) != 0) {
			return rc;
		}
	}
	if (rc != 0)
		return rc;
	if (!ok) {
		c->skipped++;
		return 0;
	}
	rc = route_tset_add(c->ts, &t);
	if (rc == -EINVAL) {
		c->skipped++;
		rc = 0;
	}
	pace(c);
	return rc;
}

static int
parse_table(struct js *j, struct body_ctx *c)
{
	const uint8_t *k;
	size_t kn;
	bool first = true;
	int rc;

	if (c->ts == NULL || js_peek(j, 'n'))
		return js_skip(j, 2);
	if ((rc = js_expect(j, '{')) != 0)
		return rc;
	while ((rc = js_member(j, &first, &k, &kn)) == 1) {
		if ((rc = parse_topic(j, c, k, kn)) != 0)
			return rc;
	}
	return rc;
}

/*
 * A delta's sprocketDeletedTopics: an array of topic names, kept as a set of
 * names (their queue counts are unused). A bad name is skipped: the NameServer
 * holds no topic of that name.
 */
static int
parse_deleted(struct js *j, struct body_ctx *c)
{
	bool first = true;
	int rc;

	if (c->del == NULL || js_peek(j, 'n'))
		return js_skip(j, 2);
	if ((rc = js_expect(j, '[')) != 0)
		return rc;
	while ((rc = js_element(j, &first)) == 1) {
		struct route_topic_in t = {0};
		const uint8_t *s;
		bool esc;

		if (!js_peek(j, '"')) {
			c->skipped++;
			if ((rc = js_skip(j, 3)) != 0)
				return rc;
			continue;
		}
		if ((rc = js_string(j, &s, &t.name_len, &esc)) != 0)
			return rc;
		t.name = (const char *)s;
		rc = esc ? -EINVAL : route_tset_add(c->del, &t);
		if (rc == -EINVAL) {
			c->skipped++;
			rc = 0;
		}
		if (rc != 0)
			return rc;
		pace(c);
	}
	return rc;
}

/*
 * TopicConfigSerializeWrapper, or the top level: members dataVersion and
 * topicConfigTable (and a delta's sprocketDeletedTopics, at either level).
 */
static int
parse_wrapper(struct js *j, struct body_ctx *c, int depth)
{
	const uint8_t *k;
	size_t kn;
	bool first = true;
	int rc;

	if (js_peek(j, 'n'))
		return js_literal(j, "null");
	if ((rc = js_expect(j, '{')) != 0)
		return rc;
	while ((rc = js_member(j, &first, &k, &kn)) == 1) {
		if (key_is(k, kn, "dataVersion")) {
			if ((rc = parse_dv(j, &c->dv)) != 0)
				return rc;
			c->have_dv = true;
			if (c->ts == NULL)
				return 0; /* all ns__body_dv() wanted */
		} else if (key_is(k, kn, "topicConfigTable")) {
			rc = parse_table(j, c);
		} else if (key_is(k, kn, "sprocketDeletedTopics")) {
			rc = parse_deleted(j, c);
		} else if (depth == 0 && key_is(k, kn, "topicConfigSerializeWrapper")) {
			rc = parse_wrapper(j, c, 1);
			if (rc == 0 && c->ts == NULL && c->have_dv)
				return 0;
		} else {
			rc = js_skip(j, depth + 1);
		}
		if (rc != 0)
			return rc;
	}
	if (rc == 0 && depth == 0) {
		js_ws(j);
		if (j->p != j->end)
			return -EBADMSG; /* trailing bytes */
	}
	return rc;
}

static int
parse_json(const uint8_t *body, size_t len, struct body_ctx *c)
{
	struct js j = {.p = body, .end = body + len};

	return parse_wrapper(&j, c, 0);
}

/*
 * The zlib form: int32 len + DataVersion JSON, int32 count, count x (int32
 * len + "name readQ writeQ perm filterType"), int32 len + filter servers.
 */
static int
inflate_body(const uint8_t *body, size_t len, size_t want, size_t limit, uint8_t **out,
	     size_t *out_len)
{
	z_stream zs;
	size_t cap = want ? want : SP_MIN(SP_MAX(len * 4, (size_t)4096), limit);
	uint8_t *buf;
	int zrc;
	int rc = 0;

	if (len > UINT32_MAX)
		return -EBADMSG;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit(&zs) != Z_OK)
		return -ENOMEM;
	buf = malloc(cap);
	if (buf == NULL) {
		inflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)(uintptr_t)body;
	zs.avail_in = (uInt)len;
	for (;;) {
		if (zs.total_out == cap) {
			uint8_t *nb;

			if (want != 0)
				break; /* the prefix is all the caller wants */
			if (cap >= limit) {
				rc = -EFBIG;
				break;
			}
			cap = SP_MIN(cap * 2, limit);
			nb = realloc(buf, cap);
			if (nb == NULL) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
		}
		zs.next_out = buf + zs.total_out;
		zs.avail_out = (uInt)(cap - zs.total_out);
		zrc = inflate(&zs, Z_NO_FLUSH);
		if (zrc == Z_STREAM_END)
			break;
		if (zrc != Z_OK) {
			/* Z_BUF_ERROR with input left means truncated; either way malformed. */
			if (!(zrc == Z_BUF_ERROR && zs.avail_out == 0)) {
				rc = zrc == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
				break;
			}
		}
	}
	*out_len = zs.total_out;
	inflateEnd(&zs);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

static int
take_chunk(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **s, size_t *n)
{
	uint32_t l;

	if (len - *pos < 4)
		return -EBADMSG;
	l = (uint32_t)buf[*pos] << 24 | (uint32_t)buf[*pos + 1] << 16 |
	    (uint32_t)buf[*pos + 2] << 8 | buf[*pos + 3];
	*pos += 4;
	if (l > len - *pos)
		return -EBADMSG;
	*s = buf + *pos;
	*n = l;
	*pos += l;
	return 0;
}

/* "name readQ writeQ perm filterType" (TopicConfig.encode()). */
static int
parse_topic_line(struct body_ctx *c, const uint8_t *s, size_t n)
{
	struct route_topic_in t = {0};
	int64_t *nums[3] = {&t.read_q, &t.write_q, &t.perm};
	const uint8_t *end = s + n;
	const uint8_t *sp = memchr(s, ' ', n);
	int rc;

	if (sp == NULL) {
		c->skipped++;
		return 0;
	}
	t.name = (const char *)s;
	t.name_len = (size_t)(sp - s);
	s = sp + 1;
	for (unsigned i = 0; i < 3; i++) {
		struct js sub;
		const uint8_t *e = memchr(s, ' ', (size_t)(end - s));

		sub.p = s;
		sub.end = e != NULL ? e : end;
		if (js_number(&sub, nums[i]) != 0 || sub.p != sub.end) {
			c->skipped++;
			return 0;
		}
		s = e != NULL ? e + 1 : end;
	}
	rc = route_tset_add(c->ts, &t);
	if (rc == -EINVAL) {
		c->skipped++;
		rc = 0;
	}
	pace(c);
	return rc;
}

/*
 * What a compressed body of @len bytes may inflate to: the configured
 * maximum, and NS_INFLATE_RATIO times its size (a topic list deflates about
 * 5 to 20 times; a zip bomb 1000 times), so a bomb costs its sender's bytes.
 */
static size_t
inflate_limit(size_t len, size_t max)
{
	size_t by_ratio = len > (SIZE_MAX - 65536) / NS_INFLATE_RATIO
				  ? SIZE_MAX
				  : len * NS_INFLATE_RATIO + 65536;

	return SP_MIN(by_ratio, max ? max : (size_t)NS_INFLATE_MAX);
}

static int
parse_zlib(const uint8_t *body, size_t len, struct body_ctx *c)
{
	const uint8_t *s;
	size_t n;
	size_t pos = 0;
	size_t blen;
	uint8_t *buf;
	uint32_t count;
	struct js j;
	int rc;

	/* For the version alone 64 KiB of output is plenty. */
	rc = inflate_body(body, len, c->ts == NULL ? 65536 : 0, inflate_limit(len, c->inflate_max),
			  &buf, &blen);
	if (rc != 0)
		return rc;
	if ((rc = take_chunk(buf, blen, &pos, &s, &n)) != 0)
		goto out;
	j.p = s;
	j.end = s + n;
	if ((rc = parse_dv(&j, &c->dv)) != 0)
		goto out;
	c->have_dv = true;
	if (c->ts == NULL)
		goto out;
	if (blen - pos < 4) {
		rc = -EBADMSG;
		goto out;
	}
	count = (uint32_t)buf[pos] << 24 | (uint32_t)buf[pos + 1] << 16 |
		(uint32_t)buf[pos + 2] << 8 | buf[pos + 3];
	pos += 4;
	for (uint32_t i = 0; i < count; i++) {
		if ((rc = take_chunk(buf, blen, &pos, &s, &n)) != 0 ||
		    (rc = parse_topic_line(c, s, n)) != 0)
			goto out;
	}
	/* The filter-server list that follows is not used (no filter servers). */
out:
	free(buf);
	return rc;
}

int
ns__body_dv(const uint8_t *body, size_t len, bool compressed, struct route_dv *dv)
{
	struct body_ctx *c = calloc(1, sizeof(*c));
	int rc;

	if (c == NULL)
		return -ENOMEM;
	dv->timestamp = 0;
	dv->counter = 0;
	if (len == 0)
		rc = 0;
	else
		rc = compressed ? parse_zlib(body, len, c) : parse_json(body, len, c);
	if (rc == 0)
		*dv = c->dv;
	free(c);
	return rc == -EFBIG ? -EBADMSG : rc;
}

int
ns__body_topics(const uint8_t *body, size_t len, bool compressed, uint32_t max_cores,
		size_t inflate_max, struct route_tset **out, struct route_tset **deleted,
		uint32_t *skipped)
{
	struct body_ctx *c = calloc(1, sizeof(*c));
	int rc;

	*skipped = 0;
	if (c == NULL)
		return -ENOMEM;
	c->max_cores = max_cores;
	c->inflate_max = inflate_max;
	c->last_yield_ns = clk_mono_ns();
	/* A JSON topic is about 150 bytes: a size hint that avoids most regrowth. */
	rc = route_tset_create((uint32_t)SP_MIN(len / 128, (size_t)1 << 20), &c->ts);
	if (rc == 0 && deleted != NULL)
		rc = route_tset_create(16, &c->del);
	if (rc != 0)
		goto err_put;
	if (len > 0)
		rc = compressed ? parse_zlib(body, len, c) : parse_json(body, len, c);
	if (rc != 0)
		goto err_put;
	*out = c->ts;
	if (deleted != NULL)
		*deleted = c->del;
	*skipped = c->skipped;
	free(c);
	return 0;

err_put:
	route_tset_put(c->ts);
	route_tset_put(c->del);
	free(c);
	return rc;
}

int
ns__dv_parse(const uint8_t *json, size_t len, struct route_dv *dv)
{
	struct js j = {.p = json, .end = json + len};
	int rc = parse_dv(&j, dv);

	if (rc == 0) {
		js_ws(&j);
		if (j.p != j.end)
			rc = -EBADMSG;
	}
	return rc;
}
