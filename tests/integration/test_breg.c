// SPDX-License-Identifier: Apache-2.0
/*
 * test_breg.c - broker registration (control/breg.c) and libsprocket's
 * route lookups (client/route.c, client/remoting.c) against real
 * sprocket-namesrv processes on 127.0.0.1.
 *
 * The broker side is the agent with a topic set held here; the client side
 * is sp_route_fetch(), so every field goes broker -> NameServer -> client
 * over TCP exactly as in production: queue numbers, perm, flags, the
 * dataplane endpoint and the queue->core map. Failure cases kill, stop and
 * restart NameServers and check that nothing hangs: each wait has a bound
 * far above what the step needs (CI stalls) and the test checks the bound,
 * never a duration.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/breg.h"
#include "harness.h"
#include "ns_client.h"
#include "sprocket/remoting.h"
#include "sprocket/route.h"

#define BIN SP_NAMESRV_BIN
#define WAIT_MS 30000
#define FETCH_MS 10000

/* The broker's topic set, as its control thread would hold it. */
struct topic_src {
	pthread_mutex_t mu;
	struct ctl_breg_topic t[8];
	size_t n;
	uint64_t dv;
	unsigned snapshots; /* bodies built */
	unsigned dv_asks;   /* rounds that only read the version */
};

static const uint16_t cores_a[] = {0, 1, 1, 0};
static const uint16_t cores_c[] = {1, 0};
static const uint16_t mod2[] = {0, 1, 0, 1, 0, 1, 0, 1}; /* the default map of 2 cores */

static int
snapshot(void *arg, struct ctl_breg_topic **t, size_t *n, uint64_t *dv_counter, int64_t *dv_ts)
{
	struct topic_src *s = arg;

	pthread_mutex_lock(&s->mu);
	*t = malloc(sizeof(s->t));
	if (*t == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOMEM;
	}
	memcpy(*t, s->t, sizeof(s->t));
	s->snapshots++;
	*n = s->n;
	*dv_counter = s->dv;
	*dv_ts = 1700000000000;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static void
dv_of(void *arg, uint64_t *dv_counter, int64_t *dv_ts)
{
	struct topic_src *s = arg;

	pthread_mutex_lock(&s->mu);
	s->dv_asks++;
	*dv_counter = s->dv;
	*dv_ts = 1700000000000;
	pthread_mutex_unlock(&s->mu);
}

/* Wait (bounded) until *@v reaches @want; return its value. */
static unsigned
wait_count(struct topic_src *s, const unsigned *v, unsigned want)
{
	uint64_t end = clk_mono_ns() + (uint64_t)WAIT_MS * 1000000;
	unsigned got;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		got = *v;
		pthread_mutex_unlock(&s->mu);
		if (got >= want || clk_mono_ns() > end)
			return got;
		usleep(10000);
	}
}

static void
release(void *arg, struct ctl_breg_topic *t, size_t n)
{
	(void)arg;
	(void)n;
	free(t);
}

static void
src_init(struct topic_src *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	s->t[0] = (struct ctl_breg_topic){.name = "BregA",
					  .read_queues = 4,
					  .write_queues = 4,
					  .perm = 6,
					  .queue_cores = cores_a,
					  .n_queue_cores = 4};
	s->t[1] = (struct ctl_breg_topic){
		.name = "BregB", .read_queues = 8, .write_queues = 4, .perm = 4, .sys_flag = 1};
	s->n = 2;
	s->dv = 1;
}

/* A third topic: a new data version, so the NameServers re-read the set. */
static void
src_add_c(struct topic_src *s)
{
	pthread_mutex_lock(&s->mu);
	s->t[s->n++] = (struct ctl_breg_topic){.name = "BregC",
					       .read_queues = 2,
					       .write_queues = 2,
					       .perm = 6,
					       .queue_cores = cores_c,
					       .n_queue_cores = 2};
	s->dv++;
	pthread_mutex_unlock(&s->mu);
}

static void
start(struct ns_proc *p, const char *dir, const char *const *args)
{
	T_ASSERT_EQ(nsp_start(BIN, dir, args, p), 0);
	T_ASSERT(p->port != 0);
}

