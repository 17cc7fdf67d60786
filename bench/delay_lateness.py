#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Delay levels' lateness (docs/messages.md, docs/benchmarks.md "Delay levels").

Starts a NameServer and a broker (udp, 2 cores, messageDelayLevel "1s") in a
temp dir, then per round:
  plain    sp_xtool produce N messages, consume them: storeTimestamp - bornTimestamp
           (the baseline: a send's own way into the store, ms)
  delayed  the same with DELAY=1: storeTimestamp of the delivered copy - bornTimestamp
           - 1000 ms (how late after its due time a message reached its queue)
and prints p50/p99/p99.9/max of both, in ms (the store's timestamps are ms).
Each message's lateness is measured from its own birth, so the producer's pace
(sync sends, one at a time) does not hide any: the figure is the broker's.

  bench/delay_lateness.py [rounds] [count]      3 rounds of 20,000 by default
"""
import json
import shutil
import subprocess
import sys
import tempfile
import time

from sp_local import BUILD, start, stop

XT = f"{BUILD}/tests/compat/sp_xtool"


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def run(ns, topic, count, props):
    args = [XT, "produce", f"--namesrv={ns}", f"--topic={topic}", f"--count={count}"]
    args += [f"--prop={p}" for p in props]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    ok = sum(1 for l in r.stdout.splitlines() if l.startswith("{") and json.loads(l).get("ok"))
    if ok != count:
        raise SystemExit(f"{topic}: {ok} of {count} sent: {r.stderr[-400:]}")
    return r


def consume(ns, topic, count, timeout_ms):
    r = subprocess.run([XT, "consume", f"--namesrv={ns}", f"--topic={topic}", "--group=GLate",
                        "--from=first", f"--count={count}", f"--timeout-ms={timeout_ms}",
                        "--linger-ms=500"], capture_output=True, text=True,
                       timeout=timeout_ms / 1000 + 60)
    out = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    if len(out) != count:
        raise SystemExit(f"{topic}: consumed {len(out)} of {count}: {r.stderr[-400:]}")
    return out


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    tmp = tempfile.mkdtemp(prefix="sp-delay-")
    procs = []
    try:
        ns, procs, _, _ = start(tmp, ["--messageDelayLevel=1s"])
        print(f"# {count} messages per run, sync sends over udp, messageDelayLevel 1s; ms")
        print("| round | run | sent/s | p50 | p99 | p99.9 | max |")
        print("|---|---|---|---|---|---|---|")
        for r in range(1, rounds + 1):
            for kind in ("plain", "delayed"):
                topic = f"Late{kind}{r}"
                t0 = time.time()
                run(ns, topic, count, ["DELAY=1"] if kind == "delayed" else [])
                rate = count / (time.time() - t0)
                msgs = consume(ns, topic, count, 120000)
                due = 1000 if kind == "delayed" else 0
                late = [m["storeTimestamp"] - m["bornTimestamp"] - due for m in msgs]
                early = [x for x in late if x < 0]
                if kind == "delayed" and early:
                    print(f"# round {r}: {len(early)} delivered before their time (min {min(early)} ms)")
                print(f"| {r} | {kind} | {rate:,.0f} | {pct(late, .5)} | {pct(late, .99)} | "
                      f"{pct(late, .999)} | {max(late)} |")
    finally:
        stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
