// SPDX-License-Identifier: Apache-2.0
/*
 * bk_http.c - the broker's HTTP endpoints (docs/observability.md):
 * /metrics (bk_metrics.c) and /health, served by control/httpd.c's thread
 * and answered here on the control thread.
 *
 * httpPort: 0 turns them off; the default (-1) is listenPort - 2831, so
 * RocketMQ's 10911 gives 8080 and brokers on one host that differ in
 * listenPort differ here too. A port given explicitly that cannot be had
 * stops the start; the default one only logs a warning.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl/bk_ctl.h"
#include "ha/bk_follow.h"
#include "remoting/bk_rmt.h"
#include "common/atomic.h"
#include "console.h"
#include "control/httpd.h"
#include "common/log.h"
#include "control/breg.h"
#include "store/clog.h"
#include "store/meta.h"
#include "store/store.h"

#define HTTP_PORT_FROM_LISTEN 2831 /* 10911 - 8080 */

static void
on_http(void *arg, struct httpd_req *r)
{
	const struct console_file *f;
	const struct acl_account *acc;
	struct bk_ctl *x = arg;

	/* every path has a row in the permission table (common/acl_door.c) */
	if (httpd_auth_check(&x->http_auth, x->bk.acl, r, &acc) == NULL)
		return;
	if (strcmp(r->path, "/metrics") == 0) {
		r->ctype = "text/plain; version=0.0.4; charset=utf-8";
		bk_metrics_render(x, &r->body);
	} else if (strcmp(r->path, "/health") == 0) {
		bk_http_health(x, r);
	} else if (bk_api_render(x, r, acc)) {
		/* answered */
	} else if ((f = console_for_path(r->path, "broker.html")) != NULL) {
		r->ctype = f->ctype;
		jbuf_raw(&r->body, f->data, f->len);
	} else {
		r->status = 404;
		jbuf_lit(&r->body, "no such page (there are /, /metrics, /health and /api/)\n");
	}
}

int
bk_http_start(struct bk_ctl *x)
{
	struct httpd_conf hc = {.tag = BK_TAG,
				.bind = cfg_get_str(x->cfg, "httpBindAddress"),
				.wake_fd = x->bk.efd,
				.fn = on_http,
				.arg = x};

	x->http_auth.tag = BK_TAG;
	x->http_auth.namesrv = false;
	x->http_auth.token = cfg_get_str(x->cfg, "httpMetricsToken");

	return httpd_open(&hc, cfg_get_int(x->cfg, "httpPort"), cfg_get_int(x->cfg, "listenPort"),
			  HTTP_PORT_FROM_LISTEN, &x->http);
}

void
bk_http_stop(struct bk_ctl *x)
{
	httpd_stop(x->http);
	x->http = NULL;
}