/* SIGTERM; a clean exit (0) also means no sanitizer report, leak included. */
static void
finish(struct ns_proc *p)
{
	int rc = p->pid > 0 ? nsp_stop(p) : 0;
	char cmd[160];

	if (rc != 0) {
		snprintf(cmd, sizeof(cmd), "cat %s/namesrv.log >&2", p->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "no log\n");
	}
	nsp_cleanup(p);
	T_ASSERT_EQ(rc, 0);
}

static void
kill9(struct ns_proc *p)
{
	T_ASSERT_EQ(kill(p->pid, SIGKILL), 0);
	T_ASSERT_EQ(waitpid(p->pid, NULL, 0), p->pid);
	p->pid = 0;
}

/* kill -9, then start again on the same directory and port. */
static void
restart9(struct ns_proc *p)
{
	char dir[sizeof(p->dir)];
	char port_arg[32];
	const char *args[] = {port_arg, NULL};

	kill9(p);
	snprintf(dir, sizeof(dir), "%s", p->dir);
	snprintf(port_arg, sizeof(port_arg), "--listenPort=%u", p->port);
	start(p, dir, args);
}

static void
addr_of(const struct ns_proc *p, char *buf, size_t cap)
{
	snprintf(buf, cap, "127.0.0.1:%u", p->port);
}

/* A loopback port nobody listens on (bound, then closed). */
static uint16_t
closed_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static struct ctl_breg_cfg
cfg_for(const char *namesrv, struct topic_src *src)
{
	return (struct ctl_breg_cfg){
		.namesrv = namesrv,
		.interval_ms = 60000, /* rounds in these tests come from start and kicks */
		.timeout_ms = 3000,
		.info = {.cluster = "ClusterT",
			 .broker_name = "broker-t",
			 .broker_id = 0,
			 .broker_addr = "127.0.0.1:10911",
			 .ha_addr = "127.0.0.1:10912",
			 .has_dp = true,
			 .dp_ip = "127.0.0.1",
			 .dp_mac = "02:00:00:00:00:0b",
			 .dp_port = 20911,
			 .dp_cores = 2},
		.snapshot = snapshot,
		.release = release,
		.arg = src,
	};
}

/* The route of @topic from @ns only, checked against the broker above. */
static struct sp_route *
fetch(const struct ns_proc *ns, const char *topic)
{
	char addr[32];
	struct sp_route *r = NULL;

	addr_of(ns, addr, sizeof(addr));
	T_ASSERT_EQ(sp_route_fetch(addr, topic, FETCH_MS, &r), 0);
	T_ASSERT_EQ(r->n_brokers, 1);
	T_ASSERT_EQ(r->n_queues, 1);
	T_ASSERT_STREQ(r->brokers[0].name, "broker-t");
	T_ASSERT_STREQ(r->brokers[0].cluster, "ClusterT");
	T_ASSERT_STREQ(r->brokers[0].addr, "127.0.0.1:10911");
	T_ASSERT(r->brokers[0].has_dp);
	T_ASSERT_EQ(r->brokers[0].dp_ip, htonl(INADDR_LOOPBACK));
	T_ASSERT_MEMEQ(r->brokers[0].dp_mac, "\x02\x00\x00\x00\x00\x0b", 6);
	T_ASSERT_EQ(r->brokers[0].dp_port, 20911);
	T_ASSERT_EQ(r->brokers[0].dp_cores, 2);
	T_ASSERT_EQ(r->queues[0].broker, 0);
	return r;
}

static void
check_queue(const struct sp_route *r, uint32_t rq, uint32_t wq, uint32_t perm, uint32_t flag,
	    const uint16_t *cores, uint32_t n_cores)
{
	const struct sp_route_queue *q = &r->queues[0];

	T_ASSERT_EQ(q->read_queues, rq);
	T_ASSERT_EQ(q->write_queues, wq);
	T_ASSERT_EQ(q->perm, perm);
	T_ASSERT_EQ(q->sys_flag, flag);
	T_ASSERT_EQ(q->n_cores, n_cores);
	for (uint32_t i = 0; i < n_cores; i++)
		T_ASSERT_EQ(sp_route_queue_core(r, q, i), cores[i]);
}

static int
fetch_rc(const struct ns_proc *ns, const char *topic)
{
	char addr[32];
	struct sp_route *r = NULL;
	int rc;

	addr_of(ns, addr, sizeof(addr));
	rc = sp_route_fetch(addr, topic, FETCH_MS, &r);
	sp_route_free(r);
	return rc;
}

