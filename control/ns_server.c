// SPDX-License-Identifier: Apache-2.0
/*
 * ns_server.c - sprocket-namesrv's epoll loop and writer thread.
 *
 * DESIGN
 * The io thread owns every socket: it accepts, reads into a per-connection
 * buffer, cuts frames (wire_rem_frame_len(), limit frame_max), answers
 * lookups itself as an RCU reader (ns_handle(), reader role) and queues the
 * rest for the writer thread. The writer runs those one at a time, runs the
 * expiry scan every scan_ms, and hands each response back on a completion
 * list, waking the io thread with an eventfd. So a registration that parses
 * 100,000 topics delays only the requests behind it on the writer; lookups
 * go on against the previous snapshot until the new one is published.
 *
 * Frames of NS_BULK_MIN bytes or more (registrations of brokers with
 * thousands of topics: 1.5 MB for 10,000) are received by a third thread,
 * the bulk receiver, at the writer's low priority. Once the io thread has
 * read the length of such a frame it takes the connection out of its epoll
 * set and hands the receive buffer over; the bulk receiver reads the rest
 * (its own epoll set, 64 KiB per recv(), the buffer growing with the bytes
 * that arrive) and hands the buffer back when the frame is complete, and the
 * io thread cuts it and passes it to the writer as any other. Copying
 * megabytes out of the socket is then work the scheduler can put behind the
 * lookups, and the io thread, which otherwise only answers small requests,
 * sleeps between them, so a waking lookup finds it ready. Meanwhile the io
 * thread still sends on that connection (responses to its earlier requests)
 * and never closes it: a close it wants waits until the buffer is back, the
 * socket shut down so that the bulk receiver lets go at once.
 *
 * Connections: level-triggered epoll. Output that the socket does not take
 * at once waits in a per-connection buffer with EPOLLOUT armed. A
 * connection with NS_PENDING_MAX requests at the writer or more than
 * NS_WBUF_HIGH bytes of unsent output stops being read until it drains, so
 * one peer cannot queue unbounded work or memory. The receive buffer grows
 * with the bytes that actually arrive (never to a length a header merely
 * announces) and shrinks back after a large frame. A frame that is too large
 * or does not decode closes that connection only (as RocketMQ's decoder
 * does); a closed connection that registered brokers drops them at once.
 *
 * Responses on one connection may leave in another order than their
 * requests (a lookup overtakes a registration): remoting matches responses
 * by opaque, as RocketMQ's own servers, which run requests on thread pools.
 *
 * Size: over 1,000 lines because it is the io thread's loop, its connections and the writer thread's queue and
 * completion list are one state machine over shared per-connection state; the bulk
 * receiver is the part that could go to a file of its own next.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <urcu/urcu-memb.h>

#include "common/atomic.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/ipcount.h"
#include "common/log.h"
#include "control/ns.h"
#include "wire/remoting.h"

#define NS_TAG "ctl.ns"
#define NS_RBUF_STEP (64u << 10)
#define NS_RBUF_KEEP (4u << 20)	 /* a larger idle receive buffer is released */
#define NS_PENDING_MAX 64	 /* requests per connection at the writer */
#define NS_WBUF_HIGH (8u << 20)	 /* stop reading a connection above this much unsent output */
#define NS_STEAL_MIN (64u << 10) /* frames this large move to the writer without a copy */
#define NS_EVENTS 64
#define NS_WRITER_NICE 10	 /* the writer's and the bulk receiver's */
#define NS_BULK_MIN (256u << 10) /* frames this large are received off the io thread */
#define NS_BULK_EVENTS 16

struct ns_conn {
	int fd;
	uint64_t id;
	uint32_t ip; /* peer IPv4, network order */
	uint64_t last_ms;
	uint8_t *rbuf;
	size_t rlen;
	size_t rcap;
	uint64_t rheld; /* what rbuf counts in maxFrameMemory now (rmem_hold()) */
	uint8_t *wbuf;
	size_t woff;
	size_t wlen;
	size_t wcap;
	uint32_t pending;      /* requests queued at the writer */
	bool wrote;	       /* sent a request that changes state */
	bool out_armed;	       /* EPOLLOUT in the epoll set */
	bool paused;	       /* EPOLLIN out of the epoll set */
	bool bulk;	       /* receive handed to the bulk receiver; fd out of the epoll set */
	const char *close_why; /* a close waiting for the bulk receiver ("" for a quiet one) */
	char peer[INET_ADDRSTRLEN + 8];
};

enum ns_job_kind {
	NS_JOB_REQ,
	NS_JOB_CLOSED,
	NS_JOB_BULK, /* frame: a receive buffer, len bytes in, want in all */
};

/* io -> writer and back. Owned by whichever list or thread holds it. */
struct ns_job {
	struct ns_job *next;
	enum ns_job_kind kind;
	int fd;
	uint64_t conn;
	uint32_t ip; /* the connection's peer, network order */
	uint8_t *frame;
	size_t len;
	size_t cap;    /* of frame: it may come back as the connection's receive buffer */
	uint64_t held; /* NS_JOB_BULK: what frame counts in maxFrameMemory */
	uint8_t *resp;
	size_t resp_len;
	int rc;
	size_t want;	  /* NS_JOB_BULK: the frame's length */
	uint64_t last_ns; /* NS_JOB_BULK: when a byte last arrived */
	char peer[INET_ADDRSTRLEN + 8];
};

/*
 * Ownership: conns and every connection belong to the io thread. The job
 * lists, writer_stop and bulk_stop are guarded by mu; a job on the bulk
 * receiver's active list is its own. stop is set by any thread.
 * st: see ns_handle()'s roles. Everything else is immutable after create.
 */
