#!/usr/bin/env python3
"""`tessera serve` at scale (issue 35), one JSON line per measurement; not part of the suite.

--nodes N (default 64): `serve --local N --launcher fork` with N one-GPU servers and N cheap
  jobs (softmax_regression, 2,000 steps of 0.01 s) submitted through the API: seconds from the
  process's start until every node is alive, per-round dispatch latency and planning time
  p50/p99 over the rounds after the first (GET /v1/rounds), and the peak RSS (VmHWM) of the
  scheduler's process and of its largest node process.
--queued N (default 10000): `serve --local 3` (3 one-GPU servers) and N long jobs (100,000
  steps, so all but 3 stay queued) submitted in batches of 100: POST latency, then with the
  jobs queued: `GET /v1/jobs?limit=100` p50/p99 over 200 pages at random `after` (each a new
  cache key: the scheduler builds every one), the whole list's time and bytes, the planning
  time of the rounds with N jobs (policy --policy, default tessera), the journal's size; then
  `POST /v1/shutdown` until the process exits, and `serve --resume`: seconds from its start until the API lists N jobs again; and,
  when Chromium is installed, the dashboard loaded against the resumed cluster (its job rows
  and the wall time of the headless load).

usage: /usr/bin/python3 bench/serve_scale.py [--nodes 64] [--queued 10000] [--policy tessera]
                                             [--binary build/tessera] [--only nodes|queued]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_serve import Served  # noqa: E402


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else 0.0


def ms(x):
    return round(1000 * x, 2)


def peak_rss_mb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except OSError:
            pass
    return out


def cluster_toml(servers):
    return (f'[cluster]\nname = "scale"\n[[cluster.server]]\ngpu_type = "v100"\ngpus = 1\n'
            f"count = {servers}\n")


def jobs_body(n, steps):
    return json.dumps({"job": [{"kind": "softmax_regression", "total_steps": steps,
                                "step_time": 0.01} for _ in range(n)]})


def wait_for(pred, limit, step=0.05):
    until = time.monotonic() + limit
    while time.monotonic() < until:
        got = pred()
        if got:
            return got
        time.sleep(step)
    return None


def get_json(s, path):
    try:
        code, body = s.call("GET", path)
    except OSError:  # not listening (yet)
        return None
    return json.loads(body) if code == 200 else None


def rounds_figures(s, skip_first=True):
    rounds = (get_json(s, "/v1/rounds?limit=1000") or {}).get("rounds", [])
    if skip_first:
        rounds = rounds[1:]
    lat = [r["dispatch_latency"] for r in rounds if r.get("dispatch_latency", -1) >= 0]
    plan = [r["plan_seconds"] for r in rounds]
    return {"rounds": len(rounds), "dispatch_ms_p50": ms(percentile(lat, 0.5)),
            "dispatch_ms_p99": ms(percentile(lat, 0.99)), "plan_ms_p50": ms(percentile(plan, 0.5)),
            "plan_ms_p99": ms(percentile(plan, 0.99))}


def nodes_run(binary, n, d):
    start = time.monotonic()
    s = Served(binary, d, cluster=cluster_toml(n), local=n)
    try:
        def all_alive():
            c = get_json(s, "/v1/cluster")
            return c if c and c.get("nodes_alive") == n else None
        alive = wait_for(all_alive, 120)
        registered = time.monotonic() - start
        code, body = s.call("POST", "/v1/jobs", jobs_body(n, 2000))
        assert code == 201, body
        time.sleep(22)  # 2,000 steps of 0.01 s: 20 one-second rounds
        line = {"bench": "serve_scale", "mode": "nodes", "nodes": n, "all_alive": bool(alive),
                "registration_s": round(registered, 2)}
        line.update(rounds_figures(s))
        line["scheduler_rss_mb"] = round(peak_rss_mb(s.proc.pid), 1)
        line["node_rss_mb"] = round(max([peak_rss_mb(c) for c in children(s.proc.pid)] or [0]), 1)
        return line
    finally:
        s.stop()


def resume_time(binary, d, state, n):
    os.remove(os.path.join(state, "address"))  # the last run's: wait for the new one
    start = time.monotonic()
    s = Served(binary, d, state=state, cluster=cluster_toml(3), extra=["--resume"], local=3)

    def listed():
        c = get_json(s, "/v1/cluster")
        return c and sum(c.get("jobs", {}).values()) == n
    ok = wait_for(listed, 120)
    return s, (time.monotonic() - start if ok else -1)


def dashboard_load(s):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        return {"dashboard": "skipped: no chromium"}
    with tempfile.TemporaryDirectory() as prof:
        start = time.monotonic()
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            f"--user-data-dir={prof}", "--virtual-time-budget=3000", "--dump-dom",
                            f"http://{s.address}/#token={s.token}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=120)
        wall = time.monotonic() - start
    rows = len(re.findall(r'<tr data-job-id="\d+"', r.stdout))  # not the script's template
    return {"dashboard_rows": rows, "dashboard_load_s": round(wall, 2)}


def queued_run(binary, n, policy, d):
    s = Served(binary, d, cluster=cluster_toml(3), extra=["--policy", policy], local=3)
    try:
        posts = []
        for _ in range(n // 100):
            t0 = time.monotonic()
            code, body = s.call("POST", "/v1/jobs", jobs_body(100, 100000))
            posts.append(time.monotonic() - t0)
            assert code == 201, body
        all_in = get_json(s, "/v1/cluster")["round"] + 1  # the first round with every job
        time.sleep(5)
        rng = random.Random(1)
        pages = []
        for _ in range(200):
            t0 = time.monotonic()
            page = get_json(s, f"/v1/jobs?limit=100&after={rng.randrange(n - 100)}")
            pages.append(time.monotonic() - t0)
            assert page and len(page["jobs"]) == 100
        t0 = time.monotonic()
        code, whole = s.call("GET", "/v1/jobs")
        whole_s = time.monotonic() - t0
        line = {"bench": "serve_scale", "mode": "queued", "jobs": n, "policy": policy,
                "post_100_ms_p50": ms(percentile(posts, 0.5)),
                "post_100_ms_p99": ms(percentile(posts, 0.99)),
                "list_page_ms_p50": ms(percentile(pages, 0.5)),
                "list_page_ms_p99": ms(percentile(pages, 0.99)),
                "list_all_ms": ms(whole_s), "list_all_mb": round(len(whole) / 2**20, 2)}
        rounds = (get_json(s, "/v1/rounds?limit=1000") or {}).get("rounds", [])
        full = [r["plan_seconds"] for r in rounds if r["round"] >= all_in]
        line.update(plan_ms_p50_all_in=ms(percentile(full, 0.5)),
                    plan_ms_p99_all_in=ms(percentile(full, 0.99)), rounds_all_in=len(full),
                    scheduler_rss_mb=round(peak_rss_mb(s.proc.pid), 1))
        t0 = time.monotonic()
        code, _ = s.call("POST", "/v1/shutdown")
        s.proc.wait(120)
        line["shutdown_s"] = round(time.monotonic() - t0, 2)  # round end, summaries, exit
        line["journal_mb"] = round(os.path.getsize(os.path.join(s.state, "journal")) / 2**20, 2)
    finally:
        s.stop()
    s2, resumed = resume_time(binary, d, s.state, n)
    try:
        line["resume_s"] = round(resumed, 2)
        line.update(dashboard_load(s2))
    finally:
        s2.stop()
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--queued", type=int, default=10000)
    ap.add_argument("--policy", default="tessera")
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                     "tessera"))
    ap.add_argument("--only", choices=["nodes", "queued"])
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    with tempfile.TemporaryDirectory() as d:
        if a.only in (None, "nodes"):
            os.makedirs(os.path.join(d, "n"))
            print(json.dumps(nodes_run(binary, a.nodes, os.path.join(d, "n"))), flush=True)
        if a.only in (None, "queued"):
            os.makedirs(os.path.join(d, "q"))
            print(json.dumps(queued_run(binary, a.queued, a.policy, os.path.join(d, "q"))),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
