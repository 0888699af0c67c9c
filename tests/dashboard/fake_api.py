#!/usr/bin/env python3
"""A stand-in for `tessera serve`'s control API (docs/api.md), for testing the dashboard without
a cluster: it serves runtime/service/http/dashboard.html at / and /dashboard and canned JSON for a
cluster of 3 nodes (one lost), 5 jobs (running, finished, preempted, queued) and 20 rounds,
checking the bearer token as the server does (401 with a JSON error otherwise).

In a test (a thread of the test process):
    api = FakeApi(token="t").start()      # api.port; api.requests: [(method, path, auth)]
    ... point a browser at http://127.0.0.1:{api.port}/#token=t ...
    api.stop()

It also answers as an HTTP proxy would be asked (an absolute URL in the request line, or
CONNECT), so a browser told --proxy-server=127.0.0.1:PORT shows here every request it tries to
make to another host; `external` lists them (the dashboard must make none).
`page=bytes` serves another page; `job_overrides={id: {field: value}}` changes the canned
jobs (None removes a field, as an older server would); `extra_jobs=N` adds N queued jobs after
them (paging); `gone_after=N` drops every API request after the first N without an answer (a
server gone). `GET /v1/jobs` pages with `limit` and `after` as the server does.

As a process, for looking at the page by hand:
    python3 fake_api.py [--port 8080] [--token T]
"""

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "runtime", "service", "http", "dashboard.html")

ROUND_LENGTH = 10.0
CURRENT_ROUND = 19
NODES = [  # rank, name, gpu_type, gpus, speed, state
    (1, "s1", "v100", 4, 1.0, "alive"),
    (2, "s2", "p100", 2, 0.6, "alive"),
    (3, "s3", "k80", 2, 0.3, "lost"),   # lost after round 13
]
# Each job's parts: (first round, last round, copy, rank, gpus).
PARTS = {
    0: [(0, 19, 0, 1, 2)],
    1: [(0, 9, 0, 2, 1)],
    2: [(10, 19, 0, 1, 2), (10, 19, 1, 2, 2)],
    3: [(2, 13, 0, 3, 2)],
    4: [],
}
JOBS = [
    {"id": 0, "kind": "mlp", "job_type": "mlp", "scale": 2, "state": "running",
     "total_steps": 400, "steps": 300, "steps_per_second": 1.5, "loss": 0.412, "accuracy": 0.81,
     "arrival": 0.0, "first_start": 0.6, "finish": -1, "restarts": 0, "lost_rounds": 0,
     "program_failures": 0, "failure": "", "copies": 1, "checkpoint": "ckpt/job-0.r18.ckpt"},
    {"id": 1, "kind": "softmax_regression", "job_type": "softmax_regression", "scale": 1,
     "state": "finished", "total_steps": 200, "steps": 200, "steps_per_second": 0,
     "loss": 0.2031, "accuracy": 0.93, "arrival": 0.0, "first_start": 0.6, "finish": 100.4,
     "restarts": 0, "lost_rounds": 0, "program_failures": 0, "failure": "", "copies": 1,
     "checkpoint": "ckpt/job-1.r9.ckpt"},
    {"id": 2, "kind": "program", "job_type": "program", "scale": 2, "state": "running",
     "total_steps": 500, "steps": 120, "steps_per_second": 1.2, "loss": 1.087, "accuracy": 0,
     "arrival": 95.0, "first_start": 100.6, "finish": -1, "restarts": 0, "lost_rounds": 0,
     "program_failures": 0, "failure": "", "copies": 2, "checkpoint": "ckpt/job-2"},
    {"id": 3, "kind": "mlp", "job_type": "mlp", "scale": 2, "state": "preempted",
     "total_steps": 800, "steps": 330, "steps_per_second": 0.9, "loss": 0.735, "accuracy": 0.6,
     "arrival": 15.0, "first_start": 20.6, "finish": -1, "restarts": 1, "lost_rounds": 1,
     "program_failures": 0, "failure": "", "copies": 1, "checkpoint": "ckpt/job-3.r12.ckpt"},
    {"id": 4, "kind": "mlp", "job_type": "mlp", "scale": 4, "state": "queued",
     "total_steps": 600, "steps": 0, "steps_per_second": 0, "loss": 0, "accuracy": 0,
     "arrival": 150.0, "first_start": -1, "finish": -1, "restarts": 0, "lost_rounds": 0,
     "program_failures": 0, "failure": "", "copies": 1, "checkpoint": ""},
]


def assignments(rnd):
    """The parts of every job in round `rnd`, by job then copy."""
    return [{"job": job, "copy": copy, "rank": rank, "gpus": gpus}
            for job, parts in PARTS.items()
            for first, last, copy, rank, gpus in parts if first <= rnd <= last]


def waiting(rnd):
    """Jobs that had arrived by round `rnd`'s start, were not done and got no GPUs in it."""
    start, running = 0.5 + ROUND_LENGTH * rnd, {a["job"] for a in assignments(rnd)}
    return [j for j in JOBS if j["arrival"] <= start and j["id"] not in running
            and not 0 <= j["finish"] <= start]


def rounds():
    out = []
    for r in range(CURRENT_ROUND + 1):
        alive = sum(n[3] for n in NODES if n[5] == "alive" or r <= 13)
        busy = sum(a["gpus"] for a in assignments(r))
        out.append({"round": r, "start": 0.5 + ROUND_LENGTH * r, "length": ROUND_LENGTH,
                    "busy_gpus": busy, "idle_gpus": alive - busy,
                    "active_jobs": len({a["job"] for a in assignments(r)}),
                    "waiting_jobs": len(waiting(r)),
                    "dispatch_latency": 0.011 + 0.0005 * (r % 3), "assignments": assignments(r)})
    return out


