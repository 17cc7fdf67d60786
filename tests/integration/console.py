# SPDX-License-Identifier: Apache-2.0
"""The web console in a real browser: headless Chromium against live daemons
(docs/observability.md; issue 26).

usage: console.py NAMESRV BROKER CLI SHOTS_DIR

A NameServer and a broker with their HTTP endpoints; the CLI creates topic ConT, sends 30
messages and consumes 10 as group ConG. Chromium (Debian's `chromium`, headless) loads the
broker's page and the test reads the DOM it built from /api/: the broker is ready, ConT is
listed (TBW102, a system topic, is not), ConG lags 20; a topic created after that appears
at the next load; once ConG read the rest its lag is 0. The message lookup (/?topic=&key=
on the page, /api/message behind it) finds two messages sent with a key, says which
groups consumed them, and finds one by its offset msgId and by its client msgId; bad
lookups get 400 with a reason. The NameServer's page lists the broker (master, id 0) and
ConT. Screenshots of both pages go to SHOTS_DIR (kept).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

NS, BK, CLI, SHOTS = sys.argv[1:5]
ENV = itest.Env("con-")
NSADDR = f"127.0.0.1:{ENV.base}"
HTTP, NS_HTTP = ENV.base + 5, ENV.base + 6
check = ENV.check


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("no chromium: scripts/bootstrap.sh installs Debian's chromium")


def browse(url, shot=None):
    """Load @url headless, let its scripts run (virtual time); return the DOM as HTML."""
    argv = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--virtual-time-budget=4000",
            f"--user-data-dir={ENV.tmp}/chromium", "--window-size=1280,1000"]
    if shot:
        r = subprocess.run(argv + [f"--screenshot={shot}", url], capture_output=True, text=True,
                           timeout=120)
        check(r.returncode == 0 and os.path.getsize(shot) > 10000,
              f"screenshot {shot} ({r.returncode}: {r.stderr.strip()[-200:]})")
    r = subprocess.run(argv + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"chromium failed ({r.returncode}): {r.stderr[-500:]}")
    return r.stdout


def group_lag(dom, group):
    m = re.search(rf'<tr data-group="{re.escape(group)}">.*?data-lag="(\d+)"', dom, re.S)
    return int(m.group(1)) if m else None


def cli(*args, stdin=None):
    return subprocess.run([CLI, f"--namesrv={NSADDR}"] + list(args), input=stdin,
                          capture_output=True, text=True, timeout=120)


def api(query):
    """GET /api/message?@query: (status, parsed JSON)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{HTTP}/api/message?{query}",
                                    timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def lookup_case(url):
    r = cli("produce", "ConT", "--key=ConK", stdin="alpha\nbeta\n")
    ids = re.findall(r"SEND_OK ([0-9A-F]{32}) ", r.stdout)
    check(r.returncode == 0 and len(ids) == 2, f"2 messages sent with key ConK ({r.stdout!r})")
    dom = browse(url + "?topic=ConT&key=ConK", os.path.join(SHOTS, "lookup.png"))
    rows = re.findall(r'<tr data-msgid="([0-9A-F]{32})">(.*?)</tr>', dom, re.S)
    check(sorted(i for i, _ in rows) == sorted(ids),
          f"the page's lookup by key lists both msgIds ({[i for i, _ in rows]})")
    check(all("ConG: not yet" in row for _, row in rows), "... not yet consumed by ConG")
    check(sorted(re.sub(r"<[^>]+>", "|", row).split("|")[9] for _, row in rows)
          == ["alpha", "beta"], "... with their bodies")
    check(cli("consume", "ConT", "--group=ConG", "-n", "2", "--wait-ms=2000").returncode == 0,
          "ConG consumed them")
    st, j = api("topic=ConT&key=ConK")
    check(st == 200 and len(j["messages"]) == 2 and
          all(c == {"group": "ConG", "consumed": True}
              for m in j["messages"] for c in m["consumedBy"]),
          f"/api/message: both consumed by ConG ({st} {j})")
    uniq = j["messages"][0]["properties"].get("UNIQ_KEY", "")
    want = j["messages"][0]["msgId"]
    st, j = api(f"id={want}")
    check(st == 200 and [m["msgId"] for m in j["messages"]] == [want],
          f"found by its offset msgId ({st} {j})")
    st, j = api(f"topic=ConT&id={uniq}")
    check(st == 200 and [m["msgId"] for m in j["messages"]] == [want],
          f"found by its client msgId and topic ({st} {j})")
    st, j = api(f"id={uniq}")
    check(st == 200 and j["messages"] == [] and "topic" in j.get("hint", ""),
          f"a client msgId without the topic: none, and a hint ({st} {j})")
    st, j = api("id=" + want[:-1] + ("0" if want[-1] != "0" else "1"))
    check(st == 200 and j["messages"] == [], f"an offset msgId inside a record: none ({j})")
    for q in ("key=ConK", "topic=ConT", "id=xyz", "topic=" + "T" * 300 + "&key=k"):
        st, j = api(q)
        check(st == 400 and j.get("error"), f"?{q[:40]}: 400 with a reason ({st} {j})")
    dom = browse(url + "?id=xyz")
    check(re.search(r'<div id="found" class="err">[^<]*32 hex', dom) is not None,
          "the page shows why a lookup was refused")


