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

/* What a SEND may ask for here (@allow), and what it asks for (*@asks). */
#define BK_MSG_DELAY 1u /* DELAY: delay levels on (messageDelayLevel), not a batch item */
#define BK_MSG_TIMER 2u /* a delivery time: timerWheelEnable, not a batch item */
#define BK_MSG_TX                                                                                  \
	4u /* a transactional half (TRAN_MSG=true or sysFlag PREPARED), not a batch item */

/**
 * bk_msg_refused() - why a message with these properties and sysFlag is
 * refused (a type not built yet or off: storing it would mishandle it; a
 * delay level and a delivery time at once), or NULL.
 * @allow: BK_MSG_* this broker takes for this message (RocketMQ refuses
 *         delays and timers in a batch too).
 * @asks:  may be NULL; set to the BK_MSG_* the message asks for.
 *
 * Context: any thread; no allocation. Return: a static sentence, or NULL.
 */
const char *bk_msg_refused(const char *props, size_t plen, int32_t sysflag, unsigned allow,
			   unsigned *asks);

#endif /* SP_BK_MSGTYPE_H */
