// SPDX-License-Identifier: Apache-2.0
/*
 * owner.c - who owns a store and its write-behind buffer directories
 * (docs/store.md, "One process per store" and "Buffer directories of dead
 * runs").
 *
 * A store is one process's: <root>/lock is held with flock(LOCK_EX) from
 * the start of store_open() to the end of store_close(), and records the
 * holder's pid for the refusal a second process gets. flock, not fcntl
 * locks: an fcntl lock is dropped when the process closes any descriptor of
 * the file, and belongs to the process rather than to the open file, so a
 * second store_open() in the same process would not be refused. The kernel
 * drops an flock when its holder dies, so a killed broker never leaves a
 * store locked, and nothing has to guess whether a recorded pid is alive.
 *
 * A run's buffer directory, <buf_dir>/sprocket-XXXXXX, holds "owner": the
 * store root it belongs to, and an flock its run holds for its whole life.
 * The file is written under another name, locked, then renamed into place,
 * so whoever finds an "owner" finds it locked while its run lives. A later
 * start of any store can so tell a dead run's directory (its owner not
 * locked) from a live one, and whether the store it names still needs it
 * (that store's <root>/bufdir names it: its next start recovers from it).
 *
 * A store also keeps the shard count it was written with: its checkpoint
 * records it, and so do the commitlog/<shard> directories. A start with
 * another count would map queues to other shards and lose messages from
 * view; it is refused, saying what to do.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

#include "store_priv.h"

#define OWNER_TAG "store"
#define OWNER_FILE "owner"
#define OWNER_MAGIC "sprocket write-behind buffers"

int
store__lock(const char *root)
{
	char path[PATH_MAX];
	char text[32];
	int fd;
	int n;

	if (snprintf(path, sizeof(path), "%s/lock", root) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		int rc = -errno;

		log_err(OWNER_TAG, "%s: cannot open: %s", path, strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int rc = -errno;
		long pid = 0;
		ssize_t got;

		if (rc != -EWOULDBLOCK) {
			log_err(OWNER_TAG, "%s: cannot lock: %s", path, strerror(-rc));
			close(fd);
			return rc;
		}
		got = pread(fd, text, sizeof(text) - 1, 0);
		if (got > 0) {
			text[got] = '\0';
			pid = strtol(text, NULL, 10);
		}
		if (pid > 0)
			log_err(OWNER_TAG,
				"%s is in use by process %ld, which holds %s: stop that process "
				"first, or give this one another storePathRootDir",
				root, pid, path);
		else
			log_err(OWNER_TAG,
				"%s is in use by another process (its pid not yet written), which "
				"holds %s: stop that process first, or give this one another "
				"storePathRootDir",
				root, path);
		close(fd);
		return -EBUSY;
	}
	n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	/* Only the refusal a second process gets reads it: a failure costs that line its pid. */
	if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n)
		log_warn(OWNER_TAG, "%s: cannot record this process's pid: %s", path,
			 strerror(errno));
	return fd;
}

