// SPDX-License-Identifier: Apache-2.0
/*
 * cli_msg.c - `sprocket message query`, `sprocket produce`, `sprocket
 * consume` (docs/cli.md): messages by key, id, unique key or queue offset,
 * with the groups that consumed them; one message per stdin line; and a
 * reader of every queue of a topic that commits a group's offsets. The
 * same requests as mqadmin's queryMsgByKey, queryMsgById,
 * queryMsgByUniqueKey, queryMsgByOffset and a RocketMQ client's SEND and PULL.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client_priv.h"
#include "common/clock.h"
#include "wire/record.h"
#include "wire/remoting.h"

#define BODY_MAX (4u << 20)
#define QUERY_MAX_NUM "32"

static volatile sig_atomic_t stop_now;

static void
on_sigint(int sig)
{
	(void)sig;
	stop_now = 1;
}

/* A PULL_MESSAGE header: no suspend, no commit, every tag (its strings live in @h). */
struct pull_hdr {
	char qid[16], off[24], max[24];
	const char *ext[32];
};

static const char *const *
pull_ext(struct pull_hdr *h, const char *group, const char *topic, uint32_t qid, int64_t off,
	 int64_t max)
{
	size_t e = 0;

	snprintf(h->qid, sizeof(h->qid), "%u", qid);
	snprintf(h->off, sizeof(h->off), "%" PRId64, off);
	snprintf(h->max, sizeof(h->max), "%" PRId64, max);
#define KV(k, v) (h->ext[e++] = (k), h->ext[e++] = (v))
	KV("consumerGroup", group);
	KV("topic", topic);
	KV("queueId", h->qid);
	KV("queueOffset", h->off);
	KV("maxMsgNums", h->max);
	KV("sysFlag", "0");
	KV("commitOffset", "0");
	KV("suspendTimeoutMillis", "0");
	KV("subscription", "*");
	KV("subVersion", "0");
	KV("expressionType", "TAG");
#undef KV
	h->ext[e] = NULL;
	return h->ext;
}

/* ---- printing a message ---- */

static bool
printable(const uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if ((b[i] < 0x20 && b[i] != '\t' && b[i] != '\n' && b[i] != '\r') || b[i] == 0x7f)
			return false;
	return true;
}

static json_object *
msg_json(const struct wire_msg *m, bool hex)
{
	json_object *o = json_object_new_object(), *props = json_object_new_object();
	char id[WIRE_MSGID_MAX], host[64];
	size_t pos = 0;
	struct wire_kv kv;

	wire_msgid_encode(&m->store_host, m->phys_offset, id);
	json_object_object_add(o, "msgId", json_object_new_string(id));
	json_object_object_add(o, "topic", json_object_new_string_len(m->topic, m->topic_len));
	json_object_object_add(o, "queueId", json_object_new_int(m->queue_id));
	json_object_object_add(o, "queueOffset", json_object_new_int64(m->queue_offset));
	json_object_object_add(o, "commitLogOffset", json_object_new_int64(m->phys_offset));
	json_object_object_add(o, "bornTimestamp", json_object_new_int64(m->born_ts));
	json_object_object_add(o, "storeTimestamp", json_object_new_int64(m->store_ts));
	wire_host_format(&m->born_host, host, sizeof(host));
	json_object_object_add(o, "bornHost", json_object_new_string(host));
	wire_host_format(&m->store_host, host, sizeof(host));
	json_object_object_add(o, "storeHost", json_object_new_string(host));
	json_object_object_add(o, "reconsumeTimes", json_object_new_int(m->reconsume_times));
	json_object_object_add(o, "sysFlag", json_object_new_int(m->sys_flag));
	while (wire_props_next(m->props, m->props_len, &pos, &kv)) {
		char k[256];

		snprintf(k, sizeof(k), "%.*s", (int)kv.key_len, kv.key);
		json_object_object_add(props, k,
				       json_object_new_string_len(kv.val, (int)kv.val_len));
	}
	json_object_object_add(o, "properties", props);
	if (m->sys_flag & WIRE_SYSFLAG_COMPRESSED)
		json_object_object_add(o, "compressed", json_object_new_boolean(true));
	if (!hex && printable(m->body, m->body_len)) {
		json_object_object_add(
			o, "body",
			json_object_new_string_len((const char *)m->body, (int)m->body_len));
	} else {
		static const char hx[] = "0123456789abcdef";
		char *h = malloc((size_t)m->body_len * 2 + 1);

		for (uint32_t i = 0; h && i < m->body_len; i++) {
			h[2 * i] = hx[m->body[i] >> 4];
			h[2 * i + 1] = hx[m->body[i] & 15];
		}
		if (h) {
			h[(size_t)m->body_len * 2] = '\0';
			json_object_object_add(o, "bodyHex", json_object_new_string(h));
		}
		free(h);
	}
	return o;
}