static void
test_register_route_unregister(void)
{
	struct ns_proc ns[2];
	struct topic_src src;
	struct ctl_breg *b = NULL;
	struct ctl_breg_cfg cfg;
	struct sp_route *r;
	char list[128];
	char a0[32];
	char a1[32];

	start(&ns[0], NULL, NULL);
	start(&ns[1], NULL, NULL);
	addr_of(&ns[0], a0, sizeof(a0));
	addr_of(&ns[1], a1, sizeof(a1));
	snprintf(list, sizeof(list), "%s; %s", a0, a1);
	src_init(&src);
	cfg = cfg_for(list, &src);
	T_ASSERT_EQ(ctl_breg_start(&cfg, &b), 0);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);

	for (int i = 0; i < 2; i++) {
		/* The broker's own map for BregA, the NameServer's q % cores for BregB. */
		r = fetch(&ns[i], "BregA");
		check_queue(r, 4, 4, 6, 0, cores_a, 4);
		sp_route_free(r);
		r = fetch(&ns[i], "BregB");
		check_queue(r, 8, 4, 4, 1, mod2, 8);
		sp_route_free(r);
		T_ASSERT_EQ(fetch_rc(&ns[i], "BregC"), -ENOENT);
		T_ASSERT_EQ(fetch_rc(&ns[i], "NoSuchTopic"), -ENOENT);
	}

	/* A new topic: kick, and both NameServers route it. */
	src_add_c(&src);
	ctl_breg_kick(b);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	for (int i = 0; i < 2; i++) {
		r = fetch(&ns[i], "BregC");
		check_queue(r, 2, 2, 6, 0, cores_c, 2);
		sp_route_free(r);
		r = fetch(&ns[i], "BregA");
		check_queue(r, 4, 4, 6, 0, cores_a, 4);
		sp_route_free(r);
	}

	/* The list form: a dead first server is skipped, an answer ends the search. */
	snprintf(list, sizeof(list), "127.0.0.1:%u;%s", closed_port(), a1);
	r = NULL;
	T_ASSERT_EQ(sp_route_fetch(list, "BregC", FETCH_MS, &r), 0);
	T_ASSERT_EQ(r->n_queues, 1);
	sp_route_free(r);
	r = NULL;
	T_ASSERT_EQ(sp_route_fetch(list, "NoSuchTopic", FETCH_MS, &r), -ENOENT);
	T_ASSERT(r == NULL);

	/* Stop unregisters: the topics leave both NameServers. */
	ctl_breg_stop(b);
	for (int i = 0; i < 2; i++) {
		T_ASSERT_EQ(fetch_rc(&ns[i], "BregA"), -ENOENT);
		T_ASSERT_EQ(fetch_rc(&ns[i], "BregC"), -ENOENT);
		T_ASSERT(nsp_log_has(&ns[i],
				     "broker broker-t id 0 at 127.0.0.1:10911 unregistered"));
		T_ASSERT(nsp_log_has(&ns[i], "registered 2 topics"));
		T_ASSERT(nsp_log_has(&ns[i], "registered a delta: 1 topics added or changed"));
	}
	finish(&ns[0]);
	finish(&ns[1]);
	pthread_mutex_destroy(&src.mu);
}

/* A NameServer that dies and comes back on its port gets the broker again. */
static void
test_namesrv_restart(void)
{
	struct ns_proc ns;
	struct topic_src src;
	struct ctl_breg *b = NULL;
	struct ctl_breg_cfg cfg;
	struct sp_route *r;
	char addr[32];

	start(&ns, NULL, NULL);
	addr_of(&ns, addr, sizeof(addr));
	src_init(&src);
	cfg = cfg_for(addr, &src);
	T_ASSERT_EQ(ctl_breg_start(&cfg, &b), 0);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	r = fetch(&ns, "BregA");
	sp_route_free(r);

	/* Killed: the agent's kept connection is dead and the routes are gone. */
	restart9(&ns);
	T_ASSERT_EQ(fetch_rc(&ns, "BregA"), -ENOENT);

	/* The next round reconnects at once (no backoff for a stale connection). */
	src_add_c(&src);
	ctl_breg_kick(b);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	r = fetch(&ns, "BregC");
	check_queue(r, 2, 2, 6, 0, cores_c, 2);
	sp_route_free(r);
	r = fetch(&ns, "BregA");
	sp_route_free(r);
	ctl_breg_stop(b);
	T_ASSERT_EQ(fetch_rc(&ns, "BregA"), -ENOENT);
	finish(&ns);
	pthread_mutex_destroy(&src.mu);
}

