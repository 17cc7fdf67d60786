// SPDX-License-Identifier: Apache-2.0
/* test_fdlimit.c - the soft limit raised to the hard one; a connection cap that keeps a reserve. */
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "common/fdlimit.h"

static void
test_raise(void)
{
	struct rlimit rl;
	struct fdlim b;

	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= 64)
		return; /* nothing to raise to */
	rl.rlim_cur = 64;
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	fdlim_raise(&b);
	T_ASSERT_EQ(b.err, 0);
	T_ASSERT_EQ(b.soft_was, 64);
	T_ASSERT_EQ(b.soft, b.hard);
	T_ASSERT(b.soft > 64);
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	T_ASSERT_EQ((uint64_t)rl.rlim_cur, b.soft);
	T_ASSERT(b.open >= 3); /* stdin, stdout, stderr at least */
}

static void
test_open_count(void)
{
	uint32_t before = fdlim_open_count();
	int fds[5];

	for (int i = 0; i < 5; i++)
		T_ASSERT((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
	T_ASSERT_EQ(fdlim_open_count(), before + 5);
	for (int i = 0; i < 5; i++)
		close(fds[i]);
	T_ASSERT_EQ(fdlim_open_count(), before);
}

static void
test_conns(void)
{
	struct fdlim b = {.soft = 1024, .hard = 1024, .open = 20};

	T_ASSERT_EQ(fdlim_conns(&b, 65536, 256), 1024 - 20 - 256);
	T_ASSERT_EQ(fdlim_conns(&b, 100, 256), 100);
	b.soft = 200; /* nothing left after the reserve: one, not zero or a wrap */
	T_ASSERT_EQ(fdlim_conns(&b, 65536, 256), 1);
}

T_MAIN(T_CASE(test_raise), T_CASE(test_open_count), T_CASE(test_conns))
