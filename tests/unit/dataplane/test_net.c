// SPDX-License-Identifier: Apache-2.0
/*
 * test_net.c - the raw backends' Ethernet/IPv4/UDP/ARP helpers (net.c):
 * header writer against the parser, checksums, ARP frames, and the ARP
 * cache's slot choice (a new request must not evict a resolved neighbour
 * while free slots remain).
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "port_priv.h"

static const uint8_t mac_a[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t mac_b[6] = {0x02, 0, 0, 0, 0, 0x0b};

static uint32_t
ip4(const char *s)
{
	struct in_addr a;

	T_ASSERT(inet_pton(AF_INET, s, &a) == 1);
	return a.s_addr;
}

static void
test_udp_round_trip(void)
{
	static uint8_t frame[DP_UDP_HDRS + 1500];
	const uint32_t sizes[] = {0, 1, 7, 64, 1024, 1472};

	for (unsigned s = 0; s < ARRAY_SIZE(sizes); s++) {
		uint32_t len = sizes[s];
		struct dp__frame f;

		for (uint32_t i = 0; i < len; i++)
			frame[DP_UDP_HDRS + i] = (uint8_t)(i * 13 + s);
		dp__frame_udp_hdrs(frame, mac_a, mac_b, ip4("10.0.0.1"), ip4("10.0.0.2"), 9100,
				   9200, len, (uint16_t)s, true);
		T_ASSERT_EQ(dp__frame_parse(frame, DP_UDP_HDRS + len, true, &f), DP__FRAME_UDP);
		T_ASSERT_MEMEQ(f.src_mac, mac_a, 6);
		T_ASSERT_MEMEQ(f.dst_mac, mac_b, 6);
		T_ASSERT_EQ(f.src_ip, ip4("10.0.0.1"));
		T_ASSERT_EQ(f.dst_ip, ip4("10.0.0.2"));
		T_ASSERT_EQ(f.src_port, 9100);
		T_ASSERT_EQ(f.dst_port, 9200);
		T_ASSERT_EQ(f.payload_len, len);
		T_ASSERT(f.payload == frame + DP_UDP_HDRS);
		/* Ethernet padding after the datagram is allowed. */
		T_ASSERT_EQ(dp__frame_parse(frame, DP_UDP_HDRS + len + 4, true, &f), DP__FRAME_UDP);
		T_ASSERT_EQ(f.payload_len, len);
		if (len) {
			/* A flipped payload bit fails the UDP checksum, unless not verified. */
			frame[DP_UDP_HDRS] ^= 1;
			T_ASSERT_EQ(dp__frame_parse(frame, DP_UDP_HDRS + len, true, &f),
				    DP__FRAME_OTHER);
			T_ASSERT_EQ(dp__frame_parse(frame, DP_UDP_HDRS + len, false, &f),
				    DP__FRAME_UDP);
			frame[DP_UDP_HDRS] ^= 1;
		}
		/* Truncated: the IPv4 total length is more than the frame holds. */
		T_ASSERT_EQ(dp__frame_parse(frame, DP_UDP_HDRS + len - 1, false, &f),
			    DP__FRAME_OTHER);
	}
}

static void
test_fragment_ignored(void)
{
	static uint8_t frame[DP_UDP_HDRS + 100];
	struct dp__frame f;

	dp__frame_udp_hdrs(frame, mac_a, mac_b, ip4("10.0.0.1"), ip4("10.0.0.2"), 1, 2, 100, 0,
			   false);
	T_ASSERT_EQ(dp__frame_parse(frame, sizeof(frame), false, &f), DP__FRAME_UDP);
	frame[DP_ETH_HLEN + 6] |= 0x20; /* MF */
	T_ASSERT_EQ(dp__frame_parse(frame, sizeof(frame), false, &f), DP__FRAME_OTHER);
}