def ready():
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{HTTP}/health", timeout=3) as r:
            return r.status == 200
    except OSError:
        return False


def main_case():
    os.makedirs(SHOTS, exist_ok=True)
    ENV.start("namesrv", [NS, f"--listenPort={ENV.base}", f"--kvConfigPath={ENV.tmp}/kv.json",
                          "--bindAddress=127.0.0.1", f"--httpPort={NS_HTTP}"])
    if not ENV.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")
    ENV.start("broker", [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0",
                         "--brokerName=broker-c", f"--dataplanePort={ENV.base + 20}",
                         "--dataplaneCores=2", f"--storePathRootDir={ENV.tmp}/store",
                         "--mapedFileSizeCommitLog=1048576", "--mapedFileSizeConsumeQueue=60000",
                         f"--storeBufferDir={ENV.tmp}", "--registerNameServerPeriod=1000",
                         f"--httpPort={HTTP}", "--httpBindAddress=127.0.0.1"])
    end = time.time() + 30
    while time.time() < end and not ready():
        time.sleep(0.2)
    check(ready(), "the broker is ready (/health 200)")
    ok = False
    for _ in range(50):
        if cli("topic", "create", "ConT", "--queues=4").returncode == 0:
            ok = True
            break
        time.sleep(0.2)
    check(ok, "topic ConT created")
    r = cli("produce", "ConT", stdin="".join(f"m{i}\n" for i in range(30)))
    check(r.returncode == 0, f"30 messages sent ({r.stderr.strip()[-100:]})")
    r = cli("consume", "ConT", "--group=ConG", "--from=first", "-n", "10", "--wait-ms=2000")
    check(r.returncode == 0, "ConG consumed 10 and committed")

    url = f"http://127.0.0.1:{HTTP}/"
    dom = browse(url, os.path.join(SHOTS, "broker.png"))
    check('data-ready="true"' in dom, "the broker's page says ready")
    check('data-topic="ConT"' in dom, "the broker's page lists ConT")
    check('data-topic="TBW102"' not in dom, "... and not the system topic TBW102")
    check(group_lag(dom, "ConG") == 20, f"ConG lags 20 ({group_lag(dom, 'ConG')})")
    check("core 0 p50" in dom and "core 1 p99" in dom, "the latency chart has a legend per core")

    check(cli("topic", "create", "ConNew", "--queues=2").returncode == 0, "topic ConNew created")
    r = cli("consume", "ConT", "--group=ConG", "-n", "20", "--wait-ms=2000")
    check(r.returncode == 0, "ConG consumed the rest")
    dom = browse(url)
    check('data-topic="ConNew"' in dom, "a topic just created appears")
    check(group_lag(dom, "ConG") == 0, f"ConG's lag dropped to 0 ({group_lag(dom, 'ConG')})")
    lookup_case(url)

    dom = browse(f"http://127.0.0.1:{NS_HTTP}/", os.path.join(SHOTS, "namesrv.png"))
    check(re.search(r'<tr data-broker="broker-c" data-id="0">.*?master', dom, re.S) is not None,
          "the NameServer's page lists broker-c as master")
    check('data-topic="ConT"' in dom, "the NameServer's page lists ConT")
    print(f"screenshots in {SHOTS}")


def main():
    try:
        main_case()
    finally:
        rc = ENV.finish("CON_KEEP")
    sys.exit(rc)


if __name__ == "__main__":
    main()
