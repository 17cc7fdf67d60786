#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A broker with many queues: idle queues hold no file, descriptor or mapping.

    many_queues.py NAMESRV BROKER CLI [case]      cases: load (default), memory

load: MANY_TOPICS (20,000) topics of 4 queues in topics.json before the start, 100 more
created over remoting (registered with the NameServer as deltas); descriptors and mappings
stay bounded (not proportional to the queues), no ConsumeQueue directory exists for an idle
queue, a topic of 10,000 queues is consumed by the CLI and by an ali-ons group (one long poll
per queue on one connection, none refused), messages sent to random
topics survive a kill -9 and are consumed after the restart, and then only those topics
have ConsumeQueue files.
memory: a broker whose memory cgroup cannot hold its queues refuses to start, and says
what they need (skipped, and said, where no memory cgroup can be made).

Bounds, never timings: the figures are bench/many_queues.sh's (docs/benchmarks.md).
"""
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

NS_BIN, BK_BIN, CLI = sys.argv[1:4]
CASE = sys.argv[4] if len(sys.argv) > 4 else "load"
TOPICS = int(os.environ.get("MANY_TOPICS", "20000"))
QUEUES = 4
FD_BOUND = 200     # a broker with 1 core holds ~20 descriptors, whatever its queue count
MAPS_BOUND = 2000  # ~280 here: libraries, segments, buffers, ring slabs


def topics_json(root, n, queues, prefix="M"):
    os.makedirs(os.path.join(root, "config"), exist_ok=True)
    t = {}
    for i in range(n):
        name = f"{prefix}{i:06d}"
        t[name] = {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues,
                   "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                   "order": False}
    with open(os.path.join(root, "config", "topics.json"), "w") as f:
        json.dump({"topicConfigTable": t, "dataVersion": {"counter": n, "timestamp": 1}}, f)


def broker_argv(env, ns, root):
    return [BK_BIN, f"--namesrvAddr={ns}", "--listenPort=0", "--brokerName=broker-m",
            f"--dataplanePort={env.base + 20}", "--dataplaneCores=1", "--httpPort=0",
            f"--storePathRootDir={root}", "--mapedFileSizeCommitLog=8388608",
            "--mapedFileSizeConsumeQueue=60000", f"--storeBufferDir={env.tmp}",
            "--registerNameServerPeriod=1000"]


def counts(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    return fds, maps


def cq_topics(root):
    d = os.path.join(root, "consumequeue")
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def cli(ns, *args, stdin=None, timeout=60):
    return subprocess.run([CLI, f"--namesrv={ns}", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def ali_consume(ns, topic, group, n, secs):
    """ali-ons (tests/compat) consumes N messages of TOPIC as GROUP within SECS."""
    js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat",
                      "acl_client.js")
    r = subprocess.run(["node", js, "consume", ns, topic, group, str(n), str(secs)],
                       capture_output=True, text=True, timeout=secs + 120)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"got": -1, "errors": [f"no result: rc {r.returncode} {r.stderr[-300:]}"]}


def start_ns(env):
    ns = f"127.0.0.1:{env.base}"
    env.start("namesrv", [NS_BIN, f"--listenPort={env.base}", f"--kvConfigPath={env.tmp}/kv.json",
                          "--bindAddress=127.0.0.1", "--httpPort=0"])
    if not env.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")
    return ns


def case_load(env):
    ns = start_ns(env)
    root = os.path.join(env.tmp, "store")
    topics_json(root, TOPICS, QUEUES)
    bk = env.start("broker", broker_argv(env, ns, root))
    if not env.wait_log("broker", " ready: ", timeout=300):
        raise SystemExit("the broker did not start")
    env.check(f"{TOPICS} topics loaded" in env.log_of("broker"), f"{TOPICS} topics loaded")
    env.check(f"{TOPICS * QUEUES} queues: about" in env.log_of("broker"),
              "the start says what the queues need")
    fds, maps = counts(bk.pid)
    env.check(fds < FD_BOUND, f"{TOPICS * QUEUES} idle queues: {fds} descriptors (< {FD_BOUND})")
    env.check(maps < MAPS_BOUND, f"... and {maps} mappings (< {MAPS_BOUND})")
    idle = [t for t in cq_topics(root) if t.startswith("M")]
    env.check(not idle, f"no ConsumeQueue directory for an idle queue ({len(idle)} found)")

    # Topics created over remoting while it runs: each registered as a delta.
    whole = env.log_of("namesrv").count(" topics, data version ")
    made = 0
    for i in range(100):
        made += cli(ns, "topic", "create", f"N{i:04d}", f"--queues={QUEUES}").returncode == 0
    env.check(made == 100, f"100 topics created over remoting ({made})")

    # Messages to random topics, then kill -9.
    rnd = random.Random(os.getpid())
    sent = {}
    for name in rnd.sample(range(TOPICS), 30):
        t = f"M{name:06d}"
        r = cli(ns, "produce", t, stdin="".join(f"{t}-{k}\n" for k in range(5)))
        sent[t] = r.stdout.count("SEND_OK")
    env.check(all(v == 5 for v in sent.values()),
              f"5 messages to each of 30 random topics: {sum(sent.values())} SEND_OK")
    r = cli(ns, "produce", "N0042", stdin="x\ny\n")
    env.check(r.stdout.count("SEND_OK") == 2, "2 messages to a topic created over remoting")
    ns_log = env.log_of("namesrv")
    env.check(ns_log.count(" topics, data version ") == whole and
              "registered a delta: " in ns_log,
              "the NameServer learnt the created topics from deltas, not whole sets "
              f"({ns_log.count('registered a delta: ')} deltas, "
              f"{ns_log.count(' topics, data version ') - whole} whole sets)")
    # topics.json was not rewritten for them: each is a line of its journal
    journal = os.path.join(root, "config", "topics.json.journal")
    with open(journal) as f:
        lines = f.read().splitlines()
    with open(os.path.join(root, "config", "topics.json")) as f:
        base = f.read()
    env.check(sum('"topicName":"N' in ln for ln in lines) == 100 and '"N0042"' not in base,
              f"the 100 creations are journal lines ({len(lines)}), topics.json is as at start")
    bk.kill()
    bk.wait()
    n0 = env.log_of("broker").count(" ready: ")
    bk = env.start("broker", broker_argv(env, ns, root))
    if not env.wait_log("broker", " ready: ", timeout=300, count=n0 + 1):
        raise SystemExit("the broker did not start again after kill -9")
    with open(os.path.join(root, "config", "topics.json")) as f:
        base = f.read()
    env.check("topic changes replayed from" in env.log_of("broker") and '"N0099"' in base and
              os.path.getsize(journal) == 0,
              "after kill -9 the journal is replayed and folded into topics.json")
    r = cli(ns, "produce", "N0099", stdin="z\n")
    env.check(r.stdout.count("SEND_OK") == 1, "a topic known only from the journal takes messages")
    fds, maps = counts(bk.pid)
    env.check(fds < FD_BOUND and maps < MAPS_BOUND,
              f"after kill -9: {fds} descriptors, {maps} mappings")
    got = {}
    for t in sent:
        r = cli(ns, "consume", t, "--from=first", "-n", "5", "--wait-ms=3000", "--json")
        got[t] = sum(1 for ln in r.stdout.splitlines() if f'"{t}-' in ln)
    env.check(all(got[t] == 5 for t in sent),
              f"after kill -9 every message is consumed: {sum(got.values())} of 150")
    # A topic of 10,000 queues, consumed by the CLI: one connection, not one per queue.
    r = cli(ns, "topic", "create", "Wide", "--queues=10000")
    env.check(r.returncode == 0, "a topic of 10,000 queues created")
    r = cli(ns, "produce", "Wide", stdin="".join(f"wide-{k}\n" for k in range(20)))
    env.check(r.stdout.count("SEND_OK") == 20, f"20 messages to it ({r.stdout.count('SEND_OK')})")
    r = cli(ns, "consume", "Wide", "--from=first", "-n", "20", "--wait-ms=5000", "--json",
            timeout=300)
    n = sum(1 for ln in r.stdout.splitlines() if '"wide-' in ln)
    env.check(n == 20, f"the CLI consumes all 10,000 queues: {n} of 20 (rc {r.returncode}"
              f"{', ' + r.stderr.strip()[:200] if r.returncode else ''})")
    # ... and an ali-ons group: one long poll per queue, all on one connection
    r = ali_consume(ns, "Wide", "GID_WIDE", 20, 180)
    errs = [e for e in r["errors"] if "maybe this group consumer boot first" not in e]
    env.check(r["got"] >= 20 and not errs,
              f"ali-ons consumes all 10,000 queues: {r['got']} of 20, errors {errs[:2]}")
    written = {t for t in cq_topics(root) if t.startswith("M")}
    env.check(written == set(sent),
              f"ConsumeQueue files only for the {len(sent)} topics written ({len(written)})")
    bk.terminate()
    bk.wait()
    with open(os.path.join(root, "config", "topics.json")) as f:
        base = f.read()
    env.check('"Wide"' in base and os.path.getsize(journal) == 0,
              "a clean stop folds the journal into topics.json")
    log = env.log_of("broker")
    busy = [ln for ln in log.splitlines() if "SYSTEM_BUSY answers by reason" in ln]
    env.check(busy and "conn_inflight 0, addr_inflight 0, long_polls 0" in busy[-1],
              f"no pull was refused for lack of room ({busy[-1:]})")
    held = [ln for ln in log.splitlines() if "long polls held off the cores" in ln]
    env.check(held and not held[-1].split("remoting: ")[1].startswith("0 "),
              f"the remoting thread held the polls the cores had no room for ({held[-1:]})")


def memory_cgroup():
    """A child memory cgroup of ours (v2, else v1) and how to cap it; None where none."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for ln in lines:
        if ln.startswith("0::"):
            base = "/sys/fs/cgroup" + ln[3:]
            limit, procs = "memory.max", "cgroup.procs"
        elif ":memory:" in ln:
            base = "/sys/fs/cgroup/memory" + ln.split(":memory:", 1)[1]
            limit, procs = "memory.limit_in_bytes", "cgroup.procs"
        else:
            continue
        d = os.path.join(base, f"sp-many-{os.getpid()}")
        try:
            os.mkdir(d)
            with open(os.path.join(d, limit), "w") as f:
                f.write(str(512 << 20))
            return d, procs
        except OSError:
            try:
                os.rmdir(d)
            except OSError:
                pass
    return None


