// SPDX-License-Identifier: Apache-2.0
/*
 * sp_xtool.c - libsprocket on the command line, for the cross-protocol checks
 * of tests/compat/ (RocketMQ clients on the remoting port and libsprocket on
 * the dataplane, against one broker and one store).
 *
 *   sp_xtool produce --namesrv=H:P --topic=T [--count=N] [--start=I] [--tag=X]
 *                    [--keys=X] [--prop=K=V]... [--body=X | --body-hex=HEX]
 *   sp_xtool consume --namesrv=H:P --topic=T --group=G [--expr=TAGS]
 *                    [--mode=pull|push] [--from=first|last] [--count=N]
 *                    [--timeout-ms=MS] [--linger-ms=MS] [--no-commit]
 *   common: [--backend=udp|af_packet|dpdk] [--local-ip=A] [--iface=IF]
 *           [--dpdk-args=S] [--verbose]
 *
 * produce sends messages with indexes I..I+N-1 one at a time (sync) and
 * prints one JSON line per send: the index, the outcome, the queue and
 * offsets the broker chose, and what was sent (tags, keys, user properties,
 * body as hex). "{i}" in --tag, --keys, a --prop value or --body becomes the
 * index. Without --body or --body-hex the body is derived from the index and
 * holds every kind of byte (NUL, 0x80..0xff), so that byte equality across
 * protocols means something. Exit 0 when every send was stored.
 *
 * consume prints one JSON line per message delivered: topic, tags, keys,
 * msgId, every property, queueId, queueOffset, reconsumeTimes and the body as
 * hex. pull mode reads every read queue from the group's committed offset
 * (else the first or the last offset), commits what it printed (unless
 * --no-commit); push mode runs a push consumer of the group (one member, or
 * with --rebalance a member that joins the group and takes its share). It
 * stops once at least N messages were printed (then lingers --linger-ms to
 * print any extra ones) or at the timeout; every message delivered is printed,
 * so a caller sees duplicates and extras. Exit 0 when N were reached (or N is
 * 0), 1 at the timeout, 2 on bad usage or a setup error.
 *
 * JSON goes to stdout, one object per line, flushed per line; diagnostics
 * and libsprocket's log go to stderr. Test code: it asserts nothing itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sprocket/client.h"
#include "sprocket/consumer.h"
#include "sprocket/producer.h"

#define XT_PROPS_MAX 16
#define XT_BODY_MAX (1u << 20)

enum xt_mode {
	XT_PULL,
	XT_PUSH,
};

struct xt_opts {
	const char *cmd;
	const char *namesrv;
	enum sp_backend backend;
	const char *local_ip;
	const char *iface;
	const char *dpdk_args;
	bool verbose;
	/* produce */
	const char *topic;
	const char *group;
	const char *tag;
	const char *keys;
	const char *props[XT_PROPS_MAX]; /* "k=v" */
	unsigned n_props;
	const char *body;
	const char *body_hex;
	long count;
	long start;
	/* consume */
	const char *expr;
	enum xt_mode mode;
	enum sp_consume_from from;
	long timeout_ms;
	long linger_ms;
	bool commit;
	int rebalance; /* push: -1 one fixed member; else an enum sp_rebalance */
	long rebalance_ms;
	bool orderly;
	bool broadcast;
	const char *offset_dir;
	const char *client_id;
};

static pthread_mutex_t xt_out_lock = PTHREAD_MUTEX_INITIALIZER;
/* set by SIGINT/SIGTERM, polled by the main thread (the one use C allows volatile for) */
static volatile sig_atomic_t xt_stop;

