// SPDX-License-Identifier: Apache-2.0
/*
 * bench_store.cpp - store micro-benchmarks (Google Benchmark).
 *
 *   build/bench/bench_store [--benchmark_filter=...]
 *
 * BM_append/N: store_put() of N-byte bodies on one core (record + CQ unit),
 *   ASYNC_FLUSH with the real background threads, inside one 1 GiB
 *   segment; msgs/s and bytes/s. BM_append_rolling: the same across 16 MiB
 *   segments, where the service thread's preparation sets the pace.
 * BM_memcpy_mapped/N: memcpy of N + record-header bytes into a pre-faulted
 *   shared file mapping, the ceiling for the append above, same run.
 * BM_append_latency: per-append latency (TSC) into a histogram across
 *   several segment rolls; reports p50/p99/p99.9/max as counters.
 * BM_sync_group_commit/K/N: SYNC_FLUSH acknowledged msgs/s with K appends
 *   of N-byte bodies outstanding; BM_fsync_per_msg/N: pwrite + fdatasync
 *   of one record of an N-byte body per message, the baseline;
 *   BM_fsync_ceiling/64/N: 64 such records per pwrite + fdatasync, the most
 *   a 64-message group commit could get from this disk.
 * BM_cq_read / BM_get: ConsumeQueue read by offset; unit + record fetch.
 * The store lives in $SP_BENCH_DIR (default /tmp) on the disk under test.
 */
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" {
#include "common/clock.h"
#include "common/hist.h"
#include "store/store.h"
}

static std::string
bench_dir()
{
	const char *d = getenv("SP_BENCH_DIR");
	std::string tmpl = std::string(d ? d : "/tmp") + "/sp-bench-XXXXXX";
	std::vector<char> buf(tmpl.begin(), tmpl.end());

	buf.push_back('\0');
	if (mkdtemp(buf.data()) == nullptr)
		abort();
	return std::string(buf.data());
}

static void
rm_dir(const std::string &d)
{
	std::string cmd = "rm -rf '" + d + "'";

	if (system(cmd.c_str()) != 0)
		abort();
}

struct bench_store {
	std::string dir;
	struct store *s = nullptr;
	struct store_queue *q = nullptr;

	bench_store(bool sync, uint64_t seg, bool threads = true, uint32_t cq_units = 300000)
	{
		struct store_cfg cfg;

		dir = bench_dir();
		store_cfg_default(&cfg);
		cfg.root = dir.c_str();
		cfg.seg_size = seg;
		cfg.sync_flush = sync;
		cfg.threads = threads;
		cfg.cq_units = cq_units;
		cfg.idx_slots = 1 << 16;
		cfg.idx_entries = 1 << 18;
		if (store_open(&cfg, &s) != 0 || store_queue_get(s, "Bench", 0, 0, &q) != 0)
			abort();
	}
	~bench_store()
	{
		store_close(s);
		rm_dir(dir);
	}
};

static long
put(struct bench_store &b, const std::vector<uint8_t> &body, struct store_put_res *r)
{
	struct wire_msg m;
	long n;

	std::memset(&m, 0, sizeof(m));
	m.body = body.data();
	m.body_len = (uint32_t)body.size();
	/*
	 * -EAGAIN: the service thread is preparing a file. A core would answer
	 * busy and poll on; here the thread yields, as on a 2-core box a pure
	 * spin starves the very thread it waits for.
	 */
	while ((n = store_put(b.s, b.q, &m, r)) == -EAGAIN)
		sched_yield();
	return n;
}

/* Append range(0)-byte bodies for as long as the benchmark runs. */
static void
append_loop(benchmark::State &st, struct bench_store &b)
{
	std::vector<uint8_t> body((size_t)st.range(0), 'x');
	struct store_put_res r;

	for (auto _ : st) {
		if (put(b, body, &r) <= 0)
			abort();
	}
	st.SetItemsProcessed((int64_t)st.iterations());
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
}

static void
BM_append(benchmark::State &st)
{
	/*
	 * The append path itself, as a core pays it: one 1 GiB segment and one
	 * ConsumeQueue file hold the whole run, no background thread competes.
	 */
	struct bench_store b(false, 1ull << 30, false, 1u << 22);
	append_loop(st, b);
}
BENCHMARK(BM_append)->Arg(128)->Iterations(4000000);
BENCHMARK(BM_append)->Arg(1024)->Iterations(800000);

static void
BM_append_rolling(benchmark::State &st)
{
	/*
	 * With the flusher, service and indexer threads, 16 MiB segments: on a
	 * 2-core box they share the CPUs with the appender.
	 */
	struct bench_store b(false, 16ull << 20);
	append_loop(st, b);
}
BENCHMARK(BM_append_rolling)->Arg(1024)->Iterations(800000);

