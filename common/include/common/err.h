/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err.h - error conventions.
 *
 * Every int-returning action returns 0 or a negative errno and is MUST_CHECK.
 * Wire input that is malformed yields -EBADMSG (bad structure) or -EPROTO
 * (well formed but not allowed: wrong magic, version, op). -EAGAIN means
 * "retry on the next poll" and is never logged. Constructors are
 * int x_create(..., struct x **out).
 */
#ifndef SP_COMMON_ERR_H
#define SP_COMMON_ERR_H

#include <errno.h>

/**
 * err_str() - text for a negative (or positive) errno value.
 * @err: -errno or errno.
 *
 * Context: any thread; returns a static string, never allocates.
 * Return: a constant description, "unknown error" for unknown values.
 */
const char *err_str(int err);

#endif /* SP_COMMON_ERR_H */
