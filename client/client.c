// SPDX-License-Identifier: Apache-2.0
/*
 * client.c - the libsprocket client: its I/O thread, calls and callback thread.
 *
 * One I/O thread per client owns the dataplane port and the session
 * transport (dp_xcli), neither of which is thread-safe. Everything else
 * reaches them through calls (client_priv.h): a caller thread encodes a
 * request, appends it to the submission list under c->lock, and wakes the
 * I/O thread. The I/O thread moves each call to the endpoint (broker ip,
 * core port) it is for, connects that endpoint's session lazily, submits as
 * many calls as the session has free slots, polls, and completes calls from
 * the transport's callbacks.
 *
 * DESIGN
 * Idle: the I/O thread spins spin_us after the last work, then sleeps. With
 * nothing in flight it sleeps on c->cond (a submitter signals it). With
 * requests in flight it must also watch the port, so it sleeps in the
 * port's wait(); on the udp backend a submitter wakes it with a one-byte
 * datagram to the port's own address (the transport drops it as malformed,
 * counted in rx_dropped), on the other backends the wait is short (200 us).
 * The wait is bounded (1 ms with ordinary requests in flight, for the
 * transport's retransmission timers; 10 ms when only long polls are out).
 *
 * Backoff: a call submitted with not_before_ns in the future (a SEND the
 * broker answered SYSTEM_BUSY) waits on the I/O thread's delayed list and
 * goes to its endpoint when due; while any waits, the I/O thread sleeps at
 * most the in-flight bound, so no caller thread ever sleeps for a backoff.
 *
 * Sessions: a session that dies (no answer after the transport's retries,
 * or a RESET) fails its calls with -ETIMEDOUT or -ECONNRESET. After a RESET
 * (broker restart, idle eviction) a call is re-sent on a new session, at
 * most twice: at-least-once, as protocol.md §6.1 says. A failed CONNECT
 * fails the endpoint's calls and holds new ones off for a second, so the
 * producer moves to another broker instead of waiting.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_priv.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/log.h"

#define EP_RETRY_NS (1000ull * 1000000ull)

STATIC_ASSERT((int)SP_BACKEND_UDP == (int)DP_BACKEND_UDP &&
		      (int)SP_BACKEND_AF_PACKET == (int)DP_BACKEND_AF_PACKET &&
		      (int)SP_BACKEND_DPDK == (int)DP_BACKEND_DPDK,
	      "sp_backend mirrors dp_backend");
#define MAX_RESETS 2

/* A transport endpoint: one broker core. I/O thread only. */
struct sp__ep {
	struct sp__ep *next;
	struct dp_addr addr;
	struct dp_xsess *sess;
	struct sp__call *pend_head; /* waiting for a session or a free slot, FIFO */
	struct sp__call *pend_tail;
	uint64_t retry_after_ns; /* a CONNECT failed: fail calls until then */
	int conn_err;
	uint64_t last_used_ns;
	unsigned inflight;	/* calls submitted on sess */
	unsigned inflight_long; /* of which long polls */
	bool ping_busy;
	uint8_t ping_buf[WIRE_DP_PING_REQ_FIXED];
};

void
sp__log(struct sp_client *c, enum sp_log_level lvl, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!c->cfg.log || lvl > c->cfg.log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	c->cfg.log(c->cfg.log_arg, lvl, line);
}

/* ---- calls ---- */

struct sp__call *
sp__call_new(void)
{
	struct sp__call *call = calloc(1, sizeof(*call));

	if (!call)
		return NULL;
	if (sem_init(&call->sem, 0, 0) != 0) {
		free(call);
		return NULL;
	}
	return call;
}

void
sp__call_reset(struct sp__call *call)
{
	free(call->resp);
	call->resp = NULL;
	call->resp_len = 0;
	call->err = 0;
	call->resets = 0;
	call->not_before_ns = 0;
	call->t_submit_ns = 0;
	call->t_done_ns = 0;
}

