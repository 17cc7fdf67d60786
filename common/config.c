// SPDX-License-Identifier: Apache-2.0
/*
 * config.c - RocketMQ-style properties configuration.
 *
 * RocketMQ brokers start from a broker.properties file read with Java's
 * Properties.load() and copied into config objects by name. sprocket keeps
 * that file format so an existing broker.properties starts unchanged, but
 * it is stricter where Java is silently lax: an unknown key, a bool that is
 * not true/false, an int with trailing junk or out of range, all stop the
 * start with a message naming the file, the line and the key. A broker
 * that starts with a typo'd key and its default value is a worse outcome
 * than one that refuses to start.
 *
 * Values are converted and range-checked once, when set; getters only read.
 * Each string key owns a CFG_VALUE_MAX + 1 byte buffer allocated by
 * cfg_create(), so setting a value never allocates and a failed set leaves
 * the old value in place (validate fully, then commit).
 *
 * DESIGN
 *
 * The file parser works on (buf, len) and never on C strings: the input may
 * contain anything (it is fuzzed), including NUL bytes, which are rejected.
 * A logical line is unescaped into fixed stack buffers (key and value) with
 * explicit bounds, so memory is bounded whatever the input. Java's syntax is
 * followed where it matters for real files: the key ends at the first
 * unescaped '=', ':' or blank; one '=' or ':' may follow blanks; '#'/'!'
 * lines are comments; \t \n \r \f \\ \uXXXX escapes; lines end in LF, CRLF
 * or CR. Two deliberate differences: trailing blanks of a value are dropped
 * (RocketMQ trims values anyway) and a trailing-backslash continuation line
 * is an error rather than a join, since no broker.properties needs one and
 * a stray backslash silently swallowing the next key is a bad surprise.
 *
 * Command line values win over the file whatever their order: -c FILE is
 * applied first, then every --key=value in order.
 *
 * Size: about 1,000 lines because it is one parser and its checks (types, ranges, unknown keys, the
 * properties file's escapes) over one key table.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/err.h"
#include "common/log.h"

#define CFG_KEY_MAX 128		/* longest key name, bytes, NUL excluded */
#define CFG_FILE_MAX (1u << 20) /* a properties file larger than this is refused */
#define CFG_QUOTE_MAX 64	/* bytes of a key/value echoed in an error */
#define CFG_SRC_CMDLINE "command line"

struct cfg_val {
	int64_t i;	    /* CFG_INT value; CFG_STRING length */
	bool b;		    /* CFG_BOOL */
	bool set;	    /* set from a file or the command line */
	const char *choice; /* CFG_ENUM: points into the key's choices */
	char *s;	    /* CFG_STRING: CFG_VALUE_MAX + 1 bytes, owned */
};

/*
 * Ownership: built and filled by the starting thread, read-only afterwards
 * (any thread may read without locks).
 */
struct cfg {
	/* immutable after create */
	const struct cfg_key *keys;
	size_t n_keys;
	size_t *order; /* indexes into keys, sorted by name */
	/* written while parsing, read-only afterwards */
	struct cfg_val *vals;
};

/*
 * Copy up to CFG_QUOTE_MAX bytes of @s into @dst for an error message:
 * printable ASCII as is, anything else as \xNN, "..." when cut. The input
 * is untrusted and may hold terminal escapes.
 */
static void
cfg_quote(char *dst, size_t dst_size, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	size_t i;

	for (i = 0; i < len && i < CFG_QUOTE_MAX && o + 5 < dst_size; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f) {
			dst[o++] = (char)c;
		} else {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[c >> 4];
			dst[o++] = hex[c & 15];
		}
	}
	if (i < len && o + 4 <= dst_size) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

/*
 * Format "<src>[:<line>]: [key '<key>': ]<message>" into @err and return @rc.
 * @err may be NULL when the caller does not want the text.
 */
static int cfg_fail(struct cfg_err *err, int rc, const char *src, unsigned line, const char *key,
		    const char *fmt, ...) SP_PRINTF(6, 7);

