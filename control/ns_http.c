// SPDX-License-Identifier: Apache-2.0
/*
 * ns_http.c - the NameServer's HTTP endpoints (docs/observability.md):
 * /metrics in Prometheus' text format and /health, served by httpd.c's
 * thread and answered on the io thread (ns_server_set_poll()), which is an
 * RCU reader of the route table and owns the connection counters.
 *
 * httpPort: 0 turns them off; the default (-1) is listenPort - 1795, so
 * RocketMQ's 9876 gives 8081 (a broker's default is 8080). A port given
 * explicitly that cannot be had stops the start; the default one only warns.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <urcu/urcu-memb.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "console.h"
#include "control/httpd.h"
#include "control/ns.h"
#include "ns_priv.h"
#include "sp_config.h"

#define HTTP_PORT_FROM_LISTEN 1795 /* 9876 - 8081 */

struct ns_http {
	struct ns_server *srv;
	struct ns_state *st;
	struct httpd *h;
	int64_t boot_ms;
	struct httpd_auth auth; /* who may read which page (io thread) */
};

static struct ns_http the_http;

/* Broker addresses counted, and written to @b unless it is NULL. */
struct brokers {
	struct jbuf *b;
	uint32_t n;
};

static void
broker_row(void *arg, const struct route_addr_info *a)
{
	struct brokers *w = arg;
	char id[24];

	w->n++;
	if (w->b == NULL)
		return;
	snprintf(id, sizeof(id), "%" PRId64, a->id);
	jbuf_lit(w->b, "sprocket_namesrv_broker{cluster=\"");
	httpd_prom_label(w->b, a->cluster);
	jbuf_lit(w->b, "\",broker_name=\"");
	httpd_prom_label(w->b, a->bname);
	jbuf_lit(w->b, "\",broker_id=\"");
	jbuf_lit(w->b, id);
	jbuf_lit(w->b, "\",addr=\"");
	httpd_prom_label(w->b, a->addr);
	jbuf_lit(w->b, "\",writable=\"");
	jbuf_lit(w->b, a->writable ? "true" : "false");
	jbuf_lit(w->b, "\"} ");
	httpd_prom_u64(w->b, a->topics);
	jbuf_lit(w->b, "\n");
}

