// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_http_auth.c - what a client's HTTP request gives the gate of a
 * daemon's pages (control/httpd_auth.c): an Authorization header (HTTP Basic
 * or Bearer) and a path, against a small ACL with an admin and a SUB-only
 * account. Input: path, '\n', Authorization header (the rest), each NUL-free.
 * Never crashes; a page is only ever answered for an account of the file.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/acl.h"
#include "common/acl_door.h"
#include "control/httpd.h"

static const char file[] = "globalWhiteRemoteAddresses:\n"
			   "accounts:\n"
			   "  - accessKey: appuser1\n"
			   "    secretKey: appsecret1\n"
			   "    defaultTopicPerm: SUB\n"
			   "  - accessKey: adminuser\n"
			   "    secretKey: adminsecret\n"
			   "    admin: true\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct acl *acl;
	char buf[4096], ak[ACL_KEY_MAX + 1], sk[ACL_KEY_MAX + 1];
	struct httpd_auth a = {.tag = "fuzz", .token = (size & 1) ? "tok" : NULL};
	struct httpd_req r = {.status = 200, .peer_ip = 0};
	const struct acl_account *acc;
	char *nl;

	if (acl == NULL) {
		char why[256];

		if (acl_parse(file, strlen(file), &acl, why, sizeof(why)) != 0)
			abort();
	}
	if (size >= sizeof(buf) || memchr(data, '\0', size))
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	(void)httpd_basic_parse(buf, ak, sizeof(ak), sk, sizeof(sk));
	nl = strchr(buf, '\n');
	r.path = buf;
	r.authz = NULL;
	if (nl) {
		*nl = '\0';
		r.authz = nl + 1;
	}
	r.peer_ip = htonl(0x7f000001); /* loopback: Basic is taken */
	jbuf_init(&r.body);
	if (httpd_auth_check(&a, acl, &r, &acc) != NULL) {
		const struct acl_door *d = acl_door_http(false, r.path);

		if (d == NULL || (d->cls != ACL_DOOR_OPEN && acc == NULL))
			abort(); /* answered without an account */
	}
	jbuf_free(&r.body);
	return 0;
}
