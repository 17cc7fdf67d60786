// SPDX-License-Identifier: Apache-2.0
/*
 * port_afp.c - the AF_PACKET backend: one raw socket per port with mmap'd
 * TPACKET_V2 RX and TX rings, steered by a classic BPF filter on the UDP
 * destination port, with its own ARP and an ICMP guard.
 *
 * Why AF_PACKET at all: it is the kernel-bypass backend that needs no NIC
 * driver, no hugepages and no DPDK, only CAP_NET_RAW. RX costs no syscall
 * (the owner polls frame status words in shared memory), TX costs one
 * sendto() per burst, and PACKET_QDISC_BYPASS hands frames straight to the
 * driver. On the project's VMs that is the best raw-kernel round trip there
 * is (p50 about 6-7 us on a veth pair, docs/benchmarks.md "Dataplane
 * transport vs raw port"); recv()/send() per packet costs one more syscall (about 1.1 us each).
 *
 * DESIGN
 *
 * Rings: TPACKET_V2, not V3. V3 hands a block to user space only when it is
 * full or its retire timer fires, which adds 1-8 ms per packet at low rates.
 * Frames are a power of two (2 KiB for a 1500-byte MTU) so frame i sits at
 * ring + i * frame_size whatever the block size. RX frames handed out as
 * views stay TP_STATUS_USER until rx_done(), which returns them to the kernel
 * in ring order: the kernel fills frames strictly in order and stops at the
 * first one it does not own, so in-order release is what keeps the two heads
 * from ever crossing (releasing a later frame early could let the kernel
 * fill it while rx_done() then overwrote its status, losing the frame and
 * stalling our head). A frame we do not hand out (ARP, noise) is released at
 * once when it is the oldest one held, else with the rest in rx_done().
 *
 * Steering: one socket per port, each with a classic BPF filter that accepts
 * IPv4/UDP, not a fragment, to our IPv4 address and the port's UDP port,
 * plus ARP whose target is our address. Chosen over PACKET_FANOUT with a
 * CBPF program because (a) fanout delivers every frame of the protocol to
 * some member, so noise on the link (IPv6, other UDP, broadcasts) would take
 * ring slots and owner time, while a filter drops it in the kernel before
 * the copy into the ring; (b) fanout group ids are a 16-bit namespace shared
 * by every process on the host and member indexes shift when a socket
 * leaves; (c) a filter also works for n = 1 and costs a few JITed
 * instructions per frame per socket. ARP is accepted by every port's filter
 * (it is rare) so each port, whose ARP cache belongs to its owner thread,
 * learns the replies to its own requests.
 *
 * Protocol ETH_P_ALL + PACKET_IGNORE_OUTGOING: taps on ETH_P_ALL see a frame
 * before tc ingress and netfilter, so the nftables ICMP guard (a prerouting
 * drop) never hides our own traffic from us, and one socket gets IPv4 and
 * ARP. IGNORE_OUTGOING keeps the kernel's own transmissions on the
 * interface (its ARP replies) out of the rings; our TX skips the taps anyway
 * (QDISC_BYPASS). On kernels without the option the owner drops
 * PACKET_OUTGOING frames itself. The socket is created with protocol 0 and
 * bound only after the filter and rings are set, so no unfiltered frame ever
 * lands in a ring.
 *
 * ARP: the cache is per port (dp__arp_cache, owner only) and also learns the
 * source MAC of every UDP datagram received, so a reply never needs ARP. A
 * send to an unknown address asks (rate-limited by dp__arp_should_ask()) and
 * drops the datagram (tx_no_arp); the transport retransmits. Requests for
 * our address are answered by port 0 only, and only when the kernel will
 * not: when the address is assigned to the interface (or is local and
 * arp_ignore is 0) the kernel answers, and a second answer is never sent.
 * Loopback and IFF_NOARP interfaces use all-zero MACs and no ARP.
 *
 * ICMP guard: the kernel also sees every frame we receive and, with nothing
 * bound to the UDP port, answers ICMP port-unreachable. With icmp_guard set,
 * an nftables table (one per dp_ports_open(), named after the pid) drops
 * our IPv4/UDP ports in raw prerouting, after the packet taps ran. Without
 * nft (or when it fails) each port binds a kernel UDP socket to its port and
 * attaches a drop-all filter (those packets show up as Udp InErrors). The
 * table is removed at close from the namespace it was created in; tables of
 * processes that no longer exist are removed at the next open.
 *
 * Link state: link_up() caches IFF_UP && IFF_RUNNING (carrier) and
 * refreshes it with one SIOCGIFFLAGS at most every AFP_LINK_REFRESH_NS. The
 * ioctl reads the device under RCU; rtnetlink's RTM_GETLINK would take RTNL,
 * which namespace setup and teardown hold for milliseconds. The ioctl looks
 * the device up by name and, for a name that no longer exists, tries
 * request_module() once: the port then marks the interface gone (its socket
 * is unbound by the kernel anyway) and never asks again.
 *
 * TX frames leave as zero-copy page fragments and can become AVAILABLE
 * while the datagram still waits, unread, in a kernel socket on the far
 * end. That is safe: the kernel marks these skbs zero-copy and copies
 * their fragments before a receive path can keep them (skb_orphan_frags_rx
 * and friends), so a frame is ours to rewrite as soon as its status says
 * so. test_afp's tx_frames_reused_while_kernel_holds pins this down.
 *
 * Size: over 1,000 lines because it is one backend per file, as port_udp.c and port_dpdk.c: the rings, the BPF
 * filter, ARP and the ICMP guard share the socket's private state.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/clock.h"
#include "common/log.h"
#include "port_priv.h"

#define AFP_RING_FRAMES_DEF 256u
#define AFP_RING_FRAMES_MAX 65536u
/* Loopback's 64 KiB MTU would make 128 KiB frames; 9000 is a jumbo frame. */
#define AFP_MTU_MAX 9000u
#define AFP_LINK_REFRESH_NS 10000000ull
/* Where TPACKET_V2 puts the Ethernet header of a TX frame (no PACKET_TX_HAS_OFF). */
#define AFP_TX_OFF (TPACKET2_HDRLEN - sizeof(struct sockaddr_ll))
/* RX: the kernel places the network header at TPACKET_ALIGN(hdrlen + 16). */
#define AFP_RX_NETOFF TPACKET_ALIGN(TPACKET2_HDRLEN + 16)
#define AFP_NFT_PREFIX "sprocket_afp_"

