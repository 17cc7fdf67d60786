// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_route.c - sp_route_parse() on arbitrary bytes: the TopicRouteData a
 * NameServer (or anything answering on its port) sends to a client.
 *
 * Oracles beyond "no crash, no overread" (ASan): an error is -EBADMSG or
 * -ENOMEM and leaves *out alone; a parsed route is consistent (every queue
 * names a broker it holds, names are NUL-terminated within their arrays, a
 * dataplane endpoint fits the port range and every core a queue maps to is
 * one the endpoint has), and sp_route_queue_core() stays within it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sprocket/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_route(const struct sp_route *r)
{
	for (uint32_t i = 0; i < r->n_brokers; i++) {
		const struct sp_route_broker *b = &r->brokers[i];

		if (memchr(b->name, '\0', sizeof(b->name)) == NULL || b->name[0] == '\0' ||
		    memchr(b->cluster, '\0', sizeof(b->cluster)) == NULL ||
		    memchr(b->addr, '\0', sizeof(b->addr)) == NULL)
			abort();
		if (b->has_dp &&
		    (b->dp_cores == 0 || b->dp_port == 0 || b->dp_port + b->dp_cores - 1 > 65535))
			abort();
	}
	for (uint32_t i = 0; i < r->n_queues; i++) {
		const struct sp_route_queue *q = &r->queues[i];
		const struct sp_route_broker *b;
		uint32_t nq;

		if (q->broker >= r->n_brokers || (q->n_cores == 0) != (q->queue_cores == NULL))
			abort();
		b = &r->brokers[q->broker];
		nq = q->read_queues > q->write_queues ? q->read_queues : q->write_queues;
		if (nq < q->n_cores)
			nq = q->n_cores;
		for (uint32_t k = 0; k <= nq && k < 4096; k++) {
			uint16_t c = sp_route_queue_core(r, q, k);

			if (b->has_dp ? c >= b->dp_cores : (k >= q->n_cores && c != 0))
				abort();
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sp_route *r = (struct sp_route *)(uintptr_t)1;
	int rc = sp_route_parse((const char *)data, size, &r);

	if (rc != 0) {
		if ((rc != -EBADMSG && rc != -ENOMEM) || r != (struct sp_route *)(uintptr_t)1)
			abort();
		return 0;
	}
	check_route(r);
	sp_route_free(r);
	return 0;
}
