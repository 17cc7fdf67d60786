// SPDX-License-Identifier: Apache-2.0
/*
 * tw.c - the hierarchical timing wheel with its far levels on disk (tw.h).
 *
 * Blocks are 1,024 ms (B0), superblocks 2^20 ms (B1). With cb the cursor's
 * block and sb its superblock, an entry due at t (t >= cursor) is in
 *  - level 0 when t's block is cb or cb + 1: list l0[t % 2048];
 *  - level 1 when t's superblock is sb or sb + 1 (and not level 0): file
 *    l1[block % 2048] (at most 2,046 blocks in that range: no two share one);
 *  - level 2 otherwise: file l2[superblock % 256], clamped to sb + 255.
 * Entering block cb moves file l1[(cb + 1) % 2048] into level 0; entering
 * superblock sb first spreads file l2[(sb + 1) % 256] over level 1.
 *
 * A level file is an array of struct tw_ent in host order, appended through
 * a small buffer per file; the directory is this process's scratch.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "store/tw.h"

#define TW_TAG "timer"
#define B0 10u /* block: 2^10 ms */
#define B1 20u /* superblock: 2^20 ms */
#define L0_SLOTS 2048u
#define L1_SLOTS 2048u
#define L2_SLOTS 256u
#define FILE_BUF 64u   /* entries buffered per level file */
#define CHUNK 2048u    /* entries read at once from a level file */
#define VEC_KEEP 4096u /* a drained millisecond keeps a list this big */

struct tw_vec {
	struct tw_ent *e;
	uint32_t n, cap;
};

struct tw_file {
	uint64_t on_disk; /* entries written to the file */
	uint32_t nbuf;
	struct tw_ent *buf; /* FILE_BUF entries, allocated on first use */
};

struct tw {
	char dir[PATH_MAX - 32];
	int64_t cursor;	  /* the next millisecond to expire */
	uint32_t drained; /* entries of l0[cursor] already returned */
	uint64_t pending;
	uint64_t lost;
	struct tw_vec l0[L0_SLOTS];
	struct tw_file l1[L1_SLOTS];
	struct tw_file l2[L2_SLOTS];
	struct tw_ent chunk[CHUNK];
};

static void
file_path(const struct tw *w, int level, uint32_t slot, char *out, size_t cap)
{
	snprintf(out, cap, "%s/l%d-%04u", w->dir, level, slot);
}

static int
vec_push(struct tw_vec *v, const struct tw_ent *e)
{
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? v->cap * 2 : 16;
		struct tw_ent *n = realloc(v->e, sizeof(*n) * cap);

		if (n == NULL)
			return -ENOMEM;
		v->e = n;
		v->cap = cap;
	}
	v->e[v->n++] = *e;
	return 0;
}

static int
write_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len > 0) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Append the buffer of level file (@level, @slot) to its file. */
static int
file_spill(struct tw *w, int level, uint32_t slot, struct tw_file *f)
{
	char path[PATH_MAX];
	int fd, err;

	if (f->nbuf == 0)
		return 0;
	file_path(w, level, slot, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, f->buf, sizeof(*f->buf) * f->nbuf);
	if (close(fd) != 0 && err == 0)
		err = -errno;
	if (err != 0) {
		/* A short append: cut the file back to its last whole count. */
		if (truncate(path, (off_t)(f->on_disk * sizeof(*f->buf))) != 0) {
			/* Or give the file up: its entries are lost (tw_lost()) */
			log_err(TW_TAG,
				"%s: level %d file %u: %s, and cannot be cut: %" PRIu64
				" timer(s) lost",
				w->dir, level, slot, strerror(-err), f->on_disk + f->nbuf);
			w->lost += f->on_disk + f->nbuf;
			w->pending -= f->on_disk + f->nbuf;
			(void)unlink(path);
			f->on_disk = 0;
			f->nbuf = 0;
		}
		return err;
	}
	f->on_disk += f->nbuf;
	f->nbuf = 0;
	return 0;
}

static int
file_add(struct tw *w, int level, uint32_t slot, struct tw_file *f, const struct tw_ent *e)
{
	if (f->buf == NULL) {
		f->buf = malloc(sizeof(*f->buf) * FILE_BUF);
		if (f->buf == NULL)
			return -ENOMEM;
	}
	if (f->nbuf == FILE_BUF) {
		int err = file_spill(w, level, slot, f);

		if (err != 0)
			return err;
	}
	f->buf[f->nbuf++] = *e;
	return 0;
}

static int
place(struct tw *w, const struct tw_ent *e)
{
	int64_t t = e->due_ms < w->cursor ? w->cursor : e->due_ms;
	uint64_t b = (uint64_t)t >> B0, cb = (uint64_t)w->cursor >> B0;
	uint64_t s = (uint64_t)t >> B1, sb = (uint64_t)w->cursor >> B1;

	if (b <= cb + 1)
		return vec_push(&w->l0[(uint64_t)t % L0_SLOTS], e);
	if (s <= sb + 1)
		return file_add(w, 1, (uint32_t)(b % L1_SLOTS), &w->l1[b % L1_SLOTS], e);
	if (s > sb + L2_SLOTS - 1)
		s = sb + L2_SLOTS - 1;
	return file_add(w, 2, (uint32_t)(s % L2_SLOTS), &w->l2[s % L2_SLOTS], e);
}