/*
 * What the n ports of one dp_ports_open() share: only the ICMP guard's
 * nftables table, removed when the last port closes.
 * Ownership: written at open; refs dropped by close (any thread, atomic).
 */
struct afp_shared {
	atomic_uint refs;
	int netns_fd;	/* the namespace the table lives in; -1 if unknown */
	char table[64]; /* nftables table name, "" when none */
};

/* Ownership: single owner thread; stats in base.st read relaxed by others. */
struct afp_port {
	struct dp_port base;
	/* owner only */
	uint32_t rx_head; /* next RX frame to look at */
	uint32_t rx_done; /* oldest RX frame still TP_STATUS_USER (held) */
	uint32_t rx_held; /* frames from rx_done up to rx_head */
	uint32_t tx_head; /* next TX frame to fill */
	uint16_t ip_id;
	bool link;	  /* cached IFF_UP && IFF_RUNNING */
	bool gone;	  /* the interface was deleted: down for good */
	bool tx_unkicked; /* frames set SEND_REQUEST since the last kick */
	uint64_t link_ns; /* when link was last refreshed */
	struct dp__arp_cache arp;
	/* immutable after open */
	int fd;
	int guard_fd;  /* UDP socket of the fallback ICMP guard, or -1 */
	uint8_t *ring; /* RX frames, then TX frames */
	size_t ring_len;
	uint8_t *tx_ring;
	uint32_t frame_size;
	uint32_t rx_frames;
	uint32_t tx_frames;
	int ifindex;
	bool noarp;	     /* loopback / IFF_NOARP: zero MACs, no ARP */
	bool answer_arp;     /* port 0 and the kernel does not answer for our address */
	bool check_outgoing; /* no PACKET_IGNORE_OUTGOING: skip the host's TX in user space */
	struct afp_shared *sh;
	char ifname[IFNAMSIZ];
};

/* What open learns about the interface once, for all ports. */
struct afp_iface {
	int ifindex;
	unsigned flags;
	uint8_t mac[6];
	uint32_t mtu;
	uint32_t ip;
	bool kernel_arp; /* the kernel answers ARP requests for ip on this link */
};

static inline struct afp_port *
afp_of(struct dp_port *p)
{
	return (struct afp_port *)p;
}

static inline struct tpacket2_hdr *
afp_rx_frame(const struct afp_port *a, uint32_t i)
{
	return (struct tpacket2_hdr *)(a->ring + (size_t)i * a->frame_size);
}

static inline struct tpacket2_hdr *
afp_tx_frame(const struct afp_port *a, uint32_t i)
{
	return (struct tpacket2_hdr *)(a->tx_ring + (size_t)i * a->frame_size);
}

static inline uint32_t
afp_next(uint32_t i, uint32_t n)
{
	return i + 1 == n ? 0 : i + 1;
}

/*
 * tp_status is the one word the kernel and the owner hand a frame over
 * with. The header declares it a plain __u32; it is accessed only through
 * these two helpers, as an _Atomic of the same size and alignment.
 */
static inline uint32_t
afp_status_load(const struct tpacket2_hdr *h)
{
	/*
	 * acquire: RX, pairs with the smp_wmb() tpacket_rcv() issues before
	 * __packet_set_status(), so a frame's contents are read only after the
	 * status that publishes them; TX, keeps our writes into a frame after
	 * the load that saw tpacket_destruct_skb() give it back.
	 */
	return atomic_load_acquire((_Atomic uint32_t *)(uintptr_t)&h->tp_status);
}

static inline void
afp_status_store(struct tpacket2_hdr *h, uint32_t status)
{
	/*
	 * release: pairs with the kernel's status read in __packet_get_status()
	 * (smp_rmb() there): tpacket_rcv() refills an RX frame, tpacket_snd()
	 * reads a TX frame, only after our reads or writes of it are done.
	 */
	atomic_store_release((_Atomic uint32_t *)(uintptr_t)&h->tp_status, status);
}

/* ------------------------------------------------------------------ link */