static void
usage(void)
{
	fprintf(stderr,
		"usage: sp_xtool produce --namesrv=H:P --topic=T [--count=N] [--start=I]\n"
		"                        [--tag=X] [--keys=X] [--prop=K=V]...\n"
		"                        [--body=X | --body-hex=HEX] [--group=G]\n"
		"       sp_xtool consume --namesrv=H:P --topic=T --group=G [--expr=TAGS]\n"
		"                        [--mode=pull|push] [--from=first|last] [--count=N]\n"
		"                        [--timeout-ms=MS] [--linger-ms=MS] [--no-commit]\n"
		"                        [--rebalance=average|hash] [--rebalance-ms=MS] "
		"[--orderly]\n"
		"                        [--broadcast [--offset-dir=DIR]]\n"
		"  common: [--backend=udp|af_packet|dpdk] [--local-ip=A] [--iface=IF]\n"
		"          [--dpdk-args=S] [--client-id=ID] [--verbose]\n"
		"  \"{i}\" in --tag, --keys, --prop values and --body is the message index.\n");
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
on_signal(int sig)
{
	(void)sig;
	xt_stop = 1;
}

static void
log_cb(void *arg, enum sp_log_level level, const char *line)
{
	static const char *const names[] = {"err", "warn", "info", "debug"};

	(void)arg;
	fprintf(stderr, "sp_xtool: libsprocket %s: %s\n", names[level & 3], line);
}

static bool
parse_long(const char *s, long min, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min)
		return false;
	*out = v;
	return true;
}

/* ---- text helpers ---- */

/* @fmt with every "{i}" replaced by @idx, in a malloc'd string. */
static char *
subst_index(const char *fmt, long idx)
{
	char num[24];
	size_t nlen = (size_t)snprintf(num, sizeof(num), "%ld", idx);
	size_t cap = strlen(fmt) + 1;
	char *out;
	char *w;

	for (const char *p = strstr(fmt, "{i}"); p != NULL; p = strstr(p + 3, "{i}"))
		cap += nlen;
	out = malloc(cap);
	if (out == NULL)
		return NULL;
	w = out;
	while (*fmt) {
		if (strncmp(fmt, "{i}", 3) == 0) {
			memcpy(w, num, nlen);
			w += nlen;
			fmt += 3;
		} else {
			*w++ = *fmt++;
		}
	}
	*w = '\0';
	return out;
}

static char *
hex_encode(const void *buf, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = buf;
	char *out = malloc(2 * len + 1);

	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * len] = '\0';
	return out;
}

static int
hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Return: 0 with a malloc'd *@out, or -EINVAL for odd length or a bad digit. */
static int
hex_decode(const char *s, uint8_t **out, size_t *len)
{
	size_t n = strlen(s);
	uint8_t *b;

	if (n % 2 != 0)
		return -EINVAL;
	b = malloc(n / 2 + 1);
	if (b == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hex_val(s[2 * i]);
		int lo = hex_val(s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(b);
			return -EINVAL;
		}
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	*out = b;
	*len = n / 2;
	return 0;
}

/*
 * The derived body of message @idx: a readable prefix, then 16..271 bytes
 * that run through NUL and the high half (not valid UTF-8 on purpose);
 * #3 has 6000 of them, over compressMsgBodyOverHowmuch (4 KiB): libsprocket
 * sends it compressed.
 */
static size_t
body_derive(long idx, uint8_t *b, size_t cap)
{
	int n = snprintf((char *)b, cap, "sp_xtool body #%ld ", idx);
	size_t len = (size_t)n;
	size_t extra = idx == 3 ? 6000 : 16 + (size_t)(idx % 256);

	for (size_t k = 0; k < extra && len < cap; k++)
		b[len++] = (uint8_t)((unsigned long)idx * 131u + k * 17u);
	return len;
}

static void
json_add_str(struct json_object *o, const char *k, const char *v, size_t len)
{
	json_object_object_add(o, k, json_object_new_string_len(v, (int)len));
}

static void
json_emit(struct json_object *o)
{
	pthread_mutex_lock(&xt_out_lock);
	fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							JSON_C_TO_STRING_NOSLASHESCAPE),
	      stdout);
	fputc('\n', stdout);
	fflush(stdout);
	pthread_mutex_unlock(&xt_out_lock);
	json_object_put(o);
}

