#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check exported symbol prefixes of the built static libraries (docs/naming.md).

Usage: naming.py LIB... (paths of lib*.a). Prints "N passed, N failed" over symbols.
"""
import os
import subprocess
import sys

PREFIXES = {
    "libsp_base.a": ("log_", "err_", "clk_", "crc32_", "cfg_", "hist_", "ring_", "jbuf_", "cidr_", "sha1_", "hmac_", "ipcount_", "fdlim_", "sp_assert_fail"),
    "libsp_acl.a": ("acl_",),
    "libsp_wire.a": ("wire_",),
    "libsp_store.a": ("store_", "clog_", "cq_", "idx_", "meta_", "tw_"),
    "libsp_net.a": ("dp_",),
    "libsp_dp.a": ("dp_",),
    "libsp_ctl.a": ("ns_", "ctl_", "route_"),
    "libsp_client.a": ("sp_",),
    # the installed one: sp_client, sp_base, sp_wire and sp_net together
    "libsprocket.a": ("sp_", "log_", "err_", "clk_", "crc32_", "cfg_", "hist_", "ring_", "jbuf_",
                      "cidr_", "sha1_", "hmac_", "ipcount_", "fdlim_", "wire_", "dp_"),
    "libsp_bk.a": ("bk_",),
    "libsp_cli.a": ("cli_",),
}


def main():
    passed = failed = 0
    for lib in sys.argv[1:]:
        allowed = PREFIXES.get(os.path.basename(lib))
        if allowed is None:
            print(f"{lib}: no prefixes registered in docs/naming.md")
            failed += 1
            continue
        out = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue
            sym = parts[2]
            if sym.startswith(allowed):
                passed += 1
            else:
                failed += 1
                print(f"{os.path.basename(lib)}: {sym} lacks a registered prefix {allowed}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