void
sp__call_free(struct sp__call *call)
{
	if (!call)
		return;
	free(call->req);
	free(call->resp);
	sem_destroy(&call->sem);
	free(call);
}

static void
call_finish(struct sp__call *call)
{
	call->t_done_ns = clk_mono_ns();
	/* after this the call is its creator's again: touch nothing */
	if (call->done)
		call->done(call);
	else
		sem_post(&call->sem);
}

static void
doorbell(struct sp_client *c)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(c->doorbell_dst.port),
		.sin_addr.s_addr = c->doorbell_dst.ip,
	};
	static const uint8_t b = 0;

	(void)sendto(c->doorbell_fd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof(sa));
}

void
sp__call_submit(struct sp_client *c, struct sp__call *call)
{
	int mode;

	call->next = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->io_exited) {
		/* the client is going away: fail it here, on the caller's thread */
		pthread_mutex_unlock(&c->lock);
		call->err = -ECONNABORTED;
		call_finish(call);
		return;
	}
	if (c->sub_tail)
		c->sub_tail->next = call;
	else
		c->sub_head = call;
	c->sub_tail = call;
	mode = c->sleep_mode;
	if (mode == 1)
		pthread_cond_signal(&c->cond);
	if (mode == 2)
		c->sleep_mode = 0; /* one doorbell per sleep */
	pthread_mutex_unlock(&c->lock);
	if (mode == 2 && c->doorbell_fd >= 0)
		doorbell(c);
}

int
sp__call_sync(struct sp_client *c, struct sp__call *call)
{
	call->done = NULL;
	sp__call_submit(c, call);
	while (sem_wait(&call->sem) != 0 && errno == EINTR)
		;
	return call->err;
}

/* ---- the I/O thread ---- */

static void
ep_push(struct sp__ep *ep, struct sp__call *call)
{
	call->next = NULL;
	call->ep = ep;
	if (ep->pend_tail)
		ep->pend_tail->next = call;
	else
		ep->pend_head = call;
	ep->pend_tail = call;
}

static void
xcli_done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct sp__call *call = arg;
	struct sp__ep *ep = call->ep;

	ep->inflight--;
	if (call->long_poll)
		ep->inflight_long--;
	if (err == -ECONNRESET && call->resets < MAX_RESETS) {
		call->resets++;
		ep_push(ep, call); /* reconnect and re-send (at-least-once) */
		return;
	}
	call->err = err;
	if (err == 0) {
		call->resp = malloc(len ? len : 1);
		if (!call->resp) {
			call->err = -ENOMEM;
		} else {
			memcpy(call->resp, msg, len);
			call->resp_len = len;
		}
	}
	call_finish(call);
}

static void
ping_done(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct sp__ep *ep = arg;

	(void)err;
	(void)msg;
	(void)len;
	ep->inflight--;
	ep->ping_busy = false;
}

static struct sp__ep *
ep_get(struct sp_client *c, struct dp_addr a)
{
	struct sp__ep *ep;

	for (ep = c->eps; ep; ep = ep->next)
		if (ep->addr.ip == a.ip && ep->addr.port == a.port)
			return ep;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->addr = a;
	ep->next = c->eps;
	c->eps = ep;
	return ep;
}

static void
ep_fail_pending(struct sp__ep *ep, int err)
{
	while (ep->pend_head) {
		struct sp__call *call = ep->pend_head;

		ep->pend_head = call->next;
		call->err = err;
		call_finish(call);
	}
	ep->pend_tail = NULL;
}

