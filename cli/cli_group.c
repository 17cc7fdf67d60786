// SPDX-License-Identifier: Apache-2.0
/*
 * cli_group.c - `sprocket group ...` (docs/cli.md): consumer groups, their
 * lag per queue, offset resets and deletion. The same requests as mqadmin's
 * consumerProgress, consumerConnection, resetOffsetByTime and
 * deleteSubGroup.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "wire/remoting.h"

#define RETRY "%RETRY%"

/* The masters a group lives on: its retry topic's route, else every master. */
static int
group_masters(const struct cli *c, const char *group, struct cli_broker **b, size_t *n)
{
	char retry[512];
	struct cli_broker *all;
	size_t na, k = 0;

	snprintf(retry, sizeof(retry), "%s%s", RETRY, group);
	{
		const char *ext[] = {"topic", retry, NULL};
		struct sp_rem_resp resp;
		bool routed;

		if (cli_ns_call(c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0, &resp) != 0)
			return CLI_FAIL;
		routed = resp.cmd.code == WIRE_RSP_SUCCESS;
		sp_rem_resp_free(&resp);
		if (routed && cli_topic_masters(c, retry, b, n) == 0 && *n > 0)
			return 0;
	}
	if (cli_brokers(c, &all, &na) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < na; i++)
		if (all[i].id == 0)
			all[k++] = all[i];
	*b = all;
	*n = k;
	return k ? 0 : cli_err("no master is registered");
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
name_add(json_object *set, const char *name)
{
	if (!json_object_object_get_ex(set, name, NULL))
		json_object_object_add(set, name, NULL);
}

/* A broker refused to list its groups (ACL: an admin account): say so, the list goes on. */
static void
refused_note(const char *addr, const struct sp_rem_resp *resp)
{
	fprintf(stderr,
		"sprocket: %s: %.*s (its groups are not listed; an admin account sees them)\n",
		addr, (int)resp->cmd.remark_len, resp->cmd.remark ? resp->cmd.remark : "");
}

static int
group_list(struct cli *c)
{
	struct sp_rem_resp resp;
	json_object *j, *list, *set = json_object_new_object(), *out;
	struct cli_broker *b;
	size_t n;
	const char **names;
	size_t nn = 0;

	if (cli_ns_call(c, WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER, NULL, NULL, 0, &resp) !=
	    0) {
		json_object_put(set);
		return CLI_FAIL;
	}
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	/* a group that heartbeated has its retry topic */
	if (j && json_object_object_get_ex(j, "topicList", &list))
		for (size_t i = 0; i < json_object_array_length(list); i++) {
			const char *t = json_object_get_string(json_object_array_get_idx(list, i));

			if (strncmp(t, RETRY, strlen(RETRY)) == 0)
				name_add(set, t + strlen(RETRY));
		}
	json_object_put(j);
	/* and one that committed offsets has them on a master ("topic@group" keys), and one
	 * configured there (subscription groups) */
	if (cli_brokers(c, &b, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			json_object *tab;

			if (b[i].id == 0 &&
			    cli_call(c, b[i].addr, WIRE_REQ_GET_ALL_SUBSCRIPTIONGROUP_CONFIG, NULL,
				     NULL, 0, &resp) == 0) {
				j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
				if (resp.cmd.code == WIRE_RSP_NO_PERMISSION)
					refused_note(b[i].addr, &resp);
				sp_rem_resp_free(&resp);
				if (j &&
				    json_object_object_get_ex(j, "subscriptionGroupTable", &tab)) {
					json_object_object_foreach(tab, gname, gv)
					{
						(void)gv;
						name_add(set, gname);
					}
				}
				json_object_put(j);
			}

			if (b[i].id != 0 || cli_call(c, b[i].addr, WIRE_REQ_GET_ALL_CONSUMER_OFFSET,
						     NULL, NULL, 0, &resp) != 0)
				continue;
			j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
			if (resp.cmd.code == WIRE_RSP_NO_PERMISSION)
				refused_note(b[i].addr, &resp);
			sp_rem_resp_free(&resp);
			if (j && json_object_object_get_ex(j, "offsetTable", &tab)) {
				json_object_object_foreach(tab, key, v)
				{
					const char *at = strrchr(key, '@');

					(void)v;
					if (at && at[1])
						name_add(set, at + 1);
				}
			}
			json_object_put(j);
		}
		free(b);
	}
	names = calloc(json_object_object_length(set) + 1, sizeof(*names));
	if (names == NULL) {
		json_object_put(set);
		return cli_err("out of memory");
	}
	json_object_object_foreach(set, k, v)
	{
		(void)v;
		names[nn++] = k;
	}
	qsort(names, nn, sizeof(*names), str_cmp);
	out = json_object_new_array();
	for (size_t i = 0; i < nn; i++) {
		if (c->json)
			json_object_array_add(out, json_object_new_string(names[i]));
		else
			puts(names[i]);
	}
	free(names);
	json_object_put(set);
	if (c->json)
		cli_json_print(out);
	else
		json_object_put(out);
	return CLI_OK;
}

struct qrow {
	char topic[256];
	char broker[128];
	int64_t qid;
	int64_t broker_off, cons_off, last_ms;
	const char *client; /* points into the clients array */
};

static int
qrow_cmp(const void *a, const void *b)
{
	const struct qrow *x = a, *y = b;
	int r = strcmp(x->topic, y->topic);

	if (r == 0)
		r = strcmp(x->broker, y->broker);
	if (r == 0)
		r = x->qid < y->qid ? -1 : x->qid > y->qid;
	return r;
}

/*
 * Who holds each queue, as RocketMQ's default strategy
 * (AllocateMessageQueueAveragely) assigns a topic's sorted queues to the
 * sorted client ids.
 */
static void
assign_clients(struct qrow *r, size_t n, const char **cid, size_t ncid)
{
	for (size_t a = 0; a < n && ncid > 0;) {
		size_t b = a, nq;

		while (b < n && strcmp(r[b].topic, r[a].topic) == 0)
			b++;
		nq = b - a;
		for (size_t idx = 0; idx < ncid; idx++) {
			size_t mod = nq % ncid;
			size_t avg =
				nq <= ncid ? 1 : (mod > 0 && idx < mod ? nq / ncid + 1 : nq / ncid);
			size_t start = mod > 0 && idx < mod ? idx * avg : idx * avg + mod;

			for (size_t k = 0; k < avg && start + k < nq; k++)
				r[a + start + k].client = cid[idx];
		}
		a = b;
	}
}

static int
group_describe(struct cli *c)
{
	const char *group, *topic = cli_opt(c, "topic");
	struct cli_broker *b;
	size_t n, nr = 0, cap = 0, ncid = 0;
	struct qrow *rows = NULL;
	const char **cid = NULL;
	json_object *conns = NULL;
	int64_t lag = 0;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one GROUP");
	group = c->pos[0];
	if (group_masters(c, group, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		const char *ext[] = {"consumerGroup", group, topic ? "topic" : NULL, topic, NULL};
		json_object *j, *tab;

		if (cli_call_json(c, b[i].addr, WIRE_REQ_GET_CONSUME_STATS, ext, "offsetTable", &j,
				  &tab) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		json_object_object_foreach(tab, mqs, ow)
		{
			json_object *mq = json_tokener_parse(mqs);

			if (nr == cap) {
				cap = cap ? cap * 2 : 64;
				rows = realloc(rows, cap * sizeof(*rows));
				if (rows == NULL) {
					json_object_put(mq);
					json_object_put(j);
					free(b);
					return cli_err("out of memory");
				}
			}
			memset(&rows[nr], 0, sizeof(rows[nr]));
			snprintf(rows[nr].topic, sizeof(rows[nr].topic), "%s",
				 cli_js(mq, "topic") ? cli_js(mq, "topic") : "");
			snprintf(rows[nr].broker, sizeof(rows[nr].broker), "%s",
				 cli_js(mq, "brokerName") ? cli_js(mq, "brokerName") : b[i].name);
			rows[nr].qid = cli_ji(mq, "queueId");
			rows[nr].broker_off = cli_ji(ow, "brokerOffset");
			rows[nr].cons_off = cli_ji(ow, "consumerOffset");
			rows[nr].last_ms = cli_ji(ow, "lastTimestamp");
			nr++;
			json_object_put(mq);
		}
		json_object_put(j);
	}
	/* the live clients, from the first master that knows them */
	for (size_t i = 0; i < n && conns == NULL; i++) {
		const char *ext[] = {"consumerGroup", group, NULL};
		struct sp_rem_resp resp;
		json_object *set;

		if (cli_call(c, b[i].addr, WIRE_REQ_GET_CONSUMER_CONNECTION_LIST, ext, NULL, 0,
			     &resp) != 0)
			continue;
		if (resp.cmd.code == WIRE_RSP_SUCCESS)
			conns = cli_body_json(&resp);
		sp_rem_resp_free(&resp);
		if (conns && json_object_object_get_ex(conns, "connectionSet", &set)) {
			ncid = json_object_array_length(set);
			cid = calloc(ncid ? ncid : 1, sizeof(*cid));
			for (size_t k = 0; cid && k < ncid; k++)
				cid[k] = cli_js(json_object_array_get_idx(set, k), "clientId");
			if (cid)
				qsort(cid, ncid, sizeof(*cid), str_cmp);
		}
	}
	free(b);
	if (nr)
		qsort(rows, nr, sizeof(*rows), qrow_cmp);
	if (cid)
		assign_clients(rows, nr, cid, ncid);
	if (c->json) {
		json_object *o = json_object_new_object(), *arr = json_object_new_array();

		for (size_t k = 0; k < nr; k++) {
			json_object *r = json_object_new_object();

			json_object_object_add(r, "topic", json_object_new_string(rows[k].topic));
			json_object_object_add(r, "brokerName",
					       json_object_new_string(rows[k].broker));
			json_object_object_add(r, "queueId", json_object_new_int64(rows[k].qid));
			json_object_object_add(r, "brokerOffset",
					       json_object_new_int64(rows[k].broker_off));
			json_object_object_add(r, "consumerOffset",
					       json_object_new_int64(rows[k].cons_off));
			json_object_object_add(
				r, "lag",
				json_object_new_int64(rows[k].broker_off - rows[k].cons_off));
			json_object_object_add(r, "lastTimestamp",
					       json_object_new_int64(rows[k].last_ms));
			json_object_object_add(
				r, "client",
				rows[k].client ? json_object_new_string(rows[k].client) : NULL);
			json_object_array_add(arr, r);
			lag += rows[k].broker_off - rows[k].cons_off;
		}
		json_object_object_add(o, "group", json_object_new_string(group));
		json_object_object_add(o, "lag", json_object_new_int64(lag));
		json_object_object_add(o, "online", json_object_new_boolean(ncid > 0));
		json_object_object_add(o, "queues", arr);
		cli_json_print(o);
	} else {
		struct cli_table t;

		cli_table_init(&t, 8, "TOPIC", "BROKER", "QUEUE", "BROKER OFFSET",
			       "CONSUMER OFFSET", "LAG", "LAST CONSUMED", "CLIENT");
		for (size_t k = 0; k < nr; k++) {
			char q[16], bo[24], co[24], l[24], ts[40];

			lag += rows[k].broker_off - rows[k].cons_off;
			cli_table_row(&t, rows[k].topic, rows[k].broker,
				      cli_fmt(q, sizeof(q), "%" PRId64, rows[k].qid),
				      cli_fmt(bo, sizeof(bo), "%" PRId64, rows[k].broker_off),
				      cli_fmt(co, sizeof(co), "%" PRId64, rows[k].cons_off),
				      cli_fmt(l, sizeof(l), "%" PRId64,
					      rows[k].broker_off - rows[k].cons_off),
				      cli_time(ts, sizeof(ts), rows[k].last_ms),
				      rows[k].client ? rows[k].client : "-");
		}
		cli_table_print(&t);
		printf("group %s: total lag %" PRId64 ", %zu consumer(s) online%s\n", group, lag,
		       ncid, ncid ? " (CLIENT: RocketMQ's default average allocation)" : "");
	}
	free(rows);
	free(cid);
	json_object_put(conns);
	return rc;
}

/* "1733259855000" (ms), or "2026-12-03T21:04:15[.123]" local time. Return: -1 bad. */
static int64_t
parse_time(const char *s)
{
	struct tm tm = {0};
	const char *end;
	char *e;
	long long ms = strtoll(s, &e, 10);

	if (*s && !*e)
		return ms;
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL)
		end = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	if (end == NULL)
		return -1;
	tm.tm_isdst = -1;
	ms = (long long)mktime(&tm) * 1000;
	if (*end == '.') {
		long frac = strtol(end + 1, &e, 10);

		if (*e || e - (end + 1) != 3)
			return -1;
		ms += frac;
	} else if (*end) {
		return -1;
	}
	return ms;
}

static int
group_reset(struct cli *c)
{
	const char *group, *topic = cli_opt(c, "topic"), *when = cli_opt(c, "to-time");
	int64_t ts;
	char tss[24];
	struct cli_broker *b;
	size_t n;
	int rc = CLI_OK, ways;

	if (c->npos != 1)
		return cli_usage(c, "one GROUP");
	group = c->pos[0];
	ways = (when != NULL) + cli_flag(c, "to-earliest") + cli_flag(c, "to-latest");
	if (!topic || !*topic || ways != 1)
		return cli_usage(c,
				 "--topic=T and one of --to-time=TIME, --to-earliest, --to-latest");
	if (when) {
		ts = parse_time(when);
		if (ts < 0)
			return cli_usage(c,
					 "--to-time=%s: ms since 1970 or YYYY-MM-DDTHH:MM:SS[.mmm]",
					 when);
	} else {
		ts = cli_flag(c, "to-earliest") ? 0 : -1;
	}
	if (cli_topic_masters(c, topic, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		const char *ext[] = {
			"topic",
			topic,
			"group",
			group,
			"timestamp",
			cli_fmt(tss, sizeof(tss), "%" PRId64, ts),
			"isForce",
			cli_opt(c, "force") && !cli_flag(c, "force") ? "false" : "true",
			NULL};
		struct sp_rem_resp resp;
		json_object *j, *tab;

		if (cli_call_ok(c, b[i].addr, WIRE_REQ_INVOKE_BROKER_TO_RESET_OFFSET, ext, NULL, 0,
				&resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		j = cli_body_json(&resp);
		sp_rem_resp_free(&resp);
		if (j && json_object_object_get_ex(j, "offsetTable", &tab)) {
			json_object_object_foreach(tab, mqs, off)
			{
				json_object *mq = json_tokener_parse(mqs);

				if (c->json) {
					json_object *o = json_object_new_object();

					json_object_object_add(o, "brokerName",
							       json_object_new_string(b[i].name));
					json_object_object_add(
						o, "queueId",
						json_object_new_int64(cli_ji(mq, "queueId")));
					json_object_object_add(o, "offset", json_object_get(off));
					cli_json_print(o);
				} else {
					printf("%s %s queue %" PRId64 " -> %" PRId64 "\n", topic,
					       b[i].name, cli_ji(mq, "queueId"),
					       json_object_get_int64(off));
				}
				json_object_put(mq);
			}
		}
		json_object_put(j);
	}
	free(b);
	return rc;
}

static int
group_delete(struct cli *c)
{
	const char *group;
	struct cli_broker *b;
	size_t n;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one GROUP");
	group = c->pos[0];
	if (cli_brokers(c, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		const char *ext[] = {"groupName", group, "removeOffset", "true", NULL};
		const char *cext[] = {"consumerGroup", group, NULL};
		struct sp_rem_resp resp;

		if (b[i].id != 0)
			continue;
		/* a group with live consumers would come back at their next heartbeat */
		if (!cli_flag(c, "force") &&
		    cli_call(c, b[i].addr, WIRE_REQ_GET_CONSUMER_CONNECTION_LIST, cext, NULL, 0,
			     &resp) == 0) {
			bool online = resp.cmd.code == WIRE_RSP_SUCCESS;

			sp_rem_resp_free(&resp);
			if (online) {
				rc = cli_err("group %s has consumers online at %s; stop them first "
					     "(or --force)",
					     group, b[i].addr);
				free(b);
				return rc;
			}
		}
		if (cli_call_ok(c, b[i].addr, WIRE_REQ_DELETE_SUBSCRIPTIONGROUP, ext, NULL, 0,
				&resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		sp_rem_resp_free(&resp);
		if (!c->json)
			printf("group %s deleted on %s (%s), its offsets removed\n", group,
			       b[i].name, b[i].addr);
	}
	free(b);
	/* and its retry and dead-letter topics, as mqadmin deleteSubGroup does */
	for (int k = 0; k < 2 && rc == CLI_OK; k++) {
		char t[512];
		const char *ext[] = {"topic", t, NULL};
		struct sp_rem_resp resp;
		bool exists;

		snprintf(t, sizeof(t), "%s%s", k ? "%DLQ%" : RETRY, group);
		if (cli_ns_call(c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0, &resp) != 0)
			return CLI_FAIL;
		exists = resp.cmd.code == WIRE_RSP_SUCCESS;
		sp_rem_resp_free(&resp);
		if (exists)
			rc = cli_topic_delete(c, t, NULL);
	}
	return rc;
}

/* @group's SubscriptionGroupConfig on @addr (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), or NULL. */
static json_object *
group_config(const struct cli *c, const char *addr, const char *group)
{
	struct sp_rem_resp resp;
	json_object *j, *tab, *g = NULL;

	if (cli_call(c, addr, WIRE_REQ_GET_ALL_SUBSCRIPTIONGROUP_CONFIG, NULL, NULL, 0, &resp) != 0)
		return NULL;
	j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
	sp_rem_resp_free(&resp);
	if (j && json_object_object_get_ex(j, "subscriptionGroupTable", &tab) &&
	    json_object_object_get_ex(tab, group, &g))
		json_object_get(g);
	json_object_put(j);
	return g;
}

static int
bool_opt(const struct cli *c, const char *name, json_object *cfg, const char *field)
{
	const char *v = cli_opt(c, name);

	if (v == NULL)
		return 0;
	if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0 && *v)
		return cli_usage(c, "--%s=true|false", name);
	json_object_object_add(cfg, field, json_object_new_boolean(!*v || strcmp(v, "true") == 0));
	return 0;
}

static int
group_update(struct cli *c)
{
	const char *group;
	struct cli_broker *b;
	size_t n;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one GROUP");
	group = c->pos[0];
	if (cli_brokers(c, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		json_object *cfg;
		int64_t v;
		const char *body;
		struct sp_rem_resp resp;

		if (b[i].id != 0)
			continue; /* slaves follow their master */
		/* what the broker has, changed by what is given (RocketMQ's defaults for a new one) */
		cfg = group_config(c, b[i].addr, group);
		if (cfg == NULL) {
			cfg = json_object_new_object();
			json_object_object_add(cfg, "brokerId", json_object_new_int64(0));
			json_object_object_add(cfg, "consumeBroadcastEnable",
					       json_object_new_boolean(1));
			json_object_object_add(cfg, "consumeEnable", json_object_new_boolean(1));
			json_object_object_add(cfg, "consumeFromMinEnable",
					       json_object_new_boolean(1));
			json_object_object_add(cfg, "groupName", json_object_new_string(group));
			json_object_object_add(cfg, "notifyConsumerIdsChangedEnable",
					       json_object_new_boolean(1));
			json_object_object_add(cfg, "retryMaxTimes", json_object_new_int64(16));
			json_object_object_add(cfg, "retryQueueNums", json_object_new_int64(1));
			json_object_object_add(cfg, "whichBrokerWhenConsumeSlowly",
					       json_object_new_int64(1));
		}
		if (bool_opt(c, "consume", cfg, "consumeEnable") ||
		    bool_opt(c, "broadcast", cfg, "consumeBroadcastEnable") ||
		    bool_opt(c, "notify", cfg, "notifyConsumerIdsChangedEnable")) {
			json_object_put(cfg);
			free(b);
			return CLI_USAGE;
		}
		v = -1;
		if (cli_opt_i64(c, "retry-max", &v) != 0) {
			json_object_put(cfg);
			free(b);
			return CLI_USAGE;
		}
		if (v >= 0)
			json_object_object_add(cfg, "retryMaxTimes", json_object_new_int64(v));
		v = -1;
		if (cli_opt_i64(c, "retry-queues", &v) != 0) {
			json_object_put(cfg);
			free(b);
			return CLI_USAGE;
		}
		if (v >= 0)
			json_object_object_add(cfg, "retryQueueNums", json_object_new_int64(v));
		body = json_object_to_json_string_ext(cfg, JSON_C_TO_STRING_PLAIN);
		if (cli_call_ok(c, b[i].addr, WIRE_REQ_UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, NULL,
				body, strlen(body), &resp) != 0) {
			rc = CLI_FAIL;
		} else {
			sp_rem_resp_free(&resp);
			if (c->json)
				cli_json_print(json_object_get(cfg));
			else
				printf("group %s on %s (%s): %s\n", group, b[i].name, b[i].addr,
				       body);
		}
		json_object_put(cfg);
	}
	free(b);
	return rc;
}

/* mqadmin consumerStatus: each live member's own report (GET_CONSUMER_RUNNING_INFO, relayed). */
static int
group_status(struct cli *c)
{
	const char *group;
	struct cli_broker *b;
	size_t n;
	json_object *conns = NULL, *set;
	const char *addr = NULL;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one GROUP");
	group = c->pos[0];
	if (group_masters(c, group, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n && conns == NULL; i++) {
		const char *ext[] = {"consumerGroup", group, NULL};
		struct sp_rem_resp resp;

		if (cli_call(c, b[i].addr, WIRE_REQ_GET_CONSUMER_CONNECTION_LIST, ext, NULL, 0,
			     &resp) != 0)
			continue;
		if (resp.cmd.code == WIRE_RSP_SUCCESS) {
			conns = cli_body_json(&resp);
			addr = b[i].addr;
		}
		sp_rem_resp_free(&resp);
	}
	if (conns == NULL || !json_object_object_get_ex(conns, "connectionSet", &set)) {
		json_object_put(conns);
		free(b);
		return cli_err("group %s has no consumer online", group);
	}
	for (size_t k = 0; k < json_object_array_length(set); k++) {
		const char *cid = cli_js(json_object_array_get_idx(set, k), "clientId");
		const char *ext[] = {"consumerGroup", group,   "clientId", cid,
				     "jstackEnable",  "false", NULL};
		struct sp_rem_resp resp;
		struct cli sc = *c;

		sc.timeout_ms = c->timeout_ms < 15000 ? 15000 : c->timeout_ms;
		if (cid == NULL || cli_call(&sc, addr, WIRE_REQ_GET_CONSUMER_RUNNING_INFO, ext,
					    NULL, 0, &resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		if (resp.cmd.code != WIRE_RSP_SUCCESS) {
			rc = cli_said_no(addr, &resp);
		} else if (c->json) {
			json_object *o = json_object_new_object(), *info = cli_body_json(&resp);

			json_object_object_add(o, "clientId", json_object_new_string(cid));
			json_object_object_add(o, "runningInfo", info);
			cli_json_print(o);
		} else {
			printf("# %s\n%.*s\n", cid, (int)resp.cmd.body_len,
			       (const char *)resp.cmd.body);
		}
		sp_rem_resp_free(&resp);
	}
	json_object_put(conns);
	free(b);
	return rc;
}

static const char *const NO_OPTS[] = {NULL};
static const char *const UPDATE_OPTS[] = {"consume",   "broadcast",    "notify",
					  "retry-max", "retry-queues", NULL};
static const char *const DESCRIBE_OPTS[] = {"topic", NULL};
static const char *const RESET_OPTS[] = {"topic",     "to-time", "to-earliest",
					 "to-latest", "force",	 NULL};
static const char *const DELETE_OPTS[] = {"force", NULL};

const struct cli_cmd cli_group_cmds[] = {
	{"group list", "", "consumer groups (those with a retry topic)", NO_OPTS, group_list},
	{"group describe", "GROUP [--topic=T]",
	 "per queue: broker offset, consumer offset, lag, last consumed, client", DESCRIBE_OPTS,
	 group_describe},
	{"group update",
	 "GROUP [--consume=true|false] [--broadcast=true|false] [--retry-max=N] "
	 "[--retry-queues=N] [--notify=true|false]",
	 "create or change a subscription group's settings on every master", UPDATE_OPTS,
	 group_update},
	{"group status", "GROUP",
	 "each live consumer's own report (mqadmin consumerStatus; Java clients answer it)",
	 NO_OPTS, group_status},
	{"group reset", "GROUP --topic=T --to-time=TIME|--to-earliest|--to-latest [--force=false]",
	 "move a group's offsets (live consumers are told)", RESET_OPTS, group_reset},
	{"group delete", "GROUP [--force]",
	 "delete a group: its settings, offsets, retry and DLQ topics on every master", DELETE_OPTS,
	 group_delete},
};
const size_t cli_group_ncmds = sizeof(cli_group_cmds) / sizeof(cli_group_cmds[0]);
