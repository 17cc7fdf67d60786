/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tw.h - a hierarchical timing wheel whose pending entries live on disk
 * (docs/messages.md, "Delivery times"). An entry is a record of the log
 * (physical offset and size) and the millisecond it is due.
 *
 * Three levels, by how far an entry is from the wheel's cursor:
 *  - level 0, in memory: one list per millisecond for the current and the
 *    next 1,024 ms block;
 *  - level 1, files: one per block for the rest of the current and the next
 *    2^20 ms superblock (17.5 min);
 *  - level 2, files: one per superblock up to 255 superblocks ahead (74 h);
 *    farther entries wait in the last one and are filed again.
 * When the cursor enters a block, the next block's file is read into level
 * 0; when it enters a superblock, the next superblock's file is spread over
 * level 1. So memory holds about two seconds of due entries plus a small
 * write buffer per file, whatever the number pending; each entry is written
 * at most twice.
 *
 * The files are scratch: tw_open() empties the directory. The source of
 * truth is the log the entries point into; its owner rebuilds the wheel at
 * start (broker/ctl/bk_timer_ctl.c).
 *
 * Context: one thread owns a wheel; blocking (file I/O).
 */
#ifndef SP_STORE_TW_H
#define SP_STORE_TW_H

#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

struct tw_ent {
	int64_t phys;	/* where the entry's record is */
	int64_t due_ms; /* when it is due (epoch ms) */
	uint32_t size;	/* the record's size */
	uint32_t rsv;	/* zero */
};

struct tw;

/* Open the wheel in @dir (created; files in it removed) with its cursor at @now_ms. Return: 0, -errno. */
MUST_CHECK int tw_open(const char *dir, int64_t now_ms, struct tw **out);
/* Remove the wheel's files and free it. */
void tw_close(struct tw *w);

/*
 * tw_add() - file @e; an entry due before the cursor is due at the cursor.
 * Return: 0, -errno (a level file cannot be written: nothing was added).
 */
MUST_CHECK int tw_add(struct tw *w, const struct tw_ent *e);

/*
 * tw_expire() - move the cursor up to @now_ms (inclusive) and return what
 * is due, in due order (entries of one millisecond in any order), at most
 * @max into @out. The cursor stops where @out is full. A level file that
 * cannot be read loses its entries: counted in tw_lost(), logged.
 * Return: entries returned.
 */
size_t tw_expire(struct tw *w, int64_t now_ms, struct tw_ent *out, size_t max);

/* Every entry due before this millisecond has been returned by tw_expire(). */
int64_t tw_cursor(const struct tw *w);
/* Entries added and not yet returned. */
uint64_t tw_pending(const struct tw *w);
/* Entries lost to unreadable level files since tw_open(). */
uint64_t tw_lost(const struct tw *w);

#endif /* SP_STORE_TW_H */
