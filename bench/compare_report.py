#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare_report.py OUT - the table and the plot of bench/compare.sh.

Reads OUT/raw/<workload>.<fsync>.<system>-<transport>.jsonl (the JSON lines
of sprocket-bench, peer-nats and peer-redis, one format: bench/bench_report.c)
and OUT/meta.md; writes OUT/compare.md (markdown table, latency in us) and
OUT/latency.gp (+ OUT/plot/*.dat), a gnuplot script for OUT/latency.png.
"""
import glob
import json
import math
import os
import sys

FSYNC = {
    ("async", "sprocket"): "ASYNC_FLUSH (fdatasync every 1 s)",
    ("async", "nats"): "2.9 default (background sync)",
    ("async", "redis"): "appendfsync everysec",
    ("sync", "sprocket"): "SYNC_FLUSH (fdatasync before ack)",
    ("sync", "redis"): "appendfsync always",
    ("sync", "fdatasync"): "one pwrite + fdatasync",
}
# One colour per system and backend; a floor row is dashed in its backend's colour.
COLORS = {
    "sprocket-udp": "#e69f00",
    "sprocket-af_packet": "#009e73",
    "sprocket-dpdk": "#0072b2",
    "nats-tcp": "#d55e00",
    "redis-tcp": "#000000",
    "fdatasync": "#999999",
}
PCTS = [("p50_ns", 50), ("p90_ns", 90), ("p99_ns", 99), ("p999_ns", 99.9), ("p9999_ns", 99.99)]


def label(system, transport, mode):
    """(system, transport) as the table shows them; None to leave the row out."""
    if mode == "ping-raw":
        return "floor: raw port round trip", transport
    if mode == "fdatasync":
        return "floor: pwrite + fdatasync", "disk"
    if mode == "ping":
        return None
    if system == "sprocket":
        return "sprocket", "dataplane " + transport
    if system == "nats":
        return "NATS JetStream", "TCP (NATS)"
    if system == "redis":
        return "Redis Streams", "TCP (RESP)"
    return system, transport


def us(ns):
    v = ns / 1e3
    if v >= 1000:
        return "%.0f" % v
    if v >= 100:
        return "%.1f" % v
    return "%.2f" % v


def main():
    out = sys.argv[1]
    rows = []  # (workload, fsync, order, dict)
    order_sys = {"floor": 0, "sprocket": 1, "nats": 2, "redis": 3}
    order_bk = {"udp": 0, "af_packet": 1, "dpdk": 2, "tcp": 3}
    for path in sorted(glob.glob(os.path.join(out, "raw", "*.jsonl"))):
        base = os.path.basename(path)[: -len(".jsonl")]
        workload, fsync, sysbk = base.rsplit(".", 2)
        system, transport = sysbk.split("-", 1)
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if "mode" not in r:
                    continue
                lab = label(system, transport, r["mode"])
                if lab is None:
                    continue
                floor = r["mode"] in ("ping-raw", "fdatasync")
                key = (
                    0 if fsync == "async" else 1,
                    order_sys["floor" if floor else system],
                    order_bk.get(transport, 9),
                    0 if r["mode"] in ("produce", "ping-raw", "fdatasync") else 1,
                )
                pol = "-" if r["mode"] == "ping-raw" else FSYNC.get(
                    (fsync, "fdatasync" if r["mode"] == "fdatasync" else system), fsync)
                rows.append((workload, key, dict(r, system=lab[0], transport=lab[1],
                                                 fsync=fsync, policy=pol, sysbk=sysbk)))
    rows.sort(key=lambda x: (x[0], x[1]))

    md = []
    with open(os.path.join(out, "meta.md")) as f:
        md.append(f.read().rstrip())
    md.append("")
    md.append("Latency in microseconds, from the intended send time (open loop) or the send "
              "(closed loop); produce = send -> acknowledged, e2e = send -> received by a "
              "consumer.")
    md.append("")
    md.append("target/s: the open-loop rate asked for (closed: the next message when the "
              "previous is acknowledged); msgs/s: what was achieved. A row whose msgs/s "
              "falls short of its target measured a backlog growing.")
    md.append("")
    md.append("lost: sent and never acknowledged (e2e: acknowledged and never consumed); busy: "
              "refused by the broker with SYSTEM_BUSY (its backpressure: not acknowledged, "
              "not stored, the sender may retry; sprocket only).")
    md.append("")
    md.append("| workload | system | transport | fsync | mode | p50 | p90 | p99 | p99.9 | "
              "p99.99 | max | target/s | msgs/s | lost | busy |")
    md.append("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for workload, _, r in rows:
        rate = r.get("rate", 0)
        md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |" % (
            workload, r["system"], r["transport"], r["policy"], r["mode"],
            us(r["p50_ns"]), us(r["p90_ns"]), us(r["p99_ns"]), us(r["p999_ns"]),
            us(r["p9999_ns"]), us(r["max_ns"]),
            "{:,}".format(int(rate)) if rate else "closed",
            "{:,}".format(int(r["msgs_per_s"])), r["lost"], r.get("busy", 0)))
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    # The plot: one panel per (workload, fsync) and mode (produce | e2e),
    # latency (log) by percentile ("nines": x = -log10(1 - p)), max at x = 5.
    os.makedirs(os.path.join(out, "plot"), exist_ok=True)
    panels = []
    for workload, key, r in rows:
        panel = (workload, r["fsync"])
        if panel not in panels:
            panels.append(panel)
    gp = []
    ncols = 2
    gp.append("set terminal pngcairo size %d,%d font 'sans,9'" % (560 * ncols, 400 * len(panels)))
    gp.append("set output '%s'" % os.path.join(out, "latency.png"))
    gp.append("set multiplot layout %d,%d" % (len(panels), ncols))
    gp.append("set logscale y")
    gp.append("set grid ytics mytics xtics")
    gp.append("set ylabel 'latency (us)'")
    gp.append("set xrange [0.2:5.1]")
    gp.append("set xtics ('p50' %f, 'p90' 1, 'p99' 2, 'p99.9' 3, 'p99.99' 4, 'max' 5)"
              % math.log10(2))
    gp.append("set key outside below center horizontal maxcols 3 font ',8'")
    gp.append("set termoption noenhanced")
    gp.append("set format y '%g'")
    for workload, fsync in panels:
        for mode in ("produce", "e2e"):
            plots = []
            for w, _, r in rows:
                if w != workload or r["fsync"] != fsync:
                    continue
                if r["mode"] not in (mode, "ping-raw", "fdatasync"):
                    continue
                fname = os.path.join(out, "plot", "%s.%s.%s.%s.dat" % (
                    workload, fsync, r["sysbk"], r["mode"]))
                with open(fname, "w") as f:
                    for k, p in PCTS:
                        f.write("%f %f\n" % (-math.log10(1 - p / 100), max(r[k], 1) / 1e3))
                    f.write("5 %f\n" % (max(r["max_ns"], 1) / 1e3))
                title = {"ping-raw": "floor: raw port, " + r["transport"],
                         "fdatasync": "floor: fdatasync"}.get(r["mode"])
                if title is None:
                    title = ("sprocket " + r["transport"].split()[-1]
                             if r["system"] == "sprocket" else r["system"])
                floor = r["mode"] in ("ping-raw", "fdatasync")
                style = "dt 2 lw 1.5" if floor else "lw 2"
                color = COLORS.get("fdatasync" if r["mode"] == "fdatasync" else r["sysbk"], "#777777")
                plots.append("'%s' using 1:2 with linespoints %s lc rgb '%s' title '%s'" % (
                    fname, style, color, title.replace("'", "")))
            gp.append("set title '%s, fsync %s: %s'" % (
                workload, fsync, "send -> ack (produce)" if mode == "produce"
                else "send -> consumed (e2e)"))
            if plots:
                gp.append("plot " + ", \\\n     ".join(plots))
            else:
                gp.append("set multiplot next")
    gp.append("unset multiplot")
    with open(os.path.join(out, "latency.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")


if __name__ == "__main__":
    main()
