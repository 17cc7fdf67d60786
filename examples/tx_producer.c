// SPDX-License-Identifier: Apache-2.0
/*
 * tx_producer.c - transactional messages: a half message is stored but not
 * delivered until the local transaction commits; the broker asks the
 * producer group (check-back) when it never heard the outcome.
 *
 *   cc tx_producer.c $(pkg-config --cflags --libs sprocket) -o tx_producer
 *   ./tx_producer 127.0.0.1:9876 TopicTest
 *
 * Sends two: "commit" (delivered) and "rollback" (never delivered).
 */
#include <stdio.h>
#include <string.h>

#include <sprocket/producer.h>

/* The local transaction, run once the half is stored. */
static enum sp_tx_state
execute(void *arg, const struct sp_msg *msg, const struct sp_send_result *half)
{
	(void)arg;
	(void)half;
	return msg->body_len == 6 && memcmp(msg->body, "commit", 6) == 0 ? SP_TX_COMMIT
									 : SP_TX_ROLLBACK;
}

/* The broker's check-back for a half whose outcome it never got. */
static enum sp_tx_state
check(void *arg, const struct sp_msg_ext *half)
{
	(void)arg;
	(void)half;
	return SP_TX_ROLLBACK;
}

int
main(int argc, char **argv)
{
	struct sp_client_cfg cfg = {0};
	struct sp_tx_producer_cfg tc = {.group = "example_tx_group", .check = check};
	struct sp_client *client;
	struct sp_tx_producer *tx;
	const char *bodies[] = {"commit", "rollback"};
	int rc, failed = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s NAMESRV TOPIC\n", argv[0]);
		return 2;
	}
	cfg.namesrv = argv[1];
	rc = sp_client_create(&cfg, &client);
	if (rc == 0)
		rc = sp_tx_producer_create(client, &tc, &tx);
	if (rc != 0) {
		fprintf(stderr, "transactional producer: %s\n", sp_strerror(rc));
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		struct sp_msg msg = {
			.topic = argv[2], .body = bodies[i], .body_len = strlen(bodies[i])};
		struct sp_send_result res;
		enum sp_tx_state st;

		rc = sp_tx_send(tx, &msg, execute, NULL, &res, &st);
		if (rc != 0) {
			fprintf(stderr, "%s: %s\n", bodies[i], sp_strerror(rc));
			failed++;
			continue;
		}
		printf("%s %s %s\n", bodies[i], res.msg_id,
		       st == SP_TX_COMMIT     ? "COMMIT"
		       : st == SP_TX_ROLLBACK ? "ROLLBACK"
					      : "UNKNOWN");
	}
	sp_tx_producer_destroy(tx);
	sp_client_destroy(client);
	return failed ? 1 : 0;
}
