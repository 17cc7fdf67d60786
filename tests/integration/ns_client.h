/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ns_client.h - a blocking remoting client and a sprocket-namesrv launcher,
 * for the integration tests and bench_namesrv (test code, not a library).
 *
 * The client speaks frames through the project's own codec (wire/remoting.h)
 * over a loopback TCP connection. The launcher runs the real binary on
 * 127.0.0.1 with listenPort=0, a private data dir under /tmp, and its log in
 * that dir, and learns the port from the "listening on" log line.
 */
#ifndef SP_TESTS_NS_CLIENT_H
#define SP_TESTS_NS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire/remoting.h"

struct ns_client {
	int fd;
	int32_t opaque;
	uint8_t *rbuf; /* the last response frame lives here */
	size_t rlen;
	size_t rcap;
	size_t consumed; /* bytes of rbuf used by the last frame */
	char *scratch;
	size_t scratch_cap;
	struct wire_rem_cmd rsp; /* the last response; valid until the next receive */
};

/* Return: 0 or -errno. */
int nsc_connect(uint16_t port, struct ns_client *c);
void nsc_close(struct ns_client *c);

/* Send raw bytes. Return: 0 or -errno. */
int nsc_send_raw(struct ns_client *c, const void *buf, size_t len);

/**
 * nsc_send() - send one request. @ext: "key", "value" pairs, NULL-terminated.
 * @flag: WIRE_REM_FLAG_ONEWAY or 0. @serialize: WIRE_REM_JSON or WIRE_REM_ROCKETMQ.
 * Return: the opaque used, or -errno.
 */
int nsc_send(struct ns_client *c, int32_t code, int32_t flag, int serialize, const char *const *ext,
	     const void *body, size_t body_len);

/* Receive one frame into c->rsp. Return: 0, -ETIMEDOUT, -ECONNRESET on EOF, -EBADMSG. */
int nsc_recv(struct ns_client *c, int timeout_ms);

/* Send and wait for the response with the same opaque. Return: the response code or -errno. */
int nsc_call(struct ns_client *c, int32_t code, const char *const *ext, const void *body,
	     size_t body_len);

/* Return: the response extField @key as a string (static buffer), or NULL. */
const char *nsc_ext(const struct ns_client *c, const char *key);

/* Return: true when the server closed the connection within @timeout_ms. */
bool nsc_wait_closed(struct ns_client *c, int timeout_ms);

/**
 * nsc_register_body() - RegisterBrokerBody JSON with @n topics named
 * "<prefix><i>" (4 queues, perm 6), data version (@ts, @counter).
 * Return: malloc'd, NUL-terminated; *@len its length.
 */
char *nsc_register_body(const char *prefix, uint32_t n, int64_t ts, int64_t counter, size_t *len);

/* A running sprocket-namesrv. */
/*
 * Daemon processes of the integration tests (sprocket-namesrv here,
 * sprocket-broker in bk_proc.c): one launcher for both.
 */

/* Fork and exec @argv with stdout and stderr appended to @logpath; the child
 * dies with the test (PR_SET_PDEATHSIG). Return: its pid, or -errno. */
pid_t tproc_spawn(const char *const *argv, const char *logpath);

/* Size of @logpath now, 0 when missing (a restart appends: look past it). */
off_t tproc_log_size(const char *logpath);

/*
 * tproc_wait_line() - wait (30 s) for a line of @logpath past @start that
 * holds @needle and copy it to @line. On failure print the log under "@what
 * did not come up", kill the process and set *@pid to 0.
 * Return: 0, -EIO.
 */
int tproc_wait_line(pid_t *pid, const char *logpath, off_t start, const char *needle, char *line,
		    size_t cap, const char *what);

/* SIGTERM, wait (30 s, then SIGKILL). Return: the exit status, -1 if killed or not running. */
int tproc_stop(pid_t *pid);

/* SIGKILL and reap. */
void tproc_kill(pid_t *pid);

/* Remove @dir when it starts with @prefix (a test's private /tmp dir). */
void tproc_rmdir(const char *dir, const char *prefix);

/* Return: whether a line of @logpath holds @needle. */
bool tproc_log_has(const char *logpath, const char *needle);

struct ns_proc {
	pid_t pid;
	uint16_t port;
	char dir[64]; /* private data dir; log in dir/namesrv.log */
};

/**
 * nsp_start() - run @bin with listenPort=0, bindAddress=127.0.0.1,
 * kvConfigPath=<dir>/kvConfig.json and @args (NULL-terminated "--k=v").
 * @dir: data dir to reuse, or NULL for a fresh one.
 * Return: 0, or -errno (the log is printed when it does not come up).
 */
int nsp_start(const char *bin, const char *dir, const char *const *args, struct ns_proc *p);

/* SIGTERM and wait. Return: exit status (0 clean), or -1 when killed by a signal / timed out. */
int nsp_stop(struct ns_proc *p);

/* Remove the data dir. */
void nsp_cleanup(struct ns_proc *p);

/* Return: true when the server's log contains @needle. */
bool nsp_log_has(const struct ns_proc *p, const char *needle);

#endif /* SP_TESTS_NS_CLIENT_H */