struct ns_server {
	struct ns_server_conf conf;
	char bind_addr[INET_ADDRSTRLEN];
	char *kv_path;
	struct ns_state *st;
	int lfd;
	int epfd;
	int evfd;
	uint16_t port;
	_Atomic bool stop;
	void (*poll_fn)(void *arg); /* ns_server_set_poll(): once per io loop turn */
	void *poll_arg;

	/*
	 * Bytes of receive buffers (io thread's and bulk receiver's; complete
	 * frames at the writer are not counted): maxFrameMemory. Refusals by
	 * reason, and the listener's rest after accept() ran out of descriptors.
	 */
	_Atomic uint64_t rmem;
	_Atomic uint64_t refused_mem;
	uint64_t refused_size;
	uint64_t refused_conns;
	uint64_t refused_addr;
	uint64_t refused_nofd;
	uint64_t accept_resume_ms;
	uint32_t accept_backoff_ms;

	/* io thread only */
	struct ipcount per_addr; /* connections per source address */
	struct ns_conn **conns;	 /* by fd */
	size_t conns_cap;
	uint32_t n_conns;
	uint64_t next_id;

	pthread_t writer;
	bool writer_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ns_job *jobs; /* FIFO: head, tail (mu) */
	struct ns_job *jobs_tail;
	struct ns_job *done;
	struct ns_job *done_tail;
	bool writer_stop;

	pthread_t bulk;
	bool bulk_started;
	int bulk_epfd;
	int bulk_evfd;
	struct ns_job *bulk_in; /* io -> bulk receiver (mu) */
	struct ns_job *bulk_in_tail;
	bool bulk_stop;
};

static void
job_push(struct ns_job **head, struct ns_job **tail, struct ns_job *j)
{
	j->next = NULL;
	if (*tail != NULL)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

static void
job_free(struct ns_job *j)
{
	free(j->frame);
	free(j->resp);
	free(j);
}

/*
 * The receive buffer's next size: the bytes in plus one slice, and toward
 * the frame's length (@total, 0 if unknown) by doubling its capacity @cap,
 * never beyond the frame, so memory follows the bytes that arrive, not what
 * a header announces, and a big frame costs log(size) reallocs, not one per
 * slice (each a copy of what is in: quadratic).
 */
static size_t
rbuf_want(size_t rlen, size_t cap, size_t total)
{
	size_t want = rlen + NS_RBUF_STEP;

	if (want <= cap)
		return cap;
	if (total > rlen)
		want = SP_MIN(total, SP_MAX(want, cap * 2));
	return want;
}

/*
 * maxFrameMemory counts what a receive buffer holding an unfinished frame
 * has beyond its first NS_RBUF_STEP bytes: that much each connection always
 * has (bounded by maxConnections), so a flood of big unfinished frames
 * cannot keep a new connection from a small request; and a buffer kept warm
 * for a broker's next registration (up to NS_RBUF_KEEP) counts only while a
 * frame is in it, so idle brokers never use up the cap. Each buffer's
 * counted bytes are in its owner's held field (connection or bulk job).
 */
static uint64_t
rmem_counted(size_t cap)
{
	return cap > NS_RBUF_STEP ? cap - NS_RBUF_STEP : 0;
}

/* *@held becomes @now: the total follows. Context: the buffer's owner. */
static void
rmem_hold(struct ns_server *srv, uint64_t *held, uint64_t now)
{
	atomic_fetch_add_explicit(&srv->rmem, now - *held, memory_order_relaxed);
	*held = now;
}

/*
 * A buffer is to grow to @want bytes for an unfinished frame. Return: true
 * (*@held now counts it), false past maxFrameMemory (counted as a refusal).
 * Context: the io thread or the bulk receiver.
 */
static bool
rmem_take(struct ns_server *srv, uint64_t *held, size_t want)
{
	uint64_t now = rmem_counted(want);
	uint64_t add = now > *held ? now - *held : 0;
	uint64_t was = atomic_fetch_add_explicit(&srv->rmem, add, memory_order_relaxed);

	if (was + add <= srv->conf.frame_mem_max) {
		*held += add;
		return true;
	}
	atomic_fetch_sub_explicit(&srv->rmem, add, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->refused_mem, 1, memory_order_relaxed);
	return false;
}

/* The length a frame's first 4 bytes announce, the length field included. */
static size_t
frame_total(const uint8_t *p)
{
	return ((size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3]) + 4;
}

static void
wake(int fd)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is already non-zero: the reader will wake. */
	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err_ratelimited(NS_TAG, "eventfd write failed: %s", err_str(errno));
}

/*
 * Writer thread
 */

static void
writer_run_job(struct ns_server *srv, struct ns_job *j)
{
	int n;

	if (j->kind == NS_JOB_CLOSED) {
		n = ns_conn_closed(srv->st, j->conn);
		if (n > 0)
			log_info_ratelimited(NS_TAG,
					     "connection %s closed: %d broker address(es) dropped",
					     j->peer, n);
		else if (n < 0)
			log_err(NS_TAG, "dropping the brokers of %s failed: %s", j->peer,
				err_str(n));
		return;
	}
	j->rc = ns_handle(srv->st, NS_ROLE_WRITER, j->conn, j->ip, clk_mono_ns() / 1000000,
			  j->frame, j->len, &j->resp, &j->resp_len);
}

