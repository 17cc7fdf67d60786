#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The admin plane with real processes: `sprocket` (the CLI) and RocketMQ's admin requests
(docs/cli.md, docs/admin.md).

Usage: admin.py NAMESRV BROKER SPROCKET VECTORS_DIR CASE     (ADMIN_KEEP=1 keeps the logs)

Cases (each starts its own NameServer and brokers on 127.0.0.1, udp):
  cli     broker-a (master and a slave) and broker-b: every CLI command against them -
          cluster list/health, topic create/route/describe/alter/delete, produce, consume
          with a group, lag checked against the group's known progress, offset resets
          (earliest, latest, by time), message queries (key, id, unique key, offset) with
          the groups that consumed them, broker config get/set (path keys refused), write
          protection (wipe and add) seen in routes and SENDs, group delete; then the JSON
          of each admin answer compared with RocketMQ's (tests/vectors/admin).
  running_info  GET_CONSUMER_RUNNING_INFO relayed to a consumer and its answer back (a remoting
          client that answers as Java's does: ali-ons answers no broker request), and
          `sprocket group status`.
  gate    adminAllowedAddrs: a broker and a NameServer that allow no local address refuse
          every admin request with NO_PERMISSION and its reason, and keep serving clients.
"""
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rmt_call  # noqa: E402
from ports import free_base  # noqa: E402

NS, BK, CLI, VEC, CASE = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="admin-")
RND = random.Random(os.getpid())
PROCS = []
FAILED = []


BASE = free_base(RND)
NSADDR = f"127.0.0.1:{BASE}"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)
    return cond


def log_of(name):
    with open(os.path.join(TMP, name + ".log"), "rb") as f:
        return f.read().decode(errors="replace")


def wait_log(name, needle, timeout=30, count=1):
    end = time.time() + timeout
    while time.time() < end:
        if log_of(name).count(needle) >= count:
            return True
        time.sleep(0.05)
    return False


def start(name, argv):
    log = open(os.path.join(TMP, name + ".log"), "ab")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    p.name = name
    PROCS.append(p)
    return p


def namesrv(extra=()):
    start("namesrv", [NS, f"--listenPort={BASE}", f"--kvConfigPath={TMP}/kv.json"] + list(extra))
    if not wait_log("namesrv", " listening on ", timeout=10):
        print(log_of("namesrv"))
        raise SystemExit("the NameServer did not start")


def broker(name, bname, role, bid, dp_port, extra=()):
    args = [BK, f"--namesrvAddr={NSADDR}", f"--brokerName={bname}", f"--brokerRole={role}",
            f"--brokerId={bid}", "--listenPort=0", f"--dataplanePort={dp_port}",
            "--dataplaneCores=2", f"--storePathRootDir={TMP}/{name}",
            "--mapedFileSizeCommitLog=1048576", "--mapedFileSizeConsumeQueue=20000",
            "--storeBufferDir=" + TMP] + list(extra)
    p = start(name, args)
    if not wait_log(name, " ready: "):
        print(log_of(name))
        raise SystemExit(f"{name} did not start")
    return p


def rmt_port(name):
    for line in log_of(name).splitlines():
        if "remoting (RocketMQ clients) listening on" in line:
            return int(line.rsplit(":", 1)[1].split()[0])
    raise SystemExit(f"{name}: no remoting port in its log")


def cli(*args, stdin=None, timeout=60):
    """Runs `sprocket --json ARGS`: (rc, parsed JSON lines, stderr)."""
    r = subprocess.run([CLI, f"--namesrv={NSADDR}", "--json"] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=timeout)
    out = []
    for line in r.stdout.splitlines():
        if line.startswith("{") or line.startswith("["):
            out.append(json.loads(line))
    return r.returncode, out, r.stderr


def cli_text(*args, stdin=None):
    r = subprocess.run([CLI, f"--namesrv={NSADDR}"] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def wait_until(fn, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    return fn()


# ---- fastjson shapes ----

def fastjson_to_json(s):
    """Quotes fastjson's object and number map keys (the CLI does the same in C)."""
    out, i, stack = [], 0, []  # stack entries: [is_object, expecting_key]
    while i < len(s):
        ch = s[i]
        if ch == '"':
            j = i + 1
            while s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i:j + 1])
            i = j + 1
            continue
        if stack and stack[-1][0] and stack[-1][1] and (ch == "{" or ch == "-" or ch.isdigit()):
            j, depth = i, 0
            if ch == "{":
                while True:
                    if s[j] == '"':
                        j += 1
                        while s[j] != '"':
                            j += 2 if s[j] == "\\" else 1
                    elif s[j] == "{":
                        depth += 1
                    elif s[j] == "}":
                        depth -= 1
                        if depth == 0:
                            j += 1
                            break
                    j += 1
            else:
                while s[j] != ":":
                    j += 1
            out.append(json.dumps(s[i:j]))
            stack[-1][1] = False
            i = j
            continue
        if ch in "{[":
            stack.append([ch == "{", ch == "{"])
        elif ch in "}]":
            stack.pop()
        elif ch == ":" and stack and stack[-1][0]:
            stack[-1][1] = False
        elif ch == "," and stack and stack[-1][0]:
            stack[-1][1] = True
        out.append(ch)
        i += 1
    return json.loads("".join(out), object_pairs_hook=lambda kv: kv)


