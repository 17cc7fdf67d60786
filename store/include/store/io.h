/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h - every file operation of the store goes through this table.
 *
 * Production uses store_io_posix (thin wrappers over the syscalls). Tests
 * swap in a fault-injecting table (tests/store/io_fault.c) that returns EIO
 * or ENOSPC on chosen calls, writes short, and simulates power loss by
 * putting files back to what their last successful fdatasync made durable
 * (as SQLite's test6.c does). Functions return >= 0 or -errno, never set
 * errno for the caller to read.
 *
 * Appends go through shared mappings (mmap), so the table also owns mmap:
 * a fault table can watch every mapping it handed out.
 */
#ifndef SP_STORE_IO_H
#define SP_STORE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct store_io_ops {
	/* Return: fd >= 0 or -errno. */
	int (*open)(void *ctx, const char *path, int flags, mode_t mode);
	int (*close)(void *ctx, int fd);
	/* Reserve [0, len) on disk (posix_fallocate; what is reserved already stays): later stores never ENOSPC/SIGBUS. */
	int (*allocate)(void *ctx, int fd, uint64_t len);
	int (*truncate)(void *ctx, int fd, uint64_t len);
	/* Return: bytes written/read (may be short) or -errno. */
	ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t n, uint64_t off);
	ssize_t (*pread)(void *ctx, int fd, void *buf, size_t n, uint64_t off);
	int (*fdatasync)(void *ctx, int fd);
	/* Shared read-write mapping of [0, len). Return: 0 and *out, or -errno. */
	int (*map)(void *ctx, int fd, size_t len, void **out);
	int (*unmap)(void *ctx, void *addr, size_t len);
	int (*unlink)(void *ctx, const char *path);
	int (*rename)(void *ctx, const char *from, const char *to);
	/* fsync a directory so a create, rename or unlink in it is durable. */
	int (*sync_dir)(void *ctx, const char *dir);
	/* Return: 0 and the file size, or -errno. */
	int (*size)(void *ctx, int fd, uint64_t *out);
	void *ctx;
};

/* The production table: plain syscalls. */
extern const struct store_io_ops store_io_posix;

/*
 * Helpers over a table, used by every store object.
 */

/**
 * store_io_write_all() - pwrite until done or error (short writes continue).
 * Return: 0 or -errno (-EIO when the device writes nothing).
 */
int store_io_write_all(const struct store_io_ops *io, int fd, const void *buf, size_t n,
		       uint64_t off);
int store_io_read_all(const struct store_io_ops *io, int fd, void *buf, size_t n, uint64_t off);

/**
 * store_io_write_atomic() - replace @path with @buf: write "@path.tmp",
 * fdatasync it, rename over @path, fsync the directory.
 *
 * Context: control or background thread, blocking.
 * Return: 0 or -errno; on error @path still holds its previous content.
 */
int store_io_write_atomic(const struct store_io_ops *io, const char *path, const void *buf,
			  size_t n);

/**
 * store_io_append() - append @buf to @path (made if missing), fdatasync it,
 * and fsync the directory when the file was empty (it may be new).
 *
 * Context: control or background thread, blocking.
 * Return: 0 or -errno (a failed append may leave part of @buf at the end).
 */
int store_io_append(const struct store_io_ops *io, const char *path, const void *buf, size_t n);

/**
 * store_io_read_file() - read a whole small file (at most @max bytes) into a
 * malloc'd, NUL-terminated buffer.
 * Return: 0 with *@out and *@len, -ENOENT, -EFBIG when larger than @max, -errno.
 */
int store_io_read_file(const struct store_io_ops *io, const char *path, size_t max, char **out,
		       size_t *len);

/* mkdir -p; Return: 0 or -errno. Blocking. */
int store_mkdirs(const char *path);

/*
 * The process's memory mappings now (*@used, lines of /proc/self/maps) and
 * the most it may have (*@max, vm.max_map_count); -1 where unknown.
 * Context: any thread, blocking (reads /proc): for sizing and error messages.
 */
void store_maps_count(long *used, long *max);

#endif /* SP_STORE_IO_H */
