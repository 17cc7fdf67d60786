# SPDX-License-Identifier: Apache-2.0
"""A remoting long-poll flood: many connections from one source address, each with many
parked PULLs (tests/integration/isolation.py, bench/iso_bench.py; docs/isolation.md)."""
import base64
import hashlib
import hmac
import json
import select
import socket
import struct
import time


def frame(code, opaque, ext, body=b""):
    hdr = json.dumps({"code": code, "language": "JAVA", "version": 409, "opaque": opaque,
                      "flag": 0, "extFields": ext}).encode()
    return struct.pack(">II", 4 + len(hdr) + len(body), len(hdr)) + hdr + body


def signed(ext, ak, sk, body=b""):
    """@ext with RocketMQ's ACL signature (AccessKey, Signature: HmacSHA1, base64)."""
    e = dict(ext)
    e["AccessKey"] = ak
    content = "".join(e[k] for k in sorted(e)).encode() + body
    e["Signature"] = base64.b64encode(hmac.new(sk.encode(), content, hashlib.sha1).digest()).decode()
    return e


class Flood:
    """@conns connections from @src, each with @per long-polling PULLs of @topic in flight;
    @creds (access key, secret key): signed, for a broker with aclEnable."""

    def __init__(self, addr, src, topic, conns, per, creds=None):
        host, port = addr.rsplit(":", 1)
        self.socks = []
        self.codes = {}
        self.remarks = set()
        self.bufs = {}
        for k in range(conns):
            s = socket.socket()
            s.bind((src, 0))
            s.connect((host, int(port)))
            s.setblocking(False)
            self.socks.append(s)
            self.bufs[s] = b""
            ext = {"consumerGroup": "GID_FLOOD", "topic": topic, "queueId": "0",
                   "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0",
                   "suspendTimeoutMillis": "30000", "subscription": "*", "subVersion": "0",
                   "expressionType": "TAG"}
            if creds:
                ext = signed(ext, *creds)
            pulls = b"".join(frame(11, k * per + i + 1, ext) for i in range(per))
            s.setblocking(True)
            s.sendall(pulls)
            s.setblocking(False)

    def read(self, secs):
        """Reads answers for @secs seconds."""
        end = time.time() + secs
        while time.time() < end:
            r, _, _ = select.select(self.socks, [], [], 0.1)
            for s in r:
                try:
                    d = s.recv(1 << 20)
                except BlockingIOError:
                    continue
                buf = self.bufs[s] + d
                while len(buf) >= 8 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                    n = struct.unpack(">I", buf[:4])[0]
                    hl = struct.unpack(">I", buf[4:8])[0] & 0xFFFFFF
                    h = json.loads(buf[8:8 + hl])
                    self.codes[h["code"]] = self.codes.get(h["code"], 0) + 1
                    if h.get("remark"):
                        self.remarks.add(h["remark"][:120])
                    buf = buf[4 + n:]
                self.bufs[s] = buf

    def answered(self):
        return sum(self.codes.values())

    def close(self):
        for s in self.socks:
            s.close()
