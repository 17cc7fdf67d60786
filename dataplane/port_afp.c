// SPDX-License-Identifier: Apache-2.0
/*
 * port_afp.c - placeholder until the AF_PACKET backend lands (issue 4).
 */
#include <errno.h>

#include "common/log.h"
#include "port_priv.h"

int
dp__afp_open(const struct dp_port_cfg *cfg, struct dp_port **out)
{
	(void)cfg;
	(void)out;
	log_err("dp.afp", "the af_packet backend is not built yet");
	return -ENOTSUP;
}
