// SPDX-License-Identifier: Apache-2.0
/*
 * bench_report.c - result lines and run header shared by sprocket-bench and
 * the peer drivers (bench_report.h). The formats are sprocket-bench's, which
 * docs/benchmarks.md and bench/compare.sh parse: change them in one place.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench_report.h"
#include "common/clock.h"
#include "common/hist.h"

uint64_t bench_progress_next = UINT64_MAX;
static uint64_t progress_every;
static uint64_t progress_t0;
static const char *progress_tool;

void
bench_progress_start(const char *tool, double every)
{
	if (every <= 0) {
		bench_progress_next = UINT64_MAX;
		return;
	}
	progress_tool = tool;
	progress_every = (uint64_t)(every * 1e9);
	progress_t0 = clk_mono_ns();
	bench_progress_next = progress_t0 + progress_every;
}

void
bench_progress_print(uint64_t now, const char *what, uint64_t count, const struct hist *h)
{
	if (h != NULL && hist_count(h) > 0)
		fprintf(stderr,
			"%s: progress %.0f s: %s %llu answers, p50 %.2f us, p99 %.2f us so far\n",
			progress_tool, (double)(now - progress_t0) / 1e9, what,
			(unsigned long long)count, hist_percentile(h, 50) / 1e3,
			hist_percentile(h, 99) / 1e3);
	else
		fprintf(stderr, "%s: progress %.0f s: %s %llu answers so far\n", progress_tool,
			(double)(now - progress_t0) / 1e9, what, (unsigned long long)count);
	/* the next due time after now, skipping any missed while a phase set up */
	while (bench_progress_next <= now)
		bench_progress_next += progress_every;
}

void
bench_print_row(const struct bench_row *r, bool json)
{
	const struct hist *h = r->h;
	double rate = r->secs > 0 ? (double)(r->msgs ? r->msgs : r->count) / r->secs : 0;

	if (json) {
		printf("{\"mode\":\"%s\",\"backend\":\"%s\",\"size\":%u,\"count\":%llu,"
		       "\"lost\":%llu,\"busy\":%llu,\"depth\":%u,\"sessions\":%u,\"consumers\":%u,"
		       "\"rate\":%.0f,"
		       "\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,"
		       "\"p9999_ns\":%llu,\"max_ns\":%llu,\"msgs_per_s\":%.0f,"
		       "\"server_mean_ns\":%.0f,\"handled_mean_ns\":%.0f,\"retrans\":%llu}\n",
		       r->mode, r->backend, r->size, (unsigned long long)r->count,
		       (unsigned long long)r->lost, (unsigned long long)r->busy, r->depth,
		       r->sessions, r->consumers, r->rate,
		       (unsigned long long)hist_percentile(h, 50),
		       (unsigned long long)hist_percentile(h, 90),
		       (unsigned long long)hist_percentile(h, 99),
		       (unsigned long long)hist_percentile(h, 99.9),
		       (unsigned long long)hist_percentile(h, 99.99),
		       (unsigned long long)hist_max(h), rate,
		       r->count ? (double)r->srv_ns / (double)r->count : 0,
		       r->count ? (double)r->hdl_ns / (double)r->count : 0,
		       (unsigned long long)r->retrans);
	} else {
		printf("%-14s %-9s %7u %10llu %8.2f %8.2f %8.2f %8.2f %9.2f %9.2f %11.0f\n",
		       r->mode, r->backend, r->size, (unsigned long long)r->count,
		       hist_percentile(h, 50) / 1e3, hist_percentile(h, 90) / 1e3,
		       hist_percentile(h, 99) / 1e3, hist_percentile(h, 99.9) / 1e3,
		       hist_percentile(h, 99.99) / 1e3, hist_max(h) / 1e3, rate);
		if (r->retrans)
			printf("               (%llu packets retransmitted)\n",
			       (unsigned long long)r->retrans);
		if (r->lost)
			printf("               (%llu lost: no answer within %u ms)\n",
			       (unsigned long long)r->lost, r->lost_timeout_ms);
		if (r->busy)
			printf("               (%llu refused: SYSTEM_BUSY, not acknowledged)\n",
			       (unsigned long long)r->busy);
	}
	fflush(stdout);
}