static void
msg_print_text(json_object *o)
{
	json_object *props;
	char ts[40];

	printf("msgId:           %s\n", cli_js(o, "msgId"));
	printf("topic:           %s\n", cli_js(o, "topic"));
	printf("queue / offset:  %" PRId64 " / %" PRId64 "\n", cli_ji(o, "queueId"),
	       cli_ji(o, "queueOffset"));
	printf("stored:          %s at %s\n", cli_time(ts, sizeof(ts), cli_ji(o, "storeTimestamp")),
	       cli_js(o, "storeHost"));
	printf("born:            %s at %s\n", cli_time(ts, sizeof(ts), cli_ji(o, "bornTimestamp")),
	       cli_js(o, "bornHost"));
	printf("reconsume times: %" PRId64 "\n", cli_ji(o, "reconsumeTimes"));
	if (json_object_object_get_ex(o, "properties", &props)) {
		printf("properties:     ");
		json_object_object_foreach(props, k, v)
			printf(" %s=%s", k, json_object_get_string(v));
		printf("\n");
	}
	if (cli_js(o, "body"))
		printf("body:            %s\n", cli_js(o, "body"));
	else
		printf("body (hex%s):     %s\n",
		       json_object_object_get_ex(o, "compressed", NULL) ? ", compressed" : "",
		       cli_js(o, "bodyHex"));
}

/* Which groups consumed @m: those that read the topic, and whose offset is past it. */
static json_object *
consumed_by(const struct cli *c, const char *addr, const struct wire_msg *m)
{
	char topic[256];
	const char *ext[] = {"topic", topic, NULL};
	struct sp_rem_resp resp;
	json_object *out = json_object_new_array(), *j, *list;

	snprintf(topic, sizeof(topic), "%.*s", (int)m->topic_len, m->topic);
	if (cli_call(c, addr, WIRE_REQ_QUERY_TOPIC_CONSUME_BY_WHO, ext, NULL, 0, &resp) != 0)
		return out;
	j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
	sp_rem_resp_free(&resp);
	if (j == NULL || !json_object_object_get_ex(j, "groupList", &list)) {
		json_object_put(j);
		return out;
	}
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		const char *g = json_object_get_string(json_object_array_get_idx(list, i));
		const char *gext[] = {"consumerGroup", g, "topic", topic, NULL};
		json_object *cs, *tab, *o = json_object_new_object();
		bool consumed = false;

		if (cli_call(c, addr, WIRE_REQ_GET_CONSUME_STATS, gext, NULL, 0, &resp) == 0) {
			cs = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
			sp_rem_resp_free(&resp);
			if (cs && json_object_object_get_ex(cs, "offsetTable", &tab)) {
				json_object_object_foreach(tab, mqs, ow)
				{
					json_object *mq = json_tokener_parse(mqs);

					if (cli_ji(mq, "queueId") == m->queue_id &&
					    cli_ji(ow, "consumerOffset") > m->queue_offset)
						consumed = true;
					json_object_put(mq);
				}
			}
			json_object_put(cs);
		}
		json_object_object_add(o, "group", json_object_new_string(g));
		json_object_object_add(o, "consumed", json_object_new_boolean(consumed));
		json_object_array_add(out, o);
	}
	json_object_put(j);
	return out;
}

