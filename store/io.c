// SPDX-License-Identifier: Apache-2.0
/*
 * io.c - the production store_io_ops table (plain syscalls) and helpers
 * built on any table: full writes/reads, atomic file replacement, mkdir -p.
 *
 * The helpers take the table, never the syscalls, so a fault-injecting
 * table reaches every byte the store writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/io.h"

static int
posix_open(void *ctx, const char *path, int flags, mode_t mode)
{
	int fd;

	(void)ctx;
	fd = open(path, flags | O_CLOEXEC, mode);
	return fd < 0 ? -errno : fd;
}

static int
posix_close(void *ctx, int fd)
{
	(void)ctx;
	return close(fd) < 0 ? -errno : 0;
}

static int
posix_allocate(void *ctx, int fd, uint64_t len)
{
	(void)ctx;
	/* posix_fallocate returns the error instead of setting errno. */
	return -posix_fallocate(fd, 0, (off_t)len);
}

static int
posix_truncate(void *ctx, int fd, uint64_t len)
{
	(void)ctx;
	return ftruncate(fd, (off_t)len) < 0 ? -errno : 0;
}

static ssize_t
posix_pwrite(void *ctx, int fd, const void *buf, size_t n, uint64_t off)
{
	ssize_t r;

	(void)ctx;
	r = pwrite(fd, buf, n, (off_t)off);
	return r < 0 ? -errno : r;
}

static ssize_t
posix_pread(void *ctx, int fd, void *buf, size_t n, uint64_t off)
{
	ssize_t r;

	(void)ctx;
	r = pread(fd, buf, n, (off_t)off);
	return r < 0 ? -errno : r;
}

static int
posix_fdatasync(void *ctx, int fd)
{
	(void)ctx;
	return fdatasync(fd) < 0 ? -errno : 0;
}

static int
posix_map(void *ctx, int fd, size_t len, void **out)
{
	void *p;

	(void)ctx;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

static int
posix_unmap(void *ctx, void *addr, size_t len)
{
	(void)ctx;
	return munmap(addr, len) < 0 ? -errno : 0;
}

static int
posix_unlink(void *ctx, const char *path)
{
	(void)ctx;
	return unlink(path) < 0 ? -errno : 0;
}

static int
posix_rename(void *ctx, const char *from, const char *to)
{
	(void)ctx;
	return rename(from, to) < 0 ? -errno : 0;
}

static int
posix_sync_dir(void *ctx, const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	(void)ctx;
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int
posix_size(void *ctx, int fd, uint64_t *out)
{
	struct stat st;

	(void)ctx;
	if (fstat(fd, &st) < 0)
		return -errno;
	*out = (uint64_t)st.st_size;
	return 0;
}

const struct store_io_ops store_io_posix = {
	.open = posix_open,
	.close = posix_close,
	.allocate = posix_allocate,
	.truncate = posix_truncate,
	.pwrite = posix_pwrite,
	.pread = posix_pread,
	.fdatasync = posix_fdatasync,
	.map = posix_map,
	.unmap = posix_unmap,
	.unlink = posix_unlink,
	.rename = posix_rename,
	.sync_dir = posix_sync_dir,
	.size = posix_size,
	.ctx = NULL,
};

int
store_io_write_all(const struct store_io_ops *io, int fd, const void *buf, size_t n, uint64_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t r = io->pwrite(io->ctx, fd, p, n, off);

		if (r == -EINTR)
			continue;
		if (r < 0)
			return (int)r;
		if (r == 0)
			return -EIO;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int
store_io_read_all(const struct store_io_ops *io, int fd, void *buf, size_t n, uint64_t off)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = io->pread(io->ctx, fd, p, n, off);

		if (r == -EINTR)
			continue;
		if (r < 0)
			return (int)r;
		if (r == 0)
			return -EIO; /* file shorter than expected */
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static void
dir_of(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL) {
		snprintf(dir, cap, ".");
		return;
	}
	snprintf(dir, cap, "%.*s", (int)(slash == path ? 1 : slash - path), path);
}

int
store_io_append(const struct store_io_ops *io, const char *path, const void *buf, size_t n)
{
	char dir[PATH_MAX];
	uint64_t size = 0;
	int fd = io->open(io->ctx, path, O_WRONLY | O_CREAT, 0644);
	int rc;

	if (fd < 0)
		return fd;
	rc = io->size(io->ctx, fd, &size);
	if (rc == 0)
		rc = store_io_write_all(io, fd, buf, n, size);
	if (rc == 0)
		rc = io->fdatasync(io->ctx, fd);
	io->close(io->ctx, fd);
	if (rc != 0 || size > 0)
		return rc;
	/* the file may have just been made: its name must survive a crash too */
	dir_of(path, dir, sizeof(dir));
	return io->sync_dir(io->ctx, dir);
}

int
store_io_write_atomic(const struct store_io_ops *io, const char *path, const void *buf, size_t n)
{
	char tmp[PATH_MAX];
	char dir[PATH_MAX];
	int fd;
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = io->open(io->ctx, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return fd;
	rc = store_io_write_all(io, fd, buf, n, 0);
	if (rc == 0)
		rc = io->fdatasync(io->ctx, fd);
	io->close(io->ctx, fd);
	if (rc != 0)
		goto err_unlink;
	rc = io->rename(io->ctx, tmp, path);
	if (rc != 0)
		goto err_unlink;
	dir_of(path, dir, sizeof(dir));
	return io->sync_dir(io->ctx, dir);

err_unlink:
	io->unlink(io->ctx, tmp);
	return rc;
}

int
store_io_read_file(const struct store_io_ops *io, const char *path, size_t max, char **out,
		   size_t *len)
{
	uint64_t size;
	char *buf;
	int fd;
	int rc;

	fd = io->open(io->ctx, path, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	rc = io->size(io->ctx, fd, &size);
	if (rc != 0)
		goto out_close;
	if (size > max) {
		rc = -EFBIG;
		goto out_close;
	}
	buf = malloc((size_t)size + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out_close;
	}
	rc = store_io_read_all(io, fd, buf, (size_t)size, 0);
	if (rc != 0) {
		free(buf);
		goto out_close;
	}
	buf[size] = '\0';
	*out = buf;
	*len = (size_t)size;
out_close:
	io->close(io->ctx, fd);
	return rc;
}

int
store_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		buf[i] = i == n ? '\0' : '/';
	}
	return 0;
}

void
store_maps_count(long *used, long *max)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	char line[512];
	long n = 0;

	*max = -1;
	if (f != NULL) {
		if (fscanf(f, "%ld", max) != 1)
			*max = -1;
		fclose(f);
	}
	*used = -1;
	f = fopen("/proc/self/maps", "re");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		n += strchr(line, '\n') != NULL;
	fclose(f);
	*used = n;
}
