// SPDX-License-Identifier: Apache-2.0
/*
 * ns_acl.c - who may change a NameServer's routes (docs/security.md).
 *
 * RocketMQ 4.9's NameServer checks nothing: anyone who reaches it can
 * register a broker of any name at any address and take its route (a
 * message leak), unregister real brokers, wipe their write permission or
 * change the KV config. Here every request that changes state
 * (REGISTER/UNREGISTER_BROKER, QUERY_DATA_VERSION, WIPE/ADD_WRITE_PERM,
 * PUT/DELETE_KV_CONFIG, DELETE_TOPIC_IN_NAMESRV, UPDATE_NAMESRV_CONFIG) and
 * every admin read (GET_NAMESRV_CONFIG) passes one of two gates; route
 * reads stay open, as in RocketMQ (clients without keys find routes; the
 * broker enforces what they may do):
 *  - aclEnable=true: the request is signed (RocketMQ's AccessKey/Signature,
 *    wire_rem_sign()) by an admin account of aclFile, or comes from a
 *    globalWhiteRemoteAddresses address or the account's whiteRemoteAddress
 *    (RocketMQ's order). Brokers sign with their accessKey/secretKey.
 *  - ACL off, protectedMode=true and bindAddress not set (Redis's protected
 *    mode): only loopback peers; the start-up log says how to open it.
 * The ACL file is reloaded by the writer thread within 2 s of a change and
 * read under urcu-memb by whichever thread handles the request.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <urcu/urcu-memb.h>

#include "common/acl.h"
#include "common/log.h"
#include "control/ns.h"
#include "ns_priv.h"

#define ACL_WATCH_MS 1000

#include <errno.h>

static const char *const reasons[NS_ACL_REASONS] = {
	[NS_ACL_NO_KEY] = "no_access_key",     [NS_ACL_UNKNOWN_KEY] = "unknown_access_key",
	[NS_ACL_BAD_SIG] = "bad_signature",    [NS_ACL_NOT_ADMIN] = "not_admin",
	[NS_ACL_PROTECTED] = "protected_mode",
};

const char *
ns_acl_reason_name(unsigned r)
{
	return r < NS_ACL_REASONS ? reasons[r] : "?";
}

int
ns__acl_check(struct ns_acl *a, uint32_t peer_ip, const struct wire_rem_cmd *req, char *why,
	      size_t why_len)
{
	const struct acl *acl;
	const struct acl_account *acc;
	const struct wire_kv *ak, *sig;
	char want[HMAC_B64_LEN + 1];
	int reason = -1;

	if (a->protected_mode) {
		if ((ntohl(peer_ip) >> 24) == 127)
			return 0;
		snprintf(why, why_len,
			 "protected mode: request %d is accepted from loopback only; set aclEnable "
			 "with an aclFile (brokers sign with accessKey/secretKey), or bindAddress, "
			 "or "
			 "protectedMode=false on the NameServer",
			 req->code);
		reason = NS_ACL_PROTECTED;
		goto refuse;
	}
	urcu_memb_read_lock();
	/* pairs with rcu_assign_pointer() in publish() */
	acl = rcu_dereference(a->acl);
	if (!acl || acl_addrs_match(&acl->global, peer_ip)) {
		urcu_memb_read_unlock();
		return 0;
	}
	ak = wire_rem_ext_get(req, "AccessKey");
	if (!ak || ak->val_len == 0) {
		snprintf(why, why_len,
			 "No accessKey is configured: request %d changes routes; sign it with an "
			 "admin account of the NameServer's aclFile",
			 req->code);
		reason = NS_ACL_NO_KEY;
	} else if (!(acc = acl_find(acl, ak->val, ak->val_len))) {
		snprintf(why, why_len, "No acl config for the accessKey of request %d", req->code);
		reason = NS_ACL_UNKNOWN_KEY;
	} else if (!acl_addrs_match(&acc->white, peer_ip)) {
		sig = wire_rem_ext_get(req, "Signature");
		wire_rem_sign(req, &acc->key, want);
		if (!sig || sig->val_len != HMAC_B64_LEN ||
		    !hmac_equal(sig->val, want, HMAC_B64_LEN)) {
			snprintf(why, why_len, "Check signature failed for accessKey=%s", acc->ak);
			reason = NS_ACL_BAD_SIG;
		} else if (!acc->admin) {
			snprintf(why, why_len,
				 "Need admin permission for request code=%d, but accessKey=%s is "
				 "not",
				 req->code, acc->ak);
			reason = NS_ACL_NOT_ADMIN;
		}
	}
	urcu_memb_read_unlock();
	if (reason < 0)
		return 0;
refuse:
	atomic_add_relaxed(&a->denied[reason], 1);
	{
		char ip[INET_ADDRSTRLEN] = "?";

		inet_ntop(AF_INET, &peer_ip, ip, sizeof(ip));
		log_warn_ratelimited(NS_TAG, "acl: %s refused request %d from %s: %s",
				     ns_acl_reason_name((unsigned)reason), req->code, ip, why);
	}
	return -EACCES;
}

static void
publish(struct ns_acl *a, struct acl *n)
{
	struct acl *old = a->acl;

	/* pairs with rcu_dereference() in ns__acl_check() */
	rcu_assign_pointer(a->acl, n);
	urcu_memb_synchronize_rcu();
	acl_free(old);
}

int
ns__acl_init(struct ns_acl *a, const char *path, bool protected_mode)
{
	struct acl *n;
	char why[256];
	int rc;

	a->protected_mode = protected_mode;
	if (!path || !path[0])
		return 0;
	rc = acl_watch_start(&a->w, path, &n, why, sizeof(why));
	if (rc) {
		log_err(NS_TAG, "%s", why);
		return rc;
	}
	a->acl = n;
	log_info(NS_TAG,
		 "acl on: %u accounts from %s; broker registrations and admin requests "
		 "need an admin account's signature",
		 n->n, path);
	return 0;
}

void
ns__acl_tick(struct ns_acl *a, uint64_t now_ms)
{
	struct acl *n;
	char why[256];
	int rc = acl_watch_poll(&a->w, now_ms, ACL_WATCH_MS, &n, why, sizeof(why));

	if (rc < 0)
		log_err(NS_TAG, "%s changed but cannot be used, the accounts stay as they were: %s",
			a->w.path, why);
	if (rc <= 0)
		return;
	publish(a, n);
	log_info(NS_TAG, "reloaded %s: %u accounts", a->w.path, n->n);
}

void
ns__acl_fini(struct ns_acl *a)
{
	acl_free(a->acl);
	a->acl = NULL;
}
