#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Install what is missing, build, run every test suite; last line is
# "N passed, N failed" (N = meson tests: each unit test executable, each
# fuzz corpus replay, each lint check, the short crash run). Exits non-zero on any failure.
#
#   scripts/test.sh            build dir: build/
#   BUILD=dir scripts/test.sh  another build dir
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}

scripts/bootstrap.sh

if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" -Dwerror=true
fi
ninja -C "$BUILD" -j "$JOBS"

rc=0
# Every suite but the long crash run (.ci/run runs it).
meson test -C "$BUILD" --print-errorlogs --num-processes "$JOBS" --no-suite crash || rc=$?
python3 scripts/meson_count.py "$BUILD" || rc=1
exit $rc
