// SPDX-License-Identifier: Apache-2.0
/*
 * version.c - sp_version(): the release libsprocket was built from
 * (meson.build's project version, through sp_config.h).
 */
#include "client_priv.h"
#include "sp_config.h"

const char *
sp_version(void)
{
	return SP_VERSION;
}
