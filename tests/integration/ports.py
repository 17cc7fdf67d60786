# SPDX-License-Identifier: Apache-2.0
"""Free ports for the integration tests that start daemons on fixed port blocks."""
import socket


def free_base(rnd, span=40):
    """A base port with @span free ports above it (TCP and UDP), below the kernel's
    ephemeral range (32768 up), where a client's outgoing connection could take it."""
    for _ in range(200):
        b = 10000 + rnd.randrange(0, 220) * 100
        ok = True
        for port in range(b, b + span):
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                s = socket.socket(socket.AF_INET, kind)
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    ok = False
                finally:
                    s.close()
            if not ok:
                break
        if ok:
            return b
    raise SystemExit(f"no {span} free ports below 32768")
