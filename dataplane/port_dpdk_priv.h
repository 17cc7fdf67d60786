/* SPDX-License-Identifier: Apache-2.0 */
/*
 * port_dpdk_priv.h - what port_dpdk.c (the DPDK backend: EAL, ports,
 * bursts, steering) and port_dpdk_memif.c (what memif in DPDK 22.11 needs:
 * the peer-death handshake, stops and re-arms on the EAL interrupt thread)
 * share: the device and port structs and the mirrors of DPDK's private
 * structs. Private to dataplane/, compiled with DPDK's flags only.
 */
#ifndef SP_DATAPLANE_PORT_DPDK_PRIV_H
#define SP_DATAPLANE_PORT_DPDK_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "port_priv.h"

#define DPDK_REARM_NS 250000000ull /* memif client reconnect attempts */

/* ------------------------------------------------------------------------ */
/* Mirrors of DPDK 22.11 private structures (checked at run time). */

/* lib/ethdev/ethdev_driver.h: struct rte_eth_dev */
struct mirror_eth_dev {
	eth_rx_burst_t rx_pkt_burst;
	eth_tx_burst_t tx_pkt_burst;
	void *tx_pkt_prepare;
	void *rx_queue_count;
	void *rx_descriptor_status;
	void *tx_descriptor_status;
	struct mirror_eth_dev_data *data;
	void *process_private;
	const void *dev_ops;
	struct rte_device *device;
	void *intr_handle;
	void *link_intr_cbs[2];
	void *post_rx_burst_cbs[RTE_MAX_QUEUES_PER_PORT];
	void *pre_tx_burst_cbs[RTE_MAX_QUEUES_PER_PORT];
	int state;
	void *security_ctx;
} __rte_cache_aligned;

/* lib/ethdev/ethdev_driver.h: the head of struct rte_eth_dev_data */
struct mirror_eth_dev_data {
	char name[RTE_ETH_NAME_MAX_LEN];
	void **rx_queues;
	void **tx_queues;
	uint16_t nb_rx_queues;
	uint16_t nb_tx_queues;
	struct rte_eth_dev_sriov sriov;
	void *dev_private;
	struct rte_eth_link dev_link;
};

/* drivers/net/memif/rte_eth_memif.h: the head of struct pmd_internals */
struct mirror_memif_pmd {
	uint32_t id;
	int role; /* 0 server, 1 client */
	uint32_t flags;
	char *socket_filename;
	char secret[24];
	void *cc;
	rte_spinlock_t cc_lock;
	char remote_name[RTE_DEV_NAME_MAX_LEN];
	char remote_if_name[RTE_DEV_NAME_MAX_LEN];
	struct {
		uint8_t log2_ring_size;
		uint8_t num_c2s_rings;
		uint8_t num_s2c_rings;
		uint16_t pkt_buffer_size;
	} cfg, run;
};

#define MEMIF_ROLE_SERVER 0
#define MEMIF_ROLE_CLIENT 1

/* ------------------------------------------------------------------------ */

struct dpdk_port;

/*
 * The device and what its ports share. Ownership: written at open and close
 * (control thread, no port running); read by the port owners. The TX locks
 * and, on memif, the PMD's cc_lock are the only shared mutable state.
 */
struct dpdk_dev {
	/* immutable after open */
	uint16_t port_id;
	struct rte_device *device;
	unsigned n;   /* ports */
	unsigned nq;  /* RX/TX queue pairs configured */
	unsigned gen; /* open generation: unique pool/ring names */
	uint32_t ip;
	uint16_t base_port;
	uint8_t mac[6];
	bool hw_steer;			    /* rte_flow rules installed */
	bool tx_ip_csum;		    /* RTE_ETH_TX_OFFLOAD_IPV4_CKSUM enabled */
	bool tx_udp_csum;		    /* RTE_ETH_TX_OFFLOAD_UDP_CKSUM enabled */
	bool rx_csum;			    /* RX checksum flags are meaningful */
	bool memif;			    /* net_memif */
	bool memif_client;		    /* role=client: re-arm on link loss */
	atomic_bool rearm_busy;		    /* a re-arm is queued on the EAL thread */
	atomic_bool stopped;		    /* memif_stop_cb() ran */
	rte_spinlock_t *cc_lock;	    /* memif handshake, NULL when off */
	struct mirror_memif_pmd *memif_pmd; /* set with cc_lock */
	struct rte_flow *flows[DP_PORTS_MAX];
	struct dpdk_port *ports[DP_PORTS_MAX];
	struct rte_ring *rings[DP_PORTS_MAX];
	/* shared: TX queue locks, used when a queue serves more than one port */
	rte_spinlock_t txq_lock[DP_PORTS_MAX];
	unsigned txq_users[DP_PORTS_MAX];
	unsigned open_ports; /* control thread only */
};

