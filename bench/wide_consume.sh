#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/wide_consume.sh - an ali-ons consumer group of one member on a topic of QUEUES
# queues (one long poll per queue, all on one connection): how many messages of N it
# consumed and in how long, the SYSTEM_BUSY answers the broker gave, the long polls it held
# off its cores, and the broker's RSS and CPU while the polls wait. One udp core,
# ASYNC_FLUSH, a real NameServer, on loopback.
#
#   bench/wide_consume.sh [BUILD_DIR] [QUEUES ...]     (default: build 1000 10000 65535)
#   N=100 WAIT_S=10 bench/wide_consume.sh build 65535
#
# Needs tests/compat/node_modules (scripts/bootstrap.sh). Nothing here is timed in a test;
# docs/benchmarks.md keeps the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}
shift || true
[ $# -gt 0 ] || set -- 1000 10000 65535
N=${N:-100}
WAIT_S=${WAIT_S:-10}
TMP=$(mktemp -d /tmp/sp-wide.XXXXXX)
ns_pid=
bk_pid=
cleanup() {
	[ -n "$bk_pid" ] && { kill -KILL "$bk_pid"; wait "$bk_pid"; } 2>/dev/null || true
	[ -n "$ns_pid" ] && { kill -KILL "$ns_pid"; wait "$ns_pid"; } 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14 + $15}' "/proc/$bk_pid/stat"; }
rss_mb() { echo $(($(awk '/VmRSS/{print $2}' "/proc/$bk_pid/status") / 1024)); }
metric() { curl -s "http://127.0.0.1:$http_port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

ns_port=$(free_port)
"$BIN/control/sprocket-namesrv" --listenPort="$ns_port" --bindAddress=127.0.0.1 \
	--kvConfigPath="$TMP/kv.json" >"$TMP/ns.log" 2>&1 &
ns_pid=$!
NS="127.0.0.1:$ns_port"
hz=$(getconf CLK_TCK)

for q in "$@"; do
	d="$TMP/store-$q"
	http_port=$(free_port)
	"$BIN/broker/sprocket-broker" -c conf/2m-2s-async/broker-a.properties --listenPort=0 \
		--dataplanePort="$(free_port)" --dataplaneCores=1 --httpPort="$http_port" \
		--storePathRootDir="$d" --namesrvAddr="$NS" >"$TMP/bk-$q.log" 2>&1 &
	bk_pid=$!
	until grep -q " ready: " "$TMP/bk-$q.log"; do
		kill -0 "$bk_pid" 2>/dev/null || { tail -5 "$TMP/bk-$q.log"; exit 1; }
		sleep 0.05
	done
	"$BIN/cli/sprocket" --namesrv="$NS" topic create Wide --queues="$q" >/dev/null
	seq 1 "$N" | sed 's/^/wide-/' | "$BIN/cli/sprocket" --namesrv="$NS" produce Wide >/dev/null
	rss0=$(rss_mb)
	t0=$(date +%s%N)
	out=$(node tests/compat/acl_client.js consume "$NS" Wide GID_WIDE "$N" 300)
	t1=$(date +%s%N)
	got=$(echo "$out" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["got"])')
	# the group's polls now wait at the broker: hold a second group on it and measure
	node tests/compat/acl_client.js consume "$NS" Wide GID_IDLE $((N + 1)) $((WAIT_S + 20)) >/dev/null &
	idle_pid=$!
	while [ "$(metric sprocket_remoting_long_polls_held)" = "" ] ||
		[ "$(metric sprocket_remoting_long_polls_held)" -lt $((q > 2100 ? q - 2100 : 0)) ]; do
		kill -0 "$idle_pid" 2>/dev/null || break
		sleep 0.2
	done
	held=$(metric sprocket_remoting_long_polls_held)
	c0=$(ticks)
	sleep "$WAIT_S"
	c1=$(ticks)
	rss1=$(rss_mb)
	cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$hz" -v s="$WAIT_S" 'BEGIN{printf "%.1f", (b - a) * 100 / hz / s}')
	kill "$idle_pid" 2>/dev/null || true
	wait "$idle_pid" 2>/dev/null || true
	kill -TERM "$bk_pid"
	wait "$bk_pid" 2>/dev/null || true
	bk_pid=
	busy=$(grep "SYSTEM_BUSY answers by reason" "$TMP/bk-$q.log" | tail -1 | sed 's/.*reason: //')
	printf '%6d queues: ali-ons consumed %d of %d in %d ms; then %s polls held, RSS %d -> %d MB, broker CPU %s%% while they wait; busy: %s\n' \
		"$q" "$got" "$N" $(((t1 - t0) / 1000000)) "${held:-?}" "$rss0" "$rss1" "$cpu" "$busy"
done
