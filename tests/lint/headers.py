#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Header self-containment: every public header compiles on its own (C11, -Wall -Werror).

Usage: headers.py SRCROOT BUILDROOT CC. Public headers are <module>/include/**/*.h.
"""
import glob
import os
import subprocess
import sys


def main():
    root, build, cc = sys.argv[1], sys.argv[2], sys.argv[3]
    incs = sorted(glob.glob(os.path.join(root, "*", "include")))
    flags = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
             "-I" + build]
    for inc in incs:
        flags.append("-I" + inc)
    for pc in ("json-c", "liburcu"):
        out = subprocess.run(["pkg-config", "--cflags", pc], capture_output=True, text=True)
        flags += out.stdout.split()
    headers = []
    for inc in incs:
        headers += sorted(glob.glob(os.path.join(inc, "**", "*.h"), recursive=True))
    bad = 0
    for h in headers:
        rel = os.path.relpath(h, os.path.dirname(os.path.dirname(h)))
        src = f'#include "{os.path.relpath(h, h.split("/include/")[0] + "/include")}"\n'
        res = subprocess.run([cc, *flags, "-x", "c", "-"], input=src, capture_output=True,
                             text=True)
        if res.returncode != 0:
            bad += 1
            print(f"not self-contained: {os.path.relpath(h, root)}\n{res.stderr}")
    print(f"{len(headers) - bad} passed, {bad} failed")
    return 1 if bad or not headers else 0


if __name__ == "__main__":
    sys.exit(main())