static void
BM_memcpy_mapped(benchmark::State &st)
{
	std::string dir = bench_dir();
	std::string path = dir + "/map";
	size_t len = 256ull << 20;
	size_t rec = (size_t)st.range(0) + 100;
	std::vector<uint8_t> src(rec, 'x');
	int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
	size_t off = 0;
	uint8_t *map;

	if (fd < 0 || posix_fallocate(fd, 0, (off_t)len) != 0)
		abort();
	map = (uint8_t *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		abort();
	for (size_t i = 0; i < len; i += 4096)
		map[i] = 0;
	for (auto _ : st) {
		if (off + rec > len)
			off = 0;
		std::memcpy(map + off, src.data(), rec);
		off += rec;
		benchmark::ClobberMemory();
	}
	st.SetItemsProcessed((int64_t)st.iterations());
	st.SetBytesProcessed((int64_t)st.iterations() * st.range(0));
	munmap(map, len);
	close(fd);
	rm_dir(dir);
}
BENCHMARK(BM_memcpy_mapped)->Arg(128)->Arg(1024)->MinTime(1.0);

static void
append_latency(benchmark::State &st, bool threads)
{
	/* 8 MiB segments: a 1 KiB append rolls every ~7,000 messages. */
	struct bench_store b(false, 8ull << 20, threads, 1u << 16);
	std::vector<uint8_t> body(1024, 'x');
	struct store_put_res r;
	uint64_t rolls = 0;
	struct hist *h;

	clk_init();
	if (hist_create(10ull * 1000 * 1000 * 1000, &h) != 0)
		abort();
	for (auto _ : st) {
		uint64_t t0;
		long n;

		if (!threads && clog_wants_next(store_clog(b.s, 0))) {
			/* The service thread's job, done here outside the timed part. */
			if (store_service(b.s, clk_wall_ms()) != 0)
				abort();
			rolls++;
		}
		t0 = clk_tsc();
		n = put(b, body, &r);
		hist_record(h, clk_tsc_to_ns(clk_tsc() - t0));
		if (n <= 0)
			abort();
	}
	st.counters["p50_ns"] = (double)hist_percentile(h, 50);
	st.counters["p99_ns"] = (double)hist_percentile(h, 99);
	st.counters["p99.9_ns"] = (double)hist_percentile(h, 99.9);
	st.counters["p99.99_ns"] = (double)hist_percentile(h, 99.99);
	st.counters["max_ns"] = (double)hist_max(h);
	st.counters["rolls"] = (double)(threads ? hist_count(h) * 1100 / (8ull << 20) : rolls);
	hist_destroy(h);
}

/*
 * The same measurement around a bare 1 KiB memcpy into pre-faulted memory:
 * what this machine's noise (interrupts, steal time) adds to any timing.
 */
static void
BM_memcpy_latency(benchmark::State &st)
{
	std::vector<uint8_t> src(1124, 'x');
	std::vector<uint8_t> dst(64ull << 20, 0);
	size_t off = 0;
	struct hist *h;

	clk_init();
	if (hist_create(10ull * 1000 * 1000 * 1000, &h) != 0)
		abort();
	for (auto _ : st) {
		uint64_t t0 = clk_tsc();

		if (off + src.size() > dst.size())
			off = 0;
		std::memcpy(dst.data() + off, src.data(), src.size());
		off += src.size();
		benchmark::ClobberMemory();
		hist_record(h, clk_tsc_to_ns(clk_tsc() - t0));
	}
	st.counters["p50_ns"] = (double)hist_percentile(h, 50);
	st.counters["p99_ns"] = (double)hist_percentile(h, 99);
	st.counters["p99.9_ns"] = (double)hist_percentile(h, 99.9);
	st.counters["p99.99_ns"] = (double)hist_percentile(h, 99.99);
	st.counters["max_ns"] = (double)hist_max(h);
	hist_destroy(h);
}
BENCHMARK(BM_memcpy_latency)->Iterations(200000);

/* The append path across segment rolls, next segments prepared off the clock. */
static void
BM_append_latency(benchmark::State &st)
{
	append_latency(st, false);
}
BENCHMARK(BM_append_latency)->Iterations(200000);

/* The same with the store's threads sharing this 2-core box with the appender. */
static void
BM_append_latency_threads(benchmark::State &st)
{
	append_latency(st, true);
}
BENCHMARK(BM_append_latency_threads)->Iterations(200000);

static void
BM_sync_group_commit(benchmark::State &st)
{
	/*
	 * 1 GiB segments, and the run starts once the service thread has
	 * prepared (zero-filled) the next one: what is timed is the group
	 * commit itself, as in the baseline, not a segment's preparation
	 * writing 1 GiB beside it.
	 */
	struct bench_store b(true, 1ull << 30);
	std::vector<uint8_t> body((size_t)st.range(1), 'x');
	std::vector<struct store_put_res> r((size_t)st.range(0));
	size_t k = r.size();
	size_t i = 0;

	while (clog_wants_next(store_clog(b.s, 0)))
		usleep(1000);

	/* K appends in flight at all times: wait for the oldest, send a new one. */
	for (auto &x : r) {
		if (put(b, body, &x) <= 0)
			abort();
	}
	for (auto _ : st) {
		struct store_put_res *x = &r[i % k];
		int d;

		while ((d = store_durable(b.s, x->shard, x->ticket)) == 0)
			sched_yield(); /* poll, leaving the CPU to the flusher */
		if (d < 0 || put(b, body, x) <= 0)
			abort();
		i++;
	}
	st.SetItemsProcessed((int64_t)st.iterations());
	st.counters["msgs_per_sync"] =
		(double)(st.iterations() + k) / (double)clog_syncs(store_clog(b.s, 0));
	st.counters["record_bytes"] = (double)r[0].size;
}
/*
 * 128 B and 1 KiB bodies: a 64-message group syncs 15 KiB or 71 KiB, and
 * on a disk whose cost grows with the bytes written the ratio to
 * fsync-per-message differs between the two.
 */
BENCHMARK(BM_sync_group_commit)
	->ArgsProduct({{1, 8, 64}, {128, 1024}})
	->UseRealTime()
	->MinTime(2.0);
/* Shorter: at ~0.5 M msgs/s two seconds would outrun the 1 GiB segment. */
BENCHMARK(BM_sync_group_commit)->Args({256, 1024})->UseRealTime()->MinTime(0.5);

/*
 * pwrite + fdatasync of `per_sync` records of `body`-byte bodies at a time,
 * into the same kind of file the store appends to (allocated, zero-filled).
 */
static void
fsync_loop(benchmark::State &st, size_t body, size_t per_sync)
{
	std::string dir = bench_dir();
	std::string path = dir + "/log";
	/* The body and a 96-byte record header (topic "Bench"), as store_put writes. */
	std::vector<uint8_t> rec((body + 96) * per_sync, 'x');
	int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
	off_t off = 0;

	if (fd < 0 || posix_fallocate(fd, 0, 256 << 20) != 0)
		abort();
	{
		std::vector<uint8_t> zeros(1 << 20, 0);

		for (off_t o = 0; o < (256 << 20); o += (off_t)zeros.size()) {
			if (pwrite(fd, zeros.data(), zeros.size(), o) != (ssize_t)zeros.size())
				abort();
		}
		if (fdatasync(fd) != 0)
			abort();
	}
	for (auto _ : st) {
		if (pwrite(fd, rec.data(), rec.size(), off) != (ssize_t)rec.size() ||
		    fdatasync(fd) != 0)
			abort();
		off = (off + (off_t)rec.size()) % (255 << 20);
	}
	st.SetItemsProcessed((int64_t)(st.iterations() * per_sync));
	close(fd);
	rm_dir(dir);
}

/* The baseline: one message, one fdatasync. */
static void
BM_fsync_per_msg(benchmark::State &st)
{
	fsync_loop(st, (size_t)st.range(0), 1);
}
BENCHMARK(BM_fsync_per_msg)->Arg(128)->Arg(1024)->UseRealTime()->MinTime(1.0);

/*
 * The disk's ceiling for a group of 64: the 64 records written and synced
 * at once, with nothing else (no appender, no hand-off). No group commit
 * at 64 outstanding can beat it; its ratio to the baseline is the best
 * this disk allows.
 */
static void
BM_fsync_ceiling(benchmark::State &st)
{
	fsync_loop(st, (size_t)st.range(1), (size_t)st.range(0));
}
BENCHMARK(BM_fsync_ceiling)->Args({64, 128})->Args({64, 1024})->UseRealTime()->MinTime(1.0);

static void
BM_cq_read(benchmark::State &st)
{
	struct bench_store b(false, 64ull << 20);
	std::vector<uint8_t> body(128, 'x');
	struct store_put_res r;
	struct cq_unit u;
	uint64_t i = 0;

	for (int k = 0; k < 100000; k++)
		put(b, body, &r);
	for (auto _ : st) {
		if (cq_get(store_queue_cq(b.q), i, &u) != 0)
			abort();
		benchmark::DoNotOptimize(u);
		i = (i + 7919) % 100000;
	}
}
BENCHMARK(BM_cq_read);

static void
BM_get(benchmark::State &st)
{
	struct bench_store b(false, 64ull << 20);
	std::vector<uint8_t> body(128, 'x');
	struct store_put_res r;
	struct cq_unit u;
	const uint8_t *rec;
	uint64_t i = 0;

	for (int k = 0; k < 100000; k++)
		put(b, body, &r);
	for (auto _ : st) {
		long n = store_get(b.s, b.q, i, &rec, &u);

		if (n <= 0)
			abort();
		benchmark::DoNotOptimize(rec);
		i = (i + 7919) % 100000;
	}
}
BENCHMARK(BM_get);

BENCHMARK_MAIN();
