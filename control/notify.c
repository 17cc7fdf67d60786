// SPDX-License-Identifier: Apache-2.0
/*
 * notify.c - ctl_notify() over libsystemd's sd_notify() (notify.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "control/notify.h"
#include "sp_config.h"

#if SP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

void
ctl_notify(const char *tag, const char *state)
{
#if SP_HAVE_SYSTEMD
	int rc = sd_notify(0, state);

	if (rc < 0)
		log_warn(tag, "sd_notify(%s): %s", state, strerror(-rc));
#else
	static bool said;

	if (getenv("NOTIFY_SOCKET") != NULL && !said) {
		said = true;
		log_warn(tag, "built without libsystemd: cannot tell systemd %s (use Type=simple)",
			 state);
	}
#endif
}
