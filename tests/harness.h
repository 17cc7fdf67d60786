/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harness.h - the unit test harness (header only).
 *
 * A test file defines functions `static void test_x(void)` and a
 * `T_MAIN(test_x, test_y, ...)`. Each test runs in a forked child (libuv
 * style) so a crash or an abort fails that test only and is reported with its
 * name; the parent prints one line per test and exits non-zero on any
 * failure. Set T_NOFORK=1 to run in-process under a debugger, T_ONLY=name to
 * run only the tests whose name has it.
 */
#ifndef SP_TESTS_HARNESS_H
#define SP_TESTS_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/compiler.h"
#include <unistd.h>

#define T_FAIL(...)                                                                                \
	do {                                                                                       \
		fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                    \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

#define T_ASSERT(cond)                                                                             \
	do {                                                                                       \
		if (!(cond))                                                                       \
			T_FAIL("assertion failed: %s", #cond);                                     \
	} while (0)

#define T_ASSERT_EQ(a, b)                                                                          \
	do {                                                                                       \
		long long t_a_ = (long long)(a);                                                   \
		long long t_b_ = (long long)(b);                                                   \
		if (t_a_ != t_b_)                                                                  \
			T_FAIL("%s == %s: %lld != %lld", #a, #b, t_a_, t_b_);                      \
	} while (0)

#define T_ASSERT_EQ_U64(a, b)                                                                      \
	do {                                                                                       \
		unsigned long long t_a_ = (unsigned long long)(a);                                 \
		unsigned long long t_b_ = (unsigned long long)(b);                                 \
		if (t_a_ != t_b_)                                                                  \
			T_FAIL("%s == %s: %llu != %llu", #a, #b, t_a_, t_b_);                      \
	} while (0)

#define T_ASSERT_STREQ(a, b)                                                                       \
	do {                                                                                       \
		const char *t_a_ = (a);                                                            \
		const char *t_b_ = (b);                                                            \
		if (t_a_ == NULL || t_b_ == NULL || strcmp(t_a_, t_b_) != 0)                       \
			T_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, t_a_ ? t_a_ : "(null)",       \
			       t_b_ ? t_b_ : "(null)");                                            \
	} while (0)

#define T_ASSERT_MEMEQ(a, b, n)                                                                    \
	do {                                                                                       \
		if (memcmp((a), (b), (n)) != 0)                                                    \
			T_FAIL("%s and %s differ in their first %zu bytes", #a, #b, (size_t)(n));  \
	} while (0)

struct t_case {
	const char *name;
	void (*fn)(void);
};

static inline int
t_run_all(const char *file, const struct t_case *cases, size_t n)
{
	const char *nofork = getenv("T_NOFORK");
	const char *only = getenv("T_ONLY"); /* run only the cases whose name has this */
	size_t failed = 0, ran = 0;

	for (size_t i = 0; i < n; i++) {
		int ok;

		if (only != NULL && only[0] && strstr(cases[i].name, only) == NULL)
			continue;
		ran++;
		if (nofork != NULL && nofork[0] == '1') {
			cases[i].fn();
			ok = 1;
		} else {
			int st = 0;
			pid_t pid;

			fflush(NULL);
			pid = fork();
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0) {
				cases[i].fn();
				fflush(NULL);
				_exit(0);
			}
			if (waitpid(pid, &st, 0) < 0) {
				perror("waitpid");
				return 1;
			}
			ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (WIFSIGNALED(st))
				fprintf(stderr, "%s: killed by signal %d\n", cases[i].name,
					WTERMSIG(st));
		}
		printf("%s %s/%s\n", ok ? "ok  " : "FAIL", file, cases[i].name);
		failed += !ok;
	}
	printf("%zu passed, %zu failed\n", ran - failed, failed);
	return failed ? 1 : 0;
}

#define T_CASE(fn)                                                                                 \
	{                                                                                          \
#fn, fn                                                                            \
	}
#define T_MAIN(...)                                                                                \
	int main(void)                                                                             \
	{                                                                                          \
		static const struct t_case t_cases_[] = {__VA_ARGS__};                             \
		return t_run_all(__FILE__, t_cases_, sizeof(t_cases_) / sizeof(t_cases_[0]));      \
	}

#endif /* SP_TESTS_HARNESS_H */
