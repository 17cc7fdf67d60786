// SPDX-License-Identifier: Apache-2.0
/*
 * httpd.c - a daemon's HTTP endpoints on libmicrohttpd (httpd.h).
 *
 * libmicrohttpd (Debian's libmicrohttpd-dev) rather than civetweb: it is
 * packaged for Debian 12, keeps its own event thread (epoll), and has the
 * limits a daemon facing a network needs built in: connections in total
 * and per address, a memory cap on a request's head (a longer one gets 431,
 * a longer URL 414), and an idle timeout for slow senders.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "control/httpd.h"
#include "common/log.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct job {
	struct job *next;
	enum job_state state;
	struct httpd_req req;
};

struct httpd {
	struct MHD_Daemon *d;
	const char *tag;
	int wake_fd;
	httpd_fn fn;
	void *arg;
	uint16_t port;
	_Atomic bool pending; /* a job is queued: httpd_poll() takes the lock */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, **tail; /* under mu */
	bool closing;		  /* under mu */
	_Atomic uint64_t served, refused;
};

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	const struct httpd *h = cls;
	char line[256];

	/* MHD hands us its own format string: the callback's signature is fixed. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	vsnprintf(line, sizeof(line), fmt, ap);
#pragma GCC diagnostic pop
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = *p == '\n' ? '\0' : '?';
	log_warn_ratelimited(h->tag, "http: %s", line);
}

/* The HTTP thread: queue @j for the control thread and wait for its answer. */
static void
run_on_control(struct httpd *h, struct job *j)
{
	struct timespec until;
	uint64_t one = 1;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += HTTPD_WAIT_MS / 1000;
	until.tv_nsec += (long)(HTTPD_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->mu);
	if (h->closing) {
		pthread_mutex_unlock(&h->mu);
		j->req.status = MHD_HTTP_SERVICE_UNAVAILABLE;
		jbuf_lit(&j->req.body, "shutting down\n");
		return;
	}
	j->state = JOB_QUEUED;
	*h->tail = j;
	h->tail = &j->next;
	atomic_store_explicit(&h->pending, true, memory_order_release);
	if (write(h->wake_fd, &one, sizeof(one)) < 0) {
		/* the control loop also looks every 100 ms */
	}
	while (j->state != JOB_DONE) {
		if (j->state == JOB_QUEUED &&
		    pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT &&
		    j->state == JOB_QUEUED) {
			/* not begun: take it back (the control thread never sees it) */
			struct job **pp = &h->head;

			while (*pp != j)
				pp = &(*pp)->next;
			*pp = j->next;
			if (h->tail == &j->next)
				h->tail = pp;
			j->req.status = MHD_HTTP_SERVICE_UNAVAILABLE;
			jbuf_lit(&j->req.body,
				 "the daemon's control thread did not answer in time\n");
			break;
		}
		if (j->state == JOB_RUNNING)
			pthread_cond_wait(&h->cv, &h->mu);
	}
	pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result
answer(struct MHD_Connection *c, unsigned status, const char *ctype, struct jbuf *body,
       bool challenge)
{
	size_t len = 0;
	uint8_t *p = NULL;
	struct MHD_Response *r;
	enum MHD_Result rc;

	if (body->err == 0) /* a body cut short by a failed allocation is not sent */
		p = jbuf_take(body, &len);
	if (p == NULL) {
		static const char oom[] = "out of memory\n";

		r = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom,
						    MHD_RESPMEM_PERSISTENT);
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		ctype = NULL;
	} else {
		r = MHD_create_response_from_buffer_with_free_callback(len, p, free);
	}
	if (r == NULL) {
		free(p);
		return MHD_NO;
	}
	(void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				      ctype ? ctype : "text/plain; charset=utf-8");
	(void)MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (challenge)
		(void)MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					      "Basic realm=\"sprocket\", charset=\"UTF-8\"");
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result
take_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *val)
{
	struct httpd_req *r = cls;

	(void)kind;
	if (r->nargs >= HTTPD_ARGS_MAX)
		return MHD_NO;
	r->args[r->nargs].key = key;
	r->args[r->nargs].val = val ? val : "";
	r->nargs++;
	return MHD_YES;
}

