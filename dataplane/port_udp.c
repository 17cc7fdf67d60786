// SPDX-License-Identifier: Apache-2.0
/*
 * port_udp.c - the kernel UDP backend: one non-blocking socket per port,
 * recvmmsg/sendmmsg bursts.
 *
 * The unprivileged default and the baseline the bypass backends are measured
 * against. Each burst is one syscall per direction (about 1.1 us each on the
 * project's VMs, docs/benchmarks.md), which is why
 * the poll loop batches. RX buffers are allocated once at open: DP_BURST_MAX
 * buffers of max_dgram bytes per port; rx_burst() hands out views into them
 * and rx_done() is free.
 *
 * Datagram size: the interface's MTU minus IPv4 and UDP headers, 1472 by
 * default, or 65507 on loopback (whose MTU is 64 KiB): the transport sizes
 * packets to this so the kernel never fragments them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "port_priv.h"

#define UDP_SOCKBUF (8u << 20)
#define UDP_MAX_DGRAM 65507u

struct udp_port {
	struct dp_port base;
	int fd;
	uint8_t *bufs; /* DP_BURST_MAX * max_dgram */
	struct mmsghdr rx_msg[DP_BURST_MAX];
	struct iovec rx_iov[DP_BURST_MAX];
	struct sockaddr_in rx_from[DP_BURST_MAX];
};

static unsigned
udp_rx_burst(struct dp_port *p, struct dp_rx *rx, unsigned n)
{
	struct udp_port *u = (struct udp_port *)p;
	int got;

	if (n > DP_BURST_MAX)
		n = DP_BURST_MAX;
	for (unsigned i = 0; i < n; i++) {
		u->rx_msg[i].msg_hdr.msg_namelen = sizeof(u->rx_from[i]);
		u->rx_msg[i].msg_hdr.msg_flags = 0;
	}
	got = recvmmsg(u->fd, u->rx_msg, n, MSG_DONTWAIT, NULL);
	if (got <= 0)
		return 0;
	for (int i = 0; i < got; i++) {
		rx[i].data = u->rx_iov[i].iov_base;
		rx[i].len = u->rx_msg[i].msg_len;
		rx[i].src.ip = u->rx_from[i].sin_addr.s_addr;
		rx[i].src.port = ntohs(u->rx_from[i].sin_port);
		if (u->rx_msg[i].msg_hdr.msg_flags & MSG_TRUNC)
			rx[i].len = 0; /* larger than max_dgram: the transport drops it as short */
		p->st.rx_bytes += u->rx_msg[i].msg_len;
	}
	p->st.rx_pkts += (uint64_t)got;
	return (unsigned)got;
}

static void
udp_rx_done(struct dp_port *p)
{
	(void)p;
}

static unsigned
udp_tx_burst(struct dp_port *p, const struct dp_tx *tx, unsigned n)
{
	struct udp_port *u = (struct udp_port *)p;
	struct mmsghdr msg[DP_BURST_MAX];
	struct iovec iov[DP_BURST_MAX][2];
	struct sockaddr_in to[DP_BURST_MAX];
	unsigned sent = 0;

	while (sent < n) {
		unsigned k = SP_MIN(n - sent, (unsigned)DP_BURST_MAX);
		unsigned m = 0;
		int rc;

		for (unsigned i = 0; i < k; i++) {
			const struct dp_tx *t = &tx[sent + i];
			int nio = 0;

			if (t->hdr_len + t->len > p->max_dgram) {
				p->st.tx_dropped++;
				continue;
			}
			if (t->hdr_len) {
				iov[m][nio].iov_base = (void *)t->hdr;
				iov[m][nio++].iov_len = t->hdr_len;
			}
			iov[m][nio].iov_base = (void *)t->data;
			iov[m][nio++].iov_len = t->len;
			memset(&to[m], 0, sizeof(to[m]));
			to[m].sin_family = AF_INET;
			to[m].sin_addr.s_addr = t->dst.ip;
			to[m].sin_port = htons(t->dst.port);
			memset(&msg[m], 0, sizeof(msg[m]));
			msg[m].msg_hdr.msg_name = &to[m];
			msg[m].msg_hdr.msg_namelen = sizeof(to[m]);
			msg[m].msg_hdr.msg_iov = iov[m];
			msg[m].msg_hdr.msg_iovlen = (size_t)nio;
			p->st.tx_bytes += t->hdr_len + t->len;
			m++;
		}
		for (unsigned off = 0; off < m;) {
			rc = sendmmsg(u->fd, msg + off, m - off, MSG_DONTWAIT);
			if (rc <= 0) {
				/*
				 * The kernel refused msg[off] (socket buffer
				 * full, an ICMP error queued by an earlier
				 * send): drop it, as a NIC would, so one bad
				 * destination cannot stall the burst.
				 */
				p->st.tx_dropped++;
				off++;
				continue;
			}
			p->st.tx_pkts += (uint64_t)rc;
			off += (unsigned)rc;
		}
		sent += k;
	}
	return n;
}

