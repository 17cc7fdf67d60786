// SPDX-License-Identifier: Apache-2.0
/*
 * bk_keys.c - every key sprocket-broker reads (command line or properties
 * file): RocketMQ's names and defaults where RocketMQ has the key, ours
 * otherwise; RocketMQ's keys that mean nothing here are accepted with a
 * notice (CFG_IGNORED). docs/broker.md lists them; --help prints them.
 */
#include "ctl/bk_ctl.h"

static const char *const flush_choices[] = {"ASYNC_FLUSH", "SYNC_FLUSH", NULL};
static const char *const role_choices[] = {"ASYNC_MASTER", "SYNC_MASTER", "SLAVE", NULL};
static const char *const backend_choices[] = {"udp", "af_packet", "dpdk", NULL};
static const char *const warm_choices[] = {"auto", "true", "false", NULL};
static const char *const tls_choices[] = {"disabled", "permissive", "enforcing", NULL};
static const char *const level_choices[] = {"err", "warn", "info", "debug", NULL};

const struct cfg_key bk_keys[] = {
	{"brokerClusterName", CFG_STRING, "DefaultCluster", 1, 127, NULL, "cluster name"},
	{"brokerName", CFG_STRING, "broker-a", 1, 127, NULL, "broker name"},
	{"brokerId", CFG_INT, "0", 0, 0, NULL, "0 = the group's master, > 0 a slave"},
	{"namesrvAddr", CFG_STRING, "127.0.0.1:9876", 0, 1024, NULL,
	 "NameServers, host:port separated by ';' (empty: do not register)"},
	{"brokerIP1", CFG_STRING, "127.0.0.1", 7, 15, NULL,
	 "IPv4 address advertised for the remoting port"},
	{"listenPort", CFG_INT, "10911", 0, 65535, NULL,
	 "remoting TCP port for RocketMQ clients, advertised as brokerIP1:port (0: any free port)"},
	{"httpPort", CFG_INT, "-1", -1, 65535, NULL,
	 "HTTP port of /metrics (Prometheus) and /health (0: off; -1: listenPort - 2831, so 8080 "
	 "for 10911)"},
	{"httpBindAddress", CFG_STRING, "127.0.0.1", 7, 15, NULL,
	 "IPv4 address the HTTP endpoints listen on (this host only by default; 0.0.0.0: every "
	 "address)"},
	{"httpMetricsToken", CFG_STRING, NULL, 0, 256, NULL,
	 "set: /metrics and /health need \"Authorization: Bearer TOKEN\" (Prometheus' "
	 "authorization setting); never shown",
	 true},
	{"remotingMaxConnections", CFG_INT, "65536", 1, 1 << 20, NULL,
	 "remoting connections open at once (more are refused); lowered at start to what the "
	 "descriptor limit leaves after fdReserve"},
	{"fdReserve", CFG_INT, "256", 16, 1 << 20, NULL,
	 "file descriptors kept from remoting connections for the store's files and the "
	 "broker's own sockets (the soft limit is raised to the hard one at start)"},
	{"remotingMaxConnectionsPerAddr", CFG_INT, "4096", 0, 1 << 20, NULL,
	 "remoting connections open at once from one source address (0: no cap of its own)"},
	{"remotingMaxInflightPerConnection", CFG_INT, "1024", 1, 4032, NULL,
	 "remoting requests of one connection at the cores at once, long polls included (more "
	 "are answered SYSTEM_BUSY)"},
	{"remotingMaxInflightPerAddr", CFG_INT, "1024", 0, 1 << 20, NULL,
	 "remoting requests from one source address at the cores at once, over all its "
	 "connections (0: no cap of its own)"},
	{"remotingLongPollsPerCore", CFG_INT, "2048", 1, 4032, NULL,
	 "long-polling remoting PULLs parked at one core at once: the rest of the core's 4032 "
	 "requests in flight stay for SENDs and everything else"},
	{"remotingLongPollsMax", CFG_INT, "262144", 1, 1 << 24, NULL,
	 "long-polling remoting PULLs the remoting thread holds for their queues once the cores' "
	 "park tables are full (about 1 KB each; more are answered SYSTEM_BUSY)"},
	{"remotingLongPollsPerAddr", CFG_INT, "131072", 1, 1 << 24, NULL,
	 "... of them for one client address (a consumer of a 100,000-queue topic keeps one per "
	 "queue)"},
	{"remotingMaxFrameSize", CFG_INT, "16777216", 65536, 1 << 30, NULL,
	 "largest remoting frame (RocketMQ's frameMaxLength); a bigger one closes the connection"},
	{"remotingMaxFrameMemory", CFG_INT, "268435456", 1 << 20, 1ll << 40, NULL,
	 "memory all remoting connections may hold in frames not yet whole (bytes); a "
	 "connection whose frame would take more is closed"},
	{"clientChannelExpiredMillis", CFG_INT, "120000", 1000, 3600000, NULL,
	 "a remoting consumer without a heartbeat this long leaves its group"},
	{"storePathRootDir", CFG_STRING, "./store", 1, 1024, NULL, "store root directory"},
	{"storePathCommitLog", CFG_STRING, NULL, 0, 1024, NULL,
	 "CommitLog directory (one subdirectory per shard; empty: <storePathRootDir>/commitlog)"},
	{"storePathConsumeQueue", CFG_STRING, NULL, 0, 1024, NULL,
	 "ConsumeQueue directory (empty: <storePathRootDir>/consumequeue)"},
	{"storePathIndex", CFG_STRING, NULL, 0, 1024, NULL,
	 "IndexFile directory (one subdirectory per shard; empty: <storePathRootDir>/index)"},
	{"storeCheckpoint", CFG_STRING, NULL, 0, 1024, NULL,
	 "checkpoint file (empty: <storePathRootDir>/checkpoint)"},
	{"abortFile", CFG_STRING, NULL, 0, 1024, NULL,
	 "abort file, present while running (empty: <storePathRootDir>/abort)"},
	{"storeBufferDir", CFG_STRING, "/dev/shm", 0, 900, NULL,
	 "CommitLog write-behind buffers as files in a new <dir>/sprocket-XXXXXX each run "
	 "(tmpfs: a crash of the broker process loses no ASYNC_FLUSH append); empty: anonymous "
	 "memory, a crash loses up to 1 ms of appends"},
	{"storeBufferWindow", CFG_INT, "67108864", 1048576, 1LL << 40, NULL,
	 "bytes of CommitLog write-behind buffer mapped and pre-faulted ahead of each shard's "
	 "appends (at least two chunks of up to 16 MiB; a shard's buffer memory is this plus what "
	 "one flushIntervalCommitLog appends, whatever mapedFileSizeCommitLog is)"},
	{"flushDiskType", CFG_ENUM, "ASYNC_FLUSH", 0, 0, flush_choices,
	 "SEND_OK after the page cache (ASYNC) or after fdatasync (SYNC)"},
	{"warmMapedFileEnable", CFG_ENUM, "auto", 0, 0, warm_choices,
	 "zero-fill and sync each new CommitLog segment ahead of its appends (auto: true, but "
	 "false on a SLAVE with ASYNC_FLUSH, which then writes each byte to disk once, not twice)"},
	{"messageDelayLevel", CFG_STRING,
	 "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", 0, 1024, NULL,
	 "delay of each level (DELAY=1 is the first), a number and s, m, h or d each; empty: "
	 "delayed messages are refused"},
	{"flushDelayOffsetInterval", CFG_INT, "10000", 100, 3600000, NULL,
	 "ms between saves of delayOffset.json and timercheck (delay levels' and timers' "
	 "progress)"},
	{"timerWheelEnable", CFG_BOOL, "true", 0, 0, NULL,
	 "take messages with a delivery time (TIMER_DELIVER_MS, __STARTDELIVERTIME, "
	 "TIMER_DELAY_SEC, TIMER_DELAY_MS); false: refuse them"},
	{"timerMaxDelaySec", CFG_INT, "3456000", 1, 315360000, NULL,
	 "furthest delivery time taken, in seconds from now (40 days)"},
	{"rejectTransactionMessage", CFG_BOOL, "false", 0, 0, NULL,
	 "refuse transactional halves (NO_PERMISSION, as RocketMQ)"},
	{"transactionTimeOut", CFG_INT, "6000", 1, 86400000, NULL,
	 "ms after which an unresolved half is checked back with its producer group"},
	{"transactionCheckMax", CFG_INT, "15", 1, 127, NULL,
	 "check-backs of a half before it is discarded (logged)"},
	{"transactionCheckInterval", CFG_INT, "60000", 100, 86400000, NULL,
	 "ms between two check-back passes over the unresolved halves"},
	{"timerRollWindowSec", CFG_INT, "0", 0, 315360000, NULL,
	 "a timer further away than this is written to the log again after this long, until "
	 "due, so retention never takes it (0: half of fileReservedTime, at most 2 days)"},
	{"brokerRole", CFG_ENUM, "ASYNC_MASTER", 0, 0, role_choices,
	 "ASYNC_MASTER (SEND_OK without waiting for a slave), SYNC_MASTER (SEND_OK once a slave "
	 "holds it), SLAVE (follows brokerName's master, read-only)"},
	{"haMasterAddress", CFG_STRING, NULL, 0, 64, NULL,
	 "SLAVE: the master's dataplane endpoint ip:port (empty: learnt from the NameServer)"},
	{"haTailRecoverTimeout", CFG_INT, "10000", 0, 3600000, NULL,
	 "SYNC_MASTER with static roles: at start, ms to take back from its slave what the slave "
	 "holds past this master's log (an acknowledged tail it lost) before taking writes "
	 "(0: never ask)"},
	{"haMaxGapNotInSync", CFG_INT, "268435456", 1, 1LL << 40, NULL,
	 "SYNC_MASTER: a slave further behind than this many bytes is not in sync "
	 "(SLAVE_NOT_AVAILABLE)"},
	{"controllerAddr", CFG_STRING, NULL, 0, 1000, NULL,
	 "automatic failover (docs/failover.md): the etcd cluster's client endpoints, "
	 "host:port;host:port...; brokerId then names this member of the group (1 and up) and "
	 "brokerRole the kind of master it is when elected (SLAVE: never elected). Empty: "
	 "static roles"},
	{"controllerLeaseSeconds", CFG_INT, "3", 1, 60, NULL,
	 "failover: the master's lease in etcd; a dead master is replaced this long after its "
	 "last renewal, and a master that cannot renew stops taking writes before that"},
	{"controllerKeyPrefix", CFG_STRING, "/sprocket", 1, 100, NULL,
	 "failover: where in etcd the groups' records live (<prefix>/<cluster>/<brokerName>/)"},
	{"brokerPermission", CFG_INT, "6", 0, 7, NULL, "2 write, 4 read (6 both)"},
	{"statsSampleMillis", CFG_INT, "60000", 1000, 3600000, NULL,
	 "how often per-topic and per-group counts are sampled: one \"minute\" of statsAll's "
	 "figures (VIEW_BROKER_STATS_DATA) and consumeTps; shorter only for tests"},
	{"adminAllowedAddrs", CFG_STRING, "127.0.0.1", 0, 0, NULL,
	 "who may send admin requests on listenPort (topics, groups, config, stats, resets): "
	 "IPv4 addresses and ADDR/BITS networks, comma-separated, * for anyone; a slave's sync "
	 "(GET_ALL_*) is always allowed"},
	{"aclEnable", CFG_BOOL, "false", 0, 0, NULL,
	 "check every request on listenPort and every dataplane session against aclFile's "
	 "accounts (RocketMQ's plain ACL; docs/security.md)"},
	{"aclFile", CFG_STRING, NULL, 0, 1024, NULL,
	 "plain_acl.yml (RocketMQ's format), required with aclEnable; must not be readable by "
	 "others; reloaded within 2 s of a change"},
	{"accessKey", CFG_STRING, NULL, 0, 256, NULL,
	 "the account this broker signs its requests to NameServers and (a slave) to its master "
	 "with"},
	{"secretKey", CFG_STRING, NULL, 0, 256, NULL, "accessKey's secret (never shown)", true},
	{"tlsServerMode", CFG_ENUM, "disabled", 0, 0, tls_choices,
	 "TLS on listenPort: disabled, permissive (TLS and plain TCP, told apart by the first "
	 "byte) or enforcing (TLS only); RocketMQ's tls.server.mode"},
	{"tlsEnable", CFG_BOOL, "false", 0, 0, NULL,
	 "true: tlsServerMode=enforcing unless tlsServerMode is set"},
	{"tlsServerCertPath", CFG_STRING, NULL, 0, 1024, NULL,
	 "the server certificate chain (PEM)"},
	{"tlsServerKeyPath", CFG_STRING, NULL, 0, 1024, NULL, "its private key (PEM)"},
	{"tlsServerKeyPassword", CFG_STRING, NULL, 0, 1024, NULL,
	 "the private key's password, if it has one (never shown)", true},
	{"tlsServerAuthClient", CFG_BOOL, "false", 0, 0, NULL,
	 "TLS clients must present a certificate signed by tlsServerTrustCertPath"},
	{"tlsServerTrustCertPath", CFG_STRING, NULL, 0, 1024, NULL,
	 "CA certificates (PEM) that sign the clients' certificates"},
	{"autoCreateTopicEnable", CFG_BOOL, "true", 0, 0, NULL,
	 "create a topic on its first SEND (defaultTopicQueueNums queues)"},
	{"defaultTopicQueueNums", CFG_INT, "4", 1, 1024, NULL, "queues of an auto-created topic"},
	{"maxMessageSize", CFG_INT, "4194304", 1, 16777216, NULL, "largest message body (bytes)"},
	{"maxReconsumeTimes", CFG_INT, "16", 1, 1000, NULL,
	 "SEND_BACK: deliveries before a message goes to %DLQ%<group>"},
	{"mapedFileSizeCommitLog", CFG_INT, "1073741824", 1048576, 1LL << 40, NULL,
	 "CommitLog segment size"},
	{"mapedFileSizeConsumeQueue", CFG_INT, "6000000", 20000, 1LL << 32, NULL,
	 "ConsumeQueue file size (a multiple of 20)"},
	{"flushIntervalCommitLog", CFG_INT, "500", 1, 60000, NULL, "ASYNC_FLUSH interval (ms)"},
	{"syncFlushTimeout", CFG_INT, "5000", 1, 600000, NULL,
	 "SYNC_FLUSH: answer FLUSH_DISK_TIMEOUT after this long (ms)"},
	{"fileReservedTime", CFG_INT, "72", 1, 100000, NULL, "hours a sealed segment is kept"},
	{"deleteWhen", CFG_STRING, "04", 1, 64, NULL, "hour of day for age-based deletion"},
	{"diskMaxUsedSpaceRatio", CFG_INT, "75", 10, 95, NULL,
	 "while the disk is fuller than this (percent), expired segments are deleted at any hour"},
	{"diskSpaceCleanForciblyRatio", CFG_INT, "85", 10, 99, NULL,
	 "above this (percent) the oldest segment is deleted expired or not, unless a consumer "
	 "group has not read it (then writes are refused; deleteUnconsumedWhenDiskFull)"},
	{"diskSpaceWarningLevelRatio", CFG_INT, "90", 10, 99, NULL,
	 "above this (percent) writes are refused (SERVICE_NOT_AVAILABLE) until space is freed"},
	{"cleanFileForciblyEnable", CFG_BOOL, "true", 0, 0, NULL,
	 "delete unexpired segments above diskSpaceCleanForciblyRatio"},
	{"deleteUnconsumedWhenDiskFull", CFG_BOOL, "false", 0, 0, NULL,
	 "true: a forced deletion takes messages consumer groups have not read (logged and "
	 "counted); false: writes are refused instead"},
	{"flushConsumerOffsetInterval", CFG_INT, "5000", 100, 600000, NULL,
	 "how often consumerOffset.json is written (ms)"},
	{"registerNameServerPeriod", CFG_INT, "30000", 100, 600000, NULL,
	 "re-register with every NameServer this often (ms)"},
	{"forceRegister", CFG_BOOL, "false", 0, 0, NULL,
	 "every registerNameServerPeriod send every topic (RocketMQ's default, true); false: "
	 "only when the topics changed, else QUERY_DATA_VERSION, which keeps the broker alive "
	 "there"},
	{"dataplaneBackend", CFG_ENUM, "udp", 0, 0, backend_choices, "packet I/O backend"},
	{"dataplaneCores", CFG_INT, "2", 1, BK_CORES_MAX, NULL, "dataplane cores (store shards)"},
	{"dataplanePort", CFG_INT, "20911", 1, 65535, NULL,
	 "UDP port of core 0; core c listens on dataplanePort + c"},
	{"dataplaneIp", CFG_STRING, "127.0.0.1", 7, 15, NULL, "IPv4 address of the dataplane"},
	{"dataplaneInterface", CFG_STRING, NULL, 0, 64, NULL,
	 "af_packet: the interface (its address must be dataplaneIp)"},
	{"dpdkArgs", CFG_STRING, NULL, 0, 1024, NULL, "dpdk: EAL arguments"},
	{"dataplaneCpus", CFG_STRING, NULL, 0, 256, NULL,
	 "CPUs to pin cores to, comma-separated (empty: core c on CPU c mod online CPUs)"},
	{"controlCpus", CFG_STRING, NULL, 0, 256, NULL,
	 "CPUs for every other thread, comma-separated (empty: those the cores do not use)"},
	{"busyPoll", CFG_BOOL, "false", 0, 0, NULL, "cores never sleep (dedicated hosts)"},
	{"dataplaneRawEcho", CFG_BOOL, "false", 0, 0, NULL,
	 "reflect raw \"PRAW\" datagrams so sprocket-bench can measure the port's floor"},
	{"maxSessionsPerCore", CFG_INT, "1024", 1, 65536, NULL, "transport sessions per core"},
	{"maxSessionsPerAddr", CFG_INT, "256", 0, 65536, NULL,
	 "transport sessions of one source address per core (0: no cap of its own); more "
	 "CONNECTs are answered SYSTEM_BUSY"},
	{"bigBuffersPerAddr", CFG_INT, "16", 0, 1 << 20, NULL,
	 "of a core's 32 buffers for multi-packet requests and large responses, how many one "
	 "source address holds at once (0: no cap of its own)"},
	{"reassemblyTimeoutMs", CFG_INT, "2000", 10, 600000, NULL,
	 "a multi-packet request must arrive within this from its first packet (then "
	 "SYSTEM_BUSY, its buffer freed)"},
	{"slotsPerSession", CFG_INT, "8", 1, 256, NULL,
	 "requests in flight per transport session at most (memory: sessions x slots x ~0.4 KiB)"},
	{"pendingAcksPerCore", CFG_INT, "8192", 16, 1 << 20, NULL,
	 "SENDs waiting for their flush per core (then SYSTEM_BUSY)"},
	{"parkedPullsPerCore", CFG_INT, "4096", 1, 1 << 20, NULL, "long-polling pulls per core"},
	{"consumerOffsetSlotsPerCore", CFG_INT, "65536", 1024, 1 << 24, NULL,
	 "(topic, group, queue) offsets per core"},
	{"logLevel", CFG_ENUM, "info", 0, 0, level_choices, "log verbosity"},
	{"logFile", CFG_STRING, NULL, 0, 1024, NULL,
	 "write log lines to this file, appended, instead of stderr; SIGHUP reopens it (for "
	 "logrotate)"},
	/* RocketMQ broker keys with no meaning here (thread pools, Netty). */
	{"rocketmqHome", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"sendMessageThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"pullMessageThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"useReentrantLockWhenPutMessage", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"waitTimeMillsInSendQueue", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"transientStorePoolEnable", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"osPageCacheBusyTimeOutMills", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverWorkerThreads", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverSelectorThreads", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"longPollingEnable", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	/* RocketMQ's tuning keys for its own flush, deletion and threads: no effect here. */
	{"autoCreateSubscriptionGroup", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"flushCommitLogLeastPages", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"flushConsumeQueueLeastPages", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"flushCommitLogThoroughInterval", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"flushConsumeQueueThoroughInterval", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"flushIntervalConsumeQueue", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"flushCommitLogTimed", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"destroyMapedFileIntervalForcibly", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"redeleteHangedFileInterval", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"checkTransactionMessageEnable", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"queryMessageThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"adminBrokerThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"clientManageThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"consumerManageThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"heartbeatThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"endTransactionThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"processReplyMessageThreadPoolNums", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"brokerIP2", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	/* RocketMQ's HA service keys: replication rides the dataplane port here. */
	{"haListenPort", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"haSendHeartbeatInterval", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"haHousekeepingInterval", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"haTransferBatchSize", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
};

const size_t bk_nkeys = sizeof(bk_keys) / sizeof(bk_keys[0]);