/* Prints every record of @body (a QUERY_MESSAGE, VIEW_MESSAGE_BY_ID or PULL answer). Return: count. */
static size_t
print_records(const struct cli *c, const char *addr, const uint8_t *body, size_t len)
{
	size_t n = 0;

	for (size_t at = 0; at < len;) {
		struct wire_msg m;
		long r = wire_rec_decode(body + at, len - at, 0, &m);
		json_object *o, *who;

		if (r <= 0)
			break;
		at += (size_t)r;
		o = msg_json(&m, cli_flag(c, "hex"));
		who = consumed_by(c, addr, &m);
		if (c->json) {
			json_object_object_add(o, "consumedBy", who);
			cli_json_print(o);
		} else {
			if (n)
				printf("\n");
			msg_print_text(o);
			printf("consumed by:    ");
			for (size_t i = 0; i < json_object_array_length(who); i++) {
				json_object *g = json_object_array_get_idx(who, i);

				printf(" %s (%s)", cli_js(g, "group"),
				       json_object_get_boolean(
					       json_object_object_get(g, "consumed"))
					       ? "consumed"
					       : "not yet");
			}
			printf("%s\n", json_object_array_length(who) ? "" : " no group");
			json_object_put(who);
			json_object_put(o);
		}
		n++;
	}
	return n;
}

static int
message_query(struct cli *c)
{
	const char *topic = cli_opt(c, "topic"), *key = cli_opt(c, "key"), *id = cli_opt(c, "id"),
		   *uk = cli_opt(c, "unique-key"), *off = cli_opt(c, "offset");
	size_t found = 0;
	int ways = (key != NULL) + (id != NULL) + (uk != NULL) + (off != NULL);
	int rc = CLI_OK;

	if (ways != 1)
		return cli_usage(c, "one of --key=K, --id=MSGID, --unique-key=U, --offset=N");
	if (id) {
		struct wire_host h;
		int64_t phys;
		char addr[64], ps[24];
		const char *ext[] = {"offset", ps, NULL};
		struct sp_rem_resp resp;

		if (wire_msgid_decode(id, strlen(id), &h, &phys) != 0 || h.v6)
			return cli_usage(c, "--id=%s is not a broker (offset) message id", id);
		snprintf(addr, sizeof(addr), "%u.%u.%u.%u:%u", h.addr[0], h.addr[1], h.addr[2],
			 h.addr[3], h.port);
		snprintf(ps, sizeof(ps), "%" PRId64, phys);
		if (cli_call_ok(c, addr, WIRE_REQ_VIEW_MESSAGE_BY_ID, ext, NULL, 0, &resp) != 0)
			return CLI_FAIL;
		found = print_records(c, addr, resp.cmd.body, resp.cmd.body_len);
		sp_rem_resp_free(&resp);
	} else if (off) {
		int64_t o = -1, q = -1;
		const char *bname = cli_opt(c, "broker");
		struct cli_broker *b;
		size_t n;
		if (!topic || cli_opt_i64(c, "offset", &o) || cli_opt_i64(c, "queue", &q) ||
		    o < 0 || q < 0 || !bname)
			return cli_usage(c, "--offset=N needs --topic=T --broker=NAME --queue=Q");
		if (cli_topic_masters(c, topic, &b, &n) != 0)
			return CLI_FAIL;
		for (size_t i = 0; i < n; i++) {
			struct pull_hdr ph;
			const char *const *ext =
				pull_ext(&ph, "TOOLS_CONSUMER", topic, (uint32_t)q, o, 1);
			struct sp_rem_resp resp;

			if (strcmp(b[i].name, bname) != 0)
				continue;
			if (cli_call(c, b[i].addr, WIRE_REQ_PULL_MESSAGE, ext, NULL, 0, &resp) !=
			    0) {
				rc = CLI_FAIL;
				continue;
			}
			if (resp.cmd.code == WIRE_RSP_SUCCESS)
				found += print_records(c, b[i].addr, resp.cmd.body,
						       resp.cmd.body_len);
			sp_rem_resp_free(&resp);
		}
		free(b);
	} else {
		struct cli_broker *b;
		size_t n;
		char end[24];

		if (!topic)
			return cli_usage(c, "--key and --unique-key need --topic=T");
		if (cli_topic_masters(c, topic, &b, &n) != 0)
			return CLI_FAIL;
		snprintf(end, sizeof(end), "%" PRId64, (int64_t)clk_wall_ms() + 60000);
		for (size_t i = 0; i < n; i++) {
			const char *ext[] = {"topic",
					     topic,
					     "key",
					     key ? key : uk,
					     "maxNum",
					     QUERY_MAX_NUM,
					     "beginTimestamp",
					     "0",
					     "endTimestamp",
					     end,
					     uk ? "_UNIQUE_KEY_QUERY" : NULL,
					     "true",
					     NULL};
			struct sp_rem_resp resp;

			if (cli_call(c, b[i].addr, WIRE_REQ_QUERY_MESSAGE, ext, NULL, 0, &resp) !=
			    0) {
				rc = CLI_FAIL;
				continue;
			}
			if (resp.cmd.code == WIRE_RSP_SUCCESS)
				found += print_records(c, b[i].addr, resp.cmd.body,
						       resp.cmd.body_len);
			else if (resp.cmd.code != WIRE_RSP_QUERY_NOT_FOUND)
				rc = cli_said_no(b[i].addr, &resp);
			sp_rem_resp_free(&resp);
		}
		free(b);
	}
	if (found == 0 && rc == CLI_OK)
		return cli_err("no message found");
	return rc;
}

