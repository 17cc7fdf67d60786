/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_priv.h - what the store's facade files lend its other files.
 */
#ifndef SP_STORE_STORE_PRIV_H
#define SP_STORE_STORE_PRIV_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/store.h"

/*
 * Put the ConsumeQueue unit of every record in @data (the @len bytes at
 * local @off of @shard, checked by clog_append_raw()) into its queue,
 * creating queues and files as needed, as recovery does. Units already
 * there are kept (records carry their queue offset).
 * Context: the shard's writer (may block: takes the registry lock, may
 * create files). Return: 0 or the first error (the other records are
 * still dispatched; a queue with missing units is logged).
 */
int store__dispatch_span(struct store *s, uint32_t shard, uint64_t off, const uint8_t *data,
			 size_t len);

/*
 * store__lock() - take @root/lock with flock(LOCK_EX|LOCK_NB) and record this
 * process's pid in it (store/owner.c). Held until the descriptor is closed.
 * Context: store_open(), before anything else of the store is read or
 * written. Return: the descriptor, -EBUSY when another process holds it
 * (logged with its pid and what to do), -errno.
 */
int store__lock(const char *root);

/* qsort() order of uint64_t values, ascending. */
static inline int
store__u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Append @x to the malloc'd array *@v of *@len values (room for *@cap),
 * growing it by doubling. Return: 0, -ENOMEM (the array is unchanged).
 */
static inline int
store__u64_push(uint64_t **v, size_t *len, size_t *cap, uint64_t x)
{
	if (*len == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		uint64_t *nv = realloc(*v, ncap * sizeof(**v));

		if (nv == NULL)
			return -ENOMEM;
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*len)++] = x;
	return 0;
}

/*
 * Does @dir hold a CommitLog segment (a 20-digit name), or with @any_file
 * any entry not starting with a dot? false when @dir cannot be opened
 * (store/owner.c).
 */
bool store__dir_has_segment(const char *dir, bool any_file);

/*
 * store__lock_shared() - an offline reader's hold on @root/lock
 * (flock(LOCK_SH|LOCK_NB), the file opened read-only, never created): no
 * broker may start on the store meanwhile. Return: the descriptor, -ENOENT
 * no lock file (no broker ever ran there with one: nothing to hold),
 * -EBUSY a broker holds it (logged with its pid), -errno.
 */
int store__lock_shared(const char *root);

/*
 * store__shards_check() - is the store at @root written with @shards
 * CommitLog shards? @ckpt_shards: its checkpoint's count, 0 without a
 * usable checkpoint (then the commitlog/<shard> directories of @clog_dir
 * holding segments tell). Context: store_open(), before it writes anything.
 * Return: 0 (also for a new store), -EINVAL (logged: the key, both counts,
 * what to do).
 */
int store__shards_check(const char *root, const char *clog_dir, uint32_t ckpt_shards,
			uint32_t shards);

/*
 * store__bufdir_claim() - write @run/owner (this store's real @root path and
 * pid) locked with flock for the run's life. Context: store_open().
 * Return: the descriptor holding the lock, -errno.
 */
int store__bufdir_claim(const char *run, const char *root);

/*
 * store__bufdir_release() - drop the run's claim: @run/owner and @run go
 * when nothing else is left in it (else both stay, for the next start's
 * recovery), and the lock (@fd, may be -1) is released.
 * Context: store_close(), after the CommitLog shards let go of their buffers.
 */
void store__bufdir_release(const char *run, int fd);

/*
 * store__bufdirs_reap() - remove the sprocket-* directories in @buf_dir of
 * dead runs (their owner record not locked) whose store does not need them
 * (gone, or its bufdir names another directory); keep, saying so, those a
 * store still names; leave directories without an owner record alone.
 * @skip: a directory not to look at (this store's last run's, which it
 * recovers from). Context: store_open(), blocking.
 */
void store__bufdirs_reap(const char *buf_dir, const char *skip);

#endif /* SP_STORE_STORE_PRIV_H */
