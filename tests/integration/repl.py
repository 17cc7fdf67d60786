#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Master/slave replication with real processes (docs/replication.md).

Usage: repl.py NAMESRV BROKER SP_XTOOL CASE    (REPL_KEEP=1 keeps the logs and stores)

Cases (each starts its own NameServer, master and slave on 127.0.0.1, udp):
  sync_kill_master  SYNC_MASTER + ASYNC_FLUSH under load from a producer; a group
                    consumes part; SIGKILL the master mid-load. While it is down a
                    fresh group consumes every SEND_OK message from the slave, and
                    the slave refuses a SEND (remoting: SERVICE_NOT_AVAILABLE).
                    The master restarts; the first group continues with nothing
                    skipped; with the slave stopped a SEND gets SLAVE_NOT_AVAILABLE.
  async_slave_kill  ASYNC_MASTER under load; SIGKILL the slave mid-load and restart
                    it; it catches up; once idle every shard of both is byte-identical.
  master_shorter    the master loses the tail of its log (a crash, injected by cutting
                    its store at restart) and takes new writes; the slave, longer and
                    then different, cuts its log to what the master kept, restarts
                    itself, follows, and once idle both are byte-identical.
  sync_lost_tail    as master_shorter, with a SYNC_MASTER on ASYNC_FLUSH: what the slave
                    holds past the master's end may be acknowledged messages, so the
                    slave does not cut it, and the master takes it back from the slave
                    at its start; every SEND_OK message is read from the master.
  sync_flush_lost_tail  SYNC_MASTER + SYNC_FLUSH, REPL_ROUNDS (5) rounds of a producer,
                    kill -9 of the master, its synced tail zeroed and its write-behind
                    buffer wiped (a disk that lied); the master takes the tail back from
                    the slave each time; every SEND_OK message is read from the master,
                    the slave never cuts, and the shards end byte-identical.
  af_packet         the master's dataplane on af_packet in one network namespace, the
                    slave and the producer in another across a veth pair (root; else
                    skip): SYNC_MASTER SEND_OK for every message, byte-identical shards.
  dpdk              master and slave on DPDK net_memif behind a learning switch
                    (tests/dpdk/memif_switch.c), the producer on memif too: the slave's
                    sessions leave through its own device; SYNC_MASTER SEND_OK for every
                    message, byte-identical shards. Skipped when built without DPDK.
  geometry          a slave with another dataplaneCores refuses to follow, naming
                    both values; a master's second registration at another address
                    under the same brokerName and brokerId is refused by the NameServer.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import urllib.request
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rmt_call  # noqa: E402
from ports import free_base  # noqa: E402

NS, BK, XT = sys.argv[1], sys.argv[2], sys.argv[3]
CASE = sys.argv[4]
TMP = tempfile.mkdtemp(prefix="repl-")
RND = random.Random(os.getpid())


BASE = free_base(RND)
NS_PORT = BASE
NSADDR = f"127.0.0.1:{NS_PORT}"
PROCS = []
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def start(name, argv):
    log = open(os.path.join(TMP, name + ".log"), "ab")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    p.name = name
    PROCS.append(p)
    return p


def log_of(name):
    with open(os.path.join(TMP, name + ".log"), "rb") as f:
        return f.read().decode(errors="replace")


def wait_follow(name, count=1):
    """Both shards of @name have a session to the master (@count times in its log)."""
    ok = all(wait_log(name, f"shard {i}: session to master", count=count) for i in (0, 1))
    time.sleep(0.2)  # each session's first REPL request reaches its master core
    return ok


def wait_log(name, needle, timeout=30, count=1):
    end = time.time() + timeout
    while time.time() < end:
        if log_of(name).count(needle) >= count:
            return True
        time.sleep(0.05)
    return False


def namesrv():
    p = start("namesrv", [NS, f"--listenPort={NS_PORT}"])
    if not wait_log("namesrv", " listening on ", timeout=10):
        print(log_of("namesrv"))
        raise SystemExit("the NameServer did not start")
    return p


