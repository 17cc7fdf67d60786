// SPDX-License-Identifier: Apache-2.0
/* test_io.c - store I/O helpers: full writes, atomic replace, small-file reads. */
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "io_fault.h"
#include "store/io.h"

static char dir[64];

static void
mktmp(void)
{
	strcpy(dir, "/tmp/sp-io-XXXXXX");
	T_ASSERT(mkdtemp(dir) != NULL);
}

static void
rmtmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	T_ASSERT(system(cmd) == 0);
}

static void
test_atomic_replace(void)
{
	struct io_fault *f = io_fault_new();
	const struct store_io_ops *io = io_fault_ops(f);
	char path[128];
	char *buf;
	size_t len;
	struct stat st;

	mktmp();
	snprintf(path, sizeof(path), "%s/a/b/c/file.json", dir);
	T_ASSERT_EQ(store_io_read_file(io, path, 100, &buf, &len), -ENOENT);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	T_ASSERT_EQ(store_mkdirs(path), 0);
	T_ASSERT_EQ(store_mkdirs(path), 0); /* idempotent */
	snprintf(path, sizeof(path), "%s/a/b/c/file.json", dir);

	/* Short writes are continued. */
	io_fault_short_writes(f, 3);
	T_ASSERT_EQ(store_io_write_atomic(io, path, "{\"v\":1}", 7), 0);
	io_fault_short_writes(f, 0);
	T_ASSERT_EQ(store_io_read_file(io, path, 100, &buf, &len), 0);
	T_ASSERT_EQ(len, 7);
	T_ASSERT_STREQ(buf, "{\"v\":1}");
	free(buf);

	/* A failing sync or rename leaves the old content and no temp file. */
	io_fault_fail(f, IOF_FDATASYNC, EIO);
	T_ASSERT_EQ(store_io_write_atomic(io, path, "{\"v\":2}", 7), -EIO);
	io_fault_fail(f, IOF_FDATASYNC, 0);
	io_fault_fail(f, IOF_RENAME, ENOSPC);
	T_ASSERT_EQ(store_io_write_atomic(io, path, "{\"v\":3}", 7), -ENOSPC);
	io_fault_fail(f, IOF_RENAME, 0);
	T_ASSERT_EQ(store_io_read_file(io, path, 100, &buf, &len), 0);
	T_ASSERT_STREQ(buf, "{\"v\":1}");
	free(buf);
	snprintf(path, sizeof(path), "%s/a/b/c/file.json.tmp", dir);
	T_ASSERT(stat(path, &st) != 0);

	/* Too big for the caller's limit. */
	snprintf(path, sizeof(path), "%s/a/b/c/file.json", dir);
	T_ASSERT_EQ(store_io_read_file(io, path, 6, &buf, &len), -EFBIG);

	/* A pwrite that fails is reported, not retried forever. */
	io_fault_fail(f, IOF_PWRITE, EIO);
	T_ASSERT_EQ(store_io_write_atomic(io, path, "x", 1), -EIO);
	io_fault_free(f);
	rmtmp();
}

static void
test_power_loss_model(void)
{
	struct io_fault *f = io_fault_new();
	const struct store_io_ops *io = io_fault_ops(f);
	char path[128];
	char buf[16] = {0};
	int fd;

	mktmp();
	snprintf(path, sizeof(path), "%s/seg", dir);
	fd = io->open(io->ctx, path, O_RDWR | O_CREAT, 0644);
	T_ASSERT(fd >= 0);
	T_ASSERT_EQ(store_io_write_all(io, fd, "durable", 7, 0), 0);
	T_ASSERT_EQ(io->fdatasync(io->ctx, fd), 0);
	T_ASSERT_EQ(store_io_write_all(io, fd, "LOST", 4, 0), 0);
	io->close(io->ctx, fd);
	T_ASSERT(io_fault_power_loss(f, false) >= 1);
	fd = io->open(io->ctx, path, O_RDONLY, 0);
	T_ASSERT_EQ(store_io_read_all(io, fd, buf, 7, 0), 0);
	T_ASSERT_STREQ(buf, "durable");
	io->close(io->ctx, fd);
	io_fault_free(f);
	rmtmp();
}

T_MAIN(T_CASE(test_atomic_replace), T_CASE(test_power_loss_model))
