#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# RocketMQ's 2-master-2-slave cluster on one box: two NameServers and the four
# brokers of conf/2m-2s-sync or conf/2m-2s-async (broker-a, broker-a-s,
# broker-b, broker-b-s), each started from its properties file as RocketMQ
# ships it, with ports and store paths derived per broker on the command line.
# Waits until every broker registered with both NameServers, prints the
# cluster view, and stops everything on Ctrl-C or SIGTERM (or after SECONDS_UP seconds).
#
#   scripts/cluster.sh            conf/2m-2s-sync (SYNC_MASTER + SLAVE)
#   scripts/cluster.sh async      conf/2m-2s-async
#   scripts/cluster.sh --failover a 3-member etcd cluster on loopback too, and automatic
#                                 failover in both groups (docs/failover.md): each group's
#                                 two brokers are members 1 and 2, both candidates of the
#                                 mode's master kind; etcd elects the master
#   CORES=2 SEGMENT=67108864 DIR=/tmp/mycluster SECONDS_UP=60 scripts/cluster.sh
#
# Every daemon logs to $DIR/<name>.log; stores are $DIR/<broker>/. The script
# prints the namesrvAddr for clients (e.g. sp_xtool, ali-ons).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=sync
failover=false
for a in "$@"; do
	case "$a" in
	sync | async) mode=$a ;;
	--failover) failover=true ;;
	*) echo "usage: scripts/cluster.sh [sync|async] [--failover]" >&2; exit 2 ;;
	esac
done
if $failover && ! command -v etcd >/dev/null; then
	scripts/bootstrap.sh --bench
fi
BUILD=${BUILD:-build}
CORES=${CORES:-1}
SEGMENT=${SEGMENT:-$((64 << 20))} # mapedFileSizeCommitLog: 1 GiB per broker and shard is a lot for one box
DIR=${DIR:-$(mktemp -d /tmp/sprocket-cluster-XXXXXX)}
SECONDS_UP=${SECONDS_UP:-0}

