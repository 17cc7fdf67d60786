// SPDX-License-Identifier: Apache-2.0
/*
 * httpd_auth.c - who may read a daemon's HTTP pages (httpd.h; docs/security.md).
 *
 * Every path has a row in the permission table (common/acl_door.c). With
 * aclEnable on, a path that is not OPEN needs an account of the ACL file,
 * given as HTTP Basic (accessKey:secretKey), which a browser asks for by
 * itself when it gets 401 with a Basic challenge; ADMIN paths need an admin
 * account; message bodies need SUB on each message's topic (the handler
 * checks each record with the account this returns). A source in
 * globalWhiteRemoteAddresses needs nothing, as on the remoting port.
 *
 * Basic sends the secret in the clear, and the HTTP port has no TLS: it is
 * taken from loopback peers only (a browser on the host, an SSH tunnel, or a
 * reverse proxy on the host that terminates TLS). From another address it is
 * refused with a 403 that says so. That is why httpBindAddress defaults to
 * 127.0.0.1.
 *
 * /metrics and /health are OPEN: Prometheus and health checks read them
 * without an account. httpMetricsToken (set: those two need
 * "Authorization: Bearer TOKEN", Prometheus' `authorization` setting) closes
 * them, with or without the ACL.
 *
 * Context: the daemon's control thread (the handlers run there).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/acl.h"
#include "common/acl_door.h"
#include "common/hmac.h"
#include "common/log.h"
#include "control/httpd.h"

static const char *const reason_names[HTTPD_AUTH_REASONS] = {
	[HTTPD_AUTH_NO_CREDENTIALS] = "no_credentials",
	[HTTPD_AUTH_BAD_CREDENTIALS] = "bad_credentials",
	[HTTPD_AUTH_NOT_LOOPBACK] = "credentials_not_from_loopback",
	[HTTPD_AUTH_NOT_ADMIN] = "not_admin",
	[HTTPD_AUTH_NO_PERMISSION] = "no_permission",
	[HTTPD_AUTH_BAD_TOKEN] = "bad_token",
	[HTTPD_AUTH_NO_PAGE] = "no_such_page",
};

const char *
httpd_auth_reason_name(unsigned reason)
{
	return reason < HTTPD_AUTH_REASONS ? reason_names[reason] : "?";
}

int
httpd_basic_parse(const char *hdr, char *ak, size_t ak_cap, char *sk, size_t sk_cap)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char raw[2 * ACL_KEY_MAX + 8];
	const char *p, *colon;
	size_t len, tok;
	long n;

	if (hdr == NULL || strncasecmp(hdr, "Basic ", 6) != 0)
		return -1;
	for (p = hdr + 6; *p == ' '; p++)
		;
	/* one token of the standard alphabet, '=' only as padding at its end */
	tok = strspn(p, alphabet);
	tok += strspn(p + tok, "=");
	if (p[tok] != '\0')
		return -1;
	n = hmac_b64_decode(p, raw, sizeof(raw));
	if (n <= 0 || memchr(raw, '\0', (size_t)n) != NULL)
		return -1;
	colon = memchr(raw, ':', (size_t)n);
	if (colon == NULL)
		return -1;
	len = (size_t)(colon - raw);
	if (len == 0 || len >= ak_cap || (size_t)n - len - 1 >= sk_cap)
		return -1;
	memcpy(ak, raw, len);
	ak[len] = '\0';
	memcpy(sk, colon + 1, (size_t)n - len - 1);
	sk[(size_t)n - len - 1] = '\0';
	return 0;
}

static const struct acl_door *
refuse(struct httpd_auth *a, struct httpd_req *r, unsigned reason, int status, const char *why)
{
	char ip[INET_ADDRSTRLEN] = "?";

	a->refused[reason]++;
	r->status = status;
	r->challenge = status == 401;
	jbuf_lit(&r->body, why);
	jbuf_lit(&r->body, "\n");
	inet_ntop(AF_INET, &r->peer_ip, ip, sizeof(ip));
	log_warn_ratelimited(a->tag, "http: %s refused %s from %s", httpd_auth_reason_name(reason),
			     r->path, ip);
	return NULL;
}

