/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpdk_test.h - what the DPDK port tests share (header only): EAL argument
 * strings with the project's hygiene flags, a private RUNTIME_DIRECTORY, CPU
 * picks, and spawning the dpdk_peer helper with a pipe on its stdout.
 *
 * Every DPDK process in the tests runs with --no-pci --no-huge --no-shconf
 * --no-telemetry, a --file-prefix unique to the process, one lcore, and
 * RUNTIME_DIRECTORY pointing at a directory the test created and removes
 * (docs/dpdk.md: nothing left behind). memif sockets are abstract
 * (no file left behind by a kill -9) and carry the driver's pid.
 */
#ifndef SP_TESTS_DPDK_TEST_H
#define SP_TESTS_DPDK_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define T_DPDK_SKIP 77

/* Writes the EAL arguments for one process into @buf. */
static inline void
t_dpdk_eal_args(char *buf, size_t len, const char *tag, int cpu, const char *vdev)
{
	const char *extra = getenv("T_DPDK_EAL_EXTRA"); /* e.g. --log-level=pmd.net.memif:debug */

	snprintf(buf, len,
		 "--no-pci --no-huge --no-shconf --no-telemetry -m 128 --file-prefix=sp-%s-%d "
		 "-l %d --log-level=*:warning --vdev=%s %s",
		 tag, (int)getpid(), cpu, vdev, extra ? extra : "");
}

static inline int
t_dpdk_rm_cb(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

/* Removes the private runtime directory made by t_dpdk_rundir(). */
static inline void
t_dpdk_rundir_rm(const char *dir)
{
	if (dir && dir[0])
		(void)nftw(dir, t_dpdk_rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

static char t_dpdk_rundir_made[64];

static inline void
t_dpdk_rundir_atexit(void)
{
	t_dpdk_rundir_rm(t_dpdk_rundir_made);
}

/*
 * Creates a private RUNTIME_DIRECTORY for this process (and its children);
 * it is removed at exit() too, so a failed assertion leaves nothing behind.
 */
static inline int
t_dpdk_rundir(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/sp-dpdk-run-XXXXXX");
	if (!mkdtemp(dir))
		return -errno;
	if (!t_dpdk_rundir_made[0])
		atexit(t_dpdk_rundir_atexit);
	snprintf(t_dpdk_rundir_made, sizeof(t_dpdk_rundir_made), "%s", dir);
	return setenv("RUNTIME_DIRECTORY", dir, 1) == 0 ? 0 : -errno;
}

/* Picks the @k-th CPU this process may run on (wrapping), for -l and taskset. */
static inline int
t_dpdk_cpu(int k)
{
	cpu_set_t set;
	int cpus[CPU_SETSIZE];
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n ? cpus[k % n] : 0;
}

struct t_child {
	pid_t pid;
	int out; /* read end of the child's stdout */
};

/* Starts @argv[0] with stdout on a pipe; stderr is inherited. Return: 0 or -errno. */
static inline int
t_spawn(char *const argv[], struct t_child *c)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	fflush(NULL);
	c->pid = fork();
	if (c->pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -errno;
	}
	if (c->pid == 0) {
		/* A driver that dies (a failed assertion, a timeout) takes its peers with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], 1);
		execv(argv[0], argv);
		perror(argv[0]);
		_exit(127);
	}
	close(fds[1]);
	c->out = fds[0];
	return 0;
}

/*
 * Reads one line from the child's stdout into @buf within @timeout_ms.
 * Return: line length, 0 on EOF, -ETIMEDOUT.
 */
static inline int
t_child_line(struct t_child *c, char *buf, size_t len, int timeout_ms)
{
	size_t n = 0;

	while (n + 1 < len) {
		struct pollfd pfd = {.fd = c->out, .events = POLLIN};
		ssize_t r;

		if (poll(&pfd, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		r = read(c->out, buf + n, 1);
		if (r <= 0)
			break;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return (int)n;
}

/* Waits for the child; Return: the wait status. Kills it after @timeout_ms. */
static inline int
t_child_wait(struct t_child *c, int timeout_ms)
{
	int st = 0;

	for (int ms = 0; ms < timeout_ms; ms += 5) {
		if (waitpid(c->pid, &st, WNOHANG) == c->pid)
			goto done;
		usleep(5000);
	}
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &st, 0);
done:
	if (c->out >= 0)
		close(c->out);
	c->out = -1;
	return st;
}

#endif /* SP_TESTS_DPDK_TEST_H */
