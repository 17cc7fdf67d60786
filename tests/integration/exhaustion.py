# SPDX-License-Identifier: Apache-2.0
"""Exhaustion without surprises (docs/isolation.md): descriptors and frame memory.

usage: exhaustion.py NAMESRV BROKER CLI CASE

  fds     The broker starts under `ulimit -n 512`: it raises its soft limit to the hard one
          and lowers remotingMaxConnections to what is left after fdReserve, saying so.
          1100 idle connections then get at most that many; an established client keeps
          sending 1 KiB messages (ASYNC_FLUSH, 1 MiB segments): every one answered SEND_OK
          and the CommitLog rolls to new segments. Then the broker's limit is lowered under
          it (prlimit) so accept() fails with EMFILE while connections wait: the listener
          rests instead of spinning (its control thread uses < 0.2 s of CPU in 10 s), the
          established client is still answered, and the refusals are counted. With the limit
          back, new connections are taken again. The NameServer's listener likewise (< 0.1 s
          in 5 s). A SIGKILL right after: the restarted broker has every acknowledged message
          (0 lost).
  limits  Under `ulimit -n 256` the broker lowers fdReserve to half the limit, says so, and
          serves (a client sends 10 of 10); under `ulimit -n 30` the broker and the
          NameServer refuse to start (exit 1) with an error naming the limit and fdReserve,
          never "ready" while refusing every client.
  frames  64 connections each send 60 MiB of a 64 MiB frame and stop, to the NameServer and
          to a broker (remotingMaxFrameSize 64 MiB): the daemons' RSS grows by less than
          their maxFrameMemory / remotingMaxFrameMemory (256 MiB) plus slack, the connections
          over it are closed and counted, and a route query / a SEND still work meanwhile.
"""
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
import itest  # noqa: E402
from rmt_call import call  # noqa: E402

NS, BK, CLI, CASE = sys.argv[1:5]
# Under ASan (CI) freed buffers sit in its quarantine (256 MiB by default) and would count in
# the RSS measured here; what is measured is the daemons' own holding.
os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=8").lstrip(":")
ENV = itest.Env("exh-")
NSADDR = f"127.0.0.1:{ENV.base}"
check = ENV.check
MIB = 1 << 20


def own_limit_up():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def namesrv(extra=()):
    p = ENV.start("namesrv", [NS, f"--listenPort={ENV.base}", f"--kvConfigPath={ENV.tmp}/kv.json",
                              "--bindAddress=127.0.0.1"] + list(extra))
    if not ENV.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")
    return p


def broker(extra=(), nofile=None, count=1):
    args = [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0", f"--dataplanePort={ENV.base + 20}",
            "--dataplaneCores=1", f"--storePathRootDir={ENV.tmp}/broker",
            "--mapedFileSizeCommitLog=1048576", "--mapedFileSizeConsumeQueue=60000",
            "--storeBufferDir=" + ENV.tmp, "--flushDiskType=ASYNC_FLUSH"] + list(extra)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    p = ENV.start("broker", args, preexec_fn=limit if nofile else None)
    if not ENV.wait_log("broker", " ready: ", count=count):
        raise SystemExit("the broker did not start")
    return p


