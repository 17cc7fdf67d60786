# SPDX-License-Identifier: Apache-2.0
"""Store safety with real daemons (docs/store.md, docs/broker.md; issue 25).

usage: store_safety.py NAMESRV BROKER CLI CASE [BINARY...]

  two_brokers  A second broker on a live store refuses to start (exit non-zero) with an error
               naming the holder's pid and <root>/lock, and leaves the store as it was (no file
               added or removed, the abort file untouched, no recovery). After kill -9 of the
               first it starts, and a consumer gets every message sent before.
  shards       A store written with dataplaneCores 1 refuses to start with 2, and one written
               with 2 refuses 1, naming the key, both values and what to do, changing nothing;
               restarted with its own value, a consumer gets every message of every queue.
  sighup       SIGHUP during a produce load: the broker and the NameServer reopen their
               logFile (renamed away meanwhile: a new file at the path, the old one kept), never
               stop; every message is SEND_OK; SIGTERM afterwards exits 0, no abort file is
               left, and after a restart every message is there.
  bufdirs      storeBufferDir shared by three stores: a killed broker whose store was deleted
               leaves a directory that the next broker's start removes; a killed broker whose
               store still names its directory keeps it (said at info level), and that store's
               next start recovers every message from it.
  version      --version on every binary given: "<name> <version>", exit 0.
  disk_full    A store on a 64 MiB tmpfs (root), diskSpaceCleanForciblyRatio=30, a group that
               has read nothing: producing until the disk passes the ratio ends in SENDs refused
               SERVICE_NOT_AVAILABLE naming the group, /health 503, an error logged and no
               segment deleted (every message still there); once the group has read them the
               oldest segments go and SENDs are taken again.
  disk_delete  The same with deleteUnconsumedWhenDiskFull=true: the oldest segments go, an
               error names the group, sprocket_store_unread_deleted_total counts them, and
               SENDs keep being taken.
  disk_half    As disk_full with no group at all, and a transaction half sent first that no
               producer resolves: SENDs are refused naming the unresolved halves; once
               END_TRANSACTION rolls the half back, the oldest segments go.
"""
import json
import os
import shutil
import urllib.error
import urllib.request
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402
import rmt_call  # noqa: E402

NS, BK, CLI, CASE = sys.argv[1:5]
EXTRA = sys.argv[5:]
ENV = itest.Env("sst-")
NSADDR = f"127.0.0.1:{ENV.base}"
check = ENV.check
N_BROKERS = [0]


def file_has(path, needle):
    try:
        with open(path, errors="replace") as f:
            return needle in f.read()
    except FileNotFoundError:
        return False


def namesrv(extra=(), log_file=None):
    p = ENV.start("namesrv", [NS, f"--listenPort={ENV.base}", f"--kvConfigPath={ENV.tmp}/kv.json",
                              "--bindAddress=127.0.0.1"] + list(extra))
    if log_file:
        ok = wait_until(lambda: file_has(log_file, " listening on "), 10)
    else:
        ok = ENV.wait_log("namesrv", " listening on ", timeout=10)
    if not ok:
        raise SystemExit("the NameServer did not start")
    return p


def broker_args(store, cores=1, bufdir=None, extra=()):
    """A broker of its own dataplane ports (each start a new range)."""
    N_BROKERS[0] += 1
    return [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0",
            f"--dataplanePort={ENV.base + 20 + 8 * N_BROKERS[0]}", f"--dataplaneCores={cores}",
            f"--storePathRootDir={store}", "--mapedFileSizeCommitLog=1048576",
            "--mapedFileSizeConsumeQueue=60000", "--flushDiskType=ASYNC_FLUSH",
            "--storeBufferDir=" + (bufdir or ENV.tmp), "--registerNameServerPeriod=1000"] + list(extra)


def broker(name, store, cores=1, bufdir=None, extra=(), count=1):
    p = ENV.start(name, broker_args(store, cores, bufdir, extra))
    if not ENV.wait_log(name, " ready: ", count=count):
        raise SystemExit(f"{name} did not start")
    return p


def refused(name, store, cores=1, extra=()):
    """Starts a broker that must refuse: (exit status, its log)."""
    before = len(ENV.log_of(name))
    p = ENV.start(name, broker_args(store, cores, extra=extra))
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    return rc, ENV.log_of(name)[before:]


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        return None


def kill9(p):
    p.kill()
    p.wait(30)


def cli(*args, stdin=None, timeout=60):
    r = subprocess.run([CLI, f"--namesrv={NSADDR}", "--json"] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=timeout)
    import json
    out = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    return r.returncode, out, r.stderr