int
store__lock_shared(const char *root)
{
	char path[PATH_MAX];
	char text[32];
	ssize_t got;
	long pid = 0;
	int fd;

	if (snprintf(path, sizeof(path), "%s/lock", root) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	/* Read-only, never created: a reader of the store writes nothing in it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return fd;
	got = pread(fd, text, sizeof(text) - 1, 0);
	if (got > 0) {
		text[got] = '\0';
		pid = strtol(text, NULL, 10);
	}
	close(fd);
	log_err(OWNER_TAG,
		"%s is in use by process %ld, which holds %s: stop the broker first (the check "
		"reads the store as it lies on disk)",
		root, pid, path);
	return -EBUSY;
}

bool
store__dir_has_segment(const char *dir, bool any_file)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(dir);

	if (d == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		if (any_file)
			found = de->d_name[0] != '.';
		else
			found = strlen(de->d_name) == 20 && strspn(de->d_name, "0123456789") == 20;
	}
	closedir(d);
	return found;
}

/* How many shards @clog_dir's segments say the log was written with: the highest + 1. */
static uint32_t
clog_dir_shards(const char *clog_dir)
{
	struct dirent *de;
	uint32_t n = 0;
	DIR *d = opendir(clog_dir);

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		char sub[PATH_MAX];
		unsigned long i;
		char *end;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		i = strtoul(de->d_name, &end, 10);
		if (*end != '\0' || i >= UINT32_MAX)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", clog_dir, de->d_name);
		if (i + 1 > n && store__dir_has_segment(sub, false))
			n = (uint32_t)i + 1;
	}
	closedir(d);
	return n;
}

int
store__shards_check(const char *root, const char *clog_dir, uint32_t ckpt_shards, uint32_t shards)
{
	uint32_t was = ckpt_shards;
	const char *why = "its checkpoint says so";

	/* The checkpoint first: the directories alone cannot tell an idle shard from none. */
	if (was == 0) {
		was = clog_dir_shards(clog_dir);
		why = "its highest commitlog shard directory holding segments says so";
	}
	if (was == 0 || was == shards)
		return 0;
	log_err(OWNER_TAG,
		"dataplaneCores=%u but %s was written with %u CommitLog shard%s (%s): start with "
		"--dataplaneCores=%u; a store keeps the shard count it was made with (queues map "
		"to shards by it), so to run %u cores start them on another storePathRootDir",
		shards, root, was, was == 1 ? "" : "s", why, was, shards);
	return -EINVAL;
}

int
store__bufdir_claim(const char *run, const char *root)
{
	char tmp[PATH_MAX];
	char path[PATH_MAX];
	char real[PATH_MAX];
	char text[PATH_MAX + 96];
	int fd;
	int n;

	if (realpath(root, real) == NULL)
		return -errno;
	if (snprintf(tmp, sizeof(tmp), "%s/%s.tmp", run, OWNER_FILE) >= (int)sizeof(tmp) ||
	    snprintf(path, sizeof(path), "%s/%s", run, OWNER_FILE) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* Nobody else can see the file yet: the lock is taken at once. */
	n = snprintf(text, sizeof(text), "%s\nroot=%s\npid=%ld\n", OWNER_MAGIC, real,
		     (long)getpid());
	errno = EIO; /* a short write sets none */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 || write(fd, text, (size_t)n) != n ||
	    rename(tmp, path) != 0) {
		int rc = -errno;

		(void)unlink(tmp);
		close(fd);
		return rc;
	}
	return fd;
}

void
store__bufdir_release(const char *run, int fd)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool other = false;
	DIR *d;

	if (fd < 0)
		return;
	/* The record goes with the directory: while a buffer is left, it stays, unlocked. */
	d = opendir(run);
	while (d != NULL && !other && (de = readdir(d)) != NULL)
		other = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
			strcmp(de->d_name, OWNER_FILE) != 0;
	if (d != NULL)
		closedir(d);
	if (d != NULL && !other) {
		snprintf(path, sizeof(path), "%s/%s", run, OWNER_FILE);
		(void)unlink(path);
		(void)rmdir(run);
	}
	close(fd);
}

/* rm -rf of a buffer directory: files and shard directories, symlinks never followed. */
static int
bufdir_remove(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	int rc = 0;
	DIR *d;

	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP
			       ? (unlinkat(parent, name, 0) == 0 ? 0 : -errno)
			       : -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rc = bufdir_remove(fd, de->d_name);
	}
	closedir(d);
	if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) != 0)
		rc = -errno;
	return rc == -ENOENT ? 0 : rc;
}

/* The store root a dead run's owner record names, into @root. Return: true when it is one. */
static bool
owner_root(int fd, char *root, size_t cap)
{
	char text[PATH_MAX + 96];
	ssize_t got = pread(fd, text, sizeof(text) - 1, 0);
	char *p;
	char *nl;

	if (got <= 0)
		return false;
	text[got] = '\0';
	if (strncmp(text, OWNER_MAGIC "\nroot=", sizeof(OWNER_MAGIC "\nroot=") - 1) != 0)
		return false;
	p = text + sizeof(OWNER_MAGIC "\nroot=") - 1;
	nl = strchr(p, '\n');
	if (nl == NULL || p[0] != '/' || (size_t)(nl - p) >= cap)
		return false;
	memcpy(root, p, (size_t)(nl - p));
	root[nl - p] = '\0';
	return true;
}

