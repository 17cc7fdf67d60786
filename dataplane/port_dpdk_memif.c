// SPDX-License-Identifier: Apache-2.0
/*
 * port_dpdk_memif.c - what the DPDK backend does for net_memif in DPDK
 * 22.11: the handshake that keeps the PMD from crashing us when its peer
 * dies, and every stop and start of a memif device on the EAL interrupt
 * thread (port_dpdk.c is the rest of the backend).
 *
 * DESIGN
 *
 * The memif crash. In DPDK 22.11 memif_disconnect() runs on the EAL
 * interrupt thread as soon as the control socket reports the peer gone. It
 * stores link_status = DOWN, clears ETH_MEMIF_FLAG_CONNECTED, takes the PMD's
 * cc_lock to drop the control channel, releases it, closes the queue
 * eventfds and then memif_free_regions() munmap()s the shared regions and
 * rte_free()s their descriptors. It raises no LSC event (the PMD has no LSC
 * support) and does not wait for the datapath, so an rte_eth_rx_burst() or
 * tx_burst() that read CONNECTED a moment earlier copies from or to unmapped
 * memory: SIGSEGV in the surviving process. Nothing in the public API orders
 * the two threads, but cc_lock does: it is taken by the interrupt thread after
 * link_status is set DOWN and before the munmap, and nowhere on any other
 * path that frees the regions. So every burst on a memif port runs with
 * cc_lock held (trylock on RX, so another port's burst or a disconnect in
 * progress just skips one poll; lock on TX) and re-reads link_status inside
 * it. Either the burst holds the lock first, and the interrupt thread waits
 * for it before unmapping, or the interrupt thread took the lock first, and
 * the burst sees DOWN (stored before that lock, published by its release)
 * and does not touch the rings. cc_lock lives in the PMD's private struct
 * pmd_internals, reached through rte_eth_devices[] (dlsym: the symbol is
 * exported, the struct is in a header Debian does not ship); the layouts are
 * mirrored below for 22.11 and checked at open against values we know (queue
 * pointers from the public rte_eth_fp_ops[], device name, memif id, role,
 * socket name, ring counts, buffer size). If any check fails the handshake is
 * off, a warning says peer death may crash the process, and only the
 * per-burst link check (which narrows the window) remains. The environment
 * variable SPROCKET_DPDK_MEMIF_GUARD=0 turns the handshake off on purpose so
 * the crash test can measure the unprotected crash rate.
 *
 * Cost of the handshake: one uncontended lock and unlock and one link read
 * per burst (20-60 ns per memif round trip). Its limit: on memif, the bursts
 * of all ports of one device are serialised by that one lock. Measured with
 * tests/dpdk/crash_dpdk_memif.c on the 2-vCPU dev VM: 0 survivor crashes in
 * 520 client and 90 server kills with it, 14 in 140 and 3 in 40 without
 * (docs/dpdk.md).
 *
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_kvargs.h>
#include <rte_version.h>

#include "common/clock.h"
#include "common/log.h"
#include "port_dpdk_priv.h"

#define DPDK_REARM_STUCK_NS 2000000000ull /* a memif connect handshake that hangs */
#define DPDK_STOP_WAIT_MS 5000u		  /* a memif stop queued on the EAL thread */

/*
 * memif control runs on the EAL interrupt thread. memif_disconnect() is not
 * reentrant: past cc_lock it closes the queue eventfds and frees the shared
 * regions, and the interrupt thread calls it on its own when the peer goes
 * away. A stop from any other thread (a re-arm, a close) that lands while it
 * runs frees the regions twice (seen: "EAL: Error: Invalid memory", then
 * SIGSEGV on either thread, on a client whose broker was killed and on an
 * echo peer closed just after its server left). An EAL alarm runs its
 * callback on that thread, between two message handlers, so every stop and
 * start of a memif device is handed to it as an alarm.
 */
static void
memif_start_cb(void *arg)
{
	struct dpdk_dev *d = arg;

	(void)rte_eth_dev_start(d->port_id);
	atomic_store_explicit(&d->rearm_busy, false, memory_order_release);
}

