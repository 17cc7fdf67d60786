#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Damage in a broker's CommitLog, with real processes (docs/store.md, "Damage").

usage: damage.py NAMESRV BROKER CLI CASE          (DMG_KEEP=1 keeps the logs)

Cases: units (ConsumeQueue units that lie: 5 pointing past the log's end, 5 copied from another
queue, and a record whose topic byte was flipped; --verify reports them; one queue's only
ConsumeQueue file deleted: the queues move past the lies, the lost file is rebuilt, every other
message is delivered once on its own queue, the reads are counted); readers (a record of each kind the broker reads back at start - normal, delayed, timed,
a timer's fired copy, half, and a transaction's op - with 64 header bytes flipped, after a
SIGKILL and after a SIGTERM, each then started and stopped cleanly so that recovery does not
scan the damage: the broker starts, counts and logs the damage, and delivers every
undamaged message without a stall); clean (the broker stopped with SIGTERM, then started and stopped again, so the damage
lies below the checkpoint's verified mark and only the pulls' reads find the flipped and zeroed
records) and kill (SIGKILL: the start's check finds them). 480 messages over 4 queues,
1 MiB segments (11 KiB bodies); then, in the stopped store: 4 body bytes flipped in an older segment and in the
newest one, a 4 KiB page zeroed in an older segment and in the newest one (records after it in
both), an older segment truncated inside a record. `--verify` must report the damage and change
no byte; the restarted broker takes 40 more messages; a consumer pulling every queue from 0 over
remoting must get every message outside the damage, byte for byte, none with a wrong body,
without a stall, and the broker must count the damage (GET_BROKER_RUNTIME_INFO) and log it.
"""
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

NS, BK, CLI, CASE = sys.argv[1:5]
ENV = itest.Env("dmg-")
NSADDR = f"127.0.0.1:{ENV.base}"
check = ENV.check
SEG = 1 << 20
TOPIC = "Dmg"
STORE = os.path.join(ENV.tmp, "broker")


def body_of(i):
    return (f"m{i:05d}-".encode() + bytes((i * 7 + k) & 0xFF for k in range(11000 + i % 97)))


def namesrv():
    ENV.start("namesrv", [NS, f"--listenPort={ENV.base}", f"--kvConfigPath={ENV.tmp}/kv.json",
                          "--bindAddress=127.0.0.1"])
    if not ENV.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")


def bk_args():
    return [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0", f"--dataplanePort={ENV.base + 20}",
            "--dataplaneCores=1", f"--storePathRootDir={STORE}",
            f"--mapedFileSizeCommitLog={SEG}", "--mapedFileSizeConsumeQueue=60000",
            "--storeBufferDir=" + ENV.tmp, "--flushDiskType=SYNC_FLUSH"]


def broker(count):
    p = ENV.start("broker", bk_args())
    if not ENV.wait_log("broker", " ready: ", count=count):
        raise SystemExit("the broker did not start")
    return p


def cli(*args):
    r = subprocess.run([CLI, f"--namesrv={NSADDR}"] + list(args), capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


class Rmt:
    """One remoting connection, one request at a time."""

    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.opaque = 0
        self.buf = b""

    def call(self, code, ext, body=b""):
        self.opaque += 1
        hdr = json.dumps({"code": code, "language": "JAVA", "version": 409,
                          "opaque": self.opaque, "flag": 0, "extFields": ext}).encode()
        self.s.sendall(struct.pack(">II", 4 + len(hdr) + len(body), len(hdr)) + hdr + body)
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        ln = struct.unpack(">I", self.buf[:4])[0]
        hl = struct.unpack(">I", self.buf[4:8])[0] & 0xFFFFFF
        h = json.loads(self.buf[8:8 + hl])
        b = self.buf[8 + hl:4 + ln]
        self.buf = self.buf[4 + ln:]
        return h, b

    def send_body(self, i, body, props="", sysflag="0"):
        """SEND_MESSAGE of @body to queue i % 4: the answer's header."""
        ext = {"producerGroup": "PG_DMG", "topic": TOPIC, "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": str(i % 4), "sysFlag": sysflag,
               "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
               "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
        return self.call(10, ext, body)[0]

    def send(self, i):
        return self.send_body(i, body_of(i)).get("code")

    def pull(self, qid, off):
        ext = {"consumerGroup": "GID_DMG", "topic": TOPIC, "queueId": str(qid),
               "queueOffset": str(off), "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
               "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
               "expressionType": "TAG"}
        h, b = self.call(11, ext)
        return h.get("code"), h.get("extFields", {}), b


def parse_records(buf):
    """RocketMQ records back to back: (queueOffset, phys, bodyCrcOk, body) each."""
    out, pos = [], 0
    while pos + 8 <= len(buf):
        total, magic = struct.unpack(">iI", buf[pos:pos + 8])
        if magic != 0xDAA320A7 or total < 91 or pos + total > len(buf):
            break
        r = buf[pos:pos + total]
        crc, = struct.unpack(">I", r[8:12])
        qoff, phys = struct.unpack(">qq", r[20:36])
        sysflag, = struct.unpack(">I", r[36:40])
        p = 40 + 8 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 4 + 8
        blen, = struct.unpack(">I", r[p:p + 4])
        body = r[p + 4:p + 4 + blen]
        out.append((qoff, phys, (zlib.crc32(body) & 0x7FFFFFFF) == crc, body, pos, total))
        pos += total
    return out


def segments():
    d = os.path.join(STORE, "commitlog", "0")
    return sorted(int(n) for n in os.listdir(d) if n.isdigit() and len(n) == 20)


def seg_path(start):
    return os.path.join(STORE, "commitlog", "0", f"{start:020d}")


def log_each():
    """Every record in the log, in order: (local offset, length, body CRC ok, body)."""
    for start in segments():
        with open(seg_path(start), "rb") as f:
            data = f.read()
        for _, _, ok, body, pos, total in parse_records(data):
            yield start + pos, total, ok, body


def log_records():
    """Every record in the log: message id -> (local offset, length)."""
    return {int(body[1:6]): (off, total) for off, total, ok, body in log_each()
            if ok and body[:1] == b"m"}


def hurt(recs):
    """Damage the stopped store; return the ids of the messages it hits."""
    segs = segments()
    by_off = sorted((off, ln, i) for i, (off, ln) in recs.items())
    last = max(off for off, _, _ in by_off)
    newest = last - last % SEG
    hit = set()

    def in_seg(s, frac):
        """The message starting nearest after @frac of segment @s."""
        for off, ln, i in by_off:
            if off >= s + int(SEG * frac):
                return off, ln, i
        raise RuntimeError(f"no message at {frac} of segment {s}")

    def overlap(lo, hi):
        return {i for off, ln, i in by_off if off < hi and off + ln > lo}

    def write(at, data):
        with open(seg_path(at - at % SEG), "r+b") as f:
            f.seek(at % SEG)
            f.write(data)

    def flip(off):
        with open(seg_path(off - off % SEG), "r+b") as f:
            f.seek(off % SEG + 200)
            b = bytearray(f.read(4))
            f.seek(off % SEG + 200)
            f.write(bytes(x ^ 0x5A for x in b))

    check(len(segs) >= 5 and newest >= 4 * SEG, f"the log spans {len(segs)} segments")
    # flipped body bytes: an older segment and the newest
    for s, frac in ((SEG, 0.2), (newest, 0.02)):
        off, _, i = in_seg(s, frac)
        flip(off)
        hit.add(i)
    # a zeroed page starting inside a message: an older segment and the newest
    for s, frac in ((2 * SEG, 0.3), (newest, 0.08)):
        off, _, _ = in_seg(s, frac)
        write(off + 40, b"\0" * 4096)
        hit |= overlap(off + 40, off + 40 + 4096)
    check(any(off > newest + int(SEG * 0.08) + 5000 for off, _, _ in by_off),
          "records follow the zeroed page in the newest segment")
    # an older segment truncated inside a message: the rest of that segment is gone
    off, _, _ = in_seg(3 * SEG, 0.5)
    os.truncate(seg_path(3 * SEG), off % SEG + 60)
    hit |= overlap(off, 4 * SEG)
    return hit


def tree_sum():
    h = hashlib.sha256()
    for d, _, files in sorted(os.walk(STORE)):
        for n in sorted(files):
            p = os.path.join(d, n)
            st = os.stat(p)
            h.update(f"{p} {st.st_size} {st.st_mtime_ns}".encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def runtime_info(cl):
    h, body = cl.call(28, {})
    try:
        return json.loads(body)["table"]
    except (ValueError, KeyError):
        return {}


def consume(cl, want, hit):
    """Pull every queue from 0 to its end; return (delivered ids, bad bodies, stalls)."""
    got, bad, stalls = set(), [], []
    for qid in range(4):
        off, rounds = 0, 0
        while rounds < 1000:
            rounds += 1
            code, ext, body = cl.pull(qid, off)
            nxt = int(ext.get("nextBeginOffset", off))
            mx = int(ext.get("maxOffset", 0))
            if code == 0:
                for qoff, _, ok, b, _, _ in parse_records(body):
                    i = int(b[1:6]) if b[:1] == b"m" else -1
                    if not ok or i < 0 or b != body_of(i):
                        bad.append((qid, qoff, i))
                    got.add(i)
            elif nxt == off and off < mx:
                stalls.append((qid, off, code, ext.get("remark")))
                break
            if nxt >= mx and code != 0:
                break
            if nxt == off and code == 0:
                stalls.append((qid, off, code, "no progress"))
                break
            off = nxt
    return got, bad, stalls


def pull_all(cl, rounds):
    """Pull every queue from 0 until its offset stops moving: ([(qid, body CRC ok, body)], stalls)."""
    recs, stalls = [], []
    for qid in range(4):
        off = 0
        for _ in range(rounds):
            code, ext, body = cl.pull(qid, off)
            nxt = int(ext.get("nextBeginOffset", off))
            recs += [(qid, ok, b) for _, _, ok, b, _, _ in parse_records(body if code == 0 else b"")]
            if nxt == off:
                if off < int(ext.get("maxOffset", 0)):
                    stalls.append((qid, off, code, ext.get("remark")))
                break
            off = nxt
    return recs, stalls


def case(kill):
    namesrv()
    p = broker(1)
    rc, out, err = cli("topic", "create", TOPIC, "--queues=4")
    check(rc == 0, f"topic {TOPIC} created ({(out + err).strip()[:80]})")
    cl = Rmt(f"127.0.0.1:{ENV.rmt_port_last('broker')}")
    codes = [cl.send(i) for i in range(480)]
    check(codes.count(0) == 480, f"480 of 480 SEND_OK ({set(codes)})")
    cl.s.close()
    if kill:
        p.send_signal(signal.SIGKILL)
    else:
        p.send_signal(signal.SIGTERM)
    p.wait(30)
    check(kill or p.returncode == 0, f"the broker stopped (rc {p.returncode})")
    starts = 2
    if not kill:
        # A clean start and stop: the checkpoint's verified mark is the log's end now, so the
        # next start does not look at the damage below it; the pulls' reads must find it.
        p = broker(2)
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        starts = 3

    recs = log_records()
    check(len(recs) == 480, f"all 480 records found in the log ({len(recs)})")
    hit = hurt(recs)
    check(10 < len(hit) < 200, f"{len(hit)} messages hit by the damage")

    before = tree_sum()
    v = subprocess.run(bk_args() + ["--verify"], capture_output=True, text=True, timeout=120)
    check(v.returncode == 1, f"--verify exits 1 on the damaged store (rc {v.returncode})")
    check("damaged bytes" in v.stdout and "body CRC mismatch" in v.stdout
          and "bytes, not 1048576" in v.stdout and v.stdout.strip().splitlines()[-1].startswith("damaged:"),
          "--verify lists the damaged ranges: " + " | ".join(v.stdout.splitlines()[:3])[:300])
    check("point into damaged ranges" in v.stdout, "--verify names the queues whose units point there")
    check(tree_sum() == before, "--verify changed no byte, size or time in the store")

    p = broker(starts)
    # Offline only: a running broker's store is refused, naming the holder.
    v = subprocess.run(bk_args() + ["--verify"], capture_output=True, text=True, timeout=120)
    check(v.returncode == 2 and f"in use by process {p.pid}" in v.stderr,
          f"--verify refuses a running broker's store (rc {v.returncode}: {v.stderr.strip()[:160]})")
    cl = Rmt(f"127.0.0.1:{ENV.rmt_port_last('broker')}")
    codes = [cl.send(i) for i in range(480, 520)]
    check(codes.count(0) == 40, f"after the restart 40 of 40 SEND_OK ({set(codes)})")
    want = set(range(520)) - hit
    got, bad, stalls = consume(cl, want, hit)
    check(not bad, f"no bad body delivered ({bad[:3]})")
    check(not stalls, f"no queue stalled ({stalls[:3]})")
    check(want <= got, f"every undamaged message delivered: {len(want & got)} of {len(want)}"
          f" (missing {sorted(want - got)[:8]})")
    check(all(i >= 480 for i in range(480, 520) if i in got) and set(range(480, 520)) <= got,
          "the 40 sent after the restart delivered")
    info = runtime_info(cl)
    dmg = int(info.get("storeDamagedSpans", 0)) + int(info.get("storeDamagedReads", 0))
    check(dmg > 0, f"damage counted: storeDamagedSpans {info.get('storeDamagedSpans')}, "
          f"storeDamagedReads {info.get('storeDamagedReads')}, "
          f"storeLostMessages {info.get('storeLostMessages')}")
    log = ENV.log_of("broker")
    check("stepped over" in log or "a damaged record at" in log,
          "the broker's log says where the damage is")
    cl.s.close()


def topic_create():
    """Creates TOPIC once the broker has registered (it registers after it is ready)."""
    deadline = time.time() + 30
    while True:
        rc, out, err = cli("topic", "create", TOPIC, "--queues=4")
        if rc == 0 or time.time() > deadline:
            break
        time.sleep(0.2)
    check(rc == 0, f"topic {TOPIC} created ({(out + err).strip()[:80]})")


KINDS = ("normal", "delayed", "timed", "fired", "half", "op", "committed")


def send_kind(cl, kind, i, props="", sysflag="0"):
    return cl.send_body(i, f"k:{kind}:{i:03d}".encode(), props, sysflag)


def kind_records():
    """Every record whose body is k:KIND:NNN: (kind, n) -> [(local offset, length), ...]."""
    recs = {}
    for off, total, _, body in log_each():
        if body.startswith(b"k:"):
            _, kind, n = body.decode().split(":")
            recs.setdefault((kind, int(n)), []).append((off, total))
    return recs


def readers(kill):
    namesrv()
    p = broker(1)
    topic_create()
    cl = Rmt(f"127.0.0.1:{ENV.rmt_port_last('broker')}")
    now = int(time.time() * 1000)
    codes = [send_kind(cl, "normal", i).get("code") for i in range(20)]
    codes.append(send_kind(cl, "delayed", 0, "DELAY\x0118\x02").get("code"))
    codes.append(send_kind(cl, "timed", 0, f"TIMER_DELIVER_MS\x01{now + 3600000}\x02").get("code"))
    codes.append(send_kind(cl, "fired", 0, f"TIMER_DELIVER_MS\x01{now + 1500}\x02").get("code"))
    codes.append(send_kind(cl, "half", 0, "TRAN_MSG\x01true\x02PGROUP\x01PG_DMG\x02", "4").get("code"))
    h = send_kind(cl, "committed", 0, "TRAN_MSG\x01true\x02PGROUP\x01PG_DMG\x02", "4")
    codes.append(h.get("code"))
    ext = h.get("extFields", {})
    end = {"producerGroup": "PG_DMG", "tranStateTableOffset": ext.get("queueOffset", "0"),
           "commitLogOffset": str(int(ext.get("msgId", "0" * 32)[16:], 16)), "commitOrRollback": "8",
           "fromTransactionCheck": "false", "msgId": ext.get("msgId", ""), "transactionId": "x"}
    eh, _ = cl.call(37, end)
    check(codes.count(0) == len(codes) and eh.get("code") == 0,
          f"20 normal, a delayed, two timed and two half messages stored, one committed "
          f"({codes}, END_TRANSACTION {eh.get('code')})")
    # the timer fires within 1.5 s: its copy is a record of the topic again
    deadline = time.time() + 30
    while time.time() < deadline and len(kind_records().get(("fired", 0), [])) < 2:
        time.sleep(0.2)
    recs = kind_records()
    check(len(recs.get(("fired", 0), [])) >= 2, "the timed message fired: its copy is in the log")
    # records after the damaged ones, so the log's end is sound
    codes = [send_kind(cl, "normal", i).get("code") for i in range(20, 30)]
    check(codes.count(0) == 10, f"10 more normal messages after them ({codes})")
    cl.s.close()
    p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    p.wait(30)
    # A start and a clean stop: the crashed run's write-behind buffers are in the segments and
    # the checkpoint's verified mark is the log's end, so the next start's recovery does not
    # look at the damage below it: the readers at start (timers, transactions, delay levels)
    # meet it first.
    p = broker(2)
    p.send_signal(signal.SIGTERM)
    p.wait(30)

    recs = kind_records()
    # one record of each kind: the normal 7th, the delayed and timed ones as stored, the
    # fired copy (the last record of "fired"), a half, and the op of the committed one (a
    # record of the op topic). Not the log's last records: a damaged end fails the clean
    # checkpoint's check, and recovery would scan everything.
    targets = {"normal": recs[("normal", 7)][0], "delayed": recs[("delayed", 0)][0],
               "timed": recs[("timed", 0)][0], "fired": recs[("fired", 0)][-1],
               "half": recs[("half", 0)][0]}
    with open(seg_path(segments()[0]), "r+b") as f:
        data = f.read()
        ops = [(pos, total) for _, _, _, body, pos, total in parse_records(data)
               if b"RMQ_SYS_TRANS_OP_HALF_TOPIC" in data[pos:pos + total]]
        if ops:
            targets["op"] = ops[-1]
        for kind, (off, total) in targets.items():
            f.seek(off + 4)
            f.write(bytes(b ^ 0x5A for b in data[off + 4:off + 68]))
    check("op" in targets, f"a transaction op record found ({len(ops)})")
    p = broker(3)
    log = ENV.log_of("broker")
    check(" ready: " in log, f"the broker starts with {len(targets)} damaged records "
          f"({', '.join(sorted(targets))}), after a {'SIGKILL' if kill else 'SIGTERM'}")
    cl = Rmt(f"127.0.0.1:{ENV.rmt_port_last('broker')}")
    recs, stalls = pull_all(cl, 100)
    got = {b.decode(errors="replace") for _, _, b in recs}
    bad = [b[:20] for _, ok, b in recs if not ok]
    want = {f"k:normal:{i:03d}" for i in range(30) if i != 7} | {"k:committed:000"}
    check(want <= got, f"every undamaged message delivered, the committed one too "
          f"({len(want & got)} of {len(want)}; missing {sorted(want - got)[:4]})")
    check("k:normal:007" not in got and not bad, f"the damaged one is not, and no bad body ({bad[:2]})")
    check(not stalls, f"no queue stalled ({stalls[:3]})")
    info = runtime_info(cl)
    dmg = int(info.get("storeDamagedSpans", 0)) + int(info.get("storeDamagedReads", 0))
    check(dmg > 0, f"damage counted: storeDamagedSpans {info.get('storeDamagedSpans')}, "
          f"storeDamagedReads {info.get('storeDamagedReads')}")
    check("stepped over" in log or "a damaged record at" in log or "damaged" in log,
          "the broker's log says where the damage is")
    cl.s.close()


def cq_path(qid):
    return os.path.join(STORE, "consumequeue", TOPIC, str(qid), f"{0:020d}")


def units_case():
    namesrv()
    p = broker(1)
    topic_create()
    cl = Rmt(f"127.0.0.1:{ENV.rmt_port_last('broker')}")
    codes = [cl.send(i) for i in range(160)]
    check(codes.count(0) == 160, f"160 of 160 SEND_OK ({set(codes)})")
    cl.s.close()
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    recs = log_records()
    with open(cq_path(0), "r+b") as f:  # units 10..14 of queue 0 point past the log's end
        for k in range(10, 15):
            f.seek(k * 20)
            f.write(struct.pack(">q", 50 << 20))
    with open(cq_path(2), "rb") as f:
        q2 = f.read()
    with open(cq_path(1), "r+b") as f:  # units 10..14 of queue 1: queue 2's
        f.seek(10 * 20)
        f.write(q2[10 * 20:15 * 20])
    # message 83 (queue 3, its offset 20): a byte of its topic flipped ("Dmg" -> "Dmh")
    off, total = recs[83]
    with open(seg_path(off - off % SEG), "r+b") as f:
        f.seek(off % SEG)
        rec = bytearray(f.read(total))
        at = rec.rfind(b"\x03" + TOPIC.encode())
        rec[at + 3] ^= 0x0F
        f.seek(off % SEG)
        f.write(rec)
    hit = {4 * k for k in range(10, 15)} | {4 * k + 1 for k in range(10, 15)} | {83}
    v = subprocess.run(bk_args() + ["--verify"], capture_output=True, text=True, timeout=120)
    check(v.returncode == 1 and "at another queue's or offset's record" in v.stdout,
          "--verify reports the units that point at another queue's record: "
          + " | ".join(ln for ln in v.stdout.splitlines() if ln.startswith("queue "))[:240])
    # queue 2 loses its only ConsumeQueue file: --verify names its records, and a start
    # rebuilds it from the log
    os.unlink(cq_path(2))
    v = subprocess.run(bk_args() + ["--verify"], capture_output=True, text=True, timeout=120)
    line = [ln for ln in v.stdout.splitlines() if ln.startswith(f"queue {TOPIC}:2:")]
    check(v.returncode == 1 and line and "40 records of shard 0 have no ConsumeQueue unit"
          in line[0], f"--verify counts the records no unit points at: {line[:1]}")
    p = broker(2)
    cl = Rmt(f"127.0.0.1:{ENV.rmt_port_last('broker')}")
    recs, stalls = pull_all(cl, 200)
    got, wrong, twice = set(), [], []
    for qid, _, b in recs:
        i = int(b[1:6]) if b[:1] == b"m" else -1
        if i % 4 != qid or b != body_of(i):
            wrong.append((qid, i))
        if i in got:
            twice.append(i)
        got.add(i)
    want = set(range(160)) - hit
    check(not stalls, f"no queue stalled behind the lying units ({stalls[:3]})")
    check(want <= got, f"every other message delivered ({len(want & got)} of {len(want)}; "
          f"missing {sorted(want - got)[:8]})")
    check(not wrong and not twice, f"none on a wrong queue, none twice ({wrong[:4]}, {twice[:4]})")
    info = runtime_info(cl)
    n = int(info.get("storeDamagedReads", 0))
    check(n >= 11, f"the lying units' reads counted: storeDamagedReads {n}")
    check(ENV.wait_log("broker", "skipped as lost", 10), "and logged")
    check("its files were lost, rebuilding it" in ENV.log_of("broker"),
          "queue 2's lost ConsumeQueue file is rebuilt from the log (its messages delivered above)")
    cl.s.close()


def main():
    try:
        if CASE == "units":
            units_case()
        elif CASE.startswith("readers"):
            readers(CASE == "readers_kill")
        else:
            case(CASE == "kill")
    except Exception:  # noqa: BLE001 - a crash of the test is a failure, not a pass
        traceback.print_exc()
        ENV.failed.append("the test raised")
    finally:
        sys.exit(ENV.finish("DMG_KEEP"))


main()
