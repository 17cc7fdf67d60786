# SPDX-License-Identifier: Apache-2.0
"""libsprocket's public surface (docs/client.md "ABI").

usage: abi.py SOURCE_ROOT CC LIBSPROCKET_SO

- Each installed header (client/include/sprocket/{client,producer,consumer}.h) compiles alone
  with nothing but its own include directory: no project header leaks into it.
- client/libsprocket.map lists exactly the functions those headers declare.
- libsprocket.so exports exactly those, each at version SPROCKET_0, and has soname
  libsprocket.so.0.
Prints "N passed, N failed".
"""
import os
import re
import subprocess
import sys

HEADERS = ("client.h", "producer.h", "consumer.h")
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + what)


def main():
    root, cc, so = sys.argv[1:4]
    inc = os.path.join(root, "client", "include")
    text = ""
    for h in HEADERS:
        src = f"#include <sprocket/{h}>\nint main(void) {{ return 0; }}\n"
        r = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                            "-fsyntax-only", "-I", inc, "-x", "c", "-"],
                           input=src, capture_output=True, text=True)
        check(r.returncode == 0, f"sprocket/{h} compiles alone (C99, -I{inc} only): "
              f"{r.stderr.strip()[:400]}")
        r = subprocess.run([cc, "-E", "-P", "-I", inc, "-x", "c", "-"],
                           input=f"#include <sprocket/{h}>\n", capture_output=True, text=True)
        text += r.stdout
    # function declarations: "sp_name(" not followed by "*" (a typedef'd pointer's return type)
    declared = set(re.findall(r"\b(sp_[a-z0-9_]+)\s*\((?!\s*\*)", text))
    with open(os.path.join(root, "client", "libsprocket.map")) as f:
        body = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    mapped = set(re.findall(r"\b(sp_[a-z0-9_]+);", body))
    check(declared == mapped, "libsprocket.map lists the headers' functions: missing "
          f"{sorted(declared - mapped)}, extra {sorted(mapped - declared)}")
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                         check=True).stdout
    syms = [l.split()[-1] for l in out.splitlines() if l.split()]
    exported = {s.split("@")[0] for s in syms if s != "SPROCKET_0"}
    check(exported == mapped, f"libsprocket.so exports the map's functions only: extra "
          f"{sorted(exported - mapped)[:10]}, missing {sorted(mapped - exported)}")
    check(all(s.endswith("@@SPROCKET_0") for s in syms if s != "SPROCKET_0"),
          "every symbol at version SPROCKET_0")
    dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
    check("Library soname: [libsprocket.so.0]" in dyn, "soname libsprocket.so.0")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