/* Connects if needed and submits what fits. Return: calls submitted. */
static unsigned
ep_service(struct sp_client *c, struct sp__ep *ep, uint64_t now)
{
	unsigned n = 0;
	int err;

	if (!ep->pend_head)
		return 0;
	if (!ep->sess) {
		if (now < ep->retry_after_ns) {
			ep_fail_pending(ep, ep->conn_err);
			return 0;
		}
		err = dp_xcli_connect(c->xcli, ep->addr, c->cfg.connect_timeout_ms, &ep->sess);
		if (err) {
			struct in_addr ia = {.s_addr = ep->addr.ip};

			ep->sess = NULL;
			ep->conn_err = err;
			ep->retry_after_ns = clk_mono_ns() + EP_RETRY_NS;
			sp__log(c, SP_LOG_WARN, "connect %s:%u failed: %s", inet_ntoa(ia),
				ep->addr.port, sp_strerror(err));
			ep_fail_pending(ep, err);
			return 0;
		}
		ep->last_used_ns = now;
	}
	while (ep->pend_head) {
		struct sp__call *call = ep->pend_head;

		call->t_submit_ns = clk_mono_ns();
		err = dp_xcli_submit(ep->sess, call->op, call->req, call->req_len, xcli_done, call);
		if (err == -EAGAIN || err == -ENOTCONN)
			break;
		ep->pend_head = call->next;
		if (!ep->pend_head)
			ep->pend_tail = NULL;
		if (err) {
			call->err = err;
			call_finish(call);
			continue;
		}
		ep->inflight++;
		if (call->long_poll)
			ep->inflight_long++;
		ep->last_used_ns = now;
		n++;
	}
	return n;
}

static void
ep_keepalive(struct sp_client *c, struct sp__ep *ep, uint64_t now)
{
	struct wire_dp_ping_req pr = {.client_ts_ns = now};

	if (!ep->sess || ep->ping_busy || ep->inflight ||
	    now - ep->last_used_ns < (uint64_t)c->cfg.keepalive_ms * 1000000ull)
		return;
	if (wire_dp_ping_req_encode(&pr, ep->ping_buf, sizeof(ep->ping_buf)) < 0)
		return;
	if (dp_xcli_submit(ep->sess, WIRE_DP_OP_PING, ep->ping_buf, sizeof(ep->ping_buf), ping_done,
			   ep) == 0) {
		ep->ping_busy = true;
		ep->inflight++;
		ep->last_used_ns = now;
	}
}

/* Moves the submission list to the endpoints (or the delayed list). Return: calls taken. */
static unsigned
take_submissions(struct sp_client *c, uint64_t now)
{
	struct sp__call *list;
	unsigned n = 0;

	pthread_mutex_lock(&c->lock);
	list = c->sub_head;
	c->sub_head = c->sub_tail = NULL;
	pthread_mutex_unlock(&c->lock);
	while (list) {
		struct sp__call *call = list;
		struct sp__ep *ep;

		list = call->next;
		n++;
		if (call->not_before_ns > now) {
			call->next = c->delayed;
			c->delayed = call;
			continue;
		}
		ep = ep_get(c, call->dst);
		if (!ep) {
			call->err = -ENOMEM;
			call_finish(call);
			continue;
		}
		ep_push(ep, call);
	}
	return n;
}

/* Moves the delayed calls that are due to their endpoints. Return: how many still wait. */
static unsigned
take_delayed(struct sp_client *c, uint64_t now, unsigned *moved)
{
	struct sp__call **pp = &c->delayed;
	unsigned left = 0;

	while (*pp) {
		struct sp__call *call = *pp;
		struct sp__ep *ep;

		if (call->not_before_ns > now) {
			pp = &call->next;
			left++;
			continue;
		}
		*pp = call->next;
		call->not_before_ns = 0;
		(*moved)++;
		ep = ep_get(c, call->dst);
		if (!ep) {
			call->err = -ENOMEM;
			call_finish(call);
			continue;
		}
		ep_push(ep, call);
	}
	return left;
}