static int
cfg_fail(struct cfg_err *err, int rc, const char *src, unsigned line, const char *key,
	 const char *fmt, ...)
{
	char qkey[CFG_QUOTE_MAX * 4 + 8];
	size_t n = 0;
	va_list ap;
	int r;

	if (err == NULL)
		return rc;
	if (src == NULL)
		src = "config";
	if (line > 0)
		r = snprintf(err->msg, sizeof(err->msg), "%s:%u: ", src, line);
	else
		r = snprintf(err->msg, sizeof(err->msg), "%s: ", src);
	if (r > 0)
		n = SP_MIN((size_t)r, sizeof(err->msg) - 1);
	if (key != NULL) {
		cfg_quote(qkey, sizeof(qkey), key, strlen(key));
		r = snprintf(err->msg + n, sizeof(err->msg) - n, "key '%s': ", qkey);
		if (r > 0)
			n = SP_MIN(n + (size_t)r, sizeof(err->msg) - 1);
	}
	va_start(ap, fmt);
	vsnprintf(err->msg + n, sizeof(err->msg) - n, fmt, ap);
	va_end(ap);
	return rc;
}

static const char *
cfg_type_name(enum cfg_type t)
{
	switch (t) {
	case CFG_BOOL:
		return "bool";
	case CFG_INT:
		return "int";
	case CFG_STRING:
		return "string";
	case CFG_ENUM:
		return "enum";
	case CFG_IGNORED:
		return "ignored";
	}
	return "?";
}

/* min == max == 0 declares no range: the whole int64 range / any length. */
static void
cfg_int_range(const struct cfg_key *k, int64_t *min, int64_t *max)
{
	if (k->min == 0 && k->max == 0) {
		*min = INT64_MIN;
		*max = INT64_MAX;
	} else {
		*min = k->min;
		*max = k->max;
	}
}

static void
cfg_len_range(const struct cfg_key *k, int64_t *min, int64_t *max)
{
	if (k->min == 0 && k->max == 0) {
		*min = 0;
		*max = CFG_VALUE_MAX;
	} else {
		*min = k->min;
		*max = k->max;
	}
}

/*
 * Strict decimal int64: optional sign, at least one digit, nothing else.
 * Accumulates negatively so INT64_MIN parses without overflow.
 * Return: 0, -EINVAL not a number, -ERANGE outside int64.
 */
static int
cfg_parse_int64(const char *s, int64_t *out)
{
	bool neg = false;
	int64_t acc = 0;

	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (*s == '\0')
		return -EINVAL;
	for (; *s != '\0'; s++) {
		int d;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		d = *s - '0';
		if (acc < (INT64_MIN + d) / 10)
			goto err_range;
		acc = acc * 10 - d;
	}
	if (!neg) {
		if (acc == INT64_MIN)
			return -ERANGE;
		acc = -acc;
	}
	*out = acc;
	return 0;

err_range:
	/* Still reject junk after an overlong number as junk, not as a range error. */
	for (; *s != '\0'; s++)
		if (*s < '0' || *s > '9')
			return -EINVAL;
	return -ERANGE;
}

