// SPDX-License-Identifier: Apache-2.0
/*
 * bk_rmt.c - RocketMQ remoting on the broker's TCP port (bk_rmt.h,
 * docs/remoting.md, docs/rocketmq-protocol.md §1, §4).
 *
 * DESIGN
 * One epoll loop in the control thread. A frame is decoded, checked, and
 * either answered here (heartbeats, consumer lists, locks, topic creation,
 * unknown codes) or turned into the dataplane request the core already
 * knows (SEND, SEND_BATCH, PULL, offsets, SEND_BACK) or an internal op
 * (earliest store time, records by physical offset), wrapped in a job and
 * posted on the owning core's command ring. The core answers into the job's
 * buffer; here the answer becomes the remoting response. A job whose
 * connection closed meanwhile is freed when it comes back (a parked pull
 * comes back at its deadline at the latest).
 *
 * Bounds: jobs in flight per core (SYSTEM_BUSY past it), bytes queued per
 * connection (reading pauses past it), frame size (the connection closes).
 * A malformed frame closes that connection only, with a log line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/bk_msgtype.h"
#include "bk_rmt.h"
#include "bk_rmt_share.h"
#include "common/clock.h"
#include "common/log.h"
#include "store/clog.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

static void
reap(struct bk_rmt *r)
{
	for (uint32_t i = 0; i < r->bk->ncores; i++) {
		void *v[64];
		unsigned n;

		while ((n = dp_lcore_reap(&r->bk->cores[i].lc, v, 64)) > 0)
			for (unsigned k = 0; k < n; k++)
				bk_rmt__job_done(r, v[k]);
		r->work += n;
	}
}

/* ---- frames in ---- */