# sprocket's additions to RocketMQ's bodies (docs/admin.md): clients that do not know them skip them
EXTENSIONS = {"dataplaneAddrs", "sprocketVersion", "dataplaneCores", "brokerRole",
              "brokerPermission"}
MAPS = {"offsetTable", "table", "subscriptionTable", "brokerAddrTable", "clusterAddrTable",
        "brokerAddrs", "topicConfigTable", "subscriptionGroupTable"}


def shape(v, key=None):
    """The skeleton of a parsed body: bean fields in order; a map's first entry only."""
    if isinstance(v, list) and (not v or isinstance(v[0], tuple)):
        if key in MAPS:
            if not v:
                return ("map", None, None)
            k, val = v[0]
            kshape = shape(fastjson_to_json(k)) if k.startswith("{") else "key"
            return ("map", kshape, shape(val))
        return ("bean", tuple((k, shape(val, k)) for k, val in v if k not in EXTENSIONS))
    if isinstance(v, list):
        return ("list", shape(v[0]) if v else None)
    return type(v).__name__


def same_shape(a, b):
    """Equal, where an empty map or list on either side matches any."""
    if a == b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        if a[0] in ("map", "list"):
            return None in (a[1], b[1]) or all(same_shape(x, y) for x, y in zip(a[1:], b[1:]))
        if a[0] == "bean":
            return [k for k, _ in a[1]] == [k for k, _ in b[1]] and all(
                same_shape(x, y) for (_, x), (_, y) in zip(a[1], b[1]))
    return {a, b} <= {"int", "float"} if isinstance(a, str) and isinstance(b, str) else False


def fixture(name):
    with open(os.path.join(VEC, name + ".json")) as f:
        return fastjson_to_json(f.read())


def check_shape(what, fixture_name, body):
    try:
        got = fastjson_to_json(body.decode())
    except (ValueError, IndexError) as e:
        return check(False, f"{what}: the body does not parse ({e}): {body[:200]!r}")
    want = fixture(fixture_name)
    return check(same_shape(shape(want), shape(got)),
                 f"{what}: the same JSON shape as RocketMQ's ({fixture_name}.json)"
                 + ("" if same_shape(shape(want), shape(got)) else
                    f"\n     want {shape(want)}\n     got  {shape(got)}"))


# ---- cases ----

