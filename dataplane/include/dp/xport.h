/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xport.h - the session transport (docs/protocol.md §6, docs/dataplane.md):
 * reliable request/response over a dp_port, for broker cores and clients.
 *
 * Server side (struct dp_xsrv, one per dataplane core): sessions, slots with
 * sequence numbers, reassembly of multi-packet requests, the last response of
 * every slot kept and re-sent for a duplicate, so a retried request executes
 * exactly once. Handlers run on the core; they answer at once or later (a
 * parked PULL, a SEND waiting for its flush) through a dp_xhandle.
 *
 * Client side (struct dp_xcli, one per client I/O thread): sessions to
 * server cores, retransmission with exponential backoff, credits for
 * multi-packet messages, completion callbacks.
 *
 * Neither side allocates after creation on its packet paths: the server
 * draws large buffers from a pool fixed at create time (SYSTEM_BUSY when it
 * is empty), the client keeps one growable reassembly buffer per slot.
 * Neither ever sleeps: they run inside their owner's poll loop.
 */
#ifndef SP_DP_XPORT_H
#define SP_DP_XPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"
#include "dp/port.h"

/* Names one request on one session, to answer it later. */
struct dp_xhandle {
	uint32_t session_id;
	uint16_t slot;
	uint32_t seq;
	uint64_t req_id; /* unique per server: a reused session id cannot match */
};

/* ---- server ---- */

struct hmac_sha1;

/*
 * The prepared secret of @ak (@len bytes), or NULL if no account has that
 * key (docs/security.md). Set: every CONNECT must prove a secret.
 * Context: the owning core (QSBR online), non-blocking.
 */
typedef const struct hmac_sha1 *(*dp_xsrv_key_fn)(void *arg, const char *ak, size_t len);

struct dp_xsrv_cfg {
	unsigned max_sessions;	  /* maxSessionsPerCore (default 1024) */
	uint16_t slots;		  /* slots granted at most per session (default 8) */
	uint16_t credits;	  /* packets in flight per message (0 = from max_dgram) */
	uint32_t max_msg;	  /* bytes per message, both directions (default 4 MiB + 64 KiB) */
	unsigned big_bufs;	  /* pool of max_msg buffers per core (default 32) */
	uint32_t idle_timeout_ms; /* sessions idle this long are dropped (default 30000) */
	uint16_t core;		  /* this core's number, told to clients */
	bool raw_echo;		  /* reflect DP_RAW_MAGIC datagrams (benchmark floor) */
	dp_xsrv_key_fn key_fn;	  /* NULL: sessions need no credentials */
	void *key_arg;
	/* per-client shares (docs/isolation.md) */
	unsigned max_sessions_per_addr; /* maxSessionsPerAddr: sessions of one address (0: none) */
	unsigned
		big_bufs_per_addr; /* bigBuffersPerAddr: pool buffers one address holds (0: none) */
	uint32_t reasm_timeout_ms; /* reassemblyTimeoutMs: a multi-packet request's time (2000) */
};

/*
 * A datagram that starts with these 4 bytes ("PRAW" on the wire, never a
 * transport packet) is reflected unchanged by a server created with
 * raw_echo: sprocket-bench measures the port's raw round trip ("ping-raw",
 * the floor) against the very core that serves its requests.
 */
#define DP_RAW_MAGIC 0x57415250u

struct dp_xreq {
	uint16_t op;
	const uint8_t *msg; /* valid during the handler call only */
	uint32_t len;
	uint64_t ts_recv_ns; /* the request's last packet arrived */
	struct dp_xhandle h;
	struct dp_addr peer;
	/* the session's accessKey (NULL: opened without credentials), and two words the
	 * handler may keep per session (its lookup of the account) */
	const char *ak;
	uint8_t ak_len;
	const void **auth_cache;
};

struct dp_xsrv;

/*
 * A request is complete. The handler answers it with dp_xsrv_resp_buf() +
 * dp_xsrv_respond(), now or later; until then the slot is "processing".
 * Context: the owning core, inside dp_xsrv_poll(); must not block.
 */
typedef void (*dp_xsrv_handler_fn)(struct dp_xsrv *s, const struct dp_xreq *req, void *arg);

