// SPDX-License-Identifier: Apache-2.0
/*
 * bench_namesrv.c - GET_ROUTEINFO_BY_TOPIC lookups/s and latency against the
 * real sprocket-namesrv, with and without a broker re-registering.
 *
 *   build/bench/bench_namesrv [--seconds=S] [--rounds=R] [--topics=N] [--rate=R]
 *                              [--bin=PATH]
 *
 * One run measures, for 1 and for 4 client connections (one thread each, a
 * uniformly random topic of N per request), three writer modes back to
 * back, R rounds of the modes interleaved (so drift and other load on a
 * shared box hit every mode alike):
 *   none       no registrations;
 *   heartbeat  the broker re-registers every 10 ms with the same data
 *              version (what RocketMQ brokers send every 30 s): liveness only;
 *   republish  every 10 ms with a new data version, so the NameServer
 *              re-parses all N topics and publishes a new table each time.
 * Each mode runs twice per round:
 *   closed     every connection sends its next lookup as soon as the last
 *              answer is in: lookups/s is the server's capacity with this
 *              many connections; latency is send to response, so a stalled
 *              request delays the next one unrecorded (no correction).
 *   open       every connection sends --rate lookups/s (default 5,000) on a
 *              fixed schedule, request k due at start + k / rate; latency is
 *              from the due time to the response, so a late answer also
 *              counts against the requests it held back (coordinated
 *              omission corrected). This is what clients see from a
 *              NameServer with CPU to spare, as NameServers run, and the
 *              loop to read the writer's effect on: a closed loop saturates
 *              the CPUs, so any writer work shows up as lost lookups/s more
 *              than as latency. --rate=0 leaves it out.
 * Output: a header line, then one JSON line per phase (lookups/s, p50, p99,
 * p99.9, max in us; registrations done), then per connection count and loop
 * the median over rounds of each mode's p99 and lookups/s, and the p99
 * ratios writer/none of those medians.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hist.h"
#include "ns_client.h"

#define WRITER_PERIOD_NS (10 * 1000 * 1000ull)
#define WARMUP_NS (300 * 1000 * 1000ull)
#define ROUNDS_MAX 15

enum wmode { W_NONE, W_HEARTBEAT, W_REPUBLISH };
static const char *const wmode_name[] = {"none", "heartbeat", "republish"};

struct bench {
	uint16_t port;
	uint32_t topics;
	double seconds;
	_Atomic bool stop;
	_Atomic uint64_t registrations;
	_Atomic int errors;
	enum wmode mode;
	double rate; /* lookups/s per connection in this phase; 0: closed loop */
	int conns;
	int64_t counter;
	struct hist *reg_h; /* registration round trips */
	char *body;	    /* the broker's registration body (republish rewrites the version) */
	size_t body_len;
	struct ns_client broker;
};

struct client {
	struct bench *b;
	struct hist *h;
	uint64_t n;
	uint64_t seed;
	int idx;
	pthread_t tid;
};

static const char *const reg_ext[] = {"brokerName",
				      "bench-a",
				      "brokerAddr",
				      "127.0.0.1:10911",
				      "clusterName",
				      "DefaultCluster",
				      "haServerAddr",
				      "127.0.0.1:10912",
				      "brokerId",
				      "0",
				      NULL};

static int
do_register(struct bench *b)
{
	return nsc_call(&b->broker, WIRE_REQ_REGISTER_BROKER, reg_ext, b->body, b->body_len);
}

static void *
writer_main(void *arg)
{
	struct bench *b = arg;
	uint64_t next = clk_mono_ns();

	while (!atomic_load(&b->stop)) {
		struct timespec ts;

		next += WRITER_PERIOD_NS;
		ts.tv_sec = (time_t)(next / CLK_NS_PER_SEC);
		ts.tv_nsec = (long)(next % CLK_NS_PER_SEC);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (b->mode == W_REPUBLISH) {
			/* Same length each time: the counter is printed with a fixed width. */
			char *p = strstr(b->body, "\"counter\":");
			char tmp[16];

			snprintf(tmp, sizeof(tmp), "%010" PRId64, ++b->counter % 10000000000);
			memcpy(p + 10, tmp, 10);
		}
		{
			uint64_t t0 = clk_mono_ns();

			if (do_register(b) != 0)
				atomic_fetch_add(&b->errors, 1);
			hist_record(b->reg_h, clk_mono_ns() - t0);
		}
		atomic_fetch_add(&b->registrations, 1);
	}
	return NULL;
}

static void
sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / CLK_NS_PER_SEC),
			      .tv_nsec = (long)(t % CLK_NS_PER_SEC)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *
