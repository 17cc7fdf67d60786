// SPDX-License-Identifier: Apache-2.0
/*
 * cli_util.c - what every `sprocket` command uses (cli.h): options, calls
 * that say what went wrong and where, fastjson bodies, the cluster's
 * brokers, tables.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "wire/remoting.h"

/* ---- arguments and messages ---- */

const char *
cli_opt(const struct cli *c, const char *name)
{
	for (size_t i = 0; i < c->nopt; i++)
		if (strcmp(c->opt_k[i], name) == 0)
			return c->opt_v[i];
	return NULL;
}

bool
cli_flag(const struct cli *c, const char *name)
{
	const char *v = cli_opt(c, name);

	return v != NULL && strcmp(v, "false") != 0;
}

int
cli_opt_i64(const struct cli *c, const char *name, int64_t *v)
{
	const char *s = cli_opt(c, name);
	char *end;
	long long x;

	if (s == NULL)
		return 0;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (!*s || *end || errno)
		return cli_usage(c, "--%s=%s is not a whole number", name, s);
	*v = x;
	return 0;
}

int
cli_usage(const struct cli *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sprocket %s: ", c->cmd ? c->cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (sprocket %s --help)\n", c->cmd ? c->cmd : "");
	return CLI_USAGE;
}

int
cli_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sprocket: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_FAIL;
}

/* ---- calls ---- */

const char *
cli_code_name(int32_t code)
{
	switch (code) {
	case 0:
		return "SUCCESS";
	case 1:
		return "SYSTEM_ERROR";
	case 2:
		return "SYSTEM_BUSY";
	case 3:
		return "REQUEST_CODE_NOT_SUPPORTED";
	case 10:
		return "FLUSH_DISK_TIMEOUT";
	case 11:
		return "SLAVE_NOT_AVAILABLE";
	case 12:
		return "FLUSH_SLAVE_TIMEOUT";
	case 13:
		return "MESSAGE_ILLEGAL";
	case 14:
		return "SERVICE_NOT_AVAILABLE";
	case 16:
		return "NO_PERMISSION";
	case 17:
		return "TOPIC_NOT_EXIST";
	case 19:
		return "PULL_NOT_FOUND";
	case 20:
		return "PULL_RETRY_IMMEDIATELY";
	case 21:
		return "PULL_OFFSET_MOVED";
	case 22:
		return "QUERY_NOT_FOUND";
	case 26:
		return "SUBSCRIPTION_GROUP_NOT_EXIST";
	case 206:
		return "CONSUMER_NOT_ONLINE";
	default:
		return "error";
	}
}

int
cli_said_no(const char *addr, const struct sp_rem_resp *resp)
{
	const struct wire_rem_cmd *r = &resp->cmd;

	return cli_err("%s answered %d %s%s%.*s", addr, r->code, cli_code_name(r->code),
		       r->remark ? ": " : "", r->remark ? (int)r->remark_len : 0,
		       r->remark ? r->remark : "");
}

int
cli_connect(const struct cli *c, const char *addr, struct sp_rem **out)
{
	int err = sp_rem_connect(addr, c->timeout_ms, out);

	if (err == 0 && c->ak && (err = sp_rem_credentials(*out, c->ak, c->sk)) != 0) {
		sp_rem_close(*out);
		*out = NULL;
	}
	return err;
}

int
cli_call(const struct cli *c, const char *addr, int32_t code, const char *const *ext,
	 const void *body, size_t len, struct sp_rem_resp *resp)
{
	struct wire_rem_cmd q = {.code = code,
				 .language = WIRE_LANG_JAVA,
				 .version = WIRE_REM_VERSION_V4_9_8,
				 .serialize = WIRE_REM_JSON};
	struct sp_rem *r;
	int err;

	for (size_t i = 0; ext && ext[i] && ext[i + 1]; i += 2)
		if (wire_rem_ext_add(&q, ext[i], ext[i + 1]) != 0)
			return cli_err("too many request fields");
	err = cli_connect(c, addr, &r);
	if (err)
		return cli_err("%s: cannot connect: %s", addr, strerror(-err));
	err = sp_rem_call(r, &q, body, len, c->timeout_ms, 0, resp);
	sp_rem_close(r);
	if (err)
		return cli_err("%s: request %d failed: %s", addr, code,
			       err == -ETIMEDOUT ? "no answer in time (--timeout-ms)"
						 : strerror(-err));
	return 0;
}

