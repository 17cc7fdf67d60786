// SPDX-License-Identifier: Apache-2.0
/*
 * remoting.c - RocketMQ remoting frames: length-prefixed commands with a JSON
 * or ROCKETMQ-binary header (docs/rocketmq-protocol.md §1).
 *
 * DESIGN
 * The decoder is written for a TCP server that faces the internet: every
 * length is checked before it is used, the JSON parser runs in strict mode
 * with a small depth limit (a header is two levels deep), and all header
 * strings are copied into a caller-provided scratch area so the decoded
 * command has a bounded footprint whatever the input. Body bytes are not
 * copied: cmd->body points into the frame.
 *
 * Java clients are generous about what they send (ali-ons sends numbers and
 * booleans as extFields values; Java sends everything as strings) and strict
 * about what they receive (Go needs string values, Java needs an extFields
 * object on send responses), so the encoder always writes string values and
 * an extFields object, with keys in fastjson's alphabetical order.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "bytes_priv.h"
#include "rem_priv.h"
#include "wire/remoting.h"

#define REM_JSON_DEPTH 64 /* fastjson nests deeper; a bound all the same */
#define REM_BIN_FIXED 21

static const char *const rem_lang_names[WIRE_LANG_COUNT] = {
	"JAVA",	 "CPP",	 "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY",
	"OTHER", "HTTP", "GO",	   "PHP",    "OMS",    "RUST",
};

const char *
wire_rem_lang_name(unsigned lang)
{
	return lang < WIRE_LANG_COUNT ? rem_lang_names[lang] : NULL;
}

int
wire_rem_frame_len(const uint8_t *buf, size_t len, size_t max_frame, size_t *frame_len)
{
	uint32_t length;
	size_t total;

	if (len < 4)
		return -EAGAIN;
	length = wire_ld_be32(buf);
	if (length < 4 || length > INT32_MAX)
		return -EBADMSG;
	total = (size_t)length + 4;
	if (total > max_frame)
		return -EMSGSIZE;
	if (len >= 8 && (wire_ld_be32(buf + 4) & 0xFFFFFF) > length - 4)
		return -EBADMSG;
	if (len < total)
		return -EAGAIN;
	*frame_len = total;
	return 0;
}

/* Scratch area that receives NUL-terminated copies of header strings. */
struct rem_scratch {
	char *p;
	size_t cap;
	size_t used;
};

static const char *
rem_copy(struct rem_scratch *s, const char *src, size_t n)
{
	char *dst;

	if (n >= s->cap - s->used)
		return NULL;
	dst = s->p + s->used;
	memcpy(dst, src, n);
	dst[n] = '\0';
	s->used += n + 1;
	return dst;
}

static int
rem_json_i32(struct json_object *v, int32_t *out)
{
	int64_t x;

	if (v == NULL)
		return 0; /* fastjson leaves a missing member at its default */
	if (!json_object_is_type(v, json_type_int))
		return -EPROTO;
	errno = 0;
	x = json_object_get_int64(v);
	if (errno != 0 || x < INT32_MIN || x > INT32_MAX)
		return -EPROTO;
	*out = (int32_t)x;
	return 0;
}

static int
rem_json_ext(struct json_object *ext, struct wire_rem_cmd *cmd, struct rem_scratch *s)
{
	struct json_object_iterator it;
	struct json_object_iterator end;

	if (ext == NULL || json_object_is_type(ext, json_type_null))
		return 0;
	if (!json_object_is_type(ext, json_type_object))
		return -EPROTO;
	it = json_object_iter_begin(ext);
	end = json_object_iter_end(ext);
	for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
		const char *key = json_object_iter_peek_name(&it);
		struct json_object *v = json_object_iter_peek_value(&it);
		struct wire_kv *kv;
		const char *txt;
		size_t txt_len;

		if (v == NULL || json_object_is_type(v, json_type_null))
			continue;
		switch (json_object_get_type(v)) {
		case json_type_string:
			txt = json_object_get_string(v);
			txt_len = (size_t)json_object_get_string_len(v);
			break;
		case json_type_int:
		case json_type_double:
		case json_type_boolean:
		case json_type_object:
		case json_type_array:
			/*
			 * json-c prints ints exactly and doubles from their source
			 * text; an object or array becomes its compact JSON text, as
			 * fastjson's castToString() makes of it for RocketMQ's
			 * HashMap<String, String> extFields.
			 */
			txt = json_object_to_json_string_ext(
				v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
			if (txt == NULL)
				return -ENOMEM;
			txt_len = strlen(txt);
			break;
		default:
			return -EPROTO;
		}
		if (cmd->n_ext >= WIRE_REM_EXT_MAX)
			return -E2BIG;
		kv = &cmd->ext[cmd->n_ext];
		kv->key_len = (uint32_t)strlen(key);
		kv->key = rem_copy(s, key, kv->key_len);
		kv->val_len = (uint32_t)txt_len;
		kv->val = rem_copy(s, txt, txt_len);
		if (kv->key == NULL || kv->val == NULL)
			return -ENOBUFS;
		cmd->n_ext++;
	}
	return 0;
}

