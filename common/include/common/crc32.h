/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crc32.h - CRC-32 (IEEE 802.3, reflected 0xEDB88320), the one that
 * java.util.zip.CRC32 computes. RocketMQ's BODYCRC is this value masked with
 * 0x7FFFFFFF (a non-negative Java int).
 */
#ifndef SP_COMMON_CRC32_H
#define SP_COMMON_CRC32_H

#include <stddef.h>
#include <stdint.h>

/**
 * crc32_update() - extend a running CRC-32.
 * @crc: 0 to start, or a previous return value.
 *
 * Context: any thread, non-blocking, no allocation.
 * Return: the CRC-32 of everything fed so far.
 */
uint32_t crc32_update(uint32_t crc, const void *buf, size_t len);

static inline uint32_t
crc32_java(const void *buf, size_t len)
{
	return crc32_update(0, buf, len);
}

/* RocketMQ BODYCRC: CRC-32 of the stored body masked to a non-negative int. */
static inline uint32_t
crc32_body(const void *buf, size_t len)
{
	return crc32_update(0, buf, len) & 0x7FFFFFFFu;
}

#endif /* SP_COMMON_CRC32_H */
