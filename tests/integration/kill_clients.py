#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A server survives clients that die mid-stream, on every backend.

Usage: kill_clients.py SPROCKET_BENCH BACKEND [KILLS]. Starts `sprocket-bench echo`
(a transport server + raw reflector) as the server, then KILLS times starts a
client (`sprocket-bench ping --target`) that hammers it and kills it with SIGKILL
at a random moment. After every kill the server must still be running; at the
end a client must complete a normal run against it. af_packet runs across a veth
pair between two namespaces this test creates (and removes); dpdk runs over
net_memif, the client in role=client, which is the case that crashed DPDK
22.11's memif PMD in the surviving process (docs/dpdk.md).
Exit 77 (skip) when the backend cannot run here.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def main():
    exe, backend = sys.argv[1], sys.argv[2]
    kills = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    pid = os.getpid()
    rnd = random.Random(pid)
    env = dict(os.environ)
    srv_pre, cli_pre = [], []
    srv_args, cli_args = [], []
    cleanup = []
    tmp = tempfile.mkdtemp(prefix="kill-clients-")
    cleanup.append(lambda: shutil.rmtree(tmp, ignore_errors=True))
    if backend != "udp" and os.geteuid() != 0:
        print(f"skip: {backend} needs root")
        return 77
    if backend == "udp":
        srv_args = ["--ip=127.0.0.1"]
        cli_args = ["--ip=127.0.0.1"]
    elif backend == "af_packet":
        a, b = f"kc{pid}a", f"kc{pid}b"
        tag = pid % 200 + 20
        sh(f"ip netns add {a} && ip netns add {b}")
        cleanup.append(lambda: subprocess.run(f"ip netns del {a}; ip netns del {b}", shell=True))
        sh(f"ip link add v{pid}a netns {a} type veth peer name v{pid}b netns {b}")
        sh(f"ip -n {a} addr add 10.252.{tag}.1/24 dev v{pid}a && "
           f"ip -n {b} addr add 10.252.{tag}.2/24 dev v{pid}b && "
           f"ip -n {a} link set v{pid}a up && ip -n {b} link set v{pid}b up")
        srv_pre = ["ip", "netns", "exec", b]
        cli_pre = ["ip", "netns", "exec", a]
        srv_args = [f"--iface=v{pid}b", f"--ip=10.252.{tag}.2", "--port=9100"]
        cli_args = [f"--iface=v{pid}a", f"--ip=10.252.{tag}.1", "--port=9000"]
    elif backend == "dpdk":
        env["RUNTIME_DIRECTORY"] = tmp
        eal = "--no-pci --no-huge --no-shconf --no-telemetry"
        sock = f"socket=/kc-{pid},socket-abstract=yes"
        srv_args = [f"--dpdk-args=-l 1 {eal} --file-prefix=kcs{pid} "
                    f"--vdev=net_memif0,role=server,{sock}",
                    "--ip=10.250.1.2", "--port=9100"]
        cli_args = ["--ip=10.250.1.1", "--port=9000"]
    else:
        print("unknown backend", backend)
        return 2

    def client_cmd(i, duration):
        extra = list(cli_args)
        if backend == "dpdk":
            extra.append(f"--dpdk-args=-l 0 --no-pci --no-huge --no-shconf --no-telemetry "
                         f"--file-prefix=kcc{pid}-{i} "
                         f"--vdev=net_memif0,role=client,socket=/kc-{pid},socket-abstract=yes")
        return cli_pre + [exe, "ping", f"--backend={backend}", f"--target={target}",
                          f"--duration={duration}", "--warmup=0", "--size=512",
                          "--cores=0,1", "--depth=4"] + extra

    failed = 0
    server = None
    try:
        server = subprocess.Popen(srv_pre + [exe, "echo", f"--backend={backend}", "--cores=1"]
                                  + srv_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)
        line = server.stdout.readline().split()
        if len(line) != 3 or line[0] != "ready":
            err = server.stderr.read() if server.poll() is not None else ""
            if "not built" in err:
                print("skip:", err.strip())
                return 77
            print("FAIL: server did not start:", line, err)
            return 1
        target = f"{line[1]}:{line[2]}"
        for i in range(kills):
            c = subprocess.Popen(client_cmd(i, 30), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env)
            time.sleep(rnd.uniform(0.3, 1.5))
            c.send_signal(signal.SIGKILL)
            c.wait()
            time.sleep(0.1)
            if server.poll() is not None:
                print(f"FAIL: server died after client kill {i + 1}: rc {server.returncode}\n"
                      f"{server.stderr.read()}")
                return 1
            print(f"ok   kill {i + 1}: server alive")
        p = subprocess.run(client_cmd(kills, 0.5), capture_output=True, text=True, env=env,
                           timeout=120)
        ok = p.returncode == 0 and "ping " in p.stdout
        print(("ok  " if ok else "FAIL") + f" a client after {kills} kills completes a run")
        if not ok:
            print(p.stdout, p.stderr)
            failed += 1
        if server.poll() is not None:
            print("FAIL: server died at the end")
            failed += 1
    finally:
        if server and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        for f in reversed(cleanup):
            f()
    print(f"{kills + 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
