/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rem_priv.h - the remoting codec's internals shared between remoting.c and
 * rem_json.c (and the fuzz harness that checks one against the other).
 */
#ifndef SP_WIRE_REM_PRIV_H
#define SP_WIRE_REM_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "wire/remoting.h"

/* rem_json_fast() gives up: the header is valid JSON of a form it does not read, or not valid. */
#define REM_FAST_BAIL 1

/*
 * wire__rem_json_fast() - read a JSON header of the common form (rem_json.c)
 * into @cmd, its strings into @scratch (@*used bytes of @cap). Return: 0, or
 * REM_FAST_BAIL: nothing may be assumed of @cmd; json-c reads it instead.
 */
int wire__rem_json_fast(const uint8_t *hdr, size_t hlen, struct wire_rem_cmd *cmd, char *scratch,
			size_t cap, size_t *used);

/*
 * wire__rem_json_write() - @cmd's JSON header as json-c would print it, @lang
 * its language's name (rem_json.c). Return: 0 with *@hlen bytes at @out,
 * -EINVAL past WIRE_REM_HDR_MAX, or REM_FAST_BAIL: json-c's writer decides.
 */
int wire__rem_json_write(const struct wire_rem_cmd *cmd, const char *lang, uint8_t *out, size_t cap,
			 size_t *hlen);

/* The JSON header writer: the fast one (@fast) falling back to json-c, or json-c alone. */
int wire__rem_encode_json_mode(const struct wire_rem_cmd *cmd, uint8_t *out, size_t cap,
			       size_t *hlen, int fast);

/* wire_rem_decode() without the fast reader (@fast false): the reference, for the fuzzer. */
int wire__rem_decode_mode(const uint8_t *frame, size_t len, struct wire_rem_cmd *cmd, char *scratch,
			  size_t scratch_len, int fast);

#endif /* SP_WIRE_REM_PRIV_H */
