/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h - the `sprocket` command line tool (docs/cli.md): what its command
 * files share. Every command speaks RocketMQ remoting to the NameServers
 * and brokers, so it works against a RocketMQ 4.x cluster as well.
 *
 *  - cli_main.c  arguments, help, dispatch, shell completion;
 *  - cli_util.c  calls with readable errors, fastjson bodies, cluster
 *                info, tables;
 *  - cli_admin.c cluster, broker and topic commands;
 *  - cli_group.c consumer group commands;
 *  - cli_msg.c   message queries, produce and consume;
 *  - cli_failover.c a group's failover state in etcd (the one command that
 *                talks to etcd rather than remoting).
 *
 * Exit codes: 0 done, 1 the cluster said no or could not be reached, 2 the
 * command line is wrong.
 */
#ifndef SP_CLI_H
#define SP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "sprocket/remoting.h"

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

#define CLI_OPTS_MAX 32
#define CLI_POS_MAX 16
#define CLI_PROPS_MAX 16

/* One command line, after the command words. */
struct cli {
	const char *namesrv; /* "a:p;b:p" (--namesrv, NAMESRV_ADDR) */
	bool json;	     /* --json: one JSON document (or one per line) */
	uint32_t timeout_ms;
	/* --access-key/--secret-key (SPROCKET_ACCESS_KEY, SPROCKET_SECRET_KEY): sign requests */
	const char *ak;
	const char *sk;
	const char *cmd; /* "topic create", for messages */
	size_t nopt;
	const char *opt_k[CLI_OPTS_MAX]; /* --k=v, or a flag --k (v ""); -n N */
	const char *opt_v[CLI_OPTS_MAX];
	size_t npos;
	const char *pos[CLI_POS_MAX];
	size_t nprops; /* --property k=v, repeatable */
	const char *props[CLI_PROPS_MAX];
};

/* One command: words, options it takes (NULL-terminated), help text, entry. */
struct cli_cmd {
	const char *words; /* "topic create" */
	const char *args;  /* "NAME [--queues=N] ...", for usage */
	const char *help;  /* one line */
	const char *const *opts;
	int (*run)(struct cli *c);
};

extern const struct cli_cmd cli_admin_cmds[];
extern const size_t cli_admin_ncmds;
extern const struct cli_cmd cli_group_cmds[];
extern const size_t cli_group_ncmds;
extern const struct cli_cmd cli_msg_cmds[];
extern const size_t cli_msg_ncmds;
extern const struct cli_cmd cli_failover_cmds[];
extern const size_t cli_failover_ncmds;

/* ---- arguments ---- */
/* stdout and stderr escape control characters from here on (cli_esc.c); call first. */
void cli_esc_stdio(void);
/* @s with every control character (newline and tab too) as "\xNN"; malloc'd, or NULL. */
char *cli_esc_dup(const char *s);

