// SPDX-License-Identifier: Apache-2.0
/*
 * test_tw.c - the timing wheel (store/tw.c): every entry comes back once,
 * never before it is due and in the first expiry at or after its due
 * millisecond, across all three levels, clamped far entries, late entries,
 * a full output and long jumps of the clock; far entries are on disk.
 */
#include <dirent.h>
#include <stdlib.h>

#include "harness.h"
#include "store/tw.h"

static char dir[64];

static void
mkdir_tmp(void)
{
	strcpy(dir, "/tmp/sp-tw-XXXXXX");
	T_ASSERT(mkdtemp(dir) != NULL);
}

static void
rm_tmp(void)
{
	T_ASSERT_EQ(rmdir(dir), 0); /* tw_close() removed its files */
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Level files in dir: entries of the far levels are on disk. */
static size_t
files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	T_ASSERT(d != NULL);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] == 'l';
	closedir(d);
	return n;
}

#define N 200000

static void
test_every_entry_once_on_time(void)
{
	static int64_t due[N];
	static uint8_t seen[N];
	static struct tw_ent out[300];
	const int64_t t0 = 1700000000123; /* not on a block boundary */
	uint64_t s = 88172645463325252ull, back = 0, late = 0;
	int64_t now = t0, last = t0 - 1;
	size_t got = 0;
	struct tw *w;

	mkdir_tmp();
	T_ASSERT_EQ(tw_open(dir, t0, &w), 0);
	for (size_t i = 0; i < N; i++) {
		uint64_t r = rnd(&s) % 100;
		struct tw_ent e = {.phys = (int64_t)i, .size = 1};

		if (r < 40) /* level 0/1: within 20 s */
			due[i] = t0 + (int64_t)(rnd(&s) % 20000);
		else if (r < 70) /* level 1/2: within 2 h */
			due[i] = t0 + (int64_t)(rnd(&s) % 7200000);
		else if (r < 95) /* level 2: within 70 h */
			due[i] = t0 + (int64_t)(rnd(&s) % 252000000);
		else if (r < 98) /* beyond level 2: clamped, filed again */
			due[i] = t0 + 300ll * 3600000 + (int64_t)(rnd(&s) % 3600000);
		else /* already due */
			due[i] = t0 - (int64_t)(rnd(&s) % 1000);
		e.due_ms = due[i];
		T_ASSERT_EQ(tw_add(w, &e), 0);
	}
	T_ASSERT_EQ_U64(tw_pending(w), N);
	T_ASSERT(files() > 100);
	while (got < N || late > 0) {
		size_t n = tw_expire(w, now, out, sizeof(out) / sizeof(out[0]));

		for (size_t k = 0; k < n; k++) {
			size_t i = (size_t)out[k].phys;

			if (out[k].phys < 0) { /* a late add: due before the cursor, so now */
				T_ASSERT(late > 0);
				late--;
				continue;
			}
			T_ASSERT(i < N && !seen[i]);
			seen[i] = 1;
			T_ASSERT_EQ(out[k].due_ms, due[i]);
			T_ASSERT(due[i] <= now);
			/* not late: the expiry before this one ran before its due */
			T_ASSERT(due[i] > last || due[i] <= t0);
			got++;
		}
		T_ASSERT_EQ_U64(tw_pending(w), N - got + late);
		if (n == sizeof(out) / sizeof(out[0]))
			continue; /* full: the same now again */
		T_ASSERT(tw_cursor(w) == now + 1);
		T_ASSERT_EQ(late, 0);
		last = now;
		/* steps of 1 ms to 10 minutes, and a late add now and then */
		now += (int64_t)(1 + rnd(&s) % (rnd(&s) % 4 == 0 ? 600000 : 50));
		if (back < 100) {
			struct tw_ent e = {.phys = -1, .due_ms = last - 5, .size = 2};

			T_ASSERT_EQ(tw_add(w, &e), 0);
			late++;
			back++;
		}
	}
	T_ASSERT_EQ_U64(tw_pending(w), 0);
	T_ASSERT_EQ_U64(tw_lost(w), 0);
	tw_close(w);
	rm_tmp();
}

static void
test_open_empties_the_directory(void)
{
	struct tw_ent e = {.phys = 7, .size = 1};
	struct tw_ent out[4];
	struct tw *w;

	mkdir_tmp();
	T_ASSERT_EQ(tw_open(dir, 1000, &w), 0);
	for (int i = 0; i < 200; i++) {
		e.due_ms = 1000 + 3600000; /* level 2: spilled to a file past 64 */
		T_ASSERT_EQ(tw_add(w, &e), 0);
	}
	T_ASSERT(files() >= 1);
	/* A second wheel on the same directory (a restart) starts empty. */
	{
		struct tw *w2;

		T_ASSERT_EQ(tw_open(dir, 5000000, &w2), 0);
		T_ASSERT_EQ(files(), 0);
		T_ASSERT_EQ_U64(tw_pending(w2), 0);
		T_ASSERT_EQ(tw_expire(w2, 5000000 + 7200000, out, 4), 0);
		tw_close(w2);
	}
	tw_close(w);
	rm_tmp();
}

T_MAIN(T_CASE(test_every_entry_once_on_time), T_CASE(test_open_empties_the_directory))