int
tw_add(struct tw *w, const struct tw_ent *e)
{
	int err = place(w, e);

	if (err == 0)
		w->pending++;
	return err;
}

/* Lose @n entries of a level file that could not be read. */
static void
lose(struct tw *w, int level, uint32_t slot, uint64_t n, int err)
{
	w->lost += n;
	w->pending -= n;
	log_err(TW_TAG, "%s: level %d file %u: %s: %" PRIu64 " timer(s) lost", w->dir, level, slot,
		strerror(-err), n);
}

/*
 * Take level file (@level, @slot) out and file its entries again with the
 * cursor where it is now; the slot is empty meanwhile (nothing new can land
 * in it: its entries all move to lower levels).
 */
static void
cascade(struct tw *w, int level, uint32_t slot)
{
	struct tw_file *f = level == 1 ? &w->l1[slot] : &w->l2[slot];
	uint64_t on_disk = f->on_disk, done = 0;
	uint32_t nbuf = f->nbuf;
	char path[PATH_MAX];
	int fd = -1, err = 0;

	if (on_disk == 0 && nbuf == 0)
		return;
	f->on_disk = 0;
	f->nbuf = 0;
	if (on_disk > 0) {
		file_path(w, level, slot, path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			err = -errno;
		else
			(void)unlink(path);
	}
	while (fd >= 0 && done < on_disk && err == 0) {
		size_t want = (size_t)SP_MIN(on_disk - done, (uint64_t)CHUNK);
		ssize_t n = read(fd, w->chunk, sizeof(*w->chunk) * want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (size_t)n % sizeof(*w->chunk) != 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		for (size_t i = 0; i < (size_t)n / sizeof(*w->chunk); i++) {
			if (place(w, &w->chunk[i]) != 0)
				lose(w, level, slot, 1, -ENOMEM);
		}
		done += (uint64_t)n / sizeof(*w->chunk);
	}
	if (fd >= 0)
		close(fd);
	if (err != 0)
		lose(w, level, slot, on_disk - done, err);
	/* The buffer: entries never written out (the slot's own buffer stays allocated). */
	for (uint32_t i = 0; i < nbuf; i++) {
		struct tw_ent e = f->buf[i];

		if (place(w, &e) != 0)
			lose(w, level, slot, 1, -ENOMEM);
	}
}

/* The cursor enters millisecond @t: bring the next block (and superblock) nearer. */
static void
enter(struct tw *w, int64_t t)
{
	uint64_t ut = (uint64_t)t;

	if ((ut & ((1u << B0) - 1)) != 0)
		return;
	if ((ut & ((1u << B1) - 1)) == 0)
		cascade(w, 2, (uint32_t)(((ut >> B1) + 1) % L2_SLOTS));
	cascade(w, 1, (uint32_t)(((ut >> B0) + 1) % L1_SLOTS));
}

size_t
tw_expire(struct tw *w, int64_t now_ms, struct tw_ent *out, size_t max)
{
	size_t n = 0;

	while (w->cursor <= now_ms) {
		struct tw_vec *v = &w->l0[(uint64_t)w->cursor % L0_SLOTS];

		while (w->drained < v->n && n < max)
			out[n++] = v->e[w->drained++];
		if (w->drained < v->n)
			break;
		w->pending -= v->n;
		v->n = 0;
		w->drained = 0;
		if (v->cap > VEC_KEEP) {
			free(v->e);
			v->e = NULL;
			v->cap = 0;
		}
		w->cursor++;
		enter(w, w->cursor);
	}
	return n;
}

int64_t
tw_cursor(const struct tw *w)
{
	return w->cursor;
}

uint64_t
tw_pending(const struct tw *w)
{
	return w->pending - w->drained;
}

uint64_t
tw_lost(const struct tw *w)
{
	return w->lost;
}

/* Remove every level file in @w's directory. */
static void
wipe(const struct tw *w)
{
	char path[PATH_MAX];

	for (uint32_t i = 0; i < L1_SLOTS; i++) {
		file_path(w, 1, i, path, sizeof(path));
		(void)unlink(path);
	}
	for (uint32_t i = 0; i < L2_SLOTS; i++) {
		file_path(w, 2, i, path, sizeof(path));
		(void)unlink(path);
	}
}

int
tw_open(const char *dir, int64_t now_ms, struct tw **out)
{
	struct tw *w;

	if (strlen(dir) >= sizeof(w->dir) || now_ms < 0)
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	strcpy(w->dir, dir);
	w->cursor = now_ms;
	wipe(w);
	*out = w;
	return 0;
}

void
tw_close(struct tw *w)
{
	if (w == NULL)
		return;
	wipe(w);
	for (uint32_t i = 0; i < L0_SLOTS; i++)
		free(w->l0[i].e);
	for (uint32_t i = 0; i < L1_SLOTS; i++)
		free(w->l1[i].buf);
	for (uint32_t i = 0; i < L2_SLOTS; i++)
		free(w->l2[i].buf);
	free(w);
}