static void
dispatch(struct bk_rmt *r, struct rconn *c, const struct wire_rem_cmd *q)
{
	const struct acl_door *door;
	char remark[128];

	if (q->flag & WIRE_REM_FLAG_RESPONSE) {
		/* a client's answer to a request we relay (GET_CONSUMER_RUNNING_INFO), or to a
		 * oneway notify (nothing expected) */
		bk_rmt__proxy_answer(r, c, q);
		return;
	}
	c->lang = q->language;
	c->version = q->version;
	/* who may use the door: one table for every code (common/acl_door.c) */
	door = acl_door_broker(q->code);
	if (door == NULL) {
		snprintf(remark, sizeof(remark), " request type %d not supported", q->code);
		bk_rmt__reply(r, c, q, WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED, remark);
		return;
	}
	if (bk_rmt__acl_refuses(r, c, q, door))
		return;
	if ((door->flags & ACL_DOOR_ADDRS) && !cidr_list_has(&r->conf.admin_addrs, c->peer.ip)) {
		snprintf(remark, sizeof(remark),
			 "admin request %d refused: %s is not in adminAllowedAddrs", q->code,
			 c->peer_s);
		log_warn_ratelimited(TAG, "%s", remark);
		bk_rmt__reply(r, c, q, WIRE_RSP_NO_PERMISSION, remark);
		return;
	}
	switch (q->code) {
	case WIRE_REQ_SEND_MESSAGE:
	case WIRE_REQ_SEND_MESSAGE_V2:
	case WIRE_REQ_SEND_BATCH_MESSAGE:
		bk_rmt__do_send(r, c, q);
		return;
	case WIRE_REQ_PULL_MESSAGE:
		bk_rmt__do_pull(r, c, q);
		return;
	case WIRE_REQ_QUERY_CONSUMER_OFFSET:
	case WIRE_REQ_UPDATE_CONSUMER_OFFSET:
	case WIRE_REQ_GET_MIN_OFFSET:
	case WIRE_REQ_GET_MAX_OFFSET:
	case WIRE_REQ_SEARCH_OFFSET_BY_TIMESTAMP:
	case WIRE_REQ_GET_EARLIEST_MSG_STORETIME:
		bk_rmt__do_offset(r, c, q);
		return;
	case WIRE_REQ_END_TRANSACTION:
		bk_rmt__do_end_tx(r, c, q);
		return;
	case WIRE_REQ_CONSUMER_SEND_MSG_BACK:
		bk_rmt__do_send_back(r, c, q);
		return;
	case WIRE_REQ_QUERY_MESSAGE:
	case WIRE_REQ_VIEW_MESSAGE_BY_ID:
		bk_rmt__do_lookup(r, c, q);
		return;
	case WIRE_REQ_HEART_BEAT:
		bk_rmt__do_heartbeat(r, c, q);
		return;
	case WIRE_REQ_UNREGISTER_CLIENT:
		bk_rmt__do_unregister(r, c, q);
		return;
	case WIRE_REQ_GET_CONSUMER_LIST_BY_GROUP:
		bk_rmt__do_consumer_list(r, c, q);
		return;
	case WIRE_REQ_LOCK_BATCH_MQ:
	case WIRE_REQ_UNLOCK_BATCH_MQ:
		bk_rmt__do_lock(r, c, q, q->code == WIRE_REQ_LOCK_BATCH_MQ);
		return;
	case WIRE_REQ_UPDATE_AND_CREATE_TOPIC:
		bk_rmt__do_create_topic(r, c, q);
		return;
	case WIRE_REQ_GET_ALL_TOPIC_CONFIG:
	case WIRE_REQ_GET_ALL_CONSUMER_OFFSET:
	case WIRE_REQ_GET_ALL_DELAY_OFFSET:
	case WIRE_REQ_GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
		bk_rmt__do_get_all(r, c, q);
		return;
	case WIRE_REQ_UPDATE_AND_CREATE_SUBSCRIPTIONGROUP:
		bk_rmt__do_group_put(r, c, q);
		return;
	case WIRE_REQ_CLEAN_EXPIRED_CONSUMEQUEUE:
		bk_rmt__do_clean_queues(r, c, q);
		return;
	case WIRE_REQ_VIEW_BROKER_STATS_DATA:
		bk_rmt__do_stats_data(r, c, q);
		return;
	case WIRE_REQ_GET_TOPIC_STATS_INFO:
		bk_rmt__do_topic_stats(r, c, q);
		return;
	case WIRE_REQ_GET_CONSUME_STATS:
		bk_rmt__do_consume_stats(r, c, q);
		return;
	case WIRE_REQ_QUERY_TOPIC_CONSUME_BY_WHO:
		bk_rmt__do_consume_by_who(r, c, q);
		return;
	case WIRE_REQ_INVOKE_BROKER_TO_RESET_OFFSET:
		bk_rmt__do_reset_offset(r, c, q);
		return;
	case WIRE_REQ_GET_CONSUMER_CONNECTION_LIST:
		bk_rmt__do_consumer_conns(r, c, q);
		return;
	case WIRE_REQ_GET_PRODUCER_CONNECTION_LIST:
		bk_rmt__do_producer_conns(r, c, q);
		return;
	case WIRE_REQ_GET_CONSUMER_RUNNING_INFO:
		bk_rmt__do_running_info(r, c, q);
		return;
	case WIRE_REQ_DELETE_TOPIC_IN_BROKER:
		bk_rmt__do_delete_topic(r, c, q);
		return;
	case WIRE_REQ_DELETE_SUBSCRIPTIONGROUP:
		bk_rmt__do_delete_group(r, c, q);
		return;
	case WIRE_REQ_GET_BROKER_CONFIG:
	case WIRE_REQ_UPDATE_BROKER_CONFIG:
	case WIRE_REQ_GET_BROKER_RUNTIME_INFO:
		bk_rmt__do_config(r, c, q);
		return;
	default:
		snprintf(remark, sizeof(remark), " request type %d not supported", q->code);
		bk_rmt__reply(r, c, q, WIRE_RSP_REQUEST_CODE_NOT_SUPPORTED, remark);
		return;
	}
}

enum { TURN_OK, TURN_CONN, TURN_ADDR };

/*
 * Whether @c may not be given a turn now, and why: it (TURN_CONN) or its
 * address (TURN_ADDR) has its share of quick requests at the cores, or its
 * address had its frames for this pass. The fuzzer's connection always may.
 */
static int
turn_blocked(const struct bk_rmt *r, const struct rconn *c)
{
	if (c->fd < 0)
		return TURN_OK;
	if (c->quick >= RMT_QUICK_PER_CONN)
		return TURN_CONN;
	if (ipcount_get(&r->quick_addr, c->peer.ip) >= RMT_QUICK_PER_ADDR ||
	    ipcount_get(&r->pass_addr, c->peer.ip) >= RMT_FRAMES_PER_ADDR)
		return TURN_ADDR;
	return TURN_OK;
}

/* One more frame handled for @ip in this pass (RMT_FRAMES_PER_ADDR). */
static void
pass_count(struct bk_rmt *r, uint32_t ip)
{
	if (r->npass_ips == r->pass_ips_cap) {
		uint32_t cap = r->pass_ips_cap ? r->pass_ips_cap * 2 : 256;
		uint32_t *v = realloc(r->pass_ips, cap * sizeof(*v));

		if (v == NULL)
			return; /* not counted: this frame is free */
		r->pass_ips = v;
		r->pass_ips_cap = cap;
	}
	if (ipcount_add(&r->pass_addr, ip) != 0)
		r->pass_ips[r->npass_ips++] = ip;
}

