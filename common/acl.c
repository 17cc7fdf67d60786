// SPDX-License-Identifier: Apache-2.0
/*
 * acl.c - plain_acl.yml parsed with libyaml into sorted, read-only tables
 * (acl.h).
 *
 * The YAML is loaded as a document (libyaml's node tree) and walked: a top
 * mapping whose keys RocketMQ knows; unknown keys are ignored as RocketMQ
 * ignores them (its own writer adds dataVersion). Every error names the key
 * and, where there is one, the account, but never a secret.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "common/acl.h"

#define ACL_ACCOUNTS_MAX 65536u
#define ACL_RES_MAX 65536u
#define ACL_ADDRS_MAX 4096u

static void SP_PRINTF(3, 4) say(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !why_len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
}

/* ---- addresses ---- */

/* One dotted segment: "N", "*", or "N-M" (0..255). */
static bool
segment(const char *s, size_t n, uint8_t *lo, uint8_t *hi)
{
	unsigned a = 0, b = 0, da = 0, db = 0;
	size_t i = 0;

	if (n == 1 && s[0] == '*') {
		*lo = 0;
		*hi = 255;
		return true;
	}
	while (i < n && s[i] >= '0' && s[i] <= '9' && da < 4) {
		a = a * 10 + (unsigned)(s[i++] - '0');
		da++;
	}
	if (da == 0 || da > 3 || a > 255)
		return false;
	if (i == n) {
		*lo = *hi = (uint8_t)a;
		return true;
	}
	if (s[i++] != '-')
		return false;
	while (i < n && s[i] >= '0' && s[i] <= '9' && db < 4) {
		b = b * 10 + (unsigned)(s[i++] - '0');
		db++;
	}
	if (i != n || db == 0 || db > 3 || b > 255 || b < a)
		return false;
	*lo = (uint8_t)a;
	*hi = (uint8_t)b;
	return true;
}

/* "a.b.c.d" where each part is a segment; fewer than 4 parts only after a "*". */
static bool
range(const char *s, size_t n, struct acl_range *r)
{
	unsigned k = 0;
	size_t at = 0;
	bool star = false;

	while (n && (s[0] == ' ' || s[0] == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n == 0)
		return false;
	for (;;) {
		size_t e = at;
		bool is_star;

		while (e < n && s[e] != '.')
			e++;
		is_star = e - at == 1 && s[at] == '*';
		if (k == 4 || (star && !is_star) || !segment(s + at, e - at, &r->lo[k], &r->hi[k]))
			return false; /* "1.2.*.4" is ambiguous: after a "*" only "*" */
		star = is_star;
		k++;
		if (e == n)
			break;
		at = e + 1;
	}
	if (k < 4) {
		if (!star)
			return false;
		for (; k < 4; k++) {
			r->lo[k] = 0;
			r->hi[k] = 255;
		}
	}
	return true;
}

static int
addrs_add(struct acl_addrs *l, const struct acl_range *r)
{
	struct acl_range *v;

	if (l->n >= ACL_ADDRS_MAX)
		return -EINVAL;
	v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->v = v;
	l->v[l->n++] = *r;
	return 0;
}

/* One RocketMQ address pattern into @l (appends). Blank adds nothing. */
static int
addrs_parse(const char *s, struct acl_addrs *l)
{
	size_t n = strlen(s);
	struct acl_range r;
	int err;

	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n == 0)
		return 0;
	if ((n == 1 && s[0] == '*') || (n == 7 && memcmp(s, "*.*.*.*", 7) == 0)) {
		l->any = true;
		return 0;
	}
	if (memchr(s, ':', n))
		return -EAFNOSUPPORT;
	if (s[n - 1] == '}') {
		/* "a.b.c.{x,y,z}" */
		const char *open = memchr(s, '{', n);
		size_t head, at;

		if (!open || open == s || open[-1] != '.')
			return -EINVAL;
		head = (size_t)(open - s);
		at = head + 1;
		while (at < n - 1) {
			char buf[64];
			size_t e = at;

			while (e < n - 1 && s[e] != ',')
				e++;
			if (head + (e - at) + 1 > sizeof(buf))
				return -EINVAL;
			memcpy(buf, s, head);
			memcpy(buf + head, s + at, e - at);
			if (!range(buf, head + (e - at), &r))
				return -EINVAL;
			if ((err = addrs_add(l, &r)) != 0)
				return err;
			at = e + 1;
		}
		return 0;
	}
	if (memchr(s, ',', n)) {
		size_t at = 0;

		while (at < n) {
			size_t e = at;

			while (e < n && s[e] != ',')
				e++;
			if (!range(s + at, e - at, &r))
				return -EINVAL;
			if ((err = addrs_add(l, &r)) != 0)
				return err;
			at = e + 1;
		}
		return 0;
	}
	if (!range(s, n, &r))
		return -EINVAL;
	return addrs_add(l, &r);
}

