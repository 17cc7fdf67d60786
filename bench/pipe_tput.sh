#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# One remoting connection pipelining GET_MAX_OFFSET for 5 s against a lone broker: how many
# answers it gets, and of which codes (a 1-in-64 sample; 0 SUCCESS, 2 SYSTEM_BUSY).
# docs/benchmarks.md ("A pipelining connection").
#
#   bench/pipe_tput.sh [BUILD_DIR]     # default build/
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
D=$(mktemp -d)
P=$((20000 + RANDOM % 20000))
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
"$B/control/sprocket-namesrv" --listenPort=$P --bindAddress=127.0.0.1 \
	--kvConfigPath="$D/kv.json" --httpPort=0 >"$D/ns.log" 2>&1 &
for _ in $(seq 100); do grep -q " listening on " "$D/ns.log" && break; sleep 0.1; done
"$B/broker/sprocket-broker" --namesrvAddr=127.0.0.1:$P --listenPort=0 \
	--dataplanePort=$((P + 20)) --dataplaneCores=1 --dataplaneCpus=1 --controlCpus=0 \
	--storePathRootDir="$D/st" --httpPort=0 >"$D/bk.log" 2>&1 &
for _ in $(seq 300); do grep -q " ready: " "$D/bk.log" && break; sleep 0.1; done
"$B/cli/sprocket" --namesrv=127.0.0.1:$P topic create PT --queues=1 >/dev/null
RP=$(grep -o "remoting 127.0.0.1:[0-9]*" "$D/bk.log" | head -1 | cut -d: -f2)
python3 "$ROOT/tests/integration/rmt_pipeline.py" "127.0.0.1:$RP" 127.0.0.1 30 \
	'{"topic":"PT","queueId":"0"}' 5