static bool
afp_link_query(struct afp_port *a)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, a->ifname, sizeof(ifr.ifr_name));
	/* SIOCGIFFLAGS reads the device under RCU: no RTNL, no sleep. */
	if (ioctl(a->fd, SIOCGIFFLAGS, &ifr) < 0) {
		/* Deleted or renamed: the socket is unbound from it for good. */
		if (errno == ENODEV || errno == ENXIO)
			a->gone = true;
		return false;
	}
	return (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
}

static bool
afp_link_refresh(struct afp_port *a, uint64_t now)
{
	bool up = a->gone ? false : afp_link_query(a);

	if (a->link && !up)
		a->base.st.link_downs++;
	a->link = up;
	a->link_ns = now;
	return up;
}

static inline bool
afp_link_check(struct afp_port *a)
{
	uint64_t now = clk_mono_fast_ns();

	if (SP_LIKELY(now - a->link_ns < AFP_LINK_REFRESH_NS))
		return a->link;
	return afp_link_refresh(a, now);
}

/* -------------------------------------------------------------------- TX */

/* Return: the next free TX frame, or NULL when the ring is full. */
static inline struct tpacket2_hdr *
afp_tx_slot(struct afp_port *a)
{
	struct tpacket2_hdr *h = afp_tx_frame(a, a->tx_head);

	/* With PACKET_LOSS the kernel returns bad frames as AVAILABLE too. */
	if (afp_status_load(h) != TP_STATUS_AVAILABLE)
		return NULL;
	return h;
}

static inline void
afp_tx_commit(struct afp_port *a, struct tpacket2_hdr *h, uint32_t len)
{
	h->tp_len = len;
	afp_status_store(h, TP_STATUS_SEND_REQUEST);
	a->tx_head = afp_next(a->tx_head, a->tx_frames);
	a->tx_unkicked = true;
}