/*
 * Without forceRegister, a round whose topics did not change asks the
 * NameServer's version (QUERY_DATA_VERSION) instead of sending every topic;
 * a changed version, or a NameServer that lost the broker, gets the body.
 */
static void
test_heartbeat_rounds(void)
{
	struct ns_proc ns;
	struct topic_src src;
	struct ctl_breg *b = NULL;
	struct ctl_breg_cfg cfg;
	struct sp_route *r;
	char addr[32];
	unsigned asks;

	start(&ns, NULL, NULL);
	addr_of(&ns, addr, sizeof(addr));
	src_init(&src);
	cfg = cfg_for(addr, &src);
	cfg.interval_ms = 100;
	cfg.dv = dv_of;
	T_ASSERT_EQ(ctl_breg_start(&cfg, &b), 0);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	/* Five rounds with the same version: one body in all. */
	T_ASSERT(wait_count(&src, &src.dv_asks, 5) >= 5);
	T_ASSERT_EQ(src.snapshots, 1);
	r = fetch(&ns, "BregA");
	sp_route_free(r);

	/* A new version at a round (no kick): the next round sends the body. */
	src_add_c(&src);
	T_ASSERT(wait_count(&src, &src.snapshots, 2) == 2);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	for (int tries = 0; tries < 300 && fetch_rc(&ns, "BregC") != 0; tries++)
		usleep(10000); /* the round's body reaches the server after the snapshot */
	r = fetch(&ns, "BregC");
	check_queue(r, 2, 2, 6, 0, cores_c, 2);
	sp_route_free(r);

	/* A NameServer that restarts knows no version: asked, it says changed, and gets the body. */
	restart9(&ns);
	pthread_mutex_lock(&src.mu);
	asks = src.dv_asks;
	pthread_mutex_unlock(&src.mu);
	T_ASSERT(wait_count(&src, &src.dv_asks, asks + 3) >= asks + 3);
	for (int tries = 0; tries < 300 && fetch_rc(&ns, "BregA") != 0; tries++)
		usleep(10000);
	r = fetch(&ns, "BregA");
	sp_route_free(r);
	r = fetch(&ns, "BregC");
	sp_route_free(r);
	/* the second body was the change alone: one more, whole, for the server that lost us */
	T_ASSERT_EQ(src.snapshots, 3);
	ctl_breg_stop(b);
	finish(&ns);
	pthread_mutex_destroy(&src.mu);
}

/* Remove topic @name: a new data version. */
static void
src_del(struct topic_src *s, const char *name)
{
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->t[i].name, name) == 0) {
			memmove(&s->t[i], &s->t[i + 1], sizeof(s->t[0]) * (s->n - i - 1));
			s->n--;
			break;
		}
	}
	s->dv++;
	pthread_mutex_unlock(&s->mu);
}

/* Wait (bounded) until @topic's route answer is @want (0 or an error). */
static void
wait_route(const struct ns_proc *ns, const char *topic, bool exists)
{
	for (int tries = 0; tries < 3000 && (fetch_rc(ns, topic) == 0) != exists; tries++)
		usleep(10000);
	T_ASSERT_EQ(fetch_rc(ns, topic) == 0, exists);
}

/*
 * Delta registration: after the first whole set, each change sends only
 * itself; the NameServer's set is the broker's after adds, changes and
 * removals; a NameServer that restarted refuses the delta and gets the
 * whole set at once.
 */