def broker(name, role, bid, dp_port, extra=(), prefix=()):
    args = list(prefix) + [BK, f"--namesrvAddr={NSADDR}", f"--brokerRole={role}", f"--brokerId={bid}",
            "--listenPort=0", f"--dataplanePort={dp_port}", "--dataplaneCores=2",
            f"--storePathRootDir={TMP}/{name}", "--mapedFileSizeCommitLog=1048576",
            "--mapedFileSizeConsumeQueue=20000", "--storeBufferDir=" + TMP] + list(extra)
    path = os.path.join(TMP, name + ".log")
    before = log_of(name).count(" ready: ") if os.path.exists(path) else 0
    p = start(name, args)
    if not wait_log(name, " ready: ", count=before + 1):
        print(log_of(name))
        raise SystemExit(f"{name} did not start")
    return p


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def xtool(*args, timeout=120):
    r = subprocess.run([XT] + list(args) + [f"--namesrv={NSADDR}"], capture_output=True,
                       text=True, timeout=timeout)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return lines, r.stderr


def produce_bg(topic, count, out):
    f = open(out, "w")
    return subprocess.Popen([XT, "produce", f"--namesrv={NSADDR}", f"--topic={topic}",
                             f"--count={count}", "--keys=k{i}"], stdout=f,
                            stderr=subprocess.DEVNULL)


def read_lines(path):
    with open(path) as f:
        out = []
        for l in f:
            if l.startswith("{"):
                try:
                    out.append(json.loads(l))
                except ValueError:
                    pass  # a line cut by the kill
        return out


def rmt_port(name):
    for line in log_of(name).splitlines():
        if " ready: " in line and "remoting " in line:
            return int(line.split("remoting ")[1].split(",")[0].split(":")[1])
    raise SystemExit("no remoting port for " + name)


def rmt_send(port, topic):
    """SEND_MESSAGE_V2 over RocketMQ remoting; returns (code, remark)."""
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false"}
    code, remark, _ = rmt_call.call(f"127.0.0.1:{port}", 310, ext, b"hello slave")
    return code, remark


def shard_files(name):
    out = {}
    root = os.path.join(TMP, name, "commitlog")
    for shard in sorted(os.listdir(root)):
        for seg in sorted(os.listdir(os.path.join(root, shard))):
            if ".dropped-" in seg:
                continue  # bytes a recovery took out of the log and kept aside
            with open(os.path.join(root, shard, seg), "rb") as f:
                out[(shard, seg)] = f.read()
    return out


def check_sent_ok(r, count):
    """@r: sp_xtool produce's run; every one of @count SENDs got SEND_OK (status 0)."""
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    st = [l.get("status") for l in lines if l.get("ok")]
    check(len(st) == count and set(st) == {0},
          f"SYNC_MASTER SEND_OK for all {count} ({len(st)} ok, statuses {set(st)}) {r.stderr[-300:]}")


def check_identical():
    am, bs = shard_files("master"), shard_files("slave")
    check(sorted(am) == sorted(bs) and all(am[k] == bs.get(k) for k in am),
          "every shard is byte-identical")