/* The pass is over: every address has its frames again. */
static void
pass_reset(struct bk_rmt *r)
{
	for (uint32_t i = 0; i < r->npass_ips; i++)
		ipcount_sub(&r->pass_addr, r->pass_ips[i]);
	r->npass_ips = 0;
}

/*
 * @c's turn ended with frames left: it is read no more (EPOLLIN off) until
 * bk_rmt_run() gives it its next turn, after every connection ahead of it.
 * Return: 0, -ENOMEM (the caller closes it).
 */
static int
turn_defer(struct bk_rmt *r, struct rconn *c)
{
	if (c->backlog)
		return 0;
	if (r->nturns + 2 > r->turns_cap) {
		uint32_t cap = r->turns_cap ? r->turns_cap * 2 : 64;
		uint32_t *t = realloc(r->turns, cap * sizeof(*t));

		if (t == NULL)
			return -ENOMEM;
		r->turns = t;
		r->turns_cap = cap;
	}
	r->turns[r->nturns++] = c->id;
	r->turns[r->nturns++] = c->gen;
	r->turns_deferred++;
	c->backlog = true;
	bk_rmt__conn_events(r, c);
	return 0;
}

/*
 * Handles the whole frames in c->in, at most @budget of them. Return: 0
 * (frames may be left: c->backlog), -1 closed.
 */
static int
conn_frames(struct bk_rmt *r, struct rconn *c, uint32_t budget)
{
	size_t at = 0;

	while (at < c->in_len && !c->closing) {
		struct wire_rem_cmd q;
		size_t flen;
		int err = wire_rem_frame_len(c->in + at, c->in_len - at, r->conf.max_frame, &flen);

		if (err == -EAGAIN)
			break;
		if (err == 0) {
			/* header strings only (the body is not copied): 24-bit length at 5..7 */
			const uint8_t *h = c->in + at;
			size_t need = ((size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7]) * 3 + 256;

			if (need > r->scratch_cap) {
				char *s = realloc(r->scratch, need);

				if (s == NULL) {
					bk_rmt__conn_close(r, c, "out of memory");
					return -1;
				}
				r->scratch = s;
				r->scratch_cap = need;
			}
			err = wire_rem_decode(c->in + at, flen, &q, r->scratch, r->scratch_cap);
		}
		if (err) {
			char why[96];

			if (err == -EMSGSIZE)
				r->refused[BK_RMT_REFUSE_FRAME_SIZE]++;
			snprintf(why, sizeof(why), "malformed frame (%s)",
				 err == -EMSGSIZE ? "larger than the frame limit" : strerror(-err));
			bk_rmt__conn_close(r, c, why);
			return -1;
		}
		/* its turn is over, or it (or its address) has its share (not the fuzzer's);
		 * turns_run() counts the turns an address's share puts off */
		if (budget == 0 || turn_blocked(r, c) != TURN_OK) {
			if (turn_defer(r, c) != 0) {
				bk_rmt__conn_close(r, c, "out of memory");
				return -1;
			}
			break;
		}
		budget--;
		if (c->fd >= 0)
			pass_count(r, c->peer.ip);
		dispatch(r, c, &q);
		r->work++;
		if (c->closing)
			return -1; /* closed while answering (torn down later) */
		at += flen;
	}
	if (at) {
		memmove(c->in, c->in + at, c->in_len - at);
		c->in_len -= at;
	}
	return 0;
}

static uint64_t
frame_mem_counted(size_t cap)
{
	/* what every connection may hold is not counted: a flood of big frames never keeps
	 * a new connection from a small request (connections are capped on their own) */
	return cap > 2 * (size_t)READ_CHUNK ? cap - 2 * (size_t)READ_CHUNK : 0;
}

/*
 * Sets @c's receive buffer to @cap bytes, what it holds past its first
 * 2 * READ_CHUNK counted against remotingMaxFrameMemory (all connections'
 * unfinished frames) unless it shrinks. Return: 0, -ENOSPC (over the cap:
 * logged and counted), -ENOMEM.
 */