static void *
writer_main(void *arg)
{
	struct ns_server *srv = arg;
	uint64_t next_scan = clk_mono_ns() / 1000000 + srv->conf.scan_ms;
	uint64_t next_tick = 0;

	/*
	 * Registrations are background work; lookups are what clients wait on.
	 * On a box with fewer cores than runnable threads the scheduler then
	 * prefers the io thread (nice 10 is about a tenth of the CPU weight),
	 * and the writer still progresses when the io thread is busy.
	 */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), NS_WRITER_NICE) != 0)
		log_warn(NS_TAG, "lowering the writer thread's priority failed: %s",
			 err_str(errno));
	pthread_mutex_lock(&srv->mu);
	while (!srv->writer_stop) {
		uint64_t now = clk_mono_ns() / 1000000;
		struct ns_job *j;

		if (now >= next_scan) {
			int n;

			pthread_mutex_unlock(&srv->mu);
			n = ns_expire(srv->st, now, srv->conf.expire_ms);
			if (n > 0)
				log_info(NS_TAG,
					 "%d broker address(es) silent for over %" PRIu64
					 " ms dropped",
					 n, srv->conf.expire_ms);
			else if (n < 0)
				log_err(NS_TAG, "expiry scan failed: %s", err_str(n));
			next_scan = now + srv->conf.scan_ms;
			pthread_mutex_lock(&srv->mu);
			continue;
		}
		if (now >= next_tick) {
			pthread_mutex_unlock(&srv->mu);
			ns_tick(srv->st, now);
			next_tick = now + 1000;
			pthread_mutex_lock(&srv->mu);
			continue;
		}
		j = srv->jobs;
		if (j == NULL) {
			uint64_t wait_ns = (SP_MIN(next_scan, next_tick) - now) * 1000000;
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(wait_ns / CLK_NS_PER_SEC);
			ts.tv_nsec += (long)(wait_ns % CLK_NS_PER_SEC);
			if (ts.tv_nsec >= (long)CLK_NS_PER_SEC) {
				ts.tv_sec++;
				ts.tv_nsec -= (long)CLK_NS_PER_SEC;
			}
			pthread_cond_timedwait(&srv->cv, &srv->mu, &ts);
			continue;
		}
		srv->jobs = j->next;
		if (srv->jobs == NULL)
			srv->jobs_tail = NULL;
		pthread_mutex_unlock(&srv->mu);

		writer_run_job(srv, j);

		pthread_mutex_lock(&srv->mu);
		if (j->kind == NS_JOB_CLOSED) {
			job_free(j);
			continue;
		}
		job_push(&srv->done, &srv->done_tail, j);
		wake(srv->evfd);
	}
	pthread_mutex_unlock(&srv->mu);
	return NULL;
}

/*
 * Bulk receiver thread
 */

/* The frame is in, or the connection failed: hand the buffer back to io. */
static void
bulk_done(struct ns_server *srv, struct ns_job **active, struct ns_job *j, int rc)
{
	struct ns_job **pp = active;

	while (*pp != j)
		pp = &(*pp)->next;
	*pp = j->next;
	epoll_ctl(srv->bulk_epfd, EPOLL_CTL_DEL, j->fd, NULL);
	j->rc = rc;
	pthread_mutex_lock(&srv->mu);
	job_push(&srv->done, &srv->done_tail, j);
	pthread_mutex_unlock(&srv->mu);
	wake(srv->evfd);
}

/* One slice. Return: 1 the frame is complete, 0 more to come, or -errno. */
static int
bulk_recv(struct ns_server *srv, struct ns_job *j)
{
	size_t want = rbuf_want(j->len, j->cap, j->want);
	ssize_t n;

	if (want > j->cap) {
		uint8_t *nb;

		uint64_t held = j->held;

		if (!rmem_take(srv, &j->held, want))
			return -ENOSPC;
		nb = realloc(j->frame, want);
		if (nb == NULL) {
			rmem_hold(srv, &j->held, held);
			return -ENOMEM;
		}
		j->frame = nb;
		j->cap = want;
	}
	n = recv(j->fd, j->frame + j->len, SP_MIN(j->want - j->len, (size_t)NS_RBUF_STEP), 0);
	if (n == 0)
		return -EPIPE;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	j->len += (size_t)n;
	j->last_ns = clk_mono_ns();
	return j->len == j->want;
}

static void *
bulk_main(void *arg)
{
	struct ns_server *srv = arg;
	struct epoll_event evs[NS_BULK_EVENTS];
	struct ns_job *active = NULL; /* this thread's: the frames being received */

	/* Bulk bytes are background work, like the writer's (see writer_main). */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), NS_WRITER_NICE) != 0)
		log_warn(NS_TAG, "lowering the bulk receiver's priority failed: %s",
			 err_str(errno));
	for (;;) {
		int n = epoll_wait(srv->bulk_epfd, evs, NS_BULK_EVENTS, 200);
		uint64_t now = clk_mono_ns();
		struct ns_job *in;
		bool stop;

		pthread_mutex_lock(&srv->mu);
		stop = srv->bulk_stop;
		in = srv->bulk_in;
		srv->bulk_in = srv->bulk_in_tail = NULL;
		pthread_mutex_unlock(&srv->mu);
		while (in != NULL) {
			struct ns_job *j = in;
			struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = j};

			in = j->next;
			j->next = active;
			active = j;
			j->last_ns = now;
			if (epoll_ctl(srv->bulk_epfd, EPOLL_CTL_ADD, j->fd, &ev) != 0)
				bulk_done(srv, &active, j, -errno);
		}
		if (stop)
			break;
		for (int i = 0; i < n; i++) {
			struct ns_job *j = evs[i].data.ptr;
			int rc;

			if (j == NULL) {
				uint64_t cnt;

				(void)!read(srv->bulk_evfd, &cnt, sizeof(cnt));
				continue;
			}
			rc = bulk_recv(srv, j);
			if (rc != 0)
				bulk_done(srv, &active, j, SP_MIN(rc, 0));
		}
		/* A peer that stops half-way is closed as an idle one would be. */
		now = clk_mono_ns();
		for (struct ns_job *j = active, *next; j != NULL && srv->conf.idle_ms > 0;
		     j = next) {
			next = j->next;
			if (now > j->last_ns + srv->conf.idle_ms * 1000000)
				bulk_done(srv, &active, j, -ETIMEDOUT);
		}
	}
	/* Shutting down: the buffers go back so that destroy frees them. */
	while (active != NULL)
		bulk_done(srv, &active, active, -ECANCELED);
	return NULL;
}