static void
io_sleep(struct sp_client *c, unsigned inflight, unsigned inflight_long)
{
	pthread_mutex_lock(&c->lock);
	if (c->sub_head || c->stopping) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (!inflight) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L; /* keepalives are checked at this pace */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		c->sleep_mode = 1;
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
		c->sleep_mode = 0;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->sleep_mode = 2;
	pthread_mutex_unlock(&c->lock);
	if (c->doorbell_fd >= 0)
		dp_port_wait(c->port, inflight > inflight_long ? 1000 : 10000);
	else
		dp_port_wait(c->port, 200);
	pthread_mutex_lock(&c->lock);
	c->sleep_mode = 0;
	pthread_mutex_unlock(&c->lock);
}

static void *
io_main(void *arg)
{
	struct sp_client *c = arg;
	uint64_t last_work = clk_mono_ns();
	uint64_t last_ka = last_work;

	for (;;) {
		uint64_t now = clk_mono_ns();
		unsigned work = 0;
		unsigned inflight = 0;
		unsigned inflight_long = 0;
		bool stop;

		pthread_mutex_lock(&c->lock);
		stop = c->stopping;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;
		work += take_submissions(c, now);
		if (c->delayed)
			inflight += take_delayed(c, now, &work); /* bounds the sleep below */
		for (struct sp__ep *ep = c->eps; ep; ep = ep->next)
			work += ep_service(c, ep, now);
		work += dp_xcli_poll(c->xcli);
		for (struct sp__ep *ep = c->eps; ep; ep = ep->next) {
			if (ep->sess && dp_xsess_is_dead(ep->sess)) {
				/* its calls were completed (or re-queued) by the transport */
				dp_xcli_close(ep->sess, 0);
				ep->sess = NULL;
				ep->ping_busy = false;
				ep->inflight = ep->inflight_long = 0;
			}
			inflight += ep->inflight;
			inflight_long += ep->inflight_long;
			if (ep->pend_head && ep->sess)
				work++; /* waiting for a slot: keep polling */
		}
		if (now - last_ka > 100 * 1000000ull) {
			for (struct sp__ep *ep = c->eps; ep; ep = ep->next)
				ep_keepalive(c, ep, now);
			last_ka = now;
		}
		if (work) {
			last_work = now;
			continue;
		}
		if (now - last_work < (uint64_t)c->cfg.spin_us * 1000)
			continue;
		io_sleep(c, inflight, inflight_long);
	}
	/* Close every session: the transport fails their calls (-ECONNABORTED). */
	for (struct sp__ep *ep = c->eps; ep; ep = ep->next) {
		if (ep->sess)
			dp_xcli_close(ep->sess, 200);
		ep->sess = NULL;
	}
	pthread_mutex_lock(&c->lock);
	c->io_exited = true; /* later submissions fail at once */
	pthread_mutex_unlock(&c->lock);
	(void)take_submissions(c, 0);
	for (struct sp__ep *ep = c->eps; ep; ep = ep->next)
		ep_fail_pending(ep, -ECONNABORTED);
	while (c->delayed) {
		struct sp__call *call = c->delayed;

		c->delayed = call->next;
		call->err = -ECONNABORTED;
		call_finish(call);
	}
	return NULL;
}

/* ---- callback thread ---- */

int
sp__exec_post(struct sp_client *c, void (*fn)(void *arg), void *arg)
{
	struct sp__work *w = malloc(sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	w->next = NULL;
	pthread_mutex_lock(&c->exec_lock);
	if (c->exec_exited) {
		/* the callback thread is gone (client destroy): run it here */
		pthread_mutex_unlock(&c->exec_lock);
		free(w);
		fn(arg);
		return 0;
	}
	if (c->exec_tail)
		c->exec_tail->next = w;
	else
		c->exec_head = w;
	c->exec_tail = w;
	pthread_cond_signal(&c->exec_cond);
	pthread_mutex_unlock(&c->exec_lock);
	return 0;
}

static void *
exec_main(void *arg)
{
	struct sp_client *c = arg;

	pthread_mutex_lock(&c->exec_lock);
	for (;;) {
		struct sp__work *w = c->exec_head;

		if (!w) {
			if (c->exec_stop) {
				c->exec_exited = true;
				break;
			}
			pthread_cond_wait(&c->exec_cond, &c->exec_lock);
			continue;
		}
		c->exec_head = w->next;
		if (!c->exec_head)
			c->exec_tail = NULL;
		pthread_mutex_unlock(&c->exec_lock);
		w->fn(w->arg);
		free(w);
		pthread_mutex_lock(&c->exec_lock);
	}
	pthread_mutex_unlock(&c->exec_lock);
	return NULL;
}

/* ---- create / destroy ---- */

static int
doorbell_open(struct sp_client *c)
{
	c->doorbell_fd = -1;
	if (c->cfg.backend != SP_BACKEND_UDP)
		return 0;
	c->doorbell_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->doorbell_fd < 0)
		return -errno;
	c->doorbell_dst = c->port->local;
	if (c->doorbell_dst.ip == 0)
		c->doorbell_dst.ip = htonl(INADDR_LOOPBACK);
	return 0;
}

