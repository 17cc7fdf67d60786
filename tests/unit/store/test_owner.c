// SPDX-License-Identifier: Apache-2.0
/*
 * test_owner.c - who owns a store (store/owner.c, docs/store.md "One
 * process per store", "A store keeps its shard count", "Buffer directories
 * of dead runs"):
 *  - a second opener of a live store is refused, naming the holder's pid
 *    and the lock file, and changes nothing in the store; once the holder
 *    is killed (-9) the store opens;
 *  - a store written with N shards refuses to open with M != N, both ways,
 *    from its checkpoint and from its directories, changing nothing; with N
 *    again every message is there;
 *  - at open, the buffer directories of dead runs that no store needs are
 *    removed; a dead run's directory that its store still names is kept
 *    (and that store's next open recovers from it), as are a live run's and
 *    one without an owner record.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "common/clock.h"
#include "common/log.h"
#include "store/store.h"

static char tmp[64];
static char bufs[64];
static char logp[128];

static void
dirs_make(void)
{
	strcpy(tmp, "/tmp/sp-owner-XXXXXX");
	T_ASSERT(mkdtemp(tmp) != NULL);
	strcpy(bufs,
	       access("/dev/shm", W_OK) == 0 ? "/dev/shm/sp-own-XXXXXX" : "/tmp/sp-own-XXXXXX");
	T_ASSERT(mkdtemp(bufs) != NULL);
	/* every log line of the case, to look for the ones it expects */
	snprintf(logp, sizeof(logp), "%s/log", tmp);
	{
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);

		T_ASSERT(fd >= 0);
		log_set_fd(fd);
	}
}

static void
dirs_drop(void)
{
	char cmd[200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", tmp, bufs);
	T_ASSERT(system(cmd) == 0);
}

/* Does the log from byte @from on hold @needle? */
static bool
log_has_since(long from, const char *needle)
{
	static char text[1 << 16];
	FILE *f = fopen(logp, "r");
	size_t n;

	T_ASSERT(f != NULL);
	T_ASSERT_EQ(fseek(f, from, SEEK_SET), 0);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return strstr(text, needle) != NULL;
}

static bool
log_has(const char *needle)
{
	return log_has_since(0, needle);
}

/* Where the log ends now. */
static long
log_mark(void)
{
	struct stat st;

	T_ASSERT_EQ(stat(logp, &st), 0);
	return (long)st.st_size;
}

static void
cfg_make(struct store_cfg *c, const char *root, uint32_t shards)
{
	store_cfg_default(c);
	c->root = root;
	c->shards = shards;
	c->seg_size = 64 << 10;
	c->cq_units = 64;
	c->idx_slots = 64;
	c->idx_entries = 128;
	c->flush_interval_ms = 1;
	c->threads = false;
	c->buf_dir = bufs;
}

static void
put(struct store *s, struct store_queue *q, uint32_t tag)
{
	uint8_t body[100];
	struct store_put_res r;
	struct wire_msg m;
	long n = -EAGAIN;

	memset(body, (int)tag, sizeof(body));
	memcpy(body, &tag, sizeof(tag));
	memset(&m, 0, sizeof(m));
	m.body = body;
	m.body_len = sizeof(body);
	m.born_ts = 1;
	for (int tries = 0; tries < 100 && n == -EAGAIN; tries++) {
		n = store_put(s, q, &m, &r);
		if (n == -EAGAIN)
			T_ASSERT_EQ(store_service(s, clk_wall_ms()), 0);
	}
	T_ASSERT(n > 0);
}

/* Queue @qid of topic T holds exactly the tags qid * 100 + 0..@n-1. */
static void
check_queue(struct store *s, uint32_t qid, uint32_t shard, uint32_t n)
{
	struct store_queue *q;

	T_ASSERT_EQ(store_queue_get(s, "T", qid, shard, &q), 0);
	T_ASSERT_EQ(store_queue_max(s, q), n);
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *rec;
		struct wire_msg m;
		struct cq_unit u;
		uint32_t tag;
		long r = store_get(s, q, i, &rec, &u);

		T_ASSERT(r > 0);
		T_ASSERT_EQ(wire_rec_decode(rec, (size_t)r, WIRE_REC_VERIFY_CRC, &m), r);
		memcpy(&tag, m.body, sizeof(tag));
		T_ASSERT_EQ(tag, qid * 100 + i);
	}
}

/*
 * A listing of every file under @root (name, size, mtime), to see that
 * nothing changed; but the lock file, which every opener takes first.
 */
static void
tree_list(const char *root, char *out, size_t cap)
{
	char cmd[256];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && find . \\( -path ./log -o -name lock \\) -prune -o -printf '%%p %%s "
		 "%%T@\\n' | sort",
		 root);
	p = popen(cmd, "r");
	T_ASSERT(p != NULL);
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	T_ASSERT_EQ(pclose(p), 0);
}

/*
 * A child that opens the store at @root and waits (its pid returned); with
 * @puts, it first puts that many messages in queue T:0 (ASYNC_FLUSH, with
 * its buffers as files: a kill loses none of them).
 */
