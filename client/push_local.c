// SPDX-License-Identifier: Apache-2.0
/*
 * push_local.c - a broadcast push consumer's offsets, kept on the member's
 * own disk (RocketMQ's LocalFileOffsetStore): every member of a broadcast
 * group reads every queue from its own place, so the broker keeps none.
 *
 * The file is <offset_dir>/<group>.json (offset_dir: the config's, else
 * $HOME/.sprocket/offsets, else ./.sprocket/offsets), one JSON object
 * {"offsetTable":{"<topic>@<broker>@<queueId>":offset,...}}, written whole
 * to <file>.tmp, fsynced and renamed over the file at each commit, so a
 * crash leaves the old or the new table, never a torn one.
 *
 * Context: sp_push_start() (load) and the control thread or sp_push_stop()
 * (save); p->local under p->lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client_priv.h"
#include "push_priv.h"

static void
mq_key(const struct sp_mq *mq, char *out, size_t cap)
{
	snprintf(out, cap, "%s@%s@%d", mq->topic, mq->broker, (int)mq->queue_id);
}

/* mkdir -p @dir (0700: offsets say what a member read). Return: 0 or -errno. */
static int
mkdirs(const char *dir)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	for (char *s = path + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(path, 0700) != 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return mkdir(path, 0700) != 0 && errno != EEXIST ? -errno : 0;
}

int
sp__push_local_open(struct sp_push *p, const char *dir)
{
	char d[PATH_MAX];
	const char *home = getenv("HOME");
	json_object *o, *tab;
	int rc;

	if (dir && dir[0])
		rc = snprintf(d, sizeof(d), "%s", dir);
	else if (home && home[0])
		rc = snprintf(d, sizeof(d), "%s/.sprocket/offsets", home);
	else
		rc = snprintf(d, sizeof(d), ".sprocket/offsets");
	if (rc < 0 || (size_t)rc >= sizeof(d))
		return -ENAMETOOLONG;
	rc = mkdirs(d);
	if (rc != 0)
		return rc;
	if (asprintf(&p->local_path, "%s/%s.json", d, p->group) < 0) {
		p->local_path = NULL;
		return -ENOMEM;
	}
	o = json_object_from_file(p->local_path);
	if (o != NULL && json_object_object_get_ex(o, "offsetTable", &tab) &&
	    json_object_is_type(tab, json_type_object)) {
		p->local = json_object_get(tab);
	} else {
		if (o == NULL && access(p->local_path, F_OK) == 0)
			sp__log(p->c, SP_LOG_WARN, "%s: not an offset table: starting over",
				p->local_path);
		p->local = json_object_new_object();
	}
	json_object_put(o);
	return p->local ? 0 : -ENOMEM;
}

int
sp__push_local_get(struct sp_push *p, const struct sp_mq *mq, int64_t *off)
{
	char key[SP_TOPIC_MAX + SP_BROKER_MAX + 16];
	json_object *v;
	int rc = -ENOENT;

	mq_key(mq, key, sizeof(key));
	pthread_mutex_lock(&p->lock);
	if (p->local && json_object_object_get_ex(p->local, key, &v) &&
	    json_object_get_int64(v) >= 0) {
		*off = json_object_get_int64(v);
		rc = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int
sp__push_local_save(struct sp_push *p)
{
	char tmp[PATH_MAX];
	json_object *root;
	char *text;
	bool changed = false;
	int fd, rc = 0;
	size_t len;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_q; i++) {
		struct pq *q = &p->qs[i];
		char key[SP_TOPIC_MAX + SP_BROKER_MAX + 16];

		if (!q->used || !q->have_offset || q->consumed == q->committed)
			continue;
		mq_key(&q->mq, key, sizeof(key));
		json_object_object_add(p->local, key, json_object_new_int64(q->consumed));
		q->committed = q->consumed;
		changed = true;
	}
	if (!changed) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	root = json_object_new_object();
	json_object_object_add(root, "offsetTable", json_object_get(p->local));
	text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
	json_object_put(root);
	pthread_mutex_unlock(&p->lock);
	/* the file work unlocked: the I/O thread takes p->lock for every answer */
	len = text ? strlen(text) : 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", p->local_path);
	errno = 0;
	fd = text ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) != 0 ||
	    rename(tmp, p->local_path) != 0)
		rc = errno ? -errno : -EIO;
	if (fd >= 0)
		close(fd);
	free(text);
	if (rc != 0) { /* not on disk: the next commit writes them again */
		pthread_mutex_lock(&p->lock);
		for (size_t i = 0; i < p->n_q; i++)
			p->qs[i].committed = -1;
		pthread_mutex_unlock(&p->lock);
	}
	if (rc != 0)
		sp__log(p->c, SP_LOG_WARN, "%s: offsets not saved: %s", p->local_path,
			strerror(-rc));
	return rc;
}

void
sp__push_local_close(struct sp_push *p)
{
	json_object_put(p->local);
	p->local = NULL;
	free(p->local_path);
	p->local_path = NULL;
}