client_main(void *arg)
{
	struct client *cl = arg;
	struct bench *b = cl->b;
	struct ns_client c;
	uint64_t start;
	uint64_t interval = 0;
	uint64_t due;
	char topic[32];
	const char *ext[] = {"topic", topic, NULL};

	if (nsc_connect(b->port, &c) != 0) {
		atomic_fetch_add(&b->errors, 1);
		return NULL;
	}
	/* The default 50 us timer slack would show as latency in the open loop. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	start = clk_mono_ns();
	if (b->rate > 0)
		interval = (uint64_t)((double)CLK_NS_PER_SEC / b->rate);
	/* Connections take turns within one interval rather than send together. */
	due = start + interval * (uint64_t)cl->idx / (uint64_t)b->conns;
	while (!atomic_load(&b->stop)) {
		uint64_t t0;
		uint64_t t1;

		cl->seed ^= cl->seed << 13;
		cl->seed ^= cl->seed >> 7;
		cl->seed ^= cl->seed << 17;
		snprintf(topic, sizeof(topic), "BenchTopic%" PRIu64, cl->seed % b->topics);
		if (interval > 0 && clk_mono_ns() < due)
			sleep_until(due);
		t0 = clk_mono_ns();
		if (nsc_call(&c, WIRE_REQ_GET_ROUTEINFO_BY_TOPIC, ext, NULL, 0) != 0) {
			atomic_fetch_add(&b->errors, 1);
			break;
		}
		t1 = clk_mono_ns();
		if (interval > 0) {
			/* Behind schedule, the next request goes at once and its
			 * wait since its due time is part of its latency. */
			t0 = due;
			due += interval;
		}
		if (t0 - start >= WARMUP_NS) {
			hist_record(cl->h, t1 - t0);
			cl->n++;
		}
	}
	nsc_close(&c);
	return NULL;
}

struct result {
	double rate;
	uint64_t p99;
};

static struct result
phase(struct bench *b, int conns, enum wmode mode, double rate)
{
	struct client cl[4];
	struct hist *all = NULL;
	pthread_t wt;
	uint64_t n = 0;
	uint64_t t0;
	double secs;
	struct result r;

	atomic_store(&b->stop, false);
	atomic_store(&b->registrations, 0);
	b->mode = mode;
	b->rate = rate;
	b->conns = conns;
	if (hist_create(10 * CLK_NS_PER_SEC, &all) != 0 ||
	    hist_create(10 * CLK_NS_PER_SEC, &b->reg_h) != 0)
		exit(1);
	if (mode != W_NONE && pthread_create(&wt, NULL, writer_main, b) != 0)
		exit(1);
	for (int i = 0; i < conns; i++) {
		cl[i] = (struct client){
			.b = b, .seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1), .idx = i};
		if (hist_create(10 * CLK_NS_PER_SEC, &cl[i].h) != 0 ||
		    pthread_create(&cl[i].tid, NULL, client_main, &cl[i]) != 0)
			exit(1);
	}
	t0 = clk_mono_ns();
	usleep((useconds_t)(b->seconds * 1e6) + (useconds_t)(WARMUP_NS / 1000));
	atomic_store(&b->stop, true);
	secs = (double)(clk_mono_ns() - t0 - WARMUP_NS) / 1e9;
	for (int i = 0; i < conns; i++) {
		pthread_join(cl[i].tid, NULL);
		if (hist_merge(all, cl[i].h) != 0)
			exit(1);
		n += cl[i].n;
		hist_destroy(cl[i].h);
	}
	if (mode != W_NONE)
		pthread_join(wt, NULL);
	r.rate = (double)n / secs;
	r.p99 = hist_percentile(all, 99.0);
	printf("{\"bench\":\"namesrv_route_lookup\",\"topics\":%u,\"conns\":%d,\"writer\":\"%s\","
	       "\"loop\":\"%s\",\"target_per_s\":%.0f,\"seconds\":%.2f,\"lookups\":%" PRIu64
	       ",\"lookups_per_s\":%.0f,"
	       "\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
	       "\"registrations\":%" PRIu64 ",\"reg_p50_us\":%.0f,\"reg_max_us\":%.0f,"
	       "\"errors\":%d}\n",
	       b->topics, conns, wmode_name[mode], rate > 0 ? "open" : "closed", rate * conns, secs,
	       n, r.rate, (double)hist_percentile(all, 50.0) / 1e3, (double)r.p99 / 1e3,
	       (double)hist_percentile(all, 99.9) / 1e3, (double)hist_max(all) / 1e3,
	       atomic_load(&b->registrations), (double)hist_percentile(b->reg_h, 50.0) / 1e3,
	       (double)hist_max(b->reg_h) / 1e3, atomic_load(&b->errors));
	fflush(stdout);
	hist_destroy(all);
	hist_destroy(b->reg_h);
	return r;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Medians of p99 and of rate, each over the rounds (upper median). */
static struct result
median(const struct result *r, int n)
{
	uint64_t p[ROUNDS_MAX];
	double q[ROUNDS_MAX];

	for (int i = 0; i < n; i++) {
		p[i] = r[i].p99;
		q[i] = r[i].rate;
	}
	qsort(p, (size_t)n, sizeof(p[0]), cmp_u64);
	qsort(q, (size_t)n, sizeof(q[0]), cmp_dbl);
	return (struct result){.rate = q[n / 2], .p99 = p[n / 2]};
}