/*
 * Does store @root still need @dir (its <root>/bufdir names it)?
 * Return: 1 yes, 0 no (*@why says why not), -1 cannot tell.
 */
static int
bufdir_needed(const char *root, const struct stat *dir, char *why, size_t cap)
{
	char path[PATH_MAX + 8];
	char named[PATH_MAX];
	struct stat st;
	ssize_t got;
	int fd;

	if (stat(root, &st) != 0) {
		if (errno != ENOENT)
			return -1;
		snprintf(why, cap, "the store does not exist");
		return 0;
	}
	snprintf(path, sizeof(path), "%s/bufdir", root);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			return -1;
		/* The run died before recording it: no append ever went into it. */
		snprintf(why, cap, "the store never recorded it");
		return 0;
	}
	got = read(fd, named, sizeof(named) - 1);
	close(fd);
	if (got < 0)
		return -1;
	while (got > 0 && (named[got - 1] == '\n' || named[got - 1] == '\0'))
		got--;
	named[got] = '\0';
	if (stat(named, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino)
		return 1;
	snprintf(why, cap, "its bufdir names %s", named[0] != '\0' ? named : "none");
	return 0;
}

void
store__bufdirs_reap(const char *buf_dir, const char *skip)
{
	struct stat skip_st = {0};
	unsigned unproven = 0;
	struct dirent *de;
	int dfd;
	DIR *d;

	if (skip != NULL && skip[0] != '\0' && stat(skip, &skip_st) != 0)
		skip_st.st_ino = 0;
	dfd = open(buf_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	d = fdopendir(dfd);
	if (d == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char root[PATH_MAX];
		char why[PATH_MAX + 64];
		struct stat st;
		int ofd;
		int need;

		if (strncmp(de->d_name, "sprocket-", 9) != 0 || strlen(de->d_name) != 15)
			continue;
		/* Only our own real directories: /dev/shm is everyone's. */
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
		    (skip_st.st_ino != 0 && st.st_dev == skip_st.st_dev &&
		     st.st_ino == skip_st.st_ino))
			continue;
		{
			char opath[NAME_MAX + 16];

			snprintf(opath, sizeof(opath), "%s/%s", de->d_name, OWNER_FILE);
			ofd = openat(dfd, opath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (ofd < 0) {
			if (errno == ENOENT)
				unproven++;
			continue;
		}
		/* Held: its run lives. Taken: its run is dead, and stays so while we look. */
		if (flock(ofd, LOCK_EX | LOCK_NB) != 0) {
			close(ofd);
			continue;
		}
		if (!owner_root(ofd, root, sizeof(root))) {
			unproven++;
			close(ofd);
			continue;
		}
		need = bufdir_needed(root, &st, why, sizeof(why));
		if (need == 1) {
			log_info(OWNER_TAG,
				 "kept %s/%s: write-behind buffers of a dead run of %s, whose "
				 "bufdir "
				 "names them: its next start recovers from them",
				 buf_dir, de->d_name, root);
		} else if (need == 0) {
			int rc = bufdir_remove(dfd, de->d_name);

			if (rc == 0)
				log_info(OWNER_TAG,
					 "removed %s/%s: write-behind buffers of a dead run of %s, "
					 "which no longer needs them (%s)",
					 buf_dir, de->d_name, root, why);
			else
				log_warn(OWNER_TAG, "cannot remove %s/%s (a dead run's): %s",
					 buf_dir, de->d_name, strerror(-rc));
		}
		close(ofd);
	}
	closedir(d);
	if (unproven > 0)
		log_info(OWNER_TAG,
			 "%u directories sprocket-* in %s have no owner record (made by an older "
			 "sprocket, or being made): left alone; remove one once no store's bufdir "
			 "names it",
			 unproven, buf_dir);
}
