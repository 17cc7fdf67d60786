#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The main job: install, build, start a NameServer and a broker, run the
# produce-and-consume latency benchmark against them (produce -> SEND_OK, and
# send -> consumed by long-polling pulls) next to the raw port floor of the
# same backend, print the percentile table, and stop everything cleanly.
#
#   scripts/run.sh                       udp on loopback (the default)
#   scripts/run.sh --backend=af_packet   broker and client across a veth pair in
#                                        two network namespaces it creates (root)
#   scripts/run.sh --backend=dpdk        broker and client over DPDK net_memif
#   scripts/run.sh --backend=all         every backend this machine can run
#   DURATION=10 SIZE=128 RATE=20000 FLUSH=SYNC_FLUSH scripts/run.sh
#   MODE=produce scripts/run.sh          produce -> ack only (MODE=e2e, the default, adds consumers)
#   MODE=throughput BENCH_ARGS="--batch=64 --depth=8" scripts/run.sh --backend=dpdk
#   TOPICS="Q16:16 Q10K:10000" ...      topics created before the broker starts (name:queues)
#   SLAVE=1 BROKER_ARGS=--brokerRole=SYNC_MASTER scripts/run.sh
#                                        a slave follows the broker (its core and threads on the
#                                        benchmark's CPU; dpdk: behind a memif switch): docs/replication.md
#   SLAVE=late ...                       the slave starts after the benchmark and copies the
#                                        whole log; prints its catch-up rate
#
# CPU layout on a small machine: the broker's one dataplane core alone on CPU 1
# (as on a production host), the benchmark on CPU 0 with everything else (the
# broker's store and control threads, the NameServer). CPUS="bench,broker"
# changes it; BROKER_ARGS=--controlCpus=1 puts the broker's other threads on its
# core's CPU instead. On 2 vCPUs neither is quiet: see docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
DURATION=${DURATION:-10}
SIZE=${SIZE:-128}
RATE=${RATE:-}
FLUSH=${FLUSH:-ASYNC_FLUSH}
MODE=${MODE:-e2e}
BENCH_ARGS=${BENCH_ARGS:-}
BROKER_ARGS=${BROKER_ARGS:-}
CPUS=${CPUS:-0,1}
backend=udp
for a in "$@"; do
	case "$a" in
	--backend=*) backend="${a#--backend=}" ;;
	*) echo "usage: scripts/run.sh [--backend=udp|af_packet|dpdk|all]" >&2; exit 2 ;;
	esac
done