static inline void
afp_tx_kick(struct afp_port *a)
{
	if (!a->tx_unkicked)
		return;
	a->tx_unkicked = false;
	/*
	 * One syscall per burst; MSG_DONTWAIT: do not wait for the frames to
	 * complete. Should it fail (ENOBUFS), the frames stay SEND_REQUEST and
	 * leave with the next kick.
	 */
	(void)sendto(a->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
}

static void
afp_send_arp(struct afp_port *a, uint16_t op, const uint8_t tha[6], uint32_t tpa)
{
	struct tpacket2_hdr *h = afp_tx_slot(a);
	uint32_t len;

	if (!h) {
		a->base.st.tx_dropped++;
		return;
	}
	len = dp__frame_arp((uint8_t *)h + AFP_TX_OFF, op, a->base.mac, a->base.local.ip, tha, tpa);
	afp_tx_commit(a, h, len);
	a->base.st.arp_tx++;
}

/* Return: true and @mac filled when the frame can go out now. */
static inline bool
afp_dst_mac(struct afp_port *a, uint32_t ip, uint8_t mac[6])
{
	static const uint8_t zero[6];

	if (a->noarp) {
		memset(mac, 0, 6);
		return true;
	}
	if (SP_LIKELY(dp__arp_lookup(&a->arp, ip, mac)))
		return true;
	if (dp__arp_should_ask(&a->arp, ip, clk_mono_ns()))
		afp_send_arp(a, DP_ARP_REQUEST, zero, ip);
	return false;
}

static unsigned
afp_tx_burst(struct dp_port *p, const struct dp_tx *tx, unsigned n)
{
	struct afp_port *a = afp_of(p);
	unsigned i;

	if (SP_UNLIKELY(!afp_link_check(a))) {
		p->st.tx_dropped += n;
		return 0;
	}
	for (i = 0; i < n; i++) {
		const struct dp_tx *t = &tx[i];
		uint32_t len = t->hdr_len + t->len;
		struct tpacket2_hdr *h;
		uint8_t mac[6];
		uint8_t *f;

		if (SP_UNLIKELY(len > p->max_dgram)) {
			p->st.tx_dropped++;
			continue;
		}
		if (SP_UNLIKELY(!afp_dst_mac(a, t->dst.ip, mac))) {
			p->st.tx_no_arp++;
			continue;
		}
		h = afp_tx_slot(a);
		if (SP_UNLIKELY(!h))
			break; /* ring full: this one and the rest are dropped */
		f = (uint8_t *)h + AFP_TX_OFF;
		if (t->hdr_len)
			memcpy(f + DP_UDP_HDRS, t->hdr, t->hdr_len);
		if (t->len) /* a header-only packet may carry data NULL */
			memcpy(f + DP_UDP_HDRS + t->hdr_len, t->data, t->len);
		/* Software UDP checksum: offload is not offered to packet sockets. */
		dp__frame_udp_hdrs(f, p->mac, mac, p->local.ip, t->dst.ip, p->local.port,
				   t->dst.port, len, a->ip_id++, true);
		afp_tx_commit(a, h, DP_UDP_HDRS + len);
		p->st.tx_pkts++;
		p->st.tx_bytes += len;
	}
	p->st.tx_dropped += n - i;
	afp_tx_kick(a);
	return i;
}

/* -------------------------------------------------------------------- RX */

static void
afp_arp_input(struct afp_port *a, const struct dp__frame *f)
{
	a->base.st.arp_rx++;
	if (a->noarp || f->arp_tpa != a->base.local.ip || f->arp_spa == 0)
		return;
	/* Whoever asks for us, or answers us, is about to talk to us. */
	dp__arp_learn(&a->arp, f->arp_spa, f->arp_sha);
	if (f->arp_op == DP_ARP_REQUEST && a->answer_arp)
		afp_send_arp(a, DP_ARP_REPLY, f->arp_sha, f->arp_spa);
}

/* Return: true when @h carries a datagram for us, now described by @rx. */
static inline bool
afp_rx_one(struct afp_port *a, const struct tpacket2_hdr *h, uint32_t status, struct dp_rx *rx)
{
	const uint8_t *frame = (const uint8_t *)h + h->tp_mac;
	struct dp__frame f;
	bool verify;
	int kind;

	if (SP_UNLIKELY(h->tp_snaplen < h->tp_len || h->tp_mac + h->tp_snaplen > a->frame_size))
		goto ignore; /* truncated: larger than our MTU */
	/* A tag the NIC stripped: the frame belongs to a VLAN device, not to us. */
	if (SP_UNLIKELY(status & TP_STATUS_VLAN_VALID))
		goto ignore;
	if (a->check_outgoing) {
		const struct sockaddr_ll *ll =
			(const void *)((const uint8_t *)h + TPACKET_ALIGN(sizeof(*h)));

		if (ll->sll_pkttype == PACKET_OUTGOING)
			goto ignore;
	}
	/*
	 * CSUMNOTREADY: a local sender's checksum offload left only the
	 * pseudo-header sum in the UDP header (a kernel socket across veth);
	 * CSUM_VALID: the driver checked it. Verify only what nobody did.
	 */
	verify = !(status & (TP_STATUS_CSUMNOTREADY | TP_STATUS_CSUM_VALID));
	kind = dp__frame_parse(frame, h->tp_snaplen, verify, &f);
	if (SP_LIKELY(kind == DP__FRAME_UDP)) {
		if (SP_UNLIKELY(f.dst_ip != a->base.local.ip || f.dst_port != a->base.local.port))
			goto ignore;
		if (!a->noarp)
			dp__arp_learn(&a->arp, f.src_ip, f.src_mac);
		rx->data = f.payload;
		rx->len = f.payload_len;
		rx->src.ip = f.src_ip;
		rx->src.port = f.src_port;
		a->base.st.rx_pkts++;
		a->base.st.rx_bytes += f.payload_len;
		return true;
	}
	if (kind == DP__FRAME_ARP) {
		afp_arp_input(a, &f);
		return false;
	}
ignore:
	a->base.st.rx_ignored++;
	return false;
}

static unsigned
afp_rx_burst(struct dp_port *p, struct dp_rx *rx, unsigned n)
{
	struct afp_port *a = afp_of(p);
	unsigned got = 0;

	if (SP_UNLIKELY(!afp_link_check(a)))
		return 0;
	while (got < n && a->rx_held < a->rx_frames) {
		struct tpacket2_hdr *h = afp_rx_frame(a, a->rx_head);
		uint32_t status = afp_status_load(h);

		if (!(status & TP_STATUS_USER))
			break;
		a->rx_head = afp_next(a->rx_head, a->rx_frames);
		a->rx_held++;
		if (afp_rx_one(a, h, status, &rx[got])) {
			got++;
		} else if (a->rx_held == 1) {
			/* Not handed out and the oldest held: give it back now. */
			afp_status_store(h, TP_STATUS_KERNEL);
			a->rx_done = a->rx_head;
			a->rx_held = 0;
		}
	}
	afp_tx_kick(a); /* ARP replies */
	return got;
}

static void
afp_rx_done(struct dp_port *p)
{
	struct afp_port *a = afp_of(p);

	/* In ring order: see DESIGN. */
	for (; a->rx_held; a->rx_held--) {
		afp_status_store(afp_rx_frame(a, a->rx_done), TP_STATUS_KERNEL);
		a->rx_done = afp_next(a->rx_done, a->rx_frames);
	}
}

static void
afp_wait(struct dp_port *p, unsigned timeout_us, int wake_fd)
{
	struct afp_port *a = afp_of(p);
	struct pollfd pfd[2] = {{.fd = a->fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
	struct timespec ts = {.tv_sec = timeout_us / 1000000,
			      .tv_nsec = (timeout_us % 1000000) * 1000};

	/*
	 * Link down: rx_burst() hands out nothing, so frames left in the ring
	 * must not wake us; just sleep the timeout rather than spin.
	 */
	if (!afp_link_check(a)) {
		(void)ppoll(&pfd[1], wake_fd >= 0 ? 1 : 0, &ts, NULL);
		return;
	}
	if (a->rx_held < a->rx_frames &&
	    (afp_status_load(afp_rx_frame(a, a->rx_head)) & TP_STATUS_USER))
		return;
	(void)ppoll(pfd, wake_fd >= 0 ? 2 : 1, &ts, NULL);
}

static bool
afp_link_up(struct dp_port *p)
{
	return afp_link_check(afp_of(p));
}

/*
 * Everything below is setup and teardown (Context: startup or shutdown, the
 * thread that opens or closes): it allocates, forks nft and may sleep.
 */

/* ----------------------------------------------------------- ICMP guard */

static const char *const afp_nft_paths[] = {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft",
					    "/bin/nft"};

/*
 * Runs `nft -f -` with @script on stdin, inside the namespace @netns_fd (or
 * the caller's), its stdout in @out when non-NULL.
 * Return: 0; -ENOENT no nft binary; -EIO nft failed; other negative errno.
 */
static int
afp_nft(int netns_fd, const char *script, char *out, size_t out_len)
{
	int op[2] = {-1, -1};
	size_t len = strlen(script);
	size_t used = 0;
	int st = 0;
	pid_t pid;
	int err = 0;
	int in;

	/*
	 * The script goes in a memfd, not a pipe: a child that dies before
	 * reading (no nft binary) cannot raise SIGPIPE in the broker.
	 */
	in = memfd_create("sp-nft", MFD_CLOEXEC);
	if (in < 0)
		return -errno;
	if (write(in, script, len) != (ssize_t)len || lseek(in, 0, SEEK_SET) != 0) {
		err = -EIO;
		goto err_close_in;
	}
	if (out && pipe2(op, O_CLOEXEC) < 0) {
		err = -errno;
		goto err_close_in;
	}
	/* Setup path only: fork + exec; the child calls async-signal-safe functions only. */
	pid = fork();
	if (pid < 0) {
		err = -errno;
		goto err_close_out;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		char *const argv[] = {"nft", "-f", "-", NULL};

		if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0)
			_exit(126);
		dup2(in, 0);
		dup2(op[1] >= 0 ? op[1] : null, 1);
		dup2(null, 2);
		for (size_t i = 0; i < ARRAY_SIZE(afp_nft_paths); i++)
			execv(afp_nft_paths[i], argv);
		_exit(127);
	}
	if (op[1] >= 0) {
		close(op[1]);
		op[1] = -1;
	}
	if (out) {
		char buf[512];
		ssize_t r;

		/* Read to EOF (keeping what fits) so nft never blocks on a full pipe. */
		while ((r = read(op[0], buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR)) {
			size_t k = r > 0 ? SP_MIN((size_t)r, out_len - 1 - used) : 0;

			memcpy(out + used, buf, k);
			used += k;
		}
		out[used] = '\0';
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			err = -errno;
			goto err_close_out;
		}
	}
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		err = WIFEXITED(st) && WEXITSTATUS(st) == 127 ? -ENOENT : -EIO;
err_close_out:
	if (op[0] >= 0)
		close(op[0]);
	if (op[1] >= 0)
		close(op[1]);
err_close_in:
	close(in);
	return err;
}

/* Deletes guard tables left by processes that no longer exist (killed, crashed). */
static void
afp_nft_reap(int netns_fd)
{
	char list[8192];
	char script[2048];
	size_t used = 0;
	const char *s;

	if (afp_nft(netns_fd, "list tables ip\n", list, sizeof(list)) < 0)
		return;
	script[0] = '\0';
	for (s = strstr(list, AFP_NFT_PREFIX); s; s = strstr(s + 1, AFP_NFT_PREFIX)) {
		int pid = 0;
		unsigned seq = 0;
		int k;

		if (sscanf(s, AFP_NFT_PREFIX "%d_%u", &pid, &seq) != 2 || pid <= 0)
			continue;
		if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		k = snprintf(script + used, sizeof(script) - used,
			     "delete table ip " AFP_NFT_PREFIX "%d_%u\n", pid, seq);
		if (k < 0 || (size_t)k >= sizeof(script) - used)
			break;
		used += (size_t)k;
		log_info("dp.afp", "removing stale icmp guard table " AFP_NFT_PREFIX "%d_%u", pid,
			 seq);
	}
	if (used)
		(void)afp_nft(netns_fd, script, NULL, 0);
}

static int
afp_guard_nft(struct afp_shared *sh, uint32_t ip, uint16_t lo, uint16_t hi)
{
	static atomic_uint seq;
	char script[1024];
	char ipbuf[INET_ADDRSTRLEN];
	struct in_addr in = {.s_addr = ip};
	int err;

	afp_nft_reap(sh->netns_fd);
	snprintf(sh->table, sizeof(sh->table), AFP_NFT_PREFIX "%d_%u", (int)getpid(),
		 atomic_add_relaxed(&seq, 1));
	inet_ntop(AF_INET, &in, ipbuf, sizeof(ipbuf));
	/*
	 * "add; delete; table {...}" is one transaction that also replaces a
	 * table of the same name (a reused pid). Priority -300 is raw: before
	 * conntrack, after the packet taps.
	 */
	snprintf(script, sizeof(script),
		 "add table ip %s\n"
		 "delete table ip %s\n"
		 "table ip %s {\n"
		 "\tchain pre {\n"
		 "\t\ttype filter hook prerouting priority -300; policy accept;\n"
		 "\t\tip daddr %s udp dport %u-%u counter drop\n"
		 "\t}\n"
		 "}\n",
		 sh->table, sh->table, sh->table, ipbuf, lo, hi);
	err = afp_nft(sh->netns_fd, script, NULL, 0);
	if (err) {
		/* In case nft did its work but we could not tell (SIGCHLD ignored). */
		snprintf(script, sizeof(script), "delete table ip %s\n", sh->table);
		(void)afp_nft(sh->netns_fd, script, NULL, 0);
		sh->table[0] = '\0';
	}
	return err;
}

static void
afp_guard_nft_remove(struct afp_shared *sh)
{
	char script[128];

	if (!sh->table[0])
		return;
	snprintf(script, sizeof(script), "delete table ip %s\n", sh->table);
	if (afp_nft(sh->netns_fd, script, NULL, 0) < 0)
		log_warn("dp.afp", "could not remove nft table %s", sh->table);
	sh->table[0] = '\0';
}

/* Return: 0 (also when the address is not local: the kernel then never answers). */
static int
afp_guard_sock(struct afp_port *a)
{
	struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
	struct sock_fprog prog = {.len = 1, .filter = &drop};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int err;

	a->guard_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->guard_fd < 0)
		return -errno;
	if (setsockopt(a->guard_fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0) {
		err = -errno;
		goto err_close;
	}
	sa.sin_addr.s_addr = a->base.local.ip;
	sa.sin_port = htons(a->base.local.port);
	if (bind(a->guard_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		if (err == -EADDRNOTAVAIL) {
			err = 0; /* not a local address: the kernel drops these silently */
		} else if (err == -EADDRINUSE) {
			log_warn("dp.afp", "udp port %u is bound by another socket too",
				 a->base.local.port);
			err = 0;
		} else {
			log_err("dp.afp", "icmp guard: bind udp port %u failed: %s",
				a->base.local.port, strerror(-err));
		}
		goto err_close;
	}
	return 0;

err_close:
	close(a->guard_fd);
	a->guard_fd = -1;
	return err;
}

/* ----------------------------------------------------------------- setup */

static void
afp_close(struct dp_port *p)
{
	struct afp_port *a = afp_of(p);
	struct afp_shared *sh = a->sh;

	if (a->ring)
		munmap(a->ring, a->ring_len);
	if (a->fd >= 0)
		close(a->fd);
	if (a->guard_fd >= 0)
		close(a->guard_fd);
	/* acq_rel: the last closer sees every other port's close done. */
	if (sh && atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1) {
		afp_guard_nft_remove(sh);
		if (sh->netns_fd >= 0)
			close(sh->netns_fd);
		free(sh);
	}
	free(a);
}

static const struct dp_port_ops afp_ops = {
	.name = "af_packet",
	.rx_burst = afp_rx_burst,
	.rx_done = afp_rx_done,
	.tx_burst = afp_tx_burst,
	.wait = afp_wait,
	.link_up = afp_link_up,
	.close = afp_close,
};

static int
afp_setopt(int fd, int opt, int val, const char *name)
{
	if (setsockopt(fd, SOL_PACKET, opt, &val, sizeof(val)) < 0) {
		int err = -errno;

		log_err("dp.afp", "setsockopt(%s) failed: %s", name, strerror(-err));
		return err;
	}
	return 0;
}

/*
 * The steering filter (see DESIGN), on whole Ethernet frames: IPv4/UDP to
 * @ip:@port and not a fragment, or ARP whose target address is @ip.
 */
static int
afp_attach_filter(int fd, uint32_t ip, uint16_t port)
{
	uint32_t hip = ntohl(ip);
	struct sock_filter code[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12), /* ethertype */
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 10),
		/* 2 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23), /* IPv4 protocol */
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 11),
		/* 4 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 30), /* IPv4 daddr */
		/* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, hip, 0, 9),
		/* 6 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20), /* MF + fragment offset */
		/* 7 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x3fff, 7, 0),
		/* 8 */ BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14), /* X = IHL * 4 */
		/* 9 */ BPF_STMT(BPF_LD | BPF_H | BPF_IND, 16),	 /* UDP dport: 14 + X + 2 */
		/* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, port, 0, 4),
		/* 11 */ BPF_STMT(BPF_RET | BPF_K, 0x40000),
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_ARP, 0, 2),
		/* 13 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 38), /* ARP target IPv4 */
		/* 14 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, hip, 1, 0),
		/* 15 */ BPF_STMT(BPF_RET | BPF_K, 0),
		/* 16 */ BPF_STMT(BPF_RET | BPF_K, 0x40000),
	};
	struct sock_fprog prog = {.len = ARRAY_SIZE(code), .filter = code};

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0) {
		int err = -errno;

		log_err("dp.afp", "attaching the steering filter failed: %s", strerror(-err));
		return err;
	}
	return 0;
}

