#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Print 'N passed, N failed' from a meson testlog.json (one JSON object per line).

Usage: meson_count.py BUILDDIR... Exit status 1 when any test failed or none ran.
meson's own summary is not read as a test count by CI, hence this line.
"""
import json
import os
import sys

passed = failed = 0
for build in sys.argv[1:]:
    path = os.path.join(build, "meson-logs", "testlog.json")
    if not os.path.exists(path):
        print(f"{path}: missing (no test ran)", file=sys.stderr)
        failed += 1
        continue
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            if rec.get("result") in ("OK", "EXPECTEDFAIL", "SKIP"):
                passed += rec.get("result") != "SKIP"
            else:
                failed += 1
                print(f"FAILED: {build}: {rec.get('name')} ({rec.get('result')})")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or passed == 0 else 0)
