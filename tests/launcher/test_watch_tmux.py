#!/usr/bin/env python3
"""`tessera watch` in a real terminal: a served cluster (`tessera serve --local 2`) runs jobs
while `tessera watch` runs in a detached tmux pane; the pane is captured and checked: the
header, every job with a progress bar, a running job, every node.

usage: /usr/bin/python3 tests/launcher/test_watch_tmux.py TESSERA_BINARY [--capture FILE]
Exits 77 (ctest's SKIP_RETURN_CODE) when tmux is not installed."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timescale import scaled  # noqa: E402

CLUSTER = """[cluster]
name = "watch"
[[cluster.server]]
name = "fast"
gpu_type = "v100"
gpus = 1
speed = 1.0
[[cluster.server]]
name = "slow"
gpu_type = "k80"
gpus = 1
speed = 0.5
"""
JOBS = "".join(f'[[job]]\nkind = "{"mlp" if i % 2 else "softmax_regression"}"\n'
               f'total_steps = {3000 if i < 2 else 40}\nstep_time = 0.01\n\n' for i in range(4))


def main():
    if not shutil.which("tmux"):
        print("skipped: no tmux on PATH (apt-get install tmux): the test needs a real terminal")
        return 77
    binary = sys.argv[1]
    capture = sys.argv[sys.argv.index("--capture") + 1] if "--capture" in sys.argv else None
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/cluster.toml", "w").write(CLUSTER)
        open(f"{d}/jobs.toml", "w").write(JOBS)
        state = f"{d}/state"
        log = open(f"{d}/serve.log", "w")
        serve = subprocess.Popen([binary, "serve", "--local", "2", "--cluster", f"{d}/cluster.toml",
                                  "--state-dir", state, "--jobs", f"{d}/jobs.toml",
                                  "--round-length", "1"], stdout=log, stderr=subprocess.STDOUT)
        session = f"tessera-watch-{os.getpid()}"
        try:
            deadline = time.time() + scaled(60)
            while not os.path.exists(f"{state}/address") and time.time() < deadline:
                time.sleep(0.2)
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "24",
                            f"COLUMNS=110 {binary} watch --state-dir {state} --interval 0.5"],
                           check=True)
            time.sleep(6)  # a few rounds: the short jobs finish, the long ones run
            pane = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                  stdout=subprocess.PIPE, text=True, check=True).stdout
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], stderr=subprocess.DEVNULL)
            subprocess.run([binary, "shutdown", "--state-dir", state], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            code = serve.wait(60)
            log.close()
        if capture:
            open(capture, "w").write(pane)
        print(pane)
        failures = []
        if "policy max_min_fairness_perf" not in pane:
            failures.append("no header")
        rows = [l for l in pane.splitlines() if re.match(r"\s*\d+ \S+\s+(running|preempted|"
                                                          r"finished|queued)", l)]
        if len(rows) < 4:
            failures.append(f"{len(rows)} job rows")
        if not any("running" in l for l in rows):
            failures.append("no running job")
        if not any("finished" in l and "100%" in l for l in rows):
            failures.append("no finished job at 100%")
        if not all(re.search(r"\d+%", l) for l in rows):
            failures.append("a job row without its progress")
        if not re.search(r"fast\s+v100", pane) or not re.search(r"slow\s+k80", pane):
            failures.append("a node is missing")
        if code != 0:
            failures.append(f"serve exited {code}")
        for f in failures:
            print("FAILED:", f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