def case_sync_kill_master():
    namesrv()
    # the restarted master reads the group's offsets from its own consumerOffset.json: saved
    # every 5 s by default, which the 4 s below could fall between on a slow start
    mx = ["--flushConsumerOffsetInterval=200"]
    m = broker("master", "SYNC_MASTER", 0, BASE + 10, mx)
    s = broker("slave", "SLAVE", 1, BASE + 20)
    check(wait_follow("slave"), "slave follows both shards")
    prod = produce_bg("TS", 200000, os.path.join(TMP, "prod.jsonl"))
    time.sleep(1.0)
    before, _ = xtool("consume", "--topic=TS", "--group=cg", "--from=first", "--count=300",
                      "--timeout-ms=10000")
    time.sleep(4)  # the slave's sync (3 s) carries the group's offsets over
    check(prod.poll() is None, "the producer is still sending at the master's kill")
    stop(m, signal.SIGKILL)
    prod.wait(300)
    sent = read_lines(os.path.join(TMP, "prod.jsonl"))
    acked = {l["msgId"] for l in sent if l.get("ok") and l.get("status") == 0}
    check(len(acked) > 300, f"SEND_OK before the kill ({len(acked)})")
    code, remark = rmt_send(rmt_port("slave"), "TS")
    check(code == 14 and "slave" in remark, f"the slave refuses a SEND: code {code} {remark!r}")
    fresh, err = xtool("consume", "--topic=TS", "--group=fresh", "--from=first",
                       f"--count={len(acked)}", "--timeout-ms=20000")
    got = {l["msgId"] for l in fresh}
    missing = acked - got
    check(not missing, f"a fresh group reads every SEND_OK message from the slave "
                       f"({len(acked)} acked, {len(got)} read, {len(missing)} missing) {err[-200:]}")
    # the master comes back; the first group goes on from where it was
    m = broker("master", "SYNC_MASTER", 0, BASE + 10, mx)
    check(wait_follow("slave", count=2), "the slave follows again")
    rest_n = len(acked) - len({l["msgId"] for l in before})
    after, _ = xtool("consume", "--topic=TS", "--group=cg", f"--count={rest_n}",
                     "--timeout-ms=20000")
    seen = {l["msgId"] for l in before} | {l["msgId"] for l in after}
    skipped = acked - seen
    check(not skipped, f"the group continues with nothing skipped ({len(before)} before, "
                       f"{len(after)} after, {len(skipped)} skipped)")
    # no slave: stored, SLAVE_NOT_AVAILABLE
    stop(s)
    time.sleep(3.5)
    lines, _ = xtool("produce", "--topic=TS", "--count=2")
    check([l.get("status") for l in lines] == [11, 11],
          f"SYNC_MASTER without a slave answers SLAVE_NOT_AVAILABLE: {[l.get('status') for l in lines]}")
    check(stop(m) == 0, "the master stops cleanly")


def slave_metrics(port):
    """A caught-up slave's /metrics: replication lag 0 per shard, and promtool passes."""
    end = time.time() + 20  # a loaded machine's slave may still be catching up: poll
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        lag = [l for l in text.splitlines() if l.startswith("sprocket_replication_lag_")]
        if (len(lag) == 4 and all(l.endswith(" 0") for l in lag)) or time.time() > end:
            break
        time.sleep(0.2)
    check(len(lag) == 4 and all(l.endswith(" 0") for l in lag),
          f"the slave's /metrics: replication lag 0 in bytes and seconds per shard ({lag})")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, f"promtool check metrics passes on the slave ({r.stdout}{r.stderr})")


def case_async_slave_kill():
    namesrv()
    m = broker("master", "ASYNC_MASTER", 0, BASE + 10)
    s = broker("slave", "SLAVE", 1, BASE + 20)
    check(wait_follow("slave"), "slave follows both shards")
    n = 20000
    prod = produce_bg("TA", n, os.path.join(TMP, "prod.jsonl"))
    time.sleep(0.7)
    check(prod.poll() is None, "the producer is still sending at the slave's kill")
    stop(s, signal.SIGKILL)
    time.sleep(0.5)
    s = broker("slave", "SLAVE", 1, BASE + 20,
               extra=[f"--httpPort={BASE + 31}", "--httpBindAddress=127.0.0.1"])
    check(prod.poll() is None, "... and at its restart")
    prod.wait(300)
    sent = read_lines(os.path.join(TMP, "prod.jsonl"))
    ok = sum(1 for l in sent if l.get("ok"))
    check(ok == n, f"every SEND acknowledged ({ok} of {n})")
    time.sleep(2)
    slave_metrics(BASE + 31)
    check(stop(s) == 0, "the slave stops cleanly")
    copied = [l for l in log_of("slave").splitlines() if "followed:" in l]
    check(len(copied) >= 2 and all(" 0 bytes copied" not in l for l in copied[-2:]),
          "the restarted slave caught up: " + "; ".join(l.split("broker: ")[-1] for l in copied[-2:]))
    check(stop(m) == 0, "the master stops cleanly")
    a, b = shard_files("master"), shard_files("slave")
    check(sorted(a) == sorted(b), f"same segments: {sorted(a)} / {sorted(b)}")
    same = all(a[k] == b.get(k) for k in a)
    check(same, "every shard is byte-identical")
    check(sum(len(v.rstrip(b'\0')) for v in a.values()) > n * 100, "the shards hold the load")


