#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Delivery-time timers: lateness under load, and memory with many pending
(docs/messages.md, docs/benchmarks.md "Delivery times").

Starts a NameServer and a broker (udp, 2 cores, 256 MiB segments) in a temp
dir, then:
  1. loads PENDING plain messages (the baseline: what any message costs the
     broker's memory, the log's and ConsumeQueue's mapped pages), then PENDING
     timers due hours from now (they stay pending all run), noting the
     broker's memory before and after each (VmRSS and its anonymous, file and
     shmem parts, from /proc);
  2. per rate R (due timers per second): loads R * WINDOW timers due evenly
     over WINDOW seconds starting once the load is done, waits, and drains
     the topic: lateness = the delivered copy's store time - its due time
     (TIMER_OUT_MS), ms, p50/p99/p99.9/p99.99/max, and how many came early.
Lateness is against each timer's own due time, fixed before the run: an open
loop, nothing late can hide. The store's timestamps are whole ms.

  bench/timer_lateness.py [--pending N] [--rates 1000,10000,100000] [--window S]
  bench/timer_lateness.py --pending 10000000 --rates '' --restart kill
      memory with 10 M pending, then how long a start takes to rebuild the
      wheels after a SIGKILL (or a clean stop: --restart stop)
"""
import argparse
import os
import json
import shutil
import subprocess
import tempfile
import time

import sp_local
from sp_local import BUILD, stop, wait_line

TB = f"{BUILD}/bench/timer_bench"


def mem(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[k] = int(v.split()[0]) // 1024  # MiB
    return out


def tb(*args, timeout=3600):
    r = subprocess.run([TB, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise SystemExit(f"timer_bench {args[0]}: rc {r.returncode}: {r.stderr[-400:]}")
    return r.returncode, json.loads(lines[-1])


def now_ms():
    return int(time.time() * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", type=int, default=1000000)
    ap.add_argument("--rates", default="1000,10000,100000")
    ap.add_argument("--window", type=int, default=5, help="seconds of due timers per rate")
    ap.add_argument("--restart", choices=("stop", "kill"), help="restart after the load")
    a = ap.parse_args()
    rates = [int(x) for x in a.rates.split(",") if x]
    tmp = tempfile.mkdtemp(prefix="sp-timer-")
    procs = []
    try:
        ns, procs, bk, bk_args = sp_local.start(tmp)
        time.sleep(2)
        idle = mem(bk.pid)
        print(f"# broker idle: {idle} MiB")
        if a.pending:
            before = idle
            for kind, topic, due in (("plain messages", "PlainPending", 0),
                                     ("pending timers", "TimerPending",
                                      now_ms() + 3 * 3600 * 1000)):
                rc, r = tb("load", ns, topic, a.pending, due, 3600 * 1000)
                time.sleep(3)
                held = mem(bk.pid)
                print(f"# {a.pending:,} {kind} loaded in {r['ms'] / 1000:.1f} s "
                      f"({a.pending * 1000 / max(r['ms'], 1):,.0f}/s, {r['failed']} failed); "
                      f"broker: {held} MiB; growth: "
                      + ", ".join(f"{k} {held[k] - before[k]:+}" for k in held))
                before = held
        if a.restart:
            t = time.time()
            if a.restart == "kill":
                bk.kill()
            else:
                bk.terminate()
            bk.wait(300)
            stopped = time.time() - t
            procs.remove(bk)
            t = time.time()
            bk = subprocess.Popen(bk_args, stdout=open(f"{tmp}/bk2.log", "w"),
                                  stderr=subprocess.STDOUT)
            procs.append(bk)
            if not wait_line(f"{tmp}/bk2.log", " ready: ", 600):
                raise SystemExit("the broker did not restart:\n" + open(f"{tmp}/bk2.log").read())
            print(f"# {a.restart}: stopped in {stopped:.1f} s, ready again in "
                  f"{time.time() - t:.1f} s; memory then: {mem(bk.pid)} MiB")
            for line in open(f"{tmp}/bk2.log").read().splitlines():
                if "timers, core" in line or "recover" in line:
                    print("# " + line)
        if rates:
            print(f"# lateness, ms (delivered store time - due time); {a.window} s of due "
                  f"timers per rate, {a.pending:,} others pending")
            print("| due/s | timers | p50 | p99 | p99.9 | p99.99 | max | early |")
            print("|---|---|---|---|---|---|---|---|")
        for rate in rates:
            n = rate * a.window
            topic = f"TimerLate{rate}"
            # due once the load is done: a guess from the pending load's pace, plus room
            lead = 3000 + n * 1000 // 40000
            start = now_ms() + lead
            rc, r = tb("load", ns, topic, n, start, a.window * 1000)
            if now_ms() > start:
                print(f"# {rate}/s: the load took {r['ms']} ms, past the first due time: "
                      "those went at once (plain)")
            while now_ms() < start + a.window * 1000 + 2000:
                time.sleep(0.2)
            rc, d = tb("drain", ns, topic, n, 120000)
            print(f"| {rate:,} | {d['n']:,} | {d.get('p50')} | {d.get('p99')} | {d.get('p999')} "
                  f"| {d.get('p9999')} | {d.get('max')} | {d.get('early')} |")
        print(f"# broker at the end: {mem(bk.pid)} MiB")
    finally:
        stop(procs)
        for f in ("bk.log", "bk2.log"):
            log = open(f"{tmp}/{f}").read() if os.path.exists(f"{tmp}/{f}") else ""
            for line in log.splitlines():
                if "timers:" in line:
                    print("# " + line)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