def wait_until(fn, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    return None


def topic_create(topic, queues):
    """Creates @topic once a broker is registered; return: it worked."""
    return wait_until(lambda: cli("topic", "create", topic, f"--queues={queues}")[0] == 0)


def produce(topic, bodies):
    """Return: the SEND_OK answers (dicts with queueId) of one line each."""
    rc, out, err = cli("produce", topic, stdin="\n".join(bodies) + "\n", timeout=300)
    return [o for o in out if o.get("status") == "SEND_OK"]


def consume(topic, n):
    """Return: the bodies of every message of @topic from the first (waits up to 20 s for @n)."""
    got = wait_until(lambda: (lambda r: r[1] if r[0] == 0 and len(r[1]) >= n else None)(
        cli("consume", topic, "--from=first", "-n", str(n), "--wait-ms=2000", timeout=60)), 40)
    return sorted(o.get("body", "") for o in (got or []))


def tree(store, skip=("lock",)):
    """Every file under @store: {relative path: (size, mtime_ns, inode)}."""
    out = {}
    for d, _, files in os.walk(store):
        for f in files:
            if f in skip:
                continue
            p = os.path.join(d, f)
            st = os.lstat(p)
            out[os.path.relpath(p, store)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def case_two_brokers():
    namesrv()
    store = os.path.join(ENV.tmp, "store")
    # no periodic config saves (consumer and delay offsets, timer and tx checkpoints) from the
    # first broker between the two snapshots below: a file they create is not the second's
    first = broker("first", store, extra=["--flushConsumerOffsetInterval=600000",
                                          "--flushDelayOffsetInterval=600000"])
    check(topic_create("Two", 2), "topic Two created")
    bodies = [f"two-{i}" for i in range(20)]
    check(len(produce("Two", bodies)) == 20, "20 messages SEND_OK to the first broker")
    with open(os.path.join(store, "lock")) as f:
        held = f.read().strip()
    check(held == str(first.pid), f"{store}/lock records the first broker's pid ({held})")
    time.sleep(1)  # the first broker's flushes and checkpoint of those settle
    names = set(tree(store))
    abort = tree(store)["abort"]
    rc, log = refused("second", store)
    want = (f"E store: {store} is in use by process {first.pid}, which holds {store}/lock: "
            "stop that process first, or give this one another storePathRootDir")
    check(rc not in (0, None), f"the second broker exits non-zero (rc {rc})")
    check(want in log, f"... saying: {want}")
    check(" ready: " not in log and "recovering" not in log and "re-dispatched" not in log,
          "... without opening or recovering anything")
    now = tree(store)
    # the first broker lives: its indexer may make an IndexFile meanwhile, nothing else
    added = sorted(n for n in set(now) - names if not n.startswith("index/"))
    check(names <= set(now) and not added,
          f"... no file removed or added (removed {sorted(names - set(now))}, added {added})")
    check(now.get("abort") == abort, "... the abort file untouched")
    check(first.poll() is None, "the first broker still runs")
    with open(os.path.join(store, "lock")) as f:
        check(f.read().strip() == str(first.pid), "... and the lock still names it")

    kill9(first)
    second = broker("second", store, count=1)
    check(second.poll() is None, "after kill -9 of the first, the second broker starts")
    got = consume("Two", 20)
    check(got == sorted(bodies), f"a consumer gets all 20 messages ({len(got)})")
    check(stop(second) == 0, "the second broker stops cleanly (rc 0)")


def shard_change(was, now):
    store = os.path.join(ENV.tmp, f"store{was}")
    topic = f"Sh{was}"
    bk = broker(f"bk{was}", store, cores=was)
    check(topic_create(topic, 4), f"topic {topic} created with 4 queues on a {was}-core broker")
    bodies = [f"{topic}-{i}" for i in range(12)]
    sent = produce(topic, bodies)
    check(len(sent) == 12 and {s.get("queueId") for s in sent} == {0, 1, 2, 3},
          f"12 messages SEND_OK, in every queue ({sorted({s.get('queueId') for s in sent})})")
    check(stop(bk) == 0, "the broker stops cleanly (rc 0)")
    before = tree(store)
    rc, log = refused(f"bk{was}", store, cores=now)
    want = (f"E store: dataplaneCores={now} but {store} was written with {was} CommitLog "
            f"shard{'' if was == 1 else 's'} (its checkpoint says so): start with "
            f"--dataplaneCores={was}; a store keeps the shard count it was made with")
    check(rc not in (0, None), f"restarted with dataplaneCores={now}: exit non-zero (rc {rc})")
    check(want in log, f"... saying: {want}")
    after = tree(store)
    check(after == before and "abort" not in after,
          f"... the store unchanged, no abort file ({sorted(set(after) ^ set(before))})")
    bk = broker(f"bk{was}", store, cores=was, count=2)
    got = consume(topic, 12)
    check(got == sorted(bodies), f"restarted with dataplaneCores={was}: all 12 consumed ({len(got)})")
    check(stop(bk) == 0, "... and it stops cleanly (rc 0)")


def case_shards():
    namesrv()
    shard_change(1, 2)
    shard_change(2, 1)


def case_sighup():
    nslog = os.path.join(ENV.tmp, "ns.file.log")
    bklog = os.path.join(ENV.tmp, "bk.file.log")
    ns = namesrv([f"--logFile={nslog}"], log_file=nslog)
    store = os.path.join(ENV.tmp, "store")
    p = ENV.start("broker", broker_args(store, extra=[f"--logFile={bklog}"]))
    check(wait_until(lambda: file_has(bklog, " ready: ")) is not None,
          f"the broker logs to {bklog}")
    check(ENV.log_of("broker") == "", "... and nothing to stderr")
    check(topic_create("Hup", 2), "topic Hup created")
    bodies = [f"hup-{i}" for i in range(3000)]
    prod = subprocess.Popen([CLI, f"--namesrv={NSADDR}", "--json", "produce", "Hup"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    prod.stdin.write("\n".join(bodies) + "\n")
    prod.stdin.close()
    hups = 0
    renamed = False
    while prod.poll() is None and hups < 200:
        if hups == 20:
            os.rename(bklog, bklog + ".1")
            os.rename(nslog, nslog + ".1")
            renamed = True
        p.send_signal(signal.SIGHUP)
        ns.send_signal(signal.SIGHUP)
        hups += 1
        time.sleep(0.02)
    out = prod.stdout.read()
    prod.wait(300)
    oks = out.count('"SEND_OK"')
    check(renamed and hups > 20, f"{hups} SIGHUPs to both daemons during the load")
    check(prod.returncode == 0 and oks == 3000, f"every message SEND_OK: {oks} of 3000")
    check(p.poll() is None and ns.poll() is None, "the broker and the NameServer still run")
    for name, path in (("broker", bklog), ("namesrv", nslog)):
        old = open(path + ".1").read() if os.path.exists(path + ".1") else ""
        new = open(path).read() if os.path.exists(path) else ""
        check(" ready: " in old or " listening on " in old, f"{name}: the renamed log kept its lines")
        check(f"SIGHUP: log file {path} reopened" in new,
              f"{name}: reopened at {path} after the rename, new lines there")
    got = consume("Hup", 3000)
    check(len(got) == 3000 and got == sorted(bodies), f"a consumer gets all 3000 ({len(got)})")
    rc = stop(p)
    check(rc == 0, f"SIGTERM afterwards: the broker exits 0 (rc {rc})")
    check(not os.path.exists(os.path.join(store, "abort")), "... and leaves no abort file")
    with open(bklog) as f:
        check("closed cleanly" in f.read(), "... the store closed cleanly (in the new log)")
    rc = stop(ns)
    check(rc == 0, f"the NameServer exits 0 on SIGTERM (rc {rc})")
    ns = namesrv()
    p = broker("broker2", store)
    log = ENV.log_of("broker2")
    check("did not shut down cleanly" not in log, "the restart finds a clean shutdown")
    got = consume("Hup", 3000)
    check(len(got) == 3000, f"after a restart all 3000 are there ({len(got)})")


def case_bufdirs():
    namesrv()
    shm = os.path.join(ENV.tmp, "shm")
    os.makedirs(shm)
    sa, sb, sc = (os.path.join(ENV.tmp, n) for n in ("sa", "sb", "sc"))
    a = broker("a", sa, bufdir=shm)
    check(topic_create("Buf", 1), "topic Buf created")
    bodies = [f"buf-{i}" for i in range(200)]
    check(len(produce("Buf", bodies)) == 200, "200 messages SEND_OK to broker a")
    b = broker("b", sb, bufdir=shm)
    da = open(os.path.join(sa, "bufdir")).read().strip()
    db = open(os.path.join(sb, "bufdir")).read().strip()
    check(os.path.isfile(os.path.join(da, "owner")) and os.path.isfile(os.path.join(db, "owner")),
          f"each run's directory has an owner record ({da}, {db})")
    kill9(a)
    kill9(b)
    shutil.rmtree(sb)
    old = os.path.join(shm, "sprocket-OLDfmt")
    os.makedirs(old)
    c = broker("c", sc, bufdir=shm)
    log = ENV.log_of("c")
    check(not os.path.exists(db), f"broker c's start removed {db} (its store is gone)")
    check(f"removed {db}: write-behind buffers of a dead run of {sb}, which no longer needs them "
          "(the store does not exist)" in log, "... and said so")
    check(os.path.isdir(da), f"... kept {da} (store a names it)")
    check(f"I store: kept {da}: write-behind buffers of a dead run of {sa}, whose bufdir names them:"
          " its next start recovers from them" in log, "... and said so at info level")
    check(os.path.isdir(old) and "1 directories sprocket-* in" in log,
          "... left the directory without an owner record alone, and said so")
    check(stop(c) == 0, "broker c stops cleanly")
    a = broker("a", sa, bufdir=shm, count=2)
    check(not os.path.exists(da), f"broker a's restart recovered from {da} and removed it")
    got = consume("Buf", 200)
    check(got == sorted(bodies), f"... and a consumer gets all 200 ({len(got)})")
    check(stop(a) == 0, "broker a stops cleanly")
    left = sorted(n for n in os.listdir(shm) if n != "sprocket-OLDfmt")
    check(left == [], f"no run directory is left after clean stops ({left})")


def case_version():
    want = None
    for exe in [NS, BK, CLI] + EXTRA:
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
        name = os.path.basename(exe)
        words = r.stdout.split()
        check(r.returncode == 0 and len(words) == 2 and words[0] == name,
              f"{name} --version: {r.stdout.strip()!r} (rc {r.returncode})")
        want = want or (words[1] if len(words) == 2 else None)
        check(len(words) == 2 and words[1] == want, f"... the same version ({want})")


def http(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def send_big(addr, i):
    ext = {"a": "PG_DISK", "b": "DiskT", "c": "TBW102", "d": "1", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": ""}
    body = (f"d{i:06d}-".encode() * 8192)[:65536]
    return rmt_call.call(addr, 310, ext, body)[:2]


def commit(addr, offset):
    ext = {"consumerGroup": "GDisk", "topic": "DiskT", "queueId": "0", "commitOffset": str(offset)}
    return rmt_call.call(addr, 15, ext)[0]


def q_minmax(addr):
    lo = rmt_call.call_ext(addr, 31, {"topic": "DiskT", "queueId": "0"})[3].get("offset")
    hi = rmt_call.call_ext(addr, 30, {"topic": "DiskT", "queueId": "0"})[3].get("offset")
    return int(lo or -1), int(hi or -1)


def send_half(addr):
    """A transactional half of DiskT that no producer will resolve: (code, its END_TRANSACTION ext)."""
    ext = {"a": "PG_DISK", "b": "DiskT", "c": "TBW102", "d": "1", "e": "0", "f": "4",
           "g": str(int(time.time() * 1000)), "h": "0",
           "i": "TRAN_MSG\x01true\x02PGROUP\x01PG_DISK\x02"}
    code, _, _, rext = rmt_call.call_ext(addr, 310, ext, b"half")
    mid = rext.get("msgId", "0" * 32)
    return code, {"producerGroup": "PG_DISK", "tranStateTableOffset": rext.get("queueOffset", "0"),
                  "commitLogOffset": str(int(mid[16:], 16)), "commitOrRollback": "12",
                  "fromTransactionCheck": "false", "msgId": mid, "transactionId": "x"}


def disk_case(delete, half=False):
    if os.geteuid() != 0:
        print("skip: needs root to mount a tmpfs")
        sys.exit(77)
    mnt = os.path.join(ENV.tmp, "disk")
    os.makedirs(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt], check=True)
    try:
        namesrv()
        http_port = ENV.base + 35
        p = broker("broker", os.path.join(mnt, "store"),
                   extra=["--diskSpaceCleanForciblyRatio=30", "--diskSpaceWarningLevelRatio=99",
                          "--diskMaxUsedSpaceRatio=95", f"--httpPort={http_port}",
                          f"--deleteUnconsumedWhenDiskFull={'true' if delete else 'false'}"])
        check(topic_create("DiskT", 1), "topic DiskT created")
        addr = f"127.0.0.1:{ENV.rmt_port_last('broker')}"
        if half:
            code, end = send_half(addr)
            check(code == 0, f"a transaction half stored, which no producer resolves ({code})")
        else:
            check(commit(addr, 0) == 0, "group GDisk commits offset 0: it has read nothing")
        sent, refused, remark = 0, None, ""

        def used():
            v = os.statvfs(mnt)
            return 100.0 * (1 - v.f_bfree / v.f_blocks)

        # fill past the ratio, then wait for the store's retention round (every 10 s)
        deadline = time.time() + 60
        while time.time() < deadline and used() < 40:
            code, remark = send_big(addr, sent)
            if code == 2:  # SYSTEM_BUSY: the next segment is being made
                time.sleep(0.05)
                continue
            if code != 0:
                refused = code
                break
            sent += 1
        print(f"filled to {used():.0f}% with {sent} messages")
        deadline = time.time() + 40
        while refused is None and time.time() < deadline:
            if delete and "(deleteUnconsumedWhenDiskFull)" in ENV.log_of("broker"):
                break
            code, remark = send_big(addr, sent)
            if code == 0:
                sent += 1
            elif code != 2:
                refused = code
            time.sleep(0.5)
        lo, hi = q_minmax(addr)
        if half:
            check(refused == 14 and "transaction halves" in remark,
                  f"after {sent} messages of 64 KiB a SEND is refused naming the unresolved "
                  f"half ({refused} {remark[:160]})")
            check("deleted segment" not in ENV.log_of("broker"), "no segment deleted")
            code, remark, _ = rmt_call.call(addr, 37, end)
            check(code == 0, f"END_TRANSACTION rolls the half back ({code} {remark})")
            ok = wait_until(lambda: send_big(addr, sent)[0] == 0, 60)
            check(bool(ok), "the oldest segments go and SENDs are taken again")
            check(q_minmax(addr)[0] > 0, f"the queue's minimum moved on ({q_minmax(addr)})")
        elif not delete:
            check(refused == 14 and "GDisk" in remark,
                  f"after {sent} messages of 64 KiB a SEND is refused SERVICE_NOT_AVAILABLE naming "
                  f"the group ({refused} {remark[:160]})")
            st, body = http(http_port, "/health")
            check(st == 503 and "writes refused" in body, f"/health: 503 ({st} {body[:120]!r})")
            log = ENV.log_of("broker")
            check("writes refused" in log and "deleted segment" not in log,
                  "the broker logs why, and deleted no segment")
            check(lo == 0 and hi == sent, f"every message still there (queue {lo}..{hi}, sent {sent})")
            check(commit(addr, hi) == 0, "the group reads them all (commits the end)")
            ok = wait_until(lambda: send_big(addr, sent)[0] == 0, 60)
            sent += 1 if ok else 0
            check(bool(ok), "the oldest segments go and SENDs are taken again")
            check(ENV.wait_log("broker", "writes are taken again", 10), "... as the log says")
            check(q_minmax(addr)[0] > 0, f"the queue's minimum moved on ({q_minmax(addr)})")
        else:
            more = 0
            for k in range(10):
                code, remark = send_big(addr, sent + k)
                more += code == 0
            ok_all = refused is None and more == 10
            check(ENV.wait_log("broker", "(deleteUnconsumedWhenDiskFull)", 40),
                  "an error names what went: messages not read yet by group GDisk")
            check("GDisk" in ENV.log_of("broker"), "... and the group")
            check(ok_all, f"SENDs keep being taken ({more} more)")
            _, text = http(http_port, "/metrics")
            n = [ln for ln in text.splitlines() if ln.startswith("sprocket_store_unread_deleted_total ")]
            check(n and int(float(n[0].split()[1])) >= 1, f"counted in /metrics ({n})")
            check(q_minmax(addr)[0] > 0, f"the queue's minimum moved on ({q_minmax(addr)})")
        stop(p)
    finally:
        for q in list(ENV.procs) if hasattr(ENV, "procs") else []:
            pass
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def main():
    try:
        {"two_brokers": case_two_brokers, "shards": case_shards, "sighup": case_sighup,
         "bufdirs": case_bufdirs, "version": case_version,
         "disk_full": lambda: disk_case(False), "disk_delete": lambda: disk_case(True),
         "disk_half": lambda: disk_case(False, half=True)}[CASE]()
    except SystemExit as e:  # a daemon that did not start: a failure, not a pass
        print(f"FAIL {e}")
        ENV.failed.append(str(e))
    except Exception:  # noqa: BLE001 - a crash of the test is a failure, not a pass
        traceback.print_exc()
        ENV.failed.append("the test raised")
    finally:
        sys.exit(ENV.finish("SST_KEEP"))


main()
