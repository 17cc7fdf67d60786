// SPDX-License-Identifier: Apache-2.0
/*
 * bk_answer.c - how a core answers (bk_handlers.h): into the transport
 * server's buffer for a dataplane request, or into the command's own buffer
 * and back on the completion ring for one the control thread put on the
 * command ring (RocketMQ remoting); error answers for every op.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"

/* ---- answering ---- */

/*
 * Answers go back the way the request came: to the transport server, or,
 * for a request the control thread put on the command ring (RocketMQ
 * remoting), into the command's own buffer and back on the completion ring.
 */
bool
bk_core__is_rmt(struct dp_xhandle h)
{
	return h.session_id == BK_RMT_SESSION;
}

struct bk_rcmd *
bk_core__rcmd_of(struct dp_xhandle h)
{
	return (struct bk_rcmd *)(uintptr_t)h.req_id;
}

/* Hands @cmd back to the control thread; the core must not touch it again. */
void
bk_core__rmt_complete(struct bk_core *c, struct bk_rcmd *cmd)
{
	/* Cannot fail: control keeps fewer commands in flight than the ring holds. */
	if (dp_lcore_complete(&c->lc, cmd) != 0)
		c->st.gone++;
	c->rmt_posted = true;
}

/*
 * A buffer for the @len-byte answer to @h, or NULL: the request is gone,
 * or (command ring) its buffer is too small: the command goes back now
 * with `need` set, and control runs it again with a buffer that fits.
 */
uint8_t *
bk_core_ans_buf(struct bk_core *c, struct dp_xhandle h, uint32_t len)
{
	struct bk_rcmd *cmd;

	if (!bk_core__is_rmt(h))
		return dp_xsrv_resp_buf(c->xs, h, len);
	cmd = bk_core__rcmd_of(h);
	if (len <= cmd->resp_cap)
		return cmd->resp;
	cmd->need = len;
	cmd->resp_len = 0;
	c->rmt_gone = h.seq;
	bk_core__rmt_complete(c, cmd);
	return NULL;
}

bool
bk_core_ans_pending(struct bk_core *c, struct dp_xhandle h)
{
	if (!bk_core__is_rmt(h))
		return dp_xsrv_is_pending(c->xs, h);
	return h.seq != c->rmt_gone;
}

/* The request may have gone (session expired or reset): count it, nothing else to do. */
void
bk_core_respond(struct bk_core *c, struct dp_xhandle h, uint32_t len)
{
	if (bk_core__is_rmt(h)) {
		struct bk_rcmd *cmd = bk_core__rcmd_of(h);

		cmd->resp_len = len;
		bk_core__rmt_complete(c, cmd);
		return;
	}
	if (dp_xsrv_respond(c->xs, h, len) != 0)
		c->st.gone++;
}

static unsigned
err_op(uint16_t op)
{
	return op == WIRE_DP_OP_SEND	     ? BK_ERR_SEND
	       : op == WIRE_DP_OP_SEND_BATCH ? BK_ERR_SEND_BATCH
	       : op == WIRE_DP_OP_PULL	     ? BK_ERR_PULL
					     : BK_ERR_OTHER_OP;
}

/* The row of @st in bk_core_stats.err_by[][]: 0 for a status not named there. */
static unsigned
err_status(int32_t st)
{
	switch (st) {
	case WIRE_DP_ST_SYSTEM_ERROR:
		return 1;
	case WIRE_DP_ST_NOT_SUPPORTED:
		return 2;
	case WIRE_DP_ST_FLUSH_DISK_TIMEOUT:
		return 3;
	case WIRE_DP_ST_SLAVE_NOT_AVAILABLE:
		return 4;
	case WIRE_DP_ST_FLUSH_SLAVE_TIMEOUT:
		return 5;
	case WIRE_DP_ST_MESSAGE_ILLEGAL:
		return 6;
	case WIRE_DP_ST_SERVICE_NOT_AVAILABLE:
		return 7;
	case WIRE_DP_ST_NO_PERMISSION:
		return 8;
	case WIRE_DP_ST_TOPIC_NOT_EXIST:
		return 9;
	case WIRE_DP_ST_PULL_NOT_FOUND:
		return 10;
	case WIRE_DP_ST_PULL_RETRY_IMMEDIATELY:
		return 11;
	case WIRE_DP_ST_PULL_OFFSET_MOVED:
		return 12;
	case WIRE_DP_ST_QUERY_NOT_FOUND:
		return 13;
	case WIRE_DP_ST_SUBSCRIPTION_GROUP_NOT_EXIST:
		return 14;
	case WIRE_DP_ST_BAD_REQUEST:
		return 15;
	default:
		return 0;
	}
}

int
bk_core_answer_err(struct bk_core *c, struct dp_xhandle h, uint16_t op, uint64_t recv_ns,
		   int32_t status, int redirect)
{
	struct wire_dp_resp_head head = {
		.status = status, .ts_recv_ns = recv_ns, .ts_handled_ns = clk_mono_fast_ns()};
	uint8_t *buf;
	long fixed;
	uint32_t len;

	if (status == WIRE_DP_ST_REDIRECT) {
		head.redirect_core = (uint16_t)redirect;
		head.redirect_port = (uint16_t)(c->bk->conf.dp_port + redirect);
		c->st.redirects++;
	} else if (status == WIRE_DP_ST_SYSTEM_BUSY) {
		c->st.busy++;
		c->st.busy_by[c->busy_why < BK_BUSY_WHYS ? c->busy_why : BK_BUSY_OTHER]++;
		c->busy_why = BK_BUSY_OTHER;
	} else {
		c->st.errors++;
		c->st.err_by[err_op(op)][err_status(status)]++;
	}
	fixed = wire_dp_resp_fixed_len(op);
	len = WIRE_DP_RESP_HEAD_LEN + (uint32_t)(fixed > 0 ? fixed : 0);
	buf = bk_core_ans_buf(c, h, len);
	if (buf == NULL)
		return 0; /* the request is gone */
	if (wire_dp_resp_error_encode(op, &head, buf, len) != (long)len)
		return 0;
	bk_core_respond(c, h, len);
	return 0;
}