static void
metrics(struct ns_http *x, struct jbuf *b)
{
	const struct ns_state *st = x->st;
	const struct route_table *t;
	struct ns_server_stats ss;
	struct brokers w = {.b = b};
	uint64_t topics;

	httpd_prom_family(b, "sprocket_namesrv_info", "gauge", "this NameServer (value 1)");
	jbuf_lit(b, "sprocket_namesrv_info{version=\"" SP_VERSION "\"} 1\n");
	httpd_prom_family(b, "sprocket_namesrv_uptime_seconds", "gauge",
			  "since the NameServer started");
	httpd_prom_sample(b, "sprocket_namesrv_uptime_seconds", NULL, NULL,
			  (uint64_t)(clk_wall_ms() - x->boot_ms) / 1000);

	urcu_memb_read_lock();
	t = route_db_current(st->db);
	httpd_prom_family(b, "sprocket_namesrv_broker", "gauge",
			  "one registered broker address; the value is its brokerName's topics");
	route_table_each(t, broker_row, &w);
	topics = route_table_topic_count(t);
	urcu_memb_read_unlock();
	httpd_prom_family(b, "sprocket_namesrv_brokers", "gauge",
			  "broker addresses registered (masters and slaves)");
	httpd_prom_sample(b, "sprocket_namesrv_brokers", NULL, NULL, w.n);
	httpd_prom_family(b, "sprocket_namesrv_topics", "gauge",
			  "topics in the routes, counted once per brokerName that serves them");
	httpd_prom_sample(b, "sprocket_namesrv_topics", NULL, NULL, topics);

	httpd_prom_family(b, "sprocket_namesrv_requests_total", "counter",
			  "remoting requests the NameServer ran, by request");
	for (unsigned k = 0; k < NS_REQ_KINDS; k++)
		httpd_prom_sample(
			b, "sprocket_namesrv_requests_total", "request", ns__req_names[k],
			__atomic_load_n(&st->role[NS_ROLE_READER].reqs[k], __ATOMIC_RELAXED) +
				__atomic_load_n(&st->role[NS_ROLE_WRITER].reqs[k],
						__ATOMIC_RELAXED));
	httpd_prom_family(b, "sprocket_namesrv_route_lookup_seconds", "histogram",
			  "GET_ROUTEINFO_BY_TOPIC on the io thread: the request decoded to its "
			  "answer encoded");
	httpd_prom_histogram(b, "sprocket_namesrv_route_lookup_seconds", "", &st->route_lat);
	httpd_prom_family(b, "sprocket_namesrv_acl_denied_total", "counter",
			  "route changes and admin requests refused, by reason (docs/security.md)");
	for (unsigned k = 0; k < NS_ACL_REASONS; k++)
		httpd_prom_sample(b, "sprocket_namesrv_acl_denied_total", "reason",
				  ns_acl_reason_name(k), ns_acl_denied(x->st, k));
	httpd_auth_prom(&x->auth, x->h, b, "sprocket_namesrv_http_refused_total");
	httpd_prom_family(b, "sprocket_namesrv_inflate_refused_total", "counter",
			  "compressed registrations refused for inflating past their limits");
	httpd_prom_sample(b, "sprocket_namesrv_inflate_refused_total", NULL, NULL,
			  ns_inflate_refused(x->st));

	ns_server_stats(x->srv, &ss);
	httpd_prom_family(b, "sprocket_namesrv_connections", "gauge", "open remoting connections");
	httpd_prom_sample(b, "sprocket_namesrv_connections", NULL, NULL, ss.conns);
	httpd_prom_family(
		b, "sprocket_namesrv_refused_total", "counter",
		"connections and frames refused by a limit, by reason (docs/isolation.md)");
	httpd_prom_sample(b, "sprocket_namesrv_refused_total", "reason", "max_connections",
			  ss.refused_conns);
	httpd_prom_sample(b, "sprocket_namesrv_refused_total", "reason", "per_address",
			  ss.refused_addr);
	httpd_prom_sample(b, "sprocket_namesrv_refused_total", "reason", "no_descriptor",
			  ss.refused_nofd);
	httpd_prom_sample(b, "sprocket_namesrv_refused_total", "reason", "frame_size",
			  ss.refused_size);
	httpd_prom_sample(b, "sprocket_namesrv_refused_total", "reason", "frame_memory",
			  ss.refused_mem);
	httpd_prom_family(b, "sprocket_namesrv_frame_memory_bytes", "gauge",
			  "receive buffers of frames not yet whole (maxFrameMemory caps it)");
	httpd_prom_sample(b, "sprocket_namesrv_frame_memory_bytes", NULL, NULL, ss.frame_mem);
	httpd_prom_family(b, "sprocket_log_lines_suppressed_total", "counter",
			  "log lines cut by the per-site rate limit");
	httpd_prom_sample(b, "sprocket_log_lines_suppressed_total", NULL, NULL, log_rl_flush());
}

static void
api_broker(void *arg, const struct route_addr_info *a)
{
	struct brokers *w = arg;

	jbuf_lit(w->b, w->n++ ? ",{\"cluster\":" : "{\"cluster\":");
	jbuf_cstr(w->b, a->cluster);
	jbuf_lit(w->b, ",\"brokerName\":");
	jbuf_cstr(w->b, a->bname);
	jbuf_lit(w->b, ",\"brokerId\":");
	jbuf_i64(w->b, a->id);
	jbuf_lit(w->b, ",\"addr\":");
	jbuf_cstr(w->b, a->addr);
	jbuf_lit(w->b, ",\"writable\":");
	jbuf_bool(w->b, a->writable);
	jbuf_lit(w->b, ",\"topics\":");
	jbuf_i64(w->b, a->topics);
	jbuf_lit(w->b, "}");
}

static void
api_topic(void *arg, const struct route_topic_info *ti)
{
	struct brokers *w = arg;

	jbuf_lit(w->b, w->n++ ? ",{\"topic\":" : "{\"topic\":");
	jbuf_str(w->b, ti->name, ti->name_len);
	jbuf_lit(w->b, ",\"cluster\":");
	jbuf_cstr(w->b, ti->cluster);
	jbuf_lit(w->b, ",\"brokerName\":");
	jbuf_cstr(w->b, ti->bname);
	jbuf_lit(w->b, ",\"readQueueNums\":");
	jbuf_i64(w->b, ti->read_q);
	jbuf_lit(w->b, ",\"writeQueueNums\":");
	jbuf_i64(w->b, ti->write_q);
	jbuf_lit(w->b, ",\"perm\":");
	jbuf_i64(w->b, ti->perm);
	jbuf_lit(w->b, "}");
}

