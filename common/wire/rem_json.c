// SPDX-License-Identifier: Apache-2.0
/*
 * rem_json.c - a fast reader and writer for the JSON headers RocketMQ
 * clients send.
 *
 * json-c builds an object per member and a hash table per object: 5 us for
 * a SEND_MESSAGE_V2 header on this machine, a quarter of a remoting SEND's
 * round trip, and 1.25 us more for the three fields an ACL client adds
 * (docs/benchmarks.md). Headers have one form: a flat object of numbers and
 * strings, and extFields, an object of strings, numbers and booleans. This
 * reads that form in one pass, straight into the command and the scratch
 * area, allocating nothing.
 *
 * It accepts a strict subset of what the json-c path accepts and reads it to
 * the same result; anything else - an escape it does not decode, a byte
 * >= 0x80, a fraction or exponent, a nested value where json-c would take
 * one, a duplicate key, an odd blank - makes it give up (REM_FAST_BAIL) and
 * wire_rem_decode() runs json-c on the header, which decides. The fuzzer
 * (tests/fuzz/fuzz_remoting.c) holds it to that: whenever this reader
 * accepts a header, json-c accepts it too and yields the same command.
 *
 * The writer (wire__rem_json_write) prints what json-c prints for a command,
 * byte for byte (the same member order, the same escapes), without building
 * json-c's objects: 3.4 us a SEND response header before it. A command it
 * cannot print as json-c would (a key twice, a NUL inside a key, a header
 * bigger than the buffer) goes back to the json-c writer; the fuzzer
 * compares the two on every command it decodes.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "rem_priv.h"

struct rd {
	const uint8_t *p, *end;
	char *out;
	size_t cap, used;
};

static void
ws(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
hexv(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A byte that ends a plain run inside a string: the quote, the backslash, a control, non-ASCII. */
static inline bool
plain_stop(uint8_t c)
{
	return c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
}

/*
 * A string at r->p (the opening quote) into the scratch area, NUL-terminated.
 * Escapes: the two-character ones and \uXXXX of a character from U+0001 to
 * U+D7FF or U+E000 to U+FFFF (written as UTF-8). Return: 0, or BAIL.
 */
static int
str(struct rd *r, const char **out, uint32_t *len)
{
	size_t start = r->used;

	if (r->p >= r->end || *r->p != '"')
		return REM_FAST_BAIL;
	r->p++;
	for (;;) {
		uint8_t c;

		const uint8_t *q = r->p;

		/* A run of plain characters, copied at once. */
		while (q < r->end && !plain_stop(*q))
			q++;
		if ((size_t)(q - r->p) + 4 >= r->cap - r->used)
			return REM_FAST_BAIL;
		memcpy(r->out + r->used, r->p, (size_t)(q - r->p));
		r->used += (size_t)(q - r->p);
		r->p = q;
		if (r->p >= r->end)
			return REM_FAST_BAIL;
		c = *r->p++;
		if (c == '"')
			break;
		if (c < 0x20 || c >= 0x80)
			return REM_FAST_BAIL;
		if (c != '\\') {
			r->out[r->used++] = (char)c;
			continue;
		}
		if (r->p >= r->end)
			return REM_FAST_BAIL;
		c = *r->p++;
		switch (c) {
		case '"':
		case '\\':
		case '/':
			r->out[r->used++] = (char)c;
			break;
		case 'b':
			r->out[r->used++] = '\b';
			break;
		case 'f':
			r->out[r->used++] = '\f';
			break;
		case 'n':
			r->out[r->used++] = '\n';
			break;
		case 'r':
			r->out[r->used++] = '\r';
			break;
		case 't':
			r->out[r->used++] = '\t';
			break;
		case 'u': {
			unsigned u = 0;

			if (r->end - r->p < 4)
				return REM_FAST_BAIL;
			for (int i = 0; i < 4; i++) {
				int h = hexv(r->p[i]);

				if (h < 0)
					return REM_FAST_BAIL;
				u = u << 4 | (unsigned)h;
			}
			r->p += 4;
			if (u == 0 || (u >= 0xD800 && u <= 0xDFFF))
				return REM_FAST_BAIL;
			if (u < 0x80) {
				r->out[r->used++] = (char)u;
			} else if (u < 0x800) {
				r->out[r->used++] = (char)(0xC0 | u >> 6);
				r->out[r->used++] = (char)(0x80 | (u & 0x3F));
			} else {
				r->out[r->used++] = (char)(0xE0 | u >> 12);
				r->out[r->used++] = (char)(0x80 | (u >> 6 & 0x3F));
				r->out[r->used++] = (char)(0x80 | (u & 0x3F));
			}
			break;
		}
		default:
			return REM_FAST_BAIL;
		}
	}
	r->out[r->used] = '\0';
	*out = r->out + start;
	*len = (uint32_t)(r->used - start);
	r->used++;
	return 0;
}