/* ---- the queues of a topic ---- */

struct tq {
	char broker[128];
	char addr[64];
	uint32_t qid;
	int64_t next; /* consume: the next offset to read */
	int64_t committed;
};

/*
 * One connection per broker, shared by all its queues: a topic of 12,000
 * queues opened 12,000 connections and was refused past
 * remotingMaxConnectionsPerAddr. The CLI runs one request at a time.
 */
#define TQ_CONNS_MAX 64

static struct {
	char addr[64];
	struct sp_rem *conn;
} tq_conns[TQ_CONNS_MAX];
static size_t tq_nconns;

/* The connection slot of @addr (a new, unconnected one if none); NULL when all are taken. */
static struct sp_rem **
tq_conn(const char *addr)
{
	for (size_t i = 0; i < tq_nconns; i++)
		if (strcmp(tq_conns[i].addr, addr) == 0)
			return &tq_conns[i].conn;
	if (tq_nconns == TQ_CONNS_MAX)
		return NULL;
	snprintf(tq_conns[tq_nconns].addr, sizeof(tq_conns[0].addr), "%s", addr);
	tq_conns[tq_nconns].conn = NULL;
	return &tq_conns[tq_nconns++].conn;
}

/* Queues of @topic: @want_write (produce) or readable ones (consume). */
static int
topic_queues(const struct cli *c, const char *topic, bool want_write, struct tq **out, size_t *n)
{
	struct cli_broker *b;
	size_t nb, cap = 0;
	const char *ext[] = {"topic", topic, NULL};
	struct sp_rem_resp resp;
	json_object *j, *qds;

	*out = NULL;
	*n = 0;
	if (cli_topic_masters(c, topic, &b, &nb) != 0)
		return CLI_FAIL;
	if (cli_ns_call(c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0, &resp) != 0) {
		free(b);
		return CLI_FAIL;
	}
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (j && json_object_object_get_ex(j, "queueDatas", &qds))
		for (size_t i = 0; i < json_object_array_length(qds); i++) {
			json_object *q = json_object_array_get_idx(qds, i);
			const char *bn = cli_js(q, "brokerName");
			int64_t perm = cli_ji(q, "perm");
			int64_t nq = cli_ji(q, want_write ? "writeQueueNums" : "readQueueNums");

			if (!(perm & (want_write ? 2 : 4)) || !bn)
				continue;
			for (size_t k = 0; k < nb; k++) {
				if (strcmp(b[k].name, bn) != 0)
					continue;
				for (int64_t qi = 0; qi < nq; qi++) {
					struct tq *t;

					if (*n == cap) {
						cap = cap ? cap * 2 : 16;
						*out = realloc(*out, cap * sizeof(**out));
						if (*out == NULL) {
							json_object_put(j);
							free(b);
							return cli_err("out of memory");
						}
					}
					t = &(*out)[(*n)++];
					memset(t, 0, sizeof(*t));
					snprintf(t->broker, sizeof(t->broker), "%s", bn);
					snprintf(t->addr, sizeof(t->addr), "%s", b[k].addr);
					t->qid = (uint32_t)qi;
					t->committed = -1;
				}
			}
		}
	json_object_put(j);
	free(b);
	if (*n == 0)
		return cli_err("topic %s has no %s queue on a reachable master", topic,
			       want_write ? "writable" : "readable");
	return 0;
}

