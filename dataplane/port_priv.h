/* SPDX-License-Identifier: Apache-2.0 */
/*
 * port_priv.h - what the port backends share inside dataplane/: their
 * constructors (dispatched by dp_ports_open() in port.c) and the Ethernet,
 * IPv4, UDP and ARP helpers of the raw backends (af_packet, dpdk; net.c).
 *
 * Pure functions over caller buffers except the ARP cache, which belongs to
 * one port (Ownership: the port's owner thread).
 */
#ifndef SP_DP_PORT_PRIV_H
#define SP_DP_PORT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp/port.h"

int dp__udp_open(const struct dp_port_cfg *cfg, struct dp_port **out);
int dp__afp_open(const struct dp_port_cfg *cfg, struct dp_port **out);
int dp__dpdk_open(const struct dp_port_cfg *cfg, struct dp_port **out);

#define DP_ETH_HLEN 14
#define DP_IP4_HLEN 20
#define DP_UDP_HLEN 8
#define DP_UDP_HDRS (DP_ETH_HLEN + DP_IP4_HLEN + DP_UDP_HLEN) /* 42 */
#define DP_ARP_FRAME_LEN (DP_ETH_HLEN + 28)		      /* 42, before padding */
#define DP_ETH_MIN_FRAME 60				      /* without FCS */

#define DP_ETHERTYPE_IP 0x0800
#define DP_ETHERTYPE_ARP 0x0806
#define DP_ARP_REQUEST 1
#define DP_ARP_REPLY 2

enum dp__frame_kind {
	DP__FRAME_OTHER = 0, /* not for us or malformed: ignore */
	DP__FRAME_UDP = 1,
	DP__FRAME_ARP = 2,
};

/* A parsed frame: views into it. */
struct dp__frame {
	const uint8_t *src_mac;
	const uint8_t *dst_mac;
	uint32_t src_ip; /* network order */
	uint32_t dst_ip;
	uint16_t src_port; /* host order */
	uint16_t dst_port;
	const uint8_t *payload; /* UDP payload */
	uint32_t payload_len;
	/* ARP only */
	uint16_t arp_op;
	const uint8_t *arp_sha;
	uint32_t arp_spa;
	uint32_t arp_tpa;
};

/**
 * dp__frame_parse() - classify an Ethernet frame and fill @f.
 * @verify_csum: check the IPv4 header checksum and a non-zero UDP checksum.
 *
 * UDP: IPv4 without options or with them (IHL honoured), not a fragment,
 * lengths consistent with @len (trailing Ethernet padding allowed).
 * Context: any thread, pure.
 * Return: enum dp__frame_kind.
 */
int dp__frame_parse(const uint8_t *frame, uint32_t len, bool verify_csum, struct dp__frame *f);

/**
 * dp__frame_udp_hdrs() - write Ethernet + IPv4 + UDP headers (42 bytes) at
 * @frame for a datagram of @payload_len bytes that is already in place at
 * @frame + DP_UDP_HDRS (the UDP checksum covers it when @udp_csum).
 *
 * Context: any thread, pure.
 */
void dp__frame_udp_hdrs(uint8_t *frame, const uint8_t src_mac[6], const uint8_t dst_mac[6],
			uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
			uint32_t payload_len, uint16_t ip_id, bool udp_csum);

/* Writes an ARP request or reply frame padded to 60 bytes; Return: 60. */
uint32_t dp__frame_arp(uint8_t *frame, uint16_t op, const uint8_t sha[6], uint32_t spa,
		       const uint8_t tha[6], uint32_t tpa);

/* Return: the ones'-complement sum of @len bytes folded into 16 bits, not inverted. */
uint32_t dp__csum_partial(const void *buf, size_t len, uint32_t sum);
uint16_t dp__csum_fold(uint32_t sum);

/* A small IPv4 -> MAC cache; learnt from ARP and from received UDP frames. */
#define DP__ARP_ENTRIES 16
#define DP__ARP_RETRY_NS 100000000ull /* re-ask an unresolved address every 100 ms */

struct dp__arp_cache {
	struct {
		uint32_t ip;
		uint8_t mac[6];
		bool valid;
		uint64_t asked_ns; /* last request sent while unresolved */
	} e[DP__ARP_ENTRIES];
	unsigned next; /* round-robin victim */
};

/* Return: true and @mac filled when @ip is known. */
bool dp__arp_lookup(const struct dp__arp_cache *c, uint32_t ip, uint8_t mac[6]);
/* Records @ip -> @mac (overwrites a stale entry). */
void dp__arp_learn(struct dp__arp_cache *c, uint32_t ip, const uint8_t mac[6]);
/* Return: true when a request for @ip should go out now (rate-limited per address). */
bool dp__arp_should_ask(struct dp__arp_cache *c, uint32_t ip, uint64_t now_ns);

#endif /* SP_DP_PORT_PRIV_H */
