// SPDX-License-Identifier: Apache-2.0
/*
 * sprocket_bench.c - sprocket-bench, the latency tool (docs/benchmarks.md).
 *
 *   sprocket-bench ping --backend=udp|af_packet|dpdk --size=64 --duration=5 [--json]
 *   sprocket-bench echo ...            (the peer; started by `ping` itself)
 *
 * `ping` measures, in one run and over the same port backend, the raw port
 * ping-pong (mode ping-raw: one datagram out, the peer reflects it, no
 * transport) and the full session transport (mode ping: PING requests with
 * --size bytes of message, answered by the peer's transport server). The
 * raw row is the floor the transport is judged against.
 *
 * Load: closed loop by default (one request outstanding per slot, --depth
 * slots per session, --sessions sessions). With --rate=R (requests/s) it is
 * open loop: request i is due at start + i/R and its latency is measured
 * from that due time, not from when it actually left, so a stall that delays
 * later requests is charged to them (coordinated omission corrected, as in
 * wrk2). Latencies go into an HdrHistogram-style histogram (common/hist.h).
 *
 * Without --target, ping starts its own echo peer: a separate process pinned
 * to the other CPU of --cores. For af_packet it first creates two network
 * namespaces joined by a veth pair (10.251.x.0/24, removed at exit) and puts
 * the peer in one and itself in the other; for dpdk the two processes meet
 * over net_memif with an abstract socket unique to the run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_report.h"
#include "common/clock.h"
#include "common/hist.h"
#include "common/hmac.h"
#include "dp/port.h"
#include "dp/xport.h"
#include "sp_config.h"
#include "sprocket/route.h"
#include "wire/dp.h"
#include "wire/record.h"
#include "wire/remoting.h"

#define HIST_MAX_NS (60ull * 1000000000ull)
#define RAW_MAGIC DP_RAW_MAGIC /* "PRAW": never "SPRK", so the peer reflects it */
#define RAW_TIMEOUT_NS 200000000ull
#define INFLIGHT_MAX 4096
#define BENCH_CORES_MAX 64

struct opts {
	const char *mode;
	enum dp_backend backend;
	uint32_t size;
	double duration;
	double warmup;
	double rate;
	bool json;
	bool no_raw;
	bool no_xport;
	bool busy;
	unsigned depth;
	unsigned sessions;
	unsigned rounds;
	int cpu_self;
	int cpu_peer;
	const char *target;    /* ip:port of a running echo peer */
	const char *namesrv;   /* produce: NameServer list */
	const char *topic;     /* produce: topic (default SprocketBench) */
	unsigned queues;       /* produce: first N write queues (0: all) */
	unsigned batch;	       /* produce/throughput: messages per SEND_BATCH (1: SEND) */
	const char *topic2;    /* a second topic measured in the same run, slices alternating */
	const char *fsync_dir; /* produce: also time pwrite + fdatasync of --size bytes here */
	bool remoting;	       /* produce: also over the broker's RocketMQ remoting TCP port */
	unsigned queues2;
	unsigned producers; /* produce/e2e/throughput: producer clients (sessions each) */
	unsigned consumers; /* e2e: consumer clients sharing the queues */
	double progress;    /* seconds between progress lines on stderr; 0: none */
	/* port setup */
	const char *iface;
	const char *ip;
	uint16_t port;
	const char *dpdk_args;
	/* peer-only */
	const char *peer_iface;
	const char *peer_ip;
	const char *peer_dpdk_args;
	const char *netns;
};

static volatile sig_atomic_t stop_flag;

static void
on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void
usage_to(FILE *f)
{
	fprintf(f,
		"usage: sprocket-bench ping [options]   transport + raw round trips\n"
		"       sprocket-bench echo [options]   the echo peer (started by ping)\n"
		"       sprocket-bench produce --namesrv=HOST:PORT [options]\n"
		"                                       SEND -> ack against a running broker,\n"
		"                                       next to the raw floor to its core 0\n"
		"       sprocket-bench throughput --namesrv=HOST:PORT [--batch=64 --depth=N]\n"
		"                                       max rate with SEND_BATCH\n"
		"       sprocket-bench e2e --namesrv=HOST:PORT [options]\n"
		"                                       produce as above plus long-polling\n"
		"                                       consumers: send -> consume latency\n"
		"options:\n"
		"  --backend=udp|af_packet|dpdk  packet I/O port (default udp)\n"
		"  --size=BYTES          request message size (default 64)\n"
		"  --duration=SECONDS    measured time per mode (default 5)\n"
		"  --warmup=SECONDS      unmeasured time first (default 1)\n"
		"  --rate=N              open loop at N requests/s (default: closed loop)\n"
		"  --depth=N             requests in flight per session (default 1)\n"
		"  --sessions=N          ping: sessions to the peer (default 1)\n"
		"  --producers=N         produce/e2e/throughput: N producers, each with its own\n"
		"                        session to every broker core and --depth in flight;\n"
		"                        messages go to them in turn (--rate is the total)\n"
		"  --consumers=N         e2e: N consumers, consumer i pulling queues q with\n"
		"                        q %% N == i over sessions of its own (default 1)\n"
		"  --progress=SECONDS    a progress line on stderr this often (default 5 when\n"
		"                        the run is 20 s or longer; 0: none)\n"
		"  --rounds=N            alternate raw and transport slices N times (default 5)\n"
		"  --cores=A,B           pin self to A, the peer to B (default 0,1)\n"
		"  --target=IP:PORT      use a running peer instead of starting one\n"
		"  --only=raw|ping       run one of the two modes\n"
		"  --json                one JSON object per result line\n"
		"  --no-busy             the peer (ping) or this side (produce) waits in the\n"
		"                        port after 50 us idle instead of spinning\n"
		"  --namesrv=H:P[;H:P]   produce: NameServers to read the route from\n"
		"  --topic=NAME          produce: topic (default SprocketBench; auto-created)\n"
		"  --queues=N            produce: use the first N write queues (default all)\n"
		"  --batch=N             messages per SEND_BATCH (throughput default 64)\n"
		"  --fsync-dir=DIR       produce: also time one pwrite + fdatasync of --size\n"
		"                        bytes in DIR (the SYNC_FLUSH yardstick), same run\n"
		"  --remoting            produce: also the same load over the broker's RocketMQ\n"
		"                        remoting TCP port (rows produce-tcp/throughput-tcp),\n"
		"                        alternating slices: what kernel bypass buys\n"
		"  --topic2=T --queues2=N  also measure topic T (first N queues), alternating\n"
		"                        slices with --topic (e.g. 16 vs 10,000 queues)\n"
		"  --iface, --ip, --port, --dpdk-args          this side's port\n"
		"  SPROCKET_ACCESS_KEY, SPROCKET_SECRET_KEY    credentials (brokers with "
		"aclEnable)\n"
		"  --peer-iface, --peer-ip, --peer-dpdk-args   the peer's port\n");
}

