// SPDX-License-Identifier: Apache-2.0
/*
 * ns_client.c - see ns_client.h. Blocking, one request at a time unless the
 * caller pipelines with nsc_send()/nsc_recv(); timeouts are generous because
 * CI boxes stall, and tests never assert on timing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ns_client.h"

int
nsc_connect(uint16_t port, struct ns_client *c)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int one = 1;

	memset(c, 0, sizeof(*c));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int rc = -errno;

		close(c->fd);
		c->fd = -1;
		return rc;
	}
	(void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

void
nsc_close(struct ns_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->rbuf);
	free(c->scratch);
	c->rbuf = NULL;
	c->scratch = NULL;
}

int
nsc_send_raw(struct ns_client *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
nsc_send(struct ns_client *c, int32_t code, int32_t flag, int serialize, const char *const *ext,
	 const void *body, size_t body_len)
{
	struct wire_rem_cmd *cmd = calloc(1, sizeof(*cmd));
	size_t cap = 4096;
	uint8_t *hdr;
	size_t n;
	int rc;

	if (cmd == NULL)
		return -ENOMEM;
	cmd->code = code;
	cmd->opaque = ++c->opaque;
	cmd->flag = flag;
	cmd->version = WIRE_REM_VERSION_V4_9_8;
	cmd->language = WIRE_LANG_JAVA;
	cmd->serialize = (uint8_t)serialize;
	cmd->body = body;
	cmd->body_len = (uint32_t)body_len;
	for (size_t i = 0; ext != NULL && ext[i] != NULL; i += 2) {
		rc = wire_rem_ext_add(cmd, ext[i], ext[i + 1]);
		if (rc != 0)
			goto out;
		cap += (strlen(ext[i]) + strlen(ext[i + 1])) * 6;
	}
	hdr = malloc(cap);
	rc = hdr == NULL ? -ENOMEM : wire_rem_encode_header(cmd, hdr, cap, &n);
	if (rc == 0)
		rc = nsc_send_raw(c, hdr, n);
	if (rc == 0 && body_len > 0)
		rc = nsc_send_raw(c, body, body_len);
	free(hdr);
	if (rc == 0)
		rc = cmd->opaque;
out:
	free(cmd);
	return rc;
}

int
nsc_recv(struct ns_client *c, int timeout_ms)
{
	size_t flen;
	int rc;

	/* Drop the previous frame. */
	if (c->consumed > 0) {
		memmove(c->rbuf, c->rbuf + c->consumed, c->rlen - c->consumed);
		c->rlen -= c->consumed;
		c->consumed = 0;
	}
	for (;;) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		ssize_t n;

		rc = c->rlen > 0 ? wire_rem_frame_len(c->rbuf, c->rlen, 1u << 30, &flen) : -EAGAIN;
		if (rc == 0)
			break;
		if (rc != -EAGAIN)
			return -EBADMSG;
		if (c->rcap - c->rlen < 65536) {
			size_t cap = c->rcap ? c->rcap * 2 : 1 << 17;
			uint8_t *nb = realloc(c->rbuf, cap);

			if (nb == NULL)
				return -ENOMEM;
			c->rbuf = nb;
			c->rcap = cap;
		}
		rc = poll(&pfd, 1, timeout_ms);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0 && errno != EINTR)
			return -errno;
		n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -ECONNRESET : -errno;
		}
		c->rlen += (size_t)n;
	}
	{
		size_t need = (size_t)(c->rbuf[5] << 16 | c->rbuf[6] << 8 | c->rbuf[7]) * 3 + 256;

		if (need > c->scratch_cap) {
			char *s = realloc(c->scratch, need);

			if (s == NULL)
				return -ENOMEM;
			c->scratch = s;
			c->scratch_cap = need;
		}
	}
	c->consumed = flen;
	rc = wire_rem_decode(c->rbuf, flen, &c->rsp, c->scratch, c->scratch_cap);
	return rc != 0 ? -EBADMSG : 0;
}

int
nsc_call(struct ns_client *c, int32_t code, const char *const *ext, const void *body,
	 size_t body_len)
{
	int opaque = nsc_send(c, code, 0, WIRE_REM_JSON, ext, body, body_len);
	int rc;

	if (opaque < 0)
		return opaque;
	do {
		/* Generous: a KV write fsyncs, and a CI disk under a crash test is slow. */
		rc = nsc_recv(c, 240000);
		if (rc != 0)
			return rc;
	} while (c->rsp.opaque != opaque);
	return c->rsp.code;
}

const char *
nsc_ext(const struct ns_client *c, const char *key)
{
	const struct wire_kv *kv = wire_rem_ext_get(&c->rsp, key);

	return kv != NULL ? kv->val : NULL;
}

bool
nsc_wait_closed(struct ns_client *c, int timeout_ms)
{
	for (;;) {
		int rc = nsc_recv(c, timeout_ms);

		if (rc == -ECONNRESET)
			return true;
		if (rc == -ETIMEDOUT)
			return false;
		if (rc != 0 && rc != -EBADMSG)
			return true;
	}
}

