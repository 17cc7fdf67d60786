// SPDX-License-Identifier: Apache-2.0
/*
 * io_fault.c - fault-injecting store I/O for tests (see io_fault.h).
 *
 * Snapshots are kept per path in memory: tests use small segments. A file
 * is tracked from the moment it is opened for writing through this table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/compiler.h"
#include "io_fault.h"

#define IOF_FILES 1024

struct iof_file {
	char *path;
	uint8_t *snap; /* content at the last successful fdatasync */
	size_t snap_len;
	bool synced;
};

struct io_fault {
	struct store_io_ops ops;
	pthread_mutex_t lock; /* the store calls in from several threads */
	int err[IOF_COUNT];
	unsigned skip[IOF_COUNT];
	uint64_t calls[IOF_COUNT];
	size_t short_max;
	char *shadow_root;
	char *shadow;
	char *fd_path[4096];
	struct iof_file files[IOF_FILES];
	unsigned n_files;
};

/* Return: the shadow path of @path (static buffer), or NULL when not tracked. */
static const char *
iof_shadow_of(const struct io_fault *f, const char *path)
{
	static char buf[8192];
	size_t n;

	if (f->shadow == NULL)
		return NULL;
	n = strlen(f->shadow_root);
	if (strncmp(path, f->shadow_root, n) != 0 || path[n] != '/')
		return NULL;
	snprintf(buf, sizeof(buf), "%s%s", f->shadow, path + n);
	return buf;
}

static void
iof_copy_file(const char *from, const char *to)
{
	char tmp[8300];
	char dir[8192];
	char *slash;
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out;
	uint64_t size;
	uint8_t *buf;

	snprintf(dir, sizeof(dir), "%s", to);
	slash = strrchr(dir, '/');
	if (slash != NULL) {
		*slash = '\0';
		if (store_mkdirs(dir) != 0)
			abort();
	}
	/*
	 * Write a temp copy and rename it: the writer may be killed at any
	 * instant, and a half-written shadow would model a loss that a real
	 * fdatasync never allows.
	 */
	snprintf(tmp, sizeof(tmp), "%s.iof-tmp", to);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (in < 0 || out < 0 || store_io_posix.size(NULL, in, &size) != 0)
		abort();
	buf = malloc(size ? size : 1);
	if (buf == NULL || store_io_read_all(&store_io_posix, in, buf, size, 0) != 0 ||
	    store_io_write_all(&store_io_posix, out, buf, size, 0) != 0)
		abort();
	free(buf);
	close(in);
	close(out);
	if (rename(tmp, to) != 0)
		abort();
}

static int
iof_check(struct io_fault *f, enum io_fault_op op)
{
	f->calls[op]++;
	if (f->err[op] == 0)
		return 0;
	if (f->skip[op] > 0) {
		f->skip[op]--;
		return 0;
	}
	return -f->err[op];
}

static struct iof_file *
iof_track(struct io_fault *f, const char *path)
{
	for (unsigned i = 0; i < f->n_files; i++) {
		if (strcmp(f->files[i].path, path) == 0)
			return &f->files[i];
	}
	if (f->n_files == IOF_FILES)
		abort();
	f->files[f->n_files].path = strdup(path);
	return &f->files[f->n_files++];
}

static int
iof_open_u(void *ctx, const char *path, int flags, mode_t mode)
{
	struct io_fault *f = ctx;
	int rc = iof_check(f, IOF_OPEN);
	int fd;

	if (rc != 0)
		return rc;
	fd = store_io_posix.open(NULL, path, flags, mode);
	if (fd >= 0 && fd < 4096) {
		free(f->fd_path[fd]);
		f->fd_path[fd] = strdup(path);
		if ((flags & O_ACCMODE) != O_RDONLY)
			(void)iof_track(f, path);
	}
	return fd;
}

static int
iof_close_u(void *ctx, int fd)
{
	struct io_fault *f = ctx;

	if (fd >= 0 && fd < 4096) {
		free(f->fd_path[fd]);
		f->fd_path[fd] = NULL;
	}
	return store_io_posix.close(NULL, fd);
}

static int
iof_allocate_u(void *ctx, int fd, uint64_t len)
{
	int rc = iof_check(ctx, IOF_ALLOCATE);

	return rc != 0 ? rc : store_io_posix.allocate(NULL, fd, len);
}

static int
iof_truncate_u(void *ctx, int fd, uint64_t len)
{
	(void)ctx;
	return store_io_posix.truncate(NULL, fd, len);
}

static ssize_t
iof_pwrite_u(void *ctx, int fd, const void *buf, size_t n, uint64_t off)
{
	struct io_fault *f = ctx;
	int rc = iof_check(f, IOF_PWRITE);

	if (rc != 0)
		return rc;
	if (f->short_max > 0 && n > f->short_max)
		n = f->short_max;
	return store_io_posix.pwrite(NULL, fd, buf, n, off);
}

static ssize_t
iof_pread_u(void *ctx, int fd, void *buf, size_t n, uint64_t off)
{
	(void)ctx;
	return store_io_posix.pread(NULL, fd, buf, n, off);
}

