#!/usr/bin/env python3
"""The dashboard against a live cluster: `tessera serve --local 3` with jobs running, the page
loaded in headless Chromium (real time, not virtual: the cluster's rounds go on meanwhile),
its DOM read back and checked against the API's own answers: every node appears with its
state, the jobs the API shows running appear running, every job has its row.

usage: /usr/bin/python3 tests/dashboard/test_dashboard_live.py TESSERA_BINARY [--screenshot PATH]
Exits 77 (ctest's SKIP_RETURN_CODE) when no Chromium is installed."""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from timescale import scaled  # noqa: E402

from test_dashboard import CHROMIUM, QUIET, Dom  # noqa: E402

CLUSTER = """[cluster]
name = "live"
[[cluster.server]]
name = "fast"
gpu_type = "v100"
gpus = 2
speed = 1.0
[[cluster.server]]
name = "medium"
gpu_type = "p100"
gpus = 2
speed = 0.5
[[cluster.server]]
name = "slow"
gpu_type = "k80"
gpus = 2
speed = 0.25
"""


def jobs_toml(n):
    return "".join(f'[[job]]\nkind = "{"mlp" if i % 2 else "softmax_regression"}"\n'
                   f'total_steps = {100000 if i < 4 else 60}\nstep_time = 0.02\n'
                   f'scale_factor = {1 + i % 2}\n\n' for i in range(n))


def api(address, token, path):
    req = urllib.request.Request(f"http://{address}{path}",
                                 headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def main():
    if not CHROMIUM:
        print("skipped: no chromium (apt-get install chromium)")
        return 77
    binary = sys.argv[1]
    shot = sys.argv[sys.argv.index("--screenshot") + 1] if "--screenshot" in sys.argv else None
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/cluster.toml", "w") as f:
            f.write(CLUSTER)
        with open(f"{d}/jobs.toml", "w") as f:
            f.write(jobs_toml(6))
        state = f"{d}/state"
        log = open(f"{d}/serve.log", "w")
        serve = subprocess.Popen([binary, "serve", "--local", "3", "--cluster",
                                  f"{d}/cluster.toml", "--state-dir", state, "--jobs",
                                  f"{d}/jobs.toml", "--round-length", "1", "--policy", "max_min_fairness_perf"],
                                 stdout=log, stderr=subprocess.STDOUT)
        try:
            return check(serve, state, d, shot)
        finally:
            if serve.poll() is None:
                serve.terminate()
                serve.wait(60)
            log.close()


def check(serve, state, d, shot):
    deadline = time.time() + scaled(60)
    while not os.path.exists(f"{state}/address") and time.time() < deadline:
        time.sleep(0.2)
    address = open(f"{state}/address").read().split()[0]
    token = open(f"{state}/token").read().split()[0]
    # Let a few rounds run so the timeline has columns, and wait for the short jobs to end:
    # on a loaded host they may still be queued at round 4, and the check below expects
    # only long jobs to run.
    def settled():
        if api(address, token, "/v1/cluster")["round"] < 4:
            return False
        return all(j["state"] == "finished" for j in api(address, token, "/v1/jobs")["jobs"]
                   if j["total_steps"] <= 1000)
    while not settled() and time.time() < deadline:
        time.sleep(0.5)
    url = f"http://{address}/#token={token}"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              *QUIET, f"--user-data-dir={d}/profile", "--window-size=1280,900",
              "--virtual-time-budget=3000", "--run-all-compositor-stages-before-draw"]
    dom_text = subprocess.run([*common, "--dump-dom", url], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=scaled(120)).stdout
    jobs = api(address, token, "/v1/jobs")["jobs"]
    nodes = api(address, token, "/v1/nodes")["nodes"]
    dom = Dom(dom_text)
    failures = []
    status = dom.by_id("status")["attrs"].get("data-status")
    if status != "ok":
        failures.append(f"status {status}")
    rows = {int(e["attrs"]["data-job-id"]): e["attrs"]["data-state"]
            for e in dom.find(data_job_id=None) if e["tag"] == "tr"}
    if sorted(rows) != sorted(j["id"] for j in jobs):
        failures.append(f"job rows {sorted(rows)} vs {[j['id'] for j in jobs]}")
    running_api = {j["id"] for j in jobs if j["state"] == "running"}
    running_dom = {i for i, s in rows.items() if s == "running"}
    # The page polled a moment before the API was asked here; a round may have changed who
    # runs, so the long jobs (always placed or preempted, never ended) are compared as a set.
    if not running_dom or not running_dom <= {j["id"] for j in jobs if j["total_steps"] > 1000}:
        failures.append(f"running in the page {running_dom}, in the API {running_api}")
    ranks = {int(e["attrs"]["data-node-rank"]): e["attrs"]["data-node-state"]
             for e in dom.find(data_node_rank=None)}
    if ranks != {n["rank"]: n["state"] for n in nodes}:
        failures.append(f"nodes {ranks}")
    cells = dom.find(data_round=None)
    if not cells:
        failures.append("no timeline cell")
    if shot:
        subprocess.run([*common, f"--screenshot={shot}", url], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=scaled(120))
    subprocess.run([serve.args[0], "shutdown", "--state-dir", state], check=True,
                   stdout=subprocess.PIPE)
    code = serve.wait(60)
    if code != 0:
        failures.append(f"serve exited {code}")
    for f in failures:
        print("FAILED:", f)
    print(f"{len(rows)} job rows, {len(running_dom)} running, {len(ranks)} nodes, "
          f"{len(cells)} timeline cells")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