static uint32_t
afp_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static int
afp_rings(struct afp_port *a, uint32_t mtu, unsigned want)
{
	long page = sysconf(_SC_PAGESIZE);
	struct tpacket_req req;
	uint32_t block;
	uint32_t fpb;
	uint32_t frames;
	int err;

	/* RX needs netoff + VLAN slack + mtu; TX needs AFP_TX_OFF + 14 + mtu (less). */
	a->frame_size = afp_pow2((uint32_t)AFP_RX_NETOFF + 4 + mtu);
	block = a->frame_size > (uint32_t)page ? a->frame_size : (uint32_t)page;
	fpb = block / a->frame_size;
	frames = want ? want : AFP_RING_FRAMES_DEF;
	if (frames > AFP_RING_FRAMES_MAX)
		frames = AFP_RING_FRAMES_MAX;
	frames = (frames + fpb - 1) / fpb * fpb;
	memset(&req, 0, sizeof(req));
	req.tp_block_size = block;
	req.tp_block_nr = frames / fpb;
	req.tp_frame_size = a->frame_size;
	req.tp_frame_nr = frames;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0 ||
	    setsockopt(a->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof(req)) < 0) {
		err = -errno;
		log_err("dp.afp", "packet ring of %u x %u bytes refused: %s", frames, a->frame_size,
			strerror(-err));
		return err;
	}
	a->rx_frames = frames;
	a->tx_frames = frames;
	a->ring_len = (size_t)2 * frames * a->frame_size;
	a->ring = mmap(NULL, a->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, a->fd,
		       0);
	if (a->ring == MAP_FAILED) {
		err = -errno;
		a->ring = NULL;
		log_err("dp.afp", "mmap of the packet rings (%zu bytes) failed: %s", a->ring_len,
			strerror(-err));
		return err;
	}
	a->tx_ring = a->ring + (size_t)frames * a->frame_size;
	return 0;
}