def case_cli():
    namesrv()
    fast = ["--statsSampleMillis=1000"]  # statsAll's "minute" is a second here
    broker("a", "broker-a", "ASYNC_MASTER", 0, BASE + 10, fast)
    broker("as", "broker-a", "SLAVE", 1, BASE + 20, fast)
    broker("b", "broker-b", "ASYNC_MASTER", 0, BASE + 30, fast)
    check(all(wait_log("as", f"shard {i}: session to master") for i in (0, 1)),
          "the slave of broker-a follows")
    addr_a, addr_b = f"127.0.0.1:{rmt_port('a')}", f"127.0.0.1:{rmt_port('b')}"

    rc, out, err = cli("cluster", "list")
    rows = out[0] if out else []
    check(rc == 0 and len(rows) == 3 and all(r["runtime"]["brokerVersionDesc"] for r in rows),
          f"cluster list: 3 broker addresses with their runtime info (rc {rc}) {err}")
    check(sorted((r["brokerName"], r["brokerId"]) for r in rows)
          == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)], "... broker-a 0/1, broker-b 0")
    rc, out, _ = cli("cluster", "health")
    check(rc == 0 and out and out[0]["healthy"], "cluster health: healthy, rc 0")

    rc, _, err = cli("topic", "create", "TA", "--queues=4")
    check(rc == 0, f"topic create TA on every master (rc {rc}) {err}")
    route = wait_until(lambda: (lambda r: r[1][0] if r[0] == 0 and r[1] and len(
        r[1][0].get("queueDatas", [])) == 2 else None)(cli("topic", "route", "TA")))
    check(route is not None, "topic route TA: queues on broker-a and broker-b")
    rc, _, err = cli("topic", "create", "TBW102")
    check(rc == 1 and "conflict with system topic" in err,
          f"topic create TBW102 is refused (a system topic): rc {rc} {err.strip()}")

    first = [f"m{i}" for i in range(20)]
    rc, sent1, err = cli("produce", "TA", "--key=kA", "--tag=tA", stdin="\n".join(first) + "\n")
    time.sleep(0.05)
    t_mid = int(time.time() * 1000)
    time.sleep(0.05)
    second = [f"n{i}" for i in range(20)]
    rc2, sent2, err2 = cli("produce", "TA", "--property=color=blue", stdin="\n".join(second) + "\n")
    sent = sent1 + sent2
    check(rc == 0 and rc2 == 0 and len(sent) == 40 and all(s["status"] == "SEND_OK" for s in sent),
          f"produce: 40 lines, 40 SEND_OK (rc {rc}/{rc2}) {err}{err2}")
    check({s["brokerName"] for s in sent} == {"broker-a", "broker-b"},
          "... spread over both masters")
    rc, out, _ = cli("topic", "describe", "TA")
    qs = out[0] if out else []
    check(rc == 0 and len(qs) == 8 and sum(q["maxOffset"] - q["minOffset"] for q in qs) == 40,
          f"topic describe: 8 queues holding 40 messages ({len(qs)} queues)")

    rc, got, err = cli("consume", "TA", "--group=G1", "--from=first", "-n", "25")
    check(rc == 0 and len(got) == 25, f"consume --group=G1 -n 25: 25 messages (rc {rc}) {err}")
    rc, out, err = cli("group", "describe", "G1")
    d = out[0] if out else {}
    check(rc == 0 and d.get("lag") == 15 and sum(q["consumerOffset"] for q in d["queues"]) == 25,
          f"group describe G1: lag 15, 25 consumed (lag {d.get('lag')}) {err}")
    check(all(q["lag"] == q["brokerOffset"] - q["consumerOffset"] for q in d.get("queues", [])),
          "... per queue, lag = broker offset - consumer offset")
    rc, out, _ = cli("group", "list")
    check(rc == 0 and out and "G1" in out[0], f"group list has G1: {out}")
    time.sleep(2.5)  # two samples of the counters
    puts = gets = 0
    for addr, name in ((addr_a, "broker-a"), (addr_b, "broker-b")):
        here = sum(q["maxOffset"] for q in qs if q["brokerName"] == name)
        code, remark, body = rmt_call.call(addr, 315, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "TA"})
        day = json.loads(body)["statsDay"] if code == 0 else {}
        check(code == 0 and day.get("sum") == here,
              f"VIEW_BROKER_STATS_DATA TOPIC_PUT_NUMS TA on {name}: {day.get('sum')} of {here} {remark}")
        puts += day.get("sum", 0)
        code, remark, body = rmt_call.call(addr, 315, {"statsName": "GROUP_GET_NUMS", "statsKey": "TA@G1"})
        gets += json.loads(body)["statsDay"]["sum"] if code == 0 else 0
    check_shape("VIEW_BROKER_STATS_DATA", "view_broker_stats_data", body)
    check(puts == 40 and gets == 25, f"... 40 put, 25 got by G1 ({puts}, {gets})")
    rc, out, err = cli("cluster", "stats", "--topic=TA")
    row = next((r for r in (out[0] if out else []) if r.get("group") == "G1"), {})
    check(rc == 0 and row.get("inMsg24Hour") == 40 and row.get("outMsg24Hour") == 25
          and row.get("lag") == 15, f"cluster stats (statsAll): TA/G1 in 40, out 25, lag 15 ({row}) {err}")
    code, remark, _ = rmt_call.call(addr_a, 315, {"statsName": "TOPIC_PUT_SIZE", "statsKey": "TA"})
    check(code == 1 and "not exist" in remark, f"... an item not kept: {code} {remark}")

    rc, out, err = cli("group", "reset", "G1", "--topic=TA", "--to-earliest")
    check(rc == 0 and len(out) == 8 and all(o["offset"] == 0 for o in out),
          f"group reset --to-earliest: 8 queues to 0 (rc {rc}) {err}")
    lag = lambda: (lambda r: r[1][0]["lag"] if r[0] == 0 and r[1] else None)(cli("group", "describe", "G1"))
    check(lag() == 40, f"... lag 40 ({lag()})")
    rc, out, err = cli("group", "reset", "G1", "--topic=TA", f"--to-time={t_mid}")
    check(rc == 0 and lag() == 20, f"group reset --to-time between the batches: lag 20 ({lag()}) {err}")
    rc, out, err = cli("group", "reset", "G1", "--topic=TA", "--to-latest")
    check(rc == 0 and lag() == 0, f"group reset --to-latest: lag 0 ({lag()}) {err}")

    one = sent2[3]
    rc, out, err = cli("message", "query", f"--id={one['msgId']}")
    check(rc == 0 and len(out) == 1 and out[0]["body"] == "n3"
          and out[0]["properties"].get("color") == "blue",
          f"message query --id: the body and a user property (rc {rc}) {err}")
    check(out and out[0].get("consumedBy") == [{"group": "G1", "consumed": True}],
          f"... consumed by G1: {out[0].get('consumedBy') if out else None}")
    rc, out, err = cli("message", "query", "--topic=TA", f"--unique-key={one['uniqKey']}")
    check(rc == 0 and [m["body"] for m in out] == ["n3"], f"message query --unique-key (rc {rc}) {err}")
    rc, out, err = cli("message", "query", "--topic=TA", "--key=kA")
    check(rc == 0 and sorted(m["body"] for m in out) == sorted(first),
          f"message query --key=kA: the 20 messages sent with that key ({len(out)}) {err}")
    rc, out, err = cli("message", "query", "--topic=TA", f"--broker={one['brokerName']}",
                       f"--queue={one['queueId']}", f"--offset={one['queueOffset']}")
    check(rc == 0 and [m["body"] for m in out] == ["n3"], f"message query --offset (rc {rc}) {err}")
    rc, _, err = cli("message", "query", "--topic=TA", "--key=nothing-has-this")
    check(rc == 1 and "no message found" in err, f"message query of nothing: rc 1 ({err.strip()})")

    rc, out, _ = cli("broker", "config", "get", "broker-a")
    check(rc == 0 and len(out) == 2 and all(o.get("brokerPermission") == "6" for o in out),
          "broker config get broker-a: master and slave, brokerPermission 6")
    for kv in ("storePathRootDir=/tmp/x", "namesrvAddr=10.0.0.1:9876", "listenPort=1",
               "brokerIP1=10.0.0.1"):
        rc, _, err = cli("broker", "config", "set", addr_a, kv)
        check(rc == 1 and "cannot be changed while the broker runs" in err,
              f"broker config set {kv}: refused by name ({err.strip()[:90]})")
    rc, _, err = cli("broker", "config", "set", addr_a, "logLevel=debug")
    check(rc == 0, f"broker config set logLevel=debug (rc {rc}) {err}")
    code, remark, body = rmt_call.call(addr_a, 26)
    check(code == 0 and b"logLevel=debug\n" in body, "... GET_BROKER_CONFIG shows it")

    rc, _, err = cli("broker", "perm", "wipe", "broker-b")
    perm_b = lambda: next((q["perm"] for q in cli("topic", "route", "TA")[1][0]["queueDatas"]
                           if q["brokerName"] == "broker-b"), None)
    check(rc == 0 and wait_until(lambda: perm_b() == 4), f"broker perm wipe broker-b: route perm 4 (rc {rc}) {err}")
    rc, out, err = cli("produce", "TA", stdin="w1\nw2\nw3\nw4\n")
    check(rc == 0 and {s["brokerName"] for s in out} == {"broker-a"},
          f"... SENDs go to broker-a only ({[s['brokerName'] for s in out]})")
    code, remark, _ = rmt_call.call(addr_b, 310, {"a": "pg", "b": "TA", "c": "TBW102", "d": "4",
                                                  "e": "0", "f": "0", "g": "0", "h": "0",
                                                  "i": "", "j": "0", "k": "false"}, b"x")
    check(code == 16, f"... broker-b refuses a SEND: {code} {remark}")
    rc, _, err = cli("broker", "perm", "add", "broker-b")
    check(rc == 0 and wait_until(lambda: perm_b() == 6), f"broker perm add broker-b: route perm 6 again {err}")

    # subscription groups: consumeEnable and retryMaxTimes applied; slaves follow; persisted
    rc, out, err = cli("group", "update", "G2", "--consume=false", "--retry-max=0")
    check(rc == 0 and len(out) == 2 and all(o["consumeEnable"] is False and o["retryMaxTimes"] == 0
                                            for o in out),
          f"group update G2 --consume=false --retry-max=0 on both masters (rc {rc}) {err}")
    rc, got, err = cli("consume", "TA", "--group=G2", "--from=first", "-n", "1")
    check(rc == 1 and "NO_PERMISSION" in err and not got,
          f"... G2 reads nothing: rc {rc} ({err.strip()[:80]})")
    code, _, body = rmt_call.call(addr_a, 201)
    check_shape("GET_ALL_SUBSCRIPTIONGROUP_CONFIG", "get_all_subscriptiongroup_config", body)
    slave_addr = f"127.0.0.1:{rmt_port('as')}"
    check(wait_until(lambda: b'"G2":{' in rmt_call.call(slave_addr, 201)[2] and
                     b'"consumeEnable":false' in rmt_call.call(slave_addr, 201)[2], 15),
          "... broker-a's slave has G2's settings (its sync)")
    check(b'"G2"' in open(f"{TMP}/a/config/subscriptionGroup.json", "rb").read(),
          "... saved in config/subscriptionGroup.json")
    m = sent1[0]
    maddr = addr_a if m["brokerName"] == "broker-a" else addr_b
    rc, q, _ = cli("message", "query", f"--id={m['msgId']}")
    back = {"group": "G2", "offset": str(q[0]["commitLogOffset"]), "delayLevel": "0",
            "originMsgId": m["msgId"], "originTopic": "TA"}
    code, remark, _ = rmt_call.call(maddr, 36, back)
    check(code == 0, f"SEND_BACK for G2: {code} {remark}")
    code, remark, _ = rmt_call.call(maddr, 36, dict(back, group="G3"))
    check(code == 0, f"SEND_BACK for G3 (defaults): {code} {remark}")
    count = lambda t: (lambda r: sum(x["maxOffset"] for x in r[1][0]) if r[0] == 0 and r[1] else -1)(
        cli("topic", "describe", t))
    check(wait_until(lambda: count("%DLQ%G2") == 1) and count("%RETRY%G2") in (0, -1),
          f"... G2's retryMaxTimes 0 sends it to %DLQ%G2 ({count('%DLQ%G2')})")
    check(wait_until(lambda: count("%RETRY%G3") == 1),
          f"... G3's default (16) to %RETRY%G3 ({count('%RETRY%G3')})")
    rc, _, err = cli("group", "update", "G2", "--consume=true")
    rc2, got, err2 = cli("consume", "TA", "--group=G2", "--from=first", "-n", "1")
    check(rc == 0 and rc2 == 0 and len(got) == 1, f"group update --consume=true: G2 reads again {err}{err2}")
    rc, _, err = cli("group", "delete", "G2", "--force")
    code, _, body = rmt_call.call(addr_a, 201)
    check(rc == 0 and b'"G2"' not in body, f"group delete G2: its settings are gone {err}")

    code, remark, _ = rmt_call.call(addr_a, 306)
    check(code == 0, f"CLEAN_EXPIRED_CONSUMEQUEUE on a master: SUCCESS ({code} {remark})")
    code, remark, _ = rmt_call.call(slave_addr, 306)
    check(code == 1 and "slave" in remark, f"... refused by a slave: {code} {remark}")
    rc, out, _ = cli("topic", "describe", "TA")
    check(rc == 0 and sum(q["maxOffset"] - q["minOffset"] for q in out[0]) == 44,
          "... TA's queues are all still there (44 messages)")

    # the JSON of each admin answer, as RocketMQ writes it
    code, _, body = rmt_call.call(addr_a, 202, {"topic": "TA"})
    check_shape("GET_TOPIC_STATS_INFO", "get_topic_stats_info", body)
    code, _, body = rmt_call.call(addr_a, 208, {"consumerGroup": "G1", "topic": "TA"})
    check_shape("GET_CONSUME_STATS", "get_consume_stats", body)
    code, _, body = rmt_call.call(addr_a, 208, {"consumerGroup": "nobody"})
    check(body == b'{"consumeTps":0.0,"offsetTable":{}}', f"GET_CONSUME_STATS of no group: {body!r}")
    code, _, body = rmt_call.call(addr_a, 300, {"topic": "TA"})
    check_shape("QUERY_TOPIC_CONSUME_BY_WHO", "query_topic_consume_by_who", body)
    code, _, body = rmt_call.call(addr_a, 222, {"topic": "TA", "group": "G1", "timestamp": "-1",
                                                "isForce": "true"})
    check_shape("INVOKE_BROKER_TO_RESET_OFFSET", "invoke_broker_to_reset_offset", body)
    code, _, body = rmt_call.call(addr_a, 28)
    check_shape("GET_BROKER_RUNTIME_INFO", "get_broker_runtime_info", body)
    code, remark, _ = rmt_call.call(addr_a, 203, {"consumerGroup": "G1"})
    check(code == 206, f"GET_CONSUMER_CONNECTION_LIST of an offline group: CONSUMER_NOT_ONLINE ({code})")
    code, remark, body = rmt_call.call(addr_a, 204, {"producerGroup": "nobody"})
    check(code == 1 and "not exist" in remark,
          f"GET_PRODUCER_CONNECTION_LIST of no producer: {code} {remark}")
    code, _, body = rmt_call.call(NSADDR, 106)
    check_shape("GET_BROKER_CLUSTER_INFO", "get_broker_cluster_info", body)
    code, _, body = rmt_call.call(NSADDR, 224, {"cluster": "DefaultCluster"})
    check_shape("GET_TOPICS_BY_CLUSTER", "get_topics_by_cluster", body)
    check(b'"TA"' in body, "... it lists TA")
    code, _, body = rmt_call.call(NSADDR, 304)
    check_shape("GET_SYSTEM_TOPIC_LIST_FROM_NS", "get_system_topic_list_from_ns", body)

    rc, _, err = cli("topic", "delete", "TA")
    check(rc == 0, f"topic delete TA (rc {rc}) {err}")
    rc, _, err = cli("topic", "route", "TA")
    check(rc == 1 and "does not exist" in err, f"... its route is gone ({err.strip()})")
    check(all(not os.path.exists(f"{TMP}/{n}/consumequeue/TA") for n in ("a", "b")),
          "... its ConsumeQueue files are gone on both masters")
    check(wait_until(lambda: not os.path.exists(f"{TMP}/as/consumequeue/TA"), 15)
          and wait_log("as", "topic TA deleted as on the master"),
          "... and on broker-a's slave, which follows its master")
    rc, out, err = cli("group", "describe", "G1")
    check(rc == 0 and out and out[0]["queues"] == [], f"... and G1's offsets on it ({out})")
    rc, _, err = cli("topic", "create", "TA", "--queues=2")
    rc2, out, _ = cli("topic", "describe", "TA")
    check(rc == 0 and rc2 == 0 and out and sum(q["maxOffset"] for q in out[0]) == 0,
          "a new TA starts empty")
    rc, _, err = cli("group", "delete", "G1")
    check(rc == 0, f"group delete G1 (rc {rc}) {err}")
    rc, out, _ = cli("group", "list")
    check(rc == 0 and out and not {"G1", "G2"} & set(out[0]), f"... not listed any more ({out})")
    rc, _, err = cli("topic", "route", "%DLQ%G2")
    check(rc == 1, f"... G2's DLQ topic went with it ({err.strip()})")
    rc, txt, _ = cli_text("completion", "bash")
    check(rc == 0 and "complete -o nospace -F _sprocket sprocket" in txt and "topic" in txt,
          "completion bash: a completion script")
    rc, _, err = cli_text("topic", "frobnicate")
    check(rc == 2, f"an unknown verb: rc 2 ({err.strip()[:60]})")

    # broker-a's master dies: its group has a slave and no master
    pa = [p for p in PROCS if p.name == "a"][0]
    pa.kill()
    pa.wait()
    gone = wait_until(lambda: (lambda r: r[0] == 0 and r[1] and not any(
        x["brokerName"] == "broker-a" and x["brokerId"] == 0 for x in r[1][0]) or None)(
        cli("cluster", "list")), 20)
    check(gone, "the NameServer drops broker-a's killed master")
    rc, out, _ = cli("cluster", "health")
    check(rc == 1 and out and not out[0]["healthy"] and out[0]["groupsWithoutMaster"] == ["broker-a"],
          f"cluster health: NOT healthy, rc 1, group broker-a has no master ({rc} {out})")
    rc, txt, _ = cli_text("cluster", "health")
    check("group broker-a has no master" in txt, f"... said in words: {txt.strip()[-160:]}")
    # broker-b, a group of one, dies whole: the NameServer forgets its routes, not the group
    pb = [p for p in PROCS if p.name == "b"][0]
    pb.kill()
    pb.wait()
    gone = wait_until(lambda: (lambda r: r[0] in (0, 1) and r[1] and not any(
        x["brokerName"] == "broker-b" for x in r[1][0]) or None)(cli("cluster", "list")), 20)
    check(gone, "the NameServer drops broker-b, its only broker")
    rc, out, _ = cli("cluster", "health")
    check(rc == 1 and out and sorted(out[0]["groupsWithoutMaster"]) == ["broker-a", "broker-b"],
          f"cluster health: rc 1, broker-b listed as a group without a broker ({rc} {out})")
    rc, txt, _ = cli_text("cluster", "health")
    check("group broker-b (cluster DefaultCluster) has no broker at all" in txt,
          f"... said in words: {[ln for ln in txt.splitlines() if 'broker-b' in ln]}")


