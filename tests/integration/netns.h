/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netns.h - two network namespaces joined by a veth pair, for tests and
 * tools that need a real Ethernet link without touching the host's
 * (header only).
 *
 * Names carry the creating pid ("spafp_<pid>_a", veth "spa<pid>"), so runs
 * in parallel never clash, and the 10.77.0.0/24 addresses exist only inside
 * the namespaces. t_netns_create() first deletes namespaces of earlier runs
 * whose pid is gone (a test killed by SIGKILL cannot clean up); destroy runs
 * at exit and from SIGINT/SIGTERM/SIGHUP (meson's timeout), using only
 * async-signal-safe calls there.
 */
#ifndef SP_TESTS_NETNS_H
#define SP_TESTS_NETNS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/compiler.h"

#define T_NS_PREFIX "spafp_"

struct t_netns {
	char ns[2][32];	   /* namespace names */
	char ifn[2][16];   /* veth ends: ifn[0] in ns[0] */
	char ip[2][16];	   /* 10.77.0.1, 10.77.0.2 */
	char del_cmd[160]; /* for the signal handler */
	int home_fd;	   /* the namespace we started in */
	pid_t owner;	   /* only the creating process deletes */
};

static struct t_netns *t_netns_cur;

/* Return: the exit status of `sh -c` on the formatted command (-1 on error). */
static inline int SP_PRINTF(1, 2) t_sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static inline void
t_netns_destroy(void)
{
	struct t_netns *t = t_netns_cur;

	if (!t || t->owner != getpid())
		return;
	t_netns_cur = NULL;
	(void)t_sh("%s", t->del_cmd);
}

static inline void
t_netns_on_signal(int sig)
{
	struct t_netns *t = t_netns_cur;

	if (t && t->owner == getpid()) {
		pid_t pid = fork();

		if (pid == 0) {
			execl("/bin/sh", "sh", "-c", t->del_cmd, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			(void)waitpid(pid, NULL, 0);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void
t_netns_reap_stale(void)
{
	DIR *d = opendir("/var/run/netns");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		int pid = 0;

		if (sscanf(e->d_name, T_NS_PREFIX "%d_", &pid) != 1 || pid <= 0)
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		(void)t_sh("ip netns del %s 2>/dev/null", e->d_name);
	}
	closedir(d);
}

/* Return: 0, or -1 with a message on stderr. */
static inline int
t_netns_create(struct t_netns *t)
{
	int pid = (int)getpid();

	memset(t, 0, sizeof(*t));
	t_netns_reap_stale();
	snprintf(t->ns[0], sizeof(t->ns[0]), T_NS_PREFIX "%d_a", pid);
	snprintf(t->ns[1], sizeof(t->ns[1]), T_NS_PREFIX "%d_b", pid);
	snprintf(t->ifn[0], sizeof(t->ifn[0]), "spa%d", pid);
	snprintf(t->ifn[1], sizeof(t->ifn[1]), "spb%d", pid);
	snprintf(t->ip[0], sizeof(t->ip[0]), "10.77.0.1");
	snprintf(t->ip[1], sizeof(t->ip[1]), "10.77.0.2");
	snprintf(t->del_cmd, sizeof(t->del_cmd),
		 "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", t->ns[0], t->ns[1]);
	t->owner = getpid();
	t->home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	t_netns_cur = t;
	atexit(t_netns_destroy);
	signal(SIGINT, t_netns_on_signal);
	signal(SIGTERM, t_netns_on_signal);
	signal(SIGHUP, t_netns_on_signal);
	if (t_sh("ip netns add %s && ip netns add %s", t->ns[0], t->ns[1]) != 0)
		goto err;
	/* Created directly inside the namespaces: the names never exist on the host. */
	if (t_sh("ip link add %s netns %s type veth peer name %s netns %s", t->ifn[0], t->ns[0],
		 t->ifn[1], t->ns[1]) != 0)
		goto err;
	for (int i = 0; i < 2; i++) {
		if (t_sh("ip -n %s addr add %s/24 dev %s && ip -n %s link set %s up && "
			 "ip -n %s link set lo up",
			 t->ns[i], t->ip[i], t->ifn[i], t->ns[i], t->ifn[i], t->ns[i]) != 0)
			goto err;
	}
	/* Carrier-on reaches operstate (IFF_RUNNING) through linkwatch, up to 1 s later. */
	for (int tries = 0; tries < 300; tries++) {
		if (t_sh("ip -n %s -o link show dev %s | grep -q 'state UP' && "
			 "ip -n %s -o link show dev %s | grep -q 'state UP'",
			 t->ns[0], t->ifn[0], t->ns[1], t->ifn[1]) == 0)
			return 0;
		usleep(10000);
	}
err:
	fprintf(stderr, "netns: could not build the veth topology (ip netns / veth)\n");
	t_netns_destroy();
	return -1;
}

/* Moves the calling thread into namespace @side (0, 1) or home (-1). Return: 0 or -errno. */
static inline int
t_netns_enter(const struct t_netns *t, int side)
{
	char path[64];
	int fd;
	int rc;

	if (side < 0)
		return setns(t->home_fd, CLONE_NEWNET) < 0 ? -errno : 0;
	snprintf(path, sizeof(path), "/var/run/netns/%s", t->ns[side]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

#endif /* SP_TESTS_NETNS_H */
