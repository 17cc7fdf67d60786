#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Automatic failover through etcd with real processes (docs/failover.md).

Usage: failover.py NAMESRV BROKER CLI COMPAT_DIR CASE    (FAILOVER_KEEP=1 keeps the logs)

A 3-member etcd cluster (Debian's etcd-server) on loopback, a NameServer, and one broker
group of two members (brokerId 1 and 2, brokerRole SYNC_MASTER, controllerAddr naming the
three etcd members, controllerLeaseSeconds 3).

Cases:
  kills      ali-ons (tests/compat/failover_client.js) sends one message at a time while
             the group's current master is SIGKILLed FAILOVER_KILLS times (20); after each
             kill the other member must take over, and the killed one is started again and
             must rejoin as a slave (cutting what it wrote past the new master) and get in
             sync before the next kill. Meanwhile a probe sends to both members' remoting
             ports every 50 ms: no two members ever take writes in the same epoch window.
             At the end a fresh ali-ons group consumes every key that got SEND_OK. The
             unavailability per kill (last SEND_OK before it to the first after) is
             printed, p50 and max (FAILOVER_RESULTS=FILE appends them as JSON).
  etcd       one etcd member is killed: the master keeps its lease through the others,
             no election happens, sends go on; a forced switch (`sprocket broker failover
             --to`) hands the group over with nothing lost, and --hold stops elections.
  partition  the master (in its own network namespace, a veth pair to the host) is cut
             off from the host (nftables drops every packet to and from it: etcd, the
             NameServer, the other member and the clients outside): it stops taking writes
             when its lease runs out, before the other member is elected; a client inside
             the namespace sees its last write accepted before the new master's first, and
             every later one refused. The partition heals: it rejoins as a slave of the new
             epoch, in sync. Root only.
  partition_link  the same, with the namespace's link going down instead (`ip link set
             down` on its end of the veth): no packet is dropped in silence, every call
             out of the namespace fails at once.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402
import rmt_call  # noqa: E402

NS_BIN, BK_BIN, CLI_BIN, COMPAT, CASE = sys.argv[1:6]
env = itest.Env("failover-")
B = env.base
NSADDR = f"127.0.0.1:{B}"
ETCD = [(B + 1 + i, B + 4 + i) for i in range(3)]  # (client, peer)
ENDPOINTS = ";".join(f"127.0.0.1:{c}" for c, _ in ETCD)
PFX = "/sprocket/DefaultCluster/broker-f/"
TOPIC = "FoTopic"
PROBE_TOPIC = "FoProbe"
LISTEN = {1: B + 10, 2: B + 11}
DP = {1: B + 20, 2: B + 25}
procs = {}


def etcd_start(i, ip="127.0.0.1"):
    c, p = ETCD[i]
    cluster = ",".join(f"e{k}=http://127.0.0.1:{pp}" for k, (_, pp) in enumerate(ETCD))
    urls = f"http://127.0.0.1:{c}" + (f",http://{ip}:{c}" if ip != "127.0.0.1" else "")
    return env.start(f"etcd{i}", ["etcd", "--name", f"e{i}", "--data-dir", f"{env.tmp}/etcd{i}",
                                  "--listen-client-urls", urls,
                                  "--advertise-client-urls", f"http://127.0.0.1:{c}",
                                  "--listen-peer-urls", f"http://127.0.0.1:{p}",
                                  "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
                                  "--initial-cluster", cluster,
                                  "--initial-cluster-state", "new", "--log-level", "warn"])


def etcdctl(*args):
    r = subprocess.run(["etcdctl", f"--endpoints={ENDPOINTS.replace(';', ',')}",
                        "--command-timeout=2s"] + list(args),
                       capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, ETCDCTL_API="3"))
    return r.stdout


def master_rec():
    out = etcdctl("get", PFX + "master", "--print-value-only").strip()
    try:
        return json.loads(out) if out else None
    except json.JSONDecodeError:
        return None


def member_rec(mid):
    out = etcdctl("get", f"{PFX}members/{mid}", "--print-value-only").strip()
    try:
        return json.loads(out) if out else None
    except json.JSONDecodeError:
        return None


def broker_args(mid, extra=()):
    return [BK_BIN, f"--namesrvAddr={NSADDR}", "--brokerName=broker-f", f"--brokerId={mid}",
            "--brokerRole=SYNC_MASTER", f"--controllerAddr={ENDPOINTS}",
            "--controllerLeaseSeconds=3", f"--listenPort={LISTEN[mid]}",
            f"--dataplanePort={DP[mid]}", "--dataplaneCores=1", "--httpPort=0",
            f"--storePathRootDir={env.tmp}/store{mid}", "--mapedFileSizeCommitLog=8388608",
            "--mapedFileSizeConsumeQueue=60000", f"--storeBufferDir={env.tmp}/buf{mid}",
            "--registerNameServerPeriod=1000"] + list(extra)


def start_broker(mid, wrap=(), extra=()):
    os.makedirs(f"{env.tmp}/buf{mid}", exist_ok=True)
    procs[mid] = env.start(f"broker{mid}", list(wrap) + broker_args(mid, extra))
    return procs[mid]


def wait(cond, timeout, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return None


def start_cluster():
    for i in range(3):
        etcd_start(i)
    if not wait(lambda: "is healthy" in subprocess.run(
            ["etcdctl", f"--endpoints={ENDPOINTS.replace(';', ',')}", "endpoint", "health"],
            capture_output=True, text=True).stderr + subprocess.run(
            ["etcdctl", f"--endpoints={ENDPOINTS.replace(';', ',')}", "endpoint", "health"],
            capture_output=True, text=True).stdout, 30, 0.5):
        raise SystemExit("etcd did not start")
    env.start("namesrv", [NS_BIN, f"--listenPort={B}", f"--kvConfigPath={env.tmp}/kv.json",
                          "--bindAddress=127.0.0.1", "--httpPort=0"])
    env.wait_log("namesrv", " listening on ")
    start_broker(1)
    start_broker(2)
    m = wait(master_rec, 30)
    if not env.check(m is not None, f"a master is elected at the start ({m})"):
        raise SystemExit("no master")
    for t in (TOPIC, PROBE_TOPIC):
        ok = wait(lambda: subprocess.run([CLI_BIN, f"--namesrv={NSADDR}", "topic", "create", t,
                                          "--queues=4"], capture_output=True).returncode == 0,
                  30, 0.5)
        env.check(bool(ok), f"topic {t} created on the master")
    other = 3 - m["id"]
    env.check(bool(wait(lambda: (member_rec(other) or {}).get("insync"), 30, 0.3)),
              f"member {other} follows in sync")
    return m


def send_probe(addr, topic=PROBE_TOPIC):
    ext = {"a": "probe_pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0"}
    try:
        code, remark, _ = rmt_call.call(addr, 310, ext, b"probe", timeout=1)
        return code
    except (OSError, ValueError):
        return None


class Probe(threading.Thread):
    """Sends to both members every 50 ms; remembers who took what when."""

    def __init__(self, addrs):
        super().__init__(daemon=True)
        self.addrs = addrs
        self.events = []  # (t, mid, code)
        self.stop = False

    def run(self):
        while not self.stop:
            for mid, addr in self.addrs.items():
                t0 = time.time()  # a write sent before a kill may be answered after it
                c = send_probe(addr)
                self.events.append((t0, mid, c))
            time.sleep(0.05)


STORED = (0, 10, 11, 12)  # SEND_OK, FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT


def msgid_port(mid_hex):
    """The store host's port in an offsetMsgId (ip 4 bytes, port 4 bytes, offset 8)."""
    try:
        return int(mid_hex[8:16], 16)
    except ValueError:
        return -1


def consume_all(okfile, group):
    keys = f"{env.tmp}/{group}.keys"
    with open(okfile) as f, open(keys, "w") as k:
        for line in f:
            k.write(json.loads(line)["k"] + "\n")
    r = subprocess.run(["node", os.path.join(COMPAT, "failover_client.js"), "consume", NSADDR,
                        TOPIC, group, keys, "120"], capture_output=True, text=True, timeout=180)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"got": -1, "nmissing": -1, "errors": [r.stderr[-300:]]}


def start_producer(okfile, stopfile):
    p = subprocess.Popen(["node", os.path.join(COMPAT, "failover_client.js"), "produce",
                          NSADDR, TOPIC, okfile, stopfile],
                         stdout=subprocess.PIPE, text=True)
    env.procs.append(p)  # stopped by env.finish() when a check raises before stop_producer
    return p


def stop_producer(p, stopfile):
    open(stopfile, "w").close()
    out, _ = p.communicate(timeout=30)
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": -1, "failed": -1, "errors": ["no result"]}


def ok_lines(okfile):
    """The producer's SEND_OK records; a last line it is still writing is left for later."""
    with open(okfile) as f:
        return [json.loads(x) for x in f if x.endswith("\n") and x.strip()]


def case_kills():
    kills = int(os.environ.get("FAILOVER_KILLS", "20"))
    m = start_cluster()
    okfile, stopfile = f"{env.tmp}/ok.jsonl", f"{env.tmp}/stop"
    prod = start_producer(okfile, stopfile)
    probe = Probe({mid: f"127.0.0.1:{LISTEN[mid]}" for mid in (1, 2)})
    probe.start()
    env.check(bool(wait(lambda: os.path.exists(okfile) and len(ok_lines(okfile)) >= 20, 60)),
              "ali-ons gets SEND_OK from the first master")
    cycles = []  # (kill time, old id, new id, elected time)
    for k in range(kills):
        m = master_rec()
        if m is None:
            m = wait(master_rec, 20)
        if not env.check(m is not None, f"kill {k + 1}: a master to kill"):
            break
        old = m["id"]
        new = 3 - old
        n0 = len(ok_lines(okfile))
        wait(lambda: len(ok_lines(okfile)) >= n0 + 10, 10)
        t_kill = time.time()
        procs[old].send_signal(signal.SIGKILL)
        procs[old].wait()
        nm = wait(lambda: (lambda r: r if r and r["id"] == new else None)(master_rec()), 30)
        t_elect = time.time()
        if not env.check(nm is not None, f"kill {k + 1}: member {new} took over "
                         f"(epoch {nm and nm['epoch']}, {t_elect - t_kill:.2f} s)"):
            break
        cycles.append((t_kill, old, new, t_elect, nm["epoch"]))
        start_broker(old)
        insync = wait(lambda: (lambda r: r if r and r.get("insync") and
                               r.get("epoch") == nm["epoch"] else None)(member_rec(old)), 60, 0.3)
        if not env.check(insync is not None, f"kill {k + 1}: member {old} rejoined as a slave "
                         "in sync"):
            break
        # SEND_OK from the new master before the next kill
        n1 = len(ok_lines(okfile))
        env.check(bool(wait(lambda: len(ok_lines(okfile)) > n1, 20)),
                  f"kill {k + 1}: ali-ons goes on with the new master")
    time.sleep(1)
    probe.stop = True
    probe.join()
    res = stop_producer(prod, stopfile)
    lines = ok_lines(okfile)
    env.check(res["ok"] == len(lines) and res["ok"] > 0,
              f"ali-ons: {res['ok']} SEND_OK, {res['failed']} failed sends "
              f"({res['errors'][:3]})")
    # unavailability: the old master's last SEND_OK before each kill to the new one's first
    # after it (each SEND_OK's store host is in its offsetMsgId)
    gaps = []
    to_first = []  # the kill to the new master's first SEND_OK
    for (t_kill, old, new, t_elect, ep) in cycles:
        before = [x["t"] for x in lines
                  if x["t"] / 1000 <= t_kill and msgid_port(x["id"]) == LISTEN[old]]
        after = [x["t"] for x in lines
                 if x["t"] / 1000 > t_kill and msgid_port(x["id"]) == LISTEN[new]]
        if before and after:
            gaps.append((min(after) - max(before)) / 1000)
            to_first.append(min(after) / 1000 - t_kill)
    if gaps:
        p50 = statistics.median(gaps)
        print(f"unavailability per failover over {len(gaps)} kills: p50 {p50:.2f} s, "
              f"max {max(gaps):.2f} s, min {min(gaps):.2f} s "
              f"(all: {' '.join(f'{g:.2f}' for g in gaps)}); from the kill to the new master's "
              f"first SEND_OK: p50 {statistics.median(to_first):.2f} s, max {max(to_first):.2f} s")
        if os.environ.get("FAILOVER_RESULTS"):
            with open(os.environ["FAILOVER_RESULTS"], "a") as f:
                f.write(json.dumps({"kills": len(gaps), "p50_s": p50, "max_s": max(gaps),
                                    "gaps_s": gaps, "kill_to_first_s": to_first}) + "\n")
    env.check(len(cycles) == kills, f"{len(cycles)} of {kills} failovers")
    # never two writable masters: after member N took over in epoch E, until the next kill,
    # only N takes writes (the probe writes to both every 50 ms)
    bad = []
    for i, (t_kill, old, new, t_elect, ep) in enumerate(cycles):
        t_next = cycles[i + 1][0] if i + 1 < len(cycles) else float("inf")
        for (t, mid, c) in probe.events:
            if t_kill <= t < t_next and c in STORED and mid != new:
                bad.append((round(t - t_kill, 2), mid, c, i + 1))
    accepted = sum(1 for e in probe.events if e[2] in STORED)
    env.check(not bad and accepted > 0,
              f"the probe's {len(probe.events)} sends ({accepted} taken): no member but the "
              f"current master took one after a kill ({bad[:5]})")
    # ali-ons' SEND_OKs: each from the master of its time (the store host port of its msgId)
    wrong = [x for x in lines if msgid_port(x.get("id", "")) not in LISTEN.values()]
    env.check(not wrong, f"every SEND_OK names a member as its store host ({wrong[:2]})")
    r = consume_all(okfile, "fo_check")
    env.check(r["nmissing"] == 0,
              f"a fresh ali-ons group consumed all {len(lines)} SEND_OK messages "
              f"(got {r['got']} distinct, missing {r['nmissing']}: {r['missing'][:5]})")
    cut = env.log_of("broker1").count("cutting") + env.log_of("broker2").count("cutting")
    print(f"log cuts by rejoining members: {cut}")
    stop_members()


def case_etcd():
    m = start_cluster()
    okfile, stopfile = f"{env.tmp}/ok.jsonl", f"{env.tmp}/stop"
    prod = start_producer(okfile, stopfile)
    env.check(bool(wait(lambda: os.path.exists(okfile) and len(ok_lines(okfile)) >= 20, 60)),
              "ali-ons gets SEND_OK")
    # kill the etcd member the brokers talk to first (the first endpoint), then another
    env.procs[0].send_signal(signal.SIGKILL)
    n0 = len(ok_lines(okfile))
    time.sleep(8)
    m2 = master_rec()
    env.check(m2 is not None and m2["epoch"] == m["epoch"] and m2["id"] == m["id"],
              f"an etcd member killed: same master, same epoch ({m['epoch']} -> "
              f"{m2 and m2['epoch']})")
    n1 = len(ok_lines(okfile))
    env.check(n1 > n0 + 20, f"sends went on meanwhile ({n1 - n0} SEND_OK in 8 s)")
    # an operator's switch to the other member
    other = 3 - m["id"]
    r = subprocess.run([CLI_BIN, f"--namesrv={NSADDR}", "broker", "failover",
                        f"--controller={ENDPOINTS}", "--broker=broker-f", f"--to={other}"],
                       capture_output=True, text=True, timeout=30)
    env.check(r.returncode == 0, f"sprocket broker failover --to={other}: {r.stdout.strip()} "
              f"{r.stderr.strip()}")
    nm = wait(lambda: (lambda x: x if x and x["id"] == other else None)(master_rec()), 20)
    env.check(nm is not None and nm["epoch"] == m["epoch"] + 1,
              f"member {other} is master in epoch {m['epoch'] + 1} ({nm})")
    n2 = len(ok_lines(okfile))
    env.check(bool(wait(lambda: len(ok_lines(okfile)) > n2 + 10, 20)),
              "ali-ons goes on with the new master")
    env.check(bool(wait(lambda: (member_rec(m["id"]) or {}).get("insync"), 60, 0.3)),
              f"member {m['id']} follows it in sync")
    # hold: no election while the operator says so
    r = subprocess.run([CLI_BIN, "broker", "failover", f"--controller={ENDPOINTS}",
                        "--broker=broker-f", "--hold"], capture_output=True, text=True,
                       timeout=30)
    env.check(r.returncode == 0, f"sprocket broker failover --hold ({r.stderr.strip()})")
    procs[other].send_signal(signal.SIGKILL)
    procs[other].wait()
    time.sleep(6)
    env.check(master_rec() is None, "held: the master's death elects nobody")
    st = subprocess.run([CLI_BIN, "broker", "failover", f"--controller={ENDPOINTS}",
                         "--broker=broker-f"], capture_output=True, text=True, timeout=30)
    env.check("held" in st.stdout, f"the status says elections are held:\n{st.stdout}")
    r = subprocess.run([CLI_BIN, "broker", "failover", f"--controller={ENDPOINTS}",
                        "--broker=broker-f", "--release"], capture_output=True, text=True,
                       timeout=30)
    nm = wait(lambda: (lambda x: x if x and x["id"] == m["id"] else None)(master_rec()), 20)
    env.check(r.returncode == 0 and nm is not None,
              f"released: member {m['id']} is elected ({nm})")
    start_broker(other)
    env.check(bool(wait(lambda: (member_rec(other) or {}).get("insync"), 60, 0.3)),
              f"member {other} is back, in sync")
    # a master handing over is fenced while it waits for the target (5 s at most; here a
    # member 9 that never comes): it takes no SEND, and END_TRANSACTION appends nothing
    # either (its commit would be cut when it rejoins: the next master's check-back asks)
    cur = master_rec()
    mid = cur["id"]
    seen = env.log_of(f"broker{mid}").count("handing group")
    etcdctl("put", PFX + "switch", "9")
    env.check(env.wait_log(f"broker{mid}", "handing group", 5, seen + 1),
              f"member {mid} hands over to member 9 (its log says so)")
    addr = f"127.0.0.1:{LISTEN[mid]}"
    try:
        end_tx = rmt_call.call(addr, 37, {"producerGroup": "fo_tx", "tranStateTableOffset": "0",
                                          "commitLogOffset": "0", "commitOrRollback": "8",
                                          "fromTransactionCheck": "false", "msgId": "x",
                                          "transactionId": "x"}, timeout=3)[:2]
    except (OSError, ValueError) as e:
        end_tx = (None, repr(e))
    sent = send_probe(addr)
    env.check(end_tx[0] == 14 and "writable master" in end_tx[1] and sent == 14,
              f"while it waits: END_TRANSACTION answered {end_tx}, a SEND {sent} "
              "(SERVICE_NOT_AVAILABLE)")
    nm2 = wait(lambda: (lambda x: x if x and x["epoch"] > cur["epoch"] else None)(master_rec()),
               30)
    env.check(nm2 is not None, f"member 9 never caught up: the group elected anew ({nm2})")
    res = stop_producer(prod, stopfile)
    lines = ok_lines(okfile)
    r = consume_all(okfile, "fo_check")
    env.check(r["nmissing"] == 0, f"a fresh ali-ons group consumed all {len(lines)} SEND_OK "
              f"messages (missing {r['nmissing']}: {r['missing'][:5]}; {res['failed']} "
              "failed sends)")
    stop_members()


def stop_members():
    """SIGTERM the slave, then the master: each must exit 0 (under ASan that includes no
    report and no leak, promotions' exec included)."""
    m = master_rec()
    order = sorted(procs, key=lambda mid: m is not None and mid == m["id"])
    for mid in order:
        p = procs[mid]
        if p.poll() is not None and p.returncode == -signal.SIGKILL:
            continue
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        env.check(rc == 0, f"member {mid} stops cleanly (rc {rc})")


def sh(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True)


def case_partition(how):
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        sys.exit(77)
    ns = f"fo{os.getpid() % 100000}"
    host_if, ns_if = f"foh{os.getpid() % 10000}", f"fon{os.getpid() % 10000}"
    host_ip, ns_ip = "10.231.0.1", "10.231.0.2"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        sh("ip", "link", "set", ns_if, "netns", ns)
        sh("ip", "addr", "add", f"{host_ip}/24", "dev", host_if)
        sh("ip", "link", "set", host_if, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ns_ip}/24", "dev", ns_if)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        partition_run(ns, ns_if, host_ip, ns_ip, how)
    finally:
        sh("ip", "link", "del", host_if)
        sh("ip", "netns", "del", ns)


def partition_cut(ns, ns_if, host_ip, how):
    """nft: every packet between the namespace and the host dropped (a black hole: the
    master's etcd calls time out); link: the namespace's end of the veth goes down (its
    calls fail at once: no route)."""
    if how == "link":
        r = sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "down")
        if r.returncode != 0:
            raise SystemExit(f"ip link set {ns_if} down: {r.stderr}")
        return
    for rule in (["add", "table", "inet", "fo"],
                 ["add", "chain", "inet", "fo", "in", "{ type filter hook input priority 0 ; }"],
                 ["add", "chain", "inet", "fo", "out", "{ type filter hook output priority 0 ; }"],
                 ["add", "rule", "inet", "fo", "in", "ip", "saddr", host_ip, "drop"],
                 ["add", "rule", "inet", "fo", "out", "ip", "daddr", host_ip, "drop"]):
        r = sh("ip", "netns", "exec", ns, "nft", *rule)
        if r.returncode != 0:
            raise SystemExit(f"nft {rule}: {r.stderr}")


def partition_heal(ns, ns_if, how):
    if how == "link":
        sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")
    else:
        sh("ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "fo")


def partition_run(ns, ns_if, host_ip, ns_ip, how):
    global ENDPOINTS, NSADDR
    for i in range(3):
        etcd_start(i, ip=host_ip)
    ENDPOINTS = ";".join(f"127.0.0.1:{c}" for c, _ in ETCD)
    wait(lambda: "is healthy" in sh("etcdctl", f"--endpoints={ENDPOINTS.replace(';', ',')}",
                                    "endpoint", "health").stderr, 30, 0.5)
    env.start("namesrv", [NS_BIN, f"--listenPort={B}", f"--kvConfigPath={env.tmp}/kv.json",
                          "--bindAddress=0.0.0.0", "--httpPort=0"])
    env.wait_log("namesrv", " listening on ")
    remote = ";".join(f"{host_ip}:{c}" for c, _ in ETCD)
    # member 1 in the namespace (starts first: the master), member 2 on the host
    os.makedirs(f"{env.tmp}/buf1", exist_ok=True)
    a1 = broker_args(1, [f"--brokerIP1={ns_ip}", f"--dataplaneIp={ns_ip}",
                         "--adminAllowedAddrs=127.0.0.1,10.231.0.0/24", f"--httpPort={B + 40}",
                         "--httpBindAddress=0.0.0.0",
                         f"--controllerAddr={remote}", f"--namesrvAddr={host_ip}:{B}"])
    procs[1] = env.start("broker1", ["ip", "netns", "exec", ns] + a1)
    m = wait(master_rec, 30)
    if not env.check(m is not None and m["id"] == 1, f"member 1 (in the namespace) is master ({m})"):
        return
    start_broker(2, extra=[f"--namesrvAddr={host_ip}:{B}", f"--brokerIP1={host_ip}",
                           f"--dataplaneIp={host_ip}"])
    ok = wait(lambda: sh(CLI_BIN, f"--namesrv={host_ip}:{B}", "topic", "create",
                         PROBE_TOPIC, "--queues=4").returncode == 0, 30, 0.5)
    env.check(bool(ok), "topic created")
    env.check(bool(wait(lambda: (member_rec(2) or {}).get("insync"), 30, 0.3)),
              "member 2 follows in sync")
    # a client inside the namespace writes to member 1; one outside to member 2
    inside = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../scripts')!r})
import rmt_call
while True:
    ext = {{"a": "pg", "b": "{PROBE_TOPIC}", "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0"}}
    t0 = time.time()  # when it was sent: a SYNC_MASTER's answer may come seconds later
    try:
        c = rmt_call.call("{ns_ip}:{LISTEN[1]}", 310, ext, b"x", timeout=8)[0]
    except Exception:
        c = None
    print(t0, c, flush=True)
    time.sleep(0.05)
"""], stdout=open(f"{env.tmp}/inside.log", "w"), stderr=subprocess.STDOUT)
    env.procs.append(inside)  # stopped by env.finish() if a step below raises
    probe = Probe({2: f"{host_ip}:{LISTEN[2]}"})
    probe.start()
    time.sleep(2)
    t_cut = time.time()
    partition_cut(ns, ns_if, host_ip, how)
    nm = wait(lambda: (lambda x: x if x and x["id"] == 2 else None)(master_rec()), 30)
    env.check(nm is not None, f"member 2 elected once member 1 is cut off "
              f"({nm and round(time.time() - t_cut, 2)} s)")
    env.check(env.wait_log("broker1", "stepping down", 10),
              "member 1 steps down (its log says so)")
    env.wait_log("broker2", "elected master", 10)

    def line(name, needle):
        return next((ln for ln in env.log_of(name).splitlines() if needle in ln), "")

    # member 1's cores stopped taking writes when its lease window closed (the step-down
    # line says when, in wall ms; the HA thread may log it later, etcd being unreachable);
    # member 2's election is stamped by its log line (UTC, ms)
    down_l, up_l = line("broker1", "stepping down"), line("broker2", "elected master")
    down = int(down_l.split("no write since wall ms ")[1].split(",")[0]) \
        if "no write since wall ms " in down_l else None
    up = None
    if up_l:
        import datetime
        up = int(datetime.datetime.strptime(up_l.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
                 .replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    env.check(down is not None and up is not None and down < up,
              f"member 1 stopped taking writes ({down}) before member 2 was elected ({up}; "
              f"{up - down if down and up else '?'} ms later)")
    n2 = wait(lambda: [e for e in probe.events if e[2] in STORED], 20)
    first_new = n2[0][0] if n2 else None
    # the partition heals: member 1 comes back as a slave of the new epoch, in sync
    partition_heal(ns, ns_if, how)
    r = wait(lambda: (lambda x, m: x if x and m and m["id"] == 2 and
                      x.get("epoch") == m["epoch"] and x.get("role") == "slave" and
                      x.get("insync") else None)(member_rec(1), master_rec()), 60, 0.5)
    env.check(r is not None, f"member 1 rejoins as a slave of member 2 (elected in epoch "
              f"{nm['epoch']}), in sync ({r})")
    time.sleep(2)  # the client inside meets the slave too
    inside.kill()
    probe.stop = True
    probe.join()
    ins = []
    with open(f"{env.tmp}/inside.log") as f:
        for line in f:
            p = line.split()
            if len(p) == 2 and p[1] != "None":
                ins.append((float(p[0]), int(p[1])))
    last_old = max((t for t, c in ins if c in STORED), default=None)
    env.check(last_old is not None and first_new is not None and last_old < first_new,
              f"member 1's last write taken ({last_old and round(last_old - t_cut, 2)} s after "
              f"the cut) before member 2's first ({first_new and round(first_new - t_cut, 2)} s)")
    refused = [c for t, c in ins if last_old and t > last_old and c is not None]
    env.check(bool(refused) and all(c not in STORED for c in refused),
              f"after that member 1 (stepping down, then a slave) refused every write inside "
              f"its namespace "
              f"({len(refused)} refused, codes {sorted(set(refused))})")
    cut = [ln for ln in env.log_of("broker1").splitlines()
           if "store.clog" in ln and " bytes past " in ln and "cutting " in ln]
    print(f"member 1's cut of what it wrote unreplicated: {cut[-1:] or 'none needed'}")
    want = int(cut[-1].split("cutting ")[1].split()[0]) if cut else 0

    def gauge():
        try:
            with urllib.request.urlopen(f"http://{ns_ip}:{B + 40}/metrics", timeout=2) as r:
                for ln in r.read().decode().splitlines():
                    if ln.startswith('sprocket_store_commitlog_cut_bytes{core="0"}'):
                        return int(float(ln.split()[-1]))
        except OSError:
            pass
        return None

    r = wait(lambda: (lambda g: (g,) if g == want else None)(gauge()), 10, 0.3)
    got = r[0] if r else None
    env.check(got == want, f"member 1 counts its cut: sprocket_store_commitlog_cut_bytes "
              f"{gauge() if got is None else got} (its log: {want})")
    stop_members()


try:
    if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
        env.check(False, "etcd and etcdctl installed (scripts/bootstrap.sh installs "
                  "etcd-server and etcd-client)")
    elif CASE == "kills":
        case_kills()
    elif CASE == "etcd":
        case_etcd()
    elif CASE == "partition":
        case_partition("nft")
    elif CASE == "partition_link":
        case_partition("link")
    else:
        raise SystemExit(f"unknown case {CASE}")
finally:
    sys.exit(env.finish("FAILOVER_KEEP"))
