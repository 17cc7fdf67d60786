/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_handlers.h - what the files of a dataplane core share (core/): the
 * request families that bk_core.c dispatches to, and the helpers they all
 * use. Everything here runs on the core that owns the request and never
 * blocks (no allocation, locks, sleeping calls or logging).
 */
#ifndef SP_BK_HANDLERS_H
#define SP_BK_HANDLERS_H

#include "bk_priv.h"

static inline uint64_t
ms_to_ns(uint64_t ms)
{
	return ms * 1000000ull;
}

/* bk_answer.c */
/* Whether @h is a command from the control thread (remoting), not a transport request. */
bool bk_core__is_rmt(struct dp_xhandle h);
/* @h's command (bk_core__is_rmt(h)). */
struct bk_rcmd *bk_core__rcmd_of(struct dp_xhandle h);
/* Puts @cmd, answered, on the completion ring. */
void bk_core__rmt_complete(struct bk_core *c, struct bk_rcmd *cmd);
/* bk_offsets.c */
/* The committed offset of (@topic, @group, @qid), or NULL; @create adds it (NULL: table
 * full), @pull_only for a pull's counters, in half the table only (bk_offsets.c). */
struct bk_off *bk_core__off_find_ex(struct bk_core *c, const char *topic, size_t tl,
				    const char *group, size_t gl, uint32_t qid, bool create,
				    bool pull_only);
/* bk_core__off_find_ex() for a commit (anywhere in the table). */
struct bk_off *bk_core__off_find(struct bk_core *c, const char *topic, size_t tl, const char *group,
				 size_t gl, uint32_t qid, bool create);
/* bk_core_topic.c */
/* The topic @name for a read, or NULL: answered (TOPIC_NOT_EXIST). */
const struct bk_topic *bk_core__topic_or_answer(struct bk_core *c, const struct dp_xreq *req,
						const char *name, size_t len);
/* Whether @qid of @t is this core's; if not, @req is answered (REDIRECT or an error). */
bool bk_core__queue_is_mine(struct bk_core *c, const struct dp_xreq *req, const struct bk_topic *t,
			    int32_t qid, uint32_t limit);
/* bk_send.c */
/* Whether the pending-ack FIFO has room for one more put of @records. */
bool bk_core__ack_room(const struct bk_core *c, uint32_t records);
/* 1: @a may be answered SEND_OK, 0: not yet, < 0: answered with the error (store_ack_state(),
 * ACK_SLAVE_TIMEOUT: a SYNC_MASTER's slave did not acknowledge in time). */
int bk_core__ack_state(const struct bk_core *c, const struct bk_ack *a, uint64_t now);
/* Answers @a with the outcome @st of bk_core__ack_state(). */
void bk_core__ack_answer(struct bk_core *c, const struct bk_ack *a, int st, uint64_t now);
/* Answers @a now, or queues it on the pending-ack FIFO for the tick. */
void bk_core__ack_or_defer(struct bk_core *c, struct bk_ack *a);
/* The status a store put's return @rc answers. */
int32_t bk_core__put_status(struct bk_core *c, long rc);
/* Fills @m from a SEND or SEND_BACK request for queue @qid. */
void bk_core__msg_from(struct wire_msg *m, const struct dp_xreq *req, const struct bk_core *c,
		       int32_t qid);
/* SEND, SEND_BATCH (bk_send.c). */
int bk_core__do_send(struct bk_core *c, const struct dp_xreq *req);
/* bk_pull.c */
/* PULL (bk_pull.c). */
int bk_core__do_pull(struct bk_core *c, const struct dp_xreq *req);
/* Re-runs the parked pulls due at @now (the tick). Return: work done. */
unsigned bk_core__parks_scan(struct bk_core *c, uint64_t now);
/* Tell the remoting thread which held pulls' queues grew (bk_pull.c). Return: how many. */
unsigned bk_core__held_tell(struct bk_core *c, uint64_t now);
/* bk_offsets.c */
/* QUERY/UPDATE_OFFSET, GET_MAX/MIN_OFFSET (bk_offsets.c). */
int bk_core__do_offset(struct bk_core *c, const struct dp_xreq *req);
/* bk_send_back.c */
/* SEND_BACK (bk_send_back.c). */
int bk_core__do_send_back(struct bk_core *c, const struct dp_xreq *req);

#endif /* SP_BK_HANDLERS_H */
