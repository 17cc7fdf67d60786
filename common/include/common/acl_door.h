/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acl_door.h - who may use each door: one table that gives every request
 * code the broker and the NameServer answer, every dataplane op and every
 * HTTP path a permission class (docs/security.md, "Who may use each door").
 *
 * The daemons ask this table before they dispatch: a request whose code has
 * no entry is refused as not supported, so a new request code cannot be
 * answered before someone decides who may send it. tests/lint/doors.py reads
 * the daemons' dispatch code and fails when a code or path they handle is
 * missing here.
 *
 * Classes (what the ACL needs when aclEnable is on):
 *   OPEN       nothing: anyone who reaches the port (NameServer route reads,
 *              /health and /metrics unless a token is set)
 *   SIGNED     any account of the ACL file with a valid signature
 *   TOPIC_PUB  PUB on the topic the request names
 *   TOPIC_SUB  SUB on the topic it names (and SUB on the group when it names one)
 *   GROUP      SUB on the consumer group it names (and its topics when it names some)
 *   ADMIN      an admin account
 * Flags:
 *   ACL_DOOR_ADDRS    also gated by adminAllowedAddrs (an operator's request)
 *   ACL_DOOR_RECORDS  answered with records: each record found is checked
 *                     again, SUB on its own topic (END_TRANSACTION: PUB on
 *                     the half's real topic); one the account may not use
 *                     is left out, as if it did not exist
 *   ACL_DOOR_WRITE    changes the daemon's state (the NameServer's writer)
 *
 * Ownership: constant tables, read by any thread.
 */
#ifndef SP_COMMON_ACL_DOOR_H
#define SP_COMMON_ACL_DOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum acl_door_class {
	ACL_DOOR_OPEN,
	ACL_DOOR_SIGNED,
	ACL_DOOR_TOPIC_PUB,
	ACL_DOOR_TOPIC_SUB,
	ACL_DOOR_GROUP,
	ACL_DOOR_ADMIN,
};

enum {
	ACL_DOOR_ADDRS = 1u << 0,
	ACL_DOOR_RECORDS = 1u << 1,
	ACL_DOOR_WRITE = 1u << 2,
};

struct acl_door {
	int32_t code; /* request code, dataplane op; 0 for an HTTP path */
	const char *name;
	uint8_t cls;   /* enum acl_door_class */
	uint8_t flags; /* ACL_DOOR_* */
};

/* The broker's remoting port: the entry of request @code, or NULL (not answered). */
const struct acl_door *acl_door_broker(int32_t code);
/* The NameServer's port. */
const struct acl_door *acl_door_namesrv(int32_t code);
/* The broker's dataplane: op @op of an open session (CONNECT is the ACL's own handshake). */
const struct acl_door *acl_door_dataplane(int32_t op);
/*
 * An HTTP path of the broker (@namesrv false) or the NameServer: the entry of
 * the first pattern that matches @path, or NULL (404). A pattern is a path,
 * or a prefix and a star (the console: every path no other pattern takes).
 */
const struct acl_door *acl_door_http(bool namesrv, const char *path);

/* Every entry of one table, for tests and `--help`-like listings. */
enum acl_door_table {
	ACL_DOOR_T_BROKER,
	ACL_DOOR_T_NAMESRV,
	ACL_DOOR_T_DATAPLANE,
	ACL_DOOR_T_HTTP_BROKER,
	ACL_DOOR_T_HTTP_NAMESRV,
	ACL_DOOR_TABLES,
};
const struct acl_door *acl_door_table(enum acl_door_table t, size_t *n);

/* "open", "signed", "topic PUB", "topic SUB", "group", "admin". */
const char *acl_door_class_name(unsigned cls);

#endif /* SP_COMMON_ACL_DOOR_H */