def nodes():
    now = assignments(CURRENT_ROUND)
    return [{"rank": rank, "name": name, "gpu_type": gpu_type, "gpus": gpus, "speed": speed,
             "host": "h", "pid": 4240 + rank, "state": state,
             "assignment": [{"job": a["job"], "copy": a["copy"], "gpus": a["gpus"]}
                            for a in now if a["rank"] == rank]}
            for rank, name, gpu_type, gpus, speed, state in NODES]


def job(j, with_placements=False):
    out = dict(j)
    out["gpu_seconds"] = sum((last - first + 1) * gpus * ROUND_LENGTH
                             for first, last, _, _, gpus in PARTS.get(j["id"], []))
    if with_placements:
        out["placements"] = [{"round": r, "copy": a["copy"], "rank": a["rank"], "gpus": a["gpus"]}
                             for r in range(CURRENT_ROUND + 1) for a in assignments(r)
                             if a["job"] == j["id"]][-100:]
    return out


def cluster(jobs):
    counts = {}
    for j in jobs:
        counts[j.get("state", "?")] = counts.get(j.get("state", "?"), 0) + 1
    now = nodes()
    util = {}
    for n in now:
        if n["state"] == "alive":
            used = sum(a["gpus"] for a in n["assignment"])
            u = util.setdefault(n["gpu_type"], [0, 0])
            u[0], u[1] = u[0] + used, u[1] + n["gpus"]
    return {"policy": "max_min_fairness_perf", "round": CURRENT_ROUND,
            "round_length": ROUND_LENGTH, "uptime": 203.4,
            "nodes_alive": sum(1 for n in now if n["state"] == "alive"), "nodes": len(now),
            "gpus": sum(n["gpus"] for n in now), "jobs": counts,
            "utilisation": {t: used / total for t, (used, total) in util.items()},
            "shutting_down": False}


def with_overrides(j, overrides):
    """A copy of job `j` with `overrides` applied; a value None removes the field (an older
    server's answer)."""
    out = dict(j)
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


class FakeApi:
    def __init__(self, token, gone_after=None, port=0, job_overrides=None, page=None,
                 extra_jobs=0):
        self.token = token
        self.jobs = [with_overrides(j, (job_overrides or {}).get(j["id"], {})) for j in JOBS]
        self.jobs += [dict(JOBS[4], id=len(JOBS) + i) for i in range(extra_jobs)]  # queued
        self.gone_after = gone_after
        self.requests = []   # (method, path, Authorization header or None)
        self.external = []   # requests meant for another host (proxy form or CONNECT)
        self.api_answers = 0
        self.lock = threading.Lock()
        if page is None:
            with open(PAGE, "rb") as f:
                page = f.read()
        self.page = page
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def route(self, path, query):
        """(status, JSON body) of an authorised GET on the API."""
        if path == "/v1/cluster":
            return 200, cluster(self.jobs)
        if path == "/v1/jobs":
            state = query.get("state", [None])[0]
            chosen = [j for j in self.jobs if state in (None, j.get("state"))]
            if "limit" not in query and "after" not in query:
                return 200, {"jobs": [job(j) for j in chosen]}
            limit, after = int(query.get("limit", ["100"])[0]), int(query.get("after", ["-1"])[0])
            if not 0 < limit <= 1000 or after < 0 and "after" in query:
                return 400, {"error": "limit or after out of range"}
            page = sorted((j for j in chosen if j["id"] > after), key=lambda j: j["id"])
            more = len(page) > limit
            page = page[:limit]
            return 200, {"jobs": [job(j) for j in page], "next": page[-1]["id"] if more else None}
        if path.startswith("/v1/jobs/") and path[len("/v1/jobs/"):].isdigit():
            found = [j for j in self.jobs if j["id"] == int(path[len("/v1/jobs/"):])]
            return (200, job(found[0], True)) if found else (404, {"error": "no such job"})
        if path == "/v1/nodes":
            return 200, {"nodes": nodes()}
        if path == "/v1/rounds":
            try:
                limit = int(query.get("limit", ["50"])[0])
            except ValueError:
                return 400, {"error": "limit: not a number"}
            if not 0 < limit <= 1000:
                return 400, {"error": "limit: must be in [1, 1000]"}
            return 200, {"rounds": rounds()[-limit:]}
        return 404, {"error": f"no route {path}"}

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send(self, status, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def do_CONNECT(self):
                with api.lock:
                    api.external.append(("CONNECT", self.path))
                self.send(403, {"error": "no other hosts"})

            def do_GET(self):
                with api.lock:
                    api.requests.append(("GET", self.path, self.headers.get("Authorization")))
                    if not self.path.startswith("/"):
                        api.external.append(("GET", self.path))
                        return self.send(403, {"error": "no other hosts"})
                url = urlsplit(self.path)
                if url.path in ("/", "/dashboard"):
                    return self.send(200, api.page, "text/html; charset=utf-8")
                if self.headers.get("Authorization") != f"Bearer {api.token}":
                    return self.send(401, {"error": "missing or wrong bearer token"})
                with api.lock:
                    api.api_answers += 1
                    gone = api.gone_after is not None and api.api_answers > api.gone_after
                if gone:
                    self.close_connection = True
                    return  # no answer: the connection closes, as a dead server's would
                self.send(*api.route(url.path, parse_qs(url.query)))

        return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--token", default="0" * 64)
    args = p.parse_args()
    api = FakeApi(args.token, port=args.port).start()
    print(f"http://127.0.0.1:{api.port}/#token={args.token}", flush=True)
    api.thread.join()


if __name__ == "__main__":
    main()