# BOOTSTRAP_ARGS=--bench: bench/compare.sh installs only what the benchmarks need.
# shellcheck disable=SC2086
scripts/bootstrap.sh ${BOOTSTRAP_ARGS:-}
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" -Dwerror=true
fi
# TARGETS: what to build (default everything); bench/compare.sh builds only what it runs.
# shellcheck disable=SC2086
ninja -C "$BUILD" ${TARGETS:-}
BIN="$PWD/$BUILD"
bench_cpu=${CPUS%,*}
broker_cpu=${CPUS#*,}

if [ "$backend" = all ]; then
	backends="udp"
	if [ "$(id -u)" = 0 ]; then backends="$backends af_packet"; fi
	if grep -q 'SP_DP_HAVE_DPDK' "$BUILD/build.ninja" 2>/dev/null; then backends="$backends dpdk"; fi
	for b in $backends; do "$0" --backend="$b"; done
	exit 0
fi

work=$(mktemp -d /tmp/sprocket-run-XXXXXX)
# Host tuning as for a production broker (root only, undone at exit): block-device
# interrupts off the dataplane core's CPU. Under write load their completions
# (ext4 writeback) took ~19% of the core's time on this VM. IRQ_TUNE=0 skips it.
irq_restore=()
if [ "$(id -u)" = 0 ] && [ "${IRQ_TUNE:-1}" = 1 ]; then
	for irq in $(awk -F: '/virtio[0-9]+-req|nvme|ahci/ {gsub(/ /, "", $1); print $1}' /proc/interrupts); do
		f=/proc/irq/$irq/smp_affinity_list
		[ -w "$f" ] || continue
		old=$(cat "$f")
		if echo "$bench_cpu" >"$f" 2>/dev/null; then irq_restore+=("$irq:$old"); fi
	done
fi
ns_pid=""
bk_pid=""
sl_pid=""
sw_pid=""
nsA=""
nsB=""
cleanup() {
	set +e
	for r in "${irq_restore[@]}"; do echo "${r#*:}" >"/proc/irq/${r%%:*}/smp_affinity_list" 2>/dev/null; done
	[ -n "$sl_pid" ] && kill "$sl_pid" 2>/dev/null && wait "$sl_pid" 2>/dev/null
	[ -n "$sw_pid" ] && kill "$sw_pid" 2>/dev/null && wait "$sw_pid" 2>/dev/null
	[ -n "$bk_pid" ] && kill "$bk_pid" 2>/dev/null && wait "$bk_pid" 2>/dev/null
	[ -n "$ns_pid" ] && kill "$ns_pid" 2>/dev/null && wait "$ns_pid" 2>/dev/null
	[ -n "$nsA" ] && ip netns del "$nsA" 2>/dev/null
	[ -n "$nsB" ] && ip netns del "$nsB" 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# Where each process runs: "in_b CMD &" runs in the broker's namespace (af_packet);
# exec keeps $! the daemon's own pid, so that kill reaches it.
in_b() { if [ -n "$nsB" ]; then exec ip netns exec "$nsB" "$@"; else exec "$@"; fi; }
in_a() { if [ -n "$nsA" ]; then ip netns exec "$nsA" "$@"; else "$@"; fi; }
in_a_daemon() { if [ -n "$nsA" ]; then exec ip netns exec "$nsA" "$@"; else exec "$@"; fi; }
# wait_line FILE PATTERN TENTHS [PID]: wait until FILE has a line matching PATTERN
# (grep -E), at most TENTHS tenths of a second and while PID (if given) lives.
# Return: whether it has one.
wait_line() {
	for _ in $(seq "$3"); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		[ -z "${4:-}" ] || kill -0 "$4" 2>/dev/null || break
		sleep 0.1
	done
	grep -qE "$2" "$1" 2>/dev/null
}

ns_host=127.0.0.1
ns_port=$((20000 + $$ % 20000))
dp_port=$((40000 + $$ % 20000))
broker_args=(--dataplaneBackend="$backend" --dataplanePort="$dp_port"
	--dataplaneCores=1 --dataplaneCpus="$broker_cpu" --dataplaneRawEcho=true
	--flushDiskType="$FLUSH")
bench_args=(--backend="$backend" --cores="$bench_cpu")
# SYNC_FLUSH is judged against one fdatasync on the same disk, in the same run.
# The benchmark then waits in its port when idle rather than spin (CPUS may put the
# broker's flusher on the benchmark's CPU).
if [ "$FLUSH" = SYNC_FLUSH ]; then bench_args+=(--fsync-dir="$work" --no-busy); fi
case "$backend" in
udp)
	broker_args+=(--dataplaneIp=127.0.0.1)
	;;
af_packet)
	[ "$(id -u)" = 0 ] || { echo "run.sh: af_packet needs root (namespaces, raw sockets)" >&2; exit 1; }
	tag=$(( $$ % 200 + 20 ))
	nsA="sprun-$$-a"; nsB="sprun-$$-b"
	ip netns add "$nsA"; ip netns add "$nsB"
	ip link add "spr$$a" netns "$nsA" type veth peer name "spr$$b" netns "$nsB"
	ip -n "$nsA" addr add "10.252.$tag.1/24" dev "spr$$a"
	ip -n "$nsB" addr add "10.252.$tag.2/24" dev "spr$$b"
	for n in "$nsA" "$nsB"; do ip -n "$n" link set lo up; done
	ip -n "$nsA" link set "spr$$a" up; ip -n "$nsB" link set "spr$$b" up
	ns_host="10.252.$tag.2"
	broker_args+=(--dataplaneIp="10.252.$tag.2" --dataplaneInterface="spr$$b" --brokerIP1="10.252.$tag.2")
	bench_args+=(--iface="spr$$a" --ip="10.252.$tag.1" --port=9000)
	;;
dpdk)
	grep -q 'SP_DP_HAVE_DPDK' "$BUILD/build.ninja" || { echo "run.sh: built without DPDK" >&2; exit 1; }
	export RUNTIME_DIRECTORY="$work/dpdk"
	mkdir -p "$RUNTIME_DIRECTORY"
	eal="--no-pci --no-huge --no-shconf --no-telemetry"
	# With a slave, three processes share the segment: a learning switch joins
	# them (tests/dpdk/memif_switch.c, as a NIC host's switch), MACs distinct.
	# MEMIF_SWITCH=1 puts the switch there without a slave (the same path for a
	# baseline).
	bk_sock="/sprun-$$" mac=""
	if [ -n "${SLAVE:-}" ] || [ -n "${MEMIF_SWITCH:-}" ]; then
		[ "${SLAVE:-}" != late ] || { echo "run.sh: SLAVE=late runs on udp and af_packet" >&2; exit 1; }
		[ -x "$BIN/tests/memif_switch" ] || { echo "run.sh: no $BIN/tests/memif_switch" >&2; exit 1; }
		bk_sock="/sprun-$$-bk" mac=",mac=02:5a:00:00:00:02"
	fi
	broker_args+=(--dataplaneIp=10.250.0.2
		"--dpdkArgs=-l $broker_cpu $eal --file-prefix=sprun-bk-$$ --vdev=net_memif0,role=server,socket=$bk_sock,socket-abstract=yes$mac")
	bench_args+=(--ip=10.250.0.1 --port=9000
		"--dpdk-args=-l $bench_cpu $eal --file-prefix=sprun-cl-$$ --vdev=net_memif0,role=client,socket=/sprun-$$,socket-abstract=yes${mac:+,mac=02:5a:00:00:00:01}")
	;;