static void
test_delta_registration(void)
{
	struct ns_proc ns;
	struct topic_src src;
	struct ctl_breg *b = NULL;
	struct ctl_breg_cfg cfg;
	struct ctl_breg_stats st, st2;
	struct sp_route *r;
	char addr[32];

	start(&ns, NULL, NULL);
	addr_of(&ns, addr, sizeof(addr));
	src_init(&src);
	cfg = cfg_for(addr, &src);
	T_ASSERT_EQ(ctl_breg_start(&cfg, &b), 0);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	ctl_breg_stats(b, &st);
	T_ASSERT_EQ(st.whole, 1);
	T_ASSERT_EQ(st.deltas, 0);

	/* an added topic: a delta of one topic, onto the two the server holds */
	src_add_c(&src);
	ctl_breg_kick(b);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	ctl_breg_stats(b, &st2);
	T_ASSERT_EQ(st2.whole, 1);
	T_ASSERT_EQ(st2.deltas, 1);
	T_ASSERT(st2.body_bytes - st.body_bytes < st.body_bytes); /* one topic, not three */
	r = fetch(&ns, "BregC");
	check_queue(r, 2, 2, 6, 0, cores_c, 2);
	sp_route_free(r);
	r = fetch(&ns, "BregA");
	check_queue(r, 4, 4, 6, 0, cores_a, 4);
	sp_route_free(r);
	r = fetch(&ns, "BregB");
	check_queue(r, 8, 4, 4, 1, mod2, 8); /* no map sent: queue i on core i mod 2 */
	sp_route_free(r);

	/* a removal and a change in one delta */
	src_del(&src, "BregB");
	pthread_mutex_lock(&src.mu);
	src.t[1].perm = 4; /* BregC, read only */
	pthread_mutex_unlock(&src.mu);
	ctl_breg_kick(b);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	ctl_breg_stats(b, &st2);
	T_ASSERT_EQ(st2.whole, 1);
	T_ASSERT_EQ(st2.deltas, 2);
	T_ASSERT(fetch_rc(&ns, "BregB") != 0);
	r = fetch(&ns, "BregC");
	check_queue(r, 2, 2, 4, 0, cores_c, 2);
	sp_route_free(r);
	r = fetch(&ns, "BregA");
	check_queue(r, 4, 4, 6, 0, cores_a, 4);
	sp_route_free(r);

	/* a restarted server holds no base: it refuses the delta and gets the whole set */
	restart9(&ns);
	pthread_mutex_lock(&src.mu);
	src.dv++; /* a new version of the same set */
	pthread_mutex_unlock(&src.mu);
	ctl_breg_kick(b);
	T_ASSERT_EQ(ctl_breg_wait_registered(b, WAIT_MS), 0);
	ctl_breg_stats(b, &st2);
	T_ASSERT_EQ(st2.delta_stale, 1);
	T_ASSERT_EQ(st2.whole, 2);
	wait_route(&ns, "BregA", true);
	r = fetch(&ns, "BregC");
	check_queue(r, 2, 2, 4, 0, cores_c, 2);
	sp_route_free(r);
	T_ASSERT(fetch_rc(&ns, "BregB") != 0);
	ctl_breg_stop(b);
	finish(&ns);
	pthread_mutex_destroy(&src.mu);
}

/* One NameServer down: the other still gets the broker, and stop does not hang. */
static void
test_one_namesrv_down(void)
{
	struct ns_proc ns;
	struct topic_src src;
	struct ctl_breg *b = NULL;
	struct ctl_breg_cfg cfg;
	struct sp_route *r;
	char list[128];
	char a[32];
	uint64_t t0;

	start(&ns, NULL, NULL);
	addr_of(&ns, a, sizeof(a));
	snprintf(list, sizeof(list), "127.0.0.1:%u;%s", closed_port(), a);
	src_init(&src);
	cfg = cfg_for(list, &src);
	cfg.interval_ms = 300; /* heartbeat rounds while the dead one backs off */
	T_ASSERT_EQ(ctl_breg_start(&cfg, &b), 0);
	/* Not every server accepted: wait_registered says so when it runs out. */
	T_ASSERT_EQ(ctl_breg_wait_registered(b, 1500), -ETIMEDOUT);
	/* The live one has the broker (the dead one never delayed it). */
	for (int i = 0; i < 3000 && fetch_rc(&ns, "BregA") != 0; i++)
		usleep(10000);
	r = fetch(&ns, "BregA");
	sp_route_free(r);
	t0 = clk_mono_ns();
	ctl_breg_stop(b);
	/* Bound: one registration timeout plus one unregistration timeout, with slack. */
	T_ASSERT(clk_mono_ns() - t0 < 20 * CLK_NS_PER_SEC);
	T_ASSERT_EQ(fetch_rc(&ns, "BregA"), -ENOENT);
	finish(&ns);
	pthread_mutex_destroy(&src.mu);
}