bool
acl_addrs_match(const struct acl_addrs *l, uint32_t ip)
{
	uint8_t o[4]; /* network order: the first octet first in memory */

	memcpy(o, &ip, sizeof(o));
	if (l->any)
		return true;
	for (uint32_t i = 0; i < l->n; i++) {
		const struct acl_range *r = &l->v[i];
		int k = 0;

		while (k < 4 && o[k] >= r->lo[k] && o[k] <= r->hi[k])
			k++;
		if (k == 4)
			return true;
	}
	return false;
}

/* ---- permissions ---- */

bool
acl_perm_ok(uint8_t needed, uint8_t owned)
{
	if (owned & ACL_DENY)
		return false;
	if (needed & ACL_ANY)
		return (owned & (ACL_PUB | ACL_SUB)) != 0;
	return (needed & owned) != 0;
}

const char *
acl_perm_name(uint8_t perm)
{
	if (perm & ACL_DENY)
		return "DENY";
	switch (perm & (ACL_PUB | ACL_SUB)) {
	case ACL_PUB:
		return "PUB";
	case ACL_SUB:
		return "SUB";
	case ACL_PUB | ACL_SUB:
		return "PUB|SUB";
	default:
		return "ANY";
	}
}

/* RocketMQ's parsePermFromString: anything unknown is DENY. @strict: say so. */
static int
perm_parse(const char *s, uint8_t *out, bool strict)
{
	size_t n = strlen(s);

	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n == 3 && memcmp(s, "PUB", 3) == 0)
		*out = ACL_PUB;
	else if (n == 3 && memcmp(s, "SUB", 3) == 0)
		*out = ACL_SUB;
	else if (n == 7 && (memcmp(s, "PUB|SUB", 7) == 0 || memcmp(s, "SUB|PUB", 7) == 0))
		*out = ACL_PUB | ACL_SUB;
	else if (n == 4 && memcmp(s, "DENY", 4) == 0)
		*out = ACL_DENY;
	else if (strict)
		return -EINVAL;
	else
		*out = ACL_DENY;
	return 0;
}

static int
res_cmp(const void *x, const void *y)
{
	const struct acl_res *a = x, *b = y;

	if (a->group != b->group)
		return a->group ? 1 : -1;
	return strcmp(a->name, b->name);
}

static int
acc_cmp(const void *x, const void *y)
{
	const struct acl_account *a = x, *b = y;

	return strcmp(a->ak, b->ak);
}

/* The account's own entry for the resource, else its default for topics or groups. */
static bool
lookup(const struct acl_account *acc, const char *name, size_t len, bool group, uint8_t needed)
{
	uint32_t lo = 0, hi = acc->nres;

	if (acc->nres == 0 && acc->admin)
		return true;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct acl_res *r = &acc->res[mid];
		int c;

		if (r->group != group) {
			c = r->group ? 1 : -1;
		} else {
			size_t rl = strlen(r->name);

			c = memcmp(r->name, name, rl < len ? rl : len);
			if (c == 0)
				c = rl < len ? -1 : rl > len ? 1 : 0;
		}
		if (c == 0)
			return acl_perm_ok(needed, r->perm);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return acl_perm_ok(needed, group ? acc->def_group : acc->def_topic);
}

bool
acl_group_topic(const char *name, size_t len)
{
	return (len > 7 && memcmp(name, "%RETRY%", 7) == 0) ||
	       (len > 5 && memcmp(name, "%DLQ%", 5) == 0);
}

bool
acl_allowed(const struct acl_account *acc, const char *name, size_t len, bool group, uint8_t needed)
{
	/* a retry topic is its group, named either way: "%RETRY%g" is g (RocketMQ's rule) */
	if (len >= 7 && memcmp(name, "%RETRY%", 7) == 0)
		return lookup(acc, name + 7, len - 7, true, needed);
	/* a dead-letter topic is its group too, and keeps the permission of its own name as a
	 * topic (RocketMQ checks only that): both */
	if (len >= 5 && memcmp(name, "%DLQ%", 5) == 0)
		return lookup(acc, name + 5, len - 5, true, needed) &&
		       lookup(acc, name, len, false, needed);
	return lookup(acc, name, len, group, needed);
}