class FakeConsumer:
    """A remoting client that heartbeats a consumer group and answers GET_CONSUMER_RUNNING_INFO
    as a Java consumer does (ali-ons answers no broker request)."""

    def __init__(self, addr, group, cid):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=5)
        self.group, self.cid, self.asked = group, cid, []
        body = json.dumps({"clientID": cid, "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": "TA", "subString": "*", "tagsSet": [], "codeSet": [],
                                     "subVersion": 1, "expressionType": "TAG",
                                     "classFilterMode": False}]}]}).encode()
        self.send({"code": 34, "language": "JAVA", "version": 409, "opaque": 1, "flag": 0,
                   "extFields": {}}, body)
        self.read()  # the heartbeat's answer

    def send(self, hdr, body=b""):
        h = json.dumps(hdr).encode()
        self.s.sendall(struct.pack(">II", 4 + len(h) + len(body), len(h)) + h + body)

    def read(self):
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError
            buf += chunk
        hl = struct.unpack(">I", buf[4:8])[0] & 0xFFFFFF
        return json.loads(buf[8:8 + hl]), buf[8 + hl:]

    def serve(self):
        try:
            while True:
                hdr, _ = self.read()
                if hdr.get("code") != 307 or hdr.get("flag", 0) & 1:
                    continue
                self.asked.append(hdr.get("extFields", {}))
                info = json.dumps({"properties": {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
                                                  "PROP_CLIENT_VERSION": "V4_9_8"},
                                   "mqTable": {}, "statusTable": {}, "subscriptionSet": []})
                self.send({"code": 0, "language": "JAVA", "version": 409,
                           "opaque": hdr["opaque"], "flag": 1, "extFields": {}}, info.encode())
        except (EOFError, OSError):
            pass


