#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Replication's throughput floor (docs/replication.md, docs/benchmarks.md): a
# slave keeps up with batched produce at >= 80 % of a lone broker's batched
# throughput. scripts/run.sh's batched closed-loop produce (128 B, --batch=64
# --depth=8), N rounds, each of two runs:
#   alone   a lone broker; afterwards (SLAVE=late) a slave starts and copies
#           the whole log while the broker is idle:
#             catchup = slave's copy rate / broker's write rate during the run
#   with    an ASYNC_MASTER with its slave following during the run:
#             tput    = its msg/s / the lone broker's msg/s
#             copied  = what the slave held at the end / the master's log
#             lag     = the slave's largest lag during the run (bytes, ms)
# and the medians over the rounds.
#
#   bench/repl_tput.sh [N] [backend]     N=5, udp; DURATION=20 by default
#   SLAVE_CPU=0 bench/repl_tput.sh       the following slave's threads on CPU 0 (default 1, the
#                                        core's); the late one's: LATE_CPU (default 0,1)
#   SLAVE_STORE=/dev/shm/x ...           the slave's store on another device
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5} backend=${2:-udp}
export SLAVE_CPU=${SLAVE_CPU:-1}
export DURATION=${DURATION:-20}
export BENCH_ARGS=${BENCH_ARGS:---batch=64 --depth=8}
results=$(mktemp)
trap 'rm -f "$results"; [ -z "${SLAVE_STORE:-}" ] || rm -rf "$SLAVE_STORE"' EXIT
ninja -C build >/dev/null
for r in $(seq 1 "$n"); do
	for cfg in alone with; do
		[ -z "${SLAVE_STORE:-}" ] || rm -rf "$SLAVE_STORE"
		if [ "$cfg" = alone ]; then
			# the late slave has the box the broker had: both CPUs
			SLAVE=late SLAVE_CPU=${LATE_CPU:-0,1} MODE=throughput JSON=1 TARGETS=build.ninja \
				scripts/run.sh --backend="$backend" 2>/dev/null
		else
			SLAVE=1 BROKER_ARGS="--brokerRole=ASYNC_MASTER" MODE=throughput JSON=1 \
				TARGETS=build.ninja scripts/run.sh --backend="$backend" 2>/dev/null
		fi | python3 -c '
import json, re, sys
tput, copied, end, lag_b, lag_ms, rate = 0, 0, 0, 0, 0, 0.0
for line in sys.stdin:
    if line.startswith("{") and "\"mode\"" in line:
        tput = json.loads(line)["msgs_per_s"]
    m = re.search(r"followed: \d+ bytes copied, at (\d+) of the master.s (\d+); .*at most (\d+) bytes \((\d+) ms\)", line)
    if m:
        copied += int(m.group(1)); end += int(m.group(2))
        lag_b = max(lag_b, int(m.group(3))); lag_ms = max(lag_ms, int(m.group(4)))
    m = re.search(r"caught up with master .* \(([0-9.]+) MB/s\)", line)
    if m:
        rate = float(m.group(1))
print(sys.argv[1], sys.argv[2], tput, copied, end, lag_b, lag_ms, rate)
' "$r" "$cfg" | tee -a "$results"
	done
done
python3 - "$results" "$DURATION" <<'PY'
import statistics, sys
dur = float(sys.argv[2])
rounds = {}
for line in open(sys.argv[1]):
    r, cfg, tput, copied, end, lag_b, lag_ms, rate = line.split()
    rounds.setdefault(r, {})[cfg] = [int(tput), int(copied), int(end), int(lag_b), int(lag_ms), float(rate)]
cu, tp, cp, lg = [], [], [], []
for r, d in sorted(rounds.items()):
    if len(d) < 2 or d["alone"][0] == 0:
        continue
    a, s = d["alone"], d["with"]
    wrote = a[2] / dur / 1e6  # MB/s the lone broker wrote
    catchup = a[5] / wrote if wrote else 0.0
    ratio = s[0] / a[0]
    copied = s[1] / s[2] if s[2] else 0.0
    cu.append(catchup); tp.append(ratio); cp.append(copied); lg.append(s[4])
    print(f"round {r}: alone {a[0]} msg/s ({wrote:.0f} MB/s), slave catch-up {a[5]:.0f} MB/s: "
          f"catchup {catchup:.2f}; with a slave {s[0]} msg/s: tput {ratio:.2f}, slave copied "
          f"{copied:.1%}, lag at most {s[3] / 1e6:.1f} MB ({s[4]} ms)")
if cu:
    print(f"median catchup {statistics.median(cu):.2f} (floor 0.8), median tput {statistics.median(tp):.2f}, "
          f"median copied {statistics.median(cp):.1%}, median max lag {statistics.median(lg):.0f} ms")
PY
