// SPDX-License-Identifier: Apache-2.0
/*
 * cli_admin.c - `sprocket cluster|broker|topic ...` (docs/cli.md): the
 * cluster's brokers and their health, a broker's status, configuration and
 * write permission, and topics. The same requests as mqadmin's clusterList,
 * brokerStatus, getBrokerConfig, updateBrokerConfig, wipeWritePerm,
 * addWritePerm, topicList, topicRoute, topicStatus, updateTopic,
 * updateTopicPerm and deleteTopic.
 *
 * Size: about 1,000 lines because it is one command family of mqadmin's (cluster, broker, topic) over one
 * set of table and JSON printers; the group and message commands are in files of their own.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "wire/remoting.h"

/* ---- which brokers a command is about ---- */

/* @sel: an address ("host:port"), a broker name, or NULL for all. */
static int
select_brokers(const struct cli *c, const char *sel, bool masters_only, struct cli_broker **out,
	       size_t *n)
{
	struct cli_broker *all;
	size_t na, k = 0;

	if (sel && strchr(sel, ':')) {
		*out = calloc(1, sizeof(**out));
		if (*out == NULL)
			return cli_err("out of memory");
		snprintf((*out)->addr, sizeof((*out)->addr), "%s", sel);
		snprintf((*out)->name, sizeof((*out)->name), "%s", "?");
		*n = 1;
		return 0;
	}
	if (cli_brokers(c, &all, &na) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < na; i++)
		if ((!sel || strcmp(all[i].name, sel) == 0 || strcmp(all[i].cluster, sel) == 0) &&
		    (!masters_only || all[i].id == 0))
			all[k++] = all[i];
	if (k == 0) {
		free(all);
		return cli_err(sel ? "no broker named %s is registered"
				   : "no broker is registered%s",
			       sel ? sel : "");
	}
	*out = all;
	*n = k;
	return 0;
}

/* ---- cluster ---- */

static int
runtime(const struct cli *c, const char *addr, json_object **table, json_object **root)
{
	return cli_call_json(c, addr, WIRE_REQ_GET_BROKER_RUNTIME_INFO, NULL, "table", root, table);
}

static int
cluster_list(struct cli *c)
{
	struct cli_broker *b;
	size_t n;
	struct cli_table t;
	json_object *arr = json_object_new_array();
	int rc = CLI_OK;

	if (cli_brokers(c, &b, &n) != 0) {
		json_object_put(arr);
		return CLI_FAIL;
	}
	cli_table_init(&t, 9, "CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION", "IN TPS", "OUT TPS",
		       "IN TODAY", "OUT TODAY");
	for (size_t i = 0; i < n; i++) {
		json_object *kv = NULL, *root = NULL, *o = json_object_new_object();
		char id[24];
		char in[32] = "-", out[32] = "-";

		if (runtime(c, b[i].addr, &kv, &root) != 0)
			rc = CLI_FAIL;
		/* "putTps" is "10s 1min 10min": the first figure */
		if (kv && cli_js(kv, "putTps"))
			sscanf(cli_js(kv, "putTps"), "%31s", in);
		if (kv && cli_js(kv, "getTransferedTps"))
			sscanf(cli_js(kv, "getTransferedTps"), "%31s", out);
		cli_table_row(&t, b[i].cluster, b[i].name,
			      cli_fmt(id, sizeof(id), "%" PRId64, b[i].id), b[i].addr,
			      kv ? cli_js(kv, "brokerVersionDesc") : "unreachable", in, out,
			      kv ? cli_js(kv, "msgPutTotalTodayNow") : "-",
			      kv ? cli_js(kv, "msgGetTotalTodayNow") : "-");
		json_object_object_add(o, "cluster", json_object_new_string(b[i].cluster));
		json_object_object_add(o, "brokerName", json_object_new_string(b[i].name));
		json_object_object_add(o, "brokerId", json_object_new_int64(b[i].id));
		json_object_object_add(o, "addr", json_object_new_string(b[i].addr));
		json_object_object_add(o, "runtime", kv ? json_object_get(kv) : NULL);
		json_object_array_add(arr, o);
		json_object_put(root);
	}
	free(b);
	cli_output(c, &t, arr);
	return rc;
}

/* A group (brokerName) of the cluster view and what its members said. */
struct health_group {
	const char *name;
	bool master; /* a reachable brokerId 0 */
};

static struct health_group *
health_group(struct health_group *g, size_t *ng, const char *name)
{
	for (size_t i = 0; i < *ng; i++)
		if (strcmp(g[i].name, name) == 0)
			return &g[i];
	g[*ng].name = name;
	g[*ng].master = false;
	return &g[(*ng)++];
}

/*
 * Healthy: every broker address answers, every group has a master that
 * answers, and no slave lags its master past --max-lag-ms (default 10 s) or
 * has a shard without a session to it. Exit 1 otherwise, naming each cause.
 */
