#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Replication's latency floors (docs/replication.md, docs/benchmarks.md): one
# broker alone, an ASYNC_MASTER with a slave and a SYNC_MASTER with a slave,
# alternating in slices of scripts/run.sh's produce benchmark, N rounds. One
# line per slice (raw round trip and produce p50/p99 of that run), then per
# round the two ratios the floors are about:
#   sync_excess = (SYNC p50 - ASYNC p50) / raw p50      floor: <= 1.5
#   async_ratio = ASYNC p50 / standalone p50           floor: <= 1.1
# and their medians over the rounds.
#
#   bench/repl.sh [N] [backend]      N=5, udp; DURATION=5 by default
#   SLAVE_CPU=0 bench/repl.sh        the slave beside the benchmark instead of the core
#   bench/repl.sh 3 dpdk             net_memif, every run behind tests/dpdk/memif_switch.c
#
# On 2 vCPUs the slave shares a CPU with either the broker's core or the
# benchmark (SLAVE_CPU, default the core's: measured best, docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5} backend=${2:-udp}
export SLAVE_CPU=${SLAVE_CPU:-1}
# dpdk: every run through the memif switch the slave needs, the lone broker's too
[ "$backend" != dpdk ] || export MEMIF_SWITCH=1
export DURATION=${DURATION:-5}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
ninja -C build >/dev/null
for r in $(seq 1 "$n"); do
	for cfg in alone ASYNC_MASTER SYNC_MASTER; do
		if [ "$cfg" = alone ]; then
			env -u SLAVE MODE=produce JSON=1 TARGETS=build.ninja \
				scripts/run.sh --backend="$backend" 2>/dev/null
		else
			SLAVE=1 BROKER_ARGS="--brokerRole=$cfg" MODE=produce JSON=1 TARGETS=build.ninja \
				scripts/run.sh --backend="$backend" 2>/dev/null
		fi | grep '"mode"' | python3 -c '
import json, sys
rows = {}
for line in sys.stdin:
    d = json.loads(line)
    rows[d["mode"]] = d
raw, p = rows["ping-raw"], rows["produce"]
print(sys.argv[1], sys.argv[2], raw["p50_ns"] / 1000, p["p50_ns"] / 1000, p["p99_ns"] / 1000)
' "$r" "$cfg" | tee -a "$results"
	done
done
python3 - "$results" <<'PY'
import statistics, sys
rounds = {}
for line in open(sys.argv[1]):
    r, cfg, raw, p50, p99 = line.split()
    rounds.setdefault(r, {})[cfg] = (float(raw), float(p50), float(p99))
ex, ar = [], []
for r, d in sorted(rounds.items()):
    if len(d) < 3:
        continue
    raw = statistics.mean(v[0] for v in d.values())
    e = (d["SYNC_MASTER"][1] - d["ASYNC_MASTER"][1]) / raw
    a = d["ASYNC_MASTER"][1] / d["alone"][1]
    ex.append(e)
    ar.append(a)
    print(f"round {r}: raw {raw:.2f} us, alone {d['alone'][1]:.2f}, async {d['ASYNC_MASTER'][1]:.2f}, "
          f"sync {d['SYNC_MASTER'][1]:.2f} us p50: sync_excess {e:.2f}x raw, async_ratio {a:.2f}")
if ex:
    print(f"median sync_excess {statistics.median(ex):.2f}x raw (floor 1.5), "
          f"median async_ratio {statistics.median(ar):.2f} (floor 1.1)")
PY
