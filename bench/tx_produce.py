#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Transactional produce next to plain produce (docs/benchmarks.md "Transactions").

Starts a NameServer and a broker (udp, 2 cores, 256 MiB segments) in a temp dir and runs
build/bench/tx_bench: ROUNDS x (SECONDS of plain sync sends, SECONDS of sp_tx_send: the half
over the dataplane, a local transaction that commits at once, END_TRANSACTION over the
broker's remoting port), open loop at RATE per second, latency from each send's intended
start; then one closed-loop slice of each for throughput. Prints a table.

  bench/tx_produce.py [RATE] [SECONDS] [ROUNDS]       2000/s, 2 s, 5 rounds by default
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from sp_local import BUILD, start, stop

TX = f"{BUILD}/bench/tx_bench"


def main():
    rate = sys.argv[1] if len(sys.argv) > 1 else "2000"
    secs = sys.argv[2] if len(sys.argv) > 2 else "2"
    rounds = sys.argv[3] if len(sys.argv) > 3 else "5"
    tmp = tempfile.mkdtemp(prefix="sp-tx-")
    procs = []
    try:
        ns, procs, _, _ = start(tmp)
        r = subprocess.run([TX, ns, "TxBench", rate, secs, rounds], capture_output=True,
                           text=True, timeout=900)
        rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        if len(rows) != 2:
            raise SystemExit(f"tx_bench: rc {r.returncode}: {r.stderr[-400:]}")
        print(f"# open loop {rate}/s, {rounds} x {secs} s slices each, alternating; us from the "
              "intended send time; closed loop: one sync sender")
        print("| kind | sent | failed | p50 | p90 | p99 | p99.9 | p99.99 | max | closed loop /s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for d in rows:
            print(f"| {d['kind']} | {d['sent']:,} | {d['failed']} | {d['p50_us']} | {d['p90_us']} | "
                  f"{d['p99_us']} | {d['p999_us']} | {d['p9999_us']} | {d['max_us']} | "
                  f"{d['closed_loop_per_s']:,} |")
        for line in open(f"{tmp}/bk.log"):
            if "transactions" in line and "core" in line:
                print("# " + line.rstrip())
    finally:
        stop(procs)
        for line in open(f"{tmp}/bk.log") if os.path.exists(f"{tmp}/bk.log") else []:
            if "transactions:" in line and "halves" in line:
                print("# " + line.rstrip())
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
