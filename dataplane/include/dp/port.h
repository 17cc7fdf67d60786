/* SPDX-License-Identifier: Apache-2.0 */
/*
 * port.h - packet I/O ports: one interface, three backends (udp, af_packet, dpdk).
 *
 * A port moves UDP datagrams for exactly one thread: a broker's dataplane core
 * or a client's I/O thread. What crosses this interface is a UDP payload plus
 * the IPv4 address and UDP port of the other end; Ethernet, IPv4 and UDP
 * headers, checksums and ARP are the backend's business (dp/net.h has the
 * shared helpers the raw backends use). The session transport (dp/xport.h)
 * and the raw ping-pong benchmark sit on top and never know which backend
 * carries them.
 *
 * dp_ports_open() opens @n ports at once because some backends share process
 * state between them: dpdk has one EAL and one ethdev with n RX/TX queue
 * pairs; af_packet and udp open n sockets. Port i listens on UDP port
 * cfg->base_port + i. Each port is then owned by one thread (Ownership:
 * single owner; stats read relaxed by others).
 *
 * RX is zero-copy: rx_burst() fills views into the backend's buffers (socket
 * buffer, TPACKET_V2 ring frame, mbuf) that stay valid until the owner calls
 * rx_done(). TX copies: tx_burst() gathers each datagram's two pieces (a
 * header, typically the 48-byte transport header, and a payload) into the
 * backend's frame, so callers may reuse their buffers as soon as it returns.
 * A datagram the backend cannot take now (ring full, ARP not resolved yet,
 * link down) is dropped and counted, exactly as a NIC would: the transport
 * above retransmits.
 */
#ifndef SP_DP_PORT_H
#define SP_DP_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"

#define DP_BURST_MAX 32
#define DP_PORTS_MAX 64
/* Every endpoint takes 576-byte IPv4 packets: 548 bytes of UDP payload (docs/protocol.md §3). */
#define DP_DGRAM_MIN 548u

enum dp_backend {
	DP_BACKEND_UDP = 0,
	DP_BACKEND_AF_PACKET = 1,
	DP_BACKEND_DPDK = 2,
};

/* An IPv4 UDP endpoint. */
struct dp_addr {
	uint32_t ip;   /* network byte order */
	uint16_t port; /* host byte order */
};

/* One received datagram; valid until the next rx_done() on its port. */
struct dp_rx {
	const uint8_t *data; /* UDP payload */
	uint32_t len;
	struct dp_addr src;
};

/* One datagram to send: hdr (may be NULL with hdr_len 0) then data. */
struct dp_tx {
	const uint8_t *hdr;
	uint32_t hdr_len;
	const uint8_t *data;
	uint32_t len;
	struct dp_addr dst;
};

/* Ownership: owner writes; others read relaxed (torn reads are fine for stats). */
struct dp_port_stats {
	uint64_t rx_pkts;
	uint64_t rx_bytes;
	uint64_t tx_pkts;
	uint64_t tx_bytes;
	uint64_t rx_ignored; /* frames that are not IPv4/UDP to this port, bad checksums */
	uint64_t tx_dropped; /* ring/socket full, no route, datagram too big */
	uint64_t tx_no_arp;  /* raw backends: destination MAC not known yet */
	uint64_t arp_rx;     /* raw backends: ARP packets seen */
	uint64_t arp_tx;     /* raw backends: ARP requests and replies sent */
	uint64_t link_downs; /* times the link was seen going down */
	uint64_t rx_handoff; /* dpdk: packets passed to their owner over an rte_ring */
};

struct dp_port;