void
bench_print_header(bool json, const char *tool, const char *version, double rate, unsigned depth,
		   unsigned clients, bool producing, unsigned consumers)
{
	struct utsname u;
	char model[128] = "?";
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	while (f && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && p) {
			snprintf(model, sizeof(model), "%s", p + 2);
			model[strcspn(model, "\n")] = 0;
			break;
		}
	}
	if (f)
		fclose(f);
	uname(&u);
	if (json) {
		printf("{\"machine\":{\"cpus\":%ld,\"cpu\":\"%s\",\"kernel\":\"%s\"},"
		       "\"version\":\"%s\"}\n",
		       sysconf(_SC_NPROCESSORS_ONLN), model, u.release, version);
		return;
	}
	printf("# %s %s on %ld cpus (%s), kernel %s\n", tool, version,
	       sysconf(_SC_NPROCESSORS_ONLN), model, u.release);
	if (producing)
		printf("# %s load, %u producer%s x depth %u, %u consumer%s; latency in us%s\n",
		       rate > 0 ? "open-loop" : "closed-loop", clients, clients == 1 ? "" : "s",
		       depth, consumers, consumers == 1 ? "" : "s",
		       rate > 0 ? " from the intended send time" : "");
	else
		printf("# %s load, depth %u x %u sessions; latency in us%s\n",
		       rate > 0 ? "open-loop" : "closed-loop", depth, clients,
		       rate > 0 ? " from the intended send time" : "");
	printf("%-14s %-9s %7s %10s %8s %8s %8s %8s %9s %9s %11s\n", "mode", "backend", "size",
	       "count", "p50", "p90", "p99", "p99.9", "p99.99", "max", "msgs/s");
}

void
bench_print_peer_rows(const struct bench_popts *o, const struct bench_peer_result *r)
{
	struct bench_row row = {.mode = "produce",
				.backend = r->backend,
				.size = o->size,
				.depth = o->depth,
				.sessions = o->producers,
				.rate = o->rate,
				.count = r->pcount,
				.lost = r->perrors,
				.secs = o->duration,
				.h = r->ph,
				.lost_timeout_ms = r->lost_timeout_ms};

	bench_print_row(&row, o->json);
	if (strcmp(o->mode, "e2e") != 0)
		return;
	row.mode = "e2e";
	row.consumers = o->consumers;
	row.count = r->ecount;
	row.lost = r->acked > r->consumed ? r->acked - r->consumed : 0;
	row.h = r->eh;
	bench_print_row(&row, o->json);
}

int
bench_popts_parse(int argc, char **argv, struct bench_popts *o, unsigned queues_max)
{
	static const struct option lo[] = {
		{"url", required_argument, NULL, 'u'},
		{"host", required_argument, NULL, 'H'},
		{"port", required_argument, NULL, 'p'},
		{"size", required_argument, NULL, 's'},
		{"duration", required_argument, NULL, 'd'},
		{"warmup", required_argument, NULL, 'w'},
		{"rate", required_argument, NULL, 'r'},
		{"depth", required_argument, NULL, 'D'},
		{"queues", required_argument, NULL, 'q'},
		{"producers", required_argument, NULL, 'P'},
		{"consumers", required_argument, NULL, 'C'},
		{"progress", required_argument, NULL, 'g'},
		{"cpu", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{0},
	};
	int c;

	o->size = 128;
	o->duration = 5;
	o->warmup = 1;
	o->rate = 0;
	o->depth = 1;
	o->queues = 1;
	o->producers = 1;
	o->consumers = 1;
	o->progress = -1;
	o->cpu = -1;
	o->json = false;
	if (argc < 2)
		return -1;
	o->mode = argv[1];
	if (strcmp(o->mode, "produce") != 0 && strcmp(o->mode, "e2e") != 0)
		return -1;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'u':
			o->url = optarg;
			break;
		case 'H':
			o->host = optarg;
			break;
		case 'p':
			o->port = atoi(optarg);
			break;
		case 's':
			o->size = (uint32_t)atoi(optarg);
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
		case 'D':
			o->depth = (unsigned)atoi(optarg);
			break;
		case 'q':
			o->queues = (unsigned)atoi(optarg);
			break;
		case 'P':
			o->producers = (unsigned)atoi(optarg);
			break;
		case 'C':
			o->consumers = (unsigned)atoi(optarg);
			break;
		case 'g':
			o->progress = atof(optarg);
			break;
		case 'c':
			o->cpu = atoi(optarg);
			break;
		case 'j':
			o->json = true;
			break;
		default:
			return -1;
		}
	}
	if (o->size < 8)
		o->size = 8;
	if (o->depth < 1)
		o->depth = 1;
	if (o->queues < 1 || o->queues > queues_max || o->producers < 1 || o->producers > 64 ||
	    o->consumers < 1 || o->consumers > o->queues)
		return -1;
	if (o->progress < 0)
		o->progress = bench_progress_default(o->duration);
	return 0;
}
