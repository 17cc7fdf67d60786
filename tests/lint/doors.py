#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every door has a row in the permission table (common/acl_door.c; docs/security.md).

Usage: doors.py SOURCE_ROOT

Reads what the daemons answer from their own dispatch code, not from a list kept here:
  - the broker's remoting port: the `case WIRE_REQ_*` labels of dispatch() in broker/remoting/bk_rmt.c;
  - the NameServer: those of dispatch_read() and dispatch_write() in control/ns_handle.c;
  - the broker's dataplane: those of dispatch() in broker/core/bk_core.c (`case WIRE_DP_OP_*`);
  - HTTP: the paths the handlers compare (`strcmp(r->path, "...")`, bk_api.c's table of
    "/api/..." paths) and the console (console_for_path: every other path, "/*").
Then fails for each code or path that has no row in its table, and for each row that no
dispatch code answers (a stale row). A new door cannot be added without deciding who may
use it. Prints "N passed, N failed".
"""
import os
import re
import sys

ROOT = sys.argv[1]


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def function_body(src, name):
    """The text of C function @name (its definition, from the name to its closing brace)."""
    m = re.search(r"^" + re.escape(name) + r"\(", src, re.M)
    if not m:
        raise SystemExit(f"no function {name}()")
    i = src.index("{", m.end())
    depth = 0
    for j in range(i, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return src[i:j]
    raise SystemExit(f"{name}(): no closing brace")


def cases(body, prefix):
    return set(re.findall(r"case " + prefix + r"(\w+):", body))


def table(src, name):
    m = re.search(r"static const struct acl_door " + name + r"\[\] = \{(.*?)\n\};", src, re.S)
    if not m:
        raise SystemExit(f"common/acl_door.c: no table {name}")
    return set(re.findall(r'E\(\s*("?[^,]+?"?)\s*,', m.group(1)))


def http_paths(*files):
    out = set()
    for rel in files:
        src = read(rel)
        out |= set(re.findall(r'strcmp\(r->path, "([^"]+)"\)', src))
        out |= set(re.findall(r'\{"(/api/[^"]+)", \w+\}', src))
        if "console_for_path(" in src:
            out.add("/*")
    return {f'"{p}"' for p in out}


def main():
    doors = read("common/acl_door.c")
    checks = [
        ("broker remoting", cases(function_body(read("broker/remoting/bk_rmt.c"), "dispatch"), "WIRE_REQ_"),
         table(doors, "broker")),
        ("namesrv remoting",
         cases(function_body(read("control/ns_handle.c"), "dispatch_read"), "WIRE_REQ_") |
         cases(function_body(read("control/ns_handle.c"), "dispatch_write"), "WIRE_REQ_"),
         table(doors, "namesrv")),
        ("broker dataplane", cases(function_body(read("broker/core/bk_core.c"), "dispatch"), "WIRE_DP_OP_"),
         table(doors, "dataplane")),
        ("broker HTTP", http_paths("broker/http/bk_http.c", "broker/http/bk_api.c"), table(doors, "http_broker")),
        ("namesrv HTTP", http_paths("control/ns_http.c"), table(doors, "http_namesrv")),
    ]
    passed = failed = 0
    for what, answered, rows in checks:
        if not answered:
            print(f"FAIL {what}: found no door in the dispatch code (has it moved?)")
            failed += 1
        for d in sorted(answered - rows):
            print(f"FAIL {what}: {d} is answered but has no row in common/acl_door.c")
            failed += 1
        for d in sorted(rows - answered):
            print(f"FAIL {what}: {d} has a row in common/acl_door.c but nothing answers it")
            failed += 1
        ok = answered & rows
        passed += len(ok)
        print(f"ok   {what}: {len(ok)} doors, each with a row")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
