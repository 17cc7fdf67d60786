// SPDX-License-Identifier: Apache-2.0
/*
 * port.c - dp_ports_open(): picks the backend named in the configuration.
 *
 * Backends are compiled in when their dependencies are: udp always,
 * af_packet on Linux, dpdk when meson found libdpdk (SP_DP_HAVE_DPDK). A
 * backend that is not built answers -ENOTSUP with a log line that says so,
 * never a silent fallback to another backend: a benchmark that asked for
 * dpdk must not quietly measure the kernel.
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "port_priv.h"

static const char *const backend_names[] = {
	[DP_BACKEND_UDP] = "udp",
	[DP_BACKEND_AF_PACKET] = "af_packet",
	[DP_BACKEND_DPDK] = "dpdk",
};

const char *
dp_backend_name(enum dp_backend b)
{
	if ((unsigned)b < sizeof(backend_names) / sizeof(backend_names[0]))
		return backend_names[b];
	return "?";
}

int
dp_backend_parse(const char *s, enum dp_backend *out)
{
	for (unsigned i = 0; i < sizeof(backend_names) / sizeof(backend_names[0]); i++) {
		if (strcmp(s, backend_names[i]) == 0) {
			*out = (enum dp_backend)i;
			return 0;
		}
	}
	return -EINVAL;
}

int
dp_ports_open(const struct dp_port_cfg *cfg, struct dp_port **out)
{
	if (cfg->n == 0 || cfg->n > DP_PORTS_MAX) {
		log_err("dp.port", "number of ports %u out of range 1..%u", cfg->n, DP_PORTS_MAX);
		return -EINVAL;
	}
	if (cfg->base_port && (unsigned)cfg->base_port + cfg->n - 1 > 65535) {
		log_err("dp.port", "ports %u..%u do not fit in 16 bits", cfg->base_port,
			cfg->base_port + cfg->n - 1);
		return -EINVAL;
	}
	switch (cfg->backend) {
	case DP_BACKEND_UDP:
		return dp__udp_open(cfg, out);
	case DP_BACKEND_AF_PACKET:
		return dp__afp_open(cfg, out);
	case DP_BACKEND_DPDK:
#ifdef SP_DP_HAVE_DPDK
		return dp__dpdk_open(cfg, out);
#else
		log_err("dp.port", "dataplaneBackend=dpdk but this build has no DPDK "
				   "(install libdpdk-dev and reconfigure with -Ddpdk=enabled)");
		return -ENOTSUP;
#endif
	}
	log_err("dp.port", "unknown backend %d", (int)cfg->backend);
	return -EINVAL;
}

void
dp_ports_close(struct dp_port **ports, unsigned n)
{
	/* Reverse order: the last close of a shared backend frees its state. */
	for (unsigned i = n; i-- > 0;) {
		if (ports[i])
			ports[i]->ops->close(ports[i]);
		ports[i] = NULL;
	}
}
