# SPDX-License-Identifier: Apache-2.0
"""Isolation under abuse: what one hostile client holds, others still get (docs/isolation.md).

usage: isolation.py NAMESRV BROKER CLI XTOOL DP_ABUSE NODE_DIR CASE

  remoting  8 connections from 127.0.0.2 send 1024 long-polling PULLs each (30 s suspend):
            512 park at the core (half of remotingMaxInflightPerAddr), 4096 more are held by
            the remoting thread (remotingLongPollsPerAddr, lowered to 4096 here), the rest
            are answered SYSTEM_BUSY at once naming the key; meanwhile ali-ons on 127.0.0.1
            sends and consumes with 0 failed. Closing the flooding connections releases their
            pulls at once: a new connection from that address parks 1024 again straight
            away. The stop report counts the refusals by reason.
  remoting_acl  the same with aclEnable: the flood signed by an account that may read the
            topic gets the same shares, ali-ons with its own account works as above.
  pipeline  one connection from 127.0.0.2 pipelines one cheap request as fast as it can
            (GET_MAX_OFFSET, QUERY_CONSUMER_OFFSET, HEART_BEAT, GET_CONSUMER_LIST_BY_GROUP,
            an admin request refused by adminAllowedAddrs, an unsupported code), one after
            the other: meanwhile ali-ons on 127.0.0.1 sends 50 of 50 each time, and the
            attacker's requests are answered too (served in turns, none dropped).
  sessions  (dataplane, ACL off) 2000 CONNECTs from 127.0.0.2: 256 sessions open
            (maxSessionsPerAddr), the rest are answered SYSTEM_BUSY; libsprocket on 127.0.0.1
            (sp_xtool) then opens its sessions, sends 3 of 3 and pulls them.
  reassembly 8 sessions from 127.0.0.2 start a 1 MiB SEND in each of their 8 slots and never
            finish one (and start the next whenever one is answered): they hold 16 of the
            core's 32 buffers (bigBuffersPerAddr); libsprocket on 127.0.0.1 sends 100 KB
            messages meanwhile, 10 of 10, and pulls them; the half-sent requests are answered
            SYSTEM_BUSY after reassemblyTimeoutMs (2 s) and their buffers freed.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402
from rmt_flood import Flood  # noqa: E402

NS, BK, CLI, XTOOL, ABUSE, NODE_DIR, CASE = sys.argv[1:8]
ENV = itest.Env("iso-")
NSADDR = f"127.0.0.1:{ENV.base}"
check = ENV.check

SYSTEM_BUSY = 2


def namesrv():
    ENV.start("namesrv", [NS, f"--listenPort={ENV.base}", f"--kvConfigPath={ENV.tmp}/kv.json",
                          "--bindAddress=127.0.0.1"])
    if not ENV.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")


def broker(extra=()):
    args = [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0", f"--dataplanePort={ENV.base + 20}",
            "--dataplaneCores=1", f"--storePathRootDir={ENV.tmp}/broker",
            "--mapedFileSizeCommitLog=4194304", "--mapedFileSizeConsumeQueue=20000",
            "--storeBufferDir=" + ENV.tmp] + list(extra)
    p = ENV.start("broker", args)
    if not ENV.wait_log("broker", " ready: "):
        raise SystemExit("the broker did not start")
    return p


def cli(*args, creds=None):
    env = dict(os.environ)
    if creds:
        env["SPROCKET_ACCESS_KEY"], env["SPROCKET_SECRET_KEY"] = creds
    r = subprocess.run([CLI, f"--namesrv={NSADDR}"] + list(args), capture_output=True, text=True,
                       timeout=60, env=env)
    return r.returncode, r.stdout, r.stderr


def stop_lines(needle):
    """Stops the broker: the lines of its log (its stop report) that hold @needle."""
    ENV.procs[1].terminate()
    ENV.procs[1].wait(30)
    return [ln for ln in ENV.log_of("broker").splitlines() if needle in ln]


def node(*args):
    r = subprocess.run(["node", os.path.join(NODE_DIR, "acl_client.js")] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=120)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": -1, "got": -1, "errors": [f"no result: rc {r.returncode} {r.stderr[-300:]}"]}


ACL_TEXT = """accounts:
  - accessKey: flooder
    secretKey: floodsecret
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: gooduser
    secretKey: goodsecret
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
"""


HELD_PER_ADDR = 4096
PARKED_PER_ADDR = 1024 // 2  # half of remotingMaxInflightPerAddr's default


def case_remoting(acl=False):
    namesrv()
    keys = []
    held = [f"--remotingLongPollsPerAddr={HELD_PER_ADDR}"]
    if acl:
        path = os.path.join(ENV.tmp, "plain_acl.yml")
        with open(path, "w") as f:
            f.write(ACL_TEXT)
        os.chmod(path, 0o600)
        broker(["--aclEnable=true", f"--aclFile={path}", "--accessKey=adminuser",
                "--secretKey=adminsecret"] + held)
        keys = ["gooduser", "goodsecret"]
    else:
        broker(held)
    for t in ("IsoData", "IsoPoll"):
        rc, out, err = cli("topic", "create", t, "--queues=1",
                           creds=("adminuser", "adminsecret") if acl else None)
        check(rc == 0, f"topic {t} created ({(out + err).strip()[:80]})")
    time.sleep(0.5)
    addr = f"127.0.0.1:{ENV.rmt_port('broker')}"
    flood = Flood(addr, "127.0.0.2", "IsoPoll", 8, 1024,
                  ("flooder", "floodsecret") if acl else None)
    want = 8 * 1024 - PARKED_PER_ADDR - HELD_PER_ADDR
    flood.read(3)
    # every pull past the held ones is refused, at once or after its trip to the core: the
    # refusals come as fast as the control thread works through the flood's turns
    end = time.time() + 60
    while flood.codes.get(SYSTEM_BUSY, 0) < want and time.time() < end:
        flood.read(0.5)
    busy = flood.codes.get(SYSTEM_BUSY, 0)
    # (PULL_NOT_FOUND, 19: once, under CI load, 31 parked pulls were answered "no message"
    # within 3 s instead of at their 30 s deadline; not understood yet, and no refusal)
    check(busy == want and flood.answered() - flood.codes.get(19, 0) == busy,
          f"flood: {PARKED_PER_ADDR} of 8192 pulls park at the core, {HELD_PER_ADDR} are held, "
          f"{busy} answered SYSTEM_BUSY at once (want {want}; {flood.codes})")
    check(any("remotingLongPollsPerAddr" in r and "127.0.0.2" in r for r in flood.remarks),
          f"the refusal names the address and the key ({sorted(flood.remarks)[:2]})")
    r = node("produce", NSADDR, "IsoData", 50, *keys)
    check(r["ok"] == 50, f"during the flood ali-ons on 127.0.0.1 sends 50 of 50 ({r['errors'][:2]})")
    r = node("consume", NSADDR, "IsoData", "GID_GOOD", 50, 40, *keys)
    # (ali-ons reports a new group's missing offset as an error: that one is no failure)
    r["errors"] = [e for e in r["errors"] if "maybe this group consumer boot first" not in e]
    check(r["got"] >= 50 and not r["errors"],
          f"during the flood ali-ons consumes all 50, no errors ({r['got']}, {r['errors'][:2]})")
    flood.read(0.5)
    check(flood.codes.get(SYSTEM_BUSY, 0) == busy and flood.answered() - flood.codes.get(19, 0)
          == busy, f"the parked pulls stay parked, none refused later ({flood.codes})")
    flood.close()
    # the broker releases a closed connection's parked pulls when it sees the close: give a
    # loaded machine a few tries before calling the address's share still taken
    for attempt in range(4):
        time.sleep(0.5)
        again = Flood(addr, "127.0.0.2", "IsoPoll", 1, 1024,
                      ("flooder", "floodsecret") if acl else None)
        again.read(1.5)
        if again.answered() - again.codes.get(19, 0) == 0 or attempt == 3:
            break
        again.close()
    check(again.answered() - again.codes.get(19, 0) == 0,
          f"after the flood closed, 1024 new pulls from its address park ({again.codes}, "
          f"try {attempt + 1})")
    again.close()
    rep = stop_lines("SYSTEM_BUSY answers")
    rep = [ln for ln in ENV.log_of("broker").splitlines() if "long polls held off" in ln]
    m = re.search(r"(\d+) remotingLongPollsPerAddr", rep[-1]) if rep else None
    # (at least: a retry above may have been refused before the close was seen)
    check(m and int(m.group(1)) >= want,
          f"the stop report counts refusals by reason ({rep[-1:]})")


PIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rmt_pipeline.py")
HEARTBEAT = json.dumps({"clientID": "pipe@127.0.0.2", "producerDataSet": [],
                        "consumerDataSet": []})
# (name, code, extFields, body): cheap requests a client may send, valid or refused at once
PIPE_CODES = (
    ("GET_MAX_OFFSET", 30, {"topic": "IsoData", "queueId": "0"}, ""),
    ("QUERY_CONSUMER_OFFSET", 14, {"consumerGroup": "GID_PIPE", "topic": "IsoData",
                                   "queueId": "0"}, ""),
    ("HEART_BEAT", 34, {}, HEARTBEAT),
    ("GET_CONSUMER_LIST_BY_GROUP", 38, {"consumerGroup": "GID_PIPE"}, ""),
    ("GET_BROKER_RUNTIME_INFO (refused: adminAllowedAddrs)", 28, {}, ""),
    ("an unsupported code", 9999, {}, ""),
)


def produce_under_pipeline(addr, code, ext, body, conns):
    """ali-ons sends 50 messages while CONNS connections from 127.0.0.2 pipeline CODE.
    Return: (ali-ons' result, the pipeline's summary)."""
    p = subprocess.Popen([sys.executable, PIPE, addr, "127.0.0.2", str(code), json.dumps(ext),
                          "0", body, str(conns)], stdout=subprocess.PIPE, text=True)
    try:
        r = node("produce", NSADDR, "IsoData", 50)
    finally:
        p.terminate()
        out, _ = p.communicate(timeout=60)
    return r, json.loads(out.strip().splitlines()[-1]) if out.strip() else {}


def case_pipeline():
    namesrv()
    broker()
    rc, out, err = cli("topic", "create", "IsoData", "--queues=1")
    check(rc == 0, f"topic IsoData created ({(out + err).strip()[:80]})")
    addr = f"127.0.0.1:{ENV.rmt_port('broker')}"
    for name, code, ext, body in PIPE_CODES:
        r, st = produce_under_pipeline(addr, code, ext, body, 1)
        check(r["ok"] == 50, f"while one connection pipelines {name}: ali-ons on 127.0.0.1 "
                             f"sends 50 of 50 ({r['errors'][:2]})")
        check(st.get("sent", 0) > 0 and st.get("answered", 0) > 0,
              f"... and the pipeline is answered too: {st.get('answered')} of {st.get('sent')} "
              f"sent ({st.get('codes')})")
    # one address, many connections: they share the address's frames and core requests
    name, code, ext, body = PIPE_CODES[0]
    r, st = produce_under_pipeline(addr, code, ext, body, 32)
    check(r["ok"] == 50, f"while 32 connections from one address pipeline {name}: ali-ons on "
                         f"127.0.0.1 sends 50 of 50 ({r['errors'][:2]})")
    check(st.get("answered", 0) > 0, f"... and they are answered too: {st.get('answered')} of "
                                     f"{st.get('sent')} sent ({st.get('codes')})")
    rep = stop_lines("turns ended with frames left")
    m = re.search(r"remoting: (\d+) turns ended .*; (\d+) turns put off as the connection's address",
                  rep[-1] if rep else "")
    check(m and int(m.group(1)) > 0,
          f"the stop report counts the turns a pipeline had to wait ({rep[-1:]})")
    check(m and int(m.group(2)) > 0,
          f"... and the turns put off as their address had its share ({rep[-1:]})")


def abuse(*args):
    r = subprocess.run([ABUSE] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=120)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"error": f"rc {r.returncode} {r.stderr[-300:]}"}


def xtool_produce(count, body=None):
    args = [XTOOL, "produce", f"--namesrv={NSADDR}", "--topic=IsoData", f"--count={count}",
            "--backend=udp"]
    if body:
        args.append(f"--body={body}")
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    rows = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    return r.returncode, rows, r.stderr[-400:]


def xtool_consume(count, group):
    r = subprocess.run([XTOOL, "consume", f"--namesrv={NSADDR}", "--topic=IsoData",
                        f"--group={group}", f"--count={count}", "--timeout-ms=20000",
                        "--backend=udp"], capture_output=True, text=True, timeout=120)
    rows = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    return r.returncode, rows, r.stderr[-400:]


def dp_setup():
    namesrv()
    broker()
    rc, out, err = cli("topic", "create", "IsoData", "--queues=1")
    check(rc == 0, f"topic IsoData created ({(out + err).strip()[:80]})")
    time.sleep(0.5)


def case_sessions():
    dp_setup()
    r = abuse("connect-flood", "127.0.0.1", ENV.base + 20, "127.0.0.2", 2000)
    check(r.get("success") == 256 and r.get("busy") == 2000 - 256,
          f"2000 CONNECTs from 127.0.0.2: 256 sessions, the rest SYSTEM_BUSY ({r})")
    rc, rows, err = xtool_produce(3)
    ok = [x for x in rows if x.get("ok")]
    check(rc == 0 and len(ok) == 3, f"meanwhile libsprocket on 127.0.0.1 sends 3 of 3 ({rc}, {err})")
    rc, rows, err = xtool_consume(3, "GID_GOOD")
    check(rc == 0 and len(rows) >= 3, f"... and pulls them, 3 of 3 ({rc}, {len(rows)}, {err})")
    rep = stop_lines("core 0 sessions:")
    check(rep and "maxSessionsPerAddr 1744)" in rep[-1],
          f"the stop report counts the refusals by reason ({rep[-1:]})")


def case_reassembly():
    dp_setup()
    hold = subprocess.Popen([ABUSE, "reasm-hold", "127.0.0.1", str(ENV.base + 20), "127.0.0.2",
                             "8", "10"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    rc, rows, err = xtool_produce(10, "x" * 100000)
    ok = [x for x in rows if x.get("ok")]
    check(rc == 0 and len(ok) == 10,
          f"while 127.0.0.2 holds half-sent requests, 100 KB SENDs from 127.0.0.1: 10 of 10 "
          f"({rc}, {[x.get('error', x.get('ok')) for x in rows][:4]}, {err[-200:]})")
    rc, rows, err = xtool_consume(10, "GID_GOOD")
    check(rc == 0 and len(rows) >= 10,
          f"... and pulls them (100 KB answers, from the pool too), 10 of 10 ({rc}, {len(rows)}, {err})")
    out = hold.communicate(timeout=60)[0]
    r = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    check(r["sessions"] == 8 and r["started"] >= 64 and r["busy"] >= 64 and
          r["answers"] == r["busy"],
          f"the attacker's half-sent requests are all answered SYSTEM_BUSY: past its share at "
          f"once, the 16 it held after 2 s ({r})")
    rep = stop_lines("core 0 sessions:")
    m = re.search(r"bigBuffersPerAddr (\d+)\); reassembly timeouts (\d+)", rep[-1] if rep else "")
    check(m and int(m.group(1)) >= 48 and int(m.group(2)) >= 16,
          f"the stop report counts refusals and timeouts ({rep[-1:]})")


def main():
    try:
        {"remoting": case_remoting, "remoting_acl": lambda: case_remoting(acl=True),
         "pipeline": case_pipeline,
         "sessions": case_sessions,
         "reassembly": case_reassembly}[CASE]()
    finally:
        sys.exit(ENV.finish("ISO_KEEP"))


main()