char *
nsc_register_body(const char *prefix, uint32_t n, int64_t ts, int64_t counter, size_t *len)
{
	size_t cap = 256 + (size_t)n * (220 + 2 * strlen(prefix));
	char *s = malloc(cap);
	size_t o;

	if (s == NULL)
		return NULL;
	o = (size_t)snprintf(s, cap,
			     "{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{"
			     "\"dataVersion\":{\"counter\":%" PRId64 ",\"timestamp\":%" PRId64 "},"
			     "\"topicConfigTable\":{",
			     counter, ts);
	for (uint32_t i = 0; i < n; i++) {
		o += (size_t)snprintf(s + o, cap - o,
				      "%s\"%s%u\":{\"order\":false,\"perm\":6,\"readQueueNums\":4,"
				      "\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":\"%s%u\","
				      "\"topicSysFlag\":0,\"writeQueueNums\":4}",
				      i ? "," : "", prefix, i, prefix, i);
	}
	o += (size_t)snprintf(s + o, cap - o, "}}}");
	*len = o;
	return s;
}

pid_t
tproc_spawn(const char *const *argv, const char *logpath)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		/*
		 * Dies with the test process that started it, and holds none of
		 * its pipes: a failed case must not leave a server that keeps
		 * meson waiting on the test's stdout until the suite times out.
		 */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
			_exit(127);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

off_t
tproc_log_size(const char *logpath)
{
	struct stat sb;

	return stat(logpath, &sb) == 0 ? sb.st_size : 0;
}

int
tproc_wait_line(pid_t *pid, const char *logpath, off_t start, const char *needle, char *line,
		size_t cap, const char *what)
{
	for (int i = 0; i < 3000; i++) {
		FILE *f = fopen(logpath, "r");
		int st;

		if (f != NULL && fseeko(f, start, SEEK_SET) == 0) {
			while (fgets(line, (int)cap, f) != NULL) {
				if (strstr(line, needle) != NULL) {
					fclose(f);
					return 0;
				}
			}
		}
		if (f != NULL)
			fclose(f);
		if (waitpid(*pid, &st, WNOHANG) == *pid) {
			*pid = 0;
			break;
		}
		usleep(10000);
	}
	fprintf(stderr, "%s did not come up; log %s:\n", what, logpath);
	{
		FILE *f = fopen(logpath, "r");

		while (f != NULL && fgets(line, (int)cap, f) != NULL)
			fputs(line, stderr);
		if (f != NULL)
			fclose(f);
	}
	tproc_kill(pid);
	return -EIO;
}

int
tproc_stop(pid_t *pid)
{
	int st = 0;

	if (*pid <= 0)
		return -1;
	kill(*pid, SIGTERM);
	for (int i = 0; i < 3000; i++) {
		if (waitpid(*pid, &st, WNOHANG) == *pid) {
			*pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		usleep(10000);
	}
	tproc_kill(pid);
	return -1;
}

void
tproc_kill(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, 0);
	*pid = 0;
}

void
tproc_rmdir(const char *dir, const char *prefix)
{
	char cmd[512];

	if (strncmp(dir, prefix, strlen(prefix)) != 0)
		return;
	/*
	 * A broker killed by the test (or by the harness when a test failed)
	 * leaves its write-behind buffers in storeBufferDir: the store's
	 * bufdir file names them (a clean stop removes its own).
	 */
	snprintf(cmd, sizeof(cmd),
		 "for f in $(find '%s' -name bufdir 2>/dev/null); do b=$(cat \"$f\"); "
		 "case \"$b\" in /dev/shm/sprocket-*) rm -rf \"$b\";; esac; done; rm -rf '%s'",
		 dir, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

bool
tproc_log_has(const char *logpath, const char *needle)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(logpath, "r");

	while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	if (f != NULL)
		fclose(f);
	return found;
}

int
nsp_start(const char *bin, const char *dir, const char *const *args, struct ns_proc *p)
{
	char kv[128];
	char logpath[128];
	const char *argv[32];
	int argc = 0;
	char line[4096];
	off_t start;
	const char *m;

	memset(p, 0, sizeof(*p));
	if (dir != NULL) {
		snprintf(p->dir, sizeof(p->dir), "%s", dir);
	} else {
		snprintf(p->dir, sizeof(p->dir), "/tmp/sp-ns-XXXXXX");
		if (mkdtemp(p->dir) == NULL)
			return -errno;
	}
	snprintf(kv, sizeof(kv), "--kvConfigPath=%s/data/kvConfig.json", p->dir);
	snprintf(logpath, sizeof(logpath), "%s/namesrv.log", p->dir);
	start = tproc_log_size(logpath);
	argv[argc++] = bin;
	argv[argc++] = "--listenPort=0";
	argv[argc++] = "--bindAddress=127.0.0.1";
	argv[argc++] = kv;
	for (size_t i = 0; args != NULL && args[i] != NULL && argc < 30; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;

	p->pid = tproc_spawn(argv, logpath);
	if (p->pid < 0)
		return (int)p->pid;
	/* the port, from "listening on ADDR:PORT" (any bind address: 0.0.0.0 in another namespace) */
	if (tproc_wait_line(&p->pid, logpath, start, "listening on ", line, sizeof(line),
			    "sprocket-namesrv") != 0)
		return -EIO;
	m = strchr(strstr(line, "listening on "), ':');
	if (m == NULL) {
		tproc_kill(&p->pid);
		return -EIO;
	}
	p->port = (uint16_t)atoi(m + 1);
	return 0;
}

int
nsp_stop(struct ns_proc *p)
{
	return tproc_stop(&p->pid);
}

void
nsp_cleanup(struct ns_proc *p)
{
	if (p->pid > 0)
		nsp_stop(p);
	tproc_rmdir(p->dir, "/tmp/sp-ns-");
}

bool
nsp_log_has(const struct ns_proc *p, const char *needle)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/namesrv.log", p->dir);
	return tproc_log_has(path, needle);
}