static int
iof_fdatasync_u(void *ctx, int fd)
{
	struct io_fault *f = ctx;
	int rc = iof_check(f, IOF_FDATASYNC);
	struct iof_file *file;
	uint64_t size;
	int rfd;

	if (rc != 0)
		return rc;
	rc = store_io_posix.fdatasync(NULL, fd);
	if (rc != 0 || fd < 0 || fd >= 4096 || f->fd_path[fd] == NULL)
		return rc;
	/* Snapshot what is now durable. */
	file = iof_track(f, f->fd_path[fd]);
	/* Read through a fd of our own: the store's may be write-only. */
	rfd = open(f->fd_path[fd], O_RDONLY | O_CLOEXEC);
	if (rfd < 0 || store_io_posix.size(NULL, rfd, &size) != 0)
		abort();
	free(file->snap);
	file->snap = malloc(size ? size : 1);
	if (file->snap == NULL || store_io_read_all(&store_io_posix, rfd, file->snap, size, 0) != 0)
		abort();
	close(rfd);
	file->snap_len = size;
	file->synced = true;
	if (iof_shadow_of(f, f->fd_path[fd]) != NULL)
		iof_copy_file(f->fd_path[fd], iof_shadow_of(f, f->fd_path[fd]));
	return 0;
}

static int
iof_map_u(void *ctx, int fd, size_t len, void **out)
{
	int rc = iof_check(ctx, IOF_MAP);

	return rc != 0 ? rc : store_io_posix.map(NULL, fd, len, out);
}

static int
iof_unmap_u(void *ctx, void *addr, size_t len)
{
	(void)ctx;
	return store_io_posix.unmap(NULL, addr, len);
}

static int
iof_unlink_u(void *ctx, const char *path)
{
	struct io_fault *f = ctx;
	const char *sh = iof_shadow_of(f, path);

	if (sh != NULL)
		unlink(sh);
	return store_io_posix.unlink(NULL, path);
}

static int
iof_rename_u(void *ctx, const char *from, const char *to)
{
	struct io_fault *f = ctx;
	int rc = iof_check(f, IOF_RENAME);
	struct iof_file *src;
	struct iof_file *dst;

	if (rc != 0)
		return rc;
	rc = store_io_posix.rename(NULL, from, to);
	if (rc != 0)
		return rc;
	if (iof_shadow_of(f, from) != NULL) {
		char sfrom[8192];

		snprintf(sfrom, sizeof(sfrom), "%s", iof_shadow_of(f, from));
		rename(sfrom, iof_shadow_of(f, to)); /* no shadow: never synced, fine */
	}
	/* Open descriptors now name the new path. */
	for (unsigned i = 0; i < 4096; i++) {
		if (f->fd_path[i] != NULL && strcmp(f->fd_path[i], from) == 0) {
			free(f->fd_path[i]);
			f->fd_path[i] = strdup(to);
		}
	}
	/* The renamed file carries its durable snapshot to the new name. */
	src = iof_track(f, from);
	dst = iof_track(f, to);
	free(dst->snap);
	dst->snap = src->snap;
	dst->snap_len = src->snap_len;
	dst->synced = src->synced;
	src->snap = NULL;
	src->snap_len = 0;
	src->synced = false;
	return 0;
}

static int
iof_sync_dir_u(void *ctx, const char *dir)
{
	(void)ctx;
	return store_io_posix.sync_dir(NULL, dir);
}

static int
iof_size_u(void *ctx, int fd, uint64_t *out)
{
	(void)ctx;
	return store_io_posix.size(NULL, fd, out);
}