static int
conn_in_resize(struct bk_rmt *r, struct rconn *c, size_t cap)
{
	uint64_t now = frame_mem_counted(c->in_cap), then = frame_mem_counted(cap);
	uint8_t *b;

	if (then > now && r->frame_mem + (then - now) > r->conf.frame_mem_max) {
		r->refused[BK_RMT_REFUSE_FRAME_MEM]++;
		log_warn(TAG,
			 "closing the connection from %s: its frame would take the memory held by "
			 "unfinished frames past %" PRIu64 " bytes (remotingMaxFrameMemory)",
			 c->peer_s, r->conf.frame_mem_max);
		return -ENOSPC;
	}
	b = realloc(c->in, cap);
	if (b == NULL)
		return -ENOMEM;
	r->frame_mem = r->frame_mem - now + then;
	c->in = b;
	c->in_cap = cap;
	return 0;
}

/*
 * A grown buffer whose frame is done goes back to its first size: memory
 * for others, and remotingMaxFrameMemory counts unfinished frames only.
 */
static void
conn_in_shrink(struct bk_rmt *r, struct rconn *c)
{
	if (c->in_cap > 2 * (size_t)READ_CHUNK && c->in_len <= 2 * (size_t)READ_CHUNK)
		(void)conn_in_resize(r, c, 2 * (size_t)READ_CHUNK);
}

static void
conn_read(struct bk_rmt *r, struct rconn *c)
{
	char why[160];

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n;

		if (c->in_cap - c->in_len < READ_CHUNK) {
			size_t cap = c->in_cap ? c->in_cap * 2 : READ_CHUNK * 2;
			int rc = 0;

			if (cap > (size_t)r->conf.max_frame + 2 * READ_CHUNK) {
				if (c->in_cap - c->in_len == 0) {
					r->refused[BK_RMT_REFUSE_FRAME_SIZE]++;
					bk_rmt__conn_close(r, c, "frame larger than the limit");
					return;
				}
				cap = c->in_cap;
			}
			if (cap != c->in_cap)
				rc = conn_in_resize(r, c, cap);
			if (rc != 0) {
				bk_rmt__conn_close(r, c, rc == -ENOSPC ? NULL : "out of memory");
				return;
			}
		}
		n = bk_rmt__io_recv(r, c, c->in + c->in_len, c->in_cap - c->in_len, why,
				    sizeof(why));
		if (n == 0) {
			bk_rmt__conn_close(r, c, NULL);
			return;
		}
		if (n < 0) {
			if (n == -EAGAIN) {
				if (c->tls_want_out)
					bk_rmt__conn_events(r, c);
				return;
			}
			bk_rmt__conn_close(r, c, n == -EPROTO ? why : strerror((int)-n));
			return;
		}
		c->in_len += (size_t)n;
		if (conn_frames(r, c, RMT_FRAMES_PER_TURN) != 0 || c->paused || c->backlog)
			return;
		conn_in_shrink(r, c);
	}
}

static void
conn_free(struct bk_rmt *r, struct rconn *c)
{
	r->frame_mem -= frame_mem_counted(c->in_cap);
	bk_rmt__tls_free(c);
	free(c->in);
	free(c->out);
	free(c);
}

/*
 * A closed connection's requests stop counting against its address now, and
 * its long polls answer now (to nobody) instead of at their deadline: what
 * they held (a job, a park, the core's budget) is free for others at once.
 */
static void
jobs_cancel(struct bk_rmt *r, uint32_t id, uint32_t gen)
{
	uint64_t cores = 0;

	bk_rmt__held_drop_conn(r, id, gen);
	for (struct rjob *j = r->jobs; j; j = j->next) {
		if (j->conn != id || j->gen != gen)
			continue;
		bk_rmt__job_addr_uncount(r, j);
		if (j->polled) {
			atomic_store_relaxed(&j->c.cancelled, true);
			cores |= 1ull << j->c.core;
		}
	}
	for (uint32_t i = 0; i < r->bk->ncores; i++)
		if (cores >> i & 1)
			atomic_store_release(&r->bk->cores[i].rmt_kick, 1);
}

static void
conn_teardown(struct bk_rmt *r, struct rconn *c)
{
	uint32_t id = c->id, gen = c->gen;

	jobs_cancel(r, id, gen);
	if (c == r->fuzz_conn) {
		/* keep the object: the fuzzer feeds it again, as a new connection */
		c->gen++;
		c->in_len = c->out_len = c->out_off = 0;
		c->closing = false;
	} else {
		if (c->fd >= 0) {
			(void)epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
		}
		r->conns[id] = NULL;
		if (c->counted)
			ipcount_sub(&r->per_addr, c->peer.ip);
		conn_free(r, c);
	}
	bk_rmt__groups_sweep(r, true, id, gen);
	bk_rmt__producers_sweep(r, true, id, gen, NULL);
}

