#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""RocketMQ's plain ACL and the attacks it stops, with real processes (docs/security.md).

Usage: acl.py NAMESRV BROKER SPROCKET SP_XTOOL NODE_DIR CASE     (ACL_KEEP=1 keeps the logs)

Cases (each starts its own NameServer and broker on 127.0.0.1, udp, aclEnable on both):
  remoting  ali-ons 3.12.0 with and without credentials: the right account produces and
            consumes; no key, an unknown key, a wrong secret, PUB on a SUB-only topic and a
            DENY group are refused with NO_PERMISSION and the reason; the CLI needs an admin
            account for topic changes; a request signed here in Python (a third HMAC-SHA1
            implementation) is accepted; the ACL file is reloaded when it changes; a file
            others may read stops the broker at start.
  attacks   what an attacker without credentials tried on the NameServer and the broker:
            REGISTER_BROKER of a fake broker-b and of broker-a at the attacker's address,
            UNREGISTER_BROKER, WIPE_WRITE_PERM, PUT/DELETE_KV_CONFIG, UPDATE_AND_CREATE_TOPIC
            with perm 0, and a SEND with a bogus AccessKey/Signature: all refused; the routes
            still point at the real broker, which still takes writes; a brokerName with a
            newline and an ANSI escape does not forge a log line.
  dataplane sessions (libsprocket, through sp_xtool): no credentials, an unknown key and a
            wrong secret are refused at CONNECT; the right account produces over the
            dataplane, and a topic it may not publish to is refused per request.
  tls       TLS on the remoting port (OpenSSL): permissive takes a TLS client (Python's ssl)
            and plain TCP on the same port; ali-ons produces and consumes through node's tls
            module; enforcing refuses plain TCP with a log line and takes TLS; a wrong key file
            stops the broker at start with the reason.
  protected a NameServer without ACL and without bindAddress (protected mode) refuses a
            REGISTER_BROKER from another address (network namespaces and a veth pair) and
            takes it from loopback; with protectedMode=false it takes both. Root only (77).
"""
import base64
import re
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rmt_call  # noqa: E402
from ports import free_base  # noqa: E402

NS, BK, CLI, XTOOL, NODE_DIR, CASE = sys.argv[1:7]
TMP = tempfile.mkdtemp(prefix="acl-")
RND = random.Random(os.getpid())
PROCS = []
FAILED = []
BASE = free_base(RND)
NSADDR = f"127.0.0.1:{BASE}"
ACL = os.path.join(TMP, "plain_acl.yml")

ACL_TEXT = """globalWhiteRemoteAddresses:

accounts:
  - accessKey: appuser1
    secretKey: appsecret1
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=PUB|SUB
      - TopicR=SUB
      - SprocketBench=PUB
    groupPerms:
      - GroupDenied=DENY
  - accessKey: adminuser
    secretKey: adminsecret
    admin: true
"""


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)
    return cond


def log_of(name):
    try:
        with open(os.path.join(TMP, name + ".log"), "rb") as f:
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def wait_log(name, needle, timeout=30, count=1):
    end = time.time() + timeout
    while time.time() < end:
        if log_of(name).count(needle) >= count:
            return True
        time.sleep(0.05)
    return False


def start(name, argv, prefix=()):
    log = open(os.path.join(TMP, name + ".log"), "ab")
    p = subprocess.Popen(list(prefix) + argv, stdout=log, stderr=subprocess.STDOUT)
    PROCS.append(p)
    return p


def write_acl(text, mode=0o600):
    tmp = ACL + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, ACL)


def namesrv(extra=(), acl=True):
    args = [NS, f"--listenPort={BASE}", f"--kvConfigPath={TMP}/kv.json"]
    if acl:
        args += ["--aclEnable=true", f"--aclFile={ACL}"]
    start("namesrv", args + list(extra))
    if not wait_log("namesrv", " listening on ", timeout=10):
        print(log_of("namesrv"))
        raise SystemExit("the NameServer did not start")


def broker(extra=(), name="broker", wait=True):
    args = [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0", f"--dataplanePort={BASE + 20}",
            "--dataplaneCores=1", f"--storePathRootDir={TMP}/{name}",
            "--mapedFileSizeCommitLog=1048576", "--mapedFileSizeConsumeQueue=20000",
            "--storeBufferDir=" + TMP, "--aclEnable=true", f"--aclFile={ACL}",
            "--accessKey=adminuser", "--secretKey=adminsecret"] + list(extra)
    p = start(name, args)
    if wait and not wait_log(name, " ready: "):
        print(log_of(name))
        raise SystemExit(f"{name} did not start")
    return p


def rmt_port(name="broker"):
    for line in log_of(name).splitlines():
        if "remoting (RocketMQ clients) listening on" in line:
            return int(line.rsplit(":", 1)[1].split()[0])
    raise SystemExit(f"{name}: no remoting port in its log")


def cli(*args, ak=None, sk=None):
    env = dict(os.environ)
    env.pop("SPROCKET_ACCESS_KEY", None)
    env.pop("SPROCKET_SECRET_KEY", None)
    if ak:
        env["SPROCKET_ACCESS_KEY"], env["SPROCKET_SECRET_KEY"] = ak, sk
    r = subprocess.run([CLI, f"--namesrv={NSADDR}"] + list(args), capture_output=True, text=True,
                       timeout=60, env=env)
    return r.returncode, r.stdout, r.stderr


def node(*args, env=None):
    r = subprocess.run(["node", os.path.join(NODE_DIR, "acl_client.js")] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=90, env=env)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"ok": -1, "got": -1, "errors": [f"no result: rc {r.returncode} {r.stderr[-300:]}"]}


def signed(ext, body, ak, sk):
    """RocketMQ's signature, computed here with Python's hmac (independent of the C one)."""
    e = dict(ext)
    e["AccessKey"] = ak
    content = "".join(e[k] for k in sorted(e)).encode() + body
    e["Signature"] = base64.b64encode(hmac.new(sk.encode(), content, hashlib.sha1).digest()).decode()
    return e


def route_addrs(topic):
    c, _, body = rmt_call.call(NSADDR, 105, {"topic": topic})
    if c != 0:
        return c, []
    r = json.loads(body)
    return 0, sorted(a for bd in r["brokerDatas"] for a in bd["brokerAddrs"].values())


def topics_setup():
    for t, q in (("TopicA", 2), ("TopicR", 2), ("SprocketBench", 1)):
        rc, out, err = cli("topic", "create", t, f"--queues={q}", ak="adminuser", sk="adminsecret")
        check(rc == 0, f"admin account creates {t} ({(out + err).strip()[:80]})")


def case_remoting():
    write_acl(ACL_TEXT)
    namesrv()
    broker()
    check(wait_log("broker", "registered", 10) or wait_log("namesrv", "registered", 10),
          "the broker registers with the NameServer, signing with its admin account")
    rc, out, err = cli("topic", "create", "TopicA", "--queues=2")
    check(rc == 1 and "No accessKey" in err, f"CLI without credentials: refused ({err.strip()[:100]})")
    rc, out, err = cli("topic", "create", "TopicA", "--queues=2", ak="appuser1", sk="appsecret1")
    check(rc == 1 and "Need admin permission" in err,
          f"CLI with a non-admin account: refused ({err.strip()[:100]})")
    topics_setup()
    time.sleep(0.5)
    r = node("produce", NSADDR, "TopicA", 20, "appuser1", "appsecret1")
    check(r["ok"] == 20, f"ali-ons with appuser1's keys: 20 of 20 SEND_OK ({r['ok']}, {r['errors'][:2]})")
    r = node("produce", NSADDR, "TopicA", 3)
    check(r["ok"] == 0 and r["errors"], f"ali-ons without keys: 0 of 3 ({r['ok']})")
    check(wait_log("broker", "no_access_key", 5), "the broker logs the refusal by reason (no_access_key)")
    r = node("produce", NSADDR, "TopicA", 3, "nosuchuser", "appsecret1")
    check(r["ok"] == 0, f"ali-ons with an unknown key: 0 of 3 ({r['ok']})")
    r = node("produce", NSADDR, "TopicA", 3, "appuser1", "wrongsecret")
    check(r["ok"] == 0, f"ali-ons with a wrong secret: 0 of 3 ({r['ok']})")
    r = node("produce", NSADDR, "TopicR", 3, "appuser1", "appsecret1")
    check(r["ok"] == 0, f"ali-ons PUB on a SUB-only topic: 0 of 3 ({r['ok']})")
    addr = f"127.0.0.1:{rmt_port()}"
    send = {"a": "pg", "b": "TopicR", "c": "TBW102", "d": "4", "e": "0", "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0"}
    c, remark, _ = rmt_call.call(addr, 310, signed(send, b"x", "appuser1", "appsecret1"), b"x")
    check(c == 16 and "No PUB permission for topic TopicR" in remark,
          f"the refusal names the permission and the topic ({c} {remark})")
    r = node("consume", NSADDR, "TopicA", "GroupOK", 20, 30, "appuser1", "appsecret1")
    check(r["got"] >= 20, f"ali-ons consumer with keys gets the 20 messages ({r['got']})")
    r = node("consume", NSADDR, "TopicA", "GroupDenied", 1, 6, "appuser1", "appsecret1")
    check(r["got"] == 0 and any("No SUB permission for group GroupDenied" in e for e in r["errors"]),
          f"a DENY group gets nothing, with the reason ({r['got']}, {r['errors'][:1]})")
    # a third implementation of the signature (Python's hmac) is accepted
    ext = {"topic": "TopicA", "consumerGroup": "GroupOK", "queueId": "0"}
    c, remark, _ = rmt_call.call(addr, 14, signed(ext, b"", "appuser1", "appsecret1"))
    check(c in (0, 22), f"QUERY_CONSUMER_OFFSET signed in Python: accepted ({c} {remark})")
    bad = signed(ext, b"", "appuser1", "appsecret1")
    bad["queueId"] = "1"  # changed after signing
    c, remark, _ = rmt_call.call(addr, 14, bad)
    check(c == 16 and "signature" in remark, f"a field changed after signing: refused ({c} {remark})")
    # reload: TopicR becomes writable for appuser1
    write_acl(ACL_TEXT.replace("TopicR=SUB", "TopicR=PUB|SUB"))
    check(wait_log("broker", "reloaded", 10), "the broker reloads the ACL file when it changes")
    r = node("produce", NSADDR, "TopicR", 3, "appuser1", "appsecret1")
    check(r["ok"] == 3, f"after the reload PUB on TopicR works: 3 of 3 ({r['ok']})")
    write_acl("accounts: [", 0o600)
    check(wait_log("broker", "cannot be used", 10), "a broken new file is refused with the reason")
    r = node("produce", NSADDR, "TopicA", 2, "appuser1", "appsecret1")
    check(r["ok"] == 2, f"... and the accounts stay as they were ({r['ok']})")
    # a world-readable file stops a broker at start
    write_acl(ACL_TEXT, 0o644)
    p = broker(["--listenPort=0", f"--dataplanePort={BASE + 30}"], name="broker2", wait=False)
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc not in (None, 0) and "chmod 600" in log_of("broker2"),
          f"a broker with an ACL file others may read does not start (rc {rc})")
    check("adminsecret" not in log_of("broker") + log_of("namesrv") + log_of("broker2"),
          "no secret in any log")
    rc, out, err = cli("broker", "config", "get", "broker-a", ak="adminuser", sk="adminsecret")
    check(rc == 0 and "secretKey=******" in out and "adminsecret" not in out,
          f"GET_BROKER_CONFIG shows secretKey as ****** (rc {rc} {err.strip()[:80]})")
    PROCS[1].send_signal(signal.SIGTERM)
    PROCS[1].wait(30)
    rep = [ln for ln in log_of("broker").splitlines() if "remoting: acl refused" in ln]
    check(rep and all(f"{r} 0" not in rep[-1] for r in ("no_access_key", "bad_signature",
                                                         "unknown_access_key", "no_permission")),
          f"the broker's stop report counts refusals by reason ({rep[-1:]})")


def case_attacks():
    write_acl(ACL_TEXT)
    namesrv()
    broker()
    topics_setup()
    addr = f"127.0.0.1:{rmt_port()}"
    c, before = route_addrs("TopicA")
    check(c == 0 and before == [addr], f"TopicA routes to the real broker {before}")
    fake = {"brokerName": "broker-b", "brokerAddr": "127.0.0.1:9", "clusterName": "DefaultCluster",
            "brokerId": "0"}
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {"TopicA": {
        "topicName": "TopicA", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}},
        "dataVersion": {"counter": 999, "timestamp": 1}}, "filterServerList": []}).encode()
    hijack = dict(fake, brokerName="broker-a", brokerAddr="127.0.0.1:9")
    for code, ext, b, what in ((103, fake, body, "REGISTER_BROKER of a fake broker-b"),
                               (103, hijack, body, "REGISTER_BROKER of broker-a at the attacker's address"),
                               (104, dict(fake, brokerName="broker-a", brokerAddr=addr), b"",
                                "UNREGISTER_BROKER of the real broker"),
                               (205, {"brokerName": "broker-a"}, b"", "WIPE_WRITE_PERM_OF_BROKER"),
                               (100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA",
                                      "value": "broker-b:8"}, b"", "PUT_KV_CONFIG"),
                               (102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA"}, b"",
                                "DELETE_KV_CONFIG")):
        c, remark, _ = rmt_call.call(NSADDR, code, ext, b)
        check(c == 16, f"namesrv: {what} without credentials: NO_PERMISSION ({remark[:70]})")
        e = signed(ext, b, "appuser1", "appsecret1")
        c, remark, _ = rmt_call.call(NSADDR, code, e, b)
        check(c == 16 and "admin" in remark, f"namesrv: {what} signed by a non-admin: refused")
        e = dict(ext, AccessKey="adminuser", Signature="bm90IGEgc2lnbmF0dXJlIGF0IGFsbA==")
        c, remark, _ = rmt_call.call(NSADDR, code, e, b)
        check(c == 16 and "signature" in remark, f"namesrv: {what} with a forged signature: refused")
    c, after = route_addrs("TopicA")
    check(c == 0 and after == [addr], f"TopicA still routes to the real broker only {after}")
    c, _, kv = rmt_call.call(NSADDR, 101, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA"})
    check(c != 0, f"no KV entry was written ({c})")
    # the admin account may (the NameServer's own semantics, signed in Python)
    c, remark, _ = rmt_call.call(NSADDR, 100, signed({"namespace": "ns1", "key": "k", "value": "v"},
                                                     b"", "adminuser", "adminsecret"))
    check(c == 0, f"PUT_KV_CONFIG signed by the admin account: accepted ({c} {remark})")
    # the NameServer reloads its file: a new admin account works within seconds
    e = signed({"namespace": "ns1", "key": "k2", "value": "v"}, b"", "opsadmin1", "opssecret1")
    c, remark, _ = rmt_call.call(NSADDR, 100, e)
    check(c == 16, f"an account not in the file yet: refused ({c})")
    write_acl(ACL_TEXT + "  - accessKey: opsadmin1\n    secretKey: opssecret1\n    admin: true\n")
    check(wait_log("namesrv", "reloaded", 10), "the NameServer reloads its ACL file when it changes")
    c, remark, _ = rmt_call.call(NSADDR, 100, e)
    check(c == 0, f"... and takes the new admin account ({c} {remark})")
    # broker: overwrite a topic with perm 0, and a SEND with bogus credentials
    c, remark, _ = rmt_call.call(addr, 17, {"topic": "TopicA", "defaultTopic": "TBW102",
                                            "readQueueNums": "1", "writeQueueNums": "1",
                                            "perm": "0", "topicFilterType": "SINGLE_TAG"})
    check(c == 16, f"broker: UPDATE_AND_CREATE_TOPIC with perm 0 without credentials: refused ({c})")
    send = {"a": "pg", "b": "TopicA", "c": "TBW102", "d": "4", "e": "0", "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "AccessKey": "appuser1",
            "Signature": "AAAAAAAAAAAAAAAAAAAAAAAAAAA="}
    c, remark, _ = rmt_call.call(addr, 310, send, b"leak")
    check(c == 16 and "signature" in remark, f"broker: SEND with a bogus Signature: refused ({c} {remark})")
    r = node("produce", NSADDR, "TopicA", 5, "appuser1", "appsecret1")
    check(r["ok"] == 5, f"the real broker still takes writes: 5 of 5 ({r['ok']})")
    rc, out, _ = cli("topic", "route", "TopicA")
    check(rc == 0 and addr in out, "route reads stay open without credentials (sprocket topic route)")
    # log injection: a newline and an ANSI escape in a brokerName
    evil = {"brokerName": "evil\n2026-01-01T00:00:00.000Z I ctl.ns: forged\x1b[31m",
            "brokerAddr": "127.0.0.1:9", "clusterName": "DefaultCluster", "brokerId": "0"}
    c, remark, _ = rmt_call.call(NSADDR, 103, signed(evil, body, "adminuser", "adminsecret"), body)
    check(c == 0, f"a registration signed by the admin account is accepted ({c} {remark})")
    time.sleep(0.3)
    log = log_of("namesrv")
    check("forged" in log and "\n2026-01-01T00:00:00.000Z I ctl.ns: forged" not in log and "\x1b" not in log,
          "a brokerName with a newline and an ANSI escape stays on one escaped line")


def xt_produce(topic, ak=None, sk=None, n=20):
    """sp_xtool produce over the dataplane: (SEND_OK count, errors seen)."""
    env = dict(os.environ)
    env.pop("SPROCKET_ACCESS_KEY", None)
    env.pop("SPROCKET_SECRET_KEY", None)
    if ak:
        env["SPROCKET_ACCESS_KEY"], env["SPROCKET_SECRET_KEY"] = ak, sk
    r = subprocess.run([XTOOL, "produce", f"--namesrv={NSADDR}", f"--topic={topic}", f"--count={n}"],
                       capture_output=True, text=True, timeout=120, env=env)
    ok, errs = 0, set()
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            if j.get("ok"):
                ok += 1
            else:
                errs.add(j.get("error", "?"))
    return ok, errs


def case_dataplane():
    write_acl(ACL_TEXT)
    namesrv()
    broker()
    topics_setup()
    n, errs = xt_produce("SprocketBench", "appuser1", "appsecret1")
    check(n == 20, f"dataplane with appuser1's keys: {n} of 20 SEND_OK ({errs})")
    for ak, sk, what in ((None, None, "no credentials"), ("nosuchuser", "x" * 10, "an unknown key"),
                         ("appuser1", "wrongsecret", "a wrong secret")):
        n, errs = xt_produce("SprocketBench", ak, sk, n=3)
        check(n == 0 and any("credentials" in e for e in errs),
              f"dataplane with {what}: refused at CONNECT ({n}; {errs})")
    n, errs = xt_produce("TopicR", "appuser1", "appsecret1", n=3)
    check(n == 0 and any("PERMISSION" in e.upper() for e in errs),
          f"dataplane PUB on a SUB-only topic: refused per request ({n}; {errs})")
    # the broker's shutdown stats count the refusals
    for p in PROCS:
        if p.poll() is None and p.args[0] == BK:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
    log = log_of("broker")
    m = [ln for ln in log.splitlines() if "core 0: acl refused sessions" in ln]
    g = re.search(r"refused sessions (\d+) .*requests (\d+) \(no_permission (\d+)", m[-1]) if m else None
    check(g is not None and int(g.group(1)) >= 3 and int(g.group(3)) >= 1,
          f"the broker's stats: the 3 bad CONNECTs refused as sessions, the SUB-only topic per "
          f"request ({m[-1:]})")


def case_tls():
    key, cert = os.path.join(TMP, "key.pem"), os.path.join(TMP, "cert.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                        "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, text=True)
    if not check(r.returncode == 0, f"a self-signed certificate (openssl rc {r.returncode})"):
        return
    start("namesrv", [NS, f"--listenPort={BASE}", f"--kvConfigPath={TMP}/kv.json"])
    if not wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")
    tls = [f"--tlsServerCertPath={cert}", f"--tlsServerKeyPath={key}"]
    plain = [a for a in ("--aclEnable=false",)]

    def tls_broker(name, mode, extra=()):
        args = [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0", f"--dataplanePort={BASE + 20}",
                "--dataplaneCores=1", f"--storePathRootDir={TMP}/store", "--mapedFileSizeCommitLog=1048576",
                "--mapedFileSizeConsumeQueue=20000", "--storeBufferDir=" + TMP,
                f"--tlsServerMode={mode}"] + tls + plain + list(extra)
        return start(name, args)

    p = tls_broker("broker", "permissive")
    if not wait_log("broker", " ready: "):
        print(log_of("broker"))
        raise SystemExit("broker did not start")
    check("TLS on listenPort: permissive" in log_of("broker"), "the start-up log says TLS permissive")
    addr = f"127.0.0.1:{rmt_port()}"
    c, remark, _ = rmt_call.call(addr, 30, {"topic": "TBW102", "queueId": "0"}, tls_ca=cert)
    check(c == 0, f"permissive: a TLS client (Python ssl) is answered ({c} {remark})")
    c, remark, _ = rmt_call.call(addr, 30, {"topic": "TBW102", "queueId": "0"})
    check(c == 0, f"permissive: plain TCP on the same port is answered ({c} {remark})")
    rc, out, err = cli("topic", "create", "TopicT", "--queues=2")
    check(rc == 0, f"topic created over plain TCP ({err.strip()[:80]})")
    env = dict(os.environ, SP_TLS_PORT=addr.rsplit(":", 1)[1], SP_TLS_CA=cert)
    r = node("produce", NSADDR, "TopicT", 10, env=env)
    check(r["ok"] == 10, f"ali-ons over TLS (node's tls module): 10 of 10 SEND_OK ({r['ok']}, {r['errors'][:2]})")
    r = node("consume", NSADDR, "TopicT", "GroupT", 10, 30, env=env)
    check(r["got"] >= 10, f"ali-ons consumes over TLS ({r['got']}, {r['errors'][:1]})")
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    m = [ln for ln in log_of("broker").splitlines() if "connections spoke TLS" in ln]
    g = re.search(r"TLS: (\d+) connections spoke TLS, (\d+) failed", m[-1]) if m else None
    check(g is not None and int(g.group(1)) >= 3 and int(g.group(2)) == 0,
          f"the broker counts 3 TLS connections (Python, ali-ons' producer and consumer), none "
          f"failed ({m[-1:]})")
    p = tls_broker("broker_enf", "enforcing")
    if not wait_log("broker_enf", " ready: "):
        print(log_of("broker_enf"))
        raise SystemExit("broker did not start")
    addr = f"127.0.0.1:{rmt_port('broker_enf')}"
    c, remark, _ = rmt_call.call(addr, 30, {"topic": "TopicT", "queueId": "0"}, tls_ca=cert)
    check(c == 0, f"enforcing: a TLS client is answered ({c})")
    try:
        c = rmt_call.call(addr, 30, {"topic": "TopicT", "queueId": "0"})[0]
    except (ConnectionError, OSError) as e:
        c = f"closed ({e.__class__.__name__})"
    check(isinstance(c, str), f"enforcing: plain TCP gets no answer: {c}")
    check(wait_log("broker_enf", "plain TCP on a TLS-only port", 5), "... and the broker says why")
    p = tls_broker("broker_bad", "enforcing", [f"--tlsServerKeyPath={cert}",
                                              f"--storePathRootDir={TMP}/store2",
                                              f"--dataplanePort={BASE + 30}"])
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc not in (None, 0) and "tlsServerKeyPath" in log_of("broker_bad"),
          f"a key file that is not the key stops the broker with the reason (rc {rc})")


def netns(cmd):
    subprocess.run(["ip"] + cmd.split(), check=True, capture_output=True)


def case_protected():
    if os.geteuid() != 0:
        print("skip: needs root for network namespaces")
        sys.exit(77)
    tag = RND.randrange(10, 250)
    a, b = f"spacl{os.getpid()}a", f"spacl{os.getpid()}b"
    try:
        netns(f"netns add {a}")
        netns(f"netns add {b}")
        netns(f"link add va{tag} netns {a} type veth peer name vb{tag} netns {b}")
        for ns, dev, ip in ((a, f"va{tag}", f"10.253.{tag}.1/24"), (b, f"vb{tag}", f"10.253.{tag}.2/24")):
            netns(f"-n {ns} addr add {ip} dev {dev}")
            netns(f"-n {ns} link set {dev} up")
            netns(f"-n {ns} link set lo up")
        remote = f"10.253.{tag}.1:{BASE}"
        fake = {"brokerName": "broker-x", "brokerAddr": "10.253.0.9:10911",
                "clusterName": "DefaultCluster", "brokerId": "0"}
        body = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{}},"filterServerList":[]}'
        probe = ("import sys,json; sys.path.insert(0,%r); import rmt_call; "
                 "print(json.dumps(rmt_call.call(%r, 103, %r, %r)[:2]))")
        for extra, want_remote in (((), False), (("--protectedMode=false",), True)):
            start("namesrv", [NS, f"--listenPort={BASE}", f"--kvConfigPath={TMP}/kv.json"] + list(extra),
                  prefix=("ip", "netns", "exec", a))
            check(wait_log("namesrv", " listening on ", 10, count=1 if not extra else 2),
                  "the NameServer starts in its namespace")
            if not extra:
                check("protected mode" in log_of("namesrv"), "the start-up log says protected mode and how to open it")
            time.sleep(0.2)
            scripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts")
            r = subprocess.run(["ip", "netns", "exec", b, sys.executable, "-c",
                                probe % (scripts, remote, fake, body)], capture_output=True, text=True,
                               timeout=30)
            code, remark = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else (None, r.stderr)
            if want_remote:
                check(code == 0, f"protectedMode=false: REGISTER_BROKER from another host accepted ({code})")
            else:
                check(code == 16 and "protected mode" in remark,
                      f"protected mode: REGISTER_BROKER from another host refused ({code} {remark[:60]})")
            r = subprocess.run(["ip", "netns", "exec", a, sys.executable, "-c",
                                probe % (scripts, f"127.0.0.1:{BASE}", dict(fake, brokerName="broker-y"), body)],
                               capture_output=True, text=True, timeout=30)
            code = json.loads(r.stdout.strip().splitlines()[-1])[0] if r.stdout.strip() else None
            check(code == 0, f"REGISTER_BROKER from loopback accepted ({code})")
            p = PROCS.pop()
            p.send_signal(signal.SIGTERM)
            p.wait(30)
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def main():
    try:
        {"remoting": case_remoting, "attacks": case_attacks, "dataplane": case_dataplane,
         "tls": case_tls, "protected": case_protected}[CASE]()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in PROCS:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if FAILED or os.environ.get("ACL_KEEP"):
            for n in sorted(os.listdir(TMP)):
                if n.endswith(".log"):
                    print(f"---- {n} (tail)")
                    print("\n".join(log_of(n[:-4]).splitlines()[-15:]))
        if os.environ.get("ACL_KEEP"):
            print(f"kept {TMP}")
        else:
            shutil.rmtree(TMP, ignore_errors=True)
    print(f"{CASE}: {len(FAILED)} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
