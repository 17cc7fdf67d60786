// SPDX-License-Identifier: Apache-2.0
/*
 * repl.c - the store's side of replication (docs/replication.md): a master
 * core reads spans of whole records of its shard for its slaves, and a
 * slave's replication session writes them to the same offsets of its own
 * shard, checks every record, and indexes them with recovery's dispatch.
 *
 * The slave's shard has one writer, as every shard: its replication
 * session (the slave refuses SENDs, so its core never appends). Records
 * become visible to the slave's readers (PULL on its cores, the indexer,
 * the flusher) at clog_commit(), after their ConsumeQueue units are in,
 * as for a put.
 */
#include <errno.h>

#include "store/clog.h"
#include "store/store.h"

#include "store_priv.h"

long
store_repl_read(const struct store *s, uint32_t shard, uint64_t off, uint32_t max,
		const uint8_t **out)
{
	return clog_read_span(store_clog(s, shard), off, max, out);
}

long
store_repl_append(struct store *s, uint32_t shard, uint64_t off, const uint8_t *data, size_t len,
		  uint64_t *last)
{
	return clog_append_raw(store_clog(s, shard), off, data, len, last);
}

int
store_repl_publish(struct store *s, uint32_t shard, uint64_t off, size_t len)
{
	struct clog *c = store_clog(s, shard);
	const uint8_t *data = clog_appended(c, off, len);
	int rc;

	if (data == NULL)
		return -EINVAL;
	rc = store__dispatch_span(s, shard, off, data, len);
	/*
	 * Published even when a unit could not be written: the log bytes are
	 * the master's and checked, and recovery re-dispatches them.
	 */
	clog_commit(c);
	return rc;
}

long
store_repl_write(struct store *s, uint32_t shard, uint64_t off, const uint8_t *data, size_t len,
		 uint64_t *last)
{
	long n = store_repl_append(s, shard, off, data, len, last);
	int rc;

	if (n <= 0)
		return n;
	rc = store_repl_publish(s, shard, off, (size_t)n);
	return rc != 0 ? rc : n;
}