static void
queues_close(struct tq *q, size_t n)
{
	(void)n;
	for (size_t i = 0; i < tq_nconns; i++)
		if (tq_conns[i].conn)
			sp_rem_close(tq_conns[i].conn);
	tq_nconns = 0;
	free(q);
}

/* A request on the queue's broker connection, (re)connected as needed. */
static int
tq_call(const struct cli *c, struct tq *q, int32_t code, const char *const *ext, const void *body,
	size_t len, struct sp_rem_resp *resp)
{
	struct wire_rem_cmd r = {.code = code,
				 .language = WIRE_LANG_JAVA,
				 .version = WIRE_REM_VERSION_V4_9_8,
				 .serialize = WIRE_REM_JSON};
	struct sp_rem **conn = tq_conn(q->addr);
	int err;

	if (conn == NULL)
		return cli_err("a topic on more than %d brokers", TQ_CONNS_MAX);
	for (size_t i = 0; ext[i] && ext[i + 1]; i += 2)
		if (wire_rem_ext_add(&r, ext[i], ext[i + 1]) != 0)
			return cli_err("too many request fields");
	if (*conn == NULL) {
		err = cli_connect(c, q->addr, conn);
		if (err)
			return cli_err("%s: cannot connect: %s", q->addr, strerror(-err));
	}
	err = sp_rem_call(*conn, &r, body, len, c->timeout_ms, 0, resp);
	if (err) {
		sp_rem_close(*conn);
		*conn = NULL;
		return cli_err("%s: request %d failed: %s", q->addr, code, strerror(-err));
	}
	return 0;
}

/* ---- produce ---- */

static int
padd(char *buf, size_t cap, size_t *len, const char *k, const char *v)
{
	return wire_props_append(buf, cap, len, k, strlen(k), v, strlen(v));
}

