// SPDX-License-Identifier: Apache-2.0
/*
 * bk_sync.c - a slave's metadata sync (docs/replication.md), as RocketMQ's
 * SlaveSynchronize: every few seconds the slave asks its master, over the
 * master's remoting port, for its topic configs (GET_ALL_TOPIC_CONFIG 21)
 * and committed consumer offsets (GET_ALL_CONSUMER_OFFSET 43). The answers
 * wait in a mailbox; the control thread applies them (topics created or
 * updated, offsets raised), since it is the one writer of the topic table.
 *
 * The master's address is the masterAddr of the NameServer's answer to the
 * slave's registration, so the sync follows a master that moved. Delay
 * offsets (45) and subscription groups (201) have no counterpart in
 * sprocket yet and are not asked for.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bk_sync.h"
#include "common/atomic.h"
#include "common/log.h"
#include "control/breg.h"
#include "sprocket/remoting.h"
#include "wire/remoting.h"

#define SYNC_TAG "broker.sync"
#define SYNC_TIMEOUT_MS 3000u
#define SYNC_CONNECT_MS 1000u /* a stop waits for a connect in progress: keep it short */
#define SYNC_FRAME_MAX (64u << 20)

struct bk_sync {
	struct ctl_breg *breg;
	uint32_t period_ms;
	pthread_t thr;
	_Atomic bool stop;
	/* the thread's; set and closed under mu, so a stop can wake a call on it */
	struct sp_rem *conn;
	char conn_addr[CTL_BREG_ADDR_MAX];
	/* under mu: newest answers, not yet taken */
	pthread_mutex_t mu;
	char *json[BK_SYNC_KINDS];
	size_t len[BK_SYNC_KINDS];
};

/* RocketMQ's slave sync asks these, in this order (SlaveSynchronize). */
static const int32_t sync_codes[BK_SYNC_KINDS] = {
	[BK_SYNC_TOPICS] = WIRE_REQ_GET_ALL_TOPIC_CONFIG,
	[BK_SYNC_OFFSETS] = WIRE_REQ_GET_ALL_CONSUMER_OFFSET,
	[BK_SYNC_DELAYS] = WIRE_REQ_GET_ALL_DELAY_OFFSET,
	[BK_SYNC_GROUPS] = WIRE_REQ_GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
};

/* Ask @code; on SUCCESS put a copy of the body in *@slot (under mu). Return: 0, -errno. */
static int
fetch(struct bk_sync *s, int32_t code, char **slot, size_t *slot_len)
{
	struct wire_rem_cmd *cmd = calloc(1, sizeof(*cmd));
	struct sp_rem_resp resp;
	char *body;
	int rc;

	if (cmd == NULL)
		return -ENOMEM;
	cmd->code = code;
	cmd->version = WIRE_REM_VERSION_V4_9_8;
	cmd->language = WIRE_LANG_JAVA;
	cmd->serialize = WIRE_REM_JSON;
	rc = sp_rem_call(s->conn, cmd, NULL, 0, SYNC_TIMEOUT_MS, SYNC_FRAME_MAX, &resp);
	free(cmd);
	if (rc != 0)
		return rc;
	if (resp.cmd.code != WIRE_RSP_SUCCESS) {
		log_warn_ratelimited(SYNC_TAG, "master %s answered request %d with code %d",
				     s->conn_addr, code, resp.cmd.code);
		sp_rem_resp_free(&resp);
		return 0;
	}
	body = malloc(resp.cmd.body_len + 1u);
	if (body == NULL) {
		sp_rem_resp_free(&resp);
		return -ENOMEM;
	}
	memcpy(body, resp.cmd.body, resp.cmd.body_len);
	body[resp.cmd.body_len] = '\0';
	pthread_mutex_lock(&s->mu);
	free(*slot);
	*slot = body;
	*slot_len = resp.cmd.body_len;
	pthread_mutex_unlock(&s->mu);
	sp_rem_resp_free(&resp);
	return 0;
}

/* Close the connection, or put @conn in its place; under mu, against bk_sync_stop()'s wake. */
static void
conn_set(struct bk_sync *s, struct sp_rem *conn)
{
	pthread_mutex_lock(&s->mu);
	if (s->conn != NULL)
		sp_rem_close(s->conn);
	s->conn = conn;
	if (conn != NULL && atomic_load_relaxed(&s->stop))
		sp_rem_wake(conn); /* the stop came during the connect */
	pthread_mutex_unlock(&s->mu);
}

static void
round_once(struct bk_sync *s)
{
	char ha[CTL_BREG_ADDR_MAX];
	char addr[CTL_BREG_ADDR_MAX];
	int rc;

	if (!ctl_breg_master(s->breg, ha, sizeof(ha), addr, sizeof(addr)))
		return;
	if (s->conn != NULL && strcmp(addr, s->conn_addr) != 0)
		conn_set(s, NULL);
	if (s->conn == NULL) {
		struct sp_rem *conn = NULL;

		rc = sp_rem_connect(addr, SYNC_CONNECT_MS, &conn);
		if (rc == 0 && (rc = ctl_breg_credentials(s->breg, conn)) != 0)
			sp_rem_close(conn);
		if (rc != 0) {
			log_warn_ratelimited(SYNC_TAG, "cannot reach master %s: %s", addr,
					     strerror(-rc));
			return;
		}
		memcpy(s->conn_addr, addr, sizeof(addr));
		conn_set(s, conn);
	}
	rc = 0;
	for (int k = 0; k < BK_SYNC_KINDS && rc == 0; k++)
		rc = fetch(s, sync_codes[k], &s->json[k], &s->len[k]);
	if (rc != 0) {
		if (!atomic_load_relaxed(&s->stop))
			log_warn_ratelimited(SYNC_TAG, "sync with master %s: %s", s->conn_addr,
					     strerror(-rc));
		conn_set(s, NULL);
	}
}

static void *
sync_main(void *arg)
{
	struct bk_sync *s = arg;

	while (!atomic_load_relaxed(&s->stop)) {
		round_once(s);
		for (uint32_t t = 0; t < s->period_ms && !atomic_load_relaxed(&s->stop); t += 50) {
			struct timespec ts = {.tv_nsec = 50 * 1000000L};

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int
bk_sync_start(struct ctl_breg *breg, uint32_t period_ms, struct bk_sync **out)
{
	struct bk_sync *s = calloc(1, sizeof(*s));
	int err;

	if (s == NULL)
		return -ENOMEM;
	s->breg = breg;
	s->period_ms = period_ms;
	pthread_mutex_init(&s->mu, NULL);
	err = pthread_create(&s->thr, NULL, sync_main, s);
	if (err != 0) {
		pthread_mutex_destroy(&s->mu);
		free(s);
		return -err;
	}
	*out = s;
	return 0;
}

void
bk_sync_take(struct bk_sync *s, enum bk_sync_kind k, char **json, size_t *len)
{
	pthread_mutex_lock(&s->mu);
	*json = s->json[k];
	*len = s->len[k];
	s->json[k] = NULL;
	pthread_mutex_unlock(&s->mu);
}

void
bk_sync_stop(struct bk_sync *s)
{
	if (s == NULL)
		return;
	atomic_store_relaxed(&s->stop, true);
	/* a call waiting on a silent master fails now, not at its timeout (a promotion waits) */
	pthread_mutex_lock(&s->mu);
	if (s->conn != NULL)
		sp_rem_wake(s->conn);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thr, NULL);
	if (s->conn)
		sp_rem_close(s->conn);
	for (int k = 0; k < BK_SYNC_KINDS; k++)
		free(s->json[k]);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