def settle_restarts():
    """Each shard that finds the fork restarts the slave once: wait until no more come."""
    for _ in range(10):
        n = log_of("slave").count("restarting: the log is cut")
        time.sleep(3)
        if log_of("slave").count("restarting: the log is cut") == n:
            wait_follow("slave", count=log_of("slave").count(" ready: "))
            return


def ends_of(name):
    """Each shard's end of log, from the broker's exit report."""
    ends = {}
    for line in log_of(name).splitlines():
        if " replication: requests " in line:
            core = int(line.split("core ")[1].split(" ")[0])
            ends[core] = int(line.split(" of ")[1].split(",")[0])
    return ends


def case_master_shorter():
    namesrv()
    m = broker("master", "ASYNC_MASTER", 0, BASE + 10)
    s = broker("slave", "SLAVE", 1, BASE + 20)
    check(wait_follow("slave"), "slave follows both shards")
    lines, _ = xtool("produce", "--topic=TM", "--count=3000")
    check(sum(1 for l in lines if l.get("ok")) == 3000, "3000 sent")
    time.sleep(1)
    check(stop(m) == 0, "the master stops")
    ends = ends_of("master")
    check(len(ends) == 2 and all(v > 0 for v in ends.values()), f"the master's ends {ends}")
    # the injected loss: the master keeps only about half of each shard
    with open(os.path.join(TMP, "master", "truncate"), "w") as f:
        for core, end in sorted(ends.items()):
            f.write(f"{core} {end // 2}\n")
    m = broker("master", "ASYNC_MASTER", 0, BASE + 10)
    check("cutting" in log_of("master"), "the master lost its tail")
    lines, err = xtool("produce", "--topic=TM", "--count=500")
    check(sum(1 for l in lines if l.get("ok")) == 500, "the master takes new writes " + err[-300:])
    check(wait_log("slave", "restarting: the log is cut"), "the slave restarts to cut its log")
    check(wait_log("slave", "bytes past", timeout=30), "... and cuts it: " +
          "; ".join(l.split(": ", 1)[-1] for l in log_of("slave").splitlines() if "cutting" in l)[:300])
    check(wait_log("slave", " ready: ", count=2), "the slave is back")
    check(wait_follow("slave", count=3), "and follows again")
    lines, _ = xtool("produce", "--topic=TM", "--count=500")
    time.sleep(2)
    # Again, with the slave away while the master loses a tail and then writes past
    # the slave's end: only the check of the slave's last record finds the fork.
    check(stop(s) == 0, "the slave stops cleanly")
    check(stop(m) == 0, "the master stops")
    ends = ends_of("master")
    with open(os.path.join(TMP, "master", "truncate"), "w") as f:
        for core, end in sorted(ends.items()):
            f.write(f"{core} {end - 20000}\n")
    m = broker("master", "ASYNC_MASTER", 0, BASE + 10)
    lines, _ = xtool("produce", "--topic=TM", "--count=2000")
    check(sum(1 for l in lines if l.get("ok")) == 2000, "the master writes past the slave's end")
    # Phase 1 may have restarted once per shard: count from here on.
    text = log_of("slave")
    restarts, ready = text.count("restarting: the log is cut"), text.count(" ready: ")
    past = [l for l in text.splitlines() if "runs past what master" in l]
    sessions = text.count("shard 1: session to master")
    s = broker("slave", "SLAVE", 1, BASE + 20)
    check(wait_log("slave", "restarting: the log is cut", count=restarts + 1),
          "the slave restarts again")
    new = [l for l in log_of("slave").splitlines() if "runs past what master" in l][len(past):]
    here = int(new[0].split("kept (")[1].split(" here")[0]) if new else 0
    now = int(new[0].split("now at ")[1].split(")")[0]) if new else 0
    check(now > here, f"... found by its last record, the master being longer ({here} < {now})")
    check(wait_log("slave", " ready: ", count=ready + 2), "the slave is back again")
    check(wait_follow("slave", count=sessions + 2), "and follows")
    settle_restarts()
    time.sleep(2)
    check(stop(s) == 0, "the slave stops cleanly")
    check(stop(m) == 0, "the master stops cleanly")
    a, b = shard_files("master"), shard_files("slave")
    check(sorted(a) == sorted(b) and all(a[k] == b.get(k) for k in a),
          "every shard is byte-identical")