static int
rem_decode_json(const uint8_t *hdr, size_t hlen, struct wire_rem_cmd *cmd, struct rem_scratch *s)
{
	struct json_tokener *tok;
	struct json_object *root;
	struct json_object *v;
	size_t end;
	int rc = 0;

	if (hlen == 0 || hlen > INT_MAX)
		return -EBADMSG;
	tok = json_tokener_new_ex(REM_JSON_DEPTH);
	if (tok == NULL)
		return -ENOMEM;
	/* Strict (json-c still takes single-quoted strings, as fastjson does). */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	root = json_tokener_parse_ex(tok, (const char *)hdr, (int)hlen);
	if (root == NULL || json_tokener_get_error(tok) != json_tokener_success) {
		rc = -EBADMSG;
		goto out_free_tok;
	}
	/* Only blanks may follow the object. */
	for (end = json_tokener_get_parse_end(tok); end < hlen; end++) {
		if (!isspace(hdr[end])) {
			rc = -EBADMSG;
			goto out_put;
		}
	}
	if (!json_object_is_type(root, json_type_object)) {
		rc = -EPROTO;
		goto out_put;
	}

	cmd->language = WIRE_LANG_JAVA;
	if ((rc = rem_json_i32(json_object_object_get(root, "code"), &cmd->code)) != 0 ||
	    (rc = rem_json_i32(json_object_object_get(root, "opaque"), &cmd->opaque)) != 0 ||
	    (rc = rem_json_i32(json_object_object_get(root, "flag"), &cmd->flag)) != 0 ||
	    (rc = rem_json_i32(json_object_object_get(root, "version"), &cmd->version)) != 0)
		goto out_put;

	v = json_object_object_get(root, "language");
	if (v != NULL && json_object_is_type(v, json_type_string)) {
		/* Unknown names (newer clients) read as OTHER, as Go does. */
		cmd->language = WIRE_LANG_OTHER;
		for (unsigned i = 0; i < WIRE_LANG_COUNT; i++) {
			if (strcmp(json_object_get_string(v), rem_lang_names[i]) == 0)
				cmd->language = (uint8_t)i;
		}
	} else if (v != NULL && !json_object_is_type(v, json_type_null)) {
		rc = -EPROTO;
		goto out_put;
	}

	v = json_object_object_get(root, "remark");
	if (v != NULL && json_object_is_type(v, json_type_string)) {
		cmd->remark_len = (uint32_t)json_object_get_string_len(v);
		cmd->remark = rem_copy(s, json_object_get_string(v), cmd->remark_len);
		if (cmd->remark == NULL) {
			rc = -ENOBUFS;
			goto out_put;
		}
	} else if (v != NULL && !json_object_is_type(v, json_type_null)) {
		rc = -EPROTO;
		goto out_put;
	}

	rc = rem_json_ext(json_object_object_get(root, "extFields"), cmd, s);
out_put:
	json_object_put(root);
out_free_tok:
	json_tokener_free(tok);
	return rc;
}