*)
	echo "run.sh: unknown backend '$backend'" >&2; exit 2 ;;
esac

if [ -n "${TOPICS:-}" ]; then
	# Created before the broker starts (a running broker takes
	# `sprocket topic create`, or mqadmin updateTopic, on its remoting port).
	mkdir -p "$work/store/config"
	{
		printf '{"topicConfigTable":{'
		sep=""
		for t in $TOPICS; do
			printf '%s"%s":{"topicName":"%s","readQueueNums":%s,"writeQueueNums":%s,"perm":6}' \
				"$sep" "${t%%:*}" "${t%%:*}" "${t#*:}" "${t#*:}"
			sep=","
		done
		printf '}}\n'
	} >"$work/store/config/topics.json"
fi
in_b "$BIN/control/sprocket-namesrv" --listenPort="$ns_port" --bindAddress=0.0.0.0 \
	--kvConfigPath="$work/namesrv/kvConfig.json" >"$work/namesrv.log" 2>&1 &
ns_pid=$!
in_b "$BIN/broker/sprocket-broker" --storePathRootDir="$work/store" \
	--namesrvAddr="127.0.0.1:$ns_port" --mapedFileSizeCommitLog=268435456 --listenPort=0 \
	"${broker_args[@]}" $BROKER_ARGS >"$work/broker.log" 2>&1 &
bk_pid=$!
if ! wait_line "$work/broker.log" ' ready: ' 300 "$bk_pid"; then
	echo "run.sh: the broker did not start:" >&2; cat "$work/broker.log" >&2; exit 1
fi
# The memif switch between the broker, the benchmark and the slave (if any): it
# connects to the brokers' sockets, so it starts after them.
start_switch() {
	local vd=("--vdev=net_memif0,role=client,socket=/sprun-$$-bk,socket-abstract=yes,mac=02:5a:00:00:01:00"
		"--vdev=net_memif1,role=server,socket=/sprun-$$,socket-abstract=yes,mac=02:5a:00:00:01:01")
	[ -z "${1:-}" ] || vd+=("--vdev=net_memif2,role=client,socket=$1,socket-abstract=yes,mac=02:5a:00:00:01:02")
	# shellcheck disable=SC2086 # eal is a list of options
	"$BIN/tests/memif_switch" $eal -l "${SWITCH_CPU:-$bench_cpu}" --file-prefix="sprun-sw-$$" "${vd[@]}" \
		>"$work/switch.out" 2>"$work/switch.log" &
	sw_pid=$!
	wait_line "$work/switch.out" '^ready' 300 ||
		{ echo "run.sh: the memif switch did not start:" >&2; cat "$work/switch.log" >&2; exit 1; }
}
# The slave: udp on the client's side of the link, everything on the benchmark's CPU
# unless SLAVE_CPU says otherwise.
start_slave() {
	local sl_ip=127.0.0.1 sl_rip=127.0.0.1 sl_be=udp sl_cpu=${SLAVE_CPU:-$bench_cpu} sl_dpdk=()
	[ "$backend" = af_packet ] && sl_ip="10.252.$tag.1" sl_rip="10.252.$tag.1"
	if [ "$backend" = dpdk ]; then
		sl_ip=10.250.0.3 sl_be=dpdk
		sl_dpdk=("--dpdkArgs=-l ${sl_cpu%%,*} $eal --file-prefix=sprun-sl-$$ --vdev=net_memif0,role=server,socket=/sprun-$$-sl,socket-abstract=yes,mac=02:5a:00:00:00:03")
	fi
	# shellcheck disable=SC2086 # BROKER_ARGS is a list of options
	in_a_daemon nice -n "${SLAVE_NICE:-0}" "$BIN/broker/sprocket-broker" --storePathRootDir="${SLAVE_STORE:-$work/slave}" --brokerRole=SLAVE \
		--brokerId=1 --namesrvAddr="$ns_host:$ns_port" --mapedFileSizeCommitLog=268435456 \
		--dataplaneBackend="$sl_be" --dataplaneIp="$sl_ip" --brokerIP1="$sl_rip" "${sl_dpdk[@]}" \
		--dataplanePort=$((dp_port + 100)) --dataplaneCores=1 --dataplaneCpus="$sl_cpu" \
		--controlCpus="$sl_cpu" --listenPort=0 --flushDiskType="$FLUSH" \
		>"$work/slave.log" 2>&1 &
	sl_pid=$!
	if [ "$backend" = dpdk ]; then
		wait_line "$work/slave.log" ' ready: ' 300 "$sl_pid" ||
			{ echo "run.sh: the slave did not start:" >&2; cat "$work/slave.log" >&2; exit 1; }
		start_switch "/sprun-$$-sl"
	fi
	wait_line "$work/slave.log" 'session to master' 300 "$sl_pid" ||
		{ echo "run.sh: the slave did not follow:" >&2; cat "$work/slave.log" >&2; exit 1; }
}
case "${SLAVE:-}" in
"" | late)
	[ "$backend" != dpdk ] || [ -z "${MEMIF_SWITCH:-}" ] || start_switch ;;