static void
usage(void)
{
	usage_to(stderr);
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"backend", required_argument, NULL, 'b'},
		{"size", required_argument, NULL, 's'},
		{"duration", required_argument, NULL, 'd'},
		{"warmup", required_argument, NULL, 'w'},
		{"rate", required_argument, NULL, 'r'},
		{"json", no_argument, NULL, 'j'},
		{"only", required_argument, NULL, 'o'},
		{"depth", required_argument, NULL, 'D'},
		{"sessions", required_argument, NULL, 'S'},
		{"rounds", required_argument, NULL, 'R'},
		{"cores", required_argument, NULL, 'c'},
		{"target", required_argument, NULL, 't'},
		{"iface", required_argument, NULL, 'i'},
		{"ip", required_argument, NULL, 'I'},
		{"port", required_argument, NULL, 'p'},
		{"dpdk-args", required_argument, NULL, 'a'},
		{"peer-iface", required_argument, NULL, 1},
		{"peer-ip", required_argument, NULL, 2},
		{"peer-dpdk-args", required_argument, NULL, 3},
		{"no-busy", no_argument, NULL, 4},
		{"namesrv", required_argument, NULL, 5},
		{"topic", required_argument, NULL, 6},
		{"queues", required_argument, NULL, 7},
		{"batch", required_argument, NULL, 8},
		{"topic2", required_argument, NULL, 9},
		{"queues2", required_argument, NULL, 10},
		{"fsync-dir", required_argument, NULL, 11},
		{"remoting", no_argument, NULL, 12},
		{"producers", required_argument, NULL, 13},
		{"consumers", required_argument, NULL, 14},
		{"progress", required_argument, NULL, 15},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int c;

	*o = (struct opts){.backend = DP_BACKEND_UDP,
			   .size = 64,
			   .duration = 5,
			   .warmup = 1,
			   .depth = 1,
			   .sessions = 1,
			   .rounds = 5,
			   .cpu_self = 0,
			   .cpu_peer = 1,
			   .topic = "SprocketBench",
			   .producers = 1,
			   .consumers = 1,
			   .progress = -1,
			   .busy = true};
	if (argc < 2) {
		usage();
		return -1;
	}
	/* Answered at once, exit status 0 (main: 1) */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage_to(stdout);
			return 1;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("sprocket-bench %s\n", SP_VERSION);
			return 1;
		}
	}
	o->mode = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (dp_backend_parse(optarg, &o->backend) != 0) {
				fprintf(stderr, "sprocket-bench: unknown backend '%s'\n", optarg);
				return -1;
			}
			break;
		case 's':
			o->size = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			o->duration = atof(optarg);
			break;
		case 'w':
			o->warmup = atof(optarg);
			break;
		case 'r':
			o->rate = atof(optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'o':
			o->no_raw = strcmp(optarg, "ping") == 0;
			o->no_xport = strcmp(optarg, "raw") == 0;
			break;
		case 'D':
			o->depth = (unsigned)atoi(optarg);
			break;
		case 'S':
			o->sessions = (unsigned)atoi(optarg);
			break;
		case 'R':
			o->rounds = (unsigned)atoi(optarg);
			break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &o->cpu_self, &o->cpu_peer) < 1) {
				fprintf(stderr, "sprocket-bench: --cores=A,B\n");
				return -1;
			}
			break;
		case 't':
			o->target = optarg;
			break;
		case 'i':
			o->iface = optarg;
			break;
		case 'I':
			o->ip = optarg;
			break;
		case 'p':
			o->port = (uint16_t)atoi(optarg);
			break;
		case 'a':
			o->dpdk_args = optarg;
			break;
		case 1:
			o->peer_iface = optarg;
			break;
		case 2:
			o->peer_ip = optarg;
			break;
		case 3:
			o->peer_dpdk_args = optarg;
			break;
		case 4:
			o->busy = false;
			break;
		case 5:
			o->namesrv = optarg;
			break;
		case 6:
			o->topic = optarg;
			break;
		case 7:
			o->queues = (unsigned)atoi(optarg);
			break;
		case 8:
			o->batch = (unsigned)atoi(optarg);
			break;
		case 9:
			o->topic2 = optarg;
			break;
		case 10:
			o->queues2 = (unsigned)atoi(optarg);
			break;
		case 11:
			o->fsync_dir = optarg;
			break;
		case 12:
			o->remoting = true;
			break;
		case 13:
			o->producers = (unsigned)atoi(optarg);
			break;
		case 14:
			o->consumers = (unsigned)atoi(optarg);
			break;
		case 15:
			o->progress = atof(optarg);
			break;
		default:
			usage();
			return -1;
		}
	}
	if (o->size < 8 || o->size > WIRE_DP_MSG_MAX_DEFAULT - 48 || o->depth < 1 ||
	    o->depth > 256 || o->sessions < 1 || o->sessions > 64 || o->duration <= 0 ||
	    o->rounds < 1 || o->rounds > 1000) {
		fprintf(stderr, "sprocket-bench: --size 8..%u, --depth 1..256, --sessions 1..64\n",
			WIRE_DP_MSG_MAX_DEFAULT - 48);
		return -1;
	}
	if (o->producers < 1 || o->producers > 64 || o->consumers < 1 || o->consumers > 64) {
		fprintf(stderr, "sprocket-bench: --producers 1..64, --consumers 1..64\n");
		return -1;
	}
	if ((o->producers > 1 || o->consumers > 1) && strcmp(o->mode, "produce") != 0 &&
	    strcmp(o->mode, "e2e") != 0 && strcmp(o->mode, "throughput") != 0) {
		fprintf(stderr, "sprocket-bench: --producers and --consumers apply to produce, e2e "
				"and throughput (ping: --sessions)\n");
		return -1;
	}
	if (o->progress < 0)
		o->progress = bench_progress_default(o->duration);
	if (o->producers > 1 && o->remoting) {
		fprintf(stderr, "sprocket-bench: --remoting drives one producer connection; "
				"leave --producers at 1\n");
		return -1;
	}
	return 0;
}

static void
pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		fprintf(stderr, "sprocket-bench: cannot pin to cpu %d: %s\n", cpu, strerror(errno));
}

static int
open_port(const struct opts *o, const char *iface, const char *ip, uint16_t port,
	  const char *dpdk_args, struct dp_port **out)
{
	struct dp_port_cfg pc = {
		.backend = o->backend,
		.base_port = port,
		.n = 1,
		.iface = iface,
		.dpdk_args = dpdk_args,
		.icmp_guard = true,
	};
	struct in_addr a;
	int err;

	if (ip) {
		if (inet_pton(AF_INET, ip, &a) != 1) {
			fprintf(stderr, "sprocket-bench: bad IPv4 address '%s'\n", ip);
			return -EINVAL;
		}
		pc.ip = a.s_addr;
	} else if (o->backend == DP_BACKEND_UDP) {
		pc.ip = htonl(INADDR_LOOPBACK);
	}
	err = dp_ports_open(&pc, out);
	if (err)
		fprintf(stderr, "sprocket-bench: opening the %s port failed: %s\n",
			dp_backend_name(o->backend), strerror(-err));
	return err;
}

/* ---- echo peer ---- */

static void
echo_handler(struct dp_xsrv *s, const struct dp_xreq *r, void *arg)
{
	struct wire_dp_ping_req q;
	struct wire_dp_ping_resp p = {
		.head = {.status = WIRE_DP_ST_SUCCESS, .ts_recv_ns = r->ts_recv_ns}};
	uint32_t len;
	uint8_t *buf;

	(void)arg;
	if (r->op != WIRE_DP_OP_PING || wire_dp_ping_req_decode(r->msg, r->len, &q) != 0) {
		struct wire_dp_resp_head h = {.status = WIRE_DP_ST_BAD_REQUEST,
					      .ts_recv_ns = r->ts_recv_ns};
		long fixed = wire_dp_resp_fixed_len(r->op);
		uint32_t n = WIRE_DP_RESP_HEAD_LEN + (uint32_t)(fixed > 0 ? fixed : 0);

		if (r->op == WIRE_DP_OP_DISCONNECT)
			h.status = WIRE_DP_ST_SUCCESS;
		buf = dp_xsrv_resp_buf(s, r->h, n);
		if (buf &&
		    (r->op == WIRE_DP_OP_DISCONNECT
			     ? wire_dp_bare_resp_encode(r->op, &h, buf, n)
			     : wire_dp_resp_error_encode(r->op, &h, buf, n)) == (long)n &&
		    dp_xsrv_respond(s, r->h, n) != 0)
			return; /* the request went away meanwhile: nothing to answer */
		return;
	}
	p.echo_ts_ns = q.client_ts_ns;
	p.pad = q.pad;
	p.pad_len = q.pad_len;
	len = WIRE_DP_RESP_HEAD_LEN + WIRE_DP_PING_RESP_FIXED + q.pad_len;
	buf = dp_xsrv_resp_buf(s, r->h, len);
	if (!buf)
		return; /* the client retries */
	/* An echo does no handling: ts_handled stays 0 ("not measured", protocol.md §5.1). */
	if (wire_dp_ping_resp_encode(&p, buf, len) == (long)len &&
	    dp_xsrv_respond(s, r->h, len) != 0)
		return;
}

static int
run_echo(const struct opts *o)
{
	struct dp_xsrv_cfg xc = {.max_sessions = 256, .big_bufs = 64};
	struct dp_port *port;
	struct dp_xsrv *x;
	char addr[INET_ADDRSTRLEN];
	int err;

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	pin(o->cpu_self);
	err = open_port(o, o->iface, o->ip, o->port, o->dpdk_args, &port);
	if (err)
		return 1;
	err = dp_xsrv_create(&xc, port, echo_handler, NULL, &x);
	if (err) {
		fprintf(stderr, "sprocket-bench echo: transport: %s\n", strerror(-err));
		return 1;
	}
	inet_ntop(AF_INET, &port->local.ip, addr, sizeof(addr));
	printf("ready %s %u\n", addr, port->local.port);
	fflush(stdout);
	uint64_t next_link = 0;
	bool link = true;

	while (!stop_flag) {
		struct dp_rx rx[DP_BURST_MAX];
		struct dp_rx xp[DP_BURST_MAX];
		struct dp_tx tx[DP_BURST_MAX];
		uint64_t now = clk_mono_fast_ns();
		unsigned n = 0;
		unsigned nx = 0;
		unsigned nt = 0;

		/* As a dataplane core does: never poll a link that is down (a dying peer). */
		if (now >= next_link) {
			link = dp_port_link_up(port);
			next_link = now + 1000000;
		}
		if (link)
			n = dp_port_rx_burst(port, rx, DP_BURST_MAX);

		if (n == 0) {
			if (!o->busy || !link)
				dp_port_wait(port, 1000);
			dp_xsrv_input(x, NULL, 0, now); /* timers */
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			uint32_t m = 0;

			if (rx[i].len >= 4)
				memcpy(&m, rx[i].data, 4);
			if (m == RAW_MAGIC)
				tx[nt++] = (struct dp_tx){
					.data = rx[i].data, .len = rx[i].len, .dst = rx[i].src};
			else
				xp[nx++] = rx[i];
		}
		if (nt)
			(void)dp_port_tx_burst(port, tx, nt);
		dp_xsrv_input(x, xp, nx, now); /* the loop's clock: no read on the answer's path */
		dp_port_rx_done(port);
	}
	dp_xsrv_destroy(x);
	dp_ports_close(&port, 1);
	return 0;
}

/* ---- results ---- */

struct result {
	const char *mode;
	uint64_t count;
	uint64_t lost;
	uint64_t busy; /* produce: SYSTEM_BUSY answers (refused, not lost) */
	double secs;
	struct hist *h;
	uint64_t srv_ns;  /* sum of broker-side time (ts_sent - ts_recv), transport only */
	uint64_t hdl_ns;  /* sum of ts_handled - ts_recv (produce: received -> appended) */
	uint64_t msgs;	  /* messages acknowledged (batches count each of theirs) */
	uint64_t retrans; /* transport: packets the client retransmitted */
};