/* ---- the client ---- */

static int
client_open(const struct xt_opts *o, struct sp_client **out)
{
	struct sp_client_cfg cfg = {
		.namesrv = o->namesrv,
		.backend = o->backend,
		.iface = o->iface,
		.dpdk_args = o->dpdk_args,
		.client_id = o->client_id, /* NULL: sprocket@<pid> */
		.connect_timeout_ms = 5000,
		/* brokers with aclEnable (docs/security.md) */
		.access_key = getenv("SPROCKET_ACCESS_KEY"),
		.secret_key = getenv("SPROCKET_SECRET_KEY"),
		.log = log_cb,
		.log_level = o->verbose ? SP_LOG_DEBUG : SP_LOG_WARN,
	};
	struct in_addr a;
	int rc;

	if (inet_pton(AF_INET, o->local_ip, &a) != 1) {
		fprintf(stderr, "sp_xtool: bad --local-ip %s\n", o->local_ip);
		return -EINVAL;
	}
	cfg.local_ip = a.s_addr;
	rc = sp_client_create(&cfg, out);
	if (rc != 0)
		fprintf(stderr, "sp_xtool: client (namesrv %s): %s\n", o->namesrv, sp_strerror(rc));
	return rc;
}

/* ---- produce ---- */

static int
cmd_produce(const struct xt_opts *o)
{
	struct sp_producer_cfg pc = {
		.group = o->group ? o->group : "SP_XTOOL_PRODUCER",
		.retry_times = 2,
		.send_timeout_ms = 5000,
		.fault_tolerance = true,
	};
	struct sp_prop props[XT_PROPS_MAX];
	char *pkeys[XT_PROPS_MAX];
	struct sp_producer *p;
	struct sp_client *c;
	uint8_t *fixed_body = NULL;
	size_t fixed_len = 0;
	uint8_t *dbody;
	long ok = 0;
	long failed = 0;
	int rc;

	if (o->topic == NULL) {
		usage();
		return 2;
	}
	if (o->body_hex != NULL && hex_decode(o->body_hex, &fixed_body, &fixed_len) != 0) {
		fprintf(stderr, "sp_xtool: bad --body-hex\n");
		return 2;
	}
	for (unsigned k = 0; k < o->n_props; k++) {
		const char *eq = strchr(o->props[k], '=');

		if (eq == NULL || eq == o->props[k]) {
			fprintf(stderr, "sp_xtool: --prop wants KEY=VALUE, got %s\n", o->props[k]);
			free(fixed_body);
			return 2;
		}
		pkeys[k] = strndup(o->props[k], (size_t)(eq - o->props[k]));
		props[k].key = pkeys[k];
	}
	dbody = malloc(XT_BODY_MAX);
	if (dbody == NULL)
		return 2;
	rc = client_open(o, &c);
	if (rc != 0)
		return 2;
	rc = sp_producer_create(c, &pc, &p);
	if (rc != 0) {
		fprintf(stderr, "sp_xtool: producer: %s\n", sp_strerror(rc));
		sp_client_destroy(c);
		return 2;
	}

	for (long i = o->start; i < o->start + o->count && !xt_stop; i++) {
		char *tag = o->tag ? subst_index(o->tag, i) : NULL;
		char *keys = o->keys ? subst_index(o->keys, i) : NULL;
		char *vals[XT_PROPS_MAX];
		struct sp_msg m = {.topic = o->topic, .tags = tag, .keys = keys};
		struct sp_send_result res;
		struct json_object *j = json_object_new_object();
		struct json_object *jp = json_object_new_object();
		char *bhex;

		for (unsigned k = 0; k < o->n_props; k++) {
			vals[k] = subst_index(strchr(o->props[k], '=') + 1, i);
			props[k].val = vals[k];
			json_object_object_add(jp, props[k].key, json_object_new_string(vals[k]));
		}
		m.props = o->n_props ? props : NULL;
		m.n_props = o->n_props;
		if (fixed_body != NULL) {
			m.body = fixed_body;
			m.body_len = fixed_len;
		} else if (o->body != NULL) {
			char *b = subst_index(o->body, i);

			m.body_len = strlen(b) < XT_BODY_MAX ? strlen(b) : XT_BODY_MAX;
			memcpy(dbody, b, m.body_len);
			free(b);
			m.body = dbody;
		} else {
			m.body_len = body_derive(i, dbody, XT_BODY_MAX);
			m.body = dbody;
		}

		rc = sp_producer_send(p, &m, &res);
		json_object_object_add(j, "i", json_object_new_int64(i));
		json_object_object_add(j, "ok", json_object_new_boolean(rc == 0));
		if (rc == 0) {
			ok++;
			json_object_object_add(j, "status", json_object_new_int(res.status));
			json_object_object_add(j, "msgId", json_object_new_string(res.msg_id));
			json_object_object_add(j, "offsetMsgId",
					       json_object_new_string(res.offset_msg_id));
			json_object_object_add(j, "broker", json_object_new_string(res.broker));
			json_object_object_add(j, "queueId", json_object_new_int(res.queue_id));
			json_object_object_add(j, "queueOffset",
					       json_object_new_int64(res.queue_offset));
			json_object_object_add(j, "tries", json_object_new_int((int)res.tries));
		} else {
			failed++;
			json_object_object_add(j, "err", json_object_new_int(rc));
			json_object_object_add(j, "error", json_object_new_string(sp_strerror(rc)));
		}
		json_object_object_add(j, "topic", json_object_new_string(o->topic));
		json_object_object_add(j, "tags", json_object_new_string(tag ? tag : ""));
		json_object_object_add(j, "keys", json_object_new_string(keys ? keys : ""));
		json_object_object_add(j, "props", jp);
		bhex = hex_encode(m.body, m.body_len);
		json_object_object_add(j, "bodyHex", json_object_new_string(bhex ? bhex : ""));
		json_emit(j);
		free(bhex);
		for (unsigned k = 0; k < o->n_props; k++)
			free(vals[k]);
		free(tag);
		free(keys);
	}

	sp_producer_destroy(p);
	sp_client_destroy(c);
	for (unsigned k = 0; k < o->n_props; k++)
		free(pkeys[k]);
	free(fixed_body);
	free(dbody);
	fprintf(stderr, "sp_xtool: produced %ld of %ld to %s (%ld failed)\n", ok, o->count,
		o->topic, failed);
	return failed == 0 && ok == o->count ? 0 : 1;
}

