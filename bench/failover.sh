#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Unavailability per failover (docs/failover.md): a group of two members under
# SYNC_MASTER with a 3 s lease and a 3-member etcd on loopback; ali-ons sends one
# message at a time while the current master is SIGKILLed KILLS times (the killed
# member restarts and rejoins before the next kill). Per kill: the old master's last
# SEND_OK to the new master's first (each SEND_OK's store host is in its msgId).
# Prints p50, max and every figure, and checks what the test checks (nothing
# acknowledged lost, never two writable members). The driver is
# tests/integration/failover.py's `kills` case.
#
#   bench/failover.sh [KILLS]        # default 20; BUILD=build
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-20}
BUILD=${BUILD:-build}
scripts/bootstrap.sh >/dev/null
[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" -Dwerror=true
ninja -C "$BUILD" >/dev/null
res=$(mktemp)
trap 'rm -f "$res"' EXIT
FAILOVER_KILLS=$kills FAILOVER_RESULTS=$res python3 tests/integration/failover.py \
	"$BUILD/control/sprocket-namesrv" "$BUILD/broker/sprocket-broker" "$BUILD/cli/sprocket" \
	tests/compat kills | grep -E "^(ok|FAIL)|unavailability|cuts|checks failed"
python3 - "$res" <<'PY'
import json, statistics, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    g = sorted(r["gaps_s"])
    print(f"failover unavailability over {r['kills']} kills (3 s lease): "
          f"p50 {statistics.median(g):.2f} s, p90 {g[int(0.9 * (len(g) - 1))]:.2f} s, "
          f"max {g[-1]:.2f} s, min {g[0]:.2f} s; kill to the new master's first SEND_OK: "
          f"p50 {statistics.median(r['kill_to_first_s']):.2f} s, max {max(r['kill_to_first_s']):.2f} s")
PY
