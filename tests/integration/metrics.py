# SPDX-License-Identifier: Apache-2.0
"""The broker's HTTP endpoints with real daemons (docs/observability.md; issue 26).
usage: metrics.py NAMESRV BROKER CLI CASE SP_XTOOL
  counts   /health is 503 until the broker is registered, then 200 "ready"; /metrics parses
           with Prometheus' own parser (python3-prometheus-client) and passes `promtool check
           metrics` (names, units, types), every counter family is
           monotone between two scrapes, and after N messages sent and consumed
           sprocket_core_messages_in_total rose by N and messages_out_total by at least N,
           the message bytes likewise; a dataplane SEND over maxMessageSize counts one
           errors_total{op="send",status="MESSAGE_ILLEGAL"}.
           The latency histograms are histograms: per series, buckets are cumulative
           (monotone in le), +Inf equals _count; the store-append one counted N appends and
           the remoting request one at least N requests, the durable-wait one (SYNC_FLUSH) the N that waited. Consumer lag: a group that
           consumed everything lags 0 in every queue; after M more messages its lag sums
           to M, and back to 0 once it consumed them. A PULL parked as a long poll and woken by
           a SEND counts one sample in the wake-up histogram.
  abuse    Malformed, oversized and slow requests: garbage bytes, a 40 KiB header (431), a
           20 KiB URL (414), POST (405), an unknown path (404), more connections from one
           address than allowed, and slow senders that never finish a request: the broker
           stays up, /health still answers 200 while the slow ones hang, and they are closed
           within the idle timeout.
  namesrv  The NameServer's /health (200 ready) and /metrics: one broker address registered,
           named with its cluster, brokerName and id; REGISTER_BROKER counted; N route
           lookups counted by request and by the route-lookup histogram (cumulative, +Inf ==
           _count); an unknown request counted as "other".
  ports    An explicit httpPort that is taken stops the start with an error naming the key;
           the default one (listenPort - 2831) taken only logs a warning; httpPort=0 is off.
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # python3 from outside Debian (pyenv): Debian's package is still there
    sys.path.append("/usr/lib/python3/dist-packages")
    from prometheus_client.parser import text_string_to_metric_families

NS, BK, CLI, CASE, XT = sys.argv[1:6]
ENV = itest.Env("met-")
NSADDR = f"127.0.0.1:{ENV.base}"
HTTP = ENV.base + 5
HTTPD_IDLE_S = 10  # control/include/control/httpd.h
check = ENV.check


def wait_until(fn, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    return None


NS_HTTP = ENV.base + 6


def namesrv():
    ENV.start("namesrv", [NS, f"--listenPort={ENV.base}", f"--kvConfigPath={ENV.tmp}/kv.json",
                          "--bindAddress=127.0.0.1", f"--httpPort={NS_HTTP}"])
    if not ENV.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")


def broker_argv(name, extra=(), listen=0):
    return [BK, f"--namesrvAddr={NSADDR}", f"--listenPort={listen}", f"--brokerName={name}",
            f"--dataplanePort={ENV.base + 20}", "--dataplaneCores=2",
            f"--storePathRootDir={ENV.tmp}/{name}", "--mapedFileSizeCommitLog=1048576",
            "--mapedFileSizeConsumeQueue=60000", f"--storeBufferDir={ENV.tmp}",
            "--registerNameServerPeriod=1000", "--httpBindAddress=127.0.0.1"] + list(extra)


def get(path, port=HTTP, method="GET", data=None):
    """Return: (status, body text); (None, why) when no answer came."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


HISTOGRAMS = ("sprocket_core_request_seconds", "sprocket_core_store_append_seconds",
              "sprocket_core_durable_wait_seconds", "sprocket_core_long_poll_wake_seconds",
              "sprocket_store_flush_seconds")


