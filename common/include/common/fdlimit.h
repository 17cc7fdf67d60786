/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdlimit.h - a daemon's file-descriptor budget.
 *
 * At start a daemon raises its soft RLIMIT_NOFILE to the hard limit (the
 * common soft default of 1024 is a shell's, not an operator's choice), then
 * sizes its connection cap from what is left after a reserve for its own
 * files (store segments, index files, write-behind buffers) and sockets, so
 * no flood of idle connections can leave the store without a descriptor.
 */
#ifndef SP_COMMON_FDLIMIT_H
#define SP_COMMON_FDLIMIT_H

#include <stdint.h>

struct fdlim {
	uint64_t soft_was; /* the soft limit found at start */
	uint64_t soft;	   /* the soft limit now */
	uint64_t hard;	   /* the hard limit (RLIM_INFINITY read as nr_open) */
	uint32_t open;	   /* descriptors open when fdlim_raise() ran */
	int err;	   /* 0, or why the soft limit could not be raised (-errno) */
};

/*
 * fdlim_raise() - raise the soft limit to the hard one (at most
 * /proc/sys/fs/nr_open) and fill @b. Context: start-up, before threads.
 */
void fdlim_raise(struct fdlim *b);

/* Descriptors this process has open now (entries of /proc/self/fd). */
uint32_t fdlim_open_count(void);

/*
 * fdlim_conns() - how many connections a server may hold: @want, or
 * less when the soft limit minus what is open minus @reserve is smaller
 * (never below 1).
 */
uint32_t fdlim_conns(const struct fdlim *b, uint32_t want, uint32_t reserve);

/* Fewer connections left for clients than this: the daemon refuses to start. */
#define FDLIM_MIN_CONNS 16u

/*
 * fdlim_plan() - a server's whole budget at start: fdlim_raise(), the cap
 * on connections (fdlim_conns() of @want), and in *@ceiling the lowest
 * descriptor a connection may not have (soft limit - @reserve). A @reserve
 * above half the soft limit is lowered to that half. Says the figures in
 * the log under @tag, naming the cap's key @key (a warning when it was
 * lowered). Return: the cap, or 0 when fewer than FDLIM_MIN_CONNS are left
 * (an error naming the keys is logged: the caller refuses to start).
 * Context: start-up, before threads.
 */
uint32_t fdlim_plan(const char *tag, const char *key, uint32_t want, uint32_t reserve,
		    uint32_t *ceiling);

#endif /* SP_COMMON_FDLIMIT_H */