static int
rem_decode_bin(const uint8_t *h, size_t hlen, struct wire_rem_cmd *cmd, struct rem_scratch *s)
{
	size_t pos = REM_BIN_FIXED;
	uint32_t remark_len;
	uint32_t ext_len;
	size_t ext_end;

	if (hlen < REM_BIN_FIXED)
		return -EBADMSG;
	cmd->code = (int16_t)wire_ld_be16(h);
	cmd->language = h[2];
	cmd->version = (int16_t)wire_ld_be16(h + 3);
	cmd->opaque = (int32_t)wire_ld_be32(h + 5);
	cmd->flag = (int32_t)wire_ld_be32(h + 9);
	remark_len = wire_ld_be32(h + 13);
	if (cmd->language >= WIRE_LANG_COUNT)
		cmd->language = WIRE_LANG_OTHER;
	if (remark_len > hlen - 17)
		return -EBADMSG;
	if (remark_len > 0) {
		cmd->remark = rem_copy(s, (const char *)h + 17, remark_len);
		if (cmd->remark == NULL)
			return -ENOBUFS;
		cmd->remark_len = remark_len;
	}
	pos = 17 + remark_len;
	if (hlen - pos < 4)
		return -EBADMSG;
	ext_len = wire_ld_be32(h + pos);
	pos += 4;
	if (ext_len > hlen - pos)
		return -EBADMSG;
	ext_end = pos + ext_len;
	while (pos < ext_end) {
		struct wire_kv *kv;
		uint32_t klen;
		uint32_t vlen;

		if (ext_end - pos < 2)
			return -EBADMSG;
		klen = wire_ld_be16(h + pos);
		pos += 2;
		if (klen > ext_end - pos || ext_end - pos - klen < 4)
			return -EBADMSG;
		vlen = wire_ld_be32(h + pos + klen);
		if (vlen > ext_end - pos - klen - 4)
			return -EBADMSG;
		if (cmd->n_ext >= WIRE_REM_EXT_MAX)
			return -E2BIG;
		kv = &cmd->ext[cmd->n_ext];
		kv->key = rem_copy(s, (const char *)h + pos, klen);
		kv->key_len = klen;
		kv->val = rem_copy(s, (const char *)h + pos + klen + 4, vlen);
		kv->val_len = vlen;
		if (kv->key == NULL || kv->val == NULL)
			return -ENOBUFS;
		cmd->n_ext++;
		pos += klen + 4 + vlen;
	}
	/* Bytes after the extFields block are tolerated, as Java ignores them. */
	return 0;
}

int
wire_rem_decode(const uint8_t *frame, size_t len, struct wire_rem_cmd *cmd, char *scratch,
		size_t scratch_len)
{
	return wire__rem_decode_mode(frame, len, cmd, scratch, scratch_len, 1);
}

int
wire__rem_decode_mode(const uint8_t *frame, size_t len, struct wire_rem_cmd *cmd, char *scratch,
		      size_t scratch_len, int fast)
{
	struct rem_scratch s = {.p = scratch, .cap = scratch_len, .used = 0};
	uint32_t length;
	uint32_t word;
	uint32_t hlen;

	memset(cmd, 0, offsetof(struct wire_rem_cmd, ext));
	cmd->body = NULL;
	cmd->body_len = 0;
	if (len < 8)
		return -EBADMSG;
	length = wire_ld_be32(frame);
	if (length < 4 || (size_t)length != len - 4)
		return -EBADMSG;
	word = wire_ld_be32(frame + 4);
	hlen = word & 0xFFFFFF;
	if (hlen > length - 4)
		return -EBADMSG;
	if (scratch_len == 0)
		return -ENOBUFS;
	cmd->serialize = (uint8_t)(word >> 24);
	cmd->body = frame + 8 + hlen;
	cmd->body_len = length - 4 - hlen;
	switch (cmd->serialize) {
	case WIRE_REM_JSON:
		/* the common form without json-c (rem_json.c); anything else, or a bail: json-c */
		if (fast &&
		    wire__rem_json_fast(frame + 8, hlen, cmd, scratch, scratch_len, &s.used) == 0)
			return 0;
		memset(cmd, 0, offsetof(struct wire_rem_cmd, ext));
		cmd->serialize = WIRE_REM_JSON;
		cmd->body = frame + 8 + hlen;
		cmd->body_len = length - 4 - hlen;
		s.used = 0;
		return rem_decode_json(frame + 8, hlen, cmd, &s);
	case WIRE_REM_ROCKETMQ:
		return rem_decode_bin(frame + 8, hlen, cmd, &s);
	default:
		return -EPROTO;
	}
}

