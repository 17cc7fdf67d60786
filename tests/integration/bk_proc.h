/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bk_proc.h - start, signal and stop a real sprocket-broker process for the
 * integration tests (test code, not a library).
 *
 * The broker runs with a private store under /tmp, its log in that dir, the
 * udp backend on 127.0.0.1 unless the caller's args say otherwise, and a
 * dataplane base port picked per test process. Readiness is the "ready" log
 * line.
 */
#ifndef SP_TESTS_BK_PROC_H
#define SP_TESTS_BK_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct bk_proc {
	pid_t pid;
	char dir[128];	   /* store root and log */
	uint16_t dp_port;  /* dataplane base port */
	uint16_t rmt_port; /* remoting TCP port, from the "ready" line */
};

/*
 * bk_start() - run sprocket-broker with @args ("--key=value", NULL-terminated)
 * after the defaults (store in a new /tmp dir unless @p->dir is set, so a
 * restart reuses it; dataplanePort = @p->dp_port or a free-looking one;
 * listenPort=0: the kernel picks the remoting port, read into @p->rmt_port).
 * Return: 0 once "ready" is logged (30 s at most), -EIO otherwise (log printed).
 */
int bk_start(const char *bin, const char *const *args, struct bk_proc *p);

/* SIGTERM and wait (30 s, then SIGKILL). Return: the exit status, -1 if killed. */
int bk_stop(struct bk_proc *p);

/* SIGKILL and reap. */
void bk_kill(struct bk_proc *p);

/* Stop if running and remove the dir. */
void bk_cleanup(struct bk_proc *p);

/* Return: whether the broker's log contains @needle. */
bool bk_log_has(const struct bk_proc *p, const char *needle);

#endif /* SP_TESTS_BK_PROC_H */
