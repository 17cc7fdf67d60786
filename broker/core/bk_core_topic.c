// SPDX-License-Identifier: Apache-2.0
/*
 * bk_core_topic.c - the topic and queue a request names (bk_handlers.h):
 * found in the RCU topic table, or asked for.
 *
 * Auto-creation: the core cannot create files, so a SEND for an unknown
 * topic posts the name to the control thread's mailbox and is answered
 * SYSTEM_BUSY; the client retries and finds the topic published.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bk_handlers.h"
#include "bk_msgtype.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"

/* ---- topics ---- */

/* Asks the control thread to create @name. Return: true when posted. */
static bool
request_create(struct bk_core *c, const char *name, size_t len, uint32_t queues)
{
	uint64_t one = 1;

	/* acquire: pairs with the control thread's release when it took the last one */
	if (atomic_load_acquire(&c->create_full))
		return false;
	memcpy(c->create_req.name, name, len);
	c->create_req.name[len] = '\0';
	c->create_req.queues = queues;
	/* release: pairs with the acquire in the control thread's mailbox scan */
	atomic_store_release(&c->create_full, 1);
	/* eventfd write never sleeps (the counter cannot overflow at 1 per post) */
	if (write(c->bk->efd, &one, sizeof(one)) < 0)
		return true; /* control also scans on its timer */
	return true;
}

static bool
is_system_topic(const char *name, size_t len)
{
	return (len >= 7 && memcmp(name, BK_RETRY_PREFIX, 7) == 0) ||
	       (len >= 5 && memcmp(name, BK_DLQ_PREFIX, 5) == 0);
}

/*
 * The topic for a write to @name, or NULL with *@status set: unknown (auto
 * creation requested: SYSTEM_BUSY, else TOPIC_NOT_EXIST), not writable.
 */
const struct bk_topic *
bk_core_topic_for_write(struct bk_core *c, const char *name, size_t len, bool force_create,
			uint32_t queues, int32_t *status)
{
	/* Published topics have valid names: check the name only on a miss. */
	const struct bk_topic *t = bk_topic_find(c->bk, name, len);

	if (t == NULL) {
		if (!bk_topic_name_ok(name, len)) {
			*status = WIRE_DP_ST_MESSAGE_ILLEGAL;
			return NULL;
		}
		if (force_create || (c->bk->conf.auto_create && !is_system_topic(name, len))) {
			request_create(c, name, len, queues);
			bk_core_busy_why(c, BK_BUSY_TOPIC_CREATE);
			*status = WIRE_DP_ST_SYSTEM_BUSY;
		} else {
			*status = WIRE_DP_ST_TOPIC_NOT_EXIST;
		}
		return NULL;
	}
	if (!(t->perm & META_PERM_WRITE) ||
	    !(atomic_load_relaxed(&c->bk->perm) & META_PERM_WRITE) ||
	    atomic_load_relaxed(&c->bk->ns_refused) || bk_topic_broker_only(t)) {
		*status = WIRE_DP_ST_NO_PERMISSION;
		return NULL;
	}
	return t;
}

/* The topic @name of a read or offset request, or NULL after answering why not. */
const struct bk_topic *
bk_core__topic_or_answer(struct bk_core *c, const struct dp_xreq *req, const char *name, size_t len)
{
	const struct bk_topic *t = bk_topic_find(c->bk, name, len);

	if (t == NULL)
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					 bk_topic_name_ok(name, len) ? WIRE_DP_ST_TOPIC_NOT_EXIST
								     : WIRE_DP_ST_MESSAGE_ILLEGAL,
					 0);
	return t;
}

/*
 * Return: whether queue @qid (< @limit) of @t is this core's; otherwise the
 * request was answered BAD_REQUEST (out of range) or REDIRECT (its owner).
 */
bool
bk_core__queue_is_mine(struct bk_core *c, const struct dp_xreq *req, const struct bk_topic *t,
		       int32_t qid, uint32_t limit)
{
	if (qid < 0 || (uint32_t)qid >= limit) {
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns,
					 WIRE_DP_ST_BAD_REQUEST, 0);
		return false;
	}
	if (t->core[qid] != c->id) {
		(void)bk_core_answer_err(c, req->h, req->op, req->ts_recv_ns, WIRE_DP_ST_REDIRECT,
					 t->core[qid]);
		return false;
	}
	return true;
}
