// SPDX-License-Identifier: Apache-2.0
/* test_log.c - levels, format, rate limiting; output captured through a pipe. */
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

static int pipefd[2];
static char out[65536];

static void
capture(void)
{
	T_ASSERT(pipe(pipefd) == 0);
	T_ASSERT(fcntl(pipefd[0], F_SETFL, O_NONBLOCK) == 0);
	log_set_fd(pipefd[1]);
}

static size_t
drain(void)
{
	ssize_t n = read(pipefd[0], out, sizeof(out) - 1);

	out[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

static int
count_lines(void)
{
	int n = 0;

	for (char *p = out; *p; p++)
		n += *p == '\n';
	return n;
}

static int evaluated;

static int
side_effect(void)
{
	return ++evaluated;
}

static void
test_levels_and_format(void)
{
	enum log_level lvl;

	capture();
	log_set_level(LOG_LVL_WARN);
	log_info("test.log", "hidden %d", side_effect());
	T_ASSERT_EQ(evaluated, 0); /* arguments not evaluated below the level */
	T_ASSERT_EQ(drain(), 0);
	log_warn("test.log", "seg %u offset %lu", 3u, 4096ul);
	drain();
	T_ASSERT(strstr(out, " W test.log: seg 3 offset 4096\n") != NULL);
	T_ASSERT(out[4] == '-' && out[10] == 'T'); /* ISO-8601 timestamp first */

	T_ASSERT_EQ(log_level_parse("debug", &lvl), 0);
	T_ASSERT_EQ(lvl, LOG_LVL_DEBUG);
	T_ASSERT_EQ(log_level_parse("loud", &lvl), -EINVAL);
}

static void
test_long_line_cut(void)
{
	char big[3000];

	capture();
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_err("test.log", "%s", big);
	T_ASSERT(drain() <= 1024);
	T_ASSERT(strstr(out, "...\n") != NULL);
	T_ASSERT_EQ(count_lines(), 1);
}

static void
test_ratelimited(void)
{
	capture();
	log_set_level(LOG_LVL_INFO);
	for (int i = 0; i < 1000; i++)
		log_warn_ratelimited("test.log", "flood %d", i);
	drain();
	T_ASSERT_EQ(count_lines(), LOG_RL_BURST);
}

/* Plain warnings and errors are limited per call site too; the flush prints the count. */
static void
test_flood_counted(void)
{
	uint64_t before = log_rl_flush();

	capture();
	drain();
	for (int i = 0; i < 500; i++)
		log_err("test.log", "index file %d: No space left on device", i);
	drain();
	T_ASSERT_EQ(count_lines(), LOG_RL_BURST);
	T_ASSERT_EQ(log_rl_flush(), before + 500 - LOG_RL_BURST);
	drain();
	T_ASSERT_EQ(count_lines(), 0); /* the window has not ended */
	log_rl_flush_at(clk_mono_ns() + LOG_RL_INTERVAL_NS);
	drain();
	T_ASSERT_EQ(count_lines(), 1);
	T_ASSERT(strstr(out, " E test.log: suppressed 490 more lines like: index file %d: No "
			     "space left on device\n") != NULL);
	log_rl_flush_at(clk_mono_ns() + 2 * LOG_RL_INTERVAL_NS);
	T_ASSERT_EQ(drain(), 0); /* said once */
}

static void
test_err_str(void)
{
	T_ASSERT_STREQ(err_str(-ENOENT), "No such file or directory");
	T_ASSERT_STREQ(err_str(ENOENT), "No such file or directory");
	T_ASSERT_STREQ(err_str(0), "success");
	T_ASSERT_STREQ(err_str(-100000), "unknown error");
}

/* A peer's string with a newline or an ANSI escape stays on one line, escaped. */
static void
test_escapes(void)
{
	capture();
	drain();
	log_warn("t.esc", "broker %s registered",
		 "evil\n2026-01-01T00:00:00.000Z I ctl.ns: forged");
	log_warn("t.esc", "name %s", "\x1b[31mred\x7f\t");
	T_ASSERT(drain() > 0);
	T_ASSERT_EQ(count_lines(), 2);
	T_ASSERT(strstr(out, "evil\\x0a2026-01-01") != NULL);
	T_ASSERT(strstr(out, "\\x1b[31mred\\x7f\\x09\n") != NULL);
	T_ASSERT(strchr(out, 0x1b) == NULL);
}

static bool
file_has(const char *path, const char *needle)
{
	char text[4096];
	size_t n;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return false;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return strstr(text, needle) != NULL;
}

/* logFile: appended; after a rename (logrotate), log_reopen() writes to a new file at the path. */
static void
test_file_reopen(void)
{
	char dir[] = "/tmp/sp-log-XXXXXX";
	char path[64];
	char moved[64];
	char cmd[96];
	FILE *f;

	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/d.log", dir);
	snprintf(moved, sizeof(moved), "%s/d.log.1", dir);
	T_ASSERT_EQ(log_reopen(), -ENOENT); /* no log file yet: nothing to reopen */
	T_ASSERT(log_file_path() == NULL);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fputs("earlier\n", f);
	fclose(f);
	T_ASSERT_EQ(log_open_file(path), 0);
	T_ASSERT_STREQ(log_file_path(), path);
	log_info("t.log", "line one");
	T_ASSERT(file_has(path, "earlier\n")); /* appended, not truncated */
	T_ASSERT(file_has(path, "I t.log: line one"));
	T_ASSERT_EQ(rename(path, moved), 0);
	log_info("t.log", "line two");
	T_ASSERT(file_has(moved, "line two")); /* until reopened, the old file */
	T_ASSERT_EQ(log_reopen(), 0);
	log_info("t.log", "line three");
	T_ASSERT(file_has(path, "line three"));
	T_ASSERT(!file_has(path, "line two"));
	T_ASSERT(!file_has(moved, "line three"));
	log_reopen_said("t.log");
	T_ASSERT(file_has(path, "SIGHUP: log file"));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	T_ASSERT(system(cmd) == 0);
}

T_MAIN(T_CASE(test_levels_and_format), T_CASE(test_long_line_cut), T_CASE(test_ratelimited),
       T_CASE(test_flood_counted), T_CASE(test_err_str), T_CASE(test_escapes),
       T_CASE(test_file_reopen))