static int
iof_open(void *ctx, const char *path, int flags, mode_t mode)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_open_u(ctx, path, flags, mode);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_close(void *ctx, int fd)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_close_u(ctx, fd);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_allocate(void *ctx, int fd, uint64_t len)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_allocate_u(ctx, fd, len);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_truncate(void *ctx, int fd, uint64_t len)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_truncate_u(ctx, fd, len);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static ssize_t
iof_pwrite(void *ctx, int fd, const void *buf, size_t n, uint64_t off)
{
	struct io_fault *f = ctx;
	ssize_t r;

	pthread_mutex_lock(&f->lock);
	r = iof_pwrite_u(ctx, fd, buf, n, off);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static ssize_t
iof_pread(void *ctx, int fd, void *buf, size_t n, uint64_t off)
{
	struct io_fault *f = ctx;
	ssize_t r;

	pthread_mutex_lock(&f->lock);
	r = iof_pread_u(ctx, fd, buf, n, off);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_fdatasync(void *ctx, int fd)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_fdatasync_u(ctx, fd);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_map(void *ctx, int fd, size_t len, void **out)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_map_u(ctx, fd, len, out);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_unmap(void *ctx, void *addr, size_t len)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_unmap_u(ctx, addr, len);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_unlink(void *ctx, const char *path)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_unlink_u(ctx, path);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_rename(void *ctx, const char *from, const char *to)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_rename_u(ctx, from, to);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_sync_dir(void *ctx, const char *dir)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_sync_dir_u(ctx, dir);
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int
iof_size(void *ctx, int fd, uint64_t *out)
{
	struct io_fault *f = ctx;
	int r;

	pthread_mutex_lock(&f->lock);
	r = iof_size_u(ctx, fd, out);
	pthread_mutex_unlock(&f->lock);
	return r;
}

struct io_fault *
io_fault_new(void)
{
	struct io_fault *f = calloc(1, sizeof(*f));

	if (f == NULL)
		abort();
	pthread_mutex_init(&f->lock, NULL);
	f->ops = (struct store_io_ops){
		.open = iof_open,
		.close = iof_close,
		.allocate = iof_allocate,
		.truncate = iof_truncate,
		.pwrite = iof_pwrite,
		.pread = iof_pread,
		.fdatasync = iof_fdatasync,
		.map = iof_map,
		.unmap = iof_unmap,
		.unlink = iof_unlink,
		.rename = iof_rename,
		.sync_dir = iof_sync_dir,
		.size = iof_size,
		.ctx = f,
	};
	return f;
}

void
io_fault_free(struct io_fault *f)
{
	for (unsigned i = 0; i < 4096; i++)
		free(f->fd_path[i]);
	for (unsigned i = 0; i < f->n_files; i++) {
		free(f->files[i].path);
		free(f->files[i].snap);
	}
	free(f->shadow_root);
	free(f->shadow);
	free(f);
}

void
io_fault_set_shadow(struct io_fault *f, const char *root, const char *shadow)
{
	f->shadow_root = strdup(root);
	f->shadow = strdup(shadow);
}

int
io_fault_shadow_restore(const char *root, const char *shadow)
{
	DIR *d = opendir(root);
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		char path[8192];
		char spath[8192];
		struct stat st;
		int rc;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", root, de->d_name);
		snprintf(spath, sizeof(spath), "%s/%s", shadow, de->d_name);
		if (lstat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			rc = io_fault_shadow_restore(path, spath);
			if (rc < 0) {
				closedir(d);
				return rc;
			}
			n += rc;
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		{
			int fd = open(path, O_RDWR | O_CLOEXEC);
			int sfd = open(spath, O_RDONLY | O_CLOEXEC);
			uint64_t ssize = 0;
			uint8_t *buf = NULL;

			if (fd < 0) {
				closedir(d);
				return -errno;
			}
			if (sfd >= 0 && store_io_posix.size(NULL, sfd, &ssize) == 0) {
				buf = malloc(ssize ? ssize : 1);
				if (buf == NULL ||
				    store_io_read_all(&store_io_posix, sfd, buf, ssize, 0) != 0)
					abort();
			}
			/* Drop everything, then put back what was durable; keep the size. */
			if (ftruncate(fd, 0) != 0 ||
			    ftruncate(fd, sfd >= 0 ? (off_t)st.st_size : 0) != 0 ||
			    (buf != NULL &&
			     store_io_write_all(&store_io_posix, fd, buf,
						SP_MIN(ssize, (uint64_t)st.st_size), 0) != 0))
				abort();
			free(buf);
			if (sfd >= 0)
				close(sfd);
			close(fd);
			n++;
		}
	}
	closedir(d);
	return n;
}

const struct store_io_ops *
io_fault_ops(struct io_fault *f)
{
	return &f->ops;
}

void
io_fault_fail(struct io_fault *f, enum io_fault_op op, int err)
{
	f->err[op] = err;
	f->skip[op] = 0;
}

void
io_fault_fail_after(struct io_fault *f, enum io_fault_op op, unsigned skip, int err)
{
	f->err[op] = err;
	f->skip[op] = skip;
}

void
io_fault_short_writes(struct io_fault *f, size_t max)
{
	f->short_max = max;
}

uint64_t
io_fault_calls(const struct io_fault *f, enum io_fault_op op)
{
	return f->calls[op];
}

int
io_fault_power_loss(struct io_fault *f, bool garble_tail)
{
	int changed = 0;

	for (unsigned i = 0; i < f->n_files; i++) {
		struct iof_file *file = &f->files[i];
		int fd = open(file->path, O_RDWR | O_CLOEXEC);
		uint64_t size;

		if (fd < 0)
			continue; /* deleted since */
		if (store_io_posix.size(NULL, fd, &size) != 0)
			abort();
		if (!file->synced) {
			if (ftruncate(fd, 0) != 0)
				abort();
		} else {
			if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)size) != 0 ||
			    store_io_write_all(&store_io_posix, fd, file->snap,
					       SP_MIN(file->snap_len, size), 0) != 0)
				abort();
			if (garble_tail && file->snap_len + 16 <= size) {
				static const uint8_t junk[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2,
								 3,    4,    5,	   6,	 7, 8,
								 9,    10,   11,   12};

				if (store_io_write_all(&store_io_posix, fd, junk, sizeof(junk),
						       file->snap_len) != 0)
					abort();
			}
		}
		close(fd);
		changed++;
	}
	return changed;
}