/*
 * Connections (io thread)
 */

static void
conn_epoll(struct ns_server *srv, struct ns_conn *c)
{
	struct epoll_event ev = {.data.fd = c->fd};

	if (c->bulk)
		return; /* out of the set; its mask is set again when it comes back */
	ev.events = (c->paused ? 0 : EPOLLIN) | (c->out_armed ? EPOLLOUT : 0) | EPOLLRDHUP;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		log_err_ratelimited(NS_TAG, "epoll_ctl(%s) failed: %s", c->peer, err_str(errno));
}

static void
conn_close(struct ns_server *srv, struct ns_conn *c, const char *why)
{
	if (c->bulk) {
		/* The bulk receiver holds the fd: it lets go at the shutdown. */
		if (c->close_why == NULL) {
			c->close_why = why != NULL ? why : "";
			shutdown(c->fd, SHUT_RDWR);
		}
		return;
	}
	if (why != NULL)
		log_info_ratelimited(NS_TAG, "closing connection %s: %s", c->peer, why);
	if (c->wrote) {
		struct ns_job *j = calloc(1, sizeof(*j));

		if (j != NULL) {
			j->kind = NS_JOB_CLOSED;
			j->conn = c->id;
			j->ip = c->ip;
			snprintf(j->peer, sizeof(j->peer), "%s", c->peer);
			pthread_mutex_lock(&srv->mu);
			job_push(&srv->jobs, &srv->jobs_tail, j);
			pthread_cond_signal(&srv->cv);
			pthread_mutex_unlock(&srv->mu);
		} else {
			/* The brokers stay until the expiry scan drops them. */
			log_err(NS_TAG, "no memory to drop the brokers of %s", c->peer);
		}
	}
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	srv->conns[c->fd] = NULL;
	srv->n_conns--;
	ipcount_sub(&srv->per_addr, c->ip);
	rmem_hold(srv, &c->rheld, 0);
	free(c->rbuf);
	free(c->wbuf);
	free(c);
}

/* Return: 0, or -1 when the connection was closed. */
static int
conn_flush(struct ns_server *srv, struct ns_conn *c)
{
	while (c->woff < c->wlen) {
		ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_close(srv, c, "send failed");
			return -1;
		}
		c->woff += (size_t)n;
	}
	if (c->woff == c->wlen) {
		c->woff = 0;
		c->wlen = 0;
		if (c->wcap > NS_RBUF_KEEP) {
			free(c->wbuf);
			c->wbuf = NULL;
			c->wcap = 0;
		}
	}
	if (c->out_armed != (c->wlen > 0)) {
		c->out_armed = c->wlen > 0;
		conn_epoll(srv, c);
	}
	return 0;
}

/* Queue @len bytes of @buf and try to send. Return: 0, or -1 when closed. */
static int
conn_send(struct ns_server *srv, struct ns_conn *c, const uint8_t *buf, size_t len)
{
	size_t unsent = c->wlen - c->woff;

	if (c->wlen + len > c->wcap) {
		size_t cap = SP_MAX(c->wcap * 2, unsent + len);
		uint8_t *nb;

		if (c->woff > 0 && unsent > 0)
			memmove(c->wbuf, c->wbuf + c->woff, unsent);
		c->wlen = unsent;
		c->woff = 0;
		if (c->wlen + len > c->wcap) {
			nb = realloc(c->wbuf, cap);
			if (nb == NULL) {
				conn_close(srv, c, "no memory for output");
				return -1;
			}
			c->wbuf = nb;
			c->wcap = cap;
		}
	}
	memcpy(c->wbuf + c->wlen, buf, len);
	c->wlen += len;
	return conn_flush(srv, c);
}

static bool
conn_should_pause(const struct ns_conn *c)
{
	return c->pending >= NS_PENDING_MAX || c->wlen - c->woff > NS_WBUF_HIGH;
}