def case_af_packet():
    global NSADDR
    if os.geteuid() != 0:
        print("skip: af_packet needs root")
        raise SystemExit(77)
    pid = os.getpid()
    tag = pid % 200 + 20
    a, b = f"rp{pid}a", f"rp{pid}b"
    ip_a, ip_b = f"10.251.{tag}.1", f"10.251.{tag}.2"
    sh = lambda c: subprocess.run(c, shell=True, check=True)
    sh(f"ip netns add {a} && ip netns add {b}")
    try:
        sh(f"ip link add rv{pid}a netns {a} type veth peer name rv{pid}b netns {b}")
        sh(f"ip -n {a} addr add {ip_a}/24 dev rv{pid}a && ip -n {b} addr add {ip_b}/24 dev rv{pid}b"
           f" && ip -n {a} link set rv{pid}a up && ip -n {b} link set rv{pid}b up"
           f" && ip -n {a} link set lo up && ip -n {b} link set lo up")
        NSADDR = f"{ip_b}:{NS_PORT}"
        start("namesrv", ["ip", "netns", "exec", b, NS, f"--listenPort={NS_PORT}",
                                 "--bindAddress=0.0.0.0"])
        time.sleep(0.3)
        ex_b = ["ip", "netns", "exec", b]
        ex_a = ["ip", "netns", "exec", a]
        m = broker("master", "SYNC_MASTER", 0, BASE + 10,
                   ["--dataplaneBackend=af_packet", f"--dataplaneInterface=rv{pid}b",
                    f"--dataplaneIp={ip_b}", f"--brokerIP1={ip_b}"], prefix=ex_b)
        s = broker("slave", "SLAVE", 1, BASE + 20,
                   [f"--dataplaneIp={ip_a}", f"--brokerIP1={ip_a}"], prefix=ex_a)
        check(wait_follow("slave"), "the slave follows the af_packet master")
        r = subprocess.run(ex_a + [XT, "produce", f"--namesrv={NSADDR}", "--topic=TP",
                                   "--count=2000", f"--local-ip={ip_a}"],
                           capture_output=True, text=True, timeout=120)
        check_sent_ok(r, 2000)
        time.sleep(1)
        check(stop(s) == 0, "the slave stops cleanly")
        check(stop(m) == 0, "the master stops cleanly")
        check_identical()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(f"ip netns del {a}; ip netns del {b}", shell=True)


