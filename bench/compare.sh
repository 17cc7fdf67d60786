#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# sprocket side by side with peer brokers (issue 8): every workload in
# bench/workloads/*.conf against sprocket (each dataplane backend this machine
# can run, through scripts/run.sh, with the raw port floor of the same run),
# NATS JetStream (nats-server, file storage) and Redis Streams (redis-server,
# appendonly yes), each with the same fsync policy per row set. Writes one
# markdown table and one latency-by-percentile plot; docs/benchmarks.md
# ("Peers side by side") explains the method.
#
#   bench/compare.sh                       everything, results in build/compare/
#   bench/compare.sh --out=DIR             results in DIR
#   bench/compare.sh --duration=3          override the workloads' measured seconds
#   bench/compare.sh --workload=bench/workloads/1topic-1q-128b-closed.conf   (repeatable)
#   BACKENDS="udp" SYSTEMS="sprocket redis" bench/compare.sh
#
# Fresh 2-vCPU Debian 12 machine, as root: installs (scripts/bootstrap.sh),
# builds, runs, and stops everything it started, in under 10 minutes.
# Layout as scripts/run.sh: servers on CPU 1 (sprocket's dataplane core, the
# redis-server and nats-server processes), load generators on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
OUT=""
DUR=""
WORKLOADS=()
SYSTEMS=${SYSTEMS:-"sprocket nats redis"}
BACKENDS=${BACKENDS:-auto}
cmdline="bench/compare.sh $*"
for a in "$@"; do
	case "$a" in
	--out=*) OUT="${a#--out=}" ;;
	--duration=*) DUR="${a#--duration=}" ;;
	--workload=*) WORKLOADS+=("${a#--workload=}") ;;
	*) sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[ -n "$OUT" ] || OUT="$BUILD/compare"
[ "${#WORKLOADS[@]}" -gt 0 ] || WORKLOADS=(bench/workloads/*.conf)
t0=$(date +%s)

# The build and the benchmarks' packages only (no clang, no node): scripts/run.sh too.
export BOOTSTRAP_ARGS=--bench
scripts/bootstrap.sh --bench
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" -Dwerror=true
fi
# What it runs, and no more: on a fresh machine the tests and fuzzers would
# double the build time. scripts/run.sh is told the same list.
TARGETS="control/sprocket-namesrv broker/sprocket-broker bench/sprocket-bench bench/peer-nats bench/peer-redis"
export TARGETS
# shellcheck disable=SC2086
ninja -C "$BUILD" -j2 $TARGETS
for b in sprocket-bench peer-nats peer-redis; do
	[ -x "$BUILD/bench/$b" ] || { echo "compare.sh: $BUILD/bench/$b was not built" >&2; exit 1; }
done
if [ "$BACKENDS" = auto ]; then
	BACKENDS="udp"
	if [ "$(id -u)" = 0 ]; then BACKENDS="$BACKENDS af_packet"; fi
	if grep -q 'SP_DP_HAVE_DPDK' "$BUILD/build.ninja"; then BACKENDS="$BACKENDS dpdk"; fi
fi

mkdir -p "$OUT/raw"
rm -f "$OUT"/raw/*
work=$(mktemp -d /tmp/sprocket-compare-XXXXXX)
srv_pid=""
stop_server() {
	if [ -n "$srv_pid" ]; then
		kill "$srv_pid" 2>/dev/null || true
		wait "$srv_pid" 2>/dev/null || true
		srv_pid=""
	fi
}
cleanup() {
	set +e
	stop_server
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # port pid
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# ---- what is measured, with what ----
{
	echo "- command: \`$cmdline\`"
	echo "- commit: $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with local changes)'), sprocket $(sed -n "s/.*version: *'\([^']*\)'.*/\1/p" meson.build | head -1), $(gcc --version | head -1)"
	echo "- machine: $(nproc) cpus, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "- disk under /tmp: $(df -T /tmp | awk 'NR == 2 {print $2}') on $(df /tmp | awk 'NR == 2 {print $1}')"
	echo "- $(nats-server --version 2>&1 | head -1), libnats $(pkg-config --modversion libnats)"
	echo "- $(redis-server --version | cut -d' ' -f1-3), hiredis $(pkg-config --modversion hiredis)"
	echo "- sprocket backends: $BACKENDS; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/meta.md"

conf() { # file key default
	local v
	v=$(sed -n "s/^$2=//p" "$1" | tail -1)
	echo "${v:-$3}"
}

# Every runner takes: name fsync [backend] queues size rate depth dur producers consumers
run_sprocket() { # name fsync backend queues size rate depth dur producers consumers
	local flush=ASYNC_FLUSH topic="Cmp$4q"
	[ "$2" = sync ] && flush=SYNC_FLUSH
	local rate=""
	[ "$6" != 0 ] && rate=$6
	# The broker grants each session as many requests in flight as the
	# workload's depth: the peers' clients have that many too. ASYNC_FLUSH
	# syncs once a second, as Redis's appendfsync everysec does.
	BUILD="$BUILD" JSON=1 MODE=e2e SIZE="$5" DURATION="$8" RATE="$rate" FLUSH="$flush" \
		TOPICS="$topic:$4" BROKER_ARGS="--slotsPerSession=$7 --flushIntervalCommitLog=1000" \
		BENCH_ARGS="--topic=$topic --depth=$7 --producers=$9 --consumers=${10} --only=raw --progress=0" \
		timeout 180 scripts/run.sh --backend="$3"
}

run_nats() { # name fsync queues size rate depth dur producers consumers
	local port
	port=$(free_port)
	mkdir -p "$work/nats"
	rm -rf "$work/nats/"*
	taskset -c 1 nats-server -a 127.0.0.1 -p "$port" -js -sd "$work/nats" >"$work/nats.log" 2>&1 &
	srv_pid=$!
	wait_port "$port" "$srv_pid" || { cat "$work/nats.log" >&2; return 1; }
	timeout 120 "$BUILD/bench/peer-nats" e2e --url="nats://127.0.0.1:$port" --queues="$3" \
		--size="$4" --rate="$5" --depth="$6" --duration="$7" --producers="$8" \
		--consumers="$9" --progress=0 --cpu=0 --json
	stop_server
}

run_redis() { # name fsync queues size rate depth dur producers consumers
	local port policy=everysec
	[ "$2" = sync ] && policy=always
	port=$(free_port)
	mkdir -p "$work/redis"
	rm -rf "$work/redis/"*
	# No RDB snapshots and no AOF rewrites during a run (both fork); AOF as configured.
	taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --dir "$work/redis" \
		--appendonly yes --appendfsync "$policy" --save '' \
		--auto-aof-rewrite-percentage 0 --daemonize no >"$work/redis.log" 2>&1 &
	srv_pid=$!
	wait_port "$port" "$srv_pid" || { cat "$work/redis.log" >&2; return 1; }
	timeout 120 "$BUILD/bench/peer-redis" e2e --port="$port" --queues="$3" --size="$4" \
		--rate="$5" --depth="$6" --duration="$7" --producers="$8" --consumers="$9" \
		--progress=0 --cpu=0 --json
	stop_server
}

# Progress: "[run/runs, elapsed s] what" before each run.
runs=0
for wf in "${WORKLOADS[@]}"; do
	for fs in $(conf "$wf" fsync async); do
		for sys in $SYSTEMS; do
			case "$sys" in
			sprocket) if [ "$fs" = sync ]; then runs=$((runs + 1)); else runs=$((runs + $(wc -w <<<"$BACKENDS"))); fi ;;
			nats) [ "$fs" = sync ] || runs=$((runs + 1)) ;;
			*) runs=$((runs + 1)) ;;
			esac
		done
	done
