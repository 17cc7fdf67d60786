#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Install every Debian package that sprocket's build, tests and benchmarks need.
# Idempotent: when everything is present it only runs dpkg-query and exits.
set -euo pipefail

PKGS=(
	# build
	build-essential meson ninja-build pkgconf python3
	clang llvm libclang-rt-14-dev clang-format
	# libraries
	liburcu-dev libjemalloc-dev zlib1g-dev libisal-dev libjson-c-dev libjansson-dev
	dpdk-dev libdpdk-dev
	libbenchmark-dev
	# tests and tooling
	iproute2 nftables
)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi

echo "bootstrap: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
