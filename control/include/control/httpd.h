/* SPDX-License-Identifier: Apache-2.0 */
/*
 * httpd.h - a daemon's HTTP endpoints (/metrics, /health) on libmicrohttpd,
 * never on a dataplane core (docs/observability.md).
 *
 * libmicrohttpd's own thread accepts connections and parses requests, under
 * limits (connections in total and per address, bytes of a request's head,
 * an idle timeout for slow senders). A GET is handed to the daemon's control
 * thread: the HTTP thread queues it, writes the control loop's eventfd and
 * waits; httpd_poll(), called by the control loop, runs the handler there, so
 * a handler reads what the control thread owns without locks. An answer not
 * begun within HTTPD_WAIT_MS is a 503. Only GET and HEAD are taken (405).
 *
 * Ownership: struct httpd's job list and `closing` under its mutex; the
 * rest is set at start. httpd_poll() and httpd_stop() on the control thread.
 */
#ifndef SP_CONTROL_HTTPD_H
#define SP_CONTROL_HTTPD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/jbuf.h"
#include "common/phist.h"

#define HTTPD_WAIT_MS 2000
#define HTTPD_CONNS_MAX 64	   /* connections at once */
#define HTTPD_CONNS_PER_ADDR 16	   /* from one source address */
#define HTTPD_HEAD_MAX (16u << 10) /* a request's line and headers, bytes */
#define HTTPD_IDLE_S 10		   /* a connection that sends nothing for this long is closed */

#define HTTPD_ARGS_MAX 8 /* query arguments a handler sees (the first ones) */

struct httpd_arg {
	const char *key, *val; /* URL-decoded, NUL-terminated; val "" when absent */
};

/* One GET, as the handler sees it on the control thread. */
struct httpd_req {
	const char *path;  /* the URL's path, without the query */
	uint32_t peer_ip;  /* the client's IPv4 address, network byte order */
	const char *authz; /* the Authorization header, or NULL */
	unsigned nargs;
	struct httpd_arg args[HTTPD_ARGS_MAX];
	int status;	   /* the handler sets it (200 when left alone) */
	const char *ctype; /* Content-Type (text/plain when left NULL) */
	bool challenge;	   /* a 401 that asks for HTTP Basic (WWW-Authenticate) */
	struct jbuf body;  /* the handler writes the answer here */
};

typedef void (*httpd_fn)(void *arg, struct httpd_req *r);

struct httpd_conf {
	const char *tag;  /* for the log: "broker", "namesrv" */
	const char *bind; /* an IPv4 address; NULL or "": 0.0.0.0 */
	uint16_t port;	  /* 0: any free port (httpd_port() says which) */
	int wake_fd;	  /* an eventfd the control loop polls */
	httpd_fn fn;
	void *arg;
};

struct httpd;

/* Listen and start the HTTP thread. Return: 0, or -errno (EADDRINUSE, EINVAL: a bad bind address). */
int httpd_start(const struct httpd_conf *conf, struct httpd **out);
uint16_t httpd_port(const struct httpd *h);
/*
 * httpd_open() - start the endpoints as the keys say, logged under @hc->tag:
 * @http_port 0 is off; -1 (the default) is @listen_port - @from_listen (any
 * free port when that is not above 0), and that port taken only warns; any
 * other port taken stops the start. Return: 0 (*@out NULL when off or the
 * default port was taken), or -errno for an explicit port.
 */
int httpd_open(struct httpd_conf *hc, int64_t http_port, int64_t listen_port, int from_listen,
	       struct httpd **out);
/* Control thread: answer every queued request. Cheap when none waits. */
void httpd_poll(struct httpd *h);
/* Control thread: queued requests get 503, the HTTP thread stops; NULL is a no-op. */
void httpd_stop(struct httpd *h);
/* Requests answered, and refused by a limit or method (relaxed counters, any thread). */
uint64_t httpd_served(const struct httpd *h);
uint64_t httpd_refused(const struct httpd *h);

/* The query argument @key's value (the first one), or NULL. */
const char *httpd_arg(const struct httpd_req *r, const char *key);
/* A JSON string of @n bytes with invalid UTF-8 written as '?' (jbuf_str() escapes the rest). */
void httpd_json_str(struct jbuf *b, const char *s, size_t n);

/* Prometheus text format helpers: a label value with \\, \" and \n escaped, invalid UTF-8 as '?'. */
void httpd_prom_label(struct jbuf *b, const char *v);
/* "# HELP name help\n# TYPE name type\n" */
void httpd_prom_family(struct jbuf *b, const char *name, const char *type, const char *help);
/* @v in decimal, as a sample's value or a label's. */
void httpd_prom_u64(struct jbuf *b, uint64_t v);
/* @ns as seconds (Prometheus' base unit), as a sample's value. */
void httpd_prom_seconds(struct jbuf *b, uint64_t ns);
/* "name v\n", or with @k: "name{k=\"lv\"} v\n" (@lv escaped). */
void httpd_prom_sample(struct jbuf *b, const char *name, const char *k, const char *lv, uint64_t v);
/*
 * The series of one Prometheus histogram: name_bucket{labels,le=".."} (cumulative),
 * name_sum{labels} in seconds and name_count{labels}. @labels: `k="v",...` already
 * escaped, or "". The family's HELP/TYPE lines are the caller's (httpd_prom_family).
 */
void httpd_prom_histogram(struct jbuf *b, const char *name, const char *labels,
			  const struct phist *h);

/* ---- who may read which page (httpd_auth.c) ---- */

enum httpd_auth_reason {
	HTTPD_AUTH_NO_CREDENTIALS,
	HTTPD_AUTH_BAD_CREDENTIALS,
	HTTPD_AUTH_NOT_LOOPBACK,
	HTTPD_AUTH_NOT_ADMIN,
	HTTPD_AUTH_NO_PERMISSION, /* counted by the handler: a topic the account may not read */
	HTTPD_AUTH_BAD_TOKEN,
	HTTPD_AUTH_NO_PAGE,
	HTTPD_AUTH_REASONS,
};

/* A daemon's gate. Ownership: its control thread (set at start, counted there). */
struct httpd_auth {
	const char *tag;   /* for the log */
	bool namesrv;	   /* which table of paths (common/acl_door.h) */
	const char *token; /* httpMetricsToken: /metrics and /health need it (NULL, "": open) */
	uint64_t refused[HTTPD_AUTH_REASONS];
};

struct acl;
struct acl_account;
struct acl_door;

/*
 * httpd_auth_check() - may @r be answered? @acl: the daemon's accounts (NULL:
 * ACL off). Return: the path's row of the permission table, with *@acc the
 * account it was checked against (NULL when none was needed); or NULL, @r
 * answered already (404, 401 with a Basic challenge, 403) and counted.
 */
const struct acl_door *httpd_auth_check(struct httpd_auth *a, const struct acl *acl,
					struct httpd_req *r, const struct acl_account **acc);
/* "Basic base64(ak:sk)" into @ak and @sk. Return: 0, -1 not that (pure; fuzzed). */
int httpd_basic_parse(const char *hdr, char *ak, size_t ak_cap, char *sk, size_t sk_cap);
const char *httpd_auth_reason_name(unsigned reason);
/* The family @name{reason=...}: refusals of @a by reason, and @h's limits and methods. */
void httpd_auth_prom(const struct httpd_auth *a, const struct httpd *h, struct jbuf *b,
		     const char *name);

#endif /* SP_CONTROL_HTTPD_H */
