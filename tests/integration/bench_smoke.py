#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""sprocket-bench ping runs end to end on a backend and reports both rows.

Usage: bench_smoke.py SPROCKET_BENCH BACKEND. Checks that the JSON lines carry
the fields docs/benchmarks.md promises and that both the raw and the transport
row completed requests; never checks a latency value. Exit 77 (skip) when the
backend cannot run here (no privileges, no DPDK).
"""
import json
import os
import subprocess
import sys

FIELDS = ("mode", "backend", "size", "count", "p50_ns", "p99_ns", "p999_ns", "p9999_ns",
          "max_ns", "msgs_per_s")


def main():
    exe, backend = sys.argv[1], sys.argv[2]
    if backend != "udp" and os.geteuid() != 0:
        print(f"skip: {backend} needs root")
        return 77
    failed = 0
    for size in ("64", "1024", "100000"):
        if backend != "udp" and size == "100000":
            continue
        cmd = [exe, "ping", f"--backend={backend}", f"--size={size}", "--duration=0.5",
               "--warmup=0.1", "--json", "--no-busy"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            if "not built" in p.stderr or "no DPDK" in p.stderr:
                print("skip:", p.stderr.strip())
                return 77
            print(f"FAIL {' '.join(cmd)}: rc {p.returncode}\n{p.stderr}")
            failed += 1
            continue
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        rows = [r for r in rows if "mode" in r]
        modes = {r["mode"]: r for r in rows}
        # A message larger than one datagram has no raw row (it cannot be one datagram).
        for mode in (("ping",) if size == "100000" else ("ping-raw", "ping")):
            r = modes.get(mode)
            if r is None:
                print(f"FAIL size {size}: no {mode} row in {p.stdout!r}")
                failed += 1
                continue
            missing = [f for f in FIELDS if f not in r]
            if missing or r["count"] <= 0 or r["backend"] != backend or str(r["size"]) != size:
                print(f"FAIL size {size} {mode}: {r} (missing {missing})")
                failed += 1
            elif not r["p50_ns"] <= r["p99_ns"] <= r["max_ns"]:
                print(f"FAIL size {size} {mode}: percentiles out of order: {r}")
                failed += 1
            else:
                print(f"ok   {backend} size {size} {mode}: {r['count']} round trips")
    total = 5 if backend == "udp" else 4
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
