// SPDX-License-Identifier: Apache-2.0
/*
 * bk_proc.c - the sprocket-broker launcher of the integration tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bk_proc.h"

int
bk_start(const char *bin, const char *const *args, struct bk_proc *p)
{
	const char *argv[64];
	char logpath[192];
	char line[4096];
	char store[192], port[64];
	struct stat sb;
	off_t start = 0;
	int argc = 0;

	if (p->dir[0] == '\0') {
		snprintf(p->dir, sizeof(p->dir), "/tmp/sp-bk-XXXXXX");
		if (mkdtemp(p->dir) == NULL)
			return -errno;
	}
	if (p->dp_port == 0)
		p->dp_port = (uint16_t)(31000 + (getpid() % 4000) * 8);
	snprintf(logpath, sizeof(logpath), "%s/broker.log", p->dir);
	if (stat(logpath, &sb) == 0)
		start = sb.st_size;
	snprintf(store, sizeof(store), "--storePathRootDir=%s/store", p->dir);
	snprintf(port, sizeof(port), "--dataplanePort=%u", p->dp_port);
	argv[argc++] = bin;
	argv[argc++] = store;
	argv[argc++] = port;
	argv[argc++] = "--namesrvAddr=";
	argv[argc++] = "--mapedFileSizeCommitLog=67108864";
	argv[argc++] = "--mapedFileSizeConsumeQueue=600000";
	for (size_t i = 0; args != NULL && args[i] != NULL && argc < 62; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;

	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		/* Dies with the test: a failed case must not leave a broker behind. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
			_exit(127);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		FILE *f = fopen(logpath, "r");
		int st;

		if (f != NULL && fseeko(f, start, SEEK_SET) == 0) {
			while (fgets(line, sizeof(line), f) != NULL) {
				if (strstr(line, " ready: ") != NULL) {
					fclose(f);
					return 0;
				}
			}
		}
		if (f != NULL)
			fclose(f);
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			p->pid = 0;
			break;
		}
		usleep(10000);
	}
	fprintf(stderr, "sprocket-broker did not come up; log %s:\n", logpath);
	{
		FILE *f = fopen(logpath, "r");

		while (f != NULL && fgets(line, sizeof(line), f) != NULL)
			fputs(line, stderr);
		if (f != NULL)
			fclose(f);
	}
	if (p->pid > 0)
		bk_kill(p);
	return -EIO;
}

int
bk_stop(struct bk_proc *p)
{
	int st = 0;

	if (p->pid <= 0)
		return -1;
	kill(p->pid, SIGTERM);
	for (int i = 0; i < 3000; i++) {
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			p->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		usleep(10000);
	}
	bk_kill(p);
	return -1;
}

void
bk_kill(struct bk_proc *p)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	p->pid = 0;
}

void
bk_cleanup(struct bk_proc *p)
{
	char cmd[256];

	if (p->pid > 0)
		bk_stop(p);
	if (strncmp(p->dir, "/tmp/sp-bk-", 11) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", p->dir);
}

bool
bk_log_has(const struct bk_proc *p, const char *needle)
{
	char path[192];
	char line[4096];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/broker.log", p->dir);
	f = fopen(path, "r");
	while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	if (f != NULL)
		fclose(f);
	return found;
}