static void
header(const struct bench *b, double rate)
{
	char model[128] = "unknown";
	char gov[64] = "n/a";
	char line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "model name", 10) == 0) {
			snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
			model[strcspn(model, "\n")] = '\0';
			break;
		}
	}
	if (f != NULL)
		fclose(f);
	f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "r");
	if (f != NULL && fgets(gov, sizeof(gov), f) != NULL)
		gov[strcspn(gov, "\n")] = '\0';
	if (f != NULL)
		fclose(f);
	printf("{\"header\":\"bench_namesrv\",\"cpu\":\"%s\",\"cores\":%ld,\"governor\":\"%s\","
	       "\"version\":\"%s\",\"topics\":%u,\"seconds_per_phase\":%.1f,"
	       "\"writer_period_ms\":10,\"open_rate_per_conn\":%.0f}\n",
	       model, sysconf(_SC_NPROCESSORS_ONLN), gov, SP_VERSION_STR, b->topics, b->seconds,
	       rate);
}

int
main(int argc, char **argv)
{
	struct bench b = {.topics = 10000, .seconds = 2.0};
	int rounds = 3;
	double rate = 5000;
	const char *bin = SP_NAMESRV_BIN;
	const char *args[] = {NULL};
	/* [connections 1 / 4][closed / open][writer mode][round] */
	static struct result res[2][2][3][ROUNDS_MAX];
	struct ns_proc p;

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--seconds=", 10) == 0)
			b.seconds = atof(argv[i] + 10);
		else if (strncmp(argv[i], "--rounds=", 9) == 0)
			rounds = atoi(argv[i] + 9);
		else if (strncmp(argv[i], "--topics=", 9) == 0)
			b.topics = (uint32_t)atoi(argv[i] + 9);
		else if (strncmp(argv[i], "--rate=", 7) == 0)
			rate = atof(argv[i] + 7);
		else if (strncmp(argv[i], "--bin=", 6) == 0)
			bin = argv[i] + 6;
		else {
			fprintf(stderr,
				"usage: %s [--seconds=S] [--rounds=R] [--topics=N] [--rate=R] "
				"[--bin=PATH]\n",
				argv[0]);
			return 2;
		}
	}
	if (b.topics == 0 || b.seconds <= 0 || rounds < 1 || rounds > ROUNDS_MAX || rate < 0 ||
	    rate > 1e6) {
		fprintf(stderr,
			"bench_namesrv: --topics > 0, --seconds > 0, --rounds 1..%d and "
			"--rate 0..1000000 (per connection)\n",
			ROUNDS_MAX);
		return 2;
	}
	header(&b, rate);
	if (nsp_start(bin, NULL, args, &p) != 0)
		return 1;
	b.port = p.port;
	b.body = nsc_register_body("BenchTopic", b.topics, 1700000000000, 1000000000, &b.body_len);
	if (b.body == NULL || nsc_connect(b.port, &b.broker) != 0 || do_register(&b) != 0) {
		fprintf(stderr, "bench: registering %u topics failed\n", b.topics);
		nsp_cleanup(&p);
		return 1;
	}
	b.counter = 1000000000;
	for (int k = 0; k < 2; k++) {
		for (int r = 0; r < rounds; r++) {
			for (int m = 0; m < 3; m++) {
				for (int l = 0; l < (rate > 0 ? 2 : 1); l++)
					res[k][l][m][r] = phase(&b, k == 0 ? 1 : 4, (enum wmode)m,
								l == 0 ? 0 : rate);
			}
		}
	}
	for (int k = 0; k < 2; k++) {
		for (int l = 0; l < (rate > 0 ? 2 : 1); l++) {
			struct result med[3];

			for (int m = 0; m < 3; m++)
				med[m] = median(res[k][l][m], rounds);
			printf("{\"summary\":\"median of %d rounds\",\"conns\":%d,\"loop\":\"%s\","
			       "\"p99_us\":{\"none\":%.1f,\"heartbeat\":%.1f,\"republish\":%.1f},"
			       "\"lookups_per_s\":{\"none\":%.0f,\"heartbeat\":%.0f,"
			       "\"republish\":%.0f},"
			       "\"p99_ratio\":{\"heartbeat\":%.2f,\"republish\":%.2f}}\n",
			       rounds, k == 0 ? 1 : 4, l == 0 ? "closed" : "open",
			       (double)med[0].p99 / 1e3, (double)med[1].p99 / 1e3,
			       (double)med[2].p99 / 1e3, med[0].rate, med[1].rate, med[2].rate,
			       (double)med[1].p99 / (double)med[0].p99,
			       (double)med[2].p99 / (double)med[0].p99);
		}
	}
	nsc_close(&b.broker);
	free(b.body);
	nsp_stop(&p);
	nsp_cleanup(&p);
	return atomic_load(&b.errors) ? 1 : 0;
}
