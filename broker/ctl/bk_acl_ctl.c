// SPDX-License-Identifier: Apache-2.0
/*
 * bk_acl_ctl.c - the broker's ACL file (aclEnable, aclFile): loaded at
 * start (a bad file stops the broker with the reason), watched every second
 * and reloaded when it changes (a bad new file is logged and the old
 * accounts stay), published to the remoting port and the cores through RCU
 * (bk->acl). docs/security.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "bk_ctl.h"
#include "remoting/bk_rmt.h"
#include "common/acl.h"
#include "common/log.h"
#include "dp/xport.h"

#define ACL_TAG "broker.acl"
#define ACL_WATCH_MS 1000

static void
publish(struct bk_ctl *x, struct acl *a)
{
	struct acl *old = x->bk.acl;

	/* pairs with rcu_dereference() in the cores' CONNECT check (bk_core.c) */
	rcu_assign_pointer(x->bk.acl, a);
	if (x->cores_running)
		urcu_qsbr_synchronize_rcu();
	acl_free(old);
}

int
bk_acl_start(struct bk_ctl *x)
{
	const char *path = cfg_get_str(x->cfg, "aclFile");
	struct acl *a;
	char why[256];
	int err;

	if (!cfg_get_bool(x->cfg, "aclEnable")) {
		if (path[0])
			log_warn(ACL_TAG, "aclFile %s is not used: aclEnable is false", path);
		return 0;
	}
	if (!path[0]) {
		log_err(ACL_TAG, "aclEnable=true needs aclFile=PATH (a plain_acl.yml)");
		return -EINVAL;
	}
	err = acl_watch_start(&x->acl_watch, path, &a, why, sizeof(why));
	if (err) {
		log_err(ACL_TAG, "%s", why);
		return err;
	}
	x->bk.acl_on = true;
	publish(x, a);
	log_info(ACL_TAG, "acl on: %u accounts, %u global white address patterns from %s", a->n,
		 a->global.any ? 1u : a->global.n, path);
	if (!cfg_get_str(x->cfg, "accessKey")[0])
		log_warn(ACL_TAG, "aclEnable=true but accessKey/secretKey are not set: NameServers "
				  "with ACL on will refuse this broker's registration");
	return 0;
}

void
bk_acl_tick(struct bk_ctl *x, uint64_t now_ms)
{
	struct acl *a;
	char why[256];
	int rc;

	if (!x->bk.acl_on)
		return;
	rc = acl_watch_poll(&x->acl_watch, now_ms, ACL_WATCH_MS, &a, why, sizeof(why));
	if (rc < 0)
		log_err(ACL_TAG,
			"%s changed but cannot be used, the accounts stay as they were: %s",
			x->acl_watch.path, why);
	if (rc <= 0)
		return;
	publish(x, a);
	log_info(ACL_TAG, "reloaded %s: %u accounts", x->acl_watch.path, a->n);
}

void
bk_acl_stop(struct bk_ctl *x)
{
	publish(x, NULL);
}

void
bk_acl_report(const struct bk_ctl *x)
{
	if (!x->bk.acl_on)
		return;
	log_info(ACL_TAG,
		 "remoting: acl refused %" PRIu64 " requests (no_access_key %" PRIu64
		 ", unknown_access_key %" PRIu64 ", bad_signature %" PRIu64 ", not_admin %" PRIu64
		 ", no_permission %" PRIu64 ")",
		 bk_rmt_acl_denied(x->rmt, BK_ACL_NO_KEY) +
			 bk_rmt_acl_denied(x->rmt, BK_ACL_UNKNOWN_KEY) +
			 bk_rmt_acl_denied(x->rmt, BK_ACL_BAD_SIG) +
			 bk_rmt_acl_denied(x->rmt, BK_ACL_NOT_ADMIN) +
			 bk_rmt_acl_denied(x->rmt, BK_ACL_NO_PERM),
		 bk_rmt_acl_denied(x->rmt, BK_ACL_NO_KEY),
		 bk_rmt_acl_denied(x->rmt, BK_ACL_UNKNOWN_KEY),
		 bk_rmt_acl_denied(x->rmt, BK_ACL_BAD_SIG),
		 bk_rmt_acl_denied(x->rmt, BK_ACL_NOT_ADMIN),
		 bk_rmt_acl_denied(x->rmt, BK_ACL_NO_PERM));
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct bk_core *c = &x->bk.cores[i];
		const struct dp_xsrv_stats *xs = c->xs ? dp_xsrv_stats(c->xs) : NULL;

		log_info(ACL_TAG,
			 "core %u: acl refused sessions %" PRIu64 " (challenges %" PRIu64
			 ", other-address packets %" PRIu64 "), requests %" PRIu64
			 " (no_permission %" PRIu64 ", unknown_access_key %" PRIu64
			 ", not_admin %" PRIu64 ")",
			 i, xs ? xs->sessions_unauth : 0, xs ? xs->challenges : 0,
			 xs ? xs->rx_bad_peer : 0,
			 c->st.acl_denied[BK_ACL_NO_PERM] + c->st.acl_denied[BK_ACL_UNKNOWN_KEY] +
				 c->st.acl_denied[BK_ACL_NOT_ADMIN],
			 c->st.acl_denied[BK_ACL_NO_PERM], c->st.acl_denied[BK_ACL_UNKNOWN_KEY],
			 c->st.acl_denied[BK_ACL_NOT_ADMIN]);
	}
}