static bool
is_loopback(uint32_t ip)
{
	return (ntohl(ip) >> 24) == 127;
}

/* "Bearer TOKEN" against @token in constant time (lengths aside). */
static bool
bearer_ok(const char *hdr, const char *token)
{
	size_t n = strlen(token);

	if (hdr == NULL || strncasecmp(hdr, "Bearer ", 7) != 0)
		return false;
	hdr += 7;
	while (*hdr == ' ')
		hdr++;
	return strlen(hdr) == n && hmac_equal(hdr, token, n);
}

const struct acl_door *
httpd_auth_check(struct httpd_auth *a, const struct acl *acl, struct httpd_req *r,
		 const struct acl_account **out)
{
	const struct acl_door *door = acl_door_http(a->namesrv, r->path);
	const struct acl_account *acc;
	char ak[ACL_KEY_MAX + 1], sk[ACL_KEY_MAX + 1];
	bool ok;

	*out = NULL;
	if (door == NULL) {
		a->refused[HTTPD_AUTH_NO_PAGE]++;
		r->status = 404;
		jbuf_lit(&r->body, "no such page (there are /, /metrics, /health and /api/)\n");
		return NULL;
	}
	if (door->cls == ACL_DOOR_OPEN) {
		if (a->token && a->token[0] && !bearer_ok(r->authz, a->token))
			return refuse(a, r, HTTPD_AUTH_BAD_TOKEN, 401,
				      "this page needs \"Authorization: Bearer TOKEN\" "
				      "(httpMetricsToken)");
		return door;
	}
	if (acl == NULL || acl_addrs_match(&acl->global, r->peer_ip))
		return door;
	if (r->authz == NULL || strncasecmp(r->authz, "Basic ", 6) != 0)
		return refuse(a, r, HTTPD_AUTH_NO_CREDENTIALS, 401,
			      "aclEnable=true: this page needs an account of the ACL file (HTTP "
			      "Basic: accessKey and secretKey)");
	if (!is_loopback(r->peer_ip))
		return refuse(
			a, r, HTTPD_AUTH_NOT_LOOPBACK, 403,
			"HTTP Basic credentials are taken from loopback only (the port has "
			"no TLS): use an SSH tunnel or a reverse proxy with TLS on this host");
	if (httpd_basic_parse(r->authz, ak, sizeof(ak), sk, sizeof(sk)) != 0)
		return refuse(a, r, HTTPD_AUTH_BAD_CREDENTIALS, 401,
			      "the Authorization header is not HTTP Basic accessKey:secretKey");
	acc = acl_find(acl, ak, strlen(ak));
	ok = acc && strlen(acc->sk) == strlen(sk) && hmac_equal(acc->sk, sk, strlen(sk));
	memset(sk, 0, sizeof(sk));
	if (!ok)
		return refuse(a, r, HTTPD_AUTH_BAD_CREDENTIALS, 401,
			      "unknown accessKey or wrong secretKey");
	if (door->cls == ACL_DOOR_ADMIN && !acc->admin)
		return refuse(a, r, HTTPD_AUTH_NOT_ADMIN, 403, "this page needs an admin account");
	*out = acc;
	return door;
}

void
httpd_auth_prom(const struct httpd_auth *a, const struct httpd *h, struct jbuf *b, const char *name)
{
	httpd_prom_family(b, name, "counter",
			  "HTTP requests refused, by reason (credentials, token, limits)");
	for (unsigned i = 0; i < HTTPD_AUTH_REASONS; i++)
		httpd_prom_sample(b, name, "reason", httpd_auth_reason_name(i), a->refused[i]);
	httpd_prom_sample(b, name, "reason", "limit_or_method", httpd_refused(h));
}
