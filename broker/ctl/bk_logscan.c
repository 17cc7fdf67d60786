// SPDX-License-Identifier: Apache-2.0
/*
 * bk_logscan.c - reading a shard's log from an offset at start (bk_ctl.h):
 * what the timers and the transactions look for after a crash, the copies
 * of their records written after their last saved progress. Damage does not
 * stop a scan: a span recovery stepped over is passed, other damage is
 * counted as a damaged read and the scan goes on at the next segment (what
 * the rest of that segment held is not seen: a timer or a half found there
 * is treated as not yet fired or resolved, so at worst it fires or is
 * checked again, never lost).
 */
#include <errno.h>
#include <inttypes.h>

#include "bk_ctl.h"
#include "common/log.h"
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

	for (;;) {
		size_t pos = 0;
		bool blank = false, bad = false;

		got = store_repl_read(st, shard, off, 1u << 20, &p);
		if (got == -EBADMSG) {
			bad = true;
		} else if (got <= 0) {
			break;
		}
		while (!bad && pos < (size_t)got) {
			struct wire_msg m;
			long r = wire_rec_decode(p + pos, (size_t)got - pos, 0, &m);
			int rc;

			if (r == -ENODATA) {
				blank = true; /* a segment's end: the log goes on in the next one */
				break;
			}
			if (r <= 0) {
				bad = pos == 0; /* else: read again from it, at the top */
				break;
			}
			pos += (size_t)r;
			rc = fn(arg, &m);
			if (rc != 0)
				return rc;
		}
		if (bad) {
			/* damage: go on past it, as recovery and delivery do (counted there) */
			uint64_t next = store_scan_past(st, shard, off);

			log_warn_ratelimited(BK_TAG,
					     "shard %u: a damaged record at log offset %" PRIu64
					     " in a scan at start: going on at %" PRIu64,
					     shard, off, next);
			if (next <= off)
				break;
			off = next;
			continue;
		}
		if (blank) {
			off = ((off + pos) / seg + 1) * seg;
			continue;
		}
		off += pos;
	}
	return got < 0 && got != -ERANGE && got != -EBADMSG ? (int)got : 0;
}

uint32_t
bk_uniq_hash(const struct wire_msg *m)
{
	const char *v;
	size_t vl;

	return wire_props_get(m->props, m->props_len, "UNIQ_KEY", &v, &vl) ? bk_name_hash(v, vl)
									   : 0;
}