/* Hand a state-changing frame to the writer. Return: 0, -1 closed. */
static int
conn_to_writer(struct ns_server *srv, struct ns_conn *c, size_t off, size_t flen)
{
	struct ns_job *j = calloc(1, sizeof(*j));

	if (j == NULL) {
		conn_close(srv, c, "no memory for a request");
		return -1;
	}
	if (off == 0 && flen == c->rlen && flen >= NS_STEAL_MIN) {
		/* The buffer holds exactly this frame: move it, no copy (whole: uncounted). */
		rmem_hold(srv, &c->rheld, 0);
		j->frame = c->rbuf;
		j->cap = c->rcap;
		c->rbuf = NULL;
		c->rcap = 0;
	} else {
		j->frame = malloc(flen);
		if (j->frame == NULL) {
			free(j);
			conn_close(srv, c, "no memory for a request");
			return -1;
		}
		memcpy(j->frame, c->rbuf + off, flen);
		j->cap = flen;
	}
	j->kind = NS_JOB_REQ;
	j->fd = c->fd;
	j->conn = c->id;
	j->ip = c->ip;
	j->len = flen;
	c->pending++;
	c->wrote = true;
	pthread_mutex_lock(&srv->mu);
	job_push(&srv->jobs, &srv->jobs_tail, j);
	pthread_cond_signal(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
	return 0;
}

static int conn_process(struct ns_server *srv, struct ns_conn *c);

/*
 * Hand the receive of a large frame to the bulk receiver: the buffer (with
 * the frame's first bytes, and nothing after them) moves, and the fd leaves
 * the epoll set until it comes back (srv_completions()).
 */
static void
conn_to_bulk(struct ns_server *srv, struct ns_conn *c, size_t total)
{
	struct ns_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return; /* the io thread reads it itself */
	j->kind = NS_JOB_BULK;
	j->fd = c->fd;
	j->conn = c->id;
	j->ip = c->ip;
	j->frame = c->rbuf;
	j->len = c->rlen;
	j->cap = c->rcap;
	j->held = c->rheld;
	c->rheld = 0;
	j->want = total;
	c->rbuf = NULL;
	c->rlen = 0;
	c->rcap = 0;
	c->bulk = true;
	c->pending++; /* spares it the idle sweep; the bulk receiver times it out */
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	pthread_mutex_lock(&srv->mu);
	job_push(&srv->bulk_in, &srv->bulk_in_tail, j);
	pthread_mutex_unlock(&srv->mu);
	wake(srv->bulk_evfd);
}

/* The bulk receiver is done with @j (srv_completions()). */
static void
conn_from_bulk(struct ns_server *srv, struct ns_conn *c, struct ns_job *j)
{
	struct epoll_event ev = {.data.fd = c->fd};

	c->bulk = false;
	c->pending--;
	c->rbuf = j->frame;
	c->rlen = j->len;
	c->rcap = j->cap;
	c->rheld = j->held;
	j->held = 0;
	j->frame = NULL;
	if (c->close_why != NULL) {
		conn_close(srv, c, c->close_why[0] != '\0' ? c->close_why : NULL);
		return;
	}
	if (j->rc != 0) {
		conn_close(srv, c,
			   j->rc == -EPIPE	 ? NULL
			   : j->rc == -ETIMEDOUT ? "idle in the middle of a frame"
			   : j->rc == -ENOMEM	 ? "no memory for input"
			   : j->rc == -ENOSPC
				   ? "its frame would take the memory held by unfinished "
				     "frames past maxFrameMemory"
				   : "recv failed");
		return;
	}
	c->last_ms = clk_mono_ns() / 1000000;
	ev.events = (c->paused ? 0 : EPOLLIN) | (c->out_armed ? EPOLLOUT : 0) | EPOLLRDHUP;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
		conn_close(srv, c, "epoll_ctl failed");
		return;
	}
	(void)conn_process(srv, c);
}

/* Run every complete frame in the receive buffer. Return: 0, -1 closed. */
static int
conn_process(struct ns_server *srv, struct ns_conn *c)
{
	size_t off = 0;

	while (!conn_should_pause(c)) {
		size_t flen;
		uint8_t *resp;
		size_t resp_len;
		int rc;

		if (c->rlen - off < 4)
			break; /* also covers rbuf == NULL after a move to the writer */
		rc = wire_rem_frame_len(c->rbuf + off, c->rlen - off, srv->conf.frame_max, &flen);
		if (rc == -EAGAIN)
			break;
		if (rc != 0) {
			srv->refused_size += rc == -EMSGSIZE;
			conn_close(srv, c,
				   rc == -EMSGSIZE ? "frame over frameMaxLength"
						   : "bad frame length");
			return -1;
		}
		rc = ns_handle(srv->st, NS_ROLE_READER, c->id, c->ip, clk_mono_ns() / 1000000,
			       c->rbuf + off, flen, &resp, &resp_len);
		if (rc == NS_HANDLE_WRITER) {
			if (conn_to_writer(srv, c, off, flen) != 0)
				return -1;
			if (c->rbuf == NULL) { /* moved to the writer */
				c->rlen = 0;
				off = 0;
				break;
			}
		} else if (rc < 0) {
			conn_close(srv, c, rc == -ENOMEM ? "no memory" : "undecodable frame");
			return -1;
		} else if (resp != NULL) {
			rc = conn_send(srv, c, resp, resp_len);
			free(resp);
			if (rc != 0)
				return -1;
		}
		off += flen;
	}
	if (off > 0) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	if (c->rcap > NS_RBUF_KEEP && c->rlen < NS_RBUF_STEP) {
		uint8_t *nb = malloc(NS_RBUF_STEP);

		if (nb != NULL) {
			memcpy(nb, c->rbuf, c->rlen);
			free(c->rbuf);
			c->rbuf = nb;
			c->rcap = NS_RBUF_STEP;
		}
	}
	/* counted while it holds an unfinished frame (a kept buffer is not, once empty) */
	rmem_hold(srv, &c->rheld, c->rlen > 0 ? rmem_counted(c->rcap) : 0);
	if (c->paused != conn_should_pause(c)) {
		c->paused = !c->paused;
		conn_epoll(srv, c);
	}
	return 0;
}

