#!/usr/bin/env python3
"""How long a resize takes under torchrun: the baseline for tessera's own resize.

Runs bench/torchrun_resize_worker.py (examples/pytorch_elastic/train.py's CNN on the digits,
DDP over gloo, checkpoint every 50 steps, resume on every start) under

    torchrun --nnodes=1:3 --nproc-per-node=1 --rdzv-backend=c10d
             --rdzv-endpoint=127.0.0.1:PORT --rdzv-id=ID --max-restarts=5 WORKER ...

with each "node" a separate torchrun agent process (its own session) on this host, and measures
from the workers' trace (one JSON line per step with time.time(), rank and world size):

  scale_up            2 agents stepping; a third agent is started at T; T -> first step of the
                      group with world size 3.
  scale_down_sigkill  3 agents stepping; the newest agent's node dies at T (SIGKILL to the
                      agent's process group and to its worker, which torchrun starts in a session
                      of its own); T -> first step of the re-formed group (world size 2).
  scale_down_sigterm  the same, but SIGTERM to the agent only (a graceful leave: the agent stops
                      its worker and exits).
  baseline            a fresh process run on its own (no torchrun) from launch to its first step
                      (python start, import torch, data, model, optimizer), and the same under a
                      one-node `torchrun --standalone`.

Each job (one repetition) goes 2 -> 3 (up) -> 2 (SIGKILL) -> 3 (up) -> 2 (SIGTERM), so a
repetition gives two scale-ups. The agent removed is always the newest one: the first agent to
bind PORT hosts the c10d rendezvous store, and when it goes every other agent fails with it.

Each event also reports where the time went, relative to T: the agents' log line that saw it
("Detected N new nodes" / "Worker group FAILED"), "Rendezvous complete", the new workers'
process start, `import torch` done, process group up, model+optimizer built, ready, first step;
and whether any worker of the old group survived into the new one (none do: torchrun restarts
every worker on any membership change), and the steps lost to the checkpoint.

By default the agents run with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: with torch 2.15's default
(the agents share their TCPStore with the workers) a scale-up deadlocks (the joining agent waits
for the master address that the old rank-0 agent never republishes for the new round) until the
60 s store timeout, and then every agent of the job exits. --extras reproduces that once.

Usage (stdlib only; run it with the venv's python so that torchrun and torch are found):
    /work/venvs/torchrun/bin/python bench/torchrun_resize.py --reps 3 --out /tmp/torchrun_resize.json
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torchrun_resize_worker.py")
AGENT_LINE = re.compile(r"^([IWE])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) +(\d+) \S+\] (.*)$")


def load1():
    return round(os.getloadavg()[0], 2)


def wait_for_load(max_load, max_wait, log):
    t0 = time.time()
    while load1() >= max_load and time.time() - t0 < max_wait:
        time.sleep(10)
    waited = round(time.time() - t0, 1)
    log(f"load {load1()} after waiting {waited} s")
    return {"load1": load1(), "waited_s": waited}


class Trace:
    """The workers' shared JSON-lines trace, read incrementally."""

    def __init__(self, path):
        self.path, self.offset, self.events = path, 0, []

    def poll(self):
        if not os.path.exists(self.path):
            return self.events
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass
        self.offset += end
        return self.events

    def steps(self, since=0.0):
        return [e for e in self.poll() if e["ev"] == "step" and e["t"] > since]


def descendants(pid):
    """pids of all descendants of pid (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def agent_events(path):
    """(time.time(), level, pid, message) of each line of a torchrun agent's log."""
    out = []
    year = time.localtime().tm_year
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = AGENT_LINE.match(line)
                if not m:
                    continue
                lvl, mo, dd, hh, mi, ss, frac, pid, msg = m.groups()
                t = time.mktime((year, int(mo), int(dd), int(hh), int(mi), int(ss), 0, 0, -1))
                out.append((t + int(frac) / 10 ** len(frac), lvl, int(pid), msg))
    except OSError:
        pass
    return out


