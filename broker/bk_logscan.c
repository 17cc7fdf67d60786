// SPDX-License-Identifier: Apache-2.0
/*
 * bk_logscan.c - reading a shard's log from an offset at start (bk_ctl.h):
 * what the timers and the transactions look for after a crash, the copies
 * of their records written after their last saved progress.
 */
#include <errno.h>

#include "bk_ctl.h"
#include "store/clog.h"
#include "wire/record.h"

int
bk_log_scan(struct store *st, uint32_t shard, uint64_t from,
	    int (*fn)(void *arg, const struct wire_msg *m), void *arg)
{
	uint64_t off = SP_MAX(from, clog_min(store_clog(st, shard)));
	uint64_t seg = clog_seg_size(store_clog(st, shard));
	const uint8_t *p;
	long got;

	while ((got = store_repl_read(st, shard, off, 1u << 20, &p)) > 0) {
		size_t pos = 0;
		bool blank = false;

		while (pos < (size_t)got) {
			struct wire_msg m;
			long r = wire_rec_decode(p + pos, (size_t)got - pos, 0, &m);
			int rc;

			if (r == -ENODATA) {
				blank = true; /* a segment's end: the log goes on in the next one */
				break;
			}
			if (r <= 0)
				break;
			pos += (size_t)r;
			rc = fn(arg, &m);
			if (rc != 0)
				return rc;
		}
		if (blank) {
			off = ((off + pos) / seg + 1) * seg;
			continue;
		}
		if (pos == 0)
			break; /* not a record: the end of the log */
		off += pos;
	}
	return got < 0 && got != -ERANGE ? (int)got : 0;
}

uint32_t
bk_uniq_hash(const struct wire_msg *m)
{
	const char *v;
	size_t vl;

	return wire_props_get(m->props, m->props_len, "UNIQ_KEY", &v, &vl) ? bk_name_hash(v, vl)
									   : 0;
}
