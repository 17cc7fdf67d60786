// SPDX-License-Identifier: Apache-2.0
/*
 * cli_failover.c - `sprocket broker failover`: a broker group's failover
 * state in etcd, and an operator's say over it (docs/failover.md).
 *
 * It speaks to etcd, not to the brokers: the records under
 * <prefix>/<cluster>/<brokerName>/ are the group's truth (broker/ha/bk_ha.c
 * writes them). --to asks the master to hand over (the `switch` record: it
 * stops writes, waits for the member to catch up and frees its record), or,
 * with no master left, names the member the next election must pick (the
 * `prefer` record, even one not in sync). --hold forbids elections,
 * --release allows them again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/clock.h"
#include "control/etcd.h"

#define FO_MEMBERS_MAX 32

static void
nap_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* The JSON record at @key into @out (NULL: none). Return: 0, -errno (etcd not reached). */
static int
record(struct ctl_etcd *e, const char *key, json_object **out)
{
	static struct ctl_etcd_kv kv;
	size_t n = 0;
	int err;

	*out = NULL;
	err = ctl_etcd_get(e, key, false, &kv, 1, &n);
	if (err == 0 && n == 1)
		*out = json_tokener_parse(kv.value);
	return err;
}

static int64_t
jid(json_object *o, const char *k)
{
	json_object *f;

	return o && json_object_object_get_ex(o, k, &f) ? json_object_get_int64(f) : -1;
}

static int
status(const struct cli *c, struct ctl_etcd *e, const char *pfx)
{
	static struct ctl_etcd_kv kvs[FO_MEMBERS_MAX + 8];
	json_object *all = json_object_new_object();
	json_object *mems = json_object_new_array();
	struct cli_table t;
	size_t n = 0;
	size_t pl = strlen(pfx);
	int err;

	err = ctl_etcd_get(e, pfx, true, kvs, sizeof(kvs) / sizeof(kvs[0]), &n);
	if (err) {
		json_object_put(all);
		json_object_put(mems);
		return cli_err("etcd %s: %s", ctl_etcd_endpoint(e), strerror(-err));
	}
	if (!c->json)
		printf("group %s\n", pfx);
	cli_table_init(&t, 7, "MEMBER", "ROLE", "EPOCH", "LOG BYTES", "IN SYNC", "CANDIDATE",
		       "ADDRESS");
	for (size_t i = 0; i < n; i++) {
		const char *k = kvs[i].key + pl;
		json_object *o = json_tokener_parse(kvs[i].value);

		if (strncmp(k, "members/", 8) == 0 && o != NULL) {
			char id[24];
			char ep[24];
			char end[24];

			snprintf(id, sizeof(id), "%" PRId64, jid(o, "id"));
			snprintf(ep, sizeof(ep), "%" PRId64, jid(o, "epoch"));
			snprintf(end, sizeof(end), "%" PRId64, jid(o, "end"));
			cli_table_row(
				&t, id, json_object_get_string(json_object_object_get(o, "role")),
				ep, end,
				json_object_get_boolean(json_object_object_get(o, "insync")) ? "yes"
											     : "no",
				json_object_get_boolean(json_object_object_get(o, "candidate"))
					? "yes"
					: "no",
				json_object_get_string(json_object_object_get(o, "addr")));
			json_object_array_add(mems, o);
			continue;
		}
		if (strcmp(k, "master") == 0 && o != NULL) {
			json_object_object_add(all, "master", o);
			if (!c->json)
				printf("master: member %" PRId64 " at %s, epoch %" PRId64 "\n",
				       jid(o, "id"),
				       json_object_get_string(json_object_object_get(o, "addr")),
				       jid(o, "epoch"));
			continue;
		}
		json_object_put(o);
		if (strcmp(k, "epoch") == 0 || strcmp(k, "switch") == 0 ||
		    strcmp(k, "prefer") == 0 || strcmp(k, "hold") == 0) {
			json_object_object_add(all, k, json_object_new_string(kvs[i].value));
			if (!c->json && strcmp(k, "hold") == 0)
				printf("elections held: %s (sprocket broker failover --release)\n",
				       kvs[i].value);
			else if (!c->json && strcmp(k, "switch") == 0)
				printf("handover to member %s asked\n", kvs[i].value);
			else if (!c->json && strcmp(k, "prefer") == 0)
				printf("next election picks member %s\n", kvs[i].value);
			else if (!c->json)
				printf("last epoch: %s\n", kvs[i].value);
		}
	}
	if (!json_object_object_get(all, "master") && !c->json)
		printf("master: none\n");
	json_object_object_add(all, "members", mems);
	if (c->json) {
		cli_table_free(&t);
		cli_json_print(all);
	} else {
		cli_table_print(&t);
	}
	json_object_put(all);
	return CLI_OK;
}

/* Wait until member @to holds the master record (up to @ms). */
static int
wait_master(struct ctl_etcd *e, const char *k_master, int64_t to, unsigned ms)
{
	uint64_t end = clk_mono_ns() / 1000000 + ms;

	while (clk_mono_ns() / 1000000 < end) {
		json_object *m = NULL;
		int64_t id;

		(void)record(e, k_master, &m);
		id = jid(m, "id");
		int64_t ep = jid(m, "epoch");

		json_object_put(m);
		if (id == to) {
			printf("member %" PRId64 " is master in epoch %" PRId64 "\n", to, ep);
			return CLI_OK;
		}
		nap_ms(200);
	}
	return cli_err("member %" PRId64 " is not master after %u s (see the brokers' logs)", to,
		       ms / 1000);
}

