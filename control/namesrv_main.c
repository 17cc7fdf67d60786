// SPDX-License-Identifier: Apache-2.0
/*
 * namesrv_main.c - sprocket-namesrv: configuration, signals, run.
 *
 *   sprocket-namesrv [-c namesrv.properties] [--key=value ...]
 *
 * Keys are RocketMQ's namesrv.properties names where RocketMQ has one
 * (listenPort, kvConfigPath, orderMessageEnable, ...); RocketMQ keys that do
 * not apply (thread pools, Netty buffers) are accepted with a notice, so an
 * existing file starts sprocket unchanged. docs/namesrv.md lists them.
 * SIGTERM and SIGINT arrive through a signalfd in the io loop, which closes
 * everything and exits 0; SIGHUP there reopens logFile (logrotate), and
 * never stops the NameServer.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/cidr.h"
#include "common/config.h"
#include "common/err.h"
#include "common/fdlimit.h"
#include "common/log.h"
#include "control/notify.h"
#include "control/ns.h"
#include "sp_config.h"

#include "ns_priv.h"

static const char *const level_choices[] = {"err", "warn", "info", "debug", NULL};

static const struct cfg_key ns_keys[] = {
	{"listenPort", CFG_INT, "9876", 0, 65535, NULL, "remoting TCP port (0: any free port)"},
	{"bindAddress", CFG_STRING, "0.0.0.0", 7, 15, NULL, "IPv4 address to listen on"},
	{"httpPort", CFG_INT, "-1", -1, 65535, NULL,
	 "HTTP port of /metrics and /health (docs/observability.md); 0: off; -1: listenPort - "
	 "1795 (8081 for 9876)"},
	{"httpBindAddress", CFG_STRING, "127.0.0.1", 7, 15, NULL,
	 "IPv4 address the HTTP endpoints listen on (this host only by default; 0.0.0.0: every "
	 "address)"},
	{"httpMetricsToken", CFG_STRING, NULL, 0, 256, NULL,
	 "set: /metrics and /health need \"Authorization: Bearer TOKEN\" (Prometheus' "
	 "authorization setting); never shown",
	 true},
	{"kvConfigPath", CFG_STRING, NULL, 0, 1024, NULL,
	 "KV config file; its directory is the data dir (default $HOME/namesrv/kvConfig.json)"},
	{"brokerExpireMs", CFG_INT, "120000", 1, 86400000, NULL,
	 "drop a broker silent for this long (ms)"},
	{"scanNotActiveBrokerInterval", CFG_INT, "10000", 1, 3600000, NULL,
	 "how often to look for silent brokers (ms)"},
	{"frameMaxLength", CFG_INT, "67108864", 1024, 1073741824, NULL,
	 "largest remoting frame accepted (bytes)"},
	{"maxConnections", CFG_INT, "10000", 1, 1000000, NULL,
	 "concurrent connections; lowered at start to what the descriptor limit leaves after "
	 "fdReserve"},
	{"fdReserve", CFG_INT, "64", 16, 1000000, NULL,
	 "file descriptors kept from connections for the NameServer's own files (the soft "
	 "limit is raised to the hard one at start)"},
	{"maxFrameMemory", CFG_INT, "268435456", 1048576, 1099511627776, NULL,
	 "memory all connections may hold in frames not yet whole (bytes); a connection whose "
	 "frame would take more is closed"},
	{"maxInflatedBodySize", CFG_INT, "67108864", 65536, 268435456, NULL,
	 "largest a compressed REGISTER_BROKER body may inflate to (bytes; also at most 64 "
	 "times its compressed size)"},
	{"maxConnectionsPerAddr", CFG_INT, "1024", 0, 1000000, NULL,
	 "concurrent connections from one source address (0: no cap of its own)"},
	{"serverChannelMaxIdleTimeSeconds", CFG_INT, "120", 0, 86400, NULL,
	 "close connections idle this long (0: never)"},
	{"orderMessageEnable", CFG_BOOL, "false", 0, 0, NULL,
	 "add orderTopicConf (KV namespace ORDER_TOPIC_CONFIG) to routes"},
	{"logLevel", CFG_ENUM, "info", 0, 0, level_choices, "log verbosity"},
	{"logFile", CFG_STRING, NULL, 0, 1024, NULL,
	 "write log lines to this file, appended, instead of stderr; SIGHUP reopens it (for "
	 "logrotate)"},
	{"aclEnable", CFG_BOOL, "false", 0, 0, NULL,
	 "broker registrations, write-permission and KV changes, and admin requests need the "
	 "signature of an admin account of aclFile (RocketMQ's plain ACL); route reads stay "
	 "open"},
	{"aclFile", CFG_STRING, NULL, 0, 1024, NULL,
	 "plain_acl.yml (RocketMQ's format), required with aclEnable; must not be readable by "
	 "others; reloaded within 2 s of a change"},
	{"protectedMode", CFG_BOOL, "true", 0, 0, NULL,
	 "with aclEnable=false and bindAddress not set: registrations and other route changes "
	 "from loopback only"},
	{"adminAllowedAddrs", CFG_STRING, "127.0.0.1", 0, 0, NULL,
	 "who may send admin requests (KV config, write permission, topic deletion, config): "
	 "IPv4 addresses and ADDR/BITS networks, comma-separated, * for anyone"},
	/* RocketMQ namesrv/Netty keys with no meaning here. */
	{"rocketmqHome", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"configStorePath", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"productEnvName", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"clusterTest", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverWorkerThreads", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverCallbackExecutorThreads", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverSelectorThreads", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverOnewaySemaphoreValue", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverAsyncSemaphoreValue", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverSocketSndBufSize", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverSocketRcvBufSize", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"serverPooledByteBufAllocatorEnable", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
	{"useEpollNativeSelector", CFG_IGNORED, NULL, 0, 0, NULL, NULL},
};

