// SPDX-License-Identifier: Apache-2.0
/*
 * pull_consumer.c - read every queue of a topic with libsprocket's pull API,
 * from a consumer group's committed offset, and commit what was read.
 *
 *   cc pull_consumer.c $(pkg-config --cflags --libs sprocket) -o pull_consumer
 *   ./pull_consumer 127.0.0.1:9876 TopicTest GroupA
 *
 * Prints one line per message and stops when no queue has more.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sprocket/consumer.h>

int
main(int argc, char **argv)
{
	struct sp_client_cfg cfg = {0};
	struct sp_client *client;
	struct sp_mq *mqs;
	size_t nmq, total = 0;
	int rc;

	if (argc < 4) {
		fprintf(stderr, "usage: %s NAMESRV TOPIC GROUP\n", argv[0]);
		return 2;
	}
	cfg.namesrv = argv[1];
	rc = sp_client_create(&cfg, &client);
	if (rc == 0)
		rc = sp_topic_queues(client, argv[2], true, &mqs, &nmq); /* readable queues */
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", argv[2], sp_strerror(rc));
		return 1;
	}
	for (size_t q = 0; q < nmq; q++) {
		int64_t off;

		/* the group's committed offset, or the queue's first one */
		if (sp_query_offset(client, argv[3], &mqs[q], &off) != 0 || off < 0)
			if (sp_min_offset(client, &mqs[q], &off) != 0)
				continue;
		for (;;) {
			struct sp_pull_req req = {.offset = off, .group = argv[3]};
			struct sp_pull_result res;

			rc = sp_pull(client, &mqs[q], &req, &res);
			if (rc != 0) {
				fprintf(stderr, "pull %s/%d: %s\n", mqs[q].broker, mqs[q].queue_id,
					sp_strerror(rc));
				break;
			}
			for (size_t i = 0; i < res.n_msgs; i++)
				printf("%s %s/%d@%lld %.*s\n", res.msgs[i].msg_id, mqs[q].broker,
				       mqs[q].queue_id, (long long)res.msgs[i].queue_offset,
				       (int)res.msgs[i].body_len, (const char *)res.msgs[i].body);
			total += res.n_msgs;
			off = res.next_offset;
			rc = res.status;
			sp_pull_result_free(&res);
			if (rc != SP_PULL_FOUND && rc != SP_PULL_NO_MATCHED_MSG)
				break; /* nothing more in this queue */
		}
		if (sp_update_offset(client, argv[3], &mqs[q], off) != 0)
			fprintf(stderr, "commit %s/%d failed\n", mqs[q].broker, mqs[q].queue_id);
	}
	fprintf(stderr, "%zu messages\n", total);
	free(mqs);
	sp_client_destroy(client);
	return 0;
}