static void
print_result(const struct opts *o, const struct result *r)
{
	/* The remoting rows go over TCP whatever the dataplane's backend */
	bool tcp = strstr(r->mode, "-tcp") != NULL;
	struct bench_row row = {.mode = r->mode,
				.backend = tcp ? "tcp" : dp_backend_name(o->backend),
				.size = o->size,
				.depth = o->depth,
				.sessions =
					strcmp(o->mode, "ping") != 0 ? o->producers : o->sessions,
				.consumers = strcmp(o->mode, "e2e") == 0 ? o->consumers : 0,
				.rate = o->rate,
				.count = r->count,
				.lost = r->lost,
				.busy = r->busy,
				.secs = r->secs,
				.h = r->h,
				.srv_ns = r->srv_ns,
				.hdl_ns = r->hdl_ns,
				.msgs = r->msgs,
				.retrans = r->retrans,
				.lost_timeout_ms = (unsigned)(RAW_TIMEOUT_NS / 1000000)};

	bench_print_row(&row, o->json);
}

/* ---- raw ping-pong ---- */

struct raw_hdr {
	uint32_t magic;
	uint32_t pad;
	uint64_t seq;
};

/* Return: 0, -ETIMEDOUT the peer never reflected a probe (nothing measured). */
static int
run_raw(const struct opts *o, struct dp_port *port, struct dp_addr peer, double warm, double secs,
	struct result *res)
{
	uint8_t *buf = calloc(1, o->size < 16 ? 16 : o->size);
	uint64_t *due = calloc(INFLIGHT_MAX, sizeof(uint64_t));
	uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
	uint64_t t_start;
	uint64_t warm_end;
	uint64_t end;
	uint64_t sent = 0;
	uint64_t acked = 0; /* lowest seq not yet answered or given up */
	uint64_t measured_from = UINT64_MAX;

	struct raw_hdr rh = {.magic = RAW_MAGIC};
	bool primed = false;

	/*
	 * Prime the path first: the raw backends drop a datagram to an address
	 * they have not resolved yet (and ask ARP), so the first round trips
	 * would be charged a 200 ms timeout. Probe every 10 ms, up to 3 s.
	 */
	rh.seq = UINT64_MAX;
	memcpy(buf, &rh, sizeof(rh));
	for (uint64_t t = clk_mono_ns(), next = 0; !primed && clk_mono_ns() - t < 3000000000ull;) {
		struct dp_rx rx[DP_BURST_MAX];
		unsigned n;

		if (clk_mono_ns() >= next) {
			struct dp_tx p = {
				.data = buf, .len = o->size < 16 ? 16 : o->size, .dst = peer};

			(void)dp_port_tx_burst(port, &p, 1);
			next = clk_mono_ns() + 10000000ull;
		}
		n = dp_port_rx_burst(port, rx, DP_BURST_MAX);
		for (unsigned i = 0; i < n; i++) {
			struct raw_hdr got;

			if (rx[i].len >= sizeof(got)) {
				memcpy(&got, rx[i].data, sizeof(got));
				primed |= got.magic == RAW_MAGIC && got.seq == UINT64_MAX;
			}
		}
		if (n)
			dp_port_rx_done(port);
	}
	if (!primed) {
		fprintf(stderr, "sprocket-bench: the peer did not answer raw probes for 3 s\n");
		free(due);
		free(buf);
		return -ETIMEDOUT;
	}
	t_start = clk_mono_ns();
	warm_end = t_start + (uint64_t)(warm * 1e9);
	end = warm_end + (uint64_t)(secs * 1e9);

	for (;;) {
		uint64_t now = clk_mono_ns();

		bench_progress(now, res->mode, res->count, res->h);
		if (now >= end && acked == sent)
			break;
		if (measured_from == UINT64_MAX && now >= warm_end)
			measured_from = sent;
		/* Send what is due: closed loop one at a time; open loop on schedule. */
		if (now < end && sent - acked < INFLIGHT_MAX &&
		    (interval ? now >= t_start + sent * interval : sent == acked)) {
			uint64_t d = interval ? t_start + sent * interval : now;
			struct dp_tx t = {
				.data = buf, .len = o->size < 16 ? 16 : o->size, .dst = peer};

			rh.seq = sent;
			memcpy(buf, &rh, sizeof(rh));
			due[sent % INFLIGHT_MAX] = d;
			(void)dp_port_tx_burst(port, &t, 1);
			sent++;
		}
		struct dp_rx rx[DP_BURST_MAX];
		unsigned n = dp_port_rx_burst(port, rx, DP_BURST_MAX);

		now = clk_mono_ns();
		for (unsigned i = 0; i < n; i++) {
			struct raw_hdr got;

			if (rx[i].len < sizeof(got))
				continue;
			memcpy(&got, rx[i].data, sizeof(got));
			if (got.magic != RAW_MAGIC || got.seq < acked || got.seq >= sent)
				continue;
			if (got.seq >= measured_from) {
				hist_record(res->h, now - due[got.seq % INFLIGHT_MAX]);
				res->count++;
			}
			/* Answers come back in order on one path; older ones were lost. */
			if (got.seq > acked && got.seq >= measured_from)
				res->lost += got.seq - SP_MAX(acked, measured_from);
			acked = got.seq + 1;
		}
		if (n)
			dp_port_rx_done(port);
		if (acked < sent && now - due[acked % INFLIGHT_MAX] > RAW_TIMEOUT_NS) {
			if (acked >= measured_from)
				res->lost++;
			acked++;
		}
	}
	res->secs += secs;
	free(due);
	free(buf);
	return 0;
}

/* ---- transport ping ---- */

struct xreq {
	struct xrun *run;
	uint8_t *msg;
	uint64_t due;
	bool busy;
	bool measured;
};

struct xrun {
	struct result *res;
	uint64_t done;
	uint64_t errors;
};

static void
xdone(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct xreq *q = arg;
	struct wire_dp_ping_resp p;
	uint64_t now = clk_mono_ns();

	q->busy = false;
	q->run->done++;
	if (err || wire_dp_ping_resp_decode(msg, len, &p) != 0 ||
	    p.head.status != WIRE_DP_ST_SUCCESS) {
		q->run->errors++;
		return;
	}
	if (q->measured) {
		hist_record(q->run->res->h, now - q->due);
		q->run->res->count++;
		if (p.head.ts_sent_ns > p.head.ts_recv_ns)
			q->run->res->srv_ns += p.head.ts_sent_ns - p.head.ts_recv_ns;
	}
}

/*
 * Credentials for brokers with aclEnable, from SPROCKET_ACCESS_KEY and
 * SPROCKET_SECRET_KEY (as the sprocket CLI): dataplane sessions prove them at
 * CONNECT, remoting frames are signed (the signing is part of what is timed,
 * as it is for a real client).
 */
static struct {
	const char *ak; /* NULL: none */
	const char *sk;
	struct hmac_sha1 key;
} cred;

static void
cred_init(void)
{
	const char *ak = getenv("SPROCKET_ACCESS_KEY"), *sk = getenv("SPROCKET_SECRET_KEY");

	if (ak && *ak && sk && *sk) {
		cred.ak = ak;
		cred.sk = sk;
		hmac_sha1_key(&cred.key, sk, strlen(sk));
	}
}

static int
run_xport(const struct opts *o, struct dp_port *port, struct dp_addr peer, double warm, double secs,
	  struct result *res)
{
	struct dp_xcli_cfg cc = {.slots = (uint16_t)SP_MAX(8u, o->depth),
				 .access_key = cred.ak,
				 .secret_key = cred.sk};
	unsigned nreq = o->depth * o->sessions;
	struct dp_xsess *sess[64];
	struct xreq *reqs = calloc(nreq, sizeof(*reqs));
	struct xrun run = {.res = res};
	struct dp_xcli *cli;
	uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
	uint64_t issued = 0;
	uint64_t t_start;
	uint64_t warm_end;
	uint64_t end;
	int err;

	err = dp_xcli_create(&cc, port, &cli);
	if (err)
		return err;
	for (unsigned i = 0; i < o->sessions; i++) {
		err = dp_xcli_connect(cli, peer, 5000, &sess[i]);
		if (err) {
			fprintf(stderr, "sprocket-bench: connect to the peer failed: %s\n",
				strerror(-err));
			return err;
		}
	}
	for (unsigned i = 0; i < nreq; i++) {
		struct wire_dp_ping_req q = {.client_ts_ns = i, .pad_len = o->size - 8};

		reqs[i].run = &run;
		reqs[i].msg = calloc(1, o->size);
		q.pad = reqs[i].msg + 8; /* aliasing is fine: padding content is opaque */
		if (!reqs[i].msg || wire_dp_ping_req_encode(&q, reqs[i].msg, o->size) < 0)
			return -ENOMEM;
	}
	t_start = clk_mono_ns();
	warm_end = t_start + (uint64_t)(warm * 1e9);
	end = warm_end + (uint64_t)(secs * 1e9);
	for (;;) {
		uint64_t now = clk_mono_ns();
		bool any_busy = false;

		bench_progress(now, res->mode, res->count, res->h);

		for (unsigned i = 0; i < nreq; i++) {
			struct xreq *q = &reqs[i];
			uint64_t d;

			if (q->busy) {
				any_busy = true;
				continue;
			}
			if (now >= end)
				continue;
			d = interval ? t_start + issued * interval : now;
			if (interval && now < d)
				break;
			q->due = d;
			q->measured = d >= warm_end;
			memcpy(q->msg, &d, 8);
			if (dp_xcli_submit(sess[i / o->depth], WIRE_DP_OP_PING, q->msg, o->size,
					   xdone, q) != 0)
				continue;
			q->busy = true;
			any_busy = true;
			issued++;
		}
		if (now >= end && !any_busy)
			break;
		(void)dp_xcli_poll(cli);
		for (unsigned i = 0; i < o->sessions; i++) {
			if (dp_xsess_is_dead(sess[i])) {
				fprintf(stderr,
					"sprocket-bench: session to the peer died (timeouts %llu "
					"resets %llu)\n",
					(unsigned long long)dp_xcli_stats(cli)->timeouts,
					(unsigned long long)dp_xcli_stats(cli)->resets);
				return -ECONNRESET;
			}
		}
	}
	res->secs += secs;
	res->lost += run.errors;
	res->retrans += dp_xcli_stats(cli)->tx_retrans;
	for (unsigned i = 0; i < o->sessions; i++)
		dp_xcli_close(sess[i], 500);
	dp_xcli_destroy(cli);
	for (unsigned i = 0; i < nreq; i++)
		free(reqs[i].msg);
	free(reqs);
	return 0;
}

