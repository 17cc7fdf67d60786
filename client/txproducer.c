// SPDX-License-Identifier: Apache-2.0
/*
 * txproducer.c - libsprocket's transactional producer (producer.h), as
 * RocketMQ's TransactionMQProducer: the half goes over the dataplane like
 * any SEND (TRAN_MSG=true, PGROUP), END_TRANSACTION and the check-backs over
 * the broker's remoting port (the dataplane has no server-initiated
 * requests; a check-back is one).
 *
 * Threads: sp_tx_send() on the caller's, with one remoting connection per
 * broker for END_TRANSACTION (under `lock`); the checker thread owns a
 * second connection per broker, heartbeats the group on it every 20 s,
 * reads CHECK_TRANSACTION_STATE requests, runs the check callback and
 * answers with a oneway END_TRANSACTION (fromTransactionCheck=true).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"
#include "common/clock.h"
#include "sprocket/producer.h"
#include "sprocket/remoting.h"
#include "sprocket/route.h"
#include "wire/record.h"
#include "wire/remoting.h"

#define TX_BROKERS_MAX 64
#define TX_PROPS_MAX 64
#define TX_HEARTBEAT_MS 20000u
#define TX_CHECK_FRAME_MAX (8u << 20)

struct tx_broker {
	char name[SP_BROKER_MAX + 1];
	char addr[64];
	struct sp_rem *end;    /* END_TRANSACTION from sp_tx_send(), under lock */
	struct sp_rem *chk;    /* the checker thread's */
	uint64_t next_beat_ms; /* checker thread */
};

struct sp_tx_producer {
	struct sp_client *c;
	struct sp_producer *prod;
	char group[SP_NAME_MAX + 1];
	sp_tx_check_fn check;
	void *check_arg;
	uint32_t timeout_ms;
	pthread_mutex_t lock; /* brokers[], n_brokers, each `end` */
	struct tx_broker brokers[TX_BROKERS_MAX];
	size_t n_brokers;
	pthread_t checker;
	volatile int stop;
};

static struct tx_broker *
broker_find(struct sp_tx_producer *p, const char *name)
{
	for (size_t i = 0; i < p->n_brokers; i++)
		if (strcmp(p->brokers[i].name, name) == 0)
			return &p->brokers[i];
	return NULL;
}

/*
 * Every broker of @topic's route (as the producer sees it) gets an entry,
 * so the checker thread heartbeats the group to each before a half is sent
 * there: a check-back can reach this process even if it dies before its
 * END_TRANSACTION and comes back. Caller holds lock.
 */
static void
brokers_learn(struct sp_tx_producer *p, const char *topic)
{
	struct sp__topic *t;

	if (sp__topic_get_pub(p->c, topic, &t) != 0)
		return;
	for (uint32_t i = 0; i < t->route->n_brokers && p->n_brokers < TX_BROKERS_MAX; i++) {
		const struct sp_route_broker *rb = &t->route->brokers[i];
		struct tx_broker *b;

		if (rb->addr[0] == '\0' || broker_find(p, rb->name) != NULL)
			continue;
		b = &p->brokers[p->n_brokers];
		memset(b, 0, sizeof(*b));
		snprintf(b->name, sizeof(b->name), "%s", rb->name);
		snprintf(b->addr, sizeof(b->addr), "%s", rb->addr);
		p->n_brokers++;
	}
	sp__topic_put(p->c, t);
}

/* END_TRANSACTION on @rem. Return: 0 or -errno (the connection is then closed by the caller). */
static int
end_tx(struct sp_tx_producer *p, struct sp_rem *rem, int64_t qoff, int64_t phys, const char *uniq,
       enum sp_tx_state st, bool from_check)
{
	char q[24], ph[24], k[8];
	struct wire_rem_cmd req = {.code = WIRE_REQ_END_TRANSACTION,
				   .language = WIRE_LANG_CPP,
				   .version = WIRE_REM_VERSION_V4_9_8,
				   .serialize = WIRE_REM_JSON};
	struct sp_rem_resp resp;
	const char *kv[][2] = {{"producerGroup", p->group},
			       {"tranStateTableOffset", q},
			       {"commitLogOffset", ph},
			       {"commitOrRollback", k},
			       {"fromTransactionCheck", from_check ? "true" : "false"},
			       {"msgId", uniq},
			       {"transactionId", uniq}};
	int rc;

