/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_report.h - what every latency driver in bench/ shares: the result
 * line (JSON or the human table of sprocket-bench), the run header, and the
 * load pacing.
 *
 * sprocket-bench and the peer drivers (peer_nats, peer_redis) print through
 * these, so bench/compare.sh reads one format from every system.
 *
 * Pacing: closed loop (rate 0) sends the next request when a slot is free and
 * times it from that moment. Open loop at rate R makes request i due at
 * start + i/R and times it from that due time, not from when it actually
 * left, so a stall that delays later requests is charged to them
 * (coordinated omission corrected, as wrk2 does).
 */
#ifndef SP_BENCH_REPORT_H
#define SP_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>

struct hist;

/* One row: a mode (produce, e2e, ping-raw...) measured on one system. */
struct bench_row {
	const char *mode;
	const char *backend; /* sprocket: udp|af_packet|dpdk; peers: their protocol */
	uint32_t size;
	unsigned depth;
	unsigned sessions;  /* ping: sessions; produce/e2e/throughput: producers */
	unsigned consumers; /* e2e: consumers sharing the queues; 0: none */
	double rate;	    /* target requests/s; 0: closed loop */
	uint64_t count;
	uint64_t lost; /* sent and never acknowledged (or, e2e, acknowledged, never consumed) */
	uint64_t busy; /* refused with SYSTEM_BUSY: the broker's backpressure, not acknowledged */
	double secs;
	const struct hist *h; /* ns */
	uint64_t srv_ns;
	uint64_t hdl_ns;
	uint64_t msgs; /* messages acknowledged; 0: count */
	uint64_t retrans;
	unsigned lost_timeout_ms; /* for the human line "(N lost: no answer within T ms)" */
};

/* Context: any thread; prints one line (and notes) to stdout, flushes. */
void bench_print_row(const struct bench_row *r, bool json);

/**
 * bench_print_header() - the machine line, then (human) the load line and the
 * column names.
 * @tool: "sprocket-bench", "peer-nats"...
 * @version: the version of what is measured (sprocket's, or the peer server's)
 * @clients: ping's sessions, or with @producing the producers
 * @consumers: with @producing, the consumers (0: none)
 */
void bench_print_header(bool json, const char *tool, const char *version, double rate,
			unsigned depth, unsigned clients, bool producing, unsigned consumers);

struct bench_pace {
	uint64_t start;
	uint64_t interval; /* ns between due times; 0: closed loop */
	uint64_t issued;
};

static inline void
bench_pace_init(struct bench_pace *p, uint64_t start, double rate)
{
	p->start = start;
	p->interval = rate > 0 ? (uint64_t)(1e9 / rate) : 0;
	p->issued = 0;
}

/* Return: when the next request is due: open loop its slot, closed loop @now. */
static inline uint64_t
bench_pace_due(const struct bench_pace *p, uint64_t now)
{
	return p->interval ? p->start + p->issued * p->interval : now;
}

/*
 * Progress on stderr during long runs: a line at most every @every seconds,
 * "<tool>: progress 15 s: produce 150000 answers, p50 10.2 us, p99 45.1 us so
 * far". Off until bench_progress_start(); callers tick from their loops.
 */
extern uint64_t bench_progress_next; /* mono ns; UINT64_MAX: off */

/* @every <= 0: off. The clock (clk_init) must be set up. */
void bench_progress_start(const char *tool, double every);
/* Prints the line; @h may be NULL (another thread writes it): no percentiles. */
void bench_progress_print(uint64_t now, const char *what, uint64_t count, const struct hist *h);

/* Context: the loop's thread, with @now from clk_mono_ns(). One compare when not due. */
static inline void
bench_progress(uint64_t now, const char *what, uint64_t count, const struct hist *h)
{
	if (now >= bench_progress_next)
		bench_progress_print(now, what, count, h);
}

/* The default period: every 5 s when a measured phase lasts 20 s or more. */
static inline double
bench_progress_default(double duration)
{
	return duration >= 20 ? 5 : 0;
}

/* The options every peer driver takes (peer_nats, peer_redis). */
struct bench_popts {
	const char *mode; /* produce | e2e */
	const char *url;  /* --url (NATS) */
	const char *host; /* --host (Redis) */
	int port;	  /* --port (Redis) */
	uint32_t size;
	double duration;
	double warmup;
	double rate;
	unsigned depth;
	unsigned queues;
	unsigned producers; /* connections publishing, --depth in flight each */
	unsigned consumers; /* connections consuming, sharing the queues */
	double progress;    /* --progress seconds; < 0: bench_progress_default() */
	int cpu;
	bool json;
};

/* What a peer driver measured, for bench_print_peer_rows(). */
struct bench_peer_result {
	const char *backend;	  /* "jetstream", "redis" */
	unsigned lost_timeout_ms; /* how long a send waited for its answer */
	uint64_t pcount;	  /* produce: measured acknowledgements */
	uint64_t perrors;	  /* produce: sends that failed */
	const struct hist *ph;
	uint64_t ecount;   /* e2e: measured deliveries */
	uint64_t acked;	   /* e2e: acknowledged in all ... */
	uint64_t consumed; /* ... and consumed of those */
	const struct hist *eh;
};

/* The produce row, and with mode e2e the e2e row, of a peer driver's run of @o. */
void bench_print_peer_rows(const struct bench_popts *o, const struct bench_peer_result *r);

/**
 * bench_popts_parse() - "MODE [--size=B] [--duration=S] [--warmup=S]
 * [--rate=N] [--depth=N] [--queues=N] [--producers=N] [--consumers=N]
 * [--progress=S] [--cpu=C] [--json]" plus --url,
 * --host and --port. @o holds the driver's defaults for url/host/port on
 * entry; the rest get the common defaults.
 * Return: 0, -1 (print the usage).
 */
int bench_popts_parse(int argc, char **argv, struct bench_popts *o, unsigned queues_max);

#endif /* SP_BENCH_REPORT_H */
