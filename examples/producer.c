// SPDX-License-Identifier: Apache-2.0
/*
 * producer.c - send messages with libsprocket, one at a time, and print where
 * each was stored.
 *
 *   cc producer.c $(pkg-config --cflags --libs sprocket) -o producer
 *   ./producer 127.0.0.1:9876 TopicTest 10
 *
 * The client finds the topic's brokers through the NameServer and talks to
 * their dataplane cores over UDP (kernel sockets: no privileges needed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sprocket/producer.h>

int
main(int argc, char **argv)
{
	struct sp_client_cfg cfg = {0};
	struct sp_client *client;
	struct sp_producer *producer;
	long n = argc > 3 ? atol(argv[3]) : 10;
	int rc, failed = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s NAMESRV TOPIC [COUNT]\n", argv[0]);
		return 2;
	}
	cfg.namesrv = argv[1]; /* "host:port;host:port" */
	rc = sp_client_create(&cfg, &client);
	if (rc != 0) {
		fprintf(stderr, "client: %s\n", sp_strerror(rc));
		return 1;
	}
	rc = sp_producer_create(client, NULL, &producer); /* NULL: RocketMQ's defaults */
	if (rc != 0) {
		fprintf(stderr, "producer: %s\n", sp_strerror(rc));
		sp_client_destroy(client);
		return 1;
	}
	for (long i = 0; i < n; i++) {
		char body[64], key[32];
		struct sp_msg msg = {.topic = argv[2], .tags = "TagA", .keys = key, .body = body};
		struct sp_send_result res;

		msg.body_len = (size_t)snprintf(body, sizeof(body), "hello %ld", i);
		snprintf(key, sizeof(key), "order-%ld", i);
		/* 0: stored (res.status says whether also flushed / replicated in time) */
		rc = sp_producer_send(producer, &msg, &res);
		if (rc != 0) {
			fprintf(stderr, "send %ld: %s\n", i, sp_strerror(rc));
			failed++;
			continue;
		}
		printf("SEND_OK %s %s/%d@%lld\n", res.msg_id, res.broker, res.queue_id,
		       (long long)res.queue_offset);
	}
	sp_producer_destroy(producer);
	sp_client_destroy(client);
	return failed ? 1 : 0;
}
