// SPDX-License-Identifier: Apache-2.0
/*
 * log.c - formatting and emitting log lines.
 *
 * A line is formatted into a stack buffer and written with a single write(2):
 * POSIX makes writes to a pipe atomic up to PIPE_BUF and in practice a file
 * opened O_APPEND or a tty does not interleave single writes either. Lines
 * longer than the buffer are cut and end in "...". Nothing here allocates.
 *
 * Messages carry strings from the network (broker and group names, client
 * ids, addresses): every control character and DEL in the message becomes
 * \xNN, so no peer can forge a line (a newline) or drive an operator's
 * terminal (ANSI escapes). A line is always exactly one line.
 *
 * A log file (the daemons' logFile) is opened O_APPEND; log_reopen() opens
 * the path again and dup2()s the new file over the same descriptor number,
 * so a thread writing meanwhile writes whole lines to either file, never
 * to a closed or reused descriptor (logrotate moves the file, then sends
 * SIGHUP).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

#define LOG_LINE_MAX 1024

_Atomic int log_level_cur = LOG_LVL_INFO;
static _Atomic int log_fd = 2;

static const char log_lvl_chr[] = {'E', 'W', 'I', 'D'};

void
log_set_level(enum log_level lvl)
{
	atomic_store_explicit(&log_level_cur, (int)lvl, memory_order_relaxed);
}

static const char *const names[] = {"err", "warn", "info", "debug"};

const char *
log_level_name(enum log_level lvl)
{
	return (unsigned)lvl < ARRAY_SIZE(names) ? names[lvl] : "info";
}

int
log_level_parse(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (strcmp(name, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void
log_set_fd(int fd)
{
	atomic_store_explicit(&log_fd, fd, memory_order_relaxed);
}

/* The log file's path: written at startup, then read by log_reopen() only. */
static char log_path[PATH_MAX];

static int
log_file_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);

	return fd < 0 ? -errno : fd;
}

int
log_open_file(const char *path)
{
	int fd;

	if (strlen(path) >= sizeof(log_path))
		return -ENAMETOOLONG;
	fd = log_file_open(path);
	if (fd < 0)
		return fd;
	memcpy(log_path, path, strlen(path) + 1);
	log_set_fd(fd);
	return 0;
}

