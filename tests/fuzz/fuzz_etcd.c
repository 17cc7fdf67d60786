// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_etcd.c - the etcd client's decoders (control/etcd.c): an HTTP
 * answer's body (plain or chunked, joined in place), then every JSON
 * reader of the gateway's answers on it. Oracle: no crash, no leak, no
 * read or write outside the buffer (ASan); a found body lies inside the
 * input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ctl_etcd_kv kvs[4];
	char *buf;
	char *body = NULL;
	size_t bl = 0;
	size_t n;
	int64_t v;
	bool ok;

	if (size > (1u << 20))
		return 0;
	buf = malloc(size + 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	if (ctl_etcd_http_body(buf, size, &body, &bl) == 0) {
		if (body < buf || body + bl > buf + size)
			abort();
	} else {
		body = buf; /* the readers on their own */
		bl = size;
	}
	(void)ctl_etcd_parse_grant(body, bl, &v);
	(void)ctl_etcd_parse_keepalive(body, bl, &v);
	(void)ctl_etcd_parse_range(body, bl, kvs, 4, &n);
	(void)ctl_etcd_parse_txn(body, bl, &ok);
	free(buf);
	return 0;
}
