// SPDX-License-Identifier: Apache-2.0
/*
 * bk_acl_ctl.c - the broker's ACL file (aclEnable, aclFile): loaded at
 * start (a bad file stops the broker with the reason), watched every second
 * and reloaded when it changes (a bad new file is logged and the old
 * accounts stay), published to the remoting port and the cores through RCU
 * (bk->acl). docs/security.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "bk_ctl.h"
#include "common/acl.h"
#include "common/log.h"

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
	err = acl_load(path, &a, &x->acl_sig, why, sizeof(why));
	if (err) {
		log_err(ACL_TAG, "%s", why);
		return err;
	}
	snprintf(x->acl_path, sizeof(x->acl_path), "%s", path);
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
	uint64_t sig = 0;
	char why[256];

	if (!x->bk.acl || now_ms < x->acl_next_ms)
		return;
	x->acl_next_ms = now_ms + ACL_WATCH_MS;
	if (!acl_changed(x->acl_path, x->acl_sig))
		return;
	if (acl_load(x->acl_path, &a, &sig, why, sizeof(why)) != 0) {
		log_err(ACL_TAG,
			"%s changed but cannot be used, the accounts stay as they were: %s",
			x->acl_path, why);
		x->acl_sig = sig; /* said once per change (0: gone; said when it is back) */
		return;
	}
	x->acl_sig = sig;
	publish(x, a);
	log_info(ACL_TAG, "reloaded %s: %u accounts", x->acl_path, a->n);
}

void
bk_acl_stop(struct bk_ctl *x)
{
	publish(x, NULL);
}
