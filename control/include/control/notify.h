/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.h - tell the service manager how a daemon is doing (systemd's
 * Type=notify: the units in conf/systemd/, docs/operations.md).
 *
 * ctl_notify() sends @state ("READY=1", "STOPPING=1", "STATUS=...") with
 * libsystemd's sd_notify() when the daemon runs under systemd (NOTIFY_SOCKET
 * set); otherwise it does nothing. A build without libsystemd logs once that
 * it cannot, if NOTIFY_SOCKET asks for it. Context: the daemon's main thread.
 */
#ifndef SP_CONTROL_NOTIFY_H
#define SP_CONTROL_NOTIFY_H

void ctl_notify(const char *tag, const char *state);

#endif /* SP_CONTROL_NOTIFY_H */