static void
conn_read(struct ns_server *srv, struct ns_conn *c)
{
	size_t total = c->rlen >= 4 ? frame_total(c->rbuf) : 0;
	size_t want = rbuf_want(c->rlen, c->rcap, total <= srv->conf.frame_max ? total : 0);
	ssize_t n;

	if (c->bulk)
		return; /* a stale event from before the hand-over */
	if (want > c->rcap) {
		uint8_t *nb;

		uint64_t held = c->rheld;

		if (!rmem_take(srv, &c->rheld, want)) {
			conn_close(srv, c,
				   "its frame would take the memory held by unfinished frames past "
				   "maxFrameMemory");
			return;
		}
		nb = realloc(c->rbuf, want);
		if (nb == NULL) {
			rmem_hold(srv, &c->rheld, held);
			conn_close(srv, c, "no memory for input");
			return;
		}
		c->rbuf = nb;
		c->rcap = want;
	}
	/* At most NS_RBUF_STEP per call: a big frame arrives in slices, and the
	 * lookups of other connections are served between them. */
	n = recv(c->fd, c->rbuf + c->rlen, SP_MIN(c->rcap - c->rlen, (size_t)NS_RBUF_STEP), 0);
	if (n == 0) {
		conn_close(srv, c, NULL);
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(srv, c, "recv failed");
		return;
	}
	c->rlen += (size_t)n;
	c->last_ms = clk_mono_ns() / 1000000;
	if (conn_process(srv, c) != 0)
		return;
	/* What is left is the start of one frame: a large one is received elsewhere. */
	if (!c->paused && c->rlen >= 4 && (total = frame_total(c->rbuf)) >= NS_BULK_MIN &&
	    total <= srv->conf.frame_max && total > c->rlen)
		conn_to_bulk(srv, c, total);
}

/*
 * accept() failed for want of a descriptor or memory: the listener leaves
 * the epoll set (level-triggered, it would report the same connection again
 * at once: a spin) for 100 ms, doubling to 1 s while it keeps failing.
 */
static void
accept_rest(struct ns_server *srv, int err)
{
	srv->accept_backoff_ms = SP_MIN(SP_MAX(srv->accept_backoff_ms * 2, 100u), 1000u);
	srv->accept_resume_ms = clk_mono_ns() / 1000000 + srv->accept_backoff_ms;
	(void)epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->lfd, NULL);
	if (err == EMFILE || err == ENFILE)
		srv->refused_nofd++;
	log_warn(NS_TAG, "accepting a connection: %s (%u open); the listener rests %u ms%s",
		 err_str(err), srv->n_conns, srv->accept_backoff_ms,
		 err == EMFILE ? ": the process is at its descriptor limit (ulimit -n)" : "");
}

static void
accept_wake(struct ns_server *srv, uint64_t now_ms)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = srv->lfd};

	if (srv->accept_resume_ms == 0 || now_ms < srv->accept_resume_ms)
		return;
	srv->accept_resume_ms = 0;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->lfd, &ev) != 0)
		accept_rest(srv, errno);
}

static void
srv_accept(struct ns_server *srv)
{
	for (;;) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		struct epoll_event ev;
		struct ns_conn *c;
		int one = 1;
		int fd = accept4(srv->lfd, (struct sockaddr *)&sa, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				accept_rest(srv, errno);
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			continue; /* EINTR, ECONNABORTED, EPROTO...: that connection only */
		}
		srv->accept_backoff_ms = 0;
		if (srv->conf.fd_ceiling && (uint32_t)fd >= srv->conf.fd_ceiling) {
			/* descriptors go lowest first: the rest is fdReserve's */
			srv->refused_nofd++;
			log_warn(NS_TAG,
				 "refusing a connection: descriptor %d reaches the part of the "
				 "limit "
				 "kept for the NameServer's files (fdReserve)",
				 fd);
			close(fd);
			continue;
		}
		if (srv->n_conns >= srv->conf.max_conns) {
			srv->refused_conns++;
			log_warn_ratelimited(NS_TAG,
					     "maxConnections (%u) reached: connection refused",
					     srv->conf.max_conns);
			close(fd);
			continue;
		}
		if (srv->conf.max_conns_per_addr &&
		    ipcount_get(&srv->per_addr, sa.sin_addr.s_addr) >=
			    srv->conf.max_conns_per_addr) {
			char ip[INET_ADDRSTRLEN] = "?";

			inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
			srv->refused_addr++;
			log_warn_ratelimited(NS_TAG,
					     "refusing a connection from %s: %u open from it "
					     "(maxConnectionsPerAddr)",
					     ip, srv->conf.max_conns_per_addr);
			close(fd);
			continue;
		}
		if ((size_t)fd >= srv->conns_cap) {
			size_t cap = SP_MAX((size_t)fd + 1, srv->conns_cap * 2);
			struct ns_conn **nc = realloc(srv->conns, cap * sizeof(*nc));

			if (nc == NULL) {
				close(fd);
				continue;
			}
			memset(nc + srv->conns_cap, 0, (cap - srv->conns_cap) * sizeof(*nc));
			srv->conns = nc;
			srv->conns_cap = cap;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->id = ++srv->next_id;
		c->ip = sa.sin_addr.s_addr;
		c->last_ms = clk_mono_ns() / 1000000;
		inet_ntop(AF_INET, &sa.sin_addr, c->peer, INET_ADDRSTRLEN);
		snprintf(c->peer + strlen(c->peer), sizeof(c->peer) - strlen(c->peer), ":%u",
			 ntohs(sa.sin_port));
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.fd = fd;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			free(c);
			continue;
		}
		srv->conns[fd] = c;
		srv->n_conns++;
		(void)ipcount_add(&srv->per_addr, c->ip);
	}
}

