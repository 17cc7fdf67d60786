#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/start.sh - how light a broker starts: start-to-ready, RSS, /dev/shm and
# disk of a broker with RocketMQ's sample broker-a.properties (1 GiB CommitLog
# segments, 2 dataplane cores) on an empty store, then a clean restart and a
# restart after kill -9 of the same store, and the time a SIGTERM takes.
#
#   bench/start.sh [BUILD_DIR ...]     (default: build; several: alternating rounds)
#   ROUNDS=3 bench/start.sh build-old build
#
# Ready is the broker's "ready:" log line; RSS is VmRSS 1 s after it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
[ $# -gt 0 ] || set -- build
TMP=$(mktemp -d /tmp/sp-start.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

ms() { echo $((($2 - $1) / 1000000)); }

# start BIN DIR LOG: start a broker, wait for its next ready line; sets pid, t_ready
start() {
	local n0
	: >>"$3"
	n0=$(grep -c " ready: " "$3" || true)
	local t0
	t0=$(date +%s%N)
	"$1/broker/sprocket-broker" -c conf/2m-2s-async/broker-a.properties --listenPort=0 \
		--dataplanePort="$port" --storePathRootDir="$2" --namesrvAddr=127.0.0.1:1 \
		>>"$3" 2>&1 &
	pid=$!
	while [ "$(grep -c " ready: " "$3" || true)" = "$n0" ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "broker exited before ready:" >&2
			tail -5 "$3" >&2
			exit 1
		fi
		sleep 0.01
	done
	t_ready=$(ms "$t0" "$(date +%s%N)")
}

for ((r = 1; r <= ROUNDS; r++)); do
	for bin in "$@"; do
		d="$TMP/store"
		log="$TMP/log"
		rm -rf "$d" "$log"
		start "$bin" "$d" "$log"
		new=$t_ready
		sleep 1
		rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
		shm=$(du -sk "$(head -1 "$d/bufdir" 2>/dev/null)" 2>/dev/null | cut -f1 || echo 0)
		disk=$(du -sk "$d" | cut -f1)
		t0=$(date +%s%N)
		kill -TERM "$pid"
		wait "$pid" || true
		stop=$(ms "$t0" "$(date +%s%N)")
		start "$bin" "$d" "$log"
		clean=$t_ready
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null || true
		start "$bin" "$d" "$log"
		crash=$t_ready
		sleep 1
		rss2=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
		kill -TERM "$pid"
		wait "$pid" || true
		printf '%-12s round %d: ready %5d ms, RSS %4d MB, buffers %4d MB, disk %5d MB, stop %5d ms; clean restart %5d ms, after kill -9 %5d ms (RSS %4d MB)\n' \
			"$bin" "$r" "$new" $((rss / 1024)) $((${shm:-0} / 1024)) $((disk / 1024)) "$stop" \
			"$clean" "$crash" $((rss2 / 1024))
	done
done