const struct acl_account *
acl_find(const struct acl *a, const char *ak, size_t len)
{
	uint32_t lo = 0, hi = a->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const char *k = a->acc[mid].ak;
		size_t kl = strlen(k);
		int c = memcmp(k, ak, kl < len ? kl : len);

		if (c == 0)
			c = kl < len ? -1 : kl > len ? 1 : 0;
		if (c == 0)
			return &a->acc[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- YAML ---- */

struct walk {
	yaml_document_t *doc;
	char *why;
	size_t why_len;
};

/* A scalar's text, or NULL (@n: not a scalar). "~" and "null" are YAML's null. */
static const char *
scalar(yaml_node_t *n)
{
	const char *s;

	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	s = (const char *)n->data.scalar.value;
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || s[0] == '\0'))
		return NULL;
	return s;
}

static bool
is_null(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE && scalar(n) == NULL;
}

/* Calls @fn on each scalar item of a sequence node (a null node is empty). */
static int
each_item(struct walk *w, yaml_node_t *seq, const char *what,
	  int (*fn)(struct walk *w, const char *s, void *arg), void *arg)
{
	if (!seq || is_null(seq))
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE) {
		say(w->why, w->why_len, "%s must be a list", what);
		return -EINVAL;
	}
	for (yaml_node_item_t *it = seq->data.sequence.items.start;
	     it < seq->data.sequence.items.top; it++) {
		yaml_node_t *n = yaml_document_get_node(w->doc, *it);
		const char *s = scalar(n);
		int err;

		if (!n || n->type != YAML_SCALAR_NODE) {
			say(w->why, w->why_len, "%s: every item must be a string", what);
			return -EINVAL;
		}
		if (!s)
			continue;
		if ((err = fn(w, s, arg)) != 0)
			return err;
	}
	return 0;
}

static int
addr_item(struct walk *w, const char *s, void *arg)
{
	int err = addrs_parse(s, arg);

	if (err == -EAFNOSUPPORT) {
		say(w->why, w->why_len, "address pattern '%.64s': IPv6 is not supported", s);
		err = -EINVAL;
	} else if (err == -ENOMEM)
		say(w->why, w->why_len, "out of memory");
	else if (err)
		say(w->why, w->why_len,
		    "bad address pattern '%.64s' (expected *, 1.2.3.4, 1.2.3.*, 1.2.3.4-9, "
		    "1.2.3.{4,5} or a,b,c)",
		    s);
	return err;
}

struct res_arg {
	struct acl_account *acc;
	bool group;
};

static int
res_item(struct walk *w, const char *s, void *arg)
{
	struct res_arg *ra = arg;
	struct acl_account *acc = ra->acc;
	const char *eq = strchr(s, '=');
	const char *b = s, *e;
	struct acl_res *v;
	uint8_t perm;

	if (!eq || strchr(eq + 1, '=')) {
		say(w->why, w->why_len,
		    "account %s: %s '%.64s' is not name=PERM (for example topicA=SUB)", acc->ak,
		    ra->group ? "groupPerms" : "topicPerms", s);
		return -EINVAL;
	}
	if (perm_parse(eq + 1, &perm, true) != 0) {
		say(w->why, w->why_len,
		    "account %s: %s '%.64s': the permission must be PUB, SUB, PUB|SUB or DENY",
		    acc->ak, ra->group ? "groupPerms" : "topicPerms", s);
		return -EINVAL;
	}
	while (b < eq && (*b == ' ' || *b == '\t'))
		b++;
	e = eq;
	while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if (e == b || acc->nres >= ACL_RES_MAX) {
		say(w->why, w->why_len, "account %s: %s '%.64s': %s", acc->ak,
		    ra->group ? "groupPerms" : "topicPerms", s,
		    e == b ? "empty name" : "too many entries");
		return -EINVAL;
	}
	v = realloc(acc->res, (acc->nres + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	acc->res = v;
	v = &acc->res[acc->nres];
	v->group = ra->group;
	if (!ra->group && e - b > 7 && memcmp(b, "%RETRY%", 7) == 0) {
		v->group = true; /* RocketMQ keys groups as their retry topic */
		b += 7;
	}
	v->name = strndup(b, (size_t)(e - b));
	if (!v->name)
		return -ENOMEM;
	v->perm = perm;
	acc->nres++;
	return 0;
}

static yaml_node_t *
map_get(struct walk *w, yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);

		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(w->doc, p->value);
	}
	return NULL;
}