def case_dpdk():
    sw_bin = os.environ.get("REPL_MEMIF_SWITCH", "")
    if not sw_bin:
        print("skip: built without DPDK (REPL_MEMIF_SWITCH names tests/dpdk/memif_switch.c's binary)")
        raise SystemExit(77)
    if os.geteuid() != 0:
        print("skip: dpdk needs root")
        raise SystemExit(77)
    pid = os.getpid()
    net = "10.250.9."
    run = os.path.join(TMP, "dpdk")
    os.makedirs(run)
    os.environ["RUNTIME_DIRECTORY"] = run
    eal = "--no-pci --no-huge --no-shconf --no-telemetry -m 256 --log-level=*:warning"

    def vdev(i, role, sock, mac):
        return (f"--vdev=net_memif{i},role={role},socket=/rpd-{pid}-{sock},socket-abstract=yes,"
                f"mac=02:5b:00:00:00:{mac:02x}")

    def dpdk_broker(name, role, bid, dp_port, ip_last, mac):
        return broker(name, role, bid, dp_port,
                      ["--dataplaneBackend=dpdk", f"--dataplaneIp={net}{ip_last}",
                       f"--dpdkArgs=-l 1 {eal} --file-prefix=rpd-{name}-{pid} "
                       + vdev(0, "server", name, mac)])
    namesrv()
    m = dpdk_broker("master", "SYNC_MASTER", 0, BASE + 10, 2, 1)
    s = dpdk_broker("slave", "SLAVE", 1, BASE + 20, 3, 2)
    sw = subprocess.Popen([sw_bin] + eal.split() + ["-l", "0", f"--file-prefix=rpd-sw-{pid}",
                                                    vdev(0, "client", "master", 0x11),
                                                    vdev(1, "client", "slave", 0x12),
                                                    vdev(2, "server", "client", 0x13)],
                          stdout=subprocess.PIPE, stderr=open(os.path.join(TMP, "sw.log"), "w"),
                          text=True)
    PROCS.append(sw)
    check(sw.stdout.readline().startswith("ready"), "the switch is up")
    check(wait_follow("slave"), "the slave follows the dpdk master through its own device")
    r = subprocess.run([XT, "produce", f"--namesrv={NSADDR}", "--topic=TD", "--count=2000",
                        "--backend=dpdk", f"--local-ip={net}9",
                        f"--dpdk-args=-l 0 {eal} --file-prefix=rpd-cl-{pid} "
                        + vdev(0, "client", "client", 9)],
                       capture_output=True, text=True, timeout=120)
    check_sent_ok(r, 2000)
    time.sleep(1)
    # the switch first: it polls its memif ports without the brokers' guard against a
    # peer that leaves (docs/dpdk.md)
    sw.send_signal(signal.SIGTERM)
    check(sw.wait(10) == 0, "the switch stops cleanly")
    check(stop(s) == 0, "the slave stops cleanly")
    check(stop(m) == 0, "the master stops cleanly")
    check_identical()


def case_sync_lost_tail():
    namesrv()
    m = broker("master", "SYNC_MASTER", 0, BASE + 10)
    s = broker("slave", "SLAVE", 1, BASE + 20)
    check(wait_follow("slave"), "slave follows both shards")
    lines, _ = xtool("produce", "--topic=TL", "--count=1000")
    acked = {l["msgId"] for l in lines if l.get("ok") and l.get("status") == 0}
    check(len(acked) == 1000, f"1000 SEND_OK (the slave held each): {len(acked)}")
    check(stop(m) == 0, "the master stops")
    with open(os.path.join(TMP, "master", "truncate"), "w") as f:
        for core, end in sorted(ends_of("master").items()):
            f.write(f"{core} {end // 2}\n")
    m = broker("master", "SYNC_MASTER", 0, BASE + 10)
    check("cutting" in log_of("master"), "the master lost its tail")
    check("took back" in log_of("master"),
          "the master took them back from the slave before it said ready: "
          + "; ".join(l.split(": ", 1)[-1] for l in log_of("master").splitlines()
                      if "took back" in l)[:300])
    got, err = xtool("consume", "--topic=TL", "--group=fresh", "--from=first",
                     "--count=1000", "--linger-ms=2000", "--timeout-ms=20000")
    missing = acked - {l["msgId"] for l in got}
    check(not missing, f"every SEND_OK message is read from the master ({len(missing)} missing)")
    check("restarting" not in log_of("slave") and "cutting" not in log_of("slave"),
          "the slave does not cut its log")
    check(wait_follow("slave", count=2), "the slave follows the master again")
    check(stop(s) == 0, "the slave stops cleanly")
    check(stop(m) == 0, "the master stops cleanly")
    check_identical()