static int
afp_open_one(const struct dp_port_cfg *cfg, const struct afp_iface *ifc, unsigned i,
	     struct afp_shared *sh, struct dp_port **out)
{
	struct sockaddr_ll ll = {.sll_family = AF_PACKET};
	struct afp_port *a;
	int one = 1;
	int err;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;
	a->guard_fd = -1;
	a->base.ops = &afp_ops;
	a->base.local.ip = ifc->ip;
	a->base.local.port = (uint16_t)(cfg->base_port + i);
	memcpy(a->base.mac, ifc->mac, 6);
	a->base.max_dgram = ifc->mtu - DP_IP4_HLEN - DP_UDP_HLEN;
	a->base.index = i;
	a->ifindex = ifc->ifindex;
	memcpy(a->ifname, cfg->iface, strlen(cfg->iface)); /* < IFNAMSIZ: checked */
	a->noarp = ifc->flags & (IFF_LOOPBACK | IFF_NOARP);
	a->answer_arp = i == 0 && !a->noarp && !ifc->kernel_arp;

	/* Protocol 0: nothing is delivered before bind(), i.e. before the filter is on. */
	a->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		err = -errno;
		log_err("dp.afp", "AF_PACKET socket failed: %s", strerror(-err));
		goto err_close;
	}
	err = afp_setopt(a->fd, PACKET_VERSION, TPACKET_V2, "PACKET_VERSION");
	if (err)
		goto err_close;
	/* TX: drop a malformed frame instead of stopping the ring on it. */
	err = afp_setopt(a->fd, PACKET_LOSS, 1, "PACKET_LOSS");
	if (err)
		goto err_close;
	err = afp_setopt(a->fd, PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS");
	if (err)
		goto err_close;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0)
		a->check_outgoing = true; /* before Linux 4.20 */
	err = afp_attach_filter(a->fd, ifc->ip, a->base.local.port);
	if (err)
		goto err_close;
	err = afp_rings(a, ifc->mtu, cfg->ring_frames);
	if (err)
		goto err_close;
	ll.sll_protocol = htons(ETH_P_ALL);
	ll.sll_ifindex = ifc->ifindex;
	if (bind(a->fd, (struct sockaddr *)&ll, sizeof(ll)) < 0) {
		err = -errno;
		log_err("dp.afp", "bind to %s failed: %s", cfg->iface, strerror(-err));
		goto err_close;
	}

	a->link = (ifc->flags & IFF_UP) && (ifc->flags & IFF_RUNNING);
	a->link_ns = clk_mono_ns();
	a->sh = sh;
	atomic_fetch_add_explicit(&sh->refs, 1, memory_order_relaxed);
	*out = &a->base;
	return 0;

