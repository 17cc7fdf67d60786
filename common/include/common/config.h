/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - RocketMQ-style properties configuration.
 *
 * A program declares every key it accepts in a table of struct cfg_key
 * (name, type, default, range, help). Values come from, in order of
 * precedence: defaults < properties file (-c FILE) < command line
 * (--key=value). Files use Java properties syntax as RocketMQ writes it:
 * "key=value" (or "key: value", or "key value"), '#' and '!' comments, blank
 * lines, leading and trailing blanks ignored, Java escapes (\t \n \r \f \\
 * \uXXXX). A trailing-backslash continuation line is rejected with an error.
 *
 * Every error names where it came from: "broker.conf:12: key 'listenPort':
 * value 70000 out of range [1, 65535]". An unknown key is an error, except
 * keys declared CFG_IGNORED (RocketMQ keys sprocket does not need), which are
 * accepted with a one-line notice so an existing broker.properties starts.
 *
 * Ownership: a struct cfg is built and filled at startup by one thread, then
 * read-only; readers on any thread may call cfg_get_*() without locks.
 */
#ifndef SP_COMMON_CONFIG_H
#define SP_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

enum cfg_type {
	CFG_BOOL,   /* true|false, case-insensitive; anything else is an error, where
		     * Java's Boolean.parseBoolean would quietly read false */
	CFG_INT,    /* signed 64-bit decimal, checked against [min, max] */
	CFG_STRING, /* any bytes up to CFG_VALUE_MAX, optional length range [min, max] */
	CFG_ENUM,   /* one of a NULL-terminated list of choices (exact match) */
	CFG_IGNORED /* RocketMQ key accepted with a notice, value not used */
};

#define CFG_VALUE_MAX 1024
#define CFG_ERR_MAX 512

struct cfg_key {
	const char *name;
	enum cfg_type type;
	/* Default in text form, parsed like a file value; NULL only for STRING ("") and IGNORED. */
	const char *def;
	/* CFG_INT: value range; CFG_STRING: length range (<= CFG_VALUE_MAX).
	 * min == max == 0 declares no range (any int64 / any length). */
	int64_t min;
	int64_t max;
	const char *const *choices; /* CFG_ENUM only */
	const char *help;
	bool secret; /* never shown: cfg_to_text() writes "******" when set */
};

struct cfg;

struct cfg_err {
	char msg[CFG_ERR_MAX];
};

/**
 * cfg_create() - a configuration holding the defaults of @keys.
 * @keys: table that must outlive the cfg; names unique.
 * @err: filled on error; every function here accepts NULL for no message.
 *
 * Context: startup. Allocates.
 * Return: 0, -ENOMEM, or -EINVAL when the table is malformed (duplicate name,
 * bad range, enum without choices) or a default does not parse (@err says which).
 */
MUST_CHECK int cfg_create(const struct cfg_key *keys, size_t n_keys, struct cfg **out,
			  struct cfg_err *err);
void cfg_destroy(struct cfg *cfg);

/**
 * cfg_set() - set one key from text.
 * @src: where the value came from ("broker.conf", "command line"), for errors.
 * @line: line number in @src, 0 when not from a file.
 *
 * A CFG_IGNORED key logs one info line (tag "common.config") and is accepted.
 * On error the previous value is kept.
 *
 * Context: startup, the thread that owns @cfg. Never allocates.
 * Return: 0, -ENOENT unknown key, -EINVAL bad value or out of range.
 */
MUST_CHECK int cfg_set(struct cfg *cfg, const char *key, const char *value, const char *src,
		       unsigned line, struct cfg_err *err);

/**
 * cfg_parse_buf() - apply a properties text; stops at the first error.
 * @name: file name used in errors.
 *
 * Context: startup. The buffer is untrusted (fuzzed): bounded, never crashes.
 * Return: 0, or the first cfg_set() error / -EINVAL for a bad line.
 */
MUST_CHECK int cfg_parse_buf(struct cfg *cfg, const char *name, const char *buf, size_t len,
			     struct cfg_err *err);

/* Return: 0, -errno when the file cannot be read, -EFBIG when it is not a
 * regular file of at most 1 MiB, or a cfg_parse_buf() error. */
MUST_CHECK int cfg_load_file(struct cfg *cfg, const char *path, struct cfg_err *err);

/**
 * cfg_parse_args() - apply "-c FILE" then every "--key=value" (command line wins
 * whatever the order). "-h"/"--help" sets *@help and returns 0 without loading
 * or applying anything (so help works with a broken config). Arguments that are
 * neither, a second -c, or "--key" without '=' are an error. argv[0] is skipped.
 *
 * Context: startup.
 * Return: 0 or the first error (-EINVAL, -ENOENT, or a cfg_load_file() error).
 */
MUST_CHECK int cfg_parse_args(struct cfg *cfg, int argc, char *const argv[], bool *help,
			      struct cfg_err *err);

/**
 * cfg_to_text() - every key's current value as properties text, one
 * "key=value\n" per key in table order (ignored RocketMQ keys left out):
 * GET_BROKER_CONFIG's and GET_NAMESRV_CONFIG's body.
 * Return: 0 and a malloc'd NUL-terminated *@out (caller frees), -ENOMEM.
 */
MUST_CHECK int cfg_to_text(const struct cfg *cfg, char **out, size_t *out_len);

/* Getters: the key must be declared with the matching type (BASSERT). */
int64_t cfg_get_int(const struct cfg *cfg, const char *key);
bool cfg_get_bool(const struct cfg *cfg, const char *key);
const char *cfg_get_str(const struct cfg *cfg, const char *key); /* STRING and ENUM */

/* Return: true when @key (declared, BASSERT) was set by a file or the command line. */
bool cfg_is_set(const struct cfg *cfg, const char *key);

/* Writes "  name (type, default X): help" lines for --help to @fd (ignored keys
 * are only counted). */
void cfg_print_help(const struct cfg *cfg, int fd);

#endif /* SP_COMMON_CONFIG_H */