*)
	start_slave ;;
esac
# The route appears once the broker has registered (at start, then every 30 s).
wait_line "$work/broker.log" 'registered [0-9]+ topics with namesrv' 100 || true

# Page faults of the broker's dataplane cores ("dp-core-N minflt majflt"): a
# poll-mode core should take none in steady state (docs/dataplane.md).
core_faults() {
	local t
	for t in /proc/"$bk_pid"/task/*; do
		case "$(cat "$t/comm" 2>/dev/null)" in
		dp-core-*) sed 's/^.*) //' "$t/stat" | awk -v n="$(cat "$t/comm")" '{print n, $8, $10}' ;;
		esac
	done
}

echo "== sprocket: $MODE on $backend ($FLUSH), ${SIZE} B messages," \
	"${DURATION} s, next to the raw port floor to the same broker core"
faults0=$(core_faults)
t_bench=$(date +%s)
# shellcheck disable=SC2086 # BENCH_ARGS is a list of options
in_a "$BIN/bench/sprocket-bench" "$MODE" --namesrv="$ns_host:$ns_port" --size="$SIZE" \
	--duration="$DURATION" ${RATE:+--rate=$RATE} ${JSON:+--json} "${bench_args[@]}" $BENCH_ARGS
t_bench=$(($(date +%s) - t_bench))
join <(echo "$faults0" | sort) <(core_faults | sort) |
	awk -v t="$t_bench" '{printf "# broker: %s page faults during the benchmark (%d s): %d minor, %d major (%.1f/s)\n", $1, t, $4 - $2, $5 - $3, ($4 - $2 + $5 - $3) / (t > 0 ? t : 1)}'

# The switch first: it polls its memif ports without the broker's guard against a
# peer that leaves (docs/dpdk.md).
if [ -n "$sw_pid" ]; then kill "$sw_pid" 2>/dev/null || true; wait "$sw_pid" || true; sw_pid=""; fi
if [ "${SLAVE:-}" = late ]; then
	# A slave that starts now copies the whole log while the broker is idle: its
	# catch-up rate ("caught up ... MB/s") is what it could follow at. It starts
	# once the broker's write-back is done (under 1 MB written in a second): on
	# one disk the two would share its bandwidth.
	last=$(awk '/^write_bytes/ {print $2}' "/proc/$bk_pid/io" 2>/dev/null || echo 0)
	drain=0
	sleep 1
	for _ in $(seq 120); do
		now=$(awk '/^write_bytes/ {print $2}' "/proc/$bk_pid/io" 2>/dev/null || echo 0)
		[ "$((now - last))" -lt 1000000 ] && break
		last=$now
		drain=$((drain + 1))
		sleep 1
	done
	echo "# broker: its write-back ended $drain-$((drain + 1)) s after the benchmark"
	start_slave
	wait_line "$work/slave.log" 'caught up with master' 3000 "$sl_pid" || true
	grep -E 'caught up with master' "$work/slave.log" | sed 's/^.*broker.repl: /# slave: /' ||
		echo "# slave: no catch-up line (a log under 64 MiB, or not caught up in 300 s)"
fi
kill "$bk_pid"
if ! wait "$bk_pid"; then echo "run.sh: the broker did not stop cleanly" >&2; exit 1; fi
bk_pid=""
if [ -n "$sl_pid" ]; then
	kill "$sl_pid"
	if ! wait "$sl_pid"; then echo "run.sh: the slave did not stop cleanly" >&2; exit 1; fi
	sl_pid=""
	grep -E 'followed:' "$work/slave.log" | sed 's/^.*broker: /# slave: /' || true
fi
kill "$ns_pid"; wait "$ns_pid" || true; ns_pid=""
grep -E ' core [0-9]+: (sends|page faults|busy by)| core [0-9]+ replication' "$work/broker.log" | sed 's/^/# broker: /' || true
