#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check module layering (docs/architecture.md, docs/style.md 9.1) on every #include.

- common/ (base) includes only libc and its own headers.
- common/wire/ is a pure codec: no log, no stdio, no allocation calls.
- store/ never sees sockets, DPDK, liburcu, dataplane or control headers.
- client/ never includes broker modules (store, control, dataplane internals); the
  shared transport headers dp/port.h and dp/xport.h are the exception (docs/dataplane.md).
- control/ never includes dataplane internals (only dp/cmd.h crosses).
- broker/ is in rooms by thread (docs/architecture.md, "The broker's rooms"): broker/core/
  (what a dataplane core runs) includes no header of ctl/, remoting/, http/, ha/ or control/,
  and calls nothing that allocates, blocks, sleeps or logs (CORE_CALL), except in the setup
  functions the control thread runs before the cores start (CORE_SETUP).
Prints one line per violation and "N passed, N failed" (N = files checked).
"""
import os
import re
import sys

INC = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
CALL = re.compile(r'\b(malloc|calloc|realloc|free|printf|fprintf|fopen|log_\w+)\s*\(')

SOCKETS = ("sys/socket.h", "netinet/", "arpa/inet.h", "linux/if_packet.h", "net/if.h",
           "sys/epoll.h", "poll.h")


# A dataplane core never blocks: these calls are not made in broker/core/ ...
CORE_CALL = re.compile(r'\b(malloc|calloc|realloc|free|strdup|mmap|munmap|open|fopen|close|'
                       r'fsync|fdatasync|msync|sleep|usleep|nanosleep|poll|epoll_wait|select|'
                       r'pthread_mutex_lock|pthread_cond_wait|pthread_join|printf|fprintf|'
                       r'snprintf|syslog|log_\w+)\s*\(')
# ... except in these, which run on the control thread before the cores start or after they stop
CORE_SETUP = {"table_alloc", "bk_core_init", "bk_core_fini"}
FUNC = re.compile(r'^([a-z_][a-z0-9_]*)\(', re.M)

# What libsprocket may use from dataplane/: the ports and the session transport
# (library sp_net), which clients run on their own threads.
CLIENT_OK = ("dp/port.h", "dp/xport.h")


def mod_of(rel):
    return rel.split(os.sep)[0]


def rules_for(rel):
    """Return (forbidden include prefixes, forbid_calls) for a file."""
    parts = rel.split(os.sep)
    mod = parts[0]
    if mod == "common":
        wire = "wire" in parts
        forbidden = ["store/", "dp/", "dataplane/", "control/", "sprocket/", "rte_", "urcu"]
        forbidden += list(SOCKETS)
        if wire:
            forbidden += ["common/log.h", "stdio.h"]
        return forbidden, wire
    if mod == "store":
        return ["dp/", "dataplane/", "control/", "rte_", "urcu", "sprocket/"] + list(SOCKETS), False
    if mod == "client":
        return ["store/", "dp/", "dataplane/", "control/", "rte_", "urcu"], False
    if mod == "control":
        return ["dataplane/"], False
    if mod == "broker" and len(parts) > 2 and parts[1] == "core":
        return ["ctl/", "remoting/", "http/", "ha/", "control/"] + list(SOCKETS), False
    return [], False


def core_calls(rel, text):
    """Calls in a broker/core/ file that a dataplane core must not make."""
    errs = []
    for m in CORE_CALL.finditer(text):
        fns = [f.group(1) for f in FUNC.finditer(text, 0, m.start())]
        fn = fns[-1] if fns else "?"
        if fn not in CORE_SETUP:
            errs.append(f"{rel}: {fn}() calls {m.group(1)}() (a dataplane core never blocks)")
    return errs


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def main():
    root = sys.argv[1]
    checked = 0
    bad = 0
    for mod in ("common", "store", "dataplane", "control", "client", "broker"):
        for base, _, files in os.walk(os.path.join(root, mod)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(base, f)
                rel = os.path.relpath(path, root)
                forbidden, no_calls = rules_for(rel)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = strip_comments(fh.read())
                checked += 1
                errs = []
                for inc in INC.findall(text):
                    if mod_of(rel) == "client" and inc in CLIENT_OK:
                        continue
                    for pref in forbidden:
                        if inc.startswith(pref) or inc == pref:
                            errs.append(f"{rel}: includes <{inc}> (forbidden here: {pref})")
                if rel.startswith(os.path.join("broker", "core") + os.sep):
                    errs += core_calls(rel, text)
                if no_calls:
                    for m in CALL.finditer(text):
                        errs.append(f"{rel}: calls {m.group(1)}() (wire codecs are pure)")
                for e in errs:
                    print(e)
                bad += 1 if errs else 0
    print(f"{checked - bad} passed, {bad} failed")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
