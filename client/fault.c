// SPDX-License-Identifier: Apache-2.0
/*
 * fault.c - latency fault tolerance: which brokers a producer avoids for now.
 *
 * RocketMQ's MQFaultStrategy, simplified. Every send outcome updates its
 * broker's entry: a failure (a timeout, a dead session, SYSTEM_BUSY...)
 * makes the broker unavailable for fail_avoid_ms; a success slower than
 * 550 ms makes it unavailable for RocketMQ's notAvailableDuration of that
 * latency (30 s at 550 ms ... 600 s at 15 s), scaled by fail_avoid_ms / 30 s;
 * a fast success makes it available at once. The producer prefers
 * available brokers and, when every broker is avoided, the one whose
 * avoidance ends first (RocketMQ's pickOneAtLeast), so it never refuses to
 * send for lack of a perfect broker.
 *
 * Pure logic over a small fixed table (the caller holds its lock): the
 * table keeps SP__FAULT_MAX brokers and reuses the entry that expired
 * longest ago when full.
 */
#include <string.h>

#include "client_priv.h"

static const uint32_t latency_max_ms[] = {50, 100, 550, 1000, 2000, 3000, 15000};
static const uint32_t avoid_ms[] = {0, 0, 30000, 60000, 120000, 180000, 600000};

void
sp__fault_init(struct sp__fault *f, uint32_t fail_avoid_ms)
{
	memset(f, 0, sizeof(*f));
	f->fail_avoid_ms = fail_avoid_ms ? fail_avoid_ms : 30000;
}

static struct sp__fault_ent *
find(const struct sp__fault *f, const char *broker)
{
	for (unsigned i = 0; i < f->n; i++)
		if (strcmp(f->ent[i].broker, broker) == 0)
			return (struct sp__fault_ent *)&f->ent[i];
	return NULL;
}

static uint64_t
duration_ms(const struct sp__fault *f, uint32_t latency_ms)
{
	for (int i = (int)ARRAY_SIZE(latency_max_ms) - 1; i >= 0; i--)
		if (latency_ms >= latency_max_ms[i])
			return (uint64_t)avoid_ms[i] * f->fail_avoid_ms / 30000;
	return 0;
}

void
sp__fault_update(struct sp__fault *f, const char *broker, uint32_t latency_ms, bool failed,
		 uint64_t now_ns)
{
	struct sp__fault_ent *e = find(f, broker);
	uint64_t ms = failed ? f->fail_avoid_ms : duration_ms(f, latency_ms);

	if (!e) {
		if (!ms)
			return; /* nothing to remember about a healthy unknown broker */
		if (f->n < SP__FAULT_MAX) {
			e = &f->ent[f->n++];
		} else {
			e = &f->ent[0];
			for (unsigned i = 1; i < f->n; i++)
				if (f->ent[i].until_ns < e->until_ns)
					e = &f->ent[i];
		}
		strncpy(e->broker, broker, SP_BROKER_MAX);
		e->broker[SP_BROKER_MAX] = '\0';
	}
	e->last_latency_ms = latency_ms;
	e->until_ns = ms ? now_ns + ms * 1000000ull : 0;
}

bool
sp__fault_is_available(const struct sp__fault *f, const char *broker, uint64_t now_ns)
{
	const struct sp__fault_ent *e = find(f, broker);

	return !e || now_ns >= e->until_ns;
}

uint64_t
sp__fault_until(const struct sp__fault *f, const char *broker)
{
	const struct sp__fault_ent *e = find(f, broker);

	return e ? e->until_ns : 0;
}