def case_memory(env):
    cg = memory_cgroup()
    if cg is None:
        print("ok   skipped: no memory cgroup can be made here (needs root and a writable "
              "cgroup hierarchy)")
        return
    d, procs = cg
    try:
        ns = start_ns(env)
        root = os.path.join(env.tmp, "store")
        # 1,000 topics of 1,024 queues: a small topics.json, ~1 GB of queues, a 512 MB cap.
        topics_json(root, 1000, 1024, prefix="Big")

        def enter():
            with open(os.path.join(d, procs), "w") as f:
                f.write(str(os.getpid()))
        bk = env.start("broker", broker_argv(env, ns, root), preexec_fn=enter)
        try:
            rc = bk.wait(120)
        except subprocess.TimeoutExpired:
            rc = None
        log = env.log_of("broker")
        env.check(rc not in (None, 0), f"the broker refuses to start (exit {rc})")
        env.check("1024000 queues in all need about" in log and "add memory" in log,
                  "it says what the queues need and what to change")
        env.check(" ready: " not in log, "it never said ready")
    finally:
        try:
            os.rmdir(d)
        except OSError:
            pass


env = itest.Env("sp-manyq-")
try:
    {"load": case_load, "memory": case_memory}[CASE](env)
finally:
    sys.exit(env.finish("MANY_QUEUES_KEEP"))