/* ---- consume ---- */

static atomic_long xt_printed;

static void
emit_msg(const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	struct json_object *j = json_object_new_object();
	struct json_object *jp = json_object_new_object();
	const char *p = m->props;
	const char *end = m->props + m->props_len;
	char *bhex;

	/* k\x01v\x02k\x01v[\x02]: every property as the broker stored it */
	while (p < end) {
		const char *kend = memchr(p, '\x01', (size_t)(end - p));
		const char *vend;
		char *key;

		if (kend == NULL)
			break;
		vend = memchr(kend + 1, '\x02', (size_t)(end - kend - 1));
		if (vend == NULL)
			vend = end;
		key = strndup(p, (size_t)(kend - p));
		if (key != NULL && key[0] != '\0')
			json_add_str(jp, key, kend + 1, (size_t)(vend - kend - 1));
		free(key);
		p = vend + 1;
	}
	json_object_object_add(j, "topic", json_object_new_string(m->topic));
	json_object_object_add(j, "tags", json_object_new_string(m->tags));
	json_object_object_add(j, "keys", json_object_new_string(m->keys));
	json_object_object_add(j, "msgId", json_object_new_string(m->msg_id));
	json_object_object_add(j, "offsetMsgId", json_object_new_string(m->offset_msg_id));
	json_object_object_add(j, "broker", json_object_new_string(mq->broker));
	json_object_object_add(j, "queueTopic", json_object_new_string(mq->topic));
	json_object_object_add(j, "queueId", json_object_new_int(m->queue_id));
	json_object_object_add(j, "queueOffset", json_object_new_int64(m->queue_offset));
	json_object_object_add(j, "reconsumeTimes", json_object_new_int(m->reconsume_times));
	json_object_object_add(j, "flag", json_object_new_int(m->flag));
	json_object_object_add(j, "sysFlag", json_object_new_int(m->sys_flag));
	json_object_object_add(j, "bornTimestamp", json_object_new_int64(m->born_ts));
	json_object_object_add(j, "storeTimestamp", json_object_new_int64(m->store_ts));
	json_object_object_add(j, "props", jp);
	bhex = hex_encode(m->body, m->body_len);
	json_object_object_add(j, "bodyLen", json_object_new_int64((int64_t)m->body_len));
	json_object_object_add(j, "bodyHex", json_object_new_string(bhex ? bhex : ""));
	json_emit(j);
	free(bhex);
	atomic_fetch_add(&xt_printed, 1);
}

