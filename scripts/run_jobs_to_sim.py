#!/usr/bin/env python3
"""Turns a `tessera run` job set and its cluster into the simulator's inputs, so a run and a
simulation of the same jobs can be compared (docs/benchmarks/runtime.md, "The README run and
its simulation, side by side").

usage: run_jobs_to_sim.py CLUSTER.toml JOBS.toml OUT_DIR
Writes OUT_DIR/jobs.toml (job_type, scale_factor, total_steps, arrival, id per [[job]]) and
OUT_DIR/throughputs.json (Gavel's table layout). The rates follow the run's model
(actors/run_rates.hpp): a job of step_time s does 1/s steps/s on a speed-1.0 GPU of every
type of the cluster; the cluster's speed factors then scale it in the simulator as they do
in the run. Each job gets its own job type "<kind> @<step_time>s #<id>"."""

import json
import os
import sys
import tomllib


def main(cluster_path, jobs_path, out_dir):
    with open(cluster_path, "rb") as f:
        cluster = tomllib.load(f)
    with open(jobs_path, "rb") as f:
        jobs = tomllib.load(f).get("job", [])
    types = sorted({s["gpu_type"].lower() for s in cluster["cluster"]["server"]})
    table = {t: {} for t in types}
    lines = []
    for i, j in enumerate(jobs):
        if "step_time" not in j or "total_steps" not in j:
            print(f"{jobs_path}: job {i}: field 'step_time' or 'total_steps' missing",
                  file=sys.stderr)
            return 2
        scale = int(j.get("scale_factor", 1))
        name = f"{j.get('kind', 'job')} @{j['step_time']}s #{i}"
        for t in types:
            table[t][f"('{name}', {scale})"] = {"null": 1.0 / float(j["step_time"])}
        lines += ["[[job]]", f"id = {i}", f'job_type = "{name}"', f"scale_factor = {scale}",
                  f"total_steps = {int(j['total_steps'])}",
                  f"arrival = {float(j.get('arrival', 0.0))}", ""]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "jobs.toml"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out_dir, "throughputs.json"), "w") as f:
        json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