static const struct cfg_key *
cfg_lookup(const struct cfg *cfg, const char *name, size_t *idx)
{
	size_t lo = 0;
	size_t hi = cfg->n_keys;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		size_t i = cfg->order[mid];
		int c = strcmp(name, cfg->keys[i].name);

		if (c == 0) {
			*idx = i;
			return &cfg->keys[i];
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/*
 * Validate @value for @k and, when it is good, store it in @v. Nothing is
 * written on error, so a failed set keeps the previous value.
 */
static int
cfg_assign(const struct cfg_key *k, struct cfg_val *v, const char *value, const char *src,
	   unsigned line, struct cfg_err *err)
{
	size_t len = strnlen(value, CFG_VALUE_MAX + 1);
	char qval[CFG_QUOTE_MAX * 4 + 8];
	int64_t min;
	int64_t max;
	int64_t i;
	int rc;

	if (len > CFG_VALUE_MAX)
		return cfg_fail(err, -EINVAL, src, line, k->name, "value longer than %d bytes",
				CFG_VALUE_MAX);
	cfg_quote(qval, sizeof(qval), value, len);

	switch (k->type) {
	case CFG_BOOL:
		if (strcasecmp(value, "true") == 0)
			v->b = true;
		else if (strcasecmp(value, "false") == 0)
			v->b = false;
		else
			return cfg_fail(err, -EINVAL, src, line, k->name,
					"value '%s' is not true or false", qval);
		return 0;

	case CFG_INT:
		rc = cfg_parse_int64(value, &i);
		if (rc == -EINVAL)
			return cfg_fail(err, -EINVAL, src, line, k->name,
					"value '%s' is not a decimal integer", qval);
		cfg_int_range(k, &min, &max);
		if (rc == -ERANGE)
			return cfg_fail(err, -EINVAL, src, line, k->name,
					"value %s out of range [%lld, %lld]", qval, (long long)min,
					(long long)max);
		if (i < min || i > max)
			return cfg_fail(err, -EINVAL, src, line, k->name,
					"value %lld out of range [%lld, %lld]", (long long)i,
					(long long)min, (long long)max);
		v->i = i;
		return 0;

	case CFG_STRING:
		cfg_len_range(k, &min, &max);
		if ((int64_t)len < min || (int64_t)len > max)
			return cfg_fail(err, -EINVAL, src, line, k->name,
					"value length %zu out of range [%lld, %lld]", len,
					(long long)min, (long long)max);
		memcpy(v->s, value, len + 1);
		v->i = (int64_t)len;
		return 0;

	case CFG_ENUM: {
		char list[CFG_ERR_MAX / 2];
		size_t n = 0;

		for (const char *const *c = k->choices; *c != NULL; c++) {
			if (strcmp(value, *c) == 0) {
				v->choice = *c;
				return 0;
			}
		}
		list[0] = '\0';
		for (const char *const *c = k->choices; *c != NULL && n < sizeof(list); c++) {
			int r = snprintf(list + n, sizeof(list) - n, "%s%s",
					 c == k->choices ? "" : "|", *c);

			if (r < 0)
				break;
			n += (size_t)r;
		}
		return cfg_fail(err, -EINVAL, src, line, k->name, "value '%s' is not one of %s",
				qval, list);
	}

	case CFG_IGNORED:
		return 0;
	}
	return cfg_fail(err, -EINVAL, src, line, k->name, "bad type %d in key table", (int)k->type);
}

static int
cfg_check_key(const struct cfg_key *k, struct cfg_err *err)
{
	static const char src[] = "key table";

	if (k->name == NULL || k->name[0] == '\0' || strlen(k->name) > CFG_KEY_MAX)
		return cfg_fail(err, -EINVAL, src, 0, NULL, "empty or overlong key name");
	switch (k->type) {
	case CFG_BOOL:
	case CFG_IGNORED:
		break;
	case CFG_INT:
		if (k->min > k->max)
			return cfg_fail(err, -EINVAL, src, 0, k->name, "min > max");
		break;
	case CFG_STRING:
		if (k->min < 0 || k->min > k->max || k->max > CFG_VALUE_MAX)
			return cfg_fail(err, -EINVAL, src, 0, k->name,
					"length range [%lld, %lld] not within [0, %d]",
					(long long)k->min, (long long)k->max, CFG_VALUE_MAX);
		break;
	case CFG_ENUM:
		if (k->choices == NULL || k->choices[0] == NULL)
			return cfg_fail(err, -EINVAL, src, 0, k->name, "enum without choices");
		break;
	default:
		return cfg_fail(err, -EINVAL, src, 0, k->name, "bad type %d", (int)k->type);
	}
	if (k->def == NULL && k->type != CFG_STRING && k->type != CFG_IGNORED)
		return cfg_fail(err, -EINVAL, src, 0, k->name, "%s key without a default",
				cfg_type_name(k->type));
	return 0;
}

/* Insertion sort of the lookup index: tables are small and this runs once. */
static void
cfg_sort_order(const struct cfg_key *keys, size_t *order, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		size_t cur = order[i];
		size_t j = i;

		while (j > 0 && strcmp(keys[order[j - 1]].name, keys[cur].name) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = cur;
	}
}

int
cfg_create(const struct cfg_key *keys, size_t n_keys, struct cfg **out, struct cfg_err *err)
{
	struct cfg *cfg;
	int rc = -ENOMEM;

	BASSERT(out != NULL && (keys != NULL || n_keys == 0));
	*out = NULL;
	for (size_t i = 0; i < n_keys; i++) {
		rc = cfg_check_key(&keys[i], err);
		if (rc != 0)
			return rc;
	}

	cfg = calloc(1, sizeof(*cfg));
	if (cfg == NULL)
		return cfg_fail(err, -ENOMEM, "config", 0, NULL, "out of memory");
	cfg->keys = keys;
	cfg->n_keys = n_keys;
	cfg->order = calloc(n_keys ? n_keys : 1, sizeof(*cfg->order));
	cfg->vals = calloc(n_keys ? n_keys : 1, sizeof(*cfg->vals));
	if (cfg->order == NULL || cfg->vals == NULL)
		goto err_free;

	for (size_t i = 0; i < n_keys; i++) {
		cfg->order[i] = i;
		if (keys[i].type == CFG_STRING) {
			cfg->vals[i].s = calloc(1, CFG_VALUE_MAX + 1);
			if (cfg->vals[i].s == NULL)
				goto err_free;
		}
	}
	cfg_sort_order(keys, cfg->order, n_keys);
	for (size_t i = 1; i < n_keys; i++) {
		if (strcmp(keys[cfg->order[i - 1]].name, keys[cfg->order[i]].name) == 0) {
			rc = cfg_fail(err, -EINVAL, "key table", 0, keys[cfg->order[i]].name,
				      "declared twice");
			goto err_free_quiet;
		}
	}

	for (size_t i = 0; i < n_keys; i++) {
		const char *def = keys[i].def != NULL ? keys[i].def : "";

		rc = cfg_assign(&keys[i], &cfg->vals[i], def, "default", 0, err);
		if (rc != 0)
			goto err_free_quiet;
	}
	*out = cfg;
	return 0;

err_free:
	rc = cfg_fail(err, -ENOMEM, "config", 0, NULL, "out of memory");
err_free_quiet:
	cfg_destroy(cfg);
	return rc;
}

void
cfg_destroy(struct cfg *cfg)
{
	if (cfg == NULL)
		return;
	if (cfg->vals != NULL) {
		for (size_t i = 0; i < cfg->n_keys; i++)
			free(cfg->vals[i].s);
	}
	free(cfg->vals);
	free(cfg->order);
	free(cfg);
}

int
cfg_set(struct cfg *cfg, const char *key, const char *value, const char *src, unsigned line,
	struct cfg_err *err)
{
	const struct cfg_key *k;
	size_t idx;
	int rc;

	BASSERT(cfg != NULL && key != NULL && value != NULL);
	k = cfg_lookup(cfg, key, &idx);
	if (k == NULL)
		return cfg_fail(err, -ENOENT, src, line, key, "unknown key");
	if (k->type == CFG_IGNORED) {
		char qkey[CFG_QUOTE_MAX * 4 + 8];

		cfg_quote(qkey, sizeof(qkey), key, strlen(key));
		if (line > 0)
			log_info("common.config",
				 "%s:%u: key '%s' is not used by sprocket, ignored",
				 src != NULL ? src : "config", line, qkey);
		else
			log_info("common.config", "%s: key '%s' is not used by sprocket, ignored",
				 src != NULL ? src : "config", qkey);
	}
	rc = cfg_assign(k, &cfg->vals[idx], value, src, line, err);
	if (rc == 0)
		cfg->vals[idx].set = true;
	return rc;
}

static bool
cfg_is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\f';
}

static int
cfg_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Unescape one Java properties escape starting after the backslash at
 * s[*pos] (pos < end). Writes 1..3 bytes (UTF-8 for \uXXXX) to @out.
 * Return: bytes written, or -EINVAL for a malformed/NUL/surrogate \u escape.
 */
static int
cfg_unescape(const char *s, size_t end, size_t *pos, char out[4])
{
	unsigned cp = 0;
	char c;

	if (*pos >= end) /* unreachable: odd trailing backslashes are rejected first */
		return -EINVAL;
	c = s[(*pos)++];

	switch (c) {
	case 't':
		out[0] = '\t';
		return 1;
	case 'n':
		out[0] = '\n';
		return 1;
	case 'r':
		out[0] = '\r';
		return 1;
	case 'f':
		out[0] = '\f';
		return 1;
	case 'u':
		break;
	default:
		out[0] = c;
		return 1;
	}
	if (end - *pos < 4)
		return -EINVAL;
	for (int i = 0; i < 4; i++) {
		int h = cfg_hex(s[(*pos)++]);

		if (h < 0)
			return -EINVAL;
		cp = cp << 4 | (unsigned)h;
	}
	/* NUL cannot live in a C string; a lone UTF-16 surrogate has no UTF-8 form. */
	if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
		return -EINVAL;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	out[0] = (char)(0xe0 | cp >> 12);
	out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[2] = (char)(0x80 | (cp & 0x3f));
	return 3;
}

/*
 * Parse one logical line s[0, len) (no line terminator, leading blanks
 * already skipped, not a comment) and apply it.
 */
static int
cfg_parse_line(struct cfg *cfg, const char *name, unsigned lineno, const char *s, size_t len,
	       struct cfg_err *err)
{
	char key[CFG_KEY_MAX + 1];
	char val[CFG_VALUE_MAX + 1];
	size_t klen = 0;
	size_t vlen = 0;
	size_t vkeep = 0; /* vlen without trailing unescaped blanks */
	size_t pos = 0;
	size_t nbs = 0;
	char u[4];
	int n;

	/* An odd number of trailing backslashes is Java's line continuation. */
	while (nbs < len && s[len - 1 - nbs] == '\\')
		nbs++;
	if (nbs % 2 == 1)
		return cfg_fail(err, -EINVAL, name, lineno, NULL,
				"line continuation (trailing '\\') is not supported");

	while (pos < len && s[pos] != '=' && s[pos] != ':' && !cfg_is_blank(s[pos])) {
		if (s[pos] == '\\') {
			pos++;
			n = cfg_unescape(s, len, &pos, u);
			if (n < 0)
				return cfg_fail(err, -EINVAL, name, lineno, NULL,
						"malformed \\uXXXX escape in key");
		} else {
			u[0] = s[pos++];
			n = 1;
		}
		if (klen + (size_t)n > CFG_KEY_MAX)
			return cfg_fail(err, -EINVAL, name, lineno, NULL,
					"key longer than %d bytes", CFG_KEY_MAX);
		memcpy(key + klen, u, (size_t)n);
		klen += (size_t)n;
	}
	key[klen] = '\0';
	if (klen == 0)
		return cfg_fail(err, -EINVAL, name, lineno, NULL, "empty key");

	while (pos < len && cfg_is_blank(s[pos]))
		pos++;
	if (pos < len && (s[pos] == '=' || s[pos] == ':'))
		pos++;
	while (pos < len && cfg_is_blank(s[pos]))
		pos++;

	while (pos < len) {
		bool escaped = s[pos] == '\\';

		if (escaped) {
			pos++;
			n = cfg_unescape(s, len, &pos, u);
			if (n < 0)
				return cfg_fail(err, -EINVAL, name, lineno, key,
						"malformed \\uXXXX escape in value");
		} else {
			u[0] = s[pos++];
			n = 1;
		}
		if (vlen + (size_t)n > CFG_VALUE_MAX)
			return cfg_fail(err, -EINVAL, name, lineno, key,
					"value longer than %d bytes", CFG_VALUE_MAX);
		memcpy(val + vlen, u, (size_t)n);
		vlen += (size_t)n;
		if (escaped || !cfg_is_blank(u[0]))
			vkeep = vlen;
	}
	val[vkeep] = '\0';
	return cfg_set(cfg, key, val, name, lineno, err);
}

/* Append "; " and @msg to @acc (of CFG_ERR_MAX bytes), ending in "..." when it is full. */
static void
err_append(char *acc, size_t *len, const char *msg)
{
	size_t n = strlen(msg);
	size_t sep = *len > 0 ? 2 : 0;

	acc[*len] = '\0';
	if (*len + sep + n + 1 > CFG_ERR_MAX) {
		if (*len + 4 < CFG_ERR_MAX &&
		    strcmp(acc + (*len >= 3 ? *len - 3 : 0), "...") != 0) {
			memcpy(acc + *len, "...", 4);
			*len += 3;
		}
		return;
	}
	if (sep)
		memcpy(acc + *len, "; ", 2);
	memcpy(acc + *len + sep, msg, n + 1);
	*len += sep + n;
}

int
cfg_parse_buf(struct cfg *cfg, const char *name, const char *buf, size_t len, struct cfg_err *err)
{
	struct cfg_err one;
	char acc[CFG_ERR_MAX];
	size_t alen = 0;
	unsigned unknown = 0;
	unsigned lineno = 0;
	size_t pos = 0;

	BASSERT(cfg != NULL && (buf != NULL || len == 0));
	if (name == NULL)
		name = "config";
	/* A UTF-8 byte order mark written by some editors is not part of the first key. */
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		pos = 3;

	while (pos < len) {
		size_t start = pos;
		size_t end;
		const char *nul;
		int rc;

		if (lineno == UINT_MAX)
			return cfg_fail(err, -EINVAL, name, lineno, NULL, "too many lines");
		lineno++;
		while (pos < len && buf[pos] != '\n' && buf[pos] != '\r')
			pos++;
		end = pos;
		/* LF, CRLF or a lone CR ends a line, as in Properties.load(). */
		if (pos < len && buf[pos++] == '\r' && pos < len && buf[pos] == '\n')
			pos++;

		nul = memchr(buf + start, '\0', end - start);
		if (nul != NULL)
			return cfg_fail(err, -EINVAL, name, lineno, NULL, "NUL byte at column %zu",
					(size_t)(nul - (buf + start)) + 1);
		while (start < end && cfg_is_blank(buf[start]))
			start++;
		if (start == end || buf[start] == '#' || buf[start] == '!')
			continue;
		rc = cfg_parse_line(cfg, name, lineno, buf + start, end - start, &one);
		if (rc == -ENOENT) {
			/* Every unknown key of the file in one report, not one per start. */
			err_append(acc, &alen, one.msg);
			unknown++;
			continue;
		}
		if (rc != 0) {
			err_append(acc, &alen, one.msg);
			if (err != NULL)
				memcpy(err->msg, acc, alen + 1);
			return rc;
		}
	}
	if (unknown > 0) {
		if (err != NULL)
			memcpy(err->msg, acc, alen + 1);
		return -ENOENT;
	}
	return 0;
}

int
cfg_load_file(struct cfg *cfg, const char *path, struct cfg_err *err)
{
	struct stat st;
	size_t got = 0;
	char *buf;
	int fd;
	int rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cfg_fail(err, -errno, path, 0, NULL, "cannot open: %s", err_str(errno));
	if (fstat(fd, &st) != 0) {
		rc = cfg_fail(err, -errno, path, 0, NULL, "cannot stat: %s", err_str(errno));
		goto err_close;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > CFG_FILE_MAX) {
		rc = cfg_fail(err, -EFBIG, path, 0, NULL, "not a regular file of at most %u bytes",
			      CFG_FILE_MAX);
		goto err_close;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		rc = cfg_fail(err, -ENOMEM, path, 0, NULL, "out of memory");
		goto err_close;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = cfg_fail(err, -errno, path, 0, NULL, "cannot read: %s",
				      err_str(errno));
			goto err_free;
		}
		if (r == 0)
			break; /* shrank under us: parse what is there */
		got += (size_t)r;
	}
	close(fd);
	rc = cfg_parse_buf(cfg, path, buf, got, err);
	free(buf);
	return rc;

err_free:
	free(buf);
err_close:
	close(fd);
	return rc;
}