static void
memif_restart_cb(void *arg)
{
	struct dpdk_dev *d = arg;
	struct rte_eth_link link;

	/* The handshake may have finished since the owner looked. */
	if (rte_eth_link_get_nowait(d->port_id, &link) == 0 &&
	    link.link_status == RTE_ETH_LINK_UP) {
		atomic_store_explicit(&d->rearm_busy, false, memory_order_release);
		return;
	}
	(void)rte_eth_dev_stop(d->port_id);
	/*
	 * Start from a later alarm: an event of the closed control socket that
	 * the interrupt thread fetched with this alarm's is then dropped (its
	 * fd is unregistered) instead of reaching a new socket on the same fd.
	 */
	if (rte_eal_alarm_set(1000, memif_start_cb, d) != 0)
		memif_start_cb(d);
}

static void
memif_stop_cb(void *arg)
{
	struct dpdk_dev *d = arg;

	(void)rte_eth_dev_stop(d->port_id);
	atomic_store_explicit(&d->stopped, true, memory_order_release);
}

/*
 * Stops a memif device on the interrupt thread and waits for it, after any
 * re-arm still queued there. Context: the control thread, at close; sleeps.
 */
void
dp__memif_stop(struct dpdk_dev *d)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};

	/* Cancel waits for a running callback; the restart may queue a start. */
	(void)rte_eal_alarm_cancel(memif_restart_cb, d);
	(void)rte_eal_alarm_cancel(memif_start_cb, d);
	atomic_store_explicit(&d->rearm_busy, false, memory_order_relaxed);
	atomic_store_explicit(&d->stopped, false, memory_order_relaxed);
	if (rte_eal_alarm_set(1, memif_stop_cb, d) != 0) {
		memif_stop_cb(d);
		return;
	}
	for (unsigned ms = 0; ms < DPDK_STOP_WAIT_MS; ms++) {
		if (atomic_load_explicit(&d->stopped, memory_order_acquire))
			return;
		nanosleep(&ts, NULL);
	}
	/* The interrupt thread is stuck: if the stop has not begun, do it here. */
	if (rte_eal_alarm_cancel(memif_stop_cb, d) > 0)
		memif_stop_cb(d);
}

/*
 * memif client: reconnect a lost link (stop + start, on the interrupt
 * thread). Only once the PMD has dropped its control channel (pmd->cc NULL,
 * written under cc_lock): while one exists the interrupt thread may be in the
 * middle of the connect handshake. Context: port 0's owner, from wait(); may
 * sleep.
 */
void
dp__memif_rearm(struct dpdk_port *p)
{
	struct dpdk_dev *d = p->dev;
	uint64_t now = clk_mono_ns();
	bool idle;

	if (now < p->next_rearm_ns || d->memif_pmd == NULL ||
	    atomic_load_explicit(&d->rearm_busy, memory_order_acquire))
		return;
	p->next_rearm_ns = now + DPDK_REARM_NS;
	dev_enter(d);
	idle = d->memif_pmd->cc == NULL;
	dev_exit(d);
	if (idle)
		p->rearm_stuck_ns = 0;
	else if (p->rearm_stuck_ns == 0)
		p->rearm_stuck_ns = now;
	/*
	 * A handshake that has not finished in DPDK_REARM_STUCK_NS never will:
	 * 22.11's memif server, reached between its EAL probe (listener up) and
	 * its dev_start (device disabled), rejects the connection but fails to
	 * send the rejection and keeps the socket open. Nothing flows on that
	 * channel any more.
	 */
	if (!idle && now - p->rearm_stuck_ns < DPDK_REARM_STUCK_NS)
		return;
	p->rearm_stuck_ns = 0;
	atomic_store_explicit(&d->rearm_busy, true, memory_order_relaxed);
	/* ALLOW-BLOCKING: calloc in the EAL; runs only from wait(). */
	if (rte_eal_alarm_set(1, memif_restart_cb, d) != 0)
		atomic_store_explicit(&d->rearm_busy, false, memory_order_relaxed);
}

static int
kv_id(const char *key, const char *value, void *opaque)
{
	(void)key;
	((struct memif_args *)opaque)->id = (uint32_t)strtoul(value, NULL, 0);
	return 0;
}