static void
udp_wait(struct dp_port *p, unsigned timeout_us, int wake_fd)
{
	struct udp_port *u = (struct udp_port *)p;
	struct pollfd pfd[2] = {{.fd = u->fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
	struct timespec ts = {.tv_sec = timeout_us / 1000000,
			      .tv_nsec = (timeout_us % 1000000) * 1000};

	(void)ppoll(pfd, wake_fd >= 0 ? 2 : 1, &ts, NULL);
}

static bool
udp_link_up(struct dp_port *p)
{
	(void)p;
	return true;
}

static void
udp_close(struct dp_port *p)
{
	struct udp_port *u = (struct udp_port *)p;

	close(u->fd);
	free(u->bufs);
	free(u);
}

static const struct dp_port_ops udp_ops = {
	.name = "udp",
	.rx_burst = udp_rx_burst,
	.rx_done = udp_rx_done,
	.tx_burst = udp_tx_burst,
	.wait = udp_wait,
	.link_up = udp_link_up,
	.close = udp_close,
};

static int
udp_open_one(const struct dp_port_cfg *cfg, unsigned i, struct dp_port **out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct udp_port *u;
	int sz = (int)UDP_SOCKBUF;
	uint32_t max;
	int err;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0) {
		err = -errno;
		goto err_free;
	}
	/* FORCE needs CAP_NET_ADMIN; fall back to what rmem_max allows. */
	if (setsockopt(u->fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(u->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	sa.sin_addr.s_addr = cfg->ip;
	sa.sin_port = htons(cfg->base_port ? (uint16_t)(cfg->base_port + i) : 0);
	if (bind(u->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		log_err("dp.udp", "bind %s:%u failed: %s", inet_ntoa(sa.sin_addr),
			ntohs(sa.sin_port), strerror(-err));
		goto err_close;
	}
	if (getsockname(u->fd, (struct sockaddr *)&sa, &sl) < 0) {
		err = -errno;
		goto err_close;
	}
	if (cfg->mtu)
		max = cfg->mtu > 28 ? cfg->mtu - 28 : 0;
	else if ((ntohl(cfg->ip) >> 24) == 127)
		max = UDP_MAX_DGRAM;
	else
		max = 1500 - 28;
	if (max > UDP_MAX_DGRAM)
		max = UDP_MAX_DGRAM;
	if (max < DP_DGRAM_MIN) {
		log_err("dp.udp", "mtu %u leaves %u bytes per datagram, need %u", cfg->mtu, max,
			DP_DGRAM_MIN);
		err = -EINVAL;
		goto err_close;
	}
	u->bufs = malloc((size_t)DP_BURST_MAX * max);
	if (!u->bufs) {
		err = -ENOMEM;
		goto err_close;
	}
	for (unsigned k = 0; k < DP_BURST_MAX; k++) {
		u->rx_iov[k].iov_base = u->bufs + (size_t)k * max;
		u->rx_iov[k].iov_len = max;
		u->rx_msg[k].msg_hdr.msg_iov = &u->rx_iov[k];
		u->rx_msg[k].msg_hdr.msg_iovlen = 1;
		u->rx_msg[k].msg_hdr.msg_name = &u->rx_from[k];
	}
	u->base.ops = &udp_ops;
	u->base.local.ip = sa.sin_addr.s_addr;
	u->base.local.port = ntohs(sa.sin_port);
	u->base.max_dgram = max;
	u->base.index = i;
	*out = &u->base;
	return 0;

err_close:
	close(u->fd);
err_free:
	free(u);
	return err;
}

int
dp__udp_open(const struct dp_port_cfg *cfg, struct dp_port **out)
{
	for (unsigned i = 0; i < cfg->n; i++) {
		int err = udp_open_one(cfg, i, &out[i]);

		if (err) {
			dp_ports_close(out, i);
			return err;
		}
	}
	return 0;
}