int
cli_call_ok(const struct cli *c, const char *addr, int32_t code, const char *const *ext,
	    const void *body, size_t len, struct sp_rem_resp *resp)
{
	if (cli_call(c, addr, code, ext, body, len, resp) != 0)
		return CLI_FAIL;
	if (resp->cmd.code != WIRE_RSP_SUCCESS) {
		cli_said_no(addr, resp);
		sp_rem_resp_free(resp);
		return CLI_FAIL;
	}
	return 0;
}

int
cli_ns_call(const struct cli *c, int32_t code, const char *const *ext, const void *body, size_t len,
	    struct sp_rem_resp *resp)
{
	char list[1024];
	char *save = NULL;

	snprintf(list, sizeof(list), "%s", c->namesrv);
	for (char *a = strtok_r(list, ";", &save); a; a = strtok_r(NULL, ";", &save))
		if (cli_call(c, a, code, ext, body, len, resp) == 0)
			return 0;
	return cli_err("no NameServer of '%s' answered (--namesrv or NAMESRV_ADDR)", c->namesrv);
}

/* ---- bodies ---- */

/* Copies a JSON string starting at @s[*i] (the quote) into @o. */
static void
copy_str(const char *s, size_t len, size_t *i, char *o, size_t *n)
{
	o[(*n)++] = s[(*i)++];
	while (*i < len) {
		char ch = s[(*i)++];

		o[(*n)++] = ch;
		if (ch == '\\' && *i < len)
			o[(*n)++] = s[(*i)++];
		else if (ch == '"')
			return;
	}
}

/* Writes @s[a..b) as a JSON string. */
static void
quote_raw(const char *s, size_t a, size_t b, char *o, size_t *n)
{
	o[(*n)++] = '"';
	for (size_t k = a; k < b; k++) {
		if (s[k] == '"' || s[k] == '\\')
			o[(*n)++] = '\\';
		o[(*n)++] = s[k];
	}
	o[(*n)++] = '"';
}

char *
cli_fastjson_to_json(const char *s, size_t len)
{
	/* a key's bytes may double ('"', '\\') and it gains two quotes: 4x bounds it */
	char *o = len > SIZE_MAX / 4 - 16 ? NULL : malloc(len * 4 + 16);
	bool key[256] = {false}; /* per depth: an object waiting for a key */
	bool obj[256] = {false};
	unsigned d = 0;
	size_t n = 0;

	if (o == NULL)
		return NULL;
	for (size_t i = 0; i < len;) {
		char ch = s[i];

		if (ch == '"') {
			copy_str(s, len, &i, o, &n);
			continue;
		}
		if (d > 0 && obj[d] && key[d] &&
		    (ch == '{' || ch == '-' || (ch >= '0' && ch <= '9'))) {
			/* a non-string key: an object (MessageQueue) or a number (Long) */
			size_t a = i;

			if (ch == '{') {
				unsigned depth = 0;

				while (i < len) {
					if (s[i] == '"') {
						/* skip the string */
						i++;
						while (i < len && s[i] != '"')
							i += s[i] == '\\' ? 2 : 1;
						i++;
						continue;
					}
					if (s[i] == '{')
						depth++;
					else if (s[i] == '}' && --depth == 0) {
						i++;
						break;
					}
					i++;
				}
			} else {
				while (i < len && s[i] != ':' && s[i] != ' ')
					i++;
			}
			quote_raw(s, a, i < len ? i : len, o, &n);
			key[d] = false;
			continue;
		}
		if (ch == '{' || ch == '[') {
			if (d + 1 < sizeof(key) / sizeof(key[0])) {
				d++;
				obj[d] = ch == '{';
				key[d] = ch == '{';
			}
		} else if (ch == '}' || ch == ']') {
			if (d > 0)
				d--;
		} else if (ch == ':' && d > 0 && obj[d]) {
			key[d] = false;
		} else if (ch == ',' && d > 0 && obj[d]) {
			key[d] = true;
		}
		o[n++] = ch;
		i++;
	}
	o[n] = '\0';
	return o;
}

json_object *
cli_body_json(const struct sp_rem_resp *resp)
{
	char *fixed;
	json_object *j;

	if (resp->cmd.body_len == 0)
		return NULL;
	fixed = cli_fastjson_to_json((const char *)resp->cmd.body, resp->cmd.body_len);
	if (fixed == NULL)
		return NULL;
	j = json_tokener_parse(fixed);
	free(fixed);
	return j;
}

const char *
cli_js(json_object *o, const char *k)
{
	json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, k, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int64_t
cli_ji(json_object *o, const char *k)
{
	json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, k, &v))
		return 0;
	return json_object_get_int64(v);
}

/* ---- the cluster ---- */

