// SPDX-License-Identifier: Apache-2.0
/*
 * bk_tx.c - transactional messages on the core (docs/messages.md,
 * "Transactions"); the remoting side is bk_rmt_tx.c, the start and the
 * saves bk_tx_ctl.c.
 *
 * A half (TRAN_MSG=true, or sysFlag PREPARED) is stored as RocketMQ stores
 * it: in RMQ_SYS_TRANS_HALF_TOPIC, REAL_TOPIC and REAL_QID added, sysFlag
 * without its transaction bits, so consumers never see it. Its queue is the
 * core's own (queue id = core), as is its real queue.
 *
 * END_TRANSACTION reaches the core of the half's shard (BK_ROP_END_TX). A
 * commit appends the message to its real queue (properties but REAL_TOPIC,
 * REAL_QID and TRAN_MSG, sysFlag COMMIT, and BK_TX_HALF_PROP naming the
 * half), then an op record in RMQ_SYS_TRANS_OP_HALF_TOPIC (body: the half's
 * queue offset, tags "d"), as RocketMQ; a rollback only the op record. The
 * half's state byte says it is resolved, so a second END_TRANSACTION for it
 * (a late one, a retry, one after a check-back) does nothing: never
 * committed twice.
 *
 * Halves older than transactionTimeOut are checked back: the remoting port
 * asks each core (BK_ROP_TX_CHECK) about every second; a pass over the
 * unresolved halves runs every transactionCheckInterval and hands back the
 * old ones with their records, which the port sends to a producer of the
 * half's group (CHECK_TRANSACTION_STATE). Past transactionCheckMax checks a
 * half is discarded: resolved with an op record, and logged by the port.
 *
 * Progress (base, op_base, and the log's end when both held) is published
 * once durable; bk_tx_ctl.c saves it in transcheck and rebuilds the state
 * from it at start.
 */
#include <errno.h>
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "bk_priv.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "wire/dp.h"
#include "wire/record.h"

#define TX_OP_ADVANCE 64u /* op units looked at per tick */

static inline uint8_t *
slot(struct bk_tx *t, uint64_t qoff)
{
	return &t->st[qoff % BK_TX_WINDOW];
}

struct store_queue *
bk_tx_wrap(struct bk_core *c, struct wire_msg *m, int32_t *status)
{
	static const char *const skip[] = {"REAL_TOPIC", "REAL_QID", BK_TX_HALF_PROP, NULL};
	struct bk_tx *t = c->tx;

	if (t == NULL) {
		*status = WIRE_DP_ST_SERVICE_NOT_AVAILABLE;
		return NULL;
	}
	/* Every half in doubt has a state byte: none left, no new half. */
	if (store_queue_max(c->bk->store, t->hq) - t->base >= BK_TX_WINDOW) {
		bk_core_busy_why(c, BK_BUSY_TX_WINDOW);
		*status = WIRE_DP_ST_SYSTEM_BUSY;
		return NULL;
	}
	if (bk_sched_wrap(c, m, skip, NULL, NULL, BK_TX_HALF_TOPIC, c->id) != 0) {
		*status = WIRE_DP_ST_MESSAGE_ILLEGAL;
		return NULL;
	}
	m->sys_flag &= ~WIRE_SYSFLAG_TX_MASK;
	return t->hq;
}

void
bk_tx_stored(struct bk_core *c, uint64_t qoff)
{
	*slot(c->tx, qoff) = 0;
	c->st.tx_halves++;
}

