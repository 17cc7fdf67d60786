#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/deb.sh [OUTDIR] - build the Debian package sprocket_VERSION_ARCH.deb
# from this tree (a release build, prefix /usr), into OUTDIR (default
# build-deb/). Prints the package's path last.
#
# The package holds the daemons, the CLI, libsprocket (shared and static,
# headers, sprocket.pc), the man pages, the sample configurations, the
# systemd units and /etc/sprocket/{namesrv,broker}.properties (conffiles).
# Its dependencies come from dpkg-shlibdeps over the binaries. Installing it
# creates the system user sprocket, and where systemd runs, enables and starts
# sprocket-namesrv.service and sprocket-broker@broker.service.
# tests/integration/deb.py installs it into a fresh Debian 12 root.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
out=$(realpath -m "${1:-build-deb}")
version=$(sed -n "s/^\tversion: '\(.*\)',$/\1/p" meson.build | head -n1)
arch=$(dpkg --print-architecture)
build="$out/build"
root="$out/root"

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" --prefix=/usr --sysconfdir=/etc --buildtype=release \
		-Dtests=false -Dbench=false >"$out.setup.log" 2>&1 || {
		cat "$out.setup.log" >&2
		exit 1
	}
fi
ninja -C "$build" >/dev/null
rm -rf "$root"
meson install -C "$build" --destdir "$root" --no-rebuild >/dev/null

# configuration, documentation
install -d "$root/etc/sprocket" "$root/usr/share/doc/sprocket"
install -m 0644 conf/namesrv.properties conf/broker.properties "$root/etc/sprocket/"
install -m 0644 docs/operations.md docs/client.md "$root/usr/share/doc/sprocket/"
printf 'sprocket\nLicense: Apache-2.0 (/usr/share/common-licenses/Apache-2.0)\n' \
	>"$root/usr/share/doc/sprocket/copyright"
gzip -9n "$root"/usr/share/man/man*/*

# dependencies of the ELF files, as dpkg-shlibdeps finds them
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debian"
printf 'Source: sprocket\n\nPackage: sprocket\nArchitecture: any\n' >"$tmp/debian/control"
mapfile -t elfs < <(find "$root/usr/bin" "$root/usr/lib" -type f \( -perm -u+x -o -name '*.so*' \))
deps=$(cd "$tmp" && dpkg-shlibdeps -O -l"$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)" \
	"${elfs[@]}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')

install -d "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: sprocket
Version: $version
Architecture: $arch
Maintainer: sprocket developers <sprocket@localhost>
Installed-Size: $size
Depends: $deps, adduser, procps
Section: net
Priority: optional
Description: low-latency message broker with RocketMQ's model and protocol
 sprocket is a message broker in C: NameServer, broker groups of a master and
 slaves, topics split into queues, one CommitLog per core, ordered, delayed
 and transactional messages, sync/async flush and replication, and a
 kernel-bypass dataplane (DPDK, AF_PACKET or UDP). RocketMQ 4.x clients and
 tools work unchanged over its remoting port.
 .
 This package has the broker, the NameServer, the sprocket CLI, libsprocket
 (the C client) and systemd units.
EOF
printf '/etc/sprocket/namesrv.properties\n/etc/sprocket/broker.properties\n' >"$root/DEBIAN/conffiles"
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
	if ! getent passwd sprocket >/dev/null; then
		adduser --system --group --home /var/lib/sprocket --no-create-home sprocket >/dev/null
	fi
	install -d -o sprocket -g sprocket -m 0750 /var/lib/sprocket
	ldconfig
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload
		systemctl enable --now sprocket-namesrv.service sprocket-broker@broker.service
	fi
fi
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
	systemctl disable --now sprocket-namesrv.service sprocket-broker@broker.service || true
fi
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
	ldconfig
	[ -d /run/systemd/system ] && systemctl daemon-reload || true
fi
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
deb="$out/sprocket_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