struct dp_port_ops {
	const char *name; /* "udp", "af_packet", "dpdk" */
	/* Return: datagrams written to @rx (0..@n). Non-blocking. */
	unsigned (*rx_burst)(struct dp_port *p, struct dp_rx *rx, unsigned n);
	/* Releases every buffer handed out by rx_burst() since the last call. */
	void (*rx_done)(struct dp_port *p);
	/* Return: datagrams taken (0..@n); the rest are dropped and counted. */
	unsigned (*tx_burst)(struct dp_port *p, const struct dp_tx *tx, unsigned n);
	/*
	 * Waits up to @timeout_us for RX to become possible (poll() on the
	 * socket; dpdk: a short sleep). The only call that may sleep; the
	 * owner uses it when idle and busyPoll is off. @wake_fd (-1: none) is
	 * an eventfd that ends the wait early when it becomes readable (the
	 * caller drains it).
	 */
	void (*wait)(struct dp_port *p, unsigned timeout_us, int wake_fd);
	/* Return: whether the link carries packets now (cheap; no syscall on udp/dpdk). */
	bool (*link_up)(struct dp_port *p);
	/* Frees this port's resources; the last port closed frees shared state. */
	void (*close)(struct dp_port *p);
};

/* Backends embed this as their first member. */
struct dp_port {
	const struct dp_port_ops *ops;
	/* immutable after open */
	struct dp_addr local; /* the address peers send to */
	uint8_t mac[6];	      /* raw backends: the port's MAC; zero for udp */
	uint32_t max_dgram;   /* largest UDP payload it can send or receive */
	unsigned index;	      /* 0..n-1 */
	/* owner writes, stats read relaxed */
	struct dp_port_stats st;
};

struct dp_port_cfg {
	enum dp_backend backend;
	uint32_t ip;	       /* local IPv4 (network order); udp: bind address, 0 = any */
	uint16_t base_port;    /* port i is base_port + i; udp: 0 = kernel-chosen */
	unsigned n;	       /* number of ports (dataplane cores), 1..DP_PORTS_MAX */
	const char *iface;     /* af_packet: interface name; optional for udp; unused by dpdk */
	const char *dpdk_args; /* dpdk: EAL arguments, space-separated, incl. --vdev */
	uint32_t mtu;	       /* link MTU to assume (0 = the interface's, or 1500) */
	unsigned ring_frames;  /* af_packet/dpdk: frames per RX/TX ring (0 = default) */
	bool icmp_guard;       /* af_packet: keep the kernel from answering our UDP ports */
};

/**
 * dp_ports_open() - open @cfg->n ports of @cfg->backend.
 * @out: receives n port pointers.
 *
 * Context: startup, any thread; may sleep, allocate and log.
 * Return: 0; -EINVAL bad config; -ENOTSUP backend not built (dpdk without
 * libdpdk); -EPERM missing privilege (af_packet needs CAP_NET_RAW); other
 * negative errno from the system (the cause is logged).
 */
MUST_CHECK int dp_ports_open(const struct dp_port_cfg *cfg, struct dp_port **out);

/* Closes the @n ports of one dp_ports_open() call. */
void dp_ports_close(struct dp_port **ports, unsigned n);

/* Return: "udp", "af_packet", "dpdk" or "?"; parse: 0 or -EINVAL. */
const char *dp_backend_name(enum dp_backend b);
MUST_CHECK int dp_backend_parse(const char *s, enum dp_backend *out);

static inline unsigned
dp_port_rx_burst(struct dp_port *p, struct dp_rx *rx, unsigned n)
{
	return p->ops->rx_burst(p, rx, n);
}

static inline void
dp_port_rx_done(struct dp_port *p)
{
	p->ops->rx_done(p);
}

static inline unsigned
dp_port_tx_burst(struct dp_port *p, const struct dp_tx *tx, unsigned n)
{
	return p->ops->tx_burst(p, tx, n);
}

static inline void
dp_port_wait(struct dp_port *p, unsigned timeout_us)
{
	p->ops->wait(p, timeout_us, -1);
}

/* As dp_port_wait(), also ending when @wake_fd (an eventfd) is readable. */
static inline void
dp_port_wait_fd(struct dp_port *p, unsigned timeout_us, int wake_fd)
{
	p->ops->wait(p, timeout_us, wake_fd);
}

static inline bool
dp_port_link_up(struct dp_port *p)
{
	return p->ops->link_up(p);
}

#endif /* SP_DP_PORT_H */
