#!/usr/bin/env python3
"""Soak test of the actor runtime (not part of the test suite).

Starts `tessera run --local 4` on a 4-server cluster with 50 jobs arriving over the run,
and every --interval seconds SIGKILLs a random node process (never rank 0, which hosts the
scheduler) and brings it back with `tessera node --join`. Prints, at the end: rounds, faults,
jobs lost (must be 0), progress lost per fault, and the scheduler's resident memory at the
start and the end. Figures go to docs/benchmarks/reliability.md ("Soak") with the command
that produced them.

usage: bench/soak.py [--minutes 30] [--interval 120] [--binary build/tessera] [--seed 1]
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time


def cluster_toml(n):
    types = ["v100", "p100", "k80", "t4"]
    out = ['[cluster]\nname = "soak"\n']
    for i in range(n):
        out.append('\n[[cluster.server]]\nname = "node-%d"\ngpu_type = "%s"\ngpus = 2\n'
                   'speed = %s\n' % (i, types[i % 4], [1.0, 0.7, 0.5, 0.35][i % 4]))
    return "".join(out)


def jobs_toml(n, minutes, rng):
    """n jobs arriving over the first 90% of the run, each a few minutes of training."""
    out = []
    for i in range(n):
        arrival = rng.uniform(0, minutes * 60 * 0.9)
        kind = "mlp" if i % 2 else "softmax_regression"
        steps = rng.randint(2500, 9000)
        out.append('[[job]]\nkind = "%s"\ntotal_steps = %d\nstep_time = 0.02\n'
                   'arrival = %.1f\nscale_factor = %d\n\n'
                   % (kind, steps, arrival, rng.choice([1, 1, 2])))
    return "".join(out)


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return -1.0


def node_pid(rank, port):
    out = subprocess.run(["pgrep", "-f", "--", "--rank %d --scheduler 127.0.0.1:%s" % (rank, port)],
                         capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--interval", type=float, default=120)
    ap.add_argument("--binary", default="build/tessera")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=50)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="tessera-soak-")
    cl, jobs = os.path.join(work, "cluster.toml"), os.path.join(work, "jobs.toml")
    open(cl, "w").write(cluster_toml(4))
    open(jobs, "w").write(jobs_toml(a.jobs, a.minutes, rng))
    secret, summary = os.path.join(work, "secret"), os.path.join(work, "sum.json")
    log = open(os.path.join(work, "run.log"), "w")
    run = subprocess.Popen([a.binary, "run", "--local", "4", "--cluster", cl, "--jobs", jobs,
                            "--round-length", "2", "--heartbeat-timeout", "3",
                            "--secret-file", secret, "--json", summary, "-q",
                            "--timeout", str(a.minutes * 60 * 3),
                            "--checkpoint-dir", os.path.join(work, "ckpt")],
                           stdout=log, stderr=subprocess.STDOUT)
    port = None
    for _ in range(200):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(log.name).read())
        if m:
            port = m.group(1)
            break
        time.sleep(0.1)
    if not port:
        sys.exit("soak: the scheduler did not start; see " + log.name)
    time.sleep(2)
    rss_start = rss_mb(run.pid)
    rss_seen = [rss_start]  # sampled every few seconds while the run lives
    joiners = {}  # rank -> Popen of the process now serving it after a join
    faults = []
    t0 = time.time()
    def wait(seconds):
        until = time.time() + seconds
        while time.time() < until and run.poll() is None:
            time.sleep(min(5, max(0, until - time.time())))
            r = rss_mb(run.pid)
            if r > 0:
                rss_seen.append(r)

    while time.time() - t0 < a.minutes * 60 and run.poll() is None:
        wait(min(a.interval, max(0, a.minutes * 60 - (time.time() - t0))))
        if run.poll() is not None or time.time() - t0 >= a.minutes * 60:
            break
        rank = rng.randint(1, 3)
        proc = joiners.get(rank)
        pid = proc.pid if proc and proc.poll() is None else node_pid(rank, port)
        if pid is None:
            continue
        os.kill(pid, signal.SIGKILL)
        faults.append((round(time.time() - t0), rank))
        print("soak: %4.0f s: killed node rank %d (pid %d)" % (time.time() - t0, rank, pid),
              flush=True)
        wait(5)  # declared lost after the heartbeat time-out
        joiners[rank] = subprocess.Popen(
            [a.binary, "node", "--join", "127.0.0.1:" + port, "--server", "node-%d" % rank,
             "--cluster", cl, "--secret-file", secret, "--heartbeat-timeout", "3",
             "--timeout", str(a.minutes * 60 * 3)], stdout=log, stderr=subprocess.STDOUT)
    minutes_run = (time.time() - t0) / 60
    print("soak: %d faults in %.1f min; waiting for the jobs left" % (len(faults), minutes_run),
          flush=True)
    while run.poll() is None:
        wait(5)
    code = run.wait()
    s = json.load(open(summary))
    lost_rounds = sum(j["lost_rounds"] for j in s["jobs"])
    unfinished = [j["id"] for j in s["jobs"] if not j["finished"]]
    print("exit code            %d" % code)
    print("rounds               %d (%.0f s of %.0f s rounds)" % (s["rounds"], s["seconds"], 2))
    print("faults               %d (kills, each followed by a join); lost ranks %s"
          % (len(faults), s["failed_ranks"]))
    print("joins                %d" % s["joins"])
    print("jobs                 %d, finished %d, lost %d" % (len(s["jobs"]), len(s["jobs"]) - len(unfinished),
                                                          len(unfinished)))
    print("job-rounds lost      %d in all, %.2f per fault (%.1f s of progress per fault)"
          % (lost_rounds, lost_rounds / max(1, len(faults)), 2.0 * lost_rounds / max(1, len(faults))))
    print("regressions          %d" % sum(j["regressions"] for j in s["jobs"]))
    print("scheduler RSS        %.1f MB at start, %.1f MB at the end (last sample), %.1f MB at most"
          % (rss_start, rss_seen[-1], max(rss_seen)))
    print("faults over          %.1f min" % minutes_run)
    print("work directory       " + work)
    return 0 if code == 0 and not unfinished else 1


if __name__ == "__main__":
    sys.exit(main())
