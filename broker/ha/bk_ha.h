/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_ha.h - automatic failover of a broker group through etcd (bk_ha.c,
 * docs/failover.md).
 *
 * Ownership: bk_ha_setup(), bk_ha_start() and bk_ha_stop() on the control
 * thread; between start and stop the HA thread owns struct bk_ha and writes
 * bk->epoch and bk->write_until_ns (cores read them) and bk->fenced.
 */
#ifndef SP_BROKER_BK_HA_H
#define SP_BROKER_BK_HA_H

#include <stdbool.h>
#include <stdint.h>

struct bk_ctl;
struct bk_ha;

/*
 * bk_ha_setup() - with controllerAddr set, decide this process's role from
 * the group's record in etcd: master (the record names this member and the
 * previous image handed over its lease: the promotion restarts in place),
 * or slave (following the record's master, or none yet). Sets role,
 * broker_id, epoch and the lease's write window.
 * Context: control thread, after the config, before anything depends on the
 * role. Return: 0 static roles (no controllerAddr), 1 decided, -errno (logged).
 */
int bk_ha_setup(struct bk_ctl *x);

/* The master a slave follows ("ip:port" dataplane endpoint; "" none known yet). */
const char *bk_ha_master(const struct bk_ctl *x);

/* Start the HA thread (0, -errno). Context: control, once the broker serves. */
int bk_ha_start(struct bk_ctl *x);

/*
 * Why the HA thread asked for a restart (NULL: it did not). Context: control.
 */
const char *bk_ha_restart_why(const struct bk_ctl *x);

/*
 * bk_ha_stop() - stop the HA thread. A master that is restarting into the
 * next image of itself (a promotion) renews its lease once more and hands
 * it over in the environment; one that stops for good gives its lease up,
 * so a slave takes over at once. Context: control thread, at stop (the
 * store still open). NULL-safe.
 */
void bk_ha_stop(struct bk_ctl *x);

/*
 * bk_ha_exec_handoff() - a promotion's restart: renew the new master's lease
 * one last time and hand it to the next image in the environment. Context:
 * the main thread, right before execv(), every other thread stopped.
 */
void bk_ha_exec_handoff(void);

/*
 * bk_ha_handoff_drop() - a promotion's restart that does not exec (the exec
 * failed, or the stop was not clean): revoke the kept lease, so the group
 * elects again at once. A no-op without one. Context: the main thread, last.
 */
void bk_ha_handoff_drop(void);

/* /metrics lines (bk_metrics.c): role, epoch, lease. */
struct jbuf;
void bk_ha_metrics(const struct bk_ctl *x, struct jbuf *b);

#endif /* SP_BROKER_BK_HA_H */
