// SPDX-License-Identifier: Apache-2.0
/* test_crc32.c - CRC-32 must equal java.util.zip.CRC32 for every split. */
#include <stdlib.h>

#include "harness.h"
#include "common/crc32.h"

static void
test_known_values(void)
{
	/* java.util.zip.CRC32 of these byte strings. */
	T_ASSERT_EQ_U64(crc32_java("", 0), 0);
	T_ASSERT_EQ_U64(crc32_java("123456789", 9), 0xCBF43926u);
	T_ASSERT_EQ_U64(crc32_java("hello", 5), 907060870u);
	T_ASSERT_EQ_U64(crc32_java("The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
	/* BODYCRC is the Java int made non-negative. */
	T_ASSERT_EQ_U64(crc32_body("123456789", 9), 0xCBF43926u & 0x7FFFFFFF);
}

static void
test_incremental(void)
{
	uint8_t *buf = malloc(100000);
	uint32_t whole;

	T_ASSERT(buf != NULL);
	for (size_t i = 0; i < 100000; i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 7));
	whole = crc32_java(buf, 100000);
	for (size_t cut = 0; cut < 100000; cut += 4099) {
		uint32_t c = crc32_update(0, buf, cut);

		T_ASSERT_EQ_U64(crc32_update(c, buf + cut, 100000 - cut), whole);
	}
	/* Unaligned starts and short tails take other code paths in ISA-L. */
	for (size_t off = 1; off < 64; off++) {
		uint32_t a = crc32_java(buf + off, 1000);
		uint32_t b = crc32_update(crc32_update(0, buf + off, 1), buf + off + 1, 999);

		T_ASSERT_EQ_U64(a, b);
	}
	free(buf);
}

T_MAIN(T_CASE(test_known_values), T_CASE(test_incremental))