/* Ownership: owner core writes; stats readers load relaxed (torn reads fine). */
struct dp_xsrv_stats {
	uint64_t rx_malformed;
	uint64_t rx_bad_magic;
	uint64_t rx_bad_version;
	uint64_t rx_no_session;
	uint64_t rx_bad_token;
	uint64_t rx_bad_geometry;
	uint64_t rx_stray_credit;
	uint64_t rx_reset;
	uint64_t rx_stale;
	uint64_t rx_dup;
	uint64_t rx_slot_busy;
	uint64_t rx_too_big;
	uint64_t raw_echoed; /* DP_RAW_MAGIC datagrams reflected (raw_echo) */
	uint64_t tx_reset;
	uint64_t tx_retrans;	/* response packets re-sent */
	uint64_t resp_released; /* big responses freed on the client's final CREDIT */
	uint64_t executed;	/* requests handed to the handler */
	uint64_t busy;		/* SYSTEM_BUSY: no big buffer */
	uint64_t sessions_open; /* gauge */
	uint64_t sessions_opened;
	uint64_t sessions_refused; /* table full */
	uint64_t sessions_expired;
	uint64_t sessions_unauth;	/* CONNECTs refused: no, unknown or wrong credentials */
	uint64_t challenges;		/* AUTH_CHALLENGEs sent */
	uint64_t rx_bad_peer;		/* a session's id and token from another address */
	uint64_t sessions_refused_addr; /* CONNECTs past maxSessionsPerAddr */
	uint64_t busy_addr;	 /* SYSTEM_BUSY: the address holds bigBuffersPerAddr buffers */
	uint64_t reasm_timeouts; /* multi-packet requests not complete in reassemblyTimeoutMs */
};

/**
 * dp_xsrv_create() - a transport server on @port (owned by the caller's core).
 *
 * Context: startup; allocates (sessions, slots, the big-buffer pool, mmap'd
 * so untouched buffers cost no memory).
 * Return: 0, -EINVAL bad config, -ENOMEM.
 */
MUST_CHECK int dp_xsrv_create(const struct dp_xsrv_cfg *cfg, struct dp_port *port,
			      dp_xsrv_handler_fn handler, void *arg, struct dp_xsrv **out);

/* Sends RESET SHUTDOWN to every session and frees everything. Context: owner. */
void dp_xsrv_destroy(struct dp_xsrv *s);

/**
 * dp_xsrv_poll() - one RX burst: validate, reassemble, run handlers, answer
 * duplicates, then flush TX; every ~1 ms also expires idle sessions.
 *
 * @now_ns: clk_mono_fast_ns() (the requests' receive time).
 * Context: the owning core, non-blocking.
 * Return: packets received (0 = idle).
 */
unsigned dp_xsrv_poll(struct dp_xsrv *s, uint64_t now_ns);

/**
 * dp_xsrv_input() - process @n datagrams the owner received itself (for a
 * loop that shares its port with other traffic, e.g. the benchmark's echo
 * peer, which also reflects raw datagrams). The owner calls rx_done().
 *
 * Context: the owning core, non-blocking.
 */
void dp_xsrv_input(struct dp_xsrv *s, const struct dp_rx *rx, unsigned n, uint64_t now_ns);

/**
 * dp_xsrv_resp_buf() - a buffer for the @len-byte response to @h.
 *
 * The caller encodes the whole response message (common part first) and
 * then calls dp_xsrv_respond() with the same handle.
 * Context: owner core.
 * Return: the buffer; NULL when @len is under 40 bytes or over max_msg,
 * the request is gone (session expired, slot
 * moved on: drop the answer) or no buffer is free (-> answer SYSTEM_BUSY
 * with a small message, which always fits).
 */
uint8_t *dp_xsrv_resp_buf(struct dp_xsrv *s, struct dp_xhandle h, uint32_t len);

/**
 * dp_xsrv_respond() - send the response written into dp_xsrv_resp_buf(),
 * keep it for duplicates.
 *
 * Context: owner core.
 * Return: 0, -ENOENT the request is gone, -EINVAL @len differs from the
 * buffer's.
 */
MUST_CHECK int dp_xsrv_respond(struct dp_xsrv *s, struct dp_xhandle h, uint32_t len);

/* Return: the request's session is alive and the slot still waits for this answer. */
bool dp_xsrv_is_pending(const struct dp_xsrv *s, struct dp_xhandle h);

const struct dp_xsrv_stats *dp_xsrv_stats(const struct dp_xsrv *s);

/* Flushes queued TX packets (dp_xsrv_poll() does it; deferred answers may call it). */
void dp_xsrv_flush(struct dp_xsrv *s);