static int
account(struct walk *w, yaml_node_t *m, struct acl_account *acc, unsigned idx)
{
	const char *ak, *sk, *s;
	yaml_node_t *n;
	struct res_arg ra = {.acc = acc};
	int err;

	if (m->type != YAML_MAPPING_NODE) {
		say(w->why, w->why_len, "accounts[%u] must be a mapping", idx);
		return -EINVAL;
	}
	ak = scalar(map_get(w, m, "accessKey"));
	sk = scalar(map_get(w, m, "secretKey"));
	if (!ak || !sk || strlen(ak) < ACL_KEY_MIN || strlen(sk) < ACL_KEY_MIN ||
	    strlen(ak) > ACL_KEY_MAX || strlen(sk) > ACL_KEY_MAX) {
		say(w->why, w->why_len,
		    "accounts[%u]: accessKey and secretKey are required, %d to %d characters", idx,
		    ACL_KEY_MIN, ACL_KEY_MAX);
		return -EINVAL;
	}
	for (const char *p = ak; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			say(w->why, w->why_len, "accounts[%u]: accessKey has a control character",
			    idx);
			return -EINVAL;
		}
	acc->ak = strdup(ak);
	acc->sk = strdup(sk);
	if (!acc->ak || !acc->sk)
		return -ENOMEM;
	hmac_sha1_key(&acc->key, sk, strlen(sk));
	n = map_get(w, m, "whiteRemoteAddress");
	if (n && !is_null(n)) {
		if (n->type != YAML_SCALAR_NODE) {
			say(w->why, w->why_len, "account %s: whiteRemoteAddress must be a string",
			    ak);
			return -EINVAL;
		}
		if ((err = addr_item(w, scalar(n), &acc->white)) != 0)
			return err;
	}
	s = scalar(map_get(w, m, "admin"));
	acc->admin =
		s && (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0);
	if (s && !acc->admin && strcmp(s, "false") != 0 && strcmp(s, "False") != 0 &&
	    strcmp(s, "FALSE") != 0) {
		say(w->why, w->why_len, "account %s: admin must be true or false", ak);
		return -EINVAL;
	}
	s = scalar(map_get(w, m, "defaultTopicPerm"));
	acc->def_topic = ACL_DENY;
	if (s && perm_parse(s, &acc->def_topic, true) != 0) {
		say(w->why, w->why_len,
		    "account %s: defaultTopicPerm must be PUB, SUB, PUB|SUB or DENY", ak);
		return -EINVAL;
	}
	s = scalar(map_get(w, m, "defaultGroupPerm"));
	acc->def_group = ACL_DENY;
	if (s && perm_parse(s, &acc->def_group, true) != 0) {
		say(w->why, w->why_len,
		    "account %s: defaultGroupPerm must be PUB, SUB, PUB|SUB or DENY", ak);
		return -EINVAL;
	}
	ra.group = false;
	if ((err = each_item(w, map_get(w, m, "topicPerms"), "topicPerms", res_item, &ra)) != 0)
		return err;
	ra.group = true;
	if ((err = each_item(w, map_get(w, m, "groupPerms"), "groupPerms", res_item, &ra)) != 0)
		return err;
	if (acc->nres)
		qsort(acc->res, acc->nres, sizeof(*acc->res), res_cmp);
	return 0;
}

static void
account_free(struct acl_account *acc)
{
	if (acc->sk) {
		memset(acc->sk, 0, strlen(acc->sk));
		free(acc->sk);
	}
	memset(&acc->key, 0, sizeof(acc->key));
	free(acc->ak);
	free(acc->white.v);
	for (uint32_t i = 0; i < acc->nres; i++)
		free(acc->res[i].name);
	free(acc->res);
}

void
acl_free(struct acl *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; i < a->n; i++)
		account_free(&a->acc[i]);
	free(a->acc);
	free(a->global.v);
	free(a);
}

