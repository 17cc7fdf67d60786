# SPDX-License-Identifier: Apache-2.0
"""The Debian package on a fresh Debian 12 root (docs/operations.md; issue 27).

usage: deb.py SOURCE_ROOT     (root; DEB_KEEP=1 keeps the scratch dir; exit 77: skipped)

scripts/deb.sh builds the package from the tree. debootstrap makes a minimal bookworm root;
apt installs the .deb there, pulling its dependencies from Debian. Checked: the user sprocket
and /var/lib/sprocket exist; /etc/sprocket's files are conffiles; the man pages, the units
and libsprocket.so.0 (in ldconfig's cache) are installed; `systemd-analyze verify` accepts
sprocket-namesrv.service and sprocket-broker@broker.service. Then, in a network namespace of
its own (loopback only), the installed sprocket-namesrv and sprocket-broker run as the user
sprocket, each with its file from /etc/sprocket, as the units would start them; the installed
CLI creates a topic, produces 20 messages and a group consumes all 20. Removing the package
leaves /etc/sprocket (conffiles) until a purge.
"""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
KEEP = os.environ.get("DEB_KEEP") == "1"
MIRROR = os.environ.get("DEB_MIRROR", "http://deb.debian.org/debian")
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    passed += ok
    failed += not ok


def run(argv, timeout=600, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def in_root(root, script, timeout=600):
    return run(["chroot", root, "/bin/sh", "-c", script], timeout=timeout)


# Inside the root, in a network namespace of its own: the daemons as the units start them,
# then the CLI. Prints the CLI's output; the daemons' logs go to /tmp/*.log in the root.
RUN = r"""
set -e
ip link set lo up
cd /var/lib/sprocket
setpriv --reuid=sprocket --regid=sprocket --init-groups \
    /usr/bin/sprocket-namesrv -c /etc/sprocket/namesrv.properties >/tmp/namesrv.log 2>&1 &
NS=$!
setpriv --reuid=sprocket --regid=sprocket --init-groups \
    /usr/bin/sprocket-broker -c /etc/sprocket/broker.properties >/tmp/broker.log 2>&1 &
BK=$!
for i in $(seq 1 100); do
    grep -q ' ready: ' /tmp/broker.log && break
    sleep 0.2
done
for i in $(seq 1 50); do
    sprocket topic create DebT --queues=4 >/dev/null 2>&1 && break
    sleep 0.2
done
seq 1 20 | sed 's/^/deb-/' | sprocket produce DebT
sprocket consume DebT --group=DebG --from=first -n 20 --wait-ms=3000
kill -TERM $BK; wait $BK; echo "broker exit $?"
kill -TERM $NS; wait $NS; echo "namesrv exit $?"
"""


def main():
    if os.geteuid() != 0:
        print("deb: needs root (debootstrap, chroot, a network namespace): skipped")
        return 77
    for tool in ("debootstrap", "dpkg-deb", "dpkg-shlibdeps", "unshare"):
        if shutil.which(tool) is None:
            check(False, f"{tool} is installed (scripts/bootstrap.sh)")
            return 1
    work = tempfile.mkdtemp(prefix="deb-")
    root = os.path.join(work, "root")
    mounted = []
    try:
        r = run(["bash", os.path.join(SRC, "scripts", "deb.sh"), os.path.join(work, "out")],
                timeout=1800)
        deb = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        check(r.returncode == 0 and deb.endswith(".deb") and os.path.exists(deb),
              f"scripts/deb.sh built {deb} ({r.stderr.strip()[-400:]})")
        if not os.path.exists(deb):
            return 1
        r = run(["debootstrap", "--variant=minbase", "bookworm", root, MIRROR], timeout=1200)
        check(r.returncode == 0, f"debootstrap bookworm ({r.stdout.strip()[-300:]})")
        if r.returncode != 0:
            return 1
        shutil.copy("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
        # debootstrap made /dev's nodes; the broker wants /proc and a tmpfs /dev/shm
        for fs, where in (("proc", "proc"), ("tmpfs", "dev/shm")):
            target = os.path.join(root, where)
            os.makedirs(target, exist_ok=True)
            r = run(["mount", "-t", fs, fs, target])
            check(r.returncode == 0, f"mount {fs} on {where} ({r.stderr.strip()})")
            if r.returncode == 0:
                mounted.append(target)
        shutil.copy(deb, os.path.join(root, "tmp", "sprocket.deb"))
        r = in_root(root, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive "
                          "apt-get install -y -qq --no-install-recommends ./tmp/sprocket.deb "
                          "iproute2 util-linux systemd", timeout=1200)
        check(r.returncode == 0, f"apt installs the package and its dependencies "
              f"({(r.stdout + r.stderr).strip()[-400:]})")
        r = in_root(root, "id sprocket && stat -c '%U %a' /var/lib/sprocket && "
                          "cat /var/lib/dpkg/info/sprocket.conffiles && "
                          "ls /usr/share/man/man8/sprocket-broker.8.gz "
                          "/usr/share/man/man1/sprocket.1.gz "
                          "/usr/lib/systemd/system/sprocket-broker@.service "
                          "/usr/lib/systemd/system/sprocket-namesrv.service && "
                          "ldconfig -p | grep libsprocket.so.0")
        out = r.stdout
        check(r.returncode == 0 and "sprocket 750" in out and
              "/etc/sprocket/broker.properties" in out and "libsprocket.so.0" in out,
              f"user sprocket, /var/lib/sprocket, conffiles, man pages, units, libsprocket "
              f"({out.strip()[-400:]} {r.stderr.strip()[-200:]})")
        # no systemd runs here: its own checker reads the units as systemd would load them
        # (--man=no: the minimal root has no man-db to open Documentation=man:...)
        r = in_root(root, "systemd-analyze verify --man=no sprocket-namesrv.service "
                          "sprocket-broker@broker.service 2>&1")
        check(r.returncode == 0, f"systemd-analyze verify passes both units "
              f"({r.stdout.strip()[-400:]})")
        r = run(["unshare", "--net", "chroot", root, "/bin/sh", "-c", RUN], timeout=300)
        out = r.stdout
        sent = out.count("SEND_OK")
        got = sum(1 for l in out.splitlines() if "deb-" in l and "SEND_OK" not in l)
        check(sent == 20, f"the installed CLI sent 20 to the installed broker ({sent}; "
              f"{r.stderr.strip()[-300:]})")
        check(got == 20, f"... and group DebG consumed all 20 ({got})")
        check("broker exit 0" in out and "namesrv exit 0" in out,
              f"both daemons stopped cleanly on SIGTERM ({out.strip()[-120:]})")
        if sent != 20 or got != 20:
            for name in ("namesrv", "broker"):
                log = os.path.join(root, "tmp", name + ".log")
                if os.path.exists(log):
                    with open(log) as f:
                        print(f"--- {name}.log\n" + f.read()[-2000:])
        r = in_root(root, "dpkg -r sprocket >/dev/null && ls /etc/sprocket && "
                          "! test -e /usr/bin/sprocket-broker && dpkg -P sprocket >/dev/null && "
                          "! test -e /etc/sprocket/broker.properties")
        check(r.returncode == 0, f"remove keeps /etc/sprocket, purge removes it "
              f"({r.stdout.strip()} {r.stderr.strip()[-200:]})")
    finally:
        for m in reversed(mounted):
            run(["umount", "-l", m])
        with open("/proc/mounts") as f:
            left = [l.split()[1] for l in f if l.split()[1].startswith(work)]
        if KEEP or left:
            print(f"kept {work}" + (f" (still mounted: {left})" if left else ""))
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