static void
conns_reap(struct bk_rmt *r)
{
	while (r->any_closing) {
		r->any_closing = false;
		for (uint32_t i = 0; i < r->nconns; i++)
			if (r->conns[i] && r->conns[i]->closing)
				conn_teardown(r, r->conns[i]);
		if (r->fuzz_conn && r->fuzz_conn->closing)
			conn_teardown(r, r->fuzz_conn);
	}
}

/*
 * accept() failed for want of a descriptor or memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM): the listener rests (out of the epoll set, or it would
 * report the same pending connection again at once: a spin) for 100 ms,
 * doubling to 1 s while it keeps failing; the pending connections wait in
 * the backlog. Counted; the warning names the cause.
 */
static void
accept_rest(struct bk_rmt *r, int err)
{
	struct epoll_event ev = {.events = 0, .data.u32 = UINT32_MAX};

	r->accept_backoff_ms = SP_MIN(SP_MAX(r->accept_backoff_ms * 2, 100u), 1000u);
	r->accept_resume_ms = r->now_ms + r->accept_backoff_ms;
	(void)epoll_ctl(r->ep, EPOLL_CTL_MOD, r->lfd, &ev);
	if (err == EMFILE || err == ENFILE)
		r->refused[BK_RMT_REFUSE_NOFD]++;
	log_warn(TAG, "accepting a remoting connection: %s (%u open); the listener rests %u ms%s",
		 strerror(err), r->nconns, r->accept_backoff_ms,
		 err == EMFILE ? ": the process is at its descriptor limit (ulimit -n, fdReserve)"
			       : "");
}

/* The listener back in the epoll set once its rest is over. */
static void
accept_wake(struct bk_rmt *r)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};

	if (r->accept_resume_ms == 0 || r->now_ms < r->accept_resume_ms)
		return;
	r->accept_resume_ms = 0;
	(void)epoll_ctl(r->ep, EPOLL_CTL_MOD, r->lfd, &ev);
}

static void
srv_accept(struct bk_rmt *r)
{
	for (;;) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		int fd = accept4(r->lfd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN};
		struct rconn *c;
		uint32_t id;
		int one = 1;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				accept_rest(r, errno);
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			continue; /* EINTR, ECONNABORTED, EPROTO...: that connection only */
		}
		r->accept_backoff_ms = 0;
		if (r->conf.fd_ceiling && (uint32_t)fd >= r->conf.fd_ceiling) {
			/*
			 * Descriptors go lowest first: this one's number says at
			 * least that many are open, so what is left is fdReserve's,
			 * kept for the store (its segment and queue files grow).
			 */
			r->refused[BK_RMT_REFUSE_NOFD]++;
			log_warn(TAG,
				 "refusing a connection: descriptor %d reaches the part of the "
				 "limit kept for the store (fdReserve)",
				 fd);
			close(fd);
			continue;
		}
		if (r->conf.max_conns_per_addr &&
		    ipcount_get(&r->per_addr, a.sin_addr.s_addr) >= r->conf.max_conns_per_addr) {
			char ip[INET_ADDRSTRLEN] = "?";

			inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
			r->refused[BK_RMT_REFUSE_ADDR]++;
			log_warn_ratelimited(TAG,
					     "refusing a connection from %s: %u open from it "
					     "(remotingMaxConnectionsPerAddr)",
					     ip, r->conf.max_conns_per_addr);
			close(fd);
			continue;
		}
		for (id = 0; id < r->nconns && r->conns[id]; id++)
			;
		if (id == r->nconns) {
			if (r->nconns >= r->conf.max_conns) {
				r->refused[BK_RMT_REFUSE_CONNS]++;
				log_warn_ratelimited(TAG,
						     "refusing a connection: %u open (the limit)",
						     r->nconns);
				close(fd);
				continue;
			}
			struct rconn **n = realloc(r->conns, sizeof(*n) * (r->nconns + 1));

			if (n == NULL) {
				close(fd);
				continue;
			}
			r->conns = n;
			r->conns[r->nconns++] = NULL;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->id = id;
		c->gen = ++r->serial;
		c->tls_state = r->tls ? RTLS_UNDECIDED : RTLS_PLAIN;
		c->peer.ip = a.sin_addr.s_addr;
		c->peer.port = ntohs(a.sin_port);
		inet_ntop(AF_INET, &a.sin_addr, c->peer_s, sizeof(c->peer_s));
		snprintf(c->peer_s + strlen(c->peer_s), sizeof(c->peer_s) - strlen(c->peer_s),
			 ":%u", c->peer.port);
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ev.data.u32 = id;
		if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			free(c);
			continue;
		}
		r->conns[id] = c;
		c->counted = true;
		(void)ipcount_add(&r->per_addr, c->peer.ip);
	}
}