static int
produce(struct cli *c)
{
	const char *topic, *tag = cli_opt(c, "tag"), *key = cli_opt(c, "key");
	int64_t delay = 0;
	struct tq *qs;
	size_t nq, next = 0, sent = 0, failed = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	char props[WIRE_PROPS_MAX + 1];
	size_t plen = 0;

	if (c->npos != 1)
		return cli_usage(c, "one TOPIC (messages come from stdin, one per line)");
	topic = c->pos[0];
	if (cli_opt_i64(c, "delay", &delay) || delay < 0 || delay > 18)
		return cli_usage(c, "--delay is a delay level 1..18 (1s 5s 10s 30s 1m ...)");
	/* properties shared by every line: user ones, TAGS, KEYS, DELAY, WAIT */
	for (size_t i = 0; i < c->nprops; i++) {
		const char *eq = strchr(c->props[i], '=');
		char k[256];

		snprintf(k, sizeof(k), "%.*s", (int)(eq - c->props[i]), c->props[i]);
		if (padd(props, sizeof(props), &plen, k, eq + 1) != 0)
			return cli_usage(c, "properties too long");
	}
	if ((tag && padd(props, sizeof(props), &plen, "TAGS", tag) != 0) ||
	    (key && padd(props, sizeof(props), &plen, "KEYS", key) != 0))
		return cli_usage(c, "properties too long");
	if (delay > 0) {
		char d[24];

		snprintf(d, sizeof(d), "%" PRId64, delay);
		if (padd(props, sizeof(props), &plen, "DELAY", d) != 0)
			return cli_usage(c, "properties too long");
	}
	if (padd(props, sizeof(props), &plen, "WAIT", "true") != 0)
		return cli_usage(c, "properties too long");
	if (topic_queues(c, topic, true, &qs, &nq) != 0)
		return CLI_FAIL;
	signal(SIGINT, on_sigint);
	while (!stop_now && (len = getline(&line, &cap, stdin)) >= 0) {
		char uniq[SP_MSGID_LEN + 1], allp[WIRE_PROPS_MAX + 1], qid[16], born[24];
		size_t alen = plen;
		struct tq *q = &qs[next++ % nq];
		struct sp_rem_resp resp;
		const char *ext[32];
		size_t e = 0;
		int32_t code;

		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if ((size_t)len > BODY_MAX) {
			failed++;
			cli_err("line %zu: longer than %u bytes: skipped", sent + failed, BODY_MAX);
			continue;
		}
		sp__msgid_new(uniq);
		memcpy(allp, props, plen);
		if (padd(allp, sizeof(allp), &alen, "UNIQ_KEY", uniq) != 0) {
			failed++;
			continue;
		}
		allp[alen] = '\0';
		snprintf(qid, sizeof(qid), "%u", q->qid);
		snprintf(born, sizeof(born), "%" PRId64, (int64_t)clk_wall_ms());
		/* SendMessageRequestHeaderV2: a..m */
		ext[e++] = "a", ext[e++] = "SPROCKET_CLI_PRODUCER";
		ext[e++] = "b", ext[e++] = topic;
		ext[e++] = "c", ext[e++] = "TBW102";
		ext[e++] = "d", ext[e++] = "4";
		ext[e++] = "e", ext[e++] = qid;
		ext[e++] = "f", ext[e++] = "0";
		ext[e++] = "g", ext[e++] = born;
		ext[e++] = "h", ext[e++] = "0";
		ext[e++] = "i", ext[e++] = allp;
		ext[e++] = "j", ext[e++] = "0";
		ext[e++] = "k", ext[e++] = "false";
		ext[e++] = "m", ext[e++] = "false";
		ext[e] = NULL;
		if (tq_call(c, q, WIRE_REQ_SEND_MESSAGE_V2, ext, line, (size_t)len, &resp) != 0) {
			failed++;
			continue;
		}
		code = resp.cmd.code;
		{
			const char *status = code == 0	  ? "SEND_OK"
					     : code == 10 ? "FLUSH_DISK_TIMEOUT"
					     : code == 12 ? "FLUSH_SLAVE_TIMEOUT"
					     : code == 11 ? "SLAVE_NOT_AVAILABLE"
							  : NULL;
			const char *mid = NULL, *qo = NULL;

			for (unsigned k = 0; k < resp.cmd.n_ext; k++) {
				if (strcmp(resp.cmd.ext[k].key, "msgId") == 0)
					mid = resp.cmd.ext[k].val;
				else if (strcmp(resp.cmd.ext[k].key, "queueOffset") == 0)
					qo = resp.cmd.ext[k].val;
			}
			if (status == NULL) {
				failed++;
				cli_said_no(q->addr, &resp);
			} else if (c->json) {
				json_object *o = json_object_new_object();

				json_object_object_add(o, "status", json_object_new_string(status));
				json_object_object_add(o, "msgId",
						       json_object_new_string(mid ? mid : ""));
				json_object_object_add(o, "uniqKey", json_object_new_string(uniq));
				json_object_object_add(o, "brokerName",
						       json_object_new_string(q->broker));
				json_object_object_add(o, "queueId",
						       json_object_new_int((int)q->qid));
				json_object_object_add(o, "queueOffset",
						       json_object_new_int64(qo ? atoll(qo) : -1));
				cli_json_print(o);
				sent++;
			} else {
				printf("%s %s %s/%u@%s\n", status, mid ? mid : "-", q->broker,
				       q->qid, qo ? qo : "?");
				sent++;
			}
		}
		fflush(stdout);
		sp_rem_resp_free(&resp);
	}
	free(line);
	queues_close(qs, nq);
	if (!c->json)
		fprintf(stderr, "sprocket: %zu sent, %zu failed\n", sent, failed);
	return failed ? CLI_FAIL : CLI_OK;
}

/* ---- consume ---- */