/* Append the op record resolving half @qoff. Return: 0, -errno (nothing written). */
static int
op_append(struct bk_core *c, uint64_t qoff)
{
	struct bk_tx *t = c->tx;
	struct store_put_res res;
	struct wire_msg m;
	char body[24];
	int n = 0;
	char tmp[24];
	uint64_t v = qoff;
	long rc;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (int i = 0; i < n; i++)
		body[i] = tmp[n - 1 - i];
	memset(&m, 0, sizeof(m));
	m.topic = BK_TX_OP_TOPIC;
	m.topic_len = (uint8_t)(sizeof(BK_TX_OP_TOPIC) - 1);
	m.queue_id = (int32_t)c->id;
	m.body = (const uint8_t *)body;
	m.body_len = (uint32_t)n;
	m.props = "TAGS\001d\002";
	m.props_len = 7;
	m.born_ts = clk_wall_ms_fast();
	m.born_host = c->bk->store_host;
	m.store_host = c->bk->store_host;
	rc = store_put(c->bk->store, t->oq, &m, &res);
	if (rc < 0)
		return (int)rc;
	t->last_ticket = res.ticket;
	return 0;
}

/* Half @qoff is resolved: its op record now or later, then move base. */
static void
resolve(struct bk_core *c, uint64_t qoff)
{
	struct bk_tx *t = c->tx;
	uint64_t max = store_queue_max(c->bk->store, t->hq);

	*slot(t, qoff) |= 1;
	if (op_append(c, qoff) != 0)
		t->later[t->nlater++] = qoff; /* room checked by the caller */
	while (t->base < max && (*slot(t, t->base) & 1)) {
		*slot(t, t->base) = 0;
		t->base++;
	}
}

/* The half @qoff of this core read and decoded. Return: 0, -ENOENT. */
static int
half_read(struct bk_core *c, int64_t phys, uint64_t qoff, struct wire_msg *m)
{
	const uint8_t *rec;
	long n = store_get_phys(c->bk->store, phys, &rec);

	if (n < 0 || wire_rec_decode(rec, (size_t)n, 0, m) < 0 ||
	    m->topic_len != sizeof(BK_TX_HALF_TOPIC) - 1 ||
	    memcmp(m->topic, BK_TX_HALF_TOPIC, m->topic_len) != 0 || m->queue_id != (int32_t)c->id)
		return -ENOENT;
	(void)qoff;
	return 0;
}

/* Does account @ak (the END_TRANSACTION's) have PUB on the half @m's real topic? */
static bool
may_publish(struct bk_core *c, const char *ak, const struct wire_msg *m)
{
	/* pairs with rcu_assign_pointer() in bk_acl_ctl.c's publish() */
	const struct acl *acl = rcu_dereference(c->bk->acl);
	const struct acl_account *acc = acl ? acl_find(acl, ak, strlen(ak)) : NULL;
	const char *topic;
	size_t len;

	if (!wire_props_get(m->props, m->props_len, "REAL_TOPIC", &topic, &len)) {
		topic = m->topic;
		len = m->topic_len;
	}
	return acc && acl_allowed(acc, topic, len, false, ACL_PUB);
}