/* Return: true once the run should end; @reached_at is set when N is first reached. */
static bool
consume_done(const struct xt_opts *o, uint64_t deadline, uint64_t *reached_at)
{
	uint64_t t = now_ms();

	if (xt_stop || t >= deadline)
		return true;
	if (o->count > 0 && atomic_load(&xt_printed) >= o->count) {
		if (*reached_at == 0)
			*reached_at = t;
		return t >= *reached_at + (uint64_t)o->linger_ms;
	}
	return false;
}

struct xt_queue {
	struct sp_mq mq;
	int64_t offset;
	int64_t committed; /* last offset committed (-1: none) */
};

static int
pull_start_offset(struct sp_client *c, const struct xt_opts *o, struct xt_queue *q)
{
	int64_t off;
	int rc = sp_query_offset(c, o->group, &q->mq, &off);

	if (rc == 0 && off >= 0) {
		q->offset = off;
		return 0;
	}
	if (rc != 0 && sp_err_status(rc) != 22) { /* 22: QUERY_NOT_FOUND */
		fprintf(stderr, "sp_xtool: query offset %s/%s/%d: %s\n", q->mq.topic, q->mq.broker,
			q->mq.queue_id, sp_strerror(rc));
		return rc;
	}
	rc = o->from == SP_FROM_LAST ? sp_max_offset(c, &q->mq, &off)
				     : sp_min_offset(c, &q->mq, &off);
	if (rc != 0) {
		fprintf(stderr, "sp_xtool: start offset %s/%s/%d: %s\n", q->mq.topic, q->mq.broker,
			q->mq.queue_id, sp_strerror(rc));
		return rc;
	}
	q->offset = off;
	return 0;
}

