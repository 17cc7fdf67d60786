/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - levelled, tagged logging for control threads.
 *
 * Lines look like "2026-11-30T18:46:13.123Z W store.clog: fdatasync(seg 3) failed: ..."
 * and are written to the log fd (stderr by default) with one write(2) so
 * lines from several threads never interleave. The level is checked before
 * any argument is evaluated. Dataplane cores never call these (docs/style.md 9.4):
 * they bump counters, and control formats.
 *
 * Errors and warnings are rate-limited per call site (a repeating line is
 * what a flood or a failing disk produces): at most LOG_RL_BURST lines per
 * LOG_RL_INTERVAL_NS, then one "suppressed N" summary, printed by the site's
 * next line after the window or by log_rl_flush(), which daemons call once a
 * second and at exit. The *_ratelimited names do the same at any level.
 */
#ifndef SP_COMMON_LOG_H
#define SP_COMMON_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"

enum log_level {
	LOG_LVL_ERR = 0,
	LOG_LVL_WARN = 1,
	LOG_LVL_INFO = 2,
	LOG_LVL_DEBUG = 3,
};

#define LOG_RL_BURST 10
#define LOG_RL_INTERVAL_NS 5000000000ull

/* Per call site state of a rate-limited log statement. */
struct log_rl {
	_Atomic uint64_t window_start_ns;
	_Atomic uint32_t in_window;
	_Atomic uint32_t suppressed;
	/* set on the first suppression, then on the list log_rl_flush() walks */
	_Atomic bool listed;
	int lvl;
	const char *tag;
	const char *fmt;
	struct log_rl *next;
};

extern _Atomic int log_level_cur;

/* Context: any thread. Sets the most verbose level that is printed. */
void log_set_level(enum log_level lvl);

/* Return: 0, or -EINVAL when @name is not err|warn|info|debug. */
MUST_CHECK int log_level_parse(const char *name, enum log_level *out);
/* "err", "warn", "info" or "debug" (what log_level_parse() reads). */
const char *log_level_name(enum log_level lvl);

/*
 * log_rl_flush() - print the "suppressed N" summary of every rate-limited
 * site whose window has ended. Context: any control thread; cheap when
 * nothing was suppressed. Return: lines suppressed so far in all (a metric).
 */
uint64_t log_rl_flush(void);
/* log_rl_flush() as if the clock read @now_ns (tests). */
uint64_t log_rl_flush_at(uint64_t now_ns);

/* Context: startup. Redirects output to @fd (default 2). */
void log_set_fd(int fd);

/*
 * log_open_file() - log lines go to @path from now on, appended (created
 * 0644 when missing). Context: startup, before other threads log.
 * Return: 0, -ENAMETOOLONG, -errno of open(2) (output is then unchanged).
 */
MUST_CHECK int log_open_file(const char *path);

/*
 * log_reopen() - open log_open_file()'s path again and write there from now
 * on (after logrotate moved the file). Context: one control thread at a
 * time, never a signal handler; other threads may log meanwhile.
 * Return: 0, -ENOENT when output is not a log file, -errno of open(2) or
 * dup2(2) (output stays on the old file).
 */
MUST_CHECK int log_reopen(void);

/* The path given to log_open_file(), NULL when logging to no file. */
const char *log_file_path(void);

/*
 * log_reopen_said() - a daemon's SIGHUP: log_reopen(), and one line under
 * @tag saying what happened (in the new file, or the old one on failure).
 * Context: as log_reopen().
 */
void log_reopen_said(const char *tag);

static inline bool
log_enabled(enum log_level lvl)
{
	return (int)lvl <= atomic_load_explicit(&log_level_cur, memory_order_relaxed);
}

void log_emit(enum log_level lvl, const char *tag, const char *fmt, ...) SP_PRINTF(3, 4);
void log_emit_rl(struct log_rl *rl, enum log_level lvl, const char *tag, const char *fmt, ...)
	SP_PRINTF(4, 5);

/**
 * log_raw_signal() - async-signal-safe write of a fixed string and a newline.
 *
 * Context: signal handlers only need this; it calls write(2) and nothing else.
 */
void log_raw_signal(const char *msg);

#define LOG__AT(lvl, tag, ...)                                                                     \
	do {                                                                                       \
		if (log_enabled(lvl))                                                              \
			log_emit(lvl, tag, __VA_ARGS__);                                           \
	} while (0)

#define LOG__RL(lvl, tag, ...)                                                                     \
	do {                                                                                       \
		static struct log_rl log__rl_;                                                     \
		if (log_enabled(lvl))                                                              \
			log_emit_rl(&log__rl_, lvl, tag, __VA_ARGS__);                             \
	} while (0)

#define log_err(tag, ...) LOG__RL(LOG_LVL_ERR, tag, __VA_ARGS__)
#define log_warn(tag, ...) LOG__RL(LOG_LVL_WARN, tag, __VA_ARGS__)
#define log_info(tag, ...) LOG__AT(LOG_LVL_INFO, tag, __VA_ARGS__)
#define log_debug(tag, ...) LOG__AT(LOG_LVL_DEBUG, tag, __VA_ARGS__)

#define log_err_ratelimited(tag, ...) LOG__RL(LOG_LVL_ERR, tag, __VA_ARGS__)
#define log_warn_ratelimited(tag, ...) LOG__RL(LOG_LVL_WARN, tag, __VA_ARGS__)
#define log_info_ratelimited(tag, ...) LOG__RL(LOG_LVL_INFO, tag, __VA_ARGS__)

#endif /* SP_COMMON_LOG_H */