static void print_header(const struct opts *o);

/* ---- produce: SEND -> ack against a running broker ---- */

#define PRODUCE_QUEUES_MAX 16384

struct ptarget {
	struct dp_addr addr[PRODUCE_QUEUES_MAX]; /* queue -> owning core's address */
	struct dp_addr cores[BENCH_CORES_MAX];
	unsigned ncores;
	unsigned nq;
	uint16_t qcore[PRODUCE_QUEUES_MAX];
	char rmt[64]; /* the broker's remoting "ip:port" */
};

struct preq {
	struct prun *run;
	uint16_t op;
	uint8_t *msg;
	uint32_t len;
	uint64_t due;
	bool busy;
	bool measured;
};

struct prun {
	struct result *res;
	uint64_t errors;
	uint64_t busy_answers;
	uint64_t ok;
	int32_t last_status;
};

static void
pdone(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct preq *q = arg;
	struct wire_dp_send_resp r;
	uint64_t now = clk_mono_ns();

	q->busy = false;
	if (err || wire_dp_send_resp_decode(q->op, msg, len, &r) != 0) {
		q->run->errors++;
		return;
	}
	if (r.head.status != WIRE_DP_ST_SUCCESS) {
		q->run->last_status = r.head.status;
		if (r.head.status == WIRE_DP_ST_SYSTEM_BUSY)
			q->run->busy_answers++;
		else
			q->run->errors++;
		return;
	}
	q->run->ok += q->op == WIRE_DP_OP_SEND ? 1 : r.count;
	if (q->measured) {
		hist_record(q->run->res->h, now - q->due);
		q->run->res->count++;
		q->run->res->msgs += q->op == WIRE_DP_OP_SEND ? 1 : r.count;
		if (r.head.ts_sent_ns > r.head.ts_recv_ns)
			q->run->res->srv_ns += r.head.ts_sent_ns - r.head.ts_recv_ns;
		if (r.head.ts_handled_ns > r.head.ts_recv_ns)
			q->run->res->hdl_ns += r.head.ts_handled_ns - r.head.ts_recv_ns;
	}
}

/* Encodes a SEND of --size body bytes to queue @qid at @buf (cap @cap). */
static long
produce_encode(const struct opts *o, int32_t qid, uint64_t stamp, uint8_t *buf, size_t cap,
	       uint8_t *body)
{
	static const char props[] = "TAGS\001bench\002";
	struct wire_dp_send_req r = {
		.born_ts = clk_wall_ms_fast(),
		.queue_id = qid,
		.topic = o->topic,
		.topic_len = (uint16_t)strlen(o->topic),
		.props = props,
		.props_len = sizeof(props) - 1,
		.body = body,
		.body_len = o->size,
	};

	memcpy(body, &stamp, sizeof(stamp) < o->size ? sizeof(stamp) : o->size);
	if (o->batch > 1) {
		/* o->batch items of the same body; the batch shares the send's fields */
		static uint8_t *items;
		static size_t items_cap;
		size_t need = (size_t)o->batch * (WIRE_BATCH_ITEM_FIXED + o->size + sizeof(props));
		size_t len = 0;
		struct wire_batch_item it = {.body = body,
					     .body_len = o->size,
					     .props = props,
					     .props_len = sizeof(props) - 1};

		if (items_cap < need) {
			free(items);
			items = malloc(need);
			items_cap = items ? need : 0;
			if (!items)
				return -ENOMEM;
		}
		for (unsigned i = 0; i < o->batch; i++)
			if (wire_batch_append(items, items_cap, &len, &it) != 0)
				return -ENOBUFS;
		r.props = NULL;
		r.props_len = 0;
		r.body = items;
		r.body_len = (uint32_t)len;
		return wire_dp_send_req_encode(WIRE_DP_OP_SEND_BATCH, &r, buf, cap);
	}
	return wire_dp_send_req_encode(WIRE_DP_OP_SEND, &r, buf, cap);
}

static void
odone(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct {
		bool done;
		int64_t v;
	} *st = arg;
	struct wire_dp_offset_resp r;

	st->done = true;
	st->v = -1;
	if (err == 0 && wire_dp_offset_resp_decode(WIRE_DP_OP_GET_MAX_OFFSET, msg, len, &r) == 0 &&
	    r.head.status == WIRE_DP_ST_SUCCESS)
		st->v = r.offset;
}

/* e2e: one long-polling PULL in flight per queue; latency = consumed - intended send time. */
struct pcons {
	struct prun *run;
	struct result *res;    /* the e2e row */
	struct dp_xsess *sess; /* a consumer session, not the producer's */
	uint8_t buf[512];
	uint32_t len;
	int64_t next;
	int32_t qid;
	bool busy;
	uint64_t warm_end;
	uint64_t consumed;
};

static void
cdone(void *arg, int err, const uint8_t *msg, uint32_t len)
{
	struct pcons *k = arg;
	struct wire_dp_pull_resp r;
	uint64_t now = clk_mono_ns();
	size_t pos = 0;

	k->busy = false;
	if (err || wire_dp_pull_resp_decode(msg, len, &r) != 0) {
		k->run->errors++;
		return;
	}
	if (r.head.status == WIRE_DP_ST_SUCCESS || r.head.status == WIRE_DP_ST_PULL_NOT_FOUND ||
	    r.head.status == WIRE_DP_ST_PULL_OFFSET_MOVED ||
	    r.head.status == WIRE_DP_ST_PULL_RETRY_IMMEDIATELY)
		k->next = r.next_begin_offset;
	while (pos < r.records_len) {
		struct wire_msg m;
		long n = wire_rec_decode(r.records + pos, r.records_len - pos, 0, &m);
		uint64_t stamp;

		if (n <= 0)
			break;
		pos += (size_t)n;
		k->consumed++;
		if (m.body_len < sizeof(stamp))
			continue;
		memcpy(&stamp, m.body, sizeof(stamp));
		if (stamp >= k->warm_end && stamp <= now) {
			hist_record(k->res->h, now - stamp);
			k->res->count++;
		}
	}
}

static int
cons_submit(const struct opts *o, struct dp_xsess *s, struct pcons *k, uint32_t suspend_ms)
{
	struct wire_dp_pull_req r = {.queue_offset = k->next,
				     .commit_offset = -1,
				     .queue_id = k->qid,
				     .max_msgs = 64,
				     .max_bytes = 1u << 20,
				     .sysflag = WIRE_DP_PULL_SUSPEND,
				     .suspend_timeout_ms = suspend_ms,
				     .group = "sprocket-bench",
				     .group_len = 14,
				     .topic = o->topic,
				     .topic_len = (uint16_t)strlen(o->topic)};
	long n = wire_dp_pull_req_encode(&r, k->buf, sizeof(k->buf));

	if (n < 0)
		return (int)n;
	k->len = (uint32_t)n;
	if (dp_xcli_submit(s, WIRE_DP_OP_PULL, k->buf, k->len, cdone, k) != 0)
		return -EAGAIN;
	k->busy = true;
	return 0;
}

/* Waits for every busy consumer (their pulls end within the suspend time). */
static void
cons_drain(struct dp_xcli *cli, struct pcons *ks, unsigned n)
{
	uint64_t t = clk_mono_ns();

	for (;;) {
		bool any = false;

		for (unsigned i = 0; i < n; i++)
			any |= ks[i].busy;
		if (!any || clk_mono_ns() - t > 3000000000ull)
			return;
		(void)dp_xcli_poll(cli);
	}
}

static int
max_offset_sync(const struct opts *o, struct dp_xcli *cli, struct dp_xsess *s, int32_t qid,
		int64_t *out)
{
	struct wire_dp_offset_req r = {
		.queue_id = qid, .topic = o->topic, .topic_len = (uint16_t)strlen(o->topic)};
	struct {
		bool done;
		int64_t v;
	} st = {0};
	uint8_t buf[256];
	long n = wire_dp_offset_req_encode(WIRE_DP_OP_GET_MAX_OFFSET, &r, buf, sizeof(buf));
	uint64_t t = clk_mono_ns();

	if (n < 0)
		return (int)n;
	if (dp_xcli_submit(s, WIRE_DP_OP_GET_MAX_OFFSET, buf, (uint32_t)n, odone, &st) != 0)
		return -EAGAIN;
	while (!st.done && clk_mono_ns() - t < 5000000000ull)
		(void)dp_xcli_poll(cli);
	if (!st.done || st.v < 0)
		return -ETIMEDOUT;
	*out = st.v;
	return 0;
}

