// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt.c - the checkpoint file (store_int.h): magic, version, shard count,
 * clean flag, per shard: end, cq_safe, indexed, verified; CRC-32; replaced
 * atomically. The clean flag and the "end" values are only written by
 * store_close() after the final flush.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bytes_priv.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/crc32.h"
#include "common/log.h"
#include "store/idx.h"
#include "store/store.h"
#include "store_priv.h"
#include "store_int.h"

/* ---- checkpoint and abort files ---- */

int
store__ckpt_write(struct store *s, bool clean, const struct ckpt_shard *cs)
{
	uint8_t buf[CKPT_HDR + CKPT_PER_SHARD * STORE_SHARDS_MAX + 4];
	size_t n = CKPT_HDR + CKPT_PER_SHARD * s->cfg.shards;

	wire_st_le32(buf, CKPT_MAGIC);
	wire_st_le32(buf + 4, CKPT_VERSION);
	wire_st_le32(buf + 8, s->cfg.shards);
	wire_st_le32(buf + 12, clean ? 1 : 0);
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		uint8_t *p = buf + CKPT_HDR + CKPT_PER_SHARD * i;

		wire_st_le64(p, cs[i].end);
		wire_st_le64(p + 8, cs[i].cq_safe);
		wire_st_le64(p + 16, cs[i].indexed);
		wire_st_le64(p + 24, (uint64_t)cs[i].verified);
	}
	wire_st_le32(buf + n, crc32_java(buf, n));
	return store_io_write_atomic(s->io, s->ckpt_path, buf, n + 4);
}

/* The shard count of a checkpoint that is whole, 0 without one (store__shards_check()). */
uint32_t
store__ckpt_shards(struct store *s)
{
	uint32_t n = 0;
	const uint8_t *p;
	char *buf;
	size_t len;

	if (store_io_read_file(s->io, s->ckpt_path, 4096, &buf, &len) != 0)
		return 0;
	p = (const uint8_t *)buf;
	if (len >= CKPT_HDR + 4 && wire_ld_le32(p) == CKPT_MAGIC &&
	    (wire_ld_le32(p + 4) == CKPT_VERSION || wire_ld_le32(p + 4) == 1) &&
	    len == CKPT_HDR +
			    (wire_ld_le32(p + 4) == 1 ? 24 : CKPT_PER_SHARD) *
				    (size_t)wire_ld_le32(p + 8) +
			    4 &&
	    wire_ld_le32(p + len - 4) == crc32_java(p, len - 4))
		n = wire_ld_le32(p + 8);
	free(buf);
	return n;
}

/* Return: 1 read (clean or not in *clean), 0 none or unusable, -errno. */
int
store__ckpt_read(struct store *s, bool *clean, struct ckpt_shard *cs)
{
	char *buf;
	size_t len;
	const uint8_t *p;
	size_t per;
	int rc = store_io_read_file(s->io, s->ckpt_path, 4096, &buf, &len);

	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	p = (const uint8_t *)buf;
	per = len >= 8 && wire_ld_le32(p + 4) == 1 ? 24 : CKPT_PER_SHARD;
	if (len < CKPT_HDR + 4 || wire_ld_le32(p) != CKPT_MAGIC ||
	    (wire_ld_le32(p + 4) != CKPT_VERSION && wire_ld_le32(p + 4) != 1) ||
	    wire_ld_le32(p + 8) != s->cfg.shards ||
	    len != CKPT_HDR + per * (size_t)s->cfg.shards + 4 ||
	    wire_ld_le32(p + len - 4) != crc32_java(p, len - 4)) {
		log_warn(STORE_TAG,
			 "checkpoint %s unusable (damaged, or made for another shard count): "
			 "scanning the whole log",
			 s->ckpt_path);
		free(buf);
		return 0;
	}
	*clean = wire_ld_le32(p + 12) == 1;
	for (uint32_t i = 0; i < s->cfg.shards; i++) {
		const uint8_t *q = p + CKPT_HDR + per * i;

		cs[i].end = wire_ld_le64(q);
		cs[i].cq_safe = wire_ld_le64(q + 8);
		cs[i].indexed = wire_ld_le64(q + 16);
		cs[i].verified = per == 24 ? -1 : (int64_t)wire_ld_le64(q + 24);
	}
	free(buf);
	return 1;
}