done
run_no=0
step() {
	run_no=$((run_no + 1))
	echo "== [$run_no/$runs, $(($(date +%s) - t0)) s] $*"
}

for wf in "${WORKLOADS[@]}"; do
	name=$(conf "$wf" name "$(basename "$wf" .conf)")
	queues=$(conf "$wf" queues 1)
	size=$(conf "$wf" size 128)
	rate=$(conf "$wf" rate 0)
	depth=$(conf "$wf" depth 1)
	producers=$(conf "$wf" producers 1)
	consumers=$(conf "$wf" consumers 1)
	dur=${DUR:-$(conf "$wf" duration 8)}
	for fs in $(conf "$wf" fsync async); do
		for sys in $SYSTEMS; do
			case "$sys" in
			sprocket)
				bks=$BACKENDS
				# SYNC_FLUSH waits for the disk, not the network: one backend says it.
				[ "$fs" = sync ] && bks=udp
				for bk in $bks; do
					f="$OUT/raw/$name.$fs.sprocket-$bk"
					step "$name ($fs): sprocket over $bk"
					run_sprocket "$name" "$fs" "$bk" "$queues" "$size" "$rate" "$depth" "$dur" \
						"$producers" "$consumers" >"$f.out" 2>"$f.err" ||
						echo "compare.sh: failed, see $f.err" >&2
					grep '^{' "$f.out" >"$f.jsonl" || true
				done
				;;
			nats)
				if [ "$fs" = sync ]; then
					echo "== $name ($fs): nats skipped (2.9 cannot sync every write)"
					continue
				fi
				f="$OUT/raw/$name.$fs.nats-tcp"
				step "$name ($fs): nats jetstream"
				run_nats "$name" "$fs" "$queues" "$size" "$rate" "$depth" "$dur" \
					"$producers" "$consumers" >"$f.jsonl" 2>"$f.err" ||
					{ stop_server; echo "compare.sh: failed, see $f.err" >&2; }
				;;
			redis)
				f="$OUT/raw/$name.$fs.redis-tcp"
				step "$name ($fs): redis streams"
				run_redis "$name" "$fs" "$queues" "$size" "$rate" "$depth" "$dur" \
					"$producers" "$consumers" >"$f.jsonl" 2>"$f.err" ||
					{ stop_server; echo "compare.sh: failed, see $f.err" >&2; }
				;;
			*) echo "compare.sh: unknown system '$sys'" >&2; exit 2 ;;
			esac
		done
	done
done

secs=$(($(date +%s) - t0))
echo "- compare.sh total run time: ${secs} s (install, build and runs)" >>"$OUT/meta.md"
python3 bench/compare_report.py "$OUT"
if ! gnuplot "$OUT/latency.gp"; then
	echo "compare.sh: gnuplot failed, no plot" >&2
fi
cat "$OUT/compare.md"
echo
echo "compare.sh: $OUT/compare.md, $OUT/latency.png (${secs} s)"