static void
test_arp_frames(void)
{
	static const uint8_t zero[6];
	uint8_t frame[DP_ETH_MIN_FRAME];
	struct dp__frame f;

	T_ASSERT_EQ(
		dp__frame_arp(frame, DP_ARP_REQUEST, mac_a, ip4("10.0.0.1"), zero, ip4("10.0.0.2")),
		DP_ETH_MIN_FRAME);
	T_ASSERT_EQ(dp__frame_parse(frame, sizeof(frame), true, &f), DP__FRAME_ARP);
	T_ASSERT_EQ(f.arp_op, DP_ARP_REQUEST);
	T_ASSERT_MEMEQ(f.arp_sha, mac_a, 6);
	T_ASSERT_EQ(f.arp_spa, ip4("10.0.0.1"));
	T_ASSERT_EQ(f.arp_tpa, ip4("10.0.0.2"));
	T_ASSERT_EQ(frame[0], 0xff); /* broadcast */

	dp__frame_arp(frame, DP_ARP_REPLY, mac_b, ip4("10.0.0.2"), mac_a, ip4("10.0.0.1"));
	T_ASSERT_EQ(dp__frame_parse(frame, sizeof(frame), true, &f), DP__FRAME_ARP);
	T_ASSERT_EQ(f.arp_op, DP_ARP_REPLY);
	T_ASSERT_MEMEQ(frame, mac_a, 6); /* unicast to the asker */
	T_ASSERT_MEMEQ(f.arp_sha, mac_b, 6);
}

/* Asking for a new address takes a free slot, never a resolved neighbour's. */
static void
test_arp_ask_keeps_resolved(void)
{
	struct dp__arp_cache c;
	uint8_t mac[6];

	memset(&c, 0, sizeof(c));
	dp__arp_learn(&c, ip4("10.0.0.2"), mac_b);
	for (unsigned i = 0; i < DP__ARP_ENTRIES - 1; i++) {
		uint32_t ip = htonl(0x0a000100u + i);

		T_ASSERT(dp__arp_should_ask(&c, ip, 1000));
		T_ASSERT(!dp__arp_should_ask(&c, ip, 2000)); /* rate-limited */
		T_ASSERT(dp__arp_lookup(&c, ip4("10.0.0.2"), mac));
		T_ASSERT_MEMEQ(mac, mac_b, 6);
	}
	T_ASSERT(dp__arp_should_ask(&c, htonl(0x0a000100u), 1000 + DP__ARP_RETRY_NS));
	/* Learning the answer resolves the pending entry. */
	dp__arp_learn(&c, htonl(0x0a000101u), mac_a);
	T_ASSERT(dp__arp_lookup(&c, htonl(0x0a000101u), mac));
	T_ASSERT_MEMEQ(mac, mac_a, 6);
	T_ASSERT(!dp__arp_should_ask(&c, htonl(0x0a000101u), 5 * DP__ARP_RETRY_NS));
}

/* RFC 1071 the plain way: big-endian 16-bit words, end-around carry each add. */
static uint16_t
ref_csum(const uint8_t *p, size_t len, uint16_t start)
{
	uint32_t s = start;

	for (size_t i = 0; i < len; i += 2) {
		s += (uint32_t)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
		s = (s & 0xffff) + (s >> 16);
	}
	return (uint16_t)s;
}

/*
 * The word-parallel sum against the reference: every length to 300 (each
 * tail of the 32-, 8- and 2-byte loops), odd and even alignment, all-ones
 * bytes (the most carries), and a start sum carried in.
 */
static void
test_csum_matches_reference(void)
{
	static uint8_t buf[2 + 1500];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int fill = 0; fill < 2; fill++) {
		for (size_t i = 0; i < sizeof(buf); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = fill ? 0xff : (uint8_t)x;
		}
		for (size_t off = 0; off < 2; off++) {
			for (size_t len = 0; len <= 300; len++) {
				uint16_t start = (uint16_t)(len * 977);
				/* The sum is native-endian: start and result in the wire's order. */
				uint16_t got = ntohs(dp__csum_fold(
					dp__csum_partial(buf + off, len, htons(start))));
				uint16_t want = ref_csum(buf + off, len, start);

				/* 0 and 0xffff are the same one's-complement number. */
				if (got != want &&
				    !((got == 0 || got == 0xffff) && (want == 0 || want == 0xffff)))
					T_FAIL("len %zu off %zu fill %d: %04x, want %04x", len, off,
					       fill, got, want);
			}
		}
	}
	/* A full datagram of 0xff: the widest sums. */
	memset(buf, 0xff, sizeof(buf));
	T_ASSERT_EQ_U64(ntohs(dp__csum_fold(dp__csum_partial(buf, 1500, 0))),
			ref_csum(buf, 1500, 0));
}

T_MAIN(T_CASE(test_udp_round_trip), T_CASE(test_fragment_ignored), T_CASE(test_arp_frames),
       T_CASE(test_arp_ask_keeps_resolved), T_CASE(test_csum_matches_reference))