def case_running_info():
    namesrv()
    broker("a", "broker-a", "ASYNC_MASTER", 0, BASE + 10)
    addr = f"127.0.0.1:{rmt_port('a')}"
    fake = FakeConsumer(addr, "GS", "127.0.0.1@fake")
    threading.Thread(target=fake.serve, daemon=True).start()
    code, remark, body = rmt_call.call(addr, 307, {"consumerGroup": "GS", "clientId": "127.0.0.1@fake",
                                                   "jstackEnable": "false"})
    check(code == 0 and b"PROP_CONSUME_TYPE" in body,
          f"GET_CONSUMER_RUNNING_INFO relayed to the consumer and back: {code} {remark} {body[:60]!r}")
    check(fake.asked and fake.asked[0].get("clientId") == "127.0.0.1@fake",
          f"... with the request's extFields ({fake.asked})")
    rc, out, err = cli("group", "status", "GS")
    check(rc == 0 and out and out[0]["runningInfo"]["properties"]["PROP_CLIENT_VERSION"] == "V4_9_8",
          f"sprocket group status GS: the client's report (rc {rc}) {err}")
    code, remark, _ = rmt_call.call(addr, 307, {"consumerGroup": "GS", "clientId": "nobody"})
    check(code == 1 and "not online" in remark, f"an unknown client: {code} {remark}")
    fake.s.close()


