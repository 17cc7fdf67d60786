#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Install every Debian package that sprocket's build, tests and benchmarks need,
# and the node modules of the RocketMQ client tests (tests/compat: ali-ons,
# pinned by its package-lock.json).
# Idempotent: when everything is present it only runs dpkg-query, node and
# sha256sum, and exits.
#
#   scripts/bootstrap.sh          everything
#   scripts/bootstrap.sh --bench  only what scripts/run.sh and bench/compare.sh
#                                 need: no clang/llvm (sanitizer and fuzz
#                                 builds), no node (tests/compat)
set -euo pipefail
cd "$(dirname "$0")/.."

only_bench=false
case "${1:-}" in
"") ;;
--bench) only_bench=true ;;
*) echo "usage: scripts/bootstrap.sh [--bench]" >&2; exit 2 ;;
esac

PKGS=(
	# build
	build-essential meson ninja-build pkgconf python3
	# libraries
	liburcu-dev libjemalloc-dev zlib1g-dev libisal-dev libjson-c-dev libjansson-dev libyaml-dev libssl-dev
	# the HTTP endpoints (/metrics, /health); the test parses /metrics with Prometheus' client
	libmicrohttpd-dev python3-prometheus-client
	# the daemons' sd_notify (systemd Type=notify units)
	libsystemd-dev
	# automatic failover: the coordination service and its CLI (tests, scripts/cluster.sh --failover)
	etcd-server etcd-client
	dpdk-dev libdpdk-dev
	libbenchmark-dev
	# the TLS test makes its certificate with the openssl tool
	openssl
	# network namespaces and the af_packet port's ICMP guard (af_packet runs)
	iproute2 nftables
	# peers side by side (bench/compare.sh): servers, client libraries, the plot
	nats-server redis-server libnats-dev libhiredis-dev gnuplot-nox
)
if ! $only_bench; then
	# sanitizer and fuzz builds, formatting; the console's browser test (headless)
	PKGS+=(clang llvm libclang-rt-14-dev clang-format chromium fonts-dejavu-core)
	# the Debian package (scripts/deb.sh) and its test in a fresh root (tests/integration/deb.py)
	PKGS+=(dpkg-dev debootstrap make)
fi

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done

# node and npm run tests/compat. From apt only when missing: a node installed
# otherwise (NodeSource's nodejs bundles npm and conflicts with Debian's npm)
# is fine, ali-ons needs node >= 8.
if ! $only_bench && ! command -v node >/dev/null 2>&1; then
	missing+=(nodejs)
fi
if ! $only_bench && ! command -v npm >/dev/null 2>&1; then
	missing+=(npm)
fi

if [ "${#missing[@]}" -gt 0 ]; then
	echo "bootstrap: installing ${missing[*]}"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		SUDO="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if $only_bench; then
	exit 0
fi

# promtool checks /metrics (tests/integration/metrics.py). Debian ships it in
# the prometheus package, whose install also enables a Prometheus server: take
# the one tool out of the package instead.
if ! command -v promtool >/dev/null 2>&1; then
	echo "bootstrap: promtool from Debian's prometheus package"
	tmp=$(mktemp -d)
	chmod 755 "$tmp" # apt's _apt user writes the download
	if (cd "$tmp" && apt-get download -qq prometheus) &&
		dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"; then
		SUDO=""
		[ "$(id -u)" -ne 0 ] && SUDO="sudo"
		$SUDO install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
	else
		echo "bootstrap: could not fetch the prometheus package (promtool)" >&2
		rm -rf "$tmp"
		exit 1
	fi
	rm -rf "$tmp"
fi

# tests/compat/node_modules exactly as package-lock.json says (npm ci), again
# only when the lock, package.json or node changed since the last install: the
# stamp lives in node_modules, so deleting node_modules also reinstalls.
compat=tests/compat
stamp=$compat/node_modules/.sprocket-bootstrap
want="$(cat "$compat/package.json" "$compat/package-lock.json" | sha256sum | cut -d' ' -f1) node $(node --version)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
	echo "bootstrap: npm ci in $compat"
	if ! (cd "$compat" && npm ci --no-audit --no-fund --loglevel=error); then
		echo "bootstrap: npm ci in $compat failed (is the npm registry reachable?)" >&2
		exit 1
	fi
	printf '%s\n' "$want" >"$stamp"
fi
