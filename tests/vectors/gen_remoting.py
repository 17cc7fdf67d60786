#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate the RocketMQ remoting test vectors in tests/vectors/remoting/.

An implementation independent of sprocket's C codec, written from
docs/rocketmq-protocol.md (struct.pack, zlib.crc32 which is
java.util.zip.CRC32), so the C decoder is checked against a second reading
of the spec, not against itself. Header JSON texts are the ones the
reference recorded from real clients. Rerun after changing it:
    python3 tests/vectors/gen_remoting.py
and commit the .bin files together with the script. README.md in the output
folder lists each file and the values test_vectors.c expects.
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "remoting")


def frame_json(header: bytes, body: bytes = b"") -> bytes:
    length = 4 + len(header) + len(body)
    return struct.pack(">iI", length, (0 << 24) | len(header)) + header + body


def frame_bin(code, lang, version, opaque, flag, remark, ext, body=b""):
    h = struct.pack(">hBhii", code, lang, version, opaque, flag)
    r = remark.encode() if remark else b""
    h += struct.pack(">i", len(r)) + r
    e = b""
    for k, v in ext:
        e += struct.pack(">h", len(k)) + k.encode() + struct.pack(">i", len(v)) + v.encode()
    h += struct.pack(">i", len(e)) + e
    length = 4 + len(h) + len(body)
    return struct.pack(">iI", length, (1 << 24) | len(h)) + h + body


def record(queue_id, flag, queue_offset, phys, sysflag, born_ts, born, store_ts, store,
           reconsume, prepared, body, topic, props):
    def host(h):
        ip, port = h
        return bytes(ip) + struct.pack(">i", port)
    rest = struct.pack(">iiqqiq", queue_id, flag, queue_offset, phys, sysflag, born_ts)
    rest += host(born) + struct.pack(">q", store_ts) + host(store)
    rest += struct.pack(">iq", reconsume, prepared)
    rest += struct.pack(">i", len(body)) + body
    rest += struct.pack(">b", len(topic)) + topic
    rest += struct.pack(">h", len(props)) + props
    crc = zlib.crc32(body) & 0x7FFFFFFF
    total = 4 + 4 + 4 + len(rest)
    return struct.pack(">iIi", total, 0xDAA320A7, crc) + rest


def batch_item(flag, body, props):
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + \
        struct.pack(">h", len(props)) + props


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    # ali-ons SEND_MESSAGE_V2 as recorded in the reference (§4.1): numbers and
    # booleans unquoted, trailing \u0002 in the property string.
    send_hdr = (b'{"code":310,"extFields":{"a":"PID_TEST","b":"TopicTest","c":"TBW102","d":4,'
                b'"e":1,"f":0,"g":1796059809951,"h":0,'
                b'"i":"TAGS\\u0001TagA\\u0002KEYS\\u0001k1\\u0002","j":0,"k":false},'
                b'"flag":0,"language":"JAVA","opaque":7,"version":121}')
    files["send_v2_alions.bin"] = frame_json(send_hdr, b"hello")
    # A Java response capture (§1.2): no remark, no extFields.
    files["resp_java.bin"] = frame_json(
        b'{"code":0,"flag":1,"language":"JAVA","opaque":0,'
        b'"serializeTypeCurrentRPC":"JSON","version":403}')
    # ROCKETMQ binary header (§1.3): GET_ROUTEINFO_BY_TOPIC.
    files["route_req_bin.bin"] = frame_bin(105, 0, 409, 42, 0, "hi",
                                           [("topic", "TopicTest")])
    # A stored record (§5.1): 127.0.0.1:19876 store host, offset 0.
    props = b"TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x01AC11000100002A9F0000000000000000"
    files["record_v4.bin"] = record(1, 0, 5, 0, 0, 1796059809951, ([192, 0, 2, 2], 51234),
                                    1796059810000, ([127, 0, 0, 1], 19876), 0, 0,
                                    b"hello", b"TopicTest", props)
    # A SEND_BATCH body (§5.4) with two messages.
    files["batch_two.bin"] = batch_item(0, b"m1", b"TAGS\x01A\x02UNIQ_KEY\x01X1") + \
        batch_item(3, b"message-2", b"KEYS\x01k2")
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
