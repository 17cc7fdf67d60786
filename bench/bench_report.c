// SPDX-License-Identifier: Apache-2.0
/*
 * bench_report.c - result lines and run header shared by sprocket-bench and
 * the peer drivers (bench_report.h). The formats are sprocket-bench's, which
 * docs/benchmarks.md and bench/compare.sh parse: change them in one place.
 */
#include <stdio.h>
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
