#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/many_queues.sh - what a broker with many queues costs: for each topic
# count, topics.json is written with that many topics (4 queues each) before
# the start, and the broker (one udp core, ASYNC_FLUSH, a real NameServer) is
# timed from exec to its "ready:" line, then measured idle: RSS, open fds,
# mappings, disk of the store, CPU over IDLE_S seconds; then one topic is
# created with the CLI and the bytes the broker sent the NameServer for it
# are read from its TCP connection (ss bytes_sent: headers and body, as on
# the wire), and CREATES (10) more are timed with the CLI, one after the
# other; then a restart after kill -9 of the same store.
#
#   bench/many_queues.sh [BUILD_DIR] [TOPICS ...]   (default: build 1000 5000 10000)
#   IDLE_S=5 QUEUES=4 bench/many_queues.sh build 100000
#
# Nothing here is timed in a test; docs/benchmarks.md keeps the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}
shift || true
[ $# -gt 0 ] || set -- 1000 5000 10000
IDLE_S=${IDLE_S:-5}
QUEUES=${QUEUES:-4}
CREATES=${CREATES:-10}
TMP=$(mktemp -d /tmp/sp-manyq.XXXXXX)
ns_pid=
bk_pid=
cleanup() {
	[ -n "$bk_pid" ] && kill -KILL "$bk_pid" 2>/dev/null || true
	[ -n "$ns_pid" ] && { kill -KILL "$ns_pid"; wait "$ns_pid"; } 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ms() { echo $((($2 - $1) / 1000000)); }

ns_port=$(free_port)
"$BIN/control/sprocket-namesrv" --listenPort="$ns_port" --bindAddress=127.0.0.1 \
	--kvConfigPath="$TMP/kv.json" >"$TMP/ns.log" 2>&1 &
ns_pid=$!

# topics N DIR: topics.json with N topics of QUEUES queues
topics() {
	mkdir -p "$2/config"
	python3 - "$1" "$QUEUES" "$2/config/topics.json" <<'EOF'
import json, sys
n, q, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
t = {}
for i in range(n):
    name = "T%06d" % i
    t[name] = {"topicName": name, "readQueueNums": q, "writeQueueNums": q, "perm": 6,
               "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
json.dump({"topicConfigTable": t, "dataVersion": {"counter": n, "timestamp": 1}}, open(path, "w"))
EOF
}

# start DIR LOG: start a broker, wait for its next ready line; sets bk_pid, t_ready
start() {
	local n0 t0
	: >>"$2"
	n0=$(grep -c " ready: " "$2" || true)
	t0=$(date +%s%N)
	"$BIN/broker/sprocket-broker" -c conf/2m-2s-async/broker-a.properties --listenPort=0 \
		--dataplanePort="$(free_port)" --dataplaneCores=1 --httpPort=0 \
		--storePathRootDir="$1" --namesrvAddr="127.0.0.1:$ns_port" >>"$2" 2>&1 &
	bk_pid=$!
	while [ "$(grep -c " ready: " "$2" || true)" = "$n0" ]; do
		if ! kill -0 "$bk_pid" 2>/dev/null; then
			echo "broker exited before ready:" >&2
			tail -5 "$2" >&2
			bk_pid=
			return 1
		fi
		sleep 0.01
	done
	t_ready=$(ms "$t0" "$(date +%s%N)")
}

# idle: RSS MB, fds, mappings, CPU % over IDLE_S s of the running broker
idle() {
	local t0 t1 hz
	hz=$(getconf CLK_TCK)
	sleep 1
	t0=$(awk '{print $14 + $15}' "/proc/$bk_pid/stat")
	sleep "$IDLE_S"
	t1=$(awk '{print $14 + $15}' "/proc/$bk_pid/stat")
	rss=$(($(awk '/VmRSS/{print $2}' "/proc/$bk_pid/status") / 1024))
	fds=$(ls "/proc/$bk_pid/fd" | wc -l)
	maps=$(wc -l <"/proc/$bk_pid/maps")
	cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$IDLE_S" 'BEGIN{printf "%.1f", (b - a) * 100 / hz / s}')
}

# the bytes the broker has sent the NameServer, over all its connections to it
ns_bytes() {
	ss -tinpH state established "( dport = :$ns_port )" 2>/dev/null |
		awk -v p="pid=$bk_pid," '/users:/ { keep = index($0, p) > 0; next }
			keep { if (match($0, /bytes_sent:[0-9]+/)) n += substr($0, RSTART + 11, RLENGTH - 11) }
			END { print n + 0 }'
}

# one_topic: create a topic; sets reg_bytes, what its registration cost on the wire; then
# CREATES more, one after the other: sets create_ms, the mean time of one `topic create`
one_topic() {
	local b0 n0 t0 i
	n0=$(grep -c "registered" "$TMP/ns.log" || true)
	b0=$(ns_bytes)
	"$BIN/cli/sprocket" --namesrv="127.0.0.1:$ns_port" topic create NEWTOPIC --queues="$QUEUES" >/dev/null
	while [ "$(grep -c "registered" "$TMP/ns.log" || true)" = "$n0" ]; do sleep 0.01; done
	reg_bytes=$(($(ns_bytes) - b0))
	t0=$(date +%s%N)
	for i in $(seq 1 "$CREATES"); do
		"$BIN/cli/sprocket" --namesrv="127.0.0.1:$ns_port" topic create "NEW$i" --queues="$QUEUES" >/dev/null
	done
	create_ms=$((($(date +%s%N) - t0) / 1000000 / CREATES))
}

for n in "$@"; do
	d="$TMP/store-$n"
	log="$TMP/log-$n"
	topics "$n" "$d"
	if ! start "$d" "$log"; then
		printf '%7d topics x %d: did not start\n' "$n" "$QUEUES"
		continue
	fi
	new=$t_ready
	idle
	one_topic
	disk=$(($(du -sk "$d" | cut -f1) / 1024))
	kill -KILL "$bk_pid"
	wait "$bk_pid" 2>/dev/null || true
	bk_pid=
	if start "$d" "$log"; then
		crash=$t_ready
		kill -TERM "$bk_pid"
		wait "$bk_pid" 2>/dev/null || true
		bk_pid=
	else
		crash=-1
	fi
	printf '%7d topics x %d: ready %6d ms, RSS %5d MB, fds %7d, maps %7d, disk %6d MB, idle CPU %5s%%; one new topic %8d B to the NameServer, %5d ms a creation; after kill -9 ready %6d ms\n' \
		"$n" "$QUEUES" "$new" "$rss" "$fds" "$maps" "$disk" "$cpu" "$reg_bytes" "$create_ms" "$crash"
	rm -rf "$d"
done