def promtool(port, what):
    """`promtool check metrics` (Debian's, unpacked by scripts/bootstrap.sh) on a scrape."""
    st, text = get("/metrics", port=port)
    try:
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    except FileNotFoundError:
        check(False, "promtool is installed (scripts/bootstrap.sh)")
        return
    check(st == 200 and r.returncode == 0,
          f"promtool check metrics: {what}'s /metrics passes ({r.returncode}: "
          f"{(r.stdout + r.stderr).strip()[:300]})")


def scrape(types=None, port=HTTP):
    """Return: {(name, sorted labels): value} of every sample; @types gets {family: type}."""
    st, text = get("/metrics", port=port)
    if st != 200:
        raise SystemExit(f"/metrics answered {st}: {text[:200]}")
    out = {}
    for fam in text_string_to_metric_families(text):
        if types is not None:
            types[fam.name] = fam.type
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def histogram_faults(m, fam):
    """Return: what is wrong with the histogram family @fam in the scrape @m (a list)."""
    series = {}
    for (n, labels), v in m.items():
        if n == fam + "_bucket":
            rest = tuple(kv for kv in labels if kv[0] != "le")
            le = dict(labels)["le"]
            series.setdefault(rest, []).append((float("inf") if le == "+Inf" else float(le), v))
    bad = []
    if not series:
        bad.append(f"{fam}: no series")
    for rest, buckets in series.items():
        buckets.sort()
        counts = [v for _, v in buckets]
        if any(b < a for a, b in zip(counts, counts[1:])):
            bad.append(f"{fam}{rest}: buckets not monotone")
        if buckets[-1][0] != float("inf") or m.get((fam + "_count", rest)) != counts[-1]:
            bad.append(f"{fam}{rest}: +Inf != _count")
        if (fam + "_sum", rest) not in m:
            bad.append(f"{fam}{rest}: no _sum")
    return bad


def lag(m, group):
    """Return: {(topic, queue): lag} of @group."""
    return {(dict(k[1])["topic"], dict(k[1])["queue"]): v for k, v in m.items()
            if k[0] == "sprocket_consumer_lag_messages" and dict(k[1]).get("group") == group}


def total(m, name):
    return sum(v for (n, _), v in m.items() if n == name)


def cli(*args, stdin=None):
    return subprocess.run([CLI, f"--namesrv={NSADDR}", "--json"] + list(args), input=stdin,
                          capture_output=True, text=True, timeout=120)


