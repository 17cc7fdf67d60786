#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fail when a C source or header differs from what .clang-format produces.

Usage: format.py SRCROOT CLANG_FORMAT. Checks every *.c/*.h/*.cpp under the
module folders; prints the files that need `clang-format -i` and a diff hint.
"""
import os
import subprocess
import sys

MODULES = ("common", "store", "dataplane", "control", "client", "broker", "bench", "tests")


def sources(root):
    for mod in MODULES:
        for base, dirs, files in os.walk(os.path.join(root, mod)):
            dirs[:] = [d for d in dirs if d != "corpus"]
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cpp")):
                    yield os.path.join(base, f)


def main():
    root, clang_format = sys.argv[1], sys.argv[2]
    bad = []
    checked = 0
    for path in sources(root):
        checked += 1
        with open(path, "rb") as f:
            original = f.read()
        out = subprocess.run([clang_format, "--style=file", "--assume-filename=" + path],
                             input=original, capture_output=True, check=True, cwd=root)
        if out.stdout != original:
            bad.append(os.path.relpath(path, root))
    for b in bad:
        print("needs clang-format -i: " + b)
    print(f"{checked - len(bad)} passed, {len(bad)} failed")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
