// SPDX-License-Identifier: Apache-2.0
/*
 * owner.c - who owns a store (docs/store.md, "One process per store",
 * "A store keeps its shard count").
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

/* Does @dir hold a CommitLog segment (a file named by 20 digits)? */
static bool
dir_has_segment(const char *dir)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(dir);

	if (d == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL)
		found = strlen(de->d_name) == 20 && strspn(de->d_name, "0123456789") == 20;
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
		if (i + 1 > n && dir_has_segment(sub))
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