static int
broker_add(struct cli_broker **v, size_t *n, size_t *cap, const char *cluster, const char *name,
	   int64_t id, const char *addr)
{
	struct cli_broker *b;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		struct cli_broker *nv = realloc(*v, nc * sizeof(*nv));

		if (nv == NULL)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	b = &(*v)[(*n)++];
	snprintf(b->cluster, sizeof(b->cluster), "%s", cluster);
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->id = id;
	snprintf(b->addr, sizeof(b->addr), "%s", addr);
	return 0;
}

static int
broker_cmp(const void *a, const void *b)
{
	const struct cli_broker *x = a, *y = b;
	int r = strcmp(x->cluster, y->cluster);

	if (r == 0)
		r = strcmp(x->name, y->name);
	if (r == 0)
		r = x->id < y->id ? -1 : x->id > y->id;
	return r;
}

int
cli_brokers(const struct cli *c, struct cli_broker **out, size_t *n)
{
	struct sp_rem_resp resp;
	json_object *j, *table;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (cli_ns_call(c, WIRE_REQ_GET_BROKER_CLUSTER_INFO, NULL, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (j == NULL || !json_object_object_get_ex(j, "brokerAddrTable", &table)) {
		json_object_put(j);
		return cli_err("the NameServer's cluster info does not parse");
	}
	json_object_object_foreach(table, bname, bd)
	{
		json_object *addrs;
		const char *cluster = cli_js(bd, "cluster");

		if (!json_object_object_get_ex(bd, "brokerAddrs", &addrs))
			continue;
		json_object_object_foreach(addrs, id, addr)
		{
			if (broker_add(out, n, &cap, cluster ? cluster : "", bname,
				       strtoll(id, NULL, 10), json_object_get_string(addr)) != 0) {
				json_object_put(j);
				return cli_err("out of memory");
			}
		}
	}
	json_object_put(j);
	if (*n)
		qsort(*out, *n, sizeof(**out), broker_cmp);
	return 0;
}

int
cli_lost_groups(const struct cli *c, json_object **out)
{
	struct sp_rem_resp resp;
	json_object *j, *lost;

	*out = NULL;
	if (cli_ns_call(c, WIRE_REQ_GET_BROKER_CLUSTER_INFO, NULL, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (j == NULL)
		return cli_err("the NameServer's cluster info does not parse");
	if (json_object_object_get_ex(j, "sprocketLostGroups", &lost))
		*out = json_object_get(lost);
	json_object_put(j);
	return 0;
}

/*
 * Does the NameServer at @addr route @topic to every broker group of @b?
 * Return: 1 yes, 0 not yet, -1 it did not answer (said).
 */
static int
route_names(const struct cli *c, const char *addr, const char *topic, const struct cli_broker *b,
	    size_t n)
{
	const char *ext[] = {"topic", topic, NULL};
	struct sp_rem_resp resp;
	json_object *j, *bds = NULL;
	size_t seen = 0;

	if (cli_call(c, addr, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0, &resp) != 0)
		return -1;
	j = resp.cmd.code == WIRE_RSP_SUCCESS ? cli_body_json(&resp) : NULL;
	sp_rem_resp_free(&resp);
	if (j && json_object_object_get_ex(j, "brokerDatas", &bds))
		for (size_t k = 0; k < n; k++)
			for (size_t i = 0; i < json_object_array_length(bds); i++) {
				const char *name =
					cli_js(json_object_array_get_idx(bds, i), "brokerName");

				if (name && strcmp(name, b[k].name) == 0) {
					seen++;
					break;
				}
			}
	json_object_put(j);
	return bds != NULL && seen == n;
}

void
cli_route_wait(const struct cli *c, const char *topic, const struct cli_broker *b, size_t n)
{
	char list[1024];
	char *save = NULL;

	snprintf(list, sizeof(list), "%s", c->namesrv);
	for (char *a = strtok_r(list, ";", &save); a; a = strtok_r(NULL, ";", &save)) {
		int has = 0;

		/* a broker registers a new topic at once: this is a round trip or two */
		for (int t = 0; t < 100 && (has = route_names(c, a, topic, b, n)) == 0; t++)
			usleep(50000);
		if (has == 0) /* the topic is on the brokers: say so, but it is no failure */
			fprintf(stderr,
				"sprocket: warning: NameServer %s does not route %s\n"
				"  to every broker after 5 s: is each registered with it?\n",
				a, topic);
		/* a NameServer that does not answer learns it when it is back */
	}
}

int
cli_topic_masters(const struct cli *c, const char *topic, struct cli_broker **out, size_t *n)
{
	const char *ext[] = {"topic", topic, NULL};
	struct sp_rem_resp resp;
	json_object *j, *bds;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (cli_ns_call(c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	if (resp.cmd.code != WIRE_RSP_SUCCESS) {
		int rc = resp.cmd.code == WIRE_RSP_TOPIC_NOT_EXIST
				 ? cli_err("topic %s: no route (it does not exist)", topic)
				 : cli_said_no("the NameServer", &resp);

		sp_rem_resp_free(&resp);
		return rc;
	}
	j = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (j == NULL || !json_object_object_get_ex(j, "brokerDatas", &bds)) {
		json_object_put(j);
		return cli_err("the route of %s does not parse", topic);
	}
	for (size_t i = 0; i < json_object_array_length(bds); i++) {
		json_object *bd = json_object_array_get_idx(bds, i), *addrs, *m;
		const char *name = cli_js(bd, "brokerName");

		if (json_object_object_get_ex(bd, "brokerAddrs", &addrs) &&
		    json_object_object_get_ex(addrs, "0", &m))
			if (broker_add(out, n, &cap,
				       cli_js(bd, "cluster") ? cli_js(bd, "cluster") : "",
				       name ? name : "", 0, json_object_get_string(m)) != 0) {
				json_object_put(j);
				return cli_err("out of memory");
			}
	}
	json_object_put(j);
	if (*n)
		qsort(*out, *n, sizeof(**out), broker_cmp);
	return 0;
}

/* ---- output ---- */

void
cli_table_init(struct cli_table *t, size_t ncols, ...)
{
	va_list ap;

	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	va_start(ap, ncols);
	{
		const char *h[16];

		for (size_t i = 0; i < ncols && i < 16; i++)
			h[i] = va_arg(ap, const char *);
		va_end(ap);
		cli_table_row(t, h[0], ncols > 1 ? h[1] : "", ncols > 2 ? h[2] : "",
			      ncols > 3 ? h[3] : "", ncols > 4 ? h[4] : "", ncols > 5 ? h[5] : "",
			      ncols > 6 ? h[6] : "", ncols > 7 ? h[7] : "", ncols > 8 ? h[8] : "",
			      ncols > 9 ? h[9] : "");
	}
}

void
cli_table_row(struct cli_table *t, ...)
{
	va_list ap;

	if (t->nrows == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 16;
		char **n = realloc(t->cells, nc * t->ncols * sizeof(*n));

		if (n == NULL)
			return;
		t->cells = n;
		t->cap = nc;
	}
	va_start(ap, t);
	for (size_t i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);

		/* a name from the network: no control character, no newline (cli_esc.c) */
		t->cells[t->nrows * t->ncols + i] = cli_esc_dup(s ? s : "");
	}
	va_end(ap);
	t->nrows++;
}

void
cli_output(const struct cli *c, struct cli_table *t, json_object *o)
{
	if (c->json) {
		cli_table_free(t);
		cli_json_print(o);
	} else {
		json_object_put(o);
		cli_table_print(t);
	}
}

int
cli_call_json(const struct cli *c, const char *addr, int32_t code, const char *const *ext,
	      const char *member, json_object **root, json_object **out)
{
	struct sp_rem_resp resp;

	*root = *out = NULL;
	if (cli_call_ok(c, addr, code, ext, NULL, 0, &resp) != 0)
		return CLI_FAIL;
	*root = cli_body_json(&resp);
	sp_rem_resp_free(&resp);
	if (*root == NULL || !json_object_object_get_ex(*root, member, out)) {
		json_object_put(*root);
		*root = *out = NULL;
		return cli_err("%s: the answer to request %d has no %s", addr, code, member);
	}
	return 0;
}

void
cli_table_free(struct cli_table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

void
cli_table_print(struct cli_table *t)
{
	size_t w[16] = {0};

	for (size_t r = 0; r < t->nrows; r++)
		for (size_t i = 0; i < t->ncols && i < 16; i++) {
			const char *s = t->cells[r * t->ncols + i];
			size_t l = s ? strlen(s) : 0;

			if (l > w[i])
				w[i] = l;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * t->ncols + i];

			if (i + 1 < t->ncols)
				printf("%-*s  ", (int)w[i < 16 ? i : 15], s ? s : "");
			else
				printf("%s\n", s ? s : "");
			free(t->cells[r * t->ncols + i]);
		}
	}
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

const char *
cli_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return buf;
}

void
cli_json_print(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

const char *
cli_time(char *buf, size_t len, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	size_t n;

	if (ms <= 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	localtime_r(&t, &tm);
	n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03d", (int)(ms % 1000));
	return buf;
}
