// SPDX-License-Identifier: Apache-2.0
/*
 * bk_tailback.c - at start, a SYNC_MASTER (static roles) takes back from
 * its slave what the slave holds past this master's log, before it takes
 * a write (docs/replication.md, "A master that lost an acknowledged tail").
 *
 * A SYNC_MASTER answers SEND_OK once its slave holds the bytes. When its
 * own disk then loses a tail it had synced (a disk cache that lied, a
 * zeroed block), the slave holds acknowledged messages the master lacks.
 * Before the cores start - so the store has no other writer - this asks a
 * NameServer for the group's route; while no master is registered it names
 * the lowest-id slave's dataplane endpoint. One session per shard to that
 * slave's core (bk_follow_recover_start()) copies the slave's records past
 * our end into our log with the checks a slave applies to a master's
 * (store_repl_append()), indexes them and publishes them. A slave with
 * nothing more ends it at once. Only then do the cores start and the broker
 * register; its slave, which had refused to cut those bytes, follows again.
 *
 * Runs on the control thread at start; blocks (NameServer, sessions) for at
 * most haTailRecoverTimeout. It never stops the start: when it cannot ask
 * or finish in time it says so and the broker goes on with what it has
 * (the slave keeps its copy and says that too).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl/bk_ctl.h"
#include "bk_follow.h"
#include "common/clock.h"
#include "common/log.h"
#include "sprocket/route.h"

#define TB_TAG "broker.repl"
#define TB_ROUTE_TIMEOUT_MS 3000u
#define TB_POLL_MS 20u

static void
nap_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/*
 * The dataplane endpoint of our group's slave, from a route of @topic while
 * no master of the group is registered. Return: 1 found (@addr), 0 none to
 * ask (logged why), -ETIMEDOUT no NameServer answered before @deadline_ns.
 */
static int
slave_of_group(struct bk_ctl *x, const char *topic, uint64_t deadline_ns, char *addr, size_t cap)
{
	const char *ns = cfg_get_str(x->cfg, "namesrvAddr");
	const char *name = x->bk.conf.broker_name;
	struct sp_route *r = NULL;
	int err;

	for (;;) {
		err = sp_route_fetch(ns, topic, TB_ROUTE_TIMEOUT_MS, &r);
		if (err != -ETIMEDOUT && err != -ECONNREFUSED && err != -EAGAIN)
			break;
		if (clk_mono_ns() >= deadline_ns)
			return -ETIMEDOUT;
		nap_ms(200);
	}
	if (err == -ENOENT) {
		log_info(TB_TAG,
			 "no broker of %s is registered (topic %s has no route): no slave "
			 "to take a lost tail back from",
			 name, topic);
		return 0;
	}
	if (err != 0) {
		log_warn(TB_TAG, "asking the NameServers for %s's slave: %s", name, strerror(-err));
		return 0;
	}
	err = 0;
	for (uint32_t i = 0; i < r->n_brokers; i++) {
		const struct sp_route_broker *b = &r->brokers[i];
		char ip[INET_ADDRSTRLEN];

		if (strcmp(b->name, name) != 0)
			continue;
		if (!b->has_dp) {
			log_info(TB_TAG, "no slave of %s is registered: nothing to take back",
				 name);
		} else if (!b->dp_is_slave) {
			log_warn(TB_TAG,
				 "the NameServer lists a master of %s already (%s): not asking a "
				 "slave for a lost tail",
				 name, b->addr);
		} else if (inet_ntop(AF_INET, &b->dp_ip, ip, sizeof(ip)) != NULL) {
			snprintf(addr, cap, "%s:%u", ip, (unsigned)b->dp_port);
			err = 1;
		}
		break;
	}
	sp_route_free(r);
	return err;
}

/* Wait until the flusher has made every shard durable up to its end (SYNC_FLUSH). */
static void
wait_flushed(struct bk_ctl *x, uint64_t deadline_ns)
{
	for (uint32_t i = 0; i < x->bk.ncores; i++) {
		const struct clog *c = store_clog(x->bk.store, i);

		while (clog_flushed(c) < clog_written(c) && clk_mono_ns() < deadline_ns)
			nap_ms(TB_POLL_MS);
	}
}

void
bk_tailback(struct bk_ctl *x)
{
	uint32_t ms = (uint32_t)cfg_get_int(x->cfg, "haTailRecoverTimeout");
	uint64_t deadline = clk_mono_ns() + (uint64_t)ms * 1000000ull;
	struct bk_follow *f = NULL;
	uint64_t before = 0, after = 0;
	char slave[64];
	int st;

	if (x->bk.conf.role != BK_ROLE_SYNC_MASTER || x->ha != NULL || ms == 0 ||
	    cfg_get_str(x->cfg, "namesrvAddr")[0] == '\0' || x->nreg == 0)
		return;
	if (strcmp(cfg_get_str(x->cfg, "dataplaneBackend"), "dpdk") == 0) {
		log_warn(TB_TAG,
			 "a SYNC_MASTER on dpdk does not ask its slave for a lost tail yet "
			 "(its slave keeps what it holds past this master's log and says so)");
		return;
	}
	st = slave_of_group(x, x->reg[0].name, deadline, slave, sizeof(slave));
	if (st == -ETIMEDOUT)
		log_warn(TB_TAG,
			 "no NameServer answered within haTailRecoverTimeout (%u ms): not "
			 "asking a slave for a lost tail",
			 ms);
	if (st <= 0)
		return;
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		before += clog_written(store_clog(x->bk.store, i));
	if (bk_follow_recover_start(&x->bk, slave, &f) != 0)
		return;
	while ((st = bk_follow_recover_state(f)) == 0 && clk_mono_ns() < deadline)
		nap_ms(TB_POLL_MS);
	bk_follow_stop(f);
	for (uint32_t i = 0; i < x->bk.ncores; i++)
		after += clog_written(store_clog(x->bk.store, i));
	if (x->bk.conf.sync_flush)
		wait_flushed(x, deadline + 5000ull * 1000000ull);
	if (st == 0)
		log_err(TB_TAG,
			"slave %s was not done within haTailRecoverTimeout (%u ms): taking writes "
			"with %" PRIu64 " bytes taken back; the slave keeps the rest and says so",
			slave, ms, after - before);
	else if (after > before)
		log_warn(TB_TAG,
			 "took back %" PRIu64
			 " bytes of acknowledged messages this master had lost "
			 "from slave %s",
			 after - before, slave);
}