static int
run_produce_slice(const struct opts *o, struct dp_port *port, const struct ptarget *pt, double warm,
		  double secs, struct result *res, struct result *e2e)
{
	static unsigned slots_warned; /* once per run, not per slice */
	struct pcons *ks = NULL;
	struct dp_xsess **csess = NULL;
	unsigned ncsess = 0;
	/* every core's session may carry all sends and one pull per queue */
	struct dp_xcli_cfg cc = {.slots = (uint16_t)SP_MIN(256u, SP_MAX(8u, o->depth + pt->nq)),
				 .access_key = cred.ak,
				 .secret_key = cred.sk};
	unsigned np = o->producers;
	unsigned nreq =
		o->depth * np; /* requests in flight in all; producer p has [p*depth, +depth) */
	/* producer p's session to core c: sess[p * ncores + c] */
	struct dp_xsess **sess = calloc((size_t)np * pt->ncores, sizeof(*sess));
	struct preq *reqs = calloc(nreq, sizeof(*reqs));
	uint8_t *body = calloc(1, o->size);
	size_t cap = (size_t)SP_MAX(1u, o->batch) * (o->size + 64) + 512 + strlen(o->topic);
	struct prun run = {.res = res};
	struct dp_xcli *cli;
	uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
	uint64_t issued = 0, t_start, warm_end, end;
	uint64_t idle_since = clk_mono_ns();
	unsigned next_q = 0;
	int err;

	if (!reqs || !body || !sess)
		return -ENOMEM;
	err = dp_xcli_create(&cc, port, &cli);
	if (err)
		return err;
	for (unsigned i = 0; i < np * pt->ncores; i++) {
		err = dp_xcli_connect(cli, pt->cores[i % pt->ncores], 5000, &sess[i]);
		if (err) {
			fprintf(stderr,
				"sprocket-bench: producer %u: connect to broker core %u failed: "
				"%s\n",
				i / pt->ncores, i % pt->ncores, strerror(-err));
			return err;
		}
		if (i == 0 && dp_xsess_slots(sess[i]) < o->depth && !slots_warned++)
			fprintf(stderr,
				"sprocket-bench: the broker grants %u requests in flight per "
				"session, fewer than --depth=%u: raise its slotsPerSession\n",
				dp_xsess_slots(sess[i]), o->depth);
	}
	for (unsigned i = 0; i < nreq; i++) {
		reqs[i].run = &run;
		reqs[i].msg = malloc(cap);
		if (!reqs[i].msg)
			return -ENOMEM;
	}
	t_start = clk_mono_ns();
	warm_end = t_start + (uint64_t)(warm * 1e9);
	end = warm_end + (uint64_t)(secs * 1e9);
	if (e2e) {
		/*
		 * The consumers get sessions of their own, as a consumer process
		 * would, each with at most as many parked pulls as the broker
		 * grants it slots: a long-polling pull holds its slot for up to
		 * the suspend time, and 8 or more of them on the producer's
		 * session (the broker grants 8) left no slot for a SEND.
		 * Consumer i pulls the queues q with q % consumers == i, as the
		 * members of a consumer group share a topic's queues.
		 */
		unsigned nc = o->consumers;
		/* consumer i's current session to core c, and its parked pulls */
		struct dp_xsess **cur = calloc((size_t)nc * pt->ncores, sizeof(*cur));
		unsigned *used = calloc((size_t)nc * pt->ncores, sizeof(*used));

		ks = calloc(pt->nq, sizeof(*ks));
		csess = calloc(pt->nq, sizeof(*csess));
		if (!ks || !csess || !cur || !used)
			return -ENOMEM;
		for (unsigned q = 0; q < pt->nq; q++) {
			unsigned core = pt->qcore[q];
			unsigned ci = (q % nc) * pt->ncores + core;

			if (!cur[ci] || used[ci] >= dp_xsess_slots(cur[ci])) {
				err = dp_xcli_connect(cli, pt->cores[core], 5000, &cur[ci]);
				if (err) {
					fprintf(stderr,
						"sprocket-bench: consumer %u: session to broker "
						"core %u failed: %s\n",
						q % nc, core, strerror(-err));
					return err;
				}
				csess[ncsess++] = cur[ci];
				used[ci] = 0;
			}
			used[ci]++;
			ks[q] = (struct pcons){.run = &run,
					       .res = e2e,
					       .sess = cur[ci],
					       .qid = (int32_t)q,
					       .warm_end = warm_end};
			err = max_offset_sync(o, cli, ks[q].sess, (int32_t)q, &ks[q].next);
			if (err)
				return err;
		}
		free(cur);
		free(used);
	}
	for (;;) {
		uint64_t now = clk_mono_ns();
		bool any_busy = false;

		bench_progress(now, res->mode, res->count, res->h);

		for (unsigned q = 0; ks && q < pt->nq && now < end; q++)
			if (!ks[q].busy)
				(void)cons_submit(o, ks[q].sess, &ks[q], 200);

		for (unsigned i = 0; i < nreq; i++) {
			struct preq *q = &reqs[i];
			unsigned qid, core, p = i / o->depth;
			uint64_t d;
			long n;

			if (q->busy) {
				any_busy = true;
				continue;
			}
			if (now >= end)
				continue;
			/*
			 * Open loop: message k belongs to producer k % producers and
			 * waits, its due time fixed, for a free slot of that
			 * producer, as a separate client would. Closed loop: any
			 * producer with a free slot sends.
			 */
			if (interval && issued % np != p)
				continue;
			d = interval ? t_start + issued * interval : now;
			if (interval && now < d)
				break;
			/* Round robin over the queues; this request's session is its queue's core. */
			qid = next_q % pt->nq;
			core = pt->qcore[qid];
			n = produce_encode(o, (int32_t)qid, d, q->msg, cap, body);
			if (n < 0)
				return (int)n;
			q->due = d;
			q->measured = d >= warm_end;
			q->op = o->batch > 1 ? WIRE_DP_OP_SEND_BATCH : WIRE_DP_OP_SEND;
			if (dp_xcli_submit(sess[p * pt->ncores + core], q->op, q->msg, (uint32_t)n,
					   pdone, q) != 0)
				continue;
			next_q++;
			q->busy = true;
			any_busy = true;
			issued++;
		}
		if (now >= end && !any_busy)
			break;
		/*
		 * Throughput runs share a small machine with the broker's store
		 * threads: give them the CPU when there is nothing to read. With
		 * --no-busy (SYNC_FLUSH runs) wait in the port after 50 us idle,
		 * so that a flusher sharing our CPU runs at once.
		 */
		if (dp_xcli_poll(cli) != 0) {
			idle_since = clk_mono_ns();
		} else if (o->batch > 1) {
			sched_yield();
		} else if (!o->busy && clk_mono_ns() - idle_since > 50000) {
			dp_port_wait(port, 200);
		}
		for (unsigned i = 0; i < np * pt->ncores; i++) {
			if (dp_xsess_is_dead(sess[i])) {
				fprintf(stderr,
					"sprocket-bench: producer %u: session to broker core %u "
					"died\n",
					i / pt->ncores, i % pt->ncores);
				return -ECONNRESET;
			}
		}
	}
	if (ks) {
		/* Consume what this slice produced (2 s at most), then let the pulls end. */
		uint64_t t = clk_mono_ns(), got;

		do {
			got = 0;
			for (unsigned q = 0; q < pt->nq; q++) {
				got += ks[q].consumed;
				if (!ks[q].busy && got < run.ok)
					(void)cons_submit(o, ks[q].sess, &ks[q], 100);
			}
			(void)dp_xcli_poll(cli);
		} while (got < run.ok && clk_mono_ns() - t < 2000000000ull);
		cons_drain(cli, ks, pt->nq);
		if (got < run.ok)
			fprintf(stderr, "sprocket-bench: e2e consumed %llu of %llu sent\n",
				(unsigned long long)got, (unsigned long long)run.ok);
		e2e->secs += secs;
		e2e->lost += run.ok > got ? run.ok - got : 0;
		free(ks);
	}
	if (run.errors || run.busy_answers)
		fprintf(stderr,
			"sprocket-bench: %llu failed sends (last status %d), %llu SYSTEM_BUSY\n",
			(unsigned long long)run.errors, run.last_status,
			(unsigned long long)run.busy_answers);
	res->secs += secs;
	res->lost += run.errors;
	res->busy += run.busy_answers;
	res->retrans += dp_xcli_stats(cli)->tx_retrans;
	for (unsigned i = 0; i < np * pt->ncores; i++)
		dp_xcli_close(sess[i], 500);
	free(sess);
	for (unsigned i = 0; i < ncsess; i++)
		dp_xcli_close(csess[i], 500);
	free(csess);
	dp_xcli_destroy(cli);
	for (unsigned i = 0; i < nreq; i++)
		free(reqs[i].msg);
	free(reqs);
	free(body);
	return 0;
}

/*
 * Sends one message to every queue until each is SUCCESS: creates an
 * auto-created topic (the broker answers SYSTEM_BUSY until the control
 * thread has published it) and warms every path. Return: 0 or -ETIMEDOUT.
 */
static int
produce_prime(const struct opts *o, struct dp_port *port, const struct ptarget *pt)
{
	struct dp_xcli_cfg cc = {.slots = 8, .access_key = cred.ak, .secret_key = cred.sk};
	struct dp_xsess *sess[BENCH_CORES_MAX] = {0};
	struct result r = {.mode = "prime"};
	struct prun run = {.res = &r};
	size_t cap = (size_t)SP_MAX(1u, o->batch) * (o->size + 64) + 512 + strlen(o->topic);
	uint8_t *body = calloc(1, o->size);
	uint8_t *msg = malloc(cap);
	uint64_t t0 = clk_mono_ns();
	struct dp_xcli *cli = NULL;
	int err = hist_create(HIST_MAX_NS, &r.h);

	if (err || !body || !msg || dp_xcli_create(&cc, port, &cli) != 0) {
		err = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < pt->ncores; i++) {
		err = dp_xcli_connect(cli, pt->cores[i], 5000, &sess[i]);
		if (err)
			goto out;
	}
	for (unsigned qid = 0; qid < pt->nq && !stop_flag;) {
		struct preq q = {.run = &run, .busy = true};
		uint64_t before = run.ok;
		long n = produce_encode(o, (int32_t)qid, clk_mono_ns(), msg, cap, body);

		q.op = o->batch > 1 ? WIRE_DP_OP_SEND_BATCH : WIRE_DP_OP_SEND;
		if (n < 0 ||
		    dp_xcli_submit(sess[pt->qcore[qid]], q.op, msg, (uint32_t)n, pdone, &q) != 0) {
			err = -EIO;
			goto out;
		}
		while (q.busy)
			(void)dp_xcli_poll(cli);
		if (run.ok > before) {
			qid++;
			continue;
		}
		if (run.last_status == WIRE_DP_ST_NO_PERMISSION) {
			err = -EACCES; /* aclEnable: this account may not publish to the topic */
			goto out;
		}
		if (clk_mono_ns() - t0 > 30000000000ull) {
			err = -ETIMEDOUT;
			goto out;
		}
		usleep(1000); /* SYSTEM_BUSY: the topic or its files are being made */
	}
	err = 0;
out:
	for (unsigned i = 0; i < pt->ncores; i++)
		if (sess[i])
			dp_xcli_close(sess[i], 500);
	if (cli)
		dp_xcli_destroy(cli);
	hist_destroy(r.h);
	free(body);
	free(msg);
	return err;
}