err_close:
	afp_close(&a->base);
	return err;
}

/* Return: the effective arp_ignore of @iface (max of "all" and the interface's). */
static int
afp_arp_ignore(const char *iface)
{
	const char *names[] = {"all", iface};
	int v = 0;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char path[96];
		FILE *f;
		int x = 0;

		snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/arp_ignore", names[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%d", &x) == 1 && x > v)
			v = x;
		fclose(f);
	}
	return v;
}

/*
 * Fills @ifc->ip (the interface's first IPv4 address when @want is 0) and
 * kernel_arp: the kernel answers ARP for the address when it is assigned to
 * this interface, or to another one while arp_ignore is 0.
 */
static int
afp_iface_addr(const char *iface, uint32_t want, struct afp_iface *ifc)
{
	struct ifaddrs *ifa;
	struct ifaddrs *it;
	bool here = false;
	bool local = false;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (it = ifa; it; it = it->ifa_next) {
		uint32_t a;

		if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET)
			continue;
		a = ((const struct sockaddr_in *)(const void *)it->ifa_addr)->sin_addr.s_addr;
		if (want == 0 && strcmp(it->ifa_name, iface) == 0) {
			want = a;
			here = true;
			break;
		}
		if (a == want) {
			local = true;
			here = here || strcmp(it->ifa_name, iface) == 0;
		}
	}
	freeifaddrs(ifa);
	if (want == 0) {
		log_err("dp.afp", "interface %s has no IPv4 address and none was configured",
			iface);
		return -EADDRNOTAVAIL;
	}
	ifc->ip = want;
	ifc->kernel_arp = here || (local && afp_arp_ignore(iface) == 0);
	return 0;
}

