// SPDX-License-Identifier: Apache-2.0
/*
 * net.c - Ethernet, IPv4, UDP and ARP for the raw port backends.
 *
 * af_packet and dpdk both see whole Ethernet frames, so both need the same
 * few things: classify a received frame, write the 42 bytes of headers in
 * front of a datagram, answer and send ARP, and remember which MAC an IPv4
 * address has. Only what a UDP request/response protocol on one L2 segment
 * needs is here: no IP options on send, no fragments (a fragment is ignored:
 * the transport never sends datagrams above the path MTU), no routing (the
 * peer is on the link; a gateway would be one more ARP entry).
 */
#include <string.h>

#include "port_priv.h"

static inline uint16_t
rd16be(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void
wr16be(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

uint32_t
dp__csum_partial(const void *buf, size_t len, uint32_t sum)
{
	const uint8_t *p = buf;
	uint64_t s = sum;

	while (len >= 8) {
		uint32_t a;
		uint32_t b;

		memcpy(&a, p, 4);
		memcpy(&b, p + 4, 4);
		s += a;
		s += b;
		p += 8;
		len -= 8;
	}
	while (len >= 2) {
		uint16_t a;

		memcpy(&a, p, 2);
		s += a;
		p += 2;
		len -= 2;
	}
	if (len) {
		uint16_t a = 0;

		memcpy(&a, p, 1);
		s += a;
	}
	while (s >> 32)
		s = (s & 0xffffffffu) + (s >> 32);
	/* Native-endian sum of 16-bit words: byte order cancels out (RFC 1071). */
	while (s >> 16)
		s = (s & 0xffffu) + (s >> 16);
	return (uint32_t)s;
}

uint16_t
dp__csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)sum;
}

static uint32_t
udp_pseudo_sum(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_len)
{
	uint8_t ph[12];

	memcpy(ph, &src_ip, 4);
	memcpy(ph + 4, &dst_ip, 4);
	ph[8] = 0;
	ph[9] = 17;
	wr16be(ph + 10, udp_len);
	return dp__csum_partial(ph, sizeof(ph), 0);
}

int
dp__frame_parse(const uint8_t *frame, uint32_t len, bool verify_csum, struct dp__frame *f)
{
	uint16_t type;

	if (len < DP_ETH_HLEN)
		return DP__FRAME_OTHER;
	f->dst_mac = frame;
	f->src_mac = frame + 6;
	type = rd16be(frame + 12);
	if (type == DP_ETHERTYPE_ARP) {
		const uint8_t *a = frame + DP_ETH_HLEN;

		if (len < DP_ARP_FRAME_LEN)
			return DP__FRAME_OTHER;
		/* Ethernet / IPv4 only: htype 1, ptype 0x0800, hlen 6, plen 4. */
		if (rd16be(a) != 1 || rd16be(a + 2) != DP_ETHERTYPE_IP || a[4] != 6 || a[5] != 4)
			return DP__FRAME_OTHER;
		f->arp_op = rd16be(a + 6);
		f->arp_sha = a + 8;
		memcpy(&f->arp_spa, a + 14, 4);
		memcpy(&f->arp_tpa, a + 24, 4);
		return DP__FRAME_ARP;
	}
	if (type != DP_ETHERTYPE_IP)
		return DP__FRAME_OTHER;

	const uint8_t *ip = frame + DP_ETH_HLEN;
	uint32_t avail = len - DP_ETH_HLEN;
	uint32_t ihl;
	uint32_t tot;

	if (avail < DP_IP4_HLEN || (ip[0] >> 4) != 4)
		return DP__FRAME_OTHER;
	ihl = (uint32_t)(ip[0] & 0xf) * 4;
	tot = rd16be(ip + 2);
	if (ihl < DP_IP4_HLEN || tot < ihl + DP_UDP_HLEN || tot > avail)
		return DP__FRAME_OTHER;
	if (ip[9] != 17)
		return DP__FRAME_OTHER;
	/* Any fragment (MF set or a non-zero offset) is not ours. */
	if (rd16be(ip + 6) & 0x3fff)
		return DP__FRAME_OTHER;
	if (verify_csum && dp__csum_fold(dp__csum_partial(ip, ihl, 0)) != 0xffff)
		return DP__FRAME_OTHER;

	const uint8_t *udp = ip + ihl;
	uint32_t ulen = rd16be(udp + 4);

	if (ulen < DP_UDP_HLEN || ulen > tot - ihl)
		return DP__FRAME_OTHER;
	memcpy(&f->src_ip, ip + 12, 4);
	memcpy(&f->dst_ip, ip + 16, 4);
	f->src_port = rd16be(udp);
	f->dst_port = rd16be(udp + 2);
	f->payload = udp + DP_UDP_HLEN;
	f->payload_len = ulen - DP_UDP_HLEN;
	if (verify_csum && (udp[6] | udp[7])) {
		uint32_t s = udp_pseudo_sum(f->src_ip, f->dst_ip, (uint16_t)ulen);

		if (dp__csum_fold(dp__csum_partial(udp, ulen, s)) != 0xffff)
			return DP__FRAME_OTHER;
	}
	return DP__FRAME_UDP;
}