static int
cluster_health(struct cli *c)
{
	struct cli_broker *b;
	struct health_group *groups;
	size_t n, ng = 0, bad = 0, masters = 0, headless = 0, lagging = 0;
	int64_t max_lag_ms = 10000;
	json_object *arr, *garr, *lost = NULL;
	bool healthy;

	if (cli_opt_i64(c, "max-lag-ms", &max_lag_ms))
		return CLI_USAGE;
	if (max_lag_ms < 0)
		return cli_usage(c, "--max-lag-ms is milliseconds (10000)");
	if (cli_brokers(c, &b, &n) != 0)
		return CLI_FAIL;
	groups = calloc(n ? n : 1, sizeof(*groups));
	if (groups == NULL) {
		free(b);
		return cli_err("out of memory");
	}
	arr = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		json_object *kv = NULL, *root = NULL, *o = json_object_new_object();
		bool ok = runtime(c, b[i].addr, &kv, &root) == 0;
		const char *perm = kv ? cli_js(kv, "brokerPermission") : NULL;
		bool writable = perm && (atoi(perm) & 2);
		const char *lag = kv ? cli_js(kv, "slaveFallBehindMs") : NULL;
		const char *following = kv ? cli_js(kv, "slaveFollowing") : NULL;
		bool behind =
			ok && b[i].id != 0 &&
			((lag && atoll(lag) > max_lag_ms) || (following && atoi(following) == 0));
		struct health_group *g = health_group(groups, &ng, b[i].name);

		masters += b[i].id == 0;
		g->master |= ok && b[i].id == 0;
		bad += !ok;
		lagging += behind;
		if (!c->json)
			printf("%-12s %-16s id %-3" PRId64 " %-22s %s%s%s\n", b[i].cluster,
			       b[i].name, b[i].id, b[i].addr, ok ? "ok" : "UNREACHABLE",
			       ok && b[i].id == 0 && !writable ? " (write-protected)" : "",
			       !behind				   ? ""
			       : following && atoi(following) == 0 ? " (NOT FOLLOWING its master)"
								   : " (LAGGING its master)");
		if (!c->json && behind && lag && atoll(lag) > max_lag_ms)
			printf("%-12s %-16s        behind by %s ms, %s bytes (--max-lag-ms %" PRId64
			       ")\n",
			       "", "", lag, cli_js(kv, "slaveFallBehindMuch"), max_lag_ms);
		json_object_object_add(o, "brokerName", json_object_new_string(b[i].name));
		json_object_object_add(o, "brokerId", json_object_new_int64(b[i].id));
		json_object_object_add(o, "addr", json_object_new_string(b[i].addr));
		json_object_object_add(o, "ok", json_object_new_boolean(ok));
		json_object_object_add(o, "writable", json_object_new_boolean(writable));
		if (b[i].id != 0 && lag)
			json_object_object_add(o, "lagMs", json_object_new_int64(atoll(lag)));
		json_object_object_add(o, "lagging", json_object_new_boolean(behind));
		json_object_array_add(arr, o);
		json_object_put(root);
	}
	garr = json_object_new_array();
	if (cli_lost_groups(c, &lost) == 0 && lost != NULL) {
		json_object_object_foreach(lost, gname, gv)
		{
			bool listed = false;

			for (size_t i = 0; i < ng && !listed; i++)
				listed = strcmp(groups[i].name, gname) == 0;
			if (listed)
				continue; /* registered again meanwhile */
			headless++;
			if (!c->json)
				printf("group %s (cluster %s) has no broker at all: its last one, "
				       "%s, "
				       "went without unregistering (killed?); its topics take no "
				       "SEND "
				       "and serve no PULL\n",
				       gname, cli_js(gv, "cluster") ? cli_js(gv, "cluster") : "?",
				       cli_js(gv, "lastAddr") ? cli_js(gv, "lastAddr") : "?");
			json_object_array_add(garr, json_object_new_string(gname));
		}
		json_object_put(lost);
	}
	for (size_t i = 0; i < ng; i++) {
		headless += !groups[i].master;
		if (!groups[i].master && !c->json)
			printf("group %s has no master that answers: its topics take no SEND "
			       "(slaves "
			       "serve reads only)\n",
			       groups[i].name);
		if (!groups[i].master)
			json_object_array_add(garr, json_object_new_string(groups[i].name));
	}
	healthy = bad == 0 && n > 0 && headless == 0 && lagging == 0;
	if (c->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "healthy", json_object_new_boolean(healthy));
		json_object_object_add(o, "brokers", arr);
		json_object_object_add(o, "groupsWithoutMaster", garr);
		cli_json_print(o);
	} else {
		json_object_put(arr);
		json_object_put(garr);
		printf("%s: %zu broker address(es), %zu master(s), %zu unreachable, %zu group(s) "
		       "without a master, %zu slave(s) lagging\n",
		       healthy ? "healthy" : "NOT HEALTHY", n, masters, bad, headless, lagging);
	}
	free(groups);
	free(b);
	return healthy ? CLI_OK : CLI_FAIL;
}

/* ---- broker ---- */