/*
 * An integer as json-c prints it back: -?(0|[1-9][0-9]*), at most 18 digits
 * (so int64, printed as written), not "-0". Return: 0 with its text span, or BAIL.
 */
static int
num(struct rd *r, const uint8_t **b, size_t *n)
{
	const uint8_t *s = r->p;
	size_t digits = 0;

	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return REM_FAST_BAIL;
	if (*r->p == '0') {
		r->p++;
		digits = 1;
		if (s[0] == '-')
			return REM_FAST_BAIL;
	} else {
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
			r->p++;
			digits++;
		}
	}
	if (digits > 18)
		return REM_FAST_BAIL;
	if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
		return REM_FAST_BAIL;
	*b = s;
	*n = (size_t)(r->p - s);
	return 0;
}

static bool
lit(struct rd *r, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
		return false;
	r->p += n;
	return true;
}

static int
i32(struct rd *r, int32_t *out)
{
	const uint8_t *b;
	size_t n;
	int64_t v = 0;
	bool neg;

	if (num(r, &b, &n) != 0)
		return REM_FAST_BAIL;
	neg = b[0] == '-';
	for (size_t i = neg; i < n; i++)
		v = v * 10 + (b[i] - '0');
	if (neg)
		v = -v;
	if (v < INT32_MIN || v > INT32_MAX)
		return REM_FAST_BAIL; /* json-c's path says EPROTO */
	*out = (int32_t)v;
	return 0;
}

static int
ext(struct rd *r, struct wire_rem_cmd *cmd)
{
	if (lit(r, "null"))
		return 0;
	if (r->p >= r->end || *r->p != '{')
		return REM_FAST_BAIL;
	r->p++;
	ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		struct wire_kv kv;
		const uint8_t *b;
		size_t n;

		ws(r);
		if (str(r, &kv.key, &kv.key_len) != 0)
			return REM_FAST_BAIL;
		ws(r);
		if (r->p >= r->end || *r->p++ != ':')
			return REM_FAST_BAIL;
		ws(r);
		if (r->p >= r->end)
			return REM_FAST_BAIL;
		if (*r->p == '"') {
			if (str(r, &kv.val, &kv.val_len) != 0)
				return REM_FAST_BAIL;
		} else if (lit(r, "true")) {
			kv.val = "true";
			kv.val_len = 4;
		} else if (lit(r, "false")) {
			kv.val = "false";
			kv.val_len = 5;
		} else if (lit(r, "null")) {
			kv.val = NULL; /* json-c's path skips it */
		} else if (num(r, &b, &n) == 0) {
			if (r->used + n + 1 >= r->cap)
				return REM_FAST_BAIL;
			memcpy(r->out + r->used, b, n);
			r->out[r->used + n] = '\0';
			kv.val = r->out + r->used;
			kv.val_len = (uint32_t)n;
			r->used += n + 1;
		} else {
			return REM_FAST_BAIL;
		}
		for (unsigned i = 0; i < cmd->n_ext; i++)
			if (cmd->ext[i].key_len == kv.key_len &&
			    (kv.key_len == 0 || cmd->ext[i].key[0] == kv.key[0]) &&
			    memcmp(cmd->ext[i].key, kv.key, kv.key_len) == 0)
				return REM_FAST_BAIL; /* json-c keeps the last: let it */
		if (kv.val) {
			if (cmd->n_ext >= WIRE_REM_EXT_MAX)
				return REM_FAST_BAIL;
			cmd->ext[cmd->n_ext++] = kv;
		}
		ws(r);
		if (r->p >= r->end)
			return REM_FAST_BAIL;
		if (*r->p == ',') {
			r->p++;
			continue;
		}
		if (*r->p++ != '}')
			return REM_FAST_BAIL;
		return 0;
	}
}

