#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/cluster.sh as a user runs it: the 2-master-2-slave cluster comes up,
prints four brokers, takes messages on both masters, serves them back, copies
them to both slaves, and stops cleanly.

Usage: cluster_smoke.py SOURCE_ROOT BUILD_DIR SP_XTOOL MODE    (sync, async or failover:
`scripts/cluster.sh --failover`, where etcd elects each group's master among its two members)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
import rmt_call  # noqa: E402

root, build, xtool, mode = sys.argv[1:5]
d = tempfile.mkdtemp(prefix="cluster-smoke-")
# up long enough for a loaded machine; the test stops it with SIGTERM once it is done
env = dict(os.environ, BUILD=build, DIR=d, SECONDS_UP="300")
args = ["sync", "--failover"] if mode == "failover" else [mode]
p = subprocess.Popen([os.path.join(root, "scripts/cluster.sh")] + args, env=env,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
out = []
ns = None
failed = []


def create_topic(addr, topic):
    """UPDATE_AND_CREATE_TOPIC (17), as mqadmin updateTopic sends it."""
    ext = {"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
           "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    return rmt_call.call(addr, 17, ext)[0]


def slaves_in_sync(view, timeout=20):
    """With --failover: each group's slave member publishes insync=true in etcd (after a
    start on a loaded machine that can take longer than the 4 s wait)."""
    ctl = next(l.split("=", 1)[1].split()[0] for l in view.splitlines()
               if l.startswith("controllerAddr="))
    end = time.time() + timeout
    while time.time() < end:
        ok = 0
        for g in ("broker-a", "broker-b"):
            r = subprocess.run(["etcdctl", "--endpoints=" + ctl.replace(";", ","),
                                "--command-timeout=2s", "get", "--prefix", "--print-value-only",
                                f"/sprocket/DefaultCluster/{g}/members/"],
                               capture_output=True, text=True, timeout=10,
                               env=dict(os.environ, ETCDCTL_API="3"))
            recs = []
            for line in r.stdout.splitlines():
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
            ok += any(x.get("role") == "slave" and x.get("insync") for x in recs)
        if ok == 2:
            return True
        time.sleep(0.3)
    return False


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failed.append(what)


try:
    for line in p.stdout:
        out.append(line)
        if line.startswith("namesrvAddr="):
            ns = line.split("=", 1)[1].split()[0]
            break
    check(ns is not None, "the cluster came up: " + "".join(out[-8:]))
    view = "".join(out)
    ids = (0, 1) if mode != "failover" else (0,)
    check(all(f"{b}   id {i}" in view for b in ("broker-a", "broker-b") for i in ids) and
          sum(1 for l in view.splitlines() if " id " in l) == 4,
          "four brokers in the cluster view")
    if mode == "failover":
        check("controllerAddr=" in view, "the script prints the etcd endpoints")
    masters = [l.split()[-1] for l in view.splitlines() if " id 0 " in l]
    check([create_topic(a, "CS") for a in masters] == [0, 0], f"topic CS on {masters}")
    time.sleep(4)  # the slaves' sync (3 s) takes it too
    if mode == "failover":
        check(slaves_in_sync(view), "each group's slave says it is in sync (etcd)")
    r = subprocess.run([xtool, "produce", f"--namesrv={ns}", "--topic=CS", "--count=400"],
                       capture_output=True, text=True, timeout=60)
    sent = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    brokers = {l.get("broker") for l in sent if l.get("ok")}
    check(sum(1 for l in sent if l.get("ok")) == 400, "400 sent")
    check(brokers == {"broker-a", "broker-b"}, f"on both masters: {brokers}")
    statuses = {l.get("status") for l in sent if l.get("ok")}
    check(statuses == {0} if mode != "async" else True, f"SEND_OK (slaves in sync): {statuses}")
    r = subprocess.run([xtool, "consume", f"--namesrv={ns}", "--topic=CS", "--group=g",
                        "--from=first", "--count=400", "--timeout-ms=20000"],
                       capture_output=True, text=True, timeout=60)
    got = [l for l in r.stdout.splitlines() if l.startswith("{")]
    check(len(got) == 400, f"400 consumed ({len(got)})")
    p.send_signal(signal.SIGTERM)
    rest, _ = p.communicate(timeout=60)
    out.append(rest)
    check(p.returncode == 0, f"the script ends cleanly (rc {p.returncode})")
    for g in ("broker-a", "broker-b"):
        # with failover either member may be the slave; without, the -s one is
        members = (g + "-s",) if mode != "failover" else (g, g + "-s")
        copied = []
        for b in members:
            log = open(os.path.join(d, b + ".log")).read()
            copied += [l for l in log.splitlines()
                       if "followed:" in l and " 0 bytes copied" not in l]
        check(copied, f"{g}'s slave copied its master's log: " +
              "; ".join(l.split("broker: ")[-1] for l in copied))
finally:
    if p.poll() is None:
        p.terminate()
        p.wait(60)
    if failed:
        print("".join(out)[-3000:])
    shutil.rmtree(d, ignore_errors=True)
print(f"cluster {mode}: {len(failed)} failed")
sys.exit(1 if failed else 0)
