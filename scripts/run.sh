#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The main job. Today (until the broker lands, see README "Status"): install,
# build, and run sprocket-bench's latency benchmark of the dataplane transport
# against its echo peer, side by side with the raw port floor, on every
# backend this machine can run (udp always; af_packet across a veth pair in
# namespaces it creates when root; dpdk over net_memif when built with DPDK).
#
#   scripts/run.sh                         all backends, 64 B and 1 KiB, 5 s each
#   scripts/run.sh --backend=udp           one backend
#   DURATION=10 SIZES="64 1024 65536" scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
DURATION=${DURATION:-5}
SIZES=${SIZES:-"64 1024"}
backends=""
for a in "$@"; do
	case "$a" in
	--backend=*) backends="${a#--backend=}" ;;
	*) echo "usage: scripts/run.sh [--backend=udp|af_packet|dpdk]" >&2; exit 2 ;;
	esac
done

scripts/bootstrap.sh
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" -Dwerror=true
fi
ninja -C "$BUILD"
bench="$BUILD/bench/sprocket-bench"

if [ -z "$backends" ]; then
	backends="udp"
	if [ "$(id -u)" = 0 ]; then backends="$backends af_packet"; fi
	if grep -q 'SP_DP_HAVE_DPDK' "$BUILD/build.ninja" 2>/dev/null; then backends="$backends dpdk"; fi
fi

echo "== sprocket-bench ping: transport round trips vs the raw port floor (latency in us)"
first=1
for b in $backends; do
	for s in $SIZES; do
		if [ $first = 1 ]; then
			"$bench" ping --backend="$b" --size="$s" --duration="$DURATION"
			first=0
		else
			"$bench" ping --backend="$b" --size="$s" --duration="$DURATION" | grep -v '^#\|^mode'
		fi
	done
done
