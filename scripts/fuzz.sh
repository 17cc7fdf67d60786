#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Run the libFuzzer targets: scripts/fuzz.sh [SECONDS_EACH] [TARGET...]
# Builds build-fuzz (clang, -Dfuzz=true, ASan+UBSan), then runs each target
# (default: all) for SECONDS_EACH (default 600) with a scratch corpus in
# build-fuzz/corpus-<target> seeded from tests/fuzz/corpus/<target>. Findings
# land in build-fuzz/findings-<target>/; copy a minimized reproducer into
# tests/fuzz/corpus/<target>/ together with the fix so fuzz-regress keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-600}
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
	targets=(remoting record dp config meta_delay meta_timer namesrv route broker rmt fastjson)
fi

if [ ! -d build-fuzz ]; then
	CC=clang meson setup build-fuzz -Dbench=false -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false
fi
ninja -C build-fuzz $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}")

for t in "${targets[@]}"; do
	mkdir -p "build-fuzz/corpus-$t" "build-fuzz/findings-$t"
	echo "fuzz: $t for ${secs}s"
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="build-fuzz/findings-$t/" \
		"build-fuzz/corpus-$t" "tests/fuzz/corpus/$t" 2>&1 | tail -n 15
done