void
bk_tx_end(struct bk_core *c, struct bk_rcmd *cmd)
{
	/* RocketMQ's endMessageTransaction clears these */
	static const char *const skip[] = {"REAL_TOPIC", "REAL_QID", "TRAN_MSG", NULL};
	const struct bk_tx_end_req *rq = (const void *)cmd->req;
	struct bk_tx *t = c->tx;
	struct wire_msg m;
	const char *g;
	size_t gl;
	uint64_t ticket;
	int dr;

	cmd->status = WIRE_DP_ST_SUCCESS;
	cmd->value = BK_TX_END_OK;
	cmd->resp_len = 0;
	/* a master whose lease ran out appends nothing: those bytes would be cut at its rejoin */
	if (!bk_core_writable(c)) {
		c->st.write_refused++;
		cmd->value = BK_TX_END_FENCED;
		return;
	}
	if (t == NULL || cmd->req_len != sizeof(*rq) || half_read(c, rq->phys, rq->qoff, &m) != 0) {
		cmd->value = BK_TX_END_NOT_FOUND;
		return;
	}
	if (cmd->ak && !may_publish(c, cmd->ak, &m)) {
		c->st.acl_denied[BK_ACL_NO_PERM]++;
		cmd->value = BK_TX_END_NO_PERM;
		return;
	}
	if (!wire_props_get(m.props, m.props_len, "PGROUP", &g, &gl) || gl != strlen(rq->group) ||
	    memcmp(g, rq->group, gl) != 0) {
		cmd->value = BK_TX_END_GROUP_WRONG;
		return;
	}
	if (m.queue_offset < 0 || (uint64_t)m.queue_offset != rq->qoff) {
		cmd->value = BK_TX_END_QOFF_WRONG;
		return;
	}
	/* The record at commitLogOffset is the half queue's unit at that offset, not a lookalike */
	{
		struct cq_unit u;

		if (cq_get(store_queue_cq(t->hq), rq->qoff, &u) != 0 || u.phys != rq->phys) {
			cmd->value = BK_TX_END_NOT_FOUND;
			return;
		}
	}
	if (rq->qoff < t->base || (*slot(t, rq->qoff) & 1)) {
		c->st.tx_again++; /* resolved already: nothing more, as asked once */
		return;
	}
	if (t->nlater == BK_TX_OPS_LATER) {
		cmd->value = BK_TX_END_BUSY;
		return;
	}
	if (rq->kind == WIRE_SYSFLAG_TX_COMMIT) {
		dr = bk_sched_deliver(c, &m, skip, BK_TX_HALF_PROP, WIRE_SYSFLAG_TX_COMMIT,
				      &ticket);
		if (dr != BK_DELIVER_DONE) {
			cmd->value = dr == BK_DELIVER_LATER ? BK_TX_END_BUSY : BK_TX_END_NO_TOPIC;
			return;
		}
		t->last_ticket = ticket;
		c->st.tx_commits++;
	} else {
		c->st.tx_rollbacks++;
	}
	resolve(c, rq->qoff);
}

/* Copy the record of half @qoff into @cmd's answer. Return: false when it does not fit. */
static bool
check_item(struct bk_rcmd *cmd, const uint8_t *rec, uint32_t len, uint64_t qoff, int64_t phys,
	   uint8_t checks, bool discard)
{
	struct bk_tx_check_item it = {
		.len = len, .discard = discard, .checks = checks, .qoff = qoff, .phys = phys};

	if ((uint64_t)cmd->resp_len + sizeof(it) + len > cmd->resp_cap)
		return false;
	memcpy(cmd->resp + cmd->resp_len, &it, sizeof(it));
	memcpy(cmd->resp + cmd->resp_len + sizeof(it), rec, len);
	cmd->resp_len += (uint32_t)(sizeof(it) + len);
	return true;
}

