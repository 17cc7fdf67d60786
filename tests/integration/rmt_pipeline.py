#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Remoting connections that pipeline one cheap, valid request as fast as they can
(tests/integration/isolation.py, bench/iso_bench.py; docs/isolation.md).

    rmt_pipeline.py ADDR SRC_IP CODE EXT_JSON SECONDS [BODY [CONNS]]

Each of CONNS connections (default 1) sends batches of BATCH frames while a thread reads
every answer, for SECONDS (0: until killed); then one line sums them:
{"sent": N, "answered": N, "codes": {code: count of a 1-in-64 sample}}.
"""
import json
import signal
import socket
import struct
import sys
import threading
import time

BATCH = 512


def frame(code, opaque, ext, body=b""):
    hdr = json.dumps({"code": code, "language": "JAVA", "version": 409, "opaque": opaque,
                      "flag": 0, "extFields": ext}).encode()
    return struct.pack(">II", 4 + len(hdr) + len(body), len(hdr)) + hdr + body


def pipeline(addr, src, code, ext, body, end, stop, stats, lock):
    host, port = addr.rsplit(":", 1)
    s = socket.socket()
    s.bind((src, 0))
    s.connect((host, int(port)))

    def reader():
        # drains as fast as the broker answers: frames are counted by their length prefix,
        # and only every 64th header is parsed for its code (a sample)
        buf = bytearray()
        at = 0
        n = 0
        while not stop.is_set():
            try:
                d = s.recv(1 << 20)
            except OSError:
                return
            if not d:
                return
            buf += d
            while len(buf) - at >= 8:
                total, hlen = struct.unpack_from(">II", buf, at)
                if len(buf) - at < 4 + total:
                    break
                if n % 64 == 0:
                    try:
                        c = json.loads(bytes(buf[at + 8:at + 8 + (hlen & 0xFFFFFF)])).get("code")
                    except ValueError:
                        c = "?"
                    with lock:
                        stats["codes"][str(c)] = stats["codes"].get(str(c), 0) + 1
                n += 1
                with lock:
                    stats["answered"] += 1
                at += 4 + total
            del buf[:at]
            at = 0

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    batch = b"".join(frame(code, i + 1, ext, body) for i in range(BATCH))
    while not stop.is_set() and time.time() < end:
        try:
            s.sendall(batch)
        except OSError:
            break
        with lock:
            stats["sent"] += BATCH
    stop.set()
    time.sleep(0.2)
    s.close()


def main():
    addr, src, code, ext, secs = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                  json.loads(sys.argv[4]), float(sys.argv[5]))
    body = sys.argv[6].encode() if len(sys.argv) > 6 else b""
    conns = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    stats = {"sent": 0, "answered": 0, "codes": {}}
    stop = threading.Event()
    lock = threading.Lock()
    end = time.time() + secs if secs > 0 else float("inf")
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ths = [threading.Thread(target=pipeline,
                            args=(addr, src, code, ext, body, end, stop, stats, lock))
           for _ in range(conns)]
    for t in ths:
        t.start()
    # the main thread waits for SIGTERM or the end; the writers stop with it
    while not stop.is_set() and time.time() < end:
        stop.wait(0.1)
    stop.set()
    for t in ths:
        t.join()
    print(json.dumps(stats), flush=True)


main()