/* GET_ROUTEINFO_BY_TOPIC for @topic on @c. Return: sp_rem_call()'s, *@code the answer's code. */
static int
route_call(struct sp_rem *c, const char *topic, uint32_t timeout_ms, int *code)
{
	struct wire_rem_cmd *req = calloc(1, sizeof(*req));
	struct sp_rem_resp resp;
	int rc;

	T_ASSERT(req != NULL);
	req->code = WIRE_REQ_GET_ROUTEINFO_BY_TOPIC;
	req->version = WIRE_REM_VERSION_V4_9_8;
	req->language = WIRE_LANG_OTHER;
	T_ASSERT_EQ(wire_rem_ext_add(req, "topic", topic), 0);
	rc = sp_rem_call(c, req, NULL, 0, timeout_ms, 0, &resp);
	if (rc == 0)
		*code = resp.cmd.code;
	sp_rem_resp_free(&resp);
	free(req);
	return rc;
}

struct pending_call {
	struct sp_rem *c;
	int rc;
	uint64_t ns;
};

static void *
call_thread(void *arg)
{
	struct pending_call *pc = arg;
	uint64_t t0 = clk_mono_ns();
	int code = -1;

	pc->rc = route_call(pc->c, "T", 60000, &code);
	pc->ns = clk_mono_ns() - t0;
	return NULL;
}

static void
test_rem_failures(void)
{
	struct ns_proc ns;
	struct sp_rem *c = NULL;
	struct pending_call pc = {0};
	pthread_t thr;
	char addr[32];
	uint64_t t0;
	int code = -1;

	/* Nobody listening. */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", closed_port());
	T_ASSERT_EQ(sp_rem_connect(addr, 2000, &c), -ECONNREFUSED);
	T_ASSERT_EQ(sp_route_fetch(addr, "T", 2000, &(struct sp_route *){NULL}), -ECONNREFUSED);

	start(&ns, NULL, NULL);
	addr_of(&ns, addr, sizeof(addr));
	T_ASSERT_EQ(sp_rem_connect(addr, 5000, &c), 0);
	T_ASSERT_EQ(route_call(c, "T", 5000, &code), 0);
	T_ASSERT_EQ(code, WIRE_RSP_TOPIC_NOT_EXIST);

	/* Stopped: the kernel still holds the connection, the answer never comes. */
	T_ASSERT_EQ(kill(ns.pid, SIGSTOP), 0);
	t0 = clk_mono_ns();
	T_ASSERT_EQ(route_call(c, "T", 300, &code), -ETIMEDOUT);
	T_ASSERT(clk_mono_ns() - t0 < 10 * CLK_NS_PER_SEC);
	sp_rem_close(c);

	/* Killed while a call (60 s timeout) waits on it: the call fails now. */
	T_ASSERT_EQ(sp_rem_connect(addr, 5000, &pc.c), 0);
	T_ASSERT_EQ(pthread_create(&thr, NULL, call_thread, &pc), 0);
	usleep(200000);
	T_ASSERT_EQ(kill(ns.pid, SIGKILL), 0);
	T_ASSERT_EQ(waitpid(ns.pid, NULL, 0), ns.pid);
	ns.pid = 0;
	T_ASSERT_EQ(pthread_join(thr, NULL), 0);
	T_ASSERT(pc.rc == -ECONNRESET || pc.rc == -EPIPE);
	T_ASSERT(pc.ns < 30 * CLK_NS_PER_SEC);
	/* And the connection stays failed. */
	T_ASSERT_EQ(route_call(pc.c, "T", 1000, &code), -ENOTCONN);
	sp_rem_close(pc.c);
	T_ASSERT_EQ(sp_rem_connect(addr, 2000, &c), -ECONNREFUSED);
	nsp_cleanup(&ns);
}

T_MAIN(T_CASE(test_register_route_unregister), T_CASE(test_namesrv_restart),
       T_CASE(test_heartbeat_rounds), T_CASE(test_delta_registration),
       T_CASE(test_one_namesrv_down), T_CASE(test_rem_failures))