static int
produce_route(const struct opts *o, struct ptarget *pt)
{
	struct sp_route *rt = NULL;
	const struct sp_route_queue *q = NULL;
	const struct sp_route_broker *b;
	int err = sp_route_fetch(o->namesrv, o->topic, 3000, &rt);

	if (err == -ENOENT) {
		/* Not created yet: the brokers that auto-create it register TBW102. */
		err = sp_route_fetch(o->namesrv, "TBW102", 3000, &rt);
		if (err == -ENOENT) {
			fprintf(stderr,
				"sprocket-bench: topic %s does not exist and no broker "
				"auto-creates topics\n",
				o->topic);
			return err;
		}
	}
	if (err) {
		fprintf(stderr, "sprocket-bench: route of %s from %s: %s\n", o->topic, o->namesrv,
			strerror(-err));
		return err;
	}
	for (uint32_t i = 0; i < rt->n_queues && !q; i++)
		if ((rt->queues[i].perm & 2) && rt->brokers[rt->queues[i].broker].has_dp)
			q = &rt->queues[i];
	if (q == NULL) {
		fprintf(stderr, "sprocket-bench: no writable sprocket broker serves %s\n",
			o->topic);
		sp_route_free(rt);
		return -ENOENT;
	}
	b = &rt->brokers[q->broker];
	snprintf(pt->rmt, sizeof(pt->rmt), "%s", b->addr);
	pt->nq = SP_MIN(q->write_queues, o->queues ? o->queues : PRODUCE_QUEUES_MAX);
	pt->ncores = SP_MIN(b->dp_cores, BENCH_CORES_MAX);
	for (unsigned c = 0; c < pt->ncores; c++)
		pt->cores[c] = (struct dp_addr){.ip = b->dp_ip, .port = (uint16_t)(b->dp_port + c)};
	for (unsigned i = 0; i < pt->nq; i++) {
		pt->qcore[i] = sp_route_queue_core(rt, q, i);
		if (pt->qcore[i] >= pt->ncores)
			pt->qcore[i] = (uint16_t)(i % pt->ncores);
		pt->addr[i] = pt->cores[pt->qcore[i]];
	}
	sp_route_free(rt);
	return 0;
}

/* ---- the same produce load over RocketMQ remoting (TCP) ---- */

struct rslot {
	bool busy;
	bool measured;
	int32_t opaque;
	uint64_t due;
};

/* Encodes SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) for queue @qid. Return: frame bytes or -errno. */
static long
rmt_encode(const struct opts *o, const char *topic, int32_t qid, int32_t opaque, uint8_t *buf,
	   size_t cap, const uint8_t *body, uint8_t *batch, size_t batch_cap)
{
	struct wire_rem_cmd c = {.code = o->batch > 1 ? WIRE_REQ_SEND_BATCH_MESSAGE
						      : WIRE_REQ_SEND_MESSAGE_V2,
				 .opaque = opaque,
				 .version = WIRE_REM_VERSION_V4_9_8,
				 .language = WIRE_LANG_JAVA,
				 .serialize = WIRE_REM_JSON};
	char q[16], born[24];
	size_t len = 0, out;

	snprintf(q, sizeof(q), "%d", qid);
	snprintf(born, sizeof(born), "%lld", (long long)clk_wall_ms());
	if (wire_rem_ext_add(&c, "a", "PID_BENCH") || wire_rem_ext_add(&c, "b", topic) ||
	    wire_rem_ext_add(&c, "c", "TBW102") || wire_rem_ext_add(&c, "d", "4") ||
	    wire_rem_ext_add(&c, "e", q) || wire_rem_ext_add(&c, "f", "0") ||
	    wire_rem_ext_add(&c, "g", born) || wire_rem_ext_add(&c, "h", "0"))
		return -E2BIG;
	if (o->batch > 1) {
		struct wire_batch_item it = {.body = body, .body_len = o->size};

		for (unsigned i = 0; i < o->batch; i++)
			if (wire_batch_append(batch, batch_cap, &len, &it) != 0)
				return -ENOBUFS;
		if (wire_rem_ext_add(&c, "m", "true"))
			return -E2BIG;
		c.body = batch;
		c.body_len = (uint32_t)len;
	} else {
		c.body = body;
		c.body_len = o->size;
	}
	if (cred.ak) {
		char sig[HMAC_B64_LEN + 1];

		if (wire_rem_ext_add(&c, "AccessKey", cred.ak))
			return -E2BIG;
		wire_rem_sign(&c, &cred.key, sig);
		if (wire_rem_ext_add(&c, "Signature", sig))
			return -E2BIG;
		if (wire_rem_encode(&c, buf, cap, &out) != 0)
			return -ENOBUFS;
		return (long)out;
	}
	if (wire_rem_encode(&c, buf, cap, &out) != 0)
		return -ENOBUFS;
	return (long)out;
}

static int
rmt_connect(const char *addr)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd, one = 1;

	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/*
 * run_produce_slice()'s load (--rate, --depth, --size, --batch, round robin
 * over the queues) as SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE frames on one
 * TCP connection to the broker's remoting port, latency from the intended
 * send time, as a RocketMQ client would see it.
 */
static int
run_remoting_slice(const struct opts *o, const struct ptarget *pt, double warm, double secs,
		   struct result *res)
{
	unsigned nreq = o->depth;
	struct rslot *slots = calloc(nreq, sizeof(*slots));
	size_t bcap = (size_t)SP_MAX(1u, o->batch) * (o->size + 64) + 64;
	size_t fcap = bcap + 4096;
	uint8_t *body = calloc(1, o->size), *batch = malloc(bcap), *frame = malloc(fcap);
	size_t icap = 1u << 20, ilen = 0, scap = 1u << 16;
	uint8_t *in = malloc(icap);
	char *scratch = malloc(scap);
	struct bench_pace pace;
	uint64_t warm_end, end, errors = 0;
	int32_t next_opaque = 1, last_code = 0;
	unsigned next_q = 0;
	int fd, rc = 0;

	if (!slots || !body || !batch || !frame || !in || !scratch) {
		rc = -ENOMEM;
		goto out;
	}
	fd = rmt_connect(pt->rmt);
	if (fd < 0) {
		fprintf(stderr, "sprocket-bench: remoting connect to %s: %s\n", pt->rmt,
			strerror(-fd));
		rc = fd;
		goto out;
	}
	bench_pace_init(&pace, clk_mono_ns(), o->rate);
	warm_end = pace.start + (uint64_t)(warm * 1e9);
	end = warm_end + (uint64_t)(secs * 1e9);
	for (;;) {
		uint64_t now = clk_mono_ns();
		bool any_busy = false;
		ssize_t n;

		bench_progress(now, res->mode, res->count, res->h);

		for (unsigned i = 0; i < nreq; i++) {
			struct rslot *q = &slots[i];
			uint64_t d;
			long len;
			size_t off = 0;

			if (q->busy) {
				any_busy = true;
				continue;
			}
			if (now >= end)
				continue;
			d = bench_pace_due(&pace, now);
			if (now < d)
				break;
			q->opaque = next_opaque++;
			len = rmt_encode(o, o->topic, (int32_t)(next_q++ % pt->nq), q->opaque,
					 frame, fcap, body, batch, bcap);
			if (len < 0) {
				rc = (int)len;
				goto out_fd;
			}
			while (off <
			       (size_t)len) { /* the kernel buffer holds a frame: rarely loops */
				ssize_t w = send(fd, frame + off, (size_t)len - off, MSG_NOSIGNAL);

				if (w < 0 && errno != EAGAIN && errno != EINTR) {
					fprintf(stderr, "sprocket-bench: remoting send: %s\n",
						strerror(errno));
					rc = -errno;
					goto out_fd;
				}
				off += w > 0 ? (size_t)w : 0;
			}
			q->due = d;
			q->measured = d >= warm_end;
			q->busy = true;
			any_busy = true;
			pace.issued++;
		}
		if (now >= end && !any_busy)
			break;
		n = recv(fd, in + ilen, icap - ilen, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			fprintf(stderr,
				"sprocket-bench: the broker closed the remoting connection\n");
			rc = -ECONNRESET;
			goto out_fd;
		}
		if (n < 0) {
			/*
			 * Wait in the kernel as a RocketMQ client (Netty, epoll)
			 * does, until an answer or the next send is due: a
			 * spinning client would take the CPU the broker's
			 * control thread needs on a small machine.
			 */
			uint64_t t = clk_mono_ns();
			uint64_t due = pace.interval ? bench_pace_due(&pace, t) : t + 1000000;
			uint64_t wait = due > t ? SP_MIN(due - t, 1000000ull) : 0;
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};

			if (wait > 0 || !any_busy)
				(void)ppoll(&pfd, 1, &ts, NULL);
			continue;
		}
		ilen += (size_t)n;
		for (;;) {
			struct wire_rem_cmd c;
			size_t flen;
			uint64_t t = clk_mono_ns();

			if (wire_rem_frame_len(in, ilen, icap, &flen) != 0 ||
			    wire_rem_decode(in, flen, &c, scratch, scap) != 0)
				break;
			for (unsigned i = 0; i < nreq; i++) {
				struct rslot *q = &slots[i];

				if (!q->busy || q->opaque != c.opaque)
					continue;
				q->busy = false;
				if (c.code != WIRE_RSP_SUCCESS) {
					errors++;
					last_code = c.code;
				} else if (q->measured) {
					hist_record(res->h, t - q->due);
					res->count++;
					res->msgs += SP_MAX(1u, o->batch);
				}
			}
			memmove(in, in + flen, ilen - flen);
			ilen -= flen;
		}
	}
	if (errors)
		fprintf(stderr, "sprocket-bench: %llu remoting sends failed (last code %d)\n",
			(unsigned long long)errors, last_code);
	res->secs += secs;
	res->lost += errors;