/* ---- client ---- */

struct dp_xcli_cfg {
	uint16_t slots;	       /* requested per session (default 8) */
	uint32_t max_msg;      /* requested (default 4 MiB + 64 KiB) */
	uint32_t rto_us;       /* initial retransmission timeout (default 2000) */
	uint32_t rto_max_us;   /* backoff cap (default 200000) */
	unsigned max_retries;  /* unanswered retransmissions before the session is dead (12) */
	const char *client_id; /* default "sprocket@<pid>" */
	/* credentials for brokers with aclEnable (NULL: none); copied/absorbed at create */
	const char *access_key; /* at most WIRE_DP_AK_MAX bytes */
	const char *secret_key;
};

struct dp_xcli;
struct dp_xsess;

/*
 * A request finished. @err 0: @msg/@len is the response (valid during the
 * call only). -ETIMEDOUT: no answer after max_retries; -ECONNRESET: the
 * server reset the session; both leave the session dead (reconnect).
 * Context: inside dp_xcli_poll() on the client's thread.
 */
typedef void (*dp_xcli_done_fn)(void *arg, int err, const uint8_t *msg, uint32_t len);
/*
 * A callback may submit new requests; it must not call dp_xcli_poll(),
 * dp_xcli_connect(), dp_xcli_close() or dp_xcli_destroy() (they assert):
 * mark the session and close it after the poll returns.
 */

struct dp_xcli_stats {
	uint64_t tx_requests;
	uint64_t tx_retrans;
	uint64_t rx_responses;
	uint64_t rx_dropped; /* unknown session/token/slot/seq, malformed */
	uint64_t rx_credits;
	uint64_t timeouts;
	uint64_t resets;
};

MUST_CHECK int dp_xcli_create(const struct dp_xcli_cfg *cfg, struct dp_port *port,
			      struct dp_xcli **out);
void dp_xcli_destroy(struct dp_xcli *c);

/**
 * dp_xcli_connect() - open a session to the server core at @server.
 *
 * Polls the port until the CONNECT answer arrives (retransmitting) or
 * @timeout_ms passes.
 * Context: the client's thread; busy-polls.
 * Return: 0; -ETIMEDOUT; -EBUSY server full; -EACCES credentials missing,
 * unknown or wrong (aclEnable); -EPROTO bad answer; -ENOMEM.
 */
MUST_CHECK int dp_xcli_connect(struct dp_xcli *c, struct dp_addr server, uint32_t timeout_ms,
			       struct dp_xsess **out);

/* Sends DISCONNECT (best effort, waits up to @timeout_ms) and frees the session. */
void dp_xcli_close(struct dp_xsess *s, uint32_t timeout_ms);

/**
 * dp_xcli_submit() - start a request on a free slot.
 * @msg: must stay valid and unchanged until @done runs (retransmissions
 *       read it; nothing is copied).
 *
 * Context: the client's thread.
 * Return: 0 (@done will run exactly once); -EAGAIN no free slot (poll and
 * retry); -EMSGSIZE over the session's max_msg; -ENOTCONN session dead.
 */
MUST_CHECK int dp_xcli_submit(struct dp_xsess *s, uint16_t op, const uint8_t *msg, uint32_t len,
			      dp_xcli_done_fn done, void *arg);

/* One RX burst + timers. Return: packets received. Context: the client's thread. */
unsigned dp_xcli_poll(struct dp_xcli *c);

/*
 * Read the clock again for the next dp_xcli_submit(): a callback that
 * worked for a while (milliseconds) before it submits would otherwise date
 * its request, and arm its retransmission, from the poll's older clock.
 * Context: the client's thread.
 */
void dp_xcli_clock(struct dp_xcli *c);

/* Return: requests in flight on @s. */
unsigned dp_xsess_inflight(const struct dp_xsess *s);
/* Return: slots granted by the server; the session's negotiated limits. */
uint16_t dp_xsess_slots(const struct dp_xsess *s);
uint32_t dp_xsess_max_msg(const struct dp_xsess *s);
bool dp_xsess_is_dead(const struct dp_xsess *s);
/* The session's id and token (diagnostics, tests). */
uint32_t dp_xsess_id(const struct dp_xsess *s);
uint64_t dp_xsess_token(const struct dp_xsess *s);

const struct dp_xcli_stats *dp_xcli_stats(const struct dp_xcli *c);

#endif /* SP_DP_XPORT_H */