const char *cli_opt(const struct cli *c, const char *name); /* value, "" for a flag, NULL */
bool cli_flag(const struct cli *c, const char *name);
/* An integer option. Return: 0 (absent: *@v untouched), CLI_USAGE with a message. */
int cli_opt_i64(const struct cli *c, const char *name, int64_t *v);
int cli_usage(const struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "sprocket: " + message on stderr. Return: CLI_FAIL. */
int cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- calls ---- */

/*
 * A request to @addr with extFields @ext (key, value, ..., NULL) and @body.
 * Return: 0 with @resp (free it) whatever its code; CLI_FAIL after saying
 * why the call failed (naming @addr).
 */
/* sp_rem_connect() and, with --access-key, sp_rem_credentials(). Return: 0, -errno. */
int cli_connect(const struct cli *c, const char *addr, struct sp_rem **out);
int cli_call(const struct cli *c, const char *addr, int32_t code, const char *const *ext,
	     const void *body, size_t len, struct sp_rem_resp *resp);
/* As cli_call(), and a code other than SUCCESS is said too (naming @addr); the response is freed. */
int cli_call_ok(const struct cli *c, const char *addr, int32_t code, const char *const *ext,
		const void *body, size_t len, struct sp_rem_resp *resp);
/*
 * cli_call_ok() and the body's JSON member @member in *@out (owned by *@root,
 * which the caller puts). Return: 0, CLI_FAIL (said).
 */
int cli_call_json(const struct cli *c, const char *addr, int32_t code, const char *const *ext,
		  const char *member, json_object **root, json_object **out);
/* To the first NameServer that answers. */
int cli_ns_call(const struct cli *c, int32_t code, const char *const *ext, const void *body,
		size_t len, struct sp_rem_resp *resp);
/* Says "ADDR answered CODE: remark". Return: CLI_FAIL. */
int cli_said_no(const char *addr, const struct sp_rem_resp *resp);
const char *cli_code_name(int32_t code);

/* A response body as JSON (fastjson's object and number map keys turned into strings). */
json_object *cli_body_json(const struct sp_rem_resp *resp);
/* Rewrites fastjson's non-string map keys as JSON strings. Return: malloc'd, NUL-terminated. */
char *cli_fastjson_to_json(const char *in, size_t len);

const char *cli_js(json_object *o, const char *k); /* a string member or NULL */
int64_t cli_ji(json_object *o, const char *k);	   /* an integer member or 0 */

/* ---- the cluster ---- */
struct cli_broker {
	char cluster[128];
	char name[128];
	int64_t id; /* 0 master */
	char addr[64];
};
/* Every broker address from GET_BROKER_CLUSTER_INFO. Return: 0, CLI_FAIL (said). */
int cli_brokers(const struct cli *c, struct cli_broker **out, size_t *n);
/*
 * The groups whose last broker went without unregistering, as the NameServer
 * lists them (sprocketLostGroups of GET_BROKER_CLUSTER_INFO: name -> {cluster,
 * lastAddr, lostTimestamp}); *@out NULL when none. Return: 0, CLI_FAIL (said).
 */
int cli_lost_groups(const struct cli *c, json_object **out);
/* The masters of @topic's route (GET_ROUTEINFO_BY_TOPIC), addresses only. */
int cli_topic_masters(const struct cli *c, const char *topic, struct cli_broker **out, size_t *n);
/*
 * Waits (up to 5 s per NameServer) until every NameServer that answers routes
 * @topic to each broker group of @b; warns on stderr about one that does not.
 */
void cli_route_wait(const struct cli *c, const char *topic, const struct cli_broker *b, size_t n);

/* Deletes @topic on every master (of @cluster, NULL all), waits for their slaves, then on
 * every NameServer (cli_admin.c). Return: 0, CLI_FAIL (said). */
int cli_topic_delete(const struct cli *c, const char *topic, const char *cluster);

/* ---- output ---- */
struct cli_table {
	size_t ncols, nrows, cap;
	char **cells; /* nrows * ncols, malloc'd */
};
void cli_table_init(struct cli_table *t, size_t ncols, ...); /* the header row */
void cli_table_row(struct cli_table *t, ...);		     /* ncols strings */
void cli_table_print(struct cli_table *t);		     /* and free */
void cli_table_free(struct cli_table *t);
/* --json: prints @o (a JSON document) and drops @t; else prints @t and drops @o. */
void cli_output(const struct cli *c, struct cli_table *t, json_object *o);
const char *cli_fmt(char *buf, size_t len, const char *fmt, ...) /* buf, formatted */
	__attribute__((format(printf, 3, 4)));
/* Prints @o on one line (--json output) and drops the reference. */
void cli_json_print(json_object *o);
/* "2026-12-03 21:04:15.402" (local time) or "-" for 0. */
const char *cli_time(char *buf, size_t len, int64_t ms);

#endif /* SP_CLI_H */