void
bk_tx_check(struct bk_core *c, struct bk_rcmd *cmd)
{
	struct bk_tx *t = c->tx;
	const struct bk_conf *conf = &c->bk->conf;
	int64_t now = clk_wall_ms_fast();
	uint64_t max;

	cmd->status = WIRE_DP_ST_SUCCESS;
	cmd->resp_len = 0;
	cmd->value = 0;
	if (t == NULL || (t->scan == 0 && now < t->next_pass_ms) || !bk_core_writable(c))
		return; /* a fenced master resolves nothing: the next master's pass does */
	max = store_queue_max(c->bk->store, t->hq);
	if (t->scan < t->base)
		t->scan = t->base;
	while (t->scan < max) {
		uint8_t *s = slot(t, t->scan);
		const uint8_t *rec;
		struct cq_unit u;
		struct wire_msg m;
		uint64_t immune;
		const int64_t timeout = (int64_t)conf->tx_timeout_ms;
		uint8_t checks = (uint8_t)(*s >> 1);
		long n;

		if (*s & 1) {
			t->scan++;
			continue;
		}
		n = store_get(c->bk->store, t->hq, t->scan, &rec, &u);
		if (n < 0 || wire_rec_decode(rec, (size_t)n, 0, &m) < 0) {
			/* Gone (retention) or damaged: nothing to ask about, resolved as discarded */
			if (t->nlater == BK_TX_OPS_LATER)
				goto more;
			resolve(c, t->scan);
			c->st.tx_discarded++;
			t->scan++;
			continue;
		}
		/* The halves after it are younger (store times grow): the pass ends here. */
		if (now - m.store_ts < timeout)
			break;
		/* RocketMQ's CHECK_IMMUNITY_TIME_IN_SECONDS: a later first check for this one only */
		if (checks == 0 &&
		    wire_props_get_uint(m.props, m.props_len, "CHECK_IMMUNITY_TIME_IN_SECONDS",
					&immune) &&
		    immune > 0 && immune < INT64_MAX / 1000 &&
		    now - m.store_ts < (int64_t)immune * 1000) {
			t->scan++;
			continue;
		}
		if (checks >= conf->tx_check_max) {
			if (t->nlater == BK_TX_OPS_LATER)
				goto more;
			if (!check_item(cmd, rec, (uint32_t)n, t->scan, m.phys_offset, checks,
					true)) {
				if (cmd->resp_len == 0)
					cmd->need = (uint32_t)(sizeof(struct bk_tx_check_item) +
							       (size_t)n);
				goto more;
			}
			resolve(c, t->scan);
			c->st.tx_discarded++;
		} else {
			if (!check_item(cmd, rec, (uint32_t)n, t->scan, m.phys_offset,
					(uint8_t)(checks + 1), false)) {
				/* A half bigger than an empty answer: ask for a buffer that fits */
				if (cmd->resp_len == 0)
					cmd->need = (uint32_t)(sizeof(struct bk_tx_check_item) +
							       (size_t)n);
				goto more;
			}
			*s = (uint8_t)((checks + 1) << 1);
			c->st.tx_checks++;
		}
		t->scan++;
	}
	/* This pass is over: the next one after transactionCheckInterval. */
	t->scan = 0;
	t->next_pass_ms = now + (int64_t)conf->tx_check_ms;
	return;
more:
	cmd->value = 1;
}

unsigned
bk_tx_tick(struct bk_core *c)
{
	struct bk_tx *t = c->tx;
	const struct cq *oq = store_queue_cq(t->oq);
	unsigned work = 0;
	uint32_t seq;

	/* Op records the store could not take then (not while fenced: they would be cut). */
	while (t->nlater > 0 && bk_core_writable(c) && op_append(c, t->later[t->nlater - 1]) == 0) {
		t->nlater--;
		work++;
	}
	/* Op units naming halves below base are done with. */
	for (unsigned i = 0; i < TX_OP_ADVANCE && t->op_base < cq_max(oq); i++) {
		struct cq_unit u;

		if (cq_get(oq, t->op_base, &u) != 0 ||
		    (u.tag_hash >= 0 && (uint64_t)u.tag_hash >= t->base))
			break;
		t->op_base++;
	}
	/*
	 * Progress: taken when no op record is missing (every commit before
	 * the log's end has its op), when it moved or every second (the
	 * restart's scan starts at the log offset), and published once the
	 * log up to that offset is durable: a crash never leaves it past the
	 * recovered end.
	 */
	if (!t->pending && t->nlater == 0 &&
	    (t->base != atomic_load_relaxed(&t->pub_base) ||
	     t->op_base != atomic_load_relaxed(&t->pub_op_base) || c->now_ns >= t->next_pub_ns)) {
		t->pending = true;
		t->pend_base = t->base;
		t->pend_op_base = t->op_base;
		t->pend_log = clog_written(store_clog(c->bk->store, c->id));
		t->pend_ticket = t->pend_log;
		t->next_pub_ns = c->now_ns + 1000000000ull;
	}
	if (!t->pending || !bk_progress_durable(c, t->pend_ticket))
		return work;
	t->pending = false;
	seq = atomic_load_relaxed(&t->seq);
	atomic_store_relaxed(&t->seq, seq + 1);
	atomic_thread_fence(memory_order_release);
	atomic_store_relaxed(&t->pub_base, t->pend_base);
	atomic_store_relaxed(&t->pub_op_base, t->pend_op_base);
	atomic_store_relaxed(&t->pub_log, t->pend_log);
	atomic_store_release(&t->seq, seq + 2);
	return work + 1;
}
