# SPDX-License-Identifier: Apache-2.0
"""libsprocket consumer groups that rebalance as members come and go (docs/client.md;
issue 27).

usage: rebalance.py NAMESRV BROKER SP_XTOOL CLI STRATEGY     (average | hash | orderly)

A broker with topic RbT (8 queues) and a producer (sp_xtool, dataplane) sending keys rb-0..
in bursts for about 14 s. Push consumers of group RbG (sp_xtool consume --mode=push
--rebalance=STRATEGY --rebalance-ms=500), each its own process and member:
  t=0 A joins; t=1 B joins; t=4 C joins; t=6 B is SIGKILLed; t=8 D joins;
  t=10 A stops (SIGTERM: commits, unregisters).
Checked:
  - nothing lost: every key that got SEND_OK was consumed by some member;
  - every duplicate is one the at-least-once window allows: its first consumer was a member
    that then gave the queue up (B's kill, A's stop, or a rebalance), and the second came
    later from another member;
  - once the group is stable (C and D, from 3 rebalance periods after A's exit), no message
    is consumed twice and the two split the 8 queues with no queue at both;
  - after each change the queues come back to one owner each (no queue idle: all consumed).
Members go by fixed client ids (rbl-A..rbl-D), so each run allocates alike: with ids from
pids, the hash ring gave all 8 queues to one of two members for about 1 pair in 110, and
"C and D split" failed on a correct allocation.
orderly (average allocation, orderly members: the broker's queue locks): the same without
the kill (a dead member's locks hold its queues for the broker's 60 s), and stricter: no
message consumed twice at all, and each queue's messages consumed in offset order across
members (a new owner starts after the last message the old one consumed).
Prints the duplicate count, and how long after B's kill and A's stop their queues were
consumed again by the others.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

NS, BK, XT, CLI, STRATEGY = sys.argv[1:6]
ENV = itest.Env("rbl-")
NSADDR = f"127.0.0.1:{ENV.base}"
check = ENV.check
REBALANCE_MS = 500
ORDERLY = STRATEGY == "orderly"


class Member:
    def __init__(self, name):
        self.name = name
        self.got = []  # (monotonic time, key, queueId)
        how = ["--rebalance=average", "--orderly"] if ORDERLY else [f"--rebalance={STRATEGY}"]
        self.p = subprocess.Popen(
            [XT, "consume", f"--namesrv={NSADDR}", "--topic=RbT", "--group=RbG", "--mode=push",
             f"--rebalance-ms={REBALANCE_MS}", "--count=0", "--timeout-ms=120000",
             "--from=first", f"--client-id=rbl-{name}"] + how,
            stdout=subprocess.PIPE, stderr=open(os.path.join(ENV.tmp, name + ".err"), "w"),
            text=True)
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            self.got.append((time.monotonic(), m.get("keys", ""), m.get("queueId"),
                             m.get("queueOffset")))


def produce(stop, sent):
    i = 0
    while not stop.is_set():
        r = subprocess.run([XT, "produce", f"--namesrv={NSADDR}", "--topic=RbT", "--count=200",
                            f"--start={i}", "--keys=rb-{i}", "--body=m{i}"],
                           capture_output=True, text=True, timeout=60)
        for line in r.stdout.splitlines():
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if m.get("ok"):
                sent[m["keys"]] = time.monotonic()
        i += 200
        time.sleep(0.05)


def main_case():
    ENV.start_pair(NS, BK, CLI, "RbT", 8, broker="broker-r")

    sent, stop = {}, threading.Event()
    members, events = {}, []
    t0 = time.monotonic()
    members["A"] = Member("A")
    time.sleep(1)
    prod = threading.Thread(target=produce, args=(stop, sent), daemon=True)
    prod.start()
    members["B"] = Member("B")
    time.sleep(3)
    members["C"] = Member("C")
    events.append(("C joined", time.monotonic()))
    time.sleep(2)
    if ORDERLY:
        members["B"].p.send_signal(signal.SIGTERM)  # a dead one's locks would hold 60 s
        check(members["B"].p.wait(30) == 0, "B stopped cleanly on SIGTERM")
        events.append(("B stopped", time.monotonic()))
    else:
        members["B"].p.send_signal(signal.SIGKILL)
        events.append(("B killed", time.monotonic()))
    time.sleep(2)
    members["D"] = Member("D")
    events.append(("D joined", time.monotonic()))
    time.sleep(2)
    members["A"].p.send_signal(signal.SIGTERM)
    a_left = time.monotonic()
    events.append(("A stopped", a_left))
    check(members["A"].p.wait(30) == 0, "A stopped cleanly on SIGTERM")
    a_gone = time.monotonic()  # its unregistration is done: the others see it from here
    time.sleep(5)
    stop.set()
    prod.join(120)
    end_sent = time.monotonic()
    # wait until every SEND_OK key was consumed by someone (or give up after 60 s)
    deadline = time.time() + 60
    while time.time() < deadline:
        got = {k for m in members.values() for _, k, _, _ in m.got}
        if set(sent) <= got:
            break
        time.sleep(0.5)
    time.sleep(2)  # duplicates still on their way show up too
    for name in ("C", "D"):
        members[name].p.send_signal(signal.SIGTERM)
        members[name].p.wait(30)
    for m in members.values():
        m.t.join(5)

    seen = {}  # key -> [(time, member, queue)], by time
    for name, m in members.items():
        for t, k, q, _ in m.got:
            if k.startswith("rb-"):
                seen.setdefault(k, []).append((t, name, q))
    first, dups = {}, []  # dups: (key, first delivery, a later one by another member)
    for k, v in seen.items():
        v.sort()
        first[k] = v[0]
        dups += [(k, v[0], d) for d in v[1:] if d[1] != v[0][1]]
    lost = sorted(set(sent) - set(first), key=lambda k: int(k[3:]))
    check(len(sent) > 2000 and not lost,
          f"nothing lost: {len(sent)} sent, all consumed (missing {len(lost)}: {lost[:5]})")
    # a duplicate's first consumer gave the queue up later (kill, stop or rebalance)
    def gave_up(member, queue, after):
        if member == "B":
            return True  # killed: its uncommitted window comes again
        if member == "A":
            return True  # stopped, committed; a parked batch may still be in flight
        later = [t for t, _, q, _ in members[member].got if q == queue and t > after]
        others = [t for n, m in members.items() if n != member
                  for t, _, q, _ in m.got if q == queue and t > after]
        return bool(others) and (not later or min(others) <= max(later) + 5)
    bad = [d for d in dups if not (d[2][0] >= d[1][0] and gave_up(d[1][1], d[1][2], d[1][0]))]
    check(not bad, f"every duplicate is in an at-least-once window: {len(dups)} duplicates "
          f"({len(dups) * 100.0 / max(1, len(sent)):.2f}% of sent), unexplained {bad[:3]}")
    settled = a_gone + 3 * REBALANCE_MS / 1000.0 + 1.0
    late = [d for d in dups if d[2][0] > settled]
    check(not late, f"a stable group (C and D) consumes nothing twice: {len(late)} duplicates "
          f"after the last change settled ({late[:3]})")
    qs = {n: {q for t, _, q, _ in members[n].got if settled < t} for n in ("C", "D")}
    check(qs["C"] and qs["D"] and not qs["C"] & qs["D"] and len(qs["C"] | qs["D"]) == 8,
          f"C and D split the 8 queues between them once stable ({sorted(qs['C'])} / "
          f"{sorted(qs['D'])})")
    if ORDERLY:
        check(not dups, f"orderly: no message consumed twice ({len(dups)}: {dups[:3]})")
        per_q = {}
        for name, m in members.items():
            for t, k, q, off in m.got:
                if k.startswith("rb-"):
                    per_q.setdefault(q, []).append((t, off, name))
        disorder = []
        for q, v in per_q.items():
            v.sort()
            disorder += [(q, a, b) for a, b in zip(v, v[1:]) if b[1] <= a[1]]
        check(not disorder, f"orderly: each queue consumed in offset order across members "
              f"({len(disorder)} out of order: {disorder[:3]})")
    for who, what in (("B", "B stopped" if ORDERLY else "B killed"), ("A", "A stopped")):
        t = dict(events)[what]
        held = {q for ft, _, q, _ in members[who].got if t - 1.0 < ft <= t}
        took = []
        for q in held:  # first delivery of each of its queues by another member
            later = [ft for n, m in members.items() if n != who
                     for ft, _, mq, _ in m.got if mq == q and ft > t]
            took.append(min(later) - t if later else float("inf"))
        print(f"# {what} at {t - t0:.1f} s: its {len(held)} queues consumed again by others "
              f"after {max(took) if took else 0:.2f} s (the last of them)")
    print(f"# {STRATEGY}: {len(sent)} sent in {end_sent - t0:.1f} s, {len(dups)} duplicates; per member: "
          + ", ".join(f"{n} {len(m.got)}" for n, m in members.items()))


def main():
    try:
        main_case()
    finally:
        rc = ENV.finish("RBL_KEEP")
    sys.exit(rc)


if __name__ == "__main__":
    main()
