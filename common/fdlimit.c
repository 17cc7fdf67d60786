// SPDX-License-Identifier: Apache-2.0
/*
 * fdlimit.c - raise RLIMIT_NOFILE, count open descriptors, size a
 * connection cap that leaves a reserve (common/include/common/fdlimit.h).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/resource.h>

#include "common/compiler.h"
#include "common/err.h"
#include "common/fdlimit.h"
#include "common/log.h"

/* The kernel's ceiling for any RLIMIT_NOFILE (setrlimit above it fails). */
static uint64_t
nr_open(void)
{
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	unsigned long long v = 0;

	if (f != NULL) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v ? (uint64_t)v : 1048576;
}

uint32_t
fdlim_open_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	uint32_t n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n > 0 ? n - 1 : 0; /* not the directory's own descriptor */
}

void
fdlim_raise(struct fdlim *b)
{
	struct rlimit rl;

	b->err = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		b->err = -errno;
		b->soft_was = b->soft = b->hard = 1024;
		b->open = fdlim_open_count();
		return;
	}
	b->soft_was = rl.rlim_cur;
	b->hard = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > b->hard)
		rl.rlim_cur = b->hard;
	if (rl.rlim_cur < b->hard) {
		rl.rlim_cur = b->hard;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			b->err = -errno;
			(void)getrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	b->soft = rl.rlim_cur == RLIM_INFINITY ? b->hard : rl.rlim_cur;
	b->open = fdlim_open_count();
}

uint32_t
fdlim_conns(const struct fdlim *b, uint32_t want, uint32_t reserve)
{
	uint64_t used = (uint64_t)b->open + reserve;
	uint64_t left = b->soft > used ? b->soft - used : 0;

	return (uint32_t)SP_MAX((uint64_t)1, SP_MIN((uint64_t)want, left));
}

uint32_t
fdlim_plan(const char *tag, const char *key, uint32_t want, uint32_t reserve, uint32_t *ceiling)
{
	struct fdlim b;
	uint32_t conns;
	uint32_t asked = reserve;

	fdlim_raise(&b);
	/* a small limit: the reserve takes at most half of it, connections get the rest */
	if ((uint64_t)reserve > b.soft / 2)
		reserve = (uint32_t)(b.soft / 2);
	conns = fdlim_conns(&b, want, reserve);
	*ceiling = b.soft > reserve ? (uint32_t)SP_MIN(b.soft - reserve, (uint64_t)UINT32_MAX) : 1;
	if (b.err != 0)
		log_warn(tag,
			 "cannot raise the descriptor limit from %" PRIu64 " to %" PRIu64 ": %s",
			 b.soft_was, b.hard, err_str(b.err));
	if (reserve < asked)
		log_warn(tag,
			 "file descriptors: limit %" PRIu64 " is small: fdReserve %u lowered to %u "
			 "(half the limit) for the daemon's own files",
			 b.soft, asked, reserve);
	if (b.soft <= (uint64_t)b.open + reserve || b.soft - b.open - reserve < FDLIM_MIN_CONNS) {
		log_err(tag,
			"file descriptors: limit %" PRIu64 " (hard %" PRIu64 "), %u open, %u kept "
			"(fdReserve) leave fewer than %u connections for clients (%s): raise the "
			"limit (ulimit -n, systemd LimitNOFILE) or lower fdReserve",
			b.soft, b.hard, b.open, reserve, FDLIM_MIN_CONNS, key);
		return 0;
	}
	if (conns < want)
		log_warn(tag,
			 "file descriptors: limit %" PRIu64 " (was %" PRIu64 ", hard %" PRIu64
			 "), %u open, %u kept (fdReserve): %s %u lowered to %u",
			 b.soft, b.soft_was, b.hard, b.open, reserve, key, want, conns);
	else
		log_info(tag,
			 "file descriptors: limit %" PRIu64 " (was %" PRIu64 ", hard %" PRIu64
			 "), %u open, %u kept (fdReserve); %s %u",
			 b.soft, b.soft_was, b.hard, b.open, reserve, key, conns);
	return conns;
}