def cli(*args):
    r = subprocess.run([CLI, f"--namesrv={NSADDR}"] + list(args), capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


class Client:
    """One remoting connection that sends SEND_MESSAGE (code 10) to queue 0, pipelined."""

    def __init__(self, addr, topic):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.topic = topic
        self.opaque = 0
        self.buf = b""

    def frame(self, code, ext, body=b""):
        self.opaque += 1
        hdr = json.dumps({"code": code, "language": "JAVA", "version": 409,
                          "opaque": self.opaque, "flag": 0, "extFields": ext}).encode()
        return struct.pack(">II", 4 + len(hdr) + len(body), len(hdr)) + hdr + body

    def answers(self, n):
        out = []
        while len(out) < n:
            while len(self.buf) >= 4 and len(self.buf) >= 4 + struct.unpack(">I", self.buf[:4])[0]:
                ln = struct.unpack(">I", self.buf[:4])[0]
                hl = struct.unpack(">I", self.buf[4:8])[0] & 0xFFFFFF
                out.append((json.loads(self.buf[8:8 + hl]), self.buf[8 + hl:4 + ln]))
                self.buf = self.buf[4 + ln:]
            if len(out) >= n:
                break
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        return out

    def send(self, n, size=1024, window=64):
        """Sends @n messages; return: (SEND_OK count, other codes and remarks)."""
        ext = {"producerGroup": "PG_EXH", "topic": self.topic, "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
               "bornTimestamp": str(int(time.time() * 1000)), "flag": "0", "properties": "",
               "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
        ok, bad, sent, got = 0, [], 0, 0
        body = b"x" * size
        while got < n:
            burst = b""
            while sent < n and sent - got < window:
                burst += self.frame(10, ext, body)
                sent += 1
            if burst:
                self.s.sendall(burst)
            for h, _ in self.answers(1):
                got += 1
                if h.get("code") == 0:
                    ok += 1
                else:
                    bad.append((h.get("code"), h.get("remark")))
        return ok, bad

    def call(self, code, ext):
        self.s.sendall(self.frame(code, ext))
        h, body = self.answers(1)[0]
        return h, body


def main_thread_cpu(pid):
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def segments():
    d = os.path.join(ENV.tmp, "broker", "commitlog", "0")
    return len([n for n in os.listdir(d) if n.isdigit()]) if os.path.isdir(d) else 0


def connect_many(port, n):
    socks, failed = [], 0
    for _ in range(n):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            socks.append(s)
        except OSError:
            failed += 1
            s.close()
    return socks, failed


def still_open(socks):
    """Connections the broker kept (not closed at once): a read would block."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                continue
            n += 1
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def runtime_info(cl):
    h, body = cl.call(28, {})
    try:
        return json.loads(body)["table"]
    except (ValueError, KeyError):
        return {}


def case_fds():
    own_limit_up()
    namesrv()
    bk = broker(nofile=512)
    log = ENV.log_of("broker")
    line = [ln for ln in log.splitlines() if "file descriptors: limit" in ln]
    check(bool(line) and "remotingMaxConnections 65536 lowered to" in line[0],
          f"the start-up log says the descriptor budget ({line[:1]})")
    cap = int(line[0].rsplit(" ", 1)[1]) if line else 0
    check(0 < cap <= 512 - 256, f"remotingMaxConnections derived: {cap} <= 512 - fdReserve 256")
    rc, out, err = cli("topic", "create", "ExhData", "--queues=1")
    check(rc == 0, f"topic ExhData created ({(out + err).strip()[:80]})")
    addr = f"127.0.0.1:{ENV.rmt_port('broker')}"
    port = ENV.rmt_port("broker")
    client = Client(addr, "ExhData")
    acked, bad = client.send(100)
    check(acked == 100, f"the established client sends 100 of 100 ({bad[:2]})")

    segs0 = segments()
    hostile, failed = connect_many(port, 1100)
    time.sleep(1)
    kept = still_open(hostile)
    check(kept <= cap, f"1100 idle connections: {kept} kept, at most {cap} ({failed} failed)")
    ok, bad = client.send(3000)  # ~3.3 MiB: several 1 MiB segments
    acked += ok
    check(ok == 3000 and not bad, f"meanwhile 3000 of 3000 answered SEND_OK ({bad[:2]})")
    # ~3.4 MiB from ~0.1 MiB on: segments 0..3 written, whether or not the next one was made
    # ahead (segs0 may count it or not); the write-behind may still be creating the last
    end = time.time() + 10
    while segments() < 4 and time.time() < end:
        time.sleep(0.1)
    check(segments() >= 4, f"the CommitLog rolled: {segs0} -> {segments()} segments (4 or more)")
    for s in hostile:
        s.close()
    time.sleep(0.5)

    # accept() out of descriptors: the listener rests, the rest of the broker works
    nfd = len(os.listdir(f"/proc/{bk.pid}/fd"))
    resource.prlimit(bk.pid, resource.RLIMIT_NOFILE, (nfd + 2, 512))
    pend, _ = connect_many(port, 200)  # in the backlog: accept() fails with EMFILE
    time.sleep(0.5)
    cpu0 = main_thread_cpu(bk.pid)
    time.sleep(10)
    used = main_thread_cpu(bk.pid) - cpu0
    check(used < 0.2, f"no spin: the control thread used {used:.2f} s of CPU in 10 s (< 0.2)")
    ok, bad = client.send(50)
    acked += ok
    check(ok == 50, f"at the limit the established client is answered: 50 of 50 ({bad[:2]})")
    info = runtime_info(client)
    check(int(info.get("remotingRefusedNoFd", "0")) > 0,
          f"accept failures counted (remotingRefusedNoFd {info.get('remotingRefusedNoFd')})")
    check("the listener rests" in ENV.log_of("broker") and
          "Too many open files" in ENV.log_of("broker"),
          "the warning names the cause (Too many open files)")
    resource.prlimit(bk.pid, resource.RLIMIT_NOFILE, (512, 512))
    for s in pend:
        s.close()
    time.sleep(1.5)
    try:
        fresh = Client(addr, "ExhData")
        ok, bad = fresh.send(10)
    except OSError as e:
        ok, bad = 0, [str(e)]
    acked += ok
    check(ok == 10, f"with descriptors back, a new connection is taken: 10 of 10 ({bad[:2]})")

    # the NameServer's listener rests the same way
    ns = ENV.procs[0]
    nfd = len(os.listdir(f"/proc/{ns.pid}/fd"))
    resource.prlimit(ns.pid, resource.RLIMIT_NOFILE, (nfd + 2, 512))
    pend, _ = connect_many(ENV.base, 100)
    time.sleep(0.5)
    cpu0 = main_thread_cpu(ns.pid)
    time.sleep(5)
    used = main_thread_cpu(ns.pid) - cpu0
    check(used < 0.1 and "Too many open files" in ENV.log_of("namesrv"),
          f"NameServer at EMFILE: its io thread used {used:.2f} s of CPU in 5 s, and says why")
    resource.prlimit(ns.pid, resource.RLIMIT_NOFILE, (512, 512))
    for s in pend:
        s.close()
    time.sleep(1.5)
    try:
        code = call(NSADDR, 105, {"topic": "ExhData"})[0]
    except OSError as e:
        code = str(e)
    check(code == 0, f"with descriptors back the NameServer answers a route query (code {code})")

    bk.kill()
    bk.wait()
    broker(nofile=512, count=2)
    cl2 = Client(f"127.0.0.1:{ENV.rmt_port_last('broker')}", "ExhData")
    h, _ = cl2.call(30, {"topic": "ExhData", "queueId": "0"})
    have = int(h.get("extFields", {}).get("offset", "-1"))
    check(have >= acked, f"after SIGKILL: {have} messages in the queue, {acked} acknowledged "
          f"(0 lost)")


def half_frames(port, n, total, send):
    """@n connections each announce a @total-byte frame and send @send bytes of it."""
    socks, closed = [], 0
    chunk = b"\0" * MIB
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        hdr = b'{"code":105,"flag":0,"opaque":1,"extFields":{}}'
        try:
            s.sendall(struct.pack(">II", total - 4, len(hdr)) + hdr)
            left = send
            while left > 0:
                s.sendall(chunk[:min(left, MIB)])
                left -= min(left, MIB)
        except OSError:
            closed += 1
        socks.append(s)
    return socks, closed


def case_frames():
    own_limit_up()
    ns = namesrv()
    time.sleep(0.5)
    base = rss(ns.pid)
    socks, closed = half_frames(ENV.base, 64, 64 * MIB, 60 * MIB)
    time.sleep(1)
    grew = rss(ns.pid) - base
    check(grew < 256 * MIB + 64 * MIB,
          f"NameServer: 64 half frames of 60 MiB: RSS grew {grew // MIB} MiB "
          f"(maxFrameMemory 256 MiB + slack); {closed} sends cut off")
    code, remark, _ = call(NSADDR, 105, {"topic": "NoSuchTopic"})
    check(code == 17, f"a route query is answered meanwhile (code {code})")
    for s in socks:
        s.close()
    ENV.procs.remove(ns)
    ns.terminate()
    ns.wait()
    log = ENV.log_of("namesrv")
    check("maxFrameMemory" in log and "maxFrameMemory 0\n" not in log,
          "the NameServer counts and names its refusals: "
          + str([ln[25:] for ln in log.splitlines() if "refused or closed" in ln][-1:]))

    namesrv()
    bk = broker(extra=["--remotingMaxFrameSize=67108864"])
    rc, out, err = cli("topic", "create", "ExhData", "--queues=1")
    port = ENV.rmt_port("broker")
    client = Client(f"127.0.0.1:{port}", "ExhData")
    time.sleep(0.5)
    base = rss(bk.pid)
    socks, closed = half_frames(port, 64, 64 * MIB, 60 * MIB)
    time.sleep(1)
    grew = rss(bk.pid) - base
    check(grew < 256 * MIB + 64 * MIB,
          f"broker: 64 half frames of 60 MiB: RSS grew {grew // MIB} MiB "
          f"(remotingMaxFrameMemory 256 MiB + slack); {closed} sends cut off")
    ok, bad = client.send(10)
    check(ok == 10, f"a SEND is answered meanwhile: 10 of 10 ({bad[:2]})")
    info = runtime_info(client)
    check(int(info.get("remotingRefusedFrameMemory", "0")) > 0,
          f"refusals counted (remotingRefusedFrameMemory {info.get('remotingRefusedFrameMemory')}"
          f", remotingFrameMemory {info.get('remotingFrameMemory')})")
    for s in socks:
        s.close()


def case_limits():
    own_limit_up()
    namesrv()
    broker(nofile=256)
    log = ENV.log_of("broker")
    check("fdReserve 256 lowered to 128" in log,
          "under ulimit -n 256 fdReserve is lowered to half the limit: "
          + str([ln[25:] for ln in log.splitlines() if "fdReserve" in ln][:1]))
    rc, out, err = cli("topic", "create", "ExhData", "--queues=1")
    check(rc == 0, f"topic ExhData created ({(out + err).strip()[:80]})")
    client = Client(f"127.0.0.1:{ENV.rmt_port('broker')}", "ExhData")
    acked, bad = client.send(10)
    check(acked == 10, f"... and the broker serves: 10 of 10 SEND_OK ({bad[:2]})")

    def tiny():
        resource.setrlimit(resource.RLIMIT_NOFILE, (30, 30))
    for name, argv in (("broker2", [BK, f"--namesrvAddr={NSADDR}", "--listenPort=0",
                                    f"--dataplanePort={ENV.base + 40}", "--dataplaneCores=1",
                                    f"--storePathRootDir={ENV.tmp}/broker2"]),
                       ("namesrv2", [NS, f"--listenPort={ENV.base + 2}",
                                     f"--kvConfigPath={ENV.tmp}/kv2.json",
                                     "--bindAddress=127.0.0.1"])):
        p = ENV.start(name, argv, preexec_fn=tiny)
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            rc = None
        log = ENV.log_of(name)
        check(rc == 1 and " ready: " not in log and "listening on" not in log,
              f"{name} under ulimit -n 30 refuses to start (rc {rc})")
        check("raise the limit" in log and "fdReserve" in log,
              "... naming the limit and fdReserve: "
              + str([ln[25:] for ln in log.splitlines() if "raise the limit" in ln][:1]))


def main():
    try:
        {"fds": case_fds, "frames": case_frames, "limits": case_limits}[CASE]()
    except Exception:  # noqa: BLE001 - a crash of the test is a failure, not a pass
        traceback.print_exc()
        ENV.failed.append("the test raised")
    finally:
        sys.exit(ENV.finish("EXH_KEEP"))


main()
