// SPDX-License-Identifier: Apache-2.0
/*
 * error.c - readable strings for libsprocket's error values.
 *
 * One int space: 0, a negative errno (below SP_ERR_STATUS_BASE in magnitude;
 * Linux errnos stay under 4096), or SP_ERR_STATUS(st) for a broker status
 * (docs/protocol.md §5.1), so a caller can print any return value and still
 * tell a broker's refusal from a local failure (sp_err_status()).
 */
#include <errno.h>
#include <string.h>

#include "client_priv.h"

struct st_name {
	int st;
	const char *s;
};

static const struct st_name st_names[] = {
	{WIRE_DP_ST_SUCCESS, "broker: SUCCESS"},
	{WIRE_DP_ST_SYSTEM_ERROR, "broker: SYSTEM_ERROR (internal failure or bad queue id)"},
	{WIRE_DP_ST_SYSTEM_BUSY, "broker: SYSTEM_BUSY (no buffer, park table or session slot)"},
	{WIRE_DP_ST_NOT_SUPPORTED,
	 "broker: NOT_SUPPORTED (a delayed, timed or transactional message; not stored)"},
	{WIRE_DP_ST_FLUSH_DISK_TIMEOUT, "broker: FLUSH_DISK_TIMEOUT (stored, flush timed out)"},
	{WIRE_DP_ST_SLAVE_NOT_AVAILABLE, "broker: SLAVE_NOT_AVAILABLE (stored, no slave)"},
	{WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT, "broker: FLUSH_SLAVE_TIMEOUT (stored, slave timed out)"},
	{WIRE_DP_ST_MESSAGE_ILLEGAL, "broker: MESSAGE_ILLEGAL (body or properties too long)"},
	{WIRE_DP_ST_SERVICE_NOT_AVAILABLE,
	 "broker: SERVICE_NOT_AVAILABLE (store down or disk full)"},
	{WIRE_DP_ST_NO_PERMISSION, "broker: NO_PERMISSION"},
	{WIRE_DP_ST_TOPIC_NOT_EXIST, "broker: TOPIC_NOT_EXIST"},
	{WIRE_DP_ST_PULL_NOT_FOUND, "broker: PULL_NOT_FOUND (no new message)"},
	{WIRE_DP_ST_PULL_RETRY_IMMEDIATELY, "broker: PULL_RETRY_IMMEDIATELY (nothing matched)"},
	{WIRE_DP_ST_PULL_OFFSET_MOVED, "broker: PULL_OFFSET_MOVED (offset out of range)"},
	{WIRE_DP_ST_QUERY_NOT_FOUND, "broker: QUERY_NOT_FOUND (the group has no offset)"},
	{WIRE_DP_ST_SUBSCRIPTION_PARSE_FAILED, "broker: SUBSCRIPTION_PARSE_FAILED"},
	{WIRE_DP_ST_SUBSCRIPTION_GROUP_NOT_EXIST, "broker: SUBSCRIPTION_GROUP_NOT_EXIST"},
	{WIRE_DP_ST_REDIRECT, "broker: REDIRECT (the queue belongs to another core)"},
	{WIRE_DP_ST_BAD_REQUEST, "broker: BAD_REQUEST (the request did not decode)"},
};

int
sp_err_status(int err)
{
	if (err > -SP_ERR_STATUS_BASE || err <= -2 * SP_ERR_STATUS_BASE)
		return -1;
	return -err - SP_ERR_STATUS_BASE;
}

const char *
sp_strerror(int err)
{
	int st = sp_err_status(err);

	if (err == 0)
		return "success";
	if (st >= 0) {
		for (size_t i = 0; i < ARRAY_SIZE(st_names); i++)
			if (st_names[i].st == st)
				return st_names[i].s;
		return "broker: unknown status";
	}
	switch (err) {
	/* transport-specific meanings first (dp/xport.h) */
	case -ETIMEDOUT:
		return "timed out (no answer from the broker)";
	case -ECONNRESET:
		return "session reset by the broker";
	case -ECONNABORTED:
		return "aborted (the client is shutting down)";
	case -EBUSY:
		return "broker session table full";
	case -ENOENT:
		return "no route (topic or queue unknown)";
	case -EACCES:
		return "the broker refused the session: credentials missing, unknown or wrong "
		       "(aclEnable)";
	default:
		break;
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}
