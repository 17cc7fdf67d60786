# SPDX-License-Identifier: Apache-2.0
"""libsprocket as an application sees it: installed, found by pkg-config, linked, run
(docs/client.md; issue 27).

usage: install.py BUILD_DIR SOURCE_ROOT SANITIZE

`meson install --destdir` puts the build into a scratch root. The examples (examples/*.c,
built by examples/Makefile) are compiled against that root alone: pkg-config (--define-prefix)
finds sprocket.pc there, the compiler sees only its include/ and no project header. Both the
shared (libsprocket.so.0) and the static (--static) form. Then against a NameServer and a
broker started from the same root: producer sends 10, pull_consumer reads those 10 and
commits, push_consumer (another group) gets 10, tx_producer's committed message is
delivered and its rolled-back one is not. Each daemon, given a NOTIFY_SOCKET as systemd's
Type=notify units do, sends READY=1 once it serves, and the broker STOPPING=1 on SIGTERM
before it exits 0. A sanitizer build compiles the examples with the
same -fsanitize, as its libsprocket needs.
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itest  # noqa: E402

BUILD, SRC, SANITIZE = sys.argv[1:4]
ENV = itest.Env("ins-")
check = ENV.check
NSADDR = f"127.0.0.1:{ENV.base}"


def run(argv, env=None, timeout=120, cwd=None):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd)


def main_case():
    root = os.path.join(ENV.tmp, "root")
    r = run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", root], timeout=300)
    check(r.returncode == 0, f"meson install --destdir ({r.stderr.strip()[-300:]})")
    pcs = glob.glob(os.path.join(root, "**", "pkgconfig", "sprocket.pc"), recursive=True)
    check(len(pcs) == 1, f"sprocket.pc installed ({pcs})")
    libdir = os.path.dirname(os.path.dirname(pcs[0]))
    bindir = glob.glob(os.path.join(root, "**", "bin"), recursive=True)[0]
    for f in ("libsprocket.so.0", "libsprocket.a"):
        check(os.path.exists(os.path.join(libdir, f)), f"{f} installed")
    headers = sorted(os.path.basename(p) for p in
                     glob.glob(os.path.join(root, "**", "include", "sprocket", "*.h"),
                               recursive=True))
    check(headers == ["client.h", "consumer.h", "producer.h"], f"public headers ({headers})")

    # The root stands for /usr/local: sprocket.pc with its prefix moved there, as a
    # relocated install would have it (other packages' .pc files stay as they are).
    pcdir = os.path.join(ENV.tmp, "pkgconfig")
    os.makedirs(pcdir)
    with open(pcs[0]) as f:
        pc = f.read()
    prefix = re.search(r"^prefix=(.*)$", pc, re.M).group(1)
    with open(os.path.join(pcdir, "sprocket.pc"), "w") as f:
        f.write(re.sub(r"^prefix=.*$", "prefix=" + root + prefix, pc, count=1, flags=re.M))
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir)
    r = run(["pkg-config", "--modversion", "sprocket"], env=env)
    check(r.returncode == 0 and re.match(r"\d+\.\d+\.\d+$", r.stdout.strip()),
          f"pkg-config --modversion sprocket ({r.stdout.strip()} {r.stderr.strip()})")
    r = run(["pkg-config", "--cflags", "sprocket"], env=env)
    check(r.returncode == 0 and "-I" + root in r.stdout and SRC not in r.stdout,
          f"its cflags name the installed include dir only ({r.stdout.strip()})")
    cflags = "-O2 -g -Wall -Wextra -Werror"
    if SANITIZE not in ("", "none"):
        cflags += f" -fsanitize={SANITIZE}"
    built = {}
    for kind, extra in (("shared", []), ("static", ["STATIC=1"])):
        d = os.path.join(ENV.tmp, kind)
        shutil.copytree(os.path.join(SRC, "examples"), d)
        r = run(["make", "-C", d, f"CFLAGS={cflags}"] + extra, env=env, timeout=300)
        check(r.returncode == 0, f"examples build against the installed {kind} library "
              f"({(r.stdout + r.stderr).strip()[-600:]})")
        built[kind] = d
    ldd = run(["ldd", os.path.join(built["static"], "producer")]).stdout
    check("libsprocket" not in ldd, "the static build does not need libsprocket.so")
    renv = dict(os.environ, LD_LIBRARY_PATH=libdir)
    ldd = run(["ldd", os.path.join(built["shared"], "producer")], env=renv).stdout
    check(os.path.join(libdir, "libsprocket.so.0") in ldd,
          "the shared build loads the installed libsprocket.so.0")

    # systemd's Type=notify, as the units use it: a datagram socket in NOTIFY_SOCKET
    notify = {}
    for name in ("namesrv", "broker"):
        notify[name] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify[name].bind(os.path.join(ENV.tmp, f"notify-{name}"))
        notify[name].settimeout(30)

    def said(name):
        try:
            return notify[name].recv(4096).decode()
        except OSError as e:
            return f"nothing ({e})"

    os.environ["NOTIFY_SOCKET"] = os.path.join(ENV.tmp, "notify-namesrv")
    ENV.start("namesrv", [os.path.join(bindir, "sprocket-namesrv"), f"--listenPort={ENV.base}",
                          f"--kvConfigPath={ENV.tmp}/kv.json", "--bindAddress=127.0.0.1",
                          "--httpPort=0"])
    if not ENV.wait_log("namesrv", " listening on ", timeout=10):
        raise SystemExit("the NameServer did not start")
    msg = said("namesrv")
    check(msg == "READY=1", f"the NameServer told systemd READY=1 once listening ({msg})")
    os.environ["NOTIFY_SOCKET"] = os.path.join(ENV.tmp, "notify-broker")
    bk = ENV.start("broker", [os.path.join(bindir, "sprocket-broker"), f"--namesrvAddr={NSADDR}",
                         "--listenPort=0", "--brokerName=broker-i",
                         f"--dataplanePort={ENV.base + 20}", "--dataplaneCores=2",
                         f"--storePathRootDir={ENV.tmp}/store", "--httpPort=0",
                         "--mapedFileSizeCommitLog=1048576", "--mapedFileSizeConsumeQueue=60000",
                         f"--storeBufferDir={ENV.tmp}", "--registerNameServerPeriod=1000"])
    if not ENV.wait_log("broker", " ready: ", timeout=30):
        raise SystemExit("the broker did not start")
    del os.environ["NOTIFY_SOCKET"]
    msg = said("broker")
    check(msg == "READY=1", f"the broker told systemd READY=1 once ready ({msg})")
    cli = os.path.join(bindir, "sprocket")
    ok = False
    for _ in range(30):
        if run([cli, f"--namesrv={NSADDR}", "topic", "create", "ExT", "--queues=4"]).returncode == 0:
            ok = True
            break
        time.sleep(0.3)
    check(ok, "topic ExT created")

    for kind, d in built.items():
        topic = "ExT"
        r = run([os.path.join(d, "producer"), NSADDR, topic, "10"], env=renv)
        ids = re.findall(r"^SEND_OK ([0-9A-F]{32}) ", r.stdout, re.M)
        check(r.returncode == 0 and len(ids) == 10, f"{kind}: producer sent 10 ({r.stderr[-200:]})")
        r = run([os.path.join(d, "pull_consumer"), NSADDR, topic, f"pull-{kind}"], env=renv)
        got = re.findall(r"^([0-9A-F]{32}) \S+ (.*)$", r.stdout, re.M)
        bodies = sorted(b for i, b in got if i in ids)
        check(r.returncode == 0 and bodies == sorted(f"hello {i}" for i in range(10)),
              f"{kind}: pull_consumer read the 10 sent ({len(got)} read, {r.stderr[-200:]})")
        r = run([os.path.join(d, "pull_consumer"), NSADDR, topic, f"pull-{kind}"], env=renv)
        check(r.returncode == 0 and not [i for i in re.findall(r"^([0-9A-F]{32}) ", r.stdout,
                                                                   re.M) if i in ids],
              f"{kind}: ... and committed them (a second run reads none of them)")
        r = run([os.path.join(d, "push_consumer"), NSADDR, topic, f"push-{kind}", "10"],
                env=renv, timeout=90)
        got = set(re.findall(r"^([0-9A-F]{32}) ", r.stdout, re.M))
        check(r.returncode == 0 and set(ids) <= got,
              f"{kind}: push_consumer got the 10 ({len(got & set(ids))}, {r.stderr[-200:]})")

    r = run([cli, f"--namesrv={NSADDR}", "topic", "create", "ExTx", "--queues=1"])
    check(r.returncode == 0, "topic ExTx created")
    r = run([os.path.join(built["shared"], "tx_producer"), NSADDR, "ExTx"], env=renv)
    check(r.returncode == 0 and "commit" in r.stdout and " COMMIT" in r.stdout
          and " ROLLBACK" in r.stdout, f"tx_producer: one committed, one rolled back "
          f"({r.stdout.strip()} {r.stderr.strip()[-200:]})")
    r = run([os.path.join(built["shared"], "pull_consumer"), NSADDR, "ExTx", "tx-reader"],
            env=renv)
    bodies = [l.split(" ", 2)[2] for l in r.stdout.splitlines() if l.count(" ") >= 2]
    check(bodies == ["commit"], f"only the committed one is delivered ({bodies})")
    bk.send_signal(signal.SIGTERM)
    msg = said("broker")
    check(msg == "STOPPING=1" and bk.wait(60) == 0,
          f"on SIGTERM the broker told systemd STOPPING=1 and exited 0 ({msg})")


def main():
    try:
        main_case()
    finally:
        rc = ENV.finish("INS_KEEP")
    sys.exit(rc)


if __name__ == "__main__":
    main()
