/* SPDX-License-Identifier: Apache-2.0 */
/*
 * idx.h - IndexFile: hash index from message keys to commit-log offsets.
 *
 * RocketMQ's layout (§6.4): a 40-byte header (begin/end timestamp, begin/end
 * physical offset, hash slot count, index count), slot_count int32 slots,
 * then max_entries 20-byte entries (int32 key hash, int64 phys offset,
 * int32 seconds since the file's begin timestamp, int32 previous entry in
 * the bucket). Entry 0 is never used. A file is full at max_entries; the next
 * one starts where it ended. Files live in one directory, named by the
 * creation time (yyyyMMddHHmmssSSS) so that name order is age order.
 *
 * Keys are "topic#KEY" for each space-separated KEYS value and
 * "topic#UNIQ_KEY". The background indexer of a shard is the only writer;
 * queries may run on any thread concurrently (entries are published with a
 * release store of the index count). Results may contain hash collisions:
 * callers re-check each message's keys.
 *
 * Nothing here runs on a dataplane core.
 */
#ifndef SP_STORE_IDX_H
#define SP_STORE_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "store/io.h"

#define IDX_SLOTS_DEFAULT 5000000
#define IDX_ENTRIES_DEFAULT 20000000
#define IDX_HEADER_SIZE 40
#define IDX_SLOT_SIZE 4
#define IDX_ENTRY_SIZE 20

struct idx;

/**
 * idx_open() - open every index file in @dir (created if missing).
 * @slots: hash slots per file; @max_entries: entries per file including the
 * unused entry 0, so a file holds @max_entries - 1 keys (RocketMQ indexNum).
 *
 * A file with the wrong size or an impossible header is skipped with an
 * error log naming it (-EBADMSG for that file), left on disk, and never
 * trimmed; the index is derived data and the indexer re-indexes from
 * idx_last_phys(). No file is created until the first idx_put(). Leftover
 * "<name>.tmp" files (a creation cut by a crash) are deleted.
 *
 * Context: startup, blocking. Return: 0, -EINVAL bad sizes, -ENOMEM, -errno
 * of an I/O error.
 */
MUST_CHECK int idx_open(const struct store_io_ops *io, const char *dir, uint32_t slots,
			uint32_t max_entries, struct idx **out);

/*
 * idx_close() - unmap and close everything; does not flush (call idx_flush()).
 * Context: no put, query or trim may be running or start.
 */
void idx_close(struct idx *x);

/**
 * idx_put() - index @key for the message at @phys stored at @store_ms.
 * Creates the next file when the current one is full (begin values = its
 * end values); a new file is durable (fdatasync'ed, renamed from
 * "<name>.tmp", directory synced) before it is used. Times are kept in
 * whole seconds from the file's begin.
 *
 * Context: the shard's indexer thread (single writer), may block (file
 * creation: fdatasync, rename, directory fsync).
 * Return: 0, -EINVAL (negative @phys or @store_ms), -ENOMEM, -errno.
 */
MUST_CHECK int idx_put(struct idx *x, const char *key, size_t key_len, int64_t phys,
		       int64_t store_ms);

/**
 * idx_query() - offsets of messages indexed under @key with store time in
 * [@begin_ms, @end_ms], newest first, at most @max of them. An entry's time
 * is its file's begin plus whole seconds, so a store time is rounded down
 * to that grid (as in RocketMQ). Keys with the same hash all match.
 *
 * Context: any thread, concurrently with idx_put() and idx_trim_phys();
 * takes the file-list mutex twice, briefly.
 * Return: the number found (>= 0), -EINVAL, -ENOMEM.
 */
long idx_query(struct idx *x, const char *key, size_t key_len, int64_t begin_ms, int64_t end_ms,
	       int64_t *phys, size_t max);

/*
 * Return: the highest phys offset indexed so far (endPhyOffset of the newest
 * file), -1 when nothing was indexed; resumes the indexer. Any thread.
 */
int64_t idx_last_phys(const struct idx *x);

/*
 * idx_trim_phys() - delete whole files whose endPhyOffset is below @min_phys
 * (retention), never the newest file. Queries running keep their mapping.
 * Context: any thread, blocking (unlink, directory fsync).
 * Return: 0 or the first -errno (the other files are still tried).
 */
MUST_CHECK int idx_trim_phys(struct idx *x, int64_t min_phys);

/*
 * idx_flush() - fdatasync the files written since the last call (file
 * creation already synced the directory).
 * Context: the indexer thread, blocking. Return: 0 or -errno (retry later).
 */
MUST_CHECK int idx_flush(struct idx *x);

#endif /* SP_STORE_IDX_H */