def case_counts():
    namesrv()
    p = ENV.start("broker", broker_argv("broker-m", [f"--httpPort={HTTP}",
                                                     "--flushDiskType=SYNC_FLUSH",
                                                     "--maxMessageSize=1024"]))
    if not ENV.wait_log("broker", "HTTP (/metrics, /health, /api/, the console) listening on 127.0.0.1:", 30):
        raise SystemExit("no HTTP listener in the broker's log")
    ok = wait_until(lambda: get("/health")[0] == 200, 30)
    st, body = get("/health")
    check(ok and body.startswith("ready\n") and "registered with 1 of 1 NameServers" in body,
          f"/health: 200 ready once registered ({st} {body!r})")
    check(get("/metrics", method="HEAD")[0] == 200, "HEAD /metrics: 200")
    check(wait_until(lambda: cli("topic", "create", "MetT", "--queues=4").returncode == 0),
          "topic created")
    types = {}
    before = scrape(types)
    n = 60
    r = cli("produce", "MetT", stdin="\n".join(f"m{i}" for i in range(n)) + "\n")
    sent = r.stdout.count('"SEND_OK"')
    check(sent == n, f"{n} messages SEND_OK ({sent})")
    got = wait_until(lambda: (lambda c: c if c.stdout.count('"body"') >= n else None)(
        cli("consume", "MetT", "--from=first", "-n", str(n), "--wait-ms=2000")), 40)
    check(got is not None, f"{n} messages consumed")
    after = scrape()
    promtool(HTTP, "the broker")
    din = total(after, "sprocket_core_messages_in_total") - total(before, "sprocket_core_messages_in_total")
    dout = total(after, "sprocket_core_messages_out_total") - total(before, "sprocket_core_messages_out_total")
    check(din == n, f"sprocket_core_messages_in_total rose by {n} ({din})")
    check(dout >= n, f"sprocket_core_messages_out_total rose by at least {n} ({dout})")
    bin_ = total(after, "sprocket_core_message_bytes_in_total") - \
        total(before, "sprocket_core_message_bytes_in_total")
    bout = total(after, "sprocket_core_message_bytes_out_total") - \
        total(before, "sprocket_core_message_bytes_out_total")
    # a record: 91 bytes of fixed fields, the topic, the body and its properties
    check(n * (91 + 4 + 2) < bin_ < n * 1024, f"message bytes in: {n} records' worth ({bin_})")
    check(bout >= bin_, f"message bytes out at least those in ({bout} >= {bin_})")
    check(total(after, "sprocket_core_pending_acks") == 0 and
          len([k for k in after if k[0] == "sprocket_core_pulls_parked"]) == 2,
          "pending acks 0 once every SEND was answered; parked PULLs per core")
    # a dataplane SEND (libsprocket) the core refuses: over maxMessageSize
    r = subprocess.run([XT, "produce", f"--namesrv={NSADDR}", "--topic=MetT", "--count=1",
                        "--body=" + "x" * 2000], capture_output=True, text=True, timeout=60)
    errs = [(k, v) for k, v in scrape().items() if k[0] == "sprocket_core_errors_total"]
    check(r.returncode != 0 and len(errs) == 1 and
          dict(errs[0][0][1]).get("status") == "MESSAGE_ILLEGAL" and errs[0][1] == 1,
          f"a body over maxMessageSize: errors_total{{op=send,status=MESSAGE_ILLEGAL}} 1 ({errs})")
    back = [k for k, v in before.items()
            if k[0].endswith("_total") and k in after and after[k] < v]
    check(not back, f"no counter went back between scrapes ({back[:3]})")
    info = [k for k in after if k[0] == "sprocket_broker_info"]
    check(len(info) == 1 and ("broker_name", "broker-m") in info[0][1],
          f"sprocket_broker_info names the broker ({info})")
    check(after.get(("sprocket_broker_topics", ())) is not None and
          after[("sprocket_broker_topics", ())] >= 1, "sprocket_broker_topics counts MetT")
    written = total(after, "sprocket_store_commitlog_written_bytes")
    check(written > 0, f"the CommitLog's end is exported ({written} bytes)")
    faults = [k for k in after if k[0] == "sprocket_core_page_faults_total"]
    check(len(faults) == 4, f"page faults per core and kind ({len(faults)} samples)")
    for fam in HISTOGRAMS:
        bad = histogram_faults(after, fam)
        check(types.get(fam) == "histogram" and not bad,
              f"{fam} is a histogram, cumulative, +Inf == _count ({types.get(fam)} {bad[:2]})")

    def hcount(m, fam, **want):
        return sum(v for (nm, lb), v in m.items() if nm == fam + "_count" and
                   all(dict(lb).get(k) == w for k, w in want.items()))
    d = hcount(after, "sprocket_core_store_append_seconds") - \
        hcount(before, "sprocket_core_store_append_seconds")
    check(d == n, f"sprocket_core_store_append_seconds counted {n} appends ({d})")
    d = hcount(after, "sprocket_core_durable_wait_seconds") - \
        hcount(before, "sprocket_core_durable_wait_seconds")
    # a SEND whose flush happened to land before its answer was due waits for nothing
    check(n - 3 <= d <= n, f"SYNC_FLUSH: sprocket_core_durable_wait_seconds counted ~{n} waits ({d})")
    d = hcount(after, "sprocket_store_flush_seconds") - hcount(before, "sprocket_store_flush_seconds")
    check(d >= 1, f"sprocket_store_flush_seconds counted the flush rounds ({d})")
    segs = [v for (nm, _), v in after.items() if nm == "sprocket_store_commitlog_segments"]
    check(len(segs) == 2 and all(v >= 1 for v in segs), f"a segment per shard at least ({segs})")
    d = hcount(after, "sprocket_core_request_seconds", port="remoting") - \
        hcount(before, "sprocket_core_request_seconds", port="remoting")
    check(d >= n, f"sprocket_core_request_seconds{{port=remoting}} counted >= {n} ({d})")
    # consumer lag: a group that read everything, then M more messages
    r = cli("consume", "MetT", "--group=MetG", "--from=first", "-n", str(n), "--wait-ms=2000")
    check(r.returncode == 0 and r.stdout.count('"body"') >= n, "MetG consumed the topic")
    lg = lag(scrape(), "MetG")
    check(len(lg) == 4 and all(v == 0 for v in lg.values()),
          f"MetG lags 0 in each of the 4 queues ({lg})")
    more = 20
    r = cli("produce", "MetT", stdin="\n".join(f"x{i}" for i in range(more)) + "\n")
    check(r.stdout.count('"SEND_OK"') == more, f"{more} more sent")
    lg = lag(scrape(), "MetG")
    check(sum(lg.values()) == more, f"MetG's lag sums to {more} ({lg})")
    r = cli("consume", "MetT", "--group=MetG", "-n", str(more), "--wait-ms=2000")
    check(r.returncode == 0, "MetG consumed the rest")
    lg = wait_until(lambda: (lambda v: v if v and sum(v.values()) == 0 else None)(
        lag(scrape(), "MetG")), 10)
    check(lg is not None, f"MetG's lag is back to 0 ({lag(scrape(), 'MetG')})")
    # a long poll woken by an append: the wake-up histogram counts it
    check(cli("topic", "create", "MetW", "--queues=1").returncode == 0, "topic MetW created")
    w0 = hcount(scrape(), "sprocket_core_long_poll_wake_seconds")
    s = long_poll(ENV.rmt_port("broker"), "MetW", 0)
    time.sleep(0.5)  # parked by now
    r = cli("produce", "MetW", stdin="wake\n")
    code = frame_code(s)
    s.close()
    check(r.stdout.count('"SEND_OK"') == 1 and code == 0, f"the parked PULL answered SUCCESS ({code})")
    w1 = hcount(scrape(), "sprocket_core_long_poll_wake_seconds")
    check(w1 - w0 == 1, f"sprocket_core_long_poll_wake_seconds counted the wake-up ({w1 - w0})")
    check(p.poll() is None, "the broker is up")