out_fd:
	close(fd);
out:
	free(slots);
	free(body);
	free(batch);
	free(frame);
	free(in);
	free(scratch);
	return rc;
}

/*
 * The yardstick of SYNC_FLUSH: append --size bytes to a file in --fsync-dir
 * and fdatasync it, one at a time, for @secs; each round trip is a sample.
 */
static int
run_fsync(const struct opts *o, double secs, struct result *res)
{
	char path[512];
	uint8_t *buf = calloc(1, o->size);
	uint64_t end = clk_mono_ns() + (uint64_t)(secs * 1e9);
	off_t at = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/sprocket-bench-fsync.%d", o->fsync_dir, (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || buf == NULL) {
		fprintf(stderr, "sprocket-bench: %s: %s\n", path, strerror(errno));
		free(buf);
		return -EIO;
	}
	while (clk_mono_ns() < end && !stop_flag) {
		uint64_t t0 = clk_mono_ns();

		if (pwrite(fd, buf, o->size, at) != (ssize_t)o->size || fdatasync(fd) != 0) {
			res->lost++;
			break;
		}
		at += o->size;
		hist_record(res->h, clk_mono_ns() - t0);
		res->count++;
	}
	res->secs += secs;
	close(fd);
	unlink(path);
	free(buf);
	return 0;
}

static int
run_produce(const struct opts *o)
{
	struct ptarget *pt = calloc(2, sizeof(*pt));
	struct dp_port *port = NULL;
	struct opts me = *o;
	struct opts o2 = *o;
	struct result raw = {.mode = "ping-raw"};
	struct result pr = {.mode = o->batch > 1 ? "throughput" : "produce"};
	struct result pr2 = {.mode = "throughput"};
	struct result ee = {.mode = "e2e"};
	struct result xp = {.mode = "ping"};
	struct result fs = {.mode = "fdatasync"};
	struct result tcp = {.mode = o->batch > 1 ? "throughput-tcp" : "produce-tcp"};
	char label[2][48];
	bool e2e = strcmp(o->mode, "e2e") == 0;
	bool two = o->topic2 != NULL;
	bool do_raw = !o->no_raw;
	unsigned rounds = o->rounds;
	int rc = 1;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	clk_init();
	if (pt == NULL)
		return 1;
	if (o->namesrv == NULL) {
		fprintf(stderr, "sprocket-bench produce: --namesrv=HOST:PORT is required\n");
		return 2;
	}
	o2.topic = o->topic2;
	o2.queues = o->queues2;
	if (produce_route(o, &pt[0]) != 0 || (two && produce_route(&o2, &pt[1]) != 0))
		return 1;
	if (e2e && o->consumers > pt[0].nq) {
		fprintf(stderr,
			"sprocket-bench: --consumers=%u but topic %s has %u queues: a consumer "
			"would have none\n",
			o->consumers, o->topic, pt[0].nq);
		return 1;
	}
	if (two) {
		snprintf(label[0], sizeof(label[0]), "%s-%uq", pr.mode, pt[0].nq);
		snprintf(label[1], sizeof(label[1]), "%s-%uq", pr.mode, pt[1].nq);
		pr.mode = label[0];
		pr2.mode = label[1];
	}
	if (!me.ip && o->backend == DP_BACKEND_UDP)
		me.ip = "127.0.0.1";
	pin(o->cpu_self);
	if (open_port(&me, me.iface, me.ip, me.port, me.dpdk_args, &port) != 0)
		return 1;
	for (uint64_t t = clk_mono_ns(); !dp_port_link_up(port);) {
		if (clk_mono_ns() - t > 10000000000ull) {
			fprintf(stderr, "sprocket-bench: the %s link did not come up in 10 s\n",
				dp_backend_name(o->backend));
			goto out;
		}
		dp_port_wait(port, 1000);
	}
	int err = produce_prime(o, port, &pt[0]);
	if (err == 0 && two)
		err = produce_prime(&o2, port, &pt[1]);
	if (err == -EACCES) {
		fprintf(stderr,
			"sprocket-bench: the broker refused: NO_PERMISSION (aclEnable: set "
			"SPROCKET_ACCESS_KEY and SPROCKET_SECRET_KEY to an account that may "
			"publish to the topic)\n");
		goto out;
	}
	if (err) {
		fprintf(stderr, "sprocket-bench: a topic did not accept a message on every queue "
				"within 30 s\n");
		goto out;
	}
	if (do_raw && o->size + 16 > port->max_dgram)
		do_raw = false;
	if (hist_create(HIST_MAX_NS, &raw.h) != 0 || hist_create(HIST_MAX_NS, &pr.h) != 0 ||
	    hist_create(HIST_MAX_NS, &ee.h) != 0 || hist_create(HIST_MAX_NS, &xp.h) != 0 ||
	    hist_create(HIST_MAX_NS, &pr2.h) != 0 || hist_create(HIST_MAX_NS, &fs.h) != 0 ||
	    hist_create(HIST_MAX_NS, &tcp.h) != 0)
		goto out;
	if (o->remoting && !pt[0].rmt[0]) {
		fprintf(stderr, "sprocket-bench: the route has no remoting address for %s\n",
			o->topic);
		goto out;
	}
	print_header(o);
	bench_progress_start("sprocket-bench", o->progress);
	if (!do_raw && !two && !o->fsync_dir && !o->remoting)
		rounds = 1;
	for (unsigned r = 0; r < rounds && !stop_flag; r++) {
		double warm = r == 0 ? o->warmup : 0;
		double slice = o->duration / rounds;

		if (do_raw && run_raw(o, port, pt[0].cores[0], warm, slice, &raw) != 0) {
			fprintf(stderr,
				"sprocket-bench: no ping-raw row: the broker does not reflect "
				"raw datagrams (set dataplaneRawEcho=true)\n");
			do_raw = false;
		}
		/* the transport alone against the same core: PING, answered by the broker */
		if (!o->no_xport && run_xport(o, port, pt[0].cores[0], warm, slice, &xp) != 0)
			goto out;
		if (run_produce_slice(o, port, &pt[0], warm, slice, &pr, e2e ? &ee : NULL) != 0)
			goto out;
		if (two && run_produce_slice(&o2, port, &pt[1], warm, slice, &pr2, NULL) != 0)
			goto out;
		if (o->remoting && run_remoting_slice(o, &pt[0], warm, slice, &tcp) != 0)
			goto out;
		if (o->fsync_dir && run_fsync(o, slice, &fs) != 0)
			goto out;
	}
	if (do_raw)
		print_result(o, &raw);
	if (!o->no_xport)
		print_result(o, &xp);
	print_result(o, &pr);
	if (two)
		print_result(o, &pr2);
	if (o->remoting)
		print_result(o, &tcp);
	if (o->fsync_dir)
		print_result(o, &fs);
	if (e2e)
		print_result(o, &ee);
	rc = 0;
out:
	hist_destroy(raw.h);
	hist_destroy(pr.h);
	hist_destroy(pr2.h);
	hist_destroy(ee.h);
	hist_destroy(xp.h);
	hist_destroy(fs.h);
	hist_destroy(tcp.h);
	free(pt);
	if (port)
		dp_ports_close(&port, 1);
	return rc;
}

/* ---- peer process and topology ---- */

struct topo {
	char ns_self[64];
	char ns_peer[64];
	char runtime_dir[128];
	pid_t peer;
	bool made_ns;
};

static struct topo g_topo;

static int sh(const char *fmt, ...) SP_PRINTF(1, 2);

static int
sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "sprocket-bench: '%s' failed (%d)\n", cmd, rc);
	return rc;
}

static void
topo_cleanup(void)
{
	if (g_topo.peer > 0) {
		kill(g_topo.peer, SIGTERM);
		waitpid(g_topo.peer, NULL, 0);
		g_topo.peer = 0;
	}
	if (g_topo.made_ns) {
		/* Deleting a namespace removes its end of the veth and so the pair. */
		sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null; true", g_topo.ns_self,
		   g_topo.ns_peer);
		g_topo.made_ns = false;
	}
	if (g_topo.runtime_dir[0]) {
		sh("rm -rf %s", g_topo.runtime_dir);
		g_topo.runtime_dir[0] = 0;
	}
}