void
dp__frame_udp_hdrs(uint8_t *frame, const uint8_t src_mac[6], const uint8_t dst_mac[6],
		   uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
		   uint32_t payload_len, uint16_t ip_id, bool udp_csum)
{
	uint8_t *ip = frame + DP_ETH_HLEN;
	uint8_t *udp = ip + DP_IP4_HLEN;
	uint16_t ulen = (uint16_t)(payload_len + DP_UDP_HLEN);
	uint16_t c;

	memcpy(frame, dst_mac, 6);
	memcpy(frame + 6, src_mac, 6);
	wr16be(frame + 12, DP_ETHERTYPE_IP);

	ip[0] = 0x45;
	ip[1] = 0;
	wr16be(ip + 2, (uint16_t)(ulen + DP_IP4_HLEN));
	wr16be(ip + 4, ip_id);
	wr16be(ip + 6, 0x4000); /* DF: the transport sizes packets to the MTU */
	ip[8] = 64;
	ip[9] = 17;
	ip[10] = 0;
	ip[11] = 0;
	memcpy(ip + 12, &src_ip, 4);
	memcpy(ip + 16, &dst_ip, 4);
	c = (uint16_t)~dp__csum_fold(dp__csum_partial(ip, DP_IP4_HLEN, 0));
	memcpy(ip + 10, &c, 2);

	wr16be(udp, src_port);
	wr16be(udp + 2, dst_port);
	wr16be(udp + 4, ulen);
	udp[6] = 0;
	udp[7] = 0;
	if (udp_csum) {
		uint32_t s = udp_pseudo_sum(src_ip, dst_ip, ulen);

		c = (uint16_t)~dp__csum_fold(dp__csum_partial(udp, ulen, s));
		if (c == 0)
			c = 0xffff; /* 0 means "no checksum" in IPv4 UDP */
		memcpy(udp + 6, &c, 2);
	}
}

uint32_t
dp__frame_arp(uint8_t *frame, uint16_t op, const uint8_t sha[6], uint32_t spa, const uint8_t tha[6],
	      uint32_t tpa)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint8_t *a = frame + DP_ETH_HLEN;

	memset(frame, 0, DP_ETH_MIN_FRAME);
	memcpy(frame, op == DP_ARP_REQUEST ? bcast : tha, 6);
	memcpy(frame + 6, sha, 6);
	wr16be(frame + 12, DP_ETHERTYPE_ARP);
	wr16be(a, 1);
	wr16be(a + 2, DP_ETHERTYPE_IP);
	a[4] = 6;
	a[5] = 4;
	wr16be(a + 6, op);
	memcpy(a + 8, sha, 6);
	memcpy(a + 14, &spa, 4);
	if (op == DP_ARP_REPLY)
		memcpy(a + 18, tha, 6);
	memcpy(a + 24, &tpa, 4);
	return DP_ETH_MIN_FRAME;
}

bool
dp__arp_lookup(const struct dp__arp_cache *c, uint32_t ip, uint8_t mac[6])
{
	for (unsigned i = 0; i < DP__ARP_ENTRIES; i++) {
		if (c->e[i].valid && c->e[i].ip == ip) {
			memcpy(mac, c->e[i].mac, 6);
			return true;
		}
	}
	return false;
}

/*
 * The entry for @ip: its own if tracked, else a free one, else the
 * round-robin victim. A free slot is preferred so that tracking a new
 * address never evicts a resolved neighbour (a round of ARP and dropped
 * datagrams for it).
 */
static unsigned
arp_slot(struct dp__arp_cache *c, uint32_t ip)
{
	unsigned slot;

	for (unsigned i = 0; i < DP__ARP_ENTRIES; i++) {
		if (c->e[i].ip == ip)
			return i;
	}
	for (unsigned i = 0; i < DP__ARP_ENTRIES; i++) {
		if (!c->e[i].valid && c->e[i].ip == 0)
			return i;
	}
	slot = c->next;
	c->next = (c->next + 1) % DP__ARP_ENTRIES;
	return slot;
}

void
dp__arp_learn(struct dp__arp_cache *c, uint32_t ip, const uint8_t mac[6])
{
	unsigned slot;

	if (ip == 0)
		return;
	slot = arp_slot(c, ip);
	c->e[slot].ip = ip;
	memcpy(c->e[slot].mac, mac, 6);
	c->e[slot].valid = true;
	c->e[slot].asked_ns = 0;
}

bool
dp__arp_should_ask(struct dp__arp_cache *c, uint32_t ip, uint64_t now_ns)
{
	/* Track the pending address so requests are rate-limited. */
	unsigned slot = arp_slot(c, ip);

	if (c->e[slot].ip != ip) {
		c->e[slot].ip = ip;
		c->e[slot].valid = false;
		c->e[slot].asked_ns = now_ns;
		return true;
	}
	if (c->e[slot].valid)
		return false;
	if (now_ns - c->e[slot].asked_ns < DP__ARP_RETRY_NS)
		return false;
	c->e[slot].asked_ns = now_ns;
	return true;
}