int
sp_client_create(const struct sp_client_cfg *cfg, struct sp_client **out)
{
	struct dp_port_cfg pc = {0};
	struct dp_xcli_cfg xc = {0};
	struct sp_client *c;
	int err;

	if (!cfg || !cfg->namesrv || !cfg->namesrv[0] || strlen(cfg->namesrv) >= 1024)
		return -EINVAL;
	if (cfg->client_id && (!cfg->client_id[0] || strlen(cfg->client_id) > 63))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	snprintf(c->namesrv, sizeof(c->namesrv), "%s", cfg->namesrv);
	c->cfg.namesrv = c->namesrv;
	c->client_id_given = cfg->client_id != NULL;
	if (cfg->client_id)
		snprintf(c->client_id, sizeof(c->client_id), "%s", cfg->client_id);
	else
		snprintf(c->client_id, sizeof(c->client_id), "sprocket@%d", (int)getpid());
	c->cfg.client_id = c->client_id;
	c->cfg.iface = NULL; /* not kept: used only below */
	if (cfg->access_key && cfg->access_key[0] && cfg->secret_key && cfg->secret_key[0] &&
	    strlen(cfg->access_key) < sizeof(c->ak)) {
		snprintf(c->ak, sizeof(c->ak), "%s", cfg->access_key);
		hmac_sha1_key(&c->rem_key, cfg->secret_key, strlen(cfg->secret_key));
	}
	c->cfg.access_key = c->cfg.secret_key = NULL;
	c->cfg.dpdk_args = NULL;
	if (!c->cfg.connect_timeout_ms)
		c->cfg.connect_timeout_ms = 1000;
	if (!c->cfg.route_timeout_ms)
		c->cfg.route_timeout_ms = 3000;
	if (!c->cfg.route_refresh_ms)
		c->cfg.route_refresh_ms = 30000;
	if (!c->cfg.spin_us)
		c->cfg.spin_us = 50;
	if (!c->cfg.keepalive_ms)
		c->cfg.keepalive_ms = 10000;
	if (!cfg->log_level && cfg->log)
		c->cfg.log_level = SP_LOG_INFO;

	pc.backend = (enum dp_backend)cfg->backend;
	pc.ip = cfg->local_ip;
	pc.base_port = cfg->local_port;
	if (!pc.base_port && cfg->backend != SP_BACKEND_UDP) {
		/*
		 * af_packet and dpdk have no kernel to hand out a free port: pick
		 * one from the pid and a per-process counter, in the range below
		 * Linux's ephemeral ports, so clients of one process (and most
		 * processes) differ. Pass local_port to be sure.
		 */
		static _Atomic unsigned seq;
		unsigned k = atomic_fetch_add_explicit(&seq, 1,
						       memory_order_relaxed); /* a counter only */

		pc.base_port = (uint16_t)(20000 + ((unsigned)getpid() * 7 + k) % 12000);
	}
	pc.n = 1;
	pc.iface = cfg->iface;
	pc.dpdk_args = cfg->dpdk_args;
	pc.icmp_guard = cfg->backend == SP_BACKEND_AF_PACKET;
	err = dp_ports_open(&pc, &c->port);
	if (err)
		goto err_free;
	xc.slots = cfg->slots;
	xc.client_id = c->client_id;
	xc.access_key = cfg->access_key;
	xc.secret_key = cfg->secret_key;
	err = dp_xcli_create(&xc, c->port, &c->xcli);
	if (err)
		goto err_close_port;
	err = doorbell_open(c);
	if (err)
		goto err_destroy_xcli;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_mutex_init(&c->route_lock, NULL);
	pthread_cond_init(&c->route_cond, NULL);
	pthread_mutex_init(&c->exec_lock, NULL);
	pthread_cond_init(&c->exec_cond, NULL);
	err = -pthread_create(&c->exec_thread, NULL, exec_main, c);
	if (err)
		goto err_sync;
	err = -pthread_create(&c->io_thread, NULL, io_main, c);
	if (err)
		goto err_stop_exec;
	err = sp__route_thread_start(c);
	if (err)
		goto err_stop_io;
	err = sp__stats_start(c);
	if (err) {
		sp__route_thread_stop(c);
		goto err_stop_io;
	}
	*out = c;
	return 0;

err_stop_io:
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->io_thread, NULL);
err_stop_exec:
	pthread_mutex_lock(&c->exec_lock);
	c->exec_stop = true;
	pthread_cond_signal(&c->exec_cond);
	pthread_mutex_unlock(&c->exec_lock);
	pthread_join(c->exec_thread, NULL);