static int
afp_iface_info(const struct dp_port_cfg *cfg, struct afp_iface *ifc)
{
	struct ifreq ifr;
	int fd;
	int err;

	memset(ifc, 0, sizeof(*ifc));
	if (strlen(cfg->iface) >= IFNAMSIZ) {
		log_err("dp.afp", "interface name %s is too long", cfg->iface);
		return -ENODEV;
	}
	ifc->ifindex = (int)if_nametoindex(cfg->iface);
	if (ifc->ifindex == 0) {
		log_err("dp.afp", "interface %s not found (in this network namespace)", cfg->iface);
		return -ENODEV;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, cfg->iface, strlen(cfg->iface));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		goto err_ioctl;
	ifc->flags = (unsigned)(unsigned short)ifr.ifr_flags;
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		goto err_ioctl;
	ifc->mtu = (uint32_t)ifr.ifr_mtu;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		goto err_ioctl;
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER &&
	    ifr.ifr_hwaddr.sa_family != ARPHRD_LOOPBACK) {
		log_err("dp.afp", "interface %s is not Ethernet (type %u)", cfg->iface,
			ifr.ifr_hwaddr.sa_family);
		close(fd);
		return -ENOTSUP;
	}
	memcpy(ifc->mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);

	if (cfg->mtu && cfg->mtu < ifc->mtu)
		ifc->mtu = cfg->mtu;
	else if (cfg->mtu > ifc->mtu)
		log_warn("dp.afp", "mtu %u is above %s's %u; using %u", cfg->mtu, cfg->iface,
			 ifc->mtu, ifc->mtu);
	if (ifc->mtu > AFP_MTU_MAX)
		ifc->mtu = AFP_MTU_MAX;
	if (ifc->mtu < DP_DGRAM_MIN + DP_IP4_HLEN + DP_UDP_HLEN) {
		log_err("dp.afp", "mtu %u leaves %u bytes per datagram, need %u", ifc->mtu,
			ifc->mtu > 28 ? ifc->mtu - 28 : 0, DP_DGRAM_MIN);
		return -EINVAL;
	}
	return afp_iface_addr(cfg->iface, cfg->ip, ifc);

err_ioctl:
	err = -errno;
	log_err("dp.afp", "reading interface %s failed: %s", cfg->iface, strerror(-err));
	close(fd);
	return err;
}

static int
afp_guard(const struct dp_port_cfg *cfg, struct afp_shared *sh, struct dp_port **out)
{
	const char *force = getenv("SP_AFP_ICMP_GUARD"); /* "socket": tests of the fallback */
	int err = -ENOENT;

	if (!force || strcmp(force, "socket") != 0) {
		err = afp_guard_nft(sh, out[0]->local.ip, cfg->base_port,
				    (uint16_t)(cfg->base_port + cfg->n - 1));
		if (!err)
			return 0;
		log_info("dp.afp", "nft icmp guard unavailable (%s); binding udp sockets instead",
			 strerror(-err));
	}
	for (unsigned i = 0; i < cfg->n; i++) {
		err = afp_guard_sock(afp_of(out[i]));
		if (err)
			return err;
	}
	return 0;
}

/**
 * dp__afp_open() - open @cfg->n af_packet ports on @cfg->iface.
 * @cfg: base_port must be non-zero; ip 0 takes the interface's first IPv4
 *       address; mtu 0 takes the interface's (capped at 9000).
 * @out: receives n ports; port i listens on UDP base_port + i.
 *
 * Context: startup, any thread; allocates, may fork nft and sleep. The ports
 * belong to the calling thread's network namespace.
 * Return: 0; -EINVAL bad config; -EPERM no CAP_NET_RAW; -ENODEV no such
 * interface; -EADDRNOTAVAIL no IPv4 address; -ENOTSUP not Ethernet; other
 * negative errno from the system (each cause logged).
 */
int
dp__afp_open(const struct dp_port_cfg *cfg, struct dp_port **out)
{
	struct afp_shared *sh;
	struct afp_iface ifc;
	unsigned i;
	int err;
	int fd;

	if (cfg->base_port == 0) {
		log_err("dp.afp", "af_packet needs a fixed base port (dataplanePort), not 0");
		return -EINVAL;
	}
	if (!cfg->iface || !cfg->iface[0]) {
		log_err("dp.afp", "af_packet needs an interface name");
		return -EINVAL;
	}
	/* Privilege first, so the error names the cause rather than a symptom. */
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		if (err == -EPERM || err == -EACCES) {
			log_err("dp.afp", "af_packet needs CAP_NET_RAW (run as root)");
			return -EPERM;
		}
		log_err("dp.afp", "AF_PACKET socket failed: %s", strerror(-err));
		return err;
	}
	close(fd);
	err = afp_iface_info(cfg, &ifc);
	if (err)
		return err;

	sh = calloc(1, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	/* The namespace of this thread: close may run in another one. */
	sh->netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	for (i = 0; i < cfg->n; i++) {
		err = afp_open_one(cfg, &ifc, i, sh, &out[i]);
		if (err)
			goto err_close_ports;
	}
	if (cfg->icmp_guard) {
		err = afp_guard(cfg, sh, out);
		if (err) {
			log_err("dp.afp", "icmp guard failed: %s", strerror(-err));
			goto err_close_ports;
		}
	}
	return 0;

err_close_ports:
	if (i == 0) {
		if (sh->netns_fd >= 0)
			close(sh->netns_fd);
		free(sh);
	}
	dp_ports_close(out, i);
	return err;
}