/* ---- lifecycle ---- */

int
bk_rmt_create(struct bk *bk, const struct bk_rmt_conf *conf, const struct bk_rmt_ops *ops,
	      struct bk_rmt **out)
{
	struct bk_rmt *r = calloc(1, sizeof(*r));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(conf->port)};
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
	socklen_t al = sizeof(a);
	int one = 1, err;

	if (r == NULL)
		return -ENOMEM;
	r->bk = bk;
	r->conf = *conf;
	if (!r->conf.max_jobs_per_conn)
		r->conf.max_jobs_per_conn = 1024;
	if (!r->conf.frame_mem_max)
		r->conf.frame_mem_max = 256ull << 20;
	if (!r->conf.polls_per_core || r->conf.polls_per_core > r->conf.inflight_per_core)
		r->conf.polls_per_core = r->conf.inflight_per_core / 2;
	if (!r->conf.held_max)
		r->conf.held_max = 262144;
	if (!r->conf.held_per_addr)
		r->conf.held_per_addr = r->conf.held_max;
	r->ops = *ops;
	r->lfd = -1;
	r->inflight = calloc(bk->ncores, sizeof(*r->inflight));
	r->hdr_cap = HDR_MIN;
	r->hdr = malloc(r->hdr_cap);
	r->ep = epoll_create1(EPOLL_CLOEXEC);
	r->polls = calloc(bk->ncores, sizeof(*r->polls));
	if (ipcount_init(&r->per_addr, SP_MIN(conf->max_conns, 1u << 20)) != 0)
		r->per_addr.v = NULL;
	if (ipcount_init(&r->jobs_addr, SP_MIN(conf->max_conns, 1u << 20)) != 0)
		r->jobs_addr.v = NULL;
	if (ipcount_init(&r->quick_addr, SP_MIN(conf->max_conns, 1u << 20)) != 0)
		r->quick_addr.v = NULL;
	if (ipcount_init(&r->pass_addr, SP_MIN(conf->max_conns, 1u << 20)) != 0)
		r->pass_addr.v = NULL;
	if (ipcount_init(&r->held_addr, SP_MIN(conf->max_conns, 1u << 20)) != 0)
		r->held_addr.v = NULL;
	if (ipcount_init(&r->polls_addr, SP_MIN(conf->max_conns, 1u << 20)) != 0)
		r->polls_addr.v = NULL;
	if (r->inflight == NULL || r->polls == NULL || r->hdr == NULL || r->ep < 0 ||
	    r->per_addr.v == NULL || r->jobs_addr.v == NULL || r->quick_addr.v == NULL ||
	    r->pass_addr.v == NULL || r->held_addr.v == NULL || r->polls_addr.v == NULL) {
		err = r->ep < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	if (inet_pton(AF_INET, conf->ip, &a.sin_addr) != 1) {
		log_err(TAG, "listen address '%s' is not IPv4", conf->ip);
		err = -EINVAL;
		goto fail;
	}
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->lfd < 0 || setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(r->lfd, 1024) != 0 ||
	    getsockname(r->lfd, (struct sockaddr *)&a, &al) != 0 ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd, &ev) != 0) {
		err = -errno;
		log_err(TAG, "listening on %s:%u: %s", conf->ip, conf->port, strerror(errno));
		goto fail;
	}
	r->port = ntohs(a.sin_port);
	r->now_ms = clk_mono_ns() / 1000000;
	r->config_version_ms = (int64_t)clk_wall_ms();
	log_info(TAG, "remoting (RocketMQ clients) listening on %s:%u", conf->ip, r->port);
	*out = r;
	return 0;
fail:
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->ep >= 0)
		close(r->ep);
	free(r->inflight);
	free(r->polls);
	free(r->hdr);
	ipcount_fini(&r->per_addr);
	ipcount_fini(&r->jobs_addr);
	ipcount_fini(&r->quick_addr);
	ipcount_fini(&r->pass_addr);
	ipcount_fini(&r->held_addr);
	ipcount_fini(&r->polls_addr);
	free(r);
	return err;
}

int
bk_rmt_fd(const struct bk_rmt *r)
{
	return r->ep;
}

uint16_t
bk_rmt_port(const struct bk_rmt *r)
{
	return r->port;
}