err_sync:
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->route_lock);
	pthread_cond_destroy(&c->route_cond);
	pthread_mutex_destroy(&c->exec_lock);
	pthread_cond_destroy(&c->exec_cond);
	if (c->doorbell_fd >= 0)
		close(c->doorbell_fd);
err_destroy_xcli:
	dp_xcli_destroy(c->xcli);
err_close_port:
	dp_ports_close(&c->port, 1);
err_free:
	free(c);
	return err;
}

void
sp_client_destroy(struct sp_client *c)
{
	if (!c)
		return;
	sp__stats_stop(c);
	sp__route_thread_stop(c);
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	if (c->sleep_mode == 1)
		pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (c->doorbell_fd >= 0)
		doorbell(c);
	pthread_join(c->io_thread, NULL);
	/* the callback thread drains what the failed calls posted, then stops */
	pthread_mutex_lock(&c->exec_lock);
	c->exec_stop = true;
	pthread_cond_signal(&c->exec_cond);
	pthread_mutex_unlock(&c->exec_lock);
	pthread_join(c->exec_thread, NULL);
	{
		const struct dp_xcli_stats *st = dp_xcli_stats(c->xcli);

		sp__log(c, SP_LOG_DEBUG,
			"transport: %llu requests, %llu retransmissions, %llu responses, %llu "
			"dropped, %llu timeouts, %llu resets",
			(unsigned long long)st->tx_requests, (unsigned long long)st->tx_retrans,
			(unsigned long long)st->rx_responses, (unsigned long long)st->rx_dropped,
			(unsigned long long)st->timeouts, (unsigned long long)st->resets);
	}
	while (c->eps) {
		struct sp__ep *ep = c->eps;

		c->eps = ep->next;
		free(ep);
	}
	dp_xcli_destroy(c->xcli);
	dp_ports_close(&c->port, 1);
	if (c->doorbell_fd >= 0)
		close(c->doorbell_fd);
	for (size_t i = 0; i < c->n_topics; i++)
		sp__topic_free(c->topics[i]);
	free(c->topics);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->route_lock);
	pthread_cond_destroy(&c->route_cond);
	pthread_mutex_destroy(&c->exec_lock);
	pthread_cond_destroy(&c->exec_cond);
	memset(&c->rem_key, 0, sizeof(c->rem_key));
	free(c);
}
