// SPDX-License-Identifier: Apache-2.0
/*
 * ns_kv.c - the NameServer's KV config (PUT/GET/DELETE_KV_CONFIG).
 *
 * Entries live in an immutable snapshot, sorted by (namespace, key), that
 * the writer thread replaces as a whole and publishes with RCU, so GET on
 * the io thread never waits for a PUT that is fsyncing. KV tables are small
 * (RocketMQ keeps ORDER_TOPIC_CONFIG and a few operator notes there), so a
 * write copies the table; the limits in ns_priv.h keep that bounded.
 *
 * Persistence (security, CVE-2023-33246 / -37582): the file path comes from
 * the operator's configuration only, never from a request; namespaces and
 * keys are data inside the file, never path components. Every change is
 * written to "<path>.tmp", fsynced, renamed over the file and the directory
 * fsynced (store_io_write_atomic()), before it is published; if that fails
 * the change is refused, so memory and disk never disagree. The file is
 * RocketMQ's kvConfig.json shape: {"configTable":{"ns":{"k":"v"}}}.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <urcu/urcu-memb.h>

#include "common/err.h"
#include "common/log.h"
#include "common/jbuf.h"
#include "ns_priv.h"
#include "store/io.h"

#define NS_KV_FILE_MAX (64u << 20)

struct kv_ent {
	const char *ns;
	const char *key;
	const char *val;
	uint32_t ns_len;
	uint32_t key_len;
	uint32_t val_len;
};

/* An immutable snapshot: entries sorted, strings in one block. */
struct kv_snap {
	uint32_t n;
	char *strings;
	struct kv_ent e[];
};

/* Ownership: writer thread mutates and publishes snap; readers see it under RCU. */
struct ns_kv {
	struct kv_snap *snap; /* RCU: writer publishes */
	char *path;	      /* immutable; NULL: memory only */
};

static int
ent_cmp(const char *ns, size_t ns_len, const char *key, size_t key_len, const struct kv_ent *e)
{
	size_t n = SP_MIN(ns_len, (size_t)e->ns_len);
	int c = memcmp(ns, e->ns, n);

	if (c != 0 || ns_len != e->ns_len)
		return c != 0 ? c : (ns_len < e->ns_len ? -1 : 1);
	n = SP_MIN(key_len, (size_t)e->key_len);
	c = memcmp(key, e->key, n);
	if (c != 0 || key_len != e->key_len)
		return c != 0 ? c : (key_len < e->key_len ? -1 : 1);
	return 0;
}

/* Return: index of the entry, or -(insertion point) - 1. */
static long
snap_find(const struct kv_snap *s, const char *ns, size_t ns_len, const char *key, size_t key_len)
{
	long lo = 0;
	long hi = (long)s->n - 1;

	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		int c = ent_cmp(ns, ns_len, key, key_len, &s->e[mid]);

		if (c == 0)
			return mid;
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -lo - 1;
}

/* Copy @src's strings to @p for @d. Return: the byte after them. */
static char *
ent_copy(struct kv_ent *d, const struct kv_ent *src, char *p)
{
	*d = *src;
	d->ns = p;
	memcpy(p, src->ns, src->ns_len);
	p += src->ns_len;
	*p++ = '\0';
	d->key = p;
	memcpy(p, src->key, src->key_len);
	p += src->key_len;
	*p++ = '\0';
	d->val = p;
	memcpy(p, src->val, src->val_len);
	p += src->val_len;
	*p++ = '\0';
	return p;
}

/*
 * snap_build() - a new snapshot of @old's entries with entry @skip left out
 * (-1: none) and @add (NULL: none) inserted at @at.
 */