if [ ! -x "$BUILD/broker/sprocket-broker" ] || [ ! -x "$BUILD/control/sprocket-namesrv" ]; then
	scripts/bootstrap.sh
	[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" -Dwerror=true
	ninja -C "$BUILD" broker/sprocket-broker control/sprocket-namesrv
fi
case "$BUILD" in
/*) BIN="$BUILD" ;;
*) BIN="$PWD/$BUILD" ;;
esac
mkdir -p "$DIR"

# A base port with 40 free ports above it (TCP and UDP), so two clusters can run side by side;
# below the kernel's ephemeral range (32768 up), where outgoing connections take their ports.
base=$(python3 - <<'PY'
import random, socket
for _ in range(200):
    b = random.randrange(20000, 32000, 100)
    ok = True
    for p in range(b, b + 40):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                s.close()
        if not ok:
            break
    if ok:
        print(b)
        break
PY
)
ns1=$base
ns2=$((base + 1))
namesrv="127.0.0.1:$ns1;127.0.0.1:$ns2"
pids=()

stop_all() {
	trap - INT TERM EXIT
	echo "stopping..."
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	echo "stopped; logs and stores in $DIR"
}
trap stop_all EXIT
trap 'exit 0' INT TERM # a stop asked for is a clean end: the EXIT trap stops everything

for p in $ns1 $ns2; do
	"$BIN/control/sprocket-namesrv" --listenPort="$p" --bindAddress=127.0.0.1 \
		>"$DIR/namesrv-$p.log" 2>&1 &
	pids+=($!)
done

# --failover: three etcd members, clients on base+30..32, peers on base+33..35
controller=""
if $failover; then
	peers=""
	for i in 0 1 2; do
		peers="${peers:+$peers,}e$i=http://127.0.0.1:$((base + 33 + i))"
		controller="${controller:+$controller;}127.0.0.1:$((base + 30 + i))"
	done
	for i in 0 1 2; do
		etcd --name "e$i" --data-dir "$DIR/etcd-$i" --log-level warn \
			--listen-client-urls "http://127.0.0.1:$((base + 30 + i))" \
			--advertise-client-urls "http://127.0.0.1:$((base + 30 + i))" \
			--listen-peer-urls "http://127.0.0.1:$((base + 33 + i))" \
			--initial-advertise-peer-urls "http://127.0.0.1:$((base + 33 + i))" \
			--initial-cluster "$peers" --initial-cluster-state new \
			>"$DIR/etcd-$i.log" 2>&1 &
		pids+=($!)
	done
fi
master_kind=SYNC_MASTER
[ "$mode" = async ] && master_kind=ASYNC_MASTER

k=0
for b in broker-a broker-a-s broker-b broker-b-s; do
	extra=()
	if $failover; then
		# members 1 (the file's master) and 2 (its slave), both candidates
		extra=(--controllerAddr="$controller" --brokerRole="$master_kind"
			--brokerId=$((k % 2 + 1)))
	fi
	# broker k: remoting base+10+k, dataplane base+20+k*CORES (one UDP port per core)
	"$BIN/broker/sprocket-broker" -c "conf/2m-2s-$mode/$b.properties" "${extra[@]}" \
		--namesrvAddr="$namesrv" --listenPort=$((base + 10 + k)) \
		--dataplanePort=$((base + 20 + k * CORES)) --dataplaneCores="$CORES" \
		--mapedFileSizeCommitLog="$SEGMENT" --storePathRootDir="$DIR/$b" \
		>"$DIR/$b.log" 2>&1 &
	pids+=($!)
	k=$((k + 1))
done

# Registered: each NameServer knows four addresses of DefaultCluster (with --failover,
# once each group has elected its master: an id 0 in each).
python3 - "$ns1" "$ns2" "$failover" <<'PY'
import json, re, sys, time
sys.path.insert(0, "scripts")
import rmt_call

def cluster(port):
    body = rmt_call.call(f"127.0.0.1:{port}", 106, timeout=3)[2].decode()
    return json.loads(re.sub(r'([{,])(\d+):', r'\1"\2":', body)) if body else {}

deadline = time.time() + 60
while True:
    try:
        views = [cluster(p) for p in sys.argv[1:3]]
        n = [sum(len(b.get("brokerAddrs", {})) for b in v.get("brokerAddrTable", {}).values())
             for v in views]
        masters = [sum(1 for b in v.get("brokerAddrTable", {}).values()
                       if "0" in b.get("brokerAddrs", {})) for v in views]
        if all(x == 4 for x in n) and (sys.argv[3] != "true" or all(m == 2 for m in masters)):
            break
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("the four brokers did not register with both NameServers in 60 s")
    time.sleep(0.2)
v = views[0]
print("cluster view (GET_BROKER_CLUSTER_INFO):")
for cl, names in sorted(v.get("clusterAddrTable", {}).items()):
    print(f"  {cl}")
    for name in sorted(names):
        addrs = v["brokerAddrTable"][name]["brokerAddrs"]
        for bid in sorted(addrs, key=int):
            role = "master" if bid == "0" else "slave"
            print(f"    {name:<10} id {bid}  {role:<6}  {addrs[bid]}")
PY
if $failover; then
	echo "controllerAddr=$controller  (sprocket broker failover --controller='$controller' --broker=broker-a)"
fi
echo "namesrvAddr=$namesrv  (logs and stores in $DIR; Ctrl-C stops everything)"
# in the background and waited for, so a SIGTERM stops the cluster at once (bash runs a
# trap only between commands); its output closed, so a reader of ours sees EOF at our exit
if [ "$SECONDS_UP" -gt 0 ]; then
	sleep "$SECONDS_UP" >/dev/null 2>&1 &
	wait $!
else
	while :; do
		sleep 3600 >/dev/null 2>&1 &
		wait $!
	done
fi
