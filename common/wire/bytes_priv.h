/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bytes_priv.h - unaligned big/little-endian loads and stores for the codecs.
 *
 * memcpy-based so they are safe at any alignment and compile to a plain
 * load/store plus bswap. Callers bounds-check before calling.
 */
#ifndef SP_WIRE_BYTES_PRIV_H
#define SP_WIRE_BYTES_PRIV_H

#include <stdint.h>
#include <string.h>

static inline uint16_t
wire_ld_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return __builtin_bswap16(v);
}

static inline uint32_t
wire_ld_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return __builtin_bswap32(v);
}

static inline uint64_t
wire_ld_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

static inline void
wire_st_be16(uint8_t *p, uint16_t v)
{
	v = __builtin_bswap16(v);
	memcpy(p, &v, 2);
}

static inline void
wire_st_be32(uint8_t *p, uint32_t v)
{
	v = __builtin_bswap32(v);
	memcpy(p, &v, 4);
}

static inline void
wire_st_be64(uint8_t *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

/* Little-endian: the dataplane packet format (both ends are sprocket). */
static inline uint16_t
wire_ld_le16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static inline uint32_t
wire_ld_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t
wire_ld_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline void
wire_st_le16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static inline void
wire_st_le32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static inline void
wire_st_le64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the le helpers above assume a little-endian host; add byte swaps for big-endian"
#endif

#endif /* SP_WIRE_BYTES_PRIV_H */
