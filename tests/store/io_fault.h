/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io_fault.h - a fault-injecting store_io_ops table for tests (a mock used
 * only for fault injection, never by the product).
 *
 * Wraps the POSIX table and can:
 *  - fail the Nth-and-later call of an operation with an errno until cleared;
 *  - make pwrite short;
 *  - simulate power loss: every successful fdatasync snapshots the file's
 *    content; io_fault_power_loss() puts every tracked file back to its
 *    last snapshot (files never synced become empty), optionally garbling
 *    a few bytes past it to model a torn sector.
 * Call io_fault_power_loss() only with the store closed (no mappings left).
 */
#ifndef SP_TESTS_IO_FAULT_H
#define SP_TESTS_IO_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "store/io.h"

enum io_fault_op {
	IOF_OPEN,
	IOF_ALLOCATE,
	IOF_PWRITE,
	IOF_FDATASYNC,
	IOF_MAP,
	IOF_RENAME,
	IOF_COUNT,
};

struct io_fault;

struct io_fault *io_fault_new(void);
void io_fault_free(struct io_fault *f);
const struct store_io_ops *io_fault_ops(struct io_fault *f);

/* Fail every call of @op from now on with -@err (0 clears). */
void io_fault_fail(struct io_fault *f, enum io_fault_op op, int err);
/* Fail only after @skip more successful calls of @op. */
void io_fault_fail_after(struct io_fault *f, enum io_fault_op op, unsigned skip, int err);
/* pwrite writes at most @max bytes per call (0: no limit). */
void io_fault_short_writes(struct io_fault *f, size_t max);
uint64_t io_fault_calls(const struct io_fault *f, enum io_fault_op op);

/* Restore every file to its last fdatasync'd content. Return: files changed. */
int io_fault_power_loss(struct io_fault *f, bool garble_tail);

/*
 * Snapshots that outlive the process: with a shadow root set, each
 * successful fdatasync of a file under @root also copies the file to the
 * same relative path under @shadow (renames and unlinks follow). After the
 * writer was killed, io_fault_shadow_restore() models the power loss: every
 * file under @root gets its shadow's content (the rest of its size zeroed),
 * and a file never synced becomes empty. Return: files restored or -errno.
 */
void io_fault_set_shadow(struct io_fault *f, const char *root, const char *shadow);
int io_fault_shadow_restore(const char *root, const char *shadow);

#endif /* SP_TESTS_IO_FAULT_H */