int
cfg_parse_args(struct cfg *cfg, int argc, char *const argv[], bool *help, struct cfg_err *err)
{
	char key[CFG_KEY_MAX + 1];
	const char *file = NULL;
	int rc;

	BASSERT(cfg != NULL && help != NULL && (argv != NULL || argc <= 0));
	*help = false;

	/* Pass 1: syntax, -c and -h, so no value is applied from a bad command line. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char qarg[CFG_QUOTE_MAX * 4 + 8];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			*help = true;
		} else if (strcmp(a, "-c") == 0) {
			if (i + 1 >= argc)
				return cfg_fail(err, -EINVAL, CFG_SRC_CMDLINE, 0, NULL,
						"-c needs a file name");
			if (file != NULL)
				return cfg_fail(err, -EINVAL, CFG_SRC_CMDLINE, 0, NULL,
						"-c given more than once");
			file = argv[++i];
		} else if (strncmp(a, "--", 2) == 0 && a[2] != '=' && strchr(a, '=') != NULL) {
			/* --key=value, checked in pass 2 */
		} else {
			cfg_quote(qarg, sizeof(qarg), a, strlen(a));
			return cfg_fail(
				err, -EINVAL, CFG_SRC_CMDLINE, 0, NULL,
				"unknown argument '%s' (expected -c FILE, --key=value or -h)",
				qarg);
		}
	}
	if (*help)
		return 0;

	if (file != NULL) {
		rc = cfg_load_file(cfg, file, err);
		if (rc != 0)
			return rc;
	}

	/* Pass 2: --key=value in order, after the file, so the command line wins. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *eq;
		size_t klen;

		if (strcmp(a, "-c") == 0) {
			i++;
			continue;
		}
		if (strncmp(a, "--", 2) != 0 || strcmp(a, "--help") == 0)
			continue;
		eq = strchr(a, '=');
		klen = (size_t)(eq - (a + 2));
		if (klen > CFG_KEY_MAX) {
			char qarg[CFG_QUOTE_MAX * 4 + 8];

			cfg_quote(qarg, sizeof(qarg), a + 2, klen);
			return cfg_fail(err, -ENOENT, CFG_SRC_CMDLINE, 0, NULL,
					"key '%s': unknown key", qarg);
		}
		memcpy(key, a + 2, klen);
		key[klen] = '\0';
		rc = cfg_set(cfg, key, eq + 1, CFG_SRC_CMDLINE, 0, err);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static const struct cfg_val *
cfg_val_of(const struct cfg *cfg, const char *key, enum cfg_type t1, enum cfg_type t2)
{
	const struct cfg_key *k;
	size_t idx;

	BASSERT(cfg != NULL && key != NULL);
	k = cfg_lookup(cfg, key, &idx);
	BASSERT(k != NULL);
	BASSERT(k->type == t1 || k->type == t2);
	return &cfg->vals[idx];
}

int64_t
cfg_get_int(const struct cfg *cfg, const char *key)
{
	return cfg_val_of(cfg, key, CFG_INT, CFG_INT)->i;
}

bool
cfg_get_bool(const struct cfg *cfg, const char *key)
{
	return cfg_val_of(cfg, key, CFG_BOOL, CFG_BOOL)->b;
}

const char *
cfg_get_str(const struct cfg *cfg, const char *key)
{
	const struct cfg_val *v = cfg_val_of(cfg, key, CFG_STRING, CFG_ENUM);

	return v->s != NULL ? v->s : v->choice;
}

bool
cfg_is_set(const struct cfg *cfg, const char *key)
{
	const struct cfg_key *k;
	size_t idx;

	BASSERT(cfg != NULL && key != NULL);
	k = cfg_lookup(cfg, key, &idx);
	BASSERT(k != NULL);
	return cfg->vals[idx].set;
}

/* Appends @n bytes to *@buf (grown by doubling). Return: 0, -ENOMEM. */
static int
text_add(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 1024;
		char *nb;

		while (*len + n + 1 > c)
			c *= 2;
		nb = realloc(*buf, c);
		if (nb == NULL)
			return -ENOMEM;
		*buf = nb;
		*cap = c;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

int
cfg_to_text(const struct cfg *cfg, char **out, size_t *out_len)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	BASSERT(cfg != NULL);
	for (size_t i = 0; i < cfg->n_keys && rc == 0; i++) {
		const struct cfg_key *k = &cfg->keys[i];
		const struct cfg_val *v = &cfg->vals[i];
		char num[24];
		const char *val = "";

		switch (k->type) {
		case CFG_BOOL:
			val = v->b ? "true" : "false";
			break;
		case CFG_INT:
			snprintf(num, sizeof(num), "%lld", (long long)v->i);
			val = num;
			break;
		case CFG_STRING:
			val = v->s != NULL ? v->s : "";
			if (k->secret && val[0])
				val = "******";
			break;
		case CFG_ENUM:
			val = v->choice != NULL ? v->choice : "";
			break;
		case CFG_IGNORED:
			continue;
		}
		rc = text_add(&buf, &len, &cap, k->name, strlen(k->name));
		if (rc == 0)
			rc = text_add(&buf, &len, &cap, "=", 1);
		if (rc == 0)
			rc = text_add(&buf, &len, &cap, val, strlen(val));
		if (rc == 0)
			rc = text_add(&buf, &len, &cap, "\n", 1);
	}
	if (rc == 0 && buf == NULL)
		rc = text_add(&buf, &len, &cap, "", 0);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

void
cfg_print_help(const struct cfg *cfg, int fd)
{
	size_t n_ignored = 0;

	BASSERT(cfg != NULL);
	/* Help output that fails to write has nowhere better to go: ignore errors. */
	for (size_t i = 0; i < cfg->n_keys; i++) {
		const struct cfg_key *k = &cfg->keys[i];
		const char *help = k->help != NULL ? k->help : "";
		const char *def = k->def != NULL ? k->def : "";
		int64_t min;
		int64_t max;

		switch (k->type) {
		case CFG_BOOL:
			dprintf(fd, "  %s (bool, default %s): %s\n", k->name, def, help);
			break;
		case CFG_INT:
			cfg_int_range(k, &min, &max);
			if (k->min == 0 && k->max == 0)
				dprintf(fd, "  %s (int, default %s): %s\n", k->name, def, help);
			else
				dprintf(fd, "  %s (int in [%lld, %lld], default %s): %s\n", k->name,
					(long long)min, (long long)max, def, help);
			break;
		case CFG_STRING:
			dprintf(fd, "  %s (string, default \"%s\"): %s\n", k->name, def, help);
			break;
		case CFG_ENUM:
			dprintf(fd, "  %s (one of ", k->name);
			for (const char *const *c = k->choices; *c != NULL; c++)
				dprintf(fd, "%s%s", c == k->choices ? "" : "|", *c);
			dprintf(fd, ", default %s): %s\n", def, help);
			break;
		case CFG_IGNORED:
			n_ignored++;
			break;
		}
	}
	if (n_ignored > 0)
		dprintf(fd, "  (%zu more RocketMQ keys are accepted and ignored)\n", n_ignored);
}