int
main(int argc, char **argv)
{
	struct ns_server_conf sc = {0};
	struct ns_server *srv = NULL;
	struct cfg_err err = {{0}};
	struct cfg *cfg = NULL;
	char kv_path[PATH_MAX];
	enum log_level lvl = LOG_LVL_INFO;
	sigset_t mask;
	bool help = false;
	int sfd = -1;
	int rc;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--version") == 0) {
			printf("sprocket-namesrv %s\n", SP_VERSION);
			return 0;
		}
	if (cfg_create(ns_keys, ARRAY_SIZE(ns_keys), &cfg, &err) != 0 ||
	    cfg_parse_args(cfg, argc, argv, &help, &err) != 0) {
		fprintf(stderr, "sprocket-namesrv: %s\n", err.msg);
		cfg_destroy(cfg);
		return 2;
	}
	if (help) {
		printf("usage: sprocket-namesrv [-c FILE] [--key=value ...] [--version]\nkeys:\n");
		fflush(stdout);
		cfg_print_help(cfg, 1);
		cfg_destroy(cfg);
		return 0;
	}
	if (log_level_parse(cfg_get_str(cfg, "logLevel"), &lvl) == 0)
		log_set_level(lvl);
	if (cfg_get_str(cfg, "logFile")[0] != '\0') {
		rc = log_open_file(cfg_get_str(cfg, "logFile"));
		if (rc != 0) {
			fprintf(stderr, "sprocket-namesrv: logFile %s: %s\n",
				cfg_get_str(cfg, "logFile"), err_str(rc));
			cfg_destroy(cfg);
			return 2;
		}
	}

	if (cfg_get_str(cfg, "kvConfigPath")[0] != '\0') {
		snprintf(kv_path, sizeof(kv_path), "%s", cfg_get_str(cfg, "kvConfigPath"));
	} else {
		const char *home = getenv("HOME");

		rc = snprintf(kv_path, sizeof(kv_path), "%s/namesrv/kvConfig.json",
			      home != NULL && home[0] != '\0' ? home : ".");
		if (rc < 0 || (size_t)rc >= sizeof(kv_path)) {
			fprintf(stderr, "sprocket-namesrv: $HOME too long; set kvConfigPath\n");
			cfg_destroy(cfg);
			return 2;
		}
	}
	sc.bind_addr = cfg_get_str(cfg, "bindAddress");
	sc.port = (uint16_t)cfg_get_int(cfg, "listenPort");
	sc.frame_max = (size_t)cfg_get_int(cfg, "frameMaxLength");
	sc.frame_mem_max = (uint64_t)cfg_get_int(cfg, "maxFrameMemory");
	/* the descriptor budget (common/fdlimit.h) */
	sc.max_conns =
		fdlim_plan(NS_TAG, "maxConnections", (uint32_t)cfg_get_int(cfg, "maxConnections"),
			   (uint32_t)cfg_get_int(cfg, "fdReserve"), &sc.fd_ceiling);
	if (sc.max_conns == 0) {
		rc = 1; /* too few descriptors for any client: said by fdlim_plan() */
		goto out;
	}
	sc.max_conns_per_addr = (uint32_t)cfg_get_int(cfg, "maxConnectionsPerAddr");
	sc.scan_ms = (uint64_t)cfg_get_int(cfg, "scanNotActiveBrokerInterval");
	sc.expire_ms = (uint64_t)cfg_get_int(cfg, "brokerExpireMs");
	sc.idle_ms = (uint64_t)cfg_get_int(cfg, "serverChannelMaxIdleTimeSeconds") * 1000;
	sc.st.order_msg = cfg_get_bool(cfg, "orderMessageEnable");
	sc.st.inflate_max = (size_t)cfg_get_int(cfg, "maxInflatedBodySize");
	sc.st.kv_path = kv_path;
	sc.st.cfg = cfg;
	sc.st.keys = ns_keys;
	sc.st.n_keys = sizeof(ns_keys) / sizeof(ns_keys[0]);
	sc.st.acl_enable = cfg_get_bool(cfg, "aclEnable");
	sc.st.acl_path = cfg_get_str(cfg, "aclFile");
	sc.st.protected_mode = !sc.st.acl_enable && cfg_get_bool(cfg, "protectedMode") &&
			       !cfg_is_set(cfg, "bindAddress");
	if (sc.st.acl_enable && !sc.st.acl_path[0]) {
		fprintf(stderr, "sprocket-namesrv: aclEnable=true needs aclFile=PATH (a "
				"plain_acl.yml)\n");
		cfg_destroy(cfg);
		return 2;
	}
	{
		char why[160];

		if (cidr_list_parse(cfg_get_str(cfg, "adminAllowedAddrs"), &sc.st.admin, why,
				    sizeof(why)) != 0) {
			fprintf(stderr, "sprocket-namesrv: adminAllowedAddrs: %s\n", why);
			cfg_destroy(cfg);
			return 2;
		}
	}

	/* Before any thread starts, so every thread inherits the mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
	    (sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		log_err(NS_TAG, "signalfd failed: %s", err_str(errno));
		cfg_destroy(cfg);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);

	rc = ns_server_create(&sc, &srv);
	if (rc != 0) {
		log_err(NS_TAG, "sprocket-namesrv failed to start: %s", err_str(rc));
		goto out;
	}
	log_info(NS_TAG,
		 "sprocket-namesrv %s listening on %s:%u (kv config %s, frameMaxLength %zu, "
		 "brokerExpireMs %llu, scan every %llu ms)",
		 SP_VERSION, sc.bind_addr, ns_server_port(srv), kv_path, sc.frame_max,
		 (unsigned long long)sc.expire_ms, (unsigned long long)sc.scan_ms);
	if (sc.st.protected_mode)
		log_info(
			NS_TAG,
			"protected mode: broker registrations and other route changes are accepted "
			"from loopback only (aclEnable=false, bindAddress not set); to take "
			"brokers "
			"of other hosts set aclEnable=true with an aclFile, or bindAddress, or "
			"protectedMode=false");
	rc = ns__http_start(srv, cfg);
	if (rc != 0) {
		ns_server_destroy(srv);
		goto out;
	}
	ctl_notify(NS_TAG, "READY=1");
	rc = ns_server_run(srv, sfd);
	ctl_notify(NS_TAG, "STOPPING=1");
	if (rc != 0)
		log_err(NS_TAG, "io loop failed: %s", err_str(rc));
	ns__http_stop();
	ns_server_destroy(srv);
	(void)log_rl_flush_at(UINT64_MAX); /* what floods were cut short, said at last */
	if (rc == 0)
		log_info(NS_TAG, "sprocket-namesrv stopped");
out:
	close(sfd);
	cfg_destroy(cfg);
	return rc == 0 ? 0 : 1;
}