static int
broker_failover(struct cli *c)
{
	const char *eps = cli_opt(c, "controller");
	const char *name = cli_opt(c, "broker");
	const char *cluster = cli_opt(c, "cluster");
	const char *prefix = cli_opt(c, "prefix");
	char pfx[CTL_ETCD_KEY_MAX - 16];
	char key[CTL_ETCD_KEY_MAX];
	struct ctl_etcd *e = NULL;
	int64_t to = -1;
	int rc;

	if (eps == NULL || eps[0] == '\0')
		eps = getenv("SPROCKET_CONTROLLER");
	if (eps == NULL || eps[0] == '\0')
		eps = "127.0.0.1:2379";
	if (name == NULL || name[0] == '\0')
		return cli_usage(c, "--broker=NAME (the group's brokerName) is needed");
	if (cli_opt(c, "to") != NULL && (cli_opt_i64(c, "to", &to) != 0 || to < 1))
		return cli_usage(c, "--to=ID: a member's brokerId (1 and up)");
	if ((to >= 0) + cli_flag(c, "hold") + cli_flag(c, "release") > 1)
		return cli_usage(c, "one of --to, --hold and --release");
	if ((size_t)snprintf(
		    pfx, sizeof(pfx), "%s/%s/%s/", prefix && prefix[0] ? prefix : "/sprocket",
		    cluster && cluster[0] ? cluster : "DefaultCluster", name) >= sizeof(pfx))
		return cli_usage(c, "--prefix, --cluster and --broker: too long");
	if (ctl_etcd_open(eps, c->timeout_ms ? c->timeout_ms : 3000, &e) != 0)
		return cli_usage(c, "--controller=%s: not host:port;host:port...", eps);
	if (cli_flag(c, "hold") || cli_flag(c, "release")) {
		char who[160];
		char host[64] = "?";

		(void)gethostname(host, sizeof(host) - 1);
		snprintf(who, sizeof(who), "by %s at %" PRId64 " ms", host, (int64_t)clk_wall_ms());
		snprintf(key, sizeof(key), "%shold", pfx);
		rc = cli_flag(c, "hold") ? ctl_etcd_put(e, key, who, 0) : ctl_etcd_del(e, key);
		if (rc)
			rc = cli_err("etcd %s: %s", ctl_etcd_endpoint(e), strerror(-rc));
		else
			printf("elections of %s %s\n", name,
			       cli_flag(c, "hold") ? "held" : "allowed again");
	} else if (to >= 0) {
		char val[24];
		json_object *m = NULL;
		json_object *mem = NULL;

		snprintf(key, sizeof(key), "%smembers/%" PRId64, pfx, to);
		rc = record(e, key, &mem);
		if (rc == 0) {
			snprintf(key, sizeof(key), "%smaster", pfx);
			rc = record(e, key, &m);
		}
		if (rc) {
			json_object_put(mem);
			rc = cli_err("etcd %s: %s", ctl_etcd_endpoint(e), strerror(-rc));
			ctl_etcd_close(e);
			return rc;
		}
		if (mem == NULL ||
		    !json_object_get_boolean(json_object_object_get(mem, "candidate"))) {
			json_object_put(mem);
			json_object_put(m);
			ctl_etcd_close(e);
			return cli_err("member %" PRId64
				       " of %s is not running, or is not a candidate "
				       "(brokerRole SLAVE): it cannot be master",
				       to, name);
		}
		if (m == NULL && !json_object_get_boolean(json_object_object_get(mem, "insync")))
			fprintf(stderr,
				"member %" PRId64 " is not in sync: what it lacks of the last "
				"master's log is lost\n",
				to);
		json_object_put(mem);
		snprintf(val, sizeof(val), "%" PRId64, to);
		if (jid(m, "id") == to) {
			printf("member %" PRId64 " is master already (epoch %" PRId64 ")\n", to,
			       jid(m, "epoch"));
			json_object_put(m);
			ctl_etcd_close(e);
			return CLI_OK;
		}
		/* a master hands over; with none, the next election must pick @to */
		snprintf(key, sizeof(key), "%s%s", pfx, m ? "switch" : "prefer");
		json_object_put(m);
		rc = ctl_etcd_put(e, key, val, 0);
		if (rc) {
			rc = cli_err("etcd %s: %s", ctl_etcd_endpoint(e), strerror(-rc));
		} else {
			snprintf(key, sizeof(key), "%smaster", pfx);
			rc = wait_master(e, key, to, 15000);
		}
	} else {
		rc = status(c, e, pfx);
	}
	ctl_etcd_close(e);
	return rc;
}

static const char *const FAILOVER_OPTS[] = {"controller", "broker", "cluster", "prefix",
					    "to",	  "hold",   "release", NULL};

const struct cli_cmd cli_failover_cmds[] = {
	{"broker failover",
	 "--broker=NAME [--controller=EP;EP] [--cluster=C] [--to=ID | --hold | --release]",
	 "a group's failover state in etcd; hand over to a member, hold or release elections",
	 FAILOVER_OPTS, broker_failover},
};
const size_t cli_failover_ncmds = sizeof(cli_failover_cmds) / sizeof(cli_failover_cmds[0]);
