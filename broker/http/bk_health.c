// SPDX-License-Identifier: Apache-2.0
/*
 * bk_health.c - /health (docs/observability.md, "Health"): 200 "ready"
 * only while the broker can take what its role takes - its cores running,
 * every shard taking writes, not write-protected as a refused duplicate
 * master, accepted by a NameServer at the latest registration, and, on a
 * slave, following its master; otherwise 503 "not ready: why". Answered
 * on the control thread for bk_http.c and /api/health (bk_api.c).
 */
#include <stdio.h>
#include <string.h>

#include "ctl/bk_ctl.h"
#include "ha/bk_follow.h"
#include "common/atomic.h"
#include "common/compiler.h"
#include "control/breg.h"
#include "store/clog.h"
#include "store/meta.h"
#include "store/store.h"

static void
say(struct jbuf *b, const char *s)
{
	jbuf_lit(b, s);
}

/* Ready: cores running, every shard taking writes, registered, a slave following. */
void
bk_http_health(struct bk_ctl *x, struct httpd_req *r)
{
	char line[384];
	uint32_t acc = 0, total = 0;

	if (!x->cores_running) {
		r->status = 503;
		say(&r->body, "not ready: the dataplane cores are not running\n");
		return;
	}
	if (store_disk_full(x->bk.store, line, sizeof(line))) {
		r->status = 503;
		say(&r->body, "not ready: writes refused: ");
		say(&r->body, line);
		say(&r->body, "\n");
		return;
	}
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		int err = clog_err(store_clog(x->bk.store, i));

		if (err == 0)
			continue;
		r->status = 503;
		snprintf(line, sizeof(line), "not ready: shard %u refuses writes: %s\n", i,
			 strerror(-err));
		say(&r->body, line);
		return;
	}
	if (atomic_load_relaxed(&x->bk.ns_refused)) {
		r->status = 503;
		snprintf(line, sizeof(line), "not ready: write-protected: %s\n",
			 x->bk.ns_refused_why);
		say(&r->body, line);
		return;
	}
	if (x->breg) {
		ctl_breg_accepted(x->breg, &acc, &total);
		if (acc == 0) {
			r->status = 503;
			snprintf(line, sizeof(line),
				 "not ready: none of the %u NameServers (namesrvAddr) accepted the "
				 "latest registration: no client finds a route to this broker\n",
				 total);
			say(&r->body, line);
			return;
		}
	}
	if (x->follow && !bk_follow_connected(x->follow)) {
		r->status = 503;
		say(&r->body, "not ready: a slave with no replication session to its master\n");
		return;
	}
	say(&r->body, "ready\n");
	snprintf(line, sizeof(line), "broker %s id %lld, %s, %u cores\n", x->bk.conf.broker_name,
		 (long long)x->bk.conf.broker_id, cfg_get_str(x->cfg, "brokerRole"), x->bk.ncores);
	say(&r->body, line);
	if (x->breg) {
		snprintf(line, sizeof(line), "registered with %u of %u NameServers\n", acc, total);
		say(&r->body, line);
	}
	if (!(atomic_load_relaxed(&x->bk.perm) & META_PERM_WRITE))
		say(&r->body, "write permission off (SIGUSR1 or WIPE_WRITE_PERM): reads only\n");
}