int
acl_parse(const char *text, size_t len, struct acl **out, char *why, size_t why_len)
{
	yaml_parser_t p;
	yaml_document_t doc;
	struct walk w = {.doc = &doc, .why = why, .why_len = why_len};
	yaml_node_t *root, *n;
	struct acl *a;
	int err = -EINVAL;

	*out = NULL;
	if (len > ACL_FILE_MAX) {
		say(why, why_len, "the ACL file is over %u bytes", ACL_FILE_MAX);
		return -E2BIG;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (!yaml_parser_initialize(&p)) {
		free(a);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &doc)) {
		say(why, why_len, "YAML error at line %zu: %s", p.problem_mark.line + 1,
		    p.problem ? p.problem : "unknown");
		yaml_parser_delete(&p);
		free(a);
		return -EINVAL;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		say(why, why_len, "the ACL file is empty");
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		say(why, why_len,
		    "the ACL file must be a mapping (globalWhiteRemoteAddresses, accounts)");
		goto out;
	}
	err = each_item(&w, map_get(&w, root, "globalWhiteRemoteAddresses"),
			"globalWhiteRemoteAddresses", addr_item, &a->global);
	if (err)
		goto out;
	n = map_get(&w, root, "accounts");
	if (n && !is_null(n)) {
		if (n->type != YAML_SEQUENCE_NODE) {
			say(why, why_len, "accounts must be a list");
			err = -EINVAL;
			goto out;
		}
		size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);

		if (cnt > ACL_ACCOUNTS_MAX) {
			say(why, why_len, "more than %u accounts", ACL_ACCOUNTS_MAX);
			err = -EINVAL;
			goto out;
		}
		a->acc = calloc(cnt ? cnt : 1, sizeof(*a->acc));
		if (!a->acc) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < cnt; i++) {
			yaml_node_t *m =
				yaml_document_get_node(&doc, n->data.sequence.items.start[i]);

			a->n++;
			if (!m || (err = account(&w, m, &a->acc[i], (unsigned)i)) != 0) {
				if (!m) {
					say(why, why_len, "accounts[%zu] is missing", i);
					err = -EINVAL;
				}
				goto out;
			}
		}
		qsort(a->acc, a->n, sizeof(*a->acc), acc_cmp);
		for (uint32_t i = 1; i < a->n; i++)
			if (strcmp(a->acc[i - 1].ak, a->acc[i].ak) == 0) {
				say(why, why_len, "accessKey %s appears twice", a->acc[i].ak);
				err = -EINVAL;
				goto out;
			}
	}
	err = 0;
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	if (err == -ENOMEM)
		say(why, why_len, "out of memory");
	if (err) {
		acl_free(a);
		return err;
	}
	*out = a;
	return 0;
}

static uint64_t
st_sig_of(const struct stat *st)
{
	return (uint64_t)st->st_ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)st->st_dev << 48 ^
	       (uint64_t)st->st_mtim.tv_sec * 1000000000ull ^ (uint64_t)st->st_mtim.tv_nsec ^
	       (uint64_t)st->st_size << 20 ^ (uint64_t)st->st_mode << 7;
}

bool
acl_changed(const char *path, uint64_t st_sig)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return st_sig != 0;
	return st_sig_of(&st) != st_sig;
}

int
acl_load(const char *path, struct acl **out, uint64_t *st_sig, char *why, size_t why_len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, err;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		say(why, why_len, "cannot open the ACL file %s: %s", path, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) != 0) {
		err = -errno;
		close(fd);
		say(why, why_len, "cannot stat the ACL file %s: %s", path, strerror(-err));
		return err;
	}
	if (st_sig)
		*st_sig = st_sig_of(&st); /* also on error: a caller says so once per change */
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		close(fd);
		say(why, why_len,
		    "the ACL file %s holds secret keys but others may read or write it (mode "
		    "%04o): "
		    "chmod 600 it",
		    path, (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	if ((uint64_t)st.st_size > ACL_FILE_MAX) {
		close(fd);
		say(why, why_len, "the ACL file %s is over %u bytes", path, ACL_FILE_MAX);
		return -E2BIG;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	err = acl_parse(buf, got, out, why, why_len);
	memset(buf, 0, got);
	free(buf);
	return err;
}

int
acl_watch_start(struct acl_watch *w, const char *path, struct acl **out, char *why, size_t why_len)
{
	if (strlen(path) >= sizeof(w->path)) {
		say(why, why_len, "the ACL file's path is too long");
		return -ENAMETOOLONG;
	}
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->next_ms = 0;
	return acl_load(path, out, &w->sig, why, why_len);
}

int
acl_watch_poll(struct acl_watch *w, uint64_t now_ms, uint32_t every_ms, struct acl **out, char *why,
	       size_t why_len)
{
	uint64_t sig = 0;
	int err;

	if (!w->path[0] || now_ms < w->next_ms)
		return 0;
	w->next_ms = now_ms + every_ms;
	if (!acl_changed(w->path, w->sig))
		return 0;
	err = acl_load(w->path, out, &sig, why, why_len);
	w->sig = sig; /* a bad file is said once per change (0: gone; said when it is back) */
	return err ? err : 1;
}
