# SPDX-License-Identifier: Apache-2.0
"""What the Python integration tests share: daemons in a temp dir, their logs, checks.

    env = itest.Env("iso-")          # a temp dir, a free port base
    env.start("namesrv", [...argv])  # its output goes to <tmp>/namesrv.log
    env.wait_log("namesrv", " listening on ")
    env.check(cond, "what")          # prints ok/FAIL, remembers failures
    env.start_pair(NS, BK, CLI, "T", 4)  # NameServer + 2-core broker + topic T
    env.finish()                     # stops every daemon, prints logs on failure, exit code
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_base  # noqa: E402


class Env:
    def __init__(self, prefix):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.rnd = random.Random(os.getpid())
        self.base = free_base(self.rnd)
        self.procs = []
        self.failed = []

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failed.append(what)
        return cond

    def log_of(self, name):
        try:
            with open(os.path.join(self.tmp, name + ".log"), "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_log(self, name, needle, timeout=30, count=1):
        end = time.time() + timeout
        while time.time() < end:
            if self.log_of(name).count(needle) >= count:
                return True
            time.sleep(0.05)
        return False

    def start(self, name, argv, preexec_fn=None):
        log = open(os.path.join(self.tmp, name + ".log"), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=preexec_fn)
        self.procs.append(p)
        return p

    def start_pair(self, ns_bin, bk_bin, cli_bin, topic, queues, broker="broker-t",
                   broker_args=()):
        """A NameServer on base, a 2-core broker registered with it (HTTP off), and @topic
        with @queues queues made by the CLI. Raises SystemExit when a daemon does not start.
        Return: the NameServer's "ip:port"."""
        ns = f"127.0.0.1:{self.base}"
        self.start("namesrv", [ns_bin, f"--listenPort={self.base}",
                               f"--kvConfigPath={self.tmp}/kv.json", "--bindAddress=127.0.0.1",
                               "--httpPort=0"])
        if not self.wait_log("namesrv", " listening on ", timeout=10):
            raise SystemExit("the NameServer did not start")
        self.start("broker", [bk_bin, f"--namesrvAddr={ns}", "--listenPort=0",
                              f"--brokerName={broker}", f"--dataplanePort={self.base + 20}",
                              "--dataplaneCores=2", "--httpPort=0",
                              f"--storePathRootDir={self.tmp}/store",
                              "--mapedFileSizeCommitLog=8388608",
                              "--mapedFileSizeConsumeQueue=60000", f"--storeBufferDir={self.tmp}",
                              "--registerNameServerPeriod=1000"] + list(broker_args))
        if not self.wait_log("broker", " ready: ", timeout=30):
            raise SystemExit("the broker did not start")
        for _ in range(50):
            if subprocess.run([cli_bin, f"--namesrv={ns}", "topic", "create", topic,
                               f"--queues={queues}"], capture_output=True).returncode == 0:
                self.check(True, f"topic {topic} created with {queues} queues")
                return ns
            time.sleep(0.2)
        raise SystemExit(f"topic {topic} could not be created")

    def rmt_port(self, name):
        for line in self.log_of(name).splitlines():
            if "remoting (RocketMQ clients) listening on" in line:
                return int(line.rsplit(":", 1)[1].split()[0])
        raise SystemExit(f"{name}: no remoting port in its log")

    def rmt_port_last(self, name):
        """The remoting port of @name's latest start (a restart appends to the same log)."""
        ports = [int(ln.rsplit(":", 1)[1].split()[0]) for ln in self.log_of(name).splitlines()
                 if "remoting (RocketMQ clients) listening on" in ln]
        if not ports:
            raise SystemExit(f"{name}: no remoting port in its log")
        return ports[-1]

    def finish(self, keep_var):
        """Stops the daemons; on failure prints the logs' tails. Return: the exit code.

        Called from a `finally:`, it also counts the exception on its way out (a
        SystemExit such as "the broker did not start" is a failure, not a pass: the
        caller's sys.exit(finish()) would otherwise replace it with 0)."""
        exc = sys.exc_info()[1]
        if exc is not None and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            print(f"FAIL {exc!r}")
            self.failed.append(repr(exc))
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.failed or os.environ.get(keep_var):
            for n in sorted(os.listdir(self.tmp)):
                if n.endswith(".log"):
                    print(f"---- {n} (tail)")
                    print("\n".join(self.log_of(n[:-4]).splitlines()[-15:]))
        if os.environ.get(keep_var):
            print(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        if self.failed:
            print(f"{len(self.failed)} checks failed")
            return 1
        return 0
