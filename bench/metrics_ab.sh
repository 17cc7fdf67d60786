#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# HTTP endpoints off vs on while scraped, the same binaries, alternating runs of
# scripts/run.sh's produce benchmark (docs/observability.md, docs/benchmarks.md).
# "off": httpPort=0. "on": httpPort=$PORT and a scraper fetching /metrics every
# $EVERY seconds (default 0.1: ten times what a 1 s Prometheus scrape asks) for
# the whole run. Prints one line per run and the median over rounds of on/off
# for produce p50 and p99.
#
#   bench/metrics_ab.sh [ROUNDS] [backend]      # defaults: 5 dpdk; DURATION=5 per run
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5} backend=${2:-dpdk}
port=${PORT:-18080} every=${EVERY:-0.1}
work=$(mktemp -d)
scraper=
trap '[ -n "$scraper" ] && kill "$scraper" 2>/dev/null; rm -rf "$work"' EXIT
for i in $(seq 1 "$n"); do
	for m in off on; do
		if [ "$m" = on ]; then
			extra="--httpPort=$port --httpBindAddress=127.0.0.1"
			(
				while :; do
					curl -s -o /dev/null "http://127.0.0.1:$port/metrics" || true
					echo x >>"$work/scrapes"
					sleep "$every"
				done
			) &
			scraper=$!
		else
			extra="--httpPort=0"
		fi
		TARGETS=build.ninja MODE=produce JSON=1 DURATION="${DURATION:-5}" \
			BROKER_ARGS="$extra ${BROKER_ARGS:-}" \
			scripts/run.sh --backend="$backend" 2>/dev/null | grep '"mode"' |
			python3 -c '
import json, sys
rows = {json.loads(l)["mode"]: json.loads(l) for l in sys.stdin}
d = rows.get("produce")
print(sys.argv[1], sys.argv[2], "produce", d["p50_ns"] if d else "-", d["p99_ns"] if d else "-")
' "$i" "$m" | tee -a "$work/rows"
		if [ -n "$scraper" ]; then
			kill "$scraper" 2>/dev/null || true
			wait "$scraper" 2>/dev/null || true
			scraper=
		fi
	done
done
echo "scrapes: $(wc -l <"$work/scrapes" 2>/dev/null || echo 0) (every ${every} s while on)"
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 5 or "-" in f:
        continue
    rows.setdefault(f[0], {})[f[1]] = (int(f[3]), int(f[4]))
for k, name in ((0, "p50"), (1, "p99")):
    r = [v["on"][k] / v["off"][k] for v in rows.values() if "on" in v and "off" in v]
    off = [v["off"][k] for v in rows.values() if "off" in v]
    if r:
        print(f"produce {name}: scraped/off median ratio {statistics.median(r):.3f} over {len(r)} "
              f"rounds (off median {statistics.median(off) / 1000:.2f} us; ratios "
              f"{' '.join(f'{x:.3f}' for x in r)})")
PY
