/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acl.h - RocketMQ 4.9's plain ACL: accounts from a plain_acl.yml, who may
 * connect from where, and what each account may do with which topic and
 * group (docs/security.md).
 *
 * The file's format and its meaning are RocketMQ's: globalWhiteRemoteAddresses
 * (addresses that need no credentials at all), and accounts with accessKey,
 * secretKey (both longer than 6 characters), whiteRemoteAddress (addresses
 * this account needs no signature from), admin, defaultTopicPerm,
 * defaultGroupPerm, topicPerms and groupPerms ("name=PUB|SUB"). Address
 * patterns: "*", one address, "a,b,c", "1.2.3.{4,5}", "1.2.*", "1.2.3.4-9";
 * IPv4 only (the daemons listen on IPv4).
 *
 * Ownership: an acl is built by acl_parse() on the control thread and then
 * read-only; readers on other threads get it through RCU (the broker's
 * bk->acl, the NameServer's state). acl_free() after a grace period.
 */
#ifndef SP_COMMON_ACL_H
#define SP_COMMON_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "common/hmac.h"

/* RocketMQ's Permission bits. */
enum {
	ACL_DENY = 1,
	ACL_ANY = 2,
	ACL_PUB = 4,
	ACL_SUB = 8,
};

#define ACL_KEY_MIN 7 /* RocketMQ: "length should longer than 6" */
#define ACL_KEY_MAX 256
#define ACL_FILE_MAX (4u << 20)

struct acl_range {
	uint8_t lo[4];
	uint8_t hi[4];
};

struct acl_addrs {
	bool any;
	uint32_t n;
	struct acl_range *v;
};

struct acl_res {
	char *name;
	bool group;
	uint8_t perm;
};

struct acl_account {
	char *ak;
	char *sk;
	struct hmac_sha1 key; /* sk absorbed: copy, update with the content, final */
	struct acl_addrs white;
	bool admin;
	uint8_t def_topic;
	uint8_t def_group;
	uint32_t nres;
	struct acl_res *res; /* sorted by (group, name) */
};

struct acl {
	struct acl_addrs global;
	uint32_t n;
	struct acl_account *acc; /* sorted by ak */
};

/**
 * acl_parse() - a plain_acl.yml's text into a new acl.
 * @why: on error, a sentence naming what is wrong and where (@why_len bytes).
 * Context: control thread (allocates).
 * Return: 0, -EINVAL (bad YAML, key, permission or address; short or duplicate
 * keys), -E2BIG (over ACL_FILE_MAX), -ENOMEM.
 */
MUST_CHECK int acl_parse(const char *text, size_t len, struct acl **out, char *why, size_t why_len);

/**
 * acl_load() - acl_parse() of the file at @path. A file that others than its
 * owner may read is refused (-EACCES): it holds secret keys.
 * @st_sig: if not NULL, set to a signature of the file's identity and mtime,
 * for acl_changed().
 * Return: as acl_parse(), -errno of open/read, -EACCES.
 */
MUST_CHECK int acl_load(const char *path, struct acl **out, uint64_t *st_sig, char *why,
			size_t why_len);

/* Return: the file at @path is not the one whose acl_load() gave @st_sig. */
bool acl_changed(const char *path, uint64_t st_sig);

void acl_free(struct acl *a);

/*
 * A daemon's ACL file, watched: acl_watch_start() loads it (acl_load()),
 * acl_watch_poll() at most once per @every_ms loads it again when it changed.
 * Context: the thread that owns the watch.
 */
struct acl_watch {
	char path[4096];
	uint64_t sig;
	uint64_t next_ms;
};

/* Return: 0 and the first acl in *@out, or as acl_load() (the reason in @why). */
MUST_CHECK int acl_watch_start(struct acl_watch *w, const char *path, struct acl **out, char *why,
			       size_t why_len);

/*
 * Return: 0 nothing new; 1 the file changed and *@out is its new acl; < 0 it
 * changed and cannot be used (the reason in @why; said once per change, the
 * caller keeps what it has).
 */
int acl_watch_poll(struct acl_watch *w, uint64_t now_ms, uint32_t every_ms, struct acl **out,
		   char *why, size_t why_len);

/* Return: the account of @ak (@len bytes), or NULL. Context: any thread, read-only. */
const struct acl_account *acl_find(const struct acl *a, const char *ak, size_t len);

/* Return: @ip (network byte order) matches @l. */
bool acl_addrs_match(const struct acl_addrs *l, uint32_t ip);

/* Return: RocketMQ's Permission.checkPermission(needed, owned). */
bool acl_perm_ok(uint8_t needed, uint8_t owned);

/*
 * acl_allowed() - may @acc use @name (@len bytes; a group when @group; a
 * "%RETRY%g" name, as a topic or a group, is group g; a "%DLQ%g" name needs
 * both group g and the topic "%DLQ%g") with @needed? The account's own entry for the
 * resource decides, else its default for topics or groups; an admin with no
 * entries at all may do anything (RocketMQ's checkPerm).
 */
bool acl_allowed(const struct acl_account *acc, const char *name, size_t len, bool group,
		 uint8_t needed);

/* Is @name (@len bytes) a retry or dead-letter topic ("%RETRY%g", "%DLQ%g"), which acl_allowed() keys by its group? */
bool acl_group_topic(const char *name, size_t len);

/* "PUB", "SUB", "PUB|SUB", "DENY" for a permission (logs, errors). */
const char *acl_perm_name(uint8_t perm);

#endif /* SP_COMMON_ACL_H */