def log_end(path):
    """Where the records of one CommitLog segment end (walks TOTALSIZE + MAGIC)."""
    with open(path, "rb") as f:
        data = f.read()
    off = 0
    while off + 8 <= len(data):
        size = int.from_bytes(data[off:off + 4], "big")
        magic = int.from_bytes(data[off + 4:off + 8], "big")
        if size < 8 or off + size > len(data) or magic not in (0xDAA320A7, 0xCBD43194):
            break
        off += size
    return off


def lose_tail(name, bufdir, nbytes):
    """A disk that lost what it had synced: the newest written segment of each shard loses
    its last @nbytes of records (zeroed), and the write-behind buffer is gone."""
    shutil.rmtree(bufdir, ignore_errors=True)
    os.makedirs(bufdir)
    lost = {}
    root = os.path.join(TMP, name, "commitlog")
    for shard in sorted(os.listdir(root)):
        segs = sorted(os.listdir(os.path.join(root, shard)))
        for seg in reversed(segs):
            path = os.path.join(root, shard, seg)
            end = log_end(path)
            if end == 0:
                continue
            cut = max(0, end - nbytes)
            with open(path, "r+b") as f:
                f.seek(cut)
                f.write(b"\0" * (end - cut))
                f.flush()
                os.fsync(f.fileno())
            lost[shard] = end - cut
            break
    return lost


def case_sync_flush_lost_tail():
    """SYNC_MASTER + SYNC_FLUSH: rounds of a producer, kill -9 of the master, its tail zeroed
    and its write-behind buffer gone; every SEND_OK message is read back from the master."""
    namesrv()
    mbuf = os.path.join(TMP, "mbuf")
    os.makedirs(mbuf)
    mx = ["--flushDiskType=SYNC_FLUSH", "--storeBufferDir=" + mbuf]
    m = broker("master", "SYNC_MASTER", 0, BASE + 10, mx)
    s = broker("slave", "SLAVE", 1, BASE + 20)
    check(wait_follow("slave"), "slave follows both shards")
    acked = set()
    rounds = int(os.environ.get("REPL_ROUNDS", "5"))
    for rnd in range(rounds):
        out = os.path.join(TMP, f"prod{rnd}.jsonl")
        prod = produce_bg("TF", 5000, out)  # the rest fail fast after the kill
        end = time.time() + 30
        # SEND_OK needs the slave: after a restart it is back within its session's timeout
        while time.time() < end and open(out).read().count('"status":0,') < 400:
            time.sleep(0.05)
        stop(m, signal.SIGKILL)
        prod.wait(300)
        sent = {l["msgId"] for l in read_lines(out) if l.get("ok") and l.get("status") == 0}
        check(len(sent) >= 400, f"round {rnd}: {len(sent)} SEND_OK before the kill")
        acked |= sent
        lost = lose_tail("master", mbuf, 40000)
        check(lost and all(v > 0 for v in lost.values()),
              f"round {rnd}: the master's disk lost a synced tail ({lost} bytes per shard)")
        before = log_of("master").count("took back ")
        m = broker("master", "SYNC_MASTER", 0, BASE + 10, mx)
        check(log_of("master").count("took back ") > before,
              f"round {rnd}: the master took its tail back from the slave")
        check(wait_follow("slave", count=rnd + 2), f"round {rnd}: the slave follows again")
    got, err = xtool("consume", "--topic=TF", "--group=fresh", "--from=first",
                     f"--count={len(acked)}", "--linger-ms=3000", "--timeout-ms=30000",
                     timeout=300)
    missing = acked - {l["msgId"] for l in got}
    check(not missing, f"every one of {len(acked)} SEND_OK messages is read from the master "
                       f"({len(missing)} missing: {sorted(missing)[:4]}) {err[-200:]}")
    check("restarting" not in log_of("slave") and "cutting" not in log_of("slave"),
          "the slave never cut its log")
    check(stop(s) == 0, "the slave stops cleanly")
    check(stop(m) == 0, "the master stops cleanly")
    check_identical()