static pid_t
holder_start(const char *root, uint32_t puts)
{
	int p[2];
	char c;
	pid_t pid;

	T_ASSERT(pipe(p) == 0);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		struct store_queue *q;
		struct store_cfg cfg;
		struct store *s;

		close(p[0]);
		/* no threads: nothing changes in the store while it waits */
		cfg_make(&cfg, root, 1);
		if (store_open(&cfg, &s) != 0 || store_queue_get(s, "T", 0, 0, &q) != 0)
			_exit(1);
		for (uint32_t i = 0; i < puts; i++)
			put(s, q, i);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	T_ASSERT_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

static void
holder_kill(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	T_ASSERT_EQ(waitpid(pid, &st, 0), pid);
}

/* The run directory <root>/bufdir names, into @out. */
static void
bufdir_of(const char *root, char *out, size_t cap)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), "%s/bufdir", root);
	f = fopen(path, "r");
	T_ASSERT(f != NULL);
	T_ASSERT(fgets(out, (int)cap, f) != NULL);
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

static bool
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static void
test_second_open_refused_until_holder_dies(void)
{
	static char before[1 << 16];
	static char after[1 << 16];
	char root[128];
	char want[512];
	char lock[160];
	struct store_cfg cfg;
	struct store *s;
	pid_t pid;
	FILE *f;
	long held = 0;
	long mark;

	dirs_make();
	snprintf(root, sizeof(root), "%s/store", tmp);
	pid = holder_start(root, 5);
	/* The lock file names the holder. */
	snprintf(lock, sizeof(lock), "%s/lock", root);
	f = fopen(lock, "r");
	T_ASSERT(f != NULL);
	T_ASSERT_EQ(fscanf(f, "%ld", &held), 1);
	fclose(f);
	T_ASSERT_EQ(held, pid);

	tree_list(tmp, before, sizeof(before));
	mark = log_mark();
	cfg_make(&cfg, root, 1);
	T_ASSERT_EQ(store_open(&cfg, &s), -EBUSY);
	snprintf(want, sizeof(want), "%s is in use by process %ld, which holds %s: stop", root,
		 (long)pid, lock);
	T_ASSERT(log_has_since(mark, want));
	/* Nothing changed: no recovery, no abort file touched, no file removed. */
	tree_list(tmp, after, sizeof(after));
	T_ASSERT_STREQ(before, after);
	T_ASSERT(!log_has_since(mark, "recovering"));
	f = fopen(lock, "r");
	T_ASSERT(f != NULL);
	T_ASSERT_EQ(fscanf(f, "%ld", &held), 1);
	fclose(f);
	T_ASSERT_EQ(held, pid);

	/* The holder dies: its lock goes with it, and the store opens (and recovers). */
	holder_kill(pid);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT(log_has_since(mark, "did not shut down cleanly"));
	check_queue(s, 0, 0, 5);
	/* This process holds it now: a second open here is refused too. */
	{
		struct store *s2 = NULL;

		T_ASSERT_EQ(store_open(&cfg, &s2), -EBUSY);
	}
	T_ASSERT_EQ(store_close(s), 0);
	/* Closed: free again. */
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT_EQ(store_close(s), 0);
	dirs_drop();
}

/* Write @shards shards' worth of T:0..3 (queue q on shard q % shards), 3 messages each. */
static void
shards_fill(const char *root, uint32_t shards)
{
	struct store_cfg cfg;
	struct store *s;

	cfg_make(&cfg, root, shards);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	for (uint32_t qid = 0; qid < 4; qid++) {
		struct store_queue *q;

		T_ASSERT_EQ(store_queue_get(s, "T", qid, qid % shards, &q), 0);
		for (uint32_t i = 0; i < 3; i++)
			put(s, q, qid * 100 + i);
	}
	T_ASSERT_EQ(store_close(s), 0);
}

static void
shards_refused(const char *root, uint32_t was, uint32_t now, const char *why)
{
	static char before[1 << 16];
	static char after[1 << 16];
	char want[512];
	struct store_cfg cfg;
	struct store *s;

	tree_list(root, before, sizeof(before));
	cfg_make(&cfg, root, now);
	T_ASSERT_EQ(store_open(&cfg, &s), -EINVAL);
	snprintf(want, sizeof(want),
		 "dataplaneCores=%u but %s was written with %u CommitLog shard%s (%s): start with "
		 "--dataplaneCores=%u;",
		 now, root, was, was == 1 ? "" : "s", why, was);
	if (!log_has(want))
		T_FAIL("no line with: %s", want);
	tree_list(root, after, sizeof(after));
	T_ASSERT_STREQ(before, after);
}

static void
shards_reopen_all_there(const char *root, uint32_t shards)
{
	struct store_cfg cfg;
	struct store *s;

	cfg_make(&cfg, root, shards);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	for (uint32_t qid = 0; qid < 4; qid++)
		check_queue(s, qid, qid % shards, 3);
	T_ASSERT_EQ(store_close(s), 0);
}

