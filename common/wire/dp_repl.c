// SPDX-License-Identifier: Apache-2.0
/*
 * dp_repl.c - wire codec B: the REPL op (docs/protocol.md §5.14, §5.15),
 * with which a slave's replication session follows one CommitLog shard of
 * its master (docs/replication.md).
 *
 * Request: offset u64, seg_size u64, flushed u64, prev_off u64,
 * prev_size u32, prev_hash u32, max_bytes u32, suspend_ms u32, shard u16,
 * cores u16, name_len u16, flags u16, epoch u64, then the slave's
 * brokerName.
 * Response op part: master_end u64, data_offset u64, min_offset u64,
 * base_end u64, seg_size u64, cores u16, flags u16, data_len u32, epoch u64,
 * then data_len bytes of log. The same rules as every other body (dp.c's
 * DESIGN): lengths add up exactly, reserved bytes are 0.
 */
#include <errno.h>
#include <string.h>

#include "wire/dp.h"

#include "bytes_priv.h"
#include "dp_priv.h"

long
wire_dp_repl_req_encode(const struct wire_dp_repl_req *r, uint8_t *buf, size_t cap)
{
	if (r->name_len == 0 || r->name_len > WIRE_DP_TOPIC_MAX || r->name == NULL ||
	    r->max_bytes == 0 || (r->flags & ~WIRE_DP_REPL_RQ_F_ALL) != 0)
		return -EINVAL;
	if (cap < WIRE_DP_REPL_REQ_FIXED + (size_t)r->name_len)
		return -ENOBUFS;
	wire_st_le64(buf, r->offset);
	wire_st_le64(buf + 8, r->seg_size);
	wire_st_le64(buf + 16, r->flushed);
	wire_st_le64(buf + 24, r->prev_off);
	wire_st_le32(buf + 32, r->prev_size);
	wire_st_le32(buf + 36, r->prev_hash);
	wire_st_le32(buf + 40, r->max_bytes);
	wire_st_le32(buf + 44, r->suspend_ms);
	wire_st_le16(buf + 48, r->shard);
	wire_st_le16(buf + 50, r->cores);
	wire_st_le16(buf + 52, r->name_len);
	wire_st_le16(buf + 54, r->flags);
	wire_st_le64(buf + 56, r->epoch);
	memcpy(buf + WIRE_DP_REPL_REQ_FIXED, r->name, r->name_len);
	return WIRE_DP_REPL_REQ_FIXED + (long)r->name_len;
}

int
wire_dp_repl_req_decode(const uint8_t *msg, size_t len, struct wire_dp_repl_req *r)
{
	if (len < WIRE_DP_REPL_REQ_FIXED)
		return -EBADMSG;
	r->offset = wire_ld_le64(msg);
	r->seg_size = wire_ld_le64(msg + 8);
	r->flushed = wire_ld_le64(msg + 16);
	r->prev_off = wire_ld_le64(msg + 24);
	r->prev_size = wire_ld_le32(msg + 32);
	r->prev_hash = wire_ld_le32(msg + 36);
	r->max_bytes = wire_ld_le32(msg + 40);
	r->suspend_ms = wire_ld_le32(msg + 44);
	r->shard = wire_ld_le16(msg + 48);
	r->cores = wire_ld_le16(msg + 50);
	r->name_len = wire_ld_le16(msg + 52);
	r->flags = wire_ld_le16(msg + 54);
	r->epoch = wire_ld_le64(msg + 56);
	if ((r->flags & ~WIRE_DP_REPL_RQ_F_ALL) != 0 || r->name_len == 0 ||
	    r->name_len > WIRE_DP_TOPIC_MAX || r->max_bytes == 0 ||
	    (uint64_t)WIRE_DP_REPL_REQ_FIXED + r->name_len != len)
		return -EBADMSG;
	r->name = (const char *)msg + WIRE_DP_REPL_REQ_FIXED;
	return 0;
}

long
wire_dp_repl_resp_encode(const struct wire_dp_repl_resp *r, uint8_t *buf, size_t cap)
{
	const size_t fixed = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_REPL_RESP_FIXED;
	uint8_t *p = buf + WIRE_DP_RESP_HEAD_LEN;
	int err;

	if ((r->data_len && !r->data) || r->data_len > WIRE_DP_MSG_LIMIT - fixed ||
	    (r->flags & ~WIRE_DP_REPL_F_ALL) != 0 ||
	    (r->data_len && r->head.status != WIRE_DP_ST_SUCCESS))
		return -EINVAL;
	err = wire__dp_resp_begin(&r->head, fixed + r->data_len, buf, cap);
	if (err != 0)
		return err;
	wire_st_le64(p, r->master_end);
	wire_st_le64(p + 8, r->data_offset);
	wire_st_le64(p + 16, r->min_offset);
	wire_st_le64(p + 24, r->base_end);
	wire_st_le64(p + 32, r->seg_size);
	wire_st_le16(p + 40, r->cores);
	wire_st_le16(p + 42, r->flags);
	wire_st_le32(p + 44, r->data_len);
	wire_st_le64(p + 48, r->epoch);
	if (r->data_len)
		memmove(buf + fixed, r->data, r->data_len);
	return (long)(fixed + r->data_len);
}

int
wire_dp_repl_resp_decode(const uint8_t *msg, size_t len, struct wire_dp_repl_resp *r)
{
	const size_t fixed = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_REPL_RESP_FIXED;
	const uint8_t *p = msg + WIRE_DP_RESP_HEAD_LEN;
	int err;

	err = wire__dp_resp_head_take(msg, len, fixed, true, &r->head);
	if (err != 0)
		return err;
	r->master_end = wire_ld_le64(p);
	r->data_offset = wire_ld_le64(p + 8);
	r->min_offset = wire_ld_le64(p + 16);
	r->base_end = wire_ld_le64(p + 24);
	r->seg_size = wire_ld_le64(p + 32);
	r->cores = wire_ld_le16(p + 40);
	r->data_len = wire_ld_le32(p + 44);
	r->flags = wire_ld_le16(p + 42);
	r->epoch = wire_ld_le64(p + 48);
	if ((r->flags & ~WIRE_DP_REPL_F_ALL) != 0 || (uint64_t)fixed + r->data_len != len ||
	    (r->data_len && r->head.status != WIRE_DP_ST_SUCCESS))
		return -EBADMSG;
	r->data = r->data_len ? p + WIRE_DP_REPL_RESP_FIXED : NULL;
	return 0;
}