static struct kv_snap *
snap_build(const struct kv_snap *old, long skip, const struct kv_ent *add, long at)
{
	uint32_t n = old->n - (skip >= 0) + (add != NULL);
	size_t bytes = 0;
	struct kv_snap *s;
	char *p;
	uint32_t k = 0;

	for (uint32_t i = 0; i < old->n; i++)
		bytes += (size_t)old->e[i].ns_len + old->e[i].key_len + old->e[i].val_len + 3;
	if (add != NULL)
		bytes += (size_t)add->ns_len + add->key_len + add->val_len + 3;
	s = malloc(sizeof(*s) + sizeof(s->e[0]) * n);
	if (s == NULL)
		return NULL;
	s->strings = malloc(bytes ? bytes : 1);
	if (s->strings == NULL) {
		free(s);
		return NULL;
	}
	s->n = n;
	p = s->strings;
	for (long i = 0; i <= (long)old->n; i++) {
		if (add != NULL && i == at)
			p = ent_copy(&s->e[k++], add, p);
		if (i < (long)old->n && i != skip)
			p = ent_copy(&s->e[k++], &old->e[i], p);
	}
	return s;
}

/* A snapshot of @n sorted, distinct entries. */
static struct kv_snap *
snap_from(const struct kv_ent *e, uint32_t n)
{
	size_t bytes = 0;
	struct kv_snap *s;
	char *p;

	for (uint32_t i = 0; i < n; i++)
		bytes += (size_t)e[i].ns_len + e[i].key_len + e[i].val_len + 3;
	s = malloc(sizeof(*s) + sizeof(s->e[0]) * n);
	if (s == NULL)
		return NULL;
	s->strings = malloc(bytes ? bytes : 1);
	if (s->strings == NULL) {
		free(s);
		return NULL;
	}
	s->n = n;
	p = s->strings;
	for (uint32_t i = 0; i < n; i++)
		p = ent_copy(&s->e[i], &e[i], p);
	return s;
}

static int
ent_sort_cmp(const void *a, const void *b)
{
	const struct kv_ent *x = a;

	return ent_cmp(x->ns, x->ns_len, x->key, x->key_len, b);
}

static void
snap_free(struct kv_snap *s)
{
	if (s == NULL)
		return;
	free(s->strings);
	free(s);
}

