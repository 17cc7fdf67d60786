// SPDX-License-Identifier: Apache-2.0
/*
 * lcore.c - the dataplane core's poll loop (see dp/lcore.h).
 *
 * Nothing in the loop allocates, locks, logs or makes a syscall that can
 * sleep, except the idle wait, which happens with the thread offline for
 * RCU. Counters are written with relaxed atomics so a stats reader on
 * another thread sees whole values without slowing the core down.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>
#include <urcu/urcu-qsbr.h>

#include "common/clock.h"
#include "common/log.h"
#include "dp/lcore.h"

#define LINK_CHECK_NS 1000000ull
#define CMD_BURST 32

static void
bump(_Atomic uint64_t *c, uint64_t v)
{
	/* Single writer: a relaxed load + store is enough and avoids a locked add. */
	atomic_store_relaxed(c, atomic_load_relaxed(c) + v);
}

static void *
lcore_main(void *a)
{
	struct dp_lcore *lc = a;
	const struct dp_lcore_cfg *cfg = &lc->cfg;
	uint64_t spin_ns = (uint64_t)cfg->spin_us * 1000;
	uint64_t stall_ns = (uint64_t)cfg->stall_us * 1000;
	uint64_t last_work = clk_mono_fast_ns();
	uint64_t next_link = 0;
	bool link = true;
	char name[16];

	snprintf(name, sizeof(name), "dp-core-%u", lc->id);
	pthread_setname_np(pthread_self(), name);
	urcu_qsbr_register_thread();
	atomic_store_release(&lc->tid, (int)gettid());
	atomic_store_release(&lc->running, true); /* pairs with nothing: informational */
	while (!atomic_load_relaxed(&lc->stop)) {
		uint64_t t0 = clk_mono_fast_ns();
		uint64_t t1;
		unsigned work = 0;
		void *cmds[CMD_BURST];
		unsigned n;

		if (t0 >= next_link) {
			bool up = dp_port_link_up(lc->port);

			next_link = t0 + LINK_CHECK_NS;
			link = up;
		}
		if (link)
			work += dp_xsrv_poll(lc->xsrv, t0);
		else
			bump(&lc->st.link_down_polls, 1);
		n = ring_dequeue_burst(lc->cmd, cmds, CMD_BURST);
		for (unsigned i = 0; i < n; i++)
			cfg->on_cmd(lc, cmds[i], cfg->arg);
		if (n) {
			bump(&lc->st.cmds, n);
			dp_xsrv_flush(lc->xsrv);
		}
		work += n;
		if (cfg->tick) {
			work += cfg->tick(lc, t0, cfg->arg);
			dp_xsrv_flush(lc->xsrv);
		}
		urcu_qsbr_quiescent_state();
		bump(&lc->st.loops, 1);

		t1 = clk_mono_fast_ns();
		if (t1 - t0 > stall_ns) {
			bump(&lc->st.stalls, 1);
			if (t1 - t0 > atomic_load_relaxed(&lc->st.stall_max_ns))
				atomic_store_relaxed(&lc->st.stall_max_ns, t1 - t0);
		}
		if (work) {
			last_work = t1;
			continue;
		}
		if (cfg->busy_poll || t1 - last_work < spin_ns)
			continue;
		/* Idle: let grace periods pass without us, then wait for packets. */
		urcu_qsbr_thread_offline();
		/*
		 * seq_cst store then load, as dp_lcore_post() enqueues then
		 * loads `sleeping`: either we see its command or it sees us
		 * sleeping and writes wake_fd.
		 */
		atomic_store(&lc->sleeping, true);
		if (ring_count(lc->cmd) == 0)
			dp_port_wait_fd(lc->port, cfg->wait_us, lc->wake_fd);
		atomic_store(&lc->sleeping, false);
		/*
		 * Drain the eventfd (non-blocking: never sleeps). Clear `woken`
		 * only after a read that got the poster's write: a poster sets
		 * `woken` before it writes, and clearing it on an empty read
		 * would leave that write pending with nobody to drain it, and
		 * every later wait would return at once.
		 */
		if (atomic_load(&lc->woken)) {
			uint64_t v;

			if (read(lc->wake_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
				atomic_store(&lc->woken, false);
		}
		urcu_qsbr_thread_online();
		bump(&lc->st.waits, 1);
	}
	urcu_qsbr_unregister_thread();
	{
		struct rusage ru;

		/* off the loop: what the thread took in all, for the stop's statistics */
		if (getrusage(RUSAGE_THREAD, &ru) == 0) {
			atomic_store_relaxed(&lc->st.minflt_exit, (uint64_t)ru.ru_minflt);
			atomic_store_relaxed(&lc->st.majflt_exit, (uint64_t)ru.ru_majflt);
		}
	}
	atomic_store_release(&lc->running, false);
	return NULL;
}

int
dp_lcore_faults(const struct dp_lcore *lc, uint64_t *minor, uint64_t *major)
{
	int tid = atomic_load_acquire(&lc->tid);
	char path[64];
	char buf[512];
	unsigned long mn, mj;
	const char *p;
	size_t n;
	FILE *f;

	if (tid == 0)
		return -ENOENT;
	if (!atomic_load_acquire(&lc->running))
		goto exited;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "re");
	if (f == NULL) {
		int err = errno;

		if (!atomic_load_acquire(&lc->running))
			goto exited; /* gone meanwhile */
		return -err;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/*
	 * Still running once read: the thread had not reached its exit, so
	 * its tid was not another thread's yet. Else the exit's counts (the
	 * tid may be reused once the thread is gone).
	 */
	if (!atomic_load_acquire(&lc->running))
		goto exited;
	/* after the name, which may hold spaces: state ppid pgrp session tty tpgid flags minflt cminflt majflt */
	p = strrchr(buf, ')');
	if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %lu %*u %lu", &mn, &mj) != 2)
		return -EIO;
	*minor = mn;
	*major = mj;
	return 0;
exited:
	*minor = atomic_load_relaxed(&lc->st.minflt_exit);
	*major = atomic_load_relaxed(&lc->st.majflt_exit);
	return 0;
}

static void
noop_cmd(struct dp_lcore *lc, void *cmd, void *arg)
{
	(void)lc;
	(void)cmd;
	(void)arg;
}

int
dp_lcore_start(struct dp_lcore *lc, unsigned id, const struct dp_lcore_cfg *cfg,
	       struct dp_port *port, struct dp_xsrv *xsrv)
{
	pthread_attr_t attr;
	int err;

	memset(lc, 0, sizeof(*lc));
	lc->id = id;
	lc->cfg = *cfg;
	lc->port = port;
	lc->xsrv = xsrv;
	if (!lc->cfg.spin_us)
		lc->cfg.spin_us = 50;
	if (!lc->cfg.wait_us)
		lc->cfg.wait_us = 1000;
	if (!lc->cfg.stall_us)
		lc->cfg.stall_us = 500;
	if (!lc->cfg.ring_cap)
		lc->cfg.ring_cap = 1024;
	if (!lc->cfg.on_cmd)
		lc->cfg.on_cmd = noop_cmd;
	lc->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (lc->wake_fd < 0)
		return -errno;
	err = ring_create(lc->cfg.ring_cap, &lc->cmd);
	if (err) {
		close(lc->wake_fd);
		return err;
	}
	err = ring_create(lc->cfg.ring_cap, &lc->cpl);
	if (err)
		goto err_cmd;
	pthread_attr_init(&attr);
	if (cfg->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cfg->cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	err = pthread_create(&lc->thread, &attr, lcore_main, lc);
	pthread_attr_destroy(&attr);
	if (err) {
		log_err("dp.lcore", "core %u: pthread_create failed: %s", id, strerror(err));
		err = -err;
		goto err_cpl;
	}
	return 0;

err_cpl:
	ring_free(lc->cpl);
err_cmd:
	ring_free(lc->cmd);
	close(lc->wake_fd);
	return err;
}

void
dp_lcore_stop(struct dp_lcore *lc)
{
	uint64_t one = 1;

	atomic_store_relaxed(&lc->stop, true);
	/* end an idle wait now rather than at its timeout (counter > 0: readable until joined) */
	if (write(lc->wake_fd, &one, sizeof(one)) < 0)
		log_warn("dp.lcore", "core %u: waking it to stop: %s", lc->id, strerror(errno));
	pthread_join(lc->thread, NULL);
	ring_free(lc->cmd);
	ring_free(lc->cpl);
	close(lc->wake_fd);
	lc->cmd = lc->cpl = NULL;
	lc->wake_fd = -1;
}

int
dp_lcore_post(struct dp_lcore *lc, void *cmd)
{
	uint64_t one = 1;

	if (ring_enqueue_burst(lc->cmd, &cmd, 1) != 1)
		return -EAGAIN;
	/*
	 * A full fence between our enqueue and the load of `sleeping` (x86
	 * lets a load pass an earlier store): pairs with the core's seq_cst
	 * store of `sleeping` before it checks the ring.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&lc->sleeping) && !atomic_exchange(&lc->woken, true))
		if (write(lc->wake_fd, &one, sizeof(one)) < 0)
			atomic_store(&lc->woken, false);
	return 0;
}

int
dp_lcore_complete(struct dp_lcore *lc, void *cpl)
{
	return ring_enqueue_burst(lc->cpl, &cpl, 1) == 1 ? 0 : -EAGAIN;
}

unsigned
dp_lcore_reap(struct dp_lcore *lc, void **out, unsigned n)
{
	return ring_dequeue_burst(lc->cpl, out, n);
}
