// SPDX-License-Identifier: Apache-2.0
/*
 * bk_proc.c - the sprocket-broker launcher of the integration tests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bk_proc.h"
#include "ns_client.h"

int
bk_start(const char *bin, const char *const *args, struct bk_proc *p)
{
	const char *argv[64];
	char logpath[192];
	char line[4096];
	char store[192], port[64];
	off_t start;
	int argc = 0, rc;

	if (p->dir[0] == '\0') {
		snprintf(p->dir, sizeof(p->dir), "/tmp/sp-bk-XXXXXX");
		if (mkdtemp(p->dir) == NULL)
			return -errno;
	}
	if (p->dp_port == 0)
		p->dp_port = (uint16_t)(31000 + (getpid() % 4000) * 8);
	snprintf(logpath, sizeof(logpath), "%s/broker.log", p->dir);
	start = tproc_log_size(logpath);
	snprintf(store, sizeof(store), "--storePathRootDir=%s/store", p->dir);
	snprintf(port, sizeof(port), "--dataplanePort=%u", p->dp_port);
	argv[argc++] = bin;
	argv[argc++] = store;
	argv[argc++] = port;
	argv[argc++] = "--namesrvAddr=";
	argv[argc++] = "--mapedFileSizeCommitLog=67108864";
	argv[argc++] = "--mapedFileSizeConsumeQueue=600000";
	argv[argc++] = "--listenPort=0";
	for (size_t i = 0; args != NULL && args[i] != NULL && argc < 62; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;

	p->pid = tproc_spawn(argv, logpath);
	if (p->pid < 0)
		return (int)p->pid;
	rc = tproc_wait_line(&p->pid, logpath, start, " ready: ", line, sizeof(line),
			     "sprocket-broker");
	if (rc == 0) {
		const char *r = strstr(line, ", remoting ");
		const char *colon = r ? strchr(r + 11, ':') : NULL;

		p->rmt_port = colon ? (uint16_t)atoi(colon + 1) : 0;
	}
	return rc;
}

int
bk_stop(struct bk_proc *p)
{
	return tproc_stop(&p->pid);
}

void
bk_kill(struct bk_proc *p)
{
	tproc_kill(&p->pid);
}

void
bk_cleanup(struct bk_proc *p)
{
	if (p->pid > 0)
		bk_stop(p);
	if (getenv("T_KEEP") != NULL) { /* keep the store and broker.log to look at */
		fprintf(stderr, "kept %s\n", p->dir);
		return;
	}
	tproc_rmdir(p->dir, "/tmp/sp-bk-");
}

bool
bk_log_has(const struct bk_proc *p, const char *needle)
{
	char path[192];

	snprintf(path, sizeof(path), "%s/broker.log", p->dir);
	return tproc_log_has(path, needle);
}