/*
 * /api/cluster: the routes as the NameServer holds them, field names as the
 * CLI's --json: {"brokers":[{cluster, brokerName, brokerId, addr, writable,
 * topics}], "topics":[{topic, cluster, brokerName, readQueueNums,
 * writeQueueNums, perm}] (one row per topic and brokerName)}.
 */
static void
api_cluster(struct ns_http *x, struct jbuf *b)
{
	struct brokers w = {.b = b};
	const struct route_table *t;

	urcu_memb_read_lock();
	t = route_db_current(x->st->db);
	jbuf_lit(b, "{\"brokers\":[");
	route_table_each(t, api_broker, &w);
	jbuf_lit(b, "],\"topics\":[");
	w.n = 0;
	route_table_each_topic(t, api_topic, &w);
	jbuf_lit(b, "]}\n");
	urcu_memb_read_unlock();
}

/* A NameServer that answers is ready: it has nothing to wait for (brokers come to it). */
static void
health(struct ns_http *x, struct httpd_req *r)
{
	struct brokers w = {NULL, 0}; /* counted only */
	char line[128];

	urcu_memb_read_lock();
	route_table_each(route_db_current(x->st->db), broker_row, &w);
	urcu_memb_read_unlock();
	jbuf_lit(&r->body, "ready\n");
	snprintf(line, sizeof(line), "namesrv, %u broker addresses registered\n", w.n);
	jbuf_lit(&r->body, line);
}

static void
on_http(void *arg, struct httpd_req *r)
{
	const struct console_file *f;
	const struct acl_account *acc;
	const struct acl_door *door;
	struct ns_http *x = arg;

	/* every path has a row in the permission table (common/acl_door.c) */
	urcu_memb_read_lock();
	/* pairs with rcu_assign_pointer() in ns_acl.c's publish() */
	door = httpd_auth_check(&x->auth, rcu_dereference(x->st->acl.acl), r, &acc);
	urcu_memb_read_unlock();
	if (door == NULL)
		return;
	if (strcmp(r->path, "/metrics") == 0) {
		r->ctype = "text/plain; version=0.0.4; charset=utf-8";
		metrics(x, &r->body);
	} else if (strcmp(r->path, "/health") == 0) {
		health(x, r);
	} else if (strcmp(r->path, "/api/cluster") == 0) {
		r->ctype = "application/json";
		api_cluster(x, &r->body);
	} else if ((f = console_for_path(r->path, "namesrv.html")) != NULL) {
		r->ctype = f->ctype;
		jbuf_raw(&r->body, f->data, f->len);
	} else {
		r->status = 404;
		jbuf_lit(&r->body, "no such page (there are /, /metrics, /health and /api/)\n");
	}
}

static void
poll_http(void *arg)
{
	httpd_poll(arg);
}

int
ns__http_start(struct ns_server *srv, const struct cfg *cfg)
{
	struct ns_http *x = &the_http;
	struct httpd_conf hc = {.tag = NS_TAG,
				.bind = cfg_get_str(cfg, "httpBindAddress"),
				.wake_fd = ns_server_wake_fd(srv),
				.fn = on_http,
				.arg = x};
	int err;

	x->srv = srv;
	x->st = ns_server_state(srv);
	x->auth.tag = NS_TAG;
	x->auth.namesrv = true;
	x->auth.token = cfg_get_str(cfg, "httpMetricsToken");
	x->boot_ms = clk_wall_ms();
	err = httpd_open(&hc, cfg_get_int(cfg, "httpPort"), cfg_get_int(cfg, "listenPort"),
			 HTTP_PORT_FROM_LISTEN, &x->h);
	if (err == 0 && x->h)
		ns_server_set_poll(srv, poll_http, x->h);
	return err;
}

void
ns__http_stop(void)
{
	httpd_stop(the_http.h);
	the_http.h = NULL;
}