def case_geometry():
    namesrv()
    m = broker("master", "ASYNC_MASTER", 0, BASE + 10)
    s = broker("slave", "SLAVE", 1, BASE + 20, ["--dataplaneCores=1"])
    check(wait_log("slave", "refusing to follow"), "a slave with other dataplaneCores refuses")
    line = [l for l in log_of("slave").splitlines() if "refusing to follow" in l][0]
    check("dataplaneCores 1 here, 2 there" in line, "the error names both values: " + line)
    stop(s)
    # the same brokerName and brokerId from another address: refused by the NameServer
    m2 = broker("master2", "ASYNC_MASTER", 0, BASE + 30)
    check(wait_log("master2", "refused the registration"),
          "a second master of broker-a is refused at the NameServer")
    check(wait_log("namesrv", "already registered"), "the NameServer logs the refusal")
    stop(m2)
    stop(m)


def case_delay_sync():
    """A master's delay-level progress follows to its slave (GET_ALL_DELAY_OFFSET, 45)."""
    namesrv()
    short = ("--messageDelayLevel=1s",)
    m = broker("master", "ASYNC_MASTER", 0, BASE + 10, short)
    s = broker("slave", "SLAVE", 1, BASE + 20, short)
    check(wait_follow("slave"), "slave follows both shards")
    port = rmt_port("master")
    ext = {"a": "PG", "b": "TDelay", "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": "DELAY\x011\x02", "j": "0",
           "k": "false"}
    code, remark, _ = rmt_call.call(f"127.0.0.1:{port}", 310, ext, b"later")
    check(code == 0, f"a delayed SEND is taken ({code} {remark})")
    path = os.path.join(TMP, "slave", "config", "delayOffset.json")
    master_text = b""
    deadline = time.time() + 20
    while time.time() < deadline:
        _, _, master_text = rmt_call.call(f"127.0.0.1:{port}", 45, {}, b"")
        if b"{1:1" in master_text and os.path.exists(path):
            with open(path, "rb") as f:
                if f.read() == master_text:
                    break
        time.sleep(0.3)
    check(b"{1:1" in master_text, f"the master delivered and says so: {master_text!r}")
    check(os.path.exists(path) and open(path, "rb").read() == master_text,
          "the slave's delayOffset.json is the master's")
    check(stop(s) == 0, "the slave stops cleanly (and keeps the file)")
    check(open(path, "rb").read() == master_text, "... unchanged by its stop")
    check(stop(m) == 0, "the master stops cleanly")


def main():
    try:
        {"sync_kill_master": case_sync_kill_master,
         "async_slave_kill": case_async_slave_kill,
         "master_shorter": case_master_shorter,
         "sync_lost_tail": case_sync_lost_tail,
         "sync_flush_lost_tail": case_sync_flush_lost_tail,
         "af_packet": case_af_packet,
         "dpdk": case_dpdk,
         "geometry": case_geometry,
         "delay_sync": case_delay_sync}[CASE]()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        if FAILED:
            for name in ("namesrv", "master", "slave", "master2"):
                path = os.path.join(TMP, name + ".log")
                if os.path.exists(path):
                    print(f"---- {name} (tail)")
                    print("\n".join(log_of(name).splitlines()[-25:]))
        if os.environ.get("REPL_KEEP"):
            print("kept " + TMP)
        else:
            shutil.rmtree(TMP, ignore_errors=True)
    print(f"{CASE}: {len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
