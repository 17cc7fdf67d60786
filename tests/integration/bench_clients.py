#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Several producers and consumers in the latency drivers, end to end.

Usage: bench_clients.py SPROCKET_BENCH NAMESRV BROKER PEER_REDIS PEER_NATS

Starts a real sprocket-namesrv and sprocket-broker (udp, 127.0.0.1) and runs
`sprocket-bench e2e --producers=3 --consumers=2`; then the same load through
peer-redis and peer-nats against a real redis-server and nats-server on
127.0.0.1 (installed by scripts/bootstrap.sh). Each run must report its
producers and consumers in the JSON rows, lose nothing (every acknowledged
message consumed), deliver as many messages end to end as were acknowledged,
and print progress lines on stderr. Never checks a latency value.
A peer whose server is not installed is reported and fails the test: the
comparison (bench/compare.sh) depends on it.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PRODUCERS, CONSUMERS = 3, 2


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, secs, what):
    t = time.monotonic() + secs
    while time.monotonic() < t:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def log_has(path, text):
    try:
        with open(path, errors="replace") as f:
            return text in f.read()
    except OSError:
        return False


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def check(name, p):
    """The rows of one driver's run. Return: failures."""
    if p.returncode != 0:
        print(f"FAIL {name}: rc {p.returncode}\n{p.stderr}")
        return 1
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if "mode" in r:
                rows[r["mode"]] = r
    fails = 0
    prod, e2e = rows.get("produce"), rows.get("e2e")
    if prod is None or e2e is None:
        print(f"FAIL {name}: no produce or e2e row in {p.stdout!r}")
        return 1
    if prod["sessions"] != PRODUCERS or e2e["consumers"] != CONSUMERS:
        print(f"FAIL {name}: rows say {prod['sessions']} producers, {e2e['consumers']} "
              f"consumers: {prod} {e2e}")
        fails += 1
    if prod["count"] <= 0 or prod["lost"] != 0 or e2e["lost"] != 0:
        print(f"FAIL {name}: acknowledged {prod['count']}, lost {prod['lost']} sends and "
              f"{e2e['lost']} deliveries")
        fails += 1
    if e2e["count"] != prod["count"]:
        print(f"FAIL {name}: {prod['count']} acknowledged but {e2e['count']} consumed")
        fails += 1
    if "progress" not in p.stderr:
        print(f"FAIL {name}: no progress line on stderr: {p.stderr!r}")
        fails += 1
    if fails == 0:
        print(f"ok   {name}: {prod['count']} messages from {PRODUCERS} producers, all "
              f"consumed by {CONSUMERS} consumers")
    return fails


def run_sprocket(bench, namesrv, broker, tmp):
    ns_port, dp_port = free_port(), free_port(socket.SOCK_DGRAM)
    ns_log, bk_log = os.path.join(tmp, "namesrv.log"), os.path.join(tmp, "broker.log")
    procs = []
    try:
        with open(ns_log, "w") as f:
            procs.append(subprocess.Popen(
                [namesrv, f"--listenPort={ns_port}", "--bindAddress=127.0.0.1",
                 f"--kvConfigPath={tmp}/kv.json"], stdout=f, stderr=subprocess.STDOUT))
        wait_for(lambda: port_open(ns_port), 10, "the NameServer")
        with open(bk_log, "w") as f:
            procs.append(subprocess.Popen(
                [broker, f"--storePathRootDir={tmp}/store", f"--namesrvAddr=127.0.0.1:{ns_port}",
                 f"--dataplanePort={dp_port}", "--listenPort=0", "--dataplaneCores=2",
                 "--mapedFileSizeCommitLog=67108864", "--mapedFileSizeConsumeQueue=600000",
                 "--slotsPerSession=16"], stdout=f, stderr=subprocess.STDOUT))
        wait_for(lambda: log_has(bk_log, "registered "), 30, "the broker's registration")
        # 4 queues (defaultTopicQueueNums) over 2 cores: both consumers pull on both.
        p = subprocess.run(
            [bench, "e2e", f"--namesrv=127.0.0.1:{ns_port}", "--topic=BenchClients",
             "--size=256", "--rate=4000", "--depth=8", f"--producers={PRODUCERS}",
             f"--consumers={CONSUMERS}", "--duration=1.5", "--warmup=0.3", "--rounds=1",
             "--progress=0.3", "--only=raw", "--no-busy", "--json"],
            capture_output=True, text=True, timeout=120)
        return check("sprocket-bench e2e", p)
    finally:
        for pr in reversed(procs):
            stop(pr)


def run_peer(name, driver, server_cmd, port, url_args, tmp):
    if shutil.which(server_cmd[0]) is None:
        print(f"FAIL {name}: {server_cmd[0]} is not installed (scripts/bootstrap.sh installs it)")
        return 1
    with open(os.path.join(tmp, name + ".log"), "w") as f:
        srv = subprocess.Popen(server_cmd, stdout=f, stderr=subprocess.STDOUT, cwd=tmp)
    try:
        wait_for(lambda: port_open(port), 15, name)
        p = subprocess.run(
            [driver, "e2e"] + url_args +
            ["--queues=4", "--size=256", "--rate=4000", "--depth=8", f"--producers={PRODUCERS}",
             f"--consumers={CONSUMERS}", "--duration=1.5", "--warmup=0.3", "--progress=0.3",
             "--json"], capture_output=True, text=True, timeout=120)
        return check(name, p)
    finally:
        stop(srv)


def main():
    bench, namesrv, broker, peer_redis, peer_nats = sys.argv[1:6]
    fails = 0
    with tempfile.TemporaryDirectory(prefix="sp-benchcl-") as tmp:
        fails += run_sprocket(bench, namesrv, broker, tmp)
        port = free_port()
        fails += run_peer("peer-redis", peer_redis,
                          ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                           "--dir", tmp, "--appendonly", "yes", "--save", ""],
                          port, [f"--port={port}"], tmp)
        port = free_port()
        os.makedirs(os.path.join(tmp, "nats"))
        fails += run_peer("peer-nats", peer_nats,
                          ["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd",
                           os.path.join(tmp, "nats")],
                          port, [f"--url=nats://127.0.0.1:{port}"], tmp)
    print(f"{3 - fails if fails < 3 else 0} passed, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
