#!/usr/bin/env python3
"""Soak test of `tessera serve` (not part of the test suite): a served cluster of 3 node
processes (`--local 3 --launcher fork`) takes batches of jobs through the API for --minutes,
while every --interval seconds a node process is SIGKILLed (the serve starts it again and it
rejoins), once the state directory's disk fills up for 20 s (a 32 MiB tmpfs, root only), and
once, halfway, rank 0 itself is SIGKILLed and the cluster comes back with `serve --resume`.
At the end it waits for every accepted job and checks that each ended exactly once: listed
once, finished, at its total steps. Prints the counts and the scheduler's memory; figures go
to docs/benchmarks/reliability.md ("Soak of tessera serve") with this command.

usage: bench/serve_soak.py [--minutes 30] [--interval 120] [--binary build/tessera] [--seed 1]
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_serve import CLUSTER, Served, wait_ended  # noqa: E402

CLUSTER3 = CLUSTER + """[[cluster.server]]
name = "c"
gpu_type = "p100"
gpus = 2
speed = 0.7
"""


def batch(rng):
    jobs = []
    for _ in range(rng.randint(1, 5)):
        jobs.append({"kind": rng.choice(["softmax_regression", "mlp"]),
                     "total_steps": rng.randint(200, 1500), "step_time": 0.01,
                     "scale_factor": rng.choice([1, 1, 2])})
    return json.dumps({"job": jobs})


def node_pids(serve_pid):
    """The node processes the serve started (its children running `tessera node`)."""
    out = subprocess.run(["pgrep", "-P", str(serve_pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


class Soak:
    def __init__(self, a, d, state):
        self.a, self.d, self.state = a, d, state
        self.accepted = set()
        self.counts = {"batches": 0, "refused": 0, "node_kills": 0, "rank0_kills": 0,
                       "disk_full": 0}
        self.serve = None

    def start(self, resume):
        extra = ["--resume"] if resume else []
        self.serve = Served(self.a.binary, self.d, state=self.state, extra=extra,
                            cluster=CLUSTER3)

    def submit(self, rng):
        code, body = self.serve.call("POST", "/v1/jobs", batch(rng))
        self.counts["batches"] += 1
        if code == 201:
            self.accepted.update(json.loads(body)["ids"])
        else:
            self.counts["refused"] += 1

    def fill_disk(self):
        filler = os.path.join(os.path.dirname(self.state), "filler")
        subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=64k"], capture_output=True)
        time.sleep(20)
        os.remove(filler)
        self.counts["disk_full"] += 1

    def kill_rank0(self):
        os.kill(self.serve.proc.pid, signal.SIGKILL)
        self.serve.proc.wait()
        time.sleep(2)
        self.counts["rank0_kills"] += 1
        os.remove(os.path.join(self.state, "address"))  # the new one writes its own
        self.start(resume=True)


def run(a, d, state, rng):
    soak = Soak(a, d, state)
    soak.start(resume=False)
    rss_start = soak.serve.rss_mb()
    end = time.time() + a.minutes * 60
    next_kill = time.time() + a.interval
    disk_at = time.time() + a.minutes * 60 * 0.25 if os.path.ismount(os.path.dirname(state)) \
        else None
    rank0_at = time.time() + a.minutes * 60 * 0.5
    while time.time() < end:
        soak.submit(rng)
        if time.time() >= next_kill:
            pids = node_pids(soak.serve.proc.pid)
            if pids:
                os.kill(rng.choice(pids), signal.SIGKILL)
                soak.counts["node_kills"] += 1
            next_kill += a.interval
        if disk_at and time.time() >= disk_at:
            disk_at = None
            soak.fill_disk()
        if rank0_at and time.time() >= rank0_at:
            rank0_at = None
            soak.kill_rank0()
        time.sleep(10)
    took, ended = wait_ended(soak.serve, len(soak.accepted), 1800)
    code, body = soak.serve.call("GET", "/v1/jobs")
    listed = json.loads(body)["jobs"] if code == 200 else []
    ids = [j["id"] for j in listed]
    finished = [j for j in listed if j["state"] == "finished" and j["steps"] == j["total_steps"]]
    print(json.dumps({"minutes": a.minutes, **soak.counts, "accepted": len(soak.accepted),
                      "listed": len(ids), "listed_twice": len(ids) - len(set(ids)),
                      "missing": len(soak.accepted - set(ids)), "finished_whole": len(finished),
                      "drain_seconds": round(took, 1),
                      "scheduler_rss_mb": [round(rss_start), round(soak.serve.rss_mb())]}))
    soak.serve.stop()
    ok = len(finished) == len(soak.accepted) == len(ids) == len(set(ids))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--interval", type=float, default=120)
    ap.add_argument("--binary", default="build/tessera")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as d:
        mnt = os.path.join(d, "disk")
        os.mkdir(mnt)
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", mnt]).returncode == 0
        if not mounted:
            print("no tmpfs (not root): the disk-full episode is left out", file=sys.stderr)
        try:
            return run(a, d, os.path.join(mnt, "state"), rng)
        finally:
            if mounted:
                subprocess.run(["umount", "-l", mnt])


if __name__ == "__main__":
    sys.exit(main())
