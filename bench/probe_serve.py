#!/usr/bin/env python3
"""The adversarial probe of `tessera serve` re-run as a script (not part of the test suite):
each scenario of issue 32's probe against a fresh `serve --local 2 --launcher fork`, printing
what the cluster did. Figures go to docs/benchmarks/service.md ("Under attack") with this
command.

Scenarios: a local user speaking BASP to every port the scheduler's process listens on,
a state directory another user owns (root only), 100,000 jobs in one submission and a
shutdown while it is read,
1,100 cache-busting polls, 300 slow connections without the token, a program holding 300
connections to its node's lease socket, and a 2 MiB tmpfs state directory that fills mid-run
(root only: it mounts one).

usage: bench/probe_serve.py [--binary build/tessera] [--only NAME ...]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

CLUSTER = """[cluster]
name = "probe"
[[cluster.server]]
name = "a"
gpu_type = "v100"
gpus = 2
speed = 1.0
[[cluster.server]]
name = "b"
gpu_type = "k80"
gpus = 2
speed = 0.5
"""


class Served:
    """`tessera serve --local 2` in a scratch directory; its address, token and pid."""

    def __init__(self, binary, d, state=None, extra=(), cluster=CLUSTER, local=None):
        self.d = d
        self.state = state or os.path.join(d, "state")
        with open(os.path.join(d, "cluster.toml"), "w") as f:
            f.write(cluster)
        nodes = local or cluster.count("[[cluster.server]]")  # one per server table by default
        self.log = open(os.path.join(d, "serve.log"), "a")
        self.proc = subprocess.Popen(
            [binary, "serve", "--local", str(nodes), "--launcher", "fork", "--cluster",
             os.path.join(d, "cluster.toml"), "--state-dir", self.state, "--round-length", "1",
             *extra], stdout=self.log, stderr=subprocess.STDOUT)
        until = time.time() + 60
        while time.time() < until and self.proc.poll() is None:
            try:
                self.address = open(os.path.join(self.state, "address")).read().strip()
                self.token = open(os.path.join(self.state, "token")).read().strip()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("serve did not start: " + self.output())

    def output(self):
        self.log.flush()
        return open(os.path.join(self.d, "serve.log")).read()

    def call(self, method, path, body=None, token=True, timeout=30):
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request("http://" + self.address + path, method=method,
                                     data=body.encode() if body is not None else None,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def rss_mb(self):
        for line in open("/proc/%d/status" % self.proc.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return -1

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def jobs_json(n, steps=20):
    return json.dumps({"job": [{"kind": "softmax_regression", "total_steps": steps,
                                "step_time": 0.01} for _ in range(n)]})


def wait_ended(s, n, limit):
    """Seconds until `n` jobs ended (or the limit); the count of ended jobs."""
    start = time.time()
    ended = 0
    while time.time() - start < limit:
        code, body = s.call("GET", "/v1/cluster")
        if code == 200:
            jobs = json.loads(body)["jobs"]
            ended = sum(jobs.get(k, 0) for k in ("finished", "failed", "cancelled"))
            if ended >= n:
                break
        time.sleep(0.5)
    return time.time() - start, ended


def foreign_state_dir(binary, d):
    if os.geteuid() != 0:
        return "skipped: needs root to give the directory to another user"
    state = os.path.join(d, "foreign")
    os.mkdir(state, 0o700)
    os.chown(state, 65534, 65534)
    with open(os.path.join(d, "cluster.toml"), "w") as f:
        f.write(CLUSTER)
    r = subprocess.run([binary, "serve", "--local", "2", "--launcher", "fork", "--cluster",
                        os.path.join(d, "cluster.toml"), "--state-dir", state],
                       capture_output=True, text=True, timeout=60)
    why = [line for line in r.stderr.splitlines() if "state" in line][:1]
    return "exit %d: %s" % (r.returncode, why[0] if why else r.stderr.strip()[:200])


def listening_ports(pid):
    """The TCP ports process `pid` listens on (its descriptors matched in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with open("/proc/%d/net/%s" % (pid, table)) as f:
            for row in list(f)[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:
                    ports.add(int(cols[1].split(":")[1], 16))
    return sorted(ports)


def caf_port(binary, d):
    """The probe that found CAF on loopback: three BASP headers announcing 4 GiB each, now
    sent to every port the scheduler's process listens on (the API's, the gate's, and any
    other)."""
    s = Served(binary, d)
    try:
        time.sleep(2)
        ports = listening_ports(s.proc.pid)
        before = s.rss_mb()
        header = bytes([0x02, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]) + bytes(23) + bytes([1])
        for port in ports:
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(header + bytes(16))  # 48 bytes, as the probe sent
                    time.sleep(0.2)
        time.sleep(2)
        during = s.rss_mb()
        _, nodes = s.call("GET", "/v1/cluster")
        alive = json.loads(nodes).get("nodes_alive")
        s.call("POST", "/v1/jobs", jobs_json(4))
        took, ended = wait_ended(s, 4, 120)
        return ("ports %s (API %s); scheduler RSS %.0f -> %.0f MB; nodes alive %s; "
                "then 4 jobs submitted, %d ended in %.1f s"
                % (ports, s.address.rsplit(":", 1)[1], before, during, alive, ended, took))
    finally:
        s.stop()


def huge_submission(binary, d):
    s = Served(binary, d)
    try:
        body = jobs_json(100000)
        t = time.time()
        code, answer = s.call("POST", "/v1/jobs", body, timeout=300)
        took = time.time() - t
        t = time.time()
        after, _ = s.call("GET", "/v1/cluster")
        return ("%d bytes: %d in %.2f s (%s); GET /v1/cluster then %d in %.3f s"
                % (len(body), code, took, answer[:90], after, time.time() - t))
    finally:
        s.stop()


def shutdown_during_huge(binary, d):
    """100,000 jobs posted, and a shutdown asked for while the scheduler reads them."""
    s = Served(binary, d)
    try:
        body = jobs_json(100000)
        answers = {}

        def post():
            answers["submit"] = s.call("POST", "/v1/jobs", body, timeout=300)[0]

        poster = threading.Thread(target=post)
        t = time.time()
        poster.start()
        time.sleep(0.3)
        answers["shutdown"] = s.call("POST", "/v1/shutdown", timeout=60)[0]
        try:
            code = s.proc.wait(120)
        except subprocess.TimeoutExpired:
            code = None
        poster.join(10)
        return ("submission %s, shutdown %s; serve exited %s %.1f s after the submission began"
                % (answers.get("submit"), answers.get("shutdown"), code, time.time() - t))
    finally:
        s.stop()


def cache_busting(binary, d):
    s = Served(binary, d)
    try:
        s.call("POST", "/v1/jobs", jobs_json(200, steps=100000))
        time.sleep(2)
        before = s.rss_mb()
        codes = {}
        t = time.time()
        for i in range(1100):
            code, _ = s.call("GET", "/v1/jobs?x=%d" % i)
            codes[code] = codes.get(code, 0) + 1
        return ("1,100 polls in %.1f s, answers %s; scheduler RSS %.0f -> %.0f MB"
                % (time.time() - t, codes, before, s.rss_mb()))
    finally:
        s.stop()


def slow_connections(binary, d):
    s = Served(binary, d)
    try:
        host, port = s.address.rsplit(":", 1)
        held = []
        for _ in range(300):
            c = socket.create_connection((host, int(port)))
            c.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")  # a header never finished
            held.append(c)
        time.sleep(1)
        codes = {}
        for _ in range(100):
            try:
                code, _ = s.call("GET", "/v1/cluster", timeout=10)
            except OSError as e:
                code = type(e).__name__
            codes[code] = codes.get(code, 0) + 1
        for c in held:
            c.close()
        return "100 requests with the token beside 300 slow connections: %s" % codes
    finally:
        s.stop()


DAEMON = r"""
import os, socket, time
held = []
for _ in range(300):
    try:
        c = socket.socket(socket.AF_UNIX)
        c.connect(os.environ["TESSERA_LEASE"])
        held.append(c)
    except OSError:
        pass
time.sleep(30)
"""


def lease_daemon(binary, d):
    s = Served(binary, d)
    try:
        with open(os.path.join(d, "daemon.py"), "w") as f:
            f.write(DAEMON)
        daemon = {"kind": "program", "command": [sys.executable, os.path.join(d, "daemon.py")],
                  "total_steps": 10, "max_restarts": 0}
        s.call("POST", "/v1/jobs", json.dumps({"job": [daemon]}))
        time.sleep(3)
        here = os.path.dirname(os.path.abspath(__file__))
        example = os.path.join(here, "..", "examples", "numpy_elastic")
        # Debian's Python: it has NumPy (a venv's may not).
        honest = {"kind": "program", "command": ["/usr/bin/python3", "train.py", "--steps", "200"],
                  "workdir": os.path.abspath(example), "total_steps": 200,
                  "env": {"OPENBLAS_NUM_THREADS": "1"}}
        code, body = s.call("POST", "/v1/jobs", json.dumps({"job": [honest]}))
        took, _ = wait_ended(s, 2, 90)
        code, body = s.call("GET", "/v1/jobs/1")
        job = json.loads(body) if code == 200 else {}
        return ("a program beside one holding 300 lease connections: %s after %.0f s (%s)"
                % (job.get("state"), took, (job.get("failure") or "")[:120]))
    finally:
        s.stop()


def full_disk(binary, d):
    if os.geteuid() != 0 or not shutil.which("mount"):
        return "skipped: needs root to mount a 2 MiB tmpfs"
    mnt = os.path.join(d, "tmpfs")
    os.mkdir(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", mnt]).returncode:
        return "skipped: mount -t tmpfs failed"
    try:
        # Checkpoints elsewhere: only the journal meets the full disk.
        s = Served(binary, d, state=os.path.join(mnt, "state"),
                   extra=["--checkpoint-dir", os.path.join(d, "ckpt")])
        try:
            accepted = 0
            for _ in range(10):
                code, body = s.call("POST", "/v1/jobs", jobs_json(20, steps=200))
                accepted += len(json.loads(body)["ids"]) if code == 201 else 0
            filler = os.path.join(mnt, "filler")
            subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=64k"], capture_output=True)
            codes = {}
            for _ in range(50):  # past the slack of the journal's last page
                code, body = s.call("POST", "/v1/jobs", jobs_json(20, steps=200))
                codes[code] = codes.get(code, 0) + 1
                accepted += len(json.loads(body)["ids"]) if code == 201 else 0
                if code != 201:
                    break
            time.sleep(4)
            _, cluster = s.call("GET", "/v1/cluster")
            journal = json.loads(cluster).get("journal", {})
            os.remove(filler)
            took, ended = wait_ended(s, accepted, 300)
            _, after = s.call("GET", "/v1/cluster")
            back = json.loads(after).get("journal", {})
            return ("disk full: submissions %s; journal writable=%s (%s), held %s, paused rounds "
                    "%s; space back: writable=%s, %d of %d accepted jobs ended in %.0f s"
                    % (codes, journal.get("writable"), (journal.get("error") or "")[-40:],
                       journal.get("held_records"), journal.get("paused_rounds"),
                       back.get("writable"), ended, accepted, took))
        finally:
            s.stop()
    finally:
        subprocess.run(["umount", mnt])


SCENARIOS = {"caf-port": caf_port, "foreign-state-dir": foreign_state_dir,
             "huge-submission": huge_submission, "shutdown-during-huge": shutdown_during_huge,
             "cache-busting": cache_busting, "slow-connections": slow_connections,
             "lease-daemon": lease_daemon, "full-disk": full_disk}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="build/tessera")
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), default=None)
    a = ap.parse_args()
    for name, run in SCENARIOS.items():
        if a.only and name not in a.only:
            continue
        with tempfile.TemporaryDirectory() as d:
            t = time.time()
            try:
                said = run(os.path.abspath(a.binary), d)
            except Exception as e:  # noqa: BLE001 - a probe reports, never stops
                said = "ERROR %s: %s" % (type(e).__name__, e)
            print("%s (%.0f s): %s" % (name, time.time() - t, said), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