static void
srv_completions(struct ns_server *srv)
{
	struct ns_job *list;
	uint64_t cnt;

	if (read(srv->evfd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		log_err_ratelimited(NS_TAG, "eventfd read failed: %s", err_str(errno));
	pthread_mutex_lock(&srv->mu);
	list = srv->done;
	srv->done = NULL;
	srv->done_tail = NULL;
	pthread_mutex_unlock(&srv->mu);

	while (list != NULL) {
		struct ns_job *j = list;
		struct ns_conn *c = (size_t)j->fd < srv->conns_cap ? srv->conns[j->fd] : NULL;

		list = j->next;
		if (j->kind == NS_JOB_BULK) {
			/* Its connection cannot have gone: closes wait for this. */
			if (c != NULL && c->id == j->conn)
				conn_from_bulk(srv, c, j);
			else
				rmem_hold(srv, &j->held, 0);
			job_free(j);
			continue;
		}
		/* The connection may be gone, or its fd reused: match the id. */
		if (c != NULL && c->id == j->conn) {
			c->pending--;
			/*
			 * A moved receive buffer comes home: the broker's next
			 * registration of the same size then lands in memory that
			 * is already faulted in, instead of a fresh mapping grown
			 * by doubling (page faults and munmap IPIs on the io thread).
			 */
			if (!c->bulk && j->frame != NULL && j->cap > c->rcap &&
			    j->cap <= NS_RBUF_KEEP && c->rlen <= j->cap) {
				if (c->rlen > 0)
					memcpy(j->frame, c->rbuf, c->rlen);
				free(c->rbuf);
				c->rbuf = j->frame;
				c->rcap = j->cap;
				j->frame = NULL;
				rmem_hold(srv, &c->rheld, c->rlen > 0 ? rmem_counted(c->rcap) : 0);
			}
			if (j->rc < 0)
				conn_close(srv, c, "request failed (no memory)");
			else if ((j->resp == NULL ||
				  conn_send(srv, c, j->resp, j->resp_len) == 0) &&
				 c->paused)
				(void)conn_process(srv, c); /* resume: frames may wait in rbuf */
		}
		job_free(j);
	}
}

static void
srv_idle_sweep(struct ns_server *srv, uint64_t now_ms)
{
	for (size_t fd = 0; fd < srv->conns_cap; fd++) {
		struct ns_conn *c = srv->conns[fd];

		if (c != NULL && c->pending == 0 && now_ms - c->last_ms > srv->conf.idle_ms)
			conn_close(srv, c, "idle");
	}
}

/*
 * Setup and the loop
 */

int
ns_server_create(const struct ns_server_conf *conf, struct ns_server **out)
{
	struct ns_server *srv = calloc(1, sizeof(*srv));
	struct ns_conf stc;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct epoll_event ev = {.events = EPOLLIN};
	pthread_condattr_t ca;
	int one = 1;
	int rc;

	if (srv == NULL)
		return -ENOMEM;
	srv->lfd = srv->epfd = srv->evfd = srv->bulk_epfd = srv->bulk_evfd = -1;
	srv->conf = *conf;
	if (srv->conf.frame_mem_max == 0)
		srv->conf.frame_mem_max = 256ull << 20; /* maxFrameMemory's default */
	srv->kv_path = strdup(conf->st.kv_path != NULL ? conf->st.kv_path : "");
	if (srv->kv_path == NULL) {
		free(srv);
		return -ENOMEM;
	}
	snprintf(srv->bind_addr, sizeof(srv->bind_addr), "%s", conf->bind_addr);
	srv->conf.bind_addr = srv->bind_addr;
	srv->conf.st.kv_path = srv->kv_path;
	pthread_mutex_init(&srv->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv->cv, &ca);
	pthread_condattr_destroy(&ca);

	if ((rc = ipcount_init(&srv->per_addr, conf->max_conns)) != 0)
		goto err;
	stc = srv->conf.st;
	if ((rc = ns_state_create(&stc, &srv->st)) != 0)
		goto err;
	if (inet_pton(AF_INET, conf->bind_addr, &sa.sin_addr) != 1) {
		log_err(NS_TAG, "bindAddress '%s' is not an IPv4 address", conf->bind_addr);
		rc = -EINVAL;
		goto err;
	}
	sa.sin_port = htons(conf->port);
	srv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->lfd < 0 ||
	    setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(srv->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(srv->lfd, 1024) != 0 ||
	    getsockname(srv->lfd, (struct sockaddr *)&sa, &sl) != 0) {
		rc = -errno;
		log_err(NS_TAG, "listening on %s:%u failed: %s", conf->bind_addr, conf->port,
			err_str(rc));
		goto err;
	}
	srv->port = ntohs(sa.sin_port);
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	srv->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	srv->bulk_epfd = epoll_create1(EPOLL_CLOEXEC);
	srv->bulk_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (srv->epfd < 0 || srv->evfd < 0 || srv->bulk_epfd < 0 || srv->bulk_evfd < 0) {
		rc = -errno;
		goto err;
	}
	ev.data.ptr = NULL; /* the bulk receiver's jobs are data.ptr; its wake-up is NULL */
	if (epoll_ctl(srv->bulk_epfd, EPOLL_CTL_ADD, srv->bulk_evfd, &ev) != 0) {
		rc = -errno;
		goto err;
	}
	ev.data.fd = srv->lfd;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->lfd, &ev) != 0) {
		rc = -errno;
		goto err;
	}
	ev.data.fd = srv->evfd;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->evfd, &ev) != 0) {
		rc = -errno;
		goto err;
	}
	*out = srv;
	return 0;

err:
	ns_server_destroy(srv);
	return rc;
}

uint16_t
ns_server_port(const struct ns_server *srv)
{
	return srv->port;
}

int
ns_server_wake_fd(const struct ns_server *srv)
{
	return srv->evfd;
}

struct ns_state *
ns_server_state(struct ns_server *srv)
{
	return srv->st;
}

void
ns_server_set_poll(struct ns_server *srv, void (*fn)(void *arg), void *arg)
{
	srv->poll_fn = fn;
	srv->poll_arg = arg;
}