def long_poll(port, topic, offset, suspend_ms=10000):
    """A remoting PULL_MESSAGE (code 11) with FLAG_SUSPEND: the broker parks it. Return: the socket."""
    ext = {"consumerGroup": "MetLP", "topic": topic, "queueId": "0", "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
           "suspendTimeoutMillis": str(suspend_ms), "subscription": "*", "subVersion": "0"}
    hdr = json.dumps({"code": 11, "flag": 0, "language": "JAVA", "opaque": 77,
                      "serializeTypeCurrentRPC": "JSON", "version": 401,
                      "extFields": ext}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall((4 + len(hdr)).to_bytes(4, "big") + len(hdr).to_bytes(4, "big") + hdr)
    return s


def frame_code(s):
    """The code of the next response frame on @s (None when none came)."""
    try:
        head = s.recv(8)
        if len(head) < 8:
            return None
        hlen = int.from_bytes(head[4:8], "big") & 0xffffff
        h = b""
        while len(h) < hlen:
            h += s.recv(hlen - len(h))
        return json.loads(h)["code"]
    except (OSError, ValueError):
        return None


def raw(payload, read=True):
    s = socket.create_connection(("127.0.0.1", HTTP), timeout=5)
    try:
        s.sendall(payload)
        return s.recv(4096).decode(errors="replace") if read else ""
    except OSError as e:
        return f"error {e}"
    finally:
        s.close()


def case_abuse():
    namesrv()
    p = ENV.start("broker", broker_argv("broker-a", [f"--httpPort={HTTP}"]))
    if not ENV.wait_log("broker", "HTTP (/metrics, /health, /api/, the console) listening on", 30):
        raise SystemExit("no HTTP listener in the broker's log")
    wait_until(lambda: get("/health")[0] == 200, 30)
    g = socket.create_connection(("127.0.0.1", HTTP), timeout=5)
    g.sendall(b"\x00\x01\x02 not http at all\r\n\r\n\x7f\xff" * 10)
    check(get("/health")[0] == 200, "garbage on one connection: /health still 200 on another")
    g.settimeout(HTTPD_IDLE_S + 5)
    try:
        ans = g.recv(4096).decode(errors="replace")
    except OSError as e:
        ans = f"error {e}"
    g.close()
    check(ans == "" or " 400 " in ans.split("\r\n")[0] or "reset" in ans,
          f"garbage: 400, or closed within the idle timeout ({ans[:40]!r})")
    ans = raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
    check(" 431 " in ans.split("\r\n")[0] or ans == "" or ans.startswith("error"),
          f"a 40 KiB header: 431 or closed ({ans[:40]!r})")
    ans = raw(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    check(" 414 " in ans.split("\r\n")[0] or ans == "" or ans.startswith("error"),
          f"a 20 KiB URL: 414 or closed ({ans[:40]!r})")
    check(get("/metrics", method="POST", data=b"x=1")[0] == 405, "POST: 405")
    check(get("/nope")[0] == 404, "an unknown path: 404")
    # more connections than one address may hold: the extra ones are closed, the daemon stays
    many = []
    for _ in range(40):
        try:
            many.append(socket.create_connection(("127.0.0.1", HTTP), timeout=2))
        except OSError:
            break
    time.sleep(0.5)
    for s in many:
        s.close()
    time.sleep(0.5)
    check(get("/health")[0] == 200, "after 40 idle connections from one address: /health 200")
    # slow senders: half a request, a byte a second
    slow = []
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", HTTP), timeout=2)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    t0 = time.time()
    st, _ = get("/health")
    check(st == 200 and time.time() - t0 < 3,
          f"/health answers while 8 slow senders hang ({st}, {time.time() - t0:.2f} s)")
    closed = 0
    end = time.time() + 25
    while time.time() < end and closed < len(slow):
        closed = 0
        for s in slow:
            try:
                s.settimeout(0.1)
                if s.recv(1) == b"":
                    closed += 1
            except socket.timeout:
                pass
            except OSError:
                closed += 1
        time.sleep(0.5)
    check(closed == len(slow), f"slow senders closed within the idle timeout ({closed} of 8)")
    for s in slow:
        s.close()
    check(p.poll() is None and get("/health")[0] == 200, "the broker is up and ready")
    st, _ = get("/metrics")
    check(st == 200, "/metrics still answers")


def case_namesrv():
    namesrv()
    check(ENV.wait_log("namesrv", f"HTTP (/metrics, /health, /api/, the console) listening on 127.0.0.1:{NS_HTTP}",
                       10), "the NameServer's HTTP listens on loopback by default")
    st, body = get("/health", port=NS_HTTP)
    check(st == 200 and body.startswith("ready\n"), f"NameServer /health: 200 ready ({st} {body!r})")
    p = ENV.start("broker", broker_argv("broker-n", ["--httpPort=0"]))
    check(wait_until(lambda: scrape(port=NS_HTTP).get(("sprocket_namesrv_brokers", ())) == 1, 30),
          "sprocket_namesrv_brokers: 1 once the broker registered")
    check(wait_until(lambda: cli("topic", "create", "NsT", "--queues=2").returncode == 0),
          "topic created")
    types = {}
    before = scrape(types, port=NS_HTTP)
    rows = [dict(k[1]) for k in before if k[0] == "sprocket_namesrv_broker"]
    check(len(rows) == 1 and rows[0].get("broker_name") == "broker-n" and
          rows[0].get("broker_id") == "0" and rows[0].get("cluster") == "DefaultCluster",
          f"sprocket_namesrv_broker names the registered address ({rows})")
    reg = before.get(("sprocket_namesrv_requests_total", (("request", "REGISTER_BROKER"),)), 0)
    check(reg >= 1, f"REGISTER_BROKER counted ({reg})")
    n = 5
    for _ in range(n):
        r = cli("topic", "route", "NsT")
        check(r.returncode == 0, "topic route answered")
    # an unknown request code: REQUEST_CODE_NOT_SUPPORTED, counted as other
    hdr = b'{"code":9999,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":401}'
    with socket.create_connection(("127.0.0.1", ENV.base), timeout=5) as s:
        s.sendall((4 + len(hdr)).to_bytes(4, "big") + len(hdr).to_bytes(4, "big") + hdr)
        s.recv(4096)
    after = scrape(types, port=NS_HTTP)
    promtool(NS_HTTP, "the NameServer")
    key = ("sprocket_namesrv_requests_total", (("request", "GET_ROUTEINFO_BY_TOPIC"),))
    d = after.get(key, 0) - before.get(key, 0)
    check(d >= n, f"GET_ROUTEINFO_BY_TOPIC counted {n} more ({d})")
    h = "sprocket_namesrv_route_lookup_seconds"
    dh = after.get((h + "_count", ()), 0) - before.get((h + "_count", ()), 0)
    check(dh == d, f"the route-lookup histogram counted the same lookups ({dh} vs {d})")
    bad = histogram_faults(after, h)
    check(types.get(h) == "histogram" and not bad, f"{h}: a histogram, cumulative ({bad[:2]})")
    key = ("sprocket_namesrv_requests_total", (("request", "other"),))
    check(after.get(key, 0) - before.get(key, 0) == 1, "an unknown request counted as other")
    check(after.get(("sprocket_namesrv_topics", ()), 0) >= 1, "sprocket_namesrv_topics counts NsT")
    check(p.poll() is None, "the broker is up")


def case_ports():
    namesrv()
    hold = socket.socket()
    hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hold.bind(("127.0.0.1", HTTP))
    hold.listen(1)
    p = ENV.start("b1", broker_argv("broker-p", [f"--httpPort={HTTP}"]))
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    log = ENV.log_of("b1")
    check(rc not in (0, None) and f"httpPort {HTTP}" in log,
          f"an explicit httpPort taken: the start fails naming it (rc {rc})")
    # the default: listenPort - 2831, taken -> a warning, the broker runs
    listen = HTTP + 2831
    p = ENV.start("b2", broker_argv("broker-q", [], listen=listen))
    check(ENV.wait_log("b2", " ready: ", 30), "with the default port taken the broker starts")
    check("HTTP endpoints off: port" in ENV.log_of("b2"), "... and says the endpoints are off")
    p.terminate()
    p.wait(60)
    hold.close()
    p = ENV.start("b3", broker_argv("broker-r", ["--httpPort=0"]))
    check(ENV.wait_log("b3", " ready: ", 30) and
          "HTTP endpoints off (httpPort=0)" in ENV.log_of("b3"), "httpPort=0: off, said so")


def main():
    try:
        {"counts": case_counts, "abuse": case_abuse, "ports": case_ports,
         "namesrv": case_namesrv}[CASE]()
    finally:
        rc = ENV.finish("MET_KEEP")
    sys.exit(rc)


if __name__ == "__main__":
    main()