static bool
utf8_ok(const char *s, size_t n)
{
	const uint8_t *p = (const uint8_t *)s;

	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t len;
		uint32_t cp;

		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((p[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3F);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

/* Return: true when an entry's fields are within the limits of ns_priv.h. */
static bool
ent_ok(const struct kv_ent *e)
{
	return e->ns_len > 0 && e->ns_len <= NS_KV_FIELD_MAX && e->key_len > 0 &&
	       e->key_len <= NS_KV_FIELD_MAX && e->val_len <= NS_KV_VALUE_MAX &&
	       utf8_ok(e->ns, e->ns_len) && utf8_ok(e->key, e->key_len) &&
	       utf8_ok(e->val, e->val_len);
}

/* {"configTable":{"ns":{"k":"v",...},...}} from a sorted snapshot. */
static int
snap_json(const struct kv_snap *s, struct jbuf *o)
{
	jbuf_lit(o, "{\"configTable\":{");
	for (uint32_t i = 0; i < s->n; i++) {
		const struct kv_ent *e = &s->e[i];
		bool new_ns = i == 0 || e->ns_len != s->e[i - 1].ns_len ||
			      memcmp(e->ns, s->e[i - 1].ns, e->ns_len) != 0;

		if (new_ns) {
			if (i > 0)
				jbuf_lit(o, "},");
			jbuf_str(o, e->ns, e->ns_len);
			jbuf_lit(o, ":{");
		} else {
			jbuf_lit(o, ",");
		}
		jbuf_str(o, e->key, e->key_len);
		jbuf_lit(o, ":");
		jbuf_str(o, e->val, e->val_len);
	}
	jbuf_lit(o, s->n ? "}}}\n" : "}}\n");
	return o->err;
}

static int
kv_persist(const struct ns_kv *kv, const struct kv_snap *s)
{
	struct jbuf o;
	int rc;

	if (kv->path == NULL)
		return 0;
	jbuf_init(&o);
	rc = snap_json(s, &o);
	if (rc == 0)
		rc = store_io_write_atomic(&store_io_posix, kv->path, o.p, o.len);
	if (rc != 0)
		log_err("ctl.ns", "persisting kv config %s failed: %s", kv->path, err_str(rc));
	jbuf_free(&o);
	return rc;
}

static int
kv_publish(struct ns_kv *kv, struct kv_snap *s)
{
	struct kv_snap *old = kv->snap;
	int rc = kv_persist(kv, s);

	if (rc != 0) {
		snap_free(s);
		return rc;
	}
	/* Pairs with rcu_dereference() in ns__kv_get() / ns__kv_list_json(). */
	rcu_assign_pointer(kv->snap, s);
	urcu_memb_synchronize_rcu();
	snap_free(old);
	return 0;
}

static int
kv_load(struct ns_kv *kv, const char *path)
{
	struct json_tokener *tok = NULL;
	struct json_object *root = NULL;
	struct json_object *table;
	struct kv_ent *ents = NULL;
	struct kv_snap *full;
	char *text = NULL;
	size_t len = 0;
	size_t n = 0;
	int rc;

	rc = store_io_read_file(&store_io_posix, path, NS_KV_FILE_MAX, &text, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	rc = -EBADMSG;
	tok = json_tokener_new_ex(4);
	if (tok == NULL || len > INT32_MAX) {
		rc = tok == NULL ? -ENOMEM : -EFBIG;
		goto out;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	root = json_tokener_parse_ex(tok, text, (int)len);
	if (root == NULL || !json_object_is_type(root, json_type_object))
		goto out;
	table = json_object_object_get(root, "configTable");
	if (table == NULL) {
		rc = 0;
		goto out;
	}
	if (!json_object_is_type(table, json_type_object))
		goto out;
	/* Collect, check, sort, then build one snapshot (a put per entry is quadratic). */
	json_object_object_foreach(table, ns, keys)
	{
		(void)ns;
		if (!json_object_is_type(keys, json_type_object))
			goto out;
		n += (size_t)json_object_object_length(keys);
	}
	if (n > NS_KV_ENTRIES_MAX) {
		rc = -EFBIG;
		goto out;
	}
	ents = calloc(n ? n : 1, sizeof(*ents));
	if (ents == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	n = 0;
	json_object_object_foreach(table, ns2, keys2)
	{
		json_object_object_foreach(keys2, key, val)
		{
			struct kv_ent *e = &ents[n++];

			if (!json_object_is_type(val, json_type_string))
				goto out;
			*e = (struct kv_ent){.ns = ns2,
					     .key = key,
					     .val = json_object_get_string(val),
					     .ns_len = (uint32_t)strlen(ns2),
					     .key_len = (uint32_t)strlen(key),
					     .val_len = (uint32_t)json_object_get_string_len(val)};
			if (!ent_ok(e))
				goto out;
		}
	}
	qsort(ents, n, sizeof(*ents), ent_sort_cmp);
	for (size_t i = 1; i < n; i++) {
		if (ent_sort_cmp(&ents[i - 1], &ents[i]) == 0)
			goto out; /* a duplicate key */
	}
	full = snap_from(ents, (uint32_t)n);
	if (full == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	snap_free(kv->snap);
	kv->snap = full;
	rc = 0;
out:
	free(ents);
	if (root != NULL)
		json_object_put(root);
	if (tok != NULL)
		json_tokener_free(tok);
	free(text);
	return rc;
}

int
ns__kv_create(const char *path, struct ns_kv **out)
{
	struct ns_kv *kv = calloc(1, sizeof(*kv));
	int rc = -ENOMEM;

	if (kv == NULL)
		return -ENOMEM;
	kv->snap = calloc(1, sizeof(struct kv_snap));
	if (kv->snap == NULL)
		goto err_free;
	if (path[0] == '\0') {
		*out = kv;
		return 0;
	}
	kv->path = strdup(path);
	if (kv->path == NULL)
		goto err_free;
	rc = kv_load(kv, path);
	if (rc != 0) {
		log_err("ctl.ns", "loading kv config %s failed: %s", path, err_str(rc));
		goto err_free;
	}
	*out = kv;
	return 0;

err_free:
	ns__kv_destroy(kv);
	return rc;
}

void
ns__kv_destroy(struct ns_kv *kv)
{
	if (kv == NULL)
		return;
	snap_free(kv->snap);
	free(kv->path);
	free(kv);
}

uint32_t
ns__kv_count(const struct ns_kv *kv)
{
	return kv->snap->n;
}

int
ns__kv_put(struct ns_kv *kv, const char *ns, size_t ns_len, const char *key, size_t key_len,
	   const char *val, size_t val_len)
{
	const struct kv_snap *cur = kv->snap;
	struct kv_ent add;
	struct kv_snap *s;
	long i;

	add = (struct kv_ent){.ns = ns,
			      .key = key,
			      .val = val,
			      .ns_len = (uint32_t)ns_len,
			      .key_len = (uint32_t)key_len,
			      .val_len = (uint32_t)val_len};
	if (ns_len > NS_KV_FIELD_MAX || key_len > NS_KV_FIELD_MAX || val_len > NS_KV_VALUE_MAX ||
	    !ent_ok(&add))
		return -EINVAL;
	i = snap_find(cur, ns, ns_len, key, key_len);
	if (i >= 0 && cur->e[i].val_len == val_len && memcmp(cur->e[i].val, val, val_len) == 0)
		return 0;
	if (i < 0 && cur->n >= NS_KV_ENTRIES_MAX)
		return -ENOSPC;
	s = snap_build(cur, i, &add, i >= 0 ? i : -i - 1);
	if (s == NULL)
		return -ENOMEM;
	return kv_publish(kv, s);
}

int
ns__kv_delete(struct ns_kv *kv, const char *ns, size_t ns_len, const char *key, size_t key_len)
{
	const struct kv_snap *cur = kv->snap;
	struct kv_snap *s;
	long i = snap_find(cur, ns, ns_len, key, key_len);

	if (i < 0)
		return -ENOENT;
	s = snap_build(cur, i, NULL, -1);
	if (s == NULL)
		return -ENOMEM;
	return kv_publish(kv, s);
}

const char *
ns__kv_get(struct ns_kv *kv, const char *ns, size_t ns_len, const char *key, size_t key_len,
	   size_t *val_len)
{
	const struct kv_snap *s = rcu_dereference(kv->snap);
	long i = snap_find(s, ns, ns_len, key, key_len);

	if (i < 0)
		return NULL;
	*val_len = s->e[i].val_len;
	return s->e[i].val;
}

int
ns__kv_list_json(struct ns_kv *kv, const char *ns, uint8_t **out, size_t *out_len)
{
	const struct kv_snap *s = rcu_dereference(kv->snap);
	size_t ns_len = strlen(ns);
	long i = snap_find(s, ns, ns_len, "", 0);
	struct jbuf o;
	bool first = true;

	/* "" sorts before every key of the namespace: i is the insertion point. */
	i = i >= 0 ? i : -i - 1;
	jbuf_init(&o);
	for (; i < (long)s->n && s->e[i].ns_len == ns_len && memcmp(s->e[i].ns, ns, ns_len) == 0;
	     i++) {
		jbuf_lit(&o, first ? "{\"table\":{" : ",");
		first = false;
		jbuf_str(&o, s->e[i].key, s->e[i].key_len);
		jbuf_lit(&o, ":");
		jbuf_str(&o, s->e[i].val, s->e[i].val_len);
	}
	if (first)
		return -ENOENT;
	jbuf_lit(&o, "}}");
	if (o.err != 0) {
		int rc = o.err;

		jbuf_free(&o);
		return rc;
	}
	*out = jbuf_take(&o, out_len);
	return 0;
}
