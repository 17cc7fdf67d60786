// SPDX-License-Identifier: Apache-2.0
/*
 * push_consumer.c - a push consumer: libsprocket long-polls the queues and
 * calls back on its consume threads; offsets are committed for the group.
 *
 *   cc push_consumer.c $(pkg-config --cflags --libs sprocket) -pthread -o push_consumer
 *   ./push_consumer 127.0.0.1:9876 TopicTest GroupB 10
 *
 * Stops after COUNT messages (or 30 s without one).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sprocket/consumer.h>

static atomic_long consumed;

static enum sp_consume_status
on_message(void *arg, const struct sp_mq *mq, const struct sp_msg_ext *m)
{
	(void)arg;
	/* called on the consume threads: at once for different queues */
	printf("%s %s/%d@%lld %.*s\n", m->msg_id, mq->broker, mq->queue_id,
	       (long long)m->queue_offset, (int)m->body_len, (const char *)m->body);
	fflush(stdout);
	atomic_fetch_add(&consumed, 1);
	return SP_CONSUME_SUCCESS; /* SP_CONSUME_LATER: delivered again later */
}

int
main(int argc, char **argv)
{
	struct sp_client_cfg cfg = {0};
	struct sp_client *client;
	struct sp_push *push;
	long want = argc > 4 ? atol(argv[4]) : 10, last = 0;
	int rc, idle = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s NAMESRV TOPIC GROUP [COUNT]\n", argv[0]);
		return 2;
	}
	cfg.namesrv = argv[1];
	rc = sp_client_create(&cfg, &client);
	if (rc == 0) {
		struct sp_push_cfg pc = {
			.group = argv[3],
			.topic = argv[2],
			.fn = on_message,
			.from = SP_FROM_FIRST}; /* a new group starts at the first */

		rc = sp_push_start(client, &pc, &push);
	}
	if (rc != 0) {
		fprintf(stderr, "push consumer: %s\n", sp_strerror(rc));
		return 1;
	}
	while (atomic_load(&consumed) < want && idle < 300) {
		usleep(100 * 1000);
		idle = atomic_load(&consumed) == last ? idle + 1 : 0;
		last = atomic_load(&consumed);
	}
	sp_push_stop(push); /* commits the offsets of what was consumed */
	sp_client_destroy(client);
	fprintf(stderr, "%ld messages\n", (long)atomic_load(&consumed));
	return atomic_load(&consumed) >= want ? 0 : 1;
}
