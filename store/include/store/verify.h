/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verify.h - an offline, read-only check of a store (`sprocket-broker
 * --verify`): every CommitLog record's size, magic, PHYSICALOFFSET and
 * BODYCRC, and every ConsumeQueue unit against the record it points at.
 * Nothing in the store is written, created or removed (docs/store.md,
 * "Damage").
 */
#ifndef SP_STORE_VERIFY_H
#define SP_STORE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/compiler.h"

struct store_verify_cfg {
	/* storePathRootDir: refused while a broker holds its lock (NULL: not checked) */
	const char *root;
	const char *clog_dir; /* <dir>/<shard>/<20-digit segment> */
	const char *cq_dir;   /* <dir>/<topic>/<qid>/<20-digit file> */
	uint32_t shards;
	uint64_t seg_size;
	/* the store's abort file: present, the last run was killed (NULL: not checked) */
	const char *abort_path;
};

/* What store_verify() found, over every shard and queue. */
struct store_verify_res {
	uint64_t segs;	     /* segment files read */
	uint64_t segs_odd;   /* missing between others, or not seg_size bytes long */
	uint64_t recs;	     /* valid records */
	uint64_t bad_spans;  /* damaged ranges in segments */
	uint64_t bad_bytes;  /* bytes in them */
	uint64_t units;	     /* ConsumeQueue units read */
	uint64_t units_bad;  /* units pointing into a damaged range */
	uint64_t units_gone; /* units pointing at no record (missing, past the end, another size) */
	uint64_t units_lost; /* units a recovery wrote as lost (CQ_LOST_SIZE) */
	uint64_t units_foreign; /* units at a valid record of another queue, offset or topic */
	/* records a ConsumeQueue indexes that no unit points at (counted after a clean stop) */
	uint64_t recs_unindexed;
};

/* One segment's scan (store_verify_seg()). */
struct store_verify_seg_res {
	uint64_t recs;	/* valid records */
	uint64_t end;	/* offset in the segment past the last record (or where its BLANK starts) */
	bool sealed;	/* ends with a BLANK to the segment's end */
	uint32_t spans; /* damaged ranges */
	uint64_t bytes; /* bytes in them */
};

/*
 * Called for each damaged range [@lo, @hi) (offsets in the segment) with
 * what was found at @lo.
 */
typedef void (*store_verify_bad_fn)(void *arg, uint64_t lo, uint64_t hi, const char *why);

/**
 * store_verify_seg() - scan the @len bytes of the segment of shard @shard
 * starting at local offset @start (@len may be short of @seg_size: a
 * truncated file): records back to back, each valid where it lies; after
 * damage the next valid record is looked for byte by byte; zeros to the
 * end are where the log stops.
 *
 * Context: any thread, read-only, no allocation. Return: 0 (*@res set).
 */
MUST_CHECK int store_verify_seg(const uint8_t *p, uint64_t len, uint64_t seg_size, uint32_t shard,
				uint64_t start, struct store_verify_seg_res *res,
				store_verify_bad_fn bad, void *arg);

/**
 * store_verify() - check the store @cfg names, read-only, and write a
 * report to @out: per shard its segments, records and damaged ranges with
 * their offsets, per queue the units that point at damaged or missing
 * records, and a last line saying "clean" or "damaged".
 *
 * Context: offline (the broker not running on it, or not writing), blocking.
 * Return: 0 with *@res (damage is in it, not in the return), -errno when a
 * directory cannot be read.
 */
MUST_CHECK int store_verify(const struct store_verify_cfg *cfg, FILE *out,
			    struct store_verify_res *res);

/* Damage in *@res: a damaged range, an odd segment, or a unit pointing at no good record. */
bool store_verify_damaged(const struct store_verify_res *res);

#endif /* SP_STORE_VERIFY_H */