const char *
httpd_arg(const struct httpd_req *r, const char *key)
{
	for (unsigned i = 0; i < r->nargs; i++)
		if (strcmp(r->args[i].key, key) == 0)
			return r->args[i].val;
	return NULL;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **state)
{
	struct httpd *h = cls;
	struct job j = {.req = {.status = MHD_HTTP_OK}};
	const union MHD_ConnectionInfo *ci;
	char path[256];
	size_t n;
	enum MHD_Result rc;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	jbuf_init(&j.req.body);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		atomic_fetch_add_explicit(&h->refused, 1, memory_order_relaxed);
		jbuf_lit(&j.req.body, "only GET and HEAD\n");
		return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, &j.req.body, false);
	}
	/* libmicrohttpd has cut the query off @url and decoded its arguments */
	n = strcspn(url, "?");
	if (n >= sizeof(path)) {
		atomic_fetch_add_explicit(&h->refused, 1, memory_order_relaxed);
		jbuf_lit(&j.req.body, "no such page\n");
		return answer(c, MHD_HTTP_NOT_FOUND, NULL, &j.req.body, false);
	}
	memcpy(path, url, n);
	path[n] = '\0';
	j.req.path = path;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		j.req.peer_ip = ((const struct sockaddr_in *)(const void *)ci->client_addr)
					->sin_addr.s_addr;
	j.req.authz =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	(void)MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, take_arg, &j.req);
	run_on_control(h, &j);
	if (j.req.status == MHD_HTTP_SERVICE_UNAVAILABLE)
		atomic_fetch_add_explicit(&h->refused, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&h->served, 1, memory_order_relaxed);
	rc = answer(c, (unsigned)j.req.status, j.req.ctype, &j.req.body, j.req.challenge);
	jbuf_free(&j.req.body);
	return rc;
}

int
httpd_start(const struct httpd_conf *conf, struct httpd **out)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(conf->port)};
	struct httpd *h;
	const union MHD_DaemonInfo *di;

	if (conf->bind && conf->bind[0] && inet_pton(AF_INET, conf->bind, &a.sin_addr) != 1)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->tag = conf->tag;
	h->wake_fd = conf->wake_fd;
	h->fn = conf->fn;
	h->arg = conf->arg;
	h->tail = &h->head;
	pthread_mutex_init(&h->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&h->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	errno = 0;
	h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG,
				conf->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
				mhd_log, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTPD_CONNS_MAX,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTPD_CONNS_PER_ADDR,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTPD_HEAD_MAX,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTPD_IDLE_S,
				MHD_OPTION_END);
	if (h->d == NULL) {
		int err = errno ? -errno : -EADDRINUSE;

		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		free(h);
		return err;
	}
	di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = di ? di->port : conf->port;
	*out = h;
	return 0;
}

uint16_t
httpd_port(const struct httpd *h)
{
	return h->port;
}

void
httpd_poll(struct httpd *h)
{
	if (h == NULL || !atomic_load_explicit(&h->pending, memory_order_acquire))
		return;
	pthread_mutex_lock(&h->mu);
	atomic_store_explicit(&h->pending, false, memory_order_relaxed);
	while (h->head) {
		struct job *j = h->head;

		h->head = j->next;
		if (h->head == NULL)
			h->tail = &h->head;
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&h->mu);
		h->fn(h->arg, &j->req);
		pthread_mutex_lock(&h->mu);
		j->state = JOB_DONE;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
}