void
ns_server_stats(const struct ns_server *srv, struct ns_server_stats *out)
{
	out->conns = srv->n_conns;
	out->refused_conns = srv->refused_conns;
	out->refused_addr = srv->refused_addr;
	out->refused_nofd = srv->refused_nofd;
	out->refused_size = srv->refused_size;
	out->refused_mem = atomic_load_relaxed(&srv->refused_mem);
	out->frame_mem = atomic_load_relaxed(&srv->rmem);
}

void
ns_server_stop(struct ns_server *srv)
{
	atomic_store_relaxed(&srv->stop, true);
	wake(srv->evfd);
}

int
ns_server_run(struct ns_server *srv, int sig_fd)
{
	struct epoll_event evs[NS_EVENTS];
	uint64_t next_sweep = clk_mono_ns() / 1000000 + 1000;
	int rc = 0;

	if (sig_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = sig_fd};

		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, sig_fd, &ev) != 0)
			return -errno;
	}
	rc = pthread_create(&srv->writer, NULL, writer_main, srv);
	if (rc != 0)
		return -rc;
	srv->writer_started = true;
	rc = pthread_create(&srv->bulk, NULL, bulk_main, srv);
	if (rc != 0) {
		rc = -rc;
		atomic_store_relaxed(&srv->stop, true); /* stop the writer below */
	} else {
		srv->bulk_started = true;
	}
	urcu_memb_register_thread();

	while (!atomic_load_relaxed(&srv->stop)) {
		int wait_ms = srv->accept_resume_ms ? (int)srv->accept_backoff_ms : 1000;
		int n = epoll_wait(srv->epfd, evs, NS_EVENTS, wait_ms);
		uint64_t now;

		if (n < 0 && errno != EINTR) {
			rc = -errno;
			log_err(NS_TAG, "epoll_wait failed: %s", err_str(rc));
			break;
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			struct ns_conn *c;

			if (fd == srv->lfd) {
				srv_accept(srv);
			} else if (fd == srv->evfd) {
				srv_completions(srv);
			} else if (fd == sig_fd) {
				struct signalfd_siginfo si;

				if (read(sig_fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
					continue;
				/* logrotate's: reopen logFile, never stop */
				if (si.ssi_signo == SIGHUP) {
					log_reopen_said(NS_TAG);
					continue;
				}
				log_info(NS_TAG, "signal %u: shutting down", si.ssi_signo);
				atomic_store_relaxed(&srv->stop, true);
			} else if ((size_t)fd < srv->conns_cap && (c = srv->conns[fd]) != NULL) {
				if (evs[i].events & EPOLLOUT) {
					if (conn_flush(srv, c) != 0)
						continue;
					if (c->paused && !conn_should_pause(c) &&
					    conn_process(srv, c) != 0)
						continue;
				}
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
					conn_read(srv, c);
			}
		}
		if (srv->poll_fn)
			srv->poll_fn(srv->poll_arg);
		now = clk_mono_ns() / 1000000;
		accept_wake(srv, now);
		if (now >= next_sweep) {
			if (srv->conf.idle_ms > 0)
				srv_idle_sweep(srv, now);
			/* the count of every flood of warnings whose window ended */
			(void)log_rl_flush();
			next_sweep = now + 1000;
		}
	}

	pthread_mutex_lock(&srv->mu);
	srv->writer_stop = true;
	srv->bulk_stop = true;
	pthread_cond_signal(&srv->cv);
	pthread_mutex_unlock(&srv->mu);
	wake(srv->bulk_evfd);
	if (srv->bulk_started)
		pthread_join(srv->bulk, NULL);
	srv->bulk_started = false;
	pthread_join(srv->writer, NULL);
	srv->writer_started = false;
	urcu_memb_unregister_thread();
	if (sig_fd >= 0)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, sig_fd, NULL);
	return rc;
}

void
ns_server_destroy(struct ns_server *srv)
{
	struct ns_job *j;

	if (srv == NULL)
		return;
	BASSERT(!srv->writer_started && !srv->bulk_started);
	log_info(NS_TAG,
		 "connections refused or closed by a limit: maxConnections %" PRIu64
		 ", maxConnectionsPerAddr %" PRIu64 ", no descriptor %" PRIu64
		 ", frameMaxLength %" PRIu64 ", maxFrameMemory %" PRIu64,
		 srv->refused_conns, srv->refused_addr, srv->refused_nofd, srv->refused_size,
		 (uint64_t)atomic_load_explicit(&srv->refused_mem, memory_order_relaxed));
	for (size_t fd = 0; fd < srv->conns_cap; fd++) {
		struct ns_conn *c = srv->conns[fd];

		if (c == NULL)
			continue;
		c->wrote = false; /* shutting down: nobody to tell */
		c->bulk = false;  /* its buffer is on a list freed below */
		conn_close(srv, c, NULL);
	}
	free(srv->conns);
	ipcount_fini(&srv->per_addr);
	while ((j = srv->jobs) != NULL) {
		srv->jobs = j->next;
		job_free(j);
	}
	while ((j = srv->done) != NULL) {
		srv->done = j->next;
		job_free(j);
	}
	while ((j = srv->bulk_in) != NULL) {
		srv->bulk_in = j->next;
		job_free(j);
	}
	if (srv->lfd >= 0)
		close(srv->lfd);
	if (srv->epfd >= 0)
		close(srv->epfd);
	if (srv->evfd >= 0)
		close(srv->evfd);
	if (srv->bulk_epfd >= 0)
		close(srv->bulk_epfd);
	if (srv->bulk_evfd >= 0)
		close(srv->bulk_evfd);
	ns_state_destroy(srv->st);
	pthread_cond_destroy(&srv->cv);
	pthread_mutex_destroy(&srv->mu);
	free(srv->kv_path);
	free(srv);
}
