// SPDX-License-Identifier: Apache-2.0
/*
 * bk_sizing_ctl.c - what the broker's queue count needs, said before it
 * bites (docs/operations.md, "Many queues").
 *
 * An idle queue holds no file, descriptor or mapping (docs/store.md, "Many
 * queues"): what grows with the queue count is memory, about BK_QUEUE_BYTES
 * a queue, idle or not. A queue that takes messages maps one ConsumeQueue
 * file per mapedFileSizeConsumeQueue of its units, and allocates that file
 * on disk. So at start, before the topics' queues are made:
 *  - memory the queues need past what the host (or its cgroup) has
 *    available refuses the start, naming what to change;
 *  - mappings (vm.max_map_count) and disk that could not hold a ConsumeQueue
 *    file for every queue are a warning with the figures: most queues of a
 *    large set stay idle, and a queue that cannot get its file answers
 *    SYSTEM_BUSY, logged with the sysctl to raise (store/cq.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "bk_ctl.h"
#include "bk_priv.h"
#include "common/config.h"
#include "common/log.h"
#include "store/io.h"

/*
 * Memory a queue costs, idle: bench/many_queues.sh measured 0.87 KB a queue
 * at 1,000,000 (topics table, registration snapshot, ConsumeQueue state).
 */
#define BK_QUEUE_BYTES 1024u
/* Mappings kept free for everything else (segments, buffers, libraries). */
#define BK_MAPS_RESERVE 4096

/* The number in @path (a cgroup file); 0: none or unreadable ("max" too). */
static uint64_t
read_u64(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;

	if (f == NULL)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* A memory cgroup's limit and usage: files @lim and @use in @root@cg. */
static void
cg_read(const char *root, const char *cg, const char *lim, const char *use, uint64_t *max,
	uint64_t *cur)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s%s/%s", root, cg, lim);
	*max = read_u64(path);
	snprintf(path, sizeof(path), "%s%s/%s", root, cg, use);
	*cur = read_u64(path);
}

/* What the process's memory cgroup (v2, else v1) still allows; 0: no limit known. */
static uint64_t
cgroup_room(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	uint64_t room = 0;

	if (f == NULL)
		return 0;
	while (room == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *nl = strchr(line, '\n');
		uint64_t max, cur;

		if (nl != NULL)
			*nl = '\0';
		if (strncmp(line, "0::", 3) == 0) {
			cg_read("/sys/fs/cgroup", line + 3, "memory.max", "memory.current", &max,
				&cur);
		} else if (strstr(line, ":memory:") != NULL) {
			cg_read("/sys/fs/cgroup/memory", strstr(line, ":memory:") + 8,
				"memory.limit_in_bytes", "memory.usage_in_bytes", &max, &cur);
		} else {
			continue;
		}
		/* v1 says "no limit" with a number near 2^63 */
		if (max > 0 && max < (1ULL << 60))
			room = max > cur ? max - cur : 1;
	}
	fclose(f);
	return room;
}

/* Bytes of memory available: MemAvailable, or less under a cgroup's limit; 0: unknown. */
static uint64_t
mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	uint64_t avail = 0;
	uint64_t room = cgroup_room();

	if (f != NULL) {
		while (fgets(line, sizeof(line), f) != NULL) {
			unsigned long long kb;

			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
				avail = (uint64_t)kb * 1024;
				break;
			}
		}
		fclose(f);
	}
	if (room > 0 && (avail == 0 || room < avail))
		avail = room;
	return avail;
}

int
bk_sizing_check(struct bk_ctl *x, uint64_t topics, uint64_t queues)
{
	uint64_t need = queues * BK_QUEUE_BYTES;
	uint64_t avail = mem_available();
	uint64_t file = (uint64_t)cfg_get_int(x->cfg, "mapedFileSizeConsumeQueue");
	const char *root = cfg_get_str(x->cfg, "storePathRootDir");
	struct statvfs v;
	long used;
	long max;

	if (avail > 0 && need > avail) {
		log_err(BK_TAG,
			"%" PRIu64 " topics with %" PRIu64 " queues in all need about %" PRIu64
			" MB of memory (about %u bytes a queue, idle or not), and %" PRIu64
			" MB are available: add memory, or spread the topics over more brokers "
			"(fewer topics, or fewer readQueueNums/writeQueueNums each); "
			"docs/operations.md, \"Many queues\"",
			topics, queues, need >> 20, BK_QUEUE_BYTES, avail >> 20);
		return -ENOMEM;
	}
	store_maps_count(&used, &max);
	if (max > 0 && used >= 0 && (uint64_t)(max - used) < queues + BK_MAPS_RESERVE)
		log_warn(BK_TAG,
			 "%" PRIu64
			 " queues: each that takes messages maps a ConsumeQueue file, and "
			 "vm.max_map_count %ld leaves room for about %ld (this process has %ld "
			 "mappings): past that, queues answer SYSTEM_BUSY; raise it to %" PRIu64
			 " (sysctl -w vm.max_map_count=%" PRIu64 ") if they may all take messages",
			 queues, max, SP_MAX(max - used - BK_MAPS_RESERVE, 0L), used,
			 queues + (uint64_t)used + BK_MAPS_RESERVE,
			 queues + (uint64_t)used + BK_MAPS_RESERVE);
	if (root != NULL && statvfs(root, &v) == 0 && file > 0) {
		uint64_t free_b = (uint64_t)v.f_bavail * v.f_frsize;

		if (queues * file > free_b)
			log_warn(BK_TAG,
				 "%" PRIu64
				 " queues: each that takes messages allocates a ConsumeQueue "
				 "file of %" PRIu64 " bytes (mapedFileSizeConsumeQueue), %" PRIu64
				 " GB if all do, and %s has %" PRIu64
				 " GB free: past that, disk space runs out (lower "
				 "mapedFileSizeConsumeQueue to fit)",
				 queues, file, (queues * file) >> 30, root, free_b >> 30);
	}
	log_info(BK_TAG,
		 "%" PRIu64 " topics, %" PRIu64 " queues: about %" PRIu64
		 " MB of memory; an idle queue holds no file, descriptor or mapping",
		 topics, queues, need >> 20);
	return 0;
}
