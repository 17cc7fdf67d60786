// SPDX-License-Identifier: Apache-2.0
/*
 * bk_msgtype.c - which message types a SEND may ask for (bk_msgtype.h).
 *
 * RocketMQ marks them in the properties: DELAY=n (delayTimeLevel),
 * __STARTDELIVERTIME (Aliyun ONS, ali-ons setStartDeliverTime), RocketMQ 5's
 * TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS, and TRAN_MSG=true with
 * the prepared bit of sysFlag for a transactional half. Delay levels are
 * built (bk_delay.c) except in a batch; the others are not yet
 * (docs/messages.md): storing such a message as a plain one would deliver it
 * at once or never, so each is refused.
 */
#include "bk_msgtype.h"

#include <stdbool.h>
#include <string.h>

#include "wire/record.h"

/* DELAY=0 (or anything not a positive level) is a plain message, as in RocketMQ. */
static bool
delay_asked(const char *props, size_t plen)
{
	uint64_t level;

	return wire_props_get_uint(props, plen, "DELAY", &level) && level > 0;
}

const char *
bk_msg_refused(const char *props, size_t plen, int32_t sysflag, unsigned allow, unsigned *asks)
{
	static const char *const timers[] = {"__STARTDELIVERTIME", "TIMER_DELIVER_MS",
					     "TIMER_DELAY_SEC", "TIMER_DELAY_MS", NULL};
	unsigned ask = 0;
	const char *v;
	size_t vl;

	if (asks != NULL)
		*asks = 0;
	if ((sysflag & WIRE_SYSFLAG_TX_MASK) == WIRE_SYSFLAG_TX_COMMIT ||
	    (sysflag & WIRE_SYSFLAG_TX_MASK) == WIRE_SYSFLAG_TX_ROLLBACK)
		return "a SEND cannot commit or roll back a transaction (sysFlag): END_TRANSACTION "
		       "does; nothing was stored";
	/* RocketMQ decides by the property; the sysFlag alone says the same */
	if ((sysflag & WIRE_SYSFLAG_TX_MASK) == WIRE_SYSFLAG_TX_PREPARED ||
	    (wire_props_get(props, plen, "TRAN_MSG", &v, &vl) && vl == 4 &&
	     memcmp(v, "true", 4) == 0))
		ask |= BK_MSG_TX;
	if (delay_asked(props, plen))
		ask |= BK_MSG_DELAY;
	for (int i = 0; timers[i] != NULL && !(ask & BK_MSG_TIMER); i++)
		if (wire_props_get(props, plen, timers[i], &v, &vl))
			ask |= BK_MSG_TIMER;
	if (asks != NULL)
		*asks = ask;
	if ((ask & BK_MSG_DELAY) && !(allow & BK_MSG_DELAY))
		return "delayed messages (DELAY, delayTimeLevel) are not taken in a batch, or with "
		       "messageDelayLevel empty; nothing was stored";
	if ((ask & BK_MSG_TIMER) && !(allow & BK_MSG_TIMER))
		return "messages with a delivery time (__STARTDELIVERTIME, TIMER_*) are not taken "
		       "in a batch, or with timerWheelEnable=false; nothing was stored";
	if ((ask & BK_MSG_TX) && !(allow & BK_MSG_TX))
		return "transactional messages are not taken in a batch (nor by a slave); nothing "
		       "was stored";
	if ((ask & BK_MSG_TX) && (ask & (BK_MSG_DELAY | BK_MSG_TIMER)))
		return "a transactional message cannot have a delay level or a delivery time; "
		       "nothing was stored";
	if (ask == (BK_MSG_DELAY | BK_MSG_TIMER))
		return "a message asks for both a delay level (DELAY) and a delivery time "
		       "(__STARTDELIVERTIME, TIMER_*): one or the other; nothing was stored";
	return NULL;
}
