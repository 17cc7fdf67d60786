# SPDX-License-Identifier: Apache-2.0
"""A NameServer and a broker on loopback for the Python benchmarks in bench/
(delay_lateness.py, timer_lateness.py, tx_produce.py): free ports, the
processes, their logs in a temp dir, and a stop that waits for them."""
import os
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
NS = os.path.join(BUILD, "control", "sprocket-namesrv")
BK = os.path.join(BUILD, "broker", "sprocket-broker")


def free_port(kind=socket.SOCK_STREAM, n=1):
    """A free port on 127.0.0.1 with n - 1 more after it."""
    while True:
        s = socket.socket(socket.AF_INET, kind)
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p + n < 65535:
            return p


def wait_line(path, needle, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and needle in open(path).read():
            return True
        time.sleep(0.1)
    return False


def start(tmp, broker_args=(), log="bk.log"):
    """Start a NameServer and a broker (udp, 2 cores, 256 MiB segments) in @tmp.
    Return: (namesrv address, [processes], broker process, broker argv)."""
    ns_port = free_port()
    ns = f"127.0.0.1:{ns_port}"
    procs = [subprocess.Popen([NS, f"--listenPort={ns_port}", f"--kvConfigPath={tmp}/kv.json"],
                              stdout=open(f"{tmp}/ns.log", "w"), stderr=subprocess.STDOUT)]
    argv = [BK, f"--namesrvAddr={ns}", "--listenPort=0",
            f"--dataplanePort={free_port(socket.SOCK_DGRAM, 2)}",
            f"--storePathRootDir={tmp}/store", "--mapedFileSizeCommitLog=268435456",
            *broker_args]
    bk = subprocess.Popen(argv, stdout=open(f"{tmp}/{log}", "w"), stderr=subprocess.STDOUT)
    procs.append(bk)
    if not wait_line(f"{tmp}/{log}", " ready: "):
        stop(procs)
        raise SystemExit("the broker did not start:\n" + open(f"{tmp}/{log}").read())
    return ns, procs, bk, argv


def stop(procs):
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
