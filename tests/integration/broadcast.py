# SPDX-License-Identifier: Apache-2.0
"""libsprocket broadcast push consumers with offsets on their own disk (docs/client.md;
issue 27).

usage: broadcast.py NAMESRV BROKER SP_XTOOL CLI

Topic BcT (4 queues), 200 messages. Two members of broadcast group BcG, each with its own
offset directory (sp_xtool consume --mode=push --broadcast --offset-dir=...), both consume all
200. The broker keeps no offset for BcG. Each member's <dir>/BcG.json holds an offset per
queue that sums to 200. Then 50 more messages: member A, restarted on its directory, consumes
exactly those 50 (none of the first 200 again); a member with a fresh directory and
--from=first consumes all 250. Last, an orderly consumer with fixed membership (not
broadcast) reads all 250, every queue in offset order.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

NS, BK, XT, CLI = sys.argv[1:5]
ENV = itest.Env("bc-")
NSADDR = f"127.0.0.1:{ENV.base}"
check = ENV.check


def consume(name, count, extra=()):
    d = os.path.join(ENV.tmp, "offsets-" + name)
    r = subprocess.run([XT, "consume", f"--namesrv={NSADDR}", "--topic=BcT", "--group=BcG",
                        "--mode=push", "--broadcast", f"--offset-dir={d}", f"--count={count}",
                        "--linger-ms=1500", "--timeout-ms=30000"] + list(extra),
                       capture_output=True, text=True, timeout=90)
    keys = [json.loads(l).get("keys") for l in r.stdout.splitlines() if l.startswith("{")]
    return r, keys, d


def produce(start, n):
    r = subprocess.run([XT, "produce", f"--namesrv={NSADDR}", "--topic=BcT", f"--count={n}",
                        f"--start={start}", "--keys=bc-{i}"], capture_output=True, text=True,
                       timeout=60)
    return r.returncode == 0 and r.stdout.count('"ok":true') == n


def main_case():
    ENV.start_pair(NS, BK, CLI, "BcT", 4, broker="broker-c")
    check(produce(0, 200), "200 messages sent")
    want = {f"bc-{i}" for i in range(200)}
    for name in ("A", "B"):
        r, keys, d = consume(name, 200)
        check(r.returncode == 0 and set(keys) == want and len(keys) == 200,
              f"member {name} consumed all 200, once each ({len(keys)}, {len(set(keys))} "
              f"distinct; {r.stderr.strip()[-200:]})")
        try:
            with open(os.path.join(d, "BcG.json")) as f:
                tab = json.load(f)["offsetTable"]
        except (OSError, ValueError, KeyError) as e:
            tab = {"error": str(e)}
        check(len(tab) == 4 and sum(tab.values()) == 200,
              f"member {name}'s {d}/BcG.json: an offset per queue, summing to 200 ({tab})")
    r = subprocess.run([CLI, f"--namesrv={NSADDR}", "--json", "group", "describe", "BcG"],
                       capture_output=True, text=True, timeout=60)
    try:
        queues = json.loads(r.stdout).get("queues", []) if r.returncode == 0 else []
    except ValueError:
        queues = [{"unparsed": r.stdout[:200]}]
    committed = [q for q in queues if q.get("consumerOffset", -1) > 0]
    check(not committed, f"the broker keeps no offset for the broadcast group ({committed[:2]}; "
          f"group describe: {r.returncode} {(r.stdout + r.stderr).strip()[:160]})")
    check(produce(200, 50), "50 more sent")
    r, keys, _ = consume("A", 50)
    check(r.returncode == 0 and set(keys) == {f"bc-{i}" for i in range(200, 250)} and
          len(keys) == 50, f"A, restarted on its offsets, consumed the 50 new ones only "
          f"({len(keys)}: {sorted(set(keys) - {f'bc-{i}' for i in range(200, 250)})[:5]})")
    r, keys, _ = consume("C", 250, ["--from=first"])
    check(r.returncode == 0 and len(set(keys)) == 250, f"a new member reads all 250 ({len(keys)})")
    # an orderly consumer with fixed membership (one member) locks its queues, then reads
    r = subprocess.run([XT, "consume", f"--namesrv={NSADDR}", "--topic=BcT", "--group=BcOrd",
                        "--mode=push", "--orderly", "--count=250", "--linger-ms=500",
                        "--timeout-ms=30000"], capture_output=True, text=True, timeout=90)
    got = [(json.loads(l)["queueId"], json.loads(l)["queueOffset"])
           for l in r.stdout.splitlines() if l.startswith("{")]
    in_order = all(a[1] < b[1] for q in {g[0] for g in got}
                   for a, b in zip([g for g in got if g[0] == q], [g for g in got if g[0] == q][1:]))
    check(r.returncode == 0 and len(set(got)) == 250 and in_order,
          f"an orderly fixed-membership consumer reads all 250, each queue in order ({len(got)})")


def main():
    try:
        main_case()
    finally:
        rc = ENV.finish("BC_KEEP")
    sys.exit(rc)


if __name__ == "__main__":
    main()
