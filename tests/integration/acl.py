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
  doors     every door keeps the ACL: the HTTP API and the console need an account (401 with a
            Basic challenge and no body without one, 403 for a topic the account may not read,
            a record of such a topic left out of a lookup by id), /metrics stays open and
            counts the refusals; SEND to %RETRY%g and %DLQ%g of a denied group refused (and
            with the group's own name as producer group); VIEW_MESSAGE_BY_ID, QUERY_MESSAGE and
            the offset and time lookups return nothing of a denied topic; END_TRANSACTION by an
            account without PUB on the half's topic refused and the half stays pending; a
            second master with the same brokerName and brokerId, refused by the NameServer,
            answers a direct SEND NO_PERMISSION, says so on /health and takes writes once the
            first one stops; the CLI escapes control characters from the network.
  protected a NameServer without ACL and without bindAddress (protected mode) refuses a
            REGISTER_BROKER from another address (network namespaces and a veth pair) and
            takes it from loopback; with protectedMode=false it takes both. Root only (77).
"""
import base64
import re
import urllib.error
import urllib.request
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


def http_port(name="broker"):
    for line in log_of(name).splitlines():
        if "HTTP (/metrics" in line and "listening on" in line:
            return int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
    raise SystemExit(f"{name}: no HTTP port in its log")


def http_get(port, path, user=None, token=None):
    """(status, body, headers) of GET http://127.0.0.1:port/path."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if user:
        req.add_header("Authorization", "Basic " + base64.b64encode(user.encode()).decode())
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode(errors="replace"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), dict(e.headers)


def send_ext(topic, group="pg", props="", sysflag="0"):
    return {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": sysflag,
            "g": str(int(time.time() * 1000)), "h": "0", "i": props}


def metric(port, name, label):
    _, text, _ = http_get(port, "/metrics")
    for line in text.splitlines():
        if line.startswith(name + "{") and label in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return None


def case_doors():
    write_acl(ACL_TEXT)
    namesrv(["--httpMetricsToken=scrape-token-1"])
    broker(["--registerNameServerPeriod=1000"])
    topics_setup()
    for t in ("TopicC", "TopicT"):
        rc, out, err = cli("topic", "create", t, "--queues=1", ak="adminuser", sk="adminsecret")
        check(rc == 0, f"admin account creates {t} ({(out + err).strip()[:80]})")
    addr = f"127.0.0.1:{rmt_port()}"
    hp = http_port()
    check("this host only" in log_of("broker"),
          "the start-up log says HTTP listens on this host only, and how to open it")
    # three messages of a topic appuser1 may read, then one of the DENY topic, with a key
    for i in range(3):
        c, remark, _ = rmt_call.call(addr, 310, signed(send_ext("TopicA"), b"readable", "adminuser",
                                                       "adminsecret"), b"readable")
        check(c == 0, f"admin sends message {i} to TopicA ({c} {remark})")
    c, remark, _, ext = rmt_call.call_ext(addr, 310, signed(send_ext("TopicC", props="KEYS\x01secretkey\x02"),
                                                            b"the secret body", "adminuser",
                                                            "adminsecret"), b"the secret body")
    check(c == 0 and ext.get("msgId"), f"admin sends a message to TopicC ({c} {remark})")
    msgid = ext.get("msgId", "0" * 32)
    phys = str(int(msgid[16:], 16))

    # ---- HTTP ----
    st, body, hdr = http_get(hp, f"/api/message?topic=TopicC&key=secretkey")
    check(st == 401 and "secret body" not in body and "Basic" in hdr.get("WWW-Authenticate", ""),
          f"/api/message without an account: 401 with a Basic challenge, no body ({st})")
    st, body, _ = http_get(hp, f"/api/message?id={msgid}")
    check(st == 401 and "secret body" not in body, f"/api/message?id= without an account: 401 ({st})")
    st, body, hdr = http_get(hp, "/")
    check(st == 401 and "Basic" in hdr.get("WWW-Authenticate", ""),
          f"the console asks for credentials (401, WWW-Authenticate: {hdr.get('WWW-Authenticate')})")
    st, body, _ = http_get(hp, "/api/topics", user="appuser1:wrongsecret")
    check(st == 401, f"a wrong secret: 401 ({st})")
    st, body, _ = http_get(hp, "/api/message?topic=TopicC&key=secretkey", user="appuser1:appsecret1")
    check(st == 403 and "secret body" not in body, f"an account without SUB on TopicC: 403 ({st} {body[:80]})")
    st, body, _ = http_get(hp, f"/api/message?id={msgid}", user="appuser1:appsecret1")
    check(st == 200 and "secret body" not in body and '"messages":[]' in body,
          f"... by offset msgId: the record is left out ({st} {body[:80]})")
    end_t = time.time() + 15  # the index is written behind the log: wait for it
    while True:
        st, body, _ = http_get(hp, f"/api/message?topic=TopicC&key=secretkey", user="adminuser:adminsecret")
        if "secret body" in body or time.time() > end_t:
            break
        time.sleep(0.1)
    check(st == 200 and "secret body" in body, f"the admin account reads it by key ({st})")
    st, body, _ = http_get(hp, "/api/topics", user="appuser1:appsecret1")
    check(st == 200 and "TopicA" in body, f"an account reads /api/topics ({st})")
    st, body, _ = http_get(hp, "/")
    st2, body2, _ = http_get(hp, "/", user="appuser1:appsecret1")
    check(st2 == 200 and "<html" in body2.lower(), f"the console with an account: 200 ({st2})")
    st, body, _ = http_get(hp, "/metrics")
    check(st == 200 and "sprocket_http_refused_total" in body, f"/metrics stays open ({st})")
    st, body, _ = http_get(hp, "/health")
    check(st == 200, f"/health stays open ({st})")
    n = metric(hp, "sprocket_http_refused_total", 'reason="no_credentials"')
    check(n is not None and n >= 3, f"/metrics counts HTTP refusals by reason (no_credentials {n})")
    n = metric(hp, "sprocket_acl_hidden_records_total", 'door="http"')
    check(n == 1, f"... and the record left out of a lookup ({n})")
    # the NameServer's API and console need an account too
    nhp = http_port("namesrv")
    st, body, _ = http_get(nhp, "/api/cluster")
    check(st == 401, f"the NameServer's /api/cluster without an account: 401 ({st})")
    st, body, _ = http_get(nhp, "/api/cluster", user="appuser1:appsecret1")
    check(st == 200 and "broker-a" in body, f"... with one: 200 ({st})")
    st, body, _ = http_get(nhp, "/metrics")
    check(st == 401 and "sprocket_" not in body,
          f"with httpMetricsToken its /metrics needs the token: 401 without ({st})")
    st, body, _ = http_get(nhp, "/health", token="wrong-token")
    check(st == 401, f"... /health too, 401 with a wrong one ({st})")
    st, body, _ = http_get(nhp, "/metrics", token="scrape-token-1")
    check(st == 200 and 'sprocket_namesrv_http_refused_total{reason="bad_token"} 2' in body,
          f"... 200 with it, and the refusals counted by reason ({st})")

    # ---- retry and dead-letter topics are their group ----
    for topic, pg in (("%RETRY%GroupDenied", "pg"), ("%DLQ%GroupDenied", "pg"),
                      ("%RETRY%GroupDenied", "GroupDenied")):
        c, remark, _ = rmt_call.call(addr, 310, signed(send_ext(topic, group=pg), b"inject",
                                                       "appuser1", "appsecret1"), b"inject")
        check(c == 16 and "GroupDenied" in remark,
              f"SEND to {topic} (producer group {pg}) by an account denied the group: refused ({c} {remark})")
    c, remark, _ = rmt_call.call(addr, 310, signed(send_ext("%RETRY%GroupOK", props="RETRY_TOPIC\x01TopicC\x02"),
                                                   b"inject", "appuser1", "appsecret1"), b"inject")
    check(c == 16 and "TopicC" in remark,
          f"SEND to a retry topic carrying a topic the account may not read: refused ({c} {remark})")

    # ---- lookups ----
    c, remark, body = rmt_call.call(addr, 33, signed({"offset": phys}, b"", "appuser1", "appsecret1"))
    check(c != 0 and b"secret body" not in body,
          f"VIEW_MESSAGE_BY_ID of a TopicC record by appuser1: not found ({c} {remark[:60]})")
    c, remark, body = rmt_call.call(addr, 33, signed({"offset": phys}, b"", "adminuser", "adminsecret"))
    check(c == 0 and b"secret body" in body, f"... by the admin account: found ({c})")
    walked = readable = 0
    for off in range(0, int(phys) + 1):
        c, _, body = rmt_call.call(addr, 33, signed({"offset": str(off)}, b"", "appuser1", "appsecret1"))
        walked += b"secret body" in body
        readable += b"readable" in body
    check(walked == 0 and readable == 3,
          f"walking every offset up to it reads the 3 TopicA records and no TopicC one ({readable}, {walked})")
    q = {"topic": "TopicC", "key": "secretkey", "maxNum": "32", "beginTimestamp": "0",
         "endTimestamp": str(2 ** 62)}
    c, remark, body = rmt_call.call(addr, 12, signed(q, b"", "appuser1", "appsecret1"))
    check(c == 16 and b"secret body" not in body, f"QUERY_MESSAGE on TopicC: refused ({c} {remark[:60]})")
    for code, what, ext in ((30, "GET_MAX_OFFSET", {"topic": "TopicC", "queueId": "0"}),
                            (31, "GET_MIN_OFFSET", {"topic": "TopicC", "queueId": "0"}),
                            (29, "SEARCH_OFFSET_BY_TIMESTAMP", {"topic": "TopicC", "queueId": "0",
                                                                "timestamp": "0"}),
                            (32, "GET_EARLIEST_MSG_STORETIME", {"topic": "TopicC", "queueId": "0"})):
        c, remark, _ = rmt_call.call(addr, code, signed(ext, b"", "appuser1", "appsecret1"))
        check(c == 16, f"{what} on TopicC by appuser1: refused ({c} {remark[:60]})")
    c, remark, _ = rmt_call.call(addr, 30, signed({"topic": "TopicA", "queueId": "0"}, b"", "appuser1",
                                                  "appsecret1"))
    check(c == 0, f"GET_MAX_OFFSET on TopicA (SUB): answered ({c} {remark[:60]})")

    # ---- SEND_BACK is a read: the message copied into a group's retries ----
    back = {"group": "GroupOK", "offset": phys, "delayLevel": "0", "originMsgId": msgid,
            "originTopic": "TopicC", "maxReconsumeTimes": "16"}
    c, remark, _ = rmt_call.call(addr, 36, signed(back, b"", "appuser1", "appsecret1"))
    check(c == 16, f"CONSUMER_SEND_MSG_BACK of a TopicC message into GroupOK's retries by appuser1: "
          f"refused ({c} {remark[:80]})")
    # a retry copy carries its topic (RETRY_TOPIC): a lookup of it is a read of that topic
    c, remark, _, ext = rmt_call.call_ext(addr, 310, signed(send_ext("%RETRY%GroupOK",
                                                                     props="RETRY_TOPIC\x01TopicC\x02"),
                                                            b"retried secret", "adminuser", "adminsecret"),
                                          b"retried secret")
    check(c == 0, f"the admin account puts a TopicC retry into GroupOK's retries ({c} {remark[:60]})")
    rphys = str(int(ext.get("msgId", "0" * 32)[16:], 16))
    c, remark, body = rmt_call.call(addr, 33, signed({"offset": rphys}, b"", "appuser1", "appsecret1"))
    check(c != 0 and b"retried secret" not in body,
          f"VIEW_MESSAGE_BY_ID of it by appuser1 (GroupOK SUB, TopicC DENY): not found ({c})")
    c, remark, body = rmt_call.call(addr, 33, signed({"offset": rphys}, b"", "adminuser", "adminsecret"))
    check(c == 0 and b"retried secret" in body, f"... by the admin account: found ({c})")

    # ---- END_TRANSACTION on another account's half ----
    props = "TRAN_MSG\x01true\x02PGROUP\x01pgT\x02"
    c, remark, _, ext = rmt_call.call_ext(addr, 310, signed(send_ext("TopicT", group="pgT", props=props,
                                                                     sysflag="4"),
                                                            b"half", "adminuser", "adminsecret"), b"half")
    check(c == 0 and ext.get("msgId"), f"the admin account sends a half message to TopicT ({c} {remark})")
    end = {"producerGroup": "pgT", "tranStateTableOffset": ext.get("queueOffset", "0"),
           "commitLogOffset": str(int(ext.get("msgId", "0" * 32)[16:], 16)), "commitOrRollback": "8",
           "fromTransactionCheck": "false", "msgId": ext.get("msgId", ""), "transactionId": "x"}
    c, remark, _ = rmt_call.call(addr, 37, signed(end, b"", "appuser1", "appsecret1"))
    check(c == 16, f"END_TRANSACTION commit by appuser1 (no right on TopicT): refused ({c} {remark})")
    c, _, _, mx = rmt_call.call_ext(addr, 30, signed({"topic": "TopicT", "queueId": "0"}, b"", "adminuser",
                                                     "adminsecret"))
    check(c == 0 and mx.get("offset") == "0", f"... and TopicT has no message ({mx.get('offset')})")
    c, remark, _ = rmt_call.call(addr, 37, signed(end, b"", "adminuser", "adminsecret"))
    check(c == 0, f"the admin account commits it ({c} {remark})")
    end_t = time.time() + 10
    while time.time() < end_t:
        mx = rmt_call.call_ext(addr, 30, signed({"topic": "TopicT", "queueId": "0"}, b"", "adminuser",
                                                "adminsecret"))[3]
        if mx.get("offset") == "1":
            break
        time.sleep(0.1)
    check(mx.get("offset") == "1", f"... and TopicT has it ({mx.get('offset')})")
    n = metric(hp, "sprocket_acl_hidden_records_total", 'door="remoting"')
    check(n == 3, f"/metrics counts the records lookups left out: two by id, one in the walk ({n})")

    # ---- the CLI escapes what it prints ----
    evil = "Evil\x1b]0;pwned\x07G\x1b[31m"
    hb = {"clientID": "cid\x1b[2J", "producerDataSet": [],
          "consumerDataSet": [{"groupName": evil, "consumeType": "CONSUME_PASSIVELY",
                               "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                               "subscriptionDataSet": [{"topic": "TopicA", "subString": "*",
                                                        "classFilterMode": False, "tagsSet": [],
                                                        "codeSet": [], "subVersion": 1}],
                               "unitMode": False}]}
    hbb = json.dumps(hb).encode()
    c, remark, _ = rmt_call.call(addr, 34, signed({}, hbb, "adminuser", "adminsecret"), hbb)
    rc, out, err = cli("group", "list", ak="adminuser", sk="adminsecret")
    check("\x1b" not in out + err and "\x07" not in out + err,
          f"sprocket group list prints no ESC or BEL (heartbeat {c}; rc {rc}; {(out + err)[:120]!r})")
    r = subprocess.run([CLI, "--namesrv=127.0.0.1:1\x1b]0;x\x07", "cluster", "list"], capture_output=True,
                       timeout=60)
    check(b"\x1b" not in r.stdout + r.stderr and b"\\x1b" in r.stderr,
          f"an error naming an address with ESC prints it escaped ({r.stderr[:120]!r})")

    # ---- a master the NameServer refuses write-protects itself ----
    p2 = broker(["--registerNameServerPeriod=1000", f"--dataplanePort={BASE + 30}",
                 f"--httpPort={BASE + 36}"], name="dup", wait=False)
    check(wait_log("dup", "write-protected", 30), "a second master of broker-a id 0: refused by the "
          "NameServer, it logs that it is write-protected")
    daddr = f"127.0.0.1:{rmt_port('dup')}"
    c, remark, _ = rmt_call.call(daddr, 310, signed(send_ext("TopicA"), b"x", "appuser1", "appsecret1"), b"x")
    check(c == 16 and "refused the registration" in remark,
          f"... and answers a direct SEND NO_PERMISSION with the reason ({c} {remark[:100]})")
    st, body, _ = http_get(BASE + 36, "/health")
    check(st == 503 and "write-protected" in body, f"... and says so on /health ({st} {body[:90]!r})")
    c, remark, _ = rmt_call.call(addr, 310, signed(send_ext("TopicA"), b"x", "appuser1", "appsecret1"), b"x")
    check(c == 0, f"the first master still takes writes ({c} {remark[:80]})")
    first = PROCS[1]
    first.send_signal(signal.SIGTERM)
    first.wait(30)
    check(wait_log("dup", "accept our registration again", 30),
          "once the first one stops, the second is accepted and lifts its write protection")
    c, remark, _ = rmt_call.call(daddr, 310, signed(send_ext("TopicA"), b"x", "appuser1", "appsecret1"), b"x")
    check(c in (0, 17), f"... and answers SENDs again ({c} {remark[:80]})")
    st, body, _ = http_get(BASE + 36, "/health")
    check(st == 200, f"... and /health says ready ({st} {body[:60]!r})")
    p2.send_signal(signal.SIGTERM)
    p2.wait(30)


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
         "tls": case_tls, "protected": case_protected, "doors": case_doors}[CASE]()
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