	snprintf(q, sizeof(q), "%" PRId64, qoff);
	snprintf(ph, sizeof(ph), "%" PRId64, phys);
	snprintf(k, sizeof(k), "%d", (int)st);
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		rc = wire_rem_ext_add(&req, kv[i][0], kv[i][1]);
		if (rc != 0)
			return rc;
	}
	/* From a check-back oneway, as RocketMQ; from a send, answered: the caller learns it took */
	if (from_check)
		req.flag = WIRE_REM_FLAG_ONEWAY;
	rc = sp_rem_call(rem, &req, NULL, 0, p->timeout_ms, 0, &resp);
	if (rc == 0 && !from_check && resp.cmd.code != WIRE_RSP_SUCCESS)
		rc = SP_ERR_STATUS(resp.cmd.code);
	sp_rem_resp_free(&resp);
	return rc;
}

int
sp_tx_send(struct sp_tx_producer *p, const struct sp_msg *msg, sp_tx_exec_fn exec, void *arg,
	   struct sp_send_result *res, enum sp_tx_state *state)
{
	struct sp_prop props[TX_PROPS_MAX + 2];
	struct sp_msg m;
	struct tx_broker *b;
	int rc;

	if (msg == NULL || exec == NULL || msg->delay_level != 0 || msg->deliver_ms != 0 ||
	    msg->n_props > TX_PROPS_MAX)
		return -EINVAL;
	m = *msg;
	for (size_t i = 0; i < msg->n_props; i++)
		props[i] = msg->props[i];
	props[msg->n_props] = (struct sp_prop){.key = "TRAN_MSG", .val = "true"};
	props[msg->n_props + 1] = (struct sp_prop){.key = "PGROUP", .val = p->group};
	m.props = props;
	m.n_props = msg->n_props + 2;
	pthread_mutex_lock(&p->lock);
	brokers_learn(p, msg->topic);
	pthread_mutex_unlock(&p->lock);
	rc = sp_producer_send(p->prod, &m, res);
	if (rc != 0)
		return rc;
	*state = exec(arg, msg, res);
	if (*state != SP_TX_COMMIT && *state != SP_TX_ROLLBACK)
		return 0; /* UNKNOWN: the broker checks back */
	pthread_mutex_lock(&p->lock);
	b = broker_find(p, res->broker);
	if (b == NULL) {
		brokers_learn(p, msg->topic); /* a broker the route gained meanwhile */
		b = broker_find(p, res->broker);
	}
	rc = b == NULL ? -ENOENT : 0;
	if (rc == 0 && b->end == NULL)
		rc = sp_rem_connect(b->addr, p->timeout_ms, &b->end);
	if (rc == 0) {
		rc = end_tx(p, b->end, res->queue_offset, res->phys_offset, res->msg_id, *state,
			    false);
		if (rc != 0 && rc > -4096 && rc != SP_ERR_STATUS(WIRE_RSP_SYSTEM_ERROR)) {
			sp_rem_close(b->end);
			b->end = NULL;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* A CHECK_TRANSACTION_STATE on @b's connection: ask the application, answer the broker. */
static void
on_check(struct sp_tx_producer *p, struct tx_broker *b, const struct wire_rem_cmd *q)
{
	const struct wire_kv *tkv = wire_rem_ext_get(q, "transactionId");
	const char *tid = tkv != NULL ? tkv->val : "";
	struct sp_msg_ext m;
	int64_t qo, ph;
	char *strbuf;
	size_t cap = sp__rec_strbuf_size(q->body_len, 1);
	enum sp_tx_state st;

	if (wire_rem_ext_i64(q, "tranStateTableOffset", &qo) != 0 ||
	    wire_rem_ext_i64(q, "commitLogOffset", &ph) != 0)
		return;
	strbuf = malloc(cap);
	if (strbuf == NULL)
		return;
	if (sp__records_decode(q->body, q->body_len, NULL, &m, 1, strbuf, cap) == 1) {
		st = p->check(p->check_arg, &m);
		if ((st == SP_TX_COMMIT || st == SP_TX_ROLLBACK) &&
		    end_tx(p, b->chk, qo, ph, tid, st, true) != 0) {
			sp_rem_close(b->chk);
			b->chk = NULL;
		}
	}
	free(strbuf);
}

/* HEART_BEAT naming the group on @b's checker connection. Return: 0 or -errno. */
static int
heartbeat(struct sp_tx_producer *p, struct tx_broker *b)
{
	/* Oneway: waiting for its answer would skip a check-back the broker pushes meanwhile */
	struct wire_rem_cmd req = {.code = WIRE_REQ_HEART_BEAT,
				   .flag = WIRE_REM_FLAG_ONEWAY,
				   .language = WIRE_LANG_CPP,
				   .version = WIRE_REM_VERSION_V4_9_8,
				   .serialize = WIRE_REM_JSON};
	struct sp_rem_resp resp;
	char body[512];
	int n, rc;

	n = snprintf(body, sizeof(body),
		     "{\"clientID\":\"%s\",\"producerDataSet\":[{\"groupName\":\"%s\"}],"
		     "\"consumerDataSet\":[]}",
		     p->c->client_id, p->group);
	if (n < 0 || (size_t)n >= sizeof(body))
		return -ENAMETOOLONG;
	rc = sp_rem_call(b->chk, &req, body, (size_t)n, p->timeout_ms, 0, &resp);
	sp_rem_resp_free(&resp);
	return rc;
}

static void *
checker_main(void *arg)
{
	struct sp_tx_producer *p = arg;

	pthread_setname_np(pthread_self(), "sp-tx-check");
	while (!p->stop) {
		size_t n;
		bool idle = true;

		pthread_mutex_lock(&p->lock);
		n = p->n_brokers; /* entries are never removed or moved */
		pthread_mutex_unlock(&p->lock);
		for (size_t i = 0; i < n && !p->stop; i++) {
			struct tx_broker *b = &p->brokers[i];
			uint64_t now = (uint64_t)clk_wall_ms();
			struct sp_rem_resp resp;
			int rc;

			if (b->chk == NULL && sp_rem_connect(b->addr, p->timeout_ms, &b->chk) != 0)
				continue;
			if (now >= b->next_beat_ms) {
				if (heartbeat(p, b) != 0) {
					sp_rem_close(b->chk);
					b->chk = NULL;
					continue;
				}
				b->next_beat_ms = now + TX_HEARTBEAT_MS;
			}
			rc = sp_rem_next(b->chk, 20, TX_CHECK_FRAME_MAX, &resp);
			if (rc == 0) {
				idle = false;
				if (!(resp.cmd.flag & WIRE_REM_FLAG_RESPONSE) &&
				    resp.cmd.code == WIRE_REQ_CHECK_TRANSACTION_STATE)
					on_check(p, b, &resp.cmd);
				sp_rem_resp_free(&resp);
			} else if (rc != -ETIMEDOUT) {
				sp_rem_close(b->chk);
				b->chk = NULL;
			}
		}
		if (idle && n == 0) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000L};

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int
sp_tx_producer_create(struct sp_client *c, const struct sp_tx_producer_cfg *cfg,
		      struct sp_tx_producer **out)
{
	struct sp_producer_cfg pc = {.send_timeout_ms = cfg ? cfg->send_timeout_ms : 0,
				     .retry_times = 2};
	struct sp_tx_producer *p;
	int rc;

	if (c == NULL || cfg == NULL || cfg->group == NULL || cfg->group[0] == '\0' ||
	    strlen(cfg->group) > SP_NAME_MAX || cfg->check == NULL)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->c = c;
	snprintf(p->group, sizeof(p->group), "%s", cfg->group);
	p->check = cfg->check;
	p->check_arg = cfg->check_arg;
	p->timeout_ms = cfg->send_timeout_ms ? cfg->send_timeout_ms : 3000;
	pc.group = p->group;
	rc = sp_producer_create(c, &pc, &p->prod);
	if (rc != 0) {
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	rc = pthread_create(&p->checker, NULL, checker_main, p);
	if (rc != 0) {
		sp_producer_destroy(p->prod);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return -rc;
	}
	*out = p;
	return 0;
}

void
sp_tx_producer_destroy(struct sp_tx_producer *p)
{
	if (p == NULL)
		return;
	p->stop = 1;
	pthread_join(p->checker, NULL);
	for (size_t i = 0; i < p->n_brokers; i++) {
		sp_rem_close(p->brokers[i].end);
		sp_rem_close(p->brokers[i].chk);
	}
	sp_producer_destroy(p->prod);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