bool
bk_rmt_pending(const struct bk_rmt *r)
{
	/* a connection waits for its next turn, which no socket event will bring */
	for (uint32_t k = 0; k < r->nturns; k += 2) {
		const struct rconn *c = r->turns[k] < r->nconns ? r->conns[r->turns[k]] : NULL;

		if (c && c->gen == r->turns[k + 1] && !c->paused && !turn_blocked(r, c))
			return true;
	}
	for (uint32_t i = 0; i < r->bk->ncores; i++)
		if (r->inflight[i] && ring_count(r->bk->cores[i].lc.cpl))
			return true;
	return false;
}

/*
 * The next turn of every connection that had frames left, in the order
 * their turns ended (those deferred during this pass wait for the next):
 * RMT_FRAMES_PER_TURN more frames each, then it is read again when none are
 * left, or it goes to the back of the queue with frames still left. A
 * connection paused on its unsent answers, or one that may not have a turn
 * now (turn_blocked()), keeps its place; so when an address had its frames
 * for this pass, its connections further back get theirs in the next ones.
 */
static void
turns_run(struct bk_rmt *r)
{
	uint32_t n = r->nturns;
	uint32_t keep = 0;

	if (n == 0)
		return;

	for (uint32_t k = 0; k < n; k += 2) {
		uint32_t id = r->turns[k], gen = r->turns[k + 1];
		struct rconn *c = id < r->nconns ? r->conns[id] : NULL;

		if (c == NULL || c->gen != gen || c->closing || !c->backlog)
			continue;
		int why = c->paused ? TURN_OK : turn_blocked(r, c);

		if (why == TURN_ADDR)
			r->turns_addr++;
		if (c->paused || why != TURN_OK) {
			r->turns[keep++] = id;
			r->turns[keep++] = gen;
			continue;
		}
		c->backlog = false;
		if (conn_frames(r, c, RMT_FRAMES_PER_TURN) != 0)
			continue;
		if (c->backlog)
			continue; /* turn_defer() appended it past n: the back of the queue */
		conn_in_shrink(r, c);
		bk_rmt__conn_events(r, c); /* read again */
	}
	/* what was deferred during this pass follows the kept ones */
	if (r->nturns > n)
		memmove(r->turns + keep, r->turns + n, (r->nturns - n) * sizeof(*r->turns));
	r->nturns = keep + (r->nturns - n);
}

unsigned
bk_rmt_run(struct bk_rmt *r, uint64_t now_ms)
{
	struct epoll_event ev[64];
	int n;

	r->now_ms = now_ms;
	r->work = 0;
	accept_wake(r);
	/* wakes first: every held answer that came before one is reaped before it applies */
	bk_rmt__held_take(r);
	reap(r);
	bk_rmt__held_run(r);
	n = epoll_wait(r->ep, ev, 64, 0);
	for (int i = 0; i < n; i++) {
		uint32_t id = ev[i].data.u32;
		struct rconn *c;

		if (id == UINT32_MAX) {
			srv_accept(r);
			continue;
		}
		c = id < r->nconns ? r->conns[id] : NULL;
		if (c == NULL)
			continue;
		if ((ev[i].events & EPOLLOUT) && c->tls_want_out) {
			/* OpenSSL wrote what it had to: read on */
			c->tls_want_out = false;
			bk_rmt__conn_events(r, c);
			conn_read(r, c);
			if (c->closing)
				continue;
		}
		if ((ev[i].events & EPOLLOUT) && bk_rmt__conn_flush(r, c) != 0)
			continue;
		if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			conn_read(r, c);
	}
	turns_run(r);
	pass_reset(r);
	reap(r);
	conns_reap(r);
	bk_rmt__tx_tick(r);
	if (now_ms >= r->next_sweep_ms) {
		r->next_sweep_ms = now_ms + 1000;
		bk_rmt__groups_sweep(r, false, 0, 0);
		bk_rmt__proxy_sweep(r);
		bk_rmt__producers_sweep(r, false, 0, 0, NULL);
		for (size_t i = 0; i < r->nlocks;) {
			if (now_ms - r->locks[i].last_ms > r->conf.lock_expire_ms) {
				r->locks[i] = r->locks[--r->nlocks];
				continue;
			}
			i++;
		}
		conns_reap(r);
	}
	return r->work;
}

