/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_msgtype.h - message types a SEND can ask for by its properties and
 * sysFlag (RocketMQ's DELAY, the timer properties, transactional halves),
 * and which of them this broker takes. One check for the remoting port (with
 * the reason as the remark) and the cores (every SEND and batch item).
 */
#ifndef SP_BK_MSGTYPE_H
#define SP_BK_MSGTYPE_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

/**
 * bk_msg_refused() - why a message with these properties and sysFlag is
 * refused (a type not built yet: storing it would mishandle it), or NULL.
 * @delays: delay levels are on (messageDelayLevel) and this is not a batch
 *          item (RocketMQ refuses delays in a batch too).
 *
 * Context: any thread; no allocation. Return: a static sentence, or NULL.
 */
const char *bk_msg_refused(const char *props, size_t plen, int32_t sysflag, bool delays);

#endif /* SP_BK_MSGTYPE_H */