int
wire__rem_json_fast(const uint8_t *hdr, size_t hlen, struct wire_rem_cmd *cmd, char *scratch,
		    size_t cap, size_t *used)
{
	struct rd r = {.p = hdr, .end = hdr + hlen, .out = scratch, .cap = cap};
	unsigned seen = 0; /* bit per known member: a duplicate bails */

	cmd->language = WIRE_LANG_JAVA;
	ws(&r);
	if (r.p >= r.end || *r.p++ != '{')
		return REM_FAST_BAIL;
	ws(&r);
	if (r.p < r.end && *r.p == '}') {
		r.p++;
		goto end;
	}
	for (;;) {
		const char *k;
		uint32_t kl;
		unsigned bit;
		size_t mark;

		ws(&r);
		mark = r.used;
		if (str(&r, &k, &kl) != 0)
			return REM_FAST_BAIL;
		r.used = mark; /* the key is not kept */
		ws(&r);
		if (r.p >= r.end || *r.p++ != ':')
			return REM_FAST_BAIL;
		ws(&r);
#define IS(s) (kl == sizeof(s) - 1 && memcmp(k, s, kl) == 0)
		if (IS("code") || IS("opaque") || IS("flag") || IS("version")) {
			int32_t *dst = IS("code")     ? &cmd->code
				       : IS("opaque") ? &cmd->opaque
				       : IS("flag")   ? &cmd->flag
						      : &cmd->version;

			bit = IS("code") ? 1 : IS("opaque") ? 2 : IS("flag") ? 4 : 8;
			if ((seen & bit) || i32(&r, dst) != 0)
				return REM_FAST_BAIL;
		} else if (IS("language")) {
			const char *v;
			uint32_t vl;

			bit = 16;
			if (seen & bit || str(&r, &v, &vl) != 0)
				return REM_FAST_BAIL;
			cmd->language = WIRE_LANG_OTHER;
			for (unsigned i = 0; i < WIRE_LANG_COUNT; i++)
				if (strcmp(v, wire_rem_lang_name(i)) == 0)
					cmd->language = (uint8_t)i;
			r.used = mark;
		} else if (IS("remark")) {
			bit = 32;
			if (seen & bit)
				return REM_FAST_BAIL;
			if (!lit(&r, "null") && str(&r, &cmd->remark, &cmd->remark_len) != 0)
				return REM_FAST_BAIL;
		} else if (IS("extFields")) {
			bit = 64;
			if (seen & bit || ext(&r, cmd) != 0)
				return REM_FAST_BAIL;
		} else {
			/* another member (serializeTypeCurrentRPC): a scalar, read and dropped */
			const char *v;
			uint32_t vl;
			const uint8_t *b;
			size_t n;

			bit = 0;
			if (r.p < r.end && *r.p == '"') {
				if (str(&r, &v, &vl) != 0)
					return REM_FAST_BAIL;
			} else if (!lit(&r, "true") && !lit(&r, "false") && !lit(&r, "null") &&
				   num(&r, &b, &n) != 0) {
				return REM_FAST_BAIL;
			}
			r.used = mark;
		}
#undef IS
		seen |= bit;
		ws(&r);
		if (r.p >= r.end)
			return REM_FAST_BAIL;
		if (*r.p == ',') {
			r.p++;
			continue;
		}
		if (*r.p++ != '}')
			return REM_FAST_BAIL;
		break;
	}
end:
	ws(&r);
	if (r.p != r.end)
		return REM_FAST_BAIL;
	*used = r.used;
	return 0;
}

/* ---- the writer ---- */

struct wr {
	uint8_t *p, *end;
	bool full;
};