def case_gate():
    namesrv(["--adminAllowedAddrs=10.1.2.3"])
    broker("a", "broker-a", "ASYNC_MASTER", 0, BASE + 10, ["--adminAllowedAddrs=10.1.2.0/24"])
    addr = f"127.0.0.1:{rmt_port('a')}"
    for code, ext in ((17, {"topic": "TG", "readQueueNums": "1", "writeQueueNums": "1"}),
                      (202, {"topic": "TBW102"}), (25, {}), (26, {}), (28, {}),
                      (208, {"consumerGroup": "g"}), (215, {"topic": "TG"}),
                      (222, {"topic": "TBW102", "group": "g", "timestamp": "0"})):
        c, remark, _ = rmt_call.call(addr, code, ext)
        check(c == 16 and "adminAllowedAddrs" in remark, f"broker: admin request {code}: {c} {remark}")
    for code, ext in ((100, {"namespace": "n", "key": "k", "value": "v"}),
                      (102, {"namespace": "n", "key": "k"}), (205, {"brokerName": "broker-a"}),
                      (327, {"brokerName": "broker-a"}), (216, {"topic": "TBW102"}),
                      (318, {}), (319, {})):
        c, remark, _ = rmt_call.call(NSADDR, code, ext)
        check(c == 16 and "adminAllowedAddrs" in remark, f"namesrv: admin request {code}: {c} {remark}")
    c, _, body = rmt_call.call(addr, 21)
    check(c == 0 and b"topicConfigTable" in body, "a slave's sync (GET_ALL_TOPIC_CONFIG) still answers")
    c, _, body = rmt_call.call(NSADDR, 105, {"topic": "TBW102"})
    check(c == 0, f"routes still answer ({c})")
    rc, _, err = cli("topic", "create", "TG")
    check(rc == 1 and "adminAllowedAddrs" in err, f"sprocket topic create: rc 1, says why ({err.strip()[:90]})")


def main():
    try:
        {"cli": case_cli, "gate": case_gate, "running_info": case_running_info}[CASE]()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in PROCS:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if FAILED or os.environ.get("ADMIN_KEEP"):
            for n in sorted(os.listdir(TMP)):
                if n.endswith(".log"):
                    print(f"---- {n} (tail)")
                    print("\n".join(log_of(n[:-4]).splitlines()[-15:]))
        if os.environ.get("ADMIN_KEEP"):
            print(f"kept {TMP}")
        else:
            shutil.rmtree(TMP, ignore_errors=True)
    print(f"{CASE}: {len(FAILED)} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
