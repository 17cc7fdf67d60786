/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cidr.h - a short list of IPv4 addresses and networks ("127.0.0.1,
 * 10.0.0.0/8"), for keys such as adminAllowedAddrs: who may send a daemon
 * its admin requests.
 *
 * Ownership: parsed once by the thread that owns the configuration, then
 * read-only (any thread).
 */
#ifndef SP_COMMON_CIDR_H
#define SP_COMMON_CIDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

#define CIDR_MAX 32

struct cidr_list {
	uint32_t n;
	bool any;		 /* "*": every address */
	uint32_t net[CIDR_MAX];	 /* host byte order, masked */
	uint32_t mask[CIDR_MAX]; /* host byte order */
};

/**
 * cidr_list_parse() - @s is a comma-separated list of IPv4 addresses,
 * ADDR/BITS networks, or "*"; blanks around items are allowed; "" is the
 * empty list (nobody).
 * @why: on error, a sentence naming the bad item (@why_len bytes).
 * Return: 0, -EINVAL (bad item, more than CIDR_MAX items).
 */
MUST_CHECK int cidr_list_parse(const char *s, struct cidr_list *out, char *why, size_t why_len);

/* Return: @ip (network byte order) is in @l. */
bool cidr_list_has(const struct cidr_list *l, uint32_t ip);

#endif /* SP_COMMON_CIDR_H */
