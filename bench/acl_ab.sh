#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ACL off vs on, the same binaries, alternating runs of scripts/run.sh's produce
# benchmark (dataplane SEND and, with --remoting, RocketMQ SEND_MESSAGE_V2 over TCP).
# "on" starts the broker with aclEnable and a plain_acl.yml whose account may publish
# to the benchmark's topic (a non-admin account with a few entries, so every SEND
# really looks its topic up); sprocket-bench signs in with SPROCKET_ACCESS_KEY/SECRET.
# Prints one line per run and, at the end, the median over rounds of on/off for p50
# and p99 of each path (docs/benchmarks.md, docs/security.md).
#
#   bench/acl_ab.sh [ROUNDS] [backend]      # defaults: 5 dpdk; DURATION=5 per run
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5} backend=${2:-dpdk}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/plain_acl.yml" <<'YML'
accounts:
  - accessKey: benchuser
    secretKey: benchsecret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - OrdersA=PUB
      - OrdersB=PUB|SUB
      - SprocketBench=PUB|SUB
      - TopicZ=SUB
    groupPerms:
      - GroupX=DENY
YML
chmod 600 "$work/plain_acl.yml"
for i in $(seq 1 "$n"); do
	for acl in off on; do
		if [ "$acl" = on ]; then
			extra="--aclEnable=true --aclFile=$work/plain_acl.yml"
			export SPROCKET_ACCESS_KEY=benchuser SPROCKET_SECRET_KEY=benchsecret
		else
			extra=""
			unset SPROCKET_ACCESS_KEY SPROCKET_SECRET_KEY
		fi
		TARGETS=build.ninja MODE=produce JSON=1 DURATION="${DURATION:-5}" \
			BENCH_ARGS="--remoting ${BENCH_ARGS:-}" BROKER_ARGS="$extra ${BROKER_ARGS:-}" \
			scripts/run.sh --backend="$backend" 2>/dev/null | grep '"mode"' |
			python3 -c '
import json, sys
rows = {json.loads(l)["mode"]: json.loads(l) for l in sys.stdin}
out = [sys.argv[1], sys.argv[2]]
for m in ("produce", "produce-tcp"):
    d = rows.get(m)
    out += [m, str(d["p50_ns"]) if d else "-", str(d["p99_ns"]) if d else "-"]
print(" ".join(out))
' "$i" "$acl" | tee -a "$work/rows"
	done
done
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 8 or "-" in f:
        continue
    rows.setdefault(f[0], {})[f[1]] = {"produce": (int(f[3]), int(f[4])),
                                       "produce-tcp": (int(f[6]), int(f[7]))}
for path in ("produce", "produce-tcp"):
    for k, name in ((0, "p50"), (1, "p99")):
        r = [v["on"][path][k] / v["off"][path][k] for v in rows.values() if "on" in v and "off" in v]
        off = [v["off"][path][k] for v in rows.values() if "off" in v]
        if r:
            print(f"{path:12s} {name}: ACL on/off median ratio {statistics.median(r):.3f} "
                  f"over {len(r)} rounds (off median {statistics.median(off) / 1000:.2f} us; "
                  f"ratios {' '.join(f'{x:.3f}' for x in r)})")
PY