static int
offset_of(const struct cli *c, struct tq *q, const char *topic, int32_t code, const char *ts,
	  int64_t *out)
{
	char qid[16];
	const char *ext[] = {"topic", topic, "queueId", qid, ts ? "timestamp" : NULL, ts, NULL};
	struct sp_rem_resp resp;

	snprintf(qid, sizeof(qid), "%u", q->qid);
	if (tq_call(c, q, code, ext, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	*out = -1;
	if (resp.cmd.code == WIRE_RSP_SUCCESS)
		for (unsigned k = 0; k < resp.cmd.n_ext; k++)
			if (strcmp(resp.cmd.ext[k].key, "offset") == 0)
				*out = atoll(resp.cmd.ext[k].val);
	if (*out < 0) {
		int rc = cli_said_no(q->addr, &resp);

		sp_rem_resp_free(&resp);
		return rc;
	}
	sp_rem_resp_free(&resp);
	return 0;
}

static int
commit(const struct cli *c, struct tq *q, const char *topic, const char *group)
{
	char qid[16], off[24];
	const char *ext[] = {"consumerGroup", group, "topic", topic, "queueId", qid,
			     "commitOffset",  off,   NULL};
	struct sp_rem_resp resp;

	if (q->next == q->committed)
		return 0;
	snprintf(qid, sizeof(qid), "%u", q->qid);
	snprintf(off, sizeof(off), "%" PRId64, q->next);
	if (tq_call(c, q, WIRE_REQ_UPDATE_CONSUMER_OFFSET, ext, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	if (resp.cmd.code == WIRE_RSP_SUCCESS)
		q->committed = q->next;
	else
		cli_said_no(q->addr, &resp);
	sp_rem_resp_free(&resp);
	return q->committed == q->next ? 0 : CLI_FAIL;
}

static int
consume(struct cli *c)
{
	const char *topic, *group = cli_opt(c, "group"), *from = cli_opt(c, "from");
	int64_t max = -1, wait_ms = -1, got = 0;
	struct tq *qs;
	size_t nq;
	uint64_t idle_since;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one TOPIC");
	topic = c->pos[0];
	if (cli_opt_i64(c, "n", &max) || cli_opt_i64(c, "wait-ms", &wait_ms))
		return CLI_USAGE;
	if (!from)
		from = group ? "last" : "first";
	if (strcmp(from, "first") != 0 && strcmp(from, "last") != 0 &&
	    !(from[0] >= '0' && from[0] <= '9'))
		return cli_usage(c, "--from=first|last|MS_SINCE_1970");
	if (topic_queues(c, topic, false, &qs, &nq) != 0)
		return CLI_FAIL;
	/* where each queue starts: the group's committed offset, else --from */
	for (size_t i = 0; i < nq; i++) {
		int64_t off = -1;

		if (group) {
			char qid[16];
			const char *ext[] = {"consumerGroup", group, "topic", topic,
					     "queueId",	      qid,   NULL};
			struct sp_rem_resp resp;

			snprintf(qid, sizeof(qid), "%u", qs[i].qid);
			if (tq_call(c, &qs[i], WIRE_REQ_QUERY_CONSUMER_OFFSET, ext, NULL, 0,
				    &resp) != 0) {
				queues_close(qs, nq);
				return CLI_FAIL;
			}
			if (resp.cmd.code == WIRE_RSP_SUCCESS)
				for (unsigned k = 0; k < resp.cmd.n_ext; k++)
					if (strcmp(resp.cmd.ext[k].key, "offset") == 0)
						off = atoll(resp.cmd.ext[k].val);
			sp_rem_resp_free(&resp);
			qs[i].committed = off;
		}
		if (off < 0 &&
		    offset_of(c, &qs[i], topic,
			      strcmp(from, "first") == 0  ? WIRE_REQ_GET_MIN_OFFSET
			      : strcmp(from, "last") == 0 ? WIRE_REQ_GET_MAX_OFFSET
							  : WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP,
			      strcmp(from, "first") == 0 || strcmp(from, "last") == 0 ? NULL : from,
			      &off) != 0) {
			queues_close(qs, nq);
			return CLI_FAIL;
		}
		qs[i].next = off;
	}
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	idle_since = clk_mono_ns() / 1000000;
	while (!stop_now && (max < 0 || got < max)) {
		bool any = false;

		for (size_t i = 0; i < nq && !stop_now && (max < 0 || got < max); i++) {
			struct tq *q = &qs[i];
			struct pull_hdr ph;
			const char *const *ext = pull_ext(
				&ph, group ? group : "TOOLS_CONSUMER", topic, q->qid, q->next,
				max < 0 || max - got > 32 ? (int64_t)32 : max - got);
			struct sp_rem_resp resp;

			if (tq_call(c, q, WIRE_REQ_PULL_MESSAGE, ext, NULL, 0, &resp) != 0) {
				rc = CLI_FAIL;
				stop_now = 1;
				break;
			}
			if (resp.cmd.code == WIRE_RSP_SUCCESS) {
				for (size_t at = 0;
				     at < resp.cmd.body_len && (max < 0 || got < max);) {
					struct wire_msg m;
					long r = wire_rec_decode(resp.cmd.body + at,
								 resp.cmd.body_len - at, 0, &m);
					json_object *o;

					if (r <= 0)
						break;
					at += (size_t)r;
					q->next = m.queue_offset + 1;
					o = msg_json(&m, cli_flag(c, "hex"));
					if (c->json) {
						json_object_object_add(
							o, "brokerName",
							json_object_new_string(q->broker));
						cli_json_print(o);
					} else {
						const char *body = cli_js(o, "body");

						printf("%s\n", body ? body : cli_js(o, "bodyHex"));
						json_object_put(o);
					}
					got++;
					any = true;
				}
			} else if (resp.cmd.code == WIRE_RSP_PULL_OFFSET_MOVED ||
				   resp.cmd.code == WIRE_RSP_PULL_NOT_FOUND) {
				for (unsigned k = 0; k < resp.cmd.n_ext; k++)
					if (strcmp(resp.cmd.ext[k].key, "nextBeginOffset") == 0)
						q->next = atoll(resp.cmd.ext[k].val);
			} else if (resp.cmd.code != WIRE_RSP_PULL_RETRY_IMMEDIATELY) {
				rc = cli_said_no(q->addr, &resp);
				stop_now = 1;
			}
			sp_rem_resp_free(&resp);
			fflush(stdout);
			if (group && commit(c, q, topic, group) != 0)
				rc = CLI_FAIL;
		}
		if (any) {
			idle_since = clk_mono_ns() / 1000000;
		} else {
			if (wait_ms >= 0 &&
			    clk_mono_ns() / 1000000 - idle_since >= (uint64_t)wait_ms)
				break;
			usleep(100000);
		}
	}
	/* Ctrl-C: what was printed is committed before we go */
	for (size_t i = 0; group && i < nq; i++)
		if (commit(c, &qs[i], topic, group) != 0)
			rc = CLI_FAIL;
	queues_close(qs, nq);
	if (!c->json)
		fprintf(stderr, "sprocket: %" PRId64 " message(s)%s%s\n", got,
			group ? ", offsets committed for " : "", group ? group : "");
	return rc;
}

static const char *const QUERY_OPTS[] = {"topic",  "key",   "id",  "unique-key", "offset",
					 "broker", "queue", "hex", NULL};
static const char *const PRODUCE_OPTS[] = {"tag", "key", "delay", "property", NULL};
static const char *const CONSUME_OPTS[] = {"group", "from", "n", "wait-ms", "hex", NULL};

const struct cli_cmd cli_msg_cmds[] = {
	{"message query",
	 "--topic=T --key=K | --id=MSGID | --topic=T --unique-key=U | --topic=T --broker=NAME "
	 "--queue=Q --offset=N [--hex]",
	 "find messages: body, properties, store time, and which groups consumed them", QUERY_OPTS,
	 message_query},
	{"produce", "TOPIC [--tag=T] [--key=K] [--delay=LEVEL] [--property=K=V]...",
	 "send one message per stdin line; prints status, msgId, queue and offset", PRODUCE_OPTS,
	 produce},
	{"consume", "TOPIC [--group=G] [--from=first|last|MS] [-n N] [--wait-ms=MS] [--hex]",
	 "read every queue of a topic; with --group, commit its offsets (also on Ctrl-C)",
	 CONSUME_OPTS, consume},
};
const size_t cli_msg_ncmds = sizeof(cli_msg_cmds) / sizeof(cli_msg_cmds[0]);