void
bk_rmt_feed(struct bk_rmt *r, const uint8_t *buf, size_t len)
{
	struct rconn *c = r->fuzz_conn;

	if (c == NULL) {
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			return;
		c->fd = -1;
		c->id = UINT32_MAX - 1;
		c->gen = 1;
		c->peer.ip = htonl(0x7f000001);
		snprintf(c->peer_s, sizeof(c->peer_s), "fuzz");
		r->fuzz_conn = c;
	}
	while (len > 0) {
		size_t n = SP_MIN(len, (size_t)READ_CHUNK);

		if (c->in_len + n > c->in_cap) {
			size_t cap = c->in_len + n;
			int rc;

			if (cap > (size_t)r->conf.max_frame + 2 * READ_CHUNK) {
				r->refused[BK_RMT_REFUSE_FRAME_SIZE]++;
				bk_rmt__conn_close(r, c, "frame larger than the limit");
				break;
			}
			rc = conn_in_resize(r, c, cap);
			if (rc != 0) {
				if (rc == -ENOSPC)
					bk_rmt__conn_close(r, c, NULL);
				break;
			}
		}
		memcpy(c->in + c->in_len, buf, n);
		c->in_len += n;
		buf += n;
		len -= n;
		do {
			c->backlog = false; /* fuzzing: every frame now, no turns */
			if (conn_frames(r, c, RMT_FRAMES_PER_TURN) != 0)
				goto out;
		} while (c->backlog);
	}
out:
	reap(r);
	conns_reap(r);
}

void
bk_rmt_destroy(struct bk_rmt *r)
{
	if (r == NULL)
		return;
	log_info(TAG,
		 "remoting: SYSTEM_BUSY answers by reason: core_inflight %" PRIu64
		 ", conn_inflight %" PRIu64 ", addr_inflight %" PRIu64 ", long_polls %" PRIu64,
		 r->busy[BK_RMT_BUSY_CORE], r->busy[BK_RMT_BUSY_CONN], r->busy[BK_RMT_BUSY_ADDR],
		 r->busy[BK_RMT_BUSY_POLLS]);
	log_info(TAG,
		 "remoting: %" PRIu64 " long polls held off the cores (%" PRIu64
		 " answered at their deadline, %u held now); refused: %" PRIu64
		 " remotingLongPollsMax, %" PRIu64 " remotingLongPollsPerAddr",
		 r->held_total, r->held_timeouts, r->nheld, r->busy[BK_RMT_BUSY_HELD],
		 r->busy[BK_RMT_BUSY_HELD_ADDR]);
	log_info(TAG,
		 "remoting: connections refused or closed by reason: connections %" PRIu64
		 ", per_addr %" PRIu64 ", no_fd %" PRIu64 ", frame_size %" PRIu64
		 ", frame_memory %" PRIu64,
		 r->refused[BK_RMT_REFUSE_CONNS], r->refused[BK_RMT_REFUSE_ADDR],
		 r->refused[BK_RMT_REFUSE_NOFD], r->refused[BK_RMT_REFUSE_FRAME_SIZE],
		 r->refused[BK_RMT_REFUSE_FRAME_MEM]);
	log_info(TAG,
		 "remoting: %" PRIu64 " turns ended with frames left (a connection's pipeline "
		 "waited while the others had their turn, %u frames each); %" PRIu64
		 " turns put off as the connection's address had its share (%u frames a pass, "
		 "%u requests at the cores)",
		 r->turns_deferred, RMT_FRAMES_PER_TURN, r->turns_addr, RMT_FRAMES_PER_ADDR,
		 RMT_QUICK_PER_ADDR);
	bk_rmt__held_fini(r);
	while (r->jobs)
		bk_rmt__job_free(r, r->jobs);
	for (uint32_t i = 0; i < r->nconns; i++) {
		if (r->conns[i]) {
			close(r->conns[i]->fd);
			conn_free(r, r->conns[i]);
		}
	}
	if (r->fuzz_conn)
		conn_free(r, r->fuzz_conn);
	for (size_t i = 0; i < r->ngroups; i++)
		free(r->groups[i].m);
	free(r->groups);
	free(r->locks);
	free(r->producers);
	free(r->resets);
	free(r->proxies);
	free(r->conns);
	free(r->turns);
	free(r->pass_ips);
	ipcount_fini(&r->per_addr);
	ipcount_fini(&r->jobs_addr);
	ipcount_fini(&r->quick_addr);
	ipcount_fini(&r->pass_addr);
	ipcount_fini(&r->held_addr);
	ipcount_fini(&r->polls_addr);
	bk_rmt_tls_fini(r);
	free(r->scratch);
	free(r->inflight);
	free(r->polls);
	free(r->hdr);
	close(r->lfd);
	close(r->ep);
	free(r);
}