static void
test_shard_count_kept_both_ways(void)
{
	char one[128];
	char two[128];
	char path[160];

	dirs_make();
	snprintf(one, sizeof(one), "%s/one", tmp);
	snprintf(two, sizeof(two), "%s/two", tmp);
	shards_fill(one, 1);
	shards_fill(two, 2);
	shards_refused(one, 1, 2, "its checkpoint says so");
	shards_refused(two, 2, 1, "its checkpoint says so");
	shards_refused(two, 2, 3, "its checkpoint says so");
	shards_reopen_all_there(one, 1);
	shards_reopen_all_there(two, 2);

	/* Without a checkpoint the commitlog directories tell. */
	snprintf(path, sizeof(path), "%s/checkpoint", one);
	T_ASSERT_EQ(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/checkpoint", two);
	T_ASSERT_EQ(unlink(path), 0);
	shards_refused(one, 1, 2, "its highest commitlog shard directory holding segments says so");
	shards_refused(two, 2, 1, "its highest commitlog shard directory holding segments says so");
	shards_reopen_all_there(one, 1);
	shards_reopen_all_there(two, 2);
	dirs_drop();
}

static void
test_dead_runs_bufdirs_reaped(void)
{
	char a[128], c[128], h[128], live[128], g[128];
	char da[256], dc[256], dh[256], dlive[256];
	char old[128], path[300], cmd[400];
	struct store_cfg cfg;
	struct store *s;
	pid_t pid_a, pid_c, pid_h, pid_live;
	FILE *f;

	dirs_make();
	snprintf(a, sizeof(a), "%s/a", tmp);
	snprintf(c, sizeof(c), "%s/c", tmp);
	snprintf(h, sizeof(h), "%s/h", tmp);
	snprintf(live, sizeof(live), "%s/live", tmp);
	snprintf(g, sizeof(g), "%s/g", tmp);

	/* Four runs at once, each of its own store, all in the same storeBufferDir. */
	pid_a = holder_start(a, 40);
	pid_c = holder_start(c, 3);
	pid_h = holder_start(h, 3);
	pid_live = holder_start(live, 3);
	bufdir_of(a, da, sizeof(da));
	bufdir_of(c, dc, sizeof(dc));
	bufdir_of(h, dh, sizeof(dh));
	bufdir_of(live, dlive, sizeof(dlive));
	/* a: killed with 40 messages only in its buffers; its bufdir names its directory. */
	holder_kill(pid_a);
	/* c: killed, then the store is deleted. */
	holder_kill(pid_c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c);
	T_ASSERT(system(cmd) == 0);
	/* h: killed, then its bufdir names another directory (as after a start elsewhere). */
	holder_kill(pid_h);
	snprintf(path, sizeof(path), "%s/bufdir", h);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fprintf(f, "%s/sprocket-zzzzzz\n", bufs);
	fclose(f);
	/* live: still running. */
	/* An older sprocket's directory: no owner record. */
	snprintf(old, sizeof(old), "%s/sprocket-OLD123", bufs);
	T_ASSERT_EQ(mkdir(old, 0700), 0);
	T_ASSERT(exists(da) && exists(dc) && exists(dh) && exists(dlive));
	snprintf(path, sizeof(path), "%s/owner", dlive);
	T_ASSERT(exists(path));

	/* Another store opens in the same storeBufferDir. */
	cfg_make(&cfg, g, 1);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT(!exists(dc));
	T_ASSERT(!exists(dh));
	T_ASSERT(exists(da));
	T_ASSERT(exists(dlive));
	T_ASSERT(exists(old));
	snprintf(cmd, sizeof(cmd), "removed %s: write-behind buffers of a dead run of", dc);
	T_ASSERT(log_has(cmd));
	T_ASSERT(log_has("which no longer needs them (the store does not exist)"));
	snprintf(cmd, sizeof(cmd),
		 "which no longer needs them (its bufdir names %s/sprocket-zzzzzz)", bufs);
	T_ASSERT(log_has(cmd));
	snprintf(cmd, sizeof(cmd), "kept %s: write-behind buffers of a dead run of", da);
	T_ASSERT(log_has(cmd));
	T_ASSERT(log_has("1 directories sprocket-* in"));
	T_ASSERT_EQ(store_close(s), 0);
	/* A clean close removes the run's directory, owner record and all. */
	bufdir_of(g, path, sizeof(path));
	T_ASSERT(!exists(path));

	/* a's next start recovers its 40 messages from the kept directory, then drops it. */
	cfg_make(&cfg, a, 1);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	check_queue(s, 0, 0, 40);
	T_ASSERT(!exists(da));
	T_ASSERT_EQ(store_close(s), 0);

	/* The live run's directory survived every start; once it dies, nobody needs it... */
	T_ASSERT(exists(dlive));
	holder_kill(pid_live);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", live);
	T_ASSERT(system(cmd) == 0);
	cfg_make(&cfg, g, 1);
	T_ASSERT_EQ(store_open(&cfg, &s), 0);
	T_ASSERT(!exists(dlive));
	T_ASSERT(exists(old));
	T_ASSERT_EQ(store_close(s), 0);
	dirs_drop();
}

T_MAIN(T_CASE(test_second_open_refused_until_holder_dies), T_CASE(test_shard_count_kept_both_ways),
       T_CASE(test_dead_runs_bufdirs_reaped))
