// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_remoting.c - remoting frames from untrusted bytes.
 *
 * Oracle beyond "no crash": whatever decodes must re-encode (in the same
 * serialize type) and decode again to the same command, so the encoder
 * never writes what the decoder refuses. The fast JSON reader and writer
 * (common/wire/rem_json.c) are held to json-c's answers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/remoting.h"
#include "../../common/wire/rem_priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct wire_rem_cmd a;
static struct wire_rem_cmd b;

static void
check_same(const struct wire_rem_cmd *x, const struct wire_rem_cmd *y)
{
	if (x->code != y->code || x->opaque != y->opaque || x->flag != y->flag ||
	    x->n_ext != y->n_ext || x->body_len != y->body_len || x->remark_len != y->remark_len)
		abort();
	if (x->body_len && memcmp(x->body, y->body, x->body_len) != 0)
		abort();
	/* The binary header keeps order and duplicates: compare position by position. */
	for (unsigned i = 0; i < x->n_ext; i++) {
		const struct wire_kv *p = &x->ext[i];
		const struct wire_kv *q = &y->ext[i];

		if (p->key_len != q->key_len || p->val_len != q->val_len ||
		    memcmp(p->key, q->key, p->key_len) != 0 ||
		    memcmp(p->val, q->val, p->val_len) != 0)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t scratch_len = size * 3 + 256;
	char *scratch = malloc(scratch_len);
	char *scratch2 = NULL;
	uint8_t *out = NULL;
	size_t flen;
	size_t n;
	int64_t v;
	bool bv;

	if (scratch == NULL)
		return 0;
	if (wire_rem_frame_len(data, size, WIRE_REM_FRAME_MAX_DEFAULT, &flen) != 0)
		flen = size;
	{
		/*
		 * The fast JSON reader (common/wire/rem_json.c) against json-c alone: the
		 * same answer, and on success the same command (language and remark too).
		 */
		char *ref = malloc(scratch_len);
		int rf, rs;

		if (ref == NULL)
			goto out;
		rf = wire__rem_decode_mode(data, flen, &a, scratch, scratch_len, 1);
		rs = wire__rem_decode_mode(data, flen, &b, ref, scratch_len, 0);
		if (rf != rs)
			abort();
		if (rf == 0) {
			check_same(&a, &b);
			if (a.language != b.language || a.version != b.version ||
			    a.serialize != b.serialize ||
			    (a.remark_len && memcmp(a.remark, b.remark, a.remark_len) != 0))
				abort();
		}
		free(ref);
	}
	if (wire_rem_decode(data, flen, &a, scratch, scratch_len) != 0)
		goto out;
	for (unsigned i = 0; i < a.n_ext; i++) {
		(void)!wire_rem_ext_i64(&a, a.ext[i].key, &v);
		(void)!wire_rem_ext_bool(&a, a.ext[i].key, &bv);
	}
	/* Re-encode; duplicated keys collapse in JSON, so compare binary only fully. */
	out = malloc(flen * 8 + 1024);
	scratch2 = malloc((flen * 8 + 1024) * 3 + 256);
	if (out == NULL || scratch2 == NULL)
		goto out;
	if (a.language >= WIRE_LANG_COUNT)
		abort();
	if (a.serialize == WIRE_REM_JSON) {
		/*
		 * The fast JSON writer (rem_json.c) against json-c's: the same bytes, or
		 * the same error, into a roomy buffer and into one cut at a random length.
		 */
		size_t caps[2] = {flen * 8 + 1024, size ? data[size - 1] * 2u : 0};
		uint8_t *ref = malloc(caps[0]);
		size_t nf = 0, nr = 0;

		if (ref == NULL)
			goto out;
		for (int k = 0; k < 2; k++) {
			int rf = wire__rem_encode_json_mode(&a, out, caps[k], &nf, 1);
			int rr = wire__rem_encode_json_mode(&a, ref, caps[k], &nr, 0);

			if (rf != rr || (rf == 0 && (nf != nr || memcmp(out, ref, nf) != 0)))
				abort();
		}
		free(ref);
	}
	if (wire_rem_encode(&a, out, flen * 8 + 1024, &n) != 0)
		goto out;
	if (wire_rem_decode(out, n, &b, scratch2, (flen * 8 + 1024) * 3 + 256) != 0)
		abort();
	if (a.serialize == WIRE_REM_ROCKETMQ)
		check_same(&a, &b);
	else if (b.code != a.code || b.body_len != a.body_len || b.opaque != a.opaque)
		abort();
out:
	free(out);
	free(scratch2);
	free(scratch);
	return 0;
}