static void
put(struct wr *w, const void *b, size_t n)
{
	if ((size_t)(w->end - w->p) < n) {
		w->full = true;
		w->p = w->end;
		return;
	}
	memcpy(w->p, b, n);
	w->p += n;
}

#define PUTS(w, lit) put((w), (lit), sizeof(lit) - 1)

static void
put_i32(struct wr *w, int32_t v)
{
	char b[12];
	char *e = b + sizeof(b), *q = e;
	uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;

	do {
		*--q = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--q = '-';
	put(w, q, (size_t)(e - q));
}

/* A byte json-c escapes (with JSON_C_TO_STRING_NOSLASHESCAPE): a control, the quote, the backslash. */
static inline bool
esc_stop(uint8_t c)
{
	return c < 0x20 || c == '"' || c == '\\';
}

/* A JSON string as json-c's json_escape_str() writes it. */
static void
put_str(struct wr *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *p = (const uint8_t *)s, *e = p + n;

	PUTS(w, "\"");
	while (p < e) {
		const uint8_t *q = p;

		while (q < e && !esc_stop(*q))
			q++;
		put(w, p, (size_t)(q - p));
		if (q == e)
			break;
		switch (*q) {
		case '\b':
			PUTS(w, "\\b");
			break;
		case '\n':
			PUTS(w, "\\n");
			break;
		case '\r':
			PUTS(w, "\\r");
			break;
		case '\t':
			PUTS(w, "\\t");
			break;
		case '\f':
			PUTS(w, "\\f");
			break;
		case '"':
			PUTS(w, "\\\"");
			break;
		case '\\':
			PUTS(w, "\\\\");
			break;
		default: {
			char u[6] = {'\\', 'u', '0', '0', hex[*q >> 4], hex[*q & 15]};

			put(w, u, sizeof(u));
		}
		}
		p = q + 1;
	}
	PUTS(w, "\"");
}

int
wire__rem_json_write(const struct wire_rem_cmd *cmd, const char *lang, uint8_t *out, size_t cap,
		     size_t *hlen)
{
	struct wr w = {.p = out, .end = out + cap};

	/* json-c keeps one entry per key (and reads a key up to its NUL): leave those to it. */
	for (unsigned i = 0; i < cmd->n_ext; i++) {
		const struct wire_kv *a = &cmd->ext[i];

		if (memchr(a->key, 0, a->key_len) != NULL)
			return REM_FAST_BAIL;
		for (unsigned j = 0; j < i; j++) {
			const struct wire_kv *b = &cmd->ext[j];

			if (a->key_len == b->key_len &&
			    (a->key_len == 0 || a->key[0] == b->key[0]) &&
			    memcmp(a->key, b->key, a->key_len) == 0)
				return REM_FAST_BAIL;
		}
	}
	/* fastjson's order, as the json-c writer adds them: keys sorted alphabetically. */
	PUTS(&w, "{\"code\":");
	put_i32(&w, cmd->code);
	PUTS(&w, ",\"extFields\":{");
	for (unsigned i = 0; i < cmd->n_ext; i++) {
		if (i)
			PUTS(&w, ",");
		put_str(&w, cmd->ext[i].key, cmd->ext[i].key_len);
		PUTS(&w, ":");
		put_str(&w, cmd->ext[i].val, cmd->ext[i].val_len);
	}
	PUTS(&w, "},\"flag\":");
	put_i32(&w, cmd->flag);
	PUTS(&w, ",\"language\":");
	put_str(&w, lang, strlen(lang));
	PUTS(&w, ",\"opaque\":");
	put_i32(&w, cmd->opaque);
	if (cmd->remark != NULL) {
		PUTS(&w, ",\"remark\":");
		put_str(&w, cmd->remark, cmd->remark_len);
	}
	PUTS(&w, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
	put_i32(&w, cmd->version);
	PUTS(&w, "}");
	if (w.full)
		return REM_FAST_BAIL; /* json-c says which: -EINVAL past the limit, else -ENOBUFS */
	if ((size_t)(w.p - out) > WIRE_REM_HDR_MAX)
		return -EINVAL;
	*hlen = (size_t)(w.p - out);
	return 0;
}