static int
consume_pull(struct sp_client *c, const struct xt_opts *o, uint64_t deadline, uint64_t *reached_at)
{
	struct sp_mq *mqs;
	struct xt_queue *qs;
	size_t n;
	int rc = sp_topic_queues(c, o->topic, true, &mqs, &n);

	if (rc != 0) {
		fprintf(stderr, "sp_xtool: queues of %s: %s\n", o->topic, sp_strerror(rc));
		return rc;
	}
	qs = calloc(n ? n : 1, sizeof(*qs));
	if (qs == NULL) {
		free(mqs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		qs[i].mq = mqs[i];
		qs[i].committed = -1;
		rc = pull_start_offset(c, o, &qs[i]);
		if (rc != 0)
			goto out_free; /* nothing was printed: nothing to commit */
		qs[i].committed = qs[i].offset;
	}
	free(mqs);
	mqs = NULL;

	while (!consume_done(o, deadline, reached_at)) {
		bool any = false;

		for (size_t i = 0; i < n; i++) {
			struct sp_pull_req rq = {
				.offset = qs[i].offset,
				.max_msgs = 32,
				.expr = o->expr,
				.group = o->group,
			};
			struct sp_pull_result res;

			rc = sp_pull(c, &qs[i].mq, &rq, &res);
			if (rc != 0) {
				fprintf(stderr, "sp_xtool: pull %s/%s/%d at %lld: %s\n",
					qs[i].mq.topic, qs[i].mq.broker, qs[i].mq.queue_id,
					(long long)qs[i].offset, sp_strerror(rc));
				continue; /* transport hiccups: try again, bounded by the deadline */
			}
			for (size_t k = 0; k < res.n_msgs; k++)
				emit_msg(&qs[i].mq, &res.msgs[k]);
			if (res.status == SP_PULL_OFFSET_ILLEGAL)
				fprintf(stderr,
					"sp_xtool: offset %lld of %s/%d illegal, now %lld\n",
					(long long)qs[i].offset, qs[i].mq.topic, qs[i].mq.queue_id,
					(long long)res.next_offset);
			any |= res.next_offset != qs[i].offset;
			qs[i].offset = res.next_offset;
			sp_pull_result_free(&res);
		}
		if (!any)
			usleep(20000);
	}
	rc = 0;
	if (o->commit) {
		for (size_t i = 0; i < n; i++) {
			int r;

			if (qs[i].offset == qs[i].committed)
				continue;
			r = sp_update_offset(c, o->group, &qs[i].mq, qs[i].offset);
			if (r != 0) {
				fprintf(stderr, "sp_xtool: commit %s/%d = %lld: %s\n",
					qs[i].mq.topic, qs[i].mq.queue_id, (long long)qs[i].offset,
					sp_strerror(r));
				rc = rc ? rc : r;
			}
		}
	}
out_free:
	free(mqs);
	free(qs);
	return rc;
}

static enum sp_consume_status
push_cb(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *msg)
{
	(void)arg;
	emit_msg(mq, msg);
	return SP_CONSUME_SUCCESS;
}

static int
consume_push(struct sp_client *c, const struct xt_opts *o, uint64_t deadline, uint64_t *reached_at)
{
	struct sp_push_cfg cfg = {
		.group = o->group,
		.topic = o->topic,
		.expr = o->expr,
		.fn = push_cb,
		.from = o->from,
		.member_count = o->rebalance < 0 && !o->broadcast ? 1 : 0,
		.allocate =
			o->rebalance < 0 ? SP_REBALANCE_AVERAGE : (enum sp_rebalance)o->rebalance,
		.rebalance_ms = (uint32_t)o->rebalance_ms,
		.orderly = o->orderly,
		.broadcast = o->broadcast,
		.offset_dir = o->offset_dir,
		.suspend_ms = 1000,
		.commit_interval_ms = 1000,
	};
	struct sp_push *p;
	int rc = sp_push_start(c, &cfg, &p);

	if (rc != 0) {
		fprintf(stderr, "sp_xtool: push consumer on %s: %s\n", o->topic, sp_strerror(rc));
		return rc;
	}
	while (!consume_done(o, deadline, reached_at))
		usleep(10000);
	sp_push_stop(p); /* commits what was consumed; every message consumed was printed */
	return 0;
}

static int
cmd_consume(const struct xt_opts *o)
{
	uint64_t t0 = now_ms();
	uint64_t reached_at = 0;
	struct sp_client *c;
	int rc;

	if (o->topic == NULL || o->group == NULL) {
		usage();
		return 2;
	}
	if (client_open(o, &c) != 0)
		return 2;
	rc = o->mode == XT_PUSH ? consume_push(c, o, t0 + (uint64_t)o->timeout_ms, &reached_at)
				: consume_pull(c, o, t0 + (uint64_t)o->timeout_ms, &reached_at);
	sp_client_destroy(c);
	fprintf(stderr, "sp_xtool: consumed %ld from %s as %s (%s, wanted %ld)%s\n",
		atomic_load(&xt_printed), o->topic, o->group, o->mode == XT_PUSH ? "push" : "pull",
		o->count, reached_at || o->count == 0 ? "" : ": timed out");
	if (rc != 0)
		return 2;
	return o->count == 0 || reached_at != 0 ? 0 : 1;
}

/* ---- main ---- */

enum {
	OPT_NAMESRV = 1000,
	OPT_BACKEND,
	OPT_LOCAL_IP,
	OPT_IFACE,
	OPT_DPDK_ARGS,
	OPT_VERBOSE,
	OPT_TOPIC,
	OPT_GROUP,
	OPT_TAG,
	OPT_KEYS,
	OPT_PROP,
	OPT_BODY,
	OPT_BODY_HEX,
	OPT_COUNT,
	OPT_START,
	OPT_EXPR,
	OPT_MODE,
	OPT_FROM,
	OPT_TIMEOUT,
	OPT_LINGER,
	OPT_NO_COMMIT,
	OPT_REBALANCE,
	OPT_REBALANCE_MS,
	OPT_ORDERLY,
	OPT_BROADCAST,
	OPT_OFFSET_DIR,
	OPT_CLIENT_ID,
	OPT_HELP,
};

static const struct option xt_longopts[] = {
	{"namesrv", required_argument, NULL, OPT_NAMESRV},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"local-ip", required_argument, NULL, OPT_LOCAL_IP},
	{"iface", required_argument, NULL, OPT_IFACE},
	{"dpdk-args", required_argument, NULL, OPT_DPDK_ARGS},
	{"verbose", no_argument, NULL, OPT_VERBOSE},
	{"topic", required_argument, NULL, OPT_TOPIC},
	{"group", required_argument, NULL, OPT_GROUP},
	{"tag", required_argument, NULL, OPT_TAG},
	{"keys", required_argument, NULL, OPT_KEYS},
	{"prop", required_argument, NULL, OPT_PROP},
	{"body", required_argument, NULL, OPT_BODY},
	{"body-hex", required_argument, NULL, OPT_BODY_HEX},
	{"count", required_argument, NULL, OPT_COUNT},
	{"start", required_argument, NULL, OPT_START},
	{"expr", required_argument, NULL, OPT_EXPR},
	{"mode", required_argument, NULL, OPT_MODE},
	{"from", required_argument, NULL, OPT_FROM},
	{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
	{"linger-ms", required_argument, NULL, OPT_LINGER},
	{"rebalance", required_argument, NULL, OPT_REBALANCE},
	{"rebalance-ms", required_argument, NULL, OPT_REBALANCE_MS},
	{"orderly", no_argument, NULL, OPT_ORDERLY},
	{"broadcast", no_argument, NULL, OPT_BROADCAST},
	{"offset-dir", required_argument, NULL, OPT_OFFSET_DIR},
	{"client-id", required_argument, NULL, OPT_CLIENT_ID},
	{"no-commit", no_argument, NULL, OPT_NO_COMMIT},
	{"help", no_argument, NULL, OPT_HELP},
	{NULL, 0, NULL, 0},
};

static bool
parse_opt(struct xt_opts *o, int opt, const char *arg)
{
	switch (opt) {
	case OPT_NAMESRV:
		o->namesrv = arg;
		return true;
	case OPT_BACKEND:
		if (strcmp(arg, "udp") == 0)
			o->backend = SP_BACKEND_UDP;
		else if (strcmp(arg, "af_packet") == 0)
			o->backend = SP_BACKEND_AF_PACKET;
		else if (strcmp(arg, "dpdk") == 0)
			o->backend = SP_BACKEND_DPDK;
		else
			return false;
		return true;
	case OPT_LOCAL_IP:
		o->local_ip = arg;
		return true;
	case OPT_IFACE:
		o->iface = arg;
		return true;
	case OPT_DPDK_ARGS:
		o->dpdk_args = arg;
		return true;
	case OPT_VERBOSE:
		o->verbose = true;
		return true;
	case OPT_TOPIC:
		o->topic = arg;
		return true;
	case OPT_GROUP:
		o->group = arg;
		return true;
	case OPT_TAG:
		o->tag = arg;
		return true;
	case OPT_KEYS:
		o->keys = arg;
		return true;
	case OPT_PROP:
		if (o->n_props == XT_PROPS_MAX)
			return false;
		o->props[o->n_props++] = arg;
		return true;
	case OPT_BODY:
		o->body = arg;
		return true;
	case OPT_BODY_HEX:
		o->body_hex = arg;
		return true;
	case OPT_COUNT:
		return parse_long(arg, 0, &o->count);
	case OPT_START:
		return parse_long(arg, 0, &o->start);
	case OPT_EXPR:
		o->expr = arg;
		return true;
	case OPT_MODE:
		if (strcmp(arg, "pull") == 0)
			o->mode = XT_PULL;
		else if (strcmp(arg, "push") == 0)
			o->mode = XT_PUSH;
		else
			return false;
		return true;
	case OPT_FROM:
		if (strcmp(arg, "first") == 0)
			o->from = SP_FROM_FIRST;
		else if (strcmp(arg, "last") == 0)
			o->from = SP_FROM_LAST;
		else
			return false;
		return true;
	case OPT_TIMEOUT:
		return parse_long(arg, 1, &o->timeout_ms);
	case OPT_LINGER:
		return parse_long(arg, 0, &o->linger_ms);
	case OPT_NO_COMMIT:
		o->commit = false;
		return true;
	case OPT_REBALANCE:
		if (strcmp(arg, "average") == 0)
			o->rebalance = SP_REBALANCE_AVERAGE;
		else if (strcmp(arg, "hash") == 0)
			o->rebalance = SP_REBALANCE_CONSISTENT_HASH;
		else
			return false;
		return true;
	case OPT_REBALANCE_MS:
		return parse_long(arg, 1, &o->rebalance_ms);
	case OPT_ORDERLY:
		o->orderly = true;
		return true;
	case OPT_BROADCAST:
		o->broadcast = true;
		return true;
	case OPT_OFFSET_DIR:
		o->offset_dir = arg;
		return true;
	case OPT_CLIENT_ID:
		o->client_id = arg;
		return true;
	default:
		return false;
	}
}

int
main(int argc, char **argv)
{
	struct xt_opts o = {
		.backend = SP_BACKEND_UDP,
		.local_ip = "127.0.0.1",
		.count = 1,
		.expr = "*",
		.mode = XT_PULL,
		.from = SP_FROM_FIRST,
		.timeout_ms = 30000,
		.commit = true,
		.rebalance = -1,
	};
	struct sigaction sa = {.sa_handler = on_signal};
	int opt;

	if (argc < 2 || argv[1][0] == '-') {
		usage();
		return 2;
	}
	o.cmd = argv[1];
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", xt_longopts, NULL)) != -1) {
		if (opt == OPT_HELP) {
			usage();
			return 0;
		}
		if (opt == '?' || !parse_opt(&o, opt, optarg)) {
			if (opt != '?')
				fprintf(stderr, "sp_xtool: bad value for --%s: %s\n",
					xt_longopts[opt - OPT_NAMESRV].name, optarg ? optarg : "");
			usage();
			return 2;
		}
	}
	if (optind != argc || o.namesrv == NULL) {
		usage();
		return 2;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (strcmp(o.cmd, "produce") == 0)
		return cmd_produce(&o);
	if (strcmp(o.cmd, "consume") == 0)
		return cmd_consume(&o);
	usage();
	return 2;
}