int
log_reopen(void)
{
	int cur = atomic_load_explicit(&log_fd, memory_order_relaxed);
	int fd;

	if (log_path[0] == '\0')
		return -ENOENT;
	fd = log_file_open(log_path);
	if (fd < 0)
		return fd;
	/* Atomic: a concurrent write(2) goes whole to the old file or the new one. */
	if (dup2(fd, cur) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	close(fd);
	return 0;
}

const char *
log_file_path(void)
{
	return log_path[0] != '\0' ? log_path : NULL;
}

void
log_reopen_said(const char *tag)
{
	int rc = log_reopen();

	if (rc == 0)
		log_info(tag, "SIGHUP: log file %s reopened", log_path);
	else if (rc == -ENOENT)
		log_info(tag, "SIGHUP: no logFile to reopen (logging to stderr); ignored");
	else
		log_err(tag, "SIGHUP: cannot reopen log file %s: %s; still writing to the old one",
			log_path, strerror(-rc));
}

SP_PRINTF(3, 0)
static void
log_vemit(enum log_level lvl, const char *tag, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	char msg[LOG_LINE_MAX];
	struct timespec ts;
	struct tm tm;
	size_t n;
	int r;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	r = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %c %s: ", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000, log_lvl_chr[lvl], tag);
	n = r > 0 ? (size_t)r : 0;
	r = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (r > 0) {
		size_t m = SP_MIN((size_t)r, sizeof(msg) - 1);

		for (size_t i = 0; i < m && n < sizeof(line) - 1; i++) {
			unsigned char ch = (unsigned char)msg[i];

			if (ch >= 0x20 && ch != 0x7f) {
				line[n++] = (char)ch;
			} else if (n + 4 < sizeof(line)) {
				static const char hex[] = "0123456789abcdef";

				line[n++] = '\\';
				line[n++] = 'x';
				line[n++] = hex[ch >> 4];
				line[n++] = hex[ch & 15];
			} else {
				n = sizeof(line) - 1;
			}
		}
		if ((size_t)r >= sizeof(msg))
			n = sizeof(line) - 1; /* cut: ends in "..." */
	}
	if (n >= sizeof(line) - 1) {
		n = sizeof(line) - 1;
		memcpy(line + n - 3, "...", 3);
	}
	line[n++] = '\n';
	/* A failed log write has nowhere to be reported; dropping it is the policy. */
	if (write(atomic_load_explicit(&log_fd, memory_order_relaxed), line, n) < 0)
		return;
}

void
log_emit(enum log_level lvl, const char *tag, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(lvl, tag, fmt, ap);
	va_end(ap);
}

/* Sites that suppressed a line, pushed once each, never removed (they are static). */
static _Atomic(struct log_rl *) rl_list;
static _Atomic uint64_t rl_suppressed_total;

static void
rl_summary(struct log_rl *rl, uint32_t dropped)
{
	log_emit((enum log_level)rl->lvl, rl->tag, "suppressed %u more lines like: %s", dropped,
		 rl->fmt);
}

void
log_emit_rl(struct log_rl *rl, enum log_level lvl, const char *tag, const char *fmt, ...)
{
	uint64_t now = clk_mono_ns();
	uint64_t start = atomic_load_explicit(&rl->window_start_ns, memory_order_relaxed);
	va_list ap;

	/*
	 * Relaxed everywhere: the counters only steer how much is printed; a race
	 * between two threads at a window edge prints one line more or less.
	 */
	if (start == 0 || now - start >= LOG_RL_INTERVAL_NS) {
		uint32_t dropped =
			atomic_exchange_explicit(&rl->suppressed, 0, memory_order_relaxed);

		atomic_store_explicit(&rl->window_start_ns, now, memory_order_relaxed);
		atomic_store_explicit(&rl->in_window, 0, memory_order_relaxed);
		if (dropped) /* the call's own arguments: the site's fields may not be set yet */
			log_emit(lvl, tag, "suppressed %u more lines like: %s", dropped, fmt);
	}
	if (atomic_fetch_add_explicit(&rl->in_window, 1, memory_order_relaxed) >= LOG_RL_BURST) {
		atomic_fetch_add_explicit(&rl->suppressed, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&rl_suppressed_total, 1, memory_order_relaxed);
		if (!atomic_exchange_explicit(&rl->listed, true, memory_order_relaxed)) {
			struct log_rl *head = atomic_load_explicit(&rl_list, memory_order_relaxed);

			/* read by log_rl_flush() only after the push's release */
			rl->lvl = (int)lvl;
			rl->tag = tag;
			rl->fmt = fmt;
			do
				rl->next = head;
			while (!atomic_compare_exchange_weak_explicit(
				&rl_list, &head, rl, memory_order_release, memory_order_relaxed));
		}
		return;
	}
	va_start(ap, fmt);
	log_vemit(lvl, tag, fmt, ap);
	va_end(ap);
}

uint64_t
log_rl_flush(void)
{
	return log_rl_flush_at(clk_mono_ns());
}

uint64_t
log_rl_flush_at(uint64_t now)
{
	/* acquire: pairs with the push's release (tag, fmt, next are set) */
	for (struct log_rl *rl = atomic_load_explicit(&rl_list, memory_order_acquire); rl;
	     rl = rl->next) {
		uint64_t start = atomic_load_explicit(&rl->window_start_ns, memory_order_relaxed);
		uint32_t dropped;

		if (atomic_load_explicit(&rl->suppressed, memory_order_relaxed) == 0 ||
		    now - start < LOG_RL_INTERVAL_NS)
			continue;
		dropped = atomic_exchange_explicit(&rl->suppressed, 0, memory_order_relaxed);
		if (dropped)
			rl_summary(rl, dropped);
	}
	return atomic_load_explicit(&rl_suppressed_total, memory_order_relaxed);
}

void
log_raw_signal(const char *msg)
{
	int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);

	if (write(fd, msg, strlen(msg)) < 0 || write(fd, "\n", 1) < 0)
		return;
}

const char *
err_str(int err)
{
	if (err < 0)
		err = -err;
	/* strerror() may return a shared buffer only for unknown values. */
	if (err == 0)
		return "success";
	if (err > 4095)
		return "unknown error";
	return strerror(err);
}

void
sp_assert_fail(const char *expr, const char *file, int line)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "assertion failed: %s (%s:%d)", expr, file, line);

	if (n > 0)
		log_raw_signal(buf);
	abort();
}