static int
broker_status(struct cli *c)
{
	struct cli_broker *b;
	size_t n;
	int rc = CLI_OK;

	if (select_brokers(c, c->npos ? c->pos[0] : NULL, false, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		json_object *kv, *root;

		if (runtime(c, b[i].addr, &kv, &root) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		if (c->json) {
			json_object_object_add(kv, "addr", json_object_new_string(b[i].addr));
			cli_json_print(json_object_get(kv));
		} else {
			struct cli_table t;

			printf("%s %s (%s)\n", b[i].name, b[i].id == 0 ? "master" : "slave",
			       b[i].addr);
			cli_table_init(&t, 2, "KEY", "VALUE");
			json_object_object_foreach(kv, k, v)
				cli_table_row(&t, k, json_object_get_string(v));
			cli_table_print(&t);
		}
		json_object_put(root);
	}
	free(b);
	return rc;
}

static int
broker_config_get(struct cli *c)
{
	struct cli_broker *b;
	size_t n;
	int rc = CLI_OK;

	if (select_brokers(c, c->npos ? c->pos[0] : NULL, false, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		struct sp_rem_resp resp;

		if (cli_call_ok(c, b[i].addr, WIRE_REQ_GET_BROKER_CONFIG, NULL, NULL, 0, &resp) !=
		    0) {
			rc = CLI_FAIL;
			continue;
		}
		if (c->json) {
			json_object *o = json_object_new_object();
			const char *p = (const char *)resp.cmd.body, *end = p + resp.cmd.body_len;

			json_object_object_add(o, "addr", json_object_new_string(b[i].addr));
			while (p < end) {
				const char *eol = memchr(p, '\n', (size_t)(end - p));
				const char *eq;
				size_t l = eol ? (size_t)(eol - p) : (size_t)(end - p);
				char k[256];

				eq = memchr(p, '=', l);
				if (eq && (size_t)(eq - p) < sizeof(k)) {
					memcpy(k, p, (size_t)(eq - p));
					k[eq - p] = '\0';
					json_object_object_add(
						o, k,
						json_object_new_string_len(
							eq + 1, (int)(l - (size_t)(eq - p) - 1)));
				}
				p += l + 1;
			}
			cli_json_print(o);
		} else {
			if (n > 1)
				printf("# %s %s\n", b[i].name, b[i].addr);
			fwrite(resp.cmd.body, 1, resp.cmd.body_len, stdout);
		}
		sp_rem_resp_free(&resp);
	}
	free(b);
	return rc;
}

/* @body: key=value lines. */
static int
config_set_on(const struct cli *c, const struct cli_broker *b, size_t n, const char *body)
{
	int rc = CLI_OK;

	for (size_t i = 0; i < n; i++) {
		struct sp_rem_resp resp;

		if (cli_call_ok(c, b[i].addr, WIRE_REQ_UPDATE_BROKER_CONFIG, NULL, body,
				strlen(body), &resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		sp_rem_resp_free(&resp);
		if (!c->json)
			printf("%s %s: updated\n", b[i].name, b[i].addr);
	}
	return rc;
}

static int
broker_config_set(struct cli *c)
{
	struct cli_broker *b;
	size_t n, len = 0;
	char body[4096];
	int rc;

	if (c->npos < 2)
		return cli_usage(c, "BROKER and at least one KEY=VALUE");
	for (size_t i = 1; i < c->npos; i++) {
		if (!strchr(c->pos[i], '=') || c->pos[i][0] == '=')
			return cli_usage(c, "'%s' is not KEY=VALUE", c->pos[i]);
		len += (size_t)snprintf(body + len, sizeof(body) - len, "%s\n", c->pos[i]);
		if (len >= sizeof(body))
			return cli_usage(c, "too much to set at once");
	}
	if (select_brokers(c, c->pos[0], false, &b, &n) != 0)
		return CLI_FAIL;
	rc = config_set_on(c, b, n, body);
	free(b);
	return rc;
}

/* wipe: the NameServers drop the write bit from its routes, and the broker refuses SENDs. */
static int
broker_perm(struct cli *c, bool add)
{
	struct cli_broker *b;
	size_t n;
	const char *name;
	const char *ext[3] = {"brokerName", NULL, NULL};
	char list[1024];
	char *save = NULL;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one BROKER_NAME");
	name = c->pos[0];
	ext[1] = name;
	if (select_brokers(c, name, true, &b, &n) != 0)
		return CLI_FAIL;
	/* the broker itself first: it refuses SENDs at once and registers the new permission */
	if (config_set_on(c, b, n, add ? "brokerPermission=6\n" : "brokerPermission=4\n") != 0)
		rc = CLI_FAIL;
	free(b);
	snprintf(list, sizeof(list), "%s", c->namesrv);
	for (char *a = strtok_r(list, ";", &save); a; a = strtok_r(NULL, ";", &save)) {
		struct sp_rem_resp resp;
		const char *cnt;

		if (cli_call_ok(c, a,
				add ? WIRE_REQ_ADD_WRITE_PERM_OF_BROKER
				    : WIRE_REQ_WIPE_WRITE_PERM_OF_BROKER,
				ext, NULL, 0, &resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		cnt = NULL;
		for (unsigned k = 0; k < resp.cmd.n_ext; k++)
			if (strcmp(resp.cmd.ext[k].key, add ? "addTopicCount" : "wipeTopicCount") ==
			    0)
				cnt = resp.cmd.ext[k].val;
		if (!c->json)
			printf("namesrv %s: %s topics %s\n", a, cnt ? cnt : "?",
			       add ? "writable again" : "write-protected");
		sp_rem_resp_free(&resp);
	}
	return rc;
}

static int
broker_perm_wipe(struct cli *c)
{
	return broker_perm(c, false);
}

static int
broker_perm_add(struct cli *c)
{
	return broker_perm(c, true);
}

/* ---- topics ---- */

/* A group's retry or DLQ topic, or one RocketMQ (or sprocket) keeps for itself. */
static bool
internal_topic(const char *t)
{
	static const char *const names[] = {"TBW102",
					    "SCHEDULE_TOPIC_XXXX",
					    "BenchmarkTest",
					    "OFFSET_MOVED_EVENT",
					    "TRANS_CHECK_MAX_TIME_TOPIC",
					    "SELF_TEST_TOPIC"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(t, names[i]) == 0)
			return true;
	return strncmp(t, "%RETRY%", 7) == 0 || strncmp(t, "%DLQ%", 5) == 0 ||
	       strncasecmp(t, "rmq_sys_", 8) == 0;
}

static int
topic_list(struct cli *c)
{
	struct sp_rem_resp resp;
	json_object *j, *list;
	const char *ext[] = {"cluster", cli_opt(c, "cluster"), NULL};
	bool by_cluster = ext[1] && *ext[1];
	int rc;

	rc = cli_ns_call(c,
			 by_cluster ? WIRE_REQ_GET_TOPICS_BY_CLUSTER
				    : WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
			 by_cluster ? ext : NULL, NULL, 0, &resp);
	if (rc != 0)
		return CLI_FAIL;
	if (resp.cmd.code != WIRE_RSP_SUCCESS) {
		rc = cli_said_no("the NameServer", &resp);
		sp_rem_resp_free(&resp);
		return rc;
	}
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (j == NULL || !json_object_object_get_ex(j, "topicList", &list)) {
		json_object_put(j);
		return cli_err("the topic list does not parse");
	}
	if (c->json) {
		cli_json_print(json_object_get(list));
	} else {
		bool all = cli_flag(c, "all");

		for (size_t i = 0; i < json_object_array_length(list); i++) {
			const char *t = json_object_get_string(json_object_array_get_idx(list, i));

			/* groups' retry and dead-letter topics, and the brokers' own, with --all */
			if (all || !internal_topic(t))
				puts(t);
		}
	}
	json_object_put(j);
	return CLI_OK;
}

static int
route_json(const struct cli *c, const char *topic, json_object **out)
{
	const char *ext[] = {"topic", topic, NULL};
	struct sp_rem_resp resp;

	*out = NULL;
	if (cli_ns_call(c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	if (resp.cmd.code != WIRE_RSP_SUCCESS) {
		int rc = resp.cmd.code == WIRE_RSP_TOPIC_NOT_EXIST
				 ? cli_err("topic %s does not exist", topic)
				 : cli_said_no("the NameServer", &resp);

		sp_rem_resp_free(&resp);
		return rc;
	}
	*out = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	return *out ? 0 : cli_err("the route of %s does not parse", topic);
}

static int
topic_route(struct cli *c)
{
	json_object *j, *qds;
	struct cli_table t;

	if (c->npos != 1)
		return cli_usage(c, "one TOPIC");
	if (route_json(c, c->pos[0], &j) != 0)
		return CLI_FAIL;
	if (c->json) {
		cli_json_print(j);
		return CLI_OK;
	}
	cli_table_init(&t, 5, "BROKER", "READ QUEUES", "WRITE QUEUES", "PERM", "ADDRESSES");
	if (json_object_object_get_ex(j, "queueDatas", &qds))
		for (size_t i = 0; i < json_object_array_length(qds); i++) {
			json_object *q = json_object_array_get_idx(qds, i), *bds, *addrs;
			const char *bn = cli_js(q, "brokerName");
			char r[16], w[16], p[16], a[512] = "";

			if (json_object_object_get_ex(j, "brokerDatas", &bds))
				for (size_t k = 0; k < json_object_array_length(bds); k++) {
					json_object *bd = json_object_array_get_idx(bds, k);

					if (bn && cli_js(bd, "brokerName") &&
					    strcmp(cli_js(bd, "brokerName"), bn) == 0 &&
					    json_object_object_get_ex(bd, "brokerAddrs", &addrs)) {
						json_object_object_foreach(addrs, id, ad)
						{
							size_t l = strlen(a);

							snprintf(a + l, sizeof(a) - l, "%s%s=%s",
								 l ? " " : "", id,
								 json_object_get_string(ad));
						}
					}
				}
			cli_table_row(
				&t, bn,
				cli_fmt(r, sizeof(r), "%" PRId64, cli_ji(q, "readQueueNums")),
				cli_fmt(w, sizeof(w), "%" PRId64, cli_ji(q, "writeQueueNums")),
				cli_fmt(p, sizeof(p), "%" PRId64, cli_ji(q, "perm")), a);
		}
	cli_table_print(&t);
	json_object_put(j);
	return CLI_OK;
}

static int
topic_describe(struct cli *c)
{
	struct cli_broker *b;
	size_t n;
	struct cli_table t;
	json_object *all = json_object_new_array();
	int rc = CLI_OK;

	if (c->npos != 1) {
		json_object_put(all);
		return cli_usage(c, "one TOPIC");
	}
	if (cli_topic_masters(c, c->pos[0], &b, &n) != 0) {
		json_object_put(all);
		return CLI_FAIL;
	}
	cli_table_init(&t, 6, "BROKER", "QUEUE", "MIN OFFSET", "MAX OFFSET", "MESSAGES",
		       "LAST STORED");
	for (size_t i = 0; i < n; i++) {
		const char *ext[] = {"topic", c->pos[0], NULL};
		json_object *j, *tab;

		if (cli_call_json(c, b[i].addr, WIRE_REQ_GET_TOPIC_STATS_INFO, ext, "offsetTable",
				  &j, &tab) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		json_object_object_foreach(tab, mqs, off)
		{
			json_object *mq = json_tokener_parse(mqs);
			char q[16], mn[24], mx[24], cnt[24], ts[40];
			json_object *row = json_object_new_object();

			cli_table_row(&t, b[i].name,
				      cli_fmt(q, sizeof(q), "%" PRId64, cli_ji(mq, "queueId")),
				      cli_fmt(mn, sizeof(mn), "%" PRId64, cli_ji(off, "minOffset")),
				      cli_fmt(mx, sizeof(mx), "%" PRId64, cli_ji(off, "maxOffset")),
				      cli_fmt(cnt, sizeof(cnt), "%" PRId64,
					      cli_ji(off, "maxOffset") - cli_ji(off, "minOffset")),
				      cli_time(ts, sizeof(ts), cli_ji(off, "lastUpdateTimestamp")));
			json_object_object_add(row, "brokerName",
					       json_object_new_string(b[i].name));
			json_object_object_add(row, "queueId",
					       json_object_new_int64(cli_ji(mq, "queueId")));
			json_object_object_add(row, "minOffset",
					       json_object_new_int64(cli_ji(off, "minOffset")));
			json_object_object_add(row, "maxOffset",
					       json_object_new_int64(cli_ji(off, "maxOffset")));
			json_object_object_add(
				row, "lastUpdateTimestamp",
				json_object_new_int64(cli_ji(off, "lastUpdateTimestamp")));
			json_object_array_add(all, row);
			json_object_put(mq);
		}
		json_object_put(j);
	}
	free(b);
	cli_output(c, &t, all);
	return rc;
}

/* Has the broker at @addr topic @topic (GET_ALL_TOPIC_CONFIG)? Return: 1, 0, -1 no answer. */
static int
has_topic(const struct cli *c, const char *addr, const char *topic)
{
	struct sp_rem_resp resp;
	json_object *j, *tab;
	int has = -1;

	if (cli_call(c, addr, WIRE_REQ_GET_ALL_TOPIC_CONFIG, NULL, NULL, 0, &resp) != 0)
		return -1;
	j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
	sp_rem_resp_free(&resp);
	if (j && json_object_object_get_ex(j, "topicConfigTable", &tab))
		has = json_object_object_get_ex(tab, topic, NULL);
	json_object_put(j);
	return has;
}

/*
 * The slaves of the masters @m follow a creation or deletion (@present) with
 * their next sync (a few seconds): wait for it, so that the command returns
 * with the whole cluster agreeing, and a topic created again at once never
 * meets its old queues on a slave.
 */
static int
slaves_follow(const struct cli *c, const struct cli_broker *m, size_t nm, const char *topic,
	      bool present)
{
	struct cli_broker *all;
	size_t na;
	int rc = CLI_OK;

	if (cli_brokers(c, &all, &na) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < na; i++) {
		bool mine = false;
		int has = 1;

		for (size_t k = 0; k < nm; k++)
			mine |= all[i].id != 0 && strcmp(all[i].name, m[k].name) == 0;
		if (!mine)
			continue;
		for (int t = 0; t < 150; t++) {
			has = has_topic(c, all[i].addr, topic);
			if (has == (present ? 1 : 0))
				break;
			usleep(100000);
		}
		if (has != (present ? 1 : 0)) {
			rc = cli_err("%s's slave %" PRId64 " (%s) %s %s after 15 s", all[i].name,
				     all[i].id, all[i].addr,
				     present ? "does not have" : "still has", topic);
			continue;
		}
		if (!c->json)
			printf("%s %s on %s's slave %" PRId64 " (%s)\n", topic,
			       present ? "followed" : "deleted", all[i].name, all[i].id,
			       all[i].addr);
	}
	free(all);
	return rc;
}

/* UPDATE_AND_CREATE_TOPIC to each of @b. */
static int
topic_put(const struct cli *c, const struct cli_broker *b, size_t n, const char *topic, int64_t rq,
	  int64_t wq, int64_t perm, bool order)
{
	char r[24], w[24], p[24];
	const char *ext[] = {"topic",
			     topic,
			     "defaultTopic",
			     "TBW102",
			     "readQueueNums",
			     cli_fmt(r, sizeof(r), "%" PRId64, rq),
			     "writeQueueNums",
			     cli_fmt(w, sizeof(w), "%" PRId64, wq),
			     "perm",
			     cli_fmt(p, sizeof(p), "%" PRId64, perm),
			     "topicFilterType",
			     "SINGLE_TAG",
			     "topicSysFlag",
			     "0",
			     "order",
			     order ? "true" : "false",
			     NULL};
	int rc = CLI_OK;

	for (size_t i = 0; i < n; i++) {
		struct sp_rem_resp resp;

		if (cli_call_ok(c, b[i].addr, WIRE_REQ_UPDATE_AND_CREATE_TOPIC, ext, NULL, 0,
				&resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		sp_rem_resp_free(&resp);
		if (!c->json)
			printf("%s on %s (%s): %" PRId64 " read / %" PRId64
			       " write queues, perm %" PRId64 "\n",
			       topic, b[i].name, b[i].addr, rq, wq, perm);
	}
	return rc;
}

static int
topic_create(struct cli *c)
{
	int64_t q = 8, rq, wq, perm = 6;
	struct cli_broker *b;
	size_t n;
	int rc;

	if (c->npos != 1)
		return cli_usage(c, "one TOPIC");
	if (cli_opt_i64(c, "queues", &q) || (rq = q, wq = q, cli_opt_i64(c, "read-queues", &rq)) ||
	    cli_opt_i64(c, "write-queues", &wq) || cli_opt_i64(c, "perm", &perm))
		return CLI_USAGE;
	/* the broker's bound (readQueueNums and writeQueueNums, docs/operations.md "Many queues") */
	if (rq < 1 || wq < 1 || rq > 65535 || wq > 65535)
		return cli_usage(c, "queues must be 1..65535");
	if (perm < 0 || perm > 7)
		return cli_usage(c, "--perm is 2 write, 4 read, 6 both");
	/* every master, or those of --cluster / --broker (a name or an address) */
	if (select_brokers(c, cli_opt(c, "broker") ? cli_opt(c, "broker") : cli_opt(c, "cluster"),
			   true, &b, &n) != 0)
		return CLI_FAIL;
	rc = topic_put(c, b, n, c->pos[0], rq, wq, perm, cli_flag(c, "order"));
	/* routable once the command returns: `topic create T && produce T` must not race */
	if (rc == CLI_OK)
		cli_route_wait(c, c->pos[0], b, n);
	if (rc == CLI_OK)
		rc = slaves_follow(c, b, n, c->pos[0], true);
	free(b);
	return rc;
}

static int
topic_alter(struct cli *c)
{
	json_object *j, *qds;
	struct cli_broker *b;
	size_t n;
	int rc = CLI_OK;

	if (c->npos != 1)
		return cli_usage(c, "one TOPIC");
	if (!cli_opt(c, "perm") && !cli_opt(c, "read-queues") && !cli_opt(c, "write-queues"))
		return cli_usage(c, "--perm, --read-queues or --write-queues");
	if (route_json(c, c->pos[0], &j) != 0)
		return CLI_FAIL;
	if (cli_topic_masters(c, c->pos[0], &b, &n) != 0) {
		json_object_put(j);
		return CLI_FAIL;
	}
	json_object_object_get_ex(j, "queueDatas", &qds);
	for (size_t i = 0; i < n; i++) {
		int64_t rq = 0, wq = 0, perm = 6;

		for (size_t k = 0; qds && k < json_object_array_length(qds); k++) {
			json_object *q = json_object_array_get_idx(qds, k);

			if (cli_js(q, "brokerName") &&
			    strcmp(cli_js(q, "brokerName"), b[i].name) == 0) {
				rq = cli_ji(q, "readQueueNums");
				wq = cli_ji(q, "writeQueueNums");
				perm = cli_ji(q, "perm");
			}
		}
		if (cli_opt_i64(c, "read-queues", &rq) || cli_opt_i64(c, "write-queues", &wq) ||
		    cli_opt_i64(c, "perm", &perm)) {
			rc = CLI_USAGE;
			break;
		}
		if (topic_put(c, &b[i], 1, c->pos[0], rq, wq, perm, false) != 0)
			rc = CLI_FAIL;
	}
	free(b);
	json_object_put(j);
	return rc;
}

int
cli_topic_delete(const struct cli *c, const char *topic, const char *cluster)
{
	const char *ext[] = {"topic", topic, cluster ? "clusterName" : NULL, cluster, NULL};
	struct cli_broker *b;
	size_t n;
	char list[1024];
	char *save = NULL;
	int rc = CLI_OK;

	/* every master (their slaves follow), then every NameServer (only @cluster's routes) */
	if (select_brokers(c, cluster, true, &b, &n) != 0)
		return CLI_FAIL;
	for (size_t i = 0; i < n; i++) {
		struct sp_rem_resp resp;

		if (cli_call_ok(c, b[i].addr, WIRE_REQ_DELETE_TOPIC_IN_BROKER, ext, NULL, 0,
				&resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		sp_rem_resp_free(&resp);
		if (!c->json)
			printf("%s deleted on %s (%s)\n", topic, b[i].name, b[i].addr);
	}
	if (rc == CLI_OK)
		rc = slaves_follow(c, b, n, topic, false);
	free(b);
	if (rc != CLI_OK)
		return cli_err("%s was not deleted everywhere: the NameServers keep its route",
			       topic);
	snprintf(list, sizeof(list), "%s", c->namesrv);
	for (char *a = strtok_r(list, ";", &save); a; a = strtok_r(NULL, ";", &save)) {
		struct sp_rem_resp resp;

		if (cli_call_ok(c, a, WIRE_REQ_DELETE_TOPIC_IN_NAMESRV, ext, NULL, 0, &resp) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		sp_rem_resp_free(&resp);
		if (!c->json)
			printf("%s deleted on namesrv %s\n", topic, a);
	}
	return rc;
}

static int
topic_delete(struct cli *c)
{
	if (c->npos != 1)
		return cli_usage(c, "one TOPIC");
	return cli_topic_delete(c, c->pos[0], cli_opt(c, "cluster"));
}

static bool internal_topic(const char *t);

/* One BrokerStatsData figure: @item's "sum" or "tps" of a window, summed over @b. */
static void
stats_of(const struct cli *c, const struct cli_broker *b, size_t n, const char *name,
	 const char *key, double *tps_min, int64_t *sum_day)
{
	*tps_min = 0;
	*sum_day = 0;
	for (size_t i = 0; i < n; i++) {
		const char *ext[] = {"statsName", name, "statsKey", key, NULL};
		struct sp_rem_resp resp;
		json_object *j, *w;

		if (cli_call(c, b[i].addr, WIRE_REQ_VIEW_BROKER_STATS_DATA, ext, NULL, 0, &resp) !=
		    0)
			continue;
		j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
		sp_rem_resp_free(&resp);
		if (j && json_object_object_get_ex(j, "statsMinute", &w))
			*tps_min += json_object_get_double(json_object_object_get(w, "tps"));
		if (j && json_object_object_get_ex(j, "statsDay", &w))
			*sum_day += cli_ji(w, "sum");
		json_object_put(j);
	}
}

/* mqadmin statsAll: per topic and consuming group, rates and 24-hour counts. */
static int
cluster_stats(struct cli *c)
{
	struct sp_rem_resp resp;
	json_object *j, *list, *all = json_object_new_array();
	struct cli_table t;
	const char *only = cli_opt(c, "topic");
	int rc = CLI_OK;

	if (cli_ns_call(c, WIRE_REQ_GET_ALL_TOPIC_LIST_FROM_NAMESERVER, NULL, NULL, 0, &resp) !=
	    0) {
		json_object_put(all);
		return CLI_FAIL;
	}
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (j == NULL || !json_object_object_get_ex(j, "topicList", &list)) {
		json_object_put(j);
		json_object_put(all);
		return cli_err("the topic list does not parse");
	}
	cli_table_init(&t, 7, "TOPIC", "GROUP", "LAG", "IN TPS", "OUT TPS", "IN 24H", "OUT 24H");
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		const char *topic = json_object_get_string(json_object_array_get_idx(list, i));
		struct cli_broker *b;
		size_t n;
		double in_tps;
		int64_t in_day;
		char s1[32], s2[32];
		json_object *groups = NULL, *gl;

		if (internal_topic(topic) || (only && strcmp(only, topic) != 0))
			continue;
		if (cli_topic_masters(c, topic, &b, &n) != 0) {
			rc = CLI_FAIL;
			continue;
		}
		stats_of(c, b, n, "TOPIC_PUT_NUMS", topic, &in_tps, &in_day);
		/* the groups that read it, from each master */
		for (size_t k = 0; k < n && groups == NULL; k++) {
			const char *ext[] = {"topic", topic, NULL};

			if (cli_call(c, b[k].addr, WIRE_REQ_QUERY_TOPIC_CONSUME_BY_WHO, ext, NULL,
				     0, &resp) == 0) {
				groups = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp)
									   : NULL;
				sp_rem_resp_free(&resp);
			}
		}
		if (groups == NULL || !json_object_object_get_ex(groups, "groupList", &gl) ||
		    json_object_array_length(gl) == 0) {
			json_object *o = json_object_new_object();

			cli_table_row(&t, topic, "-", "-", cli_fmt(s1, sizeof(s1), "%.2f", in_tps),
				      "-", cli_fmt(s2, sizeof(s2), "%lld", (long long)in_day), "-");
			json_object_object_add(o, "topic", json_object_new_string(topic));
			json_object_object_add(o, "inTps", json_object_new_double(in_tps));
			json_object_object_add(o, "inMsg24Hour", json_object_new_int64(in_day));
			json_object_array_add(all, o);
		}
		for (size_t g = 0; groups && gl && g < json_object_array_length(gl); g++) {
			const char *group =
				json_object_get_string(json_object_array_get_idx(gl, g));
			char key[512], s3[32], s4[32], s5[32];
			double out_tps;
			int64_t out_day, lag = 0;
			json_object *o = json_object_new_object();

			snprintf(key, sizeof(key), "%s@%s", topic, group);
			stats_of(c, b, n, "GROUP_GET_NUMS", key, &out_tps, &out_day);
			for (size_t k = 0; k < n; k++) {
				const char *ext[] = {"consumerGroup", group, "topic", topic, NULL};
				json_object *cs, *tab;

				if (cli_call(c, b[k].addr, WIRE_REQ_GET_CONSUME_STATS, ext, NULL, 0,
					     &resp) != 0)
					continue;
				cs = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp)
								       : NULL;
				sp_rem_resp_free(&resp);
				if (cs && json_object_object_get_ex(cs, "offsetTable", &tab)) {
					json_object_object_foreach(tab, mq, ow)
					{
						(void)mq;
						lag += cli_ji(ow, "brokerOffset") -
						       cli_ji(ow, "consumerOffset");
					}
				}
				json_object_put(cs);
			}
			cli_table_row(&t, topic, group,
				      cli_fmt(s1, sizeof(s1), "%lld", (long long)lag),
				      cli_fmt(s2, sizeof(s2), "%.2f", in_tps),
				      cli_fmt(s3, sizeof(s3), "%.2f", out_tps),
				      cli_fmt(s4, sizeof(s4), "%lld", (long long)in_day),
				      cli_fmt(s5, sizeof(s5), "%lld", (long long)out_day));
			json_object_object_add(o, "topic", json_object_new_string(topic));
			json_object_object_add(o, "group", json_object_new_string(group));
			json_object_object_add(o, "lag", json_object_new_int64(lag));
			json_object_object_add(o, "inTps", json_object_new_double(in_tps));
			json_object_object_add(o, "outTps", json_object_new_double(out_tps));
			json_object_object_add(o, "inMsg24Hour", json_object_new_int64(in_day));
			json_object_object_add(o, "outMsg24Hour", json_object_new_int64(out_day));
			json_object_array_add(all, o);
		}
		json_object_put(groups);
		free(b);
	}
	json_object_put(j);
	cli_output(c, &t, all);
	return rc;
}

static const char *const NO_OPTS[] = {NULL};
static const char *const STATS_OPTS[] = {"topic", NULL};
static const char *const CLUSTER_OPTS[] = {"cluster", NULL};
static const char *const HEALTH_OPTS[] = {"max-lag-ms", NULL};
static const char *const LIST_OPTS[] = {"cluster", "all", NULL};
static const char *const CREATE_OPTS[] = {"queues", "read-queues", "write-queues", "perm",
					  "order",  "cluster",	   "broker",	   NULL};
static const char *const ALTER_OPTS[] = {"read-queues", "write-queues", "perm", NULL};

const struct cli_cmd cli_admin_cmds[] = {
	{"cluster list", "", "every broker: address, version, rates, messages today", NO_OPTS,
	 cluster_list},
	{"cluster health", "[--max-lag-ms=10000]",
	 "is every broker reachable, does every group have a master, does every slave follow "
	 "(exit 1 if not)",
	 HEALTH_OPTS, cluster_health},
	{"cluster stats", "[--topic=T]",
	 "per topic and group: lag, put/get rates (last minute), messages in 24 h (mqadmin "
	 "statsAll)",
	 STATS_OPTS, cluster_stats},
	{"broker status", "[ADDR|NAME]", "a broker's runtime figures (GET_BROKER_RUNTIME_INFO)",
	 NO_OPTS, broker_status},
	{"broker config get", "[ADDR|NAME]", "a broker's configuration (properties)", NO_OPTS,
	 broker_config_get},
	{"broker config set", "ADDR|NAME KEY=VALUE...",
	 "change keys a running broker allows (brokerPermission, logLevel)", NO_OPTS,
	 broker_config_set},
	{"broker perm wipe", "NAME",
	 "write-protect a broker group: SENDs refused, routes read-only", NO_OPTS,
	 broker_perm_wipe},
	{"broker perm add", "NAME", "undo `broker perm wipe`", NO_OPTS, broker_perm_add},
	{"topic list", "[--cluster=C] [--all]", "topics (--all: retry and DLQ topics too)",
	 LIST_OPTS, topic_list},
	{"topic route", "TOPIC", "brokers, queues and permissions of a topic", NO_OPTS,
	 topic_route},
	{"topic describe", "TOPIC", "every queue: min and max offset, last store time", NO_OPTS,
	 topic_describe},
	{"topic create", "TOPIC [--queues=8] [--perm=6] [--order] [--cluster=C|--broker=NAME|ADDR]",
	 "create or update a topic on every master (or those named)", CREATE_OPTS, topic_create},
	{"topic alter", "TOPIC [--perm=N] [--read-queues=N] [--write-queues=N]",
	 "change a topic's permission or queue counts where it lives", ALTER_OPTS, topic_alter},
	{"topic delete", "TOPIC [--cluster=C]", "delete a topic on every broker and NameServer",
	 CLUSTER_OPTS, topic_delete},
};
const size_t cli_admin_ncmds = sizeof(cli_admin_cmds) / sizeof(cli_admin_cmds[0]);