class Job:
    """One torchrun job: its agents, trace, checkpoint and rendezvous port."""

    def __init__(self, args, name, port, share_store=False, last_call=None):
        self.args, self.name, self.port = args, name, port
        self.dir = tempfile.mkdtemp(prefix=f"torchrun_resize_{name}_", dir=args.workdir)
        self.trace = Trace(os.path.join(self.dir, "trace.jsonl"))
        self.agents = []  # dicts: name, proc, log
        self.env = dict(os.environ, LOGLEVEL="INFO", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                  "TESSERA_LEASE", "TESSERA_LEASE_TOKEN"):
            self.env.pop(k, None)
        if share_store:
            self.env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
        else:
            self.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        last_call = args.last_call_timeout if last_call is None else last_call
        self.cmd = [args.torchrun, "--nnodes=1:3", "--nproc-per-node=1",
                    "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                    f"--rdzv-id={name}", "--max-restarts=5"]
        if last_call:
            self.cmd.append(f"--rdzv-conf=last_call_timeout={last_call}")
        self.cmd += [WORKER, "--trace-file", self.trace.path,
                     "--ckpt-file", os.path.join(self.dir, "ckpt.pt"),
                     "--step-sleep", str(args.step_sleep)]

    def start_agent(self):
        name = f"agent{len(self.agents)}"
        logf = open(os.path.join(self.dir, name + ".log"), "wb")
        proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True, cwd=self.dir)
        a = {"name": name, "proc": proc, "log": logf.name, "alive": True}
        self.agents.append(a)
        return a

    def alive_agents(self):
        return [a for a in self.agents if a["alive"] and a["proc"].poll() is None]

    def kill_node(self, a, how):
        """how: 'sigkill' (agent's process group + all its descendants), 'sigterm' (agent
        only), 'sigkill-pgid' (the agent's process group only)."""
        pid = a["proc"].pid
        desc = descendants(pid)
        t = time.time()
        if how == "sigterm":
            os.kill(pid, signal.SIGTERM)
        else:
            os.killpg(pid, signal.SIGKILL)
            if how == "sigkill":
                for d in desc:
                    try:
                        os.kill(d, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        a["alive"] = False
        a["descendants"] = desc
        return t

    def teardown(self):
        for a in self.agents:
            desc = descendants(a["proc"].pid) if a["proc"].poll() is None else []
            try:
                os.killpg(a["proc"].pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for d in desc + a.get("descendants", []):
                try:
                    os.kill(d, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                a["proc"].wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def agent_log_events(self, since):
        out = []
        for a in self.agents:
            out += [(t, a["name"], msg) for t, _, _, msg in agent_events(a["log"]) if t > since]
        return sorted(out)

    def wait_world(self, world, since, min_steps, timeout):
        """Wait until every rank of a group of `world` has made min_steps steps after `since`.
        Returns the first such step event, or None on timeout."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            st = [e for e in self.trace.steps(since) if e["world"] == world]
            per_rank = {}
            for e in st:
                per_rank[e["rank"]] = per_rank.get(e["rank"], 0) + 1
            if len(per_rank) == world and min(per_rank.values()) >= min_steps:
                return min(st, key=lambda e: e["t"])
            if not self.alive_agents():
                return None
            time.sleep(0.2)
        return None


def analyse(job, T, old_world, new_world, first):
    """The interval from T to the first step of the new group, and its breakdown."""
    ev = job.trace.poll()
    old_steps = [e for e in ev if e["ev"] == "step" and e["world"] == old_world
                 and T - 3 < e["t"] < first["t"]]
    old_pids = {e["pid"] for e in old_steps}
    new = [e for e in ev if e["t"] > T and e["pid"] not in old_pids]
    new_steps = [e for e in new if e["ev"] == "step" and e["world"] == new_world]
    new_pids = {e["pid"] for e in new_steps}
    first_per_rank = {}
    for e in new_steps:
        if e["pid"] not in first_per_rank or e["t"] < first_per_rank[e["pid"]]["t"]:
            first_per_rank[e["pid"]] = e

    def rel(t):
        return None if t is None else round(t - T, 3)

    def phase(name, agg):
        ts = [e["t"] for e in new if e["ev"] == name and e["pid"] in new_pids]
        return rel(agg(ts)) if ts else None

    last_old = max(old_steps, key=lambda e: e["t"]) if old_steps else None
    agent_ev = job.agent_log_events(T)
    seen = next((t for t, _, m in agent_ev
                 if m.startswith("[default] Detected") or "Worker group FAILED" in m), None)
    rdzv = next((t for t, _, m in agent_ev if "Rendezvous complete for workers" in m), None)
    ready_step = min(e["step"] for e in first_per_rank.values()) - 1  # the step it resumed at
    return {
        "interval_s": rel(first["t"]),  # T -> first step on the new placement
        "all_ranks_stepped_s": rel(max(e["t"] for e in first_per_rank.values())),
        "stall_s": round(first["t"] - last_old["t"], 3) if last_old else None,
        "old_group_last_step_s": rel(last_old["t"]) if last_old else None,
        "agent_saw_it_s": rel(seen),
        "rendezvous_complete_s": rel(rdzv),
        "workers_spawned_s": phase("start", min),
        "import_torch_done_s": phase("imported", max),
        "process_group_up_s": phase("pg", max),
        "model_optimizer_built_s": phase("built", max),
        "ready_s": phase("ready", max),
        "old_workers_surviving": sorted(old_pids & new_pids),
        "old_pids": sorted(old_pids), "new_pids": sorted(new_pids),
        "new_restart_count": sorted({e["restart"] for e in new_steps}),
        "resumed_at_step": ready_step,
        "steps_lost": (last_old["step"] - ready_step) if last_old else None,
        "load1_at_T": job.load_at_T,
    }


def event(job, log, kind, old_world, new_world, act, timeout):
    job.trace.poll()
    job.load_at_T = load1()
    T = act()
    first = job.wait_world(new_world, T, job.args.settle_steps, timeout)
    if first is None:
        log(f"{kind}: no step with world {new_world} within {timeout} s")
        return {"kind": kind, "error": f"no world-{new_world} step within {timeout} s",
                "load1_at_T": job.load_at_T}
    r = {"kind": kind, **analyse(job, T, old_world, new_world, first)}
    log(f"{kind}: {r['interval_s']} s (rendezvous {r['rendezvous_complete_s']}, spawned "
        f"{r['workers_spawned_s']}, imported {r['import_torch_done_s']}, load {r['load1_at_T']})")
    return r


def run_job(args, rep, log):
    job = Job(args, f"rep{rep}_{os.getpid()}", args.port + rep)
    res = {"rep": rep, "dir": job.dir, "cmd": job.cmd, "events": []}
    try:
        res["load_before"] = wait_for_load(args.max_load, args.max_wait, log)
        t0 = time.time()
        job.start_agent()
        job.start_agent()
        first = job.wait_world(2, t0, args.settle_steps, args.timeout)
        if first is None:
            res["error"] = "the first two agents did not step"
            return res
        res["cold_start_2_agents_s"] = round(first["t"] - t0, 3)
        log(f"rep {rep}: 2 agents stepping after {res['cold_start_2_agents_s']} s")
        for kind, old, new, act in [
                ("scale_up", 2, 3, lambda: (time.time(), job.start_agent())[0]),
                ("scale_down_sigkill", 3, 2, lambda: job.kill_node(job.alive_agents()[-1], "sigkill")),
                ("scale_up", 2, 3, lambda: (time.time(), job.start_agent())[0]),
                ("scale_down_sigterm", 3, 2, lambda: job.kill_node(job.alive_agents()[-1], "sigterm"))]:
            time.sleep(args.settle_s)
            r = event(job, log, kind, old, new, act, args.timeout)
            res["events"].append(r)
            if "error" in r:
                break
        return res
    finally:
        job.teardown()
        res["load_after"] = load1()


def baseline(args, log):
    """A fresh process alone (no torchrun), and under a one-node `torchrun --standalone`, from
    launch to its first step."""
    out = {"bare": [], "torchrun_standalone": []}
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
              "TESSERA_LEASE", "TESSERA_LEASE_TOKEN"):
        env.pop(k, None)
    python = os.path.join(os.path.dirname(args.torchrun), "python")
    for i in range(args.reps):
        for kind in ("bare", "torchrun_standalone"):
            d = tempfile.mkdtemp(prefix=f"torchrun_resize_base{i}_", dir=args.workdir)
            trace = os.path.join(d, "trace.jsonl")
            wargs = [WORKER, "--trace-file", trace, "--ckpt-file", os.path.join(d, "ckpt.pt"),
                     "--steps", "20", "--step-sleep", str(args.step_sleep)]
            cmd = [python] + wargs if kind == "bare" else \
                [args.torchrun, "--standalone", "--nnodes=1", "--nproc-per-node=1"] + wargs
            load = load1()
            T = time.time()
            subprocess.run(cmd, env=env, cwd=d, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=300)
            ev = [json.loads(l) for l in open(trace)]

            def at(name):
                ts = [e["t"] for e in ev if e["ev"] == name]
                return round(min(ts) - T, 3) if ts else None
            r = {"interval_s": at("step"), "process_start_s": at("start"),
                 "import_torch_done_s": at("imported"), "model_optimizer_built_s": at("built"),
                 "ready_s": at("ready"), "load1_at_T": load, "cmd": cmd}
            out[kind].append(r)
            log(f"baseline {kind}: {r['interval_s']} s (import done {r['import_torch_done_s']}, "
                f"load {load})")
            shutil.rmtree(d, ignore_errors=True)
    return out


def extras(args, log):
    """One-off observations: (a) the default shared TCPStore on a scale-up, (b) SIGKILL of an
    agent's process group only (its worker lives on in its own session), (c) the agent that
    hosts the rendezvous store leaving."""
    out = {}
    # (a) torch's default (TCPStore shared with the workers)
    job = Job(args, f"share_{os.getpid()}", args.port + 50, share_store=True)
    try:
        wait_for_load(args.max_load, args.max_wait, log)
        t0 = time.time()
        job.start_agent()
        job.start_agent()
        if job.wait_world(2, t0, args.settle_steps, args.timeout) is None:
            out["shared_store_scale_up"] = {"error": "the first two agents did not step"}
        else:
            time.sleep(args.settle_s)
            T = time.time()
            job.start_agent()
            first = job.wait_world(3, T, 1, 120)
            exits = {}
            deadline = time.time() + 30
            while time.time() < deadline and len(exits) < len(job.agents):
                for a in job.agents:
                    if a["name"] not in exits and a["proc"].poll() is not None:
                        exits[a["name"]] = round(time.time() - T, 1)
                time.sleep(0.2)
            out["shared_store_scale_up"] = {
                "world3_step_s": round(first["t"] - T, 3) if first else None,
                "agents_exited_by_s": exits,  # seconds after T (to 0.2 s, or the 120 s wait)
                "exit_codes": {a["name"]: a["proc"].poll() for a in job.agents},
                "last_step_s": round(max(e["t"] for e in job.trace.steps()) - T, 3),
                "agent_errors": sorted({line.strip()[:200] for a in job.agents
                                        for line in open(a["log"], errors="replace")
                                        if re.search(r"DistStoreError|wait timeout|"
                                                     r"RendezvousConnectionError", line)
                                        and not line.startswith("[rank")})[:6]}
            log(f"extras shared store: {out['shared_store_scale_up']}")
    finally:
        job.teardown()
    # (b) + (c)
    job = Job(args, f"extra_{os.getpid()}", args.port + 60)
    try:
        wait_for_load(args.max_load, args.max_wait, log)
        t0 = time.time()
        job.start_agent()
        job.start_agent()
        if job.wait_world(2, t0, args.settle_steps, args.timeout) is None:
            out["pgid_only"] = {"error": "the first two agents did not step"}
            return out
        time.sleep(args.settle_s)
        job.start_agent()
        if job.wait_world(3, time.time() - 1, args.settle_steps, args.timeout) is None:
            out["pgid_only"] = {"error": "no world 3"}
            return out
        time.sleep(args.settle_s)
        a = job.alive_agents()[-1]
        T = job.kill_node(a, "sigkill-pgid")
        time.sleep(20)
        st = job.trace.steps(T)
        orphan = a["descendants"]
        out["pgid_only"] = {
            "worker_pids_in_other_session": orphan,
            "steps_in_20s_after_kill": {str(w): len([e for e in st if e["world"] == w])
                                        for w in (2, 3)},
            "orphan_still_stepping": any(e["pid"] in orphan for e in st[-30:]),
        }
        # the orphaned worker dies too: the survivors re-form at world 2
        job.load_at_T = load1()

        def kill_orphan():
            t = time.time()
            for d in orphan:
                try:
                    os.kill(d, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return t
        T2 = kill_orphan()
        first = job.wait_world(2, T2, args.settle_steps, args.timeout)
        out["pgid_only"]["orphan_killed_to_world2_s"] = round(first["t"] - T2, 3) if first else None
        log(f"extras pgid only: {out['pgid_only']}")
        # (c) the store host leaves
        ss = subprocess.run(["ss", "-ltnpH", f"sport = :{job.port}"], capture_output=True,
                            text=True).stdout
        host = next((a for a in job.alive_agents() if f"pid={a['proc'].pid}," in ss), None)
        if host is None:
            out["store_host_leaves"] = {"error": "could not tell which agent hosts the store"}
            return out
        live = job.alive_agents()
        T3 = job.kill_node(host, "sigterm")
        first = job.wait_world(1, T3, args.settle_steps, 90)
        exits = {}
        deadline = time.time() + 60
        while time.time() < deadline and len(exits) < len(live):
            for a in live:
                if a["name"] not in exits and a["proc"].poll() is not None:
                    exits[a["name"]] = round(time.time() - T3, 1)
            time.sleep(0.2)
        out["store_host_leaves"] = {
            "host": host["name"], "signal": "SIGTERM",
            "world1_step_s": round(first["t"] - T3, 3) if first else None,
            "agents_alive_after": [a["name"] for a in job.agents if a["proc"].poll() is None],
            "agents_exited_by_s": exits,
            "agent_exit_codes": {a["name"]: a["proc"].poll() for a in job.agents},
        }
        log(f"extras store host leaves: {out['store_host_leaves']}")
        return out
    finally:
        job.teardown()


def med(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torchrun", default="/work/venvs/torchrun/bin/torchrun")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--port", type=int, default=29700, help="rendezvous port of the first job")
    ap.add_argument("--last-call-timeout", type=int, default=None,
                    help="--rdzv-conf last_call_timeout (default: torch's, 30 s)")
    ap.add_argument("--step-sleep", type=float, default=0.02)
    ap.add_argument("--settle-steps", type=int, default=10,
                    help="steps every rank of a new group makes before the next event")
    ap.add_argument("--settle-s", type=float, default=3.0, help="seconds between events")
    ap.add_argument("--timeout", type=float, default=180, help="per event")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="wait (sleep) before each job until the 1-min load is below it")
    ap.add_argument("--max-wait", type=float, default=900, help="at most this long, then go on")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--extras", action="store_true", help="also the one-off observations")
    ap.add_argument("--workdir", default=None, help="where the jobs' folders go (default: /tmp)")
    ap.add_argument("--out", help="write the JSON here too")
    args = ap.parse_args()

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    import importlib.metadata
    meta = {"torch": importlib.metadata.version("torch"), "python": sys.version.split()[0],
            "torchrun": args.torchrun, "host_cpus": os.cpu_count(),
            "last_call_timeout": args.last_call_timeout or "default (30 s)",
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "step_sleep_s": args.step_sleep,
            "ckpt_every_steps": 50, "load1_start": load1(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    result = {"meta": meta}
    if not args.no_baseline:
        wait_for_load(args.max_load, args.max_wait, log)
        result["baseline"] = baseline(args, log)
    reps = [run_job(args, i, log) for i in range(args.reps)]
    result["reps"] = reps
    by_kind = {}
    for r in reps:
        for e in r["events"]:
            by_kind.setdefault(e["kind"], []).append(e)
    keys = ["interval_s", "all_ranks_stepped_s", "stall_s", "agent_saw_it_s",
            "rendezvous_complete_s", "workers_spawned_s", "import_torch_done_s",
            "process_group_up_s", "model_optimizer_built_s", "ready_s", "steps_lost", "load1_at_T"]
    result["medians"] = {k: {key: med([e.get(key) for e in v]) for key in keys} | {"n": len(v)}
                         for k, v in by_kind.items()}
    result["medians"]["cold_start_2_agents"] = {
        "interval_s": med([r.get("cold_start_2_agents_s") for r in reps])}
    if "baseline" in result:
        for k, v in result["baseline"].items():
            result["medians"]["baseline_" + k] = {
                key: med([e.get(key) for e in v]) for key in
                ("interval_s", "import_torch_done_s", "model_optimizer_built_s", "load1_at_T")}
    result["per_rep_interval_s"] = {k: [e.get("interval_s") for e in v]
                                    for k, v in by_kind.items()}
    if args.extras:
        result["extras"] = extras(args, log)
    meta["load1_end"] = load1()
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