static int
kv_role(const char *key, const char *value, void *opaque)
{
	(void)key;
	((struct memif_args *)opaque)->role =
		strcmp(value, "server") == 0 ? MEMIF_ROLE_SERVER : MEMIF_ROLE_CLIENT;
	return 0;
}

static int
kv_socket(const char *key, const char *value, void *opaque)
{
	struct memif_args *a = opaque;

	(void)key;
	snprintf(a->socket, sizeof(a->socket), "%s", value);
	return 0;
}

/*
 * Finds memif's cc_lock for the handshake (see DESIGN) after the port started.
 * Return: the lock, or NULL (with a warning) when any check fails.
 */
rte_spinlock_t *
dp__memif_find_cc_lock(struct dpdk_dev *d, const struct rte_eth_dev_info *info,
		       struct memif_args *ma)
{
	const char *off = getenv("SPROCKET_DPDK_MEMIF_GUARD");
	const struct rte_devargs *da = rte_dev_devargs(info->device);
	struct mirror_eth_dev *devs;
	struct mirror_eth_dev *ed;
	struct mirror_memif_pmd *pmd;
	char name[RTE_ETH_NAME_MAX_LEN];
	const char *why;

	ma->id = 0;
	ma->role = MEMIF_ROLE_CLIENT; /* the PMD's default */
	snprintf(ma->socket, sizeof(ma->socket), "%s", "/run/memif.sock");
	if (da && da->args && da->args[0]) {
		struct rte_kvargs *kv = rte_kvargs_parse(da->args, NULL);

		if (kv) {
			(void)rte_kvargs_process(kv, "id", kv_id, ma);
			(void)rte_kvargs_process(kv, "role", kv_role, ma);
			(void)rte_kvargs_process(kv, "socket", kv_socket, ma);
			rte_kvargs_free(kv);
		}
	}
	d->memif_client = ma->role == MEMIF_ROLE_CLIENT;

	why = "DPDK is not 22.11";
	if (strncmp(rte_version(), "DPDK 22.11", 10) != 0 || RTE_VER_YEAR != 22 ||
	    RTE_VER_MONTH != 11)
		goto unknown;
	why = "rte_eth_devices not found";
	devs = dlsym(RTLD_DEFAULT, "rte_eth_devices");
	if (!devs)
		goto unknown;
	ed = &devs[d->port_id];
	why = "struct rte_eth_dev layout differs";
	if (rte_eth_dev_get_name_by_port(d->port_id, name) != 0 || ed->data == NULL ||
	    ed->device != info->device || strcmp(ed->data->name, name) != 0 ||
	    ed->rx_pkt_burst != rte_eth_fp_ops[d->port_id].rx_pkt_burst ||
	    ed->tx_pkt_burst != rte_eth_fp_ops[d->port_id].tx_pkt_burst ||
	    ed->data->nb_rx_queues != d->nq || ed->data->nb_tx_queues != d->nq ||
	    ed->data->rx_queues[0] != rte_eth_fp_ops[d->port_id].rxq.data[0] ||
	    ed->data->dev_private == NULL)
		goto unknown;
	pmd = ed->data->dev_private;
	why = "memif pmd_internals layout differs";
	if (pmd->id != ma->id || pmd->role != ma->role || pmd->socket_filename == NULL ||
	    strcmp(pmd->socket_filename, ma->socket) != 0 || pmd->cfg.num_c2s_rings != d->nq ||
	    pmd->cfg.num_s2c_rings != d->nq || pmd->cfg.pkt_buffer_size < 128 ||
	    (pmd->cc_lock.locked != 0 && pmd->cc_lock.locked != 1))
		goto unknown;
	d->memif_pmd = pmd;
	if (off && strcmp(off, "0") == 0) {
		log_warn("dp.dpdk",
			 "memif peer-death handshake disabled by "
			 "SPROCKET_DPDK_MEMIF_GUARD=0: a dying peer may crash this process");
		return NULL;
	}
	return &pmd->cc_lock;

unknown:
	log_warn("dp.dpdk",
		 "memif peer-death handshake off (%s, %s): a dying peer may crash this process",
		 why, rte_version());
	return NULL;
}