void
httpd_stop(struct httpd *h)
{
	if (h == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	h->closing = true;
	for (struct job *j = h->head; j; j = j->next) {
		j->req.status = MHD_HTTP_SERVICE_UNAVAILABLE;
		jbuf_lit(&j->req.body, "shutting down\n");
		j->state = JOB_DONE;
	}
	h->head = NULL;
	h->tail = &h->head;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	MHD_stop_daemon(h->d);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

uint64_t
httpd_served(const struct httpd *h)
{
	return h ? atomic_load_explicit(&h->served, memory_order_relaxed) : 0;
}

uint64_t
httpd_refused(const struct httpd *h)
{
	return h ? atomic_load_explicit(&h->refused, memory_order_relaxed) : 0;
}

/* Length of the valid UTF-8 sequence at @p within @avail bytes (as Go's utf8 decodes it), or 0. */
static size_t
utf8_len(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > avail)
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* no overlong forms */
	else if (c == 0xed)
		hi = 0x9f; /* no surrogates */
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f; /* nothing past U+10FFFF */
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

void
httpd_prom_label(struct jbuf *b, const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p;) {
		size_t n = utf8_len(p, SIZE_MAX); /* the NUL stops a sequence */

		if (*p == '\\')
			jbuf_raw(b, "\\\\", 2);
		else if (*p == '"')
			jbuf_raw(b, "\\\"", 2);
		else if (*p == '\n')
			jbuf_raw(b, "\\n", 2);
		else if (n == 0)
			jbuf_raw(b, "?", 1); /* Prometheus refuses a scrape with invalid UTF-8 */
		else
			jbuf_raw(b, p, n);
		p += n ? n : 1;
	}
}

void
httpd_json_str(struct jbuf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	char *clean = malloc(n ? n : 1);

	if (clean == NULL) {
		b->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len(p + i, n - i);

		if (k == 0) {
			clean[i++] = '?';
			continue;
		}
		memcpy(clean + i, p + i, k);
		i += k;
	}
	jbuf_str(b, clean, n);
	free(clean);
}

void
httpd_prom_family(struct jbuf *b, const char *name, const char *type, const char *help)
{
	jbuf_lit(b, "# HELP ");
	jbuf_lit(b, name);
	jbuf_lit(b, " ");
	jbuf_lit(b, help);
	jbuf_lit(b, "\n# TYPE ");
	jbuf_lit(b, name);
	jbuf_lit(b, " ");
	jbuf_lit(b, type);
	jbuf_lit(b, "\n");
}

void
httpd_prom_u64(struct jbuf *b, uint64_t v)
{
	char s[24];

	jbuf_raw(b, s, (size_t)snprintf(s, sizeof(s), "%" PRIu64, v));
}

static void
prom_g(struct jbuf *b, double v)
{
	char s[32];

	jbuf_raw(b, s, (size_t)snprintf(s, sizeof(s), "%.12g", v));
}

void
httpd_prom_seconds(struct jbuf *b, uint64_t ns)
{
	prom_g(b, (double)ns / 1e9);
}

/* name_suffix{labels (the caller closes the braces) */
static void
prom_series(struct jbuf *b, const char *name, const char *suffix, const char *labels)
{
	jbuf_lit(b, name);
	jbuf_lit(b, suffix);
	jbuf_lit(b, "{");
	jbuf_lit(b, labels);
}

/* name_suffix{labels} or, with none, name_suffix */
static void
prom_plain(struct jbuf *b, const char *name, const char *suffix, const char *labels)
{
	jbuf_lit(b, name);
	jbuf_lit(b, suffix);
	if (labels[0]) {
		jbuf_lit(b, "{");
		jbuf_lit(b, labels);
		jbuf_lit(b, "}");
	}
}

void
httpd_prom_histogram(struct jbuf *b, const char *name, const char *labels, const struct phist *h)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum = 0;

	/* Cumulative, as Prometheus wants; _count is the +Inf bucket, so they agree. */
	for (unsigned k = 0; k <= PHIST_BUCKETS; k++) {
		cum += __atomic_load_n(&h->b[k], __ATOMIC_RELAXED);
		prom_series(b, name, "_bucket", labels);
		jbuf_lit(b, sep);
		jbuf_lit(b, "le=\"");
		if (k < PHIST_BUCKETS)
			prom_g(b, (double)phist_bound_ns(k) / 1e9);
		else
			jbuf_lit(b, "+Inf");
		jbuf_lit(b, "\"} ");
		httpd_prom_u64(b, cum);
		jbuf_lit(b, "\n");
	}
	prom_plain(b, name, "_sum", labels);
	jbuf_lit(b, " ");
	prom_g(b, (double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
	jbuf_lit(b, "\n");
	prom_plain(b, name, "_count", labels);
	jbuf_lit(b, " ");
	httpd_prom_u64(b, cum);
	jbuf_lit(b, "\n");
}

void
httpd_prom_sample(struct jbuf *b, const char *name, const char *k, const char *lv, uint64_t v)
{
	jbuf_lit(b, name);
	if (k) {
		jbuf_lit(b, "{");
		jbuf_lit(b, k);
		jbuf_lit(b, "=\"");
		httpd_prom_label(b, lv);
		jbuf_lit(b, "\"}");
	}
	jbuf_lit(b, " ");
	httpd_prom_u64(b, v);
	jbuf_lit(b, "\n");
}

int
httpd_open(struct httpd_conf *hc, int64_t http_port, int64_t listen_port, int from_listen,
	   struct httpd **out)
{
	const char *bind = hc->bind && hc->bind[0] ? hc->bind : "0.0.0.0";
	bool dflt = http_port < 0;
	int err;

	*out = NULL;
	if (http_port == 0) {
		log_info(hc->tag, "HTTP endpoints off (httpPort=0)");
		return 0;
	}
	if (dflt)
		http_port = listen_port > from_listen ? listen_port - from_listen : 0;
	hc->port = (uint16_t)http_port;
	err = httpd_start(hc, out);
	if (err == 0) {
		bool lo = strncmp(bind, "127.", 4) == 0;

		log_info(hc->tag,
			 "HTTP (/metrics, /health, /api/, the console) listening on %s:%u%s", bind,
			 httpd_port(*out),
			 lo ? " (this host only: set httpBindAddress to an address of the host, "
			      "or 0.0.0.0, to open it to the network)"
			    : "");
		return 0;
	}
	*out = NULL;
	if (dflt) {
		log_warn(hc->tag,
			 "HTTP endpoints off: port %u (httpPort's default, listenPort - %d) on %s: "
			 "%s; set httpPort to another port, or 0",
			 hc->port, from_listen, bind, strerror(-err));
		return 0;
	}
	log_err(hc->tag, "httpPort %u on httpBindAddress %s: %s", hc->port, bind, strerror(-err));
	return err;
}
