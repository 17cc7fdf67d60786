#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A/B of two builds of the broker and sprocket-bench: alternates them N times
# in scripts/run.sh's produce benchmark and prints one line per run (raw and
# produce p50/p99, the broker's mean time, the ratios of issue 6's floors).
# On a noisy VM only pairs run next to each other compare.
#
#   mkdir -p /tmp/a /tmp/b
#   cp build/broker/sprocket-broker build/bench/sprocket-bench /tmp/a/   # before
#   ... change, ninja -C build ...
#   cp build/broker/sprocket-broker build/bench/sprocket-bench /tmp/b/   # after
#   bench/ab.sh /tmp/a /tmp/b 5 dpdk          # DURATION=8 by default
#   MODE=throughput BENCH_ARGS="--batch=64 --depth=8" bench/ab.sh /tmp/a /tmp/b 3 dpdk
#                                             # msg/s and SYSTEM_BUSY answers instead
#   BENCH_ARGS=--remoting bench/ab.sh /tmp/a /tmp/b 5 dpdk   # and the remoting SEND (TCP)
#
# build/'s own two binaries are put back at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/ab.sh DIR_A DIR_B [N] [backend]" >&2; exit 2; }
a=$1 b=$2 n=${3:-3} backend=${4:-dpdk}
keep=$(mktemp -d)
cp build/broker/sprocket-broker build/bench/sprocket-bench "$keep/"
trap 'cp "$keep/sprocket-broker" build/broker/; cp "$keep/sprocket-bench" build/bench/; rm -rf "$keep"' EXIT
for _ in $(seq 1 "$n"); do
	for d in "$a" "$b"; do
		cp "$d/sprocket-broker" build/broker/sprocket-broker
		cp "$d/sprocket-bench" build/bench/sprocket-bench
		# TARGETS=build.ninja: run.sh must not rebuild the binaries just swapped in.
		TARGETS=build.ninja MODE="${MODE:-produce}" JSON=1 DURATION="${DURATION:-8}" \
			scripts/run.sh --backend="$backend" 2>/dev/null | grep '"mode"' |
			python3 -c '
import json, sys
rows = {}
for line in sys.stdin:
    d = json.loads(line)
    rows[d["mode"]] = d
if "ping-raw" not in rows:
    for m, d in rows.items():
        print(sys.argv[1], m, "msgs/s", d["msgs_per_s"], "busy", d["busy"],
              "p50", d["p50_ns"], "p99", d["p99_ns"])
    sys.exit(0)
r, p = rows["ping-raw"], rows["produce"]
print(sys.argv[1], "raw p50", r["p50_ns"], "p99", r["p99_ns"], "| produce p50", p["p50_ns"],
      "p99", p["p99_ns"], "server_mean", p["server_mean_ns"],
      "| p50 ratio %.3f p99 ratio %.2f" % (p["p50_ns"] / r["p50_ns"], p["p99_ns"] / r["p99_ns"]),
      *(["| remoting p50", rows["produce-tcp"]["p50_ns"], "p99", rows["produce-tcp"]["p99_ns"]]
        if "produce-tcp" in rows else []))
' "$d"
	done
done
