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
#include "common/hist.h"

void
bench_print_row(const struct bench_row *r, bool json)
{
	const struct hist *h = r->h;
	double rate = r->secs > 0 ? (double)(r->msgs ? r->msgs : r->count) / r->secs : 0;

	if (json) {
		printf("{\"mode\":\"%s\",\"backend\":\"%s\",\"size\":%u,\"count\":%llu,"
		       "\"lost\":%llu,\"depth\":%u,\"sessions\":%u,\"rate\":%.0f,"
		       "\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,"
		       "\"p9999_ns\":%llu,\"max_ns\":%llu,\"msgs_per_s\":%.0f,"
		       "\"server_mean_ns\":%.0f,\"handled_mean_ns\":%.0f,\"retrans\":%llu}\n",
		       r->mode, r->backend, r->size, (unsigned long long)r->count,
		       (unsigned long long)r->lost, r->depth, r->sessions, r->rate,
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
		printf("%-9s %-9s %7u %10llu %8.2f %8.2f %8.2f %8.2f %9.2f %9.2f %11.0f\n", r->mode,
		       r->backend, r->size, (unsigned long long)r->count,
		       hist_percentile(h, 50) / 1e3, hist_percentile(h, 90) / 1e3,
		       hist_percentile(h, 99) / 1e3, hist_percentile(h, 99.9) / 1e3,
		       hist_percentile(h, 99.99) / 1e3, hist_max(h) / 1e3, rate);
		if (r->retrans)
			printf("          (%llu packets retransmitted)\n",
			       (unsigned long long)r->retrans);
		if (r->lost)
			printf("          (%llu lost: no answer within %u ms)\n",
			       (unsigned long long)r->lost, r->lost_timeout_ms);
	}
	fflush(stdout);
}

void
bench_print_header(bool json, const char *tool, const char *version, double rate, unsigned depth,
		   unsigned sessions)
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
	printf("# %s load, depth %u x %u sessions; latency in us%s\n",
	       rate > 0 ? "open-loop" : "closed-loop", depth, sessions,
	       rate > 0 ? " from the intended send time" : "");
	printf("%-9s %-9s %7s %10s %8s %8s %8s %8s %9s %9s %11s\n", "mode", "backend", "size",
	       "count", "p50", "p90", "p99", "p99.9", "p99.99", "max", "msgs/s");
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
	if (o->queues < 1 || o->queues > queues_max)
		return -1;
	return 0;
}
