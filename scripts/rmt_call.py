# SPDX-License-Identifier: Apache-2.0
"""One RocketMQ remoting request over TCP, for scripts/cluster.sh and the integration tests.

call(addr, code, ext, body) -> (code, remark, body) of the answer; addr is "host:port".
The frame: 4-byte length, 4-byte header length (JSON serialization), JSON header, body.
"""
import json
import socket
import struct


def call(addr, code, ext=None, body=b"", timeout=5, tls_ca=None):
    """tls_ca: speak TLS, trusting the CA certificate in this PEM file."""
    return call_ext(addr, code, ext, body, timeout, tls_ca)[:3]


def call_ext(addr, code, ext=None, body=b"", timeout=5, tls_ca=None):
    """As call(), and the answer's extFields (a dict) fourth."""
    hdr = json.dumps({"code": code, "language": "JAVA", "version": 409, "opaque": 1, "flag": 0,
                      "extFields": ext or {}}).encode()
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    if tls_ca:
        import ssl
        ctx = ssl.create_default_context(cafile=tls_ca)
        s = ctx.wrap_socket(s, server_hostname=host)
    s.sendall(struct.pack(">II", 4 + len(hdr) + len(body), len(hdr)) + hdr + body)
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    if len(buf) < 8:
        raise ConnectionError(f"{addr}: closed without an answer")
    hl = struct.unpack(">I", buf[4:8])[0] & 0xFFFFFF
    r = json.loads(buf[8:8 + hl])
    return r.get("code"), r.get("remark", ""), buf[8 + hl:], r.get("extFields") or {}