/* json-c's writer: the reference wire__rem_json_write() matches, and its fallback. */
static int
rem_encode_json_c(const struct wire_rem_cmd *cmd, uint8_t *out, size_t cap, size_t *hlen)
{
	struct json_object *root;
	struct json_object *ext;
	const char *txt;
	size_t n;
	int rc = 0;

	root = json_object_new_object();
	ext = json_object_new_object();
	if (root == NULL || ext == NULL) {
		json_object_put(root);
		json_object_put(ext);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < cmd->n_ext; i++) {
		struct json_object *v =
			json_object_new_string_len(cmd->ext[i].val, (int)cmd->ext[i].val_len);

		if (v == NULL || json_object_object_add(ext, cmd->ext[i].key, v) != 0) {
			json_object_put(v);
			json_object_put(ext);
			rc = -ENOMEM;
			goto out;
		}
	}
	/* fastjson order: keys sorted alphabetically. */
	json_object_object_add(root, "code", json_object_new_int(cmd->code));
	json_object_object_add(root, "extFields", ext);
	json_object_object_add(root, "flag", json_object_new_int(cmd->flag));
	json_object_object_add(root, "language",
			       json_object_new_string(rem_lang_names[cmd->language]));
	json_object_object_add(root, "opaque", json_object_new_int(cmd->opaque));
	if (cmd->remark != NULL)
		json_object_object_add(
			root, "remark",
			json_object_new_string_len(cmd->remark, (int)cmd->remark_len));
	json_object_object_add(root, "serializeTypeCurrentRPC", json_object_new_string("JSON"));
	json_object_object_add(root, "version", json_object_new_int(cmd->version));

	txt = json_object_to_json_string_length(
		root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	if (txt == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (n > WIRE_REM_HDR_MAX) {
		rc = -EINVAL;
		goto out;
	}
	if (n > cap) {
		rc = -ENOBUFS;
		goto out;
	}
	memcpy(out, txt, n);
	*hlen = n;
out:
	json_object_put(root);
	return rc;
}

int
wire__rem_encode_json_mode(const struct wire_rem_cmd *cmd, uint8_t *out, size_t cap, size_t *hlen,
			   int fast)
{
	if (fast) {
		int rc = wire__rem_json_write(cmd, rem_lang_names[cmd->language], out, cap, hlen);

		if (rc != REM_FAST_BAIL)
			return rc;
	}
	return rem_encode_json_c(cmd, out, cap, hlen);
}

static int
rem_encode_bin(const struct wire_rem_cmd *cmd, uint8_t *out, size_t cap, size_t *hlen)
{
	size_t ext_len = 0;
	size_t need;
	size_t pos;

	if (cmd->code < INT16_MIN || cmd->code > INT16_MAX || cmd->version < INT16_MIN ||
	    cmd->version > INT16_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < cmd->n_ext; i++) {
		if (cmd->ext[i].key_len > UINT16_MAX)
			return -EINVAL;
		ext_len += 2 + (size_t)cmd->ext[i].key_len + 4 + cmd->ext[i].val_len;
	}
	need = REM_BIN_FIXED + (cmd->remark ? cmd->remark_len : 0) + ext_len;
	if (need > WIRE_REM_HDR_MAX)
		return -EINVAL;
	if (need > cap)
		return -ENOBUFS;
	wire_st_be16(out, (uint16_t)cmd->code);
	out[2] = cmd->language;
	wire_st_be16(out + 3, (uint16_t)cmd->version);
	wire_st_be32(out + 5, (uint32_t)cmd->opaque);
	wire_st_be32(out + 9, (uint32_t)cmd->flag);
	wire_st_be32(out + 13, cmd->remark ? cmd->remark_len : 0);
	pos = 17;
	if (cmd->remark != NULL) {
		memcpy(out + pos, cmd->remark, cmd->remark_len);
		pos += cmd->remark_len;
	}
	wire_st_be32(out + pos, (uint32_t)ext_len);
	pos += 4;
	for (unsigned i = 0; i < cmd->n_ext; i++) {
		const struct wire_kv *kv = &cmd->ext[i];

		wire_st_be16(out + pos, (uint16_t)kv->key_len);
		memcpy(out + pos + 2, kv->key, kv->key_len);
		pos += 2 + kv->key_len;
		wire_st_be32(out + pos, kv->val_len);
		memcpy(out + pos + 4, kv->val, kv->val_len);
		pos += 4 + kv->val_len;
	}
	*hlen = pos;
	return 0;
}

int
wire_rem_encode_header(const struct wire_rem_cmd *cmd, uint8_t *buf, size_t cap, size_t *out_len)
{
	size_t hlen = 0;
	uint64_t length;
	int rc;

	if (cmd->language >= WIRE_LANG_COUNT || cmd->n_ext > WIRE_REM_EXT_MAX)
		return -EINVAL;
	if (cap < 8)
		return -ENOBUFS;
	switch (cmd->serialize) {
	case WIRE_REM_JSON:
		rc = wire__rem_encode_json_mode(cmd, buf + 8, cap - 8, &hlen, 1);
		break;
	case WIRE_REM_ROCKETMQ:
		rc = rem_encode_bin(cmd, buf + 8, cap - 8, &hlen);
		break;
	default:
		return -EINVAL;
	}
	if (rc != 0)
		return rc;
	length = 4 + (uint64_t)hlen + cmd->body_len;
	if (length > INT32_MAX)
		return -EINVAL;
	wire_st_be32(buf, (uint32_t)length);
	wire_st_be32(buf + 4, ((uint32_t)cmd->serialize << 24) | (uint32_t)hlen);
	*out_len = 8 + hlen;
	return 0;
}

int
wire_rem_encode(const struct wire_rem_cmd *cmd, uint8_t *buf, size_t cap, size_t *out_len)
{
	size_t n;
	int rc = wire_rem_encode_header(cmd, buf, cap, &n);

	if (rc != 0)
		return rc;
	if (cmd->body_len > cap - n)
		return -ENOBUFS;
	if (cmd->body_len > 0)
		memcpy(buf + n, cmd->body, cmd->body_len);
	*out_len = n + cmd->body_len;
	return 0;
}

const struct wire_kv *
wire_rem_ext_get(const struct wire_rem_cmd *cmd, const char *key)
{
	size_t klen = strlen(key);

	for (unsigned i = 0; i < cmd->n_ext; i++) {
		if (cmd->ext[i].key_len == klen && memcmp(cmd->ext[i].key, key, klen) == 0)
			return &cmd->ext[i];
	}
	return NULL;
}

int
wire_rem_ext_i64(const struct wire_rem_cmd *cmd, const char *key, int64_t *out)
{
	const struct wire_kv *kv = wire_rem_ext_get(cmd, key);
	char buf[32];
	char *end;
	long long v;

	if (kv == NULL)
		return -ENOENT;
	if (kv->val_len == 0 || kv->val_len >= sizeof(buf))
		return -EINVAL;
	/* Copy: a value may hold a NUL, and a sign-only or blank value is no number. */
	memcpy(buf, kv->val, kv->val_len);
	buf[kv->val_len] = '\0';
	if (!(isdigit((unsigned char)buf[0]) || buf[0] == '-' || buf[0] == '+'))
		return -EINVAL;
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno != 0 || end != buf + kv->val_len || end == buf)
		return -EINVAL;
	*out = v;
	return 0;
}

int
wire_rem_ext_bool(const struct wire_rem_cmd *cmd, const char *key, bool *out)
{
	const struct wire_kv *kv = wire_rem_ext_get(cmd, key);

	if (kv == NULL)
		return -ENOENT;
	if (kv->val_len == 4 && strncasecmp(kv->val, "true", 4) == 0)
		*out = true;
	else if (kv->val_len == 5 && strncasecmp(kv->val, "false", 5) == 0)
		*out = false;
	else
		return -EINVAL;
	return 0;
}

int
wire_rem_ext_add(struct wire_rem_cmd *cmd, const char *key, const char *val)
{
	if (cmd->n_ext >= WIRE_REM_EXT_MAX)
		return -E2BIG;
	cmd->ext[cmd->n_ext].key = key;
	cmd->ext[cmd->n_ext].key_len = (uint32_t)strlen(key);
	cmd->ext[cmd->n_ext].val = val;
	cmd->ext[cmd->n_ext].val_len = (uint32_t)strlen(val);
	cmd->n_ext++;
	return 0;
}