static int
enter_ns(const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
		fprintf(stderr, "sprocket-bench: cannot enter netns %s: %s\n", name,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Starts `argv0 echo <args>` (in @ns if set); reads its "ready IP PORT" line. */
static int
start_peer(const char *self, const char *ns, char *const *args, struct dp_addr *peer)
{
	int pfd[2];
	char line[256];
	char ip[64];
	unsigned port;
	FILE *f;
	pid_t pid;

	if (pipe(pfd) != 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char *argv[40];
		int k = 0;

		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		if (ns && enter_ns(ns) != 0)
			_exit(127);
		argv[k++] = (char *)self;
		argv[k++] = (char *)"echo";
		for (int i = 0; args[i] && k < 39; i++)
			argv[k++] = args[i];
		argv[k] = NULL;
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(pfd[1]);
	g_topo.peer = pid;
	f = fdopen(pfd[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || sscanf(line, "ready %63s %u", ip, &port) != 2) {
		fprintf(stderr, "sprocket-bench: the echo peer did not start\n");
		return -EIO;
	}
	/* Keep the pipe open: the peer's later prints must not hit a closed pipe. */
	inet_pton(AF_INET, ip, &peer->ip);
	peer->port = (uint16_t)port;
	return 0;
}

static void
print_header(const struct opts *o)
{
	bool produce = strcmp(o->mode, "ping") != 0;

	bench_print_header(o->json, "sprocket-bench", SP_VERSION, o->rate, o->depth,
			   produce ? o->producers : o->sessions, produce,
			   strcmp(o->mode, "e2e") == 0 ? o->consumers : 0);
}

static int
run_ping(const struct opts *o, const char *self)
{
	struct opts me = *o;
	struct dp_addr peer = {0};
	struct dp_port *port;
	char *pargs[32];
	char buf[8][256];
	int np = 0;
	int rc = 1;

	atexit(topo_cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	clk_init();
	snprintf(buf[0], sizeof(buf[0]), "--backend=%s", dp_backend_name(o->backend));
	pargs[np++] = buf[0];
	snprintf(buf[1], sizeof(buf[1]), "--cores=%d", o->cpu_peer);
	pargs[np++] = buf[1];
	if (!o->busy)
		pargs[np++] = (char *)"--no-busy";

	if (o->target) {
		char ip[64];
		unsigned port_no;

		if (sscanf(o->target, "%63[^:]:%u", ip, &port_no) != 2 ||
		    inet_pton(AF_INET, ip, &peer.ip) != 1) {
			fprintf(stderr, "sprocket-bench: --target=IP:PORT\n");
			return 1;
		}
		peer.port = (uint16_t)port_no;
	} else if (o->backend == DP_BACKEND_UDP) {
		pargs[np++] = (char *)"--ip=127.0.0.1";
		pargs[np] = NULL;
		if (start_peer(self, NULL, pargs, &peer) != 0)
			return 1;
	} else if (o->backend == DP_BACKEND_AF_PACKET) {
		/* Two namespaces and a veth pair, ours alone; removed at exit. */
		unsigned tag = (unsigned)getpid() % 200 + 20;

		snprintf(g_topo.ns_self, sizeof(g_topo.ns_self), "spb-%d-a", (int)getpid());
		snprintf(g_topo.ns_peer, sizeof(g_topo.ns_peer), "spb-%d-b", (int)getpid());
		g_topo.made_ns = true;
		if (sh("ip netns add %s && ip netns add %s && "
		       "ip link add spb%da netns %s type veth peer name spb%db netns %s && "
		       "ip -n %s addr add 10.251.%u.1/24 dev spb%da && "
		       "ip -n %s addr add 10.251.%u.2/24 dev spb%db && "
		       "ip -n %s link set spb%da up && ip -n %s link set spb%db up && "
		       "ip -n %s link set lo up && ip -n %s link set lo up",
		       g_topo.ns_self, g_topo.ns_peer, (int)getpid(), g_topo.ns_self, (int)getpid(),
		       g_topo.ns_peer, g_topo.ns_self, tag, (int)getpid(), g_topo.ns_peer, tag,
		       (int)getpid(), g_topo.ns_self, (int)getpid(), g_topo.ns_peer, (int)getpid(),
		       g_topo.ns_self, g_topo.ns_peer) != 0)
			return 1;
		snprintf(buf[2], sizeof(buf[2]), "--iface=spb%db", (int)getpid());
		snprintf(buf[3], sizeof(buf[3]), "--ip=10.251.%u.2", tag);
		pargs[np++] = buf[2];
		pargs[np++] = buf[3];
		pargs[np++] = (char *)"--port=9100";
		pargs[np] = NULL;
		if (start_peer(self, g_topo.ns_peer, pargs, &peer) != 0)
			return 1;
		if (enter_ns(g_topo.ns_self) != 0)
			return 1;
		snprintf(buf[4], sizeof(buf[4]), "spb%da", (int)getpid());
		snprintf(buf[5], sizeof(buf[5]), "10.251.%u.1", tag);
		me.iface = buf[4];
		me.ip = buf[5];
		me.port = 9000;
	} else {
		/* dpdk: both ends on net_memif, an abstract socket unique to this run. */
		static char self_args[512];
		static char peer_args[600];

		snprintf(g_topo.runtime_dir, sizeof(g_topo.runtime_dir), "/tmp/spb-dpdk-%d",
			 (int)getpid());
		mkdir(g_topo.runtime_dir, 0700);
		setenv("RUNTIME_DIRECTORY", g_topo.runtime_dir, 1);
		snprintf(peer_args, sizeof(peer_args),
			 "--dpdk-args=-l %d --no-pci --no-huge --no-shconf --no-telemetry "
			 "--file-prefix=spb-peer-%d "
			 "--vdev=net_memif0,role=server,socket=/spb-%d,socket-abstract=yes",
			 o->cpu_peer, (int)getpid(), (int)getpid());
		snprintf(self_args, sizeof(self_args),
			 "-l %d --no-pci --no-huge --no-shconf --no-telemetry --file-prefix=spb-%d "
			 "--vdev=net_memif0,role=client,socket=/spb-%d,socket-abstract=yes",
			 o->cpu_self, (int)getpid(), (int)getpid());
		pargs[np++] = peer_args;
		pargs[np++] = (char *)"--ip=10.250.0.2";
		pargs[np++] = (char *)"--port=9100";
		pargs[np] = NULL;
		if (start_peer(self, NULL, pargs, &peer) != 0)
			return 1;
		if (!me.dpdk_args)
			me.dpdk_args = self_args;
		me.ip = "10.250.0.1";
		me.port = 9000;
	}
	pin(o->cpu_self);
	if (open_port(&me, me.iface, me.ip, me.port, me.dpdk_args, &port) != 0)
		return 1;
	/* A memif client connects (and re-arms) from wait(): poll it until the link is up. */
	for (uint64_t t = clk_mono_ns(); !dp_port_link_up(port);) {
		if (clk_mono_ns() - t > 10000000000ull) {
			fprintf(stderr, "sprocket-bench: the %s link did not come up in 10 s\n",
				dp_backend_name(o->backend));
			goto out;
		}
		dp_port_wait(port, 1000);
	}
	print_header(o);
	bench_progress_start("sprocket-bench", o->progress);
	/*
	 * Interleave: --rounds slices of raw then transport, so both rows see
	 * the same conditions (on a VM the host moves vCPUs closer or apart
	 * between seconds, which alone moves memif p50 between 0.6 and 1.9 us).
	 */
	struct result raw = {.mode = "ping-raw"};
	struct result xp = {.mode = "ping"};
	bool do_raw = !o->no_raw;
	unsigned rounds = o->rounds;

	if (do_raw && o->size > port->max_dgram) {
		fprintf(stderr,
			"sprocket-bench: no ping-raw row: %u bytes do not fit one %s datagram "
			"(%u)\n",
			o->size, dp_backend_name(o->backend), port->max_dgram);
		do_raw = false;
	}
	if (hist_create(HIST_MAX_NS, &raw.h) != 0 || hist_create(HIST_MAX_NS, &xp.h) != 0)
		goto out;
	if (!do_raw || o->no_xport)
		rounds = 1;
	for (unsigned r = 0; r < rounds && !stop_flag; r++) {
		double warm = r == 0 ? o->warmup : 0;
		double slice = o->duration / rounds;

		if (do_raw && run_raw(o, port, peer, warm, slice, &raw) != 0) {
			/* the transport row still runs: it retransmits where raw cannot */
			fprintf(stderr, "sprocket-bench: no ping-raw row\n");
			do_raw = false;
		}
		if (!o->no_xport && !stop_flag && run_xport(o, port, peer, warm, slice, &xp) != 0)
			goto out;
	}
	if (do_raw)
		print_result(o, &raw);
	if (!o->no_xport)
		print_result(o, &xp);
	hist_destroy(raw.h);
	hist_destroy(xp.h);
	rc = 0;
out:
	dp_ports_close(&port, 1);
	topo_cleanup();
	return rc;
}

int
main(int argc, char **argv)
{
	struct opts o;
	int rc = parse_opts(argc, argv, &o);

	if (rc != 0)
		return rc > 0 ? 0 : 2;
	cred_init();
	if (strcmp(o.mode, "echo") == 0) {
		clk_init();
		return run_echo(&o);
	}
	if (strcmp(o.mode, "ping") == 0)
		return run_ping(&o, argv[0]);
	if (strcmp(o.mode, "throughput") == 0) {
		/* max rate: batches of --batch (default 64), pipelined --depth deep */
		if (o.batch == 0)
			o.batch = 64;
		o.no_raw = o.no_xport = true;
		o.rate = 0;
		return run_produce(&o);
	}
	if (strcmp(o.mode, "produce") == 0 || strcmp(o.mode, "e2e") == 0)
		return run_produce(&o);
	fprintf(stderr, "sprocket-bench: unknown mode '%s'\n", o.mode);
	usage();
	return 2;
}