/* Ownership: one owner thread; st read relaxed by others. */
struct dpdk_port {
	struct dp_port base;
	/* immutable after open */
	struct dpdk_dev *dev;
	struct rte_mempool *pool;
	struct rte_ring *ring; /* my hand-over ring (single consumer: me) */
	int rxq;	       /* -1: no hardware queue */
	uint16_t txq;
	bool txq_shared;
	uint64_t link_period; /* TSC cycles between link checks */
	/* owner only */
	bool link;
	uint64_t next_link_tsc;
	uint64_t next_rearm_ns;
	uint64_t rearm_stuck_ns; /* link down with a control channel since */
	uint16_t ip_id;
	unsigned nheld;
	struct rte_mbuf *held[DP_BURST_MAX];
	struct dp__arp_cache arp;
};

/* ------------------------------------------------------------------------ */
/* The memif handshake around every burst (port_dpdk_memif.c, DESIGN). */

static inline bool
dev_enter_try(struct dpdk_dev *d)
{
	/* acquire: pairs with the interrupt thread's unlock in memif_disconnect() */
	return d->cc_lock == NULL || rte_spinlock_trylock(d->cc_lock);
}

static inline void
dev_enter(struct dpdk_dev *d)
{
	if (d->cc_lock)
		rte_spinlock_lock(d->cc_lock);
}

static inline void
dev_exit(struct dpdk_dev *d)
{
	/* release: pairs with the lock in memif_disconnect() that precedes its munmap */
	if (d->cc_lock)
		rte_spinlock_unlock(d->cc_lock);
}

/*
 * memif connects as many rings per direction as the client has queues, and
 * a server queue beyond them has no ring of its own: its ring offset is 0,
 * so polling it would read ring 0 behind queue 0's back. Return: the number
 * of RX (@rx) or TX queues that have a ring now. Context: under cc_lock.
 */
static inline unsigned
memif_rings(const struct dpdk_dev *d, bool rx)
{
	const struct mirror_memif_pmd *m = d->memif_pmd;
	bool c2s;

	if (m == NULL)
		return d->nq;
	/* Server: RX is client-to-server. Client: TX is. */
	c2s = (m->role == MEMIF_ROLE_SERVER) == rx;
	return c2s ? m->run.num_c2s_rings : m->run.num_s2c_rings;
}

/* What a memif device's devargs say (id, role, socket), for the checks. */
struct memif_args {
	uint32_t id;
	int role;
	char socket[108];
};

/*
 * Parses @info's devargs into *@ma, sets d->memif_client, and finds memif's
 * cc_lock for the handshake after the port started (d->memif_pmd set with
 * it). Context: open, control thread. Return: the lock, or NULL (with a
 * warning) when any check fails or SPROCKET_DPDK_MEMIF_GUARD=0.
 */
rte_spinlock_t *dp__memif_find_cc_lock(struct dpdk_dev *d, const struct rte_eth_dev_info *info,
				       struct memif_args *ma);

/*
 * Stops a memif device on the interrupt thread and waits for it, after any
 * re-arm still queued there. Context: the control thread, at close; sleeps.
 */
void dp__memif_stop(struct dpdk_dev *d);

/*
 * memif client: reconnect a lost link (stop + start, on the interrupt
 * thread). Context: port 0's owner, from wait(); may sleep.
 */
void dp__memif_rearm(struct dpdk_port *p);

#endif /* SP_DATAPLANE_PORT_DPDK_PRIV_H */
