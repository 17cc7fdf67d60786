/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lcore.h - the per-core poll loop of a broker's dataplane.
 *
 * One pinned thread per dataplane core runs, forever: poll the port through
 * the core's transport server (RX burst, handlers, TX burst), drain the
 * command ring (work other threads hand this core), run the owner's tick
 * (deferred acks, parked requests), then report a QSBR quiescent state. The
 * thread is registered with liburcu-qsbr and goes offline while it waits, so
 * an idle core never delays a grace period.
 *
 * Idle policy: busy_poll spins forever (NIC hosts); otherwise the loop spins
 * for spin_us after the last work, then waits in the port (poll() on
 * udp/af_packet, a short sleep on dpdk) for up to wait_us.
 *
 * Stall detector: an iteration longer than stall_us counts as a stall; the
 * count and the longest are in the stats (Seastar's reactor stall idea).
 * Link watch: every ~1 ms the loop asks the port whether its link is up and
 * stops polling a dead link until it returns (the DPDK memif PMD must not be
 * polled while its peer tears the rings down).
 */
#ifndef SP_DP_LCORE_H
#define SP_DP_LCORE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/ring.h"
#include "dp/port.h"
#include "dp/xport.h"

struct dp_lcore;

/* A command dequeued from the core's ring; the core now owns @cmd. Context: the core. */
typedef void (*dp_lcore_cmd_fn)(struct dp_lcore *lc, void *cmd, void *arg);
/*
 * Runs once per loop iteration after RX (deferred work); @now_ns is the
 * iteration's clk_mono_fast_ns(). Return: work done (0 = idle).
 */
typedef unsigned (*dp_lcore_tick_fn)(struct dp_lcore *lc, uint64_t now_ns, void *arg);

struct dp_lcore_cfg {
	int cpu;	   /* pin to this CPU; -1: do not pin */
	bool busy_poll;	   /* never wait */
	unsigned spin_us;  /* spin this long after the last work before waiting (default 50) */
	unsigned wait_us;  /* longest wait when idle (default 1000) */
	unsigned stall_us; /* an iteration longer than this is a stall (default 500) */
	uint32_t ring_cap; /* command and completion rings (default 1024) */
	dp_lcore_cmd_fn on_cmd;
	dp_lcore_tick_fn tick;
	void *arg;
};

/* Ownership: the core writes, other threads read relaxed (torn reads fine). */
struct dp_lcore_stats {
	_Atomic uint64_t loops;
	_Atomic uint64_t waits;
	_Atomic uint64_t stalls;
	_Atomic uint64_t stall_max_ns;
	_Atomic uint64_t cmds;
	_Atomic uint64_t link_down_polls; /* iterations skipped with the link down */
	/* page faults of the core's thread, set as it exits (dp_lcore_faults() while it runs) */
	_Atomic uint64_t minflt_exit;
	_Atomic uint64_t majflt_exit;
};

struct dp_lcore {
	/* immutable after start */
	alignas(64) unsigned id;
	struct dp_lcore_cfg cfg;
	struct dp_port *port;
	struct dp_xsrv *xsrv;
	struct ring *cmd; /* producer: one control thread; consumer: this core */
	struct ring *cpl; /* producer: this core; consumer: the control thread */
	int wake_fd;	  /* eventfd: dp_lcore_post() ends the core's idle wait */
	pthread_t thread;
	/* the core is (about to be) waiting: posters must poke wake_fd (seq_cst both sides) */
	alignas(64) _Atomic bool sleeping;
	_Atomic bool woken; /* wake_fd was written and not drained yet */
	_Atomic bool stop;
	_Atomic bool running;
	_Atomic int tid; /* the core's thread id (its /proc/self/task/<tid>), 0 until it runs */
	/* owner writes, stats read relaxed */
	alignas(64) struct dp_lcore_stats st;
};

/**
 * dp_lcore_start() - create the rings and start the core's thread.
 * @xsrv: the transport server on @port (the core becomes its owner).
 *
 * Context: startup (control thread). Return: 0, -ENOMEM, -EINVAL, or a
 * pthread error (negative).
 */
MUST_CHECK int dp_lcore_start(struct dp_lcore *lc, unsigned id, const struct dp_lcore_cfg *cfg,
			      struct dp_port *port, struct dp_xsrv *xsrv);

/**
 * dp_lcore_faults() - page faults the core's thread has taken so far (minor:
 * a page mapped without I/O; major: with I/O), read from
 * /proc/self/task/<tid>/stat by the caller, never by the core; once the
 * core has exited, what it took in all. A poll-mode core should take none
 * in steady state: each is a kernel entry on its hot path.
 * Context: control thread. Return: 0, -ENOENT not started, -errno.
 */
MUST_CHECK int dp_lcore_faults(const struct dp_lcore *lc, uint64_t *minor, uint64_t *major);

/* Asks the core to stop, joins it, frees the rings. Context: control thread. */
void dp_lcore_stop(struct dp_lcore *lc);

/*
 * Hands @cmd to the core and wakes it when it idles in its wait, so a
 * command waits for no timeout. Context: the one producer thread.
 * Return: 0, -EAGAIN ring full (back-pressure: retry later or refuse).
 */
MUST_CHECK int dp_lcore_post(struct dp_lcore *lc, void *cmd);

/* Core side: put a completion for the control thread. Return: 0 or -EAGAIN. */
MUST_CHECK int dp_lcore_complete(struct dp_lcore *lc, void *cpl);

/* Control side: take up to @n completions. Return: how many. */
unsigned dp_lcore_reap(struct dp_lcore *lc, void **out, unsigned n);

#endif /* SP_DP_LCORE_H */
